//! The command line, defined once with clap: the source of `--help`, shell
//! completions (`completions/`) and man pages (`man/`).

use crate::core::log::LogFormat;
use crate::plugin::config::{MountTemplate, Policy, PreferredFault, RegistrationMode};
use crate::render::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// The command line with every command's Examples section
/// ([`crate::help::with_examples`]): what `--help`, completions and man pages show.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    crate::help::with_examples(Cli::command())
}

/// Parse the process's arguments (exits with clap's message and code 2 on a usage error).
pub fn parse() -> Cli {
    parse_from(command())
}

/// [`parse`], with `version` as the text of `--version`.
pub fn parse_with_version(version: &'static str) -> Cli {
    parse_from(command().version(version))
}

/// Parse the command line, or exit as clap does: help and version on stdout
/// (exit 0), usage errors on stderr (exit 2) — with every echoed value
/// escaped and capped, so a 128 KiB argument makes a short error line.
fn parse_from(cmd: clap::Command) -> Cli {
    use clap::FromArgMatches;
    match cmd.try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            let capped: Vec<String> = text.lines().map(|l| crate::core::text::cap_words(l).into_owned()).collect();
            eprintln!("{}", capped.join("\n").trim_end());
            std::process::exit(e.exit_code());
        }
        Err(e) => e.exit(),
    }
}

/// Parse a `--timeout`-style duration for clap.
pub fn duration_arg(s: &str) -> Result<Duration, String> {
    crate::core::time::parse_duration(s)
}

