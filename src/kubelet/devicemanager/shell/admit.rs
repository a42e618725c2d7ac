//! The shell's side of pod admission: carry out the core's plan
//! ([`PodAdmission`]) — GetPreferredAllocation and Allocate calls — then
//! commit a batch to the checkpoint before acknowledging any of it, and call
//! PreStartContainer where the plugin asks for it.

use super::{Admission, Manager};
use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest, PreStartContainerRequest,
    PreferredAllocationRequest,
};
use crate::client::conn::PluginConn;
use crate::core::time::millis;
use crate::kubelet::devicemanager::core::state::{AllocKey, PodRecord};
use crate::kubelet::devicemanager::core::{AdmissionError, Answer, PodAdmission, Step};
use crate::kubelet::event::{capped, KubeletEvent};
use crate::kubelet::manifest::Pod;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// A pod whose allocations are staged, waiting for the checkpoint write.
struct Staged {
    pod: Pod,
    file: PathBuf,
    restored: bool,
    keys: Vec<AllocKey>,
    calls: usize,
    start: Instant,
}

impl Manager {
    /// Admit a pod the kubelet way; on failure nothing stays allocated and
    /// the error says why (its text is the kubelet's).
    pub async fn admit(self: &Arc<Self>, pod: Pod, file: PathBuf) -> Result<Admission, AdmissionError> {
        let admitted = self.admit_batch(vec![(pod, file)]).await.pop().map(|(_, r)| r);
        admitted.unwrap_or(Ok(Admission { restored: false }))
    }

    /// Admit pods in order, then commit them together: the checkpoint is
    /// written once, and only then is any of them acknowledged (logged,
    /// listed). A failed write rejects the whole batch and frees what it
    /// allocated. Starting containers is the pod lifecycle's next step.
    pub async fn admit_batch(
        self: &Arc<Self>,
        pods: Vec<(Pod, PathBuf)>,
    ) -> Vec<(PathBuf, Result<Admission, AdmissionError>)> {
        let _serial = self.admission.lock().await;
        let mut results = Vec::new();
        let mut staged: Vec<Staged> = Vec::new();
        for (pod, file) in pods {
            let start = Instant::now();
            let dup = {
                let g = self.lock();
                g.st.pods
                    .values()
                    .find(|p| p.pod.key() == pod.key() && p.pod.uid != pod.uid)
                    .map(|p| p.file.clone())
                    .or_else(|| staged.iter().find(|s| s.pod.key() == pod.key()).map(|s| s.file.clone()))
            };
            if let Some(other) = dup {
                results.push((file, Err(AdmissionError::Duplicate { pod: pod.key(), other })));
                continue;
            }
            self.lock().admitting.insert(pod.uid.clone(), pod.clone());
            let done = self.run_plan(&pod).await;
            let mut g = self.lock();
            g.admitting.remove(&pod.uid);
            match done {
                Err(e) => results.push((file, Err(e))),
                Ok(a) => {
                    let keys = g.st.stage(a.pending);
                    staged.push(Staged { pod, file, restored: a.restored, keys, calls: a.allocate_calls, start });
                }
            }
        }
        if staged.is_empty() {
            return results;
        }
        if let Err(e) = self.flush(false).await {
            let mut g = self.lock();
            for s in &staged {
                g.st.unstage(&s.keys);
            }
            drop(g);
            for s in staged {
                results.push((s.file, Err(AdmissionError::Checkpoint(e.to_string()))));
            }
            return results;
        }
        {
            let mut g = self.lock();
            if g.closed {
                // The generation ended before the commit: nothing is acknowledged.
                return results;
            }
            for s in &staged {
                g.st.pods.insert(s.pod.uid.clone(), PodRecord { pod: s.pod.clone(), file: s.file.clone() });
                g.st.rejected.remove(&s.file);
            }
        }
        for s in staged {
            let summary: Vec<String> = {
                let g = self.lock();
                g.st.allocations
                    .iter()
                    .filter(|((u, _, _), _)| u == &s.pod.uid)
                    .map(|((_, c, r), a)| format!("{c}:{r}={}", crate::core::text::id_list(&a.ids)))
                    .collect()
            };
            let (pod, uid, latency_ms) = (s.pod.key(), s.pod.uid.clone(), millis(s.start.elapsed()));
            let (allocations, allocate_calls) = (summary, s.calls);
            self.event(if s.restored {
                KubeletEvent::PodRestored { pod, uid, allocations, allocate_calls, latency_ms }
            } else {
                KubeletEvent::PodAdmitted { pod, uid, allocations, allocate_calls, latency_ms }
            });
            results.push((s.file, Ok(Admission { restored: s.restored })));
        }
        results
    }

    /// Carry out the core's plan for one pod.
    async fn run_plan(&self, pod: &Pod) -> Result<crate::kubelet::devicemanager::core::Admitted, AdmissionError> {
        let mut plan = PodAdmission::new(pod, &self.lock().st, self.cfg.profile);
        let mut answer = Answer::Begin;
        loop {
            let step = {
                let g = self.lock();
                plan.next(&g.st, self.cfg.topology, answer)
            };
            answer = match step {
                Step::Done(r) => return r,
                Step::Preferred { container, resource, request } => {
                    self.preferred(&resource, &container, request).await
                }
                Step::Allocate { container, resource, ids } => self.allocate(pod, &container, &resource, ids).await,
            };
        }
    }

