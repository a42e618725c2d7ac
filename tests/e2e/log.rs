//! The event log is off the RPC path: a `dpctl serve` or `dpctl mock-kubelet`
//! whose stdout is a pipe nobody reads keeps answering, and a clean shutdown
//! writes every queued line.

use crate::support::*;
use dpctl::api::deviceplugin::{AllocateRequest, ContainerAllocateRequest};
use dpctl::kubelet::conn::PluginConn;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_stdout_never_stalls_allocate_and_shutdown_flushes_every_line() {
    let d = tmp();
    let (w, rx) = full_pipe();
    let mut cmd = dpctl_cmd(&[
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
    ]);
    cmd.stdout(std::process::Stdio::from(w));
    let child = cmd.spawn().unwrap();
    drop(cmd); // our copy of the pipe's write end: EOF comes when the child exits
    let sock = d.path().join("foo.sock");
    wait_until(10, "the plugin's socket", || sock.exists()).await;
    let conn = PluginConn::connect(&sock, T, 4 << 20).await.expect("dial");
    // Its first log line is stuck in a full pipe; every call is still answered.
    for i in 0..300 {
        let id = format!("foo-{}", i % 4);
        let req = AllocateRequest { container_requests: vec![ContainerAllocateRequest { devices_ids: vec![id] }] };
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
    let mut serve = dpctl_cmd(&[
        "serve",
        "--plugin-dir",
        s(d.path()),
        "--resource",
        "vendor.example/foo",
        "--count",
        "2",
        "--socket-name",
        "foo.sock",
    ])
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
