//! The suite's view of the rulebook (`protocol`): what a plugin
//! sent, checked by rule, as the texts the scenarios report. No rule is
//! implemented here; no I/O here.

use crate::api::deviceplugin::Device;
use crate::api::HEALTHY;
use crate::protocol::{deviceplugin, registration, Rule, Violation};
use crate::suite::{Evidence, Outcome};
use std::path::Path;

pub use crate::protocol::deviceplugin::{is_empty_answer, MAX_DEVICE_ID_LEN as MAX_ID_LEN};
pub use crate::protocol::registration::options_text;

/// Why a RegisterRequest endpoint is not a plain socket file name in `plugin_dir`.
pub fn endpoint_problem(endpoint: &str, plugin_dir: &Path) -> Option<String> {
    registration::register_endpoint(endpoint, plugin_dir).map(|v| v.to_string())
}

fn only(v: Vec<Violation>, rules: &[&Rule]) -> Vec<Violation> {
    v.into_iter().filter(|x| rules.contains(&x.rule)).collect()
}

/// Device-ID rules broken: empty, duplicated, unprintable, too long.
pub fn id_problems(devices: &[Device]) -> Vec<Violation> {
    let ids = [
        &deviceplugin::DEVICE_ID_EMPTY,
        &deviceplugin::DEVICE_ID_UNIQUE,
        &deviceplugin::DEVICE_ID_LENGTH,
        &deviceplugin::DEVICE_ID_CHARS,
    ];
    only(deviceplugin::devices(devices), &ids)
}

/// Health strings other than exactly `Healthy` / `Unhealthy`.
pub fn health_problems(devices: &[Device]) -> Vec<Violation> {
    only(deviceplugin::devices(devices), &[&deviceplugin::DEVICE_HEALTH])
}

/// Malformed topology: an empty node list, negative or repeated NUMA IDs.
pub fn topology_problems(devices: &[Device]) -> Vec<Violation> {
    only(deviceplugin::devices(devices), &[&deviceplugin::DEVICE_TOPOLOGY, &deviceplugin::DEVICE_TOPOLOGY_EMPTY])
}

/// A scenario's outcome from the rulebook's violations: PASS when there are
/// none, FAIL when a FAIL rule is broken, else WARN — the rule's verdict,
/// as `probe` and `doctor` give it. At most 5 texts, worst first, then "+N more".
pub fn judged(rpc: &str, v: &[Violation], fix: &str) -> Outcome {
    if v.is_empty() {
        return Outcome::pass("");
    }
    let mut sorted: Vec<&Violation> = v.iter().collect();
    sorted.sort_by_key(|x| std::cmp::Reverse(x.rule.severity));
    let mut text = sorted.iter().take(5).map(|x| x.to_string()).collect::<Vec<_>>().join("; ");
    if v.len() > 5 {
        text.push_str(&format!("; +{} more", v.len() - 5));
    }
    if v.iter().any(Violation::is_fail) {
        Outcome::fail(rpc, text, fix)
    } else {
        let evidence = Evidence { rpc: rpc.into(), answer: text.clone(), fix: fix.into(), log: None };
        Outcome::warn(text, Some(evidence))
    }
}

/// The IDs of healthy devices, in the plugin's order.
pub fn healthy_ids(devices: &[Device]) -> Vec<String> {
    devices.iter().filter(|d| d.health == HEALTHY).map(|d| d.id.clone()).collect()
}

/// What is wrong with one GetPreferredAllocation answer, by rule.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PreferredProblems {
    /// Wrong number of IDs, or duplicates.
    pub size: Option<String>,
    /// IDs that were not offered.
    pub available: Option<String>,
    /// Must-include IDs left out.
    pub must_include: Option<String>,
}

/// The devices to offer GetPreferredAllocation for `size` out of `healthy`:
/// a proper subset when there is room (every other device left out in turn,
/// alternating which end), else all of them.
pub fn offer(healthy: &[String], size: usize) -> Vec<String> {
    let spare = healthy.len().saturating_sub(size);
    if spare == 0 {
        return healthy.to_vec();
    }
    // Leave out `spare.min(2)` devices: from the front for odd sizes, from the back for even ones.
    let out = spare.min(2);
    if size % 2 == 1 {
        healthy[out..].to_vec()
    } else {
        healthy[..healthy.len() - out].to_vec()
    }
}

/// A GetPreferredAllocation request for a size: (available, must-include).
pub type PreferredRequest = (Vec<String>, Vec<String>);

/// PREF-001/002's request for `size`: a proper subset of the healthy devices
/// (the kubelet offers healthy minus allocated), so an answer taken from
/// outside the offer shows, with the last offered device must-include from size 2.
pub fn offer_request(healthy: &[String], size: usize) -> PreferredRequest {
    let available = offer(healthy, size);
    let must = if size >= 2 { available.last().cloned().into_iter().collect() } else { Vec::new() };
    (available, must)
}

