//! A second node on dpctl's own control plane (#47 item 3): `dpctl
//! mock-kubelet --api-server` is the control plane, and a second `dpctl
//! mock-kubelet --kubeconfig <first's root>/kubeconfig --node-name node-b`
//! joins it as a node — its Node registered by POST, its Lease renewed, the
//! pods bound to it listed and watched, their status patched, deleted with
//! grace 0 — with `dpctl serve` and `dpctl dra serve` on node-b. Pods are
//! created through the API (HTTPS, the first's bearer token) with
//! `spec.nodeName: node-b`; their claims are made and allocated by the
//! control plane's controllers. Every wait is on a log event of a process,
//! with a deadline; the API's state is read once the event says it is there.

use crate::support::*;
use dpctl::client::kube::{self, ApiServer};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const NODE: &str = "node-b";
const T: Duration = Duration::from_secs(20);

async fn call(api: &ApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    kube::request(api, method, path, body, T).await.unwrap()
}

/// The JSON log lines of `event`, in order.
fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// Wait (at most `secs`) until a log line of `event` satisfies `f`.
async fn wait_event(tail: &mut Tail, secs: u64, event: &str, f: impl Fn(&Value) -> bool) -> Value {
    let needle = format!("\"event\":\"{event}\"");
    let found = |text: &str| {
        text.lines()
            .filter(|l| l.contains(&needle))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| f(v))
    };
    if let Err(seen) = tail.wait_until(secs, |text| found(text).is_some()).await {
        panic!("no {event} event as wanted within {secs}s; the log:\n{seen}");
    }
    found(&tail.seen()).unwrap()
}

/// The two nodes: the first with its API server (on `a`), node-b joined to it (on `b`).
struct Cluster {
    first: tokio::process::Child,
    first_log: Tail,
    node_b: tokio::process::Child,
    log: Tail,
    kubeconfig: PathBuf,
    api: ApiServer,
}

async fn cluster(a: &DraTree, b: &DraTree) -> Cluster {
    cluster_with(a, b, &[], &[]).await
}

/// [`cluster`] with more arguments for the first mock kubelet (its control plane's) and for node-b.
async fn cluster_with(a: &DraTree, b: &DraTree, first_args: &[&str], b_args: &[&str]) -> Cluster {
    let mut args = vec!["--api-server", "127.0.0.1:0"];
    args.extend_from_slice(first_args);
    let mut first = mock_kubelet_on(&a.root, &args).spawn().unwrap();
    let mut first_log = Tail::stdout(&mut first);
    first_log.wait_for("\"event\":\"api-server\"", 1).await;
    // The kubeconfig the first writes under its root is all node-b needs.
    let kubeconfig = a.p("kubeconfig");
    let api = kube::load_kubeconfig(&kubeconfig).unwrap();
    let mut args = vec!["--kubeconfig", s(&kubeconfig), "--node-name", NODE];
    args.extend_from_slice(b_args);
    let mut node_b = mock_kubelet_on(&b.root, &args).spawn().unwrap();
    let mut log = Tail::stdout(&mut node_b);
    let registered = wait_event(&mut log, 20, "node-registered", |e| e["node"] == NODE).await;
    assert_eq!(registered["existed"], false, "created by its POST: {registered}");
    // The first status write follows the first Lease renewal.
    wait_event(&mut log, 20, "node-status", |e| e["node"] == NODE).await;
    Cluster { first, first_log, node_b, log, kubeconfig, api }
}

impl Cluster {
    /// `dpctl dra serve` of `driver` on node-b (kubelet root `root`),
    /// publishing through the cluster; returned once its slice is published
    /// and node-b registered it.
    async fn driver_on_b(&mut self, root: &std::path::Path, driver: &str) -> (tokio::process::Child, Tail) {
        let mut serve = dra_serve_publishing(root, driver, &self.kubeconfig, NODE);
        serve.stdout(std::process::Stdio::piped());
        let mut serve = serve.spawn().unwrap();
        let mut serve_log = Tail::stdout(&mut serve);
        serve_log.wait_for("\"event\":\"resourceslice\"", 1).await;
        wait_event(&mut self.log, 20, "dra-registered", |e| e["driver"] == driver).await;
        (serve, serve_log)
    }

    /// The DeviceClass `driver` (its devices) and the template `one-gpu` in
    /// `ns` asking for one device as `exactly` says.
    async fn class_and_template(&self, driver: &str, ns: &str, exactly: Value) {
        let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
        let (code, body) = call(&self.api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", Some(&class)).await;
        assert_eq!(code, 201, "{body}");
        let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}});
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates");
        let (code, body) = call(&self.api, "POST", &path, Some(&template)).await;
        assert_eq!(code, 201, "{body}");
    }

    /// Create pod `pod` through the API; its UID.
    async fn create(&self, pod: &Value) -> String {
        let ns = pod["metadata"]["namespace"].as_str().unwrap();
        let (code, body) = call(&self.api, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(pod)).await;
        assert_eq!(code, 201, "{body}");
        body["metadata"]["uid"].as_str().unwrap().to_string()
    }

    /// Wait until node-b wrote pod `uid` Running; the pod as the API serves it then.
    async fn running(&mut self, ns: &str, name: &str, uid: &str) -> Value {
        wait_event(&mut self.log, 30, "cluster-pod-status", |e| e["uid"] == uid && e["phase"] == "Running").await;
        let (code, pod) = call(&self.api, "GET", &format!("/api/v1/namespaces/{ns}/pods/{name}"), None).await;
        assert_eq!(code, 200, "{pod}");
        assert_eq!((pod["spec"]["nodeName"].as_str(), pod["status"]["phase"].as_str()), (Some(NODE), Some("Running")));
        let conditions = pod["status"]["conditions"].as_array().unwrap_or_else(|| panic!("{pod}"));
        for t in ["Initialized", "ContainersReady", "Ready"] {
            assert!(conditions.iter().any(|c| c["type"] == t && c["status"] == "True"), "{t}: {pod}");
        }
        let cs = &pod["status"]["containerStatuses"][0];
        assert!(cs["state"]["running"].is_object() && cs["ready"] == true, "{pod}");
        assert_eq!(pod["status"]["hostIP"], "127.0.0.1", "{pod}");
        pod
    }

    /// Delete pod `ns/name` as a user does (its grace period); wait until node-b deleted it; it is gone.
    async fn delete(&mut self, ns: &str, name: &str, uid: &str) {
        let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
        let (code, body) = call(&self.api, "DELETE", &path, None).await;
        assert_eq!(code, 200, "{body}");
        assert!(body["metadata"]["deletionTimestamp"].is_string(), "graceful: the pod stays for its node: {body}");
        wait_event(&mut self.log, 30, "cluster-pod-deleted", |e| e["uid"] == uid).await;
        let (code, body) = call(&self.api, "GET", &path, None).await;
        assert_eq!(code, 404, "{body}");
    }

    async fn stop(self) {
        assert!(events(&self.log, "cluster-error").is_empty(), "{}", self.log.seen());
        stop_tailed(self.node_b, self.log).await.expect_code(0);
        stop_tailed(self.first, self.first_log).await.expect_code(0);
    }
}

