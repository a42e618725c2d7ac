//! A plugin's lifecycle, like a well-behaved vendor plugin: serve the
//! DevicePlugin socket first, then register (kubelet.sock, or the plugin
//! watcher's registry directory); watch for a kubelet restart (kubelet.sock
//! re-created, or our socket deleted) and then serve again on a fresh socket
//! and register again. Never exit because the kubelet went away.

use crate::api::deviceplugin::RegisterRequest;
use crate::api::deviceplugin::{device_plugin_server::DevicePluginServer, registration_client::RegistrationClient};
use crate::api::pluginregistration::{
    registration_server::{Registration, RegistrationServer},
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use crate::core::log::{ms, Logger};
use crate::core::task::Tasks;
use crate::core::transport::{call, dial, listen, path_kind, request, serve_owned, PathKind, SocketGuard};
use crate::core::{Error, Result};
use crate::plugin::config::RegistrationMode;
use crate::plugin::server::{Backend, PluginService};
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How often the plugin looks for a kubelet restart.
const POLL: Duration = Duration::from_millis(100);
/// With `reregister_on_disconnect`: how long no stream may be open after the
/// kubelet closed ours before registering again (a re-registration on the
/// same socket closes the old stream and opens a new one within this).
const DISCONNECT_SETTLE: Duration = Duration::from_secs(1);

/// Where and how a plugin serves and registers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The device-plugin directory (our socket goes here).
    pub plugin_dir: PathBuf,
    /// A fixed socket name; default: unique per start.
    pub socket_name: Option<String>,
    /// The kubelet's Registration socket.
    pub kubelet_socket: PathBuf,
    /// kubelet.sock or plugin watcher.
    pub mode: RegistrationMode,
    /// The plugin watcher's directory.
    pub registry_dir: PathBuf,
    /// Register at all (`--no-register` turns it off).
    pub register: bool,
    /// Retry a failed first registration with backoff instead of exiting.
    pub retry: bool,
    /// Register again when the kubelet closed our streams and opened none
    /// (kubelets up to 1.36 disconnect a plugin when an earlier instance's
    /// stream ends, kubernetes#121994).
    pub reregister_on_disconnect: bool,
    /// Dial and call timeout.
    pub timeout: Duration,
    /// The `--root` the paths above are under; a plugin-watcher endpoint is
    /// reported to the kubelet as the host's own path.
    pub host_root: crate::core::paths::HostRoot,
}

/// What the command line asks of registration (the config file and the
/// kubelet's defaults fill in the rest): `serve`'s and `replay`'s flags.
#[derive(Debug, Clone, Default)]
pub struct Requested {
    /// A fixed socket name.
    pub socket_name: Option<String>,
    /// The kubelet's Registration socket.
    pub kubelet_socket: Option<PathBuf>,
    /// kubelet.sock or plugin watcher.
    pub mode: Option<RegistrationMode>,
    /// The plugin watcher's directory.
    pub registry_dir: Option<PathBuf>,
    /// `--no-register`.
    pub no_register: bool,
    /// `--retry`.
    pub retry: bool,
    /// `--reregister-on-disconnect`.
    pub reregister_on_disconnect: bool,
}

impl Settings {
    /// Resolve where a plugin role serves and how it registers: flags (and
    /// env) first, then the config file, then the kubelet's defaults. Every
    /// host path, from a flag or the config file, is under `paths`' root.
    pub fn resolve(
        paths: &crate::core::paths::Paths,
        plugin_dir_given: bool,
        timeout: Duration,
        req: &Requested,
        file: &crate::plugin::config::FileConfig,
    ) -> Result<Settings> {
        let plugin_dir = match (&file.plugin_dir, plugin_dir_given) {
            (Some(d), false) => paths.host(d),
            _ => paths.plugin_dir.clone(),
        };
        if !plugin_dir.is_dir() {
            return Err(Error::failed(format!(
                "{}: plugin directory does not exist; create it or pass --plugin-dir",
                plugin_dir.display()
            )));
        }
        let kubelet_socket = req
            .kubelet_socket
            .clone()
            .or(file.kubelet_socket.clone())
            .map(|k| paths.host(&k))
            .unwrap_or_else(|| plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME));
        let mode = req.mode.or(file.registration).unwrap_or_default();
        let registry_dir =
            paths.plugins_registry_dir(req.registry_dir.as_deref().or(file.plugins_registry_dir.as_deref()));
        let register = !req.no_register && file.register.unwrap_or(true);
        if register && mode == RegistrationMode::PluginWatcher && !registry_dir.is_dir() {
            return Err(Error::failed(format!(
                "{}: plugin-watcher directory does not exist; create it or pass --plugins-registry-dir",
                registry_dir.display()
            )));
        }
        Ok(Settings {
            plugin_dir,
            socket_name: req.socket_name.clone(),
            kubelet_socket,
            mode,
            registry_dir,
            register,
            retry: req.retry || file.retry.unwrap_or(false),
            reregister_on_disconnect: req.reregister_on_disconnect,
            timeout,
            host_root: paths.root.clone(),
        })
    }
}

