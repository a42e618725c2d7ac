//! The Kubernetes messages Go embeds in their parent's JSON (`json:",inline"`):
//! a field of one of these types holds the parent object's own fields
//! (resource.k8s.io's DeviceConfiguration in claim, allocation and class
//! configs; core/v1's VolumeSource in Volume, LocalObjectReference in a
//! ConfigMap volume). One list for build.rs (the generated types flatten
//! these fields) and the protobuf codec (src/controlplane/protobuf.rs).

/// Their full proto names.
pub const INLINE: &[&str] = &[
    ".k8s.io.api.resource.v1.DeviceConfiguration",
    ".k8s.io.api.core.v1.VolumeSource",
    ".k8s.io.api.core.v1.LocalObjectReference",
];
