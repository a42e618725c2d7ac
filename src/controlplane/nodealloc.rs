//! Node-allocatable resources through DRA (KEP-5517, the alpha
//! DRANodeAllocatableResources gate) as kube-scheduler's DynamicResources
//! plugin decides them, without I/O
//! (pkg/scheduler/framework/plugins/dynamicresources/nodeallocatabledynamicresources.go,
//! v1.37.2): what a pod's allocated devices make of the node's cpu, memory,
//! … (`status.nodeAllocatableResourceClaimStatuses`), whether a claim with a
//! mapped device may be shared, and whether the pod then fits the node
//! (its requests as component-helpers' `PodRequests` counts them, the DRA
//! part included). The control plane's controller uses it for pods of the
//! API bound to a node.
//!
//! 1.36 had another alpha of it ([`Accounting::Mappings`], v1.36.3's
//! nodeallocatabledynamicresources.go): a device's
//! `nodeAllocatableResourceMappings` (`{RESOURCE: {capacityKey,
//! allocationMultiplier}}`) found by pool and device name alone, only the
//! claims allocated in the scheduling cycle counted, no overheads, the pod
//! status a `resources` map, and other words for a shared claim.

use super::objects::quantity::Quantity;
use super::objects::{NodeAllocatable, Object};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Which release's KEP-5517 the scheduler's part follows (the
/// DRANodeAllocatableResources gate, alpha and off in 1.36 and 1.37; its
/// API changed between them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Accounting {
    /// The gate off: nothing is accounted.
    #[default]
    Off,
    /// 1.36: devices' `nodeAllocatableResourceMappings`, statuses with `resources`.
    Mappings,
    /// 1.37: devices' `nodeAllocatableResources`, statuses with `mapping` and `overhead`.
    Resources,
}

impl Accounting {
    /// The accounting of Kubernetes 1.`minor` with the gate `on` or off.
    pub fn of(minor: u32, on: bool) -> Accounting {
        match (on, minor) {
            (false, _) => Accounting::Off,
            (true, m) if m <= 36 => Accounting::Mappings,
            (true, _) => Accounting::Resources,
        }
    }

    /// Whether the gate is on.
    pub fn on(self) -> bool {
        self != Accounting::Off
    }
}

/// One of 1.36's `nodeAllocatableResourceMappings` entries (v1.36.3
/// `NodeAllocatableResourceMapping`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// capacityKey: the consumed capacity that is the base amount.
    pub capacity_key: Option<String>,
    /// allocationMultiplier (defaulted to 1 by the API server).
    pub multiplier: Option<Quantity>,
}

/// 1.36's node-allocatable devices: (pool, device) → resource → mapping, the
/// first device of that pool and name in the slices' order (getDeviceFromManager
/// looks a result's device up by pool name alone, in every slice).
pub type Mappings = BTreeMap<(String, String), BTreeMap<String, Mapping>>;

/// The devices of `slices` (ResourceSlices as the API serves them, every
/// node's) with `nodeAllocatableResourceMappings`. A device found before
/// under the same pool and name hides the later one, mappings or not.
pub fn mappings<'a>(slices: impl IntoIterator<Item = &'a Value>) -> Mappings {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Mappings::new();
    for s in slices {
        let pool = text(&s["spec"]["pool"]["name"]);
        for d in s["spec"]["devices"].as_array().into_iter().flatten() {
            let key = (pool.to_string(), text(&d["name"]).to_string());
            if !seen.insert(key.clone()) {
                continue;
            }
            let Some(m) = d["nodeAllocatableResourceMappings"].as_object().filter(|m| !m.is_empty()) else { continue };
            let entries = m
                .iter()
                .map(|(r, e)| {
                    let capacity_key = e["capacityKey"].as_str().map(str::to_string);
                    (r.clone(), Mapping { capacity_key, multiplier: quantity(&e["allocationMultiplier"]) })
                })
                .collect();
            out.insert(key, entries);
        }
    }
    out
}

fn quantity(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::read(s).ok(),
        Value::Number(n) => Quantity::read(&n.to_string()).ok(),
        _ => None,
    }
}

/// One entry of 1.36's `status.nodeAllocatableResourceClaimStatuses`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedStatus {
    /// The claim's name.
    pub resource_claim_name: String,
    /// The containers (init containers first) whose `resources.claims` name it.
    pub containers: Vec<String>,
    /// Resource → quantity.
    pub resources: BTreeMap<String, Quantity>,
}

