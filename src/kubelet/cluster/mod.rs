//! The mock kubelet as a node of a cluster (`dpctl mock-kubelet
//! --kubeconfig FILE --node-name NAME`): what the kubelet does with the API
//! server, over [`crate::client::kube`] (the kubeconfig as client-go reads it).
//!
//! - [`run_node`] (process-wide, outlives restarts): registers the Node with
//!   the node's own credentials (POST; an existing one is taken over), keeps
//!   its status — capacity and allocatable with the device plugins'
//!   resources, the Ready condition, nodeInfo — written when it changes (the
//!   device manager's events wake it) and at least every 5 minutes
//!   (nodeStatusReportFrequency), and renews its Lease in kube-node-lease
//!   every 10 s (a 40 s lease); and wipes the node's ResourceSlices once the
//!   Node is there (none is usable until its driver comes back) and a
//!   driver's 30 s after its last instance deregistered, unless it
//!   registers again (the DRA plugin manager's wipeResourceSlices).
//! - [`run_pods`] (one per generation, as the manifest loop): a reflector —
//!   list, then watch from the list's resourceVersion, list again when the
//!   watch ends or is too old — of the pods with `spec.nodeName=NAME`, as the
//!   kubelet's API pod source is an informer on that field selector. Each new
//!   pod goes through the same lifecycle as a static pod
//!   ([`ContainerManager::admit`]); its ResourceClaims are read from the API
//!   server by the DRA manager at every prepare attempt ([`Claims`], as
//!   PrepareResources GETs them) and prepared exactly as written: one not
//!   allocated or not reserved for the pod fails the attempt, as on a kubelet. A pod with a
//!   deletionTimestamp is stopped, unprepared and freed, then deleted with
//!   gracePeriodSeconds 0 and its UID as precondition, as the status
//!   manager does. Pod status is written by a status writer that follows
//!   the lifecycle (strategic merge patch of `status`, UID precondition).

pub mod objects;

use crate::client::kube::{self, ApiServer, WatchEnd};
use crate::kubelet::cm::ContainerManager;
use crate::kubelet::event::{EventBus, KubeletEvent};
use crate::kubelet::manifest::ClaimSource;
use objects::Machine;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The node's API server as the DRA manager's claim reader: one GET per
/// claim and attempt, as manager.go PrepareResources fetches it. A refusal
/// heals at a later attempt — e.g. the Node authorizer's 403 "no
/// relationship found" while its graph lags a binding (seen at 1,000 pods).
#[derive(Debug)]
pub struct Claims(pub ApiServer);

impl crate::kubelet::dra::shell::fetch::ClaimReader for Claims {
    fn claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> crate::kubelet::dra::shell::fetch::Read<'a> {
        use crate::kubelet::dra::core::fetch::FetchError;
        Box::pin(async move {
            let path = format!("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}");
            match kube::request(&self.0, "GET", &path, None, CALL).await {
                Ok((200, v)) => Ok(v),
                Ok((code, body)) => {
                    let message = body["message"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
                    Err(FetchError::Refused { code, message })
                }
                Err(e) => Err(FetchError::Call(Box::new(e))),
            }
        })
    }

    fn deallocate<'a>(&'a self, namespace: &'a str, name: &'a str) -> crate::kubelet::dra::shell::fetch::Read<'a> {
        use crate::kubelet::dra::core::fetch::FetchError;
        Box::pin(async move {
            let mut c = self.claim(namespace, name).await?;
            if let Some(st) = c.get_mut("status").and_then(Value::as_object_mut) {
                for f in ["reservedFor", "allocation", "devices"] {
                    st.remove(f);
                }
            }
            let path = format!("/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status");
            match kube::request(&self.0, "PUT", &path, Some(&c), CALL).await {
                Ok((200, v)) => Ok(v),
                Ok((code, body)) => {
                    let message = body["message"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
                    Err(FetchError::Refused { code, message })
                }
                Err(e) => Err(FetchError::Call(Box::new(e))),
            }
        })
    }
}

/// A node of a cluster: the API server (as the kubeconfig says) and the node's name.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The API server, with the node's credentials.
    pub api: ApiServer,
    /// The node's name.
    pub node: String,
    /// Labels of its own on the Node, beside the kubelet's (the kubelet's `--node-labels`).
    pub labels: BTreeMap<String, String>,
}

