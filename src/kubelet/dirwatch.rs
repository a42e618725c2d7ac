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
}
