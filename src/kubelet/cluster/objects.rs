//! What a node of a cluster writes to the API server, as the kubelet
//! writes it — pure functions, each unit-tested: the Node it registers
//! (kubelet_node_status.go initialNode), its status (pkg/kubelet/nodestatus
//! setters: capacity and allocatable with the device plugins' extended
//! resources, the pressure conditions and Ready, nodeInfo, addresses), its
//! Lease (pkg/kubelet/nodelease), a pod's status (the status manager's
//! patch), and a bound pod read back as the lifecycle's [`Pod`].

use crate::kubelet::cm::PodView;
use crate::kubelet::devicemanager::core::ResourceStatus;
use crate::kubelet::manifest::{ClaimSource, Pod, PodClaim};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The kubelet's lease duration (kubelet config nodeLeaseDurationSeconds, 40 s).
pub const LEASE_DURATION_SECONDS: u64 = 40;
/// The lease is renewed every quarter of its duration (nodelease.NewController: renewIntervalFraction 0.25).
pub const LEASE_RENEW: std::time::Duration = std::time::Duration::from_secs(LEASE_DURATION_SECONDS / 4);
/// The namespace of node leases (v1.NamespaceNodeLease).
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Pods a node takes (kubelet config maxPods default).
pub const MAX_PODS: u64 = 110;

/// The machine a node reports (the kubelet reads it from cAdvisor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// CPUs.
    pub cpus: u64,
    /// Memory in KiB.
    pub memory_kib: u64,
    /// The address pods and the node are given (InternalIP).
    pub address: String,
    /// The kubelet version it reports (`v1.X.0`).
    pub kubelet_version: String,
    /// `status.declaredFeatures` (NodeDeclaredFeatures, KEP-5328): the
    /// features its kubelet declares — here DRANodeAllocatableResources
    /// when that gate is on (component-helpers nodedeclaredfeatures
    /// dranodeallocatableresources: Discover is the gate), which
    /// kube-apiserver's NodeDeclaredFeatureValidator asks of a node before
    /// it takes a slice with node-allocatable resources for it.
    pub declared_features: Vec<String>,
}

impl Machine {
    /// This machine: its CPUs and memory, loopback as its address.
    pub fn here(kubelet_version: &str) -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u64).unwrap_or(1);
        let memory_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(1 << 20);
        Machine {
            cpus,
            memory_kib,
            address: "127.0.0.1".into(),
            kubelet_version: format!("v{kubelet_version}.0"),
            declared_features: vec![],
        }
    }
}

/// A time as metav1.Time writes it (RFC 3339, seconds).
pub fn time(t: SystemTime) -> String {
    crate::core::time::rfc3339_seconds(t)
}

/// A time as metav1.MicroTime writes it (RFC 3339, exactly six fractional digits:
/// the API server parses it with that layout).
pub fn micro_time(t: SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let base = time(std::time::UNIX_EPOCH + std::time::Duration::from_secs(d.as_secs()));
    format!("{}.{:06}Z", base.trim_end_matches('Z'), d.subsec_micros())
}

/// status.capacity and status.allocatable: the machine's cpu, memory and
/// pods, and each device plugin resource (capacity: every device;
/// allocatable: the healthy ones; a removed resource at 0, as the device
/// manager's GetCapacity reports deleted resources).
pub fn resources(
    machine: &Machine,
    devices: &[ResourceStatus],
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut capacity = BTreeMap::from([
        ("cpu".to_string(), machine.cpus.to_string()),
        ("memory".to_string(), format!("{}Ki", machine.memory_kib)),
        ("pods".to_string(), MAX_PODS.to_string()),
    ]);
    let mut allocatable = capacity.clone();
    for r in devices {
        capacity.insert(r.resource.clone(), r.capacity.to_string());
        allocatable.insert(r.resource.clone(), r.allocatable.to_string());
    }
    (capacity, allocatable)
}

