//! `mock-kubelet --kubelet-version`: each behaviour that differs by kubelet
//! version, on both sides of its boundary, with the real binary, real
//! plugins (`dpctl serve` processes) and real sockets.

use crate::mock_kubelet::{container_devices, pod_yaml, Node};
use crate::support::*;

const FOO: &str = "vendor.example/foo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_checked_and_the_profile_explained() {
    let r = dpctl(&["mock-kubelet", "--kubelet-version", "1.24"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("kubelet version \"1.24\" is not supported (supported: 1.25 to 1.37"), "{}", r.stderr);
    let r = dpctl(&["mock-kubelet", "--kubelet-version", "latest"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("is not a version like 1.37"), "{}", r.stderr);
    let r = dpctl(&["mock-kubelet", "--kubelet-version", "v1.31", "--explain-profile"]).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("kubelet 1.31 profile"), "{}", r.stdout);
    assert!(r.stdout.contains("before 1.37: keyed by resource"), "{}", r.stdout);
    assert!(r.stdout.contains("since 1.29: sidecars get dedicated devices"), "{}", r.stdout);
    assert!(r.stdout.contains("kubernetes#114640"), "{}", r.stdout);
}

/// The message operators search for after a kubelet restart (kubernetes#124345):
/// a pod admitted after the restart, before its plugin is back, is rejected
/// as UnexpectedAdmissionError with that kubelet version's text; a pod
/// restored from the checkpoint keeps its devices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unexpected_admission_error_after_kubelet_restart() {
    for (version, want) in [
        (
            "1.37",
            "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices vendor.example/foo, which is unexpected",
        ),
        (
            "1.26",
            "Allocate failed due to requested number of devices unavailable for vendor.example/foo. Requested: 1, Available: 0, which is unexpected",
        ),
    ] {
        let n = Node::new();
        let k = n.start(&["--kubelet-version", version]).await;
        let sv = n.serve(&["--resource", FOO, "--count", "2"]).await;
        n.wait_resource(FOO, "up", |r| r["allocatable"] == 2).await;
        n.pod("a.yaml", &pod_yaml("a", FOO, 1));
        n.wait_pod("a").await;
        stop_child(sv).await.expect_code(0);
        n.wait_resource(FOO, "stopped", |r| r["state"] == "stopped").await;
        std::process::Command::new("kill").args(["-HUP", &k.id().unwrap().to_string()]).status().unwrap();
        n.wait_resource(FOO, "waiting after the restart", |r| r["state"] == "waiting").await;
        n.pod("b.yaml", &pod_yaml("b", FOO, 1));
        assert_eq!(n.wait_rejected("b.yaml").await, want, "{version}");
        let node = n.node().await;
        assert_eq!(node["rejectedReasons"].as_object().unwrap().values().next().unwrap(), "UnexpectedAdmissionError");
        assert_eq!(node["kubeletVersion"], version);
        let a = n.wait_pod("a").await;
        assert_eq!(container_devices(&a["containers"][0], FOO).len(), 1, "{version}: the restored pod keeps its device");
        let out = stop_child(k).await;
        assert!(out.stdout.contains("pod-rejected") && out.stdout.contains("podReason=UnexpectedAdmissionError"), "{}", out.stdout);
    }
}

fn sidecar_pod() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: s\n  namespace: default\nspec:\n  initContainers:\n  - name: side\n    restartPolicy: Always\n    resources:\n      limits:\n        {FOO}: 1\n  containers:\n  - name: main\n    resources:\n      limits:\n        {FOO}: 1\n"
    )
}

