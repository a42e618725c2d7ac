//! Talking to a plugin or a kubelet, for every role: the kubelet engine,
//! `record`'s tap, `replay --against` and the client commands dial a
//! DevicePlugin through [`conn`]; [`podresources`] and [`status`] read a
//! kubelet's PodResources and the mock kubelet's status socket; [`view`] is
//! the kubelet's view of a resource as `record` captures it; [`checkpoint`]
//! is the device manager's checkpoint file, which the engine writes and
//! doctor, `checkpoint` and `record` read; [`dra_checkpoint`] is the DRA
//! manager's, which the engine writes and doctor reads. [`dra`] is the kubelet's side of a
//! DRA kubelet plugin (GetInfo, prepare/unprepare, the health stream), used
//! by `dpctl dra`, `doctor` and the simulated driver's conversions.
pub mod checkpoint;
pub mod conn;
pub mod dra;
pub mod dra_checkpoint;
pub mod kube;
pub mod podresources;
pub mod pods;
pub mod status;
pub mod view;

pub use conn::PluginConn;
