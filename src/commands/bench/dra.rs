//! `dpctl bench dra SOCKET`: NodePrepareResources, then NodeUnprepareResources
//! of the same claims, against any DRA driver at a chosen concurrency and
//! number of claims per call. Every call prepares claims with new UIDs (the
//! driver does real work), and every claim prepared is unprepared before
//! the command ends: after each call, and once more at the end for any
//! whose unprepare failed — on Ctrl-C too, which lets the calls in flight
//! finish and starts no more.
//!
//! The claims exist nowhere but in the calls: a driver that reads claims
//! from an API server (the kubeletplugin helper, `dpctl dra serve
//! --kubeconfig`) cannot prepare them. An unmeasured first call finds that
//! out, and the command stops saying so.

use super::{load_table, progress, Ctx};
use crate::api::dra_v1::{Claim, NodePrepareResourcesResponse, NodeUnprepareResourcesResponse};
use crate::bench::{load_iterations, Budget, CallError, LoadReport, OnInterrupt, Timed};
use crate::cli::positive_duration_arg;
use crate::client::dra::DraConn;
use crate::commands::dra::{dra_service, target};
use crate::core::{Error, Result};
use crate::render::{emit, structured, Format};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) const EXAMPLES: &str = "Examples:
  dpctl bench dra gpu.example.com-reg.sock --concurrency 4 --claims-per-call 3 --duration 10s
  dpctl bench dra /var/lib/kubelet/plugins/gpu.example.com/dra.sock --requests 2000 -o json
  # a simulated driver with a device for each of the 16 x 2 claims in flight
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --devices 32 --cdi-dir /tmp/k/cdi &
  dpctl --kubelet-root-dir /tmp/k bench dra gpu.example.com-reg.sock --concurrency 16 --claims-per-call 2";

/// The namespace of the claims the bench makes up.
pub const NAMESPACE: &str = "dpctl-bench";

/// At most this many claims per cleanup call.
const CLEANUP_BATCH: usize = 100;

/// `dpctl bench dra`
#[derive(Debug, Args)]
pub struct BenchDraArgs {
    /// The driver's socket
    #[arg(value_name = "SOCKET", help = crate::help::DRA_SOCKET_HELP)]
    pub socket: PathBuf,
    /// NodePrepareResources calls, each followed by NodeUnprepareResources of its claims (ignored with --duration)
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes
    #[arg(long, default_value_t = 1, value_name = "C", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// Claims per call, each with a new UID (a driver that gives each claim a device needs C x K free ones)
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub claims_per_call: u64,
    /// Run for this long instead of a number of calls
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// The service to call: v1 or v1beta1 [default: the kubelet's choice from GetInfo, else v1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1beta1"])]
    pub service: Option<String>,
}

/// What `bench dra` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DraReport {
    /// The socket named (resolved).
    socket: String,
    /// The DRAPlugin service called.
    service: String,
    concurrency: usize,
    claims_per_call: u64,
    /// NodePrepareResources.
    prepare: LoadReport,
    /// NodeUnprepareResources.
    unprepare: LoadReport,
    /// Claims (distinct UIDs) sent to NodePrepareResources, the unmeasured first call's included.
    claims: u64,
    /// UIDs whose NodeUnprepareResources never succeeded, not even at the end: the driver may still hold them.
    still_prepared: Vec<String>,
    /// Stopped early by Ctrl-C (SIGINT) or SIGTERM.
    interrupted: bool,
}

/// A UUID-shaped claim UID: the run's bits, then the claim's number.
pub fn claim_uid(run: u64, n: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (run >> 32) as u32,
        (run >> 16) as u16,
        (run >> 4) & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

/// The claims of call `batch`: `k` of them, numbered on from the calls before.
pub fn batch_claims(run: u64, batch: u64, k: u64) -> Vec<Claim> {
    (0..k)
        .map(|j| {
            let n = batch.saturating_mul(k).saturating_add(j);
            Claim { namespace: NAMESPACE.into(), name: format!("bench-{n}"), uid: claim_uid(run, n) }
        })
        .collect()
}

/// Different bits for every run: the time and the process.
fn run_bits() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    nanos ^ (u64::from(std::process::id()) << 40).rotate_left(7)
}

fn claim_text(c: &Claim) -> String {
    format!("claim {}/{} ({})", c.namespace, c.name, c.uid)
}

