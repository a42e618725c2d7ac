//! The kubelet's device manager, reproduced: per-resource device state fed
//! by ListAndWatch, capacity/allocatable, device choice for each container
//! (reuse, GetPreferredAllocation, NUMA alignment), Allocate, pod admission
//! with rollback, and the checkpoint. One state lock, never held across an
//! RPC; admissions are serialized, as the kubelet's are.

use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse, ContainerPreferredAllocationRequest, Device,
    DevicePluginOptions, PreStartContainerRequest, PreferredAllocationRequest,
};
use crate::api::{HEALTHY, UNHEALTHY};
use crate::core::log::{ms, Logger};
use crate::kubelet::checkpoint::{self, Data, PodDeviceEntry};
use crate::kubelet::conn::PluginConn;
use crate::kubelet::manifest::Pod;
use serde::Serialize;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The kubelet's topology manager policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TopologyPolicy {
    /// No NUMA alignment
    #[default]
    None,
    /// Prefer aligned devices, never reject
    BestEffort,
    /// Reject pods whose best alignment is not the preferred one
    Restricted,
    /// Reject pods that cannot get all devices from one NUMA node
    SingleNumaNode,
}

/// Manager settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The plugin directory (endpoints are resolved here).
    pub plugin_dir: PathBuf,
    /// The checkpoint file.
    pub checkpoint: PathBuf,
    /// Topology manager policy.
    pub topology: TopologyPolicy,
    /// How long a stopped plugin's resource stays (devices unhealthy).
    pub grace_period: Duration,
    /// Receive limit for plugin messages.
    pub max_recv: usize,
    /// Timeout of Allocate / GetPreferredAllocation / GetDevicePluginOptions.
    pub call_timeout: Duration,
    /// PreStartContainer timeout (the kubelet's: 30 s).
    pub pre_start_timeout: Duration,
}

/// A device as the manager tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dev {
    /// Health string as last reported.
    pub health: String,
    /// NUMA node, if reported.
    pub numa: Option<i64>,
}

/// A registered plugin endpoint.
#[derive(Clone)]
pub struct Endpoint {
    /// The connection.
    pub conn: PluginConn,
    /// Options from GetDevicePluginOptions.
    pub options: DevicePluginOptions,
    /// Registration generation (a re-registration replaces the endpoint).
    pub generation: u64,
    /// How it registered: `kubelet.sock` or `plugin-watcher`.
    pub via: &'static str,
}

#[derive(Default)]
struct Resource {
    endpoint: Option<Endpoint>,
    devices: BTreeMap<String, Dev>,
    stopped: bool,
    task: Option<tokio::task::AbortHandle>,
}

impl Resource {
    fn healthy(&self) -> BTreeSet<String> {
        if self.stopped {
            return BTreeSet::new();
        }
        self.devices.iter().filter(|(_, d)| d.health == HEALTHY).map(|(id, _)| id.clone()).collect()
    }
}

/// One container's devices of one resource.
#[derive(Debug, Clone)]
pub struct Allocation {
    /// Device IDs.
    pub ids: Vec<String>,
    /// Device IDs by NUMA node (`-1`: none).
    pub numa: BTreeMap<String, Vec<String>>,
    /// The plugin's answer.
    pub resp: ContainerAllocateResponse,
    /// The answer as the checkpoint stores it (base64 protobuf), encoded once.
    pub resp_b64: String,
}

type AllocKey = (String, String, String); // pod uid, container, resource

#[derive(Debug, Clone)]
struct PodRecord {
    pod: Pod,
    file: PathBuf,
}

/// Histogram buckets of the kubelet's alloc duration metric (Prometheus DefBuckets).
pub const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A Prometheus histogram.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Cumulative counts per bucket of [`BUCKETS`].
    pub buckets: [u64; 11],
    /// Sum of observations (seconds).
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.buckets[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }
}

#[derive(Default)]
struct State {
    resources: BTreeMap<String, Resource>,
    pods: BTreeMap<String, PodRecord>,
    allocations: BTreeMap<AllocKey, Allocation>,
    rejected: BTreeMap<PathBuf, String>,
    registrations: BTreeMap<String, u64>,
    alloc_hist: BTreeMap<String, Histogram>,
    generation: u64,
    restart: Option<(Instant, BTreeSet<String>)>,
    /// Bumped on every change the checkpoint holds.
    version: u64,
}

/// The device manager.
pub struct Manager {
    state: Mutex<State>,
    admission: tokio::sync::Mutex<()>,
    /// The state version last written to the checkpoint; held while writing, so writes are ordered.
    written: tokio::sync::Mutex<u64>,
    /// Wakes the background checkpoint writer.
    dirty: Arc<tokio::sync::Notify>,
    /// Settings.
    pub cfg: Config,
    /// Event log.
    pub log: Logger,
}

