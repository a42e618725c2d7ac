//! What several commands share and no single command owns: the CDI check of
//! an allocation or a prepare answer, and the arguments that pick a running
//! `dpctl serve` / `dpctl dra serve` for live control.

pub mod cdi;
pub mod control;
