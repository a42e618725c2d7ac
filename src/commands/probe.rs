//! `dpctl probe SOCKET`: a one-shot health check of a plugin. Each check
//! prints PASS, WARN or FAIL with the latency of its call; exit 0 only if
//! nothing failed.

use super::shared::cdi;
use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse, ContainerPreferredAllocationRequest,
    DevicePluginOptions, ListAndWatchResponse, PreStartContainerRequest, PreferredAllocationRequest,
};
use crate::api::{HEALTHY, KUBELET_MAX_RECV};
use crate::cli::positive_duration_arg;
use crate::client::conn::{PluginConn, Update};
use crate::core::time::{format_duration, millis};
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::protocol::cdi as cdi_rules;
use crate::protocol::{deviceplugin, Severity, Violation};
use clap::Args;
use prost::Message;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `dpctl probe`: its surface.
pub const COMMAND: Spec = Spec {
    name: "probe",
    about: "One-shot health check of a device plugin: PASS/WARN/FAIL per check (DRA drivers: dra probe)",
    group: super::surface::Group::Plugin,
    args: surface::args::<ProbeArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<ProbeArgs>,
};

const EXAMPLES: &str = "Examples:
  # PASS/WARN/FAIL per check; exit 1 if anything failed
  dpctl probe nvidia-gpu.sock
  # CI: start the plugin, then wait up to 30s for its socket, and allocate a free device
  dpctl probe --plugin-dir /tmp/dp foo.sock --wait 30s --allocate -o json";

/// `dpctl probe`
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Also allocate one healthy device that no container holds (per PodResources) and check the
    /// response (and PreStartContainer if required)
    #[arg(long)]
    pub allocate: bool,
    /// With --allocate: a directory of CDI specs to resolve CDI names in (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR", requires = "allocate")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Wait up to this long for the socket to appear and answer before checking (for CI right after starting a plugin)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub wait: Option<Duration>,
    /// The kubelet's PodResources socket, to pick a free device for --allocate [default: as podresources]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
}

impl Invocation for ProbeArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

pub use crate::render::checks::{Check, Report, Status};

struct Probe {
    checks: Vec<Check>,
}

impl Probe {
    fn add(&mut self, name: &'static str, status: Status, latency: Option<Duration>, detail: impl Into<String>) {
        self.checks.push(Check { name, status, latency_ms: latency.map(millis), detail: detail.into() });
    }
}

/// `--wait`: until the socket exists, accepts and answers GetDevicePluginOptions
/// (or `wait` has passed: then the checks run and report what is wrong).
async fn wait_ready(ctx: &Ctx, socket: &std::path::Path, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let per = Ctx { timeout: left.min(ctx.timeout), ..ctx.clone() };
        if let Ok(c) = per.plugin(socket).await {
            if c.options().await.is_ok() {
                return;
            }
        }
        tokio::time::sleep_until((tokio::time::Instant::now() + POLL).min(deadline)).await;
    }
}

/// How often `--wait` looks again.
const POLL: Duration = Duration::from_millis(100);

/// The device `--allocate` takes: the first healthy one no container holds,
/// and what was known about it.
pub fn pick_free(healthy: &[String], held: Option<&HashSet<String>>) -> Option<(String, String)> {
    match held {
        None => healthy
            .first()
            .map(|id| (id.clone(), format!("{id} (PodResources not reachable: it may be in use by a pod)"))),
        Some(h) => healthy
            .iter()
            .find(|id| !h.contains(*id))
            .map(|id| (id.clone(), format!("{id} (held by no container, per PodResources)"))),
    }
}

/// Device IDs some container holds, per the PodResources socket (None when it does not answer).
async fn held_devices(ctx: &Ctx, a: &ProbeArgs) -> Option<HashSet<String>> {
    use crate::api::podresources::ListPodResourcesRequest;
    let socket = ctx.pod_resources(a.pod_resources_socket.as_ref());
    let mut c = crate::client::podresources::connect(&socket, ctx.timeout, super::INSPECT_MAX_RECV).await.ok()?;
    let resp = crate::core::transport::call(
        &socket,
        "List",
        ctx.timeout,
        c.list(crate::core::transport::request(ListPodResourcesRequest {}, ctx.timeout)),
    )
    .await
    .ok()?;
    Some(
        resp.pod_resources
            .iter()
            .flat_map(|p| &p.containers)
            .flat_map(|c| &c.devices)
            .flat_map(|d| d.device_ids.iter().cloned())
            .collect(),
    )
}

