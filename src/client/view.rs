//! The kubelet's view of one resource, as `dpctl record` captures it for a
//! trace: which devices each pod/container already holds and the node's
//! allocatable set — from PodResources when it answers, from the
//! device-manager checkpoint otherwise (and both when both are readable:
//! PodResources has names, the checkpoint has UIDs). Deciding is pure; the
//! two readers at the bottom do the I/O.

use crate::api::podresources::{
    pod_resources_lister_client::PodResourcesListerClient, AllocatableResourcesRequest, AllocatableResourcesResponse,
    ListPodResourcesRequest, ListPodResourcesResponse,
};
use crate::client::checkpoint::Data;
use crate::core::transport::{call, dial, request};
use crate::trace::{ContainerHolding, PodHolding};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// What was read: allocatable IDs, pods holding devices, the source, and a note.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    /// Allocatable device IDs (sorted).
    pub allocatable: Vec<String>,
    /// Pods holding devices of the resource.
    pub pods: Vec<PodHolding>,
    /// `podResources`, `checkpoint` or `none`.
    pub source: String,
    /// What could not be read, if anything.
    pub note: Option<String>,
}

fn sorted(ids: impl IntoIterator<Item = String>) -> Vec<String> {
    ids.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
}

/// Pods holding `resource` according to a PodResources List answer.
pub fn pods_from_pod_resources(list: &ListPodResourcesResponse, resource: &str) -> Vec<PodHolding> {
    list.pod_resources
        .iter()
        .filter_map(|p| {
            let containers: Vec<ContainerHolding> = p
                .containers
                .iter()
                .filter_map(|c| {
                    let ids = sorted(
                        c.devices
                            .iter()
                            .filter(|d| d.resource_name == resource)
                            .flat_map(|d| d.device_ids.iter().cloned()),
                    );
                    (!ids.is_empty()).then(|| ContainerHolding { name: c.name.clone(), devices: ids })
                })
                .collect();
            (!containers.is_empty()).then(|| PodHolding {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                uid: String::new(),
                containers,
            })
        })
        .collect()
}

/// Allocatable IDs of `resource` from GetAllocatableResources.
pub fn allocatable_from_pod_resources(a: &AllocatableResourcesResponse, resource: &str) -> Vec<String> {
    sorted(a.devices.iter().filter(|d| d.resource_name == resource).flat_map(|d| d.device_ids.iter().cloned()))
}

/// Pods (by UID) and registered devices of `resource` from the checkpoint.
pub fn from_checkpoint(data: &Data, resource: &str) -> (Vec<String>, Vec<PodHolding>) {
    let mut pods: Vec<PodHolding> = Vec::new();
    for e in data.pod_device_entries.iter().filter(|e| e.resource_name == resource) {
        let ids = sorted(e.ids());
        if ids.is_empty() {
            continue;
        }
        let c = ContainerHolding { name: e.container_name.clone(), devices: ids };
        match pods.iter_mut().find(|p| p.uid == e.pod_uid) {
            Some(p) => p.containers.push(c),
            None => pods.push(PodHolding {
                namespace: String::new(),
                name: String::new(),
                uid: e.pod_uid.clone(),
                containers: vec![c],
            }),
        }
    }
    let registered = sorted(data.registered_devices.get(resource).cloned().unwrap_or_default());
    (registered, pods)
}

/// Fill in UIDs of PodResources pods from checkpoint pods holding the same
/// devices in containers of the same names.
pub fn merge_uids(named: &mut [PodHolding], by_uid: &[PodHolding]) {
    for p in named.iter_mut().filter(|p| p.uid.is_empty()) {
        let same = by_uid.iter().find(|q| {
            !p.containers.is_empty()
                && p.containers.iter().all(|c| q.containers.iter().any(|d| d.name == c.name && d.devices == c.devices))
        });
        if let Some(q) = same {
            p.uid = q.uid.clone();
        }
    }
}

/// The pod and container holding exactly `devices` (order-free).
pub fn find_owner<'a>(pods: &'a [PodHolding], devices: &[String]) -> Option<(&'a PodHolding, &'a ContainerHolding)> {
    let want = sorted(devices.iter().cloned());
    if want.is_empty() {
        return None;
    }
    pods.iter().find_map(|p| p.containers.iter().find(|c| c.devices == want).map(|c| (p, c)))
}

