//! record / replay: a serve session recorded through mock-kubelet, replayed
//! as the plugin and as the kubelet.

use crate::mock_kubelet::{container_devices, pod_yaml, Node};
use crate::support::*;
use serde_json::Value;

/// `dpctl record` of vendor.example/foo from `plugin` into `trace`, with `extra` flags.
fn record(plugin: &std::path::Path, trace: &std::path::Path, extra: &[&str]) -> tokio::process::Child {
    let mut args = vec!["record", "--plugin", s(plugin), "--resource", "vendor.example/foo", "--out", s(trace)];
    args.extend_from_slice(extra);
    dpctl_cmd(&args).spawn().unwrap()
}

/// The resource's endpoint is record's tap.
fn is_tap(r: &Value) -> bool {
    r["endpoint"].as_str().is_some_and(|e| e.contains("dpctl-record-"))
}

/// The tap is registered and its endpoint running.
fn tap_running(r: &Value) -> bool {
    is_tap(r) && r["state"] == "running"
}

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
    let rec = record(&dp.join("foo.sock"), &trace, &[]);
    let tap = n.wait_resource("vendor.example/foo", "the tap registered", is_tap).await;
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
    assert_eq!(ev[0]["dpctlTrace"], 2);
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
    assert!(r.stderr.contains("the closest recorded one is Allocate #"), "{}", r.stderr);
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
    let sv2 = serve_cmd(d.path(), &same).spawn().unwrap();
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
    let sv3 = serve_cmd(d.path(), &changed).spawn().unwrap();
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

/// Collect a child's stdout lines as they come.
fn collect_stdout(child: &mut tokio::process::Child) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use tokio::io::AsyncBufReadExt;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = child.stdout.take().unwrap();
    let l = lines.clone();
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(out).lines();
        while let Ok(Some(line)) = r.next_line().await {
            l.lock().unwrap().push(line);
        }
    });
    lines
}

fn count_events(lines: &std::sync::Mutex<Vec<String>>, event: &str) -> usize {
    lines.lock().unwrap().iter().filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["event"] == event)).count()
}

fn trace_kinds(path: &std::path::Path, kind: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["kind"] == kind))
        .count()
}

