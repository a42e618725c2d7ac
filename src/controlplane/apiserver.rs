//! A local API server inside the mock kubelet: a test stand-in that serves
//! exactly what a DRA driver's kubelet plugin and the mock kubelet need,
//! over HTTP/1.1 on loopback (HTTPS with its own CA, or with
//! `--api-server-insecure` plain HTTP that authenticates nobody: [`listen`]),
//! with a kubeconfig written for the driver (`<root>/kubeconfig`, 0600,
//! written atomically and never over a file the mock kubelet did not write)
//! carrying, over HTTPS, the CA and a random bearer token: a request without
//! it is `401 Unauthorized`, as kube-apiserver answers it.
//! It lives as long as the node (a kubelet restart does not restart it).
//! Supported:
//!
//! - `GET /version` (`version.Info` of the `--kubelet-version` profile's
//!   Kubernetes version, `v1.MINOR.0`), `GET /api/v1/nodes/NAME` (the node
//!   the mock kubelet is); a verb a served path does not serve is 405;
//! - on every ResourceSlice create, replace and patch, kube-apiserver's validation
//!   (`validate`, and [`rules`] for what an update may not change): 422 Invalid
//!   with its field paths; bodies over 3 MiB are 413; the change history is
//!   bounded in count and bytes;
//! - `resource.k8s.io/v1` `resourceslices`: list (label and field selectors,
//!   [`selectors`]), get, create (POST, `generateName` honoured, 409 on a
//!   taken name; uid, generation 1 and creationTimestamp set), replace (PUT;
//!   a stale `resourceVersion` is 409; generation bumped on a spec change),
//!   patch (JSON, merge, strategic merge, apply: [`patch`]), delete (a
//!   DeleteOptions body's preconditions honoured); resource versions are integers;
//! - `resourceclaims` in v1, v1beta2 and v1beta1 paths (the betas where
//!   served: [`Store::with_resource_betas`]): the mock kubelet's
//!   claims ([`claims`]) and those clients create, update, patch and delete,
//!   and their `status` subresource, as the resourceclaim strategy judges
//!   them ([`resourceclaims`], [`rules`]);
//! - the built-in kinds a driver, its helpers, a test or another mock
//!   kubelet joining as a node write ([`builtin`]: Nodes, ConfigMaps,
//!   Secrets, ServiceAccounts, Events, Pods, Deployments, DaemonSets,
//!   Leases, DeviceClasses, ResourceClaimTemplates), stored; after every
//!   write, under its lock, the store's controllers ([`Txn`]);
//! - request bodies decoded as `fieldValidation` says ([`fields`]: `Strict`
//!   refuses unknown and duplicate fields, otherwise they are dropped, with
//!   a `Warning` header under `Warn`);
//! - discovery ([`discovery`]) and custom resources declared by CRD
//!   manifests ([`custom`]);
//! - watches of every served resource (`watch=true`) with watch-list semantics:
//!   `sendInitialEvents=true` (with `resourceVersionMatch=NotOlderThan`, else
//!   422) sends every matching object as ADDED, then a
//!   BOOKMARK annotated `k8s.io/initial-events-end: "true"` carrying the
//!   resource version, then each change; without it, a watch from
//!   `resourceVersion=N` first gets every change after N (the last 1000 are
//!   kept; an older N gets an ERROR event, 410 Expired, as a reflector expects);
//! - a list from a resource version the store has not reached waits up to
//!   3 s for it, then is 504 `ResourceVersionTooLarge` as the watch cache
//!   answers; an `Exact` list at an older version is 410 Expired (no snapshots).
//!
//! Every answer, errors (`Status`) included, is JSON or Kubernetes protobuf
//! by the request's `Accept` (client-go sends
//! `application/vnd.kubernetes.protobuf,application/json`; [`protobuf::negotiate`]),
//! and request bodies are read by their `Content-Type` (JSON or protobuf;
//! anything else is 415; an `Accept` naming nothing served gets JSON, as
//! kube-apiserver answers it). Protobuf objects are
//! `k8s\0` + `runtime.Unknown`; watches are JSON lines of WatchEvents or
//! length-prefixed protobuf WatchEvents (`;stream=watch`), as kube-apiserver
//! sends them. Claims in the v1beta1 and v1beta2 paths are encoded with v1's
//! messages (v1beta2 agrees with v1; v1beta1's request fields are dropped).
//! Fields outside the protobuf subset (proto/k8s) are dropped from protobuf
//! bodies; custom resources are JSON only.

use crate::controlplane::protobuf::{self, Media};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod builtin;
pub mod claims;
mod custom;
mod discovery;
mod fields;
pub mod gated;
mod listen;
mod meta;
mod patch;
mod resourceclaims;
mod rules;
mod selectors;
mod tls;
mod txn;
mod validate;
mod watch;

pub use listen::{kubeconfig, start, Mode, Served};
pub use txn::{Controller, Txn};

use watch::{pump, whole, ChannelBody};

/// The ResourceSlices path.
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
/// Largest request body read: kube-apiserver's `--max-request-body-bytes`
/// default for JSON and protobuf bodies (3 MiB); a larger one is 413.
const MAX_BODY: usize = 3 << 20;

/// The objects the API server holds (ResourceSlices), shared with the DRA manager.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<StoreInner>,
    /// The newest resource version: watches wake on it and read the history
    /// (so a watcher holds nothing the history does not).
    changes: tokio::sync::watch::Sender<u64>,
    /// The controllers run after each write ([`Store::with_controller`]).
    controller: Option<Hook>,
    /// The gates of the resource.k8s.io strategies (the profile's): a write
    /// loses the fields of a feature whose gate is off, unless what it
    /// replaces uses them ([`gated`]).
    gates: gated::ApiGates,
    /// The resource.k8s.io group versions served, preferred first: `v1`,
    /// then `v1beta2` and `v1beta1` where the profile serves them (off by
    /// default from 1.34, as kube-apiserver's betaAPIGroupVersionsDisabledByDefault;
    /// `mock-kubelet --runtime-config` turns them on). An unserved one's
    /// paths are 404 and discovery does not list it ([`Store::serves`]).
    resource_versions: &'static [&'static str],
    /// GenericWorkload (KEP-4671; beta, off, in 1.37): off, scheduling.k8s.io/v1beta1
    /// is not served (pkg/registry/scheduling/rest: no PodGroup storage without
    /// it, and the group version is off in the default runtime-config): its paths
    /// are 404 and discovery does not list it ([`Store::serves`]).
    generic_workload: bool,
    /// DRAWorkloadResourceClaims (KEP-5729; beta, off, in 1.37): off, a PodGroup
    /// write drops `spec.resourceClaims` and a status write
    /// `status.resourceClaimStatuses`, unless the PodGroup replaced names claims.
    workload_resource_claims: bool,
    /// PodGroupPreemptionPolicy (alpha, off, in 1.37): on, the Priority
    /// admission plugin fills a PodGroup's `spec.preemptionPolicy`; off, a
    /// write drops it unless the PodGroup replaced has it.
    pod_group_preemption_policy: bool,
    /// The Kubernetes minor version whose API shapes the decoder knows
    /// (the `--kubelet-version` profile's; 37 by default): a ResourceSlice's
    /// devices have 1.36's `nodeAllocatableResourceMappings` up to 1.36 and
    /// 1.37's `nodeAllocatableResources` from 1.37 ([`fields::versioned`]).
    api_minor: u32,
}

