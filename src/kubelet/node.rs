//! The kubelet engine: one node, started in process from a [`NodeSpec`],
//! driven through its [`Node`] handle. At each (re)start it deletes the
//! sockets in the plugin directory as the kubelet does, restores from the
//! checkpoint, serves Registration on kubelet.sock and PodResources, admits
//! pods from the manifest directory (or [`Node::admit`]), and watches the
//! plugin-watcher directory; a restart in place ([`Node::restart`], SIGHUP in
//! `dpctl mock-kubelet`) ends the generation completely before the next one
//! starts. Everything it does is reported as a typed [`KubeletEvent`] on its
//! [`EventBus`] (the JSON log is those events serialised). Every task belongs
//! to the node's task group; [`Node::stop`] cancels and awaits all of them.

use crate::api::deviceplugin::registration_server::RegistrationServer;
use crate::api::podresources::pod_resources_lister_server::PodResourcesListerServer;
use crate::api::pods_v1alpha1::pods_server::PodsServer;
use crate::core::paths::{CHECKPOINT_NAME, KUBELET_SOCKET_NAME};
use crate::core::task::Tasks;
use crate::core::time::millis;
use crate::core::transport::{listen, path_kind, serve, PathKind};
use crate::core::{Error, Result};
use crate::kubelet::cm::ContainerManager;
use crate::kubelet::devicemanager::shell::{Config, Generation, Manager};
use crate::kubelet::event::{EventBus, KubeletEvent};
use crate::kubelet::handler::Handlers;
use crate::kubelet::podresources::PodResourcesService;
use crate::kubelet::pods::PodsService;
use crate::kubelet::registration::RegistrationService;
use crate::kubelet::tree::NodeTree;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use crate::client::status::NodeStatus;
pub use crate::core::paths::status_socket;

/// What a node is: where it lives and how it behaves.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Plugin directory.
    pub plugin_dir: PathBuf,
    /// PodResources socket (None: not served).
    pub pod_resources_socket: Option<PathBuf>,
    /// The pods API socket, served when the profile's PodsAPI gate is on
    /// (None: never served).
    pub pods_api_socket: Option<PathBuf>,
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
    /// Endpoints plugins report under `.0` are found under `.1` (a plugin
    /// in a private mount namespace sees the tree at /var/lib/kubelet).
    pub endpoint_alias: Option<(PathBuf, PathBuf)>,
    /// Device manager settings.
    pub manager: Config,
    /// DRA manager settings (None: DRA plugins are not handled).
    pub dra: Option<crate::kubelet::dra::shell::DraSpec>,
    /// Serve the local API server (JSON ResourceSlices and claims) on this
    /// loopback address, writing `<root>/kubeconfig` for drivers (needs `dra`).
    pub api_server: Option<SocketAddr>,
    /// How the local API server serves: HTTPS with its own CA and a token
    /// (the default), or plain HTTP without authentication.
    pub api_server_mode: crate::controlplane::apiserver::Mode,
    /// Delete every socket in the plugin directory at start, as the kubelet
    /// does (true); `dpctl test` turns it off where a plugin must already be
    /// serving, with a stream of the suite's open, when the kubelet arrives.
    pub clean_at_start: bool,
    /// Wake the manifest and plugin-watcher scans on inotify as well as on
    /// their 200 ms period, as the kubelet's file source and plugin watcher
    /// (fsnotify) are woken ([`crate::kubelet::dirwatch`]). `dpctl test`
    /// turns it on (its scenarios wait on events, so they end sooner);
    /// `dpctl mock-kubelet` keeps the period alone, whose pace its users and
    /// tests know (a plugin re-registering within 200 ms of a restart is
    /// back before a pod written with the restart is read).
    pub wake_on_changes: bool,
    /// Be a node of this cluster: register the Node, renew its Lease, run
    /// the pods bound to it (see [`crate::kubelet::cluster`]).
    pub cluster: Option<crate::kubelet::cluster::ClusterSpec>,
}

impl NodeSpec {
    /// A node on `tree` with the kubelet's defaults: every socket served,
    /// manifests and the plugin watcher followed, no metrics, no restarts.
    pub fn on_tree(tree: &NodeTree) -> Self {
        NodeSpec {
            plugin_dir: tree.plugin_dir.clone(),
            pod_resources_socket: Some(tree.pod_resources.clone()),
            pods_api_socket: Some(crate::kubelet::tree::pods_api_socket(&tree.root)),
            manifests: Some(tree.manifests.clone()),
            plugins_registry_dir: Some(tree.registry_dir.clone()),
            metrics_addr: None,
            restart_every: None,
            dial_timeout: Duration::from_secs(10),
            endpoint_alias: None,
            manager: Config::kubelet(&tree.plugin_dir),
            dra: Some(crate::kubelet::dra::shell::DraSpec::new(&tree.root, vec![tree.cdi_dir()])),
            api_server: None,
            api_server_mode: Default::default(),
            clean_at_start: true,
            wake_on_changes: false,
            cluster: None,
        }
    }
}

