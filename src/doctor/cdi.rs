//! CDI (Container Device Interface) name resolution, as a container runtime
//! does it: every `*.json`, `*.yaml` and `*.yml` spec in the spec
//! directories defines `<kind>=<device name>`; a plugin's Allocate answer
//! naming a device no spec defines makes the runtime fail the container
//! with "unresolvable CDI devices".

use serde::Serialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The devices the spec directories define, and what could not be read.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registry {
    /// The directories searched, in order.
    pub dirs: Vec<PathBuf>,
    /// The search path in words: the directories and where they came from.
    pub searched: String,
    /// Spec files read.
    pub specs: usize,
    /// Fully qualified device names (`vendor.example/class=name`).
    pub devices: BTreeSet<String>,
    /// Spec files that do not parse, with why.
    pub invalid: Vec<(PathBuf, String)>,
    /// Directories that exist but cannot be read (path, why, permission denied).
    pub unreadable: Vec<(PathBuf, String, bool)>,
}

pub use crate::protocol::cdi::parse_spec;

/// Read every spec in `dirs` (a missing directory is no error).
pub fn load(dirs: &[PathBuf]) -> Registry {
    let mut r = Registry { dirs: dirs.to_vec(), ..Default::default() };
    for dir in dirs {
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                let denied = e.kind() == std::io::ErrorKind::PermissionDenied;
                r.unreadable.push((dir.clone(), e.to_string(), denied));
                continue;
            }
        };
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let yaml = match f.extension().and_then(|e| e.to_str()) {
                Some("json") => false,
                Some("yaml" | "yml") => true,
                _ => continue,
            };
            if !f.is_file() {
                continue;
            }
            // Specs are small; a huge file is not a spec.
            let text = match std::fs::metadata(&f) {
                Ok(m) if m.len() > 16 << 20 => Err("larger than 16 MiB".to_string()),
                _ => std::fs::read_to_string(&f).map_err(|e| e.to_string()),
            };
            match text.and_then(|t| parse_spec(&t, yaml).map_err(|e| e.to_string())) {
                Ok(names) => {
                    r.specs += 1;
                    r.devices.extend(names);
                }
                Err(e) => r.invalid.push((f, e)),
            }
        }
    }
    r
}

/// Why a CDI device name cannot be used, or `None` when it resolves.
pub fn unresolvable(r: &Registry, name: &str) -> Option<String> {
    if let Some(v) = crate::protocol::deviceplugin::cdi_name(name) {
        return Some(v.to_string());
    }
    let (kind, dev) = name.split_once('=')?;
    if r.devices.contains(name) {
        return None;
    }
    let dirs: Vec<String> = r.dirs.iter().map(|d| d.display().to_string()).collect();
    let same_kind: Vec<&str> =
        r.devices.iter().filter(|d| d.starts_with(&format!("{kind}="))).map(String::as_str).collect();
    Some(if same_kind.is_empty() {
        format!("no CDI spec of kind {kind} in {} ({} spec(s) read)", dirs.join(", "), r.specs)
    } else {
        format!(
            "the {kind} spec(s) define no device {dev:?} (they define {})",
            same_kind.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

pub use crate::protocol::cdi::names as names_in;

/// Check names against the spec directories: one line per name that does not resolve.
pub fn check(dirs: &[PathBuf], names: &[String]) -> (Registry, Vec<String>) {
    let r = load(dirs);
    let bad = names.iter().filter_map(|n| unresolvable(&r, n).map(|why| format!("{n}: {why}"))).collect();
    (r, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_against_every_spec_dir() {
        let d = tempfile::tempdir().unwrap();
        let (etc, run) = (d.path().join("etc"), d.path().join("run"));
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(etc.join("foo.yaml"), "cdiVersion: 0.6.0\nkind: vendor.example/foo\ndevices:\n- name: foo-0\n")
            .unwrap();
        std::fs::write(
            run.join("bar.json"),
            r#"{"cdiVersion":"0.6.0","kind":"vendor.example/bar","devices":[{"name":"b"}]}"#,
        )
        .unwrap();
        std::fs::write(run.join("broken.json"), "{").unwrap();
        std::fs::write(run.join("README"), "not a spec").unwrap();
        let dirs = vec![etc, run.clone(), d.path().join("missing")];
        let r = load(&dirs);
        assert_eq!(r.specs, 2);
        assert_eq!(r.invalid.len(), 1);
        assert_eq!(r.invalid[0].0, run.join("broken.json"));
        assert_eq!(unresolvable(&r, "vendor.example/foo=foo-0"), None);
        assert_eq!(unresolvable(&r, "vendor.example/bar=b"), None);
        assert!(unresolvable(&r, "vendor.example/foo=foo-9").unwrap().contains("define no device \"foo-9\""));
        assert!(unresolvable(&r, "other.example/x=1").unwrap().contains("no CDI spec of kind other.example/x"));
        assert!(unresolvable(&r, "garbage").unwrap().contains("not a qualified CDI name"));
    }
}
