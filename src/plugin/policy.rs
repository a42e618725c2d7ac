//! GetPreferredAllocation policies. Both always honour must-include and size
//! (as far as the available list allows).

use crate::plugin::config::Policy;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Compare IDs the way a person would: `gpu-2` before `gpu-10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let nx = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let ny = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (dx, dy) = (trim_zeros(&x[..nx]), trim_zeros(&y[..ny]));
                let o = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(dy)).then_with(|| nx.cmp(&ny));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[nx..];
                y = &y[ny..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let z = d.iter().take_while(|c| **c == b'0').count();
    &d[z.min(d.len().saturating_sub(1))..]
}

/// Choose `size` devices from `available`, starting with `must_include`.
/// `numa` gives a device's NUMA node (None: no topology).
pub fn choose(
    policy: Policy,
    available: &[String],
    must_include: &[String],
    size: usize,
    numa: impl Fn(&str) -> Option<i64>,
) -> Vec<String> {
    // A set for membership: a request may carry 100,000s of IDs.
    let mut must: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut chosen: Vec<String> = Vec::new();
    for m in must_include {
        if must.insert(m.as_str()) {
            chosen.push(m.clone());
        }
    }
    let mut rest: Vec<&String> = available.iter().filter(|a| !must.contains(a.as_str())).collect();
    rest.sort_by(|a, b| natural_cmp(a, b));
    rest.dedup();
    let mut need = size.saturating_sub(chosen.len()).min(rest.len());
    if need == 0 {
        return chosen;
    }
    // Group the candidates by NUMA node (None sorts first, as its own group).
    let mut groups: BTreeMap<Option<i64>, Vec<&String>> = BTreeMap::new();
    for id in rest {
        groups.entry(numa(id)).or_default().push(id);
    }
    let used = |chosen: &[String], node: &Option<i64>| chosen.iter().filter(|c| &numa(c) == node).count();
    match policy {
        Policy::Packed => {
            while need > 0 {
                // Prefer nodes already in use; then a node that can finish the
                // job alone (the smallest such); then the largest node.
                let pick = groups
                    .iter()
                    .filter(|(_, ids)| !ids.is_empty())
                    .min_by(|(na, a), (nb, b)| {
                        let ua = used(&chosen, na) > 0;
                        let ub = used(&chosen, nb) > 0;
                        let fa = a.len() >= need;
                        let fb = b.len() >= need;
                        ub.cmp(&ua)
                            .then(fb.cmp(&fa))
                            .then_with(|| if fa && fb { a.len().cmp(&b.len()) } else { b.len().cmp(&a.len()) })
                            .then_with(|| natural_cmp(a[0], b[0]))
                    })
                    .map(|(n, _)| *n);
                let Some(node) = pick else { break };
                let ids = groups.get_mut(&node).map(std::mem::take).unwrap_or_default();
                let take = ids.len().min(need);
                chosen.extend(ids[..take].iter().map(|s| s.to_string()));
                need -= take;
            }
        }
        Policy::Distributed => {
            // Counts per node and queues, so each pick costs O(nodes), not O(chosen).
            let mut counts: BTreeMap<Option<i64>, usize> = BTreeMap::new();
            for c in &chosen {
                *counts.entry(numa(c)).or_default() += 1;
            }
            let mut queues: BTreeMap<Option<i64>, std::collections::VecDeque<&String>> =
                groups.into_iter().map(|(n, ids)| (n, ids.into())).collect();
            while need > 0 {
                let pick = queues
                    .iter()
                    .filter_map(|(n, ids)| ids.front().map(|first| (n, *first)))
                    .min_by(|(na, a), (nb, b)| {
                        let (ua, ub) = (counts.get(*na).copied().unwrap_or(0), counts.get(*nb).copied().unwrap_or(0));
                        ua.cmp(&ub).then_with(|| natural_cmp(a, b))
                    })
                    .map(|(n, _)| *n);
                let Some(node) = pick else { break };
                if let Some(id) = queues.get_mut(&node).and_then(|q| q.pop_front()) {
                    chosen.push(id.to_string());
                    *counts.entry(node).or_default() += 1;
                    need -= 1;
                }
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// gpu-0..gpu-7, four per NUMA node.
    fn numa(id: &str) -> Option<i64> {
        id.trim_start_matches("gpu-").parse::<i64>().ok().map(|n| n / 4)
    }

    #[test]
    fn natural_order() {
        let mut v = ids(&["gpu-10", "gpu-2", "gpu-1", "gpu-02"]);
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ids(&["gpu-1", "gpu-2", "gpu-02", "gpu-10"]));
    }

    #[test]
    fn packed_uses_fewest_numa_nodes_and_lowest_ids() {
        let all = ids(&["gpu-7", "gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6", "gpu-3"]);
        assert_eq!(choose(Policy::Packed, &all, &[], 2, numa), ids(&["gpu-0", "gpu-1"]));
        // node 0 has only 2 left: node 1 can satisfy 3 alone
        let some = ids(&["gpu-0", "gpu-1", "gpu-4", "gpu-5", "gpu-6"]);
        assert_eq!(choose(Policy::Packed, &some, &[], 3, numa), ids(&["gpu-4", "gpu-5", "gpu-6"]));
        // must-include on node 1 pulls the rest to node 1
        assert_eq!(choose(Policy::Packed, &all, &ids(&["gpu-6"]), 3, numa), ids(&["gpu-6", "gpu-4", "gpu-5"]));
        // more than one node holds
        assert_eq!(choose(Policy::Packed, &all, &[], 6, numa).len(), 6);
    }

    #[test]
    fn distributed_spreads() {
        let all = ids(&["gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5"]);
        assert_eq!(choose(Policy::Distributed, &all, &[], 2, numa), ids(&["gpu-0", "gpu-4"]));
        assert_eq!(choose(Policy::Distributed, &all, &ids(&["gpu-1"]), 3, numa), ids(&["gpu-1", "gpu-4", "gpu-0"]));
    }

    #[test]
    fn always_honours_must_include_and_size() {
        let all = ids(&["gpu-0", "gpu-1", "gpu-5"]);
        for p in [Policy::Packed, Policy::Distributed] {
            let got = choose(p, &all, &ids(&["gpu-5"]), 2, numa);
            assert_eq!(got.len(), 2);
            assert_eq!(got[0], "gpu-5");
            assert_eq!(choose(p, &all, &[], 9, numa).len(), 3, "capped at available");
            assert_eq!(choose(p, &all, &[], 1, |_| None), ids(&["gpu-0"]));
        }
    }
}
