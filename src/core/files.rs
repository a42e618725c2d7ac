//! Files and directories dpctl creates, with the same modes whatever the
//! umask, and never through a name someone else could plant first:
//!
//! - directories it creates: 0750 ([`create_dir_all`]);
//! - state files (checkpoint, traces, log files): 0600, created new
//!   ([`create_new`]) or written to a randomly named temp file opened with
//!   create-new semantics, then renamed into place ([`write_atomic`]);
//! - sockets: 0660 (set by `core::transport::listen`).
//!
//! Existing directories are used as they are: their modes belong to whoever made them.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of directories dpctl creates.
pub const DIR_MODE: u32 = 0o750;
/// Mode of state files dpctl creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of sockets dpctl listens on.
pub const SOCKET_MODE: u32 = 0o660;

/// Create `path` and any missing parents, each new one with mode 0750
/// exactly; directories that exist already are left alone.
pub fn create_dir_all(path: &Path) -> std::io::Result<()> {
    if path.as_os_str().is_empty() || path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(path) {
        // Made by someone else meanwhile: not ours to chmod.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
        // The umask may have narrowed the mode (or, at 000, not): set it exactly.
        Ok(()) => std::fs::set_permissions(path, Permissions::from_mode(DIR_MODE)),
    }
}

/// Create a new file with mode 0600; an existing file or symlink at `path`
/// is an `AlreadyExists` error, never followed or truncated.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path)?;
    f.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(f)
}

/// What a [`write_atomic_with`] syncs before and after its rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The file and its directory (the rename survives a power loss).
    Full,
    /// The file, not the directory: the kubelet's checkpoints
    /// (pkg/kubelet/util/store/filestore.go writeFile: Sync, Rename).
    File,
    /// Nothing: the kubelet's DRA health cache (healthinfo.go
    /// saveToCheckpoint: CreateTemp, Write, Close, Rename).
    Unsynced,
}

/// Replace `path` with `bytes` atomically: a temp file with a random name in
/// the same directory, created new (a planted symlink is never followed),
/// mode 0600, fsync, rename over `path`, fsync the directory. On error the
/// temp file is removed and `path` is unchanged.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, bytes, Durability::Full)
}

/// [`write_atomic`], syncing what `durability` says.
pub fn write_atomic_with(path: &Path, bytes: &[u8], durability: Durability) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("dpctl");
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .permissions(Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)?;
    tmp.as_file().set_permissions(Permissions::from_mode(FILE_MODE))?;
    tmp.write_all(bytes)?;
    if durability != Durability::Unsynced {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if durability == Durability::Full {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn modes_do_not_follow_the_umask_and_nothing_planted_is_followed() {
        let d = tempfile::tempdir().unwrap();
        // Existing directories keep their mode.
        std::fs::set_permissions(d.path(), Permissions::from_mode(0o755)).unwrap();
        let deep = d.path().join("a/b");
        create_dir_all(&deep).unwrap();
        assert_eq!((mode(d.path()), mode(&d.path().join("a")), mode(&deep)), (0o755, DIR_MODE, DIR_MODE));
        create_dir_all(&deep).unwrap();

        let f = deep.join("state");
        write_atomic(&f, b"one").unwrap();
        assert_eq!(mode(&f), FILE_MODE);
        write_atomic(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        // No temp file is left behind.
        assert_eq!(std::fs::read_dir(&deep).unwrap().count(), 1);

        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = deep.join("trace");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert_eq!(create_new(&link).unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let t = deep.join("new-trace");
        create_new(&t).unwrap();
        assert_eq!(mode(&t), FILE_MODE);
    }

    /// Every durability replaces the file whole, 0600, and leaves no temp file.
    #[test]
    fn each_durability_replaces_the_file_whole_and_privately() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("checkpoint");
        for (i, how) in [Durability::Full, Durability::File, Durability::Unsynced].into_iter().enumerate() {
            write_atomic_with(&p, format!("v{i}").as_bytes(), how).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("v{i}"), "{how:?}");
            assert_eq!(mode(&p), 0o600, "{how:?}");
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no temp file left");
    }

    #[test]
    fn temp_dirs_are_new_random_and_private() {
        // What the old code would have used, planted by "another user".
        let planted: Vec<std::path::PathBuf> =
            (0..4).map(|n| std::env::temp_dir().join(format!("dpctl-t11-{}-{n}", std::process::id()))).collect();
        for p in &planted {
            let _ = std::fs::create_dir(p);
        }
        let a = crate::core::transport::TempDir::new("t11").unwrap();
        let b = crate::core::transport::TempDir::new("t11").unwrap();
        for p in &planted {
            let _ = std::fs::remove_dir(p);
        }
        assert_ne!(a.path(), b.path());
        for t in [&a, &b] {
            assert!(!planted.contains(&t.path().to_path_buf()), "reused a planted directory {}", t.path().display());
            assert!(t.path().file_name().unwrap().to_str().unwrap().starts_with("dpctl-t11-"));
            assert_eq!(mode(t.path()), 0o700);
        }
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}
