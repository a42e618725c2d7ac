//! Findings from facts: pure functions, one scenario per unit test.

use super::facts::{Checkpoint, Facts, Got, Plugin, Pod};
use super::{cdi, Checked, Finding, Report, Severity};
use crate::api::deviceplugin::Device;
use crate::api::HEALTHY;
use crate::client::checkpoint::PodDeviceEntry;
use crate::core::transport::{Connect, PathKind};
use crate::protocol::{self, deviceplugin, Violation};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Which live socket serves a resource, and what decided it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Served {
    /// The resource.
    pub resource: String,
    /// The plugin's socket.
    pub socket: String,
    /// What decided it.
    pub how: String,
}

/// Plugins mapped to resources from the kubelet's view.
#[derive(Debug, Default)]
pub struct Mapping {
    /// resource → (plugin index, how).
    pub served: BTreeMap<String, (usize, &'static str)>,
    /// resource → the plugins it could be (undecidable).
    pub ambiguous: BTreeMap<String, Vec<usize>>,
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

/// A rulebook violation as a finding: error for a FAIL rule, warning for a WARN one.
fn rule_finding(v: &Violation, subject: &str, evidence: impl Into<String>) -> Finding {
    let severity = match v.rule.severity {
        protocol::Severity::Fail => Severity::Error,
        protocol::Severity::Warn => Severity::Warning,
    };
    finding(severity, v.rule.id, subject, v.to_string(), evidence, v.rule.fix)
}

/// The device rules of the rulebook over a plugin's first snapshot.
fn device_rules(devs: &[crate::api::deviceplugin::Device], subject: &str) -> Vec<Finding> {
    deviceplugin::devices(devs).iter().map(|v| rule_finding(v, subject, "first ListAndWatch snapshot")).collect()
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

/// IDs for evidence: at most 12, control characters escaped.
fn ids<'a>(it: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<String> = it.into_iter().map(|s| s.escape_debug().to_string()).collect();
    let n = v.len();
    if n == 0 {
        return "(none)".into();
    }
    let mut s = v.into_iter().take(12).collect::<Vec<_>>().join(",");
    if n > 12 {
        s.push_str(&format!(" (+{} more)", n - 12));
    }
    s
}

fn norm(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Whether a socket's file name names the resource (`nvidia-gpu.sock` for
/// `nvidia.com/gpu` matches on `gpu`; `vendor.example_foo.sock` on the whole name).
pub fn name_matches(socket: &Path, resource: &str) -> bool {
    let stem = socket.file_stem().map(|s| norm(&s.to_string_lossy())).unwrap_or_default();
    let short = norm(resource.rsplit('/').next().unwrap_or(resource));
    stem.contains(&norm(resource)) || (short.len() >= 3 && stem.contains(&short))
}

/// Whether a plugin-watcher endpoint names this socket (the endpoint is a host path; the socket may be under --root).
fn endpoint_is(socket: &Path, endpoint: &str) -> bool {
    let e = Path::new(endpoint);
    if e.is_absolute() {
        e.strip_prefix("/").is_ok_and(|rel| !rel.as_os_str().is_empty() && socket.ends_with(rel))
    } else {
        !endpoint.is_empty() && socket.file_name() == e.file_name()
    }
}

fn registered(f: &Facts) -> Option<&BTreeMap<String, Vec<String>>> {
    match &f.checkpoint {
        Checkpoint::Read(d) => Some(&d.registered_devices),
        _ => None,
    }
}

/// Map live plugins to resources, strongest evidence first: the plugin
/// watcher's GetInfo, the plugin's healthy IDs equal to the kubelet's
/// allocatable IDs, all its IDs equal to the checkpoint's registered IDs,
/// its socket name, and last the only plugin sharing any ID. A match counts
/// only when it is one-to-one at its level; ties are broken by GetInfo and
/// socket names, else the resource is ambiguous.
pub fn map_plugins(f: &Facts) -> Mapping {
    let reg: BTreeMap<&str, BTreeSet<&str>> = registered(f)
        .map(|r| r.iter().map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect())).collect())
        .unwrap_or_default();
    let alloc: Option<BTreeMap<&str, BTreeSet<&str>>> = f
        .allocatable
        .ok()
        .map(|a| a.iter().map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect())).collect());
    let infos: Vec<(&str, &str)> = f
        .watchers
        .iter()
        .filter_map(|w| w.info.ok())
        .filter(|(t, _, _)| t == "DevicePlugin")
        .map(|(_, n, e)| (n.as_str(), e.as_str()))
        .collect();
    let mut resources: BTreeSet<&str> = reg.keys().copied().collect();
    if let Some(a) = &alloc {
        resources.extend(a.keys().copied());
    }
    resources.extend(infos.iter().map(|(n, _)| *n));
    let all: Vec<Option<BTreeSet<&str>>> =
        f.plugins.iter().map(|p| p.devices.as_ref().map(|d| d.iter().map(|x| x.id.as_str()).collect())).collect();
    let healthy: Vec<Option<BTreeSet<&str>>> = f
        .plugins
        .iter()
        .map(|p| p.devices.as_ref().map(|d| d.iter().filter(|x| x.health == HEALTHY).map(|x| x.id.as_str()).collect()))
        .collect();
    let info = |r: &str, i: usize| infos.iter().any(|(n, e)| *n == r && endpoint_is(&f.plugins[i].socket, e));
    let by_name = |r: &str, i: usize| name_matches(&f.plugins[i].socket, r);
    let level = |l: usize, r: &str, i: usize| -> bool {
        match l {
            0 => info(r, i),
            1 => match (alloc.as_ref().and_then(|a| a.get(r)), &healthy[i]) {
                (Some(a), Some(h)) => !a.is_empty() && a == h,
                _ => false,
            },
            2 => match (reg.get(r), &all[i]) {
                (Some(g), Some(d)) => !g.is_empty() && g == d,
                _ => false,
            },
            3 => by_name(r, i),
            _ => match &all[i] {
                Some(d) => {
                    reg.get(r).is_some_and(|g| !g.is_disjoint(d))
                        || alloc.as_ref().and_then(|a| a.get(r)).is_some_and(|g| !g.is_disjoint(d))
                }
                None => false,
            },
        }
    };
    const HOW: [&str; 5] = [
        "plugin-watcher GetInfo",
        "healthy IDs equal the kubelet's allocatable IDs",
        "device IDs equal the checkpoint's registered IDs",
        "socket name",
        "the only live plugin sharing device IDs with it",
    ];
    // Every relation is computed once (resources × plugins), so the
    // assignment below costs lookups, not set comparisons.
    let rs: Vec<&str> = resources.iter().copied().collect();
    let np = f.plugins.len();
    let table = |g: &dyn Fn(&str, usize) -> bool| -> Vec<Vec<bool>> {
        rs.iter().map(|r| (0..np).map(|i| g(r, i)).collect()).collect()
    };
    let info_t = table(&info);
    let name_t = table(&by_name);
    let mut m = Mapping::default();
    let mut used = vec![false; np];
    let mut done = vec![false; rs.len()];
    for (l, how) in HOW.iter().enumerate() {
        let t = table(&|r, i| level(l, r, i));
        loop {
            let open: Vec<usize> = (0..rs.len()).filter(|k| !done[*k]).collect();
            let mut decided: Option<(usize, usize)> = None;
            let mut tied: Vec<(usize, Vec<usize>)> = Vec::new();
            for &k in &open {
                let c: Vec<usize> = (0..np).filter(|i| !used[*i] && t[k][*i]).collect();
                if c.is_empty() {
                    continue;
                }
                // One-to-one at this level, or made so by GetInfo / socket names.
                let pick = if c.len() == 1 {
                    Some(c[0])
                } else {
                    [&info_t, &name_t].iter().find_map(|tb| {
                        let n: Vec<usize> = c.iter().copied().filter(|i| tb[k][*i]).collect();
                        (n.len() == 1).then(|| n[0])
                    })
                };
                match pick {
                    Some(i) => {
                        let rivals: Vec<usize> = open.iter().copied().filter(|k2| t[*k2][i]).collect();
                        // The plugin fits several resources: names must single this one out.
                        let ok = rivals.len() == 1
                            || rivals.iter().copied().filter(|k2| info_t[*k2][i] || name_t[*k2][i]).eq([k]);
                        if ok {
                            decided = Some((k, i));
                            break;
                        }
                        tied.push((k, c));
                    }
                    None => tied.push((k, c)),
                }
            }
            match decided {
                Some((k, i)) => {
                    used[i] = true;
                    done[k] = true;
                    m.served.insert(rs[k].to_string(), (i, *how));
                }
                None => {
                    // Ties at the strong levels are final; weak ones (names, overlap) just do not decide.
                    if l <= 2 {
                        for (k, c) in tied {
                            done[k] = true;
                            m.ambiguous.insert(rs[k].to_string(), c);
                        }
                    }
                    break;
                }
            }
        }
    }
    m
}

