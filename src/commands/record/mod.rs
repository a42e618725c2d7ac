//! `dpctl record`: put a tap between the kubelet and a plugin. The tap
//! registers under the plugin's resource name (the newest registration
//! wins), forwards every call unchanged and writes the trace. It survives
//! kubelet restarts: when kubelet.sock is re-created or the tap's socket is
//! deleted, it serves a fresh tap, waits for the kubelet and the plugin to
//! come back, registers again, and registers once more if the plugin's own
//! re-registration replaced it. On exit the plugin's own socket is
//! registered again, leaving the node as it was.

mod watch;

use crate::api::deviceplugin::{
    device_plugin_server::DevicePluginServer, registration_client::RegistrationClient, DevicePluginOptions,
    RegisterRequest,
};
use crate::cli::positive_duration_arg;
use crate::client::PluginConn;
use crate::commands::surface::{self, Invocation, Running, Spec};
use crate::commands::Ctx;
use crate::core::log::{LogFormat, Logger};
use crate::core::task::Tasks;
use crate::core::time::format_duration;
use crate::core::transport::{call, connect_raw, dial, listen, path_kind, request, serve_owned, PathKind, SocketGuard};
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::plugin::tap::{Note, Owners, Tap};
use crate::protocol::registration::check_resource_name;
use crate::trace::{Event, Writer};
use clap::Args;
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use watch::{restart_reason, Down, Watch};

/// `dpctl record`: its surface.
pub const COMMAND: Spec = Spec {
    name: "record",
    about: "Record everything the kubelet asks a device plugin and it answers, through a tap socket",
    group: super::surface::Group::Simulate,
    args: surface::args::<RecordArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Flag("plugin")],
    refuses_output: Some("record writes a JSON-lines trace (--out); use --log-format json for its log"),
    parse: surface::parse::<RecordArgs>,
};

const EXAMPLES: &str = "Examples:
  # Record everything the kubelet and nvidia-gpu.sock say, until Ctrl-C
  dpctl record --plugin nvidia-gpu.sock --resource nvidia.com/gpu --out gpu.trace.jsonl
  dpctl record --plugin vendor.sock --resource vendor.example/foo --out foo.trace.jsonl --duration 10m";

/// `dpctl record`
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(long, value_name = "SOCKET")]
    pub plugin: PathBuf,
    /// The plugin's resource name (the tap registers under it)
    #[arg(long, value_name = "NAME")]
    pub resource: String,
    /// The trace file to write (must not exist)
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The kubelet's Registration socket [default: <plugin-dir>/kubelet.sock]
    #[arg(long, env = "DPCTL_KUBELET_SOCKET", value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,
    /// Stop after this long (default: until SIGINT/SIGTERM)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// The kubelet's PodResources socket, read for which pod each Allocate was for [default: <plugin-dir>/../pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// After a kubelet restart, give up (exit 1) if the kubelet and the plugin are not back within this long
    #[arg(long, default_value = "2m", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_timeout: Duration,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

impl Invocation for RecordArgs {
    fn workers(&self) -> usize {
        1
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// How often the tap looks for a kubelet restart.
const POLL: Duration = Duration::from_millis(100);
/// The whole exit (re-registering the plugin, stopping the tap) fits in this.
const EXIT_BUDGET: Duration = Duration::from_millis(900);
/// After the tap's stream ends at exit, how long the kubelet gets to handle
/// that end before the plugin registers again.
const HANDBACK_SETTLE: Duration = Duration::from_millis(250);

async fn register(
    kubelet: &Path,
    endpoint: &str,
    resource: &str,
    options: DevicePluginOptions,
    timeout: Duration,
) -> Result<()> {
    let mut c = RegistrationClient::new(dial(kubelet, timeout).await?);
    let req = RegisterRequest {
        version: crate::api::VERSION.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: Some(options),
    };
    call(kubelet, "Register", timeout, c.register(request(req, timeout))).await.map(|_| ())
}

fn ident(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|_| path_kind(path).ok() == Some(PathKind::Socket))
        .map(|m| (m.dev(), m.ino()))
}

/// Run `fut` unless `stop` is cancelled first (`None` then).
async fn unless_stopped<T>(stop: &CancellationToken, fut: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        r = fut => Some(r),
        _ = stop.cancelled() => None,
    }
}

