//! Faults (`dra serve --fault`): each breaks one rule of
//! [`crate::protocol::dra`] on purpose. They live here alone, as a layer
//! around the helper ([`super::driver`]) and its core ([`super::claims`],
//! [`super::health`]): the helper hands each call, fetched claim, core
//! decision and answer to [`Faults`] at a fixed seam, and with no faults
//! every seam passes its value through unchanged. A crash never exits from
//! a handler: [`Faults::crash`] cancels a token the run's owner waits on.

use super::claims::{AllocatedDevice, Choice, PreparePlan, Prepared, PreparedClaim};
use super::error::{ClaimError, FetchError, FileError};
use super::Config;
use crate::api::dra_health_v1::{DeviceHealth, DeviceIdentifier, HealthStatus};
use crate::api::dra_v1::{
    Claim, NodePrepareResourceResponse, NodePrepareResourcesResponse, NodeUnprepareResourcesResponse,
};
use crate::api::pluginregistration::PluginInfo;
use crate::protocol::dra::{DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1, MAX_HEALTH_MESSAGE};
use serde_json::json;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// A way to break one rule on purpose (one fault per rule of the rulebook,
/// plus per-claim errors and slow calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// GetInfo type is not DRAPlugin (rule plugin-type).
    WrongType,
    /// GetInfo name is not a valid driver name (driver-name).
    BadDriverName,
    /// GetInfo endpoint is a relative path (endpoint-absolute).
    RelativeEndpoint,
    /// The service socket is served outside the kubelet root (endpoint-inside-root).
    EndpointOutsideRoot,
    /// The service socket path is longer than a socket address (endpoint-length).
    LongEndpoint,
    /// supported_versions names no service the kubelet speaks (supported-versions).
    NoVersions,
    /// v1beta1.DRAPlugin listed before v1.DRAPlugin (version-order).
    V1beta1First,
    /// GetInfo names an endpoint nobody serves (endpoint-reachable).
    DeadEndpoint,
    /// v1.DRAPlugin advertised but not served (service-answers).
    UnservedV1,
    /// v1beta1.DRAPlugin advertised but not served (DRA-VER-001).
    UnservedV1beta1,
    /// Every DRAPlugin call takes this long first (service-answers, with a short --timeout).
    Slow(Duration),
    /// The last claim of each call has no entry in the answer (answer-complete).
    MissingUid,
    /// The answer has an entry for a claim nobody asked for (answer-extra).
    ExtraUid,
    /// Prepared devices have no pool_name (device-fields).
    NoPoolName,
    /// CDI IDs are not qualified (cdi-id).
    BadCdiId,
    /// Each prepare picks another device (idempotent).
    NotIdempotent,
    /// Prepare devices of its own choosing (from the end of its list), not the claim's allocation (allocated-devices).
    IgnoreAllocation,
    /// Health advertised but not served (health-answers).
    UnservedHealth,
    /// The health stream ends after its first snapshot (health-stream).
    HealthStreamEnd,
    /// Every health watch is answered `Unimplemented` (the service listed
    /// and registered): 1.37's kubelet stops watching, 1.36's retries.
    HealthUnimplemented,
    /// The first health entry names no pool (health-device).
    HealthBadDevice,
    /// Health messages over 1024 characters (health-message).
    LongMessage,
    /// last_updated_time not set (health-time).
    NoTimestamp,
    /// Every claim fails with this error.
    PrepareError(String),
    /// Unprepare leaves the claim's CDI spec behind (DRA-CDI-002).
    KeepCdiSpec,
    /// The published ResourceSlice lists no devices (DRA-SLICE-001; dra-driver-nvidia-gpu#1008).
    EmptySlice,
    /// The pool says it has two slices (resourceSliceCount 2); one is published (DRA-SLICE-001).
    IncompletePool,
    /// The slice is not published again once deleted (DRA-RESTART-001; kubernetes#132683).
    NoRepublish,
    /// Answers also carry the UIDs of other claims it has prepared (DRA-PREP-002, DRA-PREP-003).
    AnswerOtherClaims,
    /// Prepared devices name another pool than the allocation's (DRA-PREP-004).
    WrongPool,
    /// The claim's CDI spec has devices with empty container edits (DRA-CDI-001).
    EmptyCdiEdits,
    /// The health stream also names a device its slices do not have (DRA-HEALTH-001).
    HealthUnknownDevice,
    /// Unchanged health is never sent again, whatever health_check_timeout_seconds says (DRA-HEALTH-001).
    StaleHealth,
    /// Prepared claims are known in memory only: after a restart unprepare leaves their CDI specs (DRA-RESTART-002, DRA-ROLL-001).
    MemoryOnlyState,
    /// CDI device names carry the instance: a restarted driver answers new IDs (DRA-RESTART-002, DRA-ROLL-001; kubernetes#140471).
    NewCdiIds,
    /// The claims' CDI specs are removed when the driver exits (DRA-RESTART-002, DRA-ROLL-001; kubernetes#141433).
    RemoveCdiOnExit,
    /// A fetched claim's UID is not compared with the kubelet's (DRA-PREP-005; kubernetes#131617).
    IgnoreUid,
    /// The process exits when a claim it fetches is not found (DRA-PREP-006).
    ExitOnMissingClaim,
    /// Preparing a claim it has already prepared fails (DRA-PREP-002, DRA-PREP-003).
    NotIdempotentError,
    /// Prepared devices name a request the claim does not have (`gpu`), so
    /// the kubelet maps them to no container (DRA-EXT-001; dra-driver-cpu#197).
    ForeignRequestNames,
    /// An unprepare of a claim it does not know answers success but keeps
    /// its global lock: every later prepare and unprepare hangs (DRA-UNPREP-002
    /// reports the first call past its deadline; dra-driver-nvidia-gpu#378).
    DeadlockAfterUnknownUnprepare,
    /// Concurrent first prepares of a claim each run the preparation: the
    /// last rewrites the claim's CDI spec under new device names, so the
    /// other answers differ and their CDI IDs resolve nowhere (DRA-PREP-007;
    /// dra-driver-nvidia-gpu#729, #754).
    RacyPrepare,
    /// Prepared claims are also kept in a checkpoint of its own (in its
    /// plugin directory); a claim found there is answered from it without
    /// writing its CDI spec again, so after a reboot emptied the CDI
    /// directory its IDs resolve nowhere (DRA-REBOOT-001; kubernetes#141433).
    AnswerFromCheckpoint,
    /// The opaque config of the claim and its DeviceClass is ignored: devices
    /// are prepared with the defaults (DRA-CONFIG-001).
    IgnoreConfig,
    /// Each prepare runs 300 ms later in a task of its own, finishing even
    /// when the kubelet gave up on the call and unprepared the claim since,
    /// which leaves the claim prepared (DRA-PREP-008; dra-driver-nvidia-gpu#1162, #1188).
    LatePrepare,
}

