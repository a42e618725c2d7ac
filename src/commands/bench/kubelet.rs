//! `dpctl bench kubelet`: a mock kubelet with P simulated plugins —
//! registration, admission, restart, peak RSS; with `--dra`, N DRA drivers
//! and M pods with claims ([`dra`]).

mod dra;

use super::Ctx;
use crate::bench::peak_rss_mib;
use crate::core::log::Logger;
use crate::core::task::Tasks;
use crate::core::time::millis;
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::TempNode;
use crate::plugin::config::ResourceConfig;
use crate::render::{emit, structured, table, Format};
use clap::Args;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `dpctl bench kubelet`
#[derive(Debug, Args)]
pub struct BenchKubeletArgs {
    /// Simulated plugins (one resource each)
    #[arg(long, default_value_t = 100, value_name = "P", value_parser = clap::value_parser!(u64).range(1..=2000))]
    pub plugins: u64,
    /// Devices per plugin
    #[arg(long, default_value_t = 100, value_name = "D", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub devices: u64,
    /// Pods to admit (one device each)
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub pods: u64,
    /// DRA instead: --plugins `dpctl dra serve` drivers with --devices each, --pods pods with one claim each
    #[arg(long)]
    pub dra: bool,
    /// The mock kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KubeletReport {
    plugins: u64,
    devices_per_plugin: u64,
    pods: u64,
    all_registered_and_allocatable_ms: Option<f64>,
    admission_ms: Option<f64>,
    admissions_per_second: Option<f64>,
    admitted: u64,
    rejected: u64,
    restart_all_back_ms: Option<f64>,
    peak_rss_mib: Option<f64>,
    /// Ctrl-C (or SIGTERM) ended the run: later stages were not measured.
    interrupted: bool,
}

/// Wait (at most 120 s) until `done` has seen enough kubelet events.
async fn wait_for(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Arc<Stamped>>,
    what: &str,
    mut done: impl FnMut(&KubeletEvent) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => return Err(Error::failed(format!("bench: timed out waiting for {what}"))),
            Ok(None) => return Err(Error::failed("the kubelet engine stopped")),
            Ok(Some(e)) if done(&e.event) => return Ok(()),
            Ok(Some(_)) => {}
        }
    }
}

