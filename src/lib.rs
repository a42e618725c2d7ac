//! dpctl: one toolkit for both sides of the Kubernetes device-plugin protocol.
//!
//! The library holds the protocol core ([`core`]: transport, the
//! `:authority` shim, validation, errors), the generated APIs ([`api`]), the
//! two protocol roles — the plugin side ([`plugin`]: server over a backend,
//! simulated and replayed backends, registration, live control, record tap)
//! and the kubelet side ([`kubelet`]: connection to a plugin, the device
//! manager, registration, PodResources, checkpoint, the mock kubelet) — plus
//! node inspection ([`doctor`]), the trace format ([`trace`]), benchmarks
//! ([`bench`]), output rendering ([`render`]), the shared part of the command
//! line ([`cli`]), environment, exit codes and completion scripts ([`help`]),
//! the conformance suite ([`suite`]), one module per subcommand, each
//! declaring its own surface ([`commands`]) and the build's
//! identity for `--version` ([`version`]). `main.rs` only parses, picks the
//! runtime and maps errors to exit codes.
#![deny(missing_docs)]

pub mod api;
pub mod bench;
pub mod cli;
pub mod client;
pub mod commands;
pub mod controlplane;
pub mod core;
pub mod doctor;
pub mod help;
pub mod kubelet;
pub mod plugin;
pub mod protocol;
pub mod render;
pub mod suite;
pub mod trace;
pub mod version;

#[cfg(test)]
mod layers;
