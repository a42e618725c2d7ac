//! Kubelet-version profiles: what a plugin can observe that differs between
//! the kubelet releases users run. Each behaviour is one row of [`TABLE`]
//! (the version it changed in and the upstream change); a [`Profile`] is the
//! table read at one version. `mock-kubelet --explain-profile` prints it, and
//! the README's copy is checked against [`markdown_table`] by a test.

use crate::protocol::dra;
use std::fmt;

/// The oldest kubelet minor version dpctl models.
pub const OLDEST: u32 = 25;
/// The newest released kubelet minor version (the default profile).
pub const NEWEST: u32 = 37;

/// A kubelet minor version (1.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeletVersion(u32);

impl KubeletVersion {
    /// The newest released version, the default.
    pub const DEFAULT: KubeletVersion = KubeletVersion(NEWEST);

    /// The minor number.
    pub fn minor(self) -> u32 {
        self.0
    }

    /// Every supported version, oldest first.
    pub fn all() -> impl Iterator<Item = KubeletVersion> {
        (OLDEST..=NEWEST).map(KubeletVersion)
    }

    /// `1.31`, `v1.31` or `1.31.4` (the patch is ignored). Errors name the supported range.
    pub fn parse(s: &str) -> Result<Self, ProfileError> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let mut parts = t.split('.');
        let (major, minor, patch) = (parts.next(), parts.next(), parts.next());
        fn num(p: Option<&str>) -> Option<&str> {
            p.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        }
        let ok_shape = parts.next().is_none() && patch.is_none_or(|p| num(Some(p)).is_some());
        match (num(major), num(minor)) {
            (Some("1"), Some(m)) if ok_shape => {
                let m: u32 = m.parse().map_err(|_| ProfileError::Unsupported(s.to_string()))?;
                if (OLDEST..=NEWEST).contains(&m) {
                    Ok(KubeletVersion(m))
                } else {
                    Err(ProfileError::Unsupported(s.to_string()))
                }
            }
            _ => Err(ProfileError::NotVersion(s.to_string())),
        }
    }

    /// A comma-separated list (`1.31,1.37`), in the order given, without repeats.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, ProfileError> {
        let mut out: Vec<KubeletVersion> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let v = Self::parse(part)?;
            if !out.contains(&v) {
                out.push(v);
            }
        }
        if out.is_empty() {
            return Err(ProfileError::NoVersion);
        }
        Ok(out)
    }
}

/// A comma-separated list of versions (`--kubelet-version 1.31,1.37`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionList(pub Vec<KubeletVersion>);

impl VersionList {
    /// Parse `1.31,1.37` (see [`KubeletVersion::parse_list`]).
    pub fn parse(s: &str) -> Result<Self, ProfileError> {
        KubeletVersion::parse_list(s).map(VersionList)
    }
}

impl Default for KubeletVersion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for KubeletVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl std::str::FromStr for KubeletVersion {
    type Err = ProfileError;
    fn from_str(s: &str) -> Result<Self, ProfileError> {
        Self::parse(s)
    }
}

/// How the registration server keys plugin instances of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endpoints {
    /// One client per resource name: a second registration replaces the map
    /// entry without closing the first stream, and when the first stream
    /// ends, the *new* client is disconnected and the resource marked
    /// unhealthy (kubernetes#121994).
    ByResource,
    /// One endpoint per (resource, socket) (kubernetes#135437): instances on
    /// other sockets coexist, a live instance's socket registering again is
    /// refused, and an instance's end leaves the others and the devices (the
    /// last snapshot of any instance) as they are unless it was the last one.
    #[default]
    BySocket,
}

/// Which checks devicesToAllocate makes, and so which texts a rejected pod gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionChecks {
    /// No health checks: "can't allocate unregistered device R", else
    /// "requested number of devices unavailable … Available: 0".
    Legacy,
    /// Registration and health first: "cannot allocate unregistered device R",
    /// "no healthy devices present; …", "previously allocated devices are no longer healthy; …".
    Health,
}

/// The topology manager's choice among non-preferred merged hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintMerge {
    /// The narrowest affinity wins.
    Narrowest,
    /// The affinity whose size is nearest (not above) the largest of each
    /// resource's minimal hint size wins.
    BestNonPreferredCount,
}

/// What PodResources `Get` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodResourcesGet {
    /// The method does not exist (gRPC Unimplemented).
    Absent,
    /// The KubeletPodResourcesGet gate is off by default: "PodResources API Get method disabled".
    Disabled,
    /// Served.
    Enabled,
}

/// Which DRAPlugin gRPC service the kubelet calls, and how it chooses it
/// (pkg/kubelet/cm/dra/plugin: registration.go, later dra_plugin_manager.go
/// validateSupportedServices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraServices {
    /// No DRAPlugin handler (before structured parameters, the kubelet's DRA
    /// spoke v1alpha3 to classic DRA drivers behind an off-by-default gate;
    /// not modelled): "no handler registered for plugin type: DRAPlugin".
    Absent,
    /// 1.31: the v1alpha4 API (gRPC service `v1alpha3.Node`); plugins did not
    /// advertise services yet, the kubelet calls it whatever is listed.
    V1alpha4,
    /// 1.32–1.33: the kubelet's order, v1beta1 then v1alpha4, falling back to
    /// v1alpha4 when neither is listed (a non-empty list is required).
    V1beta1ThenAlpha,
    /// 1.34+: the first of the plugin's list that the kubelet speaks (v1,
    /// v1beta1); none: refused.
    PluginOrder,
}

/// Several registered instances of one DRA driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraInstances {
    /// One plugin per driver name: a registration replaces the earlier one, and
    /// any instance's deregistration removes the driver.
    Replace,
    /// Instances coexist (a rolling update); calls go to the newest connected one.
    Coexist,
}

/// Which DRAResourceHealth service the kubelet opens, by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraHealth {
    /// None (the ResourceHealthStatus gate's DRA part is off by default, or absent).
    Off,
    /// v1alpha1.DRAResourceHealth.
    V1alpha1,
    /// v1.DRAResourceHealth, else v1alpha1.
    V1,
}

impl DraServices {
    /// The DRAPlugin service this kubelet calls for a plugin listing
    /// `supported`, or why (after "invalid supported gRPC versions of DRA
    /// driver plugin X at endpoint Y: ") it refuses the plugin
    /// (registration.go / dra_plugin_manager.go validateSupportedServices).
    pub fn choose(self, supported: &[String]) -> Result<&'static str, ProfileError> {
        let listed = |s: &str| supported.iter().any(|x| x == s);
        match self {
            DraServices::Absent => Err(ProfileError::NoDraHandler),
            DraServices::V1alpha4 => Ok(dra::DRA_V1ALPHA4),
            _ if supported.is_empty() => Err(ProfileError::NoServices),
            DraServices::V1beta1ThenAlpha => {
                Ok(if listed(dra::DRA_V1BETA1) { dra::DRA_V1BETA1 } else { dra::DRA_V1ALPHA4 })
            }
            DraServices::PluginOrder => {
                dra::chosen_service(supported).ok_or_else(|| ProfileError::NoCommonService(supported.to_vec()))
            }
        }
    }

    /// The newest DRAPlugin service this kubelet speaks.
    pub fn newest(self) -> Option<&'static str> {
        match self {
            DraServices::Absent => None,
            DraServices::V1alpha4 => Some(dra::DRA_V1ALPHA4),
            DraServices::V1beta1ThenAlpha => Some(dra::DRA_V1BETA1),
            DraServices::PluginOrder => Some(dra::DRA_V1),
        }
    }
}

impl DraHealth {
    /// The health service this kubelet opens for a plugin listing `supported`.
    pub fn choose(self, supported: &[String]) -> Option<&'static str> {
        match self {
            DraHealth::Off => None,
            DraHealth::V1alpha1 => supported.iter().any(|s| s == dra::HEALTH_V1ALPHA1).then_some(dra::HEALTH_V1ALPHA1),
            DraHealth::V1 => dra::chosen_health(supported),
        }
    }
}

