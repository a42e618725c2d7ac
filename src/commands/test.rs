//! `dpctl test`: run the conformance suite against a plugin command (or a
//! running plugin's socket), with live output, `-o json|yaml`, and
//! `--junit FILE`. Exit 1 when any scenario failed.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::cli::positive_duration_arg;
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::render::{emit, structured, Format};
use crate::suite::filter::Pattern;
use crate::suite::report::{self, Document};
use crate::suite::run::{self, Options, Progress};
use crate::suite::{Record, Verdict};
use clap::Args;
use colored::Colorize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `dpctl test`: its surface.
pub const COMMAND: Spec = Spec {
    name: "test",
    about: "Conformance suites: run a device plugin (or, with --dra, a DRA driver) against a mock kubelet",
    group: super::surface::Group::Ci,
    args: surface::args::<TestArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Flag("socket")],
    refuses_output: None,
    parse: surface::parse::<TestArgs>,
};

const EXAMPLES: &str = "Examples:
  # Run a plugin through every scenario against a mock kubelet in a temp dir
  dpctl test -- dpctl serve --resource vendor.example/gpu --count 4 --plugin-dir {plugin-dir} --retry
  dpctl test --junit report.xml -- ./my-plugin --socket-dir {plugin-dir}
  dpctl test --focus 'KRES|PRES' -- ./my-plugin
  # the scenarios (what --focus 'REG|LAW-00[12]' would run), without running anything
  dpctl test --list
  dpctl test --list --focus 'REG|LAW-00[12]'
  dpctl test --restart-backoff 1s --health-trigger './break-gpu0 {plugin-dir}' --health-timeout 60s -- ./my-plugin
  dpctl test --isolate -- ./plugin-with-hard-coded-paths
  # the plugin's support range in one run (results per kubelet version)
  dpctl test --kubelet-version 1.31,1.37 --junit report.xml -- ./my-plugin --socket-dir {plugin-dir}
  # a plugin that is already running (no process or kubelet control)
  dpctl test --socket /var/lib/kubelet/device-plugins/gpu.sock
  # a DRA driver's kubelet plugin, with the engine's local API server
  dpctl test --dra -- dpctl --kubelet-root-dir {kubelet-root-dir} dra serve --driver gpu.example.com \\
    --cdi-dir {cdi-dir} --kubeconfig {kubeconfig} --node-name {node-name}";

/// `dpctl test`
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The resource to test [default: the first one the plugin registers]
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Run only scenarios whose ID matches: a case-insensitive substring or glob (* ? [0-9]), ^ $ anchors,
    /// a|b alternatives; an alternative written group:NAME or title:TEXT matches the group or the title
    /// instead (see --list)
    #[arg(long, value_name = "PATTERN")]
    pub focus: Option<String>,
    /// Leave out scenarios whose ID matches (same syntax as --focus: group: and title: too)
    #[arg(long, value_name = "PATTERN")]
    pub skip: Option<String>,
    /// Print the scenarios (ID, group, title; -o json|yaml: with rule and source) that would run, and exit:
    /// every one, or those --focus and --skip select; with --dra, the DRA driver suite's
    #[arg(long)]
    pub list: bool,
    /// Also write the results as JUnit XML to FILE (GitHub Actions, GitLab)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Run the plugin in a private mount namespace with the temp tree mounted at /var/lib/kubelet/…
    #[arg(long)]
    pub isolate: bool,
    /// A shell command that makes one device unhealthy (placeholders allowed); enables HEALTH-001
    #[arg(long, value_name = "CMD")]
    pub health_trigger: Option<String>,
    /// Test a DRA driver's kubelet plugin instead (placeholders {kubelet-root-dir},
    /// {plugins-registry-dir}, {cdi-dir}, {kubeconfig}, {node-name}, {rolling-uid}; exported as DPCTL_TEST_KUBELET_ROOT_DIR, …)
    #[arg(long, conflicts_with_all = ["socket", "isolate", "health_trigger", "resource"])]
    pub dra: bool,
    /// Serve {kubeconfig}'s API server over plain HTTP without authentication (as kube-apiserver's old
    /// insecure port) instead of HTTPS with its own CA and a token
    #[arg(long, requires = "dra")]
    pub api_server_insecure: bool,
    /// Run the suite against each of these kubelet versions (comma-separated, 1.25 to 1.37) [default: 1.37]
    #[arg(long, value_parser = crate::kubelet::profile::VersionList::parse, value_name = "X.Y[,X.Y…]")]
    pub kubelet_version: Option<crate::kubelet::profile::VersionList>,
    /// How long HEALTH-001 waits for the unhealthy device to leave allocatable (slow health loops)
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub health_timeout: Duration,
    /// Back-off before a plugin that exited on its own is restarted, as the kubelet restarts a DaemonSet pod
    #[arg(long, default_value = "10s", value_parser = positive_duration_arg, value_name = "DURATION")]
    pub restart_backoff: Duration,
    /// Never restart a plugin that exits on its own (judge it on its first run)
    #[arg(long, conflicts_with = "restart_backoff")]
    pub no_restart: bool,
    /// Test an already running plugin on SOCKET (only scenarios that need no control of it)
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["isolate", "health_trigger", "plugin", "no_restart", "restart_backoff"])]
    pub socket: Option<PathBuf>,
    /// The plugin's command line, after -- (found on PATH: for `dpctl serve`, run `cargo install --path .`
    /// in a checkout first). Placeholders {plugin-dir}, {kubelet-socket},
    /// {plugins-registry-dir} and {pod-resources-socket} are substituted, and exported as
    /// DPCTL_TEST_PLUGIN_DIR, DPCTL_TEST_KUBELET_SOCKET, DPCTL_TEST_PLUGINS_REGISTRY_DIR and
    /// DPCTL_TEST_POD_RESOURCES_SOCKET
    #[arg(last = true, value_name = "PLUGIN-COMMAND")]
    pub plugin: Vec<String>,
}

