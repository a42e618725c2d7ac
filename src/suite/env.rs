//! The suite's I/O: the temp node tree, the plugin's process (spawned,
//! signalled, restarted, optionally in a private mount namespace), a
//! recording kubelet Registration server for protocol checks, and the mock
//! kubelet (this binary) for pods. Every task started here has an owner
//! that stops and awaits it; every process is killed when its owner drops.

use crate::api::deviceplugin::{
    device_plugin_client::DevicePluginClient,
    registration_server::{Registration as RegistrationSvc, RegistrationServer},
    DevicePluginOptions, Empty, ListAndWatchResponse, RegisterRequest,
};
use crate::api::pluginregistration::{
    registration_client::RegistrationClient as WatcherClient, InfoRequest, RegistrationStatus,
};
use crate::api::podresources::{
    pod_resources_lister_client::PodResourcesListerClient, AllocatableResourcesRequest, ListPodResourcesRequest,
};
use crate::core::paths::KUBELET_SOCKET_NAME;
use crate::core::transport::{dial, find_sockets, listen, path_kind, serve, PathKind, TempDir};
use crate::core::{Error, Result};
use crate::plugin::server::stopped;
use prost::Message;
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tonic::transport::Channel;

/// The kubelet's root as a plugin with hard-coded paths expects it.
pub const KUBELET_ROOT: &str = "/var/lib/kubelet";

/// The node tree in a temp dir: the kubelet's directories, and ours.
#[derive(Debug)]
pub struct Tree {
    _dir: TempDir,
    /// The tree's root (stands for /var/lib/kubelet).
    pub root: PathBuf,
    /// device-plugins/
    pub plugin_dir: PathBuf,
    /// pod-resources/kubelet.sock
    pub pod_resources: PathBuf,
    /// plugins_registry/
    pub registry_dir: PathBuf,
    /// Pod manifests for the mock kubelet (outside the kubelet's tree).
    pub manifests: PathBuf,
    /// Logs of the plugin and the mock kubelet.
    pub logs: PathBuf,
}

impl Tree {
    /// Create a fresh tree.
    pub fn new() -> Result<Self> {
        let dir = TempDir::new(&format!("test-{}", std::process::id()))?;
        let root = dir.path().to_path_buf();
        let t = Tree {
            plugin_dir: root.join("device-plugins"),
            pod_resources: root.join("pod-resources").join(KUBELET_SOCKET_NAME),
            registry_dir: root.join("plugins_registry"),
            manifests: root.join(".manifests"),
            logs: root.join(".logs"),
            root,
            _dir: dir,
        };
        for d in ["device-plugins", "pod-resources", "plugins_registry", "plugins", ".manifests", ".logs"] {
            let p = t.root.join(d);
            std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, "cannot create the node tree", &e))?;
        }
        Ok(t)
    }

    /// kubelet.sock in the tree.
    pub fn kubelet_socket(&self) -> PathBuf {
        self.plugin_dir.join(KUBELET_SOCKET_NAME)
    }

    /// The paths the plugin is given: the tree's, or the kubelet's real
    /// paths when it runs isolated (where the tree is mounted over them).
    pub fn vars(&self, isolated: bool) -> Vars {
        let root = if isolated { PathBuf::from(KUBELET_ROOT) } else { self.root.clone() };
        Vars {
            plugin_dir: root.join("device-plugins"),
            kubelet_socket: root.join("device-plugins").join(KUBELET_SOCKET_NAME),
            plugins_registry_dir: root.join("plugins_registry"),
            pod_resources_socket: root.join("pod-resources").join(KUBELET_SOCKET_NAME),
        }
    }

    /// A path the plugin reported (maybe under /var/lib/kubelet when isolated) as seen from here.
    pub fn host_path(&self, reported: &Path) -> PathBuf {
        match reported.strip_prefix(KUBELET_ROOT) {
            Ok(rest) if !self.root.starts_with(KUBELET_ROOT) => self.root.join(rest),
            _ => reported.to_path_buf(),
        }
    }
}

