//! A PodResources client: the kubelet's `pod-resources/kubelet.sock`.

use crate::api::podresources::pod_resources_lister_client::PodResourcesListerClient;
use crate::core::transport::dial_hint;
use crate::core::Result;
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;

/// What points dpctl at the PodResources socket.
pub const POD_RESOURCES_FIX: &str =
    "pass --socket or set DPCTL_POD_RESOURCES_SOCKET; with --plugin-dir DIR it is DIR/../pod-resources/kubelet.sock";

/// Dial the PodResources socket (answers up to `max_recv` bytes); a missing
/// socket names the flag that fixes it.
pub async fn connect(socket: &Path, timeout: Duration, max_recv: usize) -> Result<PodResourcesListerClient<Channel>> {
    Ok(PodResourcesListerClient::new(dial_hint(socket, timeout, POD_RESOURCES_FIX).await?)
        .max_decoding_message_size(max_recv))
}
