//! `dpctl mock-kubelet`: the kubelet's device manager on a laptop. SIGHUP
//! simulates a kubelet restart in place; SIGINT/SIGTERM stop it.

use super::Ctx;
use crate::cli::MockKubeletArgs;
use crate::core::log::Logger;
use crate::core::paths::CHECKPOINT_NAME;
use crate::core::{Error, Result};
use crate::kubelet::event::EventBus;
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::shell::Config;
use std::time::Duration;

/// Build the settings from the command line.
pub fn settings(ctx: &Ctx, a: &MockKubeletArgs) -> Result<NodeSpec> {
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
    Ok(NodeSpec {
        plugin_dir: plugin_dir.clone(),
        endpoint_alias: None,
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
        dra: dra_spec(ctx, a),
        api_server: a.api_server,
        clean_at_start: true,
    })
}

/// Run the command: the engine until SIGINT/SIGTERM; SIGHUP restarts it in place.
pub async fn run(ctx: &Ctx, a: &MockKubeletArgs) -> Result<()> {
    if a.explain_profile {
        print!("{}", crate::kubelet::profile::Profile::of(a.kubelet_version).explain());
        return Ok(());
    }
    let s = settings(ctx, a)?;
    let bus = EventBus::new(Logger::new(a.log_format));
    // Listen for signals before the node starts, so none is lost.
    let interrupted = crate::core::interrupted();
    tokio::pin!(interrupted);
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::failed(format!("cannot listen for SIGHUP: {e}")))?;
    let node = Node::start(s, bus).await?;
    let result = loop {
        tokio::select! {
            _ = &mut interrupted => break Ok(()),
            r = node.finished() => break r,
            Some(()) = hup.recv() => {
                if let Err(e) = node.restart("SIGHUP").await {
                    break Err(e);
                }
            }
        }
    };
    node.stop().await;
    result
}

/// The DRA manager's settings: the kubelet root is the plugin directory's
/// parent (device-plugins/ sits under it), where `dra_manager_state` goes;
/// CDI IDs are checked against /etc/cdi, /var/run/cdi (under --root) and `<root>/cdi`.
fn dra_spec(ctx: &Ctx, a: &MockKubeletArgs) -> Option<crate::kubelet::dra::DraSpec> {
    let root = ctx.paths.plugin_dir.parent()?.to_path_buf();
    let mut dirs = ctx.paths.cdi_spec_dirs(&[]);
    dirs.push(root.join("cdi"));
    let mut spec = crate::kubelet::dra::DraSpec::new(&root, dirs);
    spec.call_timeout = spec.call_timeout.min(a.call_timeout.max(Duration::from_secs(1)));
    Some(spec)
}