pub(super) async fn kubelet_cmd(ctx: &Ctx, a: &BenchKubeletArgs) -> Result<()> {
    if a.dra {
        return dra::run(ctx.format, a).await;
    }
    // Listen for Ctrl-C before anything starts, so no stage runs unowned.
    let interrupt = crate::core::interrupted();
    let node_dir = TempNode::new("kubelet")?;
    let tree = node_dir.tree.clone();
    // The engine `dpctl mock-kubelet` runs, in this process: its typed events time each stage.
    let bus = EventBus::new(Logger::silent());
    let mut events = bus.subscribe();
    let mut spec = NodeSpec::on_tree(&tree);
    (spec.pod_resources_socket, spec.plugins_registry_dir) = (None, None);
    spec.manager.grace_period = Duration::from_secs(3600);
    spec.manager.profile = crate::kubelet::profile::Profile::of(a.kubelet_version);
    let node = Node::start(spec, bus).await?;

    // P plugins, in this process.
    let resources: Vec<ResourceConfig> = (0..a.plugins)
        .map(|i| ResourceConfig {
            resource: format!("bench.example/r{i}"),
            count: Some(a.devices as usize),
            socket_name: Some(format!("r{i}.sock")),
            ..Default::default()
        })
        .collect();
    let settings = crate::plugin::registrar::Settings {
        plugin_dir: tree.plugin_dir.clone(),
        socket_name: None,
        kubelet_socket: tree.kubelet_socket(),
        mode: crate::plugin::config::RegistrationMode::Kubelet,
        registry_dir: tree.registry_dir.clone(),
        register: true,
        retry: true,
        reregister_on_disconnect: false,
        timeout: ctx.timeout,
        host_root: Default::default(), // a private temp tree
    };
    let t0 = Instant::now();
    let plugins = Tasks::new();
    let group = plugins.child();
    plugins.spawn_joined(async move {
        let _ = crate::plugin::run::run(&resources, settings, None, Logger::silent(), group).await;
    });
    let mut report = KubeletReport {
        plugins: a.plugins,
        devices_per_plugin: a.devices,
        pods: a.pods,
        all_registered_and_allocatable_ms: None,
        admission_ms: None,
        admissions_per_second: None,
        admitted: 0,
        rejected: 0,
        restart_all_back_ms: None,
        peak_rss_mib: None,
        interrupted: false,
    };
    // The stages in order; Ctrl-C ends them and the figures so far are shown.
    let outcome = {
        let r = &mut report;
        let stages = async {
            let want = a.plugins as usize;
            let d = a.devices as usize;
            let mut ready = std::collections::BTreeSet::new();
            wait_for(&mut events, "all plugins registered and allocatable", |e| {
                if let KubeletEvent::Devices { resource, allocatable, .. } = e {
                    if *allocatable == d {
                        ready.insert(resource.clone());
                    }
                }
                ready.len() == want
            })
            .await?;
            r.all_registered_and_allocatable_ms = Some(millis(t0.elapsed()));

            // N pods, one device each.
            for i in 0..a.pods {
                let text = format!(
                    "{{\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"bench\"}},\"spec\":{{\"containers\":[{{\"name\":\"c\",\"resources\":{{\"limits\":{{\"bench.example/r{}\":1}}}}}}]}}}}",
                    i % a.plugins
                );
                let f = tree.manifests.join(format!("pod-{i}.json"));
                crate::core::files::write_atomic(&f, text.as_bytes()).map_err(|e| Error::io(&f, "cannot write", &e))?;
            }
            let t1 = Instant::now();
            let (mut admitted, mut rejected) = (0u64, 0u64);
            let pods = a.pods;
            if pods > 0 {
                wait_for(&mut events, "pod admissions", |e| {
                    match e {
                        KubeletEvent::PodAdmitted { .. } => admitted += 1,
                        KubeletEvent::PodRejected { .. } => rejected += 1,
                        _ => {}
                    }
                    admitted + rejected >= pods
                })
                .await?;
            }
            let admission = t1.elapsed();
            (r.admitted, r.rejected) = (admitted, rejected);
            r.admission_ms = Some(millis(admission));
            r.admissions_per_second = Some(if admission.as_secs_f64() > 0.0 {
                (admitted as f64 / admission.as_secs_f64()).round()
            } else {
                0.0
            });

            // A kubelet restart: every plugin must come back.
            let t2 = Instant::now();
            node.restart("bench").await?;
            wait_for(&mut events, "all plugins back after a restart", |e| {
                matches!(e, KubeletEvent::AllPluginsBack { .. })
            })
            .await?;
            r.restart_all_back_ms = Some(millis(t2.elapsed()));
            Ok::<(), Error>(())
        };
        tokio::select! {
            o = stages => Some(o),
            _ = interrupt => None,
        }
    };
    report.peak_rss_mib = peak_rss_mib(std::process::id());

    plugins.stop().await;
    node.stop().await;
    match outcome {
        Some(Err(e)) => return Err(e),
        Some(Ok(())) => {}
        None => {
            report.interrupted = true;
            eprintln!("dpctl: interrupted: the figures cover the stages finished so far ('-' was not measured)");
        }
    }

    show_kubelet_report(ctx.format, a, &report)
}

/// `bench kubelet`'s figures: a table, or `-o json|yaml`.
fn show_kubelet_report(format: Format, a: &BenchKubeletArgs, report: &KubeletReport) -> Result<()> {
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "-".into());
    match format {
        Format::Table => emit(&table(
            &["MEASUREMENT", "VALUE"],
            &[
                vec![
                    format!("{} plugins × {} devices registered and allocatable", a.plugins, a.devices),
                    ms(report.all_registered_and_allocatable_ms),
                ],
                vec![
                    format!("{} pods admitted ({} rejected)", report.admitted, report.rejected),
                    match (report.admission_ms, report.admissions_per_second) {
                        (Some(t), Some(r)) => format!("{t:.1} ms ({r}/s)"),
                        _ => "-".into(),
                    },
                ],
                vec!["all plugins back after a kubelet restart".into(), ms(report.restart_all_back_ms)],
                vec![
                    "peak RSS (kubelet engine and plugins, one process)".into(),
                    report.peak_rss_mib.map(|r| format!("{r} MiB")).unwrap_or_else(|| "unknown".into()),
                ],
            ],
        )),
        f => emit(&structured(f, report)?),
    }
}
