//! The claims of a pod of the API server, read from it at every prepare
//! attempt as manager.go PrepareResources reads them (one GET per claim, no
//! cache): a claim the scheduler or a controller writes after the pod
//! reached the node is seen at the next attempt. The reader is the node's
//! API server client ([`crate::kubelet::cluster`]); the manager only asks.

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// One claim read: the stored object, or why not.
pub type Read<'a> = Pin<Box<dyn Future<Output = Result<Value, FetchError>> + Send + 'a>>;

/// Where the claims of pods of the API server are read.
pub trait ClaimReader: Send + Sync + std::fmt::Debug {
    /// ResourceClaim `namespace/name` as the API server stores it.
    fn claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> Read<'a>;
}

/// Why a claim could not be read.
#[derive(Debug)]
pub enum FetchError {
    /// The API server answered with an error status: its message (what
    /// client-go's StatusError says, e.g. `resourceclaims.resource.k8s.io
    /// "gpu" not found`).
    Refused {
        /// The HTTP status.
        code: u16,
        /// The Status message.
        message: String,
    },
    /// No answer (connection, TLS, credentials, timeout).
    Call(Box<crate::core::Error>),
    /// The answer is no ResourceClaim this kubelet can read.
    Invalid(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Refused { message, .. } => f.write_str(message),
            FetchError::Call(e) => write!(f, "{e}"),
            FetchError::Invalid(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Refused { .. } | FetchError::Invalid(_) => None,
            FetchError::Call(e) => Some(&**e),
        }
    }
}
