//! The node paths dpctl works with. Defaults are the kubelet's; every command
//! receives a [`Paths`] value (flags and env vars override), nothing below
//! `main` hard-codes a path.

use std::path::{Path, PathBuf};

/// The directory (in the plugin directory) that holds dpctl's control and
/// status sockets: `serve`'s live control and the mock kubelet's status.
pub const CONTROL_DIR: &str = "dpctl-control";

/// The status socket of the mock kubelet serving `plugin_dir` (what `dpctl node` reads).
pub fn status_socket(plugin_dir: &Path) -> PathBuf {
    plugin_dir.join(CONTROL_DIR).join("mock-kubelet.sock")
}

/// The kubelet's default `--root-dir`.
pub const DEFAULT_KUBELET_ROOT: &str = "/var/lib/kubelet";
/// Where container runtimes look for CDI specs, in priority order (lowest first).
pub const DEFAULT_CDI_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];
/// The CDI directory of a node tree, under the kubelet root: where dpctl's
/// mock node keeps the specs its drivers write (`{cdi-dir}` in `dpctl test
/// --dra`, `demo --dra`, the README's `dra serve --cdi-dir <root>/cdi`).
pub const NODE_CDI_DIR: &str = "cdi";

/// Where a CDI search path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CdiSource {
    /// `--cdi-spec-dir` (repeatable).
    Flags,
    /// `$DPCTL_CDI_SPEC_DIRS`.
    Env,
    /// The runtimes' defaults and the node tree's `<kubelet-root>/cdi`.
    Defaults,
}

/// The directories CDI specs are looked up in, lowest priority first, and
/// where that list came from. One value for every command that resolves
/// CDI IDs (the mock kubelet, `doctor`, `dra prepare`, `probe`); its
/// [`Display`](std::fmt::Display) is what they print.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CdiSearchPath {
    /// The directories, as seen from here (under `--root`).
    pub dirs: Vec<PathBuf>,
    /// Where they came from.
    pub source: CdiSource,
}

impl std::fmt::Display for CdiSearchPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        let from = match self.source {
            CdiSource::Flags => "from --cdi-spec-dir",
            CdiSource::Env => "from $DPCTL_CDI_SPEC_DIRS",
            CdiSource::Defaults => "the defaults; --cdi-spec-dir DIR or $DPCTL_CDI_SPEC_DIRS to change",
        };
        write!(f, "{} ({from})", dirs.join(", "))
    }
}

/// The kubelet's default device-plugin directory.
pub const DEFAULT_PLUGIN_DIR: &str = "/var/lib/kubelet/device-plugins/";
/// The kubelet's default PodResources socket.
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The name of the kubelet's Registration socket inside the plugin directory.
pub const KUBELET_SOCKET_NAME: &str = "kubelet.sock";
/// The name of the kubelet's device-manager checkpoint inside the plugin directory.
pub const CHECKPOINT_NAME: &str = "kubelet_internal_checkpoint";

/// The host's filesystem as seen from here: with `--root /host` (in a
/// `kubectl debug node/…` pod) every host path is looked up under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRoot(Option<PathBuf>);

impl HostRoot {
    /// No prefix (`None`) or a prefix directory.
    pub fn new(root: Option<PathBuf>) -> Self {
        HostRoot(root.filter(|r| r.as_os_str() != "/" && !r.as_os_str().is_empty()))
    }

    /// The prefix, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.0.as_deref()
    }

    /// Where host path `p` is seen from here: under the root when `p` is
    /// absolute and not already under it; relative paths stay relative.
    pub fn path(&self, p: &Path) -> PathBuf {
        match &self.0 {
            Some(root) if p.is_absolute() && !p.starts_with(root) => root.join(p.strip_prefix("/").unwrap_or(p)),
            _ => p.to_path_buf(),
        }
    }

    /// The host's own name for `p`, a path as seen from here: the root
    /// prefix taken off (what the kubelet must be told, e.g. a plugin-watcher
    /// endpoint). Paths outside the root are returned unchanged.
    pub fn on_host(&self, p: &Path) -> PathBuf {
        match &self.0 {
            Some(root) => match p.strip_prefix(root) {
                Ok(rest) => Path::new("/").join(rest),
                Err(_) => p.to_path_buf(),
            },
            None => p.to_path_buf(),
        }
    }
}

