//! A directory's changes as events (inotify), as the kubelet sees its
//! static-pod directory (its file source is woken by inotify:
//! pkg/kubelet/config/file_linux.go). The manifest loop still rescans on
//! its period; a change only wakes it early, so what it decides is the
//! same, just sooner. Where inotify is not available the watch is absent
//! and the period alone applies.
//!
//! The plugin watcher's registry is watched too, with care: a socket
//! exists from bind(), before its server listens, so a scan a creation woke
//! dials only sockets that already accept a connection and leaves the
//! others to the next periodic scan (upstream's plugin watcher, on
//! fsnotify, registers at its reconciler's next pass:
//! pkg/kubelet/pluginmanager/pluginwatcher/plugin_watcher.go).

use std::path::Path;

/// What to be woken for.
#[derive(Debug, Clone, Copy)]
pub enum Changes {
    /// Files written (and closed), moved in or out, deleted: a manifest
    /// directory (a file being written is not announced until it is closed).
    Files,
    /// Entries created, moved in or out, deleted: a socket directory.
    Entries,
}

/// An inotify watch on one directory (not its subdirectories).
pub struct DirWatch {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl DirWatch {
    /// Watch `dir` for `changes`; None when inotify is unavailable (the
    /// caller's period then applies alone).
    pub fn new(dir: &Path, changes: Changes) -> Option<DirWatch> {
        #[cfg(target_os = "linux")]
        {
            linux::watch(dir, changes).map(|fd| DirWatch { fd })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (dir, changes);
            None
        }
    }

