//! The device-taint eviction controller (pkg/controller/devicetainteviction,
//! device_taint_eviction.go): a pod bound to a node whose allocated claim,
//! reserved for it, has a device with a NoExecute taint it does not
//! tolerate — the device's own taint in its ResourceSlice or a
//! DeviceTaintRule's — is evicted at the taint's timeAdded plus the
//! smallest tolerationSeconds of the NoExecute tolerations that match it
//! ([`crate::controlplane::allocator::taints::evictions`], claimEvictionTime;
//! podEvictionTime: the earliest of its claims'). Evicting it is what
//! `addConditionAndDeletePod` does: an Event (`DeviceTaintManagerEviction`,
//! "Marking for deletion", emitPodDeletionEvent), the pod's
//! `DisruptionTarget=True` condition ([`CONDITION`], [`REASON`],
//! [`MESSAGE`]), then the pod deleted with its UID as precondition (its
//! grace period: the node that runs it stops it and deletes it for good, as
//! it does any deleted pod).
//!
//! The decision is [`decide`], pure (the clock and when each taint without
//! timeAdded was first seen are its inputs); [`sync`] is its shell over the
//! store, run after every write under the store's lock with the other
//! controllers, and again when [`Timer`] says an eviction is due (a
//! toleration's seconds, a timeAdded in the future). The mock kubelet's own
//! static pods are not in the store (no mirror pods: upstream forbids
//! claims in static pods); it runs [`decide`] over their prepared claims
//! itself.

use crate::controlplane::allocator::{self, Allocated, Candidate};
use crate::controlplane::apiserver::Txn;
use crate::controlplane::objects::{self, Object, TaintRule};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};

/// The condition set on a pod before it is deleted (deletePod: `DisruptionTarget=True`).
pub const CONDITION: &str = "DisruptionTarget";
/// The condition's reason.
pub const REASON: &str = "DeletionByDeviceTaintManager";
/// The condition's message.
pub const MESSAGE: &str = "Device Taint manager: deleting due to NoExecute taint";
/// The Event's reason (emitPodDeletionEvent).
pub const EVENT_REASON: &str = "DeviceTaintManagerEviction";
/// The Event's message.
pub const EVENT_MESSAGE: &str = "Marking for deletion";
/// The controller's name, the Events' source (names.DeviceTaintEvictionController).
pub const NAME: &str = "device-taint-eviction-controller";

/// A claim in use: its devices and the pods it is reserved for.
#[derive(Debug, Clone)]
pub struct InUse<'a> {
    /// `namespace/name`.
    pub claim: String,
    /// Its UID (taints without timeAdded are counted per claim, device and taint).
    pub uid: String,
    /// The pods (UIDs) it is reserved for that use it.
    pub pods: Vec<String>,
    /// Its allocated devices.
    pub devices: &'a [Allocated],
}

/// One pod to evict now, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evict {
    /// The pod's UID.
    pub pod: String,
    /// `namespace/name` of the claim whose device is tainted.
    pub claim: String,
    /// `driver/pool/device`.
    pub device: String,
    /// `key=value:NoExecute`.
    pub taint: String,
    /// The taint's timeAdded (or when it was first seen).
    pub added: SystemTime,
    /// When the pod was due.
    pub at: SystemTime,
}

/// What [`decide`] makes of the claims in use at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// The pods due now (each once: its earliest eviction).
    pub due: Vec<Evict>,
    /// The earliest eviction still to come, when any.
    pub next: Option<SystemTime>,
}

