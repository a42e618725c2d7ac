//! The async shell around the device-manager core: it carries out what the
//! core decides (RPCs, timers, checkpoint writes, the event log). Every task
//! belongs to one [`Generation`]; closing a manager stops its event log and
//! checkpoint writes first, then cancels and awaits every task of its
//! generation, then writes the final checkpoint, so nothing of an old
//! generation can happen after the next one starts.

use crate::api::deviceplugin::{Device, DevicePluginOptions};
use crate::client::checkpoint;
use crate::client::conn::PluginConn;
use crate::core::coalesced::CoalescedWriter;
use crate::core::time::millis;
use crate::kubelet::devicemanager::core::state::EndpointInfo;
use crate::kubelet::devicemanager::core::{
    AdmissionError, ContainerStatus, Histogram, PodStatus, ResourceStatus, State,
};
use crate::kubelet::event::{capped, EventBus, GenerationEvents, KubeletEvent, Registrant};
use crate::kubelet::manifest::Pod;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Why [`Manager::start_endpoint`] installed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// The generation closes (the kubelet restarts): register again.
    Restarting,
    /// The kubelet version refuses the registration.
    Refused(crate::kubelet::devicemanager::core::state::Refused),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Restarting => f.write_str("the kubelet is restarting"),
            StartError::Refused(r) => r.fmt(f),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Restarting => None,
            StartError::Refused(r) => Some(r),
        }
    }
}

pub use crate::kubelet::devicemanager::core::TopologyPolicy;
pub use crate::kubelet::generation::Generation;

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
    /// The kubelet version whose behaviour to reproduce.
    pub profile: crate::kubelet::profile::Profile,
}

struct Inner {
    st: State,
    hist: BTreeMap<String, Histogram>,
    conns: BTreeMap<u64, PluginConn>,
    /// Each live endpoint's stream, by endpoint ID.
    endpoints: BTreeMap<u64, CancellationToken>,
    admitting: BTreeMap<String, Pod>,
    closed: bool,
    /// Events decided under the lock, logged after it is released.
    outbox: Vec<KubeletEvent>,
}

impl Config {
    /// The kubelet's settings for `plugin_dir`: checkpoint inside it, no
    /// topology policy, 5 min grace period, 4 MiB receive limit, 30 s calls.
    pub fn kubelet(plugin_dir: &Path) -> Self {
        Config {
            plugin_dir: plugin_dir.to_path_buf(),
            checkpoint: plugin_dir.join(crate::core::paths::CHECKPOINT_NAME),
            topology: TopologyPolicy::None,
            grace_period: Duration::from_secs(300),
            max_recv: crate::api::KUBELET_MAX_RECV,
            call_timeout: Duration::from_secs(30),
            pre_start_timeout: Duration::from_secs(30),
            profile: crate::kubelet::profile::Profile::default(),
        }
    }
}

/// The device manager of one generation.
pub struct Manager {
    inner: Mutex<Inner>,
    admission: tokio::sync::Mutex<()>,
    /// The checkpoint's change counter (the state's version) and written mark.
    file: CoalescedWriter,
    dirty: tokio::sync::Notify,
    restarted: Mutex<Option<Instant>>,
    /// Settings.
    pub cfg: Config,
    /// Where events go (the log and in-process subscribers).
    pub bus: EventBus,
    /// This generation's events on the bus (closed with the generation);
    /// the container manager emits through them too.
    pub events: Arc<GenerationEvents>,
    /// The generation every task of this manager belongs to.
    pub gen: Generation,
}

impl Manager {
    /// A manager with empty state. Call [`Manager::start`] to run its checkpoint writer.
    pub fn new(cfg: Config, bus: EventBus, gen: Generation) -> Arc<Self> {
        let inner = Inner {
            st: State::keyed(cfg.profile.endpoints),
            hist: BTreeMap::new(),
            conns: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            admitting: BTreeMap::new(),
            closed: false,
            outbox: Vec::new(),
        };
        Arc::new(Manager {
            inner: Mutex::new(inner),
            admission: tokio::sync::Mutex::new(()),
            file: CoalescedWriter::new(),
            dirty: tokio::sync::Notify::new(),
            restarted: Mutex::new(None),
            cfg,
            events: GenerationEvents::new(bus.clone(), gen.number),
            bus,
            gen,
        })
    }

