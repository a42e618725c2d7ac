//! The ResourceClaims the API server stores, and their `status`
//! subresource. Claims are written in process by the mock kubelet, which
//! stands in for the resourceclaim controller and the scheduler (their
//! spec, allocation and reservations, [`put`]): a new claim (or a new UID
//! under an old name) is created ([`super::meta::created`]: `generation: 1`,
//! a `creationTimestamp`, a resource version); a write that changes what
//! the writer decides is an update ([`super::meta::updated`]: a new
//! resource version, the generation bumped when the spec changed); what
//! drivers wrote to `status.devices` (KEP-4817) is kept while the UID is
//! the same.
//!
//! Clients write claims as kube-apiserver's resourceclaim strategy lets
//! them: create (POST, `generateName` honoured; the status cleared, v1's
//! defaults, `ValidateResourceClaim` with its field paths and messages,
//! [`super::rules::claim_spec`]; no `generation`), update and patch (JSON,
//! merge, strategic merge, apply; the spec immutable, the status kept),
//! delete (DeleteOptions preconditions; the deleted claim is the answer;
//! with finalizers it is marked with a `deletionTimestamp`), and watch.
//! `/status` serves GET, PUT (UpdateStatus) and PATCH, as the status
//! strategy does: the spec and metadata of the body are ignored, a stale
//! `resourceVersion` or another `uid` is 409 Conflict, and
//! `ValidateResourceClaimStatusUpdate` judges the rest
//! ([`super::rules::claim_status_update`]): `status.allocation` is set
//! once (a change is 422), `reservedFor` only with an allocation,
//! `status.devices` only for allocated devices; the statuses of devices an
//! allocation drops go with them. The kubelet's in-process writes ([`put`])
//! stay its own: its next write of a claim it owns replaces what a client
//! wrote to its allocation or reservations.

use super::patch;
use super::selectors::{self, Selection};
use super::validate;
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

/// Write claim `obj` as its in-process writer gives it (keeping its uid);
/// a write that changes nothing the writer decides is no write. Each
/// change is sent to the claims' watches (ADDED, MODIFIED; a new UID under
/// an old name is the old claim DELETED, then the new one ADDED), as
/// kube-apiserver's watch cache sends them. Whether the store changed.
pub(super) fn put(store: &Store, st: &mut StoreInner, mut obj: Value) -> bool {
    let key = key_of(&obj);
    let stored = st.claims.get(&key).cloned();
    let same_uid = stored.as_ref().is_some_and(|s| s["metadata"]["uid"] == obj["metadata"]["uid"]);
    if same_uid && stored.as_ref().is_some_and(|s| decided(s) == decided(&obj)) {
        return false;
    }
    if !same_uid && stored.is_some() {
        // A new UID under an old name: the old claim went first.
        delete(store, st, &key);
    }
    st.version += 1;
    let kind = match stored.filter(|_| same_uid) {
        Some(s) => {
            // What drivers wrote stays while the claim is allocated; a
            // deallocation clears it (dynamicresources.go: Status.Devices = nil).
            if let Some(d) = s["status"].get("devices").filter(|_| obj["status"]["allocation"].is_object()) {
                obj["status"]["devices"] = d.clone();
            }
            super::meta::updated(&mut obj, &s, st.version);
            "MODIFIED"
        }
        None => {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            super::meta::created(&mut obj, &name, st.version, &format!("claim\0{key}"), true);
            "ADDED"
        }
    };
    store.emit(st, kind, served(&obj, "v1"));
    st.claims.insert(key, obj);
    true
}

