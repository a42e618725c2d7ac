//! Upstream scenarios from kubernetes/kubernetes
//! pkg/kubelet/cm/devicemanager/manager_test.go (capacity, re-registration,
//! endpoint expiry, checkpoint) and pod_devices_test.go (devices per NUMA
//! node), as table tests of the state. Facts carry over; the code is dpctl's.

use super::*;
use crate::kubelet::devicemanager::testutil::*;

const R1: &str = "domain1.com/resource1";
const R2: &str = "domain2.com/resource2";

fn numbers(st: &State, r: &str) -> Option<(usize, usize, String)> {
    st.resource_status().into_iter().find(|s| s.resource == r).map(|s| (s.capacity, s.allocatable, s.state))
}

/// TestUpdateCapacityAllocatable: capacity counts every device, allocatable
/// only healthy ones; health changes and removals update both; a stopped
/// endpoint keeps capacity with nothing allocatable until its grace period is
/// over, then the resource is removed: listed at 0/0 (state `removed`), as the
/// kubelet keeps a removed device-plugin resource in the node status at 0.
#[test]
fn upstream_update_capacity_allocatable() {
    let mut st = State::default();
    let id = register(&mut st, R1, &[dev("d1", &[]), dev("d2", &[]), dev_h("d3", "Unhealthy", &[])], false);
    let steps: Vec<(&str, Vec<Device>, (usize, usize))> = vec![
        ("2 healthy, 1 unhealthy", vec![dev("d1", &[]), dev("d2", &[]), dev_h("d3", "Unhealthy", &[])], (3, 2)),
        (
            "one turns unhealthy",
            vec![dev("d1", &[]), dev_h("d2", "Unhealthy", &[]), dev_h("d3", "Unhealthy", &[])],
            (3, 1),
        ),
        ("one recovers", vec![dev("d1", &[]), dev("d2", &[]), dev_h("d3", "Unhealthy", &[])], (3, 2)),
        ("one is removed", vec![dev("d1", &[]), dev("d2", &[])], (2, 2)),
        ("only the exact \"Healthy\" counts", vec![dev("d1", &[]), dev_h("d2", "healthy", &[])], (2, 1)),
    ];
    for (name, devices, (cap, alloc)) in steps {
        st.snapshot(R1, id, &devices);
        assert_eq!(numbers(&st, R1), Some((cap, alloc, "running".into())), "{name}");
    }
    // a second resource does not disturb the first
    let id2 = register(&mut st, R2, &[dev("e1", &[])], false);
    assert_eq!(numbers(&st, R2), Some((1, 1, "running".into())));
    // the stream ends: capacity kept, allocatable 0, in the checkpoint still
    assert_eq!(st.stream_ended(R1, id), Ended::Stopped { capacity: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 0, "stopped".into())));
    assert!(st.checkpoint_data().registered_devices.contains_key(R1));
    // the grace period ends: 0/0, and gone from the checkpoint
    let v = st.version;
    assert!(st.grace_over(R1, id));
    assert!(st.version > v, "the checkpoint must be rewritten");
    assert_eq!(numbers(&st, R1), Some((0, 0, "removed".into())));
    assert!(st.healthy_or_none(R1).is_empty());
    assert!(!st.grace_over(R1, id), "removed once");
    assert!(!st.checkpoint_data().registered_devices.contains_key(R1));
    assert_eq!(numbers(&st, R2), Some((1, 1, "running".into())));
    assert!(!st.grace_over(R2, id2), "a running endpoint does not expire");
}

/// TestDevicePluginReRegistration: a plugin registering again for the same
/// resource replaces the endpoint; the new plugin's devices replace the old
/// ones; the old endpoint's stream, snapshots and grace timer no longer count.
#[test]
fn upstream_device_plugin_re_registration() {
    let mut st = State::default();
    let old = register(&mut st, R1, &[dev("d1", &[]), dev("d2", &[])], false);
    let new = register(&mut st, R1, &[dev("d3", &[])], false);
    assert_ne!(old, new);
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())), "devices of the previous registration are gone");
    assert_eq!(st.snapshot(R1, old, &[dev("d1", &[])]), None, "the old stream is ignored");
    assert_eq!(st.stream_ended(R1, old), Ended::Ignored);
    assert!(!st.grace_over(R1, old));
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
    // stopped, then back before the grace period ends: not removed
    st.stream_ended(R1, new);
    let back = register(&mut st, R1, &[dev("d3", &[])], false);
    assert!(!st.grace_over(R1, new));
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
    assert_eq!(st.resources[R1].endpoint.as_ref().map(|e| e.id), Some(back));
}

/// Register `resource` from its own `socket` (one instance of several).
fn register_at(st: &mut State, resource: &str, socket: &str, devices: &[Device]) -> u64 {
    let ep = EndpointInfo {
        id: 0,
        socket: std::path::PathBuf::from(socket),
        via: crate::kubelet::event::Via::KubeletSocket,
        pre_start_required: false,
        get_preferred_allocation_available: false,
    };
    let reg = st.register(resource, ep);
    st.snapshot(resource, reg.id, devices);
    reg.id
}

