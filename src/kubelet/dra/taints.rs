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
        let all = self.candidates(&mut st);
        let rules = allocator::Catalog::of(st.objects.values()).rules;
        let cands = noexecute_only(&all, &rules);
        if cands.is_empty() {
            // No NoExecute taint on any device: what `decide` answers (no
            // eviction, no taint seen), without a use built per prepared
            // claim under the state lock on every manifest scan.
            st.taint_seen.clear();
            return Vec::new();
        }
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

/// The candidates a NoExecute taint can evict from: every candidate whose
/// device (driver, pool, name) has one on some candidate, in order — so
/// [`taints::decide`] finds each allocated device's first candidate as it
/// would in the whole list, and skips the rest as it would (no NoExecute
/// taint: no eviction). Each scan of the manifests decides over every
/// prepared claim: a search of 10,000 untainted candidates per device held
/// the state lock for tens of ms, and prepares waited on it.
fn noexecute_only(all: &[Candidate], rules: &[crate::controlplane::objects::TaintRule]) -> Vec<Candidate> {
    let key = |c: &Candidate| (c.driver.clone(), c.pool.clone(), c.device.clone());
    let tainted: BTreeSet<(String, String, String)> =
        all.iter().filter(|c| allocator::taints::of(c, rules).any(|t| t.effect == "NoExecute")).map(key).collect();
    if tainted.is_empty() {
        return Vec::new();
    }
    all.iter().filter(|c| tainted.contains(&key(c))).cloned().collect()
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
