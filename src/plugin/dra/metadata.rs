//! Device metadata (KEP-5304, `dra serve --device-metadata`): what the
//! kubeletplugin helper of k8s.io/dynamic-resource-allocation v0.37.2 writes
//! for a prepared claim when a driver turns on `EnableDeviceMetadata`
//! (kubeletplugin/metadata.go, draplugin.go), byte for byte:
//!
//! - per request of the claim, a JSON stream (the same `DeviceMetadata`
//!   encoded once per chosen `metadata.resource.k8s.io` version, in the
//!   order chosen, each pretty-printed as apimachinery's JSON serializer
//!   does and followed by a newline) at
//!   `<plugin dir>/dra-device-metadata/<ns>_<claim>/<request>/metadata.json`;
//! - a CDI spec `<cdi dir>/<driver>_metadata_<claim uid>_<request>.json`,
//!   kind `<driver>/metadata`, one device `<claim uid>_<request>` whose edits
//!   bind-mount that file read-only at
//!   `/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json`
//!   (`resourceclaimtemplates/<pod claim name>/…` for a claim made from a
//!   template: its `resource.kubernetes.io/pod-claim-name` annotation);
//! - its CDI ID appended to the first prepared device of each request;
//! - on a successful unprepare, the claim's directory and specs removed.
//!
//! No kubelet part and no feature gate: the kubelet passes the CDI ID to the
//! runtime as every other. Pure builders here, the file writes at the end.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why device metadata could not be written, updated or removed; worded as
/// the helper's errors (the kubelet shows them as the claim's error).
#[derive(Debug)]
pub enum MetadataError {
    /// A name from the kubelet that cannot name a file.
    Component {
        /// Which name (`namespace`, `claim name`, …).
        what: &'static str,
        /// The name.
        value: String,
    },
    /// A metadata file's path that is not UTF-8 (a CDI spec holds text).
    NotUtf8(PathBuf),
    /// The metadata could not be encoded.
    Encode(serde_json::Error),
    /// A request's metadata file or CDI spec could not be written.
    Write {
        /// `metadata` or `CDI spec`.
        what: &'static str,
        /// The request.
        request: String,
        /// `create directory` or `write`.
        step: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `UpdateRequestMetadata` for a request the claim has no file for.
    RequestNotFound {
        /// The request.
        request: String,
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// The existing metadata file could not be read.
    Read(std::io::Error),
    /// The existing metadata file does not decode (`None`: it holds no object).
    Decode(Option<serde_json::Error>),
    /// The updated metadata file could not be written.
    Rewrite(std::io::Error),
    /// A claim's metadata directory or CDI spec could not be removed.
    Remove {
        /// `metadata directory` or `CDI spec`.
        what: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl std::fmt::Display for MetadataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetadataError::Component { what, value } => {
                write!(f, "{what} {} cannot name a file", crate::core::text::quote(value))
            }
            MetadataError::NotUtf8(p) => write!(f, "metadata path {} is not UTF-8", p.display()),
            MetadataError::Encode(e) => write!(f, "encode device metadata: {e}"),
            MetadataError::Write { what, request, step, path, source } => {
                write!(f, "write {what} for request {request:?}: {step} {}: {source}", path.display())
            }
            MetadataError::RequestNotFound { request, namespace, name } => {
                write!(f, "request {request:?} not found in prepared claim {namespace}/{name}")
            }
            MetadataError::Read(e) => write!(f, "read metadata file: {e}"),
            MetadataError::Decode(None) => f.write_str("decode existing metadata: no metadata objects found in stream"),
            MetadataError::Decode(Some(e)) => write!(f, "decode existing metadata: {e}"),
            MetadataError::Rewrite(e) => write!(f, "write metadata file: {e}"),
            MetadataError::Remove { what, path, source } => write!(f, "remove {what} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for MetadataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MetadataError::Encode(e) | MetadataError::Decode(Some(e)) => Some(e),
            MetadataError::Write { source, .. } | MetadataError::Remove { source, .. } => Some(source),
            MetadataError::Read(e) | MetadataError::Rewrite(e) => Some(e),
            _ => None,
        }
    }
}

/// The API group of the metadata objects.
pub const GROUP: &str = "metadata.resource.k8s.io";
/// Where metadata files appear in a container (api/metadata `ContainerDir`).
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
/// The subdirectory of the plugin data directory holding the files (`metadataSubDir`).
pub const HOST_SUBDIR: &str = "dra-device-metadata";

/// A `metadata.resource.k8s.io` version the helper can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// v1beta1: the latest in v0.37.2, which the helper requires.
    V1beta1,
    /// v1alpha1: what the 1.36.0 helper wrote (api/metadata/testdata/v1.36.0); optional in 1.37.
    V1alpha1,
}

impl Version {
    /// The version's name (`v1beta1`).
    pub fn name(self) -> &'static str {
        match self {
            Version::V1beta1 => "v1beta1",
            Version::V1alpha1 => "v1alpha1",
        }
    }