/// One API call's time limit.
const CALL: Duration = Duration::from_secs(30);
/// How often the node status is looked at (nodeStatusUpdateFrequency).
const STATUS_EVERY: Duration = Duration::from_secs(10);
/// The status is written at least this often (nodeStatusReportFrequency).
const REPORT_EVERY: Duration = Duration::from_secs(300);
/// A driver's ResourceSlices go this long after its last instance left (the
/// kubelet's defaultWipingDelay, kubernetes#132058).
const WIPE_DELAY: Duration = Duration::from_secs(30);
/// A watch asks the server to end it after this long (the reflector's 5–10 min).
const WATCH_SECONDS: u64 = 300;

/// Retry delays: 200 ms doubling to 7 s (the node lease controller's backoff).
fn retry_delay(attempt: u32) -> Duration {
    (Duration::from_millis(200) * 2u32.pow(attempt.min(6))).min(Duration::from_secs(7))
}

fn pods_path(node: &str) -> String {
    format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")
}

fn node_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

fn lease_path(node: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases/{node}", objects::LEASE_NAMESPACE)
}

fn pod_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{name}")
}

/// Why an answer is not what was wanted, in one line.
fn refused(what: &str, code: u16, body: &Value) -> String {
    let msg = body["message"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
    format!("{what}: HTTP {code}: {msg}")
}

/// The node: registration, status, lease — until `stop`.
pub async fn run_node(
    c: ClusterSpec,
    machine: Machine,
    current: watch::Receiver<Option<Arc<ContainerManager>>>,
    bus: EventBus,
    stop: CancellationToken,
) {
    stop.run_until_cancelled(node_loop(c, machine, current, bus)).await;
}

fn error(bus: &EventBus, during: &str, e: impl std::fmt::Display) {
    bus.emit(KubeletEvent::ClusterError { during: during.to_string(), error: e.to_string() }, None);
}

type Resources = (BTreeMap<String, String>, BTreeMap<String, String>);

fn resources_now(machine: &Machine, current: &watch::Receiver<Option<Arc<ContainerManager>>>) -> Option<Resources> {
    current.borrow().as_ref().map(|cm| objects::resources(machine, &cm.devices.resources()))
}

async fn node_loop(
    c: ClusterSpec,
    machine: Machine,
    mut current: watch::Receiver<Option<Arc<ContainerManager>>>,
    bus: EventBus,
) {
    let since = objects::time(SystemTime::now());
    let mut events = bus.subscribe();
    let first = resources_now(&machine, &current).unwrap_or_else(|| objects::resources(&machine, &[]));
    let mut attempt = 0;
    let uid = loop {
        let status = objects::node_status(&c.node, &machine, &first, &since, &since);
        match register(&c, objects::node(&c.node, &c.labels, status)).await {
            Ok((uid, existed)) => {
                bus.emit(KubeletEvent::NodeRegistered { node: c.node.clone(), server: c.api.url(), existed }, None);
                break uid;
            }
            Err(e) => error(&bus, "registering the node", e),
        }
        tokio::time::sleep(retry_delay(attempt)).await;
        attempt += 1;
    };
    let mut written: Option<Resources> = None;
    let mut reported = Instant::now();
    let mut lease: Option<Value> = None;
    let (mut lease_at, mut lease_attempt) = (Instant::now(), 0);
    let mut status_attempt = 0;
    let mut status_at = Instant::now();
    // The node's ResourceSlices: all wiped once the Node is there (retried
    // until done), a driver's wiped WIPE_DELAY after its last instance left.
    let mut wipes: BTreeMap<String, Instant> = BTreeMap::from([(String::new(), Instant::now())]);
    let mut wipe_attempt = 0;
    loop {
        let due: Vec<String> = wipes.iter().filter(|(_, at)| **at <= Instant::now()).map(|(d, _)| d.clone()).collect();
        for driver in due {
            match wipe_slices(&c, &driver).await {
                Ok(slices) => {
                    wipes.remove(&driver);
                    wipe_attempt = 0;
                    if slices.is_empty() {
                        continue;
                    }
                    let event = match driver.is_empty() {
                        true => KubeletEvent::DraNodeSlicesWiped { node: c.node.clone(), slices },
                        false => KubeletEvent::DraSlicesWiped { driver, slices },
                    };
                    bus.emit(event, None);
                }
                Err(e) => {
                    error(&bus, "wiping the node's ResourceSlices", e);
                    wipes.insert(driver, Instant::now() + retry_delay(wipe_attempt));
                    wipe_attempt += 1;
                }
            }
        }
        if Instant::now() >= lease_at {
            match renew_lease(&c, &uid, lease.take()).await {
                Ok(l) => {
                    lease = Some(l);
                    lease_attempt = 0;
                    lease_at = Instant::now() + objects::LEASE_RENEW;
                }
                Err(e) => {
                    error(&bus, "renewing the node lease", e);
                    lease_at = Instant::now() + retry_delay(lease_attempt);
                    lease_attempt += 1;
                }
            }
        }
        let now_resources = resources_now(&machine, &current);
        let due = reported.elapsed() >= REPORT_EVERY;
        if let Some(r) = now_resources.filter(|r| (written.as_ref() != Some(r) || due) && Instant::now() >= status_at) {
            let now = objects::time(SystemTime::now());
            let status = objects::node_status(&c.node, &machine, &r, &now, &since);
            let patch = serde_json::json!({ "status": status });
            let path = format!("{}/status", node_path(&c.node));
            match kube::request_as(&c.api, "PATCH", &path, kube::STRATEGIC_MERGE_PATCH, Some(&patch), CALL).await {
                Ok((200, _)) => {
                    bus.emit(KubeletEvent::NodeStatus { node: c.node.clone(), allocatable: r.1.clone() }, None);
                    written = Some(r);
                    reported = Instant::now();
                    status_attempt = 0;
                }
                Ok((code, body)) => {
                    error(&bus, "writing the node status", refused("PATCH node status", code, &body));
                    status_at = Instant::now() + retry_delay(status_attempt);
                    status_attempt += 1;
                }
                Err(e) => {
                    error(&bus, "writing the node status", e);
                    status_at = Instant::now() + retry_delay(status_attempt);
                    status_attempt += 1;
                }
            }
        }
        let wake = lease_at.min(Instant::now() + STATUS_EVERY).max(status_at.min(Instant::now() + STATUS_EVERY));
        let wake = wipes.values().fold(wake, |w, at| w.min(*at));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            e = events.recv() => match e.as_ref().map(|e| &e.event) {
                None => return,
                // The kubelet's pending wipe: the last instance gone starts it, a registration cancels it.
                Some(KubeletEvent::DraDeregistered { driver, instances: 0, .. }) => {
                    wipes.insert(driver.clone(), Instant::now() + WIPE_DELAY);
                }
                Some(KubeletEvent::DraRegistered { driver, .. }) => {
                    wipes.remove(driver);
                }
                Some(_) => {}
            },
            r = current.changed() => if r.is_err() { return },
        }
    }
}