impl Invocation for TestArgs {
    fn workers(&self) -> usize {
        2
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

fn pattern(flag: &str, p: &Option<String>) -> Result<Option<Pattern>> {
    p.as_deref().map(|t| Pattern::parse(t).map_err(|e| Error::usage(format!("{flag} {e}")).caused_by(e))).transpose()
}

/// Write `text` to `path` through a temp file and a rename, so a reader never sees half a report.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    if path.is_dir() {
        return Err(Error::usage(format!("--junit {}: is a directory; name a file", path.display())));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "junit.xml".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| Error::io(path, "cannot write the JUnit report", &e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, "cannot write the JUnit report", &e)
    })
}

fn coloured(line: String, r: &Record) -> String {
    let paint: fn(&str) -> colored::ColoredString = match r.result {
        Verdict::Pass => |s| s.green(),
        Verdict::Fail => |s| s.red().bold(),
        Verdict::Warn => |s| s.magenta(),
        Verdict::Skip | Verdict::NotRun => |s| s.yellow(),
    };
    let word = report::word(r.result);
    match line.strip_prefix(word) {
        Some(rest) => format!("{}{rest}", paint(word)),
        None => line,
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &TestArgs) -> Result<()> {
    if a.list {
        return list(ctx, a);
    }
    if a.plugin.is_empty() && a.socket.is_none() {
        return Err(Error::usage(if a.dra {
            "no driver to test: put its command after --, e.g. dpctl test --dra -- ./my-driver --kubelet-registry-dir {plugins-registry-dir}"
        } else {
            "no plugin to test: put its command after --, e.g. dpctl test -- ./my-plugin --dir {plugin-dir}; or pass --socket SOCKET"
        }));
    }
    if selection(a, false)?.is_empty() {
        return Err(Error::usage(format!("--focus/--skip selected no scenario; see the IDs with {}", list_hint(a))));
    }
    if let Some(j) = &a.junit {
        if j.is_dir() {
            return Err(Error::usage(format!("--junit {}: is a directory; name a file", j.display())));
        }
    }
    let mut opts = options(ctx, a)?;
    let versions: Vec<Option<crate::kubelet::profile::KubeletVersion>> = match &a.kubelet_version {
        None => vec![None],
        Some(l) => l.0.iter().copied().map(Some).collect(),
    };
    if let Some(sock) = &opts.socket {
        // Say up front that nothing answers there, instead of failing every scenario.
        crate::core::transport::connect_raw(sock, ctx.timeout).await?;
    }
    let table = ctx.format == Format::Table;
    let bar = spinner(table);
    let started = Instant::now();
    let mut write_err = None;
    let mut records: Vec<Record> = Vec::new();
    let several = versions.len() > 1;
    let listed: Vec<String> = versions.iter().flatten().map(|v| v.to_string()).collect();
    for version in versions {
        opts.kubelet_version = version;
        let vstart = Instant::now();
        if let (true, true, Some(v)) = (table, several, version) {
            let head = format!("kubelet {v}");
            match &bar {
                Some(pb) => pb.println(head),
                None => emit(&head)?,
            }
        }
        let mut show = |p: Progress| match p {
            Progress::Started(s) => {
                if let Some(pb) = &bar {
                    pb.set_message(format!("{} {}", s.id, s.title));
                }
            }
            Progress::Finished(r) => {
                if !table {
                    return;
                }
                let line = coloured(report::line(r), r);
                match &bar {
                    Some(pb) => pb.println(line),
                    None => {
                        if let Err(e) = emit(&line) {
                            write_err.get_or_insert(e);
                        }
                    }
                }
            }
        };
        // Ctrl-C / SIGTERM: dropping the run kills the plugin's process group and
        // the mock kubelet and removes the temp tree.
        let run = tokio::select! {
            r = async {
                if a.dra { crate::suite::dra::run(&opts, &mut show).await } else { run::run(&opts, &mut show).await }
            } => r,
            _ = crate::core::interrupted() => Err(Error::failed("interrupted; the plugin and the mock kubelet were stopped")),
        };
        let mut run = match run {
            Ok(r) => r,
            Err(e) => {
                if let Some(pb) = &bar {
                    pb.finish_and_clear();
                }
                return Err(e);
            }
        };
        if let Some(v) = version.filter(|_| several) {
            for r in &mut run {
                r.kubelet_version = Some(v.to_string());
            }
            if table {
                let line = format!("kubelet {v}: {}", report::summary(&run, vstart.elapsed()));
                match &bar {
                    Some(pb) => pb.println(line),
                    None => emit(&line)?,
                }
            }
        }
        records.extend(run);
    }
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    if let Some(e) = write_err {
        return Err(e);
    }
    if records.is_empty() {
        return Err(Error::usage(format!("--focus/--skip selected no scenario; see the IDs with {}", list_hint(a))));
    }
    finish(ctx, a, &records, started.elapsed(), &listed)
}

/// The command that lists this suite's scenarios.
fn list_hint(a: &TestArgs) -> &'static str {
    if a.dra {
        "dpctl test --dra --list"
    } else {
        "dpctl test --list"
    }
}

