//! The scheduler's part, standing in for kube-scheduler's structured-parameters
//! allocator (`k8s.io/dynamic-resource-allocation/structured`): given a
//! claim's spec, the device classes, namespaces and DeviceTaintRules
//! ([`Catalog`]), the candidate devices (from ResourceSlices and health
//! streams) and what other claims hold, pick devices or say why not. Pure
//! (no I/O, no async); the kubelet records what it returns: [`allocate`] in,
//! [`Allocated`] or [`Unallocatable`] out. What it implements is listed in
//! [`crate::controlplane::objects`] and docs/dra.md ("The allocator").
//!
//! The search is upstream's: request by request, device by device, going
//! back when a later device, request or constraint cannot be met; CEL
//! selectors ([`cel`]), shared counters and consumable capacity
//! ([`capacity`]) and taints ([`taints`]) decide whether one device fits.

mod capacity;
pub mod cel;
mod search;
pub mod taints;
#[cfg(test)]
mod tests;

use super::objects::{
    Attribute, Capacity, ClaimSpec, CounterSet, NodeAllocatable, Object, Selector, Taint, TaintRule, Toleration,
};
use std::collections::{BTreeMap, BTreeSet};

/// The allocator's optional behaviours, each a feature gate of the
/// scheduler (structured.Features, as the DynamicResources plugin's
/// AllocatorFeatures sets it from the gates). [`Features::default`] is
/// kube-scheduler 1.37's defaults (pkg/features/kube_features.go v1.37.2);
/// [`Features::of_minor`] another version's. The features GA or on in
/// every version dpctl models with DRA (admin access, prioritized list,
/// partitionable devices, device taints) are always on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// DRADeviceBindingConditions and DRAResourceClaimDeviceStatus
    /// (KEP-5007; beta, on, from 1.36): devices with bindingConditions may
    /// be allocated, and the result carries their conditions. Off: such
    /// devices are never selected (allocator.go isSelectable).
    pub binding_conditions: bool,
    /// DRAListTypeAttributes (KEP-5491; alpha, off, 1.36+): matchAttribute
    /// asks the devices' values (a scalar a set of one) to intersect,
    /// distinctAttribute to be pairwise disjoint. Off: scalars only, a list
    /// attribute matches nothing but itself alone.
    pub list_type_attributes: bool,
    /// DRADeviceCompatibilityGroups (KEP-5963; alpha, off, 1.37): devices
    /// drawing from one counter set are co-allocated only while their
    /// compatibilityGroups intersect. Off: a slice that declares groups is
    /// ignored (its pool then incomplete).
    pub compatibility_groups: bool,
    /// DRADerivedAttributes (KEP-6080; alpha, off, 1.37): a request's
    /// derivedAttributes are evaluated for constraints. Off: a claim with
    /// derivedAttributes cannot be allocated.
    pub derived_attributes: bool,
    /// DRAConsumableCapacity (KEP-5075; alpha, off, 1.34–1.35; beta, on,
    /// from 1.36): a device with allowMultipleAllocations is shared by
    /// claims while their consumed capacity fits, each result a shareID.
    /// Off: allowMultipleAllocations is not read (a device goes to one
    /// claim whole), a share other claims hold counts as the whole device,
    /// and capacity requests are ignored by the `stable` allocator or
    /// refused by the others ([`Features::beyond_stable`]).
    pub consumable_capacity: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features::of_minor(37)
    }
}

impl Features {
    /// Every feature on (structured.FeaturesAll's part dpctl models).
    pub const ALL: Features = Features {
        binding_conditions: true,
        list_type_attributes: true,
        compatibility_groups: true,
        derived_attributes: true,
        consumable_capacity: true,
    };

    /// The scheduler's defaults at 1.`minor` (kube_features.go): binding
    /// conditions and consumable capacity on from 1.36 (alpha, off, in
    /// 1.34–1.35); the others alpha.
    pub fn of_minor(minor: u32) -> Features {
        Features {
            binding_conditions: minor >= 36,
            list_type_attributes: false,
            compatibility_groups: false,
            derived_attributes: false,
            consumable_capacity: minor >= 36,
        }
    }

