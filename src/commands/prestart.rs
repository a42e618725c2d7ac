//! `dpctl prestart SOCKET ID...`: PreStartContainer.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::PreStartContainerRequest;
use crate::core::time::format_duration;
use crate::core::validate::check_id_list;
use crate::core::Result;
use crate::help::Socket;
use crate::render::{emit, structured, Format};
use clap::Args;
use std::path::PathBuf;

/// `dpctl prestart`: its surface.
pub const COMMAND: Spec = Spec {
    name: "prestart",
    about: "Call PreStartContainer on a device plugin",
    group: super::surface::Group::Plugin,
    args: surface::args::<PrestartArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<PrestartArgs>,
};

const EXAMPLES: &str = "Examples:
  dpctl prestart vendor.sock foo-0 foo-1";

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

impl Invocation for PrestartArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &PrestartArgs) -> Result<()> {
    check_id_list("device IDs", &a.ids)?;
    let conn = ctx.plugin(&a.socket).await?;
    let start = std::time::Instant::now();
    let resp = conn.pre_start(PreStartContainerRequest { devices_ids: a.ids.clone() }, ctx.timeout).await?;
    let took = start.elapsed();
    match ctx.format {
        Format::Table => {
            emit(&format!("PreStartContainer({}) succeeded in {}", a.ids.join(","), format_duration(took)))
        }
        f => emit(&structured(f, &resp)?),
    }
}
