//! The DRA manager's async shell ([`DraManager`]), the second plugin kind
//! of the one kubelet: it carries out what the core
//! ([`crate::kubelet::dra::core`]) decides — the driver calls, the endpoint
//! probes and slice wipes ([`DraManager::register`]), the health streams
//! and the health cache's file ([`health`]), the claim checkpoint
//! ([`persist`]), the claims written into the control plane ([`publish`]),
//! the claims read from the API server ([`fetch`]), the CDI spec files
//! ([`cdi_index`]), taint eviction's clock ([`taints`]) — and reports the
//! events. Every task belongs to the manager's [`Generation`].
//!
//! DRA drivers register through the plugin watcher (the DRAPlugin handler);
//! several instances of one driver may be registered at once (a rolling
//! update) and calls go to the newest, as the kubelet's DRAPluginManager
//! picks. The pod lifecycle asks it to prepare a pod's claims before any
//! container starts ([`DraManager::prepare`], one attempt; the lifecycle
//! retries) and to unprepare them when the pod goes ([`DraManager::unprepare`],
//! retried here in the background until done). Every claim is written to
//! `<root>/dra_manager_state` ([`checkpoint`]) before a driver is called for
//! it, and read back at start, so a restarted kubelet does not call the
//! driver again for claims it has prepared and unprepares what a failed
//! prepare left. Prepared CDI IDs are checked against the CDI spec
//! directories. The health stream is followed when the driver advertises
//! it. With the local API server, the node's ResourceSlices are wiped at
//! start, and a driver's when none of its instances is registered and
//! connected for the wiping delay. Errors read as the kubelet's
//! (pkg/kubelet/cm/dra/manager.go).
//!
//! The state is one lock over the core's parts, each a type of its own
//! ([`State`]): a prepare reads the registry, the objects, the health cache
//! and the claims at once.

mod cdi_index;
pub mod fetch;
mod health;
mod persist;
mod publish;
mod taints;

pub use cdi_index::unresolved_cdi;

use crate::api::pluginregistration::PluginInfo;
use crate::client::dra::DraConn;
use crate::client::dra_checkpoint as checkpoint;
use crate::controlplane::allocator::{Allocated, Candidate};
use crate::controlplane::objects::{self, Object};
use crate::controlplane::scheduler;
use crate::core::coalesced::CoalescedWriter;
use crate::kubelet::dra::core::claiminfo::{self, Cause, ClaimCache, ClaimInfo, DraError, Operation, World};
use crate::kubelet::dra::core::claims::{pod_claims, ClaimBook};
use crate::kubelet::dra::core::extended;
use crate::kubelet::dra::core::fetch::{is_for_pod, FetchError};
use crate::kubelet::dra::core::health::HealthState;
use crate::kubelet::dra::core::healthinfo::{self, HealthCache};
use crate::kubelet::dra::core::object_cache::{self, ObjectCache, Sources};
use crate::kubelet::dra::core::registry::Registry;
use crate::kubelet::dra::core::taints::TaintEviction;
use crate::kubelet::dra::core::view::{DriverStatus, PodInfo};
use crate::kubelet::dra::core::NODE_NAME;
use crate::kubelet::event::{EventBus, KubeletEvent, Refusal, RejectStage};
use crate::kubelet::generation::Generation;
use crate::kubelet::lifecycle::backoff;
use crate::kubelet::manifest::{ClaimSource, Pod};
use crate::kubelet::profile::{DraInstances, Profile};
use crate::protocol::dra as rules;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

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
    /// The control plane, when the local API server runs: the
    /// ResourceSlices drivers publish are read from it, the claims this
    /// manager admits, allocates and reserves are written to it.
    pub api: Option<Arc<dyn crate::controlplane::client::Client>>,
    /// The API server a node of a cluster reads its pods' claims from, at
    /// every prepare attempt of a pod of the API ([`fetch`]).
    pub claim_reader: Option<Arc<dyn fetch::ClaimReader>>,
    /// The cluster this node joined is a dpctl mock kubelet's (its
    /// kubeconfig says so): as on that kubelet's own node, its control plane
    /// binds no pod, so the scheduler's PreBind wait for binding conditions
    /// is this kubelet's to do, over [`DraSpec::claim_reader`].
    pub joined_dpctl_plane: bool,
    /// How long after a driver's last instance went away its ResourceSlices
    /// on this node are deleted (the kubelet's defaultWipingDelay, 30 s; kubernetes#132058).
    pub wipe_delay: Duration,
    /// Allocate only devices of ResourceSlices (manifests and published), not
    /// those health streams name: the scheduler knows devices from slices
    /// alone (`dpctl test --dra` sets it, so a slice bug is not hidden).
    pub slices_only: bool,
    /// The kubelet version's DRA behaviour (services, instances, wiping, health).
    pub profile: Profile,
    /// How long the scheduler's part waits for a claim's binding conditions
    /// after allocating it (kube-scheduler's DynamicResources BindingTimeout, 10 min).
    pub binding_timeout: Duration,
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
            claim_reader: None,
            joined_dpctl_plane: false,
            wipe_delay: Duration::from_secs(30),
            slices_only: false,
            profile: Profile::default(),
            binding_timeout: scheduler::BINDING_TIMEOUT,
        }
    }

    /// The checkpoint file.
    pub fn checkpoint(&self) -> PathBuf {
        self.root.join(checkpoint::NAME)
    }
}

