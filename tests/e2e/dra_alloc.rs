//! The allocator end to end: `dpctl mock-kubelet` and `dpctl dra serve` as
//! real processes; devices come from a ResourceSlice manifest, classes
//! select them with CEL as real drivers' Helm charts write it (single
//! quotes, map indexing, `quantity(...)`), and taints, shared counters and
//! the adminAccess namespace label decide as the scheduler does.

use crate::support::*;
use serde_json::Value;

const DRIVER: &str = "gpu.example.com";

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// A pod `name` in namespace ml with one claim from template `template`.
fn pod(name: &str, template: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, uid: pod-{name}}}\nspec:\n  resourceClaims: [{{name: g, resourceClaimTemplateName: {template}}}]\n  containers: [{{name: main, resources: {{claims: [{{name: g}}]}}}}]\n"
    )
}

fn template(name: &str, class: &str, extra: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {{deviceClassName: {class}{extra}}}\n"
    )
}

const SLICE: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpus}
spec:
  driver: gpu.example.com
  nodeName: dpctl-node
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  sharedCounters:
  - name: gpu-9-counters
    counters: {memory: {value: 80Gi}}
  devices:
  - name: gpu-0
    attributes: {productName: {string: H100}}
    capacity: {memory: {value: 80Gi}}
    taints: [{key: gpu.example.com/unhealthy, value: xid-79, effect: NoSchedule}]
  - name: gpu-1
    attributes: {productName: {string: H100}}
    capacity: {memory: {value: 80Gi}}
  - name: gpu-2
    attributes: {productName: {string: A10}}
    capacity: {memory: {value: 24Gi}}
  - name: gpu-9-half-0
    attributes: {productName: {string: mig}}
    consumesCounters: [{counterSet: gpu-9-counters, counters: {memory: {value: 40Gi}}}]
  - name: gpu-9-full
    attributes: {productName: {string: mig}}
    consumesCounters: [{counterSet: gpu-9-counters, counters: {memory: {value: 80Gi}}}]
";

/// The class as NVIDIA's and the example driver's charts write selectors.
const CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: big-gpu}
spec:
  selectors:
  - cel:
      expression: device.driver == 'gpu.example.com'
  - cel:
      expression: >-
        device.attributes['gpu.example.com']['productName'] == 'H100' &&
        device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0
";

