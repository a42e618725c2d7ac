//! `dpctl register`: send one RegisterRequest to a kubelet and report its
//! answer verbatim. The request is sent as given (so a kubelet's validation
//! can be tested); a name the kubelet will reject gets a warning first.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{registration_client::RegistrationClient, DevicePluginOptions, RegisterRequest};
use crate::core::transport::{call, dial_hint, request};
use crate::core::{Error, Result};
use crate::protocol::registration::resource_name_problem;
use crate::render::{emit, structured, Format};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl register`: its surface.
pub const COMMAND: Spec = Spec {
    name: "register",
    about: "Send one RegisterRequest to a kubelet (real or mock) and report its answer",
    group: super::surface::Group::Diagnose,
    args: surface::args::<RegisterArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<RegisterArgs>,
};

const EXAMPLES: &str = "Examples:
  # Register vendor.sock (in the plugin directory) with the kubelet
  dpctl register --resource vendor.example/foo --endpoint vendor.sock --preferred-allocation
  # with a mock kubelet in a temp dir
  dpctl register --plugin-dir /tmp/node/device-plugins --resource vendor.example/foo --endpoint foo.sock";

/// `dpctl register`
#[derive(Debug, Args)]
pub struct RegisterArgs {
    /// Extended resource name, e.g. vendor.example/foo
    #[arg(long, value_name = "NAME")]
    pub resource: String,
    /// The plugin's socket name, relative to the plugin directory (sent as given)
    #[arg(long, value_name = "FILE")]
    pub endpoint: String,
    /// The kubelet's Registration socket [default: <plugin-dir>/kubelet.sock]
    #[arg(long, env = "DPCTL_KUBELET_SOCKET", value_name = "PATH")]
    pub kubelet_socket: Option<PathBuf>,
    /// API version to send
    #[arg(id = "api_version", long = "version", default_value = crate::api::VERSION, value_name = "VERSION")]
    pub version: String,
    /// Set options.pre_start_required
    #[arg(long)]
    pub pre_start: bool,
    /// Set options.get_preferred_allocation_available
    #[arg(long)]
    pub preferred_allocation: bool,
}

impl Invocation for RegisterArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    accepted: bool,
    kubelet_socket: String,
    request: &'a RegisterRequest,
}

/// How long the kubelet keeps dialing a plugin back inside Register.
pub const KUBELET_DIAL_BACK: Duration = Duration::from_secs(10);

/// Register's wait: `--timeout` if given, else long enough for the kubelet's
/// dial-back to fail and its own error ("failed to dial device plugin") to arrive.
pub fn register_timeout(given: Option<Duration>) -> Duration {
    given.unwrap_or(KUBELET_DIAL_BACK + Duration::from_secs(5))
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &RegisterArgs) -> Result<()> {
    let kubelet =
        a.kubelet_socket.as_deref().map(|k| ctx.paths.host(k)).unwrap_or_else(|| ctx.paths.kubelet_socket.clone());
    if let Some(p) = resource_name_problem(&a.resource) {
        eprintln!("dpctl: warning: resource name {:?} will be rejected by the kubelet: {p}", a.resource);
    }
    let req = RegisterRequest {
        version: a.version.clone(),
        endpoint: a.endpoint.clone(),
        resource_name: a.resource.clone(),
        options: Some(DevicePluginOptions {
            pre_start_required: a.pre_start,
            get_preferred_allocation_available: a.preferred_allocation,
        }),
    };
    let timeout = register_timeout(ctx.timeout_given);
    let fix = "pass --kubelet-socket or set DPCTL_KUBELET_SOCKET; the default is <plugin-dir>/kubelet.sock";
    let mut client = RegistrationClient::new(dial_hint(&kubelet, ctx.timeout, fix).await?);
    crate::core::verbose::request(&kubelet, "Register", &req);
    call(&kubelet, "Register", timeout, client.register(request(req.clone(), timeout))).await.map_err(|e| {
        if timeout <= KUBELET_DIAL_BACK && e.code().is_none() {
            Error::failed(format!(
                "{e}; the kubelet dials the plugin back for up to 10s before it answers: use a --timeout over 10s to see its verdict"
            ))
        } else {
            e
        }
    })?;
    match ctx.format {
        Format::Table => {
            emit(&format!("the kubelet at {} accepted {} (endpoint {})", kubelet.display(), a.resource, a.endpoint))
        }
        f => emit(&structured(
            f,
            &Report { accepted: true, kubelet_socket: kubelet.display().to_string(), request: &req },
        )?),
    }
}
