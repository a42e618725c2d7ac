//! The kubelet's `v1beta1.Registration` service: validate the request with
//! the kubelet's error texts, dial the plugin back inside the call, read its
//! options, then follow its ListAndWatch stream.

use crate::api::deviceplugin::{registration_server::Registration, Empty, RegisterRequest};
use crate::client::conn::PluginConn;
use crate::kubelet::devicemanager::shell::Manager;
use crate::kubelet::event::{KubeletEvent, Registrant, RejectStage, Via};
use crate::protocol::{registration, Rule, Violation};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the kubelet refused a registration. Its `Display` is the kubelet's
/// text (what Register returns to the plugin).
#[derive(Debug)]
pub enum RegisterError {
    /// The request breaks a rule of the rulebook (version, resource name, endpoint).
    Invalid(Violation),
    /// Dialing the plugin back or GetDevicePluginOptions failed.
    DialBack(DialBackError),
    /// The kubelet was restarting: register again.
    Restarting,
}

impl RegisterError {
    /// Where the registration failed.
    pub fn stage(&self) -> RejectStage {
        match self {
            RegisterError::Invalid(_) => RejectStage::Validation,
            RegisterError::DialBack(_) => RejectStage::DialBack,
            RegisterError::Restarting => RejectStage::Restarting,
        }
    }

    /// The rule broken, when a rule refused it.
    pub fn rule(&self) -> Option<&'static Rule> {
        match self {
            RegisterError::Invalid(v) => Some(v.rule),
            _ => None,
        }
    }
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::Invalid(v) => v.fmt(f),
            RegisterError::DialBack(e) => e.fmt(f),
            RegisterError::Restarting => f.write_str("the kubelet is restarting; register again"),
        }
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegisterError::Invalid(v) => Some(v),
            RegisterError::DialBack(e) => Some(e),
            _ => None,
        }
    }
}

/// Check a RegisterRequest against the rulebook, in the kubelet's order
/// (version, resource name), then the endpoint (upstream does not check it).
pub fn check_request(r: &RegisterRequest, plugin_dir: &Path) -> Result<(), RegisterError> {
    registration::register_version(&r.version)
        .or_else(|| registration::register_resource_name(&r.resource_name))
        .or_else(|| registration::register_endpoint(&r.endpoint, plugin_dir))
        .map_or(Ok(()), |v| Err(RegisterError::Invalid(v)))
}

/// Why the kubelet could not take a plugin on after it asked to register.
#[derive(Debug)]
pub enum DialBackError {
    /// No connection to its socket within the dial timeout.
    Dial {
        /// The last dial's error.
        source: crate::client::conn::ConnError,
        /// How long the kubelet tried.
        tried: Duration,
    },
    /// GetDevicePluginOptions failed.
    Options(crate::client::conn::ConnError),
    /// The device manager refused the plugin once connected (the kubelet's PluginConnected).
    Connect(crate::kubelet::devicemanager::shell::StartError),
}

impl std::fmt::Display for DialBackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialBackError::Dial { source, tried } => write!(
                f,
                "failed to dial device plugin: {source} (tried for {}; the plugin must serve its socket before calling Register)",
                crate::core::time::format_duration(*tried)
            ),
            DialBackError::Options(e) => write!(f, "failed to get device plugin options: {e}"),
            DialBackError::Connect(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DialBackError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DialBackError::Dial { source, .. } | DialBackError::Options(source) => Some(source),
            DialBackError::Connect(e) => Some(e),
        }
    }
}

/// Dial a plugin, retrying until `timeout` (as grpc-go's blocking dial does), then read its options.
pub async fn connect_plugin(
    mgr: &Manager,
    socket: &Path,
    timeout: Duration,
) -> Result<(PluginConn, crate::api::deviceplugin::DevicePluginOptions), DialBackError> {
    connect_plugin_reporting(mgr, socket, timeout, |_| {}).await
}

/// [`connect_plugin`], telling `failing` about the first failed dial as it happens.
pub async fn connect_plugin_reporting(
    mgr: &Manager,
    socket: &Path,
    timeout: Duration,
    failing: impl FnOnce(String),
) -> Result<(PluginConn, crate::api::deviceplugin::DevicePluginOptions), DialBackError> {
    let start = Instant::now();
    let mut failing = Some(failing);
    let conn = loop {
        let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(100));
        match PluginConn::connect(socket, left.min(mgr.cfg.call_timeout), mgr.cfg.max_recv).await {
            Ok(c) => break c,
            Err(source) if start.elapsed() >= timeout => return Err(DialBackError::Dial { source, tried: timeout }),
            Err(e) => {
                if let Some(f) = failing.take() {
                    f(e.to_string());
                }
                tokio::time::sleep(Duration::from_millis(100)).await
            }
        }
    };
    let options = conn.options().await.map_err(DialBackError::Options)?;
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
    async fn handle(&self, r: &RegisterRequest) -> Result<(), RegisterError> {
        check_request(r, &self.mgr.cfg.plugin_dir)?;
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
            .map_err(RegisterError::DialBack)?;
        let who = Registrant {
            via: Via::KubeletSocket,
            version: r.version.clone(),
            endpoint: r.endpoint.clone(),
            request_options: r.options.map(Into::into),
        };
        self.mgr.start_endpoint(&r.resource_name, conn, options, who).map(|_| ()).map_err(|e| match e {
            crate::kubelet::devicemanager::shell::StartError::Restarting => RegisterError::Restarting,
            // The kubelet's PluginConnected fails after the dial: its Connect error.
            refused => RegisterError::DialBack(DialBackError::Connect(refused)),
        })
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
        let work = self.mgr.gen.tasks.run(self.handle(&r));
        let result = work.await.unwrap_or(Err(RegisterError::Restarting));
        match result {
            Ok(()) => Ok(tonic::Response::new(Empty {})),
            Err(e) => {
                use crate::core::text::{cap, cap_words};
                let msg = cap_words(&e.to_string()).into_owned();
                self.mgr.event(KubeletEvent::RegistrationRejected {
                    via: Via::KubeletSocket,
                    stage: e.stage(),
                    resource: cap(&r.resource_name).into_owned(),
                    endpoint: cap(&r.endpoint).into_owned(),
                    socket: cap(&self.mgr.cfg.plugin_dir.join(&r.endpoint).display().to_string()).into_owned(),
                    version: cap(&r.version).into_owned(),
                    request_options: r.options.map(Into::into),
                    error: msg.clone(),
                    why: registration::resource_name_problem(&r.resource_name),
                    rule: e.rule().map(|x| x.id.to_string()),
                });
                Err(tonic::Status::unknown(msg))
            }
        }
    }
}