/// One served tap socket.
struct Served {
    guard: SocketGuard,
    tasks: Tasks,
}

impl Served {
    async fn start(path: &Path, tap: &Tap, owner: &Tasks) -> Result<Served> {
        let (listener, guard) = listen(path).await?;
        let tasks = owner.child();
        let svc = DevicePluginServer::new(tap.clone())
            .max_decoding_message_size(crate::core::limits::GRPC_MAX_RECV)
            .max_encoding_message_size(usize::MAX);
        serve_owned(&tasks, listener, svc);
        Ok(Served { guard, tasks })
    }

    /// Stop serving: in-flight calls get `within` (the server is dropped at
    /// the latest after the transport's grace; its owner awaits it).
    async fn shut(self, within: Duration) {
        self.tasks.cancel();
        let _ = tokio::time::timeout(within, self.tasks.join()).await;
        drop(self.guard);
    }
}

/// Everything a recording needs.
struct Recorder {
    plugin: PathBuf,
    plugin_name: String,
    kubelet: PathBuf,
    tap_path: PathBuf,
    tap_name: String,
    resource: String,
    timeout: Duration,
    restart_timeout: Duration,
    log: Logger,
    writer: Arc<Writer>,
    tap: Tap,
}

impl Recorder {
    fn write(&self, ev: &Event) {
        if let Err(e) = self.writer.write(ev) {
            self.log.event("trace-error", &[("error", json!(e.to_string()))]);
        }
    }

    async fn register_tap(&self, options: DevicePluginOptions) -> Result<()> {
        register(&self.kubelet, &self.tap_name, &self.resource, options, self.timeout).await
    }

