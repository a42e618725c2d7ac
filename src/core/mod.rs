//! The protocol core every subcommand shares: transport (dial, safe listen,
//! serve), the HTTP/2 `:authority` shim, validation, paths, errors, time,
//! and capping/escaping of echoed text.
pub mod authority;
pub mod error;
pub mod files;
pub mod limits;
pub mod log;
pub mod paths;
pub mod status;
pub mod text;
pub mod time;
pub mod transport;
pub mod validate;
pub mod verbose;

pub use error::{Error, Result};

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
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
