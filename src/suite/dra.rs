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
//! Devices to allocate come from the ResourceSlices the driver publishes and
//! from its health stream.

use super::catalog::{Run, Scenario, Session};
use super::engine::{self, Kind};
use super::engine::{Options, Progress};
use super::env::{log_tail, PluginProcess, Tree};
use super::{Outcome, Record};
use crate::api::dra_v1::Claim;
use crate::client::dra::DraConn;
use crate::core::{Error, Result};
use crate::kubelet::dra::unresolved_cdi;
use crate::kubelet::event::{KubeletEvent, Stamped, Via};
use crate::protocol::dra::{self as rules, Rule};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod scenarios;

const KUBELET: &str = "kubernetes pkg/kubelet/cm/dra/manager.go";
const PLUGIN_MANAGER: &str = "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go";
const HELPER: &str = "k8s.io/dynamic-resource-allocation/kubeletplugin; kubernetes-sigs/dra-example-driver";

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
            run: Run::Dra(|s| Box::pin($run(s))),
        }
    };
}

/// The DRA scenarios, in run order.
pub const SCENARIOS: &[Scenario] = &[
    sc!("DRA-REG-001", "registration", scenarios::registers, "registers through the plugin watcher", "GetInfo: type DRAPlugin, a valid driver name, an absolute endpoint inside the kubelet root that fits a socket address, a DRAPlugin service in supported_versions; the endpoint answers", PLUGIN_MANAGER, Basic),
    sc!("DRA-REG-002", "registration", scenarios::talks_v1, "the kubelet talks v1.DRAPlugin to it", "the kubelet takes the first service it knows in the plugin's supported_versions; v1beta1 is deprecated since 1.34", PLUGIN_MANAGER, Basic),
    sc!("DRA-SLICE-001", "resourceslices", scenarios::publishes_slice, "publishes a ResourceSlice for its node to the API server", "the driver's devices are published as ResourceSlices with spec.driver its name and spec.nodeName the node (the kubeletplugin helper does it from {kubeconfig})", HELPER, Basic),
    sc!("DRA-PREP-001", "prepare", scenarios::prepares_pod, "the kubelet prepares a pod's two claims", "NodePrepareResources answers every claim UID asked, only those, without error", KUBELET, Basic),
    sc!("DRA-PREP-002", "prepare", scenarios::prepared_devices, "prepared devices name their pool and device, CDI IDs are qualified", "each device has pool_name and device_name; CDI IDs are vendor/class=name", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Basic),
    sc!("DRA-PREP-003", "prepare", scenarios::prepare_twice, "preparing a claim twice gives the same answer", "NodePrepareResources is idempotent (the kubelet retries it)", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Basic),
    sc!("DRA-CDI-001", "cdi", scenarios::cdi_resolves, "prepared CDI IDs resolve to spec files", "every CDI ID the driver returns is defined by a spec file in the CDI directory before the answer (else the runtime fails the container: unresolvable CDI devices)", HELPER, Basic),
    sc!("DRA-UNPREP-001", "unprepare", scenarios::unprepares_pod, "the kubelet unprepares a removed pod's claims", "NodeUnprepareResources answers every claim UID asked, without error", KUBELET, Basic),
    sc!("DRA-CDI-002", "cdi", scenarios::cdi_removed, "unprepare removes the claim's CDI specs", "what prepare wrote for a claim goes when it is unprepared", HELPER, Basic),
    sc!("DRA-UNPREP-002", "unprepare", scenarios::unprepare_twice, "unpreparing a claim twice succeeds twice", "NodeUnprepareResources is idempotent (the kubelet retries it)", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Basic),
    sc!("DRA-UNPREP-003", "unprepare", scenarios::unprepare_unknown, "unpreparing an unknown claim succeeds", "a claim the driver never prepared (or already forgot) unprepares without error", KUBELET, Basic),
    sc!("DRA-HEALTH-001", "health", scenarios::health_stream, "the advertised health stream sends a valid snapshot and stays open", "DRAResourceHealth.NodeWatchResources: full snapshots of pool/device health with a timestamp; the stream stays open", "KEP-4680; kubernetes pkg/kubelet/cm/dra/healthinfo.go", Basic),
    sc!("DRA-RESTART-001", "restart", scenarios::kubelet_restart, "after a kubelet restart it registers again and prepared claims survive", "the kubelet restores prepared claims from dra_manager_state and does not prepare them again; the driver re-registers when its registration socket is found again", KUBELET, KubeletRestart),
    sc!("DRA-ROLL-001", "restart", scenarios::rolling_update, "two instances serve at once during a rolling update; the older one serves when the newest goes", "with uid-named sockets (<driver>-<uid>-reg.sock) two instances register at once; the kubelet uses the newest and keeps the other when one goes", PLUGIN_MANAGER, EndToEnd),
    sc!("DRA-RESTART-002", "restart", scenarios::driver_restart, "after a driver restart it registers again and unprepares what it prepared before", "claims prepared by the previous instance unprepare through the new one", PLUGIN_MANAGER, PluginRestart),
];

