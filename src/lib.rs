//! dpctl: one toolkit for both sides of the Kubernetes device-plugin protocol.
pub mod api;
pub mod core;