/// Delete the node's ResourceSlices (of `driver`; all when empty), as the
/// DRA plugin manager's wipeResourceSlices does (a delete collection with a
/// field selector); the names of the slices deleted.
async fn wipe_slices(c: &ClusterSpec, driver: &str) -> crate::core::Result<Vec<String>> {
    let mut path = format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{}", c.node);
    if !driver.is_empty() {
        path.push_str(&format!("%2Cspec.driver%3D{driver}"));
    }
    let (code, body) = kube::request(&c.api, "DELETE", &path, None, CALL).await?;
    match code {
        200 => Ok(body["items"]
            .as_array()
            .map(|l| l.iter().filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string)).collect())
            .unwrap_or_default()),
        404 => Ok(Vec::new()),
        _ => Err(crate::core::Error::failed(refused("DELETE resourceslices", code, &body))),
    }
}

/// Register the Node (POST); an existing Node is taken over. Its UID, and whether it existed.
async fn register(c: &ClusterSpec, node: Value) -> crate::core::Result<(String, bool)> {
    let (code, body) = kube::request(&c.api, "POST", "/api/v1/nodes", Some(&node), CALL).await?;
    let existed = match code {
        201 | 200 => return Ok((body["metadata"]["uid"].as_str().unwrap_or_default().to_string(), false)),
        409 => true,
        _ => return Err(crate::core::Error::failed(refused("POST node", code, &body))),
    };
    let (code, body) = kube::request(&c.api, "GET", &node_path(&c.node), None, CALL).await?;
    if code != 200 {
        return Err(crate::core::Error::failed(refused("GET node", code, &body)));
    }
    Ok((body["metadata"]["uid"].as_str().unwrap_or_default().to_string(), existed))
}

