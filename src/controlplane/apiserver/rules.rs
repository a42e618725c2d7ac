//! kube-apiserver's validation and defaulting of the kinds clients write
//! here beyond ResourceSlices (pure functions over JSON, worded as
//! apimachinery's `field.Error` prints them):
//!
//! - ResourceClaim and ResourceClaimTemplate specs
//!   (`pkg/apis/resource/validation`: `validateDeviceClaim` — request
//!   names, `exactly` or `firstAvailable`, classes, CEL selectors,
//!   allocation modes, constraint and config request references, opaque
//!   configs) and a claim's status update (`validateResourceClaimStatusUpdate`:
//!   reservations, the allocation set once, device statuses of allocated
//!   devices only);
//! - DeviceClass selectors (`validateDeviceClassSpec`);
//! - ConfigMap keys (`ValidateConfigMap`);
//! - Pods (`pkg/apis/core/v1/defaults.go`, the admission plugins a
//!   default kube-apiserver runs on a create — ServiceAccount,
//!   DefaultTolerationSeconds, Priority — and `ValidatePodCreate` for the
//!   fields a device-plugin or DRA pod uses: containers, extended
//!   resources, resource claims).
//!
//! Values printed by `field.Invalid` for Go structs are written as Go's
//! `%v` of the internal type prints them through `json.Marshal` (field
//! names capitalised, unset pointers `null`).

use super::validate::{driver_name, go_quote, Cause};
use serde_json::{json, Value};

/// `resource.DeviceRequestsMaxSize`.
const MAX_REQUESTS: usize = 32;
/// `resource.FirstAvailableDeviceRequestMaxSize`.
const MAX_SUBREQUESTS: usize = 8;
/// `resource.DeviceSelectorsMaxSize`.
const MAX_SELECTORS: usize = 32;
/// `resource.DeviceConstraintsMaxSize`.
const MAX_CONSTRAINTS: usize = 32;
/// `resource.DeviceConfigMaxSize`.
const MAX_CONFIG: usize = 32;
/// `resource.ResourceClaimReservedForMaxSize`.
const MAX_RESERVED_FOR: usize = 256;
/// `resource.OpaqueParametersMaxLength`.
const MAX_OPAQUE_PARAMETERS: usize = 10 * 1024;

pub(super) fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() { "Required value".to_string() } else { format!("Required value: {detail}") };
    Cause { reason: "FieldValueRequired", field: field.into(), message }
}

pub(super) fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {}: {detail}", go_quote(value)),
    }
}

/// `field.Invalid` with a value printed as is (a number, `null`, a Go struct's JSON).
pub(super) fn invalid_raw(field: &str, value: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid", field: field.into(), message: format!("Invalid value: {value}: {detail}") }
}

fn forbidden(field: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueForbidden", field: field.into(), message: format!("Forbidden: {detail}") }
}

fn duplicate(field: &str, value: &str) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        field: field.into(),
        message: format!("Duplicate value: {}", go_quote(value)),
    }
}

fn too_many(field: &str, actual: usize, max: usize) -> Cause {
    super::validate::too_many(field, actual, max)
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let s: Vec<String> = supported.iter().map(|v| go_quote(v)).collect();
    Cause {
        reason: "FieldValueNotSupported",
        field: field.into(),
        message: format!("Unsupported value: {}: supported values: {}", go_quote(value), s.join(", ")),
    }
}

/// apimachinery's `IsDNS1123Label` problems.
pub(super) fn dns_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !b.is_empty() && alnum(b[0]) && alnum(b[b.len() - 1]) && b.iter().all(|&c| alnum(c) || c == b'-');
    if !ok {
        out.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    out
}

fn label_causes(field: &str, s: &str) -> Vec<Cause> {
    dns_label(s).into_iter().map(|m| invalid(field, s, &m)).collect()
}

fn subdomain_causes(field: &str, s: &str) -> Vec<Cause> {
    match crate::core::validate::dns_subdomain(s, crate::core::validate::DNS_SUBDOMAIN_MAX) {
        Ok(()) => vec![],
        Err(e) => vec![invalid(field, s, &e.to_string())],
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A CEL selector expression at `field`, as `validateCELExpression` judges it on create.
fn cel_expression(field: &str, expr: &str) -> Vec<Cause> {
    use crate::controlplane::cel::{check, Refused};
    match check(expr) {
        Ok(()) => match undefined_device_fields(expr) {
            errors if errors.is_empty() => vec![],
            errors => {
                let shown: Vec<String> = errors.iter().map(|e| with_snippet(e, expr)).collect();
                vec![invalid(field, expr, &format!("compilation failed: {}", shown.join("\n")))]
            }
        },
        Err(Refused::TooLong { .. }) => vec![Cause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {} bytes", crate::controlplane::cel::MAX_LENGTH),
        }],
        Err(e @ Refused::Syntax { .. }) => vec![invalid(field, expr, &with_snippet(&e.to_string(), expr))],
        Err(e) => vec![invalid(field, expr, &e.to_string())],
    }
}

/// The fields of the DRA CEL environment's `device` (k8s.io/dynamic-resource-allocation cel/compile.go).
const DEVICE_FIELDS: &[&str] = &["driver", "attributes", "capacity", "allowMultipleAllocations"];

/// cel-go's type-check errors for `device.FIELD` where the device has no
/// such field (`ERROR: <input>:L:C: undefined field 'drvier'`, the column
/// the `.`'s): a scan of the expression's tokens outside string literals
/// (no type checker; a comprehension variable named `device` turns it off).
fn undefined_device_fields(expr: &str) -> Vec<String> {
    let chars: Vec<(usize, char)> = expr.char_indices().collect();
    let mut tokens: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c == '\'' || c == '"' {
            // A string literal (triple-quoted too); escapes skipped.
            let triple = chars.get(i + 1).map(|x| x.1) == Some(c) && chars.get(i + 2).map(|x| x.1) == Some(c);
            let width = if triple { 3 } else { 1 };
            i += width;
            while i < chars.len() {
                if chars[i].1 == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i..].iter().take(width).filter(|x| x.1 == c).count() == width {
                    i += width;
                    break;
                }
                i += 1;
            }
            tokens.push((at, "\"".into()));
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].1.is_ascii_alphanumeric() || chars[i].1 == '_') {
                i += 1;
            }
            tokens.push((at, chars[start..i].iter().map(|x| x.1).collect()));
            continue;
        }
        if !c.is_whitespace() {
            tokens.push((at, c.to_string()));
        }
        i += 1;
    }
    if tokens.windows(3).any(|w| w[0].1 == "(" && w[1].1 == "device" && w[2].1 == ",") {
        return vec![];
    }
    let mut out = Vec::new();
    for (k, w) in tokens.windows(3).enumerate() {
        let after_dot = k > 0 && tokens[k - 1].1 == ".";
        let is_field = w[2].1.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let is_call = tokens.get(k + 3).is_some_and(|t| t.1 == "(");
        let unknown = !DEVICE_FIELDS.contains(&w[2].1.as_str());
        if w[0].1 == "device" && !after_dot && w[1].1 == "." && is_field && !is_call && unknown {
            let dot = w[1].0;
            let line = expr[..dot].matches('\n').count() + 1;
            let col = expr[..dot].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            out.push(format!("ERROR: <input>:{line}:{col}: undefined field '{}'", w[2].1));
        }
    }
    out
}

/// A cel-go error (`ERROR: <input>:LINE:COL: …`) with the source line and
/// a caret under the column, as cel-go's `ToDisplayString` writes it.
fn with_snippet(message: &str, expr: &str) -> String {
    let Some(at) = message.find("<input>:") else { return message.to_string() };
    let mut nums = message[at + "<input>:".len()..].splitn(3, ':');
    let (Some(Ok(line)), Some(Ok(col))) = (nums.next().map(str::parse::<usize>), nums.next().map(str::parse::<usize>))
    else {
        return message.to_string();
    };
    let Some(src) = expr.split('\n').nth(line.saturating_sub(1)) else { return message.to_string() };
    let src = src.replace('\t', " ");
    let mut caret: String =
        src.chars().take(col.saturating_sub(1)).map(|c| if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' }).collect();
    let wide = src.chars().nth(col.saturating_sub(1)).is_some_and(|c| c.len_utf8() > 1);
    caret.push(if wide { '\u{ff3e}' } else { '^' });
    format!("{message}\n | {src}\n | {caret}")
}

fn selectors(field: &str, sel: &Value) -> Vec<Cause> {
    let list = items(sel);
    if list.len() > MAX_SELECTORS {
        return vec![too_many(field, list.len(), MAX_SELECTORS)];
    }
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        if s["cel"].is_null() {
            out.push(required(&format!("{field}[{i}].cel"), ""));
        } else {
            out.extend(cel_expression(&format!("{field}[{i}].cel.expression"), text(&s["cel"]["expression"])));
        }
    }
    out
}

