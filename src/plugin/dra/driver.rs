//! The helper around the driver's core, as the kubeletplugin helper is
//! around a driver's `DRAPlugin`: the gRPC services (DRAPlugin v1 and
//! v1beta1 over one implementation, DRAResourceHealth v1 and v1alpha1 over
//! one snapshot channel), fetching each claim from the API server by name
//! and checking its UID, carrying out the core's decisions
//! ([`super::claims`], [`super::health`]: CDI spec writes, atomic; removals;
//! device metadata) and live control. The state lock is held only while
//! the core decides, never across a file write or an await. Faults are a
//! layer ([`super::faults::Faults`]) the helper hands each seam to.

use super::claims::{self, AllocatedDevice, ClaimInput, Prepared, PreparedClaim};
use super::error::{ClaimError, FetchError, FileError};
use super::faults::Faults;
use super::health::{self, DeviceState};
use super::{metadata, Config};
use crate::api::dra_health_v1::{self as h1, DeviceHealth};
use crate::api::dra_health_v1alpha1 as h1a;
use crate::api::dra_v1::{
    self as v1, Claim, NodePrepareResourceResponse, NodePrepareResourcesRequest, NodePrepareResourcesResponse,
    NodeUnprepareResourceResponse, NodeUnprepareResourcesRequest, NodeUnprepareResourcesResponse,
};
use crate::api::dra_v1beta1 as v1b;
use crate::client::dra::convert;
use crate::core::log::Logger;
use crate::protocol::dra::{HEALTH_V1, HEALTH_V1ALPHA1};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// Why a live-control request was refused.
#[derive(Debug)]
pub enum ControlError {
    /// `update-metadata` without `--device-metadata`.
    MetadataOff,
    /// No prepared claim of that name.
    NoClaim(String),
    /// The claim is not `namespace/name`.
    NotNamespaced,
    /// The metadata could not be rewritten.
    Metadata(metadata::MetadataError),
    /// The health change is not valid.
    Health(health::HealthError),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::MetadataOff => f.write_str("device metadata is not enabled (dra serve --device-metadata)"),
            ControlError::NoClaim(c) => write!(f, "no prepared claim {}", crate::core::text::quote(c)),
            ControlError::NotNamespaced => f.write_str("the claim is namespace/name"),
            ControlError::Metadata(e) => e.fmt(f),
            ControlError::Health(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ControlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ControlError::Metadata(e) => Some(e),
            ControlError::Health(e) => Some(e),
            _ => None,
        }
    }
}

/// Write `text` to `path` atomically in the CDI spec directory `dir` (made if missing).
fn write_cdi_file(dir: &Path, path: &Path, text: &[u8]) -> Result<(), FileError> {
    crate::core::files::create_dir_all(dir)
        .map_err(|source| FileError::CreateDir { dir: dir.to_path_buf(), source })?;
    crate::core::files::write_atomic(path, text).map_err(|source| FileError::Write {
        what: "CDI spec",
        path: path.to_path_buf(),
        source,
    })
}

/// Write a CDI spec the core decided.
fn write_spec(dir: &Path, f: &claims::SpecFile) -> Result<(), FileError> {
    let text = serde_json::to_vec_pretty(&f.spec).map_err(FileError::Encode)?;
    write_cdi_file(dir, &f.path, &text)
}

/// What a prepare learns of a claim from the API server: its allocation for
/// this driver and its pod claim name ([`claims::pod_claim_name`]).
type Fetched = (Vec<AllocatedDevice>, Option<String>);

