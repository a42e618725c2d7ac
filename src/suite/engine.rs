//! The suite engine, one for both plugin kinds: it walks a table of
//! [`Scenario`]s in session order, sets a session up when its first
//! selected scenario runs, calls each scenario's function on the session's
//! state (bounded in time), stops the run at a root-cause failure (the rest
//! NOT-RUN, reported once where its rule is), and tears the session down.

use super::catalog::{Run, Scenario};
use super::dra::session::Sess as DraSess;
use super::env::Isolation;
pub use super::options::{Options, Session};
use super::scenarios::{self, State as Plugin};
use super::{Outcome, Record, Verdict};
use std::time::{Duration, Instant};

/// Whether a scenario is selected by `--focus` / `--skip`.
pub fn selected(o: &Options, s: &Scenario) -> bool {
    super::catalog::chosen(o.focus.as_ref(), o.skip.as_ref(), s)
}

/// Progress of a run, for live output.
pub enum Progress<'a> {
    /// A scenario starts.
    Started(&'a Scenario),
    /// A scenario finished.
    Finished(&'a Record),
}

/// A scenario that does not finish within this fails.
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);

/// The plugin kind a table tests, and how its sessions are set up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// A device plugin (its process isolated as probed).
    DevicePlugin(Isolation),
    /// A DRA driver's kubelet plugin.
    Dra,
}

impl Kind {
    /// What the tested process is called in fixes.
    fn noun(self) -> &'static str {
        match self {
            Kind::DevicePlugin(_) => "plugin",
            Kind::Dra => "driver",
        }
    }

    async fn setup(self, o: &Options, session: Session) -> Result<State<'_>, Outcome> {
        match self {
            Kind::DevicePlugin(isolation) => scenarios::setup(o, session, isolation).await.map(State::Plugin),
            Kind::Dra => DraSess::setup(o).await.map(State::Dra),
        }
    }
}

/// A session's state, set up for its scenarios.
pub(crate) enum State<'a> {
    /// A device-plugin session.
    Plugin(Plugin<'a>),
    /// A DRA driver session.
    Dra(DraSess),
}

impl State<'_> {
    /// Run `run` on this state (None: the scenario is for another state,
    /// which the catalog's tests rule out).
    async fn run(&mut self, run: Run) -> Option<Outcome> {
        Some(match (run, self) {
            (Run::Basic(f), State::Plugin(Plugin::Basic(s))) => f(s).await,
            (Run::Env(f), State::Plugin(Plugin::Env(s))) => f(s).await,
            (Run::Health(f), State::Plugin(Plugin::Health(s))) => f(s).await,
            (Run::Dra(f), State::Dra(s)) => f(s).await,
            _ => return None,
        })
    }

    /// A failure's evidence gets the tested process's own last log lines
    /// (its stderr and stdout), bounded, unless the scenario gave them.
    fn attach_log(&self, o: &mut Outcome) {
        let Some(e) = o.evidence.as_mut().filter(|e| e.log.is_none() && o.verdict == Verdict::Fail) else {
            return;
        };
        let log = match self {
            State::Plugin(p) => p.log_excerpt(),
            State::Dra(d) => d.log_excerpt(),
        };
        e.log = log.map(Box::new);
    }

    async fn teardown(self) {
        match self {
            State::Plugin(p) => p.teardown().await,
            State::Dra(d) => d.teardown().await,
        }
    }
}

