//! Upstream scenarios from kubernetes/kubernetes
//! pkg/kubelet/cm/devicemanager/topology_hints_test.go, as table tests of the core.
//! Facts (inputs and expected outcomes) carry over; the code is dpctl's.

#![allow(clippy::type_complexity)]

use super::*;
use crate::kubelet::devicemanager::core::allocate::{devices_to_allocate, Choice, Want};
use crate::kubelet::devicemanager::core::testutil::*;

fn sorted(mut h: Vec<Hint>) -> Vec<Hint> {
    h.sort_by_key(|h| {
        (h.affinity.as_ref().map(|a| a.len()), h.affinity.clone().map(|a| a.into_iter().collect::<Vec<_>>()))
    });
    h
}

struct HintCase {
    name: &'static str,
    request: &'static [(&'static str, u64)],
    devices: Vec<(&'static str, Vec<Device>)>,
    /// (container, resource, ids) already allocated to pod "fakePod"
    allocated: &'static [(&'static str, &'static str, &'static [&'static str])],
    expected: &'static [(&'static str, Option<&'static [(&'static [i64], bool)]>)],
}

use crate::api::deviceplugin::Device;

/// TestGetTopologyHints (getCommonTestCases): container scope, numaNodes [0, 1].
#[test]
fn upstream_get_topology_hints() {
    let cases = vec![
        HintCase {
            name: "Single Request, no alignment",
            request: &[("testdevice", 1)],
            devices: vec![("testdevice", vec![dev("Dev1", &[]), dev("Dev2", &[])])],
            allocated: &[],
            expected: &[("testdevice", None)],
        },
        HintCase {
            name: "Single Request, only one with alignment",
            request: &[("testdevice", 1)],
            devices: vec![("testdevice", vec![dev("Dev1", &[]), dev("Dev2", &[1])])],
            allocated: &[],
            expected: &[("testdevice", Some(&[(&[1], true), (&[0, 1], false)]))],
        },
        HintCase {
            name: "Single Request, one device per socket",
            request: &[("testdevice", 1)],
            devices: vec![("testdevice", vec![dev("Dev1", &[0]), dev("Dev2", &[1])])],
            allocated: &[],
            expected: &[("testdevice", Some(&[(&[0], true), (&[1], true), (&[0, 1], false)]))],
        },
        HintCase {
            name: "Request for 2, one device per socket",
            request: &[("testdevice", 2)],
            devices: vec![("testdevice", vec![dev("Dev1", &[0]), dev("Dev2", &[1])])],
            allocated: &[],
            expected: &[("testdevice", Some(&[(&[0, 1], true)]))],
        },
        HintCase {
            name: "Request for 2, 2 devices per socket",
            request: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", &[0]), dev("Dev2", &[1]), dev("Dev3", &[0]), dev("Dev4", &[1])],
            )],
            allocated: &[],
            expected: &[("testdevice", Some(&[(&[0], true), (&[1], true), (&[0, 1], false)]))],
        },
        HintCase {
            name: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
            request: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", &[0]), dev("Dev2", &[1]), dev("Dev3", &[0]), dev("Dev4", &[1])],
            )],
            allocated: &[("fakeOtherContainer", "testdevice", &["Dev1", "Dev2"])],
            expected: &[("testdevice", Some(&[(&[0, 1], false)]))],
        },
        HintCase {
            name: "2 device types, mixed configuration",
            request: &[("testdevice1", 2), ("testdevice2", 1)],
            devices: vec![
                ("testdevice1", vec![dev("Dev1", &[0]), dev("Dev2", &[1]), dev("Dev3", &[0]), dev("Dev4", &[1])]),
                ("testdevice2", vec![dev("Dev1", &[0])]),
            ],
            allocated: &[],
            expected: &[
                ("testdevice1", Some(&[(&[0], true), (&[1], true), (&[0, 1], false)])),
                ("testdevice2", Some(&[(&[0], true), (&[0, 1], false)])),
            ],
        },
        HintCase {
            name: "Single device type, more requested than available",
            request: &[("testdevice", 6)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", &[0]), dev("Dev2", &[0]), dev("Dev3", &[1]), dev("Dev4", &[1])],
            )],
            allocated: &[],
            expected: &[("testdevice", Some(&[]))],
        },
        HintCase {
            name: "Single device type, all already allocated to container",
            request: &[("testdevice", 2)],
            devices: vec![("testdevice", vec![dev("Dev1", &[0]), dev("Dev2", &[0])])],
            allocated: &[("fakeContainer", "testdevice", &["Dev1", "Dev2"])],
            expected: &[("testdevice", Some(&[(&[0], true), (&[0, 1], false)]))],
        },
        HintCase {
            name: "Single device type, less already allocated to container than requested",
            request: &[("testdevice", 4)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", &[0]), dev("Dev2", &[0]), dev("Dev3", &[1]), dev("Dev4", &[1])],
            )],
            allocated: &[("fakeContainer", "testdevice", &["Dev1", "Dev2"])],
            expected: &[("testdevice", Some(&[]))],
        },
        HintCase {
            name: "Single device type, more already allocated to container than requested",
            request: &[("testdevice", 2)],
            devices: vec![(
                "testdevice",
                vec![dev("Dev1", &[0]), dev("Dev2", &[0]), dev("Dev3", &[1]), dev("Dev4", &[1])],
            )],
            allocated: &[("fakeContainer", "testdevice", &["Dev1", "Dev2", "Dev3", "Dev4"])],
            expected: &[("testdevice", Some(&[]))],
        },
    ];
    for c in cases {
        let mut st = state(&c.devices, false);
        for (ctr_name, res, ids) in c.allocated {
            allocated(&mut st, "fakePod", ctr_name, res, ids);
        }
        for (res, want) in c.expected {
            let n = c.request.iter().find(|(r, _)| r == res).map(|(_, n)| *n as usize).unwrap();
            let got =
                resource_hints(&st, &[0, 1], "fakePod", "fakeContainer", res, n, &BTreeSet::new(), &BTreeMap::new());
            let want = want.map(|w| sorted(w.iter().map(|(n, p)| Hint::on(n, *p)).collect()));
            assert_eq!(got.map(sorted), want, "{}: {res}", c.name);
        }
    }
}

