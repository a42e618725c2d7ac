//! The device manager's bookkeeping as plain data: registered endpoints,
//! devices and their health, allocations, admitted pods. Every change is a
//! method that returns what happened, for the shell to log; nothing here
//! does I/O, sleeps or awaits.

use crate::api::deviceplugin::{ContainerAllocateResponse, Device};
use crate::api::HEALTHY;
use crate::client::checkpoint::{Data, PodDeviceEntry};
use crate::kubelet::manifest::Pod;
use crate::kubelet::profile::Endpoints;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (pod UID, container name, resource name).
pub type AllocKey = (String, String, String);

/// A device as the manager tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dev {
    /// Health string as last reported (only the exact `Healthy` counts).
    pub health: String,
    /// NUMA nodes the device reports (empty: no topology).
    pub numa: Vec<i64>,
}

impl Dev {
    /// The device of a ListAndWatch entry.
    pub fn of(d: &Device) -> Self {
        let numa = d.topology.as_ref().map(|t| t.nodes.iter().map(|n| n.id).collect()).unwrap_or_default();
        Dev { health: d.health.clone(), numa }
    }
}

/// A registered endpoint, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Unique per registration (a re-registration gets a new one).
    pub id: u64,
    /// The plugin's socket.
    pub socket: PathBuf,
    /// `kubelet.sock` or `plugin-watcher`.
    pub via: crate::kubelet::event::Via,
    /// From GetDevicePluginOptions.
    pub pre_start_required: bool,
    /// From GetDevicePluginOptions.
    pub get_preferred_allocation_available: bool,
}

/// One resource.
#[derive(Debug, Clone, Default)]
pub struct Resource {
    /// The current endpoint (None: known from the checkpoint only, or removed).
    /// With several instances keyed by socket, the kubelet's "primary" one:
    /// the newest, or a survivor promoted when it goes.
    pub endpoint: Option<EndpointInfo>,
    /// All devices as the node sees them, healthy or not: the last
    /// ListAndWatch snapshot of any live instance (the kubelet's callback
    /// knows only the resource name, in every version).
    pub devices: BTreeMap<String, Dev>,
    /// Earlier instances whose streams still run. Keyed by resource they are
    /// clients the kubelet forgot but did not close; keyed by socket they are
    /// the other entries of the kubelet's endpointStore.
    pub older: Vec<EndpointInfo>,
    /// The stream ended; the grace period runs.
    pub stopped: bool,
    /// The grace period ended without the plugin: the resource stays in the
    /// node status at capacity 0 / allocatable 0, as the kubelet keeps it.
    pub removed: bool,
}

impl Resource {
    /// Healthy devices (none while stopped or removed).
    pub fn healthy(&self) -> BTreeSet<String> {
        if self.stopped || self.removed {
            return BTreeSet::new();
        }
        self.devices.iter().filter(|(_, d)| d.health == HEALTHY).map(|(id, _)| id.clone()).collect()
    }

    /// Whether any device reports a NUMA node.
    pub fn has_topology(&self) -> bool {
        self.devices.values().any(|d| !d.numa.is_empty())
    }

    /// The live instance registered from `socket`, if any.
    fn live_at(&self, socket: &Path) -> Option<u64> {
        let current = self.endpoint.as_ref().filter(|_| !self.stopped);
        current.into_iter().chain(self.older.iter()).find(|e| e.socket == socket).map(|e| e.id)
    }
}

/// One container's devices of one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// Device IDs, in the order chosen.
    pub ids: Vec<String>,
    /// Device IDs by NUMA node (`-1`: none); a device on several nodes is under each.
    pub numa: BTreeMap<String, Vec<String>>,
    /// The plugin's answer.
    pub resp: ContainerAllocateResponse,
    /// The answer as the checkpoint stores it (base64 protobuf).
    pub resp_b64: String,
}

impl Allocation {
    /// An allocation of `ids` of `resource`, grouped by the devices' NUMA nodes.
    pub fn new(st: &State, resource: &str, ids: Vec<String>, resp: ContainerAllocateResponse) -> Self {
        let numa = st.by_numa(resource, &ids);
        let resp_b64 = PodDeviceEntry::encode_alloc_resp(&resp);
        Allocation { ids, numa, resp, resp_b64 }
    }
}

/// An admitted pod.
#[derive(Debug, Clone)]
pub struct PodRecord {
    /// The pod.
    pub pod: Pod,
    /// Its manifest.
    pub file: PathBuf,
}

