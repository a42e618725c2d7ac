//! Whether CDI device names resolve to a spec on this node, or the runtime
//! fails the container: `probe` checks an Allocate answer's names, `dra
//! probe` and `dra prepare` a NodePrepareResources answer's IDs. The spec
//! directories are the caller's (given or the node's defaults).

use crate::render::checks::Status;
use std::path::PathBuf;

/// What became of the names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Every name resolves (none given counts too), in this many specs.
    Resolved {
        /// Specs read.
        specs: usize,
    },
    /// Some do not resolve, but no directory was named and none of the
    /// default ones exists: not a node with CDI specs (a workstation).
    NoSpecDirectory {
        /// The directories looked in.
        dirs: Vec<PathBuf>,
    },
    /// These names do not resolve: one `name: why` each.
    Unresolvable(Vec<String>),
}

/// Resolve `names` in the spec directories `dirs`; `named` says whether
/// the user gave the directories (then a missing one is no excuse).
pub fn resolve(dirs: &[PathBuf], named: bool, names: &[String]) -> Resolution {
    let (reg, bad) = crate::doctor::cdi::check(dirs, names);
    if bad.is_empty() {
        Resolution::Resolved { specs: reg.specs }
    } else if !named && !dirs.iter().any(|d| d.is_dir()) {
        Resolution::NoSpecDirectory { dirs: dirs.to_vec() }
    } else {
        Resolution::Unresolvable(bad)
    }
}

impl Resolution {
    /// The directories looked in, for a message: `a, b`.
    pub fn dirs_text(dirs: &[PathBuf]) -> String {
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    }

    /// The `cdi` row of a probe report for `names` looked up in `dirs` (the
    /// CDI search path, named in the row so that a reader sees where).
    pub fn check(&self, names: &[String], dirs: &[PathBuf]) -> (Status, String) {
        match self {
            Resolution::Resolved { specs } => (
                Status::Pass,
                format!("{} resolve(s) in {specs} spec(s) (CDI search path: {})", names.join(","), Self::dirs_text(dirs)),
            ),
            // Not a node with CDI specs: say so, do not fail.
            Resolution::NoSpecDirectory { dirs } => (
                Status::Warn,
                format!(
                    "{} cannot be resolved here: no CDI spec directory ({}); on a node this fails the container (pass --cdi-spec-dir)",
                    names.join(","),
                    Self::dirs_text(dirs)
                ),
            ),
            Resolution::Unresolvable(bad) => (
                Status::Fail,
                format!(
                    "unresolvable CDI devices (the runtime fails the container): {} (CDI search path: {})",
                    bad.join("; "),
                    Self::dirs_text(dirs)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_or_say_why_and_a_workstation_only_warns() {
        let d = tempfile::tempdir().expect("tempdir");
        let spec =
            r#"{"cdiVersion":"0.6.0","kind":"vendor.example/gpu","devices":[{"name":"gpu0","containerEdits":{}}]}"#;
        std::fs::write(d.path().join("gpu.json"), spec).expect("write");
        let dirs = vec![d.path().to_path_buf()];
        let ok = vec!["vendor.example/gpu=gpu0".to_string()];
        assert_eq!(resolve(&dirs, true, &ok), Resolution::Resolved { specs: 1 });
        assert_eq!(
            resolve(&dirs, true, &ok).check(&ok, &dirs),
            (
                Status::Pass,
                format!("vendor.example/gpu=gpu0 resolve(s) in 1 spec(s) (CDI search path: {})", d.path().display())
            )
        );
        let bad = vec!["vendor.example/gpu=gpu9".to_string()];
        let r = resolve(&dirs, false, &bad);
        assert!(
            matches!(&r, Resolution::Unresolvable(b) if b.len() == 1 && b[0].starts_with("vendor.example/gpu=gpu9: ")),
            "{r:?}"
        );
        let (st, text) = r.check(&bad, &dirs);
        assert_eq!(st, Status::Fail);
        assert!(text.ends_with(&format!("(CDI search path: {})", d.path().display())), "{text}");
        // No spec directory here and none named: a warning naming where it looked.
        let none = vec![d.path().join("absent")];
        let r = resolve(&none, false, &bad);
        assert_eq!(r, Resolution::NoSpecDirectory { dirs: none.clone() });
        let (st, text) = r.check(&bad, &none);
        assert_eq!(st, Status::Warn);
        assert!(text.contains("absent") && text.contains("--cdi-spec-dir"), "{text}");
        // Named directories that do not exist are the user's mistake: a failure.
        assert!(matches!(resolve(&none, true, &bad), Resolution::Unresolvable(_)));
    }
}
