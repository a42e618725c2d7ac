//! Shares of one device (consumable capacity, KEP-5075; ShareID,
//! kubernetes#134520) end to end: `dpctl dra serve --shared-capacity`
//! publishes shareable devices, the mock kubelet's scheduler part gives two
//! claims a share each of the one device (a shareID and consumedCapacity in
//! each result), the driver reads each share from the claim, makes a CDI
//! device per share and returns the shareID, and PodResources lists both
//! shares; a third claim that would exceed the capacity is not allocated.
//! And node-allocatable resources (KEP-5517): `--node-allocatable` is
//! published, and the local API server drops the field unless the
//! DRANodeAllocatableResources gate is on, as kube-apiserver's strategy does.

use crate::support::*;
use dpctl::client::kube::{self, ApiServer};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;

const DRIVER: &str = "gpu.example.com";

const CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: \"device.driver == 'gpu.example.com'\"}
";

/// A claim of 3Gi of a device's memory.
const TEMPLATE: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-3gi, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu
          capacity:
            requests: {memory: 3Gi}
";

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, uid: pod-{name}}}\nspec:\n  resourceClaims: [{{name: g, resourceClaimTemplateName: gpu-3gi}}]\n  containers: [{{name: main, resources: {{claims: [{{name: g}}]}}}}]\n"
    )
}

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

fn running(seen: &str, pod: &str) -> bool {
    seen.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v["event"] == "pod-phase" && v["pod"] == pod && v["phase"] == "Running")
}

async fn call(api: &ApiServer, method: &str, path: &str) -> (u16, Value) {
    kube::request(api, method, path, None, Duration::from_secs(20)).await.unwrap()
}

