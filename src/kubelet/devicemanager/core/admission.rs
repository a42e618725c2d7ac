//! Why a pod is not admitted, typed: each error's `Display` is the kubelet's
//! own text and [`AdmissionError::reason`] the pod status reason it gives, so
//! nothing downstream classifies a rejection by matching its words.

use std::path::PathBuf;

/// The text of a topology admission failure (the kubelet's TopologyAffinityError).
pub const TOPOLOGY_ERROR: &str = "Resources cannot be allocated with Topology locality";

/// Why devicesToAllocate refused a container's devices (the kubelet's texts,
/// before the admit handler wraps them as unexpected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicesError {
    /// The container's request changed since its devices were allocated.
    ChangedRequest {
        /// Pod UID.
        uid: String,
        /// Container.
        container: String,
        /// Resource.
        resource: String,
        /// Devices allocated before.
        from: usize,
        /// Devices requested now.
        to: usize,
    },
    /// The resource has no registered plugin (`legacy`: the wording of kubelets before 1.27).
    Unregistered {
        /// Resource.
        resource: String,
        /// Kubelets up to 1.26 say "can't".
        legacy: bool,
    },
    /// The resource has no healthy device (kubelets since kubernetes#114640).
    NoHealthy {
        /// Resource.
        resource: String,
    },
    /// Devices allocated before are no longer healthy.
    NoLongerHealthy {
        /// Resource.
        resource: String,
    },
    /// Too few free healthy devices.
    Unavailable {
        /// Resource.
        resource: String,
        /// Devices still needed.
        requested: usize,
        /// Free healthy devices.
        available: usize,
    },
    /// Fewer devices were chosen than needed.
    Short {
        /// Devices required.
        requested: usize,
        /// Devices chosen.
        got: usize,
    },
}

impl std::fmt::Display for DevicesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DevicesError::ChangedRequest { uid, container, resource, from, to } => write!(
                f,
                "pod {uid:?} container {container:?} changed request for resource {resource:?} from {from} to {to}"
            ),
            DevicesError::Unregistered { resource, legacy: true } => {
                write!(f, "can't allocate unregistered device {resource}")
            }
            DevicesError::Unregistered { resource, legacy: false } => {
                write!(f, "cannot allocate unregistered device {resource}")
            }
            DevicesError::NoHealthy { resource } => {
                write!(f, "no healthy devices present; cannot allocate unhealthy devices {resource}")
            }
            DevicesError::NoLongerHealthy { resource } => write!(
                f,
                "previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
            ),
            DevicesError::Unavailable { resource, requested, available } => write!(
                f,
                "requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"
            ),
            DevicesError::Short { requested, got } => {
                write!(f, "unexpectedly allocated less resources than required. Requested: {requested}, Got: {got}")
            }
        }
    }
}

impl std::error::Error for DevicesError {}

/// What failed inside the device manager (the kubelet wraps it as unexpected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// devicesToAllocate refused.
    Devices(DevicesError),
    /// GetPreferredAllocation failed (its error).
    Preferred(String),
    /// Allocate failed (its error).
    Allocate(String),
    /// Allocate answered no container response.
    NoContainers,
    /// No plugin for the resource.
    UnknownPlugin(String),
    /// The resource's plugin endpoint has stopped.
    Stopped {
        /// Resource.
        resource: String,
        /// Its socket.
        socket: PathBuf,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Devices(e) => e.fmt(f),
            Cause::Preferred(e) => write!(f, "device plugin GetPreferredAllocation rpc failed with err: {e}"),
            Cause::Allocate(e) => f.write_str(e),
            Cause::NoContainers => f.write_str("no containers return in allocation response"),
            Cause::UnknownPlugin(r) => write!(f, "unknown Device Plugin {r}"),
            Cause::Stopped { resource, socket } => {
                write!(f, "endpoint {resource} ({}) has been stopped", socket.display())
            }
        }
    }
}