/// `validateExactDeviceRequest` / the class, selector and mode part of a sub-request.
fn exact(at: &str, e: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let class = text(&e["deviceClassName"]);
    if class.is_empty() {
        out.push(required(&format!("{at}.deviceClassName"), ""));
    } else {
        out.extend(subdomain_causes(&format!("{at}.deviceClassName"), class));
    }
    out.extend(selectors(&format!("{at}.selectors"), &e["selectors"]));
    let count = e["count"].as_i64().unwrap_or(0);
    match text(&e["allocationMode"]) {
        "All" if count != 0 => out.push(invalid_raw(
            &format!("{at}.count"),
            &count.to_string(),
            "must not be specified when allocationMode is 'All'",
        )),
        "ExactCount" if count <= 0 => {
            out.push(invalid_raw(&format!("{at}.count"), &count.to_string(), "must be greater than zero"))
        }
        "All" | "ExactCount" => {}
        other => out.push(not_supported(&format!("{at}.allocationMode"), other, &["All", "ExactCount"])),
    }
    out
}

/// Go's `omitempty` on a resource.k8s.io/v1 object's lists, as kube-apiserver
/// decodes a write and encodes what it stored: an empty list is written
/// nowhere (k8s.io/api@v0.37.2 resource/v1/types.go: every list of these
/// kinds and of ObjectMeta is `omitempty` but a DeviceClaim's `requests` (the
/// `requests` under `devices`) and a device status's `conditions`). Raw
/// JSON (`data`, `parameters`, `fieldsV1`) is left as sent.
pub(super) fn omit_empty_lists(v: &mut Value) {
    fn walk(v: &mut Value, parent: &str) {
        match v {
            Value::Object(m) => {
                let kept = |k: &str| k == "conditions" || (k == "requests" && parent == "devices");
                m.retain(|k, x| kept(k) || !x.as_array().is_some_and(Vec::is_empty));
                for (k, x) in m.iter_mut().filter(|(k, _)| !["data", "parameters", "fieldsV1"].contains(&k.as_str())) {
                    walk(x, k);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, parent)),
            _ => {}
        }
    }
    walk(v, "")
}

/// The attributes the constraints of a claim spec name, by the request they
/// target ("" for a constraint on every request): validation.go
/// gatherConstraintAttributes.
fn constraint_attributes(devices: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in items(&devices["constraints"]) {
        let attr = match (c["matchAttribute"].as_str(), c["distinctAttribute"].as_str()) {
            (Some(a), _) | (None, Some(a)) => a.to_string(),
            _ => continue,
        };
        match items(&c["requests"]) {
            [] => out.push((String::new(), attr)),
            reqs => out.extend(reqs.iter().map(|r| (text(r).to_string(), attr.clone()))),
        }
    }
    out
}

/// validateDeviceDerivedAttributes (DRADerivedAttributes, KEP-6080) of the
/// list at `at` of request `request` (`req/sub` for a subrequest): each
/// name referenced by a constraint on every request, on this one or on its
/// parent (isAttributeUsedByConstraint), each expression set and a CEL
/// expression as a selector's; the names unique.
fn derived_attributes(at: &str, list: &Value, request: &str, used: &[(String, String)]) -> Vec<Cause> {
    const UNUSED: &str =
        "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting this request";
    let parent = request.split_once('/').map(|(p, _)| p);
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, a) in items(list).iter().enumerate() {
        let name = text(&a["name"]);
        let targets = |r: &str| r.is_empty() || r == request || Some(r) == parent;
        if name.is_empty() {
            out.push(required(&format!("{at}[{i}].name"), ""));
        } else if !used.iter().any(|(r, attr)| targets(r) && attr == name) {
            out.push(invalid(&format!("{at}[{i}].name"), name, UNUSED));
        }
        match text(&a["expression"]) {
            "" => out.push(required(&format!("{at}[{i}].expression"), "")),
            e => out.extend(cel_expression(&format!("{at}[{i}].expression"), e)),
        }
        if !seen.insert(name) {
            out.push(duplicate(&format!("{at}[{i}]"), name));
        }
    }
    out
}

/// The request names of a claim spec: request name → its sub-request names.
fn request_names(devices: &Value) -> Vec<(String, Vec<String>)> {
    items(&devices["requests"])
        .iter()
        .map(|r| {
            let subs = items(&r["firstAvailable"]).iter().map(|s| text(&s["name"]).to_string()).collect();
            (text(&r["name"]).to_string(), subs)
        })
        .collect()
}

/// `validateRequestNameRef`.
fn request_ref(field: &str, name: &str, names: &[(String, Vec<String>)]) -> Vec<Cause> {
    const MSG: &str =
        "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        return vec![invalid(field, name, MSG)];
    }
    let mut out: Vec<Cause> = segments.iter().flat_map(|s| label_causes(field, s)).collect();
    let known = match segments.as_slice() {
        [r] => names.iter().any(|(n, _)| n == r),
        [r, s] => names.iter().any(|(n, subs)| n == r && subs.iter().any(|x| x == s)),
        _ => false,
    };
    if !known {
        out.push(invalid(field, name, MSG));
    }
    out
}

fn request_refs(field: &str, refs: &Value, names: &[(String, Vec<String>)]) -> Vec<Cause> {
    let list = items(refs);
    if list.len() > MAX_REQUESTS {
        return vec![too_many(field, list.len(), MAX_REQUESTS)];
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, r) in list.iter().enumerate() {
        out.extend(request_ref(&format!("{field}[{i}]"), text(r), names));
    }
    for (i, r) in list.iter().enumerate() {
        if !seen.insert(text(r)) {
            out.push(duplicate(&format!("{field}[{i}]"), text(r)));
        }
    }
    out
}

/// `validateOpaqueConfiguration` under `at` (a config with `opaque`).
fn opaque(at: &str, c: &Value) -> Vec<Cause> {
    if c["opaque"].is_null() {
        return vec![required(&format!("{at}.opaque"), "")];
    }
    let mut out = driver_name(&format!("{at}.opaque.driver"), text(&c["opaque"]["driver"]));
    let p = &c["opaque"]["parameters"];
    let field = format!("{at}.opaque.parameters");
    match p {
        Value::Null => out.push(required(&field, "")),
        Value::Object(_) if p.to_string().len() > MAX_OPAQUE_PARAMETERS => out.push(Cause {
            reason: "FieldValueTooLong",
            field,
            message: format!("Too long: may not be more than {MAX_OPAQUE_PARAMETERS} bytes"),
        }),
        Value::Object(_) => {}
        _ => out.push(invalid(&field, "<value omitted>", "must be a valid JSON object")),
    }
    out
}

/// What a ResourceSlice update may not change (`validateResourceSliceSpec`
/// with an old spec: the pool's name, the driver and the node name are
/// immutable; the driver's name format is [`super::validate::resource_slice`]'s).
pub(super) fn slice_update(new: &Value, old: &Value) -> Vec<Cause> {
    let (spec, was) = (&new["spec"], &old["spec"]);
    let mut out = Vec::new();
    for (field, v, o) in [
        ("spec.pool.name", &spec["pool"]["name"], &was["pool"]["name"]),
        ("spec.driver", &spec["driver"], &was["driver"]),
        ("spec.nodeName", &spec["nodeName"], &was["nodeName"]),
    ] {
        if text(v) != text(o) {
            out.push(invalid(field, text(v), "field is immutable"));
        }
    }
    out
}

/// `validateResourceClaimSpec` of the spec at `at` (`spec`, or `spec.spec` in a template).
pub(super) fn claim_spec(at: &str, spec: &Value) -> Vec<Cause> {
    claim_spec_gated(at, spec, true)
}

