//! Publishing the simulated driver's devices as a ResourceSlice
//! (resource.k8s.io/v1) to an API server named by a kubeconfig, so `dpctl
//! dra serve` can stand in for a real driver. Plain `http://` servers only
//! (a local test API server, such as the DRA mock kubelet's); `https://`
//! and in-cluster configuration are refused with a clear error. JSON over
//! HTTP/1.1 on the hyper dependency dpctl already has; no task is spawned
//! (each request drives its connection to completion).

use crate::core::{Error, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The ResourceSlice API path.
pub const SLICES_PATH: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// Where and as whom to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiServer {
    /// `host:port` of the plain-HTTP server.
    pub authority: String,
    /// A path prefix of the server URL (usually empty).
    pub prefix: String,
    /// A bearer token, if the kubeconfig's user has one.
    pub token: Option<String>,
}

fn parse_kubeconfig_full(text: &str) -> std::result::Result<Kubeconfig, String> {
    let v: Value = serde_norway::from_str(text).map_err(|e| format!("not a kubeconfig (YAML): {e}"))?;
    let current = v.get("current-context").and_then(Value::as_str).unwrap_or("");
    let find = |list: &str, name: &str| -> Option<Value> {
        v.get(list)?.as_array()?.iter().find(|x| x.get("name").and_then(Value::as_str) == Some(name)).cloned()
    };
    let (cluster_name, user_name) = if current.is_empty() {
        // No current context: a single cluster (and user) is unambiguous.
        let one = |list: &str| {
            v.get(list)
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("name").and_then(Value::as_str).map(String::from))
        };
        (one("clusters").ok_or("no current-context and not exactly one cluster")?, one("users").unwrap_or_default())
    } else {
        let ctx = find("contexts", current).ok_or_else(|| format!("current-context {current:?} is not in contexts"))?;
        let c = ctx.get("context").cloned().unwrap_or(Value::Null);
        (
            c.get("cluster").and_then(Value::as_str).unwrap_or("").to_string(),
            c.get("user").and_then(Value::as_str).unwrap_or("").to_string(),
        )
    };
    let cluster =
        find("clusters", &cluster_name).ok_or_else(|| format!("cluster {cluster_name:?} is not in clusters"))?;
    let server = cluster.get("cluster").and_then(|c| c.get("server")).and_then(Value::as_str).unwrap_or("");
    let rest = match server.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => {
            return Err(format!(
                "server {server} is https: dpctl dra serve publishes ResourceSlices to plain-http API servers only (a local test API server)"
            ))
        }
        _ => return Err(format!("server {server:?} is not an http:// URL")),
    };
    let (authority, prefix) = match rest.split_once('/') {
        Some((a, p)) => (a.to_string(), format!("/{}", p.trim_end_matches('/'))),
        None => (rest.to_string(), String::new()),
    };
    if authority.is_empty() {
        return Err(format!("server {server:?} names no host"));
    }
    let prefix = if prefix == "/" { String::new() } else { prefix };
    let user = find("users", &user_name);
    let token =
        user.as_ref().and_then(|u| u.get("user")?.get("token")?.as_str().map(String::from)).filter(|t| !t.is_empty());
    let token_file = user
        .as_ref()
        .and_then(|u| u.get("user")?.get("tokenFile")?.as_str().map(String::from))
        .filter(|t| !t.is_empty());
    Ok(Kubeconfig { api: ApiServer { authority, prefix, token }, token_file })
}

/// A kubeconfig as read: the server and token, and the user's `tokenFile`
/// (read by [`load_kubeconfig`], relative to the kubeconfig's directory).
#[derive(Debug, Clone, PartialEq)]
pub struct Kubeconfig {
    /// The server and the inline token.
    pub api: ApiServer,
    /// `users[].user.tokenFile`, as written.
    pub token_file: Option<String>,
}

/// Read the API server out of a kubeconfig (its current context); a
/// `tokenFile` is not read here (see [`load_kubeconfig`]).
pub fn parse_kubeconfig(text: &str) -> std::result::Result<ApiServer, String> {
    parse_kubeconfig_full(text).map(|k| k.api)
}

