//! The record tap: a DevicePlugin service that the kubelet talks to in place
//! of the real plugin. Every call is forwarded to the plugin unchanged
//! (errors included) and written to the trace with its time and latency.

use crate::api::deviceplugin::{
    device_plugin_client::DevicePluginClient, device_plugin_server::DevicePlugin, AllocateRequest, AllocateResponse,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::core::log::{ms, Logger};
use crate::core::status::grpc_go_status;
use crate::kubelet::conn::PluginConn;
use crate::plugin::server::stopped;
use crate::trace::{Event, RpcError, Writer};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, watch};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// The tap.
#[derive(Clone)]
pub struct Tap {
    upstream: PluginConn,
    trace: Arc<Writer>,
    log: Logger,
    streams: Arc<AtomicU64>,
    stop: watch::Receiver<bool>,
}

impl Tap {
    /// A tap forwarding to `upstream` and recording into `trace`.
    pub fn new(upstream: PluginConn, trace: Arc<Writer>, log: Logger, stop: watch::Receiver<bool>) -> Self {
        Tap { upstream, trace, log, streams: Arc::new(AtomicU64::new(0)), stop }
    }

    fn record(&self, ev: Event, method: &str, latency: std::time::Duration, err: Option<&Status>) {
        if let Err(e) = self.trace.write(&ev) {
            self.log.event("trace-error", &[("error", json!(e.to_string()))]);
        }
        let mut f = vec![("method", json!(method)), ("latencyMs", ms(latency))];
        if let Some(s) = err {
            f.push(("code", json!(format!("{:?}", s.code()))));
        }
        self.log.event("recorded", &f);
    }
}

impl Tap {
    /// Forward one unary call unchanged and record it: `event` builds the
    /// trace line from (t, latency ms, request, response, error).
    async fn forward<Req, Resp, Fut>(
        &self,
        method: &str,
        req: Req,
        call: impl FnOnce(DevicePluginClient<Channel>, Req) -> Fut,
        event: impl FnOnce(f64, f64, Req, Option<Resp>, Option<RpcError>) -> Event,
    ) -> Result<Response<Resp>, Status>
    where
        Req: Clone,
        Resp: Clone,
        Fut: std::future::Future<Output = Result<Response<Resp>, Status>>,
    {
        let (t, start) = (self.trace.t(), Instant::now());
        let r = call(self.upstream.client(), req.clone()).await.map_err(grpc_go_status);
        let took = start.elapsed();
        let (response, error, out) = match r {
            Ok(resp) => {
                let v = resp.into_inner();
                (Some(v.clone()), None, Ok(v))
            }
            Err(s) => (None, Some(RpcError::from_status(&s)), Err(s)),
        };
        let err = out.as_ref().err().cloned();
        self.record(event(t, crate::core::time::millis(took), req, response, error), method, took, err.as_ref());
        out.map(Response::new)
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
    }

    type ListAndWatchStream = tokio_stream::wrappers::ReceiverStream<Result<ListAndWatchResponse, Status>>;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let stream_id = self.streams.fetch_add(1, Ordering::Relaxed) + 1;
        let mut upstream = match self.upstream.client().list_and_watch(Empty {}).await.map_err(grpc_go_status) {
            Ok(s) => s.into_inner(),
            Err(s) => {
                let ev = Event::ListAndWatchEnd {
                    t: self.trace.t(),
                    stream: stream_id,
                    error: Some(RpcError::from_status(&s)),
                };
                self.record(ev, "ListAndWatch", std::time::Duration::ZERO, Some(&s));
                return Err(s);
            }
        };
        let (tx, rx) = mpsc::channel(4);
        let me = self.clone();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            let mut seq = 0;
            loop {
                let next = tokio::select! {
                    m = upstream.message() => m.map_err(grpc_go_status),
                    _ = stopped(&mut stop) => return,
                    _ = tx.closed() => return,
                };
                match next {
                    Ok(Some(resp)) => {
                        seq += 1;
                        let t = me.trace.t();
                        // forward first: the tap must not delay the kubelet
                        if tx.send(Ok(resp.clone())).await.is_err() {
                            return;
                        }
                        me.record(
                            Event::ListAndWatch { t, stream: stream_id, seq, response: resp },
                            "ListAndWatch",
                            std::time::Duration::ZERO,
                            None,
                        );
                    }
                    Ok(None) => {
                        me.record(
                            Event::ListAndWatchEnd { t: me.trace.t(), stream: stream_id, error: None },
                            "ListAndWatch",
                            std::time::Duration::ZERO,
                            None,
                        );
                        return;
                    }
                    Err(s) => {
                        me.record(
                            Event::ListAndWatchEnd {
                                t: me.trace.t(),
                                stream: stream_id,
                                error: Some(RpcError::from_status(&s)),
                            },
                            "ListAndWatch",
                            std::time::Duration::ZERO,
                            Some(&s),
                        );
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
    }

    async fn allocate(&self, req: Request<AllocateRequest>) -> Result<Response<AllocateResponse>, Status> {
        self.forward(
            "Allocate",
            req.into_inner(),
            |mut c, r| async move { c.allocate(r).await },
            |t, latency_ms, request, response, error| Event::Allocate { t, latency_ms, request, response, error },
        )
        .await
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
    }
}