/// What a ListAndWatch snapshot changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDiff {
    /// Devices now.
    pub capacity: usize,
    /// Healthy devices now.
    pub allocatable: usize,
    /// New IDs.
    pub added: Vec<String>,
    /// Gone IDs.
    pub removed: Vec<String>,
    /// `id:old->new` health changes.
    pub health_changed: Vec<String>,
}

/// What a registration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The endpoint's ID.
    pub id: u64,
    /// An earlier endpoint of the resource was replaced.
    pub replaced: bool,
    /// The resource was expected back after a restart: `Some(all back)`.
    pub back: Option<bool>,
    /// Earlier instances still streaming after this registration.
    pub older: usize,
}

/// What a 1.37 kubelet answers a registration from the socket of a live
/// instance of the resource (followed by `: <socket>`).
pub const ALREADY_CONNECTED: &str = "device plugin already connected";

/// A registration the kubelet refuses (keyed by socket, from 1.37).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A live instance of the resource is registered from the same socket:
    /// the kubelet's PluginConnected answers `device plugin already
    /// connected: <socket>` and leaves the earlier instance as it was
    /// (kubernetes#135437; tests of #139338).
    AlreadyConnected {
        /// The socket.
        socket: PathBuf,
        /// The live instance on it.
        id: u64,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::AlreadyConnected { socket, .. } => {
                write!(f, "{ALREADY_CONNECTED}: {}", socket.display())
            }
        }
    }
}

impl std::error::Error for Refused {}

/// What the end of an endpoint's stream did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Not a live endpoint of the resource (already replaced or stopped): nothing.
    Ignored,
    /// The current endpoint stopped: its devices are unhealthy and its grace period runs.
    Stopped {
        /// Capacity kept.
        capacity: usize,
    },
    /// Keyed by resource (kubelets up to 1.36): an earlier instance's stream
    /// ended, and the kubelet disconnected the *current* endpoint `victim`
    /// instead, marking the resource unhealthy (kubernetes#121994).
    Disconnected {
        /// The current endpoint, now stopped; the shell closes its stream.
        victim: u64,
        /// Capacity kept.
        capacity: usize,
    },
    /// Keyed by socket: one of several instances went; the others stay, a
    /// survivor becomes the current endpoint if it was the current one, and
    /// the devices stay as the last snapshot left them.
    InstanceGone {
        /// Capacity now.
        capacity: usize,
        /// Allocatable now.
        allocatable: usize,
    },
}

/// The device manager's state.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Resources by name.
    pub resources: BTreeMap<String, Resource>,
    /// Admitted pods by UID.
    pub pods: BTreeMap<String, PodRecord>,
    /// Allocations.
    pub allocations: BTreeMap<AllocKey, Allocation>,
    /// Rejected manifests and why.
    pub rejected: BTreeMap<PathBuf, super::admission::AdmissionError>,
    /// Register calls per resource (counted before validation, as the kubelet does).
    pub registrations: BTreeMap<String, u64>,
    /// Resources from the checkpoint not back yet after a restart.
    pub expected_back: BTreeSet<String>,
    /// Bumped on every change the checkpoint holds.
    pub version: u64,
    /// How instances of one resource are keyed (the kubelet version's).
    pub keying: Endpoints,
    next_endpoint: u64,
}

impl State {
    /// An empty state whose plugin instances are keyed as a kubelet version keys them.
    pub fn keyed(keying: Endpoints) -> Self {
        State { keying, ..State::default() }
    }

    /// Install an endpoint for `resource`. An earlier live instance keeps
    /// streaming: keyed by resource the kubelet forgets it without closing
    /// it; keyed by socket it stays one of the resource's endpoints, and a
    /// second registration from the socket of a live instance is refused.
    /// The devices stay as they are until a snapshot arrives.
    pub fn register(&mut self, resource: &str, mut ep: EndpointInfo) -> Result<Registered, Refused> {
        let keying = self.keying;
        if keying == Endpoints::BySocket {
            if let Some(id) = self.resources.get(resource).and_then(|r| r.live_at(&ep.socket)) {
                return Err(Refused::AlreadyConnected { socket: ep.socket, id });
            }
        }
        self.next_endpoint += 1;
        ep.id = self.next_endpoint;
        let id = ep.id;
        let r = self.resources.entry(resource.to_string()).or_default();
        let replaced = r.endpoint.is_some();
        if let Some(old) = r.endpoint.take() {
            if !r.stopped {
                r.older.push(old);
            }
        }
        r.endpoint = Some(ep);
        r.stopped = false;
        r.removed = false;
        let older = r.older.len();
        let back = self.expected_back.remove(resource).then_some(self.expected_back.is_empty());
        self.version += 1;
        Ok(Registered { id, replaced, back, older })
    }

