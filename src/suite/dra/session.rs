//! A DRA session: a fresh node tree, the kubelet engine with its DRA manager
//! and its events, the driver's process; and the helpers its scenarios share
//! (waiting for registration, preparing and removing a pod, calling the
//! driver directly).

use super::super::env::{Kubelet, PluginProcess, Tree};
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
/// Beyond a call's deadline, how long the kubelet may take to say it passed.
const CALL_SLACK: Duration = Duration::from_secs(2);

/// The placeholders of a DRA driver's command.
pub fn substitute(arg: &str, tree: &Tree) -> String {
    vars(tree).iter().fold(arg.to_string(), |a, (ph, _, v)| a.replace(ph, v))
}

fn vars(tree: &Tree) -> [(&'static str, &'static str, String); 5] {
    [
        ("{kubeconfig}", "DPCTL_TEST_KUBECONFIG", tree.root.join("kubeconfig").display().to_string()),
        ("{node-name}", "DPCTL_TEST_NODE_NAME", crate::kubelet::dra::core::NODE_NAME.to_string()),
        ("{kubelet-root-dir}", "DPCTL_TEST_KUBELET_ROOT_DIR", tree.root.display().to_string()),
        ("{plugins-registry-dir}", "DPCTL_TEST_PLUGINS_REGISTRY_DIR", tree.registry_dir.display().to_string()),
        ("{cdi-dir}", "DPCTL_TEST_CDI_DIR", tree.cdi_dir().display().to_string()),
    ]
}

pub(super) fn fail(rule: &Rule, rpc: impl Into<String>, answer: impl Into<String>) -> Outcome {
    Outcome::fail(rpc, answer, rule.fix)
}

/// Whether a call's error is its deadline passing (no answer in time).
pub(super) fn past_deadline(e: &Error) -> bool {
    e.code() == Some(tonic::Code::DeadlineExceeded)
}

/// Whether the kubelet's error text is its call's deadline passing.
fn kubelet_past_deadline(text: &str) -> bool {
    text.contains("DeadlineExceeded")
}

/// A call the driver did not answer within its deadline: reported here,
/// once, and the rest of the run is NOT-RUN (each later call would wait as
/// long; a deadlocked driver, dra-driver-nvidia-gpu#378).
pub(super) fn hung(rpc: impl Into<String>, waited: Duration) -> Outcome {
    let rpc = rpc.into();
    let reason = format!("the driver stopped answering: {rpc} got no answer within {waited:?}");
    Outcome::fail(
        rpc,
        format!(
            "no answer within {waited:?} (DeadlineExceeded): the kubelet gives up on a call after {}s (defaultClientCallTimeout, kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin.go) and retries it, so no pod using the driver starts and removed pods keep their devices",
            rules::KUBELET_CALL_TIMEOUT_SECS
        ),
        "answer every call whatever came before: a call that returns early must release every lock it took (dra-driver-nvidia-gpu#378: an unprepare of an unknown claim returned holding the driver's global lock); a goroutine dump (SIGQUIT to a Go driver) shows where the calls wait",
    )
    .stopping(reason, &[])
}

/// A direct call's error: its deadline passing is [`hung`]; any other fails `rule`.
pub(super) fn call_failed(rule: &Rule, rpc: impl Into<String>, e: Error, waited: Duration) -> Outcome {
    if past_deadline(&e) {
        hung(rpc, waited)
    } else {
        fail(rule, rpc, e.to_string())
    }
}

/// What the session learnt of the driver.
#[derive(Default, Clone)]
pub(super) struct Driver {
    pub(super) name: String,
    /// Its registration socket.
    pub(super) socket: PathBuf,
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
            Kubelet::start(&tree, o.timeout, version, true, o.api_server).await.map_err(|e| setup("kubelet", e))?;
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

    /// The driver's own last log lines (its stderr and stdout; the second
    /// instance's too when one ran), bounded: a failure's evidence.
    pub(crate) fn log_excerpt(&self) -> Option<String> {
        let read = |name: &str| std::fs::read_to_string(self.tree.logs.join(name)).ok();
        let first = read("driver.log")?;
        let mut out = crate::suite::evidence::log_excerpt(&first, 8, 800);
        if let Some(b) = read("driver-b.log") {
            out.push_str(&format!(" ‖ instance b: {}", crate::suite::evidence::log_excerpt(&b, 6, 500)));
        }
        Some(out)
    }

