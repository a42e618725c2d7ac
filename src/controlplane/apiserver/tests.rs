//! The API server's answers, pure (no sockets): [`answer`] over a store.

use super::*;

fn call(s: &Store, m: &str, p: &str, q: &str, b: Value) -> (u16, Value) {
    answer(s, "node-1", m, p, q, b.to_string().as_bytes())
}

#[test]
fn slices_are_created_listed_replaced_and_deleted_with_integer_versions() {
    let s = Store::default();
    let obj = json!({"metadata": {"generateName": "node-1-gpu-"}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p", "resourceSliceCount": 1}, "devices": [{"name": "d0"}]}});
    let (c, created) = call(&s, "POST", SLICES, "", obj.clone());
    assert_eq!(c, 201);
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("node-1-gpu-"));
    assert_eq!(created["metadata"]["resourceVersion"], "1");
    let mut named = obj.clone();
    named["metadata"] = json!({"name": name});
    assert_eq!(call(&s, "POST", SLICES, "", named.clone()).0, 409);
    let (c, l) = call(&s, "GET", SLICES, "fieldSelector=spec.driver%3Dgpu.x%2Cspec.nodeName%3Dnode-1", Value::Null);
    assert_eq!((c, l["items"].as_array().unwrap().len()), (200, 1));
    let (_, l) = call(&s, "GET", SLICES, "fieldSelector=spec.driver=other", Value::Null);
    assert!(l["items"].as_array().unwrap().is_empty());
    let mut stale = named.clone();
    stale["metadata"]["resourceVersion"] = json!("0");
    assert_eq!(call(&s, "PUT", &format!("{SLICES}/{name}"), "", stale).0, 409);
    named["metadata"]["resourceVersion"] = json!("1");
    let (c, put) = call(&s, "PUT", &format!("{SLICES}/{name}"), "", named);
    assert_eq!((c, put["metadata"]["resourceVersion"].as_str()), (200, Some("2")));
    assert_eq!(call(&s, "DELETE", &format!("{SLICES}/{name}"), "", Value::Null).0, 200);
    assert_eq!(call(&s, "GET", &format!("{SLICES}/{name}"), "", Value::Null).0, 404);
    assert_eq!(call(&s, "GET", "/api/v1/nodes/node-1", "watch=true", Value::Null).0, 405);
    assert_eq!(call(&s, "GET", "/api/v1/nodes/node-1", "", Value::Null).0, 200);
    assert_eq!(call(&s, "GET", "/api/v1/nodes/other", "", Value::Null).0, 404);
}

/// The kubelet's wipeResourceSlices: a delete collection with field
/// selectors on spec.nodeName and spec.driver deletes exactly those slices
/// and answers the list of them.
#[test]
fn a_delete_collection_of_slices_deletes_what_its_selectors_select() {
    let s = Store::default();
    for (name, driver, node) in [("a", "gpu.x", "node-b"), ("b", "nic.x", "node-b"), ("c", "gpu.x", "node-1")] {
        let obj = json!({"metadata": {"name": name}, "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1}, "devices": [{"name": "d0"}]}});
        assert_eq!(call(&s, "POST", SLICES, "", obj).0, 201);
    }
    let (c, l) = call(&s, "DELETE", SLICES, "fieldSelector=spec.nodeName%3Dnode-b%2Cspec.driver%3Dgpu.x", Value::Null);
    assert_eq!((c, l["kind"].as_str()), (200, Some("ResourceSliceList")), "{l}");
    let names = |l: &Value| -> Vec<String> {
        l["items"].as_array().unwrap().iter().map(|s| s["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&l), ["a"]);
    let (_, l) = call(&s, "DELETE", SLICES, "fieldSelector=spec.nodeName%3Dnode-b", Value::Null);
    assert_eq!(names(&l), ["b"]);
    assert_eq!(names(&call(&s, "GET", SLICES, "", Value::Null).1), ["c"]);
    let (c, e) = call(&s, "DELETE", SLICES, "fieldSelector=spec.bogus%3Dx", Value::Null);
    assert_eq!(c, 400, "{e}");
    assert_eq!(names(&call(&s, "GET", SLICES, "", Value::Null).1), ["c"], "a refused selector deletes nothing");
}

fn slice_with(name: &str, devices: usize) -> Value {
    let d: Vec<Value> = (0..devices).map(|i| json!({"name": format!("d{i}")})).collect();
    json!({"metadata": {"name": name}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": d}})
}

/// Issue items: a 129-device slice, a non-DNS name and 70 kB of labels were all 201.
#[test]
fn creates_and_replaces_are_validated_as_kube_apiserver_does() {
    let s = Store::default();
    let (c, e) = call(&s, "POST", SLICES, "", slice_with("big", 129));
    assert_eq!((c, e["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        e["message"],
        "ResourceSlice.resource.k8s.io \"big\" is invalid: spec.devices: Too many: 129: must have at most 128 items"
    );
    assert_eq!(e["details"]["causes"][0]["field"], "spec.devices");
    for bad in ["bad/slash", "sp ace", "x\0y", "r\u{200f}tl", "UPPER"] {
        let (c, e) = call(&s, "POST", SLICES, "", slice_with(bad, 1));
        assert_eq!(c, 422, "{bad:?}");
        assert_eq!(e["details"]["causes"][0]["field"], "metadata.name", "{bad:?}");
    }
    let (c, e) = call(&s, "POST", SLICES, "", json!({"metadata": {"name": "x".repeat(100_000)}, "spec": {}}));
    assert_eq!(c, 422);
    assert!(e["details"]["causes"][0]["message"].as_str().unwrap().ends_with("must be no more than 253 characters"));
    let mut labelled = slice_with("l", 1);
    labelled["metadata"]["labels"] = json!({"example.com/big": "v".repeat(70_000)});
    let (c, e) = call(&s, "POST", SLICES, "", labelled);
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("metadata.labels")));
    assert_eq!(s.held_bytes(), (0, 0), "nothing refused is held");
    // A replace is judged as a create is.
    assert_eq!(call(&s, "POST", SLICES, "", slice_with("ok", 128)).0, 201);
    let held = s.held_bytes();
    assert!(held.0 > 0 && held.1 > 0);
    let (c, e) = call(&s, "PUT", &format!("{SLICES}/ok"), "", slice_with("ok", 129));
    assert_eq!((c, e["details"]["name"].as_str()), (422, Some("ok")));
    assert_eq!(s.held_bytes(), held);
}

#[test]
fn a_refused_body_is_found_without_building_it_and_the_body_limit_is_3_mib() {
    // 100,000 devices in ~2 MB: refused by its shape, in JSON and protobuf.
    let big = slice_with("huge", 100_000);
    let body = big.to_string();
    assert!(body.len() > 1_500_000 && body.len() < MAX_BODY);
    let (c, e) = precheck("POST", SLICES, "application/json", body.as_bytes()).unwrap();
    assert_eq!(c, 422);
    assert_eq!(e["details"]["causes"][0]["message"], "Too many: 100000: must have at most 128 items");
    let mut pb = big.clone();
    pb["kind"] = json!("ResourceSlice");
    pb["apiVersion"] = json!("resource.k8s.io/v1");
    pb["spec"]["devices"][0]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
    let pb = protobuf::encode_object(&pb).unwrap();
    let (c, e) = precheck("PUT", &format!("{SLICES}/huge"), protobuf::PROTOBUF, &pb).unwrap();
    assert_eq!(c, 422);
    assert_eq!(e["details"]["causes"][0]["message"], "Too many: 100000: must have at most 64 items");
    assert!(precheck("POST", SLICES, "application/json", slice_with("ok", 128).to_string().as_bytes()).is_none());
    assert!(precheck("GET", SLICES, "application/json", body.as_bytes()).is_none());
    assert_eq!(too_large().0, 413);
    assert_eq!(too_large().1["message"], "Request entity too large: limit is 3145728");
}

#[test]
fn verbs_a_served_path_does_not_serve_are_405_and_version_is_version_info() {
    let s = Store::default();
    for (m, p) in [
        ("PUT", SLICES.to_string()),
        ("POST", format!("{SLICES}/x")),
        ("PATCH", SLICES.to_string()),
        ("POST", "/api/v1/nodes/node-1".to_string()),
    ] {
        let (c, e) = call(&s, m, &p, "", Value::Null);
        assert_eq!((c, e["reason"].as_str()), (405, Some("MethodNotAllowed")), "{m} {p}");
        assert_eq!(e["message"], "the server does not allow this method on the requested resource");
    }
    let v = version_info(34);
    assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("34")));
    assert_eq!((v["gitVersion"].as_str(), v["emulationMinor"].as_str()), (Some("v1.34.0"), Some("34")));
    assert!(v["platform"].as_str().unwrap().starts_with("linux/"));
    assert!(version_info(32).get("emulationMajor").is_none(), "compatibility versions came with 1.33");
}

#[test]
fn the_resource_betas_are_not_served_by_default_as_from_1_34() {
    // kube-apiserver v1.34–v1.37 pkg/controlplane/instance.go betaAPIGroupVersionsDisabledByDefault.
    let s = Store::default();
    for p in [
        "/apis/resource.k8s.io/v1beta1",
        "/apis/resource.k8s.io/v1beta2/namespaces/ml/resourceclaims",
        "/apis/resource.k8s.io/v1beta1/resourceslices",
    ] {
        let (c, e) = answer(&s, "n", "GET", p, "", b"");
        assert_eq!((c, e["message"].as_str()), (404, Some("the server could not find the requested resource")), "{p}");
    }
    assert_eq!(answer(&s, "n", "GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims", "", b"").0, 200);
    let one = Store::default().with_resource_betas(true, false);
    assert_eq!(answer(&one, "n", "GET", "/apis/resource.k8s.io/v1beta2/namespaces/ml/resourceclaims", "", b"").0, 200);
    assert_eq!(answer(&one, "n", "GET", "/apis/resource.k8s.io/v1beta1/namespaces/ml/resourceclaims", "", b"").0, 404);
}

#[test]
fn claims_are_served_in_each_version_with_their_allocation() {
    // (the kubelet's claims, written into the store in process; the betas
    // served as with `--runtime-config resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta1=true`)
    let s = Store::default().with_resource_betas(true, true);
    let claim = json!({"kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml", "uid": "u"}, "status": {"allocation": {"devices": {"results": [{"driver": "d"}]}}}});
    assert!(s.put_claim(claim.clone()));
    assert!(!s.put_claim(claim.clone()), "the same claim again is no write");
    let stored = s.claim("ml/gpu").unwrap();
    assert_eq!((stored["metadata"]["uid"].as_str(), stored["metadata"]["generation"].as_i64()), (Some("u"), Some(1)));
    for v in ["v1", "v1beta2", "v1beta1"] {
        let (c, got) =
            answer(&s, "n", "GET", &format!("/apis/resource.k8s.io/{v}/namespaces/ml/resourceclaims/gpu"), "", b"");
        assert_eq!(c, 200);
        assert_eq!(got["apiVersion"], format!("resource.k8s.io/{v}"));
        assert_eq!(got["status"]["allocation"]["devices"]["results"][0]["driver"], "d");
    }
    let (c, e) = answer(&s, "n", "GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/nope", "", b"");
    assert_eq!(c, 404);
    assert!(e["message"].as_str().unwrap().contains("\"nope\" not found"));
    let mut respec = claim.clone();
    respec["spec"] = json!({"devices": {"requests": [{"name": "r"}]}});
    assert!(s.put_claim(respec));
    let updated = s.claim("ml/gpu").unwrap();
    assert_eq!(updated["metadata"]["generation"], 2, "a spec change bumps the generation");
    assert_eq!(updated["metadata"]["creationTimestamp"], stored["metadata"]["creationTimestamp"]);
    assert!(s.delete_claim("ml/gpu") && !s.delete_claim("ml/gpu"));
    assert_eq!(answer(&s, "n", "GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu", "", b"").0, 404);
}

#[test]
fn protobuf_bodies_are_read_and_answers_written_by_negotiation() {
    let s = Store::default();
    let obj = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"generateName": "n-"}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": "n"}});
    let pb = protobuf::encode_object(&obj).unwrap();
    let body = json_body("application/vnd.kubernetes.protobuf", pb).unwrap();
    let (c, created) = answer(&s, "n", "POST", SLICES, "", &body);
    assert_eq!((c, created["spec"]["driver"].as_str()), (201, Some("d")));
    assert_eq!(created["kind"], "ResourceSlice", "stored slices name their kind (protobuf needs it)");
    let e = json_body("application/yaml", b"a: b".to_vec()).unwrap_err();
    assert_eq!(e.0, 415);
    assert!(e.1["message"].as_str().unwrap().contains("send application/json or application/vnd.kubernetes.protobuf"));
    let e = json_body("application/vnd.kubernetes.protobuf", b"{}".to_vec()).unwrap_err();
    assert_eq!(e.0, 400);
    assert!(e.1["message"].as_str().unwrap().contains("magic"));
    // An error answer in protobuf is an enveloped Status.
    let (c, v) = answer(&s, "n", "GET", &format!("{SLICES}/nope"), "", b"");
    let r = reply(Media::Protobuf, c, &v);
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["content-type"], "application/vnd.kubernetes.protobuf");
    let ChannelBody::Whole(Some(b)) = r.into_body() else { panic!("a whole body") };
    let st = protobuf::decode_object(&b).unwrap();
    assert_eq!(
        (st["kind"].as_str(), st["code"].as_i64(), st["reason"].as_str()),
        (Some("Status"), Some(404), Some("NotFound"))
    );
}

#[test]
fn a_delete_reads_its_delete_options_and_honours_their_preconditions() {
    let s = Store::default();
    let obj = json!({"metadata": {"name": "s"}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": "n"}});
    let (_, created) = call(&s, "POST", SLICES, "", obj);
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let opts = |uid: &str| {
        let o = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}});
        json_body("application/vnd.kubernetes.protobuf", protobuf::encode_object(&o).unwrap()).unwrap()
    };
    let (c, e) = answer(&s, "n", "DELETE", &format!("{SLICES}/s"), "", &opts("other"));
    assert_eq!(c, 409);
    assert!(e["message"].as_str().unwrap().contains("Precondition failed: UID in precondition: other"), "{e}");
    let (c, gone) = answer(&s, "n", "DELETE", &format!("{SLICES}/s"), "", &opts(&uid));
    assert_eq!((c, gone["metadata"]["name"].as_str()), (200, Some("s")));
}

#[test]
fn paths_and_query_strings_are_percent_decoded() {
    let s = Store::default();
    let obj = json!({"metadata": {"name": "gpu.example.com-node-1"}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "gpu.example.com", "nodeName": "node 1"}});
    assert_eq!(call(&s, "POST", SLICES, "", obj).0, 201);
    // An escaped object name finds the object.
    let (c, got) = call(&s, "GET", &format!("{SLICES}/gpu%2Eexample%2ecom-node-1"), "", Value::Null);
    assert_eq!((c, got["metadata"]["name"].as_str()), (200, Some("gpu.example.com-node-1")));
    // A selector escaped whole, with a space as + and as %20.
    for q in [
        "fieldSelector=spec%2Edriver%3Dgpu%2Eexample%2Ecom%2Cspec.nodeName%3Dnode+1",
        "fieldSelector=spec.driver%3dgpu.example.com%2cspec.nodeName%3Dnode%201",
    ] {
        let (c, l) = call(&s, "GET", SLICES, q, Value::Null);
        assert_eq!((c, l["items"].as_array().map(Vec::len)), (200, Some(1)), "{q}");
    }
    let (_, l) = call(&s, "GET", SLICES, "fieldSelector=spec.nodeName%3Dnode%202", Value::Null);
    assert_eq!(l["items"].as_array().map(Vec::len), Some(0));
    assert!(is_watch("resourceVersion=0&watch=true") && is_watch("watch=1") && !is_watch("watch=false"));
    assert_eq!(
        query_pairs("a=b%26c&d&e=f+g"),
        [("a".into(), "b&c".into()), ("d".into(), String::new()), ("e".into(), "f g".into())]
    );
}

const CLAIM: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/gpu";

fn kubelet_claim(uid: &str, device: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml", "uid": uid},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": "pod", "uid": "pod-uid"}]}})
}

