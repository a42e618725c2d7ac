//! Upstream scenarios from kubernetes/kubernetes
//! pkg/kubelet/cm/devicemanager/manager_test.go about device choice, reuse
//! across init and app containers and preferred-allocation handling, as
//! table tests of the admission plan. Facts carry over; the code is dpctl's.

use super::*;
use crate::kubelet::devicemanager::core::testutil::*;
use crate::kubelet::profile::Profile;

const R1: &str = "domain1.com/resource1";
const R2: &str = "domain2.com/resource2";

fn no_preferred(_: &ContainerPreferredAllocationRequest) -> Option<Vec<String>> {
    Some(Vec::new())
}

/// TestPodContainerDeviceAllocation: pods get what they ask for from
/// healthy, unallocated devices; over-asking fails with the kubelet's text;
/// a resource no plugin registered fails the resource-fit check.
#[test]
fn upstream_pod_container_device_allocation() {
    let mut st =
        state(&[(R1, vec![dev("dev1", &[]), dev("dev2", &[])]), (R2, vec![dev("dev3", &[]), dev("dev4", &[])])], false);
    let p1 = pod("pod1", vec![], vec![ctr("c", &[(R1, 2), (R2, 1)])]);
    let (r, _) = admit(&st, TopologyPolicy::None, &p1, no_preferred);
    let a = r.unwrap();
    assert_eq!(got(&a, "c", R1), set(&["dev1", "dev2"]));
    assert_eq!(got(&a, "c", R2).len(), 1);
    assert_eq!(a.allocate_calls, 2, "one Allocate per container and resource");
    st.stage(a.pending);
    let cases: Vec<(&str, Pod, Result<(), &str>)> = vec![
        ("the other device of resource2", pod("pod2", vec![], vec![ctr("c", &[(R2, 1)])]), Ok(())),
        (
            "resource1 is used up",
            pod("pod3", vec![], vec![ctr("c", &[(R1, 1)])]),
            Err("Allocate failed due to requested number of devices unavailable for domain1.com/resource1. Requested: 1, Available: 0, which is unexpected"),
        ),
        (
            "an unregistered resource",
            pod("pod4", vec![], vec![ctr("c", &[("domain3.com/none", 1)])]),
            Err("Node didn't have enough resource: domain3.com/none, requested: 1, used: 0, capacity: 0"),
        ),
    ];
    for (name, p, want) in cases {
        let (r, _) = admit(&st, TopologyPolicy::None, &p, no_preferred);
        assert_eq!(r.map(|_| ()).map_err(|e| e.to_string()), want.map_err(String::from), "{name}");
    }
}

/// TestInitContainerDeviceAllocation: init containers run one after the
/// other, so the second reuses the first's devices; app containers take
/// the init containers' devices first and do not share them with each other.
#[test]
fn upstream_init_container_device_allocation() {
    let st = state(
        &[
            (R1, (1..=4).map(|i| dev(&format!("dev{i}"), &[])).collect()),
            (R2, vec![dev("dev5", &[]), dev("dev6", &[])]),
        ],
        false,
    );
    let p = pod(
        "pod",
        vec![ctr("init1", &[(R1, 2)]), ctr("init2", &[(R1, 1)])],
        vec![ctr("app1", &[(R1, 1), (R2, 1)]), ctr("app2", &[(R1, 1), (R2, 1)])],
    );
    let (r, _) = admit(&st, TopologyPolicy::None, &p, no_preferred);
    let a = r.unwrap();
    let (i1, i2, a1, a2) = (got(&a, "init1", R1), got(&a, "init2", R1), got(&a, "app1", R1), got(&a, "app2", R1));
    assert_eq!(i1.len(), 2);
    assert!(i2.len() == 1 && i2.is_subset(&i1), "init2 reuses init1's device: {i1:?} {i2:?}");
    assert!(a1.is_subset(&i1) && a2.is_subset(&i1), "app containers reuse init devices");
    assert!(a1.is_disjoint(&a2), "app containers do not share");
    assert!(got(&a, "app1", R2).is_disjoint(&got(&a, "app2", R2)));
}

