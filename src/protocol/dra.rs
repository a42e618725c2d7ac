//! The DRA kubelet-plugin rules: what the kubelet requires of a DRA
//! driver's registration (plugin watcher GetInfo), of its DRAPlugin answers
//! and of its health stream. Each rule is data (the rulebook's one [`Rule`]:
//! id, what it checks, what the kubelet does, severity, the kubelet's text,
//! fix, upstream source) with a pure check beside it returning [`Violation`]s;
//! `dpctl dra probe` reports them, `dpctl dra serve` validates its own
//! configuration with them (and breaks one on purpose per `--fault`), and
//! `doctor` reports them for the plugins it finds on a node.

use super::rule::{Kubelet, Rule, Severity, Violation};
use crate::api::dra_health_v1::{DeviceHealth, HealthStatus};
use crate::api::dra_v1::{NodePrepareResourcesResponse, NodeUnprepareResourcesResponse};
use crate::api::pluginregistration::PluginInfo;
use crate::core::validate::DnsProblem;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The plugin type a DRA driver registers with.
pub const PLUGIN_TYPE: &str = "DRAPlugin";
/// The v1 DRAPlugin service, as listed in `supported_versions`.
pub const DRA_V1: &str = "v1.DRAPlugin";
/// The deprecated v1beta1 DRAPlugin service.
pub const DRA_V1BETA1: &str = "v1beta1.DRAPlugin";
/// The v1alpha4 DRAPlugin API as advertised (kubelet 1.31–1.33; the gRPC
/// service is `v1alpha3.Node`, a package-name mistake upstream kept:
/// staging/src/k8s.io/kubelet/pkg/apis/dra/v1alpha4/types.go NodeService).
pub const DRA_V1ALPHA4: &str = "v1alpha3.NodeService";
/// The gRPC service behind [`DRA_V1ALPHA4`] (its messages are v1beta1's, field for field: kubernetes#128646).
pub const DRA_V1ALPHA4_GRPC: &str = "v1alpha3.Node";
/// The v1 health service (Kubernetes 1.37+).
pub const HEALTH_V1: &str = "v1.DRAResourceHealth";
/// The v1alpha1 health service (Kubernetes 1.34+).
pub const HEALTH_V1ALPHA1: &str = "v1alpha1.DRAResourceHealth";
/// DRAPlugin services the kubelet speaks, most recent first.
pub const KUBELET_DRA_SERVICES: &[&str] = &[DRA_V1, DRA_V1BETA1];
/// Health services the kubelet speaks, preferred first.
pub const KUBELET_HEALTH_SERVICES: &[&str] = &[HEALTH_V1, HEALTH_V1ALPHA1];
/// The longest DRA driver name (a DNS label's length).
pub const MAX_DRIVER_NAME: usize = 63;
/// The longest health message the kubelet keeps unchanged.
pub const MAX_HEALTH_MESSAGE: usize = 1024;
/// The kubelet's timeout for each DRAPlugin call.
pub const KUBELET_CALL_TIMEOUT_SECS: u64 = 45;

const REG_SRC: &str = "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (RegisterPlugin, ValidatePlugin)";

