use super::*;
use crate::api::deviceplugin::{
    CdiDevice, ContainerPreferredAllocationResponse, DevicePluginOptions, NumaNode, TopologyInfo,
};
use crate::protocol::go_status;
use crate::protocol::registration::*;
use std::path::Path;

fn dev(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
    Device {
        id: id.into(),
        health: health.into(),
        topology: numa.map(|n| TopologyInfo { nodes: n.into_iter().map(|id| NumaNode { id }).collect() }),
    }
}

fn ids(v: &[Violation]) -> Vec<&'static str> {
    v.iter().map(|x| x.rule.id).collect()
}

#[test]
fn accepts_valid_resource_names() {
    for ok in ["vendor.example/foo", "nvidia.com/gpu", "intel.com/sriov_netdevice", "a/b", "example.com/Foo.Bar-1"] {
        assert_eq!(resource_name_problem(ok), None, "{ok}");
        assert!(register_resource_name(ok).is_none());
    }
}

#[test]
fn rejects_invalid_resource_names_with_the_kubelets_text() {
    let cases = [
        ("gpu", "no domain prefix"),
        ("kubernetes.io/gpu", "reserved"),
        ("foo.kubernetes.io/gpu", "reserved"),
        ("requests.example.com/gpu", "requests."),
        ("Vendor.example/foo", "lowercase DNS subdomain"),
        ("vendor.example/", "empty"),
        ("vendor.example/-foo", "alphanumerics"),
        ("vendor.example/a/b", "exactly one '/'"),
        ("vendor..example/foo", "lowercase DNS subdomain"),
    ];
    for (name, want) in cases {
        let p = resource_name_problem(name).unwrap_or_else(|| panic!("{name} accepted"));
        assert!(p.contains(want), "{name}: {p}");
        let v = register_resource_name(name).expect("violation");
        assert_eq!(v.to_string(), format!("the ResourceName {name:?} is invalid"));
        assert!(v.rule.mock_kubelet_rejects());
    }
    let long = format!("vendor.example/{}", "a".repeat(64));
    assert!(resource_name_problem(&long).unwrap().contains("at most 63"));
    let long_prefix = format!("{}.example/foo", "a".repeat(250));
    assert!(resource_name_problem(&long_prefix).unwrap().contains("253"));
}

#[test]
fn version_text_is_the_kubelets() {
    assert!(register_version("v1beta1").is_none());
    // server.go formats api.SupportedVersions, a [1]string, with %q.
    assert_eq!(
        register_version("v1alpha").unwrap().to_string(),
        "requested API version \"v1alpha\" is not supported by kubelet. Supported version is [\"v1beta1\"]"
    );
    assert!(watcher_versions(&["v1beta1".into(), "v1".into()]).is_none());
    assert!(watcher_versions(&["v1".into()]).unwrap().to_string().contains("is not among plugin supported versions"));
}

#[test]
fn endpoints_stay_in_the_plugin_directory() {
    let dir = Path::new("/var/lib/kubelet/device-plugins");
    assert!(register_endpoint("x.sock", dir).is_none());
    assert!(register_endpoint(&"a".repeat(NAME_MAX), dir).is_none());
    for bad in ["", ".", "..", "../x.sock", "/abs.sock", "a\0b", &"a".repeat(NAME_MAX + 1)] {
        let v = register_endpoint(bad, dir).unwrap_or_else(|| panic!("{bad:?} accepted"));
        assert_eq!(v.rule.id, "register-endpoint");
        assert!(v.to_string().contains("not a socket file name inside the plugin directory"), "{v}");
    }
}

#[test]
fn device_lists() {
    let good = [dev("a", HEALTHY, Some(vec![0])), dev("b", UNHEALTHY, None)];
    assert!(devices(&good).is_empty());
    let long = "x".repeat(64);
    let bad = [
        dev("a", "healthy", Some(vec![])),
        dev("a", HEALTHY, Some(vec![-1, 1, 1])),
        dev("a", HEALTHY, None),
        dev("", HEALTHY, None),
        dev(&long, HEALTHY, None),
        dev("has space", HEALTHY, None),
        dev("\u{0}", HEALTHY, None),
        dev("gpu-é", HEALTHY, None),
    ];
    let v = devices(&bad);
    assert_eq!(
        ids(&v),
        [
            "device-health",
            "device-topology-empty",
            "device-id-unique",
            "device-topology",
            "device-topology",
            "device-id-empty",
            "device-id-length",
            "device-id-chars",
            "device-id-chars",
            "device-id-chars",
        ]
    );
    // The duplicate is reported once, at its first repeat.
    assert_eq!(v[2].device, Some(1));
    assert!(v[6].to_string().contains("64 characters, over the documented limit of 63"), "{}", v[6]);
    assert!(v[8].to_string().contains("\"\\x00\""), "{}", v[8]);
    assert!(!v[6].is_fail() && v[0].is_fail());
}

#[test]
fn snapshot_sizes() {
    assert!(snapshot_size(100, 1).is_none());
    assert_eq!(snapshot_size(KUBELET_MAX_RECV, 1).unwrap().rule.id, "snapshot-size-near");
    let v = snapshot_size(KUBELET_MAX_RECV + 1, 9).unwrap();
    assert!(v.is_fail() && v.to_string().contains("received message larger than max"), "{v}");
}

