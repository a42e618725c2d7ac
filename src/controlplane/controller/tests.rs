//! The controllers over a store, through the API's answers (no sockets).

use super::*;
use crate::controlplane::apiserver::answer;

fn call(s: &Store, m: &str, p: &str, b: Value) -> (u16, Value) {
    answer(s, "dpctl-node", m, p, "", b.to_string().as_bytes())
}

fn ok(s: &Store, m: &str, p: &str, b: Value) -> Value {
    let (c, v) = call(s, m, p, b);
    assert!(c < 300, "{m} {p}: {c} {v}");
    v
}

const NS: &str = "/api/v1/namespaces/ml";
const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims";

/// A store with a class, node-b's slice of `devices` devices and a template.
fn cluster(devices: usize) -> Store {
    cluster_with(devices, false)
}

/// [`cluster`] with DRAWorkloadResourceClaims set to `workload_claims`
/// (and GenericWorkload on: PodGroups served).
fn cluster_with(devices: usize, workload_claims: bool) -> Store {
    let s = store_with(37, workload_claims).with_generic_workload(true).with_workload_resource_claims(workload_claims);
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/deviceclasses",
        json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
            "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"from": "class"}}}]}}),
    );
    let d: Vec<Value> = (0..devices).map(|i| json!({"name": format!("gpu-{i}")})).collect();
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/resourceslices",
        json!({"metadata": {"name": "node-b-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-b",
            "pool": {"name": "node-b", "generation": 1, "resourceSliceCount": 1}, "devices": d}}),
    );
    // Another node's slice: never allocated for node-b's pods.
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/resourceslices",
        json!({"metadata": {"name": "node-c-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-c",
            "pool": {"name": "node-c", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}}),
    );
    ok(
        &s,
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates",
        json!({
        "metadata": {"name": "one-gpu"},
        "spec": {"metadata": {"labels": {"team": "ml"}},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}}),
    );
    s
}