/// GET the claim as the kubeletplugin helper does (resource.k8s.io v1, then
/// v1beta2 and v1beta1 where a version is not served).
async fn fetch_claim(api: &super::slices::ApiServer, c: &Claim) -> Result<serde_json::Value, FetchError> {
    let t = std::time::Duration::from_secs(10);
    let name = claims::claim_name(c);
    let mut last = String::new();
    for v in ["v1", "v1beta2", "v1beta1"] {
        let path = format!("/apis/resource.k8s.io/{v}/namespaces/{}/resourceclaims/{}", c.namespace, c.name);
        let (st, body) = super::slices::request(api, "GET", &path, None, t)
            .await
            .map_err(|e| FetchError::Request { claim: name.clone(), source: e.into() })?;
        match st {
            200..=299 => return Ok(body),
            // The claim is not there (a NotFound naming it): no other version has it.
            404 if body["details"]["name"].is_string() => {
                let message = body["message"].as_str().unwrap_or("not found").to_string();
                return Err(FetchError::NotFound { claim: name, message });
            }
            // The version is not served (a bare 404): the next one may be.
            404 => last = body["message"].as_str().unwrap_or("not found").to_string(),
            _ => {
                let message = body["message"].as_str().unwrap_or_default().to_string();
                return Err(FetchError::Status { claim: name, status: st, message });
            }
        }
    }
    Err(FetchError::NotFound { claim: name, message: last })
}

/// Unix seconds now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// The helper: configuration, the core's state, device health, the fault layer.
pub struct Driver {
    cfg: Arc<Config>,
    /// The prepared claims: locked only while the core decides.
    state: Mutex<Prepared>,
    health: watch::Sender<Vec<DeviceState>>,
    log: Logger,
    stop: CancellationToken,
    /// The run's task group (`late-prepare` runs prepares in it, past their call).
    tasks: crate::core::task::Tasks,
    /// The faults, as a layer.
    faults: Faults,
}

impl Driver {
    /// A driver with every device Healthy.
    pub fn new(cfg: Arc<Config>, log: Logger, tasks: crate::core::task::Tasks) -> Arc<Self> {
        let (health, _) = watch::channel(health::initial(&cfg.devices, now_secs()));
        Arc::new(Driver {
            faults: Faults::new(&cfg),
            cfg,
            state: Mutex::new(Prepared::default()),
            health,
            log,
            stop: tasks.token().clone(),
            tasks,
        })
    }

    /// The fault layer.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The core's state (a poisoned lock still holds it: the core's
    /// decisions never leave it half-changed).
    fn state(&self) -> MutexGuard<'_, Prepared> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once a fault crashed the driver, with the panic's words.
    pub async fn crashed(&self) -> String {
        self.faults.crashed().await
    }

    /// A claim an earlier instance prepared, read back from its CDI spec.
    fn read_back(&self, uid: &str) -> Option<PreparedClaim> {
        let path = claims::cdi_path(&self.cfg, uid);
        let text = crate::core::limits::read_file(&path, 1 << 20, "CDI spec").ok()?;
        let spec: serde_json::Value = serde_json::from_str(&text).ok()?;
        claims::read_back(&spec, uid, &path.display().to_string())
    }

