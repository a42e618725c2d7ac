//! The kubelet-side connection to one device plugin: dial, then call the
//! five DevicePlugin RPCs with a deadline each. Failures are a typed
//! [`ConnError`] (timeout, message too large, unavailable, a status from the
//! peer), classified by what happened, never by message text; each names
//! the socket and converts into dpctl's [`Error`] with the same wording.

use crate::api::deviceplugin::{
    device_plugin_client::DevicePluginClient, AllocateRequest, AllocateResponse, DevicePluginOptions, Empty,
    ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse,
};
use crate::core::transport::{dial, request, status_error};
use crate::core::Error;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Result of a plugin call.
pub type Result<T, E = ConnError> = std::result::Result<T, E>;

/// Why a call to a plugin failed.
#[derive(Debug)]
pub enum ConnError {
    /// No answer within the deadline (ours, or the grpc-timeout we sent).
    Timeout {
        /// The plugin's socket.
        socket: PathBuf,
        /// The RPC.
        method: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// A message exceeded our receive limit.
    TooLarge {
        /// The plugin's socket.
        socket: PathBuf,
        /// The RPC.
        method: &'static str,
        /// The receive limit in bytes.
        limit: usize,
        /// The status the decoder produced.
        status: tonic::Status,
    },
    /// The plugin cannot be reached: dial failed or the connection broke.
    Unavailable {
        /// The plugin's socket.
        socket: PathBuf,
        /// The RPC (None: dialing).
        method: Option<&'static str>,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The plugin answered with an error status.
    Status {
        /// The plugin's socket.
        socket: PathBuf,
        /// The RPC.
        method: &'static str,
        /// The status.
        status: tonic::Status,
        /// For ListAndWatch: snapshots received before it.
        after_snapshots: Option<u64>,
    },
}

impl ConnError {
    /// The error as the kubelet's texts embed it: Go's `%v` of the gRPC status
    /// (a deadline is `DeadlineExceeded`), else dpctl's words.
    pub fn go_text(&self) -> String {
        use crate::protocol::go_status;
        match self {
            ConnError::Status { status, .. } => go_status(status.code(), status.message()),
            ConnError::Timeout { .. } => go_status(tonic::Code::DeadlineExceeded, "context deadline exceeded"),
            other => other.to_string(),
        }
    }

    /// The gRPC code, when the plugin (or its connection) gave one.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            ConnError::Status { status, .. } | ConnError::TooLarge { status, .. } => Some(status.code()),
            ConnError::Unavailable { method: Some(_), .. } => Some(tonic::Code::Unavailable),
            _ => None,
        }
    }

    /// Classify a failed call: the deadline passed (`elapsed >= after` with
    /// tonic's deadline code), our receive limit, a broken connection, or the peer's status.
    fn classify(
        socket: &Path,
        method: &'static str,
        after: Duration,
        elapsed: Duration,
        limit: usize,
        status: tonic::Status,
    ) -> Self {
        let socket = socket.to_path_buf();
        // Transport failures first get the code grpc-go would give them
        // (decided from the error's source chain, not its text).
        let status = crate::core::status::transport_status(status);
        match status.code() {
            // tonic ends a call whose grpc-timeout passed with CANCELLED; only the clock says it was ours.
            tonic::Code::Cancelled | tonic::Code::DeadlineExceeded if elapsed >= after => {
                ConnError::Timeout { socket, method, after }
            }
            // tonic's decoder reports a message over the receive limit as OUT_OF_RANGE
            // (the device-plugin API gives that code no other use).
            tonic::Code::OutOfRange => ConnError::TooLarge { socket, method, limit, status },
            // A broken connection and a peer saying it is unavailable mean the same to the kubelet.
            tonic::Code::Unavailable => {
                ConnError::Unavailable { socket, method: Some(method), source: Box::new(status) }
            }
            _ => ConnError::Status { socket, method, status, after_snapshots: None },
        }
    }

