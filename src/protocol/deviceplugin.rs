//! The device-plugin rulebook: every rule of the `deviceplugin/v1beta1`
//! protocol dpctl checks or enforces, once. Each rule is data ([`Rule`]: id,
//! what it checks, what the kubelet does about it, the severity `probe` and
//! `dpctl test` give, the kubelet's exact text where it enforces it, the fix
//! and the upstream source) with a pure check beside it that returns
//! [`Violation`]s. The registration rules are in [`super::registration`].
//!
//! Who consults it: the mock kubelet refuses a registration breaking a rule
//! it [`Kubelet::Rejects`] (or [`Kubelet::MockRejects`]) with the rule's
//! text; `probe`, `preferred` and `dpctl test` report each violation as FAIL
//! or WARN by [`Rule::severity`]; `doctor` reports them as errors or warnings;
//! `serve` refuses a configuration whose devices break a FAIL rule. The
//! [`RULES`] table lists them all, registration's too (the README's rule
//! table is checked against it).

use super::cdi;
use super::registration::{REGISTER_ENDPOINT, REGISTER_OPTIONS, REGISTER_RESOURCE_NAME, REGISTER_VERSION};
use super::rule::{Kubelet, Rule, Severity, Violation};
use crate::api::deviceplugin::{
    AllocateResponse, ContainerAllocateResponse, ContainerPreferredAllocationRequest, Device,
    PreferredAllocationResponse,
};
use crate::api::{HEALTHY, KUBELET_MAX_RECV, UNHEALTHY};
use crate::core::text::{is_printable_ascii, quote};
use std::collections::HashSet;
use std::time::Duration;

const API_PROTO: &str = "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto";
const CONSTANTS: &str = "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go";
const MANAGER: &str = "kubernetes pkg/kubelet/cm/devicemanager/manager.go";
const DOCS: &str = "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/";

