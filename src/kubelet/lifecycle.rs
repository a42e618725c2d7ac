//! The pod lifecycle the kubelet runs, as typed steps and pure decisions
//! (no I/O, no async; the container manager's pod worker carries them out):
//!
//! admission (device manager: Allocate) → prepare every claim (DRA; each
//! claim recorded in the DRA checkpoint before its driver is called) →
//! start containers (PreStartContainer, init containers then containers) →
//! running → on deletion: stop containers → unprepare claims (every driver
//! the claim's state names) → free devices → gone.
//!
//! A prepare that fails keeps the pod Pending with the kubelet's error
//! (reason `FailedPrepareDynamicResources`, kuberuntime_manager.go SyncPod)
//! and is retried with a doubling backoff; no container starts until every
//! claim is prepared. A pod restored after a kubelet restart takes the same
//! steps; its containers start only if they could not have started before
//! (a claim needed a driver call now).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A step of a pod's life on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// The device manager admits it (Allocate).
    Admit,
    /// The DRA manager prepares its claims.
    PrepareClaims,
    /// Its containers start (PreStartContainer where a plugin asks for it).
    StartContainers,
    /// Its containers run.
    Running,
    /// It was deleted: its containers stop.
    StopContainers,
    /// Its claims are unprepared.
    UnprepareClaims,
    /// Its devices are freed.
    FreeDevices,
    /// Nothing of it is left.
    Gone,
}

/// The pod phase the API shows for a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Not all of it runs yet.
    Pending,
    /// Its containers run.
    Running,
    /// Being torn down.
    Terminating,
}

/// Why a pod waits (the reason of the kubelet's event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// Preparing a claim failed (events.FailedPrepareDynamicResources).
    FailedPrepareDynamicResources,
}

impl Reason {
    /// The event message for `error` (kuberuntime_manager.go SyncPod).
    pub fn message(self, error: &str) -> String {
        match self {
            Reason::FailedPrepareDynamicResources => format!("Failed to prepare dynamic resources: {error}"),
        }
    }
}

impl Step {
    /// The pod phase during this step.
    pub fn phase(self) -> Phase {
        match self {
            Step::Admit | Step::PrepareClaims | Step::StartContainers => Phase::Pending,
            Step::Running => Phase::Running,
            Step::StopContainers | Step::UnprepareClaims | Step::FreeDevices | Step::Gone => Phase::Terminating,
        }
    }
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did what it does.
    Done,
    /// It failed (the error is reported beside).
    Failed,
}

/// What is known about the pod when deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Facts {
    /// Its admission came from the checkpoint (a kubelet restart).
    pub restored: bool,
    /// Preparing its claims called a driver (some claim was not prepared before).
    pub claims_called: bool,
}

/// What comes after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Go on with this step.
    Go(Step),
    /// Try the step again after the delay (a change may wake it earlier);
    /// the pod waits for the reason.
    Retry {
        /// The step.
        step: Step,
        /// Why the pod waits.
        reason: Reason,
    },
    /// The pod is refused (admission failed): nothing more.
    Refused,
    /// Nothing more to do.
    Stop,
}

/// The step after `step` ended with `outcome`.
pub fn next(step: Step, outcome: Outcome, facts: Facts) -> Next {
    use Outcome::*;
    match (step, outcome) {
        (Step::Admit, Done) => Next::Go(Step::PrepareClaims),
        (Step::Admit, Failed) => Next::Refused,
        (Step::PrepareClaims, Failed) => {
            Next::Retry { step: Step::PrepareClaims, reason: Reason::FailedPrepareDynamicResources }
        }
        // A restored pod whose claims were all prepared before the restart had
        // its containers started then; they keep running.
        (Step::PrepareClaims, Done) if facts.restored && !facts.claims_called => Next::Go(Step::Running),
        (Step::PrepareClaims, Done) => Next::Go(Step::StartContainers),
        // A failed PreStartContainer is the container's start failure (reported); the pod goes on.
        (Step::StartContainers, _) => Next::Go(Step::Running),
        (Step::Running, _) => Next::Stop,
        (Step::StopContainers, _) => Next::Go(Step::UnprepareClaims),
        // A failed unprepare is retried by the DRA manager in the background;
        // the device manager frees the pod's devices regardless, as the kubelet's does.
        (Step::UnprepareClaims, _) => Next::Go(Step::FreeDevices),
        (Step::FreeDevices, _) => Next::Go(Step::Gone),
        (Step::Gone, _) => Next::Stop,
    }
}

