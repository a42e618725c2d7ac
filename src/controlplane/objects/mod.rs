//! The resource.k8s.io objects the DRA mock kubelet reads from its manifest
//! directory (beside the pods): ResourceClaim, ResourceClaimTemplate,
//! DeviceClass and ResourceSlice (v1, and the v1beta1 shapes), DeviceTaintRule
//! and Namespace (its labels). What the allocator
//! ([`crate::controlplane::allocator`]) reads of them, its documented subset
//! (docs/dra.md, "The allocator"):
//!
//! - a request is `exactly: {deviceClassName, count | allocationMode: All,
//!   selectors, adminAccess, tolerations, capacity.requests}` (v1, defaults
//!   ExactCount and count 1) or the same fields on the request (v1beta1), or
//!   `firstAvailable`: up to 8 sub-requests (no adminAccess), the first that
//!   can be satisfied taken (`request` is `<request>/<subrequest>`);
//! - `spec.devices.constraints[]`: `matchAttribute` and `distinctAttribute`;
//! - a device class is a DeviceClass manifest; when none has that name and a
//!   driver of that name is known, it means "every device of that driver";
//! - selectors are CEL expressions, kept as written (one that does not compile
//!   is refused, as kube-apiserver refuses it) and evaluated by the allocator
//!   as the scheduler compiles them;
//! - a slice's devices: typed attributes (string, int, bool, version),
//!   capacities with `requestPolicy`, `consumesCounters`, `taints`,
//!   `allowMultipleAllocations`; the slice's `sharedCounters` and
//!   `skipNodeOperations` (KEP-5945, copied to each allocated device);
//! - a DeviceTaintRule's `deviceSelector` by driver, pool and device (not by
//!   class or CEL) and its taint;
//! - a Namespace's labels (`resource.kubernetes.io/admin-access: "true"`
//!   allows adminAccess in its claims).
//!
//! A DeviceClass is read as the typed `resource/v1` message
//! ([`crate::api::k8s`], [`typed`]: a field of the wrong JSON type is refused
//! with its path); the other kinds are still read from their JSON.
//!
//! Quantities parse as apimachinery's ([`quantity`]). Health does not steer
//! allocation (the scheduler does not see it either).

use crate::api::k8s::api::resource::v1 as resourcev1;
use serde_json::Value;
use std::collections::BTreeMap;

mod devices;
mod error;
pub mod quantity;
#[cfg(test)]
mod tests;

pub use devices::{
    Attribute, AttributeSet, Capacity, CounterSet, NodeAllocatable, Policy, SliceDevice, Taint, Toleration,
};
pub use error::{FieldError, ObjectError, Problem};
use quantity::Quantity;

/// One CEL selector (`cel.expression`), compiled by the allocator as the
/// scheduler compiles it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The expression.
    pub expression: String,
}

impl Selector {
    /// A selector for every device of `driver` (a class named after a driver).
    pub fn driver(driver: &str) -> Selector {
        Selector { expression: format!("device.driver == {driver:?}") }
    }
}

/// One device request of a claim (v1 `exactly`, a v1beta1 request, or a
/// `firstAvailable` sub-request).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The request's name.
    pub name: String,
    /// deviceClassName.
    pub class: String,
    /// How many devices (ExactCount; v1 default 1).
    pub count: u64,
    /// allocationMode: All.
    pub all: bool,
    /// Its selectors (all must match).
    pub selectors: Vec<Selector>,
    /// adminAccess.
    pub admin: bool,
    /// tolerations (KEP-5055).
    pub tolerations: Vec<Toleration>,
    /// capacity.requests (KEP-5075): capacity name → amount.
    pub capacity: BTreeMap<String, Quantity>,
    /// derivedAttributes (KEP-6080, DRADerivedAttributes): fully qualified
    /// name → CEL expression, evaluated per candidate device where a
    /// constraint names the attribute (shadowing a static one).
    pub derived: Vec<(String, String)>,
    /// firstAvailable: sub-requests tried in order (then the fields above are unused).
    pub first_available: Vec<Request>,
}

/// One `spec.devices.constraints[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// The requests it covers (empty: all of the claim's).
    pub requests: Vec<String>,
    /// matchAttribute or distinctAttribute: a fully qualified attribute
    /// name every device must have, the same value (match) or each its own
    /// (distinct).
    pub match_attribute: String,
    /// distinctAttribute rather than matchAttribute.
    pub distinct: bool,
}