/// PREF-003's request for `size`: every healthy device offered, the last
/// `min(size, 2)` of them must-include — where a policy that ignores them
/// (the first N, the lowest IDs, one NUMA node from the front) would not
/// choose them; sizes 1 and 2 ask for exactly the must-include devices.
pub fn must_include_request(healthy: &[String], size: usize) -> PreferredRequest {
    let k = size.min(2).min(healthy.len());
    (healthy.to_vec(), healthy[healthy.len() - k..].to_vec())
}

/// Check a preferred answer against its request.
pub fn preferred_problems(available: &[String], must: &[String], size: usize, answer: &[String]) -> PreferredProblems {
    let mut p = PreferredProblems::default();
    for v in deviceplugin::preferred_ids(available, must, size, answer) {
        let slot = match v.rule.id {
            id if id == deviceplugin::PREFERRED_SIZE.id => &mut p.size,
            id if id == deviceplugin::PREFERRED_AVAILABLE.id => &mut p.available,
            _ => &mut p.must_include,
        };
        *slot = Some(format!("size {size}: {v}"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::{NumaNode, TopologyInfo};
    use crate::api::UNHEALTHY;

    fn dev(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
        Device {
            id: id.into(),
            health: health.into(),
            topology: numa.map(|n| TopologyInfo { nodes: n.into_iter().map(|id| NumaNode { id }).collect() }),
        }
    }

    #[test]
    fn device_lists() {
        let good = [dev("a", HEALTHY, Some(vec![0])), dev("b", UNHEALTHY, None)];
        assert!(id_problems(&good).is_empty() && health_problems(&good).is_empty());
        assert!(topology_problems(&good).is_empty());
        assert_eq!(healthy_ids(&good), ["a"]);
        let bad = [dev("a", "healthy", Some(vec![])), dev("a", HEALTHY, Some(vec![-1, 1, 1])), dev("", HEALTHY, None)];
        assert_eq!(id_problems(&bad).len(), 2);
        assert_eq!(health_problems(&bad).len(), 1);
        assert_eq!(topology_problems(&bad).len(), 3);
        assert_eq!(id_problems(&[dev("has space", HEALTHY, None), dev(&"x".repeat(64), HEALTHY, None)]).len(), 2);
    }

    #[test]
    fn preferred_rules_are_separate() {
        let av: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let must = vec!["c".to_string()];
        assert_eq!(preferred_problems(&av, &must, 2, &["a".into(), "c".into()]), PreferredProblems::default());
        let p = preferred_problems(&av, &must, 2, &["a".into(), "b".into(), "c".into()]);
        assert!(p.size.is_some() && p.available.is_none() && p.must_include.is_none());
        let p = preferred_problems(&av, &must, 2, &["x".into(), "c".into()]);
        assert!(p.size.is_none() && p.available.is_some() && p.must_include.is_none());
        let p = preferred_problems(&av, &must, 2, &["a".into(), "b".into()]);
        assert!(p.size.is_none() && p.available.is_none() && p.must_include.is_some());
        let dir = Path::new("/p");
        assert!(endpoint_problem("../x.sock", dir).is_some() && endpoint_problem("x.sock", dir).is_none());
        let h: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(offer(&h, 1), ["c", "d"]);
        assert_eq!(offer(&h, 2), ["a", "b"]);
        assert_eq!(offer(&h, 3), ["b", "c", "d"]);
        assert_eq!(offer(&h, 4), h);
    }

    #[test]
    fn pref_003_catches_a_policy_that_answers_the_first_n_and_passes_one_that_keeps_must_include() {
        for n in 2..=8usize {
            let h: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
            let mut caught = 0;
            for size in 1..=n {
                let (available, must) = must_include_request(&h, size);
                assert!(!must.is_empty() && must.iter().all(|m| available.contains(m)));
                let first_n: Vec<String> = available.iter().take(size).cloned().collect();
                if preferred_problems(&available, &must, size, &first_n).must_include.is_some() {
                    caught += 1;
                }
                let good = crate::plugin::policy::choose(
                    crate::plugin::config::Policy::Packed,
                    &available,
                    &must,
                    size,
                    |_| None,
                );
                let p = preferred_problems(&available, &must, size, &good);
                assert!(p.must_include.is_none() && p.size.is_none(), "n {n} size {size}: {good:?}");
            }
            // Every size short of all devices leaves a must-include device out of the first N.
            assert_eq!(caught, n - 1, "n {n}");
        }
        // Size equal to the number of must-include devices.
        let h: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(must_include_request(&h, 1).1, ["d"]);
        assert_eq!(must_include_request(&h, 2).1, ["c", "d"]);
        assert_eq!(must_include_request(&h, 3).1, ["c", "d"]);
    }
}
