//! Pure decisions of the DRA shell about a driver's instances (the
//! kubelet's DRAPluginManager): a duplicate endpoint, and what a change in
//! connected instances means for the driver's slices.

use std::path::Path;

/// What a change in a driver's instances means for its slices (the kubelet's
/// DRAPluginManager.sync): wipe them later when no instance is connected and
/// no wipe is pending; cancel a pending wipe when one is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WipeDecision {
    Schedule,
    Cancel,
    Nothing,
}

/// dra_plugin_manager.go add(): an endpoint an instance of the driver
/// registered already (through another registration socket: the same socket
/// again replaces its instance) is refused with the kubelet's text.
pub(super) fn duplicate_endpoint<'a>(
    mut known: impl Iterator<Item = (&'a Path, &'a Path)>,
    socket: &Path,
    endpoint: &Path,
    driver: &str,
) -> Option<String> {
    known
        .any(|(s, e)| s != socket && e == endpoint)
        .then(|| format!("endpoint {} already registered for DRA driver plugin {driver}", endpoint.display()))
}

pub(super) fn wipe_decision(usable: bool, pending: bool) -> WipeDecision {
    match (usable, pending) {
        (true, true) => WipeDecision::Cancel,
        (false, false) => WipeDecision::Schedule,
        _ => WipeDecision::Nothing,
    }
}
