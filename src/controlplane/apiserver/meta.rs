//! The object metadata the API server owns, written once for every kind it
//! stores, as kube-apiserver's generic registry writes it
//! (k8s.io/apiserver/pkg/registry/rest/create.go `BeforeCreate`,
//! update.go `BeforeUpdate`, and the strategies' generation rule): a name
//! from `generateName`, then on create a uid, `creationTimestamp`,
//! `generation: 1` and a resource version; on update the uid and
//! `creationTimestamp` kept, `generation` bumped when the spec changed, a
//! new resource version (pure).

use super::status;
use serde_json::{json, Value};

/// `names.SimpleNameGenerator`'s limit: the base is cut so that the name
/// with its 5 random characters fits 63 (`maxGeneratedNameLength`).
const MAX_GENERATED_BASE: usize = 63 - 5;

/// The characters `utilrand.String` draws from (no vowels, no look-alikes).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// How many names a create with `generateName` tries before it is 409:
/// kube-apiserver retries a taken generated name (RetryGenerateName, GA in
/// 1.32: `generateNameRetries`, 7 retries after the first try).
const GENERATE_TRIES: u64 = 8;

/// `base` + 5 characters of [`ALPHANUMS`] drawn from `seed` (the store's
/// counter mixed with the clock: a new name each call).
fn generated(base: &str, seed: u64) -> String {
    let cut = base.char_indices().nth(MAX_GENERATED_BASE).map_or(base.len(), |(i, _)| i);
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut out = base[..cut].to_string();
    for _ in 0..5 {
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 29;
        out.push(ALPHANUMS[(h % ALPHANUMS.len() as u64) as usize] as char);
    }
    out
}

/// The name of an object being created: `metadata.name`, or one generated
/// from `metadata.generateName` that `taken` does not hold (`counter`
/// advances with each try). 422 when it has neither, 409 when every try
/// was taken.
pub(super) fn name_for_create(
    obj: &Value,
    counter: &mut u64,
    taken: impl Fn(&str) -> bool,
    resource: &str,
) -> Result<String, (u16, Value)> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if !name.is_empty() {
        return Ok(name.to_string());
    }
    let base = obj["metadata"]["generateName"].as_str().unwrap_or_default();
    if base.is_empty() {
        return Err(status(422, "Invalid", "metadata.name or metadata.generateName is required".into()));
    }
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut last = String::new();
    for _ in 0..GENERATE_TRIES {
        *counter += 1;
        last = generated(base, clock.wrapping_add(*counter));
        if !taken(&last) {
            return Ok(last);
        }
    }
    Err(status(409, "AlreadyExists", format!("{resource} {last:?} already exists")))
}

/// Stamp a created object: its name, a uid (`uid_seed`'s, unless the
/// object is written in process with one of its own: a manifest's),
/// `creationTimestamp` now, `generation: 1` and resource version `version`.
pub(super) fn created(obj: &mut Value, name: &str, version: u64, uid_seed: &str, keep_uid: bool) {
    let uid = match obj["metadata"]["uid"].as_str().filter(|u| keep_uid && !u.is_empty()) {
        Some(u) => u.to_string(),
        None => crate::controlplane::objects::derived_uid(uid_seed),
    };
    let m = &mut obj["metadata"];
    m["name"] = json!(name);
    m["uid"] = json!(uid);
    m["creationTimestamp"] = json!(now());
    m["generation"] = json!(1);
    m["resourceVersion"] = json!(version.to_string());
}

/// Stamp an updated object over `cur`: uid and `creationTimestamp` kept,
/// `generation` bumped when the spec changed, resource version `version`.
pub(super) fn updated(obj: &mut Value, cur: &Value, version: u64) {
    let generation = cur["metadata"]["generation"].as_i64().unwrap_or(1) + i64::from(cur["spec"] != obj["spec"]);
    let m = &mut obj["metadata"];
    m["name"] = cur["metadata"]["name"].clone();
    m["uid"] = cur["metadata"]["uid"].clone();
    m["creationTimestamp"] = cur["metadata"]["creationTimestamp"].clone();
    m["generation"] = json!(generation);
    m["resourceVersion"] = json!(version.to_string());
}

/// Whether an updated object is to go now: it is being deleted
/// (`deletionTimestamp`) and has no finalizers left, as the generic
/// store's `ShouldDeleteDuringUpdate` decides (a graceful pod waits for
/// its grace period instead).
pub(super) fn finalized(obj: &Value) -> bool {
    let m = &obj["metadata"];
    m["deletionTimestamp"].is_string()
        && m["finalizers"].as_array().is_none_or(Vec::is_empty)
        && m["deletionGracePeriodSeconds"].as_i64().is_none_or(|g| g == 0)
}

/// Now, as `metav1.Time` writes it.
pub(super) fn now() -> String {
    crate::core::time::rfc3339_seconds(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_name_is_the_base_and_five_characters_and_skips_taken_names() {
        let obj = json!({"metadata": {"generateName": "node-1-gpu-"}});
        let mut n = 0;
        let a = name_for_create(&obj, &mut n, |_| false, "resourceslices.resource.k8s.io").unwrap();
        assert_eq!(a.len(), "node-1-gpu-".len() + 5, "{a}");
        assert!(a.starts_with("node-1-gpu-") && a[11..].bytes().all(|b| ALPHANUMS.contains(&b)), "{a}");
        let b = name_for_create(&obj, &mut n, |x| x == a, "r").unwrap();
        assert_ne!(a, b);
        let (code, e) = name_for_create(&obj, &mut n, |_| true, "r").unwrap_err();
        assert_eq!((code, e["reason"].as_str()), (409, Some("AlreadyExists")));
        let long = json!({"metadata": {"generateName": "x".repeat(80)}});
        assert_eq!(name_for_create(&long, &mut n, |_| false, "r").unwrap().len(), 63);
        let (code, _) = name_for_create(&json!({"metadata": {}}), &mut n, |_| false, "r").unwrap_err();
        assert_eq!(code, 422);
        assert_eq!(name_for_create(&json!({"metadata": {"name": "x"}}), &mut n, |_| true, "r").unwrap(), "x");
    }

    #[test]
    fn an_update_keeps_what_create_set_and_counts_spec_changes() {
        let mut cur = json!({"metadata": {"uid": "given"}, "spec": {"a": 1}});
        created(&mut cur, "o", 3, "seed", true);
        assert_eq!((cur["metadata"]["uid"].as_str(), cur["metadata"]["generation"].as_i64()), (Some("given"), Some(1)));
        let mut fresh = json!({"metadata": {"uid": "sent"}});
        created(&mut fresh, "o", 3, "seed", false);
        assert_ne!(fresh["metadata"]["uid"], "sent", "a create over HTTP gets a uid of the server's");
        let mut same = json!({"metadata": {"uid": "other"}, "spec": {"a": 1}});
        updated(&mut same, &cur, 4);
        assert_eq!(same["metadata"]["uid"], "given");
        assert_eq!(
            (same["metadata"]["generation"].as_i64(), same["metadata"]["resourceVersion"].as_str()),
            (Some(1), Some("4"))
        );
        let mut changed = json!({"metadata": {}, "spec": {"a": 2}});
        updated(&mut changed, &same, 5);
        assert_eq!(changed["metadata"]["generation"], 2);
        assert_eq!(changed["metadata"]["creationTimestamp"], cur["metadata"]["creationTimestamp"]);
    }
}