/// Why a version, a gate or a plugin's services are refused; where the
/// kubelet refuses them too, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    /// A version (this text) outside the supported range.
    Unsupported(String),
    /// A text that is no version.
    NotVersion(String),
    /// An empty version list.
    NoVersion,
    /// This kubelet has no DRA plugin handler.
    NoDraHandler,
    /// A DRA plugin listing no services.
    NoServices,
    /// None of the plugin's services (these) is one this kubelet speaks.
    NoCommonService(Vec<String>),
    /// A `--feature-gates` entry (this one) that is not NAME=BOOL.
    GateForm(String),
    /// A value that is not a Go bool.
    NotBool {
        /// The gate or group version.
        name: String,
        /// The value.
        value: String,
    },
    /// A gate this mock kubelet does not set.
    UnknownGate(String),
    /// A gate this version does not have.
    AbsentGate {
        /// The gate.
        name: String,
        /// The version.
        version: KubeletVersion,
    },
    /// A locked gate (this one) set to false.
    LockedGate(String),
    /// A gate on whose dependencies (these) are off.
    Dependency {
        /// The gate.
        name: &'static str,
        /// The gates it needs that are off.
        off: Vec<String>,
    },
    /// A `--runtime-config` key the local API server does not serve off its default.
    RuntimeConfigKey(String),
    /// `--runtime-config` names a resource.k8s.io version this release did
    /// not have (v1beta1 came in 1.32, v1beta2 in 1.33).
    NotRegistered {
        /// The group version.
        group_version: &'static str,
        /// The kubelet version.
        version: KubeletVersion,
    },
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = || format!("supported: 1.{OLDEST} to 1.{NEWEST}, e.g. --kubelet-version 1.{NEWEST}");
        match self {
            ProfileError::Unsupported(s) => write!(f, "kubelet version {s:?} is not supported ({})", range()),
            ProfileError::NotVersion(s) => {
                write!(f, "kubelet version {s:?} is not a version like 1.{NEWEST} ({})", range())
            }
            ProfileError::NoVersion => {
                write!(f, "no kubelet version given; pass e.g. --kubelet-version 1.{OLDEST},1.{NEWEST}")
            }
            ProfileError::NoDraHandler => write!(f, "no handler registered for plugin type: {}", dra::PLUGIN_TYPE),
            ProfileError::NoServices => f.write_str("empty list of supported gRPC services (aka supported versions)"),
            ProfileError::NoCommonService(supported) => write!(
                f,
                "none of services supported by the plugin ({}) are supported by the kubelet ({})",
                go_quoted(supported),
                go_quoted(dra::KUBELET_DRA_SERVICES)
            ),
            ProfileError::GateForm(part) => {
                write!(f, "--feature-gates {part:?}: want NAME=true|false, e.g. DRAExtendedResource=true")
            }
            ProfileError::NotBool { name, value } => write!(
                f,
                "invalid value of {name}: {value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
            ),
            ProfileError::UnknownGate(n) => {
                write!(f, "unrecognized feature gate: {n} (this mock kubelet sets: {})", GATES.join(", "))
            }
            ProfileError::AbsentGate { name, version } => {
                write!(f, "unrecognized feature gate: {name} (kubelet {version} has no such gate)")
            }
            ProfileError::LockedGate(name) => {
                write!(f, "cannot set feature gate {name} to false, feature is locked to true")
            }
            ProfileError::Dependency { name, off } => {
                write!(f, "{name} is enabled, but depends on features that are disabled: [{}]", off.join(" "))
            }
            ProfileError::RuntimeConfigKey(k) => write!(
                f,
                "{k}: this mock kubelet's API server sets resource.k8s.io/v1beta2 and resource.k8s.io/v1beta1 (resource.k8s.io/v1 is always served)"
            ),
            ProfileError::NotRegistered { group_version, version } => write!(
                f,
                "group version {group_version} that has not been registered (Kubernetes {version} has no such version; pick a newer --kubelet-version)"
            ),
        }
    }
}

impl std::error::Error for ProfileError {}

/// The release that added resource.k8s.io/v1beta1 (v1.32.0 instance.go).
const V1BETA1_SINCE: u32 = 32;
/// The release that added resource.k8s.io/v1beta2 (v1.33.0 instance.go).
const V1BETA2_SINCE: u32 = 33;

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quoted<S: AsRef<str>>(l: &[S]) -> String {
    let q: Vec<String> = l.iter().map(|s| serde_json::to_string(s.as_ref()).unwrap_or_default()).collect();
    format!("[{}]", q.join(" "))
}
/// A feature gate's state in one version (pkg/features/kube_features.go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The gate does not exist: `--feature-gates` refuses it.
    Absent,
    /// Alpha, off by default.
    Off,
    /// On (by default, or turned on).
    On,
    /// GA and locked to its default: it cannot be turned off.
    Locked,
}

impl Gate {
    /// Whether the feature is on.
    pub fn enabled(self) -> bool {
        matches!(self, Gate::On | Gate::Locked)
    }
}

/// The feature gates `mock-kubelet --feature-gates` can set (the
/// scheduler's DRA gates among them: the mock kubelet allocates claims as
/// kube-scheduler would).
pub const GATES: &[&str] = &[
    "DRAExtendedResource",
    "PodsAPI",
    "ResourceHealthStatusMessage",
    "DRADeviceBindingConditions",
    "DRAListTypeAttributes",
    "DRADeviceCompatibilityGroups",
    "DRADerivedAttributes",
    "DRANodeAllocatableResources",
    "DRAConsumableCapacity",
    "GenericWorkload",
    "DRAWorkloadResourceClaims",
    "PodGroupPreemptionPolicy",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRAPartitionableDevices",
    "DRAPartitionableDevicesType",
    "DRAResourcePoolStatus",
    "DRAPrioritizedList",
    "DRAAdminAccess",
];