/// The kubelet's state from kubelet.sock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kubelet {
    Up,
    Down,
    Unknown,
}

fn pod_name(p: Option<&Pod>, uid: &str) -> String {
    match p {
        Some(p) => format!("{}/{} (UID {uid})", p.namespace, p.name),
        None => format!("pod UID {uid}"),
    }
}

/// `(resource, device)` → the running pod and container PodResources says hold it.
type Held<'a> = BTreeMap<(&'a str, &'a str), (&'a Pod, &'a str)>;

/// What the finding kinds share: the facts and what is derived from them once.
struct View<'a> {
    f: &'a Facts,
    kubelet: Kubelet,
    /// Which plugin serves which resource.
    m: Mapping,
    /// Plugin sockets with nothing listening.
    stale: Vec<&'a Path>,
    /// The checkpoint's allocations.
    entries: &'a [PodDeviceEntry],
    /// Devices running containers hold, per PodResources (None when it does not answer).
    held: Option<Held<'a>>,
    /// Which running pod each checkpoint pod UID is.
    identity: BTreeMap<&'a str, &'a Pod>,
}

impl<'a> View<'a> {
    fn new(f: &'a Facts) -> Self {
        let entries: &[PodDeviceEntry] = match &f.checkpoint {
            Checkpoint::Read(d) => &d.pod_device_entries,
            _ => &[],
        };
        let held = f.pods.ok().map(|pods| held_devices(pods));
        let identity = held.as_ref().map(|h| identities(h, entries)).unwrap_or_default();
        let stale = f
            .entries
            .iter()
            .filter(|e| e.kind == PathKind::Socket && e.connect == Some(Connect::Refused))
            .map(|e| e.path.as_path())
            .collect();
        View { f, kubelet: kubelet_state(f), m: map_plugins(f), stale, entries, held, identity }
    }

    /// The pods (`namespace/name`) holding devices of `resource`: from
    /// PodResources, else the checkpoint's pod UIDs.
    fn holders(&self, resource: &str) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        match &self.held {
            Some(h) => out.extend(
                h.iter().filter(|((r, _), _)| *r == resource).map(|(_, (p, _))| format!("{}/{}", p.namespace, p.name)),
            ),
            None => out.extend(
                self.entries
                    .iter()
                    .filter(|e| e.resource_name == resource)
                    .map(|e| pod_name(self.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid)),
            ),
        }
        out.into_iter().collect()
    }

    /// "; pods holding its devices: a/b, c/d", or nothing.
    fn holders_text(&self, resource: &str) -> String {
        let h = self.holders(resource);
        if h.is_empty() {
            String::new()
        } else {
            let shown: Vec<String> = h.iter().take(12).cloned().collect();
            let more = if h.len() > 12 { format!(" (+{} more)", h.len() - 12) } else { String::new() };
            format!("; pods holding its devices: {}{more}", shown.join(", "))
        }
    }
}

fn held_devices(pods: &[Pod]) -> Held<'_> {
    let mut held = Held::new();
    for p in pods {
        for c in &p.containers {
            for (r, ids) in &c.devices {
                for id in ids {
                    held.insert((r.as_str(), id.as_str()), (p, c.name.as_str()));
                }
            }
        }
    }
    held
}

fn identities<'a>(held: &Held<'a>, entries: &'a [PodDeviceEntry]) -> BTreeMap<&'a str, &'a Pod> {
    let mut identity = BTreeMap::new();
    for e in entries {
        for id in e.device_ids.values().flatten() {
            if let Some((p, c)) = held.get(&(e.resource_name.as_str(), id.as_str())) {
                if *c == e.container_name {
                    identity.insert(e.pod_uid.as_str(), *p);
                }
            }
        }
    }
    identity
}

fn kubelet_state(f: &Facts) -> Kubelet {
    match &f.kubelet {
        Connect::Answered => Kubelet::Up,
        Connect::PermissionDenied | Connect::Failed(_) => Kubelet::Unknown,
        _ if f.plugin_dir_error.is_some() => Kubelet::Unknown,
        _ => Kubelet::Down,
    }
}

/// One finding kind: the facts (through the view) in, its findings out.
type Kind = fn(&View) -> Vec<Finding>;

/// Every finding kind, in the order they are derived (the report sorts them).
const KINDS: &[(&str, Kind)] = &[
    ("plugin-dir", plugin_dir),
    ("kubelet-down", kubelet_down),
    ("directory entries", dir_entries),
    ("plugin-hangs/plugin-error", plugin_answers),
    ("rulebook rules", plugin_rules),
    ("unhealthy-devices", unhealthy_devices),
    ("plugin-mapping-ambiguous", mapping_ambiguous),
    ("plugin-kubelet-mismatch", plugin_kubelet_mismatch),
    ("resource-unavailable/plugin-died/not-re-registered, stale-socket", resources_unavailable),
    ("unregistered-plugin", unregistered_plugins),
    ("checkpoint-corrupt", checkpoint_corrupt),
    ("stale-allocation/pod-not-running", stale_allocations),
    ("pod-resources", pod_resources),
    ("allocated-device-gone/unhealthy", allocated_devices),
    ("cdi-*", cdi_names),
    ("watcher-socket", watcher_sockets),
    ("permission-denied", permission_denied),
    ("dra-*", dra_plugins),
];

/// Derive every finding from the facts: each kind in turn.
pub fn derive(f: &Facts) -> Report {
    let v = View::new(f);
    let mut out: Vec<Finding> = KINDS.iter().flat_map(|(_, kind)| kind(&v)).collect();
    out.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then_with(|| a.check.cmp(b.check)).then_with(|| a.subject.cmp(&b.subject))
    });
    let result = match out.iter().map(|x| x.severity).max() {
        Some(Severity::Error) => "error",
        Some(Severity::Unknown) => "unknown",
        Some(Severity::Warning) => "warning",
        _ => "ok",
    };
    Report { result: result.into(), checked: checked(&v), findings: out }
}

/// What was checked, for the report's summary.
fn checked(v: &View) -> Checked {
    let f = v.f;
    Checked {
        streams: f.streams,
        kubelet_socket_live: v.kubelet == Kubelet::Up,
        plugin_sockets: f.plugins.len(),
        checkpoint_allocations: v.entries.len(),
        pod_resources: f.pods.ok().is_some(),
        watcher_sockets: f.watchers.len(),
        cdi_names: cdi_users(v).len(),
        dra_plugins: f.dra.plugins.len(),
        plugins: v
            .m
            .served
            .iter()
            .map(|(r, (i, how))| Served {
                resource: r.clone(),
                socket: show(&f.plugins[*i].socket),
                how: how.to_string(),
            })
            .collect(),
    }
}

/// The device-plugin directory cannot be read (not for permission: see [`permission_denied`]).
fn plugin_dir(v: &View) -> Vec<Finding> {
    let Some((why, false)) = &v.f.plugin_dir_error else { return Vec::new() };
    // Nothing here to judge: a wrong path or no kubelet, not a broken plugin.
    vec![finding(
        Severity::Unknown,
        "plugin-dir",
        show(&v.f.plugin_dir),
        "the device-plugin directory cannot be read",
        why.clone(),
        "check the kubelet's root directory: pass --kubelet-root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet), or --root /host inside `kubectl debug node/…`",
    )]
}

