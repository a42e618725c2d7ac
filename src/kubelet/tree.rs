//! The node tree: where a kubelet keeps what plugins and tools reach. One
//! type owns the layout under a kubelet root directory, so the mock kubelet,
//! `dpctl test`, `demo`, `bench kubelet`, `replay --kubelet` and the e2e tests
//! all lay out and find the same files.

use crate::core::paths::{CHECKPOINT_NAME, KUBELET_SOCKET_NAME};
use crate::core::transport::TempDir;
use crate::core::{Error, Result};
use std::path::{Path, PathBuf};

/// The kubelet's root as plugins with hard-coded paths expect it.
pub use crate::core::paths::DEFAULT_KUBELET_ROOT as KUBELET_ROOT;

/// The pods API socket of the kubelet whose root is `root`
/// (`<root>/pods-api/pods-api.sock`: kubelet.go getPodsAPIDir, apis/pods Socket).
pub fn pods_api_socket(root: &Path) -> PathBuf {
    root.join(crate::kubelet::pods::DIR).join(crate::kubelet::pods::SOCKET)
}

/// A node's directories and sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTree {
    /// The kubelet root (`/var/lib/kubelet`, or a temp dir standing for it).
    pub root: PathBuf,
    /// `device-plugins/`: kubelet.sock, plugin sockets, the checkpoint.
    pub plugin_dir: PathBuf,
    /// `pod-resources/kubelet.sock`.
    pub pod_resources: PathBuf,
    /// `plugins_registry/`: the plugin watcher's directory.
    pub registry_dir: PathBuf,
    /// Pod manifests the mock kubelet admits (dpctl's; not a kubelet directory).
    pub manifests: PathBuf,
    /// Logs of the processes dpctl runs on the tree (dpctl's).
    pub logs: PathBuf,
}

impl NodeTree {
    /// The layout under `root` (nothing is created).
    pub fn under(root: &Path) -> Self {
        NodeTree {
            root: root.to_path_buf(),
            plugin_dir: root.join("device-plugins"),
            pod_resources: root.join("pod-resources").join(KUBELET_SOCKET_NAME),
            registry_dir: root.join("plugins_registry"),
            manifests: root.join("manifests"),
            logs: root.join("logs"),
        }
    }

    /// Create every directory of the layout (and `plugins/`, where DRA and CSI plugins live).
    pub fn create(&self) -> Result<()> {
        let dirs = [
            self.plugin_dir.clone(),
            self.pod_resources.parent().map(Path::to_path_buf).unwrap_or_else(|| self.root.clone()),
            self.registry_dir.clone(),
            self.root.join("plugins"),
            self.manifests.clone(),
            self.logs.clone(),
        ];
        for d in dirs {
            crate::core::files::create_dir_all(&d).map_err(|e| Error::io(&d, "cannot create the node tree", &e))?;
        }
        Ok(())
    }

    /// kubelet.sock.
    pub fn kubelet_socket(&self) -> PathBuf {
        self.plugin_dir.join(KUBELET_SOCKET_NAME)
    }

    /// Where DRA drivers on this tree write CDI specs (dpctl's; the mock
    /// kubelet checks prepared CDI IDs against it).
    pub fn cdi_dir(&self) -> PathBuf {
        self.root.join("cdi")
    }

    /// The device manager's checkpoint.
    pub fn checkpoint(&self) -> PathBuf {
        self.plugin_dir.join(CHECKPOINT_NAME)
    }

    /// The status socket `dpctl node` reads.
    pub fn status_socket(&self) -> PathBuf {
        status_socket(&self.plugin_dir)
    }

    /// A path a plugin reported (under /var/lib/kubelet when it runs in a
    /// private mount namespace over this tree) as seen from here.
    pub fn host_path(&self, reported: &Path) -> PathBuf {
        crate::kubelet::watcher::host_endpoint(reported, Some(&(PathBuf::from(KUBELET_ROOT), self.root.clone())))
    }
}

pub use crate::core::paths::status_socket;

/// A node tree in a fresh temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempNode {
    _dir: TempDir,
    /// The tree.
    pub tree: NodeTree,
}

impl TempNode {
    /// Create a tree in a new temp dir named after `what`.
    pub fn new(what: &str) -> Result<Self> {
        let dir = TempDir::new(what)?;
        let tree = NodeTree::under(dir.path());
        tree.create()?;
        Ok(TempNode { _dir: dir, tree })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_reported_paths() {
        let n = TempNode::new("tree-test").unwrap();
        let t = &n.tree;
        for d in [&t.plugin_dir, &t.registry_dir, &t.manifests, &t.logs, &t.root.join("plugins")] {
            assert!(d.is_dir(), "{}", d.display());
        }
        assert!(t.pod_resources.parent().unwrap().is_dir());
        assert_eq!(t.kubelet_socket(), t.plugin_dir.join("kubelet.sock"));
        assert_eq!(t.host_path(Path::new("/var/lib/kubelet/device-plugins/a.sock")), t.plugin_dir.join("a.sock"));
        assert_eq!(t.host_path(Path::new("/elsewhere/a.sock")), Path::new("/elsewhere/a.sock"));
        assert!(t.status_socket().starts_with(t.plugin_dir.join(crate::core::paths::CONTROL_DIR)));
    }
}