/// A claim request after the kubelet wrote `claims` (as it writes them after each change).
fn claim_call(s: &Store, claims: &[Value], m: &str, p: &str, q: &str, ct: &str, body: &str) -> (u16, Value) {
    for c in claims {
        s.put_claim(c.clone());
    }
    answer_typed(s, "n", m, p, q, ct, body.as_bytes())
}

/// #33 item 1: the status subresource as UpdateStatus meets it: the
/// driver's status.devices kept and served; the spec of the body ignored; a
/// stale resourceVersion or another uid is 409; devices must be allocated (422).
#[test]
fn the_status_subresource_takes_device_status_with_conflicts_as_kube_apiserver() {
    let s = Store::default().with_resource_betas(false, true);
    let claims = [kubelet_claim("u1", "g0")];
    let (c, got) = claim_call(&s, &claims, "GET", &format!("{CLAIM}/status"), "", "", "");
    assert_eq!(c, 200);
    let rv = got["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert_eq!(got["metadata"]["generation"], 1);
    assert!(got["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let mut put = got.clone();
    put["spec"] = json!({"devices": {"requests": []}});
    put["status"]["devices"] = json!([{"driver": "d", "pool": "p", "device": "g0", "data": {"health": "ok"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]);
    let (c, updated) = claim_call(&s, &claims, "PUT", &format!("{CLAIM}/status"), "", "", &put.to_string());
    assert_eq!(c, 200, "{updated}");
    assert_ne!(updated["metadata"]["resourceVersion"].as_str(), Some(rv.as_str()));
    assert_eq!(updated["spec"], got["spec"], "spec changes on /status are ignored");
    assert_eq!(updated["status"]["devices"][0]["data"]["health"], "ok");
    // Kept across reads, in every version's path.
    let (_, again) =
        claim_call(&s, &claims, "GET", "/apis/resource.k8s.io/v1beta1/namespaces/ml/resourceclaims/gpu", "", "", "");
    assert_eq!(again["status"]["devices"][0]["data"]["health"], "ok");
    assert_eq!(again["spec"]["devices"]["requests"][0]["deviceClassName"], "c", "v1beta1's shape");
    // The old resourceVersion is stale now.
    let (c, e) = claim_call(&s, &claims, "PUT", &format!("{CLAIM}/status"), "", "", &put.to_string());
    assert_eq!((c, e["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(e["message"], "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"gpu\": the object has been modified; please apply your changes to the latest version and try again");
    let mut other = updated.clone();
    other["metadata"]["uid"] = json!("u9");
    let (c, e) = claim_call(&s, &claims, "PUT", &format!("{CLAIM}/status"), "", "", &other.to_string());
    assert_eq!(c, 409);
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("Precondition failed: UID in precondition: u9, UID in object meta: u1"));
    let mut stray = updated.clone();
    stray["status"]["devices"][0]["device"] = json!("g5");
    let (c, e) = claim_call(&s, &claims, "PUT", &format!("{CLAIM}/status"), "", "", &stray.to_string());
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("status.devices[0]")));
    assert_eq!(e["message"], "ResourceClaim.resource.k8s.io \"gpu\" is invalid: status.devices[0]: Invalid value: {\"Driver\":\"d\",\"Pool\":\"p\",\"Device\":\"g5\",\"ShareID\":\"\"}: must be an allocated device in the claim");
    let mut realloc = updated.clone();
    realloc["status"]["allocation"]["devices"]["results"][0]["device"] = json!("g1");
    let (c, e) = claim_call(&s, &claims, "PUT", &format!("{CLAIM}/status"), "", "", &realloc.to_string());
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("status.allocation")));
    // /status answers only its verbs; the claim itself takes updates, its spec immutable.
    assert_eq!(claim_call(&s, &claims, "DELETE", &format!("{CLAIM}/status"), "", "", "").0, 405);
    let mut fresh = claim_call(&s, &claims, "GET", CLAIM, "", "", "").1;
    fresh["spec"] = json!({"devices": {"requests": []}});
    let (c, e) = claim_call(&s, &claims, "PUT", CLAIM, "", "", &fresh.to_string());
    assert_eq!(
        (c, e["details"]["causes"][0]["message"].as_str()),
        (422, Some("Invalid value: null: field is immutable"))
    );
}

#[test]
fn status_patches_merge_and_apply_as_client_go_sends_them() {
    let s = Store::default();
    let claims = [kubelet_claim("u1", "g0")];
    let p = format!("{CLAIM}/status");
    let dev = r#"{"status": {"devices": [{"driver": "d", "pool": "p", "device": "g0", "networkData": {"interfaceName": "eth1"}}]}}"#;
    let (c, got) = claim_call(&s, &claims, "PATCH", &p, "", "application/merge-patch+json", dev);
    assert_eq!(c, 200, "{got}");
    assert_eq!(got["status"]["devices"][0]["networkData"]["interfaceName"], "eth1");
    assert_eq!(got["status"]["reservedFor"][0]["uid"], "pod-uid", "the rest of the status stays");
    let (c, e) = claim_call(&s, &claims, "PATCH", &p, "", "application/apply-patch+yaml", dev);
    assert_eq!(
        (c, e["message"].as_str()),
        (
            422,
            Some("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
        )
    );
    let yaml = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\nstatus:\n  devices:\n  - driver: d\n    pool: p\n    device: g0\n    data: {x: 1}\n";
    let (c, got) =
        claim_call(&s, &claims, "PATCH", &p, "fieldManager=drv&force=true", "application/apply-patch+yaml", yaml);
    assert_eq!(c, 200, "{got}");
    let d = &got["status"]["devices"][0];
    assert_eq!((d["data"]["x"].as_i64(), d["networkData"]["interfaceName"].as_str()), (Some(1), Some("eth1")));
    let (c, got) = claim_call(
        &s,
        &claims,
        "PATCH",
        &p,
        "",
        "application/json-patch+json",
        r#"[{"op":"remove","path":"/status/devices/0/data"}]"#,
    );
    assert_eq!((c, got["status"]["devices"][0].get("data")), (200, None), "{got}");
    let (c, _) = claim_call(&s, &claims, "PATCH", &p, "", "text/plain", "[]");
    assert_eq!(c, 415);
    let stale = r#"{"metadata": {"resourceVersion": "1"}, "status": {"devices": []}}"#;
    assert_eq!(claim_call(&s, &claims, "PATCH", &p, "", "application/strategic-merge-patch+json", stale).0, 409);
}

/// #33 item 1: a claim recreated with a new UID is a new object (generation
/// 1, its own status); a spec change bumps the generation.
#[test]
fn the_stored_claim_follows_the_kubelet_and_a_new_uid_starts_over() {
    let s = Store::default();
    let old = [kubelet_claim("u1", "g0")];
    let mut put = claim_call(&s, &old, "GET", CLAIM, "", "", "").1;
    put["status"]["devices"] = json!([{"driver": "d", "pool": "p", "device": "g0"}]);
    assert_eq!(claim_call(&s, &old, "PUT", &format!("{CLAIM}/status"), "", "", &put.to_string()).0, 200);
    let mut respec = kubelet_claim("u1", "g0");
    respec["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(2);
    let (_, got) = claim_call(&s, &[respec], "GET", CLAIM, "", "", "");
    assert_eq!(got["metadata"]["generation"], 2);
    assert_eq!(got["status"]["devices"][0]["device"], "g0", "the driver's status stays with the UID");
    let (_, got) = claim_call(&s, &[kubelet_claim("u2", "g1")], "GET", CLAIM, "", "", "");
    assert_eq!((got["metadata"]["uid"].as_str(), got["metadata"]["generation"].as_i64()), (Some("u2"), Some(1)));
    assert!(got["status"].get("devices").is_none());
    let (c, l) = claim_call(
        &s,
        &[kubelet_claim("u2", "g1")],
        "GET",
        "/apis/resource.k8s.io/v1/resourceclaims",
        "labelSelector=x",
        "",
        "",
    );
    assert_eq!((c, l["items"].as_array().map(Vec::len)), (200, Some(0)));
    let (c, l) = claim_call(
        &s,
        &[kubelet_claim("u2", "g1")],
        "GET",
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims",
        "",
        "",
        "",
    );
    assert_eq!((c, l["kind"].as_str(), l["items"].as_array().map(Vec::len)), (200, Some("ResourceClaimList"), Some(1)));
    // A list in protobuf, as client-go asks for it.
    let back = protobuf::decode_object(&protobuf::encode_object(&l).unwrap()).unwrap();
    assert_eq!(back["items"][0]["status"]["allocation"]["devices"]["results"][0]["device"], "g1");
    assert!(s.delete_claim("ml/gpu"), "the kubelet deletes a claim it no longer has");
    assert_eq!(claim_call(&s, &[], "GET", CLAIM, "", "", "").0, 404, "a claim the kubelet no longer has is gone");
}

/// #33 item 3: slices get generation 1 and a creationTimestamp on create,
/// the generation bumps on a spec change only; labelSelector is honoured
/// and an unsupported fieldSelector is 400 in kube-apiserver's words.
#[test]
fn slices_have_generations_and_selectors_as_kube_apiserver() {
    let s = Store::default();
    let mut obj = json!({"metadata": {"name": "s", "labels": {"tier": "a"}}, "spec": {"pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "driver": "d", "nodeName": "node-1"}});
    let (_, created) = call(&s, "POST", SLICES, "", obj.clone());
    assert_eq!(created["metadata"]["generation"], 1);
    let ts = created["metadata"]["creationTimestamp"].clone();
    assert!(ts.as_str().unwrap().ends_with('Z'));
    obj["metadata"]["labels"]["tier"] = json!("b");
    let (_, relabelled) = call(&s, "PUT", &format!("{SLICES}/s"), "", obj.clone());
    assert_eq!(
        (relabelled["metadata"]["generation"].as_i64(), &relabelled["metadata"]["creationTimestamp"]),
        (Some(1), &ts)
    );
    obj["spec"]["devices"] = json!([{"name": "dev-0"}]);
    let (_, respec) = call(&s, "PUT", &format!("{SLICES}/s"), "", obj.clone());
    assert_eq!(respec["metadata"]["generation"], 2);
    // The driver, pool name and node name are immutable (validateResourceSliceSpec with an old spec).
    obj["spec"]["driver"] = json!("d2");
    let (c, e) = call(&s, "PUT", &format!("{SLICES}/s"), "", obj);
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("spec.driver")), "{e}");
    for (q, n) in [("labelSelector=tier%3Db", 1), ("labelSelector=tier%3Da", 0), ("labelSelector=tier+in+(a,b)", 1)] {
        assert_eq!(call(&s, "GET", SLICES, q, Value::Null).1["items"].as_array().map(Vec::len), Some(n), "{q}");
    }
    // spec.pool.name is one of the fields pkg/apis/resource/v1/conversion.go selects by (the corpus found it refused here).
    let (c, e) = call(&s, "GET", SLICES, "fieldSelector=spec.pool.name%3Dp", Value::Null);
    assert_eq!((c, e["items"].as_array().map(Vec::len)), (200, Some(1)));
    let (c, e) = call(&s, "GET", SLICES, "fieldSelector=spec.allNodes%3Dtrue", Value::Null);
    assert_eq!((c, e["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(e["message"], "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.allNodes");
}

fn compute_domain_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "computedomains.resource.nvidia.com"},
        "spec": {"group": "resource.nvidia.com", "scope": "Namespaced",
            "names": {"plural": "computedomains", "singular": "computedomain", "kind": "ComputeDomain", "listKind": "ComputeDomainList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}}, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
}

const CDS: &str = "/apis/resource.nvidia.com/v1beta1/namespaces/ml/computedomains";

/// #33 item 3: a CRD in the manifest directory declares a resource whose
/// objects are stored and served (manifest objects loaded, create with
/// name validation, status subresource, update, delete), with discovery.
#[test]
fn custom_resources_declared_by_crd_manifests_are_served() {
    let s = Store::default();
    let cd = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
        "metadata": {"name": "from-manifest", "namespace": "ml"}, "spec": {"numNodes": 1}});
    // An object read before its CRD is loaded when the CRD comes.
    s.put_manifest("Api resource.nvidia.com/ComputeDomain ml/from-manifest", cd);
    assert_eq!(call(&s, "GET", CDS, "", Value::Null).0, 404, "not declared yet");
    s.put_manifest(
        "Api apiextensions.k8s.io/CustomResourceDefinition default/computedomains.resource.nvidia.com",
        compute_domain_crd(),
    );
    let (c, l) = call(&s, "GET", CDS, "", Value::Null);
    assert_eq!(
        (c, l["kind"].as_str(), l["items"][0]["metadata"]["generation"].as_i64()),
        (200, Some("ComputeDomainList"), Some(1))
    );
    let (c, e) = call(&s, "POST", CDS, "", json!({"metadata": {"name": "Bad_Name"}, "spec": {}}));
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("metadata.name")));
    let (c, created) = call(
        &s,
        "POST",
        CDS,
        "",
        json!({"metadata": {"name": "cd"}, "spec": {"numNodes": 2}, "status": {"status": "Ready"}}),
    );
    assert_eq!(c, 201, "{created}");
    assert!(created.get("status").is_none(), "status is written through /status only");
    let (c, st) = call(
        &s,
        "PUT",
        &format!("{CDS}/cd/status"),
        "",
        json!({"metadata": {"name": "cd"}, "spec": {"numNodes": 9}, "status": {"status": "Ready"}}),
    );
    assert_eq!((c, st["status"]["status"].as_str(), st["spec"]["numNodes"].as_i64()), (200, Some("Ready"), Some(2)));
    assert_eq!(st["metadata"]["generation"], 1, "a status write is no spec change");
    let mut next = st.clone();
    next["spec"]["numNodes"] = json!(3);
    next["status"] = json!({"status": "NotReady"});
    let (c, up) = call(&s, "PUT", &format!("{CDS}/cd"), "", next.clone());
    assert_eq!(
        (c, up["metadata"]["generation"].as_i64(), up["status"]["status"].as_str()),
        (200, Some(2), Some("Ready"))
    );
    assert_eq!(call(&s, "PUT", &format!("{CDS}/cd"), "", next).0, 409, "stale resourceVersion");
    let (c, l) =
        call(&s, "GET", "/apis/resource.nvidia.com/v1beta1/computedomains", "labelSelector=missing", Value::Null);
    assert_eq!((c, l["items"].as_array().map(Vec::len)), (200, Some(0)));
    assert_eq!(call(&s, "DELETE", &format!("{CDS}/cd"), "", Value::Null).0, 200);
    assert_eq!(call(&s, "GET", &format!("{CDS}/cd"), "", Value::Null).0, 404);
    let (_, d) = call(&s, "GET", "/apis/resource.nvidia.com/v1beta1", "", Value::Null);
    assert_eq!(d["resources"][1]["name"], "computedomains/status");
    let g = discovery::answer("/apis", custom::groups(&s.lock()), None, &["v1"], Some("v1")).unwrap();
    assert!(g["groups"].as_array().unwrap().iter().any(|g| g["name"] == "resource.nvidia.com"), "{g}");
    s.forget_manifest("Api resource.nvidia.com/ComputeDomain ml/from-manifest");
    assert_eq!(call(&s, "GET", CDS, "", Value::Null).1["items"].as_array().map(Vec::len), Some(0));
}

/// #33 item 1: a whole claim (spec with config, allocation with config and
/// node selector, reservedFor, device status) survives protobuf both ways.
#[test]
fn a_whole_claim_round_trips_through_protobuf() {
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "ml", "uid": "u", "resourceVersion": "3", "generation": 1, "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"devices": {
            "requests": [{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1,
                "selectors": [{"cel": {"expression": "device.driver == 'd'"}}], "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}}],
            "constraints": [{"requests": ["r"], "matchAttribute": "d/numa"}],
            "config": [{"requests": ["r"], "opaque": {"driver": "d", "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]}},
        "status": {
            "allocation": {"devices": {
                "results": [{"request": "r", "driver": "d", "pool": "p", "device": "g0", "adminAccess": true}],
                "config": [{"source": "FromClass", "requests": ["r"], "opaque": {"driver": "d", "parameters": {"interval": "Long"}}}]},
                "nodeSelector": claims::node_selector("node-1")},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}],
            "devices": [{"driver": "d", "pool": "p", "device": "g0", "data": {"x": 1},
                "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
                "networkData": {"interfaceName": "eth0", "ips": ["10.0.0.1/24"]}}]}});
    let back = protobuf::decode_object(&protobuf::encode_object(&claim).unwrap()).unwrap();
    assert_eq!(back["spec"], claim["spec"]);
    assert_eq!(back["status"], claim["status"]);
    assert_eq!(back["metadata"]["generation"], 1);
}

/// #47 item 4: the built-in kinds a driver or its helpers write are stored
/// (NVIDIA's plugin creates a Deployment and labels its Node): create with
/// apps/v1 defaults, a selector that does not match the template refused,
/// update of the object keeping its status, the status subresource keeping
/// the spec, patches, delete with preconditions and a Status answer.
#[test]
fn deployments_are_stored_with_their_strategy() {
    let s = Store::default();
    const DS: &str = "/apis/apps/v1/namespaces/ml/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mps", "labels": {"a": "b"}},
        "spec": {"selector": {"matchLabels": {"app": "mps"}}, "template": {"metadata": {"labels": {"app": "mps"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 9}});
    let (c, created) = call(&s, "POST", DS, "", d.clone());
    assert_eq!(c, 201, "{created}");
    assert_eq!(
        (created["metadata"]["namespace"].as_str(), created["metadata"]["generation"].as_i64()),
        (Some("ml"), Some(1))
    );
    assert_eq!(
        (created["spec"]["replicas"].as_i64(), created["spec"]["strategy"]["type"].as_str()),
        (Some(1), Some("RollingUpdate"))
    );
    assert_eq!(created["status"], json!({}), "status is cleared on create: {created}");
    assert_eq!(call(&s, "POST", DS, "", d.clone()).0, 409);
    let mut bad = d.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["template"]["metadata"]["labels"]["app"] = json!("other");
    let (c, e) = call(&s, "POST", DS, "", bad);
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("spec.template.metadata.labels")), "{e}");
    let (c, l) = call(&s, "GET", DS, "labelSelector=a%3Db", Value::Null);
    assert_eq!((c, l["kind"].as_str(), l["items"].as_array().map(Vec::len)), (200, Some("DeploymentList"), Some(1)));
    // The status subresource: only the status changes.
    let mut st = created.clone();
    st["status"] = json!({"replicas": 1, "readyReplicas": 1});
    st["spec"]["replicas"] = json!(5);
    let (c, with_status) = call(&s, "PUT", &format!("{DS}/mps/status"), "", st.clone());
    assert_eq!(c, 200, "{with_status}");
    assert_eq!(
        (with_status["status"]["readyReplicas"].as_i64(), with_status["spec"]["replicas"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(call(&s, "PUT", &format!("{DS}/mps/status"), "", st).0, 409, "a stale resourceVersion");
    // The object: the spec changes, the status stays, the generation counts it.
    let mut up = with_status.clone();
    up["spec"]["replicas"] = json!(2);
    up["status"] = json!({});
    let (c, updated) = call(&s, "PUT", &format!("{DS}/mps"), "", up);
    assert_eq!(c, 200, "{updated}");
    assert_eq!((updated["spec"]["replicas"].as_i64(), updated["metadata"]["generation"].as_i64()), (Some(2), Some(2)));
    assert_eq!(updated["status"]["readyReplicas"], 1);
    let (c, _) = answer_typed(
        &s,
        "n",
        "PATCH",
        &format!("{DS}/mps"),
        "",
        "application/merge-patch+json",
        br#"{"metadata":{"labels":{"x":"y"}}}"#,
    );
    assert_eq!(c, 200);
    assert_eq!(call(&s, "GET", &format!("{DS}/mps"), "", Value::Null).1["metadata"]["labels"]["x"], "y");
    let (c, gone) = call(&s, "DELETE", &format!("{DS}/mps"), "", json!({"preconditions": {"uid": "other"}}));
    assert_eq!(c, 409, "{gone}");
    let (c, gone) = call(&s, "DELETE", &format!("{DS}/mps"), "", Value::Null);
    assert_eq!(
        (c, gone["kind"].as_str(), gone["status"].as_str(), gone["details"]["kind"].as_str()),
        (200, Some("Status"), Some("Success"), Some("deployments"))
    );
    assert_eq!(call(&s, "GET", &format!("{DS}/mps"), "", Value::Null).0, 404);
}

/// #47 item 4: the node is updated (labels, as NVIDIA's compute-domain
/// plugin writes them) and its status patched; other kinds are stored
/// objects: a ConfigMap, a Secret (stringData into data), a ServiceAccount,
/// an Event, a Lease (`generateName` honoured), listed in every namespace.
#[test]
fn the_node_is_updated_and_the_other_built_in_kinds_are_stored() {
    let s = Store::default();
    let (c, node) = call(&s, "GET", "/api/v1/nodes/node-1", "", Value::Null);
    assert_eq!(c, 200);
    let mut labelled = node.clone();
    labelled["metadata"]["labels"] = json!({"nvidia.com/gpu.clique": "c1"});
    let (c, put) = call(&s, "PUT", "/api/v1/nodes/node-1", "", labelled);
    assert_eq!(c, 200, "{put}");
    assert_eq!(put["metadata"]["uid"], node["metadata"]["uid"]);
    assert_ne!(put["metadata"]["resourceVersion"], node["metadata"]["resourceVersion"]);
    let (c, patched) = answer_typed(
        &s,
        "node-1",
        "PATCH",
        "/api/v1/nodes/node-1/status",
        "",
        "application/strategic-merge-patch+json",
        br#"{"status":{"capacity":{"nvidia.com/gpu":"4"}},"metadata":{"labels":{"ignored":"yes"}}}"#,
    );
    assert_eq!(c, 200, "{patched}");
    assert_eq!(patched["status"]["capacity"]["nvidia.com/gpu"], "4");
    assert!(patched["metadata"]["labels"].get("ignored").is_none(), "a status write changes the status only");
    assert_eq!(
        call(&s, "GET", "/api/v1/nodes/node-1", "", Value::Null).1["metadata"]["labels"]["nvidia.com/gpu.clique"],
        "c1"
    );
    assert_eq!(call(&s, "GET", "/api/v1/nodes", "", Value::Null).1["items"].as_array().map(Vec::len), Some(1));
    // Another node registers as a kubelet does (one POST): its status is
    // kept on create (the node strategy), a second POST is 409, and it is
    // deleted with a Status (no graceful deletion for Nodes).
    let node_b = json!({"metadata": {"name": "node-b", "labels": {"kubernetes.io/hostname": "node-b"}},
        "status": {"capacity": {"example.com/gpu": "2"}, "conditions": [{"type": "Ready", "status": "True"}]}});
    let (c, b) = call(&s, "POST", "/api/v1/nodes", "", node_b.clone());
    assert_eq!(c, 201, "{b}");
    assert_eq!((b["kind"].as_str(), b["status"]["capacity"]["example.com/gpu"].as_str()), (Some("Node"), Some("2")));
    assert!(b["metadata"]["uid"].is_string() && b["metadata"].get("generation").is_none(), "{b}");
    assert_eq!(
        b["spec"]["taints"],
        json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
        "the NodeTaint admission plugin's"
    );
    let (c, e) = call(&s, "POST", "/api/v1/nodes", "", node_b);
    assert_eq!((c, e["reason"].as_str()), (409, Some("AlreadyExists")), "{e}");
    assert_eq!(call(&s, "GET", "/api/v1/nodes", "", Value::Null).1["items"].as_array().map(Vec::len), Some(2));
    let (c, st) = call(&s, "DELETE", "/api/v1/nodes/node-b", "", Value::Null);
    assert_eq!(
        (c, st["status"].as_str(), st["details"]["uid"].clone()),
        (200, Some("Success"), b["metadata"]["uid"].clone())
    );
    assert_eq!(call(&s, "GET", "/api/v1/nodes/node-b", "", Value::Null).0, 404);
    for (path, obj) in [
        ("/api/v1/namespaces/ml/configmaps", json!({"metadata": {"name": "cm"}, "data": {"k": "v"}})),
        ("/api/v1/namespaces/ml/secrets", json!({"metadata": {"name": "sec"}, "stringData": {"k": "abc"}})),
        ("/api/v1/namespaces/ml/serviceaccounts", json!({"metadata": {"name": "sa"}})),
        (
            "/api/v1/namespaces/ml/events",
            json!({"metadata": {"generateName": "ev."}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/ml/leases",
            json!({"metadata": {"name": "lock"}, "spec": {"holderIdentity": "me"}}),
        ),
    ] {
        let (c, o) = call(&s, "POST", path, "", obj);
        assert_eq!(c, 201, "{path}: {o}");
        assert!(o["metadata"].get("generation").is_none(), "{path}: no generation for this kind");
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        let (c, got) = call(&s, "GET", &format!("{path}/{name}"), "", Value::Null);
        assert_eq!((c, &got), (200, &o), "{path}");
    }
    assert_eq!(call(&s, "GET", "/api/v1/namespaces/ml/secrets/sec", "", Value::Null).1["data"]["k"], "YWJj");
    assert_eq!(call(&s, "GET", "/api/v1/configmaps", "", Value::Null).1["items"][0]["data"]["k"], "v");
    let mut lease = call(&s, "GET", "/apis/coordination.k8s.io/v1/namespaces/ml/leases/lock", "", Value::Null).1;
    lease["spec"]["holderIdentity"] = json!("you");
    let (c, l) = call(&s, "PUT", "/apis/coordination.k8s.io/v1/namespaces/ml/leases/lock", "", lease);
    assert_eq!((c, l["spec"]["holderIdentity"].as_str()), (200, Some("you")));
    let (_, d) = call(&s, "GET", "/apis/apps/v1", "", Value::Null);
    assert_eq!(d["resources"][0]["name"], "deployments");
    let (_, core) = call(&s, "GET", "/api/v1", "", Value::Null);
    assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "nodes/status"), "{core}");
}

/// KEP-4671/5729: PodGroups stored as 1.37 serves them
/// (scheduling.k8s.io/v1beta1, a status subresource, generation counted,
/// status cleared on create and kept by an update of the object); a parent
/// composite group is dropped with CompositePodGroup off, as kube-apiserver
/// does (so ValidatePodGroup's workloadRef rule never sees it), and the
/// declarative rules refuse a group with no scheduling policy.
#[test]
fn pod_groups_are_stored_with_their_status_subresource() {
    let s = Store::default().with_generic_workload(true).with_workload_resource_claims(true);
    const PG: &str = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups";
    let g = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "team"},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]},
        "status": {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "x"}]}});
    let (c, created) = call(&s, "POST", PG, "", g);
    assert_eq!(c, 201, "{created}");
    assert_eq!(
        (created["metadata"]["generation"].as_i64(), created["status"].get("resourceClaimStatuses")),
        (Some(1), None)
    );
    assert_eq!(created["kind"], "PodGroup");
    let mut st = created.clone();
    st["status"] = json!({"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "team-g-abcde"}]});
    let (c, updated) = call(&s, "PUT", &format!("{PG}/team/status"), "", st);
    assert_eq!((c, &updated["status"]["resourceClaimStatuses"][0]["resourceClaimName"]), (200, &json!("team-g-abcde")));
    let mut o = updated.clone();
    o["status"] = json!({});
    let (c, kept) = call(&s, "PUT", &format!("{PG}/team"), "", o);
    assert_eq!((c, &kept["status"]), (200, &updated["status"]), "an update of the object keeps its status");
    let bad = json!({"metadata": {"name": "child"}, "spec": {"parentCompositePodGroupName": "p", "schedulingPolicy": {"basic": {}}}});
    let (c, child) = call(&s, "POST", PG, "", bad);
    assert_eq!((c, child["spec"].get("parentCompositePodGroupName")), (201, None), "{child}");
    let (c, e) = call(&s, "POST", PG, "", json!({"metadata": {"name": "none"}, "spec": {}}));
    assert_eq!(c, 422, "{e}");
    assert_eq!(
        e["details"]["causes"][0]["message"], "Invalid value: \"\": must specify one of: `basic`, `gang`",
        "{e}"
    );
    assert_eq!(call(&s, "GET", "/apis/scheduling.k8s.io/v1/namespaces/ml/podgroups", "", Value::Null).0, 404);
}

/// #48: PodGroups by gate, as kube-apiserver 1.37 serves them. GenericWorkload
/// off (the default): scheduling.k8s.io/v1beta1 is not served — its paths are
/// kube-apiserver's NotFound (no details), for a watch too. On with
/// DRAWorkloadResourceClaims off (podgroup/strategy.go
/// dropDisabledPodGroupFields, dropDisabledPodGroupStatusFields): a create
/// or update loses `spec.resourceClaims` and a status write
/// `status.resourceClaimStatuses`, unless the PodGroup replaced names claims.
#[test]
fn pod_groups_follow_generic_workload_and_workload_resource_claims() {
    const PG: &str = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups";
    let g = json!({"metadata": {"name": "team"},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}});
    let off = Store::default();
    let (c, e) = call(&off, "POST", PG, "", g.clone());
    assert_eq!(
        (c, &e["reason"], &e["message"], &e["details"]),
        (404, &json!("NotFound"), &json!("the server could not find the requested resource"), &json!({}))
    );
    assert_eq!(call(&off, "GET", "/apis/scheduling.k8s.io/v1beta1", "", Value::Null).0, 404);
    assert_eq!(call(&off, "GET", PG, "watch=true", Value::Null).0, 404, "not served, for a watch too");
    assert_eq!(call(&off, "GET", "/apis/scheduling.k8s.io/v1beta1x", "", Value::Null).0, 404);

    let s = Store::default().with_generic_workload(true);
    let (c, created) = call(&s, "POST", PG, "", g.clone());
    assert_eq!((c, created["spec"].get("resourceClaims")), (201, None), "{created}");
    let mut st = created.clone();
    st["status"] = json!({"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "c"}]});
    let (c, w) = call(&s, "PUT", &format!("{PG}/team/status"), "", st);
    assert_eq!((c, w["status"].get("resourceClaimStatuses")), (200, None), "{w}");
    let mut u = w.clone();
    u["spec"]["resourceClaims"] = g["spec"]["resourceClaims"].clone();
    let (c, w) = call(&s, "PUT", &format!("{PG}/team"), "", u);
    assert_eq!((c, w["spec"].get("resourceClaims")), (200, None), "an update drops them too: {w}");
    // In use by the PodGroup replaced: kept (one stored while the gate was on).
    let on = Store::default().with_generic_workload(true).with_workload_resource_claims(true);
    let (_, kept) = call(&on, "POST", PG, "", g);
    let lax = on.with_workload_resource_claims(false);
    let mut st = kept.clone();
    st["status"] = json!({"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "c"}]});
    let (c, w) = call(&lax, "PUT", &format!("{PG}/team/status"), "", st);
    assert_eq!((c, &w["status"]["resourceClaimStatuses"][0]["name"]), (200, &json!("g")), "{w}");
    let (c, w) = call(&lax, "PUT", &format!("{PG}/team"), "", w);
    assert_eq!((c, &w["spec"]["resourceClaims"][0]["name"]), (200, &json!("g")), "{w}");
}

/// #48: under a 1.36 profile PodGroups are 1.36's: `scheduling.k8s.io/v1alpha2`
/// (not v1beta1, in discovery too), 1.37's fields unknown, WorkloadAwarePreemption's
/// fields dropped (off in 1.36), `disruptionMode: Pod` and `podGroupTemplateRef: null`
/// read back; a claim made from the group's template is owned by the v1alpha2
/// PodGroup (compared with kube-apiserver v1.36.3 by scheduler_diff).
#[test]
fn pod_groups_under_1_36_are_v1alpha2() {
    let s = Store::default().with_api_minor(36).with_generic_workload(true);
    assert_eq!(call(&s, "GET", "/apis/scheduling.k8s.io/v1beta1", "", Value::Null).0, 404);
    assert_eq!(call(&s, "GET", "/apis/scheduling.k8s.io/v1alpha2", "", Value::Null).0, 200);
    let g = json!({"metadata": {"name": "team"}, "spec": {"schedulingPolicy": {"basic": {}}, "priority": 5,
        "workloadRef": {"name": "w"}, "disruptionMode": "PodGroup"}});
    let (c, created) = call(&s, "POST", "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups", "", g.clone());
    assert_eq!(c, 201, "{created}");
    assert_eq!(
        (&created["apiVersion"], &created["spec"]),
        (
            &json!("scheduling.k8s.io/v1alpha2"),
            &json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": "Pod", "podGroupTemplateRef": null})
        )
    );
    assert_eq!(call(&s, "POST", "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups", "", g).0, 404);
}

/// #48: a PodGroup's `spec.preemptionPolicy` (PodGroupPreemptionPolicy, alpha
/// and off in 1.37): off, dropped on create and update unless the PodGroup
/// replaced has it (podgroup/strategy.go dropDisabledPreemptionPolicyField);
/// on, the Priority admission plugin fills it from the class and refuses
/// another value (admitPodGroup); either way it is immutable, as are the
/// group's priority and claims (declarative `+k8s:immutable`).
#[test]
fn a_pod_groups_preemption_policy_follows_its_gate_and_admission() {
    const PG: &str = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups";
    let g = |name: &str, policy: Option<&str>| {
        let mut g = json!({"metadata": {"name": name}, "spec": {"schedulingPolicy": {"basic": {}}}});
        if let Some(p) = policy {
            g["spec"]["preemptionPolicy"] = json!(p);
        }
        g
    };
    let off = Store::default().with_generic_workload(true);
    let (c, v) = call(&off, "POST", PG, "", g("a", Some("Never")));
    assert_eq!((c, v["spec"].get("preemptionPolicy"), &v["spec"]["priority"]), (201, None, &json!(0)), "{v}");
    let on = Store::default().with_generic_workload(true).with_pod_group_preemption_policy(true);
    let (c, v) = call(&on, "POST", PG, "", g("b", None));
    assert_eq!((c, &v["spec"]["preemptionPolicy"]), (201, &json!("PreemptLowerPriority")), "{v}");
    let (c, e) = call(&on, "POST", PG, "", g("c", Some("Never")));
    assert_eq!(c, 403, "{e}");
    assert_eq!(
        e["message"],
        "podgroups.scheduling.k8s.io \"c\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod group spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
    );
    // Immutable: a change is refused with the declarative words.
    let mut u = v.clone();
    u["spec"]["preemptionPolicy"] = json!("Never");
    u["spec"]["priority"] = json!(5);
    let (c, e) = call(&on, "PUT", &format!("{PG}/b"), "", u);
    assert_eq!(c, 422, "{e}");
    let causes: Vec<(&str, &str)> = e["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        causes,
        [
            ("spec.priority", "Invalid value: null: field is immutable"),
            ("spec.preemptionPolicy", "Invalid value: null: field is immutable")
        ]
    );
    // Kept by an update with the gate off when the PodGroup replaced has it.
    let lax = on.with_pod_group_preemption_policy(false);
    let (c, w) = call(&lax, "PUT", &format!("{PG}/b"), "", v);
    assert_eq!((c, &w["spec"]["preemptionPolicy"]), (200, &json!("PreemptLowerPriority")), "{w}");
}

/// #47 item 3: a DeviceClass the kubelet admits from its manifests is
/// written into the store in process (its uid kept, generation 1) and
/// served; the same manifest again is no write, a changed one an update,
/// and its removal a deletion.
#[test]
fn device_classes_written_in_process_are_stored_and_served() {
    let s = Store::default();
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com", "uid": "class-uid"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}});
    assert!(s.put_object("resource.k8s.io", "deviceclasses", class.clone()));
    assert!(!s.put_object("resource.k8s.io", "deviceclasses", class.clone()), "the same manifest is no write");
    const PATH: &str = "/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com";
    let (c, got) = call(&s, "GET", PATH, "", Value::Null);
    assert_eq!(c, 200, "{got}");
    assert_eq!((got["metadata"]["uid"].as_str(), got["metadata"]["generation"].as_i64()), (Some("class-uid"), Some(1)));
    let mut changed = class.clone();
    changed["spec"]["config"] = json!([{"opaque": {"driver": "gpu.example.com", "parameters": {}}}]);
    assert!(s.put_object("resource.k8s.io", "deviceclasses", changed));
    let (_, got) = call(&s, "GET", PATH, "", Value::Null);
    assert_eq!(got["metadata"]["generation"], 2);
    assert_eq!(
        call(&s, "GET", "/apis/resource.k8s.io/v1/deviceclasses", "", Value::Null).1["items"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(s.delete_object("resource.k8s.io", "deviceclasses", "", "gpu.example.com"));
    assert_eq!(call(&s, "GET", PATH, "", Value::Null).0, 404);
}

/// The next event of a JSON watch, as "TYPE name".
async fn next(rx: &mut tokio::sync::mpsc::Receiver<hyper::body::Bytes>) -> String {
    let b = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    let e: Value = serde_json::from_slice(&b).unwrap();
    format!("{} {}", e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap())
}

/// #47 item 1: pods created through the API with `spec.nodeName` are
/// stored (defaulted), listed and read by node, watched by node, their
/// status written; a delete of a bound pod is graceful (a
/// `deletionTimestamp`, the grace period, a MODIFIED event) until one with
/// `gracePeriodSeconds=0` removes it; an unbound pod goes at once.
#[tokio::test]
async fn pods_through_the_api_are_stored_watched_by_node_and_deleted_gracefully() {
    let s = Arc::new(Store::default());
    let pods = "/api/v1/namespaces/ml/pods";
    let pod = |name: &str, node: &str| {
        json!({"metadata": {"name": name}, "spec": {"nodeName": node, "automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"example.com/gpu": "1"}}}]}})
    };
    let (c, created) = call(&s, "POST", pods, "", pod("a", "node-1"));
    assert_eq!(c, 201, "{created}");
    assert_eq!(created["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"], "1");
    assert_eq!(
        (created["status"]["phase"].as_str(), created["metadata"]["generation"].as_i64()),
        (Some("Pending"), Some(1))
    );
    assert_eq!(call(&s, "POST", pods, "", pod("b", "node-2")).0, 201);
    assert_eq!(call(&s, "POST", pods, "", pod("loose", "")).0, 201);
    let (_, list) = call(&s, "GET", pods, "fieldSelector=spec.nodeName%3Dnode-1", Value::Null);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(s.pods_on("node-1").len(), 1);
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let stop = tokio_util::sync::CancellationToken::new();
    let kind = builtin::KINDS.iter().find(|k| k.kind == "Pod").unwrap();
    let sel = selectors::of_query("Pod", &query_pairs("fieldSelector=spec.nodeName%3Dnode-1")).unwrap();
    let watched = watch::Watched { what: watch::What::Builtin(kind, Some("ml".into())), sel };
    tokio::spawn(watch::pump(s.clone(), watched, "watch=true".into(), Media::Json, tx, stop.clone()));
    assert_eq!(next(&mut rx).await, "ADDED a");
    let status = json!({"status": {"phase": "Running"}}).to_string();
    let (c, running) = answer_typed(
        &s,
        "node-1",
        "PATCH",
        &format!("{pods}/a/status"),
        "",
        "application/merge-patch+json",
        status.as_bytes(),
    );
    assert_eq!((c, running["status"]["phase"].as_str()), (200, Some("Running")), "{running}");
    assert_eq!(next(&mut rx).await, "MODIFIED a");
    let (c, gone) = call(&s, "DELETE", &format!("{pods}/a"), "", Value::Null);
    assert_eq!(c, 200);
    assert!(gone["metadata"]["deletionTimestamp"].is_string(), "{gone}");
    assert_eq!(
        (gone["metadata"]["deletionGracePeriodSeconds"].as_i64(), gone["metadata"]["generation"].as_i64()),
        (Some(30), Some(2))
    );
    assert_eq!(next(&mut rx).await, "MODIFIED a");
    assert_eq!(call(&s, "GET", &format!("{pods}/a"), "", Value::Null).0, 200, "still there while terminating");
    let (c, gone) = call(&s, "DELETE", &format!("{pods}/a"), "gracePeriodSeconds=0", Value::Null);
    assert_eq!((c, gone["metadata"]["deletionGracePeriodSeconds"].as_i64()), (200, Some(0)));
    assert_eq!(next(&mut rx).await, "DELETED a");
    assert_eq!(call(&s, "GET", &format!("{pods}/a"), "", Value::Null).0, 404);
    assert_eq!(call(&s, "DELETE", &format!("{pods}/loose"), "", Value::Null).0, 200);
    assert_eq!(call(&s, "GET", &format!("{pods}/loose"), "", Value::Null).0, 404, "an unbound pod goes at once");
    let (c, e) = call(&s, "POST", pods, "", json!({"metadata": {"name": "bad"}, "spec": {"containers": []}}));
    assert_eq!((c, e["details"]["causes"][0]["field"].as_str()), (422, Some("spec.containers")));
    stop.cancel();
}

/// A list's options are validated as kube-apiserver's ValidateListOptions
/// does; a get's query carries none of them.
#[test]
fn list_options_kube_apiserver_refuses_are_422() {
    let s = Store::default();
    for q in [
        "resourceVersionMatch=NotOlderThan",
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
    ] {
        let (c, e) = call(&s, "GET", SLICES, q, Value::Null);
        assert_eq!((c, e["details"]["kind"].as_str()), (422, Some("ListOptions")), "{q}: {e}");
    }
    assert_eq!(call(&s, "GET", SLICES, "resourceVersion=0&resourceVersionMatch=NotOlderThan", Value::Null).0, 200);
    assert_eq!(
        call(&s, "GET", &format!("{SLICES}/x"), "resourceVersionMatch=NotOlderThan", Value::Null).0,
        404,
        "a get"
    );
}

/// #46: a list's resourceVersion against the store's: newer waits (then
/// 504 TooLargeResourceVersion), `Exact` at an older one is 410 (no
/// snapshots here), anything else is served now.
#[test]
fn a_lists_resource_version_is_served_now_waited_for_or_gone() {
    let q = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    assert_eq!(list_at(&q(&[]), 7), ListAt::Now);
    assert_eq!(list_at(&q(&[("resourceVersion", "0")]), 7), ListAt::Now);
    assert_eq!(list_at(&q(&[("resourceVersion", "5")]), 7), ListAt::Now);
    assert_eq!(list_at(&q(&[("resourceVersion", "7"), ("resourceVersionMatch", "Exact")]), 7), ListAt::Now);
    assert_eq!(list_at(&q(&[("resourceVersion", "5"), ("resourceVersionMatch", "Exact")]), 7), ListAt::Gone(5));
    assert_eq!(list_at(&q(&[("resourceVersion", "9"), ("resourceVersionMatch", "NotOlderThan")]), 7), ListAt::Wait(9));
    assert_eq!(list_at(&q(&[("resourceVersion", "9")]), 7), ListAt::Wait(9));
    assert_eq!(list_at(&q(&[("resourceVersion", "x")]), 7), ListAt::Now);
}

#[tokio::test]
async fn a_list_from_a_version_the_store_reaches_meanwhile_is_served() {
    let s = std::sync::Arc::new(Store::default());
    s.put_claim(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "first", "namespace": "ns", "uid": "u-first"}, "spec": {"devices": {}}}));
    let now = *s.changes.borrow();
    let q = format!("resourceVersion={}&resourceVersionMatch=NotOlderThan", now + 1);
    let writer = {
        let s = s.clone();
        tokio::spawn(async move {
            s.put_claim(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "a", "namespace": "ns", "uid": "u-a"}, "spec": {"devices": {}}}));
        })
    };
    assert_eq!(list_version_refused(&s, SLICES, &q).await, None);
    writer.await.unwrap();
    let current = *s.changes.borrow();
    assert!(current > now);
    let exact = format!("resourceVersion={current}&resourceVersionMatch=Exact");
    assert_eq!(list_version_refused(&s, SLICES, &exact).await, None, "the current version is served");
    let older = format!("resourceVersion={now}&resourceVersionMatch=Exact");
    let gone = list_version_refused(&s, SLICES, &older).await;
    assert_eq!(gone.map(|(c, b)| (c, b["reason"].clone())), Some((410, json!("Expired"))));
}

/// #46: a slice's driver name as ValidateCSIDriverName judges it (a DNS
/// subdomain once lowercased, at most 63 bytes) on create, and the
/// strategy's warning for upper-case characters.
#[test]
fn a_slices_driver_name_is_validated_and_upper_case_is_warned_about() {
    let s = Store::default();
    let slice = |name: &str, driver: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": "n", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}})
        .to_string()
    };
    let (c, v) =
        answer_typed(&s, "n", "POST", SLICES, "", "application/json", slice("a", "gpu_vendor.example.com").as_bytes());
    assert_eq!((c, v["details"]["causes"][0]["field"].as_str()), (422, Some("spec.driver")), "{v}");
    let long = format!("{}.example.com", "d".repeat(60));
    let (c, v) = answer_typed(&s, "n", "POST", SLICES, "", "application/json", slice("b", &long).as_bytes());
    assert_eq!((c, v["details"]["causes"][0]["reason"].as_str()), (422, Some("FieldValueTooLong")), "{v}");
    let (c, v) =
        answer_typed(&s, "n", "POST", SLICES, "", "application/json", slice("c", "GPU.Example.com").as_bytes());
    assert_eq!(c, 201, "{v}");
    assert_eq!(
        strategy_warnings(&v),
        vec![r#"spec.driver: driver names should be lowercase; "GPU.Example.com" contains uppercase characters"#]
    );
    let (_, v) =
        answer_typed(&s, "n", "POST", SLICES, "", "application/json", slice("d", "gpu.example.com").as_bytes());
    assert!(strategy_warnings(&v).is_empty());
}

/// The resourceslice strategy's dropDisabledDRANodeAllocatableResourcesFields
/// (v1.37.2): with the gate off a create and a replace lose the devices'
/// nodeAllocatableResources, unless the slice replaced has some; with it on
/// they are kept.
#[test]
fn node_allocatable_resources_are_dropped_with_their_gate_off_unless_in_use() {
    let nar = json!({"cpu": {"mapping": {"deviceMultiplier": "2"}}});
    let mut obj = slice_with("s", 1);
    obj["spec"]["devices"][0]["nodeAllocatableResources"] = nar.clone();
    let off = Store::default();
    let (c, created) = call(&off, "POST", SLICES, "", obj.clone());
    assert_eq!(c, 201, "{created}");
    assert!(created["spec"]["devices"][0].get("nodeAllocatableResources").is_none(), "{created}");
    let (c, put) = call(&off, "PUT", &format!("{SLICES}/s"), "", obj.clone());
    assert_eq!(c, 200, "{put}");
    assert!(put["spec"]["devices"][0].get("nodeAllocatableResources").is_none(), "{put}");
    let on = Store::default()
        .with_api_gates(super::gated::ApiGates { node_allocatable_resources: true, ..Default::default() });
    // With the gate on, the NodeDeclaredFeatures admission wants the slice's node, declaring
    // the feature: another node is not there; this node declares it.
    let mut elsewhere = obj.clone();
    elsewhere["spec"]["nodeName"] = json!("node-2");
    let (c, refused) = call(&on, "POST", SLICES, "", elsewhere);
    let words = "resourceslices.resource.k8s.io \"s\" is forbidden: node \"node-2\" not found for device \"d0\"";
    assert_eq!((c, refused["message"].as_str()), (403, Some(words)), "{refused}");
    let (c, created) = call(&on, "POST", SLICES, "", obj.clone());
    assert_eq!((c, &created["spec"]["devices"][0]["nodeAllocatableResources"]), (201, &nar), "{created}");
    // In use in the slice replaced: kept with the gate off too (a downgrade keeps what was written).
    let stored = { on.lock().slices.get("s").cloned().unwrap() };
    off.lock().put("s".into(), stored);
    let (c, put) = call(&off, "PUT", &format!("{SLICES}/s"), "", obj);
    assert_eq!((c, &put["spec"]["devices"][0]["nodeAllocatableResources"]), (200, &nar), "{put}");
}

/// NodeDeclaredFeatureValidator (plugin/pkg/admission/nodedeclaredfeatures
/// v1.37.2), the gate on: a slice with node-allocatable resources for a
/// Node that does not declare DRANodeAllocatableResources, or for no Node,
/// is 403; for a Node that declares it, or the store's own node, it is
/// taken; with the gate off nothing is checked (the field is dropped).
#[test]
fn node_allocatable_slices_need_a_node_that_declares_the_feature() {
    let nodes = "/api/v1/nodes";
    let on = Store::default()
        .with_api_gates(super::gated::ApiGates { node_allocatable_resources: true, ..Default::default() });
    for (name, declared) in [("plain", json!([])), ("ready", json!(["DRANodeAllocatableResources"]))] {
        let (c, v) =
            call(&on, "POST", nodes, "", json!({"metadata": {"name": name}, "status": {"declaredFeatures": declared}}));
        assert_eq!(c, 201, "{v}");
    }
    let slice = |node: &str| {
        let mut s = slice_with(&format!("{node}-s"), 1);
        s["spec"]["nodeName"] = json!(node);
        s["spec"]["devices"][0]["nodeAllocatableResources"] = json!({"cpu": {"mapping": {"deviceMultiplier": "2"}}});
        s
    };
    let (c, v) = call(&on, "POST", SLICES, "", slice("plain"));
    assert_eq!(
        (c, v["message"].as_str().unwrap_or_default()),
        (403, "resourceslices.resource.k8s.io \"plain-s\" is forbidden: node \"plain\" does not support DRANodeAllocatableResources feature")
    );
    let (c, v) = call(&on, "POST", SLICES, "", slice("ghost"));
    assert_eq!(
        (c, v["message"].as_str().unwrap_or_default()),
        (403, "resourceslices.resource.k8s.io \"ghost-s\" is forbidden: node \"ghost\" not found for device \"d0\"")
    );
    for node in ["ready", "node-1"] {
        let (c, v) = call(&on, "POST", SLICES, "", slice(node));
        assert_eq!(c, 201, "{node}: {v}");
    }
    let (c, v) = call(&Store::default(), "POST", SLICES, "", slice("ghost"));
    assert_eq!(c, 201, "{v}");
}

/// KEP-5517's device field by API version: 1.37 tombstoned 1.36's
/// `nodeAllocatableResourceMappings` (field 13; k8s.io/api v0.37.2
/// resource/v1/types.go) — an unknown field there, dropped (or refused under
/// Strict) — and 1.36 (k8s.io/api v0.36.6) has no `nodeAllocatableResources`.
/// Under a 1.36 profile the mappings (v0.36.6 testdata/HEAD's shape) are kept
/// with the gate on and dropped with it off unless the slice replaced has some.
#[test]
fn node_allocatable_fields_follow_the_profiles_api_version() {
    let mappings = json!({"cpu": {"capacityKey": "cores", "allocationMultiplier": "2"}});
    let resources = json!({"cpu": {"mapping": {"deviceMultiplier": "2"}}});
    let mut obj = slice_with("s", 1);
    obj["spec"]["devices"][0]["capacity"] = json!({"cores": {"value": "8"}});
    obj["spec"]["devices"][0]["nodeAllocatableResourceMappings"] = mappings.clone();
    obj["spec"]["devices"][0]["nodeAllocatableResources"] = resources.clone();
    let stored = |v: &Value, f: &str| v["spec"]["devices"][0].get(f).cloned();
    // 1.37, the gate on: 1.36's field is unknown (dropped; refused under Strict).
    let s37 = Store::default()
        .with_api_gates(super::gated::ApiGates { node_allocatable_resources: true, ..Default::default() });
    let (c, v) = call(&s37, "POST", SLICES, "", obj.clone());
    assert_eq!(c, 201, "{v}");
    assert_eq!(
        (stored(&v, "nodeAllocatableResourceMappings"), stored(&v, "nodeAllocatableResources")),
        (None, Some(resources))
    );
    let (c, v) = call(&s37, "POST", SLICES, "fieldValidation=Strict", obj.clone());
    assert_eq!(c, 400, "{v}");
    assert_eq!(
        v["message"],
        "strict decoding error: unknown field \"spec.devices[0].nodeAllocatableResourceMappings\""
    );
    // 1.36, the gate on: its own field kept, 1.37's unknown.
    let s36 = Store::default()
        .with_api_minor(36)
        .with_api_gates(super::gated::ApiGates { node_allocatable_resources: true, ..Default::default() });
    let (c, v) = call(&s36, "POST", SLICES, "", obj.clone());
    assert_eq!(c, 201, "{v}");
    assert_eq!(
        (stored(&v, "nodeAllocatableResourceMappings"), stored(&v, "nodeAllocatableResources")),
        (Some(mappings.clone()), None)
    );
    // 1.36, the gate off: dropped, unless the slice replaced has some.
    let off = Store::default().with_api_minor(36);
    let (c, v) = call(&off, "POST", SLICES, "", obj.clone());
    assert_eq!((c, stored(&v, "nodeAllocatableResourceMappings")), (201, None), "{v}");
    let kept = { s36.lock().slices.get("s").cloned().unwrap() };
    off.lock().put("s".into(), kept);
    let (c, v) = call(&off, "PUT", &format!("{SLICES}/s"), "", obj);
    assert_eq!((c, stored(&v, "nodeAllocatableResourceMappings")), (200, Some(mappings)), "{v}");
}

/// 1.36's mappings as v1.36.3 defaults and validates them (pkg/apis/resource/v1
/// SetDefaults_Device: allocationMultiplier 1; validation.go
/// validateNodeAllocatableResourceMappings).
#[test]
fn node_allocatable_mappings_are_defaulted_and_validated_as_1_36_does() {
    let s36 = Store::default()
        .with_api_minor(36)
        .with_api_gates(super::gated::ApiGates { node_allocatable_resources: true, ..Default::default() });
    let with = |name: &str, mappings: Value| {
        let mut obj = slice_with(name, 1);
        obj["spec"]["devices"][0]["capacity"] = json!({"cores": {"value": "8"}});
        obj["spec"]["devices"][0]["nodeAllocatableResourceMappings"] = mappings;
        obj
    };
    let (c, v) =
        call(&s36, "POST", SLICES, "", with("a", json!({"cpu": {"capacityKey": "cores"}, "kubernetes.io/x": {}})));
    assert_eq!(c, 201, "{v}");
    assert_eq!(
        v["spec"]["devices"][0]["nodeAllocatableResourceMappings"],
        json!({"cpu": {"capacityKey": "cores", "allocationMultiplier": "1"}, "kubernetes.io/x": {"allocationMultiplier": "1"}})
    );
    let bad = json!({"example.com/gpu": {"allocationMultiplier": "2"}, "memory": {"allocationMultiplier": "-1Gi"},
        "cpu": {"capacityKey": "nope", "allocationMultiplier": "0"}, "hugepages-2Mi": {"capacityKey": ""}});
    let (c, v) = call(&s36, "POST", SLICES, "", with("b", bad));
    assert_eq!(c, 422, "{v}");
    let got: Vec<String> = v["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    let at = "spec.devices[0].nodeAllocatableResourceMappings";
    assert_eq!(
        got,
        [
            format!("{at}[cpu].allocationMultiplier: Invalid value: \"0\": must be positive"),
            format!("{at}[cpu].capacityKey: Not found: \"nope\""),
            format!(
                "{at}[example.com/gpu]: Invalid value: \"example.com/gpu\": must be a node allocatable resource name"
            ),
            format!("{at}[hugepages-2Mi].capacityKey: Invalid value: \"\": capacityKey must not be an empty string"),
            format!("{at}[memory].allocationMultiplier: Invalid value: \"-1Gi\": must be positive"),
        ]
    );
}

/// A pod's status.nodeAllocatableResourceClaimStatuses (KEP-5517, v1.37.2):
/// dropped with the gate off (pod/util.go dropPodNodeAllocatableResourceStatus);
/// with it on kept, kept by a status write that leaves it out
/// (podStatusStrategy.PrepareForUpdate), cleared by an empty list, and
/// validated (validateNodeAllocatableResourceClaimStatus).
#[test]
fn a_pods_node_allocatable_status_is_gated_kept_and_validated_as_kube_apiserver_does() {
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "x"}], "containers": [{"name": "c", "image": "i"}]}});
    let entry = json!([{"resourceClaimName": "x", "mapping": [{"name": "cpu", "quantity": "2"}]}]);
    for (on, kept) in [(false, None), (true, Some(&entry))] {
        let s = Store::default()
            .with_api_gates(super::gated::ApiGates { node_allocatable_resources: on, ..Default::default() });
        let (c, _) = call(&s, "POST", pods, "", pod.clone());
        assert_eq!(c, 201);
        let (c, got) = call(&s, "GET", &format!("{pods}/p"), "", Value::Null);
        assert_eq!(c, 200);
        let mut w = got.clone();
        w["status"]["nodeAllocatableResourceClaimStatuses"] = entry.clone();
        let (c, put) = call(&s, "PUT", &format!("{pods}/p/status"), "", w.clone());
        assert_eq!((c, put["status"].get("nodeAllocatableResourceClaimStatuses")), (200, kept), "gate {on}: {put}");
        if !on {
            continue;
        }
        let mut omitted = put.clone();
        omitted["status"].as_object_mut().unwrap().remove("nodeAllocatableResourceClaimStatuses");
        omitted["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        let (c, put) = call(&s, "PUT", &format!("{pods}/p/status"), "", omitted.clone());
        assert_eq!((c, &put["status"]["nodeAllocatableResourceClaimStatuses"]), (200, &entry), "{put}");
        let mut bad = omitted.clone();
        bad["status"]["nodeAllocatableResourceClaimStatuses"] =
            json!([{"resourceClaimName": "nope", "overhead": [{"name": "example.com/gpu"}]}]);
        let (c, refused) = call(&s, "PUT", &format!("{pods}/p/status"), "", bad);
        let causes: Vec<&str> = refused["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["message"].as_str())
            .collect();
        assert_eq!(c, 422, "{refused}");
        assert_eq!(
            causes,
            [
                "Invalid value: \"nope\": no mapping found in pod reference",
                "Invalid value: \"example.com/gpu\": must be a node allocatable resource name",
                "Invalid value: \"\": at least one of perPod or perContainer must be set"
            ]
        );
        let mut cleared = omitted;
        cleared["status"]["nodeAllocatableResourceClaimStatuses"] = json!([]);
        let (c, put) = call(&s, "PUT", &format!("{pods}/p/status"), "", cleared);
        assert_eq!((c, put["status"].get("nodeAllocatableResourceClaimStatuses")), (200, None), "{put}");
    }
}

/// DRAConsumableCapacity off (1.34–1.35; v1.37.2 resourceslice/strategy.go
/// dropDisabledDRAConsumableCapacityFields): a slice loses its devices'
/// allowMultipleAllocations and capacity requestPolicy unless the slice it
/// replaces uses them; on (the default) they are kept.
#[test]
fn shareable_devices_lose_their_share_fields_with_consumable_capacity_off_unless_in_use() {
    let mut obj = slice_with("s", 1);
    obj["spec"]["devices"][0]["allowMultipleAllocations"] = json!(true);
    let policy = json!({"default": "1Gi", "validRange": {"min": "1Gi"}});
    obj["spec"]["devices"][0]["capacity"] = json!({"memory": {"value": "8Gi", "requestPolicy": policy}});
    let off =
        Store::default().with_api_gates(super::gated::ApiGates { consumable_capacity: false, ..Default::default() });
    let (c, created) = call(&off, "POST", SLICES, "", obj.clone());
    assert_eq!(c, 201, "{created}");
    let dev = &created["spec"]["devices"][0];
    assert_eq!((dev.get("allowMultipleAllocations"), &dev["capacity"]), (None, &json!({"memory": {"value": "8Gi"}})));
    let (c, put) = call(&off, "PUT", &format!("{SLICES}/s"), "", obj.clone());
    assert_eq!(c, 200, "{put}");
    assert!(put["spec"]["devices"][0].get("allowMultipleAllocations").is_none(), "{put}");
    let on = Store::default();
    let (c, created) = call(&on, "POST", SLICES, "", obj.clone());
    assert_eq!((c, &created["spec"]["devices"][0]["allowMultipleAllocations"]), (201, &json!(true)), "{created}");
    assert_eq!(created["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"], policy);
    // In use in the slice replaced: kept with the gate off too.
    let stored = { on.lock().slices.get("s").cloned().unwrap() };
    off.lock().put("s".into(), stored);
    let (c, put) = call(&off, "PUT", &format!("{SLICES}/s"), "", obj);
    assert_eq!((c, &put["spec"]["devices"][0]["allowMultipleAllocations"]), (200, &json!(true)), "{put}");
}

/// DRAConsumableCapacity off (api/resourceclaimspec/util.go
/// dropDisabledDRAResourceClaimConsumableCapacityFields, resourceclaim/strategy.go
/// dropDisabledDRAResourceClaimConsumableCapacityStatusFields): a created
/// claim loses its capacity requests and distinctAttribute constraints; a
/// status write loses the results' shareID and consumedCapacity and the
/// device statuses' shareID, unless the stored claim uses them.
#[test]
fn claims_lose_capacity_requests_and_shares_with_consumable_capacity_off() {
    let claims = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims";
    let body = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "c", "capacity": {"requests": {"memory": "1Gi"}}}},
            {"name": "f", "firstAvailable": [{"name": "s", "deviceClassName": "c", "capacity": {"requests": {"memory": "1Gi"}}}]}],
            "constraints": [{"matchAttribute": "d/y"}]}}});
    let off =
        Store::default().with_api_gates(super::gated::ApiGates { consumable_capacity: false, ..Default::default() });
    let (c, got) = call(&off, "POST", claims, "", body.clone());
    assert_eq!(c, 201, "{got}");
    let d = &got["spec"]["devices"];
    assert_eq!(
        (d["requests"][0]["exactly"].get("capacity"), d["requests"][1]["firstAvailable"][0].get("capacity")),
        (None, None),
        "{got}"
    );
    let on = Store::default();
    let (c, got) = call(&on, "POST", claims, "", body.clone());
    assert_eq!(
        (c, &got["spec"]["devices"]["requests"][0]["exactly"]["capacity"]),
        (201, &json!({"requests": {"memory": "1Gi"}}))
    );
    // A distinctAttribute dropped leaves an empty constraint, refused in the gate-off words.
    let mut distinct = body;
    distinct["metadata"]["name"] = json!("distinct");
    distinct["spec"]["devices"]["constraints"] = json!([{"distinctAttribute": "d/x"}]);
    let (c, e) = call(&off, "POST", claims, "", distinct.clone());
    assert_eq!(
        (c, &e["details"]["causes"][0]["field"]),
        (422, &json!("spec.devices.constraints[0].matchAttribute")),
        "{e}"
    );
    assert_eq!(call(&on, "POST", claims, "", distinct).0, 201);
    // Status: the kubelet's claim without shares; a client writes an allocation with a share.
    let share = "6a2b7d9e-1111-4222-8333-944455556666";
    for (store, kept) in [(&off, false), (&on, true)] {
        let mut plain = kubelet_claim("u1", "g0");
        plain["status"] = json!({});
        let (_, cur) = claim_call(store, &[plain], "GET", &format!("{CLAIM}/status"), "", "", "");
        let mut put = cur.clone();
        put["status"] = json!({"allocation": {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "g0",
            "shareID": share, "consumedCapacity": {"memory": "1Gi"}}]}},
            "devices": [{"driver": "d", "pool": "p", "device": "g0", "shareID": share}]});
        let (c, got) = answer_typed(store, "n", "PUT", &format!("{CLAIM}/status"), "", "", put.to_string().as_bytes());
        assert_eq!(c, 200, "{got}");
        let r = &got["status"]["allocation"]["devices"]["results"][0];
        assert_eq!((r.get("shareID").is_some(), r.get("consumedCapacity").is_some()), (kept, kept), "{got}");
        assert_eq!(got["status"]["devices"][0].get("shareID").is_some(), kept, "{got}");
    }
}