fn pod_devices(pod: &Value) -> Vec<String> {
    container_devices(&pod["containers"][0], "vendor.example/foo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_survives_two_kubelet_restarts_and_finds_every_allocate() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let mut args = SERVE.to_vec();
    args.extend(["--socket-name", "foo.sock", "--log-format", "json"]);
    let mut sv = n.serve(&args).await;
    let plugin_log = collect_stdout(&mut sv);
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    let trace = n.dir.path().join("trace.jsonl");
    let dp = n.dp();
    let rec = record(&dp.join("foo.sock"), &trace, &["--pod-resources-socket", s(&n.pr())]);
    n.wait_resource("vendor.example/foo", "the tap registered", tap_running).await;

    let mut held = Vec::new();
    for (i, pod) in ["a", "b", "c"].into_iter().enumerate() {
        if i > 0 {
            // Simulate a kubelet restart, as SIGHUP does: every socket in the
            // plugin directory is deleted and kubelet.sock served anew.
            let _ = std::process::Command::new("kill").arg("-HUP").arg(k.id().unwrap().to_string()).status();
            wait_until(20, "kubeletRestart in the trace", || trace_kinds(&trace, "kubeletRestart") == i).await;
            // The plugin registers itself again (generation i); the tap must end up
            // registered after it, whichever came first.
            wait_until(20, "the plugin's own re-registration", || count_events(&plugin_log, "registered") > i).await;
            n.wait_resource("vendor.example/foo", "the tap registered again", tap_running).await;
        }
        n.pod(&format!("{pod}.yaml"), &pod_yaml(pod, "vendor.example/foo", 1));
        held.push((pod, pod_devices(&n.wait_pod(pod).await)));
    }
    // Each Allocate's owner is looked up after the call: wait for the last one.
    wait_until(20, "three allocateFor events", || trace_kinds(&trace, "allocateFor") == 3).await;
    let out = stop_child(rec).await;
    out.expect_code(0);
    n.wait_resource("vendor.example/foo", "the plugin registered again at exit", |r| {
        r["endpoint"].as_str().is_some_and(|e| e.ends_with("foo.sock"))
    })
    .await;

    let ev = events(&trace);
    assert_eq!(ev[0]["dpctlTrace"], 2);
    assert_eq!(ev[1]["kind"], "kubeletState", "the kubelet's view comes first");
    assert_eq!(ev[1]["source"], "podResources");
    assert_eq!(ev[1]["allocatable"].as_array().unwrap().len(), 4);
    assert_eq!(ev.iter().filter(|e| e["kind"] == "kubeletRestart").count(), 2);
    let allocs: Vec<(usize, &Value)> = ev.iter().enumerate().filter(|(_, e)| e["kind"] == "allocate").collect();
    assert_eq!(allocs.len(), 3, "every Allocate is in the trace: {ev:#?}");
    for (pod, devices) in &held {
        // the Allocate that gave this pod its devices, and its owner
        let (i, a) = allocs
            .iter()
            .find(|(_, a)| {
                let mut ids: Vec<String> = a["request"]["containerRequests"][0]["devicesIds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                ids.sort();
                &ids == devices
            })
            .unwrap_or_else(|| panic!("no Allocate of {devices:?} for pod {pod}"));
        assert!(a["response"]["containerResponses"][0]["envs"]["FOO"].is_string());
        let owner = ev
            .iter()
            .find(|e| e["kind"] == "allocateFor" && e["event"] == *i as u64)
            .unwrap_or_else(|| panic!("no allocateFor for event {i}"));
        assert_eq!((owner["pod"].as_str(), owner["namespace"].as_str()), (Some(*pod), Some("default")));
        assert_eq!(owner["container"], "main");
        assert!(owner["uid"].as_str().is_some_and(|u| !u.is_empty()), "the checkpoint gave the UID: {owner}");
    }
    // The restarts ended streams from the kubelet's side, and that is recorded.
    let ends: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "listAndWatchEnd").collect();
    assert!(ends.iter().any(|e| e["by"] == "kubelet" && e["error"]["code"] == "Canceled"), "{ends:?}");
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_exits_at_once_when_the_plugin_is_gone() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sock = n.dp().join("p.sock");
    let mut p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let trace = n.dir.path().join("t.jsonl");
    let rec = record(&sock, &trace, &["--pod-resources-socket", s(&n.pr())]);
    n.wait_resource("vendor.example/foo", "the tap registered", |r| r["allocatable"] == 4).await;
    // The plugin dies and its socket is removed (as a crashed plugin's is on restart).
    p.stop();
    std::fs::remove_file(&sock).unwrap();
    let out = stop_child(rec).await;
    out.expect_code(1);
    assert!(out.stderr.contains("p.sock is gone, so it was not registered again"), "{}", out.stderr);
    // The stream dpctl ended at exit is recorded with who ended it.
    let ev = events(&trace);
    assert!(ev.iter().any(|e| e["kind"] == "listAndWatchEnd" && e["by"] == "dpctl"), "{ev:?}");
    stop_child(k).await;
}

/// A trace as version 1 wrote it: no kubelet state, no owners, no `by`.
fn as_version_1(trace: &std::path::Path, to: &std::path::Path) {
    let mut out = String::new();
    for (i, l) in std::fs::read_to_string(trace).unwrap().lines().enumerate() {
        let mut v: Value = serde_json::from_str(l).unwrap();
        if i == 0 {
            v["dpctlTrace"] = 1.into();
        } else if ["kubeletState", "kubeletRestart", "reregistered", "allocateFor"]
            .contains(&v["kind"].as_str().unwrap())
        {
            continue;
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("by");
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(to, out).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_node_replays_with_kubelet_to_the_same_choices() {
    busy_node(false).await;
    busy_node(true).await;
}

async fn busy_node(preferred: bool) {
    let n = Node::new();
    let k = n.start(&[]).await;
    // Without GetPreferredAllocation the kubelet picks among the free devices
    // itself; with it, the plugin is asked (and the replayed plugin must be
    // asked the same question to answer it).
    let mut args = vec![
        "--resource",
        "vendor.example/foo",
        "--count",
        "4",
        "--numa-nodes",
        "2",
        "--env",
        "FOO={ids}",
        "--retry",
        "--socket-name",
        "foo.sock",
    ];
    if preferred {
        args.push("--preferred-allocation");
    }
    let sv = n.serve(&args).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    // A pod holds two devices before recording starts.
    n.pod("old.yaml", &pod_yaml("old", "vendor.example/foo", 2));
    let old = pod_devices(&n.wait_pod("old").await);

    let trace = n.dir.path().join("busy.jsonl");
    let rec = record(&n.dp().join("foo.sock"), &trace, &["--pod-resources-socket", s(&n.pr())]);
    n.wait_resource("vendor.example/foo", "the tap registered", tap_running).await;
    n.pod("new.yaml", &pod_yaml("new", "vendor.example/foo", 1));
    let new = pod_devices(&n.wait_pod("new").await);
    assert!(!old.contains(&new[0]));
    wait_until(20, "the Allocate's owner", || trace_kinds(&trace, "allocateFor") == 1).await;
    stop_child(rec).await.expect_code(0);
    stop_child(sv).await;
    stop_child(k).await;
    let ev = events(&trace);
    assert_eq!(ev[1]["pods"][0]["name"], "old", "{}", ev[1]);
    assert_eq!(ev[1]["pods"][0]["containers"][0]["devices"], serde_json::json!(old));

    // On a laptop: one command, no node.
    let r = dpctl(&["replay", s(&trace), "--kubelet", "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["seededPods"], 1, "{v}");
    assert_eq!(v["differing"], 0, "{v}");
    let res = &v["results"][0];
    assert_eq!(res["call"], "Allocate #1");
    assert_eq!(res["container"], "default/new/main");
    assert_eq!(res["recorded"], serde_json::json!(new));
    assert_eq!(res["replayed"], serde_json::json!(new), "{v}");
    let r = dpctl(&["replay", s(&trace), "--kubelet"]).await;
    r.expect_code(0);
    assert!(r.stdout.lines().any(|l| l.starts_with("PASS") && l.contains("Allocate #1")), "{}", r.stdout);

    // The same trace as version 1 still replays — without the kubelet's view the
    // mock kubelet has no pods, picks another device, and the difference is reported.
    let v1 = n.dir.path().join("v1.jsonl");
    as_version_1(&trace, &v1);
    let r = dpctl(&["replay", s(&v1), "--kubelet", "-o", "json"]).await;
    r.expect_code(1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["differing"], 1, "{v}");
    assert_ne!(v["results"][0]["replayed"], serde_json::json!(new), "{v}");
    // The replayed plugin's NotFound names the closest recorded call: the
    // preferred question when the kubelet asks one, else the Allocate.
    let asked = if preferred { "GetPreferredAllocation #1" } else { "Allocate #1" };
    assert!(v["results"][0]["rejected"].as_str().unwrap().contains(&format!("closest recorded one is {asked}")), "{v}");
    assert!(v["notes"][0].as_str().unwrap().contains("no kubelet state"), "{v}");
    assert!(r.stderr.contains("1 of 1 Allocate decision(s) differ"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_compares_every_snapshot_by_device_id() {
    let d = tmp();
    let snapshot = |devs: &[dpctl::api::deviceplugin::Device]| {
        serde_json::to_value(dpctl::api::deviceplugin::ListAndWatchResponse { devices: devs.to_vec() }).unwrap()
    };
    let four = four_devices();
    let mut later = four.clone();
    later[2].health = "Unhealthy".into();
    let lines = [
        serde_json::json!({"dpctlTrace": 2, "resource": "vendor.example/foo", "dpctlVersion": "0.1.0", "created": "x", "source": "record"}),
        serde_json::json!({"kind": "options", "t": 0.0, "latencyMs": 0.1, "response": {}}),
        serde_json::json!({"kind": "listAndWatch", "t": 0.1, "stream": 1, "seq": 1, "response": snapshot(&four)}),
        serde_json::json!({"kind": "listAndWatch", "t": 2.1, "stream": 1, "seq": 2, "response": snapshot(&later)}),
    ];
    let trace = d.path().join("t.jsonl");
    std::fs::write(&trace, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();

    // The same devices in another order: no difference.
    let same = d.path().join("same.sock");
    let mut shuffled = four.clone();
    shuffled.reverse();
    let _p = start_plugin(&same, shuffled, Behaviour::default()).await;
    let short = d.path().join("short.jsonl");
    std::fs::write(&short, lines[..3].iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let r = dpctl(&["replay", s(&short), "--against", s(&same)]).await;
    r.expect_code(0);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("PASS") && l.contains("ListAndWatch stream 1 message 1")),
        "{}",
        r.stdout
    );

    // A changed plugin: foo-3 on another NUMA node at first; then foo-0 goes and foo-9 comes.
    let sock = d.path().join("p.sock");
    let mut first = four.clone();
    first[3] = dev("foo-3", "Healthy", Some(0));
    first.swap(0, 3);
    let p = start_plugin(&sock, first, Behaviour::default()).await;
    let replay = dpctl_cmd(&["replay", s(&trace), "--against", s(&sock), "-o", "json"]).spawn().unwrap();
    p.wait_call("ListAndWatch").await;
    let mut second: Vec<_> = later.iter().filter(|x| x.id != "foo-0").cloned().collect();
    second.push(dev("foo-9", "Healthy", Some(1)));
    p.devices.send(second).unwrap();
    let out = replay.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    let m1 = results.iter().find(|r| r["call"] == "ListAndWatch stream 1 message 1").unwrap();
    assert_eq!(m1["devices"]["topology"], serde_json::json!([{"id": "foo-3", "recorded": [1], "got": [0]}]), "{m1}");
    assert_eq!(m1["diffs"], serde_json::json!(["~foo-3 NUMA 1 → 0"]));
    let m2 =
        results.iter().find(|r| r["call"] == "ListAndWatch stream 1 message 2").expect("the second snapshot lined up");
    assert_eq!(m2["devices"]["removed"][0]["id"], "foo-0", "{m2}");
    assert_eq!(m2["devices"]["added"][0]["id"], "foo-9", "{m2}");
    assert!(m2["devices"]["health"].as_array().is_none_or(|a| a.is_empty()), "foo-2 is Unhealthy in both: {m2}");
    assert_eq!(v["differing"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_stops_at_once_while_the_plugin_hangs() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sock = n.dp().join("hung.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour { hang: true, ..Default::default() }).await;
    let trace = n.dir.path().join("t.jsonl");
    // A long --timeout: only the signal can end the wait.
    let rec = record(&sock, &trace, &["--timeout", "1h"]);
    p.wait_call("GetDevicePluginOptions").await;
    let out = stop_child(rec).await;
    out.expect_code(1);
    assert!(out.stderr.contains("stopped before recording began; nothing was recorded"), "{}", out.stderr);
    assert!(!trace.exists(), "no empty trace is left behind");
    // --duration ends it the same way.
    let rec = record(&sock, &trace, &["--timeout", "1h", "--duration", "300ms"]);
    let o = tokio::time::timeout(std::time::Duration::from_secs(20), rec.wait_with_output())
        .await
        .expect("--duration ends record while the plugin hangs")
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("stopped before recording began"));
    assert!(!trace.exists());
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_never_comes_back_after_a_kubelet_restart_is_reported() {
    // (1) --restart-timeout: record gives up by itself, on stderr, exit 1, trace kept.
    // (2) SIGTERM while waiting for the plugin: record exits at once.
    for stop_early in [false, true] {
        let n = Node::new();
        let k = n.start(&[]).await;
        let sock = n.dp().join("once.sock");
        // An in-test plugin that never re-creates its socket or registers again.
        let _p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
        let trace = n.dir.path().join("t.jsonl");
        let rec = record(&sock, &trace, &["--restart-timeout", if stop_early { "10m" } else { "1s" }]);
        n.wait_resource("vendor.example/foo", "the tap registered", |r| r["allocatable"] == 4).await;
        let _ = std::process::Command::new("kill").arg("-HUP").arg(k.id().unwrap().to_string()).status();
        wait_until(20, "kubeletRestart in the trace", || trace_kinds(&trace, "kubeletRestart") == 1).await;
        let out = if stop_early {
            stop_child(rec).await
        } else {
            let o = tokio::time::timeout(std::time::Duration::from_secs(20), rec.wait_with_output())
                .await
                .expect("record gives up after --restart-timeout")
                .unwrap();
            Run {
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        };
        out.expect_code(1);
        if stop_early {
            assert!(out.stderr.contains("once.sock is gone, so it was not registered again"), "{}", out.stderr);
        } else {
            assert!(out.stderr.contains("the plugin did not serve"), "{}", out.stderr);
            assert!(out.stderr.contains("within 1s of the kubelet restart"), "{}", out.stderr);
        }
        assert!(events(&trace).iter().any(|e| e["kind"] == "kubeletRestart"), "the trace is kept");
        stop_child(k).await;
    }
}

/// `record` must leave a real node as it found it on every kubelet version.
/// Up to 1.36 the kubelet keys plugins by resource: when the tap's stream
/// ends after the plugin registered again, the kubelet disconnects the
/// plugin (kubernetes#121994) — so at exit the tap's stream ends first and
/// the plugin registers after. Checked with and without the plugin
/// registering itself while it is tapped (its registration then replaces
/// the tap's, whose stream no kubelet closes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_leaves_the_node_as_found_on_every_kubelet_version() {
    for (version, plugin_registers_itself) in [("1.36", false), ("1.36", true), ("1.37", false), ("1.37", true)] {
        let n = Node::new();
        let k = n.start(&["--kubelet-version", version, "--log-format", "json"]).await;
        let mut args = SERVE.to_vec();
        args.extend(["--socket-name", "foo.sock"]);
        let sv = n.serve(&args).await;
        n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
        let trace = n.dir.path().join("t.jsonl");
        let rec = record(&n.dp().join("foo.sock"), &trace, &[]);
        n.wait_resource("vendor.example/foo", "the tap registered", tap_running).await;
        n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
        n.wait_pod("a").await;
        if plugin_registers_itself {
            let r = dpctl(&[
                "--plugin-dir",
                s(&n.dp()),
                "register",
                "--resource",
                "vendor.example/foo",
                "--endpoint",
                "foo.sock",
            ])
            .await;
            if version == "1.37" {
                // the kubelet never closed the plugin's own instance: a second one
                // from its socket is refused (kubernetes#135437)
                r.expect_code(1);
                assert!(r.stderr.contains("device plugin already connected"), "{}", r.stderr);
            } else {
                r.expect_code(0);
                n.wait_resource("vendor.example/foo", "the plugin replaced the tap", |r| {
                    r["endpoint"].as_str().is_some_and(|e| e.ends_with("foo.sock"))
                        && r["olderInstances"].as_u64() >= Some(1)
                })
                .await;
            }
        }
        stop_child(rec).await.expect_code(0);
        let what = format!("{version}, plugin registered itself: {plugin_registers_itself}");
        n.wait_resource("vendor.example/foo", "the plugin registered and running", |r| {
            r["endpoint"].as_str().is_some_and(|e| e.ends_with("foo.sock"))
                && r["state"] == "running"
                && r["allocatable"] == 4
        })
        .await;
        // The node still works: a new pod gets a device from the plugin itself.
        n.pod("b.yaml", &pod_yaml("b", "vendor.example/foo", 1));
        n.wait_pod("b").await;
        let r = n.resource("vendor.example/foo").await.unwrap();
        assert_eq!((r["state"].as_str(), r["allocated"].as_u64()), (Some("running"), Some(2)), "{what}: {r}");
        // (the kubelet first: the plugin's own exit would end its streams, which is not what is checked here)
        let log = stop_child(k).await.stdout;
        stop_child(sv).await;
        // Had the plugin registered itself while tapped, 1.36 disconnects it when the tap's stream
        // ends (upstream's behaviour); record's own registration after that end heals it.
        if !plugin_registers_itself {
            assert!(!log.contains("\"disconnected\""), "{what}: the kubelet disconnected the plugin:\n{log}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_kubelet_process_is_followed() {
    let n = Node::new();
    let mut k = n.start(&[]).await;
    let mut args = SERVE.to_vec();
    args.extend(["--socket-name", "foo.sock"]);
    let sv = n.serve(&args).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    let trace = n.dir.path().join("t.jsonl");
    let rec = record(&n.dp().join("foo.sock"), &trace, &["--pod-resources-socket", s(&n.pr())]);
    n.wait_resource("vendor.example/foo", "the tap registered", tap_running).await;
    // The kubelet process dies (its sockets stay behind, stale) and a new one starts.
    k.kill().await.unwrap();
    let k = n.start(&[]).await;
    wait_until(20, "kubeletRestart in the trace", || trace_kinds(&trace, "kubeletRestart") == 1).await;
    n.wait_resource("vendor.example/foo", "the tap registered with the new kubelet", tap_running).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
    n.wait_pod("a").await;
    wait_until(20, "the Allocate's owner", || trace_kinds(&trace, "allocateFor") == 1).await;
    stop_child(rec).await.expect_code(0);
    assert_eq!(events(&trace).iter().filter(|e| e["kind"] == "allocate").count(), 1);
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_that_stays_down_is_reported() {
    let n = Node::new();
    let mut k = n.start(&[]).await;
    let sock = n.dp().join("p.sock");
    let _p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let trace = n.dir.path().join("t.jsonl");
    let rec = record(&sock, &trace, &["--restart-timeout", "1s"]);
    n.wait_resource("vendor.example/foo", "the tap registered", |r| r["allocatable"] == 4).await;
    k.kill().await.unwrap();
    let o = tokio::time::timeout(std::time::Duration::from_secs(20), rec.wait_with_output())
        .await
        .expect("record gives up after --restart-timeout")
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the kubelet stopped answering on") && err.contains("did not come back within 1s"), "{err}");
    assert!(events(&trace).iter().any(|e| e["kind"] == "listAndWatchEnd" && e["by"] == "kubelet"));
}
