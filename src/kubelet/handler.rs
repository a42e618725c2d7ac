//! The plugin manager's handlers (pkg/kubelet/pluginmanager/cache
//! PluginHandler): the plugin watcher hands each registration to the
//! handler of its GetInfo type — ValidatePlugin, RegisterPlugin, and
//! DeRegisterPlugin when its socket goes — as the kubelet does with the
//! device manager (cm/devicemanager/plugin/v1beta1/handler.go) and the DRA
//! manager (cm/dra/plugin/registration.go).

use crate::api::pluginregistration::PluginInfo;
use crate::kubelet::devicemanager::shell::Manager;
use crate::kubelet::dra::shell::DraManager;
use crate::kubelet::event::{Refusal, Registrant, RejectStage, Via};
use crate::kubelet::registration::connect_plugin;
use crate::protocol::registration as rules;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A plugin a handler registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// Its plugin-watcher socket.
    pub socket: PathBuf,
    /// GetInfo's name (a resource or a driver).
    pub name: String,
    /// Where the engine dials it.
    pub endpoint: PathBuf,
}

/// What the plugin manager calls for one plugin type.
#[tonic::async_trait]
pub trait PluginHandler: Send + Sync {
    /// ValidatePlugin: whether the plugin may register at all.
    fn validate(&self, info: &PluginInfo) -> Result<(), Refusal>;
    /// RegisterPlugin: connect to it and start using it.
    async fn register(&self, socket: &Path, info: &PluginInfo, endpoint: &Path) -> Result<(), Refusal>;
    /// DeRegisterPlugin: it went away (`why` says how).
    fn deregister(&self, plugin: &Registered, why: &str);
}

/// The handlers by plugin type.
#[derive(Clone, Default)]
pub struct Handlers(BTreeMap<&'static str, Arc<dyn PluginHandler>>);

impl Handlers {
    /// Handle plugins of type `ty` with `h`.
    pub fn add(&mut self, ty: &'static str, h: Arc<dyn PluginHandler>) {
        self.0.insert(ty, h);
    }

    /// The handler of `ty`.
    pub fn get(&self, ty: &str) -> Option<Arc<dyn PluginHandler>> {
        self.0.get(ty).cloned()
    }

    /// The kubelet's handlers: DevicePlugin by the device manager, DRAPlugin
    /// by the DRA manager when there is one and the kubelet version has a
    /// DRAPlugin handler (1.31+: the profile's `dra_plugin` row; before, a
    /// DRAPlugin registration gets "no handler registered for plugin type").
    pub fn kubelet(devices: &Arc<Manager>, dra: Option<&Arc<DraManager>>, dial_timeout: Duration) -> Self {
        let mut h = Handlers::default();
        h.add(rules::PLUGIN_TYPE, Arc::new(DevicePlugins { mgr: devices.clone(), dial_timeout }));
        if let Some(d) = dra.filter(|d| d.handles_plugins()) {
            h.add(crate::protocol::dra::PLUGIN_TYPE, Arc::new(DraPlugins { dra: d.clone() }));
        }
        h
    }
}

/// The device manager's handler.
struct DevicePlugins {
    mgr: Arc<Manager>,
    dial_timeout: Duration,
}

#[tonic::async_trait]
impl PluginHandler for DevicePlugins {
    fn validate(&self, info: &PluginInfo) -> Result<(), Refusal> {
        let broken =
            rules::watcher_versions(&info.supported_versions).or_else(|| rules::register_resource_name(&info.name));
        match broken {
            Some(v) => Err(Refusal { stage: RejectStage::Validation, error: v.to_string(), rule: Some(v.rule.id) }),
            None => Ok(()),
        }
    }

    async fn register(&self, _socket: &Path, info: &PluginInfo, endpoint: &Path) -> Result<(), Refusal> {
        let (conn, options) = connect_plugin(&self.mgr, endpoint, self.dial_timeout)
            .await
            .map_err(|e| Refusal::new(RejectStage::DialBack, e.to_string()))?;
        let who = Registrant {
            via: Via::PluginWatcher,
            version: info.supported_versions.join(","),
            endpoint: info.endpoint.clone(),
            request_options: None,
        };
        self.mgr.start_endpoint(&info.name, conn, options, who).map(|_| ()).map_err(|e| match e {
            crate::kubelet::devicemanager::shell::StartError::Restarting => {
                Refusal::new(RejectStage::Restarting, e.to_string())
            }
            refused => Refusal::new(RejectStage::DialBack, refused.to_string()),
        })
    }

    fn deregister(&self, plugin: &Registered, why: &str) {
        if let Some((r, id)) = self.mgr.resource_of(&plugin.endpoint) {
            if r == plugin.name {
                self.mgr.stream_ended(&r, id, why);
            }
        }
    }
}

/// The DRA manager's handler.
struct DraPlugins {
    dra: Arc<DraManager>,
}

#[tonic::async_trait]
impl PluginHandler for DraPlugins {
    fn validate(&self, info: &PluginInfo) -> Result<(), Refusal> {
        self.dra.validate(info).map(|_| ())
    }

    async fn register(&self, socket: &Path, info: &PluginInfo, endpoint: &Path) -> Result<(), Refusal> {
        self.dra.register(socket, info, endpoint).await
    }

    fn deregister(&self, plugin: &Registered, _why: &str) {
        self.dra.deregister_socket(&plugin.socket);
    }
}
