//! The data of a DRA-backed extended resource (KEP-5004, the
//! DRAExtendedResource gate): the special claim the scheduler creates for a
//! pod and the pod's `status.extendedResourceClaimStatus`. What is decided
//! about them is [`crate::kubelet::dra::extended`]'s.

use super::objects::ClaimSpec;
use serde::Serialize;

/// The implicit extended resource name of a DeviceClass is this prefix and
/// the class name (resourceapi.ResourceDeviceClassPrefix).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation that marks the special claim
/// (resourceapi.ExtendedResourceClaimAnnotation).
pub const CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// One entry of `requestMappings` (v1.ContainerExtendedResourceRequest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMapping {
    /// The container.
    pub container_name: String,
    /// The extended resource it asks for.
    pub resource_name: String,
    /// The request of the special claim that serves it.
    pub request_name: String,
}

/// `status.extendedResourceClaimStatus` (v1.PodExtendedResourceClaimStatus).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedResourceClaimStatus {
    /// Which container and resource each request serves.
    pub request_mappings: Vec<RequestMapping>,
    /// The special claim's name.
    pub resource_claim_name: String,
}

/// The special claim of one pod, as the scheduler would create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedClaim {
    /// `metadata.generateName`: `<pod>-extended-resources-`.
    pub generate_name: String,
    /// The pod's status field (its claim name is the generated one).
    pub status: ExtendedResourceClaimStatus,
    /// `spec`: one `exactly` request per (container, resource).
    pub spec: ClaimSpec,
    /// Resource → the DeviceClass serving it.
    pub classes: Vec<(String, String)>,
}
