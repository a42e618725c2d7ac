//! The kubelet's plugin watcher: scan the registry directory (recursively;
//! names starting with `.` and non-sockets ignored), call GetInfo (1 s),
//! register `DevicePlugin`s with the device manager and `DRAPlugin`s with
//! the DRA manager, tell them with NotifyRegistrationStatus (5 s); a
//! deleted socket deregisters its plugin.

use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest, RegistrationStatus};
use crate::core::transport::{call, dial, request};
use crate::kubelet::event::{KubeletEvent, Registrant, RejectStage, Via};
use crate::kubelet::registration::connect_plugin;
use crate::kubelet::shell::Manager;
use crate::protocol::registration;
use std::collections::BTreeMap;
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

async fn register_one(
    mgr: &Arc<Manager>,
    sock: &Path,
    dial_timeout: Duration,
    alias: Option<&(PathBuf, PathBuf)>,
) -> Result<(String, PathBuf), Rejected> {
    let ch = dial(sock, dial_timeout).await.map_err(|e| Rejected::new(RejectStage::GetInfo, e.to_string()))?;
    let mut client = RegistrationClient::new(ch);
    let t = Duration::from_secs(1);
    let info = call(sock, "GetInfo", t, client.get_info(request(InfoRequest {}, t)))
        .await
        .map_err(|e| Rejected::new(RejectStage::GetInfo, e.to_string()))?;
    let dra = mgr.dra.get().filter(|_| info.r#type == crate::protocol::dra::PLUGIN_TYPE).cloned();
    if info.r#type != "DevicePlugin" && dra.is_none() {
        let e = format!("ignored: plugin type {:?} is not handled by the device manager", info.r#type);
        return Err(Rejected { info: Some(info), ..Rejected::new(RejectStage::Validation, e) });
    }
    let endpoint =
        if info.endpoint.is_empty() { sock.to_path_buf() } else { host_endpoint(Path::new(&info.endpoint), alias) };
    let result = async {
        if let Some(dra) = &dra {
            return dra.register(sock, &info, &endpoint).await.map_err(|(stage, text)| (stage, text, None));
        }
        let broken = registration::watcher_versions(&info.supported_versions)
            .or_else(|| registration::register_resource_name(&info.name));
        if let Some(v) = broken {
            return Err((RejectStage::Validation, v.to_string(), Some(v.rule.id)));
        }
        let (conn, options) =
            connect_plugin(mgr, &endpoint, dial_timeout).await.map_err(|e| (RejectStage::DialBack, e, None))?;
        let who = Registrant {
            via: Via::PluginWatcher,
            version: info.supported_versions.join(","),
            endpoint: info.endpoint.clone(),
            request_options: None,
        };
        mgr.start_endpoint(&info.name, conn, options, who).map_err(|e| match e {
            crate::kubelet::shell::StartError::Restarting => (RejectStage::Restarting, e.to_string(), None),
            refused => (RejectStage::DialBack, refused.to_string(), None),
        })?;
        Ok(())
    }
    .await;
    let status = match &result {
        Ok(_) => RegistrationStatus { plugin_registered: true, error: String::new() },
        Err((_, e, _)) => RegistrationStatus { plugin_registered: false, error: e.clone() },
    };
    let t = Duration::from_secs(5);
    let notified =
        call(sock, "NotifyRegistrationStatus", t, client.notify_registration_status(request(status, t))).await;
    let rejected = |stage, error, rule| Rejected {
        stage,
        error,
        info: Some(info.clone()),
        endpoint: Some(endpoint.clone()),
        rule,
    };
    match (result, notified) {
        (Ok(()), Ok(_)) => Ok((info.name.clone(), endpoint.clone())),
        (Ok(()), Err(e)) => {
            // A failed notify deregisters the plugin.
            if let Some(d) = &dra {
                d.deregister_socket(sock);
            }
            if let Some((res, id)) = mgr.resource_of(&endpoint) {
                mgr.stream_ended(&res, id, "NotifyRegistrationStatus failed");
            }
            Err(rejected(RejectStage::Notify, format!("NotifyRegistrationStatus failed: {e}"), None))
        }
        (Err((stage, e, rule)), _) => Err(rejected(stage, e, rule)),
    }
}

/// What tells one socket file from another at the same path: inode numbers
/// are reused when a plugin deletes and re-creates its socket at once, the
/// change time (to the nanosecond) is not.
type Ident = (u64, i64, i64);

fn ident(p: &Path) -> Ident {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).map(|m| (m.ino(), m.ctime(), m.ctime_nsec())).unwrap_or((0, 0, 0))
}

