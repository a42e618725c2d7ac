//! The driver's claim decisions, without I/O (the sans-IO core the helper in
//! [`super::driver`] carries out, as the kubeletplugin helper calls a
//! driver's `PrepareResourceClaims`): a fetched ResourceClaim read as its
//! allocation for this driver, and — given the configuration, the prepared
//! claims and one claim — what a prepare answers (devices, CDI IDs), the
//! CDI spec it writes and what it records; what an unprepare removes; the
//! device metadata a prepared claim gets. No tokio, no files, no network:
//! each decision is a value the shell carries out.

pub use super::error::ClaimError;
use super::{metadata, Config};
use crate::api::dra_v1::{Claim, Device, NodePrepareResourceResponse};
use crate::protocol::dra::safe_word;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// One prepared claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedClaim {
    /// namespace/name.
    pub claim: String,
    /// Its UID.
    pub uid: String,
    /// The devices it got.
    pub devices: Vec<String>,
    /// The CDI spec file written for it.
    pub cdi_spec: String,
    /// The preparation run that named its CDI devices (`racy-prepare` only).
    #[serde(skip)]
    pub run: Option<u64>,
}

/// The claims the driver has prepared, and how many prepare calls it took.
#[derive(Debug, Default)]
pub struct Prepared {
    claims: BTreeMap<String, PreparedClaim>,
    calls: u64,
}

impl Prepared {
    /// A prepare call begins: its number (1, 2, …).
    pub fn begin_call(&mut self) -> u64 {
        self.calls += 1;
        self.calls
    }

    /// The prepared claim `uid`.
    pub fn get(&self, uid: &str) -> Option<&PreparedClaim> {
        self.claims.get(uid)
    }

    /// Whether `uid` is prepared.
    pub fn contains(&self, uid: &str) -> bool {
        self.claims.contains_key(uid)
    }

    /// The UIDs of every prepared claim.
    pub fn uids(&self) -> impl Iterator<Item = &String> {
        self.claims.keys()
    }

    /// Every prepared claim, by UID.
    pub fn all(&self) -> impl Iterator<Item = &PreparedClaim> {
        self.claims.values()
    }

    /// The prepared claim named `namespace/name`.
    pub fn by_name(&self, claim: &str) -> Option<&PreparedClaim> {
        self.claims.values().find(|p| p.claim == claim)
    }

    /// Forget `uid` (its preparation is gone or runs again); what it was.
    pub fn forget(&mut self, uid: &str) -> Option<PreparedClaim> {
        self.claims.remove(uid)
    }

    /// Record `p` (a claim read back, or one whose removal failed).
    pub fn restore(&mut self, p: PreparedClaim) {
        self.claims.insert(p.uid.clone(), p);
    }
}

/// One device of a claim's allocation (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatedDevice {
    /// The request (`<request>` or `<request>/<subrequest>`).
    pub request: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
    /// Its shareID (a device with allowMultipleAllocations), returned in
    /// `Device.share_id` as the kubeletplugin helper does (draplugin.go).
    pub share_id: Option<String>,
    /// The CDI env its opaque config for this driver gives it, in the e2e
    /// test driver's convention: `admin_KEY=VALUE` from the DeviceClass's,
    /// `user_KEY=VALUE` from the claim's, later entries winning; sorted.
    pub config_env: Vec<String>,
}

/// `namespace/name` of a claim.
pub fn claim_name(c: &Claim) -> String {
    format!("{}/{}", c.namespace, c.name)
}

/// The config entries of `alloc` that apply to `request` (none named: all;
/// else the request or its parent, `parent/sub`), as resourceclaim.ConfigForResult.
fn configs_for<'a>(alloc: &'a serde_json::Value, request: &str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
    let base = request.split('/').next().unwrap_or(request).to_string();
    let request = request.to_string();
    alloc["devices"]["config"].as_array().into_iter().flatten().filter(move |c| {
        let names: Vec<&str> = c["requests"].as_array().into_iter().flatten().filter_map(|r| r.as_str()).collect();
        c["opaque"].is_object()
            && (names.is_empty() || names.contains(&request.as_str()) || names.contains(&base.as_str()))
    })
}

