//! `dpctl compare`: a device plugin and its DRA replacement side by side.
//! Two mock kubelets (in this process, in temp dirs): one runs the device
//! plugin, the other the DRA driver with a DeviceClass that maps the same
//! extended resource to it (KEP-5004). The same unchanged pod specs go to
//! both; per container, what each kind hands the runtime is compared — the
//! Allocate answer (envs, mounts, device nodes, annotations, CDI devices) on
//! one side, the CDI edits of the devices the kubelet maps to the container
//! from the driver's CDI specs on the other ([`edits`]).

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::log::{LogFormat, Logger};
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::lifecycle::Phase;
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::NodeTree;
use crate::render::{emit, structured, table, Format};
use crate::suite::env::{PluginProcess, Tree};
use clap::Args;
use edits::{Allow, Difference, Edits};
use identity::Device;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub mod edits;
pub mod identity;

/// `dpctl compare`: its surface.
pub const COMMAND: Spec = Spec {
    name: "compare",
    about: "Run a device plugin and its DRA replacement side by side and compare what containers get",
    group: super::surface::Group::Ci,
    args: surface::args::<CompareArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<CompareArgs>,
};

const EXAMPLES: &str = "Examples:
  # the same pods served by dpctl serve and by dpctl dra serve, configured alike
  dpctl compare --resource example.com/gpu -- \\
    dpctl serve --resource example.com/gpu --count 8 --env MODE=fast --plugin-dir {plugin-dir} -- \\
    dpctl --kubelet-root-dir {kubelet-root-dir} dra serve --driver gpu.example.com --devices 8 \\
      --env MODE=fast --cdi-dir {cdi-dir} --kubeconfig {kubeconfig} --node-name {node-name}
  # device IDs differ by nature: allow that env var to differ
  dpctl compare --resource nvidia.com/gpu --allow env:NVIDIA_VISIBLE_DEVICES --junit cmp.xml -- PLUGIN… -- DRIVER…";

/// `dpctl compare`
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The extended resource both serve (the pods ask for it; the DRA side's DeviceClass maps it)
    #[arg(long, value_name = "NAME")]
    pub resource: String,
    /// A difference to accept: a kind (env, device, mount, annotation, cdi, admission, count, numa, identity) or KIND:KEY (repeatable)
    #[arg(long = "allow", value_name = "KIND[:KEY]")]
    pub allow: Vec<Allow>,
    /// Also write the result as JUnit XML to FILE (one test case per pod container)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The device plugin's command, `--`, then the DRA driver's. Placeholders: {plugin-dir} and
    /// {kubelet-socket} in the plugin's; {kubelet-root-dir}, {plugins-registry-dir}, {cdi-dir},
    /// {kubeconfig} and {node-name} in the driver's (as dpctl test and dpctl test --dra substitute them)
    #[arg(last = true, value_name = "PLUGIN-COMMAND -- DRIVER-COMMAND")]
    pub commands: Vec<String>,
}

impl Invocation for CompareArgs {
    fn workers(&self) -> usize {
        2
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// A container of a pod spec: name, whether an init container, devices.
type Ctr = (&'static str, bool, u64);

/// The pod specs both kinds get.
const PODS: &[(&str, &[Ctr])] = &[
    ("one-device", &[("main", false, 1)]),
    ("several-devices", &[("main", false, 2)]),
    ("several-containers", &[("a", false, 1), ("b", false, 1)]),
    ("init-container", &[("init", true, 1), ("main", false, 1)]),
];

/// The DeviceClass that maps the resource on the DRA side.
const CLASS: &str = "dpctl-compare";

fn pod_yaml(name: &str, containers: &[(&str, bool, u64)], resource: &str) -> String {
    let ctr =
        |c: &(&str, bool, u64)| format!("  - name: {}\n    resources: {{limits: {{{resource}: {}}}}}\n", c.0, c.2);
    let init: String = containers.iter().filter(|c| c.1).map(ctr).collect();
    let app: String = containers.iter().filter(|c| !c.1).map(ctr).collect();
    let init = if init.is_empty() { String::new() } else { format!("  initContainers:\n{init}") };
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {name}-uid}}\nspec:\n{init}  containers:\n{app}")
}

/// Wait (at most `secs`) until `f` says yes to an event; None when time ran out.
async fn wait_event<T>(
    rx: &mut mpsc::UnboundedReceiver<Arc<Stamped>>,
    secs: u64,
    mut f: impl FnMut(&KubeletEvent) -> Option<T>,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => {
                if let Some(t) = f(&e.event) {
                    return Some(t);
                }
            }
            _ => return None,
        }
    }
}

