//! The device-taint eviction controller: its decisions ([`decide`], pure)
//! and its pass over a store (the condition, the Event, the deletion, the timer).

use super::*;
use crate::controlplane::apiserver::{answer, Store};
use crate::controlplane::objects::{Taint, Toleration};

fn t(s: &str) -> SystemTime {
    crate::core::time::parse_rfc3339(s).unwrap()
}

const ADDED: &str = "2026-01-01T00:00:00Z";

fn candidates(taints: Value) -> Vec<Candidate> {
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-b",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": taints}, {"name": "gpu-1"}]}});
    let o = objects::parse(&slice).unwrap();
    allocator::from_slices_with([&o], &allocator::Features::default())
}

fn on(device: &str, tolerations: Vec<Toleration>) -> Vec<Allocated> {
    vec![Allocated {
        request: "g".into(),
        driver: "gpu.example.com".into(),
        pool: "p".into(),
        device: device.into(),
        tolerations,
        ..Allocated::default()
    }]
}

fn tolerate(seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some("gpu.example.com/xid".into()),
        operator: "Exists".into(),
        value: None,
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
    }
}

fn used<'a>(claim: &str, pods: &[&str], devices: &'a [Allocated]) -> InUse<'a> {
    InUse {
        claim: format!("ml/{claim}"),
        uid: format!("{claim}-uid"),
        pods: pods.iter().map(|p| p.to_string()).collect(),
        devices,
    }
}

fn no_execute(added: Option<&str>) -> Value {
    let mut t = json!({"key": "gpu.example.com/xid", "value": "79", "effect": "NoExecute"});
    if let Some(a) = added {
        t["timeAdded"] = json!(a);
    }
    json!([t])
}

/// An untolerated NoExecute taint: every pod the claim is reserved for is
/// due at the taint's timeAdded, with the claim, device and taint named;
/// a device without the taint evicts nobody.
#[test]
fn an_untolerated_no_execute_taint_evicts_the_claims_pods_at_its_time_added() {
    let c = candidates(no_execute(Some(ADDED)));
    let (tainted, clean) = (on("gpu-0", vec![]), on("gpu-1", vec![]));
    let uses = [used("a", &["p1", "p2"], &tainted), used("b", &["p3"], &clean)];
    let mut seen = BTreeMap::new();
    let d = decide(&uses, &c, &[], &mut seen, t("2026-01-01T00:00:01Z"));
    assert_eq!(d.next, None);
    let pods: Vec<&str> = d.due.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(pods, ["p1", "p2"]);
    let e = &d.due[0];
    assert_eq!(
        (e.claim.as_str(), e.device.as_str(), e.taint.as_str()),
        ("ml/a", "gpu.example.com/p/gpu-0", "gpu.example.com/xid=79:NoExecute")
    );
    assert_eq!((e.added, e.at), (t(ADDED), t(ADDED)));
    // A NoSchedule taint (or None) evicts nobody.
    let c = candidates(json!([{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "None"}]));
    assert_eq!(decide(&uses, &c, &[], &mut seen, t(ADDED)), Decision::default());
}

/// tolerationSeconds delays the eviction to timeAdded plus the seconds:
/// before then it is the next one due, not due; at it, due. A NoExecute
/// toleration without seconds keeps the pod.
#[test]
fn a_toleration_with_seconds_delays_the_eviction_and_one_without_keeps_the_pod() {
    let c = candidates(no_execute(Some(ADDED)));
    let delayed = on("gpu-0", vec![tolerate(Some(60))]);
    let uses = [used("a", &["p1"], &delayed)];
    let mut seen = BTreeMap::new();
    let d = decide(&uses, &c, &[], &mut seen, t("2026-01-01T00:00:59Z"));
    assert!(d.due.is_empty(), "{d:?}");
    assert_eq!(d.next, Some(t("2026-01-01T00:01:00Z")));
    let d = decide(&uses, &c, &[], &mut seen, t("2026-01-01T00:01:00Z"));
    assert_eq!((d.due.len(), d.due[0].at, d.next), (1, t("2026-01-01T00:01:00Z"), None));

    let kept = on("gpu-0", vec![tolerate(None), tolerate(Some(1))]);
    let d = decide(&[used("a", &["p1"], &kept)], &c, &[], &mut seen, t("2030-01-01T00:00:00Z"));
    assert_eq!(d, Decision::default(), "tolerated for good");
}