    /// Whether a feature the `stable` allocator lacks is on, so that
    /// structured.NewAllocator picks `incubating` or `experimental`
    /// (allocator.go availableAllocators; stable's SupportedFeatures are
    /// AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints).
    pub fn beyond_stable(&self) -> bool {
        self.binding_conditions
            || self.list_type_attributes
            || self.compatibility_groups
            || self.derived_attributes
            || self.consumable_capacity
    }
}

/// The namespace label that allows adminAccess in a namespace's claims
/// (kubernetes pkg/registry/resource/resourceclaim/strategy.go).
pub const ADMIN_ACCESS_LABEL: &str = "resource.kubernetes.io/admin-access";

/// A device the allocator may hand out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Candidate {
    /// Its driver.
    pub driver: String,
    /// Its pool.
    pub pool: String,
    /// Its name.
    pub device: String,
    /// Its attributes (fully qualified names).
    pub attributes: BTreeMap<String, Attribute>,
    /// Its slice's skipNodeOperations.
    pub skip: Vec<String>,
    /// Its capacities (fully qualified names).
    pub capacity: BTreeMap<String, Capacity>,
    /// consumesCounters.
    pub consumes: Vec<CounterSet>,
    /// Its own taints (DeviceTaintRules are added by the [`Catalog`]).
    pub taints: Vec<Taint>,
    /// Shared by claims: allowMultipleAllocations with DRAConsumableCapacity on.
    pub multi: bool,
    /// `device.allowMultipleAllocations` as selectors see it: the slice's
    /// value, whatever DRAConsumableCapacity says (incubating and
    /// experimental isSelectable pass it), false in upstream's `stable`
    /// allocator (which passes none; cel.Device's nil is false).
    pub allow_multiple_allocations: bool,
    /// Its pool's shared counter sets.
    pub counters: Vec<CounterSet>,
    /// bindsToNode (KEP-5007).
    pub binds_to_node: bool,
    /// bindingConditions (KEP-5007).
    pub binding_conditions: Vec<String>,
    /// bindingFailureConditions (KEP-5007).
    pub binding_failure_conditions: Vec<String>,
    /// nodeAllocatableResources (KEP-5517).
    pub node_allocatable: BTreeMap<String, NodeAllocatable>,
}

impl Candidate {
    fn key(&self) -> Key {
        (self.driver.clone(), self.pool.clone(), self.device.clone())
    }
}

/// The usable pools of ResourceSlices, as upstream gathers them
/// (structured/internal/experimental/pools_experimental.go GatherPools):
/// per pool only the slices of its newest generation; a pool with fewer of
/// them than its resourceSliceCount is incomplete, one with a device name
/// twice or a counter it cannot find invalid — neither offers devices
/// ([`unusable_pools`] names them). Pools in (driver, pool) order, those
/// with a device that has bindingConditions after all others (KEP-5007),
/// slices by name, devices in slice order: the order the search tries them
/// in. A pool's counter sets sit in slices of their own, as in v1. With
/// the 1.37 defaults ([`Features::default`]); see [`from_slices_with`].
pub fn from_slices<'a>(objects: impl IntoIterator<Item = &'a Object>) -> Vec<Candidate> {
    from_slices_with(objects, &Features::default())
}

/// [`from_slices`] under `features`: without compatibility groups, a slice
/// that declares them is ignored (its pool is then incomplete, or an older
/// generation stands), as GatherPools does.
pub fn from_slices_with<'a>(objects: impl IntoIterator<Item = &'a Object>, features: &Features) -> Vec<Candidate> {
    pools(objects, features).into_iter().filter_map(|p| p.usable.then_some(p.candidates)).flatten().collect()
}