/// A resource's numbers, for `dpctl node`, metrics and PodResources.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Resource name.
    pub resource: String,
    /// All devices (kept while the plugin is stopped).
    pub capacity: usize,
    /// Healthy devices (0 while stopped).
    pub allocatable: usize,
    /// Devices allocated to pods.
    pub allocated: usize,
    /// `running`, `stopped` (stream ended, in grace period) or `waiting` (from the checkpoint, plugin not back yet).
    pub state: String,
    /// The plugin's socket.
    pub endpoint: Option<String>,
    /// How it registered.
    pub via: Option<String>,
    /// Options it reported.
    pub pre_start_required: bool,
    /// Options it reported.
    pub get_preferred_allocation_available: bool,
    /// Devices.
    pub devices: BTreeMap<String, Dev>,
}

/// A pod's allocation, for `dpctl node` and PodResources.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// Pod name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// Manifest file.
    pub file: String,
    /// Init containers first, then app containers.
    pub containers: Vec<ContainerStatus>,
}

/// One container's devices.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    /// Container name.
    pub name: String,
    /// An init container.
    pub init: bool,
    /// resource → NUMA node (`-1`: none) → device IDs.
    pub resources: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

/// At most [`LOG_LIST`] items of a list for the event log, then `+N more`.
fn capped<T: ToString>(items: &[T]) -> serde_json::Value {
    let mut v: Vec<serde_json::Value> = items.iter().take(LOG_LIST).map(|x| json!(x.to_string())).collect();
    if items.len() > LOG_LIST {
        v.push(json!(format!("+{} more", items.len() - LOG_LIST)));
    }
    serde_json::Value::Array(v)
}

/// How many IDs one event-log field lists.
const LOG_LIST: usize = 20;

fn kubelet_admission_error(e: &str) -> String {
    format!("Allocate failed due to {e}, which is unexpected")
}