    /// Remove every claim's CDI spec of this driver (the `remove-cdi-on-exit` fault).
    pub fn remove_claim_specs(&self) {
        let prefix = format!("dpctl-dra-{}-", self.cfg.driver);
        let common = format!("{prefix}common.json");
        for e in std::fs::read_dir(&self.cfg.cdi_dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && name.ends_with(".json") && name != common {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Remove the temp files a killed `dra serve` of this driver left in
    /// its CDI dir (`.dpctl-dra-<driver>-….json.tmp-<random>`, what
    /// [`crate::core::files::write_atomic`] names them): regular files of
    /// that pattern only, never another file. Returns what it removed.
    pub fn clean_leftover_temp_files(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(&self.cfg.cdi_dir) else { return Vec::new() };
        let mut removed: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| is_leftover_temp(&e.file_name().to_string_lossy(), &self.cfg.driver))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| std::fs::remove_file(p).is_ok())
            .collect();
        removed.sort();
        removed
    }

    /// With `--common-cdi-spec`, write the spec shared by every claim at start
    /// (as the example driver's `CreateCommonSpecFile` does); it stays when
    /// claims are unprepared. Without, nothing.
    pub fn write_common_spec(&self) -> Result<(), FileError> {
        match claims::common_spec(&self.cfg) {
            Some(f) => write_spec(&self.cfg.cdi_dir, &f),
            None => Ok(()),
        }
    }

    /// A NodePrepareResources call, through the fault layer.
    pub async fn prepare_call(
        self: &Arc<Self>,
        req: NodePrepareResourcesRequest,
    ) -> Result<NodePrepareResourcesResponse, Status> {
        let me = Arc::clone(self);
        self.faults.prepare_call(&self.tasks, &self.stop, async move { me.prepare(req).await }).await
    }

    /// Fetch claim `c` and read its allocation (the helper's part); the
    /// fault layer sees the object and any failure.
    async fn fetch(&self, api: &super::slices::ApiServer, c: &Claim) -> Result<Fetched, ClaimError> {
        let mut obj = match fetch_claim(api, c).await {
            Ok(obj) => obj,
            Err(e) => {
                self.faults.fetch_failed(&e).await;
                return Err(ClaimError::Fetch(e));
            }
        };
        self.faults.fetched(c, &mut obj);
        let mut a = claims::allocation_of(&obj, c, &self.cfg.driver)?;
        self.faults.allocated(&mut a);
        Ok((a, claims::pod_claim_name(&obj)))
    }

    /// Prepare claims (the v1 messages; v1beta1 converts): fetch each
    /// claim (with an API server), let the core decide under the state
    /// lock, then carry out its plans — CDI spec writes, device metadata.
    pub async fn prepare(&self, req: NodePrepareResourcesRequest) -> Result<NodePrepareResourcesResponse, Status> {
        self.faults.enter(&self.stop).await?;
        let racing = self.faults.racing(&self.state(), &req.claims);
        self.faults.delay(racing.contains(&true), &self.stop).await?;
        // With an API server (--kubeconfig), prepare what the claim's allocation
        // names, as a real driver (the kubeletplugin helper) does; without, choose.
        let mut fetched = Vec::with_capacity(req.claims.len());
        for c in &req.claims {
            fetched.push(match &self.cfg.publish {
                Some((api, _)) if self.faults.fetches() => Some(self.fetch(api, c).await),
                _ => None,
            });
        }
        // Claims not prepared here may be recorded (read back outside the lock).
        let unknown: Vec<bool> = {
            let st = self.state();
            req.claims.iter().map(|c| !st.contains(&c.uid)).collect()
        };
        let recalled: Vec<(Option<PreparedClaim>, bool)> = req
            .claims
            .iter()
            .zip(&unknown)
            .map(|(c, u)| if *u { self.faults.recall(&c.uid, || self.read_back(&c.uid)) } else { (None, false) })
            .collect();
        let (fetched, pod_claims): (Vec<_>, Vec<_>) = fetched
            .into_iter()
            .map(|f| match f {
                Some(Ok((a, pod_claim))) => (Some(Ok(a)), pod_claim),
                Some(Err(e)) => (Some(Err(e)), None),
                None => (None, None),
            })
            .unzip();
        let plans: Vec<Result<(claims::PreparePlan, bool), ClaimError>> = {
            let mut st = self.state();
            let call = st.begin_call();
            let (choice, instance) = (self.faults.choice(), self.faults.instance());
            let mut plans = Vec::with_capacity(req.claims.len());
            for (((c, got), racing), (recorded, from_checkpoint)) in
                req.claims.iter().zip(fetched).zip(racing).zip(recalled)
            {
                let run = self.faults.rerun(&mut st, &c.uid, racing, call);
                let allocated = match got.transpose() {
                    Ok(a) => a,
                    Err(e) => {
                        plans.push(Err(e));
                        continue;
                    }
                };
                let plan = match self.faults.refuse(&st, c) {
                    Some(e) => Err(e),
                    None => {
                        let input = ClaimInput { allocated, recorded, run, instance };
                        claims::prepare(&self.cfg, &mut st, c, input, choice, call)
                    }
                };
                plans.push(plan.map(|mut p| {
                    let write = self.faults.planned(&self.cfg, &mut p, from_checkpoint);
                    (p, write)
                }));
            }
            plans
        };
        // Carry out the plans, the lock released.
        let mut resp = NodePrepareResourcesResponse::default();
        for ((c, plan), pod_claim) in req.claims.iter().zip(plans).zip(pod_claims) {
            let answer = match self.carry_out(c, plan) {
                Ok(mut answer) => {
                    if !self.cfg.metadata.is_empty() {
                        self.write_metadata(c, pod_claim, &mut answer);
                    }
                    answer
                }
                Err(e) => NodePrepareResourceResponse { devices: vec![], error: e.to_string() },
            };
            resp.claims.insert(c.uid.clone(), answer);
        }
        for answer in resp.claims.values_mut() {
            claims::strip_subrequests(answer);
        }
        self.faults.answered(&req.claims, &self.state(), &mut resp);
        self.log_prepare(&req, &resp);
        Ok(resp)
    }

    /// Write a prepared claim's CDI spec (undoing the core's record when it
    /// fails) and record it for the fault layer; the answer.
    fn carry_out(
        &self,
        c: &Claim,
        plan: Result<(claims::PreparePlan, bool), ClaimError>,
    ) -> Result<NodePrepareResourceResponse, ClaimError> {
        let (plan, write) = plan?;
        if write {
            if let Err(e) = write_spec(&self.cfg.cdi_dir, &plan.write) {
                claims::undo(&mut self.state(), &c.uid, plan.previous);
                return Err(ClaimError::File(e));
            }
        }
        let now = self.state().get(&c.uid).cloned();
        self.faults.recorded(&c.uid, now.as_ref()).map_err(ClaimError::File)?;
        Ok(plan.answer)
    }

    fn log_prepare(&self, req: &NodePrepareResourcesRequest, resp: &NodePrepareResourcesResponse) {
        let errors: Vec<String> =
            resp.claims.iter().filter(|(_, r)| !r.error.is_empty()).map(|(u, _)| u.clone()).collect();
        let mut fields = vec![
            ("claims", json!(req.claims.iter().map(|c| c.uid.clone()).collect::<Vec<_>>())),
            ("errors", json!(errors)),
        ];
        // Shares of shareable devices (KEP-5075): which claim got which share, and its CDI device.
        let shares: Vec<serde_json::Value> = resp
            .claims
            .iter()
            .flat_map(|(u, r)| r.devices.iter().map(move |d| (u, d)))
            .filter_map(|(u, d)| {
                d.share_id.as_ref().map(|id| {
                    json!({"claim": u, "request": d.request_names.first(), "device": d.device_name, "shareID": id,
                        "cdiDeviceIds": d.cdi_device_ids})
                })
            })
            .collect();
        if !shares.is_empty() {
            fields.push(("shares", json!(shares)));
        }
        self.log.event("prepare", &fields);
    }

    /// `--device-metadata`: write the metadata of each request of a
    /// prepared claim and its CDI spec, and add the spec's CDI ID to the
    /// first device of the request, as the kubeletplugin helper does after
    /// the driver's PrepareResourceClaims; a write that fails is logged and
    /// the claim answered without it (the helper logs "Failed to write
    /// device metadata" and goes on).
    fn write_metadata(&self, c: &Claim, pod_claim: Option<String>, answer: &mut NodePrepareResourceResponse) {
        let claim = metadata::ClaimRef {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            uid: c.uid.clone(),
            pod_claim_name: pod_claim,
        };
        let by_request = claims::metadata_devices(&self.cfg.driver, answer);
        if by_request.is_empty() {
            return;
        }
        let cfg = &self.cfg;
        let dirs = (cfg.plugin_dir.as_path(), cfg.cdi_dir.as_path(), &cfg.host_root);
        match metadata::write_claim(&cfg.metadata, &cfg.driver, dirs, &claim, &by_request) {
            Ok(ids) => {
                claims::inject_metadata_ids(answer, &ids);
                self.log.event("device-metadata", &[("claim", json!(claims::claim_name(c))), ("cdiIds", json!(ids))]);
            }
            Err(e) => self.log.event(
                "device-metadata-failed",
                &[("claim", json!(claims::claim_name(c))), ("error", json!(e.to_string()))],
            ),
        }
    }

    /// Unprepare claims: remove their CDI specs; unknown claims are fine (idempotent).
    pub async fn unprepare(
        &self,
        req: NodeUnprepareResourcesRequest,
    ) -> Result<NodeUnprepareResourcesResponse, Status> {
        self.faults.enter(&self.stop).await?;
        let unknown: Vec<bool> = {
            let st = self.state();
            req.claims.iter().map(|c| !st.contains(&c.uid)).collect()
        };
        let mut resp = NodeUnprepareResourcesResponse::default();
        for (c, unknown) in req.claims.iter().zip(unknown) {
            let recorded = if unknown { self.faults.recall_spec(|| self.read_back(&c.uid)) } else { None };
            let known = claims::unprepare(&mut self.state(), &c.uid, recorded);
            let mut error = self.faults.recorded(&c.uid, None).err().map(ClaimError::File);
            if known.is_none() {
                self.faults.unknown_unprepared();
            }
            if let Some(p) = known.filter(|_| self.faults.removes_spec()) {
                if let Err(source) = std::fs::remove_file(&p.cdi_spec) {
                    if source.kind() != std::io::ErrorKind::NotFound {
                        error = Some(ClaimError::Remove { path: p.cdi_spec.clone(), source });
                        self.state().restore(p);
                    }
                }
            }
            // --device-metadata: the claims unprepared lose their metadata files
            // and CDI specs (the helper's cleanupClaim; a failure is the claim's error).
            if error.is_none() && !self.cfg.metadata.is_empty() {
                let claim = metadata::ClaimRef {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    uid: c.uid.clone(),
                    pod_claim_name: None,
                };
                error = metadata::cleanup_claim(&self.cfg.driver, &self.cfg.plugin_dir, &self.cfg.cdi_dir, &claim)
                    .err()
                    .map(ClaimError::Metadata);
            }
            let error = error.map(|e| e.to_string()).unwrap_or_default();
            resp.claims.insert(c.uid.clone(), NodeUnprepareResourceResponse { error });
        }
        self.faults.unprepare_answered(&req.claims, &mut resp);
        self.log.event("unprepare", &[("claims", json!(req.claims.iter().map(|c| c.uid.clone()).collect::<Vec<_>>()))]);
        Ok(resp)
    }

    /// The health snapshot as sent (faults applied).
    pub fn snapshot(&self, devices: &[DeviceState]) -> Vec<DeviceHealth> {
        let snap = health::snapshot(devices, &self.cfg.pool, self.cfg.health_timeout_secs);
        self.faults.health(snap, &self.cfg, now_secs())
    }

    /// A NodeWatchResources call on `service`, logged (`health-watch`), and
    /// refused `Unimplemented` under `health-unimplemented`.
    fn health_watch(&self, service: &str) -> Result<(), Status> {
        let unimplemented = self.faults.health_unimplemented();
        self.log.event("health-watch", &[("service", json!(service)), ("unimplemented", json!(unimplemented))]);
        match unimplemented {
            true => Err(Status::unimplemented(format!("{service}/NodeWatchResources: not implemented (fault)"))),
            false => Ok(()),
        }
    }

    fn health_stream(self: &Arc<Self>) -> impl Stream<Item = Result<Vec<DeviceHealth>, Status>> + Send + 'static {
        let me = self.clone();
        let mut rx = self.health.subscribe();
        let once = self.faults.health_once();
        let resend = self.faults.resend(health::resend_every(self.cfg.health_timeout_secs));
        async_stream(move |tx| async move {
            loop {
                let snap = me.snapshot(&rx.borrow_and_update());
                if tx.send(Ok(snap)).await.is_err() || once {
                    return;
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    // Unchanged health is sent again well within the timeout,
                    // or the kubelet marks the devices Unknown.
                    _ = tokio::time::sleep(resend) => {}
                    _ = me.stop.cancelled() => return,
                }
            }
        })
    }