/// Run every check; stops early only when a later check cannot run.
async fn checks(ctx: &Ctx, a: &ProbeArgs, p: &mut Probe) {
    if let Some(w) = a.wait {
        let t = Instant::now();
        wait_ready(ctx, &ctx.paths.resolve_socket(&a.socket), w).await;
        p.add("wait", Status::Pass, Some(t.elapsed()), format!("waited up to {} for the socket", format_duration(w)));
    }
    let t = Instant::now();
    let conn = match ctx.plugin(&a.socket).await {
        Ok(c) => c,
        Err(e) => return p.add("connect", Status::Fail, Some(t.elapsed()), e.to_string()),
    };
    p.add("connect", Status::Pass, Some(t.elapsed()), conn.socket().display().to_string());

    let t = Instant::now();
    let opts = match conn.options().await {
        Ok(o) => o,
        Err(e) => return p.add("options", Status::Fail, Some(t.elapsed()), e.to_string()),
    };
    p.add(
        "options",
        Status::Pass,
        Some(t.elapsed()),
        format!(
            "pre_start_required={} get_preferred_allocation_available={}",
            opts.pre_start_required, opts.get_preferred_allocation_available
        ),
    );
    // The stream stays open while the later calls run, as the kubelet's does.
    let Some((snap, _stream)) = first_snapshot(ctx, &conn, p).await else { return };
    let healthy: Vec<String> = snap.devices.iter().filter(|d| d.health == HEALTHY).map(|d| d.id.clone()).collect();
    judge_snapshot(&snap, &healthy, p);
    if opts.get_preferred_allocation_available && !healthy.is_empty() {
        preferred(&conn, &healthy, p).await;
    }
    if a.allocate {
        allocate(ctx, a, &conn, &opts, &healthy, p).await;
    }
}

/// The first ListAndWatch snapshot, and the stream it came on.
async fn first_snapshot(
    ctx: &Ctx,
    conn: &PluginConn,
    p: &mut Probe,
) -> Option<(ListAndWatchResponse, crate::client::conn::ListAndWatch)> {
    let t = Instant::now();
    let first = async {
        let mut s = conn.list_and_watch().await?;
        match s.next().await? {
            Update::Snapshot(r) => Ok((r, s)),
            Update::Closed => Err(Error::failed("the plugin closed ListAndWatch before sending a snapshot")),
        }
    };
    let fail = |p: &mut Probe, detail: String| p.add("list-and-watch", Status::Fail, Some(t.elapsed()), detail);
    match tokio::time::timeout(ctx.timeout, first).await {
        Err(_) => fail(p, format!("no snapshot within {}", format_duration(ctx.timeout))),
        Ok(Err(e)) => fail(p, e.to_string()),
        Ok(Ok((snap, s))) => {
            let healthy = snap.devices.iter().filter(|d| d.health == HEALTHY).count();
            let detail = format!("first snapshot: {} device(s), {healthy} healthy", snap.devices.len());
            p.add("list-and-watch", Status::Pass, Some(t.elapsed()), detail);
            return Some((snap, s));
        }
    }
    None
}

/// The verdict of a rule's violations: FAIL if any fails, WARN if any warns.
fn status_of(v: &[Violation]) -> Status {
    match v.iter().map(|x| x.rule.severity).max() {
        Some(Severity::Fail) => Status::Fail,
        Some(Severity::Warn) => Status::Warn,
        None => Status::Pass,
    }
}

/// At most MAX_LIST violations, worst first, then "+N more": 100,000 bad IDs make one short line.
fn joined(v: &[Violation]) -> String {
    let mut sorted: Vec<&Violation> = v.iter().collect();
    sorted.sort_by_key(|x| std::cmp::Reverse(x.rule.severity));
    let max = crate::core::text::MAX_LIST;
    let mut s = sorted.iter().take(max).map(|x| x.to_string()).collect::<Vec<_>>().join("; ");
    if v.len() > max {
        s.push_str(&format!("; +{} more", v.len() - max));
    }
    s
}

/// The snapshot's size and devices, by the rulebook.
fn judge_snapshot(snap: &ListAndWatchResponse, healthy: &[String], p: &mut Probe) {
    let size = snap.encoded_len();
    match deviceplugin::snapshot_size(size, snap.devices.len()) {
        Some(v) => p.add("snapshot-size", status_of(std::slice::from_ref(&v)), None, v.to_string()),
        None => p.add(
            "snapshot-size",
            Status::Pass,
            None,
            format!("{size} bytes of {KUBELET_MAX_RECV}: within the kubelet's receive limit"),
        ),
    }
    let problems = deviceplugin::devices(&snap.devices);
    if !problems.is_empty() {
        p.add("devices", status_of(&problems), None, joined(&problems));
    } else if snap.devices.is_empty() {
        p.add("devices", Status::Warn, None, "the plugin advertises no devices");
    } else if healthy.is_empty() {
        p.add("devices", Status::Warn, None, "no device is Healthy: nothing can be allocated");
    } else {
        p.add("devices", Status::Pass, None, "IDs unique and non-empty, health strings exact");
    }
}

