//! The engine's DRA manager: the second plugin kind of the one kubelet.
//! DRA drivers register through the same plugin watcher as device plugins
//! (dispatched on GetInfo's type); several instances of one driver may be
//! registered at once (a rolling update) and calls go to the newest, as
//! the kubelet's DRAPluginManager picks. Pods with `spec.resourceClaims`
//! get their claims allocated ([`objects::allocate`], standing in for the
//! scheduler) and prepared (NodePrepareResources, batched per driver,
//! already-prepared claims skipped) by a worker that retries with a
//! backoff until it succeeds; removing the pod unprepares them the same
//! way (a claim another pod still uses only loses the reference). Every
//! change is written to `<root>/dra_manager_state` ([`checkpoint`]) before
//! it counts, and read back at start, so a restarted kubelet does not call
//! the driver again for claims it has prepared. Prepared CDI IDs are
//! checked against the CDI spec directories. The health stream is
//! followed when the driver advertises it; a device whose last report is
//! older than its timeout counts as Unknown (healthinfo.go). A driver whose
//! every device in a claim skips a node operation (KEP-5945,
//! `skipNodeOperations`) is neither looked up nor called for it. With the
//! local API server, the node's ResourceSlices are wiped at start, and a
//! driver's when none of its instances is registered and connected for the
//! wiping delay (the kubelet's DRAPluginManager). Errors read as the
//! kubelet's (pkg/kubelet/cm/dra/manager.go).

pub mod apiserver;
use crate::client::dra_checkpoint as checkpoint;
pub mod objects;
pub mod protobuf;

use crate::api::dra_v1::Claim;
use crate::api::pluginregistration::PluginInfo;
use crate::client::dra::DraConn;
use crate::kubelet::event::{EventBus, KubeletEvent, RejectStage};
use crate::kubelet::generation::Generation;
use crate::kubelet::manifest::{ClaimSource, Pod};
use crate::protocol::dra as rules;
use objects::{Allocated, Candidate, Object};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The node's name (the local API server's Node, what drivers publish slices for).
pub const NODE_NAME: &str = "dpctl-node";

/// Where the DRA manager keeps and checks things.
#[derive(Debug, Clone)]
pub struct DraSpec {
    /// The kubelet root: the checkpoint goes here; endpoints must be inside it.
    pub root: PathBuf,
    /// CDI spec directories prepared CDI IDs are checked against.
    pub cdi_dirs: Vec<PathBuf>,
    /// The per-call timeout (the kubelet's is 45 s).
    pub call_timeout: Duration,
    /// The first retry delay of a failed prepare or unprepare (doubles up to 16×).
    pub retry: Duration,
    /// The local API server's objects (ResourceSlices drivers publish), when it runs.
    pub api: Option<Arc<apiserver::Store>>,
    /// How long after a driver's last instance went away its ResourceSlices
    /// on this node are deleted (the kubelet's defaultWipingDelay, 30 s; kubernetes#132058).
    pub wipe_delay: Duration,
}

impl DraSpec {
    /// The kubelet's defaults under `root`, CDI specs looked up in `cdi_dirs`.
    pub fn new(root: &Path, cdi_dirs: Vec<PathBuf>) -> Self {
        DraSpec {
            root: root.to_path_buf(),
            cdi_dirs,
            call_timeout: Duration::from_secs(rules::KUBELET_CALL_TIMEOUT_SECS),
            retry: Duration::from_millis(500),
            api: None,
            wipe_delay: Duration::from_secs(30),
        }
    }

    /// The checkpoint file.
    pub fn checkpoint(&self) -> PathBuf {
        self.root.join(checkpoint::NAME)
    }
}

/// One registered instance of a driver.
struct Instance {
    socket: PathBuf,
    endpoint: PathBuf,
    service: &'static str,
    conn: DraConn,
    seq: u64,
    stop: CancellationToken,
    /// Whether its endpoint accepts connections (gRPC's connection state, probed).
    connected: bool,
}

/// One claim the kubelet knows (its ClaimInfo).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// The allocation.
    pub allocation: Vec<Allocated>,
    /// Pods using it.
    pub pods: BTreeSet<String>,
    /// Driver → devices as prepared (None: not prepared yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepared: Option<BTreeMap<String, Vec<checkpoint::Device>>>,
    /// CDI IDs that resolve to no spec file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cdi_unresolved: Vec<String>,
}

impl ClaimInfo {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn drivers(&self) -> BTreeSet<String> {
        self.allocation.iter().map(|a| a.driver.clone()).collect()
    }

    fn claim(&self) -> Claim {
        Claim { namespace: self.namespace.clone(), uid: self.uid.clone(), name: self.name.clone() }
    }

    /// CDI IDs of the prepared devices.
    pub fn cdi_ids(&self) -> Vec<String> {
        self.prepared
            .iter()
            .flat_map(|m| m.values().flatten())
            .flat_map(|d| d.cdi_device_ids.clone().unwrap_or_default())
            .collect()
    }
}

/// A pod's DRA state.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodInfo {
    /// UID.
    pub uid: String,
    /// `namespace/name`.
    pub pod: String,
    /// Pod claim name → claim name (in the pod's namespace).
    pub claims: BTreeMap<String, String>,
    /// Container → the pod claims it uses.
    pub containers: BTreeMap<String, Vec<String>>,
    /// Preparing, Prepared, Unpreparing.
    pub phase: String,
    /// The last error, while retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Container → its containerStatuses[].allocatedResourcesStatus, as the kubelet
    /// fills it from the health stream: `{name: "claim:<pod claim>", resources:
    /// [{resourceID: "<driver>/<pool>/<device>", health}]}` (devices without a report are Unknown).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated_resources_status: BTreeMap<String, Vec<serde_json::Value>>,
    #[serde(skip)]
    namespace: String,
    #[serde(skip)]
    worker: CancellationToken,
}

#[derive(Default)]
struct State {
    plugins: BTreeMap<String, Vec<Instance>>,
    seq: u64,
    objects: BTreeMap<String, Object>,
    /// Driver → (pool, device) → health word, as it counts now (Unknown once
    /// a device's report is older than its timeout).
    health: BTreeMap<String, BTreeMap<(String, String), String>>,
    /// Driver → (pool, device) → the last report of the device.
    reports: BTreeMap<String, BTreeMap<(String, String), Report>>,
    claims: BTreeMap<String, ClaimInfo>,
    pods: BTreeMap<String, PodInfo>,
    /// Driver → the ticket of its pending slice wipe.
    pending_wipes: BTreeMap<String, u64>,
}

/// How often a registered instance's endpoint is probed (the kubelet learns of
/// a dropped connection from gRPC at once; a probe stands in for that).
const PROBE_EVERY: Duration = Duration::from_millis(250);

