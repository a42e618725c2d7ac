//! `dpctl mock-kubelet` put together: at each (re)start delete the sockets
//! in the plugin directory as the kubelet does, restore from the checkpoint,
//! serve Registration on kubelet.sock and PodResources, admit pods from the
//! manifest directory, watch the plugin-watcher directory; restart in place
//! on request (SIGHUP, `--restart-every`).

use crate::api::deviceplugin::registration_server::RegistrationServer;
use crate::api::podresources::pod_resources_lister_server::PodResourcesListerServer;
use crate::core::log::Logger;
use crate::core::paths::{CHECKPOINT_NAME, KUBELET_SOCKET_NAME};
use crate::core::transport::{listen, path_kind, serve, PathKind};
use crate::core::{Error, Result};
use crate::kubelet::podresources::PodResourcesService;
use crate::kubelet::registration::RegistrationService;
use crate::kubelet::shell::{Config, Generation, Manager};
use crate::plugin::server::stopped;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The status socket `dpctl node` reads, in the control subdirectory.
pub fn status_socket(plugin_dir: &Path) -> PathBuf {
    plugin_dir.join(crate::plugin::control::CONTROL_DIR).join("mock-kubelet.sock")
}

/// Mock kubelet settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Plugin directory.
    pub plugin_dir: PathBuf,
    /// PodResources socket (None: not served).
    pub pod_resources_socket: Option<PathBuf>,
    /// Static pod manifests.
    pub manifests: Option<PathBuf>,
    /// Plugin-watcher directory.
    pub plugins_registry_dir: Option<PathBuf>,
    /// Metrics address.
    pub metrics_addr: Option<SocketAddr>,
    /// Restart in place on this schedule.
    pub restart_every: Option<Duration>,
    /// How long to keep dialing a plugin back.
    pub dial_timeout: Duration,
    /// Device manager settings.
    pub manager: Config,
}

/// What `dpctl node` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Resources.
    pub resources: Vec<serde_json::Value>,
    /// Admitted pods.
    pub pods: Vec<serde_json::Value>,
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
}

/// Snapshot the node status.
pub fn node_status(mgr: &Manager) -> NodeStatus {
    NodeStatus {
        resources: mgr.resources().iter().filter_map(|r| serde_json::to_value(r).ok()).collect(),
        pods: mgr.pods().iter().filter_map(|p| serde_json::to_value(p).ok()).collect(),
        rejected: mgr.rejected().into_iter().map(|(k, v)| (k.display().to_string(), v)).collect(),
        rejected_reasons: mgr
            .rejected()
            .into_iter()
            .map(|(k, v)| (k.display().to_string(), crate::kubelet::devicemanager::rejection_reason(&v)))
            .collect(),
        kubelet_version: mgr.cfg.profile.version.to_string(),
        plugin_dir: mgr.cfg.plugin_dir.display().to_string(),
    }
}

/// Delete every socket in the plugin directory (not recursively; never
/// regular files, directories, symlinks or the checkpoint), as the kubelet
/// does at start. Refuses if another server answers on kubelet.sock.
pub async fn clean_plugin_dir(dir: &Path, log: &Logger) -> Result<()> {
    let kubelet = dir.join(KUBELET_SOCKET_NAME);
    if path_kind(&kubelet).ok() == Some(PathKind::Socket) && tokio::net::UnixStream::connect(&kubelet).await.is_ok() {
        return Err(Error::failed(format!(
            "{}: another kubelet is serving there; stop it, or use another --plugin-dir",
            kubelet.display()
        )));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, "cannot read the plugin directory", &e))?;
    for e in rd.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == CHECKPOINT_NAME) {
            continue;
        }
        if path_kind(&p).ok() == Some(PathKind::Socket) {
            match std::fs::remove_file(&p) {
                Ok(()) => log.event("socket-deleted", &[("socket", json!(p.display().to_string()))]),
                Err(err) => {
                    log.event("error", &[("socket", json!(p.display().to_string())), ("error", json!(err.to_string()))])
                }
            }
        }
    }
    Ok(())
}

/// How long a `dpctl node` request waits for the next generation during a restart.
const RESTART_WAIT: Duration = Duration::from_secs(5);

/// Pods admitted (and committed to the checkpoint) together, at most.
const BATCH: usize = 256;

struct Seen {
    modified: Option<SystemTime>,
    len: u64,
    uid: Option<String>,
}