/// The kubelet's `--root-dir` named on one process's command line (argv),
/// when that process is a kubelet (`kubelet`, `kubelite`, `k0s kubelet` …)
/// that passes `--root-dir`.
pub fn kubelet_root_from_cmdline(argv: &[String]) -> Option<PathBuf> {
    let exe = argv.first()?.rsplit('/').next().unwrap_or_default();
    let is_kubelet = exe.contains("kubelet") || argv.get(1).is_some_and(|a| a == "kubelet");
    if !is_kubelet {
        return None;
    }
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
        match a {
            Some("root-dir") => return it.next().filter(|v| !v.is_empty()).map(PathBuf::from),
            Some(x) if x.starts_with("root-dir=") => {
                return Some(PathBuf::from(&x["root-dir=".len()..])).filter(|p| !p.as_os_str().is_empty())
            }
            _ => {}
        }
    }
    None
}

/// Look through `proc_dir/*/cmdline` for a running kubelet's `--root-dir`.
/// Unreadable entries are skipped; `None` when no kubelet names one.
pub fn discover_kubelet_root(proc_dir: &Path) -> Option<PathBuf> {
    let rd = std::fs::read_dir(proc_dir).ok()?;
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else { continue };
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if let Some(r) = kubelet_root_from_cmdline(&argv) {
            return Some(r);
        }
    }
    None
}

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
    /// The `--root` prefix of every host path.
    pub root: HostRoot,
    /// The kubelet's root directory, as seen from here (prefixed).
    pub kubelet_root: PathBuf,
}

impl Paths {
    /// Paths rooted at `plugin_dir`, with an optional explicit kubelet socket.
    pub fn new(plugin_dir: PathBuf, kubelet_socket: Option<PathBuf>, pod_resources_socket: PathBuf) -> Self {
        let kubelet_socket = kubelet_socket.unwrap_or_else(|| plugin_dir.join(KUBELET_SOCKET_NAME));
        Paths {
            plugin_dir,
            kubelet_socket,
            pod_resources_socket,
            root: HostRoot::default(),
            kubelet_root: PathBuf::from(DEFAULT_KUBELET_ROOT),
        }
    }

    /// The node's paths from the global flags: every host path under `root`;
    /// the plugin directory and PodResources socket below the kubelet's root
    /// directory unless given.
    pub fn for_node(root: HostRoot, kubelet_root: &Path, plugin_dir: Option<&Path>) -> Self {
        let kr = root.path(kubelet_root);
        let given_dir = plugin_dir.is_some();
        let plugin_dir = match plugin_dir {
            Some(d) => root.path(d),
            None => kr.join("device-plugins/"),
        };
        // With --plugin-dir, the PodResources socket sits beside it (the
        // kubelet's layout, as mock-kubelet serves it); else under the root dir.
        let pr = match plugin_dir.as_path() {
            d if given_dir => pod_resources_socket_for(d, true),
            _ => kr.join("pod-resources").join(KUBELET_SOCKET_NAME),
        };
        Paths { root, kubelet_root: kr, ..Paths::new(plugin_dir, None, pr) }
    }

    /// Host path `p` as seen from here (under `--root`).
    pub fn host(&self, p: &Path) -> PathBuf {
        self.root.path(p)
    }

    /// The plugin-watcher directory: `given` under `--root`, or the kubelet's.
    pub fn plugins_registry_dir(&self, given: Option<&Path>) -> PathBuf {
        given.map(|d| self.host(d)).unwrap_or_else(|| self.kubelet_root.join("plugins_registry"))
    }

    /// The directories of [`Paths::cdi_search_path`] (for callers that print nothing of it).
    pub fn cdi_spec_dirs(&self, given: &[PathBuf]) -> Vec<PathBuf> {
        self.cdi_search_path(given).dirs
    }

    /// The CDI search path (reads `$DPCTL_CDI_SPEC_DIRS`; see [`Paths::cdi_search_path_with`]).
    pub fn cdi_search_path(&self, given: &[PathBuf]) -> CdiSearchPath {
        self.cdi_search_path_with(given, std::env::var_os("DPCTL_CDI_SPEC_DIRS").as_deref())
    }

