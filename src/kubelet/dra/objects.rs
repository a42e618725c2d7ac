//! The resource.k8s.io objects the DRA mock kubelet reads from its manifest
//! directory (beside the pods): ResourceClaim, ResourceClaimTemplate,
//! DeviceClass and ResourceSlice (v1, and the v1beta1 request shape), and a
//! small allocator standing in for the scheduler.
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
use std::collections::{BTreeMap, BTreeSet};

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

impl Pool<'_> {
    /// The devices for one (sub-)request `r`, recorded as `label`, given the claim's own picks `mine`.
    fn pick(&self, r: &Request, label: &str, mine: &BTreeSet<Key>) -> Result<Vec<Allocated>, String> {
        let claim = self.claim;
        let class = match self.classes.get(&r.class) {
            Some(s) => s.clone(),
            None if self.drivers.contains(&r.class) || self.candidates.iter().any(|c| c.driver == r.class) => {
                vec![Selector::Driver(r.class.clone())]
            }
            None => {
                return Err(format!(
                    "claim {claim}: request {label:?}: device class {:?} not found (add a DeviceClass manifest, or name a registered driver)",
                    r.class
                ))
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
            let hint = if fitting.is_empty() {
                " (devices come from ResourceSlice manifests and from the driver's health stream)"
            } else {
                ""
            };
            return Err(format!(
                "claim {claim}: request {label:?} wants {} device(s) of class {:?}; {} match, {} of them free{hint}",
                if r.all { "all".to_string() } else { want.to_string() },
                r.class,
                fitting.len(),
                free.len()
            ));
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
    ) -> Result<(), String> {
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
        Err(if options.len() == 1 {
            errors.pop().unwrap_or_default()
        } else {
            format!(
                "claim {}: no sub-request of firstAvailable request {:?} can be allocated: {}",
                self.claim,
                r.name,
                errors.join("; ")
            )
        })
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
) -> Result<Vec<Allocated>, String> {
    let pool = Pool { claim, classes, candidates, taken, drivers };
    let mut out = Vec::new();
    pool.from(&spec.requests, 0, &mut BTreeSet::new(), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let e = allocate("ns/c", &req(2, sel.clone(), false), &none, &cands, &taken, &BTreeSet::new()).unwrap_err();
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
        .unwrap_err();
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
        .unwrap_err();
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
        let e = allocate("ns/c", &spec, &none, &cands, &taken, &BTreeSet::new()).unwrap_err();
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
