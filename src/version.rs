//! What `dpctl --version` prints: the crate version, the git commit and the
//! target triple, fixed at build time by `build.rs` (so a binary copied out of
//! a release archive, far from any checkout, still knows where it came from).

pub mod source;

/// The git commit the binary was built from: 12 hex digits (with `-dirty`
/// when the release script built from a modified tree), or `unknown` when
/// built from a source tree without `.git`.
pub const COMMIT: &str = env!("DPCTL_GIT_COMMIT");

/// The target triple the binary was built for, e.g. `x86_64-unknown-linux-musl`.
pub const TARGET: &str = env!("DPCTL_TARGET");

/// The one-line version: `0.1.0 (commit 1a2b3c4d5e6f, target x86_64-unknown-linux-musl)`.
pub const LONG: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("DPCTL_GIT_COMMIT"), ", target ", env!("DPCTL_TARGET"), ")");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_version_names_version_commit_and_target() {
        assert!(LONG.starts_with(env!("CARGO_PKG_VERSION")));
        assert!(LONG.contains(&format!("commit {COMMIT},")), "{LONG}");
        assert!(LONG.ends_with(&format!("target {TARGET})")), "{LONG}");
        assert!(!COMMIT.is_empty() && !TARGET.is_empty());
        // The tests run on the host they were built for.
        assert!(TARGET.starts_with(std::env::consts::ARCH), "{TARGET}");
    }
}
