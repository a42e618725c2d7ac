//! `dpctl completion SHELL`: a shell completion script, from the same
//! definitions as `--help` and the man pages.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::Result;
use crate::help::Shell;
use clap::Args;

/// `dpctl completion`: its surface.
pub const COMMAND: Spec = Spec {
    name: "completion",
    about:
        "Print a shell completion script (bash, zsh or fish); sockets complete from --plugin-dir and plugins_registry/",
    group: super::surface::Group::GettingStarted,
    args: surface::args::<CompletionArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: Some("completion prints a shell script"),
    parse: surface::parse::<CompletionArgs>,
};

const EXAMPLES: &str = "Examples:
  # bash, this shell only
  source <(dpctl completion bash)
  # zsh
  dpctl completion zsh > \"${fpath[1]}/_dpctl\"
  # fish
  dpctl completion fish > ~/.config/fish/completions/dpctl.fish";

/// `dpctl completion`
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

impl Invocation for CompletionArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(async move { run(ctx, self) })
    }
}

/// Run the command: the script for the whole command line (`ctx.commands`).
pub fn run(ctx: &Ctx, a: &CompletionArgs) -> Result<()> {
    let mut cmd = surface::assemble(crate::cli::top(), ctx.commands);
    let script = crate::help::completion_script(a.shell, &mut cmd, &surface::socket_hints(ctx.commands));
    crate::render::emit(&String::from_utf8_lossy(&script))
}
