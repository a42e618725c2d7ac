//! Publishing the simulated driver's devices as a ResourceSlice
//! (resource.k8s.io/v1) to an API server named by a kubeconfig or the pod's
//! service account, so `dpctl dra serve` can stand in for a real driver: the
//! mock kubelet's local API server (http or https) or a real cluster's. The
//! client and the kubeconfig reading are [`crate::client::kube`].

use crate::core::{Error, Result};
use serde_json::{json, Value};
use std::time::Duration;

/// The ResourceSlice API path.
pub const SLICES_PATH: &str = "/apis/resource.k8s.io/v1/resourceslices";

pub use crate::client::kube::{load_kubeconfig, request, ApiServer};

/// The slice's object name: `<node>-<driver>-<pool>`, as a DNS subdomain.
pub fn slice_name(node: &str, driver: &str, pool: &str) -> String {
    let raw = format!("{node}-{driver}-{pool}").to_ascii_lowercase();
    let s: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect();
    let s = s.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    s.chars().take(253).collect()
}

/// The ResourceSlice for the driver's devices on `node`.
pub fn slice(name: &str, node: &str, driver: &str, pool: &str, devices: &[String]) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "dpctl"}},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices.iter().map(|d| json!({"name": d})).collect::<Vec<_>>(),
        }
    })
}

/// The most devices one ResourceSlice may list (`ResourceSliceMaxDevices`,
/// kubernetes pkg/apis/resource/types.go; the API server refuses more).
pub const MAX_DEVICES_PER_SLICE: usize = 128;

/// Split a pool's slice `obj` (named `name`, every device listed) into
/// slices of at most [`MAX_DEVICES_PER_SLICE`] devices: `name`, `name-1`,
/// …, each with the pool's `resourceSliceCount` (pure).
pub fn split_pool(name: &str, obj: Value) -> Vec<(String, Value)> {
    let devices = obj["spec"]["devices"].as_array().cloned().unwrap_or_default();
    let chunks: Vec<Vec<Value>> = if devices.is_empty() {
        vec![vec![]]
    } else {
        devices.chunks(MAX_DEVICES_PER_SLICE).map(<[Value]>::to_vec).collect()
    };
    let count = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, devs)| {
            let n = if i == 0 { name.to_string() } else { format!("{name}-{i}") };
            let mut o = obj.clone();
            o["metadata"]["name"] = json!(n);
            o["spec"]["devices"] = json!(devs);
            o["spec"]["pool"]["resourceSliceCount"] = json!(count);
            (n, o)
        })
        .collect()
}

/// The attribute a device's NUMA node is published as (unqualified: in the
/// driver's domain), the name dra.net and dra-driver-cpu use (`numaNode`,
/// `numaNodeID`).
pub const NUMA_ATTRIBUTE: &str = "numaNode";

/// Spread the slice's devices over `nodes` NUMA nodes the way `dpctl serve
/// --numa-nodes` spreads a device plugin's (device i on i*nodes/len).
pub fn spread_numa(obj: &mut Value, nodes: u32) {
    let Some(devs) = obj["spec"]["devices"].as_array_mut() else { return };
    let len = devs.len().max(1);
    for (i, d) in devs.iter_mut().enumerate() {
        d["attributes"][NUMA_ATTRIBUTE] = json!({"int": (i * nodes as usize / len) as i64});
    }
}

/// Give every device of the slice `conditions` as its bindingConditions
/// and `failures` as its bindingFailureConditions (KEP-5007; nothing when
/// `conditions` is empty). Validation (at most 4 of each, both or neither)
/// is the API server's.
pub fn bind_conditions(obj: &mut Value, conditions: &[String], failures: &[String]) {
    if conditions.is_empty() {
        return;
    }
    for d in obj["spec"]["devices"].as_array_mut().into_iter().flatten() {
        d["bindingConditions"] = json!(conditions);
        d["bindingFailureConditions"] = json!(failures);
    }
}

