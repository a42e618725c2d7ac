//! The allocator's decisions, driven with values only. Cases follow
//! upstream's allocator_test.go where they fit (partitionable devices,
//! consumable capacity, taints, matchAttribute, firstAvailable, All).

use super::*;
use crate::controlplane::objects::{parse, Object};
use serde_json::{json, Value};

fn cand(driver: &str, dev: &str, model: &str) -> Candidate {
    Candidate {
        driver: driver.into(),
        pool: "node-1".into(),
        device: dev.into(),
        attributes: [(format!("{driver}/model"), Attribute::String(model.into()))].into_iter().collect(),
        ..Candidate::default()
    }
}

fn object(v: Value) -> Object {
    parse(&v).unwrap()
}

/// Candidates of one v1 ResourceSlice of driver gpu.x, pool p.
fn slice(spec: Value) -> Vec<Candidate> {
    let mut spec = spec;
    spec["driver"] = json!("gpu.x");
    spec["pool"] = json!({"name": "p"});
    let o = object(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": spec}),
    );
    from_slices([&o])
}

fn claim(spec: Value) -> ClaimSpec {
    let v =
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": spec});
    match parse(&v).unwrap() {
        Object::Claim { spec, .. } => spec,
        o => panic!("{o:?}"),
    }
}

fn one(class: &str, extra: Value) -> ClaimSpec {
    let mut exactly = json!({"deviceClassName": class});
    for (k, v) in extra.as_object().into_iter().flatten() {
        exactly[k] = v.clone();
    }
    claim(json!({"devices": {"requests": [{"name": "r", "exactly": exactly}]}}))
}

fn catalog(objects: &[Value]) -> Catalog {
    let objs: Vec<Object> = objects.iter().cloned().map(object).collect();
    Catalog::of(&objs)
}

fn run(spec: &ClaimSpec, cat: &Catalog, cands: &[Candidate], taken: &[Allocated]) -> Result<Vec<Allocated>, String> {
    let taken: Vec<&Allocated> = taken.iter().collect();
    allocate("ns/c", spec, cat, cands, &taken, &BTreeSet::new()).map_err(|e| e.to_string())
}

fn devices(got: &[Allocated]) -> Vec<String> {
    got.iter().map(|a| format!("{} {}", a.request, a.device)).collect()
}

fn held(driver: &str, pool: &str, device: &str) -> Allocated {
    Allocated {
        request: "r".into(),
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        ..Allocated::default()
    }
}

fn class(name: &str, exprs: &[&str]) -> Value {
    let sel: Vec<Value> = exprs.iter().map(|e| json!({"cel": {"expression": e}})).collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": sel}})
}

#[test]
fn the_allocator_counts_selects_and_shares_only_with_admin_access() {
    let cands =
        vec![cand("gpu.x", "g0", "a"), cand("gpu.x", "g1", "b"), cand("gpu.x", "g2", "a"), cand("nic.x", "n0", "a")];
    let none = Catalog::default();
    let got = run(&one("gpu.x", json!({"count": 2})), &none, &cands, &[]).unwrap();
    assert_eq!(devices(&got), ["r g0", "r g1"]);
    let sel = json!({"selectors": [{"cel": {"expression": "device.attributes[\"gpu.x\"].model == \"a\""}}]});
    let taken = [held("gpu.x", "node-1", "g0")];
    assert_eq!(run(&one("gpu.x", sel.clone()), &none, &cands, &taken).unwrap()[0].device, "g2");
    let mut two = sel.clone();
    two["count"] = json!(2);
    let e = run(&one("gpu.x", two.clone()), &none, &cands, &taken).unwrap_err();
    assert!(e.contains("2 match, 1 of them free (device g0: in use)"), "{e}");
    // adminAccess shares a held device, in a namespace labelled for it only.
    two["adminAccess"] = json!(true);
    let e = run(&one("gpu.x", two.clone()), &none, &cands, &taken).unwrap_err();
    assert!(e.contains("asks for adminAccess, which namespace \"ns\" does not allow (label the Namespace resource.kubernetes.io/admin-access: \"true\""), "{e}");
    let admin_ns = catalog(&[
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {ADMIN_ACCESS_LABEL: "true"}}}),
    ]);
    let got = run(&one("gpu.x", two), &admin_ns, &cands, &taken).unwrap();
    assert!(got.len() == 2 && got.iter().all(|a| a.admin));
    assert_eq!(serde_json::to_value(&got[0]).unwrap()["adminAccess"], json!(true));
    let e = run(&one("nope", json!({})), &none, &cands, &taken).unwrap_err();
    assert!(e.contains("device class \"nope\" not found"), "{e}");
    let refs: Vec<&Allocated> = taken.iter().collect();
    let e = allocate("ns/c", &one("nope", json!({})), &none, &cands, &refs, &["nope".to_string()].into()).unwrap_err();
    assert!(e.to_string().contains("0 match, 0 of them free (devices come from ResourceSlice manifests"), "{e}");
    let nic_a =
        catalog(&[class("any-a", &["device.driver == \"nic.x\" && device.attributes[\"nic.x\"].model == \"a\""])]);
    let got = run(&one("any-a", json!({"allocationMode": "All"})), &nic_a, &cands, &[]).unwrap();
    assert_eq!(devices(&got), ["r n0"]);
}

