//! The container manager of one generation (the kubelet's `cm`): it owns
//! the device manager and the DRA manager side by side — neither holds the
//! other — and runs each pod's lifecycle over both ([`crate::kubelet::lifecycle`]:
//! admit → prepare claims → start containers → … → stop → unprepare → free).
//! The plugin watcher, the manifest loop, PodResources and the status views
//! all go through it.

use crate::kubelet::devicemanager::core::AdmissionError;
use crate::kubelet::devicemanager::shell::Manager;
use crate::kubelet::dra::{core::extended, shell::DraManager};
use crate::kubelet::event::{GenerationEvents, KubeletEvent};
use crate::kubelet::lifecycle::{Phase, Reason, Step};
use crate::kubelet::manifest::Pod;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

mod worker;

/// Where one pod is, as `dpctl node` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodLifecycle {
    /// `namespace/name`.
    pub pod: String,
    /// UID.
    pub uid: String,
    /// The step it is at.
    pub step: Step,
    /// The pod phase.
    pub phase: Phase,
    /// Why it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The kubelet's message for that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One pod's lifecycle state.
struct Life {
    pod: Pod,
    step: Step,
    reason: Option<Reason>,
    message: Option<String>,
    /// Its containers were started (by this generation or before a restart).
    started: bool,
    /// A NoExecute device taint evicted it (DisruptionTarget, DeletionByDeviceTaintManager).
    evicted: bool,
    /// Cancels its worker (the pod was deleted).
    stop: CancellationToken,
    /// Held by whoever carries out its steps.
    busy: Arc<tokio::sync::Mutex<()>>,
}

/// The container manager of one generation.
pub struct ContainerManager {
    /// The device manager.
    pub devices: Arc<Manager>,
    /// The DRA manager (None: DRA plugins are not handled).
    pub dra: Option<Arc<DraManager>>,
    pods: Mutex<BTreeMap<String, Life>>,
    /// The generation's events, which the device manager emits through too
    /// (the DRA manager emits its own on the bus).
    events: Arc<GenerationEvents>,
    /// Bumped whenever a pod is added, changes step or goes (the pods API's watch).
    changes: tokio::sync::watch::Sender<u64>,
}

/// A pod as the kubelet's pods API shows it (see `kubelet::pods`).
#[derive(Debug, Clone)]
pub struct PodView {
    /// The pod.
    pub pod: Pod,
    /// Its lifecycle step.
    pub step: Step,
    /// Why it waits, and the kubelet's message for that.
    pub why: Option<(Reason, String)>,
    /// Its containers were started.
    pub started: bool,
    /// A NoExecute device taint evicted it.
    pub evicted: bool,
}

