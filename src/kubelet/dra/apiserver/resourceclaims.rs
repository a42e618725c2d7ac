//! The ResourceClaims the API server holds, and their `status`
//! subresource. The mock kubelet is the claims' source (their spec,
//! allocation and reservations, [`super::claims`]); before each claim
//! request the store is brought in line with it ([`sync`]): a new claim (or
//! a new UID under an old name) gets `generation: 1`, a `creationTimestamp`
//! and a resource version; a change of what the kubelet says bumps the
//! resource version (and the generation when the spec changed); what
//! drivers wrote to `status.devices` (KEP-4817) is kept while the UID is
//! the same.
//!
//! `/status` serves GET, PUT (UpdateStatus) and PATCH (merge, strategic
//! merge and apply patches, [`super::patch`]), as kube-apiserver's status
//! strategy does: the spec and metadata of the body are ignored, a stale
//! `resourceVersion` or another `uid` is 409 Conflict, `status.devices`
//! must name allocated devices (422). The allocation and reservations are
//! the mock kubelet's: a write that changes `status.allocation` is 422
//! (immutable once allocated; this server allocates claims itself), and
//! `status.reservedFor` in a write is not taken.

use super::patch::{self, PatchType};
use super::selectors::{self, Selection};
use super::validate::{self, Cause};
use super::{status, Store, StoreInner};
use serde_json::{json, Value};

const GROUP: &str = "resource.k8s.io";

/// The fields the kubelet's view decides (compared to see a change).
fn decided(c: &Value) -> [&Value; 6] {
    let m = &c["metadata"];
    [
        &c["spec"],
        &m["labels"],
        &m["annotations"],
        &m["ownerReferences"],
        &c["status"]["allocation"],
        &c["status"]["reservedFor"],
    ]
}

fn key_of(c: &Value) -> String {
    format!(
        "{}/{}",
        c["metadata"]["namespace"].as_str().unwrap_or_default(),
        c["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Now, as `metav1.Time` writes it.
pub(super) fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    crate::kubelet::dra::protobuf::format_rfc3339(secs as i64)
}

/// Bring the stored claims in line with the kubelet's `current` ones.
///
/// Each change is recorded for the claims' watches (ADDED, MODIFIED,
/// DELETED), as kube-apiserver's watch cache sends them.
pub(super) fn sync(store: &Store, st: &mut StoreInner, current: &[Value]) {
    let mut seen = std::collections::BTreeSet::new();
    for c in current {
        let key = key_of(c);
        seen.insert(key.clone());
        let stored = st.claims.get(&key);
        let same_uid = stored.is_some_and(|s| s["metadata"]["uid"] == c["metadata"]["uid"]);
        let existed = stored.is_some();
        if same_uid && stored.is_some_and(|s| decided(s) == decided(c)) {
            continue;
        }
        st.version += 1;
        let mut obj = c.clone();
        obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
        match stored.filter(|_| same_uid) {
            Some(s) => {
                let generation = s["metadata"]["generation"].as_i64().unwrap_or(1);
                obj["metadata"]["generation"] = json!(generation + i64::from(s["spec"] != c["spec"]));
                obj["metadata"]["creationTimestamp"] = s["metadata"]["creationTimestamp"].clone();
                if let Some(d) = s["status"].get("devices") {
                    obj["status"]["devices"] = d.clone();
                }
            }
            None => {
                obj["metadata"]["generation"] = json!(1);
                obj["metadata"]["creationTimestamp"] = json!(now());
            }
        }
        let kind = if same_uid { "MODIFIED" } else { "ADDED" };
        if existed && !same_uid {
            // A new UID under an old name: the old claim went first.
            if let Some(old) = st.claims.remove(&key) {
                store.emit(st, "DELETED", served(&old, "v1"));
                st.version += 1;
                obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
            }
        }
        store.emit(st, kind, served(&obj, "v1"));
        st.claims.insert(key, obj);
    }
    let gone: Vec<String> = st.claims.keys().filter(|k| !seen.contains(*k)).cloned().collect();
    for k in gone {
        if let Some(old) = st.claims.remove(&k) {
            st.version += 1;
            store.emit(st, "DELETED", served(&old, "v1"));
        }
    }
}

/// A claim as served in API version `v`.
pub(super) fn served(c: &Value, v: &str) -> Value {
    let mut c = c.clone();
    c["apiVersion"] = json!(format!("{GROUP}/{v}"));
    c["kind"] = json!("ResourceClaim");
    if v == "v1beta1" {
        c["spec"] = super::claims::v1beta1_spec(&c["spec"]);
    }
    c
}

fn not_found(name: &str) -> (u16, Value) {
    let (c, mut v) = status(404, "NotFound", format!("resourceclaims.{GROUP} {name:?} not found"));
    v["details"] = json!({"name": name, "group": GROUP, "kind": "resourceclaims"});
    (c, v)
}

fn conflict(name: &str, why: &str) -> (u16, Value) {
    let (c, mut v) =
        status(409, "Conflict", format!("Operation cannot be fulfilled on resourceclaims.{GROUP} {name:?}: {why}"));
    v["details"] = json!({"name": name, "group": GROUP, "kind": "resourceclaims"});
    (c, v)
}

/// What one claim request asks for.
pub(super) struct ClaimRequest<'a> {
    /// API version of the path.
    pub version: &'a str,
    /// The namespace (None: every namespace).
    pub namespace: Option<&'a str>,
    /// The claim's name (None: a list).
    pub name: Option<&'a str>,
    /// The subresource (`status`).
    pub sub: Option<&'a str>,
    /// HTTP method.
    pub method: &'a str,
    /// Decoded query parameters.
    pub query: &'a [(String, String)],
    /// The body's Content-Type.
    pub content_type: &'a str,
    /// The body (JSON for PUT; the patch as sent for PATCH).
    pub body: &'a [u8],
}

/// Answer one request of `resourceclaims` (the store already synced).
pub(super) fn answer(store: &Store, st: &mut StoreInner, r: &ClaimRequest) -> (u16, Value) {
    let Some(name) = r.name else {
        if r.method != "GET" {
            return super::method_not_allowed();
        }
        let sel: Selection = match selectors::of_query("ResourceClaim", r.query) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let items: Vec<Value> = st
            .claims
            .values()
            .filter(|c| r.namespace.is_none_or(|ns| c["metadata"]["namespace"] == ns))
            .filter(|c| selectors::selected(&sel, c))
            .map(|c| served(c, r.version))
            .collect();
        return (
            200,
            json!({"kind": "ResourceClaimList", "apiVersion": format!("{GROUP}/{}", r.version),
                "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
        );
    };
    let key = format!("{}/{name}", r.namespace.unwrap_or_default());
    let Some(cur) = st.claims.get(&key).cloned() else { return not_found(name) };
    match (r.method, r.sub) {
        ("GET", None | Some("status")) => (200, served(&cur, r.version)),
        ("PUT", Some("status")) => match serde_json::from_slice::<Value>(r.body) {
            Ok(body) => update_status(store, st, &key, &cur, &body, r.version),
            Err(e) => status(400, "BadRequest", format!("body is not JSON: {e}")),
        },
        ("PATCH", Some("status")) => {
            let Some(t) = PatchType::of(r.content_type) else {
                return status(
                    415,
                    "UnsupportedMediaType",
                    format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {:?}", r.content_type),
                );
            };
            let parsed: Result<Value, String> = match t {
                PatchType::Apply => serde_norway::from_slice(r.body).map_err(|e| e.to_string()),
                _ => serde_json::from_slice(r.body).map_err(|e| e.to_string()),
            };
            let p = match parsed {
                Ok(p) => p,
                Err(e) => return status(400, "BadRequest", format!("the patch cannot be read: {e}")),
            };
            if t == PatchType::Apply && !r.query.iter().any(|(k, v)| k == "fieldManager" && !v.is_empty()) {
                let (c, mut v) = status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into());
                v["details"] = json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]});
                return (c, v);
            }
            let patched = patch::apply(&served(&cur, r.version), &p, t);
            update_status(store, st, &key, &cur, &patched, r.version)
        }
        (_, Some("status")) => super::method_not_allowed(),
        _ => status(
            405,
            "MethodNotAllowed",
            "resourceclaims are written by the mock kubelet here; drivers write their /status".into(),
        ),
    }
}

