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

use super::catalog::{Scenario, Session};
use super::env::{log_tail, PluginProcess, Tree};
use super::run::{selected, Options, Progress};
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

const KUBELET: &str = "kubernetes pkg/kubelet/cm/dra/manager.go";
const PLUGIN_MANAGER: &str = "kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go";
const HELPER: &str = "k8s.io/dynamic-resource-allocation/kubeletplugin; kubernetes-sigs/dra-example-driver";

const fn sc(
    id: &'static str,
    group: &'static str,
    title: &'static str,
    rule: &'static str,
    source: &'static str,
    session: Session,
) -> Scenario {
    Scenario { id, group, title, rule, source, session, needs_control: true }
}

/// The DRA scenarios, in run order.
pub const SCENARIOS: &[Scenario] = &[
    sc("DRA-REG-001", "registration", "registers through the plugin watcher", "GetInfo: type DRAPlugin, a valid driver name, an absolute endpoint inside the kubelet root that fits a socket address, a DRAPlugin service in supported_versions; the endpoint answers", PLUGIN_MANAGER, Session::Basic),
    sc("DRA-REG-002", "registration", "the kubelet talks v1.DRAPlugin to it", "the kubelet takes the first service it knows in the plugin's supported_versions; v1beta1 is deprecated since 1.34", PLUGIN_MANAGER, Session::Basic),
    sc("DRA-SLICE-001", "resourceslices", "publishes a ResourceSlice for its node to the API server", "the driver's devices are published as ResourceSlices with spec.driver its name and spec.nodeName the node (the kubeletplugin helper does it from {kubeconfig})", HELPER, Session::Basic),
    sc("DRA-PREP-001", "prepare", "the kubelet prepares a pod's two claims", "NodePrepareResources answers every claim UID asked, only those, without error", KUBELET, Session::Basic),
    sc("DRA-PREP-002", "prepare", "prepared devices name their pool and device, CDI IDs are qualified", "each device has pool_name and device_name; CDI IDs are vendor/class=name", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Session::Basic),
    sc("DRA-PREP-003", "prepare", "preparing a claim twice gives the same answer", "NodePrepareResources is idempotent (the kubelet retries it)", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Session::Basic),
    sc("DRA-PREP-004", "prepare", "it prepares the devices the claim's allocation names", "the devices prepared for a claim are those of its status.allocation.devices.results for this driver (a helper-based driver GETs the claim)", HELPER, Session::Basic),
    sc("DRA-CDI-001", "cdi", "prepared CDI IDs resolve to spec files", "every CDI ID the driver returns is defined by a spec file in the CDI directory before the answer (else the runtime fails the container: unresolvable CDI devices)", HELPER, Session::Basic),
    sc("DRA-UNPREP-001", "unprepare", "the kubelet unprepares a removed pod's claims", "NodeUnprepareResources answers every claim UID asked, without error", KUBELET, Session::Basic),
    sc("DRA-CDI-002", "cdi", "unprepare removes the claim's CDI specs", "what prepare wrote for a claim goes when it is unprepared", HELPER, Session::Basic),
    sc("DRA-UNPREP-002", "unprepare", "unpreparing a claim twice succeeds twice", "NodeUnprepareResources is idempotent (the kubelet retries it)", "kubernetes staging/src/k8s.io/kubelet/pkg/apis/dra/v1/api.proto", Session::Basic),
    sc("DRA-UNPREP-003", "unprepare", "unpreparing an unknown claim succeeds", "a claim the driver never prepared (or already forgot) unprepares without error", KUBELET, Session::Basic),
    sc("DRA-HEALTH-001", "health", "the advertised health stream sends a valid snapshot and stays open", "DRAResourceHealth.NodeWatchResources: full snapshots of pool/device health with a timestamp; the stream stays open", "KEP-4680; kubernetes pkg/kubelet/cm/dra/healthinfo.go", Session::Basic),
    sc("DRA-RESTART-001", "restart", "after a kubelet restart it registers again and prepared claims survive", "the kubelet restores prepared claims from dra_manager_state and does not prepare them again; the driver re-registers when its registration socket is found again", KUBELET, Session::KubeletRestart),
    sc("DRA-ROLL-001", "restart", "two instances serve at once during a rolling update; the older one serves when the newest goes", "with uid-named sockets (<driver>-<uid>-reg.sock) two instances register at once; the kubelet uses the newest and keeps the other when one goes", PLUGIN_MANAGER, Session::EndToEnd),
    sc("DRA-RESTART-002", "restart", "after a driver restart it registers again and unprepares what it prepared before", "claims prepared by the previous instance unprepare through the new one", PLUGIN_MANAGER, Session::PluginRestart),
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

struct Sess {
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
    async fn setup(o: &Options) -> std::result::Result<Sess, Outcome> {
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

    /// DRA-PREP-004: per claim PREP-001 prepared, the devices the kubelet
    /// allocated (claim-allocated) against those the driver prepared (claim-prepared).
    fn allocated_devices_prepared(&self) -> std::result::Result<Outcome, Outcome> {
        if self.engine_claims.is_empty() {
            return Ok(Outcome::skip("DRA-PREP-001 did not prepare"));
        }
        let mut wrong = Vec::new();
        for c in &self.engine_claims {
            let key = format!("{}/{}", c.namespace, c.name);
            // driver/device: a missing pool name is DRA-PREP-002's finding, not this one's.
            let sorted = |v: Vec<String>| {
                let mut v: Vec<String> = v
                    .iter()
                    .map(|w| {
                        let parts: Vec<&str> = w.split('/').collect();
                        format!("{}/{}", parts.first().unwrap_or(&""), parts.last().unwrap_or(&""))
                    })
                    .collect();
                v.sort();
                v
            };
            let allocated = self.seen.iter().rev().find_map(|e| match &e.event {
                KubeletEvent::ClaimAllocated { claim, devices, .. } if *claim == key => Some(sorted(devices.clone())),
                _ => None,
            });
            let prepared = self.seen.iter().rev().find_map(|e| match &e.event {
                KubeletEvent::ClaimPrepared { claim, devices, .. } if *claim == key => Some(sorted(devices.clone())),
                _ => None,
            });
            if let (Some(a), Some(p)) = (allocated, prepared) {
                if a != p {
                    wrong.push(format!("{key}: allocated {}, prepared {}", a.join(", "), p.join(", ")));
                }
            }
        }
        if wrong.is_empty() {
            Ok(Outcome::pass(format!("{} claim(s)", self.engine_claims.len())))
        } else {
            Err(fail(&rules::ALLOCATED_DEVICES, "NodePrepareResources (the kubelet, on admission)", wrong.join("; ")))
        }
    }

    async fn scenario(&mut self, id: &str) -> Outcome {
        match self.run_scenario(id).await {
            Ok(o) | Err(o) => o,
        }
    }

    async fn run_scenario(&mut self, id: &str) -> std::result::Result<Outcome, Outcome> {
        match id {
            "DRA-REG-001" => {
                let d = self.registered(0).await?;
                let note = format!("{} at {}", d.name, d.endpoint.display());
                self.driver = Some(d);
                Ok(Outcome::pass(note))
            }
            "DRA-SLICE-001" => {
                let d = self.driver().await?;
                let Some(addr) = self.seen.iter().find_map(|e| match &e.event {
                    KubeletEvent::ApiServer { addr, .. } => Some(addr.trim_start_matches("http://").to_string()),
                    _ => None,
                }) else {
                    return Ok(Outcome::skip("no local API server"));
                };
                let api = crate::plugin::dra::slices::ApiServer { authority: addr, prefix: String::new(), token: None };
                let node = crate::kubelet::dra::NODE_NAME;
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    let path =
                        format!("{}?fieldSelector=spec.driver%3D{}", crate::plugin::dra::slices::SLICES_PATH, d.name);
                    let (_, list) =
                        crate::plugin::dra::slices::request(&api, "GET", &path, None, self.timeout)
                            .await
                            .map_err(|e| Outcome::fail("list ResourceSlices", e.to_string(), "report this bug"))?;
                    let items = list["items"].as_array().cloned().unwrap_or_default();
                    if let Some(s) = items.iter().find(|s| s["spec"]["nodeName"] == node) {
                        let n = s["spec"]["devices"].as_array().map(Vec::len).unwrap_or(0);
                        return Ok(Outcome::pass(format!(
                            "{n} device(s) in pool {}",
                            s["spec"]["pool"]["name"].as_str().unwrap_or("?")
                        )));
                    }
                    if Instant::now() > deadline {
                        let nodes: Vec<String> = items.iter().map(|s| s["spec"]["nodeName"].to_string()).collect();
                        return Err(Outcome::fail(
                            "GET /apis/resource.k8s.io/v1/resourceslices",
                            if items.is_empty() {
                                "no ResourceSlice of the driver".to_string()
                            } else {
                                format!("slices for nodes {} only", nodes.join(", "))
                            },
                            "publish the devices for the node (pass {kubeconfig} and {node-name} to the driver)",
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            "DRA-REG-002" => {
                let d = self.driver().await?;
                if d.service == rules::DRA_V1 {
                    Ok(Outcome::pass(""))
                } else {
                    Err(fail(
                        &rules::VERSION_ORDER,
                        "GetInfo supported_versions",
                        format!("the kubelet chose {}", d.service),
                    ))
                }
            }
            "DRA-PREP-001" => {
                let ids = self.prepare_pod("pod-1").await?;
                self.prepared = Some(ids);
                Ok(Outcome::pass("2 claims"))
            }
            "DRA-PREP-002" => {
                // A claim the kubelet allocated and prepared (a helper-based driver GETs it).
                let Some(claim) = self.engine_claims.first().cloned() else {
                    return Ok(Outcome::skip("DRA-PREP-001 did not prepare"));
                };
                let (c, d) = self.conn().await?;
                let uid = claim.uid.clone();
                let r = c
                    .prepare(&d.service, vec![claim.clone()])
                    .await
                    .map_err(|e| fail(&rules::SERVICE_ANSWERS, "NodePrepareResources", e.to_string()))?;
                let v: Vec<String> = rules::prepare_violations(&[uid], &r)
                    .into_iter()
                    .filter(|v| v.rule.id == rules::DEVICE_FIELDS.id || v.rule.id == rules::CDI_ID.id)
                    .map(|v| v.to_string())
                    .collect();
                if let Some(e) = r.claims.values().find(|x| !x.error.is_empty()) {
                    return Err(fail(&rules::ANSWER_COMPLETE, "NodePrepareResources", format!("error: {}", e.error)));
                }
                if v.is_empty() {
                    Ok(Outcome::pass(""))
                } else {
                    Err(fail(&rules::DEVICE_FIELDS, "NodePrepareResources", v.join("; ")))
                }
            }
            "DRA-PREP-003" => {
                let Some(claim) = self.engine_claims.first().cloned() else {
                    return Ok(Outcome::skip("DRA-PREP-001 did not prepare"));
                };
                let (c, d) = self.conn().await?;
                let a = c
                    .prepare(&d.service, vec![claim.clone()])
                    .await
                    .map_err(|e| fail(&rules::SERVICE_ANSWERS, "NodePrepareResources", e.to_string()))?;
                let b = c
                    .prepare(&d.service, vec![claim.clone()])
                    .await
                    .map_err(|e| fail(&rules::IDEMPOTENT, "NodePrepareResources (again)", e.to_string()))?;
                if rules::same_answer(&a, &b) {
                    Ok(Outcome::pass(""))
                } else {
                    Err(fail(
                        &rules::IDEMPOTENT,
                        "NodePrepareResources twice",
                        format!("first {:?}, then {:?}", a.claims, b.claims),
                    ))
                }
            }
            "DRA-PREP-004" => self.allocated_devices_prepared(),
            "DRA-CDI-001" => {
                let Some(ids) = self.prepared.clone() else { return Ok(Outcome::skip("DRA-PREP-001 did not prepare")) };
                if ids.is_empty() {
                    return Ok(Outcome::skip("the driver returned no CDI IDs"));
                }
                let bad = unresolved_cdi(&[self.tree.cdi_dir()], &ids);
                if bad.is_empty() {
                    Ok(Outcome::pass(format!("{} CDI ID(s)", ids.len())))
                } else {
                    Err(Outcome::fail(
                        "CDI spec files in {cdi-dir}",
                        format!("{} resolve to no spec file", bad.join(", ")),
                        "write a CDI spec defining each returned ID (kind=name) into the CDI directory ({cdi-dir}) before answering",
                    ))
                }
            }
            "DRA-UNPREP-001" => {
                if self.prepared.is_none() {
                    return Ok(Outcome::skip("DRA-PREP-001 did not prepare"));
                }
                self.remove_pod("pod-1").await?;
                Ok(Outcome::pass("2 claims"))
            }
            "DRA-CDI-002" => {
                let Some(ids) = self.prepared.clone().filter(|i| !i.is_empty()) else {
                    return Ok(Outcome::skip("nothing was prepared with CDI IDs"));
                };
                let still: Vec<String> = {
                    let bad = unresolved_cdi(&[self.tree.cdi_dir()], &ids);
                    ids.iter().filter(|i| !bad.contains(i)).cloned().collect()
                };
                if still.is_empty() {
                    Ok(Outcome::pass(""))
                } else {
                    Err(Outcome::fail(
                        "CDI spec files after NodeUnprepareResources",
                        format!("{} still defined", still.join(", ")),
                        "remove the claim's CDI spec on unprepare",
                    ))
                }
            }
            "DRA-UNPREP-002" => {
                // A claim the kubelet prepared and (DRA-UNPREP-001) unprepared: twice more.
                let Some(claim) = self.engine_claims.first().cloned() else {
                    return Ok(Outcome::skip("DRA-PREP-001 did not prepare"));
                };
                let (c, d) = self.conn().await?;
                let uid = claim.uid.clone();
                for n in ["", " (again)"] {
                    let r = c
                        .unprepare(&d.service, vec![claim.clone()])
                        .await
                        .map_err(|e| fail(&rules::IDEMPOTENT, format!("NodeUnprepareResources{n}"), e.to_string()))?;
                    let v = rules::unprepare_violations(std::slice::from_ref(&uid), &r);
                    if let Some(v) = v.first() {
                        return Err(fail(v.rule, format!("NodeUnprepareResources{n}"), v.detail.clone()));
                    }
                    if let Some(e) = r.claims.values().find(|x| !x.error.is_empty()) {
                        return Err(fail(
                            &rules::IDEMPOTENT,
                            format!("NodeUnprepareResources{n}"),
                            format!("error: {}", e.error),
                        ));
                    }
                }
                Ok(Outcome::pass(""))
            }
            "DRA-UNPREP-003" => {
                let (c, d) = self.conn().await?;
                let claim = self.claim();
                let uid = claim.uid.clone();
                let r = c
                    .unprepare(&d.service, vec![claim])
                    .await
                    .map_err(|e| fail(&rules::SERVICE_ANSWERS, "NodeUnprepareResources", e.to_string()))?;
                if let Some(v) = rules::unprepare_violations(&[uid], &r).first() {
                    return Err(fail(v.rule, "NodeUnprepareResources (a claim never prepared)", v.detail.clone()));
                }
                match r.claims.values().find(|x| !x.error.is_empty()) {
                    Some(e) => Err(fail(
                        &rules::IDEMPOTENT,
                        "NodeUnprepareResources (a claim never prepared)",
                        format!("error: {}", e.error),
                    )),
                    None => Ok(Outcome::pass("")),
                }
            }
            "DRA-HEALTH-001" => {
                let (c, d) = self.conn().await?;
                let Some(h) = d.health.clone() else { return Ok(Outcome::skip("no health service advertised")) };
                let mut s = c
                    .health(&h)
                    .await
                    .map_err(|e| fail(&rules::HEALTH_ANSWERS, "NodeWatchResources", e.to_string()))?;
                let first = tokio::time::timeout(self.timeout, s.next(&d.endpoint)).await;
                let snap = match first {
                    Err(_) => {
                        return Err(fail(
                            &rules::HEALTH_STREAM,
                            "NodeWatchResources",
                            format!("no snapshot within {:?}", self.timeout),
                        ))
                    }
                    Ok(Err(e)) => return Err(fail(&rules::HEALTH_ANSWERS, "NodeWatchResources", e.to_string())),
                    Ok(Ok(None)) => {
                        return Err(fail(
                            &rules::HEALTH_STREAM,
                            "NodeWatchResources",
                            "the stream ended before a snapshot",
                        ))
                    }
                    Ok(Ok(Some(x))) => x,
                };
                let now = crate::plugin::dra::driver::now_secs();
                if let Some(v) = rules::health_violations(&snap, now).first() {
                    return Err(fail(v.rule, "NodeWatchResources", v.detail.clone()));
                }
                // The stream stays open: nothing (or another snapshot) for a while, never its end.
                if let Ok(Ok(None)) = tokio::time::timeout(Duration::from_millis(500), s.next(&d.endpoint)).await {
                    return Err(fail(
                        &rules::HEALTH_STREAM,
                        "NodeWatchResources",
                        "the stream ended after its first snapshot",
                    ));
                }
                Ok(Outcome::pass(format!("{} device(s)", snap.len())))
            }
            "DRA-RESTART-001" => {
                self.driver = Some(self.registered(0).await?);
                self.prepare_pod("pod-r").await?;
                let from = self.seen.len();
                if let Some(k) = &self.kubelet {
                    k.restart()
                        .await
                        .map_err(|e| Outcome::fail("kubelet restart", e.to_string(), "see the kubelet log"))?;
                }
                self.registered(from).await?;
                let cached = self
                    .wait(from, POD_WITHIN, |e| match e {
                        KubeletEvent::ClaimPrepared { claim, cached, .. } if claim.ends_with("pod-r-a") => {
                            Some(*cached)
                        }
                        _ => None,
                    })
                    .await;
                if cached != Some(true) {
                    return Err(Outcome::fail(
                        "kubelet restart",
                        format!("the claim was not restored prepared ({cached:?})"),
                        "report this bug: the kubelet's checkpoint",
                    ));
                }
                self.remove_pod("pod-r").await?;
                Ok(Outcome::pass("re-registered; claims kept; unprepared after"))
            }
            "DRA-ROLL-001" => {
                if !self.argv.iter().any(|a| a.contains("{rolling-uid}")) {
                    return Ok(Outcome::skip(
                        "the command has no {rolling-uid}: pass it to the driver's rolling-update option",
                    ));
                }
                self.driver = Some(self.registered(0).await?);
                let from = self.seen.len();
                self.second = Some(
                    self.spawn_instance("b", "driver-b.log")
                        .map_err(|e| Outcome::fail("start a second instance", e.to_string(), "check the command"))?,
                );
                let two = self
                    .wait(from, REGISTER_WITHIN, |e| match e {
                        KubeletEvent::DraRegistered { instances, endpoint, .. } => Some((*instances, endpoint.clone())),
                        KubeletEvent::RegistrationRejected { error, .. } => Some((0, error.clone())),
                        _ => None,
                    })
                    .await;
                let newest = match two {
                    Some((2, ep)) => ep,
                    other => return Err(Outcome::fail(
                        "a second instance's registration",
                        format!("{other:?}; driver log: {}", log_tail(&self.tree.logs.join("driver-b.log"), 5)),
                        "name both sockets after the rolling-update UID (<driver>-<uid>-reg.sock, a distinct endpoint)",
                    )),
                };
                if let Some(d) = &mut self.driver {
                    d.endpoint = PathBuf::from(&newest);
                }
                self.prepare_pod("pod-u").await?;
                let from = self.seen.len();
                if let Some(p) = self.second.take() {
                    p.stop(Duration::from_secs(10)).await;
                }
                let left = self
                    .wait(from, REGISTER_WITHIN, |e| match e {
                        KubeletEvent::DraDeregistered { instances, .. } => Some(*instances),
                        _ => None,
                    })
                    .await;
                if left != Some(1) {
                    return Err(Outcome::fail(
                        "the newest instance stops",
                        format!("instances left: {left:?}"),
                        "remove only this instance's sockets on exit",
                    ));
                }
                self.remove_pod("pod-u").await?;
                Ok(Outcome::pass("two instances; unprepared through the older one"))
            }
            "DRA-RESTART-002" => {
                self.driver = Some(self.registered(0).await?);
                self.prepare_pod("pod-d").await?;
                let from = self.seen.len();
                if let Some(p) = self.plugin.take() {
                    p.stop(Duration::from_secs(10)).await;
                }
                self.wait(from, REGISTER_WITHIN, |e| matches!(e, KubeletEvent::DraDeregistered { .. }).then_some(()))
                    .await;
                let from = self.seen.len();
                self.start_plugin()
                    .map_err(|e| Outcome::fail("restart the driver", e.to_string(), "check the command"))?;
                self.driver = Some(self.registered(from).await?);
                self.remove_pod("pod-d").await?;
                Ok(Outcome::pass("re-registered; unprepared through the new instance"))
            }
            other => Ok(Outcome::fail(other, "internal error: unknown scenario", "report this bug")),
        }
    }

    async fn teardown(mut self) {
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
    let mut records = Vec::new();
    for session in Session::ALL {
        let chosen: Vec<&Scenario> = SCENARIOS.iter().filter(|s| s.session == session && selected(o, s)).collect();
        if chosen.is_empty() {
            continue;
        }
        let mut sess: Option<Sess> = None;
        let mut setup_failure: Option<Outcome> = None;
        for s in chosen {
            progress(Progress::Started(s));
            let start = Instant::now();
            if sess.is_none() && setup_failure.is_none() {
                match Sess::setup(o).await {
                    Ok(x) => sess = Some(x),
                    Err(f) => setup_failure = Some(f),
                }
            }
            let outcome = match (&mut sess, &setup_failure) {
                (Some(x), _) => {
                    tokio::time::timeout(Duration::from_secs(90), x.scenario(s.id)).await.unwrap_or_else(|_| {
                        Outcome::fail(s.id, "the scenario did not finish within 90s", "see the driver's log")
                    })
                }
                (None, Some(f)) => f.clone(),
                (None, None) => Outcome::fail(s.id, "internal error: no session", "report this bug"),
            };
            let rec = Record::new(s, outcome, start.elapsed());
            progress(Progress::Finished(&rec));
            records.push(rec);
        }
        if let Some(x) = sess {
            x.teardown().await;
        }
    }
    Ok(records)
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
