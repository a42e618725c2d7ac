//! A ResourceSlice's devices as the allocator reads them (resource.k8s.io v1,
//! and v1beta1's `basic` nesting): typed attributes, capacities with their
//! request policies (KEP-5075), shared counters and their consumption
//! (KEP-4815) with their compatibility groups (KEP-5963), taints (KEP-5055),
//! allowMultipleAllocations, binding conditions (KEP-5007), list-typed
//! attributes (KEP-5491) and node-allocatable resources (KEP-5517); request
//! tolerations and DeviceTaintRules.

use super::error::{FieldError, Problem};
use super::quantity::Quantity;
use super::Object;
use serde_json::Value;
use std::collections::BTreeMap;

/// A device attribute's value (exactly one of string, int, bool, version,
/// or — KEP-5491, DRAListTypeAttributes — a non-empty list of one of them:
/// strings, ints, bools, versions).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Attribute {
    /// `string`.
    String(String),
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `version` (semantic version text).
    Version(String),
    /// `strings` (KEP-5491).
    Strings(Vec<String>),
    /// `ints` (KEP-5491).
    Ints(Vec<i64>),
    /// `bools` (KEP-5491).
    Bools(Vec<bool>),
    /// `versions` (KEP-5491).
    Versions(Vec<String>),
}

/// An attribute's values as a set of one type (allocator_experimental.go
/// deviceAttributeListAsSet): a scalar is a set of one, a list the set of
/// its items. Different types never intersect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeSet {
    /// string or strings.
    Strings(std::collections::BTreeSet<String>),
    /// int or ints.
    Ints(std::collections::BTreeSet<i64>),
    /// bool or bools.
    Bools(std::collections::BTreeSet<bool>),
    /// version or versions (compared as text, as upstream does).
    Versions(std::collections::BTreeSet<String>),
}

impl AttributeSet {
    /// The values both have, or None when none (or the types differ).
    pub fn intersection(&self, o: &AttributeSet) -> Option<AttributeSet> {
        fn both<T: Ord + Clone>(
            a: &std::collections::BTreeSet<T>,
            b: &std::collections::BTreeSet<T>,
        ) -> Option<std::collections::BTreeSet<T>> {
            let i: std::collections::BTreeSet<T> = a.intersection(b).cloned().collect();
            (!i.is_empty()).then_some(i)
        }
        match (self, o) {
            (AttributeSet::Strings(a), AttributeSet::Strings(b)) => both(a, b).map(AttributeSet::Strings),
            (AttributeSet::Ints(a), AttributeSet::Ints(b)) => both(a, b).map(AttributeSet::Ints),
            (AttributeSet::Bools(a), AttributeSet::Bools(b)) => both(a, b).map(AttributeSet::Bools),
            (AttributeSet::Versions(a), AttributeSet::Versions(b)) => both(a, b).map(AttributeSet::Versions),
            _ => None,
        }
    }
}

impl Attribute {
    /// Whether it is one of the list types (KEP-5491).
    pub fn is_list(&self) -> bool {
        matches!(self, Attribute::Strings(_) | Attribute::Ints(_) | Attribute::Bools(_) | Attribute::Versions(_))
    }

    /// How many values it holds (a scalar one; validation.go
    /// numEntriesDeviceAttribute counts list items).
    pub fn values(&self) -> usize {
        match self {
            Attribute::Strings(v) | Attribute::Versions(v) => v.len(),
            Attribute::Ints(v) => v.len(),
            Attribute::Bools(v) => v.len(),
            _ => 1,
        }
    }

    /// Its values as a set; None for an empty list (upstream's
    /// attributeAsSet answers nil for it: it matches nothing).
    pub fn as_set(&self) -> Option<AttributeSet> {
        let set = match self {
            Attribute::String(s) => AttributeSet::Strings([s.clone()].into()),
            Attribute::Int(n) => AttributeSet::Ints([*n].into()),
            Attribute::Bool(b) => AttributeSet::Bools([*b].into()),
            Attribute::Version(v) => AttributeSet::Versions([v.clone()].into()),
            Attribute::Strings(v) if !v.is_empty() => AttributeSet::Strings(v.iter().cloned().collect()),
            Attribute::Ints(v) if !v.is_empty() => AttributeSet::Ints(v.iter().copied().collect()),
            Attribute::Bools(v) if !v.is_empty() => AttributeSet::Bools(v.iter().copied().collect()),
            Attribute::Versions(v) if !v.is_empty() => AttributeSet::Versions(v.iter().cloned().collect()),
            _ => return None,
        };
        Some(set)
    }
}

