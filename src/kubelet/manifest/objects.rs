//! The resource.k8s.io objects the DRA mock kubelet reads from its manifest
//! directory (beside the pods): ResourceClaim, ResourceClaimTemplate,
//! DeviceClass and ResourceSlice (v1, and the v1beta1 request shape). What
//! the allocator ([`crate::kubelet::dra::allocator`]) understands of them:
//!
//! The allocator's documented subset:
//! - a request is `exactly: {deviceClassName, count | allocationMode: All, selectors, adminAccess}`
//!   (v1) or the same fields directly on the request (v1beta1), or `firstAvailable`: a list
//!   of sub-requests (the same fields but adminAccess), of which the first that can be
//!   satisfied is taken, its devices' `request` being `<request>/<subrequest>`; like the
//!   scheduler, a later request that cannot be satisfied makes the allocator try the next
//!   sub-request of an earlier one;
//! - a ResourceSlice's `spec.skipNodeOperations` (KEP-5945) is copied to each device it
//!   gives (`skipNodeOperations` of the allocation result), as the scheduler does;
//! - a device class is a DeviceClass manifest; when none has that name and a
//!   driver of that name is known, the class means "every device of that driver";
//! - selectors are CEL expressions of the form `TERM && TERM …` where a term is
//!   `device.driver == "NAME"` or `device.attributes["DOMAIN"].ATTR == VALUE`
//!   (VALUE a string, integer or boolean literal); anything else is refused with this list;
//! - devices are those of the ResourceSlice manifests and those the driver's
//!   health stream names; a device is given to one claim at a time unless the
//!   request has `adminAccess: true`. Health does not steer allocation (the
//!   scheduler does not see it either).

use serde_json::Value;
use std::collections::BTreeMap;

/// One selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `device.driver == "NAME"`.
    Driver(String),
    /// `device.attributes["DOMAIN"].ATTR == VALUE` (`DOMAIN/ATTR`, the value as JSON text).
    Attribute(String, Value),
}

/// One device request of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The request's name.
    pub name: String,
    /// deviceClassName.
    pub class: String,
    /// How many devices (ExactCount).
    pub count: u64,
    /// allocationMode: All.
    pub all: bool,
    /// Its selectors (all must match).
    pub selectors: Vec<Selector>,
    /// adminAccess: the device may be shared with other claims.
    pub admin: bool,
    /// firstAvailable: sub-requests tried in order (then the fields above are unused).
    pub first_available: Vec<Request>,
}

/// A claim's spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimSpec {
    /// spec.devices.requests.
    pub requests: Vec<Request>,
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
    },
    /// A ResourceClaimTemplate.
    Template {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// spec.spec.
        spec: ClaimSpec,
    },
    /// A DeviceClass.
    Class {
        /// Name.
        name: String,
        /// Its selectors.
        selectors: Vec<Selector>,
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
        }
    }
}

/// A device of a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    /// Its name.
    pub name: String,
    /// Fully qualified attribute name (`DOMAIN/ATTR`) → value (string, number or bool).
    pub attributes: BTreeMap<String, Value>,
}

/// The kinds read here.
pub const KINDS: &[&str] = &["ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"];

/// What the selector subset is (for error messages).
pub const SELECTOR_SUBSET: &str =
    "device.driver == \"NAME\" or device.attributes[\"DOMAIN\"].ATTR == VALUE, joined with &&";

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

fn parse_literal(s: &str) -> Option<Value> {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        return (!inner.contains('"')).then(|| Value::String(inner.to_string()));
    }
    match s {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        _ => {}
    }
    s.parse::<i64>().ok().map(Value::from)
}

/// Parse a CEL selector in the supported subset.
pub fn parse_selector(expr: &str) -> Result<Vec<Selector>, String> {
    let refuse = || format!("selector {expr:?} is outside the supported subset ({SELECTOR_SUBSET})");
    let mut out = Vec::new();
    for term in expr.split("&&") {
        let (lhs, rhs) = term.split_once("==").ok_or_else(refuse)?;
        let (lhs, rhs) = (lhs.trim(), rhs.trim());
        let value = parse_literal(rhs).ok_or_else(refuse)?;
        if lhs == "device.driver" {
            match value {
                Value::String(s) => out.push(Selector::Driver(s)),
                _ => return Err(refuse()),
            }
        } else if let Some(rest) = lhs.strip_prefix("device.attributes[\"") {
            let (domain, attr) = rest.split_once("\"].").ok_or_else(refuse)?;
            let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !ok(domain) || !ok(attr) {
                return Err(refuse());
            }
            out.push(Selector::Attribute(format!("{domain}/{attr}"), value));
        } else {
            return Err(refuse());
        }
    }
    Ok(out)
}