/// The values of the placeholders in the plugin's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vars {
    /// `{plugin-dir}`, `$DPCTL_TEST_PLUGIN_DIR`
    pub plugin_dir: PathBuf,
    /// `{kubelet-socket}`, `$DPCTL_TEST_KUBELET_SOCKET`
    pub kubelet_socket: PathBuf,
    /// `{plugins-registry-dir}`, `$DPCTL_TEST_PLUGINS_REGISTRY_DIR`
    pub plugins_registry_dir: PathBuf,
    /// `{pod-resources-socket}`, `$DPCTL_TEST_POD_RESOURCES_SOCKET`
    pub pod_resources_socket: PathBuf,
}

impl Vars {
    fn pairs(&self) -> [(&'static str, &'static str, String); 4] {
        [
            ("{plugin-dir}", "DPCTL_TEST_PLUGIN_DIR", self.plugin_dir.display().to_string()),
            ("{kubelet-socket}", "DPCTL_TEST_KUBELET_SOCKET", self.kubelet_socket.display().to_string()),
            (
                "{plugins-registry-dir}",
                "DPCTL_TEST_PLUGINS_REGISTRY_DIR",
                self.plugins_registry_dir.display().to_string(),
            ),
            (
                "{pod-resources-socket}",
                "DPCTL_TEST_POD_RESOURCES_SOCKET",
                self.pod_resources_socket.display().to_string(),
            ),
        ]
    }

    /// Replace every placeholder in one argument.
    pub fn substitute(&self, arg: &str) -> String {
        self.pairs().iter().fold(arg.to_string(), |a, (ph, _, v)| a.replace(ph, v))
    }

    /// The environment variables exported to the plugin.
    pub fn env(&self) -> Vec<(String, String)> {
        self.pairs().into_iter().map(|(_, k, v)| (k.to_string(), v)).collect()
    }
}

/// How the plugin's process is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Not at all: it gets the tree's paths.
    None,
    /// A private mount namespace (as root).
    Root,
    /// A user namespace and a private mount namespace (rootless).
    Rootless,
}

/// The script run inside the new mount namespace: a tmpfs over
/// /var/lib/kubelet (or over /var/lib, with /var/lib's entries bound back,
/// when the host has no /var/lib/kubelet), then the tree's directories
/// bound over the kubelet's. Only this namespace sees any of it.
const ISOLATE_SCRIPT: &str = r#"set -e
T="$1"; shift
K=/var/lib/kubelet
if [ -d "$K" ]; then
  mount -t tmpfs -o mode=0755 dpctl-test "$K"
else
  [ -d /var/lib ] || { echo "/var/lib does not exist" >&2; exit 1; }
  H="$T/.host-var-lib"
  mkdir -p "$H"
  mount --rbind /var/lib "$H"
  mount -t tmpfs -o mode=0755 dpctl-test /var/lib
  for e in "$H"/* "$H"/.[!.]* "$H"/..?*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    n="/var/lib/${e##*/}"
    if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$n" || true
    elif [ -d "$e" ]; then mkdir "$n" && mount --rbind "$e" "$n" || true
    else : > "$n" && mount --bind "$e" "$n" || true; fi
  done
  mkdir "$K"
fi
for d in device-plugins pod-resources plugins_registry plugins; do
  mkdir -p "$K/$d"
  mount --bind "$T/$d" "$K/$d"
done
exec "$@"
"#;

/// The command line that runs `argv` isolated (pure).
pub fn isolated_argv(mode: Isolation, tree_root: &Path, argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = match mode {
        Isolation::None => return argv.to_vec(),
        Isolation::Root => vec!["unshare".into(), "--mount".into(), "--propagation".into(), "private".into()],
        Isolation::Rootless => vec![
            "unshare".into(),
            "--user".into(),
            "--map-root-user".into(),
            "--mount".into(),
            "--propagation".into(),
            "private".into(),
        ],
    };
    out.extend(["sh".into(), "-c".into(), ISOLATE_SCRIPT.into(), "dpctl-isolate".into()]);
    out.push(tree_root.display().to_string());
    out.extend(argv.iter().cloned());
    out
}

