//! `dpctl mock-kubelet --kubeconfig FILE --node-name NAME` as a node of the
//! real control plane (tests/upstream/cmd/controlplane: kube-apiserver with
//! the Node authorizer and NodeRestriction, kube-scheduler, the
//! resourceclaim controller), with the node's own credentials
//! (system:node:NAME): it registers its Node and goes Ready, renews its
//! Lease, `dpctl serve` registered to it shows in the Node's allocatable,
//! kube-scheduler binds pods created through the API to it and they run
//! through the mock kubelet's lifecycle (device-plugin Allocate, DRA claims
//! prepared as the scheduler allocated them), their status written as the
//! kubelet writes it; deleted, they are stopped, unprepared, freed and the
//! pod objects go. Every wait is on API state or a log event, with a deadline.
//! This control plane runs no node lifecycle controller: the test removes the
//! not-ready taint the NodeTaint admission puts on a new Node, as that
//! controller does once the Node is Ready.

use crate::support::*;
use dpctl::client::kube::{self, ApiServer};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn api(kubeconfig: &Path) -> ApiServer {
    kube::load_kubeconfig(kubeconfig).unwrap()
}

async fn call(api: &ApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    kube::request(api, method, path, body, T).await.unwrap()
}

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// `dpctl dra serve` of `driver` on `t`, publishing as `node` with the
/// node's kubeconfig `kc` (`extra` flags after), once its slice is published.
async fn serve_as_node(
    t: &DraTree,
    driver: &str,
    kc: &Path,
    node: &str,
    extra: &[&str],
) -> (tokio::process::Child, Tail) {
    let mut serve = dra_serve_publishing(&t.root, driver, kc, node);
    serve.args(extra);
    serve.stdout(std::process::Stdio::piped());
    let mut serve = serve.spawn().unwrap();
    let mut serve_log = Tail::stdout(&mut serve);
    serve_log.wait_for("\"event\":\"resourceslice\"", 1).await;
    (serve, serve_log)
}

/// Namespace `ns`, a DeviceClass named after `driver` selecting its
/// devices, and the template `one-gpu` in `ns` asking for one of them.
async fn one_gpu_template(admin: &ApiServer, ns: &str, driver: &str) {
    namespace(admin, ns).await;
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let (code, body) = call(admin, "POST", "/apis/resource.k8s.io/v1/deviceclasses", Some(&class)).await;
    assert!(code == 201 || code == 409, "{body}");
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}}});
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates");
    let (code, body) = call(admin, "POST", &path, Some(&template)).await;
    assert_eq!(code, 201, "{body}");
}

