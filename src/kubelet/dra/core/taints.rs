//! NoExecute device taints on devices of the static pods' prepared claims,
//! decided without I/O. The decision is the control plane's device-taint
//! eviction controller's ([`crate::controlplane::controller::taints::decide`]);
//! the mock kubelet runs it over the claims of the pods of its manifests,
//! which are not in the store (no mirror pods) so the controller cannot see
//! them. Pods of the API are the controller's: the node deletes them when
//! it sees them deleted. What this keeps is when each taint without a
//! timeAdded was first seen; the wall clock and the `pod-evicted` events
//! are the shell's.

use super::claiminfo::ClaimCache;
use crate::controlplane::allocator::{self, Candidate};
use crate::controlplane::controller::taints::{self, InUse};
use crate::controlplane::objects::{Object, TaintRule};
use crate::kubelet::event::KubeletEvent;
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

/// Taint eviction's memory.
#[derive(Debug, Default)]
pub struct TaintEviction {
    /// Eviction key → when its NoExecute taint was first seen (the taint's
    /// timeAdded when it has none).
    seen: BTreeMap<String, SystemTime>,
}

impl TaintEviction {
    /// The evictions due at `now` of the static pods `pods` (by UID):
    /// [`taints::decide`] over their prepared claims of `claims`, the
    /// candidates `all` and the taint rules of `objects`.
    pub fn decide(
        &mut self,
        claims: &ClaimCache,
        pods: &BTreeSet<String>,
        all: &[Candidate],
        objects: &BTreeMap<String, Object>,
        now: SystemTime,
    ) -> Vec<taints::Evict> {
        let rules = allocator::Catalog::of(objects.values()).rules;
        let cands = noexecute_only(all, &rules);
        if cands.is_empty() {
            // No NoExecute taint on any device: what `decide` answers (no
            // eviction, no taint seen), without a use built per prepared
            // claim under the state lock on every manifest scan.
            self.seen.clear();
            return Vec::new();
        }
        let uses: Vec<InUse<'_>> = claims
            .values()
            .filter(|c| c.pods.iter().any(|p| pods.contains(p)))
            .map(|c| InUse {
                claim: format!("{}/{}", c.namespace, c.name),
                uid: c.uid.clone(),
                pods: c.pods.iter().filter(|p| pods.contains(*p)).cloned().collect(),
                devices: &c.allocation,
            })
            .collect();
        taints::decide(&uses, &cands, &rules, &mut self.seen, now).due
    }
}

/// The candidates a NoExecute taint can evict from: every candidate whose
/// device (driver, pool, name) has one on some candidate, in order — so
/// [`taints::decide`] finds each allocated device's first candidate as it
/// would in the whole list, and skips the rest as it would (no NoExecute
/// taint: no eviction). Each scan of the manifests decides over every
/// prepared claim: a search of 10,000 untainted candidates per device held
/// the state lock for tens of ms, and prepares waited on it.
fn noexecute_only(all: &[Candidate], rules: &[TaintRule]) -> Vec<Candidate> {
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
