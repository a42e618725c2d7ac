//! The DRA manager's core, without I/O or async (pkg/kubelet/cm/dra
//! claiminfo.go and manager.go's decisions): the claim cache, what to
//! record, which driver to call with which claims, and what a driver's
//! answer means. The shell ([`crate::kubelet::dra::shell::DraManager`]) makes the calls, writes
//! the checkpoint and reports the events.
//!
//! As the kubelet does, a claim is recorded (with every driver its
//! allocation names, and the pod's reference) and checkpointed *before* any
//! driver is called; each driver's answer is recorded as it comes; and
//! unpreparing calls every driver the claim's state names, prepared or not,
//! so a prepare that failed half-way leaks nothing.

use crate::api::dra_v1::{Claim, NodePrepareResourcesResponse, NodeUnprepareResourcesResponse};
use crate::client::dra_checkpoint as checkpoint;
use crate::controlplane::allocator::{self, Allocated, Candidate, Unallocatable};
use crate::controlplane::objects::{self, ClaimSpec, Object};
use crate::controlplane::scheduler::{self, Scheduled};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A node operation of a DRA driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Operation {
    /// NodePrepareResources.
    Prepare,
    /// NodeUnprepareResources.
    Unprepare,
}

impl Operation {
    /// The RPC's name.
    pub fn rpc(self) -> &'static str {
        match self {
            Operation::Prepare => "NodePrepareResources",
            Operation::Unprepare => "NodeUnprepareResources",
        }
    }

    /// What the kubelet's error wraps a cause in (manager.go).
    fn what(self) -> &'static str {
        match self {
            Operation::Prepare => "prepare dynamic resources",
            Operation::Unprepare => "unprepare dynamic resources",
        }
    }

    /// Whether KEP-5945's `skipNodeOperations` list names it.
    fn skipped_by(self, list: &[String]) -> bool {
        list.iter().any(|o| o == "*" || o == self.rpc())
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.rpc())
    }
}

