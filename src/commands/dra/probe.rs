//! `dpctl dra probe SOCKET`: a one-shot check of a DRA plugin against the
//! kubelet's rules (registration, endpoint, each advertised service, a
//! throwaway claim with `--prepare`, the health stream).

use super::{answer_text, devices_text, dra_service, endpoint_here, host_kubelet_root, try_info, Ctx, DraSocket};
use crate::api::dra_v1::Claim;
use crate::cli::positive_duration_arg;
use crate::client::dra::{resolve, DraConn};
use crate::commands::shared::cdi;
use crate::core::time::{format_duration, millis};
use crate::core::Error;
use crate::core::Result;
use crate::protocol::dra::{self as rules, DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1};
use crate::protocol::{Rule, Severity, Violation};
use crate::render::checks::{report, Check, Status};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(super) const EXAMPLES: &str = "Examples:
  # registration rules, the endpoint, each advertised service, the health stream
  dpctl dra probe gpu.example.com-reg.sock
  # also prepare (twice) and unprepare a throwaway claim; resolve its CDI IDs
  dpctl dra probe gpu.example.com-reg.sock --prepare --cdi-spec-dir /var/run/cdi
  # a driver that reads claims from an API server (kubeletplugin helper): a claim allocated to it
  dpctl dra probe gpu.example.com-reg.sock --prepare --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001
  # the service socket directly (no GetInfo): v1 and v1beta1 are tried
  dpctl dra probe /var/lib/kubelet/plugins/gpu.example.com/dra.sock -o json";

/// `dpctl dra probe`
#[derive(Debug, Args)]
pub struct DraProbeArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// Also prepare a throwaway claim (twice, for idempotence), resolve its CDI IDs, then unprepare it
    #[arg(long)]
    pub prepare: bool,
    /// With --prepare: prepare this claim (NAMESPACE/NAME/UID of a claim allocated to the driver) instead of a throwaway one, for drivers that read claims from an API server
    #[arg(long, value_name = "NS/NAME/UID", requires = "prepare", value_parser = crate::client::dra::parse_claim)]
    pub claim: Option<crate::api::dra_v1::Claim>,
    /// With --prepare: resolve CDI IDs in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR", requires = "prepare")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Wait up to this long for the socket to appear and answer before checking (for CI right after starting a driver)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

struct Checks(Vec<Check>);

impl Checks {
    fn add(&mut self, name: &'static str, status: Status, latency: Option<Duration>, detail: impl Into<String>) {
        self.0.push(Check { name, status, latency_ms: latency.map(millis), detail: detail.into() });
    }

    /// One row per violation, or a PASS row per rule in `rules` that holds.
    fn rules(&mut self, checked: &[&'static Rule], v: &[Violation], pass: &str) {
        for r in checked {
            let mine: Vec<&Violation> = v.iter().filter(|x| x.rule.id == r.id).collect();
            if mine.is_empty() {
                self.add(r.id, Status::Pass, None, pass.to_string());
            }
            // One row per rule: its first few violations, then how many more.
            if let Some(x) = mine.first() {
                let st = if x.rule.severity == Severity::Fail { Status::Fail } else { Status::Warn };
                let mut detail = mine.iter().take(3).map(|x| x.text.as_str()).collect::<Vec<_>>().join("; ");
                if mine.len() > 3 {
                    detail.push_str(&format!("; +{} more", mine.len() - 3));
                }
                self.add(r.id, st, None, format!("{detail}; fix: {}", x.rule.fix));
            }
        }
    }
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraProbeArgs) -> Result<()> {
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
    let claim = a.claim.clone().unwrap_or_else(|| Claim {
        namespace: "dpctl-probe".into(),
        name: "probe".into(),
        uid: format!("dpctl-probe-{}-{nanos}", std::process::id()),
    });
    let uids = vec![claim.uid.clone()];
    let t = Instant::now();
    let first = service.prepare(svc, vec![claim.clone()]).await;
    // A driver that GETs its claims from an API server (the kubeletplugin
    // helper) cannot know a throwaway claim: not its failure, and nothing
    // after it (idempotence, unprepare) would mean anything.
    let said = match &first {
        Err(e) => Some(e.to_string()),
        Ok(r) => r.claims.get(&claim.uid).map(|x| x.error.clone()).filter(|e| !e.is_empty()),
    };
    if let Some(said) = said.filter(|s| a.claim.is_none() && crate::client::dra::says_claim_not_in_api_server(s)) {
        return c.add(
            "prepare",
            Status::Warn,
            Some(t.elapsed()),
            format!(
                "not checked: the driver reads its claims from an API server and has no claim {}/{} ({said}); pass --claim NS/NAME/UID of a claim allocated to this driver, or run dpctl test --dra -- DRIVER-COMMAND (it creates, allocates and prepares claims)",
                claim.namespace, claim.name
            ),
        );
    }
    let first = match first {
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
        let (status, detail) = cdi::resolve(&dirs, !a.cdi_spec_dir.is_empty(), &ids).check(&ids, &dirs);
        c.add("cdi", status, None, detail);
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
