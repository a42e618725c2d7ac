//! Live control of a running `dpctl serve`: a Unix socket speaking JSON
//! lines, in `<plugin-dir>/dpctl-control/` (a subdirectory, so a kubelet
//! restart — which deletes the sockets in the plugin directory — leaves it).
//! One request per line, one answer per line:
//!
//! ```text
//! {"op":"list"}
//! {"op":"set-health","resource":"vendor.example/foo","ids":["foo-1"],"health":"Unhealthy"}
//! {"op":"add","ids":["foo-9"],"numa":1,"health":"Healthy"}
//! {"op":"remove","ids":["foo-9"]}
//! ```
//!
//! Answers: `{"ok":true,"resources":[{"resource":…,"socket":…,"devices":[…]}]}`
//! or `{"ok":false,"error":"…"}`.

use crate::api::deviceplugin::{Device, NumaNode, TopologyInfo};
use crate::core::control::Handler;
use crate::core::log::Logger;
use crate::core::text::{cap_words, id_list, quote};
use crate::core::Result;
use crate::plugin::devices::Inventory;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::core::paths::CONTROL_DIR;

/// The file-name prefix of `dpctl serve` control sockets (what `dpctl device` looks for).
pub const SERVE_PREFIX: &str = "serve-";

/// The default control socket of this process.
pub fn default_socket(plugin_dir: &Path) -> PathBuf {
    plugin_dir.join(CONTROL_DIR).join(format!("{SERVE_PREFIX}{}.sock", std::process::id()))
}

/// One served resource, as live control sees it.
#[derive(Clone)]
pub struct Entry {
    /// Its devices.
    pub inventory: Inventory,
    /// The socket it serves on now.
    pub socket: Arc<Mutex<PathBuf>>,
}

/// A control request to `dpctl serve`: `{"op":"list"}`,
/// `{"op":"set-health",…}`, `{"op":"add",…}` or `{"op":"remove",…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// The resources and their devices (all, or the one named).
    List {
        /// Only this resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
    },
    /// Set devices Healthy or Unhealthy.
    SetHealth {
        /// Which resource (optional when only one is served).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        /// Device IDs.
        #[serde(default)]
        ids: Vec<String>,
        /// `Healthy` or `Unhealthy`.
        health: String,
    },
    /// Add devices.
    Add {
        /// Which resource (optional when only one is served).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        /// New device IDs.
        #[serde(default)]
        ids: Vec<String>,
        /// Their health [default: Healthy].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        health: Option<String>,
        /// Their NUMA node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        numa: Option<i64>,
    },
    /// Remove devices.
    Remove {
        /// Which resource (optional when only one is served).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        /// Device IDs.
        #[serde(default)]
        ids: Vec<String>,
    },
}

impl Request {
    /// Its `op`, as on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::List { .. } => "list",
            Request::SetHealth { .. } => "set-health",
            Request::Add { .. } => "add",
            Request::Remove { .. } => "remove",
        }
    }

    /// The resource it names.
    pub fn resource(&self) -> Option<&String> {
        match self {
            Request::List { resource }
            | Request::SetHealth { resource, .. }
            | Request::Add { resource, .. }
            | Request::Remove { resource, .. } => resource.as_ref(),
        }
    }

    /// Name the resource (when none is named).
    pub fn set_resource(&mut self, name: String) {
        match self {
            Request::List { resource }
            | Request::SetHealth { resource, .. }
            | Request::Add { resource, .. }
            | Request::Remove { resource, .. } => *resource = Some(name),
        }
    }

    /// The device IDs it changes.
    pub fn ids(&self) -> &[String] {
        match self {
            Request::List { .. } => &[],
            Request::SetHealth { ids, .. } | Request::Add { ids, .. } | Request::Remove { ids, .. } => ids,
        }
    }
}

/// One resource in an answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceView {
    /// Resource name.
    pub resource: String,
    /// Plugin socket.
    pub socket: String,
    /// Devices.
    pub devices: Vec<Device>,
}

/// A control answer.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Success.
    pub ok: bool,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The resources after the operation.
    #[serde(default)]
    pub resources: Vec<ResourceView>,
}

/// Why a control request was refused.
#[derive(Debug)]
enum ControlError {
    /// A resource this `dpctl serve` does not serve.
    NotServed(String),
    /// No resource named, and several are served.
    Several(Vec<String>),
    /// No device IDs given.
    NoIds,
    /// The change itself.
    Inventory(crate::plugin::devices::InventoryError),
    /// A health value that is not one.
    Health(crate::protocol::rule::Violation),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::NotServed(r) => write!(f, "this dpctl serve does not serve {}", quote(r)),
            ControlError::Several(names) => {
                write!(f, "several resources are served ({}); name one with --resource", names.join(", "))
            }
            ControlError::NoIds => f.write_str("no device IDs given"),
            ControlError::Inventory(e) => e.fmt(f),
            ControlError::Health(v) => v.fmt(f),
        }
    }
}