/// One side: its temp tree, engine, events and process.
struct Side {
    tree: Tree,
    node: Node,
    events: mpsc::UnboundedReceiver<Arc<Stamped>>,
    process: Option<PluginProcess>,
}

impl Side {
    async fn start(api: bool) -> Result<Side> {
        let tree = Tree::new()?;
        let bus = EventBus::new(Logger::to_file(LogFormat::Human, &tree.logs.join("kubelet.log"))?);
        let events = bus.subscribe();
        let mut spec = NodeSpec::on_tree(&tree);
        if api {
            spec.api_server = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        }
        let node = Node::start(spec, bus).await?;
        Ok(Side { tree, node, events, process: None })
    }

    fn spawn(&mut self, argv: &[String]) -> Result<()> {
        self.process = Some(PluginProcess::spawn(argv, &[], &self.tree.logs.join("plugin.log"))?);
        Ok(())
    }

    fn write(&self, name: &str, text: &str) -> Result<()> {
        let f = self.tree.manifests.join(name);
        crate::core::files::write_atomic(&f, text.as_bytes()).map_err(|e| Error::io(&f, "cannot write a pod spec", &e))
    }

    fn log_tail(&self) -> String {
        crate::suite::env::log_tail(&self.tree.logs.join("plugin.log"), 5)
    }

    async fn stop(self) {
        if let Some(p) = self.process {
            p.stop(Duration::from_secs(5)).await;
        }
        self.node.stop().await;
    }
}

/// `{plugin-dir}` and `{kubelet-socket}` in the device plugin's command.
fn plugin_argv(argv: &[String], tree: &NodeTree) -> Vec<String> {
    let (dir, sock) = (tree.plugin_dir.display().to_string(), tree.kubelet_socket().display().to_string());
    argv.iter().map(|a| a.replace("{plugin-dir}", &dir).replace("{kubelet-socket}", &sock)).collect()
}

/// Split `PLUGIN… -- DRIVER…`.
fn split(commands: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let usage = || {
        Error::usage(
            "give both commands after --, separated by another --: dpctl compare --resource R -- PLUGIN-COMMAND… -- DRIVER-COMMAND…",
        )
    };
    let at = commands.iter().position(|a| a == "--").ok_or_else(usage)?;
    let (a, b) = (commands[..at].to_vec(), commands[at + 1..].to_vec());
    if a.is_empty() || b.is_empty() {
        return Err(usage());
    }
    Ok((a, b))
}

fn cdi_specs(dir: &Path) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let ext = p.extension().map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
        if !["json", "yaml", "yml"].contains(&ext.as_str()) {
            continue;
        }
        if let Ok(text) = crate::core::limits::read_file(&p, 1 << 20, "CDI spec") {
            out.push((text, ext != "json"));
        }
    }
    out
}

/// What the comparison found.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    resource: String,
    /// `pod/container`, each compared.
    containers: Vec<String>,
    differences: Vec<Difference>,
    /// Differences no --allow accepts.
    failed: usize,
    /// `pod/container` → what each kind hands the runtime (device plugin, DRA driver).
    edits: BTreeMap<String, (Edits, Edits)>,
    /// `pod/container` → the devices each kind handed it (device plugin, DRA driver).
    devices: BTreeMap<String, (Vec<Device>, Vec<Device>)>,
}

/// The devices of a slice: `driver/pool/device` → NUMA nodes, identity attributes.
type SliceIndex = BTreeMap<String, (BTreeSet<i64>, BTreeMap<String, String>)>;