/// A claim's spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimSpec {
    /// spec.devices.requests.
    pub requests: Vec<Request>,
    /// spec.devices.constraints.
    pub constraints: Vec<Constraint>,
}

/// A DeviceTaintRule: a taint put on every device its selector names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintRule {
    /// spec.deviceSelector.driver.
    pub driver: Option<String>,
    /// spec.deviceSelector.pool.
    pub pool: Option<String>,
    /// spec.deviceSelector.device.
    pub device: Option<String>,
    /// spec.taint.
    pub taint: Taint,
}

/// An object from the manifest directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A ResourceClaim.
    Claim {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// metadata.uid (derived from namespace and name when absent).
        uid: String,
        /// Its spec.
        spec: ClaimSpec,
        /// The whole object as written (what the local API server serves:
        /// its spec, and a `status` a scheduler already wrote).
        raw: Value,
    },
    /// A ResourceClaimTemplate.
    Template {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// spec.spec.
        spec: ClaimSpec,
        /// The whole object as written (its `spec.spec` is the generated claims' spec).
        raw: Value,
    },
    /// A DeviceClass.
    Class {
        /// Name.
        name: String,
        /// Its selectors.
        selectors: Vec<Selector>,
        /// spec.config: copied into the allocation of each request of this
        /// class (source `FromClass`), as the scheduler does.
        config: Vec<Value>,
        /// spec.extendedResourceName (KEP-5004): the extended resource it serves.
        extended_resource_name: Option<String>,
        /// The whole object as written (what the local API server stores).
        raw: Value,
    },
    /// A CustomResourceDefinition, or an object of another API group: the
    /// local API server stores and serves them (custom resources).
    Api {
        /// `Api GROUP/KIND NAMESPACE/NAME`.
        key: String,
        /// The object as written.
        value: Value,
    },
    /// A ResourceSlice.
    Slice {
        /// metadata.name.
        name: String,
        /// spec.driver.
        driver: String,
        /// spec.pool.name.
        pool: String,
        /// spec.devices.
        devices: Vec<SliceDevice>,
        /// spec.skipNodeOperations (KEP-5945).
        skip: Vec<String>,
        /// spec.sharedCounters (KEP-4815).
        counters: Vec<CounterSet>,
        /// spec.pool.generation (0 when absent).
        generation: i64,
        /// spec.pool.resourceSliceCount (None when absent: the pool is
        /// taken as complete).
        slice_count: Option<i64>,
    },
    /// A Namespace (its labels decide whether claims in it may ask for adminAccess).
    Namespace {
        /// Name.
        name: String,
        /// metadata.labels.
        labels: BTreeMap<String, String>,
    },
    /// A DeviceTaintRule (KEP-5055).
    TaintRule {
        /// Name.
        name: String,
        /// What it taints, and with what.
        rule: TaintRule,
    },
}

impl Object {
    /// `Kind namespace/name` (the key objects are stored under).
    pub fn key(&self) -> String {
        match self {
            Object::Claim { namespace, name, .. } => format!("ResourceClaim {namespace}/{name}"),
            Object::Template { namespace, name, .. } => format!("ResourceClaimTemplate {namespace}/{name}"),
            Object::Class { name, .. } => format!("DeviceClass {name}"),
            Object::Slice { name, .. } => format!("ResourceSlice {name}"),
            Object::Namespace { name, .. } => format!("Namespace {name}"),
            Object::TaintRule { name, .. } => format!("DeviceTaintRule {name}"),
            Object::Api { key, .. } => key.clone(),
        }
    }
}

/// The kinds read here.
pub const KINDS: &[&str] =
    &["ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", "Namespace", "DeviceTaintRule"];

/// A stable UUID-shaped UID for an object without one.
pub fn derived_uid(seed: &str) -> String {
    let f = |s: &str| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    let h = format!("{:016x}{:016x}", f(seed), f(&format!("{seed}\0dra")));
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// The kind of a manifest's JSON value, if it is one of [`KINDS`].
pub fn dra_kind(v: &Value) -> Option<&'static str> {
    let k = v.get("kind").and_then(Value::as_str)?;
    KINDS.iter().find(|x| **x == k).copied()
}

