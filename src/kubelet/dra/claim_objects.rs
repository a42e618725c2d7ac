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

use crate::controlplane::apiserver::claims::{node_selector, v1_spec};
use crate::controlplane::objects::Object;
use crate::kubelet::dra::claiminfo::{ClaimCache, ClaimInfo};
use crate::kubelet::dra::view::PodInfo;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `status.allocation` as the scheduler writes it for `info`'s devices
/// (structured allocator: class configs first, each for the request or
/// sub-request that used the class; then the claim's configs that apply to
/// an allocated request or to all).
pub fn allocation(info: &ClaimInfo, spec: &Value, class_config: &BTreeMap<String, Vec<Value>>, node: &str) -> Value {
    let results: Vec<Value> = info.allocation.iter().map(|a| serde_json::to_value(a).unwrap_or(Value::Null)).collect();
    let chosen: Vec<&str> = info.allocation.iter().map(|a| a.request.as_str()).collect();
    let mut config = Vec::new();
    let requests = spec["devices"]["requests"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    // Each request's name as the allocation names it (`req` or `req/sub`), and its class.
    let mut used: Vec<(String, String)> = Vec::new();
    for r in requests {
        let name = r["name"].as_str().unwrap_or_default();
        if let Some(class) = r["exactly"]["deviceClassName"].as_str() {
            used.push((name.to_string(), class.to_string()));
        } else if let Some(subs) = r["firstAvailable"].as_array() {
            let sub = subs.iter().find(|s| {
                let full = format!("{name}/{}", s["name"].as_str().unwrap_or_default());
                chosen.contains(&full.as_str())
            });
            if let Some(sub) = sub {
                let full = format!("{name}/{}", sub["name"].as_str().unwrap_or_default());
                used.push((full, sub["deviceClassName"].as_str().unwrap_or_default().to_string()));
            }
        }
    }
    for (request, class) in &used {
        for c in class_config.get(class).into_iter().flatten() {
            let mut c = c.clone();
            if let Some(m) = c.as_object_mut() {
                m.insert("source".into(), json!("FromClass"));
                m.insert("requests".into(), json!([request]));
            }
            config.push(c);
        }
    }
    for c in spec["devices"]["config"].as_array().into_iter().flatten() {
        let names: Vec<&str> =
            c["requests"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let applies = names.is_empty()
            || requests.iter().any(|r| names.contains(&r["name"].as_str().unwrap_or_default()))
            || used.iter().any(|(full, _)| names.contains(&full.as_str()));
        if applies {
            let mut c = c.clone();
            if let Some(m) = c.as_object_mut() {
                m.insert("source".into(), json!("FromClaim"));
            }
            config.push(c);
        }
    }
    let mut devices = json!({ "results": results });
    if !config.is_empty() {
        devices["config"] = json!(config);
    }
    json!({"devices": devices, "nodeSelector": node_selector(node)})
}

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
                "controller": true, "blockOwnerDeletion": true}]);
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
    fn the_allocation_carries_class_and_claim_config_for_the_requests_that_used_them() {
        let spec = v1_spec(&json!({"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                         {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "big"}, {"name": "small", "deviceClassName": "small"}]}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "SpacePartitioning"}}}},
                       {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"all": true}}},
                       {"requests": ["alt/big"], "opaque": {"driver": "x", "parameters": {}}}]}}));
        let mut classes = BTreeMap::new();
        classes.insert(
            "gpu.nvidia.com".to_string(),
            vec![json!({"opaque": {"driver": "gpu.nvidia.com", "parameters": {"interval": "Long"}}})],
        );
        classes.insert("small".to_string(), vec![json!({"opaque": {"driver": "s", "parameters": {"k": 1}}})]);
        let info = ClaimInfo::allocated("ns", "c", "u", vec![dev("gpu", "gpu-0"), dev("alt/small", "gpu-1")]);
        let a = allocation(&info, &spec, &classes, "node-1");
        let config = a["devices"]["config"].as_array().unwrap();
        assert_eq!(config.len(), 4, "{a}");
        assert_eq!(config[0]["source"], "FromClass");
        assert_eq!(config[0]["requests"], json!(["gpu"]));
        assert_eq!(config[0]["opaque"]["parameters"]["interval"], "Long");
        assert_eq!((config[1]["source"].as_str(), &config[1]["requests"]), (Some("FromClass"), &json!(["alt/small"])));
        assert_eq!(config[2]["source"], "FromClaim");
        assert_eq!(config[2]["opaque"]["parameters"]["sharing"]["strategy"], "SpacePartitioning");
        assert_eq!(config[3]["opaque"]["parameters"]["all"], true);
        assert!(config[3].get("requests").is_none());
        assert_eq!(a["devices"]["results"][1]["request"], "alt/small");
        assert_eq!(a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], "node-1");
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
