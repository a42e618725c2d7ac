//! What a run asks for ([`Options`]) and the sessions scenarios run in
//! ([`Session`]): what the scenarios' states are set up from.

use super::filter::Pattern;
use std::path::PathBuf;
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The plugin command (empty with `socket`).
    pub plugin: Vec<String>,
    /// Restart a plugin that exits on its own after this back-off, as the
    /// kubelet restarts a DaemonSet pod (None: never).
    pub restart_backoff: Option<Duration>,
    /// How long HEALTH-001 waits for allocatable to drop after the trigger.
    pub health_timeout: Duration,
    /// An already running plugin's socket.
    pub socket: Option<PathBuf>,
    /// The resource to test (default: the first one registered).
    pub resource: Option<String>,
    /// Run only matching scenarios.
    pub focus: Option<Pattern>,
    /// Leave out matching scenarios.
    pub skip: Option<Pattern>,
    /// Run the plugin in a private mount namespace.
    pub isolate: bool,
    /// A shell command that makes one device unhealthy.
    pub health_trigger: Option<String>,
    /// Per-call timeout.
    pub timeout: Duration,
    /// This binary (runs the mock kubelet).
    pub exe: PathBuf,
    /// The kubelet version the mock kubelet behaves as (None: the newest).
    pub kubelet_version: Option<crate::kubelet::profile::KubeletVersion>,
    /// How the suite's local API server serves drivers (`{kubeconfig}`).
    pub api_server: crate::kubelet::dra::apiserver::Mode,
}

/// A fresh environment a group of scenarios runs in, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Session {
    /// The kubelet exists; the plugin starts, registers and is questioned.
    Basic,
    /// The plugin starts before the kubelet.
    StartOrder,
    /// The kubelet restarts under the plugin.
    KubeletRestart,
    /// The plugin is stopped with SIGTERM and started again.
    PluginRestart,
    /// Pods through the mock kubelet.
    EndToEnd,
    /// A user-supplied health trigger.
    Health,
}

impl Session {
    /// Every session, in run order.
    pub const ALL: [Session; 6] = [
        Session::Basic,
        Session::StartOrder,
        Session::KubeletRestart,
        Session::PluginRestart,
        Session::EndToEnd,
        Session::Health,
    ];
}