    /// Start the background checkpoint writer (registration and device
    /// changes are persisted coalesced; admissions flush before they are acknowledged).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        let token = self.gen.tasks.token().clone();
        // Not dropped mid-write: the loop only stops between writes.
        drop(self.gen.tasks.spawn_joined(async move {
            loop {
                tokio::select! {
                    _ = me.dirty.notified() => {}
                    _ = token.cancelled() => return,
                }
                if let Err(e) = me.flush(false).await {
                    me.event(KubeletEvent::CheckpointError { error: e.to_string() });
                }
            }
        }));
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Report an event, tagged with this generation, unless the generation is closed.
    pub fn event(&self, event: KubeletEvent) {
        self.events.emit(event);
    }

    /// Queue an event decided under the state lock; [`Manager::unlock`] reports it.
    fn ev(&self, g: &mut Inner, event: KubeletEvent) {
        g.outbox.push(event);
    }

    /// Release the state lock, then log what was queued under it (the log can
    /// block on a slow reader; state readers must not wait for it).
    fn unlock(&self, mut g: MutexGuard<'_, Inner>) {
        let out = std::mem::take(&mut g.outbox);
        drop(g);
        for event in out {
            self.event(event);
        }
    }

    /// Write the checkpoint if the state changed since the last write
    /// (coalesced: the state's version is the change number). After
    /// [`Manager::close`] only the final write (`last`) is made.
    pub async fn flush(self: &Arc<Self>, last: bool) -> crate::core::Result<()> {
        let upto = {
            let g = self.lock();
            if g.closed && !last {
                return Ok(());
            }
            self.file.changed_up_to(g.st.version)
        };
        let snapshot = || {
            let g = self.lock();
            // Every version up to `upto` is in the state read here.
            (!g.closed || last).then(|| g.st.checkpoint_data())
        };
        let path = self.cfg.checkpoint.clone();
        self.file.write(upto, snapshot, move |data| checkpoint::write(&path, &data)).await
    }

    /// End this generation: no event or checkpoint write of it after this
    /// returns, except the final checkpoint written here.
    pub async fn close(self: &Arc<Self>) {
        self.events.close();
        self.lock().closed = true;
        self.gen.tasks.stop().await;
        if let Err(e) = self.flush(true).await {
            self.bus.emit(KubeletEvent::CheckpointError { error: e.to_string() }, Some(self.gen.number));
        }
        self.file.settled().await;
    }

    fn changed(&self) {
        self.dirty.notify_one();
    }

    /// Restore from the checkpoint. A corrupt file is set aside and reported.
    /// Returns the resources the checkpoint lists (capacity 0 until their plugin returns).
    pub fn restore(self: &Arc<Self>) -> BTreeSet<String> {
        let path = &self.cfg.checkpoint;
        let loaded = match checkpoint::read(path) {
            Ok(l) => l,
            Err(e) => {
                let aside =
                    checkpoint::set_aside(path).map(|p| p.display().to_string()).unwrap_or_else(|e2| e2.to_string());
                self.event(KubeletEvent::CheckpointCorrupt { error: e.to_string(), set_aside: aside });
                None
            }
        };
        let Some(l) = loaded else { return BTreeSet::new() };
        if !l.checksum_ours {
            // The kubelet's GetCheckpoint fails with CorruptCheckpointError and
            // Start goes on without the file's allocations (manager.go, Start:
            // "Continue after failing to read checkpoint file").
            self.event(KubeletEvent::CheckpointChecksum {
                file: path.display().to_string(),
                note: "checksum does not match the content; ignored, as the kubelet ignores it".into(),
            });
            return BTreeSet::new();
        }
        let mut g = self.lock();
        let n = g.st.restore(&l.checkpoint.data);
        // What was just read is what the file holds.
        self.file.holds(g.st.version);
        let resources: BTreeSet<String> = g.st.resources.keys().cloned().collect();
        let resources_list = resources.iter().cloned().collect();
        self.ev(&mut g, KubeletEvent::CheckpointRestored { allocations: n, resources: resources_list });
        self.unlock(g);
        // As the kubelet does, a resource known only from the checkpoint is an
        // endpoint stopped now: it goes when the grace period ends without its plugin.
        for r in &resources {
            let (me, r) = (self.clone(), r.clone());
            self.gen.tasks.spawn(async move {
                tokio::time::sleep(me.cfg.grace_period).await;
                let mut g = me.lock();
                if !g.closed && g.st.waiting_over(&r) {
                    me.ev(&mut g, KubeletEvent::ResourceRemoved { resource: r, reason: "grace period over".into() });
                    me.unlock(g);
                    me.changed();
                }
            });
        }
        resources
    }

