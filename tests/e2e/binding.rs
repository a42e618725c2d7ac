//! Binding conditions (KEP-5007) end to end: `dpctl dra serve
//! --binding-conditions` publishes devices that a controller must declare
//! ready, and the mock kubelet's scheduler part, as kube-scheduler's PreBind,
//! allocates such a device, stamps the allocation, and calls no driver for
//! the pod until the claim's `status.devices` has every binding condition
//! True; a failure condition True deallocates the claim (what the driver
//! wrote goes with it) and the pod's claim is allocated again. The test is
//! the controller: it writes `status.devices` through the local API server.

use crate::support::*;
use dpctl::client::kube::{self, ApiServer};
use serde_json::{json, Value};
use std::time::Duration;

const DRIVER: &str = "gpu.example.com";

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

const CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: \"device.driver == 'gpu.example.com'\"}
";

const TEMPLATE: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
";

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, uid: pod-{name}}}\nspec:\n  resourceClaims: [{{name: g, resourceClaimTemplateName: one-gpu}}]\n  containers: [{{name: main, resources: {{claims: [{{name: g}}]}}}}]\n"
    )
}

async fn call(api: &ApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    kube::request(api, method, path, body, Duration::from_secs(20)).await.unwrap()
}

fn claim_path(key: &str) -> String {
    let (ns, name) = key.split_once('/').unwrap();
    format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}")
}

/// As a binding controller does: the claim's device status with
/// `conditions` (type → status), written through the status subresource.
async fn set_conditions(api: &ApiServer, key: &str, conditions: &[(&str, &str)]) {
    let (code, claim) = call(api, "GET", &claim_path(key), None).await;
    assert_eq!(code, 200, "{claim}");
    let claim = with_device_conditions(&claim, conditions);
    let (code, body) = call(api, "PUT", &format!("{}/status", claim_path(key)), Some(&claim)).await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waits_for_its_devices_binding_conditions_and_a_failed_binding_allocates_again() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let kc = t.p("kubeconfig");
    let api = kube::load_kubeconfig(&kc).unwrap();
    let mut driver = t.driver(
        DRIVER,
        &[
            "--services",
            "v1.DRAPlugin",
            "--kubeconfig",
            s(&kc),
            "--node-name",
            "dpctl-node",
            "--binding-conditions",
            "example.com/attached",
            "--binding-failure-conditions",
            "example.com/attach-failed",
        ],
    );
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write("class.yaml", CLASS);
    t.write("template.yaml", TEMPLATE);
    log.wait_for("\"event\":\"dra-object\"", 2).await;

    // Pod a: allocated, then waiting; no driver is called meanwhile.
    t.write("a.yaml", &pod("a"));
    log.wait_for("\"event\":\"claim-binding-pending\"", 1).await;
    let pending = &events(&log, "claim-binding-pending")[0];
    let a = pending["claim"].as_str().unwrap().to_string();
    assert!(pending["waiting"].as_str().unwrap().contains("no status.devices entry yet"), "{pending}");
    let (code, claim) = call(&api, "GET", &claim_path(&a), None).await;
    assert_eq!(code, 200, "{claim}");
    let allocation = &claim["status"]["allocation"];
    assert_eq!(allocation["devices"]["results"][0]["bindingConditions"], json!(["example.com/attached"]), "{claim}");
    assert_eq!(
        allocation["devices"]["results"][0]["bindingFailureConditions"],
        json!(["example.com/attach-failed"]),
        "{claim}"
    );
    assert!(allocation["allocationTimestamp"].is_string(), "the scheduler stamps the allocation: {claim}");
    // Not yet: one condition False.
    set_conditions(&api, &a, &[("example.com/attached", "False")]).await;
    assert!(events(&log, "claim-prepared").is_empty(), "prepared before its binding conditions: {}", log.seen());
    set_conditions(&api, &a, &[("example.com/attached", "True")]).await;
    log.wait_for("\"event\":\"claim-binding-met\"", 1).await;
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let (_, claim) = call(&api, "GET", &claim_path(&a), None).await;
    assert_eq!(claim["status"]["devices"][0]["conditions"][0]["status"], "True", "kept once prepared: {claim}");

    // Pod b: its device's attach fails; the claim is deallocated and allocated again.
    t.write("b.yaml", &pod("b"));
    log.wait_for("\"event\":\"claim-binding-pending\"", 2).await;
    let b = events(&log, "claim-binding-pending")[1]["claim"].as_str().unwrap().to_string();
    assert_ne!(a, b);
    set_conditions(&api, &b, &[("example.com/attached", "False"), ("example.com/attach-failed", "True")]).await;
    log.wait_for("\"event\":\"claim-binding-failed\"", 1).await;
    let failed = &events(&log, "claim-binding-failed")[0];
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with("device binding failed: device=gpu.example.com/")
            && error.contains("condition=example.com/attach-failed")
            && error.ends_with(&format!("claim={b}")),
        "{failed}"
    );
    assert_eq!(failed["pod"], "ml/b");
    // Allocated again, waiting again, with nothing of the failed attach left.
    log.wait_for("\"event\":\"claim-binding-pending\"", 3).await;
    let (code, claim) = call(&api, "GET", &claim_path(&b), None).await;
    assert_eq!(code, 200, "{claim}");
    assert!(claim["status"].get("devices").is_none(), "a deallocation clears status.devices: {claim}");
    assert_eq!(events(&log, "claim-prepared").len(), 1, "b prepared before its binding: {}", log.seen());
    set_conditions(&api, &b, &[("example.com/attached", "True")]).await;
    log.wait_for("\"event\":\"claim-prepared\"", 2).await;
    let prepared = &events(&log, "claim-prepared")[1];
    assert_eq!(prepared["claim"], b.as_str(), "{prepared}");

    driver.kill().await.unwrap();
    stop_tailed(kubelet, log).await.expect_code(0);
}