/// node-b's PodResources, as JSON.
async fn pod_resources(b: &DraTree) -> Value {
    let pr = dpctl(&["podresources", "list", "--socket", s(&b.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    serde_json::from_str(&pr.stdout).unwrap()
}

fn listed<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["podResources"].as_array().and_then(|a| a.iter().find(|p| p["name"] == name))
}

/// node-b joins the first mock kubelet's API server with the kubeconfig it
/// wrote; `dpctl serve` on node-b shows in node-b's Node; a pod created
/// through the API with `spec.nodeName: node-b` runs there with a device
/// (PodResources says which) and, deleted, frees it and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_mock_kubelet_joins_the_first_ones_control_plane_and_runs_its_pods() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let resource = "example.com/gpu";

    // Its Node (status as registered) and its Lease, in the first's API server.
    let (code, n) = call(&c.api, "GET", &format!("/api/v1/nodes/{NODE}"), None).await;
    assert_eq!(code, 200, "{n}");
    assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], NODE, "{n}");
    let ready =
        n["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(ready, "{n}");
    let (code, l) =
        call(&c.api, "GET", &format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"), None)
            .await;
    assert_eq!(code, 200, "{l}");
    assert_eq!(
        (l["spec"]["holderIdentity"].as_str(), l["metadata"]["ownerReferences"][0]["uid"].as_str()),
        (Some(NODE), n["metadata"]["uid"].as_str()),
        "{l}"
    );
    let (_, nodes) = call(&c.api, "GET", "/api/v1/nodes", None).await;
    let names: Vec<&str> =
        nodes["items"].as_array().unwrap().iter().filter_map(|n| n["metadata"]["name"].as_str()).collect();
    assert!(names.contains(&"dpctl-node") && names.contains(&NODE), "{names:?}");

    // A device plugin on node-b: node-b's Node shows its devices.
    let mut plugin = serve_cmd(&b.p("device-plugins"), &["--resource", resource, "--count", "2"]);
    plugin.stdout(std::process::Stdio::null());
    let plugin = plugin.spawn().unwrap();
    wait_event(&mut c.log, 30, "node-status", |e| e["allocatable"][resource] == "2").await;
    let (_, n) = call(&c.api, "GET", &format!("/api/v1/nodes/{NODE}"), None).await;
    assert_eq!(
        (n["status"]["capacity"][resource].as_str(), n["status"]["allocatable"][resource].as_str()),
        (Some("2"), Some("2")),
        "{n}"
    );

    let ns = "team";
    let pod = |name: &str, count: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"limits": {resource: count}}}]}})
    };
    let uid = c.create(&pod("gpu-user", "1")).await;
    c.running(ns, "gpu-user", &uid).await;
    let v = pod_resources(&b).await;
    let p = listed(&v, "gpu-user").unwrap_or_else(|| panic!("{v}"));
    let d = &p["containers"][0]["devices"][0];
    assert_eq!((d["resourceName"].as_str(), d["deviceIds"].as_array().map(Vec::len)), (Some(resource), Some(1)), "{v}");

    c.delete(ns, "gpu-user", &uid).await;
    assert!(listed(&pod_resources(&b).await, "gpu-user").is_none());
    // Both devices free again: a pod asking for two runs, then goes.
    let uid = c.create(&pod("two-gpus", "2")).await;
    c.running(ns, "two-gpus", &uid).await;
    c.delete(ns, "two-gpus", &uid).await;

    stop_child(plugin).await;
    c.stop().await;
}

