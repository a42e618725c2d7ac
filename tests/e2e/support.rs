//! Test support: temp dirs, an in-test device plugin that can misbehave on
//! demand, in-test kubelet-side servers, and running the real `dpctl` binary.

#![allow(dead_code)]

use dpctl::api::deviceplugin::{
    device_plugin_server::{DevicePlugin, DevicePluginServer},
    AllocateRequest, AllocateResponse, ContainerAllocateResponse, ContainerPreferredAllocationResponse, Device,
    DevicePluginOptions, DeviceSpec, Empty, ListAndWatchResponse, NumaNode, PreStartContainerRequest,
    PreStartContainerResponse, PreferredAllocationRequest, PreferredAllocationResponse, TopologyInfo,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tonic::{Code, Request, Response, Status};

/// A device with an optional NUMA node.
pub fn dev(id: &str, health: &str, numa: Option<i64>) -> Device {
    Device {
        id: id.into(),
        health: health.into(),
        topology: numa.map(|n| TopologyInfo { nodes: vec![NumaNode { id: n }] }),
    }
}

/// How the in-test plugin behaves.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// What GetDevicePluginOptions returns.
    pub options: DevicePluginOptions,
    /// Every unary call fails with this status.
    pub fail: Option<(Code, String)>,
    /// Every call (and ListAndWatch's first message) hangs forever.
    pub hang: bool,
    /// ListAndWatch ends cleanly after this many messages.
    pub close_after: Option<usize>,
    /// GetPreferredAllocation answers these IDs instead of the first `size` available.
    pub preferred: Option<Vec<String>>,
    /// Allocate answers with no container responses at all.
    pub empty_allocate: bool,
    /// Allocate answers one empty ContainerAllocateResponse per container (nothing for the runtime).
    pub nothing_allocate: bool,
    /// PreStartContainer fails with this status.
    pub pre_start_fail: Option<(Code, String)>,
    /// The first ListAndWatch stream gets its snapshot and never an update
    /// (a plugin whose streams share one change flag, as generic-device-plugin's do).
    pub freeze_first_stream: bool,
}

/// The in-test device plugin.
#[derive(Clone)]
pub struct TestPlugin {
    devices: watch::Receiver<Vec<Device>>,
    b: Behaviour,
    /// Calls seen, e.g. `Allocate(a,b|c)`.
    pub calls: Arc<Mutex<Vec<String>>>,
    /// ListAndWatch snapshots handed to the transport so far (all streams).
    sent: Arc<watch::Sender<u64>>,
}

impl TestPlugin {
    async fn gate(&self, name: String) -> Result<(), Status> {
        self.calls.lock().unwrap().push(name);
        if self.b.hang {
            std::future::pending::<()>().await;
        }
        match &self.b.fail {
            Some((code, msg)) => Err(Status::new(*code, msg.clone())),
            None => Ok(()),
        }
    }
}

#[tonic::async_trait]
impl DevicePlugin for TestPlugin {
    async fn get_device_plugin_options(&self, _: Request<Empty>) -> Result<Response<DevicePluginOptions>, Status> {
        self.gate("GetDevicePluginOptions".into()).await?;
        Ok(Response::new(self.b.options))
    }