/// TestPodContainerDeviceToAllocate: devicesToAllocate's errors and the
/// "already allocated" path (a restarted container, or a checkpoint restore).
#[test]
fn upstream_pod_container_device_to_allocate() {
    let mut st = state(&[(R1, vec![dev("dev1", &[]), dev("dev2", &[]), dev("dev3", &[])])], false);
    allocated(&mut st, "pod1", "con1", R1, &["dev1", "dev2"]);
    let pending = BTreeMap::new();
    let w = |uid: &'static str, c: &'static str, r: &'static str, n: usize| Want {
        uid,
        container: c,
        resource: r,
        required: n,
        reusable: None,
        pending: &pending,
        affinity: None,
        preferred: None,
        checks: crate::kubelet::profile::AdmissionChecks::Health,
        running: false,
    };
    let cases: Vec<(&str, Want, Result<Choice, String>)> = vec![
        (
            "already allocated: reported, not allocated again",
            w("pod1", "con1", R1, 2),
            Ok(Choice::Existing(vec!["dev1".into(), "dev2".into()])),
        ),
        (
            "a changed request fails loudly",
            w("pod1", "con1", R1, 3),
            Err(format!("pod \"pod1\" container \"con1\" changed request for resource \"{R1}\" from 2 to 3")),
        ),
        (
            "more than available",
            w("pod2", "con2", R1, 2),
            Err(format!("requested number of devices unavailable for {R1}. Requested: 2, Available: 1")),
        ),
        (
            "unregistered",
            w("pod2", "con2", "domain9.com/x", 1),
            Err("cannot allocate unregistered device domain9.com/x".into()),
        ),
        ("the healthy rest", w("pod2", "con2", R1, 1), Ok(Choice::Chosen(vec!["dev3".into()]))),
    ];
    for (name, want, expected) in cases {
        assert_eq!(devices_to_allocate(&st, &want).map_err(|e| e.to_string()), expected, "{name}");
    }
}

/// TestGetPreferredAllocation-style handling (manager_test.go's preferred
/// allocation cases and devicesToAllocate's fallbacks): the plugin's answer
/// is limited to the candidates, topped up when short, and a failing call
/// rejects the pod.
#[test]
fn preferred_allocation_answers_and_fallbacks() {
    let st = state(&[(R1, (0..4).map(|i| dev(&format!("d{i}"), &[])).collect())], true);
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 2)])]);
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, Option<Vec<&str>>, Result<&[&str], &str>)> = vec![
        ("the answer is taken", Some(vec!["d3", "d1"]), Ok(&["d1", "d3"])),
        ("foreign IDs are dropped and the rest topped up", Some(vec!["nope", "d2"]), Ok(&["d0", "d2"])),
        ("an empty answer falls back to the candidates", Some(vec![]), Ok(&["d0", "d1"])),
        ("a longer answer is cut to the size", Some(vec!["d3", "d2", "d1"]), Ok(&["d1", "d2"])),
        (
            "a failed call rejects the pod",
            None,
            Err("Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = Unavailable, which is unexpected"),
        ),
    ];
    for (name, answer, want) in cases {
        let mut asked = 0;
        let (r, _) = admit(&st, TopologyPolicy::None, &p, |q| {
            asked += 1;
            assert_eq!((q.available_device_i_ds.len(), q.must_include_device_i_ds.len(), q.allocation_size), (4, 0, 2));
            answer.clone().map(|a| a.into_iter().map(String::from).collect())
        });
        assert_eq!(asked, 1, "{name}: asked once");
        assert_eq!(
            r.map(|a| got(&a, "c", R1)).map_err(|e| e.to_string()),
            want.map(set).map_err(String::from),
            "{name}"
        );
    }
}