/// The pods NoExecute taints evict at `now`. `seen` holds when each taint
/// without timeAdded was first seen (`<claim uid> <device> <taint>`): new
/// ones are recorded at `now`, those no longer in effect forgotten.
pub fn decide(
    uses: &[InUse<'_>],
    candidates: &[Candidate],
    rules: &[TaintRule],
    seen: &mut BTreeMap<String, SystemTime>,
    now: SystemTime,
) -> Decision {
    let mut live = BTreeSet::new();
    // Pod → its earliest eviction.
    let mut earliest: BTreeMap<&str, Evict> = BTreeMap::new();
    for u in uses {
        for e in allocator::taints::evictions(u.devices, candidates, rules) {
            let device = format!("{}/{}/{}", e.device.driver, e.device.pool, e.device.device);
            let t = e.taint;
            let taint = format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect);
            let key = format!("{} {device} {taint}", u.uid);
            let first = *seen.entry(key.clone()).or_insert(now);
            live.insert(key);
            let when = e.when(first, now);
            for pod in &u.pods {
                let ev = Evict {
                    pod: pod.clone(),
                    claim: u.claim.clone(),
                    device: device.clone(),
                    taint: taint.clone(),
                    added: when.added,
                    at: when.at,
                };
                match earliest.get(pod.as_str()) {
                    Some(had) if had.at <= ev.at => {}
                    _ => {
                        earliest.insert(pod, ev);
                    }
                }
            }
        }
    }
    seen.retain(|k, _| live.contains(k));
    let mut d = Decision::default();
    for ev in earliest.into_values() {
        if ev.at <= now {
            d.due.push(ev);
        } else {
            d.next = Some(d.next.map_or(ev.at, |n| n.min(ev.at)));
        }
    }
    d.due.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.pod.cmp(&b.pod)));
    d
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The claims (`namespace/name`) pod `pod` uses that it must own
/// (resourceclaim.PodClaims: from a template, named in its status) or not
/// (named in its spec).
pub fn pod_claims(pod: &Value) -> Vec<(String, bool)> {
    let ns = text(&pod["metadata"]["namespace"]);
    let statuses = pod["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for pc in pod["spec"]["resourceClaims"].as_array().into_iter().flatten() {
        if let Some(n) = pc["resourceClaimName"].as_str() {
            out.push((format!("{ns}/{n}"), false));
        } else if pc["resourceClaimTemplateName"].is_string() {
            let named = statuses.iter().find(|s| s["name"] == pc["name"]).and_then(|s| s["resourceClaimName"].as_str());
            if let Some(n) = named {
                out.push((format!("{ns}/{n}"), true));
            }
        }
    }
    out
}

/// Whether pod `pod` is one to look at (podEvictionTime, addConditionAndDeletePod):
/// bound to a node, not being deleted, not done.
pub fn evictable(pod: &Value) -> bool {
    !text(&pod["spec"]["nodeName"]).is_empty()
        && !pod["metadata"]["deletionTimestamp"].is_string()
        && !matches!(text(&pod["status"]["phase"]), "Succeeded" | "Failed")
}

/// The claims of the store in use by `pods`: each allocated claim a pod
/// names, reserved for it (and, made from a template, owned by it), with
/// its devices as the allocation says.
pub fn in_use(
    pods: &[Value],
    claims: &BTreeMap<String, Value>,
    devices: &BTreeMap<String, Vec<Allocated>>,
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for pod in pods.iter().filter(|p| evictable(p)) {
        let uid = text(&pod["metadata"]["uid"]);
        for (key, owned) in pod_claims(pod) {
            let Some(c) = claims.get(&key) else { continue };
            if !devices.contains_key(&key) {
                continue;
            }
            let reserved = c["status"]["reservedFor"].as_array().is_some_and(|r| r.iter().any(|x| x["uid"] == uid));
            let owner_ok = !owned
                || c["metadata"]["ownerReferences"].as_array().is_some_and(|o| {
                    o.iter().any(|o| o["controller"] == true && o["kind"] == "Pod" && o["uid"] == uid)
                });
            if reserved && owner_ok {
                out.push((key, text(&c["metadata"]["uid"]).to_string(), uid.to_string()));
            }
        }
    }
    out
}