    /// The same failure as dpctl's user-facing [`Error`].
    pub fn to_error(&self) -> Error {
        match self {
            ConnError::Timeout { socket, method, after } => Error::timeout(socket, method, *after),
            ConnError::TooLarge { socket, method: "ListAndWatch", limit, status } => Error::failed(format!(
                "{}: ListAndWatch snapshot rejected: {} (the kubelet's receive limit is {} bytes; this connection's is {limit}; fewer devices or shorter IDs are needed)",
                socket.display(),
                status.message(),
                crate::api::KUBELET_MAX_RECV
            )),
            ConnError::TooLarge { socket, method, status, .. } => status_error(socket, method, clone_status(status)),
            ConnError::Unavailable { method: None, source, .. } => Error::failed(source.to_string()),
            ConnError::Unavailable { socket, method: Some(m), source } => match source.downcast_ref::<tonic::Status>() {
                Some(st) => status_error(socket, m, clone_status(st)),
                None => Error::failed(format!("{}: {m} failed: {source}", socket.display())),
            },
            ConnError::Status { socket, method, status, after_snapshots } => {
                match (status_error(socket, method, clone_status(status)), after_snapshots) {
                    (Error::Rpc { target, method, code, message }, Some(n)) => {
                        Error::Rpc { target, method, code, message: format!("{message} (after {n} snapshot(s))") }
                    }
                    (e, _) => e,
                }
            }
        }
    }
}

fn clone_status(s: &tonic::Status) -> tonic::Status {
    let mut st = tonic::Status::new(s.code(), s.message());
    if st.message().is_empty() {
        if let Some(src) = std::error::Error::source(s) {
            st = tonic::Status::new(s.code(), crate::core::transport::error_chain(src));
        }
    }
    st
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_error().fmt(f)
    }
}

impl std::error::Error for ConnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnError::Timeout { .. } => None,
            ConnError::TooLarge { status, .. } | ConnError::Status { status, .. } => Some(status),
            ConnError::Unavailable { source, .. } => Some(source.as_ref()),
        }
    }
}

impl From<ConnError> for Error {
    fn from(e: ConnError) -> Self {
        e.to_error()
    }
}

/// A connection to a plugin's DevicePlugin service.
#[derive(Clone)]
pub struct PluginConn {
    socket: PathBuf,
    client: DevicePluginClient<Channel>,
    timeout: Duration,
    max_recv: usize,
}

impl PluginConn {
    /// Dial the plugin at `socket`. `max_recv` bounds a received message (the
    /// kubelet uses 4 MiB; inspection tools take more so they can report the size).
    pub async fn connect(socket: &Path, timeout: Duration, max_recv: usize) -> Result<Self> {
        let channel = dial(socket, timeout).await.map_err(|e| ConnError::Unavailable {
            socket: socket.to_path_buf(),
            method: None,
            source: Box::new(e),
        })?;
        let client =
            DevicePluginClient::new(channel).max_decoding_message_size(max_recv).max_encoding_message_size(usize::MAX);
        Ok(PluginConn { socket: socket.to_path_buf(), client, timeout, max_recv })
    }

    /// Run one call with deadline `after`, classifying its failure.
    async fn call<T>(
        &self,
        method: &'static str,
        after: Duration,
        fut: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T> {
        let start = Instant::now();
        let r = match tokio::time::timeout(after, fut).await {
            Err(_) => Err(ConnError::Timeout { socket: self.socket.clone(), method, after }),
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(status)) => {
                Err(ConnError::classify(&self.socket, method, after, start.elapsed(), self.max_recv, status))
            }
        };
        if crate::core::verbose::on() {
            let code = match &r {
                Ok(_) => "OK".to_string(),
                Err(ConnError::Timeout { .. }) => "DeadlineExceeded".to_string(),
                Err(e) => match e.code() {
                    Some(c) => format!("{c:?}: {e}"),
                    None => e.to_string(),
                },
            };
            crate::core::verbose::outcome(&self.socket, method, &code, start.elapsed());
        }
        r
    }

    /// The plugin's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The raw gRPC client, for callers that forward statuses unchanged (the record tap).
    pub fn client(&self) -> DevicePluginClient<Channel> {
        self.client.clone()
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// GetDevicePluginOptions.
    pub async fn options(&self) -> Result<DevicePluginOptions> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "GetDevicePluginOptions", &Empty {});
        self.call("GetDevicePluginOptions", self.timeout, c.get_device_plugin_options(request(Empty {}, self.timeout)))
            .await
    }

    /// Open ListAndWatch. The stream itself has no deadline.
    pub async fn list_and_watch(&self) -> Result<ListAndWatch> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "ListAndWatch", &Empty {});
        let stream = self.call("ListAndWatch", self.timeout, c.list_and_watch(Empty {})).await?;
        Ok(ListAndWatch { socket: self.socket.clone(), stream, received: 0, max_recv: self.max_recv })
    }

    /// GetPreferredAllocation.
    pub async fn preferred(&self, req: PreferredAllocationRequest) -> Result<PreferredAllocationResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "GetPreferredAllocation", &req);
        self.call("GetPreferredAllocation", self.timeout, c.get_preferred_allocation(request(req, self.timeout))).await
    }

    /// Allocate.
    pub async fn allocate(&self, req: AllocateRequest) -> Result<AllocateResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "Allocate", &req);
        self.call("Allocate", self.timeout, c.allocate(request(req, self.timeout))).await
    }

    /// PreStartContainer, with `timeout` (the kubelet uses 30 s).
    pub async fn pre_start(
        &self,
        req: PreStartContainerRequest,
        timeout: Duration,
    ) -> Result<PreStartContainerResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "PreStartContainer", &req);
        self.call("PreStartContainer", timeout, c.pre_start_container(request(req, timeout))).await
    }
}

