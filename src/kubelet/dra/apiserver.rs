//! A local API server inside the mock kubelet: a test stand-in that serves
//! exactly what a DRA driver's kubelet plugin and the mock kubelet need,
//! over HTTP/1.1 on loopback (plain, or HTTPS with its own CA with
//! `--api-server-tls`: [`listen`]), with a kubeconfig written for the
//! driver (`<root>/kubeconfig`, 0600, written atomically and never over a
//! file the mock kubelet did not write) carrying a random bearer token: a
//! request without it is `401 Unauthorized`, as kube-apiserver answers it.
//! It lives as long as the node (a kubelet restart does not restart it).
//! Supported:
//!
//! - `GET /version` (`version.Info` of the `--kubelet-version` profile's
//!   Kubernetes version, `v1.MINOR.0`), `GET /api/v1/nodes/NAME` (the node
//!   the mock kubelet is); a verb a served path does not serve is 405;
//! - on every ResourceSlice create and replace, kube-apiserver's validation
//!   (`validate`): 422 Invalid with its field paths; bodies over 3 MiB are
//!   413; the change history is bounded in count and bytes;
//! - `resource.k8s.io/v1` `resourceslices`: list (`fieldSelector` on
//!   `spec.driver` and `spec.nodeName`), get, create (POST, `generateName`
//!   honoured, 409 on a taken name), replace (PUT; a stale `resourceVersion`
//!   is 409), delete (a DeleteOptions body's preconditions honoured);
//!   resource versions are integers;
//! - `resourceclaims` in v1, v1beta2 and v1beta1 paths (GET): the claims the
//!   mock kubelet has allocated, with `status.allocation` and `reservedFor`;
//! - watches of `resourceslices` (`watch=true`) with watch-list semantics:
//!   `sendInitialEvents=true` sends every matching slice as ADDED, then a
//!   BOOKMARK annotated `k8s.io/initial-events-end: "true"` carrying the
//!   resource version, then each change; without it, a watch from
//!   `resourceVersion=N` first gets every change after N (the last 1000 are
//!   kept; an older N gets an ERROR event, 410 Expired, as a reflector expects).
//!
//! Every answer, errors (`Status`) included, is JSON or Kubernetes protobuf
//! by the request's `Accept` (client-go sends
//! `application/vnd.kubernetes.protobuf,application/json`; [`protobuf::negotiate`]),
//! and request bodies are read by their `Content-Type` (JSON or protobuf;
//! anything else is 415; an `Accept` naming nothing served gets JSON, as
//! kube-apiserver answers it). Protobuf objects are
//! `k8s\0` + `runtime.Unknown`; watches are JSON lines of WatchEvents or
//! length-prefixed protobuf WatchEvents (`;stream=watch`), as kube-apiserver
//! sends them. Claims in the v1beta1 and v1beta2 paths are encoded with v1's
//! messages: they agree on every field filled here (metadata, request
//! names, status). Fields outside the protobuf subset (proto/k8s) are
//! dropped from protobuf bodies.

use crate::kubelet::dra::protobuf::{self, Media};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod listen;
mod tls;
mod validate;
mod watch;

pub use listen::{kubeconfig, start, Served};

use watch::{pump, whole, ChannelBody};

/// The ResourceSlices path.
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
/// Largest request body read: kube-apiserver's `--max-request-body-bytes`
/// default for JSON and protobuf bodies (3 MiB); a larger one is 413.
const MAX_BODY: usize = 3 << 20;

/// The objects the API server holds (ResourceSlices), shared with the DRA manager.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<StoreInner>,
    /// The newest resource version: watches wake on it and read the history
    /// (so a watcher holds nothing the history does not).
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for Store {
    fn default() -> Self {
        Store { inner: Mutex::default(), changes: tokio::sync::watch::channel(0).0 }
    }
}

/// One change a watch can replay.
#[derive(Debug, Clone)]
struct Change {
    version: u64,
    /// ADDED | MODIFIED | DELETED.
    kind: &'static str,
    obj: Arc<Value>,
    /// Its size as JSON.
    bytes: usize,
}

#[derive(Debug, Default)]
struct StoreInner {
    version: u64,
    slices: BTreeMap<String, Value>,
    /// The stored slices' size as JSON.
    bytes: usize,
    generated: u64,
    /// The latest changes (at most [`HISTORY`], [`HISTORY_BYTES`]): what a watch from a resource version replays.
    history: std::collections::VecDeque<Change>,
    /// The changes' size as JSON.
    history_bytes: usize,
    /// The newest version no longer in `history`.
    forgotten: u64,
}

