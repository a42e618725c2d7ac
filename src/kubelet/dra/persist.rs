//! Coalesced checkpoint writes (group commit). Every change to the claim
//! cache takes a number ([`DraManager::changed_claims`]); a caller that must
//! see its change on disk — a claim is recorded before its driver is called
//! (manager.go checkpoints before NodePrepareResources) — waits in
//! [`DraManager::persist`] for a write that covers its number. One write
//! snapshots every change made so far, so the callers that queued behind a
//! write in progress are all covered by the next one: N concurrent prepares
//! cost a handful of fsynced writes, not N (and not N whole-file writes under
//! the state lock).

use super::{checkpoint, Cause, DraManager, State};

impl DraManager {
    /// Note a change to the claim cache: the number a write must cover.
    pub(super) fn changed_claims(st: &mut State) -> u64 {
        st.recorded += 1;
        st.recorded
    }

    /// Return once the checkpoint on disk holds change `upto` (and every
    /// change before it). A failed write is that caller's error; the callers
    /// behind it write again.
    pub(super) async fn persist(&self, upto: u64) -> Result<(), Cause> {
        let mut written = self.written.lock().await;
        if *written >= upto {
            return Ok(());
        }
        let (bytes, covers) = {
            let st = self.lock();
            (checkpoint::encode(&st.claims.to_checkpoint()), st.recorded)
        };
        // The control plane learns of the change as the checkpoint does:
        // before any driver is called for it.
        self.publish_claims();
        let path = self.spec.checkpoint();
        let target = path.clone();
        let done = tokio::task::spawn_blocking(move || crate::core::files::write_atomic(&target, &bytes))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
        done.map_err(|source| Cause::Checkpoint { path, source })?;
        *written = covers;
        Ok(())
    }
}
