//! The claim checkpoint, written coalesced ([`crate::core::coalesced`]).
//! Every change to the claim cache takes a number (`claims_file.changed()`,
//! under the state lock, after the change); a caller that must see its change
//! on disk — a claim is recorded before its driver is called (manager.go
//! checkpoints before NodePrepareResources) — waits in
//! [`DraManager::persist`] for a write that covers its number: N concurrent
//! prepares cost a handful of fsynced writes, not N (and not N whole-file
//! writes under the state lock).

use super::{checkpoint, Cause, DraManager};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

impl DraManager {
    /// Return once the checkpoint on disk holds change `upto` (and every
    /// change before it). A failed write is that caller's error; the callers
    /// behind it write again.
    pub(super) async fn persist(&self, upto: u64) -> Result<(), Cause> {
        self.persist_timed(upto).await.map(drop)
    }

    /// [`Self::persist`], and how long the caller waited for the disk: the
    /// whole wait (a write ahead of its own included) less the time its own
    /// snapshot took to take and encode, which is dpctl's work, not the disk's.
    pub(super) async fn persist_timed(&self, upto: u64) -> Result<Duration, Cause> {
        let started = Instant::now();
        let encoding_ns = AtomicU64::new(0);
        let path = self.spec.checkpoint();
        let target = path.clone();
        let snapshot = || {
            let t = Instant::now();
            // Under the state lock: only the claims changed since the last
            // write are encoded again; the rest is assembling their pieces.
            let bytes = {
                let mut st = self.lock();
                let bytes = st.claims.cache.checkpoint_bytes();
                // Every debug build (every test) holds the pieces to the whole encoding.
                debug_assert_eq!(
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&checkpoint::encode(&st.claims.cache.to_checkpoint()))
                );
                bytes
            };
            // The control plane learns of the change as the checkpoint does:
            // before any driver is called for it.
            self.publish_claims();
            encoding_ns.store(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX), Relaxed);
            Some(bytes)
        };
        let write = move |bytes: Vec<u8>| {
            // As the kubelet's checkpoint manager writes it (the file synced, not its directory).
            crate::core::files::write_atomic_with(&target, &bytes, crate::core::files::Durability::File)
        };
        self.claims_file.write(upto, snapshot, write).await.map_err(|source| Cause::Checkpoint { path, source })?;
        Ok(started.elapsed().saturating_sub(Duration::from_nanos(encoding_ns.load(Relaxed))))
    }
}