/// `vendor.example/foo` → `vendor.example_foo`, for file names.
pub fn file_stem(resource: &str) -> String {
    resource.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
}

fn ident(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|_| path_kind(path).ok() == Some(PathKind::Socket))
        .map(|m| (m.dev(), m.ino()))
}

/// Send one RegisterRequest for `endpoint` (a file name in the plugin dir).
pub async fn register<B: Backend>(s: &Settings, backend: &B, endpoint: &str) -> Result<()> {
    let mut c = RegistrationClient::new(dial(&s.kubelet_socket, s.timeout).await?);
    let req = RegisterRequest {
        version: crate::api::VERSION.into(),
        endpoint: endpoint.into(),
        resource_name: backend.resource().into(),
        options: Some(backend.options()),
    };
    // The kubelet dials us back inside Register (10 s timeout of its own).
    let t = s.timeout.max(Duration::from_secs(15));
    call(&s.kubelet_socket, "Register", t, c.register(request(req, t))).await.map(|_| ())
}

/// What a plugin answers GetInfo with, given the host path of the socket it
/// serves now: the one thing that differs between plugin kinds.
pub type InfoFn = Arc<dyn Fn(&Path) -> PluginInfo + Send + Sync>;

/// A device plugin's GetInfo: type DevicePlugin, the resource name, the
/// v1beta1 device-plugin API.
pub fn device_plugin_info(resource: &str) -> InfoFn {
    let resource = resource.to_string();
    Arc::new(move |ep: &Path| PluginInfo {
        r#type: crate::protocol::registration::PLUGIN_TYPE.into(),
        name: resource.clone(),
        endpoint: ep.display().to_string(),
        supported_versions: vec![crate::api::VERSION.into()],
    })
}

/// The plugin watcher's view of a plugin (any kind): GetInfo and
/// NotifyRegistrationStatus on its registration socket.
#[derive(Clone)]
pub struct WatcherRegistration {
    label: String,
    endpoint: watch::Receiver<Option<PathBuf>>,
    host_root: crate::core::paths::HostRoot,
    info: InfoFn,
    status: mpsc::Sender<RegistrationStatus>,
}

impl WatcherRegistration {
    /// A registration answering GetInfo with `info` of the socket `endpoint`
    /// holds (waiting briefly while it is `None`, i.e. restarting), and
    /// passing every NotifyRegistrationStatus to `status`. `label` names the
    /// plugin in errors.
    pub fn new(
        label: &str,
        endpoint: watch::Receiver<Option<PathBuf>>,
        host_root: crate::core::paths::HostRoot,
        info: InfoFn,
        status: mpsc::Sender<RegistrationStatus>,
    ) -> Self {
        WatcherRegistration { label: label.to_string(), endpoint, host_root, info, status }
    }
}

#[tonic::async_trait]
impl Registration for WatcherRegistration {
    async fn get_info(
        &self,
        _: tonic::Request<InfoRequest>,
    ) -> std::result::Result<tonic::Response<PluginInfo>, tonic::Status> {
        // While we restart after a kubelet restart, wait briefly for the new endpoint.
        let mut rx = self.endpoint.clone();
        let ep = tokio::time::timeout(
            Duration::from_millis(800),
            rx.wait_for(|e| e.as_deref().is_some_and(|p| ident(p).is_some())),
        )
        .await
        .ok()
        .and_then(|r| r.ok().and_then(|e| e.clone()));
        let Some(ep) = ep else {
            return Err(tonic::Status::unavailable(format!(
                "{}: the plugin's service socket is restarting",
                self.label
            )));
        };
        Ok(tonic::Response::new((self.info)(&self.host_root.on_host(&ep))))
    }

