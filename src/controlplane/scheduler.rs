//! The scheduler's part of DynamicResources for one claim (kube-scheduler's
//! dynamicresources plugin with the structured allocator), as the mock
//! kubelet runs it when it admits a pod: a claim that already has
//! `status.allocation` is left alone — its devices are the ones written
//! (the plugin's PreFilter takes an allocated claim as it is) — and a
//! pending one is allocated ([`super::allocator`]); then `status.allocation`
//! as the scheduler writes it ([`allocation_result`]). Pure.

use super::allocator::{self, Allocated, Candidate, Features, Unallocatable};
use super::apiserver::claims::node_selector;
use super::objects::{ClaimSpec, Object};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What the scheduler did with a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduled {
    /// It was allocated already: the devices its `status.allocation` names.
    AsWritten(Vec<Allocated>),
    /// It was pending and is allocated now.
    Allocated(Vec<Allocated>),
}

impl Scheduled {
    /// The claim's devices.
    pub fn into_devices(self) -> Vec<Allocated> {
        match self {
            Scheduled::AsWritten(d) | Scheduled::Allocated(d) => d,
        }
    }
}

/// Schedule claim `key` (`namespace/name`) of `spec` whose stored status is
/// `status`: an allocated claim is left alone; a pending one is allocated
/// from `candidates` with the classes, namespaces and rules of `objects`,
/// beside the devices other claims hold (`taken`), under the scheduler's
/// `features` (its gates).
#[allow(clippy::too_many_arguments)]
pub fn schedule<'a>(
    key: &str,
    spec: &ClaimSpec,
    status: Option<&Value>,
    objects: impl IntoIterator<Item = &'a Object> + Clone,
    candidates: &[Candidate],
    taken: &[&Allocated],
    drivers: &BTreeSet<String>,
    features: Features,
) -> Result<Scheduled, Unallocatable> {
    if let Some(results) = status.and_then(|s| s["allocation"]["devices"]["results"].as_array()) {
        return Ok(Scheduled::AsWritten(allocator::given(results)));
    }
    let catalog = allocator::Catalog::with(objects, features);
    allocator::allocate(key, spec, &catalog, candidates, taken, drivers).map(Scheduled::Allocated)
}

/// `status.allocation` as the scheduler writes it for `devices`
/// (allocator_experimental.go Allocate): each request's class configs,
/// once per class (a later request of the same class is added to their
/// `requests`), for the request or the sub-request that used the class;
/// then the claim's configs that apply to an allocated request or to all;
/// a config whose `requests` name every request (or its chosen
/// sub-request) has them cleared ("empty means all"). The node selector
/// names the node: dpctl's devices are node-local (a device's bindsToNode,
/// KEP-5007, asks for the same selector).
pub fn allocation_result(
    devices: &[Allocated],
    spec: &Value,
    class_config: &BTreeMap<String, Vec<Value>>,
    node: &str,
) -> Value {
    let results: Vec<Value> = devices.iter().map(|a| serde_json::to_value(a).unwrap_or(Value::Null)).collect();
    let chosen: Vec<&str> = devices.iter().map(|a| a.request.as_str()).collect();
    let mut config: Vec<Value> = Vec::new();
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
    // Class name → the range of its configs in `config`.
    let mut of_class: BTreeMap<&str, std::ops::Range<usize>> = BTreeMap::new();
    for (request, class) in &used {
        if let Some(range) = of_class.get(class.as_str()) {
            for c in &mut config[range.clone()] {
                if let Some(a) = c["requests"].as_array_mut() {
                    a.push(json!(request));
                }
            }
            continue;
        }
        let Some(configs) = class_config.get(class) else { continue };
        let start = config.len();
        for c in configs {
            let mut c = c.clone();
            if let Some(m) = c.as_object_mut() {
                m.insert("source".into(), json!("FromClass"));
                m.insert("requests".into(), json!([request]));
            }
            config.push(c);
        }
        of_class.insert(class, start..config.len());
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
    // A config that names every request applies to all: its requests go.
    for c in &mut config {
        let names: Vec<String> = c["requests"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        // Each request by its name, or by its chosen sub-request's.
        let all = requests.iter().all(|r| {
            let name = r["name"].as_str().unwrap_or_default();
            let sub = format!("{name}/");
            names.iter().any(|n| n == name || (n.starts_with(&sub) && used.iter().any(|(full, _)| full == n)))
        });
        if names.is_empty() || all {
            if let Some(m) = c.as_object_mut() {
                m.remove("requests");
            }
        }
    }
    let mut devices = json!({ "results": results });
    if !config.is_empty() {
        devices["config"] = json!(config);
    }
    json!({"devices": devices, "nodeSelector": node_selector(node)})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(request: &str, device: &str) -> Allocated {
        Allocated {
            request: request.into(),
            driver: "gpu.example.com".into(),
            pool: "node-1".into(),
            device: device.into(),
            ..Allocated::default()
        }
    }

    /// #47 item 2: an allocated claim is left alone — its devices are the
    /// ones written, though a free device would fit — and a pending one is
    /// allocated.
    #[test]
    fn an_allocated_claim_is_left_alone_and_a_pending_one_is_allocated() {
        let spec = ClaimSpec::default();
        let status = json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": "gpu.example.com", "pool": "node-1", "device": "dev-3"}]}}});
        let f = Features::default();
        let got = schedule("ns/c", &spec, Some(&status), [], &[], &[], &BTreeSet::new(), f).unwrap();
        assert_eq!(got, Scheduled::AsWritten(vec![dev("r", "dev-3")]));
        let pending = schedule("ns/c", &spec, Some(&json!({})), [], &[], &[], &BTreeSet::new(), f).unwrap();
        assert!(matches!(pending, Scheduled::Allocated(_)), "{pending:?}");
    }

    #[test]
    fn the_allocation_carries_class_and_claim_config_for_the_requests_that_used_them() {
        let spec = crate::controlplane::apiserver::claims::v1_spec(&json!({"devices": {
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
        let a = allocation_result(&[dev("gpu", "gpu-0"), dev("alt/small", "gpu-1")], &spec, &classes, "node-1");
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
}