/// The node's conditions at `now`: no pressure, Ready (the kubelet's reasons and messages).
pub fn conditions(now: &str, since: &str) -> Vec<Value> {
    let c = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": since})
    };
    vec![
        c("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        c("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        c("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        c("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
}

/// The Node's status: resources, conditions (heartbeat `now`, transition
/// `since`), nodeInfo, addresses, and the features declared (`declaredFeatures`, when any).
pub fn node_status(
    name: &str,
    machine: &Machine,
    resources: &(BTreeMap<String, String>, BTreeMap<String, String>),
    now: &str,
    since: &str,
) -> Value {
    let mut status = json!({
        "capacity": resources.0,
        "allocatable": resources.1,
        "conditions": conditions(now, since),
        "addresses": [{"type": "InternalIP", "address": machine.address}, {"type": "Hostname", "address": name}],
        "nodeInfo": {
            "machineID": crate::controlplane::objects::derived_uid(&format!("machine\0{name}")).replace('-', ""),
            "systemUUID": crate::controlplane::objects::derived_uid(&format!("system\0{name}")),
            "bootID": crate::controlplane::objects::derived_uid(&format!("boot\0{name}")),
            "kernelVersion": "dpctl",
            "osImage": "dpctl mock kubelet",
            "containerRuntimeVersion": format!("dpctl://{}", env!("CARGO_PKG_VERSION")),
            "kubeletVersion": machine.kubelet_version,
            "operatingSystem": std::env::consts::OS,
            "architecture": arch(),
        },
    });
    if !machine.declared_features.is_empty() {
        status["declaredFeatures"] = json!(machine.declared_features);
    }
    status
}

/// GOARCH of this machine.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The Node the kubelet registers (initialNode): the default labels, `labels`
/// (the kubelet's `--node-labels`) and its status.
pub fn node(name: &str, labels: &BTreeMap<String, String>, status: Value) -> Value {
    let (os, arch) = (std::env::consts::OS, arch());
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": os,
                "kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": os,
                "beta.kubernetes.io/arch": arch,
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "status": status,
    });
    for (k, v) in labels {
        node["metadata"]["labels"][k] = json!(v);
    }
    node
}

/// The node's Lease (nodelease controller newLease): held by the node,
/// owned by its Node, renewed at `renew`.
pub fn lease(name: &str, node_uid: &str, renew: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": renew},
    })
}

/// Why a pod bound to the node cannot be run (yet).
#[derive(Debug)]
pub enum BoundPodError {
    /// The pod is not one the lifecycle can run.
    Pod(crate::kubelet::manifest::ManifestError),
    /// A claim from a template the resourceclaim controller has not named yet.
    NotNamedYet {
        /// The pod claim.
        claim: String,
        /// Its template.
        template: String,
    },
}

impl std::fmt::Display for BoundPodError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundPodError::Pod(e) => e.fmt(f),
            BoundPodError::NotNamedYet { claim, template } => write!(
                f,
                "pod claim {claim:?} (template {template:?}) has no entry in status.resourceClaimStatuses yet"
            ),
        }
    }
}

impl std::error::Error for BoundPodError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BoundPodError::Pod(e) => Some(e),
            BoundPodError::NotNamedYet { .. } => None,
        }
    }
}

/// A pod bound to the node, as the lifecycle runs it: a claim from a
/// template is the claim the resourceclaim controller made for it (named in
/// status.resourceClaimStatuses, as resourceclaim.Name reads it); a pod
/// claim the controller decided needs no claim (no name there) is left out.
pub fn bound_pod(v: &Value) -> Result<Pod, BoundPodError> {
    let typed = crate::kubelet::manifest::typed(v).map_err(BoundPodError::Pod)?;
    let mut pod = crate::kubelet::manifest::from_api(&typed).map_err(BoundPodError::Pod)?;
    let status = typed.status.unwrap_or_default();
    let mut dropped = Vec::new();
    for c in &mut pod.resource_claims {
        if let ClaimSource::Template(t) = &c.source {
            let named = status.resource_claim_statuses.iter().find(|s| s.name.as_deref() == Some(c.name.as_str()));
            match named.map(|s| s.resource_claim_name.as_deref()) {
                Some(Some(n)) => c.source = ClaimSource::Generated { template: t.clone(), claim: n.to_string() },
                Some(None) => dropped.push(c.name.clone()),
                None => return Err(BoundPodError::NotNamedYet { claim: c.name.clone(), template: t.clone() }),
            }
        }
    }
    pod.resource_claims.retain(|c| !dropped.contains(&c.name));
    // KEP-5004: the special claim the scheduler made for the pod's DRA-backed extended resources.
    if let Some(x) =
        status.extended_resource_claim_status.and_then(|x| crate::kubelet::dra::core::extended::given(&pod.name, x))
    {
        let name = x.status.resource_claim_name.clone();
        pod.resource_claims.push(PodClaim { name, source: ClaimSource::Extended(Box::new(x)) });
    }
    for c in pod.init_containers.iter_mut().chain(pod.containers.iter_mut()) {
        let keep: Vec<bool> = c.claims.iter().map(|n| !dropped.contains(n)).collect();
        let mut k = keep.iter();
        c.claims.retain(|_| *k.next().unwrap_or(&true));
        let mut k = keep.iter();
        c.claim_requests.retain(|_| *k.next().unwrap_or(&true));
    }
    Ok(pod)
}