fn positive_duration_arg(s: &str) -> Result<Duration, String> {
    let d = duration_arg(s)?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// Test, inspect and stand in for either side of the Kubernetes device-plugin protocol.
#[derive(Debug, Parser)]
#[command(
    name = "dpctl",
    version,
    about = "Test, inspect and stand in for either side of the Kubernetes device-plugin protocol",
    long_about = "dpctl talks the kubelet's device-plugin gRPC protocol (deviceplugin v1beta1, \
pluginregistration v1, podresources v1) over Unix sockets. Point it at a plugin's socket to see \
what the kubelet would see.\n\nExit codes: 0 ok, 1 failure (RPC error, failed check, unreachable \
socket), 2 usage error."
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global Options")]
pub struct GlobalArgs {
    /// Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)
    #[arg(short = 'o', long, global = true, value_enum)]
    pub output: Option<Format>,

    /// -o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson's EmitDefaults
    #[arg(long, global = true)]
    pub emit_defaults: bool,

    /// Print tables without their header line
    #[arg(long, global = true)]
    pub no_headers: bool,

    /// Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)
    /// [default: 5s; register: 15s, longer than the kubelet's 10s dial-back]
    #[arg(long, global = true, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub timeout: Option<Duration>,

    /// Client commands: print each call's method, socket, request (JSON), status and latency on stderr
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,

    /// Never colour the output (also: NO_COLOR set, or stdout not a terminal)
    #[arg(long, global = true)]
    pub no_color: bool,

    /// The kubelet's device-plugin directory; bare socket names are looked up here, and the
    /// PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given
    /// [default: /var/lib/kubelet/device-plugins/]
    #[arg(long, global = true, env = "DPCTL_PLUGIN_DIR", value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,

    /// Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`
    #[arg(long, global = true, env = "DPCTL_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// The kubelet's --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet)
    /// [default: a running kubelet's --root-dir from /proc, else /var/lib/kubelet]
    #[arg(long, global = true, env = "DPCTL_KUBELET_ROOT_DIR", value_name = "DIR")]
    pub kubelet_root_dir: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Call GetDevicePluginOptions on a plugin
    Options(SocketArg),
    /// Stream a plugin's ListAndWatch: the device table, then a diff per update
    Watch(WatchArgs),
    /// Call Allocate on a plugin for one or more containers
    Allocate(AllocateArgs),
    /// Call GetPreferredAllocation and check the answer against the request
    Preferred(PreferredArgs),
    /// Call PreStartContainer on a plugin
    Prestart(PrestartArgs),
    /// Send one RegisterRequest to a kubelet (real or mock) and report its answer
    Register(RegisterArgs),
    /// Query the kubelet's PodResources v1 API
    #[command(subcommand, name = "podresources")]
    PodResources(PodResourcesCommand),
    /// One-shot health check of a plugin: PASS/WARN/FAIL per check, with latencies
    Probe(ProbeArgs),
    /// Serve simulated devices as a device plugin, registered with a real or mock kubelet
    Serve(Box<ServeArgs>),
    /// Change the devices of a running `dpctl serve` (live control)
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Stand in for the kubelet's device manager: registration, pods, allocation, PodResources
    MockKubelet(MockKubeletArgs),
    /// Show the node's device capacity and allocatable, read from the running mock kubelet
    Node,
    /// A first minute with dpctl: a mock kubelet and a simulated plugin in a temp dir, a pod admitted
    Demo(DemoArgs),
    /// Show the kubelet's device-manager checkpoint, with each allocation's decoded Allocate answer
    Checkpoint(CheckpointArgs),
    /// Inspect the node read-only and say what is wrong with its device plugins, and how to fix it
    Doctor(DoctorArgs),
    /// Record everything the kubelet asks a plugin and it answers, through a tap socket
    Record(RecordArgs),
    /// Replay a trace as the plugin (against a kubelet), as the kubelet (--against a plugin), or both on this machine (--kubelet)
    Replay(ReplayArgs),
    /// Benchmarks: drive a plugin, time health changes, time a mock kubelet at scale
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Conformance suite: run a plugin against a mock kubelet through every scenario
    Test(TestArgs),
    /// DRA kubelet plugins: info, probe, prepare, unprepare, health, list; a simulated driver (serve)
    #[command(subcommand)]
    Dra(DraCommand),
    /// Print a shell completion script (bash, zsh or fish); socket arguments complete from --plugin-dir
    Completion(CompletionArgs),
}

/// `dpctl test`
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The resource to test [default: the first one the plugin registers]
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Run only scenarios whose ID, group or title matches (substring or glob; ^ $ anchor; a|b alternatives)
    #[arg(long, value_name = "PATTERN")]
    pub focus: Option<String>,
    /// Leave out scenarios whose ID, group or title matches (same syntax as --focus)
    #[arg(long, value_name = "PATTERN")]
    pub skip: Option<String>,
    /// Also write the results as JUnit XML to FILE (GitHub Actions, GitLab)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run the plugin in a private mount namespace with the temp tree mounted at /var/lib/kubelet/…
    #[arg(long)]
    pub isolate: bool,
    /// A shell command that makes one device unhealthy (placeholders allowed); enables HEALTH-001
    #[arg(long, value_name = "CMD")]
    pub health_trigger: Option<String>,
    /// Test a DRA driver's kubelet plugin instead (placeholders {kubelet-root-dir},
    /// {plugins-registry-dir}, {cdi-dir}, {kubeconfig}, {node-name}, {rolling-uid}; exported as DPCTL_TEST_KUBELET_ROOT_DIR, …)
    #[arg(long, conflicts_with_all = ["socket", "isolate", "health_trigger", "resource"])]
    pub dra: bool,
    /// Run the suite against each of these kubelet versions (comma-separated, 1.25 to 1.37) [default: 1.37]
    #[arg(long, value_parser = crate::kubelet::profile::VersionList::parse, value_name = "X.Y[,X.Y…]")]
    pub kubelet_version: Option<crate::kubelet::profile::VersionList>,
    /// How long HEALTH-001 waits for the unhealthy device to leave allocatable (slow health loops)
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub health_timeout: Duration,
    /// Back-off before a plugin that exited on its own is restarted, as the kubelet restarts a DaemonSet pod
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_backoff: Duration,
    /// Never restart a plugin that exits on its own (judge it on its first run)
    #[arg(long, conflicts_with = "restart_backoff")]
    pub no_restart: bool,
    /// Test an already running plugin on SOCKET (only scenarios that need no control of it)
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["isolate", "health_trigger", "plugin", "no_restart", "restart_backoff"])]
    pub socket: Option<PathBuf>,
    /// The plugin's command line, after --. Placeholders {plugin-dir}, {kubelet-socket},
    /// {plugins-registry-dir} and {pod-resources-socket} are substituted, and exported as
    /// DPCTL_TEST_PLUGIN_DIR, DPCTL_TEST_KUBELET_SOCKET, DPCTL_TEST_PLUGINS_REGISTRY_DIR and
    /// DPCTL_TEST_POD_RESOURCES_SOCKET
    #[arg(last = true, value_name = "PLUGIN-COMMAND")]
    pub plugin: Vec<String>,
}

/// `dpctl completion`
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

pub use crate::help::Shell;

/// How much load to generate.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Number of calls (ignored with --duration)
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes
    #[arg(long, default_value_t = 1, value_name = "C", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// Devices per request (allocate, preferred), at most 100000
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=crate::core::limits::MAX_DEVICES as u64))]
    pub devices_per_request: u64,
    /// Run for this long instead of a number of calls
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
}

