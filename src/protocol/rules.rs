//! The device-plugin rulebook: every rule of the `deviceplugin/v1beta1`
//! protocol dpctl checks or enforces, once. Each rule is data ([`Rule`]: id,
//! what it checks, what the kubelet does about it, the verdict `probe` and
//! `dpctl test` give, the kubelet's exact text where it enforces it, the fix
//! and the upstream source) with a pure check beside it that returns
//! [`Violation`]s.
//!
//! Who consults it: the mock kubelet refuses a registration breaking a rule
//! it [`Kubelet::Rejects`] (or [`Kubelet::MockRejects`]) with the rule's
//! text; `probe`, `preferred` and `dpctl test` report each violation as FAIL
//! or WARN by [`Rule::verdict`]; `doctor` reports them as errors or warnings;
//! `serve` refuses a configuration whose devices break a FAIL rule. The
//! [`RULES`] table lists them all (the README's rule table is checked
//! against it).

use crate::api::deviceplugin::{
    AllocateResponse, ContainerAllocateResponse, ContainerPreferredAllocationRequest, Device, DevicePluginOptions,
    PreferredAllocationResponse,
};
use crate::api::{HEALTHY, KUBELET_MAX_RECV, UNHEALTHY, VERSION};
use crate::core::text::{is_printable_ascii, quote};
use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// What the kubelet (upstream) does when a plugin breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kubelet {
    /// Refuses the registration: Register returns the rule's text.
    Rejects,
    /// Fails the pod's admission or the container's start.
    FailsPod,
    /// Fails the ListAndWatch stream: the resource's devices become unhealthy.
    DropsStream,
    /// Accepts it; the rule's `checks` says what it costs.
    Tolerates,
    /// Upstream does not check it; dpctl's mock kubelet refuses it (a safe kubelet must).
    MockRejects,
}

/// The verdict `probe` and `dpctl test` give a violation (`doctor`: error or warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// It works, but something is off.
    Warn,
    /// The kubelet refuses the plugin, drops its stream or fails the pod (or dpctl holds it to that).
    Fail,
}

/// One rule of the protocol.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Stable id (what reports, the README and the suite's scenarios name).
    pub id: &'static str,
    /// What it checks.
    pub checks: &'static str,
    /// What the kubelet does when it is broken.
    pub kubelet: Kubelet,
    /// The verdict `probe` and `dpctl test` give.
    pub verdict: Verdict,
    /// The kubelet's text (a Go format string) where the kubelet enforces it.
    pub kubelet_text: Option<&'static str>,
    /// How to fix a plugin that breaks it.
    pub fix: &'static str,
    /// Where upstream says so (a kubernetes/kubernetes file or a documentation page).
    pub source: &'static str,
}

impl Rule {
    /// A violation of this rule: `text` is what every role reports.
    pub fn violated(&'static self, text: impl Into<String>) -> Violation {
        Violation { rule: self, text: text.into(), device: None }
    }

    /// Whether the mock kubelet refuses a registration that breaks it.
    pub fn mock_kubelet_rejects(&self) -> bool {
        matches!(self.kubelet, Kubelet::Rejects | Kubelet::MockRejects)
    }
}

/// A broken rule, with what was seen. Its `Display` is the text every role
/// reports (the kubelet's own text where the kubelet enforces the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule broken.
    pub rule: &'static Rule,
    /// What was seen, in words (the kubelet's text where it has one).
    pub text: String,
    /// The index of the device in the list checked, for device rules.
    pub device: Option<usize>,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for Rule {}

impl Violation {
    /// Whether `probe` and `dpctl test` fail on it (else they warn).
    pub fn is_fail(&self) -> bool {
        self.rule.verdict == Verdict::Fail
    }