/// What the controller keeps between passes.
#[derive(Debug)]
pub struct State {
    /// When each taint without timeAdded was first seen.
    seen: BTreeMap<String, SystemTime>,
    /// The pods evicted (upstream's evictedPods): never twice.
    evicted: BTreeSet<String>,
    /// Pods evicted per DeviceTaintRule UID (taintRuleStats' numEvictedPods).
    rule_evicted: BTreeMap<String, u64>,
    /// When the next eviction is due, for the [`Timer`].
    next: watch::Sender<Option<SystemTime>>,
    /// Each eviction, for the store's owner to report.
    done: mpsc::UnboundedSender<Evicted>,
}

/// A pod the controller evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evicted {
    /// `namespace/name` of the pod.
    pub name: String,
    /// Why and when.
    pub eviction: Evict,
}

/// The side of the controller its store's owner runs: wakes the store when
/// an eviction is due and hands on each eviction made.
#[derive(Debug)]
pub struct Timer {
    next: watch::Receiver<Option<SystemTime>>,
    done: mpsc::UnboundedReceiver<Evicted>,
}

/// The controller's state and its timer.
pub fn state() -> (State, Timer) {
    let (next_tx, next) = watch::channel(None);
    let (done_tx, done) = mpsc::unbounded_channel();
    (
        State {
            seen: BTreeMap::new(),
            evicted: BTreeSet::new(),
            rule_evicted: BTreeMap::new(),
            next: next_tx,
            done: done_tx,
        },
        Timer { next, done },
    )
}

impl Timer {
    /// Until dropped (its owner's task group is cancelled): run the
    /// controllers again (`resync`) when an eviction is due, and `report`
    /// each eviction made.
    pub async fn run(mut self, resync: impl Fn(), mut report: impl FnMut(Evicted)) {
        loop {
            let next = *self.next.borrow_and_update();
            let wait = next.map(|at| at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO));
            tokio::select! {
                e = self.done.recv() => match e {
                    Some(e) => report(e),
                    None => return,
                },
                r = self.next.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(wait.unwrap_or(Duration::MAX)), if wait.is_some() => resync(),
            }
        }
    }
}

/// One pass of the controller over the store: the evictions ([`evict`]),
/// then the DeviceTaintRules' status ([`rule_statuses`]); the timer wakes it
/// for whichever is due first.
pub fn sync(tx: &mut Txn<'_>, st: &mut State, features: &allocator::Features, now: SystemTime) {
    let next_eviction = evict(tx, st, features, now);
    let next_status = rule_statuses(tx, st, features, now);
    let next = match (next_eviction, next_status) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    st.next.send_if_modified(|n| {
        let changed = *n != next;
        *n = next;
        changed
    });
}