/// `driver/pool` of each pool that is incomplete or invalid now (an
/// allocationMode All request cannot be satisfied while one exists), with
/// the 1.37 defaults.
pub fn unusable_pools<'a>(objects: impl IntoIterator<Item = &'a Object>) -> BTreeSet<String> {
    unusable_pools_with(objects, &Features::default())
}

/// [`unusable_pools`] under `features`.
pub fn unusable_pools_with<'a>(objects: impl IntoIterator<Item = &'a Object>, features: &Features) -> BTreeSet<String> {
    pools(objects, features).into_iter().filter(|p| !p.usable).map(|p| format!("{}/{}", p.driver, p.pool)).collect()
}

struct Pool {
    driver: String,
    pool: String,
    usable: bool,
    candidates: Vec<Candidate>,
    /// A device of it has bindingConditions (pools_experimental.go
    /// poolHasBindingConditions): tried after every other pool.
    binding: bool,
}

/// Whether a slice declares compatibility groups on a device's counter
/// consumption (compatibility_groups.go sliceUsesCompatibilityGroups).
fn uses_groups(o: &Object) -> bool {
    matches!(o, Object::Slice { devices, .. } if devices.iter().any(|d| d.consumes.iter().any(|c| !c.groups.is_empty())))
}

fn pools<'a>(objects: impl IntoIterator<Item = &'a Object>, features: &Features) -> Vec<Pool> {
    // (driver, pool) → the newest generation's slices; and the newest
    // generation of each pool among all slices, ignored ones included.
    let mut by_pool: BTreeMap<(&str, &str), (i64, Vec<&Object>)> = BTreeMap::new();
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for o in objects {
        if let Object::Slice { driver, pool, generation, .. } = o {
            let n = newest.entry((driver.as_str(), pool.as_str())).or_insert(*generation);
            *n = (*n).max(*generation);
            // Without the feature, a slice with compatibility groups is
            // ignored before generations are compared (GatherPools).
            if !features.compatibility_groups && uses_groups(o) {
                continue;
            }
            let e = by_pool.entry((driver.as_str(), pool.as_str())).or_insert((*generation, Vec::new()));
            if *generation > e.0 {
                *e = (*generation, Vec::new());
            }
            if *generation == e.0 {
                e.1.push(o);
            }
        }
    }
    let mut out = Vec::new();
    for ((driver, pool), (generation, mut slices)) in by_pool {
        slices.sort_by_key(|o| o.key());
        let complete = slices.iter().all(|o| match o {
            Object::Slice { slice_count, .. } => {
                slice_count.is_none_or(|n| usize::try_from(n).ok() == Some(slices.len()))
            }
            _ => true,
        });
        let mut sets: Vec<CounterSet> = Vec::new();
        let mut names = BTreeSet::new();
        let mut valid = true;
        for o in &slices {
            if let Object::Slice { counters, devices, .. } = o {
                for set in counters {
                    valid &= !sets.iter().any(|s| s.name == set.name);
                    sets.push(set.clone());
                }
                for d in devices {
                    valid &= names.insert(d.name.as_str());
                }
            }
        }
        // An incomplete pool of a generation older than one ignored above
        // is obsolete: left out altogether, not even incomplete
        // (GatherPools checkSlicesInPool).
        if !complete && newest.get(&(driver, pool)).is_some_and(|n| *n > generation) {
            continue;
        }
        let mut candidates = Vec::new();
        let mut binding = false;
        for o in &slices {
            if let Object::Slice { devices, skip, .. } = o {
                for d in devices {
                    binding |= !d.binding_conditions.is_empty();
                    for c in &d.consumes {
                        let set = sets.iter().find(|s| s.name == c.name);
                        valid &= set.is_some_and(|s| c.counters.keys().all(|k| s.counters.contains_key(k)));
                    }
                    candidates.push(Candidate {
                        driver: driver.to_string(),
                        pool: pool.to_string(),
                        device: d.name.clone(),
                        attributes: d.attributes.clone(),
                        skip: skip.clone(),
                        capacity: d.capacity.clone(),
                        consumes: d.consumes.clone(),
                        taints: d.taints.clone(),
                        // Without DRAConsumableCapacity allowMultipleAllocations
                        // is not read (allocator_incubating.go allocateDevice; stable
                        // has no such field).
                        multi: d.multi && features.consumable_capacity,
                        allow_multiple_allocations: d.multi && features.beyond_stable(),
                        counters: sets.clone(),
                        binds_to_node: d.binds_to_node,
                        binding_conditions: d.binding_conditions.clone(),
                        binding_failure_conditions: d.binding_failure_conditions.clone(),
                        node_allocatable: d.node_allocatable.clone(),
                    });
                }
            }
        }
        out.push(Pool {
            driver: driver.to_string(),
            pool: pool.to_string(),
            usable: complete && valid,
            candidates,
            binding: binding && complete && valid,
        });
    }
    // Pools with binding conditions last, each part in (driver, pool) order.
    out.sort_by_key(|p| p.binding);
    out
}