#[test]
fn first_available_takes_the_first_sub_request_that_fits_and_names_it() {
    let cands = vec![cand("gpu.x", "g0", "small"), cand("gpu.x", "g1", "small"), cand("nic.x", "n0", "a")];
    let spec = claim(json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.x", "selectors": [{"cel": {"expression": "device.attributes[\"gpu.x\"].model == \"big\""}}]},
        {"name": "two-small", "deviceClassName": "gpu.x", "count": 2},
    ]}]}}));
    let none = Catalog::default();
    assert_eq!(devices(&run(&spec, &none, &cands, &[]).unwrap()), ["gpu/two-small g0", "gpu/two-small g1"]);
    let e = run(&spec, &none, &cands, &[held("gpu.x", "node-1", "g0")]).unwrap_err();
    assert!(
        e.contains("no sub-request of firstAvailable request \"gpu\"")
            && e.contains("\"gpu/big\"")
            && e.contains("\"gpu/two-small\" wants 2"),
        "{e}"
    );
    // A later request that cannot be met sends the allocator back to the next sub-request.
    let spec = claim(json!({"devices": {"requests": [
        {"name": "any", "firstAvailable": [{"name": "first", "deviceClassName": "gpu.x"}, {"name": "nic", "deviceClassName": "nic.x"}]},
        {"name": "both", "exactly": {"deviceClassName": "gpu.x", "count": 2}},
    ]}}));
    assert_eq!(devices(&run(&spec, &none, &cands, &[]).unwrap()), ["any/nic n0", "both g0", "both g1"]);
    let bad = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "x"}, "firstAvailable": [{"name": "s", "deviceClassName": "x"}]}]}}});
    assert!(parse(&bad).unwrap_err().to_string().contains("exactly one of exactly and firstAvailable"));
}

#[test]
fn a_slices_skip_node_operations_reach_the_allocation() {
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "cp.x", "pool": {"name": "p"}, "devices": [{"name": "v0"}], "skipNodeOperations": ["*"]}});
    let cands = from_slices([&object(slice)]);
    let got = run(&one("cp.x", json!({})), &Catalog::default(), &cands, &[]).unwrap();
    assert_eq!(got[0].skip_node_operations, ["*"]);
}

/// The DeviceClasses of dra-example-driver's and NVIDIA's Helm charts use
/// single quotes, map indexing, `quantity(...)` and semver comparisons.
#[test]
fn cel_selectors_compile_as_the_scheduler_compiles_them() {
    let cands = slice(json!({"devices": [
        {"name": "gpu-0", "attributes": {"productName": {"string": "H100"}, "index": {"int": 0}, "mig": {"bool": false},
            "driverVersion": {"version": "550.54.15"}}, "capacity": {"memory": {"value": "80Gi"}}},
        {"name": "gpu-1", "attributes": {"productName": {"string": "A10"}, "index": {"int": 1}, "mig": {"bool": true},
            "driverVersion": {"version": "535.0.0"}}, "capacity": {"memory": {"value": "24Gi"}}},
    ]}));
    let pick = |exprs: &[&str]| {
        let cat = catalog(&[class("c", exprs)]);
        run(&one("c", json!({"allocationMode": "All"})), &cat, &cands, &[]).map(|g| devices(&g).join(","))
    };
    assert_eq!(pick(&["device.driver == 'gpu.x'"]).unwrap(), "r gpu-0,r gpu-1");
    assert_eq!(pick(&["device.attributes['gpu.x']['productName'] == 'H100'"]).unwrap(), "r gpu-0");
    assert_eq!(pick(&["device.attributes['gpu.x'].productName.matches('^A1[0-9]$')"]).unwrap(), "r gpu-1");
    assert_eq!(pick(&["device.capacity['gpu.x'].memory.compareTo(quantity('40Gi')) >= 0"]).unwrap(), "r gpu-0");
    assert_eq!(pick(&["device.capacity['gpu.x'].memory.isLessThan(quantity('25Gi'))"]).unwrap(), "r gpu-1");
    assert_eq!(
        pick(&["device.attributes['gpu.x'].driverVersion.isGreaterThan(semver('540.0.0'))"]).unwrap(),
        "r gpu-0"
    );
    assert_eq!(
        pick(&["'productName' in device.attributes['gpu.x'] && device.attributes['gpu.x'].index in [1, 2]"]).unwrap(),
        "r gpu-1"
    );
    assert_eq!(pick(&["has(device.attributes['gpu.x'].mig) && !device.attributes['gpu.x'].mig"]).unwrap(), "r gpu-0");
    // A domain the device lacks is an empty map: has() and in answer false.
    let e = pick(&["has(device.attributes['other.io'].x)"]).unwrap_err();
    assert!(e.contains("wants all device(s)") && e.contains("0 match"), "{e}");
    assert_eq!(
        pick(&["!('x' in device.attributes['other.io'])", "device.attributes['gpu.x'].index == 0"]).unwrap(),
        "r gpu-0"
    );
    // A missing attribute is a runtime error, which stops the claim's allocation.
    let e = pick(&["device.attributes['gpu.x'].nope == 'x'"]).unwrap_err();
    assert!(e.contains("class c: selector #0: on device gpu.x/p/gpu-0: CEL runtime error: no such key: nope"), "{e}");
    // A selector that does not compile (a manifest's is refused at parse; a
    // class or claim built in code) is the claim's reason.
    let mut cat = Catalog::default();
    cat.classes.insert("c".into(), vec![Selector { expression: "device.attributes['gpu.x'].productName ==".into() }]);
    let e = run(&one("c", json!({})), &cat, &cands, &[]).unwrap_err();
    assert!(e.starts_with("claim ns/c: class c: selector #0: CEL compilation failed: "), "{e}");
    let e = pick(&["device.attributes['gpu.x'].index"]).unwrap_err();
    assert!(e.contains("must evaluate to bool"), "{e}");
    // A claim's own selector.
    let sel = json!({"count": 1, "selectors": [{"cel": {"expression": "device.attributes['gpu.x'].index == 1"}}]});
    assert_eq!(devices(&run(&one("gpu.x", sel), &Catalog::default(), &cands, &[]).unwrap()), ["r gpu-1"]);
}

