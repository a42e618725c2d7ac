//! Replay as the kubelet: send a trace's calls to a live plugin in order and
//! compare each answer with the recorded one, field by field, ignoring order
//! where the protocol defines none (devices of a snapshot, mounts, device
//! nodes, CDI devices, preferred IDs).

use crate::api::deviceplugin::Empty;
use crate::kubelet::conn::PluginConn;
use crate::trace::{Event, RpcError, Trace};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// One replayed call and what differed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    /// e.g. `Allocate #2`.
    pub call: String,
    /// Differences; empty = same as recorded.
    pub diffs: Vec<String>,
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

/// Replay `trace`'s calls against `conn`.
pub async fn run(conn: &PluginConn, trace: &Trace, timeout: Duration) -> (Vec<CallResult>, usize) {
    let mut results = Vec::new();
    let mut skipped = 0;
    let mut n: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut first_stream: Option<u64> = None;
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
            Event::ListAndWatch { stream, seq, response, .. } => {
                if first_stream.is_some_and(|s| s != *stream) || *seq != 1 {
                    skipped += 1;
                    continue;
                }
                first_stream = Some(*stream);
                let got = async {
                    let mut s = c.list_and_watch(Empty {}).await?.into_inner();
                    s.message()
                        .await?
                        .ok_or_else(|| tonic::Status::unavailable("the stream ended before its first snapshot"))
                };
                let got = match tokio::time::timeout(timeout, got).await {
                    Err(_) => {
                        Err(RpcError { code: "DeadlineExceeded".into(), message: "no first snapshot in time".into() })
                    }
                    Ok(Err(s)) => Err(RpcError::from_status(&s)),
                    Ok(Ok(m)) => Ok(serde_json::to_value(m).unwrap_or_default()),
                };
                (
                    count("ListAndWatch first snapshot"),
                    compare(Ok(serde_json::to_value(response).unwrap_or_default()), got),
                )
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
        };
        results.push(CallResult { call, diffs });
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
}
