//! The kubelet's device manager (pkg/kubelet/cm/devicemanager), in two
//! parts of one shape with the DRA manager's ([`crate::kubelet::dra`]): a
//! sans-IO [`core`] (registrations, devices, allocations, topology, the
//! admission plan, the views — plain data in, a decision out) and the async
//! [`shell`] that carries its decisions out (RPCs, timers, the checkpoint,
//! the events). The shell imports the core; the core knows no shell.
pub mod core;
pub mod shell;