/// Node e2e "Can schedule a pod with a restartable init container": from 1.29
/// the sidecar gets its own device, PodResources lists it (first), the
/// checkpoint keeps it, and both are freed with the pod. On 1.28 it is a
/// plain init container: the app container reuses its device and
/// PodResources lists only the app container (and Get is disabled there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_devices_per_version() {
    let n = Node::new();
    let k = n.start(&["--kubelet-version", "1.37"]).await;
    let sv = n.serve(&["--resource", FOO, "--count", "2"]).await;
    n.wait_resource(FOO, "up", |r| r["allocatable"] == 2).await;
    n.pod("s.yaml", &sidecar_pod());
    let p = n.wait_pod("s").await;
    let side = container_devices(&p["containers"][0], FOO);
    let main = container_devices(&p["containers"][1], FOO);
    assert_eq!(p["containers"][0]["sidecar"], true);
    assert!(side.len() == 1 && main.len() == 1 && side != main, "{side:?} {main:?}");
    assert_eq!(n.resource(FOO).await.unwrap()["allocated"], 2);
    let pr_sock = n.pr();
    for cmd in [vec!["list"], vec!["get", "s"]] {
        let mut args = vec!["podresources"];
        args.extend(cmd.iter().copied());
        args.extend(["--socket", s(&pr_sock), "-o", "json"]);
        let r = dpctl(&args).await;
        r.expect_code(0);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let pr = if cmd[0] == "list" { v["podResources"][0].clone() } else { v["podResources"].clone() };
        let names: Vec<&str> =
            pr["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["side", "main"], "{cmd:?}: {}", r.stdout);
        assert_eq!(pr["containers"][0]["devices"][0]["deviceIds"][0], side[0].as_str(), "{}", r.stdout);
    }
    let cp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(n.dp().join("kubelet_internal_checkpoint")).unwrap()).unwrap();
    let entries = cp["Data"]["PodDeviceEntries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["ContainerName"] == "side"), "{cp}");
    std::fs::remove_file(n.pods().join("s.yaml")).unwrap();
    n.wait_resource(FOO, "freed", |r| r["allocated"] == 0).await;
    stop_child(sv).await;
    stop_child(k).await;

    let n = Node::new();
    let k = n.start(&["--kubelet-version", "1.28"]).await;
    let sv = n.serve(&["--resource", FOO, "--count", "2"]).await;
    n.wait_resource(FOO, "up", |r| r["allocatable"] == 2).await;
    n.pod("s.yaml", &sidecar_pod());
    let p = n.wait_pod("s").await;
    let side = container_devices(&p["containers"][0], FOO);
    let main = container_devices(&p["containers"][1], FOO);
    assert_eq!(side, main, "1.28 reuses the (plain) init container's device");
    let r = dpctl(&["podresources", "list", "--socket", s(&n.pr()), "-o", "json"]).await;
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let names: Vec<&str> =
        v["podResources"][0]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main"]);
    let r = dpctl(&["podresources", "get", "s", "--socket", s(&n.pr())]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("PodResources API Get method disabled"), "{}", r.stderr);
    stop_child(sv).await;
    stop_child(k).await;
}

/// A DaemonSet maxSurge update: a second instance registers on a new socket,
/// then the first exits late. Up to 1.36 the kubelet then disconnects the
/// second instance and allocatable reads 0 (kubernetes#121994); from 1.37
/// the second instance's devices stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_per_version() {
    for (version, survives) in [("1.36", false), ("1.37", true)] {
        let n = Node::new();
        let k = n.start(&["--kubelet-version", version]).await;
        let old = n.serve(&["--resource", FOO, "--count", "2", "--socket-name", "old.sock"]).await;
        n.wait_resource(FOO, "first instance", |r| r["allocatable"] == 2).await;
        let new = n.serve(&["--resource", FOO, "--count", "2", "--socket-name", "new.sock"]).await;
        let r = n
            .wait_resource(FOO, "second instance", |r| {
                r["endpoint"].as_str().is_some_and(|e| e.ends_with("new.sock")) && r["allocatable"] == 2
            })
            .await;
        assert_eq!(r["olderInstances"], 1, "{version}: the first instance still streams: {r}");
        stop_child(old).await.expect_code(0);
        if survives {
            n.wait_resource(FOO, "old instance gone", |r| r["olderInstances"] == 0).await;
            let r = n.resource(FOO).await.unwrap();
            assert_eq!((r["state"].as_str(), r["allocatable"].as_u64()), (Some("running"), Some(2)), "{version}: {r}");
            n.pod("a.yaml", &pod_yaml("a", FOO, 1));
            n.wait_pod("a").await;
        } else {
            let r = n.wait_resource(FOO, "disconnected", |r| r["state"] == "stopped").await;
            assert_eq!((r["capacity"].as_u64(), r["allocatable"].as_u64()), (Some(2), Some(0)), "{version}: {r}");
            assert!(r["endpoint"].as_str().unwrap().ends_with("new.sock"), "the *new* instance was disconnected: {r}");
            n.pod("a.yaml", &pod_yaml("a", FOO, 1));
            assert!(n.wait_rejected("a.yaml").await.contains("no healthy devices present"));
        }
        stop_child(new).await;
        let out = stop_child(k).await;
        if survives {
            assert!(out.stdout.contains("instance-ended"), "{}", out.stdout);
        } else {
            assert!(out.stdout.contains("disconnected=") && out.stdout.contains("new.sock"), "{}", out.stdout);
        }
    }
}