/// What a change in a driver's instances means for its slices (the kubelet's
/// DRAPluginManager.sync): wipe them later when no instance is connected and
/// no wipe is pending; cancel a pending wipe when one is.
#[derive(Debug, PartialEq, Eq)]
enum WipeDecision {
    Schedule,
    Cancel,
    Nothing,
}

fn wipe_decision(usable: bool, pending: bool) -> WipeDecision {
    match (usable, pending) {
        (true, true) => WipeDecision::Cancel,
        (false, false) => WipeDecision::Schedule,
        _ => WipeDecision::Nothing,
    }
}

/// The kubelet's default health timeout (pkg/kubelet/cm/dra/healthinfo.go,
/// DefaultHealthTimeout): a device reported without `health_check_timeout_seconds`
/// counts as Unknown once its last report is older than this.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// One device's last health report.
#[derive(Debug, Clone, PartialEq)]
struct Report {
    health: String,
    at: tokio::time::Instant,
    timeout: Duration,
}

/// The health each device counts as at `now` (healthinfo.go getHealthInfo:
/// Unknown once `now - lastUpdated > timeout`), and when the next report goes stale.
fn effective_health(
    reports: &BTreeMap<(String, String), Report>,
    now: tokio::time::Instant,
) -> (BTreeMap<(String, String), String>, Option<tokio::time::Instant>) {
    let mut next: Option<tokio::time::Instant> = None;
    let map = reports
        .iter()
        .map(|(k, r)| {
            let stale_at = r.at + r.timeout;
            let word = if now > stale_at {
                "Unknown".to_string()
            } else {
                next = Some(next.map_or(stale_at, |n| n.min(stale_at)));
                r.health.clone()
            };
            (k.clone(), word)
        })
        .collect();
    (map, next)
}

/// A registered driver, as `dpctl node` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriverStatus {
    /// The driver.
    pub driver: String,
    /// Each instance's endpoint (newest last).
    pub endpoints: Vec<String>,
    /// The service calls go to.
    pub service: String,
    /// `pool/device=Health` from its health stream.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<String>,
    /// Names of the ResourceSlices it published to the local API server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<String>,
}

/// The DRA manager of one generation.
pub struct DraManager {
    spec: DraSpec,
    bus: EventBus,
    gen: Generation,
    state: Mutex<State>,
    changed: Notify,
}

/// KEP-5945: the node operations every device of `driver` in the claim's
/// allocation skips (`*` is every one; unknown values are ignored).
pub fn skipped_operations(c: &ClaimInfo, driver: &str) -> BTreeSet<String> {
    const OPS: [&str; 2] = ["NodePrepareResources", "NodeUnprepareResources"];
    let mut sets = c.allocation.iter().filter(|a| a.driver == driver).map(|a| {
        let all = a.skip_node_operations.iter().any(|o| o == "*");
        OPS.iter()
            .filter(|op| all || a.skip_node_operations.iter().any(|o| o == *op))
            .map(|o| o.to_string())
            .collect::<BTreeSet<String>>()
    });
    let Some(first) = sets.next() else { return BTreeSet::new() };
    sets.fold(first, |acc, s| acc.intersection(&s).cloned().collect())
}

/// The allocated devices of `driver` as the checkpoint keeps prepared ones
/// (no CDI IDs: NodePrepareResources was skipped for them).
fn unprepared_devices(c: &ClaimInfo, driver: &str) -> Vec<checkpoint::Device> {
    c.allocation
        .iter()
        .filter(|a| a.driver == driver)
        .map(|a| checkpoint::Device {
            pool_name: a.pool.clone(),
            device_name: a.device.clone(),
            request_names: Some(vec![a.request.clone()]),
            cdi_device_ids: Some(vec![]),
            share_id: None,
        })
        .collect()
}

fn wrap_prepare(e: String) -> String {
    format!("prepare dynamic resources: {e}")
}

fn wrap_unprepare(e: String) -> String {
    format!("unprepare dynamic resources: {e}")
}

/// The name of the claim generated from a template for a pod (the
/// resourceclaim controller adds a random suffix; here it is stable).
pub fn generated_claim_name(pod: &str, pod_claim: &str) -> String {
    format!("{pod}-{pod_claim}")
}

/// The CDI IDs of `ids` that no spec file in `dirs` defines (a CDI ID is
/// `KIND=NAME`, defined by a spec whose `kind` is KIND listing a device NAME).
pub fn unresolved_cdi(dirs: &[PathBuf], ids: &[String]) -> Vec<String> {
    let mut known: BTreeSet<String> = BTreeSet::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let ext = p.extension().map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
            if !["json", "yaml", "yml"].contains(&ext.as_str()) {
                continue;
            }
            let Ok(text) = crate::core::limits::read_file(&p, 1 << 20, "CDI spec") else { continue };
            // A spec the runtime refuses defines nothing (the rulebook says what a spec is).
            known.extend(crate::protocol::cdi::parse_spec(&text, ext != "json").unwrap_or_default());
        }
    }
    ids.iter().filter(|i| !known.contains(*i)).cloned().collect()
}

