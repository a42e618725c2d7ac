//! Read-only inspection of a node's device-plugin state for `dpctl doctor`:
//! the plugin directory (live, stale and stray entries), each live plugin
//! (options, snapshot size, device problems), the checkpoint against the
//! PodResources API, and the plugin-watcher directory. Every socket is
//! checked concurrently with its own timeout, so a hanging plugin costs
//! one timeout, not one per call. Nothing on the node is modified.

use crate::api::podresources::{pod_resources_lister_client::PodResourcesListerClient, ListPodResourcesRequest};
use crate::api::{HEALTHY, KUBELET_MAX_RECV};
use crate::core::paths::{CHECKPOINT_NAME, KUBELET_SOCKET_NAME};
use crate::core::transport::{call, dial, path_kind, request, PathKind};
use crate::core::validate::device_problems;
use crate::kubelet::checkpoint;
use crate::kubelet::conn::{PluginConn, Update};
use prost::Message;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Something is off but nothing fails because of it yet.
    Warning,
    /// Something fails (or will) because of it.
    Error,
}

/// One finding: what is wrong, the evidence, and the fix.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Severity.
    pub severity: Severity,
    /// A short check name, e.g. `stale-socket`.
    pub check: &'static str,
    /// The socket, file or resource concerned.
    pub subject: String,
    /// What is wrong, in plain words.
    pub message: String,
    /// What was seen.
    pub evidence: String,
    /// What to do.
    pub fix: String,
}

/// What doctor looked at.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    /// Live plugin sockets inspected.
    pub plugin_sockets: usize,
    /// Whether kubelet.sock answered.
    pub kubelet_socket_live: bool,
    /// Allocations in the checkpoint.
    pub checkpoint_allocations: usize,
    /// Whether PodResources answered.
    pub pod_resources: bool,
    /// Plugin-watcher sockets inspected.
    pub watcher_sockets: usize,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `ok`, `warning` or `error`.
    pub result: String,
    /// What was checked.
    pub checked: Checked,
    /// Findings, worst first.
    pub findings: Vec<Finding>,
}

/// Where to look.
#[derive(Debug, Clone)]
pub struct Options {
    /// Device-plugin directory.
    pub plugin_dir: PathBuf,
    /// PodResources socket.
    pub pod_resources_socket: PathBuf,
    /// Plugin-watcher directory (checked when it exists).
    pub plugins_registry_dir: PathBuf,
    /// Per-socket timeout.
    pub timeout: Duration,
}

fn finding(
    severity: Severity,
    check: &'static str,
    subject: impl Into<String>,
    message: impl Into<String>,
    evidence: impl Into<String>,
    fix: impl Into<String>,
) -> Finding {
    Finding {
        severity,
        check,
        subject: subject.into(),
        message: message.into(),
        evidence: evidence.into(),
        fix: fix.into(),
    }
}

/// What one live plugin showed.
struct PluginView {
    socket: PathBuf,
    devices: BTreeMap<String, String>,
}