/// The devices of a `status.allocation.devices.results` a scheduler wrote
/// (v1 field names, Allocated's serde names); a result with fields of the
/// wrong type keeps what reads.
pub fn given(results: &[serde_json::Value]) -> Vec<Allocated> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    results
        .iter()
        .map(|r| {
            serde_json::from_value(r.clone()).unwrap_or_else(|_| Allocated {
                request: text(&r["request"]),
                driver: text(&r["driver"]),
                pool: text(&r["pool"]),
                device: text(&r["device"]),
                admin: r["adminAccess"].as_bool().unwrap_or(false),
                ..Allocated::default()
            })
        })
        .collect()
}

/// The devices ResourceClaims already allocated hold: each claim's written
/// `status.allocation` (kube-scheduler's claim tracker counts them in use,
/// dynamicresources foreachAllocatedDevice; what to skip, adminAccess, the
/// allocator's `taken` decides).
pub fn held<'a>(objects: impl IntoIterator<Item = &'a Object>) -> Vec<Allocated> {
    held_where(objects, |_, _| true)
}

/// [`held`] of the claims `keep` takes (by namespace and name), asked only
/// of a claim with an allocation (the common claim has none: no key is
/// made for it).
pub fn held_where<'a>(
    objects: impl IntoIterator<Item = &'a Object>,
    keep: impl Fn(&str, &str) -> bool,
) -> Vec<Allocated> {
    let mut out = Vec::new();
    for o in objects {
        if let Object::Claim { raw, namespace, name, .. } = o {
            if let Some(results) = raw["status"]["allocation"]["devices"]["results"].as_array() {
                if keep(namespace, name) {
                    out.extend(given(results));
                }
            }
        }
    }
    out
}

/// What the allocator reads besides devices: device classes, the namespaces
/// whose claims may ask for adminAccess, and DeviceTaintRules.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// DeviceClass name → its selectors.
    pub classes: BTreeMap<String, Vec<Selector>>,
    /// Namespaces labelled `resource.kubernetes.io/admin-access: "true"`.
    pub admin_namespaces: BTreeSet<String>,
    /// DeviceTaintRules.
    pub rules: Vec<TaintRule>,
    /// `driver/pool` of the pools incomplete or invalid ([`unusable_pools`]).
    pub unusable_pools: BTreeSet<String>,
    /// The scheduler's feature gates.
    pub features: Features,
}

impl Catalog {
    /// The catalog of the DRA objects known (manifests), with 1.37's gates.
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a Object> + Clone) -> Catalog {
        Catalog::with(objects, Features::default())
    }

    /// The catalog of the DRA objects known under `features`.
    pub fn with<'a>(objects: impl IntoIterator<Item = &'a Object> + Clone, features: Features) -> Catalog {
        let mut c =
            Catalog { unusable_pools: unusable_pools_with(objects.clone(), &features), features, ..Catalog::default() };
        for o in objects {
            match o {
                Object::Class { name, selectors, .. } => {
                    c.classes.insert(name.clone(), selectors.clone());
                }
                Object::Namespace { name, labels } if labels.get(ADMIN_ACCESS_LABEL).is_some_and(|v| v == "true") => {
                    c.admin_namespaces.insert(name.clone());
                }
                Object::TaintRule { rule, .. } => c.rules.push(rule.clone()),
                _ => {}
            }
        }
        c
    }
}

