//! kube-apiserver's validation of what the local API server stores, as pure
//! functions over the JSON objects: ObjectMeta (apimachinery's
//! `ValidateObjectMeta`: DNS-subdomain names, label keys and values,
//! annotation keys and their total size) and the ResourceSlice limits of
//! resource.k8s.io/v1 (`pkg/apis/resource/validation`: devices per slice,
//! devices and sharedCounters not together, counter sets, taints, counter
//! consumptions and attributes+capacities per device, unique device names;
//! of 1.37: binding conditions (KEP-5007), list-typed attributes
//! (KEP-5491), compatibility groups (KEP-5963), node-allocatable resources
//! (KEP-5517)).
//! Errors are worded as apimachinery's `field.Error` prints them and
//! answered as `errors.NewInvalid` builds its `Status` (422, reason
//! `Invalid`, `details.causes[]` with the field paths).

use crate::core::validate::{dns_subdomain, DNS_SUBDOMAIN_MAX};
use serde_json::{json, Value};

/// `resource.ResourceSliceMaxDevices`.
pub const MAX_DEVICES: usize = 128;
/// `resource.ResourceSliceMaxDevicesWithAdvancedFeatures` (formerly
/// `…WithTaintsOrConsumesCounters`): the limit when any device has taints or consumes counters.
pub const MAX_DEVICES_ADVANCED: usize = 64;
/// `resource.ResourceSliceMaxCounterSets`.
pub const MAX_COUNTER_SETS: usize = 8;
/// `resource.DeviceTaintsMaxLength`.
pub const MAX_TAINTS: usize = 16;
/// `resource.ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
pub const MAX_CONSUMES_COUNTERS: usize = 2;
/// `resource.ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// `resource.ResourceSliceMaxAttributeValuesPerDevice` (KEP-5491: a list's items count each).
pub const MAX_ATTRIBUTE_VALUES: usize = 48;
/// `resource.BindingConditionsMaxSize` and `BindingFailureConditionsMaxSize` (KEP-5007).
pub const MAX_BINDING_CONDITIONS: usize = 4;
/// `resource.DeviceCompatibilityGroupsMaxSize` (KEP-5963).
pub const MAX_COMPATIBILITY_GROUPS: usize = 2;
/// apimachinery's `TotalAnnotationSizeLimitB` (256 KiB).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 << 10;
/// `validation.LabelValueMaxLength` and the qualified name part's limit.
const MAX_LABEL: usize = 63;

/// One field error, as apimachinery's `field.Error`: its `StatusCause`
/// reason, the field path and the error body (`Type: value: detail`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueTooMany`, …
    pub reason: &'static str,
    /// `metadata.name`, `spec.devices[3].taints`, …
    pub field: String,
    /// What `ErrorBody()` prints.
    pub message: String,
}

/// A Go `%q` of a string (`strconv.Quote`): escapes for quotes, backslashes,
/// control and format characters (a right-to-left mark is `\u200f`).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control()
                || matches!(c as u32, 0xad | 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x2064 | 0xfeff) =>
            {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {}: {detail}", go_quote(value)),
    }
}

fn invalid_n(field: &str, value: usize, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid", field: field.into(), message: format!("Invalid value: {value}: {detail}") }
}

/// `field.TooMany`.
pub fn too_many(field: &str, actual: usize, max: usize) -> Cause {
    let items = if max == 1 { "item" } else { "items" };
    Cause {
        reason: "FieldValueTooMany",
        field: field.into(),
        message: format!("Too many: {actual}: must have at most {max} {items}"),
    }
}

fn too_long(field: &str, max: usize) -> Cause {
    Cause {
        reason: "FieldValueTooLong",
        field: field.into(),
        message: format!("Too long: may not be more than {max} bytes"),
    }
}

fn duplicate(field: &str, value: &str) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        field: field.into(),
        message: format!("Duplicate value: {}", go_quote(value)),
    }
}

fn required(field: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueRequired", field: field.into(), message: format!("Required value: {detail}") }
}

/// apimachinery's `RegexError` text.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let e: Vec<String> = examples.iter().map(|x| format!("'{x}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{re}')", e.join(" or "))
}

/// apimachinery's `IsDNS1123Label`, as it words the problems.
fn dns_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > MAX_LABEL {
        out.push(format!("must be no more than {MAX_LABEL} bytes"));
    }
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let label =
        |b: &[u8]| !b.is_empty() && alnum(b[0]) && alnum(b[b.len() - 1]) && b.iter().all(|&c| alnum(c) || c == b'-');
    if !label(b) {
        if b.split(|&c| c == b'.').all(label) && s.len() <= DNS_SUBDOMAIN_MAX {
            out.push("must not contain dots".into());
        } else {
            out.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
                &["my-name", "123-abc"],
            ));
        }
    }
    out
}

/// `field.Invalid` with a value that is not a string: JSON, as
/// apimachinery's ErrorBody prints it (`[]`, `null`, `{...}`).
fn invalid_value(field: &str, value: &Value, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid", field: field.into(), message: format!("Invalid value: {value}: {detail}") }
}