    fn at(mut self, i: usize) -> Self {
        self.device = Some(i);
        self
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Violation {}

const API_PROTO: &str = "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto";
const CONSTANTS: &str = "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go";
const SERVER: &str = "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register)";
const MANAGER: &str = "kubernetes pkg/kubelet/cm/devicemanager/manager.go";
const DOCS: &str = "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/";

/// GetInfo's type for a device plugin (pluginregistration/v1 constants.go DevicePlugin).
pub const DEVICE_PLUGIN_TYPE: &str = "DevicePlugin";
/// Device IDs are documented as at most this long (the kubelet does not enforce it).
pub const MAX_DEVICE_ID_LEN: usize = 63;
/// The longest file name Linux allows (a RegisterRequest endpoint is one).
pub const NAME_MAX: usize = 255;
/// The kubelet's PreStartContainer timeout.
pub const PRE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Every device has an ID.
pub static DEVICE_ID_EMPTY: Rule = Rule {
    id: "device-id-empty",
    checks: "every device has a non-empty ID",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "give every device a unique, non-empty ID",
    source: API_PROTO,
};
/// IDs are unique within a resource.
pub static DEVICE_ID_UNIQUE: Rule = Rule {
    id: "device-id-unique",
    checks: "no device ID appears twice in one snapshot (the kubelet keeps one of them: capacity is off)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "give every device a unique ID",
    source: API_PROTO,
};
/// IDs are at most 63 characters (documented, not enforced).
pub static DEVICE_ID_LENGTH: Rule = Rule {
    id: "device-id-length",
    checks: "device IDs are at most 63 characters (documented in api.proto; the kubelet does not enforce it)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "use IDs of at most 63 characters",
    source: API_PROTO,
};
/// IDs are printable ASCII without spaces.
pub static DEVICE_ID_CHARS: Rule = Rule {
    id: "device-id-chars",
    checks: "device IDs are printable ASCII without spaces or control characters (the kubelet accepts any \
             string; tables, logs, env values and shell tools choke on the rest)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "use IDs of letters, digits, '-', '_', '.' and ':'",
    source: API_PROTO,
};
/// Health is exactly `Healthy` or `Unhealthy`.
pub static DEVICE_HEALTH: Rule = Rule {
    id: "device-health",
    checks: "health is exactly \"Healthy\" or \"Unhealthy\" (the kubelet counts anything else as unhealthy)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "send exactly \"Healthy\" or \"Unhealthy\" (pluginapi.Healthy / pluginapi.Unhealthy)",
    source: CONSTANTS,
};
/// NUMA node IDs are not negative and listed once.
pub static DEVICE_TOPOLOGY: Rule = Rule {
    id: "device-topology",
    checks: "a device's NUMA node IDs are not negative and each is listed once",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "list each NUMA node once, none negative, or leave topology unset",
    source: "kubernetes pkg/kubelet/cm/devicemanager/topology_hints.go",
};
/// A topology, when set, lists nodes.
pub static DEVICE_TOPOLOGY_EMPTY: Rule = Rule {
    id: "device-topology-empty",
    checks: "a topology, when set, lists at least one NUMA node (an empty one means no topology)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "leave topology unset when the device has no NUMA affinity",
    source: "kubernetes pkg/kubelet/cm/devicemanager/topology_hints.go",
};
/// A snapshot fits the kubelet's receive limit.
pub static SNAPSHOT_SIZE: Rule = Rule {
    id: "snapshot-size",
    checks: "a ListAndWatch message fits the kubelet's 4 MiB gRPC receive limit",
    kubelet: Kubelet::DropsStream,
    verdict: Verdict::Fail,
    kubelet_text: Some("grpc: received message larger than max (%d vs. %d)"),
    fix: "advertise fewer devices per plugin (split the resource) or shorten the device IDs",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (dials with gRPC's default 4 MiB receive limit)",
};
/// A snapshot is not close to the limit.
pub static SNAPSHOT_SIZE_NEAR: Rule = Rule {
    id: "snapshot-size-near",
    checks: "a ListAndWatch message stays under 3/4 of the kubelet's 4 MiB receive limit",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "plan for fewer devices per plugin or shorter IDs before it grows",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go",
};
/// RegisterRequest.version is v1beta1.
pub static REGISTER_VERSION: Rule = Rule {
    id: "register-version",
    checks: "RegisterRequest.version is \"v1beta1\" (GetInfo supported_versions lists it)",
    kubelet: Kubelet::Rejects,
    verdict: Verdict::Fail,
    kubelet_text: Some("requested API version %q is not supported by kubelet. Supported version is %q"),
    fix: "send pluginapi.Version (\"v1beta1\")",
    source: SERVER,
};
/// The resource name is a valid extended resource name.
pub static REGISTER_RESOURCE_NAME: Rule = Rule {
    id: "register-resource-name",
    checks: "the resource name is an extended resource name (vendor.example/name: a DNS subdomain prefix, \
             not kubernetes.io/, not requests., a name of at most 63 characters)",
    kubelet: Kubelet::Rejects,
    verdict: Verdict::Fail,
    kubelet_text: Some("the ResourceName %q is invalid"),
    fix: "register a name like vendor.example/gpu",
    source:
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register: v1helper.IsExtendedResourceName)",
};
/// The endpoint is a socket file name in the plugin directory.
pub static REGISTER_ENDPOINT: Rule = Rule {
    id: "register-endpoint",
    checks: "RegisterRequest.endpoint is a socket file name inside the plugin directory (no '/', not . or .., \
             at most 255 bytes); upstream joins it to the directory unchecked",
    kubelet: Kubelet::MockRejects,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "send the socket's file name, e.g. \"vendor-gpu.sock\"",
    source: SERVER,
};
/// The options sent in RegisterRequest match GetDevicePluginOptions.
pub static REGISTER_OPTIONS: Rule = Rule {
    id: "register-options",
    checks: "RegisterRequest.options match GetDevicePluginOptions (the kubelet ignores the request's and reads \
             GetDevicePluginOptions)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "send the same options in RegisterRequest as GetDevicePluginOptions returns",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (Connect: GetDevicePluginOptions)",
};
/// The preferred answer has exactly `size` distinct IDs.
pub static PREFERRED_SIZE: Rule = Rule {
    id: "preferred-size",
    checks: "a GetPreferredAllocation answer has exactly allocation_size distinct IDs (the kubelet tops up or \
             trims it)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "answer exactly allocation_size distinct IDs",
    source: API_PROTO,
};
/// The preferred answer names only available IDs.
pub static PREFERRED_AVAILABLE: Rule = Rule {
    id: "preferred-available",
    checks: "a GetPreferredAllocation answer names only IDs from available_deviceIDs (the kubelet ignores others)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "choose only from available_deviceIDs",
    source: API_PROTO,
};
/// The preferred answer keeps the must-include IDs.
pub static PREFERRED_MUST_INCLUDE: Rule = Rule {
    id: "preferred-must-include",
    checks: "a GetPreferredAllocation answer contains every must_include_deviceID",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "start the answer with must_include_deviceIDs",
    source: API_PROTO,
};
/// One preferred answer per container request.
pub static PREFERRED_ANSWERS: Rule = Rule {
    id: "preferred-answers",
    checks: "GetPreferredAllocation answers one container_response per container request (the kubelet reads \
             only the first, and picks the devices itself when there is none)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "answer one ContainerPreferredAllocationResponse per request",
    source: MANAGER,
};
/// One Allocate answer per container request.
pub static ALLOCATE_ANSWERS: Rule = Rule {
    id: "allocate-answers",
    checks: "Allocate answers one container_response per container request (none fails the pod)",
    kubelet: Kubelet::FailsPod,
    verdict: Verdict::Fail,
    kubelet_text: Some("no containers return in allocation response %v"),
    fix: "return one ContainerAllocateResponse per ContainerAllocateRequest, in order",
    source: MANAGER,
};
/// An Allocate answer gives the container something.
pub static ALLOCATE_NOT_EMPTY: Rule = Rule {
    id: "allocate-not-empty",
    checks: "an Allocate answer gives the container something (envs, mounts, devices, annotations or CDI devices)",
    kubelet: Kubelet::Tolerates,
    verdict: Verdict::Warn,
    kubelet_text: None,
    fix: "return what the container needs to use the devices (a DeviceSpec, a CDI device, an env)",
    source: API_PROTO,
};
/// CDI device names are fully qualified.
pub static ALLOCATE_CDI_NAME: Rule = Rule {
    id: "allocate-cdi-name",
    checks: "CDI device names are fully qualified (vendor.example/class=device); the runtime fails the container \
             on others",
    kubelet: Kubelet::FailsPod,
    verdict: Verdict::Fail,
    kubelet_text: None,
    fix: "name CDI devices as vendor.example/class=device, as the CDI spec defines them",
    source: API_PROTO,
};
/// PreStartContainer answers without an error, in time.
pub static PRE_START: Rule = Rule {
    id: "pre-start",
    checks: "PreStartContainer answers without an error within the kubelet's 30 s (when pre_start_required)",
    kubelet: Kubelet::FailsPod,
    verdict: Verdict::Fail,
    kubelet_text: Some("device plugin PreStartContainer rpc failed with err: %v"),
    fix: "answer PreStartContainer quickly, or set pre_start_required=false",
    source: MANAGER,
};

/// Every device-plugin rule, in the order reports list them.
pub static RULES: &[&Rule] = &[
    &DEVICE_ID_EMPTY,
    &DEVICE_ID_UNIQUE,
    &DEVICE_ID_LENGTH,
    &DEVICE_ID_CHARS,
    &DEVICE_HEALTH,
    &DEVICE_TOPOLOGY,
    &DEVICE_TOPOLOGY_EMPTY,
    &SNAPSHOT_SIZE,
    &SNAPSHOT_SIZE_NEAR,
    &REGISTER_VERSION,
    &REGISTER_RESOURCE_NAME,
    &REGISTER_ENDPOINT,
    &REGISTER_OPTIONS,
    &PREFERRED_SIZE,
    &PREFERRED_AVAILABLE,
    &PREFERRED_MUST_INCLUDE,
    &PREFERRED_ANSWERS,
    &ALLOCATE_ANSWERS,
    &ALLOCATE_NOT_EMPTY,
    &ALLOCATE_CDI_NAME,
    &PRE_START,
];

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().copied().find(|r| r.id == id)
}

/// Where the documentation of every rule is (for hints).
pub const DOCS_PAGE: &str = DOCS;

// ---- devices -------------------------------------------------------------

/// Whether an ID is printable ASCII without spaces.
fn id_chars_ok(id: &str) -> bool {
    is_printable_ascii(id) && !id.contains(' ')
}

/// Check one snapshot's devices: IDs (empty, duplicate, length, characters),
/// health strings and topology. Each violation names the device's index.
pub fn devices<'a>(devices: impl IntoIterator<Item = &'a Device>) -> Vec<Violation> {
    let mut seen = HashSet::new();
    let mut dup_reported = HashSet::new();
    let mut out = Vec::new();
    for (i, d) in devices.into_iter().enumerate() {
        out.extend(device_id(&d.id, &mut seen, &mut dup_reported).into_iter().map(|v| v.at(i)));
        if let Some(v) = health(&d.id, &d.health) {
            out.push(v.at(i));
        }
        out.extend(topology(d).into_iter().map(|v| v.at(i)));
    }
    out
}