    /// Remember that a restart happened now and which resources should come back.
    pub fn expect_back(&self, resources: BTreeSet<String>) {
        if !resources.is_empty() {
            *self.restarted.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            self.lock().st.expected_back = resources;
        }
    }

    /// Count a Register call (before validation, as the kubelet does).
    pub fn count_registration(&self, resource: &str) {
        *self.lock().st.registrations.entry(resource.to_string()).or_default() += 1;
    }

    /// Install a connected endpoint and follow its ListAndWatch stream as a
    /// task of this generation. Refused while the generation closes, or when
    /// the kubelet version refuses it (the connection is then dropped).
    pub fn start_endpoint(
        self: &Arc<Self>,
        resource: &str,
        conn: PluginConn,
        options: DevicePluginOptions,
        who: Registrant,
    ) -> Result<u64, StartError> {
        let token = self.gen.tasks.token().child_token();
        let mut g = self.lock();
        if g.closed {
            return Err(StartError::Restarting);
        }
        let ep = EndpointInfo {
            id: 0,
            socket: conn.socket().to_path_buf(),
            via: who.via,
            pre_start_required: options.pre_start_required,
            get_preferred_allocation_available: options.get_preferred_allocation_available,
        };
        let socket = ep.socket.display().to_string();
        // Earlier instances keep streaming (the kubelet does not close them).
        let reg = g.st.register(resource, ep).map_err(StartError::Refused)?;
        g.conns.insert(reg.id, conn.clone());
        g.endpoints.insert(reg.id, token.clone());
        self.ev(
            &mut g,
            KubeletEvent::Registered {
                resource: resource.to_string(),
                endpoint: socket,
                endpoint_sent: crate::core::text::cap(&who.endpoint).into_owned(),
                via: who.via,
                version: crate::core::text::cap(&who.version).into_owned(),
                request_options: who.request_options,
                pre_start_required: options.pre_start_required,
                get_preferred_allocation_available: options.get_preferred_allocation_available,
                replaced: reg.replaced,
                older_instances: reg.older,
            },
        );
        if let Some(all) = reg.back {
            let took = self.restarted.lock().unwrap_or_else(|p| p.into_inner()).map(|t| t.elapsed());
            let after_ms = millis(took.unwrap_or_default());
            self.ev(&mut g, KubeletEvent::PluginBack { resource: resource.to_string(), after_ms });
            if all {
                self.ev(&mut g, KubeletEvent::AllPluginsBack { after_ms });
            }
        }
        self.unlock(g);
        self.changed();
        let me = self.clone();
        let res = resource.to_string();
        self.gen.tasks.spawn(async move {
            tokio::select! {
                _ = me.clone().follow(res, reg.id, conn) => {}
                _ = token.cancelled() => {}
            }
        });
        Ok(reg.id)
    }

