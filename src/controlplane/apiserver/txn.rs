//! One write transaction on the store for the control plane's controllers
//! ([`Txn`]): what they read (pods, templates, classes, claims, slices, as
//! served) and write (claims created, updated and deleted; a pod's status),
//! each write stamped as the API server stamps it (metadata, resource
//! versions) and sent to the watches — all under the lock of the write
//! that woke them, so a watcher sees the write and what the controllers
//! made of it together.

use super::{builtin, meta, resourceclaims, Store, StoreInner};
use serde_json::{json, Value};

/// The controllers run after each write through the API, under its lock.
pub type Controller = Box<dyn Fn(&mut Txn<'_>) + Send + Sync>;

/// The store, locked, for a controller.
pub struct Txn<'a> {
    pub(super) store: &'a Store,
    pub(super) st: &'a mut StoreInner,
}

impl Txn<'_> {
    /// The apiVersion of the PodGroups served (`scheduling.k8s.io/v1beta1`,
    /// 1.36's `v1alpha2`): an owner reference to a PodGroup names it.
    pub fn pod_group_api_version(&self) -> String {
        format!("scheduling.k8s.io/{}", self.store.pod_group_version().unwrap_or("v1beta1"))
    }

    /// Every stored object of built-in `group`'s `resource` (in `namespace`, when given), as served.
    pub fn list(&self, group: &str, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        builtin::kind_of(group, resource).map(|k| builtin::objects_of(self.st, k, namespace)).unwrap_or_default()
    }

    /// Object `namespace/name` ("" when cluster-scoped) of built-in `group`'s `resource`, as served.
    pub fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let k = builtin::kind_of(group, resource)?;
        self.st.builtin.get(&builtin::key(k, namespace, name)).map(|o| builtin::served(k, o))
    }

    /// Every stored ResourceClaim, as stored (its metadata, spec and status as v1 serves them).
    pub fn claims(&self) -> impl Iterator<Item = &Value> {
        self.st.claims.values()
    }

    /// Claim `namespace/name`, as v1 serves it.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<Value> {
        self.st.claims.get(&format!("{namespace}/{name}")).map(|c| resourceclaims::served(c, "v1"))
    }

    /// Every stored ResourceSlice.
    pub fn slices(&self) -> impl Iterator<Item = &Value> {
        self.st.slices.values()
    }

    /// Create claim `obj` in its namespace (its `metadata.generateName`
    /// honoured as a create through the API honours it); its name, or the
    /// error status (code and `Status`) a create through the API would answer.
    pub fn create_claim(&mut self, mut obj: Value) -> Result<String, (u16, Value)> {
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
        let StoreInner { generated, claims, .. } = &mut *self.st;
        let name =
            meta::name_for_create(&obj, generated, |n| claims.contains_key(&format!("{ns}/{n}")), "resourceclaims")?;
        let key = format!("{ns}/{name}");
        obj["metadata"]["namespace"] = json!(ns);
        if obj.get("status").is_none() {
            obj["status"] = json!({});
        }
        self.st.version += 1;
        let seed = format!("claim\0{key}\0{}\0{}", self.st.version, meta::now());
        meta::created(&mut obj, &name, self.st.version, &seed, false);
        if let Some(m) = obj["metadata"].as_object_mut() {
            // Claims count no generation (the resourceclaim strategy).
            m.remove("generation");
        }
        let obj = resourceclaims::served(&obj, "v1");
        self.store.emit(self.st, "ADDED", obj.clone());
        self.st.claims.insert(key, obj);
        Ok(name)
    }

    /// Write claim `obj` over the stored one of its namespace and name
    /// (its metadata, spec and status as given; uid and creation kept, a new
    /// resource version); a claim being deleted whose last finalizer is gone
    /// goes. Whether it was stored.
    pub fn update_claim(&mut self, mut obj: Value) -> bool {
        let key = format!(
            "{}/{}",
            obj["metadata"]["namespace"].as_str().unwrap_or_default(),
            obj["metadata"]["name"].as_str().unwrap_or_default()
        );
        let Some(cur) = self.st.claims.get(&key).cloned() else { return false };
        if obj == cur {
            return true;
        }
        self.st.version += 1;
        meta::updated(&mut obj, &cur, self.st.version);
        if cur["metadata"].get("generation").is_none() {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("generation");
            }
        }
        let obj = resourceclaims::served(&obj, "v1");
        if meta::finalized(&obj) {
            self.st.claims.remove(&key);
            self.store.emit(self.st, "DELETED", obj);
            return true;
        }
        self.store.emit(self.st, "MODIFIED", obj.clone());
        self.st.claims.insert(key, obj);
        true
    }

    /// Delete claim `namespace/name` (as the garbage collector deletes a
    /// pod's claim); whether it was stored.
    pub fn delete_claim(&mut self, namespace: &str, name: &str) -> bool {
        resourceclaims::delete(self.store, self.st, &format!("{namespace}/{name}"))
    }

    /// Set pod `namespace/name`'s `status` (its status subresource); whether it was stored.
    pub fn update_pod_status(&mut self, namespace: &str, name: &str, status: Value) -> bool {
        self.update_status("", "pods", namespace, name, status)
    }

    /// Set the `status` of built-in object `group/resource` `namespace/name`
    /// (its status subresource); whether it was stored.
    pub fn update_status(&mut self, group: &str, resource: &str, namespace: &str, name: &str, status: Value) -> bool {
        let Some(k) = builtin::kind_of(group, resource) else { return false };
        let at = builtin::key(k, namespace, name);
        let Some(cur) = self.st.builtin.get(&at).cloned() else { return false };
        if cur["status"] == status {
            return true;
        }
        let mut next = cur.clone();
        next["status"] = status;
        // As an API write stores it (a pod's conditions with their unset times).
        builtin::default(k, &mut next);
        if cur == next {
            return true;
        }
        self.st.version += 1;
        meta::updated(&mut next, &cur, self.st.version);
        self.store.emit(self.st, "MODIFIED", next.clone());
        self.st.builtin.insert(at, next);
        true
    }

    /// The DeviceTaintRules held ([`Store::put_taint_rule`]).
    pub fn taint_rules(&self) -> Vec<crate::controlplane::objects::TaintRule> {
        let api = self.api_taint_rules().into_iter().filter_map(|r| match crate::controlplane::objects::parse(&r) {
            Ok(crate::controlplane::objects::Object::TaintRule { rule, .. }) => Some(rule),
            _ => None,
        });
        self.st.taint_rules.values().cloned().chain(api).collect()
    }

    /// The stored slices `keep` keeps, as the allocator reads them
    /// ([`crate::controlplane::objects::parse`]); one that does not parse is left out.
    pub fn slice_objects<'s>(
        &'s self,
        keep: impl Fn(&Value) -> bool + 's,
    ) -> impl Iterator<Item = crate::controlplane::objects::Object> + 's {
        self.slices().filter(move |s| keep(s)).filter_map(|s| {
            let mut s = s.clone();
            s["kind"] = json!("ResourceSlice");
            crate::controlplane::objects::parse(&s).ok()
        })
    }

    /// The DeviceTaintRules created through the API, as served.
    pub fn api_taint_rules(&self) -> Vec<Value> {
        self.list("resource.k8s.io", "devicetaintrules", None)
    }

    /// Create `obj` of a built-in kind (an Event a controller records:
    /// `group`/`resource` from its apiVersion and kind); whether it was stored.
    pub fn create_event(&mut self, obj: Value) -> bool {
        builtin::put(self.store, self.st, "", "events", obj)
    }

    /// Delete pod `namespace/name` with UID `uid` as a DELETE without options
    /// deletes it: a pod bound to a node and not finished gets a
    /// `deletionTimestamp` and its grace period (its node deletes it for
    /// good), any other goes. Whether it was stored with that UID.
    pub fn delete_pod(&mut self, namespace: &str, name: &str, uid: &str) -> bool {
        builtin::delete_pod_gracefully(self.store, self.st, namespace, name, uid)
    }
}
