//! The DRA core decides without I/O: these tests drive it with values only.

use super::*;
use crate::api::dra_v1::{Device, NodePrepareResourceResponse, NodeUnprepareResourceResponse};

fn alloc(driver: &str, device: &str, skip: &[&str]) -> Allocated {
    Allocated {
        request: "r".into(),
        driver: driver.into(),
        pool: "p".into(),
        device: device.into(),
        skip_node_operations: skip.iter().map(|s| s.to_string()).collect(),
        ..Allocated::default()
    }
}

/// A world with claim `a` on driver gpu.x and claim `b` on nic.x (both
/// allocated up front, as ResourceClaims whose class is the driver), and
/// devices for both.
fn world_objects() -> BTreeMap<String, Object> {
    let mut objects = BTreeMap::new();
    for (name, driver) in [("a", "gpu.x"), ("b", "nic.x")] {
        let v = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": driver}}]}}});
        let o = objects::parse(&v).unwrap();
        objects.insert(o.key(), o);
    }
    objects
}

fn candidates() -> Vec<Candidate> {
    ["gpu.x", "nic.x"]
        .iter()
        .map(|d| Candidate { driver: d.to_string(), pool: "p".into(), device: "d0".into(), ..Candidate::default() })
        .collect()
}

/// A world of `objects` and `drivers`: no candidate device, the default
/// features, no PodGroup, a static pod's claims.
fn bare<'a>(objects: &'a BTreeMap<String, Object>, drivers: &'a BTreeSet<String>) -> World<'a> {
    World {
        objects,
        candidates: &[],
        drivers,
        features: Default::default(),
        pod_group: None,
        as_written: false,
        own_plane: false,
        held: &[],
        now: std::time::SystemTime::now(),
    }
}

fn claims(names: &[&str]) -> Vec<PodClaim> {
    names
        .iter()
        .map(|n| PodClaim { pod_claim: n.to_string(), name: n.to_string(), template: None, spec: None })
        .collect()
}

fn ok_answer(uid: &str) -> NodePrepareResourcesResponse {
    let dev = Device {
        pool_name: "p".into(),
        device_name: "d0".into(),
        cdi_device_ids: vec![format!("x/c={uid}")],
        ..Default::default()
    };
    NodePrepareResourcesResponse {
        claims: [(uid.to_string(), NodePrepareResourceResponse { devices: vec![dev], error: String::new() })].into(),
    }
}

#[test]
fn claims_are_recorded_with_every_driver_before_any_call_and_a_half_failed_prepare_unprepares_both() {
    let objects = world_objects();
    let cands = candidates();
    let drivers: BTreeSet<String> = ["gpu.x".to_string(), "nic.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let mut cache = ClaimCache::default();
    let plan = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a", "b"]), &w).unwrap();
    assert!(plan.record, "the checkpoint is written before the calls");
    assert_eq!(plan.allocated.len(), 2);
    assert_eq!(plan.batches.keys().collect::<Vec<_>>(), ["gpu.x", "nic.x"]);
    // Both claims are in the checkpoint, with the pod, their drivers not prepared yet.
    let entries = cache.to_checkpoint();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e.pod_uids.contains_key("pod-1")));
    assert!(entries.iter().all(|e| e.driver_state.values().all(|d| d.devices.is_none())));
    // gpu.x prepares a; nic.x fails b.
    cache.prepared("gpu.x", &plan.batches["gpu.x"], &ok_answer("uid-a")).unwrap();
    let failed = NodePrepareResourcesResponse {
        claims: [("uid-b".to_string(), NodePrepareResourceResponse { devices: vec![], error: "boom".into() })].into(),
    };
    let e = cache.prepared("nic.x", &plan.batches["nic.x"], &failed).unwrap_err();
    assert_eq!(
        DraError::new(Operation::Prepare, e).to_string(),
        "prepare dynamic resources: NodePrepareResources failed for ResourceClaim b: boom"
    );
    // The attempt failed: a's devices are kept, but nothing counts as prepared.
    assert_eq!(cache.get("ns/a").unwrap().state(), ClaimState::PartlyPrepared);
    assert_eq!(cache.get("ns/b").unwrap().state(), ClaimState::Recorded);
    assert!(cache.get("ns/a").unwrap().prepared().is_none());
    let restored = ClaimCache::from_checkpoint(&cache.to_checkpoint());
    assert_eq!(restored.get("ns/b").unwrap().state(), ClaimState::Recorded);
    // A retry calls every driver again (the kubelet marks claims prepared only
    // when the whole attempt succeeded).
    let retry = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a", "b"]), &w).unwrap();
    assert!(retry.cached.is_empty());
    assert_eq!(retry.batches.keys().collect::<Vec<_>>(), ["gpu.x", "nic.x"]);
    assert!(!retry.record, "nothing new to record");
    // The pod goes: every driver the claims' state names is called.
    let un = cache.plan_unprepare("pod-1", &["ns/a".into(), "ns/b".into()]);
    assert_eq!(un.batches.keys().collect::<Vec<_>>(), ["gpu.x", "nic.x"]);
    assert_eq!(un.remove, ["ns/a", "ns/b"]);
    assert_eq!(cache.remove(&un.remove).len(), 2);
    assert!(cache.is_empty());
}

