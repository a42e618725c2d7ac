//! `/metrics` (Prometheus text format) and `/healthz` on a TCP address:
//! the kubelet's device-plugin metrics plus capacity/allocatable gauges.

use crate::core::task::Tasks;
use crate::kubelet::devicemanager::core::BUCKETS;
use crate::kubelet::devicemanager::shell::Manager;
use std::fmt::Write as _;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

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

/// What one request gets (pure): status, content type and body.
/// `manager`: the running generation's manager, if one runs.
fn route(method: &http::Method, path: &str, manager: Option<&Manager>) -> (http::StatusCode, &'static str, String) {
    use http::StatusCode;
    let text = "text/plain; charset=utf-8";
    let known = matches!(path, "/metrics" | "/healthz");
    if !known {
        return (StatusCode::NOT_FOUND, text, "not found: try /metrics or /healthz\n".into());
    }
    if method != http::Method::GET && method != http::Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, text, format!("{method} is not allowed here: use GET or HEAD\n"));
    }
    match (path, manager) {
        (_, None) => (StatusCode::SERVICE_UNAVAILABLE, text, "restarting".into()),
        ("/metrics", Some(m)) => (StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", render(m)),
        (_, Some(_)) => (StatusCode::OK, text, "ok".into()),
    }
}

/// Answer one request with [`route`] (HEAD gets the headers only: hyper leaves the body out).
fn respond<B>(req: &http::Request<B>, manager: Option<&Manager>) -> http::Response<String> {
    let (status, ctype, body) = route(req.method(), req.uri().path(), manager);
    let mut resp = http::Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(ctype));
    if status == http::StatusCode::METHOD_NOT_ALLOWED {
        resp.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
    }
    resp
}

/// Serve HTTP/1.1 until `tasks` is cancelled, one connection per task of it (as
/// the local API server does); each answer closes its connection, as the
/// hand-written server before did. `current` holds the manager of the
/// running generation.
pub async fn serve(listener: TcpListener, current: watch::Receiver<Option<Arc<Manager>>>, tasks: Tasks) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = tasks.cancelled() => return,
        };
        let Ok((sock, _)) = conn else { continue };
        let current = current.clone();
        tasks.spawn(async move {
            let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let mgr = current.borrow().clone();
                std::future::ready(Ok::<_, std::convert::Infallible>(respond(&req, mgr.as_deref())))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                .await;
        });
    }
}

/// How long a client may take to send its request's head.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, StatusCode};

    #[test]
    fn requests_are_routed_by_path_then_method() {
        let r = |m: &Method, p: &str| {
            let (s, _, body) = route(m, p, None);
            (s, body)
        };
        assert_eq!(r(&Method::GET, "/nope").0, StatusCode::NOT_FOUND);
        assert_eq!(r(&Method::POST, "/nope").0, StatusCode::NOT_FOUND);
        let (s, body) = r(&Method::POST, "/metrics");
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
        assert!(body.contains("POST") && body.contains("GET or HEAD"), "{body}");
        assert_eq!(r(&Method::DELETE, "/healthz").0, StatusCode::METHOD_NOT_ALLOWED);
        // Between generations: no manager yet.
        assert_eq!(r(&Method::GET, "/metrics"), (StatusCode::SERVICE_UNAVAILABLE, "restarting".into()));
        assert_eq!(r(&Method::HEAD, "/healthz").0, StatusCode::SERVICE_UNAVAILABLE);
        let req = http::Request::builder().method(Method::PUT).uri("/metrics").body(()).unwrap();
        let resp = respond(&req, None);
        assert_eq!(resp.headers()[http::header::ALLOW], "GET, HEAD");
    }

    /// One request over a real socket; the whole answer (the server closes the connection).
    async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        c.write_all(request.as_bytes()).await.expect("write");
        let mut out = String::new();
        let read = c.read_to_string(&mut out);
        tokio::time::timeout(std::time::Duration::from_secs(5), read).await.expect("closed").expect("read");
        out
    }

    #[tokio::test]
    async fn the_server_answers_http_and_closes_each_connection() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let (_tx, rx) = watch::channel(None);
        let tasks = Tasks::new();
        drop(tasks.spawn_joined(serve(l, rx, tasks.clone())));
        let get = exchange(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(get.starts_with("HTTP/1.1 503") && get.ends_with("\r\n\r\nrestarting"), "{get:?}");
        let head = exchange(addr, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 503") && head.contains("content-length: 10\r\n"), "{head:?}");
        assert!(head.ends_with("\r\n\r\n"), "HEAD: no body: {head:?}");
        let post = exchange(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("allow: GET, HEAD"), "{post:?}");
        let nope = exchange(addr, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(nope.starts_with("HTTP/1.1 404") && nope.contains("try /metrics or /healthz"), "{nope:?}");
        tasks.stop().await;
        assert!(tasks.is_empty(), "the server and its connections are gone");
    }
}
