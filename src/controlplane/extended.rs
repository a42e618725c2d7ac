//! DRA-backed extended resources (KEP-5004, the DRAExtendedResource gate)
//! as the scheduler decides them, without I/O: which resources of a pod
//! DRA serves on a node, the special claim it creates for the pod
//! (`<pod>-extended-resources-XXXXX`, its requests `container-<i>-request-<j>`)
//! and the pod's `status.extendedResourceClaimStatus`
//! (pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go).
//! The mock kubelet's scheduler part uses it for its own pods
//! (`kubelet::dra::core::extended`), the control plane's controller for pods of
//! the API bound to a node.

use super::objects::{ClaimSpec, Object, Request};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The implicit extended resource name of a DeviceClass is this prefix and
/// the class name (resourceapi.ResourceDeviceClassPrefix).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation that marks the special claim
/// (resourceapi.ExtendedResourceClaimAnnotation).
pub const CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// One entry of `requestMappings` (v1.ContainerExtendedResourceRequest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMapping {
    /// The container.
    pub container_name: String,
    /// The extended resource it asks for.
    pub resource_name: String,
    /// The request of the special claim that serves it.
    pub request_name: String,
}

/// `status.extendedResourceClaimStatus` (v1.PodExtendedResourceClaimStatus).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedResourceClaimStatus {
    /// Which container and resource each request serves.
    pub request_mappings: Vec<RequestMapping>,
    /// The special claim's name.
    pub resource_claim_name: String,
}

/// The special claim of one pod, as the scheduler would create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedClaim {
    /// `metadata.generateName`: `<pod>-extended-resources-`.
    pub generate_name: String,
    /// The pod's status field (its claim name is the generated one).
    pub status: ExtendedResourceClaimStatus,
    /// `spec`: one `exactly` request per (container, resource).
    pub spec: ClaimSpec,
    /// Resource → the DeviceClass serving it.
    pub classes: Vec<(String, String)>,
}

/// Is this an extended resource name (a domain-prefixed name outside
/// `kubernetes.io/`, not a quota's `requests.`): what a device plugin serves.
pub fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// One container as the scheduler reads it for extended resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ctr {
    /// Its name.
    pub name: String,
    /// DRA-backed or device-plugin extended resource → count (limits).
    pub resources: BTreeMap<String, u64>,
    /// Every resource name of its requests, sorted (limits default
    /// requests): the `j` of a request name `container-<i>-request-<j>`.
    pub request_keys: Vec<String>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restart_always: bool,
}

/// A pod as the scheduler reads it for extended resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodShape {
    /// metadata.name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// spec.initContainers.
    pub init_containers: Vec<Ctr>,
    /// spec.containers.
    pub containers: Vec<Ctr>,
}

impl PodShape {
    /// A pod of the API: its containers' extended-resource limits (whole
    /// numbers; anything else is left out, as validation refuses it).
    pub fn of_api(pod: &Value) -> PodShape {
        let ctr = |c: &Value| {
            let res = &c["resources"];
            let mut resources = BTreeMap::new();
            for (k, v) in res["limits"].as_object().into_iter().flatten() {
                let n = match v {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s.trim().parse::<u64>().ok(),
                    _ => None,
                };
                if let Some(n) = n.filter(|n| *n > 0).filter(|_| is_dra_extended_name(k)) {
                    resources.insert(k.clone(), n);
                }
            }
            let mut request_keys: Vec<String> = ["limits", "requests"]
                .iter()
                .flat_map(|m| res[*m].as_object().into_iter().flat_map(|o| o.keys().cloned()))
                .collect();
            request_keys.sort();
            request_keys.dedup();
            Ctr {
                name: c["name"].as_str().unwrap_or_default().to_string(),
                resources,
                request_keys,
                restart_always: c["restartPolicy"] == "Always",
            }
        };
        let list = |k: &str| pod["spec"][k].as_array().into_iter().flatten().map(ctr).collect();
        PodShape {
            name: pod["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            uid: pod["metadata"]["uid"].as_str().unwrap_or_default().to_string(),
            init_containers: list("initContainers"),
            containers: list("containers"),
        }
    }
}

/// The special claim `x` of pod `pod_name` (`uid`) in `namespace` as the
/// scheduler creates it: generateName, the annotation, the pod as
/// controlling owner, one `exactly` request per (container, resource).
pub fn claim_object(x: &ExtendedClaim, namespace: &str, pod_name: &str, uid: &str) -> Value {
    let requests: Vec<Value> = x
        .spec
        .requests
        .iter()
        .map(|r| json!({"name": r.name, "exactly": {"deviceClassName": r.class, "allocationMode": "ExactCount", "count": r.count}}))
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": x.generate_name, "namespace": namespace,
            "annotations": { CLAIM_ANNOTATION: "true" },
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid, "controller": true}]},
        "spec": {"devices": {"requests": requests}}})
}

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
    pod: &PodShape,
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
    c: &Ctr,
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
pub fn build(pod: &PodShape, served: &BTreeMap<String, String>) -> Option<ExtendedClaim> {
    let all: Vec<&Ctr> = pod.init_containers.iter().chain(&pod.containers).collect();
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
