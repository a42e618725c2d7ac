//! The kubelet's side of a DRA kubelet plugin: GetInfo on its plugin-watcher
//! registration socket, NodePrepareResources / NodeUnprepareResources on the
//! DRAPlugin service (v1 or the deprecated v1beta1, answers converted to v1
//! as the kubelet's wrapper does) and the DRAResourceHealth stream (v1 or
//! v1alpha1, converted to v1).

use crate::api::dra_health_v1::{self as h1, DeviceHealth};
use crate::api::dra_health_v1alpha1 as h1a;
use crate::api::dra_v1::{
    self as v1, Claim, NodePrepareResourcesRequest, NodePrepareResourcesResponse, NodeUnprepareResourcesRequest,
    NodeUnprepareResourcesResponse,
};
use crate::api::dra_v1beta1 as v1b;
use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest, PluginInfo};
use crate::core::paths::Paths;
use crate::core::transport::{call, dial_hint, request, status_error};
use crate::core::{Error, Result};
use crate::protocol::dra::{DRA_V1, DRA_V1ALPHA4, DRA_V1ALPHA4_GRPC, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1};
use prost::Message;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::Channel;

/// What fixes a DRA socket that is not there.
pub const DRA_SOCKET_FIX: &str =
    "check the path, --kubelet-root-dir or --root (bare names are looked up in <kubelet-root>/plugins_registry/ and plugins/*/)";

/// Re-encode a message as another with the same fields (v1beta1 ↔ v1,
/// v1alpha1 ↔ v1: the same field numbers, so the bytes carry over).
pub fn convert<A: Message, B: Message + Default>(a: &A) -> B {
    B::decode(a.encode_to_vec().as_slice()).unwrap_or_default()
}

/// Resolve a DRA socket argument: a bare name (no `/`) that does not exist
/// here is looked up in `<kubelet-root>/plugins_registry/`, then in each
/// `<kubelet-root>/plugins/*/`; anything else is a host path (under `--root`).
pub fn resolve(paths: &Paths, arg: &Path) -> PathBuf {
    let s = arg.as_os_str().to_string_lossy();
    if s.contains('/') || arg.exists() {
        return paths.host(arg);
    }
    let reg = paths.plugins_registry_dir(None).join(arg);
    if reg.exists() {
        return reg;
    }
    let plugins = paths.kubelet_root.join("plugins");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&plugins)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter().map(|d| d.join(arg)).find(|p| p.exists()).unwrap_or(reg)
}

/// One connection to a DRA plugin socket (registration or service).
#[derive(Clone)]
pub struct DraConn {
    socket: PathBuf,
    channel: Channel,
    timeout: Duration,
}

/// A health stream, whichever version it speaks.
pub enum HealthStream {
    /// v1.DRAResourceHealth.
    V1(tonic::Streaming<h1::NodeWatchResourcesResponse>),
    /// v1alpha1.DRAResourceHealth.
    V1alpha1(tonic::Streaming<h1a::NodeWatchResourcesResponse>),
}

impl HealthStream {
    /// The next snapshot (as v1), or `None` when the plugin ended the stream.
    pub async fn next(&mut self, socket: &Path) -> Result<Option<Vec<DeviceHealth>>> {
        let r = match self {
            HealthStream::V1(s) => s.message().await.map(|m| m.map(|m| m.devices)),
            HealthStream::V1alpha1(s) => {
                s.message().await.map(|m| m.map(|m| convert::<_, h1::NodeWatchResourcesResponse>(&m).devices))
            }
        };
        r.map_err(|st| status_error(socket, "NodeWatchResources", st))
    }
}

impl DraConn {
    /// Dial `socket` (resolved already).
    pub async fn connect(socket: &Path, timeout: Duration) -> Result<Self> {
        let channel = dial_hint(socket, timeout, DRA_SOCKET_FIX).await?;
        Ok(DraConn { socket: socket.to_path_buf(), channel, timeout })
    }

    /// The same connection, its calls given `timeout` (their gRPC deadline).
    pub fn with_timeout(&self, timeout: Duration) -> DraConn {
        DraConn { socket: self.socket.clone(), channel: self.channel.clone(), timeout }
    }

    /// The socket dialled.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// GetInfo, as the plugin watcher calls it.
    pub async fn info(&self) -> Result<PluginInfo> {
        let mut c = RegistrationClient::new(self.channel.clone());
        crate::core::verbose::request(&self.socket, "GetInfo", &InfoRequest {});
        call(&self.socket, "GetInfo", self.timeout, c.get_info(request(InfoRequest {}, self.timeout))).await
    }

