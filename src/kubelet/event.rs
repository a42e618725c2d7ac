//! What the kubelet engine reports: one typed event per thing that happened.
//! The serde form of [`Stamped`] *is* the JSON log line (the log adds only
//! `time`), so the log and in-process consumers (`dpctl test`, `bench
//! kubelet`, `demo`, the e2e tests) read the same data. In-process
//! subscribers also get the full ListAndWatch snapshot and the moment the
//! event was decided, which the log leaves out.

use crate::api::deviceplugin::Device;
use crate::core::log::Logger;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;

/// How a plugin reached the kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Via {
    /// `Register` on kubelet.sock.
    #[serde(rename = "kubelet.sock")]
    KubeletSocket,
    /// A socket in the plugin-watcher directory.
    #[serde(rename = "plugin-watcher")]
    PluginWatcher,
}

impl Via {
    /// As the log writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Via::KubeletSocket => "kubelet.sock",
            Via::PluginWatcher => "plugin-watcher",
        }
    }
}

/// Where a registration failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectStage {
    /// The request itself (version, resource name, endpoint).
    Validation,
    /// Dialing the plugin back or GetDevicePluginOptions.
    DialBack,
    /// NotifyRegistrationStatus (plugin watcher): a failed notify deregisters.
    Notify,
    /// GetInfo on the plugin-watcher socket.
    GetInfo,
    /// The kubelet was restarting.
    Restarting,
}

/// Why a plugin handler refused a registration: where, the text the
/// plugin is told, and the rulebook rule it broke (when one did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Where it failed.
    pub stage: RejectStage,
    /// The text NotifyRegistrationStatus carries.
    pub error: String,
    /// The rule broken.
    pub rule: Option<&'static str>,
}