/// kubelet.sock missing, refused, hung or not a socket.
fn kubelet_down(v: &View) -> Vec<Finding> {
    let f = v.f;
    if v.kubelet != Kubelet::Down {
        return Vec::new();
    }
    let stale: Vec<String> =
        f.entries.iter().filter(|e| e.connect == Some(Connect::Refused)).map(|e| e.name.clone()).collect();
    let (message, evidence) = match &f.kubelet {
        Connect::Missing => (
            "kubelet.sock is missing: no kubelet serves device-plugin registration (it is down, or runs with another --root-dir)",
            "no kubelet.sock in the device-plugin directory".to_string(),
        ),
        Connect::Refused => (
            "kubelet.sock exists but nothing listens: the kubelet is down or restarting",
            "connect: connection refused".to_string(),
        ),
        Connect::Timeout => (
            "kubelet.sock accepts no connection: the kubelet is hung or overloaded",
            format!("connect timed out after {}", crate::core::time::format_duration(f.timeout)),
        ),
        other => ("kubelet.sock is not a socket", format!("{other:?}")),
    };
    let evidence = if stale.is_empty() {
        evidence
    } else {
        format!(
            "{evidence}; plugin sockets with nothing listening, which the kubelet removes when it starts: {}",
            stale.join(", ")
        )
    };
    vec![finding(
        Severity::Error,
        "kubelet-down",
        show(&f.plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME)),
        message,
        evidence,
        "check the kubelet (systemctl status kubelet; journalctl -u kubelet); plugins register again when it is back. If it uses another root directory pass --kubelet-root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet)",
    )]
}

/// What else is in the plugin directory: hung or untestable sockets, files, symlinks.
fn dir_entries(v: &View) -> Vec<Finding> {
    let f = v.f;
    let mut out = Vec::new();
    for e in &f.entries {
        let shown = show(&e.path);
        match (&e.kind, &e.connect) {
            (PathKind::Socket, Some(Connect::Timeout)) => out.push(finding(
                Severity::Error,
                "socket-timeout",
                &shown,
                "connecting to this socket times out: its process is stopped or its listen backlog is full; the kubelet's calls hang too",
                format!("connect timed out after {}", crate::core::time::format_duration(f.timeout)),
                "find the process (ss -xlp | grep the socket name) and restart it",
            )),
            (PathKind::Socket, Some(Connect::Failed(why))) => out.push(finding(
                Severity::Unknown,
                "socket-untested",
                &shown,
                "this socket could not be tested",
                why.clone(),
                "run doctor as root; until then nothing is known about this socket, so leave it in place",
            )),
            (PathKind::File, _) if e.name == crate::core::paths::CHECKPOINT_NAME => {}
            (PathKind::File, _) if e.name.starts_with(crate::core::paths::CHECKPOINT_NAME) => out.push(finding(
                Severity::Info,
                "checkpoint-copy",
                &shown,
                "a copy of the checkpoint (set aside earlier)",
                "",
                "remove it when it is no longer needed",
            )),
            (PathKind::File, _) => out.push(finding(
                Severity::Warning,
                "not-a-socket",
                &shown,
                "a regular file in the device-plugin directory: a plugin's socket path may be taken by it",
                "regular file",
                "remove or move it; nothing but sockets and the kubelet's checkpoint belong here",
            )),
            (PathKind::Symlink, _) => out.push(finding(
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
    out
}

/// Live plugins that hang or answer the API wrongly.
fn plugin_answers(v: &View) -> Vec<Finding> {
    let f = v.f;
    let mut out = Vec::new();
    for p in &f.plugins {
        let shown = show(&p.socket);
        if let Some(t) = p.hung {
            out.push(finding(
                Severity::Error,
                "plugin-hangs",
                &shown,
                "the plugin accepts connections but does not answer; the kubelet's calls to it hang too",
                format!(
                    "no {} within {}",
                    if f.streams { "options and first snapshot" } else { "options" },
                    crate::core::time::format_duration(t)
                ),
                "restart the plugin and check its logs for a deadlock or a blocked health check",
            ));
        } else if let Some(e) = &p.error {
            out.push(finding(
                Severity::Error,
                "plugin-error",
                &shown,
                "the plugin does not answer the device-plugin API correctly",
                e.clone(),
                "check the plugin's logs; `dpctl probe` shows which call fails",
            ));
        }
    }
    out
}

/// The plugins that answered, with the devices of their first snapshot.
fn answered<'a>(v: &View<'a>) -> impl Iterator<Item = (&'a Plugin, &'a [Device])> {
    v.f.plugins
        .iter()
        .filter(|p| p.hung.is_none() && p.error.is_none())
        .filter_map(|p| Some((p, p.devices.as_deref()?)))
}

/// The rulebook over each live plugin's first snapshot (size, IDs, health, topology).
fn plugin_rules(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    for (p, devs) in answered(v) {
        let shown = show(&p.socket);
        let size = p.snapshot_bytes;
        if let Some(x) = deviceplugin::snapshot_size(size, devs.len()) {
            out.push(rule_finding(&x, &shown, format!("{size} bytes for {} devices", devs.len())));
        }
        out.extend(device_rules(devs, &shown));
    }
    out
}

/// Devices a live plugin reports not Healthy.
fn unhealthy_devices(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    for (p, devs) in answered(v) {
        let unhealthy: Vec<&String> = devs.iter().filter(|x| x.health != HEALTHY).map(|x| &x.id).collect();
        if !unhealthy.is_empty() {
            out.push(finding(
                Severity::Warning,
                "unhealthy-devices",
                show(&p.socket),
                format!("{} of {} devices are not Healthy and cannot be allocated", unhealthy.len(), devs.len()),
                ids(unhealthy),
                "check the hardware and the plugin's health checks; the kubelet allocates only Healthy devices",
            ));
        }
    }
    out
}

/// Resources whose plugin cannot be told among several live sockets.
fn mapping_ambiguous(v: &View) -> Vec<Finding> {
    if v.kubelet != Kubelet::Up {
        return Vec::new();
    }
    v.m.ambiguous
        .iter()
        .map(|(r, cands)| {
            let socks: Vec<String> = cands.iter().map(|i| show(&v.f.plugins[*i].socket)).collect();
            finding(
                Severity::Warning,
                "plugin-mapping-ambiguous",
                r.clone(),
                "cannot tell which live plugin serves this resource: the candidates report the same device IDs and neither GetInfo nor socket names decide; plugin-versus-kubelet checks were skipped for it",
                format!("candidates: {}", socks.join(", ")),
                "name each plugin's socket after its resource (e.g. vendor.example_foo.sock), or check each with `dpctl probe`",
            )
        })
        .collect()
}

/// Resources the kubelet knows (registered in the checkpoint or allocatable).
fn known_resources<'a>(v: &View<'a>) -> BTreeSet<&'a String> {
    let mut resources: BTreeSet<&String> = registered(v.f).map(|r| r.keys().collect()).unwrap_or_default();
    if let Some(a) = v.f.allocatable.ok() {
        resources.extend(a.keys());
    }
    resources
}

/// The healthy device IDs of the plugin serving `r`, when its devices were read.
fn plugin_healthy(v: &View, r: &str) -> Option<BTreeSet<String>> {
    let p = v.m.served.get(r).map(|(i, _)| &v.f.plugins[*i])?;
    p.devices.as_ref().map(|d| d.iter().filter(|x| x.health == HEALTHY).map(|x| x.id.clone()).collect())
}

/// The plugin's healthy devices differ from the kubelet's allocatable ones.
fn plugin_kubelet_mismatch(v: &View) -> Vec<Finding> {
    let Some(alloc) = v.f.allocatable.ok().filter(|_| v.kubelet == Kubelet::Up) else { return Vec::new() };
    let mut out = Vec::new();
    for r in known_resources(v) {
        let a = alloc.get(r).cloned().unwrap_or_default();
        let (Some((i, _)), Some(h)) = (v.m.served.get(r), plugin_healthy(v, r)) else { continue };
        if h == a {
            continue;
        }
        let only_p: Vec<&String> = h.difference(&a).collect();
        let only_k: Vec<&String> = a.difference(&h).collect();
        out.push(finding(
            Severity::Warning,
            "plugin-kubelet-mismatch",
            r.clone(),
            format!("the plugin reports {} healthy device(s) but the kubelet has {} allocatable", h.len(), a.len()),
            format!(
                "plugin {}: healthy {}; kubelet allocatable: {}; only in the plugin: {}; only in the kubelet: {}",
                show(&v.f.plugins[*i].socket),
                ids(&h),
                ids(&a),
                ids(only_p),
                ids(only_k)
            ),
            "some plugins (generic-device-plugin, NVIDIA's) tell only one ListAndWatch stream about a change, so an extra client (dpctl probe or watch, doctor itself) can swallow an update the kubelet never gets; restart the plugin to resync the kubelet, and use `doctor --no-streams` on such nodes",
        ));
    }
    out
}

/// Resources registered with the kubelet with nothing to allocate, and why
/// (its plugin reports nothing, died, or never came back); then the stale
/// sockets no dead plugin claimed.
fn resources_unavailable(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut stale_left: Vec<&Path> = v.stale.clone();
    if v.kubelet == Kubelet::Up {
        let reg = registered(v.f);
        for r in known_resources(v) {
            let Some(g) = reg.and_then(|x| x.get(r)) else { continue };
            if let Some(x) = unavailable(v, r, g, &mut stale_left) {
                out.push(x);
            }
        }
    }
    if v.kubelet != Kubelet::Down {
        out.extend(stale_left.into_iter().map(stale_socket));
    }
    out
}

fn stale_socket(s: &Path) -> Finding {
    finding(
        Severity::Warning,
        "stale-socket",
        show(s),
        "a stale socket: nothing listens on it (its plugin exited without removing it)",
        "connect: connection refused",
        "restart the plugin that owned it; since nothing listens (connect was refused) removing it is safe, and the kubelet removes it at its next start",
    )
}

/// Why registered resource `r` (devices `g` in the checkpoint) has nothing to allocate, if it has not.
fn unavailable<'a>(v: &View<'a>, r: &String, g: &[String], stale_left: &mut Vec<&'a Path>) -> Option<Finding> {
    let f = v.f;
    let a = f.allocatable.ok().map(|a| a.get(r).cloned().unwrap_or_default());
    let served = v.m.served.get(r).map(|(i, _)| &f.plugins[*i]);
    let unread_unmapped = f
        .plugins
        .iter()
        .enumerate()
        .filter(|(i, p)| p.devices.is_none() && !v.m.served.values().any(|(j, _)| j == i))
        .count();
    let nothing = match &a {
        Some(a) => a.is_empty(),
        // Without PodResources only the sockets tell; a live plugin whose
        // devices were not read (--no-streams, errors) may be this one.
        None => served.is_none() && !v.m.ambiguous.contains_key(r) && unread_unmapped == 0,
    };
    if !nothing {
        return None;
    }
    let alloc_ev = if a.is_some() { "; allocatable: 0" } else { "" };
    let base = format!("{} device(s) registered in the checkpoint: {}{alloc_ev}", g.len(), ids(g));
    let pods = v.holders_text(r);
    if let Some(p) = served {
        let why = match plugin_healthy(v, r) {
            None => format!("its plugin {} answers (its devices were not read: --no-streams)", show(&p.socket)),
            Some(h) if h.is_empty() => format!("its plugin {} reports no Healthy device", show(&p.socket)),
            Some(h) => format!(
                "the kubelet has none of the {} device(s) its plugin {} reports Healthy (see plugin-kubelet-mismatch)",
                h.len(),
                show(&p.socket)
            ),
        };
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            format!("nothing of this resource can be allocated: {why}"),
            format!("{base}{pods}"),
            "check the plugin's logs and devices; restart the plugin so it sends the kubelet a fresh device list",
        ));
    }
    if let Some(c) = v.m.ambiguous.get(r) {
        let socks: Vec<String> = c.iter().map(|i| show(&f.plugins[*i].socket)).collect();
        let stale: Vec<String> = v.stale.iter().map(|s| show(s)).collect();
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated, and it cannot be told which live socket (if any) is its plugin",
            format!(
                "{base}; candidates reporting the same IDs: {}; stale sockets: {}{pods}",
                socks.join(", "),
                stale.join(", ")
            ),
            "check each plugin with `dpctl probe`; restart the plugin of this resource",
        ));
    }
    if !stale_left.is_empty() {
        return Some(plugin_died(r, &base, &pods, stale_left));
    }
    let empty_unmapped: Vec<String> = f
        .plugins
        .iter()
        .enumerate()
        .filter(|(i, p)| p.devices.as_ref().is_some_and(Vec::is_empty) && !v.m.served.values().any(|(j, _)| j == i))
        .map(|(_, p)| show(&p.socket))
        .collect();
    if !empty_unmapped.is_empty() {
        return Some(finding(
            Severity::Warning,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated; live plugins that report no devices at all may include its plugin (then it found no hardware)",
            format!("{base}; plugins with no devices: {}{pods}", empty_unmapped.join(", ")),
            "check the plugin's logs for why it finds no devices (drivers, device files, its config)",
        ));
    }
    if f.entries.iter().any(|e| e.connect.as_ref().is_some_and(Connect::untested)) {
        return Some(finding(
            Severity::Error,
            "resource-unavailable",
            r.clone(),
            "nothing of this resource can be allocated; its plugin may be behind one of the sockets that could not be tested",
            format!("{base}{pods}"),
            "run doctor as root to tell whether its plugin is alive",
        ));
    }
    let started = f
        .kubelet_started
        .map(|t| format!("; kubelet.sock created {}", crate::core::time::rfc3339(t)))
        .unwrap_or_default();
    Some(finding(
        Severity::Error,
        "not-re-registered",
        r.clone(),
        "no socket in the device-plugin directory serves this resource: the kubelet removes every plugin socket when it starts, and this resource's plugin did not register again after the kubelet restarted (capacity stays 0 until it does)",
        format!("{base}{started}{pods}"),
        "restart the plugin (delete its DaemonSet pod); a plugin must watch for kubelet.sock being re-created and register again",
    ))
}