/// A failed call as the report counts it: its gRPC code (a timeout is DeadlineExceeded).
fn call_error(e: &Error) -> CallError {
    match e {
        Error::Rpc { code, message, .. } => {
            CallError { kind: format!("{code:?}"), detail: Some(format!("{code:?}: {message}")) }
        }
        // `DraConn`'s calls fail otherwise only by running out of time.
        other => CallError {
            kind: format!("{:?}", other.code().unwrap_or(tonic::Code::DeadlineExceeded)),
            detail: Some(other.to_string()),
        },
    }
}

/// How an answer went for the claims asked about, as the kubelet judges it:
/// a claim with an error, or with no entry, fails the call.
fn judge_claims<'a>(claims: &[Claim], error_of: impl Fn(&str) -> Option<Option<&'a str>>) -> Result<(), CallError> {
    for c in claims {
        match error_of(&c.uid) {
            None => {
                return Err(CallError {
                    kind: "ClaimLeftOut".into(),
                    detail: Some(format!(
                        "{}: not in the answer (the kubelet fails the call and retries)",
                        claim_text(c)
                    )),
                })
            }
            Some(Some(e)) => {
                return Err(CallError { kind: "ClaimError".into(), detail: Some(format!("{}: {e}", claim_text(c))) })
            }
            Some(None) => {}
        }
    }
    Ok(())
}

/// Judge a NodePrepareResources answer.
pub fn judge_prepare(claims: &[Claim], r: &Result<NodePrepareResourcesResponse>) -> Result<(), CallError> {
    match r {
        Err(e) => Err(call_error(e)),
        Ok(a) => judge_claims(claims, |u| a.claims.get(u).map(|c| (!c.error.is_empty()).then_some(c.error.as_str()))),
    }
}

/// Judge a NodeUnprepareResources answer.
pub fn judge_unprepare(claims: &[Claim], r: &Result<NodeUnprepareResourcesResponse>) -> Result<(), CallError> {
    match r {
        Err(e) => Err(call_error(e)),
        Ok(a) => judge_claims(claims, |u| a.claims.get(u).map(|c| (!c.error.is_empty()).then_some(c.error.as_str()))),
    }
}

/// The claims an unprepare answer says are unprepared (an entry without an error).
pub fn unprepared<'a>(claims: &'a [Claim], r: &Result<NodeUnprepareResourcesResponse>) -> Vec<&'a Claim> {
    match r {
        Err(_) => vec![],
        Ok(a) => claims.iter().filter(|c| a.claims.get(&c.uid).is_some_and(|x| x.error.is_empty())).collect(),
    }
}

/// Whether a failed prepare says the driver looked the claim up in an API
/// server and did not find it (the kubeletplugin helper: `retrieve claim
/// NS/NAME: resourceclaims.resource.k8s.io "NAME" not found`; `dpctl dra
/// serve --kubeconfig`: `fetch ResourceClaim NS/NAME: …`).
pub fn looked_up_in_an_api_server(e: &CallError) -> bool {
    crate::client::dra::says_claim_not_in_api_server(e.detail.as_deref().unwrap_or_default())
}

/// The claims sent to prepare whose unprepare has not succeeded yet.
#[derive(Default)]
struct Outstanding(Mutex<BTreeMap<String, Claim>>);

impl Outstanding {
    fn add(&self, claims: &[Claim]) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.extend(claims.iter().map(|c| (c.uid.clone(), c.clone())));
    }

    fn done(&self, claims: &[&Claim]) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for c in claims {
            g.remove(&c.uid);
        }
    }

    fn take(&self) -> Vec<Claim> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner())).into_values().collect()
    }
}

/// One prepare, then one unprepare of the same claims, each timed.
async fn cycle(conn: &DraConn, svc: &'static str, claims: Vec<Claim>, outstanding: &Outstanding) -> [Timed; 2] {
    outstanding.add(&claims);
    let t = Instant::now();
    let p = conn.prepare(svc, claims.clone()).await;
    let prepare = Timed { elapsed: t.elapsed(), result: judge_prepare(&claims, &p) };
    let t = Instant::now();
    let u = conn.unprepare(svc, claims.clone()).await;
    let elapsed = t.elapsed();
    outstanding.done(&unprepared(&claims, &u));
    [prepare, Timed { elapsed, result: judge_unprepare(&claims, &u) }]
}

