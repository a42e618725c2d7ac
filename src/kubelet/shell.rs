//! The async shell around the device-manager core: it carries out what the
//! core decides (RPCs, timers, checkpoint writes, the event log). Every task
//! belongs to one [`Generation`]; closing a manager stops its event log and
//! checkpoint writes first, then cancels and awaits every task of its
//! generation, then writes the final checkpoint, so nothing of an old
//! generation can happen after the next one starts.

use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, Device, DevicePluginOptions, PreStartContainerRequest,
    PreferredAllocationRequest,
};
use crate::core::log::{ms, Logger};
use crate::kubelet::checkpoint;
use crate::kubelet::conn::PluginConn;
use crate::kubelet::devicemanager::state::{EndpointInfo, PodRecord};
use crate::kubelet::devicemanager::{
    Answer, ContainerStatus, Histogram, PodAdmission, PodStatus, ResourceStatus, State, Step,
};
use crate::kubelet::manifest::Pod;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use crate::kubelet::devicemanager::TopologyPolicy;
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

/// At most [`LOG_LIST`] items of a list for the event log, then `+N more`.
pub fn capped<T: ToString>(items: &[T]) -> Value {
    let mut v: Vec<Value> = items.iter().take(LOG_LIST).map(|x| json!(x.to_string())).collect();
    if items.len() > LOG_LIST {
        v.push(json!(format!("+{} more", items.len() - LOG_LIST)));
    }
    Value::Array(v)
}

/// How many IDs one event-log field lists.
const LOG_LIST: usize = 20;

struct Inner {
    st: State,
    hist: BTreeMap<String, Histogram>,
    conns: BTreeMap<u64, PluginConn>,
    /// Each live endpoint's stream, by endpoint ID.
    endpoints: BTreeMap<u64, CancellationToken>,
    admitting: BTreeMap<String, Pod>,
    closed: bool,
    /// Events decided under the lock, logged after it is released.
    outbox: Vec<(String, Vec<(String, Value)>)>,
}

/// The device manager of one generation.
pub struct Manager {
    inner: Mutex<Inner>,
    /// Set when the generation closes; the event log is read-locked while it writes.
    gate: std::sync::RwLock<bool>,
    admission: tokio::sync::Mutex<()>,
    /// The state version last written; held while writing, so writes are ordered.
    written: Arc<Mutex<u64>>,
    dirty: tokio::sync::Notify,
    restarted: Mutex<Option<Instant>>,
    /// Settings.
    pub cfg: Config,
    /// Event log.
    pub log: Logger,
    /// The generation every task of this manager belongs to.
    pub gen: Generation,
}

