//! Coalesced writes of a file that follows changing state (group commit):
//! a [`CoalescedWriter`] owns the change counter and the mark of what the
//! file holds. Every change takes a number ([`CoalescedWriter::changed`]); a
//! caller that must see its change on disk waits in
//! [`CoalescedWriter::write`] for a write that covers its number. One write
//! snapshots every change noted before it began, so the callers queued behind
//! a write in progress are all covered by the next one: N concurrent changes
//! cost a handful of writes, not N. The write runs on the blocking pool,
//! never on a runtime worker, and writes are ordered (one at a time).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// The blocking write ended without an answer (it panicked, or the runtime
/// is shutting down).
#[derive(Debug)]
pub struct WriterLost(tokio::task::JoinError);

impl std::fmt::Display for WriterLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the file writer ended without finishing: {}", self.0)
    }
}

impl std::error::Error for WriterLost {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<WriterLost> for std::io::Error {
    fn from(e: WriterLost) -> Self {
        std::io::Error::other(e)
    }
}

impl From<WriterLost> for crate::core::Error {
    fn from(e: WriterLost) -> Self {
        crate::core::Error::failed_from(e)
    }
}

/// The change counter and the written mark of one file.
#[derive(Debug, Default)]
pub struct CoalescedWriter {
    /// The number of the last change noted.
    changes: AtomicU64,
    /// The last change the file holds; only raised while `writing` is held
    /// (or before any write, by [`CoalescedWriter::holds`]).
    written: AtomicU64,
    /// Held while a write is in progress, so writes are ordered.
    writing: tokio::sync::Mutex<()>,
    /// Writes on the blocking pool not finished yet — also one whose caller
    /// stopped waiting (its task cancelled): [`CoalescedWriter::settled`].
    pending: Arc<Pending>,
}

/// The count of unfinished blocking writes, and a wake-up when one ends.
#[derive(Debug, Default)]
struct Pending {
    count: AtomicUsize,
    ended: tokio::sync::Notify,
}

/// Counts one blocking write until it ends (returns or panics).
struct PendingWrite(Arc<Pending>);

impl PendingWrite {
    fn start(p: &Arc<Pending>) -> PendingWrite {
        p.count.fetch_add(1, SeqCst);
        PendingWrite(p.clone())
    }
}

impl Drop for PendingWrite {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, SeqCst);
        self.0.ended.notify_waiters();
    }
}

impl CoalescedWriter {
    /// A writer whose file holds no change yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Note a change, once it is made (a snapshot taken after this call
    /// must include it); returns the number a write must cover.
    pub fn changed(&self) -> u64 {
        self.changes.fetch_add(1, SeqCst) + 1
    }

    /// Note that every change up to `n` is made, for state that numbers its
    /// changes itself (a version); returns the last change noted.
    pub fn changed_up_to(&self, n: u64) -> u64 {
        self.changes.fetch_max(n, SeqCst).max(n)
    }

    /// The file holds change `n` and every change before it (it was just
    /// read from the file, at restore).
    pub fn holds(&self, n: u64) {
        self.changes.fetch_max(n, SeqCst);
        self.written.fetch_max(n, SeqCst);
    }

    /// Return once the file holds change `upto` (and every change before it).
    /// If no write covering it has been made, the caller writes: `snapshot`
    /// takes the state (None: nothing is to be written now, and nothing is
    /// marked written), then `write` puts it in the file on the blocking
    /// pool. A failed write is this caller's error and marks nothing written,
    /// so the next caller writes again.
    pub async fn write<T, E>(
        &self,
        upto: u64,
        snapshot: impl FnOnce() -> Option<T>,
        write: impl FnOnce(T) -> Result<(), E> + Send + 'static,
    ) -> Result<(), E>
    where
        T: Send + 'static,
        E: From<WriterLost> + Send + 'static,
    {
        let _writing = self.writing.lock().await;
        if self.written.load(SeqCst) >= upto {
            return Ok(());
        }
        // Every change numbered up to `covers` was made before it was noted,
        // so before this snapshot.
        let covers = self.changes.load(SeqCst);
        let Some(state) = snapshot() else { return Ok(()) };
        let pending = PendingWrite::start(&self.pending);
        tokio::task::spawn_blocking(move || {
            let _pending = pending;
            write(state)
        })
        .await
        .map_err(|e| E::from(WriterLost(e)))??;
        self.written.fetch_max(covers, SeqCst);
        Ok(())
    }

