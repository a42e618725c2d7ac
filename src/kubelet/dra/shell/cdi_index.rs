//! Which CDI IDs the spec directories define, each spec file read once per
//! version of it. Checking a prepared claim's CDI IDs used to read and parse
//! every spec in the directories for every claim: a node whose drivers write
//! a spec per claim made N prepares cost N² file reads (1,000 claims on 100
//! drivers: half a million, most of `bench kubelet --dra`'s time).
//!
//! A file is known by its path and stamp (inode, length, modification time);
//! one that is new or whose stamp changed is parsed again. An ID found in the
//! index is trusted once the file that defines it is stamped unchanged; an ID
//! not found makes the files inotify names as changed since the last look
//! read again (a driver writes a spec per claim: the usual case, without a
//! listing of the directories — a readdir of 400 specs was a third of a
//! prepare's own time); one still not found makes the directories listed and
//! every known file stamped again, so a spec rewritten in place is never
//! missed: the answer is always what a fresh read would give (up to a
//! rewrite that keeps inode, length and modification time). Without inotify
//! (or when its queue overflowed, or a directory is missing) the directories
//! are listed instead.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::kubelet::dirwatch::NameWatch;

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
    /// The directories' changes since the last look (None: no inotify,
    /// or not made yet, or made for other directories).
    watch: Option<NameWatch>,
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

/// Whether `name` is a spec file's (`.json`, `.yaml`, `.yml`).
fn is_spec(name: &std::ffi::OsStr) -> bool {
    let b = name.as_encoded_bytes();
    [&b".json"[..], b".yaml", b".yml"].iter().any(|x| b.ends_with(x))
}

/// The spec files in those of `dirs` whose index `only` takes, now.
fn listed(dirs: &[PathBuf], only: impl Fn(usize) -> bool) -> HashSet<Key> {
    let mut out = HashSet::new();
    for (i, d) in dirs.iter().enumerate().filter(|(i, _)| only(*i)) {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            if is_spec(&name) {
                out.insert((i, name));
            }
        }
    }
    out
}

impl Index {
    /// The directories `only` takes, listed: files gone forgotten, new ones read.
    fn relist(&mut self, dirs: &[PathBuf], only: impl Fn(usize) -> bool + Copy) {
        let now = listed(dirs, only);
        let gone: Vec<Key> = self.files.keys().filter(|k| only(k.0) && !now.contains(*k)).cloned().collect();
        for k in &gone {
            self.remove(k);
        }
        for k in now {
            if !self.files.contains_key(&k) {
                let spec = read(&key_path(dirs, &k));
                self.put(k, spec);
            }
        }
    }

    /// Catch up with what changed in `dirs` since the last look: the files
    /// inotify names read again (or forgotten, when gone), the directories
    /// it cannot vouch for listed. Without a watch, every directory listed.
    fn catch_up(&mut self, dirs: &[PathBuf]) {
        if self.watch.as_ref().is_none_or(|w| !w.dirs().eq(dirs.iter().map(PathBuf::as_path))) {
            // Made before the listing it replaces: nothing changes unseen in between.
            self.watch = NameWatch::new(dirs);
        }
        let Some(w) = self.watch.as_mut() else {
            self.relist(dirs, |_| true);
            return;
        };
        let seen = w.read();
        let mut names: Vec<Key> =
            seen.names.into_iter().filter(|(i, n)| !seen.lost.contains(i) && is_spec(n)).collect();
        names.sort_unstable();
        names.dedup();
        for k in names {
            let p = key_path(dirs, &k);
            if std::fs::symlink_metadata(&p).is_ok() {
                self.put(k, read(&p));
            } else {
                self.remove(&k);
            }
        }
        if !seen.lost.is_empty() {
            self.relist(dirs, |i| seen.lost.contains(&i));
        }
    }
}

/// The path of spec file `k` of `dirs`.
fn key_path(dirs: &[PathBuf], (i, name): &Key) -> PathBuf {
    dirs.get(*i).map(|d| d.join(name)).unwrap_or_default()
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
        let path = |k: &Key| key_path(dirs, k);
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
        // Something not found (or changed): the files changed since the
        // last look read (a driver writes a spec per claim: the usual case).
        ix.catch_up(dirs);
        missing.retain(|id| !trusted(&ix, id));
        if missing.is_empty() {
            return missing;
        }
        // Still not found: the directories listed, every known file stamped
        // again, a changed one read.
        ix.relist(dirs, |_| true);
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

    /// Across two directories, one missing at first: specs renamed in and
    /// out, a directory made later and one removed — the index (catching
    /// up from inotify's names) answers as a fresh read at every step.
    #[test]
    fn the_index_catches_up_with_renames_and_directories_that_come_and_go() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        let dirs = [a.clone(), b.clone()];
        let ix = CdiIndex::default();
        let ask = |ids: &[&str]| {
            let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            let (got, fresh) = (ix.unresolved(&dirs, &ids), unresolved_cdi(&dirs, &ids));
            assert_eq!(got, fresh, "the index and a fresh read disagree on {ids:?}");
            got
        };
        let all = ["k.x/c=a", "k.x/c=b", "k.x/c=c"];
        assert_eq!(ask(&all), all);
        // Written under another name, renamed in (as drivers write specs).
        std::fs::write(a.join(".tmp"), spec("k.x/c", &["a"])).unwrap();
        std::fs::rename(a.join(".tmp"), a.join("a.json")).unwrap();
        assert_eq!(ask(&all), ["k.x/c=b", "k.x/c=c"]);
        // The second directory made, with a spec in it.
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("b.json"), spec("k.x/c", &["b"])).unwrap();
        assert_eq!(ask(&all), ["k.x/c=c"]);
        // Renamed out of the directory (still a file, no longer a spec of it).
        std::fs::rename(a.join("a.json"), root.path().join("a.json")).unwrap();
        assert_eq!(ask(&all), ["k.x/c=a", "k.x/c=c"]);
        // A file not named as a spec defines nothing; one renamed to a spec's name does.
        std::fs::write(a.join("c.txt"), spec("k.x/c", &["c"])).unwrap();
        assert_eq!(ask(&all), ["k.x/c=a", "k.x/c=c"]);
        std::fs::rename(a.join("c.txt"), a.join("c.json")).unwrap();
        assert_eq!(ask(&all), ["k.x/c=a"]);
        // The second directory removed, then made again with another spec.
        std::fs::remove_dir_all(&b).unwrap();
        assert_eq!(ask(&all), ["k.x/c=a", "k.x/c=b"]);
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("a.yaml"), "cdiVersion: 0.6.0\nkind: k.x/c\ndevices:\n- name: a\n").unwrap();
        assert_eq!(ask(&all), ["k.x/c=b"]);
        // Many specs at once, each found.
        for i in 0..300 {
            std::fs::write(a.join(format!("n{i}.json")), spec("k.x/n", &[&format!("d{i}")])).unwrap();
        }
        let many: Vec<String> = (0..300).map(|i| format!("k.x/n=d{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(ask(&many).is_empty());
    }
}