fn driver(t: &DraTree, extra: &[&str]) -> (tokio::process::Child, Tail) {
    let mut c = dra_serve_publishing(&t.root, DRIVER, &t.p("kubeconfig"), "dpctl-node");
    c.args(["--services", "v1.DRAPlugin"]).args(extra).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_claims_share_one_device_each_with_its_share_id_and_cdi_device_and_a_third_exceeds_it() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let api = kube::load_kubeconfig(&t.p("kubeconfig")).unwrap();
    let (drv, mut dlog) = driver(&t, &["--devices", "1", "--shared-capacity", "memory=8Gi/default=1Gi/step=1Gi"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    // The device as published: shareable, its capacity and request policy.
    let (code, slices) = call(&api, "GET", "/apis/resource.k8s.io/v1/resourceslices").await;
    assert_eq!(code, 200, "{slices}");
    let dev = &slices["items"][0]["spec"]["devices"][0];
    assert_eq!(dev["allowMultipleAllocations"], true, "{slices}");
    assert_eq!(
        dev["capacity"]["memory"],
        json!({"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}),
        "{slices}"
    );
    t.write("class.yaml", CLASS);
    t.write("template.yaml", TEMPLATE);
    log.wait_for("\"event\":\"dra-object\"", 2).await;

    t.write("a.yaml", &pod("a"));
    t.write("b.yaml", &pod("b"));
    log.wait_for("\"event\":\"claim-prepared\"", 2).await;
    log.wait_until(20, |s| running(s, "ml/a") && running(s, "ml/b")).await.expect("pods a and b Running");
    let prepared = events(&log, "claim-prepared");
    assert!(prepared.iter().all(|p| p["devices"] == json!(["gpu.example.com/pool-0/dev-0"])), "{prepared:?}");

    // Each claim's allocation: a share of dev-0 (its own shareID) consuming 3Gi.
    let mut shares = Vec::new();
    for p in &prepared {
        let (ns, name) = p["claim"].as_str().unwrap().split_once('/').unwrap();
        let (code, claim) =
            call(&api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}")).await;
        assert_eq!(code, 200, "{claim}");
        let r = &claim["status"]["allocation"]["devices"]["results"][0];
        assert_eq!(
            (r["device"].as_str(), &r["consumedCapacity"]),
            (Some("dev-0"), &json!({"memory": "3Gi"})),
            "{claim}"
        );
        let id = r["shareID"].as_str().unwrap_or_else(|| panic!("no shareID: {claim}")).to_string();
        // Its CDI device is the share's: the share ID in its name, and in the CDI spec.
        let cdi = p["cdiIds"][0].as_str().unwrap();
        assert!(cdi.starts_with("k8s.gpu.example.com/claim=") && cdi.ends_with(&format!("-dev-0-share-{id}")), "{p}");
        shares.push((p["uid"].as_str().unwrap().to_string(), id, cdi.to_string()));
    }
    assert_ne!(shares[0].1, shares[1].1, "two shares, two IDs");
    assert_ne!(shares[0].2, shares[1].2, "two shares, two CDI devices");
    for (uid, id, _) in &shares {
        let spec = std::fs::read_to_string(t.p(&format!("cdi/dpctl-dra-{DRIVER}-{uid}.json"))).unwrap();
        assert!(spec.contains(&format!("DPCTL_DRA_SHARE={id}")), "{spec}");
    }
    // The driver's prepare events name each share and its CDI device.
    dlog.wait_until(20, |s| s.matches("\"shareID\"").count() >= 2).await.expect("the driver logs both shares");
    let mut logged: Vec<(String, String, String)> = events(&dlog, "prepare")
        .iter()
        .flat_map(|e| e["shares"].as_array().cloned().unwrap_or_default())
        .map(|s| {
            let cdi = s["cdiDeviceIds"][0].as_str().unwrap().to_string();
            (s["claim"].as_str().unwrap().to_string(), s["shareID"].as_str().unwrap().to_string(), cdi)
        })
        .collect();
    logged.sort();
    shares.sort();
    assert_eq!(logged, shares, "{}", dlog.seen());

    // PodResources: both shares of dev-0.
    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    let v: Value = serde_json::from_str(&pr.stdout).unwrap();
    let mut listed: Vec<String> = v["podResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let cr = &p["containers"][0]["dynamicResources"][0]["claimResources"][0];
            assert_eq!(cr["deviceName"], "dev-0", "{v}");
            cr["shareId"].as_str().unwrap_or_else(|| panic!("no shareId: {v}")).to_string()
        })
        .collect();
    listed.sort();
    let mut ids: Vec<String> = shares.iter().map(|s| s.1.clone()).collect();
    ids.sort();
    assert_eq!(listed, ids, "{v}");

    // A third 3Gi share would exceed the device's 8Gi: not allocated, the pod not started.
    t.write("c.yaml", &pod("c"));
    log.wait_until(20, |s| {
        s.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["event"] == "claim-prepare-failed" && v["pod"] == "ml/c")
    })
    .await
    .expect("pod c's claim cannot be allocated");
    let failed = events(&log, "claim-prepare-failed");
    let failed = failed.iter().find(|f| f["pod"] == "ml/c").unwrap();
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("capacity gpu.example.com/memory: 3Gi more would exceed 8Gi (6Gi allocated)"),
        "{failed}"
    );
    assert_eq!(events(&log, "claim-allocated").len(), 2, "{}", log.seen());
    assert!(!running(&log.seen(), "ml/c"), "{}", log.seen());

    stop_child(drv).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// The node-allocatable resources `--node-allocatable` publishes, as the
/// local API server stores them: dropped with the alpha gate off (its
/// default), kept with `--feature-gates DRANodeAllocatableResources=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_allocatable_resources_are_kept_only_with_their_gate_on() {
    for (gates, kept) in [(None, false), (Some("DRANodeAllocatableResources=true"), true)] {
        let t = DraTree::new();
        let mut args = vec!["--api-server", "127.0.0.1:0"];
        if let Some(g) = gates {
            args.extend(["--feature-gates", g]);
        }
        let mut kubelet = mock_kubelet_on(&t.root, &args).spawn().unwrap();
        let mut log = Tail::stdout(&mut kubelet);
        log.wait_for("\"event\":\"api-server\"", 1).await;
        let api = kube::load_kubeconfig(&t.p("kubeconfig")).unwrap();
        let (drv, mut dlog) = driver(&t, &["--devices", "2", "--node-allocatable", "cpu=2,memory=4Gi"]);
        log.wait_for("\"event\":\"dra-registered\"", 1).await;
        dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
        let (code, slices) = call(&api, "GET", "/apis/resource.k8s.io/v1/resourceslices").await;
        assert_eq!(code, 200, "{slices}");
        let devs = slices["items"][0]["spec"]["devices"].as_array().unwrap().clone();
        assert_eq!(devs.len(), 2, "{slices}");
        for d in devs {
            let want = kept.then(|| {
                json!({"cpu": {"mapping": {"deviceMultiplier": "2"}}, "memory": {"mapping": {"deviceMultiplier": "4Gi"}}})
            });
            assert_eq!(d.get("nodeAllocatableResources").cloned(), want, "gates {gates:?}: {slices}");
        }
        stop_child(drv).await;
        stop_tailed(kubelet, log).await.expect_code(0);
    }
}

/// DRAConsumableCapacity per version (alpha, off, in 1.34–1.35): on
/// `--kubelet-version 1.35` the local API server drops the published
/// device's allowMultipleAllocations and request policy and the scheduler's
/// part gives the device to one claim whole (no shareID): the second pod's
/// claim is not allocated. With `--feature-gates DRAConsumableCapacity=true`
/// the two claims share the device, as on 1.36 and later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_35_two_claims_share_a_device_only_with_the_consumable_capacity_gate_on() {
    for gate in [false, true] {
        let t = DraTree::new();
        let mut args = vec!["--api-server", "127.0.0.1:0", "--kubelet-version", "1.35"];
        if gate {
            args.extend(["--feature-gates", "DRAConsumableCapacity=true"]);
        }
        let mut kubelet = mock_kubelet_on(&t.root, &args).spawn().unwrap();
        let mut log = Tail::stdout(&mut kubelet);
        log.wait_for("\"event\":\"api-server\"", 1).await;
        let api = kube::load_kubeconfig(&t.p("kubeconfig")).unwrap();
        let (drv, mut dlog) = driver(&t, &["--devices", "1", "--shared-capacity", "memory=8Gi/default=1Gi/step=1Gi"]);
        log.wait_for("\"event\":\"dra-registered\"", 1).await;
        dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
        let (code, slices) = call(&api, "GET", "/apis/resource.k8s.io/v1/resourceslices").await;
        assert_eq!(code, 200, "{slices}");
        let dev = &slices["items"][0]["spec"]["devices"][0];
        assert_eq!(dev.get("allowMultipleAllocations").is_some(), gate, "gate {gate}: {slices}");
        assert_eq!(dev["capacity"]["memory"].get("requestPolicy").is_some(), gate, "gate {gate}: {slices}");
        t.write("class.yaml", CLASS);
        t.write("template.yaml", TEMPLATE);
        log.wait_for("\"event\":\"dra-object\"", 2).await;
        t.write("a.yaml", &pod("a"));
        log.wait_for("\"event\":\"claim-prepared\"", 1).await;
        t.write("b.yaml", &pod("b"));
        let settled = log
            .wait_until(20, |s| {
                let lines = || s.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
                let b_failed = lines().any(|v| v["event"] == "claim-prepare-failed" && v["pod"] == "ml/b");
                running(s, "ml/b") || b_failed
            })
            .await;
        settled.unwrap_or_else(|seen| panic!("gate {gate}: pod b had no outcome:\n{seen}"));
        let allocated = events(&log, "claim-allocated");
        let ids: Vec<Option<String>> = {
            let mut out = Vec::new();
            for a in &allocated {
                let (ns, name) = a["claim"].as_str().unwrap().split_once('/').unwrap();
                let (code, claim) =
                    call(&api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}")).await;
                assert_eq!(code, 200, "{claim}");
                let r = &claim["status"]["allocation"]["devices"]["results"][0];
                assert_eq!(r["device"], "dev-0", "{claim}");
                out.push(r["shareID"].as_str().map(str::to_string));
            }
            out
        };
        if gate {
            assert_eq!(ids.len(), 2, "{}", log.seen());
            assert!(ids.iter().all(Option::is_some) && ids[0] != ids[1], "two shares: {ids:?}");
            log.wait_until(20, |s| running(s, "ml/a") && running(s, "ml/b")).await.expect("both pods Running");
        } else {
            assert_eq!(ids, [None], "one claim, the whole device: {}", log.seen());
            let failed = events(&log, "claim-prepare-failed");
            let failed = failed.iter().find(|f| f["pod"] == "ml/b").unwrap_or_else(|| panic!("{}", log.seen()));
            let e = failed["error"].as_str().unwrap();
            assert!(e.contains("1 match, 0 of them free"), "{e}");
            assert!(!running(&log.seen(), "ml/b"), "{}", log.seen());
        }
        stop_child(drv).await;
        stop_tailed(kubelet, log).await.expect_code(0);
    }
}