/// `dpctl dra serve` on node-b publishes its ResourceSlice through the same
/// kubeconfig; a pod created through the API with a claim from a template
/// and `spec.nodeName: node-b` gets its claim from the control plane (made
/// from the template, owned by the pod, allocated from node-b's slice,
/// reserved for it) and node-b prepares exactly that device without
/// allocating anything itself; deleted, the claim is unprepared, the pod
/// goes, and the claim with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_claim_runs_on_the_second_node_allocated_by_the_first_ones_control_plane() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let driver = "gpu.own.dpctl.example.com";
    let (serve, serve_log) = c.driver_on_b(&b.root, driver).await;

    let ns = "ml";
    c.class_and_template(driver, ns, json!({"deviceClassName": driver})).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"nodeName": NODE, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let uid = c.create(&pod).await;
    let pod = c.running(ns, "trainer", &uid).await;

    // The claim the control plane made and allocated on node-b's slice.
    let claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_else(|| panic!("{pod}"))
        .to_string();
    assert!(claim_name.starts_with("trainer-g-"), "{pod}");
    let claim_path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}");
    let (_, claim) = call(&c.api, "GET", &claim_path, None).await;
    assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], uid.as_str(), "{claim}");
    assert_eq!(claim["status"]["reservedFor"], json!([{"resource": "pods", "name": "trainer", "uid": uid}]), "{claim}");
    let a_ = &claim["status"]["allocation"];
    assert_eq!(a_["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], NODE, "{claim}");
    let r = &a_["devices"]["results"][0];
    let (_, slices) = call(
        &c.api,
        "GET",
        &format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{NODE}"),
        None,
    )
    .await;
    let pool = slices["items"][0]["spec"]["pool"]["name"].as_str().unwrap_or_else(|| panic!("{slices}"));
    assert_eq!((r["driver"].as_str(), r["pool"].as_str()), (Some(driver), Some(pool)), "{claim}");
    let written = format!("{driver}/{pool}/{}", r["device"].as_str().unwrap());

    // node-b prepared exactly that device, and allocated nothing itself.
    let prepared = events(&c.log, "claim-prepared");
    let p = prepared
        .iter()
        .find(|e| e["claim"] == format!("{ns}/{claim_name}"))
        .unwrap_or_else(|| panic!("{}", c.log.seen()));
    assert_eq!((&p["devices"], &p["uid"]), (&json!([written]), &claim["metadata"]["uid"]), "{p}");
    assert!(events(&c.log, "claim-allocated").is_empty(), "{}", c.log.seen());
    let v = pod_resources(&b).await;
    let listed_claim = &listed(&v, "trainer").unwrap_or_else(|| panic!("{v}"))["containers"][0]["dynamicResources"][0];
    assert_eq!(listed_claim["claimName"], claim_name.as_str(), "{v}");
    assert_eq!(listed_claim["claimResources"][0]["deviceName"], r["device"], "{v}");

    // Deleted: unprepared before the pod goes; the claim goes with it.
    c.delete(ns, "trainer", &uid).await;
    let seen = c.log.seen();
    let (u, d) =
        (seen.find("\"event\":\"claim-unprepared\"").unwrap(), seen.find("\"event\":\"cluster-pod-deleted\"").unwrap());
    assert!(u < d, "unprepared before the pod is deleted: {seen}");
    let (code, body) = call(&c.api, "GET", &claim_path, None).await;
    assert_eq!(code, 404, "the pod's claim goes with it: {body}");
    assert!(listed(&pod_resources(&b).await, "trainer").is_none());

    // A static pod of the first node: node-b's devices are not its own
    // (another node's slices are left out), so its claim cannot be allocated.
    let class = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: first-gpu}}\nspec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{driver}\"'}}\n"
    );
    a.write("class.yaml", &class);
    a.write("template.yaml", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: first-gpu, namespace: first}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {deviceClassName: first-gpu}\n");
    c.first_log.wait_for("\"event\":\"dra-object\"", 2).await;
    a.write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: local, namespace: first, uid: local-uid}\nspec:\n  resourceClaims: [{name: g, resourceClaimTemplateName: first-gpu}]\n  containers: [{name: main, resources: {claims: [{name: g}]}}]\n");
    let failed = wait_event(&mut c.first_log, 20, "claim-prepare-failed", |e| e["pod"] == "first/local").await;
    assert!(failed["error"].as_str().unwrap().contains("is not allocated"), "{failed}");
    assert!(events(&c.first_log, "claim-allocated").is_empty(), "node-b's device taken: {}", c.first_log.seen());

    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// A pod with a claim from a template (its request's `tolerations`, when
/// any) running on node-b on a device of node-b's driver, the pod holding a
/// finalizer of its own so that, once deleted, its status stays to read;
/// the driver's process, its log, the pod's UID, its claim's name and the
/// device (`driver/pool/device`).
async fn claim_pod_on_b(
    c: &mut Cluster,
    b: &DraTree,
    tolerations: Value,
) -> (tokio::process::Child, Tail, String, String, String) {
    let driver = "gpu.own.dpctl.example.com";
    let (serve, serve_log) = c.driver_on_b(&b.root, driver).await;
    let ns = "ml";
    let mut exactly = json!({"deviceClassName": driver});
    if !tolerations.is_null() {
        exactly["tolerations"] = tolerations;
    }
    c.class_and_template(driver, ns, exactly).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": ns, "finalizers": ["example.com/keep"]},
        "spec": {"nodeName": NODE, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let uid = c.create(&pod).await;
    let pod = c.running(ns, "trainer", &uid).await;
    let claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_else(|| panic!("{pod}"))
        .to_string();
    let (_, v) =
        call(&c.api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim}"), None).await;
    let r = &v["status"]["allocation"]["devices"]["results"][0];
    let device =
        format!("{}/{}/{}", r["driver"].as_str().unwrap(), r["pool"].as_str().unwrap(), r["device"].as_str().unwrap());
    (serve, serve_log, uid, claim, device)
}

/// A DeviceTaintRule manifest of the first node selecting `device` (`driver/pool/device`), NoExecute.
fn no_execute_rule(device: &str, time_added: Option<&str>) -> String {
    let mut parts = device.splitn(3, '/');
    let (d, p, x) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    let added = time_added.map(|t| format!(", timeAdded: \"{t}\"")).unwrap_or_default();
    format!(
        "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata: {{name: xid}}\nspec:\n  deviceSelector: {{driver: {d}, pool: {p}, device: {x}}}\n  taint: {{key: gpu.example.com/xid, value: \"79\", effect: NoExecute{added}}}\n"
    )
}

/// The evicted pod, after node-b deleted it: still there for its finalizer,
/// with the eviction controller's condition; the Event it recorded; then
/// the finalizer gone, the pod and its claim go.
async fn evicted_as_upstream(c: &mut Cluster, uid: &str, claim: &str) {
    let path = "/api/v1/namespaces/ml/pods/trainer";
    let deleted = wait_event(&mut c.log, 30, "cluster-pod-deleted", |e| e["uid"] == uid).await;
    assert_eq!(deleted["pod"], "ml/trainer");
    let seen = c.log.seen();
    let (u, d) =
        (seen.find("\"event\":\"claim-unprepared\"").unwrap(), seen.find("\"event\":\"cluster-pod-deleted\"").unwrap());
    assert!(u < d, "unprepared before the pod is deleted: {seen}");
    let (code, pod) = call(&c.api, "GET", path, None).await;
    assert_eq!(code, 200, "{pod}");
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    let cond = pod["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "DisruptionTarget"))
        .unwrap_or_else(|| panic!("{pod}"));
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str(), cond["message"].as_str()),
        (
            Some("True"),
            Some("DeletionByDeviceTaintManager"),
            Some("Device Taint manager: deleting due to NoExecute taint")
        ),
        "{pod}"
    );
    let (_, events) = call(&c.api, "GET", "/api/v1/namespaces/ml/events", None).await;
    let e = events["items"]
        .as_array()
        .and_then(|i| i.iter().find(|e| e["involvedObject"]["uid"] == uid))
        .unwrap_or_else(|| panic!("{events}"));
    assert_eq!(
        (e["reason"].as_str(), e["message"].as_str(), e["source"]["component"].as_str()),
        (Some("DeviceTaintManagerEviction"), Some("Marking for deletion"), Some("device-taint-eviction-controller")),
        "{e}"
    );
    let patch = json!({"metadata": {"finalizers": null}});
    let (code, body) =
        kube::request_as(&c.api, "PATCH", path, "application/merge-patch+json", Some(&patch), T).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(call(&c.api, "GET", path, None).await.0, 404);
    let claim_path = format!("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/{claim}");
    assert_eq!(call(&c.api, "GET", &claim_path, None).await.0, 404, "the pod's claim goes with it");
}