/// validation.go validateDeviceBindingParameters (KEP-5007): at most 4
/// of each, each a qualified name, no repeats, none in both lists, and
/// either both lists or neither.
fn binding_parameters(d: &Value, at: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let list = |k: &str| -> Vec<String> {
        d[k].as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap_or_default().to_string()).collect())
            .unwrap_or_default()
    };
    let (conds, fails) = (list("bindingConditions"), list("bindingFailureConditions"));
    for (k, l) in [("bindingConditions", &conds), ("bindingFailureConditions", &fails)] {
        if l.len() > MAX_BINDING_CONDITIONS {
            out.push(too_many(&format!("{at}.{k}"), l.len(), MAX_BINDING_CONDITIONS));
            continue;
        }
        for (i, c) in l.iter().enumerate() {
            for m in label_key(c) {
                out.push(invalid(&format!("{at}.{k}[{i}]"), c, &m));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, c) in conds.iter().enumerate() {
        if !seen.insert(c) {
            out.push(duplicate(&format!("{at}.bindingConditions[{i}]"), c));
        }
    }
    let mut seen_fail = std::collections::HashSet::new();
    for (i, c) in fails.iter().enumerate() {
        let path = format!("{at}.bindingFailureConditions[{i}]");
        if !seen_fail.insert(c) {
            out.push(duplicate(&path, c));
        }
        if conds.contains(c) {
            out.push(invalid(&path, c, "bindingFailureConditions must not overlap with bindingConditions"));
        }
    }
    if conds.is_empty() && !fails.is_empty() {
        out.push(invalid_value(
            &format!("{at}.bindingConditions"),
            &d["bindingConditions"],
            "bindingConditions are required to use bindingFailureConditions",
        ));
    }
    if fails.is_empty() && !conds.is_empty() {
        out.push(invalid_value(
            &format!("{at}.bindingFailureConditions"),
            &d["bindingFailureConditions"],
            "bindingFailureConditions are required to use bindingConditions",
        ));
    }
    out
}

/// The declarative validation of `consumesCounters[].compatibilityGroups`
/// (KEP-5963; api resource/v1 types.go: maxItems 2, each a k8s-short-name,
/// unique).
fn compatibility_groups(d: &Value, at: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    for (j, c) in d["consumesCounters"].as_array().into_iter().flatten().enumerate() {
        let path = format!("{at}.consumesCounters[{j}].compatibilityGroups");
        let groups: Vec<&str> = c["compatibilityGroups"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap_or_default()).collect())
            .unwrap_or_default();
        if groups.len() > MAX_COMPATIBILITY_GROUPS {
            out.push(too_many(&path, groups.len(), MAX_COMPATIBILITY_GROUPS));
            continue;
        }
        for (i, g) in groups.iter().enumerate() {
            for m in dns_label(g) {
                out.push(invalid(&format!("{path}[{i}]"), g, &m));
            }
        }
        for (i, g) in groups.iter().enumerate() {
            if groups[..i].contains(g) {
                out.push(duplicate(&format!("{path}[{i}]"), g));
            }
        }
    }
    out
}

/// Attribute values (validateDeviceAttribute): a version, and each item of
/// a list of versions, semver 2.0.0; list-typed attributes (KEP-5491) each
/// non-empty; and the values of all attributes, a list's items each, at
/// most 48 (numEntriesDeviceAttribute).
fn attribute_values(d: &Value, at: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut values = 0;
    if let Some(attrs) = d["attributes"].as_object() {
        for a in attrs.values() {
            let lists: Vec<usize> = ["bools", "ints", "strings", "versions"]
                .iter()
                .filter_map(|k| a[*k].as_array().map(Vec::len))
                .collect();
            values += if lists.iter().all(|n| *n == 0) { 1 } else { lists.iter().sum() };
        }
        let total = values;
        if total > MAX_ATTRIBUTE_VALUES {
            out.push(invalid_n(
                at,
                total,
                &format!("the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"),
            ));
        }
        let mut keys: Vec<&String> = attrs.keys().collect();
        keys.sort();
        for k in keys {
            let a = &attrs[k];
            // The declarative union (DeviceAttribute's members; it takes over validateDeviceAttribute's count).
            const MEMBERS: [&str; 8] = ["int", "bool", "string", "version", "ints", "bools", "strings", "versions"];
            out.extend(union(&format!("{at}.attributes[{k}]"), a, &MEMBERS));
            if let Some(v) = a["version"].as_str().filter(|v| !is_semver(v)) {
                out.push(invalid_value(&format!("{at}.attributes[{k}].version"), &json!(v), SEMVER));
            }
            for list in ["bools", "ints", "strings", "versions"] {
                if a[list].as_array().is_some_and(Vec::is_empty) {
                    out.push(invalid_value(
                        &format!("{at}.attributes[{k}].{list}"),
                        &a[list],
                        "must not be empty if specified",
                    ));
                }
            }
            for (i, v) in a["versions"].as_array().into_iter().flatten().enumerate() {
                if let Some(v) = v.as_str().filter(|v| !is_semver(v)) {
                    out.push(invalid_value(&format!("{at}.attributes[{k}].versions[{i}]"), &json!(v), SEMVER));
                }
            }
        }
    }
    out
}

/// The declarative union's words (apimachinery `validate.Union`): none or
/// several of `members` set in `obj` at `path`.
pub(super) fn union(path: &str, obj: &Value, members: &[&str]) -> Option<Cause> {
    let set: Vec<&str> = members.iter().copied().filter(|m| obj.get(*m).is_some_and(|v| !v.is_null())).collect();
    let all: Vec<String> = members.iter().map(|m| format!("`{m}`")).collect();
    match set.len() {
        1 => None,
        0 => Some(invalid(path, "", &format!("must specify one of: {}", all.join(", ")))),
        _ => Some(invalid(
            path,
            &format!("{{{}}}", set.join(", ")),
            &format!("must specify exactly one of: {}", all.join(", ")),
        )),
    }
}

/// validateDeviceAttributeVersionValue's words.
const SEMVER: &str = "must be a string compatible with semver.org spec 2.0.0";

/// A version attribute as `semverRe` takes it (semver.org 2.0.0, strictly: no
/// leading zeros, no `v`, three numbers).
fn is_semver(v: &str) -> bool {
    semver::Version::parse(v).is_ok()
}