async fn inspect_plugin(socket: PathBuf, timeout: Duration, out: &mut Vec<Finding>) -> Option<PluginView> {
    let shown = socket.display().to_string();
    let work = async {
        // The outer deadline decides; the per-call one must not fire first.
        let conn = PluginConn::connect(&socket, timeout + Duration::from_secs(1), 512 << 20).await?;
        let opts = conn.options().await?;
        let mut s = conn.list_and_watch().await?;
        match s.next().await? {
            Update::Snapshot(r) => Ok((opts, r)),
            Update::Closed => {
                Err(crate::core::Error::failed("the plugin closed ListAndWatch before sending a snapshot"))
            }
        }
    };
    let (_opts, snap) = match tokio::time::timeout(timeout, work).await {
        Err(_) => {
            out.push(finding(
                Severity::Error,
                "plugin-hangs",
                &shown,
                "the plugin accepts connections but does not answer; the kubelet's calls to it hang too",
                format!("no options and first snapshot within {}", crate::core::time::format_duration(timeout)),
                "restart the plugin and check its logs for a deadlock or a blocked health check",
            ));
            return None;
        }
        Ok(Err(e)) => {
            out.push(finding(
                Severity::Error,
                "plugin-error",
                &shown,
                "the plugin does not answer the device-plugin API correctly",
                e.to_string(),
                "check the plugin's logs; `dpctl probe` shows which call fails",
            ));
            return None;
        }
        Ok(Ok(x)) => x,
    };
    let size = snap.encoded_len();
    if size > KUBELET_MAX_RECV {
        out.push(finding(
            Severity::Error,
            "snapshot-too-large",
            &shown,
            "the ListAndWatch snapshot is over the kubelet's 4 MiB receive limit; the kubelet drops the stream and the resource's devices become unhealthy",
            format!("{size} bytes for {} devices (limit {KUBELET_MAX_RECV})", snap.devices.len()),
            "advertise fewer devices per plugin (split the resource) or shorten the device IDs",
        ));
    } else if size > KUBELET_MAX_RECV / 4 * 3 {
        out.push(finding(
            Severity::Warning,
            "snapshot-size",
            &shown,
            "the ListAndWatch snapshot is close to the kubelet's 4 MiB receive limit",
            format!("{size} bytes for {} devices", snap.devices.len()),
            "plan for fewer devices per plugin or shorter IDs before it grows",
        ));
    }
    for p in device_problems(snap.devices.iter().map(|d| (d.id.as_str(), d.health.as_str()))) {
        let sev = if p.is_warning() { Severity::Warning } else { Severity::Error };
        out.push(finding(sev, "device-ids", &shown, p.to_string(), "first ListAndWatch snapshot", "fix the plugin's device list: unique non-empty IDs of at most 63 characters, health exactly \"Healthy\" or \"Unhealthy\""));
    }
    let unhealthy: Vec<&str> = snap.devices.iter().filter(|d| d.health != HEALTHY).map(|d| d.id.as_str()).collect();
    if !unhealthy.is_empty() {
        out.push(finding(
            Severity::Warning,
            "unhealthy-devices",
            &shown,
            format!("{} of {} devices are not Healthy and cannot be allocated", unhealthy.len(), snap.devices.len()),
            unhealthy.join(","),
            "check the hardware and the plugin's health checks; the kubelet allocates only Healthy devices",
        ));
    }
    Some(PluginView { socket, devices: snap.devices.into_iter().map(|d| (d.id, d.health)).collect() })
}