    fn control_op(&self, req: ControlRequest) -> Result<(), ControlError> {
        match req {
            ControlRequest::List => Ok(()),
            ControlRequest::UpdateMetadata { claim, request, network } => {
                if self.cfg.metadata.is_empty() {
                    return Err(ControlError::MetadataOff);
                }
                let uid =
                    self.state().by_name(&claim).map(|p| p.uid.clone()).ok_or(ControlError::NoClaim(claim.clone()))?;
                let (namespace, name) = claim.split_once('/').ok_or(ControlError::NotNamespaced)?;
                let c =
                    metadata::ClaimRef { namespace: namespace.into(), name: name.into(), uid, pod_claim_name: None };
                let generation = metadata::update_request(
                    &self.cfg.metadata,
                    &self.cfg.driver,
                    &self.cfg.plugin_dir,
                    &c,
                    &request,
                    &network,
                )
                .map_err(ControlError::Metadata)?;
                self.log.event(
                    "control",
                    &[
                        ("op", json!("update-metadata")),
                        ("claim", json!(claim)),
                        ("request", json!(request)),
                        ("generation", json!(generation)),
                    ],
                );
                Ok(())
            }
            ControlRequest::SetHealth { devices, health: word, message } => {
                let word = health::check_change(&devices, &word, &self.cfg.pool, &self.cfg.devices)
                    .map_err(ControlError::Health)?;
                let now = now_secs();
                let message = message.unwrap_or_default();
                self.health.send_modify(|devs| health::apply(devs, &devices, word, &message, now));
                self.log.event(
                    "control",
                    &[("op", json!("set-health")), ("devices", json!(devices)), ("health", json!(word))],
                );
                Ok(())
            }
        }
    }

