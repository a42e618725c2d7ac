//! The control plane's controllers for pods created through the local API
//! server and bound to a node (`spec.nodeName`: another mock kubelet that
//! joined it, `--kubeconfig`), run after every write under the store's lock
//! ([`crate::controlplane::apiserver::Txn`]):
//!
//! - the resourceclaim controller (pkg/controller/resourceclaim
//!   `syncPod`, `handleClaim`): a claim from each template a pod names,
//!   generated as `<pod>-<pod claim>-XXXXX` (both cut in proportion past 57
//!   characters), owned by the pod (controller; no blockOwnerDeletion, as upstream), with
//!   the template's labels and annotations and
//!   `resource.kubernetes.io/pod-claim-name`; a claim already made for the
//!   pod (owned, annotated) is found again rather than made twice; named in
//!   the pod's `status.resourceClaimStatuses`; an allocated claim is
//!   reserved for the pod (`status.reservedFor`);
//! - the scheduler's DynamicResources part, for the node the pod names
//!   (no scheduler picks a node here): a claim not yet allocated is
//!   allocated ([`crate::controlplane::allocator`]) from the ResourceSlices
//!   of that node (`spec.nodeName`, or `allNodes`) beside every device
//!   stored claims hold, `status.allocation` written as the scheduler
//!   writes it ([`crate::controlplane::scheduler::allocation_result`]),
//!   reserved for the pod, with the scheduler's finalizer
//!   `resource.kubernetes.io/delete-protection`; an allocated claim is left
//!   as it is. A pod's claims are written all together once each can be
//!   allocated and reserved, or not at all (the scheduler's Filter fails
//!   the node with nothing touched). A pod's `resourceClaimStatuses` are
//!   written once every claim of it is allocated and reserved, so the node
//!   that runs it reads its claims ready, as a kubelet does once the
//!   scheduler bound the pod. With DRANodeAllocatableResources on
//!   (KEP-5517, [`crate::controlplane::nodealloc`]): a claim with a mapped
//!   device reserved for another pod is not shared, the pod must fit the
//!   Node's allocatable with its DRA part, and its
//!   `nodeAllocatableResourceClaimStatuses` are written with the rest;
//!   a pod refused stays pending, tried again after every write;
//! - the device-taint eviction controller ([`taints`]): a pod bound to a
//!   node whose claim's device carries a NoExecute taint it does not
//!   tolerate gets `DisruptionTarget=True`, an Event, and is deleted;
//! - the resourceclaim controller's `syncClaim` and the garbage collector,
//!   for the reservations made here: a reservation whose pod is gone,
//!   replaced or done goes; a claim reserved for nobody then is
//!   deallocated (its allocation and the finalizer cleared) and, when it
//!   was made for a pod that is gone, replaced or done, deleted.
//!
//! Only pods of the API are looked at — also those bound to the node of
//! the mock kubelet that serves the store, which runs them as any node
//! does; its static pods are not in the store (their claims are its
//! manifests', allocated by its own scheduler part, and it evicts them
//! itself with [`taints::decide`]).

pub mod taints;

use super::allocator::{self, Allocated, Catalog, Features};
use super::apiserver::{Store, Txn};
use super::extended;
use super::nodealloc;
use super::objects::{self, Object};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// The scheduler's finalizer on the claims it allocates (resourceapi.Finalizer).
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// The annotation naming the pod claim a generated claim is for.
pub const POD_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// At most this many consumers in `status.reservedFor` (ResourceClaimReservedForMaxSize).
const RESERVED_FOR_MAX: usize = 256;

/// A store whose writes are followed by these controllers, with the
/// scheduler's gates of Kubernetes 1.`minor`.
pub fn store(minor: u32) -> Store {
    plane(minor).0
}

/// [`store`] with DRAWorkloadResourceClaims (KEP-5729; off by default in
/// 1.36 and 1.37) set to `workload_claims`.
pub fn store_with(minor: u32, workload_claims: bool) -> Store {
    plane_with(minor, workload_claims).0
}

/// [`store`], with the device-taint eviction controller's timer: its owner
/// runs it ([`taints::Timer::run`]) on a task of its own, so that an
/// eviction due later (a toleration's seconds) happens without a write.
pub fn plane(minor: u32) -> (Store, taints::Timer) {
    plane_with(minor, false)
}

/// [`plane`] with DRAWorkloadResourceClaims set to `workload_claims`: on, a
/// claim reserved for a pod's PodGroup is the pod's, and the scheduler's
/// part reserves it for the pod no more (PreBind's IsReservedForPod).
pub fn plane_with(minor: u32, workload_claims: bool) -> (Store, taints::Timer) {
    plane_gated(Gates { workload_claims, ..Gates::of_minor(minor) })
}

/// [`plane`] with the controllers' gates `gates` (a profile's, its
/// `--feature-gates` applied: the scheduler's allocator features as
/// kube-scheduler reads them from its gates).
pub fn plane_gated(gates: Gates) -> (Store, taints::Timer) {
    let Gates { features, .. } = gates;
    let made: Mutex<BTreeSet<Reservation>> = Mutex::default();
    let (evictions, timer) = taints::state();
    let evictions = Mutex::new(evictions);
    let store = Store::with_controller(Box::new(move |tx| {
        let mut made = made.lock().unwrap_or_else(|p| p.into_inner());
        reconcile(tx, &mut made, gates);
        let mut ev = evictions.lock().unwrap_or_else(|p| p.into_inner());
        taints::sync(tx, &mut ev, &features, std::time::SystemTime::now());
    }));
    (store, timer)
}