/// The evictions (handlePod for every pod, then maybeDeletePod for those
/// due); when the next one is due.
fn evict(tx: &mut Txn<'_>, st: &mut State, features: &allocator::Features, now: SystemTime) -> Option<SystemTime> {
    let rules = tx.taint_rules();
    // Nothing to evict for without a NoExecute taint (the common case, looked at cheaply).
    let no_execute = |t: &Value| t["effect"] == "NoExecute";
    let tainted = rules.iter().any(|r| r.taint.effect == "NoExecute")
        || tx.slices().any(|s| {
            s["spec"]["devices"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|d| d["taints"].as_array().is_some_and(|t| t.iter().any(no_execute)))
        });
    let untainted = |st: &mut State| {
        // A pod evicted is being deleted: it is not looked at again either way.
        st.evicted.clear();
        st.seen.clear();
        None
    };
    if !tainted {
        return untainted(st);
    }
    let pods: Vec<Value> = tx.list("", "pods", None);
    let uids: BTreeSet<&str> = pods.iter().map(|p| text(&p["metadata"]["uid"])).collect();
    st.evicted.retain(|uid| uids.contains(uid.as_str()));
    let with_claims: Vec<Value> =
        pods.into_iter().filter(|p| p["spec"]["resourceClaims"].as_array().is_some_and(|c| !c.is_empty())).collect();
    if with_claims.is_empty() {
        return untainted(st);
    }
    let claims: BTreeMap<String, Value> = tx
        .claims()
        .map(|c| (format!("{}/{}", text(&c["metadata"]["namespace"]), text(&c["metadata"]["name"])), c.clone()))
        .collect();
    let devices: BTreeMap<String, Vec<Allocated>> = claims
        .iter()
        .filter_map(|(k, c)| {
            c["status"]["allocation"]["devices"]["results"].as_array().map(|r| (k.clone(), allocator::given(r)))
        })
        .collect();
    let used = in_use(&with_claims, &claims, &devices);
    let mut uses: Vec<InUse<'_>> = Vec::new();
    for (key, uid, pod) in used {
        if st.evicted.contains(&pod) {
            continue;
        }
        match uses.iter_mut().find(|u| u.claim == key) {
            Some(u) => u.pods.push(pod),
            None => uses.push(InUse { devices: &devices[&key], claim: key, uid, pods: vec![pod] }),
        }
    }
    let slices: Vec<Object> = tx.slice_objects(|_| true).collect();
    let candidates = allocator::from_slices_with(&slices, features);
    let d = decide(&uses, &candidates, &rules, &mut st.seen, now);
    let api_rules: Vec<(String, TaintRule)> = tx.api_taint_rules().iter().filter_map(rule_of).collect();
    for ev in d.due {
        let Some(pod) = with_claims.iter().find(|p| p["metadata"]["uid"] == ev.pod.as_str()) else { continue };
        let (ns, name) = (text(&pod["metadata"]["namespace"]).to_string(), text(&pod["metadata"]["name"]).to_string());
        st.evicted.insert(ev.pod.clone());
        for (uid, _) in api_rules.iter().filter(|(_, r)| caused(r, &ev)) {
            *st.rule_evicted.entry(uid.clone()).or_default() += 1;
        }
        tx.create_event(deletion_event(pod, now));
        tx.update_pod_status(&ns, &name, with_condition(&pod["status"], now));
        tx.delete_pod(&ns, &name, &ev.pod);
        let _ = st.done.send(Evicted { name: format!("{ns}/{name}"), eviction: ev });
    }
    d.next
}

/// A DeviceTaintRule of the API as the allocator reads it, with its UID.
fn rule_of(v: &Value) -> Option<(String, TaintRule)> {
    match objects::parse(v) {
        Ok(Object::TaintRule { rule, .. }) => Some((text(&v["metadata"]["uid"]).to_string(), rule)),
        _ => None,
    }
}

/// Whether `rule` selects `driver/pool/device`.
fn selects(rule: &TaintRule, driver: &str, pool: &str, device: &str) -> bool {
    rule.driver.as_deref().is_none_or(|d| d == driver)
        && rule.pool.as_deref().is_none_or(|p| p == pool)
        && rule.device.as_deref().is_none_or(|d| d == device)
}

/// Whether eviction `ev` is `rule`'s doing: its device selected, its taint the rule's.
fn caused(rule: &TaintRule, ev: &Evict) -> bool {
    let mut parts = ev.device.splitn(3, '/');
    let (Some(driver), Some(pool), Some(device)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let t = &rule.taint;
    selects(rule, driver, pool, device)
        && ev.taint == format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect)
}

/// The condition type of a DeviceTaintRule's status (DeviceTaintConditionEvictionInProgress).
pub const RULE_CONDITION: &str = "EvictionInProgress";
/// ruleStatusPeriod: a rule's condition is computed again at most this often.
pub const RULE_STATUS_PERIOD: Duration = Duration::from_secs(10);