/// Snapshot the node status.
pub fn node_status(cm: &ContainerManager) -> NodeStatus {
    let mgr = &cm.devices;
    let dra = cm.dra.as_ref();
    NodeStatus {
        resources: mgr.resources().iter().filter_map(|r| serde_json::to_value(r).ok()).collect(),
        pods: mgr.pods().iter().filter_map(|p| serde_json::to_value(p).ok()).collect(),
        rejected: mgr.rejected().iter().map(|(k, v)| (k.display().to_string(), v.to_string())).collect(),
        rejected_reasons: mgr.rejected().iter().map(|(k, v)| (k.display().to_string(), v.reason())).collect(),
        kubelet_version: mgr.cfg.profile.version.to_string(),
        plugin_dir: mgr.cfg.plugin_dir.display().to_string(),
        dra_drivers: dra
            .map(|d| d.drivers().iter().filter_map(|x| serde_json::to_value(x).ok()).collect())
            .unwrap_or_default(),
        claims: dra
            .map(|d| d.claims().iter().filter_map(|x| serde_json::to_value(x).ok()).collect())
            .unwrap_or_default(),
        dra_pods: dra
            .map(|d| d.pods().iter().filter_map(|x| serde_json::to_value(x).ok()).collect())
            .unwrap_or_default(),
        lifecycle: cm.lifecycle().iter().filter_map(|x| serde_json::to_value(x).ok()).collect(),
    }
}

/// Delete every socket in the plugin directory (not recursively; never
/// regular files, directories, symlinks or the checkpoint), as the kubelet
/// does at start. Refuses if another server answers on kubelet.sock.
pub async fn clean_plugin_dir(dir: &Path, bus: &EventBus, generation: u64) -> Result<()> {
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
            let socket = p.display().to_string();
            let event = match std::fs::remove_file(&p) {
                Ok(()) => KubeletEvent::SocketDeleted { socket },
                Err(err) => KubeletEvent::Error { error: err.to_string(), socket: Some(socket) },
            };
            bus.emit(event, Some(generation));
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
    /// The UID of the file's pod, once admitted.
    uid: Option<String>,
    /// The keys of the file's other objects (DRA and API objects, one a document).
    objects: Vec<String>,
}

/// What a manifest parse task over `changed` left: its results, or, when
/// the task itself failed (it panicked or was cancelled), its error — and
/// then the files are forgotten, so the next scan reads them again rather
/// than taking them as seen (same mtime and length) and never reading them.
fn parse_outcome<T>(
    seen: &mut BTreeMap<PathBuf, Seen>,
    changed: &[PathBuf],
    task: std::result::Result<Vec<T>, tokio::task::JoinError>,
) -> std::result::Result<Vec<T>, tokio::task::JoinError> {
    task.inspect_err(|_| {
        for f in changed {
            seen.remove(f);
        }
    })
}

