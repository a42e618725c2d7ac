//! The kubelet's DRA checkpoint, `<root-dir>/dra_manager_state`, in the
//! format of pkg/kubelet/cm/dra/checkpoint (kubelet ≥ 1.32):
//! `{"Data":"<JSON>","Checksum":<crc32 IEEE of Data>}` where Data is
//! `{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","Entries":[ClaimInfoState…]}`
//! and each entry carries ClaimUID, ClaimName, Namespace, PodUIDs (a Go set:
//! `{"uid":{}}`) and DriverState (driver → Devices: PoolName, DeviceName,
//! RequestNames, CDIDeviceIDs).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file name under the kubelet root.
pub const NAME: &str = "dra_manager_state";
/// Data.kind.
pub const KIND: &str = "DRACheckpoint";
/// Data.apiVersion.
pub const API_VERSION: &str = "checkpoint.dra.kubelet.k8s.io/v1";

/// One device of a prepared claim, as the driver reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Device {
    /// PoolName.
    #[serde(rename = "PoolName")]
    pub pool_name: String,
    /// DeviceName.
    #[serde(rename = "DeviceName")]
    pub device_name: String,
    /// RequestNames.
    #[serde(rename = "RequestNames", default)]
    pub request_names: Option<Vec<String>>,
    /// CDIDeviceIDs.
    #[serde(rename = "CDIDeviceIDs", default)]
    pub cdi_device_ids: Option<Vec<String>>,
    /// ShareID (consumable capacity), when set.
    #[serde(rename = "ShareID", default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
}

/// A driver's part of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DriverState {
    /// Devices.
    #[serde(rename = "Devices", default)]
    pub devices: Option<Vec<Device>>,
    /// The node operations every allocated device of this driver skips
    /// (KEP-5945; kept so a restarted kubelet still skips them). dpctl's
    /// name for it: upstream's field is not published yet.
    #[serde(rename = "SkipNodeOperations", default, skip_serializing_if = "Option::is_none")]
    pub skip_node_operations: Option<Vec<String>>,
}

/// One claim (ClaimInfoState).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Entry {
    /// ClaimUID.
    #[serde(rename = "ClaimUID")]
    pub claim_uid: String,
    /// ClaimName.
    #[serde(rename = "ClaimName")]
    pub claim_name: String,
    /// Namespace.
    #[serde(rename = "Namespace")]
    pub namespace: String,
    /// PodUIDs (a Go set: uid → {}).
    #[serde(rename = "PodUIDs", default)]
    pub pod_uids: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// DriverState.
    #[serde(rename = "DriverState", default)]
    pub driver_state: BTreeMap<String, DriverState>,
}

#[derive(Serialize, Deserialize)]
struct Data {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    #[serde(rename = "Entries", default)]
    entries: Option<Vec<Entry>>,
}

#[derive(Serialize, Deserialize)]
struct Outer {
    #[serde(rename = "Data")]
    data: String,
    #[serde(rename = "Checksum")]
    checksum: u32,
}

/// CRC-32 (IEEE), as Go's hash/crc32.ChecksumIEEE.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// The file's bytes for `entries`.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let data = Data { kind: KIND.into(), api_version: API_VERSION.into(), entries: Some(entries.to_vec()) };
    let data = serde_json::to_string(&data).unwrap_or_default();
    let checksum = crc32(data.as_bytes());
    serde_json::to_vec(&Outer { data, checksum }).unwrap_or_default()
}

/// Parse the file, checking its checksum, kind and apiVersion (the kubelet
/// refuses to start on a corrupt checkpoint; the caller reports it).
pub fn decode(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let outer: Outer = serde_json::from_slice(bytes).map_err(|e| format!("not a DRA checkpoint: {e}"))?;
    let want = crc32(outer.data.as_bytes());
    if want != outer.checksum {
        return Err(format!("checkpoint is corrupted: checksum {} but Data sums to {want}", outer.checksum));
    }
    let data: Data = serde_json::from_str(&outer.data).map_err(|e| format!("Data is not a DRACheckpoint: {e}"))?;
    if data.kind != KIND || data.api_version != API_VERSION {
        return Err(format!("kind {:?} apiVersion {:?}: not a {KIND} {API_VERSION}", data.kind, data.api_version));
    }
    Ok(data.entries.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_ieee() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn round_trips_and_reads_as_the_kubelet_writes_it() {
        let e = Entry {
            claim_uid: "u1".into(),
            claim_name: "gpu".into(),
            namespace: "ml".into(),
            pod_uids: [("p1".to_string(), Default::default())].into(),
            driver_state: [(
                "gpu.example.com".to_string(),
                DriverState {
                    devices: Some(vec![Device {
                        pool_name: "node-1".into(),
                        device_name: "gpu-0".into(),
                        request_names: Some(vec!["r".into()]),
                        cdi_device_ids: Some(vec!["k8s.gpu.example.com/claim=u1-gpu-0".into()]),
                        share_id: None,
                    }]),
                    skip_node_operations: None,
                },
            )]
            .into(),
        };
        let bytes = encode(std::slice::from_ref(&e));
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains(r#"\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\""#),
            "{text}"
        );
        assert!(text.contains(r#"\"PodUIDs\":{\"p1\":{}}"#), "{text}");
        assert_eq!(decode(&bytes).unwrap(), vec![e]);
        // A checkpoint as a 1.34 kubelet writes it (nil slices as null).
        let data = r#"{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","Entries":[{"ClaimUID":"x","ClaimName":"c","Namespace":"default","PodUIDs":{"p":{}},"DriverState":{"d.x":{"Devices":[{"PoolName":"p","DeviceName":"d","RequestNames":null,"CDIDeviceIDs":null}]}}}]}"#;
        let file = serde_json::json!({"Data": data, "Checksum": crc32(data.as_bytes())}).to_string();
        let got = decode(file.as_bytes()).unwrap();
        assert_eq!(got[0].driver_state["d.x"].devices.as_ref().unwrap()[0].device_name, "d");
        let bad = file.replace("DeviceName\\\":\\\"d\\\"", "DeviceName\\\":\\\"e\\\"");
        assert_ne!(bad, file);
        assert!(decode(bad.as_bytes()).unwrap_err().contains("corrupted"));
        let other = r#"{"kind":"Other","apiVersion":"v9"}"#;
        let file = serde_json::json!({"Data": other, "Checksum": crc32(other.as_bytes())}).to_string();
        assert!(decode(file.as_bytes()).unwrap_err().contains("not a DRACheckpoint"));
    }
}
