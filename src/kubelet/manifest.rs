//! Static pod manifests, the kubelet's convention: one Pod per file (YAML or
//! JSON) in a directory; beside them DRA objects, CRDs and their objects, a
//! YAML file holding several documents as kubectl reads it. A pod is read as
//! the typed `core/v1` Pod (`crate::api::k8s`: a field of the wrong JSON type
//! is an error naming its path, as kubectl's decoding refuses it), and of it
//! only what the device manager needs is kept: metadata (name, namespace,
//! uid), each init and app container's extended-resource limits and claims,
//! the pod's resource claims and scheduling group.

use crate::api::k8s::api::core::v1 as corev1;
use crate::api::k8s::apimachinery::pkg::api::resource::Quantity;
use crate::core::limits::{MAX_MANIFEST_DEPTH, MAX_MANIFEST_FILE, MAX_MANIFEST_FLOW};
use crate::core::text::cap_words;
use objects::{FieldError, ObjectError, Problem};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A container's device needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Container name.
    pub name: String,
    /// Extended resource → count.
    pub resources: BTreeMap<String, u64>,
    /// resources.claims: the pod claims (spec.resourceClaims names) it uses.
    pub claims: Vec<String>,
    /// resources.claims[].request of each of `claims` ("" when it names none).
    pub claim_requests: Vec<String>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restart_always: bool,
    /// Every resource name of its requests, sorted (limits default requests):
    /// the `j` of a DRA-backed extended resource's request name `container-<i>-request-<j>`.
    pub request_keys: Vec<String>,
}

/// Where a pod's resource claim comes from (spec.resourceClaims[]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSource {
    /// resourceClaimName: an existing ResourceClaim.
    Claim(String),
    /// resourceClaimTemplateName: a claim generated for the pod.
    Template(String),
    /// resourceClaimTemplateName of a pod of the API server: the claim the
    /// resourceclaim controller made from it, as `status.resourceClaimStatuses`
    /// names it — it must be the pod's (resourceclaim.Name's mustCheckOwner).
    Generated {
        /// The template.
        template: String,
        /// The claim made from it.
        claim: String,
    },
    /// The special claim of DRA-backed extended resources (not in the
    /// manifest: added when the pod is admitted, see `kubelet::dra::core::extended`).
    Extended(Box<extended::ExtendedClaim>),
}

/// One entry of spec.resourceClaims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    /// The name containers refer to.
    pub name: String,
    /// Where the claim comes from.
    pub source: ClaimSource,
}

/// A pod, as the device manager sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// UID (metadata.uid, or derived from the file as the kubelet does for static pods).
    pub uid: String,
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Init containers, in order.
    pub init_containers: Vec<Container>,
    /// App containers.
    pub containers: Vec<Container>,
    /// spec.resourceClaims (DRA).
    pub resource_claims: Vec<PodClaim>,
    /// `spec.schedulingGroup.podGroupName`: the PodGroup it belongs to
    /// (KEP-4671; a claim reserved for it is the pod's with DRAWorkloadResourceClaims).
    pub pod_group: Option<String>,
    /// A pod of the API server (bound to this node), not a static pod: its
    /// claims are read from the API server at every prepare attempt and
    /// prepared as written — this node allocates and reserves nothing.
    pub from_api: bool,
}

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Is this a resource the device manager handles (an extended resource)?
pub use crate::controlplane::extended::is_extended;

/// A manifest file as a scan of the directory finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its path.
    pub path: std::path::PathBuf,
    /// Its modification time (what the scan compares to see a change).
    pub modified: Option<std::time::SystemTime>,
    /// Its length (also compared).
    pub len: u64,
}

/// The manifest files in `dir` now: not hidden, named `.yaml`, `.yml` or
/// `.json`, regular files (after symlinks), in name order — each stat'ed
/// once (the scan stat'ed each twice, and sorted by `Path`, which compares
/// component by component: at thousands of manifests, most of a scan).
pub fn list_dir(dir: &Path) -> Vec<Listed> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<Listed> = rd
        .flatten()
        .filter_map(|e| {
            if e.file_name().as_encoded_bytes().starts_with(b".") {
                return None;
            }
            let path = e.path();
            if !["yaml", "yml", "json"].iter().any(|x| path.extension().is_some_and(|e| e == *x)) {
                return None;
            }
            let meta = std::fs::metadata(&path).ok().filter(std::fs::Metadata::is_file)?;
            Some(Listed { modified: meta.modified().ok(), len: meta.len(), path })
        })
        .collect();
    // One directory's files: their paths compare as their names, byte by byte.
    out.sort_unstable_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    out
}

fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A stable UUID-shaped UID from the file name and content (a changed file is a new pod).
fn derived_uid(file: &str, text: &str) -> String {
    let a = fnv64(format!("{file}\0{text}").as_bytes());
    let b = fnv64(format!("{text}\0{file}").as_bytes());
    let h = format!("{a:016x}{b:016x}");
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// A device count: a whole, non-negative number (a JSON number or a string,
/// as a Quantity is written).
fn quantity(q: &Quantity, what: &str) -> Result<u64, FieldError> {
    let Some(s) = q.string.as_deref().map(str::trim) else {
        return Err(FieldError::invalid(what, "quantity null is not a number"));
    };
    if s.starts_with('-') {
        return Err(FieldError::invalid(what, format!("quantity {s:?} is negative")));
    }
    s.parse::<u64>().map_err(|_| FieldError::invalid(what, format!("quantity {s:?} must be a whole number of devices")))
}

fn container(c: &corev1::Container, at: &str) -> Result<Container, FieldError> {
    let name = c
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::invalid(at, "a container needs a name"))?;
    let this = format!("{at} {name:?}");
    let none = BTreeMap::new();
    let res = c.resources.as_ref();
    let limits = res.map_or(&none, |r| &r.limits);
    let requests = res.map_or(&none, |r| &r.requests);
    let mut out = BTreeMap::new();
    for (k, v) in limits.iter().filter(|(k, _)| is_extended(k) || k.starts_with(extended::DEVICE_CLASS_PREFIX)) {
        let n = quantity(v, &format!("{at} {name:?} limits {k}"))?;
        if let Some(r) = requests.get(k) {
            let rn = quantity(r, &format!("{at} {name:?} requests {k}"))?;
            if rn != n {
                let detail = format!("requests {k}={rn} must equal limits {k}={n} for an extended resource");
                return Err(FieldError::invalid(this, detail));
            }
        }
        if n > 0 {
            out.insert(k.clone(), n);
        }
    }
    if let Some(k) = requests.keys().find(|k| is_extended(k) && !limits.contains_key(*k)) {
        let detail = format!("{k} is requested without a limit; extended resources must be set in limits");
        return Err(FieldError::invalid(this, detail));
    }
    let (mut claims, mut claim_requests) = (Vec::new(), Vec::new());
    for (i, cl) in res.map_or(&[][..], |r| r.claims.as_slice()).iter().enumerate() {
        let n = cl.name.as_deref().filter(|n| !n.is_empty());
        claims.push(n.ok_or_else(|| FieldError::required(format!("{this} resources.claims[{i}].name")))?.to_string());
        claim_requests.push(cl.request.clone().unwrap_or_default());
    }
    let restart_always = match c.restart_policy.as_deref() {
        None => false,
        Some("Always") => true,
        Some(other) => {
            return Err(FieldError::invalid(
                this,
                format!("restartPolicy {other:?} is not supported; the only container restartPolicy is \"Always\" (a sidecar init container)"),
            ))
        }
    };
    let mut request_keys: Vec<String> = limits.keys().chain(requests.keys()).cloned().collect();
    request_keys.sort();
    request_keys.dedup();
    Ok(Container { name: name.to_string(), resources: out, restart_always, claims, claim_requests, request_keys })
}

/// A YAML text too deeply nested to hand to the YAML parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nesting {
    /// Brackets nested deeper than [`MAX_MANIFEST_DEPTH`]: how deep.
    Deep(usize),
    /// More flow collections than [`MAX_MANIFEST_FLOW`]: how many.
    Flow(usize),
}

impl std::fmt::Display for Nesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Nesting::Deep(max) => write!(
                f,
                "nested {max} levels deep; at most {MAX_MANIFEST_DEPTH} are allowed (a pod spec needs about 10)"
            ),
            Nesting::Flow(opens) => write!(
                f,
                "{opens} flow collections ([…] or {{…}}); at most {MAX_MANIFEST_FLOW} are allowed in YAML (write large manifests as JSON or in block style)"
            ),
        }
    }
}

