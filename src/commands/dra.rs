//! `dpctl dra …`: the same client commands for DRA kubelet plugins as for
//! device plugins (GetInfo, probe, prepare, unprepare, health, list), the
//! simulated driver (`dra serve`) and its live control (`dra device`).
//! SOCKET is a plugin's registration socket (its GetInfo names the service
//! endpoint, and the kubelet's choice of service is used) or its service
//! socket; bare names are looked up in `<kubelet-root>/plugins_registry/`
//! and `<kubelet-root>/plugins/*/`.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::dra_health_v1::DeviceHealth;
use crate::api::dra_v1::{Claim, NodePrepareResourcesResponse};
use crate::api::pluginregistration::PluginInfo;
use crate::cli::positive_duration_arg;
use crate::client::dra::{resolve, DraConn, HealthStream};
use crate::core::log::{LogFormat, Logger};
use crate::core::time::{format_duration, millis};
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::plugin::dra::driver::{ControlAnswer, ControlRequest};
use crate::plugin::dra::{Config, CONTROL_DIR, CONTROL_PREFIX};
use crate::protocol::dra::{
    self as rules, health_word, Severity, Violation, DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1,
};
use crate::render::checks::{report, Check, Status};
use crate::render::{emit, json_line, structured, table, Format};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `dpctl dra`: its surface.
pub const COMMAND: Spec = Spec {
    name: "dra",
    about: "DRA kubelet plugins: info, probe, prepare, unprepare, health, list; a simulated driver (serve)",
    args: surface::subcommands::<DraCommand>,
    examples: EXAMPLES,
    sockets: &[Socket::Registry(&["info", "probe", "prepare", "unprepare", "health"])],
    refuses_output: None,
    parse: surface::parse::<DraCommand>,
};

const EXAMPLES: &str = "Examples:
  # Which DRA drivers are registered on this node, and are they live?
  dpctl dra list
  # Check a driver against the kubelet's rules, preparing a throwaway claim
  dpctl dra probe gpu.example.com-reg.sock --prepare
  # A simulated driver in a temp kubelet root, for tests and demos
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi";

const INFO_EXAMPLES: &str = "Examples:
  dpctl dra info gpu.example.com-reg.sock
  dpctl dra info /var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock -o json";

const PROBE_EXAMPLES: &str = "Examples:
  # registration rules, the endpoint, each advertised service, the health stream
  dpctl dra probe gpu.example.com-reg.sock
  # also prepare (twice) and unprepare a throwaway claim; resolve its CDI IDs
  dpctl dra probe gpu.example.com-reg.sock --prepare --cdi-spec-dir /var/run/cdi
  # the service socket directly (no GetInfo): v1 and v1beta1 are tried
  dpctl dra probe /var/lib/kubelet/plugins/gpu.example.com/dra.sock -o json";

const PREPARE_EXAMPLES: &str = "Examples:
  dpctl dra prepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001
  # two claims, called twice (idempotence), CDI IDs resolved, on the deprecated v1beta1 service
  dpctl dra prepare dra.sock --claim ml/a/uid-a --claim ml/b/uid-b --twice --cdi-spec-dir /var/run/cdi --service v1beta1";

const UNPREPARE_EXAMPLES: &str = "Examples:
  dpctl dra unprepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001";

const HEALTH_EXAMPLES: &str = "Examples:
  # the health table, then a line per change
  dpctl dra health gpu.example.com-reg.sock
  # one JSON object per snapshot, on the v1alpha1 service, stop after 3
  dpctl dra health gpu.example.com-reg.sock --service v1alpha1 -o json --count 3";

const LIST_EXAMPLES: &str = "Examples:
  dpctl dra list
  dpctl --kubelet-root-dir /var/lib/rancher/k3s/agent/kubelet dra list -o json";

const SERVE_EXAMPLES: &str = "Examples:
  # a driver with 4 devices under a temp kubelet root; CDI specs per prepared claim in /tmp/k/cdi
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi
  # a second instance during a rolling update (uid-named sockets)
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --rolling-update 2 --cdi-dir /tmp/k/cdi
  # break a rule on purpose: dra probe flags it
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --fault missing-uid --fault long-message";

const DEVICE_EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-1 Unhealthy --message 'ECC errors'";

const DEVICE_LIST_EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list -o json";

const DEVICE_SET_HEALTH_EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 dev-1 Unhealthy --message 'XID 79'
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 Healthy --driver gpu.example.com";

/// `dpctl dra …`
#[derive(Debug, Subcommand)]
pub enum DraCommand {
    /// Call GetInfo on a DRA plugin's registration socket
    #[command(after_help = INFO_EXAMPLES)]
    Info(DraSocket),
    /// One-shot check of a DRA plugin against the kubelet's rules: PASS/WARN/FAIL per rule
    #[command(after_help = PROBE_EXAMPLES)]
    Probe(DraProbeArgs),
    /// Call NodePrepareResources for one or more claims and check the answer
    #[command(after_help = PREPARE_EXAMPLES)]
    Prepare(DraClaimsArgs),
    /// Call NodeUnprepareResources for one or more claims
    #[command(after_help = UNPREPARE_EXAMPLES)]
    Unprepare(DraClaimsArgs),
    /// Watch a DRA plugin's device health (NodeWatchResources): a table, then a line per change
    #[command(after_help = HEALTH_EXAMPLES)]
    Health(DraHealthArgs),
    /// List the DRA plugins registered under the kubelet's root: driver, endpoint, versions, live or stale
    #[command(after_help = LIST_EXAMPLES)]
    List,
    /// Serve a simulated DRA driver's kubelet plugin, registered through the plugin watcher
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<DraServeArgs>),
    /// Show or change the devices of a running `dpctl dra serve` (live control)
    #[command(subcommand)]
    #[command(after_help = DEVICE_EXAMPLES)]
    Device(DraDeviceCommand),
}

/// A DRA plugin socket.
#[derive(Debug, Args)]
pub struct DraSocket {
    /// Registration or service socket (a bare name is looked up in plugins_registry/ and plugins/*/)
    #[arg(value_name = "SOCKET", help = crate::help::DRA_SOCKET_HELP)]
    pub socket: PathBuf,
}

