//! The scenarios: stable IDs, what each checks, the rule and where the rule
//! comes from. Pure data; `run.rs` holds the code of each. Scenarios run in
//! sessions: each session starts from a fresh node tree, kubelet and plugin
//! process, so a misbehaviour that one scenario provokes cannot fail another.

/// A fresh environment a group of scenarios runs in, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Session {
    /// The kubelet exists; the plugin starts, registers and is questioned.
    Basic,
    /// The plugin starts before the kubelet.
    StartOrder,
    /// The kubelet restarts under the plugin.
    KubeletRestart,
    /// The plugin is stopped with SIGTERM and started again.
    PluginRestart,
    /// Pods through the mock kubelet.
    EndToEnd,
    /// A user-supplied health trigger.
    Health,
}

impl Session {
    /// Every session, in run order.
    pub const ALL: [Session; 6] = [
        Session::Basic,
        Session::StartOrder,
        Session::KubeletRestart,
        Session::PluginRestart,
        Session::EndToEnd,
        Session::Health,
    ];
}

/// One scenario's description.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Scenario {
    /// Stable ID (never reused for another check).
    pub id: &'static str,
    /// The group shown in reports (JUnit testsuite).
    pub group: &'static str,
    /// One line: what a passing plugin does.
    pub title: &'static str,
    /// The rule it checks.
    pub rule: &'static str,
    /// Where the rule comes from.
    pub source: &'static str,
    /// The session it runs in.
    #[serde(skip)]
    pub session: Session,
    /// Needs control of the plugin process and the kubelet (not possible with `--socket`).
    #[serde(skip)]
    pub needs_control: bool,
}

const PROTO: &str = "shared/protocol.md";
const DOCS: &str = "seeds/k8s-docs-device-plugins.md";
const DESIGN: &str = "seeds/device-plugin-design-proposal.md";
const E2E: &str = "kubernetes test/e2e_node/device_plugin_test.go";
const FAILURES: &str = "kubernetes test/e2e_node/device_plugin_failures_test.go";

macro_rules! sc {
    ($id:literal, $group:literal, $session:ident, $control:literal, $title:literal, $rule:literal, $source:expr) => {
        Scenario {
            id: $id,
            group: $group,
            title: $title,
            rule: $rule,
            source: $source,
            session: Session::$session,
            needs_control: $control,
        }
    };
}

