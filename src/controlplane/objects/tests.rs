use super::*;
use serde_json::json;

#[test]
fn claims_templates_classes_and_slices_parse_in_v1_and_v1beta1_shapes() {
    let v1 = json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"gpu","namespace":"ml"},
        "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu.example.com","count":2}}]}}});
    let Object::Claim { spec, uid, .. } = parse(&v1).unwrap() else { panic!() };
    assert_eq!((spec.requests[0].count, spec.requests[0].class.as_str()), (2, "gpu.example.com"));
    assert_eq!(uid.len(), 36);
    let b1 = json!({"kind":"ResourceClaimTemplate","metadata":{"name":"t"},
        "spec":{"spec":{"devices":{"requests":[{"name":"r","deviceClassName":"c","allocationMode":"All"}]}}}});
    let Object::Template { spec, namespace, .. } = parse(&b1).unwrap() else { panic!() };
    assert!(spec.requests[0].all);
    assert_eq!(namespace, "default");
    let s = json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.x","pool":{"name":"p"},
        "devices":[{"name":"g0","attributes":{"model":{"string":"a"},"other.io/n":{"int":3},"v":{"version":"1.2.3"}}}]}});
    let Object::Slice { devices, .. } = parse(&s).unwrap() else { panic!() };
    assert_eq!(devices[0].attributes["d.x/model"], Attribute::String("a".into()));
    assert_eq!(devices[0].attributes["other.io/n"], Attribute::Int(3));
    assert_eq!(devices[0].attributes["d.x/v"], Attribute::Version("1.2.3".into()));
    let bad = json!({"kind":"ResourceClaim","metadata":{"name":"x"},"spec":{"devices":{"requests":[{"name":"r","firstAvailable":[]}]}}});
    assert!(parse(&bad).unwrap_err().to_string().contains("firstAvailable"));
    let none = json!({"kind":"ResourceClaim","metadata":{"name":"x"},"spec":{}});
    assert!(parse(&none).unwrap_err().to_string().contains("at least one request"));
}

#[test]
fn v1_defaults_apply_and_selectors_are_kept_as_cel_expressions() {
    let v = json!({"kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{"requests":[
        {"name":"r","exactly":{"deviceClassName":"gpu","selectors":[{"cel":{"expression":"device.attributes['gpu.x'].model == 'a'"}}]}}]}}});
    let Object::Claim { spec, .. } = parse(&v).unwrap() else { panic!() };
    let r = &spec.requests[0];
    assert_eq!((r.count, r.all), (1, false), "v1 defaults: ExactCount, count 1");
    assert_eq!(r.selectors[0].expression, "device.attributes['gpu.x'].model == 'a'");
    let all_with_count = json!({"kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{"requests":[
        {"name":"r","exactly":{"deviceClassName":"gpu","allocationMode":"All","count":2}}]}}});
    assert!(parse(&all_with_count).unwrap_err().to_string().contains("count must not be set with allocationMode All"));
}

#[test]
fn partitions_capacity_taints_tolerations_and_constraints_parse() {
    let s = json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"gpu.x","pool":{"name":"p"},
        "sharedCounters":[{"name":"gpu-0-counters","counters":{"memory":{"value":"80Gi"}}}],
        "devices":[{"name":"gpu-0-full","consumesCounters":[{"counterSet":"gpu-0-counters","counters":{"memory":{"value":"80Gi"}}}],
            "capacity":{"memory":{"value":"80Gi","requestPolicy":{"default":"10Gi","validRange":{"min":"10Gi","step":"10Gi"}}}},
            "allowMultipleAllocations":true,
            "taints":[{"key":"unhealthy","value":"xid","effect":"NoSchedule"}]}]}});
    let Object::Slice { devices, counters, .. } = parse(&s).unwrap() else { panic!() };
    assert_eq!(counters[0].counters["memory"].text(), "80Gi");
    let d = &devices[0];
    assert_eq!(d.consumes[0].name, "gpu-0-counters");
    let cap = &d.capacity["gpu.x/memory"];
    assert_eq!(cap.policy.as_ref().unwrap().step.as_ref().unwrap().text(), "10Gi");
    assert!(d.multi);
    assert_eq!(d.taints[0].to_string(), "unhealthy=xid:NoSchedule");
    let c = json!({"kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{
        "requests":[{"name":"a","exactly":{"deviceClassName":"g","tolerations":[{"key":"unhealthy","operator":"Exists"}],
            "capacity":{"requests":{"memory":"40Gi"}}}},{"name":"b","exactly":{"deviceClassName":"g"}}],
        "constraints":[{"requests":["a","b"],"matchAttribute":"gpu.x/numa"}]}}});
    let Object::Claim { spec, .. } = parse(&c).unwrap() else { panic!() };
    assert!(spec.requests[0].tolerations[0].tolerates(&d.taints[0]));
    assert_eq!(spec.requests[0].capacity["memory"].text(), "40Gi");
    assert_eq!(spec.constraints[0].match_attribute, "gpu.x/numa");
    let bad = json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"gpu.x","pool":{"name":"p"},
        "devices":[{"name":"g","capacity":{"memory":{"value":"lots"}}}]}});
    assert!(parse(&bad).unwrap_err().to_string().contains("spec.devices[0].capacity[memory].value: quantity \"lots\""));
    let rule = json!({"apiVersion":"resource.k8s.io/v1alpha3","kind":"DeviceTaintRule","metadata":{"name":"r"},
        "spec":{"deviceSelector":{"driver":"gpu.x","device":"g0"},"taint":{"key":"maint","effect":"NoExecute"}}});
    let Object::TaintRule { rule, .. } = parse(&rule).unwrap() else { panic!() };
    assert_eq!((rule.device.as_deref(), rule.taint.effect.as_str()), (Some("g0"), "NoExecute"));
    // timeAdded is a metav1.Time: RFC 3339, else refused.
    let stamped = |t: &str| {
        json!({"kind":"DeviceTaintRule","metadata":{"name":"r"},
        "spec":{"deviceSelector":{"driver":"gpu.x"},"taint":{"key":"maint","effect":"NoExecute","timeAdded":t}}})
    };
    let Object::TaintRule { rule, .. } = parse(&stamped("2026-03-01T10:00:00Z")).unwrap() else { panic!() };
    assert_eq!(rule.taint.time_added.as_deref(), Some("2026-03-01T10:00:00Z"));
    let e = parse(&stamped("yesterday")).unwrap_err().to_string();
    assert!(e.contains("spec.taint.timeAdded: \"yesterday\" is not an RFC 3339 time"), "{e}");
    let ns =
        json!({"kind":"Namespace","metadata":{"name":"admin","labels":{"resource.kubernetes.io/admin-access":"true"}}});
    assert_eq!(parse(&ns).unwrap().key(), "Namespace admin");
}

