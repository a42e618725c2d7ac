//! The CDI (Container Device Interface) rules, once: what a qualified device
//! name (`vendor.example/class=name`) and a spec file are, as the container
//! runtime's CDI parser (tags.cncf.io/container-device-interface,
//! `pkg/parser`, `specs-go`/`validator`) judges them. A device plugin's
//! Allocate answer ([`super::deviceplugin::ALLOCATE_CDI_NAME`]) and a DRA
//! driver's prepared devices ([`super::dra::CDI_ID`]) name devices this way;
//! resolving names against the spec directories (I/O) is the callers'.

use crate::api::deviceplugin::ContainerAllocateResponse;
use serde::Deserialize;

/// The annotation prefix a device plugin may name CDI devices under (values: comma-separated names).
pub const ANNOTATION_PREFIX: &str = "cdi.k8s.io/";
/// Where the CDI specification is.
pub const SPEC: &str = "https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md";

/// `[A-Za-z]`, then `[A-Za-z0-9_.-]*`, ending `[A-Za-z0-9]`: a vendor or class name.
fn vendor_or_class_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// `[A-Za-z0-9]`, then `[A-Za-z0-9_.:-]*`, ending `[A-Za-z0-9]`: a device name.
pub fn device_name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'))
}

/// Whether `kind` is `vendor/class` as CDI requires.
pub fn kind_ok(kind: &str) -> bool {
    kind.split_once('/').is_some_and(|(vendor, class)| vendor_or_class_ok(vendor) && vendor_or_class_ok(class))
}

/// Whether `name` is a qualified CDI device name: `vendor/class=device`.
pub fn name_ok(name: &str) -> bool {
    name.split_once('=').is_some_and(|(kind, dev)| kind_ok(kind) && device_name_ok(dev))
}

/// The CDI device names a container gets from an Allocate answer: its
/// `cdi_devices` and the values of `cdi.k8s.io/*` annotations.
pub fn names(resp: &ContainerAllocateResponse) -> Vec<String> {
    let mut v: Vec<String> = resp.cdi_devices.iter().map(|d| d.name.clone()).collect();
    for (k, val) in &resp.annotations {
        if k.starts_with(ANNOTATION_PREFIX) {
            v.extend(val.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        }
    }
    v
}

#[derive(Deserialize)]
struct Spec {
    #[serde(rename = "cdiVersion", default)]
    cdi_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    devices: Option<Vec<SpecDevice>>,
}

#[derive(Deserialize)]
struct SpecDevice {
    #[serde(default)]
    name: String,
}

/// Why the runtime would refuse a CDI spec file.
#[derive(Debug)]
pub enum SpecError {
    /// Not YAML.
    Yaml(serde_norway::Error),
    /// Not JSON.
    Json(serde_json::Error),
    /// No `cdiVersion`.
    NoVersion,
    /// A kind (this one) that is not `vendor/class`.
    Kind(String),
    /// No devices.
    NoDevices,
    /// A device (this index) without a name.
    NoName(usize),
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::Yaml(e) => write!(f, "not valid YAML: {e}"),
            SpecError::Json(e) => write!(f, "not valid JSON: {e}"),
            SpecError::NoVersion => f.write_str("no cdiVersion"),
            SpecError::Kind(k) => write!(f, "kind {k:?} is not vendor.example/class"),
            SpecError::NoDevices => f.write_str("no devices"),
            SpecError::NoName(i) => write!(f, "devices[{i}] has no name"),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpecError::Yaml(e) => Some(e),
            SpecError::Json(e) => Some(e),
            _ => None,
        }
    }
}

/// Parse one spec file's text (YAML when `yaml`, else JSON): the qualified
/// device names it defines, or why the runtime would refuse it (no
/// cdiVersion, a kind that is not `vendor/class`, no devices, a device
/// without a name).
pub fn parse_spec(text: &str, yaml: bool) -> Result<Vec<String>, SpecError> {
    let spec: Spec = if yaml {
        serde_norway::from_str(text).map_err(SpecError::Yaml)?
    } else {
        serde_json::from_str(text).map_err(SpecError::Json)?
    };
    if spec.cdi_version.trim().is_empty() {
        return Err(SpecError::NoVersion);
    }
    if !kind_ok(&spec.kind) {
        return Err(SpecError::Kind(spec.kind));
    }
    let devices = spec.devices.unwrap_or_default();
    if devices.is_empty() {
        return Err(SpecError::NoDevices);
    }
    let mut out = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        if d.name.is_empty() {
            return Err(SpecError::NoName(i));
        }
        out.push(format!("{}={}", spec.kind, d.name));
    }
    Ok(out)
}

/// The CDI spec versions the library knows (`specs-go` ValidateVersion).
pub const KNOWN_VERSIONS: &[&str] = &["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"];