/// How many changes a watch can resume across.
const HISTORY: usize = 1000;
/// How many bytes (as JSON) of changes are kept for watches; older ones are
/// forgotten (a watch from before them is `410 Gone`, and lists again).
const HISTORY_BYTES: usize = 8 << 20;

/// The size of `v` as JSON, counted without writing it.
fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A watch's start: the resource version now, the matching objects, the
/// changes after the version asked for, and the wake-ups for later ones.
type WatchStart = (u64, Vec<Value>, Vec<Change>, tokio::sync::watch::Receiver<u64>);

impl StoreInner {
    fn put(&mut self, name: String, obj: Value) {
        self.bytes += json_size(&obj);
        if let Some(old) = self.slices.insert(name, obj) {
            self.bytes -= json_size(&old).min(self.bytes);
        }
    }

    fn take(&mut self, name: &str) -> Option<Value> {
        let old = self.slices.remove(name)?;
        self.bytes -= json_size(&old).min(self.bytes);
        Some(old)
    }

    /// The changes after `seen`; `Err(oldest kept)` when some are forgotten.
    fn since(&self, seen: u64) -> std::result::Result<Vec<Change>, u64> {
        if seen < self.forgotten {
            return Err(self.forgotten + 1);
        }
        Ok(self.history.iter().filter(|c| c.version > seen).cloned().collect())
    }
}

impl Store {
    /// Record a change at the current version (already counted) and tell the watches;
    /// a deleted object carries the version of its deletion, as kube-apiserver sends it.
    fn emit(&self, st: &mut StoreInner, kind: &'static str, mut obj: Value) {
        if kind == "DELETED" {
            obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
        }
        let bytes = json_size(&obj);
        st.history.push_back(Change { version: st.version, kind, obj: Arc::new(obj), bytes });
        st.history_bytes += bytes;
        while st.history.len() > HISTORY || (st.history.len() > 1 && st.history_bytes > HISTORY_BYTES) {
            if let Some(c) = st.history.pop_front() {
                st.forgotten = c.version;
                st.history_bytes -= c.bytes.min(st.history_bytes);
            }
        }
        self.changes.send_replace(st.version);
    }

    /// What the store holds, as JSON bytes: (the stored slices, the change history).
    pub fn held_bytes(&self) -> (usize, usize) {
        let st = self.lock();
        (st.bytes, st.history_bytes)
    }