/// GetInfo's type must be DRAPlugin.
pub static TYPE: Rule = Rule {
    id: "plugin-type",
    checks: "GetInfo type is \"DRAPlugin\"",
    severity: Severity::Fail,
    kubelet: Kubelet::Rejects,
    kubelet_text: Some("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s"),
    fix: "answer GetInfo with type \"DRAPlugin\" (the kubelet logs \"no handler registered for plugin type\")",
    source: "kubernetes pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go (a handler per plugin type)",
};
/// The driver name is a DNS subdomain of at most 63 characters.
pub static DRIVER_NAME: Rule = Rule {
    id: "driver-name",
    checks: "GetInfo name is a valid DRA driver name (lowercase DNS subdomain, at most 63 characters)",
    severity: Severity::Fail,
    kubelet: Kubelet::MockRejects,
    kubelet_text: None,
    fix: "register under the driver name the ResourceSlices use, e.g. gpu.example.com",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/registration_test.go (TestRegisterPluginRejectsUntrustedInput; \
             kubernetes#140837); staging/src/k8s.io/api/resource/v1/types.go (DriverNameMaxLength)",
};
/// The endpoint is an absolute path.
pub static ENDPOINT_ABSOLUTE: Rule = Rule {
    id: "endpoint-absolute",
    checks: "GetInfo endpoint is a non-empty absolute path",
    severity: Severity::Fail,
    kubelet: Kubelet::MockRejects,
    kubelet_text: None,
    fix: "report the service socket's full host path, e.g. /var/lib/kubelet/plugins/<driver>/dra.sock",
    source: REG_SRC,
};
/// The endpoint is inside the kubelet's root directory.
pub static ENDPOINT_INSIDE_ROOT: Rule = Rule {
    id: "endpoint-inside-root",
    checks: "GetInfo endpoint is inside the kubelet's root directory",
    severity: Severity::Fail,
    kubelet: Kubelet::MockRejects,
    kubelet_text: None,
    fix: "serve under <kubelet-root>/plugins/<driver>/ (pass the kubelet's --root-dir to the driver)",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/registration_test.go (endpoint-outside-rootDir; kubernetes#140837)",
};
/// The endpoint fits a socket address.
pub static ENDPOINT_LENGTH: Rule = Rule {
    id: "endpoint-length",
    checks: "GetInfo endpoint fits a Unix socket address (at most 107 bytes)",
    severity: Severity::Fail,
    kubelet: Kubelet::MockRejects,
    kubelet_text: None,
    fix: "use a shorter socket path",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/registration_test.go (endpoint-too-long; kubernetes#140837)",
};
/// supported_versions names a DRAPlugin service the kubelet speaks.
pub static VERSIONS: Rule = Rule {
    id: "supported-versions",
    checks: "supported_versions lists v1.DRAPlugin or v1beta1.DRAPlugin (gRPC service names)",
    severity: Severity::Fail,
    kubelet: Kubelet::Rejects,
    kubelet_text: Some("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w"),
    fix: "list the gRPC services the plugin serves, e.g. [\"v1.DRAPlugin\", \"v1beta1.DRAPlugin\"]",
    source: REG_SRC,
};
/// The kubelet picks the first supported service in the plugin's order.
pub static VERSION_ORDER: Rule = Rule {
    id: "version-order",
    checks: "the kubelet would choose v1.DRAPlugin (it takes the first one it knows, in the plugin's order)",
    severity: Severity::Warn,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "serve v1.DRAPlugin and list it before v1beta1.DRAPlugin (v1beta1 is deprecated since 1.34)",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (validateSupportedServices)",
};
/// The endpoint answers.
pub static ENDPOINT_REACHABLE: Rule = Rule {
    id: "endpoint-reachable",
    checks: "the endpoint socket accepts a gRPC connection",
    severity: Severity::Fail,
    kubelet: Kubelet::FailsPod,
    kubelet_text: None,
    fix: "serve the DRAPlugin socket before creating the registration socket, and keep it served",
    source:
        "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (the kubelet dials the endpoint after registration)",
};
/// Each advertised DRAPlugin service answers.
pub static SERVICE_ANSWERS: Rule = Rule {
    id: "service-answers",
    checks: "each advertised DRAPlugin service answers an empty NodePrepareResources in time",
    severity: Severity::Fail,
    kubelet: Kubelet::FailsPod,
    kubelet_text: None,
    fix: "serve every service listed in supported_versions; answer within the kubelet's 45s call timeout",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin.go (NodePrepareResources on the chosen service, 45s defaultClientCallTimeout)",
};
/// Every requested claim gets an answer.
pub static ANSWER_COMPLETE: Rule = Rule {
    id: "answer-complete",
    checks: "the answer has one entry per requested claim UID",
    severity: Severity::Fail,
    kubelet: Kubelet::FailsPod,
    kubelet_text: None,
    fix: "answer every claim, with its error set when it failed (the kubelet asks again for a missing UID)",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto (NodePrepareResourcesResponse.claims)",
};
/// No entries for claims that were not asked for.
pub static ANSWER_EXTRA: Rule = Rule {
    id: "answer-extra",
    checks: "the answer has no entry for a claim that was not requested",
    severity: Severity::Warn,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "key the answer by the UIDs of the request",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto (NodePrepareResourcesResponse.claims)",
};
/// Prepared devices name their pool and device.
pub static DEVICE_FIELDS: Rule = Rule {
    id: "device-fields",
    checks: "every prepared device has pool_name and device_name",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "set pool_name and device_name (both required) as in the ResourceSlice",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto (Device)",
};
/// CDI IDs are fully qualified.
pub static CDI_ID: Rule = Rule {
    id: "cdi-id",
    checks: "every cdi_device_id is a qualified CDI name (vendor.example/class=device)",
    severity: Severity::Fail,
    kubelet: Kubelet::FailsPod,
    kubelet_text: None,
    fix: "return qualified CDI names and write their specs before answering",
    source: super::cdi::SPEC,
};
/// Preparing the same claims twice gives the same answer.
pub static IDEMPOTENT: Rule = Rule {
    id: "idempotent",
    checks: "preparing the same claims again gives the same answer",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "make NodePrepareResources idempotent: the kubelet repeats it after a restart or timeout",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto; KEP-4381",
};
/// The devices prepared are those the claim was allocated.
pub static ALLOCATED_DEVICES: Rule = Rule {
    id: "allocated-devices",
    checks: "the devices prepared for a claim are those of its status.allocation.devices.results for this driver",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "GET the ResourceClaim and prepare the devices its allocation names for your driver (the kubeletplugin helper hands them to the driver)",
    source: "kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin; KEP-4381",
};
/// The opaque config of a claim and its DeviceClass for the driver takes effect.
pub static OPAQUE_CONFIG: Rule = Rule {
    id: "opaque-config",
    checks: "the opaque config for the driver in the claim's status.allocation.devices.config (FromClass and FromClaim) takes effect in what it prepares, or the claim is refused",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "apply every config entry of status.allocation.devices.config whose opaque.driver is yours and whose requests name the result's request (all when empty; resourceclaim.ConfigForResult), class configs first, then the claim's; refuse parameters you cannot decode (strictly) instead of using defaults",
    source: "kubernetes staging/src/k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go (ConfigForResult); kubernetes test/e2e/dra/test-driver/app/kubeletplugin.go (extractParameters: admin_/user_ env)",
};
/// The health service answers when advertised.
pub static HEALTH_ANSWERS: Rule = Rule {
    id: "health-answers",
    checks: "an advertised DRAResourceHealth service sends a first snapshot",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "serve the health service listed in supported_versions and send a snapshot at once",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (health stream retried every 5s); KEP-4680",
};
/// The health stream stays open.
pub static HEALTH_STREAM: Rule = Rule {
    id: "health-stream",
    checks: "the health stream stays open after its first snapshot",
    severity: Severity::Warn,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "keep NodeWatchResources open and send a full snapshot on every change",
    source: "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (the kubelet reopens an ended stream after 5s)",
};
/// Health entries identify a device.
pub static HEALTH_DEVICE: Rule = Rule {
    id: "health-device",
    checks: "every health entry names a pool and a device, once",
    severity: Severity::Fail,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "set device.pool_name and device.device_name in every DeviceHealth, one entry per device",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra-health/v1/api.proto (DeviceIdentifier)",
};
/// Health messages fit.
pub static HEALTH_MESSAGE: Rule = Rule {
    id: "health-message",
    checks: "health messages are at most 1024 characters",
    severity: Severity::Warn,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "shorten the message: the kubelet truncates it to 1021 characters and \"...\"",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra-health/v1/api.proto (DeviceHealth.message)",
};
/// Health entries carry a timestamp.
pub static HEALTH_TIME: Rule = Rule {
    id: "health-time",
    checks: "every health entry has last_updated_time set and not in the future",
    severity: Severity::Warn,
    kubelet: Kubelet::Tolerates,
    kubelet_text: None,
    fix: "set last_updated_time to the Unix seconds of the last health check",
    source: "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra-health/v1/api.proto (DeviceHealth.last_updated_time)",
};

/// Every rule, in report order.
pub static RULES: &[&Rule] = &[
    &TYPE,
    &DRIVER_NAME,
    &ENDPOINT_ABSOLUTE,
    &ENDPOINT_INSIDE_ROOT,
    &ENDPOINT_LENGTH,
    &VERSIONS,
    &VERSION_ORDER,
    &ENDPOINT_REACHABLE,
    &SERVICE_ANSWERS,
    &ANSWER_COMPLETE,
    &ANSWER_EXTRA,
    &DEVICE_FIELDS,
    &CDI_ID,
    &IDEMPOTENT,
    &ALLOCATED_DEVICES,
    &OPAQUE_CONFIG,
    &HEALTH_ANSWERS,
    &HEALTH_STREAM,
    &HEALTH_DEVICE,
    &HEALTH_MESSAGE,
    &HEALTH_TIME,
];

/// Why `name` is not a valid DRA driver name, or `None`: a DNS subdomain
/// (apimachinery's `IsDNS1123Subdomain`, the one checker device-plugin
/// resource names use too) of at most 63 characters, as the API server
/// validates ResourceSlice.spec.driver; the texts are apimachinery's.
pub fn driver_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the driver name is empty".into());
    }
    match crate::core::validate::dns_subdomain(name, MAX_DRIVER_NAME) {
        Ok(()) => None,
        Err(p @ DnsProblem::TooLong(len, _)) => Some(format!("the driver name is {len} characters long: {p}")),
        Err(p @ DnsProblem::NotDnsSubdomain) => {
            Some(format!("{} is not a lowercase DNS subdomain: {p}", crate::core::text::quote(name)))
        }
    }
}

/// `path` with `.` and `..` resolved lexically (as Go's filepath.Clean).
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() && !path.is_absolute() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The endpoint rules for `endpoint` (a host path) and the kubelet's root (a host path).
pub fn endpoint_violations(endpoint: &str, kubelet_root: &Path) -> Vec<Violation> {
    let mut v = Vec::new();
    if endpoint.is_empty() {
        v.push(ENDPOINT_ABSOLUTE.violated("the endpoint is empty"));
        return v;
    }
    let p = Path::new(endpoint);
    if !p.is_absolute() {
        v.push(ENDPOINT_ABSOLUTE.violated(format!("endpoint {endpoint} must be an absolute path")));
        return v;
    }
    if endpoint.len() > crate::core::transport::SUN_PATH_MAX {
        v.push(ENDPOINT_LENGTH.violated(format!(
            "endpoint is {} bytes, longer than a socket address holds ({})",
            endpoint.len(),
            crate::core::transport::SUN_PATH_MAX
        )));
    }
    let root = clean(kubelet_root);
    if !clean(p).starts_with(&root) {
        v.push(
            ENDPOINT_INSIDE_ROOT
                .violated(format!("endpoint {endpoint} is not inside the kubelet root {}", root.display())),
        );
    }
    v
}

/// The DRAPlugin service the kubelet would use: the first of the plugin's
/// list that it speaks (the plugin's order decides, not the kubelet's).
pub fn chosen_service(supported: &[String]) -> Option<&'static str> {
    supported.iter().find_map(|s| KUBELET_DRA_SERVICES.iter().find(|k| **k == s).copied())
}

