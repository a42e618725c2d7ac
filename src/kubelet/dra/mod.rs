//! The engine's DRA manager (pkg/kubelet/cm/dra), in two parts of one shape
//! with the device manager's ([`crate::kubelet::devicemanager`]): a sans-IO
//! [`core`] (the plugin registry, the DRA objects and candidates, the claim
//! cache and its plans, the health cache, taint eviction, the views — plain
//! data in, a decision out) and the async [`shell`] ([`shell::DraManager`])
//! that carries its decisions out (driver calls, the health streams, the
//! checkpoint and health files, the claims written into the control plane,
//! the events). The shell imports the core; the core knows no shell. The
//! scheduler's part (allocating a claim) is [`crate::controlplane::allocator`]'s.
pub mod core;
pub mod shell;