/// Why a manifest file is not read: one line, without the file's name (the
/// caller shows it next to the error).
#[derive(Debug)]
pub enum ManifestError {
    /// The file cannot be read (or is larger than [`MAX_MANIFEST_FILE`]).
    Read(std::io::Error),
    /// The text is larger than [`MAX_MANIFEST_FILE`].
    TooLarge,
    /// Not JSON (a text starting with `{`).
    Json(serde_json::Error),
    /// Not YAML.
    Yaml(serde_norway::Error),
    /// Nested too deeply to parse.
    Nesting(Nesting),
    /// A document of several (numbered from 1) is refused.
    Document(usize, Box<ManifestError>),
    /// Refused, with the unknown fields that may explain it (a misspelt required field).
    Unknown(Box<ManifestError>, Vec<String>),
    /// Several documents where one was expected: how many.
    Documents(usize),
    /// More than one Pod in a file.
    ManyPods,
    /// A DRA object or an object of another API group that is not right.
    Object(ObjectError),
    /// A kind other than Pod where a pod is expected.
    Kind(String),
    /// A pod without `metadata`.
    NoMetadata,
    /// A pod without `spec`.
    NoSpec,
    /// A pod of the API server without `metadata.uid`.
    NoUid,
    /// One of the pod's fields.
    Field(FieldError),
    /// An app container (this one) with `restartPolicy: Always`.
    SidecarInApp(String),
    /// A container name used twice.
    DuplicateContainer(String),
    /// A container uses a claim not in `spec.resourceClaims`.
    UnknownClaim {
        /// The container.
        container: String,
        /// The claim it names.
        claim: String,
    },
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Read(e) => write!(f, "cannot read: {e}"),
            ManifestError::TooLarge => {
                write!(f, "larger than {}", crate::core::limits::human_bytes(MAX_MANIFEST_FILE))
            }
            ManifestError::Json(e) => write!(f, "not valid JSON: {}", cap_words(&e.to_string())),
            ManifestError::Yaml(e) => write!(f, "not valid YAML: {}", cap_words(&e.to_string())),
            ManifestError::Nesting(n) => n.fmt(f),
            ManifestError::Document(i, e) => write!(f, "document {i}: {e}"),
            ManifestError::Unknown(e, warnings) => write!(f, "{e} ({})", warnings.join("; ")),
            ManifestError::Documents(n) => write!(f, "holds {n} documents; one was expected"),
            ManifestError::ManyPods => {
                f.write_str("holds more than one Pod; a static pod manifest holds one (put each pod in its own file)")
            }
            ManifestError::Object(e) => e.fmt(f),
            ManifestError::Kind(kind) => write!(f, "kind is {kind:?}; a static pod manifest holds one Pod"),
            ManifestError::NoMetadata => f.write_str("no metadata"),
            ManifestError::NoSpec => f.write_str("no spec"),
            ManifestError::NoUid => f.write_str("metadata.uid is required of a pod from the API server"),
            ManifestError::Field(e) => e.fmt(f),
            ManifestError::SidecarInApp(c) => {
                write!(f, "container {c:?}: restartPolicy Always is only allowed on init containers (sidecars)")
            }
            ManifestError::DuplicateContainer(c) => write!(f, "container name {c:?} is used twice"),
            ManifestError::UnknownClaim { container, claim } => {
                write!(f, "container {container:?} uses claim {claim:?}, which is not in spec.resourceClaims")
            }
        }
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ManifestError::Read(e) => Some(e),
            ManifestError::Json(e) => Some(e),
            ManifestError::Yaml(e) => Some(e),
            ManifestError::Nesting(_) => None,
            ManifestError::Document(_, e) | ManifestError::Unknown(e, _) => Some(&**e),
            ManifestError::Object(e) => Some(e),
            ManifestError::Field(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FieldError> for ManifestError {
    fn from(e: FieldError) -> Self {
        ManifestError::Field(e)
    }
}

impl std::error::Error for Nesting {}

/// Two errors are the same when they say the same (the parsers' errors
/// inside have no equality of their own).
impl PartialEq for ManifestError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for ManifestError {}

/// Why a YAML text is too deeply nested to hand to the YAML parser, whose
/// cost grows with flow depth times tokens (a 100 KB `{name: [[[…` took 24 s).
/// Checked in one pass before parsing: the bracket depth (ignoring quotes),
/// and — a bound no quoting trick can get around — the number of `[` and `{`.
pub fn yaml_nesting_problem(text: &str) -> Option<Nesting> {
    let (mut depth, mut max, mut opens) = (0usize, 0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                opens += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if max > MAX_MANIFEST_DEPTH {
        return Some(Nesting::Deep(max));
    }
    if opens > MAX_MANIFEST_FLOW {
        return Some(Nesting::Flow(opens));
    }
    None
}

/// Read (at most [`MAX_MANIFEST_FILE`] bytes) and parse one manifest file.
/// Blocking and CPU-bound: call it off the async workers (`spawn_blocking`).
pub fn load(file: &Path) -> Result<Pod, ManifestError> {
    let text = crate::core::limits::read_file(file, MAX_MANIFEST_FILE, "manifest").map_err(ManifestError::Read)?;
    parse(&text, file)
}

/// What a manifest file holds: a pod, or a DRA object beside the pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    /// A Pod.
    Pod(Pod),
    /// A ResourceClaim, ResourceClaimTemplate, DeviceClass or ResourceSlice.
    Dra(objects::Object),
}

/// Read and parse a manifest file that may hold a pod or a DRA object
/// (blocking, like [`load`]); a file of several documents is refused here.
pub fn load_any(file: &Path) -> Result<Manifest, ManifestError> {
    let (mut all, _) = load_any_checked(file)?;
    match all.len() {
        1 => Ok(all.remove(0)),
        n => Err(ManifestError::Documents(n)),
    }
}

/// Read and parse a manifest file as kubectl reads one: each YAML document
/// (`---` separated; a JSON file is one) an object on its own — a Pod, a
/// DRA object, or an object of another API group — with each document's
/// unknown fields as warnings in kubectl's words (see [`unknown_fields`]).
/// A file of several documents names the document of each error and warning.
pub fn load_any_checked(file: &Path) -> Result<(Vec<Manifest>, Vec<String>), ManifestError> {
    let text = crate::core::limits::read_file(file, MAX_MANIFEST_FILE, "manifest").map_err(ManifestError::Read)?;
    let docs = documents(&text)?;
    let many = docs.len() > 1;
    let (mut out, mut all_warnings) = (Vec::new(), Vec::new());
    for (i, v) in docs.iter().enumerate() {
        let at = |m: String| if many { format!("document {}: {m}", i + 1) } else { m };
        let at_error = |e: ManifestError| if many { ManifestError::Document(i + 1, Box::new(e)) } else { e };
        let warnings = unknown_fields(v);
        // A pod's derived UID comes from its own text (the whole file's when it is alone, as before).
        let own = if many { v.to_string() } else { text.clone() };
        let parsed = if objects::dra_kind(v).is_some() {
            objects::parse(v).map(Manifest::Dra).map_err(ManifestError::Object)
        } else if objects::is_api_object(v) {
            objects::parse_api_object(v).map(Manifest::Dra).map_err(ManifestError::Object)
        } else {
            pod(v, &own, file).map(Manifest::Pod)
        };
        match parsed {
            Ok(m) => out.push(m),
            // A required field missing is often a misspelt one: say which.
            Err(e) if !warnings.is_empty() => return Err(at_error(ManifestError::Unknown(Box::new(e), warnings))),
            Err(e) => return Err(at_error(e)),
        }
        all_warnings.extend(warnings.into_iter().map(at));
    }
    if out.iter().filter(|m| matches!(m, Manifest::Pod(_))).count() > 1 {
        return Err(ManifestError::ManyPods);
    }
    Ok((out, all_warnings))
}

/// The documents of a manifest's text: a JSON file is one; a YAML file is
/// each `---` separated document, empty ones skipped (an empty file is one
/// empty document, refused by what reads it).
fn documents(text: &str) -> Result<Vec<Value>, ManifestError> {
    use serde::Deserialize as _;
    if text.len() as u64 > MAX_MANIFEST_FILE || text.trim_start().starts_with('{') {
        return value(text).map(|v| vec![v]);
    }
    if let Some(p) = yaml_nesting_problem(text) {
        return Err(ManifestError::Nesting(p));
    }
    let mut out = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).map_err(|e| {
            let e = ManifestError::Yaml(e);
            if i > 0 {
                ManifestError::Document(i + 1, Box::new(e))
            } else {
                e
            }
        })?;
        if !v.is_null() {
            out.push(v);
        }
    }
    if out.is_empty() {
        out.push(Value::Null);
    }
    Ok(out)
}

