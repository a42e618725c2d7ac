//! The kubelet's pods API (pods/v1alpha1, KEP-4188: apis/pods/server.go):
//! ListPods, GetPod and WatchPods over the mock kubelet's own pods, each a
//! core/v1 Pod in Kubernetes protobuf (`v1.Pod#Marshal`), served on
//! `<root>/pods-api/pods-api.sock` when the profile's PodsAPI gate is on.
//!
//! A pod is what the mock kubelet knows of it: metadata, its containers
//! (extended resources, claims, sidecars), spec.resourceClaims, and a status
//! from its lifecycle step (phase, the Ready conditions, container states),
//! each container's allocatedResourcesStatus from the DRA health cache, and
//! the DisruptionTarget condition of a NoExecute device-taint eviction.
//! WatchPods sends every pod ADDED, then INITIAL_SYNC_COMPLETE, then an
//! event per change it sees (a pod's bytes differ: MODIFIED; gone: DELETED
//! with name, namespace and UID only, as OnPodRemoved sends it).

use crate::api::pods_v1alpha1::pods_server::Pods;
use crate::api::pods_v1alpha1::{
    EventType, GetPodRequest, GetPodResponse, ListPodsRequest, ListPodsResponse, WatchPodsEvent, WatchPodsRequest,
};
use crate::controlplane::protobuf;
use crate::kubelet::cm::{ContainerManager, PodView};
use crate::kubelet::event::KubeletEvent;
use crate::kubelet::lifecycle::{Phase, Step};
use crate::kubelet::manifest::{ClaimSource, Container};
use crate::kubelet::podresources::RateLimit;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The directory under the kubelet's root (kubeletconfig DefaultKubeletPodsAPIDirName).
pub const DIR: &str = "pods-api";
/// The socket in it (apis/pods/constants.go Socket, with util.LocalEndpoint's `.sock`).
pub const SOCKET: &str = "pods-api.sock";
/// The protobuf message of a pod.
const POD: &str = ".k8s.io.api.core.v1.Pod";
/// A watcher's queue (server.go: a client channel of 100 events).
const WATCH_QUEUE: usize = 100;

/// The pods API of one generation.
pub struct PodsService {
    cm: Arc<ContainerManager>,
    node: String,
    limit: RateLimit,
}

impl PodsService {
    /// The API over `cm`'s pods, on node `node`.
    pub fn new(cm: Arc<ContainerManager>, node: &str) -> Self {
        PodsService { cm, node: node.to_string(), limit: RateLimit::default() }
    }
}

/// Every pod as the API shows it, by UID, as JSON.
fn pods_now(cm: &ContainerManager, node: &str) -> BTreeMap<String, Value> {
    let health: BTreeMap<String, BTreeMap<String, Vec<Value>>> = cm
        .dra
        .as_ref()
        .map(|d| d.pods().into_iter().map(|p| (p.uid.clone(), p.allocated_resources_status)).collect())
        .unwrap_or_default();
    cm.pod_views().iter().map(|v| (v.pod.uid.clone(), pod_object(v, health.get(&v.pod.uid), node))).collect()
}

fn container(c: &Container) -> Value {
    let quantities: Map<String, Value> = c.resources.iter().map(|(r, n)| (r.clone(), json!(n.to_string()))).collect();
    let mut resources = json!({});
    if !quantities.is_empty() {
        resources["limits"] = Value::Object(quantities.clone());
        resources["requests"] = Value::Object(quantities);
    }
    if !c.claims.is_empty() {
        resources["claims"] = c
            .claims
            .iter()
            .zip(c.claim_requests.iter().chain(std::iter::repeat(&String::new())))
            .map(|(n, r)| if r.is_empty() { json!({"name": n}) } else { json!({"name": n, "request": r}) })
            .collect();
    }
    let mut v = json!({"name": c.name, "resources": resources});
    if c.restart_always {
        v["restartPolicy"] = json!("Always");
    }
    v
}