/// Follow the manifest directory: admit new files, remove pods whose file is
/// gone, re-admit changed files. After the first pass, what the checkpoints
/// hold for pods no manifest describes goes.
async fn watch_manifests(cm: Arc<ContainerManager>, dir: PathBuf, wake: bool) {
    let mgr = cm.devices.clone();
    let mut seen: BTreeMap<PathBuf, Seen> = BTreeMap::new();
    let mut first = true;
    // A file written (closed) or renamed in wakes the scan at once, as the
    // kubelet's file source is woken by inotify; the period still applies.
    let mut watch =
        wake.then(|| crate::kubelet::dirwatch::DirWatch::new(&dir, crate::kubelet::dirwatch::Changes::Files)).flatten();
    loop {
        // Each file stat'ed once, in name order (crate::kubelet::manifest::list_dir).
        let listed = crate::kubelet::manifest::list_dir(&dir);
        let files: Vec<&PathBuf> = listed.iter().map(|l| &l.path).collect();
        // Compared as bytes: a Path compares component by component, and
        // this is every known file against every file there is, each scan.
        let present: std::collections::HashSet<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
        let gone_files: Vec<PathBuf> = seen.keys().filter(|k| !present.contains(k.as_os_str())).cloned().collect();
        for gone in gone_files {
            if let Some(s) = seen.remove(&gone) {
                if let Some(d) = &cm.dra {
                    for key in &s.objects {
                        d.forget_object(key);
                    }
                }
                match s.uid {
                    Some(uid) => cm.remove_pod(&uid).await,
                    None => mgr.forget_rejected(&gone),
                }
            }
        }
        let mut changed = Vec::new();
        for l in &listed {
            let (f, modified, len) = (&l.path, l.modified, l.len);
            if let Some(s) = seen.get(f) {
                if s.modified == modified && s.len == len {
                    continue;
                }
                if let Some(uid) = &s.uid {
                    cm.remove_pod(uid).await;
                }
            }
            // The file's objects stay until it is read again (those gone from it go then).
            let objects = seen.get(f).map(|s| s.objects.clone()).unwrap_or_default();
            seen.insert(f.clone(), Seen { modified, len, uid: None, objects });
            changed.push(f.clone());
        }
        // Reading and parsing (bounded in size and depth) run on the blocking
        // pool, never on the workers that serve Registration and PodResources.
        // A parse task that fails (it panicked or was cancelled) loses none of
        // its files: they are forgotten, so the next scan reads them again.
        let parsed = if changed.is_empty() {
            Vec::new()
        } else {
            let files = changed.clone();
            let work = tokio::task::spawn_blocking(move || {
                files
                    .into_iter()
                    .map(|f| {
                        let r = crate::kubelet::manifest::load_any_checked(&f);
                        (f, r)
                    })
                    .collect::<Vec<_>>()
            });
            match parse_outcome(&mut seen, &changed, work.await) {
                Ok(parsed) => parsed,
                Err(e) => {
                    let error = format!("{e}; they are read again at the next scan");
                    cm.event(KubeletEvent::ManifestsUnread { files: changed.len(), error });
                    Vec::new()
                }
            }
        };
        let mut batch: Vec<(crate::kubelet::manifest::Pod, PathBuf)> = Vec::new();
        for (f, r) in parsed {
            let r = r.map(|(m, warnings)| {
                if !warnings.is_empty() {
                    let file = f.display().to_string();
                    mgr.bus.emit(KubeletEvent::ManifestWarning { file, warnings }, None);
                }
                m
            });
            let all = match r {
                Err(e) => {
                    mgr.reject_file(f, crate::kubelet::devicemanager::core::AdmissionError::Manifest(e.into()));
                    continue;
                }
                Ok(all) => all,
            };
            let mut pods = Vec::new();
            let mut objects = Vec::new();
            for m in all {
                match m {
                    crate::kubelet::manifest::Manifest::Pod(pod) => pods.push(pod),
                    crate::kubelet::manifest::Manifest::Dra(obj) => objects.push(obj),
                }
            }
            if !objects.is_empty() && cm.dra.is_none() {
                mgr.reject_file(
                    f,
                    crate::kubelet::devicemanager::core::AdmissionError::Invalid(
                        "DRA objects need the DRA manager, which is off".into(),
                    ),
                );
                continue;
            }
            // Objects no longer in the file go; the others are put (again).
            let keys: Vec<String> = objects.iter().map(|o| o.key()).collect();
            if let Some(s) = seen.get_mut(&f) {
                if let Some(d) = &cm.dra {
                    for old in s.objects.iter().filter(|k| !keys.contains(k)) {
                        d.forget_object(old);
                    }
                }
                s.objects = keys;
            }
            if let Some(d) = &cm.dra {
                if pods.is_empty() {
                    mgr.forget_rejected(&f);
                }
                for obj in objects {
                    d.put_object(obj, &f);
                }
            }
            batch.extend(pods.into_iter().map(|p| (p, f.clone())));
        }
        // Everything found in this scan is admitted and committed together
        // (in chunks, so a large drop of manifests still shows progress).
        for chunk in batch.chunks(BATCH) {
            let uids: BTreeMap<PathBuf, String> = chunk.iter().map(|(p, f)| (f.clone(), p.uid.clone())).collect();
            for (file, result) in cm.admit_batch(chunk.to_vec()).await {
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
            if let Some(d) = &cm.dra {
                d.unprepare_orphans();
            }
            first = false;
        }
        // NoExecute taints on the static pods' prepared claims' devices (slices
        // from manifests or the API server, DeviceTaintRules): the pods go as
        // deleted ones do. The API's pods are the control plane's controller's
        // (they are deleted through the API; their node stops them).
        let statics: BTreeSet<String> = seen.values().filter_map(|s| s.uid.clone()).collect();
        let evicted = cm.dra.as_ref().map(|d| d.tainted_pods(&statics)).unwrap_or_default();
        for uid in evicted {
            cm.mark_evicted(&uid);
            cm.remove_pod(&uid).await;
        }
        let period = tokio::time::Instant::now() + SCAN_EVERY;
        tokio::select! {
            _ = tokio::time::sleep_until(period) => {}
            _ = crate::kubelet::dirwatch::changed(&mut watch) => {
                // Manifests written together (a pod and its claims) are read
                // as one batch, as the period read them: once the directory
                // is quiet for SCAN_SETTLE (or the period is over).
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(SCAN_SETTLE) => break,
                        _ = tokio::time::sleep_until(period) => break,
                        _ = crate::kubelet::dirwatch::changed(&mut watch) => {}
                    }
                }
            }
        }
    }
}