fn device_id<'a>(id: &'a str, seen: &mut HashSet<&'a str>, dup: &mut HashSet<&'a str>) -> Vec<Violation> {
    if id.is_empty() {
        return vec![DEVICE_ID_EMPTY.violated("a device has an empty ID")];
    }
    if !seen.insert(id) {
        return if dup.insert(id) {
            vec![DEVICE_ID_UNIQUE.violated(format!("device ID {} appears more than once", quote(id)))]
        } else {
            Vec::new()
        };
    }
    let mut out = Vec::new();
    if id.len() > MAX_DEVICE_ID_LEN {
        out.push(DEVICE_ID_LENGTH.violated(format!(
            "device ID {} is {} characters, over the documented limit of {MAX_DEVICE_ID_LEN}",
            quote(id),
            id.len()
        )));
    }
    if !id_chars_ok(id) {
        out.push(DEVICE_ID_CHARS.violated(format!(
            "device ID {} is not printable ASCII (or has a space); the kubelet accepts it, but tables, logs and \
             tools like grep choke on it",
            quote(id)
        )));
    }
    out
}

/// Check one health string.
pub fn health(id: &str, health: &str) -> Option<Violation> {
    (health != HEALTHY && health != UNHEALTHY).then(|| {
        DEVICE_HEALTH.violated(format!(
            "device {} has health {}; only the exact strings \"Healthy\" and \"Unhealthy\" are valid (the kubelet \
             counts anything else as unhealthy)",
            quote(id),
            quote(health)
        ))
    })
}