/// Every fault name with the rule it breaks (what `--fault` accepts).
pub const FAULTS: &[(&str, &str)] = &[
    ("wrong-type", "plugin-type"),
    ("bad-driver-name", "driver-name"),
    ("relative-endpoint", "endpoint-absolute"),
    ("endpoint-outside-root", "endpoint-inside-root"),
    ("long-endpoint", "endpoint-length"),
    ("no-versions", "supported-versions"),
    ("v1beta1-first", "version-order"),
    ("dead-endpoint", "endpoint-reachable"),
    ("unserved-v1", "service-answers"),
    ("unserved-v1beta1", "supported-versions (v1beta1 advertised, not served: DRA-VER-001)"),
    ("slow=DURATION", "service-answers (with a shorter --timeout)"),
    ("missing-uid", "answer-complete"),
    ("extra-uid", "answer-extra"),
    ("no-pool-name", "device-fields"),
    ("bad-cdi-id", "cdi-id"),
    ("not-idempotent", "idempotent"),
    ("ignore-allocation", "allocated-devices"),
    ("unserved-health", "health-answers"),
    ("health-stream-end", "health-stream"),
    ("health-unimplemented", "(every health watch answered Unimplemented)"),
    ("health-bad-device", "health-device"),
    ("long-message", "health-message"),
    ("no-timestamp", "health-time"),
    ("prepare-error=MESSAGE", "(every claim fails with MESSAGE)"),
    ("keep-cdi-spec", "(unprepare leaves the claim's CDI spec)"),
    ("empty-slice", "(its ResourceSlice lists no devices)"),
    ("incomplete-pool", "(resourceSliceCount 2, one slice published)"),
    ("no-republish", "(its slice is not published again once deleted)"),
    ("answer-other-claims", "answer-extra (UIDs of other prepared claims)"),
    ("wrong-pool", "allocated-devices (another pool name)"),
    ("empty-cdi-edits", "(CDI devices with empty container edits)"),
    ("health-unknown-device", "(health for a device its slices lack)"),
    ("stale-health", "(unchanged health never sent again)"),
    ("memory-only-state", "(prepared claims known in memory only)"),
    ("new-cdi-ids", "(a restarted driver answers new CDI IDs)"),
    ("remove-cdi-on-exit", "(claims' CDI specs removed at exit)"),
    ("ignore-uid", "(a fetched claim's UID is not compared)"),
    ("exit-on-missing-claim", "(exits when a claim is not found)"),
    ("not-idempotent-error", "idempotent (preparing again fails)"),
    ("foreign-request-names", "(prepared devices name request \"gpu\", not the claim's: DRA-EXT-001)"),
    ("deadlock-after-unknown-unprepare", "(an unprepare of an unknown claim keeps the lock: later calls hang)"),
    ("racy-prepare", "(concurrent first prepares of a claim each rewrite its CDI spec)"),
    ("answer-from-checkpoint", "(a claim in its own checkpoint is answered without writing its CDI spec)"),
    ("ignore-config", "opaque-config (the claim's and class's opaque config is dropped)"),
    ("late-prepare", "(a prepare finishes 300 ms later, even after its call was given up and the claim unprepared)"),
];

/// Why a `--fault` value is not a fault.
#[derive(Debug, PartialEq, Eq)]
pub enum FaultError {
    /// The fault takes a value (`slow=DURATION`) and has none.
    NeedsValue(String),
    /// The value is not a duration (what the duration parser said).
    Duration(String),
    /// No fault has this name.
    Unknown {
        /// The name.
        name: String,
        /// `did you mean …? ` or nothing.
        hint: String,
        /// The known names, listed.
        known: String,
    },
}

impl std::fmt::Display for FaultError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultError::NeedsValue(name) => write!(f, "{name} needs a value: {name}=…"),
            FaultError::Duration(message) => f.write_str(message),
            FaultError::Unknown { name, hint, known } => {
                write!(f, "unknown fault {}: {hint}known: {known}", crate::core::text::quote(name))
            }
        }
    }
}

