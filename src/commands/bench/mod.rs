//! `dpctl bench`: a load generator for any plugin (device plugins' RPCs,
//! a DRA driver's prepare and unprepare), health-change latency of `dpctl
//! serve`, and the mock kubelet at scale. Numbers go to BENCHMARKS.md (see
//! bench/compare.py); nothing here is a pass/fail test.
//!
//! This file holds the command's surface and what the load benches share
//! (progress line, report table); each kind of bench is its own file.

mod cluster;
pub(crate) mod dra;
mod kubelet;
mod load;
mod watch;

pub use dra::BenchDraArgs;
pub use kubelet::BenchKubeletArgs;
pub use watch::BenchWatchArgs;

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::bench::LoadReport;
use crate::cli::positive_duration_arg;
use crate::core::Result;
use crate::render::{emit, structured, table, Format};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl bench`: its surface.
pub const COMMAND: Spec = Spec {
    name: "bench",
    about: "Benchmarks: drive a plugin, time health changes, time a mock kubelet at scale",
    group: super::surface::Group::Ci,
    args: surface::subcommands::<BenchCommand>,
    examples: EXAMPLES,
    sockets: &[crate::help::Socket::Registry(&["dra"])],
    refuses_output: None,
    parse: surface::parse::<BenchCommand>,
};

const EXAMPLES: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000 -o json
  dpctl bench list-and-watch vendor.sock --concurrency 4
  dpctl bench dra gpu.example.com-reg.sock --concurrency 4 --claims-per-call 3 --duration 10s
  dpctl bench watch
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000";

const ALLOCATE_EXAMPLES: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench allocate vendor.sock --requests 20000 --devices-per-request 2 -o json";

const PREFERRED_EXAMPLES: &str = "Examples:
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000";

const LIST_AND_WATCH_EXAMPLES: &str = "Examples:
  dpctl bench list-and-watch vendor.sock --concurrency 4";

const WATCH_EXAMPLES: &str = "Examples:
  dpctl bench watch
  dpctl bench watch --socket /tmp/dp/foo.sock --changes 200 --sizes 1000";

const KUBELET_EXAMPLES: &str = "Examples:
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000 -o json";

/// How much load to generate.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Number of calls (ignored with --duration)
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes
    #[arg(long, default_value_t = 1, value_name = "C", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// Devices per request (allocate, preferred), at most 100000
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=crate::core::limits::MAX_DEVICES as u64))]
    pub devices_per_request: u64,
    /// Run for this long instead of a number of calls
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
}

/// `dpctl bench …`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Allocate throughput and latency of any plugin
    #[command(after_help = ALLOCATE_EXAMPLES)]
    Allocate(LoadArgs),
    /// GetPreferredAllocation throughput and latency of any plugin
    #[command(after_help = PREFERRED_EXAMPLES)]
    Preferred(LoadArgs),
    /// ListAndWatch: open a stream, take the first snapshot, close — throughput and latency
    #[command(after_help = LIST_AND_WATCH_EXAMPLES)]
    ListAndWatch(LoadArgs),
    /// NodePrepareResources then NodeUnprepareResources of a DRA driver: throughput and latency
    #[command(after_help = dra::EXAMPLES)]
    Dra(BenchDraArgs),
    /// Health change → ListAndWatch client latency, and first-snapshot time of large plugins
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(BenchWatchArgs),
    /// A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS
    #[command(after_help = KUBELET_EXAMPLES)]
    Kubelet(BenchKubeletArgs),
    /// N mock-kubelet nodes of a cluster × D devices, P pods scheduled onto them: until all Running, until all gone, peak RSS
    #[command(after_help = cluster::EXAMPLES)]
    Cluster(cluster::BenchClusterArgs),
}

impl Invocation for BenchCommand {
    fn workers(&self) -> usize {
        match self {
            BenchCommand::Kubelet(_) | BenchCommand::Cluster(_) => 2,
            _ => 0,
        }
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// The live progress line of a load run (a terminal and a table only):
/// `unit` names what is counted, e.g. `calls`.
fn progress(ctx: &Ctx, duration: Option<Duration>, requests: u64, unit: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if ctx.format != Format::Table || !std::io::stderr().is_terminal() {
        return None;
    }
    let (pb, template) = match duration {
        Some(_) => (indicatif::ProgressBar::new_spinner(), format!("{{spinner}} {{elapsed}} {{pos}} {unit}, {{rate}}")),
        None => {
            (indicatif::ProgressBar::new(requests), format!("{{bar:40}} {{pos}}/{{len}} {unit}, {{rate}}, eta {{eta}}"))
        }
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        // whole calls per second: 27342/s, not 27,342.4481/s
        pb.set_style(style.with_key("rate", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", rate_text(s.per_sec()));
        }));
    }
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(10));
    pb.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(pb)
}

/// A rate as the progress bar shows it: whole calls per second.
pub fn rate_text(per_sec: f64) -> String {
    format!("{:.0}/s", per_sec.max(0.0))
}

fn show_load(ctx: &Ctx, r: &LoadReport) -> Result<()> {
    if r.interrupted {
        eprintln!(
            "dpctl: interrupted after {:.1}s: the figures cover the {} call(s) made so far",
            r.seconds, r.requests
        );
    }
    match ctx.format {
        Format::Table => emit(&load_table(&[r])),
        f => emit(&structured(f, r)?),
    }
}

/// The table of load reports: a row per call.
fn load_table(reports: &[&LoadReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let ms = |f: fn(&crate::bench::Percentiles) -> f64| {
                r.latency_ms.as_ref().map(|l| format!("{:.3}", f(l))).unwrap_or_else(|| "-".into())
            };
            let errs = if r.errors == 0 {
                "0".to_string()
            } else {
                r.errors_by_code.iter().map(|(c, n)| format!("{c}:{n}")).collect::<Vec<_>>().join(",")
            };
            vec![
                r.call.clone(),
                r.concurrency.to_string(),
                r.requests.to_string(),
                errs,
                format!("{}", r.throughput),
                ms(|l| l.p50),
                ms(|l| l.p90),
                ms(|l| l.p99),
                ms(|l| l.max),
            ]
        })
        .collect();
    table(&["CALL", "CONCURRENCY", "REQUESTS", "ERRORS", "CALLS/S", "P50 MS", "P90 MS", "P99 MS", "MAX MS"], &rows)
}

/// Run the command.
pub async fn run(ctx: &Ctx, c: &BenchCommand) -> Result<()> {
    match c {
        BenchCommand::Allocate(a) => load::load_cmd(ctx, a, "Allocate").await,
        BenchCommand::Preferred(a) => load::load_cmd(ctx, a, "GetPreferredAllocation").await,
        BenchCommand::ListAndWatch(a) => load::load_cmd(ctx, a, "ListAndWatch").await,
        BenchCommand::Dra(a) => dra::run(ctx, a).await,
        BenchCommand::Watch(a) => watch::watch_cmd(ctx, a).await,
        BenchCommand::Kubelet(a) => kubelet::kubelet_cmd(ctx, a).await,
        BenchCommand::Cluster(a) => cluster::run(ctx.format, a).await,
    }
}
