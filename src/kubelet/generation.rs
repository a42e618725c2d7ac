//! A generation of the mock kubelet: everything one run (until a restart or
//! shutdown) starts is a task on its tracker, cancelled by its token.

use std::future::Future;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// One generation of the mock kubelet: a cancellation token and a tracker
/// that every task of the generation is spawned on.
#[derive(Clone, Default)]
pub struct Generation {
    /// 0 for the first start, then one more per restart.
    pub number: u64,
    /// Cancelled when the generation ends.
    pub token: CancellationToken,
    /// Holds every task of the generation.
    pub tracker: TaskTracker,
}

impl Generation {
    /// Generation `number`.
    pub fn new(number: u64) -> Self {
        Generation { number, token: CancellationToken::new(), tracker: TaskTracker::new() }
    }

    /// Run `f` as a task of this generation; it is dropped when the generation ends.
    pub fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = f => {}
                _ = token.cancelled() => {}
            }
        });
    }

    /// Cancel every task and wait until all of them are gone.
    pub async fn end(&self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}
