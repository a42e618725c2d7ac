//! `dpctl bench`: a load generator for any plugin, health-change latency of
//! `dpctl serve`, and the mock kubelet at scale. Numbers go to BENCHMARKS.md
//! (see bench/compare.sh); nothing here is a pass/fail test.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{
    device_plugin_server::DevicePluginServer, AllocateRequest, ContainerAllocateRequest,
    ContainerPreferredAllocationRequest, Empty, PreferredAllocationRequest,
};
use crate::api::HEALTHY;
use crate::bench::{load, peak_rss_mib, percentiles, Budget, LoadReport};
use crate::cli::positive_duration_arg;
use crate::client::conn::{PluginConn, Update};
use crate::core::log::Logger;
use crate::core::status::grpc_go_code;
use crate::core::task::Tasks;
use crate::core::time::millis;
use crate::core::transport::{listen, serve_owned, SocketGuard, TempDir};
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::TempNode;
use crate::plugin::config::ResourceConfig;
use crate::plugin::server::PluginService;
use crate::plugin::simulated::Simulated;
use crate::render::{emit, structured, table, Format};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `dpctl bench`: its surface.
pub const COMMAND: Spec = Spec {
    name: "bench",
    about: "Benchmarks: drive a plugin, time health changes, time a mock kubelet at scale",
    group: super::surface::Group::Ci,
    args: surface::subcommands::<BenchCommand>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<BenchCommand>,
};

const EXAMPLES: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000 -o json
  dpctl bench list-and-watch vendor.sock --concurrency 4
  dpctl bench watch
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000";

const ALLOCATE_EXAMPLES: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench allocate vendor.sock --requests 20000 --devices-per-request 2 -o json";

const PREFERRED_EXAMPLES: &str = "Examples:
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000";

const LIST_AND_WATCH_EXAMPLES: &str = "Examples:
  dpctl bench list-and-watch vendor.sock --concurrency 4";

const WATCH_EXAMPLES: &str = "Examples:
  dpctl bench watch
  dpctl bench watch --socket /tmp/dp/foo.sock --changes 200 --sizes 1000";

const KUBELET_EXAMPLES: &str = "Examples:
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000 -o json";

/// How much load to generate.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Number of calls (ignored with --duration)
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes
    #[arg(long, default_value_t = 1, value_name = "C", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// Devices per request (allocate, preferred), at most 100000
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=crate::core::limits::MAX_DEVICES as u64))]
    pub devices_per_request: u64,
    /// Run for this long instead of a number of calls
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
}

/// `dpctl bench …`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Allocate throughput and latency of any plugin
    #[command(after_help = ALLOCATE_EXAMPLES)]
    Allocate(LoadArgs),
    /// GetPreferredAllocation throughput and latency of any plugin
    #[command(after_help = PREFERRED_EXAMPLES)]
    Preferred(LoadArgs),
    /// ListAndWatch: open a stream, take the first snapshot, close — throughput and latency
    #[command(after_help = LIST_AND_WATCH_EXAMPLES)]
    ListAndWatch(LoadArgs),
    /// Health change → ListAndWatch client latency, and first-snapshot time of large plugins
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(BenchWatchArgs),
    /// A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS
    #[command(after_help = KUBELET_EXAMPLES)]
    Kubelet(BenchKubeletArgs),
}

/// `dpctl bench watch`
#[derive(Debug, Args)]
pub struct BenchWatchArgs {
    /// A running `dpctl serve` socket to measure (changes go through its live control); default: an in-process one
    #[arg(long, value_name = "SOCKET")]
    pub socket: Option<PathBuf>,
    /// Health changes to time
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub changes: u64,
    /// Plugin sizes whose first snapshot to time (each 1..=100000)
    #[arg(long, value_delimiter = ',', default_value = "10000,100000", value_name = "N,N", value_parser = device_count_arg)]
    pub sizes: Vec<usize>,
}