/// Read and parse a kubeconfig file. As client-go: a user's `tokenFile`
/// (relative paths from the kubeconfig's directory) wins over its `token`,
/// its content trimmed of surrounding whitespace.
pub fn load_kubeconfig(path: &Path) -> Result<ApiServer> {
    let text = crate::core::limits::read_file(path, 4 << 20, "kubeconfig")
        .map_err(|e| Error::usage(format!("--kubeconfig {}: {e}", path.display())))?;
    let k = parse_kubeconfig_full(&text).map_err(|e| Error::usage(format!("--kubeconfig {}: {e}", path.display())))?;
    let mut api = k.api;
    if let Some(f) = k.token_file {
        let tf = path.parent().unwrap_or(Path::new(".")).join(&f);
        let t = crate::core::limits::read_file(&tf, 64 << 10, "token file")
            .map_err(|e| Error::usage(format!("--kubeconfig {}: tokenFile {}: {e}", path.display(), tf.display())))?;
        api.token = Some(t.trim().to_string()).filter(|t| !t.is_empty());
    }
    Ok(api)
}

/// The slice's object name: `<node>-<driver>-<pool>`, as a DNS subdomain.
pub fn slice_name(node: &str, driver: &str, pool: &str) -> String {
    let raw = format!("{node}-{driver}-{pool}").to_ascii_lowercase();
    let s: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect();
    let s = s.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    s.chars().take(253).collect()
}

/// The ResourceSlice for the driver's devices on `node`.
pub fn slice(name: &str, node: &str, driver: &str, pool: &str, devices: &[String]) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "dpctl"}},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices.iter().map(|d| json!({"name": d})).collect::<Vec<_>>(),
        }
    })
}

/// One HTTP/1.1 request with a JSON body; the status and the body.
pub async fn request(
    api: &ApiServer,
    method: &str,
    path: &str,
    body: Option<&Value>,
    t: Duration,
) -> Result<(u16, Value)> {
    use hyper::body::Body as _;
    let work = async {
        let stream = tokio::net::TcpStream::connect(&api.authority)
            .await
            .map_err(|e| Error::failed(format!("API server {}: cannot connect: {e}", api.authority)))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| Error::failed(format!("API server {}: {e}", api.authority)))?;
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", api.prefix))
            .header("host", &api.authority)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .header("user-agent", "dpctl");
        if let Some(t) = &api.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = b
            .body(body.map(|v| v.to_string()).unwrap_or_default())
            .map_err(|e| Error::failed(format!("API request: {e}")))?;
        let exchange = async move {
            let resp = sender.send_request(req).await.map_err(|e| Error::failed(format!("API server: {e}")))?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
                let frame = frame.map_err(|e| Error::failed(format!("API server: {e}")))?;
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() > 16 << 20 {
                        return Err(Error::failed("API server answer larger than 16 MiB"));
                    }
                }
            }
            drop(sender);
            Ok((status, serde_json::from_slice(&buf).unwrap_or(Value::Null)))
        };
        let (r, _) = tokio::join!(exchange, conn);
        r
    };
    tokio::time::timeout(t, work).await.map_err(|_| {
        Error::failed(format!(
            "API server {}: no answer to {method} {path} within {}",
            api.authority,
            crate::core::time::format_duration(t)
        ))
    })?
}

fn api_error(what: &str, status: u16, body: &Value) -> Error {
    let msg = body.get("message").and_then(Value::as_str).unwrap_or("");
    Error::failed(format!("{what}: the API server answered {status} {msg}"))
}

