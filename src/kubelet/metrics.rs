//! `/metrics` (Prometheus text format) and `/healthz` on a TCP address:
//! the kubelet's device-plugin metrics plus capacity/allocatable gauges.

use crate::kubelet::devicemanager::BUCKETS;
use crate::kubelet::shell::Manager;
use std::fmt::Write as _;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Render the metrics text.
pub fn render(mgr: &Manager) -> String {
    let (regs, hists) = mgr.metrics();
    let mut s = String::new();
    s.push_str("# HELP kubelet_device_plugin_registration_total Cumulative number of device plugin registrations. Broken down by resource name.\n");
    s.push_str("# TYPE kubelet_device_plugin_registration_total counter\n");
    for (r, n) in &regs {
        let _ = writeln!(s, "kubelet_device_plugin_registration_total{{resource_name=\"{}\"}} {n}", label(r));
    }
    s.push_str("# HELP kubelet_device_plugin_alloc_duration_seconds Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.\n");
    s.push_str("# TYPE kubelet_device_plugin_alloc_duration_seconds histogram\n");
    for (r, h) in &hists {
        let l = label(r);
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                s,
                "kubelet_device_plugin_alloc_duration_seconds_bucket{{resource_name=\"{l}\",le=\"{b}\"}} {}",
                h.buckets[i]
            );
        }
        let _ = writeln!(
            s,
            "kubelet_device_plugin_alloc_duration_seconds_bucket{{resource_name=\"{l}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(s, "kubelet_device_plugin_alloc_duration_seconds_sum{{resource_name=\"{l}\"}} {}", h.sum);
        let _ = writeln!(s, "kubelet_device_plugin_alloc_duration_seconds_count{{resource_name=\"{l}\"}} {}", h.count);
    }
    let res = mgr.resources();
    for (name, help, f) in [
        ("dpctl_node_capacity", "Devices of a resource, healthy or not (node capacity).", 0),
        ("dpctl_node_allocatable", "Healthy devices of a resource (node allocatable).", 1),
        ("dpctl_node_allocated", "Devices of a resource allocated to pods.", 2),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
        for r in &res {
            let v = [r.capacity, r.allocatable, r.allocated][f];
            let _ = writeln!(s, "{name}{{resource_name=\"{}\"}} {v}", label(&r.resource));
        }
    }
    let name = "dpctl_node_resource_state";
    let _ = writeln!(
        s,
        "# HELP {name} A resource's state (running, stopped, waiting, removed: listed at 0/0 as the kubelet keeps it).\n# TYPE {name} gauge"
    );
    for r in &res {
        let _ = writeln!(s, "{name}{{resource_name=\"{}\",state=\"{}\"}} 1", label(&r.resource), label(&r.state));
    }
    s
}

/// Serve until `stop`. `current` holds the manager of the running generation.
pub async fn serve(
    listener: TcpListener,
    current: watch::Receiver<Option<Arc<Manager>>>,
    stop: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.cancelled() => return,
        };
        let Ok((mut sock, _)) = conn else { continue };
        let current = current.clone();
        tracker.spawn(stop.clone().run_until_cancelled_owned(async move {
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            while n < buf.len() {
                match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf[n..])).await {
                    Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(k)) => n += k,
                }
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            let mgr = current.borrow().clone();
            let (status, ctype, body) = match (path, mgr) {
                ("/metrics", Some(m)) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(&m)),
                ("/healthz", Some(_)) => ("200 OK", "text/plain", "ok".to_string()),
                ("/healthz" | "/metrics", None) => ("503 Service Unavailable", "text/plain", "restarting".to_string()),
                _ => ("404 Not Found", "text/plain", "not found: try /metrics or /healthz\n".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.shutdown().await;
        }));
    }
}