/// How often the manifest directory is read when nothing wakes the loop.
const SCAN_EVERY: Duration = Duration::from_millis(200);
/// After a change, how long the directory must be quiet before it is read.
const SCAN_SETTLE: Duration = Duration::from_millis(20);

async fn serve_status(
    path: PathBuf,
    current: watch::Receiver<Option<Arc<ContainerManager>>>,
    stop: CancellationToken,
    bus: EventBus,
) -> Result<()> {
    use crate::client::status::{StatusAnswer, StatusRequest};
    /// The status socket: the current generation's node status.
    struct Status(watch::Receiver<Option<Arc<ContainerManager>>>);
    impl crate::core::control::Handler for Status {
        type Request = StatusRequest;
        type Answer = StatusAnswer;
        fn refusal(error: String) -> StatusAnswer {
            StatusAnswer { ok: false, error: Some(error), node: None }
        }
        async fn answer(&self, req: StatusRequest) -> StatusAnswer {
            let StatusRequest::Node = req;
            // Between generations, wait a little for the next one rather than fail.
            let mut current = self.0.clone();
            let next = tokio::time::timeout(RESTART_WAIT, current.wait_for(Option::is_some)).await;
            match next.ok().and_then(|r| r.ok()).and_then(|m| m.clone()) {
                Some(m) => StatusAnswer { ok: true, error: None, node: Some(node_status(&m)) },
                None => Self::refusal("the mock kubelet is restarting; try again".into()),
            }
        }
    }
    let listening = || bus.emit(KubeletEvent::Status { socket: path.display().to_string() }, None);
    crate::core::control::serve(&path, Arc::new(Status(current)), stop, listening).await
}