/// The mock kubelet on `t` as node `node` of `cp` (its own credentials),
/// registered, Ready and schedulable.
async fn join(cp: &ControlPlane, t: &DraTree, node: &str) -> (tokio::process::Child, Tail) {
    let kc = cp.dir.join(format!("node-{node}.kubeconfig"));
    let mut child = mock_kubelet_on(&t.root, &["--kubeconfig", s(&kc), "--node-name", node]).spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    log.wait_for("\"event\":\"node-registered\"", 1).await;
    let admin = api(&cp.kubeconfig);
    let n = until(20, "the Node Ready", || {
        let admin = admin.clone();
        async move {
            let (code, n) = call(&admin, "GET", &format!("/api/v1/nodes/{node}"), None).await;
            let ready =
                n["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
            (code == 200 && ready).then_some(n)
        }
    })
    .await;
    assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], node, "{n}");
    assert_eq!(n["status"]["allocatable"]["pods"], "110", "{n}");
    assert!(n["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap().starts_with("v1."), "{n}");
    // The node lifecycle controller's part: the not-ready taint goes once Ready.
    let patch = json!({"spec": {"taints": null}});
    let (code, body) =
        kube::request_as(&admin, "PATCH", &format!("/api/v1/nodes/{node}"), kube::MERGE_PATCH, Some(&patch), T)
            .await
            .unwrap();
    assert_eq!(code, 200, "{body}");
    (child, log)
}

/// The mock kubelet on `t` as node `node` of `cp` ([`join`]) and `dpctl dra
/// serve` of `driver` publishing as that node (`extra` flags after), once
/// the kubelet registered the driver.
async fn dra_node(
    cp: &ControlPlane,
    t: &DraTree,
    node: &str,
    driver: &str,
    extra: &[&str],
) -> (tokio::process::Child, Tail, tokio::process::Child, Tail) {
    let (kubelet, mut log) = join(cp, t, node).await;
    let kc = cp.dir.join(format!("node-{node}.kubeconfig"));
    let (serve, serve_log) = serve_as_node(t, driver, &kc, node, extra).await;
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    (kubelet, log, serve, serve_log)
}

async fn namespace(admin: &ApiServer, ns: &str) {
    let (code, body) = call(
        admin,
        "POST",
        "/api/v1/namespaces",
        Some(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
    )
    .await;
    assert!(code == 201 || code == 409, "{body}");
}

/// Wait until pod `ns/name` is Running on `node` with every condition the kubelet writes True.
async fn running(admin: &ApiServer, ns: &str, name: &str, node: &str) -> Value {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let pod = until(60, &format!("pod {ns}/{name} Running"), || {
        let (admin, path) = (admin.clone(), path.clone());
        async move {
            let (_, p) = call(&admin, "GET", &path, None).await;
            (p["status"]["phase"] == "Running").then_some(p)
        }
    })
    .await;
    assert_eq!(pod["spec"]["nodeName"], node, "scheduled by kube-scheduler onto the dpctl node: {pod}");
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert!(conditions.iter().any(|c| c["type"] == t && c["status"] == "True"), "{t}: {pod}");
    }
    let cs = &pod["status"]["containerStatuses"][0];
    assert!(cs["state"]["running"].is_object() && cs["ready"] == true, "{pod}");
    assert_eq!(pod["status"]["hostIP"], "127.0.0.1", "{pod}");
    assert!(pod["status"]["podIP"].is_string(), "{pod}");
    pod
}

/// Delete pod `ns/name` as a user does (default grace period) and wait until it is gone.
async fn delete_and_wait_gone(admin: &ApiServer, ns: &str, name: &str) {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let (code, body) = call(admin, "DELETE", &path, None).await;
    assert_eq!(code, 200, "{body}");
    until(60, &format!("pod {ns}/{name} gone"), || {
        let (admin, path) = (admin.clone(), path.clone());
        async move { (call(&admin, "GET", &path, None).await.0 == 404).then_some(()) }
    })
    .await;
}

/// A pod requesting a device plugin's resource is scheduled by the real
/// scheduler onto the dpctl node once the Node's allocatable shows it, runs
/// with the device allocated (PodResources says which), and when deleted
/// frees the device and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_device_plugin_resource_runs_on_the_dpctl_node_of_a_real_cluster() {
    let Some(cp) = control_plane() else { return };
    let node = "cp-node-kubelet";
    let (ns, resource) = ("cp-kubelet-dp", "example.com/gpu");
    let t = DraTree::new();
    let (kubelet, log) = join(cp, &t, node).await;
    let admin = api(&cp.kubeconfig);

    // The Lease, held by the node for 40 s.
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}");
    let lease = until(20, "the node's Lease", || {
        let (admin, p) = (admin.clone(), lease_path.clone());
        async move {
            let (code, l) = call(&admin, "GET", &p, None).await;
            (code == 200).then_some(l)
        }
    })
    .await;
    assert_eq!(
        (lease["spec"]["holderIdentity"].as_str(), lease["spec"]["leaseDurationSeconds"].as_i64()),
        (Some(node), Some(40)),
        "{lease}"
    );
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node", "{lease}");

    // A device plugin registers: the Node's allocatable shows its devices.
    let mut plugin = serve_cmd(&t.p("device-plugins"), &["--resource", resource, "--count", "2"]);
    plugin.stdout(std::process::Stdio::null());
    let plugin = plugin.spawn().unwrap();
    until(30, "the Node's allocatable with the plugin's resource", || {
        let admin = admin.clone();
        async move {
            let (_, n) = call(&admin, "GET", &format!("/api/v1/nodes/{node}"), None).await;
            (n["status"]["allocatable"][resource] == "2" && n["status"]["capacity"][resource] == "2").then_some(())
        }
    })
    .await;

    namespace(&admin, ns).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-user", "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"limits": {resource: "1"}}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{body}");
    let uid = body["metadata"]["uid"].as_str().unwrap().to_string();
    running(&admin, ns, "gpu-user", node).await;

    // PodResources on the mock kubelet: the pod's container holds one device of the resource.
    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    let v: Value = serde_json::from_str(&pr.stdout).unwrap();
    let p =
        v["podResources"].as_array().unwrap().iter().find(|p| p["name"] == "gpu-user").unwrap_or_else(|| panic!("{v}"));
    assert_eq!(p["namespace"], ns, "{v}");
    let d = &p["containers"][0]["devices"][0];
    assert_eq!((d["resourceName"].as_str(), d["deviceIds"].as_array().map(Vec::len)), (Some(resource), Some(1)), "{v}");

    // Deleted (a user's delete, with a grace period): stopped, freed, then the object goes.
    delete_and_wait_gone(&admin, ns, "gpu-user").await;
    let deleted = events(&log, "cluster-pod-deleted");
    assert!(deleted.iter().any(|e| e["uid"] == uid.as_str()), "{}", log.seen());
    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    let v: Value = serde_json::from_str(&pr.stdout).unwrap();
    assert!(v["podResources"].as_array().is_none_or(|a| a.iter().all(|p| p["name"] != "gpu-user")), "{v}");

    // Both devices are free again: a pod asking for two runs.
    let two = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two-gpus", "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"limits": {resource: "2"}}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&two)).await;
    assert_eq!(code, 201, "{body}");
    running(&admin, ns, "two-gpus", node).await;
    delete_and_wait_gone(&admin, ns, "two-gpus").await;

    // Bound past the scheduler (spec.nodeName) asking for more than the node
    // has: refused at admission, Failed with the kubelet's reason; deleted, it goes.
    let three = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "three-gpus", "namespace": ns},
        "spec": {"nodeName": node,
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"limits": {resource: "3"}}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&three)).await;
    assert_eq!(code, 201, "{body}");
    let path = format!("/api/v1/namespaces/{ns}/pods/three-gpus");
    let failed = until(30, "the pod Failed at admission", || {
        let (admin, path) = (admin.clone(), path.clone());
        async move {
            let (_, p) = call(&admin, "GET", &path, None).await;
            (p["status"]["phase"] == "Failed").then_some(p)
        }
    })
    .await;
    // The device manager's Allocate admit handler runs before the predicates (kubelet.go).
    assert_eq!(failed["status"]["reason"], "UnexpectedAdmissionError", "{failed}");
    assert_eq!(
        failed["status"]["message"],
        format!("Allocate failed due to requested number of devices unavailable for {resource}. Requested: 3, Available: 2, which is unexpected"),
        "{failed}"
    );
    delete_and_wait_gone(&admin, ns, "three-gpus").await;

    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    // The plugin stops: its devices are no longer allocatable (kept in capacity for the grace period).
    stop_child(plugin).await;
    until(30, "the Node's allocatable at 0 for the stopped plugin", || {
        let admin = admin.clone();
        async move {
            let (_, n) = call(&admin, "GET", &format!("/api/v1/nodes/{node}"), None).await;
            (n["status"]["allocatable"][resource] == "0" && n["status"]["capacity"][resource] == "2").then_some(())
        }
    })
    .await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// A pod with a ResourceClaim from a template: the resourceclaim controller
