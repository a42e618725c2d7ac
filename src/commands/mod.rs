//! One file per subcommand; each wires the core or one protocol role to the
//! command line. [`run`] dispatches.

pub mod allocate;
pub mod options;
pub mod podresources;
pub mod preferred;
pub mod prestart;
pub mod probe;
pub mod register;
pub mod watch;

use crate::cli::{Cli, Command};
use crate::core::paths::{Paths, DEFAULT_POD_RESOURCES_SOCKET};
use crate::core::Result;
use crate::kubelet::PluginConn;
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
    /// Node paths.
    pub paths: Paths,
}

impl Ctx {
    /// Resolve a socket argument and dial the plugin there.
    pub async fn plugin(&self, socket: &Path) -> Result<PluginConn> {
        PluginConn::connect(&self.paths.resolve_socket(socket), self.timeout, INSPECT_MAX_RECV).await
    }
}

/// Run the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    let g = cli.global;
    let ctx = Ctx {
        format: g.output,
        timeout: g.timeout,
        paths: Paths::new(g.plugin_dir, None, PathBuf::from(DEFAULT_POD_RESOURCES_SOCKET)),
    };
    match cli.command {
        Command::Options(a) => options::run(&ctx, &a).await,
        Command::Watch(a) => watch::run(&ctx, &a).await,
        Command::Allocate(a) => allocate::run(&ctx, &a).await,
        Command::Preferred(a) => preferred::run(&ctx, &a).await,
        Command::Prestart(a) => prestart::run(&ctx, &a).await,
        Command::Register(a) => register::run(&ctx, &a).await,
        Command::PodResources(c) => podresources::run(&ctx, &c).await,
        Command::Probe(a) => probe::run(&ctx, &a).await,
    }
}