    /// Wait for the next change (several that came together count once).
    /// A watch that fails stays pending for ever: the caller's period applies.
    pub async fn changed(&mut self) {
        #[cfg(target_os = "linux")]
        loop {
            let Ok(mut ready) = self.fd.readable().await else {
                return std::future::pending().await;
            };
            match ready.try_io(|fd| linux::drain(fd.get_ref())) {
                Ok(Ok(true)) => return,
                Ok(Ok(false)) | Err(_) => continue,
                Ok(Err(_)) => return std::future::pending().await,
            }
        }
        #[cfg(not(target_os = "linux"))]
        std::future::pending().await
    }
}

/// Await `w`'s next change, or never when there is no watch.
pub async fn changed(w: &mut Option<DirWatch>) {
    match w {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

/// What a [`NameWatch`] saw since it was last read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// (index of the directory, entry name) of each entry that changed:
    /// written and closed, created, moved in or out, deleted — what it is
    /// now is for the caller to look at. Repeats are kept.
    pub names: Vec<(usize, std::ffi::OsString)>,
    /// Directories whose changes may have been missed (the queue
    /// overflowed, or the directory went or was moved): the caller lists
    /// them whole.
    pub lost: Vec<usize>,
}

/// An inotify watch on several directories read without waiting, by
/// entry name: which files changed, so that a caller need not list the
/// directories to find out. A directory that cannot be watched (it does
/// not exist yet) is tried again at each [`NameWatch::read`] and reported
/// lost until it is watched.
pub struct NameWatch {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    /// Per directory: its path and watch descriptor, once watched.
    dirs: Vec<(std::path::PathBuf, Option<i32>)>,
}

impl NameWatch {
    /// A watch on `dirs` (an index into it names each in [`Named`]); None
    /// when inotify is unavailable. Every directory starts lost: what is
    /// there before the watch is for the caller to list.
    pub fn new(dirs: &[std::path::PathBuf]) -> Option<NameWatch> {
        #[cfg(target_os = "linux")]
        {
            let fd = linux::init()?;
            Some(NameWatch { fd, dirs: dirs.iter().map(|d| (d.clone(), None)).collect() })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dirs;
            None
        }
    }

    /// The directories watched, in order.
    pub fn dirs(&self) -> impl Iterator<Item = &std::path::Path> {
        self.dirs.iter().map(|(d, _)| d.as_path())
    }

    /// What changed since the last read (or since the watch began).
    pub fn read(&mut self) -> Named {
        let mut out = Named::default();
        #[cfg(target_os = "linux")]
        {
            // Directories not watched yet: watched from now, listed whole by the caller.
            for (i, (dir, wd)) in self.dirs.iter_mut().enumerate() {
                if wd.is_none() {
                    *wd = linux::add(&self.fd, dir);
                    out.lost.push(i);
                }
            }
            if linux::read_named(&self.fd, |wd, mask, name| {
                let Some(i) = self.dirs.iter().position(|(_, w)| *w == Some(wd)) else { return };
                if mask & (libc::IN_IGNORED | libc::IN_MOVE_SELF) != 0 {
                    // Gone or moved: watched again (at its path) at the next read.
                    if mask & libc::IN_MOVE_SELF != 0 {
                        linux::remove(&self.fd, wd);
                    }
                    self.dirs[i].1 = None;
                    out.lost.push(i);
                } else if !name.is_empty() {
                    out.names.push((i, name.to_os_string()));
                }
            })
            .is_err()
            {
                out.lost = (0..self.dirs.len()).collect();
            }
            out.lost.sort_unstable();
            out.lost.dedup();
        }
        out
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    pub(super) fn watch(dir: &Path, changes: super::Changes) -> Option<tokio::io::unix::AsyncFd<OwnedFd>> {
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mask = libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | match changes {
                super::Changes::Files => libc::IN_CLOSE_WRITE,
                super::Changes::Entries => libc::IN_CREATE,
            };
        // SAFETY: `fd` is a live inotify descriptor and `path` a NUL-terminated string that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
        if wd < 0 {
            return None;
        }
        // SAFETY: the AsyncFd owns `fd` (an OwnedFd): it stays open, the same descriptor, as long as the AsyncFd lives.
        unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
    }

    /// A non-blocking inotify descriptor.
    pub(super) fn init() -> Option<OwnedFd> {
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a descriptor we just opened and own alone.
        Some(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    /// Watch `dir` for its entries changing (and for itself going); the
    /// watch descriptor, None when it cannot be watched.
    pub(super) fn add(fd: &OwnedFd, dir: &Path) -> Option<i32> {
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        let mask = libc::IN_CLOSE_WRITE
            | libc::IN_CREATE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_MOVE_SELF
            | libc::IN_ONLYDIR;
        // SAFETY: `fd` is a live inotify descriptor and `path` a NUL-terminated string that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
        (wd >= 0).then_some(wd)
    }

    /// Stop watch `wd`.
    pub(super) fn remove(fd: &OwnedFd, wd: i32) {
        // SAFETY: `fd` is a live inotify descriptor; a stale `wd` only makes the call fail.
        unsafe { libc::inotify_rm_watch(fd.as_raw_fd(), wd) };
    }

    /// Every pending event, each given to `each` (watch descriptor, mask,
    /// entry name — empty for the directory itself); Err when events were
    /// lost (the queue overflowed) or the descriptor failed.
    pub(super) fn read_named(fd: &OwnedFd, mut each: impl FnMut(i32, u32, &std::ffi::OsStr)) -> std::io::Result<()> {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        // Aligned for inotify_event; room for many events a read.
        let mut buf = vec![0u64; 8192];
        let mut lost = false;
        loop {
            // SAFETY: `buf` is a writable buffer of the length given, `fd` a live descriptor.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len() * 8) };
            if n <= 0 {
                let err = std::io::Error::last_os_error();
                return match (n, err.kind()) {
                    (_, std::io::ErrorKind::WouldBlock) | (0, _) if !lost => Ok(()),
                    (_, std::io::ErrorKind::WouldBlock) | (0, _) => {
                        Err(std::io::Error::other("inotify queue overflowed"))
                    }
                    _ => Err(err),
                };
            }
            let n = usize::try_from(n).unwrap_or(0);
            // SAFETY: the kernel wrote `n` bytes into `buf`, which holds at least that many.
            let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
            let mut at = 0;
            while at + HEADER <= bytes.len() {
                let field = |o: usize| {
                    let mut w = [0u8; 4];
                    w.copy_from_slice(&bytes[at + o..at + o + 4]);
                    w
                };
                // struct inotify_event { int wd; uint32_t mask; uint32_t cookie; uint32_t len; char name[]; }
                let wd = i32::from_ne_bytes(field(0));
                let mask = u32::from_ne_bytes(field(4));
                let len = usize::try_from(u32::from_ne_bytes(field(12))).unwrap_or(usize::MAX);
                let Some(name) = bytes.get(at + HEADER..at.saturating_add(HEADER).saturating_add(len)) else {
                    break;
                };
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    lost = true;
                } else {
                    each(wd, mask, std::ffi::OsStr::from_bytes(name));
                }
                at += HEADER + len;
            }
        }
    }

    /// Read every pending event; Ok(true) when there was at least one,
    /// WouldBlock when none is left to read.
    pub(super) fn drain(fd: &OwnedFd) -> std::io::Result<bool> {
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            // SAFETY: `buf` is a writable buffer of the length given, `fd` a live descriptor.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                any = true;
                continue;
            }
            let err = std::io::Error::last_os_error();
            return match (n, err.kind()) {
                (_, std::io::ErrorKind::WouldBlock) if any => Ok(true),
                (_, std::io::ErrorKind::WouldBlock) => Err(err),
                (0, _) => Ok(any),
                _ => Err(err),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A file written and closed, one renamed in and one removed each wake
    /// the watch; nothing happening does not; a socket bound wakes a watch
    /// of entries.
    #[tokio::test]
    async fn a_closed_write_and_a_rename_wake_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = DirWatch::new(dir.path(), Changes::Files).expect("inotify");
        let quiet = tokio::time::timeout(Duration::from_millis(50), w.changed()).await;
        assert!(quiet.is_err(), "no change yet");
        std::fs::write(dir.path().join("a.yaml"), "x").unwrap();
        tokio::time::timeout(Duration::from_secs(5), w.changed()).await.expect("the write");
        std::fs::write(dir.path().join(".b.yaml"), "y").unwrap();
        std::fs::rename(dir.path().join(".b.yaml"), dir.path().join("b.yaml")).unwrap();
        tokio::time::timeout(Duration::from_secs(5), w.changed()).await.expect("the rename");
        std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
        tokio::time::timeout(Duration::from_secs(5), w.changed()).await.expect("the removal");
        let mut sockets = DirWatch::new(dir.path(), Changes::Entries).expect("inotify");
        let _l = std::os::unix::net::UnixListener::bind(dir.path().join("p.sock")).unwrap();
        tokio::time::timeout(Duration::from_secs(5), sockets.changed()).await.expect("a socket created");
        assert!(DirWatch::new(&dir.path().join("missing"), Changes::Files).is_none());
    }

    /// The names of what changed, by directory: a directory missing at
    /// first is lost (to be listed) until it exists and is watched; an
    /// entry written, renamed in and removed is named; a directory removed
    /// is lost again.
    #[test]
    fn a_name_watch_names_what_changed_and_which_directories_to_list() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        let mut w = NameWatch::new(&[a.clone(), b.clone()]).expect("inotify");
        assert_eq!(w.read(), Named { names: vec![], lost: vec![0, 1] }, "both listed once");
        assert_eq!(w.read(), Named { names: vec![], lost: vec![1] }, "b still missing");
        std::fs::create_dir(&b).unwrap();
        assert_eq!(w.read(), Named { names: vec![], lost: vec![1] }, "b watched from now, listed once");
        std::fs::write(a.join("x.json"), "{}").unwrap();
        std::fs::write(b.join(".y"), "{}").unwrap();
        std::fs::rename(b.join(".y"), b.join("y.yaml")).unwrap();
        std::fs::remove_file(a.join("x.json")).unwrap();
        let seen = w.read();
        assert!(seen.lost.is_empty(), "{seen:?}");
        for want in [(0, "x.json"), (1, ".y"), (1, "y.yaml")] {
            assert!(seen.names.iter().any(|(i, n)| (*i, n.to_str().unwrap()) == want), "{want:?} in {seen:?}");
        }
        assert_eq!(w.read(), Named::default(), "nothing new");
        std::fs::remove_dir_all(&b).unwrap();
        assert_eq!(w.read().lost, vec![1], "b gone: listed (and watched again once back)");
    }
}
