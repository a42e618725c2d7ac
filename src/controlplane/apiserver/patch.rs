//! Patches as kube-apiserver applies them to the objects served here:
//! JSON merge patch (RFC 7386, `application/merge-patch+json`), strategic
//! merge patch (`application/strategic-merge-patch+json`: a merge patch
//! whose lists with a patch merge key — `status.reservedFor` by `uid` — are
//! merged by that key; other lists are replaced, as for the claim types'
//! atomic and map lists), and server-side apply
//! (`application/apply-patch+yaml`: the applied configuration merged into
//! the object, lists of `listType=map` merged by their keys —
//! `status.devices` by driver, pool, device and shareID). Managed fields
//! are not tracked: an apply never removes what an earlier apply set.

use serde_json::{Map, Value};

/// The patch types served, by their Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header, if it is one served.
    pub fn of(content_type: &str) -> Option<PatchType> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// Lists merged by keys (path from the object's root, the keys).
const KEYED_LISTS: &[(&str, PatchType, &[&str])] = &[
    ("status.reservedFor", PatchType::Strategic, &["uid"]),
    ("status.reservedFor", PatchType::Apply, &["uid"]),
    ("status.devices", PatchType::Apply, &["driver", "pool", "device", "shareID"]),
];

fn keys_of(path: &str, t: PatchType) -> Option<&'static [&'static str]> {
    KEYED_LISTS.iter().find(|(p, pt, _)| *p == path && *pt == t).map(|(_, _, k)| *k)
}

/// `patch` applied to `target` as patch type `t`.
pub fn apply(target: &Value, patch: &Value, t: PatchType) -> Value {
    merge_at(target, patch, t, "")
}

fn merge_at(target: &Value, patch: &Value, t: PatchType, path: &str) -> Value {
    let Value::Object(p) = patch else { return patch.clone() };
    let mut out = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for (k, v) in p {
        if t == PatchType::Strategic && k.starts_with('$') {
            continue;
        }
        let here = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
        match v {
            // Merge and strategic patches delete a field with null; an apply sets it null (dropped).
            Value::Null => {
                out.remove(k);
            }
            Value::Object(_) => {
                let merged = merge_at(out.get(k).unwrap_or(&Value::Null), v, t, &here);
                out.insert(k.clone(), merged);
            }
            Value::Array(items) => match (keys_of(&here, t), out.get(k)) {
                (Some(keys), Some(Value::Array(have))) => {
                    let mut list = have.clone();
                    for item in items {
                        let same = |x: &Value| keys.iter().all(|key| x.get(*key) == item.get(*key));
                        match list.iter_mut().find(|x| same(x)) {
                            Some(x) => *x = merge_at(x, item, t, &here),
                            None => list.push(item.clone()),
                        }
                    }
                    out.insert(k.clone(), Value::Array(list));
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            },
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches_replace_lists_delete_with_null_and_apply_merges_keyed_lists() {
        let obj = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "status": {"devices": [
            {"driver": "d", "pool": "p", "device": "g0", "data": {"x": 1}},
            {"driver": "d", "pool": "p", "device": "g1"}]}});
        let m = apply(
            &obj,
            &json!({"metadata": {"labels": {"a": null, "b": "2"}}, "status": {"devices": [{"driver": "d", "pool": "p", "device": "g1"}]}}),
            PatchType::Merge,
        );
        assert_eq!(m["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(m["status"]["devices"].as_array().unwrap().len(), 1);
        let a = apply(
            &obj,
            &json!({"status": {"devices": [{"driver": "d", "pool": "p", "device": "g1", "data": {"y": 2}}]}}),
            PatchType::Apply,
        );
        let devices = a["status"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[1]["data"]["y"], 2);
        assert_eq!(devices[0]["data"]["x"], 1);
        assert_eq!(PatchType::of("application/merge-patch+json; charset=utf-8"), Some(PatchType::Merge));
        assert_eq!(PatchType::of("application/json-patch+json"), None);
    }
}