/// A behaviour profile: the kubelet as of one minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The version.
    pub version: KubeletVersion,
    /// Several instances of one plugin.
    pub endpoints: Endpoints,
    /// `initContainers[].restartPolicy: Always` (sidecars) keep dedicated devices
    /// and are listed by PodResources; off: they are plain init containers.
    pub sidecar_devices: bool,
    /// devicesToAllocate's checks and texts.
    pub admission: AdmissionChecks,
    /// Topology hint merging.
    pub hint_merge: HintMerge,
    /// PodResources Get.
    pub pod_resources_get: PodResourcesGet,
    /// The DRAPlugin service and how it is chosen.
    pub dra_services: DraServices,
    /// Several instances of one DRA driver.
    pub dra_instances: DraInstances,
    /// A gone driver's ResourceSlices are wiped after the wiping delay (else at once).
    pub dra_wipe_delay: bool,
    /// A driver whose endpoint stopped accepting connections counts as gone.
    pub dra_connection_monitoring: bool,
    /// The health service opened.
    pub dra_health: DraHealth,
    /// `skipNodeOperations` in allocation results is honoured.
    pub dra_skip_node_operations: bool,
    /// DRAExtendedResource (KEP-5004): extended resources served by DRA drivers.
    pub dra_extended_resource: Gate,
    /// A health stream answered `Unimplemented` is not opened again (else
    /// retried 5 s after it ended, as any other end).
    pub dra_health_unimplemented_stops: bool,
    /// ResourceHealthStatusMessage: the driver's health message reaches
    /// allocatedResourcesStatus.
    pub dra_health_message: Gate,
    /// PodsAPI (KEP-4188): the pods API on `<root>/pods-api/pods-api.sock`.
    pub pods_api: Gate,
    /// DRADeviceBindingConditions (KEP-5007; with DRAResourceClaimDeviceStatus,
    /// on from 1.33): alpha 1.34, beta (on) 1.36. Off: a device with
    /// bindingConditions is never allocated.
    pub dra_binding_conditions: Gate,
    /// DRAListTypeAttributes (KEP-5491): alpha (off) from 1.36.
    pub dra_list_type_attributes: Gate,
    /// DRADeviceCompatibilityGroups (KEP-5963): alpha (off) in 1.37.
    pub dra_compatibility_groups: Gate,
    /// DRADerivedAttributes (KEP-6080): alpha (off) in 1.37.
    pub dra_derived_attributes: Gate,
    /// DRANodeAllocatableResources (KEP-5517): alpha (off) from 1.36.
    pub dra_node_allocatable_resources: Gate,
    /// DRAConsumableCapacity (KEP-5075): alpha (off) 1.34–1.35, beta (on)
    /// from 1.36. Off: a device is never shared (allowMultipleAllocations
    /// not read by the scheduler, dropped by the API server).
    pub dra_consumable_capacity: Gate,
    /// GenericWorkload (KEP-4671): alpha (off) 1.35, beta (still off) 1.37;
    /// DRAWorkloadResourceClaims depends on it.
    pub generic_workload: Gate,
    /// DRAWorkloadResourceClaims (KEP-5729): alpha (off) 1.36, beta (still
    /// off) 1.37. On: a claim reserved for the pod's PodGroup
    /// (`spec.schedulingGroup.podGroupName`) is the pod's to use.
    pub dra_workload_resource_claims: Gate,
    /// PodGroupPreemptionPolicy (KEP-5710's PodGroup part): alpha (off) in
    /// 1.37, needing GenericWorkload. On: the Priority admission plugin fills
    /// a PodGroup's `spec.preemptionPolicy` from its class; off: the API
    /// server drops the field unless the PodGroup replaced has it.
    pub pod_group_preemption_policy: Gate,
    /// DRADeviceTaints (KEP-5055): alpha (off) 1.33, beta (on) 1.36, GA 1.37
    /// (not locked). Off: the API server drops devices' taints and requests'
    /// tolerations.
    pub dra_device_taints: Gate,
    /// DRADeviceTaintRules: alpha (off) 1.35, beta (off) 1.36, GA (on) 1.37;
    /// depends on DRADeviceTaints (DeviceTaintRules are the mock kubelet's
    /// manifests, not served: only the dependency is checked).
    pub dra_device_taint_rules: Gate,
    /// DRAPartitionableDevices (KEP-4815): alpha (off) 1.33, beta (on) 1.36.
    /// Off: the API server drops sharedCounters, perDeviceNodeSelection and
    /// devices' consumesCounters, nodeName, nodeSelector, allNodes.
    pub dra_partitionable_devices: Gate,
    /// DRAPartitionableDevicesType: alpha (off) 1.37, depending on
    /// DRAPartitionableDevices and DRAResourcePoolStatus. Off: the API
    /// server drops a slice's partitionTypeAttribute.
    pub dra_partitionable_devices_type: Gate,
    /// DRAResourcePoolStatus: alpha (off) from 1.36 (its API is not served
    /// here: only DRAPartitionableDevicesType's dependency on it is checked).
    pub dra_resource_pool_status: Gate,
    /// DRAPrioritizedList (KEP-4816): alpha (off) 1.33, beta (on) 1.34, GA
    /// 1.36, locked 1.37. Off: the API server drops requests' firstAvailable.
    pub dra_prioritized_list: Gate,
    /// DRAAdminAccess (KEP-5018): alpha (off) 1.32, beta (on) 1.34, GA and
    /// locked 1.36. Off: the API server drops adminAccess.
    pub dra_admin_access: Gate,
    /// The local API server serves resource.k8s.io/v1beta2 beside v1: off
    /// from 1.34, as kube-apiserver (betaAPIGroupVersionsDisabledByDefault);
    /// before, on from 1.33, the release that added it, as a DRA cluster of
    /// that release enabled it (upstream lists it in
    /// betaAPIGroupVersionsDisabledByDefault there too; pkg/controlplane/instance.go
    /// of v1.33.0), and absent before 1.33 (`--runtime-config` naming it is
    /// refused). `--runtime-config resource.k8s.io/v1beta2=BOOL` sets it.
    pub api_resource_v1beta2: bool,
    /// The same for resource.k8s.io/v1beta1, added in 1.32 (v1.32.0's
    /// instance.go; 1.31 had v1alpha3 alone, not modelled).
    pub api_resource_v1beta1: bool,
}

impl Default for Profile {
    fn default() -> Self {
        Profile::of(KubeletVersion::DEFAULT)
    }
}

/// One behaviour that differs by version: one row of [`TABLE`].
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// The [`Profile`] field.
    pub field: &'static str,
    /// The first minor version with the newer behaviour.
    pub since: u32,
    /// The upstream change (and where to read it).
    pub source: &'static str,
    /// Up to `since - 1`.
    pub before: &'static str,
    /// From `since`.
    pub after: &'static str,
}