/// A JSON object as its typed Kubernetes message ([`crate::api::k8s`]): a
/// field of the wrong JSON type is a [`Problem::Type`] at its path.
pub fn typed<'de, T: serde::Deserialize<'de>>(v: &'de Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(v)
        .map_err(|e| FieldError::new(e.path().to_string(), Problem::Type(e.into_inner().to_string())))
}

/// Selector `i` of the list at `at`: its CEL expression (`cel.expression`).
fn selector(expr: Option<&str>, at: &str, i: usize) -> Result<Selector, FieldError> {
    let expr = expr
        .filter(|e| !e.trim().is_empty())
        .ok_or_else(|| FieldError::invalid(format!("{at}[{i}]"), "a selector needs cel.expression"))?;
    // kube-apiserver refuses an expression too long or that does not
    // compile (parsed within cel-go's limits, never deeper).
    if let Err(e) = crate::controlplane::cel::check(expr) {
        return Err(FieldError::new(format!("{at}[{i}].cel.expression"), Problem::Cel(e)));
    }
    Ok(Selector { expression: expr.to_string() })
}

fn selectors(v: Option<&Value>, at: &str) -> Result<Vec<Selector>, FieldError> {
    let mut out = Vec::new();
    for (i, s) in v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        out.push(selector(s.get("cel").and_then(|c| c.get("expression")).and_then(Value::as_str), at, i)?);
    }
    Ok(out)
}

/// A DeviceClass, read as the typed `resource/v1` DeviceClass.
fn class(name: String, v: &Value) -> Result<Object, FieldError> {
    let c: resourcev1::DeviceClass = typed(v)?;
    let spec = c.spec.unwrap_or_default();
    let selectors = spec
        .selectors
        .iter()
        .enumerate()
        .map(|(i, s)| selector(s.cel.as_ref().and_then(|c| c.expression.as_deref()), "spec.selectors", i))
        .collect::<Result<_, _>>()?;
    // spec.config goes into allocations as written: its JSON (checked typed above).
    let config =
        if spec.config.is_empty() { vec![] } else { v["spec"]["config"].as_array().cloned().unwrap_or_default() };
    let extended_resource_name = spec.extended_resource_name.filter(|n| !n.is_empty());
    Ok(Object::Class { name, selectors, config, extended_resource_name, raw: v.clone() })
}

/// A request's (or sub-request's) fields: class, count or All, selectors,
/// adminAccess, tolerations, capacity requests. v1's defaults apply:
/// allocationMode ExactCount, count 1.
fn request_fields(name: String, e: &Value, at: &str) -> Result<Request, FieldError> {
    let class = e.get("deviceClassName").and_then(Value::as_str).filter(|c| !c.is_empty());
    let class = class.ok_or_else(|| FieldError::invalid(at, "deviceClassName is required"))?.to_string();
    let all = match e.get("allocationMode").and_then(Value::as_str) {
        None | Some("ExactCount") => false,
        Some("All") => true,
        Some(other) => {
            return Err(FieldError::invalid(at, format!("allocationMode {other:?} is not ExactCount or All")))
        }
    };
    let count = match e.get("count") {
        None => 1,
        Some(_) if all => return Err(FieldError::invalid(at, "count must not be set with allocationMode All")),
        Some(c) => {
            c.as_u64().filter(|n| *n > 0).ok_or_else(|| FieldError::invalid(at, "count must be a positive integer"))?
        }
    };
    let admin = e.get("adminAccess").and_then(Value::as_bool).unwrap_or(false);
    let selectors = selectors(e.get("selectors"), &format!("{at}.selectors"))?;
    let tolerations = devices::tolerations(e.get("tolerations"), &format!("{at}.tolerations"))?;
    let mut capacity = BTreeMap::new();
    let reqs = e.get("capacity").and_then(|c| c.get("requests"));
    for (k, q) in reqs.and_then(Value::as_object).into_iter().flatten() {
        capacity.insert(k.clone(), devices::quantity(q, &format!("{at}.capacity.requests[{k}]"))?);
    }
    let derived = derived_attributes(e.get("derivedAttributes"), &format!("{at}.derivedAttributes"))?;
    Ok(Request { name, class, count, all, selectors, admin, tolerations, capacity, derived, first_available: vec![] })
}

/// resourceapi.DeviceDerivedAttributesMaxSize.
pub const MAX_DERIVED_ATTRIBUTES: usize = 32;

