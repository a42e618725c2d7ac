//! Which commit a source tree is: shared by `build.rs` (which includes this
//! file) and the tests. A source tree without `.git` — an unpacked tarball,
//! even one unpacked inside some other repository — is `unknown`, never the
//! commit of a surrounding checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` shows when the commit is not known.
pub const UNKNOWN: &str = "unknown";

/// The commit to embed: a non-empty `override_commit` (the release script's
/// `DPCTL_GIT_COMMIT`) wins, then the checkout's commit, then [`UNKNOWN`].
pub fn resolve(override_commit: Option<&str>, checkout: Option<&str>) -> String {
    let pick = |s: Option<&str>| s.map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    pick(override_commit).or_else(|| pick(checkout)).unwrap_or_else(|| UNKNOWN.to_owned())
}

/// A git checkout's commit (12 hex digits) and the files that change when its
/// HEAD moves (for `cargo:rerun-if-changed`). `None` unless `dir` is the top
/// level of a checkout and git runs.
pub fn git_commit(dir: &Path) -> Option<(String, Vec<PathBuf>)> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
        if !out.status.success() {
            return None;
        }
        let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (!s.is_empty()).then_some(s)
    };
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watch = Vec::new();
    let mut names = vec![String::from("HEAD"), String::from("logs/HEAD"), String::from("packed-refs")];
    names.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in names {
        if let Some(p) = git(&["rev-parse", "--git-path", &name]) {
            let p = dir.join(p);
            if p.exists() {
                watch.push(p);
            }
        }
    }
    Some((commit, watch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_wins_then_checkout_then_unknown() {
        assert_eq!(resolve(Some("abc-dirty"), Some("def")), "abc-dirty");
        assert_eq!(resolve(Some("  "), Some("def\n")), "def");
        assert_eq!(resolve(None, None), UNKNOWN);
        assert_eq!(resolve(Some(""), None), UNKNOWN);
    }

    #[test]
    fn a_tree_without_git_is_unknown_even_inside_a_checkout() {
        // A directory inside this repository (target/ exists once cargo has
        // built anything) is not the top of a checkout: no commit borrowed.
        let inside = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        assert_eq!(git_commit(&inside), None);
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(git_commit(outside.path()), None);
    }

    #[test]
    fn a_checkout_reports_its_head() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let Ok(out) = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(root).output() else {
            return; // no git on this machine: nothing to compare with
        };
        if !out.status.success() {
            return; // built from a tarball: covered by the test above
        }
        let head = String::from_utf8(out.stdout).unwrap();
        let (commit, watch) = git_commit(root).expect("the checkout's commit");
        assert_eq!(commit.len(), 12);
        assert!(head.trim().starts_with(&commit), "{commit} vs {head}");
        assert!(watch.iter().any(|p| p.ends_with("HEAD")), "{watch:?}");
    }
}