/// Why a claim could not be prepared or unprepared: the cause the kubelet's
/// error names.
#[derive(Debug)]
pub enum Cause {
    /// The ResourceClaim or ResourceClaimTemplate does not exist.
    NotFound {
        /// `ResourceClaim` or `ResourceClaimTemplate`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// The claim's binding conditions failed or timed out (the scheduler's
    /// PreBind): the claim was deallocated and is allocated again on the
    /// next attempt.
    Binding {
        /// `namespace/name` of the claim.
        claim: String,
        /// Where its binding stands, in the scheduler's words.
        binding: crate::controlplane::scheduler::Binding,
    },
    /// The claim cannot be allocated (the scheduler's part).
    NotAllocated {
        /// The claim's name.
        claim: String,
        /// Why.
        source: Box<Unallocatable>,
    },
    /// A claim of a pod of the API server could not be read (manager.go:
    /// "fetch ResourceClaim %s: %w").
    Fetch {
        /// The claim's name.
        claim: String,
        /// Why.
        source: Box<super::fetch::FetchError>,
    },
    /// A claim the resourceclaim controller made from a template of the pod
    /// is not the pod's (resourceclaim.IsForPod; its text).
    NotForPod {
        /// Whose the claim is instead (IsForPod's text).
        message: super::fetch::NotForPod,
    },
    /// A claim read from the API server has no `status.allocation`
    /// (newClaimInfoFromClaim: "not allocated").
    Unallocated {
        /// The claim's name.
        claim: String,
    },
    /// A driver the claim needs has no registered instance.
    NotRegistered {
        /// The driver.
        driver: String,
    },
    /// The call itself failed.
    Call {
        /// Which.
        op: Operation,
        /// Why.
        source: Box<crate::core::Error>,
    },
    /// The answer names a claim nobody asked for.
    UnknownClaim {
        /// Which call.
        op: Operation,
        /// The UID it named.
        uid: String,
    },
    /// The driver failed one claim.
    ClaimFailed {
        /// Which call.
        op: Operation,
        /// The claim's name.
        claim: String,
        /// The driver's text.
        error: String,
    },
    /// The answer left claims out.
    Skipped {
        /// Which call.
        op: Operation,
        /// How many.
        count: usize,
    },
    /// The claim's `status.reservedFor` does not name the pod.
    NotReserved {
        /// The pod's name.
        pod: String,
        /// The pod's UID.
        pod_uid: String,
        /// The claim's name.
        claim: String,
        /// The claim's UID.
        uid: String,
    },
    /// A claim of the same name and another UID is still in the cache (prepared for a pod not yet gone).
    OldClaim {
        /// The claim's name.
        claim: String,
        /// The cached claim's UID.
        old_uid: String,
    },
    /// Writing the checkpoint failed.
    Checkpoint {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::NotFound { kind, name } => {
                let resource = if *kind == "ResourceClaim" { "resourceclaims" } else { "resourceclaimtemplates" };
                write!(f, "fetch {kind} {name}: {resource}.resource.k8s.io {name:?} not found")
            }
            Cause::NotAllocated { claim, source } => write!(f, "ResourceClaim {claim} is not allocated: {source}"),
            // dynamicresources.go PreBind: "%w: claim=%s…", the claim deallocated.
            Cause::Binding { claim, binding } => write!(f, "{binding}: claim={claim}"),
            Cause::Fetch { claim, source } => write!(f, "fetch ResourceClaim {claim}: {source}"),
            Cause::Unallocated { claim } => write!(f, "ResourceClaim {claim}: not allocated"),
            Cause::NotForPod { message } => write!(f, "{message}"),
            Cause::NotRegistered { driver } => write!(f, "DRA driver {driver} is not registered"),
            // manager.go: fmt.Errorf("NodePrepareResources: %w", err), err a gRPC status.
            Cause::Call { op, source } => write!(f, "{op}: {}", crate::core::status::go_text(source)),
            Cause::UnknownClaim { op, uid } => write!(f, "{op} returned result for unknown claim UID {uid}"),
            Cause::ClaimFailed { op, claim, error } => write!(f, "{op} failed for ResourceClaim {claim}: {error}"),
            Cause::Skipped { op, count } => write!(f, "{op} skipped {count} ResourceClaims"),
            // manager.go prepareResources, on the claim it fetched.
            Cause::NotReserved { pod, pod_uid, claim, uid } => {
                write!(f, "pod {pod} ({pod_uid}) is not allowed to use ResourceClaim {claim} ({uid})")
            }
            Cause::OldClaim { claim, old_uid } => write!(
                f,
                "old ResourceClaim with same name {claim} and different UID {old_uid} still exists (previous pod force-deleted?!)"
            ),
            Cause::Checkpoint { path, source } => {
                write!(f, "checkpoint ResourceClaim state: {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Cause::NotAllocated { source, .. } => Some(&**source),
            Cause::Fetch { source, .. } => Some(&**source),
            Cause::Call { source, .. } => Some(&**source),
            Cause::Checkpoint { source, .. } => Some(source),
            Cause::NotForPod { message } => Some(message),
            _ => None,
        }
    }
}

/// A failed prepare or unprepare of a pod's claims; its `Display` is the
/// kubelet's text (`prepare dynamic resources: …`).
#[derive(Debug)]
pub struct DraError {
    /// What was being done.
    pub op: Operation,
    /// Why it failed.
    pub cause: Cause,
}

impl DraError {
    /// `cause` while doing `op`.
    pub fn new(op: Operation, cause: Cause) -> Self {
        DraError { op, cause }
    }
}

impl std::fmt::Display for DraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.op.what(), self.cause)
    }
}

impl std::error::Error for DraError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// One driver's part of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverPrep {
    /// Recorded; the driver has not prepared it (yet).
    Pending,
    /// The devices as the driver prepared them.
    Prepared(Vec<checkpoint::Device>),
}

/// Where a claim is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimState {
    /// Allocated on devices whose binding conditions are not met yet: no
    /// driver is called until they are (KEP-5007).
    WaitingForBinding,
    /// Recorded (checkpointed) for a pod; no driver has prepared it.
    Recorded,
    /// Some of its drivers answered, but the prepare as a whole did not succeed.
    PartlyPrepared,
    /// Prepared.
    Prepared,
}

/// One claim the kubelet knows (its ClaimInfo).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// The allocation.
    pub allocation: Vec<Allocated>,
    /// Pods using it.
    pub pods: BTreeSet<String>,
    /// Every driver the allocation names, and what it prepared.
    pub drivers: BTreeMap<String, DriverPrep>,
    /// A whole prepare of it succeeded (claiminfo.go setPrepared); until
    /// then every driver is called again, also those that answered.
    pub done: bool,
    /// Read from the checkpoint at start and not prepared since: upstream's
    /// claim info is then not prepared (claiminfo.go newClaimInfoFromState,
    /// `prepared: false`), so a pod that comes to it after the restart has
    /// NodePrepareResources called again. The pods it names were running
    /// before: the kubelet does not prepare them again (PrepareDynamicResources
    /// runs only when a sandbox is created, kuberuntime_manager.go SyncPod).
    pub restored: bool,
    /// CDI IDs that resolve to no spec file.
    pub cdi_unresolved: Vec<String>,
    /// When this node's scheduler allocated it, with DRADeviceBindingConditions
    /// on (`status.allocation.allocationTimestamp`, dynamicresources.go bindClaim).
    pub allocated_at: Option<std::time::SystemTime>,
    /// Allocated here on devices with bindingConditions that were not all
    /// met yet: the scheduler's PreBind waits for them before the pod is
    /// bound, so no driver is called for the pod until then (KEP-5007).
    pub binding_pending: bool,
}