/// A NoExecute DeviceTaintRule (a manifest of the first node) on the device
/// a pod of node-b uses: the control plane's device-taint eviction
/// controller sets the pod's DisruptionTarget condition, records its Event
/// and deletes it; the first node reports `pod-evicted` (claim, device,
/// taint); node-b stops it, unprepares its claim and deletes it for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_taint_rule_on_a_device_of_node_b_evicts_its_pod_through_the_control_plane() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let (serve, serve_log, uid, claim, device) = claim_pod_on_b(&mut c, &b, Value::Null).await;
    // node-b's pods API, watched: the pod shows the condition while it goes.
    let mut w = dpctl_cmd(&["pods", "watch", "--socket", s(&b.p("pods-api/pods-api.sock")), "-o", "json"]);
    w.stdout(std::process::Stdio::piped());
    let mut watch = w.spawn().unwrap();
    let mut watched = Tail::stdout(&mut watch);
    watched.wait_for("INITIAL_SYNC_COMPLETE", 1).await;
    a.write("rule.yaml", &no_execute_rule(&device, None));
    let ev = wait_event(&mut c.first_log, 30, "pod-evicted", |e| e["pod"] == uid.as_str()).await;
    assert_eq!(
        (ev["claim"].as_str(), ev["device"].as_str(), ev["taint"].as_str()),
        (Some(format!("ml/{claim}").as_str()), Some(device.as_str()), Some("gpu.example.com/xid=79:NoExecute")),
        "{ev}"
    );
    assert_eq!(
        (ev["reason"].as_str(), ev["conditionReason"].as_str()),
        (Some("DeviceTaintManagerEviction"), Some("DeletionByDeviceTaintManager")),
        "{ev}"
    );
    assert_eq!(ev["timeAdded"], ev["evictAt"], "no toleration: at once: {ev}");
    evicted_as_upstream(&mut c, &uid, &claim).await;
    assert!(events(&c.log, "pod-evicted").is_empty(), "node-b decides nothing: {}", c.log.seen());
    watched.wait_for("\"DELETED\"", 1).await;
    let shown = watched.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|e| {
        e["type"] == "MODIFIED"
            && e["object"]["metadata"]["uid"] == uid.as_str()
            && e["object"]["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| c["type"] == "DisruptionTarget" && c["reason"] == "DeletionByDeviceTaintManager")
            })
    });
    assert!(shown, "node-b's pods API shows the eviction: {}", watched.seen());
    stop_child(watch).await;

    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// The request tolerates the taint for 60 s and the rule's taint was added
/// 52 s ago: the pod stays, then goes at timeAdded + 60 s (the controller's
/// timer, no write needed), not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toleration_with_seconds_delays_the_control_planes_eviction_of_a_pod_of_node_b() {
    use dpctl::core::time::{parse_rfc3339, rfc3339_nano};
    use std::time::SystemTime;
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let tolerations =
        json!([{"key": "gpu.example.com/xid", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]);
    let (serve, serve_log, uid, claim, device) = claim_pod_on_b(&mut c, &b, tolerations).await;
    let now_secs = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let added = rfc3339_nano(SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs - 52));
    let evict_at = rfc3339_nano(SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs + 8));
    a.write("rule.yaml", &no_execute_rule(&device, Some(&added)));
    wait_event(&mut c.first_log, 20, "dra-object", |e| e["key"] == "DeviceTaintRule xid").await;
    let (_, pod) = call(&c.api, "GET", "/api/v1/namespaces/ml/pods/trainer", None).await;
    if SystemTime::now() < parse_rfc3339(&evict_at).unwrap() {
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "tolerated until {evict_at}: {pod}");
    }
    let ev = wait_event(&mut c.first_log, 30, "pod-evicted", |e| e["pod"] == uid.as_str()).await;
    let seen = SystemTime::now();
    assert_eq!(
        (ev["timeAdded"].as_str(), ev["evictAt"].as_str()),
        (Some(added.as_str()), Some(evict_at.as_str())),
        "{ev}"
    );
    assert!(seen >= parse_rfc3339(&evict_at).unwrap(), "evicted before evictAt {evict_at}");
    evicted_as_upstream(&mut c, &uid, &claim).await;

    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// DRA-backed extended resources on node-b (KEP-5004): a DeviceClass with