/// KEP-4815 (upstream "partitionable-devices" cases): gpu-0-full and its
/// two halves consume the one counter set; never more than 80Gi together.
#[test]
fn partitions_never_oversubscribe_their_shared_counters() {
    let consumes = |gi: &str| json!([{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": gi}}}]);
    let cands = slice(json!({
    "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}],
    "devices": [
        {"name": "gpu-0-partition-0", "consumesCounters": consumes("40Gi")},
        {"name": "gpu-0-partition-1", "consumesCounters": consumes("40Gi")},
        {"name": "gpu-0-full", "consumesCounters": consumes("80Gi")},
    ]}));
    let none = Catalog::default();
    let got = run(&one("gpu.x", json!({"allocationMode": "All"})), &none, &cands, &[]);
    assert!(
        got.as_ref().is_err_and(|e| e.contains("3 match, 2 of them free (device gpu-0-full: shared counter gpu-0-counters/memory would exceed 80Gi (80Gi in use))")),
        "{got:?}"
    );
    assert_eq!(
        devices(&run(&one("gpu.x", json!({"count": 2})), &none, &cands, &[]).unwrap()),
        ["r gpu-0-partition-0", "r gpu-0-partition-1"]
    );
    let e = run(&one("gpu.x", json!({"count": 3})), &none, &cands, &[]).unwrap_err();
    assert!(e.contains("wants 3") && e.contains("fit one by one but no 3 of them together"), "{e}");
    // Held by other claims: one half leaves the other half, never the whole.
    let half = [held("gpu.x", "p", "gpu-0-partition-0")];
    assert_eq!(devices(&run(&one("gpu.x", json!({})), &none, &cands, &half).unwrap()), ["r gpu-0-partition-1"]);
    let both = [held("gpu.x", "p", "gpu-0-partition-0"), held("gpu.x", "p", "gpu-0-partition-1")];
    let e = run(&one("gpu.x", json!({})), &none, &cands, &both).unwrap_err();
    assert!(
        e.contains("device gpu-0-full: shared counter gpu-0-counters/memory would exceed 80Gi (80Gi in use)"),
        "{e}"
    );
    let full = [held("gpu.x", "p", "gpu-0-full")];
    let e = run(&one("gpu.x", json!({})), &none, &cands, &full).unwrap_err();
    assert!(e.contains("3 match, 0 of them free"), "{e}");
    // Counter sets published in a slice of their own (the v1 shape).
    let counters = object(
        json!({"kind": "ResourceSlice", "metadata": {"name": "c"}, "spec": {"driver": "gpu.x", "pool": {"name": "p"},
        "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}]}}),
    );
    let devs = object(
        json!({"kind": "ResourceSlice", "metadata": {"name": "d"}, "spec": {"driver": "gpu.x", "pool": {"name": "p"},
        "devices": [{"name": "a", "consumesCounters": consumes("80Gi")}, {"name": "b", "consumesCounters": consumes("1")}]}}),
    );
    let cands = from_slices([&counters, &devs]);
    assert!(run(&one("gpu.x", json!({"count": 2})), &none, &cands, &[]).is_err());
}

/// KEP-5075 (upstream consumable capacity cases): shares of one device.
#[test]
fn consumable_capacity_shares_a_device_within_its_capacity_and_policy() {
    let cands = slice(json!({"devices": [{"name": "gpu-0", "allowMultipleAllocations": true,
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "max": "60Gi", "step": "10Gi"}}}}}]}));
    let none = Catalog::default();
    let ask = |q: &str| one("gpu.x", json!({"capacity": {"requests": {"memory": q}}}));
    let first = run(&ask("40Gi"), &none, &cands, &[]).unwrap();
    assert_eq!(first[0].consumed_capacity, BTreeMap::from([("memory".to_string(), "40Gi".to_string())]));
    let share = first[0].share_id.clone().unwrap();
    // A UUID, as upstream's (allocatedstate.go GenerateShareID), not 10 hex digits.
    let groups: Vec<usize> = share.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{share}");
    assert!(share.chars().all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{share}");
    let v = serde_json::to_value(&first[0]).unwrap();
    assert_eq!((v["consumedCapacity"]["memory"].clone(), v["shareID"].clone()), (json!("40Gi"), json!(share)));
    let second = run(&ask("40Gi"), &none, &cands, &first).unwrap();
    assert_ne!(second[0].share_id, first[0].share_id);
    let both: Vec<Allocated> = first.iter().chain(&second).cloned().collect();
    let e = run(&ask("40Gi"), &none, &cands, &both).unwrap_err();
    assert!(e.contains("device gpu-0: capacity gpu.x/memory: 40Gi more would exceed 80Gi (80Gi allocated)"), "{e}");
    // Rounded up to the step; the default without an amount; above max refused.
    assert_eq!(run(&ask("15Gi"), &none, &cands, &[]).unwrap()[0].consumed_capacity["memory"], "20Gi");
    assert_eq!(run(&ask("1Gi"), &none, &cands, &[]).unwrap()[0].consumed_capacity["memory"], "10Gi");
    assert_eq!(run(&one("gpu.x", json!({})), &none, &cands, &[]).unwrap()[0].consumed_capacity["memory"], "10Gi");
    let e = run(&ask("70Gi"), &none, &cands, &[]).unwrap_err();
    assert!(e.contains("70Gi rounds up to 70Gi, above the validRange max 60Gi"), "{e}");
    let e = run(&one("gpu.x", json!({"capacity": {"requests": {"cores": "1"}}})), &none, &cands, &[]).unwrap_err();
    assert!(e.contains("device gpu-0: has no capacity \"cores\""), "{e}");
    // validValues: the next valid value; without a policy a share takes it all.
    let cands = slice(json!({"devices": [
        {"name": "v", "allowMultipleAllocations": true, "capacity": {"bw": {"value": "10G", "requestPolicy": {"validValues": ["1G", "5G", "10G"]}}}},
        {"name": "w", "allowMultipleAllocations": true, "capacity": {"bw": {"value": "10G"}}}]}));
    let got = run(&one("gpu.x", json!({"capacity": {"requests": {"bw": "2G"}}})), &none, &cands, &[]).unwrap();
    assert_eq!((got[0].device.as_str(), got[0].consumed_capacity["bw"].as_str()), ("v", "5G"));
    let held_w = run(&claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x",
        "selectors": [{"cel": {"expression": "device.allowMultipleAllocations && device.capacity['gpu.x'].bw.isGreaterThan(quantity('9G'))"}}]}}]}})), &none, &cands, &[]).unwrap();
    assert_eq!(held_w[0].consumed_capacity["bw"], "10G", "no amount, no default: all of it");
}

