//! When a socket answers a DevicePlugin call with `Unimplemented`, find out
//! what it does serve and name the command to use instead.

use super::Ctx;
use crate::core::transport::{dial, request};
use crate::core::Error;
use std::path::Path;
use std::time::Duration;

/// What else a socket can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Service {
    /// The kubelet's device-plugin Registration service (kubelet.sock).
    KubeletRegistration,
    /// The kubelet's PodResources API.
    PodResources,
    /// A plugin's plugin-watcher Registration service (pluginregistration.v1),
    /// with the DevicePlugin endpoint its GetInfo names.
    PluginWatcher(String),
}

/// The hint for a socket that serves `s`, naming the command to use instead.
pub fn hint(s: &Service, socket: &Path) -> String {
    let p = socket.display();
    match s {
        Service::KubeletRegistration => format!(
            "{p} serves the kubelet's device-plugin Registration service, not a plugin's DevicePlugin service; \
use `dpctl register --kubelet-socket {p} …` to register, and point this command at a plugin's socket"
        ),
        Service::PodResources => format!(
            "{p} serves the kubelet's PodResources API, not a device plugin; use `dpctl podresources list --socket {p}`"
        ),
        Service::PluginWatcher(endpoint) if !endpoint.is_empty() => format!(
            "{p} serves a plugin's plugin-watcher Registration service (GetInfo), not its DevicePlugin service; \
its DevicePlugin socket, per GetInfo, is {endpoint}: point this command there"
        ),
        Service::PluginWatcher(_) => format!(
            "{p} serves a plugin's plugin-watcher Registration service (GetInfo), not its DevicePlugin service; \
its DevicePlugin socket is the endpoint GetInfo names: point this command there"
        ),
    }
}

/// The hint for a dpctl control socket (not gRPC at all), by its path.
pub fn control_socket_hint(socket: &Path) -> Option<String> {
    let in_control_dir =
        socket.parent().and_then(|d| d.file_name()).is_some_and(|n| n == crate::plugin::control::CONTROL_DIR);
    in_control_dir.then(|| {
        format!(
            "{} is a dpctl control socket (JSON lines, not gRPC); use `dpctl device list --control {}` (or `dpctl node` for a mock kubelet's)",
            socket.display(),
            socket.display()
        )
    })
}

fn answers(r: Result<(), tonic::Status>) -> bool {
    match r {
        Ok(()) => true,
        Err(s) => s.code() != tonic::Code::Unimplemented,
    }
}

/// Ask the socket, read-only, which of the other services it serves.
pub async fn identify(socket: &Path, timeout: Duration) -> Option<Service> {
    use crate::api::deviceplugin::registration_client::RegistrationClient;
    use crate::api::pluginregistration::registration_client::RegistrationClient as WatcherClient;
    use crate::api::podresources::pod_resources_lister_client::PodResourcesListerClient;
    let ch = dial(socket, timeout).await.ok()?;
    let mut pr = PodResourcesListerClient::new(ch.clone());
    let r = pr.get_allocatable_resources(request(crate::api::podresources::AllocatableResourcesRequest {}, timeout));
    if answers(r.await.map(|_| ())) {
        return Some(Service::PodResources);
    }
    let mut w = WatcherClient::new(ch.clone());
    match w.get_info(request(crate::api::pluginregistration::InfoRequest {}, timeout)).await {
        Ok(info) => return Some(Service::PluginWatcher(info.into_inner().endpoint)),
        Err(s) if s.code() != tonic::Code::Unimplemented => return Some(Service::PluginWatcher(String::new())),
        Err(_) => {}
    }
    // An unsupported version is rejected before anything else: no side effect on a kubelet.
    let probe = crate::api::deviceplugin::RegisterRequest {
        version: "dpctl-identify".into(),
        endpoint: String::new(),
        resource_name: String::new(),
        options: None,
    };
    if answers(RegistrationClient::new(ch).register(request(probe, timeout)).await.map(|_| ())) {
        return Some(Service::KubeletRegistration);
    }
    None
}

const DEVICE_PLUGIN_METHODS: &[&str] =
    ["GetDevicePluginOptions", "ListAndWatch", "Allocate", "GetPreferredAllocation", "PreStartContainer"].as_slice();

/// Rewrite an `Unimplemented` answer to a DevicePlugin call, or a failed
/// connection to a control socket, into what the socket is and what to use.
pub async fn explain_unimplemented(ctx: &Ctx, e: Error) -> Error {
    match &e {
        Error::Rpc { target, method, code: tonic::Code::Unimplemented, message }
            if DEVICE_PLUGIN_METHODS.contains(method) =>
        {
            let socket = Path::new(target);
            let what = match identify(socket, ctx.timeout).await {
                Some(s) => hint(&s, socket),
                None => format!(
                    "{target} does not serve the DevicePlugin service (v1beta1.DevicePlugin); is it a device plugin's socket?"
                ),
            };
            let peer = if message.is_empty() { String::new() } else { format!(" ({message})") };
            Error::failed(format!("{target}: {method} failed: Unimplemented{peer}: {what}"))
        }
        // A control socket speaks JSON lines: the HTTP/2 exchange breaks in one way or another.
        Error::Rpc { target, .. } => match control_socket_hint(Path::new(target)) {
            Some(h) => Error::failed(format!("{e}; {h}")),
            None => e,
        },
        // Only a failed gRPC exchange: `dpctl device` itself reports errors on control sockets.
        Error::Failed(m) if m.contains("gRPC connection failed") || m.contains("HTTP/2 handshake") => {
            let first = m.split(':').next().unwrap_or_default();
            match control_socket_hint(Path::new(first)) {
                Some(h) => Error::failed(format!("{m}; {h}")),
                None => e,
            }
        }
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_command_to_use() {
        let p = Path::new("/n/kubelet.sock");
        assert!(hint(&Service::KubeletRegistration, p).contains("dpctl register"));
        assert!(hint(&Service::PodResources, p).contains("dpctl podresources list --socket /n/kubelet.sock"));
        assert!(hint(&Service::PluginWatcher("/dp/x.sock".into()), p).contains("per GetInfo, is /dp/x.sock"));
        assert!(control_socket_hint(Path::new("/n/dpctl-control/serve-1.sock")).unwrap().contains("dpctl device list"));
        assert!(control_socket_hint(Path::new("/n/p.sock")).is_none());
    }
}
