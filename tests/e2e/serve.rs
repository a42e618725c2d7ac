//! `dpctl serve` as a real process against an in-test kubelet that dials it
//! back the way the kubelet does.

use crate::support::*;
use dpctl::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest, PreStartContainerRequest,
    PreferredAllocationRequest,
};
use dpctl::client::conn::{PluginConn, Update};
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

async fn dial(dir: &Path, endpoint: &str) -> PluginConn {
    PluginConn::connect(&dir.join(endpoint), T, 4 << 20).await.expect("dial the plugin back")
}

async fn snapshot(s: &mut dpctl::client::conn::ListAndWatch) -> Vec<(String, String)> {
    match tokio::time::timeout(T, s.next()).await.expect("snapshot in time").expect("stream ok") {
        Update::Snapshot(r) => r.devices.into_iter().map(|d| (d.id, d.health)).collect(),
        Update::Closed => panic!("stream closed"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_and_serves_what_the_kubelet_asks() {
    let d = tmp();
    let (reqs, _k) = kubelet::start(&d.path().join("kubelet.sock"), None).await;
    let child = serve_cmd(
        d.path(),
        &[
            "--resource",
            "vendor.example/foo",
            "--count",
            "4",
            "--numa-nodes",
            "2",
            "--preferred-allocation",
            "--pre-start",
            "--env",
            "FOO_VISIBLE_DEVICES={ids}",
            "--device-spec",
            "/dev/null:/dev/{id}:rw",
            "--cdi",
            "vendor.example/foo={id}",
            "--mount",
            "/opt/foo:/usr/local/foo:ro",
            "--annotation",
            "foo.example/count={count}",
        ],
    )
    .spawn()
    .unwrap();
    wait_until(10, "a RegisterRequest", || !reqs.lock().unwrap().is_empty()).await;
    let req = reqs.lock().unwrap()[0].clone();
    assert_eq!(req.version, "v1beta1");
    assert_eq!(req.resource_name, "vendor.example/foo");
    assert!(req.endpoint.ends_with(".sock") && !req.endpoint.contains('/'), "{}", req.endpoint);
    let opts = req.options.unwrap();
    assert!(opts.pre_start_required && opts.get_preferred_allocation_available);

    let p = dial(d.path(), &req.endpoint).await;
    let o = p.options().await.unwrap();
    assert!(o.pre_start_required && o.get_preferred_allocation_available);
    let mut s1 = p.list_and_watch().await.unwrap();
    let mut s2 = p.list_and_watch().await.unwrap();
    let first = snapshot(&mut s1).await;
    assert_eq!(first.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["foo-0", "foo-1", "foo-2", "foo-3"]);
    assert!(first.iter().all(|x| x.1 == "Healthy"));
    snapshot(&mut s2).await;

    // live control from another process reaches every open stream
    let r = dpctl(&["--plugin-dir", s(d.path()), "device", "set-health", "foo-1", "foo-2", "Unhealthy"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("(2/4 healthy)"), "{}", r.stdout);
    for s in [&mut s1, &mut s2] {
        let snap = snapshot(s).await;
        assert_eq!(
            snap.iter().filter(|x| x.1 == "Unhealthy").map(|x| x.0.as_str()).collect::<Vec<_>>(),
            ["foo-1", "foo-2"]
        );
    }
    dpctl(&["--plugin-dir", s(d.path()), "device", "add", "foo-9", "--numa", "1"]).await.expect_code(0);
    assert!(snapshot(&mut s1).await.iter().any(|x| x.0 == "foo-9"));
    dpctl(&["--plugin-dir", s(d.path()), "device", "remove", "foo-9"]).await.expect_code(0);
    assert!(!snapshot(&mut s1).await.iter().any(|x| x.0 == "foo-9"));
    let r = dpctl(&["--plugin-dir", s(d.path()), "device", "remove", "nope"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("unknown device(s): nope"), "{}", r.stderr);

    // preferred (packed): healthy foo-0 (numa 0), foo-3 (numa 1) + must-include foo-3 → foo-3 first
    let pref = p
        .preferred(PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: vec!["foo-0".into(), "foo-3".into()],
                must_include_device_i_ds: vec!["foo-3".into()],
                allocation_size: 2,
            }],
        })
        .await
        .unwrap();
    assert_eq!(pref.container_responses[0].device_i_ds, ["foo-3", "foo-0"]);

    // Allocate: good IDs render the template; unknown and unhealthy IDs are rejected by name
    let resp = p
        .allocate(AllocateRequest {
            container_requests: vec![ContainerAllocateRequest { devices_ids: vec!["foo-0".into(), "foo-3".into()] }],
        })
        .await
        .unwrap();
    let c = &resp.container_responses[0];
    assert_eq!(c.envs["FOO_VISIBLE_DEVICES"], "foo-0,foo-3");
    assert_eq!(c.annotations["foo.example/count"], "2");
    assert_eq!(c.devices.iter().map(|d| d.container_path.as_str()).collect::<Vec<_>>(), ["/dev/foo-0", "/dev/foo-3"]);
    assert_eq!(c.cdi_devices[1].name, "vendor.example/foo=foo-3");
    assert!(c.mounts[0].read_only && c.mounts[0].host_path == "/opt/foo");
    let err = p
        .allocate(AllocateRequest {
            container_requests: vec![ContainerAllocateRequest { devices_ids: vec!["foo-1".into(), "foo-7".into()] }],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(tonic::Code::InvalidArgument));
    let msg = err.to_string();
    assert!(msg.contains("unknown device(s) foo-7") && msg.contains("unhealthy device(s) foo-1"), "{msg}");
    p.pre_start(PreStartContainerRequest { devices_ids: vec!["foo-0".into()] }, T).await.unwrap();

    let out = stop_child(child).await;
    out.expect_code(0);
    for ev in
        ["serving", "registered", "GetPreferredAllocation", "Allocate", "PreStartContainer", "control op=set-health"]
    {
        assert!(out.stdout.contains(ev), "log lacks {ev}:\n{}", out.stdout);
    }
    assert!(out.stdout.contains("containers=foo-0,foo-3") && out.stdout.contains("latencyMs="), "{}", out.stdout);
    assert_eq!(sockets_in(d.path()), ["kubelet.sock"], "serve removed its own socket and only it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_policy_and_probe() {
    let d = tmp();
    let child = serve_cmd(
        d.path(),
        &[
            "--resource",
            "vendor.example/bar",
            "--count",
            "4",
            "--numa-nodes",
            "2",
            "--preferred-allocation",
            "--policy",
            "distributed",
            "--no-register",
            "--socket-name",
            "bar.sock",
        ],
    )
    .spawn()
    .unwrap();
    let sock = d.path().join("bar.sock");
    wait_until(10, "bar.sock", || sock.exists()).await;
    let r = dpctl(&["preferred", s(&sock), "--available", "bar-0,bar-1,bar-2,bar-3", "--size", "2"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("preferred: bar-0,bar-2"), "{}", r.stdout);
    let r = dpctl(&["probe", s(&sock), "--allocate"]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.lines().filter(|l| l.starts_with("PASS")).count(), 7, "{}", r.stdout);
    assert!(!r.stdout.contains("FAIL") && !r.stdout.contains("WARN"), "{}", r.stdout);
    stop_child(child).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reregisters_after_a_kubelet_restart() {
    let d = tmp();
    let ksock = d.path().join("kubelet.sock");
    let (reqs, k1) = kubelet::start(&ksock, None).await;
    let child = serve_cmd(d.path(), &["--resource", "vendor.example/foo", "--count", "2"]).spawn().unwrap();
    wait_until(10, "first registration", || !reqs.lock().unwrap().is_empty()).await;
    let first = reqs.lock().unwrap()[0].endpoint.clone();

    // The kubelet restarts: it deletes every socket in the directory, then listens again.
    drop(k1);
    wait_until(10, "the old kubelet to stop listening", || std::os::unix::net::UnixStream::connect(&ksock).is_err())
        .await;
    for name in sockets_in(d.path()) {
        // the old kubelet's own socket may vanish on its own as it stops
        match std::fs::remove_file(d.path().join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("remove: {e}"),
            _ => {}
        }
    }
    let (reqs2, _k2) = kubelet::start(&ksock, None).await;
    let start = std::time::Instant::now();
    wait_until(10, "re-registration", || !reqs2.lock().unwrap().is_empty()).await;
    let elapsed = start.elapsed();
    let second = reqs2.lock().unwrap()[0].endpoint.clone();
    assert_ne!(first, second, "a fresh socket per start");
    assert!(d.path().join(&second).exists());
    // the re-registered plugin answers
    let p = dial(d.path(), &second).await;
    let mut st = p.list_and_watch().await.unwrap();
    assert_eq!(snapshot(&mut st).await.len(), 2);
    let out = stop_child(child).await;
    out.expect_code(0);
    assert!(out.stdout.contains("restarting"), "{}", out.stdout);
    eprintln!("re-registered {elapsed:?} after the new kubelet.sock appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_watcher_registration() {
    use dpctl::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest, RegistrationStatus};
    let d = tmp();
    let reg = d.path().join("plugins_registry");
    std::fs::create_dir(&reg).unwrap();
    let child = serve_cmd(
        d.path(),
        &[
            "--resource",
            "vendor.example/foo",
            "--count",
            "2",
            "--registration",
            "plugin-watcher",
            "--plugins-registry-dir",
            s(&reg),
        ],
    )
    .spawn()
    .unwrap();
    // unique per start (a second instance can serve while the first runs)
    let reg_sock = reg.join(format!("vendor.example_foo-{}-reg.sock", child.id().unwrap()));
    wait_until(10, "the registration socket", || reg_sock.exists()).await;
    let mut c = RegistrationClient::new(dpctl::core::transport::dial(&reg_sock, T).await.unwrap());
    let info = c.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "DevicePlugin");
    assert_eq!(info.name, "vendor.example/foo");
    assert_eq!(info.supported_versions, ["v1beta1"]);
    let p = PluginConn::connect(Path::new(&info.endpoint), T, 4 << 20).await.unwrap();
    assert!(!p.options().await.unwrap().pre_start_required);
    c.notify_registration_status(RegistrationStatus { plugin_registered: true, error: String::new() }).await.unwrap();
    // A rejection is reported and ends the plugin with a non-zero exit.
    c.notify_registration_status(RegistrationStatus {
        plugin_registered: false,
        error: "resource already taken".into(),
    })
    .await
    .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected the registration of vendor.example/foo: resource already taken"), "{err}");
    assert!(!reg_sock.exists() && sockets_in(d.path()).is_empty(), "sockets cleaned up");
}

/// `serve --root /host` in a pod: every host path (kubelet.sock from a flag,
/// the plugin-watcher directory) is under the root, and the plugin-watcher
/// endpoint is reported as the host's own path, the one the kubelet dials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_under_root_registers_with_host_paths() {
    use dpctl::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest};
    let d = tmp();
    let root = d.path().join("host");
    let dp = root.join("var/lib/kubelet/device-plugins");
    let reg = root.join("var/lib/kubelet/plugins_registry");
    std::fs::create_dir_all(&dp).unwrap();
    std::fs::create_dir_all(&reg).unwrap();
    std::fs::create_dir_all(root.join("run/k")).unwrap();
    let base = ["--root", s(&root), "--kubelet-root-dir", "/var/lib/kubelet", "--resource", "vendor.example/foo"];

    // kubelet.sock named by a host path: looked up under the root
    let (reqs, _k) = kubelet::start(&root.join("run/k/kubelet.sock"), None).await;
    let mut args = vec!["serve"];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--kubelet-socket", "/run/k/kubelet.sock"]);
    let child = dpctl_cmd(&args).spawn().unwrap();
    wait_until(10, "a RegisterRequest", || !reqs.lock().unwrap().is_empty()).await;
    let ep = reqs.lock().unwrap()[0].endpoint.clone();
    assert!(dp.join(&ep).exists(), "the plugin serves in the host's plugin dir: {ep}");
    stop_child(child).await.expect_code(0);

    // plugin-watcher mode with the default directory: <root>/<kubelet-root>/plugins_registry
    let mut args = vec!["serve"];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--registration", "plugin-watcher", "--socket-name", "foo.sock"]);
    let child = dpctl_cmd(&args).spawn().unwrap();
    let reg_sock = reg.join("vendor.example_foo-reg.sock");
    wait_until(10, "the registration socket under the root", || reg_sock.exists()).await;
    let mut c = RegistrationClient::new(dpctl::core::transport::dial(&reg_sock, T).await.unwrap());
    let info = c.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.endpoint, "/var/lib/kubelet/device-plugins/foo.sock", "the host's path, without the root");
    let p = PluginConn::connect(&root.join(info.endpoint.trim_start_matches('/')), T, 4 << 20).await.unwrap();
    assert!(!p.options().await.unwrap().pre_start_required);
    stop_child(child).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_failures_exit_1_with_the_kubelets_error() {
    let d = tmp();
    let r = run_cmd(serve_cmd(d.path(), &["--resource", "vendor.example/foo"])).await;
    r.expect_code(1);
    assert!(
        r.stderr.contains("registration failed") && r.stderr.contains("no such socket") && r.stderr.contains("--retry"),
        "{}",
        r.stderr
    );
    assert!(sockets_in(d.path()).is_empty(), "its socket is gone: {:?}", sockets_in(d.path()));

    let msg = "the ResourceName \"vendor.example/foo\" is invalid";
    let (_r, _k) = kubelet::start(&d.path().join("kubelet.sock"), Some(msg.into())).await;
    let r = run_cmd(serve_cmd(d.path(), &["--resource", "vendor.example/foo"])).await;
    r.expect_code(1);
    assert!(r.stderr.contains(msg), "{}", r.stderr);

    // with --retry it keeps serving and retrying
    let mut child = serve_cmd(d.path(), &["--resource", "vendor.example/foo", "--retry"]).spawn().unwrap();
    let mut tail = Tail::stdout(&mut child);
    tail.wait_for("register-failed", 2).await;
    let out = stop_tailed(child, tail).await;
    out.expect_code(0);
    assert!(out.stdout.matches("register-failed").count() >= 2, "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flags_configs_and_paths() {
    let d = tmp();
    for (args, want) in [
        (vec!["--resource", "foo"], "--resource: invalid resource name \"foo\""),
        (vec!["--resource", "v.e/foo", "--devices", "a,a"], "\"a\" appears more than once"),
        (vec!["--resource", "v.e/foo", "--count", "2", "--unhealthy", "zz"], "--unhealthy: no device \"zz\""),
        (vec!["--resource", "v.e/foo", "--flap", "zz:1s"], "--flap"),
        (vec!["--resource", "v.e/foo", "--preferred-fault", "too-many"], "--preferred-fault"),
        (vec!["--resource", "v.e/foo", "--allocate-failure-rate", "3"], "between 0 and 1"),
        (vec!["--resource", "v.e/foo", "--mount", "nocolon"], "HOST:CONTAINER"),
        (vec!["--count", "3"], "--resource"),
        (vec!["--config", "x.json", "--count", "3"], "cannot be used with"),
    ] {
        let mut a = vec!["--no-register"];
        a.extend(args.iter());
        let r = run_cmd(serve_cmd(d.path(), &a)).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let cfg = d.path().join("c.json");
    std::fs::write(&cfg, r#"{"resources": [{"resource": "v.e/foo", "faults": {"closeStreamAfter": 0}}]}"#).unwrap();
    let r = run_cmd(serve_cmd(d.path(), &["--config", s(&cfg)])).await;
    r.expect_code(2);
    assert!(r.stderr.contains("resources[0].faults.closeStreamAfter"), "{}", r.stderr);

    // a regular file where the socket should go is never touched
    let f = d.path().join("taken.sock");
    std::fs::write(&f, "keep me").unwrap();
    let r =
        run_cmd(serve_cmd(d.path(), &["--resource", "v.e/foo", "--no-register", "--socket-name", "taken.sock"])).await;
    r.expect_code(1);
    assert!(r.stderr.contains("regular file"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep me");
    let r = run_cmd(serve_cmd(&d.path().join("missing"), &["--resource", "v.e/foo"])).await;
    r.expect_code(1);
    assert!(r.stderr.contains("plugin directory does not exist"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_file_with_two_resources_and_faults() {
    let d = tmp();
    let (reqs, _k) = kubelet::start(&d.path().join("kubelet.sock"), None).await;
    let cfg = d.path().join("serve.json");
    std::fs::write(
        &cfg,
        r#"{
          "logFormat": "json",
          "resources": [
            {"resource": "vendor.example/gpu", "count": 2, "socketName": "gpu.sock",
             "faults": {"closeStreamAfter": 2, "flap": [{"device": "gpu-1", "period": "150ms"}]}},
            {"resource": "vendor.example/nic", "devices": [{"id": "eth0"}, {"id": "eth1"}], "socketName": "nic.sock",
             "preferredAllocation": true,
             "faults": {"allocateFailureRate": 1.0, "preferred": "foreign"}}
          ]}"#,
    )
    .unwrap();
    let child = serve_cmd(d.path(), &["--config", s(&cfg)]).spawn().unwrap();
    wait_until(10, "two registrations", || reqs.lock().unwrap().len() == 2).await;
    let mut names: Vec<String> = reqs.lock().unwrap().iter().map(|r| r.resource_name.clone()).collect();
    names.sort();
    assert_eq!(names, ["vendor.example/gpu", "vendor.example/nic"]);

    // flap + close after 2: the stream shows a toggled gpu-1, then ends
    let r = dpctl(&["watch", s(&d.path().join("gpu.sock")), "-o", "json", "--timeout", "3s"]).await;
    r.expect_code(1);
    let lines: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert_eq!(lines[1]["devices"][1]["health"], "Unhealthy");
    assert!(r.stderr.contains("closed the ListAndWatch stream after 2"), "{}", r.stderr);

    let nic = d.path().join("nic.sock");
    let r = dpctl(&["allocate", s(&nic), "eth0"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("Internal") && r.stderr.contains("injected Allocate failure"), "{}", r.stderr);
    let r = dpctl(&["preferred", s(&nic), "--available", "eth0,eth1", "--size", "1"]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("IDs not in the available list: nic-not-offered"), "{}", r.stdout);

    let r = dpctl(&["--plugin-dir", s(d.path()), "device", "set-health", "eth0", "Unhealthy"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("several resources"), "{}", r.stderr);
    let r =
        dpctl(&["--plugin-dir", s(d.path()), "device", "list", "--resource", "vendor.example/nic", "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v[0]["devices"][1]["ID"], "eth1");

    let out = stop_child(child).await;
    out.expect_code(0);
    let events: Vec<serde_json::Value> =
        out.stdout.lines().map(|l| serde_json::from_str(l).expect("JSON log line")).collect();
    assert!(events.iter().any(|e| e["event"] == "flap" && e["device"] == "gpu-1"));
    assert!(events.iter().any(|e| e["event"] == "Allocate" && e["code"] == "Internal"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_plugin_exceeds_the_kubelets_4mib_limit() {
    let d = tmp();
    let child = serve_cmd(
        d.path(),
        &[
            "--resource",
            "vendor.example/foo",
            "--count",
            "100000",
            "--id-pattern",
            "vendor-accelerator-device-{i}",
            "--no-register",
            "--socket-name",
            "big.sock",
        ],
    )
    .spawn()
    .unwrap();
    let sock = d.path().join("big.sock");
    wait_until(20, "big.sock", || sock.exists()).await;
    let r = dpctl(&["probe", s(&sock), "-o", "json", "--timeout", "20s"]).await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let size = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "snapshot-size").unwrap();
    assert_eq!(size["status"], "FAIL", "{size}");
    assert!(size["detail"].as_str().unwrap().contains("over the kubelet's receive limit"));
    // A kubelet-side client with the kubelet's 4 MiB limit is refused the snapshot.
    let p = PluginConn::connect(&sock, Duration::from_secs(20), dpctl::api::KUBELET_MAX_RECV).await.unwrap();
    let mut st = p.list_and_watch().await.unwrap();
    let err = match st.next().await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a 4 MiB client accepted the snapshot"),
    };
    assert!(err.contains("receive limit"), "{err}");
    stop_child(child).await.expect_code(0);
}
