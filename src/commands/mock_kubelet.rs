//! `dpctl mock-kubelet`: the kubelet's device manager on a laptop. SIGHUP
//! simulates a kubelet restart in place; SIGINT/SIGTERM stop it.

use super::Ctx;
use crate::cli::MockKubeletArgs;
use crate::core::log::Logger;
use crate::core::paths::CHECKPOINT_NAME;
use crate::core::{Error, Result};
use crate::kubelet::mock::{self, Settings};
use crate::kubelet::shell::Config;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Build the settings from the command line.
pub fn settings(ctx: &Ctx, a: &MockKubeletArgs) -> Result<Settings> {
    let plugin_dir = ctx.paths.plugin_dir.clone();
    if !plugin_dir.is_dir() {
        return Err(Error::failed(format!(
            "{}: plugin directory does not exist; create it or pass --plugin-dir",
            plugin_dir.display()
        )));
    }
    let pod_resources_socket =
        if a.no_pod_resources { None } else { Some(ctx.pod_resources(a.pod_resources_socket.as_ref())) };
    if let Some(p) = &pod_resources_socket {
        if let Some(dir) = p.parent() {
            crate::core::files::create_dir_all(dir).map_err(|e| {
                Error::io(dir, "cannot create the pod-resources directory (pass --pod-resources-socket)", &e)
            })?;
        }
    }
    for (flag, d) in [("--manifests", &a.manifests), ("--plugins-registry-dir", &a.plugins_registry_dir)] {
        if let Some(d) = d {
            if !d.is_dir() {
                return Err(Error::usage(format!("{flag} {}: not a directory; create it first", d.display())));
            }
        }
    }
    Ok(Settings {
        plugin_dir: plugin_dir.clone(),
        pod_resources_socket,
        manifests: a.manifests.clone(),
        plugins_registry_dir: a.plugins_registry_dir.clone(),
        metrics_addr: a.metrics_addr,
        restart_every: a.restart_every,
        dial_timeout: a.dial_timeout,
        manager: Config {
            checkpoint: plugin_dir.join(CHECKPOINT_NAME),
            plugin_dir,
            topology: a.topology_policy,
            grace_period: a.grace_period,
            max_recv: a.max_recv_size,
            call_timeout: a.call_timeout,
            pre_start_timeout: Duration::from_secs(30),
            profile: crate::kubelet::profile::Profile::of(a.kubelet_version),
        },
    })
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &MockKubeletArgs) -> Result<()> {
    if a.explain_profile {
        print!("{}", crate::kubelet::profile::Profile::of(a.kubelet_version).explain());
        return Ok(());
    }
    let s = settings(ctx, a)?;
    let log = Logger::new(a.log_format);
    let (shut_tx, shut_rx) = watch::channel(false);
    let (restart_tx, restart_rx) = mpsc::channel(1);
    // The signal listeners are owned here and end with the run.
    let (signals, token) = (tokio_util::task::TaskTracker::new(), tokio_util::sync::CancellationToken::new());
    signals.spawn(token.clone().run_until_cancelled_owned(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
        while hup.recv().await.is_some() {
            let _ = restart_tx.try_send(());
        }
    }));
    signals.spawn(token.clone().run_until_cancelled_owned(async move {
        crate::core::interrupted().await;
        let _ = shut_tx.send(true);
    }));
    let result = mock::run(s, log, shut_rx, restart_rx).await;
    token.cancel();
    signals.close();
    signals.wait().await;
    result
}