/// `dpctl bench kubelet`
#[derive(Debug, Args)]
pub struct BenchKubeletArgs {
    /// Simulated plugins (one resource each)
    #[arg(long, default_value_t = 100, value_name = "P", value_parser = clap::value_parser!(u64).range(1..=2000))]
    pub plugins: u64,
    /// Devices per plugin
    #[arg(long, default_value_t = 100, value_name = "D", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub devices: u64,
    /// Pods to admit (one device each)
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub pods: u64,
    /// The mock kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

fn device_count_arg(s: &str) -> Result<usize, String> {
    let max = crate::core::limits::MAX_DEVICES;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a number of devices from 1 to {max}")),
    }
}

impl Invocation for BenchCommand {
    fn workers(&self) -> usize {
        match self {
            BenchCommand::Kubelet(_) => 2,
            _ => 0,
        }
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

fn progress(ctx: &Ctx, a: &LoadArgs) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if ctx.format != Format::Table || !std::io::stderr().is_terminal() {
        return None;
    }
    let (pb, template) = match a.duration {
        Some(_) => (indicatif::ProgressBar::new_spinner(), "{spinner} {elapsed} {pos} calls, {rate}"),
        None => (indicatif::ProgressBar::new(a.requests), "{bar:40} {pos}/{len} calls, {rate}, eta {eta}"),
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        // whole calls per second: 27342/s, not 27,342.4481/s
        pb.set_style(style.with_key("rate", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", rate_text(s.per_sec()));
        }));
    }
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(10));
    pb.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(pb)
}

/// A rate as the progress bar shows it: whole calls per second.
pub fn rate_text(per_sec: f64) -> String {
    format!("{:.0}/s", per_sec.max(0.0))
}

fn show_load(ctx: &Ctx, r: &LoadReport) -> Result<()> {
    if r.interrupted {
        eprintln!(
            "dpctl: interrupted after {:.1}s: the figures cover the {} call(s) made so far",
            r.seconds, r.requests
        );
    }
    match ctx.format {
        Format::Table => {
            let ms = |f: fn(&crate::bench::Percentiles) -> f64| {
                r.latency_ms.as_ref().map(|l| format!("{:.3}", f(l))).unwrap_or_else(|| "-".into())
            };
            let errs = if r.errors == 0 {
                "0".to_string()
            } else {
                r.errors_by_code.iter().map(|(c, n)| format!("{c}:{n}")).collect::<Vec<_>>().join(",")
            };
            emit(&table(
                &["CALL", "CONCURRENCY", "REQUESTS", "ERRORS", "CALLS/S", "P50 MS", "P90 MS", "P99 MS", "MAX MS"],
                &[vec![
                    r.call.clone(),
                    r.concurrency.to_string(),
                    r.requests.to_string(),
                    errs,
                    format!("{}", r.throughput),
                    ms(|l| l.p50),
                    ms(|l| l.p90),
                    ms(|l| l.p99),
                    ms(|l| l.max),
                ]],
            ))
        }
        f => emit(&structured(f, r)?),
    }
}

async fn healthy_ids(conn: &PluginConn) -> Result<Vec<String>> {
    let mut s = conn.list_and_watch().await?;
    match s.next().await? {
        Update::Snapshot(r) => Ok(r.devices.into_iter().filter(|d| d.health == HEALTHY).map(|d| d.id).collect()),
        Update::Closed => Err(Error::failed(format!(
            "{}: the plugin closed ListAndWatch before its first snapshot",
            conn.socket().display()
        ))),
    }
}