impl std::error::Error for FaultError {}

impl std::str::FromStr for Fault {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, FaultError> {
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (s, None),
        };
        let need = || value.filter(|v| !v.is_empty()).ok_or_else(|| FaultError::NeedsValue(name.to_string()));
        Ok(match name {
            "wrong-type" => Fault::WrongType,
            "bad-driver-name" => Fault::BadDriverName,
            "relative-endpoint" => Fault::RelativeEndpoint,
            "endpoint-outside-root" => Fault::EndpointOutsideRoot,
            "long-endpoint" => Fault::LongEndpoint,
            "no-versions" => Fault::NoVersions,
            "v1beta1-first" => Fault::V1beta1First,
            "dead-endpoint" => Fault::DeadEndpoint,
            "unserved-v1" => Fault::UnservedV1,
            "unserved-v1beta1" => Fault::UnservedV1beta1,
            "slow" => Fault::Slow(
                crate::core::time::parse_duration(need()?).map_err(|e| FaultError::Duration(e.to_string()))?,
            ),
            "missing-uid" => Fault::MissingUid,
            "extra-uid" => Fault::ExtraUid,
            "no-pool-name" => Fault::NoPoolName,
            "bad-cdi-id" => Fault::BadCdiId,
            "not-idempotent" => Fault::NotIdempotent,
            "ignore-allocation" => Fault::IgnoreAllocation,
            "unserved-health" => Fault::UnservedHealth,
            "health-stream-end" => Fault::HealthStreamEnd,
            "health-unimplemented" => Fault::HealthUnimplemented,
            "health-bad-device" => Fault::HealthBadDevice,
            "long-message" => Fault::LongMessage,
            "no-timestamp" => Fault::NoTimestamp,
            "prepare-error" => Fault::PrepareError(need()?.to_string()),
            "keep-cdi-spec" => Fault::KeepCdiSpec,
            "empty-slice" => Fault::EmptySlice,
            "incomplete-pool" => Fault::IncompletePool,
            "no-republish" => Fault::NoRepublish,
            "answer-other-claims" => Fault::AnswerOtherClaims,
            "wrong-pool" => Fault::WrongPool,
            "empty-cdi-edits" => Fault::EmptyCdiEdits,
            "health-unknown-device" => Fault::HealthUnknownDevice,
            "stale-health" => Fault::StaleHealth,
            "memory-only-state" => Fault::MemoryOnlyState,
            "new-cdi-ids" => Fault::NewCdiIds,
            "remove-cdi-on-exit" => Fault::RemoveCdiOnExit,
            "ignore-uid" => Fault::IgnoreUid,
            "exit-on-missing-claim" => Fault::ExitOnMissingClaim,
            "not-idempotent-error" => Fault::NotIdempotentError,
            "foreign-request-names" => Fault::ForeignRequestNames,
            "deadlock-after-unknown-unprepare" => Fault::DeadlockAfterUnknownUnprepare,
            "racy-prepare" => Fault::RacyPrepare,
            "answer-from-checkpoint" => Fault::AnswerFromCheckpoint,
            "ignore-config" => Fault::IgnoreConfig,
            "late-prepare" => Fault::LatePrepare,
            other => {
                let names: Vec<&str> = FAULTS.iter().map(|(n, _)| n.split('=').next().unwrap_or(n)).collect();
                let hint = crate::core::validate::did_you_mean(other, &names)
                    .map(|n| format!("did you mean {n}? "))
                    .unwrap_or_default();
                return Err(FaultError::Unknown { name: other.to_string(), hint, known: names.join(", ") });
            }
        })
    }
}

/// Whether `service` is served (`unserved-v1`, `unserved-v1beta1`,
/// `unserved-health`: advertised, not served).
pub fn serves(set: &[Fault], service: &str) -> bool {
    !(set.contains(&Fault::UnservedV1) && service == DRA_V1
        || set.contains(&Fault::UnservedV1beta1) && service == DRA_V1BETA1
        || set.contains(&Fault::UnservedHealth) && (service == HEALTH_V1 || service == HEALTH_V1ALPHA1))
}

/// Whether the service socket goes deeper than a socket address holds (`long-endpoint`).
pub fn long_endpoint(set: &[Fault]) -> bool {
    set.contains(&Fault::LongEndpoint)
}

/// The GetInfo answer as sent for the service socket at host path
/// `endpoint`: each registration fault breaks its rule of it.
pub fn info(set: &[Fault], mut info: PluginInfo, endpoint: &Path) -> PluginInfo {
    let f = |x: &Fault| set.contains(x);
    if f(&Fault::NoVersions) {
        info.supported_versions = vec!["v1alpha4.Node".into()];
    }
    if f(&Fault::V1beta1First) {
        info.supported_versions.retain(|v| v != DRA_V1 && v != DRA_V1BETA1);
        info.supported_versions.splice(0..0, [DRA_V1BETA1.to_string(), DRA_V1.to_string()]);
    }
    if f(&Fault::RelativeEndpoint) {
        info.endpoint = endpoint.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    } else if f(&Fault::DeadEndpoint) {
        info.endpoint = endpoint.with_file_name("nobody-serves-this.sock").display().to_string();
    }
    if f(&Fault::WrongType) {
        info.r#type = crate::protocol::registration::PLUGIN_TYPE.into();
    }
    if f(&Fault::BadDriverName) {
        info.name = format!("{}/Bad Name", info.name);
    }
    info
}