#[test]
fn two_claims_of_one_pod_get_different_devices() {
    let mut objects = world_objects();
    let v = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "a2", "namespace": "ns", "uid": "uid-a2"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x"}}]}}});
    let o = objects::parse(&v).unwrap();
    objects.insert(o.key(), o);
    let mut cands = candidates();
    cands.push(Candidate { device: "d1".into(), ..cands[0].clone() });
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let mut cache = ClaimCache::default();
    let plan = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a", "a2"]), &w).unwrap();
    let devices: Vec<&str> = plan.allocated.iter().map(|c| c.allocation[0].device.as_str()).collect();
    assert_eq!(devices, ["d0", "d1"]);
}

#[test]
fn nothing_is_recorded_when_a_claim_or_a_driver_is_missing() {
    let objects = world_objects();
    let cands = candidates();
    let only_gpu: BTreeSet<String> = ["gpu.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &only_gpu) };
    let mut cache = ClaimCache::default();
    let e = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a", "b"]), &w).unwrap_err();
    assert_eq!(e.to_string(), "DRA driver nic.x is not registered");
    let e = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a", "gone"]), &w).unwrap_err();
    assert_eq!(e.to_string(), "fetch ResourceClaim gone: resourceclaims.resource.k8s.io \"gone\" not found");
    assert!(cache.is_empty(), "a failed validation pass changes nothing");
}

#[test]
fn a_claim_shared_by_two_pods_is_prepared_once_and_unprepared_with_the_last() {
    let objects = world_objects();
    let cands = candidates();
    let drivers: BTreeSet<String> = ["gpu.x".to_string(), "nic.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let mut cache = ClaimCache::default();
    let p1 = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a"]), &w).unwrap();
    cache.prepared("gpu.x", &p1.batches["gpu.x"], &ok_answer("uid-a")).unwrap();
    cache.mark_prepared(&p1.preparing);
    assert_eq!(cache.get("ns/a").unwrap().state(), ClaimState::Prepared);
    let restored = ClaimCache::from_checkpoint(&cache.to_checkpoint());
    assert_eq!(restored.get("ns/a").unwrap().state(), ClaimState::Prepared, "survives a restart as it is");
    assert_eq!(restored.get("ns/a").unwrap().drivers, cache.get("ns/a").unwrap().drivers);
    let p2 = cache.plan_prepare("ns", "pod-2", "pod-2", &claims(&["a"]), &w).unwrap();
    assert!(p2.batches.is_empty() && p2.cached == ["ns/a"] && p2.record, "{p2:?}");
    let un = cache.plan_unprepare("pod-1", &["ns/a".into()]);
    assert_eq!(un.shared, [("ns/a".to_string(), "uid-a".to_string())]);
    assert!(un.batches.is_empty() && un.remove.is_empty());
    let un = cache.plan_unprepare("pod-2", &["ns/a".into()]);
    assert_eq!(un.batches.keys().collect::<Vec<_>>(), ["gpu.x"]);
}

#[test]
fn a_driver_skips_an_operation_only_when_every_device_of_it_does() {
    let c = |allocation| ClaimInfo::allocated("ns", "c", "u", allocation);
    let both = c(vec![alloc("x", "d", &["*"])]);
    assert!(both.skips("x", Operation::Prepare) && both.skips("x", Operation::Unprepare));
    let mixed = c(vec![
        alloc("x", "d", &["*"]),
        alloc("x", "e", &["NodeUnprepareResources", "SomethingNew"]),
        alloc("y", "d", &[]),
    ]);
    assert!(!mixed.skips("x", Operation::Prepare));
    assert!(mixed.skips("x", Operation::Unprepare));
    assert!(!mixed.skips("y", Operation::Prepare));
    assert!(!mixed.skips("absent", Operation::Prepare));
    // Skipped preparing needs no driver and counts as prepared at once.
    let mut cache = ClaimCache::default();
    let mut objects = BTreeMap::new();
    let v = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "cp.x"}}]}}});
    let o = objects::parse(&v).unwrap();
    objects.insert(o.key(), o);
    let cands = vec![Candidate {
        driver: "cp.x".into(),
        pool: "p".into(),
        device: "v0".into(),
        skip: vec!["*".into()],
        ..Candidate::default()
    }];
    let none = BTreeSet::new();
    let w = World { candidates: &cands, ..bare(&objects, &none) };
    let plan = cache.plan_prepare("ns", "pod", "pod", &claims(&["c"]), &w).unwrap();
    assert_eq!(plan.skipped, [("ns/c".to_string(), "cp.x".to_string())]);
    assert!(plan.batches.is_empty());
    cache.mark_prepared(&plan.preparing);
    assert_eq!(cache.get("ns/c").unwrap().state(), ClaimState::Prepared);
    let e = &cache.to_checkpoint()[0];
    assert_eq!(
        e.driver_state["cp.x"].skip_node_operations.as_deref(),
        Some(&["NodePrepareResources".to_string(), "NodeUnprepareResources".to_string()][..])
    );
    let un = cache.plan_unprepare("pod", &["ns/c".into()]);
    assert!(un.batches.is_empty() && un.skipped.len() == 1);
}