/// The plan never asks a plugin that did not offer GetPreferredAllocation,
/// and asks one container request per question (the kubelet's arguments).
#[test]
fn questions_follow_the_plugins_options() {
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 1)])]);
    for offered in [false, true] {
        let st = state(&[(R1, vec![dev("a", &[]), dev("b", &[])])], offered);
        let (r, steps) = admit(&st, TopologyPolicy::None, &p, no_preferred);
        assert!(r.is_ok());
        let asked = steps.iter().filter(|s| matches!(s, Step::Preferred { .. })).count();
        assert_eq!(asked, usize::from(offered), "offered={offered}: {steps:?}");
        let allocs: Vec<&Step> = steps.iter().filter(|s| matches!(s, Step::Allocate { .. })).collect();
        assert_eq!(allocs.len(), 1);
    }
}

/// TestDevicesToAllocateConflictWithUpdateAllocatedDevices: the state may
/// change while the plugin is being asked (the kubelet releases its lock for
/// the call). The answer is applied to the state as it is then.
#[test]
fn upstream_state_changes_while_the_plugin_is_asked() {
    let mut st = state(&[(R1, vec![dev("a", &[]), dev("b", &[]), dev("c", &[])])], true);
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 1)])]);
    let mut plan = PodAdmission::new(&p, &st, Profile::default());
    let Step::Preferred { .. } = plan.next(&st, TopologyPolicy::None, Answer::Begin) else { panic!("no question") };
    // meanwhile "a" turns unhealthy
    let id = st.resources[R1].endpoint.as_ref().unwrap().id;
    st.snapshot(R1, id, &[dev_h("a", "Unhealthy", &[]), dev("b", &[]), dev("c", &[])]);
    let step = plan.next(&st, TopologyPolicy::None, Answer::Preferred(vec!["a".into()]));
    assert_eq!(step, Step::Allocate { container: "c".into(), resource: R1.into(), ids: vec!["b".into()] });
}

/// A pod restored from the checkpoint after a kubelet restart keeps its
/// devices without a second Allocate (manager_test.go's checkpoint/restart cases).
#[test]
fn upstream_restored_pod_is_not_allocated_again() {
    let mut st = state(&[(R1, vec![dev("a", &[]), dev("b", &[])])], false);
    allocated(&mut st, "p", "c", R1, &["b"]);
    let (r, steps) = admit(&st, TopologyPolicy::None, &pod("p", vec![], vec![ctr("c", &[(R1, 1)])]), no_preferred);
    let a = r.unwrap();
    assert!(a.restored && a.allocate_calls == 0 && a.pending.is_empty(), "{a:?}");
    assert!(!steps.iter().any(|s| matches!(s, Step::Allocate { .. })));
}

/// Endpoint expiry (manager_test.go TestUpdateCapacityAllocatable's stopped
/// endpoint): a stopped plugin's devices are unhealthy, so nothing is
/// available; the text is the kubelet version's (kubernetes#114640, 1.27).
#[test]
fn upstream_stopped_endpoint_allocates_nothing() {
    let mut st = state(&[(R1, vec![dev("a", &[])])], false);
    let id = st.resources[R1].endpoint.as_ref().unwrap().id;
    st.stream_ended(R1, id);
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 1)])]);
    for (minor, want) in [
        (26, format!("Allocate failed due to requested number of devices unavailable for {R1}. Requested: 1, Available: 0, which is unexpected")),
        (27, format!("Allocate failed due to no healthy devices present; cannot allocate unhealthy devices {R1}, which is unexpected")),
        (37, format!("Allocate failed due to no healthy devices present; cannot allocate unhealthy devices {R1}, which is unexpected")),
    ] {
        let (r, _) = admit_as(&st, kubelet(minor), TopologyPolicy::None, &p, no_preferred);
        assert_eq!(r.unwrap_err().to_string(), want, "1.{minor}");
    }
}