/// A DaemonSet maxSurge update on kubelets up to 1.36 (kubernetes#121994,
/// #127803): the second instance registers on a new socket; the first keeps
/// streaming (its snapshots still set the node's devices); when the first
/// stream ends, the kubelet disconnects the *second* instance and marks the
/// resource unhealthy: allocatable 0 until the plugin registers again.
#[test]
fn keyed_by_resource_the_old_instance_ending_zeroes_the_new_one() {
    let mut st = State::keyed(Endpoints::ByResource);
    let old = register_at(&mut st, R1, "/dp/old.sock", &[dev("d1", &[]), dev("d2", &[])]);
    let reg_new = {
        let ep = EndpointInfo {
            id: 0,
            socket: "/dp/new.sock".into(),
            via: crate::kubelet::event::Via::KubeletSocket,
            pre_start_required: false,
            get_preferred_allocation_available: false,
        };
        st.register(R1, ep)
    };
    assert_eq!((reg_new.close.len(), reg_new.older), (0, 1), "the first stream is not closed");
    let new = reg_new.id;
    st.snapshot(R1, new, &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    // the old instance's snapshot still counts: the callback knows only the resource
    assert!(st.snapshot(R1, old, &[dev("d1", &[])]).is_some());
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
    st.snapshot(R1, new, &[dev("d1", &[]), dev("d2", &[])]);
    // the old instance exits late
    assert_eq!(st.stream_ended(R1, old), Ended::Disconnected { victim: new, capacity: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 0, "stopped".into())));
    // the new instance's own (closed) stream then ends: nothing more happens
    assert_eq!(st.stream_ended(R1, new), Ended::Ignored);
    assert!(st.grace_over(R1, new), "the new instance's grace period removes the resource");
    // had the old instance exited first, the new one would have been fine
    let mut st = State::keyed(Endpoints::ByResource);
    let old = register_at(&mut st, R1, "/dp/old.sock", &[dev("d1", &[])]);
    assert_eq!(st.stream_ended(R1, old), Ended::Stopped { capacity: 1 });
    register_at(&mut st, R1, "/dp/new.sock", &[dev("d1", &[])]);
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
}

