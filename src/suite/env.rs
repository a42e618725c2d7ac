//! The suite's I/O: the temp node tree, the plugin's process (spawned,
//! signalled, restarted, optionally in a private mount namespace), and the
//! kubelet — the engine `dpctl mock-kubelet` runs, in this process — whose
//! typed events the scenarios read. Every task started here has an owner
//! that stops and awaits it; every process is killed when its owner drops.

use crate::api::deviceplugin::{device_plugin_client::DevicePluginClient, DevicePluginOptions, ListAndWatchResponse};
use crate::api::podresources::{
    pod_resources_lister_client::PodResourcesListerClient, AllocatableResourcesRequest, ListPodResourcesRequest,
};
use crate::core::log::{LogFormat, Logger};
use crate::core::transport::{dial, path_kind, PathKind};
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, RejectStage, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::{NodeTree, TempNode, KUBELET_ROOT};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// The node tree in a temp dir (the kubelet's directories, and ours).
#[derive(Debug)]
pub struct Tree(TempNode);

impl std::ops::Deref for Tree {
    type Target = NodeTree;
    fn deref(&self) -> &NodeTree {
        &self.0.tree
    }
}

impl Tree {
    /// Create a fresh tree.
    pub fn new() -> Result<Self> {
        Ok(Tree(TempNode::new(&format!("test-{}", std::process::id()))?))
    }

    /// The paths the plugin is given: the tree's, or the kubelet's real
    /// paths when it runs isolated (where the tree is mounted over them).
    pub fn vars(&self, isolated: bool) -> Vars {
        let t = if isolated { NodeTree::under(Path::new(KUBELET_ROOT)) } else { (**self).clone() };
        Vars {
            kubelet_socket: t.kubelet_socket(),
            plugin_dir: t.plugin_dir,
            plugins_registry_dir: t.registry_dir,
            pod_resources_socket: t.pod_resources,
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

/// Why the command whose first word is `prog` cannot be started, if it
/// cannot (pure given `path_var`, the PATH): a name not on PATH, a path
/// that is missing, a directory or not executable. A first word with a
/// placeholder is checked when it runs.
pub fn unstartable(prog: &str, path_var: Option<&std::ffi::OsStr>, noun: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if prog.contains('{') {
        return None;
    }
    if prog.contains('/') {
        let p = Path::new(prog);
        let why = match std::fs::metadata(p) {
            Err(_) => "no such file; check the path",
            Ok(m) if m.is_dir() => "is a directory; name the executable",
            Ok(_) if !runnable(p) => "is not executable; chmod +x it",
            Ok(_) => return None,
        };
        return Some(format!("cannot start the {noun} command {prog:?}: {why}"));
    }
    let found = path_var.is_some_and(|v| std::env::split_paths(v).any(|d| runnable(&d.join(prog))));
    if found {
        return None;
    }
    let dpctl = if prog == "dpctl" { " (`cargo install --path .` in a dpctl checkout)" } else { "" };
    Some(format!(
        "cannot start the {noun} command {prog:?}: not found on PATH; install it or put it on PATH{dpctl}, or give its path"
    ))
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

/// The last lines of a log, on one line, for evidence.
pub fn log_tail(path: &Path, lines: usize) -> String {
    super::evidence::log_excerpt(&std::fs::read_to_string(path).unwrap_or_default(), lines, 600)
}

/// Whether `path` holds a socket now.
pub fn is_socket(path: &Path) -> bool {
    path_kind(path).ok() == Some(PathKind::Socket)
}

/// The identity of a socket, to tell a re-created one ([`crate::core::transport::FileIdent`]).
pub fn socket_ident(path: &Path) -> Option<crate::core::transport::FileIdent> {
    std::fs::symlink_metadata(path).ok().filter(|_| is_socket(path)).map(|m| crate::core::transport::file_ident(&m))
}

/// A DevicePlugin client that accepts snapshots of any size (the suite measures them itself).
pub async fn plugin_client(socket: &Path, timeout: Duration) -> Result<DevicePluginClient<Channel>> {
    Ok(DevicePluginClient::new(dial(socket, timeout).await?)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX))
}

pub use crate::kubelet::event::Via;

/// One registration, as the suite's kubelet saw it.
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
    pub dial_back: std::result::Result<DevicePluginOptions, StepFailed>,
    /// Why the kubelet rejected it (its text).
    pub rejected: Option<String>,
    /// With the plugin watcher: the NotifyRegistrationStatus result.
    pub notify: Option<std::result::Result<(), StepFailed>>,
}

/// A step of a registration that failed, with the kubelet's words for it
/// (from its `registration-rejected` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepFailed {
    /// The dial-back (GetDevicePluginOptions) failed.
    DialBack(String),
    /// No dial-back: the registration was refused before it (why).
    NotDialled(String),
    /// NotifyRegistrationStatus failed.
    Notify(String),
}

impl StepFailed {
    /// The kubelet's words.
    pub fn words(&self) -> &str {
        match self {
            StepFailed::DialBack(w) | StepFailed::NotDialled(w) | StepFailed::Notify(w) => w,
        }
    }
}

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepFailed::NotDialled(w) => write!(f, "not dialled: {w}"),
            StepFailed::DialBack(w) | StepFailed::Notify(w) => f.write_str(w),
        }
    }
}

