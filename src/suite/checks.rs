//! Pure checks of what a plugin sent: each returns the problems found, in
//! words a plugin author can act on. No I/O here.

use crate::api::deviceplugin::{ContainerAllocateResponse, Device, DevicePluginOptions};
use crate::api::{HEALTHY, UNHEALTHY};
use std::collections::HashSet;

/// The documented maximum length of a device ID.
pub const MAX_ID_LEN: usize = 63;

/// Why a RegisterRequest endpoint is not a plain socket file name.
pub fn endpoint_problem(endpoint: &str) -> Option<String> {
    if endpoint.is_empty() {
        Some("the endpoint is empty".into())
    } else if endpoint.contains('/') || endpoint == "." || endpoint == ".." || endpoint.contains('\0') {
        Some(format!("endpoint {endpoint:?} is not a plain file name in the plugin directory"))
    } else {
        None
    }
}

/// Problems with device IDs: empty, duplicated, unprintable, too long.
pub fn id_problems(devices: &[Device]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for d in devices {
        if d.id.is_empty() {
            out.push("a device has an empty ID".to_string());
            continue;
        }
        if !seen.insert(d.id.as_str()) {
            out.push(format!("ID {:?} appears more than once", d.id));
        }
        if d.id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            out.push(format!("ID {:?} contains whitespace or control characters", d.id));
        }
        if d.id.len() > MAX_ID_LEN {
            out.push(format!("ID {:?} is {} bytes, over the documented {MAX_ID_LEN}", d.id, d.id.len()));
        }
    }
    out.dedup();
    out
}

/// Health strings other than exactly `Healthy` / `Unhealthy`.
pub fn health_problems(devices: &[Device]) -> Vec<String> {
    devices
        .iter()
        .filter(|d| d.health != HEALTHY && d.health != UNHEALTHY)
        .map(|d| format!("device {:?} has health {:?}", d.id, d.health))
        .collect()
}

/// Malformed topology: an empty node list, negative or repeated NUMA IDs.
pub fn topology_problems(devices: &[Device]) -> Vec<String> {
    let mut out = Vec::new();
    for d in devices {
        let Some(t) = &d.topology else { continue };
        if t.nodes.is_empty() {
            out.push(format!("device {:?} has a topology with no NUMA nodes (leave topology unset instead)", d.id));
        }
        let mut seen = HashSet::new();
        for n in &t.nodes {
            if n.id < 0 {
                out.push(format!("device {:?} has NUMA node {}", d.id, n.id));
            }
            if !seen.insert(n.id) {
                out.push(format!("device {:?} lists NUMA node {} twice", d.id, n.id));
            }
        }
    }
    out
}

/// The IDs of healthy devices, in the plugin's order.
pub fn healthy_ids(devices: &[Device]) -> Vec<String> {
    devices.iter().filter(|d| d.health == HEALTHY).map(|d| d.id.clone()).collect()
}

/// Whether an Allocate answer gives the container nothing at all.
pub fn is_empty_answer(r: &ContainerAllocateResponse) -> bool {
    r.envs.is_empty()
        && r.mounts.is_empty()
        && r.devices.is_empty()
        && r.annotations.is_empty()
        && r.cdi_devices.is_empty()
}

/// Options as text.
pub fn options_text(o: &DevicePluginOptions) -> String {
    format!(
        "{{preStartRequired: {}, getPreferredAllocationAvailable: {}}}",
        o.pre_start_required, o.get_preferred_allocation_available
    )
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

/// Check a preferred answer against its request.
pub fn preferred_problems(available: &[String], must: &[String], size: usize, answer: &[String]) -> PreferredProblems {
    let mut p = PreferredProblems::default();
    let distinct: HashSet<&String> = answer.iter().collect();
    if answer.len() != size || distinct.len() != answer.len() {
        p.size = Some(format!("asked for {size}, got {} ID(s) {:?}", answer.len(), answer));
    }
    let foreign: Vec<&String> = answer.iter().filter(|a| !available.contains(a)).collect();
    if !foreign.is_empty() {
        p.available = Some(format!("size {size}: {foreign:?} were not in available_deviceIDs"));
    }
    let missing: Vec<&String> = must.iter().filter(|m| !answer.contains(m)).collect();
    if !missing.is_empty() {
        p.must_include = Some(format!("size {size}: must-include {missing:?} missing from {answer:?}"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::{NumaNode, TopologyInfo};

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
        assert!(endpoint_problem("../x.sock").is_some() && endpoint_problem("x.sock").is_none());
        let h: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(offer(&h, 1), ["c", "d"]);
        assert_eq!(offer(&h, 2), ["a", "b"]);
        assert_eq!(offer(&h, 3), ["b", "c", "d"]);
        assert_eq!(offer(&h, 4), h);
    }
}