/// A socket left behind with nothing listening: the plugin of `r` died (it claims that socket).
fn plugin_died(r: &str, base: &str, pods: &str, stale_left: &mut Vec<&Path>) -> Finding {
    let pick =
        stale_left.iter().position(|s| name_matches(s, r)).or(if stale_left.len() == 1 { Some(0) } else { None });
    let (what, ev) = match pick {
        Some(k) => {
            let s = stale_left.remove(k);
            (format!("its socket {} is left with nothing listening", show(s)), String::new())
        }
        None => (
            "one of the sockets left with nothing listening was probably its plugin's".to_string(),
            format!("; stale sockets: {}", stale_left.iter().map(|s| show(s)).collect::<Vec<_>>().join(", ")),
        ),
    };
    finding(
        Severity::Error,
        "plugin-died",
        r,
        format!("the plugin serving this resource died: {what}. The kubelet keeps the resource's capacity for a grace period (5 minutes) with every device unhealthy, so nothing can be allocated, then drops it"),
        format!("{base}; connect: connection refused{ev}{pods}"),
        "restart the plugin (delete its DaemonSet pod) and read why it died (kubectl logs --previous); its new instance replaces the stale socket",
    )
}

/// Live plugins no resource maps to.
fn unregistered_plugins(v: &View) -> Vec<Finding> {
    let f = v.f;
    if v.kubelet != Kubelet::Up || !f.streams || f.allocatable.ok().is_none() {
        return Vec::new();
    }
    let in_play: BTreeSet<usize> =
        v.m.served.values().map(|(i, _)| *i).chain(v.m.ambiguous.values().flatten().copied()).collect();
    f.plugins
        .iter()
        .enumerate()
        .filter(|(i, p)| !in_play.contains(i) && p.devices.is_some())
        .map(|(_, p)| {
            finding(
                Severity::Info,
                "unregistered-plugin",
                show(&p.socket),
                "this plugin answers but serves no resource the kubelet knows (it did not register, or its registration failed)",
                format!("{} device(s)", p.devices.as_ref().map_or(0, Vec::len)),
                "if it should serve a resource, check its logs for the Register error (`dpctl register` shows the kubelet's answer)",
            )
        })
        .collect()
}

/// The device manager's checkpoint does not parse.
fn checkpoint_corrupt(v: &View) -> Vec<Finding> {
    let Checkpoint::Bad(why, false) = &v.f.checkpoint else { return Vec::new() };
    vec![finding(
        Severity::Error,
        "checkpoint-corrupt",
        show(&v.f.plugin_dir.join(crate::core::paths::CHECKPOINT_NAME)),
        "the device manager's checkpoint cannot be read",
        why.clone(),
        "move it aside (mv kubelet_internal_checkpoint kubelet_internal_checkpoint.bad) and restart the kubelet; allocations of running pods are re-created",
    )]
}

