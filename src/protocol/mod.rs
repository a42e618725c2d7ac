//! The rulebook: each protocol rule once, as data (id, what it checks,
//! severity, fix, upstream source) with a pure check beside it, consulted by
//! the mock kubelet, the client commands (`probe`, `preferred`), the
//! simulated plugins (`serve`'s own configuration), `dpctl test` and `doctor`.

pub mod rules;