/// The step a deleted pod goes to from `step`: containers that may have
/// started stop; a pod whose containers never started goes straight to
/// unpreparing its claims (some may be recorded or prepared).
pub fn deleted(step: Step) -> Step {
    match step {
        Step::Admit | Step::PrepareClaims => Step::UnprepareClaims,
        Step::StartContainers | Step::Running | Step::StopContainers => Step::StopContainers,
        later => later,
    }
}

/// The delay before retry `attempt` (1 after the first failure): `base`,
/// doubling up to 16×, as the kubelet's pod workers back off.
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    base * 2u32.pow(attempt.saturating_sub(1).min(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walk from `step` while each step is Done.
    fn walk(mut step: Step, facts: Facts) -> Vec<Step> {
        let mut seen = vec![step];
        while let Next::Go(s) = next(step, Outcome::Done, facts) {
            seen.push(s);
            step = s;
        }
        seen
    }

    #[test]
    fn a_pod_is_admitted_then_its_claims_prepared_then_its_containers_started() {
        assert_eq!(
            walk(Step::Admit, Facts::default()),
            [Step::Admit, Step::PrepareClaims, Step::StartContainers, Step::Running]
        );
        assert_eq!(next(Step::Admit, Outcome::Failed, Facts::default()), Next::Refused);
    }

    #[test]
    fn a_failed_prepare_keeps_the_pod_pending_and_starts_no_container() {
        let n = next(Step::PrepareClaims, Outcome::Failed, Facts::default());
        assert_eq!(n, Next::Retry { step: Step::PrepareClaims, reason: Reason::FailedPrepareDynamicResources });
        assert_eq!(Step::PrepareClaims.phase(), Phase::Pending);
        assert_eq!(
            Reason::FailedPrepareDynamicResources.message("prepare dynamic resources: x"),
            "Failed to prepare dynamic resources: prepare dynamic resources: x"
        );
    }

    #[test]
    fn deletion_stops_containers_then_unprepares_claims_then_frees_devices() {
        assert_eq!(deleted(Step::Running), Step::StopContainers);
        assert_eq!(
            walk(Step::StopContainers, Facts::default()),
            [Step::StopContainers, Step::UnprepareClaims, Step::FreeDevices, Step::Gone]
        );
        // Deleted while its claims were being prepared: no container ran; its claims still go.
        assert_eq!(deleted(Step::PrepareClaims), Step::UnprepareClaims);
        assert_eq!(next(Step::UnprepareClaims, Outcome::Failed, Facts::default()), Next::Go(Step::FreeDevices));
        assert_eq!(Step::UnprepareClaims.phase(), Phase::Terminating);
    }

    #[test]
    fn a_restored_pod_starts_its_containers_only_if_a_claim_was_prepared_now() {
        let before = Facts { restored: true, claims_called: false };
        assert_eq!(walk(Step::PrepareClaims, before), [Step::PrepareClaims, Step::Running]);
        let now = Facts { restored: true, claims_called: true };
        assert_eq!(walk(Step::PrepareClaims, now), [Step::PrepareClaims, Step::StartContainers, Step::Running]);
    }

    #[test]
    fn retries_back_off_doubling_up_to_sixteen_times() {
        let b = Duration::from_millis(100);
        let d: Vec<u128> = (1..=7).map(|a| backoff(b, a).as_millis()).collect();
        assert_eq!(d, [100, 200, 400, 800, 1600, 1600, 1600]);
        assert_eq!(backoff(b, 0), b);
    }
}
