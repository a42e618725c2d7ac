//! Scenarios as a table of values: stable ID, group, title, rule, source
//! and the function that runs it. This file holds the [`Scenario`] type of
//! both suites and the device-plugin table; the DRA driver's table
//! (`dra::SCENARIOS`) is of the same type and runs on the same engine. The
//! runner, `--focus` / `--skip`, the reports (table, JSON, JUnit) and the
//! scenario tables of docs/test.md all come from them. Scenarios run in sessions:
//! each session starts from a fresh node tree, kubelet and plugin process,
//! so a misbehaviour that one scenario provokes cannot fail another.

use super::dra::session::Sess as DraSess;
pub use super::options::Session;
use super::scenarios::{
    allocate as alloc, end_to_end as e2e, health, kubelet_restart as kres, listandwatch as law, plugin_restart as pres,
    registration as reg, start_order, Basic, Env, Health,
};
use super::Outcome;

/// A scenario's code: a plain function of its session's state, by the
/// state it takes. Which state a session has is fixed ([`Run::fits`]).
#[derive(Clone, Copy)]
pub(crate) enum Run {
    /// A device-plugin scenario of the basic session.
    Basic(for<'a, 'b> fn(&'a mut Basic<'b>) -> Fut<'a>),
    /// A device-plugin scenario that needs only the session's environment.
    Env(for<'a, 'b> fn(&'a mut Env<'b>) -> Fut<'a>),
    /// The device-plugin health scenario.
    Health(for<'a, 'b> fn(&'a mut Health<'b>) -> Fut<'a>),
    /// A DRA driver scenario.
    Dra(for<'a> fn(&'a mut DraSess) -> Fut<'a>),
}

/// A running scenario.
pub(crate) type Fut<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + 'a>>;

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Run::Basic(_) => "Run::Basic",
            Run::Env(_) => "Run::Env",
            Run::Health(_) => "Run::Health",
            Run::Dra(_) => "Run::Dra",
        })
    }
}

/// One scenario: what it checks, the rule and where the rule comes from,
/// the session it runs in and its code.
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
    /// Where the rule comes from (an upstream file, issue or page).
    pub source: &'static str,
    /// The session it runs in.
    #[serde(skip)]
    pub session: Session,
    /// Needs control of the plugin process and the kubelet (not possible with `--socket`).
    #[serde(skip)]
    pub needs_control: bool,
    /// Needs `--health-trigger` (skipped without).
    #[serde(skip)]
    pub needs_trigger: bool,
    /// Slow (seconds): run only when `--focus` selects it (`--focus group:slow`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
    /// Its code.
    #[serde(skip)]
    pub(crate) run: Run,
}

const E2E: &str = "kubernetes test/e2e_node/device_plugin_test.go";
const FAILURES: &str = "kubernetes test/e2e_node/device_plugin_failures_test.go";

/// A device-plugin scenario's code, for the state its session has.
macro_rules! run_in {
    (Basic, $f:path) => {
        Run::Basic(|s| Box::pin($f(s)))
    };
    (Health, $f:path) => {
        Run::Health(|s| Box::pin($f(s)))
    };
    ($other:ident, $f:path) => {
        Run::Env(|s| Box::pin($f(s)))
    };
}

macro_rules! sc {
    ($id:literal, $group:literal, $session:ident, $control:literal, $run:path, $title:literal, $rule:literal, $source:expr) => {
        Scenario {
            id: $id,
            group: $group,
            title: $title,
            rule: $rule,
            source: $source,
            session: Session::$session,
            needs_control: $control,
            needs_trigger: false,
            slow: false,
            run: run_in!($session, $run),
        }
    };
}