/// TestPodContainerDeviceToAllocate (manager_test.go, kubelets since
/// kubernetes#114640): registration and health are checked before the
/// "already allocated" shortcut, so a container whose devices are known
/// still fails when none is healthy, when its resource is not registered,
/// or when its own devices turned unhealthy. Before 1.27 the shortcut came
/// first and an unregistered resource said "can't".
#[test]
fn upstream_pod_container_device_to_allocate_errors() {
    const R3: &str = "domain3.com/resource3";
    let mut st = State::default();
    // resource1 registered with no healthy device; resource2 never registered;
    // resource3's healthy devices no longer include dev5
    let id1 = register(&mut st, R1, &[dev_h("dev1", "Unhealthy", &[]), dev_h("dev2", "Unhealthy", &[])], false);
    register(&mut st, R3, &[dev("dev7", &[]), dev("dev8", &[])], false);
    let _ = id1;
    allocated(&mut st, "pod1", "con1", R1, &["dev1", "dev2"]);
    allocated(&mut st, "pod2", "con2", R2, &["dev5"]);
    allocated(&mut st, "pod3", "con3", R3, &["dev5"]);
    let pending = BTreeMap::new();
    let w = |uid: &'static str, c: &'static str, r: &'static str, n: usize, checks| Want {
        uid,
        container: c,
        resource: r,
        required: n,
        reusable: None,
        pending: &pending,
        affinity: None,
        preferred: None,
        checks,
        running: false,
    };
    use crate::kubelet::profile::AdmissionChecks::{Health, Legacy};
    let cases: Vec<(&str, Want, Result<Choice, String>)> = vec![
        (
            "no healthy devices to allocate present",
            w("pod1", "con1", R1, 2, Health),
            Err(format!("no healthy devices present; cannot allocate unhealthy devices {R1}")),
        ),
        (
            "resource is not registered",
            w("pod2", "con2", R2, 1, Health),
            Err(format!("cannot allocate unregistered device {R2}")),
        ),
        (
            "devices previously allocated no longer healthy",
            w("pod3", "con3", R3, 1, Health),
            Err(format!("previously allocated devices are no longer healthy; cannot allocate unhealthy devices {R3}")),
        ),
        (
            "before 1.27: known devices are kept unchecked",
            w("pod1", "con1", R1, 2, Legacy),
            Ok(Choice::Existing(vec!["dev1".into(), "dev2".into()])),
        ),
        (
            "before 1.27: unregistered",
            w("podX", "c", R2, 1, Legacy),
            Err(format!("can't allocate unregistered device {R2}")),
        ),
        (
            "before 1.27: no healthy device",
            w("podX", "c", R1, 1, Legacy),
            Err(format!("requested number of devices unavailable for {R1}. Requested: 1, Available: 0")),
        ),
    ];
    for (name, want, expected) in cases {
        assert_eq!(devices_to_allocate(&st, &want).map_err(|e| e.to_string()), expected, "{name}");
    }
    // A container already running while the kubelet's sources are not ready
    // (restored right after a restart) keeps its devices unchecked.
    let running = Want { running: true, ..w("pod1", "con1", R1, 2, Health) };
    assert_eq!(devices_to_allocate(&st, &running), Ok(Choice::Existing(vec!["dev1".into(), "dev2".into()])));
}

/// A resource whose grace period ended stays in the node status at 0/0; the
/// node's resource-fit check passes it (it is known), and the device manager
/// says it is unregistered.
#[test]
fn removed_resource_is_unregistered_not_unknown() {
    let mut st = state(&[(R1, vec![dev("a", &[])])], false);
    let id = st.resources[R1].endpoint.as_ref().unwrap().id;
    st.stream_ended(R1, id);
    assert!(st.grace_over(R1, id));
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 1)])]);
    let (r, _) = admit(&st, TopologyPolicy::None, &p, no_preferred);
    assert_eq!(
        r.unwrap_err().to_string(),
        format!("Allocate failed due to cannot allocate unregistered device {R1}, which is unexpected")
    );
}