/// Renew the Lease (created when missing); the object as stored now.
async fn renew_lease(c: &ClusterSpec, node_uid: &str, held: Option<Value>) -> crate::core::Result<Value> {
    let renew = objects::micro_time(SystemTime::now());
    let current = match held {
        Some(l) => Some(l),
        None => {
            let (code, body) = kube::request(&c.api, "GET", &lease_path(&c.node), None, CALL).await?;
            match code {
                200 => Some(body),
                404 => None,
                _ => return Err(crate::core::Error::failed(refused("GET lease", code, &body))),
            }
        }
    };
    let (method, path, obj) = match current {
        None => (
            "POST",
            format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases", objects::LEASE_NAMESPACE),
            objects::lease(&c.node, node_uid, &renew),
        ),
        Some(mut l) => {
            let fresh = objects::lease(&c.node, node_uid, &renew);
            l["spec"] = fresh["spec"].clone();
            if l["metadata"]["ownerReferences"].as_array().is_none_or(Vec::is_empty) {
                l["metadata"]["ownerReferences"] = fresh["metadata"]["ownerReferences"].clone();
            }
            ("PUT", lease_path(&c.node), l)
        }
    };
    let (code, body) = kube::request(&c.api, method, &path, Some(&obj), CALL).await?;
    match code {
        200 | 201 => Ok(body),
        _ => Err(crate::core::Error::failed(refused(&format!("{method} lease"), code, &body))),
    }
}

/// A pod bound to the node, as the reflector knows it.
struct Bound {
    /// `namespace/name`.
    key: String,
    namespace: String,
    name: String,
    /// Its spec (container images for the status).
    spec: Value,
    /// The ResourceClaims it uses (`namespace/name`).
    claims: Vec<String>,
    /// When it was first seen.
    since: String,
    /// Its PodScheduled condition's lastTransitionTime: the scheduler's, or `since`.
    scheduled: String,
    /// Admitted into the lifecycle (false: refused, terminal, or not runnable).
    admitted: bool,
    /// Being deleted.
    deleting: bool,
    /// The status last written.
    written: Option<Value>,
}

type BoundPods = Arc<Mutex<BTreeMap<String, Bound>>>;

fn lock(p: &BoundPods) -> std::sync::MutexGuard<'_, BTreeMap<String, Bound>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pods bound to the node, run by `cm`'s lifecycle (one generation):
/// the reflector and the status writer, until the generation ends.
/// `orphans`: after the first list, what the checkpoints hold for pods not
/// listed goes (when no manifest directory does that).
pub async fn run_pods(cm: Arc<ContainerManager>, c: ClusterSpec, machine: Machine, orphans: bool) {
    let pods: BoundPods = Arc::default();
    tokio::join!(reflect(cm.clone(), &c, pods.clone(), orphans), write_status(cm, &c, pods, machine));
}

/// What one watch event says, for the reflector.
enum Seen {
    /// A pod as it is now.
    Pod(Value),
    /// A pod is gone (its UID).
    Gone(String),
    /// The resourceVersion to go on from.
    Bookmark(String),
    /// The watch must start again from a list.
    Relist,
}

fn seen(e: Value) -> Option<Seen> {
    let obj = &e["object"];
    match e["type"].as_str()? {
        "ADDED" | "MODIFIED" => Some(Seen::Pod(obj.clone())),
        "DELETED" => Some(Seen::Gone(obj["metadata"]["uid"].as_str()?.to_string())),
        "BOOKMARK" => Some(Seen::Bookmark(obj["metadata"]["resourceVersion"].as_str()?.to_string())),
        _ => Some(Seen::Relist),
    }
}

