//! The protocol core every subcommand shares: transport (dial, safe listen,
//! serve), the HTTP/2 `:authority` shim, validation, paths, errors, time,
//! and capping/escaping of echoed text.
pub mod authority;
pub mod coalesced;
pub mod control;
pub mod error;
pub mod fasthash;
pub mod files;
pub mod limits;
pub mod log;
pub mod paths;
pub mod status;
pub mod task;
pub mod text;
pub mod time;
pub mod tls;
pub mod transport;
pub mod validate;
pub mod verbose;

pub use error::{Error, Result};

/// A number no other call in this process returns (never 0): stamps what a
/// cache was computed from, so a stamp seen before means nothing changed.
pub fn stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when
/// this is called, not when it is first polled, so a signal that arrives in
/// between is not lost (nor does it kill the process with work half done).
pub fn interrupted() -> impl std::future::Future<Output = ()> + Send {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut t), Ok(mut i)) => {
                tokio::select! {
                    _ = t.recv() => {}
                    _ = i.recv() => {}
                }
            }
            // Without signal handlers, never resolve: the default actions still apply.
            _ => std::future::pending().await,
        }
    }
}