impl DraManager {
    /// A manager for generation `gen`.
    pub fn new(spec: DraSpec, bus: EventBus, gen: Generation) -> Arc<Self> {
        Arc::new(DraManager { spec, bus, gen, state: Mutex::new(State::default()), changed: Notify::new() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn event(&self, e: KubeletEvent) {
        self.bus.emit(e, Some(self.gen.number));
    }

    /// Read the checkpoint (at start): prepared claims and the pods using them.
    pub fn restore(&self) {
        let path = self.spec.checkpoint();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                let error = e.to_string();
                self.event(KubeletEvent::DraCheckpointError { path: path.display().to_string(), error });
                return;
            }
        };
        match checkpoint::decode(&bytes) {
            Err(e) => {
                self.event(KubeletEvent::DraCheckpointError { path: path.display().to_string(), error: e.to_string() })
            }
            Ok(entries) => {
                let mut st = self.lock();
                for e in &entries {
                    let mut allocation = Vec::new();
                    for (driver, ds) in &e.driver_state {
                        for d in ds.devices.iter().flatten() {
                            let request = d.request_names.clone().unwrap_or_default().join(",");
                            allocation.push(Allocated {
                                request,
                                driver: driver.clone(),
                                pool: d.pool_name.clone(),
                                device: d.device_name.clone(),
                                admin: false,
                                skip_node_operations: ds.skip_node_operations.clone().unwrap_or_default(),
                            });
                        }
                    }
                    let info = ClaimInfo {
                        namespace: e.namespace.clone(),
                        name: e.claim_name.clone(),
                        uid: e.claim_uid.clone(),
                        allocation,
                        pods: e.pod_uids.keys().cloned().collect(),
                        prepared: Some(
                            e.driver_state
                                .iter()
                                .map(|(k, v)| (k.clone(), v.devices.clone().unwrap_or_default()))
                                .collect(),
                        ),
                        cdi_unresolved: vec![],
                    };
                    st.claims.insert(info.key(), info);
                }
                drop(st);
                self.event(KubeletEvent::DraCheckpointRestored {
                    path: path.display().to_string(),
                    claims: entries.len(),
                });
            }
        }
    }

    /// Write the checkpoint from `st` (prepared claims only, as the kubelet's cache syncs).
    fn store(&self, st: &State) -> Result<(), String> {
        let entries: Vec<checkpoint::Entry> = st
            .claims
            .values()
            .filter_map(|c| {
                let prepared = c.prepared.as_ref()?;
                Some(checkpoint::Entry {
                    claim_uid: c.uid.clone(),
                    claim_name: c.name.clone(),
                    namespace: c.namespace.clone(),
                    pod_uids: c.pods.iter().map(|p| (p.clone(), Default::default())).collect(),
                    driver_state: prepared
                        .iter()
                        .map(|(d, devs)| {
                            let skip: Vec<String> = skipped_operations(c, d).into_iter().collect();
                            let state = checkpoint::DriverState {
                                devices: Some(devs.clone()),
                                skip_node_operations: (!skip.is_empty()).then_some(skip),
                            };
                            (d.clone(), state)
                        })
                        .collect(),
                })
            })
            .collect();
        let path = self.spec.checkpoint();
        crate::core::files::write_atomic(&path, &checkpoint::encode(&entries))
            .map_err(|e| format!("checkpoint ResourceClaim state: {}: {e}", path.display()))
    }

    /// Register one driver instance (the plugin watcher found `socket`,
    /// whose GetInfo said `info`; `endpoint` is where the engine dials it).
    pub async fn register(
        self: &Arc<Self>,
        socket: &Path,
        info: &PluginInfo,
        endpoint: &Path,
    ) -> Result<(), (RejectStage, String)> {
        let fails: Vec<String> = rules::info_violations(info, &self.spec.root)
            .into_iter()
            .filter(|v| v.rule.is_fail())
            .map(|v| v.text)
            .collect();
        if !fails.is_empty() {
            // The kubelet's texts (dra_plugin_manager.go ValidatePlugin).
            return Err((
                RejectStage::Validation,
                format!("invalid DRA driver plugin {} at endpoint {}: {}", info.name, info.endpoint, fails.join("; ")),
            ));
        }
        let Some(service) = rules::chosen_service(&info.supported_versions) else {
            return Err((RejectStage::Validation, "no supported DRAPlugin service".into()));
        };
        let conn = DraConn::connect(endpoint, self.spec.call_timeout)
            .await
            .map_err(|e| (RejectStage::DialBack, e.to_string()))?;
        let health = rules::chosen_health(&info.supported_versions);
        let stop = self.gen.token.child_token();
        let instances = {
            let mut st = self.lock();
            st.seq += 1;
            let seq = st.seq;
            let list = st.plugins.entry(info.name.clone()).or_default();
            // The same registration socket again replaces its instance.
            if let Some(old) = list.iter().position(|i| i.socket == socket) {
                list.remove(old).stop.cancel();
            }
            list.push(Instance {
                socket: socket.to_path_buf(),
                endpoint: endpoint.to_path_buf(),
                service,
                conn: conn.clone(),
                seq,
                stop: stop.clone(),
                connected: true,
            });
            list.len()
        };
        self.sync_wipe(&info.name);
        {
            let (me, driver, endpoint, socket) =
                (self.clone(), info.name.clone(), endpoint.to_path_buf(), socket.to_path_buf());
            let stop = stop.clone();
            self.gen.spawn(async move {
                stop.run_until_cancelled_owned(me.probe(driver, socket, endpoint)).await;
            });
        }
        self.event(KubeletEvent::DraRegistered {
            driver: info.name.clone(),
            socket: socket.display().to_string(),
            endpoint: endpoint.display().to_string(),
            service: service.to_string(),
            health: health.map(str::to_string),
            instances,
        });
        if let Some(h) = health {
            let me = self.clone();
            let driver = info.name.clone();
            self.gen.spawn(async move {
                stop.run_until_cancelled_owned(me.follow_health(driver, conn, h)).await;
            });
        }
        self.changed.notify_waiters();
        Ok(())
    }

    /// The instance registered through `socket` went away (socket deleted or re-created).
    pub fn deregister_socket(self: &Arc<Self>, socket: &Path) {
        let mut gone = None;
        {
            let mut st = self.lock();
            for (driver, list) in st.plugins.iter_mut() {
                if let Some(i) = list.iter().position(|i| i.socket == socket) {
                    let inst = list.remove(i);
                    inst.stop.cancel();
                    gone = Some((driver.clone(), inst.endpoint.display().to_string(), list.len()));
                    break;
                }
            }
            if let Some((d, _, 0)) = &gone {
                st.plugins.remove(d);
                st.health.remove(d);
                st.reports.remove(d);
            }
        }
        if let Some((driver, endpoint, instances)) = gone {
            self.event(KubeletEvent::DraDeregistered { driver: driver.clone(), endpoint, instances });
            self.sync_wipe(&driver);
        }
    }

    /// Follow whether the instance's endpoint accepts connections; a change syncs the wipe.
    async fn probe(self: Arc<Self>, driver: String, socket: PathBuf, endpoint: PathBuf) {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            let up = matches!(
                tokio::time::timeout(Duration::from_secs(1), tokio::net::UnixStream::connect(&endpoint)).await,
                Ok(Ok(_))
            );
            let changed = {
                let mut st = self.lock();
                let inst = st.plugins.get_mut(&driver).and_then(|l| l.iter_mut().find(|i| i.socket == socket));
                match inst {
                    Some(i) if i.connected != up => {
                        i.connected = up;
                        true
                    }
                    _ => false,
                }
            };
            if changed {
                self.event(KubeletEvent::DraConnection {
                    driver: driver.clone(),
                    endpoint: endpoint.display().to_string(),
                    connected: up,
                });
                self.sync_wipe(&driver);
            }
        }
    }

    /// The kubelet's sync: a driver with no connected instance gets its
    /// slices wiped after the delay; one that is usable again cancels that.
    fn sync_wipe(self: &Arc<Self>, driver: &str) {
        let Some(store) = self.spec.api.clone() else { return };
        let ticket = {
            let mut st = self.lock();
            let usable = st.plugins.get(driver).is_some_and(|l| l.iter().any(|i| i.connected));
            match wipe_decision(usable, st.pending_wipes.contains_key(driver)) {
                WipeDecision::Cancel => {
                    st.pending_wipes.remove(driver);
                    return;
                }
                WipeDecision::Nothing => return,
                WipeDecision::Schedule => {
                    st.seq += 1;
                    let t = st.seq;
                    st.pending_wipes.insert(driver.to_string(), t);
                    t
                }
            }
        };
        let (me, driver) = (self.clone(), driver.to_string());
        self.gen.spawn(async move {
            tokio::time::sleep(me.spec.wipe_delay).await;
            if me.lock().pending_wipes.get(&driver) != Some(&ticket) {
                return;
            }
            me.lock().pending_wipes.remove(&driver);
            let slices = store.wipe(&driver, NODE_NAME);
            if !slices.is_empty() {
                me.event(KubeletEvent::DraSlicesWiped { driver, slices });
            }
        });
    }