/// How long `late-prepare` holds each prepare before running it.
pub const LATE_BY: Duration = Duration::from_millis(300);

/// How long `racy-prepare` takes over a claim's first preparation.
const RACY_STEP: Duration = Duration::from_millis(100);

/// The answer of a call the driver gave up on because it is stopping.
fn stopping() -> Status {
    Status::unavailable("the driver is stopping")
}

/// Wait `d`, or fail when `stop` comes first.
async fn pause(d: Duration, stop: &CancellationToken) -> Result<(), Status> {
    tokio::select! {
        _ = tokio::time::sleep(d) => Ok(()),
        _ = stop.cancelled() => Err(stopping()),
    }
}

/// The faults of one run, as a layer around the helper: one method per seam.
pub struct Faults {
    set: Vec<Fault>,
    /// Set by `deadlock-after-unknown-unprepare`: the lock is never released.
    wedged: AtomicBool,
    /// Cancelled when a fault makes the driver crash (`exit-on-missing-claim`);
    /// [`Faults::crashed`] tells the run's owner, which ends the process as a panic would.
    crash: CancellationToken,
    /// What the crash says (a Go panic's line).
    crash_words: Mutex<String>,
    /// `answer-from-checkpoint`: the driver's own checkpoint of prepared claims.
    checkpoint: PathBuf,
    /// Serialises the checkpoint's read-modify-write (no await inside).
    checkpoint_lock: Mutex<()>,
}

impl Faults {
    /// The layer of `cfg`'s faults.
    pub fn new(cfg: &Config) -> Self {
        Faults {
            set: cfg.faults.clone(),
            wedged: AtomicBool::new(false),
            crash: CancellationToken::new(),
            crash_words: Mutex::new(String::new()),
            checkpoint: cfg.plugin_dir.join(format!("dpctl-dra-{}-checkpoint.json", cfg.driver)),
            checkpoint_lock: Mutex::new(()),
        }
    }

    fn has(&self, f: &Fault) -> bool {
        self.set.contains(f)
    }

    // ---- calls ----

    /// A NodePrepareResources call: `call` as it is, or with `late-prepare`
    /// the same run in `tasks` after [`LATE_BY`], so it completes when the
    /// caller has given up on the call (its deadline passed, the gRPC
    /// server dropped the call).
    pub async fn prepare_call<T, Fut>(
        &self,
        tasks: &crate::core::task::Tasks,
        stop: &CancellationToken,
        call: Fut,
    ) -> Result<T, Status>
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T, Status>> + Send + 'static,
    {
        if !self.has(&Fault::LatePrepare) {
            return call.await;
        }
        let stop = stop.clone();
        let work = tasks.spawn_joined(async move {
            pause(LATE_BY, &stop).await?;
            call.await
        });
        work.await.map_err(|e| Status::internal(format!("prepare task: {e}")))?
    }

    /// Before a call touches the claims: with `deadlock-after-unknown-unprepare`
    /// once struck, it waits for the lock that is never released (until `stop`).
    pub async fn enter(&self, stop: &CancellationToken) -> Result<(), Status> {
        if self.wedged.load(Ordering::SeqCst) {
            stop.cancelled().await;
            return Err(stopping());
        }
        Ok(())
    }

    /// `racy-prepare`: which claims are not prepared as the call starts
    /// (they are prepared again from scratch after a slow step, whatever a
    /// concurrent call did); none without.
    pub fn racing(&self, st: &Prepared, claims: &[Claim]) -> Vec<bool> {
        let racy = self.has(&Fault::RacyPrepare);
        claims.iter().map(|c| racy && !st.contains(&c.uid)).collect()
    }

    /// The slow steps before a prepare: `racy-prepare`'s (when `racing`), `slow=DURATION`.
    pub async fn delay(&self, racing: bool, stop: &CancellationToken) -> Result<(), Status> {
        if racing {
            pause(RACY_STEP, stop).await?;
        }
        if let Some(d) = self.set.iter().find_map(|f| if let Fault::Slow(d) = f { Some(*d) } else { None }) {
            pause(d, stop).await?;
        }
        Ok(())
    }

    // ---- claims fetched ----

    /// Whether a prepare fetches its claims (`ignore-allocation`: it chooses devices itself).
    pub fn fetches(&self) -> bool {
        !self.has(&Fault::IgnoreAllocation)
    }

    /// A claim as fetched: `ignore-uid` makes its UID the kubelet's, so the check passes.
    pub fn fetched(&self, c: &Claim, obj: &mut serde_json::Value) {
        if self.has(&Fault::IgnoreUid) {
            obj["metadata"]["uid"] = json!(c.uid);
        }
    }

    /// A claim that could not be fetched: with `exit-on-missing-claim` a
    /// missing one crashes the driver, as one whose client panics on the
    /// NotFound does; the call never answers.
    pub async fn fetch_failed(&self, e: &FetchError) {
        if self.has(&Fault::ExitOnMissingClaim) && matches!(e, FetchError::NotFound { .. }) {
            self.crash(format!("panic: interface conversion: {e}")).await;
        }
    }

