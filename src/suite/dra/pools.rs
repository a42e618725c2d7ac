//! DRA-SLICE-001's judgement (pure): the driver's ResourceSlices for the
//! node make complete pools with devices. The scheduler allocates from
//! slices alone, and only from a pool whose slices of its newest
//! generation number `resourceSliceCount` (kubernetes
//! staging/src/k8s.io/dynamic-resource-allocation/structured/pools.go:
//! an incomplete pool is not allocated from).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The (pool, device) pairs the slices list.
pub(super) fn devices(slices: &[Value]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for s in slices {
        let pool = s["spec"]["pool"]["name"].as_str().unwrap_or_default();
        for d in s["spec"]["devices"].as_array().into_iter().flatten() {
            out.insert((pool.to_string(), d["name"].as_str().unwrap_or_default().to_string()));
        }
    }
    out
}

/// Why the node's slices of a driver give the scheduler nothing (or not all) to allocate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PoolsWrong {
    /// The driver published no ResourceSlice for the node.
    NoSlice {
        /// The node.
        node: String,
    },
    /// A slice lists more devices than the API allows in one slice.
    TooManyDevices {
        /// The slice's name.
        slice: String,
        /// How many devices it lists.
        devices: usize,
        /// The API's limit.
        max: usize,
    },
    /// Fewer slices of a pool's newest generation than its resourceSliceCount.
    Incomplete {
        /// The pool.
        pool: String,
        /// Its resourceSliceCount.
        count: i64,
        /// The slices published at its newest generation.
        published: usize,
        /// That generation.
        generation: i64,
    },
    /// Every slice lists no device.
    NoDevices {
        /// The slices' names.
        slices: Vec<String>,
        /// Their pools.
        pools: Vec<String>,
    },
}

impl std::fmt::Display for PoolsWrong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolsWrong::NoSlice { node } => write!(f, "no ResourceSlice of the driver for node {node}"),
            PoolsWrong::TooManyDevices { slice, devices, max } => write!(
                f,
                "ResourceSlice {slice} lists {devices} devices; the API allows {max} per slice (ResourceSliceMaxDevices, kubernetes pkg/apis/resource/types.go): split the pool into more slices"
            ),
            PoolsWrong::Incomplete { pool, count, published, generation } => write!(
                f,
                "pool {pool} is incomplete: resourceSliceCount {count}, {published} slice(s) published at generation {generation} (the scheduler allocates nothing from it)"
            ),
            PoolsWrong::NoDevices { slices, pools } => write!(
                f,
                "ResourceSlice {} lists no devices (0 device(s) in pool {}): nothing can be allocated",
                slices.join(", "),
                pools.join(", ")
            ),
        }
    }
}

impl std::error::Error for PoolsWrong {}

/// What the node's slices of the driver publish: `Ok(note)` when every pool
/// is complete and they list devices, else what is wrong.
pub(super) fn judge(slices: &[Value], node: &str) -> Result<String, PoolsWrong> {
    if slices.is_empty() {
        return Err(PoolsWrong::NoSlice { node: node.to_string() });
    }
    // pool → (newest generation, resourceSliceCount, slices of it, devices)
    let mut pools: BTreeMap<String, (i64, i64, usize, usize)> = BTreeMap::new();
    for s in slices {
        let p = &s["spec"]["pool"];
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let generation = p["generation"].as_i64().unwrap_or(0);
        let count = p["resourceSliceCount"].as_i64().unwrap_or(1);
        let n = s["spec"]["devices"].as_array().map(Vec::len).unwrap_or(0);
        let e = pools.entry(name).or_insert((generation, count, 0, 0));
        if generation > e.0 {
            *e = (generation, count, 0, 0);
        }
        if generation == e.0 {
            e.2 += 1;
            e.3 += n;
        }
    }
    let max = crate::plugin::dra::slices::MAX_DEVICES_PER_SLICE;
    if let Some(s) = slices.iter().find(|s| s["spec"]["devices"].as_array().is_some_and(|d| d.len() > max)) {
        return Err(PoolsWrong::TooManyDevices {
            slice: s["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            devices: s["spec"]["devices"].as_array().map(Vec::len).unwrap_or(0),
            max,
        });
    }
    for (name, (generation, count, published, _)) in &pools {
        if (*published as i64) < *count {
            return Err(PoolsWrong::Incomplete {
                pool: name.clone(),
                count: *count,
                published: *published,
                generation: *generation,
            });
        }
    }
    let total: usize = pools.values().map(|p| p.3).sum();
    if total == 0 {
        return Err(PoolsWrong::NoDevices {
            slices: slices.iter().filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string)).collect(),
            pools: pools.keys().cloned().collect(),
        });
    }
    let mut notes = Vec::new();
    for (name, p) in &pools {
        if p.2 > 1 {
            notes.push(format!("{} device(s) in pool {name} ({} slices)", p.3, p.2));
        } else {
            notes.push(format!("{} device(s) in pool {name}", p.3));
        }
    }
    Ok(notes.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(name: &str, pool: &str, generation: i64, count: i64, devices: &[&str]) -> Value {
        json!({"metadata": {"name": name}, "spec": {"pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices.iter().map(|d| json!({"name": d})).collect::<Vec<_>>()}})
    }

    #[test]
    fn complete_pools_with_devices_pass_and_the_missed_classes_fail() {
        let ok = [slice("s1", "p", 1, 2, &["a"]), slice("s2", "p", 1, 2, &["b"])];
        assert_eq!(devices(&ok).len(), 2);
        // One of two slices published (issue 35: resourceSliceCount 2, one slice).
        let e = judge(&ok[..1], "n").unwrap_err();
        assert_eq!(e, PoolsWrong::Incomplete { pool: "p".into(), count: 2, published: 1, generation: 1 });
        let e = e.to_string();
        assert!(e.starts_with("pool p is incomplete: resourceSliceCount 2, 1 slice(s) published"), "{e}");
        // A slice without devices (dra-driver-nvidia-gpu#1008).
        let e = judge(&[slice("s", "p", 1, 1, &[])], "n").unwrap_err().to_string();
        assert!(e.contains("lists no devices (0 device(s) in pool p)"), "{e}");
        // Only the newest generation counts: an old slice does not complete a new pool.
        let e =
            judge(&[slice("old", "p", 1, 2, &["a"]), slice("new", "p", 2, 2, &["a"])], "n").unwrap_err().to_string();
        assert!(e.contains("at generation 2"), "{e}");
        assert!(judge(&[], "n").unwrap_err().to_string().contains("no ResourceSlice of the driver for node n"));
        // Over the API's 128 devices per slice (a real API server refuses it).
        let many: Vec<String> = (0..129).map(|i| format!("d{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = judge(&[slice("big", "p", 1, 1, &many)], "n").unwrap_err().to_string();
        assert!(e.starts_with("ResourceSlice big lists 129 devices; the API allows 128"), "{e}");
        assert_eq!(judge(&ok, "n").unwrap(), "2 device(s) in pool p (2 slices)");
    }
}