    /// `metadata.resource.k8s.io/<version>`.
    pub fn api_version(self) -> String {
        format!("{GROUP}/{}", self.name())
    }
}

/// Why a choice of metadata versions is refused (worded as the helper's `Start`).
#[derive(Debug, PartialEq, Eq)]
pub enum VersionError {
    /// A version the helper does not write.
    Unsupported(String),
    /// None chosen.
    NoneChosen,
    /// A version listed twice.
    Twice {
        /// The version.
        version: &'static str,
        /// Where it is listed again.
        at: usize,
    },
    /// The latest version is not among them.
    NoLatest,
}

impl std::fmt::Display for VersionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionError::Unsupported(s) => {
                write!(f, "metadata version {} is not supported (v1beta1, v1alpha1)", crate::core::text::quote(s))
            }
            VersionError::NoneChosen => f.write_str("metadata versions must be explicitly selected, none chosen"),
            VersionError::Twice { version, at } => write!(f, "metadata version {version} is listed twice (at {at})"),
            VersionError::NoLatest => write!(
                f,
                "the latest metadata version is {} and must be enabled explicitly",
                Version::V1beta1.api_version()
            ),
        }
    }
}

impl std::error::Error for VersionError {}

impl std::str::FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, VersionError> {
        match s.strip_prefix(&format!("{GROUP}/")).unwrap_or(s) {
            "v1beta1" => Ok(Version::V1beta1),
            "v1alpha1" => Ok(Version::V1alpha1),
            _ => Err(VersionError::Unsupported(s.to_string())),
        }
    }
}

/// Check the versions as the helper's `Start` does: at least one, each
/// known once, the latest (v1beta1) among them.
pub fn check_versions(v: &[Version]) -> Result<(), VersionError> {
    if v.is_empty() {
        return Err(VersionError::NoneChosen);
    }
    if let Some((i, x)) = v.iter().enumerate().find(|(i, x)| v[..*i].contains(x)) {
        return Err(VersionError::Twice { version: x.name(), at: i });
    }
    if !v.contains(&Version::V1beta1) {
        return Err(VersionError::NoLatest);
    }
    Ok(())
}

/// One prepared device as the metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The pool.
    pub pool: String,
    /// The device.
    pub name: String,
    /// String attributes (sorted by name).
    pub attributes: BTreeMap<String, String>,
    /// Its network data (`UpdateRequestMetadata`, e.g. after CNI ran).
    pub network: Option<NetworkData>,
}

/// A device's `networkData` (resource.k8s.io `NetworkDeviceData`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NetworkData {
    /// The interface's name in the pod.
    #[serde(rename = "interfaceName", default, skip_serializing_if = "String::is_empty")]
    pub interface_name: String,
    /// Its IP addresses (CIDR).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// Its hardware address.
    #[serde(rename = "hardwareAddress", default, skip_serializing_if = "String::is_empty")]
    pub hardware_address: String,
}

/// The claim a metadata file is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its `resource.kubernetes.io/pod-claim-name` annotation, when it has one.
    pub pod_claim_name: Option<String>,
}

/// The request name without its subrequest (`gpu/large` → `gpu`), as resourceclaim.BaseRequestRef.
pub fn base_request(r: &str) -> &str {
    r.split_once('/').map(|(b, _)| b).unwrap_or(r)
}