/// One allocated device (status.allocation.devices.results[], v1 names).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocated {
    /// The request it satisfies (`request/subrequest` for firstAvailable).
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
    /// adminAccess.
    #[serde(default, rename = "adminAccess", alias = "admin", skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
    /// skipNodeOperations, copied from the device's slice (KEP-5945).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_node_operations: Vec<String>,
    /// tolerations: the request's, copied as the scheduler does (KEP-5055).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// consumedCapacity of a device with allowMultipleAllocations (KEP-5075).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub consumed_capacity: BTreeMap<String, String>,
    /// shareID of a device with allowMultipleAllocations.
    #[serde(default, rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// bindingConditions, copied from the device (KEP-5007): the scheduler
    /// waits for each to be True in the claim's `status.devices`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binding_conditions: Vec<String>,
    /// bindingFailureConditions, copied from the device (KEP-5007).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binding_failure_conditions: Vec<String>,
}

impl Allocated {
    fn key(&self) -> Key {
        (self.driver.clone(), self.pool.clone(), self.device.clone())
    }
}

type Key = (String, String, String);

/// Fewer free devices fit a request than it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooFew {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The (sub-)request.
    pub request: String,
    /// How many it wants (None: all).
    pub want: Option<u64>,
    /// Its class.
    pub class: String,
    /// Devices that fit.
    pub fitting: usize,
    /// Of those, free.
    pub free: usize,
    /// Why devices that fit were not taken, each naming the feature.
    pub why: Vec<String>,
}

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
    TooFew(Box<TooFew>),
    /// No sub-request of a firstAvailable request can be allocated.
    NoSubRequest {
        /// `namespace/name` of the claim.
        claim: String,
        /// The request.
        request: String,
        /// Each sub-request's reason.
        reasons: Vec<Unallocatable>,
    },
    /// A selector does not compile or fails at run time (the scheduler stops
    /// allocating the claim on such an error).
    Selector {
        /// `namespace/name` of the claim.
        claim: String,
        /// `class NAME` or `claim NAME`, the selector's index, the device, the error.
        error: String,
    },
    /// adminAccess in a namespace without the label upstream requires.
    AdminAccess {
        /// `namespace/name` of the claim.
        claim: String,
        /// The request.
        request: String,
        /// The claim's namespace.
        namespace: String,
    },
    /// An allocationMode All request while a pool is incomplete or invalid
    /// (allocator_incubating.go validateDeviceRequest).
    PoolUnusable {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (sub-)request.
        request: String,
        /// `driver/pool`.
        pool: String,
    },
    /// A device an All request must have breaks a constraint
    /// (allocator_incubating.go allocateDevice with must).
    Constraint {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (sub-)request.
        request: String,
        /// `driver/pool/device`.
        device: String,
        /// Which constraint, and how.
        why: String,
    },
    /// A request uses a field of a feature the scheduler has off
    /// (derivedAttributes without DRADerivedAttributes: upstream refuses
    /// the claim rather than ignore its constraints).
    Disabled {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (sub-)request.
        request: String,
        /// What it uses, and the gate.
        what: String,
    },
    /// What the allocator the features choose cannot handle (upstream's
    /// words after `claim NAME, `): capacity requests with
    /// DRAConsumableCapacity off in `incubating`, a distinctAttribute
    /// constraint in `stable`.
    Unsupported {
        /// `namespace/name` of the claim.
        claim: String,
        /// `request R: …`, `subrequest S: …` or `constraint #N: …`.
        what: String,
    },
    /// The search went through too many combinations.
    GaveUp {
        /// `namespace/name` of the claim.
        claim: String,
        /// Steps taken.
        steps: u64,
    },
}