    type ListAndWatchStream = tokio_stream::wrappers::ReceiverStream<Result<ListAndWatchResponse, Status>>;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let nth = {
            let mut calls = self.calls.lock().unwrap();
            calls.push("ListAndWatch".into());
            calls.iter().filter(|c| *c == "ListAndWatch").count()
        };
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let mut devices = self.devices.clone();
        let b = self.b.clone();
        let counter = self.sent.clone();
        tokio::spawn(async move {
            if b.hang {
                std::future::pending::<()>().await;
            }
            let mut sent = 0;
            loop {
                let snapshot = devices.borrow_and_update().clone();
                if tx.send(Ok(ListAndWatchResponse { devices: snapshot })).await.is_err() {
                    return;
                }
                counter.send_modify(|n| *n += 1);
                sent += 1;
                if b.close_after.is_some_and(|n| sent >= n) {
                    return;
                }
                if b.freeze_first_stream && nth == 1 {
                    tx.closed().await;
                    return;
                }
                if devices.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        r: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let r = r.into_inner();
        let desc: Vec<String> = r
            .container_requests
            .iter()
            .map(|c| {
                format!(
                    "{}/{}/{}",
                    c.available_device_i_ds.join(","),
                    c.must_include_device_i_ds.join(","),
                    c.allocation_size
                )
            })
            .collect();
        self.gate(format!("GetPreferredAllocation({})", desc.join("|"))).await?;
        let container_responses = r
            .container_requests
            .iter()
            .map(|c| ContainerPreferredAllocationResponse {
                device_i_ds: self.b.preferred.clone().unwrap_or_else(|| {
                    let mut ids = c.must_include_device_i_ds.clone();
                    for a in &c.available_device_i_ds {
                        if ids.len() < c.allocation_size as usize && !ids.contains(a) {
                            ids.push(a.clone());
                        }
                    }
                    ids
                }),
            })
            .collect();
        Ok(Response::new(PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, r: Request<AllocateRequest>) -> Result<Response<AllocateResponse>, Status> {
        let r = r.into_inner();
        let desc: Vec<String> = r.container_requests.iter().map(|c| c.devices_ids.join(",")).collect();
        self.gate(format!("Allocate({})", desc.join("|"))).await?;
        if self.b.empty_allocate {
            return Ok(Response::new(AllocateResponse { container_responses: vec![] }));
        }
        if self.b.nothing_allocate {
            let container_responses =
                r.container_requests.iter().map(|_| ContainerAllocateResponse::default()).collect();
            return Ok(Response::new(AllocateResponse { container_responses }));
        }
        let container_responses = r
            .container_requests
            .iter()
            .map(|c| ContainerAllocateResponse {
                envs: [("TEST_DEVICES".to_string(), c.devices_ids.join(","))].into_iter().collect(),
                devices: c
                    .devices_ids
                    .iter()
                    .map(|d| DeviceSpec {
                        container_path: format!("/dev/{d}"),
                        host_path: format!("/dev/{d}"),
                        permissions: "rw".into(),
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        r: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        self.gate(format!("PreStartContainer({})", r.into_inner().devices_ids.join(","))).await?;
        if let Some((code, msg)) = &self.b.pre_start_fail {
            return Err(Status::new(*code, msg.clone()));
        }
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// A running in-test plugin.
pub struct PluginHandle {
    /// Its socket.
    pub path: PathBuf,
    /// Push a new device list to every ListAndWatch stream.
    pub devices: watch::Sender<Vec<Device>>,
    /// Calls seen.
    pub calls: Arc<Mutex<Vec<String>>>,
    sent: watch::Receiver<u64>,
    stop: Option<oneshot::Sender<()>>,
}

impl PluginHandle {
    /// Stop serving.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Wait until `n` ListAndWatch snapshots (over all streams) were taken
    /// from the device list and handed to the transport: a device update
    /// pushed after this is a new snapshot, never folded into an earlier one.
    pub async fn wait_sent(&self, n: u64) {
        let mut rx = self.sent.clone();
        let r = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|c| *c >= n)).await;
        assert!(matches!(r, Ok(Ok(_))), "fewer than {n} ListAndWatch snapshots sent within 20s");
    }

    /// Wait until a call whose text starts with `prefix` was seen.
    pub async fn wait_call(&self, prefix: &str) {
        for _ in 0..500 {
            if self.calls.lock().unwrap().iter().any(|c| c.starts_with(prefix)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no {prefix} call within 5s; calls: {:?}", self.calls.lock().unwrap());
    }
}

impl Drop for PluginHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serve a [`TestPlugin`] at `path` through dpctl's core listener.
pub async fn start_plugin(path: &Path, devices: Vec<Device>, b: Behaviour) -> PluginHandle {
    let (tx, rx) = watch::channel(devices);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let (sent_tx, sent_rx) = watch::channel(0u64);
    let plugin = TestPlugin { devices: rx, b, calls: calls.clone(), sent: Arc::new(sent_tx) };
    let (listener, guard) = dpctl::core::transport::listen(path).await.expect("listen");
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(async move {
        let _guard = guard;
        let _ = dpctl::core::transport::serve(listener, DevicePluginServer::new(plugin), async {
            let _ = stop_rx.await;
        })
        .await;
    });
    PluginHandle { path: path.to_path_buf(), devices: tx, calls, sent: sent_rx, stop: Some(stop_tx) }
}

/// Four healthy devices on two NUMA nodes.
pub fn four_devices() -> Vec<Device> {
    (0..4).map(|i| dev(&format!("foo-{i}"), "Healthy", Some(i / 2))).collect()
}

/// What a dpctl run printed.
#[derive(Debug)]
pub struct Run {
    /// Exit code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Assert the exit code, showing the output on failure.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

/// A `dpctl` command with a clean environment.
pub fn dpctl_cmd(args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpctl"));
    c.args(args)
        .env_remove("DPCTL_PLUGIN_DIR")
        .env_remove("DPCTL_KUBELET_SOCKET")
        .env_remove("DPCTL_POD_RESOURCES_SOCKET")
        .env_remove("DPCTL_ROOT")
        .env_remove("DPCTL_KUBELET_ROOT_DIR")
        .env_remove("NO_COLOR")
        // Tests run in a pod too: `dra serve` must not find the pod's API server (in-cluster config).
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("DPCTL_SERVICEACCOUNT_DIR")
        // Nor a developer's cluster: `dra serve` reads KUBECONFIG.
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Run `dpctl` to completion (at most 30 s).
pub async fn dpctl(args: &[&str]) -> Run {
    run_cmd(dpctl_cmd(args)).await
}

/// Run a prepared command to completion (at most 30 s).
pub async fn run_cmd(c: tokio::process::Command) -> Run {
    run_cmd_within(c, 30).await
}

/// Run a prepared command to completion (at most `secs` seconds).
pub async fn run_cmd_within(mut c: tokio::process::Command, secs: u64) -> Run {
    let out = tokio::time::timeout(Duration::from_secs(secs), c.output())
        .await
        .unwrap_or_else(|_| panic!("dpctl did not finish within {secs}s"))
        .expect("spawn dpctl");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A temp dir.
pub fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("dpctl-test").tempdir().expect("tempdir")
}

/// A path as &str.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// An in-test kubelet Registration server that records requests and
/// answers with `reject` when set.
pub mod kubelet {
    use super::*;
    use dpctl::api::deviceplugin::registration_server::{Registration, RegistrationServer};
    use dpctl::api::deviceplugin::RegisterRequest;

    /// The in-test Registration service.
    #[derive(Clone)]
    pub struct TestRegistration {
        /// Requests received.
        pub requests: Arc<Mutex<Vec<RegisterRequest>>>,
        /// Reject every request with this message.
        pub reject: Option<String>,
    }

    #[tonic::async_trait]
    impl Registration for TestRegistration {
        async fn register(&self, r: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
            self.requests.lock().unwrap().push(r.into_inner());
            match &self.reject {
                Some(m) => Err(Status::unknown(m.clone())),
                None => Ok(Response::new(Empty {})),
            }
        }
    }

    /// Serve it at `path`; returns the request log and a stop handle.
    pub async fn start(path: &Path, reject: Option<String>) -> (Arc<Mutex<Vec<RegisterRequest>>>, oneshot::Sender<()>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let svc = TestRegistration { requests: requests.clone(), reject };
        let (listener, guard) = dpctl::core::transport::listen(path).await.expect("listen");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _guard = guard;
            let _ = dpctl::core::transport::serve(listener, RegistrationServer::new(svc), async {
                let _ = rx.await;
            })
            .await;
        });
        (requests, tx)
    }
}

/// An in-test PodResources server with fixed content.
pub mod podresources {
    use super::{oneshot, Path, Request, Response, Status};
    use dpctl::api::podresources::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};
    use dpctl::api::podresources::{
        AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices, ContainerResources,
        GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest, ListPodResourcesResponse, NumaNode,
        PodResources, TopologyInfo,
    };

    /// The in-test PodResources service.
    #[derive(Clone)]
    pub struct TestPodResources {
        /// The pods it reports.
        pub pods: Vec<PodResources>,
        /// What GetAllocatableResources reports.
        pub allocatable: AllocatableResourcesResponse,
    }

    #[tonic::async_trait]
    impl PodResourcesLister for TestPodResources {
        async fn list(
            &self,
            _: Request<ListPodResourcesRequest>,
        ) -> Result<Response<ListPodResourcesResponse>, Status> {
            Ok(Response::new(ListPodResourcesResponse { pod_resources: self.pods.clone() }))
        }
        async fn get_allocatable_resources(
            &self,
            _: Request<AllocatableResourcesRequest>,
        ) -> Result<Response<AllocatableResourcesResponse>, Status> {
            Ok(Response::new(self.allocatable.clone()))
        }
        async fn get(&self, r: Request<GetPodResourcesRequest>) -> Result<Response<GetPodResourcesResponse>, Status> {
            let r = r.into_inner();
            match self.pods.iter().find(|p| p.name == r.pod_name && p.namespace == r.pod_namespace) {
                Some(p) => Ok(Response::new(GetPodResourcesResponse { pod_resources: Some(p.clone()) })),
                None => Err(Status::not_found(format!("pod not found: {}/{}", r.pod_namespace, r.pod_name))),
            }
        }
    }

    fn topo(n: i64) -> Option<TopologyInfo> {
        Some(TopologyInfo { nodes: vec![NumaNode { id: n }] })
    }

    /// A node with one pod holding two devices.
    pub fn sample() -> TestPodResources {
        TestPodResources {
            pods: vec![PodResources {
                name: "trainer".into(),
                namespace: "ml".into(),
                containers: vec![
                    ContainerResources {
                        name: "main".into(),
                        devices: vec![ContainerDevices {
                            resource_name: "vendor.example/foo".into(),
                            device_ids: vec!["foo-0".into(), "foo-1".into()],
                            topology: topo(0),
                        }],
                        cpu_ids: vec![2, 3],
                        ..Default::default()
                    },
                    ContainerResources { name: "sidecar".into(), ..Default::default() },
                ],
                ..Default::default()
            }],
            allocatable: AllocatableResourcesResponse {
                devices: (0..3)
                    .map(|i| ContainerDevices {
                        resource_name: "vendor.example/foo".into(),
                        device_ids: vec![format!("foo-{i}")],
                        topology: topo(i / 2),
                    })
                    .collect(),
                cpu_ids: vec![0, 1, 2, 3],
                memory: vec![],
            },
        }
    }

    /// Serve it at `path`.
    pub async fn start(path: &Path, svc: TestPodResources) -> oneshot::Sender<()> {
        let (listener, guard) = dpctl::core::transport::listen(path).await.expect("listen");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _guard = guard;
            let _ = dpctl::core::transport::serve(listener, PodResourcesListerServer::new(svc), async {
                let _ = rx.await;
            })
            .await;
        });
        tx
    }
}

/// Poll `cond` every 20 ms for up to `secs` seconds.
pub async fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out after {secs}s waiting for {what}");
}

/// `dpctl serve` of `resource` (plus `extra` flags) in `dir` without
/// registering, as socket `name`; returns once the socket exists.
pub async fn serve_unregistered(
    dir: &Path,
    resource: &str,
    name: &str,
    extra: &[&str],
) -> (tokio::process::Child, std::path::PathBuf) {
    let mut args = vec!["--resource", resource, "--no-register", "--socket-name", name];
    args.extend_from_slice(extra);
    let child = serve_cmd(dir, &args).spawn().unwrap();
    let sock = dir.join(name);
    wait_until(10, name, || sock.exists()).await;
    (child, sock)
}

/// `dpctl serve --plugin-dir DIR EXTRA…`: how tests start the simulated plugin.
pub fn serve_cmd(dir: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut args = vec!["serve", "--plugin-dir", s(dir)];
    args.extend_from_slice(extra);
    dpctl_cmd(&args)
}

/// Send SIGTERM to a child.
pub fn sigterm(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    }
}

/// SIGTERM a child and collect what it printed (at most 10 s).
pub async fn stop_child(child: tokio::process::Child) -> Run {
    sigterm(&child);
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("child did not exit within 10s of SIGTERM")
        .expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The sockets in a directory (names).
pub fn sockets_in(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_type().map(|t| t.is_socket()).unwrap_or(false))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A child's standard output, read as it comes, so a test can wait for the
/// line it needs instead of sleeping.
pub struct Tail {
    text: Arc<Mutex<String>>,
    grew: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Tail {
    /// Take `child`'s stdout (it must be piped) and start reading it.
    pub fn stdout(child: &mut tokio::process::Child) -> Tail {
        Tail::read(child.stdout.take().expect("stdout is piped"))
    }

    /// Take `child`'s stderr (it must be piped) and start reading it.
    pub fn stderr(child: &mut tokio::process::Child) -> Tail {
        Tail::read(child.stderr.take().expect("stderr is piped"))
    }

    fn read(out: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Tail {
        use tokio::io::AsyncBufReadExt;
        let text = Arc::new(Mutex::new(String::new()));
        let (tx, grew) = watch::channel(0usize);
        let t = text.clone();
        let task = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let mut g = t.lock().unwrap();
                g.push_str(&l);
                g.push('\n');
                let len = g.len();
                drop(g);
                tx.send_replace(len);
            }
        });
        Tail { text, grew, task }
    }

    /// Everything read so far.
    pub fn seen(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Wait (at most 20 s) until `needle` has appeared `count` times.
    pub async fn wait_for(&mut self, needle: &str, count: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if self.seen().matches(needle).count() >= count {
                return;
            }
            match tokio::time::timeout_at(deadline, self.grew.changed()).await {
                Ok(Ok(())) => {}
                _ => panic!("{needle:?} did not appear {count} time(s) within 20s; stdout so far:\n{}", self.seen()),
            }
        }
    }

    /// Wait (at most `secs` s) until `cond` holds of everything read so far;
    /// `Err` with what was read when it does not in time.
    pub async fn wait_until(&mut self, secs: u64, mut cond: impl FnMut(&str) -> bool) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if cond(&self.seen()) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, self.grew.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) if cond(&self.seen()) => return Ok(()),
                _ => return Err(self.seen()),
            }
        }
    }

    /// All of stdout, once the child closed it.
    pub async fn rest(self) -> String {
        let Tail { text, task, .. } = self;
        let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
        let t = text.lock().unwrap().clone();
        t
    }
}

/// SIGTERM a child whose stdout a [`Tail`] reads; the run's stdout is all of it.
pub async fn stop_tailed(child: tokio::process::Child, tail: Tail) -> Run {
    let mut r = stop_child(child).await;
    r.stdout = tail.rest().await;
    r
}

/// Where tests/interop/setup.sh builds the interop peers.
pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop")
}