/// Why a path component from the kubelet cannot be used in a file path.
fn component(what: &'static str, s: &str) -> Result<(), MetadataError> {
    if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\0']) {
        return Err(MetadataError::Component { what, value: s.to_string() });
    }
    Ok(())
}

/// Paths of one request's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The metadata file on the host.
    pub file: PathBuf,
    /// The CDI spec.
    pub cdi_spec: PathBuf,
    /// Where the file is mounted in a container.
    pub container: String,
    /// The CDI device name (`<uid>_<request>`).
    pub cdi_device: String,
}

/// The paths of `request` (a base request name) of claim `c`.
pub fn paths(
    driver: &str,
    plugin_dir: &Path,
    cdi_dir: &Path,
    c: &ClaimRef,
    request: &str,
) -> Result<Paths, MetadataError> {
    component("namespace", &c.namespace)?;
    component("claim name", &c.name)?;
    component("claim UID", &c.uid)?;
    component("request", request)?;
    let container = match c.pod_claim_name.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => {
            component("pod claim name", p)?;
            format!("{CONTAINER_DIR}/resourceclaimtemplates/{p}/{request}/{driver}-metadata.json")
        }
        None => format!("{CONTAINER_DIR}/resourceclaims/{}/{request}/{driver}-metadata.json", c.name),
    };
    Ok(Paths {
        file: claim_dir(plugin_dir, c).join(request).join("metadata.json"),
        cdi_spec: cdi_dir.join(format!("{driver}_metadata_{}_{request}.json", c.uid)),
        container,
        cdi_device: format!("{}_{request}", c.uid),
    })
}

/// The claim's directory of metadata files: `<plugin dir>/dra-device-metadata/<ns>_<name>`.
pub fn claim_dir(plugin_dir: &Path, c: &ClaimRef) -> PathBuf {
    plugin_dir.join(HOST_SUBDIR).join(format!("{}_{}", c.namespace, c.name))
}

#[derive(Serialize)]
struct Doc<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Meta<'a>,
    #[serde(rename = "podClaimName", skip_serializing_if = "Option::is_none")]
    pod_claim_name: Option<&'a str>,
    requests: [Request<'a>; 1],
}

#[derive(Serialize)]
struct Meta<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    generation: i64,
}

#[derive(Serialize)]
struct Request<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    devices: Vec<DeviceDoc<'a>>,
}

#[derive(Serialize)]
struct DeviceDoc<'a> {
    driver: &'a str,
    pool: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<&'a str, Attribute<'a>>,
    #[serde(rename = "networkData", skip_serializing_if = "Option::is_none")]
    network_data: Option<&'a NetworkData>,
}

#[derive(Serialize)]
struct Attribute<'a> {
    string: &'a str,
}

/// JSON as Go's encoding/json writes it: `<`, `>`, `&`, U+2028 and U+2029
/// escaped (they only occur inside strings).
fn go_escape(s: String) -> String {
    if !s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return s;
    }
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// `json.MarshalIndent(v, "", "  ")`.
fn marshal_indent<T: Serialize>(v: &T) -> Result<String, MetadataError> {
    serde_json::to_string_pretty(v).map(go_escape).map_err(MetadataError::Encode)
}

/// The metadata stream of one request (`request` as the devices name it,
/// subrequest included) at `generation`: one object per version, each
/// followed by a newline (metadata.go `encodeMetadataStream`).
pub fn stream(
    versions: &[Version],
    driver: &str,
    c: &ClaimRef,
    generation: i64,
    request: &str,
    devices: &[Device],
) -> Result<String, MetadataError> {
    let mut out = String::new();
    for v in versions {
        let doc = Doc {
            kind: "DeviceMetadata",
            api_version: v.api_version(),
            metadata: Meta { name: &c.name, namespace: &c.namespace, uid: &c.uid, generation },
            pod_claim_name: c.pod_claim_name.as_deref(),
            requests: [Request {
                name: request,
                devices: devices
                    .iter()
                    .map(|d| DeviceDoc {
                        driver,
                        pool: &d.pool,
                        name: &d.name,
                        attributes: d
                            .attributes
                            .iter()
                            .map(|(k, v)| (k.as_str(), Attribute { string: v.as_str() }))
                            .collect(),
                        network_data: d.network.as_ref(),
                    })
                    .collect(),
            }],
        };
        out.push_str(&marshal_indent(&doc)?);
        out.push('\n');
    }
    Ok(out)
}

