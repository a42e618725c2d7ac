//! The claims written into the control plane: after every change to the
//! claim cache (as the checkpoint is written, before any driver is called
//! for it) and to the manifests that shape claims
//! ([`crate::kubelet::dra::core::object_cache::shapes_claims`]), each claim's object as
//! this node has it is written through the control plane's client
//! interface, and the claims it no longer has are deleted.

use super::{DraManager, NODE_NAME};
use std::collections::BTreeSet;

impl DraManager {
    /// Write the claims as they are now into the control plane: each
    /// claim's object ([`Self::claim_objects`]; the store takes a write
    /// that changes nothing as none) and the deletion of each claim this
    /// manager wrote (or restored from its checkpoint) and no longer has; a
    /// claim another generation wrote stays until this one writes it (a
    /// restart does not delete and recreate the claims whose manifests are
    /// not read yet). Called after every change to the claim cache (before
    /// any driver is called for it) and to the claim manifests.
    pub(super) fn publish_claims(&self) {
        let Some(api) = &self.spec.api else { return };
        // One publisher at a time: a view computed earlier is never written over a later one.
        let mut published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let objs = self.claim_objects(NODE_NAME);
        let keys: BTreeSet<String> = objs
            .iter()
            .map(|o| {
                let m = &o["metadata"];
                format!("{}/{}", m["namespace"].as_str().unwrap_or_default(), m["name"].as_str().unwrap_or_default())
            })
            .collect();
        for o in objs {
            api.put_claim(o);
        }
        for k in published.difference(&keys) {
            api.delete_claim(k);
        }
        *published = keys;
    }
}