/// makes the claim, the real scheduler allocates it from the slice `dpctl
/// dra serve` publishes as the node, and the mock kubelet prepares exactly
/// the device status.allocation names (no allocation of its own), runs the
/// pod, and when it is deleted unprepares the claim before the pod goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_claim_allocated_by_the_real_scheduler_is_prepared_as_written() {
    let Some(cp) = control_plane() else { return };
    let node = "cp-node-kubelet-dra";
    let (ns, driver) = ("cp-kubelet-dra", "gpu.kubelet.dpctl.example.com");
    let t = DraTree::new();
    let (kubelet, mut log, serve, serve_log) = dra_node(cp, &t, node, driver, &[]).await;
    let admin = api(&cp.kubeconfig);

    one_gpu_template(&admin, ns, driver).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{body}");
    let pod = running(&admin, ns, "trainer", node).await;

    // Prepared exactly as the scheduler wrote status.allocation.
    let claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap().to_string();
    let (_, claim) =
        call(&admin, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}"), None)
            .await;
    let results = claim["status"]["allocation"]["devices"]["results"].as_array().unwrap_or_else(|| panic!("{claim}"));
    assert_eq!(results.len(), 1, "{claim}");
    let written =
        format!("{driver}/{}/{}", results[0]["pool"].as_str().unwrap(), results[0]["device"].as_str().unwrap());
    let prepared = events(&log, "claim-prepared");
    let p = prepared
        .iter()
        .find(|e| e["claim"] == format!("{ns}/{claim_name}"))
        .unwrap_or_else(|| panic!("{}", log.seen()));
    assert_eq!(p["devices"], json!([written]), "{p}");
    assert_eq!(p["uid"], claim["metadata"]["uid"], "the stored claim's UID: {p}");
    assert!(events(&log, "claim-allocated").is_empty(), "the kubelet allocated nothing itself: {}", log.seen());

    // Deleted: unprepared, then the pod object goes.
    delete_and_wait_gone(&admin, ns, "trainer").await;
    // The node logs the delete after the API server answered it.
    log.wait_for("\"event\":\"cluster-pod-deleted\"", 1).await;
    let unprepared = events(&log, "claim-unprepared");
    assert!(unprepared.iter().any(|e| e["claim"] == format!("{ns}/{claim_name}")), "{}", log.seen());
    let seen = log.seen();
    let (u, d) =
        (seen.find("\"event\":\"claim-unprepared\"").unwrap(), seen.find("\"event\":\"cluster-pod-deleted\"").unwrap());
    assert!(u < d, "unprepared before the pod is deleted: {seen}");

    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    let r = stop_tailed(serve, serve_log).await;
    r.expect_code(0);
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// The kubelet reads a pod's claims from the API server at every prepare
/// attempt (manager.go PrepareResources GETs each one) and prepares them as
/// written, so a claim that is neither allocated nor reserved when the pod
/// reaches the node fails the attempts ("not allowed to use", the node
/// allocating nothing itself) and is prepared once a scheduler wrote it:
/// here a pod bound by `spec.nodeName` names a claim no scheduler allocated
/// (the resourceclaim controller reserves only allocated claims for such a
/// pod); the test writes the allocation and the reservation after the
/// node's first refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_written_after_the_pod_reached_the_node_is_read_again_and_prepared_as_written() {
    let Some(cp) = control_plane() else { return };
    let node = "cp-node-late-claim";
    let (ns, driver) = ("cp-late-claim", "gpu.late.dpctl.example.com");
    let t = DraTree::new();
    let (kubelet, mut log, serve, serve_log) = dra_node(cp, &t, node, driver, &[]).await;
    let admin = api(&cp.kubeconfig);
    one_gpu_template(&admin, ns, driver).await;

    // The claim, unallocated; the pod naming it, bound to the node.
    let claims = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims");
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "late-gpu", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}});
    let (code, mut claim) = call(&admin, "POST", &claims, Some(&claim)).await;
    assert_eq!(code, 201, "{claim}");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": ns},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "g", "resourceClaimName": "late-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let (code, pod) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{pod}");
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    let failed = events(&log, "claim-prepare-failed");
    let error = failed[0]["error"].as_str().unwrap_or("");
    assert!(
        error.contains(&format!("is not allowed to use ResourceClaim late-gpu ({})", text(&claim["metadata"]["uid"]))),
        "{}",
        log.seen()
    );
    assert!(events(&log, "claim-allocated").is_empty(), "the node allocated nothing itself: {}", log.seen());

    // Allocated on the node's last device and reserved for the pod, as a
    // scheduler writes it: the next attempt reads it again and prepares it.
    let (_, slices) = call(
        &admin,
        "GET",
        &format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node}"),
        None,
    )
    .await;
    let slice = &slices["items"][0]["spec"];
    let device = slice["devices"].as_array().and_then(|d| d.last()).map(|d| d["name"].clone()).unwrap_or_default();
    let pool = slice["pool"]["name"].clone();
    claim["status"] = json!({
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]}},
        "reservedFor": [{"resource": "pods", "name": "late", "uid": pod["metadata"]["uid"]}],
    });
    let (code, claim) = call(&admin, "PUT", &format!("{claims}/late-gpu/status"), Some(&claim)).await;
    assert_eq!(code, 200, "{claim}");
    running(&admin, ns, "late", node).await;
    let prepared = events(&log, "claim-prepared");
    let p =
        prepared.iter().find(|e| e["claim"] == format!("{ns}/late-gpu")).unwrap_or_else(|| panic!("{}", log.seen()));
    assert_eq!(p["devices"], json!([format!("{driver}/{}/{}", text(&pool), text(&device))]), "{p}");

    delete_and_wait_gone(&admin, ns, "late").await;
    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    stop_tailed(serve, serve_log).await.expect_code(0);
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// DRA-backed extended resources (KEP-5004) on the dpctl node of a real
/// cluster: a DeviceClass with `extendedResourceName`, a pod asking for that
/// resource (no device plugin serves it); kube-scheduler makes the special
/// claim, allocates it from the slice `dpctl dra serve` publishes as the node,
/// names it in the pod's `status.extendedResourceClaimStatus` and binds the
/// pod; the mock kubelet admits it (the resource is not refused), prepares
/// exactly that claim as written, and hands PodResources the claim for the
/// container that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_for_a_dra_backed_extended_resource_runs_as_the_real_scheduler_placed_it() {
    let Some(cp) = control_plane() else { return };
    let node = "cp-node-extended";
    let (ns, driver) = ("cp-kubelet-ext", "ext.kubelet.dpctl.example.com");
    let t = DraTree::new();
    let (kubelet, log, serve, serve_log) = dra_node(cp, &t, node, driver, &[]).await;
    let admin = api(&cp.kubeconfig);

    namespace(&admin, ns).await;
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ext-gpu-cp"},
        "spec": {"extendedResourceName": "example.com/ext-gpu-cp",
            "selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let (code, body) = call(&admin, "POST", "/apis/resource.k8s.io/v1/deviceclasses", Some(&class)).await;
    assert!(code == 201 || code == 409, "{body}");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "containers": [
            {"name": "main", "image": "registry.example.com/app:1", "resources": {"limits": {"example.com/ext-gpu-cp": "2"}}},
            {"name": "plain", "image": "registry.example.com/app:1"}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{body}");
    let pod = running(&admin, ns, "trainer", node).await;

    let st = &pod["status"]["extendedResourceClaimStatus"];
    let claim_name = st["resourceClaimName"].as_str().unwrap_or_else(|| panic!("{pod}")).to_string();
    assert_eq!(st["requestMappings"][0]["containerName"], "main", "{pod}");
    let (_, claim) =
        call(&admin, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}"), None)
            .await;
    let results = claim["status"]["allocation"]["devices"]["results"].as_array().unwrap_or_else(|| panic!("{claim}"));
    assert_eq!(results.len(), 2, "{claim}");
    let mut written: Vec<String> = results
        .iter()
        .map(|r| format!("{driver}/{}/{}", r["pool"].as_str().unwrap(), r["device"].as_str().unwrap()))
        .collect();
    written.sort();
    let prepared = events(&log, "claim-prepared");
    let p = prepared
        .iter()
        .find(|e| e["claim"] == format!("{ns}/{claim_name}"))
        .unwrap_or_else(|| panic!("{}", log.seen()));
    let mut got: Vec<String> =
        p["devices"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
    got.sort();
    assert_eq!(got, written, "{p}");
    assert!(events(&log, "claim-allocated").is_empty(), "the kubelet allocated nothing itself: {}", log.seen());
    assert!(events(&log, "pod-rejected").is_empty(), "{}", log.seen());
    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    let v: Value = serde_json::from_str(&pr.stdout).unwrap();
    let listed = v["podResources"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "trainer"))
        .unwrap_or_else(|| panic!("{v}"));
    let main = listed["containers"].as_array().unwrap().iter().find(|c| c["name"] == "main").unwrap();
    assert_eq!(main["dynamicResources"][0]["claimName"], claim_name.as_str(), "{v}");

    delete_and_wait_gone(&admin, ns, "trainer").await;
    assert!(
        events(&log, "claim-unprepared").iter().any(|e| e["claim"] == format!("{ns}/{claim_name}")),
        "{}",
        log.seen()
    );
    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    stop_tailed(serve, serve_log).await.expect_code(0);
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// `dra serve --binding-conditions` against the real scheduler (KEP-5007):
/// its devices are published with binding conditions kube-apiserver
/// accepts, kube-scheduler allocates one and stamps the allocation, then
/// holds the pod in PreBind (not bound, so the node prepares nothing) until
/// a controller — here the test — sets the condition True in the claim's
/// `status.devices`; then the pod is bound and the mock kubelet prepares
/// the claim as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_scheduler_binds_a_pod_only_once_dra_serves_binding_conditions_are_true() {
    let Some(cp) = control_plane() else { return };
    let node = "cp-node-binding";
    let (ns, driver) = ("cp-binding", "gpu.binding.dpctl.example.com");
    let t = DraTree::new();
    let binding =
        ["--binding-conditions", "example.com/attached", "--binding-failure-conditions", "example.com/failed"];
    let (kubelet, log, serve, serve_log) = dra_node(cp, &t, node, driver, &binding).await;
    let admin = api(&cp.kubeconfig);
    let (_, slices) = call(
        &admin,
        "GET",
        &format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node}"),
        None,
    )
    .await;
    let device = &slices["items"][0]["spec"]["devices"][0];
    assert_eq!(device["bindingConditions"], json!(["example.com/attached"]), "kept by kube-apiserver: {slices}");
    assert_eq!(device["bindingFailureConditions"], json!(["example.com/failed"]), "{slices}");

    one_gpu_template(&admin, ns, driver).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "attached", "namespace": ns},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{body}");

    // Allocated and reserved, stamped, and the pod held: not bound.
    let claim = until(60, "the claim allocated", || {
        let admin = admin.clone();
        async move {
            let (_, l) =
                call(&admin, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"), None).await;
            l["items"].as_array()?.iter().find(|c| c["status"]["allocation"].is_object()).cloned()
        }
    })
    .await;
    let allocation = &claim["status"]["allocation"];
    assert_eq!(allocation["devices"]["results"][0]["bindingConditions"], json!(["example.com/attached"]), "{claim}");
    assert!(allocation["allocationTimestamp"].is_string(), "{claim}");
    let (_, p) = call(&admin, "GET", &format!("/api/v1/namespaces/{ns}/pods/attached"), None).await;
    assert!(p["spec"]["nodeName"].is_null(), "bound before its binding conditions: {p}");
    assert!(events(&log, "claim-prepared").is_empty(), "{}", log.seen());

    // The condition True: bound, Running, prepared as written.
    let name = claim["metadata"]["name"].as_str().unwrap().to_string();
    let r = &allocation["devices"]["results"][0];
    let mut claim = claim.clone();
    claim["status"]["devices"] = json!([{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
        "conditions": [{"type": "example.com/attached", "status": "True", "reason": "Attached", "message": "",
            "lastTransitionTime": "2026-12-05T00:00:00Z"}]}]);
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}/status");
    let (code, body) = call(&admin, "PUT", &path, Some(&claim)).await;
    assert_eq!(code, 200, "{body}");
    running(&admin, ns, "attached", node).await;
    let written = format!("{driver}/{}/{}", r["pool"].as_str().unwrap(), r["device"].as_str().unwrap());
    let prepared = events(&log, "claim-prepared");
    let p = prepared.iter().find(|e| e["claim"] == format!("{ns}/{name}")).unwrap_or_else(|| panic!("{}", log.seen()));
    assert_eq!(p["devices"], json!([written]), "{p}");
    // A claim the real scheduler allocated is the scheduler's business: the node does not wait again.
    assert!(events(&log, "claim-binding-pending").is_empty(), "{}", log.seen());

    delete_and_wait_gone(&admin, ns, "attached").await;
    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    stop_tailed(serve, serve_log).await.expect_code(0);
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// `mock-kubelet --nodes 3` from one process, each node with its own
/// credentials (`{node}` in --kubeconfig), a simulated DRA driver of 2
/// devices publishing its ResourceSlice (pool: the node) and a device plugin
/// of 2: the real scheduler places 6 pods with claims from a template on
/// them, each Running on a fleet node, prepared as allocated, every device
/// taken once, each node's PodResources listing its own pods' devices; a
/// pod with the plugin's resource runs too; deleted, all go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_from_one_process_run_pods_with_claims_scheduled_by_the_real_scheduler() {
    let Some(cp) = control_plane() else { return };
    let (ns, driver, resource, label) =
        ("cp-fleet", "gpu.fleet.dpctl.example.com", "example.com/fleet-gpu", "cp-fleet");
    let t = DraTree::new();
    let admin = api(&cp.kubeconfig);
    // A slice left on cp-fleet-0 by a driver that is gone: the node wipes it at start.
    let stale = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "cp-fleet-0-stale"},
        "spec": {"driver": "stale.fleet.dpctl.example.com", "nodeName": "cp-fleet-0",
            "pool": {"name": "cp-fleet-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "dev-0"}]}});
    let (code, body) = call(&admin, "POST", "/apis/resource.k8s.io/v1/resourceslices", Some(&stale)).await;
    assert_eq!(code, 201, "{body}");
    let kc = cp.dir.join("node-{node}.kubeconfig");
    let mut child = dpctl_cmd(&[
        "mock-kubelet",
        "--plugin-dir",
        s(&t.p("device-plugins")),
        "--kubeconfig",
        s(&kc),
        "--node-name",
        "cp-fleet",
        "--nodes",
        "3",
        "--node-dra-driver",
        &format!("{driver}=2"),
        "--node-devices",
        &format!("{resource}=2"),
        "--node-labels",
        &format!("fleet.dpctl.example.com/name={label}"),
        "--log-format",
        "json",
    ]);
    child.stdout(std::process::Stdio::piped());
    let mut child = child.spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    log.wait_for("\"event\":\"node-registered\"", 3).await;
    until(30, "the stale slice wiped", || {
        let admin = admin.clone();
        async move {
            let (code, _) = call(&admin, "GET", "/apis/resource.k8s.io/v1/resourceslices/cp-fleet-0-stale", None).await;
            (code == 404).then_some(())
        }
    })
    .await;
    // Its node says so (the event follows the DELETE's answer).
    until(10, "the node's wipe event", || {
        let wiped = events(&log, "dra-node-slices-wiped");
        let seen = wiped.iter().any(|e| {
            e["node"] == "cp-fleet-0" && e["slices"].as_array().is_some_and(|l| l.contains(&json!("cp-fleet-0-stale")))
        });
        async move { seen.then_some(()) }
    })
    .await;
    let nodes: Vec<String> = (0..3).map(|i| format!("cp-fleet-{i}")).collect();
    for node in &nodes {
        // Ready with the plugin's devices allocatable, the label set; its slice published with its identity.
        until(30, &format!("{node} Ready with its devices"), || {
            let (admin, node) = (admin.clone(), node.clone());
            async move {
                let (_, n) = call(&admin, "GET", &format!("/api/v1/nodes/{node}"), None).await;
                let ready =
                    n["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
                (ready && n["status"]["allocatable"][resource] == "2").then_some(())
            }
        })
        .await;
        let (_, n) = call(&admin, "GET", &format!("/api/v1/nodes/{node}"), None).await;
        assert_eq!(n["metadata"]["labels"]["fleet.dpctl.example.com/name"], label, "{n}");
        let patch = json!({"spec": {"taints": null}});
        let (code, body) =
            kube::request_as(&admin, "PATCH", &format!("/api/v1/nodes/{node}"), kube::MERGE_PATCH, Some(&patch), T)
                .await
                .unwrap();
        assert_eq!(code, 200, "{body}");
    }
    let slices = until(30, "a ResourceSlice per node", || {
        let admin = admin.clone();
        async move {
            let path = format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3D{driver}");
            let (_, l) = call(&admin, "GET", &path, None).await;
            let items = l["items"].as_array()?.clone();
            (items.len() == 3).then_some(items)
        }
    })
    .await;
    for sl in &slices {
        assert_eq!(sl["spec"]["pool"]["name"], sl["spec"]["nodeName"], "a node-local pool named after its node: {sl}");
        assert_eq!(sl["spec"]["devices"].as_array().map(Vec::len), Some(2), "{sl}");
    }

    one_gpu_template(&admin, ns, driver).await;
    let names: Vec<String> = (0..6).map(|i| format!("c{i}")).collect();
    for name in &names {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeSelector": {"fleet.dpctl.example.com/name": label},
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "registry.example.com/app:1",
                    "resources": {"claims": [{"name": "g"}]}}]}});
        let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
        assert_eq!(code, 201, "{body}");
    }
    let dp = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dp", "namespace": ns},
        "spec": {"nodeSelector": {"fleet.dpctl.example.com/name": label},
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"limits": {resource: "1"}}}]}});
    let (code, body) = call(&admin, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&dp)).await;
    assert_eq!(code, 201, "{body}");

    // Every pod Running on a fleet node, its claim's device on that node's pool; no device twice.
    let mut taken = std::collections::BTreeSet::new();
    let mut on: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for name in &names {
        let p = until(60, &format!("pod {name} Running"), || {
            let (admin, path) = (admin.clone(), format!("/api/v1/namespaces/{ns}/pods/{name}"));
            async move {
                let (_, p) = call(&admin, "GET", &path, None).await;
                (p["status"]["phase"] == "Running").then_some(p)
            }
        })
        .await;
        let node = p["spec"]["nodeName"].as_str().unwrap().to_string();
        assert!(nodes.contains(&node), "on a fleet node: {p}");
        let claim = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap().to_string();
        let (_, c) =
            call(&admin, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim}"), None)
                .await;
        let r = &c["status"]["allocation"]["devices"]["results"][0];
        assert_eq!(r["pool"], node.as_str(), "allocated from the pod's node's pool: {c}");
        let device = r["device"].as_str().unwrap().to_string();
        assert!(taken.insert((node.clone(), device.clone())), "{node}/{device} allocated twice");
        on.entry(node.clone()).or_default().push(device);
    }
    assert_eq!(taken.len(), 6);
    running(&admin, ns, "dp", &{
        let (_, p) = call(&admin, "GET", &format!("/api/v1/namespaces/{ns}/pods/dp"), None).await;
        p["spec"]["nodeName"].as_str().unwrap_or_default().to_string()
    })
    .await;

    // Each node's own PodResources: its pods, their devices, none twice.
    for (node, devices) in &on {
        let sock = t.root.join(node).join("pod-resources/kubelet.sock");
        let pr = dpctl(&["podresources", "list", "--socket", s(&sock), "-o", "json"]).await;
        pr.expect_code(0);
        let v: Value = serde_json::from_str(&pr.stdout).unwrap();
        let mut listed: Vec<String> = v["podResources"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["containers"][0]["dynamicResources"].as_array().cloned().unwrap_or_default())
            .flat_map(|d| d["claimResources"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["deviceName"].as_str().map(str::to_string))
            .collect();
        listed.sort();
        let mut want = devices.clone();
        want.sort();
        assert_eq!(listed, want, "{node}'s PodResources: {v}");
    }

    for name in names.iter().map(String::as_str).chain(["dp"]) {
        delete_and_wait_gone(&admin, ns, name).await;
    }
    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    stop_tailed(child, log).await.expect_code(0);
}