    async fn notify_registration_status(
        &self,
        r: tonic::Request<RegistrationStatus>,
    ) -> std::result::Result<tonic::Response<RegistrationStatusResponse>, tonic::Status> {
        let _ = self.status.send(r.into_inner()).await;
        Ok(tonic::Response::new(RegistrationStatusResponse {}))
    }
}

struct Served {
    name: String,
    path: PathBuf,
    guard: SocketGuard,
    /// Its ListAndWatch streams.
    streams: Arc<crate::plugin::server::StreamStats>,
    /// The server and its streams.
    tasks: Tasks,
}

impl Served {
    async fn shut(self) {
        self.shut_keeping(false).await
    }

    /// Stop serving; with `keep` (a fault) the socket file stays behind.
    async fn shut_keeping(self, keep: bool) {
        self.tasks.stop().await;
        if keep {
            std::mem::forget(self.guard);
        } else {
            drop(self.guard);
        }
    }
}

async fn start_server<B: Backend>(
    backend: &Arc<B>,
    s: &Settings,
    log: &Logger,
    generation: u64,
    owner: &Tasks,
) -> Result<Served> {
    let name = s
        .socket_name
        .clone()
        .unwrap_or_else(|| format!("{}-{}-{generation}.sock", file_stem(backend.resource()), std::process::id()));
    let path = s.plugin_dir.join(&name);
    let (listener, guard) = listen(&path).await?;
    let tasks = owner.child();
    let service = PluginService::new(backend.clone(), log.clone(), tasks.clone());
    let streams = service.streams();
    let svc = DevicePluginServer::new(service)
        .max_decoding_message_size(crate::core::limits::GRPC_MAX_RECV)
        .max_encoding_message_size(usize::MAX);
    // Streams end on cancel; the server then finishes its open calls.
    serve_owned(&tasks, listener, svc);
    log.event("serving", &[("resource", json!(backend.resource())), ("socket", json!(path.display().to_string()))]);
    Ok(Served { name, path, guard, streams, tasks })
}

/// The plugin-watcher registration socket while it is served: stopped and
/// awaited (never left running) when the plugin restarts or stops.
pub struct RegServed {
    guard: SocketGuard,
    tasks: Tasks,
}

impl RegServed {
    /// Stop serving, wait for the server, remove the socket (if still ours).
    pub async fn shut(self) {
        self.tasks.stop().await;
        drop(self.guard);
    }

    /// Whether the socket file is still the one we created.
    pub fn still_ours(&self) -> bool {
        self.guard.still_ours()
    }
}

/// Serve `reg` on a new registration socket at `path` (what the plugin
/// watcher finds in plugins_registry/), as a child group of `owner`.
pub async fn serve_watcher(path: &Path, reg: WatcherRegistration, owner: &Tasks) -> Result<RegServed> {
    let (l, guard) = listen(path).await?;
    let tasks = owner.child();
    serve_owned(&tasks, l, RegistrationServer::new(reg));
    Ok(RegServed { guard, tasks })
}

/// How registering through kubelet.sock ended.
enum Registering {
    /// Registered with the kubelet whose socket has this identity.
    Done(Option<(u64, u64)>),
    /// Our own socket was deleted meanwhile (a kubelet restart): serve again.
    SocketLost,
    /// Shut down while trying.
    Stopped,
}