/// KEP-5055 (upstream "tainted-device" cases): NoSchedule and NoExecute
/// keep a device unless tolerated; None does not; DeviceTaintRules taint too.
#[test]
fn tainted_devices_are_allocated_only_when_the_request_tolerates_the_taint() {
    let cands = slice(json!({"devices": [
        {"name": "sick", "taints": [{"key": "gpu.x/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]},
        {"name": "noted", "taints": [{"key": "note", "effect": "None"}]},
    ]}));
    let none = Catalog::default();
    let e = run(&one("gpu.x", json!({"count": 2})), &none, &cands, &[]).unwrap_err();
    assert!(e.contains("device sick: tainted NoSchedule: gpu.x/unhealthy=xid-79:NoSchedule (not tolerated)"), "{e}");
    assert_eq!(devices(&run(&one("gpu.x", json!({})), &none, &cands, &[]).unwrap()), ["r noted"]);
    for tol in [
        json!({"key": "gpu.x/unhealthy", "operator": "Exists"}),
        json!({"key": "gpu.x/unhealthy", "value": "xid-79", "effect": "NoSchedule"}),
        json!({"operator": "Exists"}),
    ] {
        let got = run(&one("gpu.x", json!({"count": 2, "tolerations": [tol.clone()]})), &none, &cands, &[]).unwrap();
        assert_eq!(got.len(), 2, "{tol}");
        assert_eq!(got[0].tolerations.len(), 1, "tolerations are copied into the result");
    }
    for tol in [
        json!({"key": "gpu.x/unhealthy", "value": "other"}),
        json!({"key": "gpu.x/unhealthy", "operator": "Exists", "effect": "NoExecute"}),
    ] {
        assert!(
            run(&one("gpu.x", json!({"count": 2, "tolerations": [tol.clone()]})), &none, &cands, &[]).is_err(),
            "{tol}"
        );
    }
    let rule = catalog(&[
        json!({"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "drain"},
        "spec": {"deviceSelector": {"driver": "gpu.x", "device": "noted"}, "taint": {"key": "maintenance", "effect": "NoExecute"}}}),
    ]);
    let e = run(&one("gpu.x", json!({})), &rule, &cands, &[]).unwrap_err();
    assert!(e.contains("device noted: tainted NoExecute: maintenance:NoExecute"), "{e}");
}

/// constraints.matchAttribute (upstream "with-constraint" cases): the
/// allocator goes back on an earlier pick to find devices that agree.
#[test]
fn match_attribute_backtracks_to_devices_that_share_the_value() {
    let numa = |n: i64| json!({"numa": {"int": n}});
    let cands = slice(json!({"devices": [
        {"name": "g0", "attributes": numa(0)}, {"name": "g1", "attributes": numa(1)}, {"name": "n1", "attributes": numa(1)},
        {"name": "bare"}]}));
    let spec = claim(json!({"devices": {
        "requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.x", "selectors": [{"cel": {"expression": "has(device.attributes['gpu.x'].numa)"}}]}},
            {"name": "nic", "exactly": {"deviceClassName": "gpu.x", "selectors": [{"cel": {"expression": "has(device.attributes['gpu.x'].numa) && device.attributes['gpu.x'].numa == 1"}}]}}],
        "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "gpu.x/numa"}]}}));
    let none = Catalog::default();
    // gpu takes g0 first; nic (numa 1 only) then fails, so gpu goes back to g1.
    assert_eq!(devices(&run(&spec, &none, &cands, &[]).unwrap()), ["gpu g1", "nic n1"]);
    let e = run(&spec, &none, &cands, &[held("gpu.x", "p", "g1")]).unwrap_err();
    assert!(e.contains("request \"nic\"") && e.contains("constraints.matchAttribute gpu.x/numa"), "{e}");
    // A device without the attribute never satisfies the constraint.
    let all =
        claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x", "count": 2}}],
        "constraints": [{"matchAttribute": "gpu.x/numa"}]}}));
    assert_eq!(devices(&run(&all, &none, &cands, &[]).unwrap()), ["r g1", "r n1"]);
    let e = run(&all, &none, &cands, &[held("gpu.x", "p", "n1")]).unwrap_err();
    assert!(e.contains("device bare: constraints.matchAttribute gpu.x/numa: the device has no such attribute"), "{e}");
}

#[test]
fn all_mode_takes_every_matching_device_or_none() {
    let cands = slice(json!({"devices": [{"name": "a"}, {"name": "b"}]}));
    let none = Catalog::default();
    assert_eq!(
        devices(&run(&one("gpu.x", json!({"allocationMode": "All"})), &none, &cands, &[]).unwrap()),
        ["r a", "r b"]
    );
    let e =
        run(&one("gpu.x", json!({"allocationMode": "All"})), &none, &cands, &[held("gpu.x", "p", "b")]).unwrap_err();
    assert!(e.contains("wants all device(s)") && e.contains("2 match, 1 of them free (device b: in use)"), "{e}");
}