fn pod(name: &str, node: Option<&str>, claim: Value) -> Value {
    let mut p = json!({"metadata": {"name": name}, "spec": {
        "resourceClaims": [claim],
        "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "g"}]}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

fn from_template(name: &str, node: Option<&str>) -> Value {
    pod(name, node, json!({"name": "g", "resourceClaimTemplateName": "one-gpu"}))
}

fn get_pod(s: &Store, name: &str) -> Value {
    ok(s, "GET", &format!("{NS}/pods/{name}"), Value::Null)
}

fn claim_of(s: &Store, pod: &Value) -> Value {
    let name =
        pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap_or_else(|| panic!("{pod}"));
    ok(s, "GET", &format!("{CLAIMS}/{name}"), Value::Null)
}

fn device(claim: &Value) -> String {
    let r = &claim["status"]["allocation"]["devices"]["results"][0];
    format!("{}/{}", r["pool"].as_str().unwrap_or_else(|| panic!("{claim}")), r["device"].as_str().unwrap())
}

/// Deleted as a node does it: gracefully, then with grace 0 once stopped.
fn delete_pod(s: &Store, name: &str) {
    ok(s, "DELETE", &format!("{NS}/pods/{name}"), Value::Null);
    ok(s, "DELETE", &format!("{NS}/pods/{name}"), json!({"gracePeriodSeconds": 0}));
    assert_eq!(call(s, "GET", &format!("{NS}/pods/{name}"), Value::Null).0, 404);
}

/// #47 item 3: a pod bound to a node with a claim from a template gets the
/// claim the resourceclaim controller makes, allocated from that node's
/// slice and reserved for it before its status names the claim; when the
/// device is taken the pod waits, and gets it when the first pod goes (its
/// claim deleted with it).
#[test]
fn a_bound_pods_claim_is_made_from_its_template_allocated_on_its_node_and_freed_with_it() {
    let s = cluster(1);
    let created = ok(&s, "POST", &format!("{NS}/pods"), from_template("p1", Some("node-b")));
    let p1 = get_pod(&s, "p1");
    let claim = claim_of(&s, &p1);
    let name = claim["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("p1-g-") && name.len() == "p1-g-".len() + 5, "{claim}");
    assert_eq!(claim["metadata"]["generateName"], "p1-g-");
    assert_eq!(
        claim["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": created["metadata"]["uid"],
            "controller": true}])
    );
    assert_eq!(claim["metadata"]["annotations"][POD_CLAIM_ANNOTATION], "g");
    assert_eq!(claim["metadata"]["labels"]["team"], "ml");
    assert_eq!(claim["metadata"]["finalizers"], json!([FINALIZER]));
    assert_eq!(claim["spec"]["devices"]["requests"][0]["exactly"]["count"], 1, "v1's defaults: {claim}");
    assert_eq!(device(&claim), "node-b/gpu-0", "node-b's slice, not node-c's");
    let a = &claim["status"]["allocation"];
    assert_eq!(a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], "node-b", "{a}");
    assert_eq!(a["devices"]["config"][0]["source"], "FromClass", "{a}");
    assert_eq!(
        claim["status"]["reservedFor"],
        json!([{"resource": "pods", "name": "p1", "uid": created["metadata"]["uid"]}])
    );
    assert_eq!(p1["status"]["resourceClaimStatuses"], json!([{"name": "g", "resourceClaimName": name}]));
    assert_eq!(p1["status"]["phase"], "Pending", "the rest of the status is the node's");

    // No device left: p2's claim is made but not allocated, and its status names nothing yet.
    ok(&s, "POST", &format!("{NS}/pods"), from_template("p2", Some("node-b")));
    let p2 = get_pod(&s, "p2");
    assert!(p2["status"].get("resourceClaimStatuses").is_none(), "{p2}");
    let (_, l) = call(&s, "GET", CLAIMS, Value::Null);
    let mine: Vec<&Value> =
        l["items"].as_array().unwrap().iter().filter(|c| c["metadata"]["generateName"] == "p2-g-").collect();
    assert_eq!(mine.len(), 1, "made once, though the pod waits: {l}");
    assert!(mine[0]["status"].get("allocation").is_none(), "{l}");
    // Writes that change nothing for p2 do not make a second claim.
    ok(&s, "POST", "/api/v1/namespaces/ml/configmaps", json!({"metadata": {"name": "cm"}}));
    let (_, l) = call(&s, "GET", CLAIMS, Value::Null);
    assert_eq!(l["items"].as_array().unwrap().len(), 2, "{l}");

    // p1 goes: its claim is deleted with it, and p2 gets the device.
    delete_pod(&s, "p1");
    assert_eq!(call(&s, "GET", &format!("{CLAIMS}/{name}"), Value::Null).0, 404);
    let p2 = get_pod(&s, "p2");
    let c2 = claim_of(&s, &p2);
    assert_eq!(device(&c2), "node-b/gpu-0");
    assert_eq!(c2["status"]["reservedFor"][0]["name"], "p2");
}

/// A claim the pod names: allocated once for its first pod, then left as
/// it is and reserved for the next; deallocated (kept: not the pod's) when
/// the last pod using it goes. A pod bound to no node gets its claim made
/// and named at once, and nothing allocated.
#[test]
fn a_named_claim_is_shared_left_alone_once_allocated_and_deallocated_when_unused() {
    let s = cluster(2);
    ok(
        &s,
        "POST",
        CLAIMS,
        json!({"metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}),
    );
    let named = json!({"name": "g", "resourceClaimName": "shared"});
    ok(&s, "POST", &format!("{NS}/pods"), pod("a", Some("node-b"), named.clone()));
    let c = ok(&s, "GET", &format!("{CLAIMS}/shared"), Value::Null);
    let first = device(&c);
    ok(&s, "POST", &format!("{NS}/pods"), pod("b", Some("node-b"), named));
    let c = ok(&s, "GET", &format!("{CLAIMS}/shared"), Value::Null);
    assert_eq!(device(&c), first, "left alone");
    assert_eq!(c["status"]["allocation"]["devices"]["results"].as_array().map(Vec::len), Some(1));
    let names: Vec<&str> = c["status"]["reservedFor"].as_array().unwrap().iter().map(|r| text(&r["name"])).collect();
    assert_eq!(names, ["a", "b"]);
    delete_pod(&s, "a");
    let c = ok(&s, "GET", &format!("{CLAIMS}/shared"), Value::Null);
    assert_eq!((device(&c), c["status"]["reservedFor"].as_array().map(Vec::len)), (first, Some(1)));
    delete_pod(&s, "b");
    let c = ok(&s, "GET", &format!("{CLAIMS}/shared"), Value::Null);
    assert!(c["status"].get("allocation").is_none() && c["metadata"].get("finalizers").is_none(), "{c}");

    // A pod bound to the serving mock kubelet's own node is one of the API's like any other.
    ok(&s, "POST", &format!("{NS}/pods"), from_template("own", Some("dpctl-node")));
    let claims = call(&s, "GET", CLAIMS, Value::Null).1;
    let made = claims["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["metadata"]["ownerReferences"][0]["name"] == "own");
    assert_eq!(made.count(), 1, "its claim is made: {claims}");
    ok(&s, "POST", &format!("{NS}/pods"), from_template("unbound", None));
    let p = get_pod(&s, "unbound");
    let c = claim_of(&s, &p);
    assert!(c["status"].get("allocation").is_none(), "no node, no allocation: {c}");

    // A claim deleted while a pod uses it waits; it goes once the pod is gone.
    ok(
        &s,
        "POST",
        CLAIMS,
        json!({"metadata": {"name": "doomed"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}),
    );
    ok(
        &s,
        "POST",
        &format!("{NS}/pods"),
        pod("user", Some("node-b"), json!({"name": "g", "resourceClaimName": "doomed"})),
    );
    ok(&s, "DELETE", &format!("{CLAIMS}/doomed"), Value::Null);
    let c = ok(&s, "GET", &format!("{CLAIMS}/doomed"), Value::Null);
    assert!(c["metadata"]["deletionTimestamp"].is_string() && c["status"]["allocation"].is_object(), "{c}");
    delete_pod(&s, "user");
    assert_eq!(call(&s, "GET", &format!("{CLAIMS}/doomed"), Value::Null).0, 404);
}

/// KEP-5729, the scheduler's PreBind (dynamicresources.go: a claim
/// `IsReservedForPod(pod, claim, EnableDRAWorkloadResourceClaims)` is not
/// bound again): a claim written allocated and reserved for PodGroup `team`
/// is left as it is for a pod of `team` with DRAWorkloadResourceClaims on;
/// with it off, or for a pod of another group, the pod is added to
/// `reservedFor` as for any shared claim.
#[test]
fn a_claim_reserved_for_the_pods_pod_group_is_not_reserved_for_the_pod_with_the_gate_on() {
    // (the PodGroup's reservation entry, the claim's reservedFor once pod `member` of `group` came)
    let reserved_after = |gate: bool, group: &str| -> (Value, Vec<Value>) {
        let s = cluster_with(1, gate);
        let g = ok(
            &s,
            "POST",
            "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups",
            json!({"metadata": {"name": "team"}, "spec": {"schedulingPolicy": {"basic": {}}}}),
        );
        let entry = json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team",
            "uid": g["metadata"]["uid"]});
        let mut c = ok(
            &s,
            "POST",
            CLAIMS,
            json!({"metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}),
        );
        c["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "g", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-0"}]}},
            "reservedFor": [entry.clone()]});
        ok(&s, "PUT", &format!("{CLAIMS}/shared/status"), c);
        let mut p = pod("member", Some("node-b"), json!({"name": "g", "resourceClaimName": "shared"}));
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        ok(&s, "POST", &format!("{NS}/pods"), p);
        let c = ok(&s, "GET", &format!("{CLAIMS}/shared"), Value::Null);
        assert_eq!(device(&c), "node-b/gpu-0", "left allocated as written: {c}");
        (entry, c["status"]["reservedFor"].as_array().cloned().unwrap_or_default())
    };
    let (group_entry, on) = reserved_after(true, "team");
    let group = std::slice::from_ref(&group_entry);
    assert_eq!(on, group);
    let (group_entry, off) = reserved_after(false, "team");
    assert_eq!((off.len(), &off[0], off[1]["name"].as_str()), (2, &group_entry, Some("member")), "{off:?}");
    let (_, other) = reserved_after(true, "other");
    assert_eq!((other.len(), other[1]["resource"].as_str()), (2, Some("pods")), "{other:?}");
    let uid = |r: &Value| r["uid"].as_str().unwrap_or_default().to_string();
    assert!(reserves_pod(group, "pod-uid", Some("team")));
    assert!(!reserves_pod(group, "pod-uid", None));
    assert!(reserves_pod(group, &uid(&group_entry), None), "a UID is a UID");

    // syncClaim, the gate on: a reservation of a PodGroup that is not there goes, and the
    // claim reserved for nobody then is deallocated.
    let s = cluster_with(1, true);
    let mut c = ok(
        &s,
        "POST",
        CLAIMS,
        json!({"metadata": {"name": "lost"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}),
    );
    c["status"] = json!({"allocation": {"devices": {"results": [
            {"request": "g", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-0"}]}},
        "reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "gone", "uid": "u"}]});
    ok(&s, "PUT", &format!("{CLAIMS}/lost/status"), c);
    let c = ok(&s, "GET", &format!("{CLAIMS}/lost"), Value::Null);
    assert!(c["status"].get("reservedFor").is_none() && c["status"].get("allocation").is_none(), "{c}");
}

/// KEP-5729 with DRAWorkloadResourceClaims on (syncPodGroup,
/// handlePodGroupClaim, BindTo, bindClaim): a PodGroup stored through the
/// API (scheduling.k8s.io/v1beta1) naming a template gets one claim
/// `<group>-<claim>-XXXXX` owned by it and named in its status; two pods of
/// the group with the same pod claim both name that claim in their status,
/// and it is allocated once and reserved for the PodGroup alone. With the
/// gate off the PodGroup is stored and nothing is made for it: each pod gets
/// its own claim.
#[test]
fn a_pod_groups_claim_is_made_from_its_template_owned_by_it_and_reserved_for_it() {
    const GROUPS: &str = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups";
    let run = |gate: bool| {
        let s = cluster_with(2, gate);
        let g = ok(
            &s,
            "POST",
            GROUPS,
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "team"},
                "spec": {"schedulingPolicy": {"basic": {}},
                    "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}]}}),
        );
        for name in ["w0", "w1"] {
            let mut p = from_template(name, Some("node-b"));
            p["spec"]["schedulingGroup"] = json!({"podGroupName": "team"});
            ok(&s, "POST", &format!("{NS}/pods"), p);
        }
        let g2 = ok(&s, "GET", &format!("{GROUPS}/team"), Value::Null);
        (s, g, g2)
    };
    let (s, created, g) = run(true);
    let claim_name = g["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_else(|| panic!("{g}"))
        .to_string();
    assert_eq!(g["status"]["resourceClaimStatuses"][0]["name"], "g");
    assert!(claim_name.starts_with("team-g-") && claim_name.len() == "team-g-".len() + 5, "{g}");
    let claim = ok(&s, "GET", &format!("{CLAIMS}/{claim_name}"), Value::Null);
    assert_eq!(
        claim["metadata"]["ownerReferences"],
        json!([{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "team",
            "uid": created["metadata"]["uid"], "controller": true}])
    );
    assert_eq!(claim["metadata"]["annotations"][POD_CLAIM_ANNOTATION], "g");
    assert_eq!(
        claim["status"]["reservedFor"],
        json!([{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team",
            "uid": created["metadata"]["uid"]}]),
        "{claim}"
    );
    assert_eq!(device(&claim), "node-b/gpu-0");
    for name in ["w0", "w1"] {
        let p = get_pod(&s, name);
        assert_eq!(
            p["status"]["resourceClaimStatuses"],
            json!([{"name": "g", "resourceClaimName": claim_name}]),
            "{p}"
        );
    }
    let items = call(&s, "GET", CLAIMS, Value::Null).1["items"].as_array().map(Vec::len);
    assert_eq!(items, Some(1), "one claim for the group");
    // The PodGroup deleted (its pods gone first): its reservation goes and
    // the claim it owned is deleted (syncClaim, the garbage collector).
    delete_pod(&s, "w0");
    delete_pod(&s, "w1");
    assert_eq!(call(&s, "GET", &format!("{CLAIMS}/{claim_name}"), Value::Null).0, 200, "the group still holds it");
    ok(&s, "DELETE", &format!("{GROUPS}/team"), Value::Null);
    assert_eq!(call(&s, "GET", &format!("{CLAIMS}/{claim_name}"), Value::Null).0, 404);

    let (s, _, g) = run(false);
    assert!(g["status"]["resourceClaimStatuses"].is_null(), "{g}");
    let (a, b) = (claim_of(&s, &get_pod(&s, "w0")), claim_of(&s, &get_pod(&s, "w1")));
    assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
    assert_eq!(a["metadata"]["ownerReferences"][0]["kind"], "Pod");
    assert_eq!(a["status"]["reservedFor"][0]["resource"], "pods");
}

#[test]
fn generated_names_are_cut_in_proportion_as_the_controller_cuts_them() {
    assert_eq!(generate_name("p", "g"), "p-g-");
    let long = generate_name(&"p".repeat(60), &"c".repeat(20));
    // 82 characters with both hyphens: each part cut to len × 57 / 82 (no hyphen at the end, as upstream).
    assert_eq!(long, format!("{}-{}", "p".repeat(41), "c".repeat(13)));
}

/// #46 item 5 (KEP-5004): a pod bound to node-b asking for the class's
/// extended resource gets the special claim the scheduler makes — generated
/// `<pod>-extended-resources-`, annotated, owned, requests
/// `container-<i>-request-<j>`, allocated from node-b and reserved — and its
/// `status.extendedResourceClaimStatus`; a second pod that cannot be served
/// gets no claim and waits; once the first goes, its claim goes with it and
/// the second is served.
#[test]
fn a_bound_pods_dra_backed_extended_resource_gets_the_schedulers_special_claim() {
    let s = cluster(2);
    ok(
        &s,
        "PUT",
        "/apis/resource.k8s.io/v1/deviceclasses/gpu",
        json!({"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu",
            "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    let ext_pod = |name: &str, n: u64| {
        json!({"metadata": {"name": name}, "spec": {"nodeName": "node-b", "containers": [
            {"name": "side", "image": "x"},
            {"name": "main", "image": "x", "resources": {"limits": {"cpu": "1", "example.com/gpu": n.to_string()}}}]}})
    };
    ok(&s, "POST", &format!("{NS}/pods"), ext_pod("a", 2));
    let a = get_pod(&s, "a");
    let st = &a["status"]["extendedResourceClaimStatus"];
    assert_eq!(
        st["requestMappings"],
        json!([{"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-1-request-1"}]),
        "{a}"
    );
    let name = st["resourceClaimName"].as_str().unwrap_or_else(|| panic!("{a}"));
    assert!(name.starts_with("a-extended-resources-") && name.len() == "a-extended-resources-".len() + 5, "{name}");
    let claim = ok(&s, "GET", &format!("{CLAIMS}/{name}"), Value::Null);
    assert_eq!(claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"], "true");
    assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], "a");
    assert_eq!(claim["spec"]["devices"]["requests"][0]["exactly"]["count"], 2);
    let results = claim["status"]["allocation"]["devices"]["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 2, "{claim}");
    assert!(results.iter().all(|r| r["pool"] == "node-b"), "{claim}");
    assert_eq!(claim["status"]["reservedFor"][0]["name"], "a");

    // No device left: no claim made, no status; the pod waits.
    ok(&s, "POST", &format!("{NS}/pods"), ext_pod("b", 1));
    let b = get_pod(&s, "b");
    assert!(b["status"]["extendedResourceClaimStatus"].is_null(), "{b}");
    let claims = ok(&s, "GET", CLAIMS, Value::Null);
    let made_for_b =
        claims["items"].as_array().into_iter().flatten().filter(|c| c["metadata"]["ownerReferences"][0]["name"] == "b");
    assert_eq!(made_for_b.count(), 0, "{claims}");

    // The first pod goes: its special claim with it; the second is served.
    delete_pod(&s, "a");
    assert_eq!(call(&s, "GET", &format!("{CLAIMS}/{name}"), Value::Null).0, 404);
    let b = get_pod(&s, "b");
    assert!(b["status"]["extendedResourceClaimStatus"]["resourceClaimName"].is_string(), "{b}");
}
