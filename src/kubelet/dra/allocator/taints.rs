//! Device taints (KEP-5055): a device's own taints and those DeviceTaintRules
//! put on it; NoSchedule and NoExecute keep a device from being allocated
//! unless the request tolerates them (allocator.go taintPreventsAllocation),
//! other effects (None) do not.

use super::Candidate;
use crate::kubelet::manifest::objects::{Taint, TaintRule, Toleration};

/// Every taint on `c`: its own, then the rules' that select it.
pub fn of<'a>(c: &'a Candidate, rules: &'a [TaintRule]) -> impl Iterator<Item = &'a Taint> {
    let selected = move |r: &&TaintRule| {
        r.driver.as_ref().is_none_or(|d| *d == c.driver)
            && r.pool.as_ref().is_none_or(|p| *p == c.pool)
            && r.device.as_ref().is_none_or(|d| *d == c.device)
    };
    c.taints.iter().chain(rules.iter().filter(selected).map(|r| &r.taint))
}

/// The first taint on `c` that keeps it from a request with `tolerations`.
pub fn blocking<'a>(c: &'a Candidate, rules: &'a [TaintRule], tolerations: &[Toleration]) -> Option<&'a Taint> {
    of(c, rules)
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// What the device-taint eviction controller would do about one allocated
/// device: evict its pods now, or after `tolerationSeconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction<'a> {
    /// The allocated device.
    pub device: &'a super::Allocated,
    /// The NoExecute taint.
    pub taint: &'a Taint,
    /// None: at once; Some(n): after the toleration's n seconds.
    pub after_seconds: Option<i64>,
}

/// The allocated devices that now carry a NoExecute taint their allocation's
/// tolerations do not tolerate for good (devicetainteviction's decision; a
/// toleration with tolerationSeconds delays it). Pure: the caller decides
/// what evicting means (the pod deleted, then its claims unprepared).
pub fn evictions<'a>(
    allocated: &'a [super::Allocated],
    candidates: &'a [Candidate],
    rules: &'a [TaintRule],
) -> Vec<Eviction<'a>> {
    let mut out = Vec::new();
    for a in allocated {
        let Some(c) = candidates.iter().find(|c| c.driver == a.driver && c.pool == a.pool && c.device == a.device)
        else {
            continue;
        };
        for t in of(c, rules).filter(|t| t.effect == "NoExecute") {
            let tolerating: Vec<&Toleration> = a.tolerations.iter().filter(|tol| tol.tolerates(t)).collect();
            if tolerating.iter().any(|tol| tol.toleration_seconds.is_none()) {
                continue;
            }
            let after_seconds = tolerating.iter().filter_map(|tol| tol.toleration_seconds).min().map(|s| s.max(0));
            out.push(Eviction { device: a, taint: t, after_seconds });
        }
    }
    out
}
