//! The rulebook's shared types: one [`Rule`] (id, what it checks, what the
//! kubelet does, the [`Severity`] `probe`/`dpctl test` give, the kubelet's
//! text, the fix, the upstream source), one [`Violation`] (the rule and the
//! text every role reports) for every protocol: device plugin, plugin
//! registration, DRA and CDI.

use serde::Serialize;

/// What the kubelet (upstream) does when a plugin breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kubelet {
    /// Refuses the registration: Register (or the plugin watcher) returns the rule's text.
    Rejects,
    /// Fails the pod's admission, its claims' preparation or the container's start.
    FailsPod,
    /// Fails the ListAndWatch stream: the resource's devices become unhealthy.
    DropsStream,
    /// Accepts it; the rule's `checks` says what it costs.
    Tolerates,
    /// Upstream does not check it; dpctl's mock kubelet refuses it (a safe kubelet must).
    MockRejects,
}

/// How bad breaking a rule is: the verdict `probe`, `dra probe` and `dpctl
/// test` give (`doctor`: a warning or an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Severity {
    /// It works, but something is off.
    Warn,
    /// The kubelet refuses the plugin, drops its stream or fails the pod (or dpctl holds it to that).
    Fail,
}

/// One rule of a protocol.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Stable id (what reports, the README, `--fault` and the suite's scenarios name).
    pub id: &'static str,
    /// What it checks.
    pub checks: &'static str,
    /// What the kubelet does when it is broken.
    pub kubelet: Kubelet,
    /// The verdict `probe`, `dra probe` and `dpctl test` give.
    pub severity: Severity,
    /// The kubelet's text (a Go format string) where the kubelet enforces it.
    pub kubelet_text: Option<&'static str>,
    /// How to fix a plugin that breaks it.
    pub fix: &'static str,
    /// Where upstream says so (a kubernetes/kubernetes file or a documentation page).
    pub source: &'static str,
}

impl Rule {
    /// A violation of this rule: `text` is what every role reports.
    pub fn violated(&'static self, text: impl Into<String>) -> Violation {
        Violation { rule: self, text: text.into(), device: None }
    }

    /// Whether the mock kubelet refuses a registration that breaks it.
    pub fn mock_kubelet_rejects(&self) -> bool {
        matches!(self.kubelet, Kubelet::Rejects | Kubelet::MockRejects)
    }

    /// Whether breaking it is a failure (else a warning).
    pub fn is_fail(&self) -> bool {
        self.severity == Severity::Fail
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for Rule {}

/// A broken rule, with what was seen. Its `Display` is the text every role
/// reports (the kubelet's own text where the kubelet enforces the rule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The rule broken.
    pub rule: &'static Rule,
    /// What was seen, in words (the kubelet's text where it has one).
    pub text: String,
    /// The index of the device in the list checked, for device rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<usize>,
}

impl Violation {
    /// Whether `probe` and `dpctl test` fail on it (else they warn).
    pub fn is_fail(&self) -> bool {
        self.rule.is_fail()
    }

    /// The violation at device `i` of the list checked.
    pub(crate) fn at(mut self, i: usize) -> Self {
        self.device = Some(i);
        self
    }

    /// The text with the rule's id and fix: `TEXT (ID; fix: FIX)`, for a
    /// line that stands alone (an error, a warning on stderr).
    pub fn explained(&self) -> String {
        format!("{} ({}; fix: {})", self.text, self.rule.id, self.rule.fix)
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Violation {}

/// A gRPC error status as Go prints it (`%v`), as the kubelet's texts embed it.
pub fn go_status(code: tonic::Code, message: &str) -> String {
    format!("rpc error: code = {code:?} desc = {message}")
}