/// Run the selected scenarios of `table`; `progress` sees each start and
/// result. A command that cannot be started is a usage error, said once
/// before any scenario runs.
pub(crate) async fn run(
    kind: Kind,
    table: &'static [Scenario],
    o: &Options,
    progress: &mut dyn FnMut(Progress),
) -> crate::core::Result<Vec<Record>> {
    if let (None, Some(prog)) = (&o.socket, o.plugin.first()) {
        if let Some(why) = super::env::unstartable(prog, std::env::var_os("PATH").as_deref(), kind.noun()) {
            return Err(crate::core::Error::usage(why));
        }
    }
    let mut records: Vec<Record> = Vec::new();
    // Set by a root-cause failure: every scenario after it is not run.
    // (Scenarios still to run in this session that report the cause itself run anyway.)
    let mut stopped: Option<(String, Vec<&str>)> = None;
    for session in Session::ALL {
        let chosen: Vec<&Scenario> = table.iter().filter(|s| s.session == session && selected(o, s)).collect();
        if chosen.is_empty() {
            continue;
        }
        let mut state: Option<State> = None;
        let mut setup_failure: Option<(&str, Outcome)> = None;
        for (i, s) in chosen.iter().copied().enumerate() {
            progress(Progress::Started(s));
            let start = Instant::now();
            let mut outcome = if let Some((why, _)) = stopped.as_ref().filter(|(_, run)| !run.contains(&s.id)) {
                Outcome::not_run(why.clone())
            } else if let Some(why) = not_applicable(o, s) {
                Outcome::skip(why)
            } else if let Some((first, _)) = &setup_failure {
                Outcome::not_run(format!("this group's setup failed (see {first})"))
            } else {
                if state.is_none() {
                    match kind.setup(o, session).await {
                        Ok(x) => state = Some(x),
                        Err(f) => setup_failure = Some((s.id, f)),
                    }
                }
                match (&mut state, &setup_failure) {
                    (Some(x), _) => {
                        let mut o = one(kind, x, s).await;
                        x.attach_log(&mut o);
                        o
                    }
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
        if let Some(x) = state {
            x.teardown().await;
        }
    }
    Ok(records)
}

/// Why `s` does not apply to this run, if it does not (pure).
fn not_applicable(o: &Options, s: &Scenario) -> Option<&'static str> {
    if o.socket.is_some() && s.needs_control {
        Some("needs control of the plugin's process and kubelet; not with --socket")
    } else if s.needs_trigger && o.health_trigger.is_none() {
        Some("no --health-trigger given")
    } else {
        None
    }
}

/// One scenario on its session's state, within [`SCENARIO_LIMIT`].
async fn one(kind: Kind, state: &mut State<'_>, s: &Scenario) -> Outcome {
    if !s.run.fits(s.session, matches!(kind, Kind::Dra)) {
        return Outcome::fail(s.id, "internal error: the scenario is for another session", "report this bug");
    }
    match tokio::time::timeout(SCENARIO_LIMIT, state.run(s.run)).await {
        Ok(Some(o)) => o,
        Ok(None) => Outcome::fail(s.id, "internal error: the scenario is for another session", "report this bug"),
        Err(_) => Outcome::fail(
            s.id,
            format!("the scenario did not finish within {SCENARIO_LIMIT:?}"),
            format!("see the {}'s log", kind.noun()),
        ),
    }
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::catalog::SCENARIOS;
    use crate::suite::filter::Pattern;
    use std::path::PathBuf;

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
            api_server: Default::default(),
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
    fn scenarios_that_need_control_or_a_trigger_are_skipped_without_them() {
        let find = |id: &str| SCENARIOS.iter().find(|s| s.id == id).expect(id);
        let mut o = opts(None, None);
        assert_eq!(not_applicable(&o, find("HEALTH-001")), Some("no --health-trigger given"));
        assert_eq!(not_applicable(&o, find("REG-001")), None);
        o.health_trigger = Some("true".into());
        assert_eq!(not_applicable(&o, find("HEALTH-001")), None);
        o.socket = Some(PathBuf::from("/run/p.sock"));
        assert!(not_applicable(&o, find("REG-001")).is_some_and(|w| w.contains("--socket")));
        assert_eq!(not_applicable(&o, find("LAW-001")), None);
    }

    #[test]
    fn focus_and_skip_select() {
        let all = SCENARIOS.iter().filter(|s| selected(&opts(None, None), s)).count();
        assert_eq!(all, SCENARIOS.len());
        let reg: Vec<&str> =
            SCENARIOS.iter().filter(|s| selected(&opts(Some("^REG-"), None), s)).map(|s| s.id).collect();
        assert_eq!(reg.len(), 9);
        let o = opts(Some("group:kubelet-restart"), Some("KRES-004"));
        let k: Vec<&str> = SCENARIOS.iter().filter(|s| selected(&o, s)).map(|s| s.id).collect();
        assert_eq!(k, ["KRES-001", "KRES-002", "KRES-003", "KRES-005"]);
    }
}