impl ContainerManager {
    /// Both managers of one generation.
    pub fn new(devices: Arc<Manager>, dra: Option<Arc<DraManager>>) -> Arc<Self> {
        let (changes, _) = tokio::sync::watch::channel(0);
        let events = devices.events.clone();
        Arc::new(ContainerManager { devices, dra, pods: Mutex::new(BTreeMap::new()), events, changes })
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Life>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Report an event of this generation (none once it is closed).
    pub fn event(&self, e: KubeletEvent) {
        self.events.emit(e);
    }

    /// Admit pods (the device manager commits them together), then run
    /// each admitted pod's lifecycle: a pod without claims has its
    /// containers started before this returns; one with claims goes on in
    /// the background (its claims may wait for a driver).
    pub async fn admit_batch(
        self: &Arc<Self>,
        pods: Vec<(Pod, PathBuf)>,
    ) -> Vec<(PathBuf, Result<(), AdmissionError>)> {
        let (pods, by_file) = self.extended_resources(pods);
        let mut out = Vec::new();
        for (file, r) in self.devices.admit_batch(pods).await {
            match r {
                Err(e) => out.push((file, Err(e))),
                Ok(admission) => {
                    if let Some(pod) = by_file.get(&file) {
                        self.run_pod(pod.clone(), admission).await;
                    }
                    out.push((file, Ok(())));
                }
            }
        }
        out
    }

    /// Whether a container of `pod` asks for an extended resource (or a
    /// DeviceClass's implicit one) no device plugin of this node serves.
    pub fn asks_unserved_extended(&self, pod: &Pod) -> bool {
        let allocatable: BTreeMap<String, usize> =
            self.devices.resources().into_iter().map(|r| (r.resource, r.allocatable)).collect();
        pod.init_containers
            .iter()
            .chain(&pod.containers)
            .flat_map(|c| c.resources.iter())
            .any(|(r, n)| *n > 0 && extended::is_dra_extended_name(r) && allocatable.get(r).copied().unwrap_or(0) == 0)
    }

    /// DRA-backed extended resources (KEP-5004), when the gate is on: each
    /// pod as the device manager admits it (the resources DRA serves taken
    /// out, so they are never refused `OutOf<resource>`) and, by file, as its
    /// lifecycle runs it (with the special claim).
    fn extended_resources(&self, pods: Vec<(Pod, PathBuf)>) -> (Vec<(Pod, PathBuf)>, BTreeMap<PathBuf, Pod>) {
        let on = self.devices.cfg.profile.dra_extended_resource.enabled();
        let mapping = match &self.dra {
            Some(dra) if on => dra.class_mapping(),
            _ => BTreeMap::new(),
        };
        let allocatable: BTreeMap<String, usize> = if mapping.is_empty() {
            BTreeMap::new()
        } else {
            self.devices.resources().into_iter().map(|r| (r.resource, r.allocatable)).collect()
        };
        // A pod keeps the path it was admitted with (before a restart): the
        // device plugin's where its devices are in the checkpoint, DRA's
        // where its special claim is.
        let (held, claims): (BTreeSet<(String, String)>, BTreeSet<String>) = match &self.dra {
            Some(dra) if !mapping.is_empty() => (
                self.devices
                    .pods()
                    .into_iter()
                    .flat_map(|p| {
                        let uid = p.uid;
                        p.containers.into_iter().flat_map(move |c| {
                            let uid = uid.clone();
                            c.resources.into_keys().map(move |r| (uid.clone(), r))
                        })
                    })
                    .collect(),
                dra.claims().into_iter().map(|c| c.key()).collect(),
            ),
            _ => Default::default(),
        };
        let mut by_file = BTreeMap::new();
        let mut out = Vec::new();
        for (mut pod, file) in pods {
            // A pod of the API the scheduler placed names its special claim itself (from its status).
            let claim = match extended::take_given(&mut pod) {
                Some(x) => Some(x),
                None => {
                    let special = format!("{}/{}", pod.namespace, extended::claim_name(&pod.name, &pod.uid));
                    let none = BTreeMap::new();
                    let alloc = if claims.contains(&special) { &none } else { &allocatable };
                    let mut served = extended::dra_served(&pod, &mapping, alloc);
                    served.retain(|r, _| !held.contains(&(pod.uid.clone(), r.clone())));
                    extended::build(&pod, &served)
                }
            };
            if let Some(x) = &claim {
                self.event(KubeletEvent::ExtendedResourceClaim {
                    pod: pod.key(),
                    claim: x.status.resource_claim_name.clone(),
                    requests: x.spec.requests.iter().map(|r| format!("{}={}×{}", r.name, r.class, r.count)).collect(),
                    mappings: x
                        .status
                        .request_mappings
                        .iter()
                        .map(|m| format!("{}/{}→{}", m.container_name, m.resource_name, m.request_name))
                        .collect(),
                });
            }
            let (devices, life) = extended::split(&pod, claim);
            by_file.insert(file.clone(), life);
            out.push((devices, file));
        }
        (out, by_file)
    }

    /// Admit one pod; the error says why (its text is the kubelet's).
    pub async fn admit(self: &Arc<Self>, pod: Pod, file: PathBuf) -> Result<(), AdmissionError> {
        let r = self.admit_batch(vec![(pod, file)]).await.pop().map(|(_, r)| r);
        r.unwrap_or(Ok(()))
    }

    /// Every pod's lifecycle.
    pub fn lifecycle(&self) -> Vec<PodLifecycle> {
        self.lock()
            .iter()
            .map(|(uid, l)| PodLifecycle {
                pod: l.pod.key(),
                uid: uid.clone(),
                step: l.step,
                phase: l.step.phase(),
                reason: l.reason,
                message: l.message.clone(),
            })
            .collect()
    }

    /// Every pod as the pods API shows it, by UID.
    pub fn pod_views(&self) -> Vec<PodView> {
        self.lock()
            .values()
            .map(|l| PodView {
                pod: l.pod.clone(),
                step: l.step,
                why: l.reason.zip(l.message.clone()),
                started: l.started,
                evicted: l.evicted,
            })
            .collect()
    }

    /// Mark `uid` evicted by a NoExecute device taint (before it is removed).
    pub fn mark_evicted(&self, uid: &str) {
        if let Some(l) = self.lock().get_mut(uid) {
            l.evicted = true;
        }
        self.changed();
    }

    /// Say that pods changed (the pods API's watchers look again).
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Follow pod changes.
    pub fn watch_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The claims the local API server serves.
    pub fn claim_objects(&self, node: &str) -> Vec<serde_json::Value> {
        self.dra.as_ref().map(|d| d.claim_objects(node)).unwrap_or_default()
    }

    /// End this generation (see [`Manager::close`]).
    pub async fn close(&self) {
        self.events.close();
        self.devices.close().await;
        if let Some(d) = &self.dra {
            d.settled().await;
        }
    }
}