/// Device IDs are documented as at most this long (the kubelet does not enforce it).
pub const MAX_DEVICE_ID_LEN: usize = 63;
/// The kubelet's PreStartContainer timeout.
pub const PRE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Every device has an ID.
pub static DEVICE_ID_EMPTY: Rule = Rule {
    id: "device-id-empty",
    checks: "every device has a non-empty ID",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "give every device a unique, non-empty ID",
    source: API_PROTO,
};
/// IDs are unique within a resource.
pub static DEVICE_ID_UNIQUE: Rule = Rule {
    id: "device-id-unique",
    checks: "no device ID appears twice in one snapshot (the kubelet keeps one of them: capacity is off)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "give every device a unique ID",
    source: API_PROTO,
};
/// IDs are at most 63 characters (documented, not enforced).
pub static DEVICE_ID_LENGTH: Rule = Rule {
    id: "device-id-length",
    checks: "device IDs are at most 63 characters (documented in api.proto; the kubelet does not enforce it)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Warn,
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
    severity: Severity::Warn,
    kubelet_text: None,
    fix: "use IDs of letters, digits, '-', '_', '.' and ':'",
    source: API_PROTO,
};
/// Health is exactly `Healthy` or `Unhealthy`.
pub static DEVICE_HEALTH: Rule = Rule {
    id: "device-health",
    checks: "health is exactly \"Healthy\" or \"Unhealthy\" (the kubelet counts anything else as unhealthy)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "send exactly \"Healthy\" or \"Unhealthy\" (pluginapi.Healthy / pluginapi.Unhealthy)",
    source: CONSTANTS,
};
/// NUMA node IDs are not negative and listed once.
pub static DEVICE_TOPOLOGY: Rule = Rule {
    id: "device-topology",
    checks: "a device's NUMA node IDs are not negative and each is listed once",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "list each NUMA node once, none negative, or leave topology unset",
    source: "kubernetes pkg/kubelet/cm/devicemanager/topology_hints.go",
};
/// A topology, when set, lists nodes.
pub static DEVICE_TOPOLOGY_EMPTY: Rule = Rule {
    id: "device-topology-empty",
    checks: "a topology, when set, lists at least one NUMA node (an empty one means no topology)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Warn,
    kubelet_text: None,
    fix: "leave topology unset when the device has no NUMA affinity",
    source: "kubernetes pkg/kubelet/cm/devicemanager/topology_hints.go",
};
/// A snapshot fits the kubelet's receive limit.
pub static SNAPSHOT_SIZE: Rule = Rule {
    id: "snapshot-size",
    checks: "a ListAndWatch message fits the kubelet's 4 MiB gRPC receive limit",
    kubelet: Kubelet::DropsStream,
    severity: Severity::Fail,
    kubelet_text: Some("grpc: received message larger than max (%d vs. %d)"),
    fix: "advertise fewer devices per plugin (split the resource) or shorten the device IDs",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (dials with gRPC's default 4 MiB receive limit)",
};
/// A snapshot is not close to the limit.
pub static SNAPSHOT_SIZE_NEAR: Rule = Rule {
    id: "snapshot-size-near",
    checks: "a ListAndWatch message stays under 3/4 of the kubelet's 4 MiB receive limit",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Warn,
    kubelet_text: None,
    fix: "plan for fewer devices per plugin or shorter IDs before it grows",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go",
};
/// The preferred answer has exactly `size` distinct IDs.
pub static PREFERRED_SIZE: Rule = Rule {
    id: "preferred-size",
    checks: "a GetPreferredAllocation answer has exactly allocation_size distinct IDs (the kubelet tops up or \
             trims it)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "answer exactly allocation_size distinct IDs",
    source: API_PROTO,
};
/// The preferred answer names only available IDs.
pub static PREFERRED_AVAILABLE: Rule = Rule {
    id: "preferred-available",
    checks: "a GetPreferredAllocation answer names only IDs from available_deviceIDs (the kubelet ignores others)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "choose only from available_deviceIDs",
    source: API_PROTO,
};
/// The preferred answer keeps the must-include IDs.
pub static PREFERRED_MUST_INCLUDE: Rule = Rule {
    id: "preferred-must-include",
    checks: "a GetPreferredAllocation answer contains every must_include_deviceID",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
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
    severity: Severity::Warn,
    kubelet_text: None,
    fix: "answer one ContainerPreferredAllocationResponse per request",
    source: MANAGER,
};
/// One Allocate answer per container request.
pub static ALLOCATE_ANSWERS: Rule = Rule {
    id: "allocate-answers",
    checks: "Allocate answers one container_response per container request (none fails the pod)",
    kubelet: Kubelet::FailsPod,
    severity: Severity::Fail,
    kubelet_text: Some("no containers return in allocation response %v"),
    fix: "return one ContainerAllocateResponse per ContainerAllocateRequest, in order",
    source: MANAGER,
};
/// An Allocate answer gives the container something.
pub static ALLOCATE_NOT_EMPTY: Rule = Rule {
    id: "allocate-not-empty",
    checks: "an Allocate answer gives the container something (envs, mounts, devices, annotations or CDI devices)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Warn,
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
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "name CDI devices as vendor.example/class=device, as the CDI spec defines them",
    source: API_PROTO,
};
/// PreStartContainer answers without an error, in time.
pub static PRE_START: Rule = Rule {
    id: "pre-start",
    checks: "PreStartContainer answers without an error within the kubelet's 30 s (when pre_start_required)",
    kubelet: Kubelet::FailsPod,
    severity: Severity::Fail,
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
        out.extend(cdi::names(c).iter().filter_map(|name| cdi_name(name)));
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

/// Check one CDI device name: fully qualified `vendor.example/class=device` ([`cdi::name_ok`]).
pub fn cdi_name(name: &str) -> Option<Violation> {
    (!cdi::name_ok(name)).then(|| {
        ALLOCATE_CDI_NAME.violated(format!("{} is not a qualified CDI name (vendor.example/class=device)", quote(name)))
    })
}

/// Check a PreStartContainer call's outcome (`error`: the error as [`super::go_status`] prints it).
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