/// A request's `derivedAttributes` (KEP-6080): each a fully qualified name
/// and a CEL expression that parses (as kube-apiserver refuses one that
/// does not compile), at most 32, names unique.
fn derived_attributes(v: Option<&Value>, at: &str) -> Result<Vec<(String, String)>, FieldError> {
    let list = v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if list.len() > MAX_DERIVED_ATTRIBUTES {
        return Err(FieldError::new(at, Problem::TooMany(list.len(), MAX_DERIVED_ATTRIBUTES)));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, d) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let name = d.get("name").and_then(Value::as_str).filter(|n| n.contains('/'));
        let name = name.ok_or_else(|| FieldError::must(format!("{at}.name"), FULLY_QUALIFIED))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(FieldError::new(format!("{at}.name"), Problem::Duplicate(name.to_string())));
        }
        let expr = d.get("expression").and_then(Value::as_str).filter(|e| !e.trim().is_empty());
        let expr = expr.ok_or_else(|| FieldError::required(format!("{at}.expression")))?;
        if let Err(e) = crate::controlplane::cel::check(expr) {
            return Err(FieldError::new(format!("{at}.expression"), Problem::Cel(e)));
        }
        out.push((name.to_string(), expr.to_string()));
    }
    Ok(out)
}

fn constraints(v: Option<&Value>, at: &str) -> Result<Vec<Constraint>, FieldError> {
    let mut out = Vec::new();
    for (i, c) in v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let at = format!("{at}[{i}]");
        let (key, distinct) = match (c.get("matchAttribute"), c.get("distinctAttribute")) {
            (Some(_), Some(_)) => {
                return Err(FieldError::invalid(at, "set exactly one of matchAttribute and distinctAttribute"))
            }
            (None, Some(_)) => ("distinctAttribute", true),
            _ => ("matchAttribute", false),
        };
        let attr = c.get(key).and_then(Value::as_str).filter(|a| a.contains('/'));
        let attr = attr.ok_or_else(|| FieldError::must(format!("{at}.{key}"), FULLY_QUALIFIED))?;
        let requests = c
            .get("requests")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        out.push(Constraint { requests, match_attribute: attr.to_string(), distinct });
    }
    Ok(out)
}

/// The rule of an attribute's name.
const FULLY_QUALIFIED: &str = "be a fully qualified name (DOMAIN/ATTR)";

fn claim_spec(spec: Option<&Value>, at: &str) -> Result<ClaimSpec, FieldError> {
    let devs = spec.and_then(|s| s.get("devices"));
    let reqs = devs.and_then(|d| d.get("requests")).and_then(Value::as_array);
    let mut requests = Vec::new();
    for (i, r) in reqs.map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let at = format!("{at}.devices.requests[{i}]");
        let name = r.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| FieldError::required(format!("{at}.name")))?.to_string();
        let subs = r.get("firstAvailable").and_then(Value::as_array);
        if let Some(subs) = subs {
            if r.get("exactly").is_some() || r.get("deviceClassName").is_some() {
                return Err(FieldError::invalid(at, "set exactly one of exactly and firstAvailable"));
            }
            if subs.is_empty() || subs.len() > 8 {
                return Err(FieldError::must(format!("{at}.firstAvailable"), "list 1 to 8 sub-requests"));
            }
            let mut first_available = Vec::new();
            for (j, sub) in subs.iter().enumerate() {
                let at = format!("{at}.firstAvailable[{j}]");
                let sname = sub.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
                let sname = sname.ok_or_else(|| FieldError::required(format!("{at}.name")))?.to_string();
                if sub.get("adminAccess").is_some() {
                    return Err(FieldError::invalid(at, "adminAccess is not allowed in a sub-request"));
                }
                first_available.push(request_fields(sname, sub, &at)?);
            }
            requests.push(Request { name, first_available, ..Request::default() });
            continue;
        }
        // v1 nests the request under `exactly`; v1beta1 has the fields on the request.
        requests.push(request_fields(name, r.get("exactly").unwrap_or(r), &at)?);
    }
    if requests.is_empty() {
        return Err(FieldError::must(format!("{at}.devices.requests"), "list at least one request"));
    }
    let constraints = constraints(devs.and_then(|d| d.get("constraints")), &format!("{at}.devices.constraints"))?;
    for c in &constraints {
        for r in &c.requests {
            let base = r.split('/').next().unwrap_or(r);
            if !requests.iter().any(|q| q.name == base) {
                let detail = format!("request {r:?} is not one of the claim's requests");
                return Err(FieldError::invalid(format!("{at}.devices.constraints"), detail));
            }
        }
    }
    Ok(ClaimSpec { requests, constraints })
}

