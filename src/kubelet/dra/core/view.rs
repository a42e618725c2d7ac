//! What the DRA manager shows, computed without I/O from its state:
//! `dpctl node`'s drivers and pods, PodResources' dynamic resources, and
//! the claims the local API server serves.

use super::claiminfo::{ClaimCache, ClaimInfo, ClaimsPhase, DriverPrep, PodClaim};
use super::healthinfo::{Health, HealthCache};
use crate::api::podresources::{CdiDevice, ClaimResource, DynamicResource};
use crate::client::dra_checkpoint as checkpoint;
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
    /// fills it from the health stream: `{name: "claim:<pod claim>[/<request>]",
    /// resources: [{resourceID: "<first CDI ID>" or "<driver>/<pool>/<device>", health,
    /// message?}]}` (devices without a report are Unknown): [`with_health`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated_resources_status: BTreeMap<String, Vec<Value>>,
    /// The pod's namespace.
    #[serde(skip)]
    pub namespace: String,
    /// The pod's claims as it names them.
    #[serde(skip)]
    pub pod_claims: Vec<PodClaim>,
    /// Container → its resources.claims[] as (pod claim, request or "").
    #[serde(skip)]
    pub claim_refs: BTreeMap<String, Vec<(String, String)>>,
    /// Container (init containers too) → its resources.claims[] as (pod
    /// claim, request or ""), in the container's order.
    #[serde(skip)]
    pub cdi_refs: BTreeMap<String, Vec<(String, String)>>,
    /// Container → the CDI devices the runtime is given for it (manager.go
    /// GetResources): [`container_cdi`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cdi_devices: BTreeMap<String, Vec<String>>,
    /// Container → the devices (`driver/pool/device`) those CDI devices are
    /// of: [`container_devices`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub given_devices: BTreeMap<String, Vec<String>>,
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

/// resourceclaim.BaseRequestRef: a subrequest `req/sub` counts as `req`.
pub fn base_request(r: &str) -> &str {
    r.split('/').next().unwrap_or(r)
}

/// manager.go buildResourceHealth: the device's first CDI ID as its
/// resourceID (kubelet code and TestBuildResourceHealth), else
/// `<driver>/<pool>/<device>`; the message when there is one
/// (ResourceHealthStatusMessage).
pub fn resource_health(driver: &str, device: &checkpoint::Device, h: &Health) -> Value {
    let id = match device.cdi_device_ids.as_deref().and_then(<[String]>::first) {
        Some(cdi) => cdi.clone(),
        None => format!("{driver}/{}/{}", device.pool_name, device.device_name),
    };
    let mut v = json!({"resourceID": id, "health": h.word});
    if !h.message.is_empty() {
        v["message"] = json!(h.message);
    }
    v
}

/// A claim's devices per driver as the kubelet's ClaimInfo.DriverState holds
/// them: what the driver prepared, else the allocation's (request names
/// without subrequest, no CDI IDs: newClaimInfoFromClaim).
fn driver_devices(c: &ClaimInfo) -> Vec<(String, checkpoint::Device)> {
    let mut out = Vec::new();
    for (driver, prep) in &c.drivers {
        match prep {
            DriverPrep::Prepared(devs) => out.extend(devs.iter().map(|d| (driver.clone(), d.clone()))),
            DriverPrep::Pending => out.extend(c.allocation.iter().filter(|a| &a.driver == driver).map(|a| {
                let d = checkpoint::Device {
                    pool_name: a.pool.clone(),
                    device_name: a.device.clone(),
                    request_names: Some(vec![base_request(&a.request).to_string()]),
                    ..Default::default()
                };
                (driver.clone(), d)
            })),
        }
    }
    out
}

