//! The devices each kind handed a container — their identities and NUMA
//! nodes — and the differences where both kinds expose them: a device
//! plugin's device IDs with the TopologyInfo it reported (as PodResources
//! shows them), a DRA driver's prepared devices (driver/pool/device, as
//! PodResources shows them) with the identity and NUMA attributes its
//! ResourceSlice publishes. Pure: the caller does the calls.

use super::edits::{Allow, Difference};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Slice attributes that name a device (shown; compared where both kinds name one).
pub const ID_ATTRIBUTES: &[&str] = &["uuid", "productName", "index"];

/// A slice attribute that carries the device's NUMA node: `numaNode`
/// (dra.net), `numaNodeID` (dra-driver-cpu) or `numa`, in any domain.
pub fn is_numa_attribute(name: &str) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    ["numanode", "numanodeid", "numa"].contains(&last.as_str())
}

/// One device a container got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The device plugin's device ID, or the DRA `driver/pool/device`.
    pub id: String,
    /// Its NUMA nodes (empty: not exposed).
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub numa: BTreeSet<i64>,
    /// Identity attributes (`uuid`, `productName`, `index`) → value.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// What a ResourceSlice attribute value reads as.
fn attr_text(v: &Value) -> Option<String> {
    ["int", "string", "version", "bool"].iter().find_map(|k| match &v[*k] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        x => Some(x.to_string()),
    })
}

/// `driver/pool/device` → its NUMA nodes and identity attributes, from a
/// ResourceSlice list (`items`).
pub fn slice_index(list: &Value) -> BTreeMap<String, (BTreeSet<i64>, BTreeMap<String, String>)> {
    let mut out = BTreeMap::new();
    for s in list["items"].as_array().into_iter().flatten() {
        let (driver, pool) =
            (s["spec"]["driver"].as_str().unwrap_or(""), s["spec"]["pool"]["name"].as_str().unwrap_or(""));
        for d in s["spec"]["devices"].as_array().into_iter().flatten() {
            let Some(name) = d["name"].as_str() else { continue };
            let (mut numa, mut ids) = (BTreeSet::new(), BTreeMap::new());
            for (k, v) in d["attributes"].as_object().into_iter().flatten() {
                let short = k.rsplit('/').next().unwrap_or(k);
                if is_numa_attribute(k) {
                    numa.extend(v["int"].as_i64());
                } else if ID_ATTRIBUTES.contains(&short) {
                    if let Some(t) = attr_text(v) {
                        ids.insert(short.to_string(), t);
                    }
                }
            }
            out.insert(format!("{driver}/{pool}/{name}"), (numa, ids));
        }
    }
    out
}

/// Whether a device plugin's device ID is a UUID (NVIDIA's `GPU-…`/`MIG-…` too).
fn uuid_of(id: &str) -> Option<String> {
    let bare = id.strip_prefix("GPU-").or_else(|| id.strip_prefix("MIG-")).unwrap_or(id);
    let parts: Vec<&str> = bare.split('-').collect();
    let shape = parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()));
    shape.then(|| id.to_ascii_lowercase())
}

/// The identifiers of kind `kind` on one side (none: that side does not name it).
fn named(devs: &[Device], kind: &str, plugin: bool) -> Option<BTreeSet<String>> {
    let got: Vec<Option<String>> = devs
        .iter()
        .map(|d| match (plugin, kind) {
            (true, "uuid") => uuid_of(&d.id),
            _ => d.attributes.get(kind).map(|v| v.to_ascii_lowercase()),
        })
        .collect();
    (!got.is_empty() && got.iter().all(Option::is_some)).then(|| got.into_iter().flatten().collect())
}

/// The differences between the devices `a` (device plugin) and `b` (DRA
/// driver) handed one container: the count always, the NUMA nodes where
/// both expose them, an identifier kind where both name it.
pub fn diff(pod: &str, container: &str, a: &[Device], b: &[Device], allow: &[Allow]) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut push = |kind: &str, key: &str, l: String, r: String| {
        let allowed = allow.iter().any(|w| w.kind == kind && w.key.as_ref().is_none_or(|k| k == key));
        out.push(Difference {
            pod: pod.into(),
            container: container.into(),
            kind: kind.into(),
            key: key.into(),
            device_plugin: Some(l),
            dra_driver: Some(r),
            allowed,
        });
    };
    if a.len() != b.len() {
        push("count", "devices", a.len().to_string(), b.len().to_string());
    }
    let numa = |d: &[Device]| {
        (!d.is_empty() && d.iter().all(|x| !x.numa.is_empty()))
            .then(|| d.iter().flat_map(|x| x.numa.iter().copied()).collect::<BTreeSet<_>>())
    };
    if let (Some(x), Some(y)) = (numa(a), numa(b)) {
        if x != y {
            push("numa", "nodes", show(&x), show(&y));
        }
    }
    for kind in ID_ATTRIBUTES {
        if let (Some(x), Some(y)) = (named(a, kind, true), named(b, kind, false)) {
            if x != y {
                push("identity", kind, show(&x), show(&y));
            }
        }
    }
    out
}