struct AlignedCase {
    name: &'static str,
    request: usize,
    devices: Vec<Device>,
    hint: &'static [i64],
    preferred: Option<&'static [&'static str]>,
    expected_preferred: &'static [&'static str],
    expected_alignment: &'static [(i64, usize)],
}

fn numbered(ranges: &[(usize, usize, i64)]) -> Vec<Device> {
    ranges.iter().flat_map(|(a, b, n)| devs(*a, *b, &[*n])).collect()
}

/// TestTopologyAlignedAllocation: devicesToAllocate under a given affinity,
/// with and without a GetPreferredAllocation answer.
#[test]
fn upstream_topology_aligned_allocation() {
    let d = |id: &str, n: &[i64]| dev(id, n);
    let cases = vec![
        AlignedCase {
            name: "Single Request, no alignment",
            request: 1,
            devices: vec![d("Dev1", &[]), d("Dev2", &[])],
            hint: &[0, 1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[],
        },
        AlignedCase {
            name: "Request for 1, partial alignment",
            request: 1,
            devices: vec![d("Dev1", &[]), d("Dev2", &[1])],
            hint: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 1)],
        },
        AlignedCase {
            name: "Single Request, socket 0",
            request: 1,
            devices: vec![d("Dev1", &[0]), d("Dev2", &[1])],
            hint: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 1)],
        },
        AlignedCase {
            name: "Single Request, socket 1",
            request: 1,
            devices: vec![d("Dev1", &[0]), d("Dev2", &[1])],
            hint: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 1)],
        },
        AlignedCase {
            name: "Request for 2, socket 0",
            request: 2,
            devices: vec![d("Dev1", &[0]), d("Dev2", &[1]), d("Dev3", &[0]), d("Dev4", &[1])],
            hint: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 2)],
        },
        AlignedCase {
            name: "Request for 2, socket 1",
            request: 2,
            devices: vec![d("Dev1", &[0]), d("Dev2", &[1]), d("Dev3", &[0]), d("Dev4", &[1])],
            hint: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 2)],
        },
        AlignedCase {
            name: "Request for 4, unsatisfiable, prefer socket 0",
            request: 4,
            devices: numbered(&[(1, 1, 0), (2, 2, 1), (3, 3, 0), (4, 4, 1), (5, 5, 0), (6, 6, 1)]),
            hint: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 3), (1, 1)],
        },
        AlignedCase {
            name: "Request for 4, unsatisfiable, prefer socket 1",
            request: 4,
            devices: numbered(&[(1, 1, 0), (2, 2, 1), (3, 3, 0), (4, 4, 1), (5, 5, 0), (6, 6, 1)]),
            hint: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 1), (1, 3)],
        },
        AlignedCase {
            name: "Request for 4, multisocket",
            request: 4,
            devices: numbered(&[
                (1, 1, 0),
                (2, 2, 1),
                (3, 3, 2),
                (4, 4, 3),
                (5, 5, 0),
                (6, 6, 1),
                (7, 7, 2),
                (8, 8, 3),
            ]),
            hint: &[1, 3],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 2), (3, 2)],
        },
        AlignedCase {
            name: "Request for 5, socket 0, preferred aligned accepted",
            request: 5,
            devices: numbered(&[(0, 99, 0), (100, 199, 1)]),
            hint: &[0],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"],
            expected_alignment: &[(0, 5)],
        },
        AlignedCase {
            name: "Request for 5, socket 0, preferred aligned accepted, unaligned ignored",
            request: 5,
            devices: numbered(&[(0, 99, 0), (100, 199, 1)]),
            hint: &[0],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "Dev150", "Dev186"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83"],
            expected_alignment: &[(0, 5)],
        },
        AlignedCase {
            name: "Request for 5, socket 1, preferred aligned accepted, bogus ignored",
            request: 5,
            devices: numbered(&[(0, 99, 1)]),
            hint: &[1],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "bogus0", "bogus1"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83"],
            expected_alignment: &[(1, 5)],
        },
        AlignedCase {
            name: "Request for 5, multisocket, preferred accepted",
            request: 5,
            devices: numbered(&[(0, 2, 0), (3, 99, 1)]),
            hint: &[0],
            preferred: Some(&["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"]),
            expected_preferred: &["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"],
            expected_alignment: &[(0, 3), (1, 2)],
        },
        AlignedCase {
            name: "Request for 5, multisocket, preferred unaligned accepted, bogus ignored",
            request: 5,
            devices: numbered(&[(0, 2, 0), (3, 99, 1)]),
            hint: &[0],
            preferred: Some(&["Dev0", "Dev1", "Dev2", "Dev42", "bogus0"]),
            expected_preferred: &["Dev0", "Dev1", "Dev2", "Dev42"],
            expected_alignment: &[(0, 3), (1, 2)],
        },
    ];
    for c in cases {
        let st = state(&[("resource", c.devices.clone())], c.preferred.is_some());
        let hint: BTreeSet<i64> = c.hint.iter().copied().collect();
        let pending = BTreeMap::new();
        let answer: Vec<String> = c.preferred.unwrap_or(&[]).iter().map(|s| s.to_string()).collect();
        let mut w = Want {
            uid: "podUID",
            container: "containerName",
            resource: "resource",
            required: c.request,
            reusable: None,
            pending: &pending,
            affinity: Some(&hint),
            preferred: None,
            checks: crate::kubelet::profile::AdmissionChecks::Health,
            running: false,
        };
        let mut choice = devices_to_allocate(&st, &w).unwrap();
        if let Choice::Ask(_) = choice {
            assert!(c.preferred.is_some(), "{}: asked without GetPreferredAllocationAvailable", c.name);
            w.preferred = Some(&answer);
            choice = devices_to_allocate(&st, &w).unwrap();
        }
        let Choice::Chosen(ids) = choice else { panic!("{}: {choice:?}", c.name) };
        let ids: BTreeSet<String> = ids.into_iter().collect();
        assert_eq!(ids.len(), c.request, "{}", c.name);
        assert!(set(c.expected_preferred).is_subset(&ids), "{}: {ids:?}", c.name);
        let want: BTreeMap<i64, usize> = c.expected_alignment.iter().copied().collect();
        assert_eq!(alignment(&st, "resource", &ids), want, "{}", c.name);
    }
}

