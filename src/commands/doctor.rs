//! `dpctl doctor`: read-only node inspection; exit 1 when a finding is an
//! error or something could not be checked. `--npd` speaks
//! node-problem-detector's custom-plugin protocol instead: one short line,
//! exit 0 ok, 1 problem, 2 unknown.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::{Error, Result};
use crate::doctor::{inspect, Options, Report, Severity};
use crate::render::{emit, structured, Format};
use clap::Args;
use colored::Colorize;
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl doctor`: its surface.
pub const COMMAND: Spec = Spec {
    name: "doctor",
    about: "Inspect the node read-only: what is wrong with its device plugins and DRA drivers, and how to fix it",
    group: super::surface::Group::Diagnose,
    args: surface::args::<DoctorArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<DoctorArgs>,
};

const EXAMPLES: &str = "Examples:
  # What is wrong with this node's device plugins, and how to fix it
  dpctl doctor
  dpctl doctor -o json
  # from a debug pod, with the node's filesystem at /host
  kubectl debug node/NODE -it --profile=sysadmin --image=IMAGE -- dpctl doctor --root /host
  # never open ListAndWatch (plugins that misbehave with extra clients)
  dpctl doctor --no-streams
  # node-problem-detector custom plugin: one line, exit 0 ok / 1 problem / 2 unknown
  dpctl doctor --npd";

/// `dpctl doctor`
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The kubelet's PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with
    /// --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub pod_resources_socket: Option<PathBuf>,
    /// The plugin-watcher directory, checked when it exists [default: <kubelet-root-dir>/plugins_registry]
    #[arg(long, value_name = "DIR")]
    pub plugins_registry_dir: Option<PathBuf>,
    /// A directory of CDI specs (repeatable) [default: $DPCTL_CDI_SPEC_DIRS, else /etc/cdi,
    /// /var/run/cdi and <kubelet-root>/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
    /// Never open ListAndWatch: some plugins let an extra stream swallow updates meant for the kubelet
    #[arg(long)]
    pub no_streams: bool,
    /// node-problem-detector custom plugin mode: one short line; exit 0 ok, 1 problem, 2 unknown
    #[arg(long)]
    pub npd: bool,
}

impl Invocation for DoctorArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// NPD keeps the first `max_output_length` bytes (default 80) of a custom plugin's output.
const NPD_MAX: usize = 80;

/// The one line and exit code for node-problem-detector.
pub fn npd_line(r: &Report) -> (String, i32) {
    let worst = r.findings.first();
    let n = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let (code, mut line) = match (r.result.as_str(), worst) {
        ("error", Some(f)) => {
            let more = match n(Severity::Error) {
                1 => String::new(),
                k => format!(" (+{} more)", k - 1),
            };
            (1, format!("{} {}{more}: {}", f.check, f.subject, f.message))
        }
        ("unknown", Some(f)) => (2, format!("cannot check: {} {}", f.check, f.message)),
        _ => (0, format!("device plugins ok ({} warning(s))", n(Severity::Warning))),
    };
    line = line.replace(['\n', '\r'], " ");
    if line.len() > NPD_MAX {
        let mut cut = NPD_MAX - 3;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str("...");
    }
    (line, code)
}

/// The summary's head: the result and the findings counted by severity,
/// the same counts the exit message gives ("ok: no problems found" when
/// there are only notes).
pub fn headline(r: &Report) -> String {
    let n = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let counts: Vec<String> = [
        (Severity::Error, "error(s)"),
        (Severity::Unknown, "unchecked"),
        (Severity::Warning, "warning(s)"),
        (Severity::Info, "note(s)"),
    ]
    .iter()
    .filter(|(s, _)| n(*s) > 0)
    .map(|(s, what)| format!("{} {what}", n(*s)))
    .collect();
    match (r.result.as_str(), counts.is_empty()) {
        ("ok", true) => "ok: no problems found".to_string(),
        ("ok", false) => format!("ok: no problems found ({})", counts.join(", ")),
        (result, _) => format!("{result}: {}", counts.join(", ")),
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &DoctorArgs) -> Result<()> {
    let p = &ctx.paths;
    let o = Options {
        plugin_dir: p.plugin_dir.clone(),
        pod_resources_socket: ctx.pod_resources(a.pod_resources_socket.as_ref()),
        plugins_registry_dir: p.plugins_registry_dir(a.plugins_registry_dir.as_deref()),
        pods_dir: p.plugin_dir.parent().map(|d| d.join("pods")).unwrap_or_else(|| p.kubelet_root.join("pods")),
        cdi: p.cdi_search_path(&a.cdi_spec_dir),
        streams: !a.no_streams,
        // Every socket is checked concurrently; keep the whole run under 5 s.
        timeout: ctx.timeout.min(Duration::from_secs(2)),
        root: p.root.clone(),
        kubelet_root: p.kubelet_root.clone(),
    };
    let report = inspect(&o).await;
    if a.npd {
        let (line, code) = npd_line(&report);
        emit(&format!("{line}\n"))?;
        return match code {
            0 => Ok(()),
            // NPD reads only stdout and the exit code: nothing on stderr.
            c => Err(Error::Silent(c)),
        };
    }
    if ctx.format != Format::Table {
        emit(&structured(ctx.format, &report)?)?;
    } else {
        let mut out = String::new();
        for f in &report.findings {
            let sev = match f.severity {
                Severity::Error => "ERROR".red().to_string(),
                Severity::Unknown => "UNKNOWN".magenta().to_string(),
                Severity::Warning => "WARN ".yellow().to_string(),
                Severity::Info => "INFO ".normal().to_string(),
            };
            out.push_str(&format!("{sev}  {}  {}: {}\n", f.check, f.subject, f.message));
            if !f.evidence.is_empty() {
                out.push_str(&format!("       evidence: {}\n", f.evidence));
            }
            if !f.fix.is_empty() {
                out.push_str(&format!("       fix: {}\n", f.fix));
            }
        }
        let c = &report.checked;
        out.push_str(&format!(
            "{}; checked {} plugin socket(s), kubelet.sock {}, {} checkpoint allocation(s), PodResources {}, {} plugin-watcher socket(s){}{}\n",
            headline(&report),
            c.plugin_sockets,
            if c.kubelet_socket_live { "live" } else { "not live" },
            c.checkpoint_allocations,
            if c.pod_resources { "answered" } else { "not reached" },
            c.watcher_sockets,
            if c.dra_plugins > 0 { format!(" ({} DRA)", c.dra_plugins) } else { String::new() },
            if c.streams { "" } else { "; ListAndWatch not opened (--no-streams)" }
        ));
        for sv in &c.plugins {
            out.push_str(&format!("  {} is served by {} ({})\n", sv.resource, sv.socket, sv.how));
        }
        if !c.cdi_spec_dirs.is_empty() {
            out.push_str(&format!("  CDI specs looked up in {}\n", c.cdi_spec_dirs));
        }
        emit(&out)?;
    }
    match report.result.as_str() {
        "error" => {
            let n = report.findings.iter().filter(|f| f.severity == Severity::Error).count();
            Err(Error::failed(format!("doctor found {n} error(s) in {}", p.plugin_dir.display())))
        }
        "unknown" => {
            let why = match report.findings.iter().find(|f| f.severity == Severity::Unknown) {
                Some(f) if f.check == "permission-denied" => "permission denied; run it as root".to_string(),
                Some(f) => format!("{}: {}", f.subject, f.message),
                None => String::new(),
            };
            Err(Error::failed(format!("doctor could not check everything in {} ({why})", p.plugin_dir.display())))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Checked, Finding};

    fn report(result: &str, sevs: &[Severity]) -> Report {
        let findings = sevs
            .iter()
            .map(|s| Finding {
                severity: *s,
                check: "plugin-died",
                subject: "vendor.example/foo".into(),
                message: "x\ny".repeat(100),
                evidence: String::new(),
                fix: String::new(),
            })
            .collect();
        Report { result: result.into(), checked: Checked::default(), findings }
    }

    #[test]
    fn the_headline_counts_what_the_exit_message_counts() {
        assert_eq!(headline(&report("ok", &[])), "ok: no problems found");
        assert_eq!(headline(&report("ok", &[Severity::Info])), "ok: no problems found (1 note(s))");
        assert_eq!(
            headline(&report("error", &[Severity::Error, Severity::Warning, Severity::Info])),
            "error: 1 error(s), 1 warning(s), 1 note(s)"
        );
        assert_eq!(headline(&report("unknown", &[Severity::Unknown])), "unknown: 1 unchecked");
    }

    #[test]
    fn npd_lines_are_short_single_lines_with_npd_exit_codes() {
        let (l, c) = npd_line(&report("ok", &[]));
        assert_eq!((l.as_str(), c), ("device plugins ok (0 warning(s))", 0));
        assert_eq!(npd_line(&report("warning", &[Severity::Warning])).1, 0);
        let (l, c) = npd_line(&report("error", &[Severity::Error, Severity::Warning]));
        assert_eq!(c, 1);
        assert!(npd_line(&report("error", &[Severity::Error, Severity::Error]))
            .0
            .starts_with("plugin-died vendor.example/foo (+1 more): "));
        assert_eq!(c, 1);
        assert!(l.starts_with("plugin-died vendor.example/foo: x y") && l.len() <= NPD_MAX && !l.contains('\n'), "{l}");
        assert_eq!(npd_line(&report("unknown", &[Severity::Unknown])).1, 2);
    }
}