/// One `--shared-capacity` entry (KEP-5075): a capacity every device has,
/// shared by the claims allocated it, with an optional request policy
/// (`default`: what a request that names no amount takes; `step`: the
/// granularity of a request, from the default up: `validRange{min, step}`).
#[derive(Debug, Clone, PartialEq)]
pub struct SharedCapacity {
    /// The capacity's name (a QualifiedName; unqualified: the driver's domain).
    pub name: String,
    /// The device's whole capacity.
    pub value: String,
    /// requestPolicy.default.
    pub default: Option<String>,
    /// requestPolicy.validRange.step (min: the default, else the step).
    pub step: Option<String>,
}

/// Why a `--shared-capacity` value is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum CapacityError {
    /// Not `NAME=QUANTITY…` at all.
    Syntax(String),
    /// No capacity name before `=`.
    NoName(String),
    /// A quantity that does not parse.
    Quantity {
        /// The quantity.
        value: String,
        /// What the quantity parser said.
        message: String,
    },
    /// A part that is not `default=` or `step=` (or one given twice).
    Part {
        /// The whole value.
        value: String,
        /// The part.
        part: String,
    },
}

const CAPACITY_WANT: &str =
    "want NAME=QUANTITY[/default=QUANTITY][/step=QUANTITY], e.g. memory=8Gi/default=1Gi/step=1Gi";

impl std::fmt::Display for CapacityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapacityError::Syntax(s) => write!(f, "{s:?}: {CAPACITY_WANT}"),
            CapacityError::NoName(s) => write!(f, "{s:?}: no capacity name; {CAPACITY_WANT}"),
            CapacityError::Quantity { message, .. } => f.write_str(message),
            CapacityError::Part { value, part } => {
                write!(f, "{value:?}: {part:?} is not default=QUANTITY or step=QUANTITY (once each); {CAPACITY_WANT}")
            }
        }
    }
}

impl std::error::Error for CapacityError {}

impl std::str::FromStr for SharedCapacity {
    type Err = CapacityError;
    /// `NAME=QUANTITY[/default=QUANTITY][/step=QUANTITY]`.
    fn from_str(s: &str) -> std::result::Result<Self, CapacityError> {
        let mut parts = s.split('/');
        let (name, value) =
            parts.next().and_then(|p| p.split_once('=')).ok_or_else(|| CapacityError::Syntax(s.to_string()))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(CapacityError::NoName(s.to_string()));
        }
        let quantity = |q: &str| -> std::result::Result<String, CapacityError> {
            crate::controlplane::objects::quantity::Quantity::read(q)
                .map(|_| q.trim().to_string())
                .map_err(|e| CapacityError::Quantity { value: q.to_string(), message: e.to_string() })
        };
        let mut c = SharedCapacity { name: name.to_string(), value: quantity(value)?, default: None, step: None };
        for p in parts {
            match p.split_once('=') {
                Some(("default", q)) if c.default.is_none() => c.default = Some(quantity(q)?),
                Some(("step", q)) if c.step.is_none() => c.step = Some(quantity(q)?),
                _ => return Err(CapacityError::Part { value: s.to_string(), part: p.to_string() }),
            }
        }
        Ok(c)
    }
}

/// Make every device of the slice shareable (`allowMultipleAllocations`)
/// with `caps` as its capacities and their request policies (nothing when
/// `caps` is empty). Validation (names, a default within the range) is the
/// API server's.
pub fn share_capacity(obj: &mut Value, caps: &[SharedCapacity]) {
    if caps.is_empty() {
        return;
    }
    for d in obj["spec"]["devices"].as_array_mut().into_iter().flatten() {
        d["allowMultipleAllocations"] = json!(true);
        for c in caps {
            let mut cap = json!({"value": c.value});
            if c.default.is_some() || c.step.is_some() {
                let mut policy = json!({});
                if let Some(q) = c.default.as_ref().or(c.step.as_ref()) {
                    policy["default"] = json!(q);
                }
                if let Some(step) = &c.step {
                    policy["validRange"] = json!({"min": c.default.as_ref().unwrap_or(step), "step": step});
                }
                cap["requestPolicy"] = policy;
            }
            d["capacity"][&c.name] = cap;
        }
    }
}

