//! The topology manager for device-plugin resources, container scope: each
//! resource's hints (NUMA masks that can satisfy the request, preferred when
//! minimal), merged across resources under a policy into one affinity or a
//! rejection; then the split of available devices by that affinity.
//!
//! Deliberate differences from the kubelet: the NUMA nodes are those the
//! devices report (the kubelet reads the machine's), at most 8 of them as the
//! kubelet allows; hints of other providers (CPU, memory) do not exist here;
//! among non-preferred merged hints, [`HintMerge`] picks the rule: the
//! narrowest (kubelets up to 1.23), or the one whose size is nearest, not
//! above, the largest of the resources' minimal hint sizes (since 1.24,
//! kubernetes#108154).

/// The text of a topology admission failure (the kubelet's TopologyAffinityError).
pub use super::admission::TOPOLOGY_ERROR;
use super::state::{AllocKey, Allocation, State};
pub use crate::kubelet::profile::HintMerge;
use std::collections::{BTreeMap, BTreeSet};

/// The kubelet's topology manager policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TopologyPolicy {
    /// No NUMA alignment
    #[default]
    None,
    /// Prefer aligned devices, never reject
    BestEffort,
    /// Reject pods whose best alignment is not the preferred one
    Restricted,
    /// Reject pods that cannot get all devices from one NUMA node
    SingleNumaNode,
}

/// The kubelet's limit on NUMA nodes for the topology manager.
pub const MAX_NUMA_NODES: usize = 8;

/// At most this many hint combinations are merged for one container (the
/// kubelet has no bound); beyond it only each resource's preferred hints
/// count, and beyond that only its first.
pub const MAX_COMBINATIONS: u128 = 100_000;

/// A topology hint: a NUMA affinity (None: any) and whether it is preferred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// NUMA nodes.
    pub affinity: Option<BTreeSet<i64>>,
    /// Minimal for the request.
    pub preferred: bool,
}

impl Hint {
    /// A hint on `nodes`.
    pub fn on(nodes: &[i64], preferred: bool) -> Self {
        Hint { affinity: Some(nodes.iter().copied().collect()), preferred }
    }
}

/// The NUMA nodes known from all devices, sorted; empty if there are more than the kubelet handles.
pub fn numa_nodes(st: &State) -> Vec<i64> {
    let all: BTreeSet<i64> =
        st.resources.values().flat_map(|r| r.devices.values()).flat_map(|d| d.numa.clone()).collect();
    if all.len() > MAX_NUMA_NODES {
        return Vec::new();
    }
    all.into_iter().collect()
}

fn mask_of(nodes: &[i64], ids: &[i64]) -> u16 {
    nodes.iter().enumerate().filter(|(_, n)| ids.contains(n)).fold(0, |m, (i, _)| m | (1 << i))
}

fn set_of(nodes: &[i64], mask: u16) -> BTreeSet<i64> {
    nodes.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, n)| *n).collect()
}

/// Hints for `request` devices from `available`, with `reusable` devices
/// (an init container's) that must fit the mask (the kubelet's generateDeviceTopologyHints).
pub fn generate_hints(
    st: &State,
    nodes: &[i64],
    resource: &str,
    available: &BTreeSet<String>,
    reusable: &BTreeSet<String>,
    request: usize,
) -> Vec<Hint> {
    let Some(r) = st.resources.get(resource) else { return Vec::new() };
    let dev_mask = |id: &String| r.devices.get(id).map(|d| mask_of(nodes, &d.numa)).unwrap_or(0);
    let all: Vec<u16> = r.devices.values().map(|d| mask_of(nodes, &d.numa)).collect();
    let mut min = nodes.len() as u32;
    let mut masks: Vec<u16> = Vec::new();
    'masks: for mask in 1..(1u32 << nodes.len()) as u16 {
        let in_mask = all.iter().filter(|m| *m & mask != 0).count();
        if in_mask >= request && mask.count_ones() < min {
            min = mask.count_ones();
        }
        let mut matching = 0;
        for d in reusable {
            let has_topology = r.devices.get(d).is_some_and(|d| !d.numa.is_empty());
            if !has_topology {
                continue;
            }
            if dev_mask(d) & mask == 0 {
                continue 'masks;
            }
            matching += 1;
        }
        matching += available.iter().filter(|d| dev_mask(d) & mask != 0).count();
        if matching >= request {
            masks.push(mask);
        }
    }
    masks.into_iter().map(|m| Hint { affinity: Some(set_of(nodes, m)), preferred: m.count_ones() == min }).collect()
}