    /// At start, before the plugin watcher runs: delete every ResourceSlice
    /// of this node (all drivers, no delay), as the kubelet's DRA plugin
    /// manager does when it starts (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go,
    /// NewDRAPluginManager: `wipeResourceSlices(ctx, "" /* all drivers */)`).
    /// Drivers that are still running publish again (the kubeletplugin
    /// helper's slice controller sees the deletion).
    pub fn wipe_at_start(&self) {
        let Some(store) = &self.spec.api else { return };
        let slices = store.wipe_node(NODE_NAME);
        if !slices.is_empty() {
            self.event(KubeletEvent::DraNodeSlicesWiped { node: NODE_NAME.into(), slices });
        }
    }

    async fn follow_health(self: Arc<Self>, driver: String, conn: DraConn, service: &'static str) {
        loop {
            if let Ok(mut s) = conn.health(service).await {
                loop {
                    let stale = self.refresh_health(&driver);
                    let got = tokio::select! {
                        r = s.next(conn.socket()) => Some(r),
                        _ = async { match stale {
                            Some(t) => tokio::time::sleep_until(t + Duration::from_millis(1)).await,
                            None => std::future::pending().await,
                        } } => None,
                    };
                    match got {
                        Some(Ok(Some(snap))) => self.health_report(&driver, &snap),
                        Some(_) => break,
                        None => {}
                    }
                }
            }
            // The kubelet reconnects after a stream ends.
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.refresh_health(&driver);
        }
    }

    /// Record one snapshot of the driver's health stream: every device in it
    /// reported now; devices left out keep their last report (they go
    /// Unknown when it is older than its timeout, healthinfo.go updateHealthInfo).
    fn health_report(&self, driver: &str, snap: &[crate::api::dra_health_v1::DeviceHealth]) {
        let now = tokio::time::Instant::now();
        let mut st = self.lock();
        let reports = st.reports.entry(driver.to_string()).or_default();
        for d in snap {
            let Some(id) = d.device.as_ref() else { continue };
            let timeout = u64::try_from(d.health_check_timeout_seconds)
                .ok()
                .filter(|s| *s > 0)
                .map_or(DEFAULT_HEALTH_TIMEOUT, Duration::from_secs);
            let r = Report { health: rules::health_word(d.health).to_string(), at: now, timeout };
            reports.insert((id.pool_name.clone(), id.device_name.clone()), r);
        }
    }

    /// Recompute the health the driver's devices count as now; an event when
    /// it changed. When the next report goes stale.
    fn refresh_health(&self, driver: &str) -> Option<tokio::time::Instant> {
        let (map, next, changed) = {
            let mut st = self.lock();
            let reports = st.reports.get(driver)?;
            let (map, next) = effective_health(reports, tokio::time::Instant::now());
            let old = st.health.insert(driver.to_string(), map.clone());
            let changed = old.as_ref() != Some(&map);
            (map, next, changed)
        };
        if changed {
            let devices = map.iter().map(|((p, d), h)| format!("{p}/{d}={h}")).collect();
            self.event(KubeletEvent::DraHealth { driver: driver.to_string(), devices });
            self.changed.notify_waiters();
        }
        next
    }

    /// A DRA object manifest was read (or changed).
    pub fn put_object(&self, obj: Object, file: &Path) {
        let key = obj.key();
        self.lock().objects.insert(key.clone(), obj);
        self.event(KubeletEvent::DraObject { key, file: file.display().to_string() });
        self.changed.notify_waiters();
    }

    /// A DRA object manifest went away.
    pub fn forget_object(&self, key: &str) {
        self.lock().objects.remove(key);
    }