/// How `dpctl node` shows a claim.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimView<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    state: ClaimState,
    allocation: &'a [Allocated],
    pods: &'a BTreeSet<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prepared: Option<BTreeMap<&'a str, &'a [checkpoint::Device]>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    cdi_unresolved: &'a [String],
}

impl Serialize for ClaimInfo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ClaimView {
            namespace: &self.namespace,
            name: &self.name,
            uid: &self.uid,
            state: self.state(),
            allocation: &self.allocation,
            pods: &self.pods,
            prepared: self.prepared(),
            cdi_unresolved: &self.cdi_unresolved,
        }
        .serialize(s)
    }
}

impl ClaimInfo {
    /// A claim as allocated, recorded for nobody yet: every driver pending.
    pub fn allocated(namespace: &str, name: &str, uid: &str, allocation: Vec<Allocated>) -> Self {
        let drivers = allocation.iter().map(|a| (a.driver.clone(), DriverPrep::Pending)).collect();
        ClaimInfo {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
            allocation,
            pods: BTreeSet::new(),
            drivers,
            done: false,
            restored: false,
            cdi_unresolved: vec![],
            allocated_at: None,
            binding_pending: false,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// As the DRA API names it.
    pub fn claim(&self) -> Claim {
        Claim { namespace: self.namespace.clone(), uid: self.uid.clone(), name: self.name.clone() }
    }

    /// Where it is.
    pub fn state(&self) -> ClaimState {
        let answered = self.drivers.values().filter(|d| matches!(d, DriverPrep::Prepared(_))).count();
        match answered {
            _ if self.done => ClaimState::Prepared,
            0 if self.binding_pending => ClaimState::WaitingForBinding,
            0 => ClaimState::Recorded,
            _ => ClaimState::PartlyPrepared,
        }
    }

    /// Driver → devices, when it is prepared.
    pub fn prepared(&self) -> Option<BTreeMap<&str, &[checkpoint::Device]>> {
        if !self.done {
            return None;
        }
        self.drivers
            .iter()
            .map(|(d, p)| match p {
                DriverPrep::Prepared(devs) => Some((d.as_str(), devs.as_slice())),
                DriverPrep::Pending => None,
            })
            .collect()
    }

    /// The devices its drivers prepared so far.
    fn devices(&self) -> impl Iterator<Item = (&String, &checkpoint::Device)> {
        self.drivers.iter().flat_map(|(d, p)| match p {
            DriverPrep::Prepared(devs) => devs.iter().map(move |x| (d, x)).collect::<Vec<_>>(),
            DriverPrep::Pending => vec![],
        })
    }

    /// CDI IDs of the prepared devices.
    pub fn cdi_ids(&self) -> Vec<String> {
        self.devices().flat_map(|(_, d)| d.cdi_device_ids.clone().unwrap_or_default()).collect()
    }

    /// `driver/pool/device` of each prepared device.
    pub fn device_words(&self) -> Vec<String> {
        self.devices().map(|(d, x)| format!("{d}/{}/{}", x.pool_name, x.device_name)).collect()
    }

    /// Whether every allocated device of `driver` skips `op` (KEP-5945).
    pub fn skips(&self, driver: &str, op: Operation) -> bool {
        let mut mine = self.allocation.iter().filter(|a| a.driver == driver).peekable();
        mine.peek().is_some() && mine.all(|a| op.skipped_by(&a.skip_node_operations))
    }

    /// The allocated devices of `driver` as the checkpoint keeps prepared ones
    /// (no CDI IDs: NodePrepareResources was skipped for them).
    fn unprepared_devices(&self, driver: &str) -> Vec<checkpoint::Device> {
        self.allocation
            .iter()
            .filter(|a| a.driver == driver)
            .map(|a| checkpoint::Device {
                pool_name: a.pool.clone(),
                device_name: a.device.clone(),
                request_names: Some(vec![a.request.clone()]),
                cdi_device_ids: Some(vec![]),
                share_id: None,
            })
            .collect()
    }
}

/// The name of the claim generated from a template for a pod (the
/// resourceclaim controller adds a random suffix; here it is stable).
pub fn generated_claim_name(pod: &str, pod_claim: &str) -> String {
    format!("{pod}-{pod_claim}")
}

/// Where a pod's claims are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimsPhase {
    /// Being prepared (retried until done).
    Preparing,
    /// Every claim prepared.
    Prepared,
    /// Being unprepared (retried until done).
    Unpreparing,
}

/// One claim of a pod, as the pod names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    /// The pod's name for it.
    pub pod_claim: String,
    /// The ResourceClaim's name (generated for a template).
    pub name: String,
    /// The template it comes from.
    pub template: Option<String>,
    /// The spec of a claim made for the pod, not read from a manifest (the
    /// special claim of DRA-backed extended resources).
    pub spec: Option<ClaimSpec>,
}

