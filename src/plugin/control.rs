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
use crate::core::limits::{human_bytes, read_line, Line, MAX_CONTROL_LINE};
use crate::core::log::Logger;
use crate::core::text::{cap, cap_words, id_list, quote};
use crate::core::transport::{connect_raw, listen};
use crate::core::{Error, Result};
use crate::plugin::devices::Inventory;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};

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

/// A control request.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// list, set-health, add or remove.
    pub op: String,
    /// Which resource (optional when only one is served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Device IDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Health for set-health and add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
    /// NUMA node for add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<i64>,
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

fn handle(entries: &BTreeMap<String, Entry>, req: Request) -> std::result::Result<Vec<ResourceView>, String> {
    let view = |name: &String, e: &Entry| ResourceView {
        resource: name.clone(),
        socket: e.socket.lock().map(|p| p.display().to_string()).unwrap_or_default(),
        devices: e.inventory.current().devices().to_vec(),
    };
    if req.op == "list" {
        return Ok(entries
            .iter()
            .filter(|(n, _)| req.resource.as_ref().is_none_or(|r| r == *n))
            .map(|(n, e)| view(n, e))
            .collect());
    }
    let (name, entry) = match &req.resource {
        Some(r) => entries.get_key_value(r).ok_or_else(|| format!("this dpctl serve does not serve {}", quote(r)))?,
        None if entries.len() == 1 => entries.iter().next().ok_or("no resources")?,
        None => {
            return Err(format!(
                "several resources are served ({}); name one with --resource",
                entries.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        }
    };
    if req.ids.is_empty() {
        return Err("no device IDs given".into());
    }
    let inv = &entry.inventory;
    match req.op.as_str() {
        "set-health" => inv.set_health(&req.ids, req.health.as_deref().unwrap_or(""))?,
        "remove" => inv.remove(&req.ids)?,
        "add" => {
            let health = req.health.clone().unwrap_or_else(|| crate::api::HEALTHY.into());
            crate::protocol::deviceplugin::parse_health(&health).map_err(|e| e.to_string())?;
            inv.add(
                req.ids
                    .iter()
                    .map(|id| Device {
                        id: id.clone(),
                        health: health.clone(),
                        topology: req.numa.map(|n| TopologyInfo { nodes: vec![NumaNode { id: n }] }),
                    })
                    .collect(),
            )?
        }
        other => return Err(format!("unknown op {}: use list, set-health, add or remove", quote(other))),
    }
    Ok(vec![view(name, entry)])
}

fn refusal(error: &str) -> Answer {
    Answer { ok: false, error: Some(error.to_string()), resources: vec![] }
}

/// Answer one request line.
fn answer(entries: &BTreeMap<String, Entry>, log: &Logger, line: &str) -> Answer {
    let req = match serde_json::from_str::<Request>(line) {
        Err(e) => return refusal(&format!("bad request: {}", cap_words(&e.to_string()))),
        Ok(req) => req,
    };
    let op = cap(&req.op).into_owned();
    let ids = id_list(&req.ids);
    match handle(entries, req) {
        Ok(resources) => {
            if op != "list" {
                log.event("control", &[("op", json!(op)), ("ids", json!(ids))]);
            }
            Answer { ok: true, error: None, resources }
        }
        Err(e) => refusal(&cap_words(&e)),
    }
}

/// Serve live control on `path` until `tasks` is cancelled (each connection
/// is one of its tasks); the socket is removed on exit.
pub async fn serve(
    path: &Path,
    entries: Arc<BTreeMap<String, Entry>>,
    log: Logger,
    tasks: crate::core::task::Tasks,
) -> Result<()> {
    let l = log.clone();
    let handler: LineHandler = Arc::new(move |line: &str| {
        serde_json::to_string(&answer(&entries, &l, line)).unwrap_or_else(|_| "{\"ok\":false}".into())
    });
    serve_lines(path, handler, log, tasks).await
}

/// Answers one request line with one answer line (JSON, no newline).
pub type LineHandler = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The refusal line for a request that cannot be read.
pub fn refusal_line(error: &str) -> String {
    serde_json::to_string(&refusal(error)).unwrap_or_else(|_| "{\"ok\":false}".into())
}

/// Serve a JSON-lines control protocol on `path` until `tasks` is cancelled
/// (each connection is one of its tasks): each request line is answered by
/// `handler`; over-long or non-UTF-8 lines are refused and the connection
/// closed. The socket is removed on exit.
pub async fn serve_lines(
    path: &Path,
    handler: LineHandler,
    log: Logger,
    tasks: crate::core::task::Tasks,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        crate::core::files::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the control directory", &e))?;
    }
    let (listener, guard) = listen(path).await?;
    log.event("control", &[("socket", json!(path.display().to_string()))]);
    loop {
        tokio::select! {
            _ = tasks.cancelled() => break,
            conn = listener.accept() => {
                let Ok((stream, _)) = conn else { continue };
                let handler = handler.clone();
                tasks.spawn(async move {
                    let (r, mut w) = stream.into_split();
                    let mut r = BufReader::new(r);
                    loop {
                        let (mut text, close) = match read_line(&mut r, MAX_CONTROL_LINE).await {
                            Err(_) | Ok(Line::Eof) => break,
                            Ok(Line::TooLong) => (refusal_line(&format!(
                                "request line longer than {}; closing the connection",
                                human_bytes(MAX_CONTROL_LINE as u64)
                            )), true),
                            Ok(Line::NotUtf8) => (refusal_line("request line is not UTF-8; closing the connection"), true),
                            Ok(Line::Text(line)) => (handler(&line), false),
                        };
                        text.push('\n');
                        if w.write_all(text.as_bytes()).await.is_err() || close {
                            break;
                        }
                    }
                });
            }
        }
    }
    tasks.stop().await;
    drop(guard);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir); // only if empty
    }
    Ok(())
}

/// Send one request to a control socket.
pub async fn send(path: &Path, req: &Request, timeout: Duration) -> Result<Answer> {
    send_as(path, req, timeout).await
}

/// Send one request of any shape to a control socket and read its answer.
pub async fn send_as<Q: Serialize, A: serde::de::DeserializeOwned>(
    path: &Path,
    req: &Q,
    timeout: Duration,
) -> Result<A> {
    let stream = connect_raw(path, timeout).await?;
    let (r, mut w) = stream.into_split();
    let mut line = serde_json::to_string(req).map_err(|e| Error::failed(e.to_string()))?;
    line.push('\n');
    let work = async {
        w.write_all(line.as_bytes()).await?;
        read_line(&mut BufReader::new(r), crate::core::limits::MAX_CONTROL_ANSWER).await
    };
    let reply = match tokio::time::timeout(timeout, work).await {
        Err(_) => return Err(Error::timeout(path, "live control", timeout)),
        Ok(Err(e)) => return Err(Error::io(path, "live control", &e)),
        Ok(Ok(Line::Eof)) => {
            return Err(Error::failed(format!("{}: the control socket closed without answering", path.display())))
        }
        Ok(Ok(Line::TooLong | Line::NotUtf8)) => {
            return Err(Error::failed(format!(
                "{}: not a dpctl control socket (answer too long or not UTF-8)",
                path.display()
            )))
        }
        Ok(Ok(Line::Text(l))) => l,
    };
    serde_json::from_str(&reply)
        .map_err(|e| Error::failed(format!("{}: not a dpctl control socket (bad answer: {e})", path.display())))
}
