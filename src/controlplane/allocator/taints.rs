//! Device taints (KEP-5055): a device's own taints and those DeviceTaintRules
//! put on it; NoSchedule and NoExecute keep a device from being allocated
//! unless the request tolerates them (allocator.go taintPreventsAllocation),
//! other effects (None) do not.

use super::Candidate;
use crate::controlplane::objects::{Taint, TaintRule, Toleration};
use std::time::{Duration, SystemTime};

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
/// device: evict its pods at the taint's timeAdded, or that plus the
/// smallest tolerationSeconds of the tolerations that count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction<'a> {
    /// The allocated device.
    pub device: &'a super::Allocated,
    /// The NoExecute taint.
    pub taint: &'a Taint,
    /// None: at the taint's timeAdded; Some(n): n seconds (n ≥ 0) after it.
    pub after_seconds: Option<i64>,
}

/// The allocated devices that now carry a NoExecute taint their allocation's
/// tolerations do not tolerate for good (devicetainteviction's
/// claimEvictionTime). As there, only tolerations whose effect is NoExecute
/// count: one of them without tolerationSeconds keeps the pod, the smallest
/// tolerationSeconds (a negative one as 0) delays the eviction; a toleration
/// with no effect, which lets the device be allocated, neither keeps nor
/// delays. Pure: the caller decides what evicting means (the pod deleted,
/// then its claims unprepared) and when ([`Eviction::when`]).
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
            let tolerating: Vec<&Toleration> = a
                .tolerations
                .iter()
                .filter(|tol| tol.effect.as_deref() == Some("NoExecute") && tol.tolerates(t))
                .collect();
            if tolerating.iter().any(|tol| tol.toleration_seconds.is_none()) {
                continue;
            }
            let after_seconds = tolerating.iter().filter_map(|tol| tol.toleration_seconds).min().map(|s| s.max(0));
            out.push(Eviction { device: a, taint: t, after_seconds });
        }
    }
    out
}

/// When an eviction is due, as [`Eviction::when`] decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The taint's timeAdded (or when it was first seen, when it has none).
    pub added: SystemTime,
    /// When the pods are evicted: `added` plus the toleration's seconds.
    pub at: SystemTime,
    /// Whether `at` has come.
    pub now: bool,
}

impl Eviction<'_> {
    /// When this eviction is due at `now`: the taint's timeAdded plus
    /// [`Eviction::after_seconds`]. A taint without timeAdded counts from
    /// `first_seen`, when it was first seen (the API server stamps timeAdded
    /// when a taint is created; a manifest may leave it out).
    pub fn when(&self, first_seen: SystemTime, now: SystemTime) -> Due {
        let added = self
            .taint
            .time_added
            .as_deref()
            .and_then(|t| crate::core::time::parse_rfc3339(t).ok())
            .unwrap_or(first_seen);
        // At most ~136 years: a later time is never reached, and cannot overflow.
        let secs = self.after_seconds.unwrap_or(0).clamp(0, i64::from(u32::MAX)).unsigned_abs();
        let at = added.checked_add(Duration::from_secs(secs)).unwrap_or(added);
        Due { added, at, now: now >= at }
    }
}