/// The health service the kubelet would open: v1 if advertised, else v1alpha1.
pub fn chosen_health(supported: &[String]) -> Option<&'static str> {
    KUBELET_HEALTH_SERVICES.iter().find(|k| supported.iter().any(|s| s == *k)).copied()
}

/// Every registration rule for a GetInfo answer.
pub fn info_violations(info: &PluginInfo, kubelet_root: &Path) -> Vec<Violation> {
    let mut v = Vec::new();
    if info.r#type != PLUGIN_TYPE {
        v.push(TYPE.violated(format!("type is {}, not {PLUGIN_TYPE}", crate::core::text::quote(&info.r#type))));
    }
    if let Some(p) = driver_name_problem(&info.name) {
        v.push(DRIVER_NAME.violated(p));
    }
    v.extend(endpoint_violations(&info.endpoint, kubelet_root));
    v.extend(version_violations(&info.supported_versions));
    v
}

/// The supported_versions rules.
pub fn version_violations(supported: &[String]) -> Vec<Violation> {
    match chosen_service(supported) {
        None if supported.is_empty() => vec![VERSIONS.violated("supported_versions is empty")],
        None => vec![VERSIONS.violated(format!(
            "none of {} is a DRAPlugin service the kubelet speaks ({})",
            crate::core::text::id_list(supported),
            KUBELET_DRA_SERVICES.join(", ")
        ))],
        Some(DRA_V1BETA1) if supported.iter().any(|s| s == DRA_V1) => vec![VERSION_ORDER
            .violated("v1beta1.DRAPlugin is listed before v1.DRAPlugin: the kubelet uses the deprecated v1beta1")],
        Some(DRA_V1BETA1) => {
            vec![VERSION_ORDER.violated("only v1beta1.DRAPlugin is offered (deprecated since 1.34)")]
        }
        Some(_) => vec![],
    }
}

/// Every rule for a NodePrepareResources answer to claims with `requested` UIDs.
pub fn prepare_violations(requested: &[String], resp: &NodePrepareResourcesResponse) -> Vec<Violation> {
    let mut v = completeness("NodePrepareResources", requested, resp.claims.keys());
    for (uid, r) in &resp.claims {
        if !r.error.is_empty() {
            continue;
        }
        for d in &r.devices {
            if d.pool_name.is_empty() || d.device_name.is_empty() {
                v.push(DEVICE_FIELDS.violated(format!(
                    "claim {uid}: device {}/{} lacks its pool_name or device_name",
                    crate::core::text::quote(&d.pool_name),
                    crate::core::text::quote(&d.device_name)
                )));
            }
            for id in d.cdi_device_ids.iter().filter(|id| !super::cdi::name_ok(id)) {
                v.push(
                    CDI_ID
                        .violated(format!("claim {uid}: {} is not a qualified CDI name", crate::core::text::quote(id))),
                );
            }
        }
    }
    v
}

/// Every rule for a NodeUnprepareResources answer.
pub fn unprepare_violations(requested: &[String], resp: &NodeUnprepareResourcesResponse) -> Vec<Violation> {
    completeness("NodeUnprepareResources", requested, resp.claims.keys())
}

fn completeness<'a>(call: &str, requested: &[String], answered: impl Iterator<Item = &'a String>) -> Vec<Violation> {
    let answered: BTreeSet<&String> = answered.collect();
    let asked: BTreeSet<&String> = requested.iter().collect();
    let mut v = Vec::new();
    let missing: Vec<&String> = asked.difference(&answered).copied().collect();
    if !missing.is_empty() {
        v.push(
            ANSWER_COMPLETE
                .violated(format!("{call} answered no entry for claim(s) {}", crate::core::text::id_list(&missing))),
        );
    }
    let extra: Vec<&String> = answered.difference(&asked).copied().collect();
    if !extra.is_empty() {
        v.push(
            ANSWER_EXTRA
                .violated(format!("{call} answered claim(s) not asked for: {}", crate::core::text::id_list(&extra))),
        );
    }
    v
}

/// Whether two answers to the same request are the same (device order within a claim aside).
pub fn same_answer(a: &NodePrepareResourcesResponse, b: &NodePrepareResourcesResponse) -> bool {
    let norm = |r: &NodePrepareResourcesResponse| {
        r.claims
            .iter()
            .map(|(uid, c)| {
                let mut d: Vec<String> = c
                    .devices
                    .iter()
                    .map(|d| {
                        format!(
                            "{}|{}|{}|{}",
                            d.pool_name,
                            d.device_name,
                            d.request_names.join(","),
                            d.cdi_device_ids.join(",")
                        )
                    })
                    .collect();
                d.sort();
                (uid.clone(), c.error.clone(), d)
            })
            .collect::<Vec<_>>()
    };
    norm(a) == norm(b)
}

/// Every rule for one health snapshot; `now` in Unix seconds.
pub fn health_violations(devices: &[DeviceHealth], now: i64) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let (pool, name) =
            d.device.as_ref().map(|x| (x.pool_name.as_str(), x.device_name.as_str())).unwrap_or(("", ""));
        if pool.is_empty() || name.is_empty() {
            v.push(HEALTH_DEVICE.violated(format!("devices[{i}] does not name its pool and device")));
        } else if !seen.insert((pool, name)) {
            v.push(HEALTH_DEVICE.violated(format!("{pool}/{name} is listed twice")));
        }
        let chars = d.message.chars().count();
        if chars > MAX_HEALTH_MESSAGE {
            v.push(
                HEALTH_MESSAGE
                    .violated(format!("{pool}/{name}: message is {chars} characters (at most {MAX_HEALTH_MESSAGE})")),
            );
        }
        if d.last_updated_time <= 0 {
            v.push(HEALTH_TIME.violated(format!("{pool}/{name}: last_updated_time is not set")));
        } else if d.last_updated_time > now + 60 {
            v.push(HEALTH_TIME.violated(format!("{pool}/{name}: last_updated_time is in the future")));
        }
    }
    v
}

