//! The kubelet-side connection to one device plugin: dial, then call the
//! five DevicePlugin RPCs with a deadline each, every error naming the socket.

use crate::api::deviceplugin::{
    device_plugin_client::DevicePluginClient, AllocateRequest, AllocateResponse, DevicePluginOptions, Empty,
    ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse,
};
use crate::core::transport::{call, dial, request, status_error};
use crate::core::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::Channel;

/// A connection to a plugin's DevicePlugin service.
#[derive(Clone)]
pub struct PluginConn {
    socket: PathBuf,
    client: DevicePluginClient<Channel>,
    timeout: Duration,
}

impl PluginConn {
    /// Dial the plugin at `socket`. `max_recv` bounds a received message (the
    /// kubelet uses 4 MiB; inspection tools take more so they can report the size).
    pub async fn connect(socket: &Path, timeout: Duration, max_recv: usize) -> Result<Self> {
        let channel = dial(socket, timeout).await?;
        let client =
            DevicePluginClient::new(channel).max_decoding_message_size(max_recv).max_encoding_message_size(usize::MAX);
        Ok(PluginConn { socket: socket.to_path_buf(), client, timeout })
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
        call(
            &self.socket,
            "GetDevicePluginOptions",
            self.timeout,
            c.get_device_plugin_options(request(Empty {}, self.timeout)),
        )
        .await
    }

    /// Open ListAndWatch. The stream itself has no deadline.
    pub async fn list_and_watch(&self) -> Result<ListAndWatch> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "ListAndWatch", &Empty {});
        let stream = call(&self.socket, "ListAndWatch", self.timeout, c.list_and_watch(Empty {})).await?;
        Ok(ListAndWatch { socket: self.socket.clone(), stream, received: 0 })
    }

    /// GetPreferredAllocation.
    pub async fn preferred(&self, req: PreferredAllocationRequest) -> Result<PreferredAllocationResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "GetPreferredAllocation", &req);
        call(
            &self.socket,
            "GetPreferredAllocation",
            self.timeout,
            c.get_preferred_allocation(request(req, self.timeout)),
        )
        .await
    }

    /// Allocate.
    pub async fn allocate(&self, req: AllocateRequest) -> Result<AllocateResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "Allocate", &req);
        call(&self.socket, "Allocate", self.timeout, c.allocate(request(req, self.timeout))).await
    }

    /// PreStartContainer, with `timeout` (the kubelet uses 30 s).
    pub async fn pre_start(
        &self,
        req: PreStartContainerRequest,
        timeout: Duration,
    ) -> Result<PreStartContainerResponse> {
        let mut c = self.client.clone();
        crate::core::verbose::request(&self.socket, "PreStartContainer", &req);
        call(&self.socket, "PreStartContainer", timeout, c.pre_start_container(request(req, timeout))).await
    }
}

/// An open ListAndWatch stream.
pub struct ListAndWatch {
    socket: PathBuf,
    stream: tonic::Streaming<ListAndWatchResponse>,
    received: u64,
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
            Err(status) => Err(stream_error(&self.socket, status, self.received)),
        }
    }

    /// How many snapshots were received so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

fn stream_error(socket: &Path, status: tonic::Status, received: u64) -> Error {
    if status.code() == tonic::Code::OutOfRange || status.message().contains("message length too large") {
        return Error::failed(format!(
            "{}: ListAndWatch snapshot rejected: {} (the kubelet's receive limit is {} bytes; fewer devices or shorter IDs are needed)",
            socket.display(),
            status.message(),
            crate::api::KUBELET_MAX_RECV
        ));
    }
    match status_error(socket, "ListAndWatch", status) {
        Error::Rpc { target, method, code, message } => {
            Error::Rpc { target, method, code, message: format!("{message} (after {received} snapshot(s))") }
        }
        e => e,
    }
}