/// GetPreferredAllocation for up to 2 of the healthy devices, by the rulebook.
async fn preferred(conn: &PluginConn, healthy: &[String], p: &mut Probe) {
    let want = healthy.len().min(2);
    let creq = ContainerPreferredAllocationRequest {
        available_device_i_ds: healthy.to_vec(),
        must_include_device_i_ds: vec![],
        allocation_size: want as i32,
    };
    let t = Instant::now();
    match conn.preferred(PreferredAllocationRequest { container_requests: vec![creq.clone()] }).await {
        Err(e) => p.add("preferred", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(resp) => {
            let v = deviceplugin::preferred(&creq, &resp);
            let ids = resp.container_responses.first().map(|c| c.device_i_ds.join(",")).unwrap_or_default();
            let detail =
                if v.is_empty() { format!("asked for {want} of {}: got {ids}", healthy.len()) } else { joined(&v) };
            p.add("preferred", status_of(&v), Some(t.elapsed()), detail);
        }
    }
}

/// Allocate one free healthy device (and PreStartContainer it), by the rulebook.
async fn allocate(
    ctx: &Ctx,
    a: &ProbeArgs,
    conn: &PluginConn,
    opts: &DevicePluginOptions,
    healthy: &[String],
    p: &mut Probe,
) {
    if healthy.is_empty() {
        return p.add("allocate", Status::Fail, None, "no healthy device to allocate");
    }
    let held = held_devices(ctx, a).await;
    let Some((id, which)) = pick_free(healthy, held.as_ref()) else {
        return p.add(
            "allocate",
            Status::Warn,
            None,
            format!("skipped: all {} healthy device(s) are held by containers, per PodResources", healthy.len()),
        );
    };
    let t = Instant::now();
    let req = AllocateRequest { container_requests: vec![ContainerAllocateRequest { devices_ids: vec![id.clone()] }] };
    match conn.allocate(req).await {
        Err(e) => p.add("allocate", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(resp) => {
            let v = deviceplugin::allocate(1, &resp);
            let detail = match resp.container_responses.first() {
                Some(c) => format!(
                    "{which}: {} env, {} mount, {} device, {} annotation, {} CDI",
                    c.envs.len(),
                    c.mounts.len(),
                    c.devices.len(),
                    c.annotations.len(),
                    c.cdi_devices.len()
                ),
                None => which,
            };
            let detail = if v.is_empty() { detail } else { format!("{detail}: {}", joined(&v)) };
            p.add("allocate", status_of(&v), Some(t.elapsed()), detail);
            if let Some(c) = resp.container_responses.first() {
                cdi(ctx, a, c, p);
            }
        }
    }
    if opts.pre_start_required {
        let t = Instant::now();
        let got = conn.pre_start(PreStartContainerRequest { devices_ids: vec![id.clone()] }, ctx.timeout).await;
        let error = got.err().map(|e| e.go_text());
        match deviceplugin::pre_start(error.as_deref(), t.elapsed()) {
            Some(v) => p.add("pre-start", status_of(std::slice::from_ref(&v)), Some(t.elapsed()), v.to_string()),
            None => p.add("pre-start", Status::Pass, Some(t.elapsed()), id),
        }
    }
}

/// CDI names must resolve to a spec, or the runtime fails the container.
fn cdi(ctx: &Ctx, a: &ProbeArgs, c: &ContainerAllocateResponse, p: &mut Probe) {
    // Unqualified names are the allocate check's (the rulebook's allocate-cdi-name).
    let names: Vec<String> = cdi_rules::names(c).into_iter().filter(|n| cdi_rules::name_ok(n)).collect();
    if names.is_empty() {
        return;
    }
    let dirs = ctx.paths.cdi_spec_dirs(&a.cdi_spec_dir);
    let (status, detail) = cdi::resolve(&dirs, !a.cdi_spec_dir.is_empty(), &names).check(&names, &dirs);
    p.add("cdi", status, None, detail);
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &ProbeArgs) -> Result<()> {
    let mut p = Probe { checks: Vec::new() };
    checks(ctx, a, &mut p).await;
    let socket = ctx.paths.resolve_socket(&a.socket).display().to_string();
    report(ctx, socket, p.checks)
}

/// Print a probe report (the PASS/WARN/FAIL table, or `-o json|yaml`); an
/// error naming the failed checks when any failed.
pub fn report(ctx: &Ctx, socket: String, checks: Vec<Check>) -> Result<()> {
    crate::render::checks::report(ctx.format, socket, checks)
}