/// TestRestartableInitContainerDeviceAllocation (manager_test.go): from
/// 1.29 (SidecarContainers on by default) a restartable init container's
/// devices come from what earlier init containers released but go to no
/// later container; app containers get their own. On 1.28 a sidecar is a
/// plain init container and its devices are reused.
#[test]
fn upstream_restartable_init_container_device_allocation() {
    let st = state(&[(R1, (1..=6).map(|i| dev(&format!("dev{i}"), &[])).collect())], false);
    let p = pod(
        "pod",
        vec![
            ctr("regularInit1", &[(R1, 3)]),
            sidecar("restartableInit2", &[(R1, 1)]),
            sidecar("restartableInit3", &[(R1, 2)]),
        ],
        vec![ctr("normal1", &[(R1, 1)]), ctr("normal2", &[(R1, 2)])],
    );
    let (r, _) = admit_as(&st, kubelet(29), TopologyPolicy::None, &p, no_preferred);
    let a = r.unwrap();
    let g = |c| got(&a, c, R1);
    let (i1, s2, s3, n1, n2) =
        (g("regularInit1"), g("restartableInit2"), g("restartableInit3"), g("normal1"), g("normal2"));
    assert_eq!((i1.len(), s2.len(), s3.len(), n1.len(), n2.len()), (3, 1, 2, 1, 2));
    assert!(s2.is_subset(&i1) && s3.is_subset(&i1), "sidecars take what the init container released");
    let dedicated = [&s2, &s3, &n1, &n2];
    for i in 0..dedicated.len() {
        for j in i + 1..dedicated.len() {
            assert!(dedicated[i].is_disjoint(dedicated[j]), "{i} and {j} share: {dedicated:?}");
        }
    }
    // 1.28: the sidecars' devices are reused by the app containers
    let (r, _) = admit_as(&st, kubelet(28), TopologyPolicy::None, &p, no_preferred);
    let a = r.unwrap();
    let side: BTreeSet<String> =
        got(&a, "restartableInit2", R1).union(&got(&a, "restartableInit3", R1)).cloned().collect();
    let apps: BTreeSet<String> = got(&a, "normal1", R1).union(&got(&a, "normal2", R1)).cloned().collect();
    assert!(!side.is_disjoint(&apps), "1.28 shares sidecar devices: {side:?} {apps:?}");
}

/// Node e2e "Can schedule a pod with a restartable init container": one
/// device each for the sidecar and the app container, never the same one.
#[test]
fn sidecar_and_app_container_never_share() {
    let st = state(&[(R1, vec![dev("Dev-1", &[]), dev("Dev-2", &[])])], false);
    let p = pod("p", vec![sidecar("side", &[(R1, 1)])], vec![ctr("main", &[(R1, 1)])]);
    let (r, _) = admit(&st, TopologyPolicy::None, &p, no_preferred);
    let a = r.unwrap();
    assert!(got(&a, "side", R1).is_disjoint(&got(&a, "main", R1)), "{a:?}");
    // with one device, the pod does not fit
    let one = state(&[(R1, vec![dev("Dev-1", &[])])], false);
    let (r, _) = admit(&one, TopologyPolicy::None, &p, no_preferred);
    assert!(r.unwrap_err().to_string().contains("Requested: 1, Available: 0"));
}