#[derive(Serialize)]
struct CdiSpec<'a> {
    #[serde(rename = "cdiVersion")]
    cdi_version: &'static str,
    kind: String,
    devices: [CdiDevice<'a>; 1],
    #[serde(rename = "containerEdits")]
    container_edits: Empty,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct CdiDevice<'a> {
    name: &'a str,
    #[serde(rename = "containerEdits")]
    container_edits: Mounts<'a>,
}

#[derive(Serialize)]
struct Mounts<'a> {
    mounts: [Mount<'a>; 1],
}

#[derive(Serialize)]
struct Mount<'a> {
    #[serde(rename = "hostPath")]
    host_path: &'a str,
    #[serde(rename = "containerPath")]
    container_path: &'a str,
    options: [&'static str; 2],
}

/// The CDI spec that mounts one request's file (metadata.go `writeCDISpec`):
/// its cdiVersion the minimum its content needs (specs-go
/// `MinimumRequiredVersion`: 0.5.0 for a device name starting with a digit,
/// else 0.3.0; the kind's class `metadata` has no dot).
/// `host_file`: the metadata file as the host (the runtime) names it.
pub fn cdi_spec(driver: &str, p: &Paths, host_file: &Path) -> Result<String, MetadataError> {
    let host = host_file.to_str().ok_or_else(|| MetadataError::NotUtf8(host_file.to_path_buf()))?;
    let spec = CdiSpec {
        cdi_version: if p.cdi_device.starts_with(|c: char| c.is_ascii_digit()) { "0.5.0" } else { "0.3.0" },
        kind: format!("{driver}/metadata"),
        devices: [CdiDevice {
            name: &p.cdi_device,
            container_edits: Mounts {
                mounts: [Mount { host_path: host, container_path: &p.container, options: ["ro", "bind"] }],
            },
        }],
        container_edits: Empty {},
    };
    marshal_indent(&spec)
}

/// The CDI ID of a request's metadata device: `<driver>/metadata=<uid>_<request>`.
pub fn cdi_id(driver: &str, p: &Paths) -> String {
    format!("{driver}/metadata={}", p.cdi_device)
}

/// Write the metadata and CDI spec of every request of a prepared claim
/// (`devices`: each request as the prepared devices name it, with its
/// devices in order); the CDI ID per base request name. The specs name the
/// files as the host does (`host_root`: dpctl's `--root`).
pub fn write_claim(
    versions: &[Version],
    driver: &str,
    (plugin_dir, cdi_dir, host_root): (&Path, &Path, &crate::core::paths::HostRoot),
    c: &ClaimRef,
    devices: &BTreeMap<String, Vec<Device>>,
) -> Result<BTreeMap<String, String>, MetadataError> {
    let mut ids = BTreeMap::new();
    for (request, devs) in devices {
        let base = base_request(request);
        let p = paths(driver, plugin_dir, cdi_dir, c, base)?;
        let text = stream(versions, driver, c, 1, request, devs)?;
        let write = |what: &'static str, path: &Path, bytes: &[u8]| -> Result<(), MetadataError> {
            let failed = |step, path: &Path, source| MetadataError::Write {
                what,
                request: request.clone(),
                step,
                path: path.to_path_buf(),
                source,
            };
            if let Some(dir) = path.parent() {
                crate::core::files::create_dir_all(dir).map_err(|e| failed("create directory", dir, e))?;
            }
            crate::core::files::write_atomic(path, bytes).map_err(|e| failed("write", path, e))
        };
        write("metadata", &p.file, text.as_bytes())?;
        write("CDI spec", &p.cdi_spec, cdi_spec(driver, &p, &host_root.on_host(&p.file))?.as_bytes())?;
        ids.insert(base.to_string(), cdi_id(driver, &p));
    }
    Ok(ids)
}

