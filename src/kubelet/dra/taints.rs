//! NoExecute device taints on devices of prepared claims, as the
//! devicetainteviction controller acts on them (the decision is
//! [`super::allocator::taints::evictions`] and
//! [`super::allocator::taints::Eviction::when`]; this is its shell: the wall
//! clock, when each taint without a timeAdded was first seen, the
//! `pod-evicted` events).

use super::*;
use std::time::SystemTime;

/// The condition devicetainteviction sets on a pod it evicts before deleting
/// it (device_taint_eviction.go, deletePod: `DisruptionTarget=True`), its
/// reason and message; the same in 1.36 and 1.37.
pub const EVICTION_CONDITION: &str = "DisruptionTarget";
/// The condition's reason.
pub const EVICTION_REASON: &str = "DeletionByDeviceTaintManager";
/// The condition's message.
pub const EVICTION_MESSAGE: &str = "Device Taint manager: deleting due to NoExecute taint";

impl DraManager {
    /// Pods a NoExecute device taint evicts now (devicetainteviction): for
    /// every prepared claim, [`allocator::taints::evictions`] on its
    /// allocation, each due at its taint's timeAdded plus the toleration's
    /// seconds (a taint without timeAdded counts from when it was first
    /// seen). Each is reported (`pod-evicted`); the caller deletes the pods
    /// through the pod lifecycle.
    pub fn tainted_pods(&self) -> Vec<String> {
        let now = SystemTime::now();
        let mut st = self.lock();
        let cands = self.candidates(&mut st);
        let rules = allocator::Catalog::of(st.objects.values()).rules;
        let mut due = Vec::new();
        let mut pending = Vec::new();
        let mut live = BTreeSet::new();
        for c in st.claims.values() {
            for e in allocator::taints::evictions(&c.allocation, &cands, &rules) {
                let device = format!("{}/{}/{}", e.device.driver, e.device.pool, e.device.device);
                let t = e.taint;
                let taint = format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect);
                let key = format!("{} {device} {taint}", c.uid);
                let first = *st.taint_seen.get(&key).unwrap_or(&now);
                let when = e.when(first, now);
                live.insert(key.clone());
                for pod in &c.pods {
                    pending.push((
                        key.clone(),
                        when,
                        pod.clone(),
                        format!("{}/{}", c.namespace, c.name),
                        device.clone(),
                        taint.clone(),
                    ));
                }
            }
        }
        st.taint_seen.retain(|k, _| live.contains(k));
        for (key, when, pod, claim, device, taint) in pending {
            st.taint_seen.entry(key).or_insert(now);
            if when.now && !due.contains(&pod) {
                due.push(pod.clone());
                self.event(KubeletEvent::PodEvicted {
                    pod,
                    claim,
                    device,
                    taint,
                    reason: "DeviceTaintManagerEviction".into(),
                    condition: EVICTION_CONDITION.into(),
                    condition_reason: EVICTION_REASON.into(),
                    condition_message: EVICTION_MESSAGE.into(),
                    time_added: crate::core::time::rfc3339_nano(when.added),
                    evict_at: crate::core::time::rfc3339_nano(when.at),
                });
            }
        }
        due
    }
}
