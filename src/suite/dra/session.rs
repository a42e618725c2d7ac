//! A DRA session: a fresh node tree, the kubelet engine with its DRA manager
//! and its events, the driver's process; and the helpers its scenarios share
//! (waiting for registration, preparing and removing a pod, calling the
//! driver directly).

use super::super::env::{log_tail, Kubelet, PluginProcess, Tree};
use super::super::options::Options;
use super::super::Outcome;
use crate::api::dra_v1::Claim;
use crate::client::dra::DraConn;
use crate::core::{Error, Result};
use crate::kubelet::event::{KubeletEvent, Stamped, Via};
use crate::protocol::dra as rules;
use crate::protocol::Rule;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub(super) const REGISTER_WITHIN: Duration = Duration::from_secs(10);
pub(super) const POD_WITHIN: Duration = Duration::from_secs(15);
pub(super) const NS: &str = "dpctl-test";

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

pub(super) fn fail(rule: &Rule, rpc: impl Into<String>, answer: impl Into<String>) -> Outcome {
    Outcome::fail(rpc, answer, rule.fix)
}

/// What the session learnt of the driver.
#[derive(Default, Clone)]
pub(super) struct Driver {
    pub(super) name: String,
    pub(super) endpoint: PathBuf,
    pub(super) service: String,
    pub(super) health: Option<String>,
}

/// A DRA session: the node tree, the kubelet (with its DRA manager) and its
/// events, the driver's process, and what the scenarios learnt.
pub(crate) struct Sess {
    pub(super) tree: Tree,
    pub(super) kubelet: Option<Kubelet>,
    pub(super) events: mpsc::UnboundedReceiver<Arc<Stamped>>,
    pub(super) seen: Vec<Arc<Stamped>>,
    pub(super) plugin: Option<PluginProcess>,
    /// A second instance (rolling update), when running.
    pub(super) second: Option<PluginProcess>,
    pub(super) argv: Vec<String>,
    pub(super) timeout: Duration,
    /// The kubelet's behaviour (`--kubelet-version`).
    pub(super) profile: crate::kubelet::profile::Profile,
    pub(super) driver: Option<Driver>,
    pub(super) prepared: Option<Vec<String>>,
    /// DRA-PREP-001's claims: (UID, the CDI IDs returned for it).
    pub(super) prepared_claims: Vec<(String, Vec<String>)>,
    /// The CDI IDs defined before DRA-PREP-001 prepared (specs written at start).
    pub(super) cdi_before: std::collections::BTreeSet<String>,
    /// The claims the kubelet prepared in DRA-PREP-001 (allocated, fetchable from the API server).
    pub(super) engine_claims: Vec<Claim>,
    pub(super) seq: u32,
}

impl Sess {
    pub(crate) async fn setup(o: &Options) -> std::result::Result<Sess, Outcome> {
        let setup =
            |what: &str, e: Error| Outcome::fail(format!("session setup: {what}"), e.to_string(), "see the message");
        let tree = Tree::new().map_err(|e| setup("node tree", e))?;
        let version = o.kubelet_version.unwrap_or(crate::kubelet::profile::KubeletVersion::DEFAULT);
        let (kubelet, events) =
            Kubelet::start(&tree, o.timeout, version, true).await.map_err(|e| setup("kubelet", e))?;
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
            profile: crate::kubelet::profile::Profile::of(version),
            driver: None,
            prepared: None,
            prepared_claims: Vec::new(),
            cdi_before: Default::default(),
            engine_claims: Vec::new(),
            seq: 0,
        };
        s.start_plugin().map_err(|e| setup("driver process", e))?;
        Ok(s)
    }

    pub(super) fn start_plugin(&mut self) -> Result<()> {
        self.plugin = Some(self.spawn_instance("a", "driver.log")?);
        Ok(())
    }

    /// Start the driver's command with `{rolling-uid}` set to `uid`.
    pub(super) fn spawn_instance(&self, uid: &str, log: &str) -> Result<PluginProcess> {
        let mut env: Vec<(String, String)> = vars(&self.tree).into_iter().map(|(_, k, v)| (k.to_string(), v)).collect();
        env.push(("DPCTL_TEST_ROLLING_UID".into(), uid.into()));
        let argv: Vec<String> = self.argv.iter().map(|a| a.replace("{rolling-uid}", uid)).collect();
        PluginProcess::spawn(&argv, &env, &self.tree.logs.join(log))
    }

    pub(super) fn log(&self) -> String {
        log_tail(&self.tree.logs.join("driver.log"), 5)
    }

    /// Wait until an event after index `from` satisfies `f` (its result), or `within` passes.
    pub(super) async fn wait<T>(
        &mut self,
        from: usize,
        within: Duration,
        f: impl Fn(&KubeletEvent) -> Option<T>,
    ) -> Option<T> {
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
    pub(super) fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.seen.push(e);
        }
    }

    pub(super) fn last_error(&self, from: usize, unprepare: bool) -> Option<String> {
        self.seen[from.min(self.seen.len())..].iter().rev().find_map(|e| match &e.event {
            KubeletEvent::ClaimPrepareFailed { error, .. } if !unprepare => Some(error.clone()),
            KubeletEvent::ClaimUnprepareFailed { error, .. } if unprepare => Some(error.clone()),
            _ => None,
        })
    }

    pub(super) async fn registered(&mut self, from: usize) -> std::result::Result<Driver, Outcome> {
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
    pub(super) async fn driver(&mut self) -> std::result::Result<Driver, Outcome> {
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
    /// Admit a pod with two claims; (UID, CDI IDs) per claim as the kubelet prepared them.
    pub(super) async fn prepare_pod(&mut self, pod: &str) -> std::result::Result<Vec<(String, Vec<String>)>, Outcome> {
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
                    ids.push((uid.clone(), i));
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

    pub(super) fn write(&self, name: &str, text: &str) -> std::result::Result<(), Outcome> {
        let dir = &self.tree.manifests;
        let tmp = dir.join(format!(".{name}"));
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, dir.join(name)))
            .map_err(|e| Outcome::fail("write a manifest", e.to_string(), "check $TMPDIR"))
    }

    pub(super) async fn remove_pod(&mut self, pod: &str) -> std::result::Result<(), Outcome> {
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

    pub(super) async fn conn(&mut self) -> std::result::Result<(DraConn, Driver), Outcome> {
        let d = self.driver().await?;
        let c = DraConn::connect(&d.endpoint, self.timeout)
            .await
            .map_err(|e| fail(&rules::ENDPOINT_REACHABLE, "dial the endpoint", e.to_string()))?;
        Ok((c, d))
    }

    pub(super) fn claim(&mut self) -> Claim {
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