/// Parse one manifest file's text. `file` goes into the derived UID; errors
/// do not repeat it (the caller shows them next to the file's name).
pub fn parse(text: &str, file: &Path) -> Result<Pod, ManifestError> {
    let v = value(text)?;
    pod(&v, text, file)
}

/// A pod read from an API server (it has its UID): what the lifecycle needs of it.
pub fn from_object(v: &Value) -> Result<Pod, ManifestError> {
    from_api(&typed(v)?)
}

/// A typed pod read from an API server (it has its UID): what the lifecycle needs of it.
pub fn from_api(p: &corev1::Pod) -> Result<Pod, ManifestError> {
    if p.metadata.as_ref().and_then(|m| m.uid.as_deref()).is_none_or(str::is_empty) {
        return Err(ManifestError::NoUid);
    }
    Ok(Pod { from_api: true, ..from_typed(p, "", Path::new(""))? })
}

/// A pod's JSON as the typed `core/v1` Pod (a field of the wrong type names
/// its path). Not an object (an empty document): no metadata.
pub fn typed(v: &Value) -> Result<corev1::Pod, ManifestError> {
    if !v.is_object() {
        return Err(ManifestError::NoMetadata);
    }
    Ok(objects::typed(v)?)
}

fn value(text: &str) -> Result<Value, ManifestError> {
    if text.len() as u64 > MAX_MANIFEST_FILE {
        return Err(ManifestError::TooLarge);
    }
    let v: Value = if text.trim_start().starts_with('{') {
        // serde_json is linear and stops at 128 levels by itself.
        serde_json::from_str(text).map_err(ManifestError::Json)?
    } else {
        if let Some(p) = yaml_nesting_problem(text) {
            return Err(ManifestError::Nesting(p));
        }
        serde_norway::from_str(text).map_err(ManifestError::Yaml)?
    };
    Ok(v)
}

