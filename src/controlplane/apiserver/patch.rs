//! Patches as kube-apiserver applies them to the objects served here:
//! JSON merge patch (RFC 7386, `application/merge-patch+json`), strategic
//! merge patch (`application/strategic-merge-patch+json`: a merge patch
//! whose lists with a patch merge key — `status.reservedFor` by `uid` — are
//! merged by that key; other lists are replaced, as for the claim types'
//! atomic and map lists), and server-side apply
//! (`application/apply-patch+yaml`: the applied configuration merged into
//! the object, lists of `listType=map` merged by their keys —
//! `status.devices` by driver, pool, device and shareID), and JSON patch
//! (RFC 6902, `application/json-patch+json`: add, remove, replace, move,
//! copy, test, as evanphx/json-patch applies them for kube-apiserver).
//! Managed fields are not tracked: an apply never removes what an earlier
//! apply set. [`patched`] reads a request's patch by its Content-Type and
//! applies it, or gives kube-apiserver's error answer.

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
    /// `application/json-patch+json` (RFC 6902).
    Json,
}

impl PatchType {
    /// The patch type of a Content-Type header, if it is one served.
    pub fn of(content_type: &str) -> Option<PatchType> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            "application/json-patch+json" => Some(PatchType::Json),
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

/// Why a JSON patch does not apply (its operation's index and the problem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPatchError(pub String);

impl std::fmt::Display for JsonPatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JsonPatchError {}

/// An RFC 6901 pointer's tokens (`~1` is `/`, `~0` is `~`).
fn pointer(p: &str) -> Result<Vec<String>, JsonPatchError> {
    if p.is_empty() {
        return Ok(vec![]);
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(JsonPatchError(format!("invalid JSON pointer {p:?}")));
    };
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

/// The parent of the pointer's last token, and that token.
fn parent_mut<'a>(doc: &'a mut Value, path: &[String]) -> Result<(&'a mut Value, String), JsonPatchError> {
    let Some((last, up)) = path.split_last() else {
        return Err(JsonPatchError("the whole document cannot be the target".into()));
    };
    let mut at = doc;
    for t in up {
        at = match at {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| JsonPatchError(format!("doc is missing path: \"/{}\"", path.join("/"))))?;
    }
    Ok((at, last.clone()))
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |at, t| match at {
        Value::Object(m) => m.get(t),
        Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn missing(path: &[String]) -> JsonPatchError {
    JsonPatchError(format!("doc is missing path: \"/{}\": missing value", path.join("/")))
}

fn remove_at(doc: &mut Value, path: &[String]) -> Result<Value, JsonPatchError> {
    let (parent, last) = parent_mut(doc, path)?;
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(|| missing(path)),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing(path)),
        },
        _ => Err(missing(path)),
    }
}

fn add_at(doc: &mut Value, path: &[String], v: Value, replace: bool) -> Result<(), JsonPatchError> {
    if path.is_empty() {
        *doc = v;
        return Ok(());
    }
    let (parent, last) = parent_mut(doc, path)?;
    match parent {
        Value::Object(m) => {
            if replace && !m.contains_key(&last) {
                return Err(missing(path));
            }
            m.insert(last, v);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" { a.len() } else { last.parse::<usize>().map_err(|_| missing(path))? };
            match (replace, i < a.len(), i == a.len()) {
                (true, true, _) => a[i] = v,
                (false, _, _) if i <= a.len() => a.insert(i, v),
                _ => return Err(missing(path)),
            }
            Ok(())
        }
        _ => Err(missing(path)),
    }
}

