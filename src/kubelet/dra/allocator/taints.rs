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
