//! The record tap: a DevicePlugin service that the kubelet talks to in place
//! of the real plugin. Every call is forwarded to the plugin unchanged
//! (errors included) and written to the trace with its time and latency;
//! every ListAndWatch stream's end is written too, whichever side ended it.
//! After a successful Allocate the tap asks the kubelet (PodResources, then
//! its checkpoint) which pod and container got the devices.

use crate::api::deviceplugin::{
    device_plugin_client::DevicePluginClient, device_plugin_server::DevicePlugin, AllocateRequest, AllocateResponse,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::client::conn::PluginConn;
use crate::core::log::{ms, Logger};
use crate::core::status::grpc_go_status;
use crate::core::task::Tasks;
use crate::trace::{EndedBy, Event, RpcError, Writer};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// What the tap tells its owner (`dpctl record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// The kubelet opened a ListAndWatch stream.
    StreamOpened(u64),
    /// The kubelet closed a ListAndWatch stream (restart, or another
    /// registration for the resource replaced the tap).
    ClosedByKubelet(u64),
}

/// Where the tap asks which pod an Allocate was for.
#[derive(Debug, Clone)]
pub struct Owners {
    /// The kubelet's PodResources socket.
    pub pod_resources: PathBuf,
    /// The kubelet's device-manager checkpoint.
    pub checkpoint: PathBuf,
    /// The recorded resource.
    pub resource: String,
    /// How long to keep looking after an Allocate.
    pub within: Duration,
}

/// The tap.
#[derive(Clone)]
pub struct Tap {
    upstream: Arc<Mutex<PluginConn>>,
    trace: Arc<Writer>,
    log: Logger,
    streams: Arc<AtomicU64>,
    notes: mpsc::UnboundedSender<Note>,
    owners: Option<Arc<Owners>>,
    /// Its streams and lookups.
    tasks: Tasks,
}

impl Tap {
    /// A tap forwarding to `upstream` and recording into `trace`; its streams
    /// are tasks of `tasks` (they end when it is cancelled), and it tells
    /// `notes` about streams.
    pub fn new(
        upstream: PluginConn,
        trace: Arc<Writer>,
        log: Logger,
        tasks: Tasks,
        notes: mpsc::UnboundedSender<Note>,
        owners: Option<Owners>,
    ) -> Self {
        Tap {
            upstream: Arc::new(Mutex::new(upstream)),
            trace,
            log,
            streams: Arc::new(AtomicU64::new(0)),
            notes,
            owners: owners.map(Arc::new),
            tasks,
        }
    }

    /// Forward to a new connection from now on (the plugin's socket was re-created).
    pub fn set_upstream(&self, conn: PluginConn) {
        if let Ok(mut u) = self.upstream.lock() {
            *u = conn;
        }
    }

    fn client(&self) -> Option<DevicePluginClient<Channel>> {
        self.upstream.lock().ok().map(|u| u.client())
    }

    /// Stop every stream and lookup task and wait for them (at most `within`;
    /// each ends promptly once cancelled, recording who ended its stream).
    pub async fn shutdown(&self, within: Duration) {
        self.tasks.cancel();
        let _ = tokio::time::timeout(within, self.tasks.join()).await;
    }

    fn spawn(&self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn_joined(f);
    }

    fn record(&self, ev: Event, method: &str, latency: Duration, err: Option<&Status>) -> Option<u64> {
        let n = match self.trace.write(&ev) {
            Ok(n) => Some(n),
            Err(e) => {
                self.log.event("trace-error", &[("error", json!(e.to_string()))]);
                None
            }
        };
        let mut f = vec![("method", json!(method)), ("latencyMs", ms(latency))];
        if let Some(s) = err {
            f.push(("code", json!(format!("{:?}", s.code()))));
        }
        self.log.event("recorded", &f);
        n
    }

    /// Forward one unary call unchanged and record it: `event` builds the
    /// trace line from (t, latency ms, request, response, error). Returns
    /// the event's number with the answer.
    async fn forward<Req, Resp, Fut>(
        &self,
        method: &str,
        req: Req,
        call: impl FnOnce(DevicePluginClient<Channel>, Req) -> Fut,
        event: impl FnOnce(f64, f64, Req, Option<Resp>, Option<RpcError>) -> Event,
    ) -> (Option<u64>, Result<Response<Resp>, Status>)
    where
        Req: Clone,
        Resp: Clone,
        Fut: std::future::Future<Output = Result<Response<Resp>, Status>>,
    {
        let (t, start) = (self.trace.t(), Instant::now());
        let r = match self.client() {
            Some(c) => call(c, req.clone()).await.map_err(grpc_go_status),
            None => Err(Status::internal("dpctl record: the tap's plugin connection is unusable")),
        };
        let took = start.elapsed();
        let (response, error, out) = match r {
            Ok(resp) => {
                let v = resp.into_inner();
                (Some(v.clone()), None, Ok(v))
            }
            Err(s) => (None, Some(RpcError::from_status(&s)), Err(s)),
        };
        let err = out.as_ref().err().cloned();
        let n =
            self.record(event(t, crate::core::time::millis(took), req, response, error), method, took, err.as_ref());
        (n, out.map(Response::new))
    }