/// `dpctl bench …`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Allocate throughput and latency of any plugin
    Allocate(LoadArgs),
    /// GetPreferredAllocation throughput and latency of any plugin
    Preferred(LoadArgs),
    /// ListAndWatch: open a stream, take the first snapshot, close — throughput and latency
    ListAndWatch(LoadArgs),
    /// Health change → ListAndWatch client latency, and first-snapshot time of large plugins
    Watch(BenchWatchArgs),
    /// A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS
    Kubelet(BenchKubeletArgs),
}

/// `dpctl bench watch`
#[derive(Debug, Args)]
pub struct BenchWatchArgs {
    /// A running `dpctl serve` socket to measure (changes go through its live control); default: an in-process one
    #[arg(long, value_name = "SOCKET")]
    pub socket: Option<PathBuf>,
    /// Health changes to time
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub changes: u64,
    /// Plugin sizes whose first snapshot to time (each 1..=100000)
    #[arg(long, value_delimiter = ',', default_value = "10000,100000", value_name = "N,N", value_parser = device_count_arg)]
    pub sizes: Vec<usize>,
}

/// `dpctl bench kubelet`
#[derive(Debug, Args)]
pub struct BenchKubeletArgs {
    /// Simulated plugins (one resource each)
    #[arg(long, default_value_t = 100, value_name = "P", value_parser = clap::value_parser!(u64).range(1..=2000))]
    pub plugins: u64,
    /// Devices per plugin
    #[arg(long, default_value_t = 100, value_name = "D", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub devices: u64,
    /// Pods to admit (one device each)
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub pods: u64,
    /// The mock kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

/// `dpctl checkpoint`
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The checkpoint file [default: <plugin-dir>/kubelet_internal_checkpoint]
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// `dpctl doctor`
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The kubelet's PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with
    /// --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// The plugin-watcher directory, checked when it exists [default: <kubelet-root-dir>/plugins_registry]
    #[arg(long, value_name = "DIR")]
    pub plugins_registry_dir: Option<PathBuf>,
    /// A directory of CDI specs (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Never open ListAndWatch: some plugins let an extra stream swallow updates meant for the kubelet
    #[arg(long)]
    pub no_streams: bool,
    /// node-problem-detector custom plugin mode: one short line; exit 0 ok, 1 problem, 2 unknown
    #[arg(long)]
    pub npd: bool,
}

/// `dpctl demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Show the result and exit instead of running until Ctrl-C
    #[arg(long)]
    pub once: bool,
    /// Demonstrate DRA instead: a simulated DRA driver, a ResourceClaim allocated, prepared and in PodResources
    #[arg(long)]
    pub dra: bool,
    /// The demo's kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

/// A plugin socket argument.
#[derive(Debug, Args)]
pub struct SocketArg {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
}

/// `dpctl watch`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Stop after N ListAndWatch messages (the initial snapshot counts as the first)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Also record the options and every snapshot to this trace file (must not exist)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// `dpctl allocate`
#[derive(Debug, Args)]
pub struct AllocateArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Device IDs for one container
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// Device IDs for one more container, comma-separated (repeat for several containers)
    #[arg(long = "container", value_name = "ID,ID")]
    pub containers: Vec<String>,
}

/// `dpctl preferred`
#[derive(Debug, Args)]
pub struct PreferredArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Candidate device IDs, comma-separated
    #[arg(long, value_delimiter = ',', required = true, value_name = "ID,ID")]
    pub available: Vec<String>,
    /// Device IDs the answer must include, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub must_include: Vec<String>,
    /// How many devices to ask for
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    pub size: i32,
}

/// `dpctl prestart`
#[derive(Debug, Args)]
pub struct PrestartArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Device IDs of the container about to start
    #[arg(value_name = "ID", required = true)]
    pub ids: Vec<String>,
}

/// `dpctl register`
#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// Extended resource name, e.g. vendor.example/foo
    #[arg(long, value_name = "NAME")]
    pub resource: String,
    /// The plugin's socket name, relative to the plugin directory (sent as given)
    #[arg(long, value_name = "FILE")]
    pub endpoint: String,
    /// The kubelet's Registration socket [default: <plugin-dir>/kubelet.sock]
    #[arg(long, env = "DPCTL_KUBELET_SOCKET", value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,
    /// API version to send
    #[arg(id = "api_version", long = "version", default_value = crate::api::VERSION, value_name = "VERSION")]
    pub version: String,
    /// Set options.pre_start_required
    #[arg(long)]
    pub pre_start: bool,
    /// Set options.get_preferred_allocation_available
    #[arg(long)]
    pub preferred_allocation: bool,
}

