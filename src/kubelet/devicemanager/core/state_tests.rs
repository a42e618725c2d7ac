//! Upstream scenarios from kubernetes/kubernetes
//! pkg/kubelet/cm/devicemanager/manager_test.go (capacity, re-registration,
//! endpoint expiry, checkpoint) and pod_devices_test.go (devices per NUMA
//! node), as table tests of the state. Facts carry over; the code is dpctl's.

use super::*;
use crate::kubelet::devicemanager::core::testutil::*;

const R1: &str = "domain1.com/resource1";
const R2: &str = "domain2.com/resource2";

fn numbers(st: &State, r: &str) -> Option<(usize, usize, String)> {
    st.resource_status().into_iter().find(|s| s.resource == r).map(|s| (s.capacity, s.allocatable, s.state))
}

/// The checkpoint's RegisteredDevices are the healthy devices, as the
/// kubelet writes them (manager.go, writeCheckpoint: `range m.healthyDevices`;
/// found by tests/e2e/devicemanager_diff.rs, `unhealthy-devices`), so a health
/// change alone rewrites it (the kubelet writes after every update), and a
/// stream's end does not (PluginDisconnected writes nothing).
#[test]
fn the_checkpoint_records_the_healthy_devices() {
    let mut st = State::default();
    let id = register(&mut st, R1, &[dev("d1", &[]), dev_h("d2", "Unhealthy", &[])], false);
    let recorded = |st: &State| st.checkpoint_data().registered_devices.get(R1).cloned();
    assert_eq!(recorded(&st), Some(vec!["d1".to_string()]));
    let v = st.version;
    st.snapshot(R1, id, &[dev("d1", &[]), dev("d2", &[])]);
    assert!(st.version > v, "a health change must rewrite the checkpoint");
    assert_eq!(recorded(&st), Some(vec!["d1".to_string(), "d2".to_string()]));
    let v = st.version;
    st.snapshot(R1, id, &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(st.version, v, "the same devices: nothing to write");
    st.stream_ended(R1, id);
    assert_eq!(st.version, v, "a stream's end writes nothing");
    assert_eq!(recorded(&st), Some(vec![]), "the next write records none healthy");
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

/// An instance of `resource` registered from its own `socket`, with options.
fn instance(socket: &str, pre_start: bool, preferred: bool, via: crate::kubelet::event::Via) -> EndpointInfo {
    EndpointInfo {
        id: 0,
        socket: std::path::PathBuf::from(socket),
        via,
        pre_start_required: pre_start,
        get_preferred_allocation_available: preferred,
    }
}

/// Register `resource` from its own `socket` (one instance of several) and send one snapshot.
fn register_at(st: &mut State, resource: &str, socket: &str, devices: &[Device]) -> u64 {
    let ep = instance(socket, false, false, crate::kubelet::event::Via::KubeletSocket);
    let id = st.register(resource, ep).expect("no live instance on this socket").id;
    st.snapshot(resource, id, devices);
    id
}

/// The kubelet versions on both sides of kubernetes#135437.
const BOTH: [(u32, Endpoints); 2] = [(36, Endpoints::ByResource), (37, Endpoints::BySocket)];

/// TestDevicePluginReRegistration (manager_test.go, every copy read up to
/// the one with #135437's endpointStore and #139338's tests): p1 (Dev1, Dev2)
/// registers; p2 (Dev1, Dev2) registers from `<socket>.new`: still 2; p3
/// (Dev3) from `<socket>.third`: capacity = allocatable = 1, "Devices of
/// plugin previously registered should be removed". Both before and after
/// #135437, since the ListAndWatch callback knows only the resource name:
/// the last snapshot of any instance is the node's devices. Each of the four
/// PreStartRequired / GetPreferredAllocationAvailable combinations of p2 and
/// p3; the current endpoint's options are the newest instance's.
#[test]
fn upstream_device_plugin_re_registration() {
    use crate::kubelet::event::Via;
    let d12 = [dev("Dev1", &[]), dev("Dev2", &[])];
    for (minor, keying) in BOTH {
        for pre_start in [false, true] {
            for preferred in [false, true] {
                let case = format!("1.{minor} preStart={pre_start} preferred={preferred}");
                let mut st = State::keyed(keying);
                let ep = |sock: &str| instance(sock, pre_start, preferred, Via::KubeletSocket);
                let p1 = st.register(R1, instance("/dp/device-plugin.sock", false, false, Via::KubeletSocket));
                let p1 = p1.expect("first registration").id;
                st.snapshot(R1, p1, &d12);
                assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())), "{case}: Devices are not updated.");
                let p2 = st.register(R1, ep("/dp/device-plugin.sock.new")).expect("second instance").id;
                st.snapshot(R1, p2, &d12);
                assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())), "{case}: Devices shouldn't change.");
                let p3 = st.register(R1, ep("/dp/device-plugin.sock.third")).expect("third instance").id;
                st.snapshot(R1, p3, &[dev("Dev3", &[])]);
                assert_eq!(
                    numbers(&st, R1),
                    Some((1, 1, "running".into())),
                    "{case}: Devices of plugin previously registered should be removed."
                );
                let cur = st.resources[R1].endpoint.clone().expect("an endpoint");
                assert_eq!(
                    (cur.id, cur.pre_start_required, cur.get_preferred_allocation_available),
                    (p3, pre_start, preferred),
                    "{case}"
                );
                assert_eq!(st.resources[R1].older.len(), 2, "{case}: p1 and p2 are not closed");
                assert_eq!(st.healthy_or_none(R1), set(&["Dev3"]), "{case}");
            }
        }
    }
}