/// The env `driver`'s opaque configs for `request` give (see
/// [`AllocatedDevice::config_env`]): each key of the parameters object,
/// its value a string as it is, any other value as JSON; parameters that
/// are not an object are an error (the e2e test driver's `extractParameters`).
pub fn config_env(
    alloc: &serde_json::Value,
    request: &str,
    driver: &str,
    c: &Claim,
) -> Result<Vec<String>, ClaimError> {
    let mut env = BTreeMap::new();
    for (i, cfg) in configs_for(alloc, request).enumerate() {
        if cfg["opaque"]["driver"] != driver {
            continue;
        }
        let kind = if cfg["source"] == "FromClass" { "admin" } else { "user" };
        let params = &cfg["opaque"]["parameters"];
        if params.is_null() {
            continue;
        }
        let Some(map) = params.as_object() else {
            return Err(ClaimError::Parameters {
                claim: claim_name(c),
                index: i,
                kind,
                parameters: params.to_string(),
            });
        };
        for (k, v) in map {
            // Strings as they are (the e2e test driver's convention); any other value as its JSON,
            // so a driver-specific schema (nested objects) reaches the edits too.
            env.insert(format!("{kind}_{k}"), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()));
        }
    }
    Ok(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect())
}

/// What the kubeletplugin helper checks in a fetched ResourceClaim: the UID
/// matches the one the kubelet sent, `status.allocation` is there; the
/// result is the allocation's devices of `driver`.
pub fn allocation_of(claim: &serde_json::Value, c: &Claim, driver: &str) -> Result<Vec<AllocatedDevice>, ClaimError> {
    let uid = claim["metadata"]["uid"].as_str().unwrap_or_default();
    if uid != c.uid {
        return Err(ClaimError::UidMismatch { claim: claim_name(c), found: uid.to_string(), asked: c.uid.clone() });
    }
    let Some(alloc) = claim["status"].get("allocation").filter(|a| a.is_object()) else {
        return Err(ClaimError::NotAllocated { claim: claim_name(c) });
    };
    let results = alloc["devices"]["results"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .filter(|r| r["driver"] == driver)
        .map(|r| {
            let request = r["request"].as_str().unwrap_or_default().to_string();
            Ok(AllocatedDevice {
                config_env: config_env(alloc, &request, driver, c)?,
                request,
                pool: r["pool"].as_str().unwrap_or_default().to_string(),
                device: r["device"].as_str().unwrap_or_default().to_string(),
                share_id: r["shareID"].as_str().map(str::to_string),
            })
        })
        .collect()
}

/// The claim's `resource.kubernetes.io/pod-claim-name` annotation (a claim
/// made from a template for a pod's claim of that name), as the helper's
/// `newClaimRef` reads it.
pub fn pod_claim_name(claim: &serde_json::Value) -> Option<String> {
    claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"].as_str().map(str::to_string)
}

/// The CDI kind of `driver`'s specs: `k8s.<driver>/claim`.
pub fn cdi_kind(driver: &str) -> String {
    format!("k8s.{driver}/claim")
}

/// The common spec's CDI ID (`--common-cdi-spec`): `k8s.<driver>/claim=common`.
pub fn common_cdi_id(driver: &str) -> String {
    format!("{}=common", cdi_kind(driver))
}

/// The CDI spec file of claim `uid`.
pub fn cdi_path(cfg: &Config, uid: &str) -> PathBuf {
    cfg.cdi_dir.join(format!("dpctl-dra-{}-{}.json", cfg.driver, safe_word(uid)))
}

/// The common CDI spec's file and content (`--common-cdi-spec`, as the
/// example driver's `CreateCommonSpecFile`); `None` without.
pub fn common_spec(cfg: &Config) -> Option<SpecFile> {
    cfg.common_cdi_spec.then(|| SpecFile {
        path: cfg.cdi_dir.join(format!("dpctl-dra-{}-common.json", cfg.driver)),
        spec: json!({
            "cdiVersion": "0.6.0",
            "kind": cdi_kind(&cfg.driver),
            "devices": [{"name": "common", "containerEdits": {"env": [format!("DPCTL_DRA_DRIVER={}", cfg.driver)]}}],
        }),
    })
}

/// A claim's prepared state read back from its CDI spec (the devices in
/// `DPCTL_DRA_DEVICE`, the claim in `DPCTL_DRA_CLAIM`, else the CDI names
/// `<uid>-<device>`): the spec is the driver's record, so a restarted or
/// second instance answers and unprepares the same.
pub fn read_back(spec: &serde_json::Value, uid: &str, path: &str) -> Option<PreparedClaim> {
    let mut devices = Vec::new();
    let mut claim = String::new();
    let prefix = format!("{}-", safe_word(uid));
    for d in spec["devices"].as_array()? {
        let n = devices.len();
        for e in d["containerEdits"]["env"].as_array().into_iter().flatten().filter_map(|e| e.as_str()) {
            if let Some(x) = e.strip_prefix("DPCTL_DRA_DEVICE=") {
                devices.push(x.to_string());
            } else if let Some(x) = e.strip_prefix("DPCTL_DRA_CLAIM=") {
                claim = x.to_string();
            }
        }
        // No env (edits left empty): the device is in the CDI name, `<uid>-<device>`.
        if devices.len() == n {
            if let Some(x) = d["name"].as_str().and_then(|x| x.strip_prefix(&prefix)) {
                devices.push(x.split("-share-").next().unwrap_or(x).to_string());
            }
        }
    }
    (!devices.is_empty()).then(|| PreparedClaim {
        claim,
        uid: uid.to_string(),
        devices,
        cdi_spec: path.to_string(),
        run: None,
    })
}

/// How the driver chooses devices when no allocation names them (no API
/// server): a correct driver keeps a prepared claim's devices and gives a
/// new one the first free device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Choice {
    /// Each prepare call chooses again (the call number picks among the free ones).
    pub again: bool,
    /// The last free device, not the first.
    pub last: bool,
}