/// `requestPolicy` of a capacity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// default: consumed when a request names no amount.
    pub default: Option<Quantity>,
    /// validValues (sorted).
    pub valid_values: Vec<Quantity>,
    /// validRange.min.
    pub min: Option<Quantity>,
    /// validRange.max.
    pub max: Option<Quantity>,
    /// validRange.step.
    pub step: Option<Quantity>,
}

/// One capacity of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// value.
    pub value: Quantity,
    /// requestPolicy (None: a request without an amount takes all of it).
    pub policy: Option<Policy>,
}

/// A counter set: `sharedCounters[]` of a slice, or `consumesCounters[]` of a device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CounterSet {
    /// name (sharedCounters) or counterSet (consumesCounters).
    pub name: String,
    /// counter → value.
    pub counters: BTreeMap<String, Quantity>,
    /// compatibilityGroups of a consumesCounters entry (KEP-5963,
    /// DRADeviceCompatibilityGroups): devices drawing from one counter set
    /// are co-allocated only while their groups intersect. Empty for
    /// sharedCounters.
    pub groups: Vec<String>,
}

/// A device taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// key.
    pub key: String,
    /// value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// effect: NoSchedule, NoExecute or None.
    pub effect: String,
    /// timeAdded (RFC 3339, checked when read): when the taint was put on;
    /// a NoExecute eviction counts its tolerationSeconds from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}:{}", self.key, self.effect),
            None => write!(f, "{}:{}", self.key, self.effect),
        }
    }
}

/// A request's toleration (copied into the allocation result as upstream does).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// key (empty with Exists: every key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// operator: Equal (default) or Exists.
    pub operator: String,
    /// value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// effect (empty: every effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// tolerationSeconds (NoExecute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl Toleration {
    /// Whether it tolerates `t` (resourceclaim.ToleratesTaint).
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.as_deref().is_some_and(|e| e != t.effect) {
            return false;
        }
        if self.key.as_deref().is_some_and(|k| k != t.key) {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => true,
            _ => self.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or(""),
        }
    }
}

/// A device of a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceDevice {
    /// Its name.
    pub name: String,
    /// Fully qualified attribute name (`DOMAIN/ATTR`) → value.
    pub attributes: BTreeMap<String, Attribute>,
    /// Fully qualified capacity name → capacity.
    pub capacity: BTreeMap<String, Capacity>,
    /// consumesCounters.
    pub consumes: Vec<CounterSet>,
    /// taints.
    pub taints: Vec<Taint>,
    /// allowMultipleAllocations.
    pub multi: bool,
    /// bindsToNode (KEP-5007).
    pub binds_to_node: bool,
    /// bindingConditions (KEP-5007): condition types a driver sets True in
    /// the claim's `status.devices` before the pod may be bound.
    pub binding_conditions: Vec<String>,
    /// bindingFailureConditions (KEP-5007): any of them True fails the binding.
    pub binding_failure_conditions: Vec<String>,
    /// nodeAllocatableResources (KEP-5517, DRANodeAllocatableResources):
    /// node resource name (cpu, memory, …) → how an allocation of this
    /// device counts against the node's allocatable.
    pub node_allocatable: BTreeMap<String, NodeAllocatable>,
}

/// One `nodeAllocatableResources` entry of a device (KEP-5517).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeAllocatable {
    /// mapping.capacityKey: the consumed capacity that is the base amount.
    pub capacity_key: Option<String>,
    /// mapping.capacityMultiplier.
    pub capacity_multiplier: Option<Quantity>,
    /// mapping.deviceMultiplier: per allocated device.
    pub device_multiplier: Option<Quantity>,
    /// overhead.perPod.
    pub per_pod: Option<Quantity>,
    /// overhead.perContainer.
    pub per_container: Option<Quantity>,
    /// Whether `mapping` is set (the claim then cannot be shared between pods).
    pub mapped: bool,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// A quantity field (a string, or a bare number as YAML may give it).
