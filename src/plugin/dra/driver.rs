//! The simulated DRA driver's state and its gRPC services: DRAPlugin (v1 and
//! v1beta1 over one implementation), DRAResourceHealth (v1 and v1alpha1 over
//! one snapshot channel), CDI spec files per prepared claim, and the live
//! control handler. Faults (see [`super::Fault`]) break one rule each.

use super::{metadata, Config, Fault};
use crate::api::dra_health_v1::{self as h1, DeviceHealth, DeviceIdentifier, HealthStatus};
use crate::api::dra_health_v1alpha1 as h1a;
use crate::api::dra_v1::{
    self as v1, Claim, Device, NodePrepareResourceResponse, NodePrepareResourcesRequest, NodePrepareResourcesResponse,
    NodeUnprepareResourceResponse, NodeUnprepareResourcesRequest, NodeUnprepareResourcesResponse,
};
use crate::api::dra_v1beta1 as v1b;
use crate::client::dra::convert;
use crate::core::log::Logger;
use crate::protocol::dra::{health_word, parse_health, safe_word, MAX_HEALTH_MESSAGE};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// One simulated device's health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceState {
    /// Device name (unique in the pool).
    pub name: String,
    /// Healthy, Unhealthy or Unknown.
    pub health: String,
    /// The health message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Unix seconds of the last health change.
    pub updated: i64,
}

/// One prepared claim.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedClaim {
    /// namespace/name.
    pub claim: String,
    /// Its UID.
    pub uid: String,
    /// The devices it got.
    pub devices: Vec<String>,
    /// The CDI spec file written for it.
    pub cdi_spec: String,
    /// The preparation run that named its CDI devices (`racy-prepare` only).
    #[serde(skip)]
    pub run: Option<u64>,
}

#[derive(Default)]
struct State {
    prepared: BTreeMap<String, PreparedClaim>,
    prepares: u64,
}

/// Why a file of the driver's (a CDI spec, the `answer-from-checkpoint`
/// checkpoint) could not be written; the claim's error says it.
#[derive(Debug)]
pub enum FileError {
    /// The CDI spec directory could not be made.
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The content could not be encoded.
    Encode(serde_json::Error),
    /// The file could not be written.
    Write {
        /// `CDI spec` or `the checkpoint`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::CreateDir { dir, source } => write!(f, "cannot create CDI spec dir {}: {source}", dir.display()),
            FileError::Encode(e) => e.fmt(f),
            FileError::Write { what, path, source } => write!(f, "cannot write {what} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::CreateDir { source, .. } | FileError::Write { source, .. } => Some(source),
            FileError::Encode(e) => Some(e),
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

/// The driver: configuration, prepared claims, device health.
pub struct Driver {
    cfg: Arc<Config>,
    state: Mutex<State>,
    health: watch::Sender<Vec<DeviceState>>,
    log: Logger,
    stop: CancellationToken,
    /// The run's task group: `late-prepare` runs prepares in it, past their call.
    tasks: crate::core::task::Tasks,
    /// Set by `deadlock-after-unknown-unprepare`: the lock is never released.
    wedged: std::sync::atomic::AtomicBool,
    /// Cancelled when a fault makes the driver crash (`exit-on-missing-claim`);
    /// [`Driver::crashed`] tells its owner, which ends the process as a panic would.
    crash: CancellationToken,
    /// What the crash says (a Go panic's line).
    crash_words: Mutex<String>,
}

/// One CDI device of a claim's spec: a device, or a share of one, and the
/// env its opaque config gives it.
struct SpecDevice {
    device: String,
    share: Option<String>,
    config: Vec<String>,
}

/// One device of a claim's allocation (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatedDevice {
    /// The request (`<request>` or `<request>/<subrequest>`).
    pub request: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
    /// Its shareID (a device with allowMultipleAllocations), returned in
    /// `Device.share_id` as the kubeletplugin helper does (draplugin.go).
    pub share_id: Option<String>,
    /// The CDI env its opaque config for this driver gives it, in the e2e
    /// test driver's convention: `admin_KEY=VALUE` from the DeviceClass's,
    /// `user_KEY=VALUE` from the claim's, later entries winning; sorted.
    pub config_env: Vec<String>,
}

/// The config entries of `alloc` that apply to `request` (none named: all;
/// else the request or its parent, `parent/sub`), as resourceclaim.ConfigForResult.
fn configs_for<'a>(alloc: &'a serde_json::Value, request: &str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    let base = request.split('/').next().unwrap_or(request).to_string();
    let request = request.to_string();
    alloc["devices"]["config"].as_array().into_iter().flatten().filter(move |c| {
        let names: Vec<&str> = c["requests"].as_array().into_iter().flatten().filter_map(|r| r.as_str()).collect();
        c["opaque"].is_object()
            && (names.is_empty() || names.contains(&request.as_str()) || names.contains(&base.as_str()))
    })
}

/// The env `driver`'s opaque configs for `request` give (see
/// [`AllocatedDevice::config_env`]): each key of the parameters object,
/// its value a string as it is, any other value as JSON; parameters that
/// are not an object are an error (the e2e test driver's `extractParameters`).
pub fn config_env(alloc: &serde_json::Value, request: &str, driver: &str) -> Result<Vec<String>, String> {
    let mut env = BTreeMap::new();
    for (i, c) in configs_for(alloc, request).enumerate() {
        if c["opaque"]["driver"] != driver {
            continue;
        }
        let kind = if c["source"] == "FromClass" { "admin" } else { "user" };
        let params = &c["opaque"]["parameters"];
        if params.is_null() {
            continue;
        }
        let Some(map) = params.as_object() else {
            return Err(format!("parameters in config #{i}: decoding {kind} parameters: not a JSON object: {params}"));
        };
        for (k, v) in map {
            // Strings as they are (the e2e test driver's convention); any other value as its JSON,
            // so a driver-specific schema (nested objects) reaches the edits too.
            env.insert(format!("{kind}_{k}"), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()));
        }
    }
    Ok(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect())
}