fn pod(v: &Value, text: &str, file: &Path) -> Result<Pod, ManifestError> {
    // The kind is TypeMeta's, which the Pod message does not carry.
    if let Some(kind) = v.get("kind").and_then(Value::as_str) {
        if kind != "Pod" {
            return Err(ManifestError::Kind(kind.to_string()));
        }
    }
    from_typed(&typed(v)?, text, file)
}

/// The device manager's pod of a typed one; `text` and `file` derive the
/// UID of a static pod without one.
fn from_typed(p: &corev1::Pod, text: &str, file: &Path) -> Result<Pod, ManifestError> {
    let meta = p.metadata.as_ref().ok_or(ManifestError::NoMetadata)?;
    let nonempty = |s: &Option<String>| s.as_deref().filter(|n| !n.is_empty()).map(str::to_string);
    let name = nonempty(&meta.name).ok_or_else(|| FieldError::required("metadata.name"))?;
    let namespace = nonempty(&meta.namespace).unwrap_or_else(|| "default".into());
    let fname = file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let uid = nonempty(&meta.uid).unwrap_or_else(|| derived_uid(&fname, text));
    crate::core::validate::uid(&uid).map_err(|e| FieldError::new("metadata.uid", Problem::Uid(e)))?;
    let spec = p.spec.as_ref().ok_or(ManifestError::NoSpec)?;
    let list = |key: &str, cs: &[corev1::Container]| -> Result<Vec<Container>, FieldError> {
        cs.iter().enumerate().map(|(i, c)| container(c, &format!("spec.{key}[{i}]"))).collect()
    };
    let init_containers = list("initContainers", &spec.init_containers)?;
    let containers = list("containers", &spec.containers)?;
    if let Some(c) = containers.iter().find(|c| c.restart_always) {
        return Err(ManifestError::SidecarInApp(c.name.clone()));
    }
    if containers.is_empty() {
        return Err(FieldError::must("spec.containers", "list at least one container").into());
    }
    let mut names = std::collections::HashSet::new();
    for c in init_containers.iter().chain(&containers) {
        if !names.insert(c.name.as_str()) {
            return Err(ManifestError::DuplicateContainer(c.name.clone()));
        }
    }
    let resource_claims = resource_claims(&spec.resource_claims)?;
    for c in init_containers.iter().chain(&containers) {
        if let Some(n) = c.claims.iter().find(|n| !resource_claims.iter().any(|r| &r.name == *n)) {
            return Err(ManifestError::UnknownClaim { container: c.name.clone(), claim: n.clone() });
        }
    }
    let pod_group = match spec.scheduling_group.as_ref().and_then(|g| g.pod_group_name.as_deref()) {
        None => None,
        Some("") => return Err(FieldError::must("spec.schedulingGroup.podGroupName", "be a non-empty string").into()),
        Some(n) => Some(n.to_string()),
    };
    Ok(Pod { uid, name, namespace, init_containers, containers, resource_claims, pod_group, from_api: false })
}