/// Give every device of the slice `nodeAllocatableResources` (KEP-5517,
/// 1.37's field): each `(resource, quantity)` a mapping of
/// `deviceMultiplier` (an allocated device is that much of the node's
/// resource). The API server drops the field unless the
/// DRANodeAllocatableResources gate is on.
pub fn node_allocatable(obj: &mut Value, resources: &[(String, String)]) {
    if resources.is_empty() {
        return;
    }
    for d in obj["spec"]["devices"].as_array_mut().into_iter().flatten() {
        for (r, q) in resources {
            d["nodeAllocatableResources"][r] = json!({"mapping": {"deviceMultiplier": q}});
        }
    }
}

fn api_error(what: &str, status: u16, body: &Value) -> Error {
    let msg = body.get("message").and_then(Value::as_str).unwrap_or("");
    Error::failed(format!("{what}: the API server answered {status} {msg}"))
}

/// Create the slice, or replace the one already there.
pub async fn publish(api: &ApiServer, obj: &Value, t: Duration) -> Result<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let (st, body) = request(api, "POST", SLICES_PATH, Some(obj), t).await?;
    match st {
        200..=299 => Ok(()),
        409 => {
            let path = format!("{SLICES_PATH}/{name}");
            let (st, cur) = request(api, "GET", &path, None, t).await?;
            if !(200..=299).contains(&st) {
                return Err(api_error(&format!("get ResourceSlice {name}"), st, &cur));
            }
            let mut obj = obj.clone();
            obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
            let (st, body) = request(api, "PUT", &path, Some(&obj), t).await?;
            if (200..=299).contains(&st) {
                Ok(())
            } else {
                Err(api_error(&format!("replace ResourceSlice {name}"), st, &body))
            }
        }
        _ => Err(api_error(&format!("create ResourceSlice {name}"), st, &body)),
    }
}

/// Whether the slice `name` of `node` is there (a kubelet wipes a node's
/// slices when it starts). A list with the node's `spec.nodeName` field
/// selector, as the kubeletplugin helper watches them, not a GET by name:
/// kube-apiserver's Node authorizer lets a node's own credentials list
/// slices only with that selector, and GET only the slices its graph links
/// to the node, so a GET of the deleted slice is 403 for it, not 404.
pub async fn exists(api: &ApiServer, name: &str, node: &str, t: Duration) -> Result<bool> {
    let path = format!("{SLICES_PATH}?fieldSelector=spec.nodeName%3D{node}");
    let (st, body) = request(api, "GET", &path, None, t).await?;
    match st {
        200..=299 => Ok(body["items"].as_array().is_some_and(|i| i.iter().any(|s| s["metadata"]["name"] == name))),
        _ => Err(api_error(&format!("list the ResourceSlices of node {node}"), st, &body)),
    }
}