/// Every behaviour that differs between supported versions, with the
/// version it changed in and the upstream change. [`Profile::of`] reads it.
pub const TABLE: &[Behaviour] = &[
    Behaviour {
        field: "endpoints",
        since: 37,
        source: "kubernetes#135437 (devicemanager/manager.go endpointStore, plugin/v1beta1/handler.go clients per resource and socket), read with the manager_test.go and handler_test.go of #139338; manager.go itself read only through those tests; bug: #121994, #127803",
        before: "keyed by resource: a 2nd instance replaces the 1st without closing its stream; the 1st stream's end disconnects the 2nd and zeroes allocatable",
        after: "keyed by (resource, socket): instances on other sockets coexist and the last snapshot of any of them is the node's devices (TestDevicePluginReRegistration: 1); an instance's end leaves the others and the devices as they are (the last one's end zeroes allocatable); a live instance's socket registering again is refused: \"device plugin already connected: <socket>\"",
    },
    Behaviour {
        field: "sidecar_devices",
        since: 29,
        source: "KEP-753 SidecarContainers: beta, on by default in 1.29 (pkg/features/kube_features.go); devicemanager Allocate keeps restartable init containers' devices",
        before: "restartPolicy: Always init containers are plain init containers (devices reused by later containers)",
        after: "sidecars get dedicated devices, listed by PodResources List/Get",
    },
    Behaviour {
        field: "admission",
        since: 27,
        source: "kubernetes#114640 (devicemanager/manager.go devicesToAllocate)",
        before: "\"can't allocate unregistered device R\"; no healthy devices: \"requested number of devices unavailable for R. Requested: N, Available: 0\"",
        after: "\"cannot allocate unregistered device R\", \"no healthy devices present; cannot allocate unhealthy devices R\", \"previously allocated devices are no longer healthy; …\"",
    },
    Behaviour {
        field: "hint_merge",
        since: 24,
        source: "kubernetes#108154 (topologymanager/policy.go compareHints); same in every supported version",
        before: "narrowest non-preferred hint",
        after: "non-preferred hint nearest the best non-preferred affinity count",
    },
    Behaviour {
        field: "pod_resources_get",
        since: 34,
        source: "KubeletPodResourcesGet: alpha 1.27, beta (on) 1.34 (pkg/features/kube_features.go; apis/podresources/server_v1.go)",
        before: "1.25-1.26: no Get method (Unimplemented); 1.27-1.33: \"PodResources API Get method disabled\"",
        after: "Get served",
    },
    Behaviour {
        field: "dra_plugin",
        since: 31,
        source: "KEP-4381 structured parameters: kubernetes#125163 (kubelet independent of the resource.k8s.io version, gRPC v1alpha4, ResourceSlices wiped at start); pluginmanager operation_generator.go for the refusal. The DynamicResourceAllocation gate was off by default until 1.34 (GA); dpctl models 1.31-1.33 with it on",
        before: "no DRAPlugin handler: NotifyRegistrationStatus(false, \"RegisterPlugin error -- no handler registered for plugin type: DRAPlugin at socket <socket>\") (the classic-DRA v1alpha3 API is not modelled)",
        after: "DRAPlugin registrations handled; the node's ResourceSlices deleted when the kubelet starts; gRPC v1alpha4 (service v1alpha3.Node, advertised later as v1alpha3.NodeService), called whatever the plugin lists",
    },
    Behaviour {
        field: "dra_v1beta1",
        since: 32,
        source: "kubernetes#127511, #128646 (plugin/registration.go validateSupportedServices)",
        before: "v1alpha4 only",
        after: "the kubelet's order: v1beta1.DRAPlugin, then v1alpha3.NodeService; a non-empty list naming neither falls back to v1alpha4 (\"plugins at that time didn't advertise gRPC services\"); an empty list is refused",
    },
    Behaviour {
        field: "dra_v1",
        since: 34,
        source: "kubernetes#132700 (v1 added, v1beta1 deprecated), #132574 (v1alpha4 and the fallback removed); dra_plugin_manager.go validateSupportedServices",
        before: "v1beta1, else v1alpha4",
        after: "the first service in the plugin's list that the kubelet speaks (v1.DRAPlugin, v1beta1.DRAPlugin); none: \"none of services supported by the plugin (…) are supported by the kubelet (…)\"",
    },
    Behaviour {
        field: "dra_instances",
        since: 33,
        source: "kubernetes#129832 (seamless driver upgrades; plugins_store.go keyed by name before)",
        before: "one plugin per driver: a 2nd registration replaces the 1st, and either one's deregistration removes the driver",
        after: "instances coexist (rolling update with maxSurge); calls go to the newest connected one; an endpoint registered twice is refused",
    },
    Behaviour {
        field: "dra_wipe_delay",
        since: 33,
        source: "kubernetes#129832 (defaultWipingDelay 30s in manager.go)",
        before: "a driver's ResourceSlices on the node are deleted as soon as it deregisters",
        after: "deleted 30s after its last instance went away, unless an instance registers again",
    },
    Behaviour {
        field: "dra_connection_monitoring",
        since: 34,
        source: "kubernetes#132058 (DRA kubelet: connection monitoring; dra_plugin_manager.go monitoredPlugin)",
        before: "only deregistration counts: a killed driver whose registration socket stays keeps its ResourceSlices",
        after: "an instance whose endpoint stops accepting connections counts as gone (its slices wiped after the delay)",
    },
    Behaviour {
        field: "dra_health",
        since: 36,
        source: "KEP-4680 ResourceHealthStatus: DRA part alpha in 1.34 (kubernetes#130606), beta and on by default in 1.36 (kubernetes/website#54420)",
        before: "no health stream opened (gate off by default): allocatedResourcesStatus not filled",
        after: "v1alpha1.DRAResourceHealth stream opened when advertised",
    },
    Behaviour {
        field: "dra_health_v1",
        since: 37,
        source: "kubernetes#139477 (v1 DRAResourceHealth; v1alpha1 deprecated, removal planned for 1.40: #140838)",
        before: "v1alpha1 only",
        after: "v1.DRAResourceHealth preferred, v1alpha1 when only it is advertised",
    },
    Behaviour {
        field: "dra_skip_node_operations",
        since: 37,
        source: "KEP-5945, kubernetes#139933 (alpha; dpctl models its gate on)",
        before: "no such field: every driver of a claim is called",
        after: "a driver all of whose allocated devices skip NodePrepareResources/NodeUnprepareResources is not called for it",
    },
    Behaviour {
        field: "dra_extended_resource",
        since: 36,
        source: "DRAExtendedResource (KEP-5004): alpha 1.34, beta (on) 1.36, GA and locked 1.37 (pkg/features/kube_features.go); scheduler extendeddynamicresources.go, kubelet cm/dra/manager.go",
        before: "1.25-1.33: no such gate; 1.34-1.35: off by default (--feature-gates DRAExtendedResource=true): an extended resource only a DeviceClass maps is refused OutOf<resource>",
        after: "a resource a DeviceClass maps (extendedResourceName or deviceclass.resource.kubernetes.io/<class>) with device-plugin allocatable 0 is served by a special claim <pod>-extended-resources-*; the gate cannot be turned off from 1.37",
    },
    Behaviour {
        field: "dra_health_unimplemented",
        since: 37,
        source: "kubernetes#139477: cm/dra/plugin/dra_plugin_manager.go (1.37) stops the wait.UntilWithContext loop when HandleWatchResourcesStream returns codes.Unimplemented; 1.36's loop has no such case (retry period 5*time.Second in both)",
        before: "a health stream that ends, Unimplemented included, is opened again 5 s later, for as long as the driver is registered",
        after: "a driver that answers NodeWatchResources with Unimplemented is not watched again (its devices' health stays Unknown) until it registers again; other ends are retried 5 s later",
    },
    Behaviour {
        field: "dra_health_message",
        since: 36,
        source: "ResourceHealthStatusMessage: beta (on) from 1.36, no alpha (pkg/features/kube_features.go); cm/dra/manager.go UpdateAllocatedResourcesStatus enableHealthMessage, truncateHealthMessage (1,024 bytes, the same in 1.36 and 1.37)",
        before: "no such gate (and no health stream by default)",
        after: "the driver's DeviceHealth.message, cut to 1,024 bytes (the first 1,021 and \"...\"), is each device's allocatedResourcesStatus[].resources[].message; --feature-gates ResourceHealthStatusMessage=false leaves it out",
    },
    Behaviour {
        field: "dra_binding_conditions",
        since: 36,
        source: "DRADeviceBindingConditions (KEP-5007): alpha 1.34, beta (on) 1.36, with DRAResourceClaimDeviceStatus (pkg/features/kube_features.go); structured/internal/*/allocator_*.go isSelectable, Allocate (bindingConditions copied into the result), pools_*.go GatherPools (pools with binding conditions last)",
        before: "1.25-1.33: no such field; 1.34-1.35: off by default (--feature-gates DRADeviceBindingConditions=true): a device with bindingConditions is never allocated",
        after: "a device with bindingConditions is allocated (its pool tried after the others) and the result carries bindingConditions and bindingFailureConditions",
    },
    Behaviour {
        field: "dra_consumable_capacity",
        since: 36,
        source: "DRAConsumableCapacity (KEP-5075): alpha 1.34, beta (on) 1.36 (pkg/features/kube_features.go); structured allocator.go (stable without it), internal/incubating allocateDevice, validateDeviceRequest; scheduler dynamicresources dra_manager.go GatherAllocatedState; registry resourceslice/strategy.go, resourceclaim/strategy.go, api/resourceclaimspec/util.go dropDisabledDRA*ConsumableCapacity*Fields",
        before: "1.25-1.33: no such gate; 1.34-1.35: off by default (--feature-gates DRAConsumableCapacity=true): a device goes to one claim whole (allowMultipleAllocations dropped by the API server and not read by the scheduler; a share allocated before counts as the whole device), no shareID or consumedCapacity; capacity requests and distinctAttribute dropped from new claims",
        after: "a device with allowMultipleAllocations is shared by claims while their consumedCapacity fits its capacity, each result a shareID (a UUID) the driver returns in Device.share_id; --feature-gates DRAConsumableCapacity=false turns it off",
    },
    Behaviour {
        field: "pods_api",
        since: 37,
        source: "KEP-4188 PodsAPI: alpha (off) 1.36, beta (on) 1.37 (pkg/features/kube_features.go); kubelet.go ListenAndServePods on <root-dir>/pods-api/pods-api.sock (kubeletconfig DefaultKubeletPodsAPIDirName, apis/pods/constants.go Socket), apis/pods/server.go; 100 QPS, burst 10 on ListPods and GetPod",
        before: "1.25-1.35: no pods API (no socket); 1.36: off by default (--feature-gates PodsAPI=true serves it)",
        after: "pods/v1alpha1 ListPods, GetPod, WatchPods served on <root>/pods-api/pods-api.sock, each pod a core/v1 Pod in Kubernetes protobuf",
    },
];