/// Inspect the node.
pub async fn inspect(o: &Options) -> Report {
    let mut f: Vec<Finding> = Vec::new();
    let mut checked = Checked::default();
    let dir = &o.plugin_dir;
    let mut live = Vec::new();
    match std::fs::read_dir(dir) {
        Err(e) => f.push(finding(
            Severity::Error,
            "plugin-dir",
            dir.display().to_string(),
            "the device-plugin directory cannot be read",
            e.to_string(),
            "check --plugin-dir (the kubelet's is /var/lib/kubelet/device-plugins/) and run as root",
        )),
        Ok(rd) => {
            let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            entries.sort();
            let kubelet = dir.join(KUBELET_SOCKET_NAME);
            if !entries.contains(&kubelet) {
                f.push(finding(Severity::Error, "kubelet-socket", kubelet.display().to_string(), "kubelet.sock is missing: no kubelet is serving device-plugin registration", "no such file", "start the kubelet (systemctl status kubelet); if it runs with another --root-dir, pass --plugin-dir"));
            }
            for p in entries {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let shown = p.display().to_string();
                match path_kind(&p) {
                    Ok(PathKind::Socket) => {
                        let conn = tokio::time::timeout(o.timeout, tokio::net::UnixStream::connect(&p)).await;
                        let answers = matches!(conn, Ok(Ok(_)));
                        if p == kubelet {
                            checked.kubelet_socket_live = answers;
                            if !answers {
                                f.push(finding(
                                    Severity::Error,
                                    "kubelet-socket",
                                    &shown,
                                    "kubelet.sock exists but nothing answers: the kubelet is down or restarting",
                                    format!("{conn:?}").chars().take(120).collect::<String>(),
                                    "check the kubelet (systemctl status kubelet, journalctl -u kubelet)",
                                ));
                            }
                        } else if answers {
                            live.push(p);
                        } else {
                            f.push(finding(Severity::Warning, "stale-socket", &shown, "a stale socket: nothing listens on it (its plugin exited without removing it)", "connect: connection refused", "remove it, or restart the plugin that owned it; the kubelet also deletes it at its next start"));
                        }
                    }
                    Ok(PathKind::File) if name == CHECKPOINT_NAME => {}
                    Ok(PathKind::File) if name.starts_with(CHECKPOINT_NAME) => f.push(finding(
                        Severity::Info,
                        "checkpoint-copy",
                        &shown,
                        "a copy of the checkpoint (set aside earlier)",
                        "",
                        "remove it when it is no longer needed",
                    )),
                    Ok(PathKind::File) => f.push(finding(
                        Severity::Warning,
                        "not-a-socket",
                        &shown,
                        "a regular file in the device-plugin directory: a plugin's socket path may be taken by it",
                        "regular file",
                        "remove or move it; nothing but sockets and the kubelet's checkpoint belong here",
                    )),
                    Ok(PathKind::Symlink) => f.push(finding(
                        Severity::Warning,
                        "not-a-socket",
                        &shown,
                        "a symlink in the device-plugin directory",
                        "symlink",
                        "replace it with the plugin's real socket path",
                    )),
                    _ => {}
                }
            }
        }
    }

    // Live plugins, concurrently.
    checked.plugin_sockets = live.len();
    let per = o.timeout;
    let mut set = tokio::task::JoinSet::new();
    for s in live {
        set.spawn(async move {
            let mut out = Vec::new();
            let v = inspect_plugin(s, per, &mut out).await;
            (v, out)
        });
    }
    let mut plugins: Vec<PluginView> = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok((v, out)) = r {
            f.extend(out);
            plugins.extend(v);
        }
    }

    // Checkpoint vs PodResources and live plugins.
    let cp_path = dir.join(CHECKPOINT_NAME);
    let cp = match checkpoint::read(&cp_path) {
        Ok(c) => c.map(|l| l.checkpoint.data),
        Err(e) => {
            f.push(finding(Severity::Error, "checkpoint-corrupt", cp_path.display().to_string(), "the device manager's checkpoint cannot be read", e.to_string(), "move it aside (mv kubelet_internal_checkpoint kubelet_internal_checkpoint.bad) and restart the kubelet; allocations of running pods are re-created"));
            None
        }
    };
    let held: Option<BTreeSet<(String, String)>> = {
        let work = async {
            let mut c = PodResourcesListerClient::new(dial(&o.pod_resources_socket, per).await?);
            call(&o.pod_resources_socket, "List", per, c.list(request(ListPodResourcesRequest {}, per))).await
        };
        match tokio::time::timeout(per + Duration::from_millis(200), work).await {
            Ok(Ok(resp)) => {
                checked.pod_resources = true;
                Some(
                    resp.pod_resources
                        .iter()
                        .flat_map(|p| p.containers.iter())
                        .flat_map(|c| c.devices.iter())
                        .flat_map(|d| d.device_ids.iter().map(|id| (d.resource_name.clone(), id.clone())))
                        .collect(),
                )
            }
            other => {
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".into(),
                };
                if cp.as_ref().is_some_and(|d| !d.pod_device_entries.is_empty()) {
                    f.push(finding(
                        Severity::Warning,
                        "pod-resources",
                        o.pod_resources_socket.display().to_string(),
                        "the PodResources API does not answer, so stale allocations cannot be checked",
                        why,
                        "pass --pod-resources-socket (the kubelet's is /var/lib/kubelet/pod-resources/kubelet.sock)",
                    ));
                }
                None
            }
        }
    };
    if let Some(data) = &cp {
        checked.checkpoint_allocations = data.pod_device_entries.len();
        // Which live plugin serves a resource: the one whose devices overlap the registered IDs.
        let plugin_of = |res: &str| -> Option<&PluginView> {
            let ids = data.registered_devices.get(res)?;
            plugins
                .iter()
                .max_by_key(|p| ids.iter().filter(|i| p.devices.contains_key(*i)).count())
                .filter(|p| ids.iter().any(|i| p.devices.contains_key(i)))
        };
        if let Some(held) = &held {
            for e in &data.pod_device_entries {
                let stale: Vec<String> =
                    e.ids().into_iter().filter(|id| !held.contains(&(e.resource_name.clone(), id.clone()))).collect();
                if !stale.is_empty() {
                    f.push(finding(
                        Severity::Error,
                        "stale-allocation",
                        e.resource_name.clone(),
                        format!("{} device(s) are allocated in the checkpoint but no running container holds them; they count as in use and cause \"Requested: N, Available: 0\" admission errors", stale.len()),
                        format!("pod UID {} container {:?}: {} (PodResources lists no container with them; devices of a finished init container show here too)", e.pod_uid, e.container_name, stale.join(",")),
                        "if the pod is gone, restart the kubelet so it drops allocations of pods it no longer runs; if it is stuck terminating, force-delete it",
                    ));
                }
            }
        }
        for e in &data.pod_device_entries {
            if let Some(p) = plugin_of(&e.resource_name) {
                for id in e.ids() {
                    match p.devices.get(&id) {
                        None => f.push(finding(
                            Severity::Warning,
                            "allocated-device-gone",
                            e.resource_name.clone(),
                            format!("device {id} is allocated to a container but its plugin no longer reports it"),
                            format!(
                                "pod UID {} container {:?}; plugin {}",
                                e.pod_uid,
                                e.container_name,
                                p.socket.display()
                            ),
                            "check the hardware; restart the affected pod once the device is back",
                        )),
                        Some(h) if h != HEALTHY => f.push(finding(
                            Severity::Warning,
                            "allocated-device-unhealthy",
                            e.resource_name.clone(),
                            format!("device {id} is allocated to a container but its plugin reports it {h}"),
                            format!(
                                "pod UID {} container {:?}; plugin {}",
                                e.pod_uid,
                                e.container_name,
                                p.socket.display()
                            ),
                            "the workload may be failing; check the device and reschedule the pod",
                        )),
                        _ => {}
                    }
                }
            }
        }
        for (res, ids) in &data.registered_devices {
            if plugin_of(res).is_none() {
                f.push(finding(
                    Severity::Error,
                    "not-re-registered",
                    res.clone(),
                    "this resource is registered in the checkpoint but no live plugin socket serves its devices: its plugin did not re-register after a kubelet restart (capacity stays 0)",
                    format!("{} device(s) registered: {}", ids.len(), ids.iter().take(8).cloned().collect::<Vec<_>>().join(",")),
                    "restart the plugin (delete its DaemonSet pod); a plugin must watch for kubelet.sock being re-created and register again",
                ));
            }
        }
    }

    // Plugin watcher.
    if o.plugins_registry_dir.is_dir() {
        let socks = crate::core::transport::find_sockets(&o.plugins_registry_dir);
        checked.watcher_sockets = socks.len();
        let mut set = tokio::task::JoinSet::new();
        for s in socks {
            set.spawn(async move {
                use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest};
                let t = per.min(Duration::from_secs(1));
                let work = async {
                    let mut c = RegistrationClient::new(dial(&s, t).await?);
                    call(&s, "GetInfo", t, c.get_info(request(InfoRequest {}, t))).await
                };
                let r = tokio::time::timeout(t + Duration::from_millis(200), work).await;
                (s, r)
            });
        }
        while let Some(Ok((s, r))) = set.join_next().await {
            let why = match r {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 1s (the kubelet's GetInfo timeout)".into(),
            };
            f.push(finding(
                Severity::Error,
                "watcher-socket",
                s.display().to_string(),
                "a plugin-watcher socket does not answer GetInfo, so the kubelet cannot register its plugin",
                why,
                "restart the plugin that owns it, or remove the stale socket",
            ));
        }
    }

    f.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then_with(|| a.check.cmp(b.check)).then_with(|| a.subject.cmp(&b.subject))
    });
    let worst = f.iter().map(|x| x.severity).max();
    let result = match worst {
        Some(Severity::Error) => "error",
        Some(Severity::Warning) => "warning",
        _ => "ok",
    };
    Report { result: result.into(), checked, findings: f }
}