/// `dpctl test --kubelet-version 1.36,1.37`: the suite per profile, results per
/// version in the table, JSON and JUnit (one testsuite per version). `dpctl
/// serve --no-reregister-on-disconnect` does not register again when the kubelet closes its stream, so on
/// 1.36 a rolling update leaves the resource unallocatable (ROLL-001 fails
/// there, with what the node saw); on 1.37 it passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_runs_once_per_kubelet_version() {
    let dir = tmp();
    let junit = dir.path().join("report.xml");
    let bin = env!("CARGO_BIN_EXE_dpctl");
    let args = [
        "-o",
        "json",
        "test",
        "--kubelet-version",
        "1.36,v1.37",
        "--focus",
        "ROLL-001|KRES-005|E2E-001",
        "--junit",
        s(&junit),
        "--",
        bin,
        "serve",
        "--resource",
        FOO,
        "--count",
        "2",
        "--plugin-dir",
        "{plugin-dir}",
        "--retry",
        "--no-reregister-on-disconnect",
    ];
    let run = run_cmd_within(dpctl_cmd(&args), 120).await;
    run.expect_code(1);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["kubeletVersions"], serde_json::json!(["1.36", "1.37"]));
    let results: Vec<(String, String, String)> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (f("kubeletVersion"), f("id"), f("result"))
        })
        .collect();
    let want: Vec<(String, String, String)> = [
        ("1.36", "E2E-001", "PASS"),
        ("1.36", "KRES-005", "PASS"),
        ("1.36", "ROLL-001", "FAIL"),
        ("1.37", "E2E-001", "PASS"),
        ("1.37", "KRES-005", "PASS"),
        ("1.37", "ROLL-001", "PASS"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(results, want, "{}", run.stdout);
    let roll = doc["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == "ROLL-001").unwrap();
    let answer = roll["evidence"]["answer"].as_str().unwrap();
    assert!(
        answer.contains("kubelet 1.36") && answer.contains("disconnected the second (kubernetes#121994)"),
        "{answer}"
    );
    assert!(roll["evidence"]["fix"].as_str().unwrap().contains("register again when the kubelet closes"), "{roll}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"kubelet 1.36\" tests=\"3\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<testsuite name=\"kubelet 1.37\" tests=\"3\" failures=\"0\""), "{xml}");
    crate::suite::check_junit(&junit);

    // The table: each version's lines under its heading, with its summary.
    let mut table_args = args.to_vec();
    table_args.drain(0..2);
    table_args.retain(|a| *a != "--junit" && *a != s(&junit));
    let run = run_cmd_within(dpctl_cmd(&table_args), 120).await;
    run.expect_code(1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let head36 = lines.iter().position(|l| *l == "kubelet 1.36").expect("a heading per version");
    let head37 = lines.iter().position(|l| *l == "kubelet 1.37").expect("a heading per version");
    assert!(head36 < head37, "{}", run.stdout);
    assert!(lines[head36..head37].iter().any(|l| l.starts_with("FAIL  ROLL-001")), "{}", run.stdout);
    assert!(lines.iter().any(|l| l.starts_with("kubelet 1.36: 2 passed, 1 failed")), "{}", run.stdout);
    assert!(lines.iter().any(|l| l.starts_with("kubelet 1.37: 3 passed, 0 failed")), "{}", run.stdout);
}

/// PodResources Get per version: absent before 1.27 (Unimplemented), behind
/// the KubeletPodResourcesGet gate (off) from 1.27 to 1.33, served from 1.34.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_resources_get_per_version() {
    for (version, code, want) in [
        ("1.26", 1, "Unimplemented"),
        ("1.33", 1, "PodResources API Get method disabled"),
        ("1.34", 1, "pod nope in namespace default not found"),
    ] {
        let n = Node::new();
        let k = n.start(&["--kubelet-version", version]).await;
        let pr = n.pr();
        wait_until(10, "the PodResources socket", || std::os::unix::net::UnixStream::connect(&pr).is_ok()).await;
        let r = dpctl(&["podresources", "get", "nope", "--socket", s(&pr)]).await;
        r.expect_code(code);
        assert!(r.stderr.contains(want), "{version}: {}", r.stderr);
        stop_child(k).await;
    }
}

/// What ROLL-001's fix says works: a plugin that registers again when the
/// kubelet closed its stream and opened none (`serve --reregister-on-disconnect`)
/// keeps the resource allocatable through a rolling update on 1.36 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_again_after_a_disconnect_survives_a_rolling_update_on_1_36() {
    let bin = env!("CARGO_BIN_EXE_dpctl");
    let args = [
        "-o",
        "json",
        "test",
        "--kubelet-version",
        "1.36",
        "--focus",
        "ROLL-001",
        "--",
        bin,
        "serve",
        "--resource",
        FOO,
        "--count",
        "2",
        "--plugin-dir",
        "{plugin-dir}",
        "--retry",
        "--reregister-on-disconnect",
    ];
    let run = run_cmd_within(dpctl_cmd(&args), 120).await;
    run.expect_code(0);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let roll = &doc["scenarios"][0];
    assert_eq!((roll["id"].as_str(), roll["result"].as_str()), (Some("ROLL-001"), Some("PASS")), "{roll}");
    let detail = roll["detail"].as_str().unwrap();
    assert!(
        detail.contains("disconnected the second (kubernetes#121994)") && detail.contains("allocatable 2 again"),
        "{detail}"
    );
}

