//! `dpctl dra info SOCKET`: GetInfo on a DRA plugin's registration socket.

use super::{Ctx, DraSocket};
use crate::client::dra::{resolve, DraConn};
use crate::core::{Error, Result};
use crate::render::{emit, structured, table, Format};

pub(super) const EXAMPLES: &str = "Examples:
  dpctl dra info gpu.example.com-reg.sock
  dpctl dra info /var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock -o json";

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraSocket) -> Result<()> {
    let path = resolve(&ctx.paths, &a.socket);
    let conn = DraConn::connect(&path, ctx.timeout).await?;
    let info = match conn.info().await {
        Err(e) if e.code() == Some(tonic::Code::Unimplemented) => {
            return Err(Error::failed(format!(
                "{}: not a registration socket (no GetInfo); it may be the service socket — try dpctl dra probe",
                path.display()
            )))
        }
        r => r?,
    };
    match ctx.format {
        Format::Table => emit(&table(
            &["TYPE", "NAME", "ENDPOINT", "SUPPORTED VERSIONS"],
            &[vec![info.r#type.clone(), info.name.clone(), info.endpoint.clone(), info.supported_versions.join(",")]],
        )),
        f => emit(&structured(f, &info)?),
    }
}