/// `dpctl podresources …`
#[derive(Debug, Subcommand)]
pub enum PodResourcesCommand {
    /// List every pod's containers and the devices allocated to them
    List(PodResourcesListArgs),
    /// Show the node's allocatable devices (healthy devices of registered resources)
    Allocatable(PodResourcesSocket),
    /// Show one pod's resources
    Get(PodResourcesGetArgs),
}

/// The PodResources socket.
#[derive(Debug, Args)]
pub struct PodResourcesSocket {
    /// The kubelet's PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with
    /// --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// `dpctl podresources list`
#[derive(Debug, Args)]
pub struct PodResourcesListArgs {
    /// Only pods in this namespace
    #[arg(short = 'n', long, value_name = "NAMESPACE", conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Pods in every namespace (the default)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[command(flatten)]
    /// The PodResources socket.
    pub socket: PodResourcesSocket,
}

/// `dpctl podresources get`
#[derive(Debug, Args)]
pub struct PodResourcesGetArgs {
    /// The pod's name
    #[arg(value_name = "POD")]
    pub pod: String,
    /// The pod's namespace
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    #[command(flatten)]
    /// The PodResources socket.
    pub socket: PodResourcesSocket,
}

/// `dpctl probe`
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Also allocate one healthy device that no container holds (per PodResources) and check the
    /// response (and PreStartContainer if required)
    #[arg(long)]
    pub allocate: bool,
    /// With --allocate: a directory of CDI specs to resolve CDI names in (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR", requires = "allocate")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Wait up to this long for the socket to appear and answer before checking (for CI right after starting a plugin)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub wait: Option<Duration>,
    /// The kubelet's PodResources socket, to pick a free device for --allocate [default: as podresources]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

fn mount_arg(s: &str) -> Result<MountTemplate, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (host, ctr, ro) = match parts.as_slice() {
        [h, c] => (h, c, false),
        [h, c, "ro"] => (h, c, true),
        [h, c, "rw"] => (h, c, false),
        _ => return Err(format!("{s:?} is not HOST:CONTAINER[:ro|rw]")),
    };
    if host.is_empty() || ctr.is_empty() {
        return Err(format!("{s:?}: both paths are needed (HOST:CONTAINER)"));
    }
    Ok(MountTemplate { host_path: host.to_string(), container_path: ctr.to_string(), read_only: ro })
}

fn device_spec_arg(s: &str) -> Result<crate::plugin::config::DeviceSpecTemplate, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let (host, ctr, perms) = match parts.as_slice() {
        [h, c] => (h, c, "rw"),
        [h, c, p] => (h, c, *p),
        _ => return Err(format!("{s:?} is not HOST:CONTAINER[:PERMISSIONS]")),
    };
    if host.is_empty() || ctr.is_empty() {
        return Err(format!("{s:?}: both paths are needed (HOST:CONTAINER)"));
    }
    if perms.is_empty() || !perms.chars().all(|c| "rwm".contains(c)) {
        return Err(format!("{s:?}: permissions must be any of r, w, m"));
    }
    Ok(crate::plugin::config::DeviceSpecTemplate {
        host_path: host.to_string(),
        container_path: ctr.to_string(),
        permissions: perms.to_string(),
    })
}

fn flap_arg(s: &str) -> Result<crate::plugin::config::Flap, String> {
    let (dev, period) = s.rsplit_once(':').ok_or_else(|| format!("{s:?} is not DEVICE:PERIOD (e.g. foo-1:2s)"))?;
    let period = positive_duration_arg(period)?;
    Ok(crate::plugin::config::Flap { device: dev.to_string(), period })
}

fn rate_arg(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(0.0..=1.0).contains(&r) {
        return Err("must be between 0 and 1".into());
    }
    Ok(r)
}