/// Read PodResources (List, and GetAllocatableResources when it answers).
async fn read_pod_resources(
    socket: &Path,
    resource: &str,
    timeout: Duration,
) -> crate::core::Result<(Option<Vec<String>>, Vec<PodHolding>)> {
    let mut c = PodResourcesListerClient::new(dial(socket, timeout).await?);
    let list = call(socket, "List", timeout, c.list(request(ListPodResourcesRequest {}, timeout))).await?;
    let alloc = call(
        socket,
        "GetAllocatableResources",
        timeout,
        c.get_allocatable_resources(request(AllocatableResourcesRequest {}, timeout)),
    )
    .await
    .ok();
    Ok((alloc.map(|a| allocatable_from_pod_resources(&a, resource)), pods_from_pod_resources(&list, resource)))
}

fn read_checkpoint(path: &Path, resource: &str) -> crate::core::Result<(Vec<String>, Vec<PodHolding>)> {
    match crate::client::checkpoint::read(path) {
        Ok(Some(l)) => Ok(from_checkpoint(&l.checkpoint.data, resource)),
        Ok(None) => Err(crate::core::Error::failed(format!("{}: no checkpoint", path.display()))),
        Err(e) => Err(e),
    }
}

/// The kubelet's view of `resource`: PodResources first, the checkpoint otherwise.
pub async fn read(pod_resources: &Path, checkpoint: &Path, resource: &str, timeout: Duration) -> View {
    let pr = read_pod_resources(pod_resources, resource, timeout).await;
    let cp = read_checkpoint(checkpoint, resource);
    match (pr, cp) {
        (Ok((alloc, mut pods)), cp) => {
            let mut note = None;
            let registered = match &cp {
                Ok((registered, by_uid)) => {
                    merge_uids(&mut pods, by_uid);
                    registered.clone()
                }
                Err(e) => {
                    note = Some(format!("no pod UIDs: {e}"));
                    Vec::new()
                }
            };
            View { allocatable: alloc.unwrap_or(registered), pods, source: "podResources".into(), note }
        }
        (Err(e), Ok((registered, pods))) => View {
            allocatable: registered,
            pods,
            source: "checkpoint".into(),
            note: Some(format!("PodResources unavailable ({e}); pod names unknown")),
        },
        (Err(e), Err(e2)) => View {
            source: "none".into(),
            note: Some(format!("PodResources unavailable ({e}); checkpoint unreadable ({e2})")),
            ..Default::default()
        },
    }
}

