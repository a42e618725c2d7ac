//! `dpctl watch SOCKET`: follow ListAndWatch — the full device table first,
//! then a timestamped diff per update.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{Device, ListAndWatchResponse};
use crate::api::HEALTHY;
use crate::cli::positive_duration_arg;
use crate::client::conn::Update;
use crate::core::time::now_rfc3339;
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::render::{self, emit, json_line, table, Format};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl watch`: its surface.
pub const COMMAND: Spec = Spec {
    name: "watch",
    about: "Stream a device plugin's ListAndWatch: the device table, then a diff per update",
    group: super::surface::Group::Plugin,
    args: surface::args::<WatchArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<WatchArgs>,
};

const EXAMPLES: &str = "Examples:
  # The device table, then a diff per ListAndWatch update
  dpctl watch nvidia-gpu.sock
  # one JSON object per update, stop after 3 messages
  dpctl watch vendor.sock -o json --count 3
  # follow for 10 minutes and keep a trace for dpctl replay
  dpctl watch vendor.sock --duration 10m --record vendor.trace.jsonl";

/// `dpctl watch`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Stop after N ListAndWatch messages (the initial snapshot counts as the first)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m)
    #[arg(long, value_parser = positive_duration_arg, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Also record the options and every snapshot to this trace file (must not exist)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

impl Invocation for WatchArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// One ListAndWatch message as `-o json` prints it.
#[derive(Serialize)]
struct WatchEvent<'a> {
    time: String,
    update: u64,
    healthy: usize,
    total: usize,
    devices: &'a [Device],
}

/// What changed between two snapshots.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// New devices: (id, health, numa).
    pub added: Vec<(String, String, String)>,
    /// Devices gone.
    pub removed: Vec<String>,
    /// Health changes: (id, old, new).
    pub health: Vec<(String, String, String)>,
    /// Topology changes: (id, old, new).
    pub topology: Vec<(String, String, String)>,
}

type Index = BTreeMap<String, (String, String)>;

fn index(devices: &[Device]) -> Index {
    devices.iter().map(|d| (d.id.clone(), (d.health.clone(), render::numa(d.topology.as_ref())))).collect()
}

/// Compare two snapshots.
pub fn diff(old: &Index, new: &Index) -> Diff {
    let mut d = Diff::default();
    for (id, (h, n)) in new {
        match old.get(id) {
            None => d.added.push((id.clone(), h.clone(), n.clone())),
            Some((oh, on)) => {
                if oh != h {
                    d.health.push((id.clone(), oh.clone(), h.clone()));
                }
                if on != n {
                    d.topology.push((id.clone(), on.clone(), n.clone()));
                }
            }
        }
    }
    d.removed = old.keys().filter(|id| !new.contains_key(*id)).cloned().collect();
    d
}

fn healthy(devices: &[Device]) -> usize {
    devices.iter().filter(|d| d.health == HEALTHY).count()
}

fn problems_text(devices: &[Device]) -> String {
    crate::protocol::deviceplugin::devices(devices).iter().map(|p| format!("warning: {p}\n")).collect()
}

fn render_first(resp: &ListAndWatchResponse) -> String {
    let rows: Vec<Vec<String>> = resp
        .devices
        .iter()
        .map(|d| vec![d.id.clone(), render::health(&d.health), render::numa(d.topology.as_ref())])
        .collect();
    let mut s = if rows.is_empty() { "(no devices)".to_string() } else { table(&["ID", "HEALTH", "NUMA"], &rows) };
    s.push_str(&format!("\n{} device(s), {} healthy\n", resp.devices.len(), healthy(&resp.devices)));
    s.push_str(&problems_text(&resp.devices));
    s
}

fn render_update(n: u64, resp: &ListAndWatchResponse, d: &Diff) -> String {
    let mut s = format!("{}  update {n}: {}/{} healthy\n", now_rfc3339(), healthy(&resp.devices), resp.devices.len());
    let show = |id: &str| crate::core::text::cap(id).into_owned();
    for (id, old, new) in &d.health {
        s.push_str(&format!("  ~ {}  {} -> {}\n", show(id), render::health(old), render::health(new)));
    }
    for (id, h, numa) in &d.added {
        s.push_str(&format!("  + {}  {}  numa {numa}\n", show(id), render::health(h)));
    }
    for id in &d.removed {
        s.push_str(&format!("  - {}\n", show(id)));
    }
    for (id, old, new) in &d.topology {
        s.push_str(&format!("  ~ {}  numa {old} -> {new}\n", show(id)));
    }
    if d == &Diff::default() {
        s.push_str("  (no change)\n");
    }
    s.push_str(&problems_text(&resp.devices));
    s
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &WatchArgs) -> Result<()> {
    let conn = ctx.plugin(&a.socket).await?;
    // --record: the options and every snapshot go to a trace, without disturbing the plugin.
    let recorder = match &a.record {
        None => None,
        Some(path) => {
            let w = crate::trace::Writer::create(path, "", "watch", conn.socket())?;
            let t = w.t();
            let start = std::time::Instant::now();
            let r = conn
                .client()
                .get_device_plugin_options(crate::api::deviceplugin::Empty {})
                .await
                .map_err(crate::core::status::grpc_go_status);
            let latency_ms = crate::core::time::millis(start.elapsed());
            let (response, error) = match r {
                Ok(o) => (Some(o.into_inner()), None),
                Err(s) => (None, Some(crate::trace::RpcError::from_status(&s))),
            };
            w.write(&crate::trace::Event::Options { t, latency_ms, response, error })?;
            Some(w)
        }
    };
    let mut stream = conn.list_and_watch().await?;
    let socket = conn.socket().display().to_string();
    let stop_at = a.duration.map(|d| tokio::time::Instant::now() + d);
    let mut prev: Option<Index> = None;
    let mut n = 0u64;
    loop {
        // Before the first snapshot, wait at most --timeout; after it, until --duration.
        let wait = async {
            let now = tokio::time::Instant::now();
            match (n, stop_at) {
                (0, Some(s)) if s < now + ctx.timeout => {
                    tokio::time::sleep_until(s).await;
                    Ok(())
                }
                (0, _) => {
                    tokio::time::sleep(ctx.timeout).await;
                    Err(Error::failed(format!(
                        "{socket}: no ListAndWatch snapshot within {}; a plugin should send its device list as soon as the stream opens",
                        crate::core::time::format_duration(ctx.timeout)
                    )))
                }
                (_, Some(s)) => {
                    tokio::time::sleep_until(s).await;
                    Ok(())
                }
                _ => std::future::pending().await,
            }
        };
        let update = tokio::select! {
            u = stream.next() => u,
            _ = crate::core::interrupted() => return Ok(()),
            r = wait => return r,
        };
        if let (Some(w), Err(e)) = (&recorder, &update) {
            let error = Some(crate::trace::RpcError {
                code: format!("{:?}", e.code().unwrap_or(tonic::Code::Unknown)),
                message: e.to_string(),
            });
            w.write(&crate::trace::Event::ListAndWatchEnd {
                t: w.t(),
                stream: 1,
                error,
                by: Some(crate::trace::EndedBy::Plugin),
            })?;
        }
        let resp = match update? {
            Update::Snapshot(r) => r,
            Update::Closed => {
                if let Some(w) = &recorder {
                    w.write(&crate::trace::Event::ListAndWatchEnd {
                        t: w.t(),
                        stream: 1,
                        error: None,
                        by: Some(crate::trace::EndedBy::Plugin),
                    })?;
                }
                return Err(Error::failed(format!(
                    "{socket}: the plugin closed the ListAndWatch stream after {n} update(s); the kubelet would mark all its devices unhealthy and not redial"
                )));
            }
        };
        n += 1;
        if let Some(w) = &recorder {
            w.write(&crate::trace::Event::ListAndWatch { t: w.t(), stream: 1, seq: n, response: resp.clone() })?;
        }
        let idx = index(&resp.devices);
        let text = match ctx.format {
            Format::Table => match &prev {
                None => render_first(&resp),
                Some(old) => render_update(n, &resp, &diff(old, &idx)),
            },
            Format::Json => json_line(&WatchEvent {
                time: now_rfc3339(),
                update: n,
                healthy: healthy(&resp.devices),
                total: resp.devices.len(),
                devices: &resp.devices,
            })?,
            Format::Yaml => format!(
                "---\n{}",
                render::structured(
                    Format::Yaml,
                    &WatchEvent {
                        time: now_rfc3339(),
                        update: n,
                        healthy: healthy(&resp.devices),
                        total: resp.devices.len(),
                        devices: &resp.devices,
                    }
                )?
            ),
        };
        emit(&text)?;
        prev = Some(idx);
        if a.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(id: &str, h: &str) -> Device {
        Device { id: id.into(), health: h.into(), topology: None }
    }

    #[test]
    fn diff_finds_every_kind_of_change() {
        let a = index(&[dev("a", "Healthy"), dev("b", "Healthy"), dev("c", "Healthy")]);
        let b = index(&[dev("a", "Healthy"), dev("b", "Unhealthy"), dev("d", "Healthy")]);
        let d = diff(&a, &b);
        assert_eq!(d.added, vec![("d".into(), "Healthy".into(), "-".into())]);
        assert_eq!(d.removed, vec!["c".to_string()]);
        assert_eq!(d.health, vec![("b".into(), "Healthy".into(), "Unhealthy".into())]);
        assert_eq!(diff(&a, &a), Diff::default());
    }
}