/// validation.go validateNodeAllocatableResources (KEP-5517): each key
/// cpu, memory or hugepages-*; mapping or overhead set; a mapping's
/// capacityKey a capacity of the device with a positive capacityMultiplier,
/// or a positive deviceMultiplier (one of the two: a union); an overhead's
/// perPod or perContainer, neither negative.
fn node_allocatable(d: &Value, at: &str) -> Vec<Cause> {
    use crate::controlplane::objects::quantity::Quantity;
    let mut out = Vec::new();
    let Some(map) = d["nodeAllocatableResources"].as_object() else { return out };
    let sign = |v: &Value| -> Option<(i32, String)> {
        let text = v.as_str().map(str::to_string).or_else(|| v.as_number().map(ToString::to_string))?;
        let q = Quantity::read(&text).ok()?;
        Some((q.nanos().signum() as i32, q.text().to_string()))
    };
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    for name in names {
        let r = &map[name];
        let key = format!("{at}.nodeAllocatableResources[{name}]");
        if !(name == "cpu" || name == "memory" || name.starts_with("hugepages-")) {
            out.push(invalid(&key, name, "must be a node allocatable resource name"));
        }
        let (m, o) = (&r["mapping"], &r["overhead"]);
        if m.is_null() && o.is_null() {
            out.push(required(&key, "at least one of mapping or overhead must be set"));
        }
        if !m.is_null() {
            let path = format!("{key}.mapping");
            out.extend(union(&path, m, &["capacityKey", "deviceMultiplier"]));
            if let Some(k) = m["capacityKey"].as_str() {
                if k.is_empty() {
                    out.push(invalid(&format!("{path}.capacityKey"), "", "capacityKey must not be an empty string"));
                } else if d["capacity"].get(k).is_none() {
                    out.push(Cause {
                        reason: "FieldValueNotFound",
                        field: format!("{path}.capacityKey"),
                        message: format!("Not found: {}", go_quote(k)),
                    });
                }
                match sign(&m["capacityMultiplier"]) {
                    None if m["capacityMultiplier"].is_null() => out.push(required(
                        &format!("{path}.capacityMultiplier"),
                        "capacityMultiplier is required when capacityKey is set",
                    )),
                    Some((s, text)) if s <= 0 => {
                        out.push(invalid(&format!("{path}.capacityMultiplier"), &text, "must be positive"))
                    }
                    _ => {}
                }
            }
            if let Some((s, text)) = sign(&m["deviceMultiplier"]).filter(|(s, _)| *s <= 0) {
                let _ = s;
                out.push(invalid(&format!("{path}.deviceMultiplier"), &text, "must be positive"));
            }
            if !m["capacityMultiplier"].is_null() && m["capacityKey"].is_null() {
                out.push(required(
                    &format!("{path}.capacityKey"),
                    "capacityKey is required when capacityMultiplier is set",
                ));
            }
        }
        if !o.is_null() {
            let path = format!("{key}.overhead");
            if o["perPod"].is_null() && o["perContainer"].is_null() {
                out.push(invalid(&path, "", "at least one of perPod or perContainer must be set"));
                continue;
            }
            for k in ["perPod", "perContainer"] {
                if let Some((s, text)) = sign(&o[k]).filter(|(s, _)| *s < 0) {
                    let _ = s;
                    out.push(invalid(&format!("{path}.{k}"), &text, "must be non-negative"));
                }
            }
        }
    }
    out
}

/// v1.36.3 validation.go validateNodeAllocatableResourceMappings (1.36's
/// KEP-5517 field; 1.37 replaced it with `nodeAllocatableResources`): each
/// key a native resource name (no `/`, or a `kubernetes.io/` one); at least
/// one of allocationMultiplier or capacityKey (defaulting sets the
/// multiplier, so through the API only a null entry misses both); a positive
/// allocationMultiplier; a capacityKey non-empty and a capacity of the device.
fn node_allocatable_mappings(d: &Value, at: &str) -> Vec<Cause> {
    use crate::controlplane::objects::quantity::Quantity;
    let mut out = Vec::new();
    let Some(map) = d["nodeAllocatableResourceMappings"].as_object() else { return out };
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    for name in names {
        let m = &map[name];
        let key = format!("{at}.nodeAllocatableResourceMappings[{name}]");
        if name.contains('/') && !name.contains("kubernetes.io/") {
            out.push(invalid(&key, name, "must be a node allocatable resource name"));
        }
        let (mult, cap) = (&m["allocationMultiplier"], &m["capacityKey"]);
        if mult.is_null() && cap.is_null() {
            out.push(invalid(&key, "", "at least one of allocationMultiplier or capacityKey must be set"));
            continue;
        }
        let text = mult.as_str().map(str::to_string).or_else(|| mult.as_number().map(ToString::to_string));
        if let Some(q) = text.and_then(|t| Quantity::read(&t).ok()).filter(|q| q.nanos() <= 0) {
            out.push(invalid(&format!("{key}.allocationMultiplier"), q.text(), "must be positive"));
        }
        if let Some(k) = cap.as_str() {
            if k.is_empty() {
                out.push(invalid(&format!("{key}.capacityKey"), "", "capacityKey must not be an empty string"));
            } else if d["capacity"].get(k).is_none() {
                out.push(Cause {
                    reason: "FieldValueNotFound",
                    field: format!("{key}.capacityKey"),
                    message: format!("Not found: {}", go_quote(k)),
                });
            }
        }
    }
    out
}

