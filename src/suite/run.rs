//! `dpctl test` for device plugins: the command line checked, the plugin's
//! isolation probed, then the catalog's scenarios run on the suite engine.

use super::catalog::SCENARIOS;
use super::engine::{self, Kind};
use super::env::{Isolation, Tree};
use super::Record;
use crate::core::{Error, Result};

pub use super::engine::{selected, Options, Progress};

/// Run the selected scenarios; `progress` sees each start and result.
pub async fn run(o: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Vec<Record>> {
    if o.plugin.is_empty() && o.socket.is_none() {
        return Err(Error::usage(
            "no plugin command; run dpctl test [FLAGS] -- PLUGIN-COMMAND [ARGS…], or pass --socket",
        ));
    }
    let mut isolation = Isolation::None;
    if o.isolate && o.socket.is_none() {
        let probe_tree = Tree::new()?;
        isolation = super::env::probe_isolation(&probe_tree).await?;
    }
    engine::run(Kind::DevicePlugin(isolation), SCENARIOS, o, progress).await
}