/// The gates the controllers follow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gates {
    /// The scheduler's allocator features.
    pub features: Features,
    /// DRAExtendedResource (KEP-5004).
    pub extended: bool,
    /// DRAWorkloadResourceClaims (KEP-5729).
    pub workload_claims: bool,
    /// DRANodeAllocatableResources (KEP-5517; alpha, off in 1.36 and 1.37),
    /// and which release's shapes the scheduler's part reads and writes.
    pub node_allocatable: nodealloc::Accounting,
}

impl Gates {
    /// The defaults of Kubernetes 1.`minor`: the allocator's features
    /// ([`Features::of_minor`]), DRAExtendedResource (beta, on, from 1.36),
    /// DRAWorkloadResourceClaims off.
    pub fn of_minor(minor: u32) -> Gates {
        Gates {
            features: Features::of_minor(minor),
            extended: minor >= 36,
            workload_claims: false,
            node_allocatable: nodealloc::Accounting::Off,
        }
    }
}

/// resourceclaim.IsReservedForPod: whether `reserved` (a claim's
/// `status.reservedFor`) names the pod by its UID or — `pod_group` given,
/// only with DRAWorkloadResourceClaims on (acceptPodGroupReservation) — the
/// pod's PodGroup (`spec.schedulingGroup.podGroupName`) by API group,
/// resource and name, as a pod does not know its PodGroup's UID.
pub fn reserves_pod(reserved: &[Value], uid: &str, pod_group: Option<&str>) -> bool {
    reserved.iter().any(|r| {
        r["uid"] == uid
            || pod_group
                .is_some_and(|g| r["apiGroup"] == POD_GROUP_API_GROUP && r["resource"] == "podgroups" && r["name"] == g)
    })
}

/// The API group of PodGroups (scheduling.k8s.io, served as v1beta1 in 1.37).
pub const POD_GROUP_API_GROUP: &str = "scheduling.k8s.io";

/// `spec.schedulingGroup.podGroupName` of a pod.
pub fn pod_group(pod: &Value) -> Option<&str> {
    pod["spec"]["schedulingGroup"]["podGroupName"].as_str().filter(|n| !n.is_empty())
}

/// The PodGroup that owns `claim` as its controller: (name, uid)
/// (claimPodGroupOwnerIndexFunc; the version of its apiVersion ignored).
fn owning_pod_group(claim: &Value) -> Option<(&str, &str)> {
    claim["metadata"]["ownerReferences"].as_array()?.iter().find_map(|o| {
        (o["controller"] == true && text(&o["apiVersion"]).starts_with("scheduling.k8s.io/") && o["kind"] == "PodGroup")
            .then(|| (text(&o["name"]), text(&o["uid"])))
    })
}

/// resourceclaim.BindTo's match: `pod_claim` (a pod's spec.resourceClaims
/// entry) is one of `group`'s spec.resourceClaims (same name, same
/// resourceClaimName, same resourceClaimTemplateName): the claim is the
/// group's.
fn bound_to_group(group: &Value, pod_claim: &Value) -> bool {
    group["spec"]["resourceClaims"].as_array().into_iter().flatten().any(|g| {
        g["name"] == pod_claim["name"]
            && g["resourceClaimName"] == pod_claim["resourceClaimName"]
            && g["resourceClaimTemplateName"] == pod_claim["resourceClaimTemplateName"]
    })
}