/// Find out whether isolation works here, by isolating `true` once.
pub async fn probe_isolation(tree: &Tree) -> Result<Isolation> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mode = if unsafe { libc::geteuid() } == 0 { Isolation::Root } else { Isolation::Rootless };
    let argv = isolated_argv(mode, &tree.root, &["true".to_string()]);
    let out = tokio::process::Command::new(&argv[0]).args(&argv[1..]).stdin(Stdio::null()).output().await;
    let why = match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "the unshare command (util-linux) is not installed".to_string()
        }
        Err(e) => format!("cannot run unshare: {e}"),
        Ok(o) if o.status.success() => return Ok(mode),
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("failed").to_string(),
    };
    let hint = match mode {
        Isolation::Rootless => "run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0)",
        _ => "the kernel or a seccomp profile forbids mount namespaces here (in a container, run it privileged)",
    };
    Err(Error::failed(format!(
        "--isolate is unavailable: {why}; {hint}, or drop --isolate and pass {{plugin-dir}} to the plugin"
    )))
}

/// The plugin's process, in its own process group; killed with its group on drop.
#[derive(Debug)]
pub struct PluginProcess {
    child: tokio::process::Child,
    pgid: i32,
    exited: Option<std::process::ExitStatus>,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

/// Send `sig` to a process group (ignores a group that is gone).
fn signal_group(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

impl PluginProcess {
    /// Start `argv` with `env` added; output goes to `log`.
    pub fn spawn(argv: &[String], env: &[(String, String)], log: &Path) -> Result<Self> {
        let Some((prog, args)) = argv.split_first() else {
            return Err(Error::usage("no plugin command; put it after --, e.g. dpctl test -- ./my-plugin"));
        };
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io(log, "cannot create the plugin log", &e))?;
        let err = out.try_clone().map_err(|e| Error::io(log, "cannot create the plugin log", &e))?;
        let child = tokio::process::Command::new(prog)
            .args(args)
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::failed(format!("cannot start the plugin {prog:?}: {e}; check the command after --")))?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        Ok(PluginProcess { child, pgid, exited: None, log: log.to_path_buf() })
    }

    /// Send SIGTERM to the plugin's process group.
    pub fn terminate(&self) {
        signal_group(self.pgid, libc::SIGTERM);
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Wait up to `within` for it to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        if self.exited.is_none() {
            self.exited = tokio::time::timeout(within, self.child.wait()).await.ok().and_then(|r| r.ok());
        }
        self.exited
    }

    /// Stop it: SIGTERM, then SIGKILL to the group after `grace`.
    pub async fn stop(mut self, grace: Duration) {
        self.terminate();
        if self.wait_exit(grace).await.is_none() {
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.wait_exit(Duration::from_secs(5)).await;
        }
        // Leftovers of the group (a wrapper's children).
        signal_group(self.pgid, libc::SIGKILL);
        self.pgid = 0;
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

/// A log on one line for evidence: its error lines, then its last lines.
pub fn log_tail(path: &Path, lines: usize) -> String {
    super::evidence::log_excerpt(&std::fs::read_to_string(path).unwrap_or_default(), lines, 600)
}

/// Whether `path` holds a socket now.
pub fn is_socket(path: &Path) -> bool {
    path_kind(path).ok() == Some(PathKind::Socket)
}

/// The (device, inode, change time) of a socket, to tell a re-created one:
/// an inode number is often reused at once, the change time is not.
pub fn socket_ident(path: &Path) -> Option<(u64, u64, i64, i64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|_| is_socket(path))
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// A DevicePlugin client that accepts snapshots of any size (the suite measures them itself).
pub async fn plugin_client(socket: &Path, timeout: Duration) -> Result<DevicePluginClient<Channel>> {
    Ok(DevicePluginClient::new(dial(socket, timeout).await?)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX))
}

/// How a plugin registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Register on kubelet.sock.
    KubeletSocket,
    /// A socket in plugins_registry.
    PluginWatcher,
}