/// #48 (found comparing device-taint eviction with upstream's controller):
/// an Event is stored as Go writes a v1.Event — unset times `null`, the
/// reporter's fields `""` — and a pod condition written in process gets
/// its unset `lastProbeTime` as `null`, as one written through the API.
#[test]
fn events_and_in_process_pod_conditions_carry_their_unset_fields() {
    // A controller that marks pod ml/p (once) as the eviction controller does.
    let s = Store::with_controller(Box::new(|tx| {
        let Some(p) = tx.get("", "pods", "ml", "p") else { return };
        if p["status"]["conditions"].is_null() {
            let cond = json!({"conditions": [{"type": "DisruptionTarget", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
            assert!(tx.update_pod_status("ml", "p", cond));
        }
    }));
    let e = json!({"metadata": {"name": "p.1"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"});
    let (c, ev) = call(&s, "POST", "/api/v1/namespaces/ml/events", "", e);
    assert_eq!(c, 201, "{ev}");
    assert_eq!(
        [&ev["eventTime"], &ev["firstTimestamp"], &ev["reportingComponent"], &ev["reportingInstance"]],
        [&Value::Null, &Value::Null, &json!(""), &json!("")],
        "{ev}"
    );
    assert!(ev.get("eventTime").is_some(), "{ev}");
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(call(&s, "POST", "/api/v1/namespaces/ml/pods", "", pod).0, 201);
    let (_, p) = call(&s, "GET", "/api/v1/namespaces/ml/pods/p", "", Value::Null);
    let c = &p["status"]["conditions"][0];
    assert_eq!((c.get("lastProbeTime"), &c["type"]), (Some(&Value::Null), &json!("DisruptionTarget")), "{p}");
}

/// KEP-5055's DeviceTaintRules are served by their gate and the version's
/// API (1.37: v1, GA, on; 1.36: v1beta2, beta, off, and only with v1beta2
/// served), cluster-scoped, with `timeAdded` defaulted and the taint validated.
#[test]
fn device_taint_rules_are_served_by_gate_and_version() {
    use super::gated::ApiGates;
    const V1: &str = "/apis/resource.k8s.io/v1/devicetaintrules";
    const V1BETA2: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
    let rule = |effect: &str| {
        json!({"metadata": {"name": "r"}, "spec": {"deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "example.com/broken", "effect": effect}}})
    };
    let s = Store::default();
    let (c, created) = call(&s, "POST", V1, "", rule("NoExecute"));
    assert_eq!((c, created["spec"]["taint"]["timeAdded"].is_string()), (201, true), "{created}");
    assert_eq!(call(&s, "POST", V1, "", rule("Sometimes")).0, 422);
    let off = Store::default().with_api_gates(ApiGates { device_taint_rules: false, ..ApiGates::of_minor(37) });
    assert_eq!(call(&off, "POST", V1, "", rule("NoExecute")).0, 404);
    let g36 = |on: bool| ApiGates { device_taint_rules: on, ..ApiGates::of_minor(36) };
    let default36 = Store::default().with_api_minor(36).with_api_gates(g36(false)).with_resource_betas(true, false);
    assert_eq!(call(&default36, "POST", V1BETA2, "", rule("NoExecute")).0, 404, "1.36: its gate is off");
    let on36 = Store::default().with_api_minor(36).with_api_gates(g36(true)).with_resource_betas(true, false);
    assert_eq!(call(&on36, "POST", V1, "", rule("NoExecute")).0, 404, "1.36 has no v1 DeviceTaintRule");
    assert_eq!(call(&on36, "POST", V1BETA2, "", rule("NoExecute")).0, 201);
}