fn selectors(v: Option<&Value>, at: &str) -> Result<Vec<Selector>, String> {
    let mut out = Vec::new();
    for (i, s) in v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let expr = s
            .get("cel")
            .and_then(|c| c.get("expression"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{at}[{i}]: only cel.expression selectors are supported"))?;
        out.extend(parse_selector(expr).map_err(|e| format!("{at}[{i}]: {e}"))?);
    }
    Ok(out)
}

/// A request's (or sub-request's) fields: class, count or All, selectors, adminAccess.
fn request_fields(name: String, e: &Value, at: &str) -> Result<Request, String> {
    let class = e.get("deviceClassName").and_then(Value::as_str).filter(|c| !c.is_empty());
    let class = class.ok_or_else(|| format!("{at}: deviceClassName is required"))?.to_string();
    let all = match e.get("allocationMode").and_then(Value::as_str) {
        None | Some("ExactCount") => false,
        Some("All") => true,
        Some(other) => return Err(format!("{at}: allocationMode {other:?} is not ExactCount or All")),
    };
    let count = match e.get("count") {
        None => 1,
        Some(c) => c.as_u64().filter(|n| *n > 0).ok_or_else(|| format!("{at}: count must be a positive integer"))?,
    };
    let admin = e.get("adminAccess").and_then(Value::as_bool).unwrap_or(false);
    let selectors = selectors(e.get("selectors"), &format!("{at}.selectors"))?;
    Ok(Request { name, class, count, all, selectors, admin, first_available: vec![] })
}

fn claim_spec(spec: Option<&Value>, at: &str) -> Result<ClaimSpec, String> {
    let reqs = spec.and_then(|s| s.get("devices")).and_then(|d| d.get("requests")).and_then(Value::as_array);
    let mut requests = Vec::new();
    for (i, r) in reqs.map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let at = format!("{at}.devices.requests[{i}]");
        let name = r.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| format!("{at}.name is required"))?.to_string();
        let subs = r.get("firstAvailable").and_then(Value::as_array);
        if let Some(subs) = subs {
            if r.get("exactly").is_some() || r.get("deviceClassName").is_some() {
                return Err(format!("{at}: set exactly one of exactly and firstAvailable"));
            }
            if subs.is_empty() || subs.len() > 8 {
                return Err(format!("{at}.firstAvailable must list 1 to 8 sub-requests"));
            }
            let mut first_available = Vec::new();
            for (j, sub) in subs.iter().enumerate() {
                let at = format!("{at}.firstAvailable[{j}]");
                let sname = sub.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
                let sname = sname.ok_or_else(|| format!("{at}.name is required"))?.to_string();
                if sub.get("adminAccess").is_some() {
                    return Err(format!("{at}: adminAccess is not allowed in a sub-request"));
                }
                first_available.push(request_fields(sname, sub, &at)?);
            }
            requests.push(Request {
                name,
                class: String::new(),
                count: 0,
                all: false,
                selectors: vec![],
                admin: false,
                first_available,
            });
            continue;
        }
        // v1 nests the request under `exactly`; v1beta1 has the fields on the request.
        requests.push(request_fields(name, r.get("exactly").unwrap_or(r), &at)?);
    }
    if requests.is_empty() {
        return Err(format!("{at}.devices.requests must list at least one request"));
    }
    Ok(ClaimSpec { requests })
}

