//! Custom resources: CustomResourceDefinition manifests
//! (`apiextensions.k8s.io/v1`) in the manifest directory declare resources
//! of other groups (NVIDIA's ComputeDomain: `resource.nvidia.com/v1beta1
//! computedomains`), whose objects are stored and served as kube-apiserver
//! serves custom resources: get, list, watch, create, update (PUT), merge
//! patch and delete, and `/status` (get, update, merge patch) when the CRD
//! declares the subresource (the main resource then ignores `status`, the
//! status subresource everything but `status`). Objects of a declared kind
//! in the manifest directory are loaded as if created. Every create is
//! validated as kube-apiserver does a name (DNS subdomain, 422 with the
//! field path). Custom resources are JSON only (as kube-apiserver, which
//! has no protobuf for them); conversion between versions is `None` (the
//! object is served in the path's version as it is).

use super::patch::{self, PatchType};
use super::selectors::{self, Selection};
use super::{status, Store, StoreInner};
use serde_json::{json, Value};

pub use crate::controlplane::objects::Crd;

impl Crd {
    fn has_status(&self, version: &str) -> bool {
        self.versions.iter().any(|(v, s)| v == version && *s)
    }

    fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|(v, _)| v == version)
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// The stored key of an object of `crd`.
fn key(crd: &Crd, ns: &str, name: &str) -> String {
    format!("{}/{}/{ns}/{name}", crd.group, crd.plural)
}

/// Whether `obj` is an object of `crd` (in `ns` when given).
pub(super) fn is_of(crd: &Crd, ns: Option<&str>, obj: &Value) -> bool {
    obj["kind"] == crd.kind.as_str()
        && group_of(obj["apiVersion"].as_str().unwrap_or_default()) == crd.group
        && ns.is_none_or(|n| obj["metadata"]["namespace"] == n)
}

/// `obj` as served in `version`.
pub(super) fn in_version(crd: &Crd, version: &str, obj: &Value) -> Value {
    let mut o = obj.clone();
    o["apiVersion"] = json!(format!("{}/{version}", crd.group));
    o
}

impl Store {
    /// A manifest of the directory that is a CRD or an object of another
    /// group: a CRD declares its resource (and the objects of its kind read
    /// before it are loaded); an object is stored when its kind is declared
    /// (else when its CRD comes).
    pub fn put_manifest(&self, key: &str, v: Value) {
        let mut st = self.lock();
        st.manifests.insert(key.to_string(), v);
        self.load_manifests(&mut st);
    }

    /// A manifest went away: its CRD or object goes too.
    pub fn forget_manifest(&self, key: &str) {
        let mut st = self.lock();
        let Some(v) = st.manifests.remove(key) else { return };
        if v["kind"] == "CustomResourceDefinition" {
            if let Ok(crd) = Crd::parse(&v) {
                st.crds.retain(|c| c != &crd);
            }
            return;
        }
        let Some(crd) = st.crds.iter().find(|c| is_of(c, None, &v)).cloned() else { return };
        let m = &v["metadata"];
        let k = key_of(&crd, m);
        if let Some(old) = st.custom.remove(&k) {
            st.version += 1;
            self.emit(&mut st, "DELETED", old);
        }
    }

    fn load_manifests(&self, st: &mut StoreInner) {
        let manifests: Vec<Value> = st.manifests.values().cloned().collect();
        for v in &manifests {
            if v["kind"] == "CustomResourceDefinition" {
                if let Ok(crd) = Crd::parse(v) {
                    if !st.crds.contains(&crd) {
                        st.crds.retain(|c| !(c.group == crd.group && c.plural == crd.plural));
                        st.crds.push(crd);
                    }
                }
            }
        }
        for v in &manifests {
            let Some(crd) = st.crds.iter().find(|c| is_of(c, None, v)).cloned() else { continue };
            let k = key_of(&crd, &v["metadata"]);
            let changed = st
                .custom
                .get(&k)
                .is_none_or(|have| have["spec"] != v["spec"] || have["metadata"]["labels"] != v["metadata"]["labels"]);
            if changed {
                let _ = create_or_replace(self, st, &crd, v.clone(), true);
            }
        }
    }
}

fn key_of(crd: &Crd, meta: &Value) -> String {
    let ns = if crd.namespaced { meta["namespace"].as_str().unwrap_or("default") } else { "" };
    key(crd, ns, meta["name"].as_str().unwrap_or_default())
}

/// The CRD serving `group/version/plural`.
pub(super) fn find<'a>(st: &'a StoreInner, group: &str, version: &str, plural: &str) -> Option<&'a Crd> {
    st.crds.iter().find(|c| c.group == group && c.plural == plural && c.serves(version))
}

