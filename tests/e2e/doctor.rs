//! `dpctl doctor` and `dpctl checkpoint` against node states built in temp dirs.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use dpctl::api::deviceplugin::{CdiDevice, ContainerAllocateResponse};
use dpctl::kubelet::checkpoint::{Data, PodDeviceEntry};
use std::path::Path;

fn doctor_args<'a>(n: &'a Node, pr: &'a Path) -> Vec<&'a str> {
    vec![
        "doctor",
        "--plugin-dir",
        s(n.dp().as_path()).to_string().leak(),
        "--pod-resources-socket",
        s(pr),
        "--plugins-registry-dir",
        s(n.dir.path().join("registry").as_path()).to_string().leak(),
        "-o",
        "json",
    ]
}

async fn doctor(n: &Node, pr: &Path) -> (Run, serde_json::Value) {
    let r = dpctl(&doctor_args(n, pr)).await;
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr));
    (r, v)
}

fn findings<'a>(v: &'a serde_json::Value, check: &str) -> Vec<&'a serde_json::Value> {
    v["findings"].as_array().into_iter().flatten().filter(|f| f["check"] == check).collect()
}

fn write_checkpoint(dp: &Path, entries: &[(&str, &str, &str, &[&str])], registered: &[(&str, &[&str])]) {
    let resp = ContainerAllocateResponse {
        envs: [("FOO_VISIBLE_DEVICES".to_string(), "foo-3".to_string())].into_iter().collect(),
        cdi_devices: vec![CdiDevice { name: "vendor.example/foo=foo-3".into() }],
        ..Default::default()
    };
    let data = Data {
        pod_device_entries: entries
            .iter()
            .map(|(uid, c, r, ids)| PodDeviceEntry {
                pod_uid: uid.to_string(),
                container_name: c.to_string(),
                resource_name: r.to_string(),
                device_ids: [("0".to_string(), ids.iter().map(|s| s.to_string()).collect())].into_iter().collect(),
                alloc_resp: PodDeviceEntry::encode_alloc_resp(&resp),
            })
            .collect(),
        registered_devices: registered
            .iter()
            .map(|(r, ids)| (r.to_string(), ids.iter().map(|s| s.to_string()).collect()))
            .collect(),
    };
    dpctl::kubelet::checkpoint::write(&dp.join("kubelet_internal_checkpoint"), &data).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_node_has_no_findings() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
    n.wait_pod("a").await;
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(0);
    assert_eq!(v["result"], "ok", "{v}");
    assert!(v["findings"].as_array().is_none_or(|f| f.is_empty()), "{v}");
    assert_eq!(v["checked"]["pluginSockets"], 1);
    assert_eq!(v["checked"]["checkpointAllocations"], 1);
    assert_eq!(v["checked"]["podResources"], true);
    let r = dpctl(&doctor_args(&n, &n.pr())[..7]).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("ok: 0 finding(s); checked 1 plugin socket(s), kubelet.sock live"), "{}", r.stdout);
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_sockets_hanging_plugins_and_stray_files() {
    let n = Node::new();
    let (_reqs, _k) = kubelet::start(&n.kubelet(), None).await;
    drop(std::os::unix::net::UnixListener::bind(n.dp().join("dead.sock")).unwrap());
    std::fs::write(n.dp().join("notes.txt"), "x").unwrap();
    let _hang =
        start_plugin(&n.dp().join("hang.sock"), four_devices(), Behaviour { hang: true, ..Default::default() }).await;
    let start = std::time::Instant::now();
    let (r, v) = doctor(&n, &n.pr()).await;
    let took = start.elapsed();
    r.expect_code(1);
    assert!(took < std::time::Duration::from_secs(8), "per-socket timeouts bound the run: {took:?}");
    let stale = findings(&v, "stale-socket");
    assert_eq!(stale.len(), 1, "{v}");
    assert!(stale[0]["subject"].as_str().unwrap().ends_with("dead.sock") && stale[0]["severity"] == "warning");
    let hang = findings(&v, "plugin-hangs");
    assert!(hang[0]["subject"].as_str().unwrap().ends_with("hang.sock") && hang[0]["severity"] == "error", "{v}");
    assert!(hang[0]["fix"].as_str().unwrap().contains("restart the plugin"));
    assert_eq!(findings(&v, "not-a-socket")[0]["severity"], "warning");
    assert!(n.dp().join("dead.sock").exists() && n.dp().join("notes.txt").exists(), "doctor modifies nothing");
    // the human format names the finding and the fix
    let r = dpctl(&doctor_args(&n, &n.pr())[..7]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("ERROR  plugin-hangs") && r.stdout.contains("fix: restart the plugin"), "{}", r.stdout);
    assert!(r.stderr.contains("doctor found 1 error(s)"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_allocations_and_resources_without_plugins() {
    let n = Node::new();
    let (_reqs, _k) = kubelet::start(&n.kubelet(), None).await;
    let mut devs = four_devices();
    devs[2].health = "Unhealthy".into();
    let _p = start_plugin(&n.dp().join("foo.sock"), devs, Behaviour::default()).await;
    write_checkpoint(
        &n.dp(),
        &[
            ("uid-live", "main", "vendor.example/foo", &["foo-0"]),
            ("uid-gone", "main", "vendor.example/foo", &["foo-3"]),
            ("uid-sick", "main", "vendor.example/foo", &["foo-2"]),
        ],
        &[("vendor.example/foo", &["foo-0", "foo-1", "foo-2", "foo-3"]), ("vendor.example/gone", &["g-0"])],
    );
    // PodResources: a running container holds foo-0 and foo-2, nobody holds foo-3
    let mut pr = podresources::sample();
    pr.pods[0].containers[0].devices[0].device_ids = vec!["foo-0".into(), "foo-2".into()];
    let prs = n.dir.path().join("pr2.sock");
    let _stop = podresources::start(&prs, pr).await;
    let (r, v) = doctor(&n, &prs).await;
    r.expect_code(1);
    let stale = findings(&v, "stale-allocation");
    assert_eq!(stale.len(), 1, "{v}");
    assert!(
        stale[0]["evidence"].as_str().unwrap().contains("pod UID uid-gone")
            && stale[0]["evidence"].as_str().unwrap().contains("foo-3"),
        "{v}"
    );
    assert!(stale[0]["message"].as_str().unwrap().contains("Available: 0"));
    let gone = findings(&v, "not-re-registered");
    assert_eq!(gone.len(), 1, "{v}");
    assert_eq!(gone[0]["subject"], "vendor.example/gone");
    assert!(gone[0]["message"].as_str().unwrap().contains("did not re-register after a kubelet restart"));
    let sick = findings(&v, "allocated-device-unhealthy");
    assert!(sick[0]["message"].as_str().unwrap().contains("device foo-2"), "{v}");
    assert_eq!(findings(&v, "unhealthy-devices").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_snapshots_and_corrupt_checkpoints() {
    let n = Node::new();
    let (_reqs, _k) = kubelet::start(&n.kubelet(), None).await;
    let sv = n
        .serve(&[
            "--resource",
            "vendor.example/foo",
            "--count",
            "100000",
            "--id-pattern",
            "vendor-accelerator-device-{i}",
            "--no-register",
            "--socket-name",
            "big.sock",
        ])
        .await;
    wait_until(20, "big.sock", || n.dp().join("big.sock").exists()).await;
    std::fs::write(n.dp().join("kubelet_internal_checkpoint"), "{\"Data\":{\"PodDeviceEntries\":").unwrap();
    let args: Vec<String> = doctor_args(&n, &n.pr())
        .iter()
        .map(|s| s.to_string())
        .chain(["--timeout".to_string(), "10s".to_string()])
        .collect();
    let r = dpctl(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>()).await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let big = findings(&v, "snapshot-too-large");
    assert_eq!(big.len(), 1, "{v}");
    assert!(big[0]["evidence"].as_str().unwrap().contains("100000 devices"));
    let corrupt = findings(&v, "checkpoint-corrupt");
    assert!(corrupt[0]["evidence"].as_str().unwrap().contains("corrupt checkpoint"), "{v}");
    assert_eq!(
        std::fs::read_to_string(n.dp().join("kubelet_internal_checkpoint")).unwrap(),
        "{\"Data\":{\"PodDeviceEntries\":",
        "read only"
    );
    let r = dpctl(&["checkpoint", "--plugin-dir", s(&n.dp())]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("corrupt checkpoint"), "{}", r.stderr);
    stop_child(sv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_command_decodes_allocations() {
    let d = tmp();
    write_checkpoint(
        d.path(),
        &[("uid-1", "main", "vendor.example/foo", &["foo-3"])],
        &[("vendor.example/foo", &["foo-0", "foo-3"])],
    );
    let r = dpctl(&["checkpoint", "--plugin-dir", s(d.path())]).await;
    r.expect_code(0);
    let row: Vec<&str> = r.stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["uid-1", "main", "vendor.example/foo", "foo-3", "0"], "{}", r.stdout);
    assert!(r.stdout.contains("env FOO_VISIBLE_DEVICES=foo-3; cdi vendor.example/foo=foo-3"), "{}", r.stdout);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["vendor.example/foo", "2", "foo-0,foo-3"]),
        "{}",
        r.stdout
    );
    let r = dpctl(&["checkpoint", "--file", s(&d.path().join("kubelet_internal_checkpoint")), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["entries"][0]["allocResp"]["envs"]["FOO_VISIBLE_DEVICES"], "foo-3");
    assert_eq!(v["entries"][0]["allocResp"]["cdiDevices"][0]["name"], "vendor.example/foo=foo-3");
    assert_eq!(v["checksumVerified"], true);
    // the old flat layout
    let old = d.path().join("old");
    std::fs::write(&old, r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r.e/x","DeviceIDs":["a","b"],"AllocResp":""}],"RegisteredDevices":{"r.e/x":["a","b"]}},"Checksum":7}"#).unwrap();
    let r = dpctl(&["checkpoint", "--file", s(&old), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["entries"][0]["deviceIds"]["-1"], serde_json::json!(["a", "b"]));
    assert!(v.get("checksumVerified").is_none(), "false is omitted, like protojson: {v}");
    let r = dpctl(&["checkpoint", "--file", s(&d.path().join("missing"))]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("no checkpoint"), "{}", r.stderr);
    std::fs::write(d.path().join("other.json"), "{\"a\":1}").unwrap();
    let r = dpctl(&["checkpoint", "--file", s(&d.path().join("other.json"))]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("not a device-manager checkpoint"), "{}", r.stderr);
}