/// Unprepare whatever is outstanding; what is still not unprepared after that.
async fn cleanup(conn: &DraConn, svc: &'static str, outstanding: &Outstanding) -> Vec<Claim> {
    let mut left = Vec::new();
    for chunk in outstanding.take().chunks(CLEANUP_BATCH) {
        let r = conn.unprepare(svc, chunk.to_vec()).await;
        let done: Vec<&str> = unprepared(chunk, &r).into_iter().map(|c| c.uid.as_str()).collect();
        left.extend(chunk.iter().filter(|c| !done.contains(&c.uid.as_str())).cloned());
    }
    left
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &BenchDraArgs) -> Result<()> {
    // Listen for Ctrl-C before the first claim is prepared.
    let interrupt = crate::core::interrupted();
    let t = target(ctx, &a.socket).await?;
    let svc = dra_service(a.service.as_deref(), t.advertised())?;
    let socket = t.socket.display().to_string();
    let conn = t.service;
    let run = run_bits();
    let k = a.claims_per_call;
    let outstanding = Arc::new(Outstanding::default());

    // An unmeasured first call: connects, and tells a driver that reads claims from an API server.
    let [first, _] = cycle(&conn, svc, batch_claims(run, 0, k), &outstanding).await;
    if let Err(e) = &first.result {
        if looked_up_in_an_api_server(e) {
            let left = cleanup(&conn, svc, &outstanding).await;
            let said = e.detail.clone().unwrap_or_default();
            let mut msg = format!(
                "{socket}: the driver looks its claims up in an API server and cannot prepare made-up ones ({said}); bench a driver that prepares any claim, e.g. dpctl dra serve without --kubeconfig (a bench mode that creates the claims in an API server is not built yet)"
            );
            if !left.is_empty() {
                msg.push_str(&format!("; {} claim(s) may still be prepared: {}", left.len(), uid_list(&left)));
            }
            return Err(Error::failed(msg));
        }
    }

    let budget = a.duration.map(Budget::Duration).unwrap_or(Budget::Requests(a.requests));
    let (c2, o2) = (conn.clone(), outstanding.clone());
    let [prepare, unprepare] = load_iterations(
        ["NodePrepareResources", "NodeUnprepareResources"],
        a.concurrency as usize,
        budget,
        progress(ctx, a.duration, a.requests, "prepare+unprepare"),
        OnInterrupt::Finish,
        interrupt,
        move |i| {
            let (conn, outstanding) = (c2.clone(), o2.clone());
            async move { cycle(&conn, svc, batch_claims(run, i + 1, k), &outstanding).await }
        },
    )
    .await;
    let still = cleanup(&conn, svc, &outstanding).await;
    let report = DraReport {
        socket: socket.clone(),
        service: svc.to_string(),
        concurrency: a.concurrency as usize,
        claims_per_call: k,
        interrupted: prepare.interrupted,
        claims: (prepare.requests + 1) * k,
        still_prepared: still.iter().map(|c| c.uid.clone()).collect(),
        prepare,
        unprepare,
    };
    show(ctx, &report)?;
    if !still.is_empty() {
        return Err(Error::failed(format!(
            "{socket}: {} claim(s) may still be prepared: NodeUnprepareResources failed for them, also in a last try at the end ({}); unprepare them with dpctl dra unprepare {socket} --claim {NAMESPACE}/NAME/UID",
            still.len(),
            uid_list(&still)
        )));
    }
    let failures: Vec<String> = [&report.prepare, &report.unprepare]
        .iter()
        .filter_map(|r| r.failure().map(|f| format!("{}: {f}", r.call)))
        .collect();
    if !failures.is_empty() {
        return Err(Error::failed(format!("{socket}: {}", failures.join("; "))));
    }
    Ok(())
}

/// A few claims as `name (uid)`, and how many more.
fn uid_list(claims: &[Claim]) -> String {
    let mut s: Vec<String> = claims.iter().take(3).map(|c| format!("{}/{} ({})", c.namespace, c.name, c.uid)).collect();
    if claims.len() > 3 {
        s.push(format!("and {} more", claims.len() - 3));
    }
    s.join(", ")
}

