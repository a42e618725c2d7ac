//! The scheduler's part, standing in for kube-scheduler's structured
//! allocator: given a claim's spec, the device classes, the candidate
//! devices (from ResourceSlices and health streams) and the devices other
//! claims hold, pick devices or say why not. Pure (no I/O, no async); the
//! kubelet records what it returns. Its subset is documented in
//! [`super::objects`]; a later rewrite to the scheduler's allocator keeps
//! this boundary: [`allocate`] in, [`Allocated`] or [`Unallocatable`] out.

use super::objects::{ClaimSpec, Request, Selector};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A device the allocator may hand out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its driver.
    pub driver: String,
    /// Its pool.
    pub pool: String,
    /// Its name.
    pub device: String,
    /// Its attributes (fully qualified names).
    pub attributes: BTreeMap<String, Value>,
    /// Its slice's skipNodeOperations.
    pub skip: Vec<String>,
}

/// One allocated device (status.allocation.devices.results[]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocated {
    /// The request it satisfies.
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
    /// adminAccess.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
    /// skipNodeOperations, copied from the device's slice (KEP-5945).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_node_operations: Vec<String>,
}

fn matches(c: &Candidate, sel: &[Selector]) -> bool {
    sel.iter().all(|s| match s {
        Selector::Driver(d) => &c.driver == d,
        Selector::Attribute(k, v) => c.attributes.get(k) == Some(v),
    })
}

/// What one allocation works over (pure inputs).
struct Pool<'a> {
    claim: &'a str,
    classes: &'a BTreeMap<String, Vec<Selector>>,
    candidates: &'a [Candidate],
    taken: &'a BTreeSet<(String, String, String)>,
    drivers: &'a BTreeSet<String>,
}

type Key = (String, String, String);

/// Why a claim cannot be allocated (its `Display` is the text the kubelet's
/// prepare error carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unallocatable {
    /// The request names a device class that does not exist.
    NoClass {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (sub-)request.
        request: String,
        /// The class it names.
        class: String,
    },
    /// Fewer free devices fit the request than it wants.
    TooFew {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (sub-)request.
        request: String,
        /// How many it wants (None: all).
        want: Option<u64>,
        /// Its class.
        class: String,
        /// Devices that fit.
        fitting: usize,
        /// Of those, free.
        free: usize,
    },
    /// No sub-request of a firstAvailable request can be allocated.
    NoSubRequest {
        /// `namespace/name` of the claim.
        claim: String,
        /// The request.
        request: String,
        /// Each sub-request's reason.
        reasons: Vec<Unallocatable>,
    },
}

impl std::fmt::Display for Unallocatable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unallocatable::NoClass { claim, request, class } => write!(
                f,
                "claim {claim}: request {request:?}: device class {class:?} not found (add a DeviceClass manifest, or name a registered driver)"
            ),
            Unallocatable::TooFew { claim, request, want, class, fitting, free } => {
                let hint = if *fitting == 0 {
                    " (devices come from ResourceSlice manifests and from the driver's health stream)"
                } else {
                    ""
                };
                let want = want.map_or_else(|| "all".to_string(), |n| n.to_string());
                write!(
                    f,
                    "claim {claim}: request {request:?} wants {want} device(s) of class {class:?}; {fitting} match, {free} of them free{hint}"
                )
            }
            Unallocatable::NoSubRequest { claim, request, reasons } => {
                let words: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "claim {claim}: no sub-request of firstAvailable request {request:?} can be allocated: {}",
                    words.join("; ")
                )
            }
        }
    }
}

impl std::error::Error for Unallocatable {}

