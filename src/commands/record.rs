//! `dpctl record`: put a tap between the kubelet and a plugin. The tap
//! registers under the plugin's resource name (the newest registration
//! wins), forwards every call unchanged and writes the trace; on exit the
//! plugin's own socket is registered again, leaving the node as it was.

use super::Ctx;
use crate::api::deviceplugin::{
    device_plugin_server::DevicePluginServer, registration_client::RegistrationClient, RegisterRequest,
};
use crate::cli::RecordArgs;
use crate::core::log::Logger;
use crate::core::transport::{call, dial, listen, request, serve};
use crate::core::validate::check_resource_name;
use crate::core::{Error, Result};
use crate::kubelet::PluginConn;
use crate::plugin::server::stopped;
use crate::plugin::tap::Tap;
use crate::trace::Writer;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

async fn register(
    kubelet: &Path,
    endpoint: &str,
    resource: &str,
    options: crate::api::deviceplugin::DevicePluginOptions,
    timeout: Duration,
) -> Result<()> {
    let mut c = RegistrationClient::new(dial(kubelet, timeout).await?);
    let req = RegisterRequest {
        version: crate::api::VERSION.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: Some(options),
    };
    let t = timeout.max(Duration::from_secs(15));
    call(kubelet, "Register", t, c.register(request(req, t))).await.map(|_| ())
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &RecordArgs) -> Result<()> {
    check_resource_name(&a.resource)?;
    let plugin = ctx.paths.resolve_socket(&a.plugin);
    let plugin_dir = if ctx.plugin_dir_given {
        ctx.paths.plugin_dir.clone()
    } else {
        plugin.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let plugin_name = plugin.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if plugin.parent() != Some(plugin_dir.as_path()) {
        return Err(Error::usage(format!(
            "{}: the plugin's socket must be inside the plugin directory {} so it can be registered again afterwards",
            plugin.display(),
            plugin_dir.display()
        )));
    }
    let kubelet = a.kubelet_socket.clone().unwrap_or_else(|| plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME));
    let log = Logger::new(a.log_format);
    let upstream = PluginConn::connect(&plugin, ctx.timeout, usize::MAX).await?;
    let options = upstream.options().await?;
    let writer = Arc::new(Writer::create(&a.out, &a.resource, "record", &plugin)?);

    let tap_name = format!("dpctl-record-{}.sock", std::process::id());
    let tap_path = plugin_dir.join(&tap_name);
    let (listener, guard) = match listen(&tap_path).await {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_file(&a.out);
            return Err(e);
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let svc = DevicePluginServer::new(Tap::new(upstream, writer.clone(), log.clone(), stop_rx.clone()))
        .max_decoding_message_size(crate::core::limits::GRPC_MAX_RECV)
        .max_encoding_message_size(usize::MAX);
    let mut st = stop_rx.clone();
    let server = tokio::spawn(async move { serve(listener, svc, async move { stopped(&mut st).await }).await });
    if let Err(e) = register(&kubelet, &tap_name, &a.resource, options, ctx.timeout).await {
        let _ = stop_tx.send(true);
        let _ = server.await;
        drop(guard);
        if writer.count.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            let _ = std::fs::remove_file(&a.out);
        }
        return Err(Error::failed(format!("cannot register the tap: {e}")));
    }
    log.event(
        "recording",
        &[
            ("resource", json!(a.resource)),
            ("tap", json!(tap_path.display().to_string())),
            ("plugin", json!(plugin.display().to_string())),
            ("out", json!(a.out.display().to_string())),
        ],
    );
    let until = async {
        match a.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = crate::core::interrupted() => {}
        _ = until => {}
    }
    // Leave the node as it was: the plugin's own socket registered again.
    let restored = register(&kubelet, &plugin_name, &a.resource, options, ctx.timeout).await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(3), server).await;
    drop(guard);
    let n = writer.count.load(std::sync::atomic::Ordering::Relaxed);
    log.event("recorded", &[("events", json!(n)), ("out", json!(a.out.display().to_string()))]);
    restored.map_err(|e| {
        Error::failed(format!("the trace is complete, but the plugin's own socket could not be registered again: {e}; restart the plugin so it registers itself"))
    })
}