/// Rewrite one request's metadata file with `network` on each of its
/// devices and the generation one up, as the helper's
/// `UpdateRequestMetadata` does for a driver whose device data is known
/// only after the pod sandbox exists: the file's first object gives the
/// generation, the pod claim name and the devices (their attributes kept);
/// `request` may name a subrequest (the file is its parent's). The new generation.
pub fn update_request(
    versions: &[Version],
    driver: &str,
    plugin_dir: &Path,
    c: &ClaimRef,
    request: &str,
    network: &NetworkData,
) -> Result<i64, MetadataError> {
    let p = paths(driver, plugin_dir, Path::new(""), c, base_request(request))?;
    let text = match crate::core::limits::read_file(&p.file, 1 << 20, "device metadata") {
        Ok(t) => t,
        Err(_) if !p.file.exists() => {
            return Err(MetadataError::RequestNotFound {
                request: request.to_string(),
                namespace: c.namespace.clone(),
                name: c.name.clone(),
            })
        }
        Err(e) => return Err(MetadataError::Read(e)),
    };
    let first: serde_json::Value = serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .next()
        .ok_or(MetadataError::Decode(None))?
        .map_err(|e| MetadataError::Decode(Some(e)))?;
    let generation = first["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
    let devices: Vec<Device> = first["requests"][0]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| Device {
            pool: d["pool"].as_str().unwrap_or_default().to_string(),
            name: d["name"].as_str().unwrap_or_default().to_string(),
            attributes: d["attributes"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v["string"].as_str()?.to_string())))
                .collect(),
            network: Some(network.clone()),
        })
        .collect();
    let claim = ClaimRef { pod_claim_name: first["podClaimName"].as_str().map(str::to_string), ..c.clone() };
    let stream = stream(versions, driver, &claim, generation, request, &devices)?;
    crate::core::files::write_atomic(&p.file, stream.as_bytes()).map_err(MetadataError::Rewrite)?;
    Ok(generation)
}

