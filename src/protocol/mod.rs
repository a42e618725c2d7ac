//! The rulebook: each protocol rule once, as data (id, what it checks,
//! severity, fix, upstream source) with a pure check beside it, consulted by
//! the mock kubelet, the client commands (`probe`, `preferred`), the
//! simulated plugins (`serve`'s own configuration), `dpctl test` and `doctor`.
//! [`rules`] holds the device-plugin rules, [`dra`] the DRA kubelet-plugin rules.

pub mod dra;
pub mod rules;