/// TestDevicePluginReRegistrationProbeMode: the same through the plugin
/// watcher (no options requested): 2, 2, then 1 ("Devices of previous
/// registered should be removed"), on both sides of #135437.
#[test]
fn upstream_device_plugin_re_registration_probe_mode() {
    use crate::kubelet::event::Via;
    let d12 = [dev("Dev1", &[]), dev("Dev2", &[])];
    for (minor, keying) in BOTH {
        let mut st = State::keyed(keying);
        let mut seen = Vec::new();
        for (sock, devices) in [
            ("/pr/device-plugin.sock", &d12[..]),
            ("/pr/device-plugin.sock.new", &d12[..]),
            ("/pr/device-plugin.sock.third", &[dev("Dev3", &[])][..]),
        ] {
            let id = st.register(R1, instance(sock, false, false, Via::PluginWatcher)).expect("a new socket").id;
            st.snapshot(R1, id, devices);
            seen.push(numbers(&st, R1).map(|(c, a, _)| (c, a)));
        }
        assert_eq!(seen, [Some((2, 2)), Some((2, 2)), Some((1, 1))], "1.{minor}");
    }
}

/// Re-registration on one socket, keyed by resource (up to 1.36): the new
/// endpoint replaces the old one; the old endpoint's stream, snapshots and
/// grace timer no longer count once it has stopped.
#[test]
fn keyed_by_resource_re_registration_on_one_socket() {
    let mut st = State::keyed(Endpoints::ByResource);
    let old = register_at(&mut st, R1, "/dp/p.sock", &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(st.stream_ended(R1, old), Ended::Stopped { capacity: 2 });
    let new = register_at(&mut st, R1, "/dp/p.sock", &[dev("d3", &[])]);
    assert_ne!(old, new);
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())), "devices of the previous registration are gone");
    assert_eq!(st.snapshot(R1, old, &[dev("d1", &[])]), None, "the old stream is ignored");
    assert_eq!(st.stream_ended(R1, old), Ended::Ignored);
    assert!(!st.grace_over(R1, old));
    // stopped, then back before the grace period ends: not removed
    st.stream_ended(R1, new);
    let back = register_at(&mut st, R1, "/dp/p.sock", &[dev("d3", &[])]);
    assert!(!st.grace_over(R1, new));
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
    assert_eq!(st.resources[R1].endpoint.as_ref().map(|e| e.id), Some(back));
    // keyed by resource a live instance on the same socket is simply replaced
    assert!(st.register(R1, instance("/dp/p.sock", false, false, crate::kubelet::event::Via::KubeletSocket)).is_ok());
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
    let reg_new = st.register(R1, instance("/dp/new.sock", false, false, crate::kubelet::event::Via::KubeletSocket));
    let reg_new = reg_new.expect("keyed by resource nothing is refused");
    assert_eq!(reg_new.older, 1, "the first stream is not closed");
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

