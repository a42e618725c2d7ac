//! Doctor on DRA nodes: the DRA kubelet plugins in `plugins_registry/`
//! (each one's GetInfo, its endpoint, its health service) and the kubelet's
//! DRA checkpoint (`<root-dir>/dra_manager_state`). [`gather`] does the I/O;
//! each kind of finding is one pure function on the facts, judged with the
//! rules of [`crate::protocol::dra`].

use super::answers::{Got, Watcher};
use super::cdi::{unresolvable, Registry};
use super::{Finding, Severity};
use crate::api::pluginregistration::PluginInfo;
use crate::client::dra::DraConn;
use crate::client::dra_checkpoint;
use crate::core::transport::{try_connect, Connect};
use crate::protocol::dra as rules;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One DRA plugin found in plugins_registry.
#[derive(Debug, Clone)]
pub struct DraPlugin {
    /// Its registration socket.
    pub socket: PathBuf,
    /// Its GetInfo answer.
    pub info: PluginInfo,
    /// What connecting to its endpoint found (None: the endpoint is not an absolute path).
    pub endpoint: Option<Connect>,
    /// The health service it advertises and what opening it gave: the
    /// first snapshot's size, or why there was none.
    pub health: Option<(String, Result<usize, NoSnapshot>)>,
}

/// Why a DRA plugin's health service gave no first snapshot.
#[derive(Debug, Clone)]
pub enum NoSnapshot {
    /// Its endpoint does not answer.
    Silent,
    /// None within this time.
    Timeout(Duration),
    /// The call failed.
    Failed(std::sync::Arc<crate::core::Error>),
    /// The stream ended first.
    Ended,
}

impl std::fmt::Display for NoSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoSnapshot::Silent => f.write_str("the endpoint does not answer"),
            NoSnapshot::Timeout(t) => write!(f, "no snapshot within {}", crate::core::time::format_duration(*t)),
            NoSnapshot::Failed(e) => write!(f, "{e}"),
            NoSnapshot::Ended => f.write_str("the stream ended before a snapshot"),
        }
    }
}

impl std::error::Error for NoSnapshot {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NoSnapshot::Failed(e) => Some(&**e),
            _ => None,
        }
    }
}

/// One claim in the kubelet's DRA checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointClaim {
    /// namespace/name.
    pub claim: String,
    /// Its UID.
    pub uid: String,
    /// The driver that prepared devices for it.
    pub driver: String,
    /// The CDI device IDs the driver returned.
    pub cdi_ids: Vec<String>,
    /// The UIDs of the pods that reference it (`PodUIDs`).
    pub pods: Vec<String>,
}

/// The DRA checkpoint.
#[derive(Debug, Clone, Default)]
pub enum DraCheckpoint {
    /// No checkpoint (no DRA on this node, or the kubelet never prepared a claim).
    #[default]
    Missing,
    /// Not readable or not understood: why, and whether permission was denied.
    Bad(String, bool),
    /// Its claims.
    Read(Vec<CheckpointClaim>),
}

/// Everything doctor learns about DRA on the node.
#[derive(Debug, Clone, Default)]
pub struct DraFacts {
    /// The kubelet's root directory as the host names it (endpoints are checked against it).
    pub kubelet_root: PathBuf,
    /// DRA plugins registered through the plugin watcher.
    pub plugins: Vec<DraPlugin>,
    /// DRA service sockets (`dra*.sock` in `<root-dir>/plugins/*/`, host paths) and what connecting found.
    pub service_sockets: Vec<(PathBuf, Connect)>,
    /// The checkpoint file.
    pub checkpoint_path: PathBuf,
    /// Its content.
    pub checkpoint: DraCheckpoint,
    /// Damaged checkpoints set aside (`dra_manager_state.corrupt-*`) beside it.
    pub set_aside: Vec<PathBuf>,
}