/// `p` with each container's allocatedResourcesStatus filled from `health`
/// (manager.go UpdateAllocatedResourcesStatus): one entry per
/// `resources.claims[]` of the container, named `claim:<pod claim>` or
/// `claim:<pod claim>/<request>`; with a request only the devices whose
/// request names hold its base request (devices without request names
/// count for every request); each resourceID once; entries without devices left out.
pub fn with_health(p: &PodInfo, claims: &ClaimCache, health: &HealthCache) -> PodInfo {
    let mut p = p.clone();
    for (ctr, refs) in &p.claim_refs {
        let mut list: Vec<(String, Vec<Value>)> = Vec::new();
        for (pc, request) in refs {
            let Some(c) = p.claims.get(pc).and_then(|n| claims.get(&format!("{}/{n}", p.namespace))) else {
                continue;
            };
            let name = match request.as_str() {
                "" => format!("claim:{pc}"),
                r => format!("claim:{pc}/{r}"),
            };
            let mut resources: Vec<Value> = Vec::new();
            for (driver, d) in driver_devices(c) {
                let names = d.request_names.as_deref().unwrap_or_default();
                if !request.is_empty() && !names.is_empty() && !names.iter().any(|n| n == base_request(request)) {
                    continue;
                }
                let v = resource_health(&driver, &d, &health.of(&driver, &d.pool_name, &d.device_name));
                if !resources.iter().any(|r| r["resourceID"] == v["resourceID"]) {
                    resources.push(v);
                }
            }
            match list.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = resources,
                None => list.push((name, resources)),
            }
        }
        let list: Vec<Value> = list
            .into_iter()
            .filter(|(_, r)| !r.is_empty())
            .map(|(name, resources)| json!({"name": name, "resources": resources}))
            .collect();
        if !list.is_empty() {
            p.allocated_resources_status.insert(ctr.clone(), list);
        }
    }
    p
}

/// `p` without the health messages (ResourceHealthStatusMessage off:
/// manager.go UpdateAllocatedResourcesStatus leaves `message` unset).
pub fn without_messages(mut p: PodInfo) -> PodInfo {
    for list in p.allocated_resources_status.values_mut() {
        for entry in list {
            for r in entry["resources"].as_array_mut().into_iter().flatten() {
                if let Some(m) = r.as_object_mut() {
                    m.remove("message");
                }
            }
        }
    }
    p
}

/// PodResources' dynamic_resources for one container of pod `p`
/// (container_manager_linux.go GetDynamicResources over manager.go
/// GetContainerClaimInfos): each prepared claim the container uses, once and
/// in the pod's order, each device with its CDI IDs. As upstream builds it,
/// a device's `cdi_devices` are its own CDI IDs after those of the driver's
/// devices before it (the list is declared per driver, not per device:
/// container_manager_linux.go:1081 `var cdiDevices` … `CdiDevices: cdiDevices`),
/// so a PodResources client sees what it sees from kubelet 1.37.
pub fn dynamic_resources(p: &PodInfo, container: &str, claims: &ClaimCache) -> Vec<DynamicResource> {
    let Some(used) = p.containers.get(container) else { return vec![] };
    let names: Vec<&String> = if p.pod_claims.is_empty() {
        // A pod known only from the checkpoint: its containers' order.
        used.iter().filter_map(|pc| p.claims.get(pc)).collect()
    } else {
        p.pod_claims.iter().filter(|pc| used.contains(&pc.pod_claim)).map(|pc| &pc.name).collect()
    };
    let mut seen = BTreeSet::new();
    names
        .into_iter()
        .filter(|name| seen.insert(name.as_str()))
        .filter_map(|name| claims.get(&format!("{}/{name}", p.namespace)))
        .filter_map(claim_entry)
        .collect()
}