/// `extendedResourceName`, a pod created through the API with
/// `spec.nodeName: node-b` asking for that resource (no device plugin serves
/// it): the control plane makes the scheduler's special claim
/// (`trainer-extended-resources-XXXXX`, allocated from node-b's slice,
/// reserved) and names it in the pod's `status.extendedResourceClaimStatus`;
/// node-b admits the pod without refusing the resource, prepares exactly
/// that claim as written, and PodResources lists it for the container that
/// asked; deleted, the claim is unprepared and goes with the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_for_a_dra_backed_extended_resource_runs_on_the_second_node() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let driver = "ext.own.dpctl.example.com";
    let (serve, serve_log) = c.driver_on_b(&b.root, driver).await;

    let ns = "ml";
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ext-gpu"},
        "spec": {"extendedResourceName": "example.com/ext-gpu",
            "selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    let (code, body) = call(&c.api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", Some(&class)).await;
    assert_eq!(code, 201, "{body}");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": ns},
        "spec": {"nodeName": NODE, "containers": [
            {"name": "main", "image": "registry.example.com/app:1", "resources": {"limits": {"example.com/ext-gpu": "2"}}},
            {"name": "plain", "image": "registry.example.com/app:1"}]}});
    let uid = c.create(&pod).await;
    let pod = c.running(ns, "trainer", &uid).await;

    let st = &pod["status"]["extendedResourceClaimStatus"];
    assert_eq!(
        st["requestMappings"],
        json!([{"containerName": "main", "resourceName": "example.com/ext-gpu", "requestName": "container-0-request-0"}]),
        "{pod}"
    );
    let claim_name = st["resourceClaimName"].as_str().unwrap_or_else(|| panic!("{pod}")).to_string();
    assert!(claim_name.starts_with("trainer-extended-resources-"), "{pod}");
    let claim_path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}");
    let (_, claim) = call(&c.api, "GET", &claim_path, None).await;
    assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], uid.as_str(), "{claim}");
    let results = claim["status"]["allocation"]["devices"]["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 2, "{claim}");
    let written: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{}/{}/{}",
                r["driver"].as_str().unwrap(),
                r["pool"].as_str().unwrap(),
                r["device"].as_str().unwrap()
            )
        })
        .collect();

    // node-b prepared exactly those devices, allocated nothing and refused nothing.
    let prepared = events(&c.log, "claim-prepared");
    let p = prepared
        .iter()
        .find(|e| e["claim"] == format!("{ns}/{claim_name}"))
        .unwrap_or_else(|| panic!("{}", c.log.seen()));
    let mut got: Vec<String> =
        p["devices"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
    got.sort();
    let mut want = written.clone();
    want.sort();
    assert_eq!(got, want, "{p}");
    assert!(events(&c.log, "claim-allocated").is_empty(), "{}", c.log.seen());
    assert!(events(&c.log, "pod-rejected").is_empty(), "not refused OutOfexample.com/ext-gpu: {}", c.log.seen());
    let v = pod_resources(&b).await;
    let listed_pod = listed(&v, "trainer").unwrap_or_else(|| panic!("{v}"));
    let main = listed_pod["containers"].as_array().unwrap().iter().find(|c| c["name"] == "main").unwrap();
    assert_eq!(main["dynamicResources"][0]["claimName"], claim_name.as_str(), "{v}");
    let plain = listed_pod["containers"].as_array().unwrap().iter().find(|c| c["name"] == "plain").unwrap();
    assert!(plain["dynamicResources"].as_array().is_none_or(Vec::is_empty), "{v}");

    // Deleted: unprepared, and the special claim goes with the pod.
    c.delete(ns, "trainer", &uid).await;
    assert!(events(&c.log, "claim-unprepared").iter().any(|e| e["claim"] == format!("{ns}/{claim_name}")));
    let (code, body) = call(&c.api, "GET", &claim_path, None).await;
    assert_eq!(code, 404, "the special claim goes with its pod: {body}");

    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// The gates of KEP-5729 (DRAWorkloadResourceClaims depends on GenericWorkload; both off by default in 1.37).
const WORKLOAD_GATES: &str = "GenericWorkload=true,DRAWorkloadResourceClaims=true";

/// The reservedFor entry of PodGroup `team` (its UID), as upstream's controller and scheduler write it.
fn team_entry(uid: &Value) -> Value {
    json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team", "uid": uid})
}

/// KEP-5729 on dpctl's own control plane (its gate on): `dra serve` on
/// node-b; claim `group-gpu` written through the API already allocated on
/// node-b's slice and reserved for PodGroup `team` only; pods of `team`
/// (`spec.schedulingGroup.podGroupName`) naming it, bound to node-b. The
/// claim's reservation and what node-b's log says of the pods.
async fn pod_group_claim_on_b(c: &mut Cluster, b: &DraTree) -> (tokio::process::Child, Tail, String, String, Value) {
    let driver = "gpu.own.dpctl.example.com";
    let (serve, serve_log) = c.driver_on_b(&b.root, driver).await;
    let ns = "ml";
    // The PodGroup (the control plane drops a reservation of a PodGroup that is not there).
    let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "team"},
        "spec": {"schedulingPolicy": {"basic": {}}}});
    let (code, group) =
        call(&c.api, "POST", &format!("/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"), Some(&group)).await;
    assert_eq!(code, 201, "{group}");
    let entry = team_entry(&group["metadata"]["uid"]);
    let claims = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims");
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "group-gpu", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}});
    let (code, mut claim) = call(&c.api, "POST", &claims, Some(&claim)).await;
    assert_eq!(code, 201, "{claim}");
    let (_, slices) = call(
        &c.api,
        "GET",
        &format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{NODE}"),
        None,
    )
    .await;
    let spec = &slices["items"][0]["spec"];
    let (pool, device) =
        (spec["pool"]["name"].as_str().unwrap_or_else(|| panic!("{slices}")), &spec["devices"][0]["name"]);
    claim["status"] = json!({
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
        "reservedFor": [entry.clone()]});
    let (code, body) = call(&c.api, "PUT", &format!("{claims}/group-gpu/status"), Some(&claim)).await;
    assert_eq!(code, 200, "{body}");
    let written = format!("{driver}/{pool}/{}", device.as_str().unwrap());
    (serve, serve_log, format!("{claims}/group-gpu"), written, entry)
}

