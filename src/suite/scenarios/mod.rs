//! The device-plugin scenarios, one file per group, and the environment a
//! session runs them in. A session starts a fresh node tree, kubelet and
//! plugin process ([`Env`]); the basic session adds the streams its
//! ListAndWatch scenarios open ([`Basic`]), the health session the other
//! stream it keeps beside the kubelet's ([`Health`]). Each scenario is a
//! plain function of its session's state returning an [`Outcome`]; the
//! catalog names them.

use super::checks;
use super::env::{
    is_socket, log_tail, plugin_client, pod_manifest, Isolation, Kubelet, PluginProcess, Registration, Seen, Snap,
    Tree, Via,
};
use super::evidence;
use super::options::{Options, Session};
use super::{Evidence, Outcome, Verdict};
use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest, PreferredAllocationRequest,
};
use crate::kubelet::event::Stamped;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(super) mod allocate;
mod calls;
pub(super) mod end_to_end;
pub(super) mod health;
pub(super) mod kubelet_restart;
pub(super) mod listandwatch;
pub(super) mod plugin_restart;
pub(super) mod registration;
mod seen;
pub(super) mod start_order;
mod waits;

pub(super) use health::Health;
pub(super) use listandwatch::Basic;

const REGISTER_WITHIN: Duration = Duration::from_secs(10);
const FIRST_SNAPSHOT_WITHIN: Duration = Duration::from_secs(5);
/// How long an empty first list may wait for the devices to follow.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);
/// Devices later than this after registering: the node had none meanwhile (WARN).
const DEVICES_SLOW: Duration = Duration::from_secs(1);
/// Re-registering later than this after a kubelet restart warns: until
/// then pods needing the resource are rejected.
const REREGISTER_WITHIN: Duration = Duration::from_secs(5);
/// How long after a kubelet restart a plugin may take to be back: what
/// upstream's own e2e allows (test/e2e_node/device_plugin_test.go waits
/// 30 s for the resource after a restart; the kubelet itself keeps a
/// stopped endpoint's devices for endpointStopGracePeriod, 5 min).
/// Upstream's sample plugin first retries 10 s after kubelet.sock reappears.
const COME_BACK_WITHIN: Duration = Duration::from_secs(30);
const EXIT_WITHIN: Duration = Duration::from_secs(10);
const POD_WITHIN: Duration = Duration::from_secs(10);
/// The kubelet's longest container restart back-off (`MaxContainerBackOff`).
const MAX_BACKOFF: Duration = Duration::from_secs(300);
const DECOY: &str = "dpctl-test-other-vendor.sock";
const UNKNOWN_ID: &str = "dpctl-test-no-such-device";

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// The plugin exiting on its own.
struct Crash {
    at: Instant,
    status: std::process::ExitStatus,
    /// `Env::restarts` when it happened (one record per process).
    restart: u32,
    /// The back-off before it was restarted (None: not restarted).
    delay: Option<Duration>,
    /// The process had registered before it exited.
    registered: bool,
}

/// What the kubelet's stream brought, from its first message to the
/// device list the plugin settled on.
#[derive(Clone)]
struct Settled {
    /// The first message.
    first_at: Instant,
    /// Devices in the first message.
    first_len: usize,
    /// The first message with devices (None: none came).
    devices_at: Option<Instant>,
    /// Size of the settled message.
    bytes: usize,
    /// The settled message (the first with devices, else the first).
    resp: ListAndWatchResponse,
}

/// One device-plugin session's environment and what it saw so far: the
/// node tree, the kubelet (the engine, in process) and its events, the
/// plugin's process and its exits.
pub(crate) struct Env<'a> {
    o: &'a Options,
    isolation: Isolation,
    tree: Option<Tree>,
    plugin: Option<PluginProcess>,
    plugin_started: Instant,
    restarts: u32,
    /// When the session began.
    began: Instant,
    crashes: Vec<Crash>,
    /// The plugin was sent SIGTERM by us (its exit is no crash).
    terminated: bool,
    kubelet: Option<Kubelet>,
    generation: u64,
    restarted_at: Option<Instant>,
    events: Option<mpsc::UnboundedReceiver<Arc<Stamped>>>,
    seen: Seen,
    /// Another vendor's socket in the plugin directory.
    decoy: Option<tokio::net::UnixListener>,
    /// The resource under test (`--resource`, else the one registered).
    resource: Option<String>,
    /// The device IDs the kubelet got first in this session.
    baseline: Option<Vec<String>>,
}