fn topology(d: &Device) -> Vec<Violation> {
    let Some(t) = &d.topology else { return Vec::new() };
    if t.nodes.is_empty() {
        return vec![DEVICE_TOPOLOGY_EMPTY.violated(format!(
            "device {} has a topology with no NUMA nodes (leave topology unset instead)",
            quote(&d.id)
        ))];
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for n in &t.nodes {
        if n.id < 0 {
            out.push(DEVICE_TOPOLOGY.violated(format!("device {} has NUMA node {}", quote(&d.id), n.id)));
        }
        if !seen.insert(n.id) {
            out.push(DEVICE_TOPOLOGY.violated(format!("device {} lists NUMA node {} twice", quote(&d.id), n.id)));
        }
    }
    out
}

/// Check the encoded size of one ListAndWatch message.
pub fn snapshot_size(bytes: usize, devices: usize) -> Option<Violation> {
    if bytes > KUBELET_MAX_RECV {
        Some(SNAPSHOT_SIZE.violated(format!(
            "the ListAndWatch snapshot is {bytes} bytes for {devices} device(s), over the kubelet's receive limit \
             of {KUBELET_MAX_RECV}: grpc: received message larger than max ({bytes} vs. {KUBELET_MAX_RECV})"
        )))
    } else if bytes > KUBELET_MAX_RECV / 4 * 3 {
        Some(SNAPSHOT_SIZE_NEAR.violated(format!(
            "the ListAndWatch snapshot is {bytes} bytes for {devices} device(s), close to the kubelet's receive \
             limit of {KUBELET_MAX_RECV}"
        )))
    } else {
        None
    }
}

/// Parse a health string given by a user: exactly `Healthy` or `Unhealthy`.
pub fn parse_health(s: &str) -> Result<&'static str, Violation> {
    match s {
        HEALTHY => Ok(HEALTHY),
        UNHEALTHY => Ok(UNHEALTHY),
        _ => Err(DEVICE_HEALTH.violated(format!(
            "invalid health {}: use exactly \"Healthy\" or \"Unhealthy\" (case matters to the kubelet)",
            quote(s)
        ))),
    }
}

