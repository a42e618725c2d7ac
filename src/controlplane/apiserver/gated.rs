//! The resource.k8s.io strategies' dropDisabledFields, as kube-apiserver
//! v1.37.2 runs them before validation (PrepareForCreate, PrepareForUpdate;
//! pkg/registry/resource/{resourceslice,resourceclaim,resourceclaimtemplate,
//! deviceclass}/strategy.go, pkg/api/resourceclaimspec/util.go): with a
//! feature's gate off, a write loses that feature's fields, unless the
//! object it replaces already uses the feature (`…FeatureInUse` of the old
//! object: an update never drops what is stored). One function per
//! strategy, each rule once, in upstream's order. Pure.
//!
//! A field counts as in use as upstream's check reads the Go object: a
//! pointer or a list `!= nil` is a key present and not null; `len(…) > 0`
//! a non-empty list or map.

use serde_json::Value;

/// The gates kube-apiserver's resource.k8s.io strategies read, on or off
/// (kube_features.go v1.37.2; the store's are the profile's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiGates {
    /// DRADeviceTaints: a device's `taints`, a request's `tolerations`.
    pub device_taints: bool,
    /// DRADeviceTaintRules (alpha 1.35, beta off 1.36, GA on 1.37):
    /// DeviceTaintRules are served (v1 from 1.37, v1beta2 before).
    pub device_taint_rules: bool,
    /// DRAPartitionableDevices: `sharedCounters`, `perDeviceNodeSelection`,
    /// a device's `consumesCounters`, `nodeName`, `nodeSelector`, `allNodes`.
    pub partitionable_devices: bool,
    /// DRAPartitionableDevicesType: a slice's `partitionTypeAttribute`.
    pub partitionable_devices_type: bool,
    /// DRADeviceBindingConditions (with DRAResourceClaimDeviceStatus, on
    /// wherever the former exists): a device's `bindingConditions`,
    /// `bindingFailureConditions`, `bindsToNode`; a result's binding conditions.
    pub binding_conditions: bool,
    /// DRAConsumableCapacity: `allowMultipleAllocations`, a capacity's
    /// `requestPolicy`; capacity requests, `distinctAttribute`; a result's
    /// and a device status's `shareID`, a result's `consumedCapacity`.
    pub consumable_capacity: bool,
    /// DRADeviceCompatibilityGroups: `consumesCounters[].compatibilityGroups`.
    pub compatibility_groups: bool,
    /// DRANodeAllocatableResources: a device's `nodeAllocatableResources`.
    pub node_allocatable_resources: bool,
    /// DRAListTypeAttributes: an attribute's `bools`, `ints`, `strings`, `versions`.
    pub list_type_attributes: bool,
    /// DRAOptionalNodeOperations: a slice's and a result's `skipNodeOperations`.
    pub optional_node_operations: bool,
    /// DRAPrioritizedList: a request's `firstAvailable`.
    pub prioritized_list: bool,
    /// DRAAdminAccess: a request's and a result's `adminAccess`.
    pub admin_access: bool,
    /// DRADerivedAttributes: a request's `derivedAttributes`.
    pub derived_attributes: bool,
    /// DRAExtendedResource: a DeviceClass's `extendedResourceName`.
    pub extended_resource: bool,
}

impl ApiGates {
    /// kube-apiserver 1.`minor`'s defaults (kube_features.go v1.37.2; a
    /// field its version does not have yet is dropped as a gate off drops it).
    pub fn of_minor(minor: u32) -> ApiGates {
        ApiGates {
            device_taints: minor >= 36,
            device_taint_rules: minor >= 37,
            partitionable_devices: minor >= 36,
            partitionable_devices_type: false,
            binding_conditions: minor >= 36,
            consumable_capacity: minor >= 36,
            compatibility_groups: false,
            node_allocatable_resources: false,
            list_type_attributes: false,
            optional_node_operations: false,
            prioritized_list: minor >= 34,
            admin_access: minor >= 34,
            derived_attributes: false,
            extended_resource: minor >= 36,
        }
    }
}

