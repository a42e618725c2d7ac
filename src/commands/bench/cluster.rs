//! `dpctl bench cluster`: `mock-kubelet --nodes N` against a cluster — N
//! nodes × D simulated devices in this process (a DRA driver per node
//! publishing its ResourceSlice, or with `--device-plugin` a device plugin
//! per node), then P pods created through the API (each with a claim from a
//! template, or asking for one device of the plugin's resource), scheduled
//! by the cluster's scheduler: the time until every pod is Running, the time
//! until every pod is gone once they are deleted, and this process's peak
//! RSS (the N node engines and their backends), against the targets of #47.
//! The pods only fit on the bench's nodes (a node selector on the label the
//! nodes carry) and tolerate the not-ready taint a new Node gets (a cluster
//! without a node lifecycle controller never removes it).

use crate::bench::peak_rss_mib;
use crate::client::kube::{self, ApiServer, WatchEnd};
use crate::commands::mock_kubelet::fleet::{Fleet, FleetEvent, FleetSpec};
use crate::core::task::Tasks;
use crate::core::time::millis;
use crate::core::{Error, Result};
use crate::kubelet::event::KubeletEvent;
use crate::kubelet::node::NodeSpec;
use crate::kubelet::tree::{NodeTree, TempNode};
use crate::render::{emit, structured, table, Format};
use clap::Args;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(super) const EXAMPLES: &str = "Examples:
  # a real control plane with 100 node identities (tests/upstream/build.sh builds it)
  target/upstream/bin/controlplane serve -dir /tmp/cp $(for i in $(seq 0 99); do echo -node dpctl-bench-$i; done) &
  dpctl bench cluster --kubeconfig /tmp/cp/admin.kubeconfig --node-kubeconfig '/tmp/cp/node-{node}.kubeconfig'
  # small, device-plugin resources instead of claims, JSON
  dpctl bench cluster --kubeconfig admin.kubeconfig --nodes 3 --devices 2 --pods 6 --device-plugin -o json";

/// The targets (#47): 1,000 pods with claims Running within 60 s, this process under 500 MiB.
const RUNNING_TARGET_MS: f64 = 60_000.0;
const RSS_TARGET_MIB: f64 = 500.0;

/// The label every node of the bench carries (its value: the node-name prefix).
pub const FLEET_LABEL: &str = "bench.dpctl.io/fleet";
/// The bench's DRA driver and device class.
pub const DRIVER: &str = "gpu.bench.dpctl.io";
/// The bench's device-plugin resource.
pub const RESOURCE: &str = "bench.dpctl.io/gpu";
/// The claim template the pods use.
const TEMPLATE: &str = "one-gpu";

/// `dpctl bench cluster`
#[derive(Debug, Args)]
pub struct BenchClusterArgs {
    /// The cluster (credentials that create namespaces, pods, DeviceClasses and delete Nodes)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: PathBuf,
    /// The nodes' kubeconfig; `{node}` is replaced by each node's name (its own credentials)
    /// [default: --kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub node_kubeconfig: Option<PathBuf>,
    /// Nodes, NAME-0 … NAME-{N-1}
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub nodes: u32,
    /// Simulated devices per node
    #[arg(long, default_value_t = 8, value_name = "D", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub devices: u32,
    /// Pods (one device each)
    #[arg(long, default_value_t = 1000, value_name = "P", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pods: u32,
    /// A device plugin per node and pods asking for its resource, instead of a DRA driver and claims
    #[arg(long)]
    pub device_plugin: bool,
    /// The nodes' name prefix
    #[arg(long, value_name = "NAME", default_value = "dpctl-bench")]
    pub node_name: String,
    /// The namespace the pods are created in (created when missing; it must hold no pods)
    #[arg(long, value_name = "NS", default_value = "dpctl-bench")]
    pub namespace: String,
    /// Pod creations in flight at once
    #[arg(long, default_value_t = 16, value_name = "C", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// Give up on a stage after this long
    #[arg(long, default_value = "10m", value_parser = crate::cli::positive_duration_arg, value_name = "DURATION")]
    pub stage_timeout: Duration,
    /// Leave the pods, claims, Nodes and ResourceSlices behind (default: deleted at the end)
    #[arg(long)]
    pub keep: bool,
    /// The nodes behave as this kubelet version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Targets {
    running_within_60s: Option<&'static str>,
    rss_under_500_mib: Option<&'static str>,
}