/// The OCI hook names a spec may use.
const HOOK_NAMES: &[&str] =
    &["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"];

/// Why the CDI library (tags.cncf.io/container-device-interface: the
/// registry's `Spec.validate`, `Device.validate`, `ContainerEdits.Validate`,
/// producer/validator) refuses a spec file, in its words; None when it takes
/// it. The runtime skips a refused spec, so none of its devices resolve.
/// Rules: a known cdiVersion; kind `vendor/class`; spec edits valid; device
/// names valid and unique; every device has non-empty edits; env entries are
/// `NAME=value`; device nodes have a path, a type of b/c/u/p and rwm
/// permissions; hooks have a known name and a path; mounts have both paths.
pub fn spec_problem(text: &str, yaml: bool) -> Option<String> {
    let v: serde_json::Value = if yaml {
        match serde_norway::from_str(text) {
            Ok(v) => v,
            Err(e) => return Some(format!("not valid YAML: {e}")),
        }
    } else {
        match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return Some(format!("not valid JSON: {e}")),
        }
    };
    let version = v["cdiVersion"].as_str().unwrap_or_default();
    if !KNOWN_VERSIONS.contains(&version) {
        return Some(format!("invalid version {version:?}"));
    }
    let kind = v["kind"].as_str().unwrap_or_default();
    if !kind_ok(kind) {
        return Some(format!("invalid kind {kind:?}: not vendor.example/class"));
    }
    if let Some(e) = edits_problem(&v["containerEdits"]) {
        return Some(e);
    }
    let devices = v["devices"].as_array().cloned().unwrap_or_default();
    if devices.is_empty() {
        return Some("invalid spec, no devices".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for d in &devices {
        let name = d["name"].as_str().unwrap_or_default();
        if !seen.insert(name.to_string()) {
            return Some(format!("invalid spec, multiple device {name:?}"));
        }
        if !device_name_ok(name) {
            return Some(format!("invalid device {name:?}: invalid device name"));
        }
        let edits = &d["containerEdits"];
        if edits_empty(edits) {
            return Some(format!("invalid device {name:?}: invalid device, empty device edits"));
        }
        if let Some(e) = edits_problem(edits) {
            return Some(format!("invalid device {name:?}: {e}"));
        }
    }
    None
}

fn edits_empty(e: &serde_json::Value) -> bool {
    let has = |k: &str| e[k].as_array().is_some_and(|a| !a.is_empty());
    !(has("env")
        || has("deviceNodes")
        || has("hooks")
        || has("mounts")
        || has("additionalGids")
        || has("netDevices")
        || e["intelRdt"].is_object())
}

fn edits_problem(e: &serde_json::Value) -> Option<String> {
    let list = |k: &str| e[k].as_array().cloned().unwrap_or_default();
    let env_bad = |env: &[serde_json::Value]| {
        env.iter()
            .map(|x| x.as_str().unwrap_or_default())
            .find(|x| x.find('=').is_none_or(|i| i == 0))
            .map(String::from)
    };
    if let Some(x) = env_bad(&list("env")) {
        return Some(format!("invalid container edits: invalid environment variable {x:?}"));
    }
    for d in list("deviceNodes") {
        let path = d["path"].as_str().unwrap_or_default();
        if path.is_empty() {
            return Some("invalid (empty) device path".into());
        }
        let t = d["type"].as_str().unwrap_or_default();
        if !["", "b", "c", "u", "p"].contains(&t) {
            return Some(format!("device {path:?}: invalid type {t:?}"));
        }
        let perm = d["permissions"].as_str().unwrap_or_default();
        if perm != "none" && !perm.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
            return Some(format!("device {path:?}: invalid permissions {perm:?}"));
        }
    }
    for h in list("hooks") {
        let name = h["hookName"].as_str().unwrap_or_default();
        if !HOOK_NAMES.contains(&name) {
            return Some(format!("invalid hook name {name:?}"));
        }
        if h["path"].as_str().unwrap_or_default().is_empty() {
            return Some(format!("invalid hook {name:?} with empty path"));
        }
        if let Some(x) = env_bad(&h["env"].as_array().cloned().unwrap_or_default()) {
            return Some(format!("invalid hook {name:?}: invalid environment variable {x:?}"));
        }
    }
    for m in list("mounts") {
        if m["hostPath"].as_str().unwrap_or_default().is_empty() {
            return Some("invalid mount, empty host path".into());
        }
        if m["containerPath"].as_str().unwrap_or_default().is_empty() {
            return Some("invalid mount, empty container path".into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::CdiDevice;

    #[test]
    fn names_are_qualified_as_the_cdi_parser_says() {
        // tags.cncf.io/container-device-interface pkg/parser: vendor and class
        // start with a letter and end with a letter or digit; a device name
        // starts and ends with a letter or digit; '_', '-', '.' (and ':' in
        // device names) between.
        for ok in [
            "vendor.example/class=dev",
            "nvidia.com/gpu=0",
            "k8s.gpu.example.com/claim=u1-gpu-0",
            "a/b=c",
            "vendor.com/c_l-a.ss=dev:0",
        ] {
            assert!(name_ok(ok), "{ok}");
        }
        for bad in [
            "",
            "gpu0",
            "gpu=0",
            "vendor.example=dev",
            "vendor.example/class=",
            "/class=dev",
            "vendor/=dev",
            "0vendor/class=dev",
            "vendor-/class=dev",
            "vendor/class-=dev",
            "vendor/a/b=dev",
            "vendor/class=-dev",
            "vendor/class=dev-",
            "vendor/class=a b",
            "vendor/class=dév",
        ] {
            assert!(!name_ok(bad), "{bad:?}");
        }
        assert!(kind_ok("vendor.example/foo") && !kind_ok("nokind"));
    }

    #[test]
    fn names_come_from_cdi_devices_and_annotations() {
        let r = ContainerAllocateResponse {
            cdi_devices: vec![CdiDevice { name: "v.example/c=a".into() }],
            annotations: [
                ("cdi.k8s.io/x".to_string(), "v.example/c=b, v.example/c=c,".to_string()),
                ("other".to_string(), "v.example/c=z".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(names(&r), ["v.example/c=a", "v.example/c=b", "v.example/c=c"]);
    }

    #[test]
    fn specs_parse_in_json_and_yaml_and_bad_ones_say_why() {
        let j = r#"{"cdiVersion":"0.6.0","kind":"vendor.example/foo","devices":[{"name":"foo-0","containerEdits":{}},{"name":"all"}]}"#;
        assert_eq!(parse_spec(j, false).unwrap(), ["vendor.example/foo=foo-0", "vendor.example/foo=all"]);
        let y = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits: {}\n";
        assert_eq!(parse_spec(y, true).unwrap(), ["nvidia.com/gpu=0"]);
        assert!(parse_spec("{", false).unwrap_err().to_string().contains("not valid JSON"));
        assert!(parse_spec("kind: a/b\ndevices: [{name: x}]", true).unwrap_err().to_string().contains("cdiVersion"));
        assert!(parse_spec("cdiVersion: 0.6.0\nkind: nokind\ndevices: [{name: x}]", true)
            .unwrap_err()
            .to_string()
            .contains("kind"));
        assert!(parse_spec("cdiVersion: 0.6.0\nkind: a.b/c\ndevices: []", true)
            .unwrap_err()
            .to_string()
            .contains("no devices"));
        assert!(parse_spec("cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{}]", true)
            .unwrap_err()
            .to_string()
            .contains("no name"));
    }

    #[test]
    fn specs_are_judged_as_the_cdi_library_judges_them() {
        let ok = r#"{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/claim","devices":[{"name":"u-1-gpu-0","containerEdits":{"env":["A=1"]}}]}"#;
        assert_eq!(spec_problem(ok, false), None);
        let y = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    deviceNodes: [{path: /dev/nvidia0, permissions: rw}]\n";
        assert_eq!(spec_problem(y, true), None);
        for (bad, why) in [
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{}}]}"#,
                "invalid device \"d\": invalid device, empty device edits",
            ),
            (r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d"}]}"#, "empty device edits"),
            (
                r#"{"cdiVersion":"9.9.9","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"env":["A=1"]}}]}"#,
                "invalid version \"9.9.9\"",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"-d","containerEdits":{"env":["A=1"]}}]}"#,
                "invalid device name",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"env":["=1"]}}]}"#,
                "invalid environment variable \"=1\"",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"env":["A=1"]}},{"name":"d","containerEdits":{"env":["A=1"]}}]}"#,
                "multiple device \"d\"",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"mounts":[{"hostPath":"/x"}]}}]}"#,
                "empty container path",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"hooks":[{"hookName":"later","path":"/x"}]}}]}"#,
                "invalid hook name \"later\"",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[{"name":"d","containerEdits":{"deviceNodes":[{"path":"/dev/x","permissions":"rwx"}]}}]}"#,
                "invalid permissions \"rwx\"",
            ),
            (
                r#"{"cdiVersion":"0.6.0","kind":"nokind","devices":[{"name":"d","containerEdits":{"env":["A=1"]}}]}"#,
                "invalid kind",
            ),
            (r#"{"cdiVersion":"0.6.0","kind":"a.b/c","devices":[]}"#, "no devices"),
        ] {
            let got = spec_problem(bad, false).unwrap_or_else(|| panic!("accepted: {bad}"));
            assert!(got.contains(why), "{got} / {why}");
        }
    }
}
