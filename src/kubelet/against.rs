//! Replay as the kubelet: send a trace's calls to a live plugin in order and
//! compare each answer with the recorded one, field by field, ignoring order
//! where the protocol defines none (mounts, device nodes, CDI devices,
//! preferred IDs). ListAndWatch snapshots are compared by device ID (added,
//! removed, health and topology per ID), every one that can be lined up:
//! each recorded stream gets a live stream, and each later recorded message
//! is compared with the live stream's next message if the plugin sends one.

use crate::api::deviceplugin::{Device, Empty, ListAndWatchResponse};
use crate::client::conn::PluginConn;
use crate::trace::{Event, RpcError, Trace};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// One replayed call and what differed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    /// e.g. `Allocate #2`, `ListAndWatch stream 1 message 2`.
    pub call: String,
    /// Differences; empty = same as recorded.
    pub diffs: Vec<String>,
    /// For a snapshot: the differences by device ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<DeviceDiff>,
}

/// A device as shown in a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceState {
    /// Device ID.
    pub id: String,
    /// Health.
    pub health: String,
    /// NUMA nodes (empty: no topology).
    pub numa: Vec<i64>,
}

/// A changed field of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed<T> {
    /// Device ID.
    pub id: String,
    /// As recorded.
    pub recorded: T,
    /// As the live plugin sent it.
    pub got: T,
}

/// Two snapshots compared by device ID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceDiff {
    /// In the live snapshot only.
    pub added: Vec<DeviceState>,
    /// In the recorded snapshot only.
    pub removed: Vec<DeviceState>,
    /// Health changed.
    pub health: Vec<Changed<String>>,
    /// NUMA nodes changed.
    pub topology: Vec<Changed<Vec<i64>>>,
    /// IDs listed more than once in the live snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<String>,
}

fn numa_of(d: &Device) -> Vec<i64> {
    let mut v: Vec<i64> = d.topology.iter().flat_map(|t| t.nodes.iter().map(|n| n.id)).collect();
    v.sort_unstable();
    v
}

fn state(d: &Device) -> DeviceState {
    DeviceState { id: d.id.clone(), health: d.health.clone(), numa: numa_of(d) }
}

fn numa_text(n: &[i64]) -> String {
    if n.is_empty() {
        "none".into()
    } else {
        n.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
    }
}

impl DeviceDiff {
    /// Compare by ID; order is free.
    pub fn between(recorded: &[Device], got: &[Device]) -> Self {
        let rec: BTreeMap<&str, &Device> = recorded.iter().map(|d| (d.id.as_str(), d)).collect();
        let mut live: BTreeMap<&str, &Device> = BTreeMap::new();
        let mut out = DeviceDiff::default();
        for d in got {
            if live.insert(d.id.as_str(), d).is_some() && !out.duplicates.contains(&d.id) {
                out.duplicates.push(d.id.clone());
            }
        }
        for (id, r) in &rec {
            match live.get(id) {
                None => out.removed.push(state(r)),
                Some(g) => {
                    if r.health != g.health {
                        out.health.push(Changed {
                            id: id.to_string(),
                            recorded: r.health.clone(),
                            got: g.health.clone(),
                        });
                    }
                    let (a, b) = (numa_of(r), numa_of(g));
                    if a != b {
                        out.topology.push(Changed { id: id.to_string(), recorded: a, got: b });
                    }
                }
            }
        }
        out.added = live.iter().filter(|(id, _)| !rec.contains_key(*id)).map(|(_, d)| state(d)).collect();
        out
    }

