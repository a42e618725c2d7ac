//! `dpctl options SOCKET`: GetDevicePluginOptions.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::Result;
use crate::help::Socket;
use crate::render::{emit, structured, table, Format};
use clap::Args;
use std::path::PathBuf;

/// `dpctl options`: its surface.
pub const COMMAND: Spec = Spec {
    name: "options",
    about: "Call GetDevicePluginOptions on a device plugin",
    group: super::surface::Group::Plugin,
    args: surface::args::<OptionsArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<OptionsArgs>,
};

const EXAMPLES: &str = "Examples:
  # What the kubelet learns first: pre_start_required, get_preferred_allocation_available
  dpctl options nvidia-gpu.sock
  # as JSON (protojson names; add --emit-defaults for false fields)
  dpctl options /var/lib/kubelet/device-plugins/vendor.sock -o json";

/// `dpctl options`
#[derive(Debug, Args)]
pub struct OptionsArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
}

impl Invocation for OptionsArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &OptionsArgs) -> Result<()> {
    let conn = ctx.plugin(&a.socket).await?;
    let opts = conn.options().await?;
    match ctx.format {
        Format::Table => emit(&table(
            &["OPTION", "VALUE"],
            &[
                vec!["pre_start_required".to_string(), opts.pre_start_required.to_string()],
                vec![
                    "get_preferred_allocation_available".to_string(),
                    opts.get_preferred_allocation_available.to_string(),
                ],
            ],
        )),
        f => emit(&structured(f, &opts)?),
    }
}