/// The resourceclaim controller's syncPodGroup (KEP-5729, with
/// DRAWorkloadResourceClaims on): a claim from each template the PodGroup
/// names, generated as `<group>-<claim>-XXXXX`, owned by the PodGroup
/// (apiVersion scheduling.k8s.io/v1beta1, controller), annotated with the
/// PodGroup claim's name; found again rather than made twice; named in the
/// PodGroup's `status.resourceClaimStatuses`.
fn sync_pod_group(tx: &mut Txn<'_>, group: &Value) {
    let meta = &group["metadata"];
    if meta["deletionTimestamp"].is_string() {
        return;
    }
    let (ns, name, uid) = (text(&meta["namespace"]), text(&meta["name"]), text(&meta["uid"]));
    let mut statuses = group["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    let mut changed = false;
    for gc in group["spec"]["resourceClaims"].as_array().into_iter().flatten() {
        let gc_name = text(&gc["name"]);
        let Some(template) = gc["resourceClaimTemplateName"].as_str() else { continue };
        let owned = |c: &Value| owning_pod_group(c).is_some_and(|(_, o)| o == uid);
        let named = statuses.iter().find(|s| s["name"] == gc_name).and_then(|s| s["resourceClaimName"].as_str());
        if named.is_some_and(|n| tx.claim(ns, n).is_some_and(|c| owned(&c))) {
            continue;
        }
        let found = tx
            .claims()
            .find(|c| {
                c["metadata"]["namespace"] == ns
                    && owned(c)
                    && c["metadata"]["annotations"][POD_CLAIM_ANNOTATION] == gc_name
            })
            .map(|c| text(&c["metadata"]["name"]).to_string());
        let claim_name = match found {
            Some(c) => c,
            None => {
                let Some(t) = tx.get("resource.k8s.io", "resourceclaimtemplates", ns, template) else { continue };
                let api_version = tx.pod_group_api_version();
                match tx.create_claim(claim_for(group, (&api_version, "PodGroup"), gc_name, &t)) {
                    Ok(n) => n,
                    Err(_) => continue,
                }
            }
        };
        let entry = json!({"name": gc_name, "resourceClaimName": claim_name});
        match statuses.iter_mut().find(|s| s["name"] == gc_name) {
            Some(s) => *s = entry,
            None => statuses.push(entry),
        }
        changed = true;
    }
    if changed {
        let mut status = group["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        status["resourceClaimStatuses"] = json!(statuses);
        tx.update_status(POD_GROUP_API_GROUP, "podgroups", ns, name, status);
    }
}

/// A reservation made here: (`namespace/claim`, pod UID).
type Reservation = (String, String);

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// One pass over the pods and the reservations made.
fn reconcile(tx: &mut Txn<'_>, made: &mut BTreeSet<Reservation>, gates: Gates) {
    let extended = gates.extended;
    // Devices go back first, so that a pod waiting for one gets it in this pass.
    prune(tx, made);
    release_deleted(tx);
    if gates.workload_claims {
        release_pod_groups(tx);
        for group in tx.list(POD_GROUP_API_GROUP, "podgroups", None) {
            sync_pod_group(tx, &group);
        }
    }
    let pods = tx.list("", "pods", None);
    let with_claims = |p: &&Value| {
        p["spec"]["resourceClaims"].as_array().is_some_and(|c| !c.is_empty()) || (extended && asks_dra_extended(p))
    };
    for pod in pods.iter().filter(with_claims) {
        sync_pod(tx, pod, made, gates);
    }
}

/// Whether a container of `pod` asks for an extended resource DRA may serve.
fn asks_dra_extended(pod: &Value) -> bool {
    ["initContainers", "containers"].iter().any(|k| {
        pod["spec"][*k].as_array().into_iter().flatten().any(|c| {
            c["resources"]["limits"].as_object().is_some_and(|l| l.keys().any(|r| extended::is_dra_extended_name(r)))
        })
    })
}

/// Whether none of a pod's containers runs or will run (isPodDone).
fn done(pod: &Value) -> bool {
    matches!(text(&pod["status"]["phase"]), "Succeeded" | "Failed")
        || (pod["metadata"]["deletionTimestamp"].is_string() && text(&pod["spec"]["nodeName"]).is_empty())
}

/// The pod that owns `claim` as its controller: (name, uid).
fn owning_pod(claim: &Value) -> Option<(&str, &str)> {
    claim["metadata"]["ownerReferences"].as_array()?.iter().find_map(|o| {
        (o["controller"] == true && o["apiVersion"] == "v1" && o["kind"] == "Pod")
            .then(|| (text(&o["name"]), text(&o["uid"])))
    })
}

/// The generateName of a claim for `pod_claim` of pod `pod` (handleClaim).
pub fn generate_name(pod: &str, pod_claim: &str) -> String {
    let full = format!("{pod}-{pod_claim}-");
    const MAX_BASE: usize = 57;
    if full.len() <= MAX_BASE {
        return full;
    }
    let cut = |s: &str| {
        let n = s.len() * MAX_BASE / full.len();
        let mut end = n.min(s.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    format!("{}-{}", cut(pod), cut(pod_claim))
}

/// The claim the resourceclaim controller makes for `pod_claim` of `pod` from `template`.
pub fn claim_from_template(pod: &Value, pod_claim: &str, template: &Value) -> Value {
    claim_for(pod, ("v1", "Pod"), pod_claim, template)
}

/// The claim the resourceclaim controller makes for `claim` of `owner`
/// (a Pod, or a PodGroup: handlePodGroupClaim) from `template`, owned by it.
fn claim_for(owner: &Value, (api_version, kind): (&str, &str), pod_claim: &str, template: &Value) -> Value {
    let meta = &owner["metadata"];
    let mut annotations = template["spec"]["metadata"]["annotations"].clone();
    if !annotations.is_object() {
        annotations = json!({});
    }
    annotations[POD_CLAIM_ANNOTATION] = json!(pod_claim);
    let mut m = json!({
        "generateName": generate_name(text(&meta["name"]), pod_claim),
        "namespace": meta["namespace"],
        "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": true}],
        "annotations": annotations,
    });
    if let Some(l) = template["spec"]["metadata"]["labels"].as_object().filter(|l| !l.is_empty()) {
        m["labels"] = json!(l);
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": m,
        "spec": template["spec"]["spec"]})
}

fn reserved_for(claim: &Value, uid: &str, pod_group: Option<&str>) -> bool {
    claim["status"]["reservedFor"].as_array().is_some_and(|r| reserves_pod(r, uid, pod_group))
}

/// The resourceclaim controller's syncPod and the scheduler's part for one pod.
fn sync_pod(tx: &mut Txn<'_>, pod: &Value, made: &mut BTreeSet<Reservation>, gates: Gates) {
    let Gates { features, extended, workload_claims, .. } = gates;
    // PreBind: a claim IsReservedForPod (its PodGroup's, with the gate on) is not bound again.
    let group = pod_group(pod).filter(|_| workload_claims);
    let meta = &pod["metadata"];
    if meta["deletionTimestamp"].is_string() || done(pod) {
        return;
    }
    let (ns, name, uid) = (text(&meta["namespace"]), text(&meta["name"]), text(&meta["uid"]));
    let node = text(&pod["spec"]["nodeName"]);
    let statuses = pod["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    // Pod claim → the claim it names (None: no claim needed).
    let mut named: Vec<(String, Option<String>)> = Vec::new();
    let mut new_statuses = false;
    let mut ready = true;
    // KEP-5729: the pod's PodGroup, when there is one and the gate is on (getPodGroup).
    let pod_group_obj = group.and_then(|g| tx.get(POD_GROUP_API_GROUP, "podgroups", ns, g));
    // The claims bound to the PodGroup (BindTo), reserved for it rather than the pod.
    let mut for_group: BTreeSet<String> = BTreeSet::new();
    for pc in pod["spec"]["resourceClaims"].as_array().into_iter().flatten() {
        let pc_name = text(&pc["name"]).to_string();
        let group_claim = pod_group_obj.as_ref().filter(|g| bound_to_group(g, pc));
        if let Some(n) = pc["resourceClaimName"].as_str() {
            if group_claim.is_some() {
                for_group.insert(n.to_string());
            }
            named.push((pc_name, Some(n.to_string())));
            continue;
        }
        let Some(template) = pc["resourceClaimTemplateName"].as_str() else { continue };
        let of_group =
            |c: &Value| owning_pod_group(c).is_some_and(|(n, _)| Some(n) == group) && pod_group_obj.is_some();
        if let Some(entry) = statuses.iter().find(|s| s["name"] == pc_name.as_str()) {
            match entry["resourceClaimName"].as_str() {
                None => {
                    named.push((pc_name, None));
                    continue;
                }
                // IsForPod: the pod's, or (the gate on) its PodGroup's.
                Some(n)
                    if tx
                        .claim(ns, n)
                        .is_some_and(|c| owning_pod(&c).is_some_and(|(_, o)| o == uid) || of_group(&c)) =>
                {
                    if group_claim.is_some() {
                        for_group.insert(n.to_string());
                    }
                    named.push((pc_name, Some(n.to_string())));
                    continue;
                }
                // Gone, or no longer the pod's: made again.
                Some(_) => {}
            }
        }
        if let Some(g) = group_claim {
            // findPodGroupResourceClaim: the PodGroup's claim, once its status names it.
            let made_for_group = g["status"]["resourceClaimStatuses"]
                .as_array()
                .and_then(|st| st.iter().find(|s| s["name"] == pc_name.as_str()))
                .and_then(|s| s["resourceClaimName"].as_str())
                .filter(|n| tx.claim(ns, n).is_some_and(|c| of_group(&c)))
                .map(str::to_string);
            match made_for_group {
                Some(n) => {
                    for_group.insert(n.clone());
                    new_statuses = true;
                    named.push((pc_name, Some(n)));
                }
                None => ready = false,
            }
            continue;
        }
        let found = tx
            .claims()
            .find(|c| {
                c["metadata"]["namespace"] == ns
                    && owning_pod(c).is_some_and(|(_, o)| o == uid)
                    && c["metadata"]["annotations"][POD_CLAIM_ANNOTATION] == pc_name.as_str()
            })
            .map(|c| text(&c["metadata"]["name"]).to_string());
        let claim_name = match found {
            Some(c) => c,
            None => {
                let Some(t) = tx.get("resource.k8s.io", "resourceclaimtemplates", ns, template) else {
                    // The template is not there (yet): the pod waits for it.
                    ready = false;
                    continue;
                };
                match tx.create_claim(claim_from_template(pod, &pc_name, &t)) {
                    Ok(n) => n,
                    Err(_) => {
                        ready = false;
                        continue;
                    }
                }
            }
        };
        new_statuses = true;
        named.push((pc_name, Some(claim_name)));
    }
    // KEP-5004: the special claim of the DRA-backed extended resources of a pod bound to a node.
    let mut extended_status = None;
    if extended && !node.is_empty() {
        match special_claim(tx, pod, node, features) {
            Special::None => {}
            Special::Waiting => ready = false,
            Special::Claim(claim_name, status) => {
                named.push((String::new(), Some(claim_name)));
                extended_status = Some(status);
            }
        }
    }
    // The claims as they will be written: all of them or none (the
    // scheduler binds a pod with every claim allocated and reserved, or
    // leaves it unschedulable with none touched).
    let mut pending: Vec<(Value, Option<String>)> = Vec::new();
    // Every claim of the pod (key, claim as it will be): KEP-5517 reads them.
    let mut pod_claims: Vec<(String, Value)> = Vec::new();
    // The claims allocated in this pass: their devices are taken for the next.
    let mut fresh: Vec<Value> = Vec::new();
    if !node.is_empty() {
        for claim_name in named.iter().filter_map(|(_, n)| n.as_deref()) {
            let Some(mut claim) = tx.claim(ns, claim_name) else {
                ready = false;
                continue;
            };
            if claim["metadata"]["deletionTimestamp"].is_string() {
                ready = false;
                continue;
            }
            let key = format!("{ns}/{claim_name}");
            let group_ref = pod_group_obj.as_ref().filter(|_| for_group.contains(claim_name)).map(|g| {
                json!({"apiGroup": POD_GROUP_API_GROUP, "resource": "podgroups", "name": g["metadata"]["name"],
                    "uid": g["metadata"]["uid"]})
            });
            if claim["status"]["allocation"].is_object() {
                if reserved_for(&claim, uid, group) {
                    pod_claims.push((claim_name.to_string(), claim));
                    continue;
                }
                let reserved = claim["status"]["reservedFor"].as_array().map_or(0, Vec::len);
                if reserved >= RESERVED_FOR_MAX {
                    ready = false;
                    continue;
                }
                // KEP-5517 (validateNodeAllocatableDRAClaimSharing): 1.37: a claim
                // with a mapped device, reserved for another consumer, is not
                // shared; 1.36: a claim that another pod on the node has in its
                // node-allocatable statuses is not.
                let refused = match gates.node_allocatable {
                    nodealloc::Accounting::Resources if reserved > 0 => {
                        let results = claim["status"]["allocation"]["devices"]["results"].as_array().cloned();
                        nodealloc::has_mapped(&results.unwrap_or_default(), &node_allocatable_devices(tx, None))
                    }
                    nodealloc::Accounting::Mappings if !node.is_empty() => {
                        let consumers = node_allocatable_consumers(tx, node, ns, claim_name, uid, workload_claims);
                        nodealloc::sharing_36(claim_name, consumers).is_err()
                    }
                    _ => false,
                };
                if refused {
                    ready = false;
                    continue;
                }
            } else {
                let planned: Vec<&Value> = fresh.iter().collect();
                match allocate(tx, &claim, node, features, &planned) {
                    Some(allocation) => {
                        claim["status"]["allocation"] = allocation;
                        // bindClaim: with the binding conditions' gates on, the
                        // claim the scheduler's part allocates carries the time.
                        if features.binding_conditions {
                            let now = crate::core::time::rfc3339_seconds(std::time::SystemTime::now());
                            claim["status"]["allocation"]["allocationTimestamp"] = json!(now);
                        }
                        fresh.push(claim.clone());
                        let fin = claim["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
                        if !fin.iter().any(|f| f == FINALIZER) {
                            let mut fin = fin;
                            fin.push(json!(FINALIZER));
                            claim["metadata"]["finalizers"] = json!(fin);
                        }
                    }
                    None => {
                        ready = false;
                        continue;
                    }
                }
            }
            // A claim allocated before is reserved for a pod that came bound
            // (spec.nodeName) as the resourceclaim controller's syncPod
            // reserves it: no allocationTimestamp (kube-scheduler's bindClaim
            // stamps one only for the pods it binds itself).
            let mut reserved = claim["status"]["reservedFor"].as_array().cloned().unwrap_or_default();
            // bindClaim reserves for the consumer BindTo gives: the PodGroup, or the pod.
            let pod_ref = group_ref.is_none();
            reserved.push(group_ref.unwrap_or_else(|| json!({"resource": "pods", "name": name, "uid": uid})));
            claim["status"]["reservedFor"] = json!(reserved);
            pod_claims.push((claim_name.to_string(), claim.clone()));
            pending.push((claim, pod_ref.then_some(key)));
        }
    }
    // KEP-5517: the pod's node-allocatable resources from its claims' devices,
    // checked against the node while the pod is being placed (claims to
    // reserve, or its status not written yet); a bound pod is not checked again.
    let mut node_allocatable_status = None;
    if gates.node_allocatable == nodealloc::Accounting::Mappings && !node.is_empty() && ready && !fresh.is_empty() {
        // 1.36: only the claims allocated in this cycle, and every status
        // written is checked against the node.
        match node_allocatable_36(tx, pod, &named, &fresh) {
            Ok(Some(st)) => match node_fits(tx, pod, node, &st, workload_claims, nodealloc::pod_level_requests_cover) {
                Ok(()) => node_allocatable_status = Some(st),
                Err(_) => ready = false,
            },
            Ok(None) => {}
            Err(_) => ready = false,
        }
    }
    if gates.node_allocatable == nodealloc::Accounting::Resources && !node.is_empty() && ready {
        match node_allocatable(tx, pod, node, &named, &pod_claims) {
            Ok(st) => {
                let placing = !pending.is_empty()
                    || st.as_ref().is_some_and(|s| pod["status"]["nodeAllocatableResourceClaimStatuses"] != *s);
                match st {
                    Some(st) if placing => {
                        match node_fits(tx, pod, node, &st, workload_claims, nodealloc::pod_level_covers) {
                            Ok(()) => node_allocatable_status = Some(st),
                            Err(_) => ready = false,
                        }
                    }
                    st => node_allocatable_status = st,
                }
            }
            Err(_) => ready = false,
        }
    }
    if ready {
        for (claim, made_key) in pending {
            tx.update_claim(claim);
            if let Some(key) = made_key {
                made.insert((key, uid.to_string()));
            }
        }
    }
    // The claims' names go into the pod's status once they are ready for a
    // node to run it (a pod bound to no node: at once, as the controller writes them).
    let extended_new = extended_status.as_ref().is_some_and(|x| pod["status"]["extendedResourceClaimStatus"] != *x);
    let node_allocatable_new =
        node_allocatable_status.as_ref().is_some_and(|x| pod["status"]["nodeAllocatableResourceClaimStatuses"] != *x);
    if (new_statuses && (ready || node.is_empty())) || ((extended_new || node_allocatable_new) && ready) {
        let mut all = statuses;
        // Only a template's claim is named there (a claim the pod names itself is not).
        let direct = |pc: &str| {
            pod["spec"]["resourceClaims"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["name"] == pc && c["resourceClaimName"].is_string())
        };
        for (pc, claim) in named.iter().filter(|(pc, _)| !pc.is_empty() && !direct(pc)) {
            let entry = match claim {
                Some(c) => json!({"name": pc, "resourceClaimName": c}),
                None => json!({"name": pc}),
            };
            match all.iter_mut().find(|s| s["name"] == pc.as_str()) {
                Some(s) => *s = entry,
                None => all.push(entry),
            }
        }
        let mut status = pod["status"].clone();
        if !all.is_empty() {
            status["resourceClaimStatuses"] = json!(all);
        }
        if let Some(x) = extended_status {
            status["extendedResourceClaimStatus"] = x;
        }
        if let Some(x) = node_allocatable_status {
            status["nodeAllocatableResourceClaimStatuses"] = x;
        }
        tx.update_pod_status(ns, name, status);
    }
}

/// The node-allocatable devices (KEP-5517) of the slices of `node`, or of
/// every slice (None: claimHasNodeAllocatableMappedDevice looks at all).
fn node_allocatable_devices(tx: &Txn<'_>, node: Option<&str>) -> nodealloc::Devices {
    let slices: Vec<Object> = tx
        .slice_objects(|s| node.is_none_or(|n| s["spec"]["nodeName"] == n || s["spec"]["allNodes"] == true))
        .collect();
    nodealloc::devices(&slices)
}

/// calculateAndCheckNodeAllocatableResources' first half for `pod` on
/// `node`: its `status.nodeAllocatableResourceClaimStatuses` from `claims`
/// (each claim of the pod as it will be written; `named`: pod claim →
/// claim), sorted by claim; None when no claim's device has any.
fn node_allocatable(
    tx: &Txn<'_>,
    pod: &Value,
    node: &str,
    named: &[(String, Option<String>)],
    claims: &[(String, Value)],
) -> Result<Option<Value>, nodealloc::Unschedulable> {
    let devices = node_allocatable_devices(tx, Some(node));
    let mut out = Vec::new();
    for (claim_name, claim) in claims {
        let results = claim["status"]["allocation"]["devices"]["results"].as_array().cloned().unwrap_or_default();
        if !nodealloc::has_any(&results, &devices) {
            continue;
        }
        let Some(mut st) = nodealloc::claim_status(claim_name, &results, &devices)? else { continue };
        for (pc, _) in named.iter().filter(|(pc, n)| !pc.is_empty() && n.as_deref() == Some(claim_name.as_str())) {
            st.containers.extend(nodealloc::containers_naming(pod, pc));
        }
        out.push(st);
    }
    if out.is_empty() {
        return Ok(None);
    }
    out.sort_by(|a, b| a.resource_claim_name.cmp(&b.resource_claim_name));
    Ok(Some(Value::Array(out.iter().map(nodealloc::ClaimStatus::to_json).collect())))
}

/// 1.36's calculateAndCheckNodeAllocatableResources' first half for `pod`:
/// its `status.nodeAllocatableResourceClaimStatuses` from the claims
/// allocated in this cycle (`fresh`; `named`: pod claim → claim), whose
/// devices are looked up by pool and name in every slice; sorted by claim;
/// None when none has mappings. A status no container references is an error.
fn node_allocatable_36(
    tx: &Txn<'_>,
    pod: &Value,
    named: &[(String, Option<String>)],
    fresh: &[Value],
) -> Result<Option<Value>, nodealloc::Unschedulable> {
    let devices = nodealloc::mappings(tx.slices());
    let ns = text(&pod["metadata"]["namespace"]);
    let mut out = Vec::new();
    for claim in fresh {
        let claim_name = text(&claim["metadata"]["name"]);
        let results = claim["status"]["allocation"]["devices"]["results"].as_array().cloned().unwrap_or_default();
        let Some(mut st) = nodealloc::mapped_status(ns, claim_name, &results, &devices)? else { continue };
        for (pc, _) in named.iter().filter(|(pc, n)| !pc.is_empty() && n.as_deref() == Some(claim_name)) {
            st.containers.extend(nodealloc::containers_naming(pod, pc));
        }
        if st.containers.is_empty() {
            return Err(nodealloc::Unschedulable::NotReferenced(claim_name.to_string()));
        }
        out.push(st);
    }
    if out.is_empty() {
        return Ok(None);
    }
    out.sort_by(|a, b| a.resource_claim_name.cmp(&b.resource_claim_name));
    Ok(Some(Value::Array(out.iter().map(nodealloc::MappedStatus::to_json).collect())))
}

/// The other pods placed on `node` that name claim `ns/claim` in their
/// `status.nodeAllocatableResourceClaimStatuses` (1.36's NodeInfo
/// NodeAllocatableDRAClaimStates, the pod `uid` left out).
fn node_allocatable_consumers(
    tx: &Txn<'_>,
    node: &str,
    ns: &str,
    claim: &str,
    uid: &str,
    workload_claims: bool,
) -> usize {
    tx.list("", "pods", Some(ns))
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == node && p["metadata"]["uid"] != uid && !done(p))
        .filter(|p| {
            p["status"]["nodeAllocatableResourceClaimStatuses"]
                .as_array()
                .is_some_and(|a| a.iter().any(|s| s["resourceClaimName"] == claim))
        })
        .filter(|p| placed(tx, p, workload_claims))
        .count()
}

/// calculateAndCheckNodeAllocatableResources' second half: the pod-level
/// requests cover the DRA part (`covers`: 1.37's validatePodLevelResourcesCoverDRA,
/// 1.36's validatePodLevelRequestsCoverDRA), and the
/// pod with `statuses` fits what the node's allocatable leaves beside the
/// other pods placed on it (nodeFitsResources). A node not in the store has
/// no allocatable to check against: the pod fits.
fn node_fits(
    tx: &Txn<'_>,
    pod: &Value,
    node: &str,
    statuses: &Value,
    workload_claims: bool,
    covers: fn(&Value, &Value) -> Result<(), nodealloc::Unschedulable>,
) -> Result<(), nodealloc::Unschedulable> {
    covers(pod, statuses)?;
    let Some(n) = tx.get("", "nodes", "", node) else { return Ok(()) };
    let uid = &pod["metadata"]["uid"];
    let mut used = nodealloc::Resources::new();
    for p in tx.list("", "pods", None) {
        if p["spec"]["nodeName"] != node || p["metadata"]["uid"] == *uid || done(&p) || !placed(tx, &p, workload_claims)
        {
            continue;
        }
        let r = nodealloc::pod_requests(&p, &p["status"]["nodeAllocatableResourceClaimStatuses"]);
        for (k, v) in r {
            *used.entry(k).or_default() += v;
        }
    }
    let demand = nodealloc::pod_requests(pod, statuses);
    nodealloc::fits(&demand, &nodealloc::allocatable(&n), &used).map_err(nodealloc::Unschedulable::Insufficient)
}

/// Whether pod `p` bound to a node counts as placed there (the scheduler's
/// cache holds it): every claim it names exists and is reserved for it.
fn placed(tx: &Txn<'_>, p: &Value, workload_claims: bool) -> bool {
    let ns = text(&p["metadata"]["namespace"]);
    let uid = text(&p["metadata"]["uid"]);
    let group = pod_group(p).filter(|_| workload_claims);
    let statuses = p["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    p["spec"]["resourceClaims"].as_array().into_iter().flatten().all(|pc| {
        let claim = pc["resourceClaimName"].as_str().map(str::to_string).or_else(|| {
            statuses
                .iter()
                .find(|s| s["name"] == pc["name"])
                .map(|s| s["resourceClaimName"].as_str().map(str::to_string))?
        });
        match claim {
            None => pc["resourceClaimTemplateName"].is_string() && statuses.iter().any(|s| s["name"] == pc["name"]),
            Some(c) => tx.claim(ns, &c).is_some_and(|c| reserved_for(&c, uid, group)),
        }
    })
}

/// What a pod's DRA-backed extended resources need (KEP-5004).
enum Special {
    /// Nothing: no such resource, or device plugins serve them all.
    None,
    /// A claim that cannot be allocated now: the pod waits (unschedulable).
    Waiting,
    /// The special claim (made now, or before) and the pod's
    /// `status.extendedResourceClaimStatus` naming it.
    Claim(String, Value),
}

/// The scheduler's preFilterExtendedResources and PreBind for pod `pod`
/// bound to `node`: the resources DRA serves there (a DeviceClass maps them
/// and the Node's allocatable has none from device plugins), the special
/// claim made once (found again by its owner and annotation) and only when
/// its devices can be allocated.
fn special_claim(tx: &mut Txn<'_>, pod: &Value, node: &str, features: Features) -> Special {
    let meta = &pod["metadata"];
    let (ns, name, uid) = (text(&meta["namespace"]), text(&meta["name"]), text(&meta["uid"]));
    let shape = extended::PodShape::of_api(pod);
    let asks = |c: &extended::Ctr| !c.resources.is_empty();
    if !shape.init_containers.iter().chain(&shape.containers).any(asks) {
        return Special::None;
    }
    let classes: Vec<Object> =
        tx.list("resource.k8s.io", "deviceclasses", None).iter().filter_map(|c| objects::parse(c).ok()).collect();
    let mapping = extended::class_mapping(&classes);
    let allocatable: BTreeMap<String, usize> = tx
        .get("", "nodes", "", node)
        .and_then(|n| n["status"]["allocatable"].as_object().cloned())
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k, v.as_str()?.parse::<usize>().ok()?)))
        .collect();
    let served = extended::dra_served(&shape, &mapping, &allocatable);
    let Some(x) = extended::build(&shape, &served) else { return Special::None };
    let mine = |c: &Value| {
        c["metadata"]["namespace"] == ns
            && owning_pod(c).is_some_and(|(_, o)| o == uid)
            && c["metadata"]["annotations"][extended::CLAIM_ANNOTATION] == "true"
    };
    let status = |claim: &str| json!({"requestMappings": x.status.request_mappings, "resourceClaimName": claim});
    if let Some(c) = tx.claims().find(|c| mine(c)) {
        let claim = text(&c["metadata"]["name"]).to_string();
        let st = status(&claim);
        return Special::Claim(claim, st);
    }
    let mut obj = extended::claim_object(&x, ns, name, uid);
    obj["metadata"]["name"] = json!(format!("{}*****", x.generate_name));
    if allocate(tx, &obj, node, features, &[]).is_none() {
        return Special::Waiting;
    }
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("name");
    }
    match tx.create_claim(obj) {
        Ok(claim) => {
            let st = status(&claim);
            Special::Claim(claim, st)
        }
        Err(_) => Special::Waiting,
    }
}