/// The controllers, as a store holds them.
struct Hook(Controller);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Controller")
    }
}

impl Default for Store {
    fn default() -> Self {
        Store {
            inner: Mutex::default(),
            changes: tokio::sync::watch::channel(0).0,
            controller: None,
            gates: gated::ApiGates::default(),
            resource_versions: &["v1"],
            generic_workload: false,
            workload_resource_claims: false,
            pod_group_preemption_policy: false,
            api_minor: 37,
        }
    }
}

/// One change a watch can replay.
#[derive(Debug, Clone)]
struct Change {
    version: u64,
    /// ADDED | MODIFIED | DELETED.
    kind: &'static str,
    obj: Arc<Value>,
    /// Its size as JSON.
    bytes: usize,
}

#[derive(Debug, Default)]
struct StoreInner {
    version: u64,
    slices: BTreeMap<String, Value>,
    /// ResourceClaims by `namespace/name`, as stored ([`resourceclaims::put`]).
    claims: BTreeMap<String, Value>,
    /// Objects of built-in kinds ([`builtin`]) by `group/resource/namespace/name`.
    builtin: BTreeMap<String, Value>,
    /// Resources declared by CustomResourceDefinitions.
    crds: Vec<custom::Crd>,
    /// Objects of custom resources by `group/plural/namespace/name`.
    custom: BTreeMap<String, Value>,
    /// Manifests of CRDs and objects of other groups, by their manifest key.
    manifests: BTreeMap<String, Value>,
    /// DeviceTaintRules of the mock kubelet's manifests, by their manifest
    /// key (not served: what the device-taint eviction controller reads).
    taint_rules: BTreeMap<String, crate::controlplane::objects::TaintRule>,
    /// The stored slices' size as JSON.
    bytes: usize,
    /// Changes with every change to the stored slices ([`crate::core::stamp`]).
    slices_stamp: u64,
    generated: u64,
    /// The latest changes (at most [`HISTORY`], [`HISTORY_BYTES`]): what a watch from a resource version replays.
    history: std::collections::VecDeque<Change>,
    /// The changes' size as JSON.
    history_bytes: usize,
    /// The newest version no longer in `history`.
    forgotten: u64,
}

/// How many changes a watch can resume across.
const HISTORY: usize = 1000;
/// How many bytes (as JSON) of changes are kept for watches; older ones are
/// forgotten (a watch from before them is `410 Gone`, and lists again).
const HISTORY_BYTES: usize = 8 << 20;

/// The size of `v` as JSON, counted without writing it.
fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A watch's start: the resource version now, the matching objects, the
/// changes after the version asked for, and the wake-ups for later ones.
type WatchStart = (u64, Vec<Value>, Vec<Change>, tokio::sync::watch::Receiver<u64>);

impl StoreInner {
    fn put(&mut self, name: String, obj: Value) {
        self.slices_stamp = crate::core::stamp();
        self.bytes += json_size(&obj);
        if let Some(old) = self.slices.insert(name, obj) {
            self.bytes -= json_size(&old).min(self.bytes);
        }
    }

    fn take(&mut self, name: &str) -> Option<Value> {
        let old = self.slices.remove(name)?;
        self.slices_stamp = crate::core::stamp();
        self.bytes -= json_size(&old).min(self.bytes);
        Some(old)
    }

    /// The changes after `seen`; `Err(oldest kept)` when some are forgotten.
    fn since(&self, seen: u64) -> std::result::Result<Vec<Change>, u64> {
        if seen < self.forgotten {
            return Err(self.forgotten + 1);
        }
        Ok(self.history.iter().filter(|c| c.version > seen).cloned().collect())
    }
}

impl Store {
    /// Record a change at the current version (already counted) and tell the watches;
    /// a deleted object carries the version of its deletion, as kube-apiserver sends it.
    fn emit(&self, st: &mut StoreInner, kind: &'static str, mut obj: Value) {
        if kind == "DELETED" {
            obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
        }
        let bytes = json_size(&obj);
        st.history.push_back(Change { version: st.version, kind, obj: Arc::new(obj), bytes });
        st.history_bytes += bytes;
        while st.history.len() > HISTORY || (st.history.len() > 1 && st.history_bytes > HISTORY_BYTES) {
            if let Some(c) = st.history.pop_front() {
                st.forgotten = c.version;
                st.history_bytes -= c.bytes.min(st.history_bytes);
            }
        }
        self.changes.send_replace(st.version);
    }

    /// A store whose every write — through the API or in process — is
    /// followed, under the same lock, by `controller` (the control plane's
    /// controllers: [`crate::controlplane::controller`]).
    pub fn with_controller(controller: Controller) -> Store {
        Store { controller: Some(Hook(controller)), ..Store::default() }
    }

    /// The store with the resource.k8s.io strategies' gates `gates` (by
    /// default kube-apiserver 1.37's: [`gated::ApiGates::default`]).
    pub fn with_api_gates(mut self, gates: gated::ApiGates) -> Store {
        self.gates = gates;
        self
    }

    /// The store decoding the API shapes of Kubernetes 1.`minor` (37 by default).
    pub fn with_api_minor(mut self, minor: u32) -> Store {
        self.api_minor = minor;
        self
    }

    /// The store serving resource.k8s.io `v1beta2` and `v1beta1` beside `v1`
    /// as asked (by default neither, as kube-apiserver from 1.34 without
    /// `--runtime-config resource.k8s.io/v1beta2=true,…`).
    pub fn with_resource_betas(mut self, v1beta2: bool, v1beta1: bool) -> Store {
        self.resource_versions = match (v1beta2, v1beta1) {
            (true, true) => &["v1", "v1beta2", "v1beta1"],
            (true, false) => &["v1", "v1beta2"],
            (false, true) => &["v1", "v1beta1"],
            (false, false) => &["v1"],
        };
        self
    }

