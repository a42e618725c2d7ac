//! `dpctl test --dra`: the conformance suite for a DRA driver's kubelet
//! plugin, run on the same engine as the device-plugin suite. Each session
//! starts a fresh node tree, the kubelet engine (with its DRA manager) and
//! the driver's process; scenarios read the engine's typed events (the
//! kubelet's view: registration, prepare on admission, unprepare on
//! removal, restarts) and call the driver directly where a rule is about
//! one answer (checked by the rulebook, [`crate::protocol::dra`]).
//!
//! The driver's command gets placeholders: `{kubelet-root-dir}`,
//! `{plugins-registry-dir}`, `{cdi-dir}` (where the kubelet looks for CDI
//! specs; `/etc/cdi` and `/var/run/cdi` are not used here), `{kubeconfig}`
//! (the engine's local API server) and `{node-name}`, exported as
//! `DPCTL_TEST_KUBELET_ROOT_DIR`, `DPCTL_TEST_PLUGINS_REGISTRY_DIR`,
//! `DPCTL_TEST_CDI_DIR`, `DPCTL_TEST_KUBECONFIG` and `DPCTL_TEST_NODE_NAME`;
//! `{rolling-uid}` (`DPCTL_TEST_ROLLING_UID`) is `a`, and `b` for the second
//! instance DRA-ROLL-001 starts (skipped when the command has none).
//! Devices to allocate come from the ResourceSlices the driver publishes
//! only, as the scheduler's do (not from its health stream).
//!
//! Here: the DRA table ([`SCENARIOS`], the catalog's [`Scenario`] type) and
//! the entry; `session.rs` holds the session (tree, kubelet, driver process
//! and the helpers scenarios share), `scenarios.rs` each scenario's function.

use super::catalog::{Run, Scenario};
use super::engine::{self, Kind, Progress};
use super::options::{Options, Session};
use super::Record;
use crate::core::{Error, Result};

mod cdi;
mod claims;
mod config;
mod extended;
mod pools;
mod races;
mod reboot;
mod restarts;
mod scenarios;
pub(super) mod session;
mod versions;

pub use session::substitute;

/// The suite's per-call timeout when `--timeout` is not given: the kubelet's
/// for every DRA call (`defaultClientCallTimeout`, 45 s, kubernetes
/// pkg/kubelet/cm/dra/plugin/dra_plugin.go), so a driver the
/// kubelet waits for is not failed for being slow; `--timeout` sets it.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(45);

const KUBELET: &str = "kubernetes pkg/kubelet/cm/dra/manager.go";
const PLUGIN_MANAGER: &str = "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go";
const EXAMPLE_CDI: &str = "https://github.com/kubernetes-sigs/dra-example-driver cmd/dra-example-kubeletplugin/cdi.go (CreateClaimSpecFile on prepare, DeleteClaimSpecFile on unprepare)";
const SLICES: &str = "kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go (PublishResources); kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/pools.go (incomplete pools); https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/1008";
const UID_CHECK: &str = "kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go (getResourceClaims: claim NS/NAME got replaced, when the UIDs differ); kubernetes#131617";
const HELPER_PREPARE: &str = "kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go (getResourceClaims: retrieve claim NS/NAME: not found, fails the call)";
const CDI_RULES: &str = "https://github.com/cncf-tags/container-device-interface pkg/cdi (spec, device and container-edits validation: \"invalid device, empty device edits\"); https://github.com/kubernetes-sigs/dra-example-driver cmd/dra-example-kubeletplugin/cdi.go";
const KUBELET_RESTART: &str = "kubernetes pkg/kubelet/cm/dra/manager.go; kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (wipeResourceSlices at start); kubernetes#132683";
const RESTART_SOURCES: &str = "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go; kubernetes#140471, #120550, #141433; https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/342; https://github.com/kubernetes-sigs/dra-example-driver/issues/249";
const DRA_API: &str = "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto";
const EXAMPLE_PREPARE: &str = "https://github.com/kubernetes-sigs/dra-example-driver cmd/dra-example-kubeletplugin/state.go (prepares the devices of claim.status.allocation.devices.results)";