const REGISTER_WITHIN: Duration = Duration::from_secs(10);
const POD_WITHIN: Duration = Duration::from_secs(15);
const NS: &str = "dpctl-test";

/// The placeholders of a DRA driver's command.
pub fn substitute(arg: &str, tree: &Tree) -> String {
    vars(tree).iter().fold(arg.to_string(), |a, (ph, _, v)| a.replace(ph, v))
}

fn vars(tree: &Tree) -> [(&'static str, &'static str, String); 5] {
    [
        ("{kubeconfig}", "DPCTL_TEST_KUBECONFIG", tree.root.join("kubeconfig").display().to_string()),
        ("{node-name}", "DPCTL_TEST_NODE_NAME", crate::kubelet::dra::NODE_NAME.to_string()),
        ("{kubelet-root-dir}", "DPCTL_TEST_KUBELET_ROOT_DIR", tree.root.display().to_string()),
        ("{plugins-registry-dir}", "DPCTL_TEST_PLUGINS_REGISTRY_DIR", tree.registry_dir.display().to_string()),
        ("{cdi-dir}", "DPCTL_TEST_CDI_DIR", tree.cdi_dir().display().to_string()),
    ]
}

fn fail(rule: &Rule, rpc: impl Into<String>, answer: impl Into<String>) -> Outcome {
    Outcome::fail(rpc, answer, rule.fix)
}

/// What the session learnt of the driver.
#[derive(Default, Clone)]
struct Driver {
    name: String,
    endpoint: PathBuf,
    service: String,
    health: Option<String>,
}

/// A DRA session: the node tree, the kubelet (with its DRA manager) and its
/// events, the driver's process, and what the scenarios learnt.
pub(crate) struct Sess {
    tree: Tree,
    kubelet: Option<super::env::Kubelet>,
    events: mpsc::UnboundedReceiver<Arc<Stamped>>,
    seen: Vec<Arc<Stamped>>,
    plugin: Option<PluginProcess>,
    /// A second instance (rolling update), when running.
    second: Option<PluginProcess>,
    argv: Vec<String>,
    timeout: Duration,
    driver: Option<Driver>,
    prepared: Option<Vec<String>>,
    /// The claims the kubelet prepared in DRA-PREP-001 (allocated, fetchable from the API server).
    engine_claims: Vec<Claim>,
    seq: u32,
}

impl Sess {
    pub(crate) async fn setup(o: &Options) -> std::result::Result<Sess, Outcome> {
        let setup =
            |what: &str, e: Error| Outcome::fail(format!("session setup: {what}"), e.to_string(), "see the message");
        let tree = Tree::new().map_err(|e| setup("node tree", e))?;
        let version = o.kubelet_version.unwrap_or(crate::kubelet::profile::KubeletVersion::DEFAULT);
        let (kubelet, events) =
            super::env::Kubelet::start(&tree, o.timeout, version, true).await.map_err(|e| setup("kubelet", e))?;
        let argv: Vec<String> = o.plugin.iter().map(|a| substitute(a, &tree)).collect();
        let mut s = Sess {
            tree,
            kubelet: Some(kubelet),
            events,
            seen: Vec::new(),
            plugin: None,
            second: None,
            argv,
            timeout: o.timeout,
            driver: None,
            prepared: None,
            engine_claims: Vec::new(),
            seq: 0,
        };
        s.start_plugin().map_err(|e| setup("driver process", e))?;
        Ok(s)
    }

    fn start_plugin(&mut self) -> Result<()> {
        self.plugin = Some(self.spawn_instance("a", "driver.log")?);
        Ok(())
    }

    /// Start the driver's command with `{rolling-uid}` set to `uid`.
    fn spawn_instance(&self, uid: &str, log: &str) -> Result<PluginProcess> {
        let mut env: Vec<(String, String)> = vars(&self.tree).into_iter().map(|(_, k, v)| (k.to_string(), v)).collect();
        env.push(("DPCTL_TEST_ROLLING_UID".into(), uid.into()));
        let argv: Vec<String> = self.argv.iter().map(|a| a.replace("{rolling-uid}", uid)).collect();
        PluginProcess::spawn(&argv, &env, &self.tree.logs.join(log))
    }