/// `dpctl bench cluster` run small against the real control plane: every
/// pod Running on the bench's nodes, then gone; what it made is cleaned up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_bench_runs_small_against_the_real_control_plane() {
    let Some(cp) = control_plane() else { return };
    let kc = cp.dir.join("node-{node}.kubeconfig");
    let r = dpctl(&[
        "bench",
        "cluster",
        "--kubeconfig",
        s(&cp.kubeconfig),
        "--node-kubeconfig",
        s(&kc),
        "--node-name",
        "cp-bench",
        "--nodes",
        "3",
        "--devices",
        "2",
        "--pods",
        "6",
        "--namespace",
        "cp-bench",
        "-o",
        "json",
    ])
    .await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
    assert_eq!((v["running"].as_u64(), v["failed"].as_u64()), (Some(6), Some(0)), "{v}");
    assert_eq!(v["nodesUsed"], 3, "2 devices a node: every node runs 2: {v}");
    assert!(v["allGoneMs"].is_number() && v["peakRssMib"].is_number(), "{v}");
    assert_eq!(v["devicesVia"], "claims", "{v}");
    let admin = api(&cp.kubeconfig);
    for i in 0..3 {
        let (code, _) = call(&admin, "GET", &format!("/api/v1/nodes/cp-bench-{i}"), None).await;
        assert_eq!(code, 404, "the bench's Nodes deleted at the end");
    }
    let (_, l) = call(&admin, "GET", "/api/v1/namespaces/cp-bench/pods", None).await;
    assert_eq!(l["items"].as_array().map(Vec::len), Some(0), "{l}");
}
