//! The pod worker: carries out the lifecycle's steps for one pod — the
//! calls, the waiting, the events — deciding nothing itself
//! ([`crate::kubelet::lifecycle::next`] does).

use super::{ContainerManager, Life};
use crate::kubelet::devicemanager::shell::Admission;
use crate::kubelet::event::KubeletEvent;
use crate::kubelet::lifecycle::{self, Facts, Next, Outcome, Reason, Step};
use crate::kubelet::manifest::Pod;
use std::sync::Arc;

impl ContainerManager {
    /// Record that `uid` is at `step` (waiting for `why`, with the error) and report it.
    fn set_step(&self, uid: &str, step: Step, why: Option<(Reason, String)>) {
        let pod = {
            let mut g = self.lock();
            let Some(l) = g.get_mut(uid) else { return };
            l.step = step;
            l.reason = why.as_ref().map(|(r, _)| *r);
            l.message = why.as_ref().map(|(r, e)| r.message(e));
            if step == Step::Running {
                l.started = true;
            }
            l.pod.key()
        };
        self.changed();
        let (reason, message) = match why {
            Some((r, e)) => (Some(r), Some(r.message(&e))),
            None => (None, None),
        };
        self.event(KubeletEvent::PodPhase { pod, uid: uid.to_string(), step, phase: step.phase(), reason, message });
    }

    /// Run an admitted pod's lifecycle from preparing its claims. A pod with
    /// claims (and a DRA manager) goes on as a task of the generation; any
    /// other is carried to Running before this returns.
    pub(super) async fn run_pod(self: &Arc<Self>, pod: Pod, admission: Admission) {
        let uid = pod.uid.clone();
        let (stop, busy) = (self.devices.gen.tasks.token().child_token(), Arc::new(tokio::sync::Mutex::new(())));
        let life = Life {
            pod: pod.clone(),
            step: Step::PrepareClaims,
            reason: None,
            message: None,
            started: admission.restored,
            evicted: false,
            stop: stop.clone(),
            busy: busy.clone(),
        };
        if let Some(old) = self.lock().insert(uid, life) {
            old.stop.cancel();
        }
        self.changed();
        let guard = busy.lock_owned().await;
        let facts = Facts { restored: admission.restored, claims_called: false };
        let has_claims = self.dra.is_some() && !pod.resource_claims.is_empty();
        if !has_claims {
            self.steps(&pod, Step::PrepareClaims, facts).await;
            drop(guard);
            return;
        }
        if let Some(dra) = &self.dra {
            dra.track(&pod);
        }
        let me = self.clone();
        self.devices.gen.tasks.spawn(async move {
            let _guard = guard;
            stop.run_until_cancelled(me.steps(&pod, Step::PrepareClaims, facts)).await;
        });
    }

    /// Carry the pod from `step` until it runs (or is refused).
    async fn steps(self: &Arc<Self>, pod: &Pod, mut step: Step, mut facts: Facts) {
        let mut attempt = 0u32;
        loop {
            let outcome = match step {
                Step::PrepareClaims => match (&self.dra, pod.resource_claims.is_empty()) {
                    (Some(dra), false) => {
                        attempt += 1;
                        if attempt == 1 {
                            self.set_step(&pod.uid, step, None);
                        }
                        // Enabled before the attempt: a change during it wakes the retry.
                        let woken = dra.changes().notified();
                        tokio::pin!(woken);
                        woken.as_mut().enable();
                        match dra.prepare(pod, attempt).await {
                            Ok(p) => {
                                facts.claims_called = p.called;
                                Outcome::Done
                            }
                            Err(e) => {
                                if let Next::Retry { reason, .. } = lifecycle::next(step, Outcome::Failed, facts) {
                                    self.set_step(&pod.uid, step, Some((reason, e.to_string())));
                                }
                                tokio::select! {
                                    _ = tokio::time::sleep(lifecycle::backoff(dra.retry_base(), attempt)) => {}
                                    _ = woken => {}
                                }
                                Outcome::Failed
                            }
                        }
                    }
                    _ => Outcome::Done,
                },
                Step::StartContainers => {
                    self.devices.start_containers(pod).await;
                    Outcome::Done
                }
                Step::Running => {
                    self.set_step(&pod.uid, step, None);
                    Outcome::Done
                }
                _ => return,
            };
            step = match lifecycle::next(step, outcome, facts) {
                Next::Go(s) | Next::Retry { step: s, .. } => s,
                Next::Refused | Next::Stop => return,
            };
        }
    }

    /// Delete a pod: its worker stops, then its containers stop, its claims
    /// are unprepared (every driver their state names; a failure is retried
    /// in the background) and its devices are freed, in that order.
    pub async fn remove_pod(self: &Arc<Self>, uid: &str) {
        let found = self.lock().get(uid).map(|l| (l.stop.clone(), l.busy.clone()));
        let Some((stop, busy)) = found else {
            // Not admitted by this generation's lifecycle: only the device manager knows it.
            self.devices.remove_pod(uid);
            return;
        };
        stop.cancel();
        let _busy = busy.lock().await;
        let (mut step, started) = match self.lock().get(uid) {
            Some(l) => (lifecycle::deleted(l.step), l.started),
            None => return,
        };
        if !started && step == Step::StopContainers {
            step = Step::UnprepareClaims;
        }
        let knows_claims = self.dra.as_ref().is_some_and(|d| d.knows(uid));
        if step == Step::UnprepareClaims && !knows_claims {
            step = Step::FreeDevices;
        }
        loop {
            self.set_step(uid, step, None);
            let outcome = match step {
                Step::StopContainers => Outcome::Done,
                Step::UnprepareClaims => match &self.dra {
                    Some(dra) => match dra.unprepare(uid, 1).await {
                        Ok(()) => Outcome::Done,
                        Err(_) => {
                            dra.unprepare_in_background(uid, 1);
                            Outcome::Failed
                        }
                    },
                    None => Outcome::Done,
                },
                Step::FreeDevices => {
                    self.devices.remove_pod(uid);
                    Outcome::Done
                }
                _ => break,
            };
            match lifecycle::next(step, outcome, Facts::default()) {
                // Nothing to unprepare: no claim of it was ever recorded.
                Next::Go(Step::UnprepareClaims) if !knows_claims => step = Step::FreeDevices,
                Next::Go(s) => step = s,
                _ => break,
            }
        }
        self.lock().remove(uid);
        self.changed();
    }
}
