//! What the DRA manager knows of claims, without I/O: the claim cache
//! ([`super::claiminfo`]) with the pods using its claims (each a
//! [`PodInfo`]), the pods whose claims are being unprepared in the
//! background (each with the shell's handle `T` to stop that), and the
//! claims read from the API server for its pods — and what is shown of
//! them ([`super::view`], [`super::extended`], [`super::claim_objects`]).

use super::claiminfo::{generated_claim_name, ClaimCache, ClaimsPhase, PodClaim};
use super::healthinfo::HealthCache;
use super::view::{self, PodInfo};
use super::{claim_objects, extended};
use crate::api::podresources::DynamicResource;
use crate::controlplane::allocator::{self, Allocated};
use crate::controlplane::objects::Object;
use crate::kubelet::manifest::extended::RequestMapping;
use crate::kubelet::manifest::{ClaimSource, Pod};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The claim cache and the pods using it.
#[derive(Debug)]
pub struct ClaimBook<T> {
    /// Claims by `namespace/name`.
    pub cache: ClaimCache,
    /// Pod UID → what the manager knows of it.
    pods: BTreeMap<String, PodInfo>,
    /// Pod UID → its background unprepare.
    unpreparing: BTreeMap<String, T>,
    /// Claims (`namespace/name`) read from the API server for its pods
    /// (fetched at every prepare attempt): the API server's, never written
    /// into it from here.
    api_claims: BTreeSet<String>,
}

impl<T> Default for ClaimBook<T> {
    fn default() -> Self {
        ClaimBook {
            cache: ClaimCache::default(),
            pods: BTreeMap::new(),
            unpreparing: BTreeMap::new(),
            api_claims: BTreeSet::new(),
        }
    }
}

/// A pod's claims as it names them.
pub fn pod_claims(pod: &Pod) -> Vec<PodClaim> {
    pod.resource_claims
        .iter()
        .map(|c| match &c.source {
            ClaimSource::Claim(n) | ClaimSource::Generated { claim: n, .. } => {
                PodClaim { pod_claim: c.name.clone(), name: n.clone(), template: None, spec: None }
            }
            ClaimSource::Template(t) => PodClaim {
                pod_claim: c.name.clone(),
                name: generated_claim_name(&pod.name, &c.name),
                template: Some(t.clone()),
                spec: None,
            },
            // The special claim: made here from its requests, or (a pod of the API) the
            // scheduler's, read from the API server as any named claim.
            ClaimSource::Extended(x) => PodClaim {
                pod_claim: c.name.clone(),
                name: x.status.resource_claim_name.clone(),
                template: None,
                spec: (!x.spec.requests.is_empty()).then(|| x.spec.clone()),
            },
        })
        .collect()
}

/// What the manager knows of `pod` before any attempt at its claims.
pub fn pod_info(pod: &Pod) -> PodInfo {
    let pod_claims = pod_claims(pod);
    PodInfo {
        uid: pod.uid.clone(),
        pod: pod.key(),
        claims: pod_claims.iter().map(|c| (c.pod_claim.clone(), c.name.clone())).collect(),
        containers: pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .filter(|c| !c.claims.is_empty())
            .map(|c| (c.name.clone(), c.claims.clone()))
            .collect(),
        phase: ClaimsPhase::Preparing,
        error: None,
        allocated_resources_status: BTreeMap::new(),
        namespace: pod.namespace.clone(),
        pod_claims,
        // UpdateAllocatedResourcesStatus walks status.containerStatuses
        // (app containers) only.
        claim_refs: pod
            .containers
            .iter()
            .filter(|c| !c.claims.is_empty())
            .map(|c| {
                let requests = c.claim_requests.iter().cloned().chain(std::iter::repeat(String::new()));
                (c.name.clone(), c.claims.iter().cloned().zip(requests).collect())
            })
            .collect(),
        cdi_refs: pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .filter(|c| !c.claims.is_empty())
            .map(|c| {
                let requests = c.claim_requests.iter().cloned().chain(std::iter::repeat(String::new()));
                (c.name.clone(), c.claims.iter().cloned().zip(requests).collect())
            })
            .collect(),
        cdi_devices: BTreeMap::new(),
        given_devices: BTreeMap::new(),
        extended: extended::of(pod).cloned(),
        extended_view: view::View::default(),
    }
}