/// What the controller counts for one DeviceTaintRule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuleCounts {
    /// Published devices (in ResourceSlices) the rule selects (effect None only).
    pub published: u64,
    /// Allocated devices the rule selects (effect None only).
    pub allocated: u64,
    /// Pods still to be evicted for it (None: that would be, were it NoExecute).
    pub pending_pods: u64,
    /// Their namespaces.
    pub pending_namespaces: u64,
    /// Pods evicted for it since the controller started.
    pub evicted: u64,
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The `EvictionInProgress` condition (updateRuleStatus, v1.37.2) of a rule
/// with `effect` at `generation`, without its lastTransitionTime: NoExecute:
/// True `PodsPendingEviction` while pods wait, then False `Completed` (or
/// `NotStarted`); None: `NoEffect` with what NoExecute would do; others
/// `OtherEffect`; the pods evicted so far appended.
pub fn rule_condition(effect: &str, generation: i64, c: &RuleCounts) -> Value {
    let (mut status, reason, mut message) = match effect {
        "NoExecute" if c.pending_pods > 0 => (
            "True",
            "PodsPendingEviction".to_string(),
            format!(
                "{} evicted in {}.",
                plural(c.pending_pods, "pod needs to be", "pods need to be"),
                plural(c.pending_namespaces, "namespace", "different namespaces")
            ),
        ),
        "NoExecute" if c.evicted > 0 => ("False", "Completed".to_string(), String::new()),
        "NoExecute" => ("False", "NotStarted".to_string(), String::new()),
        "None" => (
            "False",
            "NoEffect".to_string(),
            format!(
                "{} selected. {} selected. {} evicted in {} if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
                plural(c.published, "published device", "published devices"),
                plural(c.allocated, "allocated device", "allocated devices"),
                plural(c.pending_pods, "pod would be", "pods would be"),
                plural(c.pending_namespaces, "namespace", "different namespaces"),
            ),
        ),
        _ => ("False", "OtherEffect".to_string(), "Eviction only happens for the NoExecute effect.".to_string()),
    };
    if c.evicted > 0 {
        if !message.is_empty() {
            message.push(' ');
        }
        message += &format!("{} evicted since starting the controller.", plural(c.evicted, "pod", "pods"));
    }
    if effect != "NoExecute" {
        status = "False";
    }
    json!({"type": RULE_CONDITION, "status": status, "reason": reason, "message": message,
        "observedGeneration": generation})
}