/// Every file tests/interop/setup.sh builds, relative to [`interop_dir`].
pub const INTEROP_PEERS: &[&str] = &["go-peer", "python/peer.py", "python/dra_peer.py", "venv/bin/python"];

/// How to build the peers, as every message about them says it.
pub const INTEROP_SETUP: &str = "tests/interop/setup.sh (installs Go and grpcio with apt: needs root)";

static INTEROP_SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The interop peer directory if `files` (of [`INTEROP_PEERS`]) are built;
/// else `None`, and the test returns without running: the end of the run
/// says how many interop tests did not run and how to build the peers
/// (`interop_peers_are_built` fails the run instead under CI).
pub fn interop_peers(files: &[&str]) -> Option<PathBuf> {
    let dir = interop_dir();
    if files.iter().all(|f| dir.join(f).exists()) {
        return Some(dir);
    }
    if INTEROP_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        // SAFETY: atexit with a plain `extern "C" fn()` that only writes to stderr.
        unsafe { libc::atexit(interop_note) };
    }
    None
}

/// Written when the test binary exits, after the harness's summary, to the
/// real stderr (the harness captures only each test's own output).
extern "C" fn interop_note() {
    use std::io::Write;
    let n = INTEROP_SKIPPED.load(std::sync::atomic::Ordering::SeqCst);
    let _ = writeln!(
        std::io::stderr(),
        "\nnote: {n} interop test(s) passed WITHOUT RUNNING: the grpc-go and grpcio peers are not built in \
         {}.\n      No other test needs them. To run the interop matrix too, build the peers once with {INTEROP_SETUP}.",
        interop_dir().display()
    );
}