/// A JSON patch (RFC 6902) applied to `target`.
pub fn apply_json_patch(target: &Value, ops: &Value) -> Result<Value, JsonPatchError> {
    let Some(ops) = ops.as_array() else {
        return Err(JsonPatchError("a JSON patch is a list of operations".into()));
    };
    let mut doc = target.clone();
    for op in ops {
        let path = pointer(op["path"].as_str().unwrap_or_default())?;
        let from = || pointer(op["from"].as_str().unwrap_or_default());
        let value = || op.get("value").cloned().ok_or_else(|| JsonPatchError("missing value".into()));
        match op["op"].as_str().unwrap_or_default() {
            "add" => add_at(&mut doc, &path, value()?, false)?,
            "replace" => add_at(&mut doc, &path, value()?, true)?,
            "remove" => {
                remove_at(&mut doc, &path)?;
            }
            "move" => {
                let v = remove_at(&mut doc, &from()?)?;
                add_at(&mut doc, &path, v, false)?;
            }
            "copy" => {
                let f = from()?;
                let v = get(&doc, &f).cloned().ok_or_else(|| missing(&f))?;
                add_at(&mut doc, &path, v, false)?;
            }
            "test" => {
                if get(&doc, &path) != Some(&value()?) {
                    return Err(JsonPatchError(
                        "testing value /".to_string() + &path.join("/") + " failed: test failed",
                    ));
                }
            }
            other => return Err(JsonPatchError(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

/// The object `cur` (as served) with the request's patch applied: the
/// patch read by its Content-Type (`types` are the types this resource
/// takes) and applied; or kube-apiserver's answer (415 for a type not
/// taken, 400 for a patch that cannot be read, 422 for a JSON patch that
/// does not apply, 422 for an apply without a `fieldManager`).
pub(super) fn patched(
    cur: &Value,
    content_type: &str,
    body: &[u8],
    query: &[(String, String)],
    types: &[PatchType],
) -> Result<Value, (u16, Value)> {
    let Some(t) = PatchType::of(content_type).filter(|t| types.contains(t)) else {
        let names: Vec<&str> = types
            .iter()
            .map(|t| match t {
                PatchType::Json => "application/json-patch+json",
                PatchType::Merge => "application/merge-patch+json",
                PatchType::Strategic => "application/strategic-merge-patch+json",
                PatchType::Apply => "application/apply-patch+yaml",
            })
            .collect();
        return Err(super::status(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                names.join(", ")
            ),
        ));
    };
    let undecodable =
        |e: &dyn std::fmt::Display| super::status(400, "BadRequest", format!("error decoding patch: {e}"));
    let p: Value = match t {
        PatchType::Apply => serde_norway::from_slice(body).map_err(|e| undecodable(&e))?,
        _ => serde_json::from_slice(body).map_err(|e| undecodable(&e))?,
    };
    if t == PatchType::Apply && !query.iter().any(|(k, v)| k == "fieldManager" && !v.is_empty()) {
        let (c, mut v) = super::status(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
                .into(),
        );
        v["details"] = serde_json::json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]});
        return Err((c, v));
    }
    match t {
        PatchType::Json => apply_json_patch(cur, &p).map_err(|e| {
            super::status(
                422,
                "Invalid",
                format!("the server rejected our request due to an error in our request: {e}"),
            )
        }),
        _ if !p.is_object() => Err(super::status(400, "BadRequest", "error decoding patch: not a JSON object".into())),
        _ => Ok(apply(cur, &p, t)),
    }
}

/// Every patch type kube-apiserver takes for a built-in kind.
pub(super) const BUILTIN_TYPES: &[PatchType] =
    &[PatchType::Json, PatchType::Merge, PatchType::Strategic, PatchType::Apply];

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
        assert_eq!(PatchType::of("application/json-patch+json"), Some(PatchType::Json));
        assert_eq!(PatchType::of("text/plain"), None);
    }

    #[test]
    fn json_patches_add_replace_remove_move_copy_and_test_or_fail_whole() {
        let obj = json!({"metadata": {"labels": {"a": "1"}}, "list": [1, 2]});
        let p = json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"x~/y": "z"}},
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "remove", "path": "/list/1"},
            {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/b"},
            {"op": "move", "from": "/metadata/annotations/x~0~1y", "path": "/metadata/labels/c"},
            {"op": "test", "path": "/list", "value": [0, 2, 3]}
        ]);
        let out = apply_json_patch(&obj, &p).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"a": "2", "b": "2", "c": "z"}));
        assert_eq!(out["list"], json!([0, 2, 3]));
        assert_eq!(out["metadata"]["annotations"], json!({}));
        for bad in [
            json!([{"op": "replace", "path": "/spec/nothing/here", "value": 1}]),
            json!([{"op": "replace", "path": "/metadata/missing", "value": 1}]),
            json!([{"op": "test", "path": "/metadata/labels/a", "value": "9"}]),
            json!([{"op": "remove", "path": "/list/7"}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!({"op": "add"}),
        ] {
            assert!(apply_json_patch(&obj, &bad).is_err(), "{bad}");
        }
        let e = patched(
            &obj,
            "application/json-patch+json",
            br#"[{"op":"test","path":"/list","value":1}]"#,
            &[],
            BUILTIN_TYPES,
        )
        .unwrap_err();
        assert_eq!((e.0, e.1["reason"].as_str()), (422, Some("Invalid")));
        let e = patched(&obj, "text/plain", b"{}", &[], BUILTIN_TYPES).unwrap_err();
        assert_eq!(e.0, 415);
        let e = patched(&obj, "application/merge-patch+json", b"{nope", &[], BUILTIN_TYPES).unwrap_err();
        assert_eq!(e.0, 400);
    }
}
