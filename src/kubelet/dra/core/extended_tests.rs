use super::*;
use crate::controlplane::objects::Object;
use crate::kubelet::devicemanager::core::testutil::{ctr, pod, sidecar};

const GPU: &str = "example.com/gpu";

fn served(p: &Pod) -> BTreeMap<String, String> {
    dra_served(p, &BTreeMap::from([(GPU.to_string(), "gpu-class".to_string())]), &BTreeMap::new())
}

fn reqs(x: &ExtendedClaim) -> Vec<(String, u64)> {
    x.spec.requests.iter().map(|r| (r.name.clone(), r.count)).collect()
}

fn maps(x: &ExtendedClaim) -> Vec<(String, String)> {
    x.status.request_mappings.iter().map(|m| (m.container_name.clone(), m.request_name.clone())).collect()
}

#[test]
fn request_names_count_containers_and_the_containers_sorted_request_keys() {
    let mut main = ctr("main", &[(GPU, 2)]);
    // cpu sorts after example.com/gpu? No: "cpu" < "example.com/gpu", so j = 1.
    main.request_keys = vec!["cpu".into(), GPU.into(), "memory".into()];
    let p = pod("u1", vec![], vec![ctr("side", &[]), main]);
    let x = build(&p, &served(&p)).unwrap();
    assert_eq!(reqs(&x), vec![("container-1-request-1".to_string(), 2)]);
    assert_eq!(x.spec.requests[0].class, "gpu-class");
    assert_eq!(maps(&x), vec![("main".to_string(), "container-1-request-1".to_string())]);
    assert_eq!(x.generate_name, "u1-extended-resources-");
    assert!(x.status.resource_claim_name.starts_with("u1-extended-resources-"));
    assert_eq!(x.status.resource_claim_name.len(), "u1-extended-resources-".len() + 5);
}

#[test]
fn a_plain_init_container_reuses_a_later_long_lived_containers_request() {
    // init asks 1, main 2: the init container uses main's request, no request of its own.
    let p = pod("u", vec![ctr("init", &[(GPU, 1)])], vec![ctr("main", &[(GPU, 2)])]);
    let x = build(&p, &served(&p)).unwrap();
    assert_eq!(reqs(&x), vec![("container-1-request-0".to_string(), 2)]);
    assert_eq!(
        maps(&x),
        vec![("main".into(), "container-1-request-0".into()), ("init".into(), "container-1-request-0".into())]
    );
    // init asks 3: main's 1 and a request of its own for the 2 more.
    let p = pod("u", vec![ctr("init", &[(GPU, 3)])], vec![ctr("main", &[(GPU, 1)])]);
    let x = build(&p, &served(&p)).unwrap();
    assert_eq!(reqs(&x), vec![("container-0-request-0".into(), 2), ("container-1-request-0".into(), 1)]);
    assert_eq!(
        maps(&x),
        vec![
            ("main".into(), "container-1-request-0".into()),
            ("init".into(), "container-1-request-0".into()),
            ("init".into(), "container-0-request-0".into())
        ]
    );
    // A sidecar is long-lived: its own request; two plain init containers share the larger one.
    let p = pod(
        "u",
        vec![ctr("i0", &[(GPU, 1)]), ctr("i1", &[(GPU, 2)]), sidecar("side", &[(GPU, 1)])],
        vec![ctr("main", &[])],
    );
    let x = build(&p, &served(&p)).unwrap();
    assert_eq!(reqs(&x), vec![("container-1-request-0".into(), 1), ("container-2-request-0".into(), 1)]);
    assert_eq!(
        maps(&x),
        vec![
            ("side".into(), "container-2-request-0".into()),
            ("i0".into(), "container-2-request-0".into()),
            ("i1".into(), "container-2-request-0".into()),
            ("i1".into(), "container-1-request-0".into())
        ]
    );
}

