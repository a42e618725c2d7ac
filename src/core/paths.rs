//! The node paths dpctl works with. Defaults are the kubelet's; every command
//! receives a [`Paths`] value (flags and env vars override), nothing below
//! `main` hard-codes a path.

use std::path::{Path, PathBuf};

/// The kubelet's default device-plugin directory.
pub const DEFAULT_PLUGIN_DIR: &str = "/var/lib/kubelet/device-plugins/";
/// The kubelet's default PodResources socket.
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The kubelet's default plugin-watcher directory.
pub const DEFAULT_PLUGINS_REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";
/// The name of the kubelet's Registration socket inside the plugin directory.
pub const KUBELET_SOCKET_NAME: &str = "kubelet.sock";
/// The name of the kubelet's device-manager checkpoint inside the plugin directory.
pub const CHECKPOINT_NAME: &str = "kubelet_internal_checkpoint";

/// The PodResources socket for a plugin directory: with `--plugin-dir` given,
/// `<plugin-dir>/../pod-resources/kubelet.sock` (the kubelet's layout, as
/// `dpctl mock-kubelet` serves it), else the kubelet's default.
pub fn pod_resources_socket_for(plugin_dir: &Path, plugin_dir_given: bool) -> PathBuf {
    if !plugin_dir_given {
        return PathBuf::from(DEFAULT_POD_RESOURCES_SOCKET);
    }
    let dir = plugin_dir.canonicalize().unwrap_or_else(|_| plugin_dir.to_path_buf());
    dir.parent().unwrap_or(&dir).join("pod-resources").join("kubelet.sock")
}

/// Where things live on the node (or in a test's temp dir).
#[derive(Debug, Clone)]
pub struct Paths {
    /// The device-plugin directory (`kubelet.sock` and plugin sockets).
    pub plugin_dir: PathBuf,
    /// The kubelet's Registration socket.
    pub kubelet_socket: PathBuf,
    /// The kubelet's PodResources socket.
    pub pod_resources_socket: PathBuf,
}

impl Paths {
    /// Paths rooted at `plugin_dir`, with an optional explicit kubelet socket.
    pub fn new(plugin_dir: PathBuf, kubelet_socket: Option<PathBuf>, pod_resources_socket: PathBuf) -> Self {
        let kubelet_socket = kubelet_socket.unwrap_or_else(|| plugin_dir.join(KUBELET_SOCKET_NAME));
        Paths { plugin_dir, kubelet_socket, pod_resources_socket }
    }

    /// Resolve a socket argument: a bare name (no `/`) that does not exist in
    /// the current directory is taken relative to the plugin directory, so
    /// `dpctl watch nvidia-gpu.sock` works on a node.
    pub fn resolve_socket(&self, arg: &Path) -> PathBuf {
        let s = arg.as_os_str().to_string_lossy();
        if !s.contains('/') && !arg.exists() {
            self.plugin_dir.join(arg)
        } else {
            arg.to_path_buf()
        }
    }
}
