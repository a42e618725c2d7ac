//! DRA-backed extended resources (KEP-5004, the DRAExtendedResource gate)
//! on the kubelet's side, decided without I/O: the scheduler's part for a
//! manifest's pod (which resources DRA serves, the special claim, the pod's
//! `status.extendedResourceClaimStatus`: [`crate::controlplane::extended`]
//! on the pod's shape), and the CDI devices the kubelet hands each container
//! (pkg/kubelet/cm/dra/manager.go GetResources, claiminfo.go cdiDevicesAsList).

use super::claiminfo::{ClaimCache, ClaimInfo};
use super::view::{PodInfo, View};
use crate::api::k8s::api::core::v1::PodExtendedResourceClaimStatus;
use crate::api::podresources::DynamicResource;
use crate::client::dra_checkpoint as checkpoint;
use crate::kubelet::manifest::extended::{
    ExtendedClaim, ExtendedResourceClaimStatus, RequestMapping, DEVICE_CLASS_PREFIX,
};
use crate::kubelet::manifest::{ClaimSource, Container, Pod, PodClaim};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

use crate::controlplane::extended::{self as decide, Ctr, PodShape};
pub use crate::controlplane::extended::{claim_name, class_mapping, is_dra_extended_name};

/// A manifest's pod as the scheduler's KEP-5004 part reads it.
fn shape(pod: &Pod) -> PodShape {
    let ctr = |c: &Container| Ctr {
        name: c.name.clone(),
        resources: c.resources.clone(),
        request_keys: c.request_keys.clone(),
        restart_always: c.restart_always,
    };
    PodShape {
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        init_containers: pod.init_containers.iter().map(ctr).collect(),
        containers: pod.containers.iter().map(ctr).collect(),
    }
}

/// filterExtendedResources for a manifest's pod ([`decide::dra_served`]).
pub fn dra_served(
    pod: &Pod,
    mapping: &BTreeMap<String, String>,
    allocatable: &BTreeMap<String, usize>,
) -> BTreeMap<String, String> {
    decide::dra_served(&shape(pod), mapping, allocatable)
}

/// The special claim for a manifest's pod ([`decide::build`]).
pub fn build(pod: &Pod, served: &BTreeMap<String, String>) -> Option<ExtendedClaim> {
    decide::build(&shape(pod), served)
}

/// The special claim a pod of the API came with (its
/// `status.extendedResourceClaimStatus`, written by the scheduler that
/// placed it), taken out of its claims for admission to put back ([`split`]).
pub fn take_given(pod: &mut Pod) -> Option<ExtendedClaim> {
    let i = pod.resource_claims.iter().position(|c| matches!(c.source, ClaimSource::Extended(_)))?;
    match pod.resource_claims.remove(i).source {
        ClaimSource::Extended(x) => Some(*x),
        _ => None,
    }
}

/// The special claim of a pod of the API from its
/// `status.extendedResourceClaimStatus`: its name and mappings (its requests
/// are the claim object's, read from the API server).
pub fn given(pod: &str, status: PodExtendedResourceClaimStatus) -> Option<ExtendedClaim> {
    let name = status.resource_claim_name?;
    let request_mappings: Vec<RequestMapping> = status
        .request_mappings
        .into_iter()
        .map(|m| RequestMapping {
            container_name: m.container_name.unwrap_or_default(),
            resource_name: m.resource_name.unwrap_or_default(),
            request_name: m.request_name.unwrap_or_default(),
        })
        .collect();
    let classes: BTreeSet<(String, String)> =
        request_mappings.iter().map(|m| (m.resource_name.clone(), String::new())).collect();
    Some(ExtendedClaim {
        generate_name: format!("{pod}-extended-resources-"),
        status: ExtendedResourceClaimStatus { request_mappings, resource_claim_name: name },
        spec: Default::default(),
        classes: classes.into_iter().collect(),
    })
}

/// What admission makes of a pod: the pod the device manager sees (the
/// resources DRA serves, and implicit DeviceClass names, which are no
/// extended resources to it, taken out) and the pod the lifecycle runs
/// (the same, with the special claim among its claims).
pub fn split(pod: &Pod, claim: Option<ExtendedClaim>) -> (Pod, Pod) {
    let served: BTreeSet<&str> = claim.iter().flat_map(|x| x.classes.iter().map(|(r, _)| r.as_str())).collect();
    let mut devices = pod.clone();
    for c in devices.init_containers.iter_mut().chain(devices.containers.iter_mut()) {
        c.resources.retain(|r, _| !served.contains(r.as_str()) && !r.starts_with(DEVICE_CLASS_PREFIX));
    }
    let mut life = devices.clone();
    if let Some(x) = claim {
        let name = x.status.resource_claim_name.clone();
        life.resource_claims.push(PodClaim { name, source: ClaimSource::Extended(Box::new(x)) });
    }
    (devices, life)
}

/// The pod's special claim, if it has one.
pub fn of(pod: &Pod) -> Option<&ExtendedClaim> {
    pod.resource_claims.iter().find_map(|c| match &c.source {
        ClaimSource::Extended(x) => Some(x.as_ref()),
        _ => None,
    })
}