    /// A full ListAndWatch snapshot from endpoint `id`: the current one or an
    /// earlier instance still streaming. In every version it replaces the
    /// node's devices of the resource: the kubelet's callback knows only the
    /// resource name, so the last snapshot of any instance wins.
    pub fn snapshot(&mut self, resource: &str, id: u64, devices: &[Device]) -> Option<SnapshotDiff> {
        let r = self.resources.get_mut(resource)?;
        let is_current = r.endpoint.as_ref().is_some_and(|e| e.id == id) && !r.stopped;
        if !is_current && !r.older.iter().any(|e| e.id == id) {
            return None;
        }
        let new: BTreeMap<String, Dev> = devices.iter().map(|d| (d.id.clone(), Dev::of(d))).collect();
        let added: Vec<String> = new.keys().filter(|k| !r.devices.contains_key(*k)).cloned().collect();
        let removed: Vec<String> = r.devices.keys().filter(|k| !new.contains_key(*k)).cloned().collect();
        let health_changed = new
            .iter()
            .filter_map(|(k, d)| {
                r.devices.get(k).filter(|o| o.health != d.health).map(|o| format!("{k}:{}->{}", o.health, d.health))
            })
            .collect();
        r.devices = new;
        let diff =
            SnapshotDiff { capacity: r.devices.len(), allocatable: r.healthy().len(), added, removed, health_changed };
        // The checkpoint records the healthy devices: a health change is a
        // change of it (the kubelet writes it after every update).
        if !diff.added.is_empty() || !diff.removed.is_empty() || !diff.health_changed.is_empty() {
            self.version += 1;
        }
        Some(diff)
    }

    /// Endpoint `id`'s stream ended. Keyed by resource, the kubelet then
    /// disconnects whatever client the resource has *now* — the current
    /// endpoint even when the ended stream was an earlier instance's
    /// (kubernetes#121994). Keyed by socket, only that instance goes: while
    /// others remain nothing else changes (a survivor becomes current if
    /// needed; devices keep their last snapshot), and the last one to go
    /// stops the resource.
    pub fn stream_ended(&mut self, resource: &str, id: u64) -> Ended {
        let keying = self.keying;
        let Some(r) = self.resources.get_mut(resource) else { return Ended::Ignored };
        let current = r.endpoint.as_ref().filter(|_| !r.stopped).map(|e| e.id);
        let was_older = r.older.iter().any(|e| e.id == id);
        if current != Some(id) && !was_older {
            return Ended::Ignored;
        }
        r.older.retain(|e| e.id != id);
        let stop = |r: &mut Resource| {
            r.stopped = true;
            for d in r.devices.values_mut() {
                d.health = crate::api::UNHEALTHY.into();
            }
            r.devices.len()
        };
        match keying {
            Endpoints::ByResource => {
                let Some(victim) = current else { return Ended::Ignored };
                let capacity = stop(r);
                if victim == id {
                    Ended::Stopped { capacity }
                } else {
                    Ended::Disconnected { victim, capacity }
                }
            }
            Endpoints::BySocket => {
                if current == Some(id) {
                    match r.older.pop() {
                        Some(next) => r.endpoint = Some(next),
                        None => return Ended::Stopped { capacity: stop(r) },
                    }
                }
                let (capacity, allocatable) = (r.devices.len(), r.healthy().len());
                self.version += 1;
                Ended::InstanceGone { capacity, allocatable }
            }
        }
    }

    /// The grace period of endpoint `id` is over: if the resource is still
    /// that stopped endpoint's, it is removed from use but stays listed at
    /// 0/0 (state `removed`). Returns whether it was removed.
    pub fn grace_over(&mut self, resource: &str, id: u64) -> bool {
        let Some(r) = self.resources.get_mut(resource) else { return false };
        if !(r.stopped && r.endpoint.as_ref().is_some_and(|e| e.id == id)) {
            return false;
        }
        *r = Resource { removed: true, ..Resource::default() };
        self.version += 1;
        true
    }

    /// The grace period of a resource known only from the checkpoint is over:
    /// remove it (listed at 0/0) if its plugin has not registered. Returns whether it was removed.
    pub fn waiting_over(&mut self, resource: &str) -> bool {
        let Some(r) = self.resources.get_mut(resource) else { return false };
        if r.endpoint.is_some() || r.removed {
            return false;
        }
        *r = Resource { removed: true, ..Resource::default() };
        self.version += 1;
        true
    }