/// The shell's handle of a registered instance: its connection, and the
/// stop token of its tasks (the endpoint probe, the health stream).
struct Handle {
    conn: DraConn,
    stop: CancellationToken,
}

/// The manager's state: the core's parts, each with its own methods, under
/// one lock ([`DraManager::lock`]) — a prepare plans from the registry, the
/// objects, the health cache and the claims at once.
#[derive(Default)]
struct State {
    /// The registered drivers' instances and pending slice wipes.
    registry: Registry<Handle>,
    /// The DRA objects and the allocator's candidates.
    objects: ObjectCache,
    /// The health cache and its log.
    health: HealthState,
    /// The claim cache, the pods using it, their background unprepares.
    claims: ClaimBook<CancellationToken>,
    /// When each NoExecute taint was first seen.
    taints: TaintEviction,
}

impl State {
    fn newest(&self, driver: &str) -> Option<(DraConn, &'static str)> {
        self.registry.newest(driver).map(|i| (i.handle.conn.clone(), i.service))
    }
}

/// How often a registered instance's endpoint is probed (the kubelet learns of
/// a dropped connection from gRPC at once; a probe stands in for that).
const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How often the scheduler's PreBind looks at a claim's binding conditions
/// (dynamicresources.go: wait.PollUntilContextTimeout every 5 s).
const BINDING_POLL: Duration = Duration::from_secs(5);

/// How a claim's preparing call went, for its `claim-prepared` event.
#[derive(Debug, Clone, Copy)]
struct CallTiming {
    /// Its driver's NodePrepareResources round trip (µs).
    call_us: u64,
    /// The attempt's waits for the checkpoint on disk (µs).
    sync_us: u64,
}

/// What one successful prepare attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// Whether any driver was called (false: every claim was prepared before).
    pub called: bool,
}

/// The DRA manager of one generation.
pub struct DraManager {
    spec: DraSpec,
    bus: EventBus,
    gen: Generation,
    state: Mutex<State>,
    changed: Notify,
    /// The claim checkpoint's change counter and written mark (see persist.rs).
    claims_file: CoalescedWriter,
    /// The CDI spec files read so far.
    cdi: cdi_index::CdiIndex,
    /// The health cache file's change counter and written mark (see health.rs save_health).
    health_file: CoalescedWriter,
    /// The claims this manager has written into the control plane (held
    /// while writing: [`DraManager::publish_claims`]).
    published: Mutex<BTreeSet<String>>,
}