    /// NodePrepareResources on `service` (v1 or v1beta1).
    pub async fn prepare(&self, service: &str, claims: Vec<Claim>) -> Result<NodePrepareResourcesResponse> {
        let req = NodePrepareResourcesRequest { claims };
        crate::core::verbose::request(&self.socket, "NodePrepareResources", &req);
        let t = self.timeout;
        match service {
            DRA_V1BETA1 => {
                let mut c = v1b::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let r = dra_call(
                    &self.socket,
                    "NodePrepareResources",
                    t,
                    c.node_prepare_resources(request(convert::<_, v1b::NodePrepareResourcesRequest>(&req), t)),
                )
                .await?;
                Ok(convert(&r))
            }
            DRA_V1ALPHA4 => {
                let req = convert::<_, v1b::NodePrepareResourcesRequest>(&req);
                let r: v1b::NodePrepareResourcesResponse =
                    dra_call(&self.socket, "NodePrepareResources", t, self.v1alpha4("NodePrepareResources", req))
                        .await?;
                Ok(convert(&r))
            }
            DRA_V1 => {
                let mut c = v1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                dra_call(&self.socket, "NodePrepareResources", t, c.node_prepare_resources(request(req, t))).await
            }
            other => Err(unknown_service(other)),
        }
    }

    /// NodeUnprepareResources on `service` (v1 or v1beta1).
    pub async fn unprepare(&self, service: &str, claims: Vec<Claim>) -> Result<NodeUnprepareResourcesResponse> {
        let req = NodeUnprepareResourcesRequest { claims };
        crate::core::verbose::request(&self.socket, "NodeUnprepareResources", &req);
        let t = self.timeout;
        match service {
            DRA_V1BETA1 => {
                let mut c = v1b::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let r = dra_call(
                    &self.socket,
                    "NodeUnprepareResources",
                    t,
                    c.node_unprepare_resources(request(convert::<_, v1b::NodeUnprepareResourcesRequest>(&req), t)),
                )
                .await?;
                Ok(convert(&r))
            }
            DRA_V1ALPHA4 => {
                let req = convert::<_, v1b::NodeUnprepareResourcesRequest>(&req);
                let r: v1b::NodeUnprepareResourcesResponse =
                    dra_call(&self.socket, "NodeUnprepareResources", t, self.v1alpha4("NodeUnprepareResources", req))
                        .await?;
                Ok(convert(&r))
            }
            DRA_V1 => {
                let mut c = v1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                dra_call(&self.socket, "NodeUnprepareResources", t, c.node_unprepare_resources(request(req, t))).await
            }
            other => Err(unknown_service(other)),
        }
    }

    /// One call on the v1alpha4 API (gRPC service `v1alpha3.Node`, whose
    /// messages are v1beta1's field for field), as a 1.31–1.33 kubelet makes it.
    async fn v1alpha4<Q, R>(
        &self,
        method: &'static str,
        req: Q,
    ) -> std::result::Result<tonic::Response<R>, tonic::Status>
    where
        Q: Message + Send + Sync + 'static,
        R: Message + Default + Send + Sync + 'static,
    {
        let mut g = tonic::client::Grpc::new(self.channel.clone());
        g.ready().await.map_err(|e| tonic::Status::unavailable(format!("service was not ready: {e}")))?;
        let path = format!("/{DRA_V1ALPHA4_GRPC}/{method}")
            .parse::<http::uri::PathAndQuery>()
            .map_err(|e| tonic::Status::internal(e.to_string()))?;
        g.unary(request(req, self.timeout), path, tonic_prost::ProstCodec::<Q, R>::default()).await
    }

    /// Open NodeWatchResources on `service` (v1 or v1alpha1).
    pub async fn health(&self, service: &str) -> Result<HealthStream> {
        crate::core::verbose::request(&self.socket, "NodeWatchResources", &h1::NodeWatchResourcesRequest {});
        let t = self.timeout;
        match service {
            HEALTH_V1 => {
                let mut c = h1::dra_resource_health_client::DraResourceHealthClient::new(self.channel.clone());
                let s = call(
                    &self.socket,
                    "NodeWatchResources",
                    t,
                    c.node_watch_resources(tonic::Request::new(h1::NodeWatchResourcesRequest {})),
                )
                .await?;
                Ok(HealthStream::V1(s))
            }
            HEALTH_V1ALPHA1 => {
                let mut c = h1a::dra_resource_health_client::DraResourceHealthClient::new(self.channel.clone());
                let s = call(
                    &self.socket,
                    "NodeWatchResources",
                    t,
                    c.node_watch_resources(tonic::Request::new(h1a::NodeWatchResourcesRequest {})),
                )
                .await?;
                Ok(HealthStream::V1alpha1(s))
            }
            other => Err(unknown_service(other)),
        }
    }
}

fn unknown_service(s: &str) -> Error {
    Error::usage(format!(
        "{} is not a DRA service dpctl speaks (use {DRA_V1}, {DRA_V1BETA1}, {HEALTH_V1} or {HEALTH_V1ALPHA1})",
        crate::core::text::quote(s)
    ))
}

