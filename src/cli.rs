//! The shared part of the command line: dpctl's own name, summary and
//! global options, the flag groups and value parsers several commands use,
//! and parsing with capped usage errors. Each command declares the rest
//! next to its `run` (`commands::*`), and `commands::command()` assembles
//! them: the source of `--help`, shell completions (`completions/`) and man
//! pages (`man/`).

use crate::plugin::config::RegistrationMode;
use crate::render::Format;
use clap::{Args, Parser};
use std::path::PathBuf;
use std::time::Duration;

/// dpctl itself with its global options and Examples, but no commands yet.
pub fn top() -> clap::Command {
    use clap::CommandFactory;
    Top::command().after_help(TOP_EXAMPLES)
}

/// dpctl's one-line summary (`dpctl -h`, the NAME of `man dpctl`).
pub const ABOUT: &str =
    "Test, inspect and stand in for either side of the kubelet's plugin protocols: device plugins and DRA drivers";

/// What `dpctl --help` and `man dpctl` open with.
pub const LONG_ABOUT: &str = "dpctl speaks the kubelet's plugin gRPC protocols over Unix sockets, for both \
plugin kinds: device plugins (deviceplugin v1beta1, podresources v1) and DRA drivers' kubelet plugins \
(dra v1 and v1beta1, dra-health), both registered through pluginregistration v1. Point it at a plugin's \
or a driver's socket to see what the kubelet would see; serve a simulated plugin or driver; stand in for \
the kubelet (a mock kubelet, with a local API server for DRA drivers); run a plugin or a driver through \
a conformance suite; or find out what is wrong with a node.

Exit codes: 0 ok, 1 failure (RPC error, failed check, unreachable socket, timeout), 2 usage error.";

/// The top-level Examples.
pub const TOP_EXAMPLES: &str = "Examples:
  # the first minute: mock kubelet + simulated plugin + a pod, in a temp dir (--dra: a DRA driver and a claim)
  dpctl demo
  dpctl demo --dra
  # what a plugin or a DRA driver on this node tells the kubelet
  dpctl probe nvidia-gpu.sock
  dpctl watch nvidia-gpu.sock
  dpctl dra list
  dpctl dra probe gpu.example.com-reg.sock
  # your plugin or driver through the conformance suite
  dpctl test -- ./my-plugin --socket-dir {plugin-dir}
  dpctl test --dra -- ./my-driver --kubelet-root {kubelet-root-dir} --kubeconfig {kubeconfig}
  # what is wrong with this node's device plugins and DRA drivers
  dpctl doctor";

/// Parse the process's arguments against `cmd` and turn the matches into
/// `T`, or exit as clap does: help and version on stdout (exit 0), usage
/// errors on stderr (exit 2) — with every echoed value escaped and capped,
/// so a 128 KiB argument makes a short error line.
pub fn parse_or_exit<T>(cmd: clap::Command, f: impl FnOnce(&clap::ArgMatches) -> Result<T, clap::Error>) -> T {
    match cmd.try_get_matches().and_then(|m| f(&m)) {
        Ok(t) => t,
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            let capped: Vec<String> = text.lines().map(|l| crate::core::text::cap_words(l).into_owned()).collect();
            eprintln!("{}", capped.join("\n").trim_end());
            std::process::exit(e.exit_code());
        }
        Err(e) => e.exit(),
    }
}

/// Why a flag's value is refused (clap prints it after the flag and the value).
#[derive(Debug, Clone, PartialEq)]
pub enum FlagValueError {
    /// Not of the form the flag takes: `"x" is not KEY=VALUE`.
    NotForm {
        /// The value given.
        value: String,
        /// The form, with an example where one helps.
        form: &'static str,
    },
    /// Of the form, with a part wrong: `"x": the name is empty`.
    Part {
        /// The value given.
        value: String,
        /// What is wrong, and the fix.
        problem: String,
    },
    /// A number beyond what it can hold: `"x" is out of range`.
    OutOfRange(String),
    /// Outside the flag's range: `must be greater than zero`.
    Range(String),
    /// A duration that does not parse.
    Duration(crate::core::time::TimeError),
    /// A quantity that does not parse.
    Quantity(crate::controlplane::objects::quantity::QuantityError),
}

impl FlagValueError {
    /// `value` is not `form`.
    pub fn not_form(value: &str, form: &'static str) -> Self {
        FlagValueError::NotForm { value: value.to_string(), form }
    }

    /// A part of `value` is wrong: `problem`.
    pub fn part(value: &str, problem: impl Into<String>) -> Self {
        FlagValueError::Part { value: value.to_string(), problem: problem.into() }
    }
}

impl std::fmt::Display for FlagValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlagValueError::NotForm { value, form } => write!(f, "{value:?} is not {form}"),
            FlagValueError::Part { value, problem } => write!(f, "{value:?}: {problem}"),
            FlagValueError::OutOfRange(value) => write!(f, "{value:?} is out of range"),
            FlagValueError::Range(range) => f.write_str(range),
            FlagValueError::Duration(e) => e.fmt(f),
            FlagValueError::Quantity(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FlagValueError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FlagValueError::Duration(e) => Some(e),
            FlagValueError::Quantity(e) => Some(e),
            _ => None,
        }
    }
}

/// Parse a `--timeout`-style duration for clap.
pub fn duration_arg(s: &str) -> Result<Duration, FlagValueError> {
    crate::core::time::parse_duration(s).map_err(FlagValueError::Duration)
}

/// Parse a duration that must be greater than zero, for clap.
pub fn positive_duration_arg(s: &str) -> Result<Duration, FlagValueError> {
    let d = duration_arg(s)?;
    if d.is_zero() {
        return Err(FlagValueError::Range("must be greater than zero".into()));
    }
    Ok(d)
}

/// Test, inspect and stand in for either side of the kubelet's plugin protocols.
#[derive(Debug, Parser)]
#[command(
    name = "dpctl",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT
)]
pub struct Top {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
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

/// A plugin socket argument.
#[derive(Debug, Args)]
pub struct SocketArg {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
}

/// How a plugin role (serve, replay) serves and registers.
#[derive(Debug, Args)]
pub struct RegistrationArgs {
    /// Socket file name in the plugin directory [default: unique per start]
    #[arg(id = "socketName", long = "socket-name", value_name = "NAME")]
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