/// Every scenario, in run order.
pub const SCENARIOS: &[Scenario] = &[
    sc!("REG-001", "registration", Basic, true, "registers within 10s of starting",
        "a plugin calls Register on kubelet.sock (or serves a plugin-watcher socket) soon after it starts",
        "seeds/k8s-docs-device-plugins.md (device plugin registration); device_plugin_test.go waits for the resource to appear"),
    sc!("REG-002", "registration", Basic, true, "asks for API version v1beta1",
        "RegisterRequest.version (or PluginInfo.supported_versions) is \"v1beta1\", the only version the kubelet supports",
        PROTO),
    sc!("REG-003", "registration", Basic, true, "registers a valid extended resource name",
        "the name contains '/', is not in kubernetes.io/, has a DNS-subdomain prefix and a name of at most 63 characters (and equals --resource when given)",
        PROTO),
    sc!("REG-004", "registration", Basic, true, "names an endpoint inside the plugin directory",
        "the endpoint is a plain socket file name in the device-plugin directory and that socket exists",
        PROTO),
    sc!("REG-005", "registration", Basic, true, "serves before registering (the dial-back works)",
        "inside Register the kubelet dials the endpoint and calls GetDevicePluginOptions; the plugin must already serve",
        "shared/protocol.md; device_plugin_failures_test.go (a plugin that cannot be dialled back fails registration)"),
    sc!("REG-006", "registration", Basic, true, "sends the options GetDevicePluginOptions returns",
        "the options in RegisterRequest equal GetDevicePluginOptions (the kubelet trusts the latter)",
        PROTO),
    sc!("REG-007", "registration", Basic, true, "leaves kubelet.sock and other plugins' sockets alone at start",
        "the plugin directory is shared: a plugin creates and removes only its own socket",
        "seeds/device-plugin-design-proposal.md (socket per plugin in /var/lib/kubelet/device-plugins)"),
    sc!("REG-008", "registration", Basic, true, "answers the plugin watcher (GetInfo, NotifyRegistrationStatus)",
        "with the plugin watcher, GetInfo returns type DevicePlugin, the resource name, an endpoint in the plugin directory and v1beta1; NotifyRegistrationStatus is accepted",
        "shared/protocol.md (pluginregistration/v1)"),
    sc!("LAW-001", "listandwatch", Basic, false, "sends a first snapshot within 5s",
        "ListAndWatch sends the full device list right away; the kubelet has no devices until it does (an empty list first is a WARN; devices later than 5s, or none, a FAIL)",
        "seeds/device-plugin-design-proposal.md; kubernetes pkg/kubelet/cm/devicemanager/manager.go (genericDeviceUpdateCallback replaces the device set with each message)"),
    sc!("LAW-002", "listandwatch", Basic, false, "sends unique, non-empty, printable device IDs",
        "device IDs are unique, non-empty, printable without spaces, at most 63 characters",
        "shared/protocol.md; seeds/device-plugin-design-proposal.md"),
    sc!("LAW-003", "listandwatch", Basic, false, "uses exactly \"Healthy\" and \"Unhealthy\"",
        "only the exact string Healthy counts as healthy; anything else is unhealthy",
        PROTO),
    sc!("LAW-004", "listandwatch", Basic, false, "keeps a snapshot under the kubelet's 4 MiB limit",
        "the kubelet receives at most 4 MiB per message; a larger snapshot fails the stream (kubernetes#109304)",
        PROTO),
    sc!("LAW-005", "listandwatch", Basic, false, "reports well-formed topology",
        "Device.topology, when set, lists at least one NUMA node, none negative, none twice",
        "seeds/kep-3573-device-manager.md; shared/protocol.md"),
    sc!("LAW-006", "listandwatch", Basic, false, "gives a second stream a full snapshot",
        "every ListAndWatch stream starts with the full device list, also while another stream is open",
        DESIGN),
    sc!("LAW-008", "listandwatch", Basic, true, "keeps the kubelet's stream open",
        "a ListAndWatch stream lives as long as the plugin serves: the kubelet does not open another, and when it ends every device turns unhealthy",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (Run returns on the stream's end, \"ListAndWatch ended unexpectedly\")"),
    sc!("ALLOC-001", "allocate", Basic, false, "allocates every healthy device on its own",
        "Allocate succeeds for each advertised healthy device, with one container response",
        E2E),
    sc!("ALLOC-002", "allocate", Basic, false, "answers several containers in one request",
        "one ContainerAllocateResponse per ContainerAllocateRequest, in order",
        PROTO),
    sc!("ALLOC-003", "allocate", Basic, false, "gives a container something to reach its device",
        "an Allocate answer sets envs, mounts, device nodes, annotations or CDI devices; an empty answer gives the container nothing",
        DOCS),
    sc!("ALLOC-004", "allocate", Basic, false, "rejects an unknown device ID",
        "Allocate for an ID the plugin never advertised is an error, not a success",
        FAILURES),
    sc!("ALLOC-005", "allocate", Basic, false, "serves concurrent Allocate calls from several pods",
        "the kubelet admits pods concurrently; parallel Allocate calls all succeed",
        E2E),
    sc!("PREF-001", "preferred", Basic, false, "GetPreferredAllocation answers the requested size",
        "for every size from 1 to all devices, exactly allocation_size distinct IDs (when advertised)",
        PROTO),
    sc!("PREF-002", "preferred", Basic, false, "GetPreferredAllocation picks only available devices",
        "every preferred ID is one of available_deviceIDs (when advertised)",
        PROTO),
    sc!("PREF-003", "preferred", Basic, false, "GetPreferredAllocation keeps the must-include devices",
        "every must_include_deviceID is in the answer (when advertised)",
        PROTO),
    sc!("PRE-001", "prestart", Basic, false, "PreStartContainer answers for allocated devices",
        "when pre_start_required, PreStartContainer succeeds within the kubelet's 30s timeout",
        PROTO),
    sc!("LAW-007", "listandwatch", Basic, false, "survives the kubelet cancelling a stream",
        "after a stream is cancelled, a new stream still gets a full snapshot and the plugin keeps serving",
        "shared/protocol.md (the kubelet ends streams on restart and re-registration)"),
    sc!("ORDER-001", "start-order", StartOrder, true, "waits for kubelet.sock and registers once it appears",
        "a plugin started before the kubelet keeps running and registers when kubelet.sock appears",
        "seeds/k8s-docs-device-plugins.md; kubernetes#92958"),
    sc!("KRES-001", "kubelet-restart", KubeletRestart, true, "re-registers within 5s of a kubelet restart",
        "the kubelet deletes every socket and re-creates kubelet.sock; plugins must notice and register again",
        "seeds/k8s-docs-device-plugins.md; device_plugin_test.go (re-registration after kubelet restart); kubernetes#92958, #131013"),
    sc!("KRES-002", "kubelet-restart", KubeletRestart, true, "keeps the same device IDs across a kubelet restart",
        "device IDs are stable: pods hold them in the kubelet's checkpoint",
        E2E),
    sc!("KRES-003", "kubelet-restart", KubeletRestart, true, "leaves one live registration after quick restarts",
        "after several kubelet restarts in quick succession, the plugin registers once with the last kubelet and its endpoint answers",
        "shared/protocol.md (a second registration replaces the first)"),
    sc!("PRES-001", "plugin-restart", PluginRestart, true, "exits within 10s of SIGTERM",
        "a plugin stops promptly on SIGTERM (pods are deleted with a grace period)",
        DOCS),
    sc!("PRES-002", "plugin-restart", PluginRestart, true, "removes its own socket when it exits",
        "a stale socket in the plugin directory misleads the kubelet and tools",
        DESIGN),
    sc!("PRES-003", "plugin-restart", PluginRestart, true, "never removes kubelet.sock or another plugin's socket",
        "the plugin directory is shared; only the plugin's own socket is its to delete",
        DESIGN),
    sc!("PRES-004", "plugin-restart", PluginRestart, true, "keeps the device IDs of allocated devices across a restart",
        "after a plugin restart the devices already allocated to pods keep their IDs",
        "device_plugin_test.go (assignments kept after the device plugin re-registers)"),
    sc!("E2E-001", "end-to-end", EndToEnd, true, "a pod gets the devices the plugin allocated",
        "a pod admitted through the kubelet holds devices of the plugin, shown by PodResources",
        "device_plugin_test.go (PodResources shows the pod's devices)"),
    sc!("E2E-002", "end-to-end", EndToEnd, true, "deleting a pod frees its devices",
        "after a pod is deleted, another pod can take all devices",
        E2E),
    sc!("KRES-004", "kubelet-restart", EndToEnd, true, "pods keep their devices across a kubelet restart",
        "after a kubelet restart and re-registration, a pod keeps its devices and the plugin still advertises them",
        "device_plugin_test.go (Keeps device plugin assignments across pod and kubelet restarts)"),
    sc!("KRES-005", "kubelet-restart", EndToEnd, true, "pods admitted after a kubelet restart get devices once the plugin is back",
        "right after a restart the checkpoint's resources have no healthy device: a pod admitted then fails as UnexpectedAdmissionError (kubelets since kubernetes#114640); once the plugin re-registers, pods get devices",
        "kubernetes#124345, #130145; device_plugin_test.go (UnexpectedAdmissionError after a node or kubelet restart)"),
    sc!("ROLL-001", "rolling-update", EndToEnd, true, "a second instance keeps the resource allocatable after the first exits",
        "during a DaemonSet maxSurge update a second instance registers, then the first exits; kubelets up to 1.36 then disconnect the second (kubernetes#121994) and a plugin must register again when its stream is closed",
        "kubernetes#121994, #127803, #135437"),
    sc!("HEALTH-001", "health", Health, true, "an unhealthy device leaves the kubelet's allocatable",
        "after --health-trigger, the kubelet's stream gets a snapshot with the device Unhealthy within --health-timeout (10s), also when another stream was opened before it",
        "device_plugin_failures_test.go (unhealthy devices); shared/protocol.md"),
];

/// A scenario by ID.
pub fn find(id: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_sessions_in_order() {
        let mut ids = std::collections::HashSet::new();
        for s in SCENARIOS {
            assert!(ids.insert(s.id), "{} twice", s.id);
            assert!(!s.title.is_empty() && !s.rule.is_empty() && !s.source.is_empty());
        }
        assert!(SCENARIOS.windows(2).all(|w| w[0].session <= w[1].session), "sessions must be contiguous");
        assert!(find("KRES-004").is_some() && find("NOPE").is_none());
    }
}