fn show<T: std::fmt::Display>(s: &BTreeSet<T>) -> String {
    s.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// One side's devices for the table: `id (numa N)` each.
pub fn words(devs: &[Device]) -> String {
    if devs.is_empty() {
        return "-".into();
    }
    let w: Vec<String> = devs
        .iter()
        .map(|d| {
            let mut s = d.id.clone();
            for (k, v) in &d.attributes {
                s.push_str(&format!(" {k}={v}"));
            }
            if !d.numa.is_empty() {
                s.push_str(&format!(" (numa {})", show(&d.numa)));
            }
            s
        })
        .collect();
    w.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dev(id: &str, numa: &[i64], attrs: &[(&str, &str)]) -> Device {
        Device {
            id: id.into(),
            numa: numa.iter().copied().collect(),
            attributes: attrs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn numa_and_identity_are_compared_only_where_both_kinds_expose_them() {
        let list = json!({"items": [{"spec": {"driver": "gpu.example.com", "pool": {"name": "p"},
            "devices": [{"name": "d0", "attributes": {"numaNode": {"int": 1}, "uuid": {"string": "GPU-AAAAAAAA-0000-0000-0000-000000000000"},
                "gpu.example.com/productName": {"string": "X"}, "other": {"int": 3}}},
                {"name": "d1", "attributes": {"dra.cpu/numaNodeID": {"int": 0}}}]}}]});
        let idx = slice_index(&list);
        let (n, ids) = &idx["gpu.example.com/p/d0"];
        assert_eq!(n.iter().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(ids.keys().collect::<Vec<_>>(), ["productName", "uuid"]);
        assert_eq!(idx["gpu.example.com/p/d1"].0.iter().copied().collect::<Vec<_>>(), [0]);

        // Same NUMA, different count.
        let a = [dev("foo-0", &[0], &[]), dev("foo-1", &[0], &[])];
        let b = [dev("g/p/d1", &[0], &[])];
        let d = diff("p", "c", &a, &b, &[]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].kind.as_str(), d[0].device_plugin.as_deref(), d[0].dra_driver.as_deref()),
            ("count", Some("2"), Some("1"))
        );
        // Different NUMA; allowed by numa.
        let b = [dev("g/p/d0", &[1], &[]), dev("g/p/d1", &[1], &[])];
        let d = diff("p", "c", &a, &b, &["numa".parse().unwrap()]);
        assert_eq!((d.len(), d[0].kind.as_str(), d[0].key.as_str()), (1, "numa", "nodes"));
        assert_eq!(
            (d[0].device_plugin.as_deref(), d[0].dra_driver.as_deref(), d[0].allowed),
            (Some("0"), Some("1"), true)
        );
        // One side without NUMA: not compared; non-UUID IDs: shown, not compared.
        let b = [dev("g/p/d0", &[], &[("uuid", "x")]), dev("g/p/d1", &[], &[("uuid", "y")])];
        assert!(diff("p", "c", &a, &b, &[]).is_empty());
        // UUIDs on both: compared.
        let u = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
        let a = [dev(u, &[], &[])];
        let b = [dev("g/p/d0", &[], &[("uuid", "GPU-bbbbbbbb-0000-0000-0000-000000000000")])];
        let d = diff("p", "c", &a, &b, &[]);
        assert_eq!((d.len(), d[0].kind.as_str(), d[0].key.as_str()), (1, "identity", "uuid"));
        let b = [dev("g/p/d0", &[], &[("uuid", &u.to_uppercase())])];
        assert!(diff("p", "c", &a, &b, &[]).is_empty());
        assert!(words(&a).contains(u) && words(&[dev("x", &[2], &[])]).contains("(numa 2)"));
    }
}