#[test]
fn answers_that_break_the_protocol_read_as_the_kubelets_errors() {
    let asked = vec![Claim { namespace: "ns".into(), uid: "u1".into(), name: "c1".into() }];
    let extra = NodeUnprepareResourcesResponse {
        claims: [("zz".to_string(), NodeUnprepareResourceResponse::default())].into(),
    };
    assert_eq!(
        unprepared(&asked, &extra).unwrap_err().to_string(),
        "NodeUnprepareResources returned result for unknown claim UID zz"
    );
    let none = NodeUnprepareResourcesResponse::default();
    let e = DraError::new(Operation::Unprepare, unprepared(&asked, &none).unwrap_err());
    assert_eq!(e.to_string(), "unprepare dynamic resources: NodeUnprepareResources skipped 1 ResourceClaims");
    assert!(std::error::Error::source(&e).is_some(), "the cause is the source");
}

/// TestPrepareResources / TestUnprepareResources: a failed call reads as
/// grpc-go's status wrapped by the operation (manager.go
/// `fmt.Errorf("NodePrepareResources: %w", err)`), a deadline as DeadlineExceeded.
#[test]
fn failed_calls_read_as_the_kubelet_wraps_grpc_statuses() {
    let rpc = |method, code, message: &str| crate::core::Error::Rpc {
        target: "/p/dra.sock".into(),
        method,
        code,
        message: message.into(),
    };
    let e = Cause::Call {
        op: Operation::Prepare,
        source: Box::new(rpc("NodePrepareResources", tonic::Code::Unknown, "boom")),
    };
    assert_eq!(
        DraError::new(Operation::Prepare, e).to_string(),
        "prepare dynamic resources: NodePrepareResources: rpc error: code = Unknown desc = boom"
    );
    let e = Cause::Call {
        op: Operation::Unprepare,
        source: Box::new(rpc("NodeUnprepareResources", tonic::Code::DeadlineExceeded, "context deadline exceeded")),
    };
    assert!(e.to_string().starts_with("NodeUnprepareResources: rpc error: code = DeadlineExceeded"), "{e}");
}