/// Every scenario, in run order.
pub const SCENARIOS: &[Scenario] = &[
    sc!("REG-001", "registration", Basic, true, reg::reg_within,  "registers within 10s of starting",
        "a plugin calls Register on kubelet.sock (or serves a plugin-watcher socket) soon after it starts",
        "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/ (device plugin registration); kubernetes test/e2e_node/device_plugin_test.go waits for the resource to appear"),
    sc!("REG-002", "registration", Basic, true, reg::reg_version,  "asks for API version v1beta1",
        "RegisterRequest.version (or PluginInfo.supported_versions) is \"v1beta1\", the only version the kubelet supports",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register: isVersionCompatibleWithPlugin)"),
    sc!("REG-003", "registration", Basic, true, reg::reg_resource,  "registers a valid extended resource name",
        "the name contains '/', is not in kubernetes.io/, has a DNS-subdomain prefix and a name of at most 63 characters (and equals --resource when given)",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register: v1helper.IsExtendedResourceName)"),
    sc!("REG-004", "registration", Basic, true, reg::reg_endpoint,  "names an endpoint inside the plugin directory",
        "the endpoint is a plain socket file name in the device-plugin directory and that socket exists",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register joins the endpoint to the plugin directory unchecked)"),
    sc!("REG-005", "registration", Basic, true, reg::reg_dial_back,  "serves before registering (the dial-back works)",
        "inside Register the kubelet dials the endpoint and calls GetDevicePluginOptions; the plugin must already serve",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (connectClient dials the plugin inside Register); kubernetes test/e2e_node/device_plugin_failures_test.go (a plugin that cannot be dialled back fails registration)"),
    sc!("REG-006", "registration", Basic, true, reg::reg_options,  "sends the options GetDevicePluginOptions returns",
        "the options in RegisterRequest equal GetDevicePluginOptions (the kubelet trusts the latter)",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (Connect reads GetDevicePluginOptions)"),
    sc!("REG-007", "registration", Basic, true, reg::reg_keeps_sockets,  "leaves kubelet.sock and other plugins' sockets alone at start",
        "the plugin directory is shared: a plugin creates and removes only its own socket",
        "https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md (socket per plugin in /var/lib/kubelet/device-plugins)"),
    sc!("REG-008", "registration", Basic, true, reg::reg_watcher,  "answers the plugin watcher (GetInfo, NotifyRegistrationStatus)",
        "with the plugin watcher, GetInfo returns type DevicePlugin, the resource name, an endpoint in the plugin directory and v1beta1; NotifyRegistrationStatus is accepted",
        "kubernetes pkg/kubelet/pluginmanager/pluginwatcher/plugin_watcher.go; kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go (ValidatePlugin)"),
    sc!("LAW-001", "listandwatch", Basic, false, law::law_first,  "sends a first snapshot within 5s",
        "ListAndWatch sends the full device list right away; the kubelet has no devices until it does (an empty list first is a WARN; devices later than 5s, or none, a FAIL)",
        "https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md; kubernetes pkg/kubelet/cm/devicemanager/manager.go (genericDeviceUpdateCallback replaces the device set with each message)"),
    sc!("LAW-002", "listandwatch", Basic, false, law::law_ids,  "sends unique, non-empty, printable device IDs",
        "device IDs are unique, non-empty, printable without spaces, at most 63 characters",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto (Device.ID: at most 63 characters); https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md"),
    sc!("LAW-003", "listandwatch", Basic, false, law::law_health,  "uses exactly \"Healthy\" and \"Unhealthy\"",
        "only the exact string Healthy counts as healthy; anything else is unhealthy",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go (Healthy, Unhealthy); kubernetes pkg/kubelet/cm/devicemanager/manager.go (only Healthy is allocatable)"),
    sc!("LAW-004", "listandwatch", Basic, false, law::law_size,  "keeps a snapshot under the kubelet's 4 MiB limit",
        "the kubelet receives at most 4 MiB per message; a larger snapshot fails the stream (kubernetes#109304)",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (the stream is read with gRPC's default 4 MiB limit)"),
    sc!("LAW-005", "listandwatch", Basic, false, law::law_topology,  "reports well-formed topology",
        "Device.topology, when set, lists at least one NUMA node, none negative, none twice",
        "https://github.com/kubernetes/enhancements/tree/master/keps/sig-node/3573-device-plugin; kubernetes pkg/kubelet/cm/devicemanager/topology_hints.go"),
    sc!("LAW-006", "listandwatch", Basic, false, law::law_second,  "gives a second stream a full snapshot",
        "every ListAndWatch stream starts with the full device list, also while another stream is open",
        "https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md"),
    sc!("LAW-008", "listandwatch", Basic, true, law::law_open,  "keeps the kubelet's stream open",
        "a ListAndWatch stream lives as long as the plugin serves: the kubelet does not open another, and when it ends every device turns unhealthy",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (Run returns on the stream's end, \"ListAndWatch ended unexpectedly\")"),
    sc!("ALLOC-001", "allocate", Basic, false, alloc::alloc_each,  "allocates every healthy device on its own",
        "Allocate succeeds for each advertised healthy device, with one container response",
        E2E),
    sc!("ALLOC-002", "allocate", Basic, false, alloc::alloc_multi,  "answers several containers in one request",
        "one ContainerAllocateResponse per ContainerAllocateRequest, in order",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto (AllocateRequest.container_requests, AllocateResponse.container_responses)"),
    sc!("ALLOC-003", "allocate", Basic, false, alloc::alloc_not_empty,  "gives a container something to reach its device",
        "an Allocate answer sets envs, mounts, device nodes, annotations or CDI devices; an empty answer gives the container nothing",
        "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/"),
    sc!("ALLOC-004", "allocate", Basic, false, alloc::alloc_unknown,  "rejects an unknown device ID",
        "Allocate for an ID the plugin never advertised is an error, not a success",
        FAILURES),
    sc!("ALLOC-005", "allocate", Basic, false, alloc::alloc_concurrent,  "serves concurrent Allocate calls from several pods",
        "the kubelet admits pods concurrently; parallel Allocate calls all succeed",
        E2E),
    sc!("PREF-001", "preferred", Basic, false, alloc::pref_size,  "GetPreferredAllocation answers the requested size",
        "for every size from 1 to all devices, exactly allocation_size distinct IDs (when advertised)",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto (ContainerPreferredAllocationRequest.allocation_size); kubernetes pkg/kubelet/cm/devicemanager/manager.go (callGetPreferredAllocationIfAvailable)"),
    sc!("PREF-002", "preferred", Basic, false, alloc::pref_available,  "GetPreferredAllocation picks only available devices",
        "every preferred ID is one of available_deviceIDs (when advertised)",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto (available_deviceIDs); kubernetes pkg/kubelet/cm/devicemanager/manager.go (filterByAffinity / callGetPreferredAllocationIfAvailable)"),
    sc!("PREF-003", "preferred", Basic, false, alloc::pref_must_include,  "GetPreferredAllocation keeps the must-include devices",
        "every must_include_deviceID is in the answer (when advertised)",
        "kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto (must_include_deviceIDs); kubernetes pkg/kubelet/cm/devicemanager/manager.go (callGetPreferredAllocationIfAvailable)"),
    sc!("PRE-001", "prestart", Basic, false, alloc::pre_start,  "PreStartContainer answers for allocated devices",
        "when pre_start_required, PreStartContainer succeeds within the kubelet's 30s timeout",
        "kubernetes pkg/kubelet/cm/devicemanager/manager.go (callPreStartContainerIfNeeded); kubernetes staging/src/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go (KubeletPreStartContainerRPCTimeoutInSecs = 30)"),
    sc!("LAW-007", "listandwatch", Basic, false, law::law_cancel,  "survives the kubelet cancelling a stream",
        "after a stream is cancelled, a new stream still gets a full snapshot and the plugin keeps serving",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (the kubelet ends streams on restart and re-registration)"),
    sc!("REG-009", "registration", Basic, true, reg::reg_once,  "registers once per kubelet, never from a socket it still streams from",
        "no Register from the socket of an instance whose ListAndWatch stream the kubelet still reads: since 1.37 it is refused (\"device plugin already connected\") and the kubelet stops following that stream's end; up to 1.36 it replaces the endpoint and leaves the first stream open, whose end later disconnects the new one",
        "kubernetes pkg/kubelet/cm/devicemanager/manager.go (PluginConnected: device plugin already connected); kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go (connectClient deregisters the socket's clients when Connect fails); kubernetes#139338, #121994"),
    sc!("ORDER-001", "start-order", StartOrder, true, start_order::start_order,  "waits for kubelet.sock and registers once it appears",
        "a plugin started before the kubelet keeps running and registers when kubelet.sock appears",
        "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/; kubernetes#92958"),
    sc!("KRES-001", "kubelet-restart", KubeletRestart, true, kres::kres_reregister,  "re-registers after a kubelet restart",
        "the kubelet deletes every socket and re-creates kubelet.sock; plugins must notice and register again, within 30 s (upstream's e2e: the resource is back within 30 s; later than 5 s warns: pods needing it are rejected meanwhile)",
        "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/; kubernetes test/e2e_node/device_plugin_test.go (re-registration after kubelet restart); kubernetes#92958, #131013"),
    sc!("KRES-002", "kubelet-restart", KubeletRestart, true, kres::kres_same_ids,  "keeps the same device IDs across a kubelet restart",
        "device IDs are stable: pods hold them in the kubelet's checkpoint",
        E2E),
    sc!("KRES-003", "kubelet-restart", KubeletRestart, true, kres::kres_repeated,  "leaves one live registration after quick restarts",
        "after several kubelet restarts in quick succession, the plugin registers once with the last kubelet and its endpoint answers",
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (a second registration of a resource replaces the first)"),
    sc!("PRES-001", "plugin-restart", PluginRestart, true, pres::pres_exit,  "exits within 10s of SIGTERM",
        "a plugin stops promptly on SIGTERM (pods are deleted with a grace period)",
        "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/"),
    sc!("PRES-002", "plugin-restart", PluginRestart, true, pres::pres_own_socket,  "removes its own socket when it exits",
        "a stale socket in the plugin directory misleads the kubelet and tools",
        "https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md"),
    sc!("PRES-003", "plugin-restart", PluginRestart, true, pres::pres_others,  "never removes kubelet.sock or another plugin's socket",
        "the plugin directory is shared; only the plugin's own socket is its to delete",
        "https://github.com/kubernetes/design-proposals-archive/blob/main/resource-management/device-plugin.md"),
    sc!("PRES-004", "plugin-restart", PluginRestart, true, pres::pres_same_ids,  "keeps the device IDs of allocated devices across a restart",
        "after a plugin restart the devices already allocated to pods keep their IDs",
        "kubernetes test/e2e_node/device_plugin_test.go (assignments kept after the device plugin re-registers)"),
    sc!("E2E-001", "end-to-end", EndToEnd, true, e2e::e2e_pod,  "a pod gets the devices the plugin allocated",
        "a pod admitted through the kubelet holds devices of the plugin, shown by PodResources",
        "kubernetes test/e2e_node/device_plugin_test.go (PodResources shows the pod's devices)"),
    sc!("E2E-002", "end-to-end", EndToEnd, true, e2e::e2e_free,  "deleting a pod frees its devices",
        "after a pod is deleted, another pod can take all devices",
        E2E),
    sc!("KRES-004", "kubelet-restart", EndToEnd, true, kres::kres_pods_keep,  "pods keep their devices across a kubelet restart",
        "after a kubelet restart and re-registration, a pod keeps its devices and the plugin still advertises them",
        "kubernetes test/e2e_node/device_plugin_test.go (Keeps device plugin assignments across pod and kubelet restarts)"),
    sc!("KRES-005", "kubelet-restart", EndToEnd, true, kres::kres_admission_after_restart,  "pods admitted after a kubelet restart get devices once the plugin is back",
        "right after a restart the checkpoint's resources have no healthy device: a pod admitted then fails as UnexpectedAdmissionError (kubelets since kubernetes#114640); once the plugin re-registers, pods get devices",
        "kubernetes#124345, #130145; kubernetes test/e2e_node/device_plugin_test.go (UnexpectedAdmissionError after a node or kubelet restart)"),
    sc!("ROLL-001", "rolling-update", EndToEnd, true, e2e::rolling_update,  "a second instance keeps the resource allocatable after the first exits",
        "during a DaemonSet maxSurge update a second instance registers, then the first exits; kubelets up to 1.36 then disconnect the second (kubernetes#121994) and a plugin must register again when its stream is closed",
        "kubernetes#121994, #127803, #135437"),
    Scenario { needs_trigger: true, ..sc!("HEALTH-001", "health", Health, true, health::health, "an unhealthy device leaves the kubelet's allocatable",
        "after --health-trigger, the kubelet's stream gets a snapshot with the device Unhealthy within --health-timeout (10s), also when another stream was opened before it",
        "kubernetes test/e2e_node/device_plugin_failures_test.go (unhealthy devices); kubernetes pkg/kubelet/cm/devicemanager/manager.go (genericDeviceUpdateCallback)") },
];

/// Whether `--focus` / `--skip` select `s`: a slow scenario only when
/// `--focus` names it (by ID, group or title), so the default run stays quick (pure).
pub fn chosen(focus: Option<&super::filter::Pattern>, skip: Option<&super::filter::Pattern>, s: &Scenario) -> bool {
    let sel = |p: &super::filter::Pattern| p.selects(s.id, s.group, s.title);
    let focused = focus.is_some_and(sel);
    (focused || focus.is_none() && !s.slow) && !skip.is_some_and(sel)
}

/// A scenario by ID.
pub fn find(id: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.id == id)
}

/// The scenario table of docs/test.md for `table`: a header and one row per
/// scenario, in run order (pure; a test holds the page to it).
pub fn docs_table(table: &[Scenario]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("| ID | checks | rule | source |\n|---|---|---|---|\n");
    for s in table {
        out.push_str(&format!("| `{}` | {} | {} | {} |\n", s.id, cell(s.title), cell(s.rule), cell(s.source)));
    }
    out
}

impl Run {
    /// Whether this code runs on the state a session of `session` has
    /// (`dra`: in the DRA suite), as the engine sets it up.
    pub(crate) fn fits(self, session: Session, dra: bool) -> bool {
        match self {
            Run::Dra(_) => dra,
            Run::Basic(_) => !dra && session == Session::Basic,
            Run::Health(_) => !dra && session == Session::Health,
            Run::Env(_) => !dra && !matches!(session, Session::Basic | Session::Health),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::dra::SCENARIOS as DRA;

    #[test]
    fn ids_are_unique_and_sessions_in_order() {
        let mut ids = std::collections::HashSet::new();
        for s in SCENARIOS.iter().chain(DRA) {
            assert!(ids.insert(s.id), "{} twice", s.id);
            assert!(!s.title.is_empty() && !s.rule.is_empty() && !s.source.is_empty());
        }
        for table in [SCENARIOS, DRA] {
            assert!(table.windows(2).all(|w| w[0].session <= w[1].session), "tables list sessions in run order");
        }
        assert!(find("KRES-004").is_some() && find("NOPE").is_none());
    }

    #[test]
    fn every_scenario_runs_on_the_state_its_session_has() {
        for s in SCENARIOS {
            assert!(s.run.fits(s.session, false), "{}: {:?} in session {:?}", s.id, s.run, s.session);
        }
        for s in DRA {
            assert!(s.run.fits(s.session, true), "{}: {:?}", s.id, s.run);
        }
        // The check can fail: a DRA scenario is no device-plugin one, a health scenario no basic one.
        assert!(!DRA[0].run.fits(DRA[0].session, false));
        let health = SCENARIOS.iter().find(|s| s.needs_trigger).map(|s| s.run);
        assert!(health.is_some_and(|r| !r.fits(Session::Basic, false) && r.fits(Session::Health, false)));
    }

    /// A reader of the repository can open every source: each part names an
    /// upstream file (kubernetes/kubernetes path), issue or page; never our notes.
    #[test]
    fn sources_are_citable_upstream() {
        let citable = |part: &str| {
            part.starts_with("https://")
                || part.starts_with("kubernetes#")
                || part.starts_with("kubernetes ") && part.contains('/')
                || part.starts_with("KEP-") && part.contains("https://")
        };
        for s in SCENARIOS.iter().chain(DRA) {
            assert!(!s.source.contains("seeds/") && !s.source.contains("shared/"), "{}: {}", s.id, s.source);
            for part in s.source.split("; ") {
                assert!(citable(part), "{}: {part:?} names no upstream file, issue or page", s.id);
            }
        }
        assert!(!citable("manager.go (x)") && !citable("protocol.md"));
    }

    /// The two scenario tables of docs/test.md are the catalog's, row for row
    /// (`DPCTL_REGENERATE=1` rewrites them).
    #[test]
    fn the_docs_tables_are_the_catalog() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/test.md");
        let mut page = std::fs::read_to_string(&path).expect("docs/test.md");
        let mut stale = Vec::new();
        for (heading, table) in [("### Scenarios", SCENARIOS), ("## `dpctl test --dra`", DRA)] {
            let want = docs_table(table);
            let start = page.find(heading).and_then(|h| page[h..].find("\n| ID |").map(|i| h + i + 1));
            let Some(start) = start else { panic!("docs/test.md: no table under {heading}") };
            let len = page[start..].lines().take_while(|l| l.starts_with('|')).map(|l| l.len() + 1).sum::<usize>();
            if page[start..start + len] != want {
                stale.push(heading);
                page.replace_range(start..start + len, &want);
            }
        }
        if std::env::var_os("DPCTL_REGENERATE").is_some() {
            std::fs::write(&path, &page).expect("write docs/test.md");
        } else {
            assert!(
                stale.is_empty(),
                "docs/test.md tables {stale:?} differ from the catalog; run DPCTL_REGENERATE=1 cargo test --lib the_docs_tables"
            );
        }
    }
}