/// A pod the checkpoint holds claims of and that did not come back after a
/// restart, known by its UID, namespace and claim names.
fn gone_pod(uid: &str, namespace: &str, names: &[String]) -> PodInfo {
    let pod_claims: Vec<PodClaim> =
        names.iter().map(|n| PodClaim { pod_claim: n.clone(), name: n.clone(), template: None, spec: None }).collect();
    PodInfo {
        uid: uid.to_string(),
        pod: format!("{namespace}/(gone, uid {uid})"),
        claims: names.iter().map(|n| (n.clone(), n.clone())).collect(),
        containers: BTreeMap::new(),
        phase: ClaimsPhase::Unpreparing,
        error: None,
        allocated_resources_status: BTreeMap::new(),
        namespace: namespace.to_string(),
        pod_claims,
        claim_refs: BTreeMap::new(),
        cdi_refs: BTreeMap::new(),
        cdi_devices: BTreeMap::new(),
        given_devices: BTreeMap::new(),
        extended: None,
        extended_view: view::View::default(),
    }
}

impl<T> ClaimBook<T> {
    /// Know `pod` from now on; the handle of a background unprepare of an
    /// earlier pod of the same UID (the shell stops it).
    pub fn track(&mut self, pod: &Pod) -> Option<T> {
        let info = pod_info(pod);
        let old = self.unpreparing.remove(&pod.uid);
        self.pods.insert(pod.uid.clone(), info);
        old
    }