/// TestGetPreferredAllocationParameters: what GetPreferredAllocation is asked.
/// Deliberate difference: upstream's table lists mustInclude but its loop
/// compares the available lists twice; here mustInclude is checked too.
#[test]
fn upstream_get_preferred_allocation_parameters() {
    let eight = |numa1_from: usize| -> Vec<Device> {
        (0..8).map(|i| dev(&format!("Dev{i}"), &[if i >= numa1_from { 1 } else { 0 }])).collect()
    };
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, usize, Vec<Device>, &[&str], &[&str], &[&str], &[&str])> = vec![
        (
            "Request for 1, socket 0, 0 already allocated, 0 reusable",
            1,
            eight(8)[..4].to_vec(),
            &[],
            &[],
            &["Dev0", "Dev1", "Dev2", "Dev3"],
            &[],
        ),
        (
            "Request for 4, socket 0, 2 already allocated, 2 reusable",
            4,
            eight(8),
            &["Dev0", "Dev5"],
            &["Dev0", "Dev5"],
            &["Dev0", "Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6", "Dev7"],
            &["Dev0", "Dev5"],
        ),
        (
            "Request for 4, socket 0, 4 already allocated, 2 reusable",
            4,
            eight(8),
            &["Dev0", "Dev5", "Dev4", "Dev1"],
            &["Dev0", "Dev5"],
            &["Dev0", "Dev2", "Dev3", "Dev5", "Dev6", "Dev7"],
            &["Dev0", "Dev5"],
        ),
        (
            "Request for 6, multisocket, 2 already allocated, 2 reusable",
            6,
            eight(4),
            &["Dev1", "Dev6"],
            &["Dev1", "Dev6"],
            &["Dev0", "Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6", "Dev7"],
            &["Dev0", "Dev1", "Dev2", "Dev3", "Dev6"],
        ),
        (
            "Request for 6, multisocket, 4 already allocated, 2 reusable",
            6,
            eight(4),
            &["Dev0", "Dev1", "Dev6", "Dev7"],
            &["Dev1", "Dev6"],
            &["Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6"],
            &["Dev1", "Dev2", "Dev3", "Dev6"],
        ),
    ];
    for (name, request, devices, in_use, reusable, want_available, want_must) in cases {
        let mut st = state(&[("resource", devices)], true);
        allocated(&mut st, "otherPod", "c", "resource", in_use);
        let reusable = set(reusable);
        let hint: BTreeSet<i64> = [0].into_iter().collect();
        let pending = BTreeMap::new();
        let w = Want {
            uid: "podUID",
            container: "containerName",
            resource: "resource",
            required: request,
            reusable: Some(&reusable),
            pending: &pending,
            affinity: Some(&hint),
            preferred: None,
            checks: crate::kubelet::profile::AdmissionChecks::Health,
            running: false,
        };
        let Ok(Choice::Ask(q)) = devices_to_allocate(&st, &w) else { panic!("{name}: no question") };
        assert_eq!(q.available_device_i_ds, set(want_available).into_iter().collect::<Vec<_>>(), "{name}");
        assert_eq!(q.must_include_device_i_ds, set(want_must).into_iter().collect::<Vec<_>>(), "{name}");
        assert_eq!(q.allocation_size as usize, request, "{name}");
    }
}