/// How one claim is to be prepared: what the shell learnt for it.
#[derive(Debug, Clone, Default)]
pub struct ClaimInput {
    /// The allocation's devices of this driver (fetched; `None`: the driver chooses).
    pub allocated: Option<Vec<AllocatedDevice>>,
    /// The claim as an earlier instance recorded it (read back by the
    /// shell), used when it is not prepared here.
    pub recorded: Option<PreparedClaim>,
    /// The preparation run that names its CDI devices (`racy-prepare`).
    pub run: Option<u64>,
    /// The process ID in its CDI device names (`new-cdi-ids`).
    pub instance: Option<u32>,
}

/// A CDI spec file and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecFile {
    /// Where it goes.
    pub path: PathBuf,
    /// Its content.
    pub spec: serde_json::Value,
}

/// What a prepare of one claim does: the answer, the CDI spec to write and
/// the record kept (already in the state; [`Prepared::restore`] of
/// `previous`, or [`Prepared::forget`], undoes it when the write fails).
#[derive(Debug, Clone)]
pub struct PreparePlan {
    /// The devices answered.
    pub answer: NodePrepareResourceResponse,
    /// The claim's CDI spec (every device it was given).
    pub write: SpecFile,
    /// What the state held before.
    pub previous: Option<PreparedClaim>,
    /// The claim was read back from `ClaimInput::recorded` (not prepared in this process).
    pub recorded: bool,
}

/// The CDI device name of device `d` of claim `uid` (the same in every
/// instance unless `instance` is in it); a share of a shareable device (its
/// allocation's shareID) has a device of its own, `<uid>-<device>-share-<shareID>`.
fn cdi_device(uid: &str, d: &str, share: Option<&String>, run: Option<u64>, instance: Option<u32>) -> String {
    let base = match instance {
        Some(pid) => format!("{}-{d}-{pid}", safe_word(uid)),
        None => format!("{}-{d}", safe_word(uid)),
    };
    let base = match share {
        Some(id) => format!("{base}-share-{}", safe_word(id)),
        None => base,
    };
    match run {
        Some(r) => format!("{base}-r{r}"),
        None => base,
    }
}