async fn load_cmd(ctx: &Ctx, a: &LoadArgs, which: &str) -> Result<()> {
    let conn = PluginConn::connect(&ctx.paths.resolve_socket(&a.socket), ctx.timeout, super::INSPECT_MAX_RECV).await?;
    let budget = a.duration.map(Budget::Duration).unwrap_or(Budget::Requests(a.requests));
    let c = a.concurrency as usize;
    let k = a.devices_per_request as usize;
    let report = match which {
        "ListAndWatch" => {
            let client = conn.client();
            load("ListAndWatch", c, budget, progress(ctx, a), crate::core::interrupted(), move |_| {
                let mut client = client.clone();
                async move {
                    let mut s = client.list_and_watch(Empty {}).await.map_err(|s| grpc_go_code(&s))?.into_inner();
                    s.message().await.map_err(|s| grpc_go_code(&s))?.ok_or(tonic::Code::Unavailable).map(|_| ())
                }
            })
            .await
        }
        _ => {
            let ids = Arc::new(healthy_ids(&conn).await?);
            if ids.len() < k {
                return Err(Error::usage(format!(
                    "--devices-per-request {k} is more than the plugin's {} healthy device(s)",
                    ids.len()
                )));
            }
            let client = conn.client();
            if which == "Allocate" {
                load("Allocate", c, budget, progress(ctx, a), crate::core::interrupted(), move |i| {
                    let (mut client, ids) = (client.clone(), ids.clone());
                    async move {
                        let n = ids.len() as u64;
                        let start = ((i % n) as usize * k) % ids.len();
                        let devs: Vec<String> = (0..k).map(|j| ids[(start + j) % ids.len()].clone()).collect();
                        let req = AllocateRequest {
                            container_requests: vec![ContainerAllocateRequest { devices_ids: devs }],
                        };
                        client.allocate(req).await.map(|_| ()).map_err(|s| grpc_go_code(&s))
                    }
                })
                .await
            } else {
                load("GetPreferredAllocation", c, budget, progress(ctx, a), crate::core::interrupted(), move |_| {
                    let (mut client, ids) = (client.clone(), ids.clone());
                    async move {
                        let req = PreferredAllocationRequest {
                            container_requests: vec![ContainerPreferredAllocationRequest {
                                available_device_i_ds: ids.to_vec(),
                                must_include_device_i_ds: vec![],
                                allocation_size: k as i32,
                            }],
                        };
                        client.get_preferred_allocation(req).await.map(|_| ()).map_err(|s| grpc_go_code(&s))
                    }
                })
                .await
            }
        }
    };
    show_load(ctx, &report)?;
    match report.failure() {
        Some(f) => Err(Error::failed(format!("{}: {f}", conn.socket().display()))),
        None => Ok(()),
    }
}

/// A simulated plugin served in this process on a temp socket.
struct Local {
    sim: Arc<Simulated>,
    socket: PathBuf,
    /// Its server and streams.
    tasks: Tasks,
    _guard: SocketGuard,
    _dir: TempDir,
}