impl Default for ApiGates {
    fn default() -> Self {
        ApiGates::of_minor(37)
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The list at `path` under `v`, each item mutable (nothing is added
/// where a key is missing, as indexing would add a null).
fn items_mut<'a>(v: &'a mut Value, path: &[&str]) -> impl Iterator<Item = &'a mut Value> {
    path.iter().try_fold(v, |v, k| v.get_mut(*k)).and_then(Value::as_array_mut).into_iter().flatten()
}

/// The object at `key` of `v`, its values mutable.
fn values_mut<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key).and_then(Value::as_object_mut).into_iter().flat_map(|m| m.values_mut())
}

/// Upstream's `!= nil`: present and not null.
fn set(v: &Value, k: &str) -> bool {
    v.get(k).is_some_and(|x| !x.is_null())
}

/// Upstream's `len(…) > 0` of a list or a map.
fn filled(v: &Value, k: &str) -> bool {
    match v.get(k) {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(m)) => !m.is_empty(),
        _ => false,
    }
}

/// Remove `keys` from the object at `key` of `v`, if there is one.
fn remove_at(v: &mut Value, key: &str, keys: &[&str]) {
    if let Some(o) = v.get_mut(key) {
        remove(o, keys);
    }
}

fn remove(v: &mut Value, keys: &[&str]) {
    if let Some(m) = v.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
}

/// Whether any device of the slice `old` (none on create) satisfies `f`.
fn any_device(old: Option<&Value>, f: impl Fn(&Value) -> bool) -> bool {
    old.is_some_and(|s| items(&s["spec"]["devices"]).iter().any(f))
}

/// The ResourceSlice strategy's dropDisabledFields: `obj` the slice
/// written, `old` the slice it replaces (None on create).
pub fn slice(g: &ApiGates, obj: &mut Value, old: Option<&Value>) {
    // dropDisabledDRADeviceTaintsFields, draDeviceTaintsFeatureInUse.
    if !(g.device_taints || any_device(old, |d| filled(d, "taints"))) {
        items_mut(obj, &["spec", "devices"]).for_each(|d| remove(d, &["taints"]));
    }
    // dropDisabledDRAPartitionableDevicesFields, draPartitionableDevicesFeatureInUse.
    let partitioned = old
        .is_some_and(|s| filled(&s["spec"], "sharedCounters") || set(&s["spec"], "perDeviceNodeSelection"))
        || any_device(old, |d| {
            filled(d, "consumesCounters") || ["nodeName", "nodeSelector", "allNodes"].iter().any(|k| set(d, k))
        });
    if !(g.partitionable_devices || partitioned) {
        remove_at(obj, "spec", &["sharedCounters", "perDeviceNodeSelection"]);
        items_mut(obj, &["spec", "devices"])
            .for_each(|d| remove(d, &["consumesCounters", "nodeName", "nodeSelector", "allNodes"]));
    }
    // dropDisabledDRADeviceBindingConditionsFields, draBindingConditionsFeatureInUse.
    let binding = any_device(old, |d| {
        filled(d, "bindingConditions") || filled(d, "bindingFailureConditions") || set(d, "bindsToNode")
    });
    if !(g.binding_conditions || binding) {
        items_mut(obj, &["spec", "devices"])
            .for_each(|d| remove(d, &["bindingConditions", "bindingFailureConditions", "bindsToNode"]));
    }
    // dropDisabledDRAConsumableCapacityFields, draConsumableCapacityFeatureInUse.
    let shares = any_device(old, |d| {
        set(d, "allowMultipleAllocations")
            || d["capacity"].as_object().into_iter().flatten().any(|(_, c)| set(c, "requestPolicy"))
    });
    if !(g.consumable_capacity || shares) {
        for d in items_mut(obj, &["spec", "devices"]) {
            remove(d, &["allowMultipleAllocations"]);
            values_mut(d, "capacity").for_each(|c| remove(c, &["requestPolicy"]));
        }
    }
    // dropDisabledDRADeviceCompatibilityGroupsFields, draDeviceCompatibilityGroupsFeatureInUse.
    let grouped = any_device(old, |d| items(&d["consumesCounters"]).iter().any(|c| filled(c, "compatibilityGroups")));
    if !(g.compatibility_groups || grouped) {
        for d in items_mut(obj, &["spec", "devices"]) {
            items_mut(d, &["consumesCounters"]).for_each(|c| remove(c, &["compatibilityGroups"]));
        }
    }
    // dropDisabledDRANodeAllocatableResourcesFields, draNodeAllocatableResourcesFeatureInUse;
    // up to 1.36 the field is `nodeAllocatableResourceMappings` (each version's
    // schema prunes the other name first; 1.36's strategy taken to be 1.37's).
    const ALLOCATABLE: [&str; 2] = ["nodeAllocatableResources", "nodeAllocatableResourceMappings"];
    if !(g.node_allocatable_resources || any_device(old, |d| ALLOCATABLE.iter().any(|f| filled(d, f)))) {
        items_mut(obj, &["spec", "devices"]).for_each(|d| remove(d, &ALLOCATABLE));
    }
    // dropDisableDRAListTypeAttributesFields, draListTypeAttributesFeatureInUse.
    const LISTS: [&str; 4] = ["bools", "ints", "strings", "versions"];
    let lists = any_device(old, |d| {
        d["attributes"].as_object().into_iter().flatten().any(|(_, a)| LISTS.iter().any(|k| set(a, k)))
    });
    if !(g.list_type_attributes || lists) {
        for d in items_mut(obj, &["spec", "devices"]) {
            values_mut(d, "attributes").for_each(|a| remove(a, &LISTS));
        }
    }
    // dropDisabledDRAPartitionableDevicesTypeFields, draPartitionableDevicesTypeFeatureInUse.
    if !(g.partitionable_devices_type || old.is_some_and(|s| set(&s["spec"], "partitionTypeAttribute"))) {
        remove_at(obj, "spec", &["partitionTypeAttribute"]);
    }
    // dropDisabledDRAOptionalNodeOperationsFields, draOptionalNodeOperationsFeatureInUse.
    if !(g.optional_node_operations || old.is_some_and(|s| filled(&s["spec"], "skipNodeOperations"))) {
        remove_at(obj, "spec", &["skipNodeOperations"]);
    }
}