/// Parse one object of [`KINDS`] (the caller has checked the kind).
pub fn parse(v: &Value) -> Result<Object, String> {
    let kind = dra_kind(v).ok_or("not a DRA object")?;
    let meta = v.get("metadata").ok_or("no metadata")?;
    let name = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
    let name = name.ok_or("metadata.name is required")?.to_string();
    let namespace = meta.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("default");
    let namespace = namespace.to_string();
    let spec = v.get("spec");
    Ok(match kind {
        "ResourceClaim" => {
            let uid = meta.get("uid").and_then(Value::as_str).filter(|u| !u.is_empty()).map(str::to_string);
            let uid = uid.unwrap_or_else(|| derived_uid(&format!("claim\0{namespace}\0{name}")));
            crate::core::validate::uid(&uid).map_err(|e| format!("metadata.uid: {e}"))?;
            Object::Claim { spec: claim_spec(spec, "spec")?, namespace, name, uid }
        }
        "ResourceClaimTemplate" => {
            Object::Template { spec: claim_spec(spec.and_then(|s| s.get("spec")), "spec.spec")?, namespace, name }
        }
        "DeviceClass" => {
            Object::Class { selectors: selectors(spec.and_then(|s| s.get("selectors")), "spec.selectors")?, name }
        }
        _ => {
            let s = spec.ok_or("no spec")?;
            let driver = s.get("driver").and_then(Value::as_str).filter(|d| !d.is_empty());
            let driver = driver.ok_or("spec.driver is required")?.to_string();
            let pool = s.get("pool").and_then(|p| p.get("name")).and_then(Value::as_str).filter(|p| !p.is_empty());
            let pool = pool.ok_or("spec.pool.name is required")?.to_string();
            let mut devices = Vec::new();
            for (i, d) in
                s.get("devices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate()
            {
                let dname = d.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
                let dname = dname.ok_or_else(|| format!("spec.devices[{i}].name is required"))?.to_string();
                // v1beta1 nests attributes under `basic`.
                let attrs = d.get("attributes").or_else(|| d.get("basic").and_then(|b| b.get("attributes")));
                let mut attributes = BTreeMap::new();
                for (k, a) in attrs.and_then(Value::as_object).into_iter().flatten() {
                    let value = ["string", "int", "bool", "version"].iter().find_map(|t| a.get(*t)).cloned();
                    let Some(value) = value else { continue };
                    let key = if k.contains('/') { k.clone() } else { format!("{driver}/{k}") };
                    attributes.insert(key, value);
                }
                devices.push(SliceDevice { name: dname, attributes });
            }
            let skip = s
                .get("skipNodeOperations")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            Object::Slice { name, driver, pool, devices, skip }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_parse_in_the_documented_subset_only() {
        assert_eq!(
            parse_selector(
                r#"device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100""#
            )
            .unwrap(),
            vec![
                Selector::Driver("gpu.example.com".into()),
                Selector::Attribute("gpu.example.com/model".into(), json!("a100"))
            ]
        );
        assert_eq!(
            parse_selector(r#"device.attributes["d.x"].n == 4"#).unwrap()[0],
            Selector::Attribute("d.x/n".into(), json!(4))
        );
        for bad in [r#"device.driver != "x""#, "device.capacity[\"x\"].mem > 1", r#"device.driver == "a" || true"#] {
            assert!(parse_selector(bad).unwrap_err().contains("outside the supported subset"), "{bad}");
        }
    }

    #[test]
    fn claims_templates_classes_and_slices_parse_in_v1_and_v1beta1_shapes() {
        let v1 = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"gpu","namespace":"ml"},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu.example.com","count":2}}]}}});
        let Object::Claim { spec, uid, .. } = parse(&v1).unwrap() else { panic!() };
        assert_eq!((spec.requests[0].count, spec.requests[0].class.as_str()), (2, "gpu.example.com"));
        assert_eq!(uid.len(), 36);
        let b1 = json!({"kind":"ResourceClaimTemplate","metadata":{"name":"t"},
            "spec":{"spec":{"devices":{"requests":[{"name":"r","deviceClassName":"c","allocationMode":"All"}]}}}});
        let Object::Template { spec, namespace, .. } = parse(&b1).unwrap() else { panic!() };
        assert!(spec.requests[0].all);
        assert_eq!(namespace, "default");
        let s = json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.x","pool":{"name":"p"},
            "devices":[{"name":"g0","attributes":{"model":{"string":"a"},"other.io/n":{"int":3}}}]}});
        let Object::Slice { devices, .. } = parse(&s).unwrap() else { panic!() };
        assert_eq!(devices[0].attributes["d.x/model"], json!("a"));
        assert_eq!(devices[0].attributes["other.io/n"], json!(3));
        let bad = json!({"kind":"ResourceClaim","metadata":{"name":"x"},"spec":{"devices":{"requests":[{"name":"r","firstAvailable":[]}]}}});
        assert!(parse(&bad).unwrap_err().contains("firstAvailable"));
        let none = json!({"kind":"ResourceClaim","metadata":{"name":"x"},"spec":{}});
        assert!(parse(&none).unwrap_err().contains("at least one request"));
    }
}