    /// Whether pod `uid` is known.
    pub fn knows(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Pod `uid`, known from now on (what an attempt at it starts from).
    pub fn pod_entry(&mut self, pod: &Pod) -> &PodInfo {
        self.pods.entry(pod.uid.clone()).or_insert_with(|| pod_info(pod))
    }

    /// Pod `uid`, when known.
    pub fn pod(&self, uid: &str) -> Option<&PodInfo> {
        self.pods.get(uid)
    }

    /// An attempt at preparing pod `uid`'s claims ended: prepared, or the error kept until one succeeds.
    pub fn prepare_done(&mut self, uid: &str, error: Option<String>) {
        if let Some(p) = self.pods.get_mut(uid) {
            match error {
                None => {
                    p.error = None;
                    p.phase = ClaimsPhase::Prepared;
                }
                Some(e) => p.error = Some(e),
            }
        }
    }

    /// The claims to unprepare of pod `uid` (the pod's phase turns to
    /// Unpreparing): the cache's claims of the pod first (manager.go,
    /// kubernetes#139772), the pod's names when none; with the pod's key.
    pub fn unprepare_keys(&mut self, uid: &str) -> Option<(String, Vec<String>)> {
        let p = self.pods.get_mut(uid)?;
        p.phase = ClaimsPhase::Unpreparing;
        let keys = Some(self.cache.keys_for_pod(uid)).filter(|k| !k.is_empty()).unwrap_or_else(|| p.claim_keys());
        Some((p.pod.clone(), keys))
    }

    /// An attempt at unpreparing pod `uid`'s claims ended: on success the pod
    /// is forgotten, else the error kept. The pod's key, when it was known.
    pub fn unprepare_done(&mut self, uid: &str, error: Option<String>) -> Option<String> {
        match error {
            None => self.pods.remove(uid).map(|p| p.pod),
            Some(e) => self.pods.get_mut(uid).map(|p| {
                p.error = Some(e);
                p.pod.clone()
            }),
        }
    }

    /// A background unprepare of known pod `uid` starts with handle `t`:
    /// the handle of the one it replaces (the shell stops it). `Err(t)`: the
    /// pod is not known, nothing starts.
    pub fn start_unprepare(&mut self, uid: &str, t: T) -> Result<Option<T>, T> {
        if !self.pods.contains_key(uid) {
            return Err(t);
        }
        Ok(self.unpreparing.insert(uid.to_string(), t))
    }

    /// A background unprepare of pod `uid` ended.
    pub fn end_unprepare(&mut self, uid: &str) {
        self.unpreparing.remove(uid);
    }

    /// After the first manifest scan of a (re)start: the pods the
    /// checkpoint's claims name that did not come back, known from now on
    /// (phase Unpreparing); their UIDs.
    pub fn orphans(&mut self) -> Vec<String> {
        let known: BTreeSet<String> = self.pods.keys().cloned().collect();
        let orphans = self.cache.orphans(&known);
        for (uid, (namespace, names)) in &orphans {
            self.pods.insert(uid.clone(), gone_pod(uid, namespace, names));
        }
        orphans.into_keys().collect()
    }

    /// Claim `namespace/name` was read from the API server.
    pub fn read_from_api(&mut self, key: String) {
        self.api_claims.insert(key);
    }

    /// Whether claim `namespace/name` was read from the API server (the
    /// control plane's, not allocated here).
    pub fn is_api(&self, key: &str) -> bool {
        self.api_claims.contains(key)
    }

    /// Claim `namespace/name`'s object went away: no longer the API server's.
    pub fn forget_api(&mut self, key: &str) {
        self.api_claims.remove(key);
    }

    /// The devices held by the control plane's claims `elsewhere` (with
    /// their keys) that were not read from the API server here.
    pub fn held(&self, elsewhere: &[(String, Value)]) -> Vec<Allocated> {
        elsewhere
            .iter()
            .filter(|(k, _)| !self.api_claims.contains(k))
            .flat_map(|(_, c)| c["status"]["allocation"]["devices"]["results"].as_array().map(|r| allocator::given(r)))
            .flatten()
            .collect()
    }

    /// The containers of `pod`'s special claim that get no CDI device, with why.
    pub fn unserved(&self, pod: &Pod) -> Vec<(RequestMapping, String)> {
        let Some(x) = extended::of(pod) else { return Vec::new() };
        let key = format!("{}/{}", pod.namespace, x.status.resource_claim_name);
        self.cache.get(&key).map(|c| extended::unserved(&x.status, &extended::devices(c))).unwrap_or_default()
    }

    /// The claims as resource.k8s.io objects on `node` (what the local API
    /// server serves), but those of the API server's pods, which are its own.
    pub fn objects(&self, objects: &BTreeMap<String, Object>, node: &str) -> Vec<Value> {
        let mut out = claim_objects::claim_objects(&self.cache, &self.pods, objects, node);
        extended::claim_objects(&mut out, &self.pods);
        out.retain(|o| {
            let m = &o["metadata"];
            let key =
                format!("{}/{}", m["namespace"].as_str().unwrap_or_default(), m["name"].as_str().unwrap_or_default());
            !self.api_claims.contains(&key)
        });
        out
    }

    /// Pods with claims, each container's allocatedResourcesStatus filled
    /// from `health` (with messages when `message`).
    pub fn pods(&self, health: &HealthCache, message: bool) -> Vec<PodInfo> {
        self.pods
            .values()
            .map(|p| {
                let mut p = view::with_health(p, &self.cache, health);
                p.cdi_devices = view::container_cdi(&p, &self.cache);
                p.given_devices = view::container_devices(&p, &self.cache);
                extended::fill(if message { p } else { view::without_messages(p) }, &self.cache)
            })
            .collect()
    }

    /// PodResources' dynamic_resources for one container of pod `uid`.
    pub fn dynamic_resources(&self, uid: &str, container: &str) -> Vec<DynamicResource> {
        let Some(p) = self.pods.get(uid) else { return vec![] };
        let mut out = view::dynamic_resources(p, container, &self.cache);
        out.extend(extended::dynamic_resource(p, container, &self.cache));
        out
    }
}