    /// The store with the GenericWorkload gate `on` (off by default, as
    /// kube-apiserver's in 1.35–1.37): on, it serves scheduling.k8s.io/v1beta1
    /// PodGroups (what kube-apiserver does with the gate and
    /// `--runtime-config scheduling.k8s.io/v1beta1=true`).
    pub fn with_generic_workload(mut self, on: bool) -> Store {
        self.generic_workload = on;
        self
    }

    /// The store with the DRAWorkloadResourceClaims gate `on` (off by
    /// default, as kube-apiserver's in 1.36–1.37).
    pub fn with_workload_resource_claims(mut self, on: bool) -> Store {
        self.workload_resource_claims = on;
        self
    }

    /// The store with the PodGroupPreemptionPolicy gate `on` (off by
    /// default, as kube-apiserver's in 1.37).
    pub fn with_pod_group_preemption_policy(mut self, on: bool) -> Store {
        self.pod_group_preemption_policy = on;
        self
    }

    /// Whether the API group version `path` (decoded) falls in is served:
    /// all but scheduling.k8s.io/v1beta1 with GenericWorkload off and the
    /// resource.k8s.io betas not in [`Store::resource_versions`].
    pub(crate) fn serves(&self, path: &str) -> bool {
        let under = |gv: &str| path.strip_prefix(gv).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        let beta_off = ["v1beta2", "v1beta1"]
            .iter()
            .any(|v| !self.resource_versions.contains(v) && under(&format!("/apis/resource.k8s.io/{v}")));
        let pod_groups_off = ["v1beta1", "v1alpha2"]
            .iter()
            .any(|v| self.pod_group_version() != Some(v) && under(&format!("/apis/scheduling.k8s.io/{v}")));
        let rules_off = ["v1", "v1beta2"].iter().any(|v| {
            self.taint_rule_version() != Some(v) && under(&format!("/apis/resource.k8s.io/{v}/devicetaintrules"))
        });
        !pod_groups_off && !beta_off && !rules_off
    }

    /// The resource.k8s.io version DeviceTaintRules are served in: none
    /// with DRADeviceTaintRules off; `v1` from 1.37 (GA), `v1beta2` before
    /// (1.36's beta, its gate off by default; v1beta2 itself is served only
    /// with `--runtime-config`, as kube-apiserver's).
    pub(crate) fn taint_rule_version(&self) -> Option<&'static str> {
        self.gates.device_taint_rules.then_some(if self.api_minor >= 37 { "v1" } else { "v1beta2" })
    }

    /// The scheduling.k8s.io version PodGroups are served in: none with
    /// GenericWorkload off; 1.36's kube-apiserver serves them as `v1alpha2`
    /// (pkg/registry/scheduling/rest of v1.36.3), 1.37's as `v1beta1`.
    pub(crate) fn pod_group_version(&self) -> Option<&'static str> {
        self.generic_workload.then_some(if self.api_minor <= 36 { "v1alpha2" } else { "v1beta1" })
    }

    /// Run the controllers after a write, under its lock.
    fn after_write(&self, st: &mut StoreInner) {
        if let Some(Hook(c)) = &self.controller {
            c(&mut Txn { store: self, st });
        }
    }

    /// What the store holds, as JSON bytes: (the stored slices, the change history).
    pub fn held_bytes(&self) -> (usize, usize) {
        let st = self.lock();
        (st.bytes, st.history_bytes)
    }

    /// The changes after `seen` (see [`StoreInner::since`]).
    fn since(&self, seen: u64) -> std::result::Result<Vec<Change>, u64> {
        self.lock().since(seen)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StoreInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write claim `obj` (the kubelet's, in process: [`resourceclaims::put`]); whether it changed.
    pub fn put_claim(&self, obj: Value) -> bool {
        let mut st = self.lock();
        let changed = resourceclaims::put(self, &mut st, obj);
        if changed {
            self.after_write(&mut st);
        }
        changed
    }

    /// Delete claim `key` (`namespace/name`); whether it was stored.
    pub fn delete_claim(&self, key: &str) -> bool {
        let mut st = self.lock();
        let changed = resourceclaims::delete(self, &mut st, key);
        if changed {
            self.after_write(&mut st);
        }
        changed
    }

    /// Write `obj` of `group`'s `resource` (a built-in kind, in process:
    /// [`builtin::put`]); whether it changed.
    pub fn put_object(&self, group: &str, resource: &str, obj: Value) -> bool {
        let mut st = self.lock();
        let changed = builtin::put(self, &mut st, group, resource, obj);
        if changed {
            self.after_write(&mut st);
        }
        changed
    }

    /// Delete `namespace/name` (namespace "" when cluster-scoped) of `group`'s `resource`; whether it was stored.
    pub fn delete_object(&self, group: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let mut st = self.lock();
        let changed = builtin::delete_in_process(self, &mut st, group, resource, namespace, name);
        if changed {
            self.after_write(&mut st);
        }
        changed
    }

    /// Hold DeviceTaintRule manifest `key` (None: forget it), for the controllers.
    pub fn put_taint_rule(&self, key: &str, rule: Option<crate::controlplane::objects::TaintRule>) {
        let mut st = self.lock();
        let changed = match rule {
            Some(r) => st.taint_rules.insert(key.to_string(), r.clone()).is_none_or(|old| old != r),
            None => st.taint_rules.remove(key).is_some(),
        };
        if changed {
            self.after_write(&mut st);
        }
    }

    /// Run the controllers again without a write (a controller's timer: an eviction is due).
    pub fn resync(&self) {
        let mut st = self.lock();
        self.after_write(&mut st);
    }

    /// The pods created through the API that are bound to `node` (`spec.nodeName`), as stored.
    pub fn pods_on(&self, node: &str) -> Vec<Value> {
        let st = self.lock();
        builtin::KINDS
            .iter()
            .find(|k| k.kind == "Pod")
            .map(|k| builtin::objects_of(&st, k, None))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["spec"]["nodeName"] == node)
            .collect()
    }

    /// The stored claims' keys (`namespace/name`).
    pub fn claim_keys(&self) -> Vec<String> {
        self.lock().claims.keys().cloned().collect()
    }

    /// Claim `key` (`namespace/name`), as stored.
    pub fn claim(&self, key: &str) -> Option<Value> {
        self.lock().claims.get(key).cloned()
    }

    /// Every ResourceSlice, as stored.
    pub fn slices(&self) -> Vec<Value> {
        self.lock().slices.values().cloned().collect()
    }

    /// What [`Store::slices`] would return, stamped: equal stamps, equal slices.
    pub fn slices_stamp(&self) -> u64 {
        self.lock().slices_stamp
    }

    /// Every ResourceSlice with the stamp of that set, read at once.
    pub fn stamped_slices(&self) -> (u64, Vec<Value>) {
        let st = self.lock();
        (st.slices_stamp, st.slices.values().cloned().collect())
    }

    /// Delete `driver`'s slices on `node` (what the kubelet does when the
    /// driver's last plugin went away); the names deleted.
    pub fn wipe(&self, driver: &str, node: &str) -> Vec<String> {
        let mut st = self.lock();
        let names: Vec<String> = st
            .slices
            .iter()
            .filter(|(_, s)| s["spec"]["driver"] == driver && s["spec"]["nodeName"] == node)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &names {
            if let Some(s) = st.take(n) {
                st.version += 1;
                self.emit(&mut st, "DELETED", s);
            }
        }
        names
    }

    /// Delete every ResourceSlice of `node`, whatever its driver (what the
    /// kubelet does at start); the names deleted.
    pub fn wipe_node(&self, node: &str) -> Vec<String> {
        let mut st = self.lock();
        let names: Vec<String> =
            st.slices.iter().filter(|(_, s)| s["spec"]["nodeName"] == node).map(|(n, _)| n.clone()).collect();
        for n in &names {
            if let Some(s) = st.take(n) {
                st.version += 1;
                self.emit(&mut st, "DELETED", s);
            }
        }
        names
    }

    /// Start a watch, atomically: the matching slices now, the changes after
    /// `from` (a watch resuming at a resource version), and every later
    /// change. `Err(oldest)`: `from` is older than the changes kept.
    fn watch(&self, sel: &watch::Watched, from: Option<u64>) -> std::result::Result<WatchStart, u64> {
        let st = self.lock();
        let rx = self.changes.subscribe();
        let items = match sel.what {
            watch::What::Slices => st.slices.values().filter(|s| sel.matches(s)).cloned().collect(),
            watch::What::Custom(..) => st.custom.values().filter(|s| sel.matches(s)).cloned().collect(),
            watch::What::Claims(..) => {
                st.claims.values().map(|c| resourceclaims::served(c, "v1")).filter(|c| sel.matches(c)).collect()
            }
            watch::What::Builtin(k, ref ns) => {
                builtin::objects_of(&st, k, ns.as_deref()).into_iter().filter(|o| sel.matches(o)).collect()
            }
        };
        let replay = match from {
            Some(f) => st.since(f)?,
            None => vec![],
        };
        Ok((st.version, items, replay, rx))
    }
}