async fn reflect(cm: Arc<ContainerManager>, c: &ClusterSpec, pods: BoundPods, mut orphans: bool) {
    let bus = cm.devices.bus.clone();
    let mut attempt = 0;
    loop {
        // List.
        let listed = kube::request(&c.api, "GET", &pods_path(&c.node), None, CALL).await;
        let list = match listed {
            Ok((200, body)) => body,
            Ok((code, body)) => {
                error(&bus, "listing the node's pods", refused("LIST pods", code, &body));
                tokio::time::sleep(retry_delay(attempt)).await;
                attempt += 1;
                continue;
            }
            Err(e) => {
                error(&bus, "listing the node's pods", e);
                tokio::time::sleep(retry_delay(attempt)).await;
                attempt += 1;
                continue;
            }
        };
        attempt = 0;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let listed: std::collections::BTreeSet<String> =
            items.iter().filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string)).collect();
        let gone: Vec<String> = lock(&pods).keys().filter(|u| !listed.contains(*u)).cloned().collect();
        for uid in gone {
            forget(&cm, &pods, &uid).await;
        }
        for p in items {
            sync(&cm, c, &pods, p).await;
        }
        if orphans {
            cm.devices.drop_orphans();
            if let Some(d) = &cm.dra {
                d.unprepare_orphans();
            }
            orphans = false;
        }
        let mut rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
        // Watch from there until the server ends it, then watch on (or list again).
        loop {
            let path = format!(
                "{}&watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={rv}",
                pods_path(&c.node)
            );
            let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
            let w = kube::watch(&c.api, &path, CALL, move |e| tx.send(e).is_ok());
            tokio::pin!(w);
            let mut ended: Option<crate::core::Result<WatchEnd>> = None;
            let mut relist = false;
            loop {
                tokio::select! {
                    r = &mut w, if ended.is_none() => ended = Some(r),
                    e = rx.recv() => match e.and_then(seen) {
                        Some(Seen::Pod(p)) => {
                            if let Some(v) = p["metadata"]["resourceVersion"].as_str() {
                                rv = v.to_string();
                            }
                            sync(&cm, c, &pods, p).await;
                        }
                        Some(Seen::Gone(uid)) => forget(&cm, &pods, &uid).await,
                        Some(Seen::Bookmark(v)) => rv = v,
                        Some(Seen::Relist) => relist = true,
                        None => break,
                    },
                }
            }
            match ended {
                Some(Ok(WatchEnd::Closed)) if !relist => continue,
                Some(Ok(WatchEnd::Refused(code, body))) if code != 410 => {
                    error(&bus, "watching the node's pods", refused("WATCH pods", code, &body));
                }
                Some(Err(e)) => error(&bus, "watching the node's pods", e),
                _ => {}
            }
            break;
        }
    }
}

/// The DRA manager's key of a ResourceClaim object.
fn claim_object_key(key: &str) -> String {
    format!("ResourceClaim {key}")
}

/// A pod is gone from the API server: if it still runs (deleted without
/// the node's part, e.g. forced), it is stopped, unprepared and freed.
async fn forget(cm: &Arc<ContainerManager>, pods: &BoundPods, uid: &str) {
    let Some(b) = lock(pods).remove(uid) else { return };
    if b.admitted && !b.deleting {
        cm.remove_pod(uid).await;
    }
    forget_claims(cm, pods, &b.claims);
}

/// The claim objects no known pod uses any more leave the DRA manager.
fn forget_claims(cm: &ContainerManager, pods: &BoundPods, claims: &[String]) {
    let Some(d) = &cm.dra else { return };
    let used: std::collections::BTreeSet<String> = lock(pods).values().flat_map(|b| b.claims.iter().cloned()).collect();
    for k in claims.iter().filter(|k| !used.contains(*k)) {
        d.forget_object(&claim_object_key(k));
    }
}

