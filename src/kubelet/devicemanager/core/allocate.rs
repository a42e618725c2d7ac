//! Admitting a pod, as a plan the shell carries out step by step: for each
//! container (init containers first), the topology affinity, then for each
//! resource the kubelet's devicesToAllocate. Where the kubelet would ask the
//! plugin (GetPreferredAllocation, Allocate), [`PodAdmission::next`] returns
//! that question as a [`Step`] and takes the answer back with the next call;
//! it never awaits, so every branch is a unit test.

use super::admission::{AdmissionError, Cause, DevicesError};
use super::state::{AllocKey, Allocation, State};
use super::topology::{container_affinity, filter_by_affinity, TopologyPolicy};
use crate::api::deviceplugin::{AllocateResponse, ContainerPreferredAllocationRequest};
use crate::kubelet::manifest::Pod;
use crate::kubelet::profile::{AdmissionChecks, Profile};
use std::collections::{BTreeMap, BTreeSet};

/// What devicesToAllocate decided for one container and resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// The container already has these devices (restored from the checkpoint): no Allocate.
    Existing(Vec<String>),
    /// Ask the plugin first; call again with its answer.
    Ask(ContainerPreferredAllocationRequest),
    /// Allocate these.
    Chosen(Vec<String>),
}

/// The inputs of devicesToAllocate besides the state.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// Pod UID.
    pub uid: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Resource name.
    pub resource: &'a str,
    /// Devices requested.
    pub required: usize,
    /// Devices an earlier init container of the pod released.
    pub reusable: Option<&'a BTreeSet<String>>,
    /// Allocations of this admission so far.
    pub pending: &'a BTreeMap<AllocKey, Allocation>,
    /// The topology affinity for the container.
    pub affinity: Option<&'a BTreeSet<i64>>,
    /// The plugin's GetPreferredAllocation answer, once asked.
    pub preferred: Option<&'a [String]>,
    /// Which checks the kubelet version makes.
    pub checks: AdmissionChecks,
    /// The container is already running and the kubelet's sources are not
    /// ready yet (a pod restored right after a kubelet restart): its devices
    /// are kept without checks, as the kubelet does since kubernetes#114640.
    pub running: bool,
}

/// The kubelet's devicesToAllocate. Errors are the kubelet's texts (before wrapping).
pub fn devices_to_allocate(st: &State, w: &Want) -> Result<Choice, DevicesError> {
    let key = (w.uid.to_string(), w.container.to_string(), w.resource.to_string());
    let existing = st.allocations.get(&key).or_else(|| w.pending.get(&key));
    if let Some(a) = existing {
        if a.ids.len() != w.required {
            return Err(DevicesError::ChangedRequest {
                uid: w.uid.to_string(),
                container: w.container.to_string(),
                resource: w.resource.to_string(),
                from: a.ids.len(),
                to: w.required,
            });
        }
        if w.checks == AdmissionChecks::Legacy || w.running {
            return Ok(Choice::Existing(a.ids.clone()));
        }
    }
    let r = st.resources.get(w.resource).filter(|r| !r.removed).ok_or_else(|| DevicesError::Unregistered {
        resource: w.resource.to_string(),
        legacy: w.checks == AdmissionChecks::Legacy,
    })?;
    if w.checks == AdmissionChecks::Health {
        let healthy = r.healthy();
        if healthy.is_empty() {
            return Err(DevicesError::NoHealthy { resource: w.resource.to_string() });
        }
        if let Some(a) = existing {
            if !a.ids.iter().all(|id| healthy.contains(id)) {
                return Err(DevicesError::NoLongerHealthy { resource: w.resource.to_string() });
            }
            return Ok(Choice::Existing(a.ids.clone()));
        }
    }
    let mut needed = w.required;
    let mut allocated: Vec<String> = Vec::new();
    let take = |from: &mut dyn Iterator<Item = String>, allocated: &mut Vec<String>, needed: &mut usize| {
        for id in from {
            if *needed == 0 {
                break;
            }
            if !allocated.contains(&id) {
                allocated.push(id);
                *needed -= 1;
            }
        }
        *needed == 0
    };
    if take(&mut w.reusable.into_iter().flatten().cloned(), &mut allocated, &mut needed) {
        return Ok(Choice::Chosen(allocated));
    }
    let in_use = st.in_use(w.resource, w.pending);
    let available: BTreeSet<String> = r.healthy().into_iter().filter(|d| !in_use.contains(d)).collect();
    if available.len() < needed {
        return Err(DevicesError::Unavailable {
            resource: w.resource.to_string(),
            requested: needed,
            available: available.len(),
        });
    }
    let (aligned, unaligned, no_affinity) = filter_by_affinity(st, w.resource, &available, w.affinity);
    let asks = r.endpoint.as_ref().is_some_and(|e| e.get_preferred_allocation_available);
    // The plugin's answer, limited to the candidates; a question if not asked yet.
    let preferred = |candidates: &BTreeSet<String>, allocated: &[String]| -> Result<Vec<String>, Choice> {
        if !asks {
            return Ok(Vec::new());
        }
        let all: BTreeSet<String> = candidates.iter().chain(allocated).cloned().collect();
        match w.preferred {
            None => {
                let mut must: Vec<String> = allocated.to_vec();
                must.sort();
                Err(Choice::Ask(ContainerPreferredAllocationRequest {
                    available_device_i_ds: all.into_iter().collect(),
                    must_include_device_i_ds: must,
                    allocation_size: i32::try_from(w.required).unwrap_or(i32::MAX),
                }))
            }
            Some(ans) => {
                let set: BTreeSet<String> = ans.iter().filter(|i| candidates.contains(*i)).cloned().collect();
                Ok(set.into_iter().collect())
            }
        }
    };
    if needed < aligned.len() {
        let p = match preferred(&aligned, &allocated) {
            Ok(p) => p,
            Err(ask) => return Ok(ask),
        };
        if take(&mut p.into_iter(), &mut allocated, &mut needed)
            || take(&mut aligned.into_iter(), &mut allocated, &mut needed)
        {
            return Ok(Choice::Chosen(allocated));
        }
    } else {
        if take(&mut aligned.into_iter(), &mut allocated, &mut needed) {
            return Ok(Choice::Chosen(allocated));
        }
        let p = match preferred(&available, &allocated) {
            Ok(p) => p,
            Err(ask) => return Ok(ask),
        };
        if take(&mut p.into_iter(), &mut allocated, &mut needed)
            || take(&mut unaligned.into_iter(), &mut allocated, &mut needed)
            || take(&mut no_affinity.into_iter(), &mut allocated, &mut needed)
        {
            return Ok(Choice::Chosen(allocated));
        }
    }
    Err(DevicesError::Short { requested: w.required, got: w.required - needed })
}