    /// No difference at all.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.health.is_empty()
            && self.topology.is_empty()
            && self.duplicates.is_empty()
    }

    /// One compact line per difference, plain text.
    pub fn lines(&self) -> Vec<String> {
        self.parts().into_iter().map(|(_, s)| s).collect()
    }

    /// One compact item per difference, with its kind for colouring:
    /// `-` removed, `+` added, `~` changed.
    pub fn parts(&self) -> Vec<(char, String)> {
        let mut v = Vec::new();
        // IDs and health strings are the peer's text: escaped and capped.
        use crate::core::text::cap;
        for d in &self.removed {
            v.push(('-', format!("-{} removed (was {}, NUMA {})", cap(&d.id), cap(&d.health), numa_text(&d.numa))));
        }
        for d in &self.added {
            v.push(('+', format!("+{} added ({}, NUMA {})", cap(&d.id), cap(&d.health), numa_text(&d.numa))));
        }
        for c in &self.health {
            v.push(('~', format!("~{} health {} → {}", cap(&c.id), cap(&c.recorded), cap(&c.got))));
        }
        for c in &self.topology {
            v.push(('~', format!("~{} NUMA {} → {}", cap(&c.id), numa_text(&c.recorded), numa_text(&c.got))));
        }
        for id in &self.duplicates {
            v.push(('~', format!("~{} listed more than once", cap(id))));
        }
        v
    }
}

/// Keys whose arrays are ordered by the protocol (one entry per container).
const ORDERED: [&str; 2] = ["containerResponses", "containerRequests"];

/// Sort arrays whose order the protocol leaves open.
pub fn normalize(v: &Value, key: &str) -> Value {
    match v {
        Value::Array(a) => {
            let mut items: Vec<Value> = a.iter().map(|x| normalize(x, "")).collect();
            if !ORDERED.contains(&key) {
                items.sort_by_key(|x| x.to_string());
            }
            Value::Array(items)
        }
        Value::Object(o) => o.iter().map(|(k, v)| (k.clone(), normalize(v, k))).collect(),
        other => other.clone(),
    }
}

/// Field-by-field differences between two normalized values.
pub fn diff(path: &str, recorded: &Value, got: &Value, out: &mut Vec<String>) {
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                diff(&p, a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) => out.push(format!(
            "{path}: recorded {} item(s) {}, got {} {}",
            a.len(),
            short(recorded),
            b.len(),
            short(got)
        )),
        (a, b) if a != b => out.push(format!("{path}: recorded {}, got {}", short(a), short(b))),
        _ => {}
    }
}

/// A recorded or received value for a diff line: escaped, at most 160 characters.
fn short(v: &Value) -> String {
    crate::core::text::cap_at(&v.to_string(), 160).into_owned()
}

fn outcome<T: Serialize>(r: Result<tonic::Response<T>, tonic::Status>) -> Result<Value, RpcError> {
    match r {
        Ok(x) => Ok(serde_json::to_value(x.into_inner()).unwrap_or_default()),
        Err(s) => Err(RpcError::from_status(&s)),
    }
}

/// Await a call with a deadline; a timeout is recorded as DeadlineExceeded.
async fn timed<T: Serialize>(
    timeout: Duration,
    fut: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<Value, RpcError> {
    match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(RpcError { code: "DeadlineExceeded".into(), message: "no answer in time".into() }),
        Ok(r) => outcome(r),
    }
}

fn recorded<T: Serialize>(resp: &Option<T>, err: &Option<RpcError>) -> Result<Value, RpcError> {
    match (resp, err) {
        (_, Some(e)) => Err(e.clone()),
        (Some(r), None) => Ok(serde_json::to_value(r).unwrap_or_default()),
        (None, None) => Ok(Value::Object(Default::default())),
    }
}

fn compare(want: Result<Value, RpcError>, got: Result<Value, RpcError>) -> Vec<String> {
    let mut out = Vec::new();
    match (want, got) {
        (Ok(a), Ok(b)) => diff("", &normalize(&a, ""), &normalize(&b, ""), &mut out),
        (Err(a), Err(b)) if a == b => {}
        (Err(a), Err(b)) => {
            out.push(format!("error: recorded {}: {}, got {}: {}", a.code, a.message, b.code, b.message))
        }
        (Err(a), Ok(_)) => out.push(format!("recorded the error {}: {}, got an answer", a.code, a.message)),
        (Ok(_), Err(b)) => out.push(format!("recorded an answer, got the error {}: {}", b.code, b.message)),
    }
    out
}

/// The live stream lined up with one recorded stream.
struct Live {
    recorded_stream: u64,
    stream: Option<tonic::Streaming<ListAndWatchResponse>>,
    last_t: f64,
    /// The plugin sent nothing when a later message was expected: stop waiting.
    quiet: bool,
}