/// A NoExecute taint added after allocation (a slice republished, or a
/// DeviceTaintRule): the eviction controller's decision per allocated
/// device. Only NoExecute tolerations count (devicetainteviction's
/// claimEvictionTime): one with no effect let the device be allocated but
/// neither keeps nor delays the eviction.
#[test]
fn a_later_no_execute_taint_evicts_unless_tolerated_for_good() {
    let cands = slice(json!({"devices": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]}));
    let spec = claim(json!({"devices": {"requests": [
        {"name": "plain", "exactly": {"deviceClassName": "gpu.x"}},
        {"name": "for-60s", "exactly": {"deviceClassName": "gpu.x", "tolerations": [{"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}},
        {"name": "for-good", "exactly": {"deviceClassName": "gpu.x", "tolerations": [{"key": "drain", "operator": "Exists", "effect": "NoExecute"}]}},
        {"name": "any-effect", "exactly": {"deviceClassName": "gpu.x", "tolerations": [{"key": "drain", "operator": "Exists"}]}}]}}));
    let got = run(&spec, &Catalog::default(), &cands, &[]).unwrap();
    assert_eq!(devices(&got), ["plain a", "for-60s b", "for-good c", "any-effect d"]);
    assert!(taints::evictions(&got, &cands, &[]).is_empty(), "no taint yet");
    let drain = catalog(&[json!({"kind": "DeviceTaintRule", "metadata": {"name": "d"},
        "spec": {"deviceSelector": {"driver": "gpu.x"}, "taint": {"key": "drain", "effect": "NoExecute"}}})]);
    let ev = taints::evictions(&got, &cands, &drain.rules);
    let words: Vec<String> = ev.iter().map(|e| format!("{} {:?}", e.device.device, e.after_seconds)).collect();
    assert_eq!(words, ["a None", "b Some(60)", "d None"]);
    // NoSchedule added later does not evict.
    let ns = catalog(&[json!({"kind": "DeviceTaintRule", "metadata": {"name": "d"},
        "spec": {"deviceSelector": {"driver": "gpu.x"}, "taint": {"key": "drain", "effect": "NoSchedule"}}})]);
    assert!(taints::evictions(&got, &cands, &ns.rules).is_empty());
}

/// devicetainteviction evicts at the taint's timeAdded plus the smallest
/// tolerationSeconds of the matching NoExecute tolerations (≤ 0: at
/// timeAdded), not when the taint was first seen; a taint without timeAdded
/// counts from when it was first seen.
#[test]
fn a_no_execute_taint_evicts_at_its_time_added_plus_the_toleration_seconds() {
    use std::time::{Duration, SystemTime};
    let t = |s: &str| crate::core::time::parse_rfc3339(s).unwrap();
    let cands = slice(json!({"devices": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}));
    let tol =
        |secs: i64| json!([{"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs}]);
    let spec = claim(json!({"devices": {"requests": [
        {"name": "plain", "exactly": {"deviceClassName": "gpu.x"}},
        {"name": "for-60s", "exactly": {"deviceClassName": "gpu.x",
            "tolerations": [tol(300)[0].clone(), tol(60)[0].clone()]}},
        {"name": "negative", "exactly": {"deviceClassName": "gpu.x", "tolerations": tol(-5)}}]}}));
    let got = run(&spec, &Catalog::default(), &cands, &[]).unwrap();
    assert_eq!(devices(&got), ["plain a", "for-60s b", "negative c"]);
    let rule = |added: Value| {
        catalog(&[json!({"kind": "DeviceTaintRule", "metadata": {"name": "d"},
            "spec": {"deviceSelector": {"driver": "gpu.x"}, "taint": {"key": "drain", "effect": "NoExecute", "timeAdded": added}}})])
    };
    let drain = rule(json!("2026-03-01T10:00:00Z"));
    let ev = taints::evictions(&got, &cands, &drain.rules);
    // First seen long after it was added: the time it was added counts.
    let seen = t("2026-03-01T10:00:50Z");
    let at = |e: &taints::Eviction, now: &str| e.when(seen, t(now));
    let when: Vec<(String, String, bool)> = ev
        .iter()
        .map(|e| {
            let d = at(e, "2026-03-01T10:00:59Z");
            (e.device.device.clone(), crate::core::time::rfc3339_nano(d.at), d.now)
        })
        .collect();
    assert_eq!(
        when,
        [
            ("a".to_string(), "2026-03-01T10:00:00Z".to_string(), true),
            ("b".to_string(), "2026-03-01T10:01:00Z".to_string(), false),
            ("c".to_string(), "2026-03-01T10:00:00Z".to_string(), true),
        ],
        "plain at timeAdded; the smallest of 300 and 60 s; a negative as 0"
    );
    let b = &ev[1];
    assert_eq!(at(b, "2026-03-01T10:00:59Z").added, t("2026-03-01T10:00:00Z"));
    assert!(at(b, "2026-03-01T10:01:00Z").now, "due at timeAdded + 60 s");
    // No timeAdded: counted from when it was first seen.
    let unstamped = rule(Value::Null);
    let ev = taints::evictions(&got, &cands, &unstamped.rules);
    let d = ev[1].when(seen, seen + Duration::from_secs(59));
    assert_eq!((d.added, d.at, d.now), (seen, seen + Duration::from_secs(60), false));
    assert!(ev[1].when(seen, seen + Duration::from_secs(60)).now);
    // A huge tolerationSeconds is never reached, and does not overflow.
    let spec = one("gpu.x", json!({"tolerations": tol(i64::MAX)}));
    let got = run(&spec, &Catalog::default(), &cands, &[]).unwrap();
    let ev = taints::evictions(&got, &cands, &drain.rules);
    assert!(!ev[0].when(seen, SystemTime::now()).now);
}

/// AllocationResultsMaxSize: at most 32 devices in one claim's result; a
/// firstAvailable request falls back to a sub-request that asks for fewer.
#[test]
fn a_claim_never_lists_more_than_32_devices() {
    let devs: Vec<Value> = (0..40).map(|i| json!({"name": format!("d{i:02}")})).collect();
    let cands = slice(json!({"devices": devs}));
    let none = Catalog::default();
    let e = run(&one("gpu.x", json!({"allocationMode": "All"})), &none, &cands, &[]).unwrap_err();
    assert!(e.contains("the claim would hold 40 devices, more than the 32 an allocation result may list"), "{e}");
    assert_eq!(run(&one("gpu.x", json!({"count": 32})), &none, &cands, &[]).unwrap().len(), 32);
    let spec = claim(json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
        {"name": "all", "deviceClassName": "gpu.x", "allocationMode": "All"}, {"name": "some", "deviceClassName": "gpu.x", "count": 4}]}]}}));
    assert_eq!(run(&spec, &none, &cands, &[]).unwrap().len(), 4);
}