async fn local_plugin(devices: usize, tag: &str) -> Result<Local> {
    let dir = TempDir::new(tag)?;
    let cfg = ResourceConfig {
        resource: "bench.example/dev".into(),
        count: Some(devices),
        id_pattern: Some("dev-{i}".into()),
        ..Default::default()
    };
    let sim = Arc::new(Simulated::new(&cfg)?);
    let socket = dir.path().join("bench.sock");
    let (listener, guard) = listen(&socket).await?;
    let tasks = Tasks::new();
    let svc = DevicePluginServer::new(PluginService::new(sim.clone(), Logger::silent(), tasks.clone()))
        .max_encoding_message_size(usize::MAX);
    serve_owned(&tasks, listener, svc);
    Ok(Local { sim, socket, tasks, _guard: guard, _dir: dir })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WatchReport {
    health_change_to_client_ms: crate::bench::Percentiles,
    changes: u64,
    via: String,
    interrupted: bool,
    first_snapshot_ms: Vec<Value>,
}

async fn watch_cmd(ctx: &Ctx, a: &BenchWatchArgs) -> Result<()> {
    // Health change → client.
    let (local, socket) = match &a.socket {
        Some(s) => (None, ctx.paths.resolve_socket(s)),
        None => {
            let l = local_plugin(8, "watch").await?;
            let s = l.socket.clone();
            (Some(l), s)
        }
    };
    let conn = PluginConn::connect(&socket, ctx.timeout, super::INSPECT_MAX_RECV).await?;
    let mut stream = conn.list_and_watch().await?;
    let first = match stream.next().await? {
        Update::Snapshot(r) => r,
        Update::Closed => return Err(Error::failed("the plugin closed ListAndWatch")),
    };
    let id = first.devices.first().map(|d| d.id.clone()).ok_or_else(|| Error::failed("the plugin has no devices"))?;
    let control = match &local {
        Some(_) => None,
        None => Some(find_control(ctx, &socket).await?),
    };
    let mut lat = Vec::new();
    // Ctrl-C: stop changing, report the changes timed so far.
    let interrupt = crate::core::interrupted();
    tokio::pin!(interrupt);
    let mut interrupted = false;
    for i in 0..a.changes {
        let health = if i % 2 == 0 { crate::api::UNHEALTHY } else { HEALTHY };
        let one = async {
            let t = Instant::now();
            if let Some(path) = &control {
                let req = crate::plugin::control::Request::SetHealth {
                    resource: None,
                    ids: vec![id.clone()],
                    health: health.into(),
                };
                let ans = crate::plugin::control::send(path, &req, ctx.timeout).await?;
                if !ans.ok {
                    return Err(Error::failed(ans.error.unwrap_or_default()));
                }
            } else if let Some(l) = &local {
                l.sim.inventory.set_health(std::slice::from_ref(&id), health).map_err(Error::failed)?;
            }
            loop {
                match tokio::time::timeout(ctx.timeout, stream.next()).await {
                    Err(_) => {
                        return Err(Error::failed("a health change did not reach the ListAndWatch client in time"))
                    }
                    Ok(u) => match u? {
                        Update::Snapshot(r) if r.devices.iter().any(|d| d.id == id && d.health == health) => break,
                        Update::Snapshot(_) => continue,
                        Update::Closed => return Err(Error::failed("the plugin closed ListAndWatch")),
                    },
                }
            }
            Ok::<Duration, Error>(t.elapsed())
        };
        tokio::select! {
            r = one => lat.push(r?),
            _ = &mut interrupt => {
                interrupted = true;
                break;
            }
        }
    }
    if interrupted && lat.is_empty() {
        return Err(Error::failed("interrupted before the first health change was timed"));
    }
    if interrupted {
        eprintln!("dpctl: interrupted after {} health change(s): first-snapshot sizes skipped", lat.len());
    }
    if let Some(l) = &local {
        l.tasks.stop().await;
    }
    // First snapshot of large plugins.
    let mut sizes = Vec::new();
    for &n in a.sizes.iter().filter(|_| !interrupted) {
        let l = local_plugin(n, "size").await?;
        let mut runs = Vec::new();
        let mut bytes = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let c = PluginConn::connect(&l.socket, ctx.timeout, usize::MAX).await?;
            let mut s = c.list_and_watch().await?;
            if let Update::Snapshot(r) = s.next().await? {
                bytes = prost::Message::encoded_len(&r);
            }
            runs.push(t.elapsed());
        }
        let p = percentiles(runs);
        sizes.push(json!({"devices": n, "bytes": bytes, "p50": p.p50, "max": p.max}));
        l.tasks.stop().await;
    }
    let lat_count = lat.len() as u64;
    let report = WatchReport {
        health_change_to_client_ms: percentiles(lat),
        changes: lat_count,
        interrupted,
        via: if local.is_some() {
            "in-process dpctl serve backend".into()
        } else {
            format!("live control of {}", socket.display())
        },
        first_snapshot_ms: sizes,
    };
    match ctx.format {
        Format::Table => {
            let p = &report.health_change_to_client_ms;
            let mut rows = vec![vec![
                format!("health change → client ({} changes, {})", report.changes, report.via),
                format!("{:.3}", p.p50),
                format!("{:.3}", p.p99),
                format!("{:.3}", p.max),
            ]];
            for s in &report.first_snapshot_ms {
                rows.push(vec![
                    format!("first snapshot, {} devices ({} bytes), connect included", s["devices"], s["bytes"]),
                    format!("{:.3}", s["p50"].as_f64().unwrap_or(0.0)),
                    "-".into(),
                    format!("{:.3}", s["max"].as_f64().unwrap_or(0.0)),
                ]);
            }
            emit(&table(&["MEASUREMENT", "P50 MS", "P99 MS", "MAX MS"], &rows))
        }
        f => emit(&structured(f, &report)?),
    }
}

