//! NoExecute device taints on devices of prepared claims, as the
//! devicetainteviction controller acts on them (the decision is
//! [`super::allocator::taints::evictions`]; this is its shell: when each
//! taint was first seen, the `pod-evicted` events).

use super::*;

impl DraManager {
    /// Pods a NoExecute device taint evicts now (devicetainteviction): for
    /// every prepared claim, [`allocator::taints::evictions`] on its
    /// allocation; a tolerationSeconds eviction is due that long after it
    /// was first seen. Each is reported (`pod-evicted`); the caller deletes
    /// the pods through the pod lifecycle.
    pub fn tainted_pods(&self) -> Vec<String> {
        let mut st = self.lock();
        let cands = self.candidates(&mut st);
        let rules = allocator::Catalog::of(st.objects.values()).rules;
        let now = std::time::Instant::now();
        let mut due = Vec::new();
        let mut pending = Vec::new();
        for c in st.claims.values() {
            for e in allocator::taints::evictions(&c.allocation, &cands, &rules) {
                let device = format!("{}/{}/{}", e.device.driver, e.device.pool, e.device.device);
                let t = e.taint;
                let taint = format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect);
                let claim = format!("{}/{}", c.namespace, c.name);
                let key = format!("{} {device} {taint}", c.uid);
                for pod in &c.pods {
                    pending.push((
                        key.clone(),
                        e.after_seconds,
                        pod.clone(),
                        claim.clone(),
                        device.clone(),
                        taint.clone(),
                    ));
                }
            }
        }
        let live: std::collections::BTreeSet<String> = pending.iter().map(|p| p.0.clone()).collect();
        st.taint_seen.retain(|k, _| live.contains(k));
        for (key, after, pod, claim, device, taint) in pending {
            let first = *st.taint_seen.entry(key).or_insert(now);
            let ripe = after.is_none_or(|s| now >= first + Duration::from_secs(s.unsigned_abs()));
            if ripe && !due.contains(&pod) {
                due.push(pod.clone());
                self.event(KubeletEvent::PodEvicted {
                    pod,
                    claim,
                    device,
                    taint,
                    reason: "DeviceTaintManagerEviction".into(),
                });
            }
        }
        due
    }
}