fn member(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": NODE, "schedulingGroup": {"podGroupName": "team"},
            "resourceClaims": [{"name": "g", "resourceClaimName": "group-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}})
}

/// KEP-5729, node-b's gate on (`--feature-gates
/// GenericWorkload=true,DRAWorkloadResourceClaims=true`): two pods of
/// PodGroup `team` using a claim reserved for `team` alone both run on
/// node-b, the claim prepared once as written (nothing allocated by
/// node-b, the pods never added to reservedFor); it is unprepared once the
/// last member goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_pod_group_run_on_a_claim_reserved_for_the_group_with_the_gate_on() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let gates = ["--feature-gates", WORKLOAD_GATES];
    let mut c = cluster_with(&a, &b, &gates, &gates).await;
    let (serve, serve_log, claim_path, written, entry) = pod_group_claim_on_b(&mut c, &b).await;
    let first = c.create(&member("worker-0")).await;
    c.running("ml", "worker-0", &first).await;
    let second = c.create(&member("worker-1")).await;
    c.running("ml", "worker-1", &second).await;

    let prepared = events(&c.log, "claim-prepared");
    let p: Vec<&Value> = prepared.iter().filter(|e| e["claim"] == "ml/group-gpu").collect();
    let cached: Vec<(&str, bool)> =
        p.iter().map(|e| (e["pod"].as_str().unwrap_or_default(), e["cached"] == true)).collect();
    assert_eq!(
        cached,
        [("ml/worker-0", false), ("ml/worker-1", true)],
        "prepared once for the group: {}",
        c.log.seen()
    );
    assert!(p.iter().all(|e| e["devices"] == json!([written])), "{p:?}");
    assert!(events(&c.log, "claim-allocated").is_empty(), "{}", c.log.seen());
    assert!(events(&c.log, "claim-prepare-failed").is_empty(), "{}", c.log.seen());
    let (_, claim) = call(&c.api, "GET", &claim_path, None).await;
    assert_eq!(claim["status"]["reservedFor"], json!([entry]), "the group's alone: {claim}");
    let v = pod_resources(&b).await;
    for name in ["worker-0", "worker-1"] {
        let d = &listed(&v, name).unwrap_or_else(|| panic!("{v}"))["containers"][0]["dynamicResources"][0];
        assert_eq!(d["claimName"], "group-gpu", "{v}");
    }

    c.delete("ml", "worker-0", &first).await;
    let freed = |e: &Value| e["claim"] == "ml/group-gpu" && e["stillUsed"] != true;
    let un = events(&c.log, "claim-unprepared");
    assert!(un.iter().all(|e| !freed(e)) && !un.is_empty(), "worker-1 still uses it: {}", c.log.seen());
    c.delete("ml", "worker-1", &second).await;
    let un = events(&c.log, "claim-unprepared");
    assert!(un.iter().any(|e| freed(e) && e["pod"] == "ml/worker-1"), "{}", c.log.seen());

    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// KEP-5729, node-b's gate off (its default in 1.37) under a control plane
/// with it on (a version skew upstream allows): the pod of `team` is refused
/// the claim reserved for `team` with the kubelet's text
/// (`pod NAME (UID) is not allowed to use ResourceClaim NAME (UID)`), never
/// prepared nor run; the claim stays reserved for the group alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_a_pod_group_is_refused_a_claim_reserved_for_the_group_with_the_gate_off() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster_with(&a, &b, &["--feature-gates", WORKLOAD_GATES], &[]).await;
    let (serve, serve_log, claim_path, _, entry) = pod_group_claim_on_b(&mut c, &b).await;
    let uid = c.create(&member("worker-0")).await;
    let failed = wait_event(&mut c.log, 30, "claim-prepare-failed", |e| e["pod"] == "ml/worker-0").await;
    let (_, claim) = call(&c.api, "GET", &claim_path, None).await;
    let want = format!(
        "pod worker-0 ({uid}) is not allowed to use ResourceClaim group-gpu ({})",
        claim["metadata"]["uid"].as_str().unwrap()
    );
    assert!(failed["error"].as_str().is_some_and(|e| e.contains(&want)), "want {want:?}: {failed}");
    assert_eq!(claim["status"]["reservedFor"], json!([entry]), "{claim}");
    assert!(events(&c.log, "claim-prepared").is_empty(), "{}", c.log.seen());
    let running =
        events(&c.log, "cluster-pod-status").into_iter().any(|e| e["uid"] == uid.as_str() && e["phase"] == "Running");
    assert!(!running, "{}", c.log.seen());

    c.delete("ml", "worker-0", &uid).await;
    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// KEP-5729 end to end, the gate on at both: a PodGroup stored through the
/// API (scheduling.k8s.io/v1beta1) naming a template; the control plane
/// makes the group's claim (owned by the PodGroup, named in its status),
/// and two pods of the group asking for the same claim both run on node-b
/// on that one claim, allocated once on node-b's slice and reserved for the
/// PodGroup alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_groups_claim_made_by_the_control_plane_serves_its_pods_on_the_second_node() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let gates = ["--feature-gates", WORKLOAD_GATES];
    let mut c = cluster_with(&a, &b, &gates, &gates).await;
    let driver = "gpu.own.dpctl.example.com";
    let (serve, serve_log) = c.driver_on_b(&b.root, driver).await;
    let ns = "ml";
    c.class_and_template(driver, ns, json!({"deviceClassName": driver})).await;
    let groups = format!("/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups");
    let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "team"},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}]}});
    let (code, group) = call(&c.api, "POST", &groups, Some(&group)).await;
    assert_eq!(code, 201, "{group}");
    let member = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": NODE, "schedulingGroup": {"podGroupName": "team"},
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "registry.example.com/app:1",
                    "resources": {"claims": [{"name": "g"}]}}]}})
    };
    let first = c.create(&member("worker-0")).await;
    let p0 = c.running(ns, "worker-0", &first).await;
    let second = c.create(&member("worker-1")).await;
    let p1 = c.running(ns, "worker-1", &second).await;

    let (_, g) = call(&c.api, "GET", &format!("{groups}/team"), None).await;
    let claim_name = g["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_else(|| panic!("{g}"))
        .to_string();
    assert!(claim_name.starts_with("team-g-"), "{g}");
    for p in [&p0, &p1] {
        assert_eq!(
            p["status"]["resourceClaimStatuses"],
            json!([{"name": "g", "resourceClaimName": claim_name}]),
            "{p}"
        );
    }
    let (_, claim) =
        call(&c.api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}"), None)
            .await;
    let owner = &claim["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["apiVersion"].as_str(), &owner["uid"]),
        (Some("PodGroup"), Some("scheduling.k8s.io/v1beta1"), &group["metadata"]["uid"]),
        "{claim}"
    );
    assert_eq!(
        claim["status"]["reservedFor"],
        json!([{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team", "uid": group["metadata"]["uid"]}]),
        "{claim}"
    );
    let r = &claim["status"]["allocation"]["devices"]["results"][0];
    let written = format!(
        "{driver}/{}/{}",
        r["pool"].as_str().unwrap_or_else(|| panic!("{claim}")),
        r["device"].as_str().unwrap()
    );
    let prepared: Vec<Value> =
        events(&c.log, "claim-prepared").into_iter().filter(|e| e["claim"] == format!("{ns}/{claim_name}")).collect();
    let cached: Vec<bool> = prepared.iter().map(|e| e["cached"] == true).collect();
    assert_eq!(cached, [false, true], "prepared once: {}", c.log.seen());
    assert_eq!(prepared[0]["devices"], json!([written]), "{}", prepared[0]);
    assert!(events(&c.log, "claim-allocated").is_empty(), "{}", c.log.seen());
    let (_, all) = call(&c.api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"), None).await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(1), "one claim for the group: {all}");

    c.delete(ns, "worker-0", &first).await;
    c.delete(ns, "worker-1", &second).await;
    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// #47 item 2: the mock kubelet that serves the API runs the API's pods
/// bound to its own node (`dpctl-node`) through the same client as a node
/// of a cluster (its own kubeconfig, over loopback), beside its static pods:
/// the control plane makes, allocates and reserves the API pod's claim, the
/// kubelet prepares it as written and leaves the stored claim the control
/// plane's (its owner and reservation stay, it is not written over or
/// deleted by the kubelet); a static pod's claim, allocated by the
/// kubelet's own scheduler part, gets another device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_mock_kubelet_runs_the_apis_pods_bound_to_its_own_node_beside_its_static_pods() {
    let a = DraTree::new();
    let driver = "gpu.first.dpctl.example.com";
    let (own, ns) = ("dpctl-node", "own");
    let mut first = mock_kubelet_on(&a.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut first);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let kubeconfig = a.p("kubeconfig");
    let api = kube::load_kubeconfig(&kubeconfig).unwrap();
    let mut serve = dra_serve_publishing(&a.root, driver, &kubeconfig, own);
    serve.stdout(std::process::Stdio::piped());
    let mut serve = serve.spawn().unwrap();
    let mut serve_log = Tail::stdout(&mut serve);
    serve_log.wait_for("\"event\":\"resourceslice\"", 1).await;
    wait_event(&mut log, 20, "dra-registered", |e| e["driver"] == driver).await;

    // The class as a manifest (the kubelet's scheduler part reads its manifests; the
    // API server stores it), a template through the API, one as a manifest.
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}});
    a.write("class.yaml", &class.to_string());
    wait_event(&mut log, 20, "dra-object", |e| e["key"] == format!("DeviceClass {driver}")).await;
    let template = |name: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}}})
    };
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates");
    let (code, body) = call(&api, "POST", &path, Some(&template("one-gpu"))).await;
    assert_eq!(code, 201, "{body}");

    // A pod of the API bound to the first's own node.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-pod", "namespace": ns},
        "spec": {"nodeName": own, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "g"}]}}]}});
    let (code, created) = call(&api, "POST", &format!("/api/v1/namespaces/{ns}/pods"), Some(&pod)).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    wait_event(&mut log, 30, "cluster-pod-status", |e| e["uid"] == uid.as_str() && e["phase"] == "Running").await;
    let (_, running) = call(&api, "GET", &format!("/api/v1/namespaces/{ns}/pods/api-pod"), None).await;
    let claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap().to_string();
    let claim_path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}");
    let (_, claim) = call(&api, "GET", &claim_path, None).await;
    assert_eq!(claim["metadata"]["ownerReferences"][0]["uid"], uid.as_str(), "the control plane's claim: {claim}");
    assert_eq!(claim["status"]["reservedFor"][0]["uid"], uid.as_str(), "{claim}");
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    let api_device = format!("{driver}/{}/{}", text(&result["pool"]), text(&result["device"]));
    let prepared = wait_event(&mut log, 20, "claim-prepared", |e| e["claim"] == format!("{ns}/{claim_name}")).await;
    assert_eq!(prepared["devices"], json!([api_device]), "prepared as the control plane wrote it: {prepared}");
    assert!(
        events(&log, "claim-allocated").iter().all(|e| e["claim"] != format!("{ns}/{claim_name}")),
        "the kubelet allocated the API pod's claim itself: {}",
        log.seen()
    );

    // A static pod's claim: allocated by the kubelet, on another device.
    let mut static_template = template("static-gpu");
    static_template["metadata"]["namespace"] = json!("default");
    a.write("static-template.yaml", &static_template.to_string());
    let static_pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "static-pod", "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "static-gpu"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "g"}]}}]}});
    a.write("static-pod.yaml", &static_pod.to_string());
    let mine = wait_event(&mut log, 20, "claim-prepared", |e| e["pod"] == "default/static-pod").await;
    assert_ne!(mine["devices"], json!([api_device]), "another device than the API pod's: {}", log.seen());

    // The API pod deleted: unprepared, gone; its claim is the control plane's to delete.
    let (code, body) = call(&api, "DELETE", &format!("/api/v1/namespaces/{ns}/pods/api-pod"), None).await;
    assert_eq!(code, 200, "{body}");
    wait_event(&mut log, 30, "cluster-pod-deleted", |e| e["uid"] == uid.as_str()).await;
    assert!(
        events(&log, "claim-unprepared").iter().any(|e| e["claim"] == format!("{ns}/{claim_name}")),
        "{}",
        log.seen()
    );
    assert!(events(&log, "cluster-error").is_empty(), "{}", log.seen());
    stop_tailed(serve, serve_log).await.expect_code(0);
    stop_tailed(first, log).await.expect_code(0);
}

