//! Watches of the ResourceSlices: the response body (a whole answer or a
//! stream), each event framed in the negotiated encoding (an event that
//! cannot be encoded ends the watch with an ERROR event), and the pump that
//! sends a watch's initial events and then every change, read from the
//! store's history when its newest version moves.

use super::selectors::{selected, Selection};
use super::{param, status, Store};
use crate::controlplane::protobuf::{self, Media};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A response body: one whole answer (with a Content-Length), or a watch's stream.
pub(super) enum ChannelBody {
    Whole(Option<hyper::body::Bytes>),
    Stream(tokio::sync::mpsc::Receiver<hyper::body::Bytes>),
}

impl hyper::body::Body for ChannelBody {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        match &mut *self {
            ChannelBody::Whole(b) => std::task::Poll::Ready(b.take().map(|b| Ok(hyper::body::Frame::data(b)))),
            ChannelBody::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(hyper::body::Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ChannelBody::Whole(None))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            ChannelBody::Whole(b) => hyper::body::SizeHint::with_exact(b.as_ref().map(|b| b.len() as u64).unwrap_or(0)),
            ChannelBody::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

pub(super) fn whole(text: String) -> ChannelBody {
    ChannelBody::Whole(Some(hyper::body::Bytes::from(text)))
}

/// One watch event in the negotiated encoding: a JSON line, or a protobuf
/// frame; `Err` when the object has no form in that encoding.
fn encode_event(
    media: Media,
    kind: &str,
    obj: &Value,
) -> std::result::Result<hyper::body::Bytes, crate::controlplane::protobuf::ProtobufError> {
    match media {
        Media::Json => {
            let mut t = json!({"type": kind, "object": obj}).to_string();
            t.push('\n');
            Ok(hyper::body::Bytes::from(t))
        }
        Media::Protobuf => {
            let mut obj = obj.clone();
            if obj["kind"].as_str().unwrap_or_default().is_empty() {
                obj["kind"] = json!("ResourceSlice");
                obj["apiVersion"] = json!("resource.k8s.io/v1");
            }
            protobuf::watch_frame(kind, &obj).map(hyper::body::Bytes::from)
        }
    }
}

/// What a watcher is sent for one event.
#[derive(Debug, PartialEq)]
enum Frame {
    /// The event; the watch goes on.
    Event(hyper::body::Bytes),
    /// The event cannot be encoded: an ERROR event (a `Status`, 500
    /// InternalError, naming the object and why) instead, and the watch ends
    /// — the client sees it, lists again and resumes; nothing vanishes.
    Last(hyper::body::Bytes),
}

/// Frame one event for a watcher (pure).
fn event(media: Media, kind: &str, obj: &Value) -> Frame {
    match encode_event(media, kind, obj) {
        Ok(b) => Frame::Event(b),
        Err(e) => {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let what = match media {
                Media::Json => "JSON",
                Media::Protobuf => "protobuf",
            };
            let (_, st) = status(
                500,
                "InternalError",
                format!("cannot encode the {kind} event of {name:?} as {what}: {e}; the watch ends, list again"),
            );
            // A Status always has its form in either encoding; should it
            // not, the JSON line still tells the client the watch is over.
            Frame::Last(
                encode_event(media, "ERROR", &st)
                    .unwrap_or_else(|_| hyper::body::Bytes::from(json!({"type": "ERROR", "object": st}).to_string())),
            )
        }
    }
}

/// Send one event; false when the watch is over (the client left, or the event ended it).
async fn send_event(tx: &tokio::sync::mpsc::Sender<hyper::body::Bytes>, media: Media, kind: &str, obj: &Value) -> bool {
    match event(media, kind, obj) {
        Frame::Event(b) => tx.send(b).await.is_ok(),
        Frame::Last(b) => {
            let _ = tx.send(b).await;
            false
        }
    }
}

/// What a watch follows: the ResourceSlices, or the objects of a custom
/// resource (in a namespace, when given), served in one API version.
#[derive(Debug, Clone)]
pub(super) enum What {
    /// ResourceSlices.
    Slices,
    /// Objects of a CRD, in API version `.1`, in namespace `.2` (None: all).
    Custom(super::custom::Crd, String, Option<String>),
    /// ResourceClaims, in API version `.0`, in namespace `.1` (None: all).
    Claims(String, Option<String>),
    /// Objects of a built-in kind, in namespace `.1` (None: all).
    Builtin(&'static super::builtin::Kind, Option<String>),
}

/// A watch's selection: what, and the label and field selectors.
#[derive(Debug, Clone)]
pub(super) struct Watched {
    pub what: What,
    pub sel: Selection,
}

impl Watched {
    /// Whether a stored object (or change) is one this watch sends.
    pub(super) fn matches(&self, obj: &Value) -> bool {
        let mine = match &self.what {
            // The history holds the slices and custom resources (of other groups).
            What::Slices => {
                obj["apiVersion"].as_str().is_none_or(|a| a.is_empty() || a.starts_with("resource.k8s.io/"))
                    && obj["kind"].as_str().is_none_or(|k| k.is_empty() || k == "ResourceSlice")
            }
            What::Builtin(k, ns) => super::builtin::is_of(k, ns.as_deref(), obj),
            What::Custom(crd, _, ns) => super::custom::is_of(crd, ns.as_deref(), obj),
            What::Claims(_, ns) => {
                obj["kind"] == "ResourceClaim"
                    && ns.as_deref().is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
            }
        };
        mine && selected(&self.sel, obj)
    }