/// An open ListAndWatch stream.
pub struct ListAndWatch {
    socket: PathBuf,
    stream: tonic::Streaming<ListAndWatchResponse>,
    received: u64,
    max_recv: usize,
}

/// What the next read of a ListAndWatch stream gave.
pub enum Update {
    /// A full snapshot.
    Snapshot(ListAndWatchResponse),
    /// The plugin ended the stream cleanly.
    Closed,
}

impl ListAndWatch {
    /// The next snapshot, or the stream's end. An error status or a broken
    /// connection is an error naming the socket.
    pub async fn next(&mut self) -> Result<Update> {
        match self.stream.message().await {
            Ok(Some(m)) => {
                self.received += 1;
                Ok(Update::Snapshot(m))
            }
            Ok(None) => Ok(Update::Closed),
            Err(status) => Err(stream_error(&self.socket, status, self.received, self.max_recv)),
        }
    }

    /// How many snapshots were received so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

fn stream_error(socket: &Path, status: tonic::Status, received: u64, limit: usize) -> ConnError {
    // The stream has no deadline: a CANCELLED here is the connection's, not a timeout.
    match ConnError::classify(socket, "ListAndWatch", Duration::MAX, Duration::ZERO, limit, status) {
        ConnError::Status { socket, method, status, .. } => {
            ConnError::Status { socket, method, status, after_snapshots: Some(received) }
        }
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn failures_are_classified_by_kind_not_text() {
        let p = Path::new("/x/p.sock");
        let t = Duration::from_secs(1);
        // tonic's own deadline: CANCELLED once the time is up
        let e = ConnError::classify(p, "Allocate", t, t, 10, tonic::Status::cancelled("Timeout expired"));
        assert!(matches!(e, ConnError::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains("Allocate timed out after 1s"), "{e}");
        // the same text from the peer, early, is the peer's status
        let e = ConnError::classify(p, "Allocate", t, Duration::ZERO, 10, tonic::Status::cancelled("Timeout expired"));
        assert!(matches!(e, ConnError::Status { .. }), "{e:?}");
        assert_eq!(e.code(), Some(tonic::Code::Cancelled));
        // a message over the receive limit, whatever its text
        let e = ConnError::classify(p, "ListAndWatch", t, Duration::ZERO, 10, tonic::Status::out_of_range("x"));
        assert!(matches!(e, ConnError::TooLarge { limit: 10, .. }), "{e:?}");
        assert!(e.to_string().contains("receive limit"), "{e}");
        assert!(e.source().is_some());
        // a status with any text is a status
        let e = ConnError::classify(
            p,
            "Allocate",
            t,
            Duration::ZERO,
            10,
            tonic::Status::internal("message length too large"),
        );
        assert!(matches!(e, ConnError::Status { .. }), "{e:?}");
        assert_eq!(e.to_string(), "/x/p.sock: Allocate failed: Internal: message length too large");
        let core: Error = e.into();
        assert_eq!(core.code(), Some(tonic::Code::Internal));
        // unavailable: the code, not the text, decides
        let e = ConnError::classify(p, "Allocate", t, Duration::ZERO, 10, tonic::Status::unavailable("anything"));
        assert!(matches!(e, ConnError::Unavailable { method: Some("Allocate"), .. }), "{e:?}");
        assert_eq!(e.code(), Some(tonic::Code::Unavailable));
        assert_eq!(e.to_string(), "/x/p.sock: Allocate failed: Unavailable: anything");
    }

    #[tokio::test]
    async fn a_missing_socket_is_unavailable_with_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let e =
            PluginConn::connect(&dir.path().join("none.sock"), Duration::from_secs(1), 1 << 20).await.err().unwrap();
        assert!(matches!(e, ConnError::Unavailable { method: None, .. }), "{e:?}");
        assert!(e.to_string().contains("no such socket"), "{e}");
        assert!(e.source().is_some());
    }
}
