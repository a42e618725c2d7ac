//! The API server's answers, pure (no sockets): [`answer`] over a store.

use super::*;

fn call(s: &Store, m: &str, p: &str, q: &str, b: Value) -> (u16, Value) {
    answer(s, &[], "node-1", m, p, q, b.to_string().as_bytes())
}

#[test]
fn slices_are_created_listed_replaced_and_deleted_with_integer_versions() {
    let s = Store::default();
    let obj = json!({"metadata": {"generateName": "node-1-gpu-"}, "spec": {"driver": "gpu.x", "nodeName": "node-1", "pool": {"name": "p"}, "devices": [{"name": "d0"}]}});
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
        ("PATCH", format!("{SLICES}/x")),
        ("DELETE", "/api/v1/nodes/node-1".to_string()),
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
fn claims_are_served_in_each_version_with_their_allocation() {
    let s = Store::default();
    let claim = json!({"kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "ml", "uid": "u"}, "status": {"allocation": {"devices": {"results": [{"driver": "d"}]}}}});
    for v in ["v1", "v1beta2", "v1beta1"] {
        let (c, got) = answer(
            &s,
            std::slice::from_ref(&claim),
            "n",
            "GET",
            &format!("/apis/resource.k8s.io/{v}/namespaces/ml/resourceclaims/gpu"),
            "",
            b"",
        );
        assert_eq!(c, 200);
        assert_eq!(got["apiVersion"], format!("resource.k8s.io/{v}"));
        assert_eq!(got["status"]["allocation"]["devices"]["results"][0]["driver"], "d");
    }
    let (c, e) =
        answer(&s, &[claim], "n", "GET", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/nope", "", b"");
    assert_eq!(c, 404);
    assert!(e["message"].as_str().unwrap().contains("\"nope\" not found"));
}

#[test]
fn protobuf_bodies_are_read_and_answers_written_by_negotiation() {
    let s = Store::default();
    let obj = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"generateName": "n-"}, "spec": {"driver": "d", "nodeName": "n"}});
    let pb = protobuf::encode_object(&obj).unwrap();
    let body = json_body("application/vnd.kubernetes.protobuf", pb).unwrap();
    let (c, created) = answer(&s, &[], "n", "POST", SLICES, "", &body);
    assert_eq!((c, created["spec"]["driver"].as_str()), (201, Some("d")));
    assert_eq!(created["kind"], "ResourceSlice", "stored slices name their kind (protobuf needs it)");
    let e = json_body("application/yaml", b"a: b".to_vec()).unwrap_err();
    assert_eq!(e.0, 415);
    assert!(e.1["message"].as_str().unwrap().contains("send application/json or application/vnd.kubernetes.protobuf"));
    let e = json_body("application/vnd.kubernetes.protobuf", b"{}".to_vec()).unwrap_err();
    assert_eq!(e.0, 400);
    assert!(e.1["message"].as_str().unwrap().contains("magic"));
    // An error answer in protobuf is an enveloped Status.
    let (c, v) = answer(&s, &[], "n", "GET", &format!("{SLICES}/nope"), "", b"");
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
    let obj = json!({"metadata": {"name": "s"}, "spec": {"driver": "d", "nodeName": "n"}});
    let (_, created) = call(&s, "POST", SLICES, "", obj);
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let opts = |uid: &str| {
        let o = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}});
        json_body("application/vnd.kubernetes.protobuf", protobuf::encode_object(&o).unwrap()).unwrap()
    };
    let (c, e) = answer(&s, &[], "n", "DELETE", &format!("{SLICES}/s"), "", &opts("other"));
    assert_eq!(c, 409);
    assert!(e["message"].as_str().unwrap().contains("Precondition failed: UID in precondition: other"), "{e}");
    let (c, gone) = answer(&s, &[], "n", "DELETE", &format!("{SLICES}/s"), "", &opts(&uid));
    assert_eq!((c, gone["metadata"]["name"].as_str()), (200, Some("s")));
}

#[test]
fn paths_and_query_strings_are_percent_decoded() {
    let s = Store::default();
    let obj = json!({"metadata": {"name": "gpu.example.com-node-1"}, "spec": {"driver": "gpu.example.com", "nodeName": "node 1"}});
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