impl std::error::Error for StepFailed {}

fn options(o: crate::kubelet::event::Options) -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: o.pre_start_required,
        get_preferred_allocation_available: o.get_preferred_allocation_available,
    }
}

/// What the suite reads from the kubelet's events: registrations (accepted
/// or not, with the kubelet's text), snapshots and stream ends. Plugin-watcher
/// registrations are held until NotifyRegistrationStatus is answered.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Every registration, in order.
    pub regs: Vec<Registration>,
    /// Every ListAndWatch message on the kubelet's streams.
    pub snaps: Vec<Snap>,
    /// Every stream end: (generation, endpoint, reason, when).
    pub ends: Vec<(u64, PathBuf, String, Instant)>,
    /// Kubelets since 1.37: one of several instances of a resource ended and
    /// only its own devices went: (generation, endpoint, allocatable now, when).
    pub gone: Vec<(u64, PathBuf, usize, Instant)>,
    /// Every rejected pod manifest: (file, pod status reason, the kubelet's message).
    pub rejected: Vec<(PathBuf, String, String)>,
    /// Stream ends after which the kubelet disconnected the *current* instance
    /// (kubelets up to 1.36, kubernetes#121994): (generation, the socket disconnected).
    pub disconnected: Vec<(u64, PathBuf)>,
    /// Every Register call as it arrived (before its dial-back): (generation, when, resource, endpoint).
    pub attempts: Vec<(u64, Instant, String, String)>,
    /// The first failed dial-back of each Register: (generation, socket, when, error).
    pub dial_fails: Vec<(u64, PathBuf, Instant, String)>,
    /// Plugin-watcher registrations waiting for NotifyRegistrationStatus, by endpoint.
    pending: BTreeMap<PathBuf, Registration>,
}

/// One ListAndWatch message on the kubelet's stream.
#[derive(Debug, Clone)]
pub struct Snap {
    /// Kubelet generation.
    pub generation: u64,
    /// The endpoint.
    pub socket: PathBuf,
    /// When.
    pub at: Instant,
    /// Encoded size in bytes.
    pub bytes: usize,
    /// The snapshot.
    pub resp: ListAndWatchResponse,
}

impl Seen {
    /// Take one engine event.
    pub fn take(&mut self, e: &Stamped) {
        let generation = e.generation.unwrap_or(0);
        match &e.event {
            KubeletEvent::Registered {
                resource,
                endpoint,
                endpoint_sent,
                via,
                version,
                request_options,
                pre_start_required,
                get_preferred_allocation_available,
                ..
            } => {
                let r = Registration {
                    at: e.at,
                    generation,
                    via: *via,
                    version: version.clone(),
                    resource: resource.clone(),
                    endpoint: endpoint_sent.clone(),
                    socket: PathBuf::from(endpoint),
                    request_options: request_options.map(options),
                    dial_back: Ok(DevicePluginOptions {
                        pre_start_required: *pre_start_required,
                        get_preferred_allocation_available: *get_preferred_allocation_available,
                    }),
                    rejected: None,
                    notify: None,
                };
                match via {
                    Via::KubeletSocket => self.regs.push(r),
                    Via::PluginWatcher => {
                        self.pending.insert(r.socket.clone(), r);
                    }
                }
            }
            KubeletEvent::WatcherRegistered { endpoint, .. } => {
                if let Some(mut r) = self.pending.remove(Path::new(endpoint)) {
                    r.notify = Some(Ok(()));
                    self.regs.push(r);
                }
            }
            KubeletEvent::RegistrationRejected {
                via,
                stage,
                resource,
                endpoint,
                socket,
                version,
                request_options,
                error,
                ..
            } => {
                let socket = PathBuf::from(socket);
                let earlier = self.pending.remove(&socket);
                let mut r = earlier.unwrap_or_else(|| Registration {
                    at: e.at,
                    generation,
                    via: *via,
                    version: version.clone(),
                    resource: resource.clone(),
                    endpoint: endpoint.clone(),
                    socket,
                    request_options: request_options.map(options),
                    dial_back: Err(StepFailed::NotDialled(error.clone())),
                    rejected: None,
                    notify: None,
                });
                match stage {
                    RejectStage::DialBack => r.dial_back = Err(StepFailed::DialBack(error.clone())),
                    RejectStage::Notify => r.notify = Some(Err(StepFailed::Notify(error.clone()))),
                    RejectStage::Validation | RejectStage::GetInfo | RejectStage::Restarting => {
                        r.rejected = Some(error.clone())
                    }
                }
                if *via == Via::PluginWatcher && r.notify.is_none() {
                    // The kubelet told the plugin; whether that call worked is not reported apart.
                    r.notify = Some(Ok(()));
                }
                self.regs.push(r);
            }
            KubeletEvent::Devices { endpoint, bytes, snapshot: Some(devices), .. } => self.snaps.push(Snap {
                generation,
                socket: PathBuf::from(endpoint),
                at: e.at,
                bytes: *bytes,
                resp: ListAndWatchResponse { devices: devices.as_ref().clone() },
            }),
            KubeletEvent::StreamEnded { endpoint, reason, disconnected, .. } => {
                self.ends.push((generation, PathBuf::from(endpoint), reason.clone(), e.at));
                if let Some(d) = disconnected {
                    self.disconnected.push((generation, PathBuf::from(d)));
                }
            }
            KubeletEvent::InstanceEnded { endpoint, allocatable, .. } => {
                self.gone.push((generation, PathBuf::from(endpoint), *allocatable, e.at))
            }
            KubeletEvent::PodRejected { file, reason, pod_reason } => {
                self.rejected.push((PathBuf::from(file), pod_reason.clone(), reason.clone()))
            }
            KubeletEvent::RegisterReceived { resource, endpoint } => {
                self.attempts.push((generation, e.at, resource.clone(), endpoint.clone()))
            }
            KubeletEvent::DialBackFailing { socket, error, .. } => {
                self.dial_fails.push((generation, PathBuf::from(socket), e.at, error.clone()))
            }
            _ => {}
        }
    }
}