/// A health value as a word.
pub fn health_word(h: i32) -> &'static str {
    match HealthStatus::try_from(h) {
        Ok(HealthStatus::Healthy) => "Healthy",
        Ok(HealthStatus::Unhealthy) => "Unhealthy",
        _ => "Unknown",
    }
}

/// Parse a health word (case-insensitive).
pub fn parse_health(s: &str) -> Option<HealthStatus> {
    match s.to_ascii_lowercase().as_str() {
        "healthy" => Some(HealthStatus::Healthy),
        "unhealthy" => Some(HealthStatus::Unhealthy),
        "unknown" => Some(HealthStatus::Unknown),
        _ => None,
    }
}

/// `uid` as a CDI device-name-safe and file-name-safe word.
pub fn safe_word(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::dra_health_v1::DeviceIdentifier;
    use crate::api::dra_v1::{Device, NodePrepareResourceResponse};

    fn info(t: &str, name: &str, ep: &str, v: &[&str]) -> PluginInfo {
        PluginInfo {
            r#type: t.into(),
            name: name.into(),
            endpoint: ep.into(),
            supported_versions: v.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ids(v: &[Violation]) -> Vec<&'static str> {
        v.iter().map(|x| x.rule.id).collect()
    }

    #[test]
    fn registration_rules_match_the_kubelets_checks() {
        let root = Path::new("/var/lib/kubelet");
        let good = info("DRAPlugin", "gpu.example.com", "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", &[DRA_V1]);
        assert!(info_violations(&good, root).is_empty());
        // The kubelet's own examples (registration_test.go): accepted layouts.
        for ep in ["/var/lib/kubelet/plugins_registry/x-common.sock", "/var/lib/kubelet/plugins/./x/../dra.sock"] {
            assert!(endpoint_violations(ep, root).is_empty(), "{ep}");
        }
        let cases: &[(PluginInfo, &str)] = &[
            (info("DevicePlugin", "gpu.example.com", &good.endpoint, &[DRA_V1]), "plugin-type"),
            (info("DRAPlugin", "", &good.endpoint, &[DRA_V1]), "driver-name"),
            (info("DRAPlugin", "../evil", &good.endpoint, &[DRA_V1]), "driver-name"),
            (info("DRAPlugin", "evil driver", &good.endpoint, &[DRA_V1]), "driver-name"),
            (info("DRAPlugin", &"a".repeat(64), &good.endpoint, &[DRA_V1]), "driver-name"),
            (info("DRAPlugin", "g.example", "", &[DRA_V1]), "endpoint-absolute"),
            (info("DRAPlugin", "g.example", "plugin.sock", &[DRA_V1]), "endpoint-absolute"),
            (info("DRAPlugin", "g.example", "/run/other/s.sock", &[DRA_V1]), "endpoint-inside-root"),
            (info("DRAPlugin", "g.example", "/var/lib/kubelet/../../etc/passwd", &[DRA_V1]), "endpoint-inside-root"),
            (
                info("DRAPlugin", "g.example", &format!("/var/lib/kubelet/plugins/{}.sock", "x".repeat(90)), &[DRA_V1]),
                "endpoint-length",
            ),
            (info("DRAPlugin", "g.example", &good.endpoint, &[]), "supported-versions"),
            (info("DRAPlugin", "g.example", &good.endpoint, &["v1alpha4.Node", HEALTH_V1]), "supported-versions"),
            (info("DRAPlugin", "g.example", &good.endpoint, &[DRA_V1BETA1, DRA_V1]), "version-order"),
        ];
        for (i, want) in cases {
            assert_eq!(ids(&info_violations(i, root)), [*want], "{i:?}");
        }
        // /var/lib/kubeletX is not inside /var/lib/kubelet.
        assert_eq!(ids(&endpoint_violations("/var/lib/kubeletX/dra.sock", root)), ["endpoint-inside-root"]);
    }

    #[test]
    fn service_choice_follows_the_plugins_order_and_health_prefers_v1() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(chosen_service(&s(&[DRA_V1BETA1, DRA_V1])), Some(DRA_V1BETA1));
        assert_eq!(chosen_service(&s(&["x", DRA_V1])), Some(DRA_V1));
        assert_eq!(chosen_service(&s(&[HEALTH_V1])), None);
        assert_eq!(chosen_health(&s(&[DRA_V1, HEALTH_V1ALPHA1, HEALTH_V1])), Some(HEALTH_V1));
        assert_eq!(chosen_health(&s(&[DRA_V1, HEALTH_V1ALPHA1])), Some(HEALTH_V1ALPHA1));
        assert_eq!(chosen_health(&s(&[DRA_V1])), None);
    }

    #[test]
    fn prepare_answers_are_complete_and_well_formed() {
        let dev = |pool: &str, name: &str, cdi: &[&str]| Device {
            request_names: vec![],
            pool_name: pool.into(),
            device_name: name.into(),
            cdi_device_ids: cdi.iter().map(|s| s.to_string()).collect(),
            share_id: None,
        };
        let mut resp = NodePrepareResourcesResponse::default();
        resp.claims.insert(
            "u1".into(),
            NodePrepareResourceResponse {
                devices: vec![dev("p", "d0", &["k8s.g.example/claim=u1-d0"])],
                error: String::new(),
            },
        );
        let req = vec!["u1".to_string()];
        assert!(prepare_violations(&req, &resp).is_empty());
        assert_eq!(ids(&prepare_violations(&["u1".into(), "u2".into()], &resp)), ["answer-complete"]);
        assert_eq!(ids(&prepare_violations(&[], &resp)), ["answer-extra"]);
        resp.claims.insert(
            "u1".into(),
            NodePrepareResourceResponse { devices: vec![dev("", "d0", &["nokind"])], error: String::new() },
        );
        assert_eq!(ids(&prepare_violations(&req, &resp)), ["device-fields", "cdi-id"]);
        // A failed claim's devices are ignored, as the kubelet does.
        resp.claims.get_mut("u1").unwrap().error = "boom".into();
        assert!(prepare_violations(&req, &resp).is_empty());
        assert!(same_answer(&resp, &resp.clone()));
        assert!(!same_answer(&resp, &NodePrepareResourcesResponse::default()));
    }

    #[test]
    fn health_snapshots_name_devices_fit_and_are_timed() {
        let h = |pool: &str, name: &str, msg: String, t: i64| DeviceHealth {
            device: Some(DeviceIdentifier { pool_name: pool.into(), device_name: name.into() }),
            health: HealthStatus::Healthy as i32,
            last_updated_time: t,
            health_check_timeout_seconds: 0,
            message: msg,
        };
        let now = 1_800_000_000;
        assert!(health_violations(&[h("p", "d0", "ok".into(), now)], now).is_empty());
        let bad = [
            h("", "d0", String::new(), now),
            h("p", "d1", "x".repeat(1025), now),
            h("p", "d2", String::new(), 0),
            h("p", "d3", String::new(), now + 3600),
            h("p", "d3", String::new(), now),
        ];
        assert_eq!(
            ids(&health_violations(&bad, now)),
            ["health-device", "health-message", "health-time", "health-time", "health-device"]
        );
        assert_eq!(health_word(2), "Unhealthy");
        assert_eq!(parse_health("HEALTHY"), Some(HealthStatus::Healthy));
        assert_eq!(parse_health("ok"), None);
        assert!(driver_name_problem("gpu.example.com").is_none());
        assert!(super::super::cdi::name_ok("k8s.gpu.example.com/claim=abc-0"));
        assert!(!super::super::cdi::name_ok("gpu=0"));
    }
}