/// `dpctl dra probe`
#[derive(Debug, Args)]
pub struct DraProbeArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// Also prepare a throwaway claim (twice, for idempotence), resolve its CDI IDs, then unprepare it
    #[arg(long)]
    pub prepare: bool,
    /// With --prepare: resolve CDI IDs in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR", requires = "prepare")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Wait up to this long for the socket to appear and answer before checking (for CI right after starting a driver)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

/// `dpctl dra prepare|unprepare`
#[derive(Debug, Args)]
pub struct DraClaimsArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// A claim as NAMESPACE/NAME/UID (repeatable)
    #[arg(long = "claim", value_name = "NS/NAME/UID", required = true, value_parser = crate::client::dra::parse_claim)]
    pub claims: Vec<crate::api::dra_v1::Claim>,
    /// The service to call: v1 or v1beta1 [default: the kubelet's choice from GetInfo, else v1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1beta1"])]
    pub service: Option<String>,
    /// prepare: call twice and check both answers are the same (the kubelet repeats calls)
    #[arg(long)]
    pub twice: bool,
    /// prepare: resolve the CDI IDs of the answer in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
}

/// `dpctl dra health`
#[derive(Debug, Args)]
pub struct DraHealthArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// The health service: v1 or v1alpha1 [default: the kubelet's choice from GetInfo, else v1 then v1alpha1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1alpha1"])]
    pub service: Option<String>,
    /// Stop after this many snapshots
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// `dpctl dra serve`
#[derive(Debug, Args)]
pub struct DraServeArgs {
    /// The driver name (a lowercase DNS subdomain, e.g. gpu.example.com)
    #[arg(long, value_name = "NAME")]
    pub driver: String,
    /// The pool the devices are in
    #[arg(long, value_name = "NAME", default_value = "pool-0")]
    pub pool: String,
    /// How many devices (named dev-0, dev-1, …)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub devices: u32,
    /// Where to write a CDI spec per prepared claim (removed on unprepare) [default: /var/run/cdi under --root]
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Option<PathBuf>,
    /// The services to serve and list in supported_versions, in order
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values_t = [crate::protocol::dra::DRA_V1.to_string(), crate::protocol::dra::DRA_V1BETA1.to_string(), crate::protocol::dra::HEALTH_V1.to_string(), crate::protocol::dra::HEALTH_V1ALPHA1.to_string()])]
    pub services: Vec<String>,
    /// Do not create the plugin-watcher registration socket (serve the service socket only)
    #[arg(long)]
    pub no_register: bool,
    /// Rolling-update mode: sockets <driver>-UID-reg.sock and dra-UID.sock, so two instances serve at once
    #[arg(long, value_name = "UID")]
    pub rolling_update: Option<String>,
    /// health_check_timeout_seconds sent for each device (0: the kubelet's default)
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub health_timeout: i64,
    /// Break one rule on purpose (repeatable): wrong-type, bad-driver-name, relative-endpoint,
    /// endpoint-outside-root, long-endpoint, no-versions, v1beta1-first, dead-endpoint, unserved-v1,
    /// slow=DURATION, missing-uid, extra-uid, no-pool-name, bad-cdi-id, not-idempotent, ignore-allocation, unserved-health,
    /// health-stream-end, health-bad-device, long-message, no-timestamp, prepare-error=MESSAGE
    #[arg(long = "fault", value_name = "FAULT")]
    pub faults: Vec<crate::plugin::dra::Fault>,
    /// Publish the devices as a ResourceSlice to the API server of this kubeconfig (plain http:// only)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The node the ResourceSlice names [default: this host's name]
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// The live-control socket [default: <kubelet-root>/plugins/<driver>/dpctl-control/dra-<pid>.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// Which running `dpctl dra serve` to control.
#[derive(Debug, Args)]
pub struct DraControlTarget {
    /// The driver whose serve to control (needed when several run)
    #[arg(long, value_name = "NAME")]
    pub driver: Option<String>,
    /// A specific control socket [default: found in <kubelet-root>/plugins/*/dpctl-control/]
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

/// `dpctl dra device …`
#[derive(Debug, Subcommand)]
pub enum DraDeviceCommand {
    /// List the devices and prepared claims of a running dpctl dra serve
    #[command(after_help = DEVICE_LIST_EXAMPLES)]
    List(#[command(flatten)] DraControlTarget),
    /// Set devices Healthy, Unhealthy or Unknown: names, then the health
    #[command(override_usage = "dpctl dra device set-health [OPTIONS] DEVICE... HEALTH")]
    #[command(after_help = DEVICE_SET_HEALTH_EXAMPLES)]
    SetHealth {
        /// Device names, then the health: Healthy, Unhealthy or Unknown (the last word)
        #[arg(value_name = "DEVICE", num_args = 2.., required = true)]
        args: Vec<String>,
        /// The health message (at most 1024 characters reach the kubelet unchanged)
        #[arg(long, value_name = "TEXT")]
        message: Option<String>,
        #[command(flatten)]
        /// Which serve.
        target: DraControlTarget,
    },
}

impl Invocation for DraCommand {
    fn workers(&self) -> usize {
        match self {
            DraCommand::Serve(_) => 1,
            _ => 0,
        }
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Run a `dpctl dra` command.
pub async fn run(ctx: &Ctx, c: &DraCommand) -> Result<()> {
    match c {
        DraCommand::Info(a) => info(ctx, a).await,
        DraCommand::Probe(a) => probe(ctx, a).await,
        DraCommand::Prepare(a) => prepare(ctx, a).await,
        DraCommand::Unprepare(a) => unprepare(ctx, a).await,
        DraCommand::Health(a) => health(ctx, a).await,
        DraCommand::List => list(ctx).await,
        DraCommand::Serve(a) => serve(ctx, a).await,
        DraCommand::Device(d) => device(ctx, d).await,
    }
}

/// The kubelet's root as the host names it (what endpoints are checked against).
fn host_kubelet_root(ctx: &Ctx) -> PathBuf {
    ctx.paths.root.on_host(&ctx.paths.kubelet_root)
}

/// A plugin reached through SOCKET: its registration (if SOCKET is one) and its service socket.
struct Target {
    socket: PathBuf,
    info: Option<PluginInfo>,
    service: DraConn,
}

impl Target {
    fn advertised(&self) -> &[String] {
        self.info.as_ref().map(|i| i.supported_versions.as_slice()).unwrap_or(&[])
    }
}

/// GetInfo on `conn`: `Ok(None)` when the socket serves no Registration service (a service socket).
async fn try_info(conn: &DraConn) -> Result<Option<PluginInfo>> {
    match conn.info().await {
        Ok(i) => Ok(Some(i)),
        Err(e) if e.code() == Some(tonic::Code::Unimplemented) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The endpoint of a GetInfo answer, as seen here.
fn endpoint_here(ctx: &Ctx, info: &PluginInfo, reg: &Path) -> Result<PathBuf> {
    if info.endpoint.is_empty() {
        return Ok(reg.to_path_buf());
    }
    if !Path::new(&info.endpoint).is_absolute() {
        return Err(Error::failed(format!(
            "{}: GetInfo endpoint {} is not an absolute path; the kubelet rejects it (fix the driver)",
            reg.display(),
            crate::core::text::quote(&info.endpoint)
        )));
    }
    Ok(ctx.paths.host(Path::new(&info.endpoint)))
}

async fn target(ctx: &Ctx, socket: &Path) -> Result<Target> {
    let path = resolve(&ctx.paths, socket);
    let conn = DraConn::connect(&path, ctx.timeout).await?;
    match try_info(&conn).await? {
        None => Ok(Target { socket: path, info: None, service: conn }),
        Some(info) => {
            let ep = endpoint_here(ctx, &info, &path)?;
            let service = if ep == path { conn } else { DraConn::connect(&ep, ctx.timeout).await? };
            Ok(Target { socket: path, info: Some(info), service })
        }
    }
}

/// The DRAPlugin service to call: the flag, else the kubelet's choice, else v1.
fn dra_service(flag: Option<&str>, advertised: &[String]) -> Result<&'static str> {
    match flag {
        Some("v1beta1") => Ok(DRA_V1BETA1),
        Some(_) => Ok(DRA_V1),
        None if advertised.is_empty() => Ok(DRA_V1),
        None => rules::chosen_service(advertised).ok_or_else(|| {
            Error::failed(format!(
                "the plugin advertises no DRAPlugin service the kubelet speaks ({}); pass --service to call one anyway",
                crate::core::text::id_list(advertised)
            ))
        }),
    }
}

async fn info(ctx: &Ctx, a: &DraSocket) -> Result<()> {
    let path = resolve(&ctx.paths, &a.socket);
    let conn = DraConn::connect(&path, ctx.timeout).await?;
    let info = match conn.info().await {
        Err(e) if e.code() == Some(tonic::Code::Unimplemented) => {
            return Err(Error::failed(format!(
                "{}: not a registration socket (no GetInfo); it may be the service socket — try dpctl dra probe",
                path.display()
            )))
        }
        r => r?,
    };
    match ctx.format {
        Format::Table => emit(&table(
            &["TYPE", "NAME", "ENDPOINT", "SUPPORTED VERSIONS"],
            &[vec![info.r#type.clone(), info.name.clone(), info.endpoint.clone(), info.supported_versions.join(",")]],
        )),
        f => emit(&structured(f, &info)?),
    }
}

struct Checks(Vec<Check>);

impl Checks {
    fn add(&mut self, name: &'static str, status: Status, latency: Option<Duration>, detail: impl Into<String>) {
        self.0.push(Check { name, status, latency_ms: latency.map(millis), detail: detail.into() });
    }

    /// One row per violation, or a PASS row per rule in `rules` that holds.
    fn rules(&mut self, checked: &[&'static rules::Rule], v: &[Violation], pass: &str) {
        for r in checked {
            let mine: Vec<&Violation> = v.iter().filter(|x| x.rule.id == r.id).collect();
            if mine.is_empty() {
                self.add(r.id, Status::Pass, None, pass.to_string());
            }
            // One row per rule: its first few violations, then how many more.
            if let Some(x) = mine.first() {
                let st = if x.rule.severity == Severity::Fail { Status::Fail } else { Status::Warn };
                let mut detail = mine.iter().take(3).map(|x| x.detail.as_str()).collect::<Vec<_>>().join("; ");
                if mine.len() > 3 {
                    detail.push_str(&format!("; +{} more", mine.len() - 3));
                }
                self.add(r.id, st, None, format!("{detail}; fix: {}", x.rule.fix));
            }
        }
    }
}

async fn probe(ctx: &Ctx, a: &DraProbeArgs) -> Result<()> {
    let mut c = Checks(Vec::new());
    let path = resolve(&ctx.paths, &a.socket.socket);
    probe_checks(ctx, a, &path, &mut c).await;
    report(ctx.format, path.display().to_string(), c.0)
}

/// `--wait`: until the socket exists and answers GetInfo (a registration
/// socket) or any call (a service socket), or `wait` has passed: then the
/// checks run and report what is wrong.
async fn wait_ready(ctx: &Ctx, path: &Path, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return;
        }
        if let Ok(c) = DraConn::connect(path, left.min(ctx.timeout)).await {
            match c.info().await {
                Ok(_) => return,
                Err(e) if e.code().is_some() => return, // it answers (a service socket: Unimplemented)
                Err(_) => {}
            }
        }
        tokio::time::sleep_until((tokio::time::Instant::now() + Duration::from_millis(100)).min(deadline)).await;
    }
}

async fn probe_checks(ctx: &Ctx, a: &DraProbeArgs, path: &Path, c: &mut Checks) {
    if let Some(w) = a.wait {
        let t = Instant::now();
        wait_ready(ctx, path, w).await;
        c.add("wait", Status::Pass, Some(t.elapsed()), format!("waited up to {} for the socket", format_duration(w)));
    }
    let t = Instant::now();
    let conn = match DraConn::connect(path, ctx.timeout).await {
        Ok(x) => x,
        Err(e) => return c.add("connect", Status::Fail, Some(t.elapsed()), e.to_string()),
    };
    c.add("connect", Status::Pass, Some(t.elapsed()), path.display().to_string());
    let t = Instant::now();
    let info = match try_info(&conn).await {
        Err(e) => return c.add("get-info", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(None) => {
            c.add(
                "get-info",
                Status::Pass,
                Some(t.elapsed()),
                "a service socket (no Registration service): registration rules are checked on the registration socket",
            );
            None
        }
        Ok(Some(i)) => {
            c.add(
                "get-info",
                Status::Pass,
                Some(t.elapsed()),
                format!(
                    "type={} name={} endpoint={} versions={}",
                    i.r#type,
                    i.name,
                    i.endpoint,
                    i.supported_versions.join(",")
                ),
            );
            Some(i)
        }
    };
    let service = match &info {
        None => conn,
        Some(i) => {
            let v = rules::info_violations(i, &host_kubelet_root(ctx));
            c.rules(
                &[
                    &rules::TYPE,
                    &rules::DRIVER_NAME,
                    &rules::ENDPOINT_ABSOLUTE,
                    &rules::ENDPOINT_INSIDE_ROOT,
                    &rules::ENDPOINT_LENGTH,
                    &rules::VERSIONS,
                    &rules::VERSION_ORDER,
                ],
                &v,
                "ok",
            );
            // A relative endpoint is rejected before the kubelet dials (endpoint-absolute says so).
            let Ok(ep) = endpoint_here(ctx, i, path) else { return };
            let t = Instant::now();
            match DraConn::connect(&ep, ctx.timeout).await {
                Ok(s) => {
                    c.add(rules::ENDPOINT_REACHABLE.id, Status::Pass, Some(t.elapsed()), ep.display().to_string());
                    s
                }
                Err(e) => {
                    return c.add(
                        rules::ENDPOINT_REACHABLE.id,
                        Status::Fail,
                        Some(t.elapsed()),
                        format!("{e}; fix: {}", rules::ENDPOINT_REACHABLE.fix),
                    )
                }
            }
        }
    };
    let advertised: Vec<String> = info.as_ref().map(|i| i.supported_versions.clone()).unwrap_or_default();
    // Each advertised DRAPlugin service answers an empty NodePrepareResources.
    let mut to_call: Vec<&'static str> =
        rules::KUBELET_DRA_SERVICES.iter().copied().filter(|s| advertised.iter().any(|a| a == s)).collect();
    if info.is_none() {
        to_call = vec![DRA_V1, DRA_V1BETA1];
    }
    let mut answering = Vec::new();
    for svc in &to_call {
        let t = Instant::now();
        match service.prepare(svc, vec![]).await {
            Ok(resp) => {
                answering.push(*svc);
                let v = rules::prepare_violations(&[], &resp);
                if v.is_empty() {
                    c.add(
                        rules::SERVICE_ANSWERS.id,
                        Status::Pass,
                        Some(t.elapsed()),
                        format!("{svc}: empty NodePrepareResources answered"),
                    );
                } else {
                    c.rules(&[&rules::ANSWER_EXTRA], &v, "");
                }
            }
            Err(e) if info.is_none() && e.code() == Some(tonic::Code::Unimplemented) => {
                // Fine as long as the other version answers (checked below).
                c.add(rules::SERVICE_ANSWERS.id, Status::Pass, Some(t.elapsed()), format!("{svc}: not served here"));
            }
            Err(e) => c.add(
                rules::SERVICE_ANSWERS.id,
                Status::Fail,
                Some(t.elapsed()),
                format!("{svc}: {e}; fix: {}", rules::SERVICE_ANSWERS.fix),
            ),
        }
    }
    if info.is_none() && answering.is_empty() {
        c.add(rules::SERVICE_ANSWERS.id, Status::Fail, None, "neither v1 nor v1beta1 DRAPlugin is served here");
    }
    if a.prepare {
        match dra_service(None, &advertised).ok().filter(|s| answering.contains(s)).or(answering.first().copied()) {
            None => c.add("prepare", Status::Fail, None, "no DRAPlugin service answers: nothing to prepare with"),
            Some(svc) => probe_prepare(ctx, a, &service, svc, c).await,
        }
    }
    probe_health(ctx, &service, &advertised, info.is_none(), c).await;
}

async fn probe_prepare(ctx: &Ctx, a: &DraProbeArgs, service: &DraConn, svc: &str, c: &mut Checks) {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let claim = Claim {
        namespace: "dpctl-probe".into(),
        name: "probe".into(),
        uid: format!("dpctl-probe-{}-{nanos}", std::process::id()),
    };
    let uids = vec![claim.uid.clone()];
    let t = Instant::now();
    let first = match service.prepare(svc, vec![claim.clone()]).await {
        Err(e) => return c.add("prepare", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(r) => r,
    };
    let v = rules::prepare_violations(&uids, &first);
    match first.claims.get(&claim.uid) {
        Some(r) if !r.error.is_empty() => {
            c.add("prepare", Status::Fail, Some(t.elapsed()), format!("claim {}: {}", claim.uid, r.error))
        }
        Some(r) => c.add(
            "prepare",
            Status::Pass,
            Some(t.elapsed()),
            format!("{svc}: {} device(s): {}", r.devices.len(), devices_text(&r.devices)),
        ),
        None => {}
    }
    c.rules(&[&rules::ANSWER_COMPLETE, &rules::ANSWER_EXTRA, &rules::DEVICE_FIELDS, &rules::CDI_ID], &v, "ok");
    let ids: Vec<String> =
        first.claims.values().flat_map(|r| &r.devices).flat_map(|d| d.cdi_device_ids.clone()).collect();
    if !ids.is_empty() {
        let dirs = ctx.paths.cdi_spec_dirs(&a.cdi_spec_dir);
        let (reg, bad) = crate::doctor::cdi::check(&dirs, &ids);
        let no_specs_here = a.cdi_spec_dir.is_empty() && !dirs.iter().any(|d| d.is_dir());
        if bad.is_empty() {
            c.add("cdi", Status::Pass, None, format!("{} resolve(s) in {} spec(s)", ids.join(","), reg.specs));
        } else if no_specs_here {
            // Not a node with CDI specs (a workstation): say so, do not fail.
            let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            c.add(
                "cdi",
                Status::Warn,
                None,
                format!(
                    "{} cannot be resolved here: no CDI spec directory ({}); on a node this fails the container (pass --cdi-spec-dir)",
                    ids.join(","),
                    shown.join(", ")
                ),
            );
        } else {
            c.add(
                "cdi",
                Status::Fail,
                None,
                format!("unresolvable CDI devices (the runtime fails the container): {}", bad.join("; ")),
            );
        }
    }
    let t = Instant::now();
    match service.prepare(svc, vec![claim.clone()]).await {
        Err(e) => c.add(rules::IDEMPOTENT.id, Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(second) if rules::same_answer(&first, &second) => {
            c.add(rules::IDEMPOTENT.id, Status::Pass, Some(t.elapsed()), "a second prepare gave the same answer")
        }
        Ok(second) => c.add(
            rules::IDEMPOTENT.id,
            Status::Fail,
            Some(t.elapsed()),
            format!(
                "a second prepare answered differently ({} vs {}); fix: {}",
                answer_text(&first),
                answer_text(&second),
                rules::IDEMPOTENT.fix
            ),
        ),
    }
    let t = Instant::now();
    match service.unprepare(svc, vec![claim.clone()]).await {
        Err(e) => c.add("unprepare", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(r) => {
            let v = rules::unprepare_violations(&uids, &r);
            match r.claims.get(&claim.uid) {
                Some(x) if !x.error.is_empty() => c.add("unprepare", Status::Fail, Some(t.elapsed()), x.error.clone()),
                Some(_) => c.add("unprepare", Status::Pass, Some(t.elapsed()), "the probe claim was unprepared"),
                None => c.rules(&[&rules::ANSWER_COMPLETE], &v, ""),
            }
        }
    }
}

fn devices_text(d: &[crate::api::dra_v1::Device]) -> String {
    d.iter()
        .map(|d| format!("{}/{} [{}]", d.pool_name, d.device_name, d.cdi_device_ids.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn answer_text(r: &NodePrepareResourcesResponse) -> String {
    r.claims.values().map(|c| devices_text(&c.devices)).collect::<Vec<_>>().join("; ")
}

async fn probe_health(ctx: &Ctx, service: &DraConn, advertised: &[String], unregistered: bool, c: &mut Checks) {
    let candidates: Vec<&'static str> = match rules::chosen_health(advertised) {
        Some(h) => vec![h],
        None if unregistered => vec![HEALTH_V1, HEALTH_V1ALPHA1],
        None => {
            return c.add(
                rules::HEALTH_ANSWERS.id,
                Status::Pass,
                None,
                "no health service advertised: the kubelet does not watch device health",
            )
        }
    };
    for svc in candidates {
        let t = Instant::now();
        let first = async {
            let mut s = service.health(svc).await?;
            let snap = s.next(service.socket()).await?;
            Ok::<_, Error>((s, snap))
        };
        let (mut stream, snap) = match tokio::time::timeout(ctx.timeout, first).await {
            Err(_) => {
                return c.add(
                    rules::HEALTH_ANSWERS.id,
                    Status::Fail,
                    Some(t.elapsed()),
                    format!("{svc}: no snapshot within {}", format_duration(ctx.timeout)),
                )
            }
            Ok(Err(e)) if unregistered && e.code() == Some(tonic::Code::Unimplemented) => continue,
            Ok(Err(e)) => {
                return c.add(
                    rules::HEALTH_ANSWERS.id,
                    Status::Fail,
                    Some(t.elapsed()),
                    format!("{svc}: {e}; fix: {}", rules::HEALTH_ANSWERS.fix),
                )
            }
            Ok(Ok((_, None))) => {
                return c.add(
                    rules::HEALTH_ANSWERS.id,
                    Status::Fail,
                    Some(t.elapsed()),
                    format!("{svc}: the stream ended before a snapshot"),
                )
            }
            Ok(Ok((s, Some(snap)))) => (s, snap),
        };
        let unhealthy =
            snap.iter().filter(|d| d.health != crate::api::dra_health_v1::HealthStatus::Healthy as i32).count();
        c.add(
            rules::HEALTH_ANSWERS.id,
            Status::Pass,
            Some(t.elapsed()),
            format!("{svc}: first snapshot: {} device(s), {} not healthy", snap.len(), unhealthy),
        );
        let v = rules::health_violations(&snap, crate::plugin::dra::driver::now_secs());
        c.rules(&[&rules::HEALTH_DEVICE, &rules::HEALTH_MESSAGE, &rules::HEALTH_TIME], &v, "ok");
        // The stream must stay open: an end within a short look is reported.
        let look = ctx.timeout.min(Duration::from_millis(500));
        match tokio::time::timeout(look, stream.next(service.socket())).await {
            Ok(Ok(None)) => c.add(
                rules::HEALTH_STREAM.id,
                Status::Warn,
                None,
                format!(
                    "{svc}: the plugin ended the stream after its first snapshot; fix: {}",
                    rules::HEALTH_STREAM.fix
                ),
            ),
            Ok(Err(e)) => c.add(rules::HEALTH_STREAM.id, Status::Warn, None, format!("{svc}: {e}")),
            _ => c.add(rules::HEALTH_STREAM.id, Status::Pass, None, format!("{svc}: open")),
        }
        return;
    }
    c.add(rules::HEALTH_ANSWERS.id, Status::Pass, None, "no health service served here");
}

/// `-o json` of prepare: the answer and the rules it breaks.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrepareOutput<'a> {
    socket: String,
    service: &'a str,
    claims: &'a BTreeMap<String, crate::api::dra_v1::NodePrepareResourceResponse>,
    violations: Vec<String>,
}

async fn prepare(ctx: &Ctx, a: &DraClaimsArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let svc = dra_service(a.service.as_deref(), t.advertised())?;
    let uids: Vec<String> = a.claims.iter().map(|c| c.uid.clone()).collect();
    let resp = t.service.prepare(svc, a.claims.clone()).await?;
    let mut v = rules::prepare_violations(&uids, &resp);
    if a.twice {
        let second = t.service.prepare(svc, a.claims.clone()).await?;
        if !rules::same_answer(&resp, &second) {
            v.push(Violation {
                rule: &rules::IDEMPOTENT,
                detail: format!("the second call answered {} (first: {})", answer_text(&second), answer_text(&resp)),
            });
        }
    }
    let mut problems: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    // CDI IDs must resolve to a spec, or the runtime fails the container (as probe --allocate checks).
    let ids: Vec<String> = resp
        .claims
        .values()
        .filter(|r| r.error.is_empty())
        .flat_map(|r| &r.devices)
        .flat_map(|d| d.cdi_device_ids.iter().filter(|id| rules::cdi_id_ok(id)).cloned())
        .collect();
    let dirs = ctx.paths.cdi_spec_dirs(&a.cdi_spec_dir);
    let (_, bad) = crate::doctor::cdi::check(&dirs, &ids);
    let mut notes = Vec::new();
    if !bad.is_empty() && a.cdi_spec_dir.is_empty() && !dirs.iter().any(|d| d.is_dir()) {
        // Not a node with CDI specs (a workstation): say so, do not fail.
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        notes.push(format!(
            "the CDI IDs cannot be resolved here: no CDI spec directory ({}); on a node unresolvable IDs fail the container (pass --cdi-spec-dir)",
            shown.join(", ")
        ));
    } else {
        problems.extend(bad.into_iter().map(|b| format!("unresolvable CDI device {b}")));
    }
    match ctx.format {
        Format::Table => {
            let mut rows = Vec::new();
            for c in &a.claims {
                match resp.claims.get(&c.uid) {
                    None => rows.push(vec![claim_text(c), "-".into(), "-".into(), "-".into(), "(no answer)".into()]),
                    Some(r) if !r.error.is_empty() => {
                        rows.push(vec![claim_text(c), "-".into(), "-".into(), "-".into(), r.error.clone()])
                    }
                    Some(r) if r.devices.is_empty() => rows.push(vec![
                        claim_text(c),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "prepared, no devices".into(),
                    ]),
                    Some(r) => {
                        for d in &r.devices {
                            rows.push(vec![
                                claim_text(c),
                                format!("{}/{}", d.pool_name, d.device_name),
                                if d.request_names.is_empty() { "*".into() } else { d.request_names.join(",") },
                                d.cdi_device_ids.join(","),
                                "prepared".into(),
                            ]);
                        }
                    }
                }
            }
            emit(&table(&["CLAIM", "DEVICE", "REQUESTS", "CDI DEVICE IDS", "RESULT"], &rows))?;
            for p in problems.iter().chain(&notes) {
                eprintln!("warning: {p}");
            }
        }
        f => emit(&structured(
            f,
            &PrepareOutput {
                socket: t.socket.display().to_string(),
                service: svc,
                claims: &resp.claims,
                violations: problems.clone(),
            },
        )?)?,
    }
    let failed: Vec<&String> = a
        .claims
        .iter()
        .filter_map(|c| resp.claims.get(&c.uid))
        .filter(|r| !r.error.is_empty())
        .map(|r| &r.error)
        .collect();
    let fatal = v.iter().any(|x| x.rule.severity == Severity::Fail) || problems.len() > v.len();
    if !failed.is_empty() {
        return Err(Error::failed(format!("{} of {} claim(s) failed to prepare", failed.len(), a.claims.len())));
    }
    if fatal {
        return Err(Error::failed(format!("the answer breaks the kubelet's rules: {}", problems.join("; "))));
    }
    Ok(())
}

fn claim_text(c: &Claim) -> String {
    format!("{}/{} ({})", c.namespace, c.name, c.uid)
}

async fn unprepare(ctx: &Ctx, a: &DraClaimsArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let svc = dra_service(a.service.as_deref(), t.advertised())?;
    let uids: Vec<String> = a.claims.iter().map(|c| c.uid.clone()).collect();
    let resp = t.service.unprepare(svc, a.claims.clone()).await?;
    let v = rules::unprepare_violations(&uids, &resp);
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = a
                .claims
                .iter()
                .map(|c| {
                    let r = match resp.claims.get(&c.uid) {
                        None => "(no answer)".to_string(),
                        Some(r) if r.error.is_empty() => "unprepared".into(),
                        Some(r) => r.error.clone(),
                    };
                    vec![claim_text(c), r]
                })
                .collect();
            emit(&table(&["CLAIM", "RESULT"], &rows))?;
            for x in &v {
                eprintln!("warning: {x}");
            }
        }
        f => emit(&structured(f, &resp)?)?,
    }
    let failed = resp.claims.values().filter(|r| !r.error.is_empty()).count();
    if failed > 0 {
        return Err(Error::failed(format!("{failed} of {} claim(s) failed to unprepare", a.claims.len())));
    }
    if v.iter().any(|x| x.rule.severity == Severity::Fail) {
        let t: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        return Err(Error::failed(format!("the answer breaks the kubelet's rules: {}", t.join("; "))));
    }
    Ok(())
}

/// One device's health as `dra health` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthRow {
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
    /// Healthy, Unhealthy or Unknown.
    pub health: String,
    /// Unix seconds.
    pub last_updated_time: i64,
    /// Seconds (0: the kubelet's default).
    pub health_check_timeout_seconds: i64,
    /// Message.
    pub message: String,
}

/// A health snapshot as rows.
pub fn health_rows(devices: &[DeviceHealth]) -> Vec<HealthRow> {
    devices
        .iter()
        .map(|d| {
            let (pool, device) =
                d.device.as_ref().map(|x| (x.pool_name.clone(), x.device_name.clone())).unwrap_or_default();
            HealthRow {
                pool,
                device,
                health: health_word(d.health).into(),
                last_updated_time: d.last_updated_time,
                health_check_timeout_seconds: d.health_check_timeout_seconds,
                message: d.message.clone(),
            }
        })
        .collect()
}

/// What changed between two snapshots: one line per device added, removed or changed.
pub fn health_diff(prev: &[HealthRow], now: &[HealthRow]) -> Vec<String> {
    let key = |r: &HealthRow| format!("{}/{}", r.pool, r.device);
    let old: BTreeMap<String, &HealthRow> = prev.iter().map(|r| (key(r), r)).collect();
    let new: BTreeMap<String, &HealthRow> = now.iter().map(|r| (key(r), r)).collect();
    let mut out = Vec::new();
    for (k, n) in &new {
        match old.get(k) {
            None => out.push(format!("+ {k} {}", n.health)),
            Some(o) if o.health != n.health || o.message != n.message => {
                let msg = if n.message.is_empty() { String::new() } else { format!(" ({})", n.message) };
                out.push(format!("~ {k} {} -> {}{msg}", o.health, n.health))
            }
            _ => {}
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(format!("- {k} (left out: the kubelet marks it Unknown after its timeout)"));
    }
    out
}

async fn health(ctx: &Ctx, a: &DraHealthArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let candidates: Vec<&str> = match (a.service.as_deref(), rules::chosen_health(t.advertised())) {
        (Some("v1alpha1"), _) => vec![HEALTH_V1ALPHA1],
        (Some(_), _) => vec![HEALTH_V1],
        (None, Some(h)) => vec![h],
        (None, None) if t.info.is_some() => {
            return Err(Error::failed(format!(
                "{}: the plugin advertises no health service ({}); pass --service to try one anyway",
                t.socket.display(),
                t.advertised().join(", ")
            )))
        }
        (None, None) => vec![HEALTH_V1, HEALTH_V1ALPHA1],
    };
    let mut stream: Option<HealthStream> = None;
    let mut last_err = None;
    for svc in &candidates {
        match t.service.health(svc).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some(mut stream) = stream else {
        return Err(last_err.unwrap_or_else(|| Error::failed("no health service")));
    };
    let mut prev: Option<Vec<HealthRow>> = None;
    let mut n = 0u64;
    loop {
        let snap = tokio::select! {
            s = stream.next(t.service.socket()) => s?,
            _ = crate::core::interrupted() => return Ok(()),
        };
        let Some(snap) = snap else {
            return Err(Error::failed(format!(
                "{}: the plugin ended the health stream (the kubelet reopens it after 5s)",
                t.service.socket().display()
            )));
        };
        let rows = health_rows(&snap);
        n += 1;
        match (ctx.format, &prev) {
            (Format::Table, None) => {
                let r: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.pool.clone(),
                            r.device.clone(),
                            crate::render::health(&r.health),
                            crate::render::epoch_age(r.last_updated_time, std::time::SystemTime::now()),
                            if r.health_check_timeout_seconds > 0 {
                                format!("{}s", r.health_check_timeout_seconds)
                            } else {
                                "-".into()
                            },
                            r.message.clone(),
                        ]
                    })
                    .collect();
                emit(&table(&["POOL", "DEVICE", "HEALTH", "UPDATED", "TIMEOUT", "MESSAGE"], &r))?;
            }
            (Format::Table, Some(p)) => {
                for line in health_diff(p, &rows) {
                    emit(&line)?;
                }
            }
            (Format::Json, _) => emit(&json_line(&serde_json::json!({"devices": rows}))?)?,
            (f, _) => emit(&structured(f, &serde_json::json!({"devices": rows}))?)?,
        }
        prev = Some(rows);
        if a.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

/// One registered DRA plugin, as `dra list` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// The driver name (empty when GetInfo failed).
    pub driver: String,
    /// The registration socket.
    pub registration: String,
    /// The endpoint from GetInfo.
    pub endpoint: String,
    /// supported_versions.
    pub versions: Vec<String>,
    /// live, or stale with why.
    pub state: String,
}

/// Every DRA plugin registered under the kubelet's root (and every socket that does not answer).
pub async fn list_plugins(ctx: &Ctx) -> Vec<Listed> {
    let dir = ctx.paths.plugins_registry_dir(None);
    let mut out = Vec::new();
    for sock in crate::core::transport::find_sockets(&dir) {
        let reg = sock.display().to_string();
        let conn = match DraConn::connect(&sock, ctx.timeout).await {
            Ok(c) => c,
            Err(e) => {
                out.push(Listed {
                    driver: String::new(),
                    registration: reg,
                    endpoint: String::new(),
                    versions: vec![],
                    state: format!("stale: {e}"),
                });
                continue;
            }
        };
        let info = match conn.info().await {
            Ok(i) => i,
            Err(e) => {
                out.push(Listed {
                    driver: String::new(),
                    registration: reg,
                    endpoint: String::new(),
                    versions: vec![],
                    state: format!("stale: {e}"),
                });
                continue;
            }
        };
        if info.r#type != rules::PLUGIN_TYPE {
            continue;
        }
        let state = match endpoint_here(ctx, &info, &sock) {
            Err(e) => format!("broken: {e}"),
            Ok(ep) => match DraConn::connect(&ep, ctx.timeout).await {
                Ok(_) => "live".to_string(),
                Err(e) => format!("stale: endpoint: {e}"),
            },
        };
        out.push(Listed {
            driver: info.name,
            registration: reg,
            endpoint: info.endpoint,
            versions: info.supported_versions,
            state,
        });
    }
    out
}

async fn list(ctx: &Ctx) -> Result<()> {
    let all = list_plugins(ctx).await;
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|l| {
                    vec![
                        if l.driver.is_empty() { "?".into() } else { l.driver.clone() },
                        l.registration.clone(),
                        l.endpoint.clone(),
                        l.versions.join(","),
                        l.state.clone(),
                    ]
                })
                .collect();
            emit(&table(&["DRIVER", "REGISTRATION", "ENDPOINT", "VERSIONS", "STATE"], &rows))
        }
        f => emit(&structured(f, &all)?),
    }
}

/// The driver's configuration from the command line.
pub fn config(ctx: &Ctx, a: &DraServeArgs) -> Result<Config> {
    let plugin_dir = ctx.paths.kubelet_root.join("plugins").join(&a.driver);
    let mut services = a.services.clone();
    services.dedup();
    for s in &services {
        if ![DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1].contains(&s.as_str()) {
            return Err(Error::usage(format!(
                "--services: {} is not one of {DRA_V1}, {DRA_V1BETA1}, {HEALTH_V1}, {HEALTH_V1ALPHA1}",
                crate::core::text::quote(s)
            )));
        }
    }
    Ok(Config {
        driver: a.driver.clone(),
        pool: a.pool.clone(),
        devices: (0..a.devices).map(|i| format!("dev-{i}")).collect(),
        kubelet_root: ctx.paths.kubelet_root.clone(),
        registry_dir: ctx.paths.plugins_registry_dir(None),
        control_socket: a.control_socket.as_ref().map(|p| ctx.paths.host(p)).unwrap_or_else(|| {
            plugin_dir.join(CONTROL_DIR).join(format!("{CONTROL_PREFIX}{}.sock", std::process::id()))
        }),
        plugin_dir,
        host_root: ctx.paths.root.clone(),
        cdi_dir: ctx.paths.host(a.cdi_dir.as_deref().unwrap_or(Path::new("/var/run/cdi"))),
        services,
        register: !a.no_register,
        rolling_uid: a.rolling_update.clone(),
        health_timeout_secs: a.health_timeout,
        faults: a.faults.clone(),
        publish: match &a.kubeconfig {
            None => None,
            Some(k) => {
                let api = crate::plugin::dra::slices::load_kubeconfig(k)?;
                let node = match &a.node_name {
                    Some(n) => n.clone(),
                    None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                        .map(|h| h.trim().to_string())
                        .ok()
                        .filter(|h| !h.is_empty())
                        .ok_or_else(|| Error::usage("--node-name: this host's name is unknown; name the node"))?,
                };
                Some((api, node))
            }
        },
    })
}

async fn serve(ctx: &Ctx, a: &DraServeArgs) -> Result<()> {
    if ctx.format != Format::Table {
        return Err(Error::usage(
            "-o is not supported here: dra serve logs events; use --log-format json for JSON lines",
        ));
    }
    let cfg = config(ctx, a)?;
    let log = Logger::new(a.log_format);
    let tasks = crate::core::task::Tasks::new();
    let r =
        crate::core::task::until_interrupted(&tasks, crate::plugin::dra::run(cfg, log.clone(), tasks.clone())).await;
    log.close(Duration::from_secs(2));
    r
}

/// The control sockets of running `dpctl dra serve` processes.
fn control_sockets(ctx: &Ctx, t: &DraControlTarget) -> Vec<PathBuf> {
    if let Some(p) = &t.control {
        return vec![ctx.paths.host(p)];
    }
    let plugins = ctx.paths.kubelet_root.join("plugins");
    let dirs: Vec<PathBuf> = match &t.driver {
        Some(d) => vec![plugins.join(d)],
        None => std::fs::read_dir(&plugins).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default(),
    };
    let mut out: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| crate::core::transport::find_sockets(&d.join(CONTROL_DIR)))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(CONTROL_PREFIX)))
        .collect();
    out.sort();
    out
}

async fn device(ctx: &Ctx, d: &DraDeviceCommand) -> Result<()> {
    let (target, req) = match d {
        DraDeviceCommand::List(t) => (t, ControlRequest { op: "list".into(), ..Default::default() }),
        DraDeviceCommand::SetHealth { args, message, target } => {
            let (health, devices) = args.split_last().ok_or_else(|| Error::usage("name devices, then a health"))?;
            if rules::parse_health(health).is_none() {
                return Err(Error::usage(format!(
                    "the last word must be the health (Healthy, Unhealthy or Unknown), not {}",
                    crate::core::text::quote(health)
                )));
            }
            (
                target,
                ControlRequest {
                    op: "set-health".into(),
                    devices: devices.to_vec(),
                    health: Some(health.clone()),
                    message: message.clone(),
                },
            )
        }
    };
    let socks = control_sockets(ctx, target);
    let mut answers = Vec::new();
    for s in &socks {
        match crate::plugin::control::send_as::<_, ControlAnswer>(s, &req, ctx.timeout).await {
            Ok(a) => answers.push(a),
            Err(_) if target.control.is_none() => {} // a stale socket of a serve that died
            Err(e) => return Err(e),
        }
    }
    let a = match answers.len() {
        0 => {
            return Err(Error::failed(format!(
                "no running dpctl dra serve found under {}/plugins/*/{CONTROL_DIR}/; pass --kubelet-root-dir, --driver or --control",
                ctx.paths.kubelet_root.display()
            )))
        }
        1 => answers.remove(0),
        _ if req.op == "list" => return show_devices(ctx, &answers),
        _ => {
            let names: Vec<String> = answers.iter().map(|a| a.driver.clone()).collect();
            return Err(Error::usage(format!("several dpctl dra serve run ({}); name one with --driver", names.join(", "))));
        }
    };
    if !a.ok {
        return Err(Error::failed(a.error.unwrap_or_else(|| "refused".into())));
    }
    show_devices(ctx, &[a])
}

fn show_devices(ctx: &Ctx, answers: &[ControlAnswer]) -> Result<()> {
    match ctx.format {
        Format::Table => {
            let mut rows = Vec::new();
            for a in answers {
                for d in &a.devices {
                    let claims: Vec<String> =
                        a.prepared.iter().filter(|p| p.devices.contains(&d.name)).map(|p| p.claim.clone()).collect();
                    rows.push(vec![
                        a.driver.clone(),
                        a.pool.clone(),
                        d.name.clone(),
                        crate::render::health(&d.health),
                        if claims.is_empty() { "-".into() } else { claims.join(",") },
                        d.message.clone(),
                    ]);
                }
            }
            emit(&table(&["DRIVER", "POOL", "DEVICE", "HEALTH", "PREPARED FOR", "MESSAGE"], &rows))
        }
        f => emit(&structured(f, &answers)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dev: &str, h: &str, msg: &str) -> HealthRow {
        HealthRow {
            pool: "p".into(),
            device: dev.into(),
            health: h.into(),
            last_updated_time: 1,
            health_check_timeout_seconds: 0,
            message: msg.into(),
        }
    }

    #[test]
    fn health_diffs_name_each_change() {
        let a = vec![row("d0", "Healthy", ""), row("d1", "Healthy", "")];
        let b = vec![row("d0", "Unhealthy", "ECC errors"), row("d2", "Healthy", "")];
        assert_eq!(
            health_diff(&a, &b),
            [
                "~ p/d0 Healthy -> Unhealthy (ECC errors)",
                "+ p/d2 Healthy",
                "- p/d1 (left out: the kubelet marks it Unknown after its timeout)"
            ]
        );
        assert!(health_diff(&a, &a).is_empty());
    }

    #[test]
    fn the_kubelets_choice_of_service_is_used_unless_one_is_named() {
        let adv = vec![DRA_V1BETA1.to_string(), DRA_V1.to_string()];
        assert_eq!(dra_service(None, &adv).unwrap(), DRA_V1BETA1);
        assert_eq!(dra_service(Some("v1"), &adv).unwrap(), DRA_V1);
        assert_eq!(dra_service(None, &[]).unwrap(), DRA_V1);
        assert!(dra_service(None, &[HEALTH_V1.to_string()]).unwrap_err().to_string().contains("--service"));
    }
}