/// Delete the slice (a missing one is fine).
pub async fn withdraw(api: &ApiServer, name: &str, t: Duration) -> Result<()> {
    let (st, body) = request(api, "DELETE", &format!("{SLICES_PATH}/{name}"), None, t).await?;
    match st {
        200..=299 | 404 => Ok(()),
        _ => Err(api_error(&format!("delete ResourceSlice {name}"), st, &body)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_lists_every_device_in_one_pool_on_the_node() {
        assert_eq!(slice_name("Node_1", "gpu.example.com", "pool-0"), "node-1-gpu.example.com-pool-0");
        let s = slice("n-g-p", "node-1", "gpu.example.com", "pool-0", &["dev-0".into(), "dev-1".into()]);
        assert_eq!(s["spec"]["driver"], "gpu.example.com");
        assert_eq!(s["spec"]["nodeName"], "node-1");
        assert_eq!(s["spec"]["pool"]["resourceSliceCount"], 1);
        assert_eq!(s["spec"]["devices"][1]["name"], "dev-1");
    }

    #[test]
    fn numa_nodes_are_spread_as_serve_spreads_them_and_published_as_numa_node() {
        let devs: Vec<String> = (0..4).map(|i| format!("dev-{i}")).collect();
        let mut obj = slice("s", "n", "gpu.example.com", "p", &devs);
        spread_numa(&mut obj, 2);
        let got: Vec<i64> = obj["spec"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["attributes"]["numaNode"]["int"].as_i64().unwrap())
            .collect();
        assert_eq!(got, [0, 0, 1, 1]);
    }

    #[test]
    fn shared_capacity_makes_every_device_shareable_with_its_request_policy() {
        let caps: Vec<SharedCapacity> =
            ["memory=8Gi/default=1Gi/step=1Gi", "cores=4"].iter().map(|c| c.parse().unwrap()).collect();
        let mut obj = slice("s", "n", "gpu.example.com", "p", &["dev-0".into(), "dev-1".into()]);
        share_capacity(&mut obj, &caps);
        for d in obj["spec"]["devices"].as_array().unwrap() {
            assert_eq!(d["allowMultipleAllocations"], true);
            assert_eq!(
                d["capacity"],
                json!({"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}},
                       "cores": {"value": "4"}})
            );
        }
        let step: SharedCapacity = "memory=8Gi/step=2Gi".parse().unwrap();
        assert_eq!((step.default, step.step.as_deref()), (None, Some("2Gi")));
        for bad in ["memory", "=8Gi", "memory=lots", "memory=8Gi/default=x", "memory=8Gi/max=1", "m=1/step=1/step=2"] {
            assert!(bad.parse::<SharedCapacity>().is_err(), "{bad}");
        }
        let mut plain = slice("s", "n", "d", "p", &["dev-0".into()]);
        share_capacity(&mut plain, &[]);
        assert!(plain["spec"]["devices"][0].get("allowMultipleAllocations").is_none());
    }

    #[test]
    fn node_allocatable_resources_map_each_device_to_its_quantity() {
        let mut obj = slice("s", "n", "d", "p", &["dev-0".into()]);
        node_allocatable(&mut obj, &[("cpu".into(), "2".into()), ("memory".into(), "4Gi".into())]);
        assert_eq!(
            obj["spec"]["devices"][0]["nodeAllocatableResources"],
            json!({"cpu": {"mapping": {"deviceMultiplier": "2"}}, "memory": {"mapping": {"deviceMultiplier": "4Gi"}}})
        );
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn a_large_pool_is_split_into_slices_under_the_limit_that_name_their_count() {
        let devices: Vec<String> = (0..300).map(|i| format!("dev-{i}")).collect();
        let pool = split_pool("n-d-p", slice("n-d-p", "n", "d", "p", &devices));
        let names: Vec<&str> = pool.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["n-d-p", "n-d-p-1", "n-d-p-2"]);
        let sizes: Vec<usize> = pool.iter().map(|(_, o)| o["spec"]["devices"].as_array().unwrap().len()).collect();
        assert_eq!(sizes, [128, 128, 44]);
        assert!(pool.iter().all(|(n, o)| o["spec"]["pool"]["resourceSliceCount"] == 3 && o["metadata"]["name"] == *n));
        assert_eq!(pool[2].1["spec"]["devices"][43]["name"], "dev-299");
        // A small pool stays one slice of its name; an empty one too.
        let one = split_pool("x", slice("x", "n", "d", "p", &devices[..4]));
        assert_eq!(
            (one.len(), one[0].0.as_str(), &one[0].1["spec"]["pool"]["resourceSliceCount"]),
            (1, "x", &json!(1))
        );
        assert_eq!(split_pool("x", slice("x", "n", "d", "p", &[])).len(), 1);
    }
}