impl Manager {
    /// A manager with empty state. Call [`Manager::start`] to run its checkpoint writer.
    pub fn new(cfg: Config, log: Logger, gen: Generation) -> Arc<Self> {
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
            gate: std::sync::RwLock::new(false),
            admission: tokio::sync::Mutex::new(()),
            written: Arc::new(Mutex::new(0)),
            dirty: tokio::sync::Notify::new(),
            restarted: Mutex::new(None),
            cfg,
            log,
            gen,
        })
    }

    /// Start the background checkpoint writer (registration and device
    /// changes are persisted coalesced; admissions flush before they are acknowledged).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        let token = self.gen.token.clone();
        // Not dropped mid-write: the loop only stops between writes.
        self.gen.tracker.spawn(async move {
            loop {
                tokio::select! {
                    _ = me.dirty.notified() => {}
                    _ = token.cancelled() => return,
                }
                if let Err(e) = me.flush(false).await {
                    me.event("checkpoint-error", &[("error", json!(e.to_string()))]);
                }
            }
        });
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Log an event, tagged with this generation, unless the generation is closed.
    pub fn event(&self, name: &str, fields: &[(&str, Value)]) {
        let closed = self.gate.read().unwrap_or_else(|p| p.into_inner());
        if !*closed {
            let mut f = fields.to_vec();
            f.push(("generation", json!(self.gen.number)));
            self.log.event(name, &f);
        }
    }

    /// Queue an event decided under the state lock; [`Manager::unlock`] logs it.
    fn ev(&self, g: &mut Inner, name: &str, fields: &[(&str, Value)]) {
        g.outbox.push((name.to_string(), fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()));
    }

    /// Release the state lock, then log what was queued under it (the log can
    /// block on a slow reader; state readers must not wait for it).
    fn unlock(&self, mut g: MutexGuard<'_, Inner>) {
        let out = std::mem::take(&mut g.outbox);
        drop(g);
        for (name, fields) in out {
            let f: Vec<(&str, Value)> = fields.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            self.event(&name, &f);
        }
    }

    /// Write the checkpoint if the state changed since the last write. After
    /// [`Manager::close`] only the final write (`last`) is made.
    pub async fn flush(self: &Arc<Self>, last: bool) -> crate::core::Result<()> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut written = me.written.lock().unwrap_or_else(|p| p.into_inner());
            let (data, version) = {
                let g = me.lock();
                if g.closed && !last {
                    return Ok(());
                }
                (g.st.checkpoint_data(), g.st.version)
            };
            if version <= *written {
                return Ok(());
            }
            checkpoint::write(&me.cfg.checkpoint, &data)?;
            *written = version;
            Ok(())
        })
        .await
        .map_err(|e| crate::core::Error::failed(format!("checkpoint writer failed: {e}")))?
    }

    /// End this generation: no event or checkpoint write of it after this
    /// returns, except the final checkpoint written here.
    pub async fn close(self: &Arc<Self>) {
        *self.gate.write().unwrap_or_else(|p| p.into_inner()) = true;
        self.lock().closed = true;
        self.gen.end().await;
        if let Err(e) = self.flush(true).await {
            self.log.event("checkpoint-error", &[("error", json!(e.to_string()))]);
        }
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
                self.event("checkpoint-corrupt", &[("error", json!(e.to_string())), ("setAside", json!(aside))]);
                None
            }
        };
        let Some(l) = loaded else { return BTreeSet::new() };
        if !l.checksum_ours {
            self.event(
                "checkpoint-checksum",
                &[
                    ("file", json!(path.display().to_string())),
                    ("note", json!("checksum not dpctl's (written by a real kubelet?); content used as is")),
                ],
            );
        }
        let mut g = self.lock();
        let n = g.st.restore(&l.checkpoint.data);
        // What was just read is what the file holds.
        *self.written.lock().unwrap_or_else(|p| p.into_inner()) = g.st.version;
        let resources: BTreeSet<String> = g.st.resources.keys().cloned().collect();
        let list: Vec<&String> = resources.iter().collect();
        self.ev(&mut g, "checkpoint-restored", &[("allocations", json!(n)), ("resources", json!(list))]);
        self.unlock(g);
        // As the kubelet does, a resource known only from the checkpoint is an
        // endpoint stopped now: it goes when the grace period ends without its plugin.
        for r in &resources {
            let (me, r) = (self.clone(), r.clone());
            self.gen.spawn(async move {
                tokio::time::sleep(me.cfg.grace_period).await;
                let mut g = me.lock();
                if !g.closed && g.st.waiting_over(&r) {
                    me.ev(
                        &mut g,
                        "resource-removed",
                        &[("resource", json!(r)), ("reason", json!("grace period over"))],
                    );
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
    /// task of this generation. None if the generation is closed.
    pub fn start_endpoint(
        self: &Arc<Self>,
        resource: &str,
        conn: PluginConn,
        options: DevicePluginOptions,
        via: &'static str,
    ) -> Option<u64> {
        let token = self.gen.token.child_token();
        let mut g = self.lock();
        if g.closed {
            return None;
        }
        let ep = EndpointInfo {
            id: 0,
            socket: conn.socket().to_path_buf(),
            via,
            pre_start_required: options.pre_start_required,
            get_preferred_allocation_available: options.get_preferred_allocation_available,
        };
        let socket = ep.socket.display().to_string();
        let reg = g.st.register(resource, ep);
        // An endpoint replaced on its socket goes with its connection and stream;
        // earlier instances on other sockets keep streaming (the kubelet does not close them).
        for old in &reg.close {
            g.conns.remove(old);
            if let Some(t) = g.endpoints.remove(old) {
                t.cancel();
            }
        }
        g.conns.insert(reg.id, conn.clone());
        g.endpoints.insert(reg.id, token.clone());
        self.ev(
            &mut g,
            "registered",
            &[
                ("resource", json!(resource)),
                ("endpoint", json!(socket)),
                ("via", json!(via)),
                ("preStartRequired", json!(options.pre_start_required)),
                ("getPreferredAllocationAvailable", json!(options.get_preferred_allocation_available)),
                ("replaced", json!(reg.replaced)),
                ("olderInstances", json!(reg.older)),
            ],
        );
        if let Some(all) = reg.back {
            let took = self.restarted.lock().unwrap_or_else(|p| p.into_inner()).map(|t| t.elapsed());
            let took = ms(took.unwrap_or_default());
            self.ev(&mut g, "plugin-back", &[("resource", json!(resource)), ("afterMs", took.clone())]);
            if all {
                self.ev(&mut g, "all-plugins-back", &[("afterMs", took)]);
            }
        }
        self.unlock(g);
        self.changed();
        let me = self.clone();
        let res = resource.to_string();
        self.gen.spawn(async move {
            tokio::select! {
                _ = crate::kubelet::registration::run_endpoint(me.clone(), res, reg.id, conn) => {}
                _ = token.cancelled() => {}
            }
        });
        Some(reg.id)
    }

    /// A ListAndWatch snapshot arrived from endpoint `id`.
    pub fn snapshot(&self, resource: &str, id: u64, devices: Vec<Device>, bytes: usize) {
        let mut g = self.lock();
        let Some(d) = g.st.snapshot(resource, id, &devices) else { return };
        let problems =
            crate::core::validate::device_problems(devices.iter().map(|d| (d.id.as_str(), d.health.as_str())));
        self.ev(
            &mut g,
            "devices",
            &[
                ("resource", json!(resource)),
                ("capacity", json!(d.capacity)),
                ("allocatable", json!(d.allocatable)),
                ("added", capped(&d.added)),
                ("removed", capped(&d.removed)),
                ("healthChanged", capped(&d.health_changed)),
                ("bytes", json!(bytes)),
            ],
        );
        for p in problems {
            self.ev(&mut g, "device-warning", &[("resource", json!(resource)), ("problem", json!(p.to_string()))]);
        }
        self.unlock(g);
        self.changed();
    }

    /// Endpoint `id`'s stream ended. What that does depends on the kubelet
    /// version (see [`crate::kubelet::devicemanager::state::Ended`]); when
    /// the current endpoint stops, a grace timer of this generation removes
    /// the resource (listed at 0/0) unless it registers again.
    pub fn stream_ended(self: &Arc<Self>, resource: &str, id: u64, why: &str) {
        use crate::kubelet::devicemanager::state::Ended;
        let mut g = self.lock();
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
                    "instance-ended",
                    &[
                        ("resource", json!(resource)),
                        ("reason", json!(why)),
                        ("capacity", json!(capacity)),
                        ("allocatable", json!(allocatable)),
                    ],
                );
                self.unlock(g);
                self.changed();
                return;
            }
            Ended::Stopped { capacity } => {
                self.ev(
                    &mut g,
                    "stream-ended",
                    &[
                        ("resource", json!(resource)),
                        ("reason", json!(why)),
                        ("capacity", json!(capacity)),
                        ("allocatable", json!(0)),
                        ("gracePeriodMs", ms(self.cfg.grace_period)),
                    ],
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
                self.ev(
                    &mut g,
                    "stream-ended",
                    &[
                        ("resource", json!(resource)),
                        ("reason", json!(why)),
                        ("capacity", json!(capacity)),
                        ("allocatable", json!(0)),
                        ("gracePeriodMs", ms(self.cfg.grace_period)),
                        (
                            "disconnected",
                            json!(socket.map(|s| s.display().to_string()).unwrap_or_default()),
                        ),
                        (
                            "note",
                            json!(format!(
                                "an earlier instance's stream ended and kubelet {} disconnected the current one (kubernetes#121994)",
                                self.cfg.profile.version
                            )),
                        ),
                    ],
                );
                victim
            }
        };
        self.unlock(g);
        let me = self.clone();
        let resource = resource.to_string();
        self.gen.spawn(async move {
            tokio::time::sleep(me.cfg.grace_period).await;
            let mut g = me.lock();
            if g.closed || !g.st.grace_over(&resource, stopped) {
                return;
            }
            g.conns.remove(&stopped);
            g.endpoints.remove(&stopped);
            me.ev(&mut g, "resource-removed", &[("resource", json!(resource)), ("reason", json!("grace period over"))]);
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
    pub fn rejected(&self) -> BTreeMap<PathBuf, String> {
        self.lock().st.rejected.clone()
    }

    /// Metrics: registrations and alloc histograms per resource.
    pub fn metrics(&self) -> (BTreeMap<String, u64>, BTreeMap<String, Histogram>) {
        let g = self.lock();
        (g.st.registrations.clone(), g.hist.clone())
    }

    /// Record a manifest that could not be admitted.
    pub fn reject_file(&self, file: PathBuf, why: String) {
        let mut g = self.lock();
        let reason = crate::kubelet::devicemanager::rejection_reason(&why);
        self.ev(
            &mut g,
            "pod-rejected",
            &[("file", json!(file.display().to_string())), ("reason", json!(why)), ("podReason", json!(reason))],
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
            let f = [
                ("podUID", json!(u)),
                ("container", json!(c)),
                ("resource", json!(r)),
                ("reason", json!("pod no longer exists")),
            ];
            self.ev(&mut g, "allocation-freed", &f);
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
        self.ev(&mut g, "pod-removed", &[("pod", json!(p.pod.key())), ("uid", json!(uid)), ("freed", json!(freed))]);
        self.unlock(g);
        self.changed();
    }
}

#[path = "admit.rs"]
mod admit;

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