/// Per (pod, container): the devices PodResources lists — the resource's
/// device IDs with their NUMA nodes, the DRA devices with what `slices` says of them.
async fn devices(socket: &Path, res: &str, slices: &SliceIndex) -> Result<BTreeMap<(String, String), Vec<Device>>> {
    use crate::api::podresources::ListPodResourcesRequest;
    let mut client = crate::client::podresources::connect(socket, Duration::from_secs(5), 16 << 20).await?;
    let list = client
        .list(ListPodResourcesRequest {})
        .await
        .map_err(|e| Error::failed(format!("PodResources List on {}: {}", socket.display(), e.message())))?
        .into_inner();
    let mut out = BTreeMap::new();
    for p in list.pod_resources {
        for c in p.containers {
            let mut v = Vec::new();
            for d in c.devices.iter().filter(|d| d.resource_name == res) {
                let numa: BTreeSet<i64> = d.topology.iter().flat_map(|t| t.nodes.iter().map(|n| n.id)).collect();
                v.extend(d.device_ids.iter().map(|id| Device {
                    id: id.clone(),
                    numa: numa.clone(),
                    ..Default::default()
                }));
            }
            for r in c.dynamic_resources.iter().flat_map(|d| d.claim_resources.iter()) {
                let id = format!("{}/{}/{}", r.driver_name, r.pool_name, r.device_name);
                let (numa, attributes) = slices.get(&id).cloned().unwrap_or_default();
                v.push(Device { id, numa, attributes });
            }
            out.insert((p.name.clone(), c.name), v);
        }
    }
    Ok(out)
}

/// Per (pod, container): the DRA devices the kubelet gives the container
/// (the devices of its requests, as GetResources picks their CDI devices:
/// the node view's `givenDevices`; PodResources lists a claim's every
/// device for each container using it), with what `slices` says of them.
fn given_devices(dra_pods: &[serde_json::Value], slices: &SliceIndex) -> BTreeMap<(String, String), Vec<Device>> {
    let mut out = BTreeMap::new();
    for p in dra_pods {
        let pod = p["pod"].as_str().unwrap_or("").rsplit('/').next().unwrap_or_default().to_string();
        for (ctr, ids) in p["givenDevices"].as_object().into_iter().flatten() {
            let v = ids
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str())
                .map(|id| {
                    let (numa, attributes) = slices.get(id).cloned().unwrap_or_default();
                    Device { id: id.to_string(), numa, attributes }
                })
                .collect();
            out.insert((pod.clone(), ctr.clone()), v);
        }
    }
    out
}

/// The DRA side's ResourceSlices, from its API server.
async fn slice_index(tree: &Tree) -> Result<SliceIndex> {
    use crate::plugin::dra::slices;
    let api = slices::load_kubeconfig(&tree.root.join("kubeconfig"))?;
    let (st, body) = slices::request(&api, "GET", slices::SLICES_PATH, None, Duration::from_secs(5)).await?;
    if !(200..300).contains(&st) {
        return Err(Error::failed(format!("list ResourceSlices: the mock kubelet's API server answered {st}")));
    }
    Ok(identity::slice_index(&body))
}

/// `dpctl demo --extended`: `dpctl serve` and `dpctl dra serve` (this
/// binary) configured alike, the same pods served both ways.
pub async fn demo(ctx: &Ctx) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find this dpctl binary to run serve and dra serve: {e}")))?
        .display()
        .to_string();
    let resource = "example.com/gpu";
    let line = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
    let mut commands = vec![exe.clone()];
    commands.extend(line(&format!(
        "serve --resource {resource} --count 8 --env MODE=fast --plugin-dir {{plugin-dir}} -- {exe} --kubelet-root-dir {{kubelet-root-dir}} dra serve --driver gpu.example.com --devices 8 --env MODE=fast --cdi-dir {{cdi-dir}} --kubeconfig {{kubeconfig}} --node-name {{node-name}}"
    )));
    let args = CompareArgs { resource: resource.into(), allow: vec![], junit: None, commands };
    if ctx.format == Format::Table {
        emit(&format!(
            "dpctl demo --extended: one pod spec, two plugin kinds. The pods ask for {resource}; one mock kubelet\n\
             runs dpctl serve (a device plugin), the other dpctl dra serve (a DRA driver) with a DeviceClass\n\
             whose extendedResourceName is {resource} (KEP-5004). Each container's runtime edits are compared.\n"
        ))?;
    }
    run(ctx, &args).await?;
    if ctx.format == Format::Table {
        emit(&format!(
            "\nTry it with your own pair (see docs/migrate.md):\n  dpctl compare --resource {resource} -- PLUGIN-COMMAND… -- DRIVER-COMMAND…\n"
        ))?;
    }
    Ok(())
}

