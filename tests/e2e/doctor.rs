//! `dpctl doctor` and `dpctl checkpoint` against node states built in temp dirs.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use dpctl::api::deviceplugin::{CdiDevice, ContainerAllocateResponse};
use dpctl::client::checkpoint::{Data, PodDeviceEntry};
use std::path::Path;

fn doctor_args<'a>(n: &'a Node, pr: &'a Path) -> Vec<&'a str> {
    vec![
        "doctor",
        "--plugin-dir",
        s(n.dp().as_path()).to_string().leak(),
        "--pod-resources-socket",
        s(pr),
        "--plugins-registry-dir",
        s(n.registry().as_path()).to_string().leak(),
        "-o",
        "json",
        // these tests read the report's full shape (false, [] included)
        "--emit-defaults",
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
    dpctl::client::checkpoint::write(&dp.join("kubelet_internal_checkpoint"), &data).unwrap();
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
    // `checkpoint` names the pod (namespace/name) the mock kubelet knows, not its UID.
    let c = dpctl(&["checkpoint", "--plugin-dir", s(&n.dp())]).await;
    c.expect_code(0);
    assert_eq!(c.stdout.lines().next().unwrap().split_whitespace().next(), Some("POD"), "{}", c.stdout);
    assert!(c.stdout.lines().nth(1).unwrap().starts_with("default/a "), "{}", c.stdout);
    let r = dpctl(&doctor_args(&n, &n.pr())[..7]).await;
    r.expect_code(0);
    assert!(
        r.stdout.starts_with("ok: no problems found; checked 1 plugin socket(s), kubelet.sock live"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("  vendor.example/foo is served by ")
            && r.stdout.contains("(healthy IDs equal the kubelet's allocatable IDs)"),
        "{}",
        r.stdout
    );
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
    assert!(gone[0]["message"].as_str().unwrap().contains("did not register again after the kubelet restarted"));
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
    let big = findings(&v, "snapshot-size");
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
    // No mock kubelet knows the pod: its UID.
    assert_eq!(&row[..6], ["UID", "uid-1", "main", "vendor.example/foo", "foo-3", "0"], "{}", r.stdout);
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

// ---- issue 14: doctor right on real nodes ----

fn kill9(child: &tokio::process::Child) {
    let pid = child.id().expect("running child");
    let st = std::process::Command::new("kill").arg("-KILL").arg(pid.to_string()).status().unwrap();
    assert!(st.success());
}

fn init_pod_yaml(name: &str, init_res: &str, app_res: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  initContainers:\n  - name: setup\n    resources:\n      limits:\n        {init_res}: 1\n  containers:\n  - name: main\n    resources:\n      limits:\n        {app_res}: 1\n"
    )
}

fn with(base: Vec<&'static str>, extra: &[&'static str]) -> Vec<&'static str> {
    base.into_iter().chain(extra.iter().copied()).collect()
}

/// `doctor_args` for the node's own PodResources socket, owned by the test's lifetime.
fn owned_args(n: &Node) -> Vec<&'static str> {
    let pr: &'static Path = Box::leak(n.pr().into_boxed_path());
    doctor_args(n, pr).into_iter().map(|s| &*s.to_string().leak()).collect()
}

fn errors(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["check"].as_str().unwrap().to_string())
        .collect()
}

