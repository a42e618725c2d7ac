use super::*;
use crate::controlplane::objects;

fn slice(devices: Value) -> Object {
    objects::parse(&json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}))
    .unwrap()
}

fn result(device: &str) -> Value {
    json!({"request": "r", "driver": "d", "pool": "p", "device": device})
}

fn catalog() -> Devices {
    devices(&[slice(json!([
        {"name": "cpu-0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}}}},
        {"name": "cpu-1", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}}}},
        {"name": "gpu-0", "nodeAllocatableResources": {"memory": {"overhead": {"perPod": "1Gi", "perContainer": "512Mi"}}}},
        {"name": "mem-0", "allowMultipleAllocations": true, "capacity": {"memory": {"value": "8Gi"}},
         "nodeAllocatableResources": {"memory": {"mapping": {"capacityKey": "memory", "capacityMultiplier": "2"}}}},
        {"name": "plain"}
    ]))])
}

/// buildNodeAllocatableDRAInfo (nodeallocatabledynamicresources.go
/// v1.37.2): a deviceMultiplier per device summed, a consumed capacity times
/// its capacityMultiplier in the consumed quantity's format, overheads
/// summed per device; a claim of devices without any gives nothing; a
/// capacityKey mapping of a result that consumed nothing is an error.
#[test]
fn a_claims_status_sums_its_devices_mappings_and_overheads() {
    let d = catalog();
    let st = claim_status("cpus", &[result("cpu-0"), result("cpu-1")], &d).unwrap().unwrap();
    assert_eq!(st.to_json(), json!({"resourceClaimName": "cpus", "mapping": [{"name": "cpu", "quantity": "4"}]}));
    let st = claim_status("gpu", &[result("gpu-0")], &d).unwrap().unwrap();
    assert_eq!(
        st.to_json(),
        json!({"resourceClaimName": "gpu", "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "512Mi"}]})
    );
    let mut mem = result("mem-0");
    mem["consumedCapacity"] = json!({"memory": "3Gi"});
    let st = claim_status("mem", &[mem], &d).unwrap().unwrap();
    assert_eq!(st.to_json()["mapping"], json!([{"name": "memory", "quantity": "6Gi"}]));
    assert_eq!(claim_status("plain", &[result("plain")], &d), Ok(None));
    assert!(claim_status("mem", &[result("mem-0")], &d).unwrap_err().to_string().contains("ConsumedCapacity is nil"));
    // Shared devices: mapped ones are not shared, overhead-only ones are.
    assert!(
        has_mapped(&[result("cpu-0")], &d) && has_mapped(&[json!({"driver": "d", "pool": "p", "device": "mem-0"})], &d)
    );
    assert!(!has_mapped(&[result("gpu-0")], &d) && has_any(&[result("gpu-0")], &d));
    assert!(!has_any(&[result("plain")], &d));
}

/// The containers naming a claim, init containers first, once per entry.
#[test]
fn containers_naming_a_claim_are_listed_init_containers_first() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "i", "resources": {"claims": [{"name": "g"}]}}],
        "containers": [{"name": "a", "resources": {"claims": [{"name": "g"}, {"name": "x"}]}}, {"name": "b"},
            {"name": "c", "resources": {"claims": [{"name": "g", "request": "r1"}, {"name": "g", "request": "r2"}]}}]}});
    assert_eq!(containers_naming(&pod, "g"), ["i", "a", "c", "c"]);
    assert!(containers_naming(&pod, "none").is_empty());
}