/// Whether a device has a list-typed attribute (validation.go haveListAttributes).
fn has_list_attribute(d: &Value) -> bool {
    d["attributes"]
        .as_object()
        .is_some_and(|a| a.values().any(|v| ["bools", "ints", "strings", "versions"].iter().any(|k| !v[*k].is_null())))
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` — a qualified name's name part, or a non-empty label value.
fn qualified_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let end = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty() && end(b[0]) && end(b[b.len() - 1]) && b.iter().all(|&c| end(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS
/// subdomain, the name at most 63 characters. The problems, as it words them
/// before 1.37 (see [`label_key`] for 1.37's words).
fn qualified_name(s: &str) -> Vec<String> {
    let parts: Vec<&str> = s.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [n] => (None, *n),
        [p, n] => (Some(*p), *n),
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    let mut out = Vec::new();
    match prefix {
        Some("") => out.push("prefix part must be non-empty".to_string()),
        Some(p) => {
            if let Err(e) = dns_subdomain(p, DNS_SUBDOMAIN_MAX) {
                out.push(format!("prefix part {e}"));
            }
        }
        None => {}
    }
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else {
        if name.len() > MAX_LABEL {
            out.push(format!("name part must be no more than {MAX_LABEL} characters"));
        }
        if !qualified_chars(name) {
            out.push(format!(
                "name part {}",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
        }
    }
    out
}

/// apimachinery 1.37's `IsQualifiedName` (`content.IsLabelKey`), as
/// `ValidateLabelName` reports it on the 1.37 fields: [`qualified_name`]
/// with 1.37's words ("a valid label key", "bytes").
fn label_key(s: &str) -> Vec<String> {
    qualified_name(s)
        .into_iter()
        .map(|m| {
            m.replacen("a qualified name ", "a valid label key ", 1)
                .replace(&format!("no more than {MAX_LABEL} characters"), &format!("no more than {MAX_LABEL} bytes"))
        })
        .collect()
}

/// apimachinery's `IsValidLabelValue`.
fn label_value(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > MAX_LABEL {
        out.push(format!("must be no more than {MAX_LABEL} characters"));
    }
    if !v.is_empty() && !qualified_chars(v) {
        out.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// `ValidateObjectMeta` for a cluster-scoped object named by `NameIsDNSSubdomain`
/// (`name` is the final name, generated or given): name, labels, annotations.
pub fn object_meta(meta: &Value, name: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    if name.is_empty() {
        out.push(required("metadata.name", "name or generateName is required"));
    } else if let Err(e) = dns_subdomain(name, DNS_SUBDOMAIN_MAX) {
        out.push(invalid("metadata.name", name, &e.to_string()));
    }
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            for m in qualified_name(k) {
                out.push(invalid("metadata.labels", k, &m));
            }
            let v = v.as_str().unwrap_or_default();
            for m in label_value(v) {
                out.push(invalid("metadata.labels", v, &m));
            }
        }
    }
    if let Some(ann) = meta["annotations"].as_object() {
        let mut total = 0usize;
        for (k, v) in ann {
            for m in qualified_name(&k.to_lowercase()) {
                out.push(invalid("metadata.annotations", k, &m));
            }
            total += k.len() + v.as_str().map(str::len).unwrap_or(0);
        }
        if total > MAX_ANNOTATIONS_BYTES {
            out.push(too_long("metadata.annotations", MAX_ANNOTATIONS_BYTES));
        }
    }
    out
}

fn len_of(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    }
}

/// The device limit of a slice: 64 when any device has taints, consumes
/// counters or has a list-typed attribute, else 128.
pub fn device_limit(advanced: bool) -> usize {
    if advanced {
        MAX_DEVICES_ADVANCED
    } else {
        MAX_DEVICES
    }
}

/// The ResourceSlice spec limits of resource.k8s.io/v1.
pub fn slice_spec(spec: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let set = |k: &str| !spec[k].is_null();
    if set("sharedCounters") && set("devices") {
        out.push(invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"));
    }
    let devices = spec["devices"].as_array().map(Vec::as_slice).unwrap_or_default();
    let advanced =
        devices.iter().any(|d| len_of(&d["taints"]) > 0 || len_of(&d["consumesCounters"]) > 0 || has_list_attribute(d));
    let max = device_limit(advanced);
    if devices.len() > max {
        // As upstream: the size check short-circuits the per-device checks.
        out.push(too_many("spec.devices", devices.len(), max));
    } else {
        let mut seen = std::collections::HashSet::new();
        for (i, d) in devices.iter().enumerate() {
            let at = format!("spec.devices[{i}]");
            let n = len_of(&d["attributes"]) + len_of(&d["capacity"]);
            if n > MAX_ATTRIBUTES_AND_CAPACITIES {
                out.push(invalid_n(
                    &at,
                    n,
                    &format!(
                        "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
                    ),
                ));
            }
            out.extend(attribute_values(d, &at));
            let taints = len_of(&d["taints"]);
            if taints > MAX_TAINTS {
                out.push(too_many(&format!("{at}.taints"), taints, MAX_TAINTS));
            } else {
                for (j, t) in d["taints"].as_array().into_iter().flatten().enumerate() {
                    out.extend(device_taint(&format!("{at}.taints[{j}]"), t, None));
                }
            }
            let cc = len_of(&d["consumesCounters"]);
            if cc > MAX_CONSUMES_COUNTERS {
                out.push(too_many(&format!("{at}.consumesCounters"), cc, MAX_CONSUMES_COUNTERS));
            } else {
                out.extend(compatibility_groups(d, &at));
            }
            out.extend(binding_parameters(d, &at));
            out.extend(node_allocatable(d, &at));
            out.extend(node_allocatable_mappings(d, &at));
            let name = d["name"].as_str().unwrap_or_default();
            if !seen.insert(name) {
                out.push(duplicate(&at, name));
            }
        }
    }
    let sets = len_of(&spec["sharedCounters"]);
    if sets > MAX_COUNTER_SETS {
        out.push(too_many("spec.sharedCounters", sets, MAX_COUNTER_SETS));
    }
    out
}

/// `PoolNameMaxLength`.
const MAX_POOL_NAME: usize = 253;

/// validatePoolName: required, at most 253 bytes, each `/`-separated part a DNS subdomain.
fn pool_name(field: &str, pool: &str) -> Vec<Cause> {
    if pool.is_empty() {
        return vec![required(field, "")];
    }
    let mut out = Vec::new();
    if pool.len() > MAX_POOL_NAME {
        out.push(too_long(field, MAX_POOL_NAME));
    }
    for part in pool.split('/') {
        if let Err(e) = dns_subdomain(part, DNS_SUBDOMAIN_MAX) {
            out.push(invalid(field, part, &e.to_string()));
        }
    }
    out
}

/// validateDeviceTaint (v1.37.2 validation.go): `key` a label key (required),
/// `value` a label value, `effect` required and one of None, NoExecute,
/// NoSchedule (checked when new or changed: `old`, the taint replaced).
pub(super) fn device_taint(at: &str, t: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let key = t["key"].as_str().unwrap_or_default();
    if key.is_empty() {
        out.push(required(&format!("{at}.key"), ""));
    }
    for m in label_key(key).into_iter().filter(|_| !key.is_empty()) {
        out.push(invalid(&format!("{at}.key"), key, &m));
    }
    let value = t["value"].as_str().unwrap_or_default();
    for m in label_value(value) {
        out.push(invalid(&format!("{at}.value"), value, &m));
    }
    let effect = t["effect"].as_str().unwrap_or_default();
    if old.is_none_or(|o| o["effect"] != t["effect"]) {
        const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];
        if effect.is_empty() {
            out.push(required(&format!("{at}.effect"), ""));
        } else if !EFFECTS.contains(&effect) {
            out.push(Cause {
                reason: "FieldValueNotSupported",
                field: format!("{at}.effect"),
                message: format!(
                    "Unsupported value: {}: supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
                    go_quote(effect)
                ),
            });
        }
    }
    out
}

/// ValidateDeviceTaintRule's spec (`old`: the rule replaced): the selector's
/// driver, pool and device names, and the taint.
pub(super) fn device_taint_rule(rule: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let sel = &rule["spec"]["deviceSelector"];
    if let Some(d) = sel["driver"].as_str() {
        out.extend(driver_name("spec.deviceSelector.driver", d));
    }
    if let Some(p) = sel["pool"].as_str() {
        out.extend(pool_name("spec.deviceSelector.pool", p));
    }
    if let Some(d) = sel["device"].as_str() {
        for m in dns_label(d) {
            out.push(invalid("spec.deviceSelector.device", d, &m));
        }
    }
    out.extend(device_taint("spec.taint", &rule["spec"]["taint"], old.map(|o| &o["spec"]["taint"])));
    out
}

/// `ValidateCSIDriverName`, as resource.k8s.io validates driver names:
/// required, at most 63 bytes, a DNS subdomain once lowercased.
pub(super) fn driver_name(field: &str, d: &str) -> Vec<Cause> {
    if d.is_empty() {
        return vec![Cause { reason: "FieldValueRequired", field: field.into(), message: "Required value".into() }];
    }
    let mut out = Vec::new();
    if d.len() > 63 {
        out.push(Cause {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: "Too long: may not be more than 63 bytes".into(),
        });
    }
    if let Err(e) = dns_subdomain(&d.to_lowercase(), DNS_SUBDOMAIN_MAX) {
        out.push(invalid(field, d, &e.to_string()));
    }
    out
}

/// validation.go validateResourceSliceSpec: the driver, the pool, exactly one node selection.
fn slice_required(spec: &Value) -> Vec<Cause> {
    let mut out = driver_name("spec.driver", spec["driver"].as_str().unwrap_or_default());
    let set = |k: &str| !spec[k].is_null();
    if spec["pool"]["name"].as_str().unwrap_or_default().is_empty() {
        out.push(Cause {
            reason: "FieldValueRequired",
            field: "spec.pool.name".into(),
            message: "Required value".into(),
        });
    }
    let count = spec["pool"]["resourceSliceCount"].as_i64().unwrap_or_default();
    if count <= 0 {
        out.push(Cause {
            reason: "FieldValueInvalid",
            field: "spec.pool.resourceSliceCount".into(),
            message: format!("Invalid value: {count}: must be greater than zero"),
        });
    }
    let selections: Vec<&str> = [
        ("nodeName", !spec["nodeName"].as_str().unwrap_or_default().is_empty()),
        ("nodeSelector", set("nodeSelector")),
        ("allNodes", spec["allNodes"].as_bool().unwrap_or_default()),
        ("perDeviceNodeSelection", spec["perDeviceNodeSelection"].as_bool().unwrap_or_default()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match selections.as_slice() {
        [] => out.push(required("spec", ONE_OF)),
        [_] => {}
        more => {
            let v: Vec<String> = more.iter().map(|k| format!("`{k}`")).collect();
            out.push(Cause {
                reason: "FieldValueInvalid",
                field: "spec".into(),
                message: format!("Invalid value: \"{{{}}}\": {ONE_OF}, but multiple fields are set", v.join(", ")),
            });
        }
    }
    out
}

/// Everything kube-apiserver checks here on a ResourceSlice create or update.
pub fn resource_slice(obj: &Value, name: &str) -> Vec<Cause> {
    let mut out = object_meta(&obj["metadata"], name);
    out.extend(slice_required(&obj["spec"]));
    out.extend(slice_spec(&obj["spec"]));
    out
}

/// `errors.NewInvalid`: 422 `Invalid`, the message `<Kind>.<group> "name" is
/// invalid: <errors>` (one error as itself, more as `[a, b]`), and the causes.
pub fn invalid_status(group: &str, kind: &str, name: &str, causes: &[Cause]) -> (u16, Value) {
    let errs: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
    let agg = match errs.as_slice() {
        [] => String::new(),
        [one] => format!(": {one}"),
        more => format!(": [{}]", more.join(", ")),
    };
    let message = format!("{kind}.{group} {} is invalid{agg}", go_quote(name));
    let causes: Vec<Value> =
        causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect();
    (
        422,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Invalid", "details": {"name": name, "group": group, "kind": kind, "causes": causes}, "code": 422}),
    )
}

/// What a ResourceSlice body holds, counted without building it: its name
/// (or generateName), how many devices (and whether any has taints or
/// consumes counters). Read from JSON with serde visitors that keep nothing.
#[derive(Debug, Default, PartialEq)]
pub struct Shape {
    /// `metadata.name`, else `metadata.generateName`.
    pub name: String,
    /// `spec.devices` entries.
    pub devices: usize,
    /// Whether any device has taints or consumes counters.
    pub advanced: bool,
}

impl Shape {
    /// The 422 answer when the device count alone is over the limit.
    pub fn refusal(&self) -> Option<(u16, Value)> {
        let max = device_limit(self.advanced);
        (self.devices > max).then(|| {
            invalid_status(
                "resource.k8s.io",
                "ResourceSlice",
                &self.name,
                &[too_many("spec.devices", self.devices, max)],
            )
        })
    }
}

mod probe {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde::Deserialize;

    /// How many elements a list (or entries a map) has; 0 for anything else.
    #[derive(Default)]
    pub struct Count(pub usize);

    impl<'de> Deserialize<'de> for Count {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Count;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("anything")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Count, A::Error> {
                    let mut n = 0;
                    while s.next_element::<IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Count(n))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Count, A::Error> {
                    let mut n = 0;
                    while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Count(n))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
                    Ok(Count(0))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
                    Ok(Count(0))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
                    Ok(Count(0))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
                    Ok(Count(0))
                }
                fn visit_str<E>(self, _: &str) -> Result<Count, E> {
                    Ok(Count(0))
                }
                fn visit_unit<E>(self) -> Result<Count, E> {
                    Ok(Count(0))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Deserialize, Default)]
    pub struct Device {
        #[serde(default)]
        pub taints: Count,
        #[serde(default, rename = "consumesCounters")]
        pub consumes: Count,
    }

    /// The devices: how many, and whether any is "advanced" — no device kept.
    #[derive(Default)]
    pub struct Devices(pub usize, pub bool);

    impl<'de> Deserialize<'de> for Devices {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Devices;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a list of devices")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Devices, A::Error> {
                    let mut out = Devices(0, false);
                    while let Some(d) = s.next_element::<Option<Device>>()? {
                        out.0 += 1;
                        if let Some(d) = d {
                            out.1 |= d.taints.0 > 0 || d.consumes.0 > 0;
                        }
                    }
                    Ok(out)
                }
                fn visit_unit<E>(self) -> Result<Devices, E> {
                    Ok(Devices(0, false))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Deserialize, Default)]
    pub struct Spec {
        #[serde(default)]
        pub devices: Devices,
    }

    #[derive(Deserialize, Default)]
    pub struct Meta {
        #[serde(default)]
        pub name: Option<String>,
        #[serde(default, rename = "generateName")]
        pub generate_name: Option<String>,
    }

    #[derive(Deserialize, Default)]
    pub struct Slice {
        #[serde(default)]
        pub metadata: Option<Meta>,
        #[serde(default)]
        pub spec: Option<Spec>,
    }
}

