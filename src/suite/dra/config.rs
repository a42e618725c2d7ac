//! DRA-CONFIG-001: the opaque `config` a DeviceClass and a claim give the
//! driver reaches what it prepares. The scheduler copies both into the
//! claim's `status.allocation.devices.config` (source FromClass and
//! FromClaim, with the requests they apply to); a driver reads them from
//! the claim it fetches (the kubeletplugin helper hands it the claim) and
//! must act on them or refuse them. A driver that drops them prepares
//! devices with its defaults, silently (NVIDIA's driver did, when config
//! was lost): the failure this scenario exists for.
//!
//! The parameters follow the convention of upstream's e2e test driver
//! (test/e2e/dra/test-driver: a JSON object of strings, each `key: value`
//! of the class's config becomes the CDI env `admin_key=value`, of the
//! claim's `user_key=value`): the values, unique per run, must appear in the
//! CDI edits of the claim's devices. A driver with its own schema refuses
//! parameters it cannot decode (the strict decoding real drivers use); that
//! refusal passes: the config was not dropped.

use super::cdi::SpecFile;
use super::session::{fail, Sess, NS};
use crate::protocol::dra as rules;
use crate::suite::{Outcome, Verdict};

const POD: &str = "config-1";

/// The values the scenario's configs carry, unique to this run.
struct Nonces {
    class: String,
    claim: String,
}

/// The CDI edits (the spec's own and each named device's) of the IDs in
/// `ids`, as JSON text; IDs no file defines are left out (DRA-CDI-001 judges those).
pub(super) fn edits_of(ids: &[String], files: &[SpecFile]) -> String {
    let mut out = Vec::new();
    for f in files {
        let yaml = !f.name.ends_with(".json");
        let v: serde_json::Value = if yaml {
            serde_norway::from_str(&f.text).unwrap_or_default()
        } else {
            serde_json::from_str(&f.text).unwrap_or_default()
        };
        let kind = v["kind"].as_str().unwrap_or_default();
        let mut used = false;
        for d in v["devices"].as_array().into_iter().flatten() {
            let id = format!("{kind}={}", d["name"].as_str().unwrap_or_default());
            if ids.contains(&id) {
                used = true;
                out.push(d["containerEdits"].to_string());
            }
        }
        if used {
            out.push(v["containerEdits"].to_string());
        }
    }
    out.join("\n")
}

/// What is missing from `edits`: each nonce not found, named by its source (pure).
fn missing(edits: &str, class: &str, claim: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if !edits.contains(class) {
        out.push("the DeviceClass's (FromClass)");
    }
    if !edits.contains(claim) {
        out.push("the claim's (FromClaim)");
    }
    out
}