/// One registration, as the recording kubelet saw it.
#[derive(Debug, Clone)]
pub struct Registration {
    /// When it arrived.
    pub at: Instant,
    /// Which kubelet generation received it.
    pub generation: u64,
    /// How.
    pub via: Via,
    /// Version(s): RegisterRequest.version, or PluginInfo.supported_versions joined by ",".
    pub version: String,
    /// Resource name.
    pub resource: String,
    /// Endpoint as sent.
    pub endpoint: String,
    /// The endpoint's socket, as seen from here.
    pub socket: PathBuf,
    /// RegisterRequest.options (None with the plugin watcher).
    pub request_options: Option<DevicePluginOptions>,
    /// The dial-back: GetDevicePluginOptions, or why it failed.
    pub dial_back: std::result::Result<DevicePluginOptions, String>,
    /// Why the kubelet would reject it (the recorder answers with this error).
    pub rejected: Option<String>,
    /// With the plugin watcher: the NotifyRegistrationStatus result.
    pub notify: Option<std::result::Result<(), String>>,
}

/// What the recording kubelet saw.
#[derive(Debug, Clone)]
pub enum Event {
    /// A registration.
    Registered(Box<Registration>),
    /// A ListAndWatch message on the kubelet's stream.
    Snapshot {
        /// Kubelet generation.
        generation: u64,
        /// The endpoint.
        socket: PathBuf,
        /// When.
        at: Instant,
        /// Encoded size in bytes.
        bytes: usize,
        /// The snapshot.
        resp: ListAndWatchResponse,
    },
    /// The kubelet's stream ended. The recorder never ends a stream itself
    /// (a stopping recorder drops its streams without reporting them), so
    /// this is the plugin's doing, or a dial that failed.
    StreamEnded {
        /// Kubelet generation.
        generation: u64,
        /// The endpoint.
        socket: PathBuf,
        /// When the kubelet opened the stream.
        opened: Instant,
        /// When it ended.
        at: Instant,
        /// Messages received before the end.
        messages: u64,
        /// Why: how the plugin ended it.
        why: String,
    },
    /// A Register call arrived; sent at once, before the dial-back (which
    /// may take the kubelet's 10 s), so a slow or failing dial-back is seen
    /// as it happens. A [`Event::Registered`] follows with the result.
    RegisterStarted {
        /// Kubelet generation.
        generation: u64,
        /// When it arrived.
        at: Instant,
        /// RegisterRequest.resource_name.
        resource: String,
        /// RegisterRequest.endpoint.
        endpoint: String,
    },
    /// The dial-back inside Register failed (sent once per Register, at the
    /// first failure; the kubelet keeps trying for 10 s).
    DialBackFailing {
        /// Kubelet generation.
        generation: u64,
        /// The endpoint's socket.
        socket: PathBuf,
        /// When the dial failed.
        at: Instant,
        /// The error.
        error: String,
    },
}

#[derive(Clone)]
struct Recording {
    generation: u64,
    tree_plugin_dir: PathBuf,
    events: mpsc::UnboundedSender<Event>,
    follow: mpsc::UnboundedSender<PathBuf>,
    timeout: Duration,
}

/// Dial back a plugin (retrying for up to 10 s, as the kubelet) and read
/// its options; `failing` hears the first failed dial as it happens.
async fn dial_back(
    socket: &Path,
    timeout: Duration,
    failing: impl FnOnce(String),
) -> std::result::Result<DevicePluginOptions, String> {
    let start = Instant::now();
    let mut failing = Some(failing);
    let mut client = loop {
        match plugin_client(socket, timeout.min(Duration::from_secs(10))).await {
            Ok(c) => break c,
            Err(e) if start.elapsed() >= Duration::from_secs(10) => return Err(format!("dial failed for 10s: {e}")),
            Err(e) => {
                if let Some(f) = failing.take() {
                    f(e.to_string());
                }
                tokio::time::sleep(Duration::from_millis(100)).await
            }
        }
    };
    match tokio::time::timeout(timeout, client.get_device_plugin_options(Empty {})).await {
        Err(_) => Err(format!("GetDevicePluginOptions timed out after {timeout:?}")),
        Ok(Err(s)) => Err(format!("GetDevicePluginOptions failed: {:?}: {}", s.code(), s.message())),
        Ok(Ok(r)) => Ok(r.into_inner()),
    }
}