    /// A ListAndWatch snapshot arrived from endpoint `id`.
    pub fn snapshot(&self, resource: &str, id: u64, devices: Vec<Device>, bytes: usize) {
        let mut g = self.lock();
        let Some(d) = g.st.snapshot(resource, id, &devices) else { return };
        let problems = crate::protocol::deviceplugin::devices(&devices);
        let endpoint = g.conns.get(&id).map(|c| c.socket().display().to_string()).unwrap_or_default();
        self.ev(
            &mut g,
            KubeletEvent::Devices {
                resource: resource.to_string(),
                endpoint,
                capacity: d.capacity,
                allocatable: d.allocatable,
                added: capped(&d.added),
                removed: capped(&d.removed),
                health_changed: capped(&d.health_changed),
                bytes,
                snapshot: Some(Arc::new(devices)),
            },
        );
        for p in problems {
            let rule = Some(p.rule.id.to_string());
            self.ev(
                &mut g,
                KubeletEvent::DeviceWarning { resource: resource.to_string(), problem: p.to_string(), rule },
            );
        }
        self.unlock(g);
        self.changed();
    }

    /// Endpoint `id`'s stream ended. What that does depends on the kubelet
    /// version (see [`crate::kubelet::devicemanager::core::state::Ended`]); when
    /// the current endpoint stops, a grace timer of this generation removes
    /// the resource (listed at 0/0) unless it registers again.
    pub fn stream_ended(self: &Arc<Self>, resource: &str, id: u64, why: &str) {
        use crate::kubelet::devicemanager::core::state::Ended;
        let mut g = self.lock();
        let endpoint = g.conns.get(&id).map(|c| c.socket().display().to_string()).unwrap_or_default();
        let ended = g.st.stream_ended(resource, id);
        let stopped = match ended {
            Ended::Ignored => return,
            Ended::InstanceGone { capacity, allocatable } => {
                g.conns.remove(&id);
                if let Some(t) = g.endpoints.remove(&id) {
                    t.cancel();
                }
                self.ev(
                    &mut g,
                    KubeletEvent::InstanceEnded {
                        resource: resource.to_string(),
                        endpoint,
                        reason: why.to_string(),
                        capacity,
                        allocatable,
                    },
                );
                self.unlock(g);
                self.changed();
                return;
            }
            Ended::Stopped { capacity } => {
                self.ev(
                    &mut g,
                    KubeletEvent::StreamEnded {
                        resource: resource.to_string(),
                        endpoint,
                        reason: why.to_string(),
                        capacity,
                        allocatable: 0,
                        grace_period_ms: millis(self.cfg.grace_period),
                        disconnected: None,
                        note: None,
                    },
                );
                id
            }
            Ended::Disconnected { victim, capacity } => {
                g.conns.remove(&id);
                g.endpoints.remove(&id);
                // The kubelet closes the *current* instance's connection and stream.
                if let Some(t) = g.endpoints.remove(&victim) {
                    t.cancel();
                }
                let socket = g.st.resources.get(resource).and_then(|r| r.endpoint.as_ref()).map(|e| e.socket.clone());
                let note = format!(
                    "an earlier instance's stream ended and kubelet {} disconnected the current one (kubernetes#121994)",
                    self.cfg.profile.version
                );
                self.ev(
                    &mut g,
                    KubeletEvent::StreamEnded {
                        resource: resource.to_string(),
                        endpoint,
                        reason: why.to_string(),
                        capacity,
                        allocatable: 0,
                        grace_period_ms: millis(self.cfg.grace_period),
                        disconnected: Some(socket.map(|s| s.display().to_string()).unwrap_or_default()),
                        note: Some(note),
                    },
                );
                victim
            }
        };
        self.unlock(g);
        let me = self.clone();
        let resource = resource.to_string();
        self.gen.tasks.spawn(async move {
            tokio::time::sleep(me.cfg.grace_period).await;
            let mut g = me.lock();
            if g.closed || !g.st.grace_over(&resource, stopped) {
                return;
            }
            g.conns.remove(&stopped);
            g.endpoints.remove(&stopped);
            me.ev(&mut g, KubeletEvent::ResourceRemoved { resource, reason: "grace period over".into() });
            me.unlock(g);
            me.changed();
        });
    }

