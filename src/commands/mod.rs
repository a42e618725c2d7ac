//! One file per subcommand; each declares its surface (a [`Spec`]: args,
//! examples, completion and runtime hints) next to its `run`, and [`ALL`]
//! lists them: adding a command is its file plus its line in [`ALL`].

pub mod allocate;
pub mod bench;
pub mod checkpoint;
pub mod compare;
pub mod completion;
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
pub mod pods;
pub mod preferred;
pub mod prestart;
pub mod probe;
pub mod record;
pub mod register;
pub mod replay;
pub mod serve;
pub mod shared;
pub mod surface;
pub mod test;
pub mod watch;

use crate::cli::GlobalArgs;
use crate::client::PluginConn;
use crate::core::paths::{discover_kubelet_root, HostRoot, Paths, DEFAULT_KUBELET_ROOT};
use crate::core::{Error, Result};
use crate::render::Format;
use std::path::{Path, PathBuf};
use std::time::Duration;
pub use surface::{Invocation, Spec};

/// Every command, in the order `dpctl --help` lists them (grouped by their
/// [`surface::Group`], in its order). A new command is its file (with its
/// `mod` line above) and its line here; a unit test fails on a command file
/// missing from this table.
pub const ALL: &[&Spec] = &[
    &demo::COMMAND,
    &completion::COMMAND,
    &options::COMMAND,
    &watch::COMMAND,
    &allocate::COMMAND,
    &preferred::COMMAND,
    &prestart::COMMAND,
    &probe::COMMAND,
    &dra::COMMAND,
    &serve::COMMAND,
    &device::COMMAND,
    &record::COMMAND,
    &replay::COMMAND,
    &mock_kubelet::COMMAND,
    &node::COMMAND,
    &register::COMMAND,
    &podresources::COMMAND,
    &pods::COMMAND,
    &checkpoint::COMMAND,
    &doctor::COMMAND,
    &test::COMMAND,
    &compare::COMMAND,
    &bench::COMMAND,
];

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
    /// Every command, for those that describe the command line (completion).
    pub commands: &'static [&'static Spec],
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

    /// The kubelet's pods API socket: the flag (or `DPCTL_PODS_API_SOCKET`)
    /// if given, else `pods-api/pods-api.sock` beside the PodResources
    /// socket's directory (`<kubelet-root>/pods-api/pods-api.sock`).
    pub fn pods_api(&self, flag: Option<&PathBuf>) -> PathBuf {
        if let Some(p) = flag {
            return self.paths.host(p);
        }
        let pr = &self.paths.pod_resources_socket;
        let root = pr.parent().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new("/"));
        crate::kubelet::tree::pods_api_socket(root)
    }
}

/// The whole command line: dpctl's global options and every command of [`ALL`].
pub fn command() -> clap::Command {
    surface::assemble(crate::cli::top(), ALL)
}

/// A parsed command line.
pub struct Cli {
    /// Options every command takes.
    pub global: GlobalArgs,
    /// The command given.
    pub spec: &'static Spec,
    /// Its arguments, ready to run.
    pub invocation: Box<dyn Invocation>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli").field("global", &self.global).field("command", &self.spec.name).finish()
    }
}

impl Cli {
    /// Runtime worker threads for this command line (0 = a single-threaded
    /// runtime): the command's [`Invocation::workers`].
    pub fn workers(&self) -> usize {
        self.invocation.workers()
    }

    /// Parse `args` (the program name first), as the process's arguments are parsed.
    pub fn try_parse_from<I, T>(args: I) -> std::result::Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        from_matches(&command().try_get_matches_from(args)?)
    }
}

fn from_matches(m: &clap::ArgMatches) -> std::result::Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let global = GlobalArgs::from_arg_matches(m)?;
    let missing = || clap::Error::new(clap::error::ErrorKind::MissingSubcommand);
    let (name, sub) = m.subcommand().ok_or_else(missing)?;
    let spec = ALL.iter().copied().find(|s| s.name == name).ok_or_else(missing)?;
    Ok(Cli { global, spec, invocation: (spec.parse)(sub)? })
}

/// Parse the process's arguments (exits with clap's message and code 2 on a
/// usage error), with `version` as the text of `--version`.
pub fn parse_with_version(version: &'static str) -> Cli {
    crate::cli::parse_or_exit(command().version(version), from_matches)
}

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    let g = cli.global;
    if let (Some(f), Some(why)) = (g.output, cli.spec.refuses_output) {
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
        commands: ALL,
    };
    let result = cli.invocation.run(&ctx).await;
    match result {
        Err(e) => Err(identify::explain_unimplemented(&ctx, e).await),
        ok => ok,
    }
}