fn show(ctx: &Ctx, r: &DraReport) -> Result<()> {
    if r.interrupted {
        eprintln!(
            "dpctl: interrupted after {:.1}s: the calls in flight finished; the figures cover the {} prepare and unprepare call(s) made so far",
            r.prepare.seconds, r.prepare.requests
        );
    }
    match ctx.format {
        Format::Table => {
            emit(&load_table(&[&r.prepare, &r.unprepare]))?;
            for rep in [&r.prepare, &r.unprepare] {
                for e in &rep.first_errors {
                    eprintln!("error: {}: {e}", rep.call);
                }
            }
            Ok(())
        }
        f => emit(&structured(f, r)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::dra_v1::{NodePrepareResourceResponse, NodeUnprepareResourceResponse};

    #[test]
    fn every_claim_gets_its_own_uuid_shaped_uid() {
        let a = batch_claims(0x0123_4567_89ab_cdef, 0, 3);
        let b = batch_claims(0x0123_4567_89ab_cdef, 1, 3);
        let mut uids: Vec<&str> = a.iter().chain(&b).map(|c| c.uid.as_str()).collect();
        assert_eq!(uids[0], "01234567-89ab-4cde-8000-000000000000");
        assert_eq!(b[0].name, "bench-3");
        assert!(uids.iter().all(|u| u.len() == 36 && u.split('-').map(str::len).eq([8, 4, 4, 4, 12])), "{uids:?}");
        uids.sort();
        uids.dedup();
        assert_eq!(uids.len(), 6);
        assert_ne!(claim_uid(1 << 40, 0), claim_uid(2 << 40, 0), "another run, other UIDs");
    }

    #[test]
    fn answers_are_judged_as_the_kubelet_judges_them() {
        let claims = batch_claims(7, 0, 2);
        let mut ok = NodePrepareResourcesResponse::default();
        for c in &claims {
            ok.claims.insert(c.uid.clone(), NodePrepareResourceResponse::default());
        }
        assert!(judge_prepare(&claims, &Ok(ok.clone())).is_ok());
        let mut left_out = ok.clone();
        left_out.claims.remove(&claims[1].uid);
        let e = judge_prepare(&claims, &Ok(left_out)).unwrap_err();
        assert_eq!(e.kind, "ClaimLeftOut");
        assert!(e.detail.unwrap().contains("bench-1"));
        let mut failed = ok;
        failed.claims.get_mut(&claims[0].uid).unwrap().error = "no free device".into();
        let e = judge_prepare(&claims, &Ok(failed)).unwrap_err();
        assert_eq!(e.kind, "ClaimError");
        let d = e.detail.unwrap();
        assert!(d.contains("bench-0") && d.ends_with(": no free device"), "{d}");
        let rpc = Error::Rpc {
            target: "s".into(),
            method: "NodePrepareResources",
            code: tonic::Code::Unavailable,
            message: "busy".into(),
        };
        assert_eq!(
            judge_prepare(&claims, &Err(rpc)).unwrap_err(),
            CallError { kind: "Unavailable".into(), detail: Some("Unavailable: busy".into()) }
        );
        let timeout = Error::timeout(std::path::Path::new("s"), "NodePrepareResources", Duration::from_secs(1));
        assert_eq!(judge_prepare(&claims, &Err(timeout)).unwrap_err().kind, "DeadlineExceeded");

        let mut u = NodeUnprepareResourcesResponse::default();
        u.claims.insert(claims[0].uid.clone(), NodeUnprepareResourceResponse::default());
        u.claims.insert(claims[1].uid.clone(), NodeUnprepareResourceResponse { error: "busy".into() });
        let u = Ok(u);
        assert_eq!(judge_unprepare(&claims, &u).unwrap_err().kind, "ClaimError");
        let done: Vec<&str> = unprepared(&claims, &u).iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(done, [claims[0].uid.as_str()], "only an entry without an error counts as unprepared");
    }

    #[test]
    fn a_claim_missing_from_an_api_server_is_recognised() {
        let e = |d: &str| CallError { kind: "ClaimError".into(), detail: Some(d.into()) };
        // the kubeletplugin helper (a gRPC error) and dpctl dra serve --kubeconfig (a claim's error)
        assert!(looked_up_in_an_api_server(&e(
            "Unknown: get resource claims: retrieve claim dpctl-bench/bench-0: resourceclaims.resource.k8s.io \"bench-0\" not found"
        )));
        assert!(looked_up_in_an_api_server(&e(
            "claim dpctl-bench/bench-0 (u): fetch ResourceClaim dpctl-bench/bench-0: resourceclaims.resource.k8s.io \"bench-0\" not found"
        )));
        assert!(!looked_up_in_an_api_server(&e("claim x: no free device in pool pool-0")));
        assert!(!looked_up_in_an_api_server(&e("claim x: device not found")));
    }
}
