//! The rulebook: each protocol rule once, as data (id, what it checks,
//! severity, fix, upstream source) with a pure check beside it, consulted by
//! the client commands (`probe`), the simulated plugins (`serve`'s own
//! configuration) and `doctor`.

pub mod dra;