/// The DeviceTaintRules' `EvictionInProgress` conditions, written where they
/// changed (the pods counted are those not being deleted whose allocated
/// devices the rule, as NoExecute, would evict); an effect None rule's once
/// per generation; a condition changed less than [`RULE_STATUS_PERIOD`] ago at
/// the same generation waits: when the next one is due.
fn rule_statuses(tx: &mut Txn<'_>, st: &State, features: &allocator::Features, now: SystemTime) -> Option<SystemTime> {
    let rules = tx.api_taint_rules();
    if rules.is_empty() {
        return None;
    }
    let slices: Vec<Object> = tx.slice_objects(|_| true).collect();
    let candidates = allocator::from_slices_with(&slices, features);
    let claims: BTreeMap<String, Vec<Allocated>> = tx
        .claims()
        .filter_map(|c| {
            let key = format!("{}/{}", text(&c["metadata"]["namespace"]), text(&c["metadata"]["name"]));
            c["status"]["allocation"]["devices"]["results"].as_array().map(|r| (key, allocator::given(r)))
        })
        .collect();
    let pods: Vec<Value> = tx.list("", "pods", None);
    let live: Vec<&Value> = pods.iter().filter(|p| evictable(p)).collect();
    let mut next: Option<SystemTime> = None;
    for v in &rules {
        let Some((uid, rule)) = rule_of(v) else { continue };
        let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
        let conditions = v["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let existing = conditions.iter().find(|c| c["type"] == RULE_CONDITION);
        if let Some(e) = existing.filter(|e| e["observedGeneration"].as_i64() == Some(generation)) {
            if rule.taint.effect == "None" {
                continue;
            }
            let changed = e["lastTransitionTime"].as_str().and_then(|t| crate::core::time::parse_rfc3339(t).ok());
            if let Some(due) = changed.and_then(|t| t.checked_add(RULE_STATUS_PERIOD)).filter(|d| *d > now) {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
        }
        let mut as_no_execute = rule.clone();
        as_no_execute.taint.effect = "NoExecute".into();
        let evicting = |devices: &[Allocated]| {
            !allocator::taints::evictions(devices, &candidates, std::slice::from_ref(&as_no_execute)).is_empty()
        };
        let mut c = RuleCounts { evicted: st.rule_evicted.get(&uid).copied().unwrap_or(0), ..RuleCounts::default() };
        if matches!(rule.taint.effect.as_str(), "NoExecute" | "None") {
            let mut namespaces = BTreeSet::new();
            for p in &live {
                let ns = text(&p["metadata"]["namespace"]);
                let uses = pod_claims(p).iter().filter_map(|(k, _)| claims.get(k)).any(|d| evicting(d));
                if uses && !st.evicted.contains(text(&p["metadata"]["uid"])) {
                    c.pending_pods += 1;
                    namespaces.insert(ns.to_string());
                }
            }
            c.pending_namespaces = namespaces.len() as u64;
        }
        if rule.taint.effect == "None" {
            c.published = candidates.iter().filter(|d| selects(&rule, &d.driver, &d.pool, &d.device)).count() as u64;
            c.allocated =
                claims.values().flatten().filter(|a| selects(&rule, &a.driver, &a.pool, &a.device)).count() as u64;
        }
        let mut cond = rule_condition(&rule.taint.effect, generation, &c);
        let same = existing
            .is_some_and(|e| ["status", "reason", "message", "observedGeneration"].iter().all(|k| e[*k] == cond[*k]));
        if same {
            continue;
        }
        cond["lastTransitionTime"] = json!(crate::core::time::rfc3339_seconds(now));
        let mut status = v["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        let mut list: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != RULE_CONDITION).collect();
        list.push(cond);
        status["conditions"] = json!(list);
        tx.update_status("resource.k8s.io", "devicetaintrules", "", text(&v["metadata"]["name"]), status);
        if rule.taint.effect != "None" {
            let due = now.checked_add(RULE_STATUS_PERIOD).unwrap_or(now);
            next = Some(next.map_or(due, |n| n.min(due)));
        }
    }
    next
}

/// `status` with the `DisruptionTarget=True` condition (apipod.UpdatePodCondition:
/// the condition of that type replaced; its transition time kept when its status is).
pub fn with_condition(status: &Value, now: SystemTime) -> Value {
    let mut status = status.clone();
    if !status.is_object() {
        status = json!({});
    }
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let mut c = json!({"type": CONDITION, "status": "True", "reason": REASON, "message": MESSAGE,
        "lastTransitionTime": crate::core::time::rfc3339_seconds(now)});
    match conditions.iter_mut().find(|x| x["type"] == CONDITION) {
        Some(old) => {
            if old["status"] == "True" && old["lastTransitionTime"].is_string() {
                c["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = c;
        }
        None => conditions.push(c),
    }
    status["conditions"] = json!(conditions);
    status
}

/// The Event emitPodDeletionEvent records (the recorder's: named
/// `<pod>.<hex nanoseconds>`, Normal, about the pod).
pub fn deletion_event(pod: &Value, now: SystemTime) -> Value {
    let m = &pod["metadata"];
    let nanos = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let at = crate::core::time::rfc3339_seconds(now);
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{}.{nanos:x}", text(&m["name"])), "namespace": m["namespace"]},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "namespace": m["namespace"],
            "uid": m["uid"]},
        "reason": EVENT_REASON, "message": EVENT_MESSAGE, "type": "Normal",
        "source": {"component": NAME}, "reportingComponent": NAME, "reportingInstance": "",
        "firstTimestamp": at, "lastTimestamp": at, "count": 1})
}

#[cfg(test)]
mod tests;