    /// After a kubelet restart: serve a fresh tap, wait for the kubelet and
    /// the plugin, register again. Each step retries until the restart timeout.
    async fn reattach(
        &self,
        old: Served,
        stop: &CancellationToken,
        root: &Tasks,
    ) -> Option<Result<(Served, DevicePluginOptions)>> {
        old.shut(Duration::from_millis(200)).await;
        let deadline = Instant::now() + self.restart_timeout;
        let gave_up = |what: String| {
            Error::failed(format!(
                "{what} within {} of the kubelet restart; the trace holds everything recorded until then (raise --restart-timeout to wait longer)",
                format_duration(self.restart_timeout)
            ))
        };
        // 1. The kubelet is back.
        let back = unless_stopped(stop, async {
            while Instant::now() < deadline {
                if tokio::net::UnixStream::connect(&self.kubelet).await.is_ok() {
                    return true;
                }
                tokio::time::sleep(POLL).await;
            }
            false
        })
        .await?;
        if !back {
            return Some(Err(gave_up(format!("the kubelet did not serve {} again", self.kubelet.display()))));
        }
        // 2. A fresh tap socket.
        let served = match Served::start(&self.tap_path, &self.tap, root).await {
            Ok(s) => s,
            Err(e) => {
                return Some(Err(Error::failed(format!("cannot serve the tap again after a kubelet restart: {e}"))))
            }
        };
        // 3. The plugin is back (it re-creates its socket before it registers).
        let options = unless_stopped(stop, async {
            let mut last = String::from("no answer");
            while Instant::now() < deadline {
                if let Ok(conn) = PluginConn::connect(&self.plugin, Duration::from_secs(1), usize::MAX).await {
                    match conn.options().await {
                        Ok(o) => {
                            self.tap.set_upstream(conn);
                            return Ok(o);
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                tokio::time::sleep(POLL).await;
            }
            Err(last)
        })
        .await;
        let options = match options {
            None => {
                served.shut(Duration::from_millis(100)).await;
                return None;
            }
            Some(Err(e)) => {
                served.shut(Duration::from_millis(100)).await;
                return Some(Err(gave_up(format!("the plugin did not serve {} again ({e})", self.plugin.display()))));
            }
            Some(Ok(o)) => o,
        };
        // 4. Register the tap again (the kubelet may still be starting up).
        let registered = unless_stopped(stop, async {
            loop {
                match self.register_tap(options).await {
                    Ok(()) => return Ok(()),
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    Err(_) => tokio::time::sleep(POLL).await,
                }
            }
        })
        .await;
        match registered {
            None => {
                served.shut(Duration::from_millis(100)).await;
                None
            }
            Some(Err(e)) => {
                served.shut(Duration::from_millis(100)).await;
                Some(Err(Error::failed(format!("cannot register the tap again after a kubelet restart: {e}"))))
            }
            Some(Ok(())) => {
                self.log.event(
                    "reattached",
                    &[("tap", json!(self.tap_path.display().to_string())), ("resource", json!(self.resource))],
                );
                Some(Ok((served, options)))
            }
        }
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &RecordArgs) -> Result<()> {
    check_resource_name(&a.resource)?;
    // Ctrl-C, SIGTERM and --duration stop the recording in whatever state it is.
    let (root, stop) = (Tasks::new(), CancellationToken::new());
    let duration = a.duration;
    let stop_tx = stop.clone();
    root.spawn(async move {
        let until = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = crate::core::interrupted() => {}
            _ = until => {}
        }
        stop_tx.cancel();
    });
    let r = record(ctx, a, &root, &stop).await;
    root.stop().await;
    r
}

/// Where recording happens: the plugin's socket, its directory and the kubelet's files.
struct Where {
    plugin: PathBuf,
    plugin_dir: PathBuf,
    plugin_name: String,
    kubelet: PathBuf,
    pod_resources: PathBuf,
    checkpoint: PathBuf,
}

/// Resolve the paths from the flags; the plugin's socket must be inside the plugin directory.
fn resolve(ctx: &Ctx, a: &RecordArgs) -> Result<Where> {
    let plugin = ctx.paths.resolve_socket(&a.plugin);
    let plugin_dir = if ctx.plugin_dir_given {
        ctx.paths.plugin_dir.clone()
    } else {
        plugin.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let plugin_name = plugin.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if plugin.parent() != Some(plugin_dir.as_path()) {
        return Err(Error::usage(format!(
            "{}: the plugin's socket must be inside the plugin directory {} so it can be registered again afterwards",
            plugin.display(),
            plugin_dir.display()
        )));
    }
    let kubelet = a
        .kubelet_socket
        .as_deref()
        .map(|k| ctx.paths.host(k))
        .unwrap_or_else(|| plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME));
    let pod_resources = a.pod_resources_socket.as_deref().map(|p| ctx.paths.host(p)).unwrap_or_else(|| {
        plugin_dir.parent().map(|p| p.join("pod-resources").join("kubelet.sock")).unwrap_or_default()
    });
    let checkpoint = plugin_dir.join(crate::core::paths::CHECKPOINT_NAME);
    Ok(Where { plugin, plugin_dir, plugin_name, kubelet, pod_resources, checkpoint })
}

/// Create the trace and write the kubelet's view first (no file is left behind on failure).
fn open_trace(a: &RecordArgs, plugin: &Path, view: &crate::client::view::View) -> Result<Arc<Writer>> {
    let writer = Arc::new(Writer::create(&a.out, &a.resource, "record", plugin)?);
    if let Err(e) = writer.write(&Event::KubeletState {
        t: writer.t(),
        source: view.source.clone(),
        allocatable: view.allocatable.clone(),
        pods: view.pods.clone(),
        note: view.note.clone(),
    }) {
        let _ = std::fs::remove_file(&a.out);
        return Err(e);
    }
    Ok(writer)
}

async fn record(ctx: &Ctx, a: &RecordArgs, root: &Tasks, stop: &CancellationToken) -> Result<()> {
    let Where { plugin, plugin_dir, plugin_name, kubelet, pod_resources, checkpoint } = resolve(ctx, a)?;
    let log = Logger::new(a.log_format);
    let early = || Error::failed("stopped before recording began; nothing was recorded");

    let upstream =
        unless_stopped(stop, PluginConn::connect(&plugin, ctx.timeout, usize::MAX)).await.ok_or_else(early)??;
    let options = unless_stopped(stop, upstream.options()).await.ok_or_else(early)??;
    let view_timeout = ctx.timeout.min(Duration::from_secs(2));
    let view = unless_stopped(stop, crate::client::view::read(&pod_resources, &checkpoint, &a.resource, view_timeout))
        .await
        .ok_or_else(early)?;
    let writer = open_trace(a, &plugin, &view)?;
    let remove_unused = |writer: &Writer| {
        // Only the kubelet's view was written: the file holds no recording.
        if writer.events() <= 1 {
            let _ = std::fs::remove_file(&a.out);
        }
    };
    if let Some(n) = &view.note {
        log.event("kubelet-view", &[("source", json!(view.source)), ("note", json!(n))]);
    }

    let tap_name = format!("dpctl-record-{}.sock", std::process::id());
    let tap_path = plugin_dir.join(&tap_name);
    let (notes_tx, notes) = mpsc::unbounded_channel();
    let owners = Owners {
        pod_resources: pod_resources.clone(),
        checkpoint: checkpoint.clone(),
        resource: a.resource.clone(),
        within: Duration::from_secs(10),
    };
    let tap = Tap::new(upstream, writer.clone(), log.clone(), root.child(), notes_tx, Some(owners));
    let rec = Recorder {
        plugin: plugin.clone(),
        plugin_name,
        kubelet,
        tap_path: tap_path.clone(),
        tap_name,
        resource: a.resource.clone(),
        timeout: ctx.timeout,
        restart_timeout: a.restart_timeout,
        log: log.clone(),
        writer: writer.clone(),
        tap: tap.clone(),
    };
    let served = match Served::start(&tap_path, &tap, root).await {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&a.out);
            return Err(e);
        }
    };
    let kubelet_id = ident(&rec.kubelet);
    match unless_stopped(stop, rec.register_tap(options)).await {
        Some(Ok(())) => {}
        failed => {
            served.shut(Duration::from_millis(200)).await;
            remove_unused(&writer);
            return Err(match failed {
                Some(Err(e)) => Error::failed(format!("cannot register the tap: {e}")),
                _ => early(),
            });
        }
    }
    log.event(
        "recording",
        &[
            ("resource", json!(a.resource)),
            ("tap", json!(tap_path.display().to_string())),
            ("plugin", json!(plugin.display().to_string())),
            ("out", json!(a.out.display().to_string())),
        ],
    );
    let following = Following { served, options, kubelet_id, notes };
    rec.follow(following, stop, root, &a.out).await
}

/// A registered tap being followed.
struct Following {
    served: Served,
    options: DevicePluginOptions,
    kubelet_id: Option<(u64, u64)>,
    notes: mpsc::UnboundedReceiver<Note>,
}

impl Recorder {
    /// Watch for kubelet restarts and for the tap being replaced until
    /// stopped, then hand the plugin back.
    async fn follow(&self, f: Following, stop: &CancellationToken, root: &Tasks, out: &Path) -> Result<()> {
        let Following { mut served, mut options, mut kubelet_id, mut notes } = f;
        let mut w = Watch::registered(Instant::now());
        let failure = loop {
            tokio::select! {
                _ = stop.cancelled() => break None,
                Some(n) = notes.recv() => w.noted(&n, Instant::now()),
                _ = tokio::time::sleep(POLL) => {}
            }
            if let Some(reason) = restart_reason(served.guard.still_ours(), ident(&self.kubelet), kubelet_id) {
                self.write(&Event::KubeletRestart { t: self.writer.t(), reason: reason.into() });
                self.log.event("kubelet-restart", &[("reason", json!(reason))]);
                match self.reattach(served, stop, root).await {
                    None => {
                        // Stopped while waiting: nothing is served; leave the plugin registered.
                        let r = finish(self, None, &self.tap, options, out).await;
                        self.tap.shutdown(Duration::from_millis(100)).await;
                        return r;
                    }
                    Some(Err(e)) => {
                        self.log.event("error", &[("error", json!(e.to_string()))]);
                        self.tap.shutdown(Duration::from_millis(200)).await;
                        return Err(e);
                    }
                    Some(Ok((s, o))) => (served, options) = (s, o),
                }
                kubelet_id = ident(&self.kubelet);
                w = Watch::registered(Instant::now());
                continue;
            }
            let due = w.due(Instant::now());
            if due.is_some() && tokio::net::UnixStream::connect(&self.kubelet).await.is_err() {
                // The kubelet is down (stopped, or restarting slowly): wait for it
                // to come back, which shows as a restart, up to --restart-timeout.
                match w.kubelet_silent(Instant::now(), self.restart_timeout) {
                    Down::First => {
                        self.log.event("kubelet-down", &[("kubelet", json!(self.kubelet.display().to_string()))])
                    }
                    Down::Waiting => {}
                    Down::GaveUp => break Some(Error::failed(format!(
                        "the kubelet stopped answering on {} and did not come back within {} (raise --restart-timeout to wait longer); the trace holds everything recorded until then",
                        self.kubelet.display(),
                        format_duration(self.restart_timeout)
                    ))),
                }
                continue;
            }
            w.kubelet_down = None;
            let Some(replaced) = due else { continue };
            w.replaced_at = None;
            if let Err(e) = self.register_again(options, replaced, &mut w).await {
                break Some(e);
            }
        };
        if let Some(e) = failure {
            served.shut(Duration::from_millis(200)).await;
            self.tap.shutdown(Duration::from_millis(200)).await;
            return Err(e);
        }
        let r = finish(self, Some(served), &self.tap, options, out).await;
        self.tap.shutdown(Duration::from_millis(100)).await;
        r
    }

