//! The DevicePlugin gRPC service, written once over a [`Backend`] (where the
//! devices and answers come from: a simulation, a recorded trace, …). It
//! logs every RPC with its device IDs and latency, and fans ListAndWatch out
//! to any number of streams, each of which sees every change.

use crate::api::deviceplugin::{
    device_plugin_server::DevicePlugin, AllocateRequest, AllocateResponse, DevicePluginOptions, Empty,
    ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse,
};
use crate::core::log::{ms, Logger};
use crate::core::task::Tasks;
use crate::plugin::devices::Snapshot;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status};

/// Where a plugin's devices and answers come from.
#[tonic::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The extended resource name.
    fn resource(&self) -> &str;
    /// What GetDevicePluginOptions returns.
    fn options(&self) -> DevicePluginOptions;
    /// The device snapshots: the current one, then every change.
    fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>>;
    /// End each ListAndWatch stream after this many messages (a fault).
    fn close_stream_after(&self) -> Option<u64> {
        None
    }
    /// Once a client cancels a ListAndWatch stream, later streams never send (a fault).
    fn hang_after_cancel(&self) -> bool {
        false
    }
    /// Every stream starts with an empty list, the devices 1 ms later (a fault).
    fn empty_first_snapshot(&self) -> bool {
        false
    }
    /// Every stream's first list comes only after this delay (a fault).
    fn first_snapshot_delay(&self) -> Option<std::time::Duration> {
        None
    }
    /// A change is sent on the oldest open stream only (a fault).
    fn health_one_stream(&self) -> bool {
        false
    }
    /// Faults in the plugin's lifecycle (registration, restart, exit).
    fn lifecycle_faults(&self) -> crate::plugin::config::LifecycleFaults {
        Default::default()
    }
    /// A fixed ListAndWatch timeline (replay): every stream gets every step, in order.
    fn timeline(&self) -> Option<Arc<Vec<Step>>> {
        None
    }
    /// GetPreferredAllocation.
    async fn preferred(&self, req: PreferredAllocationRequest) -> Result<PreferredAllocationResponse, Status>;
    /// Allocate.
    async fn allocate(&self, req: AllocateRequest) -> Result<AllocateResponse, Status>;
    /// PreStartContainer.
    async fn pre_start(&self, req: PreStartContainerRequest) -> Result<PreStartContainerResponse, Status>;
}

/// Why a stream ends because the plugin stops. With the fault
/// `unhealthy_on_exit` it first sends a last list with every device
/// Unhealthy (the server drains it before it closes the connection).
async fn unhealthy_last(
    fault: bool,
    snaps: &watch::Receiver<Arc<Snapshot>>,
    tx: &mpsc::Sender<Result<ListAndWatchResponse, Status>>,
) -> String {
    if !fault {
        return "the plugin is stopping".into();
    }
    let mut msg = snaps.borrow().response.clone();
    for d in &mut msg.devices {
        d.health = crate::api::UNHEALTHY.into();
    }
    let sent = tokio::time::timeout(std::time::Duration::from_secs(1), tx.send(Ok(msg))).await;
    match sent {
        Ok(Ok(())) => "the plugin is stopping (fault: unhealthy-on-exit, every device sent Unhealthy)".into(),
        _ => "the plugin is stopping (fault: unhealthy-on-exit, the last list not sent)".into(),
    }
}

/// One step of a fixed ListAndWatch timeline.
#[derive(Debug, Clone)]
pub enum Step {
    /// Wait, then send a snapshot.
    Send(std::time::Duration, ListAndWatchResponse),
    /// Wait, then end the stream (with an error status, or cleanly).
    End(std::time::Duration, Option<Status>),
}

/// Counts of a service's ListAndWatch streams (the registrar reads them to
/// notice that the kubelet closed its stream).
#[derive(Debug, Default)]
pub struct StreamStats {
    open: std::sync::atomic::AtomicUsize,
    client_closed: std::sync::atomic::AtomicU64,
}

/// One open stream; closes it in the counts when dropped.
struct OpenStream(Arc<StreamStats>);