/// What the DRA manager resolves a pod's claims against.
pub struct World<'a> {
    /// ResourceClaims, templates, classes and slices, by [`Object::key`].
    pub objects: &'a BTreeMap<String, Object>,
    /// Devices the allocator may hand out.
    pub candidates: &'a [Candidate],
    /// Drivers with a registered instance.
    pub drivers: &'a BTreeSet<String>,
    /// The scheduler's gates the profile sets (binding conditions, list
    /// attributes, compatibility groups, derived attributes).
    pub features: crate::controlplane::allocator::Features,
    /// The pod's PodGroup (`spec.schedulingGroup.podGroupName`) when
    /// DRAWorkloadResourceClaims is on: a claim reserved for it is the
    /// pod's (resourceclaim.IsReservedForPod's acceptPodGroupReservation).
    pub pod_group: Option<&'a str>,
    /// The pod is one of the API server's: its claims are prepared as
    /// written (a claim without `status.allocation` or not reserved for the
    /// pod is refused, as the kubelet refuses it), never allocated here.
    pub as_written: bool,
    /// The API server is dpctl's own (`--api-server`), whose controller
    /// allocates the claims of API pods bound to a node, standing in for
    /// kube-scheduler: the scheduler's PreBind wait for binding conditions
    /// is then this kubelet's to do for them, as for claims it allocates.
    pub own_plane: bool,
    /// Devices held by claims outside this node's view (the control plane's
    /// for pods of the API, not read yet): not handed out again.
    pub held: &'a [Allocated],
    /// When this attempt runs: a claim allocated by it is stamped with it.
    pub now: std::time::SystemTime,
}

/// What one attempt at preparing a pod's claims does.
#[derive(Debug, Default, PartialEq)]
pub struct PreparePlan {
    /// Claims allocated now (for the events; not those whose manifest gave the allocation).
    pub allocated: Vec<ClaimInfo>,
    /// Whether the cache changed: the checkpoint is written before any call.
    pub record: bool,
    /// Claims prepared before (by another pod, or before a restart): no call.
    pub cached: Vec<String>,
    /// Claims this attempt prepares (prepared once every call succeeded).
    pub preparing: Vec<String>,
    /// (claim, driver) whose devices all skip NodePrepareResources: no call.
    pub skipped: Vec<(String, String)>,
    /// Driver → the claims to prepare with it.
    pub batches: BTreeMap<String, Vec<Claim>>,
}

/// What one attempt at unpreparing a pod's claims does.
#[derive(Debug, Default, PartialEq)]
pub struct UnpreparePlan {
    /// Driver → the claims to unprepare with it.
    pub batches: BTreeMap<String, Vec<Claim>>,
    /// (claim, uid) another pod still uses: only the reference goes.
    pub shared: Vec<(String, String)>,
    /// (claim, driver) whose devices all skip NodeUnprepareResources.
    pub skipped: Vec<(String, String)>,
    /// Claims that go once the calls succeed.
    pub remove: Vec<String>,
}

/// Claim `c`'s checkpoint entry (ClaimInfoState).
fn entry(c: &ClaimInfo) -> checkpoint::Entry {
    checkpoint::Entry {
        claim_uid: c.uid.clone(),
        claim_name: c.name.clone(),
        namespace: c.namespace.clone(),
        pod_uids: c.pods.iter().map(|p| (p.clone(), Default::default())).collect(),
        driver_state: c
            .drivers
            .iter()
            .map(|(d, prep)| {
                let skip: Vec<String> = [Operation::Prepare, Operation::Unprepare]
                    .into_iter()
                    .filter(|op| c.skips(d, *op))
                    .map(|op| op.rpc().to_string())
                    .collect();
                let devices = match prep {
                    DriverPrep::Prepared(devs) => Some(devs.clone()),
                    DriverPrep::Pending => None,
                };
                (
                    d.clone(),
                    checkpoint::DriverState { devices, skip_node_operations: (!skip.is_empty()).then_some(skip) },
                )
            })
            .collect(),
    }
}