/// Where tests/upstream/build.sh builds upstream's peers (one binary per
/// tests/upstream/cmd/NAME).
pub fn upstream_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/upstream/bin")
}

/// Every binary tests/upstream/build.sh builds, in [`upstream_bin`].
pub const UPSTREAM_PEERS: &[&str] = &[
    "clientgo",
    "kubeletplugin",
    "protofields",
    "podsclient",
    "sample-device-plugin",
    "dra-test-driver",
    "controlplane",
    "dramanager",
    "devicemanager",
    "devicemetadata",
    // Built against 1.36 (tests/upstream/k8s-1.36), the oracles of what changed by version.
    "dramanager-1.36",
    "controlplane-1.36",
];

/// How to build them, as every message about them says it.
pub const UPSTREAM_BUILD: &str =
    "bash tests/upstream/build.sh (Go 1.26 at /usr/local/go; modules from the Go module proxy)";

static UPSTREAM_SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The upstream peer `name` (of [`UPSTREAM_PEERS`]) if it is built; else
/// `None`, and the test returns without running: the end of the run says how
/// many upstream tests did not run and how to build them
/// (`upstream::upstream_peers_are_built_when_required` fails the run instead
/// under CI).
pub fn upstream_peer(name: &str) -> Option<PathBuf> {
    let bin = upstream_bin().join(name);
    if bin.exists() {
        return Some(bin);
    }
    if UPSTREAM_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        // SAFETY: atexit with a plain `extern "C" fn()` that only writes to stderr.
        unsafe { libc::atexit(upstream_note) };
    }
    None
}