/// A custom resource path: (crd, version, namespace, name, subresource).
pub(super) struct CustomPath<'a> {
    pub crd: Crd,
    pub version: &'a str,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub sub: Option<&'a str>,
}

/// Read `/apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME[/SUB]]` against the declared CRDs.
pub(super) fn route<'a>(st: &StoreInner, path: &'a str) -> Option<CustomPath<'a>> {
    let rest = path.strip_prefix("/apis/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        [g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(*ns), rest),
        r => (None, r),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return None,
    };
    let crd = find(st, group, version, plural)?.clone();
    Some(CustomPath { crd, version, namespace, name, sub })
}

fn not_found(crd: &Crd, name: &str) -> (u16, Value) {
    let (c, mut v) = status(404, "NotFound", format!("{}.{} {name:?} not found", crd.plural, crd.group));
    v["details"] = json!({"name": name, "group": crd.group, "kind": crd.plural});
    (c, v)
}

fn conflict(crd: &Crd, name: &str) -> (u16, Value) {
    status(409, "Conflict", format!("Operation cannot be fulfilled on {}.{} {name:?}: the object has been modified; please apply your changes to the latest version and try again", crd.plural, crd.group))
}

/// Create (or, from a manifest, replace) an object of `crd`: its name
/// validated, uid, resourceVersion, generation and creationTimestamp set.
fn create_or_replace(
    store: &Store,
    st: &mut StoreInner,
    crd: &Crd,
    mut obj: Value,
    from_manifest: bool,
) -> (u16, Value) {
    let ns_of = |obj: &Value| obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let ns = if crd.namespaced { ns_of(&obj) } else { String::new() };
    let StoreInner { generated, custom, .. } = &mut *st;
    let resource = format!("{}.{}", crd.plural, crd.group);
    let name =
        match super::meta::name_for_create(&obj, generated, |n| custom.contains_key(&key(crd, &ns, n)), &resource) {
            Ok(n) => n,
            Err(e) => return e,
        };
    let causes = super::validate::object_meta(&obj["metadata"], &name);
    if !causes.is_empty() {
        return super::validate::invalid_status(&crd.group, &crd.kind, &name, &causes);
    }
    let k = key(crd, &ns, &name);
    let old = st.custom.get(&k).cloned();
    if old.is_some() && !from_manifest {
        return status(409, "AlreadyExists", format!("{}.{} {name:?} already exists", crd.plural, crd.group));
    }
    st.version += 1;
    obj["kind"] = json!(crd.kind);
    if obj["apiVersion"].as_str().is_none_or(|a| group_of(a) != crd.group) {
        obj["apiVersion"] = json!(format!("{}/{}", crd.group, crd.versions[0].0));
    }
    if crd.namespaced {
        obj["metadata"]["namespace"] = json!(ns);
    }
    match &old {
        Some(o) => super::meta::updated(&mut obj, o, st.version),
        None => super::meta::created(&mut obj, &name, st.version, &format!("custom\0{k}\0{}", st.version), false),
    }
    st.custom.insert(k, obj.clone());
    store.emit(st, if old.is_some() { "MODIFIED" } else { "ADDED" }, obj.clone());
    (201, obj)
}