/// Parse `dra_manager_state` ([`crate::client::dra_checkpoint`], the format
/// the kubelet engine writes too): one claim per entry and driver.
pub fn parse_checkpoint(text: &str) -> Result<Vec<CheckpointClaim>, dra_checkpoint::DecodeError> {
    let mut out = Vec::new();
    for e in dra_checkpoint::decode(text.as_bytes())? {
        let claim = format!("{}/{}", e.namespace, e.claim_name);
        for (driver, ids) in e.cdi_ids() {
            out.push(CheckpointClaim {
                claim: claim.clone(),
                uid: e.claim_uid.clone(),
                driver: driver.to_string(),
                cdi_ids: ids.into_iter().map(String::from).collect(),
                pods: e.pod_uids.keys().cloned().collect(),
            });
        }
    }
    Ok(out)
}

async fn inspect(socket: PathBuf, root: &crate::core::paths::HostRoot, t: Duration) -> Option<DraPlugin> {
    let conn = DraConn::connect(&socket, t).await.ok()?;
    let info = tokio::time::timeout(t, conn.info()).await.ok()?.ok()?;
    if info.r#type != rules::PLUGIN_TYPE {
        return None;
    }
    let mut p = DraPlugin { socket, info, endpoint: None, health: None };
    if !Path::new(&p.info.endpoint).is_absolute() {
        return Some(p);
    }
    let ep = root.path(Path::new(&p.info.endpoint));
    let (c, _) = try_connect(&ep, t).await;
    let answered = c == Connect::Answered;
    p.endpoint = Some(c);
    if let Some(svc) = rules::chosen_health(&p.info.supported_versions) {
        let r = if !answered {
            Err(NoSnapshot::Silent)
        } else {
            let work = async {
                let conn = DraConn::connect(&ep, t).await?;
                let mut s = conn.health(svc).await?;
                s.next(&ep).await
            };
            match tokio::time::timeout(t, work).await {
                Err(_) => Err(NoSnapshot::Timeout(t)),
                Ok(Err(e)) => Err(NoSnapshot::Failed(std::sync::Arc::new(e))),
                Ok(Ok(None)) => Err(NoSnapshot::Ended),
                Ok(Ok(Some(snap))) => Ok(snap.len()),
            }
        };
        p.health = Some((svc.to_string(), r));
    }
    Some(p)
}

/// Gather the DRA facts: the DRA plugins among the plugin-watcher sockets
/// that answered GetInfo, and the checkpoint.
pub async fn gather(
    watchers: &[Watcher],
    kubelet_root_here: &Path,
    root: &crate::core::paths::HostRoot,
    t: Duration,
) -> DraFacts {
    let mut set = tokio::task::JoinSet::new();
    for w in watchers {
        if w.info.ok().is_some_and(|(ty, _, _)| ty == rules::PLUGIN_TYPE) {
            let (s, r) = (w.socket.clone(), root.clone());
            set.spawn(async move { inspect(s, &r, t).await });
        }
    }
    let mut plugins = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(Some(p)) = r {
            plugins.push(p);
        }
    }
    plugins.sort_by(|a, b| a.socket.cmp(&b.socket));
    let mut service_sockets = Vec::new();
    let dirs = std::fs::read_dir(kubelet_root_here.join("plugins"))
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect::<Vec<_>>())
        .unwrap_or_default();
    for d in dirs {
        // dpctl's own live-control sockets (`dpctl-control/`) are not the kubelet's business.
        let own = |p: &Path| p.components().any(|c| c.as_os_str() == crate::core::paths::CONTROL_DIR);
        for sock in crate::core::transport::find_sockets(&d).into_iter().filter(|p| !own(p)) {
            let n = sock.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if n.starts_with("dra") && n.ends_with(".sock") {
                let (c, _) = try_connect(&sock, t).await;
                service_sockets.push((root.on_host(&sock), c));
            }
        }
    }
    service_sockets.sort_by(|a, b| a.0.cmp(&b.0));
    let checkpoint_path = kubelet_root_here.join(dra_checkpoint::NAME);
    let checkpoint = match crate::core::limits::read_file(&checkpoint_path, dra_checkpoint::MAX_BYTES, "DRA checkpoint")
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DraCheckpoint::Missing,
        Err(e) => DraCheckpoint::Bad(e.to_string(), e.kind() == std::io::ErrorKind::PermissionDenied),
        Ok(text) => match parse_checkpoint(&text) {
            Ok(c) => DraCheckpoint::Read(c),
            Err(e) => DraCheckpoint::Bad(e.to_string(), false),
        },
    };
    let prefix = format!("{}.corrupt-", dra_checkpoint::NAME);
    let mut set_aside: Vec<PathBuf> = std::fs::read_dir(kubelet_root_here)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| root.on_host(&e.path()))
                .collect()
        })
        .unwrap_or_default();
    set_aside.sort();
    DraFacts {
        kubelet_root: root.on_host(kubelet_root_here),
        plugins,
        service_sockets,
        checkpoint_path,
        checkpoint,
        set_aside,
    }
}