/// From 1.37 (kubernetes#135437) the endpoints of one resource are keyed by
/// socket: the first instance's end touches only its own endpoint. The same
/// maxSurge update as above leaves the new instance running.
#[test]
fn keyed_by_socket_the_old_instance_ending_leaves_the_new_one() {
    let mut st = State::keyed(Endpoints::BySocket);
    let old = register_at(&mut st, R1, "/dp/old.sock", &[dev("d1", &[]), dev("d2", &[])]);
    let new = register_at(&mut st, R1, "/dp/new.sock", &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    // a snapshot of either instance sets the node's devices (the callback knows only the resource)
    st.snapshot(R1, old, &[dev("d1", &[]), dev_h("d2", "Unhealthy", &[])]);
    assert_eq!(numbers(&st, R1), Some((2, 1, "running".into())));
    st.snapshot(R1, new, &[dev("d1", &[]), dev("d2", &[])]);
    assert_eq!(st.stream_ended(R1, old), Ended::InstanceGone { capacity: 2, allocatable: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 2, "running".into())));
    assert_eq!(st.resources[R1].endpoint.as_ref().map(|e| e.id), Some(new));
    assert_eq!(st.stream_ended(R1, new), Ended::Stopped { capacity: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 0, "stopped".into())));
}

/// #139338 TestPluginConnected_SameResourceSameSocketRejected and
/// TestSameSocketRace_DisconnectBeforeReconnectAttempt: from 1.37 a second
/// registration from the socket of a live instance is refused ("device plugin
/// already connected: <socket>") and changes nothing; once that instance's
/// stream has ended the socket registers again.
#[test]
fn keyed_by_socket_the_same_socket_is_refused_while_live() {
    use crate::kubelet::event::Via;
    let mut st = State::keyed(Endpoints::BySocket);
    let a = register_at(&mut st, R1, "/dp/socketA.sock", &[dev("d1", &[])]);
    let v = st.version;
    let refused = st.register(R1, instance("/dp/socketA.sock", true, true, Via::KubeletSocket)).unwrap_err();
    assert_eq!(refused, Refused::AlreadyConnected { socket: "/dp/socketA.sock".into(), id: a });
    assert_eq!(refused.to_string(), "device plugin already connected: /dp/socketA.sock");
    let r = &st.resources[R1];
    assert_eq!((r.endpoint.as_ref().map(|e| (e.id, e.pre_start_required)), r.older.len()), (Some((a, false)), 0));
    assert_eq!((st.version, numbers(&st, R1)), (v, Some((1, 1, "running".into()))), "nothing changed");
    // also when the live instance on that socket is not the current one
    let b = register_at(&mut st, R1, "/dp/socketB.sock", &[dev("d1", &[])]);
    assert!(st.register(R1, instance("/dp/socketA.sock", false, false, Via::PluginWatcher)).is_err());
    // the instance on socket A goes: its socket registers again
    assert_eq!(st.stream_ended(R1, a), Ended::InstanceGone { capacity: 1, allocatable: 1 });
    let a2 = st.register(R1, instance("/dp/socketA.sock", true, false, Via::KubeletSocket)).expect("free again").id;
    let cur = st.resources[R1].endpoint.clone().expect("an endpoint");
    assert_eq!((cur.id, cur.pre_start_required), (a2, true), "the fresh instance is the current one");
    assert_eq!(st.resources[R1].older.iter().map(|e| e.id).collect::<Vec<_>>(), [b]);
    // a stopped endpoint's socket is free too (TestSameSocketRace_LateDisconnectAfterReconnect's first steps)
    let mut st = State::keyed(Endpoints::BySocket);
    let e1 = register_at(&mut st, R1, "/dp/socketA.sock", &[dev("d1", &[])]);
    assert_eq!(st.stream_ended(R1, e1), Ended::Stopped { capacity: 1 });
    register_at(&mut st, R1, "/dp/socketA.sock", &[dev("d1", &[])]);
    assert_eq!(numbers(&st, R1), Some((1, 1, "running".into())));
}

