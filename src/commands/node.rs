//! `dpctl node`: the node's device capacity and allocatable per resource,
//! like `kubectl describe node`, read from the running mock kubelet.

use super::surface::{Invocation, Running, Spec};
use super::Ctx;
use crate::client::status::NodeStatus;
use crate::core::Result;
use crate::render::{emit, structured, table, Format};
use serde_json::Value;

/// `dpctl node`: its surface.
pub const COMMAND: Spec = Spec {
    name: "node",
    about: "Show the running mock kubelet's node: device capacity and allocatable, DRA drivers and claims, pods",
    group: super::surface::Group::Kubelet,
    args: std::convert::identity,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: parse_node,
};

const EXAMPLES: &str = "Examples:
  dpctl node --plugin-dir /tmp/node/device-plugins
  dpctl node --plugin-dir /tmp/node/device-plugins -o json";

/// `dpctl node` takes no arguments of its own.
#[derive(Debug)]
pub struct NodeArgs;

fn parse_node(_: &clap::ArgMatches) -> std::result::Result<Box<dyn Invocation>, clap::Error> {
    Ok(Box::new(NodeArgs))
}

impl Invocation for NodeArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx))
    }
}

/// Read the status of the mock kubelet that owns the plugin directory.
pub async fn fetch(ctx: &Ctx) -> Result<NodeStatus> {
    crate::client::status::fetch(&ctx.paths.plugin_dir, ctx.timeout).await
}