/// What a run measured.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClusterReport {
    nodes: u32,
    devices_per_node: u32,
    pods: u32,
    /// `claims` or `device-plugin`.
    devices_via: &'static str,
    /// The 1-minute load average when the run started.
    load_average: Option<f64>,
    /// Start → every Node registered with its devices (allocatable, or its ResourceSlice published).
    nodes_ready_ms: Option<f64>,
    /// First pod created → every pod Running.
    all_running_ms: Option<f64>,
    pods_per_second: Option<f64>,
    /// Pods seen Running, on how many nodes.
    running: u64,
    nodes_used: u64,
    /// Pods that ended Failed (refused by a node).
    failed: u64,
    /// Delete asked → every pod gone.
    all_gone_ms: Option<f64>,
    /// This process's peak RSS: N node engines and their backends, and the bench.
    peak_rss_mib: Option<f64>,
    targets: Targets,
    interrupted: bool,
}

fn judged(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// One call that must answer one of `ok`.
async fn call(api: &ApiServer, method: &str, path: &str, body: Option<&Value>, ok: &[u16]) -> Result<Value> {
    let (code, v) = kube::request(api, method, path, body, Duration::from_secs(30)).await?;
    if ok.contains(&code) {
        return Ok(v);
    }
    let msg = v["message"].as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    Err(Error::failed(format!("bench: {method} {path}: HTTP {code}: {msg}")))
}

/// What a pod of the bench needs of the arguments.
#[derive(Clone)]
struct PodArgs {
    namespace: String,
    node_name: String,
    device_plugin: bool,
}

impl PodArgs {
    fn of(a: &BenchClusterArgs) -> Self {
        PodArgs { namespace: a.namespace.clone(), node_name: a.node_name.clone(), device_plugin: a.device_plugin }
    }

    /// The pod `i` (pure).
    fn pod(&self, i: u32) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": self.namespace, "labels": {"app": "dpctl-bench"}},
            "spec": {
                "nodeSelector": {FLEET_LABEL: self.node_name},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": "registry.example.com/app:1"}]}});
        if self.device_plugin {
            p["spec"]["containers"][0]["resources"] = json!({"limits": {RESOURCE: "1"}});
        } else {
            p["spec"]["resourceClaims"] = json!([{"name": "g", "resourceClaimTemplateName": TEMPLATE}]);
            p["spec"]["containers"][0]["resources"] = json!({"claims": [{"name": "g"}]});
        }
        p
    }
}

/// What the pods' watch reports: a pod's phase and node, or that it is gone.
enum PodSeen {
    Phase {
        uid: String,
        phase: String,
        node: String,
    },
    Gone(String),
    /// The watch failed for good.
    Failed(String),
}

/// Watch the namespace's pods from `rv` (again from where it ended, until
/// `stop`), each change sent to `tx`.
async fn watch_pods(api: ApiServer, ns: String, mut rv: String, tx: mpsc::UnboundedSender<PodSeen>) {
    loop {
        let path = format!(
            "/api/v1/namespaces/{ns}/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion={rv}"
        );
        let mut last = rv.clone();
        let t = tx.clone();
        let r = kube::watch(&api, &path, Duration::from_secs(30), |e| {
            let o = &e["object"];
            if let Some(v) = o["metadata"]["resourceVersion"].as_str() {
                last = v.to_string();
            }
            let uid = o["metadata"]["uid"].as_str().unwrap_or_default().to_string();
            let seen = match e["type"].as_str() {
                Some("ADDED" | "MODIFIED") => PodSeen::Phase {
                    uid,
                    phase: o["status"]["phase"].as_str().unwrap_or_default().to_string(),
                    node: o["spec"]["nodeName"].as_str().unwrap_or_default().to_string(),
                },
                Some("DELETED") => PodSeen::Gone(uid),
                Some("BOOKMARK") => return true,
                _ => PodSeen::Failed(format!("the pods' watch ended: {e}")),
            };
            t.send(seen).is_ok()
        })
        .await;
        rv = last;
        match r {
            Ok(WatchEnd::Closed) if !tx.is_closed() => continue,
            Ok(WatchEnd::Closed) => return,
            Ok(WatchEnd::Refused(code, body)) => {
                let _ = tx.send(PodSeen::Failed(format!("the pods' watch was refused: HTTP {code}: {body}")));
                return;
            }
            Err(e) => {
                let _ = tx.send(PodSeen::Failed(format!("the pods' watch failed: {e}")));
                return;
            }
        }
    }
}

/// The pods as the watch has shown them.
#[derive(Default)]
struct Pods {
    /// uid → (phase, node).
    seen: BTreeMap<String, (String, String)>,
    running: BTreeSet<String>,
    failed: BTreeSet<String>,
    gone: BTreeSet<String>,
}

impl Pods {
    fn take(&mut self, s: PodSeen) -> Result<()> {
        match s {
            PodSeen::Phase { uid, phase, node } => {
                if phase == "Running" {
                    self.running.insert(uid.clone());
                }
                if phase == "Failed" {
                    self.failed.insert(uid.clone());
                }
                self.seen.insert(uid, (phase, node));
            }
            PodSeen::Gone(uid) => {
                self.gone.insert(uid);
            }
            PodSeen::Failed(e) => return Err(Error::failed(e)),
        }
        Ok(())
    }
}

/// Take watch reports until `done` holds, within `limit`.
async fn pods_until(
    rx: &mut mpsc::UnboundedReceiver<PodSeen>,
    pods: &mut Pods,
    limit: Duration,
    what: &str,
    done: impl Fn(&Pods) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    while !done(pods) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => {
                // Which pods kept it from holding, and where: what to look at.
                let mut late: Vec<String> = pods
                    .seen
                    .iter()
                    .filter(|(uid, _)| !pods.running.contains(*uid) && !pods.failed.contains(*uid))
                    .map(|(_, (phase, node))| format!("{phase} on {}", if node.is_empty() { "no node" } else { node }))
                    .collect();
                let n = late.len();
                late.truncate(5);
                return Err(Error::failed(format!(
                    "bench: timed out waiting for {what} ({} Running, {} Failed, {} gone of {} seen; {n} others, e.g. {})",
                    pods.running.len(),
                    pods.failed.len(),
                    pods.gone.len(),
                    pods.seen.len(),
                    if late.is_empty() { "none".to_string() } else { late.join(", ") }
                )));
            }
            Ok(None) => return Err(Error::failed("bench: the pods' watch stopped")),
            Ok(Some(s)) => pods.take(s)?,
        }
    }
    Ok(())
}

