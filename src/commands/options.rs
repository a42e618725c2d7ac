//! `dpctl options SOCKET`: GetDevicePluginOptions.

use super::Ctx;
use crate::cli::SocketArg;
use crate::core::Result;
use crate::render::{emit, structured, table, Format};

/// Run the command.
pub async fn run(ctx: &Ctx, a: &SocketArg) -> Result<()> {
    let conn = ctx.plugin(&a.socket).await?;
    let opts = conn.options().await?;
    match ctx.format {
        Format::Table => emit(&table(
            &["OPTION", "VALUE"],
            &[
                vec!["pre_start_required".to_string(), opts.pre_start_required.to_string()],
                vec![
                    "get_preferred_allocation_available".to_string(),
                    opts.get_preferred_allocation_available.to_string(),
                ],
            ],
        )),
        f => emit(&structured(f, &opts)?),
    }
}