    /// The allocation read: `ignore-config` drops its opaque config.
    pub fn allocated(&self, a: &mut [AllocatedDevice]) {
        if self.has(&Fault::IgnoreConfig) {
            for d in a {
                d.config_env.clear();
            }
        }
    }

    // ---- the core's decisions ----

    /// A claim not prepared here, as recorded: `answer-from-checkpoint`'s
    /// checkpoint first (`true`: from it), else `read_back` (its CDI spec),
    /// which `memory-only-state` never reads.
    pub fn recall(
        &self,
        uid: &str,
        read_back: impl FnOnce() -> Option<PreparedClaim>,
    ) -> (Option<PreparedClaim>, bool) {
        if self.has(&Fault::AnswerFromCheckpoint) {
            if let Some(p) = self.read_checkpoint().remove(uid) {
                return (Some(p), true);
            }
        }
        (self.recall_spec(read_back), false)
    }

    /// A claim not prepared here, as its CDI spec records it (`read_back`),
    /// which `memory-only-state` never reads.
    pub fn recall_spec(&self, read_back: impl FnOnce() -> Option<PreparedClaim>) -> Option<PreparedClaim> {
        if self.has(&Fault::MemoryOnlyState) {
            return None;
        }
        read_back()
    }

    /// How devices are chosen without an allocation: `not-idempotent`
    /// chooses again each call, `ignore-allocation` the last free one.
    pub fn choice(&self) -> Choice {
        Choice { again: self.has(&Fault::NotIdempotent), last: self.has(&Fault::IgnoreAllocation) }
    }

    /// The process ID in CDI device names (`new-cdi-ids`).
    pub fn instance(&self) -> Option<u32> {
        self.has(&Fault::NewCdiIds).then(std::process::id)
    }

    /// `racy-prepare`: a claim that was unprepared as the call started
    /// (`racing`) and was prepared since by a concurrent call has its
    /// "completed" state overwritten and its preparation runs again, named
    /// by this call (dra-driver-nvidia-gpu#729).
    pub fn rerun(&self, st: &mut Prepared, uid: &str, racing: bool, call: u64) -> Option<u64> {
        (racing && st.forget(uid).is_some()).then_some(call)
    }

    /// A claim refused before the core sees it: `prepare-error=MESSAGE`,
    /// `not-idempotent-error` (one already prepared).
    pub fn refuse(&self, st: &Prepared, c: &Claim) -> Option<ClaimError> {
        if let Some(m) = self.set.iter().find_map(|f| if let Fault::PrepareError(m) = f { Some(m) } else { None }) {
            return Some(ClaimError::Injected(m.clone()));
        }
        if self.has(&Fault::NotIdempotentError) && st.contains(&c.uid) {
            return Some(ClaimError::AlreadyPrepared { claim: super::claims::claim_name(c) });
        }
        None
    }

    /// The core's plan for a claim, faults applied: the answer's devices
    /// (`no-pool-name`, `wrong-pool`, `bad-cdi-id`, `foreign-request-names`)
    /// and the spec's edits (`empty-cdi-edits`). Whether its spec is written:
    /// not for a claim answered from `answer-from-checkpoint`'s checkpoint.
    pub fn planned(&self, cfg: &Config, plan: &mut PreparePlan, from_checkpoint: bool) -> bool {
        for d in &mut plan.answer.devices {
            if self.has(&Fault::ForeignRequestNames) {
                d.request_names = vec!["gpu".to_string()];
            }
            if self.has(&Fault::NoPoolName) {
                d.pool_name = String::new();
            } else if self.has(&Fault::WrongPool) {
                d.pool_name = format!("{}-other", cfg.pool);
            }
            if let (true, Some(first)) = (self.has(&Fault::BadCdiId), d.cdi_device_ids.first_mut()) {
                *first = d.device_name.clone();
            }
        }
        if self.has(&Fault::EmptyCdiEdits) {
            for d in plan.write.spec["devices"].as_array_mut().into_iter().flatten() {
                d["containerEdits"] = json!({});
            }
        }
        !(from_checkpoint && plan.recorded && !self.choice().again)
    }

    /// A claim prepared (`Some`) or unprepared (`None`): `answer-from-checkpoint`
    /// records it in its checkpoint.
    pub fn recorded(&self, uid: &str, p: Option<&PreparedClaim>) -> Result<(), FileError> {
        if !self.has(&Fault::AnswerFromCheckpoint) {
            return Ok(());
        }
        let _one = self.checkpoint_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read_checkpoint();
        match p {
            Some(p) => all.insert(uid.to_string(), p.clone()),
            None => all.remove(uid),
        };
        let text = serde_json::to_vec(&all).map_err(FileError::Encode)?;
        crate::core::files::write_atomic(&self.checkpoint, &text).map_err(|source| FileError::Write {
            what: "the checkpoint",
            path: self.checkpoint.clone(),
            source,
        })
    }