    /// The local API server (from the kubelet's `api-server` event).
    pub(super) fn api(&self) -> std::result::Result<crate::plugin::dra::slices::ApiServer, Outcome> {
        let Some(kubeconfig) = self.seen.iter().find_map(|e| match &e.event {
            KubeletEvent::ApiServer { kubeconfig, .. } => Some(kubeconfig.clone()),
            _ => None,
        }) else {
            return Err(Outcome::skip("no local API server"));
        };
        crate::plugin::dra::slices::load_kubeconfig(std::path::Path::new(&kubeconfig))
            .map_err(|e| Outcome::fail("read the local API server's kubeconfig", e.to_string(), "report this bug"))
    }

    /// The driver's ResourceSlices for this node, as the API server lists them.
    pub(super) async fn node_slices(&self, driver: &str) -> std::result::Result<Vec<serde_json::Value>, Outcome> {
        let api = self.api()?;
        let path = format!("{}?fieldSelector=spec.driver%3D{driver}", crate::plugin::dra::slices::SLICES_PATH);
        let (_, list) = crate::plugin::dra::slices::request(&api, "GET", &path, None, self.timeout)
            .await
            .map_err(|e| Outcome::fail("list ResourceSlices", e.to_string(), "report this bug"))?;
        let node = crate::kubelet::dra::core::NODE_NAME;
        Ok(list["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|x| x["spec"]["nodeName"] == node)
            .collect())
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

    /// As [`Sess::wait`], but ends early (`Err` with its status) when the driver's process exits.
    pub(super) async fn wait_alive<T>(
        &mut self,
        from: usize,
        within: Duration,
        f: impl Fn(&KubeletEvent) -> Option<T>,
    ) -> std::result::Result<Option<T>, std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + within;
        let mut i = from;
        loop {
            while i < self.seen.len() {
                if let Some(t) = f(&self.seen[i].event) {
                    return Ok(Some(t));
                }
                i += 1;
            }
            if let Some(st) = self.plugin.as_mut().and_then(|p| p.exited()) {
                return Err(st);
            }
            // Woken by an event, or every 100 ms to see whether the process exited.
            let slice = (tokio::time::Instant::now() + Duration::from_millis(100)).min(deadline);
            match tokio::time::timeout_at(slice, self.events.recv()).await {
                Ok(Some(e)) => self.seen.push(e),
                Ok(None) => return Ok(None),
                Err(_) if tokio::time::Instant::now() >= deadline => return Ok(None),
                Err(_) => {}
            }
        }
    }

    /// Drain what has arrived.
    pub(super) fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.seen.push(e);
        }
    }

    /// Whether the kubelet allocated `claim` since `from` and neither
    /// prepared it nor saw its prepare fail: its call to the driver is out.
    fn call_in_flight(&self, from: usize, claim: &str) -> bool {
        let allocated = self.seen[from.min(self.seen.len())..]
            .iter()
            .any(|e| matches!(&e.event, KubeletEvent::ClaimAllocated { claim: c, .. } if c == claim));
        allocated && self.last_error(from, false).is_none()
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
            .wait_alive(from, REGISTER_WITHIN, |e| match e {
                KubeletEvent::DraRegistered { driver, socket, endpoint, service, health, .. } => Some(Ok(Driver {
                    name: driver.clone(),
                    socket: PathBuf::from(socket),
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
        let fix = "create <kubelet-root>/plugins_registry/<driver>-reg.sock (pass {plugins-registry-dir} or {kubelet-root-dir} to the driver)";
        match got {
            Ok(Some(Ok(d))) => Ok(d),
            Ok(Some(Err(e))) => {
                Err(Outcome::fail("plugin watcher: GetInfo, validation, NotifyRegistrationStatus", e, rules::TYPE.fix))
            }
            Err(st) => Err(Outcome::fail(
                "plugin watcher",
                format!("the driver exited ({st}) before it registered"),
                "keep the driver running: its log (below) says why it stopped",
            )),
            Ok(None) => Err(Outcome::fail(
                "plugin watcher",
                format!("no registration socket registered within {REGISTER_WITHIN:?}"),
                fix,
            )),
        }
    }

    /// The registered driver (waiting for its registration when no scenario
    /// has yet). A driver that does not register fails the first scenario
    /// that needs it (DRA-REG-001 when selected), once; the rest of the run is NOT-RUN.
    pub(super) async fn driver(&mut self) -> std::result::Result<Driver, Outcome> {
        if let Some(d) = &self.driver {
            return Ok(d.clone());
        }
        match self.registered(0).await {
            Ok(d) => {
                self.driver = Some(d.clone());
                Ok(d)
            }
            Err(f) => Err(f.stopping("the driver did not register", &["DRA-REG-001"])),
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
        self.await_prepared(from, &claims).await
    }

    /// Wait until the kubelet prepared each of `claims` (names in [`NS`],
    /// written after event `from`): (UID, CDI IDs) per claim, each also
    /// kept in `engine_claims`; or the failure, as the kubelet saw it.
    pub(super) async fn await_prepared(
        &mut self,
        from: usize,
        claims: &[String],
    ) -> std::result::Result<Vec<(String, Vec<String>)>, Outcome> {
        let mut ids = Vec::new();
        let rpc = "NodePrepareResources (the kubelet, on admission)";
        for c in claims {
            let key = format!("{NS}/{c}");
            // The kubelet retries for ever; the scenario decides after the
            // third failure in a row, or at once when a call got no answer in time.
            let done = |e: &KubeletEvent| match e {
                KubeletEvent::ClaimPrepared { claim, cdi_ids, uid, .. } if *claim == key => {
                    Some(Ok((cdi_ids.clone(), uid.clone())))
                }
                KubeletEvent::ClaimPrepareFailed { error, attempt, .. }
                    if *attempt >= 3 || kubelet_past_deadline(error) =>
                {
                    Some(Err(error.clone()))
                }
                _ => None,
            };
            let mut got = self.wait(from, POD_WITHIN, done).await;
            if got.is_none() && self.call_in_flight(from, &key) {
                // The kubelet's call is out: wait for its deadline to say whether the driver answers.
                got = self.wait(from, self.timeout + CALL_SLACK, done).await;
            }
            match got {
                Some(Ok((i, uid))) => {
                    ids.push((uid.clone(), i));
                    self.engine_claims.push(Claim { namespace: NS.into(), name: c.clone(), uid });
                }
                Some(Err(e)) if kubelet_past_deadline(&e) => return Err(hung(rpc, self.timeout)),
                Some(Err(e)) => {
                    return Err(fail(
                        &rules::ANSWER_COMPLETE,
                        "NodePrepareResources (the kubelet, on admission; 3 attempts)",
                        e,
                    ));
                }
                None => {
                    let e = self.last_error(from, false).unwrap_or_else(|| format!("no answer within {POD_WITHIN:?}"));
                    return Err(fail(&rules::ANSWER_COMPLETE, rpc, e));
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
            let done = |e: &KubeletEvent| match e {
                KubeletEvent::ClaimUnprepared { claim, .. } if *claim == c => Some(Ok(())),
                KubeletEvent::ClaimUnprepareFailed { error, attempt, .. }
                    if *attempt >= 3 || kubelet_past_deadline(error) =>
                {
                    Some(Err(error.clone()))
                }
                _ => None,
            };
            let mut got = self.wait(from, POD_WITHIN, done).await;
            if got.is_none() && self.last_error(from, true).is_none() {
                // No answer and no error yet: the kubelet's call may be out; wait for its deadline.
                got = self.wait(from, self.timeout + CALL_SLACK, done).await;
            }
            if let Some(Err(e)) = &got {
                if kubelet_past_deadline(e) {
                    return Err(hung("NodeUnprepareResources (the kubelet, on pod removal)", self.timeout));
                }
            }
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
            uid: crate::controlplane::objects::derived_uid(&format!("dpctl-test\0{name}\0{}", std::process::id())),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_deadline_stops_the_run_and_other_errors_fail_their_rule() {
        let late = Error::Rpc {
            target: "/x/dra.sock".into(),
            method: "NodeUnprepareResources",
            code: tonic::Code::DeadlineExceeded,
            message: "context deadline exceeded".into(),
        };
        let o = call_failed(&rules::IDEMPOTENT, "NodeUnprepareResources", late, Duration::from_secs(45));
        let stop = o.stop.as_ref().expect("a hung driver stops the run");
        assert_eq!(stop.reason, "the driver stopped answering: NodeUnprepareResources got no answer within 45s");
        assert!(stop.shown_by.is_empty());
        let ev = o.evidence.as_ref().unwrap();
        assert!(ev.answer.starts_with("no answer within 45s (DeadlineExceeded)"), "{}", ev.answer);
        assert!(ev.fix.contains("dra-driver-nvidia-gpu#378"));
        // Any other status is the rule's failure, and the run goes on.
        let refused = Error::Rpc {
            target: "/x/dra.sock".into(),
            method: "NodeUnprepareResources",
            code: tonic::Code::Internal,
            message: "boom".into(),
        };
        let o = call_failed(&rules::IDEMPOTENT, "NodeUnprepareResources", refused, Duration::from_secs(45));
        assert!(o.stop.is_none());
        assert_eq!(o.evidence.as_ref().unwrap().fix, rules::IDEMPOTENT.fix);
        assert!(kubelet_past_deadline(
            "NodePrepareResources: rpc error: code = DeadlineExceeded desc = context deadline exceeded"
        ));
        assert!(!kubelet_past_deadline("NodePrepareResources: rpc error: code = Unavailable desc = boom"));
    }
}