    /// An object as this watch sends it.
    fn out(&self, obj: &Value) -> Value {
        match &self.what {
            What::Slices => obj.clone(),
            What::Custom(crd, v, _) => super::custom::in_version(crd, v, obj),
            What::Claims(v, _) => super::resourceclaims::served(obj, v),
            What::Builtin(..) => obj.clone(),
        }
    }

    fn bookmark_type(&self) -> (String, String) {
        match &self.what {
            What::Slices => ("resource.k8s.io/v1".into(), "ResourceSlice".into()),
            What::Custom(crd, v, _) => (format!("{}/{v}", crd.group), crd.kind.clone()),
            What::Claims(v, _) => (format!("resource.k8s.io/{v}"), "ResourceClaim".into()),
            What::Builtin(k, _) => (k.api_version(), k.kind.into()),
        }
    }
}

/// A watch's options as kube-apiserver validates them
/// (`validateWatchOptions`): `sendInitialEvents` needs
/// `resourceVersionMatch=NotOlderThan`, and that match needs
/// `sendInitialEvents`; the 422 answer when they are refused.
pub(super) fn refused_options(query: &[(String, String)]) -> Option<(u16, Value)> {
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let initial = get("sendInitialEvents");
    let matching = get("resourceVersionMatch").unwrap_or_default();
    let mut causes = Vec::new();
    let forbidden = |detail: &str| super::validate::Cause {
        reason: "FieldValueForbidden",
        field: "resourceVersionMatch".into(),
        message: format!("Forbidden: {detail}"),
    };
    if initial.is_some() && matching != "NotOlderThan" {
        causes.push(forbidden("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if !matching.is_empty() {
        if initial.is_none() {
            causes.push(forbidden("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
        }
        if matching != "NotOlderThan" {
            causes.push(super::validate::Cause {
                reason: "FieldValueNotSupported",
                field: "resourceVersionMatch".into(),
                message: format!(
                    "Unsupported value: {}: supported values: \"NotOlderThan\"",
                    super::validate::go_quote(matching)
                ),
            });
        }
    }
    if causes.is_empty() {
        return None;
    }
    Some(super::validate::invalid_status("meta.k8s.io", "ListOptions", "", &causes))
}

/// A list's options as kube-apiserver validates them (`ValidateListOptions`
/// for a list): `resourceVersionMatch` needs a `resourceVersion`, is
/// `Exact` or `NotOlderThan` (not `Exact` with "0"), and `sendInitialEvents`
/// is for watches only; the 422 answer when they are refused.
pub(super) fn refused_list_options(query: &[(String, String)]) -> Option<(u16, Value)> {
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let matching = get("resourceVersionMatch").unwrap_or_default();
    let version = get("resourceVersion").unwrap_or_default();
    let forbidden = |field: &str, detail: &str| super::validate::Cause {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    };
    let mut causes = Vec::new();
    if !matching.is_empty() {
        if version.is_empty() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if get("continue").is_some_and(|c| !c.is_empty()) {
            causes
                .push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            causes.push(super::validate::Cause {
                reason: "FieldValueNotSupported",
                field: "resourceVersionMatch".into(),
                message: format!(
                    "Unsupported value: {}: supported values: \"Exact\", \"NotOlderThan\", \"\"",
                    super::validate::go_quote(matching)
                ),
            });
        }
        if matching == "Exact" && version == "0" {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if get("sendInitialEvents").is_some() {
        causes.push(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    if causes.is_empty() {
        return None;
    }
    Some(super::validate::invalid_status("meta.k8s.io", "ListOptions", "", &causes))
}

/// How long a watch may last: its `timeoutSeconds` (kube-apiserver ends the
/// watch after that long, and client-go's reflectors send a random 5–10
/// minutes, then watch again from the last version they saw); None when
/// absent, zero or not a number — the watch lasts until the client goes.
/// (kube-apiserver then picks a random timeout of its own, which a watch
/// that ends only when its client leaves stands in for.)
fn watch_timeout(query: &str) -> Option<std::time::Duration> {
    param(query, "timeoutSeconds")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs)
}

/// Pump a watch into `tx` until the client goes, `stop`, or its
/// `timeoutSeconds` pass — then the stream ends cleanly (no ERROR event), as
/// kube-apiserver's does, and the client watches again.
pub(super) async fn pump(
    store: Arc<Store>,
    sel: Watched,
    query: String,
    media: Media,
    tx: tokio::sync::mpsc::Sender<hyper::body::Bytes>,
    stop: CancellationToken,
) {
    match watch_timeout(&query) {
        // Dropping the pump drops `tx`: the body ends after the frames already sent.
        Some(limit) => {
            let _ = tokio::time::timeout(limit, follow(store, sel, query, media, tx, stop)).await;
        }
        None => follow(store, sel, query, media, tx, stop).await,
    }
}

/// A watch's events: the initial ones, then every change.
async fn follow(
    store: Arc<Store>,
    sel: Watched,
    query: String,
    media: Media,
    tx: tokio::sync::mpsc::Sender<hyper::body::Bytes>,
    stop: CancellationToken,
) {
    let initial = param(&query, "sendInitialEvents").is_some_and(|v| v == "true");
    // Without initial events, a watch from resourceVersion N gets every change after N.
    let from = param(&query, "resourceVersion").and_then(|v| v.parse::<u64>().ok()).filter(|v| *v > 0 && !initial);
    // From no version or "0" ("Get State and Start at Most Recent / Any" in
    // the API concepts): a synthetic ADDED for every object there is first;
    // only a watch-list (sendInitialEvents=true) ends them with a bookmark.
    let synthetic = from.is_none() && !initial && param(&query, "sendInitialEvents").is_none_or(|v| v != "false");
    let expired =
        |from: u64, oldest: u64| status(410, "Expired", format!("too old resource version: {from} ({oldest})")).1;
    let (version, items, replay, mut rx) = match store.watch(&sel, from) {
        Ok(w) => w,
        Err(oldest) => {
            send_event(&tx, media, "ERROR", &expired(from.unwrap_or_default(), oldest)).await;
            return;
        }
    };
    for c in replay.iter().filter(|c| sel.matches(&c.obj)) {
        if !send_event(&tx, media, c.kind, &sel.out(&c.obj)).await {
            return;
        }
    }
    if initial || synthetic {
        for i in &items {
            if !send_event(&tx, media, "ADDED", &sel.out(i)).await {
                return;
            }
        }
    }
    if initial {
        let (api_version, kind) = sel.bookmark_type();
        let bookmark = json!({"kind": kind, "apiVersion": api_version, "metadata": {
            "resourceVersion": version.to_string(),
            "annotations": {"k8s.io/initial-events-end": "true"},
        }});
        if !send_event(&tx, media, "BOOKMARK", &bookmark).await {
            return;
        }
    }
    // Every change up to `version` is sent (replayed, or in the initial items).
    let mut seen = version;
    loop {
        tokio::select! {
            r = rx.changed() => if r.is_err() { return },
            _ = stop.cancelled() => return,
            _ = tx.closed() => return,
        }
        let batch = match store.since(seen) {
            Ok(b) => b,
            // Too slow a reader: the changes it missed are forgotten; it lists again.
            Err(oldest) => {
                send_event(&tx, media, "ERROR", &expired(seen, oldest)).await;
                return;
            }
        };
        for c in batch {
            seen = c.version;
            if sel.matches(&c.obj) && !send_event(&tx, media, c.kind, &sel.out(&c.obj)).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(query: &str) -> Watched {
        let sel = crate::controlplane::apiserver::selectors::of_query(
            "ResourceSlice",
            &crate::controlplane::apiserver::query_pairs(query),
        )
        .unwrap_or_default();
        Watched { what: What::Slices, sel }
    }
    use crate::controlplane::apiserver::{answer, Change, HISTORY, HISTORY_BYTES, SLICES};
    use tokio_util::task::TaskTracker;

    fn call(s: &Store, m: &str, p: &str, q: &str, b: Value) -> (u16, Value) {
        answer(s, "node-1", m, p, q, b.to_string().as_bytes())
    }

    fn slice_with(name: &str, devices: usize) -> Value {
        let d: Vec<Value> = (0..devices).map(|i| json!({"name": format!("d{i}")})).collect();
        json!({"metadata": {"name": name}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": d}})
    }

    /// The lines a JSON watch with `query` sends until it has `n` of them.
    async fn watch_lines(store: &Arc<Store>, query: &str, n: usize) -> Vec<Value> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(pump(store.clone(), sel(query), query.to_string(), Media::Json, tx, stop.clone()));
        let mut out = Vec::new();
        while out.len() < n {
            let b = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
            out.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
        }
        stop.cancel();
        out
    }

    #[tokio::test]
    async fn a_watch_from_a_resource_version_gets_every_change_after_it() {
        let s = Arc::new(Store::default());
        let slice = |n: &str, node: &str| json!({"metadata": {"name": n}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": node}});
        assert_eq!(call(&s, "POST", SLICES, "", slice("a", "n1")).0, 201); // rv 1
        assert_eq!(call(&s, "POST", SLICES, "", slice("b", "n2")).0, 201); // rv 2
        assert_eq!(call(&s, "POST", SLICES, "", slice("c", "n1")).0, 201); // rv 3
        assert_eq!(call(&s, "DELETE", &format!("{SLICES}/a"), "", Value::Null).0, 200); // rv 4
        let got = watch_lines(&s, "watch=true&resourceVersion=1&fieldSelector=spec.nodeName%3Dn1", 2).await;
        let words: Vec<String> = got
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}",
                    e["type"].as_str().unwrap(),
                    e["object"]["metadata"]["name"].as_str().unwrap(),
                    e["object"]["metadata"]["resourceVersion"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            words,
            ["ADDED c 3", "DELETED a 4"],
            "b is another node's; a deleted carries the deletion's version"
        );
        // Too old: the changes after it are no longer kept.
        for i in 0..HISTORY {
            call(&s, "POST", SLICES, "", slice(&format!("x{i}"), "n3"));
        }
        let got = watch_lines(&s, "watch=true&resourceVersion=2", 1).await;
        assert_eq!((got[0]["type"].as_str(), got[0]["object"]["code"].as_i64()), (Some("ERROR"), Some(410)));
        assert!(
            got[0]["object"]["message"].as_str().unwrap().starts_with("too old resource version: 2 ("),
            "{}",
            got[0]
        );
    }

    /// API concepts, "Semantics for watch": from no resourceVersion or "0",
    /// a watch begins with a synthetic ADDED for every object there is (no
    /// bookmark: that ends a watch-list's initial events only); from a
    /// version, with the changes after it.
    #[tokio::test]
    async fn a_watch_from_no_version_or_zero_begins_with_every_object_added() {
        let s = Arc::new(Store::default());
        let slice = |n: &str| json!({"metadata": {"name": n}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": "n1"}});
        assert_eq!(call(&s, "POST", SLICES, "", slice("a")).0, 201);
        assert_eq!(call(&s, "POST", SLICES, "", slice("b")).0, 201);
        for query in ["watch=true", "watch=true&resourceVersion=0", "watch=true&resourceVersion="] {
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let stop = CancellationToken::new();
            let tracker = TaskTracker::new();
            tracker.spawn(pump(s.clone(), sel(query), query.to_string(), Media::Json, tx, stop.clone()));
            let mut got: Vec<Value> = Vec::new();
            while got.len() < 2 {
                let b = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
                got.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
            }
            // A change after the synthetic events comes next, not a bookmark.
            assert_eq!(call(&s, "DELETE", &format!("{SLICES}/a"), "", Value::Null).0, 200);
            while got.len() < 3 {
                let b = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
                got.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
            }
            let words: Vec<String> = got
                .iter()
                .map(|e| {
                    format!("{} {}", e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap())
                })
                .collect();
            assert_eq!(words, ["ADDED a", "ADDED b", "DELETED a"], "{query}");
            stop.cancel();
            tracker.close();
            tracker.wait().await;
            assert_eq!(call(&s, "POST", SLICES, "", slice("a")).0, 201);
        }
    }

    #[test]
    fn a_watch_timeout_is_its_positive_timeout_seconds() {
        let secs = |q: &str| watch_timeout(q).map(|d| d.as_secs());
        assert_eq!(secs("watch=true&timeoutSeconds=417"), Some(417));
        assert_eq!(secs("watch=true"), None);
        assert_eq!(secs("watch=true&timeoutSeconds=0"), None);
        assert_eq!(secs("watch=true&timeoutSeconds=soon"), None);
    }

    /// kube-apiserver ends a watch after its `timeoutSeconds` (client-go's
    /// reflectors rely on it to renew their watches); the stream ends
    /// cleanly, after the events sent before, and not before the time.
    #[tokio::test]
    async fn a_watch_ends_cleanly_after_its_timeout_seconds() {
        let s = Arc::new(Store::default());
        assert_eq!(call(&s, "POST", SLICES, "", slice_with("a", 1)).0, 201);
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let query = "watch=true&resourceVersion=0&sendInitialEvents=true&timeoutSeconds=1";
        let started = std::time::Instant::now();
        tracker.spawn(pump(s.clone(), sel(query), query.into(), Media::Json, tx, stop.clone()));
        let mut lines = Vec::new();
        // Every frame until the stream ends; a watch that never ends fails here.
        while let Some(b) = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await.unwrap() {
            lines.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
        }
        let ended = started.elapsed();
        stop.cancel();
        let kinds: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
        assert_eq!(kinds, ["ADDED", "BOOKMARK"], "no ERROR event: {lines:?}");
        assert!(ended >= std::time::Duration::from_secs(1), "it ended after {ended:?}, before its timeout");
        tracker.close();
        tracker.wait().await;
    }

    /// Split one protobuf field off `b`: (field number, payload, rest); length-delimited fields only.
    fn pb_field(b: &[u8]) -> (u64, &[u8], &[u8]) {
        let varint = |b: &[u8]| {
            let (mut v, mut i) = (0u64, 0);
            while b[i] & 0x80 != 0 {
                v |= u64::from(b[i] & 0x7f) << (7 * i);
                i += 1;
            }
            (v | u64::from(b[i]) << (7 * i), i + 1)
        };
        let (tag, n) = varint(b);
        assert_eq!(tag & 7, 2, "a length-delimited field");
        let (len, m) = varint(&b[n..]);
        let start = n + m;
        let end = start + usize::try_from(len).unwrap();
        (tag >> 3, &b[start..end], &b[end..])
    }

    /// A protobuf watch frame as (type, object).
    fn watch_event(frame: &[u8]) -> (String, Value) {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        let ev = &frame[4..];
        assert_eq!(ev.len(), len, "one whole frame");
        let (n, ty, rest) = pb_field(ev);
        assert_eq!(n, 1);
        let (n, raw_ext, _) = pb_field(rest);
        assert_eq!(n, 2);
        let (n, raw, _) = pb_field(raw_ext);
        assert_eq!(n, 1);
        (String::from_utf8(ty.to_vec()).unwrap(), protobuf::decode_object(raw).unwrap())
    }

    /// Defect 4: an event that cannot be encoded for the watcher (a kind
    /// outside the protobuf subset) was sent as nothing and the watch went
    /// on; the watcher must see an ERROR event and the watch end.
    #[tokio::test]
    async fn an_event_that_cannot_be_encoded_ends_the_watch_with_an_error_event() {
        let store = Arc::new(Store::default());
        let slice = |n: &str| json!({"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1", "metadata": {"name": n}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": "n"}});
        // A DeviceClass has no message in the protobuf subset.
        let taint = json!({"kind": "DeviceClass", "apiVersion": "resource.k8s.io/v1", "metadata": {"name": "t"}});
        let class = crate::controlplane::apiserver::builtin::KINDS.iter().find(|k| k.kind == "DeviceClass").unwrap();
        {
            let mut st = store.lock();
            st.version = 4;
            let change = |version, obj| Change { version, kind: "ADDED", obj: Arc::new(obj), bytes: 0 };
            st.history.extend([change(2, slice("a")), change(3, taint), change(4, slice("b"))]);
        }
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        // A watch of the DeviceClasses, asked for in protobuf.
        let mut all = sel("");
        all.what = What::Builtin(class, None);
        tracker.spawn(pump(
            store.clone(),
            all,
            "watch=true&resourceVersion=1".into(),
            Media::Protobuf,
            tx,
            stop.clone(),
        ));
        let mut got = Vec::new();
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
                Ok(Some(frame)) => got.push(watch_event(&frame)),
                Ok(None) => break, // the watch ended
                Err(_) => {
                    stop.cancel();
                    panic!("the watch went on after the event it could not send: {got:?}");
                }
            }
        }
        stop.cancel();
        let kinds: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(kinds, ["ERROR"], "{got:?}");
        let st = &got[0].1;
        assert_eq!(
            (st["kind"].as_str(), st["code"].as_i64(), st["reason"].as_str()),
            (Some("Status"), Some(500), Some("InternalError"))
        );
        let msg = st["message"].as_str().unwrap();
        assert!(msg.contains("ADDED event of \"t\"") && msg.contains("DeviceClass"), "{msg}");
        tracker.close();
        tracker.wait().await;
    }

    #[test]
    fn frames_are_events_until_one_cannot_be_encoded() {
        let ok = json!({"kind": "ResourceSlice", "metadata": {"name": "a"}});
        assert!(matches!(event(Media::Protobuf, "ADDED", &ok), Frame::Event(b) if !b.is_empty()));
        let bad = json!({"kind": "Secret", "metadata": {"name": "s"}});
        assert!(matches!(event(Media::Json, "ADDED", &bad), Frame::Event(_)), "JSON has every kind");
        let Frame::Last(b) = event(Media::Protobuf, "ADDED", &bad) else { panic!("the watch must end") };
        let (ty, st) = watch_event(&b);
        assert_eq!((ty.as_str(), st["code"].as_i64()), ("ERROR", Some(500)));
    }

    #[tokio::test]
    async fn the_change_history_is_bounded_in_bytes_and_a_version_it_forgot_is_410() {
        let s = Arc::new(Store::default());
        // Slices of ~200 kB each (annotations under the 256 KiB limit).
        let fat = |n: usize| {
            let mut o = slice_with(&format!("s{n}"), 1);
            o["metadata"]["annotations"] = json!({"example.com/pad": "x".repeat(200_000)});
            o
        };
        for i in 0..60 {
            assert_eq!(call(&s, "POST", SLICES, "", fat(i)).0, 201);
        }
        let (stored, history) = s.held_bytes();
        assert!(stored > 60 * 200_000, "{stored}");
        assert!(history <= HISTORY_BYTES && history > HISTORY_BYTES / 2, "{history}");
        // Deleting keeps no more than the bound either.
        for i in 0..60 {
            assert_eq!(call(&s, "DELETE", &format!("{SLICES}/s{i}"), "", Value::Null).0, 200);
        }
        let (stored, history) = s.held_bytes();
        assert_eq!(stored, 0);
        assert!(history <= HISTORY_BYTES, "{history}");
        let got = watch_lines(&s, "watch=true&resourceVersion=1", 1).await;
        assert_eq!((got[0]["type"].as_str(), got[0]["object"]["code"].as_i64()), (Some("ERROR"), Some(410)));
        assert_eq!(got[0]["object"]["reason"], "Expired");
    }

    /// A watcher that stops reading holds no more than the history: once the
    /// changes it has not been sent are forgotten, it gets 410 Expired and ends.
    #[tokio::test]
    async fn a_watcher_that_falls_behind_the_history_gets_410_and_ends() {
        let s = Arc::new(Store::default());
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        assert_eq!(call(&s, "POST", SLICES, "", slice_with("zero", 1)).0, 201);
        tracker.spawn(pump(s.clone(), sel(""), "watch=true&resourceVersion=1".into(), Media::Json, tx, stop.clone()));
        assert_eq!(call(&s, "POST", SLICES, "", slice_with("first", 1)).0, 201);
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("\"first\""));
        // The watcher reads nothing more while the history turns over, by count and by bytes.
        for i in 0..HISTORY + 2 {
            assert_eq!(call(&s, "POST", SLICES, "", slice_with(&format!("x{i}"), 1)).0, 201);
        }
        let mut lines = Vec::new();
        while let Ok(Some(b)) = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
            lines.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
        }
        let last = lines.last().unwrap();
        assert_eq!((last["type"].as_str(), last["object"]["code"].as_i64()), (Some("ERROR"), Some(410)), "{last}");
        assert!(lines.len() < HISTORY, "it was not sent the whole history: {}", lines.len());
        stop.cancel();
        tracker.close();
        tracker.wait().await;
    }

    /// The lines of the watch `what` with `query` until it has `n` of them (the watch stopped then).
    async fn watch_of(store: &Arc<Store>, what: What, query: &str, n: usize) -> Vec<Value> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let w = Watched { what, sel: Default::default() };
        tracker.spawn(pump(store.clone(), w, query.to_string(), Media::Json, tx, stop.clone()));
        let mut out = Vec::new();
        while out.len() < n {
            let b = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
            out.extend(String::from_utf8_lossy(&b).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
        }
        stop.cancel();
        tracker.close();
        tracker.wait().await;
        out
    }

    /// client-go's informers watch ResourceClaims (a 405 failed every
    /// SharedInformerFactory before): the kubelet's changes (an allocation,
    /// a new UID under the same name, the claim's removal) and a driver's
    /// status write each arrive as kube-apiserver sends them, and a watch of
    /// ResourceSlices sees none of them.
    #[tokio::test]
    async fn a_watch_of_resourceclaims_sees_the_kubelets_changes_and_a_drivers_status() {
        let s = Arc::new(Store::default());
        let claim = |uid: &str, allocated: bool| {
            let status = match allocated {
                true => {
                    json!({"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.x", "pool": "p", "device": "d0"}]}}})
                }
                false => json!({}),
            };
            json!({"metadata": {"name": "gpu", "namespace": "ml", "uid": uid}, "spec": {"devices": {"requests": [{"name": "r"}]}}, "status": status})
        };
        // (the kubelet writes its claims as they change)
        s.put_claim(claim("u1", false)); // rv 1
        s.put_claim(claim("u1", true)); // rv 2
        let path = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu/status";
        // (UpdateStatus replaces the whole status: a driver sends the allocation it read)
        let body = json!({"metadata": {"name": "gpu", "namespace": "ml", "uid": "u1", "resourceVersion": "2"},
            "status": {"allocation": claim("u1", true)["status"]["allocation"], "devices": [{"driver": "gpu.x", "pool": "p", "device": "d0"}]}});
        let (code, v) = answer(&s, "node-1", "PUT", path, "", body.to_string().as_bytes());
        assert_eq!(code, 200, "{v}"); // rv 3
        s.put_claim(claim("u2", true)); // DELETED u1 at rv 4, ADDED u2 at rv 5
        s.delete_claim("ml/gpu"); // rv 6
        let got = watch_of(&s, What::Claims("v1".into(), Some("ml".into())), "watch=true&resourceVersion=1", 5).await;
        let words: Vec<String> = got
            .iter()
            .map(|e| {
                let o = &e["object"];
                format!(
                    "{} {} {} {} {}",
                    e["type"].as_str().unwrap(),
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["uid"].as_str().unwrap(),
                    o["metadata"]["resourceVersion"].as_str().unwrap(),
                    o["status"]["devices"].as_array().map_or(0, Vec::len)
                )
            })
            .collect();
        assert_eq!(
            words,
            [
                "MODIFIED ResourceClaim u1 2 0",
                "MODIFIED ResourceClaim u1 3 1",
                "DELETED ResourceClaim u1 4 1",
                "ADDED ResourceClaim u2 5 0",
                "DELETED ResourceClaim u2 6 0"
            ]
        );
        assert_eq!(got[0]["object"]["apiVersion"], "resource.k8s.io/v1");
        // Another namespace's watch sees none of them: its first event is a claim of its own.
        s.put_claim(json!({"metadata": {"name": "x", "namespace": "other", "uid": "u3"}, "spec": {}})); // rv 7
        let other =
            watch_of(&s, What::Claims("v1beta1".into(), Some("other".into())), "watch=true&resourceVersion=1", 1).await;
        assert_eq!(
            (other[0]["type"].as_str(), other[0]["object"]["metadata"]["uid"].as_str()),
            (Some("ADDED"), Some("u3"))
        );
        assert_eq!(other[0]["object"]["apiVersion"], "resource.k8s.io/v1beta1");
        // A ResourceSlices watch from before every claim change: its first event is a slice.
        assert_eq!(call(&s, "POST", SLICES, "", slice_with("s", 1)).0, 201);
        let slices = watch_of(&s, What::Slices, "watch=true&resourceVersion=1", 1).await;
        assert_eq!(slices[0]["object"]["metadata"]["name"], "s", "{slices:?}");
    }
}
