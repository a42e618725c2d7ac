//! ResourceClaims as whole API objects, end to end: `dpctl mock-kubelet
//! --api-server` and `dpctl dra serve` as real processes, claims and pods
//! dropped in the manifest directory, the claims read and their status
//! written over raw HTTP/1.1 as client-go sends it (#33 item 1, #32 item 8).

use crate::support::*;
use serde_json::{json, Value};

const DRIVER: &str = "gpu.example.com";

/// The JSON log lines of `event`, in order.
fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// The local API server: address and bearer token.
struct Api {
    addr: String,
    token: String,
    kubeconfig: std::path::PathBuf,
}

impl Api {
    fn of(event: &Value) -> Api {
        let addr = api_authority(event["addr"].as_str().unwrap());
        let kubeconfig = std::path::PathBuf::from(event["kubeconfig"].as_str().unwrap());
        let token = kubeconfig_token(&kubeconfig);
        Api { addr, token, kubeconfig }
    }

    /// One request (JSON answer asked for): the status code and the body.
    async fn call(&self, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = api_connect(&self.kubeconfig).await;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        let (head, body) = buf.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, "application/json", "").await
    }
}

/// The mock kubelet with its API server on `t`, and the driver registered.
async fn node(t: &DraTree) -> (tokio::process::Child, Tail, Api, tokio::process::Child) {
    node_with(t, "2").await
}