pub(super) fn quantity(v: &Value, at: &str) -> Result<Quantity, FieldError> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return Err(FieldError::invalid(at, "a quantity must be a string such as \"80Gi\"")),
    };
    Quantity::read(&text).map_err(|e| FieldError::new(at, Problem::Quantity(e)))
}

fn qualified(driver: &str, k: &str) -> String {
    if k.contains('/') {
        k.to_string()
    } else {
        format!("{driver}/{k}")
    }
}

/// A list of strings (absent: empty).
fn strings(v: Option<&Value>, at: &str) -> Result<Vec<String>, FieldError> {
    let mut out = Vec::new();
    for (i, x) in items(v).iter().enumerate() {
        out.push(x.as_str().ok_or_else(|| FieldError::must(format!("{at}[{i}]"), "be a string"))?.to_string());
    }
    Ok(out)
}

/// A list attribute's items (`ints`, `bools`, `strings`, `versions`): a
/// non-empty list of one type.
fn list_of<T>(v: &Value, at: &str, item: impl Fn(&Value) -> Option<T>) -> Result<Vec<T>, FieldError> {
    let a = v.as_array().ok_or_else(|| FieldError::must(at, "be a list"))?;
    if a.is_empty() {
        return Err(FieldError::invalid(at, "must not be empty if specified"));
    }
    a.iter()
        .enumerate()
        .map(|(i, x)| item(x).ok_or_else(|| FieldError::new(format!("{at}[{i}]"), Problem::WrongType)))
        .collect()
}

/// One attribute's value: exactly one of string, int, bool, version, or
/// (KEP-5491) strings, ints, bools, versions.
fn attribute(a: &Value, at: &str) -> Result<Attribute, FieldError> {
    let text = |x: &Value| x.as_str().map(str::to_string);
    let fields = ["string", "int", "bool", "version", "strings", "ints", "bools", "versions"];
    let set: Vec<&str> = fields.iter().copied().filter(|f| a.get(*f).is_some_and(|v| !v.is_null())).collect();
    let [field] = set.as_slice() else {
        return Err(FieldError::invalid(
            at,
            "set exactly one of string, int, bool, version, strings, ints, bools, versions",
        ));
    };
    let v = &a[*field];
    let wrong = || FieldError::new(format!("{at}.{field}"), Problem::WrongType);
    Ok(match *field {
        "string" => Attribute::String(text(v).ok_or_else(wrong)?),
        "int" => Attribute::Int(v.as_i64().ok_or_else(wrong)?),
        "bool" => Attribute::Bool(v.as_bool().ok_or_else(wrong)?),
        "version" => Attribute::Version(text(v).ok_or_else(wrong)?),
        "strings" => Attribute::Strings(list_of(v, &format!("{at}.strings"), text)?),
        "ints" => Attribute::Ints(list_of(v, &format!("{at}.ints"), Value::as_i64)?),
        "bools" => Attribute::Bools(list_of(v, &format!("{at}.bools"), Value::as_bool)?),
        _ => Attribute::Versions(list_of(v, &format!("{at}.versions"), text)?),
    })
}

fn node_allocatable(v: Option<&Value>, at: &str) -> Result<BTreeMap<String, NodeAllocatable>, FieldError> {
    let mut out = BTreeMap::new();
    for (name, r) in v.and_then(Value::as_object).into_iter().flatten() {
        let at = format!("{at}[{name}]");
        let q = |x: Option<&Value>, k: &str| x.map(|x| quantity(x, &format!("{at}.{k}"))).transpose();
        let m = r.get("mapping").filter(|m| !m.is_null());
        let o = r.get("overhead").filter(|o| !o.is_null());
        out.insert(
            name.clone(),
            NodeAllocatable {
                capacity_key: m.and_then(|m| str_of(m, "capacityKey")).map(str::to_string),
                capacity_multiplier: q(m.and_then(|m| m.get("capacityMultiplier")), "mapping.capacityMultiplier")?,
                device_multiplier: q(m.and_then(|m| m.get("deviceMultiplier")), "mapping.deviceMultiplier")?,
                per_pod: q(o.and_then(|o| o.get("perPod")), "overhead.perPod")?,
                per_container: q(o.and_then(|o| o.get("perContainer")), "overhead.perContainer")?,
                mapped: m.is_some(),
            },
        );
    }
    Ok(out)
}