/// A pod with two tainted claims goes at the earlier of their evictions
/// (podEvictionTime), named by that one.
#[test]
fn a_pod_goes_at_the_earliest_of_its_claims_evictions() {
    let c = candidates(no_execute(Some(ADDED)));
    let (late, soon) = (on("gpu-0", vec![tolerate(Some(300))]), on("gpu-0", vec![tolerate(Some(10))]));
    let uses = [used("late", &["p1"], &late), used("soon", &["p1"], &soon)];
    let mut seen = BTreeMap::new();
    let d = decide(&uses, &c, &[], &mut seen, t("2026-01-01T00:00:05Z"));
    assert_eq!((d.due.len(), d.next), (0, Some(t("2026-01-01T00:00:10Z"))));
    let d = decide(&uses, &c, &[], &mut seen, t("2026-01-01T00:00:10Z"));
    assert_eq!(d.due.len(), 1, "{d:?}");
    assert_eq!((d.due[0].claim.as_str(), d.next), ("ml/soon", None));
}

/// A taint without timeAdded (a DeviceTaintRule's here) counts from when
/// it was first seen; the record goes with the taint.
#[test]
fn a_taint_without_time_added_counts_from_when_it_was_first_seen() {
    let c = candidates(json!([]));
    let rule = TaintRule {
        driver: Some("gpu.example.com".into()),
        pool: None,
        device: Some("gpu-0".into()),
        taint: Taint { key: "gpu.example.com/xid".into(), value: None, effect: "NoExecute".into(), time_added: None },
    };
    let devices = on("gpu-0", vec![tolerate(Some(30))]);
    let uses = [used("a", &["p1"], &devices)];
    let mut seen = BTreeMap::new();
    let first = t("2026-02-01T00:00:00Z");
    let d = decide(&uses, &c, std::slice::from_ref(&rule), &mut seen, first);
    assert_eq!((d.due.len(), d.next), (0, Some(first + Duration::from_secs(30))));
    let d = decide(&uses, &c, std::slice::from_ref(&rule), &mut seen, first + Duration::from_secs(30));
    assert_eq!((d.due.len(), d.due[0].added), (1, first));
    // The rule goes: so does the record (a new rule counts afresh).
    decide(&uses, &c, &[], &mut seen, first + Duration::from_secs(40));
    assert!(seen.is_empty(), "{seen:?}");
}

fn ok(s: &Store, m: &str, p: &str, b: Value) -> Value {
    let (c, v) = answer(s, "dpctl-node", m, p, "", b.to_string().as_bytes());
    assert!(c < 300, "{m} {p}: {c} {v}");
    v
}

/// A store with a class, node-b's slice (one device), a template whose
/// request tolerates the taint for `seconds` (None: no toleration), and a
/// pod bound to node-b using it; the pod as stored once its claim is allocated.
fn cluster(seconds: Option<i64>) -> (Store, Timer, Value) {
    let (s, timer) = super::super::plane(37);
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/deviceclasses",
        json!({"metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/resourceslices",
        json!({"metadata": {"name": "node-b-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "node-b",
                "pool": {"name": "node-b", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}}),
    );
    let mut exactly = json!({"deviceClassName": "gpu"});
    if let Some(s) = seconds {
        exactly["tolerations"] = json!([{"key": "gpu.example.com/xid", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": s}]);
    }
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates",
        json!({"metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": exactly}]}}}}),
    );
    ok(
        &s,
        "POST",
        "/api/v1/namespaces/ml/pods",
        json!({"metadata": {"name": "p1"}, "spec": {"nodeName": "node-b",
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "g"}]}}]}}),
    );
    let pod = ok(&s, "GET", "/api/v1/namespaces/ml/pods/p1", Value::Null);
    assert!(pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].is_string(), "{pod}");
    (s, timer, pod)
}

