//! `dpctl dra list`: the DRA plugins registered under the kubelet's root.

use super::{endpoint_here, Ctx};
use crate::client::dra::DraConn;
use crate::core::Result;
use crate::protocol::dra as rules;
use crate::render::{emit, structured, table, Format};
use serde::Serialize;

pub(super) const EXAMPLES: &str = "Examples:
  dpctl dra list
  dpctl --kubelet-root-dir /var/lib/rancher/k3s/agent/kubelet dra list -o json";

/// One registered DRA plugin, as `dra list` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// The driver name (empty when GetInfo failed).
    pub driver: String,
    /// The registration socket.
    pub registration: String,
    /// The endpoint from GetInfo.
    pub endpoint: String,
    /// supported_versions.
    pub versions: Vec<String>,
    /// live, or stale with why.
    pub state: String,
}

/// Every DRA plugin registered under the kubelet's root (and every socket that does not answer).
pub async fn list_plugins(ctx: &Ctx) -> Vec<Listed> {
    let dir = ctx.paths.plugins_registry_dir(None);
    let mut out = Vec::new();
    for sock in crate::core::transport::find_sockets(&dir) {
        let reg = sock.display().to_string();
        let conn = match DraConn::connect(&sock, ctx.timeout).await {
            Ok(c) => c,
            Err(e) => {
                out.push(Listed {
                    driver: String::new(),
                    registration: reg,
                    endpoint: String::new(),
                    versions: vec![],
                    state: format!("stale: {e}"),
                });
                continue;
            }
        };
        let info = match conn.info().await {
            Ok(i) => i,
            Err(e) => {
                out.push(Listed {
                    driver: String::new(),
                    registration: reg,
                    endpoint: String::new(),
                    versions: vec![],
                    state: format!("stale: {e}"),
                });
                continue;
            }
        };
        if info.r#type != rules::PLUGIN_TYPE {
            continue;
        }
        let state = match endpoint_here(ctx, &info, &sock) {
            Err(e) => format!("broken: {e}"),
            Ok(ep) => match DraConn::connect(&ep, ctx.timeout).await {
                Ok(_) => "live".to_string(),
                Err(e) => format!("stale: endpoint: {e}"),
            },
        };
        out.push(Listed {
            driver: info.name,
            registration: reg,
            endpoint: info.endpoint,
            versions: info.supported_versions,
            state,
        });
    }
    out
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx) -> Result<()> {
    let all = list_plugins(ctx).await;
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|l| {
                    vec![
                        if l.driver.is_empty() { "?".into() } else { l.driver.clone() },
                        l.registration.clone(),
                        l.endpoint.clone(),
                        l.versions.join(","),
                        l.state.clone(),
                    ]
                })
                .collect();
            emit(&table(&["DRIVER", "REGISTRATION", "ENDPOINT", "VERSIONS", "STATE"], &rows))
        }
        f => emit(&structured(f, &all)?),
    }
}
