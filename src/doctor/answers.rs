//! What doctor got from a kubelet API or a plugin-watcher socket: shared by
//! the facts (which gather them) and the finding kinds (which judge them).

use crate::core::transport::Connect;
use std::path::PathBuf;

/// The result of reaching a kubelet API: its answer, the connect result
/// when the socket did not answer, or the call's error.
#[derive(Debug, Clone)]
pub enum Got<T> {
    /// The answer.
    Yes(T),
    /// The socket did not answer.
    Connect(Connect),
    /// It answered with an error (or hung).
    Failed(String),
}

impl<T> Got<T> {
    /// The answer, if any.
    pub fn ok(&self) -> Option<&T> {
        match self {
            Got::Yes(t) => Some(t),
            _ => None,
        }
    }
}

/// A plugin-watcher socket and its GetInfo answer `(type, name, endpoint)`.
#[derive(Debug, Clone)]
pub struct Watcher {
    /// The socket.
    pub socket: PathBuf,
    /// GetInfo's answer.
    pub info: Got<(String, String, String)>,
}
