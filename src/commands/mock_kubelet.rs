//! `dpctl mock-kubelet`: the kubelet's device manager on a laptop. SIGHUP
//! simulates a kubelet restart in place; SIGINT/SIGTERM stop it.

pub mod fleet;

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::cli::{duration_arg, positive_duration_arg, FlagValueError};
use crate::core::log::{LogFormat, Logger};
use crate::core::paths::CHECKPOINT_NAME;
use crate::core::{Error, Result};
use crate::kubelet::devicemanager::shell::Config;
use crate::kubelet::event::EventBus;
use crate::kubelet::node::{Node, NodeSpec};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl mock-kubelet`: its surface.
pub const COMMAND: Spec = Spec {
    name: "mock-kubelet",
    about: "Stand in for the kubelet: device plugins and DRA drivers registered, pods admitted, PodResources, a local API server",
    group: super::surface::Group::Kubelet,
    args: surface::args::<MockKubeletArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: Some("mock-kubelet logs events; use --log-format json, or dpctl node -o json for its state"),
    parse: surface::parse::<MockKubeletArgs>,
};

const EXAMPLES: &str = "Examples:
  # A device manager in a temp dir; pods from manifests
  mkdir -p /tmp/node/device-plugins /tmp/node/manifests
  dpctl mock-kubelet --plugin-dir /tmp/node/device-plugins --manifests /tmp/node/manifests
  # then, in another shell
  dpctl serve --plugin-dir /tmp/node/device-plugins --resource vendor.example/foo --count 4
  dpctl node --plugin-dir /tmp/node/device-plugins
  dpctl podresources list --plugin-dir /tmp/node/device-plugins
  # DRA drivers too: a local API server (writes /tmp/node/kubeconfig), claims beside the pods
  # (the plugin watcher then runs on /tmp/node/plugins_registry; CDI specs are found in /tmp/node/cdi)
  dpctl mock-kubelet --plugin-dir /tmp/node/device-plugins --manifests /tmp/node/manifests \\
    --api-server 127.0.0.1:0
  dpctl --kubelet-root-dir /tmp/node dra serve --driver gpu.example.com --cdi-dir /tmp/node/cdi \\
    --kubeconfig /tmp/node/kubeconfig --node-name dpctl-node
  # a node of a real cluster (a kubeconfig with the node's credentials): pods bound to it run here
  dpctl mock-kubelet --plugin-dir /tmp/node/device-plugins --kubeconfig node.kubeconfig --node-name dpctl-0
  # behave as kubelet 1.31; what that changes
  dpctl mock-kubelet --kubelet-version 1.31 --plugin-dir /tmp/node/device-plugins
  dpctl mock-kubelet --kubelet-version 1.31 --explain-profile";

/// `dpctl mock-kubelet`
#[derive(Debug, Args)]
pub struct MockKubeletArgs {
    /// Serve PodResources here [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else /var/lib/kubelet/pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// Do not serve the PodResources API
    #[arg(long, conflicts_with = "pod_resources_socket")]
    pub no_pod_resources: bool,
    /// Admit pods from static pod manifests (YAML or JSON) in this directory
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,
    /// Also register plugins found in this plugin-watcher directory [default with --api-server:
    /// <kubelet-root>/plugins_registry, created as the kubelet creates it; else none]
    #[arg(long, value_name = "DIR")]
    pub plugins_registry_dir: Option<PathBuf>,
    /// Resolve DRA drivers' CDI IDs in this spec directory (repeatable) [default: $DPCTL_CDI_SPEC_DIRS,
    /// else /etc/cdi, /var/run/cdi and <kubelet-root>/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Serve /metrics and /healthz on this address, e.g. 127.0.0.1:9400
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Serve a local API server for DRA drivers on ADDR (loopback, e.g. 127.0.0.1:0): ResourceSlices
    /// and claims (Kubernetes protobuf or JSON, as the client asks) over HTTPS with a CA of its own and a
    /// bearer token, both written into <kubelet-root>/kubeconfig; turns on the plugin watcher
    #[arg(long, value_name = "ADDR")]
    pub api_server: Option<std::net::SocketAddr>,
    /// Serve the local API server over plain HTTP and authenticate nobody, as kube-apiserver's old
    /// insecure port (the kubeconfig then carries no credentials: client-go sends none over http)
    #[arg(long, requires = "api_server")]
    pub api_server_insecure: bool,
    /// HTTPS is the default now; accepted so that older scripts keep working
    #[arg(long, requires = "api_server", conflicts_with = "api_server_insecure", hide = true)]
    pub api_server_tls: bool,
    /// How long a plugin's devices stay (unhealthy) after its stream ends
    #[arg(long, default_value = "5m", value_parser = duration_arg, value_name = "DURATION")]
    pub grace_period: Duration,
    /// Receive limit for plugin messages (the kubelet's is the gRPC default, 4 MiB)
    #[arg(long, default_value = "4Mi", value_parser = recv_size_arg, value_name = "BYTES")]
    pub max_recv_size: usize,
    /// Topology manager policy
    #[arg(long, value_enum, default_value_t = crate::kubelet::devicemanager::core::TopologyPolicy::None)]
    pub topology_policy: crate::kubelet::devicemanager::core::TopologyPolicy,
    /// Simulate a kubelet restart on this schedule (as SIGHUP does)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_every: Option<Duration>,
    /// How long to keep dialing a plugin back inside Register (the kubelet's: 10s)
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub dial_timeout: Duration,
    /// Timeout of Allocate and GetPreferredAllocation calls (the kubelet has none)
    #[arg(long, default_value = "30s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub call_timeout: Duration,
    /// How long the scheduler's part waits for the binding conditions of a claim it allocated
    /// before it deallocates it (kube-scheduler's DynamicResources bindingTimeout: 10m)
    #[arg(long, default_value = "10m", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub binding_timeout: Duration,
    /// Behave as this kubelet version (1.25 to 1.37; see --explain-profile)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
    /// Print what --kubelet-version changes (each behaviour, the version it changed in, the upstream change) and exit
    #[arg(long)]
    pub explain_profile: bool,
    /// Set feature gates the version has, the kubelet's way (e.g. DRAExtendedResource=true on 1.34 and 1.35)
    #[arg(long, value_name = "NAME=BOOL,…")]
    pub feature_gates: Option<String>,
    /// Serve API group versions the version's kube-apiserver leaves off, its --runtime-config way
    /// (from 1.34 resource.k8s.io/v1 only: e.g. resource.k8s.io/v1beta1=true)
    #[arg(long, value_name = "GROUP/VERSION=BOOL,…", requires = "api_server")]
    pub runtime_config: Option<String>,
    /// Be a node of the cluster of this kubeconfig (the node's own credentials, as a kubelet's
    /// kubeconfig): register the Node, renew its Lease, run the pods bound to it; turns on the
    /// plugin watcher. `{node}` in the path is replaced by the node's name (with --nodes, each
    /// node's own file)
    #[arg(long, value_name = "PATH", conflicts_with = "api_server")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: its current-context]
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    pub context: Option<String>,
    /// The node's name, with --kubeconfig [default: this host's name]; with --nodes, the
    /// prefix of the nodes' names
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    pub node_name: Option<String>,
    /// Labels of the Node beside the kubelet's, as the kubelet's --node-labels
    #[arg(long, value_name = "KEY=VALUE,…", requires = "kubeconfig", value_delimiter = ',', value_parser = crate::commands::serve::key_value)]
    pub node_labels: Vec<(String, String)>,
    /// Run N nodes from this process, NAME-0 … NAME-{N-1}, each with a kubelet root of its own
    /// (<kubelet-root>/NAME-i/) and its own simulated devices (--node-devices, --node-dra-driver)
    #[arg(long, value_name = "N", requires = "kubeconfig", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub nodes: Option<u32>,
    /// With --nodes: a simulated device plugin on each node, RESOURCE=COUNT devices (repeatable)
    #[arg(long, value_name = "RESOURCE=COUNT", requires = "nodes", value_parser = fleet::name_count)]
    pub node_devices: Vec<(String, u32)>,
    /// With --nodes: a simulated DRA driver on each node, DRIVER=COUNT devices, publishing the
    /// node's ResourceSlice (pool: the node's name) through the node's kubeconfig (repeatable)
    #[arg(long, value_name = "DRIVER=COUNT", requires = "nodes", value_parser = fleet::name_count)]
    pub node_dra_driver: Vec<(String, u32)>,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// `--kubeconfig`: the cluster to be a node of, and the node's name.
fn cluster(a: &MockKubeletArgs) -> Result<Option<crate::kubelet::cluster::ClusterSpec>> {
    let Some(kc) = &a.kubeconfig else { return Ok(None) };
    let node = node_name(a)?;
    let api = crate::client::kube::load_kubeconfig_context(&fleet::kubeconfig_for(kc, &node), a.context.as_deref())?;
    Ok(Some(crate::kubelet::cluster::ClusterSpec { api, node, labels: a.node_labels.iter().cloned().collect() }))
}

/// `--node-name` (with `--nodes`, the prefix), checked as a node name.
fn node_name(a: &MockKubeletArgs) -> Result<String> {
    let node = match &a.node_name {
        Some(n) => n.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_lowercase())
            .ok()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Error::usage("--node-name: this host's name is unknown; name the node"))?,
    };
    // With --nodes the longest name (NAME-999) must be one.
    let longest = match a.nodes {
        Some(n) => format!("{node}-{}", n.saturating_sub(1)),
        None => node.clone(),
    };
    crate::core::validate::dns_subdomain(&longest, crate::core::validate::DNS_SUBDOMAIN_MAX)
        .map_err(|e| Error::usage(format!("--node-name {node:?}: {e}")))?;
    Ok(node)
}

fn recv_size_arg(s: &str) -> Result<usize, FlagValueError> {
    let n = byte_size(s)?;
    let max = crate::core::limits::GRPC_MAX_RECV_CEILING;
    if n > max {
        return Err(FlagValueError::Range(format!("at most {max} (1Gi) is allowed")));
    }
    Ok(n)
}

fn byte_size(s: &str) -> Result<usize, FlagValueError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().map_err(|_| FlagValueError::not_form(s, "a size (e.g. 4194304, 4Mi, 512Ki)"))?;
    let mult = match unit {
        "" => 1,
        "K" | "k" => 1000,
        "Ki" => 1024,
        "M" => 1_000_000,
        "Mi" => 1 << 20,
        _ => return Err(FlagValueError::part(s, format!("unknown unit {unit:?} (use Ki, Mi, K or M)"))),
    };
    n.checked_mul(mult).filter(|n| *n > 0).ok_or_else(|| FlagValueError::OutOfRange(s.to_string()))
}

impl Invocation for MockKubeletArgs {
    fn workers(&self) -> usize {
        2
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Build the settings from the command line.
pub fn settings(ctx: &Ctx, a: &MockKubeletArgs) -> Result<NodeSpec> {
    let plugin_dir = ctx.paths.plugin_dir.clone();
    if !plugin_dir.is_dir() {
        return Err(Error::failed(format!(
            "{}: plugin directory does not exist; create it or pass --plugin-dir",
            plugin_dir.display()
        )));
    }
    let pod_resources_socket =
        if a.no_pod_resources { None } else { Some(ctx.pod_resources(a.pod_resources_socket.as_ref())) };
    if let Some(p) = &pod_resources_socket {
        if let Some(dir) = p.parent() {
            crate::core::files::create_dir_all(dir).map_err(|e| {
                Error::io(dir, "cannot create the pod-resources directory (pass --pod-resources-socket)", &e)
            })?;
        }
    }
    for (flag, d) in [("--manifests", &a.manifests), ("--plugins-registry-dir", &a.plugins_registry_dir)] {
        if let Some(d) = d {
            if !d.is_dir() {
                return Err(Error::usage(format!("{flag} {}: not a directory; create it first", d.display())));
            }
        }
    }
    let plugins_registry_dir = registry_dir(ctx, a)?;
    Ok(NodeSpec {
        plugin_dir: plugin_dir.clone(),
        endpoint_alias: None,
        pods_api_socket: Some(ctx.pods_api(None)),
        pod_resources_socket,
        manifests: a.manifests.clone(),
        plugins_registry_dir,
        metrics_addr: a.metrics_addr,
        restart_every: a.restart_every,
        dial_timeout: a.dial_timeout,
        manager: Config {
            checkpoint: plugin_dir.join(CHECKPOINT_NAME),
            plugin_dir,
            topology: a.topology_policy,
            grace_period: a.grace_period,
            max_recv: a.max_recv_size,
            call_timeout: a.call_timeout,
            pre_start_timeout: Duration::from_secs(30),
            profile: profile(a)?,
        },
        dra: dra_spec(ctx, a),
        api_server: a.api_server,
        api_server_mode: match a.api_server_insecure {
            true => crate::controlplane::apiserver::Mode::Insecure,
            false => crate::controlplane::apiserver::Mode::Https,
        },
        clean_at_start: true,
        wake_on_changes: false,
        cluster: cluster(a)?,
    })
}

/// The profile of --kubelet-version with --feature-gates and --runtime-config applied.
fn profile(a: &MockKubeletArgs) -> Result<crate::kubelet::profile::Profile> {
    let mut p = crate::kubelet::profile::Profile::of(a.kubelet_version);
    if let Some(g) = &a.feature_gates {
        p = p.with_gates(g).map_err(|e| Error::usage(format!("--feature-gates: {e}")).caused_by(e))?;
    }
    if let Some(r) = &a.runtime_config {
        p = p.with_runtime_config(r).map_err(|e| Error::usage(format!("--runtime-config: {e}")).caused_by(e))?;
    }
    Ok(p)
}

/// Run the command: the engine until SIGINT/SIGTERM; SIGHUP restarts it in place.
pub async fn run(ctx: &Ctx, a: &MockKubeletArgs) -> Result<()> {
    if a.explain_profile {
        print!("{}", crate::kubelet::profile::Profile::of(a.kubelet_version).explain());
        return Ok(());
    }
    if let Some(n) = a.nodes {
        return run_fleet(ctx, a, n).await;
    }
    let s = settings(ctx, a)?;
    let bus = EventBus::new(Logger::new(a.log_format));
    // Where DRA drivers register and where their CDI IDs are resolved, said once at start.
    let watcher = s.plugins_registry_dir.as_ref().map(|d| d.display().to_string());
    let cdi = s.dra.as_ref().map(|_| cdi_search_path(ctx, a).to_string());
    bus.emit(
        crate::kubelet::event::KubeletEvent::Paths {
            plugins_registry_dir: watcher
                .unwrap_or_else(|| "none (pass --plugins-registry-dir or --api-server)".into()),
            cdi_spec_dirs: cdi,
        },
        None,
    );
    // Listen for signals before the node starts, so none is lost.
    let interrupted = crate::core::interrupted();
    tokio::pin!(interrupted);
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::failed(format!("cannot listen for SIGHUP: {e}")))?;
    let node = Node::start(s, bus).await?;
    let result = loop {
        tokio::select! {
            _ = &mut interrupted => break Ok(()),
            r = node.finished() => break r,
            Some(()) = hup.recv() => {
                if let Err(e) = node.restart("SIGHUP").await {
                    break Err(e);
                }
            }
        }
    };
    node.stop().await;
    result
}

/// `--nodes N`: the fleet's settings (each node's paths under `<kubelet-root>/NAME-i/`).
fn fleet_spec(ctx: &Ctx, a: &MockKubeletArgs, n: u32) -> Result<fleet::FleetSpec> {
    let (Some(kubeconfig), Some(root)) = (a.kubeconfig.clone(), node_root(ctx)) else {
        return Err(Error::usage("--nodes needs --kubeconfig and a plugin directory with a parent"));
    };
    if a.manifests.is_some() || a.plugins_registry_dir.is_some() || a.metrics_addr.is_some() {
        return Err(Error::usage(
            "--nodes: --manifests, --plugins-registry-dir and --metrics-addr are one node's; each node of the fleet has its own tree",
        ));
    }
    let mut template = NodeSpec::on_tree(&crate::kubelet::tree::NodeTree::under(&root));
    template.restart_every = a.restart_every;
    template.dial_timeout = a.dial_timeout;
    template.manager.topology = a.topology_policy;
    template.manager.grace_period = a.grace_period;
    template.manager.max_recv = a.max_recv_size;
    template.manager.call_timeout = a.call_timeout;
    template.manager.profile = profile(a)?;
    Ok(fleet::FleetSpec {
        prefix: node_name(a)?,
        nodes: n,
        root,
        kubeconfig,
        context: a.context.clone(),
        labels: a.node_labels.iter().cloned().collect(),
        devices: a.node_devices.clone(),
        drivers: a.node_dra_driver.clone(),
        template,
    })
}

/// Run `--nodes N` until SIGINT/SIGTERM; SIGHUP restarts every node in place.
async fn run_fleet(ctx: &Ctx, a: &MockKubeletArgs, n: u32) -> Result<()> {
    let spec = fleet_spec(ctx, a, n)?;
    let log = Logger::new(a.log_format);
    let interrupted = crate::core::interrupted();
    tokio::pin!(interrupted);
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::failed(format!("cannot listen for SIGHUP: {e}")))?;
    let mut nodes = fleet::Fleet::new();
    let started = tokio::select! {
        r = nodes.start(&spec, Some(log.clone()), None) => r.map(|()| true),
        _ = &mut interrupted => Ok(false),
    };
    let result = match started {
        Ok(true) => loop {
            tokio::select! {
                _ = &mut interrupted => break Ok(()),
                r = nodes.finished() => break r,
                Some(()) = hup.recv() => {
                    if let Err(e) = nodes.restart("SIGHUP").await {
                        break Err(e);
                    }
                }
            }
        },
        other => other.map(|_| ()),
    };
    nodes.stop().await;
    log.close(Duration::from_secs(2));
    result
}

/// The mock kubelet's root directory: the plugin directory's parent
/// (device-plugins/ sits under it), where `dra_manager_state` goes.
fn node_root(ctx: &Ctx) -> Option<PathBuf> {
    ctx.paths.plugin_dir.parent().map(|p| p.to_path_buf())
}

/// The plugin watcher's directory: given; with `--api-server`, the
/// kubelet's `<root>/plugins_registry` (DRA drivers register only there),
/// created as the kubelet's plugin watcher creates it; else none.
fn registry_dir(ctx: &Ctx, a: &MockKubeletArgs) -> Result<Option<PathBuf>> {
    if let Some(d) = &a.plugins_registry_dir {
        return Ok(Some(d.clone()));
    }
    let Some(root) = node_root(ctx).filter(|_| a.api_server.is_some() || a.kubeconfig.is_some()) else {
        return Ok(None);
    };
    let dir = root.join("plugins_registry");
    crate::core::files::create_dir_all(&dir).map_err(|e| {
        Error::io(&dir, "cannot create the plugin watcher's directory (pass --plugins-registry-dir DIR)", &e)
    })?;
    Ok(Some(dir))
}

/// The CDI search path DRA drivers' answers are checked against (one
/// function for mock kubelet, doctor, `dra prepare` and `probe`).
fn cdi_search_path(ctx: &Ctx, a: &MockKubeletArgs) -> crate::core::paths::CdiSearchPath {
    ctx.paths.cdi_search_path(&a.cdi_spec_dir)
}

/// The DRA manager's settings: `dra_manager_state` under [`node_root`];
/// CDI IDs checked against [`cdi_search_path`].
fn dra_spec(ctx: &Ctx, a: &MockKubeletArgs) -> Option<crate::kubelet::dra::shell::DraSpec> {
    let root = node_root(ctx)?;
    let dirs = cdi_search_path(ctx, a).dirs;
    // The kubelet's 45 s per DRAPlugin call (dra_plugin.go defaultClientCallTimeout);
    // --call-timeout is the device plugins' Allocate timeout, not this.
    let mut spec = crate::kubelet::dra::shell::DraSpec::new(&root, dirs);
    spec.binding_timeout = a.binding_timeout;
    Some(spec)
}