fn rule(added: &str) -> TaintRule {
    TaintRule {
        driver: Some("gpu.example.com".into()),
        pool: Some("node-b".into()),
        device: Some("gpu-0".into()),
        taint: Taint {
            key: "gpu.example.com/xid".into(),
            value: Some("79".into()),
            effect: "NoExecute".into(),
            time_added: Some(added.into()),
        },
    }
}

/// A DeviceTaintRule on the device of a pod bound to node-b: the pod gets
/// `DisruptionTarget=True` (upstream's reason and message), an Event
/// (DeviceTaintManagerEviction, "Marking for deletion") and is deleted
/// gracefully — its node deletes it for good; the eviction is reported once.
#[test]
fn a_rule_on_a_bound_pods_device_sets_the_condition_records_the_event_and_deletes_the_pod() {
    let (s, mut timer, pod) = cluster(None);
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    s.put_taint_rule("DeviceTaintRule xid", Some(rule("2026-01-01T00:00:00Z")));
    let p = ok(&s, "GET", "/api/v1/namespaces/ml/pods/p1", Value::Null);
    assert!(p["metadata"]["deletionTimestamp"].is_string(), "graceful, for its node: {p}");
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30, "{p}");
    let c = p["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == CONDITION).cloned();
    let c = c.unwrap_or_else(|| panic!("{p}"));
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some(REASON)), "{p}");
    assert_eq!(c["message"], MESSAGE);
    let events = ok(&s, "GET", "/api/v1/namespaces/ml/events", Value::Null);
    let e = &events["items"][0];
    assert_eq!((e["reason"].as_str(), e["message"].as_str()), (Some(EVENT_REASON), Some(EVENT_MESSAGE)), "{events}");
    assert_eq!((e["involvedObject"]["uid"].as_str(), e["source"]["component"].as_str()), (Some(uid), Some(NAME)));
    let done = timer.done.try_recv().unwrap();
    assert_eq!((done.name.as_str(), done.eviction.pod.as_str()), ("ml/p1", uid));
    assert_eq!(done.eviction.taint, "gpu.example.com/xid=79:NoExecute");
    // Another write: not evicted twice.
    s.put_taint_rule("DeviceTaintRule other", Some(rule("2026-01-01T00:00:01Z")));
    assert!(timer.done.try_recv().is_err());
    assert_eq!(ok(&s, "GET", "/api/v1/namespaces/ml/events", Value::Null)["items"].as_array().unwrap().len(), 1);
}

/// A toleration with seconds: not evicted yet, the timer told when; the
/// rule removed before then, the eviction is off (nothing due).
#[test]
fn a_tolerated_taint_waits_for_the_timer_and_goes_with_its_rule() {
    let (s, timer, _) = cluster(Some(3600));
    let added = crate::core::time::rfc3339(SystemTime::now());
    s.put_taint_rule("DeviceTaintRule xid", Some(rule(&added)));
    let p = ok(&s, "GET", "/api/v1/namespaces/ml/pods/p1", Value::Null);
    assert!(p["metadata"]["deletionTimestamp"].is_null(), "{p}");
    let due = *timer.next.borrow();
    assert_eq!(due, Some(t(&added) + Duration::from_secs(3600)));
    s.put_taint_rule("DeviceTaintRule xid", None);
    assert_eq!(*timer.next.borrow(), None);
}