/// DRA-CONFIG-001
pub(crate) async fn opaque_config(s: &mut Sess) -> Outcome {
    if s.engine_claims.is_empty() {
        return Outcome::skip("DRA-PREP-001 did not prepare");
    }
    let d = need!(s.driver().await);
    need!(super::claims::uses_api_server(s).await);
    let run = crate::controlplane::objects::derived_uid(&format!("dpctl-test-config\0{}", std::process::id()));
    let n = Nonces { class: format!("class-{}", &run[..8]), claim: format!("claim-{}", &run[..8]) };
    let class = format!("{}-dpctl-config", d.name);
    let class_text = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: {class}\nspec:\n  selectors:\n  - cel:\n      expression: 'device.driver == \"{}\"'\n  config:\n  - opaque:\n      driver: {}\n      parameters: {{dpctl_class: {}}}\n",
        d.name, d.name, n.class
    );
    need!(s.write("config-class.yaml", &class_text));
    let from = s.seen.len();
    let claims = [format!("{POD}-a"), format!("{POD}-b")];
    let with_config = format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {}\n  namespace: {NS}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: {class}\n    config:\n    - requests: [r]\n      opaque:\n        driver: {}\n        parameters: {{dpctl_claim: {}}}\n",
        claims[0], d.name, n.claim
    );
    // The other claim has no config: the pod's second device, prepared as usual.
    let plain = format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {}\n  namespace: {NS}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: {}\n",
        claims[1], d.name
    );
    need!(s.write(&format!("{}.yaml", claims[0]), &with_config));
    need!(s.write(&format!("{}.yaml", claims[1]), &plain));
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {POD}\n  namespace: {NS}\n  uid: {POD}-uid\nspec:\n  resourceClaims:\n  - name: a\n    resourceClaimName: {}\n  - name: b\n    resourceClaimName: {}\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: a\n      - name: b\n",
        claims[0], claims[1]
    );
    need!(s.write(&format!("{POD}.yaml"), &pod));
    let kept = s.engine_claims.len();
    let prepared = s.await_prepared(from, &claims).await;
    let files = super::cdi::scan(&s.tree.cdi_dir());
    let prepared_ok = prepared.is_ok();
    let outcome = match prepared {
        // Refused: not dropped. Real drivers decode their config strictly.
        Err(o) if o.verdict == Verdict::Fail && o.stop.is_none() => Outcome::pass(format!(
            "refused the claim with config (its parameters {{dpctl_class, dpctl_claim}} are not its schema): {}",
            o.evidence.map(|e| e.answer).unwrap_or_default()
        )),
        Err(o) => o,
        Ok(ids) => {
            let ids = ids.first().map(|(_, i)| i.clone()).unwrap_or_default();
            let edits = edits_of(&ids, &files);
            let gone = missing(&edits, &n.class, &n.claim);
            if edits.lines().all(|l| l == "{}" || l == "null") {
                // Unresolvable IDs or empty edits: DRA-CDI-001's to judge.
                Outcome::skip(format!("the claim's CDI IDs ({}) have no edits to look in", ids.join(", ")))
            } else if gone.is_empty() {
                Outcome::pass("both configs reached the CDI edits")
            } else {
                fail(
                    &rules::OPAQUE_CONFIG,
                    "NodePrepareResources (a claim with opaque config for the driver)",
                    format!(
                        "prepared without error, but the CDI edits of its devices ({}) carry nothing of {} config: {}",
                        ids.join(", "),
                        gone.join(" or "),
                        if edits.is_empty() { "(no spec defines them)".to_string() } else { edits.replace('\n', " ") }
                    ),
                )
            }
        }
    };
    let removed = s.remove_pod(POD).await;
    s.engine_claims.truncate(kept);
    for c in &claims {
        let _ = std::fs::remove_file(s.tree.manifests.join(format!("{c}.yaml")));
    }
    let _ = std::fs::remove_file(s.tree.manifests.join("config-class.yaml"));
    // A prepared pod must unprepare (a refused claim has nothing to unprepare).
    match (prepared_ok, removed) {
        (true, Err(o)) if outcome.verdict == Verdict::Pass => o,
        _ => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> SpecFile {
        SpecFile { name: name.into(), text: text.into(), ids: vec![], problem: None }
    }

    #[test]
    fn the_edits_of_the_claims_devices_are_read_from_json_and_yaml_specs() {
        let json = file(
            "a.json",
            r#"{"cdiVersion":"0.6.0","kind":"v.example/c","devices":[{"name":"d0","containerEdits":{"env":["admin_dpctl_class=class-1"]}},{"name":"other","containerEdits":{"env":["X=claim-1"]}}]}"#,
        );
        let yaml = file(
            "b.yaml",
            "cdiVersion: 0.6.0\nkind: w.example/c\ndevices:\n- name: d1\n  containerEdits: {env: [user_dpctl_claim=claim-1]}\n",
        );
        let ids = vec!["v.example/c=d0".to_string(), "w.example/c=d1".to_string()];
        let e = edits_of(&ids, &[json.clone(), yaml]);
        assert!(missing(&e, "class-1", "claim-1").is_empty(), "{e}");
        // Another device's edits do not count for the claim.
        let e = edits_of(&ids[..1], &[json]);
        assert_eq!(missing(&e, "class-1", "claim-1"), ["the claim's (FromClaim)"]);
        assert_eq!(missing("", "class-1", "claim-1").len(), 2);
    }
}
