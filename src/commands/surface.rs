//! What a command declares about itself, next to its `run` (as cargo's
//! commands do): its name and summary, its clap arguments, its Examples
//! section, which of its arguments are plugin sockets (for completion) and
//! how it runs (worker threads, whether `-o` applies). The command line,
//! `--help`, completions and man pages are assembled from these.

use super::Ctx;
use crate::core::Result;
use crate::help::Socket;
use std::future::Future;
use std::pin::Pin;

/// A command's work in progress.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<()>> + 'a>>;

/// One parsed command line, ready to run.
pub trait Invocation {
    /// Runtime worker threads (0 = a single-threaded runtime). Measured on
    /// 2 cores (BENCHMARKS.md): a plugin serves fastest on one worker — two
    /// workers spend their time waking each other across cores; one-shot
    /// clients and the load generator stay on one thread, leaving the other
    /// core to the plugin under test; the kubelet roles, which host many
    /// connections, keep two. `DPCTL_WORKERS` overrides it.
    fn workers(&self) -> usize {
        0
    }

    /// Run it.
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a>;
}

/// One command's surface.
pub struct Spec {
    /// Its name on the command line.
    pub name: &'static str,
    /// Its one-line summary (`dpctl --help`, its man page's NAME).
    pub about: &'static str,
    /// Its arguments or nested subcommands: [`args`] or [`subcommands`] of its clap type.
    pub args: fn(clap::Command) -> clap::Command,
    /// Its Examples section, after its `--help` and in its man page (nested
    /// subcommands carry theirs as `#[command(after_help = …)]`).
    pub examples: &'static str,
    /// Completion hints: which of its arguments name a plugin socket.
    pub sockets: &'static [Socket],
    /// Runtime hint: commands that log events or print a script instead of a
    /// result refuse `-o`, saying what to use instead.
    pub refuses_output: Option<&'static str>,
    /// Its parsed arguments, as something to run: [`parse`] of its clap type.
    pub parse: fn(&clap::ArgMatches) -> std::result::Result<Box<dyn Invocation>, clap::Error>,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Spec {
    /// The clap subcommand: its name, arguments, summary and examples.
    pub fn command(&self) -> clap::Command {
        (self.args)(clap::Command::new(self.name)).about(self.about).long_about(None).after_help(self.examples)
    }
}

/// [`Spec::args`] of a command whose arguments are one `#[derive(Args)]` type.
pub fn args<A: clap::Args>(cmd: clap::Command) -> clap::Command {
    A::augment_args(cmd)
}

/// [`Spec::args`] of a command made of nested subcommands (`#[derive(Subcommand)]`).
pub fn subcommands<S: clap::Subcommand>(cmd: clap::Command) -> clap::Command {
    S::augment_subcommands(cmd.subcommand_required(true).arg_required_else_help(true))
}

/// [`Spec::parse`] of a command whose clap type is what it runs.
pub fn parse<A: clap::FromArgMatches + Invocation + 'static>(
    m: &clap::ArgMatches,
) -> std::result::Result<Box<dyn Invocation>, clap::Error> {
    Ok(Box::new(A::from_arg_matches(m)?))
}

/// The whole command line: `top` with every command of `table`, in order.
pub fn assemble(top: clap::Command, table: &[&Spec]) -> clap::Command {
    table.iter().fold(top.subcommand_required(true).arg_required_else_help(true), |cmd, s| cmd.subcommand(s.command()))
}

/// The completion hints of `table`: commands whose positional argument is a
/// socket, and `(command, flag)` pairs whose flag takes one.
pub fn socket_hints(table: &[&Spec]) -> crate::help::SocketHints {
    let mut hints = crate::help::SocketHints::default();
    for s in table {
        for h in s.sockets {
            match h {
                Socket::Positional => hints.positional.push(s.name),
                Socket::Flag(f) => hints.flags.push((s.name, f)),
            }
        }
    }
    hints
}