/// A DRAPlugin call as the kubelet's client makes it: its deadline passing
/// is the status grpc-go gives (`DeadlineExceeded`, `context deadline
/// exceeded`), as every other failed status is.
async fn dra_call<T>(
    target: &Path,
    method: &'static str,
    timeout: Duration,
    fut: impl std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    let deadline = || Error::Rpc {
        target: target.display().to_string(),
        method,
        code: tonic::Code::DeadlineExceeded,
        message: "context deadline exceeded".into(),
    };
    let start = std::time::Instant::now();
    let r = match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(deadline()),
        // tonic's client enforces the request's grpc-timeout itself.
        Ok(Err(status)) if crate::core::status::is_local_deadline(&status) => Err(deadline()),
        // A tonic server ends a call whose grpc-timeout passed with CANCELLED,
        // which can arrive before our own timer fires: only the clock says it was ours.
        Ok(Err(status)) if status.code() == tonic::Code::Cancelled && start.elapsed() >= timeout => Err(deadline()),
        Ok(Err(status)) => Err(status_error(target, method, status)),
        Ok(Ok(resp)) => Ok(resp.into_inner()),
    };
    if crate::core::verbose::on() {
        let code = match &r {
            Ok(_) => "OK".to_string(),
            Err(e) => crate::core::status::go_text(e),
        };
        crate::core::verbose::outcome(target, method, &code, start.elapsed());
    }
    r
}

/// Parse `NS/NAME/UID` into a claim.
pub fn parse_claim(s: &str) -> std::result::Result<Claim, NotAClaim> {
    let parts: Vec<&str> = s.split('/').collect();
    match parts.as_slice() {
        [ns, name, uid] if !ns.is_empty() && !name.is_empty() && !uid.is_empty() => {
            Ok(Claim { namespace: ns.to_string(), name: name.to_string(), uid: uid.to_string() })
        }
        _ => Err(NotAClaim(s.to_string())),
    }
}

/// A `--claim` (this text) that is not `NS/NAME/UID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAClaim(pub String);

impl std::fmt::Display for NotAClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not NAMESPACE/NAME/UID (e.g. default/gpu-claim/2f1c-…)", self.0)
    }
}

impl std::error::Error for NotAClaim {}

/// Whether a driver's answer (a gRPC message or a claim's error) says it
/// looked the claim up in an API server and did not find it (the
/// kubeletplugin helper: `retrieve claim NS/NAME: resourceclaims.resource.k8s.io
/// "NAME" not found`; `dpctl dra serve --kubeconfig`: `fetch ResourceClaim NS/NAME: …`).
pub fn says_claim_not_in_api_server(text: &str) -> bool {
    let d = text.to_ascii_lowercase();
    d.contains("not found")
        && (d.contains("resourceclaims") || d.contains("retrieve claim") || d.contains("fetch resourceclaim"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1beta1_and_v1alpha1_messages_carry_over_to_v1() {
        let mut r = v1b::NodePrepareResourcesResponse::default();
        r.claims.insert(
            "u".into(),
            v1b::NodePrepareResourceResponse {
                devices: vec![v1b::Device {
                    request_names: vec!["r".into()],
                    pool_name: "p".into(),
                    device_name: "d".into(),
                    cdi_device_ids: vec!["a.b/c=d".into()],
                }],
                error: String::new(),
            },
        );
        let v: NodePrepareResourcesResponse = convert(&r);
        let d = &v.claims["u"].devices[0];
        assert_eq!((d.pool_name.as_str(), d.device_name.as_str(), d.cdi_device_ids[0].as_str()), ("p", "d", "a.b/c=d"));
        let a = h1a::NodeWatchResourcesResponse {
            devices: vec![h1a::DeviceHealth {
                device: Some(h1a::DeviceIdentifier { pool_name: "p".into(), device_name: "d".into() }),
                health: h1a::HealthStatus::Unhealthy as i32,
                last_updated_time: 7,
                health_check_timeout_seconds: 30,
                message: "hot".into(),
            }],
        };
        let b: h1::NodeWatchResourcesResponse = convert(&a);
        assert_eq!(b.devices[0].health, h1::HealthStatus::Unhealthy as i32);
        assert_eq!((b.devices[0].last_updated_time, b.devices[0].message.as_str()), (7, "hot"));
    }

    #[test]
    fn claims_parse_as_namespace_name_uid() {
        let c = parse_claim("default/gpu/1234").unwrap();
        assert_eq!((c.namespace.as_str(), c.name.as_str(), c.uid.as_str()), ("default", "gpu", "1234"));
        assert!(parse_claim("default/gpu").unwrap_err().to_string().contains("NAMESPACE/NAME/UID"));
        assert!(parse_claim("a//c").is_err());
    }

    #[test]
    fn bare_names_are_found_in_the_registry_then_the_plugin_dirs() {
        let d = tempfile::tempdir().unwrap();
        let paths = Paths::for_node(Default::default(), d.path(), None);
        std::fs::create_dir_all(d.path().join("plugins_registry")).unwrap();
        std::fs::create_dir_all(d.path().join("plugins/g.example")).unwrap();
        std::fs::write(d.path().join("plugins_registry/g.example-reg.sock"), "").unwrap();
        std::fs::write(d.path().join("plugins/g.example/dra.sock"), "").unwrap();
        assert_eq!(
            resolve(&paths, Path::new("g.example-reg.sock")),
            d.path().join("plugins_registry/g.example-reg.sock")
        );
        assert_eq!(resolve(&paths, Path::new("dra.sock")), d.path().join("plugins/g.example/dra.sock"));
        assert_eq!(resolve(&paths, Path::new("nope.sock")), d.path().join("plugins_registry/nope.sock"));
    }
}
