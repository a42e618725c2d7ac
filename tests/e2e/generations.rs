//! The mock kubelet's generations and the kubelet transitions of the
//! upstream node e2e tests (test/e2e_node/device_plugin_test.go) that dpctl
//! can express, against the real binary.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use dpctl::api::deviceplugin::registration_client::RegistrationClient;
use dpctl::api::deviceplugin::RegisterRequest;
use dpctl::api::podresources::pod_resources_lister_client::PodResourcesListerClient;
use dpctl::api::podresources::{AllocatableResourcesRequest, ListPodResourcesRequest, PodResources};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

async fn register(kubelet: &Path, resource: &str, endpoint: &str) {
    let mut c = RegistrationClient::new(dpctl::core::transport::dial(kubelet, Duration::from_secs(5)).await.unwrap());
    let req = RegisterRequest {
        version: "v1beta1".into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: None,
    };
    c.register(req).await.unwrap();
}

async fn pr_client(n: &Node) -> PodResourcesListerClient<tonic::transport::Channel> {
    PodResourcesListerClient::new(dpctl::core::transport::dial(&n.pr(), Duration::from_secs(5)).await.unwrap())
}

async fn pr_list(n: &Node) -> Vec<PodResources> {
    pr_client(n).await.list(ListPodResourcesRequest {}).await.unwrap().into_inner().pod_resources
}