/// The topology manager's policies over merged hints (dpctl's own cases; the
/// policies are upstream's topologymanager, not the device manager's tests).
#[test]
fn policies_admit_or_reject_the_best_merged_hint() {
    let nodes = [0, 1];
    let one_per_node = Some(vec![Hint::on(&[0], true), Hint::on(&[1], true), Hint::on(&[0, 1], false)]);
    let cross_only = Some(vec![Hint::on(&[0, 1], false)]);
    let cross_preferred = Some(vec![Hint::on(&[0, 1], true)]);
    let cases: Vec<(&str, TopologyPolicy, Vec<Option<Vec<Hint>>>, Option<&[i64]>, bool)> = vec![
        ("narrowest preferred wins", TopologyPolicy::Restricted, vec![one_per_node.clone()], Some(&[0]), true),
        (
            "resources agree on one node",
            TopologyPolicy::SingleNumaNode,
            vec![one_per_node.clone(), Some(vec![Hint::on(&[1], true), Hint::on(&[0, 1], false)])],
            Some(&[1]),
            true,
        ),
        (
            "restricted rejects a non-preferred best",
            TopologyPolicy::Restricted,
            vec![cross_only.clone()],
            Some(&[0, 1]),
            false,
        ),
        ("best-effort admits it", TopologyPolicy::BestEffort, vec![cross_only.clone()], Some(&[0, 1]), true),
        (
            "restricted admits a preferred cross-NUMA hint",
            TopologyPolicy::Restricted,
            vec![cross_preferred.clone()],
            Some(&[0, 1]),
            true,
        ),
        ("single-numa-node rejects it", TopologyPolicy::SingleNumaNode, vec![cross_preferred], None, false),
        ("nothing fits: restricted rejects", TopologyPolicy::Restricted, vec![Some(vec![])], Some(&[0, 1]), false),
        (
            "don't care is admitted by single-numa-node without affinity",
            TopologyPolicy::SingleNumaNode,
            vec![None],
            None,
            true,
        ),
    ];
    for (name, policy, hints, want, admit) in cases {
        let (best, ok) = merge(policy, &nodes, &hints);
        assert_eq!(ok, admit, "{name}: {best:?}");
        assert_eq!(best.affinity, want.map(|w| w.iter().copied().collect()), "{name}");
    }
}

