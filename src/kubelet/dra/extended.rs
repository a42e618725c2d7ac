//! DRA-backed extended resources (KEP-5004, the DRAExtendedResource gate),
//! decided without I/O: which path serves a resource a pod asks for, the
//! special claim the scheduler would create for the pod and the pod's
//! `status.extendedResourceClaimStatus`
//! (pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go),
//! and the CDI devices the kubelet hands each container
//! (pkg/kubelet/cm/dra/manager.go GetResources, claiminfo.go cdiDevicesAsList).

use super::claiminfo::{ClaimCache, ClaimInfo};
use super::view::{PodInfo, View};
use crate::api::podresources::DynamicResource;
use crate::client::dra_checkpoint as checkpoint;
use crate::controlplane::objects::{ClaimSpec, Object, Request};
use crate::kubelet::manifest::extended::{
    ExtendedClaim, ExtendedResourceClaimStatus, RequestMapping, CLAIM_ANNOTATION, DEVICE_CLASS_PREFIX,
};
use crate::kubelet::manifest::{is_extended, ClaimSource, Container, Pod, PodClaim};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// schedutil.IsDRAExtendedResourceName: an extended resource name, or a
/// DeviceClass's implicit one (`deviceclass.resource.kubernetes.io/<class>`).
pub fn is_dra_extended_name(name: &str) -> bool {
    is_extended(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// The scheduler's DeviceClass resolver: resource name → class. Every class
/// maps its implicit name; a class with `spec.extendedResourceName` maps that
/// too (extended/cache.go). Two classes naming one resource: the first by
/// name wins (upstream: the last informer event).
pub fn class_mapping<'a>(objects: impl IntoIterator<Item = &'a Object>) -> BTreeMap<String, String> {
    let mut classes: Vec<(&String, &Option<String>)> = objects
        .into_iter()
        .filter_map(|o| match o {
            Object::Class { name, extended_resource_name, .. } => Some((name, extended_resource_name)),
            _ => None,
        })
        .collect();
    classes.sort();
    let mut out = BTreeMap::new();
    for (name, explicit) in classes {
        out.entry(format!("{DEVICE_CLASS_PREFIX}{name}")).or_insert_with(|| name.clone());
        if let Some(r) = explicit {
            out.entry(r.clone()).or_insert_with(|| name.clone());
        }
    }
    out
}

/// filterExtendedResources: the resources of `pod` DRA serves on this node —
/// a DeviceClass maps it and the node's allocatable for it (from device
/// plugins) is 0. A device plugin with allocatable > 0 wins. Resource → class.
pub fn dra_served(
    pod: &Pod,
    mapping: &BTreeMap<String, String>,
    allocatable: &BTreeMap<String, usize>,
) -> BTreeMap<String, String> {
    pod.init_containers
        .iter()
        .chain(&pod.containers)
        .flat_map(|c| c.resources.iter())
        .filter(|(r, n)| **n > 0 && is_dra_extended_name(r))
        .filter(|(r, _)| allocatable.get(*r).copied().unwrap_or(0) == 0)
        .filter_map(|(r, _)| Some((r.clone(), mapping.get(r)?.clone())))
        .collect()
}

/// The special claim's name: the API server's generateName (`<base>` cut to
/// 58 characters, then 5 characters); the suffix comes from the pod's UID
/// so a restarted kubelet names the same claim.
pub fn claim_name(pod: &str, uid: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let base: String = format!("{pod}-extended-resources-").chars().take(58).collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uid.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let suffix: String = (0..5)
        .map(|i| {
            let k = usize::try_from((h >> (i * 8)) % ALPHABET.len() as u64).unwrap_or(0);
            char::from(ALPHABET[k])
        })
        .collect();
    format!("{base}{suffix}")
}

/// createResourceRequestAndMappings: container `i`'s request for `resource`,
/// after using what `reusable` requests (of later long-lived containers) give.
fn request_and_mappings(
    i: usize,
    c: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<Request>],
) -> (Option<Request>, Vec<RequestMapping>) {
    let Some(want) = c.resources.get(resource).copied().filter(|n| *n > 0) else { return (None, vec![]) };
    let map = |request: &str| RequestMapping {
        container_name: c.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.count;
        mappings.push(map(&r.name));
        if sum >= want {
            return (None, mappings);
        }
    }
    let j = c.request_keys.iter().position(|k| k == resource).unwrap_or(0);
    let name = format!("container-{i}-request-{j}");
    mappings.push(map(&name));
    let request = Request { name, class: class.to_string(), count: want - sum, ..Request::default() };
    (Some(request), mappings)
}

/// createRequestsAndMappings and the claim of preFilterExtendedResources:
/// the special claim for the resources `served` (resource → class), or None.
/// `i` counts init containers, then containers; a non-sidecar init container
/// first uses the requests of later long-lived containers and only asks for
/// the rest, and init containers share the largest of their requests.
pub fn build(pod: &Pod, served: &BTreeMap<String, String>) -> Option<ExtendedClaim> {
    let all: Vec<&Container> = pod.init_containers.iter().chain(&pod.containers).collect();
    let n_init = pod.init_containers.len();
    let short = |i: usize| i < n_init && !all[i].restart_always;
    let mut requests: Vec<Request> = Vec::new();
    let mut mappings: Vec<RequestMapping> = Vec::new();
    for (resource, class) in served {
        let mut long_reqs: Vec<Option<Request>> = vec![None; all.len()];
        let mut long_maps = Vec::new();
        for i in (0..all.len()).filter(|i| !short(*i)) {
            let (r, m) = request_and_mappings(i, all[i], resource, class, &[]);
            long_reqs[i] = r;
            long_maps.extend(m);
        }
        let mut max_short: Option<Request> = None;
        let mut short_names = BTreeSet::new();
        let mut short_maps = Vec::new();
        for i in (0..all.len()).filter(|i| short(*i)) {
            let (r, m) = request_and_mappings(i, all[i], resource, class, &long_reqs[i..]);
            if let Some(r) = r {
                short_names.insert(r.name.clone());
                if max_short.as_ref().is_none_or(|m| m.count < r.count) {
                    max_short = Some(r);
                }
            }
            short_maps.extend(m);
        }
        if let Some(max) = &max_short {
            if short_names.len() > 1 {
                short_names.remove(&max.name);
                for m in short_maps.iter_mut().filter(|m| short_names.contains(&m.request_name)) {
                    m.request_name = max.name.clone();
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long_reqs.into_iter().flatten());
        mappings.extend(long_maps);
        mappings.extend(short_maps);
    }
    if requests.is_empty() && mappings.is_empty() {
        return None;
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    Some(ExtendedClaim {
        generate_name: format!("{}-extended-resources-", pod.name),
        status: ExtendedResourceClaimStatus {
            request_mappings: mappings,
            resource_claim_name: claim_name(&pod.name, &pod.uid),
        },
        spec: ClaimSpec { requests, ..ClaimSpec::default() },
        classes: served.iter().map(|(r, c)| (r.clone(), c.clone())).collect(),
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
        o["metadata"]["generateName"] = json!(x.generate_name);
        o["metadata"]["annotations"] = json!({ CLAIM_ANNOTATION: "true" });
        o["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid, "controller": true}]);
        let requests: Vec<Value> = x
            .spec
            .requests
            .iter()
            .map(|r| json!({"name": r.name, "exactly": {"deviceClassName": r.class, "allocationMode": "ExactCount", "count": r.count}}))
            .collect();
        o["spec"] = json!({"devices": {"requests": requests}});
    }
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
