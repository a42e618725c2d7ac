//! One file per subcommand; each wires the core or one protocol role to the
//! command line. [`run`] dispatches.

pub mod allocate;
pub mod bench;
pub mod checkpoint;
pub mod demo;
pub mod demo_dra;
pub mod device;
pub mod doctor;
pub mod dra;
pub mod identify;
pub mod mock_kubelet;
pub mod node;
pub mod options;
pub mod podresources;
pub mod preferred;
pub mod prestart;
pub mod probe;
pub mod record;
pub mod register;
pub mod replay;
pub mod serve;
pub mod test;
pub mod watch;

use crate::cli::{Cli, Command};
use crate::client::PluginConn;
use crate::core::paths::{discover_kubelet_root, HostRoot, Paths, DEFAULT_KUBELET_ROOT};
use crate::core::{Error, Result};
use crate::render::Format;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Inspection commands accept snapshots far over the kubelet's 4 MiB limit,
/// so they can report the size instead of failing on it.
pub const INSPECT_MAX_RECV: usize = 256 * 1024 * 1024;

/// What every command gets from the global options.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The output format.
    pub format: Format,
    /// Dial and per-call timeout.
    pub timeout: Duration,
    /// `--timeout` as given, for commands whose default differs (register).
    pub timeout_given: Option<Duration>,
    /// Node paths.
    pub paths: Paths,
    /// Whether --plugin-dir (or DPCTL_PLUGIN_DIR) was given, so a config file may not override it.
    pub plugin_dir_given: bool,
}

impl Ctx {
    /// Resolve a socket argument and dial the plugin there.
    pub async fn plugin(&self, socket: &Path) -> Result<PluginConn> {
        Ok(PluginConn::connect(&self.paths.resolve_socket(socket), self.timeout, INSPECT_MAX_RECV).await?)
    }

    /// The PodResources socket: the flag (or `DPCTL_POD_RESOURCES_SOCKET`) if
    /// given, else derived from `--plugin-dir` as every command does.
    pub fn pod_resources(&self, flag: Option<&PathBuf>) -> PathBuf {
        flag.map(|p| self.paths.host(p)).unwrap_or_else(|| self.paths.pod_resources_socket.clone())
    }
}

/// Runtime worker threads for a command (0 = a single-threaded runtime).
/// Measured on 2 cores (BENCHMARKS.md): a plugin serves fastest on one
/// worker — two workers spend their time waking each other across cores;
/// one-shot clients and the load generator stay on one thread, leaving the
/// other core to the plugin under test; the kubelet roles, which host many
/// connections, keep two. `DPCTL_WORKERS` overrides it.
pub fn runtime_workers(cmd: &Command) -> usize {
    match cmd {
        Command::Serve(_) | Command::Replay(_) | Command::Record(_) => 1,
        Command::Dra(crate::cli::DraCommand::Serve(_)) => 1,
        Command::MockKubelet(_) | Command::Demo(_) | Command::Test(_) => 2,
        Command::Bench(crate::cli::BenchCommand::Kubelet(_)) => 2,
        _ => 0,
    }
}

/// Commands that log events instead of rendering a result: `-o` is a usage
/// error there (with the flag that does what was meant), never silently ignored.
fn rejects_output_flag(cmd: &Command) -> Option<&'static str> {
    match cmd {
        Command::Serve(_) => Some("serve logs events; use --log-format json for JSON lines"),
        Command::MockKubelet(_) => {
            Some("mock-kubelet logs events; use --log-format json, or dpctl node -o json for its state")
        }
        Command::Demo(_) => {
            Some("demo prints a walkthrough; use dpctl node -o json or dpctl podresources list -o json against it")
        }
        Command::Record(_) => Some("record writes a JSON-lines trace (--out); use --log-format json for its log"),
        Command::Completion(_) => Some("completion prints a shell script"),
        _ => None,
    }
}

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    let g = cli.global;
    if let (Some(f), Some(why)) = (g.output, rejects_output_flag(&cli.command)) {
        let f = format!("{f:?}").to_lowercase();
        return Err(Error::usage(format!("-o {f} is not supported here: {why}")));
    }
    crate::render::configure(crate::render::Options { emit_defaults: g.emit_defaults, no_headers: g.no_headers });
    crate::core::verbose::set(g.verbose);
    let plugin_dir_given = g.plugin_dir.is_some();
    // The kubelet's root: given, else a running kubelet's --root-dir (the
    // process table is the host's in a `kubectl debug node/…` pod), else the default.
    let kubelet_root = match (&g.kubelet_root_dir, &g.plugin_dir) {
        (Some(d), _) => d.clone(),
        (None, Some(_)) => PathBuf::from(DEFAULT_KUBELET_ROOT),
        (None, None) => {
            discover_kubelet_root(Path::new("/proc")).unwrap_or_else(|| PathBuf::from(DEFAULT_KUBELET_ROOT))
        }
    };
    let ctx = Ctx {
        format: g.output.unwrap_or(Format::Table),
        timeout: g.timeout.unwrap_or(crate::core::transport::DEFAULT_TIMEOUT),
        timeout_given: g.timeout,
        paths: Paths::for_node(HostRoot::new(g.root), &kubelet_root, g.plugin_dir.as_deref()),
        plugin_dir_given,
    };
    let result = dispatch(&ctx, cli.command).await;
    match result {
        Err(e) => Err(identify::explain_unimplemented(&ctx, e).await),
        ok => ok,
    }
}

async fn dispatch(ctx: &Ctx, command: Command) -> Result<()> {
    match command {
        Command::Options(a) => options::run(ctx, &a).await,
        Command::Watch(a) => watch::run(ctx, &a).await,
        Command::Allocate(a) => allocate::run(ctx, &a).await,
        Command::Preferred(a) => preferred::run(ctx, &a).await,
        Command::Prestart(a) => prestart::run(ctx, &a).await,
        Command::Register(a) => register::run(ctx, &a).await,
        Command::PodResources(c) => podresources::run(ctx, &c).await,
        Command::Probe(a) => probe::run(ctx, &a).await,
        Command::Serve(a) => serve::run(ctx, &a).await,
        Command::Device(c) => device::run(ctx, &c).await,
        Command::MockKubelet(a) => mock_kubelet::run(ctx, &a).await,
        Command::Node => node::run(ctx).await,
        Command::Demo(a) => demo::run(ctx, &a).await,
        Command::Checkpoint(a) => checkpoint::run(ctx, &a),
        Command::Doctor(a) => doctor::run(ctx, &a).await,
        Command::Record(a) => record::run(ctx, &a).await,
        Command::Replay(a) => replay::run(ctx, &a).await,
        Command::Bench(c) => bench::run(ctx, &c).await,
        Command::Test(a) => test::run(ctx, &a).await,
        Command::Dra(c) => dra::run(ctx, &c).await,
        Command::Completion(a) => {
            let script = crate::help::completion_script(a.shell, &mut crate::cli::command());
            crate::render::emit(&String::from_utf8_lossy(&script))
        }
    }
}