    /// What live control shows.
    pub fn view(&self, ok: bool) -> ControlAnswer {
        let prepared = self.state().all().cloned().collect();
        ControlAnswer {
            ok,
            error: None,
            driver: self.cfg.driver.clone(),
            pool: self.cfg.pool.clone(),
            devices: self.health.borrow().clone(),
            prepared,
        }
    }
}

/// A live-control request to `dpctl dra serve`: `{"op":"list"}` or
/// `{"op":"set-health","devices":[…],"health":"Unhealthy","message":"…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ControlRequest {
    /// The devices and prepared claims.
    List,
    /// Rewrite a request's device metadata with network data, the
    /// generation one up (the helper's `UpdateRequestMetadata`).
    #[serde(rename_all = "camelCase")]
    UpdateMetadata {
        /// The prepared claim, `namespace/name`.
        #[serde(default)]
        claim: String,
        /// The request (or `request/subrequest`).
        #[serde(default)]
        request: String,
        /// The network data of each of its devices.
        #[serde(default)]
        network: metadata::NetworkData,
    },
    /// Set devices' health.
    SetHealth {
        /// Device names.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        devices: Vec<String>,
        /// Healthy, Unhealthy or Unknown.
        #[serde(default)]
        health: String,
        /// The health message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

/// Live control of the driver's devices.
impl crate::core::control::Handler for Driver {
    type Request = ControlRequest;
    type Answer = ControlAnswer;

    fn refusal(error: String) -> ControlAnswer {
        ControlAnswer { ok: false, error: Some(error), ..Default::default() }
    }

    async fn answer(&self, req: ControlRequest) -> ControlAnswer {
        match self.control_op(req) {
            Ok(()) => self.view(true),
            Err(e) => Self::refusal(e.to_string()),
        }
    }
}

/// A live-control answer.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlAnswer {
    /// Success.
    pub ok: bool,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The driver name.
    #[serde(default)]
    pub driver: String,
    /// The pool.
    #[serde(default)]
    pub pool: String,
    /// Device health.
    #[serde(default)]
    pub devices: Vec<DeviceState>,
    /// Prepared claims.
    #[serde(default)]
    pub prepared: Vec<PreparedClaim>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A stream fed by one producer future, which ends when the receiver is dropped.
fn async_stream<T, F, Fut>(f: F) -> impl Stream<Item = T> + Send + 'static
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use tokio_stream::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let fut = f(tx);
    // The producer runs inside the stream: polled only while the stream is
    // polled, dropped with it — no task of its own.
    let mut slot = Some(fut);
    let producer = tokio_stream::once(())
        .then(move |_| {
            let f = slot.take();
            async move {
                if let Some(f) = f {
                    f.await
                }
            }
        })
        .filter_map(|_| None::<T>);
    tokio_stream::wrappers::ReceiverStream::new(rx).merge(producer)
}