#[test]
fn dra_serves_a_mapped_resource_only_while_no_device_plugin_has_it_allocatable() {
    let p = pod("u", vec![], vec![ctr("main", &[(GPU, 1), ("other.io/nic", 1)])]);
    let mapping = BTreeMap::from([(GPU.to_string(), "c".to_string())]);
    let at = |n: usize| dra_served(&p, &mapping, &BTreeMap::from([(GPU.to_string(), n)]));
    assert_eq!(at(0).keys().collect::<Vec<_>>(), vec![GPU], "allocatable 0: DRA");
    assert!(at(2).is_empty(), "a device plugin with allocatable > 0 wins");
    assert_eq!(dra_served(&p, &mapping, &BTreeMap::new()).len(), 1, "no device plugin at all: DRA");
    let none = dra_served(&p, &BTreeMap::new(), &BTreeMap::new());
    assert!(none.is_empty(), "no class maps it: not DRA's");
    let (devices, life) = split(&p, build(&p, &at(0)));
    assert_eq!(devices.containers[0].resources.keys().collect::<Vec<_>>(), vec!["other.io/nic"]);
    assert_eq!(life.resource_claims.len(), 1);
    assert!(of(&life).is_some() && of(&devices).is_none());
}

#[test]
fn every_class_maps_its_implicit_name_and_its_extended_resource_name() {
    let class = |name: &str, ext: Option<&str>| Object::Class {
        name: name.into(),
        selectors: vec![],
        config: vec![],
        extended_resource_name: ext.map(str::to_string),
        raw: serde_json::Value::Null,
    };
    let objs = [class("b", Some(GPU)), class("a", Some(GPU)), class("c", None)];
    let m = class_mapping(&objs);
    assert_eq!(m[GPU], "a", "the first class by name wins");
    assert_eq!(m["deviceclass.resource.kubernetes.io/b"], "b");
    assert_eq!(m["deviceclass.resource.kubernetes.io/c"], "c");
    assert!(is_dra_extended_name("deviceclass.resource.kubernetes.io/c") && !is_dra_extended_name("cpu"));
    let p = pod("u", vec![], vec![ctr("main", &[("deviceclass.resource.kubernetes.io/c", 1)])]);
    let s = dra_served(&p, &m, &BTreeMap::new());
    assert_eq!(s["deviceclass.resource.kubernetes.io/c"], "c");
    // Not mapped: the implicit name still never reaches the device manager.
    let (devices, life) = split(&p, None);
    assert!(devices.containers[0].resources.is_empty() && life.resource_claims.is_empty());
}

fn device(name: &str, requests: &[&str], cdi: &[&str]) -> checkpoint::Device {
    checkpoint::Device {
        pool_name: "p".into(),
        device_name: name.into(),
        request_names: Some(requests.iter().map(|s| s.to_string()).collect()),
        cdi_device_ids: Some(cdi.iter().map(|s| s.to_string()).collect()),
        share_id: None,
    }
}

#[test]
fn a_container_gets_the_devices_of_its_mapped_requests_and_a_mismatch_is_named() {
    let p = pod("u", vec![], vec![ctr("a", &[(GPU, 1)]), ctr("b", &[(GPU, 1)])]);
    let x = build(&p, &served(&p)).unwrap();
    let devs =
        [device("d0", &["container-0-request-0"], &["k/c=0"]), device("d1", &["container-1-request-0"], &["k/c=1"])];
    assert_eq!(container_cdi(&x.status, "a", &devs), vec!["k/c=0"]);
    assert_eq!(container_cdi(&x.status, "b", &devs), vec!["k/c=1"]);
    assert!(unserved(&x.status, &devs).is_empty());
    // A device naming no request serves every request.
    let any = [device("d0", &[], &["k/c=0"])];
    assert_eq!(container_cdi(&x.status, "b", &any), vec!["k/c=0"]);
    // Request names the kubelet cannot map: prepared, nothing injected (dra-driver-cpu#197).
    let foreign = [device("d0", &["gpu"], &["k/c=0"]), device("d1", &["gpu"], &["k/c=1"])];
    assert!(container_cdi(&x.status, "a", &foreign).is_empty());
    let u = unserved(&x.status, &foreign);
    assert_eq!(u.len(), 2);
    assert!(
        u[0].1.contains("container \"a\" asks for example.com/gpu through request \"container-0-request-0\""),
        "{}",
        u[0].1
    );
    assert!(u[0].1.contains("the driver answered request names [gpu]"), "{}", u[0].1);
}

#[test]
fn the_claim_name_is_cut_as_generate_name_cuts_and_stable_per_pod() {
    let long = "p".repeat(70);
    let n = claim_name(&long, "uid-1");
    assert_eq!(n.len(), 63);
    assert_eq!(n, claim_name(&long, "uid-1"));
    assert_ne!(claim_name("x", "uid-1"), claim_name("x", "uid-2"));
}