const MIG_CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: mig}
spec:
  selectors:
  - cel: {expression: \"device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].productName == 'mig'\"}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cel_class_allocates_around_a_tainted_device_and_partitions_never_oversubscribe() {
    let t = DraTree::new();
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let driver = t.driver(DRIVER, &["--services", "v1.DRAPlugin", "--pool", "node-1"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write("slice.yaml", SLICE);
    t.write("class.yaml", CLASS);
    t.write("mig-class.yaml", MIG_CLASS);
    t.write("template.yaml", &template("one-big", "big-gpu", ""));
    t.write("mig-template.yaml", &template("one-mig", "mig", ""));
    t.write("admin-template.yaml", &template("admin", "big-gpu", ", adminAccess: true"));
    log.wait_for("\"event\":\"dra-object\"", 6).await;

    // gpu-0 matches the class but is tainted NoSchedule: gpu-1 it is.
    t.write("a.yaml", &pod("a", "one-big"));
    log.wait_for("\"event\":\"claim-allocated\"", 1).await;
    let a = &events(&log, "claim-allocated")[0];
    assert_eq!(a["devices"], serde_json::json!([format!("{DRIVER}/node-1/gpu-1")]), "{a}");
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;

    // A second claim of the class: gpu-1 is in use, gpu-0 tainted, gpu-2 too small.
    t.write("b.yaml", &pod("b", "one-big"));
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    let e = events(&log, "claim-prepare-failed")[0]["error"].as_str().unwrap().to_string();
    assert!(
        e.contains("request \"gpu\" wants 1 device(s) of class \"big-gpu\"; 2 match, 0 of them free")
            && e.contains(
                "device gpu-0: tainted NoSchedule: gpu.example.com/unhealthy=xid-79:NoSchedule (not tolerated)"
            )
            && e.contains("device gpu-1: in use"),
        "{e}"
    );

    // Partitions: the half takes 40Gi of gpu-9's 80Gi, so the full device can never follow.
    t.write("m1.yaml", &pod("m1", "one-mig"));
    log.wait_for("\"event\":\"claim-allocated\"", 2).await;
    let m1 = &events(&log, "claim-allocated")[1];
    assert_eq!(m1["devices"], serde_json::json!([format!("{DRIVER}/node-1/gpu-9-half-0")]), "{m1}");
    t.write("m2.yaml", &pod("m2", "one-mig"));
    log.wait_for("gpu-9-counters/memory would exceed 80Gi", 1).await;

    // adminAccess needs the namespace label kube-apiserver requires.
    t.write("admin.yaml", &pod("adm", "admin"));
    log.wait_for("which namespace \\\"ml\\\" does not allow", 1).await;
    t.write(
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n  labels: {resource.kubernetes.io/admin-access: \"true\"}\n",
    );
    // The pod stays pending and is retried: now it is allowed.
    log.wait_for("\"event\":\"claim-allocated\",\"claim\":\"ml/adm-g\"", 1).await;
    let adm = events(&log, "claim-allocated").into_iter().find(|v| v["claim"] == "ml/adm-g").expect("adm allocated");
    assert_eq!(
        adm["devices"],
        serde_json::json!([format!("{DRIVER}/node-1/gpu-1")]),
        "admin access shares the held device"
    );

    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// One device, optionally NoExecute-tainted (issue 33: a taint added later).
fn one_device_slice(taint: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: node-1-one}}\nspec:\n  driver: gpu.example.com\n  nodeName: dpctl-node\n  pool: {{name: node-1, generation: 1, resourceSliceCount: 1}}\n  devices:\n  - name: gpu-0\n    attributes: {{productName: {{string: H100}}}}\n{taint}"
    )
}

const NO_EXECUTE: &str = "    taints: [{key: gpu.example.com/xid, value: \"79\", effect: NoExecute}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_taint_added_later_evicts_the_pod_and_unprepares_its_claim_unless_tolerated() {
    let t = DraTree::new();
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let driver = t.driver(DRIVER, &["--services", "v1.DRAPlugin", "--pool", "node-1"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write("slice.yaml", &one_device_slice(""));
    t.write(
        "class.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: any-gpu}\nspec:\n  selectors:\n  - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n",
    );
    t.write("template.yaml", &template("plain", "any-gpu", ""));
    t.write(
        "tol-template.yaml",
        &template(
            "tolerant",
            "any-gpu",
            ", tolerations: [{key: gpu.example.com/xid, operator: Exists, effect: NoExecute}]",
        ),
    );
    log.wait_for("\"event\":\"dra-object\"", 4).await;

    // A tolerating pod first: the taint comes and it stays.
    t.write("keep.yaml", &pod("keep", "tolerant"));
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    t.write("slice.yaml", &one_device_slice(NO_EXECUTE));
    log.wait_for("\"event\":\"dra-object\"", 5).await;
    // Its claim goes only when its pod does (the manifest removed), never by eviction.
    std::fs::remove_file(t.p("manifests/keep.yaml")).unwrap();
    log.wait_for("\"event\":\"claim-unprepared\"", 1).await;
    assert!(events(&log, "pod-evicted").is_empty(), "a tolerated NoExecute taint evicts nobody");

    // The same device untainted, a plain pod prepared, then the taint again: evicted.
    t.write("slice.yaml", &one_device_slice(""));
    log.wait_for("\"event\":\"dra-object\"", 6).await;
    t.write("a.yaml", &pod("a", "plain"));
    log.wait_for("\"event\":\"claim-prepared\"", 2).await;
    t.write("slice.yaml", &one_device_slice(NO_EXECUTE));
    log.wait_for("\"event\":\"pod-evicted\"", 1).await;
    let ev = &events(&log, "pod-evicted")[0];
    assert_eq!(
        (ev["pod"].as_str(), ev["claim"].as_str(), ev["device"].as_str()),
        (Some("pod-a"), Some("ml/a-g"), Some("gpu.example.com/node-1/gpu-0")),
        "{ev}"
    );
    assert_eq!(ev["taint"], "gpu.example.com/xid=79:NoExecute", "{ev}");
    assert_eq!(ev["reason"], "DeviceTaintManagerEviction", "{ev}");
    // device_taint_eviction.go deletePod: the condition set before the pod is deleted.
    assert_eq!(
        (ev["condition"].as_str(), ev["conditionReason"].as_str(), ev["conditionMessage"].as_str()),
        (
            Some("DisruptionTarget"),
            Some("DeletionByDeviceTaintManager"),
            Some("Device Taint manager: deleting due to NoExecute taint")
        ),
        "{ev}"
    );
    // The driver was asked to unprepare the evicted pod's claim.
    log.wait_for("\"event\":\"claim-unprepared\"", 2).await;
    let u = &events(&log, "claim-unprepared")[1];
    assert_eq!(u["claim"], "ml/a-g", "{u}");

    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// devicetainteviction evicts at the taint's timeAdded plus the toleration's
/// seconds — not that long after the mock kubelet first saw the taint. The
/// slice's taint was added 56 s ago and the pod tolerates it for 60 s: it is
/// prepared, then evicted about 4 s later, not before (counting from when
/// the taint was seen, it would stay a minute), and the event carries both
/// times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_toleration_with_seconds_evicts_that_long_after_the_taints_time_added() {
    use dpctl::core::time::{parse_rfc3339, rfc3339_nano};
    use std::time::{Duration, SystemTime};
    let t = DraTree::new();
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let driver = t.driver(DRIVER, &["--services", "v1.DRAPlugin", "--pool", "node-1"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    // Whole seconds, as metav1.Time writes them.
    let now_secs = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let added = rfc3339_nano(SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs - 56));
    let evict_at = rfc3339_nano(SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs + 4));
    t.write(
        "slice.yaml",
        &one_device_slice(&format!(
            "    taints: [{{key: gpu.example.com/xid, value: \"79\", effect: NoExecute, timeAdded: \"{added}\"}}]\n"
        )),
    );
    t.write(
        "class.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: any-gpu}\nspec:\n  selectors:\n  - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n",
    );
    t.write(
        "template.yaml",
        &template(
            "for-60s",
            "any-gpu",
            ", tolerations: [{key: gpu.example.com/xid, operator: Exists, effect: NoExecute, tolerationSeconds: 60}]",
        ),
    );
    log.wait_for("\"event\":\"dra-object\"", 3).await;
    t.write("a.yaml", &pod("a", "for-60s"));
    // The toleration lets the tainted device be allocated: the pod runs, until timeAdded + 60 s.
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    log.wait_for("\"event\":\"pod-evicted\"", 1).await;
    let seen = SystemTime::now();
    let ev = &events(&log, "pod-evicted")[0];
    assert_eq!(
        (ev["pod"].as_str(), ev["claim"].as_str(), ev["taint"].as_str()),
        (Some("pod-a"), Some("ml/a-g"), Some("gpu.example.com/xid=79:NoExecute")),
        "{ev}"
    );
    assert_eq!(
        (ev["timeAdded"].as_str(), ev["evictAt"].as_str()),
        (Some(added.as_str()), Some(evict_at.as_str())),
        "{ev}"
    );
    assert!(seen >= parse_rfc3339(&evict_at).unwrap(), "evicted before evictAt {evict_at}");
    log.wait_for("\"event\":\"claim-unprepared\"", 1).await;

    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// ShareID end to end (KEP-5075, kubernetes#134520): two claims hold shares
/// of one device (their allocations carry shareIDs, UUIDs as upstream's
/// allocator makes them); `dra serve` reads each from the API server as the
/// kubeletplugin helper does and returns it in Device.share_id, and the
/// kubelet keeps it in its checkpoint (ShareID) and PodResources'
/// ClaimResource.share_id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_devices_share_ids_reach_the_driver_the_checkpoint_and_pod_resources() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let kubeconfig = t.p("kubeconfig");
    let driver = t.driver(DRIVER, &["--devices", "2", "--kubeconfig", s(&kubeconfig), "--node-name", "dpctl-node"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    let shares = ["6d0c2d0e-8b8f-4a52-9d33-1f6f2b1a7c01", "6d0c2d0e-8b8f-4a52-9d33-1f6f2b1a7c02"];
    for (i, share) in shares.iter().enumerate() {
        t.write(
            &format!("claim-{i}.yaml"),
            &format!("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: share-{i}, namespace: ml, uid: claim-{i}-uid}}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly: {{deviceClassName: gpu.example.com}}\nstatus:\n  allocation:\n    devices:\n      results:\n      - {{request: one, driver: gpu.example.com, pool: pool-0, device: dev-0, shareID: {share}}}\n  reservedFor:\n  - {{resource: pods, name: p{i}, uid: pod-{i}}}\n"),
        );
        t.write(
            &format!("pod-{i}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: ml, uid: pod-{i}}}\nspec:\n  resourceClaims: [{{name: g, resourceClaimName: share-{i}}}]\n  containers: [{{name: main, resources: {{claims: [{{name: g}}]}}}}]\n"),
        );
    }
    log.wait_for("\"event\":\"claim-prepared\"", 2).await;

    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    let v: Value = serde_json::from_str(&pr.stdout).unwrap();
    let mut got: Vec<String> = v["podResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let cr = &p["containers"][0]["dynamicResources"][0]["claimResources"][0];
            assert_eq!(cr["deviceName"], "dev-0", "{v}");
            cr["shareId"].as_str().unwrap_or_else(|| panic!("no shareId: {v}")).to_string()
        })
        .collect();
    got.sort();
    assert_eq!(got, shares, "{v}");
    // The checkpoint keeps them (state.Device.ShareID).
    let outer: Value = serde_json::from_slice(&std::fs::read(t.p("dra_manager_state")).unwrap()).unwrap();
    let data = outer["Data"].as_str().unwrap();
    assert!(shares.iter().all(|id| data.contains(&format!("\"ShareID\":\"{id}\""))), "{data}");

    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}