/// Until every node is registered and shows its devices: allocatable D of
/// the resource, or (DRA) its driver registered and its ResourceSlice there.
async fn nodes_ready(
    a: &BenchClusterArgs,
    events: &mut mpsc::UnboundedReceiver<FleetEvent>,
    admin: &ApiServer,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + a.stage_timeout;
    let want = a.nodes as usize;
    let devices = a.devices.to_string();
    let mut ready = BTreeSet::new();
    while ready.len() < want {
        let Ok(e) = tokio::time::timeout_at(deadline, events.recv()).await else {
            return Err(Error::failed(format!("bench: {} of {want} nodes ready in time", ready.len())));
        };
        let Some((i, e)) = e else { return Err(Error::failed("bench: the nodes stopped")) };
        match &e.event {
            KubeletEvent::NodeStatus { allocatable, .. }
                if a.device_plugin && allocatable.get(RESOURCE) == Some(&devices) =>
            {
                ready.insert(i);
            }
            KubeletEvent::NodeRegistered { .. } if !a.device_plugin => {
                ready.insert(i);
            }
            _ => {}
        }
    }
    if a.device_plugin {
        return Ok(());
    }
    // Every node's slice published (the drivers publish from their own tasks).
    let path = format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3D{DRIVER}");
    loop {
        let v = call(admin, "GET", &path, None, &[200]).await?;
        let nodes: BTreeSet<&str> = v["items"]
            .as_array()
            .map(|l| l.iter().filter_map(|s| s["spec"]["nodeName"].as_str()).collect())
            .unwrap_or_default();
        let ours = (0..a.nodes).filter(|i| nodes.contains(format!("{}-{i}", a.node_name).as_str())).count();
        if ours == want {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::failed(format!("bench: {ours} of {want} ResourceSlices published in time")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The namespace, DeviceClass and claim template the pods need.
async fn objects(a: &BenchClusterArgs, admin: &ApiServer) -> Result<()> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": a.namespace}});
    call(admin, "POST", "/api/v1/namespaces", Some(&ns), &[201, 409]).await?;
    if a.device_plugin {
        return Ok(());
    }
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}});
    call(admin, "POST", "/apis/resource.k8s.io/v1/deviceclasses", Some(&class), &[201, 409]).await?;
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": a.namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}});
    let path = format!("/apis/resource.k8s.io/v1/namespaces/{}/resourceclaimtemplates", a.namespace);
    call(admin, "POST", &path, Some(&template), &[201, 409]).await?;
    Ok(())
}