macro_rules! sc {
    ($id:literal, $group:literal, $run:path, $title:literal, $rule:literal, $source:expr, $session:ident) => {
        Scenario {
            id: $id,
            group: $group,
            title: $title,
            rule: $rule,
            source: $source,
            session: Session::$session,
            needs_control: true,
            needs_trigger: false,
            slow: false,
            run: Run::Dra(|s| Box::pin($run(s))),
        }
    };
    (slow $($rest:tt)*) => {
        Scenario { slow: true, ..sc!($($rest)*) }
    };
}

/// The DRA scenarios, in run order.
pub const SCENARIOS: &[Scenario] = &[
    sc!("DRA-REG-001", "registration", scenarios::registers, "registers through the plugin watcher", "GetInfo: type DRAPlugin, a valid driver name, an absolute endpoint inside the kubelet root that fits a socket address, a DRAPlugin service in supported_versions; the endpoint answers", PLUGIN_MANAGER, Basic),
    sc!("DRA-REG-002", "registration", scenarios::talks_v1, "the kubelet talks v1.DRAPlugin to it", "the kubelet takes the first service it knows in the plugin's supported_versions; v1beta1 is deprecated since 1.34", PLUGIN_MANAGER, Basic),
    sc!("DRA-SLICE-001", "resourceslices", scenarios::publishes_slice, "publishes complete pools of devices for its node to the API server", "the driver's devices are published as ResourceSlices with spec.driver its name and spec.nodeName the node (the kubeletplugin helper does it from {kubeconfig}); they list devices, and each pool has resourceSliceCount slices at its generation (the scheduler allocates from slices alone, never from an incomplete pool)", SLICES, Basic),
    sc!("DRA-PREP-001", "prepare", scenarios::prepares_pod, "the kubelet prepares a pod's two claims", "NodePrepareResources answers every claim UID asked, only those, without error", KUBELET, Basic),
    sc!("DRA-PREP-002", "prepare", scenarios::prepared_devices, "prepared devices name their pool and device, CDI IDs are qualified, only the claim asked is answered", "each device has pool_name and device_name; CDI IDs are vendor/class=name; no entry for a claim not asked (the kubelet: \"returned result for unknown claim UID\")", DRA_API, Basic),
    sc!("DRA-PREP-003", "prepare", scenarios::prepare_twice, "preparing a claim twice more gives the first answer", "NodePrepareResources is idempotent (the kubelet retries it): a claim prepared once answers the same CDI IDs again, without error, for that claim only", DRA_API, Basic),
    sc!("DRA-PREP-004", "prepare", scenarios::allocated_devices_prepared, "it prepares the devices the claim's allocation names", "the devices prepared for a claim (pool and device) are those of its status.allocation.devices.results for this driver (a helper-based driver GETs the claim)", EXAMPLE_PREPARE, Basic),
    sc!("DRA-PREP-005", "prepare", claims::uid_mismatch, "refuses a claim whose UID is not the API server's", "the claim the kubelet names is the API server's only when the UIDs match; another UID (the claim was deleted and re-created) is refused: an error for that claim or the call (skipped for drivers that publish no slice)", UID_CHECK, Basic),
    sc!("DRA-CDI-001", "cdi", scenarios::cdi_resolves, "prepared CDI IDs resolve to valid spec files", "every CDI ID the driver returns is defined by a spec file in the CDI directory before the answer, and the CDI library accepts that file (known cdiVersion, vendor/class kind, valid device names, non-empty device edits); else the runtime fails the container", CDI_RULES, Basic),
    sc!("DRA-PREP-007", "prepare", races::concurrent_prepares, "concurrent and repeated prepares of a claim give one answer whose CDI IDs stay valid", "the kubelet prepares a claim again when it gave up on a call the driver may still run (45 s), so prepares of one claim overlap: an unprepared claim prepared 4 times at once and twice more answers the same CDI IDs each time, without error, and every ID answered still resolves at the end", "kubernetes pkg/kubelet/cm/dra/manager.go (PrepareResources runs again at the pod's next sync); https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/729, #754, #782", Basic),
    sc!("DRA-PREP-008", "prepare", races::late_prepare, "a prepare given up at its deadline leaves nothing once the claim is unprepared", "the kubelet gives up on a prepare at its deadline and unprepares the claim when the pod goes; a preparation that outlives its call must not finish after that unprepare: prepares cut short by deadlines of 2, 20 and 100 ms, each followed by an unprepare, leave no CDI spec or ID of the claim within 750 ms", "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin.go (defaultClientCallTimeout); https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/issues/1162, #1188", Basic),
    sc!("DRA-VER-001", "registration", versions::each_service, "every service version it advertises answers alike", "the kubelet uses the first DRAPlugin service it knows and follows one health service; another kubelet version picks another, so each advertised DRAPlugin service must prepare a claim to the same CDI IDs, and each advertised health service must send a snapshot of the same devices", "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (the first supported version known); kubernetes test/e2e_node/dra_test.go (health v1alpha1 only, v1 only, both); kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go (serves v1 and v1beta1)", Basic),
    sc!("DRA-UNPREP-001", "unprepare", scenarios::unprepares_pod, "the kubelet unprepares a removed pod's claims", "NodeUnprepareResources answers every claim UID asked, without error", KUBELET, Basic),
    sc!("DRA-CDI-002", "cdi", scenarios::cdi_removed, "unprepare removes the claim's CDI specs", "what prepare created for a claim goes when it is unprepared: spec files naming its UID, CDI IDs defined by prepare for it alone (a spec written at start, per device or shared by claims, may stay)", EXAMPLE_CDI, Basic),
    sc!("DRA-UNPREP-002", "unprepare", scenarios::unprepare_twice, "unpreparing a claim twice succeeds twice", "NodeUnprepareResources is idempotent (the kubelet retries it)", DRA_API, Basic),
    sc!("DRA-UNPREP-003", "unprepare", scenarios::unprepare_unknown, "unpreparing an unknown claim succeeds", "a claim the driver never prepared (or already forgot) unprepares without error", KUBELET, Basic),
    sc!("DRA-EXT-001", "extended", extended::request_names_map, "an extended resource its DeviceClass maps reaches every container", "a pod asking for the class's extendedResourceName gets a special claim with requests container-<i>-request-<j>; the driver answers those request names (or none), so the kubelet hands each container the CDI devices of its request (dra-driver-cpu#197: other names inject nothing)", "kubernetes pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go; kubernetes pkg/kubelet/cm/dra/manager.go (GetResources); kubernetes pkg/kubelet/cm/dra/claiminfo.go (cdiDevicesAsList); KEP-5004 https://github.com/kubernetes/enhancements/issues/5004", Basic),
    sc!("DRA-EXT-002", "extended", extended::implicit_class_name, "the implicit deviceclass.resource.kubernetes.io/<class> name is served", "a pod asking for deviceclass.resource.kubernetes.io/<class> is served by the class's devices through the special claim", "kubernetes pkg/scheduler/util/utils.go (IsDRAExtendedResourceName); kubernetes pkg/scheduler/framework/plugins/dynamicresources/extended/cache.go; KEP-5004 https://github.com/kubernetes/enhancements/issues/5004", Basic),
    sc!("DRA-CONFIG-001", "prepare", config::opaque_config, "the opaque config of a claim and its DeviceClass reaches what it prepares", "a DeviceClass and a claim carry opaque config for the driver (copied by the scheduler into status.allocation.devices.config as FromClass and FromClaim); the driver acts on both (here: parameters in the e2e test driver's convention, whose values must appear in the CDI edits of the claim's devices) or refuses the claim; prepared with neither in its edits, the config was dropped (skipped for drivers that publish no slice)", "kubernetes staging/src/k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go (ConfigForResult); kubernetes test/e2e/dra/test-driver/app/kubeletplugin.go (extractParameters); kubernetes test/e2e/dra/dra.go (\"supports claim and class parameters\")", Basic),
    sc!("DRA-HEALTH-001", "health", scenarios::health_stream, "the advertised health stream sends a valid snapshot of its slices' devices, refreshed in time, and stays open", "DRAResourceHealth.NodeWatchResources: full snapshots of pool/device health with a timestamp, naming devices of the driver's slices; sent again within health_check_timeout_seconds (waited for when at most 10 s); the stream stays open (skipped when the driver advertises no health service)", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra-health/v1/api.proto (NodeWatchResources); kubernetes pkg/kubelet/cm/dra/healthinfo.go; KEP-4680 https://github.com/kubernetes/enhancements/issues/4680", Basic),
    sc!("DRA-PREP-006", "prepare", claims::deleted_claim, "a claim deleted before it is fetched is refused; the driver stays up", "a claim the API server does not have is an error for that claim (or the call asking for it alone); the driver keeps serving (skipped for drivers that publish no slice)", HELPER_PREPARE, Basic),
    sc!("DRA-RESTART-001", "restart", restarts::kubelet_restart, "after a kubelet restart it registers again, prepared claims survive, its slices are published again", "the kubelet restores prepared claims from dra_manager_state and does not prepare them again; the driver re-registers when its registration socket is found again; the kubelet deletes the node's ResourceSlices at start and the driver publishes them again", KUBELET_RESTART, KubeletRestart),
    sc!("DRA-RESTART-002", "restart", restarts::driver_restart, "after a driver restart its prepared claims resolve, answer the same and unprepare", "claims prepared by the previous instance keep their CDI specs, prepare again to the same CDI IDs and unprepare through the new one, leaving nothing prepare created", RESTART_SOURCES, PluginRestart),
    sc!(slow "DRA-ROLL-002", "slow", restarts::sequential_update, "a sequential update keeps the slices and serves new pods", "the driver stops and a new instance starts (a DaemonSet update with maxSurge 0); the slices survive the downtime as the same objects (the kubelet wipes them only 30 s after the last instance went) and the new instance prepares a new pod's claims", "kubernetes test/e2e/dra/dra.go (\"sequential update with pods replacing each other\"); kubernetes pkg/kubelet/cm/dra/manager.go (wipingDelay); kubernetes staging/src/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go (Stop leaves the slices)", PluginRestart),
    sc!("DRA-ROLL-001", "restart", restarts::rolling_update, "two instances serve at once during a rolling update; the older one serves the newest's claims when it goes", "with uid-named sockets (<driver>-<uid>-reg.sock) two instances register at once; the kubelet uses the newest and keeps the other when one goes; the claims the newest prepared resolve, answer the same and unprepare through the older one (skipped without {rolling-uid} in the command)", PLUGIN_MANAGER, EndToEnd),
    sc!(slow "DRA-ROLL-003", "slow", restarts::failed_update, "a failed update leaves the running instance and its slices as they were", "a second instance starts beside the running one (rolling update) and fails; the older one keeps serving: its ResourceSlices are the same objects (not deleted by the instance that failed) and it prepares a new pod's claims (skipped without {rolling-uid} in the command)", "kubernetes test/e2e/dra/dra.go (\"failed update\": the exact same slices should still exist)", EndToEnd),
    sc!(slow "DRA-REBOOT-001", "slow", reboot::node_reboot, "after a node reboot emptied the CDI directory, preparing the restored claims again writes specs for every CDI ID", "a reboot empties /var/run/cdi (tmpfs); the kubelet restores its checkpointed claims unprepared and calls NodePrepareResources again when it re-creates the pod's sandbox: every CDI ID answered then resolves to a spec on disk, also for a claim the driver's own checkpoint has", "kubernetes pkg/kubelet/cm/dra/claiminfo.go (newClaimInfoFromState: prepared false); kubernetes pkg/kubelet/kuberuntime/kuberuntime_manager.go (PrepareDynamicResources when the sandbox is created); kubernetes#141433, #141966; https://github.com/kubernetes-sigs/dra-example-driver/pull/259", NodeReboot),
];

/// Run the selected DRA scenarios against `o.plugin`.
pub async fn run(o: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Vec<Record>> {
    if o.plugin.is_empty() {
        return Err(Error::usage(
            "no driver command; run dpctl test --dra -- DRIVER-COMMAND (placeholders {kubelet-root-dir}, {plugins-registry-dir}, {cdi-dir})",
        ));
    }
    engine::run(Kind::Dra, SCENARIOS, o, progress).await
}

#[cfg(test)]
mod engine_tests {
    use crate::core::log::{LogFormat, Logger};
    use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
    use crate::kubelet::node::{Node, NodeSpec};
    use crate::kubelet::tree::TempNode;
    use crate::plugin::dra::slices;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::mpsc;

    async fn wait<T>(rx: &mut mpsc::UnboundedReceiver<Arc<Stamped>>, f: impl Fn(&KubeletEvent) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(e)) => {
                    if let Some(t) = f(&e.event) {
                        return t;
                    }
                }
                _ => panic!("the event did not come within 10s"),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gone_drivers_slices_are_wiped_after_the_delay() {
        let node_dir = TempNode::new("dra-wipe").unwrap();
        let tree = node_dir.tree.clone();
        let bus = EventBus::new(Logger::to_file(LogFormat::Json, &tree.logs.join("k.log")).unwrap());
        let mut rx = bus.subscribe();
        let mut spec = NodeSpec::on_tree(&tree);
        spec.api_server = Some(([127, 0, 0, 1], 0).into());
        if let Some(d) = &mut spec.dra {
            d.wipe_delay = Duration::from_millis(300);
        }
        let node = Node::start(spec, bus).await.unwrap();
        let kubeconfig = wait(&mut rx, |e| match e {
            KubeletEvent::ApiServer { kubeconfig, .. } => Some(kubeconfig.clone()),
            _ => None,
        })
        .await;
        let api = slices::load_kubeconfig(std::path::Path::new(&kubeconfig)).unwrap();
        let driver = "gpu.example.com";
        let plugin_dir = tree.root.join("plugins").join(driver);
        let cfg = crate::plugin::dra::Config {
            driver: driver.into(),
            pool: "p".into(),
            devices: vec!["d0".into()],
            kubelet_root: tree.root.clone(),
            registry_dir: tree.registry_dir.clone(),
            control_socket: plugin_dir.join("ctl.sock"),
            plugin_dir,
            host_root: Default::default(),
            cdi_dir: tree.cdi_dir(),
            services: vec![crate::protocol::dra::DRA_V1.into()],
            register: true,
            ..Default::default()
        };
        let tasks = crate::core::task::Tasks::new();
        {
            let (cfg, log, child) =
                (cfg, Logger::to_file(LogFormat::Json, &tree.logs.join("d.log")).unwrap(), tasks.child());
            tasks.spawn(async move {
                let _ = crate::plugin::dra::run(cfg, log, child).await;
            });
        }
        wait(&mut rx, |e| matches!(e, KubeletEvent::DraRegistered { .. }).then_some(())).await;
        // A slice the driver left behind (as a crashed driver does).
        let obj = slices::slice("left", crate::kubelet::dra::core::NODE_NAME, driver, "p", &["d0".into()]);
        slices::publish(&api, &obj, Duration::from_secs(5)).await.unwrap();
        let other = slices::slice("other", "another-node", driver, "p", &["d0".into()]);
        slices::publish(&api, &other, Duration::from_secs(5)).await.unwrap();
        tasks.stop().await;
        let gone = wait(&mut rx, |e| match e {
            KubeletEvent::DraSlicesWiped { driver, slices } => Some((driver.clone(), slices.clone())),
            _ => None,
        })
        .await;
        assert_eq!(gone, (driver.to_string(), vec!["left".to_string()]));
        let (_, list) = slices::request(&api, "GET", slices::SLICES_PATH, None, Duration::from_secs(5)).await.unwrap();
        let names: Vec<&str> =
            list["items"].as_array().unwrap().iter().filter_map(|s| s["metadata"]["name"].as_str()).collect();
        assert_eq!(names, ["other"], "another node's slice stays");
        node.stop().await;
    }
}
