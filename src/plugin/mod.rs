//! The plugin side of the protocol: a DevicePlugin server over a backend,
//! the simulated backend of `dpctl serve`, registration and restart handling,
//! and live control.
pub mod config;
pub mod control;
pub mod devices;
pub mod dra;
pub mod policy;
pub mod registrar;
pub mod replay;
pub mod run;
pub mod server;
pub mod simulated;
pub mod tap;
