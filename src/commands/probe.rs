//! `dpctl probe SOCKET`: a one-shot health check of a plugin. Each check
//! prints PASS, WARN or FAIL with the latency of its call; exit 0 only if
//! nothing failed.

use super::Ctx;
use crate::api::deviceplugin::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest, PreStartContainerRequest,
    PreferredAllocationRequest,
};
use crate::api::{HEALTHY, KUBELET_MAX_RECV};
use crate::cli::ProbeArgs;
use crate::client::conn::Update;
use crate::core::time::{format_duration, millis};
use crate::core::validate::device_problems;
use crate::core::{Error, Result};
use crate::render::{emit, structured, table, verdict, Format};
use prost::Message;
use serde::Serialize;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, but something is off.
    Warn,
    /// Broken.
    Fail,
}

/// One check's result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Its verdict.
    pub status: Status,
    /// The latency of the call behind it, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// What was seen.
    pub detail: String,
}

/// The whole report, as `-o json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The plugin's socket.
    pub socket: String,
    /// The worst verdict.
    pub result: Status,
    /// Every check in order.
    pub checks: Vec<Check>,
}

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

    let t = Instant::now();
    let first = async {
        let mut s = conn.list_and_watch().await?;
        match s.next().await? {
            Update::Snapshot(r) => Ok((r, s)),
            Update::Closed => Err(Error::failed("the plugin closed ListAndWatch before sending a snapshot")),
        }
    };
    let (snap, _stream) = match tokio::time::timeout(ctx.timeout, first).await {
        Err(_) => {
            return p.add(
                "list-and-watch",
                Status::Fail,
                Some(t.elapsed()),
                format!("no snapshot within {}", format_duration(ctx.timeout)),
            )
        }
        Ok(Err(e)) => return p.add("list-and-watch", Status::Fail, Some(t.elapsed()), e.to_string()),
        Ok(Ok(x)) => x,
    };
    let healthy: Vec<String> = snap.devices.iter().filter(|d| d.health == HEALTHY).map(|d| d.id.clone()).collect();
    p.add(
        "list-and-watch",
        Status::Pass,
        Some(t.elapsed()),
        format!("first snapshot: {} device(s), {} healthy", snap.devices.len(), healthy.len()),
    );

    let size = snap.encoded_len();
    let (st, what) = if size > KUBELET_MAX_RECV {
        (Status::Fail, "over the kubelet's receive limit: the kubelet drops this stream")
    } else if size > KUBELET_MAX_RECV / 4 * 3 {
        (Status::Warn, "close to the kubelet's receive limit")
    } else {
        (Status::Pass, "within the kubelet's receive limit")
    };
    p.add("snapshot-size", st, None, format!("{size} bytes of {KUBELET_MAX_RECV}: {what}"));

    let problems = device_problems(snap.devices.iter().map(|d| (d.id.as_str(), d.health.as_str())));
    let errors: Vec<String> = problems.iter().filter(|x| !x.is_warning()).map(|x| x.to_string()).collect();
    let warnings: Vec<String> = problems.iter().filter(|x| x.is_warning()).map(|x| x.to_string()).collect();
    // At most MAX_LIST problems, then "+N more": 100,000 bad IDs make one short line.
    let joined = |v: &[String]| {
        let mut s = v.iter().take(crate::core::text::MAX_LIST).cloned().collect::<Vec<_>>().join("; ");
        if v.len() > crate::core::text::MAX_LIST {
            s.push_str(&format!("; +{} more", v.len() - crate::core::text::MAX_LIST));
        }
        s
    };
    if !errors.is_empty() {
        p.add("devices", Status::Fail, None, joined(&errors));
    } else if !warnings.is_empty() {
        p.add("devices", Status::Warn, None, joined(&warnings));
    } else if snap.devices.is_empty() {
        p.add("devices", Status::Warn, None, "the plugin advertises no devices");
    } else if healthy.is_empty() {
        p.add("devices", Status::Warn, None, "no device is Healthy: nothing can be allocated");
    } else {
        p.add("devices", Status::Pass, None, "IDs unique and non-empty, health strings exact");
    }

    if opts.get_preferred_allocation_available && !healthy.is_empty() {
        let want = healthy.len().min(2);
        let creq = ContainerPreferredAllocationRequest {
            available_device_i_ds: healthy.clone(),
            must_include_device_i_ds: vec![],
            allocation_size: want as i32,
        };
        let t = Instant::now();
        match conn.preferred(PreferredAllocationRequest { container_requests: vec![creq.clone()] }).await {
            Err(e) => p.add("preferred", Status::Fail, Some(t.elapsed()), e.to_string()),
            Ok(resp) => {
                let v = super::preferred::violations(&creq, &resp);
                let w = super::preferred::warnings(&resp);
                let ids = resp.container_responses.first().map(|c| c.device_i_ds.join(",")).unwrap_or_default();
                if !w.is_empty() && v.is_empty() {
                    p.add("preferred", Status::Warn, Some(t.elapsed()), w.join("; "));
                } else if v.is_empty() {
                    p.add(
                        "preferred",
                        Status::Pass,
                        Some(t.elapsed()),
                        format!("asked for {want} of {}: got {ids}", healthy.len()),
                    );
                } else {
                    p.add("preferred", Status::Fail, Some(t.elapsed()), v.join("; "));
                }
            }
        }
    }

    if a.allocate {
        if healthy.is_empty() {
            return p.add("allocate", Status::Fail, None, "no healthy device to allocate");
        }
        let held = held_devices(ctx, a).await;
        let Some((id, which)) = pick_free(&healthy, held.as_ref()) else {
            return p.add(
                "allocate",
                Status::Warn,
                None,
                format!("skipped: all {} healthy device(s) are held by containers, per PodResources", healthy.len()),
            );
        };
        let id = &id;
        let t = Instant::now();
        let req =
            AllocateRequest { container_requests: vec![ContainerAllocateRequest { devices_ids: vec![id.clone()] }] };
        match conn.allocate(req).await {
            Err(e) => p.add("allocate", Status::Fail, Some(t.elapsed()), e.to_string()),
            Ok(resp) => match resp.container_responses.as_slice() {
                [] => p.add(
                    "allocate",
                    Status::Fail,
                    Some(t.elapsed()),
                    "no container_responses: the kubelet fails the pod",
                ),
                [c] => {
                    let n = c.envs.len() + c.mounts.len() + c.devices.len() + c.annotations.len() + c.cdi_devices.len();
                    let detail = format!(
                        "{which}: {} env, {} mount, {} device, {} annotation, {} CDI",
                        c.envs.len(),
                        c.mounts.len(),
                        c.devices.len(),
                        c.annotations.len(),
                        c.cdi_devices.len()
                    );
                    if n == 0 {
                        p.add(
                            "allocate",
                            Status::Warn,
                            Some(t.elapsed()),
                            format!("{detail}: the response gives the container nothing"),
                        );
                    } else {
                        p.add("allocate", Status::Pass, Some(t.elapsed()), detail);
                    }
                    // CDI names must resolve to a spec, or the runtime fails the container.
                    let names = crate::doctor::cdi::names_in(c);
                    if !names.is_empty() {
                        let dirs = ctx.paths.cdi_spec_dirs(&a.cdi_spec_dir);
                        let (reg, bad) = crate::doctor::cdi::check(&dirs, &names);
                        let no_specs_here = a.cdi_spec_dir.is_empty() && !dirs.iter().any(|d| d.is_dir());
                        if bad.is_empty() {
                            p.add(
                                "cdi",
                                Status::Pass,
                                None,
                                format!("{} resolve(s) in {} spec(s)", names.join(","), reg.specs),
                            );
                        } else if no_specs_here {
                            // Not a node with CDI specs (a workstation): say so, do not fail.
                            let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                            p.add(
                                "cdi",
                                Status::Warn,
                                None,
                                format!(
                                    "{} cannot be resolved here: no CDI spec directory ({}); on a node this fails the container (pass --cdi-spec-dir)",
                                    names.join(","),
                                    shown.join(", ")
                                ),
                            );
                        } else {
                            p.add(
                                "cdi",
                                Status::Fail,
                                None,
                                format!(
                                    "unresolvable CDI devices (the runtime fails the container): {}",
                                    bad.join("; ")
                                ),
                            );
                        }
                    }
                }
                many => p.add(
                    "allocate",
                    Status::Fail,
                    Some(t.elapsed()),
                    format!("{} container_responses for 1 container request", many.len()),
                ),
            },
        }
        if opts.pre_start_required {
            let t = Instant::now();
            match conn.pre_start(PreStartContainerRequest { devices_ids: vec![id.clone()] }, ctx.timeout).await {
                Err(e) => p.add("pre-start", Status::Fail, Some(t.elapsed()), e.to_string()),
                Ok(_) => p.add("pre-start", Status::Pass, Some(t.elapsed()), id.clone()),
            }
        }
    }
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
    let result = checks.iter().map(|c| c.status).max_by_key(|s| *s as u8).unwrap_or(Status::Pass);
    let mut failed: Vec<&str> = checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.name).collect();
    failed.dedup();
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = checks
                .iter()
                .map(|c| {
                    let v = match c.status {
                        Status::Pass => "PASS",
                        Status::Warn => "WARN",
                        Status::Fail => "FAIL",
                    };
                    let lat = c
                        .latency_ms
                        .map(|ms| format_duration(Duration::from_secs_f64(ms / 1e3)))
                        .unwrap_or_else(|| "-".into());
                    vec![verdict(v), c.name.to_string(), lat, c.detail.clone()]
                })
                .collect();
            emit(&table(&["RESULT", "CHECK", "LATENCY", "DETAIL"], &rows))?;
        }
        f => emit(&structured(f, &Report { socket: socket.clone(), result, checks })?)?,
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::failed(format!("{socket}: probe failed: {}", failed.join(", "))))
    }
}
