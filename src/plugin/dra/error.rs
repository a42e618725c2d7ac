//! The errors of the DRA driver's claims, made where they are made and
//! shown to the kubelet as a claim's `error`: a claim refused
//! ([`ClaimError`]), a fetch of it that failed ([`FetchError`]), a file of
//! it that could not be written ([`FileError`]).

use super::metadata;
use std::path::PathBuf;

/// Why a claim is not prepared (or unprepared): the answer's `error`, as
/// the kubelet shows it.
#[derive(Debug)]
pub enum ClaimError {
    /// The API server's claim of that name has another UID (re-created).
    UidMismatch {
        /// `namespace/name`.
        claim: String,
        /// The API server's UID.
        found: String,
        /// The kubelet's.
        asked: String,
    },
    /// The claim has no `status.allocation`.
    NotAllocated {
        /// `namespace/name`.
        claim: String,
    },
    /// An opaque config's parameters are not a JSON object.
    Parameters {
        /// `namespace/name`.
        claim: String,
        /// The config's index in the allocation.
        index: usize,
        /// `admin` (the class's) or `user` (the claim's).
        kind: &'static str,
        /// The parameters as they are.
        parameters: String,
    },
    /// The allocation names no device of this driver.
    NoDeviceOfDriver {
        /// `namespace/name`.
        claim: String,
        /// The driver.
        driver: String,
    },
    /// An allocated device is not one this driver has.
    ForeignDevice {
        /// `namespace/name`.
        claim: String,
        /// The allocation's `pool/device`.
        device: String,
        /// The driver's pool.
        pool: String,
        /// The driver's devices, listed.
        devices: String,
    },
    /// Every device is prepared for other claims (no API server: the driver chooses).
    NoFreeDevice {
        /// The pool.
        pool: String,
        /// How many devices it has.
        count: usize,
    },
    /// The kubelet's claim lacks its namespace, UID or name.
    MissingFields,
    /// Preparing again is refused (`not-idempotent-error`).
    AlreadyPrepared {
        /// `namespace/name`.
        claim: String,
    },
    /// The error `prepare-error=MESSAGE` gives every claim.
    Injected(String),
    /// The claim could not be fetched from the API server.
    Fetch(FetchError),
    /// A file of the claim's could not be written.
    File(FileError),
    /// The claim's CDI spec could not be removed.
    Remove {
        /// The spec file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The claim's device metadata could not be removed.
    Metadata(metadata::MetadataError),
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimError::UidMismatch { claim, found, asked } => write!(
                f,
                "claim {claim}: the API server has UID {found:?}, the kubelet asked for {asked:?} (a claim of the same name was re-created)"
            ),
            ClaimError::NotAllocated { claim } => write!(f, "claim {claim}: not allocated (no status.allocation)"),
            ClaimError::Parameters { claim, index, kind, parameters } => write!(
                f,
                "claim {claim}: parameters in config #{index}: decoding {kind} parameters: not a JSON object: {parameters}"
            ),
            ClaimError::NoDeviceOfDriver { claim, driver } => {
                write!(f, "claim {claim}: its allocation has no device of driver {driver}")
            }
            ClaimError::ForeignDevice { claim, device, pool, devices } => write!(
                f,
                "claim {claim}: allocated device {device} is not one of this driver's (pool {pool}: {devices})"
            ),
            ClaimError::NoFreeDevice { pool, count } => {
                write!(f, "no free device in pool {pool}: all {count} are prepared for other claims")
            }
            ClaimError::MissingFields => f.write_str("the claim's namespace, uid and name are all required"),
            ClaimError::AlreadyPrepared { claim } => write!(f, "claim {claim} is already prepared"),
            ClaimError::Injected(m) => f.write_str(m),
            ClaimError::Fetch(e) => e.fmt(f),
            ClaimError::File(e) => e.fmt(f),
            ClaimError::Remove { path, source } => write!(f, "cannot remove CDI spec {path}: {source}"),
            ClaimError::Metadata(e) => write!(f, "clean up device metadata: {e}"),
        }
    }
}

impl std::error::Error for ClaimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClaimError::Fetch(e) => Some(e),
            ClaimError::File(e) => Some(e),
            ClaimError::Remove { source, .. } => Some(source),
            ClaimError::Metadata(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a file of the driver's (a CDI spec, the `answer-from-checkpoint`
/// checkpoint) could not be written; the claim's error says it.
#[derive(Debug)]
pub enum FileError {
    /// The CDI spec directory could not be made.
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The content could not be encoded.
    Encode(serde_json::Error),
    /// The file could not be written.
    Write {
        /// `CDI spec` or `the checkpoint`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::CreateDir { dir, source } => write!(f, "cannot create CDI spec dir {}: {source}", dir.display()),
            FileError::Encode(e) => e.fmt(f),
            FileError::Write { what, path, source } => write!(f, "cannot write {what} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::CreateDir { source, .. } | FileError::Write { source, .. } => Some(source),
            FileError::Encode(e) => Some(e),
        }
    }
}

/// Why a ResourceClaim could not be fetched from the API server.
#[derive(Debug)]
pub enum FetchError {
    /// The request failed (connection, TLS, deadline).
    Request {
        /// `namespace/name`.
        claim: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The API server has no claim of that name (NotFound).
    NotFound {
        /// `namespace/name`.
        claim: String,
        /// The API server's message.
        message: String,
    },
    /// The API server answered another status.
    Status {
        /// `namespace/name`.
        claim: String,
        /// The HTTP status.
        status: u16,
        /// The API server's message.
        message: String,
    },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Request { claim, source } => write!(f, "fetch ResourceClaim {claim}: {source}"),
            FetchError::NotFound { claim, message } => write!(f, "fetch ResourceClaim {claim}: {message} (NotFound)"),
            FetchError::Status { claim, status, message } => {
                write!(f, "fetch ResourceClaim {claim}: the API server answered {status} {message}")
            }
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Request { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