/// A resource a CRD declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    /// `spec.group`.
    pub group: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.names.singular`.
    pub singular: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.scope == Namespaced`.
    pub namespaced: bool,
    /// Served versions, each with whether it has the status subresource.
    pub versions: Vec<(String, bool)>,
}

impl Crd {
    /// Read a CustomResourceDefinition; `Err` names what is missing.
    pub fn parse(v: &Value) -> Result<Crd, ObjectError> {
        let spec = &v["spec"];
        let text = |x: &Value, what: &str| {
            x.as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| ObjectError::Crd(FieldError::required(what)))
        };
        let group = text(&spec["group"], "spec.group")?;
        let plural = text(&spec["names"]["plural"], "spec.names.plural")?;
        let kind = text(&spec["names"]["kind"], "spec.names.kind")?;
        let singular = spec["names"]["singular"].as_str().map(str::to_string).unwrap_or_else(|| kind.to_lowercase());
        let versions: Vec<(String, bool)> = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["served"].as_bool().unwrap_or(false))
            .filter_map(|x| Some((x["name"].as_str()?.to_string(), x["subresources"]["status"].is_object())))
            .collect();
        if versions.is_empty() {
            return Err(ObjectError::Crd(FieldError::must("spec.versions", "serve at least one version")));
        }
        Ok(Crd { group, plural, singular, kind, namespaced: spec["scope"] != "Cluster", versions })
    }
}

/// Whether a manifest is an object the local API server serves as a custom
/// resource: a CustomResourceDefinition, or an object of an API group other
/// than core and resource.k8s.io.
pub fn is_api_object(v: &Value) -> bool {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    !group.is_empty()
        && group != "resource.k8s.io"
        && v.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty())
}

/// Parse a manifest [`is_api_object`] says is one (a CRD is checked as one).
pub fn parse_api_object(v: &Value) -> Result<Object, ObjectError> {
    let kind = v["kind"].as_str().unwrap_or_default();
    let name = v["metadata"]["name"].as_str().filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| FieldError::required("metadata.name"))?;
    if kind == "CustomResourceDefinition" {
        Crd::parse(v)?;
    }
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let namespace = v["metadata"]["namespace"].as_str().unwrap_or("default");
    Ok(Object::Api { key: format!("Api {group}/{kind} {namespace}/{name}"), value: v.clone() })
}

/// Parse one object of [`KINDS`] (the caller has checked the kind).
pub fn parse(v: &Value) -> Result<Object, ObjectError> {
    let kind = dra_kind(v).ok_or(ObjectError::NotDra)?;
    let meta = v.get("metadata").ok_or(ObjectError::NoMetadata)?;
    let name = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| FieldError::required("metadata.name"))?.to_string();
    let namespace = meta.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("default");
    let namespace = namespace.to_string();
    let spec = v.get("spec");
    Ok(match kind {
        "ResourceClaim" => {
            let uid = meta.get("uid").and_then(Value::as_str).filter(|u| !u.is_empty()).map(str::to_string);
            let uid = uid.unwrap_or_else(|| derived_uid(&format!("claim\0{namespace}\0{name}")));
            crate::core::validate::uid(&uid).map_err(|e| FieldError::new("metadata.uid", Problem::Uid(e)))?;
            Object::Claim { spec: claim_spec(spec, "spec")?, namespace, name, uid, raw: v.clone() }
        }
        "ResourceClaimTemplate" => {
            let parsed = claim_spec(spec.and_then(|s| s.get("spec")), "spec.spec")?;
            Object::Template { spec: parsed, namespace, name, raw: v.clone() }
        }
        "DeviceClass" => class(name, v)?,
        "Namespace" => {
            let labels = meta.get("labels").and_then(Value::as_object).into_iter().flatten();
            let labels = labels.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
            Object::Namespace { name, labels }
        }
        "DeviceTaintRule" => Object::TaintRule { rule: devices::taint_rule(spec.ok_or(ObjectError::NoSpec)?)?, name },
        _ => devices::slice(name, spec.ok_or(ObjectError::NoSpec)?)?,
    })
}