/// One prepared claim as PodResources lists it (container_manager_linux.go
/// GetDynamicResources): every device of every driver, a device's CDI
/// devices those of the driver's devices before it and its own.
pub fn claim_entry(c: &ClaimInfo) -> Option<DynamicResource> {
    let prepared = c.prepared()?;
    Some(DynamicResource {
        claim_name: c.name.clone(),
        claim_namespace: c.namespace.clone(),
        claim_resources: prepared
            .iter()
            .flat_map(|(driver, devs)| {
                let mut cdi: Vec<CdiDevice> = Vec::new();
                devs.iter()
                    .map(|d| {
                        cdi.extend(d.cdi_device_ids.iter().flatten().map(|n| CdiDevice { name: n.clone() }));
                        ClaimResource {
                            cdi_devices: cdi.clone(),
                            driver_name: driver.to_string(),
                            pool_name: d.pool_name.clone(),
                            device_name: d.device_name.clone(),
                            // container_manager_linux.go: ShareId: (*string)(device.ShareID).
                            share_id: d.share_id.clone(),
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect(),
    })
}

/// manager.go GetResources for every container of `p` that uses a claim:
/// for each claim (the pod's order), for each request the container names
/// for it (`""`: the whole claim), the devices whose request names hold it
/// or that name none (claiminfo.go cdiDevicesAsList: the request as
/// written, a subrequest not cut); then those of the special claim's
/// mappings of the container (KEP-5004). A claim not in the cache gives the
/// container nothing here (GetResources fails the container's start).
fn given(p: &PodInfo, claims: &ClaimCache) -> BTreeMap<String, Vec<(String, checkpoint::Device)>> {
    let matches = |d: &checkpoint::Device, request: &str| {
        let names = d.request_names.as_deref().unwrap_or_default();
        request.is_empty() || names.is_empty() || names.iter().any(|n| n == request)
    };
    let special = p.extended.as_ref().and_then(|x| {
        let c = claims.get(&format!("{}/{}", p.namespace, x.status.resource_claim_name))?;
        Some((x, driver_devices(c)))
    });
    let mut containers: BTreeSet<&String> = p.cdi_refs.keys().collect();
    if let Some((x, _)) = &special {
        containers.extend(x.status.request_mappings.iter().map(|m| &m.container_name));
    }
    let none = Vec::new();
    let mut out = BTreeMap::new();
    for ctr in containers {
        let refs = p.cdi_refs.get(ctr).unwrap_or(&none);
        let mut devs: Vec<(String, checkpoint::Device)> = Vec::new();
        for pc in &p.pod_claims {
            let Some(c) = claims.get(&format!("{}/{}", p.namespace, pc.name)) else { continue };
            let devices = driver_devices(c);
            for (_, request) in refs.iter().filter(|(name, _)| *name == pc.pod_claim) {
                devs.extend(devices.iter().filter(|(_, d)| matches(d, request)).cloned());
            }
        }
        if let Some((x, devices)) = &special {
            for m in x.status.request_mappings.iter().filter(|m| &m.container_name == ctr) {
                devs.extend(
                    devices.iter().filter(|(_, d)| !m.request_name.is_empty() && matches(d, &m.request_name)).cloned(),
                );
            }
        }
        if !devs.is_empty() {
            out.insert(ctr.clone(), devs);
        }
    }
    out
}

/// The CDI devices GetResources gives each container ([`given`]).
pub fn container_cdi(p: &PodInfo, claims: &ClaimCache) -> BTreeMap<String, Vec<String>> {
    given(p, claims)
        .into_iter()
        .map(|(c, devs)| (c, devs.into_iter().flat_map(|(_, d)| d.cdi_device_ids.unwrap_or_default()).collect()))
        .filter(|(_, ids): &(String, Vec<String>)| !ids.is_empty())
        .collect()
}

/// The devices (`driver/pool/device`) behind what GetResources gives each container ([`given`]).
pub fn container_devices(p: &PodInfo, claims: &ClaimCache) -> BTreeMap<String, Vec<String>> {
    given(p, claims)
        .into_iter()
        .map(|(c, devs)| {
            (c, devs.into_iter().map(|(dr, d)| format!("{dr}/{}/{}", d.pool_name, d.device_name)).collect())
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
                    if let Some(id) = &a.share_id {
                        r["shareID"] = json!(id);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::dra::core::healthinfo::Snapshot;
    use checkpoint::{Device, DriverState, Entry};
    use tokio::time::Instant;

    fn dev(name: &str, requests: &[&str], cdi: &[&str]) -> Device {
        Device {
            pool_name: "p".into(),
            device_name: name.into(),
            request_names: Some(requests.iter().map(|s| s.to_string()).collect()),
            cdi_device_ids: Some(cdi.iter().map(|s| s.to_string()).collect()),
            share_id: None,
        }
    }

    fn health(word: &str, message: &str) -> Health {
        Health { word: word.into(), message: message.into() }
    }

    /// TestBuildResourceHealth: the first CDI ID is the resourceID when the
    /// device has one ("message enabled and CDI id"), else driver/pool/device;
    /// the message only when there is one.
    #[test]
    fn test_build_resource_health() {
        let with_cdi = dev("d0", &[], &["vendor.com/gpu=gpu-0", "vendor.com/gpu=other"]);
        assert_eq!(
            resource_health("gpu.x", &with_cdi, &health("Unhealthy", "ECC error")),
            json!({"resourceID": "vendor.com/gpu=gpu-0", "health": "Unhealthy", "message": "ECC error"})
        );
        let bare = dev("d1", &[], &[]);
        assert_eq!(
            resource_health("gpu.x", &bare, &health("Healthy", "")),
            json!({"resourceID": "gpu.x/p/d1", "health": "Healthy"})
        );
        let none = Device { cdi_device_ids: None, ..bare };
        assert_eq!(resource_health("gpu.x", &none, &health("Unknown", ""))["resourceID"], "gpu.x/p/d1");
    }

    /// TestUpdateAllocatedResourcesStatus: one status per resources.claims[]
    /// entry, `claim:<claim>/<request>` with a request, only that request's
    /// devices (a subrequest counts as its request; devices without request
    /// names count for all), each resourceID once, app containers only.
    #[test]
    fn test_update_allocated_resources_status() {
        let mut driver_state = BTreeMap::new();
        let devices = vec![
            dev("d0", &["req-a"], &["x.com/gpu=d0"]),
            dev("d1", &["req-b"], &[]),
            dev("d2", &[], &[]),
            // Shares d0's CDI ID: reported once.
            dev("d3", &["req-a"], &["x.com/gpu=d0"]),
        ];
        driver_state.insert("gpu.x".to_string(), DriverState { devices: Some(devices), skip_node_operations: None });
        let entry = Entry {
            claim_uid: "uid-1".into(),
            claim_name: "gpu-claim".into(),
            namespace: "ns".into(),
            pod_uids: [("pod-1".to_string(), Default::default())].into(),
            driver_state,
        };
        let claims = ClaimCache::from_checkpoint(&[entry]);
        let mut cache = HealthCache::default();
        let t0 = Instant::now();
        let s = |d: &str, h: &str, m: &str| Snapshot {
            key: ("p".into(), d.into()),
            health: h.into(),
            message: m.into(),
            timeout: None,
        };
        cache.record("gpu.x", vec![s("d0", "Unhealthy", "too hot"), s("d1", "Healthy", "")], t0);
        cache.refresh("gpu.x", t0);
        let refs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        let p = PodInfo {
            uid: "pod-1".into(),
            pod: "ns/p".into(),
            claims: [("claim1".to_string(), "gpu-claim".to_string())].into(),
            containers: BTreeMap::new(),
            phase: ClaimsPhase::Prepared,
            error: None,
            allocated_resources_status: BTreeMap::new(),
            namespace: "ns".into(),
            pod_claims: vec![],
            claim_refs: [
                ("c1".to_string(), refs(&[("claim1", ""), ("claim1", "req-a"), ("claim1", "req-b/sub")])),
                ("c2".to_string(), refs(&[("claim1", "req-c")])),
            ]
            .into(),
            cdi_refs: BTreeMap::new(),
            cdi_devices: BTreeMap::new(),
            given_devices: BTreeMap::new(),
            extended: None,
            extended_view: View::default(),
        };
        let got = with_health(&p, &claims, &cache).allocated_resources_status;
        let d0 = json!({"resourceID": "x.com/gpu=d0", "health": "Unhealthy", "message": "too hot"});
        let d1 = json!({"resourceID": "gpu.x/p/d1", "health": "Healthy"});
        let d2 = json!({"resourceID": "gpu.x/p/d2", "health": "Unknown"});
        assert_eq!(
            got["c1"],
            vec![
                json!({"name": "claim:claim1", "resources": [d0, d1, d2]}),
                json!({"name": "claim:claim1/req-a", "resources": [d0, d2]}),
                json!({"name": "claim:claim1/req-b/sub", "resources": [d1, d2]}),
            ]
        );
        // req-c matches no device with request names; d2 (none) counts for it.
        assert_eq!(got["c2"], vec![json!({"name": "claim:claim1/req-c", "resources": [d2]})]);
        // A claim not in the cache gives no status.
        let mut gone = p.clone();
        gone.claims.insert("claim1".into(), "other".into());
        assert!(with_health(&gone, &claims, &cache).allocated_resources_status.is_empty());
        // ResourceHealthStatusMessage off: the same entries without a message.
        let quiet = without_messages(with_health(&p, &claims, &cache)).allocated_resources_status;
        assert!(!quiet.is_empty() && !serde_json::to_string(&quiet).unwrap().contains("\"message\""), "{quiet:?}");
        assert!(serde_json::to_string(&got).unwrap().contains("\"message\""), "the case has a message: {got:?}");
    }

    /// manager_test.go TestGetResources and claiminfo.go cdiDevicesAsList:
    /// a container naming a claim gets every device's CDI IDs; naming a
    /// request, those of the devices whose request names hold it and of
    /// those that name none; a request as written (a subrequest is not cut
    /// to its request here, unlike the health view); a claim named twice
    /// gives its devices twice; a claim not in the cache gives nothing.
    #[test]
    fn get_resources_gives_each_container_its_requests_cdi_devices() {
        let devices = vec![
            dev("d0", &["req-a"], &["x.com/gpu=d0"]),
            dev("d1", &["req-b"], &["x.com/gpu=d1"]),
            dev("d2", &[], &["x.com/gpu=d2"]),
        ];
        let entry = Entry {
            claim_uid: "uid-1".into(),
            claim_name: "gpu-claim".into(),
            namespace: "ns".into(),
            pod_uids: [("pod-1".to_string(), Default::default())].into(),
            driver_state: [("gpu.x".to_string(), DriverState { devices: Some(devices), skip_node_operations: None })]
                .into(),
        };
        let claims = ClaimCache::from_checkpoint(&[entry]);
        let refs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        let pc = |pod_claim: &str, name: &str| PodClaim {
            pod_claim: pod_claim.into(),
            name: name.into(),
            template: None,
            spec: None,
        };
        let p = PodInfo {
            uid: "pod-1".into(),
            pod: "ns/p".into(),
            claims: BTreeMap::new(),
            containers: BTreeMap::new(),
            phase: ClaimsPhase::Prepared,
            error: None,
            allocated_resources_status: BTreeMap::new(),
            namespace: "ns".into(),
            pod_claims: vec![pc("claim1", "gpu-claim"), pc("other", "missing")],
            claim_refs: BTreeMap::new(),
            cdi_refs: [
                ("whole".to_string(), refs(&[("claim1", "")])),
                ("a".to_string(), refs(&[("claim1", "req-a")])),
                ("sub".to_string(), refs(&[("claim1", "req-b/sub")])),
                ("twice".to_string(), refs(&[("claim1", "req-a"), ("claim1", "req-b")])),
                ("none".to_string(), refs(&[("other", "")])),
            ]
            .into(),
            cdi_devices: BTreeMap::new(),
            given_devices: BTreeMap::new(),
            extended: None,
            extended_view: View::default(),
        };
        let got = container_cdi(&p, &claims);
        let ids = |v: &[&str]| v.iter().map(|s| format!("x.com/gpu={s}")).collect::<Vec<_>>();
        assert_eq!(got["whole"], ids(&["d0", "d1", "d2"]));
        assert_eq!(got["a"], ids(&["d0", "d2"]));
        assert_eq!(got["sub"], ids(&["d2"]));
        assert_eq!(got["twice"], ids(&["d0", "d2", "d1", "d2"]));
        assert!(!got.contains_key("none"), "{got:?}");
    }

    /// container_manager_linux.go GetDynamicResources: a claim a container
    /// names twice (two requests) is listed once; a driver's second device
    /// carries the first's CDI IDs before its own (the list is per driver).
    #[test]
    fn podresources_lists_each_claim_once_with_cdi_ids_accumulated_per_driver() {
        let entry = Entry {
            claim_uid: "uid-1".into(),
            claim_name: "gpu-claim".into(),
            namespace: "ns".into(),
            pod_uids: [("pod-1".to_string(), Default::default())].into(),
            driver_state: [(
                "gpu.x".to_string(),
                DriverState {
                    devices: Some(vec![dev("d0", &["r0"], &["x.com/gpu=d0"]), dev("d1", &["r1"], &["x.com/gpu=d1"])]),
                    skip_node_operations: None,
                },
            )]
            .into(),
        };
        let claims = ClaimCache::from_checkpoint(&[entry]);
        let p = PodInfo {
            uid: "pod-1".into(),
            pod: "ns/p".into(),
            claims: [("g".to_string(), "gpu-claim".to_string())].into(),
            containers: [("both".to_string(), vec!["g".to_string(), "g".to_string()])].into(),
            phase: ClaimsPhase::Prepared,
            error: None,
            allocated_resources_status: BTreeMap::new(),
            namespace: "ns".into(),
            pod_claims: vec![PodClaim { pod_claim: "g".into(), name: "gpu-claim".into(), template: None, spec: None }],
            claim_refs: BTreeMap::new(),
            cdi_refs: BTreeMap::new(),
            cdi_devices: BTreeMap::new(),
            given_devices: BTreeMap::new(),
            extended: None,
            extended_view: View::default(),
        };
        let got = dynamic_resources(&p, "both", &claims);
        assert_eq!(got.len(), 1, "{got:?}");
        let cdi = |i: usize| got[0].claim_resources[i].cdi_devices.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(cdi(0), ["x.com/gpu=d0"]);
        assert_eq!(cdi(1), ["x.com/gpu=d0", "x.com/gpu=d1"]);
    }
}
