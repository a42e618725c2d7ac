//! The one interface through which the kubelet reads from and writes to
//! the control plane, implemented in process by the local API server's
//! store ([`super::apiserver::Store`]).

use serde_json::Value;

/// What the kubelet asks of the control plane.
pub trait Client: Send + Sync + std::fmt::Debug {
    /// Every ResourceSlice, as stored.
    fn slices(&self) -> Vec<Value>;
    /// A stamp of the stored slices: equal stamps, equal slices.
    fn slices_stamp(&self) -> u64;
    /// Every ResourceSlice with the stamp of that set, read at once.
    fn stamped_slices(&self) -> (u64, Vec<Value>);
    /// Delete `driver`'s slices on `node`; the names deleted.
    fn wipe(&self, driver: &str, node: &str) -> Vec<String>;
    /// Delete every slice of `node`; the names deleted.
    fn wipe_node(&self, node: &str) -> Vec<String>;
    /// Hold an object of a manifest (a CRD or an object of another group) under `key`.
    fn put_manifest(&self, key: &str, obj: Value);
    /// Forget the manifest object `key`.
    fn forget_manifest(&self, key: &str);
    /// Write a ResourceClaim (create, or update the stored one); whether it changed.
    fn put_claim(&self, obj: Value) -> bool;
    /// Delete the ResourceClaim `namespace/name`; whether it was stored.
    fn delete_claim(&self, key: &str) -> bool;
    /// The stored ResourceClaims' keys (`namespace/name`).
    fn claim_keys(&self) -> Vec<String>;
    /// ResourceClaim `namespace/name` as stored (with what drivers wrote in
    /// its `status.devices`).
    fn claim(&self, key: &str) -> Option<Value>;
    /// Write an object of a built-in kind (`group`, `resource`: a DeviceClass
    /// manifest); whether it changed.
    fn put_object(&self, group: &str, resource: &str, obj: Value) -> bool;
    /// Delete `namespace/name` ("" when cluster-scoped) of a built-in kind; whether it was stored.
    fn delete_object(&self, group: &str, resource: &str, namespace: &str, name: &str) -> bool;
    /// The pods clients created through the API bound to `node` (`spec.nodeName`), as stored.
    fn pods_on(&self, node: &str) -> Vec<Value>;
    /// Hold the DeviceTaintRule of manifest `key` (None: it went), for the
    /// device-taint eviction controller.
    fn put_taint_rule(&self, key: &str, rule: Option<crate::controlplane::objects::TaintRule>);
}

impl Client for super::apiserver::Store {
    fn slices(&self) -> Vec<Value> {
        super::apiserver::Store::slices(self)
    }
    fn slices_stamp(&self) -> u64 {
        super::apiserver::Store::slices_stamp(self)
    }
    fn stamped_slices(&self) -> (u64, Vec<Value>) {
        super::apiserver::Store::stamped_slices(self)
    }
    fn wipe(&self, driver: &str, node: &str) -> Vec<String> {
        super::apiserver::Store::wipe(self, driver, node)
    }
    fn wipe_node(&self, node: &str) -> Vec<String> {
        super::apiserver::Store::wipe_node(self, node)
    }
    fn put_manifest(&self, key: &str, obj: Value) {
        super::apiserver::Store::put_manifest(self, key, obj)
    }
    fn forget_manifest(&self, key: &str) {
        super::apiserver::Store::forget_manifest(self, key)
    }
    fn put_claim(&self, obj: Value) -> bool {
        super::apiserver::Store::put_claim(self, obj)
    }
    fn delete_claim(&self, key: &str) -> bool {
        super::apiserver::Store::delete_claim(self, key)
    }
    fn claim_keys(&self) -> Vec<String> {
        super::apiserver::Store::claim_keys(self)
    }
    fn claim(&self, key: &str) -> Option<Value> {
        super::apiserver::Store::claim(self, key)
    }
    fn put_object(&self, group: &str, resource: &str, obj: Value) -> bool {
        super::apiserver::Store::put_object(self, group, resource, obj)
    }
    fn delete_object(&self, group: &str, resource: &str, namespace: &str, name: &str) -> bool {
        super::apiserver::Store::delete_object(self, group, resource, namespace, name)
    }
    fn pods_on(&self, node: &str) -> Vec<Value> {
        super::apiserver::Store::pods_on(self, node)
    }
    fn put_taint_rule(&self, key: &str, rule: Option<crate::controlplane::objects::TaintRule>) {
        super::apiserver::Store::put_taint_rule(self, key, rule)
    }
}