/// Create the slice, or replace the one already there.
pub async fn publish(api: &ApiServer, obj: &Value, t: Duration) -> Result<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let (st, body) = request(api, "POST", SLICES_PATH, Some(obj), t).await?;
    match st {
        200..=299 => Ok(()),
        409 => {
            let path = format!("{SLICES_PATH}/{name}");
            let (st, cur) = request(api, "GET", &path, None, t).await?;
            if !(200..=299).contains(&st) {
                return Err(api_error(&format!("get ResourceSlice {name}"), st, &cur));
            }
            let mut obj = obj.clone();
            obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
            let (st, body) = request(api, "PUT", &path, Some(&obj), t).await?;
            if (200..=299).contains(&st) {
                Ok(())
            } else {
                Err(api_error(&format!("replace ResourceSlice {name}"), st, &body))
            }
        }
        _ => Err(api_error(&format!("create ResourceSlice {name}"), st, &body)),
    }
}

/// Whether the slice is there (a kubelet wipes a node's slices when it starts).
pub async fn exists(api: &ApiServer, name: &str, t: Duration) -> Result<bool> {
    let (st, body) = request(api, "GET", &format!("{SLICES_PATH}/{name}"), None, t).await?;
    match st {
        200..=299 => Ok(true),
        404 => Ok(false),
        _ => Err(api_error(&format!("get ResourceSlice {name}"), st, &body)),
    }
}

/// Delete the slice (a missing one is fine).
pub async fn withdraw(api: &ApiServer, name: &str, t: Duration) -> Result<()> {
    let (st, body) = request(api, "DELETE", &format!("{SLICES_PATH}/{name}"), None, t).await?;
    match st {
        200..=299 | 404 => Ok(()),
        _ => Err(api_error(&format!("delete ResourceSlice {name}"), st, &body)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfigs_name_a_plain_http_server_and_a_token() {
        let k = "apiVersion: v1
clusters:
- name: test
  cluster: {server: 'http://127.0.0.1:8080/'}
users:
- name: admin
  user: {token: s3cret}
contexts:
- name: here
  context: {cluster: test, user: admin}
current-context: here
";
        assert_eq!(
            parse_kubeconfig(k).unwrap(),
            ApiServer { authority: "127.0.0.1:8080".into(), prefix: String::new(), token: Some("s3cret".into()) }
        );
        let one = "clusters: [{name: c, cluster: {server: 'http://h:1/api-proxy'}}]";
        let a = parse_kubeconfig(one).unwrap();
        assert_eq!((a.authority.as_str(), a.prefix.as_str(), a.token), ("h:1", "/api-proxy", None));
        assert!(parse_kubeconfig(&k.replace("http://", "https://")).unwrap_err().contains("plain-http"));
        assert!(parse_kubeconfig(&k.replace("current-context: here", "current-context: gone"))
            .unwrap_err()
            .contains("gone"));
        assert!(parse_kubeconfig("[").is_err());
    }

    #[test]
    fn a_token_file_wins_over_the_inline_token_as_client_go_reads_it() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kubeconfig");
        let text = "clusters: [{name: c, cluster: {server: 'http://h:1'}}]\nusers: [{name: u, user: {token: inline, tokenFile: tok}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(&kc, text).unwrap();
        std::fs::write(d.path().join("tok"), "from-file\n").unwrap();
        assert_eq!(load_kubeconfig(&kc).unwrap().token.as_deref(), Some("from-file"));
        assert_eq!(parse_kubeconfig(text).unwrap().token.as_deref(), Some("inline"));
        std::fs::remove_file(d.path().join("tok")).unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("tokenFile") && e.contains("tok"), "{e}");
    }

    #[test]
    fn the_slice_lists_every_device_in_one_pool_on_the_node() {
        assert_eq!(slice_name("Node_1", "gpu.example.com", "pool-0"), "node-1-gpu.example.com-pool-0");
        let s = slice("n-g-p", "node-1", "gpu.example.com", "pool-0", &["dev-0".into(), "dev-1".into()]);
        assert_eq!(s["spec"]["driver"], "gpu.example.com");
        assert_eq!(s["spec"]["nodeName"], "node-1");
        assert_eq!(s["spec"]["pool"]["resourceSliceCount"], 1);
        assert_eq!(s["spec"]["devices"][1]["name"], "dev-1");
    }
}