/// From 1.37 (kubernetes#135437) instances are keyed by (resource, socket):
/// each keeps its own devices; the first instance's end touches only its own.
#[test]
fn keyed_by_socket_an_instance_ending_touches_only_its_own() {
    let mut st = State::keyed(Endpoints::BySocket);
    let old = register_at(&mut st, R1, "/dp/old.sock", &[dev("d1", &[]), dev("d2", &[])]);
    let new = register_at(&mut st, R1, "/dp/new.sock", &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    // the old instance marks d2 unhealthy: the new one still reports it healthy
    st.snapshot(R1, old, &[dev("d1", &[]), dev_h("d2", "Unhealthy", &[])]);
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    assert_eq!(st.stream_ended(R1, old), Ended::InstanceGone { capacity: 2, allocatable: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    assert_eq!(st.resources[R1].endpoint.as_ref().map(|e| e.id), Some(new));
    assert_eq!(st.stream_ended(R1, new), Ended::Stopped { capacity: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 0, "stopped".into())));
    // the same socket registering again replaces (and closes) the earlier instance
    let mut st = State::keyed(Endpoints::BySocket);
    let a = register_at(&mut st, R1, "/dp/same.sock", &[dev("d1", &[])]);
    let ep = EndpointInfo {
        id: 0,
        socket: "/dp/same.sock".into(),
        via: crate::kubelet::event::Via::KubeletSocket,
        pre_start_required: false,
        get_preferred_allocation_available: false,
    };
    let reg = st.register(R1, ep);
    assert_eq!((reg.close, reg.older), (vec![a], 0));
}

/// TestCheckpoint: allocations (with AllocResp) and registered devices
/// survive a write and a restore; resources come back as "waiting" with
/// capacity 0 until their plugin registers.
#[test]
fn upstream_checkpoint() {
    let mut st =
        state(&[(R1, vec![dev("d1", &[0]), dev("d2", &[1]), dev("d3", &[0, 1])]), (R2, vec![dev("e1", &[])])], false);
    allocated(&mut st, "pod1", "con1", R1, &["d1", "d3"]);
    allocated(&mut st, "pod1", "con1", R2, &["e1"]);
    allocated(&mut st, "pod2", "con1", R1, &["d2"]);
    let data = st.checkpoint_data();
    let e = data.pod_device_entries.iter().find(|e| e.pod_uid == "pod1" && e.resource_name == R1).unwrap();
    assert_eq!(e.device_ids["0"], ["d1", "d3"]);
    assert_eq!(e.device_ids["1"], ["d3"], "a device on two NUMA nodes is listed under each");
    assert_eq!(data.registered_devices[R1], ["d1", "d2", "d3"]);
    let mut back = State::default();
    assert_eq!(back.restore(&data), 3);
    for (k, a) in &st.allocations {
        assert_eq!(back.allocations[k].numa, a.numa, "{k:?}");
        assert_eq!(back.allocations[k].resp, a.resp);
    }
    assert_eq!(back.allocations[&("pod1".into(), "con1".into(), R1.into())].ids, ["d1", "d3"], "each device once");
    assert_eq!(numbers(&back, R1), Some((0, 0, "waiting".into())));
    assert_eq!(back.allocated(R1), 3);
    assert_eq!(back.checkpoint_data().pod_device_entries, data.pod_device_entries);
    // the kubelet treats restored resources as stopped endpoints: one whose
    // plugin registers stays, one whose plugin does not goes after the grace period
    register(&mut back, R2, &[dev("e1", &[])], false);
    assert!(!back.waiting_over(R2));
    assert!(back.waiting_over(R1));
    assert_eq!(numbers(&back, R1), Some((0, 0, "removed".into())));
    assert!(!back.checkpoint_data().registered_devices.contains_key(R1));
    // a removed resource comes back when its plugin registers again
    register(&mut back, R1, &[dev("d1", &[0])], false);
    assert_eq!(numbers(&back, R1), Some((1, 1, "running".into())));
}

/// TestGetContainerDevices (pod_devices_test.go): a device reported on NUMA
/// nodes 0 and 1 is recorded under both, and PodResources lists it once per node.
#[test]
fn upstream_get_container_devices() {
    let mut st = state(&[(R1, vec![dev("dev1", &[0, 1])])], false);
    allocated(&mut st, "pod1", "con1", R1, &["dev1"]);
    let numa = &st.allocations[&("pod1".into(), "con1".into(), R1.into())].numa;
    assert_eq!(numa.len(), 2);
    let listed = crate::kubelet::podresources::container_devices(R1, numa);
    let nodes: Vec<(Vec<String>, Vec<i64>)> = listed
        .iter()
        .map(|d| {
            (
                d.device_ids.clone(),
                d.topology.as_ref().map(|t| t.nodes.iter().map(|n| n.id).collect()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(nodes, [(vec!["dev1".to_string()], vec![0]), (vec!["dev1".to_string()], vec![1])]);
}

/// TestGetAllocatableDevicesMultipleResources and
/// TestGetAllocatableDevicesHealthTransition: allocatable devices are the
/// healthy ones of every registered resource, and follow health changes; a
/// stopped plugin's devices are not allocatable.
#[test]
fn upstream_get_allocatable_devices() {
    let mut st = State::default();
    let id1 = register(&mut st, R1, &[dev("r1d1", &[0]), dev("r1d2", &[1]), dev_h("r1d3", "Unhealthy", &[])], false);
    register(&mut st, R2, &[dev("r2d1", &[]), dev("r2d2", &[0, 1])], false);
    let ids = |st: &State, r: &str| -> BTreeSet<String> {
        st.allocatable_devices().get(r).map(|m| m.values().flatten().cloned().collect()).unwrap_or_default()
    };
    assert_eq!(ids(&st, R1), set(&["r1d1", "r1d2"]));
    assert_eq!(ids(&st, R2), set(&["r2d1", "r2d2"]));
    assert_eq!(st.allocatable_devices()[R2]["1"], ["r2d2"], "a device on two nodes is listed under each");
    // health transition: unhealthy goes, healthy comes back
    st.snapshot(R1, id1, &[dev_h("r1d1", "Unhealthy", &[0]), dev("r1d2", &[1]), dev("r1d3", &[])]);
    assert_eq!(ids(&st, R1), set(&["r1d2", "r1d3"]));
    st.stream_ended(R1, id1);
    assert!(!st.allocatable_devices().contains_key(R1), "a stopped plugin lists nothing");
    assert_eq!(ids(&st, R2).len(), 2);
}

/// Pods and orphans: removing a pod frees its devices; allocations whose
/// pod no manifest describes are dropped after the first scan.
#[test]
fn pod_removal_and_orphans() {
    let mut st = state(&[(R1, vec![dev("a", &[]), dev("b", &[])])], false);
    allocated(&mut st, "gone", "c", R1, &["a"]);
    allocated(&mut st, "live", "c", R1, &["b"]);
    st.pods.insert(
        "live".into(),
        PodRecord { pod: pod("live", vec![], vec![ctr("c", &[(R1, 1)])]), file: "l.yaml".into() },
    );
    assert_eq!(st.drop_orphans(), [("gone".to_string(), "c".to_string(), R1.to_string())]);
    assert_eq!(st.allocated(R1), 1);
    let (p, freed) = st.remove_pod("live").unwrap();
    assert_eq!((p.pod.uid.as_str(), freed), ("live", vec!["b".to_string()]));
    assert_eq!(st.allocated(R1), 0);
    assert!(st.remove_pod("live").is_none());
}

use crate::api::deviceplugin::Device;
use crate::kubelet::profile::Endpoints;
use std::collections::BTreeSet;

impl State {
    fn healthy_or_none(&self, r: &str) -> BTreeSet<String> {
        self.resources.get(r).map(Resource::healthy).unwrap_or_default()
    }
}
