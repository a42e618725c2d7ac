//! The claim checkpoint, written coalesced ([`crate::core::coalesced`]).
//! Every change to the claim cache takes a number (`claims_file.changed()`,
//! under the state lock, after the change); a caller that must see its change
//! on disk — a claim is recorded before its driver is called (manager.go
//! checkpoints before NodePrepareResources) — waits in
//! [`DraManager::persist`] for a write that covers its number: N concurrent
//! prepares cost a handful of fsynced writes, not N (and not N whole-file
//! writes under the state lock).

use super::{checkpoint, Cause, DraManager};

impl DraManager {
    /// Return once the checkpoint on disk holds change `upto` (and every
    /// change before it). A failed write is that caller's error; the callers
    /// behind it write again.
    pub(super) async fn persist(&self, upto: u64) -> Result<(), Cause> {
        let path = self.spec.checkpoint();
        let target = path.clone();
        let snapshot = || {
            // The entries taken under the state lock, encoded off it.
            let entries = self.lock().claims.to_checkpoint();
            let bytes = checkpoint::encode(&entries);
            // The control plane learns of the change as the checkpoint does:
            // before any driver is called for it.
            self.publish_claims();
            Some(bytes)
        };
        let write = move |bytes: Vec<u8>| {
            // As the kubelet's checkpoint manager writes it (the file synced, not its directory).
            crate::core::files::write_atomic_with(&target, &bytes, crate::core::files::Durability::File)
        };
        self.claims_file.write(upto, snapshot, write).await.map_err(|source| Cause::Checkpoint { path, source })
    }
}