/// Answer one request of a custom resource (not a watch).
pub(super) fn answer(
    store: &Store,
    st: &mut StoreInner,
    p: &CustomPath,
    method: &str,
    query: &[(String, String)],
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let crd = &p.crd;
    let Some(name) = p.name else {
        return match method {
            "GET" => {
                let sel: Selection = match selectors::of_query(&crd.kind, query) {
                    Ok(s) => s,
                    Err(e) => return e,
                };
                let items: Vec<Value> = st
                    .custom
                    .values()
                    .filter(|o| is_of(crd, p.namespace, o) && selectors::selected(&sel, o))
                    .map(|o| in_version(crd, p.version, o))
                    .collect();
                (
                    200,
                    json!({"kind": format!("{}List", crd.kind), "apiVersion": format!("{}/{}", crd.group, p.version),
                    "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
                )
            }
            "POST" => match serde_json::from_slice::<Value>(body) {
                Ok(mut o) => {
                    if let Some(ns) = p.namespace {
                        o["metadata"]["namespace"] = json!(ns);
                    }
                    if crd.has_status(p.version) {
                        if let Some(m) = o.as_object_mut() {
                            m.remove("status");
                        }
                    }
                    let (c, o) = create_or_replace(store, st, crd, o, false);
                    (c, if c == 201 { in_version(crd, p.version, &o) } else { o })
                }
                Err(e) => status(400, "BadRequest", format!("body is not JSON: {e}")),
            },
            _ => super::method_not_allowed(),
        };
    };
    let k = key(crd, p.namespace.unwrap_or_default(), name);
    if p.sub.is_some_and(|s| s != "status" || !crd.has_status(p.version)) {
        return status(404, "NotFound", "the server could not find the requested resource".into());
    }
    let Some(cur) = st.custom.get(&k).cloned() else { return not_found(crd, name) };
    let status_sub = p.sub.is_some();
    let next = match method {
        "GET" => return (200, in_version(crd, p.version, &cur)),
        "DELETE" => {
            st.custom.remove(&k);
            st.version += 1;
            let mut gone = cur.clone();
            gone["metadata"]["resourceVersion"] = json!(st.version.to_string());
            store.emit(st, "DELETED", gone.clone());
            return (200, in_version(crd, p.version, &gone));
        }
        "PUT" => match serde_json::from_slice::<Value>(body) {
            Ok(o) => o,
            Err(e) => return status(400, "BadRequest", format!("body is not JSON: {e}")),
        },
        "PATCH" => {
            let Some(t) = PatchType::of(content_type).filter(|t| *t == PatchType::Merge) else {
                return status(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json; got {content_type:?}"));
            };
            match serde_json::from_slice::<Value>(body) {
                Ok(patch) => patch::apply(&cur, &patch, t),
                Err(e) => return status(400, "BadRequest", format!("the patch cannot be read: {e}")),
            }
        }
        _ => return super::method_not_allowed(),
    };
    if let Some(rv) = next["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        if rv != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
            return conflict(crd, name);
        }
    }
    // With a status subresource, each endpoint changes only its part.
    let mut obj = if status_sub {
        let mut o = cur.clone();
        o["status"] = next["status"].clone();
        o
    } else {
        let mut o = next.clone();
        if crd.has_status(p.version) {
            o["status"] = cur["status"].clone();
        }
        for f in ["uid", "creationTimestamp", "name", "namespace"] {
            o["metadata"][f] = cur["metadata"][f].clone();
        }
        o
    };
    if obj["status"].is_null() {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    st.version += 1;
    obj["kind"] = json!(crd.kind);
    obj["apiVersion"] = cur["apiVersion"].clone();
    obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
    let g = cur["metadata"]["generation"].as_i64().unwrap_or(1);
    obj["metadata"]["generation"] = json!(g + i64::from(!status_sub && cur["spec"] != obj["spec"]));
    st.custom.insert(k, obj.clone());
    store.emit(st, "MODIFIED", obj.clone());
    (200, in_version(crd, p.version, &obj))
}

/// Discovery for the declared groups: `/apis`'s extra groups, and the
/// documents of `/apis/GROUP` and `/apis/GROUP/VERSION`.
pub(super) fn groups(st: &StoreInner) -> Vec<Value> {
    let mut names: Vec<&str> = st.crds.iter().map(|c| c.group.as_str()).collect();
    names.sort();
    names.dedup();
    names.iter().filter_map(|g| group_doc(st, g)).collect()
}

fn group_doc(st: &StoreInner, group: &str) -> Option<Value> {
    let mut versions: Vec<&str> =
        st.crds.iter().filter(|c| c.group == group).flat_map(|c| c.versions.iter().map(|(v, _)| v.as_str())).collect();
    versions.dedup();
    let first = *versions.first()?;
    let list: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    Some(
        json!({"name": group, "versions": list, "preferredVersion": {"groupVersion": format!("{group}/{first}"), "version": first}}),
    )
}

/// The discovery document of a declared group's path, if it is one.
pub(super) fn discovery(st: &StoreInner, path: &str) -> Option<Value> {
    let rest = path.trim_end_matches('/').strip_prefix("/apis/")?;
    match rest.split_once('/') {
        None => {
            let mut g = group_doc(st, rest)?;
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            Some(g)
        }
        Some((group, version)) => {
            let crds: Vec<&Crd> = st.crds.iter().filter(|c| c.group == group && c.serves(version)).collect();
            if crds.is_empty() {
                return None;
            }
            let verbs = ["create", "delete", "get", "list", "patch", "update", "watch"];
            let mut resources = Vec::new();
            for c in crds {
                resources.push(json!({"name": c.plural, "singularName": c.singular, "namespaced": c.namespaced, "kind": c.kind, "verbs": verbs}));
                if c.has_status(version) {
                    resources.push(json!({"name": format!("{}/status", c.plural), "singularName": "", "namespaced": c.namespaced, "kind": c.kind, "verbs": ["get", "patch", "update"]}));
                }
            }
            Some(
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources}),
            )
        }
    }
}
