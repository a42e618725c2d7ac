//! `dpctl dra health SOCKET`: a DRA plugin's device health
//! (NodeWatchResources) as a table, then a line per change.

use super::{target, Ctx, DraSocket};
use crate::api::dra_health_v1::DeviceHealth;
use crate::client::dra::HealthStream;
use crate::core::{Error, Result};
use crate::protocol::dra::{self as rules, health_word, HEALTH_V1, HEALTH_V1ALPHA1};
use crate::render::{emit, json_line, structured, table, Format};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;

pub(super) const EXAMPLES: &str = "Examples:
  # the health table, then a line per change
  dpctl dra health gpu.example.com-reg.sock
  # one JSON object per snapshot, on the v1alpha1 service, stop after 3
  dpctl dra health gpu.example.com-reg.sock --service v1alpha1 -o json --count 3";

/// `dpctl dra health`
#[derive(Debug, Args)]
pub struct DraHealthArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// The health service: v1 or v1alpha1 [default: the kubelet's choice from GetInfo, else v1 then v1alpha1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1alpha1"])]
    pub service: Option<String>,
    /// Stop after this many snapshots
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// One device's health as `dra health` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthRow {
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
    /// Healthy, Unhealthy or Unknown.
    pub health: String,
    /// Unix seconds.
    pub last_updated_time: i64,
    /// Seconds (0: the kubelet's default).
    pub health_check_timeout_seconds: i64,
    /// Message.
    pub message: String,
}

/// A health snapshot as rows.
pub fn health_rows(devices: &[DeviceHealth]) -> Vec<HealthRow> {
    devices
        .iter()
        .map(|d| {
            let (pool, device) =
                d.device.as_ref().map(|x| (x.pool_name.clone(), x.device_name.clone())).unwrap_or_default();
            HealthRow {
                pool,
                device,
                health: health_word(d.health).into(),
                last_updated_time: d.last_updated_time,
                health_check_timeout_seconds: d.health_check_timeout_seconds,
                message: d.message.clone(),
            }
        })
        .collect()
}

/// What changed between two snapshots: one line per device added, removed or changed.
pub fn health_diff(prev: &[HealthRow], now: &[HealthRow]) -> Vec<String> {
    let key = |r: &HealthRow| format!("{}/{}", r.pool, r.device);
    let old: BTreeMap<String, &HealthRow> = prev.iter().map(|r| (key(r), r)).collect();
    let new: BTreeMap<String, &HealthRow> = now.iter().map(|r| (key(r), r)).collect();
    let mut out = Vec::new();
    for (k, n) in &new {
        match old.get(k) {
            None => out.push(format!("+ {k} {}", n.health)),
            Some(o) if o.health != n.health || o.message != n.message => {
                let msg = if n.message.is_empty() { String::new() } else { format!(" ({})", n.message) };
                out.push(format!("~ {k} {} -> {}{msg}", o.health, n.health))
            }
            _ => {}
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(format!("- {k} (left out: the kubelet marks it Unknown after its timeout)"));
    }
    out
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraHealthArgs) -> Result<()> {
    let t = target(ctx, &a.socket.socket).await?;
    let candidates: Vec<&str> = match (a.service.as_deref(), rules::chosen_health(t.advertised())) {
        (Some("v1alpha1"), _) => vec![HEALTH_V1ALPHA1],
        (Some(_), _) => vec![HEALTH_V1],
        (None, Some(h)) => vec![h],
        (None, None) if t.info.is_some() => {
            return Err(Error::failed(format!(
                "{}: the plugin advertises no health service ({}); pass --service to try one anyway",
                t.socket.display(),
                t.advertised().join(", ")
            )))
        }
        (None, None) => vec![HEALTH_V1, HEALTH_V1ALPHA1],
    };
    let mut stream: Option<HealthStream> = None;
    let mut last_err = None;
    for svc in &candidates {
        match t.service.health(svc).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some(mut stream) = stream else {
        return Err(last_err.unwrap_or_else(|| Error::failed("no health service")));
    };
    let mut prev: Option<Vec<HealthRow>> = None;
    let mut n = 0u64;
    loop {
        let snap = tokio::select! {
            s = stream.next(t.service.socket()) => s?,
            _ = crate::core::interrupted() => return Ok(()),
        };
        let Some(snap) = snap else {
            return Err(Error::failed(format!(
                "{}: the plugin ended the health stream (the kubelet reopens it after 5s)",
                t.service.socket().display()
            )));
        };
        let rows = health_rows(&snap);
        n += 1;
        match (ctx.format, &prev) {
            (Format::Table, None) => {
                let r: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.pool.clone(),
                            r.device.clone(),
                            crate::render::health(&r.health),
                            crate::render::epoch_age(r.last_updated_time, std::time::SystemTime::now()),
                            if r.health_check_timeout_seconds > 0 {
                                format!("{}s", r.health_check_timeout_seconds)
                            } else {
                                "-".into()
                            },
                            r.message.clone(),
                        ]
                    })
                    .collect();
                emit(&table(&["POOL", "DEVICE", "HEALTH", "UPDATED", "TIMEOUT", "MESSAGE"], &r))?;
            }
            (Format::Table, Some(p)) => {
                for line in health_diff(p, &rows) {
                    emit(&line)?;
                }
            }
            (Format::Json, _) => emit(&json_line(&serde_json::json!({"devices": rows}))?)?,
            (f, _) => emit(&structured(f, &serde_json::json!({"devices": rows}))?)?,
        }
        prev = Some(rows);
        if a.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dev: &str, h: &str, msg: &str) -> HealthRow {
        HealthRow {
            pool: "p".into(),
            device: dev.into(),
            health: h.into(),
            last_updated_time: 1,
            health_check_timeout_seconds: 0,
            message: msg.into(),
        }
    }

    #[test]
    fn health_diffs_name_each_change() {
        let a = vec![row("d0", "Healthy", ""), row("d1", "Healthy", "")];
        let b = vec![row("d0", "Unhealthy", "ECC errors"), row("d2", "Healthy", "")];
        assert_eq!(
            health_diff(&a, &b),
            [
                "~ p/d0 Healthy -> Unhealthy (ECC errors)",
                "+ p/d2 Healthy",
                "- p/d1 (left out: the kubelet marks it Unknown after its timeout)"
            ]
        );
        assert!(health_diff(&a, &a).is_empty());
    }
}