/// The allocated devices this driver has (its pool, its device names);
/// one it does not have is an error naming what it has.
fn own_devices(cfg: &Config, c: &Claim, a: Vec<AllocatedDevice>) -> Result<Vec<AllocatedDevice>, ClaimError> {
    if a.is_empty() {
        return Err(ClaimError::NoDeviceOfDriver { claim: claim_name(c), driver: cfg.driver.clone() });
    }
    if let Some(x) = a.iter().find(|x| x.pool != cfg.pool || !cfg.devices.contains(&x.device)) {
        return Err(ClaimError::ForeignDevice {
            claim: claim_name(c),
            device: format!("{}/{}", x.pool, x.device),
            pool: cfg.pool.clone(),
            devices: crate::core::text::id_list(&cfg.devices),
        });
    }
    Ok(a)
}

/// One CDI device of a claim's spec: a device, or a share of one, and the
/// env its opaque config gives it.
struct SpecDevice {
    device: String,
    share: Option<String>,
    config: Vec<String>,
}

/// Decide the prepare of claim `c` in call `call` ([`Prepared::begin_call`])
/// and record it in `st`: the devices its allocation names (or, without
/// one, those it has, else a free one as `choice` says), their CDI IDs and
/// the claim's CDI spec.
pub fn prepare(
    cfg: &Config,
    st: &mut Prepared,
    c: &Claim,
    input: ClaimInput,
    choice: Choice,
    call: u64,
) -> Result<PreparePlan, ClaimError> {
    if c.uid.is_empty() || c.namespace.is_empty() || c.name.is_empty() {
        return Err(ClaimError::MissingFields);
    }
    let mut recorded = false;
    if !st.contains(&c.uid) && input.run.is_none() {
        if let Some(p) = input.recorded {
            st.restore(p);
            recorded = true;
        }
    }
    let allocated = input.allocated.map(|a| own_devices(cfg, c, a)).transpose()?;
    let rotate = if choice.again { call as usize } else { 0 };
    // The allocation's results, one per prepared device in order (a claim may
    // hold several shares of one device, KEP-5075: a result each); a device
    // not at its result's place (a repeat that picked another) takes the first naming it.
    let results: Vec<AllocatedDevice> = allocated.clone().unwrap_or_default();
    let result_of = |i: usize, d: &String| {
        results.get(i).filter(|a| a.device == *d).or_else(|| results.iter().find(|a| a.device == *d))
    };
    let entry = |i: usize, d: &String| {
        let a = result_of(i, d);
        SpecDevice {
            device: d.clone(),
            share: a.and_then(|a| a.share_id.clone()),
            config: a.map(|a| a.config_env.clone()).unwrap_or_default(),
        }
    };
    let devices = match (st.get(&c.uid), allocated) {
        (Some(p), _) if rotate == 0 => p.devices.clone(),
        // The first prepare of a claim follows its allocation (choosing again only changes a repeat).
        (None, Some(a)) => a.into_iter().map(|a| a.device).collect(),
        _ => {
            let held: Vec<&String> =
                st.claims.iter().filter(|(u, _)| *u != &c.uid).flat_map(|(_, p)| &p.devices).collect();
            let free: Vec<&String> = cfg.devices.iter().filter(|d| !held.contains(d)).collect();
            if free.is_empty() {
                return Err(ClaimError::NoFreeDevice { pool: cfg.pool.clone(), count: cfg.devices.len() });
            }
            let pick = if choice.last { free.len() - 1 } else { rotate % free.len() };
            vec![free[pick].clone()]
        }
    };
    // The spec keeps every device this claim was given (a repeat that picks
    // another device leaves earlier CDI IDs resolvable).
    let earlier = st.get(&c.uid).map(|p| p.devices.clone()).unwrap_or_default();
    let mut in_spec: Vec<SpecDevice> = Vec::new();
    for e in earlier.iter().enumerate().chain(devices.iter().enumerate()).map(|(i, d)| entry(i, d)) {
        if !in_spec.iter().any(|x| x.device == e.device && x.share == e.share) {
            in_spec.push(e);
        }
    }
    let run = input.run.or_else(|| st.get(&c.uid).and_then(|p| p.run));
    let instance = input.instance;
    let env = |e: &SpecDevice| -> Vec<String> {
        let d = &e.device;
        let mut env: Vec<String> = if cfg.cdi_env.is_empty() {
            vec![format!("DPCTL_DRA_DEVICE={d}"), format!("DPCTL_DRA_CLAIM={}", claim_name(c))]
        } else {
            cfg.cdi_env.iter().map(|(k, v)| format!("{k}={}", v.replace("{id}", d))).collect()
        };
        if let (true, Some(id)) = (cfg.cdi_env.is_empty(), &e.share) {
            env.push(format!("DPCTL_DRA_SHARE={id}"));
        }
        env.extend(e.config.iter().cloned());
        env
    };
    let kind = cdi_kind(&cfg.driver);
    let write = SpecFile {
        path: cdi_path(cfg, &c.uid),
        spec: json!({
            "cdiVersion": "0.6.0",
            "kind": kind,
            "devices": in_spec.iter().map(|e| json!({
                "name": cdi_device(&c.uid, &e.device, e.share.as_ref(), run, instance),
                "containerEdits": {"env": env(e)},
            })).collect::<Vec<_>>(),
        }),
    };
    let answer = NodePrepareResourceResponse {
        devices: devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d, result_of(i, d)))
            .map(|(d, a)| Device {
                request_names: a.map(|a| vec![a.request.clone()]).unwrap_or_default(),
                pool_name: cfg.pool.clone(),
                device_name: d.clone(),
                cdi_device_ids: {
                    let share = a.and_then(|a| a.share_id.as_ref());
                    let mut ids = vec![format!("{kind}={}", cdi_device(&c.uid, d, share, run, instance))];
                    if cfg.common_cdi_spec {
                        ids.push(common_cdi_id(&cfg.driver));
                    }
                    ids
                },
                share_id: a.and_then(|a| a.share_id.clone()),
            })
            .collect(),
        error: String::new(),
    };
    let record = PreparedClaim {
        claim: claim_name(c),
        uid: c.uid.clone(),
        devices,
        cdi_spec: write.path.display().to_string(),
        run,
    };
    let previous = st.claims.insert(c.uid.clone(), record);
    Ok(PreparePlan { answer, write, previous, recorded })
}

