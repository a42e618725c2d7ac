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

/// A request to the status socket: `{"op":"node"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum StatusRequest {
    /// The node's status.
    Node,
}

/// The status socket's answer: `{"ok":true,"node":{…}}` or `{"ok":false,"error":"…"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusAnswer {
    /// Success.
    pub ok: bool,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The node's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeStatus>,
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
    let mut request = serde_json::to_string(&StatusRequest::Node).map_err(|e| Error::failed(e.to_string()))?;
    request.push('\n');
    let work = async {
        w.write_all(request.as_bytes()).await?;
        BufReader::new(r).lines().next_line().await
    };
    let line = match tokio::time::timeout(timeout, work).await {
        Err(_) => return Err(Error::timeout(&path, "node status", timeout)),
        Ok(Err(e)) => return Err(Error::io(&path, "node status", &e)),
        Ok(Ok(None)) => return Err(Error::failed(format!("{}: closed without answering", path.display()))),
        Ok(Ok(Some(l))) => l,
    };
    let a: StatusAnswer =
        serde_json::from_str(&line).map_err(|e| Error::failed(format!("{}: bad answer: {e}", path.display())))?;
    match a {
        StatusAnswer { ok: true, node: Some(node), .. } => Ok(node),
        StatusAnswer { error, .. } => {
            Err(Error::failed(format!("{}: {}", path.display(), error.as_deref().unwrap_or("error"))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_request_is_op_node() {
        assert_eq!(serde_json::to_string(&StatusRequest::Node).unwrap(), r#"{"op":"node"}"#);
        assert_eq!(serde_json::from_str::<StatusRequest>(r#"{"op":"node"}"#).unwrap(), StatusRequest::Node);
        assert!(serde_json::from_str::<StatusRequest>(r#"{"op":"pods"}"#).is_err());
    }
}