/// TestDevicePluginReRegistration with real plugins: Dev1, Dev2 from
/// `device-plugin.sock`, again from `device-plugin.sock.new`, then Dev3 from
/// `device-plugin.sock.third`: capacity = allocatable = 1 on both sides of
/// kubernetes#135437 (the last snapshot of any instance is the node's
/// devices), with the earlier instances still streaming. From 1.37 a plugin
/// registering from the socket of a live instance is refused ("device plugin
/// already connected: <socket>") and the node is unchanged; up to 1.36 it
/// replaces the current endpoint. From 1.37 the current instance's exit
/// leaves a survivor current and the devices as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_registration_per_version() {
    for version in ["1.36", "1.37"] {
        let n = Node::new();
        let k = n.start(&["--kubelet-version", version]).await;
        let mut plugins = Vec::new();
        for (sock, devices, want) in [
            ("device-plugin.sock", "Dev1,Dev2", 2),
            ("device-plugin.sock.new", "Dev1,Dev2", 2),
            ("device-plugin.sock.third", "Dev3", 1),
        ] {
            plugins.push(n.serve(&["--resource", FOO, "--devices", devices, "--socket-name", sock]).await);
            let r = n
                .wait_resource(FOO, sock, |r| {
                    r["endpoint"].as_str().is_some_and(|e| e.ends_with(sock)) && r["allocatable"] == want
                })
                .await;
            assert_eq!(r["capacity"], want, "{version} {sock}: capacity should equal allocatable: {r}");
        }
        let r = n.resource(FOO).await.unwrap();
        let ids: Vec<&str> = r["devices"].as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!((ids, r["olderInstances"].as_u64()), (vec!["Dev3"], Some(2)), "{version}: {r}");
        // a fourth registration names the socket of the live second instance
        // (the kubelet dials back to that live server: upstream's fast-takeover race)
        let dp = n.dp();
        let again = ["register", "--plugin-dir", s(&dp), "--resource", FOO, "--endpoint", "device-plugin.sock.new"];
        let run = dpctl(&again).await;
        if version == "1.37" {
            assert_ne!(run.code, 0, "{version}: refused: {} {}", run.stdout, run.stderr);
            let said = format!("{}{}", run.stdout, run.stderr);
            assert!(
                said.contains("device plugin already connected: ") && said.contains("device-plugin.sock.new"),
                "{said}"
            );
            let r = n.resource(FOO).await.unwrap();
            assert!(r["endpoint"].as_str().unwrap().ends_with(".third") && r["capacity"] == 1, "unchanged: {r}");
            assert_eq!(r["olderInstances"], 2, "unchanged: {r}");
            // the current (third) instance exits: the newest survivor is current, the devices stay
            stop_child(plugins.pop().unwrap()).await.expect_code(0);
            let r = n.wait_resource(FOO, "survivor", |r| r["olderInstances"] == 1).await;
            assert!(r["endpoint"].as_str().unwrap().ends_with("device-plugin.sock.new"), "{r}");
            let numbers = (r["state"].as_str(), r["capacity"].as_u64(), r["allocatable"].as_u64());
            assert_eq!(numbers, (Some("running"), Some(1), Some(1)), "{r}");
        } else {
            run.expect_code(0);
            let r = n
                .wait_resource(FOO, "the fourth replaces", |r| {
                    r["endpoint"].as_str().is_some_and(|e| e.ends_with("device-plugin.sock.new")) && r["capacity"] == 2
                })
                .await;
            assert_eq!(r["olderInstances"], 3, "{version}: nothing is closed: {r}");
        }
        for p in plugins {
            stop_child(p).await;
        }
        let out = stop_child(k).await;
        if version == "1.37" {
            assert!(
                out.stdout.contains("registration-rejected") && out.stdout.contains("already connected"),
                "{}",
                out.stdout
            );
        }
    }
}