fn finding(
    severity: Severity,
    check: &'static str,
    subject: String,
    message: String,
    evidence: String,
    fix: &str,
) -> Finding {
    Finding { severity, check, subject, message, evidence, fix: fix.to_string() }
}

/// Each DRA plugin as the plugin watcher sees it (info).
pub fn registered_findings(f: &DraFacts) -> Vec<Finding> {
    f.plugins
        .iter()
        .map(|p| {
            finding(
                Severity::Info,
                "dra-plugin",
                p.info.name.clone(),
                format!("DRA driver {} is registered through {}", p.info.name, p.socket.display()),
                format!("endpoint {}; supported_versions {}", p.info.endpoint, p.info.supported_versions.join(",")),
                "",
            )
        })
        .collect()
}

/// GetInfo answers that break the kubelet's registration rules (endpoint
/// outside the kubelet root, bad driver name, no known service, …).
pub fn registration_findings(f: &DraFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &f.plugins {
        for v in rules::info_violations(&p.info, &f.kubelet_root) {
            let sev = if v.rule.is_fail() { Severity::Error } else { Severity::Warning };
            out.push(finding(
                sev,
                "dra-registration",
                p.socket.display().to_string(),
                format!("DRA driver {}: {}", p.info.name, v.rule.checks),
                format!("{} (rule {}; {})", v.text, v.rule.id, v.rule.source),
                v.rule.fix,
            ));
        }
    }
    out
}

/// Endpoints that do not answer: the driver's pods get "DRA driver … is not registered" or time out.
pub fn endpoint_findings(f: &DraFacts) -> Vec<Finding> {
    f.plugins
        .iter()
        .filter_map(|p| {
            let c = p.endpoint.as_ref()?;
            if *c == Connect::Answered || *c == Connect::PermissionDenied {
                return None;
            }
            Some(finding(
                Severity::Error,
                "dra-endpoint",
                p.info.endpoint.clone(),
                format!(
                    "the DRA driver {}'s service socket does not answer, so the kubelet cannot prepare its claims",
                    p.info.name
                ),
                format!("{c:?} (registered through {})", p.socket.display()),
                "restart the driver's kubelet plugin; if it moved, it must re-create its registration socket",
            ))
        })
        .collect()
}

/// A DRA driver with prepared claims that nothing answers for: no
/// plugin-watcher registration of it answers GetInfo.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadDriver {
    /// The driver's name.
    pub driver: String,
    /// Its prepared claims, from the checkpoint.
    pub claims: Vec<CheckpointClaim>,
    /// Its sockets left with nothing listening (registration and service), as shown.
    pub sockets: Vec<String>,
}