/// Remove a claim's metadata directory and its CDI specs (metadata.go
/// `cleanupClaim`); nothing there is fine, and so is a claim whose names
/// cannot name a file ([`write_claim`] wrote nothing for it).
pub fn cleanup_claim(driver: &str, plugin_dir: &Path, cdi_dir: &Path, c: &ClaimRef) -> Result<(), MetadataError> {
    for (what, s) in [("namespace", &c.namespace), ("claim name", &c.name), ("claim UID", &c.uid)] {
        if component(what, s).is_err() {
            return Ok(());
        }
    }
    let dir = claim_dir(plugin_dir, c);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(MetadataError::Remove { what: "metadata directory", path: dir, source: e })
        }
        _ => {}
    }
    let prefix = format!("{driver}_metadata_{}_", c.uid);
    let Ok(rd) = std::fs::read_dir(cdi_dir) else { return Ok(()) };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&prefix) && name.ends_with(".json") {
            match std::fs::remove_file(e.path()) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(MetadataError::Remove { what: "CDI spec", path: e.path(), source: err })
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(pod_claim: Option<&str>) -> ClaimRef {
        ClaimRef {
            namespace: "ml".into(),
            name: "gpu".into(),
            uid: "11111111-2222".into(),
            pod_claim_name: pod_claim.map(str::to_string),
        }
    }

    #[test]
    fn versions_are_checked_as_the_helper_starts() {
        use Version::*;
        assert!(check_versions(&[V1beta1]).is_ok());
        assert!(check_versions(&[V1beta1, V1alpha1]).is_ok());
        assert!(check_versions(&[V1alpha1])
            .unwrap_err()
            .to_string()
            .contains("latest metadata version is metadata.resource.k8s.io/v1beta1"));
        assert!(check_versions(&[]).unwrap_err().to_string().contains("none chosen"));
        assert!(check_versions(&[V1beta1, V1beta1]).unwrap_err().to_string().contains("twice"));
        assert_eq!("metadata.resource.k8s.io/v1alpha1".parse::<Version>(), Ok(V1alpha1));
        assert!("v1".parse::<Version>().unwrap_err().to_string().contains("not supported"));
    }

    #[test]
    fn the_stream_is_apimachinerys_pretty_json_once_per_version() {
        let d = Device {
            pool: "p".into(),
            name: "dev-0".into(),
            attributes: [("pool", "p"), ("device", "dev-0"), ("driverName", "a<b")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            network: None,
        };
        let s = stream(&[Version::V1beta1, Version::V1alpha1], "gpu.x", &claim(Some("g")), 1, "r/sub", &[d]).unwrap();
        let one = "{\n  \"kind\": \"DeviceMetadata\",\n  \"apiVersion\": \"metadata.resource.k8s.io/VER\",\n  \"metadata\": {\n    \"name\": \"gpu\",\n    \"namespace\": \"ml\",\n    \"uid\": \"11111111-2222\",\n    \"generation\": 1\n  },\n  \"podClaimName\": \"g\",\n  \"requests\": [\n    {\n      \"name\": \"r/sub\",\n      \"devices\": [\n        {\n          \"driver\": \"gpu.x\",\n          \"pool\": \"p\",\n          \"name\": \"dev-0\",\n          \"attributes\": {\n            \"device\": {\n              \"string\": \"dev-0\"\n            },\n            \"driverName\": {\n              \"string\": \"a\\u003cb\"\n            },\n            \"pool\": {\n              \"string\": \"p\"\n            }\n          }\n        }\n      ]\n    }\n  ]\n}\n";
        assert_eq!(s, format!("{}{}", one.replace("VER", "v1beta1"), one.replace("VER", "v1alpha1")));
    }

    #[test]
    fn paths_follow_the_helpers_layout() {
        let p = paths("gpu.x", Path::new("/k/plugins/gpu.x"), Path::new("/cdi"), &claim(None), "r").unwrap();
        assert_eq!(p.file, Path::new("/k/plugins/gpu.x/dra-device-metadata/ml_gpu/r/metadata.json"));
        assert_eq!(p.cdi_spec, Path::new("/cdi/gpu.x_metadata_11111111-2222_r.json"));
        assert_eq!(
            p.container,
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/gpu/r/gpu.x-metadata.json"
        );
        assert_eq!(cdi_id("gpu.x", &p), "gpu.x/metadata=11111111-2222_r");
        let t = paths("gpu.x", Path::new("/k"), Path::new("/cdi"), &claim(Some("g")), "r").unwrap();
        assert_eq!(
            t.container,
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/g/r/gpu.x-metadata.json"
        );
        // An empty annotation is no template claim; names that would leave the directory are refused.
        let e = paths("gpu.x", Path::new("/k"), Path::new("/cdi"), &claim(Some("")), "r").unwrap();
        assert!(e.container.contains("/resourceclaims/gpu/"));
        for bad in ["..", "a/b", ""] {
            assert!(paths("gpu.x", Path::new("/k"), Path::new("/cdi"), &claim(None), bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_cdi_spec_is_the_minimum_version_that_holds_it() {
        let p = paths("gpu.x", Path::new("/k"), Path::new("/cdi"), &claim(None), "r").unwrap();
        let s = cdi_spec("gpu.x", &p, &p.file).unwrap();
        assert!(s.starts_with("{\n  \"cdiVersion\": \"0.5.0\",\n  \"kind\": \"gpu.x/metadata\",\n"), "{s}");
        assert!(s.ends_with("  ],\n  \"containerEdits\": {}\n}"), "{s}");
        assert_eq!(crate::protocol::cdi::spec_problem(&s, false), None);
        let mut letters = claim(None);
        letters.uid = "u-1".into();
        let p = paths("gpu.x", Path::new("/k"), Path::new("/cdi"), &letters, "r").unwrap();
        assert!(cdi_spec("gpu.x", &p, &p.file).unwrap().contains("\"cdiVersion\": \"0.3.0\""));
    }

    #[test]
    fn a_claim_is_written_and_cleaned_up() {
        let t = tempfile::tempdir().unwrap();
        let (plugin, cdi) = (t.path().join("plugin"), t.path().join("cdi"));
        let d = Device { pool: "p".into(), name: "d".into(), attributes: BTreeMap::new(), network: None };
        let reqs: BTreeMap<String, Vec<Device>> =
            [("a/x".to_string(), vec![d.clone()]), ("b".to_string(), vec![d])].into_iter().collect();
        let root = crate::core::paths::HostRoot::default();
        let ids = write_claim(&[Version::V1beta1], "gpu.x", (&plugin, &cdi, &root), &claim(None), &reqs).unwrap();
        assert_eq!(ids.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(plugin.join("dra-device-metadata/ml_gpu/a/metadata.json").exists());
        assert!(cdi.join("gpu.x_metadata_11111111-2222_b.json").exists());
        std::fs::write(cdi.join("gpu.x_metadata_other_b.json"), "{}").unwrap();
        cleanup_claim("gpu.x", &plugin, &cdi, &claim(None)).unwrap();
        assert!(!plugin.join("dra-device-metadata/ml_gpu").exists());
        let left: Vec<_> = std::fs::read_dir(&cdi).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["gpu.x_metadata_other_b.json"]);
        // Again: nothing there is fine.
        cleanup_claim("gpu.x", &plugin, &cdi, &claim(None)).unwrap();
        // Under --root the spec names the file as the host does.
        let root = crate::core::paths::HostRoot::new(Some(t.path().to_path_buf()));
        write_claim(&[Version::V1beta1], "gpu.x", (&plugin, &cdi, &root), &claim(None), &reqs).unwrap();
        let spec = std::fs::read_to_string(cdi.join("gpu.x_metadata_11111111-2222_b.json")).unwrap();
        assert!(spec.contains("\"hostPath\": \"/plugin/dra-device-metadata/ml_gpu/b/metadata.json\""), "{spec}");
    }

    #[test]
    fn an_update_adds_network_data_and_counts_the_generation_up() {
        let t = tempfile::tempdir().unwrap();
        let (plugin, cdi) = (t.path().join("plugin"), t.path().join("cdi"));
        let attrs: BTreeMap<String, String> = [("model".to_string(), "x".to_string())].into_iter().collect();
        let d = Device { pool: "p".into(), name: "d".into(), attributes: attrs, network: None };
        let reqs: BTreeMap<String, Vec<Device>> = [("a/x".to_string(), vec![d])].into_iter().collect();
        let v = [Version::V1beta1, Version::V1alpha1];
        let root = crate::core::paths::HostRoot::default();
        write_claim(&v, "gpu.x", (&plugin, &cdi, &root), &claim(Some("g")), &reqs).unwrap();
        let net = NetworkData { interface_name: "eth1".into(), ips: vec!["10.0.0.5/24".into()], ..Default::default() };
        let bare = ClaimRef { pod_claim_name: None, ..claim(None) };
        assert_eq!(update_request(&v, "gpu.x", &plugin, &bare, "a/x", &net).ok(), Some(2));
        assert_eq!(update_request(&v, "gpu.x", &plugin, &bare, "a", &net).ok(), Some(3));
        let text = std::fs::read_to_string(plugin.join("dra-device-metadata/ml_gpu/a/metadata.json")).unwrap();
        let objs: Vec<serde_json::Value> =
            serde_json::Deserializer::from_str(&text).into_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(objs.len(), 2);
        let o = &objs[0];
        assert_eq!((o["metadata"]["generation"].as_i64(), o["podClaimName"].as_str()), (Some(3), Some("g")));
        assert_eq!(o["requests"][0]["name"], "a");
        let dev = &o["requests"][0]["devices"][0];
        assert_eq!(dev["attributes"]["model"]["string"], "x");
        assert_eq!(dev["networkData"], serde_json::json!({"interfaceName": "eth1", "ips": ["10.0.0.5/24"]}));
        let e = update_request(&v, "gpu.x", &plugin, &bare, "b", &net).unwrap_err();
        assert_eq!(e.to_string(), "request \"b\" not found in prepared claim ml/gpu");
    }
}