/// A claim spec's requests.
fn requests(spec: &Value) -> &[Value] {
    items(&spec["devices"]["requests"])
}

/// Whether a request or one of its subrequests (`firstAvailable`) satisfies `f`.
fn any_request(spec: Option<&Value>, f: impl Fn(&Value) -> bool) -> bool {
    spec.is_some_and(|s| {
        requests(s).iter().any(|r| r.get("exactly").is_some_and(&f) || items(&r["firstAvailable"]).iter().any(&f))
    })
}

/// Remove `keys` from every request's `exactly` and subrequests.
fn remove_from_requests(spec: &mut Value, keys: &[&str]) {
    for r in items_mut(spec, &["devices", "requests"]) {
        if let Some(e) = r.get_mut("exactly") {
            remove(e, keys);
        }
        items_mut(r, &["firstAvailable"]).for_each(|s| remove(s, keys));
    }
}

/// Whether a claim spec uses DRAAdminAccess (resourceclaimspec.DRAAdminAccessFeatureInUse).
fn spec_uses_admin_access(spec: &Value) -> bool {
    requests(spec).iter().any(|r| set(&r["exactly"], "adminAccess"))
}

/// Whether a claim spec uses DRAConsumableCapacity
/// (resourceclaimspec.DRAConsumableCapacityFeatureInUse: a distinctAttribute, a capacity request).
pub(super) fn spec_uses_capacity(spec: &Value) -> bool {
    items(&spec["devices"]["constraints"]).iter().any(|c| set(c, "distinctAttribute"))
        || any_request(Some(spec), |e| set(e, "capacity"))
}