impl Pool<'_> {
    /// The devices for one (sub-)request `r`, recorded as `label`, given the claim's own picks `mine`.
    fn pick(&self, r: &Request, label: &str, mine: &BTreeSet<Key>) -> Result<Vec<Allocated>, Unallocatable> {
        let claim = self.claim;
        let class = match self.classes.get(&r.class) {
            Some(s) => s.clone(),
            None if self.drivers.contains(&r.class) || self.candidates.iter().any(|c| c.driver == r.class) => {
                vec![Selector::Driver(r.class.clone())]
            }
            None => {
                return Err(Unallocatable::NoClass {
                    claim: claim.to_string(),
                    request: label.to_string(),
                    class: r.class.clone(),
                })
            }
        };
        let fitting: Vec<&Candidate> =
            self.candidates.iter().filter(|c| matches(c, &class) && matches(c, &r.selectors)).collect();
        let key = |c: &Candidate| (c.driver.clone(), c.pool.clone(), c.device.clone());
        let free: Vec<&Candidate> = fitting
            .iter()
            .copied()
            .filter(|c| !mine.contains(&key(c)) && (r.admin || !self.taken.contains(&key(c))))
            .collect();
        let want = if r.all { fitting.len() as u64 } else { r.count };
        if want == 0 || (free.len() as u64) < want {
            return Err(Unallocatable::TooFew {
                claim: claim.to_string(),
                request: label.to_string(),
                want: (!r.all).then_some(want),
                class: r.class.clone(),
                fitting: fitting.len(),
                free: free.len(),
            });
        }
        Ok(free
            .into_iter()
            .take(want as usize)
            .map(|c| Allocated {
                request: label.to_string(),
                driver: c.driver.clone(),
                pool: c.pool.clone(),
                device: c.device.clone(),
                admin: r.admin,
                skip_node_operations: c.skip.clone(),
            })
            .collect())
    }

    /// Requests `reqs[i..]`, trying each sub-request of a firstAvailable
    /// request in order and going back when a later request cannot be met.
    fn from(
        &self,
        reqs: &[Request],
        i: usize,
        mine: &mut BTreeSet<Key>,
        out: &mut Vec<Allocated>,
    ) -> Result<(), Unallocatable> {
        let Some(r) = reqs.get(i) else { return Ok(()) };
        let options: Vec<(&Request, String)> = if r.first_available.is_empty() {
            vec![(r, r.name.clone())]
        } else {
            r.first_available.iter().map(|s| (s, format!("{}/{}", r.name, s.name))).collect()
        };
        let mut errors = Vec::new();
        for (opt, label) in &options {
            let picked = match self.pick(opt, label, mine) {
                Ok(p) => p,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let (saved, len) = (mine.clone(), out.len());
            mine.extend(picked.iter().map(|a| (a.driver.clone(), a.pool.clone(), a.device.clone())));
            out.extend(picked);
            match self.from(reqs, i + 1, mine, out) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    *mine = saved;
                    out.truncate(len);
                    errors.push(e);
                }
            }
        }
        match errors.pop() {
            Some(e) if options.len() == 1 => Err(e),
            last => {
                errors.extend(last);
                Err(Unallocatable::NoSubRequest {
                    claim: self.claim.to_string(),
                    request: r.name.clone(),
                    reasons: errors,
                })
            }
        }
    }
}