/// Undo a prepare whose CDI spec could not be written: the claim as it was.
pub fn undo(st: &mut Prepared, uid: &str, previous: Option<PreparedClaim>) {
    match previous {
        Some(p) => st.restore(p),
        None => {
            st.forget(uid);
        }
    }
}

/// The device metadata (KEP-5304) of a prepared claim's answer: its devices
/// by request, with the attributes the e2e test driver returns.
pub fn metadata_devices(driver: &str, answer: &NodePrepareResourceResponse) -> BTreeMap<String, Vec<metadata::Device>> {
    let mut by_request: BTreeMap<String, Vec<metadata::Device>> = BTreeMap::new();
    for d in &answer.devices {
        for r in &d.request_names {
            by_request.entry(r.clone()).or_default().push(metadata::Device {
                pool: d.pool_name.clone(),
                name: d.device_name.clone(),
                attributes: [
                    ("driverName".to_string(), driver.to_string()),
                    ("pool".to_string(), d.pool_name.clone()),
                    ("device".to_string(), d.device_name.clone()),
                ]
                .into_iter()
                .collect(),
                network: None,
            });
        }
    }
    by_request
}

/// Add each request's metadata CDI ID (`ids`, by base request) to the
/// first device of that request, as the helper does.
pub fn inject_metadata_ids(answer: &mut NodePrepareResourceResponse, ids: &BTreeMap<String, String>) {
    let mut injected = BTreeSet::new();
    for d in &mut answer.devices {
        for r in &d.request_names {
            let base = metadata::base_request(r);
            if let Some(id) = ids.get(base).filter(|_| !injected.contains(base)) {
                d.cdi_device_ids.push(id.clone());
                injected.insert(base.to_string());
            }
        }
    }
}

/// The answer names requests without their subrequest (`two/pair` → `two`),
/// as the helper's stripSubrequestNames does: the kubelet matches them
/// against the containers' `resources.claims[].request` (claiminfo.go).
pub fn strip_subrequests(answer: &mut NodePrepareResourceResponse) {
    for d in &mut answer.devices {
        for r in &mut d.request_names {
            if let Some((base, _)) = r.split_once('/') {
                *r = base.to_string();
            }
        }
    }
}

