//! record / replay: a serve session recorded through mock-kubelet, replayed
//! as the plugin and as the kubelet.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use serde_json::Value;

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const SERVE: [&str; 10] = [
    "--resource",
    "vendor.example/foo",
    "--count",
    "4",
    "--numa-nodes",
    "2",
    "--preferred-allocation",
    "--env",
    "FOO={ids}",
    "--retry",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_a_session_then_replay_it_both_ways() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let mut args = SERVE.to_vec();
    args.extend(["--socket-name", "foo.sock"]);
    let sv = n.serve(&args).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    let trace = n.dir.path().join("trace.jsonl");
    let dp = n.dp();
    let rec = dpctl_cmd(&[
        "record",
        "--plugin",
        s(&dp.join("foo.sock")),
        "--resource",
        "vendor.example/foo",
        "--out",
        s(&trace),
    ])
    .spawn()
    .unwrap();
    let tap = n
        .wait_resource("vendor.example/foo", "the tap registered", |r| {
            r["endpoint"].as_str().is_some_and(|e| e.contains("dpctl-record-"))
        })
        .await;
    let tap_sock = tap["endpoint"].as_str().unwrap().to_string();
    n.wait_resource("vendor.example/foo", "devices through the tap", |r| r["allocatable"] == 4).await;

    // The health change comes first, so a replay with --no-wait (which jumps
    // to the final device state) presents the kubelet with the same choice.
    dpctl(&["--plugin-dir", s(&dp), "device", "set-health", "foo-3", "Unhealthy"]).await.expect_code(0);
    n.wait_resource("vendor.example/foo", "3 allocatable", |r| r["allocatable"] == 3).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 2));
    let pod = n.wait_pod("a").await;
    let devices = pod["containers"][0]["resources"]["vendor.example/foo"].clone();
    let r = dpctl(&["allocate", &tap_sock, "foo-99"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("InvalidArgument"), "{}", r.stderr);

    let out = stop_child(rec).await;
    out.expect_code(0);
    let back = n
        .wait_resource("vendor.example/foo", "the plugin registered again", |r| {
            r["endpoint"].as_str().is_some_and(|e| e.ends_with("foo.sock"))
        })
        .await;
    assert_eq!(back["state"], "running");

    let ev = events(&trace);
    assert_eq!(ev[0]["dpctlTrace"], 1);
    assert_eq!(ev[0]["resource"], "vendor.example/foo");
    assert_eq!(ev[0]["dpctlVersion"], env!("CARGO_PKG_VERSION"));
    let kinds: Vec<&str> = ev[1..].iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"options") && kinds.contains(&"preferred"), "{kinds:?}");
    let law: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "listAndWatch").collect();
    assert!(law.len() >= 2, "{kinds:?}");
    assert!(law.iter().any(|e| e["response"]["devices"][3]["health"] == "Unhealthy"), "the health change is recorded");
    let allocs: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "allocate").collect();
    assert_eq!(allocs.len(), 2, "{kinds:?}");
    assert!(allocs[0]["response"]["containerResponses"][0]["envs"]["FOO"].is_string());
    assert!(allocs[0]["latencyMs"].is_number() && allocs[0]["t"].is_number());
    assert_eq!(allocs[1]["error"]["code"], "InvalidArgument");
    stop_child(sv).await;
    let klog = stop_child(k).await.stdout;
    let admitted = |log: &str| {
        log.lines()
            .find(|l| l.contains("pod-admitted"))
            .map(|l| l.split(" allocations=").nth(1).unwrap().split(' ').next().unwrap().to_string())
    };
    let first_alloc = admitted(&klog).expect("first mock admitted the pod");

    // As the plugin, against a fresh mock kubelet: it sees the same devices and the same allocation.
    let n2 = Node::new();
    let k2 = n2.start(&[]).await;
    let rp = dpctl_cmd(&["replay", s(&trace), "--plugin-dir", s(&n2.dp()), "--no-wait"]).spawn().unwrap();
    let r = n2
        .wait_resource("vendor.example/foo", "replayed devices", |r| r["capacity"] == 4 && r["allocatable"] == 3)
        .await;
    assert_eq!(r["devices"]["foo-3"]["health"], "Unhealthy");
    n2.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 2));
    let pod2 = n2.wait_pod("a").await;
    assert_eq!(pod2["containers"][0]["resources"]["vendor.example/foo"], devices, "same devices as recorded");
    // an unrecorded request gets a NotFound naming it
    let r = dpctl(&["node", "--plugin-dir", s(&n2.dp()), "-o", "json"]).await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let rsock = v["resources"][0]["endpoint"].as_str().unwrap().to_string();
    let r = dpctl(&["allocate", &rsock, "foo-1"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("NotFound: no recorded Allocate matches this request"), "{}", r.stderr);
    stop_child(rp).await.expect_code(0);
    let klog2 = stop_child(k2).await.stdout;
    assert_eq!(
        admitted(&klog2).as_deref(),
        Some(first_alloc.as_str()),
        "the mock's event log shows the same allocation"
    );

    // As the kubelet, against the same configuration: no difference.
    let d = tmp();
    let mut same = SERVE.to_vec();
    same.extend(["--no-register", "--socket-name", "same.sock"]);
    let mut a = vec!["serve", "--plugin-dir", s(d.path())];
    a.extend(same.iter());
    let sv2 = dpctl_cmd(&a).spawn().unwrap();
    wait_until(10, "same.sock", || d.path().join("same.sock").exists()).await;
    let r = dpctl(&["replay", s(&trace), "--against", s(&d.path().join("same.sock"))]).await;
    r.expect_code(0);
    assert!(r.stdout.contains(", 0 differ"), "{}", r.stdout);
    assert!(r.stdout.lines().any(|l| l.starts_with("PASS") && l.contains("Allocate #2")), "{}", r.stdout);
    stop_child(sv2).await;

    // … and against a changed one: the difference is found, exit 1.
    let mut changed = SERVE.to_vec();
    changed[8] = "FOO=gpu:{ids}";
    changed.extend(["--no-register", "--socket-name", "changed.sock"]);
    let mut a = vec!["serve", "--plugin-dir", s(d.path())];
    a.extend(changed.iter());
    let sv3 = dpctl_cmd(&a).spawn().unwrap();
    wait_until(10, "changed.sock", || d.path().join("changed.sock").exists()).await;
    let r = dpctl(&["replay", s(&trace), "--against", s(&d.path().join("changed.sock")), "-o", "json"]).await;
    r.expect_code(1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["differing"], 1, "{v}");
    let diff =
        v["results"].as_array().unwrap().iter().find(|x| x["diffs"].as_array().is_some_and(|d| !d.is_empty())).unwrap();
    assert_eq!(diff["call"], "Allocate #1");
    assert!(
        diff["diffs"][0].as_str().unwrap().starts_with("containerResponses[0].envs.FOO: recorded \"foo-"),
        "{diff}"
    );
    assert!(r.stderr.contains("1 of"), "{}", r.stderr);
    stop_child(sv3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_traces_are_refused_and_nothing_is_served() {
    let d = tmp();
    let good = "{\"dpctlTrace\":1,\"resource\":\"v.e/foo\",\"dpctlVersion\":\"0.1.0\",\"created\":\"x\",\"source\":\"record\"}\n{\"kind\":\"options\",\"t\":0.0,\"latencyMs\":0.1,\"response\":{}}\n";
    for (name, text, want) in [
        ("truncated.jsonl", format!("{good}{{\"kind\":\"listAndWatch\",\"t\":0.1,\"stre"), ":3: truncated"),
        ("newer.jsonl", good.replace("\"dpctlTrace\":1", "\"dpctlTrace\":7"), ":1: trace format version 7 is newer"),
        ("notatrace.jsonl", "apiVersion: v1\nkind: Pod\n".to_string(), ":1: not a dpctl trace"),
        ("empty-timeline.jsonl", good.to_string(), "no ListAndWatch message"),
    ] {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        let r = dpctl(&["replay", s(&p), "--plugin-dir", s(d.path()), "--no-register"]).await;
        assert_eq!(r.code, 2, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{name}: {}", r.stderr);
        assert!(sockets_in(d.path()).is_empty(), "nothing served for {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_records_without_disturbing() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let t = d.path().join("w.jsonl");
    let child = dpctl_cmd(&["watch", s(&sock), "--count", "2", "--record", s(&t)]).spawn().unwrap();
    p.wait_sent(1).await;
    let mut devs = four_devices();
    devs[0].health = "Unhealthy".into();
    p.devices.send(devs).unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&t);
    assert_eq!(ev[0]["source"], "watch");
    assert_eq!(ev[1]["kind"], "options");
    assert_eq!(ev[3]["response"]["devices"][0]["health"], "Unhealthy");
    assert_eq!(ev.len(), 4);
    // never overwrites
    let r = dpctl(&["watch", s(&sock), "--count", "1", "--record", s(&t)]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("exists"), "{}", r.stderr);
    assert_eq!(events(&t).len(), 4);
}