/// PodRequests with the DRA part (component-helpers resource/helpers.go
/// v0.37.2): containers summed (a limit stands for a missing request),
/// init containers as a floor, sidecars added, the statuses' mapped
/// quantities plus per-pod and per-container overheads added, pod-level
/// requests in place of the aggregate, spec.overhead on top.
#[test]
fn pod_requests_count_containers_init_containers_and_the_dra_part() {
    let gi = 1i128 << 30;
    let n = 1_000_000_000i128;
    let pod = json!({"spec": {
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "5"}}},
                           {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                       {"name": "b", "resources": {"limits": {"cpu": "2"}}}]}});
    let statuses = json!([
        {"resourceClaimName": "cpus", "containers": ["a"], "mapping": [{"name": "cpu", "quantity": "4"}]},
        {"resourceClaimName": "gpu", "containers": ["a", "b"],
         "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "512Mi"}]}]);
    let r = pod_requests(&pod, &statuses);
    // cpu: max(1+2+1, 5) + 4; memory: 1Gi + 1Gi + 2 × 512Mi.
    assert_eq!((r["cpu"], r["memory"]), (9 * n, 3 * gi * n));
    let mut level = pod.clone();
    level["spec"]["resources"] = json!({"requests": {"cpu": "10"}});
    level["spec"]["overhead"] = json!({"cpu": "250m"});
    assert_eq!(pod_requests(&level, &statuses)["cpu"], 10 * n + n / 4);
    assert_eq!(pod_level_covers(&level, &statuses), Ok(()));
    level["spec"]["resources"] = json!({"requests": {"cpu": "8"}});
    assert_eq!(
        pod_level_covers(&level, &statuses).unwrap_err().to_string(),
        "pod level request for cpu is insufficient to cover the aggregated container and node-allocatable DRA requests"
    );
    // Limits: a container's limit plus what the claims give it (a: 4 cpu
    // mapped; 1Gi + 512Mi of memory overhead) against the pod-level limit.
    assert_eq!(
        container_dra(&statuses, "a"),
        [("cpu".to_string(), 4 * n), ("memory".to_string(), 3 * gi * n / 2)].into()
    );
    let mut limited = pod.clone();
    limited["spec"]["resources"] = json!({"requests": {"cpu": "10"}, "limits": {"cpu": "5"}});
    limited["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "1"});
    assert_eq!(pod_level_covers(&limited, &statuses), Ok(()), "1 + 4 <= 5");
    limited["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "1500m"});
    assert_eq!(
        pod_level_covers(&limited, &statuses).unwrap_err().to_string(),
        "pod level limit for cpu is insufficient to cover the limit and DRA overhead for container a"
    );
}

/// nodeFitsResources: cpu in millis, memory and ephemeral storage whole,
/// against allocatable less used; only what the pod asks for is checked.
#[test]
fn a_pod_fits_what_the_node_has_left() {
    let n = 1_000_000_000i128;
    let alloc = allocatable(&json!({"status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}));
    let used: Resources = [("cpu".to_string(), 5 * n)].into();
    let want = |cpu: i128| -> Resources { [("cpu".to_string(), cpu), ("memory".to_string(), 0)].into() };
    assert_eq!(fits(&want(3 * n), &alloc, &used), Ok(()));
    assert_eq!(fits(&want(3 * n + 1), &alloc, &used), Err(vec!["Insufficient cpu".to_string()]));
    let big: Resources = [("memory".to_string(), 17 * (1i128 << 30) * n), ("cpu".to_string(), 4 * n)].into();
    assert_eq!(fits(&big, &alloc, &used), Err(vec!["Insufficient cpu".to_string(), "Insufficient memory".to_string()]));
    assert_eq!(
        sharing_refused("c"),
        "node allocatable resource claim c has a mapped device and cannot be shared across pods"
    );
}

/// 1.36's accounting (v1.36.3 nodeallocatabledynamicresources.go): a
/// device is found by pool and name in any slice (the first one), an
/// `allocationMultiplier` per device, a consumed capacity times it, a
/// `capacityKey` the result did not consume skipped, the status a
/// `resources` map; a capacityKey with no consumed capacity at all is an
/// error naming the claim with its namespace.
#[test]
fn release_1_36_maps_devices_by_pool_and_name() {
    let slices = [
        json!({"spec": {"driver": "a", "pool": {"name": "p"}, "devices": [
            {"name": "cpu-0", "nodeAllocatableResourceMappings": {"cpu": {"allocationMultiplier": "2"}}},
            {"name": "mem-0", "nodeAllocatableResourceMappings": {"memory": {"capacityKey": "memory", "allocationMultiplier": "2"},
                "cpu": {"capacityKey": "cores", "allocationMultiplier": "1"}}}]}}),
        // Another driver's device of the same pool and name is hidden by the first.
        json!({"spec": {"driver": "b", "pool": {"name": "p"}, "devices": [
            {"name": "cpu-0", "nodeAllocatableResourceMappings": {"cpu": {"allocationMultiplier": "100"}}}]}}),
    ];
    let m = mappings(slices.iter());
    let r = |d: &str, consumed: Value| {
        let mut r = json!({"request": "r", "driver": "other", "pool": "p", "device": d});
        if !consumed.is_null() {
            r["consumedCapacity"] = consumed;
        }
        r
    };
    let st = mapped_status("ns", "c", &[r("cpu-0", Value::Null), r("cpu-0", Value::Null)], &m).unwrap().unwrap();
    assert_eq!(st.to_json(), json!({"resourceClaimName": "c", "resources": {"cpu": "4"}}));
    let st = mapped_status("ns", "c", &[r("mem-0", json!({"memory": "1Gi"}))], &m).unwrap().unwrap();
    assert_eq!(st.to_json(), json!({"resourceClaimName": "c", "resources": {"memory": "2Gi"}}));
    assert_eq!(mapped_status("ns", "c", &[r("none", Value::Null)], &m), Ok(None));
    let e = mapped_status("ns", "c", &[r("mem-0", Value::Null)], &m).unwrap_err();
    assert_eq!(
        e.to_string(),
        "claim ns/c, device mem-0: ConsumedCapacity is nil, but Capacity key 'cores' is set in NodeAllocatableResourceMappings for resource cpu"
    );
    assert_eq!(dra_resources(&json!([{"resources": {"cpu": "4", "memory": "1Gi"}}]))["cpu"], 4_000_000_000);
}

/// 1.36's validateNodeAllocatableDRAClaimSharing words, and which release's
/// accounting a profile gets.
#[test]
fn release_1_36_refuses_a_claim_another_pod_accounts() {
    assert_eq!(sharing_36("c", 0), Ok(()));
    assert_eq!(
        sharing_36("c", 1).unwrap_err().to_string(),
        "node allocatable resource claim c is already used by another pod"
    );
    assert_eq!(
        sharing_36("c", 2).unwrap_err().to_string(),
        "node allocatable resource claim c shared by multiple pods"
    );
    assert_eq!(Accounting::of(36, true), Accounting::Mappings);
    assert_eq!(Accounting::of(37, true), Accounting::Resources);
    assert_eq!(Accounting::of(37, false), Accounting::Off);
}
