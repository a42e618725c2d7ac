//! The kubelet's device-manager checkpoint, `kubelet_internal_checkpoint` in
//! the plugin directory: read both layouts (current: `DeviceIDs` keyed by
//! NUMA node; old: a flat list), write the current one atomically (temp file,
//! fsync, rename), byte for byte as the kubelet writes it: Go's
//! `encoding/json` of the structure and the kubelet's checksum, FNV-32a over
//! go-spew's `%#v` printing of `Data` (`k8s.io/kubernetes`
//! `pkg/kubelet/checkpointmanager/checksum`, `k8s.io/utils/dump.ForHash`), so
//! a kubelet reads dpctl's file and dpctl confirms a kubelet's
//! (`tests/e2e/devicemanager_diff.rs` holds both to upstream's code).

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

/// Why an entry's AllocResp cannot be decoded.
#[derive(Debug)]
pub enum AllocRespError {
    /// Not base64.
    Base64(base64::DecodeError),
    /// Not a ContainerAllocateResponse.
    Protobuf(prost::DecodeError),
}

impl std::fmt::Display for AllocRespError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocRespError::Base64(e) => write!(f, "AllocResp is not base64: {e}"),
            AllocRespError::Protobuf(e) => write!(f, "AllocResp is not a ContainerAllocateResponse: {e}"),
        }
    }
}

impl std::error::Error for AllocRespError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AllocRespError::Base64(e) => Some(e),
            AllocRespError::Protobuf(e) => Some(e),
        }
    }
}

impl PodDeviceEntry {
    /// All device IDs, in NUMA order, each once (a device on several NUMA nodes is listed under each).
    pub fn ids(&self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        self.device_ids.values().flatten().filter(|i| seen.insert(i.as_str())).cloned().collect()
    }

    /// Decode AllocResp.
    pub fn decode_alloc_resp(&self) -> std::result::Result<ContainerAllocateResponse, AllocRespError> {
        if self.alloc_resp.is_empty() {
            return Ok(ContainerAllocateResponse::default());
        }
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(self.alloc_resp.trim()).map_err(AllocRespError::Base64)?;
        ContainerAllocateResponse::decode(bytes.as_slice()).map_err(AllocRespError::Protobuf)
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

/// FNV-32a.
fn fnv32a(bytes: &[u8]) -> u64 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u64::from(h)
}

/// The kubelet's checksum of `Data`: FNV-32a of `dump.ForHash(data)`, go-spew's
/// `%#v` with sorted map keys (`checksum.New(cp.Data)` in
/// `pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go`, `MarshalCheckpoint`).
/// `DeviceIDs` keys are int64 there, so they sort as numbers; no entries is
/// Go's nil slice (`<nil>`), as `toCheckpointData` leaves it.
pub fn kubelet_checksum(data: &Data) -> u64 {
    fnv32a(spew(data).as_bytes())
}

/// go-spew's `%#v` of the kubelet's `checkpointData` (only struct fields
/// carry their type; slice elements and map entries do not).
fn spew(data: &Data) -> String {
    use std::fmt::Write;
    let list = |out: &mut String, ids: &[String]| {
        out.push('[');
        out.push_str(&ids.join(" "));
        out.push(']');
    };
    let mut out = String::from("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)");
    if data.pod_device_entries.is_empty() {
        out.push_str("<nil>");
    } else {
        out.push('[');
        for (i, e) in data.pod_device_entries.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let _ = write!(
                out,
                "{{PodUID:(string){} ContainerName:(string){} ResourceName:(string){} DeviceIDs:(checkpoint.DevicesPerNUMA)map[",
                e.pod_uid, e.container_name, e.resource_name
            );
            let mut numa: Vec<(&String, &Vec<String>)> = e.device_ids.iter().collect();
            numa.sort_by_key(|(k, _)| k.parse::<i64>().unwrap_or(i64::MAX));
            for (j, (k, ids)) in numa.into_iter().enumerate() {
                if j > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                list(&mut out, ids);
            }
            out.push_str("] AllocResp:([]uint8)[");
            let bytes = base64::engine::general_purpose::STANDARD.decode(e.alloc_resp.trim()).unwrap_or_default();
            let bytes: Vec<String> = bytes.iter().map(u8::to_string).collect();
            out.push_str(&bytes.join(" "));
            out.push_str("]}");
        }
        out.push(']');
    }
    out.push_str(" RegisteredDevices:(map[string][]string)map[");
    for (i, (k, ids)) in data.registered_devices.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push(':');
        list(&mut out, ids);
    }
    out.push_str("]}");
    out
}

/// Go's `encoding/json` escapes `<`, `>`, `&`, U+2028 and U+2029 inside
/// strings (HTML-safe by default); serde_json does not. They appear only
/// inside strings in JSON, so replacing them everywhere is exact.
fn go_json_escapes(json: Vec<u8>) -> Vec<u8> {
    let Ok(text) = String::from_utf8(json) else { return Vec::new() };
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .into_bytes()
}

