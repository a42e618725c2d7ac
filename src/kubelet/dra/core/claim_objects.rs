//! ResourceClaims as whole API objects, built from what the mock kubelet
//! knows (pure; their API shape is [`crate::controlplane::apiserver::claims`]): the spec as its manifest (or its template) wrote it, in
//! v1's shape with v1's defaults applied as kube-apiserver applies them
//! (`allocationMode: ExactCount`, `count: 1`, toleration `operator:
//! Equal`); `status.allocation` as the scheduler writes it — the allocator's
//! devices, `config` copied from each request's DeviceClass (`FromClass`)
//! and from the claim (`FromClaim`) with their requests, and a node
//! selector naming this node (its devices are node-local) — or as the
//! manifest's own `status` gives it (a claim a scheduler already
//! allocated); `status.reservedFor` naming the pods using it. Metadata the
//! API server owns (resourceVersion, generation, creationTimestamp) is set
//! by the store ([`super::Store`]).

use super::claiminfo::{ClaimCache, ClaimInfo};
use super::view::PodInfo;
use crate::controlplane::apiserver::claims::v1_spec;
use crate::controlplane::objects::Object;
use crate::controlplane::scheduler::allocation_result;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The pods `info` is reserved for (`status.reservedFor`).
fn reserved_for(info: &ClaimInfo, pods: &BTreeMap<String, PodInfo>) -> Vec<Value> {
    info.pods
        .iter()
        .map(|uid| {
            let name = pods.get(uid).map(|p| p.pod.rsplit('/').next().unwrap_or("").to_string()).unwrap_or_default();
            json!({"resource": "pods", "name": name, "uid": uid})
        })
        .collect()
}

/// Metadata of a claim as written (name, namespace, uid, labels,
/// annotations, ownerReferences, finalizers): what the store keeps besides
/// the fields it sets itself.
fn written_meta(raw: &Value, name: &str, namespace: &str, uid: &str) -> Value {
    let mut meta = json!({"name": name, "namespace": namespace, "uid": uid});
    for f in ["labels", "annotations", "ownerReferences", "finalizers"] {
        if let Some(v) = raw["metadata"].get(f).filter(|v| !v.is_null()) {
            meta[f] = v.clone();
        }
    }
    meta
}

/// Every claim the API server serves: each ResourceClaim manifest (with its
/// allocation once the mock kubelet has allocated it, or the one its
/// manifest gives), and each claim the kubelet generated from a template
/// for a pod. A cached claim whose manifest now has another UID is not
/// served (the API server has only the new one).
pub fn claim_objects(
    cache: &ClaimCache,
    pods: &BTreeMap<String, PodInfo>,
    objects: &BTreeMap<String, Object>,
    node: &str,
) -> Vec<Value> {
    let class_config: BTreeMap<String, Vec<Value>> = objects
        .values()
        .filter_map(|o| match o {
            Object::Class { name, config, .. } => Some((name.clone(), config.clone())),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let mut served = std::collections::BTreeSet::new();
    for o in objects.values() {
        let Object::Claim { namespace, name, uid, raw, .. } = o else { continue };
        let key = format!("{namespace}/{name}");
        served.insert(key.clone());
        let spec = v1_spec(&raw["spec"]);
        let mut obj = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": written_meta(raw, name, namespace, uid), "spec": spec});
        let cached = cache.get(&key).filter(|c| &c.uid == uid);
        let given = &raw["status"];
        if given["allocation"].is_object() {
            obj["status"] = given.clone();
            if given.get("reservedFor").is_none() {
                if let Some(c) = cached {
                    obj["status"]["reservedFor"] = json!(reserved_for(c, pods));
                }
            }
        } else if let Some(c) = cached {
            obj["status"] = json!({"allocation": allocation(c, &obj["spec"], &class_config, node),
                "reservedFor": reserved_for(c, pods)});
            if let Some(d) = given.get("devices") {
                obj["status"]["devices"] = d.clone();
            }
        }
        out.push(obj);
    }
    for c in cache.values().filter(|c| !served.contains(&c.key())) {
        // A claim generated from a template for a pod: the template's spec,
        // owned by the pod (resourceclaim controller).
        let owner = pods.values().find_map(|p| {
            let pc = p.pod_claims.iter().find(|pc| pc.name == c.name && pc.template.is_some())?;
            (p.namespace == c.namespace).then_some((p, pc))
        });
        let template = owner.and_then(|(_, pc)| {
            let t = pc.template.as_deref()?;
            match objects.get(&format!("ResourceClaimTemplate {}/{t}", c.namespace)) {
                Some(Object::Template { raw, .. }) => Some(raw),
                _ => None,
            }
        });
        let spec = match template {
            Some(raw) => v1_spec(&raw["spec"]["spec"]),
            None => {
                let mut names: Vec<&str> =
                    c.allocation.iter().map(|a| a.request.split('/').next().unwrap_or_default()).collect();
                names.dedup();
                json!({"devices": {"requests": names.iter().map(|r| json!({"name": r})).collect::<Vec<_>>()}})
            }
        };
        let mut meta = json!({"name": c.name, "namespace": c.namespace, "uid": c.uid});
        if let Some((p, pc)) = owner {
            let pod_name = p.pod.rsplit('/').next().unwrap_or_default();
            meta["annotations"] = json!({"resource.kubernetes.io/pod-claim-name": pc.pod_claim});
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": p.uid,
                "controller": true}]);
        }
        if let Some(raw) = template {
            for f in ["labels", "annotations"] {
                if let Some(Value::Object(m)) = raw["spec"]["metadata"].get(f) {
                    for (k, v) in m {
                        meta[f][k] = v.clone();
                    }
                }
            }
        }
        let status =
            json!({"allocation": allocation(c, &spec, &class_config, node), "reservedFor": reserved_for(c, pods)});
        out.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec,
            "status": status}));
    }
    out
}

/// `status.allocation` of claim `c` as this node's scheduler wrote it, with
/// its `allocationTimestamp` when it stamped one (binding conditions' gates on).
fn allocation(c: &ClaimInfo, spec: &Value, class_config: &BTreeMap<String, Vec<Value>>, node: &str) -> Value {
    let mut a = allocation_result(&c.allocation, spec, class_config, node);
    if let Some(at) = c.allocated_at {
        a["allocationTimestamp"] = json!(crate::core::time::rfc3339_seconds(at));
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::allocator::Allocated;
    use crate::controlplane::objects::parse;

    fn dev(request: &str, device: &str) -> Allocated {
        Allocated {
            request: request.into(),
            driver: "gpu.example.com".into(),
            pool: "node-1".into(),
            device: device.into(),
            ..Allocated::default()
        }
    }

    #[test]
    fn a_manifest_allocation_is_served_as_written_and_an_old_uid_is_not_served() {
        let raw = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns", "uid": "new", "labels": {"a": "b"}},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "g"}]}},
                       "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]}});
        let mut objects = BTreeMap::new();
        let o = parse(&raw).unwrap();
        objects.insert(o.key(), o);
        let mut cache = ClaimCache::default();
        let old = ClaimInfo::allocated("ns", "c", "old", vec![dev("r", "gpu-9")]);
        cache.insert_for_test(old);
        let got = claim_objects(&cache, &BTreeMap::new(), &objects, "node-1");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["metadata"]["uid"], "new");
        assert_eq!(got[0]["metadata"]["labels"]["a"], "b");
        assert_eq!(got[0]["status"], raw["status"]);
        assert_eq!(got[0]["spec"]["devices"]["requests"][0]["exactly"]["count"], 1);
    }
}
