//! The control plane: the local API server, the scheduler's allocator and
//! the controllers watching the store (resourceclaim, device-taint
//! eviction), with the resource.k8s.io objects they read. Nothing here
//! imports the kubelet.

pub mod allocator;
pub mod apiserver;
pub mod cel;
pub mod client;
pub mod controller;
pub mod extended;
pub mod nodealloc;
pub mod objects;
pub mod protobuf;
pub mod scheduler;