/// The [`Shape`] of a JSON ResourceSlice body; `None` when it is not one
/// (the full parse then says why).
pub fn json_shape(body: &[u8]) -> Option<Shape> {
    let s: probe::Slice = serde_json::from_slice(body).ok()?;
    let meta = s.metadata.unwrap_or_default();
    let spec = s.spec.unwrap_or_default();
    Some(Shape {
        name: meta.name.filter(|n| !n.is_empty()).or(meta.generate_name).unwrap_or_default(),
        devices: spec.devices.0,
        advanced: spec.devices.1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(c: &[Cause]) -> Vec<String> {
        c.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn names_labels_and_annotations_are_judged_as_apimachinery_words_it() {
        assert!(object_meta(&json!({}), "gpu.example.com-node-1").is_empty());
        let w = words(&object_meta(&json!({}), "bad/slash"));
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("metadata.name: Invalid value: \"bad/slash\": a lowercase RFC 1123 subdomain"),
            "{w:?}"
        );
        assert!(words(&object_meta(&json!({}), "x\0y"))[0].contains("\"x\\x00y\""));
        assert!(words(&object_meta(&json!({}), "a\u{200f}b"))[0].contains("\"a\\u200fb\""));
        let long = "a".repeat(254);
        assert_eq!(
            words(&object_meta(&json!({}), &long)),
            [format!("metadata.name: Invalid value: \"{long}\": must be no more than 253 characters")]
        );
        assert_eq!(
            words(&object_meta(&json!({}), "")),
            ["metadata.name: Required value: name or generateName is required"]
        );
        let v = "v".repeat(64);
        let meta = json!({"labels": {"example.com/ok": "fine", "k": v, "Bad_Prefix/x": "", "a/b/c": "x"}});
        let w = words(&object_meta(&meta, "n"));
        assert_eq!(w.len(), 3, "{w:?}");
        assert_eq!(w[0], format!("metadata.labels: Invalid value: \"{v}\": must be no more than 63 characters"));
        assert!(
            w[1].starts_with("metadata.labels: Invalid value: \"Bad_Prefix/x\": prefix part a lowercase RFC 1123"),
            "{w:?}"
        );
        assert!(
            w[2].starts_with("metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of"),
            "{w:?}"
        );
        let n = "n".repeat(64);
        assert_eq!(
            words(&object_meta(&json!({"labels": {n.clone(): "x"}}), "n")),
            [format!("metadata.labels: Invalid value: \"{n}\": name part must be no more than 63 characters")]
        );
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        assert_eq!(
            words(&object_meta(&json!({"annotations": {"a": big}}), "n")),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert!(object_meta(&json!({"annotations": {"a": "x".repeat(MAX_ANNOTATIONS_BYTES - 1)}}), "n").is_empty());
    }

    fn devices(n: usize, extra: Value) -> Value {
        let list: Vec<Value> = (0..n)
            .map(|i| {
                let mut d = json!({"name": format!("d{i}")});
                if let (Some(o), Some(e)) = (d.as_object_mut(), extra.as_object()) {
                    o.extend(e.clone());
                }
                d
            })
            .collect();
        json!({"devices": list})
    }

    /// The 1.37 fields, as pkg/apis/resource/validation (v1.37.2)
    /// validateDevice and the declarative rules of api resource/v1 judge
    /// them: binding conditions (KEP-5007), list-typed attributes
    /// (KEP-5491), compatibility groups (KEP-5963), node-allocatable
    /// resources (KEP-5517).
    #[test]
    fn the_1_37_device_fields_are_judged_as_upstream_does() {
        let ok = json!({"bindingConditions": ["ready", "example.com/attached"], "bindingFailureConditions": ["failed"],
            "bindsToNode": true,
            "attributes": {"numas": {"ints": [0, 1]}, "names": {"strings": ["a"]}},
            "consumesCounters": [{"counterSet": "s", "counters": {}, "compatibilityGroups": ["mig", "vgpu"]}],
            "capacity": {"cores": {"value": "8"}},
            "nodeAllocatableResources": {"cpu": {"mapping": {"capacityKey": "cores", "capacityMultiplier": "2"}},
                                         "memory": {"overhead": {"perPod": "1Gi"}}}});
        assert!(slice_spec(&devices(1, ok.clone())).is_empty(), "{:?}", words(&slice_spec(&devices(1, ok))));
        // A list attribute makes the slice's limit 64.
        let list = json!({"attributes": {"numas": {"ints": [0]}}});
        assert_eq!(words(&slice_spec(&devices(65, list))), ["spec.devices: Too many: 65: must have at most 64 items"]);
        assert_eq!(
            words(&slice_spec(&devices(
                1,
                json!({"bindingConditions": ["a", "b", "c", "d", "e"], "bindingFailureConditions": ["f"]})
            ))),
            ["spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items"]
        );
        assert_eq!(
            words(&slice_spec(&devices(1, json!({"bindingConditions": ["a", "a"], "bindingFailureConditions": ["a"]})))),
            [
                "spec.devices[0].bindingConditions[1]: Duplicate value: \"a\"",
                "spec.devices[0].bindingFailureConditions[0]: Invalid value: \"a\": bindingFailureConditions must not overlap with bindingConditions"
            ]
        );
        assert_eq!(
            words(&slice_spec(&devices(1, json!({"bindingConditions": ["ready"]})))),
            ["spec.devices[0].bindingFailureConditions: Invalid value: null: bindingFailureConditions are required to use bindingConditions"]
        );
        assert_eq!(
            words(&slice_spec(&devices(1, json!({"bindingFailureConditions": ["bad/x/y"]})))),
            [
                "spec.devices[0].bindingFailureConditions[0]: Invalid value: \"bad/x/y\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                "spec.devices[0].bindingConditions: Invalid value: null: bindingConditions are required to use bindingFailureConditions"
            ]
        );
        let values: Vec<i64> = (0..49).collect();
        assert_eq!(
            words(&slice_spec(&devices(1, json!({"attributes": {"n": {"ints": values}, "e": {"strings": []}}})))),
            [
                "spec.devices[0]: Invalid value: 50: the total number of attribute values must not exceed 48",
                "spec.devices[0].attributes[e].strings: Invalid value: []: must not be empty if specified"
            ]
        );
        let versions = json!({"attributes": {"a": {"version": "1.0"}, "b": {"version": "1.2.3-rc.1+b.5"}, "c": {"versions": ["1.2.3", "v1.2.3", "01.2.3"]}}});
        assert_eq!(
            words(&slice_spec(&devices(1, versions))),
            [
                "spec.devices[0].attributes[a].version: Invalid value: \"1.0\": must be a string compatible with semver.org spec 2.0.0",
                "spec.devices[0].attributes[c].versions[1]: Invalid value: \"v1.2.3\": must be a string compatible with semver.org spec 2.0.0",
                "spec.devices[0].attributes[c].versions[2]: Invalid value: \"01.2.3\": must be a string compatible with semver.org spec 2.0.0"
            ]
        );
        let groups =
            |g: Value| json!({"consumesCounters": [{"counterSet": "s", "counters": {}, "compatibilityGroups": g}]});
        assert_eq!(
            words(&slice_spec(&devices(1, groups(json!(["a", "b", "c"]))))),
            ["spec.devices[0].consumesCounters[0].compatibilityGroups: Too many: 3: must have at most 2 items"]
        );
        assert_eq!(
            words(&slice_spec(&devices(1, groups(json!(["Mig", "Mig"]))))),
            [
                "spec.devices[0].consumesCounters[0].compatibilityGroups[0]: Invalid value: \"Mig\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.devices[0].consumesCounters[0].compatibilityGroups[1]: Invalid value: \"Mig\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.devices[0].consumesCounters[0].compatibilityGroups[1]: Duplicate value: \"Mig\""
            ]
        );
        let na = |v: Value| json!({"capacity": {"cores": {"value": "8"}}, "nodeAllocatableResources": v});
        assert_eq!(
            words(&slice_spec(&devices(1, na(json!({
                "example.com/gpu": {},
                "cpu": {"mapping": {"capacityKey": "nope", "deviceMultiplier": "0"}},
                "memory": {"mapping": {"capacityMultiplier": "2"}, "overhead": {"perPod": "-1"}}}))))),
            [
                "spec.devices[0].nodeAllocatableResources[cpu].mapping: Invalid value: \"{capacityKey, deviceMultiplier}\": must specify exactly one of: `capacityKey`, `deviceMultiplier`",
                "spec.devices[0].nodeAllocatableResources[cpu].mapping.capacityKey: Not found: \"nope\"",
                "spec.devices[0].nodeAllocatableResources[cpu].mapping.capacityMultiplier: Required value: capacityMultiplier is required when capacityKey is set",
                "spec.devices[0].nodeAllocatableResources[cpu].mapping.deviceMultiplier: Invalid value: \"0\": must be positive",
                "spec.devices[0].nodeAllocatableResources[example.com/gpu]: Invalid value: \"example.com/gpu\": must be a node allocatable resource name",
                "spec.devices[0].nodeAllocatableResources[example.com/gpu]: Required value: at least one of mapping or overhead must be set",
                "spec.devices[0].nodeAllocatableResources[memory].mapping: Invalid value: \"\": must specify one of: `capacityKey`, `deviceMultiplier`",
                "spec.devices[0].nodeAllocatableResources[memory].mapping.capacityKey: Required value: capacityKey is required when capacityMultiplier is set",
                "spec.devices[0].nodeAllocatableResources[memory].overhead.perPod: Invalid value: \"-1\": must be non-negative"
            ]
        );
    }

    #[test]
    fn slice_limits_are_resource_k8s_io_v1s() {
        assert!(slice_spec(&devices(128, json!({}))).is_empty());
        assert_eq!(
            words(&slice_spec(&devices(129, json!({})))),
            ["spec.devices: Too many: 129: must have at most 128 items"]
        );
        let taint = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
        assert!(slice_spec(&devices(64, taint.clone())).is_empty());
        assert_eq!(words(&slice_spec(&devices(65, taint))), ["spec.devices: Too many: 65: must have at most 64 items"]);
        let cc = json!({"consumesCounters": [{"counterSet": "a"}, {"counterSet": "b"}, {"counterSet": "c"}]});
        assert_eq!(
            words(&slice_spec(&devices(1, cc))),
            ["spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items"]
        );
        let taints: Vec<Value> = (0..17).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule"})).collect();
        assert_eq!(
            words(&slice_spec(&devices(2, json!({"taints": taints})))),
            [
                "spec.devices[0].taints: Too many: 17: must have at most 16 items",
                "spec.devices[1].taints: Too many: 17: must have at most 16 items"
            ]
        );
        let attrs: serde_json::Map<String, Value> = (0..30).map(|i| (format!("a{i}"), json!({"int": i}))).collect();
        let caps: serde_json::Map<String, Value> = (0..3).map(|i| (format!("c{i}"), json!({"value": "1"}))).collect();
        assert_eq!(
            words(&slice_spec(&devices(1, json!({"attributes": attrs, "capacity": caps})))),
            ["spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"]
        );
        let mut both = devices(1, json!({}));
        both["sharedCounters"] = json!([{"name": "s", "counters": {"mem": {"value": "1"}}}]);
        assert_eq!(
            words(&slice_spec(&both)),
            ["spec: Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed"]
        );
        let sets: Vec<Value> = (0..9).map(|i| json!({"name": format!("s{i}")})).collect();
        assert_eq!(
            words(&slice_spec(&json!({"sharedCounters": sets}))),
            ["spec.sharedCounters: Too many: 9: must have at most 8 items"]
        );
        let dup = json!({"devices": [{"name": "d0"}, {"name": "d0"}]});
        assert_eq!(words(&slice_spec(&dup)), ["spec.devices[1]: Duplicate value: \"d0\""]);
    }

    #[test]
    fn the_invalid_status_is_kube_apiservers() {
        let (code, st) = invalid_status("resource.k8s.io", "ResourceSlice", "s", &[too_many("spec.devices", 129, 128)]);
        assert_eq!(code, 422);
        assert_eq!(
            st["message"],
            "ResourceSlice.resource.k8s.io \"s\" is invalid: spec.devices: Too many: 129: must have at most 128 items"
        );
        assert_eq!(st["reason"], "Invalid");
        assert_eq!(
            st["details"],
            json!({"name": "s", "group": "resource.k8s.io", "kind": "ResourceSlice", "causes": [
                {"reason": "FieldValueTooMany", "message": "Too many: 129: must have at most 128 items", "field": "spec.devices"}]})
        );
        let two = [too_many("a", 2, 1), duplicate("b", "x")];
        let (_, st) = invalid_status("g", "K", "n", &two);
        assert_eq!(
            st["message"],
            "K.g \"n\" is invalid: [a: Too many: 2: must have at most 1 item, b: Duplicate value: \"x\"]"
        );
    }

    #[test]
    fn a_bodys_shape_is_read_without_building_it() {
        let mut s = devices(3, json!({}));
        s["devices"][1]["taints"] = json!([{"key": "k"}]);
        let body = json!({"metadata": {"generateName": "n-"}, "spec": s}).to_string();
        assert_eq!(json_shape(body.as_bytes()), Some(Shape { name: "n-".into(), devices: 3, advanced: true }));
        let body =
            json!({"metadata": {"name": "x", "generateName": "n-"}, "spec": devices(200, json!({}))}).to_string();
        let shape = json_shape(body.as_bytes()).unwrap();
        assert_eq!((shape.name.as_str(), shape.devices, shape.advanced), ("x", 200, false));
        assert_eq!(
            shape.refusal().unwrap().1["message"],
            "ResourceSlice.resource.k8s.io \"x\" is invalid: spec.devices: Too many: 200: must have at most 128 items"
        );
        assert_eq!(json_shape(b"{}"), Some(Shape::default()));
        assert!(json_shape(b"[").is_none());
        assert!(json_shape(br#"{"spec": {"devices": null}}"#).unwrap().refusal().is_none());
    }
}
