//! The kubelet side of the protocol: the connection to a plugin, shared by
//! the client commands (and later the mock kubelet, record and replay).
pub mod against;
pub mod checkpoint;
pub mod conn;
pub mod devicemanager;
pub mod generation;
pub mod manifest;
pub mod metrics;
pub mod mock;
pub mod podresources;
pub mod profile;
pub mod registration;
pub mod reproduce;
pub mod shell;
pub mod view;
pub mod watcher;

pub use conn::PluginConn;