    /// The CDI search path, each directory under `--root` (pure):
    /// 1. `given` (`--cdi-spec-dir`, repeatable), exactly;
    /// 2. else `env` (`$DPCTL_CDI_SPEC_DIRS`, `:`-separated), when it names any;
    /// 3. else the container runtimes' defaults `/etc/cdi` and
    ///    `/var/run/cdi`, then the node tree's `<kubelet-root>/cdi` (the
    ///    plugin directory's parent: `--kubelet-root-dir`, or the mock
    ///    kubelet's root with `--plugin-dir`). A real runtime reads only the first two; the node tree's is where
    ///    dpctl's mock node keeps the specs its drivers write. A directory
    ///    that does not exist is no error.
    pub fn cdi_search_path_with(&self, given: &[PathBuf], env: Option<&std::ffi::OsStr>) -> CdiSearchPath {
        if !given.is_empty() {
            return CdiSearchPath { dirs: given.iter().map(|d| self.host(d)).collect(), source: CdiSource::Flags };
        }
        let from_env: Vec<PathBuf> =
            env.map(|v| std::env::split_paths(v).filter(|d| !d.as_os_str().is_empty()).collect()).unwrap_or_default();
        if !from_env.is_empty() {
            return CdiSearchPath { dirs: from_env.iter().map(|d| self.host(d)).collect(), source: CdiSource::Env };
        }
        let mut dirs: Vec<PathBuf> = DEFAULT_CDI_SPEC_DIRS.iter().map(|d| self.host(Path::new(d))).collect();
        if let Some(d) = self.plugin_dir.parent().map(|root| root.join(NODE_CDI_DIR)).filter(|d| !dirs.contains(d)) {
            dirs.push(d);
        }
        CdiSearchPath { dirs, source: CdiSource::Defaults }
    }