/// The slices of pools `(pool, spec)` of driver gpu.x, each one slice.
fn pools(specs: &[(&str, Value)], features: &Features) -> (Vec<Candidate>, Vec<Object>) {
    let objs: Vec<Object> = specs
        .iter()
        .map(|(pool, spec)| {
            let mut spec = spec.clone();
            spec["driver"] = json!("gpu.x");
            spec["pool"] = json!({"name": pool, "resourceSliceCount": 1});
            object(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("s-{pool}")}, "spec": spec}))
        })
        .collect();
    (from_slices_with(&objs, features), objs)
}

fn with(features: Features) -> Catalog {
    Catalog { features, ..catalog(&[]) }
}

/// KEP-5007 (structured v0.37.2 isSelectable, GatherPools, Allocate): a
/// device with bindingConditions is never picked with the feature off; on,
/// its pool is tried after the pools without, and the result carries its
/// conditions.
#[test]
fn binding_conditions_are_allocated_last_and_copied_only_with_the_gate() {
    let bound = json!({"devices": [{"name": "b0", "bindingConditions": ["ready"], "bindingFailureConditions": ["failed"], "bindsToNode": true}]});
    let plain = json!({"devices": [{"name": "d0"}]});
    let on = Features::default();
    assert!(on.binding_conditions, "beta, on in 1.37");
    // Pool "a" sorts first, but has binding conditions: "b" is tried first.
    let (cands, _) = pools(&[("a", bound.clone()), ("b", plain)], &on);
    assert_eq!(cands.iter().map(|c| c.device.as_str()).collect::<Vec<_>>(), ["d0", "b0"]);
    let two = one("gpu.x", json!({"count": 2}));
    let got = run(&two, &with(on), &cands, &[]).unwrap();
    assert_eq!(devices(&got), ["r d0", "r b0"]);
    assert!(got[0].binding_conditions.is_empty());
    assert_eq!(
        (got[1].binding_conditions.as_slice(), got[1].binding_failure_conditions.as_slice()),
        (&["ready".to_string()][..], &["failed".to_string()][..])
    );
    let off = Features { binding_conditions: false, ..on };
    let e = run(&two, &with(off), &cands, &[]).unwrap_err();
    assert!(e.contains("wants 2 device(s)"), "{e}");
    assert!(!Features::of_minor(35).binding_conditions);
}

/// KEP-5491 (allocator_experimental.go matchAttributeConstraint,
/// constraint.go distinctAttributeConstraint): with the feature, values
/// match when the sets intersect and are distinct when disjoint; without,
/// a list attribute matches only alone.
#[test]
fn list_attributes_match_by_intersection_only_with_the_gate() {
    let spec = json!({"devices": [
        {"name": "d0", "attributes": {"numa": {"ints": [0, 1]}}},
        {"name": "d1", "attributes": {"numa": {"ints": [1, 2]}}},
        {"name": "d2", "attributes": {"numa": {"int": 2}}}]});
    let on = Features { list_type_attributes: true, ..Features::default() };
    let (cands, _) = pools(&[("p", spec)], &on);
    let req = |c: Value| {
        claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x", "count": 2}}],
        "constraints": [c]}}))
    };
    let matching = req(json!({"matchAttribute": "gpu.x/numa"}));
    assert_eq!(devices(&run(&matching, &with(on), &cands, &[]).unwrap()), ["r d0", "r d1"]);
    let e = run(&matching, &with(Features::default()), &cands, &[]).unwrap_err();
    assert!(e.contains("matchAttribute"), "a list matches only alone without the gate: {e}");
    let distinct = req(json!({"distinctAttribute": "gpu.x/numa"}));
    // d0 and d1 share 1; d0 and d2 are disjoint.
    assert_eq!(devices(&run(&distinct, &with(on), &cands, &[]).unwrap()), ["r d0", "r d2"]);
}

/// KEP-5963 (compatibility_groups.go, allocator_experimental.go
/// checkAndConsumeCompatibilityGroups, pools_experimental.go GatherPools):
/// devices on one counter set are co-allocated only while their groups
/// intersect, against those other claims hold too; without the gate, the
/// slice that declares groups is ignored (its pool incomplete).
#[test]
fn compatibility_groups_keep_incompatible_partitions_apart() {
    let cc =
        |g: &[&str]| json!([{"counterSet": "gpu-0", "counters": {"mem": {"value": "1Gi"}}, "compatibilityGroups": g}]);
    let counters = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
        "spec": {"driver": "gpu.x", "pool": {"name": "p", "resourceSliceCount": 2},
                 "sharedCounters": [{"name": "gpu-0", "counters": {"mem": {"value": "8Gi"}}}]}});
    let devs = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "devs"},
        "spec": {"driver": "gpu.x", "pool": {"name": "p", "resourceSliceCount": 2}, "devices": [
            {"name": "mig-0", "consumesCounters": cc(&["mig"])},
            {"name": "vgpu-0", "consumesCounters": cc(&["vgpu"])},
            {"name": "mig-1", "consumesCounters": cc(&["mig", "vgpu"])}]}});
    let objs = [object(counters), object(devs)];
    let on = Features { compatibility_groups: true, ..Features::default() };
    let cands = from_slices_with(&objs, &on);
    let two = one("gpu.x", json!({"count": 2}));
    assert_eq!(devices(&run(&two, &with(on), &cands, &[]).unwrap()), ["r mig-0", "r mig-1"]);
    // Another claim holds vgpu-0: only devices with group vgpu may join.
    let got = run(&one("gpu.x", json!({})), &with(on), &cands, &[held("gpu.x", "p", "vgpu-0")]).unwrap();
    assert_eq!(devices(&got), ["r mig-1"]);
    // Without the gate the devices' slice is ignored: no device, and the pool is incomplete.
    let off = Features::default();
    assert!(from_slices_with(&objs, &off).is_empty());
    assert_eq!(unusable_pools_with(&objs, &off), ["gpu.x/p".to_string()].into());
}