/// The ResourceClaims (`name`) a bound pod's lifecycle prepares.
pub fn claim_names(pod: &Pod) -> Vec<String> {
    pod.resource_claims
        .iter()
        .filter_map(|c| match &c.source {
            ClaimSource::Claim(n) | ClaimSource::Generated { claim: n, .. } => Some(n.clone()),
            ClaimSource::Extended(x) => Some(x.status.resource_claim_name.clone()),
            ClaimSource::Template(_) => None,
        })
        .collect()
}

/// A stable pod IP for `uid` (10.244.0.0/16; no network is set up).
pub fn pod_ip(uid: &str) -> String {
    let h = uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("10.244.{}.{}", (h >> 8) & 0xff, (h & 0xfd) + 2)
}

/// A pod's status as the kubelet's status manager writes it: phase,
/// conditions (PodReadyToStartContainers, Initialized, Ready,
/// ContainersReady and PodScheduled True — the kubelet writes that one too,
/// so a pod bound by `spec.nodeName` has it), container statuses with each
/// container's image from `spec` and allocatedResourcesStatus,
/// hostIP/podIP and startTime. `since` is when the pod was first seen;
/// `scheduled` the PodScheduled condition's lastTransitionTime (the
/// scheduler's when it wrote one: updateLastTransitionTime keeps it).
pub fn pod_status(
    view: &PodView,
    health: Option<&BTreeMap<String, Vec<Value>>>,
    spec: &Value,
    machine: &Machine,
    since: &str,
    scheduled: &str,
) -> Value {
    let shown = crate::kubelet::pods::pod_object(view, health, "");
    let mut status = shown["status"].clone();
    let sandbox = if status["phase"] == "Running" { "True" } else { "False" };
    if let Some(cs) = status["conditions"].as_array_mut() {
        // generateAPIPodStatus' order: PodReadyToStartContainers first, PodScheduled last.
        cs.retain(|c| c["type"] != "PodScheduled");
        cs.insert(0, json!({"type": "PodReadyToStartContainers", "status": sandbox}));
        for c in cs.iter_mut() {
            c["lastTransitionTime"] = json!(since);
            c["lastProbeTime"] = Value::Null;
        }
        cs.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": scheduled}));
    }
    let images: Map<String, Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| spec[k].as_array().cloned().unwrap_or_default())
        .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["image"].clone())))
        .collect();
    for key in ["containerStatuses", "initContainerStatuses"] {
        for c in status[key].as_array_mut().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            c["image"] = images.get(&name).cloned().unwrap_or(json!(""));
            c["imageID"] = json!("");
            if c["state"]["running"].is_object() {
                c["state"]["running"]["startedAt"] = json!(since);
                c["containerID"] = json!(format!(
                    "dpctl://{}",
                    crate::controlplane::objects::derived_uid(&format!("{}\0{name}", view.pod.uid))
                ));
            }
        }
    }
    let ip = pod_ip(&view.pod.uid);
    status["hostIP"] = json!(machine.address);
    status["hostIPs"] = json!([{"ip": machine.address}]);
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    status["startTime"] = json!(since);
    status
}

/// The status of a pod the kubelet refused to admit (kubelet.go rejectPod):
/// phase Failed, the admission's reason and message.
pub fn rejected_status(reason: &str, message: &str) -> Value {
    json!({"phase": "Failed", "reason": reason, "message": message})
}

/// The status manager's patch: the status, with the pod's UID as a precondition.
pub fn status_patch(uid: &str, status: &Value) -> Value {
    json!({"metadata": {"uid": uid}, "status": status})
}

/// The strategic merge patch from status `old` (last written) to `new`, as
/// the status manager's two-way merge patch makes it: a field `old` has and
/// `new` lacks is `null` (deleted), also inside the elements of the lists
/// merged by key (conditions by `type`, container statuses by `name`, IPs by
/// `ip`) — so a condition that turns True loses its `reason`, and a
/// container's `state.waiting` goes when `state.running` comes.
pub fn status_patch_from(uid: &str, old: Option<&Value>, new: &Value) -> Value {
    match old {
        Some(old) => status_patch(uid, &two_way(old, new, None)),
        None => status_patch(uid, new),
    }
}

fn merge_key(field: Option<&str>) -> Option<&'static str> {
    match field? {
        "conditions" => Some("type"),
        "containerStatuses" | "initContainerStatuses" | "ephemeralContainerStatuses" => Some("name"),
        "podIPs" | "hostIPs" => Some("ip"),
        _ => None,
    }
}