/// [`node`] with a driver of `devices` devices.
async fn node_with(t: &DraTree, devices: &str) -> (tokio::process::Child, Tail, Api, tokio::process::Child) {
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let api = Api::of(&events(&log, "api-server")[0]);
    // The driver reads each claim's allocation from the API server (as the kubeletplugin helper does).
    let kubeconfig = t.p("kubeconfig");
    let driver = t.driver(DRIVER, &["--devices", devices, "--kubeconfig", s(&kubeconfig), "--node-name", "dpctl-node"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    log.wait_for("\"event\":\"dra-health\"", 1).await;
    (kubelet, log, api, driver)
}

fn pod(name: &str, uid: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n  uid: {uid}\nspec:\n  resourceClaims:\n  - name: g\n    resourceClaimName: gpu\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: g\n")
}

const CLASS: &str = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.example.com\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == \"gpu.example.com\"\n  config:\n  - opaque:\n      driver: gpu.example.com\n      parameters:\n        apiVersion: gpu.example.com/v1\n        kind: GpuConfig\n        interval: Long\n";
const CLAIM: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: 11111111-2222-3333-4444-555555555555\n  labels:\n    team: ml\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.example.com\n    config:\n    - requests: [one]\n      opaque:\n        driver: gpu.example.com\n        parameters:\n          apiVersion: gpu.example.com/v1\n          kind: GpuConfig\n          sharing:\n            strategy: SpacePartitioning\n";
const PATH: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu";

/// #33 item 1: the claim the driver GETs is the whole claim: its spec as
/// written with v1's defaults, the allocation with the class's and the
/// claim's opaque config, reservedFor naming the pod; its status subresource
/// takes the driver's device status (UpdateStatus, merge patch) with
/// resourceVersion conflicts as kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_reads_the_whole_claim_and_writes_its_status() {
    let t = DraTree::new();
    let (kubelet, mut log, api, driver) = node(&t).await;
    // One multi-document file, as kubectl reads it (#33 item 4): each document an object.
    t.write("all.yaml", &format!("---\n{CLASS}---\n{CLAIM}---\n{}", pod("trainer", "pod-1")));
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let (code, claim) = api.get(PATH).await;
    assert_eq!(code, 200, "{claim}");
    let exactly = &claim["spec"]["devices"]["requests"][0]["exactly"];
    assert_eq!(
        (exactly["allocationMode"].as_str(), exactly["count"].as_i64()),
        (Some("ExactCount"), Some(1)),
        "{claim}"
    );
    assert_eq!(
        claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["strategy"],
        "SpacePartitioning"
    );
    let meta = &claim["metadata"];
    assert_eq!((meta["generation"].as_i64(), meta["labels"]["team"].as_str()), (Some(1), Some("ml")));
    assert!(meta["creationTimestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{meta}");
    let alloc = &claim["status"]["allocation"];
    let config = alloc["devices"]["config"].as_array().unwrap_or_else(|| panic!("{claim}"));
    assert_eq!(config.len(), 2, "{claim}");
    // Each config names every request of the claim: upstream clears its
    // `requests` ("empty means all", allocator_experimental.go Allocate).
    assert_eq!((config[0]["source"].as_str(), config[0].get("requests")), (Some("FromClass"), None), "{claim}");
    assert_eq!(config[0]["opaque"]["parameters"]["interval"], "Long");
    assert_eq!((config[1]["source"].as_str(), config[1].get("requests")), (Some("FromClaim"), None), "{claim}");
    assert_eq!(config[1]["opaque"]["parameters"]["sharing"]["strategy"], "SpacePartitioning");
    assert_eq!(alloc["devices"]["results"][0]["request"], "one");
    assert_eq!(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["key"], "metadata.name");
    assert_eq!(claim["status"]["reservedFor"], json!([{"resource": "pods", "name": "trainer", "uid": "pod-1"}]));

    // UpdateStatus: the driver's device status, kept and served.
    let device = alloc["devices"]["results"][0]["device"].as_str().unwrap().to_string();
    let mut put = claim.clone();
    put["status"]["devices"] = json!([{"driver": DRIVER, "pool": alloc["devices"]["results"][0]["pool"], "device": device,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]);
    let (code, updated) = api.call("PUT", &format!("{PATH}/status"), "application/json", &put.to_string()).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(api.get(PATH).await.1["status"]["devices"][0]["conditions"][0]["reason"], "Healthy");
    let (code, e) = api.call("PUT", &format!("{PATH}/status"), "application/json", &put.to_string()).await;
    assert_eq!((code, e["reason"].as_str()), (409, Some("Conflict")), "the resourceVersion read first is stale now");
    let patch = json!({"metadata": {"resourceVersion": updated["metadata"]["resourceVersion"]},
        "status": {"devices": [{"driver": DRIVER, "pool": put["status"]["devices"][0]["pool"], "device": device, "data": {"temp": 40}}]}});
    let (code, patched) =
        api.call("PATCH", &format!("{PATH}/status"), "application/merge-patch+json", &patch.to_string()).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["status"]["devices"][0]["data"]["temp"], 40);
    assert_eq!(patched["status"]["allocation"], updated["status"]["allocation"], "the allocation stays");
    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

fn allocated_claim(uid: &str, reserved: &str) -> String {
    format!("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: {uid}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.example.com\nstatus:\n  allocation:\n    devices:\n      results:\n      - request: one\n        driver: gpu.example.com\n        pool: pool-0\n        device: dev-1\n  reservedFor:\n  - resource: pods\n    name: {reserved}\n    uid: {reserved}-uid\n")
}

/// #33 item 1, #32 item 8: a claim a scheduler already allocated (its
/// manifest's status) is prepared with that device, not allocated again; a
/// pod its reservedFor does not name fails in manager.go's words; the same
/// claim recreated with a new UID is a new claim: refused while the old one
/// is prepared, then prepared with the new UID once the old one's pod went
/// (and the old one unprepared with its own UID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_allocated_elsewhere_is_honoured_and_a_new_uid_is_a_new_claim() {
    let t = DraTree::new();
    let (kubelet, mut log, api, driver) = node(&t).await;
    t.write("claim.yaml", &allocated_claim("uid-old", "a"));
    t.write("intruder.yaml", &pod("b", "b-uid"));
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    assert_eq!(
        events(&log, "claim-prepare-failed")[0]["error"],
        "prepare dynamic resources: pod b (b-uid) is not allowed to use ResourceClaim gpu (uid-old)"
    );
    std::fs::remove_file(t.p("manifests/intruder.yaml")).unwrap();
    t.write("a.yaml", &pod("a", "a-uid"));
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let p = &events(&log, "claim-prepared")[0];
    assert_eq!(
        (p["uid"].as_str(), p["devices"][0].as_str()),
        (Some("uid-old"), Some("gpu.example.com/pool-0/dev-1")),
        "{p}"
    );
    assert!(events(&log, "claim-allocated").iter().all(|e| e["claim"] != "ml/gpu"), "not allocated again");
    let (_, served) = api.get(PATH).await;
    assert_eq!(served["status"]["reservedFor"][0]["name"], "a", "served as the manifest gives it");

    // Recreated under the same name with a new UID, reserved for pod c.
    t.write("claim.yaml", &allocated_claim("uid-new", "c"));
    t.write("c.yaml", &pod("c", "c-uid"));
    log.wait_for("still exists (previous pod force-deleted?!)", 1).await;
    let failed = events(&log, "claim-prepare-failed");
    assert!(
        failed.iter().any(|e| e["error"]
            == "prepare dynamic resources: old ResourceClaim with same name gpu and different UID uid-old still exists (previous pod force-deleted?!)"),
        "{failed:?}"
    );
    assert_eq!(api.get(PATH).await.1["metadata"]["uid"], "uid-new", "the API server has the new claim only");
    std::fs::remove_file(t.p("manifests/a.yaml")).unwrap();
    log.wait_for("\"event\":\"claim-unprepared\"", 1).await;
    assert_eq!(events(&log, "claim-unprepared")[0]["uid"], "uid-old");
    log.wait_for("\"event\":\"claim-prepared\"", 2).await;
    let p = &events(&log, "claim-prepared")[1];
    assert_eq!((p["pod"].as_str(), p["uid"].as_str()), (Some("ml/c"), Some("uid-new")), "{p}");
    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// #47 item 2: a claim the scheduler already allocated (its manifest names
/// dev-3 of four) is prepared on dev-3, the device it names, not on the
/// first free one; the claim the driver GETs carries that allocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocated_claim_is_prepared_on_the_device_it_names() {
    let t = DraTree::new();
    let (kubelet, mut log, api, driver) = node_with(&t, "4").await;
    let claim = allocated_claim("uid-3", "a").replace("device: dev-1", "device: dev-3");
    t.write("all.yaml", &format!("---\n{CLASS}---\n{claim}---\n{}", pod("a", "a-uid")));
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let p = &events(&log, "claim-prepared")[0];
    assert_eq!(p["devices"], json!(["gpu.example.com/pool-0/dev-3"]), "{p}");
    assert!(events(&log, "claim-allocated").iter().all(|e| e["claim"] != "ml/gpu"), "not allocated again");
    let (code, served) = api.get(PATH).await;
    assert_eq!(code, 200, "{served}");
    assert_eq!(served["status"]["allocation"]["devices"]["results"][0]["device"], "dev-3", "{served}");
    // The class of the manifests is stored as admitted.
    let (code, class) = api.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com").await;
    assert_eq!(
        (code, class["spec"]["config"][0]["opaque"]["parameters"]["interval"].as_str()),
        (200, Some("Long")),
        "{class}"
    );
    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: computedomains.resource.nvidia.com\nspec:\n  group: resource.nvidia.com\n  scope: Namespaced\n  names:\n    plural: computedomains\n    singular: computedomain\n    kind: ComputeDomain\n    listKind: ComputeDomainList\n  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    subresources:\n      status: {}\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n";
const CD: &str = "apiVersion: resource.nvidia.com/v1beta1\nkind: ComputeDomain\nmetadata:\n  name: imex\n  namespace: ml\nspec:\n  numNodes: 1\n";
const CDS: &str = "/apis/resource.nvidia.com/v1beta1/namespaces/ml/computedomains";

/// A watch over raw HTTP/1.1: what has arrived so far.
struct Watch(Box<dyn ApiIo>, String);

impl Watch {
    async fn open(api: &Api, path: &str) -> Watch {
        use tokio::io::AsyncWriteExt;
        let mut s = api_connect(&api.kubeconfig).await;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: application/vnd.kubernetes.protobuf, application/json\r\n\r\n",
            api.addr, api.token
        );
        s.write_all(req.as_bytes()).await.unwrap();
        Watch(s, String::new())
    }

    /// Wait (at most 10 s) until `needle` has arrived `count` times.
    async fn wait_for(&mut self, needle: &str, count: usize) {
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut buf = [0u8; 4096];
        while self.1.matches(needle).count() < count {
            match tokio::time::timeout_at(deadline, self.0.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => self.1.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => panic!("{needle} did not arrive on the watch; got:\n{}", self.1),
            }
        }
    }
}

/// #33 item 3: a CRD in the manifest directory declares a custom resource
/// (NVIDIA's ComputeDomain); the object beside it is loaded; objects are
/// listed, watched (JSON, though client-go offers protobuf first, as
/// kube-apiserver answers for custom resources), created, status-updated
/// and deleted over HTTP, and discovery names the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_in_the_manifest_directory_serves_its_custom_resource() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let api = Api::of(&events(&log, "api-server")[0]);
    t.write("cd.yaml", CD);
    t.write("crd.yaml", CRD);
    log.wait_for("\"event\":\"dra-object\"", 2).await;
    let (code, l) = api.get(CDS).await;
    assert_eq!((code, l["items"][0]["metadata"]["name"].as_str()), (200, Some("imex")), "{l}");
    assert_eq!(l["items"][0]["metadata"]["generation"], 1);
    let (_, groups) = api.get("/apis").await;
    assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "resource.nvidia.com"), "{groups}");
    let mut w = Watch::open(
        &api,
        &format!("{CDS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
    )
    .await;
    w.wait_for("\"k8s.io/initial-events-end\":\"true\"", 1).await;
    assert!(w.1.contains("\"type\":\"ADDED\"") && w.1.contains("\"name\":\"imex\""), "{}", w.1);
    assert!(w.1.contains("content-type: application/json\r\n"), "{}", w.1);
    let (code, created) = api
        .call(
            "POST",
            CDS,
            "application/json",
            &json!({"metadata": {"name": "second"}, "spec": {"numNodes": 2}}).to_string(),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    w.wait_for("\"type\":\"ADDED\"", 2).await;
    let mut st = created.clone();
    st["status"] = json!({"status": "Ready"});
    let (code, updated) = api.call("PUT", &format!("{CDS}/second/status"), "application/json", &st.to_string()).await;
    assert_eq!((code, updated["status"]["status"].as_str()), (200, Some("Ready")), "{updated}");
    w.wait_for("\"type\":\"MODIFIED\"", 1).await;
    let (code, e) =
        api.call("POST", CDS, "application/json", &json!({"metadata": {"name": "No_Good"}}).to_string()).await;
    assert_eq!((code, e["details"]["causes"][0]["field"].as_str()), (422, Some("metadata.name")));
    assert_eq!(api.call("DELETE", &format!("{CDS}/second"), "application/json", "").await.0, 200);
    w.wait_for("\"type\":\"DELETED\"", 1).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}