    /// Return once no write is on the blocking pool: one whose caller was
    /// cancelled goes on to its end, and whoever owns the file's directory
    /// (a temp tree removed after the kubelet stops) waits for it here.
    pub async fn settled(&self) {
        loop {
            let ended = self.pending.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.pending.count.load(SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A state (a number) and the file (every value written, in order).
    #[derive(Default)]
    struct File {
        state: AtomicU64,
        writes: Mutex<Vec<u64>>,
    }

    impl File {
        fn change(&self, w: &CoalescedWriter) -> u64 {
            self.state.fetch_add(1, SeqCst);
            w.changed()
        }
        fn writes(&self) -> Vec<u64> {
            self.writes.lock().unwrap().clone()
        }
    }

    async fn write_plain(w: &CoalescedWriter, f: &Arc<File>, upto: u64) -> std::io::Result<()> {
        let file = f.clone();
        w.write(
            upto,
            || Some(f.state.load(SeqCst)),
            move |v| {
                file.writes.lock().unwrap().push(v);
                Ok(())
            },
        )
        .await
    }

    /// A write whose caller was cancelled (its generation's tasks stopped)
    /// still runs on the blocking pool; `settled` returns only after it ended.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn settled_waits_for_a_write_whose_caller_was_cancelled() {
        let w = Arc::new(CoalescedWriter::new());
        let upto = w.changed();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let done = Arc::new(AtomicU64::new(0));
        let (w2, d2) = (w.clone(), done.clone());
        let caller = tokio::spawn(async move {
            w2.write(
                upto,
                || Some(()),
                move |()| {
                    let _ = started_tx.send(());
                    let _ = release_rx.recv();
                    d2.store(1, SeqCst);
                    Ok::<(), std::io::Error>(())
                },
            )
            .await
        });
        started_rx.await.unwrap();
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        let settled = tokio::spawn({
            let w = w.clone();
            async move { w.settled().await }
        });
        tokio::task::yield_now().await;
        assert!(!settled.is_finished(), "the write is still running");
        release_tx.send(()).unwrap();
        settled.await.unwrap();
        assert_eq!(done.load(SeqCst), 1, "settled returned after the write ended");
        w.settled().await;
    }

    #[tokio::test]
    async fn callers_queued_behind_a_write_are_covered_by_one_write() {
        let (w, f) = (CoalescedWriter::new(), Arc::new(File::default()));
        let first = f.change(&w);
        // The first write blocks in the file until released, so the next
        // changes are noted while it is in progress.
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let file = f.clone();
        let a = w.write(
            first,
            || Some(f.state.load(SeqCst)),
            move |v| {
                let _ = started_tx.send(());
                release_rx.recv().map_err(std::io::Error::other)?;
                file.writes.lock().unwrap().push(v);
                Ok::<_, std::io::Error>(())
            },
        );
        let rest = async {
            started_rx.await.unwrap();
            let (b, c) = (f.change(&w), f.change(&w));
            let (wb, wc) = (write_plain(&w, &f, b), write_plain(&w, &f, c));
            release_tx.send(()).unwrap();
            let (rb, rc) = tokio::join!(wb, wc);
            (rb.unwrap(), rc.unwrap())
        };
        let (ra, _) = tokio::join!(a, rest);
        ra.unwrap();
        assert_eq!(f.writes(), [1, 3], "one write for the change in progress, one for the two behind it");
        write_plain(&w, &f, 3).await.unwrap();
        assert_eq!(f.writes().len(), 2, "a change already on disk is not written again");
    }

    #[tokio::test]
    async fn a_failed_write_is_its_callers_error_and_the_next_caller_writes_again() {
        let (w, f) = (CoalescedWriter::new(), Arc::new(File::default()));
        let n = f.change(&w);
        let failed = w.write(n, || Some(()), |()| Err(std::io::Error::other("disk full"))).await;
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert!(f.writes().is_empty());
        write_plain(&w, &f, n).await.unwrap();
        assert_eq!(f.writes(), [1], "the change is written by the next caller");
    }

    #[tokio::test]
    async fn nothing_to_write_marks_nothing_and_a_restored_file_is_not_rewritten() {
        let (w, f) = (CoalescedWriter::new(), Arc::new(File::default()));
        let n = f.change(&w);
        w.write(n, || None::<u64>, |_| Ok::<_, std::io::Error>(())).await.unwrap();
        write_plain(&w, &f, n).await.unwrap();
        assert_eq!(f.writes(), [1], "a skipped snapshot leaves the change to the next write");
        let restored = CoalescedWriter::new();
        restored.holds(5);
        assert_eq!(restored.changed_up_to(5), 5);
        write_plain(&restored, &f, 5).await.unwrap();
        assert_eq!(f.writes(), [1], "what was just read is what the file holds");
        assert_eq!(restored.changed_up_to(6), 6);
        write_plain(&restored, &f, 6).await.unwrap();
        assert_eq!(f.writes(), [1, 1], "a newer version is written");
    }
}