/// The v1 DRAPlugin service.
pub struct V1(pub Arc<Driver>);
/// The v1beta1 DRAPlugin service.
pub struct V1beta1(pub Arc<Driver>);
/// The v1 health service.
pub struct HealthV1(pub Arc<Driver>);
/// The v1alpha1 health service.
pub struct HealthV1alpha1(pub Arc<Driver>);

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for V1 {
    async fn node_prepare_resources(
        &self,
        r: Request<NodePrepareResourcesRequest>,
    ) -> Result<Response<NodePrepareResourcesResponse>, Status> {
        self.0.prepare_call(r.into_inner()).await.map(Response::new)
    }
    async fn node_unprepare_resources(
        &self,
        r: Request<NodeUnprepareResourcesRequest>,
    ) -> Result<Response<NodeUnprepareResourcesResponse>, Status> {
        self.0.unprepare(r.into_inner()).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl v1b::dra_plugin_server::DraPlugin for V1beta1 {
    async fn node_prepare_resources(
        &self,
        r: Request<v1b::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1b::NodePrepareResourcesResponse>, Status> {
        let resp = self.0.prepare_call(convert(&r.into_inner())).await?;
        Ok(Response::new(convert(&resp)))
    }
    async fn node_unprepare_resources(
        &self,
        r: Request<v1b::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1b::NodeUnprepareResourcesResponse>, Status> {
        let resp = self.0.unprepare(convert(&r.into_inner())).await?;
        Ok(Response::new(convert(&resp)))
    }
}

#[tonic::async_trait]
impl h1::dra_resource_health_server::DraResourceHealth for HealthV1 {
    type NodeWatchResourcesStream = BoxStream<h1::NodeWatchResourcesResponse>;
    async fn node_watch_resources(
        &self,
        _: Request<h1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        use tokio_stream::StreamExt;
        self.0.health_watch(HEALTH_V1)?;
        let s = self.0.health_stream().map(|r| r.map(|devices| h1::NodeWatchResourcesResponse { devices }));
        Ok(Response::new(Box::pin(s)))
    }
}

#[tonic::async_trait]
impl h1a::dra_resource_health_server::DraResourceHealth for HealthV1alpha1 {
    type NodeWatchResourcesStream = BoxStream<h1a::NodeWatchResourcesResponse>;
    async fn node_watch_resources(
        &self,
        _: Request<h1a::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        use tokio_stream::StreamExt;
        self.0.health_watch(HEALTH_V1ALPHA1)?;
        let s = self.0.health_stream().map(|r| r.map(|devices| convert(&h1::NodeWatchResourcesResponse { devices })));
        Ok(Response::new(Box::pin(s)))
    }
}

/// Whether `name` is a temp file [`crate::core::files::write_atomic`] made
/// for one of `driver`'s CDI specs: `.dpctl-dra-<driver>-<word>.json.tmp-`
/// followed by tempfile's random letters and digits.
fn is_leftover_temp(name: &str, driver: &str) -> bool {
    let Some(rest) = name.strip_prefix(&format!(".dpctl-dra-{driver}-")) else { return false };
    let Some((word, random)) = rest.split_once(".json.tmp-") else { return false };
    !word.is_empty() && !random.is_empty() && random.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_drivers_spec_temp_files_are_leftovers() {
        let d = "gpu.example.com";
        assert!(is_leftover_temp(".dpctl-dra-gpu.example.com-u-1.json.tmp-a1B2c3", d));
        assert!(is_leftover_temp(".dpctl-dra-gpu.example.com-common.json.tmp-Zz9", d));
        for other in [
            "dpctl-dra-gpu.example.com-u-1.json",
            ".dpctl-dra-gpu.example.com-u-1.json",
            ".dpctl-dra-nic.example.com-u-1.json.tmp-a1B2c3",
            ".dpctl-dra-gpu.example.com-u-1.json.tmp-",
            ".dpctl-dra-gpu.example.com-u-1.json.tmp-a/b",
            ".vendor.json.tmp-a1B2c3",
            ".dpctl-dra-gpu.example.com-.json.tmp-abc",
        ] {
            assert!(!is_leftover_temp(other, d), "{other}");
        }
    }

    fn request(uid: &str) -> (NodePrepareResourcesRequest, NodeUnprepareResourcesRequest) {
        let claims = vec![Claim { namespace: "ml".into(), name: "gpu".into(), uid: uid.into() }];
        (NodePrepareResourcesRequest { claims: claims.clone() }, NodeUnprepareResourcesRequest { claims })
    }

    /// The helper carries out the core's plans (no sockets: its calls, in process).
    #[tokio::test]
    async fn the_helper_writes_what_the_core_decides_and_undoes_what_it_could_not_write() {
        let dir = crate::core::transport::TempDir::new("dra-helper").unwrap();
        let cfg = Arc::new(Config {
            cdi_dir: dir.path().join("cdi"),
            plugin_dir: dir.path().join("plugin"),
            ..crate::plugin::dra::test_config(vec![])
        });
        let tasks = crate::core::task::Tasks::new();
        let (prep, unprep) = request("u-1");
        let d = Driver::new(cfg.clone(), Logger::silent(), tasks.clone());
        let resp = d.prepare(prep.clone()).await.unwrap();
        let answer = &resp.claims["u-1"];
        assert_eq!((answer.error.as_str(), answer.devices.len()), ("", 1));
        assert_eq!(answer.devices[0].cdi_device_ids, ["k8s.gpu.example.com/claim=u-1-dev-0"]);
        let path = claims::cdi_path(&cfg, "u-1");
        let spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(spec["devices"][0]["name"], "u-1-dev-0");
        assert_eq!(d.view(true).prepared.len(), 1);
        // Another instance answers the same from the spec and unprepares it.
        let other = Driver::new(cfg.clone(), Logger::silent(), tasks.clone());
        assert_eq!(other.prepare(prep.clone()).await.unwrap(), resp);
        let un = other.unprepare(unprep).await.unwrap();
        assert_eq!(un.claims["u-1"].error, "");
        assert!(!path.exists() && other.view(true).prepared.is_empty());
        // A spec that cannot be written is the claim's error, and it is not recorded.
        let blocked = Arc::new(Config { cdi_dir: dir.path().join("file"), ..(*cfg).clone() });
        std::fs::write(&blocked.cdi_dir, "").unwrap();
        let d = Driver::new(blocked, Logger::silent(), tasks.clone());
        let resp = d.prepare(prep).await.unwrap();
        assert!(resp.claims["u-1"].error.starts_with("cannot create CDI spec dir"), "{resp:?}");
        assert!(d.view(true).prepared.is_empty());
        tasks.stop().await;
    }

    #[test]
    fn control_requests_keep_their_wire_form() {
        assert_eq!(serde_json::to_string(&ControlRequest::List).unwrap(), r#"{"op":"list"}"#);
        let set = ControlRequest::SetHealth {
            devices: vec!["dev-0".into()],
            health: "Unhealthy".into(),
            message: Some("XID 79".into()),
        };
        let wire = r#"{"op":"set-health","devices":["dev-0"],"health":"Unhealthy","message":"XID 79"}"#;
        assert_eq!(serde_json::to_string(&set).unwrap(), wire);
        assert_eq!(serde_json::from_str::<ControlRequest>(wire).unwrap(), set);
        // Missing fields reach the handler, which names what is wrong.
        assert_eq!(
            serde_json::from_str::<ControlRequest>(r#"{"op":"set-health"}"#).unwrap(),
            ControlRequest::SetHealth { devices: vec![], health: String::new(), message: None }
        );
        assert!(serde_json::from_str::<ControlRequest>(r#"{"op":"add","devices":["x"]}"#).is_err());
    }
}