/// [`claim_spec`] with DRAConsumableCapacity `consumable` (on or off): a
/// constraint with neither matchAttribute nor distinctAttribute is refused
/// in its words for each (validation.go validateDeviceConstraint).
pub(super) fn claim_spec_gated(at: &str, spec: &Value, consumable: bool) -> Vec<Cause> {
    let devices = &spec["devices"];
    let base = format!("{at}.devices");
    let names = request_names(devices);
    let used = constraint_attributes(devices);
    let mut out = Vec::new();
    let requests = items(&devices["requests"]);
    if requests.len() > MAX_REQUESTS {
        out.push(too_many(&format!("{base}.requests"), requests.len(), MAX_REQUESTS));
    } else {
        for (i, r) in requests.iter().enumerate() {
            let p = format!("{base}.requests[{i}]");
            out.extend(label_causes(&format!("{p}.name"), text(&r["name"])));
            let subs = items(&r["firstAvailable"]);
            match (!r["exactly"].is_null(), !subs.is_empty()) {
                (false, false) => out.push(required(&p, "exactly one of `exactly` or `firstAvailable` is required")),
                (true, true) => out.push(invalid_raw(
                    &p,
                    "null",
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
                )),
                (true, false) => {
                    out.extend(exact(&format!("{p}.exactly"), &r["exactly"]));
                    let (at, list) = (format!("{p}.exactly.derivedAttributes"), &r["exactly"]["derivedAttributes"]);
                    out.extend(derived_attributes(&at, list, text(&r["name"]), &used));
                }
                (false, true) if subs.len() > MAX_SUBREQUESTS => {
                    out.push(too_many(&format!("{p}.firstAvailable"), subs.len(), MAX_SUBREQUESTS))
                }
                (false, true) => {
                    let mut seen = std::collections::HashSet::new();
                    for (j, s) in subs.iter().enumerate() {
                        let sp = format!("{p}.firstAvailable[{j}]");
                        out.extend(label_causes(&format!("{sp}.name"), text(&s["name"])));
                        out.extend(exact(&sp, s));
                        let sub = format!("{}/{}", text(&r["name"]), text(&s["name"]));
                        out.extend(derived_attributes(
                            &format!("{sp}.derivedAttributes"),
                            &s["derivedAttributes"],
                            &sub,
                            &used,
                        ));
                    }
                    for (j, s) in subs.iter().enumerate() {
                        if !seen.insert(text(&s["name"])) {
                            out.push(duplicate(&format!("{p}.firstAvailable[{j}]"), text(&s["name"])));
                        }
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (i, r) in requests.iter().enumerate() {
            if !seen.insert(text(&r["name"])) {
                out.push(duplicate(&format!("{base}.requests[{i}]"), text(&r["name"])));
            }
        }
    }
    let constraints = items(&devices["constraints"]);
    if constraints.len() > MAX_CONSTRAINTS {
        out.push(too_many(&format!("{base}.constraints"), constraints.len(), MAX_CONSTRAINTS));
    } else {
        for (i, c) in constraints.iter().enumerate() {
            out.extend(request_refs(&format!("{base}.constraints[{i}].requests"), &c["requests"], &names));
            if c["matchAttribute"].is_null() && c["distinctAttribute"].is_null() {
                out.push(if consumable {
                    required(
                        &format!("{base}.constraints[{i}]"),
                        "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
                    )
                } else {
                    required(&format!("{base}.constraints[{i}].matchAttribute"), "")
                });
            }
        }
    }
    let config = items(&devices["config"]);
    if config.len() > MAX_CONFIG {
        out.push(too_many(&format!("{base}.config"), config.len(), MAX_CONFIG));
    } else {
        for (i, c) in config.iter().enumerate() {
            let p = format!("{base}.config[{i}]");
            out.extend(request_refs(&format!("{p}.requests"), &c["requests"], &names));
            out.extend(opaque(&p, c));
        }
    }
    out
}

/// The device ID a status entry or result names, as `structured.SharedDeviceID` is printed.
fn device_id_json(d: &Value) -> String {
    json!({"Driver": text(&d["driver"]), "Pool": text(&d["pool"]), "Device": text(&d["device"]),
        "ShareID": text(&d["shareID"])})
    .to_string()
}

/// `validateResourceClaimStatusUpdate` of `new` over `old` (both whole claims).
pub(super) fn claim_status_update(new: &Value, old: &Value) -> Vec<Cause> {
    let (status, old_status) = (&new["status"], &old["status"]);
    let names = request_names(&new["spec"]["devices"]);
    let mut out = Vec::new();
    let reserved = items(&status["reservedFor"]);
    if reserved.len() > MAX_RESERVED_FOR {
        out.push(too_many("status.reservedFor", reserved.len(), MAX_RESERVED_FOR));
    } else {
        for (i, r) in reserved.iter().enumerate() {
            for f in ["resource", "name", "uid"] {
                if text(&r[f]).is_empty() {
                    out.push(required(&format!("status.reservedFor[{i}].{f}"), ""));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (i, r) in reserved.iter().enumerate() {
            if !seen.insert(text(&r["uid"])) {
                out.push(duplicate(&format!("status.reservedFor[{i}]"), text(&r["uid"])));
            }
        }
    }
    let allocation = &status["allocation"];
    let results = items(&allocation["devices"]["results"]);
    let allocated = |d: &Value| {
        results.iter().any(|r| ["driver", "pool", "device", "shareID"].iter().all(|f| text(&r[*f]) == text(&d[*f])))
    };
    let devices = items(&status["devices"]);
    for (i, d) in devices.iter().enumerate() {
        let p = format!("status.devices[{i}]");
        out.extend(driver_name(&format!("{p}.driver"), text(&d["driver"])));
        if text(&d["pool"]).is_empty() {
            out.push(required(&format!("{p}.pool"), ""));
        }
        out.extend(label_causes(&format!("{p}.device"), text(&d["device"])));
        if !allocated(d) {
            out.push(invalid_raw(&p, &device_id_json(d), "must be an allocated device in the claim"));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, d) in devices.iter().enumerate() {
        if !seen.insert(device_id_json(d)) {
            out.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("status.devices[{i}]"),
                message: format!("Duplicate value: {}", device_id_json(d)),
            });
        }
    }
    if !reserved.is_empty() && allocation.is_null() {
        out.push(forbidden("status.reservedFor", "may not be specified when `allocated` is not set"));
    }
    match (&old_status["allocation"], allocation) {
        (Value::Null, Value::Null) => {}
        (Value::Null, a) => {
            for (i, r) in items(&a["devices"]["results"]).iter().enumerate() {
                let p = format!("status.allocation.devices.results[{i}]");
                out.extend(request_ref(&format!("{p}.request"), text(&r["request"]), &names));
                out.extend(driver_name(&format!("{p}.driver"), text(&r["driver"])));
                if text(&r["pool"]).is_empty() {
                    out.push(required(&format!("{p}.pool"), ""));
                } else {
                    for part in text(&r["pool"]).split('/') {
                        out.extend(subdomain_causes(&format!("{p}.pool"), part));
                    }
                }
                out.extend(label_causes(&format!("{p}.device"), text(&r["device"])));
            }
        }
        (_, Value::Null) => {}
        (o, n) if o != n => out.push(invalid_raw("status.allocation", "null", "field cannot be modified once set")),
        _ => {}
    }
    out
}

/// `validateDeviceClassSpec` on create: the selectors and the configs.
pub(super) fn device_class(obj: &Value) -> Vec<Cause> {
    let mut out = selectors("spec.selectors", &obj["spec"]["selectors"]);
    for (i, c) in items(&obj["spec"]["config"]).iter().enumerate() {
        out.extend(opaque(&format!("spec.config[{i}]"), c));
    }
    out
}

/// `ValidateConfigMap`'s keys (`IsConfigMapKey`) in `data` and `binaryData`.
pub(super) fn config_map(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for field in ["data", "binaryData"] {
        for k in obj[field].as_object().into_iter().flat_map(|m| m.keys()) {
            let at = format!("{field}[{k}]");
            if k.len() > 253 {
                out.push(invalid(&at, k, "must be no more than 253 characters"));
            }
            if k.is_empty() || !k.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')) {
                out.push(invalid(&at, k, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
            }
            if k == "." || k == ".." {
                out.push(invalid(&at, k, "must not be '.'"));
            } else if k.starts_with("..") {
                out.push(invalid(&at, k, "must not start with '..'"));
            }
        }
    }
    out
}

// ---- Go's printing of internal structs ----

/// A list as Go's `json.Marshal` writes a slice: `null` when empty.
fn go_list(v: &Value, item: impl Fn(&Value) -> Value) -> Value {
    match v.as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.iter().map(item).collect()),
        _ => Value::Null,
    }
}

fn go_str(v: &Value) -> Value {
    json!(text(v))
}

fn go_ptr(v: &Value) -> Value {
    if v.is_null() {
        Value::Null
    } else {
        v.clone()
    }
}

fn go_selectors(v: &Value) -> Value {
    go_list(
        v,
        |s| json!({"CEL": if s["cel"].is_null() { Value::Null } else { json!({"Expression": text(&s["cel"]["expression"])}) }}),
    )
}

fn go_tolerations(v: &Value) -> Value {
    go_list(v, |t| {
        json!({"Key": go_str(&t["key"]), "Operator": go_str(&t["operator"]), "Value": go_str(&t["value"]),
            "Effect": go_str(&t["effect"]), "TolerationSeconds": go_ptr(&t["tolerationSeconds"])})
    })
}

fn go_capacity(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    json!({"Requests": go_ptr(&v["requests"])})
}

fn go_exact(e: &Value, sub: bool) -> Value {
    let mut m = serde_json::Map::new();
    if sub {
        m.insert("Name".into(), go_str(&e["name"]));
    }
    m.insert("DeviceClassName".into(), go_str(&e["deviceClassName"]));
    m.insert("Selectors".into(), go_selectors(&e["selectors"]));
    m.insert("AllocationMode".into(), go_str(&e["allocationMode"]));
    m.insert("Count".into(), json!(e["count"].as_i64().unwrap_or(0)));
    if !sub {
        m.insert("AdminAccess".into(), go_ptr(&e["adminAccess"]));
    }
    m.insert("Tolerations".into(), go_tolerations(&e["tolerations"]));
    m.insert("Capacity".into(), go_capacity(&e["capacity"]));
    m.insert("DerivedAttributes".into(), go_list(&e["derivedAttributes"], Value::clone));
    Value::Object(m)
}

/// A v1 claim spec as the internal `ResourceClaimSpec` prints (`%v` of `field.Invalid`).
fn go_claim_spec(spec: &Value) -> Value {
    let d = &spec["devices"];
    let requests = go_list(&d["requests"], |r| {
        json!({"Name": go_str(&r["name"]),
            "Exactly": if r["exactly"].is_null() { Value::Null } else { go_exact(&r["exactly"], false) },
            "FirstAvailable": go_list(&r["firstAvailable"], |s| go_exact(s, true))})
    });
    let constraints = go_list(&d["constraints"], |c| {
        json!({"Requests": go_list(&c["requests"], Value::clone), "MatchAttribute": go_ptr(&c["matchAttribute"]),
            "DistinctAttribute": go_ptr(&c["distinctAttribute"])})
    });
    let config = go_list(&d["config"], |c| {
        let opaque = if c["opaque"].is_null() {
            Value::Null
        } else {
            json!({"Driver": go_str(&c["opaque"]["driver"]), "Parameters": go_ptr(&c["opaque"]["parameters"])})
        };
        json!({"Requests": go_list(&c["requests"], Value::clone), "Opaque": opaque})
    });
    json!({"Devices": {"Requests": requests, "Constraints": constraints, "Config": config}})
}

/// A template's spec as the internal `ResourceClaimTemplateSpec` prints:
/// its (embedded, omitempty) metadata's set fields, then `Spec`.
pub(super) fn go_template_spec(spec: &Value) -> String {
    let mut m = serde_json::Map::new();
    for (k, v) in spec["metadata"].as_object().into_iter().flatten() {
        if !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()) && v != "" {
            m.insert(k.clone(), v.clone());
        }
    }
    m.insert("Spec".into(), go_claim_spec(&spec["spec"]));
    Value::Object(m).to_string()
}

// ---- Pods ----

/// Whether `name` is an extended resource (`IsExtendedResourceName`: a
/// qualified name outside the `kubernetes.io/` namespace, not `requests.`-prefixed).
fn extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// A quantity's value in nano-units, when it parses.
fn nanos(q: &str) -> Option<i128> {
    crate::controlplane::objects::quantity::Quantity::read(q).ok().map(|v| v.nanos())
}

/// The image pull policy kube-apiserver defaults for `image` (`:latest` or no tag: Always).
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// The QoS class of a pod spec (`qos.GetPodQOS`: cpu and memory only).
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = items(&spec["containers"]).iter().chain(items(&spec["initContainers"])).collect();
    let compute = |m: &Value| -> Vec<(String, String)> {
        m.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| matches!(k.as_str(), "cpu" | "memory"))
            .map(|(k, v)| (k.clone(), text(v).to_string()))
            .collect()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let req = compute(&c["resources"]["requests"]);
        let lim = compute(&c["resources"]["limits"]);
        any |= !req.is_empty() || !lim.is_empty();
        let both = ["cpu", "memory"].iter().all(|r| lim.iter().any(|(k, _)| k == r));
        let equal = req.iter().all(|(k, v)| lim.iter().any(|(lk, lv)| lk == k && nanos(lv) == nanos(v)));
        guaranteed &= both && equal;
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The 5 characters kube-apiserver's name generator appends (as meta.rs draws them).
fn volume_suffix(seed: u64) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..5)
        .map(|_| {
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 29;
            ALPHANUMS[(h % ALPHANUMS.len() as u64) as usize] as char
        })
        .collect()
}

/// Where the ServiceAccount admission plugin mounts the token volume.
const SA_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A pod being created, defaulted as kube-apiserver stores it: v1 defaults
/// (`SetDefaults_Pod`, `_PodSpec`, `_Container`), then the admission
/// plugins (ServiceAccount: `default` and, unless automount is off, its
/// projected token volume; DefaultTolerationSeconds; Priority), and the
/// status a new pod has (Pending, its QoS class). `seed` draws the volume's name.
pub(super) fn default_pod_create(pod: &mut Value, seed: u64) {
    default_pod(pod);
    let spec = &mut pod["spec"];
    if text(&spec["serviceAccountName"]).is_empty() {
        spec["serviceAccountName"] = json!("default");
    }
    spec["serviceAccount"] = spec["serviceAccountName"].clone();
    if spec["automountServiceAccountToken"] != json!(false) {
        let name = format!("kube-api-access-{}", volume_suffix(seed));
        let volume = json!({"name": name, "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
            "defaultMode": 420}});
        match spec["volumes"].as_array_mut() {
            Some(v) => v.push(volume),
            None => spec["volumes"] = json!([volume]),
        }
        for c in containers_mut(spec) {
            if items(&c["volumeMounts"]).iter().any(|m| text(&m["mountPath"]) == SA_MOUNT) {
                continue;
            }
            let mount = json!({"name": name, "readOnly": true, "mountPath": SA_MOUNT});
            match c["volumeMounts"].as_array_mut() {
                Some(v) => v.push(mount),
                None => c["volumeMounts"] = json!([mount]),
            }
        }
    }
    let tolerations: Vec<Value> = items(&spec["tolerations"]).to_vec();
    let mut tolerations = tolerations;
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let tolerated = tolerations.iter().any(|t| {
            (text(&t["key"]) == key || (text(&t["key"]).is_empty() && text(&t["operator"]) == "Exists"))
                && (text(&t["effect"]).is_empty() || text(&t["effect"]) == "NoExecute")
        });
        if !tolerated {
            tolerations
                .push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    spec["tolerations"] = json!(tolerations);
    let qos = qos_class(&pod["spec"]);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
}

/// The PriorityClasses every cluster has (scheduling.SystemPriorityClasses:
/// made by kube-apiserver's bootstrap controller; dpctl serves no others):
/// name and value; their preemptionPolicy is PreemptLowerPriority.
const SYSTEM_PRIORITY_CLASSES: &[(&str, i64)] =
    &[("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];

/// Why the Priority admission plugin refuses a pod or a pod group, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PriorityRefusal {
    /// A class (this name) that does not exist.
    NoClass(String),
    /// A pod group's priority that is not its class's.
    GroupPriority {
        /// The priority given.
        given: i64,
        /// The class's.
        computed: i64,
    },
    /// A pod's priority given, other than its class's.
    PodPriority {
        /// The priority given.
        given: i64,
        /// The class's.
        computed: i64,
    },
    /// A pod's preemption policy (this one) given, other than PreemptLowerPriority.
    Preemption(String),
    /// A pod group's preemption policy (this one) given, other than
    /// PreemptLowerPriority (with PodGroupPreemptionPolicy on).
    GroupPreemption(String),
}

impl std::fmt::Display for PriorityRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PriorityRefusal::NoClass(c) => write!(f, "no PriorityClass with name {c} was found"),
            PriorityRefusal::GroupPriority { given, computed } => write!(
                f,
                "priority set in the pod group ({given}) must match the priority computed ({computed}) based on the priority class set in the spec"
            ),
            PriorityRefusal::PodPriority { given, computed } => write!(
                f,
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
            ),
            PriorityRefusal::Preemption(p) => write!(
                f,
                "the string value of PreemptionPolicy ({p}) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
            ),
            PriorityRefusal::GroupPreemption(p) => write!(
                f,
                "the string value of PreemptionPolicy ({p}) must not be provided in pod group spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
            ),
        }
    }
}