/// Find the pod and container that now hold `devices`, asking PodResources
/// and the checkpoint until `within` has passed. Returns (namespace, pod, uid, container).
pub async fn owner(
    pod_resources: &Path,
    checkpoint: &Path,
    resource: &str,
    devices: &[String],
    within: Duration,
) -> Option<(String, String, String, String)> {
    let now = tokio::time::Instant::now;
    let deadline = now() + within;
    let call_timeout = Duration::from_secs(1);
    // Named by PodResources, but the checkpoint (UID) not written yet: wait a little longer for it.
    let mut named: Option<((String, String, String), tokio::time::Instant)> = None;
    loop {
        let cp = read_checkpoint(checkpoint, resource).ok().map(|(_, p)| p).unwrap_or_default();
        let by_uid = find_owner(&cp, devices).map(|(p, c)| (p.uid.clone(), c.name.clone()));
        if let Ok((_, mut pods)) = read_pod_resources(pod_resources, resource, call_timeout).await {
            merge_uids(&mut pods, &cp);
            if let Some((p, c)) = find_owner(&pods, devices) {
                let uid =
                    if p.uid.is_empty() { by_uid.clone().map(|(u, _)| u).unwrap_or_default() } else { p.uid.clone() };
                if !uid.is_empty() {
                    return Some((p.namespace.clone(), p.name.clone(), uid, c.name.clone()));
                }
                named.get_or_insert((
                    (p.namespace.clone(), p.name.clone(), c.name.clone()),
                    now() + Duration::from_secs(2),
                ));
            }
        }
        if let Some(((ns, pod, c), until)) = &named {
            if now() >= *until || now() >= deadline {
                return Some((ns.clone(), pod.clone(), String::new(), c.clone()));
            }
        }
        if now() >= deadline {
            // The checkpoint alone still names the container.
            return by_uid.map(|(u, c)| (String::new(), String::new(), u, c));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::podresources::{ContainerDevices, ContainerResources, PodResources};
    use crate::client::checkpoint::PodDeviceEntry;

    fn pr() -> ListPodResourcesResponse {
        ListPodResourcesResponse {
            pod_resources: vec![
                PodResources {
                    name: "a".into(),
                    namespace: "ml".into(),
                    containers: vec![ContainerResources {
                        name: "main".into(),
                        devices: vec![
                            ContainerDevices {
                                resource_name: "v.e/foo".into(),
                                device_ids: vec!["foo-2".into(), "foo-1".into()],
                                topology: None,
                            },
                            ContainerDevices {
                                resource_name: "v.e/bar".into(),
                                device_ids: vec!["bar-0".into()],
                                topology: None,
                            },
                        ],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                PodResources { name: "idle".into(), namespace: "ml".into(), ..Default::default() },
            ],
        }
    }

    fn cp() -> Data {
        Data {
            pod_device_entries: vec![PodDeviceEntry {
                pod_uid: "u-1".into(),
                container_name: "main".into(),
                resource_name: "v.e/foo".into(),
                device_ids: [
                    ("0".to_string(), vec!["foo-1".to_string()]),
                    ("1".to_string(), vec!["foo-2".to_string()]),
                ]
                .into_iter()
                .collect(),
                alloc_resp: String::new(),
            }],
            registered_devices: [("v.e/foo".to_string(), vec!["foo-3".into(), "foo-1".into(), "foo-2".into()])]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn pods_and_uids_are_joined_by_container_and_devices() {
        let mut pods = pods_from_pod_resources(&pr(), "v.e/foo");
        assert_eq!(pods.len(), 1, "pods without the resource are left out");
        assert_eq!(pods[0].containers[0].devices, ["foo-1", "foo-2"]);
        let (registered, by_uid) = from_checkpoint(&cp(), "v.e/foo");
        assert_eq!(registered, ["foo-1", "foo-2", "foo-3"]);
        merge_uids(&mut pods, &by_uid);
        assert_eq!(pods[0].uid, "u-1");
        assert_eq!(pods[0].key(), "ml/a");
        let (p, c) = find_owner(&pods, &["foo-2".into(), "foo-1".into()]).unwrap();
        assert_eq!((p.name.as_str(), c.name.as_str()), ("a", "main"));
        assert!(find_owner(&pods, &["foo-1".into()]).is_none(), "a subset is not the container's allocation");
        assert!(from_checkpoint(&cp(), "v.e/bar").1.is_empty());
    }

    #[tokio::test]
    async fn without_pod_resources_the_checkpoint_is_read() {
        let d = tempfile::tempdir().unwrap();
        let cp_path = d.path().join("kubelet_internal_checkpoint");
        let (pr, t) = (d.path().join("no-such.sock"), Duration::from_millis(200));
        let v = read(&pr, &cp_path, "v.e/foo", t).await;
        assert_eq!(v.source, "none");
        assert!(v.note.unwrap().contains("PodResources unavailable"));
        crate::client::checkpoint::write(&cp_path, &cp()).unwrap();
        let v = read(&pr, &cp_path, "v.e/foo", t).await;
        assert_eq!(v.source, "checkpoint");
        assert_eq!(v.allocatable, ["foo-1", "foo-2", "foo-3"]);
        assert_eq!(v.pods[0].uid, "u-1");
        assert!(v.pods[0].name.is_empty(), "names come only from PodResources");
        let o = owner(&pr, &cp_path, "v.e/foo", &["foo-2".into(), "foo-1".into()], Duration::ZERO).await;
        assert_eq!(o, Some((String::new(), String::new(), "u-1".into(), "main".into())));
    }
}
