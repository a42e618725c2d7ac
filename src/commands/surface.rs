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

/// The task a command serves: `dpctl --help` lists the commands under
/// these headings, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// The first minute, and the shell set up.
    GettingStarted,
    /// Client commands: ask a device plugin or a DRA driver what the kubelet would.
    Plugin,
    /// Play a plugin: simulate one, record a real one, replay a recording.
    Simulate,
    /// Stand in for the kubelet.
    Kubelet,
    /// Read a node's kubelet state.
    Diagnose,
    /// Conformance suites and benchmarks.
    Ci,
}

impl Group {
    /// Every group, in the order `--help` lists them.
    pub const ALL: [Group; 6] =
        [Group::GettingStarted, Group::Plugin, Group::Simulate, Group::Kubelet, Group::Diagnose, Group::Ci];

    /// Its heading in `dpctl --help`.
    pub fn heading(self) -> &'static str {
        match self {
            Group::GettingStarted => "Getting started",
            Group::Plugin => "Talk to a device plugin or DRA driver",
            Group::Simulate => "Simulate, record and replay a plugin or driver",
            Group::Kubelet => "Stand in for the kubelet",
            Group::Diagnose => "Diagnose a node",
            Group::Ci => "Test and benchmark (CI)",
        }
    }
}

/// One command's surface.
pub struct Spec {
    /// Its name on the command line.
    pub name: &'static str,
    /// Its one-line summary (`dpctl --help`, its man page's NAME).
    pub about: &'static str,
    /// The task it serves: its heading in `dpctl --help`.
    pub group: Group,
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

/// The whole command line: `top` with every command of `table`, in order,
/// its `--help` listing them under their [`Group`] headings.
pub fn assemble(top: clap::Command, table: &[&Spec]) -> clap::Command {
    let top = top.subcommand_required(true).arg_required_else_help(true).help_template(help_template(table));
    table.iter().fold(top, |cmd, s| cmd.subcommand(s.command()))
}

/// `dpctl --help`: clap's layout, with the commands grouped by task (clap
/// has headings for arguments, not for subcommands) and the environment
/// variables before the Examples.
pub fn help_template(table: &[&Spec]) -> String {
    let width = table.iter().map(|s| s.name.len()).max().unwrap_or(0) + 2;
    let mut t = String::from("{about-with-newline}\n{usage-heading} {usage}\n");
    for g in Group::ALL {
        let mut members = table.iter().filter(|s| s.group == g).peekable();
        if members.peek().is_none() {
            continue;
        }
        t.push_str(&format!("\n{}:\n", g.heading()));
        for s in members {
            t.push_str(&format!("  {:width$}{}\n", s.name, s.about));
        }
    }
    t.push_str(&format!("  {:width$}{}\n", "help", "Print this message or the help of the given command(s)"));
    t.push_str("\nOptions:\n{options}\n\n");
    t.push_str(&crate::help::environment_help());
    t.push_str("{after-help}");
    t
}

/// The completion hints of `table`: commands whose positional argument is a
/// socket, `(command, flag)` pairs whose flag takes one, and the versions
/// `--kubelet-version` takes.
pub fn socket_hints(table: &[&Spec]) -> crate::help::SocketHints {
    let mut hints = crate::help::SocketHints {
        kubelet_versions: crate::kubelet::profile::KubeletVersion::all().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    for s in table {
        for h in s.sockets {
            match h {
                Socket::Positional => hints.positional.push(s.name),
                Socket::Flag(f) => hints.flags.push((s.name, f)),
                Socket::Registry(subs) => hints.registry.extend(subs.iter().map(|sub| (s.name, *sub))),
            }
        }
    }
    hints
}

#[cfg(test)]
mod tests {
    use super::super::{command, Cli, ALL};
    use super::*;

    fn every_command(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = format!("{path} {}", sub.get_name()).trim().to_string();
            out.push((p.clone(), sub.clone()));
            every_command(sub, p, out);
        }
    }

    #[test]
    fn the_table_is_the_command_line() {
        let cmd = command();
        let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
        let table: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        assert_eq!(names, table, "one subcommand per Spec, in the table's order");
        let mut all = vec![(String::from("dpctl"), cmd.clone())];
        every_command(&cmd, String::new(), &mut all);
        assert!(all.len() > 40, "{}", all.len());
        for (path, c) in all {
            let after = c.get_after_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(after.starts_with("Examples:\n  "), "{path} declares no Examples");
            assert!(c.get_about().is_some(), "{path} has no summary");
        }
    }

    /// `dpctl --help` groups commands by task; the table (clap's order, the
    /// man page's SUBCOMMANDS) lists them in the same order, group by group.
    #[test]
    fn the_table_is_in_group_order_and_help_shows_every_group() {
        assert!(ALL.windows(2).all(|w| w[0].group <= w[1].group), "commands::ALL is not in Group order");
        let help = help_template(ALL);
        let mut at = 0;
        for g in Group::ALL {
            let i = help[at..].find(&format!("\n{}:\n", g.heading())).map(|i| at + i);
            let Some(i) = i else { panic!("no {g:?} heading after byte {at}:\n{help}") };
            at = i;
        }
        for s in ALL {
            assert!(help.contains(&format!("  {:14}{}\n", s.name, s.about)), "{} missing:\n{help}", s.name);
        }
    }

    #[test]
    fn every_command_file_is_in_the_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
        let mut declared = Vec::new();
        for e in std::fs::read_dir(&dir).expect("src/commands") {
            let mut path = e.expect("entry").path();
            if path.ends_with("surface.rs") {
                continue;
            }
            // A command of several files (commands/dra/) declares itself in its mod.rs.
            if path.is_dir() {
                path.push("mod.rs");
            }
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(rest) = text.split("pub const COMMAND: Spec = Spec {").nth(1) {
                let name = rest.split("name: \"").nth(1).and_then(|r| r.split('"').next()).unwrap_or_default();
                declared.push(name.to_string());
            }
        }
        declared.sort();
        let mut listed: Vec<String> = ALL.iter().map(|s| s.name.to_string()).collect();
        listed.sort();
        assert_eq!(declared, listed, "a command file's COMMAND is missing from commands::ALL");
    }