/// Follow the manifest directory: admit new files, remove pods whose file is
/// gone, re-admit changed files. `first_scan` fires after the first pass.
async fn watch_manifests(mgr: Arc<Manager>, dir: PathBuf) {
    let mut seen: BTreeMap<PathBuf, Seen> = BTreeMap::new();
    let mut first = true;
    loop {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                        !name.starts_with('.')
                            && ["yaml", "yml", "json"].iter().any(|x| p.extension().is_some_and(|e| e == *x))
                            && p.is_file()
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        for gone in seen.keys().filter(|k| !files.contains(k)).cloned().collect::<Vec<_>>() {
            if let Some(s) = seen.remove(&gone) {
                match s.uid {
                    Some(uid) => mgr.remove_pod(&uid),
                    None => mgr.forget_rejected(&gone),
                }
            }
        }
        let mut changed = Vec::new();
        for f in &files {
            let meta = std::fs::metadata(f).ok();
            let (modified, len) =
                (meta.as_ref().and_then(|m| m.modified().ok()), meta.as_ref().map(|m| m.len()).unwrap_or(0));
            if let Some(s) = seen.get(f) {
                if s.modified == modified && s.len == len {
                    continue;
                }
                if let Some(uid) = &s.uid {
                    mgr.remove_pod(uid);
                }
            }
            seen.insert(f.clone(), Seen { modified, len, uid: None });
            changed.push(f.clone());
        }
        // Reading and parsing (bounded in size and depth) run on the blocking
        // pool, never on the workers that serve Registration and PodResources.
        let parsed = if changed.is_empty() {
            Vec::new()
        } else {
            let work = tokio::task::spawn_blocking(move || {
                changed
                    .into_iter()
                    .map(|f| {
                        let r = crate::kubelet::manifest::load(&f);
                        (f, r)
                    })
                    .collect::<Vec<_>>()
            });
            work.await.unwrap_or_default()
        };
        let mut batch: Vec<(crate::kubelet::manifest::Pod, PathBuf)> = Vec::new();
        for (f, r) in parsed {
            match r {
                Err(e) => mgr.reject_file(f, e),
                Ok(pod) => batch.push((pod, f)),
            }
        }
        // Everything found in this scan is admitted and committed together
        // (in chunks, so a large drop of manifests still shows progress).
        for chunk in batch.chunks(BATCH) {
            let uids: BTreeMap<PathBuf, String> = chunk.iter().map(|(p, f)| (f.clone(), p.uid.clone())).collect();
            for (file, result) in mgr.admit_batch(chunk.to_vec()).await {
                match result {
                    Ok(()) => {
                        if let Some(s) = seen.get_mut(&file) {
                            s.uid = uids.get(&file).cloned();
                        }
                    }
                    Err(e) => mgr.reject_file(file, e),
                }
            }
        }
        if first {
            mgr.drop_orphans();
            first = false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn serve_status(
    path: PathBuf,
    current: watch::Receiver<Option<Arc<Manager>>>,
    stop: CancellationToken,
    tracker: TaskTracker,
    log: Logger,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        crate::core::files::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the control directory", &e))?;
    }
    let (listener, guard) = listen(&path).await?;
    log.event("status", &[("socket", json!(path.display().to_string()))]);
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.cancelled() => break,
        };
        let Ok((stream, _)) = conn else { continue };
        let mut current = current.clone();
        let stop = stop.clone();
        tracker.spawn(stop.run_until_cancelled_owned(async move {
            use crate::core::limits::{read_line, Line, MAX_CONTROL_LINE};
            let (r, mut w) = stream.into_split();
            let mut r = BufReader::new(r);
            loop {
                let (v, close) = match read_line(&mut r, MAX_CONTROL_LINE).await {
                    Err(_) | Ok(Line::Eof) => break,
                    Ok(Line::TooLong) => {
                        (json!({"ok": false, "error": "request line longer than 1 MiB; closing the connection"}), true)
                    }
                    Ok(Line::NotUtf8) => {
                        (json!({"ok": false, "error": "request line is not UTF-8; closing the connection"}), true)
                    }
                    Ok(Line::Text(_)) => {
                        // Between generations, wait a little for the next one rather than fail.
                        let next = tokio::time::timeout(RESTART_WAIT, current.wait_for(Option::is_some)).await;
                        match next.ok().and_then(|r| r.ok()).and_then(|m| m.clone()) {
                            Some(m) => (json!({"ok": true, "node": node_status(&m)}), false),
                            None => (json!({"ok": false, "error": "the mock kubelet is restarting; try again"}), false),
                        }
                    }
                };
                let mut text = v.to_string();
                text.push('\n');
                if w.write_all(text.as_bytes()).await.is_err() || close {
                    break;
                }
            }
        }));
    }
    drop(guard);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

/// Start generation `gen`: clean the plugin directory, restore the
/// checkpoint, serve Registration and PodResources, follow manifests and the
/// plugin-watcher directory — every task on the generation's tracker.
async fn start_generation(s: &Settings, log: &Logger, gen: Generation) -> Result<Arc<Manager>> {
    clean_plugin_dir(&s.plugin_dir, log).await?;
    let number = gen.number;
    let mgr = Manager::new(s.manager.clone(), log.clone(), gen.clone());
    let from_checkpoint = mgr.restore();
    if number > 0 {
        mgr.expect_back(from_checkpoint);
    }
    mgr.start();
    let ksock = s.plugin_dir.join(KUBELET_SOCKET_NAME);
    let (l, g) = listen(&ksock).await?;
    let reg = RegistrationServer::new(RegistrationService { mgr: mgr.clone(), dial_timeout: s.dial_timeout });
    let failed = gen.token.clone();
    let l2 = log.clone();
    gen.spawn(async move {
        let _g = g;
        if let Err(e) = serve(l, reg, std::future::pending()).await {
            l2.event("error", &[("error", json!(e.to_string()))]);
            failed.cancel();
        }
    });
    if let Some(pr) = &s.pod_resources_socket {
        let (l, g) = listen(pr).await?;
        let svc = PodResourcesListerServer::new(PodResourcesService::new(mgr.clone()));
        gen.spawn(async move {
            let _g = g;
            let _ = serve(l, svc, std::future::pending()).await;
        });
    }
    if let Some(dir) = &s.manifests {
        gen.spawn(watch_manifests(mgr.clone(), dir.clone()));
    }
    if let Some(dir) = &s.plugins_registry_dir {
        gen.spawn(crate::kubelet::watcher::run(mgr.clone(), dir.clone(), s.dial_timeout));
    }
    Ok(mgr)
}

/// Run until `shutdown`; `restart` requests a restart in place. A restart
/// ends the running generation completely (its tasks cancelled and awaited,
/// its last checkpoint written) before the next one starts.
pub async fn run(
    s: Settings,
    log: Logger,
    mut shutdown: watch::Receiver<bool>,
    mut restart: mpsc::Receiver<()>,
) -> Result<()> {
    let (current_tx, current_rx) = watch::channel::<Option<Arc<Manager>>>(None);
    // Process-wide tasks (status socket, metrics) outlive generations.
    let process = Generation::new(0);
    {
        let p = status_socket(&s.plugin_dir);
        // Fail early if the status socket cannot be created.
        if let Some(dir) = p.parent() {
            crate::core::files::create_dir_all(dir)
                .map_err(|e| Error::io(dir, "cannot create the control directory", &e))?;
        }
        let (c, st, tr, l) = (current_rx.clone(), process.token.clone(), process.tracker.clone(), log.clone());
        process.tracker.spawn(async move {
            if let Err(e) = serve_status(p, c, st, tr, l.clone()).await {
                l.event("error", &[("error", json!(e.to_string()))]);
            }
        });
    }
    if let Some(addr) = s.metrics_addr {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::failed(format!("--metrics-addr {addr}: cannot listen: {e}; choose a free port")))?;
        log.event("metrics", &[("addr", json!(format!("http://{addr}/metrics")))]);
        process.tracker.spawn(crate::kubelet::metrics::serve(
            l,
            current_rx.clone(),
            process.token.clone(),
            process.tracker.clone(),
        ));
    }
    let mut number = 0u64;
    let result = loop {
        let started = Instant::now();
        let gen = Generation::new(number);
        let mgr = match start_generation(&s, &log, gen.clone()).await {
            Ok(m) => m,
            Err(e) => {
                gen.end().await;
                break Err(e);
            }
        };
        let _ = current_tx.send(Some(mgr.clone()));
        log.event(
            if number == 0 { "started" } else { "restarted" },
            &[
                ("kubeletSocket", json!(s.plugin_dir.join(KUBELET_SOCKET_NAME).display().to_string())),
                ("podResourcesSocket", json!(s.pod_resources_socket.as_ref().map(|p| p.display().to_string()))),
                ("generation", json!(number)),
                ("startMs", crate::core::log::ms(started.elapsed())),
            ],
        );
        let timer = async {
            match s.restart_every {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let mut quit = false;
        let mut failure = None;
        tokio::select! {
            _ = stopped(&mut shutdown) => quit = true,
            _ = restart.recv() => log.event("restarting", &[("reason", json!("SIGHUP"))]),
            _ = timer => log.event("restarting", &[("reason", json!("--restart-every"))]),
            _ = gen.token.cancelled() => {
                failure = Some(Error::failed("the kubelet socket stopped serving"));
                quit = true;
            }
        }
        let _ = current_tx.send(None);
        mgr.close().await;
        if let Some(e) = failure {
            break Err(e);
        }
        if quit {
            break Ok(());
        }
        number += 1;
    };
    process.token.cancel();
    process.tracker.close();
    let _ = tokio::time::timeout(Duration::from_secs(2), process.tracker.wait()).await;
    if result.is_ok() {
        log.event("stopped", &[]);
    }
    result
}