impl std::error::Error for PriorityRefusal {}

/// The Priority admission plugin on a create (admitPod, admitPodGroup;
/// GenericWorkload is on wherever PodGroups are served): the priority the
/// class gives (no class: 0 and no name, there being no global default),
/// written into `spec`; a priority or preemption policy given that differs
/// from it, or a class that does not exist, is refused with the plugin's text.
/// A pod group's preemption policy only with PodGroupPreemptionPolicy on
/// (`group_preemption`).
pub(super) fn admit_priority(kind: &str, spec: &mut Value, group_preemption: bool) -> Result<(), PriorityRefusal> {
    let class = text(&spec["priorityClassName"]).to_string();
    let computed = match class.as_str() {
        "" => 0,
        c => match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _)| *n == c) {
            Some((_, v)) => *v,
            None => return Err(PriorityRefusal::NoClass(c.to_string())),
        },
    };
    let given = spec["priority"].as_i64();
    if kind == "PodGroup" {
        if let Some(given) = given.filter(|p| *p != computed) {
            return Err(PriorityRefusal::GroupPriority { given, computed });
        }
        if group_preemption {
            // Every class here (none, or a system class) has PreemptLowerPriority.
            let policy = "PreemptLowerPriority";
            if let Some(p) = spec["preemptionPolicy"].as_str().filter(|p| *p != policy) {
                return Err(PriorityRefusal::GroupPreemption(p.to_string()));
            }
            spec["preemptionPolicy"] = json!(policy);
        }
    } else {
        if let Some(given) = given.filter(|p| *p != computed) {
            return Err(PriorityRefusal::PodPriority { given, computed });
        }
        let policy = "PreemptLowerPriority";
        if let Some(p) = spec["preemptionPolicy"].as_str().filter(|p| *p != policy) {
            return Err(PriorityRefusal::Preemption(p.to_string()));
        }
        spec["preemptionPolicy"] = json!(policy);
    }
    spec["priority"] = json!(computed);
    Ok(())
}