/// podEvictionTime's claims: an allocated claim the pod names, reserved for
/// it, and (from a template) owned by it; not a claim reserved for another
/// pod, one made for another pod, one not allocated, nor any claim of a pod
/// bound to no node or being deleted.
#[test]
fn a_pod_counts_only_its_allocated_claims_reserved_for_it() {
    let claim = |name: &str, reserved: &str, owner: Option<&str>| {
        let mut c = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("{name}-uid")},
            "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": reserved}],
                "allocation": {"devices": {"results": [{"request": "g", "driver": "d", "pool": "p", "device": "x"}]}}}});
        if let Some(o) = owner {
            c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": o,
                "controller": true}]);
        }
        (format!("ml/{name}"), c)
    };
    let mut claims: BTreeMap<String, Value> = [
        claim("named", "u1", None),
        claim("other", "u2", None),
        claim("made", "u1", Some("u1")),
        claim("stolen", "u1", Some("u2")),
    ]
    .into_iter()
    .collect();
    let mut unallocated = claim("pending", "u1", None);
    unallocated.1["status"].as_object_mut().unwrap().remove("allocation");
    claims.insert(unallocated.0, unallocated.1);
    let devices: BTreeMap<String, Vec<Allocated>> = claims
        .iter()
        .filter_map(|(k, c)| {
            c["status"]["allocation"]["devices"]["results"].as_array().map(|r| (k.clone(), allocator::given(r)))
        })
        .collect();
    let pod = json!({"metadata": {"name": "p", "namespace": "ml", "uid": "u1"},
        "spec": {"nodeName": "node-b", "resourceClaims": [
            {"name": "a", "resourceClaimName": "named"}, {"name": "b", "resourceClaimName": "other"},
            {"name": "c", "resourceClaimTemplateName": "t"}, {"name": "d", "resourceClaimTemplateName": "t"},
            {"name": "e", "resourceClaimName": "pending"}]},
        "status": {"resourceClaimStatuses": [{"name": "c", "resourceClaimName": "made"},
            {"name": "d", "resourceClaimName": "stolen"}]}});
    let used: Vec<String> =
        in_use(std::slice::from_ref(&pod), &claims, &devices).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(used, ["ml/named", "ml/made"]);
    let mut unbound = pod.clone();
    unbound["spec"].as_object_mut().unwrap().remove("nodeName");
    let mut deleting = pod.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut done = pod;
    done["status"]["phase"] = json!("Failed");
    assert!(in_use(&[unbound, deleting, done], &claims, &devices).is_empty());
}

/// updateRuleStatus's words (device_taint_eviction.go v1.37.2) for each
/// effect and count; a generation is the condition's observedGeneration.
#[test]
fn a_rules_condition_is_worded_as_upstreams() {
    let c = |pending_pods, pending_namespaces, evicted| RuleCounts {
        published: 2,
        allocated: 1,
        pending_pods,
        pending_namespaces,
        evicted,
    };
    let words = |effect: &str, counts: RuleCounts| {
        let v = rule_condition(effect, 3, &counts);
        (
            v["status"].as_str().unwrap_or("").to_string(),
            v["reason"].as_str().unwrap_or("").to_string(),
            v["message"].as_str().unwrap_or("").to_string(),
        )
    };
    let s = |a: &str, b: &str, m: &str| (a.to_string(), b.to_string(), m.to_string());
    assert_eq!(
        words("NoExecute", c(1, 1, 0)),
        s("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace.")
    );
    assert_eq!(
        words("NoExecute", c(3, 2, 1)),
        s(
            "True",
            "PodsPendingEviction",
            "3 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller."
        )
    );
    assert_eq!(
        words("NoExecute", c(0, 0, 2)),
        s("False", "Completed", "2 pods evicted since starting the controller.")
    );
    assert_eq!(words("NoExecute", c(0, 0, 0)), s("False", "NotStarted", ""));
    assert_eq!(
        words("None", c(0, 0, 0)),
        s("False", "NoEffect", "2 published devices selected. 1 allocated device selected. 0 pods would be evicted in 0 different namespaces if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.")
    );
    assert_eq!(
        words("NoSchedule", c(0, 0, 0)),
        s("False", "OtherEffect", "Eviction only happens for the NoExecute effect.")
    );
    assert_eq!(rule_condition("NoSchedule", 3, &c(0, 0, 0))["observedGeneration"], 3);
}