/// Allocations of pods that are gone (or not running).
fn stale_allocations(v: &View) -> Vec<Finding> {
    let (Some(held), Kubelet::Up) = (&v.held, v.kubelet) else { return Vec::new() };
    let mut out = Vec::new();
    for e in v.entries {
        if v.identity.contains_key(e.pod_uid.as_str()) {
            // A running pod: a container PodResources does not list is an
            // init container, whose devices stay allocated until the pod ends.
            continue;
        }
        let ids_e = e.ids();
        if ids_e.iter().any(|id| held.contains_key(&(e.resource_name.as_str(), id.as_str()))) {
            continue;
        }
        if v.f.pod_dirs.as_ref().is_some_and(|d| d.contains(&e.pod_uid)) {
            out.push(finding(
                Severity::Info,
                "pod-not-running",
                e.resource_name.clone(),
                "devices are allocated to a pod that is still on the node but has no running container holding them (its init containers are running, or it is terminating); they stay allocated until the pod ends",
                format!("pod UID {} container {:?}: {}", e.pod_uid, e.container_name, ids(&ids_e)),
                "nothing to do unless the pod stays like this; then look at it (kubectl get pods -A -o wide | grep the node)",
            ));
            continue;
        }
        out.push(finding(
            Severity::Error,
            "stale-allocation",
            e.resource_name.clone(),
            format!("{} device(s) are allocated in the checkpoint to a pod that is not on the node; they count as in use and cause \"Requested: N, Available: 0\" admission errors", ids_e.len()),
            format!("pod UID {} container {:?}: {} (PodResources lists no pod holding them)", e.pod_uid, e.container_name, ids(&ids_e)),
            "restart the kubelet so it drops allocations of pods it no longer runs; if the pod is stuck terminating, force-delete it",
        ));
    }
    out
}

/// The PodResources API does not answer a live kubelet.
fn pod_resources(v: &View) -> Vec<Finding> {
    let f = v.f;
    if v.kubelet != Kubelet::Up {
        return Vec::new();
    }
    let why = match &f.pods {
        Got::Connect(Connect::PermissionDenied) | Got::Yes(_) => return Vec::new(),
        Got::Connect(c) => format!("{c:?}"),
        Got::Failed(e) => e.clone(),
    };
    vec![finding(
        Severity::Warning,
        "pod-resources",
        show(&f.pod_resources_socket),
        "the PodResources API does not answer, so allocations and allocatable devices cannot be checked",
        why,
        "pass --pod-resources-socket (the kubelet's is <root-dir>/pod-resources/kubelet.sock), or --kubelet-root-dir",
    )]
}

/// Allocated devices their plugin no longer reports, or reports unhealthy.
fn allocated_devices(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in v.entries {
        let Some(p) = v.m.served.get(&e.resource_name).map(|(i, _)| &v.f.plugins[*i]) else { continue };
        let Some(devs) = &p.devices else { continue };
        let who = pod_name(v.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid);
        for id in e.ids() {
            match devs.iter().find(|x| x.id == id) {
                None => out.push(finding(
                    Severity::Warning,
                    "allocated-device-gone",
                    e.resource_name.clone(),
                    format!(
                        "device {} is allocated to a container but its plugin no longer reports it",
                        id.escape_debug()
                    ),
                    format!("{who} container {:?}; plugin {}", e.container_name, show(&p.socket)),
                    "check the hardware; restart the affected pod once the device is back",
                )),
                Some(d) if d.health != HEALTHY => out.push(finding(
                    Severity::Warning,
                    "allocated-device-unhealthy",
                    e.resource_name.clone(),
                    format!(
                        "device {} is allocated to a container but its plugin reports it {}",
                        id.escape_debug(),
                        d.health
                    ),
                    format!("{who} container {:?}; plugin {}", e.container_name, show(&p.socket)),
                    "the workload may be failing; check the device and reschedule the pod",
                )),
                _ => {}
            }
        }
    }
    out
}

/// CDI names in the checkpoint's Allocate answers → who got them.
fn cdi_users(v: &View) -> BTreeMap<String, Vec<String>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in v.entries {
        if let Ok(resp) = e.decode_alloc_resp() {
            let who = pod_name(v.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid);
            for n in cdi::names_in(&resp) {
                names
                    .entry(n)
                    .or_default()
                    .push(format!("{who} container {:?} ({})", e.container_name, e.resource_name));
            }
        }
    }
    names
}

/// CDI spec directories that are unreadable for permission (reported under permission-denied).
fn cdi_denied(v: &View) -> Vec<String> {
    v.f.cdi.unreadable.iter().filter(|(_, _, d)| *d).map(|(p, _, _)| format!("{} (CDI specs)", show(p))).collect()
}

/// CDI names in Allocate answers the runtime cannot resolve; unreadable or invalid specs.
fn cdi_names(v: &View) -> Vec<Finding> {
    let f = v.f;
    let mut out = Vec::new();
    let names = cdi_users(v);
    if !names.is_empty() {
        for (p, why, denied) in &f.cdi.unreadable {
            if !denied {
                out.push(finding(
                    Severity::Warning,
                    "cdi-spec-dir",
                    show(p),
                    "a CDI spec directory cannot be read",
                    why.clone(),
                    "check the path given with --cdi-spec-dir",
                ));
            }
        }
        if cdi_denied(v).is_empty() {
            for (n, users) in &names {
                if let Some(why) = cdi::unresolvable(&f.cdi, n) {
                    out.push(finding(
                        Severity::Error,
                        "cdi-unresolvable",
                        n.clone(),
                        "the container runtime cannot resolve this CDI device: containers that get it fail to start with \"unresolvable CDI devices\"",
                        format!("{why}; allocated to {}", users.join(", ")),
                        "install the CDI spec that defines it (the plugin or the vendor's toolkit usually writes it, e.g. /var/run/cdi/vendor.yaml), or fix the name the plugin returns in Allocate",
                    ));
                }
            }
        }
    }
    for (p, why) in &f.cdi.invalid {
        out.push(finding(
            Severity::Warning,
            "cdi-spec-invalid",
            show(p),
            "a CDI spec file does not parse; the runtime ignores it, so its devices do not resolve",
            why.clone(),
            "fix or regenerate the spec (cdiVersion, kind vendor.example/class, devices[].name)",
        ));
    }
    out
}

/// Plugin-watcher sockets that are stale or do not answer GetInfo.
fn watcher_sockets(v: &View) -> Vec<Finding> {
    let mut out = Vec::new();
    for w in &v.f.watchers {
        let why = match &w.info {
            Got::Yes(_) | Got::Connect(Connect::PermissionDenied) => continue,
            Got::Connect(Connect::Refused) => {
                out.push(finding(
                    Severity::Warning,
                    "stale-socket",
                    show(&w.socket),
                    "a stale plugin-watcher socket: nothing listens on it; the kubelet keeps failing to register it",
                    "connect: connection refused",
                    "restart the plugin that owned it; since nothing listens removing it is safe",
                ));
                continue;
            }
            Got::Connect(c) => format!("{c:?}"),
            Got::Failed(e) => e.clone(),
        };
        out.push(finding(
            Severity::Error,
            "watcher-socket",
            show(&w.socket),
            "a plugin-watcher socket does not answer GetInfo, so the kubelet cannot register its plugin",
            why,
            "restart the plugin that owns it",
        ));
    }
    out
}

/// DRA kubelet plugins and the DRA checkpoint.
fn dra_plugins(v: &View) -> Vec<Finding> {
    super::dra::findings(&v.f.dra, &v.f.cdi)
}