    /// The resource and endpoint ID registered from `socket` (plugin-watcher deregistration).
    pub fn resource_of(&self, socket: &Path) -> Option<(String, u64)> {
        self.lock().st.endpoint_at(socket)
    }

    /// Every resource's numbers.
    pub fn resources(&self) -> Vec<ResourceStatus> {
        self.lock().st.resource_status()
    }

    /// Healthy devices of running resources by NUMA node (GetAllocatableResources).
    pub fn allocatable(&self) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        self.lock().st.allocatable_devices()
    }

    /// Admitted pods and their allocations.
    pub fn pods(&self) -> Vec<PodStatus> {
        self.lock().st.pod_status()
    }

    /// Pods as PodResources lists them: admitted ones with their devices, and
    /// pods whose admission is in flight, without devices yet (as the kubelet
    /// lists a pod it is still admitting).
    pub fn pods_listed(&self) -> Vec<PodStatus> {
        let g = self.lock();
        let mut pods = g.st.pod_status();
        pods.extend(g.admitting.values().map(|p| {
            let containers = p.init_containers.iter().map(|c| (c, true)).chain(p.containers.iter().map(|c| (c, false)));
            PodStatus {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                uid: p.uid.clone(),
                file: String::new(),
                containers: containers
                    .map(|(c, init)| ContainerStatus {
                        name: c.name.clone(),
                        init,
                        sidecar: init && c.restart_always,
                        resources: BTreeMap::new(),
                    })
                    .collect(),
            }
        }));
        pods
    }

    /// Rejected manifests and why.
    pub fn rejected(&self) -> BTreeMap<PathBuf, AdmissionError> {
        self.lock().st.rejected.clone()
    }

    /// Metrics: registrations and alloc histograms per resource.
    pub fn metrics(&self) -> (BTreeMap<String, u64>, BTreeMap<String, Histogram>) {
        let g = self.lock();
        (g.st.registrations.clone(), g.hist.clone())
    }

    /// Record a manifest that could not be admitted.
    pub fn reject_file(&self, file: PathBuf, why: AdmissionError) {
        let mut g = self.lock();
        let pod_reason = why.reason();
        self.ev(
            &mut g,
            KubeletEvent::PodRejected { file: file.display().to_string(), reason: why.to_string(), pod_reason },
        );
        g.st.rejected.insert(file, why);
        self.unlock(g);
    }

    /// Forget a rejected manifest (its file was removed or changed).
    pub fn forget_rejected(&self, file: &Path) {
        self.lock().st.rejected.remove(file);
    }

    /// Drop checkpointed allocations whose pod no manifest describes any more.
    pub fn drop_orphans(&self) {
        let mut g = self.lock();
        let orphans = g.st.drop_orphans();
        for (u, c, r) in &orphans {
            let e = KubeletEvent::AllocationFreed {
                pod_uid: u.clone(),
                container: c.clone(),
                resource: r.clone(),
                reason: "pod no longer exists".into(),
            };
            self.ev(&mut g, e);
        }
        self.unlock(g);
        if !orphans.is_empty() {
            self.changed();
        }
    }

    /// Remove a pod (its manifest is gone) and free its devices.
    pub fn remove_pod(&self, uid: &str) {
        let mut g = self.lock();
        let Some((p, freed)) = g.st.remove_pod(uid) else { return };
        // A pod restored from the checkpoint alone is known by its UID.
        let pod = p.map(|p| p.pod.key()).unwrap_or_else(|| uid.to_string());
        self.ev(&mut g, KubeletEvent::PodRemoved { pod, uid: uid.to_string(), freed: json!(freed) });
        self.unlock(g);
        self.changed();
    }
}

/// A pod the device manager admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Its allocations came back from the checkpoint (a kubelet restart).
    pub restored: bool,
}

mod admit;
mod endpoint;

#[cfg(test)]
mod tests;