    fn log(&self) -> String {
        log_tail(&self.tree.logs.join("driver.log"), 5)
    }

    /// Wait until an event after index `from` satisfies `f` (its result), or `within` passes.
    async fn wait<T>(&mut self, from: usize, within: Duration, f: impl Fn(&KubeletEvent) -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + within;
        let mut i = from;
        loop {
            while i < self.seen.len() {
                if let Some(t) = f(&self.seen[i].event) {
                    return Some(t);
                }
                i += 1;
            }
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) => self.seen.push(e),
                _ => return None,
            }
        }
    }

    /// Drain what has arrived.
    fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.seen.push(e);
        }
    }

    fn last_error(&self, from: usize, unprepare: bool) -> Option<String> {
        self.seen[from.min(self.seen.len())..].iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimPrepareFailed { error, .. } if !unprepare => Some(error.clone()),
            KubeletEvent::ClaimUnprepareFailed { error, .. } if unprepare => Some(error.clone()),
            _ => None,
        })
    }

    async fn registered(&mut self, from: usize) -> std::result::Result<Driver, Outcome> {
        let got = self
            .wait(from, REGISTER_WITHIN, |e| match e {
                KubeletEvent::DraRegistered { driver, endpoint, service, health, .. } => Some(Ok(Driver {
                    name: driver.clone(),
                    endpoint: PathBuf::from(endpoint),
                    service: service.clone(),
                    health: health.clone(),
                })),
                KubeletEvent::RegistrationRejected { via: Via::PluginWatcher, error, socket, .. } => {
                    Some(Err(format!("{socket}: {error}")))
                }
                _ => None,
            })
            .await;
        match got {
            Some(Ok(d)) => Ok(d),
            Some(Err(e)) => {
                Err(Outcome::fail("plugin watcher: GetInfo, validation, NotifyRegistrationStatus", e, rules::TYPE.fix))
            }
            None => {
                let exited = self.plugin.as_mut().and_then(|p| p.exited());
                let why = match exited {
                    Some(st) => format!("the driver exited ({st}); its log: {}", self.log()),
                    None => format!(
                        "no registration socket registered within {REGISTER_WITHIN:?}; driver log: {}",
                        self.log()
                    ),
                };
                Err(Outcome::fail(
                    "plugin watcher",
                    why,
                    "create <kubelet-root>/plugins_registry/<driver>-reg.sock (pass {plugins-registry-dir} or {kubelet-root-dir} to the driver)",
                ))
            }
        }
    }

    /// The registered driver (waiting for its registration when no scenario has yet).
    async fn driver(&mut self) -> std::result::Result<Driver, Outcome> {
        if let Some(d) = &self.driver {
            return Ok(d.clone());
        }
        match self.registered(0).await {
            Ok(d) => {
                self.driver = Some(d.clone());
                Ok(d)
            }
            Err(_) => Err(Outcome::skip("the driver did not register")),
        }
    }

    /// Write two claims and a pod using both; wait until both are prepared (or fail).
    async fn prepare_pod(&mut self, pod: &str) -> std::result::Result<Vec<String>, Outcome> {
        let d = self.driver().await?;
        let from = self.seen.len();
        let claims = [format!("{pod}-a"), format!("{pod}-b")];
        for c in &claims {
            let text = format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {c}\n  namespace: {NS}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: {}\n",
                d.name
            );
            self.write(&format!("{c}.yaml"), &text)?;
        }
        let pod_text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: {NS}\n  uid: {pod}-uid\nspec:\n  resourceClaims:\n  - name: a\n    resourceClaimName: {}\n  - name: b\n    resourceClaimName: {}\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: a\n      - name: b\n",
            claims[0], claims[1]
        );
        self.write(&format!("{pod}.yaml"), &pod_text)?;
        let mut ids = Vec::new();
        for c in &claims {
            let key = format!("{NS}/{c}");
            // The kubelet retries for ever; the scenario decides after the third failure in a row.
            let got = self
                .wait(from, POD_WITHIN, |e| match e {
                    KubeletEvent::ClaimPrepared { claim, cdi_ids, uid, .. } if *claim == key => {
                        Some(Ok((cdi_ids.clone(), uid.clone())))
                    }
                    KubeletEvent::ClaimPrepareFailed { error, attempt, .. } if *attempt >= 3 => {
                        Some(Err(error.clone()))
                    }
                    _ => None,
                })
                .await;
            match got {
                Some(Ok((i, uid))) => {
                    ids.extend(i);
                    self.engine_claims.push(Claim { namespace: NS.into(), name: c.clone(), uid });
                }
                Some(Err(e)) => {
                    return Err(fail(
                        &rules::ANSWER_COMPLETE,
                        "NodePrepareResources (the kubelet, on admission; 3 attempts)",
                        e,
                    ));
                }
                None => {
                    let e = self.last_error(from, false).unwrap_or_else(|| format!("no answer within {POD_WITHIN:?}"));
                    return Err(fail(&rules::ANSWER_COMPLETE, "NodePrepareResources (the kubelet, on admission)", e));
                }
            }
        }
        Ok(ids)
    }

    fn write(&self, name: &str, text: &str) -> std::result::Result<(), Outcome> {
        let dir = &self.tree.manifests;
        let tmp = dir.join(format!(".{name}"));
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, dir.join(name)))
            .map_err(|e| Outcome::fail("write a manifest", e.to_string(), "check $TMPDIR"))
    }

    async fn remove_pod(&mut self, pod: &str) -> std::result::Result<(), Outcome> {
        let from = self.seen.len();
        let _ = std::fs::remove_file(self.tree.manifests.join(format!("{pod}.yaml")));
        for c in [format!("{NS}/{pod}-a"), format!("{NS}/{pod}-b")] {
            let got = self
                .wait(from, POD_WITHIN, |e| match e {
                    KubeletEvent::ClaimUnprepared { claim, .. } if *claim == c => Some(Ok(())),
                    KubeletEvent::ClaimUnprepareFailed { error, attempt, .. } if *attempt >= 3 => {
                        Some(Err(error.clone()))
                    }
                    _ => None,
                })
                .await;
            if let Some(Err(e)) = got {
                return Err(fail(
                    &rules::ANSWER_COMPLETE,
                    "NodeUnprepareResources (the kubelet, on pod removal; 3 attempts)",
                    e,
                ));
            }
            if got.is_none() {
                let e = self.last_error(from, true).unwrap_or_else(|| format!("no answer within {POD_WITHIN:?}"));
                return Err(fail(&rules::ANSWER_COMPLETE, "NodeUnprepareResources (the kubelet, on pod removal)", e));
            }
        }
        Ok(())
    }

    async fn conn(&mut self) -> std::result::Result<(DraConn, Driver), Outcome> {
        let d = self.driver().await?;
        let c = DraConn::connect(&d.endpoint, self.timeout)
            .await
            .map_err(|e| fail(&rules::ENDPOINT_REACHABLE, "dial the endpoint", e.to_string()))?;
        Ok((c, d))
    }

    fn claim(&mut self) -> Claim {
        self.seq += 1;
        let name = format!("direct-{}", self.seq);
        Claim {
            namespace: NS.into(),
            uid: crate::kubelet::dra::objects::derived_uid(&format!("dpctl-test\0{name}\0{}", std::process::id())),
            name,
        }
    }

    pub(crate) async fn teardown(mut self) {
        self.drain();
        if let Some(p) = self.second.take() {
            p.stop(Duration::from_secs(5)).await;
        }
        if let Some(p) = self.plugin.take() {
            p.stop(Duration::from_secs(5)).await;
        }
        if let Some(k) = self.kubelet.take() {
            k.stop().await;
        }
    }
}

