//! `dpctl prestart SOCKET ID...`: PreStartContainer.

use super::Ctx;
use crate::api::deviceplugin::PreStartContainerRequest;
use crate::cli::PrestartArgs;
use crate::core::time::format_duration;
use crate::core::validate::check_id_list;
use crate::core::Result;
use crate::render::{emit, structured, Format};

/// Run the command.
pub async fn run(ctx: &Ctx, a: &PrestartArgs) -> Result<()> {
    check_id_list("device IDs", &a.ids)?;
    let conn = ctx.plugin(&a.socket).await?;
    let start = std::time::Instant::now();
    let resp = conn.pre_start(PreStartContainerRequest { devices_ids: a.ids.clone() }, ctx.timeout).await?;
    let took = start.elapsed();
    match ctx.format {
        Format::Table => {
            emit(&format!("PreStartContainer({}) succeeded in {}", a.ids.join(","), format_duration(took)))
        }
        f => emit(&structured(f, &resp)?),
    }
}