/// `doctor --npd`: one line on stdout, nothing on stderr.
async fn npd(n: &Node) -> Run {
    let args = with(owned_args(n)[..7].to_vec(), &["--npd"]);
    let r = dpctl(&args).await;
    assert_eq!(r.stdout.lines().count(), 1, "{r:?}");
    assert!(r.stdout.len() <= 81 && r.stderr.is_empty(), "{r:?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_node_with_an_init_container_holding_its_own_device_is_ok() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let a = n.serve(&["--resource", "example.com/a", "--count", "2", "--socket-name", "a.sock"]).await;
    let b = n.serve(&["--resource", "example.com/b", "--count", "2", "--socket-name", "b.sock"]).await;
    n.wait_resource("example.com/a", "up", |r| r["allocatable"] == 2).await;
    n.wait_resource("example.com/b", "up", |r| r["allocatable"] == 2).await;
    n.pod("p.yaml", &init_pod_yaml("p", "example.com/a", "example.com/b"));
    n.wait_pod("p").await;
    let cp = std::fs::read_to_string(n.dp().join("kubelet_internal_checkpoint")).unwrap();
    assert!(cp.contains("\"setup\"") && cp.contains("example.com/a"), "the init container holds a device: {cp}");
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(0);
    assert_eq!(v["result"], "ok", "{v}");
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["checked"]["plugins"].as_array().unwrap().len(), 2, "{v}");
    let r = npd(&n).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("device plugins ok"), "{}", r.stdout);
    stop_child(a).await;
    stop_child(b).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_plugin_is_found_when_two_resources_share_device_ids() {
    let n = Node::new();
    let k = n.start(&[]).await;
    // smarter-device-manager style: the same IDs for every resource, socket names that say nothing
    let p1 = n.serve(&["--resource", "example.com/tty0", "--devices", "d0,d1", "--socket-name", "p1.sock"]).await;
    let p2 = n.serve(&["--resource", "example.com/tty1", "--devices", "d0,d1", "--socket-name", "p2.sock"]).await;
    n.wait_resource("example.com/tty0", "up", |r| r["allocatable"] == 2).await;
    n.wait_resource("example.com/tty1", "up", |r| r["allocatable"] == 2).await;
    n.pod("serial.yaml", &pod_yaml("serial", "example.com/tty1", 1));
    n.wait_pod("serial").await;
    kill9(&p2);
    let _ = p2.wait_with_output().await;
    // the grace period: capacity stays, nothing allocatable
    let res = n.wait_resource("example.com/tty1", "stream gone", |r| r["allocatable"] == 0).await;
    assert_eq!(res["capacity"], 2, "{res}");
    assert!(n.dp().join("p2.sock").exists(), "SIGKILL leaves the socket behind");
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(1);
    assert_eq!(errors(&v), ["plugin-died"], "{v}");
    let d = &findings(&v, "plugin-died")[0];
    assert_eq!(d["subject"], "example.com/tty1");
    let msg = d["message"].as_str().unwrap();
    assert!(msg.contains("p2.sock") && msg.contains("grace period") && !msg.contains("re-register"), "{msg}");
    assert!(findings(&v, "not-re-registered").is_empty() && findings(&v, "stale-socket").is_empty(), "{v}");
    assert_eq!(v["checked"]["plugins"][0]["resource"], "example.com/tty0", "{v}");
    let r = npd(&n).await;
    r.expect_code(1);
    assert!(
        r.stdout.starts_with("plugin-died example.com/tty1: the plugin serving this resource died"),
        "{}",
        r.stdout
    );
    stop_child(p1).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubelet_socket_is_reported_once() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sv = n.serve(&["--resource", "example.com/foo", "--count", "2", "--socket-name", "foo.sock"]).await;
    n.wait_resource("example.com/foo", "up", |r| r["allocatable"] == 2).await;
    n.pod("a.yaml", &pod_yaml("a", "example.com/foo", 1));
    n.wait_pod("a").await;
    stop_child(k).await;
    assert!(!n.kubelet().exists(), "the mock kubelet removes its socket");
    drop(std::os::unix::net::UnixListener::bind(n.dp().join("dead.sock")).unwrap());
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(1);
    assert_eq!(errors(&v), ["kubelet-down"], "{v}");
    let kd = &findings(&v, "kubelet-down")[0];
    assert!(kd["message"].as_str().unwrap().contains("kubelet.sock is missing"), "{v}");
    for c in ["not-re-registered", "plugin-died", "stale-socket", "pod-resources", "stale-allocation"] {
        assert!(findings(&v, c).is_empty(), "{c} piled on: {v}");
    }
    stop_child(sv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_a_non_root_user_nothing_is_called_stale() {
    use std::os::unix::fs::PermissionsExt;
    let n = Node::new();
    let k = n.start(&[]).await;
    let sv = n.serve(&["--resource", "example.com/foo", "--count", "2", "--socket-name", "foo.sock"]).await;
    n.wait_resource("example.com/foo", "up", |r| r["allocatable"] == 2).await;
    for d in [n.dir.path().to_path_buf(), n.dp(), n.registry()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_nobody = |extra: &[&str]| {
        let mut c = tokio::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_dpctl")])
            .args(owned_args(&n))
            .args(extra)
            .env_remove("DPCTL_PLUGIN_DIR")
            .env_remove("DPCTL_POD_RESOURCES_SOCKET")
            .env_remove("DPCTL_ROOT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        c
    };
    let probe = run_cmd(as_nobody(&["--help"])).await;
    if probe.code != 0 {
        eprintln!("skipped: cannot run dpctl as uid 65534 here: {}", probe.stderr);
        stop_child(sv).await;
        stop_child(k).await;
        return;
    }
    let r = run_cmd(as_nobody(&[])).await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"], "unknown", "{v}");
    let pd = findings(&v, "permission-denied");
    assert_eq!(pd.len(), 1, "{v}");
    let ev = pd[0]["evidence"].as_str().unwrap();
    assert!(ev.contains("foo.sock") && ev.contains("kubelet.sock"), "{ev}");
    assert!(pd[0]["fix"].as_str().unwrap().contains("run doctor as root"));
    assert!(r.stderr.contains("run it as root"), "{}", r.stderr);
    for f in v["findings"].as_array().unwrap() {
        assert_ne!(f["check"], "stale-socket", "{v}");
        assert!(!f["fix"].as_str().unwrap().contains("removing it is safe"), "{f}");
    }
    let r = run_cmd(as_nobody(&["--npd"])).await;
    r.expect_code(2);
    assert!(r.stdout.starts_with("cannot check: permission-denied") && r.stderr.is_empty(), "{r:?}");
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_updated_only_one_stream_disagrees_with_the_kubelet() {
    use dpctl::api::deviceplugin::{registration_client::RegistrationClient, RegisterRequest};
    let n = Node::new();
    let k = n.start(&[]).await;
    let p = start_plugin(
        &n.dp().join("gdp.sock"),
        four_devices(),
        Behaviour { freeze_first_stream: true, ..Default::default() },
    )
    .await;
    let mut c = RegistrationClient::new(
        dpctl::core::transport::dial(&n.kubelet(), std::time::Duration::from_secs(5)).await.unwrap(),
    );
    c.register(RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "gdp.sock".into(),
        resource_name: "squat.ai/serial".into(),
        options: None,
    })
    .await
    .unwrap();
    n.wait_resource("squat.ai/serial", "up", |r| r["allocatable"] == 4).await;
    // A fifth device appears; the kubelet's stream (the first) never hears of it.
    let mut five = four_devices();
    five.push(dev("foo-4", "Healthy", Some(1)));
    p.devices.send(five).unwrap();
    let lw = |p: &PluginHandle| p.calls.lock().unwrap().iter().filter(|c| *c == "ListAndWatch").count();
    let before = lw(&p);
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(0);
    assert_eq!(v["result"], "warning", "{v}");
    let m = findings(&v, "plugin-kubelet-mismatch");
    assert_eq!(m.len(), 1, "{v}");
    assert_eq!(m[0]["subject"], "squat.ai/serial");
    let ev = m[0]["evidence"].as_str().unwrap();
    assert!(
        ev.contains("only in the plugin: foo-4") && ev.contains("kubelet allocatable: foo-0,foo-1,foo-2,foo-3"),
        "{ev}"
    );
    assert!(m[0]["fix"].as_str().unwrap().contains("--no-streams"));
    assert_eq!(lw(&p), before + 1, "doctor opened one stream");
    // --no-streams never opens ListAndWatch, so it cannot compare either
    let args = with(owned_args(&n), &["--no-streams"]);
    let r = dpctl(&args).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["checked"]["streams"], false);
    assert!(findings(&v, "plugin-kubelet-mismatch").is_empty(), "{v}");
    assert_eq!(lw(&p), before + 1, "--no-streams opened no stream");
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_cdi_names_fail_doctor_and_probe() {
    let n = Node::new();
    let (good, bad) = (n.dir.path().join("cdi-good"), n.dir.path().join("cdi-bad"));
    std::fs::create_dir_all(&good).unwrap();
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        good.join("foo.yaml"),
        "cdiVersion: 0.6.0\nkind: vendor.example/foo\ndevices:\n- name: foo-0\n- name: foo-1\n",
    )
    .unwrap();
    std::fs::write(bad.join("broken.json"), "{\"cdiVersion\":").unwrap();
    let k = n.start(&[]).await;
    let sv = n
        .serve(&[
            "--resource",
            "vendor.example/bar",
            "--count",
            "2",
            "--cdi",
            "vendor.example/bar={id}",
            "--socket-name",
            "bar.sock",
        ])
        .await;
    n.wait_resource("vendor.example/bar", "up", |r| r["allocatable"] == 2).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/bar", 1));
    n.wait_pod("a").await;
    let args = with(
        owned_args(&n),
        &["--cdi-spec-dir", s(&good).to_string().leak(), "--cdi-spec-dir", s(&bad).to_string().leak()],
    );
    let r = dpctl(&args).await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(errors(&v), ["cdi-unresolvable"], "{v}");
    let c = &findings(&v, "cdi-unresolvable")[0];
    assert!(c["subject"].as_str().unwrap().starts_with("vendor.example/bar=bar-"), "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(ev.contains("no CDI spec of kind vendor.example/bar") && ev.contains("default/a (UID "), "{ev}");
    let inv = findings(&v, "cdi-spec-invalid");
    assert!(inv[0]["subject"].as_str().unwrap().ends_with("broken.json"), "{v}");
    // probe --allocate checks the names in its answer the same way
    let probe = |sock: &'static str, dir: &std::path::Path| {
        let dir = s(dir).to_string();
        let dp = s(&n.dp()).to_string();
        async move {
            let r =
                dpctl(&["probe", "--plugin-dir", &dp, sock, "--allocate", "--cdi-spec-dir", &dir, "-o", "json"]).await;
            let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
            let cdi = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "cdi").cloned().unwrap();
            (r.code, cdi)
        }
    };
    let (code, cdi) = probe("bar.sock", &good).await;
    assert_eq!((code, cdi["status"].as_str().unwrap()), (1, "FAIL"), "{cdi}");
    assert!(cdi["detail"].as_str().unwrap().contains("unresolvable CDI devices"), "{cdi}");
    // a machine without any CDI spec directory: a warning, not a failure
    let r = dpctl(&["probe", s(&n.dp().join("bar.sock")), "--allocate", "--root", s(n.dir.path()), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let cdi = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "cdi").cloned().unwrap();
    assert_eq!(cdi["status"], "WARN", "{cdi}");
    assert!(cdi["detail"].as_str().unwrap().contains("no CDI spec directory"), "{cdi}");
    let ok = n
        .serve(&[
            "--resource",
            "vendor.example/foo",
            "--count",
            "2",
            "--cdi",
            "vendor.example/foo={id}",
            "--socket-name",
            "foo.sock",
            "--no-register",
        ])
        .await;
    wait_until(20, "foo.sock", || n.dp().join("foo.sock").exists()).await;
    let (code, cdi) = probe("foo.sock", &good).await;
    assert_eq!((code, cdi["status"].as_str().unwrap()), (0, "PASS"), "{cdi}");
    stop_child(ok).await;
    stop_child(sv).await;
    stop_child(k).await;
}

/// A host tree under a prefix, as `kubectl debug node/…` mounts it at /host:
/// a k3s-style kubelet root, a plugin and a pod with a CDI device.
async fn root_tree(root: &std::path::Path) {
    let kr_host = "/var/lib/rancher/k3s/agent/kubelet";
    let kr = root.join(&kr_host[1..]);
    let dp = kr.join("device-plugins");
    let pr = kr.join("pod-resources/kubelet.sock");
    let pods = root.join("manifests");
    for d in [&dp, &pr.parent().unwrap().to_path_buf(), &pods, &root.join("etc/cdi")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        root.join("etc/cdi/foo.json"),
        r#"{"cdiVersion":"0.6.0","kind":"example.com/foo","devices":[{"name":"foo-0"},{"name":"foo-1"}]}"#,
    )
    .unwrap();
    let mut k = dpctl_cmd(&[
        "mock-kubelet",
        "--plugin-dir",
        s(&dp),
        "--manifests",
        s(&pods),
        "--pod-resources-socket",
        s(&pr),
        "--dial-timeout",
        "1s",
        "--log-format",
        "json",
    ])
    .spawn()
    .unwrap();
    // Wait on the kubelet's own events, not on polls of `dpctl node`.
    let mut log = Tail::stdout(&mut k);
    log.wait_for("\"event\":\"started\"", 1).await;
    let sv = serve_cmd(
        &dp,
        &[
            "--resource",
            "example.com/foo",
            "--count",
            "2",
            "--cdi",
            "example.com/foo={id}",
            "--socket-name",
            "foo.sock",
            "--retry",
        ],
    )
    .spawn()
    .unwrap();
    log.wait_for("\"allocatable\":2", 1).await;
    std::fs::write(pods.join(".a.tmp"), pod_yaml("a", "example.com/foo", 1)).unwrap();
    std::fs::rename(pods.join(".a.tmp"), pods.join("a.yaml")).unwrap();
    log.wait_for("\"event\":\"pod-admitted\"", 1).await;
    let node = dpctl(&["node", "--plugin-dir", s(&dp), "-o", "json"]).await;
    node.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&node.stdout).unwrap();
    assert!(
        v["resources"].as_array().is_some_and(|rs| rs.iter().any(|r| r["allocatable"] == 2))
            && v["pods"].as_array().is_some_and(|p| !p.is_empty()),
        "dpctl node under {}: {v}",
        root.display()
    );
    let rs = s(root).to_string();
    // flags
    let r = dpctl(&["doctor", "--root", &rs, "--kubelet-root-dir", kr_host, "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"], "ok", "{v}");
    assert_eq!(v["checked"]["pluginSockets"], 1, "{v}");
    assert_eq!(v["checked"]["podResources"], true, "{v}");
    assert_eq!(v["checked"]["cdiNames"], 1, "CDI names resolved under the root: {v}");
    // env vars, and the npd mode
    let mut c = dpctl_cmd(&["doctor", "--npd"]);
    c.env("DPCTL_ROOT", &rs).env("DPCTL_KUBELET_ROOT_DIR", kr_host);
    let r = run_cmd(c).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("device plugins ok"), "{r:?}");
    // every client command: podresources, probe by bare name and by host path
    let r = dpctl(&["podresources", "list", "--root", &rs, "--kubelet-root-dir", kr_host]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("example.com/foo"), "{}", r.stdout);
    let r = dpctl(&["probe", "foo.sock", "--root", &rs, "--kubelet-root-dir", kr_host, "--allocate"]).await;
    r.expect_code(0);
    let host_path = format!("{kr_host}/device-plugins/foo.sock");
    let r = dpctl(&["options", &host_path, "--root", &rs]).await;
    r.expect_code(0);
    stop_child(sv).await;
    stop_tailed(k, log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_and_clients_work_on_a_root_tree() {
    let d = tmp();
    root_tree(&d.path().join("host")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_paths_over_108_bytes_connect() {
    let d = tmp();
    let root = d.path().join("h".repeat(40)).join("o".repeat(40));
    let sock = root.join("var/lib/rancher/k3s/agent/kubelet/device-plugins/kubelet.sock");
    assert!(sock.as_os_str().len() > 108, "{}", sock.display());
    root_tree(&root).await;
}

mod watcher_reg {
    use dpctl::api::pluginregistration::registration_server::{Registration, RegistrationServer};
    use dpctl::api::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
    use tonic::{Request, Response, Status};

    #[derive(Clone)]
    pub struct Reg(pub PluginInfo);

    #[tonic::async_trait]
    impl Registration for Reg {
        async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
            Ok(Response::new(self.0.clone()))
        }
        async fn notify_registration_status(
            &self,
            _: Request<RegistrationStatus>,
        ) -> Result<Response<RegistrationStatusResponse>, Status> {
            Ok(Response::new(RegistrationStatusResponse {}))
        }
    }

    pub async fn start(path: &std::path::Path, info: PluginInfo) -> tokio::sync::oneshot::Sender<()> {
        let (l, g) = dpctl::core::transport::listen(path).await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _g = g;
            let _ = dpctl::core::transport::serve(l, RegistrationServer::new(Reg(info)), async {
                let _ = rx.await;
            })
            .await;
        });
        tx
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_registered_through_the_plugin_watcher_is_found_at_its_endpoint() {
    let n = Node::new();
    let reg = n.registry();
    let k = n.start(&["--plugins-registry-dir", s(&reg)]).await;
    // the device-plugin socket lives outside the device-plugin directory
    let elsewhere = n.dir.path().join("plugins/vendor");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let _p = start_plugin(&elsewhere.join("dp.sock"), four_devices(), Behaviour::default()).await;
    let info = dpctl::api::pluginregistration::PluginInfo {
        r#type: "DevicePlugin".into(),
        name: "example.com/w".into(),
        endpoint: s(&elsewhere.join("dp.sock")).into(),
        supported_versions: vec!["v1beta1".into()],
    };
    let _r = watcher_reg::start(&reg.join("vendor-reg.sock"), info).await;
    n.wait_resource("example.com/w", "registered via the watcher", |r| r["allocatable"] == 4).await;
    // A checkpoint caught mid-write (its temp file, renamed over it an instant later) is no finding.
    std::fs::write(n.dir.path().join("device-plugins/.kubelet_internal_checkpoint.tmp-Ab12Cd"), "{}").unwrap();
    let (r, v) = doctor(&n, &n.pr()).await;
    r.expect_code(0);
    assert_eq!(v["result"], "ok", "{v}");
    assert_eq!(v["checked"]["pluginSockets"], 1, "{v}");
    assert_eq!(v["checked"]["plugins"][0]["resource"], "example.com/w", "{v}");
    assert_eq!(v["checked"]["plugins"][0]["how"], "plugin-watcher GetInfo", "{v}");
    stop_child(k).await;
}

// ---- issue 37: doctor on DRA nodes as on device-plugin nodes ----

const DRA_CLAIM: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: 11111111-2222-3333-4444-555555555555\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.example.com\n";
const DRA_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\n  uid: pod-1\nspec:\n  resourceClaims:\n  - name: g\n    resourceClaimName: gpu\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: g\n";

/// The README's DRA node: a mock kubelet on a kubelet root, `dra serve`
/// writing CDI specs to `<root>/cdi`, a pod with a prepared claim. Healthy,
/// `doctor --kubelet-root-dir` finds the specs (one CDI search path) and
/// reads as healthy; after the driver is SIGKILLed it is one error naming
/// the driver, the claim and the pod, and dpctl's own control socket is
/// never reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_dra_driver_with_a_prepared_claim_is_one_error_naming_claim_and_pod() {
    let d = tmp();
    let root = d.path().to_path_buf();
    let p = |x: &str| root.join(x).display().to_string();
    let mut c = mock_kubelet_on(&root, &[]);
    let mut kubelet = c.spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"started\"", 1).await;
    let mut dc = dpctl_cmd(&[
        "--kubelet-root-dir",
        &p(""),
        "dra",
        "serve",
        "--driver",
        "gpu.example.com",
        "--devices",
        "2",
        "--cdi-dir",
        &p("cdi"),
    ]);
    dc.stdout(std::process::Stdio::null());
    let driver = dc.spawn().unwrap();
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    std::fs::write(root.join("manifests/claim.yaml"), DRA_CLAIM).unwrap();
    std::fs::write(root.join("manifests/pod.yaml"), DRA_POD).unwrap();
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;

    let doctor = |format: &'static str| {
        let root = p("");
        async move {
            let mut args = vec!["--kubelet-root-dir", &root, "doctor"];
            if format == "json" {
                args.extend(["-o", "json"]);
            }
            dpctl(&args).await
        }
    };
    // Healthy: no dra-cdi error (the specs are in <root>/cdi), and it reads as healthy.
    let r = doctor("table").await;
    r.expect_code(0);
    assert!(r.stdout.contains("ok: no problems found (1 note(s))"), "{}", r.stdout);
    assert!(!r.stdout.contains("dra-cdi") && !r.stdout.contains("fix: \n"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("CDI specs looked up in /etc/cdi, /var/run/cdi, {}", p("cdi"))), "{}", r.stdout);

    kill9(&driver);
    let _ = driver.wait_with_output().await;
    let r = doctor("json").await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let checks: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["check"].as_str().unwrap(), f["severity"].as_str().unwrap()))
        .collect();
    assert_eq!(checks, [("dra-driver-died", "error")], "{}", r.stdout);
    let f = &v["findings"][0];
    assert_eq!(f["subject"], "gpu.example.com");
    let ev = f["evidence"].as_str().unwrap();
    assert!(ev.contains("ml/gpu (UID 11111111-2222-3333-4444-555555555555) held by ml/trainer"), "{ev}");
    assert!(!r.stdout.contains("dpctl-control"), "dpctl's control socket is never reported: {}", r.stdout);
    assert!(r.stderr.contains("doctor found 1 error(s)"), "{}", r.stderr);
    let t = doctor("table").await;
    assert!(t.stdout.contains("error: 1 error(s); checked"), "{}", t.stdout);
    stop_tailed(kubelet, log).await;
}