/// What the kubeletplugin helper checks in a fetched ResourceClaim: the UID
/// matches the one the kubelet sent, `status.allocation` is there; the
/// result is the allocation's devices of `driver`.
pub fn allocation_of(claim: &serde_json::Value, c: &Claim, driver: &str) -> Result<Vec<AllocatedDevice>, String> {
    let uid = claim["metadata"]["uid"].as_str().unwrap_or_default();
    if uid != c.uid {
        return Err(format!(
            "claim {}/{}: the API server has UID {uid:?}, the kubelet asked for {:?} (a claim of the same name was re-created)",
            c.namespace, c.name, c.uid
        ));
    }
    let Some(alloc) = claim["status"].get("allocation").filter(|a| a.is_object()) else {
        return Err(format!("claim {}/{}: not allocated (no status.allocation)", c.namespace, c.name));
    };
    let results = alloc["devices"]["results"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .filter(|r| r["driver"] == driver)
        .map(|r| {
            let request = r["request"].as_str().unwrap_or_default().to_string();
            Ok(AllocatedDevice {
                config_env: config_env(alloc, &request, driver)
                    .map_err(|e| format!("claim {}/{}: {e}", c.namespace, c.name))?,
                request,
                pool: r["pool"].as_str().unwrap_or_default().to_string(),
                device: r["device"].as_str().unwrap_or_default().to_string(),
                share_id: r["shareID"].as_str().map(str::to_string),
            })
        })
        .collect()
}

/// The claim's `resource.kubernetes.io/pod-claim-name` annotation (a claim
/// made from a template for a pod's claim of that name), as the helper's
/// `newClaimRef` reads it.
pub fn pod_claim_name(claim: &serde_json::Value) -> Option<String> {
    claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"].as_str().map(str::to_string)
}

/// What a prepare learns of a claim from the API server: its allocation for
/// this driver and its pod claim name ([`pod_claim_name`]).
type Fetched = (Vec<AllocatedDevice>, Option<String>);

/// GET the claim as the kubeletplugin helper does (resource.k8s.io v1, then
/// v1beta2 and v1beta1 where a version is not served) and read its
/// allocation for `driver`.
async fn fetch_allocation(
    api: &super::slices::ApiServer,
    c: &Claim,
    driver: &str,
    check_uid: bool,
) -> Result<Fetched, String> {
    let t = std::time::Duration::from_secs(10);
    let mut last = String::new();
    for v in ["v1", "v1beta2", "v1beta1"] {
        let path = format!("/apis/resource.k8s.io/{v}/namespaces/{}/resourceclaims/{}", c.namespace, c.name);
        let (st, body) = super::slices::request(api, "GET", &path, None, t)
            .await
            .map_err(|e| format!("fetch ResourceClaim {}/{}: {e}", c.namespace, c.name))?;
        match st {
            200..=299 if !check_uid => {
                let mut body = body;
                body["metadata"]["uid"] = json!(c.uid);
                return Ok((allocation_of(&body, c, driver)?, pod_claim_name(&body)));
            }
            200..=299 => return Ok((allocation_of(&body, c, driver)?, pod_claim_name(&body))),
            // The claim is not there (a NotFound naming it): no other version has it.
            404 if body["details"]["name"].is_string() => {
                let msg = body["message"].as_str().unwrap_or("not found");
                return Err(format!("fetch ResourceClaim {}/{}: {msg} ({NOT_FOUND})", c.namespace, c.name));
            }
            // The version is not served (a bare 404): the next one may be.
            404 => last = body["message"].as_str().unwrap_or("not found").to_string(),
            _ => {
                let msg = body["message"].as_str().unwrap_or_default();
                return Err(format!(
                    "fetch ResourceClaim {}/{}: the API server answered {st} {msg}",
                    c.namespace, c.name
                ));
            }
        }
    }
    Err(format!("fetch ResourceClaim {}/{}: {last} ({NOT_FOUND})", c.namespace, c.name))
}

/// How long `late-prepare` holds each prepare before running it.
pub const LATE_BY: std::time::Duration = std::time::Duration::from_millis(300);

/// Marks a claim the API server does not have.
const NOT_FOUND: &str = "NotFound";

/// How often an unchanged health snapshot is sent again: half the
/// `health_check_timeout_seconds` sent (the kubelet's 30 s default when 0).
pub fn resend_every(timeout_secs: i64) -> std::time::Duration {
    let t = u64::try_from(timeout_secs).ok().filter(|s| *s > 0).unwrap_or(30);
    std::time::Duration::from_millis(t * 500)
}

/// Unix seconds now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl Driver {
    /// A driver with every device Healthy.
    pub fn new(cfg: Arc<Config>, log: Logger, tasks: crate::core::task::Tasks) -> Arc<Self> {
        let now = now_secs();
        let devices = cfg
            .devices
            .iter()
            .map(|n| DeviceState { name: n.clone(), health: "Healthy".into(), message: String::new(), updated: now })
            .collect();
        let (health, _) = watch::channel(devices);
        Arc::new(Driver {
            cfg,
            state: Mutex::new(State::default()),
            health,
            log,
            stop: tasks.token().clone(),
            tasks,
            wedged: std::sync::atomic::AtomicBool::new(false),
            crash: CancellationToken::new(),
            crash_words: Mutex::new(String::new()),
        })
    }

    /// Crash as a driver whose handler panics: the words are kept for the
    /// owner of the process, which ends it ([`Driver::crashed`]); the call
    /// that crashed never answers (its caller sees the connection go).
    async fn crash(&self, words: String) -> ! {
        if let Ok(mut w) = self.crash_words.lock() {
            *w = words;
        }
        self.crash.cancel();
        std::future::pending().await
    }

    /// Resolves once a fault crashed the driver, with the panic's words.
    pub async fn crashed(&self) -> String {
        self.crash.cancelled().await;
        self.crash_words.lock().map(|w| w.clone()).unwrap_or_default()
    }

    fn has(&self, f: &Fault) -> bool {
        self.cfg.faults.contains(f)
    }

    /// The CDI kind of this driver's specs: `k8s.<driver>/claim`.
    pub fn cdi_kind(&self) -> String {
        format!("k8s.{}/claim", self.cfg.driver)
    }

    fn cdi_path(&self, uid: &str) -> PathBuf {
        self.cfg.cdi_dir.join(format!("dpctl-dra-{}-{}.json", self.cfg.driver, safe_word(uid)))
    }

    /// The CDI device name of device `d` of claim `uid` (the same in every
    /// instance; with `new-cdi-ids`, this process's ID is in it); a share
    /// of a shareable device (its allocation's shareID) has a device of its
    /// own, `<uid>-<device>-share-<shareID>`.
    fn cdi_device(&self, uid: &str, d: &str, share: Option<&String>, run: Option<u64>) -> String {
        let base = if self.has(&Fault::NewCdiIds) {
            format!("{}-{d}-{}", safe_word(uid), std::process::id())
        } else {
            format!("{}-{d}", safe_word(uid))
        };
        let base = match share {
            Some(id) => format!("{base}-share-{}", safe_word(id)),
            None => base,
        };
        match run {
            Some(r) => format!("{base}-r{r}"),
            None => base,
        }
    }

    /// With `deadlock-after-unknown-unprepare` once triggered: the call
    /// waits for the lock that is never released (until the process stops).
    async fn wait_for_lock(&self) -> Result<(), Status> {
        if self.wedged.load(std::sync::atomic::Ordering::SeqCst) {
            self.stop.cancelled().await;
            return Err(Status::unavailable("the driver is stopping"));
        }
        Ok(())
    }

    /// A claim an earlier instance prepared, read back from its CDI spec
    /// (the devices in `DPCTL_DRA_DEVICE`, the claim in `DPCTL_DRA_CLAIM`):
    /// the spec is this driver's record, so a restarted or second instance
    /// answers and unprepares the same (none with `memory-only-state`).
    fn read_back(&self, uid: &str) -> Option<PreparedClaim> {
        if self.has(&Fault::MemoryOnlyState) {
            return None;
        }
        let path = self.cdi_path(uid);
        let text = crate::core::limits::read_file(&path, 1 << 20, "CDI spec").ok()?;
        let spec: serde_json::Value = serde_json::from_str(&text).ok()?;
        let mut devices = Vec::new();
        let mut claim = String::new();
        let prefix = format!("{}-", safe_word(uid));
        for d in spec["devices"].as_array()? {
            let n = devices.len();
            for e in d["containerEdits"]["env"].as_array().into_iter().flatten().filter_map(|e| e.as_str()) {
                if let Some(x) = e.strip_prefix("DPCTL_DRA_DEVICE=") {
                    devices.push(x.to_string());
                } else if let Some(x) = e.strip_prefix("DPCTL_DRA_CLAIM=") {
                    claim = x.to_string();
                }
            }
            // No env (edits left empty): the device is in the CDI name, `<uid>-<device>`.
            if devices.len() == n {
                if let Some(x) = d["name"].as_str().and_then(|x| x.strip_prefix(&prefix)) {
                    devices.push(x.split("-share-").next().unwrap_or(x).to_string());
                }
            }
        }
        (!devices.is_empty()).then(|| PreparedClaim {
            claim,
            uid: uid.to_string(),
            devices,
            cdi_spec: path.display().to_string(),
            run: None,
        })
    }

    /// `answer-from-checkpoint`: the driver's own checkpoint of prepared claims.
    fn checkpoint_path(&self) -> PathBuf {
        self.cfg.plugin_dir.join(format!("dpctl-dra-{}-checkpoint.json", self.cfg.driver))
    }

    fn checkpoint(&self) -> BTreeMap<String, PreparedClaim> {
        crate::core::limits::read_file(&self.checkpoint_path(), 16 << 20, "checkpoint")
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// Record (`Some`) or forget (`None`) a claim in the checkpoint (`answer-from-checkpoint` only).
    fn checkpoint_set(&self, uid: &str, p: Option<&PreparedClaim>) -> Result<(), FileError> {
        if !self.has(&Fault::AnswerFromCheckpoint) {
            return Ok(());
        }
        let mut all = self.checkpoint();
        match p {
            Some(p) => all.insert(uid.to_string(), p.clone()),
            None => all.remove(uid),
        };
        let text = serde_json::to_vec(&all).map_err(FileError::Encode)?;
        crate::core::files::write_atomic(&self.checkpoint_path(), &text).map_err(|source| FileError::Write {
            what: "the checkpoint",
            path: self.checkpoint_path(),
            source,
        })
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

    /// The common spec's CDI ID (`--common-cdi-spec`): `k8s.<driver>/claim=common`.
    pub fn common_cdi_id(&self) -> String {
        format!("{}=common", self.cdi_kind())
    }

    /// With `--common-cdi-spec`, write the spec shared by every claim at start
    /// (as the example driver's `CreateCommonSpecFile` does); it stays when
    /// claims are unprepared. Without, nothing.
    pub fn write_common_spec(&self) -> Result<(), FileError> {
        if !self.cfg.common_cdi_spec {
            return Ok(());
        }
        let path = self.cfg.cdi_dir.join(format!("dpctl-dra-{}-common.json", self.cfg.driver));
        let spec = json!({
            "cdiVersion": "0.6.0",
            "kind": self.cdi_kind(),
            "devices": [{"name": "common", "containerEdits": {"env": [format!("DPCTL_DRA_DRIVER={}", self.cfg.driver)]}}],
        });
        let text = serde_json::to_vec_pretty(&spec).map_err(FileError::Encode)?;
        write_cdi_file(&self.cfg.cdi_dir, &path, &text)
    }

    /// Write the claim's CDI spec (atomically; only files named as ours):
    /// a CDI device per entry (a device, or a share of one).
    fn write_spec(&self, c: &Claim, entries: &[SpecDevice], run: Option<u64>) -> Result<PathBuf, FileError> {
        let path = self.cdi_path(&c.uid);
        let env = |e: &SpecDevice| -> Vec<String> {
            let d = &e.device;
            let mut env: Vec<String> = if self.cfg.cdi_env.is_empty() {
                vec![format!("DPCTL_DRA_DEVICE={d}"), format!("DPCTL_DRA_CLAIM={}/{}", c.namespace, c.name)]
            } else {
                self.cfg.cdi_env.iter().map(|(k, v)| format!("{k}={}", v.replace("{id}", d))).collect()
            };
            if let (true, Some(id)) = (self.cfg.cdi_env.is_empty(), &e.share) {
                env.push(format!("DPCTL_DRA_SHARE={id}"));
            }
            env.extend(e.config.iter().cloned());
            env
        };
        let spec = json!({
            "cdiVersion": "0.6.0",
            "kind": self.cdi_kind(),
            "devices": entries.iter().map(|e| json!({
                "name": self.cdi_device(&c.uid, &e.device, e.share.as_ref(), run),
                "containerEdits": if self.has(&Fault::EmptyCdiEdits) { json!({}) } else { json!({"env": env(e)}) },
            })).collect::<Vec<_>>(),
        });
        let text = serde_json::to_vec_pretty(&spec).map_err(FileError::Encode)?;
        write_cdi_file(&self.cfg.cdi_dir, &path, &text)?;
        Ok(path)
    }

    /// A NodePrepareResources call: [`Driver::prepare`], or with
    /// `late-prepare` the same run in the driver's task group after
    /// [`LATE_BY`], so it completes when the caller has given up on the call
    /// (its deadline passed, the gRPC server dropped the call).
    pub async fn prepare_call(
        self: &Arc<Self>,
        req: NodePrepareResourcesRequest,
    ) -> Result<NodePrepareResourcesResponse, Status> {
        if !self.has(&Fault::LatePrepare) {
            return self.prepare(req).await;
        }
        let me = Arc::clone(self);
        let work = self.tasks.spawn_joined(async move {
            tokio::select! {
                _ = tokio::time::sleep(LATE_BY) => me.prepare(req).await,
                _ = me.stop.cancelled() => Err(Status::unavailable("the driver is stopping")),
            }
        });
        work.await.map_err(|e| Status::internal(format!("prepare task: {e}")))?
    }

    /// Prepare claims (the v1 messages; v1beta1 converts).
    pub async fn prepare(&self, req: NodePrepareResourcesRequest) -> Result<NodePrepareResourcesResponse, Status> {
        self.wait_for_lock().await?;
        // racy-prepare: claims not prepared when the call starts are prepared
        // again from scratch after a slow step, whatever a concurrent call did.
        let fresh: Vec<bool> = if self.has(&Fault::RacyPrepare) {
            let st = self.state.lock().map_err(|_| Status::internal("state lock poisoned"))?;
            req.claims.iter().map(|c| !st.prepared.contains_key(&c.uid)).collect()
        } else {
            vec![false; req.claims.len()]
        };
        if fresh.contains(&true) {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                _ = self.stop.cancelled() => return Err(Status::unavailable("the driver is stopping")),
            }
        }
        if let Some(d) = self.cfg.faults.iter().find_map(|f| if let Fault::Slow(d) = f { Some(*d) } else { None }) {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = self.stop.cancelled() => return Err(Status::unavailable("the driver is stopping")),
            }
        }
        let mut resp = NodePrepareResourcesResponse::default();
        // With an API server (--kubeconfig), prepare what the claim's allocation
        // names, as a real driver (the kubeletplugin helper) does; without, choose.
        let mut allocations = Vec::new();
        for c in &req.claims {
            allocations.push(match &self.cfg.publish {
                Some((api, _)) if !self.has(&Fault::IgnoreAllocation) => {
                    let got = fetch_allocation(api, c, &self.cfg.driver, !self.has(&Fault::IgnoreUid)).await;
                    if let (Err(e), true) = (&got, self.has(&Fault::ExitOnMissingClaim)) {
                        if e.ends_with(&format!("({NOT_FOUND})")) {
                            // As a driver whose client panics on the NotFound (the bug class).
                            self.crash(format!("panic: interface conversion: {e}")).await;
                        }
                    }
                    Some(got)
                }
                _ => None,
            });
        }
        let pod_claims: Vec<Option<String>> =
            allocations.iter().map(|a| a.as_ref().and_then(|r| r.as_ref().ok()).and_then(|(_, p)| p.clone())).collect();
        let allocations: Vec<Option<Result<Vec<AllocatedDevice>, String>>> =
            allocations.into_iter().map(|a| a.map(|r| r.map(|(d, _)| d))).collect();
        let mut st = self.state.lock().map_err(|_| Status::internal("state lock poisoned"))?;
        st.prepares += 1;
        let rotate = if self.has(&Fault::NotIdempotent) { st.prepares as usize } else { 0 };
        for ((c, allocated), fresh) in req.claims.iter().zip(allocations).zip(fresh) {
            // Prepared by a concurrent call since this one looked: the
            // "completed" state is overwritten and the preparation runs again (nvidia-gpu#729).
            let raced = fresh && st.prepared.remove(&c.uid).is_some();
            let run = raced.then_some(st.prepares);
            let answer = match allocated {
                Some(Err(e)) => NodePrepareResourceResponse { devices: vec![], error: e },
                Some(Ok(a)) => self.prepare_one(&mut st, c, rotate, Some(a), run),
                None => self.prepare_one(&mut st, c, rotate, None, run),
            };
            resp.claims.insert(c.uid.clone(), answer);
        }
        drop(st);
        if !self.cfg.metadata.is_empty() {
            for (c, pod_claim) in req.claims.iter().zip(pod_claims) {
                if let Some(answer) = resp.claims.get_mut(&c.uid).filter(|a| a.error.is_empty()) {
                    self.write_metadata(c, pod_claim, answer);
                }
            }
        }
        // The answer names requests without their subrequest (`two/pair` → `two`),
        // as the helper's stripSubrequestNames does: the kubelet matches them
        // against the containers' `resources.claims[].request` (claiminfo.go).
        for answer in resp.claims.values_mut() {
            for d in &mut answer.devices {
                for r in &mut d.request_names {
                    if let Some((base, _)) = r.split_once('/') {
                        *r = base.to_string();
                    }
                }
            }
        }
        if self.has(&Fault::MissingUid) {
            if let Some(last) = req.claims.last() {
                resp.claims.remove(&last.uid);
            }
        }
        if self.has(&Fault::ExtraUid) {
            resp.claims.insert("dpctl-not-requested".into(), NodePrepareResourceResponse::default());
        }
        if self.has(&Fault::AnswerOtherClaims) {
            let others: Vec<String> = self
                .state
                .lock()
                .map(|st| st.prepared.keys().filter(|u| !resp.claims.contains_key(*u)).cloned().collect())
                .unwrap_or_default();
            for u in others {
                resp.claims.insert(u, NodePrepareResourceResponse::default());
            }
        }
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
        Ok(resp)
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
        let mut by_request: BTreeMap<String, Vec<metadata::Device>> = BTreeMap::new();
        for d in &answer.devices {
            for r in &d.request_names {
                by_request.entry(r.clone()).or_default().push(metadata::Device {
                    pool: d.pool_name.clone(),
                    name: d.device_name.clone(),
                    // What the e2e test driver returns as the devices' metadata.
                    attributes: [
                        ("driverName".to_string(), self.cfg.driver.clone()),
                        ("pool".to_string(), d.pool_name.clone()),
                        ("device".to_string(), d.device_name.clone()),
                    ]
                    .into_iter()
                    .collect(),
                    network: None,
                });
            }
        }
        if by_request.is_empty() {
            return;
        }
        let cfg = &self.cfg;
        let dirs = (cfg.plugin_dir.as_path(), cfg.cdi_dir.as_path(), &cfg.host_root);
        match metadata::write_claim(&cfg.metadata, &cfg.driver, dirs, &claim, &by_request) {
            Ok(ids) => {
                let mut injected = std::collections::BTreeSet::new();
                for d in &mut answer.devices {
                    for r in &d.request_names {
                        let base = metadata::base_request(r);
                        if let Some(id) = ids.get(base).filter(|_| !injected.contains(base)) {
                            d.cdi_device_ids.push(id.clone());
                            injected.insert(base.to_string());
                        }
                    }
                }
                self.log.event(
                    "device-metadata",
                    &[("claim", json!(format!("{}/{}", c.namespace, c.name))), ("cdiIds", json!(ids))],
                );
            }
            Err(e) => self.log.event(
                "device-metadata-failed",
                &[("claim", json!(format!("{}/{}", c.namespace, c.name))), ("error", json!(e.to_string()))],
            ),
        }
    }

    fn prepare_one(
        &self,
        st: &mut State,
        c: &Claim,
        rotate: usize,
        allocated: Option<Vec<AllocatedDevice>>,
        run: Option<u64>,
    ) -> NodePrepareResourceResponse {
        let fail = |e: String| NodePrepareResourceResponse { devices: vec![], error: e };
        if let Some(msg) =
            self.cfg.faults.iter().find_map(|f| if let Fault::PrepareError(m) = f { Some(m) } else { None })
        {
            return fail(msg.clone());
        }
        if c.uid.is_empty() || c.namespace.is_empty() || c.name.is_empty() {
            return fail("the claim's namespace, uid and name are all required".into());
        }
        if self.has(&Fault::NotIdempotentError) && st.prepared.contains_key(&c.uid) {
            return fail(format!("claim {}/{} is already prepared", c.namespace, c.name));
        }
        // answer-from-checkpoint: a claim its checkpoint has is answered as recorded, its spec not written.
        let mut from_checkpoint = false;
        if !st.prepared.contains_key(&c.uid) && run.is_none() {
            let recorded = if self.has(&Fault::AnswerFromCheckpoint) { self.checkpoint().remove(&c.uid) } else { None };
            if let Some(p) = recorded {
                st.prepared.insert(c.uid.clone(), p);
                from_checkpoint = true;
            } else if let Some(p) = self.read_back(&c.uid) {
                st.prepared.insert(c.uid.clone(), p);
            }
        }
        let allocated = match allocated.map(|a| self.own_devices(c, a)) {
            Some(Err(e)) => return fail(e),
            Some(Ok(a)) => Some(a),
            None => None,
        };
        // The allocation's results, one per prepared device in order (a claim may
        // hold several shares of one device, KEP-5075: a result each); a device
        // not at its result's place (a repeat that picked another) takes the first naming it.
        let results: Vec<AllocatedDevice> = allocated.clone().unwrap_or_default();
        let result_of = |i: usize, d: &String| {
            results.get(i).filter(|a| a.device == *d).or_else(|| results.iter().find(|a| a.device == *d))
        };
        let ignore_config = self.has(&Fault::IgnoreConfig);
        let entry = |i: usize, d: &String| {
            let a = result_of(i, d);
            SpecDevice {
                device: d.clone(),
                share: a.and_then(|a| a.share_id.clone()),
                config: if ignore_config { vec![] } else { a.map(|a| a.config_env.clone()).unwrap_or_default() },
            }
        };
        let devices = match (st.prepared.get(&c.uid), allocated) {
            (Some(p), _) if rotate == 0 => p.devices.clone(),
            // The first prepare of a claim follows its allocation (not-idempotent only changes a repeat).
            (None, Some(a)) => a.into_iter().map(|a| a.device).collect(),
            _ => {
                let held: Vec<&String> =
                    st.prepared.iter().filter(|(u, _)| *u != &c.uid).flat_map(|(_, p)| &p.devices).collect();
                let free: Vec<&String> = self.cfg.devices.iter().filter(|d| !held.contains(d)).collect();
                if free.is_empty() {
                    return fail(format!(
                        "no free device in pool {}: all {} are prepared for other claims",
                        self.cfg.pool,
                        self.cfg.devices.len()
                    ));
                }
                let pick = if self.has(&Fault::IgnoreAllocation) { free.len() - 1 } else { rotate % free.len() };
                vec![free[pick].clone()]
            }
        };
        // The spec keeps every device this claim was given (a repeat that picks
        // another device, as not-idempotent does, leaves earlier CDI IDs resolvable).
        let earlier = st.prepared.get(&c.uid).map(|p| p.devices.clone()).unwrap_or_default();
        let mut in_spec: Vec<SpecDevice> = Vec::new();
        for e in earlier.iter().enumerate().chain(devices.iter().enumerate()).map(|(i, d)| entry(i, d)) {
            if !in_spec.iter().any(|x| x.device == e.device && x.share == e.share) {
                in_spec.push(e);
            }
        }
        let run = run.or_else(|| st.prepared.get(&c.uid).and_then(|p| p.run));
        let spec = if from_checkpoint && rotate == 0 {
            self.cdi_path(&c.uid)
        } else {
            match self.write_spec(c, &in_spec, run) {
                Ok(p) => p,
                Err(e) => return fail(e.to_string()),
            }
        };
        st.prepared.insert(
            c.uid.clone(),
            PreparedClaim {
                claim: format!("{}/{}", c.namespace, c.name),
                uid: c.uid.clone(),
                devices: devices.clone(),
                cdi_spec: spec.display().to_string(),
                run,
            },
        );
        if let Err(e) = self.checkpoint_set(&c.uid, st.prepared.get(&c.uid)) {
            return fail(e.to_string());
        }
        let kind = self.cdi_kind();
        NodePrepareResourceResponse {
            devices: devices
                .iter()
                .enumerate()
                .map(|(i, d)| (d, result_of(i, d)))
                .map(|(d, a)| Device {
                    request_names: if self.has(&Fault::ForeignRequestNames) {
                        vec!["gpu".to_string()]
                    } else {
                        a.map(|a| vec![a.request.clone()]).unwrap_or_default()
                    },
                    pool_name: if self.has(&Fault::NoPoolName) {
                        String::new()
                    } else if self.has(&Fault::WrongPool) {
                        format!("{}-other", self.cfg.pool)
                    } else {
                        self.cfg.pool.clone()
                    },
                    device_name: d.clone(),
                    cdi_device_ids: {
                        let mut ids = vec![if self.has(&Fault::BadCdiId) {
                            d.clone()
                        } else {
                            format!("{kind}={}", self.cdi_device(&c.uid, d, a.and_then(|a| a.share_id.as_ref()), run))
                        }];
                        if self.cfg.common_cdi_spec {
                            ids.push(self.common_cdi_id());
                        }
                        ids
                    },
                    share_id: a.and_then(|a| a.share_id.clone()),
                })
                .collect(),
            error: String::new(),
        }
    }

    /// The allocated devices this driver has (its pool, its device names);
    /// one it does not have is an error naming what it has.
    fn own_devices(&self, c: &Claim, a: Vec<AllocatedDevice>) -> Result<Vec<AllocatedDevice>, String> {
        if a.is_empty() {
            return Err(format!(
                "claim {}/{}: its allocation has no device of driver {}",
                c.namespace, c.name, self.cfg.driver
            ));
        }
        if let Some(x) = a.iter().find(|x| x.pool != self.cfg.pool || !self.cfg.devices.contains(&x.device)) {
            return Err(format!(
                "claim {}/{}: allocated device {}/{} is not one of this driver's (pool {}: {})",
                c.namespace,
                c.name,
                x.pool,
                x.device,
                self.cfg.pool,
                crate::core::text::id_list(&self.cfg.devices)
            ));
        }
        Ok(a)
    }

    /// Unprepare claims: remove their CDI specs; unknown claims are fine (idempotent).
    pub async fn unprepare(
        &self,
        req: NodeUnprepareResourcesRequest,
    ) -> Result<NodeUnprepareResourcesResponse, Status> {
        self.wait_for_lock().await?;
        let mut resp = NodeUnprepareResourcesResponse::default();
        let mut st = self.state.lock().map_err(|_| Status::internal("state lock poisoned"))?;
        for c in &req.claims {
            let mut error = String::new();
            let known = st.prepared.remove(&c.uid).or_else(|| self.read_back(&c.uid));
            if let Err(e) = self.checkpoint_set(&c.uid, None) {
                error = e.to_string();
            }
            if known.is_none() && self.has(&Fault::DeadlockAfterUnknownUnprepare) {
                // The early return for an unknown claim skips the unlock (nvidia-gpu#378).
                self.wedged.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if let Some(p) = known.filter(|_| !self.has(&Fault::KeepCdiSpec)) {
                if let Err(e) = std::fs::remove_file(&p.cdi_spec) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        error = format!("cannot remove CDI spec {}: {e}", p.cdi_spec);
                        st.prepared.insert(c.uid.clone(), p);
                    }
                }
            }
            resp.claims.insert(c.uid.clone(), NodeUnprepareResourceResponse { error });
        }
        drop(st);
        // --device-metadata: the claims unprepared lose their metadata files
        // and CDI specs (the helper's cleanupClaim; a failure is the claim's error).
        if !self.cfg.metadata.is_empty() {
            for c in &req.claims {
                let Some(answer) = resp.claims.get_mut(&c.uid).filter(|a| a.error.is_empty()) else { continue };
                let claim = metadata::ClaimRef {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    uid: c.uid.clone(),
                    pod_claim_name: None,
                };
                if let Err(e) =
                    metadata::cleanup_claim(&self.cfg.driver, &self.cfg.plugin_dir, &self.cfg.cdi_dir, &claim)
                {
                    answer.error = format!("clean up device metadata: {e}");
                }
            }
        }
        if self.has(&Fault::MissingUid) {
            if let Some(last) = req.claims.last() {
                resp.claims.remove(&last.uid);
            }
        }
        self.log.event("unprepare", &[("claims", json!(req.claims.iter().map(|c| c.uid.clone()).collect::<Vec<_>>()))]);
        Ok(resp)
    }

    /// The health snapshot as sent (faults applied).
    pub fn snapshot(&self, devices: &[DeviceState]) -> Vec<DeviceHealth> {
        let mut out: Vec<DeviceHealth> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceHealth {
                device: Some(DeviceIdentifier {
                    pool_name: if self.has(&Fault::HealthBadDevice) && i == 0 {
                        String::new()
                    } else {
                        self.cfg.pool.clone()
                    },
                    device_name: d.name.clone(),
                }),
                health: parse_health(&d.health).unwrap_or(HealthStatus::Unknown) as i32,
                last_updated_time: if self.has(&Fault::NoTimestamp) { 0 } else { d.updated },
                health_check_timeout_seconds: self.cfg.health_timeout_secs,
                message: if self.has(&Fault::LongMessage) {
                    "x".repeat(MAX_HEALTH_MESSAGE + 1)
                } else {
                    d.message.clone()
                },
            })
            .collect();
        if self.has(&Fault::HealthUnknownDevice) {
            out.push(DeviceHealth {
                device: Some(DeviceIdentifier { pool_name: self.cfg.pool.clone(), device_name: "dpctl-ghost".into() }),
                health: HealthStatus::Healthy as i32,
                last_updated_time: now_secs(),
                health_check_timeout_seconds: self.cfg.health_timeout_secs,
                message: String::new(),
            });
        }
        out
    }

    fn health_stream(self: &Arc<Self>) -> impl Stream<Item = Result<Vec<DeviceHealth>, Status>> + Send + 'static {
        let me = self.clone();
        let mut rx = self.health.subscribe();
        let once = self.has(&Fault::HealthStreamEnd);
        // stale-health: unchanged health is never sent again.
        let resend = if self.has(&Fault::StaleHealth) {
            std::time::Duration::from_secs(365 * 24 * 3600)
        } else {
            resend_every(self.cfg.health_timeout_secs)
        };
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

    fn control_op(&self, req: ControlRequest) -> Result<(), String> {
        match req {
            ControlRequest::List => Ok(()),
            ControlRequest::UpdateMetadata { claim, request, network } => {
                if self.cfg.metadata.is_empty() {
                    return Err("device metadata is not enabled (dra serve --device-metadata)".into());
                }
                let uid = self
                    .state
                    .lock()
                    .map_err(|_| "state lock poisoned".to_string())?
                    .prepared
                    .values()
                    .find(|p| p.claim == claim)
                    .map(|p| p.uid.clone())
                    .ok_or_else(|| format!("no prepared claim {}", crate::core::text::quote(&claim)))?;
                let (namespace, name) = claim.split_once('/').ok_or("the claim is namespace/name")?;
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
                .map_err(|e| e.to_string())?;
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
            ControlRequest::SetHealth { devices, health, message } => {
                let h = parse_health(&health).ok_or("health must be Healthy, Unhealthy or Unknown")?;
                if devices.is_empty() {
                    return Err("no device names given".into());
                }
                let unknown: Vec<&String> = devices.iter().filter(|d| !self.cfg.devices.contains(d)).collect();
                if !unknown.is_empty() {
                    return Err(format!(
                        "no device {} in pool {} (devices: {})",
                        crate::core::text::id_list(&unknown),
                        self.cfg.pool,
                        crate::core::text::id_list(&self.cfg.devices)
                    ));
                }
                let now = now_secs();
                self.health.send_modify(|devs| {
                    for d in devs.iter_mut().filter(|d| devices.contains(&d.name)) {
                        d.health = health_word(h as i32).into();
                        d.message = message.clone().unwrap_or_default();
                        d.updated = now;
                    }
                });
                self.log.event(
                    "control",
                    &[
                        ("op", json!("set-health")),
                        ("devices", json!(devices)),
                        ("health", json!(health_word(h as i32))),
                    ],
                );
                Ok(())
            }
        }
    }

    /// What live control shows.
    pub fn view(&self, ok: bool) -> ControlAnswer {
        let prepared = self.state.lock().map(|s| s.prepared.values().cloned().collect()).unwrap_or_default();
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
            Err(e) => Self::refusal(e),
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

    fn claim() -> Claim {
        Claim { namespace: "ml".into(), name: "gpu".into(), uid: "u-1".into() }
    }

    #[test]
    fn opaque_config_becomes_env_as_the_e2e_test_driver_makes_it() {
        let alloc = json!({"devices": {"config": [
            {"source": "FromClass", "opaque": {"driver": "gpu.x", "parameters": {"mode": "a", "x": "1"}}},
            {"source": "FromClass", "requests": ["other"], "opaque": {"driver": "gpu.x", "parameters": {"no": "1"}}},
            {"source": "FromClaim", "requests": ["r"], "opaque": {"driver": "gpu.x", "parameters": {"mode": "b"}}},
            {"source": "FromClaim", "opaque": {"driver": "other.x", "parameters": {"foreign": "1"}}},
            {"source": "FromClaim", "requests": ["r"], "opaque": {"driver": "gpu.x", "parameters": {"x": "2"}}},
        ]}});
        // The parent request's config applies to its subrequest; another driver's and request's do not.
        let env = config_env(&alloc, "r/small", "gpu.x").unwrap();
        assert_eq!(env, ["admin_mode=a", "admin_x=1", "user_mode=b", "user_x=2"]);
        assert!(config_env(&alloc, "q", "gpu.x").unwrap().iter().all(|e| e.starts_with("admin_")));
        // A driver-specific schema: nested values reach the env as JSON.
        let nested = json!({"devices": {"config": [{"source": "FromClaim", "opaque": {"driver": "gpu.x", "parameters": {"sharing": {"strategy": "TimeSlicing"}, "n": 1}}}]}});
        assert_eq!(
            config_env(&nested, "r", "gpu.x").unwrap(),
            ["user_n=1", "user_sharing={\"strategy\":\"TimeSlicing\"}"]
        );
        let bad = json!({"devices": {"config": [{"source": "FromClaim", "opaque": {"driver": "gpu.x", "parameters": ["n"]}}]}});
        let e = config_env(&bad, "r", "gpu.x").unwrap_err();
        assert!(e.contains("config #0: decoding user parameters"), "{e}");
    }

    #[test]
    fn the_allocation_is_read_as_the_kubeletplugin_helper_checks_it() {
        let obj = json!({"metadata": {"uid": "u-1"}, "status": {"allocation": {"devices": {"results": [
            {"request": "r/a", "driver": "gpu.x", "pool": "p", "device": "d1"},
            {"request": "r2", "driver": "other.x", "pool": "p", "device": "d9"},
        ]}}}});
        let a = allocation_of(&obj, &claim(), "gpu.x").unwrap();
        assert_eq!(
            a,
            vec![AllocatedDevice {
                request: "r/a".into(),
                pool: "p".into(),
                device: "d1".into(),
                share_id: None,
                config_env: vec![]
            }]
        );
        let mut other = obj.clone();
        other["metadata"]["uid"] = json!("u-2");
        assert!(allocation_of(&other, &claim(), "gpu.x").unwrap_err().contains("\"u-2\""));
        let unallocated = json!({"metadata": {"uid": "u-1"}, "status": {}});
        assert!(allocation_of(&unallocated, &claim(), "gpu.x").unwrap_err().contains("not allocated"));
    }

    #[test]
    fn an_unchanged_snapshot_is_resent_every_half_timeout() {
        assert_eq!(resend_every(0), std::time::Duration::from_secs(15));
        assert_eq!(resend_every(-3), std::time::Duration::from_secs(15));
        assert_eq!(resend_every(2), std::time::Duration::from_secs(1));
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