impl Profile {
    /// The profile of `v`.
    pub fn of(v: KubeletVersion) -> Self {
        let at = |field: &str| TABLE.iter().find(|b| b.field == field).is_some_and(|b| v.0 >= b.since);
        Profile {
            version: v,
            endpoints: if at("endpoints") { Endpoints::BySocket } else { Endpoints::ByResource },
            sidecar_devices: at("sidecar_devices"),
            admission: if at("admission") { AdmissionChecks::Health } else { AdmissionChecks::Legacy },
            hint_merge: if at("hint_merge") { HintMerge::BestNonPreferredCount } else { HintMerge::Narrowest },
            pod_resources_get: match (at("pod_resources_get"), v.0 >= 27) {
                (true, _) => PodResourcesGet::Enabled,
                (false, true) => PodResourcesGet::Disabled,
                (false, false) => PodResourcesGet::Absent,
            },
            dra_services: match (at("dra_plugin"), at("dra_v1beta1"), at("dra_v1")) {
                (_, _, true) => DraServices::PluginOrder,
                (_, true, _) => DraServices::V1beta1ThenAlpha,
                (true, _, _) => DraServices::V1alpha4,
                _ => DraServices::Absent,
            },
            dra_instances: if at("dra_instances") { DraInstances::Coexist } else { DraInstances::Replace },
            dra_wipe_delay: at("dra_wipe_delay"),
            dra_connection_monitoring: at("dra_connection_monitoring"),
            dra_health: match (at("dra_health"), at("dra_health_v1")) {
                (_, true) => DraHealth::V1,
                (true, _) => DraHealth::V1alpha1,
                _ => DraHealth::Off,
            },
            dra_skip_node_operations: at("dra_skip_node_operations"),
            dra_extended_resource: match (at("dra_extended_resource"), v.0) {
                (true, 37..) => Gate::Locked,
                (true, _) => Gate::On,
                (false, 34..) => Gate::Off,
                (false, _) => Gate::Absent,
            },
            dra_health_unimplemented_stops: at("dra_health_unimplemented"),
            dra_health_message: if at("dra_health_message") { Gate::On } else { Gate::Absent },
            pods_api: match (at("pods_api"), v.0) {
                (true, _) => Gate::On,
                (false, 36) => Gate::Off,
                (false, _) => Gate::Absent,
            },
            dra_binding_conditions: match (at("dra_binding_conditions"), v.0) {
                (true, _) => Gate::On,
                (false, 34..) => Gate::Off,
                (false, _) => Gate::Absent,
            },
            dra_list_type_attributes: if v.0 >= 36 { Gate::Off } else { Gate::Absent },
            dra_compatibility_groups: if v.0 >= 37 { Gate::Off } else { Gate::Absent },
            dra_derived_attributes: if v.0 >= 37 { Gate::Off } else { Gate::Absent },
            dra_node_allocatable_resources: if v.0 >= 36 { Gate::Off } else { Gate::Absent },
            dra_consumable_capacity: match (at("dra_consumable_capacity"), v.0) {
                (true, _) => Gate::On,
                (false, 34..) => Gate::Off,
                (false, _) => Gate::Absent,
            },
            generic_workload: if v.0 >= 35 { Gate::Off } else { Gate::Absent },
            dra_workload_resource_claims: if v.0 >= 36 { Gate::Off } else { Gate::Absent },
            pod_group_preemption_policy: if v.0 >= 37 { Gate::Off } else { Gate::Absent },
            dra_device_taints: match v.0 {
                36.. => Gate::On,
                33.. => Gate::Off,
                _ => Gate::Absent,
            },
            dra_device_taint_rules: match v.0 {
                37.. => Gate::On,
                35.. => Gate::Off,
                _ => Gate::Absent,
            },
            dra_partitionable_devices: match v.0 {
                36.. => Gate::On,
                33.. => Gate::Off,
                _ => Gate::Absent,
            },
            dra_partitionable_devices_type: if v.0 >= 37 { Gate::Off } else { Gate::Absent },
            dra_resource_pool_status: if v.0 >= 36 { Gate::Off } else { Gate::Absent },
            dra_prioritized_list: match v.0 {
                37.. => Gate::Locked,
                34.. => Gate::On,
                33 => Gate::Off,
                _ => Gate::Absent,
            },
            dra_admin_access: match v.0 {
                36.. => Gate::Locked,
                34.. => Gate::On,
                32.. => Gate::Off,
                _ => Gate::Absent,
            },
            // Before 1.34 a DRA cluster enabled the betas its release had
            // (off by default upstream; see the field's doc).
            api_resource_v1beta2: (V1BETA2_SINCE..34).contains(&v.0),
            api_resource_v1beta1: (V1BETA1_SINCE..34).contains(&v.0),
        }
    }

    /// The allocator's features as this version's gates set them (the
    /// scheduler's AllocatorFeatures; kube_features.go v1.37.2).
    pub fn allocator_features(&self) -> crate::controlplane::allocator::Features {
        crate::controlplane::allocator::Features {
            binding_conditions: self.dra_binding_conditions.enabled(),
            list_type_attributes: self.dra_list_type_attributes.enabled(),
            compatibility_groups: self.dra_compatibility_groups.enabled(),
            derived_attributes: self.dra_derived_attributes.enabled(),
            consumable_capacity: self.dra_consumable_capacity.enabled(),
        }
    }

    /// The local API server's gates (its resource.k8s.io strategies'), as
    /// this version's gates set them. DRAOptionalNodeOperations (alpha, off
    /// in 1.37) is on where the profile honours skipNodeOperations: dpctl
    /// models its gate on (docs/fidelity.md).
    pub fn api_gates(&self) -> crate::controlplane::apiserver::gated::ApiGates {
        crate::controlplane::apiserver::gated::ApiGates {
            device_taints: self.dra_device_taints.enabled(),
            device_taint_rules: self.dra_device_taint_rules.enabled(),
            partitionable_devices: self.dra_partitionable_devices.enabled(),
            partitionable_devices_type: self.dra_partitionable_devices_type.enabled(),
            binding_conditions: self.dra_binding_conditions.enabled(),
            consumable_capacity: self.dra_consumable_capacity.enabled(),
            compatibility_groups: self.dra_compatibility_groups.enabled(),
            node_allocatable_resources: self.dra_node_allocatable_resources.enabled(),
            list_type_attributes: self.dra_list_type_attributes.enabled(),
            optional_node_operations: self.dra_skip_node_operations,
            prioritized_list: self.dra_prioritized_list.enabled(),
            admin_access: self.dra_admin_access.enabled(),
            derived_attributes: self.dra_derived_attributes.enabled(),
            extended_resource: self.dra_extended_resource.enabled(),
        }
    }