/// Allocate `claim` for `node` from its slices; `status.allocation` as the
/// scheduler writes it, or None when it cannot be allocated now.
fn allocate(tx: &Txn<'_>, claim: &Value, node: &str, features: Features, planned: &[&Value]) -> Option<Value> {
    let slices: Vec<Object> =
        tx.slice_objects(|s| s["spec"]["nodeName"] == node || s["spec"]["allNodes"] == true).collect();
    let classes: Vec<Object> =
        tx.list("resource.k8s.io", "deviceclasses", None).iter().filter_map(|c| objects::parse(c).ok()).collect();
    let Ok(Object::Claim { namespace, name, spec, .. }) = objects::parse(claim) else { return None };
    // DeviceTaintRules' taints are the devices' as much as their own (the scheduler's allocator sees both).
    let rules: Vec<Object> =
        tx.taint_rules().into_iter().map(|rule| Object::TaintRule { name: String::new(), rule }).collect();
    let catalog = Catalog::with(classes.iter().chain(&slices).chain(&rules), features);
    let candidates = allocator::from_slices_with(&slices, &features);
    let held: Vec<Allocated> = tx
        .claims()
        .chain(planned.iter().copied())
        .filter_map(|c| c["status"]["allocation"]["devices"]["results"].as_array().map(|r| allocator::given(r)))
        .flatten()
        .collect();
    let taken: Vec<&Allocated> = held.iter().collect();
    let drivers: BTreeSet<String> = slices
        .iter()
        .filter_map(|s| match s {
            Object::Slice { driver, .. } => Some(driver.clone()),
            _ => None,
        })
        .collect();
    let devices =
        allocator::allocate(&format!("{namespace}/{name}"), &spec, &catalog, &candidates, &taken, &drivers).ok()?;
    let class_config: BTreeMap<String, Vec<Value>> = classes
        .iter()
        .filter_map(|c| match c {
            Object::Class { name, config, .. } => Some((name.clone(), config.clone())),
            _ => None,
        })
        .collect();
    Some(super::scheduler::allocation_result(&devices, &claim["spec"], &class_config, node))
}

