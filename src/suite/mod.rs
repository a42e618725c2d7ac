//! `dpctl test`: a conformance suite for device plugins, the way critest and
//! csi-sanity are for runtimes and storage drivers. The suite builds a node
//! tree in a temp dir, owns the plugin's process, plays the kubelet (a
//! recording Registration server for protocol checks, the mock kubelet for
//! pods) and runs the scenarios of [`catalog`].
//!
//! - [`catalog`]: the scenarios as a table of values.
//! - [`checks`]: pure checks of plugin answers.
//! - [`evidence`]: log excerpts, cut lists and transport errors in words (pure).
//! - [`options`]: what a run asks for and the sessions scenarios run in.
//! - [`filter`]: `--focus` / `--skip` patterns.
//! - [`env`]: the node tree, the plugin process, the kubelets (I/O).
//! - `engine`: the runner, one for both plugin kinds.
//! - `scenarios`: the device-plugin scenarios' code, a file per group.
//! - [`run`]: `dpctl test` for device plugins on the engine.
//! - [`report`]: table lines, JSON and JUnit XML (pure).
//! - [`dra`]: `dpctl test --dra`, the DRA driver scenarios on the same engine.

/// The value of a `Result<T, Outcome>`, or return its outcome: a scenario
/// that cannot get what it needs ends with the outcome that says why.
macro_rules! need {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(o) => return o,
        }
    };
}

pub mod catalog;
pub mod checks;
pub mod dra;
pub(crate) mod engine;
pub mod env;
pub mod evidence;
pub mod filter;
pub mod options;
pub mod report;
pub mod run;
mod scenarios;

use serde::Serialize;
use std::time::Duration;

/// A scenario's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The plugin did what the rule asks.
    Pass,
    /// It did not.
    Fail,
    /// It did what the rule asks, but in a way that costs something on a
    /// real node (the detail says what and how much); exit status 0.
    Warn,
    /// The scenario does not apply.
    Skip,
    /// It could not run because an earlier failure (the root cause) makes it moot.
    #[serde(rename = "NOT-RUN")]
    NotRun,
}

/// Why a scenario failed: the call, what came back, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The RPC or action.
    pub rpc: String,
    /// What the plugin answered or did.
    pub answer: String,
    /// How to fix the plugin.
    pub fix: String,
    /// The plugin's (driver's) own last log lines, bounded, filled in by the
    /// engine on a failure ([`evidence::log_excerpt`]).
    /// (Boxed: an outcome stays small.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<Box<String>>,
}

/// What a scenario found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// PASS / FAIL / WARN / SKIP / NOT-RUN.
    pub verdict: Verdict,
    /// A note: a measurement when passed, the reason when skipped.
    pub detail: String,
    /// Evidence when failed (or warned).
    pub evidence: Option<Evidence>,
    /// Set on a root-cause failure: nothing after it can run.
    pub stop: Option<Box<Stop>>,
}

/// A failure that leaves nothing else to test (the plugin exited at start,
/// the kubelet refused its registration, kubelet.sock is gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// Why the remaining scenarios cannot run, e.g. "the plugin exited at start".
    pub reason: String,
    /// Scenarios whose own check reports this cause: when one of them
    /// failed before, or is still to run in this session (it then runs), the
    /// stopping scenario is marked not run instead of failed.
    pub shown_by: &'static [&'static str],
}

impl Outcome {
    /// Passed, with a note (may be empty).
    pub fn pass(detail: impl Into<String>) -> Self {
        Outcome { verdict: Verdict::Pass, detail: detail.into(), evidence: None, stop: None }
    }

    /// Passed with a cost worth knowing: the detail says what, the evidence shows it.
    pub fn warn(detail: impl Into<String>, evidence: Option<Evidence>) -> Self {
        Outcome { verdict: Verdict::Warn, detail: detail.into(), evidence, stop: None }
    }

    /// Not run, with the reason (the root cause reported elsewhere).
    pub fn not_run(reason: impl Into<String>) -> Self {
        Outcome { verdict: Verdict::NotRun, detail: reason.into(), evidence: None, stop: None }
    }

    /// This failure stops the run: the rest is marked not run with `reason`.
    pub fn stopping(mut self, reason: impl Into<String>, shown_by: &'static [&'static str]) -> Self {
        self.stop = Some(Box::new(Stop { reason: reason.into(), shown_by }));
        self
    }

    /// Skipped, with the reason.
    pub fn skip(reason: impl Into<String>) -> Self {
        Outcome { verdict: Verdict::Skip, detail: reason.into(), evidence: None, stop: None }
    }

    /// Failed, with evidence.
    pub fn fail(rpc: impl Into<String>, answer: impl Into<String>, fix: impl Into<String>) -> Self {
        Outcome {
            verdict: Verdict::Fail,
            detail: String::new(),
            evidence: Some(Evidence { rpc: rpc.into(), answer: answer.into(), fix: fix.into(), log: None }),
            stop: None,
        }
    }
}

/// One scenario's row in the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Scenario ID.
    pub id: String,
    /// Group.
    pub group: String,
    /// One-line description.
    pub title: String,
    /// The rule.
    pub rule: String,
    /// Where the rule comes from.
    pub source: String,
    /// PASS / FAIL / WARN / SKIP / NOT-RUN.
    pub result: Verdict,
    /// Wall time.
    #[serde(rename = "durationMs", serialize_with = "ser_ms")]
    pub duration: Duration,
    /// Measurement or skip reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Failure (or warning) evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// The kubelet version the scenario ran against (with several `--kubelet-version`s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<String>,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

impl Record {
    /// A row from a scenario and its outcome.
    pub fn new(s: &catalog::Scenario, o: Outcome, duration: Duration) -> Self {
        Record {
            id: s.id.into(),
            group: s.group.into(),
            title: s.title.into(),
            rule: s.rule.into(),
            source: s.source.into(),
            result: o.verdict,
            duration,
            detail: o.detail,
            evidence: o.evidence,
            kubelet_version: None,
        }
    }
}
