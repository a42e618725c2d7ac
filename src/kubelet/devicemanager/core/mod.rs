//! The kubelet's device manager as a synchronous core: plain data in, a
//! decision out. [`state`] keeps registrations, devices, allocations and
//! pods; [`topology`] computes hints and merges them under a policy;
//! [`allocate`] plans a pod's admission as steps the async shell
//! ([`crate::kubelet::devicemanager::shell`]) carries out; [`view`] is what `dpctl node`,
//! metrics and PodResources read. Nothing here awaits, sleeps or does I/O.
pub mod admission;
pub mod allocate;
pub mod state;
pub mod topology;
pub mod view;

pub use admission::{AdmissionError, Cause, DevicesError};
pub use allocate::{Admitted, Answer, PodAdmission, Step};
pub use state::{AllocKey, Allocation, Dev, EndpointInfo, PodRecord, State};
pub use topology::TopologyPolicy;
pub use view::{ContainerStatus, Histogram, PodStatus, ResourceStatus, BUCKETS};

#[cfg(test)]
pub(crate) mod testutil;