impl Unallocatable {
    /// Whether the search stops on it (no other choice can help).
    fn fatal(&self) -> bool {
        matches!(
            self,
            Unallocatable::Selector { .. }
                | Unallocatable::AdminAccess { .. }
                | Unallocatable::GaveUp { .. }
                | Unallocatable::PoolUnusable { .. }
                | Unallocatable::Constraint { .. }
                | Unallocatable::Disabled { .. }
                | Unallocatable::Unsupported { .. }
        )
    }
}

impl std::fmt::Display for Unallocatable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unallocatable::NoClass { claim, request, class } => write!(
                f,
                "claim {claim}: request {request:?}: device class {class:?} not found (add a DeviceClass manifest, or name a registered driver)"
            ),
            Unallocatable::TooFew(t) => {
                let TooFew { claim, request, want, class, fitting, free, why } = &**t;
                let hint = if *fitting == 0 {
                    " (devices come from ResourceSlice manifests and the slices drivers publish; outside dpctl test --dra, also from a driver's health stream)"
                } else {
                    ""
                };
                let want = want.map_or_else(|| "all".to_string(), |n| n.to_string());
                write!(
                    f,
                    "claim {claim}: request {request:?} wants {want} device(s) of class {class:?}; {fitting} match, {free} of them free{hint}"
                )?;
                if !why.is_empty() {
                    write!(f, " ({})", why.join("; "))?;
                }
                Ok(())
            }
            Unallocatable::NoSubRequest { claim, request, reasons } => {
                let words: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "claim {claim}: no sub-request of firstAvailable request {request:?} can be allocated: {}",
                    words.join("; ")
                )
            }
            Unallocatable::Selector { claim, error } => write!(f, "claim {claim}: {error}"),
            Unallocatable::AdminAccess { claim, request, namespace } => write!(
                f,
                "claim {claim}: request {request:?} asks for adminAccess, which namespace {namespace:?} does not allow (label the Namespace {ADMIN_ACCESS_LABEL}: \"true\", as kube-apiserver requires)"
            ),
            Unallocatable::PoolUnusable { claim, request, pool } => write!(
                f,
                "claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently being updated or invalid"
            ),
            Unallocatable::Constraint { claim, request, device, why } => write!(
                f,
                "claim {claim}, request {request}: cannot add device {device} because a claim constraint would not be satisfied ({why})"
            ),
            Unallocatable::Disabled { claim, request, what } => write!(
                f,
                "claim {claim}, request {request}: cannot handle request with {what}, the feature is disabled"
            ),
            Unallocatable::Unsupported { claim, what } => write!(f, "claim {claim}, {what}"),
            Unallocatable::GaveUp { claim, steps } => {
                write!(f, "claim {claim}: no allocation found within {steps} steps of the search")
            }
        }
    }
}

impl std::error::Error for Unallocatable {}