    #[test]
    fn socket_hints_name_socket_arguments() {
        let hints = socket_hints(ALL);
        assert_eq!(hints.positional, ["options", "watch", "allocate", "preferred", "prestart", "probe"]);
        assert_eq!(hints.flags, [("record", "plugin"), ("replay", "against"), ("test", "socket")]);
        let cmd = command();
        let sub = |n: &str| cmd.find_subcommand(n).unwrap_or_else(|| panic!("no {n}")).clone();
        for name in hints.positional {
            let c = sub(name);
            let pos = c.get_positionals().next().unwrap_or_else(|| panic!("{name} has no positional"));
            assert_eq!(pos.get_value_names().map(|v| v.to_vec()), Some(vec!["SOCKET".into()]), "{name}");
        }
        for (name, flag) in hints.flags {
            let c = sub(name);
            let arg =
                c.get_arguments().find(|a| a.get_long() == Some(flag)).unwrap_or_else(|| panic!("{name} --{flag}"));
            assert_eq!(arg.get_value_names().map(|v| v.to_vec()), Some(vec!["SOCKET".into()]), "{name} --{flag}");
        }
    }

    #[test]
    fn runtime_hints_follow_the_parsed_command() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("dpctl").chain(args.iter().copied())).unwrap_or_else(|e| panic!("{e}"))
        };
        for (args, workers, refuses) in [
            (&["options", "x.sock"][..], 0, false),
            (&["serve", "--resource", "v.e/foo"], 1, true),
            (&["replay", "t.jsonl"], 1, false),
            (&["record", "--plugin", "p.sock", "--resource", "v.e/foo", "--out", "t"], 1, true),
            (&["mock-kubelet"], 2, true),
            (&["demo"], 2, true),
            (&["test", "--", "plugin"], 2, false),
            (&["bench", "kubelet"], 2, false),
            (&["bench", "watch"], 0, false),
            (&["dra", "serve", "--driver", "gpu.example.com"], 1, false),
            (&["dra", "list"], 0, false),
            (&["completion", "bash"], 0, true),
            (&["node"], 0, false),
        ] {
            let cli = parse(args);
            assert_eq!(cli.workers(), workers, "{args:?}");
            assert_eq!(cli.spec.refuses_output.is_some(), refuses, "{args:?}");
        }
    }
}