/// Whether an `Authorization` header carries `token` (compared in constant time).
fn authorized(header: &str, token: &str) -> bool {
    let Some(given) = header.strip_prefix("Bearer ") else { return false };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// kube-apiserver's answer to a verb a served path does not serve (its
/// go-restful service error, as `NewGenericServerResponse` words a 405).
fn method_not_allowed() -> (u16, Value) {
    let (c, mut v) =
        status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource".into());
    v["details"] = json!({});
    (c, v)
}

/// `GET /version` as kube-apiserver answers it (`version.Info`), for the
/// Kubernetes minor version of the `--kubelet-version` profile.
pub fn version_info(minor: u32) -> Value {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        a => a,
    };
    let mut v = json!({
        "major": "1",
        "minor": minor.to_string(),
        "gitVersion": format!("v1.{minor}.0"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": format!("linux/{arch}"),
    });
    // Compatibility versions (KEP-4330) are part of version.Info from 1.33.
    if minor >= 33 {
        v["emulationMajor"] = json!("1");
        v["emulationMinor"] = json!(minor.to_string());
        v["minCompatibilityMajor"] = json!("1");
        v["minCompatibilityMinor"] = json!((minor - 1).to_string());
    }
    v
}

/// kube-apiserver's answer to a request without valid credentials.
fn unauthorized() -> (u16, Value) {
    status(401, "Unauthorized", "Unauthorized".into())
}

fn status(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

/// kube-apiserver's answer under an API group version it does not serve
/// (the NotFound handler's: no name, no details).
fn unserved() -> (u16, Value) {
    let (code, mut v) = status(404, "NotFound", "the server could not find the requested resource".into());
    v["details"] = json!({});
    (code, v)
}

/// The parameters of a query string, decoded as Go's `url.ParseQuery` does
/// (`+` is a space, `%XX` an escaped byte).
fn query_pairs(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s).decode_utf8_lossy().into_owned()
    };
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// The first value of parameter `key`.
fn param(query: &str, key: &str) -> Option<String> {
    query_pairs(query).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A request path, decoded (as Go's `URL.Path`): object names may be escaped.
fn decoded_path(path: &str) -> String {
    percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned()
}

fn is_watch(query: &str) -> bool {
    param(query, "watch").is_some_and(|v| v == "true" || v == "1")
}

/// A stored ResourceSlice names its kind and version, as kube-apiserver answers it.
fn set_kind(obj: &mut Value) {
    obj["apiVersion"] = json!("resource.k8s.io/v1");
    obj["kind"] = json!("ResourceSlice");
}

/// Answer one request with a JSON body (pure over the store): status and body.
pub fn answer(store: &Store, node: &str, method: &str, path: &str, query: &str, body: &[u8]) -> (u16, Value) {
    answer_typed(store, node, method, path, query, "application/json", body)
}

/// A ResourceClaims path: (version, namespace, name, subresource).
type ClaimPath<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

/// Read a ResourceClaims path.
fn claim_path(path: &str) -> Option<ClaimPath<'_>> {
    let rest = path.strip_prefix("/apis/resource.k8s.io/")?;
    let (v, rest) = rest.split_once('/')?;
    if !["v1", "v1beta2", "v1beta1"].contains(&v) {
        return None;
    }
    let parts: Vec<&str> = rest.split('/').collect();
    Some(match parts.as_slice() {
        ["resourceclaims"] => (v, None, None, None),
        ["namespaces", ns, "resourceclaims"] => (v, Some(*ns), None, None),
        ["namespaces", ns, "resourceclaims", name] => (v, Some(*ns), Some(*name), None),
        ["namespaces", ns, "resourceclaims", name, sub] => (v, Some(*ns), Some(*name), Some(*sub)),
        _ => return None,
    })
}

/// The kind a create or replace at `path` writes, when its fields are known ([`fields`]).
fn body_kind(path: &str) -> Option<&'static str> {
    if path.starts_with(SLICES) {
        return Some("ResourceSlice");
    }
    if claim_path(path).is_some_and(|(v, ..)| v == "v1") {
        return Some("ResourceClaim");
    }
    builtin::route(path).map(|r| r.kind.kind)
}

/// The object a create or replace body holds, or the object-shaped patch
/// a merge, strategic merge or apply patch is (its unknown fields are the
/// patched object's: a stored object has none); None for anything else.
fn decoded_body(method: &str, content_type: &str, body: &[u8]) -> Option<Value> {
    match (method, patch::PatchType::of(content_type)) {
        ("POST" | "PUT", None) => serde_json::from_slice(body).ok(),
        ("PATCH", Some(patch::PatchType::Merge | patch::PatchType::Strategic)) => serde_json::from_slice(body).ok(),
        ("PATCH", Some(patch::PatchType::Apply)) => serde_norway::from_slice(body).ok(),
        _ => None,
    }
    .filter(Value::is_object)
}

/// A create or replace body as the decoder takes it (`fieldValidation`):
/// `Strict` refuses duplicate and unknown fields (400); otherwise unknown
/// fields are dropped (the new body; None: the body as sent).
fn field_validation(
    minor: u32,
    method: &str,
    path: &str,
    query: &str,
    content_type: &str,
    body: &[u8],
) -> std::result::Result<Option<Vec<u8>>, (u16, Value)> {
    if !matches!(method, "POST" | "PUT") {
        // A patch's result is judged once applied (fields::patched_strictly).
        return Ok(None);
    }
    let Some(kind) = body_kind(path).map(|k| fields::versioned(k, minor)) else { return Ok(None) };
    let Some(mut obj) = decoded_body(method, content_type, body) else { return Ok(None) };
    if param(query, "fieldValidation").as_deref() == Some("Strict") {
        if let Some(refused) = fields::strict_refusal(kind, body, &obj) {
            return Err(refused);
        }
    }
    if fields::unknown(kind, &obj).is_empty() {
        return Ok(None);
    }
    fields::drop_unknown(kind, &mut obj);
    Ok(Some(obj.to_string().into_bytes()))
}

/// Answer one request whose body (a patch's as sent, any other as JSON)
/// has Content-Type `content_type`.
#[allow(clippy::too_many_arguments)]
pub fn answer_typed(
    store: &Store,
    node: &str,
    method: &str,
    path: &str,
    query: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let path = decoded_path(path);
    let path = path.as_str();
    if !store.serves(path) {
        return unserved();
    }
    if is_watch(query) {
        return status(405, "MethodNotAllowed", format!("{path}: a watch is served over HTTP only"));
    }
    if let Some(d) = discovery::answer(
        path,
        custom::groups(&store.lock()),
        store.pod_group_version(),
        store.resource_versions,
        store.taint_rule_version(),
    ) {
        return if method == "GET" { (200, d) } else { method_not_allowed() };
    }
    if method == "GET" && is_collection(store, path) {
        // A list's options (a get's are GetOptions: these parameters mean nothing there).
        if let Some(refused) = watch::refused_list_options(&query_pairs(query)) {
            return refused;
        }
    }
    let validated;
    let body = match field_validation(store.api_minor, method, path, query, content_type, body) {
        Ok(Some(b)) => {
            validated = b;
            validated.as_slice()
        }
        Ok(None) => body,
        Err(refused) => return refused,
    };
    if let Some(r) = builtin::route(path) {
        let query = query_pairs(query);
        let q = builtin::Request { method, query: &query, content_type, body, node };
        let mut st = store.lock();
        let a = builtin::answer(store, &mut st, &r, &q);
        return written(store, &mut st, method, a);
    }
    if let Some((version, namespace, name, sub)) = claim_path(path) {
        if sub.is_some_and(|s| s != "status") {
            return status(404, "NotFound", format!("{path}: not served by the dpctl mock API server"));
        }
        let mut st = store.lock();
        let query = query_pairs(query);
        let r =
            resourceclaims::ClaimRequest { version, namespace, name, sub, method, query: &query, content_type, body };
        let a = resourceclaims::answer(store, &mut st, &r);
        return written(store, &mut st, method, a);
    }
    let mut st = store.lock();
    if let Some(p) = custom::route(&st, path) {
        return custom::answer(store, &mut st, &p, method, &query_pairs(query), content_type, body);
    }
    if let Some(d) = custom::discovery(&st, path) {
        return if method == "GET" { (200, d) } else { method_not_allowed() };
    }
    let Some(rest) = path.strip_prefix(SLICES) else {
        return status(404, "NotFound", format!("{path}: not served by the dpctl mock API server"));
    };
    let name = rest.strip_prefix('/').unwrap_or("");
    let a = slices_answer(store, &mut st, node, method, name, query, content_type, body);
    written(store, &mut st, method, a)
}

/// Whether `path` (decoded) names a collection this store serves.
fn is_collection(store: &Store, path: &str) -> bool {
    path == SLICES
        || builtin::route(path).is_some_and(|r| r.name.is_none())
        || claim_path(path).is_some_and(|(_, _, name, _)| name.is_none())
        || custom::route(&store.lock(), path).is_some_and(|p| p.name.is_none())
}

/// How long a list from a resource version newer than the store's waits for
/// it (the watch cache's blockTimeout), and the retry it then advises
/// (resourceVersionTooHighRetrySeconds).
const TOO_LARGE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
const TOO_LARGE_RETRY_SECONDS: u64 = 1;

/// What a list's `resourceVersion` asks of the store's history, decided:
/// served now, waited for, or refused.
#[derive(Debug, PartialEq)]
enum ListAt {
    /// Serve the list as the store holds it now.
    Now,
    /// Wait until the store reaches this version (NotOlderThan a newer one).
    Wait(u64),
    /// `Exact` at an older version: this store keeps no snapshots (410 Expired).
    Gone(u64),
}

/// [`ListAt`] of a list query against the store's version `current`.
fn list_at(query: &[(String, String)], current: u64) -> ListAt {
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let Some(v) = get("resourceVersion").and_then(|v| v.parse::<u64>().ok()).filter(|v| *v > 0) else {
        return ListAt::Now;
    };
    match (get("resourceVersionMatch").unwrap_or_default(), v.cmp(&current)) {
        (_, std::cmp::Ordering::Greater) => ListAt::Wait(v),
        ("Exact", std::cmp::Ordering::Less) => ListAt::Gone(v),
        _ => ListAt::Now,
    }
}

/// A list from a resource version the store has not reached waits up to
/// [`TOO_LARGE_WAIT`] for it, then is 504 as kube-apiserver's watch cache
/// answers it (storage.NewTooLargeResourceVersionError); an `Exact` list at
/// an older version is 410 Expired (the store keeps a change history for
/// watches, not snapshots; a client lists again, as after a compaction).
/// None: serve it.
async fn list_version_refused(store: &Store, path: &str, query: &str) -> Option<(u16, Value)> {
    if !is_collection(store, path) {
        return None;
    }
    let query = query_pairs(query);
    let mut rx = store.changes.subscribe();
    let current = *rx.borrow_and_update();
    match list_at(&query, current) {
        ListAt::Now => None,
        ListAt::Gone(v) => Some(status(410, "Expired", format!("too old resource version: {v} ({current})"))),
        ListAt::Wait(v) => {
            let reached = tokio::time::timeout(TOO_LARGE_WAIT, rx.wait_for(|now| *now >= v)).await;
            if matches!(reached, Ok(Ok(_))) {
                return None;
            }
            let now = *store.changes.borrow();
            let (code, mut body) = status(504, "Timeout", format!("Too large resource version: {v}, current: {now}"));
            body["details"] = json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": TOO_LARGE_RETRY_SECONDS});
            Some((code, body))
        }
    }
}

/// After a request's answer `a`: a successful write wakes the controllers
/// (under the same lock, so no watcher sees the write without what they made of it).
fn written(store: &Store, st: &mut StoreInner, method: &str, a: (u16, Value)) -> (u16, Value) {
    if method != "GET" && a.0 < 300 {
        store.after_write(st);
    }
    a
}

/// A request of the ResourceSlices collection or of slice `name`.
#[allow(clippy::too_many_arguments)]
fn slices_answer(
    store: &Store,
    st: &mut StoreInner,
    node: &str,
    method: &str,
    name: &str,
    query: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let parse = |body: &[u8]| {
        serde_json::from_slice::<Value>(body).map_err(|e| status(400, "BadRequest", format!("body is not JSON: {e}")))
    };
    match (method, name) {
        ("GET", "") => {
            let sel = match selectors::of_query("ResourceSlice", &query_pairs(query)) {
                Ok(s) => s,
                Err(e) => return e,
            };
            let items = list_items(st.slices.values().filter(|s| selectors::selected(&sel, s)).cloned());
            (
                200,
                json!({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
            )
        }
        ("DELETE", "") => {
            // DeleteCollection (the kubelet's wipeResourceSlices: a field
            // selector on spec.nodeName and spec.driver): every selected
            // slice deleted, the answer the list of them, as the generic
            // store's DeleteCollection returns it.
            let sel = match selectors::of_query("ResourceSlice", &query_pairs(query)) {
                Ok(s) => s,
                Err(e) => return e,
            };
            let names: Vec<String> =
                st.slices.iter().filter(|(_, s)| selectors::selected(&sel, s)).map(|(n, _)| n.clone()).collect();
            let mut items = Vec::new();
            for n in names {
                if let Some(s) = st.take(&n) {
                    st.version += 1;
                    store.emit(st, "DELETED", s.clone());
                    items.push(s);
                }
            }
            let items = list_items(items);
            (
                200,
                json!({"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
            )
        }
        ("GET", n) => match st.slices.get(n) {
            Some(s) => (200, s.clone()),
            None => status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found")),
        },
        ("POST", "") => {
            let mut obj = match parse(body) {
                Ok(o) => o,
                Err(e) => return e,
            };
            let StoreInner { generated, slices, .. } = &mut *st;
            let n = match meta::name_for_create(
                &obj,
                generated,
                |n| slices.contains_key(n),
                "resourceslices.resource.k8s.io",
            ) {
                Ok(n) => n,
                Err(e) => return e,
            };
            rules::omit_empty_lists(&mut obj);
            gated::default_slice(&mut obj, &crate::core::time::rfc3339_seconds(std::time::SystemTime::now()));
            gated::slice(&store.gates, &mut obj, None);
            let causes = validate::resource_slice(&obj, &n);
            if !causes.is_empty() {
                return validate::invalid_status("resource.k8s.io", "ResourceSlice", &n, &causes);
            }
            if let Err(e) = slice_admission(store, st, node, &obj, &n) {
                return e;
            }
            if st.slices.contains_key(&n) {
                return status(409, "AlreadyExists", format!("resourceslices.resource.k8s.io {n:?} already exists"));
            }
            st.version += 1;
            set_kind(&mut obj);
            meta::created(&mut obj, &n, st.version, &format!("slice\0{n}\0{}", st.version), false);
            st.put(n, obj.clone());
            store.emit(st, "ADDED", obj.clone());
            (201, obj)
        }
        ("PUT", n) if !n.is_empty() => match parse(body) {
            Ok(obj) => replace_slice(store, st, node, n, obj),
            Err(e) => e,
        },
        ("PATCH", n) if !n.is_empty() => {
            let Some(cur) = st.slices.get(n).cloned() else {
                return status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found"));
            };
            match patch::patched(&cur, content_type, body, &query_pairs(query), patch::BUILTIN_TYPES).and_then(|o| {
                let kind = fields::versioned("ResourceSlice", store.api_minor);
                fields::patched_strictly("resource.k8s.io", kind, n, o, query)
            }) {
                Ok(obj) => replace_slice(store, st, node, n, obj),
                Err(e) => e,
            }
        }
        ("DELETE", n) if !n.is_empty() => {
            // The body, when any, is DeleteOptions (client-go always sends one); its preconditions count.
            let opts = if body.is_empty() { Value::Null } else { parse(body).unwrap_or(Value::Null) };
            let Some(cur) = st.slices.get(n) else {
                return status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found"));
            };
            for (field, have) in
                [("uid", &cur["metadata"]["uid"]), ("resourceVersion", &cur["metadata"]["resourceVersion"])]
            {
                let want = opts["preconditions"][field].as_str().unwrap_or_default();
                let have = have.as_str().unwrap_or_default();
                if !want.is_empty() && want != have {
                    let what = if field == "uid" { "UID" } else { "ResourceVersion" };
                    return status(409, "Conflict", format!("Operation cannot be fulfilled on resourceslices.resource.k8s.io {n:?}: Precondition failed: {what} in precondition: {want}, {what} in object meta: {have}"));
                }
            }
            match st.take(n) {
                Some(s) => {
                    st.version += 1;
                    store.emit(st, "DELETED", s.clone());
                    (200, s)
                }
                None => status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found")),
            }
        }
        _ => method_not_allowed(),
    }
}

/// The validating admission of slice `n` (after validation, as
/// kube-apiserver's registry calls it): the NodeDeclaredFeatures plugin's
/// check against the stored Nodes, this node's among them
/// ([`gated::node_allocatable_admission`]).
fn slice_admission(store: &Store, st: &mut StoreInner, node: &str, obj: &Value, n: &str) -> Result<(), (u16, Value)> {
    if store.gates.node_allocatable_resources {
        builtin::ensure_node(store, st, node);
    }
    let nodes = builtin::nodes(st);
    gated::node_allocatable_admission(&store.gates, obj, &nodes).map_err(|why| {
        let (code, mut v) =
            status(403, "Forbidden", format!("resourceslices.resource.k8s.io {n:?} is forbidden: {why}"));
        v["details"] = json!({"name": n, "group": "resource.k8s.io", "kind": "resourceslices"});
        (code, v)
    })
}

/// Replace slice `n` with `obj` (a PUT's body, or a patch's result).
fn replace_slice(store: &Store, st: &mut StoreInner, node: &str, n: &str, mut obj: Value) -> (u16, Value) {
    // handlers/rest.go checkName: the body's name is the URL's (before the object is looked up).
    if let Some(other) = obj["metadata"]["name"].as_str().filter(|o| !o.is_empty() && o != &n) {
        return status(
            400,
            "BadRequest",
            format!("the name of the object ({other}) does not match the name on the URL ({n})"),
        );
    }
    let Some(cur) = st.slices.get(n) else {
        return status(404, "NotFound", format!("resourceslices.resource.k8s.io {n:?} not found"));
    };
    rules::omit_empty_lists(&mut obj);
    gated::default_slice(&mut obj, &crate::core::time::rfc3339_seconds(std::time::SystemTime::now()));
    gated::slice(&store.gates, &mut obj, Some(cur));
    let mut causes = validate::resource_slice(&obj, n);
    causes.extend(rules::slice_update(&obj, cur));
    if !causes.is_empty() {
        return validate::invalid_status("resource.k8s.io", "ResourceSlice", n, &causes);
    }
    let want = obj["metadata"]["resourceVersion"].as_str().unwrap_or_default();
    if !want.is_empty() && want != cur["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
        return status(409, "Conflict", format!("Operation cannot be fulfilled on resourceslices.resource.k8s.io {n:?}: the object has been modified; please apply your changes to the latest version and try again"));
    }
    let cur = cur.clone();
    if let Err(e) = slice_admission(store, st, node, &obj, n) {
        return e;
    }
    st.version += 1;
    set_kind(&mut obj);
    // metadata.generation counts spec changes (kube-apiserver's strategy).
    meta::updated(&mut obj, &cur, st.version);
    st.put(n.to_string(), obj.clone());
    store.emit(st, "MODIFIED", obj.clone());
    (200, obj)
}

/// A typed list's items as kube-apiserver writes them: without their
/// `apiVersion` and `kind` (a list of a built-in kind encodes its items'
/// empty TypeMeta; a custom resource's list, unstructured, keeps them).
/// Watch events and single objects carry theirs.
pub(super) fn list_items(items: impl IntoIterator<Item = Value>) -> Vec<Value> {
    items
        .into_iter()
        .map(|mut o| {
            if let Some(m) = o.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            o
        })
        .collect()
}

/// One HTTP answer: a status and a whole body, in `media`.
fn reply(media: Media, code: u16, v: &Value) -> http::Response<ChannelBody> {
    let (media, code, body) = match media {
        Media::Json => (media, code, v.to_string().into_bytes()),
        // An object with no protobuf form (a custom resource) is JSON, the next type client-go accepts.
        Media::Protobuf if protobuf::message_for(v["kind"].as_str().unwrap_or_default()).is_none() => {
            (Media::Json, code, v.to_string().into_bytes())
        }
        Media::Protobuf => match protobuf::encode_object(v) {
            Ok(b) => (media, code, b),
            Err(e) => {
                let (c, st) = status(500, "InternalError", format!("cannot encode the answer as protobuf: {e}"));
                (Media::Json, c, st.to_string().into_bytes())
            }
        },
    };
    http::Response::builder()
        .status(code)
        .header("content-type", media.content_type(false))
        .body(ChannelBody::Whole(Some(hyper::body::Bytes::from(body))))
        .unwrap_or_else(|_| http::Response::new(whole(String::new())))
}

/// kube-apiserver's answer to a body over [`MAX_BODY`].
fn too_large() -> (u16, Value) {
    status(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {MAX_BODY}"))
}

/// Read a request body, never holding more than [`MAX_BODY`] bytes of it:
/// `Err` (413) as soon as it is longer (or says it is, by Content-Length).
async fn read_body(mut body: hyper::body::Incoming, length: Option<u64>) -> std::result::Result<Vec<u8>, (u16, Value)> {
    use hyper::body::Body as _;
    if length.is_some_and(|l| l > MAX_BODY as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(length.map_or(0, |l| l as usize));
    while let Some(f) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(f) = f else { break };
        if let Ok(d) = f.into_data() {
            if buf.len() + d.len() > MAX_BODY {
                return Err(too_large());
            }
            buf.extend_from_slice(&d);
        }
    }
    Ok(buf)
}

/// A ResourceSlice create or replace whose device count alone is over the
/// limit: its 422, found without building the object (a refused body costs
/// no more memory than its bytes).
fn precheck(method: &str, path: &str, content_type: &str, buf: &[u8]) -> Option<(u16, Value)> {
    if !matches!(method, "POST" | "PUT") || !path.starts_with(SLICES) {
        return None;
    }
    let shape = match protobuf::request_media(content_type)? {
        Media::Json => validate::json_shape(buf)?,
        Media::Protobuf => {
            let (name, devices, advanced) = protobuf::slice_shape(buf)?;
            validate::Shape { name, devices, advanced }
        }
    };
    shape.refusal()
}

/// The request body as JSON bytes, whatever its Content-Type; or the error answer.
fn json_body(content_type: &str, buf: Vec<u8>) -> std::result::Result<Vec<u8>, (u16, Value)> {
    match protobuf::request_media(content_type) {
        Some(Media::Json) => Ok(buf),
        Some(Media::Protobuf) if buf.is_empty() => Ok(buf),
        Some(Media::Protobuf) => protobuf::decode_object(&buf)
            .map(|v| v.to_string().into_bytes())
            .map_err(|e| status(400, "BadRequest", format!("the protobuf body cannot be decoded: {e}"))),
        None => Err(status(
            415,
            "UnsupportedMediaType",
            format!(
                "the body's content type {content_type:?} is not supported; send application/json or {}",
                protobuf::PROTOBUF
            ),
        )),
    }
}

/// What every request is served with.
struct Ctx {
    store: Arc<Store>,
    node: String,
    /// The Kubernetes minor version `/version` answers.
    minor: u32,
    /// The bearer token every request must carry (none: plain HTTP, nobody is authenticated).
    token: Option<String>,
    tracker: TaskTracker,
    stop: CancellationToken,
}

/// Serve one request: authenticate it, negotiate the answer's encoding,
/// decode the body, answer or start a watch.
async fn respond(
    req: http::Request<hyper::body::Incoming>,
    ctx: Arc<Ctx>,
) -> std::result::Result<http::Response<ChannelBody>, std::convert::Infallible> {
    let Ctx { store, node, minor, token, tracker, stop } = &*ctx;
    let (store, minor) = (store.clone(), *minor);
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let media = protobuf::negotiate(&header("accept"));
    if token.as_deref().is_some_and(|t| !authorized(&header("authorization"), t)) {
        let (code, v) = unauthorized();
        return Ok(reply(media, code, &v));
    }
    if decoded_path(req.uri().path()) == "/version" {
        // version.Info has no protobuf form: JSON, as kube-apiserver sends it.
        let (code, v) =
            if req.method() == http::Method::GET { (200, version_info(minor)) } else { method_not_allowed() };
        return Ok(reply(if code == 200 { Media::Json } else { media }, code, &v));
    }
    if !store.serves(&decoded_path(req.uri().path())) {
        let (code, v) = unserved();
        return Ok(reply(media, code, &v));
    }
    let groups = custom::groups(&store.lock());
    let found = {
        let path = decoded_path(req.uri().path());
        discovery::answer(&path, groups, store.pod_group_version(), store.resource_versions, store.taint_rule_version())
            .or_else(|| custom::discovery(&store.lock(), &path))
    };
    if let Some(d) = found {
        // Discovery documents are read as JSON (client-go's discovery client asks for JSON).
        let (code, v) = if req.method() == http::Method::GET { (200, d) } else { method_not_allowed() };
        return Ok(reply(if code == 200 { Media::Json } else { media }, code, &v));
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let watched = if req.method() == http::Method::GET && is_watch(&query) {
        let path = decoded_path(req.uri().path());
        let st = store.lock();
        match custom::route(&st, &path) {
            Some(p) if p.name.is_none() => Some((
                watch::What::Custom(p.crd.clone(), p.version.to_string(), p.namespace.map(str::to_string)),
                p.crd.kind.clone(),
            )),
            _ if path == SLICES => Some((watch::What::Slices, "ResourceSlice".to_string())),
            _ if builtin::route(&path).is_some_and(|r| r.name.is_none()) => builtin::route(&path)
                .map(|r| (watch::What::Builtin(r.kind, r.namespace.map(str::to_string)), r.kind.kind.to_string())),
            _ => match claim_path(&path) {
                Some((version, namespace, None, None)) => Some((
                    watch::What::Claims(version.to_string(), namespace.map(str::to_string)),
                    "ResourceClaim".to_string(),
                )),
                _ => None,
            },
        }
    } else {
        None
    };
    if let Some((what, kind)) = watched {
        if let Some(refused) = watch::refused_options(&query_pairs(&query)) {
            return Ok(reply(media, refused.0, &refused.1));
        }
        let sel = match selectors::of_query(&kind, &query_pairs(&query)) {
            Ok(sel) => watch::Watched { what, sel },
            Err((code, v)) => return Ok(reply(media, code, &v)),
        };
        // Custom resources (and kinds outside the protobuf subset) have no protobuf form here: their watches are JSON.
        let no_protobuf = match &sel.what {
            watch::What::Custom(..) => true,
            watch::What::Builtin(k, _) => protobuf::message_for(k.kind).is_none(),
            _ => false,
        };
        let media = if no_protobuf { Media::Json } else { media };
        // A few frames in flight: a watcher that never reads holds little beyond the history.
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tracker.spawn(pump(store, sel, query, media, tx, stop.clone()));
        let resp = http::Response::builder()
            .status(200)
            .header("content-type", media.content_type(true))
            .body(ChannelBody::Stream(rx))
            .unwrap_or_else(|_| http::Response::new(whole(String::new())));
        return Ok(resp);
    }
    let content_type = header("content-type");
    let length = header("content-length").parse::<u64>().ok();
    let (parts, body) = req.into_parts();
    let path = decoded_path(parts.uri.path());
    let is_patch = parts.method == http::Method::PATCH && patch::PatchType::of(&content_type).is_some();
    let read = read_body(body, length).await.and_then(|buf| {
        match precheck(parts.method.as_str(), &path, &content_type, &buf) {
            Some(refused) => Err(refused),
            // A patch is read by its own type.
            None if is_patch => Ok(buf),
            None => json_body(&content_type, buf),
        }
    });
    let mut warnings = Vec::new();
    let refused = match parts.method == http::Method::GET {
        true => list_version_refused(&store, &path, &query).await,
        false => None,
    };
    let (code, v) = match (refused, read) {
        (Some(r), _) => r,
        (None, Err(e)) => e,
        (None, Ok(buf)) => {
            let content_type = if is_patch { content_type.as_str() } else { "application/json" };
            warnings = field_warnings(store.api_minor, parts.method.as_str(), &path, &query, content_type, &buf);
            answer_typed(&store, node, parts.method.as_str(), parts.uri.path(), &query, content_type, &buf)
        }
    };
    if code < 300 && matches!(parts.method.as_str(), "POST" | "PUT" | "PATCH") {
        warnings.extend(strategy_warnings(&v));
    }
    let mut resp = reply(media, code, &v);
    if code < 300 {
        for w in warnings {
            // RFC 7234 warn-code 299, agent "-", the text quoted (apiserver's warning recorder).
            let text = format!("299 - {}", validate::go_quote(&w));
            if let Ok(h) = http::HeaderValue::from_str(&text) {
                resp.headers_mut().append("warning", h);
            }
        }
    }
    Ok(resp)
}

/// The warnings a create or replace gets under `fieldValidation=Warn`
/// (the default): one per duplicate and unknown field, as the decoder
/// words them (`unknown field "spec.bogus"`).
/// The warnings a kind's strategy gives on create and update, from the
/// object written (resourceslice strategy.go WarningsOnCreate/WarningsOnUpdate:
/// a driver name with upper-case characters).
fn strategy_warnings(written: &Value) -> Vec<String> {
    let driver = written["spec"]["driver"].as_str().unwrap_or_default();
    match written["kind"] == "ResourceSlice" && driver != driver.to_lowercase() {
        true => vec![format!(
            "spec.driver: driver names should be lowercase; {} contains uppercase characters",
            validate::go_quote(driver)
        )],
        false => vec![],
    }
}

fn field_warnings(minor: u32, method: &str, path: &str, query: &str, content_type: &str, body: &[u8]) -> Vec<String> {
    if param(query, "fieldValidation").is_some_and(|v| v != "Warn") {
        return vec![];
    }
    let Some(kind) = body_kind(path).map(|k| fields::versioned(k, minor)) else { return vec![] };
    let Some(obj) = decoded_body(method, content_type, body) else { return vec![] };
    let mut out: Vec<String> = fields::duplicate(body).map(|d| format!("duplicate field {d:?}")).into_iter().collect();
    out.extend(fields::unknown(kind, &obj).into_iter().map(|u| format!("unknown field {u:?}")));
    out
}

#[cfg(test)]
mod tests;