/// resourceclaimspec.DropDisabledFields, for claims and claim templates:
/// `spec` the spec written, `old` the stored one (None on create).
pub fn claim_spec(g: &ApiGates, spec: &mut Value, old: Option<&Value>) {
    // dropDisabledDRAPrioritizedListFields, draPrioritizedListFeatureInUse.
    if !(g.prioritized_list || old.is_some_and(|s| requests(s).iter().any(|r| filled(r, "firstAvailable")))) {
        items_mut(spec, &["devices", "requests"]).for_each(|r| remove(r, &["firstAvailable"]));
    }
    // dropDisabledDRADeviceTaintsFields, draDeviceTaintsInUse.
    if !(g.device_taints || any_request(old, |e| filled(e, "tolerations"))) {
        remove_from_requests(spec, &["tolerations"]);
    }
    // dropDisabledDRAAdminAccessFields (exactly only).
    if !(g.admin_access || old.is_some_and(spec_uses_admin_access)) {
        for r in items_mut(spec, &["devices", "requests"]) {
            if let Some(e) = r.get_mut("exactly") {
                remove(e, &["adminAccess"]);
            }
        }
    }
    // dropDisabledDRAResourceClaimConsumableCapacityFields.
    if !(g.consumable_capacity || old.is_some_and(spec_uses_capacity)) {
        items_mut(spec, &["devices", "constraints"]).for_each(|c| remove(c, &["distinctAttribute"]));
        remove_from_requests(spec, &["capacity"]);
    }
    // dropDisabledDRADerivedAttributesFields, draDerivedAttributesInUse.
    if !(g.derived_attributes || any_request(old, |e| filled(e, "derivedAttributes"))) {
        remove_from_requests(spec, &["derivedAttributes"]);
    }
}

/// The allocation results of a claim.
fn results(claim: &Value) -> &[Value] {
    items(&claim["status"]["allocation"]["devices"]["results"])
}

/// The resourceclaim status strategy's dropDisabledStatusFields (after
/// DRAResourceClaimDeviceStatus, on wherever these gates exist): `next` the
/// claim with the status written, `old` the stored claim.
pub fn claim_status(g: &ApiGates, next: &mut Value, old: &Value) {
    fn drop_from_results(next: &mut Value, keys: &[&str]) {
        items_mut(next, &["status", "allocation", "devices", "results"]).for_each(|r| remove(r, keys));
    }
    // dropDisabledDRAAdminAccessStatusFields, draAdminAccessFeatureInUse.
    if !(g.admin_access || spec_uses_admin_access(&old["spec"]) || results(old).iter().any(|r| set(r, "adminAccess"))) {
        drop_from_results(next, &["adminAccess"]);
    }
    // dropDisabledDRAResourceClaimConsumableCapacityStatusFields, draConsumableCapacityFeatureInUse.
    let shares = spec_uses_capacity(&old["spec"])
        || results(old).iter().any(|r| set(r, "shareID") || set(r, "consumedCapacity"))
        || items(&old["status"]["devices"]).iter().any(|d| set(d, "shareID"));
    if !(g.consumable_capacity || shares) {
        drop_from_results(next, &["shareID", "consumedCapacity"]);
        items_mut(next, &["status", "devices"]).for_each(|d| remove(d, &["shareID"]));
    }
    // dropDeviceBindingConditionsFields, draDeviceBindingConditionsInUse.
    let binding = results(old).iter().any(|r| set(r, "bindingConditions") || set(r, "bindingFailureConditions"));
    if !(g.binding_conditions || binding) {
        drop_from_results(next, &["bindingConditions", "bindingFailureConditions"]);
    }
    // dropDisabledDRAOptionalNodeOperationsStatusFields, draOptionalNodeOperationsStatusFeatureInUse.
    if !(g.optional_node_operations || results(old).iter().any(|r| filled(r, "skipNodeOperations"))) {
        drop_from_results(next, &["skipNodeOperations"]);
    }
}

/// The DeviceClass strategy's dropDisabledFields: `obj` the class written,
/// `old` the class it replaces (None on create).
pub fn device_class(g: &ApiGates, obj: &mut Value, old: Option<&Value>) {
    // dropDisabledDRAExtendedResourceFields, draExtendedResourceFeatureInUse.
    if !(g.extended_resource || old.is_some_and(|c| set(&c["spec"], "extendedResourceName"))) {
        remove_at(obj, "spec", &["extendedResourceName"]);
    }
}