/// Start generation `gen`: clean the plugin directory, restore the
/// checkpoint, serve Registration and PodResources, follow manifests and the
/// plugin-watcher directory — every task on the generation's tracker.
/// `own_api`: the node's own local API server (over loopback, with the
/// kubeconfig it wrote for drivers), whose pods bound to this node it runs
/// as a node of a cluster runs its pods.
async fn start_generation(
    s: &NodeSpec,
    own_api: Option<&crate::kubelet::cluster::ClusterSpec>,
    bus: &EventBus,
    gen: Generation,
) -> Result<Arc<ContainerManager>> {
    if s.clean_at_start {
        clean_plugin_dir(&s.plugin_dir, bus, gen.number).await?;
    }
    let number = gen.number;
    let mgr = Manager::new(s.manager.clone(), bus.clone(), gen.clone());
    let dra = match &s.dra {
        Some(spec) => {
            // The DRA manager behaves as the device manager's kubelet version.
            // A node of a cluster reads its API pods' claims from the API server.
            let claim_reader = s.cluster.as_ref().or(own_api).map(|c| {
                Arc::new(crate::kubelet::cluster::Claims(c.api.clone()))
                    as Arc<dyn crate::kubelet::dra::shell::fetch::ClaimReader>
            });
            let joined_dpctl_plane = s.cluster.as_ref().is_some_and(|c| c.api.dpctl_plane);
            let spec = crate::kubelet::dra::shell::DraSpec {
                profile: s.manager.profile,
                claim_reader,
                joined_dpctl_plane,
                ..spec.clone()
            };
            let dra = crate::kubelet::dra::shell::DraManager::new(spec, bus.clone(), gen.clone());
            dra.restore()?;
            dra.restore_health();
            dra.wipe_at_start();
            Some(dra)
        }
        None => None,
    };
    let cm = ContainerManager::new(mgr.clone(), dra);
    let from_checkpoint = mgr.restore();
    if number > 0 {
        mgr.expect_back(from_checkpoint);
    }
    mgr.start();
    let ksock = s.plugin_dir.join(KUBELET_SOCKET_NAME);
    let (l, g) = listen(&ksock).await?;
    let reg = RegistrationServer::new(RegistrationService { mgr: mgr.clone(), dial_timeout: s.dial_timeout });
    let failed = gen.tasks.token().clone();
    let b2 = bus.clone();
    gen.tasks.spawn(async move {
        let _g = g;
        if let Err(e) = serve(l, reg, std::future::pending()).await {
            b2.emit(KubeletEvent::Error { error: e.to_string(), socket: None }, Some(number));
            failed.cancel();
        }
    });
    if let Some(pr) = &s.pod_resources_socket {
        let (l, g) = listen(pr).await?;
        let svc = PodResourcesListerServer::new(PodResourcesService::new(cm.clone()));
        gen.tasks.spawn(async move {
            let _g = g;
            let _ = serve(l, svc, std::future::pending()).await;
        });
    }
    if let Some(p) = s.pods_api_socket.as_ref().filter(|_| s.manager.profile.pods_api.enabled()) {
        // kubelet.go ListenAndServePods: the directory is the kubelet's own.
        if let Some(dir) = p.parent() {
            crate::core::files::create_dir_all(dir)
                .map_err(|e| crate::core::Error::io(dir, "cannot create the pods API directory", &e))?;
        }
        let (l, g) = listen(p).await?;
        let svc = PodsServer::new(PodsService::new(cm.clone(), crate::kubelet::dra::core::NODE_NAME));
        bus.emit(KubeletEvent::PodsApi { socket: p.display().to_string() }, Some(number));
        gen.tasks.spawn(async move {
            let _g = g;
            let _ = serve(l, svc, std::future::pending()).await;
        });
    }
    if let Some(dir) = &s.manifests {
        gen.tasks.spawn(watch_manifests(cm.clone(), dir.clone(), s.wake_on_changes));
    }
    if let Some(c) = s.cluster.as_ref().or(own_api) {
        let mut machine = crate::kubelet::cluster::objects::Machine::here(&s.manager.profile.version.to_string());
        if s.manager.profile.dra_node_allocatable_resources.enabled() {
            machine.declared_features.push(crate::controlplane::apiserver::gated::NODE_ALLOCATABLE_FEATURE.to_string());
        }
        gen.tasks.spawn(crate::kubelet::cluster::run_pods(cm.clone(), c.clone(), machine, s.manifests.is_none()));
    }
    if let Some(dir) = &s.plugins_registry_dir {
        let handlers = Handlers::kubelet(&cm.devices, cm.dra.as_ref(), s.dial_timeout);
        let alias = s.endpoint_alias.clone();
        let wake = s.wake_on_changes;
        gen.tasks.spawn(crate::kubelet::watcher::run(cm.clone(), handlers, dir.clone(), s.dial_timeout, alias, wake));
    }
    Ok(cm)
}

/// A restart request: why, and who waits for the new generation.
type RestartRequest = (String, oneshot::Sender<Result<()>>);

/// A running node. Dropping it without [`Node::stop`] cancels its tasks.
pub struct Node {
    bus: EventBus,
    current: watch::Receiver<Option<Arc<ContainerManager>>>,
    restart: mpsc::Sender<RestartRequest>,
    /// The engine's tasks: stopping them ends the running generation.
    tasks: Tasks,
    /// How the engine ended (shared: every watcher sees the one error).
    ended: watch::Receiver<Option<std::result::Result<(), Arc<Error>>>>,
    kubelet_socket: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.tasks.cancel();
    }
}

impl Node {
    /// Start a node; returns once its first generation serves (or failed to).
    /// Subscribe to `bus` before calling to see every event from the start.
    pub async fn start(spec: NodeSpec, bus: EventBus) -> Result<Node> {
        let (current_tx, current) = watch::channel::<Option<Arc<ContainerManager>>>(None);
        let (restart_tx, restart_rx) = mpsc::channel::<RestartRequest>(4);
        let (ended_tx, ended) = watch::channel(None);
        let (first_tx, first_rx) = oneshot::channel::<Result<()>>();
        let tasks = Tasks::new();
        let kubelet_socket = spec.plugin_dir.join(KUBELET_SOCKET_NAME);
        let (b, st) = (bus.clone(), tasks.token().clone());
        drop(tasks.spawn_joined(async move {
            let r = run(spec, b, st, current_tx, restart_rx, first_tx).await;
            let _ = ended_tx.send(Some(r.map_err(Arc::new)));
        }));
        let node = Node { bus, current, restart: restart_tx, tasks, ended, kubelet_socket };
        match first_rx.await {
            Ok(Ok(())) => Ok(node),
            Ok(Err(e)) => {
                node.stop().await;
                Err(e)
            }
            Err(_) => {
                let mut ended = node.ended.clone();
                let why = ended.wait_for(Option::is_some).await.ok().and_then(|r| r.clone()).and_then(|r| r.err());
                node.stop().await;
                Err(why.map_or_else(|| Error::failed("the kubelet engine stopped at start"), Error::failed_from))
            }
        }
    }

