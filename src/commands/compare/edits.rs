//! What a container is handed for the runtime, whichever plugin kind served
//! it, and the differences: a device plugin's ContainerAllocateResponse
//! (envs, mounts, device nodes, annotations, and CDI devices resolved) and
//! a DRA driver's CDI devices resolved from its CDI specs (spec-level and
//! device-level `containerEdits`). Pure: the caller reads the files.

use crate::api::deviceplugin::ContainerAllocateResponse;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The kinds of runtime edits compared.
pub const KINDS: &[&str] = &["env", "device", "mount", "annotation", "cdi"];

/// The kinds of differences the device comparison ([`super::identity`])
/// finds: `count` (devices per container), `numa` (the NUMA nodes of a
/// container's devices), `identity` (an identifier kind both sides name,
/// e.g. `identity:uuid`).
pub const DEVICE_KINDS: &[&str] = &["count", "numa", "identity"];

/// One container's runtime edits, by kind: key → value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Edits(pub BTreeMap<&'static str, BTreeMap<String, String>>);

impl Edits {
    fn put(&mut self, kind: &'static str, key: impl Into<String>, value: impl Into<String>) {
        self.0.entry(kind).or_default().insert(key.into(), value.into());
    }

    /// Merge `other` in (several resources or devices of one container).
    pub fn extend(&mut self, other: Edits) {
        for (k, m) in other.0 {
            self.0.entry(k).or_default().extend(m);
        }
    }
}

/// Device-node permissions with their letters sorted (`mrw` = `rwm`).
fn perms(p: &str) -> String {
    let mut c: Vec<char> = p.chars().collect();
    c.sort_unstable();
    c.into_iter().collect()
}

/// What a device plugin's Allocate answer hands the runtime; its CDI device
/// names are resolved through `cdi` (an unresolvable one is an `cdi` entry).
pub fn from_allocate(r: &ContainerAllocateResponse, cdi: &BTreeMap<String, Value>) -> Edits {
    let mut e = Edits::default();
    for (k, v) in &r.envs {
        e.put("env", k, v);
    }
    for (k, v) in &r.annotations {
        e.put("annotation", k, v);
    }
    for m in &r.mounts {
        e.put("mount", &m.container_path, format!("{}{}", m.host_path, if m.read_only { " (ro)" } else { "" }));
    }
    for d in &r.devices {
        e.put("device", &d.container_path, format!("{} ({})", d.host_path, perms(&d.permissions)));
    }
    let names: Vec<String> = r.cdi_devices.iter().map(|c| c.name.clone()).collect();
    e.extend(from_cdi(&names, cdi));
    e
}

/// CDI device ID (`kind=name`) → its edits (the spec's `containerEdits`
/// and the device's, in a JSON list), from spec texts (JSON or YAML).
pub fn cdi_index(specs: &[(String, bool)]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (text, yaml) in specs {
        let v: Value = if *yaml {
            match serde_norway::from_str(text) {
                Ok(v) => v,
                Err(_) => continue,
            }
        } else {
            match serde_json::from_str(text) {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        let Some(kind) = v["kind"].as_str() else { continue };
        for d in v["devices"].as_array().into_iter().flatten() {
            let Some(name) = d["name"].as_str() else { continue };
            out.insert(
                format!("{kind}={name}"),
                Value::Array(vec![v["containerEdits"].clone(), d["containerEdits"].clone()]),
            );
        }
    }
    out
}

/// What CDI devices `ids` hand the runtime (the runtime applies their
/// edits); an ID no spec defines is a `cdi` entry `unresolved`.
pub fn from_cdi(ids: &[String], index: &BTreeMap<String, Value>) -> Edits {
    let mut e = Edits::default();
    for id in ids {
        let Some(list) = index.get(id).and_then(Value::as_array) else {
            e.put("cdi", id, "unresolved");
            continue;
        };
        for ed in list {
            for env in ed["env"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                let (k, v) = env.split_once('=').unwrap_or((env, ""));
                e.put("env", k, v);
            }
            for n in ed["deviceNodes"].as_array().into_iter().flatten() {
                let Some(path) = n["path"].as_str() else { continue };
                let host = n["hostPath"].as_str().unwrap_or(path);
                e.put("device", path, format!("{host} ({})", perms(n["permissions"].as_str().unwrap_or("rwm"))));
            }
            for m in ed["mounts"].as_array().into_iter().flatten() {
                let Some(path) = m["containerPath"].as_str() else { continue };
                let ro = m["options"].as_array().is_some_and(|o| o.iter().any(|x| x == "ro"));
                let host = m["hostPath"].as_str().unwrap_or("");
                e.put("mount", path, format!("{host}{}", if ro { " (ro)" } else { "" }));
            }
        }
    }
    e
}

/// A difference `--allow` accepts: a kind, or one key of it (`env:NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    /// The kind.
    pub kind: String,
    /// The key (none: every key of the kind).
    pub key: Option<String>,
}

/// Every kind of difference `--allow` may name.
fn allowable() -> Vec<&'static str> {
    KINDS.iter().chain(DEVICE_KINDS).copied().chain(std::iter::once("admission")).collect()
}