/// The feature a Node declares (`status.declaredFeatures`) when its kubelet
/// takes node-allocatable resources from DRA devices
/// (component-helpers nodedeclaredfeatures/features/dranodeallocatableresources).
pub const NODE_ALLOCATABLE_FEATURE: &str = "DRANodeAllocatableResources";

/// Why the NodeDeclaredFeatures admission refuses a slice, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAllocatableRefusal {
    /// A device's node (this one) does not exist.
    NoNode {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
    /// A node (this one) that does not declare the feature.
    Unsupported(String),
    /// A device (this one) with node-allocatable resources that maps to no node.
    NoNodes(String),
}

impl std::fmt::Display for NodeAllocatableRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeAllocatableRefusal::NoNode { node, device } => {
                write!(f, "node {node:?} not found for device {device:?}")
            }
            NodeAllocatableRefusal::Unsupported(node) => {
                write!(f, "node {node:?} does not support {NODE_ALLOCATABLE_FEATURE} feature")
            }
            NodeAllocatableRefusal::NoNodes(device) => write!(
                f,
                "device {device:?} in ResourceSlice has NodeAllocatableResources but does not map to any nodes"
            ),
        }
    }
}

impl std::error::Error for NodeAllocatableRefusal {}

/// The NodeDeclaredFeatures admission plugin's ResourceSlice check (on
/// create and update, after validation; plugin/pkg/admission/nodedeclaredfeatures
/// validateNodeAllocatableDRA of v1.37.2), with DRANodeAllocatableResources
/// on: each device with `nodeAllocatableResources` must map to nodes (its
/// own nodeName, nodeSelector or allNodes under perDeviceNodeSelection, else
/// the slice's), a named node must exist, and every node it maps to must
/// declare the feature. `Err` is the refusal's reason (a 403 Forbidden).
pub fn node_allocatable_admission(g: &ApiGates, slice: &Value, nodes: &[&Value]) -> Result<(), NodeAllocatableRefusal> {
    if !g.node_allocatable_resources {
        return Ok(());
    }
    let declares = |n: &Value| items(&n["status"]["declaredFeatures"]).iter().any(|f| f == NODE_ALLOCATABLE_FEATURE);
    let unsupported =
        |n: &Value| NodeAllocatableRefusal::Unsupported(n["metadata"]["name"].as_str().unwrap_or_default().to_string());
    let spec = &slice["spec"];
    for d in items(&spec["devices"]).iter().filter(|d| filled(d, "nodeAllocatableResources")) {
        let name = d["name"].as_str().unwrap_or_default();
        let by = if spec["perDeviceNodeSelection"] == true { d } else { spec };
        let single = by["nodeName"].as_str().filter(|n| !n.is_empty());
        let selector = by.get("nodeSelector").filter(|s| !s.is_null());
        let all = by["allNodes"] == true;
        if let Some(node) = single {
            let n = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == node)
                .ok_or_else(|| NodeAllocatableRefusal::NoNode { node: node.to_string(), device: name.to_string() })?;
            if !declares(n) {
                return Err(unsupported(n));
            }
        } else if selector.is_some() || all {
            let matched = nodes.iter().filter(|n| all || selector.is_some_and(|s| selects(s, n)));
            if let Some(n) = matched.into_iter().find(|n| !declares(n)) {
                return Err(unsupported(n));
            }
        } else {
            return Err(NodeAllocatableRefusal::NoNodes(name.to_string()));
        }
    }
    Ok(())
}

