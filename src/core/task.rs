//! One task model for every role: a [`Tasks`] owns a group of tasks — a
//! cancellation token and a tracker. Whoever starts a task spawns it on the
//! group it owns; stopping the group cancels every task and waits until all
//! of them are gone. There is no other way to start a task and no other
//! stop signal (no bare `tokio::spawn`, no `watch<bool>`).

use std::future::Future;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A group of tasks with one owner.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Tasks {
    /// A new, independent group.
    pub fn new() -> Self {
        Self::default()
    }

    /// A group that is cancelled with this one (and can be cancelled alone),
    /// with its own tracker so its owner can await just its tasks.
    pub fn child(&self) -> Tasks {
        Tasks { token: self.token.child_token(), tracker: TaskTracker::new() }
    }

    /// Run `f` until it ends or the group is cancelled (then it is dropped).
    pub fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn(self.token.clone().run_until_cancelled_owned(f));
    }

    /// Run `f` to its end as a task of the group, for a result its owner
    /// awaits; `f` must watch [`Tasks::cancelled`] itself to stop early.
    pub fn spawn_joined<T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
        self.tracker.spawn(f)
    }

    /// Run `f` in place as work of the group: [`Tasks::stop`] waits for it;
    /// `None` if the group is cancelled first (then `f` is dropped).
    pub async fn run<T>(&self, f: impl Future<Output = T>) -> Option<T> {
        self.tracker.track_future(self.token.run_until_cancelled(f)).await
    }

    /// The group's tracker, for an API that takes a token and a tracker
    /// (tasks spawned on it are awaited by [`Tasks::stop`]).
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// The group's cancellation token.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Resolves once the group is cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await
    }

    /// Whether the group is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Ask every task to stop, without waiting.
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Cancel every task and wait until all of them are gone.
    pub async fn stop(&self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Wait (without cancelling) until every task has ended by itself.
    pub async fn join(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// No task of the group is running.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

/// Drive `fut` (whose tasks belong to `tasks`); on SIGINT or SIGTERM cancel
/// the group and let `fut` finish its shutdown.
pub async fn until_interrupted<T>(tasks: &Tasks, fut: impl Future<Output = T>) -> T {
    let interrupted = crate::core::interrupted();
    tokio::pin!(fut);
    tokio::select! {
        r = &mut fut => r,
        _ = interrupted => {
            tasks.cancel();
            fut.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn stopping_a_group_cancels_and_awaits_its_tasks_and_its_children() {
        let tasks = Tasks::new();
        let child = tasks.child();
        let (a, b) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (fa, fb) = (Flag(a.clone()), Flag(b.clone()));
        tasks.spawn(async move {
            let _f = fa;
            std::future::pending::<()>().await
        });
        let c2 = child.clone();
        let joined = child.spawn_joined(async move {
            let _f = fb;
            c2.cancelled().await;
            7
        });
        tasks.stop().await;
        assert!(a.load(Ordering::SeqCst) && tasks.is_empty(), "the group's task was dropped before stop returned");
        assert!(child.is_cancelled(), "a child group is cancelled with its parent");
        assert_eq!(joined.await.unwrap(), 7);
        child.join().await;
        assert!(b.load(Ordering::SeqCst) && child.is_empty());
    }
}
