//! The runner and the code of every scenario. A session sets up a fresh
//! environment (node tree, kubelet, plugin process), runs its selected
//! scenarios in order and tears everything down; each scenario returns an
//! [`Outcome`]. Waiting is on events (the kubelet's events, process exit)
//! or on polling the kubelet's API, always with the scenario's bound.

use super::catalog::{Scenario, Session, SCENARIOS};
use super::checks;
use super::env::{
    is_socket, log_tail, plugin_client, pod_manifest, Isolation, Kubelet, PluginProcess, Registration, Seen, Snap,
    Tree, Via,
};
use super::evidence;
use super::filter::Pattern;
use super::{Outcome, Record, Verdict};
use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest, PreferredAllocationRequest,
};
use crate::core::{Error, Result};
use crate::kubelet::event::Stamped;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

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
}

/// Whether a scenario is selected by `--focus` / `--skip`.
pub fn selected(o: &Options, s: &Scenario) -> bool {
    let fields = [s.id, s.group, s.title];
    o.focus.as_ref().is_none_or(|p| p.matches(&fields)) && !o.skip.as_ref().is_some_and(|p| p.matches(&fields))
}

/// Progress of a run, for live output.
pub enum Progress<'a> {
    /// A scenario starts.
    Started(&'a Scenario),
    /// A scenario finished.
    Finished(&'a Record),
}

const REGISTER_WITHIN: Duration = Duration::from_secs(10);
const FIRST_SNAPSHOT_WITHIN: Duration = Duration::from_secs(5);
/// How long an empty first list may wait for the devices to follow.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);
/// Devices later than this after registering: the node had none meanwhile (WARN).
const DEVICES_SLOW: Duration = Duration::from_secs(1);
const REREGISTER_WITHIN: Duration = Duration::from_secs(5);
const COME_BACK_WITHIN: Duration = Duration::from_secs(10);
const EXIT_WITHIN: Duration = Duration::from_secs(10);
const POD_WITHIN: Duration = Duration::from_secs(10);
/// The kubelet's longest container restart back-off (`MaxContainerBackOff`).
const MAX_BACKOFF: Duration = Duration::from_secs(300);
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);
const DECOY: &str = "dpctl-test-other-vendor.sock";
const UNKNOWN_ID: &str = "dpctl-test-no-such-device";

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// Run the selected scenarios; `progress` sees each start and result.
pub async fn run(o: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Vec<Record>> {
    if o.plugin.is_empty() && o.socket.is_none() {
        return Err(Error::usage(
            "no plugin command; run dpctl test [FLAGS] -- PLUGIN-COMMAND [ARGS…], or pass --socket",
        ));
    }
    let mut isolation = Isolation::None;
    if o.isolate && o.socket.is_none() {
        let probe_tree = Tree::new()?;
        isolation = super::env::probe_isolation(&probe_tree).await?;
    }
    let mut records: Vec<Record> = Vec::new();
    // Set by a root-cause failure: every scenario after it is not run.
    // (Scenarios still to run in this session that report the cause itself run anyway.)
    let mut stopped: Option<(String, Vec<&str>)> = None;
    for session in Session::ALL {
        let chosen: Vec<&Scenario> = SCENARIOS.iter().filter(|s| s.session == session && selected(o, s)).collect();
        if chosen.is_empty() {
            continue;
        }
        let mut sess: Option<Sess> = None;
        let mut setup_failure: Option<(&str, Outcome)> = None;
        for (i, s) in chosen.iter().copied().enumerate() {
            progress(Progress::Started(s));
            let start = Instant::now();
            let mut outcome = if let Some((why, _)) = stopped.as_ref().filter(|(_, run)| !run.contains(&s.id)) {
                Outcome::not_run(why.clone())
            } else if o.socket.is_some() && s.needs_control {
                Outcome::skip("needs control of the plugin's process and kubelet; not with --socket")
            } else if s.id == "HEALTH-001" && o.health_trigger.is_none() {
                Outcome::skip("no --health-trigger given")
            } else if let Some((first, _)) = &setup_failure {
                Outcome::not_run(format!("this group's setup failed (see {first})"))
            } else {
                if sess.is_none() {
                    match Sess::setup(o, session, isolation).await {
                        Ok(x) => sess = Some(x),
                        Err(f) => setup_failure = Some((s.id, f)),
                    }
                }
                match (&mut sess, &setup_failure) {
                    (Some(x), _) => tokio::time::timeout(SCENARIO_LIMIT, x.scenario(s.id)).await.unwrap_or_else(|_| {
                        Outcome::fail(
                            s.id,
                            format!("the scenario did not finish within {SCENARIO_LIMIT:?}"),
                            "see the plugin's log",
                        )
                    }),
                    (None, Some((_, f))) => f.clone(),
                    (None, None) => Outcome::fail(s.id, "internal error: no session", "report this bug"),
                }
            };
            if let Some(stop) = outcome.stop.take().filter(|_| stopped.is_none()) {
                let failed: Vec<&str> =
                    records.iter().filter(|r| r.result == Verdict::Fail).map(|r| r.id.as_str()).collect();
                let rest: Vec<&'static str> = chosen[i + 1..].iter().map(|x| x.id).collect();
                let cause = root_cause(&stop, s.id, &failed, &rest);
                if cause.by != s.id {
                    outcome = Outcome::not_run(cause.why.clone());
                }
                stopped = Some((cause.why, cause.still_run));
            }
            let rec = Record::new(s, outcome, start.elapsed());
            progress(Progress::Finished(&rec));
            records.push(rec);
        }
        if let Some(x) = sess {
            x.teardown().await;
        }
    }
    Ok(records)
}

/// Where a root-cause failure is reported and what still runs (pure).
#[derive(Debug, PartialEq, Eq)]
struct RootCause {
    /// The scenario that reports the cause.
    by: String,
    /// The reason every other scenario is not run: "… (see BY)".
    why: String,
    /// Scenarios still to run in this session because they report the cause.
    still_run: Vec<&'static str>,
}

/// A stop raised by `current`: reported by a scenario of `stop.shown_by`
/// that already failed, or that is still to run in this session (`rest`),
/// else by `current` itself.
fn root_cause(stop: &super::Stop, current: &str, failed: &[&str], rest: &[&'static str]) -> RootCause {
    let earlier = failed.iter().copied().find(|id| stop.shown_by.contains(id));
    let still_run: Vec<&'static str> = rest.iter().copied().filter(|id| stop.shown_by.contains(id)).collect();
    let by = earlier.or(still_run.first().copied()).unwrap_or(current).to_string();
    RootCause { why: format!("{} (see {by})", stop.reason), by, still_run }
}

/// The plugin exiting on its own.
struct Crash {
    at: Instant,
    status: std::process::ExitStatus,
    /// `Sess::restarts` when it happened (one record per process).
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

/// The kubelet's first ListAndWatch message and the list it settled on.
#[derive(Clone)]
struct First {
    /// From registering (or opening the stream) to the first message.
    first_after: Duration,
    /// Devices in the first message.
    first_len: usize,
    /// From registering to the first message with devices (None: none came).
    devices_after: Option<Duration>,
    /// Size of the settled message.
    bytes: usize,
    /// The settled message.
    resp: ListAndWatchResponse,
}

/// The end of one of the kubelet's streams.
struct StreamEnd {
    at: Instant,
    /// When the kubelet accepted the registration (and opened the stream).
    opened: Instant,
    messages: usize,
    why: String,
}

/// One session's environment and what was seen so far.
struct Sess<'a> {
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
    decoy: Option<tokio::net::UnixListener>,
    streams: Vec<tonic::Streaming<ListAndWatchResponse>>,
    /// Another stream than the kubelet's (Health session).
    early: Option<tonic::Streaming<ListAndWatchResponse>>,
    /// It was opened before the kubelet's.
    early_first: bool,
    first: Option<First>,
    resource: Option<String>,
    baseline: Option<Vec<String>>,
    allocated: Vec<String>,
}

fn setup_fail(what: &str, answer: String, fix: &str) -> Outcome {
    Outcome::fail(format!("session setup: {what}"), answer, fix)
}

impl<'a> Sess<'a> {
    async fn setup(o: &'a Options, session: Session, isolation: Isolation) -> std::result::Result<Sess<'a>, Outcome> {
        let mut s = Sess {
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
            streams: Vec::new(),
            early: None,
            early_first: false,
            first: None,
            resource: o.resource.clone(),
            baseline: None,
            allocated: Vec::new(),
        };
        if o.socket.is_some() {
            return Ok(s);
        }
        let tree = Tree::new().map_err(|e| setup_fail("node tree", e.to_string(), "check $TMPDIR"))?;
        s.tree = Some(tree);
        match session {
            Session::Basic => {
                s.start_recorder().await?;
                let path = s.tree().plugin_dir.join(DECOY);
                s.decoy = Some(tokio::net::UnixListener::bind(&path).map_err(|e| {
                    setup_fail("decoy socket", format!("{}: {e}", path.display()), "check the temp dir")
                })?);
                s.start_plugin()?;
            }
            Session::StartOrder => s.start_plugin()?,
            Session::KubeletRestart | Session::PluginRestart => {
                s.start_recorder().await?;
                s.start_plugin()?;
                s.baseline_snapshot().await?;
            }
            Session::Health => {
                // Another stream opened before the kubelet's (the plugin serves
                // before kubelet.sock exists), so the kubelet's is not the one a
                // shared update channel favours; see HEALTH-001.
                s.start_plugin()?;
                let early = s.open_early_stream().await;
                // A kubelet that finds the plugin serving (its start would
                // delete the plugin's socket, and the stream with it).
                s.start_kubelet(false).await?;
                s.baseline_snapshot().await?;
                // Only a stream on the endpoint under test counts (a plugin may serve several).
                let registered = s.find_reg(0, s.plugin_started, true).map(|r| r.socket);
                if let Some((_, stream)) = early.filter(|(sock, _)| Some(sock) == registered.as_ref()) {
                    s.early = Some(stream);
                    s.early_first = true;
                }
                if s.early.is_none() {
                    // It served only once the kubelet existed: the other stream comes
                    // after the kubelet's (a `dpctl watch`, a monitoring agent).
                    s.early = s.open_late_stream().await;
                }
            }
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
            }
        }
        Ok(s)
    }

    fn tree(&self) -> &Tree {
        // Only called in sessions that own a tree (never with --socket).
        self.tree.as_ref().expect("sessions without --socket own a tree")
    }

    async fn teardown(mut self) {
        self.streams.clear();
        self.early = None;
        if let Some(p) = self.plugin.take() {
            p.stop(Duration::from_secs(5)).await;
        }
        if let Some(k) = self.kubelet.take() {
            k.stop().await;
        }
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
        let (k, events) = Kubelet::start(self.tree(), self.o.timeout, version, clean)
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

    fn drain(&mut self) {
        while let Some(e) = self.events.as_mut().and_then(|r| r.try_recv().ok()) {
            self.seen.take(&e);
        }
    }

    /// The next kubelet event before `until` (None: none came, or no kubelet runs).
    async fn next_event(&mut self, until: Instant) -> Option<Arc<Stamped>> {
        let got = match self.events.as_mut() {
            Some(rx) => tokio::time::timeout_at(until.into(), rx.recv()).await.ok().flatten(),
            None => None,
        };
        if got.is_none() {
            // No kubelet, or it stopped: nothing more will come before `until`.
            tokio::time::sleep_until(until.into()).await;
        }
        got
    }

    fn wanted(&self, r: &Registration) -> bool {
        self.o.resource.as_ref().is_none_or(|n| &r.resource == n)
    }

    fn find_reg(&self, min_gen: u64, since: Instant, good: bool) -> Option<Registration> {
        self.seen
            .regs
            .iter()
            .find(|r| {
                r.generation >= min_gen
                    && r.at >= since
                    && self.wanted(r)
                    && (!good || (r.rejected.is_none() && r.dial_back.is_ok()))
            })
            .cloned()
    }

    /// Wait for a registration (of generation ≥ `min_gen`, at or after `since`); `good` = accepted.
    /// A plugin that exits meanwhile is restarted as the kubelet restarts a
    /// DaemonSet pod (after the back-off, which extends the wait), once.
    async fn wait_reg(&mut self, min_gen: u64, since: Instant, until: Instant, good: bool) -> Option<Registration> {
        let mut until = until;
        let mut extended = false;
        loop {
            self.drain();
            if let Some(r) = self.find_reg(min_gen, since, good) {
                return Some(r);
            }
            // A plugin that exited registers no more; look every 100 ms.
            let step = until.min(Instant::now() + Duration::from_millis(100));
            match self.next_event(step).await {
                Some(e) => self.seen.take(&e),
                None if Instant::now() >= until => {
                    // A Register still in its dial-back, or one whose dial-back failed
                    // (a plugin that registers before it serves, then serves and retries):
                    // give the answer, or the retry, its moment.
                    if extended || !(self.pending_attempt(min_gen, since) || self.dial_back_failed(min_gen, since)) {
                        return None;
                    }
                    extended = true;
                    until = Instant::now() + Duration::from_secs(5);
                }
                None => {
                    // Nothing can register once kubelet.sock is gone (deleted by the plugin).
                    if self.kubelet.is_some() && !is_socket(&self.tree().kubelet_socket()) {
                        self.drain();
                        return self.find_reg(min_gen, since, good);
                    }
                    let Some(status) = self.plugin.as_mut().and_then(|p| p.exited()) else { continue };
                    self.drain();
                    if let Some(r) = self.find_reg(min_gen, since, good) {
                        return Some(r);
                    }
                    match self.backoff_restart(status).await {
                        Some(delay) => until += delay,
                        None => return None,
                    }
                }
            }
        }
    }

    /// The plugin exited on its own: restart it after the back-off, as the
    /// kubelet restarts a DaemonSet pod; None when restarts are off or it
    /// already crashed once before (a crash loop).
    async fn backoff_restart(&mut self, status: std::process::ExitStatus) -> Option<Duration> {
        if self.terminated || self.crashes.last().is_some_and(|c| c.restart == self.restarts) {
            return None; // this exit is already handled
        }
        // A crash loop: this process, like the one before it, exited before registering.
        let registered = self.seen.regs.iter().any(|r| r.at >= self.plugin_started && r.dial_back.is_ok());
        let looping = !registered && self.crashes.last().is_some_and(|c| !c.registered);
        self.crashes.push(Crash { at: Instant::now(), status, restart: self.restarts, delay: None, registered });
        let base = self.o.restart_backoff?;
        if looping {
            return None;
        }
        // The kubelet doubles the back-off at each restart, up to 5 minutes.
        let done = self.crashes.iter().filter(|c| c.delay.is_some()).count() as u32;
        let delay = base.saturating_mul(2u32.saturating_pow(done)).min(MAX_BACKOFF);
        tokio::time::sleep(delay).await;
        if let Some(c) = self.crashes.last_mut() {
            c.delay = Some(delay);
        }
        self.start_plugin().ok()?;
        // The new process gets the whole start bound, as at its first start.
        Some(delay + REGISTER_WITHIN)
    }

    /// What relying on restarts (since `since`) cost, if it did.
    fn restart_cost(&self, since: Instant) -> Option<String> {
        let restarted: Vec<&Crash> = self.crashes.iter().filter(|c| c.delay.is_some() && c.at >= since).collect();
        let first = restarted.first()?;
        let waited: Duration = restarted.iter().filter_map(|c| c.delay).sum();
        Some(format!(
            "the plugin exited ({}) and worked only after {} restart(s) with back-off, {} s lost ({} s after the first exit); in a cluster its DaemonSet pod is restarted the same way, with back-off growing from 10 s to 5 min",
            first.status,
            restarted.len(),
            waited.as_secs(),
            Instant::now().saturating_duration_since(first.at).as_secs()
        ))
    }

    /// Wait for the kubelet's first snapshot on `socket` in `generation`
    /// (at or after `since`), then for the device list the plugin settles
    /// on: a plugin may send an empty list first and its devices a moment
    /// later (Intel's GPU plugin does), which the kubelet copes with.
    async fn wait_snap(
        &mut self,
        generation: u64,
        socket: &std::path::Path,
        since: Instant,
        until: Instant,
    ) -> Option<Settled> {
        let of = |s: &Snap| s.generation == generation && s.socket == socket && s.at >= since;
        let first = loop {
            self.drain();
            if let Some(s) = self.seen.snaps.iter().find(|s| of(s)) {
                break (s.at, s.resp.devices.len(), s.bytes, s.resp.clone());
            }
            let e = self.next_event(until).await?;
            self.seen.take(&e);
        };
        let (first_at, first_len, bytes, resp) = first;
        let mut seen = Settled { first_at, first_len, devices_at: None, bytes, resp };
        let settle = first_at + SETTLE_WITHIN;
        loop {
            self.drain();
            if let Some(s) = self.seen.snaps.iter().find(|s| of(s) && !s.resp.devices.is_empty()) {
                seen.devices_at = Some(s.at);
                seen.bytes = s.bytes;
                seen.resp = s.resp.clone();
                return Some(seen);
            }
            if self.stream_ended(generation, socket, since) {
                return Some(seen);
            }
            match self.next_event(settle).await {
                Some(e) => self.seen.take(&e),
                None => return Some(seen),
            }
        }
    }

    /// A Register that arrived and has no answer yet (its dial-back runs).
    fn pending_attempt(&self, min_gen: u64, since: Instant) -> bool {
        let answered = self.seen.regs.iter().filter(|r| r.generation >= min_gen && r.at >= since).count();
        let asked = self.seen.attempts.iter().filter(|a| a.0 >= min_gen && a.1 >= since).count();
        asked > answered
    }

    fn dial_back_failed(&self, min_gen: u64, since: Instant) -> bool {
        self.seen
            .regs
            .iter()
            .any(|r| r.generation >= min_gen && r.at >= since && r.rejected.is_none() && r.dial_back.is_err())
    }

    /// When the Register behind `r` arrived (the kubelet reports its answer
    /// only after the dial-back, up to 10 s later).
    fn arrival(&self, r: &Registration) -> Instant {
        self.seen
            .attempts
            .iter()
            .rev()
            .find(|a| a.0 == r.generation && a.3 == r.endpoint && a.1 <= r.at)
            .map(|a| a.1)
            .unwrap_or(r.at)
    }

    /// How the dial-back of the Register at `at` failed, as it happened.
    fn dial_back_story(&self, generation: u64, at: Instant) -> Option<String> {
        let (_, socket, when, error) = self.seen.dial_fails.iter().find(|f| f.0 == generation && f.2 >= at)?;
        Some(format!(
            "the kubelet's dial-back to {} failed {} after Register arrived: {error}",
            socket.display(),
            ms(when.saturating_duration_since(at)),
        ))
    }

    /// The end of the kubelet's stream on `socket` (the plugin's doing: the
    /// suite's kubelet ends streams only when it restarts or stops).
    fn stream_end(&self, generation: u64, socket: &std::path::Path, since: Instant) -> Option<StreamEnd> {
        let (_, _, why, at) = self.seen.ends.iter().find(|e| e.0 == generation && e.1 == socket && e.3 >= since)?;
        let opened = self
            .seen
            .regs
            .iter()
            .rev()
            .find(|r| r.generation == generation && r.socket == socket && r.at <= *at && r.dial_back.is_ok())
            .map(|r| r.at)
            .unwrap_or(*at);
        let messages = self
            .seen
            .snaps
            .iter()
            .filter(|s| s.generation == generation && s.socket == socket && s.at >= opened && s.at <= *at)
            .count();
        let why = if evidence::is_connection_lost(why) {
            format!("the plugin closed the connection (exited?) ({why})")
        } else {
            why.clone()
        };
        Some(StreamEnd { at: *at, opened, messages, why })
    }

    fn stream_ended(&self, generation: u64, socket: &std::path::Path, since: Instant) -> bool {
        self.stream_end(generation, socket, since).is_some()
    }

    /// "; the plugin ended the stream (status OK) 2 ms after the kubelet opened it, after 1 message(s)"
    fn stream_end_text(&self, generation: u64, socket: &std::path::Path) -> String {
        match self.stream_end(generation, socket, self.plugin_started) {
            Some(e) => format!(
                "; {} {} after the kubelet opened it, after {} message(s)",
                e.why,
                ms(e.at.saturating_duration_since(e.opened)),
                e.messages
            ),
            None => String::new(),
        }
    }

    fn no_registration(&mut self, within: Duration) -> Outcome {
        let exited = self.plugin.as_mut().and_then(|p| p.exited());
        let accepted = self.seen.regs.iter().any(|r| self.wanted(r) && r.rejected.is_none() && r.dial_back.is_ok());
        let log = self.plugin_log();
        // The root causes first: each leaves nothing else to test.
        if self.kubelet.is_some() && !is_socket(&self.tree().kubelet_socket()) {
            return Outcome::fail(
                "plugin start (the shared plugin directory)",
                format!(
                    "kubelet.sock was deleted by the plugin, so it cannot register{}; plugin log: {log}",
                    exited.map(|s| format!("; then it exited ({s})")).unwrap_or_default()
                ),
                "delete only your own socket (a stale one from your previous run), never *.sock",
            )
            .stopping("kubelet.sock was deleted by the plugin", &["REG-007"]);
        }
        if let (Some(status), false) = (exited, accepted) {
            let again = match self.crashes.iter().find_map(|c| c.delay) {
                Some(d) => format!(
                    "; restarted after a {} s back-off (as the kubelet restarts a DaemonSet pod), it exited again: a crash loop",
                    d.as_secs()
                ),
                None => String::new(),
            };
            let log = if self.crashes.len() > 1 { self.first_crash_log() } else { log };
            return Outcome::fail(
                "plugin start",
                format!("the plugin exited ({status}) before registering{again}; plugin log: {log}"),
                "see the plugin's log: it must keep running, serve its socket and register",
            )
            .stopping("the plugin exited at start", &[]);
        }
        if let (Some(r), false) = (self.seen.regs.iter().rev().find(|r| self.wanted(r)), accepted) {
            let why = r.rejected.clone().or(r.dial_back.clone().err()).unwrap_or_default();
            return Outcome::fail(
                "Register (the kubelet's answer)",
                format!("the kubelet refused every registration within {within:?}: {why}; plugin log: {log}"),
                "fix what REG-002..REG-005 report, then register again",
            )
            .stopping(
                "the kubelet refused the plugin's registration",
                &["REG-002", "REG-003", "REG-004", "REG-005", "REG-008"],
            );
        }
        let others: BTreeSet<&str> =
            self.seen.regs.iter().filter(|r| !self.wanted(r)).map(|r| r.resource.as_str()).collect();
        let others = match (&self.o.resource, others.is_empty()) {
            (Some(want), false) => format!("; it registered {others:?}, not --resource {want:?}"),
            _ => String::new(),
        };
        let pending = self
            .seen
            .attempts
            .iter()
            .rev()
            .find(|a| self.o.resource.as_ref().is_none_or(|n| &a.2 == n))
            .map(|(generation, at, _, endpoint)| {
                let story = self
                    .dial_back_story(*generation, *at)
                    .unwrap_or_else(|| "the kubelet is still dialling it back".into());
                format!(
                    "; Register (endpoint {endpoint:?}) arrived {} after the start, still unanswered: {story}",
                    ms(at.saturating_duration_since(self.plugin_started))
                )
            })
            .unwrap_or_default();
        let o = Outcome::fail(
            "Register on kubelet.sock (or GetInfo on a plugins_registry socket)",
            format!("no accepted registration within {within:?}{pending}{others}; plugin log: {log}"),
            "serve the DevicePlugin socket first, then call Register on {kubelet-socket} (or serve pluginregistration in {plugins-registry-dir})",
        );
        if accepted {
            o
        } else {
            o.stopping("the plugin did not register", &[])
        }
    }

    /// The first accepted registration of this session.
    async fn ensure_reg(&mut self) -> std::result::Result<Registration, Outcome> {
        let until = self.plugin_started + REGISTER_WITHIN;
        match self.wait_reg(0, self.plugin_started, until, false).await {
            Some(r) => Ok(r),
            None => Err(self.no_registration(REGISTER_WITHIN)),
        }
    }

    async fn baseline_snapshot(&mut self) -> std::result::Result<(), Outcome> {
        let until = self.plugin_started + REGISTER_WITHIN;
        let Some(r) = self.wait_reg(0, self.plugin_started, until, true).await else {
            return Err(self.no_registration(REGISTER_WITHIN));
        };
        let Some(seen) = self.wait_snap(r.generation, &r.socket, r.at, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
        else {
            return Err(setup_fail(
                "waiting for the first ListAndWatch snapshot",
                format!("nothing within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the device list as soon as ListAndWatch is called",
            ));
        };
        self.resource = Some(r.resource.clone());
        self.baseline = Some(seen.resp.devices.iter().map(|d| d.id.clone()).collect());
        Ok(())
    }

    /// The plugin's socket: --socket, or the registered endpoint.
    async fn endpoint(&mut self) -> std::result::Result<PathBuf, Outcome> {
        if let Some(s) = &self.o.socket {
            return Ok(s.clone());
        }
        let r = self.ensure_reg().await?;
        if r.rejected.is_some() || r.dial_back.is_err() {
            let until = self.plugin_started + REGISTER_WITHIN;
            return match self.wait_reg(0, self.plugin_started, until, true).await {
                Some(r) => Ok(r.socket),
                None => Err(self.no_registration(REGISTER_WITHIN)),
            };
        }
        Ok(r.socket)
    }

    async fn client(
        &mut self,
    ) -> std::result::Result<
        crate::api::deviceplugin::device_plugin_client::DevicePluginClient<tonic::transport::Channel>,
        Outcome,
    > {
        let ep = self.endpoint().await?;
        plugin_client(&ep, self.o.timeout)
            .await
            .map_err(|e| Outcome::fail("dial the plugin", e.to_string(), "keep serving the socket you registered"))
    }

    async fn options(&mut self) -> std::result::Result<DevicePluginOptions, Outcome> {
        let mut c = self.client().await?;
        match tokio::time::timeout(self.o.timeout, c.get_device_plugin_options(Empty {})).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(Outcome::fail(
                "GetDevicePluginOptions",
                evidence::status_text(s.code(), s.message()),
                "answer GetDevicePluginOptions",
            )),
            Err(_) => {
                Err(Outcome::fail("GetDevicePluginOptions", "timed out", "answer GetDevicePluginOptions promptly"))
            }
        }
    }

    /// Open a ListAndWatch stream and read its first message within the bound.
    async fn open_stream(
        &mut self,
    ) -> std::result::Result<(Duration, tonic::Streaming<ListAndWatchResponse>, ListAndWatchResponse), Outcome> {
        let mut c = self.client().await?;
        let start = Instant::now();
        let until = start + FIRST_SNAPSHOT_WITHIN;
        let mut stream = match tokio::time::timeout_at(until.into(), c.list_and_watch(Empty {})).await {
            Ok(Ok(s)) => s.into_inner(),
            Ok(Err(s)) => {
                return Err(Outcome::fail(
                    "ListAndWatch",
                    evidence::status_text(s.code(), s.message()),
                    "serve ListAndWatch",
                ))
            }
            Err(_) => {
                return Err(Outcome::fail(
                    "ListAndWatch",
                    format!("no answer within {FIRST_SNAPSHOT_WITHIN:?}"),
                    "send the device list as soon as ListAndWatch is called",
                ))
            }
        };
        match tokio::time::timeout_at(until.into(), stream.message()).await {
            Ok(Ok(Some(m))) => Ok((start.elapsed(), stream, m)),
            Ok(Ok(None)) => Err(Outcome::fail(
                "ListAndWatch",
                "the stream ended without a snapshot",
                "keep the stream open and send the device list first",
            )),
            Ok(Err(s)) => Err(Outcome::fail(
                "ListAndWatch",
                evidence::status_text(s.code(), s.message()),
                "send the device list first",
            )),
            Err(_) => Err(Outcome::fail(
                "ListAndWatch",
                format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the full device list as soon as ListAndWatch is called",
            )),
        }
    }

    /// The first snapshot the kubelet got and the list it settled on (or,
    /// with --socket, our own first stream's), timed from registering.
    async fn ensure_first(&mut self) -> std::result::Result<First, Outcome> {
        if let Some(f) = &self.first {
            return Ok(f.clone());
        }
        let first = if self.o.socket.is_some() {
            let start = Instant::now();
            let (took, mut stream, m) = self.open_stream().await?;
            let mut f = First {
                first_after: took,
                first_len: m.devices.len(),
                devices_after: (!m.devices.is_empty()).then_some(took),
                bytes: prost::Message::encoded_len(&m),
                resp: m,
            };
            if f.devices_after.is_none() {
                let until = start + SETTLE_WITHIN;
                while let Ok(Ok(Some(m))) = tokio::time::timeout_at(until.into(), stream.message()).await {
                    if !m.devices.is_empty() {
                        f.devices_after = Some(start.elapsed());
                        f.bytes = prost::Message::encoded_len(&m);
                        f.resp = m;
                        break;
                    }
                }
            }
            self.streams.push(stream);
            f
        } else {
            let r = self.ensure_reg().await?;
            let ep = self.endpoint().await?;
            // The registration the kubelet accepted (and then opened its stream for).
            let r = self.find_reg(0, self.plugin_started, true).filter(|x| x.socket == ep).unwrap_or(r);
            let reg_at = r.at;
            match self.wait_snap(r.generation, &ep, reg_at, reg_at + FIRST_SNAPSHOT_WITHIN).await {
                Some(seen) => First {
                    first_after: seen.first_at.saturating_duration_since(reg_at),
                    first_len: seen.first_len,
                    devices_after: seen.devices_at.map(|d| d.saturating_duration_since(reg_at)),
                    bytes: seen.bytes,
                    resp: seen.resp,
                },
                None => {
                    return Err(Outcome::fail(
                        "ListAndWatch (the kubelet's stream)",
                        format!(
                            "no snapshot within {FIRST_SNAPSHOT_WITHIN:?} of registering{}; plugin log: {}",
                            self.stream_end_text(r.generation, &ep),
                            self.plugin_log()
                        ),
                        "send the full device list as soon as ListAndWatch is called",
                    ))
                }
            }
        };
        self.first = Some(first.clone());
        Ok(first)
    }

    async fn healthy(&mut self) -> std::result::Result<Vec<String>, Outcome> {
        let f = self.ensure_first().await?;
        Ok(checks::healthy_ids(&f.resp.devices))
    }

    async fn allocate(
        &mut self,
        containers: Vec<Vec<String>>,
    ) -> std::result::Result<std::result::Result<AllocateResponse, String>, Outcome> {
        let mut c = self.client().await?;
        let req = AllocateRequest {
            container_requests: containers
                .into_iter()
                .map(|ids| ContainerAllocateRequest { devices_ids: ids })
                .collect(),
        };
        Ok(match tokio::time::timeout(self.o.timeout, c.allocate(req)).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(evidence::status_text(s.code(), s.message())),
            Err(_) => Err(format!("no answer within {:?}", self.o.timeout)),
        })
    }

    async fn wait_allocatable(
        &mut self,
        within: Duration,
        pred: impl Fn(&[String]) -> bool,
    ) -> Option<(String, Vec<String>)> {
        let until = Instant::now() + within;
        loop {
            if let Some(mk) = &self.kubelet {
                if let Ok(all) = mk.allocatable(self.o.timeout).await {
                    let hit = match &self.resource {
                        Some(r) => all.get(r).filter(|ids| !ids.is_empty()).map(|ids| (r.clone(), ids.clone())),
                        None => all.into_iter().find(|(_, ids)| !ids.is_empty()),
                    };
                    if let Some((r, ids)) = hit {
                        if pred(&ids) {
                            return Some((r, ids));
                        }
                    }
                }
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_pod(&mut self, name: &str, present: bool, within: Duration) -> Option<Vec<String>> {
        let until = Instant::now() + within;
        let res = self.resource.clone().unwrap_or_default();
        loop {
            if let Some(mk) = &self.kubelet {
                if let Ok(p) = mk.pod_devices(name, self.o.timeout).await {
                    match (present, p) {
                        // Released kubelets list a pod still being admitted, without
                        // devices; every suite pod asks for at least one, so wait for them.
                        (true, Some(devs)) if devs.get(&res).is_some_and(|d| !d.is_empty()) => {
                            return devs.get(&res).cloned()
                        }
                        (false, None) => return Some(Vec::new()),
                        _ => {}
                    }
                }
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn write_pod(&self, name: &str, n: usize) -> std::result::Result<PathBuf, Outcome> {
        let res = self.resource.clone().unwrap_or_default();
        let path = self.tree().manifests.join(format!("{name}.yaml"));
        std::fs::write(&path, pod_manifest(name, &res, n))
            .map_err(|e| Outcome::fail("write a pod manifest", e.to_string(), "check the temp dir"))?;
        Ok(path)
    }

    fn kubelet_log(&self) -> String {
        self.kubelet.as_ref().map(|m| log_tail(&m.log, 3)).unwrap_or_default()
    }

    async fn scenario(&mut self, id: &str) -> Outcome {
        let r = match id {
            "REG-001" => self.reg_within().await,
            "REG-002" => self.reg_version().await,
            "REG-003" => self.reg_resource().await,
            "REG-004" => self.reg_endpoint().await,
            "REG-005" => self.reg_dial_back().await,
            "REG-006" => self.reg_options().await,
            "REG-007" => self.reg_keeps_sockets().await,
            "REG-008" => self.reg_watcher().await,
            "LAW-001" => self.law_first().await,
            "LAW-002" => {
                self.law_check(
                    checks::id_problems,
                    "use unique, non-empty IDs of at most 63 printable characters without spaces",
                )
                .await
            }
            "LAW-003" => {
                self.law_check(
                    checks::health_problems,
                    "send exactly \"Healthy\" or \"Unhealthy\" (pluginapi.Healthy / pluginapi.Unhealthy)",
                )
                .await
            }
            "LAW-004" => self.law_size().await,
            "LAW-005" => {
                self.law_check(
                    checks::topology_problems,
                    "list each NUMA node once, none negative, or leave topology unset",
                )
                .await
            }
            "LAW-006" => self.law_second().await,
            "LAW-007" => self.law_cancel().await,
            "LAW-008" => self.law_open().await,
            "ALLOC-001" => self.alloc_each().await,
            "ALLOC-002" => self.alloc_multi().await,
            "ALLOC-003" => self.alloc_not_empty().await,
            "ALLOC-004" => self.alloc_unknown().await,
            "ALLOC-005" => self.alloc_concurrent().await,
            "PREF-001" | "PREF-002" | "PREF-003" => self.preferred(id).await,
            "PRE-001" => self.pre_start().await,
            "ORDER-001" => self.start_order().await,
            "KRES-001" => self.kres_reregister().await,
            "KRES-002" => self.kres_same_ids().await,
            "KRES-003" => self.kres_repeated().await,
            "KRES-004" => self.kres_pods_keep().await,
            "PRES-001" => self.pres_exit().await,
            "PRES-002" => self.pres_own_socket().await,
            "PRES-003" => self.pres_others().await,
            "PRES-004" => self.pres_same_ids().await,
            "E2E-001" => self.e2e_pod().await,
            "E2E-002" => self.e2e_free().await,
            "KRES-005" => self.kres_admission_after_restart().await,
            "ROLL-001" => self.rolling_update().await,
            "HEALTH-001" => self.health().await,
            other => Err(Outcome::fail(other, "no code for this scenario", "report this bug")),
        };
        r.unwrap_or_else(|o| o)
    }
}

type Res = std::result::Result<Outcome, Outcome>;

#[path = "run_versions.rs"]
mod versions;

impl Sess<'_> {
    async fn reg_within(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        let via = if r.via == Via::KubeletSocket { "kubelet.sock" } else { "the plugin watcher" };
        let took = format!("after {} via {via}", ms(self.arrival(&r).saturating_duration_since(self.plugin_started)));
        match self.restart_cost(self.began) {
            Some(cost) => Ok(Outcome::warn(
                format!("{took}, only because it was restarted"),
                Some(super::Evidence {
                    rpc: "plugin start".into(),
                    answer: format!("{cost}; log of the first run: {}", self.first_crash_log()),
                    fix: "keep running: retry what failed with back-off instead of exiting".into(),
                }),
            )),
            None => Ok(Outcome::pass(took)),
        }
    }

    async fn reg_version(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        let ok = r.version.split(',').any(|v| v == crate::api::VERSION);
        if ok && (r.via == Via::PluginWatcher || r.version == crate::api::VERSION) {
            return Ok(Outcome::pass(""));
        }
        Ok(Outcome::fail("RegisterRequest.version", format!("{:?}", r.version), "send pluginapi.Version (\"v1beta1\")"))
    }

    async fn reg_resource(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        if let Some(p) = crate::core::validate::resource_name_problem(&r.resource) {
            return Ok(Outcome::fail(
                "RegisterRequest.resource_name",
                format!("{:?}: {p}", r.resource),
                "register a name like vendor.example/gpu",
            ));
        }
        Ok(Outcome::pass(r.resource))
    }

    async fn reg_endpoint(&mut self) -> Res {
        let r = self.reg_or_retry().await?;
        if r.via == Via::KubeletSocket {
            if let Some(p) = checks::endpoint_problem(&r.endpoint) {
                return Ok(Outcome::fail(
                    "RegisterRequest.endpoint",
                    p,
                    "send the socket's file name, e.g. \"vendor-gpu.sock\"",
                ));
            }
        } else if r.socket.parent() != Some(self.tree().plugin_dir.as_path()) {
            return Ok(Outcome::fail(
                "GetInfo.endpoint",
                format!("{:?}", r.endpoint),
                "serve the DevicePlugin socket in the device-plugin directory",
            ));
        }
        if !is_socket(&r.socket) {
            return Ok(Outcome::fail(
                "RegisterRequest.endpoint",
                format!("{} is not a socket", r.socket.display()),
                "register the socket you serve on",
            ));
        }
        Ok(Outcome::pass(r.endpoint))
    }

    async fn reg_dial_back(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        match (&r.rejected, &r.dial_back) {
            (None, Ok(_)) => Ok(Outcome::pass("")),
            // The request itself is wrong: REG-002..REG-004 say how; no dial-back happened.
            (Some(e), _) => Ok(Outcome::not_run(format!("the kubelet refused the request before dialling back: {e}"))),
            (None, Err(e)) => {
                let arrived = self.arrival(&r);
                let story =
                    self.dial_back_story(r.generation, arrived).unwrap_or_else(|| "the dial-back failed".into());
                let later = self
                    .find_reg(r.generation, r.at, true)
                    .map(|ok| {
                        format!(
                            "; a later Register was accepted {} after the first arrived",
                            ms(ok.at.saturating_duration_since(arrived))
                        )
                    })
                    .unwrap_or_default();
                Ok(Outcome::fail(
                    "GetDevicePluginOptions (the kubelet's dial-back inside Register)",
                    format!("{story}; after 10 s of retries the kubelet refused the registration ({e}){later}"),
                    "start serving the DevicePlugin socket before calling Register (the kubelet dials back inside Register, which blocks until then)",
                ))
            }
        }
    }

    /// The first registration; when only its dial-back failed (REG-005's
    /// to judge), the one that worked after it, if one comes.
    async fn reg_or_retry(&mut self) -> std::result::Result<Registration, Outcome> {
        let first = self.ensure_reg().await?;
        if first.dial_back.is_err() && first.rejected.is_none() {
            let until = Instant::now() + Duration::from_secs(5);
            return Ok(self.wait_reg(first.generation, first.at, until, true).await.unwrap_or(first));
        }
        Ok(first)
    }

    async fn reg_options(&mut self) -> Res {
        let r = self.reg_or_retry().await?;
        if r.via == Via::PluginWatcher {
            return Ok(Outcome::skip("the plugin watcher sends no options; the kubelet reads GetDevicePluginOptions"));
        }
        if let Some(e) = &r.rejected {
            return Ok(Outcome::not_run(format!("the kubelet refused the request before dialling back: {e}")));
        }
        let Ok(got) = &r.dial_back else {
            return Ok(Outcome::fail(
                "GetDevicePluginOptions",
                "the dial-back failed (see REG-005)",
                "serve before registering",
            ));
        };
        let sent = r.request_options.unwrap_or_default();
        if &sent == got {
            Ok(Outcome::pass(checks::options_text(got)))
        } else {
            Ok(Outcome::fail(
                "RegisterRequest.options vs GetDevicePluginOptions",
                format!(
                    "sent {}, GetDevicePluginOptions says {}",
                    checks::options_text(&sent),
                    checks::options_text(got)
                ),
                "send the same options in RegisterRequest as GetDevicePluginOptions returns",
            ))
        }
    }

    async fn reg_keeps_sockets(&mut self) -> Res {
        // Give the plugin its start; not registering is REG-001's to judge.
        let _ = self.ensure_reg().await;
        let tree = self.tree();
        let missing: Vec<String> = [crate::core::paths::KUBELET_SOCKET_NAME, DECOY]
            .iter()
            .filter(|n| !is_socket(&tree.plugin_dir.join(n)))
            .map(|n| n.to_string())
            .collect();
        if missing.is_empty() {
            Ok(Outcome::pass(""))
        } else {
            Ok(Outcome::fail(
                "plugin start",
                format!(
                    "{} {} deleted by the plugin",
                    missing.join(" and "),
                    if missing.len() == 1 { "was" } else { "were" }
                ),
                "delete only your own socket (a stale one from your previous run), never *.sock",
            ))
        }
    }

    async fn reg_watcher(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        if r.via == Via::KubeletSocket {
            return Ok(Outcome::skip("the plugin registered through kubelet.sock, not the plugin watcher"));
        }
        if let Some(e) = &r.rejected {
            return Ok(Outcome::fail(
                "GetInfo",
                e.clone(),
                "return type DevicePlugin, the resource name, the socket path and [\"v1beta1\"]",
            ));
        }
        match &r.notify {
            Some(Err(e)) => Ok(Outcome::fail("NotifyRegistrationStatus", e.clone(), "answer NotifyRegistrationStatus")),
            _ => Ok(Outcome::pass("")),
        }
    }

    async fn law_first(&mut self) -> Res {
        let f = self.ensure_first().await?;
        let n = f.resp.devices.len();
        let Some(devices_after) = f.devices_after else {
            return Ok(Outcome::fail(
                "ListAndWatch (the kubelet's stream)",
                format!(
                    "{} message(s), none with a device, within {SETTLE_WITHIN:?} of the first; the node's capacity stays 0",
                    self.seen.snaps.len().max(1)
                ),
                "send the device list you found; do not start ListAndWatch before discovery is done",
            ));
        };
        if devices_after > FIRST_SNAPSHOT_WITHIN {
            return Ok(Outcome::fail(
                "ListAndWatch (the kubelet's stream)",
                format!(
                    "the devices came {} after registering; the node's capacity was 0 until then",
                    ms(devices_after)
                ),
                "discover devices before registering; send the full list as soon as ListAndWatch is called",
            ));
        }
        if f.first_len == 0 || devices_after > DEVICES_SLOW {
            let what = if f.first_len == 0 {
                format!(
                    "the first message (after {}) listed no devices; the {n} device(s) came {} after registering",
                    ms(f.first_after),
                    ms(devices_after)
                )
            } else {
                format!("the {n} device(s) came {} after registering", ms(devices_after))
            };
            return Ok(Outcome::warn(
                format!("{what}; the node reads capacity 0 meanwhile"),
                Some(super::Evidence {
                    rpc: "ListAndWatch (the kubelet's stream)".into(),
                    answer: what,
                    fix: "send the full device list in the first ListAndWatch message".into(),
                }),
            ));
        }
        Ok(Outcome::pass(format!("{n} device(s) after {}", ms(f.first_after))))
    }

    async fn law_check(&mut self, f: fn(&[crate::api::deviceplugin::Device]) -> Vec<String>, fix: &str) -> Res {
        let first = self.ensure_first().await?;
        let p = f(&first.resp.devices);
        if p.is_empty() {
            Ok(Outcome::pass(""))
        } else {
            let mut text = p.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
            if p.len() > 5 {
                text.push_str(&format!("; +{} more", p.len() - 5));
            }
            Ok(Outcome::fail("ListAndWatch (first snapshot)", text, fix))
        }
    }

    async fn law_size(&mut self) -> Res {
        let bytes = self.ensure_first().await?.bytes;
        if bytes <= crate::api::KUBELET_MAX_RECV {
            Ok(Outcome::pass(format!("{bytes} bytes")))
        } else {
            Ok(Outcome::fail(
                "ListAndWatch (first snapshot)",
                format!("{bytes} bytes, over the kubelet's {} byte limit", crate::api::KUBELET_MAX_RECV),
                "advertise fewer devices per resource or shorter IDs",
            ))
        }
    }

    async fn law_second(&mut self) -> Res {
        self.ensure_first().await?;
        let (took, mut stream, mut m) = self.open_stream().await?;
        // An empty first message (judged by LAW-001) may be followed by the list.
        let until = Instant::now() + SETTLE_WITHIN;
        let expect_devices = self.first.as_ref().is_some_and(|f| !f.resp.devices.is_empty());
        while expect_devices && m.devices.is_empty() {
            match tokio::time::timeout_at(until.into(), stream.message()).await {
                Ok(Ok(Some(next))) => m = next,
                _ => break,
            }
        }
        self.streams.push(stream);
        self.drain();
        let latest: BTreeSet<String> = match self.seen.snaps.last() {
            Some(s) if self.o.socket.is_none() => s.resp.devices.iter().map(|d| d.id.clone()).collect(),
            _ => self.first.as_ref().map(|f| f.resp.devices.iter().map(|d| d.id.clone()).collect()).unwrap_or_default(),
        };
        let got: BTreeSet<String> = m.devices.iter().map(|d| d.id.clone()).collect();
        if got != latest {
            return Ok(Outcome::fail(
                "ListAndWatch (second stream)",
                format!("{} device(s) where the first stream has {}", got.len(), latest.len()),
                "send every stream the full, current device list",
            ));
        }
        Ok(Outcome::pass(format!("after {}", ms(took))))
    }

    async fn law_open(&mut self) -> Res {
        self.ensure_first().await?;
        let ep = self.endpoint().await?;
        let Some(r) = self.find_reg(0, self.plugin_started, true).filter(|r| r.socket == ep) else {
            return Ok(Outcome::skip("no accepted registration to follow"));
        };
        // A stream ended after its first message ends within milliseconds of it.
        let until = r.at + Duration::from_millis(300);
        loop {
            self.drain();
            if let Some(e) = self.stream_end(r.generation, &ep, r.at) {
                return Ok(Outcome::fail(
                    "ListAndWatch (the kubelet's stream)",
                    format!(
                        "{} {} after the kubelet opened it, after {} message(s); the kubelet does not open another: its devices turn unhealthy and the resource leaves allocatable",
                        e.why,
                        ms(e.at.saturating_duration_since(e.opened)),
                        e.messages
                    ),
                    "keep the stream open and send a new list on every change; return only when the kubelet cancels (ctx.Done()) or the plugin stops",
                ));
            }
            match self.next_event(until).await {
                Some(e) => self.seen.take(&e),
                None => break,
            }
        }
        Ok(Outcome::pass(format!("still open {} after registering", ms(r.at.elapsed()))))
    }

    async fn law_cancel(&mut self) -> Res {
        if self.streams.is_empty() {
            let (_, stream, _) = self.open_stream().await?;
            self.streams.push(stream);
        }
        // Dropping the streams sends RST_STREAM(CANCEL), as the kubelet does.
        self.streams.clear();
        // The kubelet opens the next stream only after re-registration, never in
        // the same instant; give the plugin that moment to see the cancel (a
        // plugin that breaks on it is what this scenario is for).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (took, stream, _) = self.open_stream().await.map_err(|mut o| {
            if let Some(e) = &mut o.evidence {
                e.rpc = "ListAndWatch (a new stream after the kubelet cancelled one)".into();
                e.fix = "stop each stream's sender when its context is cancelled; never let a dead stream keep the update channel".into();
            }
            o
        })?;
        drop(stream);
        self.options().await?;
        Ok(Outcome::pass(format!("new stream answered after {}", ms(took))))
    }

    async fn alloc_each(&mut self) -> Res {
        let healthy = self.healthy().await?;
        if healthy.is_empty() {
            return Ok(Outcome::skip("no healthy devices"));
        }
        let n = healthy.len().min(64);
        for id in healthy.iter().take(n) {
            match self.allocate(vec![vec![id.clone()]]).await? {
                Ok(r) if r.container_responses.len() == 1 => self.allocated.push(id.clone()),
                Ok(r) => {
                    return Ok(Outcome::fail(
                        format!("Allocate([{id}])"),
                        format!("{} container responses for 1 container", r.container_responses.len()),
                        "answer one ContainerAllocateResponse per container request",
                    ))
                }
                Err(e) => {
                    return Ok(Outcome::fail(
                        format!("Allocate([{id}])"),
                        e,
                        "allocate every device you advertise as Healthy",
                    ))
                }
            }
        }
        Ok(Outcome::pass(format!("{n} device(s)")))
    }

    async fn alloc_multi(&mut self) -> Res {
        let healthy = self.healthy().await?;
        if healthy.len() < 2 {
            return Ok(Outcome::skip("fewer than 2 healthy devices"));
        }
        let req = vec![vec![healthy[0].clone()], vec![healthy[1].clone()]];
        match self.allocate(req).await? {
            Ok(r) if r.container_responses.len() == 2 => Ok(Outcome::pass("")),
            Ok(r) => Ok(Outcome::fail(
                format!("Allocate([{}], [{}])", healthy[0], healthy[1]),
                format!("{} container responses for 2 containers", r.container_responses.len()),
                "answer one ContainerAllocateResponse per ContainerAllocateRequest, in order",
            )),
            Err(e) => Ok(Outcome::fail("Allocate (2 containers)", e, "accept several container requests in one call")),
        }
    }

    async fn alloc_not_empty(&mut self) -> Res {
        let healthy = self.healthy().await?;
        let Some(id) = healthy.first().cloned() else { return Ok(Outcome::skip("no healthy devices")) };
        match self.allocate(vec![vec![id.clone()]]).await? {
            Ok(r) if r.container_responses.is_empty() => Ok(Outcome::fail(
                format!("Allocate([{id}])"),
                "no container responses (the kubelet fails the pod)",
                "answer one ContainerAllocateResponse per container",
            )),
            Ok(r) if r.container_responses.iter().all(checks::is_empty_answer) => Ok(Outcome::fail(
                format!("Allocate([{id}])"),
                "an empty ContainerAllocateResponse: no envs, mounts, devices, annotations or CDI devices",
                "tell the runtime how to reach the device (device nodes, CDI names or env vars)",
            )),
            Ok(_) => Ok(Outcome::pass("")),
            Err(e) => {
                Ok(Outcome::fail(format!("Allocate([{id}])"), e, "allocate every device you advertise as Healthy"))
            }
        }
    }

    async fn alloc_unknown(&mut self) -> Res {
        match self.allocate(vec![vec![UNKNOWN_ID.to_string()]]).await? {
            Err(e) => Ok(Outcome::pass(e)),
            Ok(_) => Ok(Outcome::fail(
                format!("Allocate([{UNKNOWN_ID}])"),
                "success for a device the plugin never advertised",
                "return an error (InvalidArgument) for unknown device IDs",
            )),
        }
    }

    async fn alloc_concurrent(&mut self) -> Res {
        let healthy = self.healthy().await?;
        if healthy.is_empty() {
            return Ok(Outcome::skip("no healthy devices"));
        }
        let c = self.client().await?;
        let timeout = self.o.timeout;
        let mut set = tokio::task::JoinSet::new();
        for i in 0..8 {
            let id = healthy[i % healthy.len()].clone();
            let mut c = c.clone();
            set.spawn(async move {
                let req = AllocateRequest {
                    container_requests: vec![ContainerAllocateRequest { devices_ids: vec![id.clone()] }],
                };
                match tokio::time::timeout(timeout, c.allocate(req)).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(s)) => Err(format!("{id}: {}", evidence::status_text(s.code(), s.message()))),
                    Err(_) => Err(format!("{id}: no answer within {timeout:?}")),
                }
            });
        }
        let mut errors = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(Err(e)) = r {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            Ok(Outcome::pass("8 parallel calls"))
        } else {
            Ok(Outcome::fail(
                "8 parallel Allocate calls",
                errors.join("; "),
                "serve Allocate concurrently; do not hold a lock across a call",
            ))
        }
    }

    async fn preferred(&mut self, id: &str) -> Res {
        let opts = self.options().await?;
        if !opts.get_preferred_allocation_available {
            return Ok(Outcome::skip("GetPreferredAllocation is not advertised"));
        }
        let healthy = self.healthy().await?;
        if healthy.is_empty() {
            return Ok(Outcome::skip("no healthy devices"));
        }
        let mut c = self.client().await?;
        let healthy: Vec<String> = healthy.into_iter().take(64).collect();
        let n = healthy.len();
        for size in 1..=n {
            // The kubelet offers healthy minus allocated: offer proper subsets
            // (with the must-include device inside) so an answer taken from
            // outside the offer shows.
            let available = checks::offer(&healthy, size);
            let must: Vec<String> =
                if size >= 2 { available.last().cloned().into_iter().collect() } else { Vec::new() };
            let req = PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: available.clone(),
                    must_include_device_i_ds: must.clone(),
                    allocation_size: size as i32,
                }],
            };
            let call = format!(
                "GetPreferredAllocation(size {size}, available {}, mustInclude {must:?})",
                evidence::list(&available, 8)
            );
            let answer = match tokio::time::timeout(self.o.timeout, c.get_preferred_allocation(req)).await {
                Ok(Ok(r)) => r.into_inner(),
                Ok(Err(s)) => {
                    return Ok(Outcome::fail(
                        call,
                        evidence::status_text(s.code(), s.message()),
                        "answer every size from 1 to all devices (an error fails pod admission)",
                    ))
                }
                Err(_) => return Ok(Outcome::fail(call, "timed out", "answer GetPreferredAllocation promptly")),
            };
            let Some(first) = answer.container_responses.first() else {
                return Ok(Outcome::fail(
                    call,
                    "no container responses",
                    "answer one ContainerPreferredAllocationResponse per container",
                ));
            };
            let p = checks::preferred_problems(&available, &must, size, &first.device_i_ds);
            let (problem, fix) = match id {
                "PREF-001" => (p.size, "return exactly allocation_size distinct IDs"),
                "PREF-002" => (p.available, "choose only from available_deviceIDs"),
                _ => (p.must_include, "always include must_include_deviceIDs"),
            };
            if let Some(problem) = problem {
                return Ok(Outcome::fail(call, problem, fix));
            }
        }
        Ok(Outcome::pass(format!("sizes 1..={n}")))
    }

    async fn pre_start(&mut self) -> Res {
        let opts = self.options().await?;
        if !opts.pre_start_required {
            return Ok(Outcome::skip("PreStartContainer is not required by the plugin"));
        }
        let healthy = self.healthy().await?;
        let Some(id) = healthy.first().cloned() else { return Ok(Outcome::skip("no healthy devices")) };
        if let Err(e) = self.allocate(vec![vec![id.clone()]]).await? {
            return Ok(Outcome::fail(format!("Allocate([{id}])"), e, "allocate every healthy device"));
        }
        let mut c = self.client().await?;
        let req = PreStartContainerRequest { devices_ids: vec![id.clone()] };
        let start = Instant::now();
        match tokio::time::timeout(Duration::from_secs(30), c.pre_start_container(req)).await {
            Ok(Ok(_)) => Ok(Outcome::pass(format!("after {}", ms(start.elapsed())))),
            Ok(Err(s)) => Ok(Outcome::fail(
                format!("PreStartContainer([{id}])"),
                evidence::status_text(s.code(), s.message()),
                "succeed for devices you allocated (an error fails the container start)",
            )),
            Err(_) => Ok(Outcome::fail(
                format!("PreStartContainer([{id}])"),
                "no answer within the kubelet's 30s",
                "answer PreStartContainer within 30s",
            )),
        }
    }

    async fn start_order(&mut self) -> Res {
        let wait = Duration::from_millis(1500);
        let exited = match self.plugin.as_mut() {
            Some(p) => p.wait_exit(wait).await,
            None => None,
        };
        if let (Some(status), None) = (exited, self.o.restart_backoff) {
            return Ok(self.exited_early(status));
        }
        // With restarts, the exit is handled (back-off, restart) while waiting below.
        // Measured from just before the kubelet starts: with the plugin watcher
        // the first registration can complete before start_recorder returns.
        let appeared = Instant::now();
        self.start_recorder().await?;
        match self.wait_reg(0, appeared, appeared + REGISTER_WITHIN, true).await {
            Some(r) => {
                let took =
                    format!("registered {} after kubelet.sock appeared", ms(r.at.saturating_duration_since(appeared)));
                match self.restart_cost(self.began) {
                    Some(cost) => Ok(Outcome::warn(
                        format!("{took}, only because it was restarted"),
                        Some(super::Evidence {
                            rpc: "plugin start without kubelet.sock".into(),
                            answer: format!("{cost}; log of the first run: {}", self.first_crash_log()),
                            fix: "wait (watch the directory or retry with backoff) for kubelet.sock instead of exiting"
                                .into(),
                        }),
                    )),
                    None => Ok(Outcome::pass(took)),
                }
            }
            None => {
                let mut o = match self.crashes.first() {
                    Some(c) if self.o.restart_backoff.is_none() => self.exited_early(c.status),
                    _ => self.no_registration(REGISTER_WITHIN),
                };
                o.stop = None;
                Ok(o)
            }
        }
    }

    fn exited_early(&self, status: std::process::ExitStatus) -> Outcome {
        Outcome::fail(
            "plugin start without kubelet.sock",
            format!("the plugin exited ({status}) before the kubelet existed; plugin log: {}", self.plugin_log()),
            "wait (watch the directory or retry with backoff) for kubelet.sock instead of exiting",
        )
    }

    async fn kres_reregister(&mut self) -> Res {
        self.restart_kubelet().await?;
        let t0 = self.restarted_at.unwrap_or_else(Instant::now);
        match self.wait_reg(self.generation, t0, t0 + REREGISTER_WITHIN, true).await {
            Some(r) => {
                let took = format!("re-registered after {}", ms(self.arrival(&r).saturating_duration_since(t0)));
                match self.restart_cost(t0) {
                    Some(cost) => Ok(Outcome::warn(
                        format!("{took}, only because it was restarted"),
                        Some(super::Evidence {
                            rpc: "Register after the kubelet restarted".into(),
                            answer: format!("{cost}; log of the run that exited: {}", self.last_crash_log()),
                            fix: "watch the plugin directory: when kubelet.sock is re-created or your socket deleted, serve again and register instead of exiting".into(),
                        }),
                    )),
                    None => Ok(Outcome::pass(took)),
                }
            }
            None => Ok(Outcome::fail(
                "Register after the kubelet restarted (sockets deleted, kubelet.sock re-created)",
                format!("no registration within {REREGISTER_WITHIN:?}; plugin log: {}", self.plugin_log()),
                "watch the plugin directory: when kubelet.sock is re-created or your socket deleted, serve again and call Register",
            )),
        }
    }

    /// Wait until the plugin is back after the last kubelet restart (restart once if none yet).
    async fn back_after_restart(&mut self) -> std::result::Result<(Registration, ListAndWatchResponse), Outcome> {
        if self.generation == 0 {
            self.restart_kubelet().await?;
        }
        let t0 = self.restarted_at.unwrap_or_else(Instant::now);
        let Some(r) = self.wait_reg(self.generation, t0, t0 + COME_BACK_WITHIN, true).await else {
            return Err(Outcome::fail(
                "Register after a kubelet restart",
                format!("the plugin did not come back within {COME_BACK_WITHIN:?}; plugin log: {}", self.plugin_log()),
                "re-register after every kubelet restart (see KRES-001)",
            ));
        };
        let Some(Settled { resp: snap, .. }) =
            self.wait_snap(r.generation, &r.socket, r.at, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
        else {
            return Err(Outcome::fail(
                "ListAndWatch after re-registering",
                format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the device list on every new stream",
            ));
        };
        Ok((r, snap))
    }

    async fn kres_same_ids(&mut self) -> Res {
        let (_, snap) = self.back_after_restart().await?;
        let before: BTreeSet<String> = self.baseline.clone().unwrap_or_default().into_iter().collect();
        let after: BTreeSet<String> = snap.devices.iter().map(|d| d.id.clone()).collect();
        let gone: Vec<&String> = before.difference(&after).collect();
        let new: Vec<&String> = after.difference(&before).collect();
        if gone.is_empty() {
            // Devices added are no harm: pods hold only the IDs that stayed.
            let added = if new.is_empty() { String::new() } else { format!(", {} new", new.len()) };
            return Ok(Outcome::pass(format!("{} device(s) kept{added}", before.len())));
        }
        Ok(Outcome::fail(
            "ListAndWatch before and after a kubelet restart",
            format!("IDs changed: gone {}, new {}", evidence::list(&gone, 5), evidence::list(&new, 5)),
            "derive device IDs from the hardware (serial, PCI address), never from a counter or a start time",
        ))
    }

    async fn kres_repeated(&mut self) -> Res {
        for _ in 0..3 {
            self.restart_kubelet().await?;
            let t = Instant::now();
            let _ = self.wait_reg(self.generation, t, t + Duration::from_millis(300), true).await;
        }
        let last = self.generation;
        let t0 = self.restarted_at.unwrap_or_else(Instant::now);
        let Some(r) = self.wait_reg(last, t0, t0 + COME_BACK_WITHIN, true).await else {
            return Ok(Outcome::fail(
                "Register after 3 quick kubelet restarts",
                format!(
                    "no registration with the last kubelet within {COME_BACK_WITHIN:?}; plugin log: {}",
                    self.plugin_log()
                ),
                "re-register after every kubelet restart, also when restarts come quickly",
            ));
        };
        // A second registration with the same kubelet would arrive right after the first.
        let settle = Instant::now() + Duration::from_secs(1);
        while let Some(e) = self.next_event(settle).await {
            self.seen.take(&e);
        }
        // The kubelet keeps the latest registration per resource; what must not
        // happen is two endpoints of the plugin alive and registered at once,
        // or the latest registration pointing at a dead socket.
        let latest = self
            .seen
            .regs
            .iter()
            .rev()
            .find(|x| x.generation == last && self.wanted(x) && x.rejected.is_none())
            .cloned()
            .unwrap_or(r);
        let endpoints: BTreeSet<PathBuf> =
            self.seen.regs.iter().filter(|x| self.wanted(x)).map(|x| x.socket.clone()).collect();
        let mut live = Vec::new();
        for ep in endpoints {
            if let Ok(mut c) = plugin_client(&ep, self.o.timeout).await {
                if c.get_device_plugin_options(Empty {}).await.is_ok() {
                    live.push(ep);
                }
            }
        }
        if !live.contains(&latest.socket) {
            return Ok(Outcome::fail(
                "GetDevicePluginOptions on the last registered endpoint",
                format!("{} does not answer", latest.socket.display()),
                "register only the socket you serve, after serving it",
            ));
        }
        if live.len() != 1 {
            return Ok(Outcome::fail(
                "registered endpoints after 3 quick kubelet restarts",
                format!("{} registered endpoints answer: {live:?}", live.len()),
                "stop the old server before registering a new one; register once per kubelet start",
            ));
        }
        Ok(Outcome::pass("one live registration"))
    }

    async fn kres_pods_keep(&mut self) -> Res {
        self.write_pod("dpctl-test-keep", 1)?;
        let Some(before) = self.wait_pod("dpctl-test-keep", true, POD_WITHIN).await else {
            return Ok(Outcome::fail(
                "admit a pod (1 device)",
                format!("not admitted within {POD_WITHIN:?}; kubelet log: {}", self.kubelet_log()),
                "see E2E-001",
            ));
        };
        if let Some(k) = &self.kubelet {
            k.restart()
                .await
                .map_err(|e| Outcome::fail("restart the kubelet", e.to_string(), "see the kubelet's log"))?;
        }
        let t0 = Instant::now();
        let res = self.resource.clone().unwrap_or_default();
        // Back = devices advertised again; then they must include the pod's.
        let back = self
            .wait_allocatable(COME_BACK_WITHIN, |_| true)
            .await
            .filter(|(_, ids)| before.iter().all(|d| ids.contains(d)));
        if back.is_none() {
            let now = match &self.kubelet {
                Some(mk) => {
                    mk.allocatable(self.o.timeout).await.ok().and_then(|a| a.get(&res).cloned()).unwrap_or_default()
                }
                None => Vec::new(),
            };
            return Ok(Outcome::fail(
                "PodResources GetAllocatableResources after a kubelet restart",
                format!("the pod's devices {before:?} are not advertised again within {COME_BACK_WITHIN:?} (allocatable now: {} device(s) {})", now.len(), evidence::list(&now, 5)),
                "re-register after a kubelet restart and keep device IDs stable",
            ));
        }
        match self.wait_pod("dpctl-test-keep", true, POD_WITHIN).await {
            Some(after) if after == before => {
                Ok(Outcome::pass(format!("{before:?} kept; back after {}", ms(t0.elapsed()))))
            }
            other => Ok(Outcome::fail(
                "PodResources List after a kubelet restart",
                format!("the pod had {before:?}, now {other:?}"),
                "keep device IDs stable",
            )),
        }
    }

    async fn pres_exit(&mut self) -> Res {
        // Another vendor's socket appears after our plugin started.
        let path = self.tree().plugin_dir.join(DECOY);
        if self.decoy.is_none() {
            self.decoy = tokio::net::UnixListener::bind(&path).ok();
        }
        let Some(p) = self.plugin.as_mut() else {
            return Ok(Outcome::fail("SIGTERM", "no plugin process", "report this bug"));
        };
        if let Some(status) = p.exited() {
            return Ok(Outcome::fail(
                "SIGTERM",
                format!("the plugin had already exited ({status})"),
                "keep running until told to stop",
            ));
        }
        p.terminate();
        self.terminated = true;
        let start = Instant::now();
        match p.wait_exit(EXIT_WITHIN).await {
            Some(status) => Ok(Outcome::pass(format!("exited ({status}) after {}", ms(start.elapsed())))),
            None => Ok(Outcome::fail(
                "SIGTERM",
                format!("still running after {EXIT_WITHIN:?}"),
                "handle SIGTERM: stop serving, remove your socket, exit",
            )),
        }
    }

    async fn ensure_stopped(&mut self) -> std::result::Result<(), Outcome> {
        let running = self.plugin.as_mut().is_some_and(|p| p.exited().is_none());
        if running && self.pres_exit().await?.verdict != Verdict::Pass {
            return Err(Outcome::fail("SIGTERM", "the plugin did not exit (see PRES-001)", "handle SIGTERM"));
        }
        Ok(())
    }

    async fn pres_own_socket(&mut self) -> Res {
        let r = self.ensure_reg().await?;
        self.ensure_stopped().await?;
        if is_socket(&r.socket) {
            return Ok(Outcome::fail(
                "SIGTERM",
                format!("{} is still there after the plugin exited", r.socket.display()),
                "remove your socket when you exit (defer os.Remove)",
            ));
        }
        Ok(Outcome::pass(""))
    }

    async fn pres_others(&mut self) -> Res {
        self.ensure_stopped().await?;
        let tree = self.tree();
        let missing: Vec<&str> = [crate::core::paths::KUBELET_SOCKET_NAME, DECOY]
            .into_iter()
            .filter(|n| !is_socket(&tree.plugin_dir.join(n)))
            .collect();
        if missing.is_empty() {
            Ok(Outcome::pass(""))
        } else {
            Ok(Outcome::fail(
                "SIGTERM",
                format!("{} deleted when the plugin exited", missing.join(" and ")),
                "remove only your own socket",
            ))
        }
    }

    async fn pres_same_ids(&mut self) -> Res {
        let healthy = self.baseline.clone().unwrap_or_default();
        let Some(id) = healthy.first().cloned() else { return Ok(Outcome::skip("no devices")) };
        if self.allocated.is_empty() {
            if let Ok(Ok(_)) = self.allocate(vec![vec![id.clone()]]).await {
                self.allocated.push(id.clone());
            }
        }
        self.ensure_stopped().await?;
        self.start_plugin()?;
        let t0 = self.plugin_started;
        let Some(r) = self.wait_reg(0, t0, t0 + REGISTER_WITHIN, true).await else {
            let mut o = self.no_registration(REGISTER_WITHIN);
            o.stop = None;
            return Ok(o);
        };
        // Only what the new process sent: with a fixed socket name the old
        // process's snapshots have the same generation and socket.
        let Some(Settled { resp: snap, .. }) =
            self.wait_snap(r.generation, &r.socket, t0, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
        else {
            return Ok(Outcome::fail(
                "ListAndWatch after the restart",
                format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the device list first",
            ));
        };
        let now: BTreeSet<String> = snap.devices.iter().map(|d| d.id.clone()).collect();
        let lost: BTreeSet<&String> =
            self.allocated.iter().chain(healthy.iter()).filter(|d| !now.contains(*d)).collect();
        let lost: Vec<&String> = lost.into_iter().collect();
        let now: Vec<&String> = now.iter().collect();
        if lost.is_empty() {
            Ok(Outcome::pass(format!("{} device(s) kept", now.len())))
        } else {
            Ok(Outcome::fail(
                "ListAndWatch before and after a plugin restart (the new process's list)",
                format!(
                    "{} (advertised or allocated before the restart) are gone; now {}",
                    evidence::list(&lost, 5),
                    evidence::list(&now, 5)
                ),
                "derive device IDs from the hardware, never from the process (pid, start time, counter)",
            ))
        }
    }

    async fn e2e_pod(&mut self) -> Res {
        let path = self.write_pod("dpctl-test-a", 1)?;
        let got = self.wait_pod("dpctl-test-a", true, POD_WITHIN).await;
        let _ = std::fs::remove_file(&path);
        let baseline = self.baseline.clone().unwrap_or_default();
        match got {
            None => Ok(Outcome::fail(
                "admit a pod (1 device) through the mock kubelet",
                format!("not in PodResources within {POD_WITHIN:?}; kubelet log: {}", self.kubelet_log()),
                "answer Allocate (and GetPreferredAllocation / PreStartContainer when advertised) without errors",
            )),
            Some(ids) if ids.len() == 1 && baseline.contains(&ids[0]) => {
                let _ = self.wait_pod("dpctl-test-a", false, POD_WITHIN).await;
                Ok(Outcome::pass(format!("got {}", ids[0])))
            }
            Some(ids) => Ok(Outcome::fail(
                "PodResources List",
                format!("the pod holds {ids:?}, the plugin advertised {}", evidence::list(&baseline, 5)),
                "report what you allocate",
            )),
        }
    }

    async fn e2e_free(&mut self) -> Res {
        let n = self.baseline.as_ref().map(|b| b.len()).unwrap_or(0);
        let path = self.write_pod("dpctl-test-b", 1)?;
        if self.wait_pod("dpctl-test-b", true, POD_WITHIN).await.is_none() {
            return Ok(Outcome::fail(
                "admit a pod (1 device)",
                format!("not admitted; kubelet log: {}", self.kubelet_log()),
                "see E2E-001",
            ));
        }
        let _ = std::fs::remove_file(&path);
        if self.wait_pod("dpctl-test-b", false, POD_WITHIN).await.is_none() {
            return Ok(Outcome::fail(
                "delete the pod",
                "still listed by PodResources",
                "(a mock kubelet problem; report it)",
            ));
        }
        let path = self.write_pod("dpctl-test-all", n)?;
        let got = self.wait_pod("dpctl-test-all", true, POD_WITHIN).await;
        let _ = std::fs::remove_file(&path);
        let _ = self.wait_pod("dpctl-test-all", false, POD_WITHIN).await;
        match got {
            Some(ids) if ids.len() == n => Ok(Outcome::pass(format!("a pod then took all {n}"))),
            other => Ok(Outcome::fail(
                format!("admit a pod asking for all {n} devices"),
                format!("got {other:?}; kubelet log: {}", self.kubelet_log()),
                "keep every device allocatable after its pod is gone",
            )),
        }
    }

    async fn health(&mut self) -> Res {
        let Some(cmd) = self.o.health_trigger.clone() else {
            return Ok(Outcome::skip("no --health-trigger given"));
        };
        self.drain();
        let before = match (self.find_reg(0, self.plugin_started, true), &self.baseline) {
            (Some(r), Some(b)) => self
                .seen
                .snaps
                .iter()
                .rev()
                .find(|s| s.generation == r.generation && s.socket == r.socket)
                .map(|s| checks::healthy_ids(&s.resp.devices).len())
                .unwrap_or(b.len()),
            _ => 0,
        };
        let vars = self.tree().vars(self.isolation != Isolation::None);
        let cmd = vars.substitute(&cmd);
        let t0 = Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .envs(vars.env())
                .stdin(std::process::Stdio::null())
                .output(),
        )
        .await;
        match out {
            Ok(Ok(o)) if o.status.success() => {}
            Ok(Ok(o)) => {
                return Ok(Outcome::fail(
                    format!("--health-trigger {cmd:?}"),
                    format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
                    "fix the trigger command",
                ))
            }
            Ok(Err(e)) => {
                return Ok(Outcome::fail(format!("--health-trigger {cmd:?}"), e.to_string(), "fix the trigger command"))
            }
            Err(_) => {
                return Ok(Outcome::fail(
                    format!("--health-trigger {cmd:?}"),
                    "did not finish within 30s",
                    "make the trigger return",
                ))
            }
        }
        let Some(r) = self.find_reg(0, self.plugin_started, true) else {
            return Ok(Outcome::fail("Register", "no accepted registration", "see REG-001"));
        };
        let until = t0 + self.o.health_timeout;
        // The kubelet's stream: a snapshot after the trigger with fewer healthy devices.
        let drop = |s: &Snap| {
            s.generation == r.generation
                && s.socket == r.socket
                && s.at >= t0
                && checks::healthy_ids(&s.resp.devices).len() < before
        };
        let kubelet = loop {
            self.drain();
            if let Some(s) = self.seen.snaps.iter().find(|s| drop(s)) {
                break Some((s.at.saturating_duration_since(t0), checks::healthy_ids(&s.resp.devices).len()));
            }
            match self.next_event(until).await {
                Some(e) => self.seen.take(&e),
                None => break None,
            }
        };
        // The stream opened first: what it got meanwhile is buffered.
        let early = match self.early.as_mut() {
            None => None,
            Some(stream) => {
                let until = Instant::now() + Duration::from_millis(if kubelet.is_some() { 1000 } else { 200 });
                let mut got = false;
                while let Ok(Ok(Some(m))) = tokio::time::timeout_at(until.into(), stream.message()).await {
                    if checks::healthy_ids(&m.devices).len() < before {
                        got = true;
                        break;
                    }
                }
                Some(got)
            }
        };
        let timeout = self.o.health_timeout;
        match (kubelet, early) {
            (Some((took, after)), Some(false)) => Ok(Outcome::warn(
                format!("allocatable {before} → {after} after {}, but another open stream never got the update", ms(took)),
                Some(super::Evidence {
                    rpc: format!("ListAndWatch (another stream, opened {} the kubelet's)", if self.early_first { "before" } else { "after" }),
                    answer: format!("the kubelet's stream got the Unhealthy snapshot; another open stream got nothing within {timeout:?}: the plugin hands each update to one stream, so `dpctl watch`, a monitoring agent or a stream the plugin still reads after its client left can take the kubelet's"),
                    fix: "give every stream its own subscription (a broadcast, not one shared channel)".into(),
                }),
            )),
            (Some((took, after)), _) => Ok(Outcome::pass(format!("allocatable {before} → {after} after {}", ms(took)))),
            (None, Some(true)) => Ok(Outcome::fail(
                "ListAndWatch (the kubelet's stream) after the health trigger",
                format!("the kubelet's stream never got the Unhealthy snapshot within {timeout:?}; another stream, opened before it, did: the plugin hands each update to one stream (a shared channel), and the kubelet's lost"),
                "give every stream its own subscription (a broadcast, not one shared channel)",
            )),
            (None, _) => Ok(Outcome::fail(
                "ListAndWatch (the kubelet's stream) after the health trigger",
                format!("allocatable still {before} after {timeout:?} (no snapshot with fewer healthy devices); plugin log: {}", self.plugin_log()),
                "send a new snapshot with the device Unhealthy as soon as its health changes (or raise --health-timeout for a slow health loop)",
            )),
        }
    }

    /// A ListAndWatch stream on the registered endpoint, after the kubelet's.
    async fn open_late_stream(&mut self) -> Option<tonic::Streaming<ListAndWatchResponse>> {
        let r = self.find_reg(0, self.plugin_started, true)?;
        let mut c = plugin_client(&r.socket, self.o.timeout).await.ok()?;
        let mut stream =
            tokio::time::timeout(self.o.timeout, c.list_and_watch(Empty {})).await.ok()?.ok()?.into_inner();
        tokio::time::timeout(FIRST_SNAPSHOT_WITHIN, stream.message()).await.ok()?.ok()??;
        Some(stream)
    }

    /// A ListAndWatch stream on the plugin's socket before it registers: the
    /// first socket other than kubelet.sock to appear (None when it does not
    /// serve before the kubelet exists; the kubelet's stream is then older).
    async fn open_early_stream(&mut self) -> Option<(PathBuf, tonic::Streaming<ListAndWatchResponse>)> {
        let until = Instant::now() + Duration::from_secs(2);
        let dir = self.tree().plugin_dir.clone();
        let kubelet = self.tree().kubelet_socket();
        while Instant::now() < until {
            let socks: Vec<PathBuf> = std::fs::read_dir(&dir)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| *p != kubelet && is_socket(p))
                .collect();
            for sock in socks {
                let Ok(mut c) = plugin_client(&sock, self.o.timeout).await else { continue };
                let Ok(Ok(resp)) = tokio::time::timeout(self.o.timeout, c.list_and_watch(Empty {})).await else {
                    continue;
                };
                let mut stream = resp.into_inner();
                if let Ok(Ok(Some(_))) = tokio::time::timeout(FIRST_SNAPSHOT_WITHIN, stream.message()).await {
                    return Some((sock, stream));
                }
            }
            if self.plugin.as_mut().is_some_and(|p| p.exited().is_some()) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(focus: Option<&str>, skip: Option<&str>) -> Options {
        Options {
            plugin: vec!["x".into()],
            restart_backoff: Some(Duration::from_secs(10)),
            health_timeout: Duration::from_secs(10),
            socket: None,
            resource: None,
            focus: focus.map(|f| Pattern::parse(f).unwrap()),
            skip: skip.map(|f| Pattern::parse(f).unwrap()),
            isolate: false,
            health_trigger: None,
            timeout: Duration::from_secs(5),
            exe: PathBuf::from("dpctl"),
            kubelet_version: None,
        }
    }

    #[test]
    fn a_root_cause_is_reported_once_where_its_rule_is() {
        let stop =
            super::super::Stop { reason: "kubelet.sock was deleted by the plugin".into(), shown_by: &["REG-007"] };
        // REG-007 is still to run: REG-001 is not run, REG-007 runs and reports it.
        let c = root_cause(&stop, "REG-001", &[], &["REG-002", "REG-007", "LAW-001"]);
        assert_eq!(c.by, "REG-007");
        assert_eq!(c.why, "kubelet.sock was deleted by the plugin (see REG-007)");
        assert_eq!(c.still_run, ["REG-007"]);
        // It already failed: nothing still runs.
        let c = root_cause(&stop, "LAW-001", &["REG-007"], &["LAW-002"]);
        assert_eq!((c.by.as_str(), c.still_run.len()), ("REG-007", 0));
        // Not selected at all: the stopping scenario reports it.
        let none = super::super::Stop { reason: "the plugin exited at start".into(), shown_by: &[] };
        let c = root_cause(&none, "REG-001", &[], &["REG-002"]);
        assert_eq!(
            c,
            RootCause {
                by: "REG-001".into(),
                why: "the plugin exited at start (see REG-001)".into(),
                still_run: vec![]
            }
        );
    }

    #[test]
    fn focus_and_skip_select() {
        let all = SCENARIOS.iter().filter(|s| selected(&opts(None, None), s)).count();
        assert_eq!(all, SCENARIOS.len());
        let reg: Vec<&str> =
            SCENARIOS.iter().filter(|s| selected(&opts(Some("^REG-"), None), s)).map(|s| s.id).collect();
        assert_eq!(reg.len(), 8);
        let o = opts(Some("kubelet-restart"), Some("KRES-004"));
        let k: Vec<&str> = SCENARIOS.iter().filter(|s| selected(&o, s)).map(|s| s.id).collect();
        assert_eq!(k, ["KRES-001", "KRES-002", "KRES-003", "KRES-005"]);
    }
}
