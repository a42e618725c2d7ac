//! Which CDI IDs the spec directories define, each spec file read once per
//! version of it. Checking a prepared claim's CDI IDs used to read and parse
//! every spec in the directories for every claim: a node whose drivers write
//! a spec per claim made N prepares cost N² file reads (1,000 claims on 100
//! drivers: half a million, most of `bench kubelet --dra`'s time).
//!
//! A file is known by its path and stamp (inode, length, modification time);
//! one that is new or whose stamp changed is parsed again. An ID found in the
//! index is trusted once the file that defines it is stamped unchanged; an ID
//! not found makes every known file stamped again, so a spec rewritten in
//! place is never missed: the answer is always what a fresh read would give
//! (up to a rewrite that keeps inode, length and modification time).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What identifies one version of a spec file.
type Stamp = (u64, u64, i64, i64);

struct Spec {
    stamp: Option<Stamp>,
    ids: Vec<String>,
}

/// A spec file: the index of its directory, its name (compared as bytes:
/// a `PathBuf` key compares component by component, which dominated a
/// profile of 1,000 files).
type Key = (usize, OsString);

/// The spec files of the CDI directories, the IDs each defines, and for
/// each ID the files defining it (a lookup, not a walk over every file).
#[derive(Default)]
pub struct CdiIndex {
    state: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    files: HashMap<Key, Spec>,
    by_id: HashMap<String, HashSet<Key>>,
}

impl Index {
    fn put(&mut self, k: Key, spec: Spec) {
        self.remove(&k);
        for id in &spec.ids {
            self.by_id.entry(id.clone()).or_default().insert(k.clone());
        }
        self.files.insert(k, spec);
    }

    fn remove(&mut self, k: &Key) {
        let Some(old) = self.files.remove(k) else { return };
        for id in &old.ids {
            if let Some(keys) = self.by_id.get_mut(id) {
                keys.remove(k);
                if keys.is_empty() {
                    self.by_id.remove(id);
                }
            }
        }
    }
}

fn stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// The IDs a spec file defines (none when the runtime would refuse it, or it
/// cannot be read), and the stamp it was read at.
fn read(p: &Path) -> Spec {
    let stamp = stamp(p);
    let yaml = p.extension().is_some_and(|x| x != "json");
    let ids = crate::core::limits::read_file(p, 1 << 20, "CDI spec")
        .ok()
        // A spec the runtime refuses defines nothing (the rulebook says what a spec is).
        .and_then(|text| crate::protocol::cdi::parse_spec(&text, yaml).ok())
        .unwrap_or_default();
    Spec { stamp, ids }
}

/// The spec files in `dirs` now (`.json`, `.yaml`, `.yml`).
fn listed(dirs: &[PathBuf]) -> HashSet<Key> {
    let mut out = HashSet::new();
    for (i, d) in dirs.iter().enumerate() {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            let b = name.as_encoded_bytes();
            if [&b".json"[..], b".yaml", b".yml"].iter().any(|x| b.ends_with(x)) {
                out.insert((i, name));
            }
        }
    }
    out
}

impl CdiIndex {
    /// The IDs of `ids` that no spec file in `dirs` defines (a CDI ID is
    /// `KIND=NAME`, defined by a spec whose `kind` is KIND listing a device
    /// NAME).
    pub fn unresolved(&self, dirs: &[PathBuf], ids: &[String]) -> Vec<String> {
        if ids.is_empty() {
            return Vec::new();
        }
        let mut ix = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let path = |(i, name): &Key| dirs.get(*i).map(|d| d.join(name)).unwrap_or_default();
        // Trusted: an ID a file defines that is still the version read.
        let trusted = |ix: &Index, id: &String| {
            ix.by_id.get(id).is_some_and(|keys| {
                keys.iter().any(|k| ix.files.get(k).is_some_and(|s| s.stamp.is_some() && s.stamp == stamp(&path(k))))
            })
        };
        let mut missing: Vec<String> = ids.iter().filter(|id| !trusted(&ix, id)).cloned().collect();
        if missing.is_empty() {
            return missing;
        }
        // Something not found (or changed): the files there are now, each
        // new one read (a driver writes a spec per claim: the usual case).
        let now = listed(dirs);
        let gone: Vec<Key> = ix.files.keys().filter(|k| !now.contains(*k)).cloned().collect();
        for k in &gone {
            ix.remove(k);
        }
        for k in now {
            if !ix.files.contains_key(&k) {
                let spec = read(&path(&k));
                ix.put(k, spec);
            }
        }
        missing.retain(|id| !trusted(&ix, id));
        if missing.is_empty() {
            return missing;
        }
        // Still not found: every known file stamped again, a changed one read.
        let keys: Vec<Key> = ix.files.keys().cloned().collect();
        for k in keys {
            let p = path(&k);
            let fresh = ix.files.get(&k).is_some_and(|s| s.stamp.is_some() && s.stamp == stamp(&p));
            if !fresh {
                ix.put(k, read(&p));
            }
        }
        missing.retain(|id| !ix.by_id.contains_key(id));
        missing
    }
}

/// [`CdiIndex::unresolved`] on a fresh index: every spec read.
pub fn unresolved_cdi(dirs: &[PathBuf], ids: &[String]) -> Vec<String> {
    CdiIndex::default().unresolved(dirs, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str, names: &[&str]) -> String {
        let devices: Vec<String> = names.iter().map(|n| format!(r#"{{"name":"{n}","containerEdits":{{}}}}"#)).collect();
        format!(r#"{{"cdiVersion":"0.6.0","kind":"{kind}","devices":[{}]}}"#, devices.join(","))
    }

    #[test]
    fn the_index_answers_as_a_fresh_read_across_new_rewritten_and_deleted_specs() {
        let d = tempfile::tempdir().unwrap();
        let dirs = [d.path().to_path_buf()];
        let ix = CdiIndex::default();
        let ask = |ids: &[&str]| {
            let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            let (got, fresh) = (ix.unresolved(&dirs, &ids), unresolved_cdi(&dirs, &ids));
            assert_eq!(got, fresh, "the index and a fresh read disagree on {ids:?}");
            got
        };
        std::fs::write(d.path().join("one.json"), spec("k.x/c", &["a"])).unwrap();
        assert_eq!(ask(&["k.x/c=a", "k.x/c=b"]), ["k.x/c=b"]);
        // A new file is read.
        std::fs::write(d.path().join("two.json"), spec("k.x/c", &["b"])).unwrap();
        assert!(ask(&["k.x/c=a", "k.x/c=b"]).is_empty());
        // A file rewritten in place (same inode) no longer defining `a`.
        std::fs::write(d.path().join("one.json"), spec("k.x/c", &["zzzz"])).unwrap();
        assert_eq!(ask(&["k.x/c=a"]), ["k.x/c=a"]);
        // A deleted file defines nothing.
        std::fs::remove_file(d.path().join("two.json")).unwrap();
        assert_eq!(ask(&["k.x/c=b"]), ["k.x/c=b"]);
        // A file that turns up defining a missing ID is found.
        std::fs::write(d.path().join("three.yaml"), "cdiVersion: 0.6.0\nkind: k.x/c\ndevices:\n- name: b\n").unwrap();
        assert!(ask(&["k.x/c=b"]).is_empty());
    }
}