/// Put claim `c` in `objects` as a manifest with `status` (allocated by a scheduler elsewhere).
fn with_status(objects: &mut BTreeMap<String, Object>, uid: &str, status: serde_json::Value) {
    let v = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": uid},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x"}}]}}, "status": status});
    let o = objects::parse(&v).unwrap();
    objects.insert(o.key(), o);
}

/// #32 item 8, #33 item 1: a claim a scheduler allocated (its manifest's
/// status.allocation) is taken as it is, not allocated again; one whose
/// reservedFor does not name the pod is refused in manager.go's words.
#[test]
fn a_manifest_allocation_is_honoured_and_reserved_for_must_name_the_pod() {
    let mut objects = BTreeMap::new();
    let results =
        serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "far", "device": "gpu-7", "adminAccess": true}]);
    with_status(
        &mut objects,
        "uid-c",
        serde_json::json!({"allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": "p1", "uid": "pod-1"}]}),
    );
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    // No candidate device at all: the allocator is not asked.
    let w = bare(&objects, &drivers);
    let mut cache = ClaimCache::default();
    let e = cache.plan_prepare("ns", "pod-2", "p2", &claims(&["c"]), &w).unwrap_err();
    assert_eq!(e.to_string(), "pod p2 (pod-2) is not allowed to use ResourceClaim c (uid-c)");
    assert!(cache.is_empty(), "nothing recorded for a refused pod");
    let plan = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &w).unwrap();
    assert_eq!(plan.preparing, ["ns/c"]);
    let c = cache.get("ns/c").unwrap();
    assert_eq!(
        (c.allocation[0].pool.as_str(), c.allocation[0].device.as_str(), c.allocation[0].admin),
        ("far", "gpu-7", true)
    );
    // A manifest without reservedFor is reserved by this node's scheduler stand-in.
    with_status(&mut objects, "uid-c", serde_json::json!({"allocation": {"devices": {"results": results}}}));
    let w = bare(&objects, &drivers);
    assert!(cache.plan_prepare("ns", "pod-3", "p3", &claims(&["c"]), &w).is_ok());
}

/// #47: a pod of the API server (World::as_written) gets its claims as the
/// kubelet does — a claim reserved for nobody is refused (this node's
/// scheduler stand-in reserves nothing for it), one reserved but not
/// allocated is refused in newClaimInfoFromClaim's words, and no candidate
/// device is ever allocated for it.
#[test]
fn a_pod_of_the_api_gets_its_claims_as_written_or_not_at_all() {
    let mut objects = BTreeMap::new();
    let results = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d3"}]);
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let mine = serde_json::json!([{"resource": "pods", "name": "p1", "uid": "pod-1"}]);
    fn api<'a>(objects: &'a BTreeMap<String, Object>, drivers: &'a BTreeSet<String>) -> World<'a> {
        World { as_written: true, ..bare(objects, drivers) }
    }
    let mut cache = ClaimCache::default();
    with_status(&mut objects, "uid-c", serde_json::json!({"allocation": {"devices": {"results": results}}}));
    let e = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &api(&objects, &drivers)).unwrap_err();
    assert_eq!(e.to_string(), "pod p1 (pod-1) is not allowed to use ResourceClaim c (uid-c)");
    with_status(&mut objects, "uid-c", serde_json::json!({"reservedFor": mine}));
    let e = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &api(&objects, &drivers)).unwrap_err();
    assert_eq!(e.to_string(), "ResourceClaim c: not allocated");
    assert!(cache.is_empty(), "nothing recorded for a refused pod");
    with_status(
        &mut objects,
        "uid-c",
        serde_json::json!({"allocation": {"devices": {"results": results}}, "reservedFor": mine}),
    );
    let plan = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &api(&objects, &drivers)).unwrap();
    assert!(plan.allocated.is_empty(), "allocated by nobody here");
    assert_eq!(cache.get("ns/c").unwrap().allocation[0].device, "d3");
}