extern "C" fn upstream_note() {
    use std::io::Write;
    let n = UPSTREAM_SKIPPED.load(std::sync::atomic::Ordering::SeqCst);
    let _ = writeln!(
        std::io::stderr(),
        "\nnote: {n} upstream test(s) passed WITHOUT RUNNING: upstream's peers (client-go, the kubeletplugin helper) \
         are not built in {}.\n      Build them once with {UPSTREAM_BUILD}.",
        upstream_bin().display()
    );
}

/// A kubelet root in a temp dir with the directories the mock kubelet and
/// DRA drivers use (device-plugins/, plugins_registry/, manifests/,
/// pod-resources/, cdi/), and the processes the DRA e2e tests start on it.
pub struct DraTree {
    _d: tempfile::TempDir,
    /// The kubelet root.
    pub root: PathBuf,
}

impl DraTree {
    /// A fresh tree.
    pub fn new() -> Self {
        let d = tmp();
        let root = d.path().to_path_buf();
        for sub in ["device-plugins", "plugins_registry", "manifests", "pod-resources", "cdi"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        DraTree { _d: d, root }
    }

    /// A path under the root.
    pub fn p(&self, sub: &str) -> PathBuf {
        self.root.join(sub)
    }

    /// `dpctl mock-kubelet` on the tree, its JSON log followed.
    pub fn kubelet(&self) -> (tokio::process::Child, Tail) {
        let mut child = mock_kubelet_on(&self.root, &[]).spawn().unwrap();
        let tail = Tail::stdout(&mut child);
        (child, tail)
    }

    /// `dpctl dra serve` of `driver` on the tree (CDI specs in cdi/).
    pub fn driver(&self, driver: &str, extra: &[&str]) -> tokio::process::Child {
        let (root, cdi) = (s(&self.root), self.p("cdi"));
        let mut args = vec!["--kubelet-root-dir", root, "dra", "serve", "--driver", driver, "--cdi-dir", s(&cdi)];
        args.extend_from_slice(extra);
        let mut c = dpctl_cmd(&args);
        c.stdout(std::process::Stdio::null());
        c.spawn().unwrap()
    }

    /// Put a manifest in place at once (written aside, then renamed).
    pub fn write(&self, name: &str, text: &str) {
        let tmp = self.p(&format!("manifests/.{name}"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.p(&format!("manifests/{name}"))).unwrap();
    }
}

/// `dpctl mock-kubelet` on the kubelet root `root` (device-plugins/,
/// manifests/, plugins_registry/ and pod-resources/ created under it), its
/// JSON log on a piped stdout, `extra` flags after the tree's.
pub fn mock_kubelet_on(root: &Path, extra: &[&str]) -> tokio::process::Command {
    for sub in ["device-plugins", "plugins_registry", "manifests", "pod-resources"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let p = |sub: &str| root.join(sub).display().to_string();
    let mut c = dpctl_cmd(&[
        "mock-kubelet",
        "--plugin-dir",
        &p("device-plugins"),
        "--manifests",
        &p("manifests"),
        "--plugins-registry-dir",
        &p("plugins_registry"),
        "--pod-resources-socket",
        &p("pod-resources/kubelet.sock"),
        "--log-format",
        "json",
    ]);
    c.args(extra).stdout(std::process::Stdio::piped());
    c
}

/// A byte stream a test's raw HTTP/1.1 requests go over.
pub trait ApiIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ApiIo for T {}

/// A connection to the API server a kubeconfig names, as the kubeconfig says:
/// TLS verified against its `certificate-authority-data` (the mock kubelet's
/// default), or plain TCP for an `http://` server.
pub async fn api_connect(kubeconfig: &Path) -> Box<dyn ApiIo> {
    let api = dpctl::client::kube::load_kubeconfig(kubeconfig).unwrap();
    let tcp = tokio::net::TcpStream::connect(&api.authority).await.unwrap();
    match api.tls {
        None => Box::new(tcp),
        Some((cfg, name)) => Box::new(tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.unwrap()),
    }
}

/// `host:port` of an `api-server` event's `addr` (`https://…` or `http://…`).
pub fn api_authority(url: &str) -> String {
    url.trim_start_matches("https://").trim_start_matches("http://").to_string()
}

/// The bearer token of a kubeconfig the mock kubelet wrote (empty: none, plain http).
pub fn kubeconfig_token(kubeconfig: &Path) -> String {
    let kc = std::fs::read_to_string(kubeconfig).unwrap();
    kc.lines().find_map(|l| l.trim().strip_prefix("token: ")).unwrap_or_default().to_string()
}

/// A small exec credential plugin: a shell script `dir/name` that appends a
/// line to `dir/name.runs` at each run and prints an `ExecCredential` of
/// `api_version` (`client.authentication.k8s.io/v1` or `v1beta1`) whose
/// status is `status` (JSON, e.g. `{"token":"abc"}`). The kubeconfigs of
/// [`exec_kubeconfig`] run it.
pub fn exec_plugin(dir: &Path, name: &str, api_version: &str, status: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let p = dir.join(name);
    let cred = format!(r#"{{"apiVersion":"{api_version}","kind":"ExecCredential","status":{status}}}"#);
    let runs = dir.join(format!("{name}.runs"));
    std::fs::write(&p, format!("#!/bin/sh\necho run >> '{}'\ncat <<'EOF'\n{cred}\nEOF\n", runs.display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The exec section of a user running `plugin` non-interactively with
/// `api_version`, for [`exec_kubeconfig`].
pub fn exec_user(plugin: &Path, api_version: &str) -> String {
    format!(
        "{{command: {}, apiVersion: {api_version}, interactiveMode: Never}}",
        serde_json::Value::String(plugin.display().to_string())
    )
}

/// How many times the plugin [`exec_plugin`] wrote as `dir/name` has run.
pub fn exec_plugin_runs(dir: &Path, name: &str) -> usize {
    std::fs::read_to_string(dir.join(format!("{name}.runs"))).map(|s| s.lines().count()).unwrap_or(0)
}

/// A kubeconfig `dir/kubeconfig-exec` for the cluster of `kubeconfig` (its
/// current context's server, CA and TLS fields, kept as they are) whose user
/// is an `exec` plugin: `exec` is the user's exec section as YAML/JSON flow,
/// e.g. `{command: /p/plugin, apiVersion: client.authentication.k8s.io/v1,
/// interactiveMode: Never}`. Works for any kubeconfig with inline CA data or
/// absolute paths (the mock kubelet's, a real control plane's admin one).
pub fn exec_kubeconfig(dir: &Path, kubeconfig: &Path, exec: &str) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let v: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let ctx_name = v["current-context"].as_str().unwrap();
    let ctx = v["contexts"].as_array().unwrap().iter().find(|c| c["name"] == ctx_name).unwrap();
    let cluster_name = ctx["context"]["cluster"].as_str().unwrap();
    let cluster = v["clusters"].as_array().unwrap().iter().find(|c| c["name"] == cluster_name).unwrap();
    let out = dir.join("kubeconfig-exec");
    std::fs::write(
        &out,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{}]\nusers: [{{name: exec-user, user: {{exec: {exec}}}}}]\ncontexts: [{{name: exec, context: {{cluster: {}, user: exec-user}}}}]\ncurrent-context: exec\n",
            cluster,
            serde_json::Value::String(cluster_name.to_string())
        ),
    )
    .unwrap();
    out
}

/// The real control plane (tests/upstream/cmd/controlplane: embedded etcd,
/// kube-apiserver, kube-scheduler, the DRA controllers), started once per
/// test binary by [`control_plane`].
pub struct ControlPlane {
    /// Where it wrote admin.kubeconfig, node-NAME.kubeconfig, ca.crt, tokens.csv.
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The admin kubeconfig (a token in group system:masters).
    pub kubeconfig: PathBuf,
    /// Seconds from its start to every component up, as it measured them.
    pub seconds: f64,
    /// Seconds from the test binary's spawn to the ready line.
    pub wall: f64,
}

/// The node identities the control plane has tokens for (system:node:NAME in
/// system:nodes): DIR/node-NAME.kubeconfig.
pub const CONTROL_PLANE_NODES: &[&str] = &[
    "cp-node-sched",
    "cp-node-kubelet",
    "cp-node-kubelet-dra",
    "cp-fleet-0",
    "cp-fleet-1",
    "cp-fleet-2",
    "cp-bench-0",
    "cp-bench-1",
    "cp-bench-2",
    "cp-node-binding",
    "cp-node-extended",
    "cp-node-late-claim",
];

static CONTROL_PLANE: std::sync::OnceLock<Result<ControlPlane, String>> = std::sync::OnceLock::new();
static CONTROL_PLANE_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static CONTROL_PLANE_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The real control plane, started at the first call and shared by every
/// test of this binary (each test uses its own namespace and node names);
/// `None` when tests/upstream/build.sh has not built it (the test returns, as
/// every upstream test does). It is stopped with SIGTERM when the test binary
/// exits (atexit), and gets SIGKILL from the kernel if the test binary dies
/// first (PR_SET_PDEATHSIG, from a thread that lives as long as the process).
pub fn control_plane() -> Option<&'static ControlPlane> {
    let bin = upstream_peer("controlplane")?;
    match CONTROL_PLANE.get_or_init(|| start_control_plane(&bin)) {
        Ok(cp) => Some(cp),
        Err(e) => panic!("{e}"),
    }
}

fn start_control_plane(bin: &Path) -> Result<ControlPlane, String> {
    let dir = tempfile::Builder::new().prefix("dpctl-controlplane-").tempdir().map_err(|e| e.to_string())?.keep();
    let _ = CONTROL_PLANE_DIR.set(dir.clone());
    let log = std::fs::File::create(dir.join("controlplane.log")).map_err(|e| e.to_string())?;
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("serve").arg("-dir").arg(&dir);
    for n in CONTROL_PLANE_NODES {
        cmd.args(["-node", n]);
    }
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(log);
    // SAFETY: prctl in the child between fork and exec: async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (tx, rx) = std::sync::mpsc::channel::<Result<String, String>>();
    let started = std::time::Instant::now();
    // PR_SET_PDEATHSIG fires when the thread that forked ends: this one never does.
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Err(format!("cannot start the control plane: {e}")));
                return;
            }
        };
        CONTROL_PLANE_PID.store(child.id() as i32, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: atexit with a plain `extern "C" fn()`.
        unsafe { libc::atexit(stop_control_plane) };
        let out = child.stdout.take().unwrap();
        let mut sent = false;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if !sent && line.contains("\"ready\"") {
                sent = true;
                let _ = tx.send(Ok(line));
            }
        }
        let st = child.wait();
        if !sent {
            let _ = tx.send(Err(format!("the control plane exited before it was ready: {st:?}")));
        }
        loop {
            std::thread::park();
        }
    });
    let log_tail = |e: String| {
        let log = std::fs::read_to_string(dir.join("controlplane.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!("{e}; the end of its log:\n{}", lines[lines.len().saturating_sub(30)..].join("\n"))
    };
    let line = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(r) => r.map_err(log_tail)?,
        Err(_) => return Err(log_tail("the control plane was not ready within 120 s".into())),
    };
    let wall = started.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
    Ok(ControlPlane {
        server: v["server"].as_str().unwrap_or_default().to_string(),
        kubeconfig: PathBuf::from(v["kubeconfig"].as_str().unwrap_or_default()),
        seconds: v["seconds"].as_f64().unwrap_or(-1.0),
        wall,
        dir,
    })
}

