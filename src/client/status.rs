//! The mock kubelet's status socket (what `dpctl node` reads): one JSON
//! request line, one JSON answer line.

use crate::core::paths::status_socket;
use crate::core::transport::connect_raw;
use crate::core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// What `dpctl node` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Resources.
    pub resources: Vec<Value>,
    /// Admitted pods.
    pub pods: Vec<Value>,
    /// Rejected manifests: file → the kubelet's message.
    pub rejected: BTreeMap<String, String>,
    /// Rejected manifests: file → the pod status reason (`UnexpectedAdmissionError`, …).
    #[serde(default)]
    pub rejected_reasons: BTreeMap<String, String>,
    /// The kubelet version the mock behaves as.
    #[serde(default)]
    pub kubelet_version: String,
    /// The plugin directory.
    pub plugin_dir: String,
    /// Registered DRA drivers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dra_drivers: Vec<Value>,
    /// ResourceClaims the kubelet knows (allocated, prepared, used by pods).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Value>,
    /// Pods with resource claims and their DRA phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dra_pods: Vec<Value>,
    /// Each pod's lifecycle: the step it is at, its phase, why it waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifecycle: Vec<Value>,
}

/// Read the status of the mock kubelet that owns `plugin_dir`.
pub async fn fetch(plugin_dir: &Path, timeout: Duration) -> Result<NodeStatus> {
    let path = status_socket(plugin_dir);
    let stream = connect_raw(&path, timeout).await.map_err(|e| {
        Error::failed(format!(
            "{e} — no dpctl mock-kubelet owns {}; start one or pass --plugin-dir",
            plugin_dir.display()
        ))
    })?;
    let (r, mut w) = stream.into_split();
    let work = async {
        w.write_all(b"{\"op\":\"node\"}\n").await?;
        BufReader::new(r).lines().next_line().await
    };
    let line = match tokio::time::timeout(timeout, work).await {
        Err(_) => return Err(Error::timeout(&path, "node status", timeout)),
        Ok(Err(e)) => return Err(Error::io(&path, "node status", &e)),
        Ok(Ok(None)) => return Err(Error::failed(format!("{}: closed without answering", path.display()))),
        Ok(Ok(Some(l))) => l,
    };
    let v: Value =
        serde_json::from_str(&line).map_err(|e| Error::failed(format!("{}: bad answer: {e}", path.display())))?;
    if v["ok"] != true {
        return Err(Error::failed(format!("{}: {}", path.display(), v["error"].as_str().unwrap_or("error"))));
    }
    serde_json::from_value(v["node"].clone()).map_err(|e| Error::failed(format!("{}: bad answer: {e}", path.display())))
}