/// #139338 TestPluginConnected_SameResourceDifferentSocketsCoexist,
/// TestPluginDisconnected_PromotesSurvivor and
/// TestPluginDisconnected_LastEndpointMarksUnhealthy: two sockets coexist;
/// when the current one goes a survivor becomes current and the devices stay
/// as they are (healthy stays healthy; the kubelet does not drop the gone
/// instance's devices: they stay until a snapshot replaces them); when the
/// last one goes, every device turns unhealthy and the grace period runs.
#[test]
fn keyed_by_socket_survivor_promoted_last_one_stops() {
    let mut st = State::keyed(Endpoints::BySocket);
    let a = register_at(&mut st, R1, "/dp/socketA.sock", &[dev("dev1", &[])]);
    let b = register_at(&mut st, R1, "/dp/socketB.sock", &[dev("dev1", &[]), dev("dev2", &[])]);
    let r = &st.resources[R1];
    assert_eq!(
        (r.endpoint.as_ref().map(|e| e.id), r.older.iter().map(|e| e.id).collect::<Vec<_>>()),
        (Some(b), vec![a])
    );
    assert_eq!(st.stream_ended(R1, b), Ended::InstanceGone { capacity: 2, allocatable: 2 });
    assert_eq!(st.resources[R1].endpoint.as_ref().map(|e| e.id), Some(a), "the survivor is current");
    assert_eq!(st.healthy_or_none(R1), set(&["dev1", "dev2"]), "devices stay as the last snapshot left them");
    assert!(!st.grace_over(R1, b), "a gone instance has no grace period of its own");
    assert_eq!(st.snapshot(R1, b, &[]), None, "the gone instance's snapshots no longer count");
    assert_eq!(st.stream_ended(R1, a), Ended::Stopped { capacity: 2 });
    assert_eq!(numbers(&st, R1), Some((2, 0, "stopped".into())));
    assert!(st.grace_over(R1, a));
    assert_eq!(numbers(&st, R1), Some((0, 0, "removed".into())));
}

/// #139338 TestPluginDisconnected_WrongSocketIsNoop: the end of something
/// that is not a live endpoint of the resource (an unknown endpoint, another
/// resource) changes nothing.
#[test]
fn keyed_by_socket_an_unknown_end_is_a_no_op() {
    for (minor, keying) in BOTH {
        let mut st = State::keyed(keying);
        let a = register_at(&mut st, R1, "/dp/socketA.sock", &[dev("dev1", &[]), dev("dev2", &[])]);
        let v = st.version;
        assert_eq!(st.stream_ended(R1, a + 100), Ended::Ignored, "1.{minor}");
        assert_eq!(st.stream_ended("unknown.com/resource", a), Ended::Ignored, "1.{minor}");
        assert_eq!((st.version, numbers(&st, R1)), (v, Some((2, 2, "running".into()))), "1.{minor}");
    }
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
    assert_eq!((p.map(|p| p.pod.uid), freed), (Some("live".to_string()), vec!["b".to_string()]));
    assert_eq!(st.allocated(R1), 0);
    assert!(st.remove_pod("live").is_none());
}

/// A pod known only from the checkpoint's allocations (restored by a
/// restart, no manifest read since) is freed when removed, as the kubelet
/// frees a pod's devices once it is no longer active whatever it restored
/// (found by tests/e2e/devicemanager_diff.rs: a restart, then the pod
/// removed, then its devices asked for again).
#[test]
fn a_pod_restored_from_the_checkpoint_alone_is_freed_when_removed() {
    let mut st = state(&[(R1, vec![dev("a", &[]), dev("b", &[])])], false);
    allocated(&mut st, "restored", "c", R1, &["a", "b"]);
    let v = st.version;
    let (p, mut freed) = st.remove_pod("restored").unwrap();
    freed.sort();
    assert!(p.is_none());
    assert_eq!(freed, ["a", "b"]);
    assert_eq!(st.allocated(R1), 0);
    assert!(st.version > v, "the checkpoint is rewritten");
    assert!(st.remove_pod("restored").is_none());
}

use crate::api::deviceplugin::Device;
use crate::kubelet::profile::Endpoints;
use std::collections::BTreeSet;

impl State {
    fn healthy_or_none(&self, r: &str) -> BTreeSet<String> {
        self.resources.get(r).map(Resource::healthy).unwrap_or_default()
    }
}
