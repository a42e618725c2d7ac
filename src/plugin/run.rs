//! Run simulated plugins for a set of resources until shutdown: one plugin
//! lifecycle per resource, health flaps, and the live-control socket. Used
//! by `dpctl serve`, `dpctl demo` and the benchmarks.

use crate::core::log::Logger;
use crate::core::task::Tasks;
use crate::core::Result;
use crate::plugin::config::ResourceConfig;
use crate::plugin::control;
use crate::plugin::registrar::{self, Settings};
use crate::plugin::simulated::Simulated;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Run `resources` with per-resource `settings` (socket name filled in from
/// each resource) and a control socket, as tasks of `owner`, until it is
/// cancelled or one part fails (then every part is stopped and awaited).
pub async fn run(
    resources: &[ResourceConfig],
    settings: Settings,
    control_socket: Option<PathBuf>,
    log: Logger,
    owner: Tasks,
) -> Result<()> {
    let parts = owner.child();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<Result<()>>();
    let spawn = |f: std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>| {
        let done = done_tx.clone();
        parts.spawn_joined(async move {
            let _ = done.send(f.await);
        });
    };
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
            let (inv, log, stop) = (sim.inventory.clone(), log.clone(), parts.token().clone());
            let (id, period, res) = (flap.device.clone(), flap.period, r.resource.clone());
            spawn(Box::pin(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            if let Ok(h) = inv.toggle(&id) {
                                log.event("flap", &[("resource", json!(res)), ("device", json!(id)), ("health", json!(h))]);
                            }
                        }
                        _ = stop.cancelled() => return Ok(()),
                    }
                }
            }));
        }
        let s = Settings { socket_name: r.socket_name.clone(), ..settings.clone() };
        let (log, group) = (log.clone(), parts.child());
        spawn(Box::pin(registrar::run(sim, s, log, group, move |p| {
            if let Some(r) = &renamer {
                r.next();
            }
            if let Ok(mut s) = socket.lock() {
                *s = p.to_path_buf();
            }
        })));
    }
    if let Some(path) = control_socket {
        let (entries, log, group) = (Arc::new(entries), log.clone(), parts.child());
        spawn(Box::pin(async move { control::serve(&path, entries, log, group).await }));
    }

    drop(done_tx);
    let mut failure = None;
    tokio::select! {
        _ = owner.cancelled() => log.event("stopping", &[("reason", json!("signal"))]),
        Some(done) = done_rx.recv() => failure = done.err(),
    }
    parts.cancel();
    // Every part ends promptly once cancelled; this only bounds a stuck one.
    let _ = tokio::time::timeout(Duration::from_secs(5), parts.join()).await;
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
