//! The shell of taint eviction ([`crate::kubelet::dra::core::taints`]): the
//! wall clock, the state lock, the `pod-evicted` events.

use super::*;
use crate::kubelet::dra::core::taints::evicted_event;
use std::time::SystemTime;

impl DraManager {
    /// Static pods (of `pods`, by UID) a NoExecute device taint evicts now
    /// ([`crate::kubelet::dra::core::taints::TaintEviction::decide`]). Each
    /// is reported (`pod-evicted`); the caller deletes the pods through the
    /// pod lifecycle.
    pub fn tainted_pods(&self, pods: &BTreeSet<String>) -> Vec<String> {
        let now = SystemTime::now();
        let due = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let all = self.candidates(st);
            st.taints.decide(&st.claims.cache, pods, &all, st.objects.all(), now)
        };
        let mut pods = Vec::new();
        for e in due {
            pods.push(e.pod.clone());
            self.event(evicted_event(&e));
        }
        pods
    }
}