/// Drop the reservations made here whose pod is gone, replaced or done;
/// deallocate a claim reserved for nobody then, and delete it when it was
/// made for a pod that will not run (syncClaim; the garbage collector).
fn prune(tx: &mut Txn<'_>, made: &mut BTreeSet<Reservation>) {
    if made.is_empty() {
        return;
    }
    let pods: BTreeMap<String, Value> =
        tx.list("", "pods", None).into_iter().map(|p| (text(&p["metadata"]["uid"]).to_string(), p)).collect();
    let stale: Vec<Reservation> = made.iter().filter(|(_, uid)| pods.get(uid).is_none_or(done)).cloned().collect();
    for r in stale {
        made.remove(&r);
        let (key, uid) = r;
        let Some((ns, name)) = key.split_once('/') else { continue };
        let Some(mut claim) = tx.claim(ns, name) else { continue };
        let mut reserved = claim["status"]["reservedFor"].as_array().cloned().unwrap_or_default();
        reserved.retain(|c| c["uid"] != uid.as_str());
        if !reserved.is_empty() {
            claim["status"]["reservedFor"] = json!(reserved);
            tx.update_claim(claim);
            continue;
        }
        if let Some(owner) = owning_pod(&claim).map(|(_, o)| o.to_string()) {
            if pods.get(&owner).is_none_or(done) {
                tx.delete_claim(ns, name);
                continue;
            }
        }
        deallocate(&mut claim);
        tx.update_claim(claim);
    }
}