/// Why a pod was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionError {
    /// The device manager failed: "Allocate failed due to …, which is unexpected".
    Unexpected(Cause),
    /// The topology manager found no aligned placement.
    Topology,
    /// A resource the node does not have (the scheduler's resource fit).
    OutOf {
        /// Resource.
        resource: String,
        /// Devices requested.
        requested: usize,
    },
    /// The checkpoint could not be written: nothing was admitted.
    Checkpoint(String),
    /// Another manifest already describes the pod.
    Duplicate {
        /// `namespace/name`.
        pod: String,
        /// The other manifest.
        other: PathBuf,
    },
    /// The manifest file cannot be read.
    Manifest(std::sync::Arc<crate::kubelet::manifest::ManifestError>),
    /// The manifest cannot be taken or the engine cannot go on (the text says which).
    Invalid(String),
}

impl AdmissionError {
    /// The pod status reason the kubelet gives it: device-manager failures
    /// are `UnexpectedAdmissionError`, topology rejections
    /// `TopologyAffinityError`, resource-fit ones `OutOf<resource>`; a
    /// manifest dpctl could not read is `InvalidManifest`.
    pub fn reason(&self) -> String {
        match self {
            AdmissionError::Unexpected(_) | AdmissionError::Checkpoint(_) => "UnexpectedAdmissionError".into(),
            AdmissionError::Topology => "TopologyAffinityError".into(),
            AdmissionError::OutOf { resource, .. } => format!("OutOf{resource}"),
            AdmissionError::Duplicate { .. } | AdmissionError::Manifest(_) | AdmissionError::Invalid(_) => {
                "InvalidManifest".into()
            }
        }
    }
}

impl std::fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdmissionError::Unexpected(c) => write!(f, "Allocate failed due to {c}, which is unexpected"),
            AdmissionError::Topology => f.write_str(TOPOLOGY_ERROR),
            AdmissionError::OutOf { resource, requested } => {
                write!(f, "Node didn't have enough resource: {resource}, requested: {requested}, used: 0, capacity: 0")
            }
            AdmissionError::Checkpoint(e) => write!(f, "cannot write the checkpoint: {e}"),
            AdmissionError::Duplicate { pod, other } => {
                write!(f, "pod {pod} already exists (from {})", other.display())
            }
            AdmissionError::Manifest(e) => write!(f, "{e}"),
            AdmissionError::Invalid(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for AdmissionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AdmissionError::Unexpected(Cause::Devices(e)) => Some(e),
            AdmissionError::Manifest(e) => Some(&**e),
            _ => None,
        }
    }
}

impl From<DevicesError> for AdmissionError {
    fn from(e: DevicesError) -> Self {
        AdmissionError::Unexpected(Cause::Devices(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_and_reasons_are_the_kubelets() {
        let e: AdmissionError = DevicesError::NoHealthy { resource: "v.e/x".into() }.into();
        assert_eq!(
            e.to_string(),
            "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices v.e/x, which is unexpected"
        );
        assert_eq!(e.reason(), "UnexpectedAdmissionError");
        assert!(std::error::Error::source(&e).is_some());
        let e = AdmissionError::OutOf { resource: "v.e/x".into(), requested: 1 };
        assert_eq!(e.to_string(), "Node didn't have enough resource: v.e/x, requested: 1, used: 0, capacity: 0");
        assert_eq!(e.reason(), "OutOfv.e/x");
        assert_eq!(AdmissionError::Topology.reason(), "TopologyAffinityError");
        assert_eq!(AdmissionError::Invalid("bad yaml".into()).reason(), "InvalidManifest");
        assert_eq!(AdmissionError::Checkpoint("disk full".into()).reason(), "UnexpectedAdmissionError");
        let legacy = DevicesError::Unregistered { resource: "r".into(), legacy: true };
        assert_eq!(legacy.to_string(), "can't allocate unregistered device r");
    }
}