/// A status update (UpdateStatus, or the result of a patch) of claim `key`.
fn update_status(
    store: &Store,
    st: &mut StoreInner,
    key: &str,
    cur: &Value,
    body: &Value,
    version: &str,
) -> (u16, Value) {
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    let meta = &body["metadata"];
    if let Some(uid) = meta["uid"].as_str().filter(|u| !u.is_empty()) {
        let have = cur["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != have {
            return conflict(
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
            );
        }
    }
    if let Some(rv) = meta["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        if rv != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
            return conflict(
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            );
        }
    }
    let mut causes = Vec::new();
    let (had, given) = (&cur["status"]["allocation"], &body["status"]["allocation"]);
    if !given.is_null() && given != had {
        let detail = if had.is_null() {
            "Forbidden: this API server allocates claims itself (give status.allocation in the claim's manifest)"
        } else {
            "Invalid value: \"object\": field is immutable"
        };
        let reason = if had.is_null() { "FieldValueForbidden" } else { "FieldValueInvalid" };
        causes.push(Cause { reason, field: "status.allocation".into(), message: detail.into() });
    }
    let results = had["devices"]["results"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let devices = body["status"]["devices"].as_array().cloned().unwrap_or_default();
    for (i, d) in devices.iter().enumerate() {
        let allocated = results.iter().any(|r| ["driver", "pool", "device"].iter().all(|f| r[*f] == d[*f]));
        if !allocated {
            let id = format!(
                "{}/{}/{}",
                d["driver"].as_str().unwrap_or_default(),
                d["pool"].as_str().unwrap_or_default(),
                d["device"].as_str().unwrap_or_default()
            );
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: format!("status.devices[{i}]"),
                message: format!(
                    "Invalid value: {}: must be an allocated device in the claim",
                    validate::go_quote(&id)
                ),
            });
        }
    }
    if !causes.is_empty() {
        return validate::invalid_status(GROUP, "ResourceClaim", name, &causes);
    }
    let mut next = cur.clone();
    match devices.is_empty() {
        true => {
            if let Some(s) = next["status"].as_object_mut() {
                s.remove("devices");
            }
        }
        false => next["status"]["devices"] = json!(devices),
    }
    if next != *cur {
        st.version += 1;
        next["metadata"]["resourceVersion"] = json!(st.version.to_string());
        st.claims.insert(key.to_string(), next.clone());
        store.emit(st, "MODIFIED", served(&next, "v1"));
    }
    (200, served(&next, version))
}
