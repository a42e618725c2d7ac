//! `dpctl bench` works against any plugin and reports what it measured.
//! (Functional checks only: speed targets live in BENCHMARKS.md.)

use crate::support::*;
use dpctl::api::deviceplugin::DevicePluginOptions;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_generator_counts_calls_latencies_and_errors() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: false, get_preferred_allocation_available: true },
        ..Default::default()
    };
    let p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&[
        "bench",
        "allocate",
        s(&sock),
        "--requests",
        "200",
        "--concurrency",
        "4",
        "--devices-per-request",
        "2",
        "-o",
        "json",
    ])
    .await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (v["call"].as_str(), v["requests"].as_u64(), v["errors"].as_u64()),
        (Some("Allocate"), Some(200), Some(0))
    );
    assert!(v["throughput"].as_f64().unwrap() > 0.0);
    let l = &v["latencyMs"];
    assert!(
        l["p50"].as_f64().unwrap() <= l["p99"].as_f64().unwrap()
            && l["p99"].as_f64().unwrap() <= l["max"].as_f64().unwrap(),
        "{l}"
    );
    {
        let calls = p.calls.lock().unwrap();
        assert_eq!(calls.iter().filter(|c| c.starts_with("Allocate(")).count(), 200);
        assert!(calls.contains(&"Allocate(foo-2,foo-3)".to_string()), "devices cycle through the healthy ones");
    }

    let r = dpctl(&["bench", "preferred", s(&sock), "--requests", "50"]).await;
    r.expect_code(0);
    assert!(
        r.stdout.lines().nth(1).unwrap().starts_with("GetPreferredAllocation   1             50         0"),
        "{}",
        r.stdout
    );
    let r = dpctl(&["bench", "list-and-watch", s(&sock), "--requests", "20", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["requests"], 20);

    // errors are counted by code, and a run with errors exits 1 saying how many
    let f = d.path().join("f.sock");
    let _q = start_plugin(
        &f,
        four_devices(),
        Behaviour { fail: Some((tonic::Code::Unavailable, "busy".into())), ..Default::default() },
    )
    .await;
    let r = dpctl(&["bench", "allocate", s(&f), "--requests", "30", "-o", "json"]).await;
    r.expect_code(1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["errorsByCode"]["Unavailable"], 30);
    assert!(v.get("latencyMs").is_none(), "all errors: no latency figures, not zeros: {v}");
    assert!(r.stderr.contains("30 of 30 calls failed (Unavailable: 30)"), "{}", r.stderr);
    let r = dpctl(&["bench", "allocate", s(&f), "--requests", "30"]).await;
    r.expect_code(1);
    let row = r.stdout.lines().nth(1).unwrap_or_default().to_string();
    assert!(row.ends_with("-   -   -   -") || row.split_whitespace().rev().take(4).all(|c| c == "-"), "{}", r.stdout);
    let r = dpctl(&["bench", "allocate", s(&sock), "--devices-per-request", "9"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("more than the plugin's 4 healthy"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_kubelet_benchmarks_report_every_measurement() {
    let r = dpctl(&["bench", "watch", "--changes", "20", "--sizes", "50,500", "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["changes"], 20);
    assert!(v["healthChangeToClientMs"]["p99"].as_f64().unwrap() > 0.0);
    assert_eq!(v["firstSnapshotMs"][1]["devices"], 500);
    assert!(v["firstSnapshotMs"][1]["bytes"].as_u64().unwrap() > v["firstSnapshotMs"][0]["bytes"].as_u64().unwrap());

    // against a running dpctl serve, through its live control
    let d = tmp();
    let (sv, _) = serve_unregistered(d.path(), "v.e/foo", "s.sock", &[]).await;
    let r = dpctl(&[
        "bench",
        "watch",
        "--socket",
        s(&d.path().join("s.sock")),
        "--changes",
        "10",
        "--sizes",
        "5",
        "-o",
        "json",
    ])
    .await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["via"].as_str().unwrap().starts_with("live control"), "{v}");
    stop_child(sv).await;

    let r = dpctl(&["bench", "kubelet", "--plugins", "3", "--devices", "4", "--pods", "6", "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!((v["plugins"].as_u64(), v["pods"].as_u64(), v["rejected"].as_u64()), (Some(3), Some(6), Some(0)));
    for k in ["allRegisteredAndAllocatableMs", "admissionMs", "restartAllBackMs", "peakRssMib"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}: {v}");
    }
}

/// The case: `bench preferred` against a plugin without GetPreferredAllocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_preferred_against_a_plugin_without_it_fails() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let mut sv =
        serve_cmd(d.path(), &["--no-register", "--socket-name", "p.sock", "--resource", "v.e/foo"]).spawn().unwrap();
    let tail = Tail::stdout(&mut sv);
    wait_until(10, "p.sock answering", || std::os::unix::net::UnixStream::connect(&sock).is_ok()).await;
    let r = dpctl(&["bench", "preferred", s(&sock), "--requests", "40", "-o", "json"]).await;
    r.expect_code(1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["errors"], 40, "{v}");
    assert!(v.get("latencyMs").is_none(), "{v}");
    assert!(r.stderr.contains("40 of 40 calls failed"), "{}", r.stderr);
    stop_tailed(sv, tail).await;
}

/// Ctrl-C (SIGINT) during a run prints the results so far.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_interrupted_prints_what_it_measured() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let child = dpctl_cmd(&["bench", "allocate", s(&sock), "--duration", "5m", "-o", "json"]).spawn().unwrap();
    p.wait_call("Allocate").await;
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill").arg("-INT").arg(pid.to_string()).status();
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("bench stops on SIGINT")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["requests"].as_u64().unwrap() >= 1, "{v}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
}

#[test]
fn progress_rate_is_whole_calls_per_second() {
    assert_eq!(dpctl::commands::bench::rate_text(27342.4481), "27342/s");
    assert_eq!(dpctl::commands::bench::rate_text(0.4), "0/s");
}

/// `bench kubelet` on Ctrl-C: the stages finished so far, `interrupted`, and
/// the kubelet engine it started is stopped and its node tree removed (issue 12, item 14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_kubelet_interrupted_reports_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let child = dpctl_cmd(&["bench", "kubelet", "--plugins", "2", "--devices", "200", "--pods", "300", "-o", "json"])
        .env("TMPDIR", tmp.path())
        .spawn()
        .unwrap();
    let pid = child.id().expect("pid");
    // Its kubelet runs in the process on a temp node tree: interrupt once it serves.
    let serving = || {
        std::fs::read_dir(tmp.path())
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| d.path().join("device-plugins").join("kubelet.sock").exists())
    };
    for _ in 0..500 {
        if serving() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(serving(), "bench kubelet started a kubelet on a node tree under $TMPDIR");
    let _ = std::process::Command::new("kill").arg("-INT").arg(pid.to_string()).status();
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("bench kubelet stops on SIGINT")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["plugins"], 2, "{v}");
    assert!(stderr.contains("interrupted: the figures cover the stages finished so far"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|d| d.path()).collect();
    assert!(left.is_empty(), "the node tree is removed: {left:?}");
}
