//! `dpctl test`: a conformance suite for device plugins, the way critest and
//! csi-sanity are for runtimes and storage drivers. The suite builds a node
//! tree in a temp dir, owns the plugin's process, plays the kubelet (a
//! recording Registration server for protocol checks, the mock kubelet for
//! pods) and runs the scenarios of [`catalog`].
//!
//! - [`catalog`]: the scenarios (pure data).
//! - [`checks`]: pure checks of plugin answers.
//! - [`filter`]: `--focus` / `--skip` patterns.
//! - [`env`]: the node tree, the plugin process, the kubelets (I/O).
//! - [`run`]: the scenarios' code and the runner.
//! - [`report`]: table lines, JSON and JUnit XML (pure).
//! - [`dra`]: `dpctl test --dra`, the DRA driver scenarios on the same engine.

pub mod catalog;
pub mod checks;
pub mod dra;
pub mod env;
pub mod filter;
pub mod report;
pub mod run;

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
    /// The scenario does not apply.
    Skip,
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
}

/// What a scenario found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// PASS / FAIL / SKIP.
    pub verdict: Verdict,
    /// A note: a measurement when passed, the reason when skipped.
    pub detail: String,
    /// Evidence when failed.
    pub evidence: Option<Evidence>,
}

impl Outcome {
    /// Passed, with a note (may be empty).
    pub fn pass(detail: impl Into<String>) -> Self {
        Outcome { verdict: Verdict::Pass, detail: detail.into(), evidence: None }
    }

    /// Skipped, with the reason.
    pub fn skip(reason: impl Into<String>) -> Self {
        Outcome { verdict: Verdict::Skip, detail: reason.into(), evidence: None }
    }

    /// Failed, with evidence.
    pub fn fail(rpc: impl Into<String>, answer: impl Into<String>, fix: impl Into<String>) -> Self {
        Outcome {
            verdict: Verdict::Fail,
            detail: String::new(),
            evidence: Some(Evidence { rpc: rpc.into(), answer: answer.into(), fix: fix.into() }),
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
    /// PASS / FAIL / SKIP.
    pub result: Verdict,
    /// Wall time.
    #[serde(rename = "durationMs", serialize_with = "ser_ms")]
    pub duration: Duration,
    /// Measurement or skip reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Failure evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
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
        }
    }
}