/// Register through kubelet.sock, retrying with back-off (up to 5 s) while
/// the kubelet is missing or refuses; the first attempt's failure ends the
/// plugin unless `--retry`.
async fn register_with_retry<B: Backend>(
    s: &Settings,
    backend: &B,
    served: &Served,
    first: bool,
    log: &Logger,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<Registering> {
    let resource = backend.resource();
    let mut backoff = POLL;
    loop {
        // Wait for a kubelet socket to exist before trying.
        if ident(&s.kubelet_socket).is_some() || first {
            match register(s, backend, &served.name).await {
                Ok(()) => {
                    log.event(
                        "registered",
                        &[
                            ("resource", json!(resource)),
                            ("endpoint", json!(served.name)),
                            ("kubelet", json!(s.kubelet_socket.display().to_string())),
                        ],
                    );
                    return Ok(Registering::Done(ident(&s.kubelet_socket)));
                }
                Err(e) if first && !s.retry => {
                    return Err(Error::failed(format!("registration failed: {e} (pass --retry to keep trying)")));
                }
                Err(e) => log.event(
                    "register-failed",
                    &[
                        ("resource", json!(resource)),
                        ("error", json!(e.to_string())),
                        ("retryInMs", json!(backoff.as_millis() as u64)),
                    ],
                ),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return Ok(Registering::Stopped),
        }
        if ident(&s.kubelet_socket).is_some() {
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        if !served.guard.still_ours() {
            return Ok(Registering::SocketLost);
        }
    }
}

/// The fault `register_twice`: once the kubelet's ListAndWatch stream is
/// open, Register again from the same socket, as a kubelet.sock watcher that
/// takes the socket it finds at start for a new kubelet does (a 1.37 kubelet
/// refuses it: "device plugin already connected", kubernetes#139338).
async fn register_again<B: Backend>(
    s: &Settings,
    backend: &B,
    served: &Served,
    kubelet_id: Option<(u64, u64)>,
    log: &Logger,
    shutdown: &tokio_util::sync::CancellationToken,
) {
    let resource = backend.resource();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while served.streams.open() == 0 {
        // The kubelet restarted meanwhile (or no stream came): the restart watch takes over.
        if tokio::time::Instant::now() >= until || ident(&s.kubelet_socket) != kubelet_id || !served.guard.still_ours()
        {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.cancelled() => return,
        }
    }
    let result = register(s, backend, &served.name).await;
    let error = result.err().map(|e| e.to_string());
    log.event("fault", &[("resource", json!(resource)), ("fault", json!("register-twice")), ("error", json!(error))]);
}

/// What the restart watch remembers between polls.
struct Watch<'a> {
    /// The kubelet.sock we registered with.
    kubelet_id: &'a mut Option<(u64, u64)>,
    /// Streams the kubelet had closed when we registered.
    closed_at: u64,
    /// Since when no stream has been open after the kubelet closed ours.
    quiet: &'a mut Option<tokio::time::Instant>,
    /// The fault `no_reregister_on_disconnect`.
    ignore_disconnect: bool,
}

/// Why the plugin must serve and register again, if it must: its socket or
/// its plugin-watcher socket was deleted, kubelet.sock was re-created, or
/// (`--reregister-on-disconnect`) the kubelet closed its stream and opened none.
fn restart_reason(s: &Settings, served: &Served, reg: Option<&RegServed>, w: Watch<'_>) -> Option<&'static str> {
    if !served.guard.still_ours() {
        return Some("our socket was deleted (kubelet restart?)");
    }
    if s.register && s.mode == RegistrationMode::Kubelet {
        let now = ident(&s.kubelet_socket);
        if now.is_some() && now != *w.kubelet_id {
            return Some("kubelet.sock was re-created (kubelet restart)");
        }
        if now.is_none() {
            *w.kubelet_id = None;
        }
        if s.reregister_on_disconnect && !w.ignore_disconnect {
            let closed = served.streams.client_closed() > w.closed_at && served.streams.open() == 0;
            if closed && now.is_some() && now == *w.kubelet_id {
                if w.quiet.get_or_insert_with(tokio::time::Instant::now).elapsed() >= DISCONNECT_SETTLE {
                    return Some("the kubelet closed our ListAndWatch stream and opened none (kubelets up to 1.36 disconnect a plugin when an earlier instance's stream ends, kubernetes#121994)");
                }
            } else {
                *w.quiet = None;
            }
        }
    }
    if reg.is_some_and(|r| !r.still_ours()) {
        return Some("our plugin-watcher socket was deleted");
    }
    None
}

/// Run one resource's plugin until `shutdown`. `on_socket` is told every
/// socket path the plugin serves on (live control shows it).
pub async fn run<B: Backend>(
    backend: Arc<B>,
    s: Settings,
    log: Logger,
    owner: Tasks,
    on_socket: impl Fn(&Path) + Send + Sync,
) -> Result<()> {
    let shutdown = owner.token().clone();
    let resource = backend.resource().to_string();
    let (endpoint_tx, endpoint_rx) = watch::channel::<Option<PathBuf>>(None);
    let (status_tx, mut status_rx) = mpsc::channel::<RegistrationStatus>(4);
    // Unique per start like the DevicePlugin socket, so a second instance can
    // serve while the first runs (a rolling update); fixed with --socket-name.
    let reg_name = match &s.socket_name {
        Some(_) => format!("{}-reg.sock", file_stem(&resource)),
        None => format!("{}-{}-reg.sock", file_stem(&resource), std::process::id()),
    };
    let reg_path = s.registry_dir.join(reg_name);
    let watcher_reg =
        WatcherRegistration::new(&resource, endpoint_rx, s.host_root.clone(), device_plugin_info(&resource), status_tx);
    let mut reg_served: Option<RegServed> = None;

    let faults = backend.lifecycle_faults();
    if faults.exit_without_kubelet
        && s.register
        && s.mode == RegistrationMode::Kubelet
        && ident(&s.kubelet_socket).is_none()
    {
        return Err(Error::failed(format!(
            "fault exit-without-kubelet: {} does not exist; exiting",
            s.kubelet_socket.display()
        )));
    }
    let mut generation = 0u64;
    let mut first = true;
    loop {
        let served = match start_server(&backend, &s, &log, generation, &owner).await {
            Ok(x) => x,
            Err(e) if first => return Err(e),
            Err(e) => {
                log.event("error", &[("resource", json!(resource)), ("error", json!(e.to_string()))]);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
        };
        on_socket(&served.path);
        let _ = endpoint_tx.send(Some(served.path.clone()));

        let mut kubelet_id = ident(&s.kubelet_socket);
        if s.register {
            match s.mode {
                RegistrationMode::Kubelet => {
                    match register_with_retry(&s, backend.as_ref(), &served, first, &log, owner.token()).await {
                        Ok(Registering::Done(id)) => {
                            kubelet_id = id;
                            if faults.register_twice {
                                register_again(&s, backend.as_ref(), &served, kubelet_id, &log, owner.token()).await;
                            }
                        }
                        Ok(Registering::SocketLost) => {}
                        Ok(Registering::Stopped) => {
                            served.shut_keeping(faults.keep_socket_on_exit).await;
                            return Ok(());
                        }
                        Err(e) => {
                            served.shut().await;
                            return Err(e);
                        }
                    }
                }
                RegistrationMode::PluginWatcher => {
                    // (Re)create the registration socket so a running watcher sees a new plugin.
                    if let Some(r) = reg_served.take() {
                        r.shut().await;
                    }
                    match serve_watcher(&reg_path, watcher_reg.clone(), &owner).await {
                        Ok(r) => {
                            log.event(
                                "watcher-socket",
                                &[("resource", json!(resource)), ("socket", json!(reg_path.display().to_string()))],
                            );
                            reg_served = Some(r);
                        }
                        Err(e) if first => {
                            served.shut().await;
                            return Err(e);
                        }
                        Err(e) => log.event("error", &[("resource", json!(resource)), ("error", json!(e.to_string()))]),
                    }
                }
            }
        }
        first = false;

        // Watch for a kubelet restart (and, if asked, for the kubelet closing our streams).
        let closed_at = served.streams.client_closed();
        let mut quiet: Option<tokio::time::Instant> = None;
        let why = loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = shutdown.cancelled() => {
                    served.shut_keeping(faults.keep_socket_on_exit).await;
                    if let Some(r) = reg_served.take() { r.shut().await; }
                    return Ok(());
                }
                Some(st) = status_rx.recv() => {
                    if st.plugin_registered {
                        log.event("registered", &[("resource", json!(resource)), ("via", json!("plugin-watcher"))]);
                    } else {
                        served.shut().await;
                        if let Some(r) = reg_served.take() { r.shut().await; }
                        return Err(Error::failed(format!("the kubelet rejected the registration of {resource}: {}", st.error)));
                    }
                }
            }
            let watch = Watch {
                kubelet_id: &mut kubelet_id,
                closed_at,
                quiet: &mut quiet,
                ignore_disconnect: faults.no_reregister_on_disconnect,
            };
            if let Some(why) = restart_reason(&s, &served, reg_served.as_ref(), watch) {
                break why;
            }
        };
        if faults.no_reregister {
            log.event(
                "fault",
                &[("resource", json!(resource)), ("fault", json!("no-reregister")), ("ignored", json!(why))],
            );
            shutdown.cancelled().await;
            served.shut_keeping(faults.keep_socket_on_exit).await;
            if let Some(r) = reg_served.take() {
                r.shut().await;
            }
            return Ok(());
        }
        log.event("restarting", &[("resource", json!(resource)), ("reason", json!(why))]);
        let _ = endpoint_tx.send(None);
        served.shut().await;
        generation += 1;
        if let Some(delay) = faults.reregister_delay {
            log.event(
                "fault",
                &[("resource", json!(resource)), ("fault", json!("reregister-delay")), ("delayMs", ms(delay))],
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.cancelled() => return Ok(()),
            }
        }
    }
}