/// #48, KEP-5517 on dpctl's own cluster, DRANodeAllocatableResources on for
/// both mock kubelets: node-b declares the feature in its Node's
/// `status.declaredFeatures` (as a kubelet with the gate does), so the
/// control plane's API server takes its driver's slice with
/// `nodeAllocatableResources` (kube-apiserver's NodeDeclaredFeatureValidator
/// refuses it for a node that does not declare it); a pod on node-b with a
/// claim of such a device runs, and the control plane wrote its
/// `status.nodeAllocatableResourceClaimStatuses`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_node_b_gets_its_node_allocatable_status_from_the_control_plane() {
    const GATES: [&str; 2] = ["--feature-gates", "DRANodeAllocatableResources=true"];
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster_with(&a, &b, &GATES, &GATES).await;
    let (code, node) = call(&c.api, "GET", &format!("/api/v1/nodes/{NODE}"), None).await;
    assert_eq!((code, &node["status"]["declaredFeatures"]), (200, &json!(["DRANodeAllocatableResources"])), "{node}");
    let driver = "cpu.own.dpctl.example.com";
    let mut serve = dra_serve_publishing(&b.root, driver, &c.kubeconfig, NODE);
    serve.args(["--node-allocatable", "cpu=100m"]).stdout(std::process::Stdio::piped());
    let mut serve = serve.spawn().unwrap();
    let mut serve_log = Tail::stdout(&mut serve);
    serve_log.wait_for("\"event\":\"resourceslice\"", 1).await;
    wait_event(&mut c.log, 20, "dra-registered", |e| e["driver"] == driver).await;
    let ns = "cpus";
    c.class_and_template(driver, ns, json!({"deviceClassName": driver})).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned", "namespace": ns},
        "spec": {"nodeName": NODE, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let uid = c.create(&pod).await;
    let pod = c.running(ns, "pinned", &uid).await;
    let claim =
        pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap_or_else(|| panic!("{pod}"));
    assert_eq!(
        pod["status"]["nodeAllocatableResourceClaimStatuses"],
        json!([{"resourceClaimName": claim, "containers": ["main"], "mapping": [{"name": "cpu", "quantity": "100m"}]}]),
        "{pod}"
    );
    c.delete(ns, "pinned", &uid).await;
    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}