// ---- registration --------------------------------------------------------

/// Check RegisterRequest.version; the violation's text is the kubelet's.
pub fn register_version(v: &str) -> Option<Violation> {
    (v != VERSION).then(|| {
        // Go's %q of the [1]string SupportedVersions array prints ["v1beta1"].
        REGISTER_VERSION.violated(format!(
            "requested API version {} is not supported by kubelet. Supported version is [{:?}]",
            quote(v),
            VERSION
        ))
    })
}

/// Check a plugin watcher's GetInfo supported_versions; the text is the kubelet's.
pub fn watcher_versions(versions: &[String]) -> Option<Violation> {
    (!versions.iter().any(|v| v == VERSION)).then(|| {
        REGISTER_VERSION
            .violated(format!("manager version, {VERSION}, is not among plugin supported versions {versions:?}"))
    })
}

/// Check a resource name; the violation's text is the kubelet's, [`resource_name_problem`] says why.
pub fn register_resource_name(name: &str) -> Option<Violation> {
    resource_name_problem(name)
        .map(|_| REGISTER_RESOURCE_NAME.violated(format!("the ResourceName {} is invalid", quote(name))))
}

/// Why a resource name is not a valid extended resource name, or `None` if it
/// is one. Mirrors the kubelet's `v1helper.IsExtendedResourceName`: not a
/// native resource (must contain `/`, must not contain `kubernetes.io/`), not
/// starting with `requests.`, and `requests.<name>` a qualified name.
pub fn resource_name_problem(name: &str) -> Option<String> {
    if !name.contains('/') {
        return Some("it has no domain prefix; extended resources look like vendor.example/foo".into());
    }
    if name.contains("kubernetes.io/") {
        return Some("the kubernetes.io/ prefix is reserved for native resources".into());
    }
    if name.starts_with("requests.") {
        return Some("it must not start with \"requests.\"".into());
    }
    let quota = format!("requests.{name}");
    let (prefix, short) = match quota.split_once('/') {
        Some((p, n)) if !n.contains('/') => (p, n),
        _ => return Some("it must contain exactly one '/'".into()),
    };
    if let Some(p) = dns_subdomain_problem(prefix) {
        return Some(format!("prefix {} {p}", quote(prefix.strip_prefix("requests.").unwrap_or(prefix))));
    }
    if short.is_empty() {
        return Some("the name after '/' is empty".into());
    }
    if short.len() > 63 {
        return Some(format!("the name after '/' is {} characters, at most 63 are allowed", short.len()));
    }
    if !qualified_name_part_ok(short) {
        return Some(format!(
            "the name after '/' ({}) must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric",
            quote(short)
        ));
    }
    None
}

