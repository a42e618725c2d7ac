//! `dpctl register`: send one RegisterRequest to a kubelet and report its
//! answer verbatim. The request is sent as given (so a kubelet's validation
//! can be tested); a name the kubelet will reject gets a warning first.

use super::Ctx;
use crate::api::deviceplugin::{registration_client::RegistrationClient, DevicePluginOptions, RegisterRequest};
use crate::cli::RegisterArgs;
use crate::core::transport::{call, dial, request};
use crate::core::validate::resource_name_problem;
use crate::core::Result;
use crate::render::{emit, structured, Format};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    accepted: bool,
    kubelet_socket: String,
    request: &'a RegisterRequest,
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
    let mut client = RegistrationClient::new(dial(&kubelet, ctx.timeout).await?);
    call(&kubelet, "Register", ctx.timeout, client.register(request(req.clone(), ctx.timeout))).await?;
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
