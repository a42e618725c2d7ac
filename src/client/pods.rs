//! A client of the kubelet's pods API (pods/v1alpha1, KEP-4188) on
//! `<kubelet-root>/pods-api/pods-api.sock`.

use crate::api::pods_v1alpha1::pods_client::PodsClient;
use crate::core::transport::dial_hint;
use crate::core::Result;
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;

/// What points dpctl at the pods API socket, and why it may be absent.
pub const PODS_API_FIX: &str = "the kubelet serves the pods API on <root-dir>/pods-api/pods-api.sock only with the \
     PodsAPI feature gate (alpha, off, in 1.36; beta, on, from 1.37; absent before 1.36); pass --socket or set \
     DPCTL_PODS_API_SOCKET";

/// Dial the pods API socket (answers up to `max_recv` bytes); a missing
/// socket says which kubelets serve it.
pub async fn connect(socket: &Path, timeout: Duration, max_recv: usize) -> Result<PodsClient<Channel>> {
    Ok(PodsClient::new(dial_hint(socket, timeout, PODS_API_FIX).await?).max_decoding_message_size(max_recv))
}