/// An admission plugin's refusal as errors.NewForbidden words it.
pub(super) fn forbidden_message(qualified: &str, name: &str, why: &str) -> String {
    if name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {name:?} is forbidden: {why}")
    }
}

/// The containers of a pod spec (init containers first), mutable; none created.
fn containers_mut(spec: &mut Value) -> impl Iterator<Item = &mut Value> {
    let Some(m) = spec.as_object_mut() else { return Vec::new().into_iter() };
    let mut out = Vec::new();
    for (k, v) in m.iter_mut() {
        if k == "initContainers" || k == "containers" {
            out.extend(v.as_array_mut().into_iter().flatten());
        }
    }
    out.into_iter()
}

/// The v1 defaults of a pod spec (`SetDefaults_PodSpec`, `_Container`);
/// a pod's own (`SetDefaults_Pod`: service links on, requests from the
/// limits they lack) too unless it is a workload's template.
fn default_pod_spec(spec: &mut Value, template: bool) {
    let mut defaults = vec![
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
    ];
    if !template {
        defaults.push(("enableServiceLinks", json!(true)));
    }
    for (f, v) in defaults {
        if spec[f].is_null() {
            spec[f] = v;
        }
    }
    // SetDefaults_HostPathVolumeSource: the type HostPathUnset ("").
    for v in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(h) = v.get_mut("hostPath").filter(|h| h.is_object()) {
            if h["type"].is_null() {
                h["type"] = json!("");
            }
        }
    }
    for c in containers_mut(spec) {
        // SetDefaults_ObjectFieldSelector: apiVersion v1.
        for e in c.get_mut("env").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(f) = e.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef")).filter(|f| f.is_object()) {
                if f["apiVersion"].is_null() {
                    f["apiVersion"] = json!("v1");
                }
            }
        }
        if c["resources"].is_null() {
            c["resources"] = json!({});
        }
        if !template {
            if let Some(limits) = c["resources"]["limits"].as_object().cloned() {
                for (k, v) in limits {
                    if c["resources"]["requests"][&k].is_null() {
                        c["resources"]["requests"][&k] = v;
                    }
                }
            }
        }
        for (f, v) in [("terminationMessagePath", "/dev/termination-log"), ("terminationMessagePolicy", "File")] {
            if c[f].is_null() {
                c[f] = json!(v);
            }
        }
        if c["imagePullPolicy"].is_null() {
            let p = pull_policy(text(&c["image"]));
            c["imagePullPolicy"] = json!(p);
        }
    }
}

/// The v1 defaults of a pod (create and update).
pub(super) fn default_pod(pod: &mut Value) {
    default_pod_spec(&mut pod["spec"], false);
    // Conditions carry their (unset) times as the Go struct writes them.
    let conditions = pod.get_mut("status").and_then(|s| s.get_mut("conditions")).and_then(Value::as_array_mut);
    for c in conditions.into_iter().flatten() {
        for f in ["lastProbeTime", "lastTransitionTime"] {
            if c.get(f).is_none() {
                c[f] = Value::Null;
            }
        }
    }
}

/// The v1 defaults of a workload's pod template (`SetDefaults_PodSpec` and its containers').
pub(super) fn default_template(template: &mut Value) {
    default_pod_spec(&mut template["spec"], true);
}

/// A `PodResourceClaim` as the internal Go struct prints it.
fn pod_claim_json(c: &Value) -> String {
    let ptr = |f: &str| if c[f].is_string() { c[f].clone() } else { Value::Null };
    json!({"Name": text(&c["name"]), "ResourceClaimName": ptr("resourceClaimName"),
        "ResourceClaimTemplateName": ptr("resourceClaimTemplateName")})
    .to_string()
}

/// `ValidatePodCreate` for what a device-plugin or DRA pod uses: its
/// containers (names, images, resources: extended resources integral, with
/// a limit and requests equal to it; claims naming the pod's claims) and
/// `spec.resourceClaims`. The pod is defaulted first (requests from limits).
/// The most claims a PodGroup may name (`+k8s:maxItems=4`).
const MAX_POD_GROUP_CLAIMS: usize = 4;

/// scheduling.HighestUserDefinablePriority.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// A PodGroup (scheduling.k8s.io/v1beta1) as 1.37 validates it: the
/// declarative rules of `zz_generated.validations.go` (`Validate_PodGroupSpec`
/// and the types under it) and `ValidatePodGroup`'s hand-written one (moot
/// here: `parentCompositePodGroupName` is dropped, CompositePodGroup being
/// off). Checked against kube-apiserver by tests/e2e/scheduler_diff.rs.
/// `priority` and `priorityClassName` come from the Priority admission
/// plugin ([`admit_priority`], before this): the priority at most the
/// highest user-definable one, the class a long name.
pub(super) fn pod_group(obj: &Value, version: &str) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut out = Vec::new();
    let policy = &spec["schedulingPolicy"];
    out.extend(super::validate::union("spec.schedulingPolicy", policy, &["basic", "gang"]));
    match (&spec["disruptionMode"], version) {
        (Value::Null, _) => out.push(required("spec.disruptionMode", "")),
        // 1.36's v1alpha2: always `Pod` here (WorkloadAwarePreemption, off,
        // drops what was given; drop_unknown_pod_group_fields).
        (_, "v1alpha2") => {}
        (mode, _) => out.extend(super::validate::union("spec.disruptionMode", mode, &["single", "all"])),
    }
    if let Some(p) = spec["priority"].as_i64().filter(|p| *p > HIGHEST_USER_PRIORITY) {
        out.push(invalid_raw(
            "spec.priority",
            &p.to_string(),
            &format!("must be less than or equal to {HIGHEST_USER_PRIORITY}"),
        ));
    }
    if let Some(c) = spec["priorityClassName"].as_str().filter(|c| !c.is_empty()) {
        out.extend(subdomain_causes("spec.priorityClassName", c));
    }
    if let Some(gang) = policy.get("gang").filter(|g| g.is_object()) {
        let at = "spec.schedulingPolicy.gang.minCount";
        match gang["minCount"].as_i64().unwrap_or(0) {
            0 => out.push(required(at, "")),
            n if n < 1 => out.push(invalid_raw(at, &n.to_string(), "must be greater than or equal to 1")),
            _ => {}
        }
    }
    let claims = items(&spec["resourceClaims"]);
    if claims.len() > MAX_POD_GROUP_CLAIMS {
        out.push(too_many("spec.resourceClaims", claims.len(), MAX_POD_GROUP_CLAIMS));
    } else {
        let mut names: Vec<&str> = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            let p = format!("spec.resourceClaims[{i}]");
            let name = text(&c["name"]);
            if names.contains(&name) {
                // listType=map keyed by name: the later entry, written as JSON.
                let mut item = serde_json::Map::new();
                for f in ["name", "resourceClaimName", "resourceClaimTemplateName"] {
                    if let Some(v) = c.get(f).filter(|v| !v.is_null()) {
                        item.insert(f.into(), v.clone());
                    }
                }
                out.push(Cause {
                    reason: "FieldValueDuplicate",
                    field: p.clone(),
                    message: format!("Duplicate value: {}", Value::Object(item)),
                });
                continue;
            }
            names.push(name);
            out.extend(super::validate::union(&p, c, &["resourceClaimName", "resourceClaimTemplateName"]));
            if name.is_empty() {
                out.push(required(&format!("{p}.name"), ""));
            } else {
                out.extend(label_causes(&format!("{p}.name"), name));
            }
            for f in ["resourceClaimName", "resourceClaimTemplateName"] {
                if let Some(n) = c[f].as_str() {
                    out.extend(subdomain_causes(&format!("{p}.{f}"), n));
                }
            }
        }
    }
    out
}

/// The PodGroup strategy's dropDisabledPodGroupFields: `spec.resourceClaims`
/// goes with DRAWorkloadResourceClaims off (`workload_claims`),
/// `spec.preemptionPolicy` with PodGroupPreemptionPolicy off (`preemption`;
/// dropDisabledPreemptionPolicyField), and `parentCompositePodGroupName`
/// (CompositePodGroup, alpha, off: not modelled) always, each unless the
/// PodGroup replaced (`old`) has it.
pub(super) fn drop_disabled_pod_group_fields(
    obj: &mut Value,
    old: Option<&Value>,
    workload_claims: bool,
    preemption: bool,
) {
    let in_use = |f: &str| old.is_some_and(|o| !o["spec"][f].is_null());
    let claims_in_use = old.is_some_and(pod_group_claims_in_use);
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        if !in_use("parentCompositePodGroupName") {
            spec.remove("parentCompositePodGroupName");
        }
        if !(preemption || in_use("preemptionPolicy")) {
            spec.remove("preemptionPolicy");
        }
        if !(workload_claims || claims_in_use) {
            spec.remove("resourceClaims");
        }
    }
}

