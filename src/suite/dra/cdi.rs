//! DRA-CDI-002's judgement: what prepare created for a claim is gone after
//! unprepare. A driver may keep specs it shares between claims — a common
//! spec written at start and returned with every claim (the example
//! driver's `CreateCommonSpecFile`), or a static spec per device (NVIDIA's
//! `CreateStandardDeviceSpecFile`) — so only a claim's own leftovers fail:
//! a spec file that names the claim's UID, or a CDI ID that prepare newly
//! defined and returned for that claim alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One spec file in the CDI directory: its file name, text and the IDs it defines.
#[derive(Debug, Clone)]
pub(super) struct SpecFile {
    pub name: String,
    pub text: String,
    pub ids: Vec<String>,
    /// Why the CDI library refuses it, if it does.
    pub problem: Option<String>,
}

/// The spec files in `dir` (JSON or YAML; unreadable ones are left out).
pub(super) fn scan(dir: &Path) -> Vec<SpecFile> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let ext = p.extension().map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
        if !["json", "yaml", "yml"].contains(&ext.as_str()) {
            continue;
        }
        let Ok(text) = crate::core::limits::read_file(&p, 1 << 20, "CDI spec") else { continue };
        let ids = crate::protocol::cdi::parse_spec(&text, ext != "json").unwrap_or_default();
        let problem = crate::protocol::cdi::spec_problem(&text, ext != "json");
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        out.push(SpecFile { name, text, ids, problem });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every CDI ID the files define.
pub(super) fn defined(files: &[SpecFile]) -> BTreeSet<String> {
    files.iter().flat_map(|f| f.ids.iter().cloned()).collect()
}

/// What is left of the claims' own CDI specs after unprepare: `claims` are
/// (UID, the CDI IDs returned for it), `before` the IDs defined before the
/// claims were prepared, `after` the spec files now.
pub(super) fn leftovers(
    claims: &[(String, Vec<String>)],
    before: &BTreeSet<String>,
    after: &[SpecFile],
) -> Vec<String> {
    let mut out = Vec::new();
    for f in after {
        let named: Vec<&str> = claims
            .iter()
            .map(|(u, _)| u.as_str())
            .filter(|u| !u.is_empty() && (f.name.contains(u) || f.text.contains(u)))
            .collect();
        if !named.is_empty() {
            out.push(format!("spec file {} names claim UID {}", f.name, named.join(", ")));
        }
    }
    // How many claims each ID was returned for: one that several claims share is not one claim's.
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, ids) in claims {
        for id in ids.iter().collect::<BTreeSet<_>>() {
            *count.entry(id.as_str()).or_default() += 1;
        }
    }
    let now = defined(after);
    for (id, n) in count {
        if n == 1 && !before.contains(id) && now.contains(id) {
            out.push(format!("{id} (created by prepare for one claim) still defined"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, kind: &str, devices: &[&str], extra: &str) -> SpecFile {
        SpecFile {
            name: name.into(),
            text: format!("{{\"cdiVersion\":\"0.6.0\",\"kind\":\"{kind}\"{extra}}}"),
            ids: devices.iter().map(|d| format!("{kind}={d}")).collect(),
            problem: None,
        }
    }

    fn claims() -> Vec<(String, Vec<String>)> {
        vec![
            ("u-1".into(), vec!["k8s.gpu.example.com/gpu=common".into(), "k8s.gpu.example.com/gpu=u-1-gpu-0".into()]),
            ("u-2".into(), vec!["k8s.gpu.example.com/gpu=common".into(), "k8s.gpu.example.com/gpu=u-2-gpu-1".into()]),
        ]
    }

    #[test]
    fn a_common_spec_written_at_start_and_returned_with_every_claim_may_stay() {
        let common = spec("k8s.gpu.example.com-common.json", "k8s.gpu.example.com/gpu", &["common"], "");
        let before = defined(std::slice::from_ref(&common));
        assert!(leftovers(&claims(), &before, std::slice::from_ref(&common)).is_empty());
        // Written lazily by the first prepare: shared by both claims, still not one claim's.
        assert!(leftovers(&claims(), &BTreeSet::new(), std::slice::from_ref(&common)).is_empty());
    }

    #[test]
    fn static_per_device_specs_written_at_start_may_stay() {
        let dev = spec("nvidia.json", "nvidia.com/gpu", &["gpu-0", "gpu-1"], "");
        let claims = vec![("u-1".to_string(), vec!["nvidia.com/gpu=gpu-0".to_string()])];
        let before = defined(std::slice::from_ref(&dev));
        assert!(leftovers(&claims, &before, &[dev]).is_empty());
    }

    #[test]
    fn a_claims_own_spec_left_behind_fails_by_uid_or_by_its_ids() {
        let common = spec("common.json", "k8s.gpu.example.com/gpu", &["common"], "");
        let before = defined(std::slice::from_ref(&common));
        let own = spec("claim.json", "k8s.gpu.example.com/gpu", &["u-1-gpu-0"], "");
        let l = leftovers(&claims(), &before, &[common.clone(), own]);
        assert_eq!(l, ["k8s.gpu.example.com/gpu=u-1-gpu-0 (created by prepare for one claim) still defined"]);
        // A file that names the claim's UID (in its name or its text), whatever IDs it defines.
        let named = spec("k8s.gpu.example.com-claim_u-2.json", "k8s.gpu.example.com/gpu", &["x"], "");
        let l = leftovers(&claims(), &before, &[common, named]);
        assert_eq!(l, ["spec file k8s.gpu.example.com-claim_u-2.json names claim UID u-2"]);
    }
}