/// Pod UIDs → allocated device IDs, from the checkpoint file.
fn checkpoint_pods(n: &Node) -> BTreeSet<String> {
    let text = std::fs::read_to_string(n.dp().join("kubelet_internal_checkpoint")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // no allocations: null, as the kubelet writes Go's nil slice
    v["Data"]["PodDeviceEntries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["PodUID"].as_str().unwrap().to_string())
        .collect()
}

/// `dpctl node` once the mock answers (it says "restarting" between generations).
async fn wait_state(n: &Node, what: &str, f: impl Fn(&serde_json::Value) -> bool) {
    for _ in 0..250 {
        let r = dpctl(&["node", "--plugin-dir", s(&n.dp()), "-o", "json"]).await;
        if r.code == 0 && f(&serde_json::from_str(&r.stdout).unwrap()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    panic!("timed out waiting for {what}");
}

fn resource_state(v: &serde_json::Value, name: &str) -> Option<String> {
    v["resources"]
        .as_array()?
        .iter()
        .find(|r| r["resource"] == name)
        .map(|r| r["state"].as_str().unwrap_or("").to_string())
}

/// Admitted pods: name → UID.
async fn admitted(n: &Node) -> Vec<(String, String)> {
    let v = n.node().await;
    // no pods: the field is omitted (a default value)
    v["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["uid"].as_str().unwrap().to_string()))
        .collect()
}

/// Regression: a restart (SIGHUP) during a grace period and during
/// admissions, repeated. The old generation's grace timer and checkpoint
/// writer must be gone before the new generation starts: after every restart
/// the checkpoint holds every allocation acknowledged before it, and no event
/// of an older generation follows a `restarted` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_during_grace_periods_and_admissions_keeps_generations_apart() {
    let n = Node::new();
    let k = n.start(&["--grace-period", "3s"]).await;
    let pid = k.id().unwrap().to_string();
    let sv = n.serve(&["--resource", "vendor.example/b", "--count", "64", "--allocate-latency", "100ms"]).await;
    let mut acknowledged: BTreeSet<String> = BTreeSet::new();
    for round in 0..3 {
        wait_state(&n, "vendor.example/b serving", |v| {
            resource_state(v, "vendor.example/b").as_deref() == Some("running")
        })
        .await;
        // a plugin that stops: its grace period is running when the restart comes
        let sock = format!("a{round}.sock");
        let a = start_plugin(&n.dp().join(&sock), four_devices(), Behaviour::default()).await;
        register(&n.kubelet(), "vendor.example/a", &sock).await;
        n.wait_resource("vendor.example/a", "running", |r| r["state"] == "running" && r["capacity"] == 4).await;
        drop(a); // ends its ListAndWatch stream
        n.wait_resource("vendor.example/a", "stopped", |r| r["state"] == "stopped").await;
        // admissions in flight (Allocate takes 100 ms each)
        for j in 0..4 {
            n.pod(&format!("p{round}-{j}.yaml"), &pod_yaml(&format!("p{round}-{j}"), "vendor.example/b", 1));
        }
        n.wait_pod(&format!("p{round}-0")).await;
        acknowledged.extend(admitted(&n).await.into_iter().map(|(_, uid)| uid));
        std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        // the new generation restored "a" from the checkpoint: waiting, not stopped
        wait_state(&n, "vendor.example/a restored by the new generation", |v| {
            resource_state(v, "vendor.example/a").as_deref() == Some("waiting")
        })
        .await;
        let cp = checkpoint_pods(&n);
        assert!(acknowledged.is_subset(&cp), "round {round}: acknowledged {acknowledged:?}, checkpoint {cp:?}");
        wait_state(&n, "every pod of the round admitted", |v| {
            // between generations the list can be empty, and empty lists are omitted
            let Some(pods) = v["pods"].as_array() else { return false };
            (0..4).all(|j| pods.iter().any(|p| p["name"] == format!("p{round}-{j}").as_str()))
        })
        .await;
        acknowledged.extend(admitted(&n).await.into_iter().map(|(_, uid)| uid));
    }
    // A pod admitted by the newest generation, then past the grace period of
    // "a": the checkpoint drops "a" once — written by the generation that
    // removed it, which must be the newest, so nothing acknowledged is lost.
    n.pod("last.yaml", &pod_yaml("last", "vendor.example/b", 1));
    n.wait_pod("last").await;
    acknowledged.extend(admitted(&n).await.into_iter().map(|(_, uid)| uid));
    assert_eq!(acknowledged.len(), 13);
    let cp = n.dp().join("kubelet_internal_checkpoint");
    wait_until(15, "the checkpoint without vendor.example/a", || {
        let text = std::fs::read_to_string(&cp).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["Data"]["RegisteredDevices"].get("vendor.example/a").is_none()
    })
    .await;
    let cp = checkpoint_pods(&n);
    assert!(acknowledged.is_subset(&cp), "acknowledged {acknowledged:?}, checkpoint {cp:?}");
    assert_eq!(
        n.resource("vendor.example/a").await.map(|r| r["state"].clone()),
        Some(serde_json::json!("removed")),
        "removed (listed at 0/0) by the running generation"
    );
    stop_child(sv).await;
    let out = stop_child(k).await;
    out.expect_code(0);
    let mut current = 0u64;
    let mut restarts = 0;
    for line in out.stdout.lines() {
        let generation =
            line.split_whitespace().find_map(|w| w.strip_prefix("generation=")).and_then(|g| g.parse::<u64>().ok());
        if line.contains("restarted ") {
            current = generation.unwrap();
            restarts += 1;
        } else if let Some(g) = generation {
            assert!(g >= current, "an event of generation {g} after generation {current} started: {line}");
        }
    }
    assert_eq!(restarts, 3, "{}", out.stdout);
    let removed: Vec<&str> = out.stdout.lines().filter(|l| l.contains("resource-removed")).collect();
    assert!(removed.iter().all(|l| l.contains("generation=3")), "{removed:?}");
}

/// device_plugin_test.go ("Keeps device plugin assignments after the device
/// plugin has been removed" / "…re-registered"): while a plugin is gone its
/// capacity stays and allocatable is 0; once the grace period is over the
/// resource is gone (the kubelet reports capacity and allocatable 0); the
/// pod keeps its devices in PodResources throughout; when the plugin comes
/// back, capacity returns and the assignment still stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_and_allocatable_across_the_grace_period() {
    let n = Node::new();
    let k = n.start(&["--grace-period", "1500ms"]).await;
    let p = start_plugin(&n.dp().join("p.sock"), four_devices(), Behaviour::default()).await;
    register(&n.kubelet(), "vendor.example/foo", "p.sock").await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
    n.wait_pod("a").await;
    let devices_of_a = |l: &[PodResources]| -> Vec<String> {
        l.iter()
            .filter(|p| p.name == "a")
            .flat_map(|p| p.containers.iter().flat_map(|c| c.devices.iter().flat_map(|d| d.device_ids.clone())))
            .collect()
    };
    let before = devices_of_a(&pr_list(&n).await);
    assert_eq!(before.len(), 1);

    drop(p); // ends its ListAndWatch stream
    let r = n.wait_resource("vendor.example/foo", "stopped", |r| r["state"] == "stopped").await;
    assert_eq!(
        (r["capacity"].as_u64(), r["allocatable"].as_u64(), r["allocated"].as_u64()),
        (Some(4), Some(0), Some(1))
    );
    let alloc = pr_client(&n).await.get_allocatable_resources(AllocatableResourcesRequest {}).await.unwrap();
    assert!(alloc.into_inner().devices.is_empty(), "a stopped plugin's devices are not allocatable");
    assert_eq!(devices_of_a(&pr_list(&n).await), before, "assignments kept while the plugin is gone");

    // the grace period ends: listed at 0/0 (state removed), as the kubelet keeps it in the node status
    let r = n.wait_resource("vendor.example/foo", "removed", |r| r["state"] == "removed").await;
    assert_eq!(
        (r["capacity"].as_u64(), r["allocatable"].as_u64(), r["allocated"].as_u64()),
        (Some(0), Some(0), Some(1)),
        "{r}"
    );
    // the checkpoint is rewritten in the background: wait for it
    let cp = n.dp().join("kubelet_internal_checkpoint");
    let read = || std::fs::read_to_string(&cp).unwrap();
    wait_until(10, "the checkpoint without the resource", || {
        !read().contains("\"RegisteredDevices\":{\"vendor.example/foo\"")
    })
    .await;
    let text = read();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["Data"]["RegisteredDevices"].get("vendor.example/foo").is_none(), "{text}");
    assert_eq!(v["Data"]["PodDeviceEntries"].as_array().unwrap().len(), 1, "the pod's allocation stays: {text}");
    assert_eq!(devices_of_a(&pr_list(&n).await), before, "assignments kept after the grace period");

    let _q = start_plugin(&n.dp().join("q.sock"), four_devices(), Behaviour::default()).await;
    register(&n.kubelet(), "vendor.example/foo", "q.sock").await;
    let r = n.wait_resource("vendor.example/foo", "back", |r| r["allocatable"] == 4).await;
    assert_eq!((r["capacity"].as_u64(), r["allocated"].as_u64()), (Some(4), Some(1)));
    assert_eq!(devices_of_a(&pr_list(&n).await), before, "assignments kept after re-registration");
    stop_child(k).await.expect_code(0);
}

/// While a pod's Allocate is in flight, PodResources List already shows the
/// pod, with no devices (released kubelets list every pod the pod manager
/// holds, and record devices only once Allocate answered); `dpctl node` shows
/// it only once admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podresources_while_allocate_is_in_flight() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sv = n.serve(&["--resource", "vendor.example/slow", "--count", "2", "--allocate-latency", "700ms"]).await;
    n.wait_resource("vendor.example/slow", "up", |r| r["allocatable"] == 2).await;
    n.pod("s.yaml", &pod_yaml("s", "vendor.example/slow", 1));
    let mut in_flight = None;
    for _ in 0..250 {
        if let Some(p) = pr_list(&n).await.into_iter().find(|p| p.name == "s") {
            in_flight = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let p = in_flight.expect("the pod is listed while it is admitted");
    assert_eq!(p.containers.len(), 1);
    assert!(p.containers[0].devices.is_empty(), "no devices before Allocate answers: {p:?}");
    assert!(admitted(&n).await.is_empty(), "not admitted yet");
    n.wait_pod("s").await;
    let p = pr_list(&n).await.into_iter().find(|p| p.name == "s").unwrap();
    assert_eq!(p.containers[0].devices.len(), 1, "{p:?}");
    stop_child(sv).await;
    stop_child(k).await.expect_code(0);
}

/// A device reporting two NUMA nodes is recorded under each, in the
/// checkpoint and in PodResources (List and GetAllocatableResources answer
/// one ContainerDevices per device and NUMA node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_numa_devices_are_listed_under_each_node() {
    use dpctl::api::deviceplugin::{NumaNode, TopologyInfo};
    let n = Node::new();
    let k = n.start(&[]).await;
    let mut both = dev("m-0", "Healthy", None);
    both.topology = Some(TopologyInfo { nodes: vec![NumaNode { id: 0 }, NumaNode { id: 1 }] });
    let _p = start_plugin(&n.dp().join("m.sock"), vec![both, dev("m-1", "Healthy", None)], Behaviour::default()).await;
    register(&n.kubelet(), "vendor.example/m", "m.sock").await;
    n.wait_resource("vendor.example/m", "up", |r| r["allocatable"] == 2).await;
    let shape = |devs: &[dpctl::api::podresources::ContainerDevices]| -> Vec<(String, Option<i64>)> {
        let mut v: Vec<(String, Option<i64>)> = devs
            .iter()
            .map(|d| {
                assert_eq!(d.device_ids.len(), 1, "one device per entry: {d:?}");
                (d.device_ids[0].clone(), d.topology.as_ref().map(|t| t.nodes[0].id))
            })
            .collect();
        v.sort();
        v
    };
    let alloc = pr_client(&n).await.get_allocatable_resources(AllocatableResourcesRequest {}).await.unwrap();
    assert_eq!(
        shape(&alloc.into_inner().devices),
        [("m-0".to_string(), Some(0)), ("m-0".to_string(), Some(1)), ("m-1".to_string(), None)]
    );
    // a pod that gets m-0 (ask for both devices)
    n.pod("m.yaml", &pod_yaml("m", "vendor.example/m", 2));
    n.wait_pod("m").await;
    let p = pr_list(&n).await.into_iter().find(|p| p.name == "m").unwrap();
    assert_eq!(
        shape(&p.containers[0].devices),
        [("m-0".to_string(), Some(0)), ("m-0".to_string(), Some(1)), ("m-1".to_string(), None)]
    );
    let text = std::fs::read_to_string(n.dp().join("kubelet_internal_checkpoint")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = &v["Data"]["PodDeviceEntries"][0]["DeviceIDs"];
    assert_eq!(
        (ids["0"].clone(), ids["1"].clone(), ids["-1"].clone()),
        (serde_json::json!(["m-0"]), serde_json::json!(["m-0"]), serde_json::json!(["m-1"])),
        "{text}"
    );
    assert_eq!(n.resource("vendor.example/m").await.unwrap()["allocated"], 2, "counted once");
    stop_child(k).await.expect_code(0);
}
