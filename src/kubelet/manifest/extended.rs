//! The data of a DRA-backed extended resource (KEP-5004, the
//! DRAExtendedResource gate): the special claim the scheduler creates for a
//! pod and the pod's `status.extendedResourceClaimStatus`, as the control
//! plane's scheduler part decides them ([`crate::controlplane::extended`]).

pub use crate::controlplane::extended::{
    ExtendedClaim, ExtendedResourceClaimStatus, RequestMapping, CLAIM_ANNOTATION, DEVICE_CLASS_PREFIX,
};