/// KEP-6080 (allocator_experimental.go lookupAttribute): a request's
/// derived attribute is evaluated per device for the constraints and
/// shadows a static one; an error stops the claim; without the gate the
/// claim cannot be allocated at all.
#[test]
fn derived_attributes_feed_constraints_only_with_the_gate() {
    let spec = json!({"devices": [
        {"name": "d0", "attributes": {"topo": {"string": "numa-1"}}},
        {"name": "d1", "attributes": {"topo": {"string": "numa-0"}}},
        {"name": "d2", "attributes": {"topo": {"string": "numa-1"}}}]});
    let on = Features { derived_attributes: true, ..Features::default() };
    let (cands, _) = pools(&[("p", spec)], &on);
    let derived = |expr: &str| {
        claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x", "count": 2,
            "derivedAttributes": [{"name": "derived/numa", "expression": expr}]}}],
            "constraints": [{"matchAttribute": "derived/numa"}]}}))
    };
    let numa = derived("device.attributes[device.driver].topo.endsWith('1') ? 1 : 0");
    assert_eq!(devices(&run(&numa, &with(on), &cands, &[]).unwrap()), ["r d0", "r d2"]);
    let e = run(&derived("device.attributes[device.driver].nope"), &with(on), &cands, &[]).unwrap_err();
    assert!(e.contains("evaluate derived attribute derived/numa on device gpu.x/p/d0 failed"), "{e}");
    let e = run(&numa, &with(Features::default()), &cands, &[]).unwrap_err();
    assert!(e.contains("cannot handle request with derived attributes"), "{e}");
}

/// One shareable device gpu-0 (8 × 10Gi of memory), model "a".
fn spec_of_one() -> Value {
    json!({"devices": [{"name": "gpu-0", "allowMultipleAllocations": true, "attributes": {"model": {"string": "a"}},
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi"}}}}]})
}

/// KEP-5075 with DRAConsumableCapacity off (alpha, off, in 1.34–1.35;
/// structured v0.37.2): `allowMultipleAllocations` is not read (incubating
/// allocateDevice sets allowMultipleAllocations only with the feature), so
/// a shareable device goes to one claim whole, with no shareID and no
/// consumedCapacity; a share another claim holds counts as the whole device
/// (dynamicresources GatherAllocatedState: shared device IDs become device
/// IDs). Capacity requests: with no other beyond-stable feature the
/// `stable` allocator runs and never reads them (nor accepts a
/// distinctAttribute constraint: "empty constraint"); with one (binding
/// conditions) `incubating` runs and refuses them.
#[test]
fn without_consumable_capacity_a_shareable_device_goes_to_one_claim_whole() {
    let spec = spec_of_one();
    let off = Features::of_minor(35);
    assert!(
        !off.consumable_capacity && Features::of_minor(36).consumable_capacity && Features::ALL.consumable_capacity
    );
    let (cands, _) = pools(&[("p", spec.clone())], &off);
    let plain = one("gpu.x", json!({}));
    let first = run(&plain, &with(off), &cands, &[]).unwrap();
    assert_eq!(devices(&first), ["r gpu-0"]);
    assert_eq!((first[0].share_id.as_ref(), first[0].consumed_capacity.len()), (None, 0), "{first:?}");
    let e = run(&plain, &with(off), &cands, &first).unwrap_err();
    assert!(e.contains("1 match, 0 of them free"), "{e}");
    // A share allocated while the feature was on holds the device whole.
    let on = Features::of_minor(36);
    let (shareable, _) = pools(&[("p", spec)], &on);
    let share = run(&plain, &with(on), &shareable, &[]).unwrap();
    assert!(share[0].share_id.is_some());
    assert!(run(&plain, &with(on), &shareable, &share).is_ok(), "on: shared");
    let e = run(&plain, &with(off), &cands, &share).unwrap_err();
    assert!(e.contains("1 match, 0 of them free"), "{e}");
    // stable: capacity requests are not read; a distinctAttribute constraint is refused.
    let ask = one("gpu.x", json!({"capacity": {"requests": {"memory": "200Gi"}}}));
    assert_eq!(devices(&run(&ask, &with(off), &cands, &[]).unwrap()), ["r gpu-0"]);
    let distinct = claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x"}}],
        "constraints": [{"distinctAttribute": "gpu.x/model"}]}}));
    assert_eq!(
        run(&distinct, &with(off), &cands, &[]).unwrap_err(),
        "claim ns/c, constraint #0: empty constraint (unsupported constraint type?)"
    );
    // incubating (binding conditions on): capacity requests refused, per request and subrequest.
    let incubating = Features { binding_conditions: true, ..off };
    assert_eq!(
        run(&ask, &with(incubating), &cands, &[]).unwrap_err(),
        "claim ns/c, request r: has capacity requests, but the DRAConsumableCapacity feature is disabled"
    );
    let sub = claim(json!({"devices": {"requests": [{"name": "r", "firstAvailable": [
        {"name": "s", "deviceClassName": "gpu.x", "capacity": {"requests": {"memory": "1Gi"}}}]}]}}));
    assert_eq!(
        run(&sub, &with(incubating), &cands, &[]).unwrap_err(),
        "claim ns/c, subrequest s: has capacity requests, but the DRAConsumableCapacity feature is disabled"
    );
    assert!(run(&distinct, &with(incubating), &cands, &[]).is_ok(), "incubating knows distinctAttribute");
    // Selectors see the slice's allowMultipleAllocations in incubating (feature on or
    // off), false in stable (isSelectable's cel.Device).
    let sel = |e: &str| {
        claim(json!({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.x",
            "selectors": [{"cel": {"expression": e}}]}}]}}))
    };
    let shareable_sel = sel("device.allowMultipleAllocations");
    assert!(run(&shareable_sel, &with(off), &cands, &[]).is_err(), "stable: false");
    let (incubating_cands, _) = pools(&[("p", spec_of_one())], &incubating);
    let got = run(&shareable_sel, &with(incubating), &incubating_cands, &[]).unwrap();
    assert_eq!((devices(&got), got[0].share_id.as_ref()), (vec!["r gpu-0".to_string()], None), "seen, not shared");
    assert!(run(&shareable_sel, &with(on), &shareable, &[]).is_ok());
}