/// Run the selected DRA scenarios against `o.plugin`.
pub async fn run(o: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Vec<Record>> {
    if o.plugin.is_empty() {
        return Err(Error::usage(
            "no driver command; run dpctl test --dra -- DRIVER-COMMAND (placeholders {kubelet-root-dir}, {plugins-registry-dir}, {cdi-dir})",
        ));
    }
    Ok(engine::run(Kind::Dra, SCENARIOS, o, progress).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_ids_are_unique_and_documented() {
        let mut ids: Vec<&str> = SCENARIOS.iter().map(|s| s.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), SCENARIOS.len());
        assert!(SCENARIOS.iter().all(|s| s.id.starts_with("DRA-") && !s.rule.is_empty() && !s.source.is_empty()));
    }
}

/// The DRA manager on the engine, in process: a real simulated driver (in
/// process, real sockets) and the local API server over HTTP.
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
        let addr = wait(&mut rx, |e| match e {
            KubeletEvent::ApiServer { addr, .. } => Some(addr.trim_start_matches("http://").to_string()),
            _ => None,
        })
        .await;
        let api = slices::ApiServer { authority: addr, prefix: String::new(), token: None };
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
            rolling_uid: None,
            health_timeout_secs: 0,
            faults: vec![],
            publish: None,
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
        let obj = slices::slice("left", crate::kubelet::dra::NODE_NAME, driver, "p", &["d0".into()]);
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
