//! `dpctl bench watch`: health change → ListAndWatch client latency, and the
//! first-snapshot time of large plugins.

use super::Ctx;
use crate::api::deviceplugin::device_plugin_server::DevicePluginServer;
use crate::api::HEALTHY;
use crate::bench::percentiles;
use crate::client::conn::{PluginConn, Update};
use crate::core::log::Logger;
use crate::core::task::Tasks;
use crate::core::transport::{listen, serve_owned, SocketGuard, TempDir};
use crate::core::{Error, Result};
use crate::plugin::config::ResourceConfig;
use crate::plugin::server::PluginService;
use crate::plugin::simulated::Simulated;
use crate::render::{emit, structured, table, Format};
use clap::Args;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `dpctl bench watch`
#[derive(Debug, Args)]
pub struct BenchWatchArgs {
    /// A running `dpctl serve` socket to measure (changes go through its live control); default: an in-process one
    #[arg(long, value_name = "SOCKET")]
    pub socket: Option<PathBuf>,
    /// Health changes to time
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub changes: u64,
    /// Plugin sizes whose first snapshot to time (each 1..=100000)
    #[arg(long, value_delimiter = ',', default_value = "10000,100000", value_name = "N,N", value_parser = device_count_arg)]
    pub sizes: Vec<usize>,
}

fn device_count_arg(s: &str) -> Result<usize, String> {
    let max = crate::core::limits::MAX_DEVICES;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a number of devices from 1 to {max}")),
    }
}

/// A simulated plugin served in this process on a temp socket.
struct Local {
    sim: Arc<Simulated>,
    socket: PathBuf,
    /// Its server and streams.
    tasks: Tasks,
    _guard: SocketGuard,
    _dir: TempDir,
}