/// An `--allow` naming a kind (this one) that is no kind of difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAKind(pub String);

impl std::fmt::Display for NotAKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a kind of difference; use one of {}, e.g. env:NVIDIA_VISIBLE_DEVICES",
            self.0,
            allowable().join(", ")
        )
    }
}

impl std::error::Error for NotAKind {}

impl std::str::FromStr for Allow {
    type Err = NotAKind;
    fn from_str(s: &str) -> Result<Self, NotAKind> {
        let (kind, key) = match s.split_once(':') {
            Some((k, v)) => (k, Some(v.to_string()).filter(|v| !v.is_empty())),
            None => (s, None),
        };
        if !allowable().contains(&kind) {
            return Err(NotAKind(kind.to_string()));
        }
        Ok(Allow { kind: kind.to_string(), key })
    }
}

/// One difference between what the two kinds hand one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// The pod spec.
    pub pod: String,
    /// The container.
    pub container: String,
    /// env, device, mount, annotation or cdi.
    pub kind: String,
    /// The env name, container path, annotation key or CDI ID.
    pub key: String,
    /// What the device plugin gives (none: nothing).
    pub device_plugin: Option<String>,
    /// What the DRA driver gives (none: nothing).
    pub dra_driver: Option<String>,
    /// An `--allow` accepts it.
    pub allowed: bool,
}

/// The differences between `a` (device plugin) and `b` (DRA driver) for one container.
pub fn diff(pod: &str, container: &str, a: &Edits, b: &Edits, allow: &[Allow]) -> Vec<Difference> {
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    for kind in KINDS {
        let (x, y) = (a.0.get(kind).unwrap_or(&empty), b.0.get(kind).unwrap_or(&empty));
        let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (l, r) = (x.get(k), y.get(k));
            if l == r {
                continue;
            }
            let allowed = allow.iter().any(|w| w.kind == *kind && w.key.as_ref().is_none_or(|key| key == k));
            out.push(Difference {
                pod: pod.to_string(),
                container: container.to_string(),
                kind: kind.to_string(),
                key: k.clone(),
                device_plugin: l.cloned(),
                dra_driver: r.cloned(),
                allowed,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::{CdiDevice, DeviceSpec, Mount};
    use serde_json::json;

    #[test]
    fn allocate_answers_and_cdi_edits_read_alike_and_differences_are_keyed() {
        let spec = json!({"cdiVersion": "0.6.0", "kind": "k8s.gpu.example.com/claim",
            "containerEdits": {"env": ["COMMON=1"]},
            "devices": [{"name": "d0", "containerEdits": {"env": ["MODE=fast"],
                "deviceNodes": [{"path": "/dev/gpu0", "hostPath": "/dev/null", "permissions": "rw"}],
                "mounts": [{"hostPath": "/opt/lib", "containerPath": "/lib/gpu", "options": ["ro", "bind"]}]}}]});
        let index = cdi_index(&[(spec.to_string(), false)]);
        let b = from_cdi(&["k8s.gpu.example.com/claim=d0".to_string(), "x.io/y=z".to_string()], &index);
        let r = ContainerAllocateResponse {
            envs: [("MODE".to_string(), "slow".to_string()), ("COMMON".to_string(), "1".to_string())].into(),
            devices: vec![DeviceSpec {
                container_path: "/dev/gpu0".into(),
                host_path: "/dev/null".into(),
                permissions: "wr".into(),
            }],
            mounts: vec![Mount { container_path: "/lib/gpu".into(), host_path: "/opt/lib".into(), read_only: true }],
            annotations: BTreeMap::new().into_iter().collect(),
            cdi_devices: vec![CdiDevice { name: "x.io/y=z".into() }],
        };
        let a = from_allocate(&r, &index);
        let allow: Vec<Allow> = vec!["env:OTHER".parse().unwrap()];
        let d = diff("one", "main", &a, &b, &allow);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].kind.as_str(), d[0].key.as_str()), ("env", "MODE"));
        assert_eq!((d[0].device_plugin.as_deref(), d[0].dra_driver.as_deref()), (Some("slow"), Some("fast")));
        assert!(!d[0].allowed);
        let d = diff("one", "main", &a, &b, &["env:MODE".parse().unwrap()]);
        assert!(d[0].allowed);
        assert!("nope:x".parse::<Allow>().unwrap_err().to_string().contains("not a kind"));
        assert!("numa".parse::<Allow>().is_ok() && "admission".parse::<Allow>().is_ok());
    }
}
