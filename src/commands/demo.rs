//! `dpctl demo`: in a fresh temp directory, a mock kubelet and a simulated
//! plugin (both in this process), a sample pod admitted, the result shown,
//! and the commands to poke them printed; runs until Ctrl-C.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::log::{LogFormat, Logger};
use crate::core::task::Tasks;
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::node::{Node, NodeSpec, NodeStatus};
use crate::kubelet::tree::{NodeTree, TempNode};
use crate::plugin::config::{AllocateTemplate, RegistrationMode, ResourceConfig, Scope};
use crate::plugin::registrar::Settings;
use crate::render::{emit, indent, table};
use clap::Args;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// `dpctl demo`: its surface.
pub const COMMAND: Spec = Spec {
    name: "demo",
    about:
        "A first minute with dpctl: a mock kubelet, a simulated plugin (--dra: a DRA driver) and a pod, in a temp dir",
    group: super::surface::Group::GettingStarted,
    args: surface::args::<DemoArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: Some(
        "demo prints a walkthrough; use dpctl node -o json or dpctl podresources list -o json against it",
    ),
    parse: surface::parse::<DemoArgs>,
};

const EXAMPLES: &str = "Examples:
  # Mock kubelet + simulated plugin + a pod, until Ctrl-C
  dpctl demo
  # the same, printed once, then cleaned up
  dpctl demo --once
  # DRA: a simulated DRA driver, a ResourceClaim allocated, prepared and in PodResources
  dpctl demo --dra --once
  # DRA with device metadata (KEP-5304): the file the driver writes and the CDI mount that puts it in the container
  dpctl demo --dra --device-metadata --once
  # DRA with shares (KEP-5075): two claims each get a share of one device, each its shareID and CDI device
  dpctl demo --dra --shares --once";

/// `dpctl demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Show the result and exit instead of running until Ctrl-C
    #[arg(long)]
    pub once: bool,
    /// Demonstrate DRA instead: a simulated DRA driver, a ResourceClaim allocated, prepared and in PodResources
    #[arg(long)]
    pub dra: bool,
    /// With --dra: the driver also writes device metadata (KEP-5304), as `dra serve --device-metadata`
    /// does; the demo shows the file and the CDI spec that mounts it into the container
    #[arg(long, requires = "dra")]
    pub device_metadata: bool,
    /// With --dra: two claims share one device (consumable capacity, KEP-5075), as `dra serve
    /// --shared-capacity` publishes it; the demo shows each claim's shareID and CDI device
    #[arg(long, requires = "dra")]
    pub shares: bool,
    /// Demonstrate DRA-backed extended resources: the same pods served by a device plugin and by a DRA
    /// driver whose DeviceClass maps the resource, compared per container (dpctl compare)
    #[arg(long, conflicts_with = "dra")]
    pub extended: bool,
    /// The demo's kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

impl Invocation for DemoArgs {
    fn workers(&self) -> usize {
        2
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

const RESOURCE: &str = "example.com/gpu";
const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: demo-trainer
  namespace: default
spec:
  containers:
  - name: trainer
    image: example.com/trainer:latest
    resources:
      limits:
        example.com/gpu: 2
";

/// Wait (at most `secs`) for the first kubelet event `f` accepts.
async fn wait_for(
    events: &mut mpsc::UnboundedReceiver<Arc<Stamped>>,
    what: &str,
    secs: u64,
    f: impl Fn(&KubeletEvent) -> bool,
) -> Result<()> {
    let late =
        || Error::failed(format!("demo: {what} did not happen within {secs}s; see the logs in the demo directory"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) | Ok(None) => return Err(late()),
            Ok(Some(e)) if f(&e.event) => return Ok(()),
            Ok(Some(_)) => {}
        }
    }
}

fn dpctl_hint() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.to_path_buf();
    let on_path = std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d == dir));
    (!on_path).then(|| format!("alias dpctl='{}'", exe.display()))
}

