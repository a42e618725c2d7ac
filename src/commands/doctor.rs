//! `dpctl doctor`: read-only node inspection; exit 1 when a finding is an error.

use super::Ctx;
use crate::cli::DoctorArgs;
use crate::core::{Error, Result};
use crate::doctor::{inspect, Options, Severity};
use crate::render::{emit, structured, Format};
use colored::Colorize;
use std::time::Duration;

/// Run the command.
pub async fn run(ctx: &Ctx, a: &DoctorArgs) -> Result<()> {
    let o = Options {
        plugin_dir: ctx.paths.plugin_dir.clone(),
        pod_resources_socket: ctx.pod_resources(a.pod_resources_socket.as_ref()),
        plugins_registry_dir: a.plugins_registry_dir.clone(),
        // Every socket is checked concurrently; keep the whole run under 5 s.
        timeout: ctx.timeout.min(Duration::from_secs(2)),
    };
    let report = inspect(&o).await;
    if ctx.format != Format::Table {
        emit(&structured(ctx.format, &report)?)?;
    } else {
        let mut out = String::new();
        for f in &report.findings {
            let sev = match f.severity {
                Severity::Error => "ERROR".red().to_string(),
                Severity::Warning => "WARN ".yellow().to_string(),
                Severity::Info => "INFO ".normal().to_string(),
            };
            out.push_str(&format!("{sev}  {}  {}: {}\n", f.check, f.subject, f.message));
            if !f.evidence.is_empty() {
                out.push_str(&format!("       evidence: {}\n", f.evidence));
            }
            out.push_str(&format!("       fix: {}\n", f.fix));
        }
        let c = &report.checked;
        out.push_str(&format!(
            "{}: {} finding(s); checked {} plugin socket(s), kubelet.sock {}, {} checkpoint allocation(s), PodResources {}, {} plugin-watcher socket(s)\n",
            report.result,
            report.findings.len(),
            c.plugin_sockets,
            if c.kubelet_socket_live { "live" } else { "not live" },
            c.checkpoint_allocations,
            if c.pod_resources { "answered" } else { "not reached" },
            c.watcher_sockets
        ));
        emit(&out)?;
    }
    if report.result == "error" {
        let n = report.findings.iter().filter(|f| f.severity == Severity::Error).count();
        return Err(Error::failed(format!("doctor found {n} error(s) in {}", ctx.paths.plugin_dir.display())));
    }
    Ok(())
}