/// The claim cache (claiminfo.go claimInfoCache).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ClaimCache {
    claims: BTreeMap<String, ClaimInfo>,
    /// Each claim's checkpoint entry, encoded, until the claim changes:
    /// every change goes through [`ClaimCache::claim_mut`] (or inserts or
    /// removes), which drops it.
    encoded: EncodedEntries,
}

/// A cache of encoded entries: not part of the cache's state (two caches
/// with the same claims are equal whatever each has encoded).
#[derive(Debug, Default, Clone)]
struct EncodedEntries(BTreeMap<String, checkpoint::EncodedEntry>);

impl PartialEq for EncodedEntries {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ClaimCache {
    /// The cache a checkpoint describes: a driver with devices prepared
    /// them; one without (`Devices: null`) was recorded but not prepared. A
    /// claim every driver prepared is shown as prepared and is not prepared
    /// again for the pods it names, but is for a new pod ([`ClaimInfo::restored`]).
    pub fn from_checkpoint(entries: &[checkpoint::Entry]) -> Self {
        let mut claims = BTreeMap::new();
        for e in entries {
            let mut allocation = Vec::new();
            let mut drivers = BTreeMap::new();
            for (driver, ds) in &e.driver_state {
                let skip = ds.skip_node_operations.clone().unwrap_or_default();
                for d in ds.devices.iter().flatten() {
                    allocation.push(Allocated {
                        request: d.request_names.clone().unwrap_or_default().join(","),
                        driver: driver.clone(),
                        pool: d.pool_name.clone(),
                        device: d.device_name.clone(),
                        skip_node_operations: skip.clone(),
                        share_id: d.share_id.clone(),
                        ..Allocated::default()
                    });
                }
                let prep = match &ds.devices {
                    Some(devs) => DriverPrep::Prepared(devs.clone()),
                    None => DriverPrep::Pending,
                };
                drivers.insert(driver.clone(), prep);
            }
            let done = drivers.values().all(|d| matches!(d, DriverPrep::Prepared(_)));
            let info = ClaimInfo {
                namespace: e.namespace.clone(),
                name: e.claim_name.clone(),
                uid: e.claim_uid.clone(),
                allocation,
                pods: e.pod_uids.keys().cloned().collect(),
                done,
                restored: done,
                drivers,
                cdi_unresolved: vec![],
                allocated_at: None,
                binding_pending: false,
            };
            claims.insert(info.key(), info);
        }
        ClaimCache { claims, encoded: EncodedEntries::default() }
    }

    /// Claim `key` to change: its encoded entry goes.
    fn claim_mut(&mut self, key: &str) -> Option<&mut ClaimInfo> {
        self.encoded.0.remove(key);
        self.claims.get_mut(key)
    }

    /// The checkpoint file's bytes: [`checkpoint::encode`] of
    /// [`Self::to_checkpoint`], with only the claims changed since the last
    /// call encoded again.
    pub fn checkpoint_bytes(&mut self) -> Vec<u8> {
        let encoded = &mut self.encoded.0;
        // One walk of both (each in key order), not a lookup per claim.
        let (mut extra, mut missing) = (Vec::new(), Vec::new());
        let mut have = encoded.keys().peekable();
        for k in self.claims.keys() {
            extra.extend(std::iter::from_fn(|| have.next_if(|h| *h < k)).cloned());
            if have.next_if(|h| *h == k).is_none() {
                missing.push(k);
            }
        }
        extra.extend(have.cloned());
        for k in extra {
            encoded.remove(&k);
        }
        for k in missing {
            encoded.insert(k.clone(), checkpoint::encode_entry(&entry(&self.claims[k])));
        }
        checkpoint::encode_from(encoded.values())
    }

    /// The checkpoint's entries: every recorded claim.
    pub fn to_checkpoint(&self) -> Vec<checkpoint::Entry> {
        self.claims.values().map(entry).collect()
    }

    /// Every claim.
    pub fn values(&self) -> impl Iterator<Item = &ClaimInfo> {
        self.claims.values()
    }

    /// A claim by `namespace/name`.
    pub fn get(&self, key: &str) -> Option<&ClaimInfo> {
        self.claims.get(key)
    }

