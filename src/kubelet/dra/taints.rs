//! NoExecute device taints on devices of the static pods' prepared claims.
//! The decision is the control plane's device-taint eviction controller's
//! ([`crate::controlplane::controller::taints::decide`]); the mock kubelet
//! runs it over the claims of the pods of its manifests, which are not in
//! the store (no mirror pods) so the controller cannot see them. Pods of
//! the API are the controller's: the node deletes them when it sees them
//! deleted. This is the shell: the wall clock, when each taint without a
//! timeAdded was first seen, the `pod-evicted` events.

use super::*;
use crate::controlplane::controller::taints::{self, InUse};
use std::time::SystemTime;

impl DraManager {
    /// Static pods (of `pods`, by UID) a NoExecute device taint evicts now:
    /// [`taints::decide`] over their prepared claims. Each is reported
    /// (`pod-evicted`); the caller deletes the pods through the pod lifecycle.
    pub fn tainted_pods(&self, pods: &BTreeSet<String>) -> Vec<String> {
        let now = SystemTime::now();
        let mut st = self.lock();
        let cands = self.candidates(&mut st);
        let rules = allocator::Catalog::of(st.objects.values()).rules;
        let mut seen = std::mem::take(&mut st.taint_seen);
        let uses: Vec<InUse<'_>> = st
            .claims
            .values()
            .filter(|c| c.pods.iter().any(|p| pods.contains(p)))
            .map(|c| InUse {
                claim: format!("{}/{}", c.namespace, c.name),
                uid: c.uid.clone(),
                pods: c.pods.iter().filter(|p| pods.contains(*p)).cloned().collect(),
                devices: &c.allocation,
            })
            .collect();
        let decision = taints::decide(&uses, &cands, &rules, &mut seen, now);
        drop(uses);
        st.taint_seen = seen;
        drop(st);
        let mut due = Vec::new();
        for e in decision.due {
            due.push(e.pod.clone());
            self.event(evicted_event(&e));
        }
        due
    }
}

/// The `pod-evicted` event of an eviction (the static pods' here, or the
/// control plane's controller's).
pub fn evicted_event(e: &taints::Evict) -> KubeletEvent {
    KubeletEvent::PodEvicted {
        pod: e.pod.clone(),
        claim: e.claim.clone(),
        device: e.device.clone(),
        taint: e.taint.clone(),
        reason: taints::EVENT_REASON.into(),
        condition: taints::CONDITION.into(),
        condition_reason: taints::REASON.into(),
        condition_message: taints::MESSAGE.into(),
        time_added: crate::core::time::rfc3339_nano(e.added),
        evict_at: crate::core::time::rfc3339_nano(e.at),
    }
}