/// A device-plugin session's state, set up for its scenarios.
pub(crate) enum State<'a> {
    /// Registration, ListAndWatch, Allocate, preferred and PreStart scenarios.
    Basic(Basic<'a>),
    /// Start order, restarts and pods: the environment alone.
    Env(Env<'a>),
    /// The health scenario.
    Health(Health<'a>),
}

fn setup_fail(what: &str, answer: String, fix: &str) -> Outcome {
    Outcome::fail(format!("session setup: {what}"), answer, fix)
}

/// Set up `session`: the tree, kubelet and plugin its scenarios start from
/// (nothing with `--socket`: only scenarios that need no control run then).
pub(crate) async fn setup<'a>(o: &'a Options, session: Session, isolation: Isolation) -> Result<State<'a>, Outcome> {
    let mut s = Env {
        o,
        isolation,
        tree: None,
        plugin: None,
        plugin_started: Instant::now(),
        restarts: 0,
        began: Instant::now(),
        crashes: Vec::new(),
        terminated: false,
        kubelet: None,
        generation: 0,
        restarted_at: None,
        events: None,
        seen: Seen::default(),
        decoy: None,
        resource: o.resource.clone(),
        baseline: None,
    };
    if o.socket.is_some() {
        return Ok(match session {
            Session::Basic => State::Basic(Basic::new(s)),
            _ => State::Env(s),
        });
    }
    let tree = Tree::new().map_err(|e| setup_fail("node tree", e.to_string(), "check $TMPDIR"))?;
    s.tree = Some(tree);
    Ok(match session {
        Session::Basic => {
            s.start_recorder().await?;
            let path = s.tree().plugin_dir.join(DECOY);
            s.decoy =
                Some(tokio::net::UnixListener::bind(&path).map_err(|e| {
                    setup_fail("decoy socket", format!("{}: {e}", path.display()), "check the temp dir")
                })?);
            s.start_plugin()?;
            State::Basic(Basic::new(s))
        }
        Session::StartOrder => {
            s.start_plugin()?;
            State::Env(s)
        }
        Session::KubeletRestart | Session::PluginRestart | Session::NodeReboot => {
            s.start_recorder().await?;
            s.start_plugin()?;
            s.baseline_snapshot().await?;
            State::Env(s)
        }
        Session::Health => State::Health(Health::setup(s).await?),
        Session::EndToEnd => {
            s.start_recorder().await?;
            s.start_plugin()?;
            let (res, ids) = s.wait_allocatable(REGISTER_WITHIN, |_| true).await.ok_or_else(|| {
                setup_fail(
                    "waiting for the plugin's devices in the kubelet",
                    format!("no allocatable devices within {REGISTER_WITHIN:?}; plugin log: {}", s.plugin_log()),
                    "the plugin must register and advertise healthy devices (see REG-001, LAW-001)",
                )
                // The pods and health scenarios need those devices; an earlier
                // failure of the stream itself is the cause to read.
                .stopping("the plugin's devices never became allocatable", &["LAW-001", "LAW-008"])
            })?;
            s.resource = Some(res);
            s.baseline = Some(ids);
            State::Env(s)
        }
    })
}

