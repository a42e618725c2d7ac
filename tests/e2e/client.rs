//! The client commands against in-test plugins and kubelet servers.

use crate::support::*;
use dpctl::api::deviceplugin::DevicePluginOptions;
use std::time::Duration;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_table_and_json() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false },
        ..Default::default()
    };
    let _p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&["options", s(&sock)]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("pre_start_required") && r.stdout.contains("true"), "{}", r.stdout);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("get_preferred_allocation_available") && l.ends_with("false")),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains('\x1b'), "no colour when stdout is not a terminal");

    let r = dpctl(&["options", s(&sock), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["preStartRequired"], true);
    assert!(v.get("getPreferredAllocationAvailable").is_none(), "false is a default, omitted like protojson: {v}");
    let r = dpctl(&["options", s(&sock), "-o", "json", "--emit-defaults"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["getPreferredAllocationAvailable"], false);

    let r = dpctl(&["options", s(&sock), "-o", "yaml"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("preStartRequired: true"), "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_socket_names_resolve_in_the_plugin_dir() {
    let d = tmp();
    let _p = start_plugin(&d.path().join("vendor.sock"), four_devices(), Behaviour::default()).await;
    let r = dpctl(&["options", "vendor.sock", "--plugin-dir", s(d.path())]).await;
    r.expect_code(0);
    let mut c = dpctl_cmd(&["options", "vendor.sock"]);
    c.env("DPCTL_PLUGIN_DIR", d.path());
    run_cmd(c).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_table_then_diffs() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let child = dpctl_cmd(&["watch", s(&sock), "--count", "3"]).spawn().unwrap();
    p.wait_sent(1).await;
    let mut devs = four_devices();
    devs[1].health = "Unhealthy".into();
    p.devices.send(devs.clone()).unwrap();
    p.wait_sent(2).await;
    devs.remove(3);
    devs.push(dev("foo-9", "Healthy", Some(1)));
    p.devices.send(devs).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("HEALTH") && lines[0].contains("NUMA"), "{stdout}");
    assert!(
        lines.iter().any(|l| l.starts_with("foo-3") && l.contains("Healthy") && l.trim_end().ends_with('1')),
        "{stdout}"
    );
    assert!(stdout.contains("4 device(s), 4 healthy"), "{stdout}");
    assert!(stdout.contains("update 2: 3/4 healthy"), "{stdout}");
    assert!(stdout.contains("~ foo-1  Healthy -> Unhealthy"), "{stdout}");
    assert!(stdout.contains("update 3: 3/4 healthy"), "{stdout}");
    assert!(stdout.contains("+ foo-9  Healthy  numa 1"), "{stdout}");
    assert!(stdout.contains("- foo-3"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_lines_carry_the_full_device_list() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let child = dpctl_cmd(&["watch", s(&sock), "--count", "2", "-o", "json"]).spawn().unwrap();
    p.wait_sent(1).await;
    let mut devs = four_devices();
    devs[0].health = "Unhealthy".into();
    p.devices.send(devs).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0]["devices"].as_array().unwrap().len(), 4);
    assert_eq!(lines[1]["healthy"], 3);
    assert_eq!(lines[1]["devices"][0]["ID"], "foo-0");
    assert_eq!(lines[1]["devices"][0]["health"], "Unhealthy");
    assert_eq!(lines[1]["devices"][0]["topology"]["nodes"][0]["ID"], "0", "int64 is a JSON string in protojson");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_a_stream_the_plugin_closed() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let _p = start_plugin(&sock, four_devices(), Behaviour { close_after: Some(1), ..Default::default() }).await;
    let r = dpctl(&["watch", s(&sock)]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("foo-0"), "the first snapshot is still shown: {}", r.stdout);
    assert!(r.stderr.contains("closed the ListAndWatch stream after 1 update"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_duration_ends_cleanly() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let _p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let r = dpctl(&["watch", s(&sock), "--duration", "300ms"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("4 device(s), 4 healthy"), "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocate_renders_each_container() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let r = dpctl(&["allocate", s(&sock), "foo-0", "foo-2", "--container", "foo-1"]).await;
    r.expect_code(0);
    assert_eq!(p.calls.lock().unwrap().last().unwrap(), "Allocate(foo-0,foo-2|foo-1)");
    let rows: Vec<Vec<&str>> = r.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], vec!["CONTAINER", "KIND", "NAME", "VALUE"]);
    assert!(rows.contains(&vec!["0", "env", "TEST_DEVICES", "foo-0,foo-2"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["1", "env", "TEST_DEVICES", "foo-1"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["0", "device", "/dev/foo-2", "/dev/foo-2", "(rw)"]), "{}", r.stdout);

    let r = dpctl(&["allocate", s(&sock), "foo-3", "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["containerResponses"][0]["envs"]["TEST_DEVICES"], "foo-3");
    assert_eq!(v["containerResponses"][0]["devices"][0]["containerPath"], "/dev/foo-3");
    let c = &v["containerResponses"][0];
    for empty in ["cdiDevices", "mounts", "annotations"] {
        assert!(c.get(empty).is_none(), "{empty} is empty, so omitted: {c}");
    }
    let r = dpctl(&["allocate", s(&sock), "foo-3", "-o", "yaml"]).await;
    assert!(!r.stdout.contains("cdiDevices") && !r.stdout.contains("null"), "{}", r.stdout);
    let r = dpctl(&["allocate", s(&sock), "foo-3", "-o", "json", "--emit-defaults"]).await;
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["containerResponses"][0]["cdiDevices"], serde_json::json!([]));
    assert_eq!(v["containerResponses"][0]["annotations"], serde_json::json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_status_prints_code_and_message() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour { fail: Some((Code::InvalidArgument, "unknown device foo-9".into())), ..Default::default() };
    let _p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&["allocate", s(&sock), "foo-9"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("Allocate failed: InvalidArgument: unknown device foo-9"), "{}", r.stderr);
    assert!(r.stderr.contains(s(&sock)), "names the socket: {}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_checks_the_answer() {
    let d = tmp();
    let good = d.path().join("good.sock");
    let bad = d.path().join("bad.sock");
    let advertises = DevicePluginOptions { get_preferred_allocation_available: true, ..Default::default() };
    let p = start_plugin(&good, four_devices(), Behaviour { options: advertises, ..Default::default() }).await;
    let b = Behaviour {
        options: advertises,
        preferred: Some(vec!["foo-0".into(), "foo-7".into(), "foo-1".into()]),
        ..Default::default()
    };
    let _q = start_plugin(&bad, four_devices(), b).await;

    let r =
        dpctl(&["preferred", s(&good), "--available", "foo-0,foo-1,foo-2", "--must-include", "foo-2", "--size", "2"])
            .await;
    r.expect_code(0);
    assert!(r.stdout.contains("preferred: foo-2,foo-0"), "{}", r.stdout);
    assert!(r.stdout.contains("PASS"), "{}", r.stdout);
    assert!(p.calls.lock().unwrap().contains(&"GetPreferredAllocation(foo-0,foo-1,foo-2/foo-2/2)".to_string()));

    let r =
        dpctl(&["preferred", s(&bad), "--available", "foo-0,foo-1,foo-2", "--must-include", "foo-2", "--size", "2"])
            .await;
    r.expect_code(1);
    assert!(r.stdout.contains("FAIL size not honoured: asked for 2, got 3"), "{}", r.stdout);
    assert!(r.stdout.contains("IDs not in the available list: foo-7"), "{}", r.stdout);
    assert!(r.stdout.contains("must-include IDs missing: foo-2"), "{}", r.stdout);

    // advertised, but an empty answer: the kubelet tolerates it (and picks itself)
    let empty = d.path().join("empty.sock");
    let b = Behaviour { options: advertises, preferred: Some(vec![]), ..Default::default() };
    let _e = start_plugin(&empty, four_devices(), b).await;
    let r = dpctl(&["preferred", s(&empty), "--available", "foo-0,foo-1", "--size", "1"]).await;
    r.expect_code(1); // an empty list inside container_responses[0] breaks the size rule
    assert!(r.stdout.contains("FAIL size not honoured"), "{}", r.stdout);

    let r = dpctl(&["preferred", s(&bad), "--available", "foo-0", "--size", "2"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--size 2 is more than the 1 available"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prestart_calls_the_plugin() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let r = dpctl(&["prestart", s(&sock), "foo-1", "foo-2"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("PreStartContainer(foo-1,foo-2) succeeded"), "{}", r.stdout);
    assert!(p.calls.lock().unwrap().contains(&"PreStartContainer(foo-1,foo-2)".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_sends_the_request_and_reports_the_answer() {
    let d = tmp();
    let kubelet = d.path().join("kubelet.sock");
    let (reqs, _stop) = kubelet::start(&kubelet, None).await;
    let r = dpctl(&[
        "register",
        "--plugin-dir",
        s(d.path()),
        "--resource",
        "vendor.example/foo",
        "--endpoint",
        "foo.sock",
        "--preferred-allocation",
    ])
    .await;
    r.expect_code(0);
    assert!(r.stdout.contains("accepted vendor.example/foo (endpoint foo.sock)"), "{}", r.stdout);
    {
        let reqs = reqs.lock().unwrap();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].version, "v1beta1");
        assert_eq!(reqs[0].endpoint, "foo.sock");
        assert_eq!(reqs[0].resource_name, "vendor.example/foo");
        let o = reqs[0].options.unwrap();
        assert!(o.get_preferred_allocation_available && !o.pre_start_required);
    }

    let rejecting = d.path().join("rejecting.sock");
    let msg = "requested API version \"v9\" is not supported by kubelet. Supported version is \"v1beta1\"";
    let (_r2, _stop2) = kubelet::start(&rejecting, Some(msg.into())).await;
    let mut c = dpctl_cmd(&["register", "--resource", "gpu", "--endpoint", "x.sock", "--version", "v9"]);
    c.env("DPCTL_KUBELET_SOCKET", &rejecting);
    let r = run_cmd(c).await;
    r.expect_code(1);
    assert!(r.stderr.contains(msg), "verbatim: {}", r.stderr);
    assert!(r.stderr.contains("warning: resource name \"gpu\" will be rejected"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podresources_list_allocatable_get() {
    let d = tmp();
    let sock = d.path().join("pr.sock");
    let _stop = podresources::start(&sock, podresources::sample()).await;
    let r = dpctl(&["podresources", "list", "--socket", s(&sock)]).await;
    r.expect_code(0);
    let rows: Vec<Vec<&str>> = r.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], vec!["POD", "NAMESPACE", "CONTAINER", "RESOURCE", "DEVICES", "NUMA"]);
    assert!(rows.contains(&vec!["trainer", "ml", "main", "vendor.example/foo", "foo-0,foo-1", "0"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["trainer", "ml", "main", "cpu", "2,3", "-"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["trainer", "ml", "sidecar", "-", "-", "-"]), "{}", r.stdout);

    let mut c = dpctl_cmd(&["podresources", "allocatable", "-o", "json"]);
    c.env("DPCTL_POD_RESOURCES_SOCKET", &sock);
    let r = run_cmd(c).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["devices"].as_array().unwrap().len(), 3);
    assert_eq!(v["devices"][2]["deviceIds"][0], "foo-2");
    assert_eq!(v["cpuIds"][3], "3");

    let r = dpctl(&["podresources", "allocatable", "--socket", s(&sock)]).await;
    r.expect_code(0);
    assert!(
        r.stdout.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["vendor.example/foo", "foo-2", "1"]),
        "{}",
        r.stdout
    );

    let r = dpctl(&["podresources", "get", "trainer", "-n", "ml", "--socket", s(&sock), "-o", "yaml"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("name: trainer") && r.stdout.contains("- foo-1"), "{}", r.stdout);
    let r = dpctl(&["podresources", "get", "nope", "--socket", s(&sock)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("NotFound: pod not found: default/nope"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_passes_a_good_plugin() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: true },
        ..Default::default()
    };
    let p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&["probe", s(&sock), "--allocate"]).await;
    r.expect_code(0);
    for check in
        ["connect", "options", "list-and-watch", "snapshot-size", "devices", "preferred", "allocate", "pre-start"]
    {
        assert!(
            r.stdout.lines().any(|l| l.starts_with("PASS") && l.split_whitespace().nth(1) == Some(check)),
            "{check} did not pass:\n{}",
            r.stdout
        );
    }
    assert!(!r.stdout.contains("FAIL") && !r.stdout.contains("WARN"), "{}", r.stdout);
    assert!(p.calls.lock().unwrap().contains(&"Allocate(foo-0)".to_string()));

    let r = dpctl(&["probe", s(&sock), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"], "PASS");
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "list-and-watch" && c["latencyMs"].as_f64().is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_fails_bad_device_lists() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let devices = vec![dev("a", "Healthy", None), dev("a", "Healthy", None), dev("b", "healthy", None)];
    let _p = start_plugin(&sock, devices, Behaviour::default()).await;
    let r = dpctl(&["probe", s(&sock), "-o", "json"]).await;
    r.expect_code(1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"], "FAIL");
    let devices = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "devices").unwrap();
    assert_eq!(devices["status"], "FAIL");
    let detail = devices["detail"].as_str().unwrap();
    assert!(detail.contains("\"a\" appears more than once") && detail.contains("health \"healthy\""), "{detail}");
    assert!(r.stderr.contains("probe failed: devices"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_fails_an_unhealthy_only_and_an_error_plugin() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour { fail: Some((Code::Internal, "boom".into())), ..Default::default() };
    let _p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&["probe", s(&sock)]).await;
    r.expect_code(1);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("FAIL") && l.contains("options") && l.contains("Internal: boom")),
        "{}",
        r.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_sockets_fail_clearly() {
    let d = tmp();
    let missing = d.path().join("missing.sock");
    let r = dpctl(&["options", s(&missing)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("no such socket"), "{}", r.stderr);

    let file = d.path().join("file.sock");
    std::fs::write(&file, "x").unwrap();
    let r = dpctl(&["watch", s(&file)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("is a regular file, not a socket"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");

    let stale = d.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let r = dpctl(&["probe", s(&stale)]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("FAIL") && r.stdout.contains("stale socket"), "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_peer_times_out() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let _p = start_plugin(&sock, four_devices(), Behaviour { hang: true, ..Default::default() }).await;
    let r = dpctl(&["options", s(&sock), "--timeout", "300ms"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("GetDevicePluginOptions timed out after 300.0ms"), "{}", r.stderr);
    let r = dpctl(&["watch", s(&sock), "--timeout", "300ms"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("no ListAndWatch snapshot within 300.0ms"), "{}", r.stderr);
    let r = dpctl(&["allocate", s(&sock), "foo-0", "--timeout", "300ms"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("Allocate timed out"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_flags_are_usage_errors() {
    for args in [
        vec!["allocate"],
        vec!["watch", "x", "--count", "zero"],
        vec!["options", "x", "-o", "xml"],
        vec!["options", "x", "--timeout", "5parsecs"],
        vec!["preferred", "x", "--size", "1"],
        vec!["allocate", "x", "a", "a"],
        vec!["frobnicate"],
    ] {
        let r = dpctl(&args).await;
        assert_eq!(r.code, 2, "{args:?} should be a usage error: {}", r.stderr);
        assert!(!r.stderr.is_empty());
    }
}

/// A plugin process that dies mid-call: the Go kubelet sees Unavailable, so must dpctl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_dying_mid_stream_is_unavailable() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let mut plugin = serve_cmd(
        d.path(),
        &["--no-register", "--socket-name", "p.sock", "--resource", "vendor.example/foo", "--count", "2"],
    )
    .spawn()
    .unwrap();
    wait_until(10, "p.sock answering", || std::os::unix::net::UnixStream::connect(&sock).is_ok()).await;
    let mut watch = dpctl_cmd(&["watch", s(&sock)]).spawn().unwrap();
    let mut tail = Tail::stdout(&mut watch);
    tail.wait_for("2 device(s)", 1).await;
    plugin.start_kill().unwrap();
    let _ = plugin.wait().await;
    let out = tokio::time::timeout(Duration::from_secs(10), watch.wait_with_output()).await.unwrap().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("ListAndWatch failed: Unavailable"), "{err}");
    assert!(!err.contains("Unknown"), "{err}");
}

/// A plugin that does not advertise GetPreferredAllocation: the kubelet never
/// calls it, so dpctl says so up front and an empty or missing answer is a WARN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_not_advertised_is_a_warning() {
    let d = tmp();
    // dpctl serve without --preferred-allocation, as squat/generic-device-plugin
    let sock = d.path().join("p.sock");
    let mut sv = serve_cmd(
        d.path(),
        &["--no-register", "--socket-name", "p.sock", "--resource", "vendor.example/foo", "--count", "2"],
    )
    .spawn()
    .unwrap();
    let tail = Tail::stdout(&mut sv);
    wait_until(10, "p.sock answering", || std::os::unix::net::UnixStream::connect(&sock).is_ok()).await;
    let r = dpctl(&["preferred", s(&sock), "--available", "foo-0,foo-1", "--size", "1"]).await;
    r.expect_code(0);
    let first = r.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("WARN") && first.contains("does not advertise GetPreferredAllocation"), "{}", r.stdout);
    assert!(r.stdout.contains("the kubelet would never call it"), "{}", r.stdout);
    assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);
    let r = dpctl(&["preferred", s(&sock), "--available", "foo-0,foo-1", "--size", "1", "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v.get("advertised").is_none(), "false is omitted: {v}");
    assert!(v["warnings"][0].as_str().unwrap().contains("does not advertise"), "{v}");
    stop_tailed(sv, tail).await;

    // the in-test plugin answers with no container_responses at all
    let empty = d.path().join("e.sock");
    let _e = start_plugin(&empty, four_devices(), Behaviour { preferred: None, ..Default::default() }).await;
    let r = dpctl(&["preferred", s(&empty), "--available", "foo-0,foo-1", "--size", "1"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("WARN"), "{}", r.stdout);
}
