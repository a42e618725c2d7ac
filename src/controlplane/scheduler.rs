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

/// kube-scheduler's default `BindingTimeout` of the DynamicResources plugin
/// (pkg/scheduler/apis/config DynamicResourcesBindingTimeoutDefault).
pub const BINDING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Where a claim's binding conditions stand (KEP-5007): what the
/// scheduler's PreBind polls (every 5 s) before it binds the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Every binding condition of every device is True and no failure
    /// condition is (also: none has binding conditions).
    Ready,
    /// Not yet: `driver/pool/device` whose status is missing or whose
    /// conditions are not all True.
    Waiting(String),
    /// A bindingFailureCondition is True (ErrDeviceBindingFailed): the
    /// scheduler gives the claim up (deallocates it) and tries again.
    Failed {
        /// The device.
        device: String,
        /// The condition's type, reason and message.
        condition: String,
        /// Its reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// Not ready `timeout` after the allocation (ErrDeviceBindingTimeout):
    /// given up too.
    TimedOut(String),
}

/// The binding state of a claim allocated to `devices` whose
/// `status.devices` is `status_devices`, allocated at `allocated_at`, at
/// `now` (dynamicresources.go isClaimReadyForBinding, isClaimTimeout):
/// devices in order, each with bindingConditions looked up in
/// `status.devices` by driver, pool and device — a device without an entry
/// is not ready (and hides a failure of a later one); its failure
/// conditions first (any True fails the claim), then its binding
/// conditions (any not True: not ready). Not ready past `allocated_at +
/// timeout` is timed out.
pub fn binding(
    devices: &[Allocated],
    status_devices: &Value,
    allocated_at: Option<std::time::SystemTime>,
    now: std::time::SystemTime,
    timeout: std::time::Duration,
) -> Binding {
    let entries = status_devices.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut waiting = None;
    for d in devices.iter().filter(|d| !d.binding_conditions.is_empty()) {
        let name = format!("{}/{}/{}", d.driver, d.pool, d.device);
        let Some(entry) = entries.iter().find(|e| {
            e["driver"] == d.driver.as_str() && e["pool"] == d.pool.as_str() && e["device"] == d.device.as_str()
        }) else {
            waiting = Some(format!("{name}: no status.devices entry yet"));
            break;
        };
        let conditions = entry["conditions"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        // apimeta.FindStatusCondition: the first of that type.
        let find = |t: &str| conditions.iter().find(|c| c["type"] == t);
        let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
        if let Some((t, c)) =
            d.binding_failure_conditions.iter().find_map(|t| find(t).filter(|c| c["status"] == "True").map(|c| (t, c)))
        {
            return Binding::Failed {
                device: name,
                condition: t.clone(),
                reason: text(c, "reason"),
                message: text(c, "message"),
            };
        }
        if let Some(t) = d.binding_conditions.iter().find(|t| !find(t).is_some_and(|c| c["status"] == "True")) {
            waiting = Some(format!("{name}: condition {t} is not True"));
            break;
        }
    }
    let Some(why) = waiting else { return Binding::Ready };
    let expired = allocated_at.and_then(|at| at.checked_add(timeout)).is_some_and(|deadline| deadline < now);
    if expired {
        Binding::TimedOut(why)
    } else {
        Binding::Waiting(why)
    }
}

impl std::fmt::Display for Binding {
    /// As the scheduler words it (ErrDeviceBindingFailed, ErrDeviceBindingTimeout).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Binding::Ready => f.write_str("binding conditions met"),
            Binding::Waiting(why) => write!(f, "waiting for binding conditions ({why})"),
            Binding::Failed { device, condition, reason, message } => {
                write!(f, "device binding failed: device={device}, condition={condition}, reason={reason}, message={message:?}")
            }
            Binding::TimedOut(why) => write!(f, "device binding timeout ({why})"),
        }
    }
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

    /// KEP-5007, as dynamicresources.go (v1.37.2) isClaimReadyForBinding
    /// and isClaimTimeout judge a claim.
    #[test]
    fn binding_waits_for_every_condition_fails_on_a_failure_condition_and_times_out() {
        use std::time::{Duration, SystemTime};
        let bound = |device: &str| Allocated {
            binding_conditions: vec!["attached".into(), "ready".into()],
            binding_failure_conditions: vec!["failed".into()],
            ..dev("r", device)
        };
        let entry = |device: &str, conds: Value| json!({"driver": "gpu.example.com", "pool": "node-1", "device": device, "conditions": conds});
        let c = |t: &str, status: &str| json!({"type": t, "status": status, "reason": "R", "message": "m"});
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let soon = at + Duration::from_secs(10);
        let late = at + BINDING_TIMEOUT + Duration::from_secs(1);
        let devices = [dev("r", "plain"), bound("dev-0")];
        // No binding conditions anywhere: ready at once.
        assert_eq!(binding(&[dev("r", "plain")], &json!(null), None, soon, BINDING_TIMEOUT), Binding::Ready);
        // No status entry yet: waiting, then timed out.
        assert!(matches!(binding(&devices, &json!([]), Some(at), soon, BINDING_TIMEOUT), Binding::Waiting(_)));
        assert!(matches!(binding(&devices, &json!([]), Some(at), late, BINDING_TIMEOUT), Binding::TimedOut(_)));
        // One condition True of two: waiting.
        let half = json!([entry("dev-0", json!([c("attached", "True"), c("ready", "False")]))]);
        assert_eq!(
            binding(&devices, &half, Some(at), soon, BINDING_TIMEOUT),
            Binding::Waiting("gpu.example.com/node-1/dev-0: condition ready is not True".into())
        );
        let all = json!([entry("dev-0", json!([c("attached", "True"), c("ready", "True")]))]);
        assert_eq!(binding(&devices, &all, Some(at), late, BINDING_TIMEOUT), Binding::Ready);
        // A failure condition True fails, though the others are True too.
        let failed = json!([entry("dev-0", json!([c("attached", "True"), c("ready", "True"), c("failed", "True")]))]);
        let got = binding(&devices, &failed, Some(at), soon, BINDING_TIMEOUT);
        assert_eq!(
            got.to_string(),
            "device binding failed: device=gpu.example.com/node-1/dev-0, condition=failed, reason=R, message=\"m\""
        );
        // A device without its entry hides a later device's failure, as upstream's loop returns early.
        let two = [bound("dev-0"), bound("dev-1")];
        let later_failed = json!([entry("dev-1", json!([c("failed", "True")]))]);
        assert!(matches!(binding(&two, &later_failed, Some(at), soon, BINDING_TIMEOUT), Binding::Waiting(_)));
        // Without an allocation time there is no timeout.
        assert!(matches!(binding(&devices, &json!([]), None, late, BINDING_TIMEOUT), Binding::Waiting(_)));
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
