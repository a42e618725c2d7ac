//! `dpctl replay TRACE --kubelet`, the plan: from a trace, what to seed a
//! mock kubelet with (a device-manager checkpoint and pod manifests for the
//! pods that already held devices) and which pods to admit, in order, each
//! with the plugin's device list at the time and the devices the kubelet
//! chose then. Pure: the command does the I/O and compares.

use crate::api::deviceplugin::Device;
use crate::client::checkpoint::{Data, PodDeviceEntry};
use crate::trace::{Event, RpcError, Trace};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;

/// One container of a pod to admit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepContainer {
    /// Container name.
    pub name: String,
    /// Devices requested.
    pub count: usize,
    /// The recorded Allocate, e.g. `Allocate #3`.
    pub call: String,
    /// The devices the kubelet chose then (sorted).
    pub recorded: Vec<String>,
    /// The plugin's error then, if Allocate failed.
    pub error: Option<RpcError>,
}

/// A pod to admit, after the plugin's device list is set and earlier pods
/// holding its devices are removed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStep {
    /// Manifest file name.
    pub file: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Whether the trace named the pod (otherwise it is made up, one per Allocate).
    pub known: bool,
    /// Containers, in Allocate order.
    pub containers: Vec<StepContainer>,
    /// The plugin's devices when the first Allocate was made.
    pub devices: Vec<Device>,
    /// Manifest files to delete first: their pods held devices that this one got, so they were gone.
    pub frees: Vec<String>,
}

/// What to seed the mock kubelet with.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    /// The checkpoint's content.
    pub checkpoint: Data,
    /// Manifest files: (name, JSON text).
    pub manifests: Vec<(String, String)>,
}

/// The whole reproduction.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The resource.
    pub resource: String,
    /// The seed.
    pub seed: Seed,
    /// The plugin's first device list.
    pub initial: Vec<Device>,
    /// Pods to admit, in order.
    pub steps: Vec<PodStep>,
    /// Limits worth telling the user about.
    pub notes: Vec<String>,
}

fn safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect()
}

/// A pod manifest (JSON) with one container per (name, count).
pub fn manifest(namespace: &str, name: &str, uid: &str, resource: &str, containers: &[(String, usize)]) -> String {
    let cs: Vec<serde_json::Value> = containers
        .iter()
        .map(|(c, n)| json!({"name": c, "resources": {"limits": {resource: n.to_string()}}}))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"containers": cs},
    })
    .to_string()
}

fn numa_of(devices: &[Device], id: &str) -> String {
    devices
        .iter()
        .find(|d| d.id == id)
        .and_then(|d| d.topology.as_ref())
        .and_then(|t| t.nodes.first())
        .map(|n| n.id.to_string())
        .unwrap_or_else(|| "-1".into())
}