/// What an unprepare of one claim does: the claim it had prepared (from
/// the state, else as recorded), forgotten; its CDI spec to remove.
pub fn unprepare(st: &mut Prepared, uid: &str, recorded: Option<PreparedClaim>) -> Option<PreparedClaim> {
    st.forget(uid).or(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            driver: "gpu.x".into(),
            pool: "p".into(),
            devices: vec!["d0".into(), "d1".into()],
            cdi_dir: "/cdi".into(),
            ..crate::plugin::dra::test_config(vec![])
        }
    }

    fn claim(uid: &str) -> Claim {
        Claim { namespace: "ml".into(), name: format!("c-{uid}"), uid: uid.into() }
    }

    fn alloc(device: &str, request: &str) -> AllocatedDevice {
        AllocatedDevice {
            request: request.into(),
            pool: "p".into(),
            device: device.into(),
            share_id: None,
            config_env: vec![],
        }
    }

    fn ids(p: &PreparePlan) -> Vec<String> {
        p.answer.devices.iter().flat_map(|d| d.cdi_device_ids.clone()).collect()
    }

    #[test]
    fn opaque_config_becomes_env_as_the_e2e_test_driver_makes_it() {
        let c = claim("u-1");
        let alloc = json!({"devices": {"config": [
            {"source": "FromClass", "opaque": {"driver": "gpu.x", "parameters": {"mode": "a", "x": "1"}}},
            {"source": "FromClass", "requests": ["other"], "opaque": {"driver": "gpu.x", "parameters": {"no": "1"}}},
            {"source": "FromClaim", "requests": ["r"], "opaque": {"driver": "gpu.x", "parameters": {"mode": "b"}}},
            {"source": "FromClaim", "opaque": {"driver": "other.x", "parameters": {"foreign": "1"}}},
            {"source": "FromClaim", "requests": ["r"], "opaque": {"driver": "gpu.x", "parameters": {"x": "2"}}},
        ]}});
        // The parent request's config applies to its subrequest; another driver's and request's do not.
        let env = config_env(&alloc, "r/small", "gpu.x", &c).unwrap();
        assert_eq!(env, ["admin_mode=a", "admin_x=1", "user_mode=b", "user_x=2"]);
        assert!(config_env(&alloc, "q", "gpu.x", &c).unwrap().iter().all(|e| e.starts_with("admin_")));
        // A driver-specific schema: nested values reach the env as JSON.
        let nested = json!({"devices": {"config": [{"source": "FromClaim", "opaque": {"driver": "gpu.x", "parameters": {"sharing": {"strategy": "TimeSlicing"}, "n": 1}}}]}});
        assert_eq!(
            config_env(&nested, "r", "gpu.x", &c).unwrap(),
            ["user_n=1", "user_sharing={\"strategy\":\"TimeSlicing\"}"]
        );
        let bad = json!({"devices": {"config": [{"source": "FromClaim", "opaque": {"driver": "gpu.x", "parameters": ["n"]}}]}});
        let e = config_env(&bad, "r", "gpu.x", &c).unwrap_err().to_string();
        assert!(e.contains("claim ml/c-u-1: parameters in config #0: decoding user parameters"), "{e}");
    }

    #[test]
    fn the_allocation_is_read_as_the_kubeletplugin_helper_checks_it() {
        let c = Claim { namespace: "ml".into(), name: "gpu".into(), uid: "u-1".into() };
        let obj = json!({"metadata": {"uid": "u-1"}, "status": {"allocation": {"devices": {"results": [
            {"request": "r/a", "driver": "gpu.x", "pool": "p", "device": "d1"},
            {"request": "r2", "driver": "other.x", "pool": "p", "device": "d9"},
        ]}}}});
        let a = allocation_of(&obj, &c, "gpu.x").unwrap();
        assert_eq!(a, vec![alloc("d1", "r/a")]);
        let mut other = obj.clone();
        other["metadata"]["uid"] = json!("u-2");
        assert!(allocation_of(&other, &c, "gpu.x").unwrap_err().to_string().contains("\"u-2\""));
        let unallocated = json!({"metadata": {"uid": "u-1"}, "status": {}});
        assert!(allocation_of(&unallocated, &c, "gpu.x").unwrap_err().to_string().contains("not allocated"));
    }

    #[test]
    fn a_claim_without_an_allocation_gets_a_free_device_and_keeps_it() {
        let cfg = cfg();
        let mut st = Prepared::default();
        let call = st.begin_call();
        let a = prepare(&cfg, &mut st, &claim("a"), ClaimInput::default(), Choice::default(), call).unwrap();
        assert_eq!(a.answer.devices[0].device_name, "d0");
        assert_eq!(ids(&a), ["k8s.gpu.x/claim=a-d0"]);
        assert_eq!(a.write.path, PathBuf::from("/cdi/dpctl-dra-gpu.x-a.json"));
        assert_eq!(
            a.write.spec["devices"][0]["containerEdits"]["env"],
            json!(["DPCTL_DRA_DEVICE=d0", "DPCTL_DRA_CLAIM=ml/c-a"])
        );
        // Another claim takes the next free one; a repeat keeps its device.
        let call = st.begin_call();
        let b = prepare(&cfg, &mut st, &claim("b"), ClaimInput::default(), Choice::default(), call).unwrap();
        assert_eq!(b.answer.devices[0].device_name, "d1");
        let call = st.begin_call();
        let again = prepare(&cfg, &mut st, &claim("a"), ClaimInput::default(), Choice::default(), call).unwrap();
        assert_eq!(ids(&again), ids(&a));
        assert!(again.previous.is_some());
        // Nothing left for a third.
        let call = st.begin_call();
        let e = prepare(&cfg, &mut st, &claim("c"), ClaimInput::default(), Choice::default(), call).unwrap_err();
        assert_eq!(e.to_string(), "no free device in pool p: all 2 are prepared for other claims");
        // Unprepared, its device is free again.
        assert_eq!(unprepare(&mut st, "a", None).map(|p| p.devices), Some(vec!["d0".to_string()]));
        let call = st.begin_call();
        let c = prepare(&cfg, &mut st, &claim("c"), ClaimInput::default(), Choice::default(), call).unwrap();
        assert_eq!(c.answer.devices[0].device_name, "d0");
    }

    #[test]
    fn the_allocation_decides_devices_requests_shares_and_config() {
        let cfg = cfg();
        let mut st = Prepared::default();
        let mut shared = alloc("d1", "r/sub");
        shared.share_id = Some("s1".into());
        shared.config_env = vec!["user_x=1".into()];
        let input = ClaimInput { allocated: Some(vec![shared]), ..Default::default() };
        let p = prepare(&cfg, &mut st, &claim("a"), input, Choice::default(), 1).unwrap();
        let d = &p.answer.devices[0];
        assert_eq!(
            (d.device_name.as_str(), d.request_names.clone(), d.share_id.as_deref()),
            ("d1", vec!["r/sub".into()], Some("s1"))
        );
        assert_eq!(ids(&p), ["k8s.gpu.x/claim=a-d1-share-s1"]);
        assert_eq!(
            p.write.spec["devices"][0]["containerEdits"]["env"],
            json!(["DPCTL_DRA_DEVICE=d1", "DPCTL_DRA_CLAIM=ml/c-a", "DPCTL_DRA_SHARE=s1", "user_x=1"])
        );
        let mut answer = p.answer.clone();
        strip_subrequests(&mut answer);
        assert_eq!(answer.devices[0].request_names, ["r"]);
        // Devices it does not have, or none of its own, are the claim's error.
        let foreign = ClaimInput { allocated: Some(vec![alloc("d9", "r")]), ..Default::default() };
        let e = prepare(&cfg, &mut st, &claim("b"), foreign, Choice::default(), 2).unwrap_err();
        assert!(e.to_string().contains("allocated device p/d9 is not one of this driver's (pool p:"), "{e}");
        let none = ClaimInput { allocated: Some(vec![]), ..Default::default() };
        let e = prepare(&cfg, &mut st, &claim("b"), none, Choice::default(), 2).unwrap_err();
        assert_eq!(e.to_string(), "claim ml/c-b: its allocation has no device of driver gpu.x");
        assert!(!st.contains("b"));
        let e = prepare(&cfg, &mut st, &claim(""), ClaimInput::default(), Choice::default(), 3).unwrap_err();
        assert!(matches!(e, ClaimError::MissingFields));
    }

    #[test]
    fn a_recorded_claim_is_answered_as_recorded_and_a_failed_write_is_undone() {
        let cfg = cfg();
        let mut st = Prepared::default();
        let spec = json!({"devices": [{"name": "a-d1", "containerEdits": {"env": ["DPCTL_DRA_DEVICE=d1", "DPCTL_DRA_CLAIM=ml/c-a"]}}]});
        let rec = read_back(&spec, "a", "/cdi/x.json").unwrap();
        assert_eq!((rec.devices.clone(), rec.claim.as_str()), (vec!["d1".to_string()], "ml/c-a"));
        // Empty edits: the device from the CDI name.
        let bare = json!({"devices": [{"name": "a-d0-share-s", "containerEdits": {}}]});
        assert_eq!(read_back(&bare, "a", "x").unwrap().devices, ["d0"]);
        assert!(read_back(&json!({"devices": []}), "a", "x").is_none());
        let input = ClaimInput { recorded: Some(rec), ..Default::default() };
        let p = prepare(&cfg, &mut st, &claim("a"), input, Choice::default(), 1).unwrap();
        assert!(p.recorded);
        assert_eq!(p.answer.devices[0].device_name, "d1");
        // The write failed: the claim is as it was (read back, so kept).
        undo(&mut st, "a", p.previous.clone());
        assert_eq!(st.get("a").map(|p| p.devices.clone()), Some(vec!["d1".to_string()]));
        let q = prepare(&cfg, &mut st, &claim("b"), ClaimInput::default(), Choice::default(), 2).unwrap();
        undo(&mut st, "b", q.previous);
        assert!(!st.contains("b"));
    }

    #[test]
    fn choosing_again_the_last_or_per_instance_changes_what_is_answered() {
        let cfg = cfg();
        let mut st = Prepared::default();
        let again = Choice { again: true, last: false };
        let first = prepare(&cfg, &mut st, &claim("a"), ClaimInput::default(), again, 1).unwrap();
        let second = prepare(&cfg, &mut st, &claim("a"), ClaimInput::default(), again, 2).unwrap();
        assert_ne!(first.answer.devices[0].device_name, second.answer.devices[0].device_name);
        // The spec keeps the earlier device, so its CDI ID still resolves.
        assert_eq!(second.write.spec["devices"].as_array().map(Vec::len), Some(2));
        let mut st = Prepared::default();
        let last =
            prepare(&cfg, &mut st, &claim("a"), ClaimInput::default(), Choice { again: false, last: true }, 1).unwrap();
        assert_eq!(last.answer.devices[0].device_name, "d1");
        let input = ClaimInput { instance: Some(42), run: Some(7), ..Default::default() };
        let p = prepare(&cfg, &mut Prepared::default(), &claim("a"), input, Choice::default(), 1).unwrap();
        assert_eq!(ids(&p), ["k8s.gpu.x/claim=a-d0-42-r7"]);
    }

    #[test]
    fn metadata_ids_go_to_the_first_device_of_each_request() {
        let cfg = cfg();
        let input = ClaimInput { allocated: Some(vec![alloc("d0", "r/x"), alloc("d1", "r/y")]), ..Default::default() };
        let mut p = prepare(&cfg, &mut Prepared::default(), &claim("a"), input, Choice::default(), 1).unwrap();
        let by = metadata_devices("gpu.x", &p.answer);
        assert_eq!(by.keys().collect::<Vec<_>>(), ["r/x", "r/y"]);
        assert_eq!(by["r/x"][0].attributes["device"], "d0");
        let ids: BTreeMap<String, String> = [("r".to_string(), "gpu.x/metadata=a_r".to_string())].into_iter().collect();
        inject_metadata_ids(&mut p.answer, &ids);
        assert_eq!(p.answer.devices[0].cdi_device_ids.last().map(String::as_str), Some("gpu.x/metadata=a_r"));
        assert_eq!(p.answer.devices[1].cdi_device_ids.len(), 1);
    }
}
