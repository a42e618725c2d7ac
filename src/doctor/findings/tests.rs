//! The finding kinds, one node state per test.

use super::*;
use crate::api::deviceplugin::{CdiDevice, ContainerAllocateResponse};
use crate::client::checkpoint::Data;
use crate::doctor::facts::{Entry, Plugin, PodContainer};
use std::path::PathBuf;

const DP: &str = "/n/dp/";

fn node() -> Facts {
    Facts::empty(DP)
}
fn sock(f: &mut Facts, name: &str, c: Connect) {
    f.entries.push(Entry {
        path: PathBuf::from(DP).join(name),
        name: name.into(),
        kind: PathKind::Socket,
        connect: Some(c),
        mtime: None,
    });
}
fn plugin(f: &mut Facts, name: &str, devs: &[(&str, &str)]) {
    sock(f, name, Connect::Answered);
    f.plugins.push(Plugin::with_devices(PathBuf::from(DP).join(name), devs));
}
fn entry(uid: &str, c: &str, r: &str, ids: &[&str]) -> PodDeviceEntry {
    PodDeviceEntry {
        pod_uid: uid.into(),
        container_name: c.into(),
        resource_name: r.into(),
        device_ids: [("0".to_string(), ids.iter().map(|s| s.to_string()).collect())].into_iter().collect(),
        alloc_resp: String::new(),
    }
}
fn checkpoint(f: &mut Facts, entries: Vec<PodDeviceEntry>, reg: &[(&str, &[&str])]) {
    f.checkpoint = Checkpoint::Read(Data {
        pod_device_entries: entries,
        registered_devices: reg
            .iter()
            .map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect()))
            .collect(),
    });
}
fn alloc(f: &mut Facts, a: &[(&str, &[&str])]) {
    f.allocatable =
        Got::Yes(a.iter().map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect())).collect());
}
type Devices<'a> = &'a [(&'a str, &'a [&'a str])];
fn pod(f: &mut Facts, ns: &str, name: &str, containers: &[(&str, Devices)]) {
    let Got::Yes(pods) = &mut f.pods else { panic!("pods not answered") };
    pods.push(Pod {
        namespace: ns.into(),
        name: name.into(),
        containers: containers
            .iter()
            .map(|(c, d)| PodContainer {
                name: c.to_string(),
                devices: d.iter().map(|(r, i)| (r.to_string(), i.iter().map(|s| s.to_string()).collect())).collect(),
                claims: Vec::new(),
            })
            .collect(),
    });
}
fn checks(r: &Report) -> Vec<(&'static str, String)> {
    r.findings.iter().map(|x| (x.check, x.subject.clone())).collect()
}
fn one<'a>(r: &'a Report, check: &str) -> &'a Finding {
    let v: Vec<&Finding> = r.findings.iter().filter(|x| x.check == check).collect();
    assert_eq!(v.len(), 1, "one {check} finding expected: {:#?}", r.findings);
    v[0]
}
const H: &str = "Healthy";

#[test]
fn a_running_pods_init_container_devices_are_normal() {
    let mut f = node();
    plugin(&mut f, "a.sock", &[("a-0", H), ("a-1", H)]);
    plugin(&mut f, "b.sock", &[("b-0", H)]);
    checkpoint(
        &mut f,
        vec![entry("u1", "setup", "example.com/a", &["a-0"]), entry("u1", "main", "example.com/b", &["b-0"])],
        &[("example.com/a", &["a-0", "a-1"]), ("example.com/b", &["b-0"])],
    );
    alloc(&mut f, &[("example.com/a", &["a-0", "a-1"]), ("example.com/b", &["b-0"])]);
    pod(&mut f, "ml", "trainer", &[("main", &[("example.com/b", &["b-0"])])]);
    let r = derive(&f);
    assert_eq!(r.result, "ok", "{:#?}", r.findings);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert_eq!(r.checked.plugins.len(), 2);
}

#[test]
fn allocations_of_pods_not_on_the_node_are_stale_and_name_the_pod_uid() {
    let mut f = node();
    plugin(&mut f, "a.sock", &[("a-0", H), ("a-1", H)]);
    checkpoint(
        &mut f,
        vec![entry("gone", "main", "example.com/a", &["a-1"]), entry("initonly", "setup", "example.com/a", &["a-0"])],
        &[("example.com/a", &["a-0", "a-1"])],
    );
    alloc(&mut f, &[("example.com/a", &["a-0", "a-1"])]);
    // The kubelet still has a directory for the pod whose init container runs.
    f.pod_dirs = Some(["initonly".to_string()].into_iter().collect());
    let r = derive(&f);
    let s = one(&r, "stale-allocation");
    assert!(s.evidence.contains("pod UID gone") && s.evidence.contains("a-1"), "{s:?}");
    assert_eq!(one(&r, "pod-not-running").severity, Severity::Info);
    assert_eq!(r.result, "error");
}

#[test]
fn identical_device_ids_across_resources_do_not_hide_a_dead_plugin() {
    // smarter-device-manager: "\x00".. for every resource.
    for (live, dead) in [("smarter-ttyUSB0.sock", "smarter-ttyUSB1.sock"), ("p1.sock", "p2.sock")] {
        let mut f = node();
        plugin(&mut f, live, &[("\u{0}", H)]);
        sock(&mut f, dead, Connect::Refused);
        checkpoint(
            &mut f,
            vec![entry("u1", "main", "smarter-devices/ttyUSB1", &["\u{0}"])],
            &[("smarter-devices/ttyUSB0", &["\u{0}"]), ("smarter-devices/ttyUSB1", &["\u{0}"])],
        );
        alloc(&mut f, &[("smarter-devices/ttyUSB0", &["\u{0}"])]);
        pod(&mut f, "default", "serial", &[("main", &[("smarter-devices/ttyUSB1", &["\u{0}"])])]);
        let r = derive(&f);
        let d = one(&r, "plugin-died");
        assert_eq!(d.subject, "smarter-devices/ttyUSB1");
        assert!(d.message.contains(dead), "{d:?}");
        assert_eq!(r.checked.plugins.len(), 1);
        assert_eq!(r.checked.plugins[0].resource, "smarter-devices/ttyUSB0");
        assert!(!checks(&r).iter().any(|(c, _)| *c == "stale-socket"), "the stale socket is explained once");
        assert_eq!(r.result, "error");
    }
}

#[test]
fn a_killed_plugin_is_not_a_kubelet_restart() {
    let mut f = node();
    sock(&mut f, "foo.sock", Connect::Refused);
    checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0", "foo-1"])]);
    alloc(&mut f, &[]);
    let r = derive(&f);
    let d = one(&r, "plugin-died");
    assert!(d.message.contains("grace period") && !d.message.contains("re-register"), "{d:?}");
    assert!(d.evidence.contains("allocatable: 0"));
    assert!(!checks(&r).iter().any(|(c, _)| *c == "not-re-registered"));
}

#[test]
fn a_plugin_that_did_not_re_register_after_a_kubelet_restart() {
    let mut f = node();
    plugin(&mut f, "bar.sock", &[("bar-0", H)]);
    checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"]), ("example.com/bar", &["bar-0"])]);
    alloc(&mut f, &[("example.com/bar", &["bar-0"])]);
    let r = derive(&f);
    let d = one(&r, "not-re-registered");
    assert_eq!(d.subject, "example.com/foo");
    assert!(d.message.contains("did not register again after the kubelet restarted"));
    // Without PodResources the same follows from the sockets alone.
    f.allocatable = Got::Failed("Unimplemented".into());
    assert_eq!(one(&derive(&f), "not-re-registered").subject, "example.com/foo");
    // … unless a live plugin's devices were not read (--no-streams): it may be foo's.
    f.streams = false;
    f.plugins[0].devices = None;
    f.plugins[0].socket = format!("{DP}p.sock").into();
    let r = derive(&f);
    assert!(!checks(&r).iter().any(|(c, _)| *c == "not-re-registered"), "{:#?}", r.findings);
    // A socket named after its resource still maps without devices.
    f.plugins[0].socket = format!("{DP}bar.sock").into();
    assert_eq!(one(&derive(&f), "not-re-registered").subject, "example.com/foo");
}

#[test]
fn a_live_plugin_without_devices_is_not_called_unregistered() {
    let mut f = node();
    plugin(&mut f, "nvidia-x.sock", &[]);
    checkpoint(&mut f, vec![], &[("nvidia.com/gpu", &[])]);
    alloc(&mut f, &[]);
    let r = derive(&f);
    assert_eq!(r.result, "warning", "{:#?}", r.findings);
    assert!(one(&r, "resource-unavailable").evidence.contains("nvidia-x.sock"));
}

#[test]
fn a_missing_kubelet_socket_is_reported_once() {
    for k in [Connect::Missing, Connect::Refused] {
        let mut f = node();
        f.kubelet = k;
        sock(&mut f, "foo.sock", Connect::Refused);
        checkpoint(&mut f, vec![entry("u", "main", "example.com/foo", &["foo-0"])], &[("example.com/foo", &["foo-0"])]);
        f.pods = Got::Connect(Connect::Missing);
        f.allocatable = Got::Connect(Connect::Missing);
        let r = derive(&f);
        assert_eq!(checks(&r), [("kubelet-down", format!("{DP}kubelet.sock"))], "{:#?}", r.findings);
        assert!(r.findings[0].evidence.contains("foo.sock"));
    }
}

#[test]
fn permission_denied_is_unknown_and_never_advises_removal() {
    let mut f = node();
    f.kubelet = Connect::PermissionDenied;
    sock(&mut f, "live.sock", Connect::PermissionDenied);
    sock(&mut f, "other.sock", Connect::PermissionDenied);
    checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"])]);
    f.pods = Got::Connect(Connect::PermissionDenied);
    f.allocatable = Got::Connect(Connect::PermissionDenied);
    let r = derive(&f);
    assert_eq!(r.result, "unknown", "{:#?}", r.findings);
    let p = one(&r, "permission-denied");
    assert!(p.evidence.contains("live.sock") && p.evidence.contains("kubelet.sock"), "{p:?}");
    assert!(p.fix.contains("run doctor as root") && p.fix.contains("do not remove"));
    for x in &r.findings {
        assert!(!x.fix.contains("removing it is safe") && x.check != "stale-socket", "{x:?}");
    }
}

#[test]
fn a_stale_socket_alone_is_a_warning_with_safe_removal() {
    let mut f = node();
    sock(&mut f, "dead.sock", Connect::Refused);
    let r = derive(&f);
    let s = one(&r, "stale-socket");
    assert_eq!(s.severity, Severity::Warning);
    assert!(s.fix.contains("connect was refused"));
}

#[test]
fn plugin_and_kubelet_disagreeing_is_a_warning_listing_both_sides() {
    let mut f = node();
    plugin(&mut f, "gdp.sock", &[("x1", H), ("x2", H), ("x3", H)]);
    checkpoint(&mut f, vec![], &[("squat.ai/serial", &["x1", "x2"])]);
    alloc(&mut f, &[("squat.ai/serial", &["x1", "x2"])]);
    let r = derive(&f);
    let m = one(&r, "plugin-kubelet-mismatch");
    assert_eq!(m.severity, Severity::Warning);
    assert!(m.message.contains("3 healthy") && m.message.contains("2 allocatable"), "{m:?}");
    assert!(m.evidence.contains("only in the plugin: x3") && m.fix.contains("only one ListAndWatch stream"));
    assert_eq!(r.result, "warning");
    // An unhealthy update the kubelet missed: its IDs equal the checkpoint's.
    let mut f = node();
    plugin(&mut f, "p.sock", &[("a", H), ("b", "Unhealthy")]);
    checkpoint(&mut f, vec![], &[("example.com/r", &["a", "b"])]);
    alloc(&mut f, &[("example.com/r", &["a", "b"])]);
    let m = derive(&f);
    assert!(one(&m, "plugin-kubelet-mismatch").evidence.contains("only in the kubelet: b"));
    // With --no-streams nothing is compared.
    f.streams = false;
    f.plugins[0].devices = None;
    assert!(!checks(&derive(&f)).iter().any(|(c, _)| *c == "plugin-kubelet-mismatch"));
}

#[test]
fn undecidable_mappings_warn_instead_of_passing() {
    let mut f = node();
    plugin(&mut f, "x.sock", &[("0", H)]);
    plugin(&mut f, "y.sock", &[("0", H)]);
    checkpoint(&mut f, vec![], &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
    alloc(&mut f, &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
    let r = derive(&f);
    assert_eq!(r.result, "warning", "{:#?}", r.findings);
    assert_eq!(r.findings.iter().filter(|x| x.check == "plugin-mapping-ambiguous").count(), 2);
    // Socket names decide.
    let mut f = node();
    plugin(&mut f, "smarter-ttyUSB1.sock", &[("0", H)]);
    plugin(&mut f, "smarter-ttyUSB0.sock", &[("0", H)]);
    checkpoint(&mut f, vec![], &[("smarter-devices/ttyUSB0", &["0"]), ("smarter-devices/ttyUSB1", &["0"])]);
    alloc(&mut f, &[("smarter-devices/ttyUSB0", &["0"]), ("smarter-devices/ttyUSB1", &["0"])]);
    let r = derive(&f);
    assert_eq!(r.result, "ok", "{:#?}", r.findings);
    assert_eq!(r.checked.plugins[0].socket, format!("{DP}smarter-ttyUSB0.sock"));
    assert_eq!(r.checked.plugins[0].how, "healthy IDs equal the kubelet's allocatable IDs");
    // So does the plugin watcher's GetInfo.
    let mut f = node();
    plugin(&mut f, "x.sock", &[("0", H)]);
    plugin(&mut f, "y.sock", &[("0", H)]);
    f.watchers.push(crate::doctor::facts::Watcher {
        socket: "/n/reg/y.sock".into(),
        info: Got::Yes(("DevicePlugin".into(), "example.com/a".into(), format!("{DP}y.sock"))),
    });
    checkpoint(&mut f, vec![], &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
    alloc(&mut f, &[("example.com/a", &["0"]), ("example.com/b", &["0"])]);
    let r = derive(&f);
    assert_eq!(r.result, "ok", "{:#?}", r.findings);
    let a = r.checked.plugins.iter().find(|s| s.resource == "example.com/a").unwrap();
    assert!(a.socket.ends_with("y.sock") && a.how.contains("GetInfo"), "{a:?}");
}

#[test]
fn unresolvable_cdi_names_are_errors_naming_the_pod() {
    let mut f = node();
    plugin(&mut f, "foo.sock", &[("foo-0", H)]);
    let mut e = entry("u1", "main", "vendor.example/foo", &["foo-0"]);
    e.alloc_resp = PodDeviceEntry::encode_alloc_resp(&ContainerAllocateResponse {
        cdi_devices: vec![CdiDevice { name: "vendor.example/foo=foo-9".into() }],
        annotations: [("cdi.k8s.io/foo".to_string(), "vendor.example/foo=foo-0".to_string())].into_iter().collect(),
        ..Default::default()
    });
    checkpoint(&mut f, vec![e], &[("vendor.example/foo", &["foo-0"])]);
    alloc(&mut f, &[("vendor.example/foo", &["foo-0"])]);
    pod(&mut f, "ml", "trainer", &[("main", &[("vendor.example/foo", &["foo-0"])])]);
    f.cdi.dirs = vec!["/etc/cdi".into()];
    f.cdi.specs = 1;
    f.cdi.devices.insert("vendor.example/foo=foo-0".into());
    f.cdi.invalid.push(("/etc/cdi/bad.yaml".into(), "no cdiVersion".into()));
    let r = derive(&f);
    let c = one(&r, "cdi-unresolvable");
    assert_eq!(c.subject, "vendor.example/foo=foo-9");
    assert!(c.evidence.contains("ml/trainer (UID u1)") && c.message.contains("unresolvable CDI devices"), "{c:?}");
    assert_eq!(one(&r, "cdi-spec-invalid").subject, "/etc/cdi/bad.yaml");
    assert_eq!(r.checked.cdi_names, 2);
}

#[test]
fn allocated_unhealthy_devices_name_the_pod_and_uid() {
    let mut f = node();
    plugin(&mut f, "foo.sock", &[("foo-0", H), ("foo-1", "Unhealthy")]);
    checkpoint(
        &mut f,
        vec![entry("u1", "main", "example.com/foo", &["foo-1"])],
        &[("example.com/foo", &["foo-0", "foo-1"])],
    );
    alloc(&mut f, &[("example.com/foo", &["foo-0"])]);
    pod(&mut f, "ml", "trainer", &[("main", &[("example.com/foo", &["foo-1"])])]);
    let r = derive(&f);
    assert!(one(&r, "allocated-device-unhealthy").evidence.starts_with("ml/trainer (UID u1) container \"main\""));
}

#[test]
fn many_plugins_map_one_to_one() {
    let mut f = node();
    let mut reg: Vec<(String, Vec<String>)> = Vec::new();
    for r in 0..150 {
        let ids: Vec<String> = (0..16).map(|i| format!("r{r}-d{i}")).collect();
        let devs: Vec<(&str, &str)> = ids.iter().map(|i| (i.as_str(), H)).collect();
        plugin(&mut f, &format!("p{r:03}.sock"), &devs);
        reg.push((format!("example.com/res{r}"), ids));
    }
    let data = Data { pod_device_entries: vec![], registered_devices: reg.iter().cloned().collect() };
    f.allocatable = Got::Yes(reg.iter().map(|(r, i)| (r.clone(), i.iter().cloned().collect())).collect());
    f.checkpoint = Checkpoint::Read(data);
    let r = derive(&f);
    assert_eq!(r.result, "ok", "{:#?}", &r.findings[..r.findings.len().min(3)]);
    assert_eq!(r.checked.plugins.len(), 150);
    assert!(r.checked.plugins.iter().all(|s| {
        let n = s.resource.trim_start_matches("example.com/res");
        s.socket.ends_with(&format!("p{:03}.sock", n.parse::<usize>().unwrap()))
    }));
}

#[test]
fn socket_names_match_resources() {
    assert!(name_matches(Path::new("/x/nvidia-gpu.sock"), "nvidia.com/gpu"));
    assert!(name_matches(Path::new("/x/vendor.example_foo.sock"), "vendor.example/foo"));
    assert!(!name_matches(Path::new("/x/dpctl-123.sock"), "vendor.example/foo"));
    assert!(endpoint_is(
        Path::new("/host/var/lib/kubelet/device-plugins/a.sock"),
        "/var/lib/kubelet/device-plugins/a.sock"
    ));
    assert!(!endpoint_is(
        Path::new("/host/var/lib/kubelet/device-plugins/a.sock"),
        "/var/lib/kubelet/device-plugins/b.sock"
    ));
}

#[test]
fn a_dead_or_missing_plugins_finding_names_the_pods_holding_its_devices() {
    // Died: PodResources names the pods.
    let mut f = node();
    sock(&mut f, "foo.sock", Connect::Refused);
    let e = vec![entry("u1", "main", "example.com/foo", &["foo-0"]), entry("u2", "c", "example.com/foo", &["foo-1"])];
    checkpoint(&mut f, e, &[("example.com/foo", &["foo-0", "foo-1"])]);
    alloc(&mut f, &[]);
    f.pods = Got::Yes(Vec::new());
    pod(&mut f, "ml", "trainer", &[("main", &[("example.com/foo", &["foo-0"])])]);
    pod(&mut f, "ml", "eval", &[("c", &[("example.com/foo", &["foo-1"])])]);
    let d = derive(&f);
    let d = one(&d, "plugin-died");
    assert!(d.evidence.ends_with("; pods holding its devices: ml/eval, ml/trainer"), "{d:?}");
    // Missing (not re-registered), PodResources down: the checkpoint's pod UIDs.
    let mut f = node();
    checkpoint(&mut f, vec![entry("u1", "main", "example.com/foo", &["foo-0"])], &[("example.com/foo", &["foo-0"])]);
    f.pods = Got::Connect(Connect::Missing);
    let r = derive(&f);
    let d = one(&r, "not-re-registered");
    assert!(d.evidence.ends_with("; pods holding its devices: pod UID u1"), "{d:?}");
    // A resource nobody holds says nothing about pods.
    let mut f = node();
    checkpoint(&mut f, vec![], &[("example.com/foo", &["foo-0"])]);
    alloc(&mut f, &[]);
    assert!(!one(&derive(&f), "not-re-registered").evidence.contains("pods holding"));
}

/// Each finding kind on its own: facts that trigger it, and only its checks come out.
#[test]
fn each_kind_is_a_function_of_the_facts() {
    type Setup = fn(&mut Facts);
    let cases: &[(Kind, Setup, &[&str])] = &[
        (plugin_dir, |f| f.plugin_dir_error = Some(("no such directory".into(), false)), &["plugin-dir"]),
        (kubelet_down, |f| f.kubelet = Connect::Missing, &["kubelet-down"]),
        (dir_entries, |f| sock(f, "slow.sock", Connect::Timeout), &["socket-timeout"]),
        (
            plugin_answers,
            |f| {
                plugin(f, "a.sock", &[]);
                f.plugins[0].error = Some("Unimplemented".into());
            },
            &["plugin-error"],
        ),
        (plugin_rules, |f| plugin(f, "a.sock", &[("a", H), ("a", H)]), &["device-id-unique"]),
        (unhealthy_devices, |f| plugin(f, "a.sock", &[("a", "Unhealthy")]), &["unhealthy-devices"]),
        (
            plugin_kubelet_mismatch,
            |f| {
                plugin(f, "foo.sock", &[("foo-0", H)]);
                checkpoint(f, vec![], &[("example.com/foo", &["foo-0", "foo-1"])]);
                alloc(f, &[("example.com/foo", &["foo-1"])]);
            },
            &["plugin-kubelet-mismatch"],
        ),
        (
            resources_unavailable,
            |f| {
                sock(f, "foo.sock", Connect::Refused);
                checkpoint(f, vec![], &[("example.com/foo", &["foo-0"])]);
                alloc(f, &[]);
            },
            &["plugin-died"],
        ),
        (resources_unavailable, |f| sock(f, "dead.sock", Connect::Refused), &["stale-socket"]),
        (
            unregistered_plugins,
            |f| {
                plugin(f, "x.sock", &[("x-0", H)]);
                alloc(f, &[]);
            },
            &["unregistered-plugin"],
        ),
        (checkpoint_corrupt, |f| f.checkpoint = Checkpoint::Bad("truncated".into(), false), &["checkpoint-corrupt"]),
        (
            stale_allocations,
            |f| {
                checkpoint(f, vec![entry("u9", "main", "example.com/foo", &["foo-0"])], &[]);
                f.pods = Got::Yes(Vec::new());
            },
            &["stale-allocation"],
        ),
        (pod_resources, |f| f.pods = Got::Failed("Unimplemented".into()), &["pod-resources"]),
        (
            allocated_devices,
            |f| {
                plugin(f, "foo.sock", &[("foo-0", "Unhealthy")]);
                checkpoint(
                    f,
                    vec![entry("u1", "main", "example.com/foo", &["foo-0"])],
                    &[("example.com/foo", &["foo-0"])],
                );
                alloc(f, &[("example.com/foo", &[])]);
            },
            &["allocated-device-unhealthy"],
        ),
        (cdi_names, |f| f.cdi.invalid.push(("/etc/cdi/x.yaml".into(), "bad".into())), &["cdi-spec-invalid"]),
        (
            watcher_sockets,
            |f| {
                f.watchers.push(crate::doctor::facts::Watcher {
                    socket: "/r/x-reg.sock".into(),
                    info: Got::Failed("GetInfo: Unimplemented".into()),
                })
            },
            &["watcher-socket"],
        ),
        (permission_denied, |f| sock(f, "p.sock", Connect::PermissionDenied), &["permission-denied"]),
    ];
    for (kind, setup, want) in cases {
        let mut f = node();
        f.kubelet = Connect::Answered;
        setup(&mut f);
        let got: Vec<&str> = kind(&View::new(&f)).iter().map(|x| x.check).collect();
        assert_eq!(&got, want, "{want:?}");
        // A node with nothing wrong gives no finding of any kind.
        let quiet = node();
        assert!(kind(&View::new(&quiet)).is_empty(), "{want:?} on a quiet node");
    }
    assert_eq!(KINDS.len(), 18);
}

/// A SIGKILLed DRA driver whose claim is prepared: one error naming the
/// driver, its claim and the pod holding it; its stale registration and
/// service sockets are its evidence, not warnings of their own.
#[test]
fn a_dead_dra_driver_with_prepared_claims_is_one_error_naming_claims_and_pods() {
    use crate::doctor::answers::Watcher;
    use crate::doctor::dra::{CheckpointClaim, DraCheckpoint};
    let mut f = node();
    f.dra.kubelet_root = "/var/lib/kubelet".into();
    f.dra.checkpoint = DraCheckpoint::Read(vec![CheckpointClaim {
        claim: "ml/gpu".into(),
        uid: "u1".into(),
        driver: "g.example.com".into(),
        cdi_ids: vec![],
        pods: vec!["pod-1".into()],
    }]);
    f.watchers.push(Watcher {
        socket: "/var/lib/kubelet/plugins_registry/g.example.com-reg.sock".into(),
        info: Got::Connect(Connect::Refused),
    });
    f.watchers.push(Watcher {
        socket: "/var/lib/kubelet/plugins_registry/other.example-reg.sock".into(),
        info: Got::Connect(Connect::Refused),
    });
    f.dra.service_sockets = vec![("/var/lib/kubelet/plugins/g.example.com/dra.sock".into(), Connect::Refused)];
    pod(&mut f, "ml", "trainer", &[("main", &[])]);
    let Got::Yes(pods) = &mut f.pods else { unreachable!() };
    pods[0].containers[0].claims.push("ml/gpu".into());
    let r = derive(&f);
    let checks: Vec<(&str, Severity)> = r.findings.iter().map(|x| (x.check, x.severity)).collect();
    assert_eq!(checks, [("dra-driver-died", Severity::Error), ("stale-socket", Severity::Warning)], "{r:#?}");
    let d = &r.findings[0];
    assert_eq!(d.subject, "g.example.com");
    assert!(d.message.contains("1 claim(s) it prepared are in use"), "{}", d.message);
    assert!(
        d.message.contains("/var/lib/kubelet/plugins_registry/g.example.com-reg.sock")
            && d.message.contains("/var/lib/kubelet/plugins/g.example.com/dra.sock"),
        "{}",
        d.message
    );
    assert!(d.evidence.contains("ml/gpu (UID u1) held by ml/trainer"), "{}", d.evidence);
    assert!(d.fix.starts_with("restart the driver's kubelet plugin"), "{}", d.fix);
    assert_eq!(r.findings[1].subject, "/var/lib/kubelet/plugins_registry/other.example-reg.sock");
    // Without PodResources the checkpoint's pod UIDs name the holders.
    f.pods = Got::Failed("unavailable".into());
    let r = derive(&f);
    let d = r.findings.iter().find(|x| x.check == "dra-driver-died").unwrap();
    assert!(d.evidence.contains("ml/gpu (UID u1) held by pod UID pod-1"), "{}", d.evidence);
    assert_eq!(r.result, "error");
    // The kubelet's pods API (1.36+) names them.
    f.pod_names = Some([("pod-1".to_string(), "ml/trainer".to_string())].into());
    let r = derive(&f);
    let d = r.findings.iter().find(|x| x.check == "dra-driver-died").unwrap();
    assert!(d.evidence.contains("ml/gpu (UID u1) held by ml/trainer (UID pod-1)"), "{}", d.evidence);
}