    fn read_checkpoint(&self) -> BTreeMap<String, PreparedClaim> {
        crate::core::limits::read_file(&self.checkpoint, 16 << 20, "checkpoint")
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The prepare answer: `missing-uid` drops the last claim's entry,
    /// `extra-uid` adds one nobody asked for, `answer-other-claims` adds the
    /// other claims it has prepared (`prepared`).
    pub fn answered(&self, claims: &[Claim], prepared: &Prepared, resp: &mut NodePrepareResourcesResponse) {
        if let (true, Some(last)) = (self.has(&Fault::MissingUid), claims.last()) {
            resp.claims.remove(&last.uid);
        }
        if self.has(&Fault::ExtraUid) {
            resp.claims.insert("dpctl-not-requested".into(), NodePrepareResourceResponse::default());
        }
        if self.has(&Fault::AnswerOtherClaims) {
            let others: Vec<String> = prepared.uids().filter(|u| !resp.claims.contains_key(*u)).cloned().collect();
            for u in others {
                resp.claims.insert(u, NodePrepareResourceResponse::default());
            }
        }
    }

    /// An unprepare of a claim it does not know: with
    /// `deadlock-after-unknown-unprepare` the early return skips the unlock
    /// (dra-driver-nvidia-gpu#378): every later call waits ([`Faults::enter`]).
    pub fn unknown_unprepared(&self) {
        if self.has(&Fault::DeadlockAfterUnknownUnprepare) {
            self.wedged.store(true, Ordering::SeqCst);
        }
    }

    /// Whether unprepare removes the claim's CDI spec (`keep-cdi-spec`: no).
    pub fn removes_spec(&self) -> bool {
        !self.has(&Fault::KeepCdiSpec)
    }

    /// The unprepare answer: `missing-uid` drops the last claim's entry.
    pub fn unprepare_answered(&self, claims: &[Claim], resp: &mut NodeUnprepareResourcesResponse) {
        if let (true, Some(last)) = (self.has(&Fault::MissingUid), claims.last()) {
            resp.claims.remove(&last.uid);
        }
    }

    // ---- health ----

    /// A health snapshot as sent: `health-bad-device` (the first names no
    /// pool), `no-timestamp`, `long-message`, `health-unknown-device` (one
    /// more device, which the slices lack).
    pub fn health(&self, mut snap: Vec<DeviceHealth>, cfg: &Config, now: i64) -> Vec<DeviceHealth> {
        for (i, d) in snap.iter_mut().enumerate() {
            if let (true, 0, Some(id)) = (self.has(&Fault::HealthBadDevice), i, d.device.as_mut()) {
                id.pool_name = String::new();
            }
            if self.has(&Fault::NoTimestamp) {
                d.last_updated_time = 0;
            }
            if self.has(&Fault::LongMessage) {
                d.message = "x".repeat(MAX_HEALTH_MESSAGE + 1);
            }
        }
        if self.has(&Fault::HealthUnknownDevice) {
            snap.push(DeviceHealth {
                device: Some(DeviceIdentifier { pool_name: cfg.pool.clone(), device_name: "dpctl-ghost".into() }),
                health: HealthStatus::Healthy as i32,
                last_updated_time: now,
                health_check_timeout_seconds: cfg.health_timeout_secs,
                message: String::new(),
            });
        }
        snap
    }

    /// How often unchanged health is sent again: `every`, or with
    /// `stale-health` never (a year).
    pub fn resend(&self, every: Duration) -> Duration {
        if self.has(&Fault::StaleHealth) {
            Duration::from_secs(365 * 24 * 3600)
        } else {
            every
        }
    }

    /// Whether a health watch is answered `Unimplemented` (`health-unimplemented`).
    pub fn health_unimplemented(&self) -> bool {
        self.has(&Fault::HealthUnimplemented)
    }

    /// Whether the health stream ends after its first snapshot (`health-stream-end`).
    pub fn health_once(&self) -> bool {
        self.has(&Fault::HealthStreamEnd)
    }

    // ---- slices, exit ----

    /// The pool's slice before it is split: `empty-slice` lists no devices.
    pub fn slice(&self, obj: &mut serde_json::Value) {
        if self.has(&Fault::EmptySlice) {
            obj["spec"]["devices"] = json!([]);
        }
    }

    /// The pool's slices as published: `incomplete-pool` counts one slice more than there are.
    pub fn pool(&self, pool: &mut [(String, serde_json::Value)]) {
        for (_, o) in pool.iter_mut() {
            if self.has(&Fault::IncompletePool) {
                o["spec"]["pool"]["resourceSliceCount"] =
                    json!(o["spec"]["pool"]["resourceSliceCount"].as_i64().unwrap_or(1) + 1);
            }
        }
    }

    /// Whether a deleted slice is published again (`no-republish`: no).
    pub fn republishes(&self) -> bool {
        !self.has(&Fault::NoRepublish)
    }

    /// Whether the service socket goes outside the kubelet root (`endpoint-outside-root`).
    pub fn outside_root(&self) -> bool {
        self.has(&Fault::EndpointOutsideRoot)
    }

    /// Whether the claims' CDI specs are removed at exit (`remove-cdi-on-exit`).
    pub fn removes_specs_at_exit(&self) -> bool {
        self.has(&Fault::RemoveCdiOnExit)
    }

    // ---- crash ----

    /// Crash as a driver whose handler panics: the words are kept for the
    /// owner of the process, which ends it ([`Faults::crashed`]); the call
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::dra::claims::{self, ClaimInput};
    use std::sync::Arc;

    fn cfg(faults: Vec<Fault>) -> Config {
        Config {
            driver: "gpu.x".into(),
            pool: "p".into(),
            devices: vec!["d0".into(), "d1".into()],
            cdi_dir: "/cdi".into(),
            health_timeout_secs: 4,
            common_cdi_spec: true,
            ..crate::plugin::dra::test_config(faults)
        }
    }

    fn claim(uid: &str) -> Claim {
        Claim { namespace: "ml".into(), name: format!("c-{uid}"), uid: uid.into() }
    }

    /// The core's plan for claim `a`, with `faults` applied; whether its spec is written.
    fn plan(faults: Vec<Fault>) -> (PreparePlan, bool) {
        let cfg = cfg(faults);
        let layer = Faults::new(&cfg);
        let mut p =
            claims::prepare(&cfg, &mut Prepared::default(), &claim("a"), ClaimInput::default(), layer.choice(), 1)
                .unwrap();
        let write = layer.planned(&cfg, &mut p, false);
        (p, write)
    }

    #[test]
    fn without_faults_every_seam_passes_its_value_through() {
        let cfg = cfg(vec![]);
        let layer = Faults::new(&cfg);
        let (p, write) = plan(vec![]);
        let untouched =
            claims::prepare(&cfg, &mut Prepared::default(), &claim("a"), ClaimInput::default(), Choice::default(), 1)
                .unwrap();
        assert!(write);
        assert_eq!(p.answer, untouched.answer);
        assert_eq!(p.write, untouched.write);
        assert_eq!(layer.choice(), Choice::default());
        assert_eq!(layer.instance(), None);
        let mut st = Prepared::default();
        assert_eq!(layer.racing(&st, &[claim("a")]), [false]);
        assert!(layer.refuse(&st, &claim("a")).is_none());
        assert_eq!(layer.rerun(&mut st, "a", false, 1), None);
        let mut resp = NodePrepareResourcesResponse::default();
        resp.claims.insert("a".into(), NodePrepareResourceResponse::default());
        layer.answered(&[claim("a")], &st, &mut resp);
        assert_eq!(resp.claims.keys().collect::<Vec<_>>(), ["a"]);
        let snap = crate::plugin::dra::health::snapshot(&crate::plugin::dra::health::initial(&cfg.devices, 7), "p", 4);
        assert_eq!(layer.health(snap.clone(), &cfg, 9), snap);
        assert_eq!(layer.resend(Duration::from_secs(2)), Duration::from_secs(2));
        assert!(layer.fetches() && layer.removes_spec() && layer.republishes() && !layer.health_once());
        assert_eq!(layer.recall("a", || Some(claims_record())), (Some(claims_record()), false));
    }

    fn claims_record() -> PreparedClaim {
        PreparedClaim {
            claim: "ml/c-a".into(),
            uid: "a".into(),
            devices: vec!["d0".into()],
            cdi_spec: "x".into(),
            run: None,
        }
    }

    #[test]
    fn each_answer_fault_changes_only_its_field() {
        let (ok, _) = plan(vec![]);
        let d = |f: Fault| plan(vec![f]).0.answer.devices[0].clone();
        assert_eq!(d(Fault::NoPoolName).pool_name, "");
        assert_eq!(d(Fault::WrongPool).pool_name, "p-other");
        let bad = d(Fault::BadCdiId);
        assert_eq!(bad.cdi_device_ids, ["d0", "k8s.gpu.x/claim=common"]);
        assert_eq!(d(Fault::ForeignRequestNames).request_names, ["gpu"]);
        let mut same = d(Fault::WrongPool);
        same.pool_name = "p".into();
        assert_eq!(same, ok.answer.devices[0]);
        let (empty, _) = plan(vec![Fault::EmptyCdiEdits]);
        assert_eq!(empty.write.spec["devices"][0]["containerEdits"], json!({}));
        assert_eq!(empty.answer, ok.answer);
    }

    #[test]
    fn claim_faults_refuse_rerun_and_rename() {
        let layer = Faults::new(&cfg(vec![Fault::PrepareError("boom".into())]));
        assert_eq!(layer.refuse(&Prepared::default(), &claim("a")).map(|e| e.to_string()).as_deref(), Some("boom"));
        let cfg2 = cfg(vec![Fault::NotIdempotentError, Fault::RacyPrepare, Fault::NewCdiIds]);
        let layer = Faults::new(&cfg2);
        let mut st = Prepared::default();
        assert!(layer.refuse(&st, &claim("a")).is_none());
        assert_eq!(layer.racing(&st, &[claim("a")]), [true]);
        claims::prepare(&cfg2, &mut st, &claim("a"), ClaimInput::default(), layer.choice(), 1).unwrap();
        assert_eq!(
            layer.refuse(&st, &claim("a")).map(|e| e.to_string()).as_deref(),
            Some("claim ml/c-a is already prepared")
        );
        assert_eq!(layer.racing(&st, &[claim("a")]), [false]);
        // Prepared by another call since this one looked: prepared again, named by this call.
        assert_eq!(layer.rerun(&mut st, "a", true, 2), Some(2));
        assert!(!st.contains("a"));
        assert_eq!(layer.instance(), Some(std::process::id()));
        let layer = Faults::new(&cfg(vec![Fault::NotIdempotent, Fault::IgnoreAllocation]));
        assert_eq!(layer.choice(), Choice { again: true, last: true });
        assert!(!layer.fetches());
    }

    #[test]
    fn answer_faults_drop_add_and_show_other_claims() {
        let mut st = Prepared::default();
        let cfg = cfg(vec![Fault::MissingUid, Fault::ExtraUid, Fault::AnswerOtherClaims]);
        claims::prepare(&cfg, &mut st, &claim("old"), ClaimInput::default(), Choice::default(), 1).unwrap();
        let layer = Faults::new(&cfg);
        let mut resp = NodePrepareResourcesResponse::default();
        for u in ["a", "b"] {
            resp.claims.insert(u.into(), NodePrepareResourceResponse::default());
        }
        layer.answered(&[claim("a"), claim("b")], &st, &mut resp);
        assert_eq!(resp.claims.keys().collect::<Vec<_>>(), ["a", "dpctl-not-requested", "old"]);
        let mut un = NodeUnprepareResourcesResponse::default();
        un.claims.insert("a".into(), Default::default());
        layer.unprepare_answered(&[claim("a")], &mut un);
        assert!(un.claims.is_empty());
    }

    #[test]
    fn state_faults_recall_from_memory_only_or_the_checkpoint() {
        let layer = Faults::new(&cfg(vec![Fault::MemoryOnlyState]));
        assert_eq!(layer.recall("a", || Some(claims_record())), (None, false));
        assert_eq!(layer.recall_spec(|| Some(claims_record())), None);
        let dir = crate::core::transport::TempDir::new("dra-faults").unwrap();
        let mut c = cfg(vec![Fault::AnswerFromCheckpoint]);
        c.plugin_dir = dir.path().to_path_buf();
        let layer = Faults::new(&c);
        layer.recorded("a", Some(&claims_record())).unwrap();
        assert_eq!(layer.recall("a", || None), (Some(claims_record()), true));
        // Answered from the checkpoint, its spec is not written again.
        let mut st = Prepared::default();
        let input = ClaimInput { recorded: Some(claims_record()), ..Default::default() };
        let mut p = claims::prepare(&c, &mut st, &claim("a"), input, layer.choice(), 1).unwrap();
        assert!(!layer.planned(&c, &mut p, true));
        assert!(layer.planned(&c, &mut p, false));
        layer.recorded("a", None).unwrap();
        assert_eq!(layer.recall("a", || None), (None, false));
    }

    #[test]
    fn health_faults_break_the_snapshot_as_named() {
        let all = |f: Vec<Fault>| {
            let cfg = cfg(f);
            let snap =
                crate::plugin::dra::health::snapshot(&crate::plugin::dra::health::initial(&cfg.devices, 7), "p", 4);
            Faults::new(&cfg).health(snap, &cfg, 9)
        };
        let bad = all(vec![Fault::HealthBadDevice]);
        assert_eq!(bad.iter().map(|d| d.device.as_ref().unwrap().pool_name.as_str()).collect::<Vec<_>>(), ["", "p"]);
        assert!(all(vec![Fault::NoTimestamp]).iter().all(|d| d.last_updated_time == 0));
        assert!(all(vec![Fault::LongMessage]).iter().all(|d| d.message.len() == MAX_HEALTH_MESSAGE + 1));
        let ghost = all(vec![Fault::HealthUnknownDevice]);
        assert_eq!(ghost.len(), 3);
        assert_eq!(ghost[2].device.as_ref().unwrap().device_name, "dpctl-ghost");
        let layer = Faults::new(&cfg(vec![Fault::StaleHealth, Fault::HealthStreamEnd]));
        assert!(layer.resend(Duration::from_secs(2)) > Duration::from_secs(3600));
        assert!(layer.health_once());
    }

    #[test]
    fn slice_faults_empty_the_slice_and_miscount_the_pool() {
        let layer = Faults::new(&cfg(vec![Fault::EmptySlice, Fault::IncompletePool, Fault::NoRepublish]));
        let mut obj = crate::plugin::dra::slices::slice("s", "n", "gpu.x", "p", &["d0".into()]);
        layer.slice(&mut obj);
        assert_eq!(obj["spec"]["devices"], json!([]));
        let mut pool = crate::plugin::dra::slices::split_pool("s", obj);
        layer.pool(&mut pool);
        assert_eq!(pool[0].1["spec"]["pool"]["resourceSliceCount"], 2);
        assert!(!layer.republishes());
    }

    #[tokio::test]
    async fn a_missing_claim_crashes_through_the_token_not_the_process() {
        let layer = Arc::new(Faults::new(&cfg(vec![Fault::ExitOnMissingClaim])));
        // Another failure passes.
        let other = FetchError::Status { claim: "ml/a".into(), status: 500, message: "x".into() };
        layer.fetch_failed(&other).await;
        let l = layer.clone();
        let call = tokio::spawn(async move {
            l.fetch_failed(&FetchError::NotFound { claim: "ml/a".into(), message: "gone".into() }).await
        });
        let words = layer.crashed().await;
        assert_eq!(words, "panic: interface conversion: fetch ResourceClaim ml/a: gone (NotFound)");
        // The call that crashed never answers.
        assert!(!call.is_finished());
        call.abort();
    }

    #[tokio::test]
    async fn a_wedged_driver_answers_only_when_it_stops() {
        let layer = Faults::new(&cfg(vec![Fault::DeadlockAfterUnknownUnprepare]));
        let stop = CancellationToken::new();
        assert!(layer.enter(&stop).await.is_ok());
        layer.unknown_unprepared();
        stop.cancel();
        assert_eq!(layer.enter(&stop).await.unwrap_err().code(), tonic::Code::Unavailable);
        let healthy = Faults::new(&cfg(vec![]));
        healthy.unknown_unprepared();
        assert!(healthy.enter(&CancellationToken::new()).await.is_ok());
    }
}