/// Run the comparison.
pub async fn run(ctx: &Ctx, a: &CompareArgs) -> Result<()> {
    let (plugin, driver) = split(&a.commands)?;
    if !crate::kubelet::manifest::is_extended(&a.resource) {
        return Err(Error::usage(format!(
            "--resource {}: not an extended resource name; give one like vendor.example/gpu",
            a.resource
        )));
    }
    let started = Instant::now();
    let mut dp = Side::start(false).await?;
    let mut dra = Side::start(true).await?;
    let r = compare(a, &plugin, &driver, &mut dp, &mut dra).await;
    dp.stop().await;
    dra.stop().await;
    let report = r?;
    if let Some(f) = &a.junit {
        let records = records(&report, started.elapsed());
        crate::core::files::write_atomic(f, crate::suite::report::junit(&records, started.elapsed()).as_bytes())
            .map_err(|e| Error::io(f, "cannot write the JUnit report", &e))?;
    }
    if ctx.format == Format::Table {
        emit(&render(&report))?;
    } else {
        emit(&structured(ctx.format, &report)?)?;
    }
    if report.failed > 0 {
        return Err(Error::failed(format!(
            "{} difference(s) between the device plugin and the DRA driver (accept one with --allow KIND:KEY)",
            report.failed
        )));
    }
    Ok(())
}