async fn local_plugin(devices: usize, tag: &str) -> Result<Local> {
    let dir = TempDir::new(tag)?;
    let cfg = ResourceConfig {
        resource: "bench.example/dev".into(),
        count: Some(devices),
        id_pattern: Some("dev-{i}".into()),
        ..Default::default()
    };
    let sim = Arc::new(Simulated::new(&cfg)?);
    let socket = dir.path().join("bench.sock");
    let (listener, guard) = listen(&socket).await?;
    let tasks = Tasks::new();
    let svc = DevicePluginServer::new(PluginService::new(sim.clone(), Logger::silent(), tasks.clone()))
        .max_encoding_message_size(usize::MAX);
    serve_owned(&tasks, listener, svc);
    Ok(Local { sim, socket, tasks, _guard: guard, _dir: dir })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WatchReport {
    health_change_to_client_ms: crate::bench::Percentiles,
    changes: u64,
    via: String,
    interrupted: bool,
    first_snapshot_ms: Vec<Value>,
}

pub(super) async fn watch_cmd(ctx: &Ctx, a: &BenchWatchArgs) -> Result<()> {
    // Health change → client.
    let (local, socket) = match &a.socket {
        Some(s) => (None, ctx.paths.resolve_socket(s)),
        None => {
            let l = local_plugin(8, "watch").await?;
            let s = l.socket.clone();
            (Some(l), s)
        }
    };
    let conn = PluginConn::connect(&socket, ctx.timeout, crate::commands::INSPECT_MAX_RECV).await?;
    let mut stream = conn.list_and_watch().await?;
    let first = match stream.next().await? {
        Update::Snapshot(r) => r,
        Update::Closed => return Err(Error::failed("the plugin closed ListAndWatch")),
    };
    let id = first.devices.first().map(|d| d.id.clone()).ok_or_else(|| Error::failed("the plugin has no devices"))?;
    let control = match &local {
        Some(_) => None,
        None => Some(find_control(ctx, &socket).await?),
    };
    let mut lat = Vec::new();
    // Ctrl-C: stop changing, report the changes timed so far.
    let interrupt = crate::core::interrupted();
    tokio::pin!(interrupt);
    let mut interrupted = false;
    for i in 0..a.changes {
        let health = if i % 2 == 0 { crate::api::UNHEALTHY } else { HEALTHY };
        let one = async {
            let t = Instant::now();
            if let Some(path) = &control {
                let req = crate::plugin::control::Request::SetHealth {
                    resource: None,
                    ids: vec![id.clone()],
                    health: health.into(),
                };
                let ans = crate::plugin::control::send(path, &req, ctx.timeout).await?;
                if !ans.ok {
                    return Err(Error::failed(ans.error.unwrap_or_default()));
                }
            } else if let Some(l) = &local {
                l.sim.inventory.set_health(std::slice::from_ref(&id), health).map_err(Error::failed_from)?;
            }
            loop {
                match tokio::time::timeout(ctx.timeout, stream.next()).await {
                    Err(_) => {
                        return Err(Error::failed("a health change did not reach the ListAndWatch client in time"))
                    }
                    Ok(u) => match u? {
                        Update::Snapshot(r) if r.devices.iter().any(|d| d.id == id && d.health == health) => break,
                        Update::Snapshot(_) => continue,
                        Update::Closed => return Err(Error::failed("the plugin closed ListAndWatch")),
                    },
                }
            }
            Ok::<Duration, Error>(t.elapsed())
        };
        tokio::select! {
            r = one => lat.push(r?),
            _ = &mut interrupt => {
                interrupted = true;
                break;
            }
        }
    }
    if interrupted && lat.is_empty() {
        return Err(Error::failed("interrupted before the first health change was timed"));
    }
    if interrupted {
        eprintln!("dpctl: interrupted after {} health change(s): first-snapshot sizes skipped", lat.len());
    }
    if let Some(l) = &local {
        l.tasks.stop().await;
    }
    // First snapshot of large plugins.
    let mut sizes = Vec::new();
    for &n in a.sizes.iter().filter(|_| !interrupted) {
        let l = local_plugin(n, "size").await?;
        let mut runs = Vec::new();
        let mut bytes = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let c = PluginConn::connect(&l.socket, ctx.timeout, usize::MAX).await?;
            let mut s = c.list_and_watch().await?;
            if let Update::Snapshot(r) = s.next().await? {
                bytes = prost::Message::encoded_len(&r);
            }
            runs.push(t.elapsed());
        }
        let p = percentiles(runs);
        sizes.push(json!({"devices": n, "bytes": bytes, "p50": p.p50, "max": p.max}));
        l.tasks.stop().await;
    }
    let lat_count = lat.len() as u64;
    let report = WatchReport {
        health_change_to_client_ms: percentiles(lat),
        changes: lat_count,
        interrupted,
        via: if local.is_some() {
            "in-process dpctl serve backend".into()
        } else {
            format!("live control of {}", socket.display())
        },
        first_snapshot_ms: sizes,
    };
    match ctx.format {
        Format::Table => {
            let p = &report.health_change_to_client_ms;
            let mut rows = vec![vec![
                format!("health change → client ({} changes, {})", report.changes, report.via),
                format!("{:.3}", p.p50),
                format!("{:.3}", p.p99),
                format!("{:.3}", p.max),
            ]];
            for s in &report.first_snapshot_ms {
                rows.push(vec![
                    format!("first snapshot, {} devices ({} bytes), connect included", s["devices"], s["bytes"]),
                    format!("{:.3}", s["p50"].as_f64().unwrap_or(0.0)),
                    "-".into(),
                    format!("{:.3}", s["max"].as_f64().unwrap_or(0.0)),
                ]);
            }
            emit(&table(&["MEASUREMENT", "P50 MS", "P99 MS", "MAX MS"], &rows))
        }
        f => emit(&structured(f, &report)?),
    }
}

/// The control socket of the `dpctl serve` that serves `socket`.
async fn find_control(ctx: &Ctx, socket: &Path) -> Result<PathBuf> {
    let dir = socket.parent().unwrap_or(Path::new(".")).join(crate::plugin::control::CONTROL_DIR);
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        Error::failed(format!("{}: no live control here ({e}); --socket must be a dpctl serve's socket", dir.display()))
    })?;
    for e in rd.flatten() {
        let p = e.path();
        let req = crate::plugin::control::Request::List { resource: None };
        if let Ok(a) = crate::plugin::control::send(&p, &req, ctx.timeout).await {
            if a.resources.iter().any(|r| Path::new(&r.socket) == socket) {
                return Ok(p);
            }
        }
    }
    Err(Error::failed(format!("no dpctl serve control socket in {} serves {}", dir.display(), socket.display())))
}