/// One socket the watcher has seen.
struct Known {
    ident: Ident,
    /// The resource and endpoint it registered, if it did.
    registered: Option<(String, PathBuf)>,
    /// A failed registration is tried again from then on, as the kubelet's
    /// plugin-manager reconciler does (every second).
    retry_at: Option<Instant>,
    /// The last rejection, logged once rather than on every retry.
    last_error: Option<String>,
}

/// How often a failed plugin-watcher registration is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Watch `dir` until `stop`.
pub async fn run(mgr: Arc<Manager>, dir: PathBuf, dial_timeout: Duration, alias: Option<(PathBuf, PathBuf)>) {
    // Keyed by path and identity: a socket re-created between two scans (a
    // plugin restarting) is a new registration, as inotify's Create tells the kubelet.
    let mut known: BTreeMap<PathBuf, Known> = BTreeMap::new();
    mgr.event(KubeletEvent::PluginWatcher { dir: dir.display().to_string() });
    loop {
        let now = crate::core::transport::find_sockets(&dir);
        for sock in &now {
            let id = ident(sock);
            let mut last_error = None;
            match known.get(sock) {
                Some(k) if k.ident == id => {
                    if k.registered.is_some() || k.retry_at.is_some_and(|t| Instant::now() < t) {
                        continue;
                    }
                    last_error = k.last_error.clone();
                }
                Some(_) => {
                    if let Some(d) = mgr.dra.get() {
                        d.deregister_socket(sock);
                    }
                    if let Some(Known { registered: Some((res, ep)), .. }) = known.remove(sock) {
                        if let Some((r, gen)) = mgr.resource_of(&ep) {
                            if r == res {
                                mgr.stream_ended(&res, gen, "its plugin-watcher socket was re-created");
                            }
                        }
                    }
                }
                None => {}
            }
            let r = register_one(&mgr, sock, dial_timeout, alias.as_ref()).await;
            let entry = match r {
                Ok((res, ep)) => {
                    mgr.event(KubeletEvent::WatcherRegistered {
                        socket: sock.display().to_string(),
                        resource: res.clone(),
                        endpoint: ep.display().to_string(),
                    });
                    Known { ident: id, registered: Some((res, ep)), retry_at: None, last_error: None }
                }
                Err(r) => {
                    if last_error.as_deref() != Some(r.error.as_str()) {
                        use crate::core::text::{cap, cap_words};
                        let info = r.info.unwrap_or_default();
                        mgr.event(KubeletEvent::RegistrationRejected {
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
                    let e = r.error;
                    Known { ident: id, registered: None, retry_at: Some(Instant::now() + RETRY), last_error: Some(e) }
                }
            };
            known.insert(sock.clone(), entry);
        }
        let gone: Vec<PathBuf> = known.keys().filter(|k| !now.contains(k)).cloned().collect();
        for g in gone {
            if let Some(d) = mgr.dra.get() {
                d.deregister_socket(&g);
            }
            if let Some(Known { registered: Some((res, ep)), .. }) = known.remove(&g) {
                if let Some((r, id)) = mgr.resource_of(&ep) {
                    if r == res {
                        mgr.stream_ended(&res, id, "its plugin-watcher socket was deleted (deregistered)");
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