impl Manager {
    /// A manager with empty state.
    pub fn new(cfg: Config, log: Logger) -> Arc<Self> {
        let dirty = Arc::new(tokio::sync::Notify::new());
        let m = Arc::new(Manager {
            state: Mutex::new(State::default()),
            admission: tokio::sync::Mutex::new(()),
            written: tokio::sync::Mutex::new(0),
            dirty: dirty.clone(),
            cfg,
            log,
        });
        // Registration and device changes are persisted in the background,
        // coalesced; admissions flush synchronously before they are acknowledged.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&m);
            rt.spawn(async move {
                loop {
                    dirty.notified().await;
                    let Some(m) = weak.upgrade() else { return };
                    if let Err(e) = m.flush().await {
                        m.log.event("checkpoint-error", &[("error", json!(e.to_string()))]);
                    }
                }
            });
        }
        m
    }

    /// Write the checkpoint if the state changed since the last write. The
    /// file is written outside the state lock, on the blocking pool.
    pub async fn flush(&self) -> crate::core::Result<()> {
        let mut written = self.written.lock().await;
        let (data, version) = {
            let st = self.lock();
            (Self::checkpoint_data(&st), st.version)
        };
        if version <= *written {
            return Ok(());
        }
        let path = self.cfg.checkpoint.clone();
        tokio::task::spawn_blocking(move || checkpoint::write(&path, &data))
            .await
            .map_err(|e| crate::core::Error::failed(format!("checkpoint writer failed: {e}")))??;
        *written = version;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Restore from the checkpoint. A corrupt file is set aside and reported.
    /// Returns the resources the checkpoint lists (they show capacity 0 until their plugin returns).
    pub fn restore(&self) -> BTreeSet<String> {
        let path = &self.cfg.checkpoint;
        let loaded = match checkpoint::read(path) {
            Ok(l) => l,
            Err(e) => {
                let aside =
                    checkpoint::set_aside(path).map(|p| p.display().to_string()).unwrap_or_else(|e2| e2.to_string());
                self.log.event("checkpoint-corrupt", &[("error", json!(e.to_string())), ("setAside", json!(aside))]);
                None
            }
        };
        let Some(l) = loaded else { return BTreeSet::new() };
        if !l.checksum_ours {
            self.log.event(
                "checkpoint-checksum",
                &[
                    ("file", json!(path.display().to_string())),
                    ("note", json!("checksum not dpctl's (written by a real kubelet?); content used as is")),
                ],
            );
        }
        let mut st = self.lock();
        for r in l.checkpoint.data.registered_devices.keys() {
            st.resources.entry(r.clone()).or_default();
        }
        let mut n = 0;
        for e in &l.checkpoint.data.pod_device_entries {
            let resp = e.decode_alloc_resp().unwrap_or_default();
            st.resources.entry(e.resource_name.clone()).or_default();
            st.allocations.insert(
                (e.pod_uid.clone(), e.container_name.clone(), e.resource_name.clone()),
                Allocation { ids: e.ids(), numa: e.device_ids.clone(), resp, resp_b64: e.alloc_resp.clone() },
            );
            n += 1;
        }
        let resources: BTreeSet<String> = st.resources.keys().cloned().collect();
        drop(st);
        self.log.event(
            "checkpoint-restored",
            &[("allocations", json!(n)), ("resources", json!(resources.iter().collect::<Vec<_>>()))],
        );
        resources
    }

    /// Remember that a restart happened now and which resources should come back.
    pub fn expect_back(&self, resources: BTreeSet<String>) {
        if !resources.is_empty() {
            self.lock().restart = Some((Instant::now(), resources));
        }
    }

    fn checkpoint_data(st: &State) -> Data {
        Data {
            pod_device_entries: st
                .allocations
                .iter()
                .map(|((uid, c, r), a)| PodDeviceEntry {
                    pod_uid: uid.clone(),
                    container_name: c.clone(),
                    resource_name: r.clone(),
                    device_ids: a.numa.clone(),
                    alloc_resp: a.resp_b64.clone(),
                })
                .collect(),
            registered_devices: st
                .resources
                .iter()
                .filter(|(_, r)| r.endpoint.is_some())
                .map(|(n, r)| (n.clone(), r.devices.keys().cloned().collect()))
                .collect(),
        }
    }

    /// Mark the state changed; the background writer persists it.
    fn save(&self, st: &mut State) {
        st.version += 1;
        self.dirty.notify_one();
    }

    /// Count a Register call (before validation, as the kubelet does).
    pub fn count_registration(&self, resource: &str) {
        *self.lock().registrations.entry(resource.to_string()).or_default() += 1;
    }

    /// Install a newly registered endpoint (replacing any earlier one for the
    /// resource) and return its generation.
    pub fn add_endpoint(
        &self,
        resource: &str,
        conn: PluginConn,
        options: DevicePluginOptions,
        via: &'static str,
    ) -> u64 {
        let mut st = self.lock();
        st.generation += 1;
        let generation = st.generation;
        let socket = conn.socket().display().to_string();
        let r = st.resources.entry(resource.to_string()).or_default();
        let replaced = r.endpoint.is_some();
        if let Some(t) = r.task.take() {
            t.abort();
        }
        r.endpoint = Some(Endpoint { conn, options, generation, via });
        r.stopped = false;
        let mut back = None;
        if let Some((at, pending)) = &mut st.restart {
            if pending.remove(resource) {
                back = Some((at.elapsed(), pending.is_empty()));
            }
        }
        if back.is_some_and(|(_, all)| all) {
            st.restart = None;
        }
        self.save(&mut st);
        drop(st);
        self.log.event(
            "registered",
            &[
                ("resource", json!(resource)),
                ("endpoint", json!(socket)),
                ("via", json!(via)),
                ("preStartRequired", json!(options.pre_start_required)),
                ("getPreferredAllocationAvailable", json!(options.get_preferred_allocation_available)),
                ("replaced", json!(replaced)),
            ],
        );
        if let Some((took, all)) = back {
            self.log.event("plugin-back", &[("resource", json!(resource)), ("afterMs", ms(took))]);
            if all {
                self.log.event("all-plugins-back", &[("afterMs", ms(took))]);
            }
        }
        generation
    }

    /// Remember the ListAndWatch task of an endpoint.
    pub fn set_task(&self, resource: &str, generation: u64, task: tokio::task::AbortHandle) {
        let mut st = self.lock();
        match st.resources.get_mut(resource) {
            Some(r) if r.endpoint.as_ref().is_some_and(|e| e.generation == generation) => r.task = Some(task),
            _ => task.abort(),
        }
    }

    /// A ListAndWatch snapshot arrived.
    pub fn snapshot(&self, resource: &str, generation: u64, devices: Vec<Device>, bytes: usize) {
        let mut st = self.lock();
        let Some(r) = st.resources.get_mut(resource) else { return };
        if r.endpoint.as_ref().map(|e| e.generation) != Some(generation) {
            return;
        }
        let new: BTreeMap<String, Dev> = devices
            .iter()
            .map(|d| {
                let numa = d.topology.as_ref().and_then(|t| t.nodes.first()).map(|n| n.id);
                (d.id.clone(), Dev { health: d.health.clone(), numa })
            })
            .collect();
        let added: Vec<&String> = new.keys().filter(|k| !r.devices.contains_key(*k)).collect();
        let removed: Vec<&String> = r.devices.keys().filter(|k| !new.contains_key(*k)).collect();
        let changed: Vec<String> = new
            .iter()
            .filter_map(|(k, d)| {
                r.devices.get(k).filter(|o| o.health != d.health).map(|o| format!("{k}:{}->{}", o.health, d.health))
            })
            .collect();
        let problems: Vec<String> =
            crate::core::validate::device_problems(devices.iter().map(|d| (d.id.as_str(), d.health.as_str())))
                .iter()
                .map(|p| p.to_string())
                .collect();
        let registered_changed = !added.is_empty() || !removed.is_empty();
        let fields = vec![
            ("resource", json!(resource)),
            ("capacity", json!(new.len())),
            ("allocatable", json!(new.values().filter(|d| d.health == HEALTHY).count())),
            ("added", capped(&added)),
            ("removed", capped(&removed)),
            ("healthChanged", capped(&changed)),
            ("bytes", json!(bytes)),
        ];
        r.devices = new;
        if registered_changed {
            self.save(&mut st);
        }
        drop(st);
        self.log.event("devices", &fields);
        for p in problems {
            self.log.event("device-warning", &[("resource", json!(resource)), ("problem", json!(p))]);
        }
    }

    /// A plugin's stream ended: its devices turn unhealthy for the grace
    /// period, then the resource goes away.
    pub fn stream_ended(self: &Arc<Self>, resource: &str, generation: u64, why: &str) {
        let mut st = self.lock();
        let Some(r) = st.resources.get_mut(resource) else { return };
        if r.endpoint.as_ref().map(|e| e.generation) != Some(generation) {
            return;
        }
        r.stopped = true;
        for d in r.devices.values_mut() {
            d.health = UNHEALTHY.into();
        }
        let capacity = r.devices.len();
        drop(st);
        self.log.event(
            "stream-ended",
            &[
                ("resource", json!(resource)),
                ("reason", json!(why)),
                ("capacity", json!(capacity)),
                ("allocatable", json!(0)),
                ("gracePeriodMs", ms(self.cfg.grace_period)),
            ],
        );
        let me = self.clone();
        let resource = resource.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(me.cfg.grace_period).await;
            let mut st = me.lock();
            let expired = st
                .resources
                .get(&resource)
                .is_some_and(|r| r.stopped && r.endpoint.as_ref().map(|e| e.generation) == Some(generation));
            if expired {
                st.resources.remove(&resource);
                me.save(&mut st);
                drop(st);
                me.log.event(
                    "resource-removed",
                    &[("resource", json!(resource)), ("reason", json!("grace period over"))],
                );
            }
        });
    }

    /// Stop every endpoint (a restart or shutdown).
    pub fn stop_all(&self) {
        let mut st = self.lock();
        for r in st.resources.values_mut() {
            if let Some(t) = r.task.take() {
                t.abort();
            }
        }
    }

    /// The resource of an endpoint socket, if registered (plugin-watcher deregistration).
    pub fn resource_of(&self, socket: &std::path::Path) -> Option<(String, u64)> {
        let st = self.lock();
        st.resources.iter().find_map(|(n, r)| {
            r.endpoint.as_ref().filter(|e| e.conn.socket() == socket).map(|e| (n.clone(), e.generation))
        })
    }

    /// Every resource's numbers.
    pub fn resources(&self) -> Vec<ResourceStatus> {
        let st = self.lock();
        st.resources
            .iter()
            .map(|(name, r)| {
                let allocated = st
                    .allocations
                    .iter()
                    .filter(|((_, _, res), _)| res == name)
                    .flat_map(|(_, a)| a.ids.iter())
                    .collect::<BTreeSet<_>>()
                    .len();
                ResourceStatus {
                    resource: name.clone(),
                    capacity: r.devices.len(),
                    allocatable: r.healthy().len(),
                    allocated,
                    state: match (&r.endpoint, r.stopped) {
                        (None, _) => "waiting",
                        (Some(_), true) => "stopped",
                        _ => "running",
                    }
                    .into(),
                    endpoint: r.endpoint.as_ref().map(|e| e.conn.socket().display().to_string()),
                    via: r.endpoint.as_ref().map(|e| e.via.to_string()),
                    pre_start_required: r.endpoint.as_ref().is_some_and(|e| e.options.pre_start_required),
                    get_preferred_allocation_available: r
                        .endpoint
                        .as_ref()
                        .is_some_and(|e| e.options.get_preferred_allocation_available),
                    devices: r.devices.clone(),
                }
            })
            .collect()
    }

    /// Admitted pods and their allocations (app containers flagged `true`, init `false`).
    pub fn pods(&self) -> Vec<PodStatus> {
        let st = self.lock();
        st.pods
            .values()
            .map(|p| {
                let containers = p
                    .pod
                    .init_containers
                    .iter()
                    .map(|c| (c, false))
                    .chain(p.pod.containers.iter().map(|c| (c, true)))
                    .map(|(c, app)| ContainerStatus {
                        name: c.name.clone(),
                        init: !app,
                        resources: st
                            .allocations
                            .iter()
                            .filter(|((u, cn, _), _)| u == &p.pod.uid && cn == &c.name)
                            .map(|((_, _, r), a)| (r.clone(), a.numa.clone()))
                            .collect(),
                    })
                    .collect();
                PodStatus {
                    name: p.pod.name.clone(),
                    namespace: p.pod.namespace.clone(),
                    uid: p.pod.uid.clone(),
                    file: p.file.display().to_string(),
                    containers,
                }
            })
            .collect()
    }

    /// Rejected manifests and why.
    pub fn rejected(&self) -> BTreeMap<PathBuf, String> {
        self.lock().rejected.clone()
    }

    /// Metrics: registrations and alloc histograms per resource.
    pub fn metrics(&self) -> (BTreeMap<String, u64>, BTreeMap<String, Histogram>) {
        let st = self.lock();
        (st.registrations.clone(), st.alloc_hist.clone())
    }

    /// Record a manifest that could not be admitted.
    pub fn reject_file(&self, file: PathBuf, why: String) {
        self.log.event("pod-rejected", &[("file", json!(file.display().to_string())), ("reason", json!(why))]);
        self.lock().rejected.insert(file, why);
    }

    /// Forget a rejected manifest (its file was removed or changed).
    pub fn forget_rejected(&self, file: &std::path::Path) {
        self.lock().rejected.remove(file);
    }

    /// Drop checkpointed allocations whose pod no manifest describes any more.
    pub fn drop_orphans(&self) {
        let mut st = self.lock();
        let live: BTreeSet<String> = st.pods.keys().cloned().collect();
        let orphans: Vec<AllocKey> = st.allocations.keys().filter(|(u, _, _)| !live.contains(u)).cloned().collect();
        if orphans.is_empty() {
            return;
        }
        for k in &orphans {
            st.allocations.remove(k);
        }
        self.save(&mut st);
        drop(st);
        for (u, c, r) in orphans {
            self.log.event(
                "allocation-freed",
                &[
                    ("podUID", json!(u)),
                    ("container", json!(c)),
                    ("resource", json!(r)),
                    ("reason", json!("pod no longer exists")),
                ],
            );
        }
    }

    /// Remove a pod (its manifest is gone) and free its devices.
    pub fn remove_pod(&self, uid: &str) {
        let mut st = self.lock();
        let Some(p) = st.pods.remove(uid) else { return };
        let keys: Vec<AllocKey> = st.allocations.keys().filter(|(u, _, _)| u == uid).cloned().collect();
        let freed: Vec<String> = keys.iter().filter_map(|k| st.allocations.remove(k)).flat_map(|a| a.ids).collect();
        self.save(&mut st);
        drop(st);
        self.log.event("pod-removed", &[("pod", json!(p.pod.key())), ("uid", json!(uid)), ("freed", json!(freed))]);
    }

    /// Admit a pod the kubelet way; on failure nothing stays allocated and
    /// the returned error is the kubelet's text.
    pub async fn admit(&self, pod: Pod, file: PathBuf) -> Result<(), String> {
        self.admit_batch(vec![(pod, file)]).await.pop().map(|(_, r)| r).unwrap_or(Ok(()))
    }

    /// Admit pods in order, then commit them together: the checkpoint is
    /// written once, and only then is any of them acknowledged (logged,
    /// listed, its containers started). A failed write rejects the whole
    /// batch and frees what it allocated.
    pub async fn admit_batch(&self, pods: Vec<(Pod, PathBuf)>) -> Vec<(PathBuf, Result<(), String>)> {
        let _serial = self.admission.lock().await;
        let mut results = Vec::new();
        struct Staged {
            pod: Pod,
            file: PathBuf,
            restored: bool,
            keys: Vec<AllocKey>,
            calls: usize,
            start: Instant,
        }
        let mut staged: Vec<Staged> = Vec::new();
        for (pod, file) in pods {
            let start = Instant::now();
            let dup = {
                let st = self.lock();
                st.pods
                    .values()
                    .find(|p| p.pod.key() == pod.key() && p.pod.uid != pod.uid)
                    .map(|p| p.file.clone())
                    .or_else(|| staged.iter().find(|s| s.pod.key() == pod.key()).map(|s| s.file.clone()))
            };
            if let Some(other) = dup {
                results.push((file, Err(format!("pod {} already exists (from {})", pod.key(), other.display()))));
                continue;
            }
            match self.allocate_pod(&pod).await {
                Err(e) => results.push((file, Err(e))),
                Ok((pending, restored, calls)) => {
                    let keys: Vec<AllocKey> = pending.keys().cloned().collect();
                    let mut st = self.lock();
                    for (k, a) in pending {
                        st.allocations.insert(k, a);
                    }
                    st.version += 1;
                    drop(st);
                    staged.push(Staged { pod, file, restored, keys, calls, start });
                }
            }
        }
        if staged.is_empty() {
            return results;
        }
        if let Err(e) = self.flush().await {
            let mut st = self.lock();
            for s in &staged {
                for k in &s.keys {
                    st.allocations.remove(k);
                }
            }
            st.version += 1;
            drop(st);
            for s in staged {
                results.push((s.file, Err(format!("cannot write the checkpoint: {e}"))));
            }
            return results;
        }
        {
            let mut st = self.lock();
            for s in &staged {
                st.pods.insert(s.pod.uid.clone(), PodRecord { pod: s.pod.clone(), file: s.file.clone() });
                st.rejected.remove(&s.file);
            }
        }
        for s in staged {
            let summary: Vec<String> = {
                let st = self.lock();
                st.allocations
                    .iter()
                    .filter(|((u, _, _), _)| u == &s.pod.uid)
                    .map(|((_, c, r), a)| format!("{c}:{r}={}", a.ids.join(",")))
                    .collect()
            };
            self.log.event(
                if s.restored { "pod-restored" } else { "pod-admitted" },
                &[
                    ("pod", json!(s.pod.key())),
                    ("uid", json!(s.pod.uid)),
                    ("allocations", json!(summary)),
                    ("allocateCalls", json!(s.calls)),
                    ("latencyMs", ms(s.start.elapsed())),
                ],
            );
            if !s.restored {
                self.start_containers(&s.pod).await;
            }
            results.push((s.file, Ok(())));
        }
        results
    }

    /// Choose and allocate every container's devices; nothing is committed.
    /// Returns the new allocations, whether the pod was restored from the
    /// checkpoint, and the number of Allocate calls.
    async fn allocate_pod(&self, pod: &Pod) -> Result<(BTreeMap<AllocKey, Allocation>, bool, usize), String> {
        let restored = self.lock().allocations.keys().any(|(u, _, _)| u == &pod.uid);
        let mut pending: BTreeMap<AllocKey, Allocation> = BTreeMap::new();
        let mut reusable: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut allocate_calls = 0;
        let containers: Vec<(&crate::kubelet::manifest::Container, bool)> =
            pod.init_containers.iter().map(|c| (c, true)).chain(pod.containers.iter().map(|c| (c, false))).collect();
        for (c, is_init) in &containers {
            // Unknown resources fail the kubelet's resource-fit check before the device manager runs.
            {
                let st = self.lock();
                for (res, n) in &c.resources {
                    if !st.resources.contains_key(res) {
                        return Err(format!(
                            "Node didn't have enough resource: {res}, requested: {n}, used: 0, capacity: 0"
                        ));
                    }
                }
            }
            let hint = self.topology_hint(&pod.uid, c, &reusable, &pending)?;
            for (res, &n) in &c.resources {
                let chosen = self
                    .devices_to_allocate(&pod.uid, &c.name, res, n as usize, reusable.get(res), &pending, hint.as_ref())
                    .await
                    .map_err(|e| kubelet_admission_error(&e))?;
                let ids = match chosen {
                    None => self
                        .lock()
                        .allocations
                        .get(&(pod.uid.clone(), c.name.clone(), res.clone()))
                        .map(|a| a.ids.clone())
                        .unwrap_or_default(),
                    Some(ids) => {
                        let resp = self
                            .allocate_rpc(pod, &c.name, res, &ids)
                            .await
                            .map_err(|e| kubelet_admission_error(&e))?;
                        allocate_calls += 1;
                        let numa = self.by_numa(res, &ids);
                        let resp_b64 = PodDeviceEntry::encode_alloc_resp(&resp);
                        pending.insert(
                            (pod.uid.clone(), c.name.clone(), res.clone()),
                            Allocation { ids: ids.clone(), numa, resp, resp_b64 },
                        );
                        ids
                    }
                };
                let set = reusable.entry(res.clone()).or_default();
                if *is_init {
                    set.extend(ids);
                } else {
                    for id in &ids {
                        set.remove(id);
                    }
                }
            }
        }
        Ok((pending, restored, allocate_calls))
    }

    /// PreStartContainer before each container start, when the plugin asks for it.
    async fn start_containers(&self, pod: &Pod) {
        for c in pod.init_containers.iter().chain(&pod.containers) {
            for res in c.resources.keys() {
                let (ep, ids) = {
                    let st = self.lock();
                    let ep = st.resources.get(res).and_then(|r| r.endpoint.clone());
                    let ids =
                        st.allocations.get(&(pod.uid.clone(), c.name.clone(), res.clone())).map(|a| a.ids.clone());
                    (ep, ids)
                };
                let (Some(ep), Some(ids)) = (ep, ids) else { continue };
                if !ep.options.pre_start_required {
                    continue;
                }
                let t = Instant::now();
                let r = ep
                    .conn
                    .pre_start(PreStartContainerRequest { devices_ids: ids.clone() }, self.cfg.pre_start_timeout)
                    .await;
                let mut fields = vec![
                    ("pod", json!(pod.key())),
                    ("container", json!(c.name)),
                    ("resource", json!(res)),
                    ("devices", json!(ids)),
                    ("latencyMs", ms(t.elapsed())),
                ];
                match r {
                    Ok(_) => self.log.event("pre-start", &fields),
                    Err(e) => {
                        fields.push(("error", json!(e.to_string())));
                        self.log.event("container-start-failed", &fields);
                    }
                }
            }
        }
    }

    fn by_numa(&self, res: &str, ids: &[String]) -> BTreeMap<String, Vec<String>> {
        let st = self.lock();
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for id in ids {
            let n = st.resources.get(res).and_then(|r| r.devices.get(id)).and_then(|d| d.numa).unwrap_or(-1);
            m.entry(n.to_string()).or_default().push(id.clone());
        }
        m
    }

    fn in_use(st: &State, res: &str, pending: &BTreeMap<AllocKey, Allocation>) -> BTreeSet<String> {
        st.allocations
            .iter()
            .chain(pending.iter())
            .filter(|((_, _, r), _)| r == res)
            .flat_map(|(_, a)| a.ids.iter().cloned())
            .collect()
    }

    /// The topology manager: a NUMA node set for the whole container, or a rejection.
    fn topology_hint(
        &self,
        uid: &str,
        c: &crate::kubelet::manifest::Container,
        reusable: &BTreeMap<String, BTreeSet<String>>,
        pending: &BTreeMap<AllocKey, Allocation>,
    ) -> Result<Option<BTreeSet<i64>>, String> {
        if self.cfg.topology == TopologyPolicy::None {
            return Ok(None);
        }
        let st = self.lock();
        // (needed, candidate NUMA nodes) per resource that reports topology
        let mut needs: Vec<(usize, Vec<i64>)> = Vec::new();
        for (res, &n) in &c.resources {
            if st.allocations.contains_key(&(uid.to_string(), c.name.clone(), res.clone())) {
                continue;
            }
            let Some(r) = st.resources.get(res) else { continue };
            if !r.devices.values().any(|d| d.numa.is_some()) {
                continue;
            }
            let in_use = Self::in_use(&st, res, pending);
            let reuse = reusable.get(res).cloned().unwrap_or_default();
            let nodes: Vec<i64> = r
                .healthy()
                .iter()
                .filter(|id| !in_use.contains(*id) || reuse.contains(*id))
                .filter_map(|id| r.devices.get(id).and_then(|d| d.numa))
                .collect();
            needs.push((n as usize, nodes));
        }
        if needs.is_empty() {
            return Ok(None);
        }
        let all: BTreeSet<i64> = needs.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        let all: Vec<i64> = all.into_iter().take(16).collect();
        let mut masks: Vec<u32> = (1..(1u32 << all.len())).collect();
        masks.sort_by_key(|m| (m.count_ones(), *m));
        let fits = |m: u32, need: &(usize, Vec<i64>)| {
            need.1.iter().filter(|n| all.iter().position(|a| a == *n).is_some_and(|i| m & (1 << i) != 0)).count()
                >= need.0
        };
        let best = masks.iter().copied().find(|&m| needs.iter().all(|n| fits(m, n)));
        let min_each = needs
            .iter()
            .map(|n| masks.iter().find(|&&m| fits(m, n)).map(|m| m.count_ones()).unwrap_or(u32::MAX))
            .max()
            .unwrap_or(0);
        let err = "Resources cannot be allocated with Topology locality".to_string();
        match (self.cfg.topology, best) {
            (TopologyPolicy::BestEffort, None) => Ok(None),
            (_, None) => Err(err),
            (TopologyPolicy::Restricted, Some(m)) if m.count_ones() > min_each => Err(err),
            (TopologyPolicy::SingleNumaNode, Some(m)) if m.count_ones() > 1 => Err(err),
            (_, Some(m)) => {
                Ok(Some(all.iter().enumerate().filter(|(i, _)| m & (1 << i) != 0).map(|(_, n)| *n).collect()))
            }
        }
    }

    /// The kubelet's devicesToAllocate. `Ok(None)`: the container already has them.
    #[allow(clippy::too_many_arguments)]
    async fn devices_to_allocate(
        &self,
        uid: &str,
        container: &str,
        res: &str,
        required: usize,
        reusable: Option<&BTreeSet<String>>,
        pending: &BTreeMap<AllocKey, Allocation>,
        hint: Option<&BTreeSet<i64>>,
    ) -> Result<Option<Vec<String>>, String> {
        let mut needed = required;
        let mut allocated: Vec<String> = Vec::new();
        let take = |from: &mut dyn Iterator<Item = String>, allocated: &mut Vec<String>, needed: &mut usize| {
            for id in from {
                if *needed == 0 {
                    break;
                }
                if !allocated.contains(&id) {
                    allocated.push(id);
                    *needed -= 1;
                }
            }
            *needed == 0
        };
        let (available, aligned, unaligned, no_affinity, ep) = {
            let st = self.lock();
            if let Some(a) = st.allocations.get(&(uid.to_string(), container.to_string(), res.to_string())) {
                if a.ids.len() != required {
                    return Err(format!(
                        "pod {uid:?} container {container:?} changed request for resource {res:?} from {} to {required}",
                        a.ids.len()
                    ));
                }
                return Ok(None);
            }
            let r = st.resources.get(res).ok_or_else(|| format!("cannot allocate unregistered device {res}"))?;
            if take(&mut reusable.into_iter().flatten().cloned(), &mut allocated, &mut needed) {
                return Ok(Some(allocated));
            }
            let in_use = Self::in_use(&st, res, pending);
            let available: BTreeSet<String> = r.healthy().into_iter().filter(|d| !in_use.contains(d)).collect();
            if available.len() < needed {
                return Err(format!(
                    "requested number of devices unavailable for {res}. Requested: {needed}, Available: {}",
                    available.len()
                ));
            }
            let (mut aligned, mut unaligned, mut no_affinity) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
            for id in &available {
                match (hint, r.devices.get(id).and_then(|d| d.numa)) {
                    (Some(h), Some(n)) if h.contains(&n) => aligned.insert(id.clone()),
                    (Some(_), Some(_)) => unaligned.insert(id.clone()),
                    _ => no_affinity.insert(id.clone()),
                };
            }
            (available, aligned, unaligned, no_affinity, r.endpoint.clone())
        };
        if needed < aligned.len() {
            let candidates: BTreeSet<String> = aligned.iter().cloned().chain(allocated.iter().cloned()).collect();
            let preferred = self.preferred(ep.as_ref(), res, container, &candidates, &allocated, required).await?;
            if take(&mut preferred.into_iter().filter(|p| aligned.contains(p)), &mut allocated, &mut needed) {
                return Ok(Some(allocated));
            }
            if take(&mut aligned.into_iter(), &mut allocated, &mut needed) {
                return Ok(Some(allocated));
            }
        } else {
            if take(&mut aligned.into_iter(), &mut allocated, &mut needed) {
                return Ok(Some(allocated));
            }
            let candidates: BTreeSet<String> = available.iter().cloned().chain(allocated.iter().cloned()).collect();
            let preferred = self.preferred(ep.as_ref(), res, container, &candidates, &allocated, required).await?;
            if take(&mut preferred.into_iter().filter(|p| available.contains(p)), &mut allocated, &mut needed) {
                return Ok(Some(allocated));
            }
            if take(&mut unaligned.into_iter(), &mut allocated, &mut needed)
                || take(&mut no_affinity.into_iter(), &mut allocated, &mut needed)
            {
                return Ok(Some(allocated));
            }
        }
        Err(format!(
            "unexpectedly allocated less resources than required. Requested: {required}, Got: {}",
            required - needed
        ))
    }

    /// GetPreferredAllocation with the kubelet's arguments; only the first
    /// container response is read; IDs outside the candidates are dropped.
    async fn preferred(
        &self,
        ep: Option<&Endpoint>,
        res: &str,
        container: &str,
        candidates: &BTreeSet<String>,
        must: &[String],
        size: usize,
    ) -> Result<Vec<String>, String> {
        let Some(ep) = ep.filter(|e| e.options.get_preferred_allocation_available) else { return Ok(vec![]) };
        let mut must_sorted: Vec<String> = must.to_vec();
        must_sorted.sort();
        let req = ContainerPreferredAllocationRequest {
            available_device_i_ds: candidates.iter().cloned().collect(),
            must_include_device_i_ds: must_sorted,
            allocation_size: size as i32,
        };
        let t = Instant::now();
        let r = ep.conn.preferred(PreferredAllocationRequest { container_requests: vec![req.clone()] }).await;
        let mut fields = vec![
            ("resource", json!(res)),
            ("container", json!(container)),
            ("available", capped(&req.available_device_i_ds)),
            ("mustInclude", capped(&req.must_include_device_i_ds)),
            ("size", json!(size)),
            ("latencyMs", ms(t.elapsed())),
        ];
        match r {
            Err(e) => {
                fields.push(("error", json!(e.to_string())));
                self.log.event("preferred", &fields);
                Err(format!("device plugin GetPreferredAllocation rpc failed with err: {e}"))
            }
            Ok(resp) => {
                let ids = resp.container_responses.into_iter().next().map(|c| c.device_i_ds).unwrap_or_default();
                let foreign: Vec<&String> = ids.iter().filter(|i| !candidates.contains(*i)).collect();
                fields.push(("preferred", json!(ids)));
                if !foreign.is_empty() {
                    fields.push(("ignoredForeign", json!(foreign)));
                }
                if ids.len() < size {
                    fields.push(("toppedUp", json!(size - ids.len())));
                }
                self.log.event("preferred", &fields);
                let mut set: Vec<String> = ids.into_iter().filter(|i| candidates.contains(i)).collect();
                set.sort();
                set.dedup();
                Ok(set)
            }
        }
    }

    async fn allocate_rpc(
        &self,
        pod: &Pod,
        container: &str,
        res: &str,
        ids: &[String],
    ) -> Result<ContainerAllocateResponse, String> {
        let (ep, stopped) = {
            let st = self.lock();
            let r = st.resources.get(res);
            (r.and_then(|r| r.endpoint.clone()), r.is_some_and(|r| r.stopped))
        };
        let ep = match ep {
            Some(e) if !stopped => e,
            Some(e) => return Err(format!("endpoint {} ({}) has been stopped", res, e.conn.socket().display())),
            None => return Err(format!("unknown Device Plugin {res}")),
        };
        let t = Instant::now();
        let r = ep
            .conn
            .allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest { devices_ids: ids.to_vec() }],
            })
            .await;
        let took = t.elapsed();
        self.lock().alloc_hist.entry(res.to_string()).or_default().observe(took.as_secs_f64());
        let mut fields = vec![
            ("pod", json!(pod.key())),
            ("container", json!(container)),
            ("resource", json!(res)),
            ("devices", json!(ids)),
            ("latencyMs", ms(took)),
        ];
        let out = match r {
            Err(e) => Err(e.to_string()),
            Ok(resp) => match resp.container_responses.into_iter().next() {
                None => Err("no containers return in allocation response".to_string()),
                Some(c) => Ok(c),
            },
        };
        if let Err(e) = &out {
            fields.push(("error", json!(e)));
        }
        self.log.event("allocate", &fields);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lists_are_capped() {
        let ids: Vec<String> = (0..25).map(|i| format!("d{i}")).collect();
        let v = capped(&ids);
        assert_eq!(v.as_array().unwrap().len(), 21);
        assert_eq!(v[20], "+5 more");
        assert_eq!(capped(&ids[..3]), json!(["d0", "d1", "d2"]));
    }
}