fn allocation_lines(checkpoint: &Path) -> Vec<String> {
    let Ok(Some(l)) = crate::client::checkpoint::read(checkpoint) else { return vec![] };
    let mut out = Vec::new();
    for e in l.checkpoint.data.pod_device_entries {
        if let Ok(r) = e.decode_alloc_resp() {
            out.extend(r.envs.iter().map(|(k, v)| format!("env  {k}={v}")));
            out.extend(r.cdi_devices.iter().map(|c| format!("cdi  {}", c.name)));
        }
    }
    out
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &DemoArgs) -> Result<()> {
    if a.dra {
        let variant = super::demo_dra::Variant { metadata: a.device_metadata, shares: a.shares };
        return super::demo_dra::run(ctx, a.once, variant).await;
    }
    if a.extended {
        return super::compare::demo(ctx).await;
    }
    let node_dir = TempNode::new("demo")?;
    let tree = node_dir.tree.clone();
    let (root, dp, manifests) = (tree.root.clone(), tree.plugin_dir.clone(), tree.manifests.clone());
    let (kubelet_log, plugin_log) = (tree.logs.join("kubelet.log"), tree.logs.join("plugin.log"));
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::failed(format!("cannot listen for SIGHUP: {e}")))?;
    let bus = EventBus::new(Logger::to_file(LogFormat::Human, &kubelet_log)?);
    let mut events = bus.subscribe();
    let mut spec = NodeSpec { plugins_registry_dir: None, ..NodeSpec::on_tree(&tree) };
    spec.manager.profile = crate::kubelet::profile::Profile::of(a.kubelet_version);
    let node = Node::start(spec, bus).await?;
    let ksock = tree.kubelet_socket();

    let gpu = gpu_config();
    let plugin_settings = Settings {
        plugin_dir: dp.clone(),
        socket_name: None,
        kubelet_socket: ksock.clone(),
        mode: RegistrationMode::Kubelet,
        registry_dir: root.join("plugins_registry"),
        register: true,
        retry: false,
        reregister_on_disconnect: false,
        timeout: ctx.timeout,
        host_root: Default::default(), // a private temp tree
    };
    let plog = Logger::to_file(LogFormat::Human, &plugin_log)?;
    let control = crate::plugin::control::default_socket(&dp);
    // The plugin is a task of the demo: stopped and awaited before it returns.
    let tasks = Tasks::new();
    let (plugin_done_tx, mut plugin_done) = watch::channel(None::<String>);
    {
        let plugin = tasks.child();
        tasks.spawn_joined(async move {
            let r = crate::plugin::run::run(&[gpu], plugin_settings, Some(control), plog, plugin).await;
            let _ = plugin_done_tx
                .send(Some(r.err().map(|e| e.to_string()).unwrap_or_else(|| "the plugin stopped".into())));
        });
    }
    let manifest = manifests.join("demo-trainer.yaml");
    let work = async {
        wait_for(
            &mut events,
            "the plugin's registration",
            10,
            |e| matches!(e, KubeletEvent::Devices { resource, allocatable: 4, .. } if resource == RESOURCE),
        )
        .await?;
        crate::core::files::write_atomic(&manifest, POD.as_bytes())
            .map_err(|e| Error::io(&manifest, "cannot write the sample pod", &e))?;
        wait_for(&mut events, "the sample pod's admission", 10, |e| matches!(e, KubeletEvent::PodAdmitted { .. })).await
    };
    let outcome = node.race(work, &mut plugin_done, "the plugin").await;
    let n = match outcome {
        Ok(()) => node.status().await.ok_or_else(|| Error::failed("the mock kubelet is restarting")),
        Err(e) => Err(e),
    };
    let n = match n {
        Ok(n) => n,
        Err(e) => {
            tasks.stop().await;
            node.stop().await;
            return Err(e);
        }
    };
    emit(&walkthrough(&n, &tree, &manifest, a.once))?;

    if !a.once {
        run_until_stopped(&node, &mut plugin_done, &mut hup).await;
    }
    tasks.stop().await;
    node.stop().await;
    Ok(())
}

/// The simulated GPU resource the demo serves: 4 devices on 2 NUMA nodes,
/// with PreStartContainer, GetPreferredAllocation and a CDI device per GPU.
fn gpu_config() -> ResourceConfig {
    ResourceConfig {
        resource: RESOURCE.into(),
        socket_name: Some("gpu.sock".into()),
        count: Some(4),
        numa_nodes: Some(2),
        pre_start: true,
        preferred_allocation: true,
        allocate: Some(AllocateTemplate {
            container: Scope {
                envs: [("GPU_VISIBLE_DEVICES".to_string(), "{ids}".to_string())].into_iter().collect(),
                ..Default::default()
            },
            device: Scope { cdi_devices: vec![format!("{RESOURCE}={{id}}")], ..Default::default() },
        }),
        ..Default::default()
    }
}

/// Serve until Ctrl-C or either role stops; SIGHUP restarts the kubelet.
async fn run_until_stopped(
    node: &Node,
    plugin_done: &mut watch::Receiver<Option<String>>,
    hup: &mut tokio::signal::unix::Signal,
) {
    let interrupted = crate::core::interrupted();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            _ = &mut interrupted => break,
            _ = node.finished() => break,
            _ = plugin_done.wait_for(Option::is_some) => break,
            Some(()) = hup.recv() => {
                if node.restart("SIGHUP").await.is_err() {
                    break;
                }
            }
        }
    }
}