fn two_way(old: &Value, new: &Value, field: Option<&str>) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = n.clone();
            for (k, v) in o {
                match n.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(nv) => {
                        out.insert(k.clone(), two_way(v, nv, Some(k)));
                    }
                }
            }
            Value::Object(out)
        }
        (Value::Array(o), Value::Array(n)) => match merge_key(field) {
            Some(key) => Value::Array(
                n.iter()
                    .map(|e| match o.iter().find(|x| x.get(key).is_some() && x.get(key) == e.get(key)) {
                        Some(x) => two_way(x, e, None),
                        None => e.clone(),
                    })
                    .collect(),
            ),
            None => new.clone(),
        },
        _ => new.clone(),
    }
}

/// The delete options the status manager deletes a terminated pod with.
pub fn delete_options(uid: &str) -> Value {
    json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::lifecycle::Step;

    fn machine() -> Machine {
        Machine {
            cpus: 4,
            memory_kib: 1000,
            address: "127.0.0.1".into(),
            kubelet_version: "v1.37.0".into(),
            declared_features: vec![],
        }
    }

    #[test]
    fn a_status_patch_deletes_what_the_last_written_status_had_and_the_new_one_lacks() {
        let old = json!({"phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "main", "ready": false, "state": {"waiting": {"reason": "ContainerCreating"}}}]});
        let new = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "main", "ready": true, "state": {"running": {"startedAt": "t"}}}]});
        let p = status_patch_from("u", Some(&old), &new);
        assert_eq!(p["metadata"]["uid"], "u");
        assert_eq!(p["status"]["conditions"][0], json!({"type": "Ready", "status": "True", "reason": null}));
        assert_eq!(p["status"]["conditions"][1], json!({"type": "Initialized", "status": "True"}));
        assert_eq!(
            p["status"]["containerStatuses"][0]["state"],
            json!({"running": {"startedAt": "t"}, "waiting": null})
        );
        assert_eq!(
            status_patch_from("u", None, &new),
            status_patch("u", &new),
            "nothing written yet: the status as it is"
        );
    }

    #[test]
    fn times_are_written_as_metav1_writes_them() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(time(t), "2023-11-14T22:13:20Z");
        assert_eq!(micro_time(t), "2023-11-14T22:13:20.123456Z");
        let whole = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(micro_time(whole), "2023-11-14T22:13:20.000000Z", "always six digits");
    }

    #[test]
    fn allocatable_counts_healthy_devices_and_capacity_every_device() {
        let r = |name: &str, capacity, allocatable| ResourceStatus {
            resource: name.into(),
            capacity,
            allocatable,
            allocated: 0,
            state: "running".into(),
            older_instances: 0,
            endpoint: None,
            via: None,
            pre_start_required: false,
            get_preferred_allocation_available: false,
            devices: Default::default(),
        };
        let (cap, alloc) = resources(&machine(), &[r("example.com/gpu", 4, 3), r("example.com/gone", 0, 0)]);
        assert_eq!(cap["example.com/gpu"], "4");
        assert_eq!(alloc["example.com/gpu"], "3");
        assert_eq!((cap["example.com/gone"].as_str(), alloc["example.com/gone"].as_str()), ("0", "0"));
        assert_eq!((cap["cpu"].as_str(), cap["memory"].as_str(), alloc["pods"].as_str()), ("4", "1000Ki", "110"));
    }

    #[test]
    fn the_node_carries_the_kubelets_labels_and_a_ready_condition() {
        let status = node_status("n1", &machine(), &resources(&machine(), &[]), "now", "then");
        let labels = BTreeMap::from([("fleet.example.com/name".to_string(), "a".to_string())]);
        let n = node("n1", &labels, status);
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
        assert_eq!(n["metadata"]["labels"]["fleet.example.com/name"], "a", "--node-labels beside the kubelet's");
        assert!(n["metadata"]["labels"]["kubernetes.io/os"].is_string());
        let ready = n["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("True"), Some("KubeletReady")));
        assert_eq!(n["status"]["nodeInfo"]["kubeletVersion"], "v1.37.0");
        assert!(n["status"].get("declaredFeatures").is_none(), "no feature declared by default");
        let mut m = machine();
        m.declared_features.push("DRANodeAllocatableResources".into());
        let status = node_status("n1", &m, &resources(&m, &[]), "now", "then");
        assert_eq!(status["declaredFeatures"], json!(["DRANodeAllocatableResources"]));
    }

    #[test]
    fn the_lease_is_held_and_owned_by_the_node_for_forty_seconds() {
        let l = lease("n1", "uid-1", "2023-11-14T22:13:20.000000Z");
        assert_eq!(l["metadata"]["namespace"], "kube-node-lease");
        assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(l["spec"]["holderIdentity"], "n1");
        assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(LEASE_RENEW.as_secs(), 10);
    }

    fn api_pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "0b3f3c4e-0000-4000-8000-000000000001"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"cpu": "1", "example.com/gpu": "1"}, "claims": [{"name": "gpu"}, {"name": "none"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "none", "resourceClaimTemplateName": "u"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}, {"name": "none"}]}})
    }

    #[test]
    fn a_bound_pods_template_claim_is_the_claim_its_status_names() {
        let pod = bound_pod(&api_pod()).unwrap();
        assert_eq!(claim_names(&pod), ["p-gpu-x7k2q"]);
        assert_eq!(
            pod.resource_claims[0].source,
            ClaimSource::Generated { template: "t".into(), claim: "p-gpu-x7k2q".into() },
            "the controller's claim: the DRA manager checks it is the pod's"
        );
        assert_eq!(pod.containers[0].claims, ["gpu"], "a claim the controller decided against is left out");
        assert_eq!(pod.containers[0].resources.get("example.com/gpu"), Some(&1));
        assert!(!pod.containers[0].resources.contains_key("cpu"));
        let mut early = api_pod();
        early["status"] = json!({});
        let e = bound_pod(&early).unwrap_err();
        assert!(matches!(e, BoundPodError::NotNamedYet { .. }) && e.to_string().contains("resourceClaimStatuses"));
    }

    /// KEP-5004: the special claim the scheduler named in
    /// status.extendedResourceClaimStatus is among the bound pod's claims,
    /// with its request mappings (read typed: a mapping of the wrong type is refused).
    #[test]
    fn a_bound_pods_extended_resource_claim_is_the_one_its_status_names() {
        let mut v = api_pod();
        v["status"]["extendedResourceClaimStatus"] = json!({"resourceClaimName": "p-extended-resources-abcde",
            "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]});
        let pod = bound_pod(&v).unwrap();
        assert_eq!(claim_names(&pod), ["p-gpu-x7k2q", "p-extended-resources-abcde"]);
        let Some(ClaimSource::Extended(x)) = pod.resource_claims.last().map(|c| &c.source) else {
            panic!("no special claim: {:?}", pod.resource_claims)
        };
        let m = &x.status.request_mappings[0];
        assert_eq!(
            (m.container_name.as_str(), m.resource_name.as_str(), m.request_name.as_str()),
            ("c", "example.com/gpu", "container-0-request-0")
        );
        assert_eq!(x.generate_name, "p-extended-resources-");
        v["status"]["extendedResourceClaimStatus"]["requestMappings"] = json!({"containerName": "c"});
        let e = bound_pod(&v).unwrap_err().to_string();
        assert!(e.starts_with("status.extendedResourceClaimStatus.requestMappings: invalid type: map"), "{e}");
        v["status"]["extendedResourceClaimStatus"] = json!({"requestMappings": []});
        assert_eq!(claim_names(&bound_pod(&v).unwrap()), ["p-gpu-x7k2q"], "no claim named: none");
    }

    #[test]
    fn a_running_pods_status_is_the_kubelets() {
        let pod = bound_pod(&api_pod()).unwrap();
        let view = PodView { pod, step: Step::Running, why: None, started: true, evicted: false };
        let s = pod_status(&view, None, &api_pod()["spec"], &machine(), "t0", "t-1");
        assert_eq!(s["phase"], "Running");
        let types: Vec<&str> =
            s["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]);
        assert!(s["conditions"].as_array().unwrap().iter().all(|c| c["status"] == "True"));
        assert_eq!(s["conditions"][4]["lastTransitionTime"], "t-1", "the scheduler's time is kept");
        assert!(s["containerStatuses"][0]["state"]["running"].is_object());
        assert_eq!(s["containerStatuses"][0]["image"], "busybox");
        assert_eq!((s["hostIP"].as_str(), s["podIPs"][0]["ip"].as_str()), (Some("127.0.0.1"), s["podIP"].as_str()));
        let waiting = PodView { step: Step::PrepareClaims, started: false, ..view };
        let s = pod_status(&waiting, None, &api_pod()["spec"], &machine(), "t0", "t-1");
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
        assert_eq!(rejected_status("UnexpectedAdmissionError", "m")["phase"], "Failed");
        assert_eq!(delete_options("u")["gracePeriodSeconds"], 0);
    }
}