async fn compare(
    a: &CompareArgs,
    plugin: &[String],
    driver: &[String],
    dp: &mut Side,
    dra: &mut Side,
) -> Result<Report> {
    let res = a.resource.clone();
    dp.spawn(&plugin_argv(plugin, &dp.tree))?;
    let argv: Vec<String> = driver.iter().map(|x| crate::suite::dra::substitute(x, &dra.tree)).collect();
    dra.spawn(&argv)?;
    let up = wait_event(&mut dp.events, 15, |e| {
        matches!(e, KubeletEvent::Devices { resource, allocatable, .. } if *resource == res && *allocatable > 0)
            .then_some(())
    })
    .await;
    if up.is_none() {
        return Err(Error::failed(format!(
            "the device plugin did not register {res} with healthy devices within 15s; its log: {}",
            dp.log_tail()
        )));
    }
    let name = wait_event(&mut dra.events, 15, |e| match e {
        KubeletEvent::DraRegistered { driver, .. } => Some(driver.clone()),
        _ => None,
    })
    .await
    .ok_or_else(|| Error::failed(format!("the DRA driver did not register within 15s; its log: {}", dra.log_tail())))?;
    let class = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: {CLASS}}}\nspec:\n  extendedResourceName: {res}\n  selectors:\n  - cel: {{expression: 'device.driver == \"{name}\"'}}\n"
    );
    dra.write("class.yaml", &class)?;
    wait_event(&mut dra.events, 10, |e| matches!(e, KubeletEvent::DraObject { .. }).then_some(())).await;
    for (pod, ctrs) in PODS {
        let text = pod_yaml(pod, ctrs, &res);
        dp.write(&format!("{pod}.yaml"), &text)?;
        dra.write(&format!("{pod}.yaml"), &text)?;
    }
    // Each pod admitted or refused on each side.
    let mut admitted_dp: BTreeMap<String, Admission> = BTreeMap::new();
    wait_event(&mut dp.events, 30, |e| {
        match e {
            KubeletEvent::PodAdmitted { pod, .. } => {
                admitted_dp.insert(pod.trim_start_matches("default/").to_string(), Admission::Admitted);
            }
            KubeletEvent::PodRejected { file, pod_reason, reason } => {
                let p = Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                admitted_dp.insert(p, Admission::Refused(format!("{pod_reason}: {reason}")));
            }
            _ => {}
        }
        (admitted_dp.len() >= PODS.len()).then_some(())
    })
    .await;
    let mut admitted_dra: BTreeMap<String, Admission> = BTreeMap::new();
    wait_event(&mut dra.events, 30, |e| {
        match e {
            KubeletEvent::PodPhase { pod, phase: Phase::Running, .. } => {
                admitted_dra.insert(pod.trim_start_matches("default/").to_string(), Admission::Admitted);
            }
            KubeletEvent::PodRejected { file, pod_reason, reason } => {
                let p = Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                admitted_dra.insert(p, Admission::Refused(format!("{pod_reason}: {reason}")));
            }
            KubeletEvent::ClaimPrepareFailed { pod, error, attempt } if *attempt >= 3 => {
                admitted_dra.insert(pod.trim_start_matches("default/").to_string(), Admission::Refused(error.clone()));
            }
            _ => {}
        }
        (admitted_dra.len() >= PODS.len()).then_some(())
    })
    .await;
    // The device plugin's side: the Allocate answers the kubelet checkpointed.
    let dp_cdi = edits::cdi_index(&cdi_specs(&dp.tree.cdi_dir()));
    let mut side_a: BTreeMap<(String, String), Edits> = BTreeMap::new();
    if let Ok(Some(ck)) = crate::client::checkpoint::read(&dp.tree.checkpoint()) {
        for entry in &ck.checkpoint.data.pod_device_entries {
            let pod = entry.pod_uid.trim_end_matches("-uid").to_string();
            let e = entry.decode_alloc_resp().map(|r| edits::from_allocate(&r, &dp_cdi)).unwrap_or_default();
            side_a.entry((pod, entry.container_name.clone())).or_default().extend(e);
        }
    }
    // The DRA side: the CDI devices the kubelet maps to each container, resolved.
    let dra_cdi = edits::cdi_index(&cdi_specs(&dra.tree.cdi_dir()));
    let mut side_b: BTreeMap<(String, String), Edits> = BTreeMap::new();
    let dra_pods = dra.node.status().await.map(|n| n.dra_pods).unwrap_or_default();
    for p in &dra_pods {
        let pod = p["pod"].as_str().unwrap_or("").trim_start_matches("default/").to_string();
        for (ctr, ids) in p["extendedCdiDevices"].as_object().into_iter().flatten() {
            let ids: Vec<String> =
                ids.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect();
            side_b.insert((pod.clone(), ctr.clone()), edits::from_cdi(&ids, &dra_cdi));
        }
    }
    // The devices each kind handed each container: identities and topology.
    let devs_a = devices(&dp.tree.pod_resources, &res, &SliceIndex::new()).await?;
    // The containers PodResources lists (app containers and sidecars, as for side A).
    let listed = devices(&dra.tree.pod_resources, &res, &SliceIndex::new()).await?;
    let mut given = given_devices(&dra_pods, &slice_index(&dra.tree).await?);
    let devs_b: BTreeMap<(String, String), Vec<Device>> =
        listed.into_keys().map(|k| (given.remove(&k).unwrap_or_default(), k)).map(|(v, k)| (k, v)).collect();
    let mut differences = Vec::new();
    let mut containers = Vec::new();
    let mut both = BTreeMap::new();
    let mut both_devs = BTreeMap::new();
    for (pod, ctrs) in PODS {
        let (x, y) = (admitted_dp.get(*pod), admitted_dra.get(*pod));
        let word = |r: Option<&Admission>| match r {
            Some(Admission::Admitted) => "admitted".to_string(),
            Some(Admission::Refused(e)) => format!("refused ({e})"),
            None => "no decision within 30s".to_string(),
        };
        if word(x) != word(y) || !matches!(x, Some(Admission::Admitted)) {
            let allowed = a.allow.iter().any(|w| w.kind == "admission");
            differences.push(Difference {
                pod: pod.to_string(),
                container: "-".into(),
                kind: "admission".into(),
                key: "pod".into(),
                device_plugin: Some(word(x)),
                dra_driver: Some(word(y)),
                allowed,
            });
        }
        for (c, _, _) in ctrs.iter() {
            containers.push(format!("{pod}/{c}"));
            let key = (pod.to_string(), c.to_string());
            let empty = Edits::default();
            let (ea, eb) = (side_a.get(&key).unwrap_or(&empty), side_b.get(&key).unwrap_or(&empty));
            differences.extend(edits::diff(pod, c, ea, eb, &a.allow));
            both.insert(format!("{pod}/{c}"), (ea.clone(), eb.clone()));
            let (da, db) =
                (devs_a.get(&key).cloned().unwrap_or_default(), devs_b.get(&key).cloned().unwrap_or_default());
            differences.extend(identity::diff(pod, c, &da, &db, &a.allow));
            both_devs.insert(format!("{pod}/{c}"), (da, db));
        }
    }
    let failed = differences.iter().filter(|d| !d.allowed).count();
    Ok(Report { resource: a.resource.clone(), containers, differences, failed, edits: both, devices: both_devs })
}