/// Allocate with the driver index ([`search::Search`] tries only the
/// driver's devices) and with every candidate scanned: the same answer and
/// the same number of search steps (so the search gives up at the same
/// point), or the same error.
fn indexed_as_plain(
    spec: &ClaimSpec,
    cat: &Catalog,
    cands: &[Candidate],
    taken: &[Allocated],
) -> (Result<Vec<Allocated>, String>, u64) {
    let plain = {
        search::PLAIN_SCAN.with(|p| p.set(true));
        let r = run(spec, cat, cands, taken);
        search::PLAIN_SCAN.with(|p| p.set(false));
        (r, search::STEPS.with(std::cell::Cell::get))
    };
    let indexed = (run(spec, cat, cands, taken), search::STEPS.with(std::cell::Cell::get));
    assert_eq!(indexed, plain, "the driver index answers otherwise than the plain scan for {spec:?}");
    indexed
}

#[test]
fn the_driver_index_answers_as_scanning_every_candidate() {
    // Three drivers' devices interleaved; each device's "v" pairs it with one other of its driver.
    let drivers = ["a.x", "b.x", "c.x"];
    let mut cands = Vec::new();
    for i in 0..90 {
        let d = drivers[i % 3];
        let mut c = cand(d, &format!("dev-{i}"), if i % 2 == 0 { "big" } else { "small" });
        c.attributes.insert(format!("{d}/v"), Attribute::Int((i / 6) as i64));
        cands.push(c);
    }
    let taken: Vec<Allocated> =
        (0..90).step_by(7).map(|i| held(drivers[i % 3], "node-1", &format!("dev-{i}"))).collect();
    let cat = catalog(&[
        class("a-big", &["device.driver == \"a.x\"", "device.attributes[\"a.x\"].model == \"big\""]),
        class("big-a", &["device.attributes[\"a.x\"].model == \"big\"", "device.driver == \"a.x\""]),
        class("a-fails", &["device.driver == \"a.x\"", "device.attributes[\"a.x\"].nope == 1"]),
    ]);
    let pair = |class: &str, count: u64, attr: &str| {
        claim(json!({"devices": {
            "requests": [{"name": "r", "exactly": {"deviceClassName": class, "count": count}}],
            "constraints": [{"matchAttribute": attr}]}}))
    };
    let mut answers = Vec::new();
    for spec in [
        one("a.x", json!({})),
        one("b.x", json!({"count": 3})),
        one("c.x", json!({"count": 40})),
        one("a-big", json!({"count": 2})),
        one("big-a", json!({"count": 2})),
        one("a-fails", json!({})),
        one("a.x", json!({"selectors": [{"cel": {"expression": "device.attributes[\"a.x\"].model == \"small\""}}]})),
        pair("a.x", 2, "a.x/v"),
        pair("b.x", 3, "b.x/v"),
        claim(json!({"devices": {"requests": [
            {"name": "r", "firstAvailable": [
                {"name": "s1", "deviceClassName": "c.x", "count": 31},
                {"name": "s2", "deviceClassName": "a-big", "count": 2}]},
            {"name": "q", "exactly": {"deviceClassName": "b.x", "count": 2}}]}})),
    ] {
        answers.push(indexed_as_plain(&spec, &cat, &cands, &taken).0.map(|d| devices(&d)));
    }
    // What each got (as before the index: dev-0 is taken, each 7th is).
    let ok = |v: &[&str]| Ok(v.iter().map(|d| format!("r {d}")).collect::<Vec<_>>());
    assert_eq!(answers[0], ok(&["dev-3"]));
    assert_eq!(answers[1], ok(&["dev-1", "dev-4", "dev-10"]));
    assert_eq!(answers[3], ok(&["dev-6", "dev-12"]));
    assert_eq!(answers[7], ok(&["dev-6", "dev-9"]));
    let err = |i: usize, text: &str| {
        assert!(answers[i].as_ref().is_err_and(|e| e.contains(text)), "{i}: {:?}", answers[i]);
    };
    err(2, "wants 40 device(s) of class \"c.x\"; 90 match, 90 of them free");
    err(4, "class big-a: selector #0: on device b.x/node-1/dev-1");
    err(5, "class a-fails: selector #1: on device a.x/node-1/dev-3");
    err(8, "wants 3 device(s) of class \"b.x\"; 30 match, 26 of them free");
    // s1 wants 31 of the 26 free c.x devices: the search gives up (at the same step).
    err(9, "no allocation found within 200000 steps");
    // Three devices of one value when each value has two: every pair tried,
    // the devices of the other drivers counted as steps as the plain scan takes them.
    let many: Vec<Candidate> = (0..600)
        .map(|i| {
            let d = drivers[i % 3];
            let mut c = cand(d, &format!("dev-{i}"), "m");
            c.attributes.insert(format!("{d}/v"), Attribute::Int((i / 6) as i64));
            c
        })
        .collect();
    let (r, steps) = indexed_as_plain(&pair("a.x", 3, "a.x/v"), &cat, &many, &[]);
    assert!(r.as_ref().is_err_and(|e| e.contains("200 match, 200 of them free")), "{r:?}");
    assert_eq!(steps, 90_600);
}