/// `dpctl serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the resources in this JSON file, e.g. {"resources":[{"resource":"vendor.example/foo","count":4}]};
    /// every per-resource flag is a camelCase field there (idPattern, numaNodes, preStart, allocate, faults, …)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["resource", "count", "devices", "id_pattern", "numa_nodes", "unhealthy", "pre_start", "preferred_allocation", "policy", "env", "annotation", "mount", "device_spec", "cdi", "socket_name", "flap", "allocate_latency", "allocate_failure_rate", "preferred_fault", "close_stream_after", "pre_start_latency", "pre_start_fail", "no_reregister", "reregister_delay", "new_ids_after_restart", "delete_other_sockets", "keep_socket_on_exit", "exit_without_kubelet", "hang_after_cancel", "empty_first_snapshot", "first_snapshot_delay", "health_one_stream"])]
    pub config: Option<PathBuf>,
    /// Extended resource name, e.g. vendor.example/foo
    #[arg(long, value_name = "NAME", required_unless_present = "config")]
    pub resource: Option<String>,
    /// Number of devices (IDs from --id-pattern), at most 100000
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::core::limits::MAX_DEVICES as u64), conflicts_with = "devices")]
    pub count: Option<u64>,
    /// Explicit device IDs, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub devices: Vec<String>,
    /// ID pattern; {i} is the index [default: <short name>-{i}, e.g. foo-{i}]
    #[arg(long, value_name = "PATTERN")]
    pub id_pattern: Option<String>,
    /// Spread the devices over N NUMA nodes (reported in Device.topology), at most 1024
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=crate::core::limits::MAX_NUMA_NODES as i64))]
    pub numa_nodes: Option<u32>,
    /// Devices that start Unhealthy, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub unhealthy: Vec<String>,
    /// Advertise pre_start_required and log PreStartContainer calls
    #[arg(long)]
    pub pre_start: bool,
    /// Advertise and implement GetPreferredAllocation
    #[arg(long)]
    pub preferred_allocation: bool,
    /// GetPreferredAllocation policy
    #[arg(long, value_enum, default_value_t = Policy::Packed)]
    pub policy: Policy,
    /// Allocate: an env var per container; {ids} = the allocated IDs [default: <NAME>_VISIBLE_DEVICES={ids}]
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub env: Vec<(String, String)>,
    /// Allocate: an annotation per container ({ids})
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub annotation: Vec<(String, String)>,
    /// Allocate: a mount per container ({ids})
    #[arg(long, value_name = "HOST:CONTAINER[:ro]", value_parser = mount_arg)]
    pub mount: Vec<MountTemplate>,
    /// Allocate: a device node per allocated device; {id} = the device ID, {i} = its index in the
    /// served list (gpu-3 → 3), {pos} = its position in the request
    #[arg(long, value_name = "HOST:CONTAINER[:PERMS]", value_parser = device_spec_arg)]
    pub device_spec: Vec<crate::plugin::config::DeviceSpecTemplate>,
    /// Allocate: a CDI device name per allocated device, e.g. vendor.example/foo={id} ({i}, {pos} as --device-spec)
    #[arg(long, value_name = "NAME")]
    pub cdi: Vec<String>,
    /// How to register (kubelet socket, plugin watcher, …)
    #[command(flatten)]
    pub reg: RegistrationArgs,
    /// Live-control socket [default: <plugin-dir>/dpctl-control/serve-<pid>.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Log format
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Fault: toggle a device's health every PERIOD (repeatable)
    #[arg(long, value_name = "DEVICE:PERIOD", value_parser = flap_arg)]
    pub flap: Vec<crate::plugin::config::Flap>,
    /// Fault: extra latency of every Allocate
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub allocate_latency: Option<Duration>,
    /// Fault: fraction of Allocate calls that fail with Internal (0..1)
    #[arg(long, value_name = "RATE", value_parser = rate_arg)]
    pub allocate_failure_rate: Option<f64>,
    /// Fault: a wrong GetPreferredAllocation answer
    #[arg(long, value_enum, value_name = "KIND")]
    pub preferred_fault: Option<PreferredFault>,
    /// Fault: end every ListAndWatch stream after N messages
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub close_stream_after: Option<u64>,
    /// Fault: extra latency of PreStartContainer
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub pre_start_latency: Option<Duration>,
    /// Fault: PreStartContainer fails with Internal
    #[arg(long)]
    pub pre_start_fail: bool,
    /// Fault: never register again after a kubelet restart
    #[arg(long)]
    pub no_reregister: bool,
    /// Fault: register again only DURATION after a kubelet restart
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub reregister_delay: Option<Duration>,
    /// Fault: new device IDs at every start and kubelet restart
    #[arg(long)]
    pub new_ids_after_restart: bool,
    /// Fault: delete every other socket in the plugin directory at start (kubelet.sock excepted)
    #[arg(long)]
    pub delete_other_sockets: bool,
    /// Fault: leave the socket behind on SIGTERM
    #[arg(long)]
    pub keep_socket_on_exit: bool,
    /// Fault: exit at start when kubelet.sock is missing, even with --retry
    #[arg(long)]
    pub exit_without_kubelet: bool,
    /// Fault: once the kubelet cancels a ListAndWatch stream, later streams never send
    #[arg(long)]
    pub hang_after_cancel: bool,
    /// Fault: every ListAndWatch stream starts with an empty list; the devices follow 1 ms later
    #[arg(long)]
    pub empty_first_snapshot: bool,
    /// Fault: every ListAndWatch stream sends its first list only after DURATION
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub first_snapshot_delay: Option<Duration>,
    /// Fault: a device change is sent on one stream only, the oldest open one (a shared update channel)
    #[arg(long)]
    pub health_one_stream: bool,
}