/// Set the conditions of claim `ns/name`'s one allocated device in its `status.devices`.
async fn set_binding_conditions(api: &ApiServer, ns: &str, name: &str, conditions: &[(&str, &str)]) {
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}");
    let (code, claim) = call(api, "GET", &path, None).await;
    assert_eq!(code, 200, "{claim}");
    let claim = with_device_conditions(&claim, conditions);
    let (code, body) = call(api, "PUT", &format!("{path}/status"), Some(&claim)).await;
    assert_eq!(code, 200, "{body}");
}

/// KEP-5007 on a node that joined dpctl's cluster: the kubeconfig the first
/// mock kubelet writes names its control plane (a `dpctl.dev/control-plane`
/// cluster extension), which binds no pod, so node-b does kube-scheduler's
/// PreBind wait as the first node does: a pod of the API on node-b whose
/// claim the control plane allocated on a device with binding conditions is
/// held (no prepare) until they are True in the claim's `status.devices`;
/// a failure condition deallocates the claim through the API server, and the
/// control plane allocates it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_node_b_waits_for_its_devices_binding_conditions() {
    let (a, b) = (DraTree::new(), DraTree::new());
    let mut c = cluster(&a, &b).await;
    let driver = "bind.own.dpctl.example.com";
    let mut serve = dra_serve_publishing(&b.root, driver, &c.kubeconfig, NODE);
    serve.args(["--binding-conditions", "example.com/attached", "--binding-failure-conditions", "example.com/failed"]);
    serve.stdout(std::process::Stdio::piped());
    let mut serve = serve.spawn().unwrap();
    let mut serve_log = Tail::stdout(&mut serve);
    serve_log.wait_for("\"event\":\"resourceslice\"", 1).await;
    wait_event(&mut c.log, 20, "dra-registered", |e| e["driver"] == driver).await;
    let ns = "binding";
    c.class_and_template(driver, ns, json!({"deviceClassName": driver})).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "namespace": ns},
        "spec": {"nodeName": NODE, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "registry.example.com/app:1",
                "resources": {"claims": [{"name": "g"}]}}]}});
    let uid = c.create(&pod).await;
    let pending = wait_event(&mut c.log, 30, "claim-binding-pending", |e| e["pod"] == format!("{ns}/held")).await;
    let key = pending["claim"].as_str().unwrap().to_string();
    let name = key.split_once('/').unwrap().1.to_string();
    assert!(events(&c.log, "claim-prepared").is_empty(), "prepared before its binding conditions: {}", c.log.seen());
    // A failure: deallocated through the API server, then allocated again by the control plane.
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}");
    let (_, first) = call(&c.api, "GET", &path, None).await;
    set_binding_conditions(&c.api, ns, &name, &[("example.com/attached", "False"), ("example.com/failed", "True")])
        .await;
    wait_event(&mut c.log, 30, "claim-binding-failed", |e| e["claim"] == key.as_str()).await;
    let again = until(30, "the claim allocated again without the failed status", || {
        let (api, path) = (c.api.clone(), path.clone());
        async move {
            let (_, claim) = call(&api, "GET", &path, None).await;
            let allocated = claim["status"]["allocation"].is_object();
            let cleared = claim["status"]["devices"].as_array().is_none_or(Vec::is_empty);
            (allocated && cleared).then_some(claim)
        }
    })
    .await;
    assert_eq!(again["metadata"]["uid"], first["metadata"]["uid"], "the same claim: {again}");
    assert!(events(&c.log, "claim-prepared").is_empty(), "prepared after a failed binding: {}", c.log.seen());
    // Attached: past the wait, prepared, running.
    set_binding_conditions(&c.api, ns, &name, &[("example.com/attached", "True")]).await;
    wait_event(&mut c.log, 30, "claim-binding-met", |e| e["claim"] == key.as_str()).await;
    c.running(ns, "held", &uid).await;
    stop_tailed(serve, serve_log).await.expect_code(0);
    c.stop().await;
}