/// #48: a claim of an API pod that dpctl's own control plane allocated on a
/// device with binding conditions (its controller stands in for
/// kube-scheduler) waits here as PreBind would, from the allocation's stamp;
/// one a real scheduler allocated (not `own_plane`: it waited before
/// binding) or one without binding conditions does not.
#[test]
fn a_claim_our_own_plane_allocated_waits_for_its_binding_conditions() {
    let mut objects = BTreeMap::new();
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let mine = serde_json::json!([{"resource": "pods", "name": "p1", "uid": "pod-1"}]);
    let features = crate::controlplane::allocator::Features { binding_conditions: true, ..Default::default() };
    let plan = |objects: &BTreeMap<String, Object>, own_plane: bool| {
        let w = World { as_written: true, own_plane, features, ..bare(objects, &drivers) };
        let mut cache = ClaimCache::default();
        cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &w).unwrap();
        let c = cache.get("ns/c").unwrap();
        (c.binding_pending, c.allocated_at)
    };
    let bound = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d3",
        "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]}]);
    let stamp = "2026-12-06T10:00:00Z";
    with_status(
        &mut objects,
        "uid-c",
        serde_json::json!({"allocation": {"devices": {"results": bound}, "allocationTimestamp": stamp}, "reservedFor": mine}),
    );
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_551_200);
    assert_eq!(plan(&objects, true), (true, Some(at)));
    assert_eq!(plan(&objects, false), (false, None), "a real scheduler waited before it bound the pod");
    let plain = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d3"}]);
    with_status(
        &mut objects,
        "uid-c",
        serde_json::json!({"allocation": {"devices": {"results": plain}, "allocationTimestamp": stamp}, "reservedFor": mine}),
    );
    assert!(!plan(&objects, true).0, "no binding conditions, nothing to wait for");
}

/// KEP-5729 (manager.go prepareResources, resourceclaim.IsReservedForPod):
/// a claim reserved for the pod's PodGroup — the entry upstream's controller
/// and scheduler write (apiGroup scheduling.k8s.io, resource podgroups, the
/// PodGroup's name and UID) — is the pod's with DRAWorkloadResourceClaims on
/// (World::pod_group given) and refused in manager.go's words with it off;
/// another group's reservation, or the right name of another resource, is
/// refused either way.
#[test]
fn a_claim_reserved_for_the_pods_pod_group_is_its_only_with_the_gate_on() {
    let mut objects = BTreeMap::new();
    let results = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d0"}]);
    let group = |api_group: &str, resource: &str, name: &str| {
        serde_json::json!({"allocation": {"devices": {"results": results}},
            "reservedFor": [{"apiGroup": api_group, "resource": resource, "name": name, "uid": "group-uid"}]})
    };
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    with_status(&mut objects, "uid-c", group("scheduling.k8s.io", "podgroups", "team"));
    let off = bare(&objects, &drivers);
    let mut cache = ClaimCache::default();
    let e = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &off).unwrap_err();
    assert_eq!(e.to_string(), "pod p1 (pod-1) is not allowed to use ResourceClaim c (uid-c)");
    assert!(cache.is_empty());
    let other = World { pod_group: Some("x"), ..bare(&objects, &drivers) };
    assert!(matches!(cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &other), Err(Cause::NotReserved { .. })));
    let on = World { pod_group: Some("team"), ..bare(&objects, &drivers) };
    let plan = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &on).unwrap();
    assert_eq!(plan.preparing, ["ns/c"]);
    cache.prepared("gpu.x", &plan.batches["gpu.x"], &ok_answer("uid-c")).unwrap();
    cache.mark_prepared(&plan.preparing);
    // A second member of the group shares the prepared claim.
    let plan = cache.plan_prepare("ns", "pod-2", "p2", &claims(&["c"]), &on).unwrap();
    assert_eq!(plan.cached, ["ns/c"]);
    for (api_group, resource) in [("", "podgroups"), ("scheduling.k8s.io", "workloads"), ("apps", "podgroups")] {
        let mut objects = BTreeMap::new();
        with_status(&mut objects, "uid-c", group(api_group, resource, "team"));
        let on = World { pod_group: Some("team"), ..bare(&objects, &drivers) };
        let e = ClaimCache::default().plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &on).unwrap_err();
        assert!(matches!(e, Cause::NotReserved { .. }), "{api_group}/{resource}: {e}");
    }
}

