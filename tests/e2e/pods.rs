//! The kubelet's pods API (pods/v1alpha1, KEP-4188) end to end: `dpctl
//! mock-kubelet` serves it on `<root>/pods-api/pods-api.sock` where the
//! version's PodsAPI gate is on (1.37 by default, 1.36 when turned on),
//! `dpctl pods` reads it, upstream's generated client and v1.Pod decode it,
//! and a version without it has no socket (the client says which kubelets
//! serve it).

use crate::support::*;
use serde_json::Value;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: ml, uid: pod-1}\nspec:\n  containers: [{name: main}]\n";
const SECOND: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: second, namespace: ml, uid: pod-2}\nspec:\n  containers: [{name: main}]\n";

fn kubelet(t: &DraTree, extra: &[&str]) -> (tokio::process::Child, Tail) {
    let mut child = mock_kubelet_on(&t.root, extra).spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail)
}

fn socket(t: &DraTree) -> String {
    t.p("pods-api/pods-api.sock").display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_37_the_pods_api_lists_gets_and_watches_the_kubelets_pods_and_upstreams_client_reads_them() {
    let t = DraTree::new();
    let (k, mut log) = kubelet(&t, &["--kubelet-version", "1.37"]);
    log.wait_for("\"event\":\"pods-api\"", 1).await;
    t.write("pod.yaml", POD);
    log.wait_for("\"phase\":\"Running\"", 1).await;
    let sock = socket(&t);

    let l = dpctl(&["pods", "list", "--socket", &sock, "-o", "json"]).await;
    l.expect_code(0);
    let v: Value = serde_json::from_str(&l.stdout).unwrap();
    assert_eq!(v["kind"], "PodList", "{v}");
    let p = &v["items"][0];
    assert_eq!(
        (p["metadata"]["name"].as_str(), p["metadata"]["uid"].as_str()),
        (Some("trainer"), Some("pod-1")),
        "{v}"
    );
    assert_eq!(p["status"]["phase"], "Running", "{v}");
    assert_eq!(p["spec"]["containers"][0]["name"], "main", "{v}");
    let table = dpctl(&["pods", "list", "--socket", &sock]).await;
    table.expect_code(0);
    assert!(
        table.stdout.contains("NAMESPACE") && table.stdout.contains("trainer") && table.stdout.contains("1/1"),
        "{}",
        table.stdout
    );

    // GetPod by UID, and by name in -n; an unknown one is the kubelet's NotFound.
    let g = dpctl(&["pods", "get", "pod-1", "--socket", &sock, "-o", "json"]).await;
    g.expect_code(0);
    assert_eq!(serde_json::from_str::<Value>(&g.stdout).unwrap()["metadata"]["name"], "trainer");
    let by_name = dpctl(&["pods", "get", "trainer", "-n", "ml", "--socket", &sock, "-o", "yaml"]).await;
    by_name.expect_code(0);
    assert!(by_name.stdout.contains("uid: pod-1"), "{}", by_name.stdout);
    let missing = dpctl(&["pods", "get", "nope", "--socket", &sock]).await;
    missing.expect_code(1);
    assert!(missing.stderr.contains("NotFound: pod with UID nope not found"), "{}", missing.stderr);

    // WatchPods: the pod ADDED, INITIAL_SYNC_COMPLETE, then a new pod and its deletion.
    let mut w = dpctl_cmd(&["pods", "watch", "--socket", &sock, "-o", "json"]);
    w.stdout(std::process::Stdio::piped());
    let mut watch = w.spawn().unwrap();
    let mut events = Tail::stdout(&mut watch);
    events.wait_for("INITIAL_SYNC_COMPLETE", 1).await;
    t.write("second.yaml", SECOND);
    events.wait_for("\"name\":\"second\"", 1).await;
    std::fs::remove_file(t.p("manifests/second.yaml")).unwrap();
    events.wait_for("\"DELETED\"", 1).await;
    let lines: Vec<Value> = events.seen().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(&kinds[..2], ["ADDED", "INITIAL_SYNC_COMPLETE"], "{lines:?}");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "trainer");
    let second: Vec<&Value> = lines.iter().filter(|e| e["object"]["metadata"]["name"] == "second").collect();
    assert_eq!(second[0]["type"], "ADDED", "{lines:?}");
    let gone = second.last().unwrap();
    assert_eq!(gone["type"], "DELETED", "{lines:?}");
    // OnPodRemoved: name, namespace and UID only.
    assert_eq!(gone["object"]["metadata"]["uid"], "pod-2");
    assert!(gone["object"].get("status").is_none(), "{gone}");
    stop_child(watch).await;

    // Upstream's generated client and v1.Pod.Unmarshal read the same.
    if let Some(bin) = upstream_peer("podsclient") {
        let out = tokio::process::Command::new(bin).args([sock.as_str(), "pod-1"]).output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let got: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let listed: Vec<&Value> = got.iter().filter(|e| e["call"] == "ListPods").collect();
        assert_eq!(listed.len(), 1, "{text}");
        assert_eq!(listed[0]["pod"]["metadata"]["uid"], "pod-1", "{text}");
        assert_eq!(listed[0]["pod"]["status"]["phase"], "Running", "{text}");
        let get = got.iter().find(|e| e["call"] == "GetPod").unwrap();
        assert_eq!(get["pod"]["spec"]["nodeName"], "dpctl-node", "{text}");
        assert_eq!(got.last().unwrap()["type"], "INITIAL_SYNC_COMPLETE", "{text}");
    }
    stop_tailed(k, log).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_36_the_pods_api_is_off_until_its_gate_is_turned_on() {
    let t = DraTree::new();
    let (k, mut log) = kubelet(&t, &["--kubelet-version", "1.36"]);
    log.wait_for("\"event\":\"started\"", 1).await;
    t.write("pod.yaml", POD);
    log.wait_for("\"phase\":\"Running\"", 1).await;
    let sock = socket(&t);
    let r = dpctl(&["pods", "list", "--socket", &sock]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("PodsAPI feature gate (alpha, off, in 1.36"), "{}", r.stderr);
    assert!(!log.seen().contains("\"event\":\"pods-api\""));
    stop_tailed(k, log).await.expect_code(0);

    let (k, mut log) = kubelet(&t, &["--kubelet-version", "1.36", "--feature-gates", "PodsAPI=true"]);
    log.wait_for("\"event\":\"pods-api\"", 1).await;
    log.wait_for("\"phase\":\"Running\"", 1).await;
    let r = dpctl(&["pods", "list", "--socket", &sock, "-o", "json"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("\"uid\": \"pod-1\""), "{}", r.stdout);
    stop_tailed(k, log).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_35_there_is_no_pods_api_and_no_gate_for_it() {
    let t = DraTree::new();
    let bad = mock_kubelet_on(&t.root, &["--kubelet-version", "1.35", "--feature-gates", "PodsAPI=true"])
        .output()
        .await
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("kubelet 1.35 has no such gate"));
    let (k, mut log) = kubelet(&t, &["--kubelet-version", "1.35"]);
    log.wait_for("\"event\":\"started\"", 1).await;
    let r = dpctl(&["pods", "watch", "--socket", &socket(&t)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("absent before 1.36"), "{}", r.stderr);
    stop_tailed(k, log).await.expect_code(0);
}
