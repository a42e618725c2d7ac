//! dpctl: one toolkit for both sides of the Kubernetes device-plugin protocol.
//!
//! The library holds the protocol core ([`core`]), the generated APIs
//! ([`api`]), the kubelet-side connection to a plugin ([`kubelet`]), output
//! rendering ([`render`]), the command line ([`cli`]) and one module per
//! subcommand ([`commands`]). `main.rs` only parses and maps exit codes.
#![deny(missing_docs)]

pub mod api;
pub mod bench;
pub mod cli;
pub mod commands;
pub mod core;
pub mod doctor;
pub mod kubelet;
pub mod plugin;
pub mod render;
pub mod trace;