/// The control socket of the `dpctl serve` that serves `socket`.
async fn find_control(ctx: &Ctx, socket: &Path) -> Result<PathBuf> {
    let dir = socket.parent().unwrap_or(Path::new(".")).join(crate::plugin::control::CONTROL_DIR);
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        Error::failed(format!("{}: no live control here ({e}); --socket must be a dpctl serve's socket", dir.display()))
    })?;
    for e in rd.flatten() {
        let p = e.path();
        let req = crate::plugin::control::Request::List { resource: None };
        if let Ok(a) = crate::plugin::control::send(&p, &req, ctx.timeout).await {
            if a.resources.iter().any(|r| Path::new(&r.socket) == socket) {
                return Ok(p);
            }
        }
    }
    Err(Error::failed(format!("no dpctl serve control socket in {} serves {}", dir.display(), socket.display())))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KubeletReport {
    plugins: u64,
    devices_per_plugin: u64,
    pods: u64,
    all_registered_and_allocatable_ms: Option<f64>,
    admission_ms: Option<f64>,
    admissions_per_second: Option<f64>,
    admitted: u64,
    rejected: u64,
    restart_all_back_ms: Option<f64>,
    peak_rss_mib: Option<f64>,
    /// Ctrl-C (or SIGTERM) ended the run: later stages were not measured.
    interrupted: bool,
}

/// Wait (at most 120 s) until `done` has seen enough kubelet events.
async fn wait_for(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Arc<Stamped>>,
    what: &str,
    mut done: impl FnMut(&KubeletEvent) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => return Err(Error::failed(format!("bench: timed out waiting for {what}"))),
            Ok(None) => return Err(Error::failed("the kubelet engine stopped")),
            Ok(Some(e)) if done(&e.event) => return Ok(()),
            Ok(Some(_)) => {}
        }
    }
}

async fn kubelet_cmd(ctx: &Ctx, a: &BenchKubeletArgs) -> Result<()> {
    // Listen for Ctrl-C before anything starts, so no stage runs unowned.
    let interrupt = crate::core::interrupted();
    let node_dir = TempNode::new("kubelet")?;
    let tree = node_dir.tree.clone();
    // The engine `dpctl mock-kubelet` runs, in this process: its typed events time each stage.
    let bus = EventBus::new(Logger::silent());
    let mut events = bus.subscribe();
    let mut spec = NodeSpec::on_tree(&tree);
    (spec.pod_resources_socket, spec.plugins_registry_dir) = (None, None);
    spec.manager.grace_period = Duration::from_secs(3600);
    spec.manager.profile = crate::kubelet::profile::Profile::of(a.kubelet_version);
    let node = Node::start(spec, bus).await?;

    // P plugins, in this process.
    let resources: Vec<ResourceConfig> = (0..a.plugins)
        .map(|i| ResourceConfig {
            resource: format!("bench.example/r{i}"),
            count: Some(a.devices as usize),
            socket_name: Some(format!("r{i}.sock")),
            ..Default::default()
        })
        .collect();
    let settings = crate::plugin::registrar::Settings {
        plugin_dir: tree.plugin_dir.clone(),
        socket_name: None,
        kubelet_socket: tree.kubelet_socket(),
        mode: crate::plugin::config::RegistrationMode::Kubelet,
        registry_dir: tree.registry_dir.clone(),
        register: true,
        retry: true,
        reregister_on_disconnect: false,
        timeout: ctx.timeout,
        host_root: Default::default(), // a private temp tree
    };
    let t0 = Instant::now();
    let plugins = Tasks::new();
    let group = plugins.child();
    plugins.spawn_joined(async move {
        let _ = crate::plugin::run::run(&resources, settings, None, Logger::silent(), group).await;
    });
    let mut report = KubeletReport {
        plugins: a.plugins,
        devices_per_plugin: a.devices,
        pods: a.pods,
        all_registered_and_allocatable_ms: None,
        admission_ms: None,
        admissions_per_second: None,
        admitted: 0,
        rejected: 0,
        restart_all_back_ms: None,
        peak_rss_mib: None,
        interrupted: false,
    };
    // The stages in order; Ctrl-C ends them and the figures so far are shown.
    let outcome = {
        let r = &mut report;
        let stages = async {
            let want = a.plugins as usize;
            let d = a.devices as usize;
            let mut ready = std::collections::BTreeSet::new();
            wait_for(&mut events, "all plugins registered and allocatable", |e| {
                if let KubeletEvent::Devices { resource, allocatable, .. } = e {
                    if *allocatable == d {
                        ready.insert(resource.clone());
                    }
                }
                ready.len() == want
            })
            .await?;
            r.all_registered_and_allocatable_ms = Some(millis(t0.elapsed()));

            // N pods, one device each.
            for i in 0..a.pods {
                let text = format!(
                    "{{\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"bench\"}},\"spec\":{{\"containers\":[{{\"name\":\"c\",\"resources\":{{\"limits\":{{\"bench.example/r{}\":1}}}}}}]}}}}",
                    i % a.plugins
                );
                let f = tree.manifests.join(format!("pod-{i}.json"));
                crate::core::files::write_atomic(&f, text.as_bytes()).map_err(|e| Error::io(&f, "cannot write", &e))?;
            }
            let t1 = Instant::now();
            let (mut admitted, mut rejected) = (0u64, 0u64);
            let pods = a.pods;
            if pods > 0 {
                wait_for(&mut events, "pod admissions", |e| {
                    match e {
                        KubeletEvent::PodAdmitted { .. } => admitted += 1,
                        KubeletEvent::PodRejected { .. } => rejected += 1,
                        _ => {}
                    }
                    admitted + rejected >= pods
                })
                .await?;
            }
            let admission = t1.elapsed();
            (r.admitted, r.rejected) = (admitted, rejected);
            r.admission_ms = Some(millis(admission));
            r.admissions_per_second = Some(if admission.as_secs_f64() > 0.0 {
                (admitted as f64 / admission.as_secs_f64()).round()
            } else {
                0.0
            });

            // A kubelet restart: every plugin must come back.
            let t2 = Instant::now();
            node.restart("bench").await?;
            wait_for(&mut events, "all plugins back after a restart", |e| {
                matches!(e, KubeletEvent::AllPluginsBack { .. })
            })
            .await?;
            r.restart_all_back_ms = Some(millis(t2.elapsed()));
            Ok::<(), Error>(())
        };
        tokio::select! {
            o = stages => Some(o),
            _ = interrupt => None,
        }
    };
    report.peak_rss_mib = peak_rss_mib(std::process::id());

    plugins.stop().await;
    node.stop().await;
    match outcome {
        Some(Err(e)) => return Err(e),
        Some(Ok(())) => {}
        None => {
            report.interrupted = true;
            eprintln!("dpctl: interrupted: the figures cover the stages finished so far ('-' was not measured)");
        }
    }

    show_kubelet_report(ctx.format, a, &report)
}