/// Whether a plugin-watcher socket's file name is `driver`'s
/// (`<driver>.sock`, `<driver>-reg.sock`, `<driver>-<uid>-reg.sock`).
fn names_driver(socket: &Path, driver: &str) -> bool {
    let n = socket.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    n.strip_prefix(driver).is_some_and(|rest| rest.starts_with('-') || rest == ".sock")
}

/// The drivers that prepared claims (per the checkpoint) and are not
/// registered through a socket that answers, with their stale sockets (pure).
pub fn dead_drivers(f: &DraFacts, watchers: &[Watcher]) -> Vec<DeadDriver> {
    let DraCheckpoint::Read(claims) = &f.checkpoint else { return vec![] };
    let drivers: std::collections::BTreeSet<&str> = claims.iter().map(|c| c.driver.as_str()).collect();
    drivers
        .into_iter()
        .filter(|d| !f.plugins.iter().any(|p| p.info.name == *d))
        .map(|d| {
            let dir = f.kubelet_root.join("plugins").join(d);
            let mut sockets: Vec<String> = watchers
                .iter()
                .filter(|w| matches!(w.info, Got::Connect(Connect::Refused)) && names_driver(&w.socket, d))
                .map(|w| w.socket.display().to_string())
                .collect();
            sockets.extend(
                f.service_sockets
                    .iter()
                    .filter(|(p, c)| *c == Connect::Refused && p.starts_with(&dir))
                    .map(|(p, _)| p.display().to_string()),
            );
            DeadDriver {
                driver: d.to_string(),
                claims: claims.iter().filter(|c| c.driver == d).cloned().collect(),
                sockets,
            }
        })
        .collect()
}

/// Claim (`namespace/name`) → the pods (`namespace/name`) PodResources
/// says hold it; None when PodResources did not answer.
pub type ClaimPods = std::collections::BTreeMap<String, Vec<String>>;

/// The pods holding `claim` (`namespace/name`): from PodResources, else the
/// checkpoint's pod UIDs.
fn claim_holders(c: &CheckpointClaim, pods: Option<&ClaimPods>) -> Vec<String> {
    let named: Vec<String> = pods.and_then(|m| m.get(&c.claim)).cloned().unwrap_or_default();
    if named.is_empty() {
        c.pods.iter().map(|u| format!("pod UID {u}")).collect()
    } else {
        named
    }
}

/// A dead driver with prepared claims: an error naming the driver, its
/// claims and the pods holding them, as a dead device plugin is `plugin-died`.
pub fn died_findings(dead: &[DeadDriver], pods: Option<&ClaimPods>) -> Vec<Finding> {
    dead.iter()
        .map(|d| {
            let claims: Vec<String> = d
                .claims
                .iter()
                .map(|c| {
                    let holders = claim_holders(c, pods);
                    let held = if holders.is_empty() { String::new() } else { format!(" held by {}", holders.join(", ")) };
                    format!("{} (UID {}){held}", c.claim, c.uid)
                })
                .collect();
            let what = if d.sockets.is_empty() {
                "it is not registered".to_string()
            } else {
                format!("nothing listens on its socket(s) {}", d.sockets.join(", "))
            };
            finding(
                Severity::Error,
                "dra-driver-died",
                d.driver.clone(),
                format!(
                    "DRA driver {} is not running ({what}) while {} claim(s) it prepared are in use: the kubelet cannot unprepare them when their pods go, and new pods with its claims fail (\"DRA driver {} is not registered\")",
                    d.driver,
                    d.claims.len(),
                    d.driver
                ),
                format!(
                    "prepared claims in the DRA checkpoint: {}{}",
                    claims.join("; "),
                    if d.sockets.is_empty() { String::new() } else { "; connect: connection refused".into() }
                ),
                "restart the driver's kubelet plugin (delete its DaemonSet pod) and read why it died (kubectl logs --previous); its new instance registers again, replacing the stale sockets, and the kubelet unprepares the claims of pods that are gone",
            )
        })
        .collect()
}

