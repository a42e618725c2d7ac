//! The command line, defined once with clap: the source of `--help`, shell
//! completions (`completions/`) and man pages (`man/`).

use crate::core::paths::{DEFAULT_PLUGIN_DIR, DEFAULT_POD_RESOURCES_SOCKET};
use crate::render::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

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
pub struct GlobalArgs {
    /// Output format
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,

    /// Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)
    #[arg(long, global = true, default_value = "5s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub timeout: Duration,

    /// Never colour the output (also: NO_COLOR set, or stdout not a terminal)
    #[arg(long, global = true)]
    pub no_color: bool,

    /// The kubelet's device-plugin directory; bare socket names are looked up here
    #[arg(long, global = true, env = "DPCTL_PLUGIN_DIR", default_value = DEFAULT_PLUGIN_DIR, value_name = "DIR")]
    pub plugin_dir: PathBuf,
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
    List(PodResourcesSocket),
    /// Show the node's allocatable devices (healthy devices of registered resources)
    Allocatable(PodResourcesSocket),
    /// Show one pod's resources
    Get(PodResourcesGetArgs),
}

/// The PodResources socket.
#[derive(Debug, Args)]
pub struct PodResourcesSocket {
    /// The kubelet's PodResources socket
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", default_value = DEFAULT_POD_RESOURCES_SOCKET, value_name = "PATH")]
    pub socket: PathBuf,
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
    /// Also allocate one healthy device and check the response (and PreStartContainer if required)
    #[arg(long)]
    pub allocate: bool,
}