    fn candidates(&self, st: &State) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = Vec::new();
        let published: Vec<Object> = self
            .spec
            .api
            .iter()
            .flat_map(|a| a.slices())
            .filter_map(|mut v| {
                v["kind"] = serde_json::json!("ResourceSlice");
                objects::parse(&v).ok()
            })
            .collect();
        for o in st.objects.values().chain(&published) {
            if let Object::Slice { driver, pool, devices, skip, .. } = o {
                for d in devices {
                    out.push(Candidate {
                        driver: driver.clone(),
                        pool: pool.clone(),
                        device: d.name.clone(),
                        attributes: d.attributes.clone(),
                        skip: skip.clone(),
                    });
                }
            }
        }
        for (driver, devs) in &st.health {
            for (pool, device) in devs.keys() {
                if !out.iter().any(|c| &c.driver == driver && &c.pool == pool && &c.device == device) {
                    out.push(Candidate {
                        driver: driver.clone(),
                        pool: pool.clone(),
                        device: device.clone(),
                        attributes: BTreeMap::new(),
                        skip: vec![],
                    });
                }
            }
        }
        out
    }

    /// A pod was admitted: prepare its claims (in the background, retried until done).
    pub fn pod_added(self: &Arc<Self>, pod: &Pod) {
        if pod.resource_claims.is_empty() {
            return;
        }
        let claims = pod
            .resource_claims
            .iter()
            .map(|c| {
                let name = match &c.source {
                    ClaimSource::Claim(n) => n.clone(),
                    ClaimSource::Template(_) => generated_claim_name(&pod.name, &c.name),
                };
                (c.name.clone(), name)
            })
            .collect();
        let containers = pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .filter(|c| !c.claims.is_empty())
            .map(|c| (c.name.clone(), c.claims.clone()))
            .collect();
        let worker = self.gen.token.child_token();
        let info = PodInfo {
            uid: pod.uid.clone(),
            pod: pod.key(),
            claims,
            containers,
            phase: "Preparing".into(),
            error: None,
            allocated_resources_status: BTreeMap::new(),
            namespace: pod.namespace.clone(),
            worker: worker.clone(),
        };
        {
            let mut st = self.lock();
            if let Some(old) = st.pods.insert(pod.uid.clone(), info) {
                old.worker.cancel();
            }
        }
        let me = self.clone();
        let uid = pod.uid.clone();
        let pod_templates: BTreeMap<String, String> = pod
            .resource_claims
            .iter()
            .filter_map(|c| match &c.source {
                ClaimSource::Template(t) => Some((c.name.clone(), t.clone())),
                _ => None,
            })
            .collect();
        self.gen.spawn(async move {
            let work = me.retry("prepare", &uid, |m, u| {
                let t = pod_templates.clone();
                async move { m.prepare_pod(&u, &t).await }
            });
            worker.run_until_cancelled(work).await;
        });
    }

    /// Run `op` until it succeeds, with the kubelet's doubling backoff, waking
    /// early when a driver registers or an object arrives.
    async fn retry<F, Fut>(self: &Arc<Self>, what: &str, uid: &str, op: F)
    where
        F: Fn(Arc<Self>, String) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let mut attempt = 0u32;
        let mut delay = self.spec.retry;
        loop {
            attempt += 1;
            let woken = self.changed.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let r = op(self.clone(), uid.to_string()).await;
            let pod = {
                let mut st = self.lock();
                let Some(p) = st.pods.get_mut(uid) else { return };
                match &r {
                    Ok(()) => {
                        p.error = None;
                        if what == "prepare" {
                            p.phase = "Prepared".into();
                        }
                    }
                    Err(e) => p.error = Some(e.clone()),
                }
                p.pod.clone()
            };
            match r {
                Ok(()) => {
                    if what == "unprepare" {
                        self.lock().pods.remove(uid);
                    }
                    return;
                }
                Err(error) => {
                    let e = if what == "prepare" {
                        KubeletEvent::ClaimPrepareFailed { pod, error, attempt }
                    } else {
                        KubeletEvent::ClaimUnprepareFailed { pod, error, attempt }
                    };
                    self.event(e);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = woken => {}
            }
            delay = (delay * 2).min(self.spec.retry * 16);
        }
    }

    /// Allocate a pod's claim (from its ResourceClaim or its template) and
    /// record it: the mock scheduler's part.
    fn allocate_claim(
        &self,
        st: &mut State,
        p: &PodInfo,
        uid: &str,
        pod_claim: &str,
        name: &str,
        templates: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        let key = format!("{}/{name}", p.namespace);
        let (spec, claim_uid) = match templates.get(pod_claim) {
            Some(t) => {
                let tk = format!("ResourceClaimTemplate {}/{t}", p.namespace);
                let Some(Object::Template { spec, .. }) = st.objects.get(&tk) else {
                    return Err(wrap_prepare(format!(
                        "fetch ResourceClaimTemplate {t}: resourceclaimtemplates.resource.k8s.io {t:?} not found"
                    )));
                };
                (spec.clone(), objects::derived_uid(&format!("generated\0{uid}\0{key}")))
            }
            None => {
                let ck = format!("ResourceClaim {key}");
                let Some(Object::Claim { spec, uid: cu, .. }) = st.objects.get(&ck) else {
                    return Err(wrap_prepare(format!(
                        "fetch ResourceClaim {name}: resourceclaims.resource.k8s.io {name:?} not found"
                    )));
                };
                (spec.clone(), cu.clone())
            }
        };
        let classes: BTreeMap<String, Vec<objects::Selector>> = st
            .objects
            .values()
            .filter_map(|o| match o {
                Object::Class { name, selectors } => Some((name.clone(), selectors.clone())),
                _ => None,
            })
            .collect();
        let taken: BTreeSet<(String, String, String)> = st
            .claims
            .values()
            .flat_map(|c| &c.allocation)
            .filter(|a| !a.admin)
            .map(|a| (a.driver.clone(), a.pool.clone(), a.device.clone()))
            .collect();
        let drivers: BTreeSet<String> = st.plugins.keys().cloned().collect();
        let allocation = objects::allocate(&key, &spec, &classes, &self.candidates(st), &taken, &drivers)
            .map_err(|e| wrap_prepare(format!("ResourceClaim {name} is not allocated: {e}")))?;
        let info = ClaimInfo {
            namespace: p.namespace.clone(),
            name: name.to_string(),
            uid: claim_uid.clone(),
            allocation: allocation.clone(),
            pods: BTreeSet::new(),
            prepared: None,
            cdi_unresolved: vec![],
        };
        st.claims.insert(key.clone(), info);
        self.event(KubeletEvent::ClaimAllocated {
            claim: key.clone(),
            uid: claim_uid,
            devices: allocation.iter().map(|a| format!("{}/{}/{}", a.driver, a.pool, a.device)).collect(),
        });
        Ok(())
    }

    /// One attempt at preparing a pod's claims (manager.go prepareResources).
    async fn prepare_pod(self: &Arc<Self>, uid: &str, templates: &BTreeMap<String, String>) -> Result<(), String> {
        // Resolve, allocate and batch under the lock; call without it.
        let mut batches: BTreeMap<String, (DraConn, &'static str, Vec<Claim>)> = BTreeMap::new();
        let pod_key;
        let mut cached = Vec::new();
        let mut skipped: Vec<(String, String, Vec<checkpoint::Device>)> = Vec::new();
        {
            let mut st = self.lock();
            let Some(p) = st.pods.get(uid).cloned() else { return Ok(()) };
            pod_key = p.pod.clone();
            for (pod_claim, name) in &p.claims {
                let key = format!("{}/{name}", p.namespace);
                if !st.claims.contains_key(&key) {
                    self.allocate_claim(&mut st, &p, uid, pod_claim, name, templates)?;
                }
                let Some(c) = st.claims.get(&key).cloned() else { continue };
                if c.prepared.is_some() {
                    // Already prepared (by another pod, or before a restart): no call.
                    if let Some(ci) = st.claims.get_mut(&key) {
                        ci.pods.insert(uid.to_string());
                    }
                    cached.push(key.clone());
                    continue;
                }
                for driver in c.drivers() {
                    if skipped_operations(&c, &driver).contains("NodePrepareResources") {
                        // No driver lookup, no call: the allocated devices count as prepared.
                        skipped.push((c.uid.clone(), driver.clone(), unprepared_devices(&c, &driver)));
                        self.event(KubeletEvent::DraOperationSkipped {
                            claim: key.clone(),
                            driver: driver.clone(),
                            operation: "NodePrepareResources".into(),
                        });
                        continue;
                    }
                    let inst = st.plugins.get(&driver).and_then(|l| l.iter().max_by_key(|i| i.seq));
                    let Some(inst) = inst else {
                        return Err(wrap_prepare(format!("DRA driver {driver} is not registered")));
                    };
                    let b = batches.entry(driver.clone()).or_insert((inst.conn.clone(), inst.service, vec![]));
                    b.2.push(c.claim());
                }
            }
            if !cached.is_empty() {
                self.store(&st).map_err(wrap_prepare)?;
            }
        }
        for key in &cached {
            let c = self.lock().claims.get(key).cloned();
            if let Some(c) = c {
                self.event(KubeletEvent::ClaimPrepared {
                    pod: pod_key.clone(),
                    claim: key.clone(),
                    uid: c.uid.clone(),
                    devices: device_words(&c),
                    cdi_ids: c.cdi_ids(),
                    cached: true,
                });
            }
        }
        let mut results: BTreeMap<String, BTreeMap<String, Vec<checkpoint::Device>>> = BTreeMap::new();
        for (claim_uid, driver, devs) in skipped {
            results.entry(claim_uid).or_default().insert(driver, devs);
        }
        for (driver, (conn, service, claims)) in batches {
            let resp = conn
                .prepare(service, claims.clone())
                .await
                .map_err(|e| wrap_prepare(format!("NodePrepareResources: {e}")))?;
            for (claim_uid, r) in &resp.claims {
                let Some(req) = claims.iter().find(|c| &c.uid == claim_uid) else {
                    return Err(wrap_prepare(format!(
                        "NodePrepareResources returned result for unknown claim UID {claim_uid}"
                    )));
                };
                if !r.error.is_empty() {
                    return Err(wrap_prepare(format!(
                        "NodePrepareResources failed for ResourceClaim {}: {}",
                        req.name, r.error
                    )));
                }
                let devs = r
                    .devices
                    .iter()
                    .map(|d| checkpoint::Device {
                        pool_name: d.pool_name.clone(),
                        device_name: d.device_name.clone(),
                        request_names: Some(d.request_names.clone()),
                        cdi_device_ids: Some(d.cdi_device_ids.clone()),
                        share_id: None,
                    })
                    .collect();
                results.entry(claim_uid.clone()).or_default().insert(driver.clone(), devs);
            }
            let unfinished = claims.len().saturating_sub(resp.claims.len());
            if unfinished != 0 {
                return Err(wrap_prepare(format!("NodePrepareResources skipped {unfinished} ResourceClaims")));
            }
        }
        let mut done = Vec::new();
        {
            let mut st = self.lock();
            for c in st.claims.values_mut() {
                if let Some(r) = results.remove(&c.uid) {
                    c.prepared = Some(r);
                    c.pods.insert(uid.to_string());
                    c.cdi_unresolved = unresolved_cdi(&self.spec.cdi_dirs, &c.cdi_ids());
                    done.push(c.clone());
                }
            }
            self.store(&st).map_err(wrap_prepare)?;
        }
        for c in done {
            for id in &c.cdi_unresolved {
                self.event(KubeletEvent::CdiUnresolved { claim: c.key(), cdi_id: id.clone() });
            }
            self.event(KubeletEvent::ClaimPrepared {
                pod: pod_key.clone(),
                claim: c.key(),
                uid: c.uid.clone(),
                devices: device_words(&c),
                cdi_ids: c.cdi_ids(),
                cached: false,
            });
        }
        Ok(())
    }

    /// After the first manifest scan of a (re)start: claims the checkpoint
    /// holds for pods that did not come back are unprepared, as the kubelet's
    /// pod cleanup does for pods gone while it was down.
    pub fn unprepare_orphans(self: &Arc<Self>) {
        let orphans: Vec<String> = {
            let mut st = self.lock();
            let known: BTreeSet<String> = st.pods.keys().cloned().collect();
            let mut orphans: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
            let mut namespaces: BTreeMap<String, String> = BTreeMap::new();
            for c in st.claims.values() {
                for p in c.pods.iter().filter(|p| !known.contains(*p)) {
                    orphans.entry(p.clone()).or_default().insert(c.name.clone(), c.name.clone());
                    namespaces.insert(p.clone(), c.namespace.clone());
                }
            }
            for (uid, claims) in &orphans {
                let namespace = namespaces.get(uid).cloned().unwrap_or_default();
                st.pods.insert(
                    uid.clone(),
                    PodInfo {
                        uid: uid.clone(),
                        pod: format!("{namespace}/(gone, uid {uid})"),
                        claims: claims.clone(),
                        containers: BTreeMap::new(),
                        phase: "Unpreparing".into(),
                        error: None,
                        allocated_resources_status: BTreeMap::new(),
                        namespace,
                        worker: self.gen.token.child_token(),
                    },
                );
            }
            orphans.into_keys().collect()
        };
        for uid in orphans {
            self.pod_removed(&uid);
        }
    }

    /// A pod was removed: unprepare its claims (in the background, retried until done).
    pub fn pod_removed(self: &Arc<Self>, uid: &str) {
        let worker = {
            let mut st = self.lock();
            let Some(p) = st.pods.get_mut(uid) else { return };
            p.worker.cancel();
            p.phase = "Unpreparing".into();
            p.worker = self.gen.token.child_token();
            p.worker.clone()
        };
        let me = self.clone();
        let uid = uid.to_string();
        self.gen.spawn(async move {
            let work = me.retry("unprepare", &uid, |m, u| async move { m.unprepare_pod(&u).await });
            worker.run_until_cancelled(work).await;
        });
    }

    /// One attempt at unpreparing a pod's claims (manager.go unprepareResources).
    async fn unprepare_pod(self: &Arc<Self>, uid: &str) -> Result<(), String> {
        let mut batches: BTreeMap<String, Vec<Claim>> = BTreeMap::new();
        let mut shared = Vec::new();
        let mut to_remove = Vec::new();
        let mut skipped_unprepare = Vec::new();
        let pod_key;
        {
            let mut st = self.lock();
            let Some(p) = st.pods.get(uid).cloned() else { return Ok(()) };
            pod_key = p.pod.clone();
            for name in p.claims.values() {
                let key = format!("{}/{name}", p.namespace);
                let Some(c) = st.claims.get_mut(&key) else { continue };
                if c.pods.len() > 1 || (!c.pods.contains(uid) && !c.pods.is_empty()) {
                    c.pods.remove(uid);
                    shared.push((key, c.uid.clone()));
                    continue;
                }
                if c.prepared.is_some() {
                    for d in c.drivers() {
                        if skipped_operations(c, &d).contains("NodeUnprepareResources") {
                            skipped_unprepare.push((key.clone(), d));
                            continue;
                        }
                        batches.entry(d).or_default().push(c.claim());
                    }
                }
                to_remove.push(key);
            }
        }
        for (claim, driver) in skipped_unprepare {
            self.event(KubeletEvent::DraOperationSkipped { claim, driver, operation: "NodeUnprepareResources".into() });
        }
        for (driver, claims) in batches {
            let conn = {
                let st = self.lock();
                st.plugins
                    .get(&driver)
                    .and_then(|l| l.iter().max_by_key(|i| i.seq))
                    .map(|i| (i.conn.clone(), i.service))
            };
            let Some((conn, service)) = conn else {
                return Err(wrap_unprepare(format!("DRA driver {driver} is not registered")));
            };
            let resp = conn
                .unprepare(service, claims.clone())
                .await
                .map_err(|e| wrap_unprepare(format!("NodeUnprepareResources: {e}")))?;
            for (claim_uid, r) in &resp.claims {
                let Some(req) = claims.iter().find(|c| &c.uid == claim_uid) else {
                    return Err(wrap_unprepare(format!(
                        "NodeUnprepareResources returned result for unknown claim UID {claim_uid}"
                    )));
                };
                if !r.error.is_empty() {
                    return Err(wrap_unprepare(format!(
                        "NodeUnprepareResources failed for ResourceClaim {}: {}",
                        req.name, r.error
                    )));
                }
            }
            let unfinished = claims.len().saturating_sub(resp.claims.len());
            if unfinished != 0 {
                return Err(wrap_unprepare(format!("NodeUnprepareResources skipped {unfinished} ResourceClaims")));
            }
        }
        let mut removed = Vec::new();
        {
            let mut st = self.lock();
            for k in &to_remove {
                if let Some(c) = st.claims.remove(k) {
                    removed.push(c);
                }
            }
            self.store(&st).map_err(wrap_unprepare)?;
        }
        for (claim, uid) in shared {
            self.event(KubeletEvent::ClaimUnprepared { pod: pod_key.clone(), claim, uid, still_used: true });
        }
        for c in removed {
            self.event(KubeletEvent::ClaimUnprepared {
                pod: pod_key.clone(),
                claim: c.key(),
                uid: c.uid,
                still_used: false,
            });
        }
        Ok(())
    }

    /// The claims this manager holds as resource.k8s.io objects (what the
    /// local API server serves), with `status.allocation` and `reservedFor`.
    pub fn claim_objects(&self) -> Vec<serde_json::Value> {
        use serde_json::json;
        let pods = self.pods();
        self.claims()
        .into_iter()
        .map(|c| {
            let reserved: Vec<serde_json::Value> = c
                .pods
                .iter()
                .map(|uid| {
                    let name = pods.iter().find(|p| &p.uid == uid).map(|p| p.pod.rsplit('/').next().unwrap_or("").to_string()).unwrap_or_default();
                    json!({"resource": "pods", "name": name, "uid": uid})
                })
                .collect();
            json!({
                "kind": "ResourceClaim",
                "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid, "resourceVersion": "1"},
                "spec": {"devices": {"requests": c.allocation.iter().map(|a| a.request.split('/').next().unwrap_or_default().to_string()).collect::<std::collections::BTreeSet<_>>().into_iter().map(|r| json!({"name": r})).collect::<Vec<_>>()}},
                "status": {
                    "allocation": {"devices": {"results": c.allocation.iter().map(|a| {
                        let mut r = json!({"request": a.request, "driver": a.driver, "pool": a.pool, "device": a.device});
                        if a.admin { r["adminAccess"] = json!(true); }
                        if !a.skip_node_operations.is_empty() { r["skipNodeOperations"] = json!(a.skip_node_operations); }
                        r
                    }).collect::<Vec<_>>()}},
                    "reservedFor": reserved,
                }
            })
        })
        .collect()
    }

    /// Known claims.
    pub fn claims(&self) -> Vec<ClaimInfo> {
        self.lock().claims.values().cloned().collect()
    }

    /// Pods with claims, each container's allocatedResourcesStatus filled.
    pub fn pods(&self) -> Vec<PodInfo> {
        let st = self.lock();
        st.pods
            .values()
            .map(|p| {
                let mut p = p.clone();
                for (ctr, used) in &p.containers {
                    let mut list = Vec::new();
                    for pc in used {
                        let Some(c) = p.claims.get(pc).and_then(|n| st.claims.get(&format!("{}/{n}", p.namespace)))
                        else {
                            continue;
                        };
                        let resources: Vec<serde_json::Value> = c
                            .allocation
                            .iter()
                            .map(|a| {
                                let health = st
                                    .health
                                    .get(&a.driver)
                                    .and_then(|m| m.get(&(a.pool.clone(), a.device.clone())))
                                    .cloned()
                                    .unwrap_or_else(|| "Unknown".into());
                                serde_json::json!({"resourceID": format!("{}/{}/{}", a.driver, a.pool, a.device), "health": health})
                            })
                            .collect();
                        list.push(serde_json::json!({"name": format!("claim:{pc}"), "resources": resources}));
                    }
                    if !list.is_empty() {
                        p.allocated_resources_status.insert(ctr.clone(), list);
                    }
                }
                p
            })
            .collect()
    }

    /// Registered drivers.
    pub fn drivers(&self) -> Vec<DriverStatus> {
        let published: Vec<serde_json::Value> = self.spec.api.iter().flat_map(|a| a.slices()).collect();
        let st = self.lock();
        st.plugins
            .iter()
            .map(|(d, list)| {
                let mut l: Vec<&Instance> = list.iter().collect();
                l.sort_by_key(|i| i.seq);
                DriverStatus {
                    driver: d.clone(),
                    endpoints: l.iter().map(|i| i.endpoint.display().to_string()).collect(),
                    service: l.last().map(|i| i.service.to_string()).unwrap_or_default(),
                    health: st
                        .health
                        .get(d)
                        .map(|m| m.iter().map(|((p, n), h)| format!("{p}/{n}={h}")).collect())
                        .unwrap_or_default(),
                    slices: published
                        .iter()
                        .filter(|s| s["spec"]["driver"] == d.as_str())
                        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string))
                        .collect(),
                }
            })
            .collect()
    }

    /// PodResources' dynamic_resources for one container of pod `uid`:
    /// each prepared claim the container uses, each device with its CDI IDs.
    pub fn dynamic_resources(&self, uid: &str, container: &str) -> Vec<crate::api::podresources::DynamicResource> {
        use crate::api::podresources::{CdiDevice, ClaimResource, DynamicResource};
        let st = self.lock();
        let Some(p) = st.pods.get(uid) else { return vec![] };
        let Some(used) = p.containers.get(container) else { return vec![] };
        used.iter()
            .filter_map(|pc| p.claims.get(pc))
            .filter_map(|name| st.claims.get(&format!("{}/{name}", p.namespace)))
            .filter_map(|c| {
                let prepared = c.prepared.as_ref()?;
                Some(DynamicResource {
                    claim_name: c.name.clone(),
                    claim_namespace: c.namespace.clone(),
                    claim_resources: prepared
                        .iter()
                        .flat_map(|(driver, devs)| {
                            devs.iter().map(move |d| ClaimResource {
                                cdi_devices: d
                                    .cdi_device_ids
                                    .iter()
                                    .flatten()
                                    .map(|n| CdiDevice { name: n.clone() })
                                    .collect(),
                                driver_name: driver.clone(),
                                pool_name: d.pool_name.clone(),
                                device_name: d.device_name.clone(),
                                ..Default::default()
                            })
                        })
                        .collect(),
                })
            })
            .collect()
    }
}

