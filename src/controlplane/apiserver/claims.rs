//! A ResourceClaim's API shape: its spec in v1's form with v1's defaults
//! (as kube-apiserver applies them), in v1beta1's form, and the node
//! selector the scheduler writes for node-local devices (pure).

use serde_json::{json, Map, Value};

/// The fields of a v1 `ExactDeviceRequest` (the fields a v1beta1 request carries itself).
const EXACT_FIELDS: &[&str] =
    &["deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity"];

/// kube-apiserver's v1 defaults for an exact request or a sub-request
/// (pkg/apis/resource/v1/defaults.go).
fn default_exact(e: &mut Value) {
    let Some(m) = e.as_object_mut() else { return };
    if !m.contains_key("allocationMode") {
        m.insert("allocationMode".into(), json!("ExactCount"));
    }
    if m["allocationMode"] == "ExactCount" && m.get("count").is_none_or(|c| c.as_i64() == Some(0)) {
        m.insert("count".into(), json!(1));
    }
    for t in m.get_mut("tolerations").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(t) = t.as_object_mut() {
            t.entry("operator").or_insert(json!("Equal"));
        }
    }
}

/// A claim spec in v1's shape (a v1beta1 request's fields moved under
/// `exactly`), with v1's defaults.
pub fn v1_spec(spec: &Value) -> Value {
    let mut s = spec.clone();
    for r in s["devices"]["requests"].as_array_mut().into_iter().flatten() {
        let Some(m) = r.as_object_mut() else { continue };
        if !m.contains_key("exactly") && !m.contains_key("firstAvailable") {
            let mut exact = Map::new();
            for f in EXACT_FIELDS {
                if let Some(v) = m.remove(*f) {
                    exact.insert((*f).to_string(), v);
                }
            }
            if !exact.is_empty() {
                m.insert("exactly".into(), Value::Object(exact));
            }
        }
        if let Some(e) = m.get_mut("exactly") {
            default_exact(e);
        }
        for sub in m.get_mut("firstAvailable").and_then(Value::as_array_mut).into_iter().flatten() {
            default_exact(sub);
        }
    }
    s
}

/// A v1 claim spec in v1beta1's shape (what the v1beta1 path serves).
pub fn v1beta1_spec(spec: &Value) -> Value {
    let mut s = spec.clone();
    for r in s["devices"]["requests"].as_array_mut().into_iter().flatten() {
        let Some(m) = r.as_object_mut() else { continue };
        if let Some(Value::Object(exact)) = m.remove("exactly") {
            m.extend(exact);
        }
    }
    s
}

/// The node selector the scheduler writes for devices of a node-local slice.
pub fn node_selector(node: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_defaults_are_applied_and_v1beta1_requests_move_under_exactly() {
        let s = v1_spec(&json!({"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "c", "tolerations": [{"key": "k", "effect": "NoSchedule"}]}},
            {"name": "b", "deviceClassName": "c", "allocationMode": "All"},
            {"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "c", "count": 2}]}]}}));
        let r = &s["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert_eq!(r[0]["exactly"]["tolerations"][0]["operator"], "Equal");
        assert_eq!(r[1]["exactly"], json!({"deviceClassName": "c", "allocationMode": "All"}));
        assert_eq!(r[2]["firstAvailable"][0]["count"], 2);
        assert_eq!(r[2]["firstAvailable"][0]["allocationMode"], "ExactCount");
        let back = v1beta1_spec(&s);
        assert_eq!(back["devices"]["requests"][1]["deviceClassName"], "c");
        assert!(back["devices"]["requests"][1].get("exactly").is_none());
    }
}