/// The spec fields a PodGroup of `version` does not have, dropped as a Go
/// struct drops unknown fields: 1.36's v1alpha2 has no
/// `parentCompositePodGroupName`, `workloadRef` or `preemptionPolicy`;
/// 1.37's v1beta1 no `podGroupTemplateRef`. And 1.36's gates, at their
/// defaults (v1.36.3 podgroup/strategy.go dropDisabledPodGroupSpecFields):
/// WorkloadAwarePreemption (alpha, off) drops `disruptionMode`,
/// `priorityClassName` and `priority`, TopologyAwareWorkloadScheduling
/// (alpha, off) `schedulingConstraints`, each unless the PodGroup replaced
/// (`old`) has it; a v1alpha2 PodGroup then reads back with
/// `disruptionMode: Pod` (defaulted when decoded) and
/// `podGroupTemplateRef: null` (no omitempty).
pub(super) fn drop_unknown_pod_group_fields(obj: &mut Value, version: &str, old: Option<&Value>) {
    let unknown: &[&str] = match version {
        "v1alpha2" => &["parentCompositePodGroupName", "workloadRef", "preemptionPolicy"],
        _ => &["podGroupTemplateRef"],
    };
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for f in unknown {
        spec.remove(*f);
    }
    if version != "v1alpha2" {
        return;
    }
    for f in ["disruptionMode", "priorityClassName", "priority", "schedulingConstraints"] {
        let in_use = old.is_some_and(|o| !o["spec"][f].is_null() && o["spec"][f] != "");
        if !in_use {
            spec.remove(f);
        }
    }
    spec.entry("disruptionMode").or_insert_with(|| json!("Pod"));
    spec.entry("podGroupTemplateRef").or_insert(Value::Null);
}

/// draWorkloadResourceClaimsInUse: the PodGroup's spec names claims.
fn pod_group_claims_in_use(pg: &Value) -> bool {
    pg["spec"]["resourceClaims"].as_array().is_some_and(|c| !c.is_empty())
}

/// The PodGroup status strategy's dropDisabledPodGroupStatusFields: with
/// DRAWorkloadResourceClaims off (`workload_claims`), a status write loses
/// `status.resourceClaimStatuses` unless the PodGroup replaced (`old`) names claims.
pub(super) fn drop_disabled_pod_group_status_fields(obj: &mut Value, old: &Value, workload_claims: bool) {
    if workload_claims || pod_group_claims_in_use(old) {
        return;
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("resourceClaimStatuses");
    }
}

/// The DRA fields of a pod's status a status write keeps when it leaves
/// them out (pod/strategy.go podStatusStrategy.PrepareForUpdate: an old or
/// misbehaving client strips fields it does not know; an empty list still
/// clears a list, and an empty list is not written: omitempty).
pub(super) fn keep_dra_pod_status(next: &mut Value, cur: &Value) {
    for f in ["resourceClaimStatuses", "extendedResourceClaimStatus", "nodeAllocatableResourceClaimStatuses"] {
        let old = &cur["status"][f];
        if next["status"][f].is_null() && !old.is_null() {
            next["status"][f] = old.clone();
        }
    }
    if let Some(st) = next["status"].as_object_mut() {
        for f in ["resourceClaimStatuses", "nodeAllocatableResourceClaimStatuses"] {
            if st.get(f).is_some_and(|v| v.is_null() || v.as_array().is_some_and(Vec::is_empty)) {
                st.remove(f);
            }
        }
    }
}

/// pod/util.go dropPodNodeAllocatableResourceStatus (every write of a pod):
/// with DRANodeAllocatableResources off, `status.nodeAllocatableResourceClaimStatuses`
/// goes unless the pod replaced (`old`) has some.
pub(super) fn drop_disabled_pod_status_fields(obj: &mut Value, old: Option<&Value>, node_allocatable: bool) {
    let in_use = old
        .is_some_and(|o| o["status"]["nodeAllocatableResourceClaimStatuses"].as_array().is_some_and(|a| !a.is_empty()));
    if node_allocatable || in_use {
        return;
    }
    if let Some(st) = obj.get_mut("status").and_then(Value::as_object_mut) {
        st.remove("nodeAllocatableResourceClaimStatuses");
    }
}