/// Create the P pods, `concurrency` at a time.
async fn create_pods(a: &BenchClusterArgs, admin: &ApiServer) -> Result<()> {
    let path = format!("/api/v1/namespaces/{}/pods", a.namespace);
    let next = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<Result<()>>();
    let workers = Tasks::new();
    for _ in 0..a.concurrency.min(a.pods) {
        let (next, tx, admin, path) = (next.clone(), tx.clone(), admin.clone(), path.clone());
        let (args, pods) = (PodArgs::of(a), a.pods);
        workers.spawn_joined(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= pods {
                    return;
                }
                let r = call(&admin, "POST", &path, Some(&args.pod(i)), &[201]).await.map(|_| ());
                if tx.send(r).is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let mut first_error = None;
    while let Some(r) = rx.recv().await {
        if let (Err(e), None) = (r, &first_error) {
            first_error = Some(e);
            workers.cancel();
        }
    }
    workers.stop().await;
    first_error.map_or(Ok(()), Err)
}

/// Delete what the run left: the pods still there (forced: their nodes are
/// gone), the claims and the template (the namespace stays: a cluster
/// without a namespace controller never finishes deleting one), the
/// Nodes and their Leases, the ResourceSlices and the DeviceClass.
async fn clean_up(a: &BenchClusterArgs, admin: &ApiServer, names: &[String]) {
    let ns = &a.namespace;
    let _ = call(admin, "DELETE", &format!("/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0"), None, &[200]).await;
    if !a.device_plugin {
        let claims = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims");
        let _ = call(admin, "DELETE", &claims, None, &[200]).await;
        let template = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates/{TEMPLATE}");
        let _ = call(admin, "DELETE", &template, None, &[200, 404]).await;
        let path = format!("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3D{DRIVER}");
        let _ = call(admin, "DELETE", &path, None, &[200, 404]).await;
        let _ =
            call(admin, "DELETE", &format!("/apis/resource.k8s.io/v1/deviceclasses/{DRIVER}"), None, &[200, 404]).await;
    }
    for n in names {
        let _ = call(admin, "DELETE", &format!("/api/v1/nodes/{n}"), None, &[200, 404]).await;
        let lease = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{n}");
        let _ = call(admin, "DELETE", &lease, None, &[200, 404]).await;
    }
}

pub(super) async fn run(format: Format, a: &BenchClusterArgs) -> Result<()> {
    if a.pods as u64 > a.nodes as u64 * a.devices as u64 {
        return Err(Error::usage(format!(
            "--pods {} needs {} devices but {} nodes × {} devices have {}: raise --devices or --nodes",
            a.pods,
            a.pods,
            a.nodes,
            a.devices,
            a.nodes as u64 * a.devices as u64
        )));
    }
    let admin = kube::load_kubeconfig(&a.kubeconfig)?;
    let interrupt = crate::core::interrupted();
    let dir = TempNode::new("cluster")?;
    let root = dir.tree.root.clone();
    let mut template = NodeSpec::on_tree(&NodeTree::under(&root));
    template.manager.profile = crate::kubelet::profile::Profile::of(a.kubelet_version);
    let spec = FleetSpec {
        prefix: a.node_name.clone(),
        nodes: a.nodes,
        root,
        kubeconfig: a.node_kubeconfig.clone().unwrap_or_else(|| a.kubeconfig.clone()),
        context: None,
        labels: BTreeMap::from([(FLEET_LABEL.to_string(), a.node_name.clone())]),
        devices: if a.device_plugin { vec![(RESOURCE.to_string(), a.devices)] } else { vec![] },
        drivers: if a.device_plugin { vec![] } else { vec![(DRIVER.to_string(), a.devices)] },
        template,
    };
    let mut r = ClusterReport {
        nodes: a.nodes,
        devices_per_node: a.devices,
        pods: a.pods,
        devices_via: if a.device_plugin { "device-plugin" } else { "claims" },
        load_average: load_average(),
        ..Default::default()
    };
    let (tap, mut events) = mpsc::unbounded_channel();
    let mut fleet = Fleet::new();
    let watcher = Tasks::new();
    let outcome = {
        let r = &mut r;
        let (fleet, watcher) = (&mut fleet, &watcher);
        let stages = async {
            let t0 = Instant::now();
            fleet.start(&spec, None, Some(tap)).await?;
            nodes_ready(a, &mut events, &admin).await?;
            r.nodes_ready_ms = Some(millis(t0.elapsed()));
            // The node events are not needed from here on.
            drop(events);
            objects(a, &admin).await?;

            // The namespace's pods watched from before the first is created.
            let list =
                call(&admin, "GET", &format!("/api/v1/namespaces/{}/pods?limit=1", a.namespace), None, &[200]).await?;
            if list["items"].as_array().is_some_and(|l| !l.is_empty()) {
                return Err(Error::failed(format!(
                    "bench: namespace {} has pods already; pass another --namespace",
                    a.namespace
                )));
            }
            let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
            let (tx, mut rx) = mpsc::unbounded_channel();
            let (api, ns) = (admin.clone(), a.namespace.clone());
            let stop = watcher.token().clone();
            watcher.spawn_joined(async move {
                stop.run_until_cancelled(watch_pods(api, ns, rv, tx)).await;
            });
            let mut pods = Pods::default();
            let want = a.pods as usize;
            let t1 = Instant::now();
            create_pods(a, &admin).await?;
            pods_until(&mut rx, &mut pods, a.stage_timeout, "every pod Running", |p| {
                p.running.len() + p.failed.len() >= want
            })
            .await?;
            let took = t1.elapsed();
            r.all_running_ms = Some(millis(took));
            r.pods_per_second = Some((pods.running.len() as f64 / took.as_secs_f64().max(1e-9) * 10.0).round() / 10.0);
            r.running = pods.running.len() as u64;
            r.failed = pods.failed.len() as u64;
            r.nodes_used = pods.seen.values().map(|(_, n)| n.as_str()).collect::<BTreeSet<_>>().len() as u64;

            // Deleted (a delete collection, the default grace period): until every pod is gone.
            let t2 = Instant::now();
            let path = format!("/api/v1/namespaces/{}/pods", a.namespace);
            call(&admin, "DELETE", &path, None, &[200]).await?;
            let created: BTreeSet<String> = pods.seen.keys().cloned().collect();
            pods_until(&mut rx, &mut pods, a.stage_timeout, "every pod gone", |p| created.is_subset(&p.gone)).await?;
            r.all_gone_ms = Some(millis(t2.elapsed()));
            Ok::<(), Error>(())
        };
        tokio::select! {
            o = stages => Some(o),
            _ = interrupt => None,
        }
    };
    r.peak_rss_mib = peak_rss_mib(std::process::id());
    watcher.stop().await;
    let names = fleet.names();
    fleet.stop().await;
    if !a.keep {
        clean_up(a, &admin, &names).await;
    }
    drop(dir);
    r.targets = Targets {
        running_within_60s: r.all_running_ms.map(|v| judged(v <= RUNNING_TARGET_MS && r.failed == 0)),
        rss_under_500_mib: r.peak_rss_mib.map(|v| judged(v < RSS_TARGET_MIB)),
    };
    match outcome {
        Some(Err(e)) => return Err(e),
        Some(Ok(())) => {}
        None => {
            r.interrupted = true;
            eprintln!("dpctl: interrupted: the figures cover the stages finished so far ('-' was not measured)");
        }
    }
    show(format, &r)
}

fn show(format: Format, r: &ClusterReport) -> Result<()> {
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "-".into());
    let mark = |t: Option<&'static str>| match t {
        Some("met") => " (target met)",
        Some(_) => " (target MISSED)",
        None => "",
    };
    match format {
        Format::Table => emit(&table(
            &["MEASUREMENT", "VALUE"],
            &[
                vec![
                    format!(
                        "{} nodes × {} devices ({}) registered and ready",
                        r.nodes, r.devices_per_node, r.devices_via
                    ),
                    ms(r.nodes_ready_ms),
                ],
                vec![
                    format!("{} pods Running on {} nodes ({} failed)", r.running, r.nodes_used, r.failed),
                    format!(
                        "{}{}{}",
                        ms(r.all_running_ms),
                        r.pods_per_second.map(|p| format!(" ({p}/s)")).unwrap_or_default(),
                        mark(r.targets.running_within_60s)
                    ),
                ],
                vec!["every pod gone after a delete".into(), ms(r.all_gone_ms)],
                vec![
                    "peak RSS (the nodes, their devices and the bench, one process)".into(),
                    format!(
                        "{}{}",
                        r.peak_rss_mib.map(|v| format!("{v} MiB")).unwrap_or_else(|| "unknown".into()),
                        mark(r.targets.rss_under_500_mib)
                    ),
                ],
                vec![
                    "load average (1 min) at the start".into(),
                    r.load_average.map(|l| format!("{l:.2}")).unwrap_or_else(|| "unknown".into()),
                ],
            ],
        )),
        f => emit(&structured(f, r)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_tolerates_the_not_ready_taint_and_fits_only_the_benchs_nodes() {
        let args = PodArgs { namespace: "ns".into(), node_name: "b".into(), device_plugin: false };
        let p = args.pod(7);
        assert_eq!(p["metadata"]["name"], "p7");
        assert_eq!(p["spec"]["nodeSelector"][FLEET_LABEL], "b");
        assert_eq!(p["spec"]["tolerations"][0]["key"], "node.kubernetes.io/not-ready");
        assert_eq!(p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], TEMPLATE);
        let dp = PodArgs { device_plugin: true, ..args }.pod(0);
        assert_eq!(dp["spec"]["containers"][0]["resources"]["limits"][RESOURCE], "1");
        assert!(dp["spec"]["resourceClaims"].is_null());
    }
}
