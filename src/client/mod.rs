//! Talking to a plugin as the kubelet does: the client side of each plugin
//! kind, used by the client commands, `doctor` and the tests.

pub mod dra;