/// Whether a core/v1 NodeSelector selects `node` (component-helpers
/// nodeaffinity: terms ORed, a term's requirements ANDed; labels by
/// matchExpressions, the name by matchFields `metadata.name`; an empty term
/// selects nothing).
fn selects(selector: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let requirement = |r: &Value, value: Option<&str>| {
        let values: Vec<&str> = items(&r["values"]).iter().filter_map(Value::as_str).collect();
        let number = |v: Option<&str>| v.and_then(|v| v.parse::<i64>().ok());
        match r["operator"].as_str().unwrap_or_default() {
            "In" => value.is_some_and(|v| values.contains(&v)),
            "NotIn" => !value.is_some_and(|v| values.contains(&v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" => matches!((number(value), number(values.first().copied())), (Some(a), Some(b)) if a > b),
            "Lt" => matches!((number(value), number(values.first().copied())), (Some(a), Some(b)) if a < b),
            _ => false,
        }
    };
    items(&selector["nodeSelectorTerms"]).iter().any(|t| {
        let exprs = items(&t["matchExpressions"]);
        let fields = items(&t["matchFields"]);
        (!exprs.is_empty() || !fields.is_empty())
            && exprs.iter().all(|r| requirement(r, r["key"].as_str().and_then(|k| labels[k].as_str())))
            && fields.iter().all(|r| r["key"] == "metadata.name" && requirement(r, node["metadata"]["name"].as_str()))
    })
}

/// The v1 defaulting of a slice's devices, as an object is decoded: a
/// taint without `timeAdded` gets `now` (SetDefaults_DeviceTaint;
/// metav1.Time: whole seconds), and 1.36's node-allocatable mapping without
/// `allocationMultiplier` gets `"1"` (v1.36.3 pkg/apis/resource/v1
/// SetDefaults_Device; the field exists only where the profile's API is 1.36's).
pub fn default_slice(obj: &mut Value, now: &str) {
    for d in items_mut(obj, &["spec", "devices"]) {
        if let Some(map) = d.get_mut("nodeAllocatableResourceMappings").and_then(Value::as_object_mut) {
            for m in map.values_mut().filter_map(Value::as_object_mut) {
                if m.get("allocationMultiplier").is_none_or(Value::is_null) {
                    m.insert("allocationMultiplier".into(), Value::String("1".into()));
                }
            }
        }
        for t in items_mut(d, &["taints"]) {
            if let Some(t) = t.as_object_mut().filter(|t| t.get("timeAdded").is_none_or(Value::is_null)) {
                t.insert("timeAdded".into(), Value::String(now.into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OFF: ApiGates = ApiGates {
        device_taints: false,
        device_taint_rules: false,
        partitionable_devices: false,
        partitionable_devices_type: false,
        binding_conditions: false,
        consumable_capacity: false,
        compatibility_groups: false,
        node_allocatable_resources: false,
        list_type_attributes: false,
        optional_node_operations: false,
        prioritized_list: false,
        admin_access: false,
        derived_attributes: false,
        extended_resource: false,
    };
    const ON: ApiGates = ApiGates {
        device_taints: true,
        device_taint_rules: true,
        partitionable_devices: true,
        partitionable_devices_type: true,
        binding_conditions: true,
        consumable_capacity: true,
        compatibility_groups: true,
        node_allocatable_resources: true,
        list_type_attributes: true,
        optional_node_operations: true,
        prioritized_list: true,
        admin_access: true,
        derived_attributes: true,
        extended_resource: true,
    };

    fn full_slice() -> Value {
        json!({"spec": {"driver": "d", "partitionTypeAttribute": "d/type", "skipNodeOperations": ["*"],
            "perDeviceNodeSelection": true, "sharedCounters": [{"name": "s"}],
            "devices": [{"name": "d0", "taints": [{"key": "k", "effect": "NoSchedule"}],
                "bindingConditions": ["a"], "bindingFailureConditions": ["b"], "bindsToNode": true,
                "allowMultipleAllocations": true, "capacity": {"m": {"value": "1", "requestPolicy": {"default": "1"}}},
                "nodeAllocatableResources": {"cpu": {}}, "attributes": {"l": {"strings": ["x"]}, "s": {"string": "x"}},
                "consumesCounters": [{"counterSet": "s", "compatibilityGroups": ["g"]}], "nodeName": "n"}]}})
    }

    /// Every slice field a gate guards goes with the gate off, and stays
    /// with it on.
    #[test]
    fn a_slice_loses_each_gated_field_with_its_gate_off() {
        let mut s = full_slice();
        slice(&ON, &mut s, None);
        assert_eq!(s, full_slice());
        slice(&OFF, &mut s, None);
        assert_eq!(
            s,
            json!({"spec": {"driver": "d", "devices": [{"name": "d0", "capacity": {"m": {"value": "1"}},
                "attributes": {"l": {}, "s": {"string": "x"}}}]}})
        );
        // With partitionable devices on, compatibility groups go alone.
        let mut s = full_slice();
        slice(&ApiGates { partitionable_devices: true, ..OFF }, &mut s, None);
        assert_eq!(s["spec"]["devices"][0]["consumesCounters"], json!([{"counterSet": "s"}]));
        assert_eq!(s["spec"]["devices"][0]["nodeName"], "n");
    }

    /// An update keeps what the replaced slice uses (FeatureInUse of the old object).
    #[test]
    fn a_slice_update_keeps_the_fields_the_old_slice_uses() {
        let mut s = full_slice();
        slice(&OFF, &mut s, Some(&full_slice()));
        assert_eq!(s, full_slice());
        // Binding conditions need DRAResourceClaimDeviceStatus too, which is on.
        let old = json!({"spec": {"devices": [{"name": "d0", "bindsToNode": false}]}});
        let mut s = full_slice();
        slice(&OFF, &mut s, Some(&old));
        assert_eq!(s["spec"]["devices"][0]["bindingConditions"], json!(["a"]));
        assert!(s["spec"]["devices"][0].get("taints").is_none());
    }

    fn full_spec() -> Value {
        json!({"devices": {"constraints": [{"distinctAttribute": "d/x"}],
            "requests": [{"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": true, "tolerations": [{"key": "k"}],
                "capacity": {"requests": {"m": "1"}}, "derivedAttributes": [{"name": "d/n"}]}},
                {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "c", "tolerations": [{"key": "k"}]}]}]}})
    }

    #[test]
    fn a_claim_spec_loses_each_gated_field_with_its_gate_off_unless_in_use() {
        let mut s = full_spec();
        claim_spec(&ON, &mut s, None);
        assert_eq!(s, full_spec());
        claim_spec(&OFF, &mut s, None);
        assert_eq!(
            s,
            json!({"devices": {"constraints": [{}], "requests": [{"name": "a", "exactly": {"deviceClassName": "c"}}, {"name": "b"}]}})
        );
        let mut s = full_spec();
        claim_spec(&OFF, &mut s, Some(&full_spec()));
        assert_eq!(s, full_spec());
        // With the prioritized list on, a subrequest's tolerations go with DRADeviceTaints.
        let mut s = full_spec();
        claim_spec(&ApiGates { prioritized_list: true, ..OFF }, &mut s, None);
        assert_eq!(s["devices"]["requests"][1]["firstAvailable"], json!([{"name": "x", "deviceClassName": "c"}]));
    }

    #[test]
    fn a_claim_status_loses_each_gated_field_with_its_gate_off_unless_in_use() {
        let status = json!({"allocation": {"devices": {"results": [{"request": "a", "device": "d0", "adminAccess": true,
            "shareID": "u", "consumedCapacity": {"m": "1"}, "bindingConditions": ["a"], "bindingFailureConditions": ["b"],
            "skipNodeOperations": ["*"]}]}}, "devices": [{"device": "d0", "shareID": "u"}]});
        let old = json!({"spec": {"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "c"}}]}}});
        let mut next = json!({"spec": old["spec"], "status": status});
        claim_status(&ON, &mut next, &old);
        assert_eq!(next["status"], status);
        claim_status(&OFF, &mut next, &old);
        assert_eq!(
            next["status"],
            json!({"allocation": {"devices": {"results": [{"request": "a", "device": "d0"}]}}, "devices": [{"device": "d0"}]})
        );
        let in_use = json!({"spec": old["spec"], "status": status});
        let mut next = in_use.clone();
        claim_status(&OFF, &mut next, &in_use);
        assert_eq!(next["status"], status);
    }

    #[test]
    fn a_device_class_loses_its_extended_resource_name_with_the_gate_off_unless_in_use() {
        let class = json!({"spec": {"extendedResourceName": "example.com/gpu"}});
        let mut c = class.clone();
        device_class(&ApiGates { extended_resource: true, ..OFF }, &mut c, None);
        assert_eq!(c, class);
        device_class(&OFF, &mut c, Some(&class));
        assert_eq!(c, class);
        device_class(&OFF, &mut c, None);
        assert_eq!(c, json!({"spec": {}}));
    }

    #[test]
    fn node_allocatable_resources_need_nodes_that_declare_the_feature() {
        let on = ApiGates { node_allocatable_resources: true, ..OFF };
        let slice = |spec: Value| {
            let mut s = json!({"spec": spec});
            s["spec"]["devices"] = json!([{"name": "d0", "nodeAllocatableResources": {"cpu": {}}}]);
            s
        };
        let with = json!({"metadata": {"name": "a", "labels": {"z": "1"}}, "status": {"declaredFeatures": ["DRANodeAllocatableResources"]}});
        let without = json!({"metadata": {"name": "b", "labels": {"z": "2"}}});
        let nodes = [&with, &without];
        let on_a = slice(json!({"nodeName": "a"}));
        assert_eq!(node_allocatable_admission(&on, &on_a, &nodes), Ok(()));
        assert_eq!(node_allocatable_admission(&OFF, &slice(json!({"nodeName": "c"})), &nodes), Ok(()));
        assert_eq!(
            node_allocatable_admission(&on, &slice(json!({"nodeName": "c"})), &nodes).map_err(|e| e.to_string()),
            Err("node \"c\" not found for device \"d0\"".into())
        );
        assert_eq!(
            node_allocatable_admission(&on, &slice(json!({"nodeName": "b"})), &nodes).map_err(|e| e.to_string()),
            Err("node \"b\" does not support DRANodeAllocatableResources feature".into())
        );
        assert!(node_allocatable_admission(&on, &slice(json!({"allNodes": true})), &nodes).is_err());
        let sel = |op: &str, v: &str| json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": op, "values": [v]}]}]}});
        assert_eq!(node_allocatable_admission(&on, &slice(sel("In", "1")), &nodes), Ok(()));
        assert!(node_allocatable_admission(&on, &slice(sel("NotIn", "1")), &nodes).is_err());
        assert!(node_allocatable_admission(&on, &slice(sel("Gt", "1")), &nodes).is_err());
        assert!(node_allocatable_admission(&on, &slice(json!({"driver": "x"})), &nodes)
            .unwrap_err()
            .to_string()
            .contains("does not map to any nodes"));
    }

    #[test]
    fn device_taints_get_their_time_added() {
        let mut s = json!({"spec": {"devices": [{"name": "d0", "taints": [{"key": "k"}, {"key": "l", "timeAdded": "2020-01-01T00:00:00Z"}]}]}});
        default_slice(&mut s, "2026-01-01T00:00:00Z");
        let times: Vec<&Value> = items(&s["spec"]["devices"][0]["taints"]).iter().map(|t| &t["timeAdded"]).collect();
        assert_eq!(times, [&json!("2026-01-01T00:00:00Z"), &json!("2020-01-01T00:00:00Z")]);
        let mut plain = json!({"spec": {"sharedCounters": []}});
        default_slice(&mut plain, "x");
        assert_eq!(plain, json!({"spec": {"sharedCounters": []}}));
    }

    /// kube_features.go v1.37.2: the defaults by version.
    #[test]
    fn the_defaults_follow_kube_features() {
        let g = ApiGates::of_minor(37);
        assert!(g.device_taints && g.partitionable_devices && g.binding_conditions && g.consumable_capacity);
        assert!(g.prioritized_list && g.admin_access && g.extended_resource);
        assert!(!(g.partitionable_devices_type || g.compatibility_groups || g.node_allocatable_resources));
        assert!(!(g.list_type_attributes || g.optional_node_operations || g.derived_attributes));
        let g = ApiGates::of_minor(35);
        assert!(!(g.device_taints || g.partitionable_devices || g.binding_conditions || g.consumable_capacity));
        assert!(g.prioritized_list && g.admin_access && !g.extended_resource);
        assert!(!ApiGates::of_minor(33).prioritized_list);
    }
}
