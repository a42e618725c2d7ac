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

mod resources;
use resources::{plugin_kubelet_mismatch, resources_unavailable};

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
        .filter(|(t, _, _)| t == crate::protocol::registration::PLUGIN_TYPE)
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

fn pod_name(p: Option<&Pod>, uid: &str, names: Option<&BTreeMap<String, String>>) -> String {
    match (p, names.and_then(|n| n.get(uid))) {
        (Some(p), _) => format!("{}/{} (UID {uid})", p.namespace, p.name),
        (None, Some(n)) => format!("{n} (UID {uid})"),
        (None, None) => format!("pod UID {uid}"),
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
            None => out.extend(self.entries.iter().filter(|e| e.resource_name == resource).map(|e| {
                pod_name(self.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid, self.f.pod_names.as_ref())
            })),
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
        cdi_spec_dirs: f.cdi.searched.clone(),
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
            // A checkpoint being written (aside, then renamed over it): there for an instant.
            (PathKind::File, _) if e.name.starts_with(&format!(".{}.tmp-", crate::core::paths::CHECKPOINT_NAME)) => {}
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
        let who = pod_name(v.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid, v.f.pod_names.as_ref());
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
            let who = pod_name(v.identity.get(e.pod_uid.as_str()).copied(), &e.pod_uid, v.f.pod_names.as_ref());
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
    // A dead DRA driver's registration socket is in its `dra-driver-died`.
    let dead = super::dra::dead_drivers(&v.f.dra, &v.f.watchers);
    let folded = |w: &Path| dead.iter().any(|d| d.sockets.contains(&w.display().to_string()));
    for w in v.f.watchers.iter().filter(|w| !folded(&w.socket)) {
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
    let claim_pods = v.f.pods.ok().map(|pods| {
        let mut m = super::dra::ClaimPods::new();
        for p in pods {
            let claims: BTreeSet<&String> = p.containers.iter().flat_map(|c| &c.claims).collect();
            for c in claims {
                m.entry(c.clone()).or_default().push(format!("{}/{}", p.namespace, p.name));
            }
        }
        m
    });
    // Claims PodResources does not name a pod for: the pods API names the
    // checkpoint's pod UIDs.
    let claim_pods = match (&v.f.dra.checkpoint, &v.f.pod_names) {
        (super::dra::DraCheckpoint::Read(claims), Some(names)) => {
            let mut m = claim_pods.unwrap_or_default();
            for c in claims {
                let named: Vec<String> =
                    c.pods.iter().filter_map(|u| names.get(u).map(|n| format!("{n} (UID {u})"))).collect();
                if !named.is_empty() && m.get(&c.claim).is_none_or(Vec::is_empty) {
                    m.insert(c.claim.clone(), named);
                }
            }
            Some(m)
        }
        _ => claim_pods,
    };
    super::dra::findings(&v.f.dra, &v.f.cdi, &v.f.watchers, claim_pods.as_ref())
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
mod tests;