impl MappedStatus {
    /// As the API writes it (`containers` omitempty, `resources` always).
    pub fn to_json(&self) -> Value {
        let mut v = json!({"resourceClaimName": self.resource_claim_name});
        if !self.containers.is_empty() {
            v["containers"] = json!(self.containers);
        }
        let r: serde_json::Map<String, Value> =
            self.resources.iter().map(|(n, q)| (n.clone(), json!(q.text()))).collect();
        v["resources"] = Value::Object(r);
        v
    }
}

/// 1.36's buildNodeAllocatableDRAInfo for claim `namespace/name` with
/// `results`: per result whose device has mappings, each mapping's quantity —
/// with a `capacityKey`, the capacity the result consumed (none of that key:
/// the mapping is skipped) times `allocationMultiplier`; without, the
/// multiplier — summed by resource; None when no device has mappings. An
/// error, in upstream's words: a `capacityKey` mapping of a result that
/// consumed no capacity at all.
pub fn mapped_status(
    namespace: &str,
    name: &str,
    results: &[Value],
    devices: &Mappings,
) -> Result<Option<MappedStatus>, Unschedulable> {
    let mut resources: BTreeMap<String, Option<Quantity>> = BTreeMap::new();
    for r in results {
        let key = (text(&r["pool"]).to_string(), text(&r["device"]).to_string());
        let Some(entries) = devices.get(&key) else { continue };
        for (resource, m) in entries {
            let q = match m.capacity_key.as_deref().filter(|k| !k.is_empty()) {
                Some(cap) => {
                    let consumed = &r["consumedCapacity"];
                    if !consumed.is_object() {
                        return Err(Unschedulable::NoConsumedCapacity {
                            claim: format!("{namespace}/{name}"),
                            device: text(&r["device"]).to_string(),
                            key: cap.to_string(),
                            resource: resource.clone(),
                            field: "NodeAllocatableResourceMappings",
                        });
                    }
                    let Some(c) = consumed.get(cap) else { continue };
                    let c = match c {
                        Value::String(s) => Quantity::read(s),
                        other => Quantity::read(&other.to_string()),
                    }
                    .map_err(Unschedulable::Quantity)?;
                    match &m.multiplier {
                        Some(x) => c.computed_like(c.nanos() * x.nanos() / 1_000_000_000),
                        None => c,
                    }
                }
                None => match &m.multiplier {
                    Some(x) => x.clone(),
                    None => Quantity::from_nanos(0),
                },
            };
            add(resources.entry(resource.clone()).or_default(), &q);
        }
    }
    if resources.is_empty() {
        return Ok(None);
    }
    let resources = resources.into_iter().filter_map(|(n, q)| Some((n, q?))).collect();
    Ok(Some(MappedStatus { resource_claim_name: name.to_string(), containers: vec![], resources }))
}

/// 1.36's validateNodeAllocatableDRAClaimSharing for an allocated claim
/// `name` of a pod being placed: `consumers` is how many other pods on the
/// node name it in their `status.nodeAllocatableResourceClaimStatuses`.
pub fn sharing_36(name: &str, consumers: usize) -> Result<(), Unschedulable> {
    match consumers {
        0 => Ok(()),
        1 => Err(Unschedulable::UsedByAnother(name.to_string())),
        _ => Err(Unschedulable::SharedByPods(name.to_string())),
    }
}

/// The node-allocatable entries of the devices of a node's slices:
/// (driver, pool, device) → resource → entry. Devices without any are left out.
pub type Devices = BTreeMap<(String, String, String), BTreeMap<String, NodeAllocatable>>;

/// The devices of `slices` (those of one node) with `nodeAllocatableResources`.
pub fn devices<'a>(slices: impl IntoIterator<Item = &'a Object>) -> Devices {
    let mut out = Devices::new();
    for s in slices {
        let Object::Slice { driver, pool, devices, .. } = s else { continue };
        for d in devices.iter().filter(|d| !d.node_allocatable.is_empty()) {
            out.insert((driver.clone(), pool.clone(), d.name.clone()), d.node_allocatable.clone());
        }
    }
    out
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn key(r: &Value) -> (String, String, String) {
    (text(&r["driver"]).to_string(), text(&r["pool"]).to_string(), text(&r["device"]).to_string())
}

/// claimHasNodeAllocatableMappedDevice: whether a device of `results` (a
/// claim's `status.allocation.devices.results`) has a `mapping` entry.
pub fn has_mapped(results: &[Value], devices: &Devices) -> bool {
    results.iter().any(|r| devices.get(&key(r)).is_some_and(|m| m.values().any(|e| e.mapped)))
}

/// Whether a device of `results` has node-allocatable resources at all
/// (calculateAndCheckNodeAllocatableResources: the claim is looked at).
pub fn has_any(results: &[Value], devices: &Devices) -> bool {
    results.iter().any(|r| devices.contains_key(&key(r)))
}

/// One overhead entry of a claim's status (v1.NodeAllocatableOverheadResources).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overhead {
    /// Per pod referencing the claim.
    pub per_pod: Option<Quantity>,
    /// Per container referencing it.
    pub per_container: Option<Quantity>,
}

