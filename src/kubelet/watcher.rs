//! The kubelet's plugin watcher: scan the registry directory (recursively;
//! names starting with `.` and non-sockets ignored), call GetInfo (1 s;
//! each socket in a task of its own, so none waits for another),
//! hand the plugin to the handler of its type ([`Handlers`]: DevicePlugin
//! to the device manager, DRAPlugin to the DRA manager; a type nobody
//! handles is told so), tell it with NotifyRegistrationStatus (5 s); a
//! deleted socket deregisters its plugin.

use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest, RegistrationStatus};
use crate::core::transport::{call, dial, request};
use crate::kubelet::cm::ContainerManager;
use crate::kubelet::event::{KubeletEvent, Refusal, RejectStage, Via};
use crate::kubelet::handler::{Handlers, PluginHandler, Registered};
use crate::protocol::registration;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A plugin-watcher registration that did not complete.
struct Rejected {
    stage: RejectStage,
    error: String,
    /// What GetInfo said, when it answered.
    info: Option<crate::api::pluginregistration::PluginInfo>,
    endpoint: Option<PathBuf>,
    /// The rulebook rule the plugin broke, when a rule refused it.
    rule: Option<&'static str>,
}

impl Rejected {
    fn new(stage: RejectStage, error: String) -> Self {
        Rejected { stage, error, info: None, endpoint: None, rule: None }
    }
}

/// The path where the engine finds an endpoint a plugin reported: a path
/// under `alias.0` (the kubelet root as the plugin sees it, in a private
/// mount namespace) is read under `alias.1`.
pub fn host_endpoint(reported: &Path, alias: Option<&(PathBuf, PathBuf)>) -> PathBuf {
    match alias {
        Some((seen, host)) => match reported.strip_prefix(seen) {
            Ok(rest) if !host.starts_with(seen) => host.join(rest),
            _ => reported.to_path_buf(),
        },
        None => reported.to_path_buf(),
    }
}