/// One resource's hints for a container (the kubelet's GetTopologyHints):
/// None when the resource reports no topology ("don't care"); empty when
/// nothing fits.
#[allow(clippy::too_many_arguments)]
pub fn resource_hints(
    st: &State,
    nodes: &[i64],
    uid: &str,
    container: &str,
    resource: &str,
    request: usize,
    reusable: &BTreeSet<String>,
    pending: &BTreeMap<AllocKey, Allocation>,
) -> Option<Vec<Hint>> {
    let r = st.resources.get(resource)?;
    if !r.has_topology() {
        return None;
    }
    let key = (uid.to_string(), container.to_string(), resource.to_string());
    if let Some(a) = st.allocations.get(&key).or_else(|| pending.get(&key)) {
        if a.ids.len() != request {
            return Some(Vec::new());
        }
        let ids: BTreeSet<String> = a.ids.iter().cloned().collect();
        return Some(generate_hints(st, nodes, resource, &ids, &BTreeSet::new(), request));
    }
    let in_use = st.in_use(resource, pending);
    let available: BTreeSet<String> = r.healthy().into_iter().filter(|d| !in_use.contains(d)).collect();
    if available.len() + reusable.len() < request {
        return Some(Vec::new());
    }
    Some(generate_hints(st, nodes, resource, &available, reusable, request))
}

/// `a` is narrower than `b`: fewer nodes, or as many and lower-numbered.
fn narrower(a: &BTreeSet<i64>, b: &BTreeSet<i64>) -> bool {
    a.len() < b.len() || (a.len() == b.len() && a.iter().lt(b.iter()))
}

/// The largest of each resource's smallest hint affinity (none: all nodes),
/// upstream's bestNonPreferredAffinityCount.
fn best_non_preferred_count(nodes: &[i64], lists: &[Vec<Hint>]) -> usize {
    lists
        .iter()
        .map(|l| l.iter().filter_map(|h| h.affinity.as_ref().map(BTreeSet::len)).fold(nodes.len(), usize::min))
        .max()
        .unwrap_or(0)
}

/// Between two non-preferred merged hints, the kubelet's (since 1.24) choice:
/// creep towards `best` affinity size, never above it unless nothing is below.
fn closer_to_best(best: usize, cur: &BTreeSet<i64>, cand: &BTreeSet<i64>) -> bool {
    let (c, n) = (cur.len(), cand.len());
    if c > best {
        return narrower(cand, cur);
    }
    if c == best {
        return n == best && narrower(cand, cur);
    }
    if n > best {
        return false;
    }
    if n == best {
        return true;
    }
    !narrower(cand, cur)
}

/// Merge per-resource hints under `policy` (the kubelet's policy Merge) with
/// the default rule among non-preferred hints.
pub fn merge(policy: TopologyPolicy, nodes: &[i64], per_resource: &[Option<Vec<Hint>>]) -> (Hint, bool) {
    merge_with(policy, HintMerge::BestNonPreferredCount, nodes, per_resource)
}