/// GetResources for one mapping: the CDI IDs of the devices whose request
/// names include `request`, or that name none (cdiDevicesAsList).
fn cdi_for_request<'a>(devices: &'a [checkpoint::Device], request: &str) -> impl Iterator<Item = String> + 'a {
    let request = request.to_string();
    devices
        .iter()
        .filter(move |d| {
            let names = d.request_names.as_deref().unwrap_or(&[]);
            names.is_empty() || names.contains(&request)
        })
        .flat_map(|d| d.cdi_device_ids.clone().unwrap_or_default())
}

/// The CDI devices container `container` gets from the special claim whose
/// prepared devices are `devices`: for each mapping that names it (mappings
/// exist only for containers asking for the resource), the matching devices.
pub fn container_cdi(
    status: &ExtendedResourceClaimStatus,
    container: &str,
    devices: &[checkpoint::Device],
) -> Vec<String> {
    status
        .request_mappings
        .iter()
        .filter(|m| m.container_name == container)
        .flat_map(|m| cdi_for_request(devices, &m.request_name))
        .collect()
}

/// Mappings that give their container nothing although the claim is
/// prepared (dra-driver-cpu#197: prepare succeeded, the CDI spec was written,
/// nothing was injected), each as one sentence naming the fix.
pub fn unserved(status: &ExtendedResourceClaimStatus, devices: &[checkpoint::Device]) -> Vec<(RequestMapping, String)> {
    let answered: BTreeSet<String> = devices.iter().flat_map(|d| d.request_names.clone().unwrap_or_default()).collect();
    status
        .request_mappings
        .iter()
        .filter(|m| cdi_for_request(devices, &m.request_name).next().is_none())
        .map(|m| {
            let why = if devices.is_empty() {
                "the driver prepared no device".to_string()
            } else if !answered.contains(&m.request_name) {
                format!(
                    "no prepared device names request {:?} (the driver answered request names [{}]); a driver must answer the claim's request names",
                    m.request_name,
                    answered.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            } else {
                format!("the devices of request {:?} have no CDI device IDs", m.request_name)
            };
            let text = format!(
                "container {:?} asks for {} through request {:?} of claim {}, but gets no CDI devices: {why}",
                m.container_name, m.resource_name, m.request_name, status.resource_claim_name
            );
            (m.clone(), text)
        })
        .collect()
}

/// Every device a claim's drivers prepared.
pub fn devices(c: &ClaimInfo) -> Vec<checkpoint::Device> {
    c.prepared().map(|m| m.values().flat_map(|d| d.iter().cloned()).collect()).unwrap_or_default()
}

fn special<'a>(p: &'a PodInfo, claims: &'a ClaimCache) -> Option<(&'a ExtendedClaim, &'a ClaimInfo)> {
    let x = p.extended.as_ref()?;
    Some((x, claims.get(&format!("{}/{}", p.namespace, x.status.resource_claim_name))?))
}

/// `p` with its extended-resource view filled from the claim cache.
pub fn fill(mut p: PodInfo, claims: &ClaimCache) -> PodInfo {
    let Some(x) = p.extended.clone() else { return p };
    let mut v = View { extended_resource_claim_status: Some(x.status.clone()), ..View::default() };
    if let Some((_, c)) = special(&p, claims).filter(|(_, c)| c.done) {
        let devs = devices(c);
        for m in &x.status.request_mappings {
            v.extended_cdi_devices
                .entry(m.container_name.clone())
                .or_insert_with(|| container_cdi(&x.status, &m.container_name, &devs));
        }
        v.extended_unserved = unserved(&x.status, &devs).into_iter().map(|(_, t)| t).collect();
    }
    p.extended_view = v;
    p
}

/// PodResources' entry of the special claim for `container`, when a request
/// is mapped to it: the whole claim, as for any claim (manager.go
/// GetContainerClaimInfos appends the special claim's whole ClaimInfo for a
/// container with a mapping; the CDI devices the container is *given* are its
/// requests' only: [`container_cdi`]).
pub fn dynamic_resource(p: &PodInfo, container: &str, claims: &ClaimCache) -> Option<DynamicResource> {
    let (x, c) = special(p, claims)?;
    if !x.status.request_mappings.iter().any(|m| m.container_name == container) {
        return None;
    }
    super::view::claim_entry(c)
}

/// The special claims among the served claim objects get what the scheduler
/// writes: generateName, the annotation, the pod as controlling owner, and
/// the `exactly` requests.
pub fn claim_objects(objects: &mut [Value], pods: &BTreeMap<String, PodInfo>) {
    for (uid, p) in pods {
        let Some(x) = &p.extended else { continue };
        let pod_name = p.pod.rsplit('/').next().unwrap_or_default();
        let mine = |o: &&mut Value| {
            o["metadata"]["name"] == x.status.resource_claim_name.as_str()
                && o["metadata"]["namespace"] == p.namespace.as_str()
        };
        let Some(o) = objects.iter_mut().find(mine) else { continue };
        let made = decide::claim_object(x, &p.namespace, pod_name, uid);
        for k in ["generateName", "annotations", "ownerReferences"] {
            o["metadata"][k] = made["metadata"][k].clone();
        }
        o["spec"] = made["spec"].clone();
    }
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