    /// Every event from now on.
    pub fn events(&self) -> mpsc::UnboundedReceiver<Arc<crate::kubelet::event::Stamped>> {
        self.bus.subscribe()
    }

    /// kubelet.sock.
    pub fn kubelet_socket(&self) -> &Path {
        &self.kubelet_socket
    }

    /// The running generation's manager (waits up to 5 s during a restart).
    async fn manager(&self) -> Option<Arc<ContainerManager>> {
        let mut c = self.current.clone();
        let next = tokio::time::timeout(RESTART_WAIT, c.wait_for(Option::is_some)).await;
        next.ok().and_then(|r| r.ok()).and_then(|m| m.clone())
    }

    /// Write the device manager's checkpoint now if its state changed since
    /// the last write. When this returns the file holds the state as of the
    /// call (the writer is coalesced and asynchronous; the kubelet writes
    /// inside each update, so a comparison with its file syncs here first).
    pub async fn write_checkpoint(&self) -> Result<()> {
        match self.manager().await {
            Some(m) => m.devices.flush(false).await,
            None => Err(Error::failed("the kubelet is restarting; try again")),
        }
    }

    /// The node's status, as `dpctl node` shows it (None while restarting for over 5 s).
    pub async fn status(&self) -> Option<NodeStatus> {
        self.manager().await.map(|m| node_status(&m))
    }

    /// Restart in place (as SIGHUP does); returns once the next generation serves.
    pub async fn restart(&self, reason: &str) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.restart
            .send((reason.to_string(), tx))
            .await
            .map_err(|_| Error::failed("the kubelet engine has stopped; cannot restart it"))?;
        rx.await.map_err(|_| Error::failed("the kubelet engine stopped while restarting"))?
    }

    /// Admit a pod; the error says why (its text is the kubelet's, its reason the pod status reason).
    pub async fn admit(
        &self,
        pod: crate::kubelet::manifest::Pod,
    ) -> std::result::Result<(), crate::kubelet::devicemanager::core::AdmissionError> {
        let Some(m) = self.manager().await else {
            return Err(crate::kubelet::devicemanager::core::AdmissionError::Invalid(
                "the kubelet is restarting; try again".into(),
            ));
        };
        let file = PathBuf::from(format!("(in process) {}", pod.key()));
        m.admit(pod, file).await
    }

    /// Remove a pod and free its devices.
    pub async fn remove(&self, uid: &str) {
        if let Some(m) = self.manager().await {
            m.remove_pod(uid).await;
        }
    }

    /// Wait until the engine ends by itself (kubelet.sock stopped serving).
    pub async fn finished(&self) -> Result<()> {
        let mut e = self.ended.clone();
        match e.wait_for(Option::is_some).await.ok().and_then(|r| r.clone()) {
            Some(Err(why)) => Err(Error::failed_from(why)),
            _ => Ok(()),
        }
    }

    /// Drive `work` while the node and a companion (a plugin or driver run
    /// beside it, whose end `companion` reports with its reason) keep
    /// running: either ending first is an error naming it.
    pub async fn race<T>(
        &self,
        work: impl std::future::Future<Output = Result<T>>,
        companion: &mut watch::Receiver<Option<String>>,
        what: &str,
    ) -> Result<T> {
        tokio::select! {
            r = work => r,
            r = self.finished() => Err(r.err().unwrap_or_else(|| Error::failed("the mock kubelet stopped"))),
            r = companion.wait_for(Option::is_some) => {
                Err(Error::failed(r.ok().and_then(|v| v.clone()).unwrap_or_else(|| format!("{what} stopped"))))
            }
        }
    }

    /// Whether the engine has ended by itself (or was stopped).
    pub fn has_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// Stop: end the generation (final checkpoint written), cancel and await every task.
    pub async fn stop(&self) {
        self.tasks.stop().await;
    }
}