#[tonic::async_trait]
impl RegistrationSvc for Recording {
    async fn register(
        &self,
        req: tonic::Request<RegisterRequest>,
    ) -> std::result::Result<tonic::Response<Empty>, tonic::Status> {
        let at = Instant::now();
        let r = req.into_inner();
        let rejected = if r.version != crate::api::VERSION {
            Some(crate::kubelet::registration::unsupported_version_text(&r.version))
        } else if let Some(p) = crate::core::validate::resource_name_problem(&r.resource_name) {
            Some(format!("invalid resource name {:?}: {p}", r.resource_name))
        } else {
            super::checks::endpoint_problem(&r.endpoint)
        };
        let socket = self.tree_plugin_dir.join(&r.endpoint);
        let _ = self.events.send(Event::RegisterStarted {
            generation: self.generation,
            at,
            resource: r.resource_name.clone(),
            endpoint: r.endpoint.clone(),
        });
        let failing = |error: String| {
            let _ = self.events.send(Event::DialBackFailing {
                generation: self.generation,
                socket: socket.clone(),
                at: Instant::now(),
                error,
            });
        };
        let dial = match &rejected {
            Some(e) => Err(format!("not dialled: {e}")),
            None => dial_back(&socket, self.timeout, failing).await,
        };
        let reg = Registration {
            at,
            generation: self.generation,
            via: Via::KubeletSocket,
            version: r.version.clone(),
            resource: r.resource_name.clone(),
            endpoint: r.endpoint.clone(),
            socket: socket.clone(),
            request_options: r.options,
            dial_back: dial.clone(),
            rejected: rejected.clone(),
            notify: None,
        };
        let _ = self.events.send(Event::Registered(Box::new(reg)));
        if let Some(e) = rejected {
            return Err(tonic::Status::unknown(e));
        }
        match dial {
            Ok(_) => {
                let _ = self.follow.send(socket);
                Ok(tonic::Response::new(Empty {}))
            }
            Err(e) => Err(tonic::Status::unknown(e)),
        }
    }
}

/// Follow one ListAndWatch stream as the kubelet does, reporting every message.
async fn follow(socket: PathBuf, generation: u64, events: mpsc::UnboundedSender<Event>, timeout: Duration) {
    let opened = Instant::now();
    let mut messages = 0u64;
    let ended = |why: String, messages: u64| {
        let _ = events.send(Event::StreamEnded {
            generation,
            socket: socket.clone(),
            opened,
            at: Instant::now(),
            messages,
            why,
        });
    };
    let mut client = match plugin_client(&socket, timeout).await {
        Ok(c) => c,
        Err(e) => return ended(format!("the kubelet could not dial the plugin: {e}"), 0),
    };
    let mut stream = match client.list_and_watch(Empty {}).await {
        Ok(s) => s.into_inner(),
        Err(s) => {
            return ended(
                format!("the plugin refused ListAndWatch: {}", super::evidence::status_text(s.code(), s.message())),
                0,
            )
        }
    };
    loop {
        match stream.message().await {
            Ok(Some(m)) => {
                messages += 1;
                let _ = events.send(Event::Snapshot {
                    generation,
                    socket: socket.clone(),
                    at: Instant::now(),
                    bytes: m.encoded_len(),
                    resp: m,
                });
            }
            Ok(None) => return ended("the plugin ended the stream (status OK)".into(), messages),
            Err(s) if super::evidence::is_connection_lost(s.message()) => {
                return ended(
                    format!("the plugin closed the connection (exited?) ({:?}: {})", s.code(), s.message()),
                    messages,
                )
            }
            Err(s) => {
                return ended(format!("the plugin ended the stream with {:?}: {}", s.code(), s.message()), messages)
            }
        }
    }
}