fn counters(v: Option<&Value>, at: &str) -> Result<BTreeMap<String, Quantity>, FieldError> {
    let mut out = BTreeMap::new();
    for (k, c) in v.and_then(Value::as_object).into_iter().flatten() {
        let at = format!("{at}[{k}]");
        let value = c.get("value").ok_or_else(|| FieldError::required(format!("{at}.value")))?;
        out.insert(k.clone(), quantity(value, &format!("{at}.value"))?);
    }
    Ok(out)
}

fn counter_sets(v: Option<&Value>, key: &str, at: &str) -> Result<Vec<CounterSet>, FieldError> {
    let mut out = Vec::new();
    for (i, s) in items(v).iter().enumerate() {
        let at = format!("{at}[{i}]");
        let name = str_of(s, key).ok_or_else(|| FieldError::required(format!("{at}.{key}")))?.to_string();
        let groups = strings(s.get("compatibilityGroups"), &format!("{at}.compatibilityGroups"))?;
        out.push(CounterSet { name, counters: counters(s.get("counters"), &format!("{at}.counters"))?, groups });
    }
    Ok(out)
}

fn taint(v: &Value, at: &str) -> Result<Taint, FieldError> {
    let key = str_of(v, "key").ok_or_else(|| FieldError::required(format!("{at}.key")))?.to_string();
    let effect = str_of(v, "effect").ok_or_else(|| FieldError::required(format!("{at}.effect")))?;
    if !["NoSchedule", "NoExecute", "None"].contains(&effect) {
        let problem = Problem::NotSupported { value: effect.to_string(), allowed: "NoSchedule, NoExecute or None" };
        return Err(FieldError::new(format!("{at}.effect"), problem));
    }
    Ok(Taint {
        key,
        value: str_of(v, "value").map(str::to_string),
        effect: effect.to_string(),
        time_added: match str_of(v, "timeAdded") {
            // metav1.Time: kube-apiserver refuses what is not RFC 3339.
            Some(t) => Some(
                crate::core::time::parse_rfc3339(t)
                    .map(|_| t.to_string())
                    .map_err(|e| FieldError::new(format!("{at}.timeAdded"), Problem::Time(e)))?,
            ),
            None => None,
        },
    })
}

/// A request's `tolerations`.
pub(super) fn tolerations(v: Option<&Value>, at: &str) -> Result<Vec<Toleration>, FieldError> {
    let mut out = Vec::new();
    for (i, t) in items(v).iter().enumerate() {
        let at = format!("{at}[{i}]");
        let operator = str_of(t, "operator").unwrap_or("Equal");
        if !["Equal", "Exists"].contains(&operator) {
            let problem = Problem::NotSupported { value: operator.to_string(), allowed: "Equal or Exists" };
            return Err(FieldError::new(format!("{at}.operator"), problem));
        }
        let key = str_of(t, "key").map(str::to_string);
        if key.is_none() && operator != "Exists" {
            return Err(FieldError::invalid(at, "an empty key needs operator Exists"));
        }
        out.push(Toleration {
            key,
            operator: operator.to_string(),
            value: str_of(t, "value").map(str::to_string),
            effect: str_of(t, "effect").map(str::to_string),
            toleration_seconds: t.get("tolerationSeconds").and_then(Value::as_i64),
        });
    }
    Ok(out)
}

/// A DeviceTaintRule's spec.
pub(super) fn taint_rule(spec: &Value) -> Result<super::TaintRule, FieldError> {
    let sel = spec.get("deviceSelector");
    let field = |k: &str| sel.and_then(|s| str_of(s, k)).map(str::to_string);
    if sel.is_some_and(|s| s.get("deviceClassName").is_some() || s.get("selectors").is_some()) {
        return Err(FieldError::invalid("spec.deviceSelector", "only driver, pool and device are supported"));
    }
    let t = spec.get("taint").ok_or_else(|| FieldError::required("spec.taint"))?;
    Ok(super::TaintRule {
        driver: field("driver"),
        pool: field("pool"),
        device: field("device"),
        taint: taint(t, "spec.taint")?,
    })
}