/// DRA service sockets with nothing listening (a driver that died or was
/// replaced without cleaning up); the registered ones are `dra-endpoint`,
/// a dead driver's are in its `dra-driver-died`.
pub fn stale_socket_findings(f: &DraFacts, dead: &[DeadDriver]) -> Vec<Finding> {
    f.service_sockets
        .iter()
        .filter(|(_, c)| *c == Connect::Refused)
        .filter(|(p, _)| !dead.iter().any(|d| d.sockets.contains(&p.display().to_string())))
        .filter(|(p, _)| {
            !f.plugins.iter().any(|x| {
                Path::new(&x.info.endpoint) == f.kubelet_root.join(p.strip_prefix(&f.kubelet_root).unwrap_or(p))
                    || Path::new(&x.info.endpoint) == p.as_path()
            })
        })
        .map(|(p, _)| {
            finding(
                Severity::Warning,
                "dra-stale-socket",
                p.display().to_string(),
                "a stale DRA service socket: nothing listens on it".into(),
                "connect: connection refused".into(),
                "restart the driver that owned it; since nothing listens removing it is safe",
            )
        })
        .collect()
}

/// A health service advertised but not answering.
pub fn health_findings(f: &DraFacts) -> Vec<Finding> {
    f.plugins
        .iter()
        .filter_map(|p| {
            let (svc, r) = p.health.as_ref()?;
            let why = r.as_ref().err()?;
            Some(finding(
                Severity::Warning,
                "dra-health",
                p.info.name.clone(),
                format!("DRA driver {} advertises {svc} but it does not answer: device health is unknown", p.info.name),
                why.to_string(),
                rules::HEALTH_ANSWERS.fix,
            ))
        })
        .collect()
}

/// The checkpoint cannot be read (the kubelet refuses to start on it), and
/// damaged checkpoints a mock kubelet set aside.
pub fn checkpoint_findings(f: &DraFacts) -> Vec<Finding> {
    let mut out = match &f.checkpoint {
        DraCheckpoint::Bad(why, denied) => vec![finding(
            if *denied { Severity::Unknown } else { Severity::Error },
            "dra-checkpoint",
            f.checkpoint_path.display().to_string(),
            if *denied {
                "the kubelet's DRA checkpoint cannot be read; prepared claims could not be checked".into()
            } else {
                "the kubelet's DRA checkpoint is damaged: the kubelet refuses to start on it".into()
            },
            why.clone(),
            if *denied {
                "run doctor as root"
            } else {
                "drain the node (its claims may still be prepared), move the file aside, then restart the kubelet"
            },
        )],
        _ => vec![],
    };
    out.extend(f.set_aside.iter().map(|p| {
        finding(
            Severity::Warning,
            "dra-checkpoint-set-aside",
            p.display().to_string(),
            "a damaged DRA checkpoint was moved aside here; claims it recorded may still be prepared".into(),
            format!("the mock kubelet found {} damaged at start and kept it", dra_checkpoint::NAME),
            "unprepare the claims it names with their drivers (or drain the node), then delete it",
        )
    }));
    out
}

/// CDI IDs of prepared claims that no CDI spec defines: the runtime fails
/// those containers with "unresolvable CDI devices".
pub fn cdi_findings(f: &DraFacts, cdi: &Registry) -> Vec<Finding> {
    let DraCheckpoint::Read(claims) = &f.checkpoint else { return vec![] };
    let mut out = Vec::new();
    for c in claims {
        let bad: Vec<String> =
            c.cdi_ids.iter().filter_map(|id| unresolvable(cdi, id).map(|why| format!("{id}: {why}"))).collect();
        if !bad.is_empty() {
            out.push(finding(
                Severity::Error,
                "dra-cdi",
                format!("{} ({})", c.claim, c.uid),
                format!(
                    "claim {} was prepared by {} with CDI devices no spec defines: its containers fail with \"unresolvable CDI devices\"",
                    c.claim, c.driver
                ),
                bad.join("; "),
                &format!(
                    "the driver must write its CDI specs into a directory the container runtime reads before answering NodePrepareResources, then restart it so it re-prepares; searched: {}; if the specs are elsewhere, pass that directory with --cdi-spec-dir",
                    if cdi.searched.is_empty() { "(nothing)" } else { &cdi.searched }
                ),
            ));
        }
    }
    out
}