/// A question for the plugin, or the end of the admission.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Call GetPreferredAllocation with this one container request.
    Preferred {
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// The request.
        request: ContainerPreferredAllocationRequest,
    },
    /// Call Allocate for these devices.
    Allocate {
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Device IDs.
        ids: Vec<String>,
    },
    /// Done: the allocations to commit, or why the kubelet rejects the pod.
    Done(Result<Admitted, AdmissionError>),
}

/// What the shell brings back.
#[derive(Debug, Clone)]
pub enum Answer {
    /// The first call.
    Begin,
    /// GetPreferredAllocation's device IDs (only the first container response is read).
    Preferred(Vec<String>),
    /// GetPreferredAllocation failed.
    PreferredFailed(String),
    /// Allocate's answer.
    Allocated(AllocateResponse),
    /// Allocate failed (or the endpoint is gone).
    AllocateFailed(String),
}

/// A finished admission.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// New allocations.
    pub pending: BTreeMap<AllocKey, Allocation>,
    /// The pod had allocations in the checkpoint (no Allocate was needed for them).
    pub restored: bool,
    /// Allocate calls made.
    pub allocate_calls: usize,
}

/// A container's name, whether its devices are reusable by later containers
/// (a plain init container), and its requests.
type ContainerPlan = (String, bool, Vec<(String, usize)>);

/// One pod's admission in progress.
#[derive(Debug, Clone)]
pub struct PodAdmission {
    uid: String,
    containers: Vec<ContainerPlan>,
    c: usize,
    r: usize,
    affinity: Option<Option<BTreeSet<i64>>>,
    reusable: BTreeMap<String, BTreeSet<String>>,
    pending: BTreeMap<AllocKey, Allocation>,
    preferred: Option<Vec<String>>,
    chosen: Option<Vec<String>>,
    restored: bool,
    calls: usize,
    profile: Profile,
}

impl PodAdmission {
    /// Start admitting `pod` against `st` as the kubelet of `profile` does.
    /// A sidecar (`restartPolicy: Always`) keeps its devices for the pod's
    /// life: they go to no later container (from 1.29; before, it is a
    /// plain init container).
    pub fn new(pod: &Pod, st: &State, profile: Profile) -> Self {
        let containers = pod
            .init_containers
            .iter()
            .map(|c| (c, !(c.restart_always && profile.sidecar_devices)))
            .chain(pod.containers.iter().map(|c| (c, false)))
            .map(|(c, init)| {
                let res = c.resources.iter().map(|(r, n)| (r.clone(), usize::try_from(*n).unwrap_or(usize::MAX)));
                (c.name.clone(), init, res.collect())
            })
            .collect();
        PodAdmission {
            uid: pod.uid.clone(),
            containers,
            c: 0,
            r: 0,
            affinity: None,
            reusable: BTreeMap::new(),
            pending: BTreeMap::new(),
            preferred: None,
            chosen: None,
            restored: st.allocations.keys().any(|(u, _, _)| u == &pod.uid),
            calls: 0,
            profile,
        }
    }