/// Check a resource name given on the command line, as a usage error.
pub fn check_resource_name(name: &str) -> crate::core::Result<()> {
    match (register_resource_name(name), resource_name_problem(name)) {
        (Some(v), Some(p)) => {
            Err(crate::core::Error::usage(format!("invalid resource name {}: {p}", quote(name))).caused_by(v))
        }
        _ => Ok(()),
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn qualified_name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// RFC 1123 DNS subdomain: at most 253 characters, dot-separated lowercase labels.
fn dns_subdomain_problem(s: &str) -> Option<&'static str> {
    if s.len() > 253 {
        return Some("is longer than 253 characters");
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
            && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
            && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    if s.split('.').all(label_ok) {
        None
    } else {
        Some("must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with an alphanumeric)")
    }
}

/// Check RegisterRequest.endpoint: a socket file name inside `plugin_dir`.
pub fn register_endpoint(endpoint: &str, plugin_dir: &Path) -> Option<Violation> {
    let bad = endpoint.is_empty()
        || endpoint.contains('/')
        || endpoint == "."
        || endpoint == ".."
        || endpoint.contains('\0')
        || endpoint.len() > NAME_MAX;
    bad.then(|| {
        REGISTER_ENDPOINT.violated(format!(
            "endpoint {} is not a socket file name inside the plugin directory {}; send the socket's file name \
             (e.g. \"vendor.sock\", at most {NAME_MAX} bytes)",
            quote(endpoint),
            plugin_dir.display()
        ))
    })
}

/// Options as text.
pub fn options_text(o: &DevicePluginOptions) -> String {
    format!(
        "{{preStartRequired: {}, getPreferredAllocationAvailable: {}}}",
        o.pre_start_required, o.get_preferred_allocation_available
    )
}

/// Check the options sent in RegisterRequest against GetDevicePluginOptions.
pub fn register_options(sent: &DevicePluginOptions, got: &DevicePluginOptions) -> Option<Violation> {
    (sent != got).then(|| {
        REGISTER_OPTIONS.violated(format!(
            "RegisterRequest sent {}, GetDevicePluginOptions says {}",
            options_text(sent),
            options_text(got)
        ))
    })
}

// ---- answers ---------------------------------------------------------------

/// Check a GetPreferredAllocation answer to one container request.
pub fn preferred(req: &ContainerPreferredAllocationRequest, resp: &PreferredAllocationResponse) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(first) = resp.container_responses.first() else {
        return vec![PREFERRED_ANSWERS
            .violated("no container_responses: the kubelet ignores the answer and picks the devices itself")];
    };
    if resp.container_responses.len() > 1 {
        out.push(PREFERRED_ANSWERS.violated(format!(
            "{} container_responses for 1 container request (the kubelet reads only the first)",
            resp.container_responses.len()
        )));
    }
    out.extend(preferred_ids(
        &req.available_device_i_ds,
        &req.must_include_device_i_ds,
        usize::try_from(req.allocation_size).unwrap_or(0),
        &first.device_i_ds,
    ));
    out
}

/// Check the IDs of one preferred answer against its request.
pub fn preferred_ids(available: &[String], must: &[String], size: usize, answer: &[String]) -> Vec<Violation> {
    let mut out = Vec::new();
    let distinct: HashSet<&String> = answer.iter().collect();
    if answer.len() != size || distinct.len() != answer.len() {
        let dup = if distinct.len() != answer.len() { ", some more than once" } else { "" };
        out.push(PREFERRED_SIZE.violated(format!(
            "size not honoured: asked for {size}, got {} ID(s){dup}: {}",
            answer.len(),
            crate::core::text::id_list(answer)
        )));
    }
    let offered: HashSet<&String> = available.iter().collect();
    let foreign: Vec<&String> = answer.iter().filter(|a| !offered.contains(a)).collect();
    if !foreign.is_empty() {
        out.push(
            PREFERRED_AVAILABLE
                .violated(format!("IDs not in the available list: {}", crate::core::text::id_list(&foreign))),
        );
    }
    let missing: Vec<&String> = must.iter().filter(|m| !distinct.contains(m)).collect();
    if !missing.is_empty() {
        out.push(
            PREFERRED_MUST_INCLUDE
                .violated(format!("must-include IDs missing: {}", crate::core::text::id_list(&missing))),
        );
    }
    out
}

/// Check an Allocate answer to `requests` container requests.
pub fn allocate(requests: usize, resp: &AllocateResponse) -> Vec<Violation> {
    let n = resp.container_responses.len();
    let mut out = Vec::new();
    if n == 0 {
        // The kubelet appends the response (`%v`): here it is empty.
        out.push(ALLOCATE_ANSWERS.violated("no containers return in allocation response"));
    } else if n != requests {
        out.push(ALLOCATE_ANSWERS.violated(format!("{n} container_responses for {requests} container request(s)")));
    }
    for c in &resp.container_responses {
        if is_empty_answer(c) {
            out.push(ALLOCATE_NOT_EMPTY.violated("the response gives the container nothing"));
        }
        out.extend(cdi_names(c).iter().filter_map(|name| cdi_name(name)));
    }
    out
}

/// Whether an Allocate answer gives the container nothing at all.
pub fn is_empty_answer(r: &ContainerAllocateResponse) -> bool {
    r.envs.is_empty()
        && r.mounts.is_empty()
        && r.devices.is_empty()
        && r.annotations.is_empty()
        && r.cdi_devices.is_empty()
}

/// The CDI device names a container gets from an Allocate answer: its
/// `cdi_devices` and the values of `cdi.k8s.io/*` annotations.
pub fn cdi_names(resp: &ContainerAllocateResponse) -> Vec<String> {
    let mut v: Vec<String> = resp.cdi_devices.iter().map(|d| d.name.clone()).collect();
    for (k, val) in &resp.annotations {
        if k.starts_with("cdi.k8s.io/") {
            v.extend(val.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        }
    }
    v
}

/// Whether `kind` is `vendor/class` as CDI requires.
pub fn cdi_kind_ok(kind: &str) -> bool {
    let Some((vendor, class)) = kind.split_once('/') else { return false };
    let ok = |s: &str, extra: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(c));
    ok(vendor, ".-") && ok(class, "_-") && !class.contains('/')
}

/// Check one CDI device name: fully qualified `vendor.example/class=device`.
pub fn cdi_name(name: &str) -> Option<Violation> {
    let ok = name.split_once('=').is_some_and(|(kind, dev)| cdi_kind_ok(kind) && !dev.is_empty());
    (!ok).then(|| {
        ALLOCATE_CDI_NAME.violated(format!("{} is not a qualified CDI name (vendor.example/class=device)", quote(name)))
    })
}

/// A gRPC error status as Go prints it (`%v`), as the kubelet's texts embed it.
pub fn go_status(code: tonic::Code, message: &str) -> String {
    format!("rpc error: code = {code:?} desc = {message}")
}

/// Check a PreStartContainer call's outcome (`error`: the error as [`go_status`] prints it).
pub fn pre_start(error: Option<&str>, took: Duration) -> Option<Violation> {
    if let Some(e) = error {
        return Some(PRE_START.violated(format!("device plugin PreStartContainer rpc failed with err: {e}")));
    }
    (took > PRE_START_TIMEOUT).then(|| {
        PRE_START.violated(format!(
            "PreStartContainer took {}, over the kubelet's {}",
            crate::core::time::format_duration(took),
            crate::core::time::format_duration(PRE_START_TIMEOUT)
        ))
    })
}

#[cfg(test)]
mod tests;