/// One entry of `status.nodeAllocatableResourceClaimStatuses`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimStatus {
    /// The claim's name.
    pub resource_claim_name: String,
    /// The containers (init containers first) whose `resources.claims` name it.
    pub containers: Vec<String>,
    /// Resource → mapped quantity.
    pub mapping: BTreeMap<String, Quantity>,
    /// Resource → overhead.
    pub overhead: BTreeMap<String, Overhead>,
}

impl ClaimStatus {
    /// As the API writes it: empty lists left out (omitempty), lists sorted by name.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"resourceClaimName": self.resource_claim_name});
        if !self.containers.is_empty() {
            v["containers"] = json!(self.containers);
        }
        if !self.mapping.is_empty() {
            let m: Vec<Value> = self.mapping.iter().map(|(n, q)| json!({"name": n, "quantity": q.text()})).collect();
            v["mapping"] = json!(m);
        }
        if !self.overhead.is_empty() {
            let o: Vec<Value> = self
                .overhead
                .iter()
                .map(|(n, o)| {
                    let mut e = json!({"name": n});
                    if let Some(q) = &o.per_pod {
                        e["perPod"] = json!(q.text());
                    }
                    if let Some(q) = &o.per_container {
                        e["perContainer"] = json!(q.text());
                    }
                    e
                })
                .collect();
            v["overhead"] = json!(o);
        }
        v
    }
}

fn add(total: &mut Option<Quantity>, q: &Quantity) {
    *total = Some(match total.take() {
        None => q.computed_like(q.nanos()),
        Some(t) => t.computed_like(t.nanos() + q.nanos()),
    });
}

/// Why a pod does not fit a node by its node-allocatable resources
/// (UnschedulableAndUnresolvable), in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unschedulable {
    /// A `capacityKey` mapping of a result that consumed no capacity.
    NoConsumedCapacity {
        /// The claim.
        claim: String,
        /// The result's device.
        device: String,
        /// The mapping's `capacityKey`.
        key: String,
        /// The node-allocatable resource.
        resource: String,
        /// The device's field (1.37 `NodeAllocatableResources`, 1.36 `NodeAllocatableResourceMappings`).
        field: &'static str,
    },
    /// 1.36: a claim with mapped devices that no container names.
    NotReferenced(String),
    /// 1.36: a claim with node-allocatable resources that two or more pods on the node use.
    SharedByPods(String),
    /// 1.36: a claim with node-allocatable resources that another pod on the node uses.
    UsedByAnother(String),
    /// A consumed capacity that is no quantity.
    Quantity(super::objects::quantity::QuantityError),
    /// A pod-level request below what the containers and the claims ask (this resource).
    PodLevelRequest(String),
    /// A pod-level hugepages limit below the containers' with the DRA part (this resource).
    PodLevelLimit(String),
    /// A pod-level limit below a container's limit and its DRA overhead.
    ContainerLimit {
        /// The resource.
        resource: String,
        /// The container.
        container: String,
    },
    /// What the node's allocatable does not leave room for (nodeFitsResources' reasons).
    Insufficient(Vec<String>),
}

impl std::fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unschedulable::NoConsumedCapacity { claim, device, key, resource, field } => write!(
                f,
                "claim {claim}, device {device}: ConsumedCapacity is nil, but Capacity key '{key}' is set in {field} for resource {resource}"
            ),
            Unschedulable::NotReferenced(claim) => {
                write!(f, "claim {claim}: node-allocatable resource claim not referenced by any container within the pod")
            }
            Unschedulable::SharedByPods(claim) => {
                write!(f, "node allocatable resource claim {claim} shared by multiple pods")
            }
            Unschedulable::UsedByAnother(claim) => {
                write!(f, "node allocatable resource claim {claim} is already used by another pod")
            }
            Unschedulable::Quantity(e) => e.fmt(f),
            Unschedulable::PodLevelRequest(k) => write!(
                f,
                "pod level request for {k} is insufficient to cover the aggregated container and node-allocatable DRA requests"
            ),
            Unschedulable::PodLevelLimit(k) => write!(
                f,
                "pod level limit for {k} is insufficient to cover the aggregated container and node-allocatable DRA limits"
            ),
            Unschedulable::ContainerLimit { resource, container } => write!(
                f,
                "pod level limit for {resource} is insufficient to cover the limit and DRA overhead for container {container}"
            ),
            Unschedulable::Insufficient(reasons) => f.write_str(&reasons.join(", ")),
        }
    }
}