/// One pod as the API server has it now.
async fn sync(cm: &Arc<ContainerManager>, c: &ClusterSpec, pods: &BoundPods, p: Value) {
    let bus = cm.devices.bus.clone();
    let meta = &p["metadata"];
    let (Some(uid), Some(name)) = (meta["uid"].as_str(), meta["name"].as_str()) else { return };
    let namespace = meta["namespace"].as_str().unwrap_or("default");
    let key = format!("{namespace}/{name}");
    if meta["deletionTimestamp"].is_string() {
        // The device-taint eviction controller's: shown as evicted while it goes.
        if evicted(&p) {
            cm.mark_evicted(uid);
        }
        delete(cm, c, pods, uid, namespace, name).await;
        return;
    }
    if lock(pods).contains_key(uid) {
        return;
    }
    let since = objects::time(SystemTime::now());
    let scheduled = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "True")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(&since)
        .to_string();
    let mut bound = Bound {
        key: key.clone(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        spec: p["spec"].clone(),
        claims: Vec::new(),
        since,
        scheduled,
        admitted: false,
        deleting: false,
        written: None,
    };
    // A pod that ended is not run again.
    if matches!(p["status"]["phase"].as_str(), Some("Failed" | "Succeeded")) {
        lock(pods).insert(uid.to_string(), bound);
        return;
    }
    let pod = match objects::bound_pod(&p) {
        Ok(pod) => pod,
        Err(objects::BoundPodError::NotNamedYet { .. }) => return, // the controller has not named its claims yet
        Err(e) => {
            error(&bus, &format!("reading pod {key}"), e);
            lock(pods).insert(uid.to_string(), bound);
            return;
        }
    };
    // DRA-backed extended resources (KEP-5004): the scheduler names the special claim in the
    // pod's status before it binds it; dpctl's control plane, whose pods arrive bound, right
    // after the write that made the pod. A pod seen without it is read once more; still
    // without it, admission refuses what no device plugin serves, as the kubelet does.
    let given = |pod: &crate::kubelet::manifest::Pod| {
        pod.resource_claims.iter().any(|c| matches!(c.source, ClaimSource::Extended(_)))
    };
    let mut pod = pod;
    if !given(&pod) && cm.asks_unserved_extended(&pod) {
        let path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
        if let Ok((200, fresh)) = kube::request(&c.api, "GET", &path, None, CALL).await {
            if let Some(again) = (fresh["metadata"]["uid"] == uid).then(|| objects::bound_pod(&fresh).ok()).flatten() {
                pod = again;
            }
        }
    }
    // Its claims are read by the DRA manager at every prepare attempt
    // ([`Claims`]); they are forgotten once no pod here names them.
    if cm.dra.is_some() {
        bound.claims = objects::claim_names(&pod).iter().map(|claim| format!("{namespace}/{claim}")).collect();
    }
    lock(pods).insert(uid.to_string(), bound);
    let file = PathBuf::from(format!("(api server) {key}"));
    match cm.admit(pod, file).await {
        Ok(()) => {
            if let Some(b) = lock(pods).get_mut(uid) {
                b.admitted = true;
            }
            cm.changed();
        }
        Err(e) => {
            let status = objects::rejected_status(&e.reason(), &e.to_string());
            let patch = objects::status_patch(uid, &status);
            let path = format!("{}/status", pod_path(namespace, name));
            match kube::request_as(&c.api, "PATCH", &path, kube::STRATEGIC_MERGE_PATCH, Some(&patch), CALL).await {
                Ok((200, _)) => bus.emit(
                    KubeletEvent::ClusterPodStatus {
                        pod: key,
                        uid: uid.to_string(),
                        phase: "Failed".into(),
                        reason: Some(e.reason()),
                    },
                    None,
                ),
                Ok((code, body)) => error(&bus, "writing a pod's status", refused("PATCH pod status", code, &body)),
                Err(e) => error(&bus, "writing a pod's status", e),
            }
        }
    }
}

