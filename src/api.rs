//! Generated protocol modules, one per API (two of them define a service
//! called `Registration`), and the protojson helpers their serde derives use;
//! [`k8s`], the Kubernetes API types of `proto/k8s/` with Kubernetes' JSON.

pub mod k8s;
mod k8s_inline;

/// `deviceplugin/v1beta1` (proto package `v1beta1`): the kubelet's
/// `Registration` service and the plugin's `DevicePlugin` service.
#[allow(missing_docs, clippy::all)]
pub mod deviceplugin {
    tonic::include_proto!("v1beta1");
}

/// `pluginregistration/v1` (proto package `pluginregistration`): the plugin
/// watcher's `Registration` service, served by a plugin.
#[allow(missing_docs, clippy::all)]
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");
}

/// `podresources/v1` (proto package `v1`): the kubelet's PodResources API.
#[allow(missing_docs, clippy::all)]
pub mod podresources {
    tonic::include_proto!("v1");
}

/// `dra/v1` (proto package `k8s.io.kubelet.pkg.apis.dra.v1`): the DRA
/// kubelet plugin's `DRAPlugin` service (NodePrepareResources,
/// NodeUnprepareResources).
#[allow(missing_docs, clippy::all)]
pub mod dra_v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}

/// `dra/v1beta1` (proto package `k8s.io.kubelet.pkg.apis.dra.v1beta1`):
/// the same messages as [`dra_v1`], deprecated since Kubernetes 1.34.
#[allow(missing_docs, clippy::all)]
pub mod dra_v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}

/// `dra-health/v1alpha1` (proto package `v1alpha1`): the DRA plugin's
/// `DRAResourceHealth` service (NodeWatchResources).
#[allow(missing_docs, clippy::all)]
pub mod dra_health_v1alpha1 {
    tonic::include_proto!("v1alpha1");
}

/// `pods/v1alpha1` (proto package `v1alpha1`, shared with dra-health
/// v1alpha1, so prost generates both into one module): the kubelet's pods
/// API (KEP-4188), re-exported here under its own name.
pub mod pods_v1alpha1 {
    pub use super::dra_health_v1alpha1::{
        pods_client, pods_server, EventType, GetPodRequest, GetPodResponse, ListPodsRequest, ListPodsResponse,
        WatchPodsEvent, WatchPodsRequest,
    };
}

/// `dra-health/v1` (proto package `v1`, shared with PodResources, so prost
/// generates both into one module): the DRA plugin's `DRAResourceHealth`
/// service, re-exported here under its own name.
pub mod dra_health_v1 {
    pub use super::podresources::{
        dra_resource_health_client, dra_resource_health_server, DeviceHealth, DeviceIdentifier, HealthStatus,
        NodeWatchResourcesRequest, NodeWatchResourcesResponse,
    };
}

/// The device-plugin API version this tool speaks (the only one the kubelet supports).
pub const VERSION: &str = "v1beta1";
/// The only health string the kubelet counts as healthy.
pub const HEALTHY: &str = "Healthy";
/// The health string for a device that must not be allocated.
pub const UNHEALTHY: &str = "Unhealthy";
/// The kubelet's gRPC receive limit (the gRPC default): a larger ListAndWatch
/// snapshot fails the stream.
pub const KUBELET_MAX_RECV: usize = 4 * 1024 * 1024;

/// protojson encodings that serde's defaults do not give: 64-bit integers are
/// JSON strings (numbers are accepted on input too).
pub mod pj {
    use serde::de::{self, Deserializer};
    use serde::ser::Serializer;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IntOrString {
        Int(i128),
        Str(String),
    }

    fn parse<T: TryFrom<i128>>(v: IntOrString) -> Result<T, String> {
        let n: i128 = match v {
            IntOrString::Int(n) => n,
            IntOrString::Str(s) => s.trim().parse().map_err(|_| format!("not an integer: {s:?}"))?,
        };
        T::try_from(n).map_err(|_| format!("integer out of range: {n}"))
    }

    /// `int64` as a JSON string.
    pub mod int64 {
        use super::*;
        /// Serialize as a decimal string.
        pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(v)
        }
        /// Accept a string or a number.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
            parse(IntOrString::deserialize(d)?).map_err(de::Error::custom)
        }
    }

    /// `uint64` as a JSON string.
    pub mod uint64 {
        use super::*;
        /// Serialize as a decimal string.
        pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(v)
        }
        /// Accept a string or a number.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
            parse(IntOrString::deserialize(d)?).map_err(de::Error::custom)
        }
    }

    /// `repeated int64` as a list of JSON strings.
    pub mod int64_list {
        use super::*;
        use serde::ser::SerializeSeq;
        /// Serialize each element as a decimal string.
        pub fn serialize<S: Serializer>(v: &[i64], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(v.len()))?;
            for n in v {
                seq.serialize_element(&n.to_string())?;
            }
            seq.end()
        }
        /// Accept strings or numbers.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
            Vec::<IntOrString>::deserialize(d)?.into_iter().map(|v| parse(v).map_err(de::Error::custom)).collect()
        }
    }
}
