//! The DRA objects the manager knows, without I/O: the resource.k8s.io
//! manifests (claims, templates, classes, slices, taint rules) and the
//! claims read from the API server, by key, and the allocator's candidates
//! computed from them, from the slices drivers published and from the
//! devices health streams name — again only when one of those changed.

use super::healthinfo::HealthCache;
use crate::controlplane::allocator::{self, Candidate, Features};
use crate::controlplane::objects::{self, Object};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The node's name (the local API server's Node, what drivers publish slices for).
pub const NODE_NAME: &str = "dpctl-node";

/// What the allocator's candidates are computed from: manifest slices,
/// published slices, the devices health streams name.
type CandidateStamp = (u64, u64, u64);

/// The objects, and the candidates last computed from them.
#[derive(Debug, Default)]
pub struct ObjectCache {
    objects: BTreeMap<String, Object>,
    /// Stamped with every change to a ResourceSlice in `objects`.
    slices_stamp: u64,
    /// The candidates last computed, with what they were computed from.
    candidates: Option<(CandidateStamp, Arc<Vec<Candidate>>)>,
}

/// Whether object `o` shapes the claims written into the control plane
/// (a claim, the template of a generated one, a class whose config goes
/// into allocations): only then does its change publish the claims.
pub fn shapes_claims(o: &Object) -> bool {
    matches!(o, Object::Claim { .. } | Object::Template { .. } | Object::Class { .. })
}

/// Where the candidates come from besides the manifests.
pub struct Sources<'a, F: FnOnce() -> (u64, Vec<Value>)> {
    /// The stamp of the published slices (0 without a control plane).
    pub published: u64,
    /// The published slices with their stamp, read at once (asked only
    /// when the candidates are computed again).
    pub read_published: F,
    /// The health cache, unless only slices count (`slices_only`).
    pub health: Option<&'a HealthCache>,
    /// The scheduler's gates.
    pub features: Features,
    /// Whether devices keep their node-operation skips (1.37+).
    pub skip_node_operations: bool,
}

impl ObjectCache {
    /// Every object, by [`Object::key`].
    pub fn all(&self) -> &BTreeMap<String, Object> {
        &self.objects
    }

    /// The object of `key`.
    pub fn get(&self, key: &str) -> Option<&Object> {
        self.objects.get(key)
    }

    /// Put an object (read or changed); whether the change shapes the
    /// claims written into the control plane ([`shapes_claims`], of the new
    /// object or the one it replaced).
    pub fn put(&mut self, obj: Object) -> bool {
        let key = obj.key();
        let new_shapes = shapes_claims(&obj);
        let old = self.objects.insert(key.clone(), obj);
        if let Some(old) = &old {
            if matches!(old, Object::Slice { .. }) {
                self.slices_stamp = crate::core::stamp();
            }
        }
        if matches!(self.objects.get(&key), Some(Object::Slice { .. })) {
            self.slices_stamp = crate::core::stamp();
        }
        new_shapes || old.as_ref().is_some_and(shapes_claims)
    }

    /// Forget the object of `key`; the object removed.
    pub fn remove(&mut self, key: &str) -> Option<Object> {
        let removed = self.objects.remove(key);
        if let Some(Object::Slice { .. }) = removed {
            self.slices_stamp = crate::core::stamp();
        }
        removed
    }

    /// Devices the allocator may hand out: those of slices (manifests and
    /// published) and those health streams name. Computed again only when
    /// one of those changed: 100 drivers × 100 devices parsed from JSON on
    /// every prepare attempt made 1,000 claims take tens of seconds.
    pub fn candidates<F: FnOnce() -> (u64, Vec<Value>)>(&mut self, from: Sources<'_, F>) -> Arc<Vec<Candidate>> {
        let health = from.health.map(|h| h.devices_stamp()).unwrap_or(0);
        let stamp = (self.slices_stamp, from.published, health);
        if let Some((s, c)) = &self.candidates {
            if *s == stamp {
                return c.clone();
            }
        }
        let (published_stamp, slices) = (from.read_published)();
        // Another node's slices are not this node's devices (a second mock
        // kubelet joins the control plane as a node of its own): the
        // scheduler filters them out for a pod on this node.
        let published: Vec<Object> = slices
            .into_iter()
            .filter(|v| v["spec"]["nodeName"].as_str().is_none_or(|n| n == NODE_NAME))
            .filter_map(|mut v| {
                v["kind"] = serde_json::json!("ResourceSlice");
                objects::parse(&v).ok()
            })
            .collect();
        let mut out = allocator::from_slices_with(self.objects.values().chain(&published), &from.features);
        if !from.skip_node_operations {
            // An alpha field (1.37+) older kubelets do not know.
            out.iter_mut().for_each(|c| c.skip.clear());
        }
        // A set, not a scan of `out` per device: 100 drivers × 100 devices
        // made this quadratic, 10^8 comparisons on every prepare attempt.
        let listed: HashSet<(&str, &str, &str)> =
            out.iter().map(|c| (c.driver.as_str(), c.pool.as_str(), c.device.as_str())).collect();
        let mut named = Vec::new();
        for (driver, (pool, device)) in from.health.into_iter().flat_map(|h| h.devices()) {
            if !listed.contains(&(driver.as_str(), pool.as_str(), device.as_str())) {
                named.push(Candidate {
                    driver: driver.clone(),
                    pool: pool.clone(),
                    device: device.clone(),
                    ..Candidate::default()
                });
            }
        }
        drop(listed);
        out.extend(named);
        let out = Arc::new(out);
        self.candidates = Some(((stamp.0, published_stamp, stamp.2), out.clone()));
        out
    }
}