/// Plan the reproduction of `trace` for `resource`.
pub fn plan(trace: &Trace, resource: &str) -> Plan {
    let mut notes = Vec::new();
    let initial: Vec<Device> = trace
        .events
        .iter()
        .find_map(|e| match e {
            Event::ListAndWatch { response, .. } => Some(response.devices.clone()),
            _ => None,
        })
        .unwrap_or_default();
    // device ID → the manifest file of the pod holding it
    let mut holders: BTreeMap<String, String> = BTreeMap::new();
    let mut seed = Seed { checkpoint: Data::default(), manifests: Vec::new() };
    match trace.kubelet_state() {
        None => notes.push(
            "the trace has no kubelet state (format 1, or recorded by watch): the mock kubelet starts with no pods"
                .into(),
        ),
        Some((allocatable, pods, source)) => {
            if source == "none" {
                notes.push(
                    "the kubelet's state could not be read when recording: the mock kubelet starts with no pods".into(),
                );
            }
            let registered = if allocatable.is_empty() {
                initial.iter().map(|d| d.id.clone()).collect()
            } else {
                allocatable.to_vec()
            };
            seed.checkpoint.registered_devices.insert(resource.to_string(), registered);
            for (i, p) in pods.iter().enumerate() {
                let namespace = if p.namespace.is_empty() { "default".to_string() } else { p.namespace.clone() };
                let name = if p.name.is_empty() { format!("held-{}", i + 1) } else { p.name.clone() };
                let uid = if p.uid.is_empty() {
                    format!("dpctl-replay-{}-{}", safe(&namespace), safe(&name))
                } else {
                    p.uid.clone()
                };
                let file = format!("seed-{}-{}.json", safe(&namespace), safe(&name));
                let cs: Vec<(String, usize)> = p.containers.iter().map(|c| (c.name.clone(), c.devices.len())).collect();
                seed.manifests.push((file.clone(), manifest(&namespace, &name, &uid, resource, &cs)));
                for c in &p.containers {
                    let mut by_numa: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for id in &c.devices {
                        by_numa.entry(numa_of(&initial, id)).or_default().push(id.clone());
                        holders.insert(id.clone(), file.clone());
                    }
                    seed.checkpoint.pod_device_entries.push(PodDeviceEntry {
                        pod_uid: uid.clone(),
                        container_name: c.name.clone(),
                        resource_name: resource.to_string(),
                        device_ids: by_numa,
                        alloc_resp: String::new(),
                    });
                }
            }
        }
    }

    let owners = trace.allocate_owners();
    let mut steps: Vec<PodStep> = Vec::new();
    let mut devices = initial.clone();
    let mut n = 0;
    let mut unknown = 0;
    for (i, e) in trace.events.iter().enumerate() {
        let (request, error) = match e {
            Event::ListAndWatch { response, .. } => {
                devices = response.devices.clone();
                continue;
            }
            Event::Allocate { request, error, .. } => (request, error),
            _ => continue,
        };
        n += 1;
        for (j, c) in request.container_requests.iter().enumerate() {
            let mut recorded = c.devices_ids.clone();
            recorded.sort();
            let container = StepContainer {
                name: String::new(),
                count: c.devices_ids.len(),
                call: format!("Allocate #{n}"),
                recorded: recorded.clone(),
                error: error.clone(),
            };
            let (namespace, name, uid, cname, known) = match owners.get(&(i, j)) {
                Some((ns, pod, uid, cname)) if !pod.is_empty() || !uid.is_empty() => {
                    let ns = if ns.is_empty() { "default".to_string() } else { ns.clone() };
                    let pod = if pod.is_empty() { format!("uid-{}", safe(uid)) } else { pod.clone() };
                    (ns, pod, uid.clone(), cname.clone(), true)
                }
                _ => {
                    unknown += 1;
                    ("default".to_string(), format!("replay-allocate-{n}"), String::new(), format!("c{j}"), false)
                }
            };
            let same_pod = steps.last().is_some_and(|s| {
                s.known && known && s.namespace == namespace && s.name == name && (uid.is_empty() || s.uid == uid)
            });
            let container = StepContainer { name: cname, ..container };
            if same_pod {
                if let Some(s) = steps.last_mut() {
                    s.containers.push(container);
                }
            } else {
                let uid =
                    if uid.is_empty() { format!("dpctl-replay-{}-{}-{n}", safe(&namespace), safe(&name)) } else { uid };
                let file = format!("{:04}-{}-{}.json", steps.len() + 1, safe(&namespace), safe(&name));
                steps.push(PodStep {
                    file,
                    namespace,
                    name,
                    uid,
                    known,
                    containers: vec![container],
                    devices: devices.clone(),
                    frees: Vec::new(),
                });
            }
            // Devices this Allocate got were free on the node: whoever held them was gone.
            if error.is_none() {
                if let Some(s) = steps.last_mut() {
                    for id in &recorded {
                        if let Some(f) = holders.insert(id.clone(), s.file.clone()) {
                            if f != s.file && !s.frees.contains(&f) {
                                s.frees.push(f.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    if unknown > 0 {
        notes.push(format!(
            "{unknown} Allocate container request(s) name no pod (format 1, or the kubelet's PodResources and checkpoint did not show it): each is admitted as a pod of its own"
        ));
    }
    // A pod freed later must not stay a holder of devices it no longer has.
    for s in &mut steps {
        let me = s.file.clone();
        s.frees.retain(|f| f != &me);
    }
    Plan { resource: resource.to_string(), seed, initial, steps, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::{AllocateRequest, ContainerAllocateRequest, ListAndWatchResponse};
    use crate::trace::{ContainerHolding, PodHolding};

    fn dev(id: &str, health: &str, numa: i64) -> Device {
        Device {
            id: id.into(),
            health: health.into(),
            topology: Some(crate::api::deviceplugin::TopologyInfo {
                nodes: vec![crate::api::deviceplugin::NumaNode { id: numa }],
            }),
        }
    }

    fn alloc(t: f64, ids: &[&str]) -> Event {
        Event::Allocate {
            t,
            latency_ms: 1.0,
            request: AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: ids.iter().map(|s| s.to_string()).collect(),
                }],
            },
            response: Some(Default::default()),
            error: None,
        }
    }

    fn for_(event: u64, pod: &str, container: &str) -> Event {
        Event::AllocateFor {
            t: 0.0,
            event,
            container_request: 0,
            namespace: "ml".into(),
            pod: pod.into(),
            uid: String::new(),
            container: container.into(),
        }
    }

    #[test]
    fn seeds_held_devices_and_admits_recorded_pods_in_order() {
        let four: Vec<Device> = (0..4).map(|i| dev(&format!("foo-{i}"), "Healthy", i / 2)).collect();
        let mut later = four.clone();
        later[3].health = "Unhealthy".into();
        let trace = Trace {
            header: serde_json::from_value(json!({"dpctlTrace": 2, "resource": "v.e/foo", "dpctlVersion": "x", "created": "x", "source": "record"})).unwrap(),
            events: vec![
                Event::KubeletState {
                    t: 0.0,
                    source: "podResources".into(),
                    allocatable: vec![],
                    pods: vec![PodHolding {
                        namespace: "ml".into(),
                        name: "old".into(),
                        uid: "u-old".into(),
                        containers: vec![ContainerHolding { name: "main".into(), devices: vec!["foo-0".into(), "foo-2".into()] }],
                    }],
                    note: None,
                },
                Event::ListAndWatch { t: 0.1, stream: 1, seq: 1, response: ListAndWatchResponse { devices: four.clone() } },
                Event::ListAndWatch { t: 0.2, stream: 1, seq: 2, response: ListAndWatchResponse { devices: later.clone() } },
                alloc(0.3, &["foo-1"]),   // event 4: pod a, container one
                alloc(0.31, &["foo-3"]),  // event 5: pod a, container two
                for_(4, "a", "one"),
                for_(5, "a", "two"),
                alloc(0.5, &["foo-2"]),   // event 8: no owner known; foo-2 was the old pod's
            ],
        };
        let p = plan(&trace, "v.e/foo");
        assert_eq!(p.initial, four);
        let e = &p.seed.checkpoint.pod_device_entries[0];
        assert_eq!((e.pod_uid.as_str(), e.container_name.as_str()), ("u-old", "main"));
        assert_eq!(
            e.device_ids,
            [("0".to_string(), vec!["foo-0".to_string()]), ("1".to_string(), vec!["foo-2".to_string()])]
                .into_iter()
                .collect()
        );
        assert_eq!(
            p.seed.checkpoint.registered_devices["v.e/foo"].len(),
            4,
            "allocatable defaults to the first device list"
        );
        let (file, text) = &p.seed.manifests[0];
        assert_eq!(file, "seed-ml-old.json");
        let m: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(m["metadata"]["uid"], "u-old");
        assert_eq!(m["spec"]["containers"][0]["resources"]["limits"]["v.e/foo"], "2");
        let pod = crate::kubelet::manifest::parse(text, std::path::Path::new("/x/seed-ml-old.json")).unwrap();
        assert_eq!(pod.uid, "u-old", "the mock kubelet reads the UID back");

        assert_eq!(p.steps.len(), 2);
        let a = &p.steps[0];
        assert_eq!((a.name.as_str(), a.known), ("a", true));
        assert_eq!(
            a.containers.iter().map(|c| (c.name.as_str(), c.recorded.clone())).collect::<Vec<_>>(),
            vec![("one", vec!["foo-1".to_string()]), ("two", vec!["foo-3".to_string()])]
        );
        assert_eq!(a.devices, later, "the device list as it was at the Allocate");
        assert!(a.frees.is_empty());
        let b = &p.steps[1];
        assert_eq!(
            (b.name.as_str(), b.known, b.containers[0].call.as_str()),
            ("replay-allocate-3", false, "Allocate #3")
        );
        assert_eq!(b.frees, ["seed-ml-old.json"], "foo-2 was free, so the old pod was gone");
        assert!(p.notes.iter().any(|n| n.contains("1 Allocate container request(s) name no pod")), "{:?}", p.notes);

        // Version 1: nothing seeded, every Allocate a pod of its own.
        let v1 = Trace { header: trace.header.clone(), events: trace.events[1..5].to_vec() };
        let p1 = plan(&v1, "v.e/foo");
        assert!(p1.seed.manifests.is_empty() && p1.seed.checkpoint.pod_device_entries.is_empty());
        assert_eq!(p1.steps.len(), 2);
        assert!(p1.notes[0].contains("no kubelet state"));
    }
}