/// A pod of the mock kubelet as a core/v1 Pod (JSON).
pub fn pod_object(v: &PodView, health: Option<&BTreeMap<String, Vec<Value>>>, node: &str) -> Value {
    let p = &v.pod;
    let claims: Vec<Value> = p
        .resource_claims
        .iter()
        .filter_map(|c| match &c.source {
            ClaimSource::Claim(n) => Some(json!({"name": c.name, "resourceClaimName": n})),
            ClaimSource::Template(t) | ClaimSource::Generated { template: t, .. } => {
                Some(json!({"name": c.name, "resourceClaimTemplateName": t}))
            }
            ClaimSource::Extended(_) => None,
        })
        .collect();
    let mut spec = json!({
        "nodeName": node,
        "restartPolicy": "Always",
        "containers": p.containers.iter().map(container).collect::<Vec<_>>(),
    });
    if !p.init_containers.is_empty() {
        spec["initContainers"] = p.init_containers.iter().map(container).collect();
    }
    if !claims.is_empty() {
        spec["resourceClaims"] = json!(claims);
    }
    // Running: the containers run; a pod being torn down keeps the phase it
    // had (the kubelet reports Running until its containers stopped).
    let running = v.step == Step::Running || (v.started && v.step.phase() == Phase::Terminating);
    let ready = if v.step == Step::Running { "True" } else { "False" };
    let mut conditions = vec![json!({"type": "PodScheduled", "status": "True"})];
    for t in ["Initialized", "Ready", "ContainersReady"] {
        let mut c = json!({"type": t, "status": if t == "Initialized" && running { "True" } else { ready }});
        if c["status"] == "False" && t != "Initialized" {
            c["reason"] = json!("ContainersNotReady");
        }
        conditions.push(c);
    }
    if v.evicted {
        use crate::controlplane::controller::taints::{CONDITION, MESSAGE, REASON};
        conditions.push(json!({"type": CONDITION, "status": "True", "reason": REASON, "message": MESSAGE}));
    }
    let state = |_: &Container| {
        if v.step == Step::Running {
            json!({"running": {}})
        } else {
            json!({"waiting": {"reason": "ContainerCreating"}})
        }
    };
    let status_of = |c: &Container| {
        let mut s = json!({"name": c.name, "state": state(c), "ready": v.step == Step::Running,
            "restartCount": 0, "started": v.step == Step::Running});
        if let Some(h) = health.and_then(|h| h.get(&c.name)) {
            s["allocatedResourcesStatus"] = json!(h);
        }
        s
    };
    let mut status = json!({
        "phase": if running { "Running" } else { "Pending" },
        "conditions": conditions,
        "containerStatuses": p.containers.iter().map(status_of).collect::<Vec<_>>(),
    });
    if !p.init_containers.is_empty() {
        status["initContainerStatuses"] = p.init_containers.iter().map(status_of).collect();
    }
    if let Some((_, message)) = &v.why {
        status["message"] = json!(message);
    }
    json!({"metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid}, "spec": spec, "status": status})
}

fn encode(pod: &Value) -> Vec<u8> {
    protobuf::encode(POD, pod)
}

/// The minimal pod of a DELETED event (server.go OnPodRemoved).
fn deleted(pod: &Value) -> Vec<u8> {
    let m = &pod["metadata"];
    encode(&json!({"metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"]}}))
}

type WatchStream = tokio_stream::wrappers::ReceiverStream<Result<WatchPodsEvent, Status>>;

#[tonic::async_trait]
impl Pods for PodsService {
    type WatchPodsStream = WatchStream;

    async fn list_pods(&self, _: Request<ListPodsRequest>) -> Result<Response<ListPodsResponse>, Status> {
        self.limit.admit()?;
        let pods = pods_now(&self.cm, &self.node).values().map(encode).collect();
        Ok(Response::new(ListPodsResponse { pods }))
    }

    async fn get_pod(&self, r: Request<GetPodRequest>) -> Result<Response<GetPodResponse>, Status> {
        self.limit.admit()?;
        let uid = r.into_inner().pod_uid;
        match pods_now(&self.cm, &self.node).get(&uid) {
            Some(p) => Ok(Response::new(GetPodResponse { pod: encode(p) })),
            None => Err(Status::not_found(format!("pod with UID {uid} not found"))),
        }
    }

    async fn watch_pods(&self, _: Request<WatchPodsRequest>) -> Result<Response<Self::WatchPodsStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(WATCH_QUEUE);
        let cm = self.cm.clone();
        let node = self.node.clone();
        let mut changes = cm.watch_changes();
        let mut bus = cm.devices.bus.subscribe();
        let mut last = pods_now(&cm, &node);
        for p in last.values() {
            let e = WatchPodsEvent { r#type: EventType::Added as i32, pod: encode(p) };
            if tx.send(Ok(e)).await.is_err() {
                return Err(Status::cancelled("watcher gone"));
            }
        }
        let sync = WatchPodsEvent { r#type: EventType::InitialSyncComplete as i32, pod: vec![] };
        let _ = tx.send(Ok(sync)).await;
        let gen = cm.devices.gen.clone();
        gen.tasks.spawn(async move {
            loop {
                tokio::select! {
                    r = changes.changed() => if r.is_err() { return },
                    e = bus.recv() => match e {
                        // Health changes reach allocatedResourcesStatus.
                        Some(e) if matches!(e.event, KubeletEvent::DraHealth { .. }) => {}
                        Some(_) => continue,
                        None => return,
                    },
                    _ = tx.closed() => return,
                }
                let now = pods_now(&cm, &node);
                let mut events = Vec::new();
                for (uid, p) in &last {
                    if !now.contains_key(uid) {
                        events.push(WatchPodsEvent { r#type: EventType::Deleted as i32, pod: deleted(p) });
                    }
                }
                for (uid, p) in &now {
                    let kind = match last.get(uid) {
                        None => EventType::Added,
                        Some(old) if old != p => EventType::Modified,
                        Some(_) => continue,
                    };
                    events.push(WatchPodsEvent { r#type: kind as i32, pod: encode(p) });
                }
                last = now;
                for e in events {
                    // A watcher that falls WATCH_QUEUE events behind is
                    // dropped (server.go: "Watch client channel is full";
                    // the kubelet then ends its stream ResourceExhausted,
                    // here it just ends).
                    if tx.try_send(Ok(e)).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }
}
