//! The kubelet's plugin watcher for device plugins: scan the registry
//! directory (recursively; names starting with `.` and non-sockets ignored),
//! call GetInfo (1 s), register `DevicePlugin`s, tell them with
//! NotifyRegistrationStatus (5 s); a deleted socket deregisters its plugin.

use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest, RegistrationStatus};
use crate::core::transport::{call, dial, request};
use crate::core::validate::{kubelet_invalid_resource_text, resource_name_problem};
use crate::kubelet::registration::connect_plugin;
use crate::kubelet::shell::Manager;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn register_one(mgr: &Arc<Manager>, sock: &Path, dial_timeout: Duration) -> Result<(String, PathBuf), String> {
    let ch = dial(sock, dial_timeout).await.map_err(|e| e.to_string())?;
    let mut client = RegistrationClient::new(ch);
    let t = Duration::from_secs(1);
    let info =
        call(sock, "GetInfo", t, client.get_info(request(InfoRequest {}, t))).await.map_err(|e| e.to_string())?;
    if info.r#type != "DevicePlugin" {
        return Err(format!("ignored: plugin type {:?} is not handled by the device manager", info.r#type));
    }
    let result = async {
        if !info.supported_versions.iter().any(|v| v == crate::api::VERSION) {
            return Err(format!(
                "manager version, {}, is not among plugin supported versions {:?}",
                crate::api::VERSION,
                info.supported_versions
            ));
        }
        if resource_name_problem(&info.name).is_some() {
            return Err(kubelet_invalid_resource_text(&info.name));
        }
        let endpoint = if info.endpoint.is_empty() { sock.to_path_buf() } else { PathBuf::from(&info.endpoint) };
        let (conn, options) = connect_plugin(mgr, &endpoint, dial_timeout).await?;
        mgr.start_endpoint(&info.name, conn, options, "plugin-watcher")
            .ok_or_else(|| "the kubelet is restarting".to_string())?;
        Ok(endpoint)
    }
    .await;
    let status = match &result {
        Ok(_) => RegistrationStatus { plugin_registered: true, error: String::new() },
        Err(e) => RegistrationStatus { plugin_registered: false, error: e.clone() },
    };
    let t = Duration::from_secs(5);
    let notified =
        call(sock, "NotifyRegistrationStatus", t, client.notify_registration_status(request(status, t))).await;
    match (result, notified) {
        (Ok(ep), Ok(_)) => Ok((info.name, ep)),
        (Ok(ep), Err(e)) => {
            // A failed notify deregisters the plugin.
            if let Some((res, id)) = mgr.resource_of(&ep) {
                mgr.stream_ended(&res, id, "NotifyRegistrationStatus failed");
            }
            Err(format!("NotifyRegistrationStatus failed: {e}"))
        }
        (Err(e), _) => Err(e),
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
pub async fn run(mgr: Arc<Manager>, dir: PathBuf, dial_timeout: Duration) {
    // Keyed by path and identity: a socket re-created between two scans (a
    // plugin restarting) is a new registration, as inotify's Create tells the kubelet.
    let mut known: BTreeMap<PathBuf, Known> = BTreeMap::new();
    mgr.event("plugin-watcher", &[("dir", json!(dir.display().to_string()))]);
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
            let r = register_one(&mgr, sock, dial_timeout).await;
            let entry = match r {
                Ok((res, ep)) => {
                    mgr.event(
                        "watcher-registered",
                        &[
                            ("socket", json!(sock.display().to_string())),
                            ("resource", json!(res)),
                            ("endpoint", json!(ep.display().to_string())),
                        ],
                    );
                    Known { ident: id, registered: Some((res, ep)), retry_at: None, last_error: None }
                }
                Err(e) => {
                    if last_error.as_deref() != Some(e.as_str()) {
                        mgr.event(
                            "watcher-rejected",
                            &[("socket", json!(sock.display().to_string())), ("error", json!(e))],
                        );
                    }
                    Known { ident: id, registered: None, retry_at: Some(Instant::now() + RETRY), last_error: Some(e) }
                }
            };
            known.insert(sock.clone(), entry);
        }
        let gone: Vec<PathBuf> = known.keys().filter(|k| !now.contains(k)).cloned().collect();
        for g in gone {
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