/// #32 item 8: a claim recreated under the same name with a new UID is
/// another claim: while the old one is prepared for a pod, a pod of the new
/// one fails in manager.go's words; once the old one is unprepared (with
/// its own UID), the new one is prepared with the new UID.
#[test]
fn a_claim_recreated_with_a_new_uid_is_a_new_claim() {
    let mut objects = BTreeMap::new();
    let results = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d0"}]);
    with_status(&mut objects, "old", serde_json::json!({"allocation": {"devices": {"results": results}}}));
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let mut cache = ClaimCache::default();
    let w = bare(&objects, &drivers);
    let plan = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["c"]), &w).unwrap();
    assert_eq!(plan.batches["gpu.x"][0].uid, "old");
    cache.prepared("gpu.x", &plan.batches["gpu.x"], &ok_answer("old")).unwrap();
    cache.mark_prepared(&plan.preparing);
    with_status(&mut objects, "new", serde_json::json!({"allocation": {"devices": {"results": results}}}));
    let w = bare(&objects, &drivers);
    let e = cache.plan_prepare("ns", "pod-2", "p2", &claims(&["c"]), &w).unwrap_err();
    assert_eq!(
        e.to_string(),
        "old ResourceClaim with same name c and different UID old still exists (previous pod force-deleted?!)"
    );
    let un = cache.plan_unprepare("pod-1", &["ns/c".to_string()]);
    assert_eq!(un.batches["gpu.x"][0].uid, "old");
    cache.remove(&un.remove);
    let plan = cache.plan_prepare("ns", "pod-2", "p2", &claims(&["c"]), &w).unwrap();
    assert_eq!(plan.batches["gpu.x"][0].uid, "new");
}