/// How a plugin role (serve, replay) serves and registers.
#[derive(Debug, Args)]
pub struct RegistrationArgs {
    /// Socket file name in the plugin directory [default: unique per start]
    #[arg(long, value_name = "NAME")]
    pub socket_name: Option<String>,
    /// The kubelet's Registration socket [default: <plugin-dir>/kubelet.sock]
    #[arg(long, env = "DPCTL_KUBELET_SOCKET", value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,
    /// How to register
    #[arg(long, value_enum, value_name = "MODE")]
    pub registration: Option<RegistrationMode>,
    /// The plugin watcher's directory, under --root [default: <kubelet-root-dir>/plugins_registry]
    #[arg(long, value_name = "DIR")]
    pub plugins_registry_dir: Option<PathBuf>,
    /// Serve without registering (for client-side tests and dpctl probe)
    #[arg(long)]
    pub no_register: bool,
    /// Keep retrying a failed first registration (with backoff) instead of exiting 1
    #[arg(long)]
    pub retry: bool,
    /// Register again when the kubelet closes our ListAndWatch stream and opens none within 1s
    /// while kubelet.sock is unchanged (kubelets up to 1.36 disconnect a plugin when an earlier
    /// instance's stream ends, kubernetes#121994)
    #[arg(long)]
    pub reregister_on_disconnect: bool,
}

impl RegistrationArgs {
    /// What these flags ask of registration.
    pub fn requested(&self) -> crate::plugin::registrar::Requested {
        crate::plugin::registrar::Requested {
            socket_name: self.socket_name.clone(),
            kubelet_socket: self.kubelet_socket.clone(),
            mode: self.registration,
            registry_dir: self.plugins_registry_dir.clone(),
            no_register: self.no_register,
            retry: self.retry,
            reregister_on_disconnect: self.reregister_on_disconnect,
        }
    }
}

/// `dpctl record`
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(long, value_name = "SOCKET")]
    pub plugin: PathBuf,
    /// The plugin's resource name (the tap registers under it)
    #[arg(long, value_name = "NAME")]
    pub resource: String,
    /// The trace file to write (must not exist)
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The kubelet's Registration socket [default: <plugin-dir>/kubelet.sock]
    #[arg(long, env = "DPCTL_KUBELET_SOCKET", value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,
    /// Stop after this long (default: until SIGINT/SIGTERM)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// The kubelet's PodResources socket, read for which pod each Allocate was for [default: <plugin-dir>/../pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// After a kubelet restart, give up (exit 1) if the kubelet and the plugin are not back within this long
    #[arg(long, default_value = "2m", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_timeout: Duration,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// `dpctl replay`
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace file
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Act as the kubelet: send the recorded calls to this plugin and diff the answers
    #[arg(long, value_name = "SOCKET", conflicts_with = "kubelet")]
    pub against: Option<PathBuf>,
    /// Reproduce on this machine: a mock kubelet seeded with the recorded pods and allocations, the replayed plugin, the recorded pods admitted again; report where the device choices differ
    #[arg(long)]
    pub kubelet: bool,
    /// With --kubelet: the mock kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y", requires = "kubelet")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
    /// Resource name to register (default: the trace's)
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Replay the ListAndWatch timeline this many times faster
    #[arg(long, default_value_t = 1.0, value_parser = speed_arg, value_name = "FACTOR")]
    pub speed: f64,
    /// Replay the ListAndWatch timeline without its recorded pauses
    #[arg(long)]
    pub no_wait: bool,
    /// How to serve and register (as the plugin)
    #[command(flatten)]
    pub reg: RegistrationArgs,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

fn speed_arg(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(f.is_finite() && f > 0.0) {
        return Err("must be greater than zero".into());
    }
    Ok(f)
}