/// What reading a checkpoint found.
#[derive(Debug)]
pub struct Loaded {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Whether the checksum matches: the kubelet's (as every kubelet and
    /// dpctl write it), or the FNV-32a of the `Data` JSON that dpctl wrote
    /// before it wrote the kubelet's.
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
    let legacy = serde_json::to_vec(&checkpoint.data).map(|b| fnv32a(&b) == checkpoint.checksum).unwrap_or(false);
    let checksum_ours = legacy || kubelet_checksum(&checkpoint.data) == checkpoint.checksum;
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

/// The checkpoint file's bytes for `data`, as the kubelet's `MarshalCheckpoint`
/// writes them: `{"Data":…,"Checksum":…}` in Go's JSON (no entries: `null`).
pub fn encode(data: &Data) -> Result<Vec<u8>> {
    #[derive(Serialize)]
    struct GoData<'a> {
        #[serde(rename = "PodDeviceEntries")]
        entries: Option<&'a [PodDeviceEntry]>,
        #[serde(rename = "RegisteredDevices")]
        registered: &'a BTreeMap<String, Vec<String>>,
    }
    #[derive(Serialize)]
    struct GoCheckpoint<'a> {
        #[serde(rename = "Data")]
        data: GoData<'a>,
        #[serde(rename = "Checksum")]
        checksum: u64,
    }
    let entries = (!data.pod_device_entries.is_empty()).then_some(data.pod_device_entries.as_slice());
    let cp = GoCheckpoint {
        data: GoData { entries, registered: &data.registered_devices },
        checksum: kubelet_checksum(data),
    };
    let text = serde_json::to_vec(&cp).map_err(|e| Error::failed(format!("cannot encode checkpoint: {e}")))?;
    Ok(go_json_escapes(text))
}

/// Write a checkpoint atomically: a temp file in the same directory, fsync, rename.
pub fn write(path: &Path, data: &Data) -> Result<()> {
    let text = encode(data)?;
    // As the kubelet's checkpoint manager writes it (the file synced, not its directory).
    crate::core::files::write_atomic_with(path, &text, crate::core::files::Durability::File)
        .map_err(|e| Error::io(path, "cannot write checkpoint", &e))
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

    /// Files written by upstream's `MarshalCheckpoint` (k8s.io/kubernetes
    /// v1.37.2 `pkg/kubelet/cm/devicemanager/checkpoint`): no entries (Go's
    /// nil slice); NUMA keys that sort differently as numbers and as strings
    /// and characters Go's JSON escapes; and a device manager's real file
    /// (`tests/upstream/cmd/devicemanager`, a pod with an init container).
    const UPSTREAM: &[&str] = &[
        r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"r.e/empty":[],"r.e/x":["b","a"]}},"Checksum":3443020707}"#,
        r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u\u003c1\u003e\u0026","ContainerName":"c","ResourceName":"r.e/x","DeviceIDs":{"-1":["dn"],"0":["d0"],"10":["d10"],"2":["d2","d2b"]},"AllocResp":""}],"RegisteredDevices":{"r.e/x":["d10","dn","d2","d2b","d0"]}},"Checksum":400262716}"#,
        r#"{"Data":{"PodDeviceEntries":[{"PodUID":"uid-a","ContainerName":"i0","ResourceName":"example.com/dev","DeviceIDs":{"0":["dev-0","dev-1"]},"AllocResp":"ChAKAUUSC2Rldi0wLGRldi0xEggKAi9jEgIvaBoWCgcvZGV2L2QwEgcvZGV2L2QwGgJydxoWCgcvZGV2L2QxEgcvZGV2L2QxGgJydyIQCgFhEgtkZXYtMCxkZXYtMSoXChVleGFtcGxlLmNvbS9kZXY9ZGV2LTAqFwoVZXhhbXBsZS5jb20vZGV2PWRldi0x"},{"PodUID":"uid-a","ContainerName":"c0","ResourceName":"example.com/dev","DeviceIDs":{"0":["dev-0"]},"AllocResp":"CgoKAUUSBWRldi0wEggKAi9jEgIvaBoWCgcvZGV2L2QwEgcvZGV2L2QwGgJydyIKCgFhEgVkZXYtMCoXChVleGFtcGxlLmNvbS9kZXY9ZGV2LTA="},{"PodUID":"uid-a","ContainerName":"c1","ResourceName":"example.com/dev","DeviceIDs":{"0":["dev-1"]},"AllocResp":"CgoKAUUSBWRldi0xEggKAi9jEgIvaBoWCgcvZGV2L2QxEgcvZGV2L2QxGgJydyIKCgFhEgVkZXYtMSoXChVleGFtcGxlLmNvbS9kZXY9ZGV2LTE="}],"RegisteredDevices":{"example.com/dev":["dev-2","dev-3","dev-0","dev-1"]}},"Checksum":1398373709}"#,
    ];

    #[test]
    fn a_kubelets_checkpoint_is_confirmed_and_written_back_byte_for_byte() {
        for text in UPSTREAM {
            let l = parse(text, Path::new("k")).unwrap();
            assert!(l.checksum_ours, "the kubelet's checksum confirmed: {text}");
            assert_eq!(String::from_utf8(encode(&l.checkpoint.data).unwrap()).unwrap(), *text);
        }
        // one flipped device ID: the checksum no longer matches
        let l = parse(&UPSTREAM[0].replace("\"b\"", "\"c\""), Path::new("k")).unwrap();
        assert!(!l.checksum_ours);
    }

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