/// Allocate `spec` of claim `claim` (`namespace/name`) over `candidates`;
/// `taken` holds the devices other claims were given (with their consumed
/// capacity); `drivers` are the registered drivers (a class may name one).
/// Pure: the caller records the result.
pub fn allocate(
    claim: &str,
    spec: &ClaimSpec,
    catalog: &Catalog,
    candidates: &[Candidate],
    taken: &[&Allocated],
    drivers: &BTreeSet<String>,
) -> Result<Vec<Allocated>, Unallocatable> {
    let namespace = claim.split_once('/').map_or("default", |(ns, _)| ns);
    for r in &spec.requests {
        if r.admin && !catalog.admin_namespaces.contains(namespace) {
            return Err(Unallocatable::AdminAccess {
                claim: claim.to_string(),
                request: r.name.clone(),
                namespace: namespace.to_string(),
            });
        }
    }
    // As upstream checks every request and sub-request before it searches
    // (allocator_incubating.go validateDeviceRequest): its class must
    // exist, and All cannot be counted while a pool is incomplete.
    for r in &spec.requests {
        let subs: Vec<(&super::objects::Request, String)> = if r.first_available.is_empty() {
            vec![(r, r.name.clone())]
        } else {
            r.first_available.iter().map(|s| (s, format!("{}/{}", r.name, s.name))).collect()
        };
        for (s, label) in subs {
            if !catalog.classes.contains_key(&s.class)
                && !drivers.contains(&s.class)
                && !candidates.iter().any(|c| c.driver == s.class)
            {
                return Err(Unallocatable::NoClass {
                    claim: claim.to_string(),
                    request: label,
                    class: s.class.clone(),
                });
            }
            if !s.derived.is_empty() && !catalog.features.derived_attributes {
                return Err(Unallocatable::Disabled {
                    claim: claim.to_string(),
                    request: label,
                    what: "derived attributes (DRADerivedAttributes)".into(),
                });
            }
            if s.all {
                if let Some(pool) = catalog.unusable_pools.iter().next() {
                    return Err(Unallocatable::PoolUnusable {
                        claim: claim.to_string(),
                        request: label,
                        pool: pool.clone(),
                    });
                }
            }
        }
    }
    // Without DRAConsumableCapacity (allocator.go picks by features):
    // `stable` never reads capacity requests and knows matchAttribute only;
    // `incubating` and `experimental` refuse capacity requests
    // (validateDeviceRequest's DRAConsumableCapacity check).
    let stripped;
    let spec = if catalog.features.consumable_capacity {
        spec
    } else if catalog.features.beyond_stable() {
        for r in &spec.requests {
            let (kind, name) = match r.first_available.iter().find(|s| !s.capacity.is_empty()) {
                Some(s) => ("subrequest", &s.name),
                None if !r.capacity.is_empty() => ("request", &r.name),
                None => continue,
            };
            return Err(Unallocatable::Unsupported {
                claim: claim.to_string(),
                what: format!(
                    "{kind} {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
                ),
            });
        }
        spec
    } else {
        if let Some(i) = spec.constraints.iter().position(|c| c.distinct) {
            return Err(Unallocatable::Unsupported {
                claim: claim.to_string(),
                what: format!("constraint #{i}: empty constraint (unsupported constraint type?)"),
            });
        }
        let mut s = spec.clone();
        for r in &mut s.requests {
            r.capacity.clear();
            r.first_available.iter_mut().for_each(|s| s.capacity.clear());
        }
        stripped = s;
        &stripped
    };
    // On a large stack when a selector runs CEL's interpreter (it recurses
    // per level of the expression); a claim whose selectors all compare
    // the driver (a class named after a driver, `device.driver == "X"`)
    // runs here: a thread of 256 MiB of stack started and joined per claim
    // was most of a prepare's planning time. A selector not parsed yet is
    // parsed on a large stack of its own ([`cel::compile`]).
    let run = || search::Search::new(claim, spec, catalog, candidates, taken, drivers).run();
    if !needs_stack(spec, catalog) {
        return run();
    }
    let searched = search::on_stack(run);
    searched.unwrap_or_else(|e| {
        Err(Unallocatable::Selector {
            claim: claim.to_string(),
            error: format!("cannot start a thread to run the selectors: {e}"),
        })
    })
}

/// Whether the search for `spec` may run CEL's interpreter: a selector of
/// a (sub-)request or of its class other than `device.driver == "X"` (a
/// class not in the catalog stands for its driver's selector), or a
/// derived attribute.
fn needs_stack(spec: &ClaimSpec, catalog: &Catalog) -> bool {
    spec.requests.iter().any(|r| {
        let subs: Vec<&super::objects::Request> =
            if r.first_available.is_empty() { vec![r] } else { r.first_available.iter().collect() };
        subs.into_iter().any(|s| {
            let class_runs = match catalog.classes.get(&s.class) {
                Some(sels) => sels.iter().any(|x| cel::interpreted(&x.expression)),
                None => cel::interpreted(&Selector::driver(&s.class).expression),
            };
            class_runs || !s.derived.is_empty() || s.selectors.iter().any(|x| cel::interpreted(&x.expression))
        })
    })
}