/// Merge per-resource hints under `policy` and a kubelet version's `rule`:
/// the best hint and whether the pod may be admitted.
pub fn merge_with(
    policy: TopologyPolicy,
    rule: HintMerge,
    nodes: &[i64],
    per_resource: &[Option<Vec<Hint>>],
) -> (Hint, bool) {
    let default: BTreeSet<i64> = nodes.iter().copied().collect();
    let mut lists: Vec<Vec<Hint>> = per_resource
        .iter()
        .map(|h| match h {
            None => vec![Hint { affinity: None, preferred: true }],
            Some(h) if h.is_empty() => vec![Hint { affinity: None, preferred: false }],
            Some(h) => h.clone(),
        })
        .collect();
    if policy == TopologyPolicy::SingleNumaNode {
        for l in &mut lists {
            l.retain(|h| h.preferred && h.affinity.as_ref().is_none_or(|a| a.len() == 1));
        }
    }
    // Every combination of one hint per resource is merged; bound the work a
    // pod with many topology-aware resources can cause.
    let combinations = |lists: &[Vec<Hint>]| lists.iter().map(|l| l.len() as u128).product::<u128>();
    if combinations(&lists) > MAX_COMBINATIONS {
        for l in &mut lists {
            let keep: Vec<Hint> = l.iter().filter(|h| h.preferred).take(MAX_NUMA_NODES).cloned().collect();
            if !keep.is_empty() {
                *l = keep;
            }
        }
    }
    if combinations(&lists) > MAX_COMBINATIONS {
        lists.iter_mut().for_each(|l| l.truncate(1));
    }
    let best_count = best_non_preferred_count(nodes, &lists);
    let mut best: Option<Hint> = None;
    let mut idx = vec![0usize; lists.len()];
    let empty = lists.iter().any(|l| l.is_empty());
    loop {
        if empty {
            break;
        }
        // every permutation of one hint per resource
        let perm: Vec<&Hint> = lists.iter().zip(&idx).filter_map(|(l, i)| l.get(*i)).collect();
        let affinities: Vec<&BTreeSet<i64>> = perm.iter().filter_map(|h| h.affinity.as_ref()).collect();
        let preferred = perm.iter().all(|h| h.preferred) && affinities.windows(2).all(|w| w[0] == w[1]);
        let merged: BTreeSet<i64> =
            default.iter().filter(|n| affinities.iter().all(|a| a.contains(n))).copied().collect();
        if !merged.is_empty() {
            let cand = Hint { affinity: Some(merged), preferred };
            best = Some(match best {
                None => cand,
                Some(cur) if cur.preferred != cand.preferred => {
                    if cand.preferred {
                        cand
                    } else {
                        cur
                    }
                }
                Some(cur) => {
                    let (a, b) = (cand.affinity.as_ref(), cur.affinity.as_ref());
                    let better = a.zip(b).is_some_and(|(a, b)| match (cur.preferred, rule) {
                        (true, _) | (false, HintMerge::Narrowest) => narrower(a, b),
                        (false, HintMerge::BestNonPreferredCount) => closer_to_best(best_count, b, a),
                    });
                    if better {
                        cand
                    } else {
                        cur
                    }
                }
            });
        }
        // next permutation
        let mut k = 0;
        loop {
            if k == idx.len() {
                break;
            }
            idx[k] += 1;
            if idx[k] < lists[k].len() {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
        if k == idx.len() {
            break;
        }
    }
    let mut best = best.unwrap_or(Hint { affinity: Some(default.clone()), preferred: false });
    if policy == TopologyPolicy::SingleNumaNode && best.affinity.as_ref() == Some(&default) {
        best.affinity = None;
    }
    let admit = match policy {
        TopologyPolicy::None | TopologyPolicy::BestEffort => true,
        TopologyPolicy::Restricted | TopologyPolicy::SingleNumaNode => best.preferred,
    };
    (best, admit)
}

/// The topology manager refuses the pod: no NUMA affinity satisfies the
/// policy (its text is [`TOPOLOGY_ERROR`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyRejected;

impl std::fmt::Display for TopologyRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(TOPOLOGY_ERROR)
    }
}

impl std::error::Error for TopologyRejected {}

/// The affinity for a container's devices, or the topology rejection.
/// `Ok(None)`: no alignment (policy none, or no resource reports topology).
#[allow(clippy::too_many_arguments)]
pub fn container_affinity(
    st: &State,
    policy: TopologyPolicy,
    rule: HintMerge,
    uid: &str,
    container: &str,
    resources: &[(String, usize)],
    reusable: &BTreeMap<String, BTreeSet<String>>,
    pending: &BTreeMap<AllocKey, Allocation>,
) -> Result<Option<BTreeSet<i64>>, TopologyRejected> {
    if policy == TopologyPolicy::None {
        return Ok(None);
    }
    let nodes = numa_nodes(st);
    if nodes.is_empty() {
        return Ok(None);
    }
    let empty = BTreeSet::new();
    let hints: Vec<Option<Vec<Hint>>> = resources
        .iter()
        .map(|(res, n)| {
            let reuse = reusable.get(res).unwrap_or(&empty);
            resource_hints(st, &nodes, uid, container, res, *n, reuse, pending)
        })
        .collect();
    if hints.iter().all(Option::is_none) {
        return Ok(None);
    }
    let (best, admit) = merge_with(policy, rule, &nodes, &hints);
    if !admit {
        return Err(TopologyRejected);
    }
    Ok(best.affinity)
}

/// Split `available` devices of `resource` by `affinity` (the kubelet's
/// filterByAffinity): on an affinity node, on another node, without topology.
/// A device on several nodes can be in the first two.
pub fn filter_by_affinity(
    st: &State,
    resource: &str,
    available: &BTreeSet<String>,
    affinity: Option<&BTreeSet<i64>>,
) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut aligned, mut unaligned, mut none) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let r = st.resources.get(resource);
    let Some(h) = affinity.filter(|_| r.is_some_and(|r| r.has_topology())) else {
        return (aligned, unaligned, available.clone());
    };
    for id in available {
        let nodes = r.and_then(|r| r.devices.get(id)).map(|d| d.numa.as_slice()).unwrap_or(&[]);
        if nodes.is_empty() {
            none.insert(id.clone());
            continue;
        }
        if nodes.iter().any(|n| h.contains(n)) {
            aligned.insert(id.clone());
        }
        if nodes.iter().any(|n| !h.contains(n)) {
            unaligned.insert(id.clone());
        }
    }
    (aligned, unaligned, none)
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