/// Answers the plugin gives to Allocate: none for the container fails the pod,
/// and an error is wrapped in the kubelet's text.
#[test]
fn allocate_answers() {
    let st = state(&[(R1, vec![dev("a", &[])])], false);
    let p = pod("p", vec![], vec![ctr("c", &[(R1, 1)])]);
    for (answer, want) in [
        (
            Answer::Allocated(AllocateResponse::default()),
            "Allocate failed due to no containers return in allocation response, which is unexpected",
        ),
        (Answer::AllocateFailed("boom".into()), "Allocate failed due to boom, which is unexpected"),
    ] {
        let mut plan = PodAdmission::new(&p, &st, Profile::default());
        assert!(matches!(plan.next(&st, TopologyPolicy::None, Answer::Begin), Step::Allocate { .. }));
        match plan.next(&st, TopologyPolicy::None, answer) {
            Step::Done(Err(e)) => {
                assert_eq!(e.to_string(), want);
                assert_eq!(e.reason(), "UnexpectedAdmissionError");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// The kubelet's single-numa-node admission (topology_hints_test.go's hints
/// through the policy): a 2-device pod lands on the node with 2 free devices;
/// 3 devices never fit one node.
#[test]
fn single_numa_node_admission() {
    let mut st = state(&[(R1, vec![dev("g0", &[0]), dev("g1", &[0]), dev("g2", &[1]), dev("g3", &[1])])], false);
    allocated(&mut st, "one", "main", R1, &["g0"]);
    let (r, _) =
        admit(&st, TopologyPolicy::SingleNumaNode, &pod("two", vec![], vec![ctr("main", &[(R1, 2)])]), no_preferred);
    assert_eq!(got(&r.unwrap(), "main", R1), set(&["g2", "g3"]));
    st.allocations.clear();
    let (r, _) =
        admit(&st, TopologyPolicy::SingleNumaNode, &pod("big", vec![], vec![ctr("main", &[(R1, 3)])]), no_preferred);
    assert_eq!(r.unwrap_err().to_string(), super::super::topology::TOPOLOGY_ERROR);
    let (r, _) =
        admit(&st, TopologyPolicy::BestEffort, &pod("big", vec![], vec![ctr("main", &[(R1, 3)])]), no_preferred);
    assert_eq!(got(&r.unwrap(), "main", R1).len(), 3, "best-effort admits across nodes");
}

/// The pod status reason each rejection gets, as the kubelet sets it, from
/// the error's kind (never its words): device-manager failures are
/// UnexpectedAdmissionError (lifecycle's unexpectedAdmissionError), resource
/// fit OutOf<resource>, topology TopologyAffinityError.
#[test]
fn rejection_reasons_are_the_kubelets() {
    use super::super::admission::{AdmissionError, DevicesError};
    let st = state(&[(R1, vec![dev("g0", &[0]), dev("g1", &[1])])], false);
    let reason = |p: &Pod, policy| {
        let mut plan = PodAdmission::new(p, &st, Profile::default());
        match plan.next(&st, policy, Answer::Begin) {
            Step::Done(Err(e)) => (e.reason(), e.to_string()),
            other => panic!("{other:?}"),
        }
    };
    let (r, text) = reason(&pod("a", vec![], vec![ctr("c", &[("v.e/none", 1)])]), TopologyPolicy::None);
    assert_eq!(
        (r.as_str(), text.as_str()),
        ("OutOfv.e/none", "Node didn't have enough resource: v.e/none, requested: 1, used: 0, capacity: 0")
    );
    let (r, _) = reason(&pod("b", vec![], vec![ctr("c", &[(R1, 2)])]), TopologyPolicy::SingleNumaNode);
    assert_eq!(r, "TopologyAffinityError");
    let (r, text) = reason(&pod("c", vec![], vec![ctr("c", &[(R1, 3)])]), TopologyPolicy::None);
    assert_eq!(r, "UnexpectedAdmissionError");
    assert!(text.starts_with("Allocate failed due to requested number of devices unavailable"), "{text}");
    assert_eq!(AdmissionError::Invalid("not valid YAML: …".into()).reason(), "InvalidManifest");
    let e: AdmissionError = DevicesError::NoHealthy { resource: "v.e/x".into() }.into();
    assert_eq!(e.reason(), "UnexpectedAdmissionError");
}