/// The scenarios `--focus` and `--skip` select, in run order (slow ones
/// only when `--focus` names them; with `listing` and no `--focus`, every one).
fn selection(a: &TestArgs, listing: bool) -> Result<Vec<&'static crate::suite::catalog::Scenario>> {
    let (focus, skip) = (pattern("--focus", &a.focus)?, pattern("--skip", &a.skip)?);
    let table = if a.dra { crate::suite::dra::SCENARIOS } else { crate::suite::catalog::SCENARIOS };
    let all = listing && focus.is_none();
    Ok(table
        .iter()
        .filter(|s| {
            crate::suite::catalog::chosen(focus.as_ref(), skip.as_ref(), s)
                || all && s.slow && !skip.as_ref().is_some_and(|p: &Pattern| p.selects(s.id, s.group, s.title))
        })
        .collect())
}

/// `--list`: the catalogue (or what --focus/--skip select of it), nothing run.
fn list(ctx: &Ctx, a: &TestArgs) -> Result<()> {
    let chosen = selection(a, true)?;
    if chosen.is_empty() {
        return Err(Error::usage(format!("--focus/--skip selected no scenario; see the IDs with {}", list_hint(a))));
    }
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = chosen
                .iter()
                .map(|s| {
                    let group = if s.slow { format!("{} (with --focus)", s.group) } else { s.group.to_string() };
                    vec![s.id.to_string(), group, s.title.to_string()]
                })
                .collect();
            let rows: Vec<Vec<&str>> = rows.iter().map(|r| r.iter().map(String::as_str).collect()).collect();
            emit(crate::render::table(&["ID", "GROUP", "TITLE"], &rows).trim_end())
        }
        f => emit(&structured(f, &chosen)?),
    }
}

/// The suite's options from the command line (the kubelet version is set per run).
fn options(ctx: &Ctx, a: &TestArgs) -> Result<Options> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find the dpctl binary to run the mock kubelet: {e}")))?;
    Ok(Options {
        plugin: a.plugin.clone(),
        restart_backoff: (!a.no_restart).then_some(a.restart_backoff),
        health_timeout: a.health_timeout,
        socket: a.socket.as_ref().map(|s| ctx.paths.resolve_socket(s)),
        resource: a.resource.clone(),
        focus: pattern("--focus", &a.focus)?,
        skip: pattern("--skip", &a.skip)?,
        isolate: a.isolate,
        health_trigger: a.health_trigger.clone(),
        // The DRA suite waits as long as the kubelet does unless --timeout says otherwise.
        timeout: if a.dra { ctx.timeout_given.unwrap_or(crate::suite::dra::CALL_TIMEOUT) } else { ctx.timeout },
        exe,
        kubelet_version: None,
        api_server: match a.api_server_insecure {
            true => crate::controlplane::apiserver::Mode::Insecure,
            false => crate::controlplane::apiserver::Mode::Https,
        },
    })
}

/// A spinner naming the running scenario, on a terminal with table output.
fn spinner(table: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    (table && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            pb.set_style(style);
        }
        pb.enable_steady_tick(std::time::Duration::from_millis(100));
        pb
    })
}

/// Write the JUnit file and the report; a failed scenario is exit 1.
fn finish(ctx: &Ctx, a: &TestArgs, records: &[Record], took: std::time::Duration, listed: &[String]) -> Result<()> {
    if let Some(path) = &a.junit {
        write_atomic(path, &report::junit(records, took))?;
    }
    let shown: Vec<String> = match &a.socket {
        Some(s) => vec![s.display().to_string()],
        None => a.plugin.clone(),
    };
    match ctx.format {
        Format::Table => emit(&report::summary(records, took))?,
        f => {
            let doc = Document {
                plugin: &shown,
                totals: report::totals(records),
                duration_ms: took.as_millis() as u64,
                kubelet_versions: listed,
                scenarios: records,
            };
            emit(&structured(f, &doc)?)?;
        }
    }
    let failed = report::totals(records).failed;
    if failed > 0 {
        return Err(Error::failed(format!("{failed} scenario(s) failed")));
    }
    Ok(())
}