#[test]
fn health_is_case_sensitive() {
    assert_eq!(parse_health("Healthy").unwrap(), "Healthy");
    assert!(parse_health("healthy").is_err());
    assert!(parse_health("UNHEALTHY").is_err());
}

fn preq(avail: &[&str], must: &[&str], size: i32) -> ContainerPreferredAllocationRequest {
    ContainerPreferredAllocationRequest {
        available_device_i_ds: avail.iter().map(|s| s.to_string()).collect(),
        must_include_device_i_ds: must.iter().map(|s| s.to_string()).collect(),
        allocation_size: size,
    }
}
fn presp(ids: &[&str]) -> PreferredAllocationResponse {
    PreferredAllocationResponse {
        container_responses: vec![ContainerPreferredAllocationResponse {
            device_i_ds: ids.iter().map(|s| s.to_string()).collect(),
        }],
    }
}

#[test]
fn preferred_answers_one_rule_each() {
    let r = preq(&["a", "b", "c"], &["c"], 2);
    assert!(preferred(&r, &presp(&["a", "c"])).is_empty());
    assert_eq!(ids(&preferred(&r, &presp(&["a", "b", "c"]))), ["preferred-size"]);
    assert_eq!(ids(&preferred(&r, &presp(&["x", "c"]))), ["preferred-available"]);
    assert_eq!(ids(&preferred(&r, &presp(&["a", "b"]))), ["preferred-must-include"]);
    let v = preferred(&r, &presp(&["a", "x", "b"]));
    assert_eq!(ids(&v), ["preferred-size", "preferred-available", "preferred-must-include"]);
    assert!(v[0].to_string().contains("asked for 2, got 3"), "{}", v[0]);
    assert!(v[1].to_string().contains("IDs not in the available list: x"), "{}", v[1]);
    assert!(v[2].to_string().contains("must-include IDs missing: c"), "{}", v[2]);
    assert!(preferred(&r, &presp(&["c", "c"]))[0].to_string().contains("more than once"));
    let none = preferred(&r, &PreferredAllocationResponse::default());
    assert_eq!(ids(&none), ["preferred-answers"]);
    assert!(!none[0].is_fail() && none[0].to_string().contains("no container_responses"));
}

#[test]
fn allocate_answers() {
    let ok = AllocateResponse {
        container_responses: vec![ContainerAllocateResponse {
            envs: [("A".to_string(), "1".to_string())].into_iter().collect(),
            cdi_devices: vec![CdiDevice { name: "vendor.example/gpu=gpu0".into() }],
            ..Default::default()
        }],
    };
    assert!(allocate(1, &ok).is_empty());
    let v = allocate(1, &AllocateResponse::default());
    assert_eq!(ids(&v), ["allocate-answers"]);
    assert!(v[0].to_string().starts_with("no containers return in allocation response"), "{}", v[0]);
    let bad = AllocateResponse {
        container_responses: vec![
            ContainerAllocateResponse::default(),
            ContainerAllocateResponse { cdi_devices: vec![CdiDevice { name: "gpu0".into() }], ..Default::default() },
        ],
    };
    assert_eq!(ids(&allocate(1, &bad)), ["allocate-answers", "allocate-not-empty", "allocate-cdi-name"]);
    assert!(cdi_name("vendor.example/class=dev").is_none());
    assert!(cdi_name("vendor.example=dev").is_some() && cdi_name("vendor.example/class=").is_some());
}

#[test]
fn pre_start_answers() {
    assert!(pre_start(None, Duration::from_secs(1)).is_none());
    assert_eq!(
        pre_start(Some("boom"), Duration::ZERO).unwrap().to_string(),
        "device plugin PreStartContainer rpc failed with err: boom"
    );
    assert!(pre_start(None, Duration::from_secs(31)).is_some());
    assert_eq!(go_status(tonic::Code::DeadlineExceeded, "x"), "rpc error: code = DeadlineExceeded desc = x");
}

#[test]
fn options_compare() {
    let a = DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false };
    assert!(register_options(&a, &a).is_none());
    let v = register_options(&DevicePluginOptions::default(), &a).unwrap();
    assert!(v.to_string().contains("preStartRequired: true"), "{v}");
}

#[test]
fn command_line_errors_carry_the_broken_rule() {
    use std::error::Error as _;
    let e = check_resource_name("gpu").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().starts_with("invalid resource name \"gpu\": it has no domain prefix"), "{e}");
    assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("the ResourceName \"gpu\" is invalid"));
    assert!(check_resource_name("vendor.example/gpu").is_ok());
}

#[test]
fn an_unhandled_plugin_type_gets_the_kubelets_text() {
    let t = no_handler("CSIPlugin", Path::new("/var/lib/kubelet/plugins_registry/x.sock"));
    assert_eq!(
        t,
        "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket \
         /var/lib/kubelet/plugins_registry/x.sock"
    );
    // The DRA rule for a wrong type cites the same text.
    let f = crate::protocol::dra::TYPE.kubelet_text.unwrap().replacen("%s", "CSIPlugin", 1);
    assert_eq!(f.replacen("%s", "/var/lib/kubelet/plugins_registry/x.sock", 1), t);
}
