//! The event log is off the RPC path: a `dpctl serve` or `dpctl mock-kubelet`
//! whose stdout is a pipe nobody reads keeps answering, and a clean shutdown
//! writes every queued line.

use crate::support::*;
use dpctl::api::deviceplugin::{AllocateRequest, ContainerAllocateRequest};
use dpctl::client::conn::PluginConn;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::io::AsyncReadExt;

const T: Duration = Duration::from_secs(10);

/// A pipe whose buffer is already full: the first write to the returned
/// end blocks until the test reads. Returns the write end (for a child's
/// stdout) and the read end.
fn full_pipe() -> (OwnedFd, tokio::net::unix::pipe::Receiver) {
    let (tx, rx) = tokio::net::unix::pipe::pipe().expect("pipe");
    let chunk = [b'#'; 4096];
    loop {
        match tx.try_write(&chunk) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling the pipe: {e}"),
        }
    }
    (tx.into_blocking_fd().expect("blocking fd"), rx)
}

/// Read the pipe to its end (the child exited); the filler removed.
async fn drain(mut rx: tokio::net::unix::pipe::Receiver) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(T, rx.read_to_end(&mut out)).await.expect("the log ends when the child exits").unwrap();
    String::from_utf8_lossy(&out).trim_start_matches('#').to_string()
}

/// Start `dpctl ARGS` (a plugin role serving `sock`) with a full pipe as
/// stdout, make 300 Allocate calls for `id`, stop it, and check its log.
async fn blocked_stdout_plugin(args: &[&str], sock: &std::path::Path, id: &str) {
    let (w, rx) = full_pipe();
    let mut cmd = dpctl_cmd(args);
    cmd.stdout(std::process::Stdio::from(w));
    let child = cmd.spawn().unwrap();
    drop(cmd); // our copy of the pipe's write end: EOF comes when the child exits
    wait_until(10, "the plugin's socket", || sock.exists()).await;
    let conn = PluginConn::connect(sock, T, 4 << 20).await.expect("dial");
    // Its first log line is stuck in a full pipe; every call is still answered.
    for i in 0..300 {
        let ids = vec![id.to_string()];
        let req = AllocateRequest { container_requests: vec![ContainerAllocateRequest { devices_ids: ids }] };
        let r = tokio::time::timeout(T, conn.client().allocate(req)).await;
        assert!(matches!(r, Ok(Ok(_))), "Allocate {i} with a blocked stdout: {r:?}");
    }
    let reading = tokio::spawn(drain(rx));
    sigterm(&child);
    let status = tokio::time::timeout(T, child.wait_with_output()).await.expect("exit after SIGTERM").unwrap();
    assert!(status.status.success(), "{status:?}");
    let log = reading.await.unwrap();
    let lines: Vec<serde_json::Value> =
        log.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"))).collect();
    let events: Vec<&str> = lines.iter().filter_map(|l| l["event"].as_str()).collect();
    assert_eq!(
        events.iter().filter(|e| **e == "Allocate").count(),
        300,
        "every call's line, once unblocked: {events:?}"
    );
    assert!(events.contains(&"serving"), "{events:?}");
    assert_eq!(events.last(), Some(&"stopped"), "the last line survives the shutdown: {events:?}");
    assert!(!events.contains(&"log-dropped"), "300 lines fit the queue: {events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_stdout_never_stalls_allocate_and_shutdown_flushes_every_line() {
    let d = tmp();
    let args = [
        "serve",
        "--plugin-dir",
        s(d.path()),
        "--resource",
        "vendor.example/foo",
        "--count",
        "4",
        "--no-register",
        "--socket-name",
        "foo.sock",
        "--log-format",
        "json",
    ];
    blocked_stdout_plugin(&args, &d.path().join("foo.sock"), "foo-1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_with_a_blocked_stdout_answers_and_flushes_every_line() {
    let d = tmp();
    let trace = d.path().join("t.jsonl");
    std::fs::write(
        &trace,
        concat!(
            r#"{"dpctlTrace":1,"resource":"vendor.example/foo","dpctlVersion":"0.1.0","created":"2026-11-26T01:02:03.456Z","source":"record"}"#,
            "\n",
            r#"{"kind":"options","t":0.001,"latencyMs":0.1,"response":{}}"#,
            "\n",
            r#"{"kind":"listAndWatch","t":0.002,"stream":1,"seq":1,"response":{"devices":[{"ID":"foo-0","health":"Healthy"}]}}"#,
            "\n",
            r#"{"kind":"allocate","t":0.003,"latencyMs":0.1,"request":{"containerRequests":[{"devicesIds":["foo-0"]}]},"response":{"containerResponses":[{"envs":{"FOO":"foo-0"}}]}}"#,
            "\n",
        ),
    )
    .unwrap();
    let args = [
        "replay",
        s(&trace),
        "--plugin-dir",
        s(d.path()),
        "--no-register",
        "--socket-name",
        "r.sock",
        "--log-format",
        "json",
    ];
    blocked_stdout_plugin(&args, &d.path().join("r.sock"), "foo-0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_kubelet_with_a_blocked_stdout_still_registers_plugins() {
    let d = tmp();
    let (w, rx) = full_pipe();
    let mut cmd = dpctl_cmd(&["mock-kubelet", "--plugin-dir", s(d.path()), "--no-pod-resources"]);
    cmd.stdout(std::process::Stdio::from(w));
    let kubelet = cmd.spawn().unwrap();
    drop(cmd);
    let ksock = d.path().join("kubelet.sock");
    wait_until(10, "the kubelet's socket", || ksock.exists()).await;
    // `dpctl serve` runs until stopped; registering through a kubelet whose
    // log is blocked must succeed, which `dpctl node` then shows.
    let mut serve =
        serve_cmd(d.path(), &["--resource", "vendor.example/foo", "--count", "2", "--socket-name", "foo.sock"])
            .spawn()
            .unwrap();
    let mut allocatable = false;
    let deadline = std::time::Instant::now() + T;
    while !allocatable && std::time::Instant::now() < deadline {
        assert!(serve.try_wait().unwrap().is_none(), "serve exited");
        let n = dpctl(&["node", "--plugin-dir", s(d.path()), "-o", "json"]).await;
        let v: serde_json::Value = serde_json::from_str(&n.stdout).unwrap_or_default();
        allocatable = v["resources"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|r| r["resource"] == "vendor.example/foo" && r["allocatable"] == 2));
        if !allocatable {
            tokio::time::sleep(Duration::from_millis(50)).await; // poll interval, not an ordering
        }
    }
    assert!(allocatable, "the plugin registered with a kubelet whose stdout is blocked");
    let reading = tokio::spawn(drain(rx));
    let _ = stop_child(serve).await;
    sigterm(&kubelet);
    let out = tokio::time::timeout(T, kubelet.wait_with_output()).await.expect("exit after SIGTERM").unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = reading.await.unwrap();
    assert!(log.contains("vendor.example/foo"), "the registration was logged once unblocked: {log}");
    assert!(log.trim_end().ends_with("stopped"), "the last line survives the shutdown: {log}");
}