/// helper.IsNodeAllocatableResourceName: cpu, memory, hugepages-*.
fn node_allocatable_name(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// validation.go validateNodeAllocatableResourceClaimStatus (a pod status
/// write): each entry's claim is one the pod names (`spec.resourceClaims`
/// or `status.resourceClaimStatuses`), its mapped and overhead resources are
/// node-allocatable names with non-negative quantities, an overhead has
/// `perPod` or `perContainer`.
pub(super) fn pod_node_allocatable_status(pod: &Value, minor: u32) -> Vec<Cause> {
    if minor <= 36 {
        return pod_node_allocatable_status_36(pod);
    }
    let mut out = Vec::new();
    let base = "status.nodeAllocatableResourceClaimStatuses";
    let q = |v: &Value| {
        v.as_str().and_then(|s| crate::controlplane::objects::quantity::Quantity::read(s).ok()).map(|q| {
            let c = q.computed_like(q.nanos());
            (c.nanos() < 0, c.text().to_string())
        })
    };
    for (i, st) in items(&pod["status"]["nodeAllocatableResourceClaimStatuses"]).iter().enumerate() {
        let at = format!("{base}[{i}]");
        let claim = text(&st["resourceClaimName"]);
        if claim.is_empty() {
            continue;
        }
        let named = items(&pod["spec"]["resourceClaims"]).iter().any(|c| c["resourceClaimName"] == claim)
            || items(&pod["status"]["resourceClaimStatuses"]).iter().any(|c| c["resourceClaimName"] == claim);
        if !named {
            out.push(invalid(&format!("{at}.resourceClaimName"), claim, "no mapping found in pod reference"));
        }
        for (j, m) in items(&st["mapping"]).iter().enumerate() {
            let p = format!("{at}.mapping[{j}]");
            if !node_allocatable_name(text(&m["name"])) {
                out.push(invalid(&format!("{p}.name"), text(&m["name"]), "must be a node allocatable resource name"));
            }
            if let Some((true, v)) = q(&m["quantity"]) {
                out.push(invalid(&format!("{p}.quantity"), &v, "must be non-negative"));
            }
        }
        for (j, o) in items(&st["overhead"]).iter().enumerate() {
            let p = format!("{at}.overhead[{j}]");
            if !node_allocatable_name(text(&o["name"])) {
                out.push(invalid(&format!("{p}.name"), text(&o["name"]), "must be a node allocatable resource name"));
            }
            if o["perPod"].is_null() && o["perContainer"].is_null() {
                out.push(invalid(&p, "", "at least one of perPod or perContainer must be set"));
                continue;
            }
            for f in ["perPod", "perContainer"] {
                if let Some((true, v)) = q(&o[f]) {
                    out.push(invalid(&format!("{p}.{f}"), &v, "must be non-negative"));
                }
            }
        }
    }
    out
}

/// v1.36.3 validation.go validateNodeAllocatableResourceClaimStatus (1.36's
/// shape, a `resources` map): each entry names a claim the pod names, has
/// containers and resources, each resource a native name
/// (v1helper.IsNativeResource: no `/`, or a `kubernetes.io/` one) with a
/// non-negative quantity. The resources in name order (upstream walks a Go
/// map: in any order).
fn pod_node_allocatable_status_36(pod: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let base = "status.nodeAllocatableResourceClaimStatuses";
    for (i, st) in items(&pod["status"]["nodeAllocatableResourceClaimStatuses"]).iter().enumerate() {
        let at = format!("{base}[{i}]");
        let claim = text(&st["resourceClaimName"]);
        if claim.is_empty() {
            out.push(required(&format!("{at}.resourceClaimName"), "must not be empty"));
        }
        let named = items(&pod["spec"]["resourceClaims"]).iter().any(|c| c["resourceClaimName"] == claim)
            || items(&pod["status"]["resourceClaimStatuses"]).iter().any(|c| c["resourceClaimName"] == claim);
        if !named {
            out.push(invalid(&format!("{at}.resourceClaimName"), claim, "no mapping found in pod reference"));
        }
        if items(&st["containers"]).is_empty() {
            out.push(required(&format!("{at}.containers"), "must not be empty"));
        }
        let resources = st["resources"].as_object().filter(|r| !r.is_empty());
        let Some(resources) = resources else {
            out.push(required(&format!("{at}.resources"), "must not be empty"));
            continue;
        };
        for (name, q) in resources {
            let key = format!("{at}.resources[{name}]");
            if name.contains('/') && !name.contains("kubernetes.io/") {
                out.push(invalid(&key, name, "must be a node allocatable resource name"));
            }
            let q = q.as_str().and_then(|s| crate::controlplane::objects::quantity::Quantity::read(s).ok());
            if let Some(q) = q.filter(|q| q.nanos() < 0) {
                out.push(invalid(&key, q.computed_like(q.nanos()).text(), "must be non-negative"));
            }
        }
    }
    out
}

pub(super) fn pod(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut out = Vec::new();
    let mut claim_names: Vec<String> = Vec::new();
    for (i, c) in items(&spec["resourceClaims"]).iter().enumerate() {
        let p = format!("spec.resourceClaims[{i}]");
        let name = text(&c["name"]);
        if name.is_empty() {
            out.push(required(&format!("{p}.name"), ""));
        } else if claim_names.iter().any(|n| n == name) {
            out.push(duplicate(&format!("{p}.name"), name));
        } else {
            out.extend(label_causes(&format!("{p}.name"), name));
            claim_names.push(name.to_string());
        }
        match (c["resourceClaimName"].is_string(), c["resourceClaimTemplateName"].is_string()) {
            (true, true) => out.push(invalid_raw(
                &p,
                &pod_claim_json(c),
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            )),
            (false, false) => out.push(invalid_raw(
                &p,
                &pod_claim_json(c),
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )),
            _ => {}
        }
        for f in ["resourceClaimName", "resourceClaimTemplateName"] {
            if let Some(n) = c[f].as_str() {
                out.extend(subdomain_causes(&format!("{p}.{f}"), n));
            }
        }
    }
    claim_names.sort();
    let containers = items(&spec["containers"]);
    if containers.is_empty() {
        out.push(required("spec.containers", ""));
    }
    let mut seen = std::collections::HashSet::new();
    for (list, all) in [("initContainers", items(&spec["initContainers"])), ("containers", containers)] {
        for (i, c) in all.iter().enumerate() {
            let p = format!("spec.{list}[{i}]");
            let name = text(&c["name"]);
            if name.is_empty() {
                out.push(required(&format!("{p}.name"), ""));
            } else if !seen.insert(name) {
                out.push(duplicate(&format!("{p}.name"), name));
            } else {
                out.extend(label_causes(&format!("{p}.name"), name));
            }
            if text(&c["image"]).trim().is_empty() {
                out.push(required(&format!("{p}.image"), ""));
            }
            out.extend(container_resources(&format!("{p}.resources"), &c["resources"], &claim_names));
        }
    }
    out
}

fn container_resources(at: &str, r: &Value, claim_names: &[String]) -> Vec<Cause> {
    let mut out = Vec::new();
    let limits = r["limits"].as_object();
    let requests = r["requests"].as_object();
    for (field, m) in [("limits", limits), ("requests", requests)] {
        for (k, v) in m.into_iter().flatten() {
            if extended(k) && nanos(text(v)).is_some_and(|q| q % 1_000_000_000 != 0) {
                out.push(invalid(&format!("{at}.{field}[{k}]"), text(v), "must be an integer"));
            }
        }
    }
    for (k, v) in requests.into_iter().flatten() {
        if !extended(k) && !k.starts_with("hugepages-") {
            continue;
        }
        match limits.and_then(|l| l.get(k)) {
            None => out.push(required(&format!("{at}.limits"), "Limit must be set for non overcommitable resources")),
            Some(l) if nanos(text(l)) != nanos(text(v)) => out.push(invalid(
                &format!("{at}.requests"),
                text(v),
                &format!("must be equal to {k} limit of {}", text(l)),
            )),
            _ => {}
        }
    }
    let mut names = std::collections::HashSet::new();
    for (j, c) in items(&r["claims"]).iter().enumerate() {
        let p = format!("{at}.claims[{j}]");
        let name = text(&c["name"]);
        if name.is_empty() {
            out.push(required(&format!("{p}.name"), ""));
            continue;
        }
        let key = format!("{name}/{}", text(&c["request"]));
        if !names.insert(key) {
            out.push(duplicate(&p, name));
        }
        if !claim_names.iter().any(|n| n == name) {
            let detail = if claim_names.is_empty() {
                "must be one of the names in pod.spec.resourceClaims which is empty".to_string()
            } else {
                format!("must be one of the names in pod.spec.resourceClaims: {}", claim_names.join(", "))
            };
            out.push(Cause {
                reason: "FieldValueNotFound",
                field: p,
                message: format!("Not found: {}: {detail}", go_quote(name)),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_are_omitted_but_requests_and_conditions() {
        let mut v = json!({"metadata": {"finalizers": []}, "spec": {"devices": {"requests": [], "constraints": [],
            "config": [{"requests": [], "opaque": {"parameters": {"l": []}}}]}},
            "status": {"devices": [{"conditions": [], "data": {"x": []}}]}});
        omit_empty_lists(&mut v);
        assert_eq!(
            v,
            json!({"metadata": {}, "spec": {"devices": {"requests": [], "config": [{"opaque": {"parameters": {"l": []}}}]}},
                "status": {"devices": [{"conditions": [], "data": {"x": []}}]}})
        );
    }

    /// validation.go validateDeviceDerivedAttribute: a derived attribute's
    /// name must be used by a constraint on its request (or all, or its
    /// parent request), its expression set.
    #[test]
    fn derived_attributes_must_be_used_by_a_constraint_and_have_an_expression() {
        let spec = |derived: Value, constraints: Value| {
            json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount",
                "count": 1, "derivedAttributes": derived}},
                {"name": "p", "firstAvailable": [{"name": "s", "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1,
                    "derivedAttributes": [{"name": "d.example.com/n", "expression": "1"}]}]}],
                "constraints": constraints}})
        };
        let fields = |c: Vec<Cause>| c.iter().map(|c| format!("{} {}", c.field, c.reason)).collect::<Vec<_>>();
        let used = json!([{"matchAttribute": "d.example.com/n"}]);
        assert!(claim_spec(
            "spec",
            &spec(json!([{"name": "d.example.com/n", "expression": "device.driver"}]), used.clone())
        )
        .is_empty());
        assert_eq!(
            fields(claim_spec("spec", &spec(json!([{"name": "d.example.com/x"}]), used.clone()))),
            [
                "spec.devices.requests[0].exactly.derivedAttributes[0].name FieldValueInvalid",
                "spec.devices.requests[0].exactly.derivedAttributes[0].expression FieldValueRequired"
            ]
        );
        // A constraint on the parent request covers the subrequest's; one on another request does not.
        let on_p = json!([{"matchAttribute": "d.example.com/n", "requests": ["p", "r"]}]);
        assert!(claim_spec("spec", &spec(json!([{"name": "d.example.com/n", "expression": "1"}]), on_p)).is_empty());
        let on_r = json!([{"matchAttribute": "d.example.com/n", "requests": ["r"]}]);
        assert_eq!(
            fields(claim_spec("spec", &spec(json!([{"name": "d.example.com/n", "expression": "1"}]), on_r))),
            ["spec.devices.requests[1].firstAvailable[0].derivedAttributes[0].name FieldValueInvalid"]
        );
    }

    fn fields(c: &[Cause]) -> Vec<String> {
        c.iter().map(|c| format!("{} {}", c.field, c.reason)).collect()
    }

    /// The Priority admission plugin (admitPod, admitPodGroup v1.37.2);
    /// compared with kube-apiserver by the corpus and scheduler_diff.
    #[test]
    fn priority_comes_from_the_class_and_may_not_be_given_otherwise() {
        let mut pod = json!({"priorityClassName": "system-node-critical"});
        admit_priority("Pod", &mut pod, false).unwrap();
        assert_eq!(
            (pod["priority"].as_i64(), pod["preemptionPolicy"].as_str()),
            (Some(2_000_001_000), Some("PreemptLowerPriority"))
        );
        let mut none = json!({});
        admit_priority("PodGroup", &mut none, false).unwrap();
        assert_eq!(none, json!({"priority": 0}), "a PodGroup gets no preemption policy (its gate is off)");
        assert_eq!(
            admit_priority("Pod", &mut json!({"priorityClassName": "x"}), false).unwrap_err().to_string(),
            "no PriorityClass with name x was found"
        );
        assert!(admit_priority("Pod", &mut json!({"priority": 5}), false)
            .unwrap_err()
            .to_string()
            .starts_with("the integer value of priority (5)"));
        assert!(admit_priority("PodGroup", &mut json!({"priority": 5}), false)
            .unwrap_err()
            .to_string()
            .starts_with("priority set in the pod group (5)"));
        assert!(admit_priority("Pod", &mut json!({"preemptionPolicy": "Never"}), false)
            .unwrap_err()
            .to_string()
            .contains("(Never)"));
        // PodGroupPreemptionPolicy on (admitPodGroup): computed from the class,
        // another value given refused.
        let mut group = json!({"priorityClassName": "system-cluster-critical"});
        admit_priority("PodGroup", &mut group, true).unwrap();
        assert_eq!(group["preemptionPolicy"], "PreemptLowerPriority", "{group}");
        assert_eq!(
            admit_priority("PodGroup", &mut json!({"preemptionPolicy": "Never"}), true).unwrap_err().to_string(),
            "the string value of PreemptionPolicy (Never) must not be provided in pod group spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
        );
        admit_priority("PodGroup", &mut json!({"preemptionPolicy": "PreemptLowerPriority"}), true).unwrap();
        assert_eq!(forbidden_message("pods", "", "no"), "pods is forbidden: no");
        assert_eq!(forbidden_message("pods", "p", "no"), "pods \"p\" is forbidden: no");
    }

    #[test]
    fn claim_specs_are_judged_as_validate_device_claim_does() {
        let ok = json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": ["r"], "opaque": {"driver": "d.example.com", "parameters": {"a": 1}}}]}});
        assert!(claim_spec("spec", &ok).is_empty(), "{:?}", claim_spec("spec", &ok));
        let bad = json!({"devices": {"requests": [
            {"name": "R_1", "exactly": {"allocationMode": "ExactCount", "count": 1}},
            {"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2, "selectors": [{}]}},
            {"name": "r"},
            {"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "c", "allocationMode": "Some"}]}],
            "config": [{"requests": ["nope", "f/s"], "opaque": {"driver": "d.example.com"}}]}});
        let got = fields(&claim_spec("spec", &bad));
        for want in [
            "spec.devices.requests[0].name FieldValueInvalid",
            "spec.devices.requests[0].exactly.deviceClassName FieldValueRequired",
            "spec.devices.requests[1].exactly.count FieldValueInvalid",
            "spec.devices.requests[1].exactly.selectors[0].cel FieldValueRequired",
            "spec.devices.requests[2] FieldValueRequired",
            "spec.devices.requests[2] FieldValueDuplicate",
            "spec.devices.requests[3].firstAvailable[0].allocationMode FieldValueNotSupported",
            "spec.devices.config[0].requests[0] FieldValueInvalid",
            "spec.devices.config[0].opaque.parameters FieldValueRequired",
        ] {
            assert!(got.iter().any(|g| g == want), "{want} not in {got:?}");
        }
        assert!(!got.iter().any(|g| g.starts_with("spec.devices.config[0].requests[1]")), "f/s is a request: {got:?}");
    }

    #[test]
    fn a_claims_status_takes_an_allocation_once_and_reservations_only_with_it() {
        let spec = json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}});
        let old = json!({"spec": spec, "status": {}});
        let result = json!({"request": "r", "driver": "d.example.com", "pool": "p", "device": "dev-0"});
        let new = json!({"spec": spec, "status": {"allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}], "devices": [{"driver": "d.example.com", "pool": "p", "device": "dev-0"}]}});
        assert!(claim_status_update(&new, &old).is_empty(), "{:?}", claim_status_update(&new, &old));
        let changed = json!({"spec": spec, "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "d.example.com", "pool": "p", "device": "dev-1"}]}}}});
        let got = claim_status_update(&changed, &new);
        assert_eq!(got[0].message, "Invalid value: null: field cannot be modified once set");
        let unallocated = json!({"spec": spec, "status": {"reservedFor": [{"resource": "pods", "name": "p"}],
            "devices": [{"driver": "d.example.com", "pool": "p", "device": "dev-9"}]}});
        let got = fields(&claim_status_update(&unallocated, &old));
        assert_eq!(
            got,
            [
                "status.reservedFor[0].uid FieldValueRequired",
                "status.devices[0] FieldValueInvalid",
                "status.reservedFor FieldValueForbidden"
            ]
        );
        let bad_ref = json!({"spec": spec, "status": {"allocation": {"devices": {"results": [{"request": "x", "driver": "d.example.com", "pool": "p", "device": "dev-0"}]}}}});
        assert_eq!(
            fields(&claim_status_update(&bad_ref, &old)),
            ["status.allocation.devices.results[0].request FieldValueInvalid"]
        );
    }

    #[test]
    fn pods_are_defaulted_and_validated_as_kube_apiserver_does() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "pause", "resources": {"limits": {"example.com/gpu": "1"}}},
            {"name": "d", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]}});
        default_pod_create(&mut p, 7);
        let s = &p["spec"];
        assert_eq!(s["containers"][0]["resources"]["requests"]["example.com/gpu"], "1");
        assert_eq!(s["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(s["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(s["serviceAccountName"], "default");
        assert_eq!(s["tolerations"].as_array().unwrap().len(), 2);
        let vol = s["volumes"][0]["name"].as_str().unwrap();
        assert!(vol.starts_with("kube-api-access-") && vol.len() == 21, "{vol}");
        assert_eq!(s["containers"][1]["volumeMounts"][0]["mountPath"], SA_MOUNT);
        assert_eq!(p["status"], json!({"phase": "Pending", "qosClass": "Burstable"}));
        assert!(pod(&p).is_empty(), "{:?}", pod(&p));
        let mut off =
            json!({"spec": {"automountServiceAccountToken": false, "containers": [{"name": "c", "image": "x"}]}});
        default_pod_create(&mut off, 1);
        assert!(off["spec"].get("volumes").is_none() && off["spec"].get("initContainers").is_none(), "{off}");
        assert_eq!(off["status"]["qosClass"], "BestEffort");
        let mut bad = json!({"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "1"}}},
            {"name": "c", "image": "x", "resources": {"limits": {"example.com/gpu": "500m"}, "claims": [{"name": "gpu"}]}},
            {"name": "e", "image": "x", "resources": {"requests": {"example.com/gpu": "1"}}}],
            "resourceClaims": [{"name": "other"}]}});
        default_pod(&mut bad);
        let got = pod(&bad);
        let f = fields(&got);
        for want in [
            "spec.resourceClaims[0] FieldValueInvalid",
            "spec.containers[0].image FieldValueRequired",
            "spec.containers[0].resources.requests FieldValueInvalid",
            "spec.containers[1].name FieldValueDuplicate",
            "spec.containers[1].resources.limits[example.com/gpu] FieldValueInvalid",
            "spec.containers[1].resources.requests[example.com/gpu] FieldValueInvalid",
            "spec.containers[1].resources.claims[0] FieldValueNotFound",
            "spec.containers[2].resources.limits FieldValueRequired",
        ] {
            assert!(f.iter().any(|g| g == want), "{want} not in {f:?}");
        }
        let claim = got.iter().find(|c| c.field == "spec.resourceClaims[0]").unwrap();
        assert_eq!(claim.message, "Invalid value: {\"Name\":\"other\",\"ResourceClaimName\":null,\"ResourceClaimTemplateName\":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`");
        let nf = got.iter().find(|c| c.reason == "FieldValueNotFound").unwrap();
        assert_eq!(nf.message, "Not found: \"gpu\": must be one of the names in pod.spec.resourceClaims: other");
    }

    #[test]
    fn an_internal_spec_prints_as_go_does() {
        let spec = json!({"metadata": {}, "spec": {"devices": {"requests": [{"name": "r2", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}]}}});
        assert_eq!(
            go_template_spec(&spec),
            r#"{"Spec":{"Devices":{"Requests":[{"Name":"r2","Exactly":{"DeviceClassName":"c","Selectors":null,"AllocationMode":"ExactCount","Count":1,"AdminAccess":null,"Tolerations":null,"Capacity":null,"DerivedAttributes":null},"FirstAvailable":null}],"Constraints":null,"Config":null}}}"#
        );
    }

    #[test]
    fn config_map_keys_and_class_selectors() {
        assert_eq!(
            fields(&config_map(&json!({"data": {"ok.key_1-x": "v", "bad key": "v"}}))),
            ["data[bad key] FieldValueInvalid"]
        );
        let c = device_class(&json!({"spec": {"selectors": [{}, {"cel": {"expression": "device.driver =="}}]}}));
        assert_eq!(
            fields(&c),
            ["spec.selectors[0].cel FieldValueRequired", "spec.selectors[1].cel.expression FieldValueInvalid"]
        );
        assert!(
            c[1].message.starts_with("Invalid value: \"device.driver ==\": compilation failed: "),
            "{}",
            c[1].message
        );
        assert!(c[1].message.ends_with("\n | device.driver ==\n | ................^"), "{}", c[1].message);
        let typo = device_class(
            &json!({"spec": {"selectors": [{"cel": {"expression": "device.drvier == 'device.x' && device.attributes['a'].b"}}]}}),
        );
        assert_eq!(
            typo[0].message,
            "Invalid value: \"device.drvier == 'device.x' && device.attributes['a'].b\": compilation failed: ERROR: <input>:1:7: undefined field 'drvier'\n | device.drvier == 'device.x' && device.attributes['a'].b\n | ......^"
        );
        for fine in [
            "device.driver == 'x' && device.capacity['d'].mem.isGreaterThan(quantity('1Gi'))",
            "device.attributes['d'].list.exists(device, device.x == 1)",
            "'device.bogus' == device.driver",
            "x.device.bogus",
        ] {
            assert!(undefined_device_fields(fine).is_empty(), "{fine}");
        }
    }
}