/// `dpctl test --dra --kubelet-version 1.32,1.34,1.37` runs the DRA suite once
/// per version against `dpctl dra serve`, which passes on each: 1.32 calls
/// v1beta1 (kubernetes#127511) and keeps one instance per driver (rolling
/// updates from 1.33, #129832); 1.34 has v1 (#132700) but opens no health
/// stream by default (KEP-4680 on by default from 1.36); 1.37 does both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dra_suite_runs_once_per_kubelet_version_and_dra_serve_passes_each() {
    let bin = env!("CARGO_BIN_EXE_dpctl");
    let args = [
        "--timeout",
        "2s",
        "-o",
        "json",
        "test",
        "--dra",
        "--kubelet-version",
        "1.32,1.34,1.37",
        "--focus",
        "DRA-REG-00|DRA-PREP-001|DRA-HEALTH-001|DRA-ROLL-001",
        "--",
        bin,
        "--kubelet-root-dir",
        "{kubelet-root-dir}",
        "dra",
        "serve",
        "--driver",
        "gpu.example.com",
        "--cdi-dir",
        "{cdi-dir}",
        "--kubeconfig",
        "{kubeconfig}",
        "--node-name",
        "{node-name}",
        "--rolling-update",
        "{rolling-uid}",
    ];
    let run = run_cmd_within(dpctl_cmd(&args), 180).await;
    run.expect_code(0);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["kubeletVersions"], serde_json::json!(["1.32", "1.34", "1.37"]));
    let results: Vec<String> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            format!("{} {} {}", f("kubeletVersion"), f("id"), f("result"))
        })
        .collect();
    let want = [
        "1.32 DRA-REG-001 PASS",
        "1.32 DRA-REG-002 PASS",
        "1.32 DRA-PREP-001 PASS",
        "1.32 DRA-HEALTH-001 SKIP",
        "1.32 DRA-ROLL-001 SKIP",
        "1.34 DRA-REG-001 PASS",
        "1.34 DRA-REG-002 PASS",
        "1.34 DRA-PREP-001 PASS",
        "1.34 DRA-HEALTH-001 SKIP",
        "1.34 DRA-ROLL-001 PASS",
        "1.37 DRA-REG-001 PASS",
        "1.37 DRA-REG-002 PASS",
        "1.37 DRA-PREP-001 PASS",
        "1.37 DRA-HEALTH-001 PASS",
        "1.37 DRA-ROLL-001 PASS",
    ];
    assert_eq!(results, want, "{}", run.stdout);
    let text = run.stdout.as_str();
    assert!(text.contains("kubelet 1.32: v1beta1.DRAPlugin"), "REG-002 says what 1.32 speaks: {text}");
    assert!(text.contains("kubelet 1.32 keeps one instance per driver"), "{text}");
    assert!(text.contains("kubelet 1.34 opens no health stream"), "{text}");
}

/// A kubelet before structured-parameters DRA (≤ 1.30) has no DRAPlugin
/// handler: the plugin watcher answers NotifyRegistrationStatus(false) with
/// operation_generator.go's text; 1.31 has one (kubernetes#125163).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_30_kubelet_has_no_dra_plugin_handler_and_1_31_has_one() {
    for (version, handled) in [("1.30", false), ("1.31", true)] {
        let tree = DraTree::new();
        let mut k = mock_kubelet_on(&tree.root, &["--kubelet-version", version]).spawn().unwrap();
        let mut log = Tail::stdout(&mut k);
        let d = tree.driver("gpu.example.com", &[]);
        if handled {
            log.wait_for("\"dra-registered\"", 1).await;
            assert!(log.seen().contains("\"service\":\"v1alpha3.NodeService\""), "1.31 calls v1alpha4: {}", log.seen());
        } else {
            log.wait_for("no handler registered for plugin type: DRAPlugin at socket", 1).await;
            assert!(!log.seen().contains("\"dra-registered\""), "{}", log.seen());
        }
        let _ = stop_child(d).await;
        let _ = stop_tailed(k, log).await;
    }
}