    /// Look up (in the background) which pod/container each container
    /// request of Allocate event `n` was for, and record it.
    fn find_owners(&self, n: u64, req: &AllocateRequest) {
        let Some(o) = self.owners.clone() else { return };
        for (i, c) in req.container_requests.iter().enumerate() {
            let (me, o, ids) = (self.clone(), o.clone(), c.devices_ids.clone());
            let stop = self.tasks.token().clone();
            self.spawn(async move {
                let found = tokio::select! {
                    f = crate::client::view::owner(&o.pod_resources, &o.checkpoint, &o.resource, &ids, o.within) => f,
                    _ = stop.cancelled() => return,
                };
                match found {
                    Some((namespace, pod, uid, container)) => {
                        let ev = Event::AllocateFor {
                            t: me.trace.t(),
                            event: n,
                            container_request: i,
                            namespace,
                            pod,
                            uid,
                            container,
                        };
                        if let Err(e) = me.trace.write(&ev) {
                            me.log.event("trace-error", &[("error", json!(e.to_string()))]);
                        }
                    }
                    None => me.log.event(
                        "owner-unknown",
                        &[
                            ("event", json!(n)),
                            ("devices", json!(ids)),
                            ("note", json!("neither PodResources nor the checkpoint shows who holds these devices")),
                        ],
                    ),
                }
            });
        }
    }

    fn ended(&self, stream: u64, by: EndedBy, error: Option<RpcError>) {
        let status = error.as_ref().map(RpcError::to_status);
        self.record(
            Event::ListAndWatchEnd { t: self.trace.t(), stream, error, by: Some(by) },
            "ListAndWatch",
            Duration::ZERO,
            status.as_ref(),
        );
    }
}

#[tonic::async_trait]
impl DevicePlugin for Tap {
    async fn get_device_plugin_options(&self, _: Request<Empty>) -> Result<Response<DevicePluginOptions>, Status> {
        self.forward(
            "GetDevicePluginOptions",
            Empty {},
            |mut c, r| async move { c.get_device_plugin_options(r).await },
            |t, latency_ms, _, response, error| Event::Options { t, latency_ms, response, error },
        )
        .await
        .1
    }

    type ListAndWatchStream = tokio_stream::wrappers::ReceiverStream<Result<ListAndWatchResponse, Status>>;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let stream_id = self.streams.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.notes.send(Note::StreamOpened(stream_id));
        let opened = match self.client() {
            Some(mut c) => c.list_and_watch(Empty {}).await.map_err(grpc_go_status),
            None => Err(Status::internal("dpctl record: the tap's plugin connection is unusable")),
        };
        let mut upstream = match opened {
            Ok(s) => s.into_inner(),
            Err(s) => {
                self.ended(stream_id, EndedBy::Plugin, Some(RpcError::from_status(&s)));
                return Err(s);
            }
        };
        let (tx, rx) = mpsc::channel(4);
        let me = self.clone();
        let stop = self.tasks.token().clone();
        self.spawn(async move {
            let mut seq = 0;
            let kubelet_closed = |me: &Tap| {
                me.ended(
                    stream_id,
                    EndedBy::Kubelet,
                    Some(RpcError { code: "Canceled".into(), message: "the kubelet closed the stream".into() }),
                );
                let _ = me.notes.send(Note::ClosedByKubelet(stream_id));
            };
            loop {
                let next = tokio::select! {
                    m = upstream.message() => m.map_err(grpc_go_status),
                    _ = stop.cancelled() => {
                        me.ended(stream_id, EndedBy::Dpctl, Some(RpcError { code: "Canceled".into(), message: "dpctl record stopped".into() }));
                        return;
                    }
                    _ = tx.closed() => {
                        kubelet_closed(&me);
                        return;
                    }
                };
                match next {
                    Ok(Some(resp)) => {
                        seq += 1;
                        let t = me.trace.t();
                        // forward first: the tap must not delay the kubelet
                        let sent = tx.send(Ok(resp.clone())).await;
                        me.record(
                            Event::ListAndWatch { t, stream: stream_id, seq, response: resp },
                            "ListAndWatch",
                            Duration::ZERO,
                            None,
                        );
                        if sent.is_err() {
                            kubelet_closed(&me);
                            return;
                        }
                    }
                    Ok(None) => {
                        me.ended(stream_id, EndedBy::Plugin, None);
                        return;
                    }
                    Err(s) => {
                        me.ended(stream_id, EndedBy::Plugin, Some(RpcError::from_status(&s)));
                        let _ = tx.send(Err(s)).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        self.forward(
            "GetPreferredAllocation",
            req.into_inner(),
            |mut c, r| async move { c.get_preferred_allocation(r).await },
            |t, latency_ms, request, response, error| Event::Preferred { t, latency_ms, request, response, error },
        )
        .await
        .1
    }

    async fn allocate(&self, req: Request<AllocateRequest>) -> Result<Response<AllocateResponse>, Status> {
        let req = req.into_inner();
        let (n, r) = self
            .forward(
                "Allocate",
                req.clone(),
                |mut c, r| async move { c.allocate(r).await },
                |t, latency_ms, request, response, error| Event::Allocate { t, latency_ms, request, response, error },
            )
            .await;
        if let (Some(n), Ok(_)) = (n, &r) {
            self.find_owners(n, &req);
        }
        r
    }

    async fn pre_start_container(
        &self,
        req: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        self.forward(
            "PreStartContainer",
            req.into_inner(),
            |mut c, r| async move { c.pre_start_container(r).await },
            |t, latency_ms, request, response, error| Event::PreStart { t, latency_ms, request, response, error },
        )
        .await
        .1
    }
}