/// Allocate `spec` over `candidates`; `taken` holds (driver, pool, device)
/// already given to other claims; `drivers` are the registered drivers (a
/// class may name one). Pure: the caller records the result.
pub fn allocate(
    claim: &str,
    spec: &ClaimSpec,
    classes: &BTreeMap<String, Vec<Selector>>,
    candidates: &[Candidate],
    taken: &BTreeSet<(String, String, String)>,
    drivers: &BTreeSet<String>,
) -> Result<Vec<Allocated>, Unallocatable> {
    let pool = Pool { claim, classes, candidates, taken, drivers };
    let mut out = Vec::new();
    pool.from(&spec.requests, 0, &mut BTreeSet::new(), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::dra::objects::{parse, Object};
    use serde_json::json;

    fn cand(driver: &str, dev: &str, model: &str) -> Candidate {
        Candidate {
            driver: driver.into(),
            pool: "node-1".into(),
            device: dev.into(),
            attributes: [(format!("{driver}/model"), json!(model))].into_iter().collect(),
            skip: vec![],
        }
    }

    #[test]
    fn the_allocator_counts_selects_and_shares_only_with_admin_access() {
        let cands = vec![
            cand("gpu.x", "g0", "a"),
            cand("gpu.x", "g1", "b"),
            cand("gpu.x", "g2", "a"),
            cand("nic.x", "n0", "a"),
        ];
        let req = |count, sel: Vec<Selector>, admin| ClaimSpec {
            requests: vec![Request {
                name: "r".into(),
                class: "gpu.x".into(),
                count,
                all: false,
                selectors: sel,
                admin,
                first_available: vec![],
            }],
        };
        let none = BTreeMap::new();
        let got = allocate("ns/c", &req(2, vec![], false), &none, &cands, &BTreeSet::new(), &BTreeSet::new()).unwrap();
        assert_eq!(got.iter().map(|a| a.device.as_str()).collect::<Vec<_>>(), ["g0", "g1"]);
        let sel = vec![Selector::Attribute("gpu.x/model".into(), json!("a"))];
        let taken: BTreeSet<_> = [("gpu.x".to_string(), "node-1".to_string(), "g0".to_string())].into();
        let got = allocate("ns/c", &req(1, sel.clone(), false), &none, &cands, &taken, &BTreeSet::new()).unwrap();
        assert_eq!(got[0].device, "g2");
        let e = allocate("ns/c", &req(2, sel.clone(), false), &none, &cands, &taken, &BTreeSet::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 match, 1 of them free"), "{e}");
        assert_eq!(allocate("ns/c", &req(2, sel, true), &none, &cands, &taken, &BTreeSet::new()).unwrap().len(), 2);
        let e = allocate(
            "ns/c",
            &ClaimSpec {
                requests: vec![Request { class: "nope".into(), ..req(1, vec![], false).requests[0].clone() }],
            },
            &none,
            &cands,
            &taken,
            &BTreeSet::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("device class \"nope\" not found"), "{e}");
        let registered: BTreeSet<String> = ["nope".to_string()].into();
        let e = allocate(
            "ns/c",
            &ClaimSpec {
                requests: vec![Request { class: "nope".into(), ..req(1, vec![], false).requests[0].clone() }],
            },
            &none,
            &cands,
            &taken,
            &registered,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("0 match, 0 of them free (devices come from ResourceSlice manifests"), "{e}");
        let classes: BTreeMap<_, _> =
            [("any-a".to_string(), vec![Selector::Attribute("nic.x/model".into(), json!("a"))])].into();
        let spec = ClaimSpec {
            requests: vec![Request { class: "any-a".into(), all: true, ..req(1, vec![], false).requests[0].clone() }],
        };
        let got = allocate("ns/c", &spec, &classes, &cands, &BTreeSet::new(), &BTreeSet::new()).unwrap();
        assert_eq!(got.iter().map(|a| a.device.as_str()).collect::<Vec<_>>(), ["n0"]);
    }

    fn claim(spec: Value) -> ClaimSpec {
        let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": spec});
        match parse(&v).unwrap() {
            Object::Claim { spec, .. } => spec,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn first_available_takes_the_first_sub_request_that_fits_and_names_it() {
        let cands = vec![cand("gpu.x", "g0", "small"), cand("gpu.x", "g1", "small"), cand("nic.x", "n0", "a")];
        let spec = claim(json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.x", "selectors": [{"cel": {"expression": "device.attributes[\"gpu.x\"].model == \"big\""}}]},
            {"name": "two-small", "deviceClassName": "gpu.x", "count": 2},
        ]}]}}));
        let none = BTreeMap::new();
        let got = allocate("ns/c", &spec, &none, &cands, &BTreeSet::new(), &BTreeSet::new()).unwrap();
        let words: Vec<String> = got.iter().map(|a| format!("{} {}", a.request, a.device)).collect();
        assert_eq!(words, ["gpu/two-small g0", "gpu/two-small g1"]);
        // None fits: every sub-request's reason.
        let taken: BTreeSet<_> = [("gpu.x".to_string(), "node-1".to_string(), "g0".to_string())].into();
        let e = allocate("ns/c", &spec, &none, &cands, &taken, &BTreeSet::new()).unwrap_err().to_string();
        assert!(
            e.contains("no sub-request of firstAvailable request \"gpu\"")
                && e.contains("\"gpu/big\"")
                && e.contains("\"gpu/two-small\" wants 2"),
            "{e}"
        );
        // A later request that cannot be met sends the allocator back to the next sub-request.
        let spec = claim(json!({"devices": {"requests": [
            {"name": "any", "firstAvailable": [{"name": "first", "deviceClassName": "gpu.x"}, {"name": "nic", "deviceClassName": "nic.x"}]},
            {"name": "both", "exactly": {"deviceClassName": "gpu.x", "count": 2}},
        ]}}));
        let got = allocate("ns/c", &spec, &none, &cands, &BTreeSet::new(), &BTreeSet::new()).unwrap();
        let words: Vec<String> = got.iter().map(|a| format!("{} {}", a.request, a.device)).collect();
        assert_eq!(words, ["any/nic n0", "both g0", "both g1"]);
        let bad = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "x"}, "firstAvailable": [{"name": "s", "deviceClassName": "x"}]}]}}});
        assert!(parse(&bad).unwrap_err().contains("exactly one of exactly and firstAvailable"));
    }

    #[test]
    fn a_slices_skip_node_operations_reach_the_allocation() {
        let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "cp.x", "pool": {"name": "p"}, "devices": [{"name": "v0"}], "skipNodeOperations": ["*"]}});
        let Object::Slice { skip, .. } = parse(&slice).unwrap() else { panic!() };
        assert_eq!(skip, ["*"]);
        let mut c = cand("cp.x", "v0", "a");
        c.skip = skip;
        let spec = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "cp.x"}}]}}));
        let got = allocate("ns/c", &spec, &BTreeMap::new(), &[c], &BTreeSet::new(), &BTreeSet::new()).unwrap();
        assert_eq!(got[0].skip_node_operations, ["*"]);
    }
}