fn handle(entries: &BTreeMap<String, Entry>, req: &Request) -> std::result::Result<Vec<ResourceView>, ControlError> {
    let view = |name: &String, e: &Entry| ResourceView {
        resource: name.clone(),
        socket: e.socket.lock().map(|p| p.display().to_string()).unwrap_or_default(),
        devices: e.inventory.current().devices().to_vec(),
    };
    if let Request::List { resource } = req {
        return Ok(entries
            .iter()
            .filter(|(n, _)| resource.as_ref().is_none_or(|r| r == *n))
            .map(|(n, e)| view(n, e))
            .collect());
    }
    let (name, entry) = match req.resource() {
        Some(r) => entries.get_key_value(r).ok_or_else(|| ControlError::NotServed(r.clone()))?,
        None if entries.len() == 1 => entries.iter().next().ok_or_else(|| ControlError::Several(vec![]))?,
        None => return Err(ControlError::Several(entries.keys().cloned().collect())),
    };
    if req.ids().is_empty() {
        return Err(ControlError::NoIds);
    }
    let inv = &entry.inventory;
    match req {
        Request::List { .. } => {}
        Request::SetHealth { ids, health, .. } => inv.set_health(ids, health).map_err(ControlError::Inventory)?,
        Request::Remove { ids, .. } => inv.remove(ids).map_err(ControlError::Inventory)?,
        Request::Add { ids, health, numa, .. } => {
            let health = health.clone().unwrap_or_else(|| crate::api::HEALTHY.into());
            crate::protocol::deviceplugin::parse_health(&health).map_err(ControlError::Health)?;
            inv.add(
                ids.iter()
                    .map(|id| Device {
                        id: id.clone(),
                        health: health.clone(),
                        topology: numa.map(|n| TopologyInfo { nodes: vec![NumaNode { id: n }] }),
                    })
                    .collect(),
            )
            .map_err(ControlError::Inventory)?
        }
    }
    Ok(vec![view(name, entry)])
}

/// Live control of `dpctl serve`'s resources.
struct Control {
    entries: Arc<BTreeMap<String, Entry>>,
    log: Logger,
}

impl Handler for Control {
    type Request = Request;
    type Answer = Answer;

    fn refusal(error: String) -> Answer {
        Answer { ok: false, error: Some(error), resources: vec![] }
    }

    async fn answer(&self, req: Request) -> Answer {
        match handle(&self.entries, &req) {
            Ok(resources) => {
                if !matches!(req, Request::List { .. }) {
                    self.log.event("control", &[("op", json!(req.op())), ("ids", json!(id_list(req.ids())))]);
                }
                Answer { ok: true, error: None, resources }
            }
            Err(e) => Self::refusal(cap_words(&e.to_string()).into_owned()),
        }
    }
}

/// Serve live control on `path` until `tasks` is cancelled; the socket is removed on exit.
pub async fn serve(
    path: &Path,
    entries: Arc<BTreeMap<String, Entry>>,
    log: Logger,
    tasks: crate::core::task::Tasks,
) -> Result<()> {
    let shown = path.display().to_string();
    let listening = || log.event("control", &[("socket", json!(shown))]);
    let control = Arc::new(Control { entries, log: log.clone() });
    crate::core::control::serve(path, control, tasks.token().clone(), listening).await
}

/// Send one request to a `dpctl serve` control socket.
pub async fn send(path: &Path, req: &Request, timeout: Duration) -> Result<Answer> {
    crate::core::control::send(path, req, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_their_wire_form() {
        let list = Request::List { resource: None };
        assert_eq!(serde_json::to_string(&list).unwrap(), r#"{"op":"list"}"#);
        let set = Request::SetHealth {
            resource: Some("v.e/foo".into()),
            ids: vec!["foo-1".into()],
            health: "Unhealthy".into(),
        };
        let wire = r#"{"op":"set-health","resource":"v.e/foo","ids":["foo-1"],"health":"Unhealthy"}"#;
        assert_eq!(serde_json::to_string(&set).unwrap(), wire);
        assert_eq!(serde_json::from_str::<Request>(wire).unwrap(), set);
        let add: Request = serde_json::from_str(r#"{"op":"add","ids":["foo-9"],"numa":1,"health":"Healthy"}"#).unwrap();
        assert_eq!(
            add,
            Request::Add { resource: None, ids: vec!["foo-9".into()], health: Some("Healthy".into()), numa: Some(1) }
        );
        let remove: Request = serde_json::from_str(r#"{"op":"remove","ids":["foo-9"]}"#).unwrap();
        assert_eq!(remove.op(), "remove");
        assert!(serde_json::from_str::<Request>(r#"{"op":"list","bogus":1}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"explode"}"#).is_err());
    }
}