fn render(r: &Report) -> String {
    let mut out = format!(
        "dpctl compare: {} pod container(s) asking for {}, served by the device plugin and by the DRA driver\n\n",
        r.containers.len(),
        r.resource
    );
    let words = |e: &Edits| {
        let w: Vec<String> =
            e.0.iter().flat_map(|(k, m)| m.iter().map(move |(key, v)| format!("{k} {key}={v}"))).collect();
        if w.is_empty() {
            "-".to_string()
        } else {
            w.join("; ")
        }
    };
    let rows: Vec<Vec<String>> =
        r.containers.iter().filter_map(|c| r.edits.get(c).map(|(a, b)| vec![c.clone(), words(a), words(b)])).collect();
    out.push_str(&table(&["POD/CONTAINER", "DEVICE PLUGIN (Allocate)", "DRA DRIVER (CDI edits)"], &rows));
    out.push_str("\n\n");
    let rows: Vec<Vec<String>> = r
        .containers
        .iter()
        .filter_map(|c| r.devices.get(c).map(|(a, b)| vec![c.clone(), identity::words(a), identity::words(b)]))
        .collect();
    out.push_str(&table(&["POD/CONTAINER", "DEVICE PLUGIN (device IDs)", "DRA DRIVER (prepared devices)"], &rows));
    out.push_str("\n\n");
    if r.differences.is_empty() {
        out.push_str(
            "no difference: each container gets the same env, device nodes, mounts, annotations and CDI devices,\n\
             as many devices, on the same NUMA nodes where both kinds expose them\n",
        );
        return out;
    }
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = r
        .differences
        .iter()
        .map(|d| {
            vec![
                d.pod.clone(),
                d.container.clone(),
                d.kind.clone(),
                d.key.clone(),
                dash(&d.device_plugin),
                dash(&d.dra_driver),
                if d.allowed { "allowed".into() } else { "DIFFERENT".into() },
            ]
        })
        .collect();
    out.push_str(&table(&["POD", "CONTAINER", "KIND", "KEY", "DEVICE PLUGIN", "DRA DRIVER", ""], &rows));
    out.push('\n');
    out
}

/// One JUnit test case per pod container (and per pod admission).
fn records(r: &Report, took: Duration) -> Vec<crate::suite::Record> {
    use crate::suite::{Evidence, Record, Verdict};
    let mut out = Vec::new();
    for c in &r.containers {
        let (pod, ctr) = c.split_once('/').unwrap_or((c, ""));
        let bad: Vec<String> = r
            .differences
            .iter()
            .filter(|d| d.pod == pod && (d.container == ctr || d.container == "-") && !d.allowed)
            .map(|d| {
                format!("{} {}: device plugin {:?}, DRA driver {:?}", d.kind, d.key, d.device_plugin, d.dra_driver)
            })
            .collect();
        out.push(Record {
            id: format!("CMP {c}"),
            group: "compare".into(),
            title: format!("{c} gets the same from both kinds"),
            rule: "a DRA replacement hands each container what the device plugin's Allocate did".into(),
            source: "KEP-5004; kubernetes pkg/kubelet/cm/dra/manager.go GetResources".into(),
            result: if bad.is_empty() { Verdict::Pass } else { Verdict::Fail },
            duration: took / u32::try_from(r.containers.len().max(1)).unwrap_or(1),
            detail: String::new(),
            evidence: (!bad.is_empty()).then(|| Evidence {
                rpc: "Allocate (device plugin) vs the CDI edits of NodePrepareResources (DRA driver)".into(),
                answer: bad.join("; "),
                fix: "make the driver's CDI specs give what Allocate gave, or accept it with --allow KIND:KEY".into(),
                log: None,
            }),
            kubelet_version: None,
        });
    }
    out
}

/// What a kubelet decided about one pod of the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Admission {
    /// Admitted (the device plugin's side) or running (the DRA side).
    Admitted,
    /// Refused, in the kubelet's words (its event's reason or error).
    Refused(String),
}