    /// Apply `--feature-gates NAME=BOOL,…` (the kubelet's refusals: an
    /// unknown gate, and a locked gate set against its value).
    pub fn with_gates(mut self, spec: &str) -> Result<Self, ProfileError> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| ProfileError::GateForm(part.to_string()))?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                v => return Err(ProfileError::NotBool { name: name.to_string(), value: v.to_string() }),
            };
            let gate = match name.trim() {
                "DRAExtendedResource" => &mut self.dra_extended_resource,
                "PodsAPI" => &mut self.pods_api,
                "ResourceHealthStatusMessage" => &mut self.dra_health_message,
                "DRADeviceBindingConditions" => &mut self.dra_binding_conditions,
                "DRAListTypeAttributes" => &mut self.dra_list_type_attributes,
                "DRADeviceCompatibilityGroups" => &mut self.dra_compatibility_groups,
                "DRADerivedAttributes" => &mut self.dra_derived_attributes,
                "DRANodeAllocatableResources" => &mut self.dra_node_allocatable_resources,
                "DRAConsumableCapacity" => &mut self.dra_consumable_capacity,
                "GenericWorkload" => &mut self.generic_workload,
                "DRAWorkloadResourceClaims" => &mut self.dra_workload_resource_claims,
                "PodGroupPreemptionPolicy" => &mut self.pod_group_preemption_policy,
                "DRADeviceTaints" => &mut self.dra_device_taints,
                "DRADeviceTaintRules" => &mut self.dra_device_taint_rules,
                "DRAPartitionableDevices" => &mut self.dra_partitionable_devices,
                "DRAPartitionableDevicesType" => &mut self.dra_partitionable_devices_type,
                "DRAResourcePoolStatus" => &mut self.dra_resource_pool_status,
                "DRAPrioritizedList" => &mut self.dra_prioritized_list,
                "DRAAdminAccess" => &mut self.dra_admin_access,
                n => return Err(ProfileError::UnknownGate(n.to_string())),
            };
            *gate = match (*gate, on) {
                (Gate::Absent, _) => {
                    return Err(ProfileError::AbsentGate { name: name.to_string(), version: self.version })
                }
                (Gate::Locked, false) => return Err(ProfileError::LockedGate(name.to_string())),
                (Gate::Locked, true) => Gate::Locked,
                (_, true) => Gate::On,
                (_, false) => Gate::Off,
            };
        }
        // featuregate's dependency check (kube_features.go defaultKubernetesFeatureGateDependencies;
        // DynamicResourceAllocation, NodeDeclaredFeatures and DRAResourceClaimDeviceStatus,
        // the other dependencies, are on wherever these gates exist), in the order of that map.
        type Needs<'a> = &'a [(&'a str, Gate)];
        let deps: [(&str, Gate, Needs); 5] = [
            (
                "DRADeviceCompatibilityGroups",
                self.dra_compatibility_groups,
                &[("DRAPartitionableDevices", self.dra_partitionable_devices)],
            ),
            ("DRADeviceTaintRules", self.dra_device_taint_rules, &[("DRADeviceTaints", self.dra_device_taints)]),
            (
                "DRAPartitionableDevicesType",
                self.dra_partitionable_devices_type,
                &[
                    ("DRAPartitionableDevices", self.dra_partitionable_devices),
                    ("DRAResourcePoolStatus", self.dra_resource_pool_status),
                ],
            ),
            (
                "DRAWorkloadResourceClaims",
                self.dra_workload_resource_claims,
                &[("GenericWorkload", self.generic_workload)],
            ),
            (
                "PodGroupPreemptionPolicy",
                self.pod_group_preemption_policy,
                &[("GenericWorkload", self.generic_workload)],
            ),
        ];
        for (name, gate, needs) in deps {
            let off: Vec<&str> = needs.iter().filter(|(_, g)| !g.enabled()).map(|(n, _)| *n).collect();
            if gate.enabled() && !off.is_empty() {
                return Err(ProfileError::Dependency { name, off: off.iter().map(|n| n.to_string()).collect() });
            }
        }
        Ok(self)
    }

    /// Apply `--runtime-config GROUP/VERSION=BOOL,…` as kube-apiserver reads
    /// it (a key alone is true; `api/beta` and `api/all` name every beta),
    /// for the group versions the local API server can serve off its
    /// default: resource.k8s.io/v1beta2 and v1beta1 (v1 is always served).
    pub fn with_runtime_config(mut self, spec: &str) -> Result<Self, ProfileError> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').unwrap_or((part, "true"));
            let on = match value.trim() {
                "" | "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                v => return Err(ProfileError::NotBool { name: key.to_string(), value: v.to_string() }),
            };
            let had = |group_version: &'static str, since: u32| match self.version.0 >= since {
                true => Ok(on),
                false => Err(ProfileError::NotRegistered { group_version, version: self.version }),
            };
            match key.trim() {
                "resource.k8s.io/v1beta2" => self.api_resource_v1beta2 = had("resource.k8s.io/v1beta2", V1BETA2_SINCE)?,
                "resource.k8s.io/v1beta1" => self.api_resource_v1beta1 = had("resource.k8s.io/v1beta1", V1BETA1_SINCE)?,
                // Every beta the release has.
                "api/beta" | "api/all" => {
                    self.api_resource_v1beta2 = on && self.version.0 >= V1BETA2_SINCE;
                    self.api_resource_v1beta1 = on && self.version.0 >= V1BETA1_SINCE;
                }
                "resource.k8s.io/v1" if on => {}
                k => return Err(ProfileError::RuntimeConfigKey(k.to_string())),
            }
        }
        Ok(self)
    }

    /// What `--explain-profile` prints: each behaviour as this version has it.
    pub fn explain(&self) -> String {
        let mut out = format!("kubelet {} profile (supported: 1.{OLDEST} to 1.{NEWEST})\n", self.version);
        for b in TABLE {
            let newer = self.version.0 >= b.since;
            let what = if newer { b.after } else { b.before };
            let when = if newer { format!("since 1.{}", b.since) } else { format!("before 1.{}", b.since) };
            out.push_str(&format!("  {:<18} {when}: {what}\n  {:<18} source: {}\n", b.field, "", b.source));
        }
        out
    }
}