impl Refusal {
    /// A refusal at `stage` saying `error`.
    pub fn new(stage: RejectStage, error: impl Into<String>) -> Self {
        Refusal { stage, error: error.into(), rule: None }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for Refusal {}

/// One event of the kubelet engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum KubeletEvent {
    /// The engine's first generation is serving.
    #[serde(rename_all = "camelCase")]
    Started {
        /// kubelet.sock.
        kubelet_socket: String,
        /// The PodResources socket, if served.
        pod_resources_socket: Option<String>,
        /// How long the start took.
        start_ms: f64,
    },
    /// Where the mock kubelet looks (said once at start): the plugin
    /// watcher's directory (none: not watched) and the CDI search path.
    #[serde(rename_all = "camelCase")]
    Paths {
        /// The plugin watcher's directory, or why there is none.
        plugins_registry_dir: String,
        /// Where CDI IDs of prepared claims are resolved (None: no DRA manager).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cdi_spec_dirs: Option<String>,
    },
    /// A restart is beginning.
    Restarting {
        /// Why (SIGHUP, --restart-every, a request).
        reason: String,
    },
    /// A later generation is serving.
    #[serde(rename_all = "camelCase")]
    Restarted {
        /// kubelet.sock.
        kubelet_socket: String,
        /// The PodResources socket, if served.
        pod_resources_socket: Option<String>,
        /// How long the restart took.
        start_ms: f64,
    },
    /// The engine stopped.
    Stopped,
    /// A socket deleted from the plugin directory at start.
    SocketDeleted {
        /// The socket.
        socket: String,
    },
    /// The status socket `dpctl node` reads.
    Status {
        /// The socket.
        socket: String,
    },
    /// The metrics endpoint.
    Metrics {
        /// Its URL.
        addr: String,
    },
    /// The plugin watcher is watching.
    PluginWatcher {
        /// The directory.
        dir: String,
    },
    /// Something failed that does not stop the engine.
    Error {
        /// What failed.
        error: String,
        /// The path involved, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        socket: Option<String>,
    },
    /// A plugin registered (kubelet.sock or the plugin watcher).
    #[serde(rename_all = "camelCase")]
    Registered {
        /// Resource name.
        resource: String,
        /// The DevicePlugin socket dialled back.
        endpoint: String,
        /// The endpoint as the plugin sent it (a file name on kubelet.sock, a path from GetInfo).
        endpoint_sent: String,
        /// How it registered.
        via: Via,
        /// The version(s) it sent.
        version: String,
        /// The options of its RegisterRequest (kubelet.sock only; the kubelet ignores them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_options: Option<Options>,
        /// From GetDevicePluginOptions.
        pre_start_required: bool,
        /// From GetDevicePluginOptions.
        get_preferred_allocation_available: bool,
        /// It replaced an earlier endpoint of the resource.
        replaced: bool,
        /// Earlier instances of the resource still streaming (what happens to
        /// them depends on the kubelet version: see `kubelet::profile`).
        #[serde(default)]
        older_instances: usize,
    },
    /// A Register call arrived on kubelet.sock, before its checks and the
    /// dial-back (which may take the dial timeout): a slow or failing
    /// dial-back is seen as it happens. `Registered` or
    /// `RegistrationRejected` follows.
    #[serde(rename_all = "camelCase")]
    RegisterReceived {
        /// Resource name (capped).
        resource: String,
        /// Endpoint as sent (capped).
        endpoint: String,
    },
    /// Dialling a registering plugin back failed; the kubelet keeps trying
    /// until its dial timeout (reported once per Register, at the first failure).
    #[serde(rename_all = "camelCase")]
    DialBackFailing {
        /// Resource name (capped).
        resource: String,
        /// The socket dialled.
        socket: String,
        /// Why the dial failed.
        error: String,
    },
    /// A registration the kubelet refused, with the kubelet's text.
    #[serde(rename_all = "camelCase")]
    RegistrationRejected {
        /// How it came.
        via: Via,
        /// Where it failed.
        stage: RejectStage,
        /// Resource name (capped).
        resource: String,
        /// Endpoint as sent (capped).
        endpoint: String,
        /// The socket it resolves to (the plugin-watcher socket when GetInfo failed).
        socket: String,
        /// The version(s) it sent (capped).
        version: String,
        /// The options of its RegisterRequest (kubelet.sock only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_options: Option<Options>,
        /// The kubelet's error text.
        error: String,
        /// Why a resource name is invalid, if that was the reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
        /// The rulebook rule the request broke (`protocol`), when a rule refused it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// A plugin-watcher registration completed (NotifyRegistrationStatus acknowledged).
    WatcherRegistered {
        /// The registration socket.
        socket: String,
        /// Resource name.
        resource: String,
        /// The DevicePlugin socket.
        endpoint: String,
    },
    /// A ListAndWatch message changed the resource.
    #[serde(rename_all = "camelCase")]
    Devices {
        /// Resource name.
        resource: String,
        /// The endpoint's socket.
        endpoint: String,
        /// All devices.
        capacity: usize,
        /// Healthy devices.
        allocatable: usize,
        /// New IDs (capped).
        added: Vec<String>,
        /// Gone IDs (capped).
        removed: Vec<String>,
        /// IDs whose health changed (capped).
        health_changed: Vec<String>,
        /// The message's encoded size.
        bytes: usize,
        /// The message as received (in process only; the log carries counts and capped lists).
        #[serde(skip)]
        snapshot: Option<Arc<Vec<Device>>>,
    },
    /// A device the kubelet accepts but a plugin should not send.
    DeviceWarning {
        /// Resource name.
        resource: String,
        /// The problem.
        problem: String,
        /// The rulebook rule the snapshot broke (`protocol`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// An endpoint's ListAndWatch stream ended.
    #[serde(rename_all = "camelCase")]
    StreamEnded {
        /// Resource name.
        resource: String,
        /// The endpoint's socket.
        endpoint: String,
        /// Who ended it and how.
        reason: String,
        /// Devices kept (unhealthy) during the grace period.
        capacity: usize,
        /// Always 0.
        allocatable: usize,
        /// The grace period.
        grace_period_ms: f64,
        /// Kubelets up to 1.36 (keyed by resource): an earlier instance's
        /// stream ended and the kubelet disconnected this *current* endpoint
        /// instead (kubernetes#121994).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disconnected: Option<String>,
        /// What happened, in words.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Kubelets since 1.37 (keyed by socket): one of several instances of a
    /// resource ended; the others stay and the devices are as they were.
    InstanceEnded {
        /// Resource name.
        resource: String,
        /// The instance's socket.
        endpoint: String,
        /// Who ended it and how.
        reason: String,
        /// All devices of the resource now.
        capacity: usize,
        /// Healthy devices of the resource now.
        allocatable: usize,
    },
    /// A resource's grace period ended without its plugin.
    ResourceRemoved {
        /// Resource name.
        resource: String,
        /// Why.
        reason: String,
    },
    /// A checkpointed resource's plugin registered again after a restart.
    #[serde(rename_all = "camelCase")]
    PluginBack {
        /// Resource name.
        resource: String,
        /// Time since the restart.
        after_ms: f64,
    },
    /// Every checkpointed resource is back.
    #[serde(rename_all = "camelCase")]
    AllPluginsBack {
        /// Time since the restart.
        after_ms: f64,
    },
    /// The checkpoint was read.
    CheckpointRestored {
        /// Allocations restored.
        allocations: usize,
        /// Resources it lists.
        resources: Vec<String>,
    },
    /// The checkpoint could not be read and was set aside.
    #[serde(rename_all = "camelCase")]
    CheckpointCorrupt {
        /// Why.
        error: String,
        /// Where it went.
        set_aside: String,
    },
    /// The checkpoint's checksum does not match its content: the file is ignored.
    CheckpointChecksum {
        /// The file.
        file: String,
        /// What that means.
        note: String,
    },
    /// Writing the checkpoint failed.
    CheckpointError {
        /// Why.
        error: String,
    },
    /// A pod was admitted.
    #[serde(rename_all = "camelCase")]
    PodAdmitted {
        /// namespace/name.
        pod: String,
        /// Pod UID.
        uid: String,
        /// `container:resource=ids` per allocation.
        allocations: Vec<String>,
        /// Allocate calls made.
        allocate_calls: usize,
        /// Admission latency.
        latency_ms: f64,
    },
    /// A checkpointed pod was taken back after a restart.
    #[serde(rename_all = "camelCase")]
    PodRestored {
        /// namespace/name.
        pod: String,
        /// Pod UID.
        uid: String,
        /// `container:resource=ids` per allocation.
        allocations: Vec<String>,
        /// Allocate calls made.
        allocate_calls: usize,
        /// Latency.
        latency_ms: f64,
    },
    /// A pod took a step of its lifecycle (admitted → claims prepared →
    /// containers started → running → stopped → claims unprepared → devices freed).
    #[serde(rename_all = "camelCase")]
    PodPhase {
        /// namespace/name.
        pod: String,
        /// Pod UID.
        uid: String,
        /// The step it is at.
        step: crate::kubelet::lifecycle::Step,
        /// The pod phase.
        phase: crate::kubelet::lifecycle::Phase,
        /// Why it waits (with the kubelet's event message).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<crate::kubelet::lifecycle::Reason>,
        /// The kubelet's event message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Reading changed manifests failed as a whole (the parse task died);
    /// they are read again at the next scan.
    ManifestsUnread {
        /// How many files.
        files: usize,
        /// Why.
        error: String,
    },
    /// A pod (manifest) was rejected.
    #[serde(rename_all = "camelCase")]
    PodRejected {
        /// The manifest.
        file: String,
        /// The kubelet's message.
        reason: String,
        /// The pod status reason (`UnexpectedAdmissionError`, `OutOf<resource>`, …).
        #[serde(default)]
        pod_reason: String,
    },
    /// A manifest has fields the API does not know (kubectl's strict field
    /// validation words); it is read without them, as the kubelet reads static pods.
    ManifestWarning {
        /// The manifest.
        file: String,
        /// `unknown field "spec.containers[0].resource"; did you mean "resources"?`, …
        warnings: Vec<String>,
    },
    /// A pod was removed and its devices freed.
    PodRemoved {
        /// namespace/name.
        pod: String,
        /// Pod UID.
        uid: String,
        /// Freed device IDs per resource.
        freed: Value,
    },
    /// A checkpointed allocation without a pod was freed.
    #[serde(rename_all = "camelCase")]
    AllocationFreed {
        /// Pod UID.
        #[serde(rename = "podUID")]
        pod_uid: String,
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Why.
        reason: String,
    },
    /// GetPreferredAllocation.
    #[serde(rename_all = "camelCase")]
    Preferred {
        /// Resource.
        resource: String,
        /// Container.
        container: String,
        /// Offered IDs (capped).
        available: Vec<String>,
        /// Must-include IDs (capped).
        must_include: Vec<String>,
        /// Requested size.
        size: i32,
        /// Latency.
        latency_ms: f64,
        /// The answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preferred: Option<Vec<String>>,
        /// Answer IDs outside the offer (ignored, as the kubelet does).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ignored_foreign: Option<Vec<String>>,
        /// IDs added to a short answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topped_up: Option<usize>,
        /// The call's error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Allocate.
    #[serde(rename_all = "camelCase")]
    Allocate {
        /// namespace/name.
        pod: String,
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Device IDs.
        devices: Vec<String>,
        /// Latency.
        latency_ms: f64,
        /// The call's error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// PreStartContainer succeeded.
    #[serde(rename_all = "camelCase")]
    PreStart {
        /// namespace/name.
        pod: String,
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Device IDs.
        devices: Vec<String>,
        /// Latency.
        latency_ms: f64,
    },
    /// PreStartContainer failed: the kubelet fails the container's start.
    #[serde(rename_all = "camelCase")]
    ContainerStartFailed {
        /// namespace/name.
        pod: String,
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Device IDs.
        devices: Vec<String>,
        /// Latency.
        latency_ms: f64,
        /// The error.
        error: String,
    },
    /// A DRA driver registered through the plugin watcher (one instance of it).
    #[serde(rename_all = "camelCase")]
    DraRegistered {
        /// The driver.
        driver: String,
        /// Its registration socket.
        socket: String,
        /// Its service socket.
        endpoint: String,
        /// The DRAPlugin service chosen.
        service: String,
        /// The health service followed, if advertised.
        health: Option<String>,
        /// Instances of the driver now registered (2 during a rolling update).
        instances: usize,
    },
    /// A DRA driver instance went away.
    #[serde(rename_all = "camelCase")]
    DraDeregistered {
        /// The driver.
        driver: String,
        /// Its service socket.
        endpoint: String,
        /// Instances left.
        instances: usize,
    },
    /// A DRA driver's devices changed health (at most one a second per
    /// driver; changes in between are folded into the next).
    DraHealth {
        /// The driver.
        driver: String,
        /// `pool/device=Health` of each device whose health changed.
        devices: Vec<String>,
        /// Every device of the driver by health (`2 Healthy, 1 Unknown`).
        summary: String,
        /// Changes folded into this one (0: none).
        #[serde(default, skip_serializing_if = "is_zero")]
        folded: u32,
    },
    /// The pods API (pods/v1alpha1) is served here (the PodsAPI gate is on).
    PodsApi {
        /// Its socket.
        socket: String,
    },
    /// A DRA driver answered its health stream with Unimplemented and the
    /// kubelet (1.37+) stops watching it until it registers again.
    DraHealthStopped {
        /// The driver.
        driver: String,
        /// The health service (`v1.DRAResourceHealth`).
        service: String,
        /// The driver's answer.
        error: String,
    },
    /// A claim was allocated (the mock scheduler's part).
    #[serde(rename_all = "camelCase")]
    ClaimAllocated {
        /// `namespace/name`.
        claim: String,
        /// Its UID.
        uid: String,
        /// `driver/pool/device`, each device.
        devices: Vec<String>,
    },
    /// A claim allocated here waits for its devices' binding conditions
    /// (the scheduler's PreBind, KEP-5007; its event BindingConditionsPending):
    /// no driver is called for the pod until they are met.
    #[serde(rename_all = "camelCase")]
    ClaimBindingPending {
        /// The pod (`namespace/name`).
        pod: String,
        /// `namespace/name`.
        claim: String,
        /// What is not met yet (`driver/pool/device`: the condition).
        waiting: String,
    },
    /// Every binding condition of a claim is met: its pod goes on.
    #[serde(rename_all = "camelCase")]
    ClaimBindingMet {
        /// The pod (`namespace/name`).
        pod: String,
        /// `namespace/name`.
        claim: String,
        /// How long the pod waited, in milliseconds.
        waited_ms: u64,
    },
    /// A claim's binding failed (a bindingFailureCondition True) or timed
    /// out: the scheduler deallocates it and tries the pod again.
    #[serde(rename_all = "camelCase")]
    ClaimBindingFailed {
        /// The pod (`namespace/name`).
        pod: String,
        /// `namespace/name`.
        claim: String,
        /// The scheduler's words (device binding failed / device binding timeout).
        error: String,
    },
    /// NodePrepareResources succeeded for a claim.
    #[serde(rename_all = "camelCase")]
    ClaimPrepared {
        /// The pod (`namespace/name`).
        pod: String,
        /// `namespace/name`.
        claim: String,
        /// Its UID.
        uid: String,
        /// `driver/pool/device`, each device.
        devices: Vec<String>,
        /// CDI device IDs.
        cdi_ids: Vec<String>,
        /// Whether it was already prepared (no call made: the kubelet skips prepared claims).
        cached: bool,
        /// The NodePrepareResources round trip that prepared it (its driver's
        /// batch), in microseconds, as the kubelet's DRA client timed it; absent
        /// when no call was made (cached).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_us: Option<u64>,
        /// The time the attempt that prepared it waited for the checkpoint
        /// on disk (two synced writes, before and after the call, as
        /// manager.go writes it), in microseconds; absent with `call_us`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sync_us: Option<u64>,
    },
    /// Preparing a pod's claims failed; it is retried.
    #[serde(rename_all = "camelCase")]
    ClaimPrepareFailed {
        /// The pod (`namespace/name`).
        pod: String,
        /// The kubelet's text.
        error: String,
        /// Which attempt.
        attempt: u32,
    },
    /// A pod's DRA-backed extended resources got their special claim (KEP-5004).
    #[serde(rename_all = "camelCase")]
    ExtendedResourceClaim {
        /// The pod (`namespace/name`).
        pod: String,
        /// The claim's name.
        claim: String,
        /// `request=class×count`, each request.
        requests: Vec<String>,
        /// `container/resource→request`, each request mapping.
        mappings: Vec<String>,
    },
    /// The special claim is prepared but a container gets no CDI device
    /// from it (a mapping or request-name mismatch; dra-driver-cpu#197).
    #[serde(rename_all = "camelCase")]
    ExtendedResourceUnserved {
        /// The pod (`namespace/name`).
        pod: String,
        /// The container.
        container: String,
        /// The extended resource.
        resource: String,
        /// The special claim's request mapped to it.
        request: String,
        /// What happened and what to fix.
        message: String,
    },
    /// A prepared claim's CDI ID resolves to no spec file (the runtime would fail the container).
    #[serde(rename_all = "camelCase")]
    CdiUnresolved {
        /// `namespace/name`.
        claim: String,
        /// The CDI ID.
        cdi_id: String,
    },
    /// NodeUnprepareResources succeeded for a claim (or no call was needed).
    #[serde(rename_all = "camelCase")]
    ClaimUnprepared {
        /// The pod (`namespace/name`).
        pod: String,
        /// `namespace/name`.
        claim: String,
        /// Its UID.
        uid: String,
        /// Another pod still uses it: only the reference went.
        still_used: bool,
    },
    /// Unpreparing a pod's claims failed; it is retried.
    #[serde(rename_all = "camelCase")]
    ClaimUnprepareFailed {
        /// The pod (`namespace/name`).
        pod: String,
        /// The kubelet's text.
        error: String,
        /// Which attempt.
        attempt: u32,
    },
    /// The DRA checkpoint was read at start.
    #[serde(rename_all = "camelCase")]
    DraCheckpointRestored {
        /// The file.
        path: String,
        /// Claims recorded in it (prepared or not).
        claims: usize,
    },
    /// The DRA health cache was read at start (`<root>/dra_health_state`,
    /// healthinfo.go): what each device counted as before the restart.
    #[serde(rename_all = "camelCase")]
    DraHealthRestored {
        /// The file.
        path: String,
        /// `driver pool/device=Health (message)`, each device.
        devices: Vec<String>,
    },
    /// The DRA checkpoint at start was damaged: moved aside (never
    /// overwritten), and the start refused as the kubelet's is.
    #[serde(rename_all = "camelCase")]
    DraCheckpointCorrupt {
        /// The file.
        path: String,
        /// Why it is not a checkpoint.
        error: String,
        /// Where it was moved (or why it could not be).
        set_aside: String,
    },
    /// The DRA checkpoint could not be read or written.
    #[serde(rename_all = "camelCase")]
    DraCheckpointError {
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
    /// A driver's ResourceSlices on this node were deleted: none of its
    /// plugin instances was registered and connected for the wiping delay.
    DraSlicesWiped {
        /// The driver.
        driver: String,
        /// The slices deleted.
        slices: Vec<String>,
    },
    /// A registered DRA plugin instance's endpoint stopped (or started again)
    /// accepting connections: the kubelet's gRPC connection state. With no
    /// connected instance left, the driver's slices are wiped after the delay.
    DraConnection {
        /// The driver.
        driver: String,
        /// The endpoint.
        endpoint: String,
        /// Whether it accepts connections now.
        connected: bool,
    },
    /// A node operation was skipped for a driver's part of a claim: every
    /// device of that driver in the allocation skips it (KEP-5945,
    /// `skipNodeOperations`); no driver lookup, no call.
    DraOperationSkipped {
        /// `namespace/name`.
        claim: String,
        /// The driver.
        driver: String,
        /// `NodePrepareResources` or `NodeUnprepareResources`.
        operation: String,
    },
    /// At start, before any driver registers, every ResourceSlice of this
    /// node was deleted (all drivers), as the kubelet's DRA plugin manager
    /// does: none is usable until its driver comes back and publishes again.
    DraNodeSlicesWiped {
        /// The node.
        node: String,
        /// The slices deleted.
        slices: Vec<String>,
    },
    /// The local API server is serving (a kubeconfig for drivers written).
    ApiServer {
        /// Its URL.
        addr: String,
        /// The kubeconfig file.
        kubeconfig: String,
    },
    /// A ResourceClaim, ResourceClaimTemplate, DeviceClass or ResourceSlice manifest was read.
    #[serde(rename_all = "camelCase")]
    DraObject {
        /// `Kind namespace/name`.
        key: String,
        /// Its file.
        file: String,
    },
    /// A NoExecute device taint the claim's request does not tolerate (any
    /// longer) evicted a pod, as the device-taint eviction controller does:
    /// a static pod is then deleted (containers stopped, claims unprepared);
    /// a pod of the API (logged by the mock kubelet that serves the store)
    /// is deleted through the API, and its node stops it.
    #[serde(rename_all = "camelCase")]
    PodEvicted {
        /// The pod's UID.
        pod: String,
        /// `namespace/name` of the claim whose device is tainted.
        claim: String,
        /// `driver/pool/device`.
        device: String,
        /// `key=value:NoExecute`.
        taint: String,
        /// The eviction controller's event reason: DeviceTaintManagerEviction
        /// ("Marking for deletion").
        reason: String,
        /// The pod condition it sets before deleting the pod: DisruptionTarget (True).
        condition: String,
        /// That condition's reason: DeletionByDeviceTaintManager.
        condition_reason: String,
        /// That condition's message.
        condition_message: String,
        /// The taint's timeAdded (RFC 3339); when it has none, when the
        /// mock kubelet first saw it (as the API server would have stamped it).
        time_added: String,
        /// When the pod was due to be evicted (RFC 3339): timeAdded plus the
        /// smallest tolerationSeconds of the NoExecute tolerations that match.
        evict_at: String,
    },
    /// As a node of a cluster (`--kubeconfig`): its Node object is registered.
    NodeRegistered {
        /// The node's name.
        node: String,
        /// The API server's URL.
        server: String,
        /// Whether the Node already existed (its labels and status then reconciled).
        existed: bool,
    },
    /// As a node of a cluster: the Node's status was written with this allocatable.
    NodeStatus {
        /// The node's name.
        node: String,
        /// Resource → quantity, as status.allocatable says it.
        allocatable: std::collections::BTreeMap<String, String>,
    },
    /// As a node of a cluster: a pod bound to the node, its status written as the kubelet does.
    #[serde(rename_all = "camelCase")]
    ClusterPodStatus {
        /// `namespace/name`.
        pod: String,
        /// Its UID.
        uid: String,
        /// status.phase.
        phase: String,
        /// status.reason (a failed admission's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// As a node of a cluster: a deleted pod, stopped, unprepared and freed, is
    /// deleted from the API server (gracePeriodSeconds 0).
    ClusterPodDeleted {
        /// `namespace/name`.
        pod: String,
        /// Its UID.
        uid: String,
    },
    /// As a node of a cluster: a call to the API server failed (retried).
    ClusterError {
        /// What was being done.
        during: String,
        /// The error.
        error: String,
    },
    /// An event of a test's own (shell tests).
    AfterClose,
}

/// Who registered, as the request said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registrant {
    /// How it came.
    pub via: Via,
    /// The version(s) it sent.
    pub version: String,
    /// The endpoint as sent.
    pub endpoint: String,
    /// The options of its RegisterRequest (kubelet.sock only).
    pub request_options: Option<Options>,
}

/// Options as a plugin sent them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    /// pre_start_required.
    pub pre_start_required: bool,
    /// get_preferred_allocation_available.
    pub get_preferred_allocation_available: bool,
}

impl From<crate::api::deviceplugin::DevicePluginOptions> for Options {
    fn from(o: crate::api::deviceplugin::DevicePluginOptions) -> Self {
        Options {
            pre_start_required: o.pre_start_required,
            get_preferred_allocation_available: o.get_preferred_allocation_available,
        }
    }
}

/// An event with the generation that decided it: the log line's form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    /// The event.
    #[serde(flatten)]
    pub event: KubeletEvent,
    /// The generation (0 first, one more per restart); absent for process-wide events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// When it was decided (in process only).
    #[serde(skip, default = "Instant::now")]
    pub at: Instant,
}

impl Stamped {
    /// The event's name as the log writes it (`pod-admitted`, …).
    pub fn name(&self) -> String {
        match serde_json::to_value(&self.event) {
            Ok(Value::Object(m)) => m.get("event").and_then(Value::as_str).unwrap_or_default().to_string(),
            _ => String::new(),
        }
    }
}

/// The engine's event fan-out: every event goes to the log and to every
/// live subscriber, in order. Subscribers are unbounded (a consumer that
/// must see every snapshot never loses one); one that went away is dropped.
#[derive(Clone)]
pub struct EventBus {
    log: Logger,
    subs: Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<Stamped>>>>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").field("log", &self.log).finish()
    }
}

impl EventBus {
    /// A bus writing to `log`.
    pub fn new(log: Logger) -> Self {
        EventBus { log, subs: Arc::new(Mutex::new(Vec::new())) }
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<Stamped>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subs.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }

    /// The log behind the bus.
    pub fn log(&self) -> &Logger {
        &self.log
    }

    /// Report `event` of `generation`.
    pub fn emit(&self, event: KubeletEvent, generation: Option<u64>) {
        let s = Arc::new(Stamped { event, generation, at: Instant::now() });
        self.log.record(&*s);
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|tx| tx.send(s.clone()).is_ok());
    }
}

/// One generation's events on the shared bus: each carries the generation's
/// number, and none is emitted once the generation is closed (closing waits
/// for an emit in progress), so nothing of an old generation is logged after
/// the next one starts. The device manager and the container manager of a
/// generation each emit through it.
#[derive(Debug)]
pub struct GenerationEvents {
    bus: EventBus,
    number: u64,
    closed: std::sync::RwLock<bool>,
}

impl GenerationEvents {
    /// The events of generation `number`, on `bus`.
    pub fn new(bus: EventBus, number: u64) -> Arc<Self> {
        Arc::new(GenerationEvents { bus, number, closed: std::sync::RwLock::new(false) })
    }

    /// Report `event` of this generation, unless the generation is closed.
    pub fn emit(&self, event: KubeletEvent) {
        let closed = self.closed.read().unwrap_or_else(|p| p.into_inner());
        if !*closed {
            self.bus.emit(event, Some(self.number));
        }
    }

    /// Emit nothing more; returns once no emit is in progress.
    pub fn close(&self) {
        *self.closed.write().unwrap_or_else(|p| p.into_inner()) = true;
    }
}

/// At most [`LOG_LIST`] items of a list for the event log, then `+N more`.
pub fn capped<T: ToString>(items: &[T]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().take(LOG_LIST).map(|x| x.to_string()).collect();
    if items.len() > LOG_LIST {
        v.push(format!("+{} more", items.len() - LOG_LIST));
    }
    v
}

/// How many IDs one event-log field lists.
pub const LOG_LIST: usize = 20;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::log::LogFormat;
    use std::io::Write;

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_generations_events_carry_its_number_and_stop_when_it_closes() {
        let bus = EventBus::new(Logger::with_sink(LogFormat::Json, Box::new(Sink::default()), 16));
        let mut rx = bus.subscribe();
        let events = GenerationEvents::new(bus.clone(), 3);
        events.emit(KubeletEvent::Error { error: "open".into(), socket: None });
        events.close();
        events.emit(KubeletEvent::Error { error: "closed".into(), socket: None });
        bus.emit(KubeletEvent::Error { error: "bus".into(), socket: None }, None);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|s| match &s.event {
                KubeletEvent::Error { error, .. } => (error.clone(), s.generation),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(got, [("open".to_string(), Some(3)), ("bus".to_string(), None)]);
    }

    #[test]
    fn the_json_log_line_is_the_in_process_event() {
        let sink = Sink::default();
        let log = Logger::with_sink(LogFormat::Json, Box::new(sink.clone()), 16);
        let bus = EventBus::new(log.clone());
        let mut rx = bus.subscribe();
        let sent = [
            KubeletEvent::PodAdmitted {
                pod: "ns/p".into(),
                uid: "u-1".into(),
                allocations: vec!["c:v.e/x=a,b".into()],
                allocate_calls: 1,
                latency_ms: 1.5,
            },
            KubeletEvent::RegistrationRejected {
                via: Via::KubeletSocket,
                stage: RejectStage::Validation,
                resource: "bad".into(),
                endpoint: "x.sock".into(),
                socket: "/t/x.sock".into(),
                version: "v1".into(),
                request_options: Some(Options { pre_start_required: true, get_preferred_allocation_available: false }),
                error: "requested API version \"v1\" is not supported by kubelet".into(),
                why: None,
                rule: Some("register-version".into()),
            },
            KubeletEvent::Stopped,
        ];
        for (i, e) in sent.iter().enumerate() {
            bus.emit(e.clone(), (i > 0).then_some(i as u64));
        }
        assert!(log.close(std::time::Duration::from_secs(5)));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), sent.len(), "{text}");
        for line in lines {
            let from_log: Stamped = serde_json::from_str(line).unwrap();
            let in_process = rx.try_recv().unwrap();
            assert_eq!(from_log.event, in_process.event, "{line}");
            assert_eq!(from_log.generation, in_process.generation);
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["event"], in_process.name());
        }
        assert!(text.contains("\"event\":\"pod-admitted\"") && text.contains("\"allocateCalls\":1"), "{text}");
    }

    #[test]
    fn capped_lists_say_how_many_more() {
        let ids: Vec<String> = (0..25).map(|i| format!("d{i}")).collect();
        let c = capped(&ids);
        assert_eq!(c.len(), LOG_LIST + 1);
        assert_eq!(c.last().unwrap(), "+5 more");
        assert_eq!(capped(&ids[..3]), ["d0", "d1", "d2"]);
    }
}
