//! What the DRA manager shows, computed without I/O from its state:
//! `dpctl node`'s drivers and pods, PodResources' dynamic resources, and
//! the claims the local API server serves.

use super::claiminfo::{ClaimCache, ClaimsPhase, PodClaim};
use super::healthinfo::HealthCache;
use crate::api::podresources::{CdiDevice, ClaimResource, DynamicResource};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

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
    /// Where its claims are.
    pub phase: ClaimsPhase,
    /// The last error, while retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Container → its containerStatuses[].allocatedResourcesStatus, as the kubelet
    /// fills it from the health stream: `{name: "claim:<pod claim>", resources:
    /// [{resourceID: "<driver>/<pool>/<device>", health}]}` (devices without a report are Unknown).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated_resources_status: BTreeMap<String, Vec<Value>>,
    /// The pod's namespace.
    #[serde(skip)]
    pub namespace: String,
    /// The pod's claims as it names them.
    #[serde(skip)]
    pub pod_claims: Vec<PodClaim>,
    /// Its special claim of DRA-backed extended resources.
    #[serde(skip)]
    pub extended: Option<crate::kubelet::manifest::extended::ExtendedClaim>,
    /// `status.extendedResourceClaimStatus`, and what it gives each container
    /// once prepared (filled by the extended-resources module).
    #[serde(flatten)]
    pub extended_view: View,
}

impl PodInfo {
    /// `namespace/name` of each of its claims.
    pub fn claim_keys(&self) -> Vec<String> {
        self.claims.values().map(|n| format!("{}/{n}", self.namespace)).collect()
    }
}

/// What `dpctl node` shows of a pod's DRA-backed extended resources.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// `status.extendedResourceClaimStatus`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_resource_claim_status: Option<crate::kubelet::manifest::extended::ExtendedResourceClaimStatus>,
    /// Container → the CDI devices the special claim gives it (once prepared).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended_cdi_devices: BTreeMap<String, Vec<String>>,
    /// Containers that get nothing although the claim is prepared, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extended_unserved: Vec<String>,
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

/// `p` with each container's allocatedResourcesStatus filled from `health`.
pub fn with_health(p: &PodInfo, claims: &ClaimCache, health: &HealthCache) -> PodInfo {
    let mut p = p.clone();
    for (ctr, used) in &p.containers {
        let mut list = Vec::new();
        for pc in used {
            let Some(c) = p.claims.get(pc).and_then(|n| claims.get(&format!("{}/{n}", p.namespace))) else {
                continue;
            };
            let resources: Vec<Value> = c
                .allocation
                .iter()
                .map(|a| {
                    let health = health.of(&a.driver, &a.pool, &a.device);
                    json!({"resourceID": format!("{}/{}/{}", a.driver, a.pool, a.device), "health": health})
                })
                .collect();
            list.push(json!({"name": format!("claim:{pc}"), "resources": resources}));
        }
        if !list.is_empty() {
            p.allocated_resources_status.insert(ctr.clone(), list);
        }
    }
    p
}

/// PodResources' dynamic_resources for one container of pod `p`: each
/// prepared claim the container uses, each device with its CDI IDs.
pub fn dynamic_resources(p: &PodInfo, container: &str, claims: &ClaimCache) -> Vec<DynamicResource> {
    let Some(used) = p.containers.get(container) else { return vec![] };
    used.iter()
        .filter_map(|pc| p.claims.get(pc))
        .filter_map(|name| claims.get(&format!("{}/{name}", p.namespace)))
        .filter_map(|c| {
            let prepared = c.prepared()?;
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
                            driver_name: driver.to_string(),
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

/// The claims as resource.k8s.io objects (what the local API server
/// serves), with `status.allocation` and `reservedFor`.
pub fn claim_objects(claims: &ClaimCache, pods: &BTreeMap<String, PodInfo>) -> Vec<Value> {
    claims
        .values()
        .map(|c| {
            let reserved: Vec<Value> = c
                .pods
                .iter()
                .map(|uid| {
                    let name =
                        pods.get(uid).map(|p| p.pod.rsplit('/').next().unwrap_or("").to_string()).unwrap_or_default();
                    json!({"resource": "pods", "name": name, "uid": uid})
                })
                .collect();
            let requests: BTreeSet<String> =
                c.allocation.iter().map(|a| a.request.split('/').next().unwrap_or_default().to_string()).collect();
            let results: Vec<Value> = c
                .allocation
                .iter()
                .map(|a| {
                    let mut r = json!({"request": a.request, "driver": a.driver, "pool": a.pool, "device": a.device});
                    if a.admin {
                        r["adminAccess"] = json!(true);
                    }
                    if !a.skip_node_operations.is_empty() {
                        r["skipNodeOperations"] = json!(a.skip_node_operations);
                    }
                    r
                })
                .collect();
            json!({
                "kind": "ResourceClaim",
                "metadata": {"name": c.name, "namespace": c.namespace, "uid": c.uid, "resourceVersion": "1"},
                "spec": {"devices": {"requests": requests.into_iter().map(|r| json!({"name": r})).collect::<Vec<_>>()}},
                "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved},
            })
        })
        .collect()
}
