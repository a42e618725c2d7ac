//! Run simulated plugins for a set of resources until shutdown: one plugin
//! lifecycle per resource, health flaps, and the live-control socket. Used
//! by `dpctl serve`, `dpctl demo` and the benchmarks.

use crate::core::log::Logger;
use crate::core::{Error, Result};
use crate::plugin::config::ResourceConfig;
use crate::plugin::control;
use crate::plugin::registrar::{self, Settings};
use crate::plugin::server::stopped;
use crate::plugin::simulated::Simulated;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Run `resources` with per-resource `settings` (socket name filled in from
/// each resource) and a control socket, until `shutdown` turns true or one
/// part fails.
pub async fn run(
    resources: &[ResourceConfig],
    settings: Settings,
    control_socket: Option<PathBuf>,
    log: Logger,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks: JoinSet<Result<()>> = JoinSet::new();
    let mut entries = BTreeMap::new();
    if resources.iter().any(|r| r.faults.delete_other_sockets) {
        delete_other_sockets(&settings.plugin_dir, &log);
    }
    for r in resources {
        let sim = Arc::new(Simulated::new(r)?);
        let socket = Arc::new(Mutex::new(PathBuf::new()));
        let renamer = r.faults.new_ids_after_restart.then(|| NewIds::new(&sim.inventory));
        entries.insert(r.resource.clone(), control::Entry { inventory: sim.inventory.clone(), socket: socket.clone() });
        for flap in sim.flaps() {
            let (inv, log, mut stop) = (sim.inventory.clone(), log.clone(), stop_rx.clone());
            let (id, period, res) = (flap.device.clone(), flap.period, r.resource.clone());
            tasks.spawn(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            if let Ok(h) = inv.toggle(&id) {
                                log.event("flap", &[("resource", json!(res)), ("device", json!(id)), ("health", json!(h))]);
                            }
                        }
                        _ = stopped(&mut stop) => return Ok(()),
                    }
                }
            });
        }
        let s = Settings { socket_name: r.socket_name.clone(), ..settings.clone() };
        let (log, stop) = (log.clone(), stop_rx.clone());
        tasks.spawn(registrar::run(sim, s, log, stop, move |p| {
            if let Some(r) = &renamer {
                r.next();
            }
            if let Ok(mut s) = socket.lock() {
                *s = p.to_path_buf();
            }
        }));
    }
    if let Some(path) = control_socket {
        let (entries, log, stop) = (Arc::new(entries), log.clone(), stop_rx.clone());
        tasks.spawn(async move { control::serve(&path, entries, log, stop).await });
    }

    let mut failure = None;
    let mut shutdown = shutdown;
    tokio::select! {
        _ = stopped(&mut shutdown) => log.event("stopping", &[("reason", json!("signal"))]),
        Some(done) = tasks.join_next() => {
            failure = match done {
                Ok(Err(e)) => Some(e),
                Err(e) => Some(Error::failed(format!("internal error: {e}"))),
                Ok(Ok(())) => None,
            };
        }
    }
    let _ = stop_tx.send(true);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(5), drain).await.is_err() {
        tasks.abort_all();
    }
    log.event("stopped", &[]);
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The fault delete-other-sockets: remove every socket in the plugin
/// directory but kubelet.sock, as careless plugins clean up at start.
fn delete_other_sockets(dir: &std::path::Path, log: &Logger) {
    use crate::core::transport::{path_kind, PathKind};
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_name() == crate::core::paths::KUBELET_SOCKET_NAME || path_kind(&p).ok() != Some(PathKind::Socket) {
            continue;
        }
        if std::fs::remove_file(&p).is_ok() {
            log.event(
                "fault",
                &[("fault", json!("delete-other-sockets")), ("deleted", json!(p.display().to_string()))],
            );
        }
    }
}

/// The fault new-ids-after-restart: every (re)start renames every device
/// (`<id>-p<pid>g<generation>`), so IDs differ across kubelet and plugin restarts.
struct NewIds {
    inventory: crate::plugin::devices::Inventory,
    base: Vec<crate::api::deviceplugin::Device>,
    generation: std::sync::atomic::AtomicU64,
}

impl NewIds {
    fn new(inventory: &crate::plugin::devices::Inventory) -> Self {
        NewIds {
            inventory: inventory.clone(),
            base: inventory.current().devices().to_vec(),
            generation: Default::default(),
        }
    }

    fn next(&self) {
        let g = self.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let current: Vec<String> = self.inventory.current().devices().iter().map(|d| d.id.clone()).collect();
        let renamed = self
            .base
            .iter()
            .map(|d| crate::api::deviceplugin::Device {
                id: format!("{}-p{}g{g}", d.id, std::process::id()),
                ..d.clone()
            })
            .collect();
        let _ = self.inventory.remove(&current);
        let _ = self.inventory.add(renamed);
    }
}