    /// The allocations made so far (to show while in flight).
    pub fn pending(&self) -> &BTreeMap<AllocKey, Allocation> {
        &self.pending
    }

    fn done_with(&mut self, is_init: bool, res: &str, ids: &[String]) {
        let set = self.reusable.entry(res.to_string()).or_default();
        if is_init {
            set.extend(ids.iter().cloned());
        } else {
            for id in ids {
                set.remove(id);
            }
        }
        self.r += 1;
        self.preferred = None;
        self.chosen = None;
    }

    /// Take the answer to the last step and return the next one.
    pub fn next(&mut self, st: &State, policy: TopologyPolicy, answer: Answer) -> Step {
        match answer {
            Answer::Begin => {}
            Answer::Preferred(ids) => self.preferred = Some(ids),
            Answer::PreferredFailed(e) => return Step::Done(Err(AdmissionError::Unexpected(Cause::Preferred(e)))),
            Answer::AllocateFailed(e) => return Step::Done(Err(AdmissionError::Unexpected(Cause::Allocate(e)))),
            Answer::Allocated(resp) => {
                let Some(c) = resp.container_responses.into_iter().next() else {
                    return Step::Done(Err(AdmissionError::Unexpected(Cause::NoContainers)));
                };
                let (Some((name, init, resources)), Some(ids)) = (self.containers.get(self.c), self.chosen.take())
                else {
                    return Step::Done(Err(AdmissionError::Invalid("an Allocate answer without a question".into())));
                };
                let (name, init) = (name.clone(), *init);
                let Some((res, _)) = resources.get(self.r).cloned() else {
                    return Step::Done(Err(AdmissionError::Invalid("an Allocate answer without a question".into())));
                };
                self.calls += 1;
                let a = Allocation::new(st, &res, ids.clone(), c);
                self.pending.insert((self.uid.clone(), name, res.clone()), a);
                self.done_with(init, &res, &ids);
            }
        }
        loop {
            let Some((name, init, resources)) = self.containers.get(self.c).cloned() else {
                let a = Admitted {
                    pending: std::mem::take(&mut self.pending),
                    restored: self.restored,
                    allocate_calls: self.calls,
                };
                return Step::Done(Ok(a));
            };
            if self.affinity.is_none() {
                // Unknown resources fail the kubelet's resource-fit check before the device manager runs.
                if let Some((res, n)) = resources.iter().find(|(r, _)| !st.resources.contains_key(r)) {
                    return Step::Done(Err(AdmissionError::OutOf { resource: res.clone(), requested: *n }));
                }
                let merge = self.profile.hint_merge;
                match container_affinity(st, policy, merge, &self.uid, &name, &resources, &self.reusable, &self.pending)
                {
                    Ok(a) => self.affinity = Some(a),
                    Err(_) => return Step::Done(Err(AdmissionError::Topology)),
                }
            }
            let Some((res, n)) = resources.get(self.r).cloned() else {
                self.c += 1;
                self.r = 0;
                self.affinity = None;
                continue;
            };
            let want = Want {
                uid: &self.uid,
                container: &name,
                resource: &res,
                required: n,
                reusable: self.reusable.get(&res),
                pending: &self.pending,
                affinity: self.affinity.as_ref().and_then(|a| a.as_ref()),
                preferred: self.preferred.as_deref(),
                checks: self.profile.admission,
                running: self.restored,
            };
            match devices_to_allocate(st, &want) {
                Err(e) => return Step::Done(Err(e.into())),
                Ok(Choice::Existing(ids)) => self.done_with(init, &res, &ids),
                Ok(Choice::Ask(request)) => return Step::Preferred { container: name, resource: res, request },
                Ok(Choice::Chosen(ids)) => {
                    let Some(r) = st.resources.get(&res) else {
                        return Step::Done(Err(AdmissionError::Unexpected(Cause::UnknownPlugin(res))));
                    };
                    match &r.endpoint {
                        None => return Step::Done(Err(AdmissionError::Unexpected(Cause::UnknownPlugin(res)))),
                        Some(e) if r.stopped => {
                            let socket = e.socket.clone();
                            return Step::Done(Err(AdmissionError::Unexpected(Cause::Stopped {
                                resource: res,
                                socket,
                            })));
                        }
                        Some(_) => {}
                    }
                    self.chosen = Some(ids.clone());
                    return Step::Allocate { container: name, resource: res, ids };
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "allocate_tests.rs"]
mod tests;