impl std::error::Error for Unschedulable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unschedulable::Quantity(e) => Some(e),
            _ => None,
        }
    }
}

/// buildNodeAllocatableDRAInfo for one claim `name` with `results`: the
/// mapped quantities (a `deviceMultiplier` per device; with `capacityKey`,
/// the capacity the result consumed times `capacityMultiplier`) and the
/// overheads summed over its devices; None when they add up to nothing.
/// An error, as upstream's (the pod then is not scheduled): a `capacityKey`
/// mapping of a result that consumed no capacity.
pub fn claim_status(name: &str, results: &[Value], devices: &Devices) -> Result<Option<ClaimStatus>, Unschedulable> {
    let mut mapped: BTreeMap<String, Option<Quantity>> = BTreeMap::new();
    let mut overhead: BTreeMap<String, (Option<Quantity>, Option<Quantity>)> = BTreeMap::new();
    for r in results {
        // A device without node-allocatable resources adds nothing.
        let Some(entries) = devices.get(&key(r)) else { continue };
        for (resource, e) in entries {
            if let Some(cap) = e.capacity_key.as_deref().filter(|k| !k.is_empty()) {
                let consumed = &r["consumedCapacity"];
                if !consumed.is_object() {
                    return Err(Unschedulable::NoConsumedCapacity {
                        claim: name.to_string(),
                        device: text(&r["device"]).to_string(),
                        key: cap.to_string(),
                        resource: resource.clone(),
                        field: "NodeAllocatableResources",
                    });
                }
                let Some(c) = consumed.get(cap) else { continue };
                let c = match c {
                    Value::String(s) => Quantity::read(s),
                    other => Quantity::read(&other.to_string()),
                }
                .map_err(Unschedulable::Quantity)?;
                let q = match &e.capacity_multiplier {
                    Some(m) if m.nanos() != 1_000_000_000 => c.computed_like(c.nanos() * m.nanos() / 1_000_000_000),
                    _ => c,
                };
                add(mapped.entry(resource.clone()).or_default(), &q);
            } else if let Some(m) = &e.device_multiplier {
                add(mapped.entry(resource.clone()).or_default(), m);
            }
            if e.per_pod.is_some() || e.per_container.is_some() {
                let o = overhead.entry(resource.clone()).or_default();
                if let Some(q) = &e.per_pod {
                    add(&mut o.0, q);
                }
                if let Some(q) = &e.per_container {
                    add(&mut o.1, q);
                }
            }
        }
    }
    let mapping: BTreeMap<String, Quantity> = mapped.into_iter().filter_map(|(n, q)| Some((n, q?))).collect();
    let overhead: BTreeMap<String, Overhead> =
        overhead.into_iter().map(|(n, (p, c))| (n, Overhead { per_pod: p, per_container: c })).collect();
    if mapping.is_empty() && overhead.is_empty() {
        return Ok(None);
    }
    Ok(Some(ClaimStatus { resource_claim_name: name.to_string(), containers: vec![], mapping, overhead }))
}

/// The containers of `pod` (init containers, then containers) that name
/// pod claim `pod_claim` in `resources.claims`, once per naming entry, as
/// buildNodeAllocatableDRAInfo lists them.
pub fn containers_naming(pod: &Value, pod_claim: &str) -> Vec<String> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| pod["spec"][*k].as_array().into_iter().flatten())
        .flat_map(|c| {
            let n = c["resources"]["claims"]
                .as_array()
                .map_or(0, |cl| cl.iter().filter(|x| x["name"] == pod_claim).count());
            std::iter::repeat_n(text(&c["name"]).to_string(), n)
        })
        .collect()
}

/// The refusal of validateNodeAllocatableDRAClaimSharing for claim `name`.
pub fn sharing_refused(name: &str) -> String {
    format!("node allocatable resource claim {name} has a mapped device and cannot be shared across pods")
}

