//! `dpctl replay TRACE`: as the recorded plugin (registering like `serve`),
//! or with `--against SOCKET` as the recorded kubelet, diffing a live
//! plugin's answers against the recording.

use super::Ctx;
use crate::cli::ReplayArgs;
use crate::core::log::Logger;
use crate::core::{Error, Result};
use crate::kubelet::PluginConn;
use crate::plugin::config::FileConfig;
use crate::plugin::replay::Replayed;
use crate::render::{emit, structured, table, Format};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::watch;

/// Run the command.
pub async fn run(ctx: &Ctx, a: &ReplayArgs) -> Result<()> {
    // Read and check the whole trace before serving anything.
    let trace = crate::trace::read(&a.trace)?;
    if let Some(sock) = &a.against {
        let conn = ctx.plugin(sock).await?;
        return against(ctx, &conn, &trace).await;
    }
    let backend = Arc::new(Replayed::new(&trace, a.resource.as_deref(), a.speed, a.no_wait)?);
    crate::core::validate::check_resource_name(backend.resource_name())?;
    let settings = super::serve::settings(ctx, &a.reg, &FileConfig::default())?;
    let log = Logger::new(a.log_format);
    log.event(
        "replaying",
        &[
            ("trace", json!(a.trace.display().to_string())),
            ("resource", json!(backend.resource_name())),
            ("listAndWatchSteps", json!(backend.steps())),
        ],
    );
    let (shut_tx, shut_rx) = watch::channel(false);
    tokio::spawn(async move {
        crate::core::interrupted().await;
        let _ = shut_tx.send(true);
    });
    let r = crate::plugin::registrar::run(backend, settings, log.clone(), shut_rx, |_| {}).await;
    log.event("stopped", &[]);
    r
}

async fn against(ctx: &Ctx, conn: &PluginConn, trace: &crate::trace::Trace) -> Result<()> {
    let (results, skipped) = crate::kubelet::against::run(conn, trace, ctx.timeout).await;
    let differing = results.iter().filter(|r| !r.diffs.is_empty()).count();
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = results
                .iter()
                .map(|r| {
                    let v = if r.diffs.is_empty() {
                        crate::render::verdict("PASS")
                    } else {
                        crate::render::verdict("FAIL")
                    };
                    let text = match &r.devices {
                        Some(d) => d.parts().into_iter().map(|(k, s)| paint(k, &s)).collect::<Vec<_>>().join("; "),
                        None if r.diffs.is_empty() => "same as recorded".into(),
                        None => r.diffs.join("; "),
                    };
                    vec![v, r.call.clone(), text]
                })
                .collect();
            let mut out = table(&["RESULT", "CALL", "DIFFERENCE"], &rows);
            out.push_str(&format!(
                "\n{} call(s) replayed, {differing} differ; {skipped} ListAndWatch message(s) and stream end(s) not lined up (the plugin sent nothing matching: they depend on events outside the calls)\n",
                results.len()
            ));
            emit(&out)?;
        }
        f => emit(&structured(f, &json!({"results": results, "differing": differing, "skipped": skipped}))?)?,
    }
    if differing > 0 {
        return Err(Error::failed(format!(
            "{}: {differing} of {} replayed call(s) differ from the recording",
            conn.socket().display(),
            results.len()
        )));
    }
    Ok(())
}

/// Colour one device difference: removed red, added green, changed yellow
/// (plain when colour is off: `colored` honours NO_COLOR and --no-color).
fn paint(kind: char, s: &str) -> String {
    use colored::Colorize;
    match kind {
        '-' => s.red().to_string(),
        '+' => s.green().to_string(),
        _ => s.yellow().to_string(),
    }
}