/// Register a plugin-watcher socket as the kubelet does: GetInfo, dial back, notify.
async fn watcher_register(
    reg_socket: PathBuf,
    rec: Recording,
    tree_root: PathBuf,
    tree_plugin_dir: PathBuf,
) -> Option<PathBuf> {
    let at = Instant::now();
    let timeout = rec.timeout;
    let mut client = WatcherClient::new(dial(&reg_socket, timeout).await.ok()?);
    let info =
        tokio::time::timeout(Duration::from_secs(1), client.get_info(InfoRequest {})).await.ok()?.ok()?.into_inner();
    if info.r#type != "DevicePlugin" {
        return None;
    }
    let socket = if info.endpoint.is_empty() {
        reg_socket.clone()
    } else {
        let p = PathBuf::from(&info.endpoint);
        match p.strip_prefix(KUBELET_ROOT) {
            Ok(rest) if !tree_root.starts_with(KUBELET_ROOT) => tree_root.join(rest),
            _ => p,
        }
    };
    let rejected = if !info.supported_versions.iter().any(|v| v == crate::api::VERSION) {
        Some(format!("supported_versions {:?} lacks {:?}", info.supported_versions, crate::api::VERSION))
    } else if let Some(p) = crate::core::validate::resource_name_problem(&info.name) {
        Some(format!("invalid resource name {:?}: {p}", info.name))
    } else if socket.parent() != Some(tree_plugin_dir.as_path()) {
        Some(format!("endpoint {:?} is not in the device-plugin directory", info.endpoint))
    } else {
        None
    };
    let dial = match &rejected {
        Some(e) => Err(format!("not dialled: {e}")),
        None => dial_back(&socket, timeout, |_| {}).await,
    };
    let status = RegistrationStatus {
        plugin_registered: rejected.is_none() && dial.is_ok(),
        error: rejected.clone().or(dial.clone().err()).unwrap_or_default(),
    };
    let notify = match tokio::time::timeout(Duration::from_secs(5), client.notify_registration_status(status)).await {
        Err(_) => Err("NotifyRegistrationStatus timed out after 5s".to_string()),
        Ok(Err(s)) => Err(format!("NotifyRegistrationStatus failed: {:?}: {}", s.code(), s.message())),
        Ok(Ok(_)) => Ok(()),
    };
    let ok = rejected.is_none() && dial.is_ok() && notify.is_ok();
    let _ = rec.events.send(Event::Registered(Box::new(Registration {
        at,
        generation: rec.generation,
        via: Via::PluginWatcher,
        version: info.supported_versions.join(","),
        resource: info.name,
        endpoint: info.endpoint,
        socket: socket.clone(),
        request_options: None,
        dial_back: dial,
        rejected,
        notify: Some(notify),
    })));
    ok.then_some(socket)
}

/// A recording kubelet: serves Registration on kubelet.sock and watches
/// plugins_registry; dials every plugin back, follows its ListAndWatch, and
/// reports everything as [`Event`]s. One generation per start.
pub struct Recorder {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Start generation `generation` on the tree.
    pub async fn start(
        tree: &Tree,
        generation: u64,
        events: mpsc::UnboundedSender<Event>,
        timeout: Duration,
    ) -> Result<Self> {
        let (listener, guard) = listen(&tree.kubelet_socket()).await?;
        let (follow_tx, mut follow_rx) = mpsc::unbounded_channel();
        let rec = Recording {
            generation,
            tree_plugin_dir: tree.plugin_dir.clone(),
            events: events.clone(),
            follow: follow_tx,
            timeout,
        };
        let (stop, stop_rx) = watch::channel(false);
        let (registry, root, plugin_dir) = (tree.registry_dir.clone(), tree.root.clone(), tree.plugin_dir.clone());
        let task = tokio::spawn(async move {
            let _guard = guard;
            let mut tasks: JoinSet<Option<PathBuf>> = JoinSet::new();
            let mut st = stop_rx.clone();
            let server = serve(listener, RegistrationServer::new(rec.clone()), async move { stopped(&mut st).await });
            tokio::pin!(server);
            let mut seen: HashSet<(PathBuf, (u64, u64, i64, i64))> = HashSet::new();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut stop_rx = stop_rx;
            let mut served = false;
            loop {
                tokio::select! {
                    _ = &mut server => { served = true; break },
                    _ = stopped(&mut stop_rx) => break,
                    Some(sock) = follow_rx.recv() => {
                        let (ev, t) = (rec.events.clone(), rec.timeout);
                        tasks.spawn(async move { follow(sock, generation, ev, t).await; None });
                    }
                    Some(Ok(Some(sock))) = tasks.join_next(), if !tasks.is_empty() => {
                        let (ev, t) = (rec.events.clone(), rec.timeout);
                        tasks.spawn(async move { follow(sock, generation, ev, t).await; None });
                    }
                    _ = tick.tick() => {
                        for s in find_sockets(&registry) {
                            let Some(id) = socket_ident(&s) else { continue };
                            if seen.insert((s.clone(), id)) {
                                tasks.spawn(watcher_register(s, rec.clone(), root.clone(), plugin_dir.clone()));
                            }
                        }
                    }
                }
            }
            // Like a kubelet going away: every stream is cancelled, no call waits.
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            if !served {
                let _ = tokio::time::timeout(Duration::from_millis(500), &mut server).await;
            }
        });
        Ok(Recorder { stop, task })
    }

