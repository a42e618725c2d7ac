//! The kubelet's `v1beta1.Registration` service: validate the request with
//! the kubelet's error texts, dial the plugin back inside the call, read its
//! options, then follow its ListAndWatch stream.

use crate::api::deviceplugin::{registration_server::Registration, Empty, RegisterRequest};
use crate::client::conn::PluginConn;
use crate::core::validate::{kubelet_invalid_resource_text, resource_name_problem};
use crate::kubelet::event::{KubeletEvent, Registrant, RejectStage, Via};
use crate::kubelet::shell::Manager;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kubelet's text for an unsupported version.
pub fn unsupported_version_text(v: &str) -> String {
    format!(
        "requested API version {} is not supported by kubelet. Supported version is {:?}",
        crate::core::text::quote(v),
        crate::api::VERSION
    )
}

/// The longest file name Linux allows.
const NAME_MAX: usize = 255;

/// Why an endpoint name would escape the plugin directory (upstream does not check; a safe tool must).
pub fn endpoint_problem(endpoint: &str, plugin_dir: &Path) -> Option<String> {
    if endpoint.is_empty()
        || endpoint.contains('/')
        || endpoint == "."
        || endpoint == ".."
        || endpoint.contains('\0')
        || endpoint.len() > NAME_MAX
    {
        Some(format!(
            "endpoint {} is not a socket file name inside the plugin directory {}; send the socket's file name (e.g. \"vendor.sock\", at most {NAME_MAX} bytes)",
            crate::core::text::quote(endpoint),
            plugin_dir.display()
        ))
    } else {
        None
    }
}

/// Dial a plugin, retrying until `timeout` (as grpc-go's blocking dial does), then read its options.
pub async fn connect_plugin(
    mgr: &Manager,
    socket: &Path,
    timeout: Duration,
) -> Result<(PluginConn, crate::api::deviceplugin::DevicePluginOptions), String> {
    connect_plugin_reporting(mgr, socket, timeout, |_| {}).await
}

/// [`connect_plugin`], telling `failing` about the first failed dial as it happens.
pub async fn connect_plugin_reporting(
    mgr: &Manager,
    socket: &Path,
    timeout: Duration,
    failing: impl FnOnce(String),
) -> Result<(PluginConn, crate::api::deviceplugin::DevicePluginOptions), String> {
    let start = Instant::now();
    let mut failing = Some(failing);
    let conn = loop {
        let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(100));
        match PluginConn::connect(socket, left.min(mgr.cfg.call_timeout), mgr.cfg.max_recv).await {
            Ok(c) => break c,
            Err(e) if start.elapsed() >= timeout => {
                return Err(format!(
                    "failed to dial device plugin: {e} (tried for {}; the plugin must serve its socket before calling Register)",
                    crate::core::time::format_duration(timeout)
                ))
            }
            Err(e) => {
                if let Some(f) = failing.take() {
                    f(e.to_string());
                }
                tokio::time::sleep(Duration::from_millis(100)).await
            }
        }
    };
    let options = conn.options().await.map_err(|e| format!("failed to get device plugin options: {e}"))?;
    Ok((conn, options))
}

/// The Registration service.
pub struct RegistrationService {
    /// The device manager.
    pub mgr: Arc<Manager>,
    /// How long to keep dialing a plugin back (the kubelet: 10 s).
    pub dial_timeout: Duration,
}

impl RegistrationService {
    async fn handle(&self, r: &RegisterRequest) -> Result<(), (RejectStage, String)> {
        let invalid = |e| Err((RejectStage::Validation, e));
        if r.version != crate::api::VERSION {
            return invalid(unsupported_version_text(&r.version));
        }
        if resource_name_problem(&r.resource_name).is_some() {
            return invalid(kubelet_invalid_resource_text(&r.resource_name));
        }
        if let Some(p) = endpoint_problem(&r.endpoint, &self.mgr.cfg.plugin_dir) {
            return invalid(p);
        }
        let socket = self.mgr.cfg.plugin_dir.join(&r.endpoint);
        let failing = |error: String| {
            self.mgr.event(KubeletEvent::DialBackFailing {
                resource: crate::core::text::cap(&r.resource_name).into_owned(),
                socket: socket.display().to_string(),
                error: crate::core::text::cap_words(&error).into_owned(),
            })
        };
        let (conn, options) = connect_plugin_reporting(&self.mgr, &socket, self.dial_timeout, failing)
            .await
            .map_err(|e| (RejectStage::DialBack, e))?;
        let who = Registrant {
            via: Via::KubeletSocket,
            version: r.version.clone(),
            endpoint: r.endpoint.clone(),
            request_options: r.options.map(Into::into),
        };
        self.mgr
            .start_endpoint(&r.resource_name, conn, options, who)
            .map(|_| ())
            .ok_or_else(|| (RejectStage::Restarting, "the kubelet is restarting; register again".to_string()))
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(&self, req: tonic::Request<RegisterRequest>) -> Result<tonic::Response<Empty>, tonic::Status> {
        let r = req.into_inner();
        self.mgr.count_registration(&r.resource_name);
        self.mgr.event(KubeletEvent::RegisterReceived {
            resource: crate::core::text::cap(&r.resource_name).into_owned(),
            endpoint: crate::core::text::cap(&r.endpoint).into_owned(),
        });
        // The call's work belongs to the generation: a restart cancels it and waits for it.
        let gen = &self.mgr.gen;
        let work = gen.tracker.track_future(gen.token.run_until_cancelled(self.handle(&r)));
        let result = work
            .await
            .unwrap_or_else(|| Err((RejectStage::Restarting, "the kubelet is restarting; register again".to_string())));
        match result {
            Ok(()) => Ok(tonic::Response::new(Empty {})),
            Err((stage, msg)) => {
                use crate::core::text::{cap, cap_words};
                let msg = cap_words(&msg).into_owned();
                self.mgr.event(KubeletEvent::RegistrationRejected {
                    via: Via::KubeletSocket,
                    stage,
                    resource: cap(&r.resource_name).into_owned(),
                    endpoint: cap(&r.endpoint).into_owned(),
                    socket: cap(&self.mgr.cfg.plugin_dir.join(&r.endpoint).display().to_string()).into_owned(),
                    version: cap(&r.version).into_owned(),
                    request_options: r.options.map(Into::into),
                    error: msg.clone(),
                    why: resource_name_problem(&r.resource_name),
                });
                Err(tonic::Status::unknown(msg))
            }
        }
    }
}