/// What the demo prints once the pod is admitted: the resource, the pod's
/// devices, the Allocate answer, and commands to try next.
fn walkthrough(n: &NodeStatus, tree: &NodeTree, manifest: &Path, once: bool) -> String {
    let (root, dp, manifests, pr_sock) = (&tree.root, &tree.plugin_dir, &tree.manifests, &tree.pod_resources);
    let (kubelet_log, plugin_log) = (tree.logs.join("kubelet.log"), tree.logs.join("plugin.log"));
    let mut out =
        format!("dpctl demo: a mock kubelet and a simulated device plugin, running in {}\n\n", root.display());
    out.push_str(&format!("1. The plugin registered {RESOURCE} with the kubelet (4 devices on 2 NUMA nodes):\n\n"));
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    let rows: Vec<Vec<String>> = n
        .resources
        .iter()
        .map(|r| vec![s(&r["resource"]), s(&r["capacity"]), s(&r["allocatable"]), s(&r["allocated"]), s(&r["state"])])
        .collect();
    out.push_str(&indent(&table(&["RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "STATE"], &rows)));
    out.push_str(&format!("\n\n2. A pod asking for 2 GPUs was admitted ({}):\n\n", manifest.display()));
    let mut prow = Vec::new();
    let mut held: Vec<String> = Vec::new();
    for p in &n.pods {
        for c in p["containers"].as_array().into_iter().flatten() {
            for (res, by_numa) in c["resources"].as_object().into_iter().flatten() {
                let ids: Vec<String> = by_numa
                    .as_object()
                    .into_iter()
                    .flatten()
                    .flat_map(|(_, l)| l.as_array().cloned().unwrap_or_default())
                    .map(|v| s(&v))
                    .collect();
                let numa: Vec<String> =
                    by_numa.as_object().into_iter().flatten().map(|(k, _)| k.clone()).filter(|k| k != "-1").collect();
                held.extend(ids.iter().cloned());
                prow.push(vec![s(&p["name"]), s(&c["name"]), res.clone(), ids.join(","), numa.join(",")]);
            }
        }
    }
    out.push_str(&indent(&table(&["POD", "CONTAINER", "RESOURCE", "DEVICES", "NUMA"], &prow)));
    let lines = allocation_lines(&tree.checkpoint());
    if !lines.is_empty() {
        out.push_str("\n\n   The plugin's Allocate answer, which the container runtime would apply:\n");
        for l in lines {
            out.push_str(&format!("     {l}\n"));
        }
    }
    out.push_str(&next_steps_heading(once));
    if let Some(alias) = dpctl_hint() {
        out.push_str(&format!("   {alias}\n"));
    }
    let broken = held.first().cloned().unwrap_or_else(|| "gpu-0".into());
    let cmds = [
        (format!("export DPCTL_PLUGIN_DIR={}", dp.display()), ""),
        (format!("export DPCTL_POD_RESOURCES_SOCKET={}", pr_sock.display()), ""),
        ("dpctl watch gpu.sock".into(), "# follow ListAndWatch"),
        ("dpctl probe gpu.sock --allocate".into(), "# health-check the plugin"),
        ("dpctl allocate gpu.sock gpu-2".into(), "# ask the plugin for a device"),
        ("dpctl podresources list".into(), "# what the kubelet allocated"),
        // The second pod takes the last two healthy GPUs: admit it before breaking one.
        (
            format!(
                // written aside, then renamed: the kubelet never reads half a manifest
                "sed 's/demo-trainer/second/' {} > {} && mv {} {}",
                manifest.display(),
                manifests.join(".second.yaml.tmp").display(),
                manifests.join(".second.yaml.tmp").display(),
                manifests.join("second.yaml").display()
            ),
            "# admit a second pod (2 more GPUs)",
        ),
        ("dpctl node".into(), "# capacity, allocatable, both pods"),
        // Break a device the first pod already holds: the second pod's admission
        // (which may still be running) is not affected, and watch and node see it.
        (format!("dpctl device set-health {broken} Unhealthy"), "# break a device the first pod holds"),
        (format!("kill -HUP {}", std::process::id()), "# simulate a kubelet restart"),
    ];
    let width = cmds.iter().map(|(c, _)| c.len()).filter(|l| *l <= 44).max().unwrap_or(0);
    for (c, why) in &cmds {
        out.push_str(format!("   {c:width$}  {why}").trim_end());
        out.push('\n');
    }
    out.push_str(&format!("\n   Logs: {}  {}\n", kubelet_log.display(), plugin_log.display()));
    out
}

/// What the demo says before its suggested commands: true for `--once`
/// (everything has stopped) and for the default (running until Ctrl-C).
pub fn next_steps_heading(once: bool) -> String {
    if once {
        "\n3. With --once the kubelet and the plugin stop now, and the directory is removed.\n   \
Run `dpctl demo` (without --once) to keep them running, then in another shell try:\n\n"
            .to_string()
    } else {
        "\n3. Both keep running until Ctrl-C. In another shell, try:\n\n".to_string()
    }
}