impl State<'_> {
    /// The last lines of the running (or last) plugin process's log, for a failure's evidence.
    pub(crate) fn log_excerpt(&self) -> Option<String> {
        let env: &Env = match self {
            State::Basic(b) => b,
            State::Env(e) => e,
            State::Health(h) => h,
        };
        let path = match (&env.plugin, &env.tree) {
            (Some(p), _) => p.log.clone(),
            (None, Some(t)) => t.logs.join(format!("plugin-{}.log", env.restarts.saturating_sub(1))),
            (None, None) => return None,
        };
        Some(super::evidence::log_excerpt(&std::fs::read_to_string(&path).unwrap_or_default(), 8, 800))
    }

    /// Close the streams the scenarios opened, stop the plugin, then the kubelet.
    pub(crate) async fn teardown(self) {
        match self {
            State::Basic(b) => b.close().stop().await,
            State::Env(e) => e.stop().await,
            State::Health(h) => h.close().stop().await,
        }
    }
}

impl Env<'_> {
    /// Stop the plugin, then the kubelet.
    pub(crate) async fn stop(self) {
        if let Some(p) = self.plugin {
            p.stop(Duration::from_secs(5)).await;
        }
        if let Some(k) = self.kubelet {
            k.stop().await;
        }
    }
}

impl Env<'_> {
    fn tree(&self) -> &Tree {
        // Only called in sessions that own a tree (never with --socket).
        self.tree.as_ref().expect("sessions without --socket own a tree")
    }

    fn plugin_log(&self) -> String {
        self.plugin.as_ref().map(|p| log_tail(&p.log, 4)).unwrap_or_else(|| "(no plugin process)".into())
    }

    /// The log of the process that crashed last.
    fn last_crash_log(&self) -> String {
        match (self.crashes.last(), &self.tree) {
            (Some(c), Some(t)) => log_tail(&t.logs.join(format!("plugin-{}.log", c.restart.saturating_sub(1))), 4),
            _ => self.plugin_log(),
        }
    }

    /// The log of the process that crashed first (each start has its own log).
    fn first_crash_log(&self) -> String {
        match (self.crashes.first(), &self.tree) {
            (Some(c), Some(t)) => log_tail(&t.logs.join(format!("plugin-{}.log", c.restart.saturating_sub(1))), 4),
            _ => self.plugin_log(),
        }
    }

    fn start_plugin(&mut self) -> std::result::Result<(), Outcome> {
        let tree = self.tree();
        let isolated = self.isolation != Isolation::None;
        let vars = tree.vars(isolated);
        let argv: Vec<String> = self.o.plugin.iter().map(|a| vars.substitute(a)).collect();
        let argv = super::env::isolated_argv(self.isolation, &tree.root, &argv);
        let log = tree.logs.join(format!("plugin-{}.log", self.restarts));
        self.restarts += 1;
        let p = PluginProcess::spawn(&argv, &vars.env(), &log)
            .map_err(|e| setup_fail("starting the plugin", e.to_string(), "check the command after --"))?;
        self.plugin_started = Instant::now();
        self.terminated = false;
        self.plugin = Some(p);
        Ok(())
    }

    /// Start the kubelet (the engine, in this process) on the tree.
    async fn start_recorder(&mut self) -> std::result::Result<(), Outcome> {
        self.start_kubelet(true).await
    }

    /// Start the kubelet; `clean`: delete the plugin directory's sockets first.
    async fn start_kubelet(&mut self, clean: bool) -> std::result::Result<(), Outcome> {
        let version = self.o.kubelet_version.unwrap_or_default();
        let (k, events) = Kubelet::start(self.tree(), self.o.timeout, version, clean, self.o.api_server)
            .await
            .map_err(|e| setup_fail("kubelet", e.to_string(), "check the temp dir"))?;
        self.kubelet = Some(k);
        self.events = Some(events);
        Ok(())
    }

    /// A kubelet restart: streams cancelled, sockets deleted, kubelet.sock re-created.
    async fn restart_kubelet(&mut self) -> std::result::Result<(), Outcome> {
        self.generation += 1;
        // Set before the new kubelet starts: a plugin may register again
        // before the restart returns.
        self.restarted_at = Some(Instant::now());
        match &self.kubelet {
            Some(k) => k.restart().await.map_err(|e| setup_fail("kubelet restart", e.to_string(), "see its log"))?,
            None => self.start_recorder().await?,
        }
        Ok(())
    }
}