/// The table as markdown, as the README carries it.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| behaviour | changed in | up to then | from then | upstream |\n|---|---|---|---|---|\n");
    for b in TABLE {
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | 1.{} | {} | {} | {} |\n",
            b.field,
            b.since,
            cell(b.before),
            cell(b.after),
            cell(b.source)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions_and_names_the_range() {
        for (s, m) in [("1.31", 31), ("v1.37", 37), ("1.25.3", 25), (" 1.29 ", 29)] {
            assert_eq!(KubeletVersion::parse(s).map(KubeletVersion::minor), Ok(m), "{s}");
        }
        for s in ["1.24", "1.38", "2.31", "131", "1.x", "", "1.31.4.1", "1.31.", "v", "1.99999999999", "1.-1"] {
            let e = KubeletVersion::parse(s).unwrap_err().to_string();
            assert!(e.contains("supported: 1.25 to 1.37"), "{s}: {e}");
        }
        assert_eq!(
            KubeletVersion::parse_list("1.31, 1.37,1.31").unwrap(),
            vec![KubeletVersion(31), KubeletVersion(37)]
        );
        assert!(KubeletVersion::parse_list(" , ").unwrap_err().to_string().contains("no kubelet version"));
        assert_eq!(Profile::default().version.to_string(), "1.37");
    }

    #[test]
    fn each_boundary_has_two_sides() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!((p(36).endpoints, p(37).endpoints), (Endpoints::ByResource, Endpoints::BySocket));
        assert_eq!((p(28).sidecar_devices, p(29).sidecar_devices), (false, true));
        assert_eq!((p(26).admission, p(27).admission), (AdmissionChecks::Legacy, AdmissionChecks::Health));
        assert_eq!(
            (p(26).pod_resources_get, p(27).pod_resources_get, p(33).pod_resources_get, p(34).pod_resources_get),
            (PodResourcesGet::Absent, PodResourcesGet::Disabled, PodResourcesGet::Disabled, PodResourcesGet::Enabled)
        );
        assert!(KubeletVersion::all().all(|v| p(v.0).hint_merge == HintMerge::BestNonPreferredCount));
        assert_eq!(
            [33, 34, 35, 36, 37].map(|m| p(m).dra_extended_resource),
            [Gate::Absent, Gate::Off, Gate::Off, Gate::On, Gate::Locked]
        );
        assert!(TABLE.iter().all(|b| b.since > 0 && !b.source.is_empty()));
        let dra = |m| {
            let p = p(m);
            (p.dra_services, p.dra_instances, p.dra_wipe_delay, p.dra_connection_monitoring, p.dra_health)
        };
        use DraHealth as H;
        use DraInstances::{Coexist, Replace};
        use DraServices as S;
        assert_eq!(dra(30), (S::Absent, Replace, false, false, H::Off));
        assert_eq!(dra(31), (S::V1alpha4, Replace, false, false, H::Off));
        assert_eq!(dra(32), (S::V1beta1ThenAlpha, Replace, false, false, H::Off));
        assert_eq!(dra(33), (S::V1beta1ThenAlpha, Coexist, true, false, H::Off));
        assert_eq!(dra(34), (S::PluginOrder, Coexist, true, true, H::Off));
        assert_eq!(dra(35), (S::PluginOrder, Coexist, true, true, H::Off));
        assert_eq!(dra(36), (S::PluginOrder, Coexist, true, true, H::V1alpha1));
        assert_eq!(dra(37), (S::PluginOrder, Coexist, true, true, H::V1));
        assert_eq!((p(36).dra_skip_node_operations, p(37).dra_skip_node_operations), (false, true));
        let e = p(32).explain();
        assert!(e.contains("before 1.34: v1beta1, else v1alpha4") && e.contains("kubernetes#132700"), "{e}");
        let e = p(31).explain();
        assert!(e.contains("kubelet 1.31 profile") && e.contains("before 1.37: keyed by resource"), "{e}");
        let e = p(37).explain();
        assert!(e.contains("since 1.37: keyed by (resource, socket)") && e.contains("already connected"), "{e}");
    }

    /// registration_test.go / dra_plugin_manager_test.go (TestRegistrationHandler's
    /// supported-services cases) at each side of the 1.31, 1.32 and 1.34 boundaries.
    #[test]
    fn the_dra_service_a_kubelet_chooses_changes_at_1_31_1_32_and_1_34() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let choose = |m, v: &[&str]| Profile::of(KubeletVersion(m)).dra_services.choose(&l(v));
        let (v1, v1b, a4) = (dra::DRA_V1, dra::DRA_V1BETA1, dra::DRA_V1ALPHA4);
        assert!(choose(30, &[v1])
            .unwrap_err()
            .to_string()
            .contains("no handler registered for plugin type: DRAPlugin"));
        assert_eq!(choose(31, &[v1, v1b]), Ok(a4), "1.31 calls v1alpha4 whatever is listed");
        assert_eq!(choose(31, &[]), Ok(a4));
        assert_eq!(choose(32, &[v1, v1b]), Ok(v1b), "the kubelet's order, not the plugin's");
        assert_eq!(choose(33, &[v1]), Ok(a4), "falls back to v1alpha4");
        assert_eq!(choose(32, &["1.0.0"]), Ok(a4));
        assert!(choose(32, &[]).unwrap_err().to_string().contains("empty list of supported gRPC services"));
        assert_eq!(choose(34, &[v1, v1b]), Ok(v1));
        assert_eq!(choose(34, &[v1b, v1]), Ok(v1b), "the plugin's order");
        assert_eq!(choose(37, &[a4]).unwrap_err().to_string(), "none of services supported by the plugin ([\"v1alpha3.NodeService\"]) are supported by the kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])");
        assert!(choose(34, &[]).unwrap_err().to_string().contains("empty list"));
        let newest = |m| Profile::of(KubeletVersion(m)).dra_services.newest();
        assert_eq!((newest(30), newest(31), newest(33), newest(34)), (None, Some(a4), Some(v1b), Some(v1)));
        let health = |m, v: &[&str]| Profile::of(KubeletVersion(m)).dra_health.choose(&l(v));
        let (h1, ha) = (dra::HEALTH_V1, dra::HEALTH_V1ALPHA1);
        assert_eq!(health(35, &[h1, ha]), None, "off by default before 1.36");
        assert_eq!(health(36, &[h1, ha]), Some(ha), "1.36 speaks v1alpha1 only");
        assert_eq!(health(36, &[h1]), None);
        assert_eq!(health(37, &[ha, h1]), Some(h1));
        assert_eq!(health(37, &[ha]), Some(ha));
    }

    /// PodsAPI: alpha (off) 1.36, beta (on) 1.37; ResourceHealthStatusMessage:
    /// beta (on) from 1.36; the Unimplemented stop from 1.37.
    #[test]
    fn the_pods_api_and_health_gates_follow_upstream_defaults() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!([35, 36, 37].map(|m| p(m).pods_api), [Gate::Absent, Gate::Off, Gate::On]);
        assert_eq!([35, 36, 37].map(|m| p(m).dra_health_message), [Gate::Absent, Gate::On, Gate::On]);
        assert_eq!([36, 37].map(|m| p(m).dra_health_unimplemented_stops), [false, true]);
        let gate = |m, s: &str| p(m).with_gates(s).map(|p| (p.pods_api.enabled(), p.dra_health_message.enabled()));
        assert_eq!(gate(36, "PodsAPI=true"), Ok((true, true)));
        assert_eq!(gate(37, "PodsAPI=false,ResourceHealthStatusMessage=false"), Ok((false, false)));
        assert!(gate(35, "PodsAPI=true").unwrap_err().to_string().contains("kubelet 1.35 has no such gate"));
    }

    #[test]
    fn the_dra_extended_resource_gate_turns_on_from_1_34_and_is_locked_from_1_37() {
        let p = |m| Profile::of(KubeletVersion(m));
        let on = |m, s: &str| p(m).with_gates(s).map(|p| p.dra_extended_resource.enabled());
        assert_eq!(on(34, "DRAExtendedResource=true"), Ok(true));
        assert_eq!(on(35, "DRAExtendedResource=false"), Ok(false));
        assert_eq!(on(36, "DRAExtendedResource=false"), Ok(false));
        assert_eq!(on(37, "DRAExtendedResource=true"), Ok(true));
        assert!(on(37, "DRAExtendedResource=false").unwrap_err().to_string().contains("locked to true"));
        assert!(on(33, "DRAExtendedResource=true").unwrap_err().to_string().contains("kubelet 1.33 has no such gate"));
        assert!(on(36, "Nope=true").unwrap_err().to_string().contains("unrecognized feature gate: Nope"));
        assert!(on(36, "DRAExtendedResource=yes").unwrap_err().to_string().contains("invalid value"));
    }

    /// The control plane's gates (`mock-kubelet --api-server`) are the
    /// profile's: at a version's defaults they are the controllers' defaults
    /// for it, and `--feature-gates` moves them (#48).
    #[test]
    fn the_control_planes_gates_are_the_profiles() {
        use crate::controlplane::controller::Gates;
        let gates = |p: &Profile| Gates {
            features: p.allocator_features(),
            extended: p.dra_extended_resource.enabled(),
            workload_claims: p.dra_workload_resource_claims.enabled(),
            node_allocatable: crate::controlplane::nodealloc::Accounting::of(
                p.version.minor(),
                p.dra_node_allocatable_resources.enabled(),
            ),
        };
        for m in [34, 35, 36, 37] {
            assert_eq!(gates(&Profile::of(KubeletVersion(m))), Gates::of_minor(m), "1.{m}");
        }
        let on = Profile::of(KubeletVersion(37)).with_gates("DRAListTypeAttributes=true").unwrap();
        assert!(gates(&on).features.list_type_attributes && !Gates::of_minor(37).features.list_type_attributes);
    }

    /// The API server's gates (#48) are the profile's: at a version's
    /// defaults kube-apiserver's (ApiGates::of_minor), but for
    /// DRAOptionalNodeOperations, modelled on where skipNodeOperations is
    /// honoured; `--feature-gates` moves them, with featuregate's
    /// dependency checks.
    #[test]
    fn the_api_servers_gates_are_the_profiles() {
        use crate::controlplane::apiserver::gated::ApiGates;
        for m in [34, 35, 36, 37] {
            let p = Profile::of(KubeletVersion(m));
            let want = ApiGates { optional_node_operations: p.dra_skip_node_operations, ..ApiGates::of_minor(m) };
            assert_eq!(p.api_gates(), want, "1.{m}");
        }
        let p = |m| Profile::of(KubeletVersion(m));
        let gates = |m, s: &str| p(m).with_gates(s).map(|p| p.api_gates());
        let off = gates(37, "DRADeviceTaints=false,DRADeviceTaintRules=false,DRAPartitionableDevices=false").unwrap();
        assert!(!off.device_taints && !off.partitionable_devices && off.prioritized_list);
        assert_eq!(
            gates(37, "DRADeviceTaints=false").unwrap_err().to_string(),
            "DRADeviceTaintRules is enabled, but depends on features that are disabled: [DRADeviceTaints]"
        );
        assert_eq!(
            gates(37, "DRADeviceCompatibilityGroups=true,DRAPartitionableDevices=false").unwrap_err().to_string(),
            "DRADeviceCompatibilityGroups is enabled, but depends on features that are disabled: [DRAPartitionableDevices]"
        );
        assert_eq!(
            gates(37, "DRAPartitionableDevicesType=true,DRAPartitionableDevices=false").unwrap_err().to_string(),
            "DRAPartitionableDevicesType is enabled, but depends on features that are disabled: [DRAPartitionableDevices DRAResourcePoolStatus]"
        );
        assert!(
            gates(37, "DRAPartitionableDevicesType=true,DRAResourcePoolStatus=true")
                .unwrap()
                .partitionable_devices_type
        );
        assert!(gates(37, "DRAPrioritizedList=false").unwrap_err().to_string().contains("locked to true"));
        assert!(!gates(35, "DRAPrioritizedList=false,DRAAdminAccess=false")
            .map(|g| g.prioritized_list || g.admin_access)
            .unwrap());
        assert!(gates(36, "DRAAdminAccess=false").unwrap_err().to_string().contains("locked to true"));
        assert!(gates(32, "DRADeviceTaints=true").unwrap_err().to_string().contains("kubelet 1.32 has no such gate"));
    }

    /// pkg/controlplane/instance.go of v1.34.4–v1.37.2: resource.k8s.io
    /// v1beta1 and v1beta2 are in betaAPIGroupVersionsDisabledByDefault;
    /// v1.33.0 registers both, v1.32.0 v1beta1 alone, v1.31.0 neither
    /// (v1alpha3).
    #[test]
    fn the_resource_betas_are_served_before_1_34_and_with_runtime_config() {
        let p = |m| Profile::of(KubeletVersion(m));
        let betas = |p: Profile| (p.api_resource_v1beta2, p.api_resource_v1beta1);
        assert_eq!(
            [31, 32, 33, 34, 37].map(|m| betas(p(m))),
            [(false, false), (false, true), (true, true), (false, false), (false, false)]
        );
        assert_eq!(
            p(32).with_runtime_config("resource.k8s.io/v1beta2=true").unwrap_err().to_string(),
            "group version resource.k8s.io/v1beta2 that has not been registered (Kubernetes 1.32 has no such version; pick a newer --kubelet-version)"
        );
        assert!(matches!(
            p(31).with_runtime_config("resource.k8s.io/v1beta1"),
            Err(ProfileError::NotRegistered { group_version: "resource.k8s.io/v1beta1", .. })
        ));
        assert_eq!(p(32).with_runtime_config("api/beta=true").map(betas), Ok((false, true)));
        assert_eq!(p(31).with_runtime_config("api/all").map(betas), Ok((false, false)));
        let rc = |s: &str| p(37).with_runtime_config(s).map(betas);
        assert_eq!(rc("resource.k8s.io/v1beta1=true"), Ok((false, true)));
        assert_eq!(rc("resource.k8s.io/v1beta2,resource.k8s.io/v1=true"), Ok((true, false)));
        assert_eq!(rc("api/beta=true"), Ok((true, true)));
        assert_eq!(p(33).with_runtime_config("resource.k8s.io/v1beta2=false").map(betas), Ok((false, true)));
        assert!(rc("resource.k8s.io/v1beta1=yes")
            .unwrap_err()
            .to_string()
            .contains("invalid value of resource.k8s.io/v1beta1"));
        assert!(rc("resource.k8s.io/v1=false").unwrap_err().to_string().contains("always served"));
        assert!(rc("apps/v1beta1=true").unwrap_err().to_string().starts_with("apps/v1beta1: "));
    }

    /// kube_features.go v1.37.2: DRAWorkloadResourceClaims alpha 1.36, beta
    /// 1.37, off in both, depending on GenericWorkload (alpha 1.35, beta 1.37, off).
    #[test]
    fn the_workload_resource_claims_gate_is_off_on_1_36_and_1_37_and_needs_generic_workload() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!([35, 36, 37].map(|m| p(m).dra_workload_resource_claims), [Gate::Absent, Gate::Off, Gate::Off]);
        assert_eq!([34, 35, 37].map(|m| p(m).generic_workload), [Gate::Absent, Gate::Off, Gate::Off]);
        let on = |m, s: &str| p(m).with_gates(s).map(|p| p.dra_workload_resource_claims.enabled());
        assert_eq!(on(36, "GenericWorkload=true,DRAWorkloadResourceClaims=true"), Ok(true));
        assert_eq!(on(37, "DRAWorkloadResourceClaims=true,GenericWorkload=true"), Ok(true));
        assert_eq!(on(37, "DRAWorkloadResourceClaims=false"), Ok(false));
        let e = on(37, "DRAWorkloadResourceClaims=true").unwrap_err();
        assert_eq!(
            e.to_string(),
            "DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: [GenericWorkload]"
        );
        let off = vec!["GenericWorkload".to_string()];
        assert_eq!(e, ProfileError::Dependency { name: "DRAWorkloadResourceClaims", off }, "typed (#50)");
        assert!(on(35, "DRAWorkloadResourceClaims=true")
            .unwrap_err()
            .to_string()
            .contains("kubelet 1.35 has no such gate"));
    }

    /// kube_features.go v1.37.2: PodGroupPreemptionPolicy alpha (off) 1.37,
    /// depending on GenericWorkload.
    #[test]
    fn the_pod_group_preemption_policy_gate_is_1_37_alpha_and_needs_generic_workload() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!([36, 37].map(|m| p(m).pod_group_preemption_policy), [Gate::Absent, Gate::Off]);
        let on = |m, s: &str| p(m).with_gates(s).map(|p| p.pod_group_preemption_policy.enabled());
        assert_eq!(on(37, "GenericWorkload=true,PodGroupPreemptionPolicy=true"), Ok(true));
        assert_eq!(
            on(37, "PodGroupPreemptionPolicy=true").unwrap_err().to_string(),
            "PodGroupPreemptionPolicy is enabled, but depends on features that are disabled: [GenericWorkload]"
        );
        assert!(on(36, "PodGroupPreemptionPolicy=true")
            .unwrap_err()
            .to_string()
            .contains("kubelet 1.36 has no such gate"));
    }

    /// kube_features.go v1.37.2: DRAConsumableCapacity alpha 1.34, beta (on) 1.36.
    #[test]
    fn the_consumable_capacity_gate_is_off_on_1_34_and_1_35_and_on_from_1_36() {
        let p = |m| Profile::of(KubeletVersion(m));
        assert_eq!(
            [33, 34, 35, 36, 37].map(|m| p(m).dra_consumable_capacity),
            [Gate::Absent, Gate::Off, Gate::Off, Gate::On, Gate::On]
        );
        assert_eq!([35, 36].map(|m| p(m).allocator_features().consumable_capacity), [false, true]);
        let on = |m, s: &str| p(m).with_gates(s).map(|p| p.allocator_features().consumable_capacity);
        assert_eq!(on(35, "DRAConsumableCapacity=true"), Ok(true));
        assert_eq!(on(36, "DRAConsumableCapacity=false"), Ok(false));
        // DRAFractionalCapacityRange, which depends on it, is on in 1.37 only with
        // --min-compatibility-version 1.37 (the default is one minor before).
        assert_eq!(on(37, "DRAConsumableCapacity=false"), Ok(false));
        assert!(on(33, "DRAConsumableCapacity=true")
            .unwrap_err()
            .to_string()
            .contains("kubelet 1.33 has no such gate"));
        assert!(p(35).explain().contains("before 1.36: 1.25-1.33: no such gate; 1.34-1.35: off by default"));
    }

    /// The README's profile table is this table.
    #[test]
    fn readme_carries_the_table() {
        let readme = include_str!("../../docs/mock-kubelet.md");
        let table = markdown_table();
        assert!(
            readme.contains(&table),
            "docs/mock-kubelet.md's kubelet-version table is stale; paste this under \"Kubelet versions\":\n{table}"
        );
    }
}