    /// Stop: cancel every stream, stop serving, remove kubelet.sock.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Delete every socket in the plugin directory, as the kubelet does at start.
pub fn wipe_sockets(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if is_socket(&e.path()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The mock kubelet (this binary's `mock-kubelet`), for pods and PodResources.
pub struct MockKubelet {
    child: tokio::process::Child,
    kubelet_socket: PathBuf,
    /// PodResources socket.
    pub pod_resources: PathBuf,
    /// Its log.
    pub log: PathBuf,
}

async fn wait_socket(path: &Path, within: Duration, not: Option<(u64, u64, i64, i64)>) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        let id = socket_ident(path);
        if id.is_some() && id != not && tokio::net::UnixStream::connect(path).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

impl MockKubelet {
    /// Start `exe mock-kubelet` on the tree and wait for its sockets.
    pub async fn start(exe: &Path, tree: &Tree) -> Result<Self> {
        let log = tree.logs.join("mock-kubelet.log");
        let out = std::fs::File::create(&log).map_err(|e| Error::io(&log, "cannot create the kubelet log", &e))?;
        let err = out.try_clone().map_err(|e| Error::io(&log, "cannot create the kubelet log", &e))?;
        let child = tokio::process::Command::new(exe)
            .arg("--plugin-dir")
            .arg(&tree.plugin_dir)
            .arg("mock-kubelet")
            .arg("--pod-resources-socket")
            .arg(&tree.pod_resources)
            .arg("--manifests")
            .arg(&tree.manifests)
            .arg("--plugins-registry-dir")
            .arg(&tree.registry_dir)
            .arg("--log-format")
            .arg("json")
            .env("DPCTL_WORKERS", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::failed(format!("cannot start the mock kubelet ({}): {e}", exe.display())))?;
        let mk = MockKubelet {
            child,
            kubelet_socket: tree.kubelet_socket(),
            pod_resources: tree.pod_resources.clone(),
            log,
        };
        if !wait_socket(&mk.kubelet_socket, Duration::from_secs(10), None).await
            || !wait_socket(&mk.pod_resources, Duration::from_secs(10), None).await
        {
            return Err(Error::failed(format!("the mock kubelet did not start: {}", log_tail(&mk.log, 3))));
        }
        Ok(mk)
    }

    /// Restart it in place (SIGHUP) and wait for the new kubelet.sock.
    pub async fn restart(&mut self) -> Result<()> {
        let restarts = |log: &Path| {
            std::fs::read_to_string(log).map(|t| t.matches("\"event\":\"restarted\"").count()).unwrap_or(0)
        };
        let before = restarts(&self.log);
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on our own child; no memory is involved.
            unsafe {
                libc::kill(pid as i32, libc::SIGHUP);
            }
        }
        let start = Instant::now();
        while restarts(&self.log) == before && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if restarts(&self.log) > before && wait_socket(&self.kubelet_socket, Duration::from_secs(10), None).await {
            Ok(())
        } else {
            Err(Error::failed(format!("the mock kubelet did not restart: {}", log_tail(&self.log, 3))))
        }
    }

    /// Stop it (SIGTERM, then SIGKILL).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on our own child; no memory is involved.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }

    async fn client(&self, timeout: Duration) -> Result<PodResourcesListerClient<Channel>> {
        Ok(PodResourcesListerClient::new(dial(&self.pod_resources, timeout).await?))
    }

    /// Allocatable device IDs per resource.
    pub async fn allocatable(&self, timeout: Duration) -> Result<BTreeMap<String, Vec<String>>> {
        let r = self
            .client(timeout)
            .await?
            .get_allocatable_resources(AllocatableResourcesRequest {})
            .await
            .map_err(|s| Error::failed(format!("GetAllocatableResources: {}", s.message())))?
            .into_inner();
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in r.devices {
            out.entry(d.resource_name).or_default().extend(d.device_ids);
        }
        Ok(out)
    }

    /// A pod's device IDs per resource, if the pod is listed.
    pub async fn pod_devices(&self, name: &str, timeout: Duration) -> Result<Option<BTreeMap<String, Vec<String>>>> {
        let r = self
            .client(timeout)
            .await?
            .list(ListPodResourcesRequest {})
            .await
            .map_err(|s| Error::failed(format!("List: {}", s.message())))?
            .into_inner();
        Ok(r.pod_resources.into_iter().find(|p| p.name == name).map(|p| {
            let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for c in p.containers {
                for d in c.devices {
                    out.entry(d.resource_name).or_default().extend(d.device_ids);
                }
            }
            out
        }))
    }
}

/// A pod manifest asking for `n` of `resource`.
pub fn pod_manifest(name: &str, resource: &str, n: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: dpctl-test\nspec:\n  containers:\n  - name: main\n    resources:\n      limits:\n        {resource}: {n}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_env() {
        let v = Vars {
            plugin_dir: "/t/device-plugins".into(),
            kubelet_socket: "/t/device-plugins/kubelet.sock".into(),
            plugins_registry_dir: "/t/plugins_registry".into(),
            pod_resources_socket: "/t/pod-resources/kubelet.sock".into(),
        };
        assert_eq!(v.substitute("--dir={plugin-dir}"), "--dir=/t/device-plugins");
        assert_eq!(
            v.substitute("{kubelet-socket}:{plugins-registry-dir}"),
            "/t/device-plugins/kubelet.sock:/t/plugins_registry"
        );
        assert_eq!(v.substitute("{unknown}"), "{unknown}");
        assert!(v.env().contains(&("DPCTL_TEST_PLUGIN_DIR".into(), "/t/device-plugins".into())));
    }

    #[test]
    fn isolation_wraps_only_when_asked() {
        let argv = vec!["plugin".to_string(), "--x".to_string()];
        assert_eq!(isolated_argv(Isolation::None, Path::new("/t"), &argv), argv);
        let r = isolated_argv(Isolation::Rootless, Path::new("/t"), &argv);
        assert_eq!(&r[..3], ["unshare", "--user", "--map-root-user"]);
        assert_eq!(&r[r.len() - 3..], ["/t", "plugin", "--x"]);
        let root = isolated_argv(Isolation::Root, Path::new("/t"), &argv);
        assert!(!root.contains(&"--user".to_string()) && root.contains(&"private".to_string()));
    }

    #[test]
    fn tree_maps_kubelet_paths() {
        let t = Tree::new().unwrap();
        assert_eq!(t.vars(true).plugin_dir, Path::new("/var/lib/kubelet/device-plugins"));
        assert_eq!(t.vars(false).plugin_dir, t.plugin_dir);
        assert_eq!(t.host_path(Path::new("/var/lib/kubelet/device-plugins/a.sock")), t.plugin_dir.join("a.sock"));
        assert!(pod_manifest("p", "v.e/x", 2).contains("v.e/x: 2"));
    }
}
