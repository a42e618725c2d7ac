//! The kubelet side of the protocol: the connection to a plugin, shared by
//! the client commands (and later the mock kubelet, record and replay).
pub mod conn;

pub use conn::PluginConn;