    fn conn_of(&self, resource: &str) -> Option<PluginConn> {
        let g = self.lock();
        let id = g.st.resources.get(resource)?.endpoint.as_ref()?.id;
        g.conns.get(&id).cloned()
    }

    /// GetPreferredAllocation with the kubelet's arguments.
    async fn preferred(&self, res: &str, container: &str, req: ContainerPreferredAllocationRequest) -> Answer {
        let Some(conn) = self.conn_of(res) else { return Answer::Preferred(Vec::new()) };
        let t = Instant::now();
        let r = conn.preferred(PreferredAllocationRequest { container_requests: vec![req.clone()] }).await;
        let event = |preferred, ignored_foreign, topped_up, error| KubeletEvent::Preferred {
            resource: res.to_string(),
            container: container.to_string(),
            available: capped(&req.available_device_i_ds),
            must_include: capped(&req.must_include_device_i_ds),
            size: req.allocation_size,
            latency_ms: millis(t.elapsed()),
            preferred,
            ignored_foreign,
            topped_up,
            error,
        };
        match r {
            Err(e) => {
                self.event(event(None, None, None, Some(e.to_string())));
                Answer::PreferredFailed(e.to_string())
            }
            Ok(resp) => {
                let ids = resp.container_responses.into_iter().next().map(|c| c.device_i_ds).unwrap_or_default();
                let foreign: Vec<String> =
                    ids.iter().filter(|i| !req.available_device_i_ds.contains(*i)).cloned().collect();
                let size = usize::try_from(req.allocation_size).unwrap_or(0);
                let topped = (ids.len() < size).then(|| size - ids.len());
                self.event(event(Some(ids.clone()), (!foreign.is_empty()).then_some(foreign), topped, None));
                Answer::Preferred(ids)
            }
        }
    }

    /// Allocate one container's devices of one resource.
    async fn allocate(&self, pod: &Pod, container: &str, res: &str, ids: Vec<String>) -> Answer {
        let Some(conn) = self.conn_of(res) else {
            return Answer::AllocateFailed(format!("unknown Device Plugin {res}"));
        };
        let t = Instant::now();
        let req = AllocateRequest { container_requests: vec![ContainerAllocateRequest { devices_ids: ids.clone() }] };
        let r = conn.allocate(req).await;
        let took = t.elapsed();
        self.lock().hist.entry(res.to_string()).or_default().observe(took.as_secs_f64());
        let mut error = None;
        let answer = match r {
            Err(e) => Answer::AllocateFailed(e.to_string()),
            Ok(resp) if resp.container_responses.is_empty() => {
                error = crate::protocol::deviceplugin::allocate(1, &resp).first().map(ToString::to_string);
                Answer::Allocated(resp)
            }
            Ok(resp) => Answer::Allocated(resp),
        };
        if let Answer::AllocateFailed(e) = &answer {
            error = Some(e.clone());
        }
        self.event(KubeletEvent::Allocate {
            pod: pod.key(),
            container: container.to_string(),
            resource: res.to_string(),
            devices: ids,
            latency_ms: millis(took),
            error,
        });
        answer
    }

    /// PreStartContainer before each container start (init containers, then
    /// containers), when the plugin asks for it.
    pub async fn start_containers(&self, pod: &Pod) {
        for c in pod.init_containers.iter().chain(&pod.containers) {
            for res in c.resources.keys() {
                let (conn, ids) = {
                    let g = self.lock();
                    let r = g.st.resources.get(res);
                    let ep = r.and_then(|r| r.endpoint.as_ref()).filter(|e| e.pre_start_required);
                    let conn = ep.and_then(|e| g.conns.get(&e.id).cloned());
                    let key = (pod.uid.clone(), c.name.clone(), res.clone());
                    (conn, g.st.allocations.get(&key).map(|a| a.ids.clone()))
                };
                let (Some(conn), Some(ids)) = (conn, ids) else { continue };
                let t = Instant::now();
                let r = conn
                    .pre_start(PreStartContainerRequest { devices_ids: ids.clone() }, self.cfg.pre_start_timeout)
                    .await;
                let (pod, container, resource, devices) = (pod.key(), c.name.clone(), res.clone(), ids);
                let took = t.elapsed();
                let latency_ms = millis(took);
                let error = r.err().map(|e| e.go_text());
                self.event(match crate::protocol::deviceplugin::pre_start(error.as_deref(), took) {
                    None => KubeletEvent::PreStart { pod, container, resource, devices, latency_ms },
                    Some(v) => KubeletEvent::ContainerStartFailed {
                        pod,
                        container,
                        resource,
                        devices,
                        latency_ms,
                        error: v.to_string(),
                    },
                });
            }
        }
    }
}