    /// Its binding conditions are met (KEP-5007): it is prepared as any other.
    pub fn binding_met(&mut self, key: &str) {
        if let Some(c) = self.claim_mut(key) {
            c.binding_pending = false;
        }
    }

    /// Put a claim in the cache as it is (tests of what is built from the cache).
    #[cfg(test)]
    pub fn insert_for_test(&mut self, c: ClaimInfo) {
        self.encoded.0.remove(&c.key());
        self.claims.insert(c.key(), c);
    }

    /// How many claims.
    pub fn len(&self) -> usize {
        self.claims.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// Devices held by claims (the allocator's `taken`).
    pub fn taken(&self) -> Vec<&Allocated> {
        self.claims.values().flat_map(|c| &c.allocation).collect()
    }

    /// The claim a pod's claim names, allocated now when the cache does
    /// not hold it (the scheduler's part: fetch it, allocate it). As
    /// manager.go checks the claim it fetched: a claim whose
    /// `status.reservedFor` (as its manifest gives it) does not name the pod
    /// is refused, and so is a claim whose cached namesake has another UID
    /// (the old one is still prepared). A manifest's `status.allocation` (a
    /// claim a scheduler already allocated) is taken as it is.
    fn resolve(
        &self,
        pod: (&str, &str, &str),
        c: &PodClaim,
        w: &World,
        taken: &[&Allocated],
    ) -> Result<(ClaimInfo, bool), Cause> {
        let (namespace, pod_uid, pod_name) = pod;
        let key = format!("{namespace}/{}", c.name);
        let (spec, uid, raw): (ClaimSpec, String, Option<&serde_json::Value>) = match (&c.spec, &c.template) {
            (Some(spec), _) => (spec.clone(), objects::derived_uid(&format!("extended\0{pod_uid}\0{key}")), None),
            (None, Some(t)) => match w.objects.get(&format!("ResourceClaimTemplate {namespace}/{t}")) {
                Some(Object::Template { spec, .. }) => {
                    (spec.clone(), objects::derived_uid(&format!("generated\0{pod_uid}\0{key}")), None)
                }
                _ => return Err(Cause::NotFound { kind: "ResourceClaimTemplate", name: t.clone() }),
            },
            (None, None) => match w.objects.get(&format!("ResourceClaim {key}")) {
                Some(Object::Claim { spec, uid, raw, .. }) => (spec.clone(), uid.clone(), Some(raw)),
                _ => return Err(Cause::NotFound { kind: "ResourceClaim", name: c.name.clone() }),
            },
        };
        let status = raw.map(|r| &r["status"]);
        // The kubelet checks every claim it fetched; this node's scheduler
        // part reserves a static pod's claim that names nobody yet.
        let nobody = Vec::new();
        let reserved = status.and_then(|s| s["reservedFor"].as_array()).or(w.as_written.then_some(&nobody));
        if let Some(reserved) = reserved {
            // resourceclaim.IsReservedForPod: the UID, or the pod's PodGroup with the gate on.
            if !crate::controlplane::controller::reserves_pod(reserved, pod_uid, w.pod_group) {
                return Err(Cause::NotReserved {
                    pod: pod_name.to_string(),
                    pod_uid: pod_uid.to_string(),
                    claim: c.name.clone(),
                    uid,
                });
            }
        }
        if let Some(known) = self.claims.get(&key) {
            if known.uid != uid {
                return Err(Cause::OldClaim { claim: c.name.clone(), old_uid: known.uid.clone() });
            }
            return Ok((known.clone(), false));
        }
        if w.as_written && status.is_none_or(|s| s["allocation"].is_null()) {
            return Err(Cause::Unallocated { claim: c.name.clone() });
        }
        let scheduled =
            scheduler::schedule(&key, &spec, status, w.objects.values(), w.candidates, taken, w.drivers, w.features)
                .map_err(|e| Cause::NotAllocated { claim: c.name.clone(), source: Box::new(e) })?;
        let allocated_now = matches!(scheduled, Scheduled::Allocated(_));
        let mut info = ClaimInfo::allocated(namespace, &c.name, &uid, scheduled.into_devices());
        if allocated_now && w.features.binding_conditions {
            // Stamped as the scheduler's bindClaim does with the gates on;
            // its PreBind then waits for any binding conditions.
            info.allocated_at = Some(w.now);
            info.binding_pending = info.allocation.iter().any(|a| !a.binding_conditions.is_empty());
        } else if w.own_plane && w.as_written && w.features.binding_conditions {
            // Allocated by dpctl's own control plane (the scheduler's stand-in,
            // which stamped it): its PreBind wait is done here.
            let stamp = status.and_then(|s| s["allocation"]["allocationTimestamp"].as_str());
            info.allocated_at = stamp.and_then(crate::core::time::parse_unix).and_then(|(s, n)| {
                u64::try_from(s).ok().map(|s| std::time::UNIX_EPOCH + std::time::Duration::new(s, n))
            });
            info.binding_pending = info.allocation.iter().any(|a| !a.binding_conditions.is_empty());
        }
        Ok((info, allocated_now))
    }

    /// Plan one attempt at preparing pod `uid`'s claims (manager.go
    /// prepareResources). First, without changing the cache, every claim is
    /// resolved and every driver it needs looked up: if one fails, nothing
    /// is recorded. Then every claim is recorded with the pod's reference
    /// (the shell checkpoints that before any call), and each claim not
    /// prepared yet is batched with every one of its drivers.
    pub fn plan_prepare(
        &mut self,
        namespace: &str,
        uid: &str,
        pod_name: &str,
        claims: &[PodClaim],
        w: &World,
    ) -> Result<PreparePlan, Cause> {
        let mut resolved: Vec<(ClaimInfo, bool)> = Vec::new();
        // Borrowed, not cloned: every claim's devices, for every plan; and
        // the devices of claims a scheduler already allocated (a written
        // status.allocation) that this node has not prepared: the
        // scheduler's claim tracker counts them in use too.
        let written: Vec<Allocated> = allocator::held_where(w.objects.values(), |namespace, name| {
            !self.claims.contains_key(&format!("{namespace}/{name}"))
        });
        let mut base = self.taken();
        base.extend(&written);
        base.extend(w.held);
        let mut mine: Vec<Allocated> = Vec::new();
        for c in claims {
            let taken: Vec<&Allocated> = base.iter().copied().chain(&mine).collect();
            let (info, allocated_now) = self.resolve((namespace, uid, pod_name), c, w, &taken)?;
            // A claim allocated now holds its devices for the next one.
            mine.extend(info.allocation.iter().cloned());
            // Drivers are looked up for a claim to be prepared: not prepared
            // yet, or restored and new to this pod (manager.go also looks up
            // those of prepared claims: a deliberate difference, see
            // manager_tests.rs a_prepared_claim_whose_driver_is_gone_needs_no_call_unlike_upstream).
            if !info.done || (info.restored && !info.pods.contains(uid)) {
                for driver in info.drivers.keys() {
                    if !info.skips(driver, Operation::Prepare) && !w.drivers.contains(driver) {
                        return Err(Cause::NotRegistered { driver: driver.clone() });
                    }
                }
            }
            resolved.push((info, allocated_now));
        }
        let mut plan = PreparePlan::default();
        for (info, allocated_now) in resolved {
            let key = info.key();
            self.encoded.0.remove(&key);
            let c = match self.claims.get_mut(&key) {
                Some(c) => c,
                None => {
                    if allocated_now {
                        plan.allocated.push(info.clone());
                    }
                    plan.record = true;
                    self.claims.entry(key.clone()).or_insert(info)
                }
            };
            let running_before = c.restored && c.pods.contains(uid);
            plan.record |= c.pods.insert(uid.to_string());
            if c.done && (!c.restored || running_before) {
                plan.cached.push(key);
                continue;
            }
            plan.preparing.push(key.clone());
            let drivers: Vec<String> = c.drivers.keys().cloned().collect();
            for driver in drivers {
                if c.skips(&driver, Operation::Prepare) {
                    // No driver lookup, no call: the allocated devices count as prepared.
                    let devs = c.unprepared_devices(&driver);
                    plan.record |= c.drivers.insert(driver.clone(), DriverPrep::Prepared(devs.clone()))
                        != Some(DriverPrep::Prepared(devs));
                    plan.skipped.push((key.clone(), driver));
                    continue;
                }
                plan.batches.entry(driver).or_default().push(c.claim());
            }
        }
        Ok(plan)
    }

    /// Every call of a prepare attempt succeeded: its claims are prepared
    /// (manager.go: setPrepared, then the checkpoint).
    pub fn mark_prepared(&mut self, keys: &[String]) {
        for k in keys {
            if let Some(c) = self.claim_mut(k) {
                c.done = true;
                c.restored = false;
            }
        }
    }

    /// Record `driver`'s answer to NodePrepareResources for `asked`: each
    /// claim's devices are recorded as they come (the first bad entry stops
    /// there, as the kubelet's loop does).
    pub fn prepared(
        &mut self,
        driver: &str,
        asked: &[Claim],
        resp: &NodePrepareResourcesResponse,
    ) -> Result<(), Cause> {
        let op = Operation::Prepare;
        for (claim_uid, r) in &resp.claims {
            let Some(req) = asked.iter().find(|c| &c.uid == claim_uid) else {
                return Err(Cause::UnknownClaim { op, uid: claim_uid.clone() });
            };
            if !r.error.is_empty() {
                return Err(Cause::ClaimFailed { op, claim: req.name.clone(), error: r.error.clone() });
            }
            let devs = r
                .devices
                .iter()
                .map(|d| checkpoint::Device {
                    pool_name: d.pool_name.clone(),
                    device_name: d.device_name.clone(),
                    request_names: Some(d.request_names.clone()),
                    cdi_device_ids: Some(d.cdi_device_ids.clone()),
                    // manager.go: ShareID: (*types.UID)(device.ShareId).
                    share_id: d.share_id.clone(),
                })
                .collect();
            let key = format!("{}/{}", req.namespace, req.name);
            if let Some(c) = self.claim_mut(&key) {
                c.drivers.insert(driver.to_string(), DriverPrep::Prepared(devs));
            }
        }
        let count = asked.len().saturating_sub(resp.claims.len());
        if count != 0 {
            return Err(Cause::Skipped { op, count });
        }
        Ok(())
    }

    /// Set a claim's unresolved CDI IDs.
    pub fn set_unresolved(&mut self, key: &str, ids: Vec<String>) {
        if let Some(c) = self.claim_mut(key) {
            c.cdi_unresolved = ids;
        }
    }

    /// Plan one attempt at unpreparing pod `uid`'s claims `keys` (manager.go
    /// unprepareResources): a claim another pod uses only loses the
    /// reference; any other is unprepared by every driver its state names.
    pub fn plan_unprepare(&mut self, uid: &str, keys: &[String]) -> UnpreparePlan {
        let mut plan = UnpreparePlan::default();
        for key in keys {
            let Some(c) = self.claim_mut(key) else { continue };
            if c.pods.len() > 1 || (!c.pods.contains(uid) && !c.pods.is_empty()) {
                c.pods.remove(uid);
                plan.shared.push((key.clone(), c.uid.clone()));
                continue;
            }
            for driver in c.drivers.keys() {
                if c.skips(driver, Operation::Unprepare) {
                    plan.skipped.push((key.clone(), driver.clone()));
                } else {
                    plan.batches.entry(driver.clone()).or_default().push(c.claim());
                }
            }
            plan.remove.push(key.clone());
        }
        plan
    }

    /// The claims pod `uid` uses, by `namespace/name` (claiminfo.go claimNamesForPod).
    pub fn keys_for_pod(&self, uid: &str) -> Vec<String> {
        self.claims.iter().filter(|(_, c)| c.pods.contains(uid)).map(|(k, _)| k.clone()).collect()
    }

    /// Remove claims (their unprepare succeeded).
    pub fn remove(&mut self, keys: &[String]) -> Vec<ClaimInfo> {
        keys.iter()
            .filter_map(|k| {
                self.encoded.0.remove(k);
                self.claims.remove(k)
            })
            .collect()
    }

    /// Pods the cache names that `known` does not: uid → (namespace, claim names).
    pub fn orphans(&self, known: &BTreeSet<String>) -> BTreeMap<String, (String, Vec<String>)> {
        let mut out: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
        for c in self.claims.values() {
            for p in c.pods.iter().filter(|p| !known.contains(*p)) {
                let e = out.entry(p.clone()).or_insert_with(|| (c.namespace.clone(), vec![]));
                e.1.push(c.name.clone());
            }
        }
        out
    }
}

/// What a driver's answer to NodeUnprepareResources for `asked` means.
pub fn unprepared(asked: &[Claim], resp: &NodeUnprepareResourcesResponse) -> Result<(), Cause> {
    let op = Operation::Unprepare;
    for (claim_uid, r) in &resp.claims {
        let Some(req) = asked.iter().find(|c| &c.uid == claim_uid) else {
            return Err(Cause::UnknownClaim { op, uid: claim_uid.clone() });
        };
        if !r.error.is_empty() {
            return Err(Cause::ClaimFailed { op, claim: req.name.clone(), error: r.error.clone() });
        }
    }
    let count = asked.len().saturating_sub(resp.claims.len());
    if count != 0 {
        return Err(Cause::Skipped { op, count });
    }
    Ok(())
}

#[cfg(test)]
#[path = "claiminfo_tests.rs"]
mod tests;