/// A replayed stream: each recorded message after its delay, then the
/// recorded end (or stay open, as a plugin with nothing new to say).
async fn send_timeline(
    timeline: Arc<Vec<Step>>,
    tx: mpsc::Sender<Result<ListAndWatchResponse, Status>>,
    stop: tokio_util::sync::CancellationToken,
    log: Logger,
    resource: String,
    open: OpenStream,
) {
    let _open = open;
    let mut sent = 0u64;
    for step in timeline.iter() {
        let (delay, msg) = match step {
            Step::Send(d, m) => (*d, Ok(m.clone())),
            Step::End(d, None) => (*d, Err(None)),
            Step::End(d, Some(s)) => (*d, Err(Some(s.clone()))),
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return,
            _ = tx.closed() => return,
        }
        match msg {
            Ok(m) => {
                if tx.send(Ok(m)).await.is_err() {
                    return;
                }
                sent += 1;
                log.event(
                    "ListAndWatch",
                    &[("resource", json!(resource)), ("state", json!("sent")), ("update", json!(sent))],
                );
            }
            Err(end) => {
                log.event(
                    "ListAndWatch",
                    &[("resource", json!(resource)), ("state", json!("closed")), ("reason", json!("as recorded"))],
                );
                if let Some(s) = end {
                    let _ = tx.send(Err(s)).await;
                }
                return;
            }
        }
    }
    // The recording ends here; keep the stream open like a plugin with nothing new to say.
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tx.closed() => {}
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl StreamStats {
    fn opened(self: &Arc<Self>) -> OpenStream {
        self.open.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenStream(self.clone())
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Streams their client ended (cancelled, or its connection closed), so far.
    pub fn client_closed(&self) -> u64 {
        self.client_closed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The DevicePlugin service over a backend.
pub struct PluginService<B> {
    backend: Arc<B>,
    log: Logger,
    tasks: Tasks,
    /// Set once a client cancelled a stream (for the hang-after-cancel fault).
    cancelled: Arc<std::sync::atomic::AtomicBool>,
    /// Its streams.
    streams: Arc<StreamStats>,
    /// Open streams, oldest first (for the health-one-stream fault).
    order: Arc<std::sync::Mutex<OpenStreams>>,
}

/// Open ListAndWatch streams by number, oldest first.
#[derive(Debug, Default)]
struct OpenStreams {
    next: u64,
    open: Vec<u64>,
}

impl OpenStreams {
    fn add(&mut self) -> u64 {
        self.next += 1;
        self.open.push(self.next);
        self.next
    }
}

/// Forgets a stream when its task ends, however it ends.
struct OpenGuard(Arc<std::sync::Mutex<OpenStreams>>, u64);

impl OpenGuard {
    fn oldest(&self) -> bool {
        self.0.lock().map(|o| o.open.first() == Some(&self.1)).unwrap_or(true)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        if let Ok(mut o) = self.0.lock() {
            o.open.retain(|x| *x != self.1);
        }
    }
}

impl<B> Clone for PluginService<B> {
    fn clone(&self) -> Self {
        PluginService {
            backend: self.backend.clone(),
            log: self.log.clone(),
            tasks: self.tasks.clone(),
            cancelled: self.cancelled.clone(),
            streams: self.streams.clone(),
            order: self.order.clone(),
        }
    }
}

impl<B: Backend> PluginService<B> {
    /// A service whose streams are tasks of `tasks`: they end when it is cancelled.
    pub fn new(backend: Arc<B>, log: Logger, tasks: Tasks) -> Self {
        PluginService {
            backend,
            log,
            tasks,
            cancelled: Default::default(),
            streams: Default::default(),
            order: Default::default(),
        }
    }

    /// The counts of its ListAndWatch streams.
    pub fn streams(&self) -> Arc<StreamStats> {
        self.streams.clone()
    }

    fn done<T>(&self, rpc: &'static str, start: Instant, fields: Vec<(&'static str, Value)>, r: &Result<T, Status>) {
        let latency = ms(start.elapsed());
        let mut all = Vec::with_capacity(fields.len() + 4);
        all.push(("resource", json!(self.backend.resource())));
        all.extend(fields);
        all.push(("latencyMs", latency));
        let mut fields = all;
        if let Err(s) = r {
            fields.push(("code", json!(format!("{:?}", s.code()))));
            fields.push(("error", json!(s.message())));
        }
        self.log.event_owned(rpc, fields);
    }
}

/// Why a stream ended when its client cancelled it.
const CLIENT_GONE: &str = "the client went away";

/// Each container's IDs as one comma-joined string (at most 20, then `+N more`).
fn containers<'a>(ids: impl Iterator<Item = &'a [String]>) -> Value {
    Value::Array(ids.map(|v| json!(crate::core::text::id_list(v))).collect())
}

#[tonic::async_trait]
impl<B: Backend> DevicePlugin for PluginService<B> {
    async fn get_device_plugin_options(&self, _: Request<Empty>) -> Result<Response<DevicePluginOptions>, Status> {
        let start = Instant::now();
        let o = self.backend.options();
        let r = Ok(o);
        self.done(
            "GetDevicePluginOptions",
            start,
            vec![
                ("preStartRequired", json!(o.pre_start_required)),
                ("getPreferredAllocationAvailable", json!(o.get_preferred_allocation_available)),
            ],
            &r,
        );
        r.map(Response::new)
    }

    type ListAndWatchStream = tokio_stream::wrappers::ReceiverStream<Result<ListAndWatchResponse, Status>>;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = mpsc::channel(1);
        let mut snaps = self.backend.subscribe();
        let (tasks, stop) = (self.tasks.clone(), self.tasks.token().clone());
        let limit = self.backend.close_stream_after();
        let log = self.log.clone();
        let resource = self.backend.resource().to_string();
        log.event("ListAndWatch", &[("resource", json!(resource)), ("state", json!("opened"))]);
        let open = self.streams.opened();
        if let Some(timeline) = self.backend.timeline() {
            tasks.spawn_joined(send_timeline(timeline, tx, stop, log, resource, open));
            return Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)));
        }
        let hang = self.backend.hang_after_cancel();
        let cancelled = self.cancelled.clone();
        if hang && cancelled.load(std::sync::atomic::Ordering::Relaxed) {
            log.event("ListAndWatch", &[("resource", json!(resource)), ("state", json!("fault: hang-after-cancel"))]);
            tasks.spawn_joined(async move {
                let _open = open;
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tx.closed() => {}
                }
            });
            return Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)));
        }
        let stats = self.streams.clone();
        let empty_first = self.backend.empty_first_snapshot();
        let first_delay = self.backend.first_snapshot_delay();
        let one_stream = self.backend.health_one_stream();
        let last_words = self.backend.lifecycle_faults().unhealthy_on_exit;
        let me = match self.order.lock() {
            Ok(mut o) => o.add(),
            Err(_) => 0,
        };
        let order = OpenGuard(self.order.clone(), me);
        tasks.spawn_joined(async move {
            let _open = open;
            let _order = &order;
            let mut sent = 0u64;
            if let Some(d) = first_delay {
                log.event(
                    "ListAndWatch",
                    &[
                        ("resource", json!(resource)),
                        ("state", json!("fault: first-snapshot-delay")),
                        ("delayMs", ms(d)),
                    ],
                );
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = stop.cancelled() => return,
                    _ = tx.closed() => return,
                }
            }
            if empty_first {
                log.event(
                    "ListAndWatch",
                    &[("resource", json!(resource)), ("state", json!("fault: empty-first-snapshot"))],
                );
                if tx.send(Ok(ListAndWatchResponse::default())).await.is_err() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let end = |why: &str, sent: u64| {
                if why == CLIENT_GONE {
                    cancelled.store(true, std::sync::atomic::Ordering::Relaxed);
                    stats.client_closed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                log.event(
                    "ListAndWatch",
                    &[
                        ("resource", json!(resource)),
                        ("state", json!("closed")),
                        ("reason", json!(why)),
                        ("sent", json!(sent)),
                    ],
                )
            };
            loop {
                let snap = snaps.borrow_and_update().clone();
                let start = Instant::now();
                let msg = snap.response.clone();
                let healthy = msg.devices.iter().filter(|d| d.health == crate::api::HEALTHY).count();
                let total = msg.devices.len();
                tokio::select! {
                    r = tx.send(Ok(msg)) => if r.is_err() { return end(CLIENT_GONE, sent) },
                    _ = stop.cancelled() => return end(&unhealthy_last(last_words, &snaps, &tx).await, sent),
                }
                sent += 1;
                log.event(
                    "ListAndWatch",
                    &[
                        ("resource", json!(resource)),
                        ("state", json!("sent")),
                        ("update", json!(sent)),
                        ("devices", json!(total)),
                        ("healthy", json!(healthy)),
                        ("latencyMs", ms(start.elapsed())),
                    ],
                );
                if limit.is_some_and(|n| sent >= n) {
                    return end("fault: close-stream-after", sent);
                }
                loop {
                    tokio::select! {
                        r = snaps.changed() => if r.is_err() { return end("the device source ended", sent) },
                        _ = stop.cancelled() => return end(&unhealthy_last(last_words, &snaps, &tx).await, sent),
                        _ = tx.closed() => return end(CLIENT_GONE, sent),
                    }
                    // The fault: one shared update channel, read by the stream that has waited longest.
                    if !one_stream || order.oldest() {
                        break;
                    }
                    snaps.borrow_and_update();
                    log.event(
                        "ListAndWatch",
                        &[
                            ("resource", json!(resource)),
                            ("state", json!("fault: health-one-stream (update not sent)")),
                        ],
                    );
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let start = Instant::now();
        let req = req.into_inner();
        let fields = vec![
            ("available", containers(req.container_requests.iter().map(|c| c.available_device_i_ds.as_slice()))),
            ("mustInclude", containers(req.container_requests.iter().map(|c| c.must_include_device_i_ds.as_slice()))),
            ("size", Value::Array(req.container_requests.iter().map(|c| json!(c.allocation_size)).collect())),
        ];
        let r = self.backend.preferred(req).await;
        let mut fields = fields;
        if let Ok(resp) = &r {
            fields.push(("preferred", containers(resp.container_responses.iter().map(|c| c.device_i_ds.as_slice()))));
        }
        self.done("GetPreferredAllocation", start, fields, &r);
        r.map(Response::new)
    }

    async fn allocate(&self, req: Request<AllocateRequest>) -> Result<Response<AllocateResponse>, Status> {
        let start = Instant::now();
        let req = req.into_inner();
        let fields = vec![("containers", containers(req.container_requests.iter().map(|c| c.devices_ids.as_slice())))];
        let r = self.backend.allocate(req).await;
        self.done("Allocate", start, fields, &r);
        r.map(Response::new)
    }

    async fn pre_start_container(
        &self,
        req: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        let start = Instant::now();
        let req = req.into_inner();
        let fields = vec![("devices", json!(req.devices_ids.join(",")))];
        let r = self.backend.pre_start(req).await;
        self.done("PreStartContainer", start, fields, &r);
        r.map(Response::new)
    }
}