/// The suite's kubelet: the same engine as `dpctl mock-kubelet`, in this
/// process, on the tree; its events are what the scenarios read.
pub struct Kubelet {
    node: Node,
    pod_resources: PathBuf,
    /// Its log (JSON lines).
    pub log: PathBuf,
}

impl Kubelet {
    /// Start it on the tree as kubelet `version`; `timeout` bounds its calls to the plugin;
    /// `clean`: delete the plugin directory's sockets first, as the kubelet does.
    pub async fn start(
        tree: &Tree,
        timeout: Duration,
        version: crate::kubelet::profile::KubeletVersion,
        clean: bool,
        api: crate::controlplane::apiserver::Mode,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Arc<Stamped>>)> {
        let log = tree.logs.join("kubelet.log");
        let bus = EventBus::new(Logger::to_file(LogFormat::Json, &log)?);
        let events = bus.subscribe();
        let mut spec = NodeSpec::on_tree(tree);
        spec.manager.call_timeout = timeout;
        spec.manager.profile = crate::kubelet::profile::Profile::of(version);
        if let Some(d) = &mut spec.dra {
            d.call_timeout = timeout;
            // Devices come from the driver's ResourceSlices only, as the scheduler's do.
            d.slices_only = true;
        }
        // The local API server for DRA drivers (`{kubeconfig}`).
        spec.api_server = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        spec.api_server_mode = api;
        // A plugin in a private mount namespace reports /var/lib/kubelet paths.
        spec.endpoint_alias = Some((PathBuf::from(KUBELET_ROOT), tree.root.clone()));
        // The suite counts whatever the plugin sends; the kubelet's limit is judged by LAW scenarios.
        spec.manager.max_recv = usize::MAX;
        spec.clean_at_start = clean;
        spec.wake_on_changes = true;
        let node = Node::start(spec, bus).await?;
        Ok((Kubelet { node, pod_resources: tree.pod_resources.clone(), log }, events))
    }

    /// Restart it in place, as a kubelet restart: streams cancelled, sockets deleted.
    pub async fn restart(&self) -> Result<()> {
        self.node.restart("dpctl test").await
    }

    /// Stop it (every task cancelled and awaited).
    pub async fn stop(self) {
        self.node.stop().await;
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

    #[test]
    fn a_command_that_cannot_start_is_named_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("my-plugin");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = d.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        let path = Some(d.path().as_os_str());
        assert_eq!(unstartable("my-plugin", path, "plugin"), None);
        assert_eq!(unstartable(exe.to_str().unwrap(), None, "plugin"), None);
        assert_eq!(unstartable("{plugin-dir}/x", None, "plugin"), None, "checked when it runs");
        let why = unstartable("dpctl", path, "plugin").unwrap();
        assert_eq!(
            why,
            "cannot start the plugin command \"dpctl\": not found on PATH; install it or put it on PATH (`cargo install --path .` in a dpctl checkout), or give its path"
        );
        assert!(unstartable("nope", None, "driver").unwrap().starts_with("cannot start the driver command \"nope\""));
        assert!(unstartable(plain.to_str().unwrap(), path, "plugin")
            .unwrap()
            .ends_with("is not executable; chmod +x it"));
        assert!(unstartable(d.path().to_str().unwrap(), path, "plugin")
            .unwrap()
            .ends_with("is a directory; name the executable"));
        assert!(unstartable("./no/such", path, "plugin").unwrap().ends_with("no such file; check the path"));
    }
}