impl DraManager {
    /// A manager for generation `gen`.
    pub fn new(spec: DraSpec, bus: EventBus, gen: Generation) -> Arc<Self> {
        Arc::new(DraManager {
            spec,
            bus,
            gen,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            claims_file: CoalescedWriter::new(),
            cdi: Default::default(),
            health_file: CoalescedWriter::new(),
            published: Default::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn event(&self, e: KubeletEvent) {
        self.bus.emit(e, Some(self.gen.number));
    }

    /// Woken when a driver registers, its health changes or a DRA object
    /// arrives: a waiting retry may go now.
    pub fn changes(&self) -> &Notify {
        &self.changed
    }

    /// The first retry delay.
    pub fn retry_base(&self) -> Duration {
        self.spec.retry
    }

    /// Read the checkpoint (at start): recorded claims and the pods using them.
    /// A checkpoint that cannot be read stops the start, as the kubelet's
    /// NewManager does; a damaged one is first moved aside
    /// (`dra_manager_state.corrupt-<time>`, as the device manager's is), so
    /// nothing overwrites it and the next start begins empty.
    pub fn restore(&self) -> crate::core::Result<()> {
        let path = self.spec.checkpoint();
        let shown = path.display().to_string();
        match checkpoint::load(&path) {
            // GetOrCreate: a kubelet creates the file at start when there is none.
            checkpoint::Loaded::Missing => match crate::core::files::write_atomic(&path, &checkpoint::encode_new()) {
                Ok(()) => Ok(()),
                Err(e) => {
                    let error = format!("failed to store checkpoint {}: {e}", checkpoint::NAME);
                    self.event(KubeletEvent::DraCheckpointError { path: shown, error: error.clone() });
                    Err(crate::core::Error::failed(format!(
                        "failed to create claimInfo cache: GetOrCreate() on checkpoint state: {error}"
                    )))
                }
            },
            checkpoint::Loaded::Entries(entries) => {
                let cache = ClaimCache::from_checkpoint(&entries);
                // Claims of the checkpoint are this node's: deleted once gone.
                *self.published.lock().unwrap_or_else(|p| p.into_inner()) = cache.values().map(|c| c.key()).collect();
                self.lock().claims.cache = cache;
                self.event(KubeletEvent::DraCheckpointRestored { path: shown, claims: entries.len() });
                Ok(())
            }
            checkpoint::Loaded::Unreadable(e) => {
                let error = e.to_string();
                self.event(KubeletEvent::DraCheckpointError { path: shown, error: error.clone() });
                Err(crate::core::Error::failed(checkpoint::refusal(&error, None)))
            }
            checkpoint::Loaded::Damaged(error) => {
                let aside = crate::client::checkpoint::set_aside(&path);
                let set_aside = match &aside {
                    Ok(p) => p.display().to_string(),
                    Err(e) => e.to_string(),
                };
                self.event(KubeletEvent::DraCheckpointCorrupt { path: shown, error: error.clone(), set_aside });
                Err(crate::core::Error::failed(checkpoint::refusal(&error, Some(&aside))))
            }
        }
    }

    /// Whether this kubelet version has a DRAPlugin handler at all (1.31+).
    pub fn handles_plugins(&self) -> bool {
        self.spec.profile.dra_services != crate::kubelet::profile::DraServices::Absent
    }

    /// ValidatePlugin (dra_plugin_manager.go): the GetInfo answer's rules,
    /// and a service this kubelet version speaks (chosen as it chooses:
    /// [`crate::kubelet::profile::DraServices::choose`]). Returns that service.
    pub fn validate(&self, info: &PluginInfo) -> Result<&'static str, Refusal> {
        let service = self.spec.profile.dra_services.choose(&info.supported_versions).map_err(|e| {
            let e = format!(
                "invalid supported gRPC versions of DRA driver plugin {} at endpoint {}: {e}",
                info.name, info.endpoint
            );
            Refusal::new(RejectStage::Validation, e)
        })?;
        let version_rules = [rules::VERSIONS.id, rules::VERSION_ORDER.id];
        let fails: Vec<String> = rules::info_violations(info, &self.spec.root)
            .into_iter()
            .filter(|v| v.rule.is_fail() && !version_rules.contains(&v.rule.id))
            .map(|v| v.text)
            .collect();
        if !fails.is_empty() {
            // The kubelet's texts (dra_plugin_manager.go ValidatePlugin).
            let e =
                format!("invalid DRA driver plugin {} at endpoint {}: {}", info.name, info.endpoint, fails.join("; "));
            return Err(Refusal::new(RejectStage::Validation, e));
        }
        Ok(service)
    }

    /// RegisterPlugin: one driver instance (the plugin watcher found
    /// `socket`, whose GetInfo said `info`; `endpoint` is where the engine dials it).
    pub async fn register(self: &Arc<Self>, socket: &Path, info: &PluginInfo, endpoint: &Path) -> Result<(), Refusal> {
        let service = self.validate(info)?;
        let coexist = self.spec.profile.dra_instances == DraInstances::Coexist;
        if coexist {
            if let Some(e) = self.lock().registry.duplicate(&info.name, socket, endpoint) {
                return Err(Refusal::new(RejectStage::Validation, e));
            }
        }
        let conn = DraConn::connect(endpoint, self.spec.call_timeout)
            .await
            .map_err(|e| Refusal::new(RejectStage::DialBack, e.to_string()))?;
        let health = self.spec.profile.dra_health.choose(&info.supported_versions);
        let stop = self.gen.tasks.token().child_token();
        let instances = {
            let handle = Handle { conn: conn.clone(), stop: stop.clone() };
            let (stopped, instances) =
                self.lock().registry.register(&info.name, socket, endpoint, service, coexist, handle);
            stopped.iter().for_each(|h| h.stop.cancel());
            instances
        };
        self.sync_wipe(&info.name);
        {
            let (me, driver, endpoint, socket) =
                (self.clone(), info.name.clone(), endpoint.to_path_buf(), socket.to_path_buf());
            let stop = stop.clone();
            self.gen.tasks.spawn(async move {
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
            self.gen.tasks.spawn(async move {
                stop.run_until_cancelled_owned(me.follow_health(driver, conn, h)).await;
            });
        }
        self.changed.notify_waiters();
        Ok(())
    }

    /// DeRegisterPlugin: the instance registered through `socket` went away
    /// (socket deleted or re-created, or its registration not acknowledged).
    pub fn deregister_socket(self: &Arc<Self>, socket: &Path) {
        let gone = {
            let mut st = self.lock();
            let (gone, stopped) = st.registry.deregister(socket);
            stopped.iter().for_each(|h| h.stop.cancel());
            if let Some(g) = gone.as_ref().filter(|g| g.instances == 0) {
                st.health.cache.forget(&g.driver);
            }
            gone.map(|g| (g.driver, g.endpoint, g.instances))
        };
        if let Some((driver, endpoint, instances)) = gone {
            if instances == 0 {
                let me = self.clone();
                self.gen.tasks.spawn(async move { me.save_health().await });
            }
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
            let changed = self.lock().registry.set_connected(&driver, &socket, up);
            if changed {
                // The wipe is scheduled or cancelled before the event says why.
                self.sync_wipe(&driver);
                self.event(KubeletEvent::DraConnection {
                    driver: driver.clone(),
                    endpoint: endpoint.display().to_string(),
                    connected: up,
                });
            }
        }
    }

    /// The kubelet's sync: a driver with no connected instance gets its
    /// slices wiped after the delay; one that is usable again cancels that.
    fn sync_wipe(self: &Arc<Self>, driver: &str) {
        let Some(store) = self.spec.api.clone() else { return };
        // Before 1.34 (kubernetes#132058) only deregistration counts.
        let monitored = self.spec.profile.dra_connection_monitoring;
        let Some(ticket) = self.lock().registry.sync_wipe(driver, monitored) else { return };
        let (me, driver) = (self.clone(), driver.to_string());
        self.gen.tasks.spawn(async move {
            // Before 1.33 (kubernetes#129832) the slices go at once.
            if me.spec.profile.dra_wipe_delay {
                tokio::time::sleep(me.spec.wipe_delay).await;
            }
            if !me.lock().registry.take_wipe(&driver, ticket) {
                return;
            }
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
        let Some(store) = self.spec.api.as_ref().filter(|_| self.handles_plugins()) else { return };
        let slices = store.wipe_node(NODE_NAME);
        if !slices.is_empty() {
            self.event(KubeletEvent::DraNodeSlicesWiped { node: NODE_NAME.into(), slices });
        }
    }

    /// A DRA object manifest was read (or changed).
    pub fn put_object(&self, obj: Object, file: &Path) {
        let key = obj.key();
        match (&obj, &self.spec.api) {
            (Object::Api { value, .. }, Some(api)) => api.put_manifest(&key, value.clone()),
            // A class of the manifests is stored as it is written (admission writes it).
            (Object::Class { raw, .. }, Some(api)) => {
                api.put_object("resource.k8s.io", "deviceclasses", raw.clone());
            }
            // The device-taint eviction controller reads the rules of the manifests.
            (Object::TaintRule { rule, .. }, Some(api)) => api.put_taint_rule(&key, Some(rule.clone())),
            _ => {}
        }
        let shapes_claims = self.lock().objects.put(obj);
        if shapes_claims {
            self.publish_claims();
        }
        self.event(KubeletEvent::DraObject { key, file: file.display().to_string() });
        self.changed.notify_waiters();
    }

    /// A DRA object manifest went away.
    pub fn forget_object(&self, key: &str) {
        let removed = {
            let mut st = self.lock();
            if let Some(claim) = key.strip_prefix("ResourceClaim ") {
                st.claims.forget_api(claim);
            }
            st.objects.remove(key)
        };
        if let Some(api) = &self.spec.api {
            api.forget_manifest(key);
            match &removed {
                Some(Object::Class { name, .. }) => {
                    api.delete_object("resource.k8s.io", "deviceclasses", "", name);
                }
                Some(Object::TaintRule { .. }) => api.put_taint_rule(key, None),
                _ => {}
            }
        }
        if removed.as_ref().is_some_and(object_cache::shapes_claims) {
            self.publish_claims();
        }
    }

    /// Devices the allocator may hand out ([`ObjectCache::candidates`]):
    /// those of slices (manifests and published) and those health streams
    /// name (unless `slices_only`).
    fn candidates(&self, st: &mut State) -> Arc<Vec<Candidate>> {
        let api = self.spec.api.as_ref();
        st.objects.candidates(Sources {
            published: api.map(|a| a.slices_stamp()).unwrap_or(0),
            read_published: || api.map(|a| a.stamped_slices()).unwrap_or_default(),
            health: (!self.spec.slices_only).then_some(&st.health.cache),
            features: self.spec.profile.allocator_features(),
            skip_node_operations: self.spec.profile.dra_skip_node_operations,
        })
    }

    /// One attempt at preparing `pod`'s claims (manager.go PrepareResources):
    /// claims recorded and checkpointed first, then each driver called with
    /// its batch; every answer is recorded, also when a later one fails.
    /// A failure is reported (`claim-prepare-failed`, attempt `attempt`) and
    /// kept as the pod's error until an attempt succeeds.
    pub async fn prepare(self: &Arc<Self>, pod: &Pod, attempt: u32) -> Result<Prepared, DraError> {
        let r = match self.fetch_claims(pod).await {
            Ok(()) => self.prepare_once(pod).await,
            Err(cause) => Err(DraError::new(Operation::Prepare, cause)),
        };
        let pod_key = pod.key();
        self.lock().claims.prepare_done(&pod.uid, r.as_ref().err().map(ToString::to_string));
        if let Err(e) = &r {
            self.event(KubeletEvent::ClaimPrepareFailed { pod: pod_key, error: e.to_string(), attempt });
        } else {
            self.report_extended(pod);
        }
        r
    }

    /// A pod of the API server: each of its claims read again from the API
    /// server, as the kubelet reads them at every attempt; a claim that
    /// changed replaces the one held.
    async fn fetch_claims(&self, pod: &Pod) -> Result<(), Cause> {
        let Some(reader) = self.spec.claim_reader.as_ref().filter(|_| pod.from_api) else { return Ok(()) };
        for c in pod_claims(pod).iter().filter(|c| c.template.is_none() && c.spec.is_none()) {
            let fetched = reader.claim(&pod.namespace, &c.name).await;
            let fail = |source| Cause::Fetch { claim: c.name.clone(), source: Box::new(source) };
            let mut v = fetched.map_err(fail)?;
            let generated = pod
                .resource_claims
                .iter()
                .any(|pc| matches!(&pc.source, ClaimSource::Generated { claim, .. } if *claim == c.name));
            if generated {
                let group = self.spec.profile.dra_workload_resource_claims.enabled();
                is_for_pod(pod, &v, group).map_err(|message| Cause::NotForPod { message })?;
            }
            v["kind"] = serde_json::json!("ResourceClaim");
            let obj = objects::parse(&v).map_err(|e| fail(FetchError::Invalid(e)))?;
            let key = obj.key();
            let same = {
                let mut st = self.lock();
                st.claims.read_from_api(format!("{}/{}", pod.namespace, c.name));
                matches!((st.objects.get(&key), &obj),
                    (Some(Object::Claim { raw: held, .. }), Object::Claim { raw, .. }) if held == raw)
            };
            if !same {
                self.put_object(obj, Path::new("(api server)"));
            }
        }
        Ok(())
    }

    /// Return once no checkpoint or health-cache write of this manager is
    /// still running (a write whose task was cancelled at the generation's
    /// end goes on to its end on the blocking pool).
    pub async fn settled(&self) {
        self.claims_file.settled().await;
        self.health_file.settled().await;
    }

    /// The claims of the control plane this manager did not write (those it
    /// allocated for pods of the API), with their keys: the devices of those
    /// not read yet are given to no static pod by this node's scheduler
    /// part, as kube-scheduler counts every allocated claim. Read without
    /// the state lock (publishing holds `published`, then the state).
    fn written_elsewhere(&self, pod: &Pod) -> Vec<(String, serde_json::Value)> {
        let Some(api) = self.spec.api.as_ref().filter(|_| !pod.from_api) else { return Vec::new() };
        let published = self.published.lock().unwrap_or_else(|p| p.into_inner()).clone();
        api.claim_keys()
            .into_iter()
            .filter(|k| !published.contains(k))
            .filter_map(|k| Some((k.clone(), api.claim(&k)?)))
            .collect()
    }

    /// After a prepare: each container of the special claim that gets no
    /// CDI device is said in an event (dra-driver-cpu#197).
    fn report_extended(&self, pod: &Pod) {
        let unserved = self.lock().claims.unserved(pod);
        for (m, message) in unserved {
            self.event(KubeletEvent::ExtendedResourceUnserved {
                pod: pod.key(),
                container: m.container_name,
                resource: m.resource_name,
                request: m.request_name,
                message,
            });
        }
    }

    async fn prepare_once(self: &Arc<Self>, pod: &Pod) -> Result<Prepared, DraError> {
        let fail = |cause| DraError::new(Operation::Prepare, cause);
        let pod_key = pod.key();
        let elsewhere = self.written_elsewhere(pod);
        let (plan, conns, change) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let p = st.claims.pod_entry(pod).clone();
            let candidates = self.candidates(st);
            let held: Vec<Allocated> = st.claims.held(&elsewhere);
            let drivers: BTreeSet<String> = st.registry.drivers().map(|(d, _)| d.clone()).collect();
            let world = World {
                objects: st.objects.all(),
                candidates: candidates.as_slice(),
                drivers: &drivers,
                features: self.spec.profile.allocator_features(),
                pod_group: pod
                    .pod_group
                    .as_deref()
                    .filter(|_| self.spec.profile.dra_workload_resource_claims.enabled()),
                as_written: pod.from_api,
                own_plane: self.spec.api.is_some() || self.spec.joined_dpctl_plane,
                held: &held,
                now: std::time::SystemTime::now(),
            };
            let plan =
                st.claims.cache.plan_prepare(&p.namespace, &pod.uid, &pod.name, &p.pod_claims, &world).map_err(fail)?;
            let change = plan.record.then(|| self.claims_file.changed());
            let conns: BTreeMap<String, (DraConn, &'static str)> =
                plan.batches.keys().filter_map(|d| Some((d.clone(), st.newest(d)?))).collect();
            (plan, conns, change)
        };
        // The time waited for the checkpoint on disk, for the claims' events.
        let mut synced = Duration::ZERO;
        if let Some(change) = change {
            // Recorded on disk before any driver is called.
            synced += self.persist_timed(change).await.map_err(fail)?;
        }
        for c in &plan.allocated {
            self.event(KubeletEvent::ClaimAllocated {
                claim: c.key(),
                uid: c.uid.clone(),
                devices: c.allocation.iter().map(|a| format!("{}/{}/{}", a.driver, a.pool, a.device)).collect(),
            });
        }
        // The scheduler's PreBind: the pod is bound (and prepared) only once
        // the binding conditions of the claims allocated for it are met.
        self.await_binding(&pod_key, &plan.preparing).await.map_err(fail)?;
        for (claim, driver) in &plan.skipped {
            let operation = Operation::Prepare.rpc().to_string();
            self.event(KubeletEvent::DraOperationSkipped { claim: claim.clone(), driver: driver.clone(), operation });
        }
        for key in &plan.cached {
            self.claim_prepared(&pod_key, key, true, None);
        }
        let mut result = Ok(());
        // Each driver's NodePrepareResources round trip (µs), for its claims' events.
        let mut call_us: BTreeMap<String, u64> = BTreeMap::new();
        for (driver, claims) in &plan.batches {
            let Some((conn, service)) = conns.get(driver) else {
                result = Err(Cause::NotRegistered { driver: driver.clone() });
                break;
            };
            let called = std::time::Instant::now();
            let answer = conn.prepare(service, claims.clone()).await;
            let took = u64::try_from(called.elapsed().as_micros()).unwrap_or(u64::MAX);
            for c in claims {
                call_us.insert(format!("{}/{}", c.namespace, c.name), took);
            }
            let recorded = match answer {
                Err(e) => Err(Cause::Call { op: Operation::Prepare, source: Box::new(e) }),
                Ok(resp) => self.lock().claims.cache.prepared(driver, claims, &resp),
            };
            if let Err(e) = recorded {
                result = Err(e);
                break;
            }
        }
        // Every answer is kept, also when a later driver failed: the claims
        // are unprepared by every driver when the pod goes.
        // The CDI IDs checked against the spec files off the state lock.
        let unresolved: Vec<(&String, Vec<String>)> = if result.is_ok() {
            let ids: Vec<(&String, Vec<String>)> = {
                let st = self.lock();
                let cache = &st.claims.cache;
                plan.preparing.iter().map(|k| (k, cache.get(k).map(|c| c.cdi_ids()).unwrap_or_default())).collect()
            };
            ids.into_iter().map(|(k, ids)| (k, self.cdi.unresolved(&self.spec.cdi_dirs, &ids))).collect()
        } else {
            Vec::new()
        };
        let change = {
            let mut st = self.lock();
            if result.is_ok() {
                st.claims.cache.mark_prepared(&plan.preparing);
                for (k, missing) in unresolved {
                    st.claims.cache.set_unresolved(k, missing);
                }
            }
            self.claims_file.changed()
        };
        let stored = self.persist_timed(change).await.map(|t| synced += t);
        if result.is_ok() && stored.is_ok() {
            let sync_us = u64::try_from(synced.as_micros()).unwrap_or(u64::MAX);
            for k in &plan.preparing {
                let timing = call_us.get(k).map(|&call_us| CallTiming { call_us, sync_us });
                self.claim_prepared(&pod_key, k, false, timing);
            }
        }
        result.and(stored).map_err(fail)?;
        Ok(Prepared { called: !plan.batches.is_empty() })
    }

    /// Wait, as kube-scheduler's PreBind does (dynamicresources.go
    /// isPodReadyForBinding, polled every 5 s), until every claim of `keys`
    /// that this node's scheduler allocated on devices with binding
    /// conditions has them all True in the stored claim's `status.devices`.
    /// A failure condition True, or the binding timeout passed since the
    /// allocation, deallocates the claim (its status, what drivers wrote
    /// included, goes with it) and fails this attempt: the next allocates
    /// it again.
    async fn await_binding(self: &Arc<Self>, pod: &str, keys: &[String]) -> Result<(), Cause> {
        let pending = |st: &State| -> Vec<(String, Vec<Allocated>, Option<std::time::SystemTime>)> {
            keys.iter()
                .filter_map(|k| st.claims.cache.get(k))
                .filter(|c| c.binding_pending)
                .map(|c| (c.key(), c.allocation.clone(), c.allocated_at))
                .collect()
        };
        let first = pending(&self.lock()).is_empty();
        if first {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let mut told: BTreeSet<String> = BTreeSet::new();
        loop {
            let mut waiting = false;
            let claims = pending(&self.lock());
            for (key, devices, at) in claims {
                let stored = match (&self.spec.api, &self.spec.claim_reader) {
                    (Some(a), _) => a.claim(&key).unwrap_or_default(),
                    (None, Some(r)) => {
                        let (ns, name) = key.split_once('/').unwrap_or(("", key.as_str()));
                        r.claim(ns, name).await.unwrap_or_default()
                    }
                    (None, None) => serde_json::Value::Null,
                };
                let now = std::time::SystemTime::now();
                match scheduler::binding(&devices, &stored["status"]["devices"], at, now, self.spec.binding_timeout) {
                    scheduler::Binding::Ready => {
                        self.lock().claims.cache.binding_met(&key);
                        let waited_ms = start.elapsed().as_millis() as u64;
                        self.event(KubeletEvent::ClaimBindingMet { pod: pod.to_string(), claim: key, waited_ms });
                    }
                    scheduler::Binding::Waiting(why) => {
                        waiting = true;
                        if told.insert(key.clone()) {
                            self.event(KubeletEvent::ClaimBindingPending {
                                pod: pod.to_string(),
                                claim: key,
                                waiting: why,
                            });
                        }
                    }
                    binding => {
                        let (change, api_owned) = {
                            let mut st = self.lock();
                            st.claims.cache.remove(std::slice::from_ref(&key));
                            (self.claims_file.changed(), st.claims.is_api(&key))
                        };
                        self.persist(change).await?;
                        if api_owned {
                            // The control plane's claim: deallocated in the store as the
                            // scheduler's Unreserve and PostFilter leave it (reservedFor,
                            // allocation and devices cleared); its controller allocates
                            // it again for the pod.
                            if let Some(api) = &self.spec.api {
                                if let Some(mut c) = api.claim(&key) {
                                    if let Some(st) = c.get_mut("status").and_then(|s| s.as_object_mut()) {
                                        for f in ["reservedFor", "allocation", "devices"] {
                                            st.remove(f);
                                        }
                                    }
                                    api.put_claim(c);
                                }
                            } else if let Some(r) = &self.spec.claim_reader {
                                // A node of dpctl's cluster: through the API server it joined.
                                let (ns, name) = key.split_once('/').unwrap_or(("", key.as_str()));
                                if let Err(e) = r.deallocate(ns, name).await {
                                    self.event(KubeletEvent::ClaimBindingFailed {
                                        pod: pod.to_string(),
                                        claim: key.clone(),
                                        error: format!("deallocating the claim in the API server: {e}"),
                                    });
                                }
                            }
                        }
                        let cause = Cause::Binding { claim: key.clone(), binding };
                        self.event(KubeletEvent::ClaimBindingFailed {
                            pod: pod.to_string(),
                            claim: key,
                            error: cause.to_string(),
                        });
                        return Err(cause);
                    }
                }
            }
            if !waiting {
                return Ok(());
            }
            tokio::time::sleep(BINDING_POLL).await;
        }
    }

    /// `timing`: the NodePrepareResources round trip that prepared it and
    /// the attempt's checkpoint waits (`None` when no call was made).
    fn claim_prepared(&self, pod: &str, key: &str, cached: bool, timing: Option<CallTiming>) {
        let Some(c) = self.lock().claims.cache.get(key).cloned() else { return };
        if !cached {
            for id in &c.cdi_unresolved {
                self.event(KubeletEvent::CdiUnresolved { claim: c.key(), cdi_id: id.clone() });
            }
        }
        self.event(KubeletEvent::ClaimPrepared {
            pod: pod.to_string(),
            claim: c.key(),
            uid: c.uid.clone(),
            devices: c.device_words(),
            cdi_ids: c.cdi_ids(),
            cached,
            call_us: timing.map(|t| t.call_us),
            sync_us: timing.map(|t| t.sync_us),
        });
    }

    /// A pod with claims was admitted: know it from now on (before any
    /// attempt), so its claims are never taken for a gone pod's.
    /// A pod admitted again (same UID) stops a background unprepare of its
    /// earlier self.
    pub fn track(&self, pod: &Pod) {
        if let Some(t) = self.lock().claims.track(pod) {
            t.cancel();
        }
    }

    /// Whether pod `uid` has claims this manager knows of.
    pub fn knows(&self, uid: &str) -> bool {
        self.lock().claims.knows(uid)
    }

    /// One attempt at unpreparing pod `uid`'s claims (manager.go
    /// UnprepareResources); on success the pod is forgotten. A failure is
    /// reported (`claim-unprepare-failed`, attempt `attempt`).
    pub async fn unprepare(self: &Arc<Self>, uid: &str, attempt: u32) -> Result<(), DraError> {
        let r = self.unprepare_once(uid).await;
        let pod = self.lock().claims.unprepare_done(uid, r.as_ref().err().map(ToString::to_string));
        if let (Err(e), Some(pod)) = (&r, pod) {
            self.event(KubeletEvent::ClaimUnprepareFailed { pod, error: e.to_string(), attempt });
        }
        r
    }

    async fn unprepare_once(self: &Arc<Self>, uid: &str) -> Result<(), DraError> {
        let fail = |cause| DraError::new(Operation::Unprepare, cause);
        let (pod_key, plan, conns) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pod_key, keys)) = st.claims.unprepare_keys(uid) else { return Ok(()) };
            let plan = st.claims.cache.plan_unprepare(uid, &keys);
            let conns: BTreeMap<String, Option<(DraConn, &'static str)>> =
                plan.batches.keys().map(|d| (d.clone(), st.newest(d))).collect();
            (pod_key, plan, conns)
        };
        for (claim, driver) in &plan.skipped {
            let operation = Operation::Unprepare.rpc().to_string();
            self.event(KubeletEvent::DraOperationSkipped { claim: claim.clone(), driver: driver.clone(), operation });
        }
        for (driver, claims) in &plan.batches {
            let Some(Some((conn, service))) = conns.get(driver) else {
                return Err(fail(Cause::NotRegistered { driver: driver.clone() }));
            };
            let resp = conn
                .unprepare(service, claims.clone())
                .await
                .map_err(|e| fail(Cause::Call { op: Operation::Unprepare, source: Box::new(e) }))?;
            claiminfo::unprepared(claims, &resp).map_err(fail)?;
        }
        let (removed, change) = {
            let mut st = self.lock();
            let removed = st.claims.cache.remove(&plan.remove);
            (removed, self.claims_file.changed())
        };
        self.persist(change).await.map_err(fail)?;
        for (claim, uid) in plan.shared {
            self.event(KubeletEvent::ClaimUnprepared { pod: pod_key.clone(), claim, uid, still_used: true });
        }
        for c in removed {
            let (claim, uid) = (c.key(), c.uid);
            self.event(KubeletEvent::ClaimUnprepared { pod: pod_key.clone(), claim, uid, still_used: false });
        }
        Ok(())
    }

    /// Keep unpreparing pod `uid`'s claims in the background, with the
    /// kubelet's doubling backoff, until it succeeds (or the generation ends);
    /// `attempt` attempts were made already.
    pub fn unprepare_in_background(self: &Arc<Self>, uid: &str, attempt: u32) {
        let token = self.gen.tasks.token().child_token();
        match self.lock().claims.start_unprepare(uid, token.clone()) {
            Err(_) => return,
            Ok(old) => old.iter().for_each(CancellationToken::cancel),
        }
        let (me, uid) = (self.clone(), uid.to_string());
        self.gen.tasks.spawn(async move {
            token
                .run_until_cancelled(async {
                    let mut attempt = attempt;
                    loop {
                        let woken = me.changed.notified();
                        tokio::pin!(woken);
                        woken.as_mut().enable();
                        tokio::select! {
                            _ = tokio::time::sleep(backoff(me.spec.retry, attempt)) => {}
                            _ = woken => {}
                        }
                        attempt += 1;
                        if me.unprepare(&uid, attempt).await.is_ok() {
                            break;
                        }
                    }
                })
                .await;
            me.lock().claims.end_unprepare(&uid);
        });
    }

    /// After the first manifest scan of a (re)start: claims the checkpoint
    /// holds for pods that did not come back are unprepared, as the kubelet's
    /// pod cleanup does for pods gone while it was down.
    pub fn unprepare_orphans(self: &Arc<Self>) {
        let orphans = self.lock().claims.orphans();
        for uid in orphans {
            self.unprepare_in_background(&uid, 0);
        }
    }

    /// The claims as resource.k8s.io objects (what the local API server serves).
    pub fn claim_objects(&self, node: &str) -> Vec<serde_json::Value> {
        let st = self.lock();
        st.claims.objects(st.objects.all(), node)
    }

    /// Resource name → DeviceClass, from the DeviceClasses known (the scheduler's resolver).
    pub fn class_mapping(&self) -> BTreeMap<String, String> {
        extended::class_mapping(self.lock().objects.all().values())
    }

    /// Known claims.
    pub fn claims(&self) -> Vec<ClaimInfo> {
        self.lock().claims.cache.values().cloned().collect()
    }

    /// Pods with claims, each container's allocatedResourcesStatus filled.
    pub fn pods(&self) -> Vec<PodInfo> {
        let message = self.spec.profile.dra_health_message.enabled();
        let st = self.lock();
        st.claims.pods(&st.health.cache, message)
    }

    /// Registered drivers.
    pub fn drivers(&self) -> Vec<DriverStatus> {
        let published: Vec<serde_json::Value> = self.spec.api.iter().flat_map(|a| a.slices()).collect();
        let st = self.lock();
        st.registry
            .drivers()
            .map(|(d, list)| {
                let mut l: Vec<_> = list.iter().collect();
                l.sort_by_key(|i| i.seq);
                DriverStatus {
                    driver: d.clone(),
                    endpoints: l.iter().map(|i| i.endpoint.display().to_string()).collect(),
                    service: l.last().map(|i| i.service.to_string()).unwrap_or_default(),
                    health: st.health.cache.words(d),
                    slices: published
                        .iter()
                        .filter(|s| s["spec"]["driver"] == d.as_str())
                        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string))
                        .collect(),
                }
            })
            .collect()
    }

    /// PodResources' dynamic_resources for one container of pod `uid`.
    pub fn dynamic_resources(&self, uid: &str, container: &str) -> Vec<crate::api::podresources::DynamicResource> {
        self.lock().claims.dynamic_resources(uid, container)
    }
}

#[cfg(test)]
mod manager_tests;
#[cfg(test)]
mod tests;