/// At exit: SIGTERM the control plane, wait (at most 30 s) for it to close
/// etcd and exit, and remove its directory.
extern "C" fn stop_control_plane() {
    let pid = CONTROL_PLANE_PID.load(std::sync::atomic::Ordering::SeqCst);
    if pid <= 0 {
        return;
    }
    // SAFETY: plain syscalls on our own child.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        for _ in 0..3000 {
            let mut st = 0;
            let r = libc::waitpid(pid, &mut st, libc::WNOHANG);
            if r != 0 {
                break;
            }
            libc::usleep(10_000);
        }
        libc::kill(pid, libc::SIGKILL);
    }
    if let Some(d) = CONTROL_PLANE_DIR.get() {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `dpctl dra serve` of `driver` on kubelet root `root` (CDI specs in
/// `root/cdi`, created), publishing for `node` through `kubeconfig`, its
/// log in JSON: the command tests add their own flags to.
pub fn dra_serve_publishing(root: &Path, driver: &str, kubeconfig: &Path, node: &str) -> tokio::process::Command {
    let cdi = root.join("cdi");
    std::fs::create_dir_all(&cdi).expect("create the CDI directory");
    let (root, cdi, kubeconfig) =
        (root.display().to_string(), cdi.display().to_string(), kubeconfig.display().to_string());
    dpctl_cmd(&[
        "--kubelet-root-dir",
        &root,
        "dra",
        "serve",
        "--driver",
        driver,
        "--cdi-dir",
        &cdi,
        "--kubeconfig",
        &kubeconfig,
        "--node-name",
        node,
        "--log-format",
        "json",
    ])
}

/// Poll `f` (every 100 ms, at most `secs`) until it gives `Some`.
pub async fn until<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out after {secs}s waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Wait for the mock kubelet's `api-server` event in `log` (its local API
/// server is up) and return it (`addr`, `kubeconfig`).
pub async fn api_server_event(log: &mut Tail) -> serde_json::Value {
    log.wait_for("\"event\":\"api-server\"", 1).await;
    log.seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "api-server")
        .expect("the api-server event just seen")
}

/// A JSON string's text ("" for anything else).
pub fn text(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// `claim` with its one allocated device's `status.devices` entry holding
/// `conditions` (type → status), as a binding controller writes them
/// (KEP-5007), to be written through the status subresource.
pub fn with_device_conditions(claim: &serde_json::Value, conditions: &[(&str, &str)]) -> serde_json::Value {
    use serde_json::{json, Value};
    let mut c = claim.clone();
    let r = &claim["status"]["allocation"]["devices"]["results"][0];
    let conds: Vec<Value> = conditions
        .iter()
        .map(|(t, s)| {
            json!({"type": t, "status": s, "reason": "Test", "message": format!("{t} is {s}"),
                "lastTransitionTime": "2026-12-05T00:00:00Z"})
        })
        .collect();
    c["status"]["devices"] =
        json!([{"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": conds}]);
    c
}
