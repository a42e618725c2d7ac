//! The kubelet's device-manager checkpoint, `kubelet_internal_checkpoint` in
//! the plugin directory: read both layouts (current: `DeviceIDs` keyed by
//! NUMA node; old: a flat list), write the current one atomically (temp file,
//! fsync, rename). The kubelet's checksum is Go-specific (a hash of Go's
//! printing of the structure); dpctl writes an FNV-32a of the `Data` JSON
//! and, on reading, only reports a checksum it cannot confirm.

use crate::api::deviceplugin::ContainerAllocateResponse;
use crate::core::{Error, Result};
use base64::Engine;
use prost::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One allocation: a container's devices of one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodDeviceEntry {
    /// Pod UID.
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    /// Container name.
    #[serde(rename = "ContainerName")]
    pub container_name: String,
    /// Resource name.
    #[serde(rename = "ResourceName")]
    pub resource_name: String,
    /// Device IDs by NUMA node (`-1`: none).
    #[serde(rename = "DeviceIDs", deserialize_with = "device_ids")]
    pub device_ids: BTreeMap<String, Vec<String>>,
    /// The plugin's ContainerAllocateResponse, protobuf, base64.
    #[serde(rename = "AllocResp", default)]
    pub alloc_resp: String,
}

/// Accept both layouts of DeviceIDs: `{"0": [...]}` and the old `[...]`.
fn device_ids<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<BTreeMap<String, Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Ids {
        ByNuma(BTreeMap<String, Vec<String>>),
        Flat(Vec<String>),
        Null(()),
    }
    Ok(match Ids::deserialize(d)? {
        Ids::ByNuma(m) => m,
        Ids::Flat(v) => [("-1".to_string(), v)].into_iter().collect(),
        Ids::Null(()) => BTreeMap::new(),
    })
}

impl PodDeviceEntry {
    /// All device IDs, in NUMA order, each once (a device on several NUMA nodes is listed under each).
    pub fn ids(&self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        self.device_ids.values().flatten().filter(|i| seen.insert(i.as_str())).cloned().collect()
    }

    /// Decode AllocResp.
    pub fn decode_alloc_resp(&self) -> std::result::Result<ContainerAllocateResponse, String> {
        if self.alloc_resp.is_empty() {
            return Ok(ContainerAllocateResponse::default());
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.alloc_resp.trim())
            .map_err(|e| format!("AllocResp is not base64: {e}"))?;
        ContainerAllocateResponse::decode(bytes.as_slice())
            .map_err(|e| format!("AllocResp is not a ContainerAllocateResponse: {e}"))
    }

    /// Encode a response into AllocResp.
    pub fn encode_alloc_resp(r: &ContainerAllocateResponse) -> String {
        base64::engine::general_purpose::STANDARD.encode(r.encode_to_vec())
    }
}

/// The checkpoint's `Data`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Data {
    /// Allocations.
    #[serde(rename = "PodDeviceEntries", default, deserialize_with = "null_vec")]
    pub pod_device_entries: Vec<PodDeviceEntry>,
    /// Registered resources and their device IDs.
    #[serde(rename = "RegisteredDevices", default, deserialize_with = "null_map")]
    pub registered_devices: BTreeMap<String, Vec<String>>,
}

fn null_vec<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<PodDeviceEntry>, D::Error> {
    Ok(Option::<Vec<PodDeviceEntry>>::deserialize(d)?.unwrap_or_default())
}

fn null_map<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<BTreeMap<String, Vec<String>>, D::Error> {
    let m = Option::<BTreeMap<String, Option<Vec<String>>>>::deserialize(d)?.unwrap_or_default();
    Ok(m.into_iter().map(|(k, v)| (k, v.unwrap_or_default())).collect())
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The content.
    #[serde(rename = "Data")]
    pub data: Data,
    /// A checksum of `Data`.
    #[serde(rename = "Checksum", default)]
    pub checksum: u64,
}

/// FNV-32a, dpctl's checksum of the Data JSON.
fn fnv32a(bytes: &[u8]) -> u64 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u64::from(h)
}

/// What reading a checkpoint found.
#[derive(Debug)]
pub struct Loaded {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Whether the checksum is dpctl's and matches (false for a real kubelet's file).
    pub checksum_ours: bool,
}