/// Serve the status socket and metrics, then run generations until stopped.
async fn run(
    mut s: NodeSpec,
    bus: EventBus,
    stop: CancellationToken,
    current_tx: watch::Sender<Option<Arc<ContainerManager>>>,
    mut restart: mpsc::Receiver<RestartRequest>,
    first: oneshot::Sender<Result<()>>,
) -> Result<()> {
    let mut first = Some(first);
    let fail_first = |first: &mut Option<oneshot::Sender<Result<()>>>, e: Error| {
        let text = e.to_string();
        if let Some(f) = first.take() {
            let _ = f.send(Err(e));
        }
        Err(Error::failed(text))
    };
    // Process-wide tasks (status socket, metrics) outlive generations.
    let status = Tasks::new();
    let current_rx = current_tx.subscribe();
    // The metrics endpoint reads the device manager alone.
    let (devices_tx, devices_rx) = watch::channel::<Option<Arc<Manager>>>(None);
    {
        let p = status_socket(&s.plugin_dir);
        // Fail early if the status socket cannot be created.
        if let Some(dir) = p.parent() {
            if let Err(e) = crate::core::files::create_dir_all(dir) {
                return fail_first(&mut first, Error::io(dir, "cannot create the control directory", &e));
            }
        }
        let (c, st, b) = (current_rx.clone(), status.token().clone(), bus.clone());
        drop(status.spawn_joined(async move {
            if let Err(e) = serve_status(p, c, st, b.clone()).await {
                b.emit(KubeletEvent::Error { error: e.to_string(), socket: None }, None);
            }
        }));
    }
    if let Some(addr) = s.metrics_addr {
        let l = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                status.stop().await;
                let e = Error::failed(format!("--metrics-addr {addr}: cannot listen: {e}; choose a free port"));
                return fail_first(&mut first, e);
            }
        };
        bus.emit(KubeletEvent::Metrics { addr: format!("http://{addr}/metrics") }, None);
        drop(status.spawn_joined(crate::kubelet::metrics::serve(l, devices_rx.clone(), status.clone())));
    }
    let mut own_api = None;
    if let (Some(addr), Some(dra)) = (s.api_server, s.dra.as_mut()) {
        // The store with the control plane's controllers: the claims of the
        // API's pods bound to other nodes that joined it.
        let profile = &s.manager.profile;
        // Its gates are the profile's, `--feature-gates` applied (as the kubelet's allocator's).
        let gates = crate::controlplane::controller::Gates {
            features: profile.allocator_features(),
            extended: profile.dra_extended_resource.enabled(),
            workload_claims: profile.dra_workload_resource_claims.enabled(),
            node_allocatable: crate::controlplane::nodealloc::Accounting::of(
                profile.version.minor(),
                profile.dra_node_allocatable_resources.enabled(),
            ),
        };
        let (store, timer) = crate::controlplane::controller::plane_gated(gates);
        // The API server's gates are the profile's (kube-apiserver's strategies drop disabled fields).
        let store = std::sync::Arc::new(
            store
                .with_api_minor(profile.version.minor())
                .with_api_gates(profile.api_gates())
                .with_resource_betas(profile.api_resource_v1beta2, profile.api_resource_v1beta1)
                .with_generic_workload(profile.generic_workload.enabled())
                .with_workload_resource_claims(profile.dra_workload_resource_claims.enabled())
                .with_pod_group_preemption_policy(profile.pod_group_preemption_policy.enabled()),
        );
        dra.api = Some(store.clone());
        // The device-taint eviction controller's timer, and its evictions
        // reported as the static pods' are; cancelled and awaited with the
        // store's other tasks.
        let (resync, b) = (store.clone(), bus.clone());
        status.spawn(timer.run(
            move || resync.resync(),
            move |e| b.emit(crate::kubelet::dra::core::taints::evicted_event(&e.eviction), None),
        ));
        let started = crate::controlplane::apiserver::start(
            addr,
            &dra.root,
            crate::kubelet::dra::core::NODE_NAME.to_string(),
            s.manager.profile.version.minor(),
            store,
            status.token().clone(),
            status.tracker().clone(),
            s.api_server_mode,
        )
        .await;
        match started {
            Ok(a) => {
                // Its own pods of the API (bound to this node) come through the
                // same client as a cluster's: the kubeconfig it wrote.
                match crate::client::kube::load_kubeconfig(&a.kubeconfig) {
                    Ok(api) => {
                        let node = crate::kubelet::dra::core::NODE_NAME.to_string();
                        own_api = Some(crate::kubelet::cluster::ClusterSpec { api, node, labels: Default::default() });
                    }
                    Err(e) => {
                        status.stop().await;
                        return fail_first(&mut first, e);
                    }
                }
                bus.emit(KubeletEvent::ApiServer { addr: a.url, kubeconfig: a.kubeconfig.display().to_string() }, None)
            }
            Err(e) => {
                status.stop().await;
                return fail_first(&mut first, e);
            }
        }
    }
    if let Some(c) = &s.cluster {
        let mut machine = crate::kubelet::cluster::objects::Machine::here(&s.manager.profile.version.to_string());
        if s.manager.profile.dra_node_allocatable_resources.enabled() {
            machine.declared_features.push(crate::controlplane::apiserver::gated::NODE_ALLOCATABLE_FEATURE.to_string());
        }
        drop(status.spawn_joined(crate::kubelet::cluster::run_node(
            c.clone(),
            machine,
            current_rx.clone(),
            bus.clone(),
            status.token().clone(),
        )));
    }
    let mut number = 0u64;
    let mut waiting: Option<oneshot::Sender<Result<()>>> = None;
    let result = loop {
        let started = Instant::now();
        let gen = Generation::new(number);
        let mgr = match start_generation(&s, own_api.as_ref(), &bus, gen.clone()).await {
            Ok(m) => m,
            Err(e) => {
                gen.tasks.stop().await;
                if let Some(w) = waiting.take() {
                    let _ = w.send(Err(Error::failed(e.to_string())));
                }
                break fail_first(&mut first, e);
            }
        };
        let _ = current_tx.send(Some(mgr.clone()));
        let _ = devices_tx.send(Some(mgr.devices.clone()));
        let kubelet_socket = s.plugin_dir.join(KUBELET_SOCKET_NAME).display().to_string();
        let pod_resources_socket = s.pod_resources_socket.as_ref().map(|p| p.display().to_string());
        let start_ms = millis(started.elapsed());
        let event = if number == 0 {
            KubeletEvent::Started { kubelet_socket, pod_resources_socket, start_ms }
        } else {
            KubeletEvent::Restarted { kubelet_socket, pod_resources_socket, start_ms }
        };
        bus.emit(event, Some(number));
        if let Some(f) = first.take() {
            let _ = f.send(Ok(()));
        }
        if let Some(w) = waiting.take() {
            let _ = w.send(Ok(()));
        }
        let timer = async {
            match s.restart_every {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let mut quit = false;
        let mut failure = None;
        tokio::select! {
            _ = stop.cancelled() => quit = true,
            r = restart.recv() => match r {
                Some((reason, ack)) => {
                    bus.emit(KubeletEvent::Restarting { reason }, Some(number));
                    waiting = Some(ack);
                }
                None => quit = true,
            },
            _ = timer => bus.emit(KubeletEvent::Restarting { reason: "--restart-every".into() }, Some(number)),
            _ = gen.tasks.cancelled() => {
                failure = Some(Error::failed("the kubelet socket stopped serving"));
                quit = true;
            }
        }
        let _ = current_tx.send(None);
        let _ = devices_tx.send(None);
        mgr.close().await;
        if let Some(e) = failure {
            break Err(e);
        }
        if quit {
            break Ok(());
        }
        number += 1;
    };
    status.stop().await;
    if result.is_ok() {
        bus.emit(KubeletEvent::Stopped, None);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect: a file was marked seen before it was parsed, and a failed
    /// parse task dropped it for good (same mtime and length: never read again).
    #[tokio::test]
    async fn a_failed_parse_task_leaves_its_files_to_be_read_again() {
        let (a, b, other) = (PathBuf::from("m/a.yaml"), PathBuf::from("m/b.yaml"), PathBuf::from("m/c.yaml"));
        let mut seen: BTreeMap<PathBuf, Seen> = [&a, &b, &other]
            .into_iter()
            .map(|f| (f.clone(), Seen { modified: None, len: 1, uid: None, objects: vec![] }))
            .collect();
        let changed = vec![a.clone(), b.clone()];
        let died = tokio::task::spawn_blocking(|| -> Vec<u8> { panic!("parser died") }).await;
        let r = parse_outcome(&mut seen, &changed, died);
        let why = r.expect_err("the failure is reported");
        assert!(why.is_panic(), "{why}");
        assert!(!seen.contains_key(&a) && !seen.contains_key(&b), "the next scan reads them again");
        assert!(seen.contains_key(&other), "files the task was not given stay seen");
        let ok = tokio::task::spawn_blocking(|| vec![1u8]).await;
        assert_eq!(parse_outcome(&mut seen, std::slice::from_ref(&other), ok).unwrap(), [1]);
        assert!(seen.contains_key(&other));
    }
}