    /// Register the tap again after it was replaced (or got no stream); the
    /// third failure in a row ends the recording.
    async fn register_again(&self, options: DevicePluginOptions, replaced: bool, w: &mut Watch) -> Result<()> {
        let reason = if replaced {
            "the kubelet closed the tap's stream: another registration for the resource (the plugin's own) replaced it"
        } else {
            "the kubelet opened no ListAndWatch on the tap after its registration"
        };
        match self.register_tap(options).await {
            Ok(()) => {
                *w = Watch::registered(Instant::now());
                self.write(&Event::Reregistered { t: self.writer.t(), reason: reason.into() });
                self.log.event("reregistered", &[("reason", json!(reason))]);
                Ok(())
            }
            Err(e) => {
                let retry = w.register_failed(Instant::now());
                self.log.event("register-failed", &[("error", json!(e.to_string())), ("attempt", json!(w.failures))]);
                if !retry {
                    return Err(Error::failed(format!(
                        "cannot register the tap again after it was replaced: {e}; the trace holds everything recorded until now"
                    )));
                }
                Ok(())
            }
        }
    }
}

/// Leave the node as it was — the plugin's own socket registered again —
/// and stop the tap, all within [`EXIT_BUDGET`]. The tap's stream ends
/// *first*, and the plugin registers after the kubelet has seen that end:
/// kubelets up to 1.36 key plugins by resource name, and when a replaced
/// stream ends they disconnect whatever registration is current
/// (kubernetes#121994) — the plugin's, had it registered before the tap's
/// stream ended. From 1.37 either order is safe; this one is safe for all.
async fn finish(
    rec: &Recorder,
    served: Option<Served>,
    tap: &Tap,
    options: DevicePluginOptions,
    out: &Path,
) -> Result<()> {
    let start = Instant::now();
    // End the tap's streams towards the kubelet, then stop serving.
    tap.shutdown(Duration::from_millis(100)).await;
    if let Some(s) = served {
        s.shut(Duration::from_millis(100)).await;
        // The kubelet handles a stream's end at once; give it a moment before the plugin registers.
        tokio::time::sleep(HANDBACK_SETTLE).await;
    }
    let restored = match connect_raw(&rec.plugin, Duration::from_millis(100)).await {
        Err(_) => Err(Error::failed(format!(
            "the trace is complete, but the plugin's socket {} is gone, so it was not registered again; restart the plugin so it registers itself",
            rec.plugin.display()
        ))),
        Ok(_) => {
            let left = EXIT_BUDGET.saturating_sub(start.elapsed());
            match register(&rec.kubelet, &rec.plugin_name, &rec.resource, options, left.max(Duration::from_millis(100))).await {
                Ok(()) => Ok(()),
                // From 1.37 the kubelet never closed the plugin's own stream: that
                // instance is still registered, and a second one from its socket is refused.
                Err(e) if e.to_string().contains(crate::kubelet::devicemanager::core::state::ALREADY_CONNECTED) => Ok(()),
                Err(e) => Err(Error::failed(format!(
                    "the trace is complete, but the plugin's own socket could not be registered again: {e}; restart the plugin so it registers itself"
                ))),
            }
        }
    };
    let n = rec.writer.events();
    rec.log.event("recorded", &[("events", json!(n)), ("out", json!(out.display().to_string()))]);
    restored
}