/// Which running `dpctl serve` and resource to control.
#[derive(Debug, Args)]
pub struct ControlTarget {
    /// The resource to change (needed when several are served)
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// A specific control socket [default: found in <plugin-dir>/dpctl-control/]
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

/// `dpctl device …`
#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// List the devices of running dpctl serve processes
    List(#[command(flatten)] ControlTarget),
    /// Set devices Healthy or Unhealthy: IDs, then the health
    #[command(override_usage = "dpctl device set-health [OPTIONS] ID... HEALTH")]
    SetHealth {
        /// Device IDs, then the health: Healthy or Unhealthy (the last word)
        #[arg(value_name = "ID", num_args = 2.., required = true)]
        args: Vec<String>,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
    /// Add devices
    Add {
        /// New device IDs
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
        /// NUMA node of the new devices
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
        numa: Option<i64>,
        /// Add them Unhealthy
        #[arg(long)]
        unhealthy: bool,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
    /// Remove devices
    Remove {
        /// Device IDs
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
}

fn device_count_arg(s: &str) -> Result<usize, String> {
    let max = crate::core::limits::MAX_DEVICES;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a number of devices from 1 to {max}")),
    }
}

fn recv_size_arg(s: &str) -> Result<usize, String> {
    let n = byte_size(s)?;
    let max = crate::core::limits::GRPC_MAX_RECV_CEILING;
    if n > max {
        return Err(format!("at most {max} (1Gi) is allowed"));
    }
    Ok(n)
}

fn byte_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 4194304, 4Mi, 512Ki)"))?;
    let mult = match unit {
        "" => 1,
        "K" | "k" => 1000,
        "Ki" => 1024,
        "M" => 1_000_000,
        "Mi" => 1 << 20,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use Ki, Mi, K or M)")),
    };
    n.checked_mul(mult).filter(|n| *n > 0).ok_or_else(|| format!("{s:?} is out of range"))
}

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
    /// Also register plugins found in this plugin-watcher directory (kubelet default: /var/lib/kubelet/plugins_registry)
    #[arg(long, value_name = "DIR")]
    pub plugins_registry_dir: Option<PathBuf>,
    /// Serve /metrics and /healthz on this address, e.g. 127.0.0.1:9400
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Serve a local API server for DRA drivers on ADDR (loopback, e.g. 127.0.0.1:0): JSON
    /// ResourceSlices and claims; writes <kubelet-root>/kubeconfig
    #[arg(long, value_name = "ADDR")]
    pub api_server: Option<std::net::SocketAddr>,
    /// How long a plugin's devices stay (unhealthy) after its stream ends
    #[arg(long, default_value = "5m", value_parser = duration_arg, value_name = "DURATION")]
    pub grace_period: Duration,
    /// Receive limit for plugin messages (the kubelet's is the gRPC default, 4 MiB)
    #[arg(long, default_value = "4Mi", value_parser = recv_size_arg, value_name = "BYTES")]
    pub max_recv_size: usize,
    /// Topology manager policy
    #[arg(long, value_enum, default_value_t = crate::kubelet::devicemanager::TopologyPolicy::None)]
    pub topology_policy: crate::kubelet::devicemanager::TopologyPolicy,
    /// Simulate a kubelet restart on this schedule (as SIGHUP does)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_every: Option<Duration>,
    /// How long to keep dialing a plugin back inside Register (the kubelet's: 10s)
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub dial_timeout: Duration,
    /// Timeout of Allocate and GetPreferredAllocation calls (the kubelet has none)
    #[arg(long, default_value = "30s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub call_timeout: Duration,
    /// Behave as this kubelet version (1.25 to 1.37; see --explain-profile)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
    /// Print what --kubelet-version changes (each behaviour, the version it changed in, the upstream change) and exit
    #[arg(long)]
    pub explain_profile: bool,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// `dpctl dra …`
#[derive(Debug, Subcommand)]
pub enum DraCommand {
    /// Call GetInfo on a DRA plugin's registration socket
    Info(DraSocket),
    /// One-shot check of a DRA plugin against the kubelet's rules: PASS/WARN/FAIL per rule
    Probe(DraProbeArgs),
    /// Call NodePrepareResources for one or more claims and check the answer
    Prepare(DraClaimsArgs),
    /// Call NodeUnprepareResources for one or more claims
    Unprepare(DraClaimsArgs),
    /// Watch a DRA plugin's device health (NodeWatchResources): a table, then a line per change
    Health(DraHealthArgs),
    /// List the DRA plugins registered under the kubelet's root: driver, endpoint, versions, live or stale
    List,
    /// Serve a simulated DRA driver's kubelet plugin, registered through the plugin watcher
    Serve(Box<DraServeArgs>),
    /// Show or change the devices of a running `dpctl dra serve` (live control)
    #[command(subcommand)]
    Device(DraDeviceCommand),
}

/// A DRA plugin socket.
#[derive(Debug, Args)]
pub struct DraSocket {
    /// Registration or service socket (a bare name is looked up in plugins_registry/ and plugins/*/)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
}

/// `dpctl dra probe`
#[derive(Debug, Args)]
pub struct DraProbeArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// Also prepare a throwaway claim (twice, for idempotence), resolve its CDI IDs, then unprepare it
    #[arg(long)]
    pub prepare: bool,
    /// With --prepare: resolve CDI IDs in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR", requires = "prepare")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Wait up to this long for the socket to appear and answer before checking (for CI right after starting a driver)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