/// Parse checkpoint text; errors say what is wrong with the file.
pub fn parse(text: &str, path: &Path) -> Result<Loaded> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::failed(format!("{}: corrupt checkpoint: not JSON ({e})", path.display())))?;
    if value.get("Data").is_none() {
        return Err(Error::failed(format!(
            "{}: not a device-manager checkpoint: no \"Data\" object (is this the right file?)",
            path.display()
        )));
    }
    let checkpoint: Checkpoint = serde_json::from_value(value)
        .map_err(|e| Error::failed(format!("{}: corrupt checkpoint: {e}", path.display())))?;
    let checksum_ours =
        serde_json::to_vec(&checkpoint.data).map(|b| fnv32a(&b) == checkpoint.checksum).unwrap_or(false);
    Ok(Loaded { checkpoint, checksum_ours })
}

/// Read a checkpoint file (never modifies it). `Ok(None)` if there is none.
pub fn read(path: &Path) -> Result<Option<Loaded>> {
    match crate::core::limits::read_file(path, crate::core::limits::MAX_CHECKPOINT_FILE, "checkpoint") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, "cannot read checkpoint", &e)),
        Ok(text) => parse(&text, path).map(Some),
    }
}

/// Write a checkpoint atomically: a temp file in the same directory, fsync, rename.
pub fn write(path: &Path, data: &Data) -> Result<()> {
    let body = serde_json::to_vec(data).map_err(|e| Error::failed(format!("cannot encode checkpoint: {e}")))?;
    let cp = Checkpoint { data: data.clone(), checksum: fnv32a(&body) };
    let text = serde_json::to_vec(&cp).map_err(|e| Error::failed(format!("cannot encode checkpoint: {e}")))?;
    crate::core::files::write_atomic(path, &text).map_err(|e| Error::io(path, "cannot write checkpoint", &e))
}

/// Move a corrupt checkpoint aside (`<name>.corrupt-<unix time>`); returns the new path.
pub fn set_aside(path: &Path) -> Result<PathBuf> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("checkpoint");
    // Never rename over a file that is already there.
    let mut to = path.with_file_name(format!("{name}.corrupt-{stamp}"));
    let mut n = 1;
    while std::fs::symlink_metadata(&to).is_ok() {
        to = path.with_file_name(format!("{name}.corrupt-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(path, &to).map_err(|e| Error::io(path, "cannot set the corrupt checkpoint aside", &e))?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_layouts_and_round_trips() {
        let resp = ContainerAllocateResponse {
            envs: [("A".to_string(), "b".to_string())].into_iter().collect(),
            ..Default::default()
        };
        let b64 = PodDeviceEntry::encode_alloc_resp(&resp);
        let current = format!(
            r#"{{"Data":{{"PodDeviceEntries":[{{"PodUID":"u1","ContainerName":"c","ResourceName":"v.e/foo","DeviceIDs":{{"0":["foo-0"],"1":["foo-3"]}},"AllocResp":"{b64}"}}],"RegisteredDevices":{{"v.e/foo":["foo-0","foo-3"]}}}},"Checksum":12345}}"#
        );
        let l = parse(&current, Path::new("cp")).unwrap();
        assert!(!l.checksum_ours, "a foreign checksum is not ours");
        let e = &l.checkpoint.data.pod_device_entries[0];
        assert_eq!(e.ids(), ["foo-0", "foo-3"]);
        assert_eq!(e.decode_alloc_resp().unwrap().envs["A"], "b");

        let old = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u1","ContainerName":"c","ResourceName":"v.e/foo","DeviceIDs":["a","b"],"AllocResp":""}],"RegisteredDevices":{"v.e/foo":null}},"Checksum":1}"#;
        let l = parse(old, Path::new("cp")).unwrap();
        assert_eq!(l.checkpoint.data.pod_device_entries[0].device_ids["-1"], ["a", "b"]);
        assert!(l.checkpoint.data.registered_devices["v.e/foo"].is_empty());

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kubelet_internal_checkpoint");
        write(&p, &l.checkpoint.data).unwrap();
        let back = read(&p).unwrap().unwrap();
        assert!(back.checksum_ours);
        assert_eq!(back.checkpoint.data, l.checkpoint.data);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
    }

    #[test]
    fn corrupt_files_are_errors() {
        for (text, want) in
            [("{", "not JSON"), ("{\"x\":1}", "no \"Data\""), ("{\"Data\":{\"PodDeviceEntries\":7}}", "corrupt")]
        {
            let e = parse(text, Path::new("cp")).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        std::fs::write(&p, "garbage").unwrap();
        let to = set_aside(&p).unwrap();
        assert!(!p.exists() && to.exists());
    }
}