/// Every DRA finding; `watchers` are the plugin-watcher sockets (a dead
/// driver's are folded into its finding), `pods` who holds each claim.
pub fn findings(f: &DraFacts, cdi: &Registry, watchers: &[Watcher], pods: Option<&ClaimPods>) -> Vec<Finding> {
    let dead = dead_drivers(f, watchers);
    let mut v = registered_findings(f);
    v.extend(registration_findings(f));
    v.extend(endpoint_findings(f));
    v.extend(died_findings(&dead, pods));
    v.extend(stale_socket_findings(f, &dead));
    v.extend(health_findings(f));
    v.extend(checkpoint_findings(f));
    v.extend(cdi_findings(f, cdi));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(name: &str, ep: &str, versions: &[&str]) -> DraPlugin {
        DraPlugin {
            socket: PathBuf::from(format!("/var/lib/kubelet/plugins_registry/{name}-reg.sock")),
            info: PluginInfo {
                r#type: crate::protocol::dra::PLUGIN_TYPE.into(),
                name: name.into(),
                endpoint: ep.into(),
                supported_versions: versions.iter().map(|s| s.to_string()).collect(),
            },
            endpoint: Some(Connect::Answered),
            health: None,
        }
    }

    fn facts(plugins: Vec<DraPlugin>) -> DraFacts {
        DraFacts {
            kubelet_root: "/var/lib/kubelet".into(),
            plugins,
            service_sockets: vec![],
            checkpoint_path: "/var/lib/kubelet/dra_manager_state".into(),
            checkpoint: DraCheckpoint::Missing,
            set_aside: vec![],
        }
    }

    fn checks(v: &[Finding]) -> Vec<&'static str> {
        v.iter().map(|f| f.check).collect()
    }

    #[test]
    fn a_good_plugin_is_only_listed() {
        let f =
            facts(vec![plugin("g.example.com", "/var/lib/kubelet/plugins/g.example.com/dra.sock", &["v1.DRAPlugin"])]);
        assert_eq!(checks(&findings(&f, &Registry::default(), &[], None)), ["dra-plugin"]);
    }

    #[test]
    fn endpoints_outside_the_root_and_dead_endpoints_are_errors() {
        let mut dead = plugin("a.example", "/var/lib/kubelet/plugins/a/dra.sock", &["v1.DRAPlugin"]);
        dead.endpoint = Some(Connect::Refused);
        let outside = plugin("b.example", "/run/b/dra.sock", &["v1.DRAPlugin"]);
        let f = facts(vec![dead, outside]);
        let r = registration_findings(&f);
        assert_eq!(checks(&r), ["dra-registration"]);
        assert!(r[0].evidence.contains("endpoint-inside-root") && r[0].subject.contains("b.example"), "{r:?}");
        let e = endpoint_findings(&f);
        assert_eq!(checks(&e), ["dra-endpoint"]);
        assert!(e[0].evidence.contains("Refused"));
        // A stale service socket nobody registers is its own finding; a registered one is not repeated.
        let mut f = f;
        f.service_sockets = vec![
            ("/var/lib/kubelet/plugins/a/dra.sock".into(), Connect::Refused),
            ("/var/lib/kubelet/plugins/old/dra.sock".into(), Connect::Refused),
            ("/var/lib/kubelet/plugins/live/dra.sock".into(), Connect::Answered),
        ];
        let s = stale_socket_findings(&f, &[]);
        assert_eq!(s.iter().map(|x| x.subject.as_str()).collect::<Vec<_>>(), ["/var/lib/kubelet/plugins/old/dra.sock"]);
    }

    #[test]
    fn an_advertised_health_service_that_does_not_answer_is_a_warning() {
        let mut p =
            plugin("g.example", "/var/lib/kubelet/plugins/g/dra.sock", &["v1.DRAPlugin", "v1.DRAResourceHealth"]);
        let failed = crate::core::Error::failed("Unimplemented");
        p.health = Some(("v1.DRAResourceHealth".into(), Err(NoSnapshot::Failed(std::sync::Arc::new(failed)))));
        let h = health_findings(&facts(vec![p.clone()]));
        assert_eq!(checks(&h), ["dra-health"]);
        assert_eq!(h[0].severity, Severity::Warning);
        p.health = Some(("v1.DRAResourceHealth".into(), Ok(4)));
        assert!(health_findings(&facts(vec![p])).is_empty());
    }

    #[test]
    fn checkpoint_claims_with_unresolvable_cdi_ids_are_errors() {
        let data = serde_json::json!({
            "kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
            "ClaimInfoStateList": [{"ClaimUID": "u1", "ClaimName": "gpu", "Namespace": "ml", "PodUIDs": {"p1": {}},
                "DriverState": {"g.example.com": {"Devices": [
                    {"PoolName": "p", "DeviceName": "d0", "RequestNames": ["r"], "CDIDeviceIDs": ["k8s.g.example.com/claim=u1-d0"]},
                    {"PoolName": "p", "DeviceName": "d1", "RequestNames": ["r"], "CDIDeviceIDs": ["k8s.g.example.com/claim=u1-d1"]}]}}}]
        });
        let data = data.to_string();
        let text = serde_json::json!({"Data": data, "Checksum": dra_checkpoint::crc32(data.as_bytes())}).to_string();
        let claims = parse_checkpoint(&text).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].claim, "ml/gpu");
        assert_eq!(claims[0].cdi_ids.len(), 2);
        let mut f = facts(vec![]);
        f.checkpoint = DraCheckpoint::Read(claims);
        let mut reg = Registry::default();
        reg.devices.insert("k8s.g.example.com/claim=u1-d0".into());
        let c = cdi_findings(&f, &reg);
        assert_eq!(checks(&c), ["dra-cdi"]);
        assert!(c[0].evidence.contains("u1-d1") && !c[0].evidence.contains("u1-d0:"), "{}", c[0].evidence);
        let other = r#"{"kind":"X"}"#;
        let other = serde_json::json!({"Data": other, "Checksum": dra_checkpoint::crc32(other.as_bytes())});
        // Read as the kubelet reads it (kind and apiVersion unchecked): no claims.
        assert!(parse_checkpoint(&other.to_string()).unwrap().is_empty());
        // A checkpoint the kubelet would refuse (its checksum does not match) is not read either.
        let corrupt = text.replace("u1-d1", "u1-d2");
        assert!(parse_checkpoint(&corrupt).unwrap_err().to_string().contains("corrupted"));
        assert!(parse_checkpoint("nope").is_err());
        f.checkpoint = DraCheckpoint::Bad("denied".into(), true);
        assert_eq!(checkpoint_findings(&f)[0].severity, Severity::Unknown);
        f.checkpoint = DraCheckpoint::Bad("checkpoint is corrupted".into(), false);
        assert_eq!(checkpoint_findings(&f)[0].severity, Severity::Error);
        assert!(checkpoint_findings(&f)[0].message.contains("refuses to start"));
        // A damaged checkpoint the mock kubelet set aside is named.
        f.set_aside = vec!["/var/lib/kubelet/dra_manager_state.corrupt-1700000000".into()];
        let c = checkpoint_findings(&f);
        assert_eq!(checks(&c), ["dra-checkpoint", "dra-checkpoint-set-aside"]);
        assert_eq!(c[1].subject, "/var/lib/kubelet/dra_manager_state.corrupt-1700000000");
    }
}