/// NUMA node IDs as PodResources (and protojson) write them: int64 as a
/// JSON string, so `numa` in `node -o json` and `ID` in `podresources -o json`
/// are the same type.
pub fn numa_as_protojson(resources: &mut [Value]) {
    for r in resources {
        for d in r.get_mut("devices").and_then(Value::as_object_mut).into_iter().flatten().map(|(_, d)| d) {
            // One NUMA node (a number) or several (a list of numbers).
            let as_string = |n: &mut Value| {
                if let Some(i) = n.as_i64() {
                    *n = Value::String(i.to_string());
                }
            };
            match d.get_mut("numa") {
                Some(Value::Array(list)) => list.iter_mut().for_each(as_string),
                Some(n) => as_string(n),
                None => {}
            }
        }
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx) -> Result<()> {
    let mut n = fetch(ctx).await?;
    if ctx.format != Format::Table {
        numa_as_protojson(&mut n.resources);
        return emit(&structured(ctx.format, &n)?);
    }
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        o => o.to_string(),
    };
    let rows: Vec<Vec<String>> = n
        .resources
        .iter()
        .map(|r| {
            vec![
                s(&r["resource"]),
                s(&r["capacity"]),
                s(&r["allocatable"]),
                s(&r["allocated"]),
                s(&r["state"]),
                s(&r["endpoint"]),
            ]
        })
        .collect();
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("no device plugin resources registered\n");
    } else {
        out.push_str(&table(&["RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "STATE", "ENDPOINT"], &rows));
        out.push('\n');
    }
    let mut pods = Vec::new();
    for p in &n.pods {
        for c in p["containers"].as_array().into_iter().flatten() {
            let (name, res) = (s(&c["name"]), &c["resources"]);
            for (r, by_numa) in res.as_object().into_iter().flatten() {
                let mut ids = Vec::new();
                let mut numa = Vec::new();
                for (node, list) in by_numa.as_object().into_iter().flatten() {
                    ids.extend(list.as_array().into_iter().flatten().map(s));
                    if node != "-1" {
                        numa.push(node.clone());
                    }
                }
                pods.push(vec![
                    s(&p["namespace"]),
                    s(&p["name"]),
                    if c["sidecar"].as_bool() == Some(true) { format!("{name} (sidecar)") } else { name.clone() },
                    r.clone(),
                    ids.join(","),
                    if numa.is_empty() { "-".into() } else { numa.join(",") },
                ]);
            }
        }
    }
    if !pods.is_empty() {
        out.push('\n');
        out.push_str(&table(&["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "DEVICES", "NUMA"], &pods));
        out.push('\n');
    }
    dra_tables(&n, &mut out);
    if !n.rejected.is_empty() {
        out.push_str("\nRejected manifests:\n");
        for (f, why) in &n.rejected {
            match n.rejected_reasons.get(f) {
                Some(reason) => out.push_str(&format!("  {f}: {reason}: {why}\n")),
                None => out.push_str(&format!("  {f}: {why}\n")),
            }
        }
    }
    emit(&out)
}

/// Pod UID → `namespace/name`, from the pods the mock kubelet reports
/// (device-plugin pods and pods with claims).
fn pod_names(n: &NodeStatus) -> std::collections::BTreeMap<String, String> {
    let mut names = std::collections::BTreeMap::new();
    for p in &n.pods {
        if let (Some(uid), Some(ns), Some(name)) = (p["uid"].as_str(), p["namespace"].as_str(), p["name"].as_str()) {
            names.insert(uid.to_string(), format!("{ns}/{name}"));
        }
    }
    for p in &n.dra_pods {
        if let (Some(uid), Some(pod)) = (p["uid"].as_str(), p["pod"].as_str()) {
            names.insert(uid.to_string(), pod.to_string());
        }
    }
    names
}

/// A pod as a table shows it: `namespace/name`, or `UID <uid>` where no name is known.
pub fn pod_label(uid: &str, names: &std::collections::BTreeMap<String, String>) -> String {
    names.get(uid).cloned().unwrap_or_else(|| format!("UID {uid}"))
}

/// A driver's device health (`pool/device=Health` each) summarised: `4
/// Healthy, 1 Unhealthy` (every device is in `-o json`).
pub fn health_summary(health: &[String]) -> String {
    let mut by: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for h in health {
        // `pool/device=Health` or `pool/device=Health (message)`.
        let word = h.split_once('=').map_or("Unknown", |(_, x)| x.split(" (").next().unwrap_or(x));
        *by.entry(word).or_default() += 1;
    }
    if by.is_empty() {
        return "-".into();
    }
    // Healthy first, then the rest by name.
    let mut parts: Vec<String> = by.get("Healthy").map(|n| format!("{n} Healthy")).into_iter().collect();
    parts.extend(by.iter().filter(|(k, _)| **k != "Healthy").map(|(k, n)| format!("{n} {k}")));
    parts.join(", ")
}

/// The DRA part of `dpctl node`: drivers, then claims (one row each).
fn dra_tables(n: &NodeStatus, out: &mut String) {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(a) if a.is_empty() => "-".into(),
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string()))
            .collect::<Vec<_>>()
            .join(","),
        o => o.to_string(),
    };
    if !n.dra_drivers.is_empty() {
        let rows: Vec<Vec<String>> = n
            .dra_drivers
            .iter()
            .map(|d| {
                let health: Vec<String> =
                    d["health"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect();
                vec![s(&d["driver"]), s(&d["service"]), s(&d["endpoints"]), health_summary(&health), s(&d["slices"])]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(&["DRA DRIVER", "SERVICE", "ENDPOINTS", "HEALTH", "RESOURCESLICES"], &rows));
        out.push('\n');
    }
    if !n.claims.is_empty() {
        let names = pod_names(n);
        let rows: Vec<Vec<String>> = n
            .claims
            .iter()
            .map(|c| {
                let devices: Vec<String> = c["allocation"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| format!("{}/{}/{}", s(&a["driver"]), s(&a["pool"]), s(&a["device"])))
                    .collect();
                let cdi: Vec<String> = c["prepared"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .flat_map(|(_, devs)| devs.as_array().cloned().unwrap_or_default())
                    .flat_map(|d| d["CDIDeviceIDs"].as_array().cloned().unwrap_or_default())
                    .map(|x| s(&x))
                    .collect();
                // The kubelet's claim state (Recorded, PartlyPrepared, Prepared).
                let state = c["state"].as_str().unwrap_or("Allocated");
                vec![
                    format!("{}/{}", s(&c["namespace"]), s(&c["name"])),
                    state.to_string(),
                    if devices.is_empty() { "-".into() } else { devices.join(",") },
                    if cdi.is_empty() { "-".into() } else { cdi.join(",") },
                    match c["pods"].as_array().filter(|a| !a.is_empty()) {
                        Some(uids) => uids
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|u| pod_label(u, &names))
                            .collect::<Vec<_>>()
                            .join(","),
                        None => "-".into(),
                    },
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(&["CLAIM", "STATE", "DEVICES", "CDI IDS", "PODS"], &rows));
        out.push('\n');
    }
    // Each container's allocatedResourcesStatus (KEP-4680): one row per device.
    let rows: Vec<Vec<String>> = n
        .dra_pods
        .iter()
        .flat_map(|p| {
            let pod = s(&p["pod"]);
            p["allocatedResourcesStatus"].as_object().into_iter().flatten().flat_map(move |(ctr, statuses)| {
                let pod = pod.clone();
                statuses.as_array().cloned().unwrap_or_default().into_iter().flat_map(move |st| {
                    let (pod, ctr, name) = (pod.clone(), ctr.clone(), s(&st["name"]));
                    st["resources"].as_array().cloned().unwrap_or_default().into_iter().map(move |r| {
                        vec![
                            pod.clone(),
                            ctr.clone(),
                            name.clone(),
                            s(&r["resourceID"]),
                            s(&r["health"]),
                            r["message"].as_str().unwrap_or("-").to_string(),
                        ]
                    })
                })
            })
        })
        .collect();
    if !rows.is_empty() {
        out.push('\n');
        out.push_str(&table(&["POD", "CONTAINER", "RESOURCE", "RESOURCE ID", "HEALTH", "MESSAGE"], &rows));
        out.push('\n');
    }
    extended_table(n, out);
    for p in &n.dra_pods {
        if let Some(e) = p["error"].as_str() {
            out.push_str(&format!("\npod {} ({}): {e}\n", s(&p["pod"]), s(&p["phase"])));
        }
    }
    // Pods that do not run (yet): the step they are at and why they wait.
    let waiting: Vec<Vec<String>> = n
        .lifecycle
        .iter()
        .filter(|p| p["phase"] != "Running")
        .map(|p| vec![s(&p["pod"]), s(&p["phase"]), s(&p["step"]), s(&p["reason"]), s(&p["message"])])
        .collect();
    if !waiting.is_empty() {
        out.push('\n');
        out.push_str(&table(&["POD", "PHASE", "STEP", "REASON", "MESSAGE"], &waiting));
        out.push('\n');
    }
}

/// DRA-backed extended resources (KEP-5004): each pod's request mappings
/// (`status.extendedResourceClaimStatus`) with the CDI devices each container
/// gets, and a line for each container that gets none though the claim is prepared.
fn extended_table(n: &NodeStatus, out: &mut String) {
    let mut rows = Vec::new();
    let mut unserved = Vec::new();
    for p in &n.dra_pods {
        let st = &p["extendedResourceClaimStatus"];
        let claim = st["resourceClaimName"].as_str().unwrap_or("-");
        for m in st["requestMappings"].as_array().into_iter().flatten() {
            let ctr = m["containerName"].as_str().unwrap_or("-");
            let cdi: Vec<String> = p["extendedCdiDevices"][ctr]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect();
            rows.push(vec![
                p["pod"].as_str().unwrap_or("-").to_string(),
                ctr.to_string(),
                m["resourceName"].as_str().unwrap_or("-").to_string(),
                format!("{claim}/{}", m["requestName"].as_str().unwrap_or("-")),
                if cdi.is_empty() { "-".into() } else { cdi.join(",") },
            ]);
        }
        for u in p["extendedUnserved"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            unserved.push(format!("pod {}: {u}\n", p["pod"].as_str().unwrap_or("-")));
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push('\n');
    out.push_str(&table(&["POD", "CONTAINER", "EXTENDED RESOURCE", "CLAIM/REQUEST", "CDI DEVICES"], &rows));
    out.push('\n');
    for u in unserved {
        out.push('\n');
        out.push_str(&u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dra_tables_name_pods_and_summarise_health() {
        let n: NodeStatus = serde_json::from_value(serde_json::json!({
            "resources": [], "pods": [], "rejected": {}, "pluginDir": "/n/dp",
            "draDrivers": [{"driver": "gpu.example.com", "service": "v1.DRAPlugin", "endpoints": ["/n/plugins/g/dra.sock"],
                "health": ["pool-0/dev-0=Healthy", "pool-0/dev-1=Unhealthy", "pool-0/dev-2=Healthy", "pool-0/dev-3=Healthy", "pool-0/dev-4=Healthy"]}],
            "claims": [{"namespace": "ml", "name": "gpu", "pods": ["pod-1", "gone-2"],
                "allocation": [{"driver": "gpu.example.com", "pool": "pool-0", "device": "dev-0"}]}],
            "draPods": [{"uid": "pod-1", "pod": "ml/trainer", "phase": "Prepared",
                "allocatedResourcesStatus": {"main": [{"name": "claim:g/one", "resources": [
                    {"resourceID": "k8s.gpu.example.com/claim=u-dev-0", "health": "Unhealthy", "message": "ECC errors"}]}]}}]
        }))
        .unwrap();
        let mut out = String::new();
        dra_tables(&n, &mut out);
        let driver = out.lines().find(|l| l.starts_with("gpu.example.com")).unwrap();
        assert!(driver.contains("4 Healthy, 1 Unhealthy") && !driver.contains("dev-1"), "{out}");
        let claim = out.lines().find(|l| l.starts_with("ml/gpu")).unwrap();
        assert!(claim.ends_with("ml/trainer,UID gone-2"), "{out}");
        let dev = out.lines().find(|l| l.starts_with("ml/trainer")).unwrap();
        let cols: Vec<&str> = dev.split_whitespace().collect();
        assert_eq!(
            cols[..5],
            ["ml/trainer", "main", "claim:g/one", "k8s.gpu.example.com/claim=u-dev-0", "Unhealthy"],
            "{out}"
        );
        assert!(dev.ends_with("ECC errors"), "{out}");
        assert_eq!(health_summary(&[]), "-");
        assert_eq!(
            health_summary(&["p/a=Unhealthy (ECC errors)".into(), "p/b=Healthy".into()]),
            "1 Healthy, 1 Unhealthy"
        );
    }

    #[test]
    fn numa_becomes_a_protojson_string() {
        let mut r = vec![
            serde_json::json!({"devices": {"a": {"numa": 1}, "b": {"numa": null}, "c": {}, "d": {"numa": [0, 1]}}}),
        ];
        numa_as_protojson(&mut r);
        assert_eq!(r[0]["devices"]["a"]["numa"], "1");
        assert_eq!(r[0]["devices"]["d"]["numa"], serde_json::json!(["0", "1"]));
        assert!(r[0]["devices"]["b"]["numa"].is_null());
    }
}