/// Delete claim `key` (`namespace/name`), sent to the watches as DELETED;
/// whether it was stored.
pub(super) fn delete(store: &Store, st: &mut StoreInner, key: &str) -> bool {
    let Some(old) = st.claims.remove(key) else { return false };
    st.version += 1;
    store.emit(st, "DELETED", served(&old, "v1"));
    true
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

/// Answer one request of `resourceclaims`.
pub(super) fn answer(store: &Store, st: &mut StoreInner, r: &ClaimRequest) -> (u16, Value) {
    let Some(name) = r.name else {
        return match r.method {
            "GET" => list(st, r),
            "POST" if r.namespace.is_some() => create(store, st, r),
            _ => super::method_not_allowed(),
        };
    };
    let key = format!("{}/{name}", r.namespace.unwrap_or_default());
    let Some(cur) = st.claims.get(&key).cloned() else { return not_found(name) };
    match (r.method, r.sub) {
        ("GET", None | Some("status")) => (200, served(&cur, r.version)),
        ("PUT", sub) => match serde_json::from_slice::<Value>(r.body) {
            Ok(body) if sub == Some("status") => update_status(store, st, &key, &cur, &body, r.version),
            Ok(body) => update(store, st, &key, &cur, body, r.version),
            Err(e) => status(400, "BadRequest", format!("body is not JSON: {e}")),
        },
        ("PATCH", sub) => {
            let query: Vec<String> = r.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            match patch::patched(&served(&cur, r.version), r.content_type, r.body, r.query, patch::BUILTIN_TYPES)
                .and_then(|o| super::fields::patched_strictly(GROUP, "ResourceClaim", name, o, &query.join("&")))
            {
                Ok(p) if sub == Some("status") => update_status(store, st, &key, &cur, &p, r.version),
                Ok(p) => update(store, st, &key, &cur, p, r.version),
                Err(e) => e,
            }
        }
        ("DELETE", None) => delete_request(store, st, &key, &cur, r),
        _ => super::method_not_allowed(),
    }
}

fn list(st: &StoreInner, r: &ClaimRequest) -> (u16, Value) {
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
    let items = super::list_items(items);
    (
        200,
        json!({"kind": "ResourceClaimList", "apiVersion": format!("{GROUP}/{}", r.version),
            "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
    )
}

/// A client's create (POST), as the resourceclaim strategy runs it: the
/// status cleared, v1's defaults, `ValidateResourceClaim`; stored without
/// `generation` (claims do not count it).
fn create(store: &Store, st: &mut StoreInner, r: &ClaimRequest) -> (u16, Value) {
    let ns = r.namespace.unwrap_or_default().to_string();
    let mut obj = match serde_json::from_slice::<Value>(r.body) {
        Ok(o) if o.is_object() => o,
        Ok(_) => return status(400, "BadRequest", "the body is not an object".into()),
        Err(e) => return status(400, "BadRequest", format!("body is not JSON: {e}")),
    };
    match obj["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(given) if given != ns => {
            return status(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            )
        }
        _ => obj["metadata"]["namespace"] = json!(ns),
    }
    let StoreInner { generated, claims, .. } = st;
    let name = match super::meta::name_for_create(
        &obj,
        generated,
        |n| claims.contains_key(&format!("{ns}/{n}")),
        &format!("resourceclaims.{GROUP}"),
    ) {
        Ok(n) => n,
        Err(e) => return e,
    };
    obj["spec"] = super::claims::v1_spec(&obj["spec"]);
    super::rules::omit_empty_lists(&mut obj);
    super::gated::claim_spec(&store.gates, &mut obj["spec"], None);
    obj["status"] = json!({});
    let mut causes = validate::object_meta(&obj["metadata"], &name);
    causes.extend(super::rules::claim_spec_gated("spec", &obj["spec"], store.gates.consumable_capacity));
    if !causes.is_empty() {
        return validate::invalid_status(GROUP, "ResourceClaim", &name, &causes);
    }
    let key = format!("{ns}/{name}");
    if st.claims.contains_key(&key) {
        let (c, mut v) = status(409, "AlreadyExists", format!("resourceclaims.{GROUP} {name:?} already exists"));
        v["details"] = json!({"name": name, "group": GROUP, "kind": "resourceclaims"});
        return (c, v);
    }
    st.version += 1;
    let seed = format!("claim\0{key}\0{}\0{}", st.version, super::meta::now());
    super::meta::created(&mut obj, &name, st.version, &seed, false);
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("generation");
    }
    let obj = served(&obj, "v1");
    store.emit(st, "ADDED", obj.clone());
    st.claims.insert(key, obj.clone());
    (201, served(&obj, r.version))
}

/// The preconditions a body's metadata carries (uid, resourceVersion): 409 when stale.
fn preconditions(name: &str, cur: &Value, body: &Value) -> Result<(), (u16, Value)> {
    let meta = &body["metadata"];
    if let Some(uid) = meta["uid"].as_str().filter(|u| !u.is_empty()) {
        let have = cur["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != have {
            return Err(conflict(
                name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
            ));
        }
    }
    if let Some(rv) = meta["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        if rv != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
            return Err(conflict(
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
    }
    Ok(())
}

/// An update of the claim (PUT, or a patch's result): the status kept,
/// the spec immutable (`ValidateResourceClaimUpdate`), the metadata validated.
fn update(store: &Store, st: &mut StoreInner, key: &str, cur: &Value, body: Value, version: &str) -> (u16, Value) {
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    if !body.is_object() {
        return status(400, "BadRequest", "the body is not an object".into());
    }
    if let Some(other) = body["metadata"]["name"].as_str().filter(|n| !n.is_empty() && *n != name) {
        return status(
            400,
            "BadRequest",
            format!("the name of the object ({other}) does not match the name on the URL ({name})"),
        );
    }
    if let Err(e) = preconditions(name, cur, &body) {
        return e;
    }
    let mut next = body;
    next["spec"] = super::claims::v1_spec(&next["spec"]);
    super::rules::omit_empty_lists(&mut next);
    super::gated::claim_spec(&store.gates, &mut next["spec"], Some(&cur["spec"]));
    next["status"] = cur["status"].clone();
    next["metadata"]["namespace"] = cur["metadata"]["namespace"].clone();
    let mut causes = validate::object_meta(&next["metadata"], name);
    if next["spec"] != cur["spec"] {
        causes.push(super::rules::invalid_raw("spec", "null", "field is immutable"));
    }
    if !causes.is_empty() {
        return validate::invalid_status(GROUP, "ResourceClaim", name, &causes);
    }
    write(store, st, key, cur, next, version)
}

/// Store `next` over `cur` (a new resource version and a MODIFIED event
/// when anything but the stamps changed); the answer in `version`.
fn write(store: &Store, st: &mut StoreInner, key: &str, cur: &Value, mut next: Value, version: &str) -> (u16, Value) {
    let mut same = next.clone();
    for f in ["uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp"] {
        match cur["metadata"].get(f) {
            Some(v) => same["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = same["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    let same = served(&same, "v1");
    if same == served(cur, "v1") {
        return (200, served(cur, version));
    }
    st.version += 1;
    let had_generation = cur["metadata"].get("generation").is_some();
    super::meta::updated(&mut next, cur, st.version);
    if !had_generation {
        if let Some(m) = next["metadata"].as_object_mut() {
            m.remove("generation");
        }
    }
    for f in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        if let Some(v) = cur["metadata"].get(f) {
            next["metadata"][f] = v.clone();
        }
    }
    let next = served(&next, "v1");
    if super::meta::finalized(&next) {
        // Being deleted and its last finalizer gone: the generic store deletes it (ShouldDeleteDuringUpdate).
        st.claims.remove(key);
        store.emit(st, "DELETED", next.clone());
        return (200, served(&next, version));
    }
    store.emit(st, "MODIFIED", next.clone());
    st.claims.insert(key.to_string(), next.clone());
    (200, served(&next, version))
}

/// A DELETE: the DeleteOptions' preconditions, then the claim gone (or,
/// with finalizers, marked with a `deletionTimestamp`); the answer is the
/// claim, as resource.k8s.io's registries return the deleted object.
fn delete_request(store: &Store, st: &mut StoreInner, key: &str, cur: &Value, r: &ClaimRequest) -> (u16, Value) {
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    let opts: Value = serde_json::from_slice(r.body).unwrap_or(Value::Null);
    for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let want = opts["preconditions"][field].as_str().unwrap_or_default();
        let have = cur["metadata"][field].as_str().unwrap_or_default();
        if !want.is_empty() && want != have {
            return conflict(
                name,
                &format!("Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}"),
            );
        }
    }
    if cur["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
        if cur["metadata"]["deletionTimestamp"].is_string() {
            return (200, served(cur, r.version));
        }
        let mut next = cur.clone();
        next["metadata"]["deletionTimestamp"] = json!(super::meta::now());
        next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        st.version += 1;
        next["metadata"]["resourceVersion"] = json!(st.version.to_string());
        store.emit(st, "MODIFIED", served(&next, "v1"));
        st.claims.insert(key.to_string(), next.clone());
        return (200, served(&next, r.version));
    }
    delete(store, st, key);
    (200, served(cur, r.version))
}

/// A status update (UpdateStatus, or the result of a patch) of claim `key`,
/// as the status strategy runs it: the spec and metadata kept from the
/// stored claim, `ValidateResourceClaimStatusUpdate` (the allocation set
/// once, reservations only with it, device statuses of allocated devices).
fn update_status(
    store: &Store,
    st: &mut StoreInner,
    key: &str,
    cur: &Value,
    body: &Value,
    version: &str,
) -> (u16, Value) {
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    if let Err(e) = preconditions(name, cur, body) {
        return e;
    }
    let mut next = cur.clone();
    next["status"] = match &body["status"] {
        Value::Object(_) => body["status"].clone(),
        _ => json!({}),
    };
    super::rules::omit_empty_lists(&mut next["status"]);
    super::gated::claim_status(&store.gates, &mut next, cur);
    // A device status carries its (unset) conditions as the Go struct writes them.
    for d in next["status"]["devices"].as_array_mut().into_iter().flatten() {
        if d.get("conditions").is_none() {
            d["conditions"] = Value::Null;
        }
    }
    // dropDeallocatedStatusDevices: the statuses of devices the old
    // allocation had and the new one has not are dropped.
    let id = |d: &Value| ["driver", "pool", "device", "shareID"].map(|f| d[f].as_str().unwrap_or_default().to_string());
    let results = |c: &Value| -> Vec<[String; 4]> {
        c["status"]["allocation"]["devices"]["results"].as_array().into_iter().flatten().map(id).collect()
    };
    let (old_ids, new_ids) = (results(cur), results(&next));
    if let Some(list) = next["status"]["devices"].as_array_mut() {
        list.retain(|d| {
            let i = id(d);
            !old_ids.contains(&i) || new_ids.contains(&i)
        });
    }
    let causes = super::rules::claim_status_update(&next, cur);
    if !causes.is_empty() {
        return validate::invalid_status(GROUP, "ResourceClaim", name, &causes);
    }
    if let Some(s) = next["status"].as_object_mut() {
        s.retain(|_, v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
    }
    write(store, st, key, cur, next, version)
}
