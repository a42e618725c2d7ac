//! Read-only views of the core's state: resources (capacity, allocatable,
//! allocated) and pods with their devices, plus the allocation-latency histogram.

use super::state::{Dev, State};
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// Record one observation.
    pub fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.buckets[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }
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
    /// `running`, `stopped` (stream ended, in grace period), `waiting` (from
    /// the checkpoint, plugin not back yet) or `removed` (grace period over:
    /// listed at 0/0, as the kubelet keeps it in the node status).
    pub state: String,
    /// Earlier instances of the plugin whose streams still run.
    pub older_instances: usize,
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
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub sidecar: bool,
    /// resource → NUMA node (`-1`: none) → device IDs.
    pub resources: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl State {
    /// Every resource's numbers.
    pub fn resource_status(&self) -> Vec<ResourceStatus> {
        self.resources
            .iter()
            .map(|(name, r)| {
                let ep = r.endpoint.as_ref();
                ResourceStatus {
                    resource: name.clone(),
                    capacity: r.devices.len(),
                    allocatable: r.healthy().len(),
                    allocated: self.allocated(name),
                    state: match (ep, r.stopped) {
                        _ if r.removed => "removed",
                        (None, _) => "waiting",
                        (Some(_), true) => "stopped",
                        _ => "running",
                    }
                    .into(),
                    older_instances: r.older.len(),
                    endpoint: ep.map(|e| e.socket.display().to_string()),
                    via: ep.map(|e| e.via.as_str().to_string()),
                    pre_start_required: ep.is_some_and(|e| e.pre_start_required),
                    get_preferred_allocation_available: ep.is_some_and(|e| e.get_preferred_allocation_available),
                    devices: r.devices.clone(),
                }
            })
            .collect()
    }

    /// What GetAllocatableResources lists: the healthy devices of running
    /// resources, per resource and NUMA node (`-1`: none; a device on several
    /// nodes under each).
    pub fn allocatable_devices(&self) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        self.resources
            .iter()
            .filter(|(_, r)| r.endpoint.is_some() && !r.stopped)
            .map(|(name, r)| {
                let ids: Vec<String> = r.healthy().into_iter().collect();
                (name.clone(), self.by_numa(name, &ids))
            })
            .filter(|(_, m)| !m.is_empty())
            .collect()
    }

    /// Admitted pods and their allocations.
    pub fn pod_status(&self) -> Vec<PodStatus> {
        self.pods
            .values()
            .map(|p| {
                let containers = p
                    .pod
                    .init_containers
                    .iter()
                    .map(|c| (c, true))
                    .chain(p.pod.containers.iter().map(|c| (c, false)))
                    .map(|(c, init)| ContainerStatus {
                        name: c.name.clone(),
                        init,
                        sidecar: init && c.restart_always,
                        resources: self
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
}