/// syncClaim's PodGroup part and the garbage collector (KEP-5729, the gate
/// on): a reservation of a PodGroup that is gone or replaced (another UID)
/// goes; a claim reserved for nobody then is deallocated, and a claim owned
/// by a PodGroup that is gone is deleted once nobody holds it.
fn release_pod_groups(tx: &mut Txn<'_>) {
    let groups: BTreeMap<(String, String), String> = tx
        .list(POD_GROUP_API_GROUP, "podgroups", None)
        .iter()
        .map(|g| {
            let m = &g["metadata"];
            ((text(&m["namespace"]).to_string(), text(&m["name"]).to_string()), text(&m["uid"]).to_string())
        })
        .collect();
    let live =
        |ns: &str, name: &str, uid: &str| groups.get(&(ns.to_string(), name.to_string())).is_some_and(|u| u == uid);
    let claims: Vec<Value> = tx.claims().cloned().collect();
    for mut claim in claims {
        let ns = text(&claim["metadata"]["namespace"]).to_string();
        let name = text(&claim["metadata"]["name"]).to_string();
        let reserved = claim["status"]["reservedFor"].as_array().cloned().unwrap_or_default();
        let remaining: Vec<Value> = reserved
            .iter()
            .filter(|r| {
                !(r["apiGroup"] == POD_GROUP_API_GROUP && r["resource"] == "podgroups")
                    || live(&ns, text(&r["name"]), text(&r["uid"]))
            })
            .cloned()
            .collect();
        let orphan = owning_pod_group(&claim).is_some_and(|(g, uid)| !live(&ns, g, uid));
        if remaining.is_empty() && orphan {
            tx.delete_claim(&ns, &name);
            continue;
        }
        if remaining.len() < reserved.len() {
            claim["status"]["reservedFor"] = json!(remaining);
            if remaining.is_empty() {
                deallocate(&mut claim);
            }
            tx.update_claim(claim);
        }
    }
}

/// A claim reserved for nobody: its allocation and the scheduler's finalizer cleared.
fn deallocate(claim: &mut Value) {
    if let Some(s) = claim["status"].as_object_mut() {
        for f in ["reservedFor", "allocation", "devices"] {
            s.remove(f);
        }
    }
    if let Some(f) = claim["metadata"]["finalizers"].as_array_mut() {
        f.retain(|x| x != FINALIZER);
        if f.is_empty() {
            if let Some(m) = claim["metadata"].as_object_mut() {
                m.remove("finalizers");
            }
        }
    }
}

/// A claim being deleted with the scheduler's finalizer and reserved for
/// nobody: deallocated, so that it goes (syncClaim).
fn release_deleted(tx: &mut Txn<'_>) {
    let waiting: Vec<Value> = tx
        .claims()
        .filter(|c| {
            c["metadata"]["deletionTimestamp"].is_string()
                && c["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == FINALIZER))
                && c["status"]["reservedFor"].as_array().is_none_or(Vec::is_empty)
        })
        .cloned()
        .collect();
    for mut c in waiting {
        deallocate(&mut c);
        tx.update_claim(c);
    }
}

#[cfg(test)]
mod tests;