/// One registration (operation_generator.go GenerateRegisterPluginFunc):
/// GetInfo, the handler of its type (none: the plugin is told so),
/// ValidatePlugin, RegisterPlugin, then NotifyRegistrationStatus; a failed
/// notify after a successful registration deregisters it.
async fn register_one(
    handlers: &Handlers,
    sock: &Path,
    dial_timeout: Duration,
    alias: Option<&(PathBuf, PathBuf)>,
) -> Result<(Registered, Arc<dyn PluginHandler>), Rejected> {
    let ch = dial(sock, dial_timeout).await.map_err(|e| Rejected::new(RejectStage::GetInfo, e.to_string()))?;
    let mut client = RegistrationClient::new(ch);
    let t = Duration::from_secs(1);
    let info = call(sock, "GetInfo", t, client.get_info(request(InfoRequest {}, t)))
        .await
        .map_err(|e| Rejected::new(RejectStage::GetInfo, e.to_string()))?;
    let endpoint =
        if info.endpoint.is_empty() { sock.to_path_buf() } else { host_endpoint(Path::new(&info.endpoint), alias) };
    let handler = handlers.get(&info.r#type);
    // The refusal, and what the plugin is told (operation_generator.go's words).
    let result = match &handler {
        None => {
            let e = registration::no_handler(&info.r#type, sock);
            Err((Refusal::new(RejectStage::Validation, e.clone()), e))
        }
        Some(h) => match h.validate(&info) {
            Err(r) => {
                let told = format!("RegisterPlugin error -- plugin validation failed with err: {}", r.error);
                Err((r, told))
            }
            Ok(()) => h.register(sock, &info, &endpoint).await.map_err(|r| {
                let told = format!("RegisterPlugin error -- plugin registration failed with err: {}", r.error);
                (r, told)
            }),
        },
    };
    let status = match &result {
        Ok(()) => RegistrationStatus { plugin_registered: true, error: String::new() },
        Err((_, told)) => RegistrationStatus { plugin_registered: false, error: told.clone() },
    };
    let t = Duration::from_secs(5);
    let notified =
        call(sock, "NotifyRegistrationStatus", t, client.notify_registration_status(request(status, t))).await;
    let rejected = |r: Refusal| Rejected {
        stage: r.stage,
        error: r.error,
        info: Some(info.clone()),
        endpoint: Some(endpoint.clone()),
        rule: r.rule,
    };
    let registered = Registered { socket: sock.to_path_buf(), name: info.name.clone(), endpoint: endpoint.clone() };
    match (result, notified, handler) {
        (Ok(()), Ok(_), Some(h)) => Ok((registered, h)),
        (Ok(()), Err(e), Some(h)) => {
            // A failed notify deregisters the plugin.
            h.deregister(&registered, "NotifyRegistrationStatus failed");
            Err(rejected(Refusal::new(RejectStage::Notify, format!("NotifyRegistrationStatus failed: {e}"))))
        }
        (Err((r, _)), _, _) => Err(rejected(r)),
        (Ok(()), _, None) => Err(rejected(Refusal::new(RejectStage::Validation, "no handler"))),
    }
}

/// What tells one socket file from another at the same path (not its
/// mode: a plugin may chmod its socket after listen(), as the kubelet's
/// fsnotify watcher ignores).
type Ident = crate::core::transport::FileIdent;

fn ident(p: &Path) -> Ident {
    std::fs::symlink_metadata(p).map(|m| crate::core::transport::file_ident(&m)).unwrap_or_default()
}

/// One socket the watcher has seen.
struct Known {
    ident: Ident,
    /// What it registered and with which handler, if it did.
    registered: Option<(Registered, Arc<dyn PluginHandler>)>,
    /// A failed registration is tried again from then on, as the kubelet's
    /// plugin-manager reconciler does (every second).
    retry_at: Option<Instant>,
    /// The last rejection, logged once rather than on every retry.
    last_error: Option<String>,
}

/// How often a failed plugin-watcher registration is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The end of one socket's registration attempt.
struct Attempt {
    sock: PathBuf,
    ident: Ident,
    result: Result<(Registered, Arc<dyn PluginHandler>), Rejected>,
}

/// Watch `dir` until the generation ends, handing each plugin to the
/// handler of its type. Each socket is registered by a task of its own (as
/// the kubelet's operation executor runs one operation per socket), so a
/// socket that never answers holds up nobody else: its GetInfo times out
/// (1 s) on its own. One attempt per socket path at a time; attempts are
/// the generation's tasks (cancelled with it, awaited by its end) and
/// report back here, where every decision about `known` is made.
pub async fn run(
    cm: Arc<ContainerManager>,
    handlers: Handlers,
    dir: PathBuf,
    dial_timeout: Duration,
    alias: Option<(PathBuf, PathBuf)>,
    wake: bool,
) {
    // Keyed by path and identity: a socket re-created between two scans (a
    // plugin restarting) is a new registration, as inotify's Create tells the kubelet.
    let mut known: BTreeMap<PathBuf, Known> = BTreeMap::new();
    let mut in_flight: BTreeSet<PathBuf> = BTreeSet::new();
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel::<Attempt>();
    let alias = Arc::new(alias);
    cm.event(KubeletEvent::PluginWatcher { dir: dir.display().to_string() });
    // A socket created or removed wakes the scan at once (upstream's plugin
    // watcher is fsnotify's); the period still applies, to subdirectories too.
    let mut watch = wake
        .then(|| crate::kubelet::dirwatch::DirWatch::new(&dir, crate::kubelet::dirwatch::Changes::Entries))
        .flatten();
    let mut woken = false;
    loop {
        let now = crate::core::transport::find_sockets(&dir);
        for sock in &now {
            if in_flight.contains(sock) {
                continue;
            }
            let id = ident(sock);
            // A scan a creation woke takes a new socket only once it accepts
            // connections (it exists from bind(), before listen()); the
            // periodic scan takes it as before.
            let new = known.get(sock).is_none_or(|k| k.ident != id);
            if woken && new && tokio::net::UnixStream::connect(sock).await.is_err() {
                continue;
            }
            match known.get(sock) {
                Some(k)
                    if k.ident == id && (k.registered.is_some() || k.retry_at.is_some_and(|t| Instant::now() < t)) =>
                {
                    continue;
                }
                Some(k) if k.ident == id => {}
                Some(_) => {
                    if let Some(Known { registered: Some((r, h)), .. }) = known.remove(sock) {
                        h.deregister(&r, "its plugin-watcher socket was re-created");
                    }
                }
                None => {}
            }
            in_flight.insert(sock.clone());
            let (handlers, alias, tx, sock) = (handlers.clone(), alias.clone(), done_tx.clone(), sock.clone());
            cm.devices.gen.tasks.spawn(async move {
                let result = register_one(&handlers, &sock, dial_timeout, alias.as_ref().as_ref()).await;
                let _ = tx.send(Attempt { sock, ident: id, result });
            });
        }
        let gone: Vec<PathBuf> = known.keys().filter(|k| !now.contains(k)).cloned().collect();
        for g in gone {
            if let Some(Known { registered: Some((r, h)), .. }) = known.remove(&g) {
                h.deregister(&r, "its plugin-watcher socket was deleted (deregistered)");
            }
        }
        // Take each attempt's end as it comes until the next scan.
        let next_scan = tokio::time::sleep(Duration::from_millis(200));
        tokio::pin!(next_scan);
        loop {
            tokio::select! {
                _ = &mut next_scan => {
                    woken = false;
                    break;
                }
                _ = crate::kubelet::dirwatch::changed(&mut watch) => {
                    woken = true;
                    break;
                }
                Some(a) = done.recv() => {
                    in_flight.remove(&a.sock);
                    attempt_done(&cm, &mut known, a);
                }
            }
        }
    }
}

/// Record one attempt's end: an event, and the socket known as registered
/// or to be tried again. A socket deleted or re-created while its attempt
/// ran has what it registered taken back.
fn attempt_done(cm: &ContainerManager, known: &mut BTreeMap<PathBuf, Known>, a: Attempt) {
    let Attempt { sock, ident: id, result } = a;
    // A refusal was told to the plugin, which may have gone at once (`dpctl
    // dra serve` exits on it): it is reported all the same.
    let gone = ident(&sock) != id;
    if gone {
        if let Ok((r, h)) = result {
            h.deregister(&r, "its plugin-watcher socket went while it registered");
            return;
        }
    }
    let last_error = known.get(&sock).and_then(|k| k.last_error.clone());
    let entry = match result {
        Ok((reg, h)) => {
            cm.event(KubeletEvent::WatcherRegistered {
                socket: sock.display().to_string(),
                resource: reg.name.clone(),
                endpoint: reg.endpoint.display().to_string(),
            });
            Known { ident: id, registered: Some((reg, h)), retry_at: None, last_error: None }
        }
        Err(r) => {
            if last_error.as_deref() != Some(r.error.as_str()) {
                use crate::core::text::{cap, cap_words};
                let info = r.info.unwrap_or_default();
                cm.event(KubeletEvent::RegistrationRejected {
                    via: Via::PluginWatcher,
                    stage: r.stage,
                    resource: cap(&info.name).into_owned(),
                    endpoint: cap(&info.endpoint).into_owned(),
                    socket: r.endpoint.unwrap_or_else(|| sock.clone()).display().to_string(),
                    version: cap(&info.supported_versions.join(",")).into_owned(),
                    request_options: None,
                    error: cap_words(&r.error).into_owned(),
                    why: registration::resource_name_problem(&info.name).filter(|_| !info.name.is_empty()),
                    rule: r.rule.map(String::from),
                });
            }
            if gone {
                return;
            }
            let e = r.error;
            Known { ident: id, registered: None, retry_at: Some(Instant::now() + RETRY), last_error: Some(e) }
        }
    };
    known.insert(sock, entry);
}