/// `bench kubelet`'s figures: a table, or `-o json|yaml`.
fn show_kubelet_report(format: Format, a: &BenchKubeletArgs, report: &KubeletReport) -> Result<()> {
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "-".into());
    match format {
        Format::Table => emit(&table(
            &["MEASUREMENT", "VALUE"],
            &[
                vec![
                    format!("{} plugins × {} devices registered and allocatable", a.plugins, a.devices),
                    ms(report.all_registered_and_allocatable_ms),
                ],
                vec![
                    format!("{} pods admitted ({} rejected)", report.admitted, report.rejected),
                    match (report.admission_ms, report.admissions_per_second) {
                        (Some(t), Some(r)) => format!("{t:.1} ms ({r}/s)"),
                        _ => "-".into(),
                    },
                ],
                vec!["all plugins back after a kubelet restart".into(), ms(report.restart_all_back_ms)],
                vec![
                    "peak RSS (kubelet engine and plugins, one process)".into(),
                    report.peak_rss_mib.map(|r| format!("{r} MiB")).unwrap_or_else(|| "unknown".into()),
                ],
            ],
        )),
        f => emit(&structured(f, report)?),
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, c: &BenchCommand) -> Result<()> {
    match c {
        BenchCommand::Allocate(a) => load_cmd(ctx, a, "Allocate").await,
        BenchCommand::Preferred(a) => load_cmd(ctx, a, "GetPreferredAllocation").await,
        BenchCommand::ListAndWatch(a) => load_cmd(ctx, a, "ListAndWatch").await,
        BenchCommand::Watch(a) => watch_cmd(ctx, a).await,
        BenchCommand::Kubelet(a) => kubelet_cmd(ctx, a).await,
    }
}