fn device_words(c: &ClaimInfo) -> Vec<String> {
    c.prepared
        .iter()
        .flat_map(|m| m.iter())
        .flat_map(|(d, devs)| devs.iter().map(move |x| format!("{d}/{}/{}", x.pool_name, x.device_name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdi_ids_resolve_against_spec_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("a.json"),
            r#"{"cdiVersion":"0.6.0","kind":"k8s.gpu.x/claim","devices":[{"name":"u-g0","containerEdits":{}}]}"#,
        )
        .unwrap();
        std::fs::write(d.path().join("b.yaml"), "cdiVersion: 0.6.0\nkind: v.x/c\ndevices:\n- name: n\n").unwrap();
        // A spec the runtime refuses (no cdiVersion) defines nothing.
        std::fs::write(d.path().join("c.yaml"), "kind: v.x/d\ndevices:\n- name: n\n").unwrap();
        let ids = vec!["k8s.gpu.x/claim=u-g0".to_string(), "v.x/c=n".into(), "k8s.gpu.x/claim=gone".into()];
        assert_eq!(unresolved_cdi(&[d.path().to_path_buf()], &ids), ["k8s.gpu.x/claim=gone"]);
        assert_eq!(unresolved_cdi(&[d.path().to_path_buf()], &["v.x/d=n".into()]), ["v.x/d=n"]);
        assert_eq!(unresolved_cdi(&[], &ids).len(), 3);
    }

    #[test]
    fn a_report_older_than_its_timeout_counts_as_unknown() {
        let t0 = tokio::time::Instant::now();
        let key = |d: &str| ("p".to_string(), d.to_string());
        let mut reports = BTreeMap::new();
        reports.insert(key("a"), Report { health: "Healthy".into(), at: t0, timeout: Duration::from_secs(1) });
        reports.insert(key("b"), Report { health: "Unhealthy".into(), at: t0, timeout: DEFAULT_HEALTH_TIMEOUT });
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(500));
        assert_eq!((m[&key("a")].as_str(), m[&key("b")].as_str()), ("Healthy", "Unhealthy"));
        assert_eq!(next, Some(t0 + Duration::from_secs(1)), "the earliest report to go stale");
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(1001));
        assert_eq!((m[&key("a")].as_str(), m[&key("b")].as_str()), ("Unknown", "Unhealthy"));
        assert_eq!(next, Some(t0 + Duration::from_secs(30)));
        let (m, next) = effective_health(&reports, t0 + Duration::from_secs(31));
        assert_eq!(m[&key("b")], "Unknown");
        assert_eq!(next, None);
    }

    #[test]
    fn a_driver_skips_an_operation_only_when_every_device_of_it_does() {
        let a = |driver: &str, skip: &[&str]| Allocated {
            request: "r".into(),
            driver: driver.into(),
            pool: "p".into(),
            device: "d".into(),
            admin: false,
            skip_node_operations: skip.iter().map(|s| s.to_string()).collect(),
        };
        let c = |allocation| ClaimInfo {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u".into(),
            allocation,
            pods: BTreeSet::new(),
            prepared: None,
            cdi_unresolved: vec![],
        };
        let both = ["NodePrepareResources", "NodeUnprepareResources"];
        assert_eq!(skipped_operations(&c(vec![a("x", &["*"])]), "x"), both.iter().map(|s| s.to_string()).collect());
        let mixed = c(vec![a("x", &["*"]), a("x", &["NodeUnprepareResources", "SomethingNew"]), a("y", &[])]);
        assert_eq!(skipped_operations(&mixed, "x"), ["NodeUnprepareResources".to_string()].into());
        assert!(skipped_operations(&mixed, "y").is_empty());
        assert!(skipped_operations(&mixed, "absent").is_empty());
    }

    #[test]
    fn slices_are_wiped_only_when_no_instance_is_connected() {
        assert_eq!(wipe_decision(false, false), WipeDecision::Schedule);
        assert_eq!(wipe_decision(false, true), WipeDecision::Nothing, "the first deadline stands");
        assert_eq!(wipe_decision(true, true), WipeDecision::Cancel);
        assert_eq!(wipe_decision(true, false), WipeDecision::Nothing);
    }

    /// kubernetes#132058: a driver that dies without removing its sockets
    /// (no deregistration) loses its connection; its slices go after the delay.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_driver_whose_endpoint_stops_answering_has_its_slices_wiped_after_the_delay() {
        use crate::core::log::{LogFormat, Logger};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let endpoint = root.join("plugins/gpu.x/dra.sock");
        std::fs::create_dir_all(endpoint.parent().unwrap()).unwrap();
        // A gRPC endpoint that answers nothing but HTTP/2 (all the kubelet dials).
        let server = Generation::new(0);
        let l = tokio::net::UnixListener::bind(&endpoint).unwrap();
        let svc = tower::service_fn(|_r: http::Request<tonic::body::Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        });
        server.spawn(async move {
            let _ = crate::core::transport::serve(l, svc, std::future::pending()).await;
        });
        let store = Arc::new(apiserver::Store::default());
        let slice = serde_json::json!({"metadata": {"name": "s0"}, "spec": {"driver": "gpu.x", "nodeName": NODE_NAME, "pool": {"name": "p"}}});
        let other = serde_json::json!({"metadata": {"name": "s1"}, "spec": {"driver": "nic.x", "nodeName": NODE_NAME, "pool": {"name": "p"}}});
        for o in [slice, other] {
            let (code, _) = apiserver::answer(
                &store,
                &[],
                NODE_NAME,
                "POST",
                "/apis/resource.k8s.io/v1/resourceslices",
                "",
                o.to_string().as_bytes(),
            );
            assert_eq!(code, 201);
        }
        let mut spec = DraSpec::new(&root, vec![]);
        spec.api = Some(store.clone());
        spec.wipe_delay = Duration::from_millis(200);
        let bus = EventBus::new(Logger::to_file(LogFormat::Json, &root.join("k.log")).unwrap());
        let mut rx = bus.subscribe();
        let gen = Generation::new(0);
        let dra = DraManager::new(spec, bus, gen.clone());
        let info = PluginInfo {
            r#type: "DRAPlugin".into(),
            name: "gpu.x".into(),
            endpoint: endpoint.display().to_string(),
            supported_versions: vec!["v1.DRAPlugin".into()],
        };
        dra.register(&root.join("plugins_registry/gpu.x-reg.sock"), &info, &endpoint).await.unwrap();
        // The driver dies; its socket file stays (no deregistration).
        server.token.cancel();
        assert!(endpoint.exists());
        let mut seen = Vec::new();
        let wiped = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(e) = rx.recv().await {
                seen.push(serde_json::to_string(&*e).unwrap());
                if let KubeletEvent::DraSlicesWiped { driver, slices } = &e.event {
                    return (driver.clone(), slices.clone());
                }
            }
            panic!("the bus closed")
        })
        .await
        .expect("no dra-slices-wiped within 10s");
        assert_eq!(wiped, ("gpu.x".to_string(), vec!["s0".to_string()]));
        assert!(seen.iter().any(|e| e.contains("\"dra-connection\"") && e.contains("\"connected\":false")), "{seen:?}");
        let left: Vec<String> =
            store.slices().iter().map(|s| s["metadata"]["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(left, ["s1"], "another driver's slice stays");
        gen.token.cancel();
    }
}