/// Everything that could not be tested for lack of permission, as one finding.
fn permission_denied(v: &View) -> Vec<Finding> {
    let f = v.f;
    let mut untested: Vec<String> = Vec::new();
    if let Some((_, true)) = &f.plugin_dir_error {
        untested.push(format!("{} (directory)", show(&f.plugin_dir)));
    }
    if f.kubelet == Connect::PermissionDenied {
        untested.push(show(&f.plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME)));
    }
    untested.extend(f.entries.iter().filter(|e| e.connect == Some(Connect::PermissionDenied)).map(|e| show(&e.path)));
    if matches!(f.pods, Got::Connect(Connect::PermissionDenied)) {
        untested.push(format!("{} (PodResources)", show(&f.pod_resources_socket)));
    }
    if let Checkpoint::Bad(_, true) = &f.checkpoint {
        untested.push(format!("{} (checkpoint)", show(&f.plugin_dir.join(crate::core::paths::CHECKPOINT_NAME))));
    }
    untested.extend(
        f.watchers
            .iter()
            .filter(|w| matches!(w.info, Got::Connect(Connect::PermissionDenied)))
            .map(|w| show(&w.socket)),
    );
    if !cdi_users(v).is_empty() {
        untested.extend(cdi_denied(v));
    }
    if untested.is_empty() {
        return Vec::new();
    }
    vec![finding(
        Severity::Unknown,
        "permission-denied",
        show(&f.plugin_dir),
        format!("{} path(s) could not be tested (permission denied); nothing is known about what is behind them", untested.len()),
        untested.join(", "),
        "run doctor as root (sudo, or `kubectl debug node/NODE -it --profile=sysadmin --image=… -- dpctl doctor --root /host`); do not remove sockets that could not be tested",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::{CdiDevice, ContainerAllocateResponse};
    use crate::client::checkpoint::Data;
    use crate::doctor::facts::{Entry, Plugin, PodContainer};
    use std::path::PathBuf;

    const DP: &str = "/n/dp/";

    fn node() -> Facts {
        Facts::empty(DP)
    }
    fn sock(f: &mut Facts, name: &str, c: Connect) {
        f.entries.push(Entry {
            path: PathBuf::from(DP).join(name),
            name: name.into(),
            kind: PathKind::Socket,
            connect: Some(c),
            mtime: None,
        });
    }
    fn plugin(f: &mut Facts, name: &str, devs: &[(&str, &str)]) {
        sock(f, name, Connect::Answered);
        f.plugins.push(Plugin::with_devices(PathBuf::from(DP).join(name), devs));
    }
    fn entry(uid: &str, c: &str, r: &str, ids: &[&str]) -> PodDeviceEntry {
        PodDeviceEntry {
            pod_uid: uid.into(),
            container_name: c.into(),
            resource_name: r.into(),
            device_ids: [("0".to_string(), ids.iter().map(|s| s.to_string()).collect())].into_iter().collect(),
            alloc_resp: String::new(),
        }
    }
    fn checkpoint(f: &mut Facts, entries: Vec<PodDeviceEntry>, reg: &[(&str, &[&str])]) {
        f.checkpoint = Checkpoint::Read(Data {
            pod_device_entries: entries,
            registered_devices: reg
                .iter()
                .map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect()))
                .collect(),
        });
    }
    fn alloc(f: &mut Facts, a: &[(&str, &[&str])]) {
        f.allocatable =
            Got::Yes(a.iter().map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect())).collect());
    }
    type Devices<'a> = &'a [(&'a str, &'a [&'a str])];
    fn pod(f: &mut Facts, ns: &str, name: &str, containers: &[(&str, Devices)]) {
        let Got::Yes(pods) = &mut f.pods else { panic!("pods not answered") };
        pods.push(Pod {
            namespace: ns.into(),
            name: name.into(),
            containers: containers
                .iter()
                .map(|(c, d)| PodContainer {
                    name: c.to_string(),
                    devices: d
                        .iter()
                        .map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect()))
                        .collect(),
                })
                .collect(),
        });
    }
    fn checks(r: &Report) -> Vec<(&'static str, String)> {
        r.findings.iter().map(|x| (x.check, x.subject.clone())).collect()
    }
    fn one<'a>(r: &'a Report, check: &str) -> &'a Finding {
        let v: Vec<&Finding> = r.findings.iter().filter(|x| x.check == check).collect();
        assert_eq!(v.len(), 1, "one {check} finding expected: {:#?}", r.findings);
        v[0]
    }
    const H: &str = "Healthy";

    #[test]
    fn a_running_pods_init_container_devices_are_normal() {
        let mut f = node();
        plugin(&mut f, "a.sock", &[("a-0", H), ("a-1", H)]);
        plugin(&mut f, "b.sock", &[("b-0", H)]);
        checkpoint(
            &mut f,
            vec![entry("u1", "setup", "example.com/a", &["a-0"]), entry("u1", "main", "example.com/b", &["b-0"])],
            &[("example.com/a", &["a-0", "a-1"]), ("example.com/b", &["b-0"])],
        );
        alloc(&mut f, &[("example.com/a", &["a-0", "a-1"]), ("example.com/b", &["b-0"])]);
        pod(&mut f, "ml", "trainer", &[("main", &[("example.com/b", &["b-0"])])]);
        let r = derive(&f);
        assert_eq!(r.result, "ok", "{:#?}", r.findings);
        assert!(r.findings.is_empty(), "{:#?}", r.findings);
        assert_eq!(r.checked.plugins.len(), 2);
    }

    #[test]
    fn allocations_of_pods_not_on_the_node_are_stale_and_name_the_pod_uid() {
        let mut f = node();
        plugin(&mut f, "a.sock", &[("a-0", H), ("a-1", H)]);
        checkpoint(
            &mut f,
            vec![
                entry("gone", "main", "example.com/a", &["a-1"]),
                entry("initonly", "setup", "example.com/a", &["a-0"]),
            ],
            &[("example.com/a", &["a-0", "a-1"])],
        );
        alloc(&mut f, &[("example.com/a", &["a-0", "a-1"])]);
        // The kubelet still has a directory for the pod whose init container runs.
        f.pod_dirs = Some(["initonly".to_string()].into_iter().collect());
        let r = derive(&f);
        let s = one(&r, "stale-allocation");
        assert!(s.evidence.contains("pod UID gone") && s.evidence.contains("a-1"), "{s:?}");
        assert_eq!(one(&r, "pod-not-running").severity, Severity::Info);
        assert_eq!(r.result, "error");
    }

    #[test]
    fn identical_device_ids_across_resources_do_not_hide_a_dead_plugin() {
        // smarter-device-manager: "\x00".. for every resource.
        for (live, dead) in [("smarter-ttyUSB0.sock", "smarter-ttyUSB1.sock"), ("p1.sock", "p2.sock")] {
            let mut f = node();
            plugin(&mut f, live, &[("\u{0}", H)]);
            sock(&mut f, dead, Connect::Refused);
            checkpoint(
                &mut f,
                vec![entry("u1", "main", "smarter-devices/ttyUSB1", &["\u{0}"])],
                &[("smarter-devices/ttyUSB0", &["\u{0}"]), ("smarter-devices/ttyUSB1", &["\u{0}"])],
            );
            alloc(&mut f, &[("smarter-devices/ttyUSB0", &["\u{0}"])]);
            pod(&mut f, "default", "serial", &[("main", &[("smarter-devices/ttyUSB1", &["\u{0}"])])]);
            let r = derive(&f);
            let d = one(&r, "plugin-died");
            assert_eq!(d.subject, "smarter-devices/ttyUSB1");
            assert!(d.message.contains(dead), "{d:?}");
            assert_eq!(r.checked.plugins.len(), 1);
            assert_eq!(r.checked.plugins[0].resource, "smarter-devices/ttyUSB0");
            assert!(!checks(&r).iter().any(|(c, _)| *c == "stale-socket"), "the stale socket is explained once");
            assert_eq!(r.result, "error");
        }
    }

    #[test]
    fn a_killed_plugin_is_not_a_kubelet_restart() {
        let mut f = node();
        sock(&mut f, "foo.sock", Connect::Refused);
        checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0", "foo-1"])]);
        alloc(&mut f, &[]);
        let r = derive(&f);
        let d = one(&r, "plugin-died");
        assert!(d.message.contains("grace period") && !d.message.contains("re-register"), "{d:?}");
        assert!(d.evidence.contains("allocatable: 0"));
        assert!(!checks(&r).iter().any(|(c, _)| *c == "not-re-registered"));
    }

    #[test]
    fn a_plugin_that_did_not_re_register_after_a_kubelet_restart() {
        let mut f = node();
        plugin(&mut f, "bar.sock", &[("bar-0", H)]);
        checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"]), ("example.com/bar", &["bar-0"])]);
        alloc(&mut f, &[("example.com/bar", &["bar-0"])]);
        let r = derive(&f);
        let d = one(&r, "not-re-registered");
        assert_eq!(d.subject, "example.com/foo");
        assert!(d.message.contains("did not register again after the kubelet restarted"));
        // Without PodResources the same follows from the sockets alone.
        f.allocatable = Got::Failed("Unimplemented".into());
        assert_eq!(one(&derive(&f), "not-re-registered").subject, "example.com/foo");
        // … unless a live plugin's devices were not read (--no-streams): it may be foo's.
        f.streams = false;
        f.plugins[0].devices = None;
        f.plugins[0].socket = format!("{DP}p.sock").into();
        let r = derive(&f);
        assert!(!checks(&r).iter().any(|(c, _)| *c == "not-re-registered"), "{:#?}", r.findings);
        // A socket named after its resource still maps without devices.
        f.plugins[0].socket = format!("{DP}bar.sock").into();
        assert_eq!(one(&derive(&f), "not-re-registered").subject, "example.com/foo");
    }

    #[test]
    fn a_live_plugin_without_devices_is_not_called_unregistered() {
        let mut f = node();
        plugin(&mut f, "nvidia-x.sock", &[]);
        checkpoint(&mut f, vec![], &[("nvidia.com/gpu", &[])]);
        alloc(&mut f, &[]);
        let r = derive(&f);
        assert_eq!(r.result, "warning", "{:#?}", r.findings);
        assert!(one(&r, "resource-unavailable").evidence.contains("nvidia-x.sock"));
    }

    #[test]
    fn a_missing_kubelet_socket_is_reported_once() {
        for k in [Connect::Missing, Connect::Refused] {
            let mut f = node();
            f.kubelet = k;
            sock(&mut f, "foo.sock", Connect::Refused);
            checkpoint(
                &mut f,
                vec![entry("u", "main", "example.com/foo", &["foo-0"])],
                &[("example.com/foo", &["foo-0"])],
            );
            f.pods = Got::Connect(Connect::Missing);
            f.allocatable = Got::Connect(Connect::Missing);
            let r = derive(&f);
            assert_eq!(checks(&r), [("kubelet-down", format!("{DP}kubelet.sock"))], "{:#?}", r.findings);
            assert!(r.findings[0].evidence.contains("foo.sock"));
        }
    }

    #[test]
    fn permission_denied_is_unknown_and_never_advises_removal() {
        let mut f = node();
        f.kubelet = Connect::PermissionDenied;
        sock(&mut f, "live.sock", Connect::PermissionDenied);
        sock(&mut f, "other.sock", Connect::PermissionDenied);
        checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"])]);
        f.pods = Got::Connect(Connect::PermissionDenied);
        f.allocatable = Got::Connect(Connect::PermissionDenied);
        let r = derive(&f);
        assert_eq!(r.result, "unknown", "{:#?}", r.findings);
        let p = one(&r, "permission-denied");
        assert!(p.evidence.contains("live.sock") && p.evidence.contains("kubelet.sock"), "{p:?}");
        assert!(p.fix.contains("run doctor as root") && p.fix.contains("do not remove"));
        for x in &r.findings {
            assert!(!x.fix.contains("removing it is safe") && x.check != "stale-socket", "{x:?}");
        }
    }

    #[test]
    fn a_stale_socket_alone_is_a_warning_with_safe_removal() {
        let mut f = node();
        sock(&mut f, "dead.sock", Connect::Refused);
        let r = derive(&f);
        let s = one(&r, "stale-socket");
        assert_eq!(s.severity, Severity::Warning);
        assert!(s.fix.contains("connect was refused"));
    }

    #[test]
    fn plugin_and_kubelet_disagreeing_is_a_warning_listing_both_sides() {
        let mut f = node();
        plugin(&mut f, "gdp.sock", &[("x1", H), ("x2", H), ("x3", H)]);
        checkpoint(&mut f, vec![], &[("squat.ai/serial", &["x1", "x2"])]);
        alloc(&mut f, &[("squat.ai/serial", &["x1", "x2"])]);
        let r = derive(&f);
        let m = one(&r, "plugin-kubelet-mismatch");
        assert_eq!(m.severity, Severity::Warning);
        assert!(m.message.contains("3 healthy") && m.message.contains("2 allocatable"), "{m:?}");
        assert!(m.evidence.contains("only in the plugin: x3") && m.fix.contains("only one ListAndWatch stream"));
        assert_eq!(r.result, "warning");
        // An unhealthy update the kubelet missed: its IDs equal the checkpoint's.
        let mut f = node();
        plugin(&mut f, "p.sock", &[("a", H), ("b", "Unhealthy")]);
        checkpoint(&mut f, vec![], &[("example.com/r", &["a", "b"])]);
        alloc(&mut f, &[("example.com/r", &["a", "b"])]);
        let m = derive(&f);
        assert!(one(&m, "plugin-kubelet-mismatch").evidence.contains("only in the kubelet: b"));
        // With --no-streams nothing is compared.
        f.streams = false;
        f.plugins[0].devices = None;
        assert!(!checks(&derive(&f)).iter().any(|(c, _)| *c == "plugin-kubelet-mismatch"));
    }

    #[test]
    fn undecidable_mappings_warn_instead_of_passing() {
        let mut f = node();
        plugin(&mut f, "x.sock", &[("0", H)]);
        plugin(&mut f, "y.sock", &[("0", H)]);
        checkpoint(&mut f, vec![], &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
        alloc(&mut f, &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
        let r = derive(&f);
        assert_eq!(r.result, "warning", "{:#?}", r.findings);
        assert_eq!(r.findings.iter().filter(|x| x.check == "plugin-mapping-ambiguous").count(), 2);
        // Socket names decide.
        let mut f = node();
        plugin(&mut f, "smarter-ttyUSB1.sock", &[("0", H)]);
        plugin(&mut f, "smarter-ttyUSB0.sock", &[("0", H)]);
        checkpoint(&mut f, vec![], &[("smarter-devices/ttyUSB0", &["0"]), ("smarter-devices/ttyUSB1", &["0"])]);
        alloc(&mut f, &[("smarter-devices/ttyUSB0", &["0"]), ("smarter-devices/ttyUSB1", &["0"])]);
        let r = derive(&f);
        assert_eq!(r.result, "ok", "{:#?}", r.findings);
        assert_eq!(r.checked.plugins[0].socket, format!("{DP}smarter-ttyUSB0.sock"));
        assert_eq!(r.checked.plugins[0].how, "healthy IDs equal the kubelet's allocatable IDs");
        // So does the plugin watcher's GetInfo.
        let mut f = node();
        plugin(&mut f, "x.sock", &[("0", H)]);
        plugin(&mut f, "y.sock", &[("0", H)]);
        f.watchers.push(crate::doctor::facts::Watcher {
            socket: "/n/reg/y.sock".into(),
            info: Got::Yes(("DevicePlugin".into(), "example.com/a".into(), format!("{DP}y.sock"))),
        });
        checkpoint(&mut f, vec![], &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
        alloc(&mut f, &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
        let r = derive(&f);
        assert_eq!(r.result, "ok", "{:#?}", r.findings);
        let a = r.checked.plugins.iter().find(|s| s.resource == "example.com/a").unwrap();
        assert!(a.socket.ends_with("y.sock") && a.how.contains("GetInfo"), "{a:?}");
    }

    #[test]
    fn unresolvable_cdi_names_are_errors_naming_the_pod() {
        let mut f = node();
        plugin(&mut f, "foo.sock", &[("foo-0", H)]);
        let mut e = entry("u1", "main", "vendor.example/foo", &["foo-0"]);
        e.alloc_resp = PodDeviceEntry::encode_alloc_resp(&ContainerAllocateResponse {
            cdi_devices: vec![CdiDevice { name: "vendor.example/foo=foo-9".into() }],
            annotations: [("cdi.k8s.io/foo".to_string(), "vendor.example/foo=foo-0".to_string())].into_iter().collect(),
            ..Default::default()
        });
        checkpoint(&mut f, vec![e], &[("vendor.example/foo", &["foo-0"])]);
        alloc(&mut f, &[("vendor.example/foo", &["foo-0"])]);
        pod(&mut f, "ml", "trainer", &[("main", &[("vendor.example/foo", &["foo-0"])])]);
        f.cdi.dirs = vec!["/etc/cdi".into()];
        f.cdi.specs = 1;
        f.cdi.devices.insert("vendor.example/foo=foo-0".into());
        f.cdi.invalid.push(("/etc/cdi/bad.yaml".into(), "no cdiVersion".into()));
        let r = derive(&f);
        let c = one(&r, "cdi-unresolvable");
        assert_eq!(c.subject, "vendor.example/foo=foo-9");
        assert!(c.evidence.contains("ml/trainer (UID u1)") && c.message.contains("unresolvable CDI devices"), "{c:?}");
        assert_eq!(one(&r, "cdi-spec-invalid").subject, "/etc/cdi/bad.yaml");
        assert_eq!(r.checked.cdi_names, 2);
    }

    #[test]
    fn allocated_unhealthy_devices_name_the_pod_and_uid() {
        let mut f = node();
        plugin(&mut f, "foo.sock", &[("foo-0", H), ("foo-1", "Unhealthy")]);
        checkpoint(
            &mut f,
            vec![entry("u1", "main", "example.com/foo", &["foo-1"])],
            &[("example.com/foo", &["foo-0", "foo-1"])],
        );
        alloc(&mut f, &[("example.com/foo", &["foo-0"])]);
        pod(&mut f, "ml", "trainer", &[("main", &[("example.com/foo", &["foo-1"])])]);
        let r = derive(&f);
        assert!(one(&r, "allocated-device-unhealthy").evidence.starts_with("ml/trainer (UID u1) container \"main\""));
    }

    #[test]
    fn many_plugins_map_one_to_one() {
        let mut f = node();
        let mut reg: Vec<(String, Vec<String>)> = Vec::new();
        for r in 0..150 {
            let ids: Vec<String> = (0..16).map(|i| format!("r{r}-d{i}")).collect();
            let devs: Vec<(&str, &str)> = ids.iter().map(|i| (i.as_str(), H)).collect();
            plugin(&mut f, &format!("p{r:03}.sock"), &devs);
            reg.push((format!("example.com/res{r}"), ids));
        }
        let data = Data { pod_device_entries: vec![], registered_devices: reg.iter().cloned().collect() };
        f.allocatable = Got::Yes(reg.iter().map(|(r, i)| (r.clone(), i.iter().cloned().collect())).collect());
        f.checkpoint = Checkpoint::Read(data);
        let r = derive(&f);
        assert_eq!(r.result, "ok", "{:#?}", &r.findings[..r.findings.len().min(3)]);
        assert_eq!(r.checked.plugins.len(), 150);
        assert!(r.checked.plugins.iter().all(|s| {
            let n = s.resource.trim_start_matches("example.com/res");
            s.socket.ends_with(&format!("p{:03}.sock", n.parse::<usize>().unwrap()))
        }));
    }

    #[test]
    fn socket_names_match_resources() {
        assert!(name_matches(Path::new("/x/nvidia-gpu.sock"), "nvidia.com/gpu"));
        assert!(name_matches(Path::new("/x/vendor.example_foo.sock"), "vendor.example/foo"));
        assert!(!name_matches(Path::new("/x/dpctl-123.sock"), "vendor.example/foo"));
        assert!(endpoint_is(
            Path::new("/host/var/lib/kubelet/device-plugins/a.sock"),
            "/var/lib/kubelet/device-plugins/a.sock"
        ));
        assert!(!endpoint_is(
            Path::new("/host/var/lib/kubelet/device-plugins/a.sock"),
            "/var/lib/kubelet/device-plugins/b.sock"
        ));
    }

    #[test]
    fn a_dead_or_missing_plugins_finding_names_the_pods_holding_its_devices() {
        // Died: PodResources names the pods.
        let mut f = node();
        sock(&mut f, "foo.sock", Connect::Refused);
        let e =
            vec![entry("u1", "main", "example.com/foo", &["foo-0"]), entry("u2", "c", "example.com/foo", &["foo-1"])];
        checkpoint(&mut f, e, &[("example.com/foo", &["foo-0", "foo-1"])]);
        alloc(&mut f, &[]);
        f.pods = Got::Yes(Vec::new());
        pod(&mut f, "ml", "trainer", &[("main", &[("example.com/foo", &["foo-0"])])]);
        pod(&mut f, "ml", "eval", &[("c", &[("example.com/foo", &["foo-1"])])]);
        let d = derive(&f);
        let d = one(&d, "plugin-died");
        assert!(d.evidence.ends_with("; pods holding its devices: ml/eval, ml/trainer"), "{d:?}");
        // Missing (not re-registered), PodResources down: the checkpoint's pod UIDs.
        let mut f = node();
        checkpoint(
            &mut f,
            vec![entry("u1", "main", "example.com/foo", &["foo-0"])],
            &[("example.com/foo", &["foo-0"])],
        );
        f.pods = Got::Connect(Connect::Missing);
        let r = derive(&f);
        let d = one(&r, "not-re-registered");
        assert!(d.evidence.ends_with("; pods holding its devices: pod UID u1"), "{d:?}");
        // A resource nobody holds says nothing about pods.
        let mut f = node();
        checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"])]);
        alloc(&mut f, &[]);
        assert!(!one(&derive(&f), "not-re-registered").evidence.contains("pods holding"));
    }

    /// Each finding kind on its own: facts that trigger it, and only its checks come out.
    #[test]
    fn each_kind_is_a_function_of_the_facts() {
        type Setup = fn(&mut Facts);
        let cases: &[(Kind, Setup, &[&str])] = &[
            (plugin_dir, |f| f.plugin_dir_error = Some(("no such directory".into(), false)), &["plugin-dir"]),
            (kubelet_down, |f| f.kubelet = Connect::Missing, &["kubelet-down"]),
            (dir_entries, |f| sock(f, "slow.sock", Connect::Timeout), &["socket-timeout"]),
            (
                plugin_answers,
                |f| {
                    plugin(f, "a.sock", &[]);
                    f.plugins[0].error = Some("Unimplemented".into());
                },
                &["plugin-error"],
            ),
            (plugin_rules, |f| plugin(f, "a.sock", &[("a", H), ("a", H)]), &["device-id-unique"]),
            (unhealthy_devices, |f| plugin(f, "a.sock", &[("a", "Unhealthy")]), &["unhealthy-devices"]),
            (
                plugin_kubelet_mismatch,
                |f| {
                    plugin(f, "foo.sock", &[("foo-0", H)]);
                    checkpoint(f, vec![], &[("example.com/foo", &["foo-0", "foo-1"])]);
                    alloc(f, &[("example.com/foo", &["foo-1"])]);
                },
                &["plugin-kubelet-mismatch"],
            ),
            (
                resources_unavailable,
                |f| {
                    sock(f, "foo.sock", Connect::Refused);
                    checkpoint(f, vec![], &[("example.com/foo", &["foo-0"])]);
                    alloc(f, &[]);
                },
                &["plugin-died"],
            ),
            (resources_unavailable, |f| sock(f, "dead.sock", Connect::Refused), &["stale-socket"]),
            (
                unregistered_plugins,
                |f| {
                    plugin(f, "x.sock", &[("x-0", H)]);
                    alloc(f, &[]);
                },
                &["unregistered-plugin"],
            ),
            (
                checkpoint_corrupt,
                |f| f.checkpoint = Checkpoint::Bad("truncated".into(), false),
                &["checkpoint-corrupt"],
            ),
            (
                stale_allocations,
                |f| {
                    checkpoint(f, vec![entry("u9", "main", "example.com/foo", &["foo-0"])], &[]);
                    f.pods = Got::Yes(Vec::new());
                },
                &["stale-allocation"],
            ),
            (pod_resources, |f| f.pods = Got::Failed("Unimplemented".into()), &["pod-resources"]),
            (
                allocated_devices,
                |f| {
                    plugin(f, "foo.sock", &[("foo-0", "Unhealthy")]);
                    checkpoint(
                        f,
                        vec![entry("u1", "main", "example.com/foo", &["foo-0"])],
                        &[("example.com/foo", &["foo-0"])],
                    );
                    alloc(f, &[("example.com/foo", &[])]);
                },
                &["allocated-device-unhealthy"],
            ),
            (cdi_names, |f| f.cdi.invalid.push(("/etc/cdi/x.yaml".into(), "bad".into())), &["cdi-spec-invalid"]),
            (
                watcher_sockets,
                |f| {
                    f.watchers.push(crate::doctor::facts::Watcher {
                        socket: "/r/x-reg.sock".into(),
                        info: Got::Failed("GetInfo: Unimplemented".into()),
                    })
                },
                &["watcher-socket"],
            ),
            (permission_denied, |f| sock(f, "p.sock", Connect::PermissionDenied), &["permission-denied"]),
        ];
        for (kind, setup, want) in cases {
            let mut f = node();
            f.kubelet = Connect::Answered;
            setup(&mut f);
            let got: Vec<&str> = kind(&View::new(&f)).iter().map(|x| x.check).collect();
            assert_eq!(&got, want, "{want:?}");
            // A node with nothing wrong gives no finding of any kind.
            let quiet = node();
            assert!(kind(&View::new(&quiet)).is_empty(), "{want:?} on a quiet node");
        }
        assert_eq!(KINDS.len(), 18);
    }
}
