//! The kubelet's PodResources v1 API over the device manager's state (and
//! the DRA manager's prepared claims in `dynamic_resources`, as GA kubelets
//! fill them), rate-limited as the kubelet does (100 QPS, burst 10).

use crate::api::podresources::{
    pod_resources_lister_server::PodResourcesLister, AllocatableResourcesRequest, AllocatableResourcesResponse,
    ContainerDevices, ContainerResources, GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest,
    ListPodResourcesResponse, NumaNode, PodResources, TopologyInfo,
};
use crate::kubelet::cm::ContainerManager;
use crate::kubelet::devicemanager::core::PodStatus;
use crate::kubelet::profile::PodResourcesGet;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tonic::{Request, Response, Status};

/// A token bucket.
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// The service.
pub struct PodResourcesService {
    cm: Arc<ContainerManager>,
    limit: RateLimit,
}

/// The kubelet's rate limit of its local gRPC APIs (apis/grpc
/// LimiterUnaryServerInterceptor: 100 QPS, burst 10, then
/// ResourceExhausted "rejected by rate limit").
pub struct RateLimit {
    bucket: Mutex<Bucket>,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit { bucket: Mutex::new(Bucket { tokens: BURST, last: Instant::now() }) }
    }
}

impl RateLimit {
    /// Take a token, or the kubelet's refusal.
    pub fn admit(&self) -> Result<(), Status> {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * QPS).min(BURST);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Status::resource_exhausted("rejected by rate limit"))
        }
    }
}

const QPS: f64 = 100.0;
const BURST: f64 = 10.0;

fn topo(numa: i64) -> Option<TopologyInfo> {
    (numa >= 0).then(|| TopologyInfo { nodes: vec![NumaNode { id: numa }] })
}

/// One `ContainerDevices` per device and NUMA node, as the kubelet answers
/// since 1.21: a device on several NUMA nodes is listed under each, a device
/// without topology once without it.
pub fn container_devices(resource: &str, by_numa: &BTreeMap<String, Vec<String>>) -> Vec<ContainerDevices> {
    by_numa
        .iter()
        .flat_map(|(numa, ids)| {
            let n = numa.parse::<i64>().unwrap_or(-1);
            ids.iter().map(move |id| ContainerDevices {
                resource_name: resource.to_string(),
                device_ids: vec![id.clone()],
                topology: topo(n),
            })
        })
        .collect()
}

/// A pod as PodResources lists it: sidecars (restartable init containers,
/// when the kubelet version has them) first, then app containers.
pub fn pod_resources(p: &PodStatus, sidecars: bool) -> PodResources {
    PodResources {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        containers: p
            .containers
            .iter()
            .filter(|c| !c.init || (sidecars && c.sidecar))
            .map(|c| ContainerResources {
                name: c.name.clone(),
                devices: c.resources.iter().flat_map(|(r, by_numa)| container_devices(r, by_numa)).collect(),
                ..Default::default()
            })
            .collect(),
        // Pod-level exclusive CPUs and memory (1.37): dpctl models no CPU or
        // memory manager, so there are none, as for its containers.
        ..Default::default()
    }
}

impl PodResourcesService {
    /// A service over both managers of `cm`.
    pub fn new(cm: Arc<ContainerManager>) -> Self {
        PodResourcesService { cm, limit: RateLimit::default() }
    }

    /// A pod as listed, with each container's prepared claims.
    fn listed(&self, p: &PodStatus) -> PodResources {
        let mut pr = pod_resources(p, self.sidecars());
        if let Some(dra) = &self.cm.dra {
            for c in &mut pr.containers {
                c.dynamic_resources = dra.dynamic_resources(&p.uid, &c.name);
            }
        }
        pr
    }

    fn sidecars(&self) -> bool {
        self.cm.devices.cfg.profile.sidecar_devices
    }

    fn admit(&self) -> Result<(), Status> {
        self.limit.admit()
    }
}

#[tonic::async_trait]
impl PodResourcesLister for PodResourcesService {
    async fn list(&self, _: Request<ListPodResourcesRequest>) -> Result<Response<ListPodResourcesResponse>, Status> {
        self.admit()?;
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: self.cm.devices.pods_listed().iter().map(|p| self.listed(p)).collect(),
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        self.admit()?;
        let devices =
            self.cm.devices.allocatable().iter().flat_map(|(r, by_numa)| container_devices(r, by_numa)).collect();
        Ok(Response::new(AllocatableResourcesResponse { devices, ..Default::default() }))
    }

    async fn get(&self, r: Request<GetPodResourcesRequest>) -> Result<Response<GetPodResourcesResponse>, Status> {
        self.admit()?;
        match self.cm.devices.cfg.profile.pod_resources_get {
            PodResourcesGet::Enabled => {}
            PodResourcesGet::Disabled => return Err(Status::unknown("PodResources API Get method disabled")),
            PodResourcesGet::Absent => {
                return Err(Status::unimplemented("unknown method Get for service v1.PodResourcesLister"))
            }
        }
        let r = r.into_inner();
        match self.cm.devices.pods_listed().iter().find(|p| p.name == r.pod_name && p.namespace == r.pod_namespace) {
            Some(p) => Ok(Response::new(GetPodResourcesResponse { pod_resources: Some(self.listed(p)) })),
            None => Err(Status::unknown(format!("pod {} in namespace {} not found", r.pod_name, r.pod_namespace))),
        }
    }
}