    /// The resource and endpoint ID registered from `socket`.
    pub fn endpoint_at(&self, socket: &Path) -> Option<(String, u64)> {
        self.resources.iter().find_map(|(n, r)| {
            r.endpoint.iter().chain(r.older.iter()).find(|e| e.socket == socket).map(|e| (n.clone(), e.id))
        })
    }

    /// Device IDs of `resource` in use by allocations (committed and `pending`).
    pub fn in_use(&self, resource: &str, pending: &BTreeMap<AllocKey, Allocation>) -> BTreeSet<String> {
        self.allocations
            .iter()
            .chain(pending.iter())
            .filter(|((_, _, r), _)| r == resource)
            .flat_map(|(_, a)| a.ids.iter().cloned())
            .collect()
    }

    /// `ids` of `resource` by NUMA node (`-1`: none); a device on several nodes is listed under each.
    pub fn by_numa(&self, resource: &str, ids: &[String]) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for id in ids {
            let nodes = self.resources.get(resource).and_then(|r| r.devices.get(id)).map(|d| d.numa.clone());
            match nodes.filter(|n| !n.is_empty()) {
                None => m.entry("-1".into()).or_default().push(id.clone()),
                Some(nodes) => {
                    for n in nodes.into_iter().collect::<BTreeSet<_>>() {
                        m.entry(n.to_string()).or_default().push(id.clone());
                    }
                }
            }
        }
        m
    }

    /// What the checkpoint holds: allocations, and every known resource with
    /// its devices (as the kubelet writes them: a resource waiting for its
    /// plugin after a restart stays, with no devices, until its grace period ends).
    pub fn checkpoint_data(&self) -> Data {
        Data {
            pod_device_entries: self
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
            registered_devices: self
                .resources
                .iter()
                .filter(|(_, r)| !r.removed)
                // The kubelet records only the healthy devices
                // (manager.go, writeCheckpoint: `range m.healthyDevices`).
                .map(|(n, r)| (n.clone(), r.healthy().into_iter().collect()))
                .collect(),
        }
    }

    /// Load a checkpoint: its resources wait for their plugins (capacity 0),
    /// its allocations stand. Returns the number of allocations.
    pub fn restore(&mut self, data: &Data) -> usize {
        for r in data.registered_devices.keys() {
            self.resources.entry(r.clone()).or_default();
        }
        for e in &data.pod_device_entries {
            self.resources.entry(e.resource_name.clone()).or_default();
            let resp = e.decode_alloc_resp().unwrap_or_default();
            self.allocations.insert(
                (e.pod_uid.clone(), e.container_name.clone(), e.resource_name.clone()),
                Allocation { ids: e.ids(), numa: e.device_ids.clone(), resp, resp_b64: e.alloc_resp.clone() },
            );
        }
        data.pod_device_entries.len()
    }

    /// Commit allocations of an admission (not yet acknowledged).
    pub fn stage(&mut self, pending: BTreeMap<AllocKey, Allocation>) -> Vec<AllocKey> {
        let keys = pending.keys().cloned().collect();
        self.allocations.extend(pending);
        self.version += 1;
        keys
    }

    /// Undo [`State::stage`] (the checkpoint could not be written).
    pub fn unstage(&mut self, keys: &[AllocKey]) {
        for k in keys {
            self.allocations.remove(k);
        }
        self.version += 1;
    }

    /// Remove a pod and free its devices. Returns the pod (None: known only
    /// from the checkpoint's allocations, as after a restart) and the freed
    /// IDs; None when nothing of the pod is known.
    pub fn remove_pod(&mut self, uid: &str) -> Option<(Option<PodRecord>, Vec<String>)> {
        let p = self.pods.remove(uid);
        let keys: Vec<AllocKey> = self.allocations.keys().filter(|(u, _, _)| u == uid).cloned().collect();
        if p.is_none() && keys.is_empty() {
            return None;
        }
        let freed = keys.iter().filter_map(|k| self.allocations.remove(k)).flat_map(|a| a.ids).collect();
        self.version += 1;
        Some((p, freed))
    }

    /// Drop allocations whose pod no manifest describes (after the first scan).
    pub fn drop_orphans(&mut self) -> Vec<AllocKey> {
        let orphans: Vec<AllocKey> =
            self.allocations.keys().filter(|(u, _, _)| !self.pods.contains_key(u)).cloned().collect();
        for k in &orphans {
            self.allocations.remove(k);
        }
        if !orphans.is_empty() {
            self.version += 1;
        }
        orphans
    }

    /// Devices allocated from `resource`.
    pub fn allocated(&self, resource: &str) -> usize {
        self.in_use(resource, &BTreeMap::new()).len()
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