fn policy(v: &Value, at: &str) -> Result<Policy, FieldError> {
    let q = |k: &str, v: Option<&Value>| v.map(|x| quantity(x, &format!("{at}.{k}"))).transpose();
    let range = v.get("validRange");
    let mut valid_values = Vec::new();
    for (i, x) in items(v.get("validValues")).iter().enumerate() {
        valid_values.push(quantity(x, &format!("{at}.validValues[{i}]"))?);
    }
    valid_values.sort();
    Ok(Policy {
        default: q("default", v.get("default"))?,
        valid_values,
        min: q("validRange.min", range.and_then(|r| r.get("min")))?,
        max: q("validRange.max", range.and_then(|r| r.get("max")))?,
        step: q("validRange.step", range.and_then(|r| r.get("step")))?,
    })
}

fn device(driver: &str, d: &Value, at: &str) -> Result<SliceDevice, FieldError> {
    let name = str_of(d, "name").ok_or_else(|| FieldError::required(format!("{at}.name")))?.to_string();
    // v1beta1 nests everything but the name under `basic`.
    let b = d.get("basic").unwrap_or(d);
    let mut attributes = BTreeMap::new();
    for (k, a) in b.get("attributes").and_then(Value::as_object).into_iter().flatten() {
        attributes.insert(qualified(driver, k), attribute(a, &format!("{at}.attributes[{k}]"))?);
    }
    let mut capacity = BTreeMap::new();
    for (k, c) in b.get("capacity").and_then(Value::as_object).into_iter().flatten() {
        let at = format!("{at}.capacity[{k}]");
        // v1beta1 once had a bare quantity here.
        let value = quantity(c.get("value").unwrap_or(c), &format!("{at}.value"))?;
        let policy = c.get("requestPolicy").map(|p| policy(p, &format!("{at}.requestPolicy"))).transpose()?;
        capacity.insert(qualified(driver, k), Capacity { value, policy });
    }
    let mut taints = Vec::new();
    for (i, t) in items(b.get("taints")).iter().enumerate() {
        taints.push(taint(t, &format!("{at}.taints[{i}]"))?);
    }
    Ok(SliceDevice {
        name,
        attributes,
        capacity,
        consumes: counter_sets(b.get("consumesCounters"), "counterSet", &format!("{at}.consumesCounters"))?,
        taints,
        multi: b.get("allowMultipleAllocations").and_then(Value::as_bool).unwrap_or(false),
        binds_to_node: b.get("bindsToNode").and_then(Value::as_bool).unwrap_or(false),
        binding_conditions: strings(b.get("bindingConditions"), &format!("{at}.bindingConditions"))?,
        binding_failure_conditions: strings(
            b.get("bindingFailureConditions"),
            &format!("{at}.bindingFailureConditions"),
        )?,
        node_allocatable: node_allocatable(
            b.get("nodeAllocatableResources"),
            &format!("{at}.nodeAllocatableResources"),
        )?,
    })
}

/// A ResourceSlice's spec.
pub(super) fn slice(name: String, s: &Value) -> Result<Object, FieldError> {
    let driver = str_of(s, "driver").ok_or_else(|| FieldError::required("spec.driver"))?.to_string();
    let pool = s.get("pool").and_then(|p| str_of(p, "name"));
    let pool = pool.ok_or_else(|| FieldError::required("spec.pool.name"))?.to_string();
    let mut devices = Vec::new();
    for (i, d) in items(s.get("devices")).iter().enumerate() {
        devices.push(device(&driver, d, &format!("spec.devices[{i}]"))?);
    }
    let skip = items(s.get("skipNodeOperations")).iter().filter_map(Value::as_str).map(str::to_string).collect();
    let counters = counter_sets(s.get("sharedCounters"), "name", "spec.sharedCounters")?;
    let generation = s.get("pool").and_then(|p| p.get("generation")).and_then(Value::as_i64).unwrap_or(0);
    let slice_count = s.get("pool").and_then(|p| p.get("resourceSliceCount")).and_then(Value::as_i64);
    Ok(Object::Slice { name, driver, pool, devices, skip, counters, generation, slice_count })
}