fn snapshot_result(
    call: String,
    recorded: &ListAndWatchResponse,
    got: Result<ListAndWatchResponse, RpcError>,
) -> CallResult {
    match got {
        Ok(m) => {
            let d = DeviceDiff::between(&recorded.devices, &m.devices);
            CallResult { call, diffs: d.lines(), devices: (!d.is_empty()).then_some(d) }
        }
        Err(e) => CallResult {
            call,
            diffs: vec![format!(
                "recorded a snapshot of {} device(s), got the error {}: {}",
                recorded.devices.len(),
                e.code,
                e.message
            )],
            devices: None,
        },
    }
}

/// Replay `trace`'s calls against `conn`. Returns the results and the number
/// of recorded ListAndWatch messages and stream ends that could not be lined up.
pub async fn run(conn: &PluginConn, trace: &Trace, timeout: Duration) -> (Vec<CallResult>, usize) {
    let mut results = Vec::new();
    let mut skipped = 0;
    let mut n: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut live: Option<Live> = None;
    let mut c = conn.client();
    let mut count = |name: &'static str| {
        let e = n.entry(name).or_default();
        *e += 1;
        format!("{name} #{e}")
    };
    for ev in &trace.events {
        let (call, diffs) = match ev {
            Event::Options { response, error, .. } => {
                let got = timed(timeout, c.get_device_plugin_options(Empty {})).await;
                (count("GetDevicePluginOptions"), compare(recorded(response, error), got))
            }
            Event::ListAndWatch { t, stream, seq, response } => {
                let call = format!("ListAndWatch stream {stream} message {seq}");
                let same = live.as_ref().is_some_and(|l| l.recorded_stream == *stream);
                if !same {
                    // A new recorded stream: open a new live one and compare its first message.
                    let mut l = Live { recorded_stream: *stream, stream: None, last_t: *t, quiet: false };
                    let got = async {
                        let mut s = c.list_and_watch(Empty {}).await?.into_inner();
                        let m = s
                            .message()
                            .await?
                            .ok_or_else(|| tonic::Status::unavailable("the stream ended before its first snapshot"))?;
                        Ok::<_, tonic::Status>((s, m))
                    };
                    let got = match tokio::time::timeout(timeout, got).await {
                        Err(_) => Err(RpcError {
                            code: "DeadlineExceeded".into(),
                            message: "no first snapshot in time".into(),
                        }),
                        Ok(Err(s)) => Err(RpcError::from_status(&s)),
                        Ok(Ok((s, m))) => {
                            l.stream = Some(s);
                            Ok(m)
                        }
                    };
                    live = Some(l);
                    results.push(snapshot_result(call, response, got));
                    continue;
                }
                let Some(l) = live.as_mut() else { continue };
                let gap = (t - l.last_t).clamp(0.2, 2.0);
                l.last_t = *t;
                let wait = if l.quiet {
                    Duration::ZERO
                } else {
                    Duration::try_from_secs_f64(gap).unwrap_or(Duration::from_secs(2)).min(timeout)
                };
                let next = match l.stream.as_mut() {
                    None => None,
                    Some(s) => tokio::time::timeout(wait.max(Duration::from_millis(1)), s.message()).await.ok(),
                };
                match next {
                    None => {
                        // Nothing came: this message depended on something outside the calls.
                        l.quiet = true;
                        skipped += 1;
                        continue;
                    }
                    Some(Ok(Some(m))) => {
                        results.push(snapshot_result(call, response, Ok(m)));
                        continue;
                    }
                    Some(Ok(None)) => {
                        l.stream = None;
                        results.push(snapshot_result(
                            call,
                            response,
                            Err(RpcError { code: "OK".into(), message: "the plugin ended the stream".into() }),
                        ));
                        continue;
                    }
                    Some(Err(s)) => {
                        l.stream = None;
                        results.push(snapshot_result(call, response, Err(RpcError::from_status(&s))));
                        continue;
                    }
                }
            }
            Event::ListAndWatchEnd { .. } => {
                skipped += 1;
                continue;
            }
            Event::Preferred { request, response, error, .. } => {
                let got = timed(timeout, c.get_preferred_allocation(request.clone())).await;
                (count("GetPreferredAllocation"), compare(recorded(response, error), got))
            }
            Event::Allocate { request, response, error, .. } => {
                let got = timed(timeout, c.allocate(request.clone())).await;
                (count("Allocate"), compare(recorded(response, error), got))
            }
            Event::PreStart { request, response, error, .. } => {
                let got = timed(timeout, c.pre_start_container(request.clone())).await;
                (count("PreStartContainer"), compare(recorded(response, error), got))
            }
            // What the kubelet knew and did: not calls to the plugin.
            Event::KubeletState { .. }
            | Event::KubeletRestart { .. }
            | Event::Reregistered { .. }
            | Event::AllocateFor { .. } => continue,
        };
        results.push(CallResult { call, diffs, devices: None });
    }
    (results, skipped)
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_cuts_non_ascii_text_on_a_character_boundary() {
        // 159 ASCII bytes after the opening quote, then 'é' straddles byte 160.
        let v = Value::String(format!("{}é and more", "a".repeat(158)));
        let s = super::short(&v);
        assert!(s.starts_with("\"aaa") && s.ends_with("é… (171 bytes)"), "{s}");
        assert_eq!(super::short(&Value::from(1)), "1");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn order_free_fields_compare_equal_and_real_changes_show() {
        let a = json!({"containerResponses": [{"envs": {"A": "1"}, "cdiDevices": [{"name": "x"}, {"name": "y"}]}, {"envs": {}}]});
        let b = json!({"containerResponses": [{"envs": {"A": "1"}, "cdiDevices": [{"name": "y"}, {"name": "x"}]}, {"envs": {}}]});
        let mut out = vec![];
        diff("", &normalize(&a, ""), &normalize(&b, ""), &mut out);
        assert!(out.is_empty(), "{out:?}");
        let c = json!({"containerResponses": [{"envs": {"A": "2"}, "cdiDevices": [{"name": "x"}, {"name": "y"}]}, {"envs": {}}]});
        diff("", &normalize(&a, ""), &normalize(&c, ""), &mut out);
        assert_eq!(out, vec!["containerResponses[0].envs.A: recorded \"1\", got \"2\"".to_string()]);
        let swapped = json!({"containerResponses": [{"envs": {}}, {"envs": {"A": "1"}, "cdiDevices": [{"name": "x"}, {"name": "y"}]}]});
        let mut out = vec![];
        diff("", &normalize(&a, ""), &normalize(&swapped, ""), &mut out);
        assert!(!out.is_empty(), "container order matters");
    }

    fn d(id: &str, health: &str, numa: Option<i64>) -> Device {
        Device {
            id: id.into(),
            health: health.into(),
            topology: numa.map(|n| crate::api::deviceplugin::TopologyInfo {
                nodes: vec![crate::api::deviceplugin::NumaNode { id: n }],
            }),
        }
    }

    #[test]
    fn snapshots_compare_by_device_id() {
        let rec = vec![d("foo-0", "Healthy", Some(0)), d("foo-1", "Healthy", Some(0)), d("foo-2", "Healthy", Some(1))];
        // same devices, another order: no difference
        let shuffled = vec![rec[2].clone(), rec[0].clone(), rec[1].clone()];
        assert!(DeviceDiff::between(&rec, &shuffled).is_empty());
        let got = vec![d("foo-2", "Unhealthy", Some(0)), d("foo-0", "Healthy", Some(0)), d("foo-9", "Healthy", None)];
        let diff = DeviceDiff::between(&rec, &got);
        assert_eq!(
            diff.lines(),
            vec![
                "-foo-1 removed (was Healthy, NUMA 0)".to_string(),
                "+foo-9 added (Healthy, NUMA none)".to_string(),
                "~foo-2 health Healthy → Unhealthy".to_string(),
                "~foo-2 NUMA 1 → 0".to_string(),
            ]
        );
        let v = serde_json::to_value(&diff).unwrap();
        assert_eq!(v["health"][0], json!({"id": "foo-2", "recorded": "Healthy", "got": "Unhealthy"}));
        assert_eq!(v["added"][0]["id"], "foo-9");
        let dup = DeviceDiff::between(&rec, &[rec[0].clone(), rec[0].clone(), rec[1].clone(), rec[2].clone()]);
        assert_eq!(dup.duplicates, ["foo-0"]);
    }
}