/// TestPrepareResourcesWithPreparedAndNewClaim (manager_test.go): a pod with
/// a claim prepared before and a new one calls the driver for the new one
/// only; the prepared one is used from the cache.
#[test]
fn test_prepare_resources_with_prepared_and_new_claim() {
    let objects = world_objects();
    let cands = candidates();
    let drivers: BTreeSet<String> = ["gpu.x".to_string(), "nic.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let mut cache = ClaimCache::default();
    let first = cache.plan_prepare("ns", "pod-0", "p0", &claims(&["a"]), &w).unwrap();
    cache.prepared("gpu.x", &first.batches["gpu.x"], &ok_answer("uid-a")).unwrap();
    cache.mark_prepared(&first.preparing);
    let plan = cache.plan_prepare("ns", "pod-1", "p1", &claims(&["a", "b"]), &w).unwrap();
    assert_eq!(plan.cached, ["ns/a"], "the prepared claim is not prepared again");
    assert_eq!(plan.batches.keys().collect::<Vec<_>>(), ["nic.x"], "only the new claim's driver is called");
    assert_eq!(plan.batches["nic.x"].iter().map(|c| c.uid.as_str()).collect::<Vec<_>>(), ["uid-b"]);
    assert!(plan.record, "the new pod reference is checkpointed first");
    assert!(cache.get("ns/a").unwrap().pods.contains("pod-1"));
}

/// Issue 45: a claim a scheduler already allocated (status.allocation
/// written, d0) that this node has not prepared yet holds its device: a
/// claim allocated now gets d1, not d0 again (the scheduler's claim tracker
/// counts every written allocation in use).
#[test]
fn a_written_allocation_of_another_claim_holds_its_device() {
    let mut objects = world_objects();
    let results = serde_json::json!([{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d0"}]);
    with_status(&mut objects, "uid-c", serde_json::json!({"allocation": {"devices": {"results": results}}}));
    let mut cands = candidates();
    cands.push(Candidate { device: "d1".into(), ..cands[0].clone() });
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let mut cache = ClaimCache::default();
    let plan = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a"]), &w).unwrap();
    let devices: Vec<&str> = plan.allocated.iter().map(|c| c.allocation[0].device.as_str()).collect();
    assert_eq!(devices, ["d1"]);
}

/// claiminfo.go newClaimInfoFromState (`prepared: false`) and manager.go
/// prepareResources: a claim restored from the checkpoint is not prepared
/// again for the pod it names (running before the restart: the kubelet does
/// not prepare it again), but is for a new pod (NodePrepareResources is
/// called again, as the differential against upstream's manager shows).
#[test]
fn a_restored_claim_is_prepared_again_for_a_new_pod_not_for_the_pods_it_names() {
    let objects = world_objects();
    let cands = candidates();
    let drivers: BTreeSet<String> = ["gpu.x".to_string()].into();
    let none: BTreeSet<String> = BTreeSet::new();
    let w = World { candidates: &cands, ..bare(&objects, &drivers) };
    let gone = World { candidates: &cands, ..bare(&objects, &none) };
    let mut cache = ClaimCache::default();
    let plan = cache.plan_prepare("ns", "pod-1", "pod-1", &claims(&["a"]), &w).unwrap();
    cache.prepared("gpu.x", &plan.batches["gpu.x"], &ok_answer("uid-a")).unwrap();
    cache.mark_prepared(&plan.preparing);
    // Before a restart: a second pod finds it prepared (no call, no lookup:
    // a deliberate difference, manager_tests.rs …_unlike_upstream).
    let plan = cache.clone().plan_prepare("ns", "pod-2", "pod-2", &claims(&["a"]), &gone).unwrap();
    assert_eq!((plan.cached.len(), plan.batches.len()), (1, 0));
    // After a restart.
    let restored = ClaimCache::from_checkpoint(&cache.to_checkpoint());
    let c = restored.get("ns/a").unwrap();
    assert!(c.restored && c.done && c.prepared().is_some(), "shown as prepared: {c:?}");
    let plan = restored.clone().plan_prepare("ns", "pod-1", "pod-1", &claims(&["a"]), &gone).unwrap();
    assert_eq!((plan.cached.len(), plan.batches.len()), (1, 0), "the running pod: no call, no lookup");
    // A new pod: prepared again, so its driver must be there (refused before anything is recorded).
    let mut again = restored.clone();
    let e = again.plan_prepare("ns", "pod-2", "pod-2", &claims(&["a"]), &gone).unwrap_err();
    assert!(matches!(e, Cause::NotRegistered { .. }), "{e}");
    assert!(!again.get("ns/a").unwrap().pods.contains("pod-2"));
    let plan = again.plan_prepare("ns", "pod-2", "pod-2", &claims(&["a"]), &w).unwrap();
    assert_eq!(plan.batches["gpu.x"].len(), 1, "a new pod: NodePrepareResources again");
    again.prepared("gpu.x", &plan.batches["gpu.x"], &ok_answer("uid-a")).unwrap();
    again.mark_prepared(&plan.preparing);
    assert!(!again.get("ns/a").unwrap().restored);
    let plan = again.plan_prepare("ns", "pod-3", "pod-3", &claims(&["a"]), &w).unwrap();
    assert_eq!((plan.cached.len(), plan.batches.len()), (1, 0), "prepared in this life now");
}