    /// The changes after `seen` (see [`StoreInner::since`]).
    fn since(&self, seen: u64) -> std::result::Result<Vec<Change>, u64> {
        self.lock().since(seen)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every ResourceSlice, as stored.
    pub fn slices(&self) -> Vec<Value> {
        self.lock().slices.values().cloned().collect()
    }

    /// Delete `driver`'s slices on `node` (what the kubelet does when the
    /// driver's last plugin went away); the names deleted.
    pub fn wipe(&self, driver: &str, node: &str) -> Vec<String> {
        let mut st = self.lock();
        let names: Vec<String> = st
            .slices
            .iter()
            .filter(|(_, s)| s["spec"]["driver"] == driver && s["spec"]["nodeName"] == node)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &names {
            if let Some(s) = st.take(n) {
                st.version += 1;
                self.emit(&mut st, "DELETED", s);
            }
        }
        names
    }

    /// Delete every ResourceSlice of `node`, whatever its driver (what the
    /// kubelet does at start); the names deleted.
    pub fn wipe_node(&self, node: &str) -> Vec<String> {
        let mut st = self.lock();
        let names: Vec<String> =
            st.slices.iter().filter(|(_, s)| s["spec"]["nodeName"] == node).map(|(n, _)| n.clone()).collect();
        for n in &names {
            if let Some(s) = st.take(n) {
                st.version += 1;
                self.emit(&mut st, "DELETED", s);
            }
        }
        names
    }

    /// Start a watch, atomically: the matching slices now, the changes after
    /// `from` (a watch resuming at a resource version), and every later
    /// change. `Err(oldest)`: `from` is older than the changes kept.
    fn watch(&self, sel: &[(String, String)], from: Option<u64>) -> std::result::Result<WatchStart, u64> {
        let st = self.lock();
        let rx = self.changes.subscribe();
        let items = st.slices.values().filter(|s| sel.iter().all(|(k, v)| field(s, k) == *v)).cloned().collect();
        let replay = match from {
            Some(f) => st.since(f)?,
            None => vec![],
        };
        Ok((st.version, items, replay, rx))
    }
}

/// Whether an `Authorization` header carries `token` (compared in constant time).
fn authorized(header: &str, token: &str) -> bool {
    let Some(given) = header.strip_prefix("Bearer ") else { return false };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// kube-apiserver's answer to a verb a served path does not serve (its
/// go-restful service error, as `NewGenericServerResponse` words a 405).
fn method_not_allowed() -> (u16, Value) {
    let (c, mut v) =
        status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource".into());
    v["details"] = json!({});
    (c, v)
}

/// `GET /version` as kube-apiserver answers it (`version.Info`), for the
/// Kubernetes minor version of the `--kubelet-version` profile.
pub fn version_info(minor: u32) -> Value {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        a => a,
    };
    let mut v = json!({
        "major": "1",
        "minor": minor.to_string(),
        "gitVersion": format!("v1.{minor}.0"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": format!("linux/{arch}"),
    });
    // Compatibility versions (KEP-4330) are part of version.Info from 1.33.
    if minor >= 33 {
        v["emulationMajor"] = json!("1");
        v["emulationMinor"] = json!(minor.to_string());
        v["minCompatibilityMajor"] = json!("1");
        v["minCompatibilityMinor"] = json!((minor - 1).to_string());
    }
    v
}

/// kube-apiserver's answer to a request without valid credentials.
fn unauthorized() -> (u16, Value) {
    status(401, "Unauthorized", "Unauthorized".into())
}

fn status(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

/// The parameters of a query string, decoded as Go's `url.ParseQuery` does
/// (`+` is a space, `%XX` an escaped byte).
fn query_pairs(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s).decode_utf8_lossy().into_owned()
    };
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The first value of parameter `key`.
fn param(query: &str, key: &str) -> Option<String> {
    query_pairs(query).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A request path, decoded (as Go's `URL.Path`): object names may be escaped.
fn decoded_path(path: &str) -> String {
    percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned()
}

fn field_selector(query: &str) -> Vec<(String, String)> {
    query_pairs(query)
        .into_iter()
        .filter(|(k, _)| k == "fieldSelector")
        .flat_map(|(_, v)| {
            v.split(',')
                .filter_map(|t| t.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_watch(query: &str) -> bool {
    param(query, "watch").is_some_and(|v| v == "true" || v == "1")
}

/// A stored ResourceSlice names its kind and version, as kube-apiserver answers it.
fn set_kind(obj: &mut Value) {
    obj["apiVersion"] = json!("resource.k8s.io/v1");
    obj["kind"] = json!("ResourceSlice");
}

fn field(obj: &Value, path: &str) -> String {
    path.split('.').fold(obj, |v, k| &v[k]).as_str().unwrap_or_default().to_string()
}

/// Answer one request (pure over the store and the claims): status and body.
pub fn answer(
    store: &Store,
    claims: &[Value],
    node: &str,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> (u16, Value) {
    let path = decoded_path(path);
    let path = path.as_str();
    if is_watch(query) {
        return status(405, "MethodNotAllowed", format!("{path}: only resourceslices can be watched here"));
    }
    if let Some(name) = path.strip_prefix("/api/v1/nodes/") {
        return if method != "GET" {
            method_not_allowed()
        } else if name == node {
            (
                200,
                json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": node, "uid": super::objects::derived_uid(&format!("node\0{node}")), "resourceVersion": "1"}}),
            )
        } else {
            status(404, "NotFound", format!("nodes {name:?} not found"))
        };
    }
    for v in ["v1", "v1beta2", "v1beta1"] {
        let prefix = format!("/apis/resource.k8s.io/{v}/namespaces/");
        if let Some(rest) = path.strip_prefix(&prefix) {
            let parts: Vec<&str> = rest.split('/').collect();
            if let [ns, "resourceclaims", name] = parts.as_slice() {
                if method != "GET" {
                    return status(
                        405,
                        "MethodNotAllowed",
                        "resourceclaims are read-only here (the mock kubelet allocates them)".into(),
                    );
                }
                return match claims.iter().find(|c| c["metadata"]["namespace"] == *ns && c["metadata"]["name"] == *name)
                {
                    Some(c) => {
                        let mut c = c.clone();
                        c["apiVersion"] = json!(format!("resource.k8s.io/{v}"));
                        (200, c)
                    }
                    None => status(404, "NotFound", format!("resourceclaims.resource.k8s.io {name:?} not found")),
                };
            }
        }
    }
    let Some(rest) = path.strip_prefix(SLICES) else {
        return status(404, "NotFound", format!("{path}: not served by the dpctl mock API server"));
    };
    let mut st = store.lock();
    let name = rest.strip_prefix('/').unwrap_or("");
    let parse = |body: &[u8]| {
        serde_json::from_slice::<Value>(body).map_err(|e| status(400, "BadRequest", format!("body is not JSON: {e}")))
    };
    match (method, name) {
        ("GET", "") => {
            let sel = field_selector(query);
            let items: Vec<Value> =
                st.slices.values().filter(|s| sel.iter().all(|(k, v)| field(s, k) == *v)).cloned().collect();
            (
                200,
                json!({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
            )
        }
        ("GET", n) => match st.slices.get(n) {
            Some(s) => (200, s.clone()),
            None => status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found")),
        },
        ("POST", "") => {
            let mut obj = match parse(body) {
                Ok(o) => o,
                Err(e) => return e,
            };
            let mut n = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if n.is_empty() {
                let g = obj["metadata"]["generateName"].as_str().unwrap_or_default().to_string();
                if g.is_empty() {
                    return status(422, "Invalid", "metadata.name or metadata.generateName is required".into());
                }
                st.generated += 1;
                n = format!("{g}{:05x}", st.generated);
            }
            let causes = validate::resource_slice(&obj, &n);
            if !causes.is_empty() {
                return validate::invalid_status("resource.k8s.io", "ResourceSlice", &n, &causes);
            }
            if st.slices.contains_key(&n) {
                return status(409, "AlreadyExists", format!("resourceslices.resource.k8s.io {n:?} already exists"));
            }
            st.version += 1;
            set_kind(&mut obj);
            obj["metadata"]["name"] = json!(n);
            obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
            obj["metadata"]["uid"] = json!(super::objects::derived_uid(&format!("slice\0{n}\0{}", st.version)));
            st.put(n, obj.clone());
            store.emit(&mut st, "ADDED", obj.clone());
            (201, obj)
        }
        ("PUT", n) if !n.is_empty() => {
            let mut obj = match parse(body) {
                Ok(o) => o,
                Err(e) => return e,
            };
            let Some(cur) = st.slices.get(n) else {
                return status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found"));
            };
            let causes = validate::resource_slice(&obj, n);
            if !causes.is_empty() {
                return validate::invalid_status("resource.k8s.io", "ResourceSlice", n, &causes);
            }
            let want = obj["metadata"]["resourceVersion"].as_str().unwrap_or_default();
            if !want.is_empty() && want != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
                return status(409, "Conflict", format!("Operation cannot be fulfilled on resourceslices.resource.k8s.io {n:?}: the object has been modified; please apply your changes to the latest version and try again"));
            }
            let uid = cur["metadata"]["uid"].clone();
            st.version += 1;
            set_kind(&mut obj);
            obj["metadata"]["name"] = json!(n);
            obj["metadata"]["uid"] = uid;
            obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
            st.put(n.to_string(), obj.clone());
            store.emit(&mut st, "MODIFIED", obj.clone());
            (200, obj)
        }
        ("DELETE", n) if !n.is_empty() => {
            // The body, when any, is DeleteOptions (client-go always sends one); its preconditions count.
            let opts = if body.is_empty() { Value::Null } else { parse(body).unwrap_or(Value::Null) };
            let Some(cur) = st.slices.get(n) else {
                return status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found"));
            };
            for (field, have) in
                [("uid", &cur["metadata"]["uid"]), ("resourceVersion", &cur["metadata"]["resourceVersion"])]
            {
                let want = opts["preconditions"][field].as_str().unwrap_or_default();
                let have = have.as_str().unwrap_or_default();
                if !want.is_empty() && want != have {
                    let what = if field == "uid" { "UID" } else { "ResourceVersion" };
                    return status(409, "Conflict", format!("Operation cannot be fulfilled on resourceslices.resource.k8s.io {n:?}: Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}"));
                }
            }
            match st.take(n) {
                Some(s) => {
                    st.version += 1;
                    store.emit(&mut st, "DELETED", s.clone());
                    (200, s)
                }
                None => status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found")),
            }
        }
        _ => method_not_allowed(),
    }
}

/// Where the server reads the claims it serves: the current kubelet
/// generation's DRA manager, as resource.k8s.io objects (the engine supplies
/// it, so the server knows nothing of the kubelet's managers).
pub type Claims = Arc<dyn Fn() -> Vec<Value> + Send + Sync>;

/// One HTTP answer: a status and a whole body, in `media`.
fn reply(media: Media, code: u16, v: &Value) -> http::Response<ChannelBody> {
    let (media, code, body) = match media {
        Media::Json => (media, code, v.to_string().into_bytes()),
        Media::Protobuf => match protobuf::encode_object(v) {
            Ok(b) => (media, code, b),
            Err(e) => {
                let (c, st) = status(500, "InternalError", format!("cannot encode the answer as protobuf: {e}"));
                (Media::Json, c, st.to_string().into_bytes())
            }
        },
    };
    http::Response::builder()
        .status(code)
        .header("content-type", media.content_type(false))
        .body(ChannelBody::Whole(Some(hyper::body::Bytes::from(body))))
        .unwrap_or_else(|_| http::Response::new(whole(String::new())))
}

/// kube-apiserver's answer to a body over [`MAX_BODY`].
fn too_large() -> (u16, Value) {
    status(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {MAX_BODY}"))
}

/// Read a request body, never holding more than [`MAX_BODY`] bytes of it:
/// `Err` (413) as soon as it is longer (or says it is, by Content-Length).
async fn read_body(mut body: hyper::body::Incoming, length: Option<u64>) -> std::result::Result<Vec<u8>, (u16, Value)> {
    use hyper::body::Body as _;
    if length.is_some_and(|l| l > MAX_BODY as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(length.map_or(0, |l| l as usize));
    while let Some(f) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(f) = f else { break };
        if let Ok(d) = f.into_data() {
            if buf.len() + d.len() > MAX_BODY {
                return Err(too_large());
            }
            buf.extend_from_slice(&d);
        }
    }
    Ok(buf)
}

/// A ResourceSlice create or replace whose device count alone is over the
/// limit: its 422, found without building the object (a refused body costs
/// no more memory than its bytes).
fn precheck(method: &str, path: &str, content_type: &str, buf: &[u8]) -> Option<(u16, Value)> {
    if !matches!(method, "POST" | "PUT") || !path.starts_with(SLICES) {
        return None;
    }
    let shape = match protobuf::request_media(content_type)? {
        Media::Json => validate::json_shape(buf)?,
        Media::Protobuf => {
            let (name, devices, advanced) = protobuf::slice_shape(buf)?;
            validate::Shape { name, devices, advanced }
        }
    };
    shape.refusal()
}

/// The request body as JSON bytes, whatever its Content-Type; or the error answer.
fn json_body(content_type: &str, buf: Vec<u8>) -> std::result::Result<Vec<u8>, (u16, Value)> {
    match protobuf::request_media(content_type) {
        Some(Media::Json) => Ok(buf),
        Some(Media::Protobuf) if buf.is_empty() => Ok(buf),
        Some(Media::Protobuf) => protobuf::decode_object(&buf)
            .map(|v| v.to_string().into_bytes())
            .map_err(|e| status(400, "BadRequest", format!("the protobuf body cannot be decoded: {e}"))),
        None => Err(status(
            415,
            "UnsupportedMediaType",
            format!(
                "the body's content type {content_type:?} is not supported; send application/json or {}",
                protobuf::PROTOBUF
            ),
        )),
    }
}

/// What every request is served with.
struct Ctx {
    store: Arc<Store>,
    claims: Claims,
    node: String,
    /// The Kubernetes minor version `/version` answers.
    minor: u32,
    /// The bearer token every request must carry.
    token: String,
    tracker: TaskTracker,
    stop: CancellationToken,
}

/// Serve one request: authenticate it, negotiate the answer's encoding,
/// decode the body, answer or start a watch.
async fn respond(
    req: http::Request<hyper::body::Incoming>,
    ctx: Arc<Ctx>,
) -> std::result::Result<http::Response<ChannelBody>, std::convert::Infallible> {
    let Ctx { store, claims, node, minor, token, tracker, stop } = &*ctx;
    let (store, minor) = (store.clone(), *minor);
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let media = protobuf::negotiate(&header("accept"));
    if !authorized(&header("authorization"), token) {
        let (code, v) = unauthorized();
        return Ok(reply(media, code, &v));
    }
    if decoded_path(req.uri().path()) == "/version" {
        // version.Info has no protobuf form: JSON, as kube-apiserver sends it.
        let (code, v) =
            if req.method() == http::Method::GET { (200, version_info(minor)) } else { method_not_allowed() };
        return Ok(reply(if code == 200 { Media::Json } else { media }, code, &v));
    }
    let query = req.uri().query().unwrap_or("").to_string();
    if req.method() == http::Method::GET && decoded_path(req.uri().path()) == SLICES && is_watch(&query) {
        // A few frames in flight: a watcher that never reads holds little beyond the history.
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tracker.spawn(pump(store, query, media, tx, stop.clone()));
        let resp = http::Response::builder()
            .status(200)
            .header("content-type", media.content_type(true))
            .body(ChannelBody::Stream(rx))
            .unwrap_or_else(|_| http::Response::new(whole(String::new())));
        return Ok(resp);
    }
    let content_type = header("content-type");
    let length = header("content-length").parse::<u64>().ok();
    let (parts, body) = req.into_parts();
    let path = decoded_path(parts.uri.path());
    let read = read_body(body, length).await.and_then(|buf| {
        match precheck(parts.method.as_str(), &path, &content_type, &buf) {
            Some(refused) => Err(refused),
            None => json_body(&content_type, buf),
        }
    });
    let (code, v) = match read {
        Err(e) => e,
        Ok(buf) => {
            let claims = claims();
            answer(&store, &claims, node, parts.method.as_str(), parts.uri.path(), &query, &buf)
        }
    };
    Ok(reply(media, code, &v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(s: &Store, m: &str, p: &str, q: &str, b: Value) -> (u16, Value) {
        answer(s, &[], "node-1", m, p, q, b.to_string().as_bytes())
    }

    #[test]
    fn slices_are_created_listed_replaced_and_deleted_with_integer_versions() {
        let s = Store::default();
        let obj = json!({"metadata": {"generateName": "node-1-gpu-"}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p"}, "devices": [{"name": "d0"}]}});
        let (c, created) = call(&s, "POST", SLICES, "", obj.clone());
        assert_eq!(c, 201);
        let name = created["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("node-1-gpu-"));
        assert_eq!(created["metadata"]["resourceVersion"], "1");
        let mut named = obj.clone();
        named["metadata"] = json!({"name": name});
        assert_eq!(call(&s, "POST", SLICES, "", named.clone()).0, 409);
        let (c, l) = call(&s, "GET", SLICES, "fieldSelector=spec.driver%3Dgpu.x%2Cspec.nodeName%3Dnode-1", Value::Null);
        assert_eq!((c, l["items"].as_array().unwrap().len()), (200, 1));
        let (_, l) = call(&s, "GET", SLICES, "fieldSelector=spec.driver=other", Value::Null);
        assert!(l["items"].as_array().unwrap().is_empty());
        let mut stale = named.clone();
        stale["metadata"]["resourceVersion"] = json!("0");
        assert_eq!(call(&s, "PUT", &format!("{SLICES}/{name}"), "", stale).0, 409);
        named["metadata"]["resourceVersion"] = json!("1");
        let (c, put) = call(&s, "PUT", &format!("{SLICES}/{name}"), "", named);
        assert_eq!((c, put["metadata"]["resourceVersion"].as_str()), (200, Some("2")));
        assert_eq!(call(&s, "DELETE", &format!("{SLICES}/{name}"), "", Value::Null).0, 200);
        assert_eq!(call(&s, "GET", &format!("{SLICES}/{name}"), "", Value::Null).0, 404);
        assert_eq!(call(&s, "GET", "/api/v1/nodes/node-1", "watch=true", Value::Null).0, 405);
        assert_eq!(call(&s, "GET", "/api/v1/nodes/node-1", "", Value::Null).0, 200);
        assert_eq!(call(&s, "GET", "/api/v1/nodes/other", "", Value::Null).0, 404);
    }

    fn slice_with(name: &str, devices: usize) -> Value {
        let d: Vec<Value> = (0..devices).map(|i| json!({"name": format!("d{i}")})).collect();
        json!({"metadata": {"name": name}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": d}})
    }

    /// Issue items: a 129-device slice, a non-DNS name and 70 kB of labels were all 201.
    #[test]
    fn creates_and_replaces_are_validated_as_kube_apiserver_does() {
        let s = Store::default();
        let (c, e) = call(&s, "POST", SLICES, "", slice_with("big", 129));
        assert_eq!((c, e["reason"].as_str()), (422, Some("Invalid")));
        assert_eq!(
            e["message"],
            "ResourceSlice.resource.k8s.io \"big\" is invalid: spec.devices: Too many: 129: must have at most 128 items"
        );
        assert_eq!(e["details"]["causes"][0]["field"], "spec.devices");
        for bad in ["bad/slash", "sp ace", "x\0y", "r\u{200f}tl", "UPPER"] {
            let (c, e) = call(&s, "POST", SLICES, "", slice_with(bad, 1));
            assert_eq!(c, 422, "{bad:?}");
            assert_eq!(e["details"]["causes"][0]["field"], "metadata.name", "{bad:?}");
        }
        let (c, e) = call(&s, "POST", SLICES, "", json!({"metadata": {"name": "x".repeat(100_000)}, "spec": {}}));
        assert_eq!(c, 422);
        assert!(e["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .ends_with("must be no more than 253 characters"));
        let mut labelled = slice_with("l", 1);
        labelled["metadata"]["labels"] = json!({"example.com/big": "v".repeat(70_000)});
        let (c, e) = call(&s, "POST", SLICES, "", labelled);
        assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("metadata.labels")));
        assert_eq!(s.held_bytes(), (0, 0), "nothing refused is held");
        // A replace is judged as a create is.
        assert_eq!(call(&s, "POST", SLICES, "", slice_with("ok", 128)).0, 201);
        let held = s.held_bytes();
        assert!(held.0 > 0 && held.1 > 0);
        let (c, e) = call(&s, "PUT", &format!("{SLICES}/ok"), "", slice_with("ok", 129));
        assert_eq!((c, e["details"]["name"].as_str()), (422, Some("ok")));
        assert_eq!(s.held_bytes(), held);
    }

    #[test]
    fn a_refused_body_is_found_without_building_it_and_the_body_limit_is_3_mib() {
        // 100,000 devices in ~2 MB: refused by its shape, in JSON and protobuf.
        let big = slice_with("huge", 100_000);
        let body = big.to_string();
        assert!(body.len() > 1_500_000 && body.len() < MAX_BODY);
        let (c, e) = precheck("POST", SLICES, "application/json", body.as_bytes()).unwrap();
        assert_eq!(c, 422);
        assert_eq!(e["details"]["causes"][0]["message"], "Too many: 100000: must have at most 128 items");
        let mut pb = big.clone();
        pb["kind"] = json!("ResourceSlice");
        pb["apiVersion"] = json!("resource.k8s.io/v1");
        pb["spec"]["devices"][0]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        let pb = protobuf::encode_object(&pb).unwrap();
        let (c, e) = precheck("PUT", &format!("{SLICES}/huge"), protobuf::PROTOBUF, &pb).unwrap();
        assert_eq!(c, 422);
        assert_eq!(e["details"]["causes"][0]["message"], "Too many: 100000: must have at most 64 items");
        assert!(precheck("POST", SLICES, "application/json", slice_with("ok", 128).to_string().as_bytes()).is_none());
        assert!(precheck("GET", SLICES, "application/json", body.as_bytes()).is_none());
        assert_eq!(too_large().0, 413);
        assert_eq!(too_large().1["message"], "Request entity too large: limit is 3145728");
    }

    #[test]
    fn verbs_a_served_path_does_not_serve_are_405_and_version_is_version_info() {
        let s = Store::default();
        for (m, p) in [
            ("PUT", SLICES.to_string()),
            ("POST", format!("{SLICES}/x")),
            ("PATCH", format!("{SLICES}/x")),
            ("DELETE", "/api/v1/nodes/node-1".to_string()),
        ] {
            let (c, e) = call(&s, m, &p, "", Value::Null);
            assert_eq!((c, e["reason"].as_str()), (405, Some("MethodNotAllowed")), "{m} {p}");
            assert_eq!(e["message"], "the server does not allow this method on the requested resource");
        }
        let v = version_info(34);
        assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("34")));
        assert_eq!((v["gitVersion"].as_str(), v["emulationMinor"].as_str()), (Some("v1.34.0"), Some("34")));
        assert!(v["platform"].as_str().unwrap().starts_with("linux/"));
        assert!(version_info(32).get("emulationMajor").is_none(), "compatibility versions came with 1.33");
    }

    #[test]
    fn claims_are_served_in_each_version_with_their_allocation() {
        let s = Store::default();
        let claim = json!({"kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml", "uid": "u"}, "status": {"allocation": {"devices": {"results": [{"driver": "d"}]}}}});
        for v in ["v1", "v1beta2", "v1beta1"] {
            let (c, got) = answer(
                &s,
                std::slice::from_ref(&claim),
                "n",
                "GET",
                &format!("/apis/resource.k8s.io/{v}/namespaces/ml/resourceclaims/gpu"),
                "",
                b"",
            );
            assert_eq!(c, 200);
            assert_eq!(got["apiVersion"], format!("resource.k8s.io/{v}"));
            assert_eq!(got["status"]["allocation"]["devices"]["results"][0]["driver"], "d");
        }
        let (c, e) =
            answer(&s, &[claim], "n", "GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/nope", "", b"");
        assert_eq!(c, 404);
        assert!(e["message"].as_str().unwrap().contains("\"nope\" not found"));
    }

    #[test]
    fn protobuf_bodies_are_read_and_answers_written_by_negotiation() {
        let s = Store::default();
        let obj = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"generateName": "n-"}, "spec": {"driver": "d", "nodeName": "n"}});
        let pb = protobuf::encode_object(&obj).unwrap();
        let body = json_body("application/vnd.kubernetes.protobuf", pb).unwrap();
        let (c, created) = answer(&s, &[], "n", "POST", SLICES, "", &body);
        assert_eq!((c, created["spec"]["driver"].as_str()), (201, Some("d")));
        assert_eq!(created["kind"], "ResourceSlice", "stored slices name their kind (protobuf needs it)");
        let e = json_body("application/yaml", b"a: b".to_vec()).unwrap_err();
        assert_eq!(e.0, 415);
        assert!(e.1["message"]
            .as_str()
            .unwrap()
            .contains("send application/json or application/vnd.kubernetes.protobuf"));
        let e = json_body("application/vnd.kubernetes.protobuf", b"{}".to_vec()).unwrap_err();
        assert_eq!(e.0, 400);
        assert!(e.1["message"].as_str().unwrap().contains("magic"));
        // An error answer in protobuf is an enveloped Status.
        let (c, v) = answer(&s, &[], "n", "GET", &format!("{SLICES}/nope"), "", b"");
        let r = reply(Media::Protobuf, c, &v);
        assert_eq!(r.status(), 404);
        assert_eq!(r.headers()["content-type"], "application/vnd.kubernetes.protobuf");
        let ChannelBody::Whole(Some(b)) = r.into_body() else { panic!("a whole body") };
        let st = protobuf::decode_object(&b).unwrap();
        assert_eq!(
            (st["kind"].as_str(), st["code"].as_i64(), st["reason"].as_str()),
            (Some("Status"), Some(404), Some("NotFound"))
        );
    }

    #[test]
    fn a_delete_reads_its_delete_options_and_honours_their_preconditions() {
        let s = Store::default();
        let obj = json!({"metadata": {"name": "s"}, "spec": {"driver": "d", "nodeName": "n"}});
        let (_, created) = call(&s, "POST", SLICES, "", obj);
        let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
        let opts = |uid: &str| {
            let o = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}});
            json_body("application/vnd.kubernetes.protobuf", protobuf::encode_object(&o).unwrap()).unwrap()
        };
        let (c, e) = answer(&s, &[], "n", "DELETE", &format!("{SLICES}/s"), "", &opts("other"));
        assert_eq!(c, 409);
        assert!(e["message"].as_str().unwrap().contains("Precondition failed: UID in precondition: other"), "{e}");
        let (c, gone) = answer(&s, &[], "n", "DELETE", &format!("{SLICES}/s"), "", &opts(&uid));
        assert_eq!((c, gone["metadata"]["name"].as_str()), (200, Some("s")));
    }

    #[test]
    fn paths_and_query_strings_are_percent_decoded() {
        let s = Store::default();
        let obj = json!({"metadata": {"name": "gpu.example.com-node-1"}, "spec": {"driver": "gpu.example.com", "nodeName": "node 1"}});
        assert_eq!(call(&s, "POST", SLICES, "", obj).0, 201);
        // An escaped object name finds the object.
        let (c, got) = call(&s, "GET", &format!("{SLICES}/gpu%2Eexample%2ecom-node-1"), "", Value::Null);
        assert_eq!((c, got["metadata"]["name"].as_str()), (200, Some("gpu.example.com-node-1")));
        // A selector escaped whole, with a space as + and as %20.
        for q in [
            "fieldSelector=spec%2Edriver%3Dgpu%2Eexample%2Ecom%2Cspec.nodeName%3Dnode+1",
            "fieldSelector=spec.driver%3dgpu.example.com%2cspec.nodeName%3Dnode%201",
        ] {
            let (c, l) = call(&s, "GET", SLICES, q, Value::Null);
            assert_eq!((c, l["items"].as_array().map(Vec::len)), (200, Some(1)), "{q}");
        }
        let (_, l) = call(&s, "GET", SLICES, "fieldSelector=spec.nodeName%3Dnode%202", Value::Null);
        assert_eq!(l["items"].as_array().map(Vec::len), Some(0));
        assert!(is_watch("resourceVersion=0&watch=true") && is_watch("watch=1") && !is_watch("watch=false"));
        assert_eq!(
            query_pairs("a=b%26c&d&e=f+g"),
            [("a".into(), "b&c".into()), ("d".into(), String::new()), ("e".into(), "f g".into())]
        );
    }
}