/// `dpctl dra prepare|unprepare`
#[derive(Debug, Args)]
pub struct DraClaimsArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// A claim as NAMESPACE/NAME/UID (repeatable)
    #[arg(long = "claim", value_name = "NS/NAME/UID", required = true, value_parser = crate::client::dra::parse_claim)]
    pub claims: Vec<crate::api::dra_v1::Claim>,
    /// The service to call: v1 or v1beta1 [default: the kubelet's choice from GetInfo, else v1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1beta1"])]
    pub service: Option<String>,
    /// prepare: call twice and check both answers are the same (the kubelet repeats calls)
    #[arg(long)]
    pub twice: bool,
    /// prepare: resolve the CDI IDs of the answer in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
}

/// `dpctl dra health`
#[derive(Debug, Args)]
pub struct DraHealthArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// The health service: v1 or v1alpha1 [default: the kubelet's choice from GetInfo, else v1 then v1alpha1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1alpha1"])]
    pub service: Option<String>,
    /// Stop after this many snapshots
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// `dpctl dra serve`
#[derive(Debug, Args)]
pub struct DraServeArgs {
    /// The driver name (a lowercase DNS subdomain, e.g. gpu.example.com)
    #[arg(long, value_name = "NAME")]
    pub driver: String,
    /// The pool the devices are in
    #[arg(long, value_name = "NAME", default_value = "pool-0")]
    pub pool: String,
    /// How many devices (named dev-0, dev-1, …)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub devices: u32,
    /// Where to write a CDI spec per prepared claim (removed on unprepare) [default: /var/run/cdi under --root]
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Option<PathBuf>,
    /// The services to serve and list in supported_versions, in order
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values_t = [crate::protocol::dra::DRA_V1.to_string(), crate::protocol::dra::DRA_V1BETA1.to_string(), crate::protocol::dra::HEALTH_V1.to_string(), crate::protocol::dra::HEALTH_V1ALPHA1.to_string()])]
    pub services: Vec<String>,
    /// Do not create the plugin-watcher registration socket (serve the service socket only)
    #[arg(long)]
    pub no_register: bool,
    /// Rolling-update mode: sockets <driver>-UID-reg.sock and dra-UID.sock, so two instances serve at once
    #[arg(long, value_name = "UID")]
    pub rolling_update: Option<String>,
    /// health_check_timeout_seconds sent for each device (0: the kubelet's default)
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub health_timeout: i64,
    /// Break one rule on purpose (repeatable): wrong-type, bad-driver-name, relative-endpoint,
    /// endpoint-outside-root, long-endpoint, no-versions, v1beta1-first, dead-endpoint, unserved-v1,
    /// slow=DURATION, missing-uid, extra-uid, no-pool-name, bad-cdi-id, not-idempotent, unserved-health,
    /// health-stream-end, health-bad-device, long-message, no-timestamp, prepare-error=MESSAGE
    #[arg(long = "fault", value_name = "FAULT")]
    pub faults: Vec<crate::plugin::dra::Fault>,
    /// Publish the devices as a ResourceSlice to the API server of this kubeconfig (plain http:// only)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The node the ResourceSlice names [default: this host's name]
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// The live-control socket [default: <kubelet-root>/plugins/<driver>/dpctl-control/dra-<pid>.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// Which running `dpctl dra serve` to control.
#[derive(Debug, Args)]
pub struct DraControlTarget {
    /// The driver whose serve to control (needed when several run)
    #[arg(long, value_name = "NAME")]
    pub driver: Option<String>,
    /// A specific control socket [default: found in <kubelet-root>/plugins/*/dpctl-control/]
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
}

/// `dpctl dra device …`
#[derive(Debug, Subcommand)]
pub enum DraDeviceCommand {
    /// List the devices and prepared claims of a running dpctl dra serve
    List(#[command(flatten)] DraControlTarget),
    /// Set devices Healthy, Unhealthy or Unknown: names, then the health
    #[command(override_usage = "dpctl dra device set-health [OPTIONS] DEVICE... HEALTH")]
    SetHealth {
        /// Device names, then the health: Healthy, Unhealthy or Unknown (the last word)
        #[arg(value_name = "DEVICE", num_args = 2.., required = true)]
        args: Vec<String>,
        /// The health message (at most 1024 characters reach the kubelet unchanged)
        #[arg(long, value_name = "TEXT")]
        message: Option<String>,
        #[command(flatten)]
        /// Which serve.
        target: DraControlTarget,
    },
}