#[test]
fn a_selector_that_does_not_compile_is_refused_as_kube_apiserver_refuses_it() {
    let v = json!({"kind":"DeviceClass","metadata":{"name":"c"},"spec":{"selectors":[
        {"cel":{"expression":"device.driver == 'x'"}},{"cel":{"expression":"device.capacity['x'].memory >"}}]}});
    let e = parse(&v).unwrap_err().to_string();
    assert!(e.starts_with("spec.selectors[1].cel.expression: compilation failed"), "{e}");
}

/// #50: a DeviceClass is read as the typed resource/v1 DeviceClass: its
/// texts as before, a field of the wrong JSON type refused with its path,
/// `null` lists empty, its config kept as written.
#[test]
fn a_device_class_is_read_typed() {
    let class = |spec: Value| parse(&json!({"kind":"DeviceClass","metadata":{"name":"c"},"spec":spec}));
    let Ok(Object::Class { selectors, config, extended_resource_name, .. }) = class(json!({
        "selectors":[{"cel":{"expression":"device.driver == 'x'"}}],
        "config":[{"opaque":{"driver":"x","parameters":{"kind":"Cfg","n":1}}}],
        "extendedResourceName":"example.com/gpu"}))
    else {
        panic!("not a class")
    };
    assert_eq!(selectors, [Selector { expression: "device.driver == 'x'".into() }]);
    assert_eq!(config, [json!({"opaque":{"driver":"x","parameters":{"kind":"Cfg","n":1}}})]);
    assert_eq!(extended_resource_name.as_deref(), Some("example.com/gpu"));
    let Ok(Object::Class { selectors, config, extended_resource_name, .. }) =
        class(json!({"selectors":null,"config":null,"extendedResourceName":""}))
    else {
        panic!("not a class")
    };
    assert!(selectors.is_empty() && config.is_empty() && extended_resource_name.is_none());
    for (spec, want) in [
        (json!({"selectors":[{}]}), "spec.selectors[0]: a selector needs cel.expression"),
        (json!({"selectors":[{"cel":{"expression":" "}}]}), "spec.selectors[0]: a selector needs cel.expression"),
        (json!({"selectors":{"cel":{}}}), "spec.selectors: invalid type: map, expected a sequence"),
        (
            json!({"selectors":[{"cel":{"expression":3}}]}),
            "spec.selectors[0].cel.expression: invalid type: integer `3`, expected a string",
        ),
        // Inside an inline message (DeviceConfiguration) the path stops at its parent.
        (json!({"config":[{"opaque":{"driver":["x"]}}]}), "spec.config[0]: invalid type: sequence, expected a string"),
        (
            json!({"extendedResourceName":true}),
            "spec.extendedResourceName: invalid type: boolean `true`, expected a string",
        ),
    ] {
        let e = class(spec.clone()).unwrap_err();
        assert!(matches!(&e, ObjectError::Field(_)), "{spec}: {e:?}");
        assert_eq!(e.to_string(), want, "{spec}");
    }
}

/// #50: a field error is typed (path, problem, the cause as its source), its text as before.
#[test]
fn a_field_error_names_its_path_and_keeps_its_cause() {
    use std::error::Error as _;
    let v = json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p"},
        "devices":[{"name":"a","capacity":{"memory":{"value":"lots"}}}]}});
    let ObjectError::Field(e) = parse(&v).unwrap_err() else { panic!("not a field error") };
    assert_eq!(e.path, "spec.devices[0].capacity[memory].value");
    assert!(matches!(&e.problem, Problem::Quantity(q) if q.0 == "lots"), "{e:?}");
    assert_eq!(e.source().map(|s| s.to_string()), Some(quantity::QuantityError("lots".into()).to_string()));
    let e = parse(&json!({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"pool":{"name":"p"}}})).unwrap_err();
    assert_eq!(
        (e.to_string().as_str(), e),
        ("spec.driver is required", ObjectError::Field(FieldError::required("spec.driver")))
    );
}