/// Whether the device-taint eviction controller deleted pod `p` (its
/// `DisruptionTarget=True` condition, reason DeletionByDeviceTaintManager).
fn evicted(p: &Value) -> bool {
    use crate::controlplane::controller::taints::{CONDITION, REASON};
    p["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == CONDITION && c["status"] == "True" && c["reason"] == REASON))
}

/// A pod with a deletionTimestamp: stopped, its claims unprepared (waiting
/// for a failed unprepare's retries), its devices freed; then deleted.
async fn delete(cm: &Arc<ContainerManager>, c: &ClusterSpec, pods: &BoundPods, uid: &str, namespace: &str, name: &str) {
    let admitted = {
        let mut g = lock(pods);
        match g.get_mut(uid) {
            Some(b) if b.deleting => return,
            Some(b) => {
                b.deleting = true;
                b.admitted
            }
            None => false,
        }
    };
    if admitted {
        cm.remove_pod(uid).await;
        if let Some(d) = &cm.dra {
            // The kubelet deletes the pod only once its resources are reclaimed.
            while d.knows(uid) {
                let woken = d.changes().notified();
                tokio::select! {
                    _ = woken => {}
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        }
    }
    let bus = cm.devices.bus.clone();
    let key = format!("{namespace}/{name}");
    let opts = objects::delete_options(uid);
    let mut attempt = 0;
    loop {
        match kube::request(&c.api, "DELETE", &pod_path(namespace, name), Some(&opts), CALL).await {
            // 404: gone already; 409: another pod of that name (the precondition failed).
            Ok((200 | 202 | 404 | 409, _)) => break,
            Ok((code, body)) => error(&bus, "deleting a pod", refused(&format!("DELETE pod {key}"), code, &body)),
            Err(e) => error(&bus, "deleting a pod", e),
        }
        tokio::time::sleep(retry_delay(attempt)).await;
        attempt += 1;
    }
    bus.emit(KubeletEvent::ClusterPodDeleted { pod: key, uid: uid.to_string() }, None);
}

/// Write each admitted pod's status when its lifecycle (or its devices' health) changes.
async fn write_status(cm: Arc<ContainerManager>, c: &ClusterSpec, pods: BoundPods, machine: Machine) {
    let mut changes = cm.watch_changes();
    let mut bus = cm.devices.bus.subscribe();
    let events = cm.devices.bus.clone();
    loop {
        let mut retry_at: Option<Instant> = None;
        let health: BTreeMap<String, BTreeMap<String, Vec<Value>>> = cm
            .dra
            .as_ref()
            .map(|d| d.pods().into_iter().map(|p| (p.uid.clone(), p.allocated_resources_status)).collect())
            .unwrap_or_default();
        let views: BTreeMap<String, crate::kubelet::cm::PodView> =
            cm.pod_views().into_iter().map(|v| (v.pod.uid.clone(), v)).collect();
        type Due = (String, String, String, String, Value, Value);
        let due: Vec<Due> = lock(&pods)
            .iter()
            .filter(|(_, b)| b.admitted && !b.deleting)
            .filter_map(|(uid, b)| {
                let v = views.get(uid)?;
                let s = objects::pod_status(v, health.get(uid), &b.spec, &machine, &b.since, &b.scheduled);
                (b.written.as_ref() != Some(&s)).then(|| {
                    let patch = objects::status_patch_from(uid, b.written.as_ref(), &s);
                    (uid.clone(), b.key.clone(), b.namespace.clone(), b.name.clone(), s, patch)
                })
            })
            .collect();
        for (uid, key, namespace, name, status, patch) in due {
            let path = format!("{}/status", pod_path(&namespace, &name));
            match kube::request_as(&c.api, "PATCH", &path, kube::STRATEGIC_MERGE_PATCH, Some(&patch), CALL).await {
                Ok((200, _)) => {
                    let phase = status["phase"].as_str().unwrap_or_default().to_string();
                    if let Some(b) = lock(&pods).get_mut(&uid) {
                        b.written = Some(status);
                    }
                    events.emit(KubeletEvent::ClusterPodStatus { pod: key, uid, phase, reason: None }, None);
                }
                // Gone: the reflector will say.
                Ok((404, _)) => {}
                // A conflict (another writer won, or the UID precondition
                // failed: then the reflector removes the pod): tried again,
                // as the status manager does, so no status is left behind.
                Ok((409, _)) => retry_at = Some(Instant::now() + Duration::from_secs(1)),
                Ok((code, body)) => {
                    error(&events, "writing a pod's status", refused("PATCH pod status", code, &body));
                    retry_at = Some(Instant::now() + Duration::from_secs(1));
                }
                Err(e) => {
                    error(&events, "writing a pod's status", e);
                    retry_at = Some(Instant::now() + Duration::from_secs(1));
                }
            }
        }
        let retry = async {
            match retry_at {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(retry);
        let go_on = loop {
            tokio::select! {
                r = changes.changed() => break r.is_ok(),
                e = bus.recv() => match e {
                    // Health changes reach allocatedResourcesStatus.
                    Some(e) if matches!(e.event, KubeletEvent::DraHealth { .. }) => break true,
                    Some(_) => continue,
                    None => break false,
                },
                _ = &mut retry => break true,
            }
        };
        if !go_on {
            return;
        }
    }
}