/// filterByAffinity (manager.go): a device on several NUMA nodes counts as
/// aligned when one of them is in the affinity, and unaligned for the others.
#[test]
fn filter_by_affinity_splits_multi_numa_devices() {
    let st = state(&[("r", vec![dev("a", &[0]), dev("b", &[1]), dev("ab", &[0, 1]), dev("x", &[])])], false);
    let all = set(&["a", "b", "ab", "x"]);
    let h: BTreeSet<i64> = [0].into_iter().collect();
    let (aligned, unaligned, none) = filter_by_affinity(&st, "r", &all, Some(&h));
    assert_eq!((aligned, unaligned, none), (set(&["a", "ab"]), set(&["ab", "b"]), set(&["x"])));
    let (a, u, n) = filter_by_affinity(&st, "r", &all, None);
    assert!(a.is_empty() && u.is_empty() && n == all, "no affinity: all without alignment");
}

/// Many topology-aware resources on 8 NUMA nodes: the merge stays bounded
/// (255 hints each would be 255^6 combinations) and still finds a single node.
#[test]
fn merging_many_resources_is_bounded() {
    let nodes: Vec<i64> = (0..8).collect();
    let devices: Vec<Device> = (0..16).map(|i| dev(&format!("d{i}"), &[i % 8])).collect();
    let resources: Vec<(String, Vec<Device>)> =
        (0..6).map(|r| (format!("vendor.example/r{r}"), devices.clone())).collect();
    let refs: Vec<(&str, Vec<Device>)> = resources.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
    let st = state(&refs, false);
    let hints: Vec<Option<Vec<Hint>>> = resources
        .iter()
        .map(|(r, _)| resource_hints(&st, &nodes, "p", "c", r, 1, &BTreeSet::new(), &BTreeMap::new()))
        .collect();
    assert_eq!(hints[0].as_ref().map(Vec::len), Some(255));
    let (best, admit) = merge(TopologyPolicy::SingleNumaNode, &nodes, &hints);
    assert!(admit, "{best:?}");
    assert_eq!(best.affinity.map(|a| a.len()), Some(1));
}

/// Hint merging among non-preferred hints, both rules (policy.go): with
/// resource1 needing two NUMA nodes and resource2 offering {0} (preferred) or
/// {0,1,2}, the narrowest rule (kubelets before 1.24) picks {0}; since
/// kubernetes#108154 the kubelet picks the hint nearest the best
/// non-preferred count (2 here): {0,1}.
#[test]
fn non_preferred_hint_merge_rules() {
    let nodes = [0, 1, 2, 3];
    let hints =
        vec![Some(vec![Hint::on(&[0, 1], true)]), Some(vec![Hint::on(&[0], true), Hint::on(&[0, 1, 2], false)])];
    let (narrow, ok) = merge_with(TopologyPolicy::BestEffort, HintMerge::Narrowest, &nodes, &hints);
    assert!(ok);
    assert_eq!(narrow, Hint::on(&[0], false));
    let (best, ok) = merge_with(TopologyPolicy::BestEffort, HintMerge::BestNonPreferredCount, &nodes, &hints);
    assert!(ok);
    assert_eq!(best, Hint::on(&[0, 1], false));
    assert_eq!(merge(TopologyPolicy::BestEffort, &nodes, &hints).0, best, "the default is the current rule");
    // restricted rejects both (not preferred)
    assert!(!merge(TopologyPolicy::Restricted, &nodes, &hints).1);
}