/// A resource list in nano-units.
pub type Resources = BTreeMap<String, i128>;

fn quantities(v: &Value) -> Resources {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let q = match q {
                Value::String(s) => Quantity::read(s).ok()?,
                other => Quantity::read(&other.to_string()).ok()?,
            };
            Some((k.clone(), q.nanos()))
        })
        .collect()
}

fn add_all(to: &mut Resources, from: &Resources) {
    for (k, v) in from {
        *to.entry(k.clone()).or_default() += v;
    }
}

fn max_all(to: &mut Resources, from: &Resources) {
    for (k, v) in from {
        let e = to.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// A container's requests: `requests`, and `limits` where a request is
/// not given (the API's defaulting copies a limit into a missing request).
fn container_requests(c: &Value) -> Resources {
    let mut r = quantities(&c["resources"]["limits"]);
    r.extend(quantities(&c["resources"]["requests"]));
    r
}

/// addDRANodeAllocatableClaimResources: each status's mapped quantities,
/// and its overheads per pod plus per container times its containers (1.37);
/// or each status's `resources` (1.36's AggregateContainerRequests).
pub fn dra_resources(statuses: &Value) -> Resources {
    let mut out = Resources::new();
    for st in statuses.as_array().into_iter().flatten() {
        add_all(&mut out, &quantities(&st["resources"]));
        for m in st["mapping"].as_array().into_iter().flatten() {
            add_all(&mut out, &quantities(&json!({ text(&m["name"]): m["quantity"] })));
        }
        let refs = st["containers"].as_array().map_or(0, Vec::len) as i128;
        for o in st["overhead"].as_array().into_iter().flatten() {
            let q = |k: &str| quantities(&json!({ "q": o[k] })).get("q").copied().unwrap_or(0);
            let n = q("perPod") + if refs > 0 { q("perContainer") * refs } else { 0 };
            *out.entry(text(&o["name"]).to_string()).or_default() += n;
        }
    }
    out
}

/// IsSupportedPodLevelResource: cpu, memory and hugepages.
fn pod_level(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// AggregateContainerRequests with the DRA part: the containers summed,
/// restartable init containers added, each other init container's need
/// (with the sidecars started before it) as a floor; then `statuses`'
/// resources added (the pod's `nodeAllocatableResourceClaimStatuses`).
pub fn aggregate_requests(pod: &Value, statuses: &Value) -> Resources {
    let mut result = aggregate(pod, container_requests);
    add_all(&mut result, &dra_resources(statuses));
    result
}

/// PodRequests with DRANodeAllocatableResources and PodLevelResources on:
/// [`aggregate_requests`], the pod-level requests (cpu, memory, hugepages)
/// in place of theirs, `spec.overhead` added.
pub fn pod_requests(pod: &Value, statuses: &Value) -> Resources {
    let mut r = aggregate_requests(pod, statuses);
    for (k, v) in quantities(&pod["spec"]["resources"]["requests"]) {
        if pod_level(&k) {
            r.insert(k, v);
        }
    }
    add_all(&mut r, &quantities(&pod["spec"]["overhead"]));
    r
}

/// GetContainerDRAAllocations: what the statuses naming container `name`
/// give it — mapped quantities, and per overhead `perPod + perContainer`.
pub fn container_dra(statuses: &Value, name: &str) -> Resources {
    let mut out = Resources::new();
    for st in statuses.as_array().into_iter().flatten() {
        if !st["containers"].as_array().is_some_and(|c| c.iter().any(|c| c == name)) {
            continue;
        }
        for m in st["mapping"].as_array().into_iter().flatten() {
            add_all(&mut out, &quantities(&json!({ text(&m["name"]): m["quantity"] })));
        }
        for o in st["overhead"].as_array().into_iter().flatten() {
            let q = |k: &str| quantities(&json!({ "q": o[k] })).get("q").copied().unwrap_or(0);
            *out.entry(text(&o["name"]).to_string()).or_default() += q("perPod") + q("perContainer");
        }
    }
    out
}

/// A pod's containers aggregated as the scheduler aggregates them (`of`
/// each container's requests or limits): the containers summed, restartable
/// init containers added, each other init container's need (with the
/// sidecars started before it) as a floor.
fn aggregate(pod: &Value, of: impl Fn(&Value) -> Resources) -> Resources {
    let mut result = Resources::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        add_all(&mut result, &of(c));
    }
    let mut sidecars = Resources::new();
    let mut init = Resources::new();
    for c in pod["spec"]["initContainers"].as_array().into_iter().flatten() {
        let r = of(c);
        if c["restartPolicy"] == "Always" {
            add_all(&mut result, &r);
            add_all(&mut sidecars, &r);
            max_all(&mut init, &sidecars);
        } else {
            let mut need = sidecars.clone();
            add_all(&mut need, &r);
            max_all(&mut init, &need);
        }
    }
    max_all(&mut result, &init);
    result
}

/// AggregateContainerLimits with the DRA part (addDRANodeAllocatableLimits):
/// the containers' limits aggregated as requests are, then `statuses`'
/// resources added where a limit is declared, and to hugepages always.
fn aggregate_limits(pod: &Value, statuses: &Value) -> Resources {
    let mut result = aggregate(pod, |c| quantities(&c["resources"]["limits"]));
    for (k, v) in dra_resources(statuses) {
        if result.contains_key(&k) || k.starts_with("hugepages-") {
            *result.entry(k).or_default() += v;
        }
    }
    result
}

/// validatePodLevelResourcesCoverDRA (UnschedulableAndUnresolvable, with
/// upstream's messages): a pod-level request smaller than what the
/// containers and `statuses` ask for; a pod-level hugepages limit below the
/// containers' limits with the DRA part; a pod-level limit below a
/// container's limit plus what the statuses give that container.
pub fn pod_level_covers(pod: &Value, statuses: &Value) -> Result<(), Unschedulable> {
    pod_level_requests_cover(pod, statuses)?;
    let pod_limits = quantities(&pod["spec"]["resources"]["limits"]);
    if pod_limits.is_empty() {
        return Ok(());
    }
    for (k, v) in aggregate_limits(pod, statuses).iter().filter(|(k, _)| k.starts_with("hugepages-")) {
        if pod_limits.get(k).is_some_and(|l| v > l) {
            return Err(Unschedulable::PodLevelLimit(k.clone()));
        }
    }
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let name = text(&c["name"]);
        let dra = container_dra(statuses, name);
        for (k, limit) in quantities(&c["resources"]["limits"]) {
            let Some(pl) = pod_limits.get(&k).filter(|_| !k.starts_with("hugepages-")) else { continue };
            if limit + dra.get(&k).copied().unwrap_or(0) > *pl {
                return Err(Unschedulable::ContainerLimit { resource: k, container: name.to_string() });
            }
        }
    }
    Ok(())
}

/// The requests half of [`pod_level_covers`], all 1.36's
/// validatePodLevelRequestsCoverDRA checks: no pod-level request (cpu,
/// memory, hugepages) below what the containers and `statuses` ask for.
pub fn pod_level_requests_cover(pod: &Value, statuses: &Value) -> Result<(), Unschedulable> {
    let want = aggregate_requests(pod, statuses);
    for (k, v) in quantities(&pod["spec"]["resources"]["requests"]) {
        if pod_level(&k) && want.get(&k).is_some_and(|w| *w > v) {
            return Err(Unschedulable::PodLevelRequest(k));
        }
    }
    Ok(())
}

/// A quantity in the scheduler's unit: cpu in millis, the rest whole,
/// rounded up (MilliValue, Value).
fn scaled(name: &str, nanos: i128) -> i128 {
    let unit = if name == "cpu" { 1_000_000 } else { 1_000_000_000 };
    nanos.div_euclid(unit) + i128::from(nanos.rem_euclid(unit) != 0)
}

/// nodeFitsResources: `demand` against the node's `allocatable` less what
/// the pods already on it `used` — cpu, memory, ephemeral-storage and
/// hugepages only; each that does not fit gives `Insufficient <name>`.
pub fn fits(demand: &Resources, allocatable: &Resources, used: &Resources) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    let names = ["cpu", "memory", "ephemeral-storage"];
    let mut huge: Vec<&String> = demand.keys().filter(|k| k.starts_with("hugepages-")).collect();
    huge.sort();
    for name in names.iter().copied().chain(huge.iter().map(|s| s.as_str())) {
        let get = |m: &Resources| scaled(name, m.get(name).copied().unwrap_or(0));
        let want = get(demand);
        let positive = want > 0 || name.starts_with("hugepages-");
        if positive && want > get(allocatable) - get(used) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// A node's `status.allocatable` in nano-units.
pub fn allocatable(node: &Value) -> Resources {
    quantities(&node["status"]["allocatable"])
}

#[cfg(test)]
#[path = "nodealloc_tests.rs"]
mod tests;
