//! `dpctl doctor`: read-only inspection of a node's device-plugin state.
//!
//! Two stages. [`facts::gather`] does all the I/O: each entry of the plugin
//! directory with a typed connect result, the checkpoint, PodResources List
//! and GetAllocatableResources, each live plugin's options and first
//! snapshot (unless `--no-streams`), the plugin-watcher sockets' GetInfo and
//! the CDI specs. [`findings::derive`] is a pure function from those facts to
//! findings, so every scenario is a unit test. Nothing on the node is modified.

pub mod answers;
pub mod cdi;
pub mod dra;
pub mod facts;
pub mod findings;

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Something is off but nothing fails because of it yet.
    Warning,
    /// Something could not be checked (e.g. permission denied): the state is unknown.
    Unknown,
    /// Something fails (or will) because of it.
    Error,
}

/// One finding: what is wrong, the evidence, and the fix.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Severity.
    pub severity: Severity,
    /// A short check name, e.g. `stale-socket`.
    pub check: &'static str,
    /// The socket, file or resource concerned.
    pub subject: String,
    /// What is wrong, in plain words.
    pub message: String,
    /// What was seen.
    pub evidence: String,
    /// What to do.
    pub fix: String,
}

/// What doctor looked at.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    /// Live plugin sockets inspected.
    pub plugin_sockets: usize,
    /// Whether kubelet.sock answered.
    pub kubelet_socket_live: bool,
    /// Allocations in the checkpoint.
    pub checkpoint_allocations: usize,
    /// Whether PodResources answered.
    pub pod_resources: bool,
    /// Plugin-watcher sockets inspected.
    pub watcher_sockets: usize,
    /// Whether ListAndWatch streams were opened (not with --no-streams).
    pub streams: bool,
    /// CDI names checked.
    pub cdi_names: usize,
    /// Where CDI specs were looked up, and why there.
    pub cdi_spec_dirs: String,
    /// DRA plugins found through the plugin watcher.
    pub dra_plugins: usize,
    /// Which live socket serves which resource, and how that was decided.
    pub plugins: Vec<findings::Served>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `ok`, `warning`, `unknown` or `error`.
    pub result: String,
    /// What was checked.
    pub checked: Checked,
    /// Findings, worst first.
    pub findings: Vec<Finding>,
}

/// Where to look.
#[derive(Debug, Clone)]
pub struct Options {
    /// Device-plugin directory.
    pub plugin_dir: PathBuf,
    /// PodResources socket.
    pub pod_resources_socket: PathBuf,
    /// Plugin-watcher directory (checked when it exists).
    pub plugins_registry_dir: PathBuf,
    /// The kubelet's pods directory (`<root-dir>/pods`): a pod UID there is still on the node.
    pub pods_dir: PathBuf,
    /// Where CDI specs are looked up ([`crate::core::paths::Paths::cdi_search_path`]).
    pub cdi: crate::core::paths::CdiSearchPath,
    /// Open ListAndWatch for each live plugin (first snapshot).
    pub streams: bool,
    /// Per-socket timeout.
    pub timeout: Duration,
    /// The `--root` prefix, for host paths found on the node (plugin-watcher endpoints).
    pub root: crate::core::paths::HostRoot,
    /// The kubelet's root directory, as seen here (DRA endpoints are checked
    /// against it; its `dra_manager_state` is read).
    pub kubelet_root: PathBuf,
}

/// Inspect the node: gather facts, then derive findings.
pub async fn inspect(o: &Options) -> Report {
    let facts = facts::gather(o).await;
    findings::derive(&facts)
}