fn resource_claims(list: &[corev1::PodResourceClaim]) -> Result<Vec<PodClaim>, FieldError> {
    let mut out: Vec<PodClaim> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("spec.resourceClaims[{i}]");
        let s = |v: &Option<String>| v.as_deref().filter(|n| !n.is_empty()).map(str::to_string);
        let name = s(&c.name).ok_or_else(|| FieldError::required(format!("{at}.name")))?;
        let source = match (s(&c.resource_claim_name), s(&c.resource_claim_template_name)) {
            (Some(n), None) => ClaimSource::Claim(n),
            (None, Some(t)) => ClaimSource::Template(t),
            _ => {
                return Err(FieldError::invalid(
                    at,
                    "exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                ))
            }
        };
        if out.iter().any(|o| o.name == name) {
            return Err(FieldError::invalid(at, format!("claim name {name:?} is used twice")));
        }
        out.push(PodClaim { name, source });
    }
    Ok(out)
}

pub mod extended;
mod fields;
pub use crate::controlplane::objects;
pub use fields::unknown_fields;

#[cfg(test)]
mod tests {
    use super::*;

    /// What a scan lists: as the scan's own filter and `Path` sort found
    /// them (hidden files, other names, directories left out; a symlink to a
    /// file in), with each file's length and modification time.
    #[test]
    fn list_dir_finds_what_the_scan_took_in_path_order() {
        let d = tempfile::tempdir().unwrap();
        let names = ["b.yaml", "a.json", "a b.yml", "A.json", "ab.json", "a.json.bak", ".hidden.yaml", "z.txt"];
        for n in names {
            std::fs::write(d.path().join(n), n).unwrap();
        }
        std::fs::create_dir(d.path().join("dir.yaml")).unwrap();
        std::os::unix::fs::symlink(d.path().join("b.yaml"), d.path().join("link.yaml")).unwrap();
        std::os::unix::fs::symlink(d.path().join("nowhere"), d.path().join("dangling.yaml")).unwrap();
        let got = list_dir(d.path());
        let mut want: Vec<std::path::PathBuf> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                !name.starts_with('.')
                    && ["yaml", "yml", "json"].iter().any(|x| p.extension().is_some_and(|e| e == *x))
                    && p.is_file()
            })
            .collect();
        want.sort();
        assert_eq!(got.iter().map(|l| l.path.clone()).collect::<Vec<_>>(), want);
        assert_eq!(want.len(), 6, "{want:?}");
        for l in &got {
            let m = std::fs::metadata(&l.path).unwrap();
            assert_eq!((l.len, l.modified), (m.len(), m.modified().ok()), "{l:?}");
        }
        assert!(list_dir(&d.path().join("missing")).is_empty());
    }

    /// #33 item 4: multi-document files, each object on its own, as kubectl reads them.
    #[test]
    fn multi_document_files_hold_one_object_a_document() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("all.yaml");
        std::fs::write(&f, "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\nspec: {}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: g, namespace: ml}\nspec: {devices: {requests: [{name: r, exactly: {deviceClasName: c}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\n").unwrap();
        let e = load_any_checked(&f).unwrap_err().to_string();
        assert_eq!(e, "document 2: spec.devices.requests[0]: deviceClassName is required (unknown field \"spec.devices.requests[0].exactly.deviceClasName\"; did you mean \"deviceClassName\"?)");
        std::fs::write(
            &f,
            std::fs::read_to_string(&f)
                .unwrap()
                .replace("deviceClasName", "deviceClassName")
                .replace("spec: {}", "spec: {}\nextra: 1"),
        )
        .unwrap();
        let (all, warnings) = load_any_checked(&f).unwrap();
        assert_eq!(all.len(), 3);
        assert!(matches!(&all[2], Manifest::Pod(p) if p.name == "p"));
        assert_eq!(warnings, ["document 1: unknown field \"extra\""]);
        std::fs::write(&f, "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c}]}\n").unwrap();
        assert!(load_any_checked(&f).unwrap_err().to_string().contains("more than one Pod"));
        std::fs::write(&f, "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\n: : bad\n").unwrap();
        assert!(load_any_checked(&f).unwrap_err().to_string().starts_with("document 2: not valid YAML"));
    }

    #[test]
    fn parses_yaml_and_json() {
        let y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\nspec:\n  initContainers:\n  - name: init\n    resources:\n      limits:\n        vendor.example/foo: 1\n  containers:\n  - name: main\n    resources:\n      limits:\n        vendor.example/foo: \"2\"\n        cpu: 500m\n      requests:\n        vendor.example/foo: 2\n  - name: side\n";
        let p = parse(y, Path::new("trainer.yaml")).unwrap();
        assert_eq!(p.key(), "ml/trainer");
        assert_eq!(p.init_containers[0].resources["vendor.example/foo"], 1);
        assert_eq!(p.containers[0].resources.len(), 1, "cpu is not a device resource");
        assert_eq!(p.containers[0].resources["vendor.example/foo"], 2);
        assert!(p.containers[1].resources.is_empty());
        assert_eq!(p.uid, parse(y, Path::new("trainer.yaml")).unwrap().uid, "stable UID");
        assert_eq!(p.uid.len(), 36);
        assert!(!p.init_containers[0].restart_always);

        let j = r#"{"metadata":{"name":"x","uid":"u-1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"v.e/a":3}}}]}}"#;
        let p = parse(j, Path::new("x.json")).unwrap();
        assert_eq!((p.uid.as_str(), p.namespace.as_str()), ("u-1", "default"));
    }

    #[test]
    fn sidecars_are_init_containers_with_restart_policy_always() {
        let j = r#"{"metadata":{"name":"s"},"spec":{"initContainers":[{"name":"side","restartPolicy":"Always"},{"name":"once"}],"containers":[{"name":"c"}]}}"#;
        let p = parse(j, Path::new("s.json")).unwrap();
        assert_eq!(p.init_containers.iter().map(|c| c.restart_always).collect::<Vec<_>>(), vec![true, false]);
        let bad = r#"{"metadata":{"name":"s"},"spec":{"initContainers":[{"name":"side","restartPolicy":"OnFailure"}],"containers":[{"name":"c"}]}}"#;
        assert!(parse(bad, Path::new("s.json"))
            .unwrap_err()
            .to_string()
            .contains("only container restartPolicy is \"Always\""));
        let app = r#"{"metadata":{"name":"s"},"spec":{"containers":[{"name":"c","restartPolicy":"Always"}]}}"#;
        assert!(parse(app, Path::new("s.json")).unwrap_err().to_string().contains("only allowed on init containers"));
    }

    #[test]
    fn a_pods_scheduling_group_names_its_pod_group() {
        let y = "metadata: {name: p}\nspec:\n  schedulingGroup: {podGroupName: team}\n  containers: [{name: c}]\n";
        assert_eq!(parse(y, Path::new("p.yaml")).unwrap().pod_group.as_deref(), Some("team"));
        let none = "metadata: {name: p}\nspec:\n  containers: [{name: c}]\n";
        assert_eq!(parse(none, Path::new("p.yaml")).unwrap().pod_group, None);
        let bad = "metadata: {name: p}\nspec:\n  schedulingGroup: {podGroupName: 3}\n  containers: [{name: c}]\n";
        assert!(parse(bad, Path::new("p.yaml")).unwrap_err().to_string().contains("spec.schedulingGroup.podGroupName"));
    }

    #[test]
    fn resource_claims_parse_with_the_containers_that_use_them() {
        let y = "metadata: {name: p}\nspec:\n  resourceClaims:\n  - {name: a, resourceClaimName: gpu}\n  - {name: b, resourceClaimTemplateName: t}\n  containers:\n  - name: c\n    resources: {claims: [{name: a}, {name: b, request: r}]}\n";
        let p = parse(y, Path::new("p.yaml")).unwrap();
        assert_eq!(
            p.resource_claims,
            vec![
                PodClaim { name: "a".into(), source: ClaimSource::Claim("gpu".into()) },
                PodClaim { name: "b".into(), source: ClaimSource::Template("t".into()) }
            ]
        );
        assert_eq!(p.containers[0].claims, ["a", "b"]);
        assert_eq!(p.containers[0].claim_requests, ["", "r"]);
        for (text, want) in [
            ("metadata: {name: p}\nspec:\n  resourceClaims: [{name: a}]\n  containers: [{name: c}]\n", "exactly one of"),
            ("metadata: {name: p}\nspec:\n  resourceClaims: [{name: a, resourceClaimName: x, resourceClaimTemplateName: y}]\n  containers: [{name: c}]\n", "exactly one of"),
            ("metadata: {name: p}\nspec:\n  resourceClaims: [{name: a, resourceClaimName: x}, {name: a, resourceClaimName: y}]\n  containers: [{name: c}]\n", "used twice"),
            ("metadata: {name: p}\nspec:\n  containers: [{name: c, resources: {claims: [{name: z}]}}]\n", "not in spec.resourceClaims"),
        ] {
            let e = parse(text, Path::new("p.yaml")).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn clear_errors() {
        let base = |limits: &str| {
            format!("{{\"metadata\":{{\"name\":\"x\"}},\"spec\":{{\"containers\":[{{\"name\":\"c\",\"resources\":{limits}}}]}}}}")
        };
        for (text, want) in [
            (base(r#"{"limits":{"v.e/a":"1.5"}}"#), "must be a whole number"),
            (base(r#"{"limits":{"v.e/a":-1}}"#), "negative"),
            (base(r#"{"limits":{"v.e/a":"500m"}}"#), "whole number"),
            (base(r#"{"requests":{"v.e/a":1}}"#), "without a limit"),
            (base(r#"{"limits":{"v.e/a":1},"requests":{"v.e/a":2}}"#), "must equal limits"),
            ("{\"metadata\":{},\"spec\":{\"containers\":[]}}".to_string(), "metadata.name"),
            ("kind: Deployment\nmetadata: {name: x}".to_string(), "kind is \"Deployment\""),
            (": : :".to_string(), "not valid YAML"),
            ("{".to_string(), "not valid JSON"),
        ] {
            let e = parse(&text, Path::new("bad.yaml")).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains("bad.yaml"), "{text}: {e}");
        }
    }

    /// The typed read: a field of the wrong JSON type is refused with its
    /// path (any field, as kubectl refuses it), `null` lists are empty, and a
    /// quantity may be a number or a string anywhere.
    #[test]
    fn fields_of_the_wrong_type_are_refused_with_their_path() {
        for (text, want) in [
            (
                "metadata: {name: p}\nspec: {containers: {name: c}}\n",
                "spec.containers: invalid type: map, expected a sequence",
            ),
            (
                "metadata: {name: p}\nspec: {containers: [{name: c, command: sh}]}\n",
                "spec.containers[0].command: invalid type: string",
            ),
            ("metadata: {name: 3}\nspec: {containers: [{name: c}]}\n", "metadata.name: invalid type: integer `3`"),
            (
                "metadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: {}}}}]}\n",
                "spec.containers[0].resources.limits.cpu: invalid type: map, expected a quantity",
            ),
            (
                "metadata: {name: p}\nspec: {terminationGracePeriodSeconds: \"30\", containers: [{name: c}]}\n",
                "spec.terminationGracePeriodSeconds: invalid type: string \"30\"",
            ),
            ("", "no metadata"),
            ("metadata: {name: p}\n", "no spec"),
        ] {
            let e = parse(text, Path::new("p.yaml")).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
        let ok = "metadata: {name: p, labels: null}\nspec:\n  initContainers: null\n  resourceClaims: null\n  terminationGracePeriodSeconds: 30\n  containers: [{name: c, resources: {limits: {cpu: 1.5, v.e/a: 2}, requests: null}}]\n";
        let p = parse(ok, Path::new("p.yaml")).unwrap();
        assert!(p.init_containers.is_empty() && p.resource_claims.is_empty());
        assert_eq!(p.containers[0].resources["v.e/a"], 2);
        assert_eq!(p.containers[0].request_keys, ["cpu", "v.e/a"]);
    }

    #[test]
    fn deep_or_huge_manifests_are_refused_before_parsing() {
        // The fuzzing run's stall: 100 KB of '[' inside a mapping (24 s before).
        let deep = format!("metadata: {{name: {}}}\n", "[".repeat(100_000));
        let e = parse(&deep, Path::new("n.yaml")).unwrap_err().to_string();
        assert!(e.contains("nested 100001 levels deep; at most 64"), "{e}");
        // Quotes cannot hide depth: closers inside quoted scalars do not count for the parser,
        // but every opener counts for the bound.
        let tricky = format!("a: x 'y\nb: {}\n", "[ 'x]', ".repeat(5_000));
        let e = parse(&tricky, Path::new("t.yaml")).unwrap_err().to_string();
        assert!(e.contains("5000 flow collections"), "{e}");
        let big = format!("metadata: {{name: x}}\n#{}\n", "a".repeat(MAX_MANIFEST_FILE as usize));
        assert!(parse(&big, Path::new("b.yaml")).unwrap_err().to_string().contains("larger than 512 KiB"));
        // JSON goes to serde_json, which is linear and refuses > 128 levels itself.
        let json = format!("{{\"metadata\": {}", "[".repeat(100_000));
        assert!(parse(&json, Path::new("j.json")).unwrap_err().to_string().contains("not valid JSON"));
        // A realistic manifest with flow collections still parses.
        let ok = "metadata: {name: p}\nspec:\n  containers:\n  - name: c\n    command: [\"sh\", \"-c\", \"[ -f x ] && echo '[['\"]\n    resources: {limits: {v.e/a: 1}}\n";
        assert_eq!(parse(ok, Path::new("ok.yaml")).unwrap().containers[0].resources["v.e/a"], 1);
    }
}
