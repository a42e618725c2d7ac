//! Builders for the core's table tests: devices, registered resources, pods,
//! and a driver that answers an admission's questions like a plugin would.

use super::admission::AdmissionError;
use super::allocate::{Admitted, Answer, PodAdmission, Step};
use super::state::{Allocation, EndpointInfo, State};
use super::topology::TopologyPolicy;
use crate::api::deviceplugin::{
    AllocateResponse, ContainerAllocateResponse, ContainerPreferredAllocationRequest, Device, NumaNode, TopologyInfo,
};
use crate::kubelet::manifest::{Container, Pod};
use crate::kubelet::profile::{KubeletVersion, Profile};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A healthy device on `numa` nodes (none: no topology).
pub fn dev(id: &str, numa: &[i64]) -> Device {
    let topology = (!numa.is_empty()).then(|| TopologyInfo { nodes: numa.iter().map(|&id| NumaNode { id }).collect() });
    Device { id: id.into(), health: crate::api::HEALTHY.into(), topology }
}

/// A device with a health string.
pub fn dev_h(id: &str, health: &str, numa: &[i64]) -> Device {
    Device { health: health.into(), ..dev(id, numa) }
}

/// `Dev{first}..Dev{last}` on `numa`.
pub fn devs(first: usize, last: usize, numa: &[i64]) -> Vec<Device> {
    (first..=last).map(|i| dev(&format!("Dev{i}"), numa)).collect()
}

/// Register `resource` (GetPreferredAllocation available or not) and send one snapshot.
pub fn register(st: &mut State, resource: &str, devices: &[Device], preferred: bool) -> u64 {
    let ep = EndpointInfo {
        id: 0,
        socket: PathBuf::from(format!("/dp/{}.sock", resource.replace('/', "_"))),
        via: crate::kubelet::event::Via::KubeletSocket,
        pre_start_required: false,
        get_preferred_allocation_available: preferred,
    };
    let id = st.register(resource, ep).expect("no live instance on this socket").id;
    st.snapshot(resource, id, devices);
    id
}

/// A state with these resources registered.
pub fn state(resources: &[(&str, Vec<Device>)], preferred: bool) -> State {
    let mut st = State::default();
    for (r, d) in resources {
        register(&mut st, r, d, preferred);
    }
    st
}

/// Record an allocation of `ids` (another pod's, or this one's from before).
pub fn allocated(st: &mut State, uid: &str, container: &str, resource: &str, ids: &[&str]) {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    let a = Allocation::new(st, resource, ids, ContainerAllocateResponse::default());
    st.allocations.insert((uid.into(), container.into(), resource.into()), a);
}

/// A container with requests.
pub fn ctr(name: &str, req: &[(&str, u64)]) -> Container {
    Container {
        name: name.into(),
        resources: req.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
        restart_always: false,
        claims: vec![],
        claim_requests: vec![],
        request_keys: req.iter().map(|(r, _)| r.to_string()).collect(),
    }
}

/// A sidecar: an init container with `restartPolicy: Always`.
pub fn sidecar(name: &str, req: &[(&str, u64)]) -> Container {
    Container { restart_always: true, ..ctr(name, req) }
}

/// A pod.
pub fn pod(uid: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
    Pod {
        uid: uid.into(),
        name: uid.into(),
        namespace: "default".into(),
        init_containers: init,
        containers: app,
        resource_claims: vec![],
        pod_group: None,
        from_api: false,
    }
}

/// An Allocate answer for one container.
pub fn allocated_answer() -> Answer {
    Answer::Allocated(AllocateResponse { container_responses: vec![ContainerAllocateResponse::default()] })
}

/// Drive an admission to its end as the newest kubelet: `preferred` answers
/// GetPreferredAllocation (None: the call fails), Allocate always succeeds.
/// Returns the result and every question asked.
pub fn admit(
    st: &State,
    policy: TopologyPolicy,
    p: &Pod,
    preferred: impl FnMut(&ContainerPreferredAllocationRequest) -> Option<Vec<String>>,
) -> (Result<Admitted, AdmissionError>, Vec<Step>) {
    admit_as(st, Profile::default(), policy, p, preferred)
}

/// [`admit`] as the kubelet of `profile`.
pub fn admit_as(
    st: &State,
    profile: Profile,
    policy: TopologyPolicy,
    p: &Pod,
    mut preferred: impl FnMut(&ContainerPreferredAllocationRequest) -> Option<Vec<String>>,
) -> (Result<Admitted, AdmissionError>, Vec<Step>) {
    let mut plan = PodAdmission::new(p, st, profile);
    let mut answer = Answer::Begin;
    let mut asked = Vec::new();
    for _ in 0..1000 {
        let step = plan.next(st, policy, answer);
        asked.push(step.clone());
        answer = match step {
            Step::Done(r) => return (r, asked),
            Step::Preferred { request, .. } => match preferred(&request) {
                Some(ids) => Answer::Preferred(ids),
                None => Answer::PreferredFailed("rpc error: code = Unavailable".into()),
            },
            Step::Allocate { .. } => allocated_answer(),
        };
    }
    panic!("the admission did not end: {asked:?}")
}

/// The devices a finished admission gave `container` of `resource`.
pub fn got(a: &Admitted, container: &str, resource: &str) -> BTreeSet<String> {
    a.pending
        .iter()
        .filter(|((_, c, r), _)| c == container && r == resource)
        .flat_map(|(_, a)| a.ids.iter().cloned())
        .collect()
}

/// A set of strings.
pub fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// Devices per NUMA node (first node of each device) of `ids`.
pub fn alignment(st: &State, resource: &str, ids: &BTreeSet<String>) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for id in ids {
        if let Some(n) = st.resources[resource].devices[id].numa.first() {
            *m.entry(*n).or_default() += 1;
        }
    }
    m
}

/// The profile of kubelet 1.`minor`.
pub fn kubelet(minor: u32) -> Profile {
    Profile::of(KubeletVersion::parse(&format!("1.{minor}")).expect("a supported version"))
}