/// `dpctl demo --dra --shares --once`: two claims on the one device, each
/// row of PodResources its own shareID and the CDI device named by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_dra_with_shares_shows_two_claims_sharing_one_device() {
    let r = run_cmd_within(dpctl_cmd(&["demo", "--dra", "--shares", "--once"]), 60).await;
    r.expect_code(0);
    let out = &r.stdout;
    let mut ids = Vec::new();
    for pod in ["demo-trainer ", "demo-trainer-2 "] {
        let row = out.lines().find(|l| l.trim_start().starts_with(pod)).unwrap_or_else(|| panic!("{pod}: {out}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.len(), 7, "{row}");
        assert_eq!(cols[4], "node-1/gpu-0", "{row}");
        let share = cols[6];
        assert_eq!(share.len(), 36, "a UUID: {row}");
        assert!(cols[5].ends_with(&format!("-gpu-0-share-{share}")), "{row}");
        ids.push(share.to_string());
    }
    assert_ne!(ids[0], ids[1], "{out}");
    assert!(out.contains("Run `dpctl demo --dra --shares` (without --once)"), "{out}");
    let refused = run_cmd_within(dpctl_cmd(&["demo", "--shares", "--once"]), 60).await;
    assert_eq!(refused.code, 2, "--shares needs --dra: {}", refused.stderr);
}

/// One claim with two requests, each given a share of the one device (two
/// results on dev-0, two shareIDs): the driver answers a device per result,
/// each its request name, shareID and CDI device, so each container gets
/// its own share (before, the answer was keyed by device and both results
/// named the last request: a container got nothing, DRA-EXT-001's failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_claim_with_two_shares_of_a_device_answers_each_request_its_own_share() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let (drv, mut dlog) = driver(&t, &["--devices", "1", "--shared-capacity", "memory=8Gi/default=1Gi/step=1Gi"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    t.write("class.yaml", CLASS);
    t.write(
        "claim.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: two, namespace: ml}\nspec:\n  devices:\n    requests:\n    - {name: one, exactly: {deviceClassName: gpu}}\n    - {name: two, exactly: {deviceClassName: gpu}}\n",
    );
    log.wait_for("\"event\":\"dra-object\"", 2).await;
    t.write(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml, uid: pod-p}\nspec:\n  resourceClaims: [{name: g, resourceClaimName: two}]\n  containers:\n  - {name: one, resources: {claims: [{name: g, request: one}]}}\n  - {name: two, resources: {claims: [{name: g, request: two}]}}\n",
    );
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    // The driver's answer: a share per request, each its own CDI device.
    dlog.wait_until(20, |s| s.matches("\"shareID\"").count() >= 2).await.expect("the driver logs both shares");
    let logged: Vec<Value> =
        events(&dlog, "prepare").iter().flat_map(|e| e["shares"].as_array().cloned().unwrap_or_default()).collect();
    let mut requests: Vec<&str> = logged.iter().map(|x| x["request"].as_str().unwrap()).collect();
    requests.sort();
    assert_eq!(requests, ["one", "two"], "{}", dlog.seen());
    let shares: Vec<String> = logged.iter().map(|x| x["shareID"].as_str().unwrap().to_string()).collect();
    for x in &logged {
        let id = x["shareID"].as_str().unwrap();
        assert_eq!(x["cdiDeviceIds"].as_array().unwrap().len(), 1, "{x}");
        assert!(x["cdiDeviceIds"][0].as_str().unwrap().ends_with(&format!("-dev-0-share-{id}")), "{x}");
    }
    // The kubelet's view: each container the CDI device of its own request's share.
    let node = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins")), "-o", "json"]).await;
    let v: Value = serde_json::from_str(&node.stdout).unwrap();
    let pod = v["draPods"].as_array().or(v["pods"].as_array()).into_iter().flatten().find(|p| p["pod"] == "ml/p");
    let cdi = &pod.unwrap_or_else(|| panic!("no pod ml/p: {v}"))["cdiDevices"];
    for container in ["one", "two"] {
        let got = cdi[container].as_array().unwrap_or_else(|| panic!("{container}: {cdi}"));
        let ids: Vec<&str> = got.iter().filter_map(Value::as_str).collect();
        let of = logged.iter().find(|x| x["request"] == container).unwrap()["cdiDeviceIds"][0].as_str().unwrap();
        assert_eq!(ids, [of], "container {container}: {cdi}");
    }
    assert_ne!(shares[0], shares[1], "{}", dlog.seen());
    stop_child(drv).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}