    /// Resolve a socket argument: a bare name (no `/`) that does not exist in
    /// the current directory is taken relative to the plugin directory, so
    /// `dpctl watch nvidia-gpu.sock` works on a node.
    pub fn resolve_socket(&self, arg: &Path) -> PathBuf {
        let s = arg.as_os_str().to_string_lossy();
        if !s.contains('/') && !arg.exists() {
            self.plugin_dir.join(arg)
        } else {
            self.host(arg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn root_prefixes_absolute_host_paths_once() {
        let r = HostRoot::new(Some("/host".into()));
        assert_eq!(r.path(Path::new("/var/lib/kubelet")), Path::new("/host/var/lib/kubelet"));
        assert_eq!(r.path(Path::new("/host/var/lib/kubelet")), Path::new("/host/var/lib/kubelet"));
        assert_eq!(r.path(Path::new("rel.sock")), Path::new("rel.sock"));
        assert_eq!(HostRoot::new(Some("/".into())).path(Path::new("/x")), Path::new("/x"));
        // and back: the host's own name for a path seen from here
        assert_eq!(r.on_host(Path::new("/host/var/lib/kubelet/x.sock")), Path::new("/var/lib/kubelet/x.sock"));
        assert_eq!(r.on_host(Path::new("/hostile/x")), Path::new("/hostile/x"));
        assert_eq!(HostRoot::new(None).on_host(Path::new("/host/x")), Path::new("/host/x"));
        let p = Paths::for_node(r.clone(), Path::new("/var/lib/rancher/k3s/agent/kubelet"), None);
        assert_eq!(p.plugin_dir, Path::new("/host/var/lib/rancher/k3s/agent/kubelet/device-plugins/"));
        assert_eq!(p.kubelet_socket, Path::new("/host/var/lib/rancher/k3s/agent/kubelet/device-plugins/kubelet.sock"));
        assert_eq!(
            p.pod_resources_socket,
            Path::new("/host/var/lib/rancher/k3s/agent/kubelet/pod-resources/kubelet.sock")
        );
        assert_eq!(p.plugins_registry_dir(None), Path::new("/host/var/lib/rancher/k3s/agent/kubelet/plugins_registry"));
        assert_eq!(
            p.cdi_search_path_with(&[], None).dirs,
            [
                Path::new("/host/etc/cdi"),
                Path::new("/host/var/run/cdi"),
                Path::new("/host/var/lib/rancher/k3s/agent/kubelet/cdi")
            ]
        );
        assert_eq!(p.resolve_socket(Path::new("/var/lib/kubelet/x.sock")), Path::new("/host/var/lib/kubelet/x.sock"));
        let given = Paths::for_node(r, Path::new(DEFAULT_KUBELET_ROOT), Some(Path::new("/opt/dp")));
        assert_eq!(given.plugin_dir, Path::new("/host/opt/dp"));
    }

    #[test]
    fn one_cdi_search_path_flags_then_env_then_defaults() {
        let p = Paths::for_node(HostRoot::default(), Path::new("/srv/node"), None);
        let d = p.cdi_search_path_with(&[], None);
        assert_eq!(d.dirs, [Path::new("/etc/cdi"), Path::new("/var/run/cdi"), Path::new("/srv/node/cdi")]);
        assert_eq!(d.source, CdiSource::Defaults);
        assert_eq!(
            d.to_string(),
            "/etc/cdi, /var/run/cdi, /srv/node/cdi (the defaults; --cdi-spec-dir DIR or $DPCTL_CDI_SPEC_DIRS to change)"
        );
        // With --plugin-dir, the node tree is its parent (the mock kubelet's root).
        let q = Paths::for_node(
            HostRoot::default(),
            Path::new(DEFAULT_KUBELET_ROOT),
            Some(Path::new("/srv/n/device-plugins")),
        );
        assert_eq!(q.cdi_search_path_with(&[], None).dirs[2..], [Path::new("/srv/n/cdi")]);
        let env = std::ffi::OsStr::new("/a:/b");
        let e = p.cdi_search_path_with(&[], Some(env));
        assert_eq!(
            (e.dirs.as_slice(), e.source),
            ([PathBuf::from("/a"), PathBuf::from("/b")].as_slice(), CdiSource::Env)
        );
        assert_eq!(p.cdi_search_path_with(&[], Some(std::ffi::OsStr::new(""))).source, CdiSource::Defaults);
        let f = p.cdi_search_path_with(&["/x".into()], Some(env));
        assert_eq!((f.dirs, f.source), (vec![PathBuf::from("/x")], CdiSource::Flags));
        let rooted = Paths::for_node(HostRoot::new(Some("/host".into())), Path::new("/var/lib/kubelet"), None);
        assert_eq!(rooted.cdi_search_path_with(&["/x".into()], None).dirs, [Path::new("/host/x")]);
        assert_eq!(rooted.cdi_search_path_with(&[], Some(env)).dirs, [Path::new("/host/a"), Path::new("/host/b")]);
    }

    #[test]
    fn kubelet_root_dir_from_command_lines() {
        assert_eq!(
            kubelet_root_from_cmdline(&argv("/usr/bin/kubelet --config=/x --root-dir=/data/kubelet")),
            Some(PathBuf::from("/data/kubelet"))
        );
        assert_eq!(
            kubelet_root_from_cmdline(&argv("/usr/local/bin/k0s kubelet --root-dir /var/lib/k0s/kubelet")),
            Some(PathBuf::from("/var/lib/k0s/kubelet"))
        );
        assert_eq!(kubelet_root_from_cmdline(&argv("/usr/bin/kubelet --config=/x")), None);
        assert_eq!(kubelet_root_from_cmdline(&argv("/usr/bin/containerd --root-dir=/nope")), None);
        assert_eq!(kubelet_root_from_cmdline(&argv("kubelet --root-dir=")), None);
        let d = tempfile::tempdir().unwrap();
        for (pid, cmd) in [("1", "/sbin/init\0"), ("42", "/usr/bin/kubelet\0--root-dir\0/srv/kubelet\0"), ("self", "x")]
        {
            std::fs::create_dir(d.path().join(pid)).unwrap();
            std::fs::write(d.path().join(pid).join("cmdline"), cmd).unwrap();
        }
        assert_eq!(discover_kubelet_root(d.path()), Some(PathBuf::from("/srv/kubelet")));
    }
}
