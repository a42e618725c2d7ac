//! The DRA-manager differential (#45 item 3): upstream's own kubelet DRA
//! manager (`k8s.io/kubernetes/pkg/kubelet/cm/dra` v1.37.2, run in process by
//! `tests/upstream/cmd/dramanager` with client-go's fake clientset) and
//! `dpctl mock-kubelet`, each against its own instance of the same real driver
//! process (`dpctl dra serve`, which fetches the claims it prepares from an API
//! server as the kubeletplugin helper does), on the same claims, pods and
//! steps (prepare a pod, unprepare it, restart the kubelet). Compared: the
//! NodePrepareResources/NodeUnprepareResources calls the driver received (claim
//! UIDs per call, in order; a failed call retried by dpctl's pod worker counts
//! once), each step's error, the checkpoint after each step (its claims; byte
//! for byte when it holds at most one claim, as upstream orders several by map
//! iteration), each reading the other's, and per container of every prepared
//! pod: GetResources' CDI devices, the PodResources view and the names and
//! resource IDs of allocatedResourcesStatus. Claims allocated with shares of
//! a device (KEP-5075) carry each result's shareID to the driver, the
//! checkpoint (`ShareID`) and PodResources (`share_id`).

use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

const DRIVER: &str = "gpu.example.com";
const NS: &str = "ml";

#[derive(Clone, Copy, Debug)]
enum Step {
    Prepare(&'static str),
    Unprepare(&'static str),
    Restart,
    /// The driver starts (and registers) now; until then it is not there.
    Register,
}

impl Step {
    fn json(self) -> Value {
        match self {
            Step::Prepare(p) => json!({"op": "prepare", "pod": p}),
            Step::Unprepare(p) => json!({"op": "unprepare", "pod": p}),
            Step::Restart => json!({"op": "restart"}),
            Step::Register => json!({"op": "register"}),
        }
    }
}

struct Case {
    name: String,
    /// Objects only dpctl reads from its manifests (the class, templates):
    /// upstream's side gets the claims dpctl generated from them.
    objects: Vec<Value>,
    claims: Vec<Value>,
    pods: Vec<Value>,
    steps: Vec<Step>,
    /// `(pod, pod claim)` of claims generated from a template.
    generated: Vec<(&'static str, &'static str)>,
    /// Extra `dra serve` flags (faults).
    driver: Vec<&'static str>,
    /// The kubelet's `--feature-gates` on both sides ("" for the version's defaults).
    gates: &'static str,
}

impl Case {
    /// Whether the driver starts at a [`Step::Register`] only.
    fn late_driver(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::Register))
    }
}

/// A ResourceClaim already allocated (`(request, device)` each result) and
/// reserved for `pods`.
fn claim(name: &str, uid: &str, results: &[(&str, &str)], pods: &[&str]) -> Value {
    let mut requests: Vec<&str> = results.iter().map(|(r, _)| r.split('/').next().unwrap_or(r)).collect();
    requests.dedup();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"devices": {"requests": requests.iter().map(|r| json!({"name": r, "exactly": {"deviceClassName": DRIVER}})).collect::<Vec<_>>()}},
        "status": {
            "allocation": {"devices": {"results": results.iter().map(|(r, d)| json!({"request": r, "driver": DRIVER, "pool": "pool-0", "device": d})).collect::<Vec<_>>()}},
            "reservedFor": pods.iter().map(|p| json!({"resource": "pods", "name": p, "uid": format!("{p}-uid")})).collect::<Vec<_>>(),
        }
    })
}

/// A ResourceClaim allocated with shares of devices (consumable capacity,
/// KEP-5075): each result `(request, device, shareID)` consumes 1Gi of the
/// device's memory, as the scheduler writes a share.
fn shared_claim(name: &str, uid: &str, results: &[(&str, &str, &str)], pods: &[&str]) -> Value {
    let plain: Vec<(&str, &str)> = results.iter().map(|(r, d, _)| (*r, *d)).collect();
    let mut c = claim(name, uid, &plain, pods);
    for (r, (_, _, share)) in
        c["status"]["allocation"]["devices"]["results"].as_array_mut().into_iter().flatten().zip(results)
    {
        r["shareID"] = json!(share);
        r["consumedCapacity"] = json!({"memory": "1Gi"});
    }
    c
}

/// A pod: its claims `(pod claim, claim name)` (a name starting with
/// `template:` names a ResourceClaimTemplate), its containers
/// `(name, [(pod claim, request)])`.
fn pod(name: &str, claims: &[(&str, &str)], containers: &[(&str, &[(&str, &str)])]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": format!("{name}-uid")},
        "spec": {
            "resourceClaims": claims.iter().map(|(pc, c)| match c.strip_prefix("template:") {
                Some(t) => json!({"name": pc, "resourceClaimTemplateName": t}),
                None => json!({"name": pc, "resourceClaimName": c}),
            }).collect::<Vec<_>>(),
            "containers": containers.iter().map(|(n, refs)| json!({"name": n, "image": "x", "resources": {"claims":
                refs.iter().map(|(pc, r)| if r.is_empty() { json!({"name": pc}) } else { json!({"name": pc, "request": r}) }).collect::<Vec<_>>()}})).collect::<Vec<_>>(),
        }
    })
}

/// A claim `claim` reserved for PodGroup `group` (KEP-5729), not for a pod.
fn group_claim(claim: Value, group: &str) -> Value {
    let mut c = claim;
    c["status"]["reservedFor"] = json!([{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group,
        "uid": format!("{group}-group-uid")}]);
    c
}

/// `pod` as a member of PodGroup `group` (`spec.schedulingGroup.podGroupName`).
fn in_group(pod: Value, group: &str) -> Value {
    let mut p = pod;
    p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    p
}

const WORKLOAD_CLAIMS: &str = "DRAWorkloadResourceClaims=true,GenericWorkload=true";

/// A pod whose containers ask for the DRA-backed extended resource
/// `example.com/gpu` (KEP-5004): `(container, count)`.
fn extended_pod(name: &str, containers: &[(&str, u32)]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": format!("{name}-uid")},
        "spec": {"containers": containers.iter().map(|(n, k)| json!({"name": n, "image": "x",
            "resources": {"limits": {EXTENDED: k}, "requests": {EXTENDED: k}}})).collect::<Vec<_>>()}
    })
}

const EXTENDED: &str = "example.com/gpu";

fn extended_class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu-class"},
        "spec": {"extendedResourceName": EXTENDED, "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}})
}

fn class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}})
}

fn template(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "one", "exactly": {"deviceClassName": DRIVER}}]}}}})
}

fn cases() -> Vec<Case> {
    use Step::*;
    let whole: &[(&str, &str)] = &[("g", "")];
    vec![
        Case {
            name: "pod-claim".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-000000000001", &[("one", "dev-1")], &["a"])],
            pods: vec![pod("a", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            name: "template-claim".into(),
            objects: vec![class(), template("gpu-template")],
            claims: vec![],
            pods: vec![pod("a", &[("g", "template:gpu-template")], &[("main", whole)])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![("a", "g")],
            driver: vec![],
            gates: "",
        },
        Case {
            name: "two-containers-share-a-claim".into(),
            objects: vec![],
            claims: vec![claim(
                "gpu",
                "11111111-0000-0000-0000-000000000002",
                &[("one", "dev-0"), ("one", "dev-2")],
                &["a"],
            )],
            pods: vec![pod("a", &[("g", "gpu")], &[("c0", whole), ("c1", whole), ("plain", &[])])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // TestUpdateAllocatedResourcesStatus_Subrequest, TestGetResources:
            // each container names one request of the claim.
            name: "containers-use-one-request-each".into(),
            objects: vec![],
            claims: vec![claim(
                "gpu",
                "11111111-0000-0000-0000-000000000003",
                &[("r0", "dev-0"), ("r1", "dev-1"), ("r1", "dev-2")],
                &["a"],
            )],
            pods: vec![pod(
                "a",
                &[("g", "gpu")],
                &[("c0", &[("g", "r0")]), ("c1", &[("g", "r1")]), ("both", &[("g", "r0"), ("g", "r1")])],
            )],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            name: "two-claims-in-one-pod".into(),
            objects: vec![],
            claims: vec![
                claim("gpu-a", "11111111-0000-0000-0000-000000000004", &[("one", "dev-0")], &["a"]),
                claim("gpu-b", "11111111-0000-0000-0000-000000000005", &[("one", "dev-3")], &["a"]),
            ],
            pods: vec![pod(
                "a",
                &[("x", "gpu-a"), ("y", "gpu-b")],
                &[("main", &[("x", ""), ("y", "")]), ("side", &[("y", "")])],
            )],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // Prepared once for two pods, unprepared after the last.
            name: "a-claim-shared-by-two-pods".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-000000000006", &[("one", "dev-1")], &["a", "b"])],
            pods: vec![pod("a", &[("g", "gpu")], &[("main", whole)]), pod("b", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("a"), Prepare("b"), Unprepare("a"), Unprepare("b")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // A pod reservedFor does not name: refused before anything is recorded.
            name: "a-pod-the-claim-is-not-reserved-for".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-000000000007", &[("one", "dev-1")], &["a"])],
            pods: vec![pod("b", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("b"), Unprepare("b")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // The driver fails the claim: recorded with the pod, no devices;
            // unprepared when the pod goes.
            name: "the-driver-fails-prepare".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-000000000008", &[("one", "dev-1")], &["a"])],
            pods: vec![pod("a", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec!["--fault", "prepare-error=device on fire"],
            gates: "",
        },
        Case {
            // KEP-5004: the special claim the scheduler makes for the pod's
            // extended resources; each container gets its own request's
            // devices (the c0 → container-0-request-0, c1 → container-1-request-0).
            name: "dra-backed-extended-resources".into(),
            objects: vec![extended_class()],
            claims: vec![],
            pods: vec![extended_pod("a", &[("c0", 1), ("c1", 2)])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // The driver answers other request names than the mapping's
            // (kubernetes-sigs/dra-driver-cpu#197/#202): the containers are
            // given no CDI device; a container naming the whole claim would.
            name: "extended-resources-with-foreign-request-names".into(),
            objects: vec![extended_class()],
            claims: vec![],
            pods: vec![extended_pod("a", &[("c0", 1), ("c1", 2)])],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec!["--fault", "foreign-request-names"],
            gates: "",
        },
        Case {
            // No driver yet: refused before anything is recorded; the driver
            // registers; the pod is prepared (dpctl's pod worker retries).
            name: "the-driver-registers-late".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-00000000000a", &[("one", "dev-3")], &["a"])],
            pods: vec![pod("a", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("a"), Register, Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // ShareID (KEP-5075, kubernetes#134520): two claims, each a share
            // of dev-0, in two pods; the driver answers each share's ID, which
            // the checkpoint keeps (ShareID) and PodResources lists (share_id).
            name: "two-claims-share-a-device".into(),
            objects: vec![],
            claims: vec![
                shared_claim(
                    "gpu-a",
                    "11111111-0000-0000-0000-00000000000b",
                    &[("one", "dev-0", "5f0c6a38-94a5-4c4e-9d0b-1e2f3a4b5c6d")],
                    &["a"],
                ),
                shared_claim(
                    "gpu-b",
                    "11111111-0000-0000-0000-00000000000c",
                    &[("one", "dev-0", "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a")],
                    &["b"],
                ),
            ],
            pods: vec![
                pod("a", &[("g", "gpu-a")], &[("main", whole)]),
                pod("b", &[("g", "gpu-b")], &[("main", whole)]),
            ],
            steps: vec![Prepare("a"), Prepare("b"), Restart, Unprepare("a"), Unprepare("b")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // One claim, two requests, each a share of dev-1: two devices in
            // the answer with the same name, told apart by their ShareID; each
            // container names one request.
            name: "one-claim-two-shares-of-a-device".into(),
            objects: vec![],
            claims: vec![shared_claim(
                "gpu",
                "11111111-0000-0000-0000-00000000000d",
                &[
                    ("one", "dev-1", "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"),
                    ("two", "dev-1", "f0e1d2c3-b4a5-4968-8776-655443322110"),
                ],
                &["a"],
            )],
            pods: vec![pod(
                "a",
                &[("g", "gpu")],
                &[("c-one", &[("g", "one")]), ("c-two", &[("g", "two")]), ("both", whole)],
            )],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // A kubelet restart from the checkpoint with the pod running, then
            // a second pod on the same claim, then both go.
            name: "a-restart-from-the-checkpoint".into(),
            objects: vec![],
            claims: vec![claim("gpu", "11111111-0000-0000-0000-000000000009", &[("one", "dev-2")], &["a", "b"])],
            pods: vec![pod("a", &[("g", "gpu")], &[("main", whole)]), pod("b", &[("g", "gpu")], &[("main", whole)])],
            steps: vec![Prepare("a"), Restart, Prepare("b"), Unprepare("a"), Unprepare("b")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
        Case {
            // KEP-5729 (IsReservedForPod with DRAWorkloadResourceClaims): a
            // claim reserved for PodGroup team serves both pods of the group,
            // prepared once and unprepared after the last; a pod of another
            // group is refused.
            name: "a-claim-reserved-for-a-pod-group".into(),
            objects: vec![],
            claims: vec![group_claim(
                claim("gpu", "11111111-0000-0000-0000-00000000000e", &[("one", "dev-1")], &[]),
                "team",
            )],
            pods: vec![
                in_group(pod("a", &[("g", "gpu")], &[("main", whole)]), "team"),
                in_group(pod("b", &[("g", "gpu")], &[("main", whole)]), "team"),
                in_group(pod("c", &[("g", "gpu")], &[("main", whole)]), "other"),
            ],
            steps: vec![
                Prepare("a"),
                Prepare("b"),
                Prepare("c"),
                Unprepare("c"),
                Restart,
                Unprepare("a"),
                Unprepare("b"),
            ],
            generated: vec![],
            driver: vec![],
            gates: WORKLOAD_CLAIMS,
        },
        Case {
            // The same claim with the gate off (1.37's default): a pod of the
            // group is not one the claim is reserved for.
            name: "a-pod-group-claim-with-the-gate-off".into(),
            objects: vec![],
            claims: vec![group_claim(
                claim("gpu", "11111111-0000-0000-0000-00000000000f", &[("one", "dev-2")], &[]),
                "team",
            )],
            pods: vec![in_group(pod("a", &[("g", "gpu")], &[("main", whole)]), "team")],
            steps: vec![Prepare("a"), Unprepare("a")],
            generated: vec![],
            driver: vec![],
            gates: "",
        },
    ]
}

/// What one side did.
#[derive(Debug, Default)]
struct Side {
    /// `{op, claims, errors}` per call the driver received.
    calls: Vec<Value>,
    /// Per step: `{op, pod, error, checkpoint, pods}`.
    steps: Vec<Value>,
}

/// The driver's JSON log: one `{op, claims, errors}` per call; consecutive
/// identical failed calls (a retry) count once; an unprepare's claims sorted.
fn calls(log: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for v in log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let op = match v["event"].as_str() {
            Some(op @ ("prepare" | "unprepare")) => op,
            _ => continue,
        };
        // The claims of an unprepare call in UID order: upstream's are in Go's
        // map order (claiminfo.go claimNamesForPod iterates the cache's map).
        let mut claims = v["claims"].as_array().cloned().unwrap_or_default();
        if op == "unprepare" {
            claims.sort_by_key(|c| c.as_str().unwrap_or_default().to_string());
        }
        let call = json!({"op": op, "claims": claims, "errors": v.get("errors").cloned().unwrap_or(json!([]))});
        let failed = call["errors"].as_array().is_some_and(|e| !e.is_empty());
        if failed && out.last() == Some(&call) {
            continue;
        }
        out.push(call);
    }
    out
}

fn spawn_driver(root: &Path, kubeconfig: &Path, extra: &[&str]) -> (tokio::process::Child, Tail) {
    let mut c = dra_serve_publishing(root, DRIVER, kubeconfig, "dpctl-node");
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail)
}

/// The checkpoint's claims (Data parsed, sorted by name), or `Null` for no file.
fn checkpoint_claims(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    let outer: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let data: Value = outer["Data"].as_str().and_then(|d| serde_json::from_str(d).ok()).unwrap_or(Value::Null);
    let mut list = data["ClaimInfoStateList"].as_array().cloned().unwrap_or_default();
    list.sort_by_key(|c| c["ClaimName"].as_str().unwrap_or_default().to_string());
    json!(list)
}

fn lines_of<'a>(seen: &'a str, event: &'a str, pod: Option<&'a str>) -> impl Iterator<Item = Value> + 'a {
    seen.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(move |v| v["event"] == event && pod.is_none_or(|p| v["pod"] == p))
}

fn count(seen: &str, event: &str, pod: Option<&str>) -> usize {
    lines_of(seen, event, pod).count()
}

/// PodResources' dynamic resources of one container, as the oracle prints them.
fn normalize_dynamic(list: &Value) -> Value {
    let mut out: Vec<Value> = list
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| {
            let resources: Vec<Value> = d["claimResources"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| {
                    let mut v = json!({"driver": r["driverName"], "pool": r["poolName"], "device": r["deviceName"],
                        "cdiDevices": r["cdiDevices"].as_array().cloned().unwrap_or_default().iter().map(|c| c["name"].clone()).collect::<Vec<_>>()});
                    if let Some(sh) = r["shareId"].as_str() {
                        v["shareID"] = json!(sh);
                    }
                    v
                })
                .collect();
            json!({"claimName": d["claimName"], "claimNamespace": d["claimNamespace"], "claimResources": resources})
        })
        .collect();
    out.sort_by_key(|d| d["claimName"].as_str().unwrap_or_default().to_string());
    json!(out)
}

/// `dpctl node -o json` of the mock kubelet of `t`.
async fn dpctl_node(t: &DraTree) -> Value {
    let node = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins")), "-o", "json"]).await;
    serde_json::from_str(&node.stdout).unwrap_or(Value::Null)
}

/// Pod `NS/name` of a `dpctl node` answer (its DRA pods).
fn node_pod<'a>(node: &'a Value, name: &str) -> Option<&'a Value> {
    node["draPods"]
        .as_array()
        .or(node["pods"].as_array())
        .into_iter()
        .flatten()
        .find(|x| x["pod"] == format!("{NS}/{name}"))
}

/// dpctl's view of the prepared pods, in the oracle's shape.
async fn dpctl_pods(t: &DraTree, active: &BTreeMap<String, Value>) -> Value {
    let pr = dpctl(&["podresources", "list", "--socket", s(&t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    let pr: Value = serde_json::from_str(&pr.stdout).unwrap_or(Value::Null);
    let node = dpctl_node(t).await;
    let mut out = serde_json::Map::new();
    for (name, p) in active {
        let pr_pod = pr["podResources"].as_array().into_iter().flatten().find(|x| x["name"] == name.as_str());
        let node_pod = node_pod(&node, name);
        let mut ctrs = serde_json::Map::new();
        for c in p["spec"]["containers"].as_array().into_iter().flatten() {
            let cname = c["name"].as_str().unwrap_or_default();
            let dynamic = pr_pod
                .and_then(|x| x["containers"].as_array())
                .into_iter()
                .flatten()
                .find(|x| x["name"] == cname)
                .map(|x| x["dynamicResources"].clone())
                .unwrap_or(json!([]));
            let mut cdi: Vec<Value> =
                node_pod.and_then(|x| x["cdiDevices"][cname].as_array().cloned()).unwrap_or_default();
            cdi.sort_by_key(|v| v.as_str().unwrap_or_default().to_string());
            let mut status: Vec<Value> = node_pod
                .and_then(|x| x["allocatedResourcesStatus"][cname].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .map(|e| {
                    let mut ids: Vec<Value> =
                        e["resources"].as_array().into_iter().flatten().map(|r| r["resourceID"].clone()).collect();
                    ids.sort_by_key(|v| v.as_str().unwrap_or_default().to_string());
                    json!({"name": e["name"], "resourceIDs": ids})
                })
                .collect();
            status.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_string());
            ctrs.insert(
                cname.to_string(),
                json!({"cdi": cdi, "podResources": normalize_dynamic(&dynamic), "status": status}),
            );
        }
        out.insert(name.clone(), Value::Object(ctrs));
    }
    Value::Object(out)
}

/// A plain-http GET of the local API server (`--api-server-insecure`).
async fn api_get(addr: &str, path: &str) -> Value {
    api_call(addr, "GET", path, None).await
}

/// One request to the mock kubelet's API server (plain HTTP); the answer's body.
async fn api_call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return Value::Null };
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return Value::Null;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf).await;
    buf.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok()).unwrap_or(Value::Null)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn pod_named<'a>(c: &'a Case, name: &str) -> &'a Value {
    c.pods.iter().find(|p| p["metadata"]["name"] == name).unwrap_or_else(|| panic!("{}: no pod {name}", c.name))
}

/// The claims a pod's prepare prepares: its own and the special claim of
/// its extended resources.
fn claims_of(p: &Value) -> usize {
    p["spec"]["resourceClaims"].as_array().map(Vec::len).unwrap_or(0) + usize::from(is_extended(p))
}

fn is_extended(p: &Value) -> bool {
    p["spec"]["containers"].as_array().into_iter().flatten().any(|c| c["resources"]["limits"].get(EXTENDED).is_some())
}

/// A claim dpctl made for a pod (from a template, or the special claim of
/// its extended resources), as its API server serves it.
struct Generated {
    pod: String,
    /// The pod claim it is for; `None`: the special claim.
    pod_claim: Option<String>,
    claim: Value,
    /// `status.extendedResourceClaimStatus.requestMappings` of the special claim.
    mappings: Vec<Value>,
}

/// dpctl's side: `dpctl mock-kubelet` with its API server (plain http, a
/// fixed port: the driver keeps its kubeconfig over a restart) and the
/// driver; pods dropped into (and removed from) the manifest directory.
/// Also the claims it generated from templates, as its API server serves them.
async fn dpctl_side(c: &Case) -> (Side, Vec<Generated>) {
    let t = DraTree::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["--api-server", addr.as_str(), "--api-server-insecure"];
    if !c.gates.is_empty() {
        args.extend(["--feature-gates", c.gates]);
    }
    let mut kubelet = mock_kubelet_on(&t.root, &args).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let mut driver = None;
    if !c.late_driver() {
        driver = Some(spawn_driver(&t.root, &t.p("kubeconfig"), &c.driver));
        log.wait_for("\"event\":\"dra-registered\"", 1).await;
    }
    // The PodGroups claims are reserved for, stored first: dpctl's control
    // plane, like upstream's resourceclaim controller, drops a reservation
    // of a PodGroup that is not there (upstream's side has no controller);
    // with the gate off it serves no PodGroups and keeps the reservation.
    let mut claims = c.claims.clone();
    for claim in claims.iter_mut().filter(|_| c.gates.contains("DRAWorkloadResourceClaims=true")) {
        for r in claim["status"]["reservedFor"].as_array_mut().into_iter().flatten() {
            if r["resource"] != "podgroups" {
                continue;
            }
            let group = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": r["name"], "namespace": NS}, "spec": {"schedulingPolicy": {"basic": {}}}});
            let path = format!("/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups");
            let stored = api_call(&addr, "POST", &path, Some(&group)).await;
            assert!(stored["metadata"]["uid"].is_string(), "{}: PodGroup not stored: {stored}", c.name);
            r["uid"] = stored["metadata"]["uid"].clone();
        }
    }
    let objects: Vec<&Value> = c.objects.iter().chain(&claims).collect();
    if !objects.is_empty() {
        let docs: String = objects.iter().map(|v| format!("---\n{v}\n")).collect();
        t.write("objects.yaml", &docs);
        log.wait_for("\"event\":\"dra-object\"", objects.len()).await;
    }
    let mut side = Side::default();
    let mut generated = Vec::new();
    let mut active: BTreeMap<String, Value> = BTreeMap::new();
    // Pod → its claim-prepared count when its prepare failed.
    let mut failed_at: BTreeMap<&str, usize> = BTreeMap::new();
    for step in &c.steps {
        let seen = log.seen();
        let mut error = Value::Null;
        match *step {
            Step::Prepare(name) => {
                let p = pod_named(c, name);
                let key = format!("{NS}/{name}");
                // A pod already there (its prepare failed) is retried by the
                // pod worker: its outcome now is the next success (which may
                // have come already).
                let retried = t.p(&format!("manifests/{name}.yaml")).exists();
                let ok0 = match failed_at.get(name) {
                    Some(n) if retried => *n,
                    _ => count(&seen, "claim-prepared", Some(&key)),
                };
                let failed0 = count(&seen, "claim-prepare-failed", Some(&key));
                let want = claims_of(p);
                if !retried {
                    t.write(&format!("{name}.yaml"), &p.to_string());
                }
                let waited = log
                    .wait_until(30, |s| {
                        count(s, "claim-prepared", Some(&key)) >= ok0 + want
                            || (!retried && count(s, "claim-prepare-failed", Some(&key)) > failed0)
                    })
                    .await;
                if let Err(seen) = waited {
                    panic!("{}: dpctl: {step:?} had no outcome within 30s:\n{seen}", c.name);
                }
                let now = log.seen();
                let failed = lines_of(&now, "claim-prepare-failed", Some(&key)).nth(failed0).filter(|_| !retried);
                match failed {
                    Some(f) => {
                        error = f["error"].clone();
                        failed_at.insert(name, ok0);
                    }
                    None => {
                        active.insert(name.to_string(), p.clone());
                    }
                }
                for (gp, gc) in c.generated.iter().filter(|(gp, _)| *gp == name) {
                    let n = format!("{gp}-{gc}");
                    let claim =
                        api_get(&addr, &format!("/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{n}")).await;
                    generated.push(Generated {
                        pod: gp.to_string(),
                        pod_claim: Some(gc.to_string()),
                        claim,
                        mappings: vec![],
                    });
                }
                let special = lines_of(&now, "extended-resource-claim", Some(&key)).last();
                if let Some(x) = special {
                    let n = x["claim"].as_str().unwrap_or_default();
                    let claim =
                        api_get(&addr, &format!("/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/{n}")).await;
                    // `container/resource→request`, each mapping.
                    let mappings = x["mappings"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|m| {
                            let (container, rest) = m.as_str()?.split_once('/')?;
                            let (resource, request) = rest.rsplit_once('→')?;
                            Some(json!({"containerName": container, "resourceName": resource, "requestName": request}))
                        })
                        .collect();
                    generated.push(Generated { pod: name.to_string(), pod_claim: None, claim, mappings });
                }
            }
            Step::Unprepare(name) => {
                let key = format!("{NS}/{name}");
                let removed0 = count(&seen, "pod-removed", Some(&key));
                let failed0 = count(&seen, "claim-unprepare-failed", Some(&key));
                std::fs::remove_file(t.p(&format!("manifests/{name}.yaml"))).unwrap();
                if let Err(seen) = log.wait_until(30, |s| count(s, "pod-removed", Some(&key)) > removed0).await {
                    panic!("{}: dpctl: {step:?}: the pod was not removed within 30s:\n{seen}", c.name);
                }
                let now = log.seen();
                let failed = lines_of(&now, "claim-unprepare-failed", Some(&key)).nth(failed0);
                match failed {
                    Some(f) => error = f["error"].clone(),
                    None => {
                        active.remove(name);
                    }
                }
            }
            Step::Register => {
                let registered0 = count(&seen, "dra-registered", None);
                driver = Some(spawn_driver(&t.root, &t.p("kubeconfig"), &c.driver));
                if let Err(seen) = log.wait_until(30, |s| count(s, "dra-registered", None) > registered0).await {
                    panic!("{}: dpctl: the driver did not register within 30s:\n{seen}", c.name);
                }
            }
            Step::Restart => {
                let (restarted0, registered0, prepared0) = (
                    count(&seen, "restarted", None),
                    count(&seen, "dra-registered", None),
                    count(&seen, "claim-prepared", None),
                );
                let want: usize = active.values().map(claims_of).sum();
                let pid = kubelet.id().unwrap().to_string();
                assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
                let waited = log
                    .wait_until(30, |s| {
                        count(s, "restarted", None) > restarted0
                            && count(s, "dra-registered", None) > registered0
                            && count(s, "claim-prepared", None) >= prepared0 + want
                    })
                    .await;
                if let Err(seen) = waited {
                    panic!("{}: dpctl: the restart did not settle within 30s:\n{seen}", c.name);
                }
            }
        }
        let checkpoint = std::fs::read_to_string(t.p("dra_manager_state")).unwrap_or_default();
        let mut v = step.json();
        // A driver registering while a pod's prepare awaits its retry: dpctl's
        // pod worker retries at once (upstream's oracle runs no pod worker;
        // its next prepare step does it), so the checkpoint read now may
        // already hold the retry's claims — or not yet. The next step compares
        // the settled state.
        if matches!(step, Step::Register) && !failed_at.is_empty() {
            v["unsettled"] = json!(true);
        }
        v["error"] = error;
        v["checkpoint"] = json!(checkpoint);
        v["pods"] = dpctl_pods(&t, &active).await;
        side.steps.push(v);
    }
    stop_tailed(kubelet, log).await;
    if let Some((driver, dlog)) = driver {
        side.calls = calls(&stop_tailed(driver, dlog).await.stdout);
    }
    (side, generated)
}

/// The oracle `bin` on `scenario` with kubelet root `root`, once it is
/// ready for the driver (`{"ready":true}`); its stdout tailed.
async fn start_oracle(bin: &Path, root: &Path, scenario: &Value) -> (tokio::process::Child, Tail) {
    let file = root.join("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let mut oracle = tokio::process::Command::new(bin)
        .args(["-scenario", s(&file), "-dir", s(root)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = Tail::stdout(&mut oracle);
    out.wait_for("{\"ready\":true}", 1).await;
    (oracle, out)
}

/// Upstream's side: the oracle with its own instance of the driver.
async fn upstream_side(bin: &Path, c: &Case, generated: &[Generated]) -> Side {
    let d = tmp();
    let root = d.path();
    std::fs::create_dir_all(root.join("plugins_registry")).unwrap();
    let mut claims: Vec<Value> = c.claims.clone();
    let mut pods: Vec<Value> = c.pods.clone();
    // The claims dpctl generated, as the resourceclaim controller (from a
    // template: owned by the pod, named in its status) or the scheduler (the
    // special claim: status.extendedResourceClaimStatus) leave them, reserved
    // for the pod.
    for g in generated {
        let mut claim = g.claim.clone();
        let p = pods.iter_mut().find(|p| p["metadata"]["name"] == g.pod.as_str()).unwrap();
        let uid = p["metadata"]["uid"].clone();
        claim["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": g.pod, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}]);
        claim["status"]["reservedFor"] = json!([{"resource": "pods", "name": g.pod, "uid": uid}]);
        match &g.pod_claim {
            Some(pc) => {
                p["status"]["resourceClaimStatuses"] =
                    json!([{"name": pc, "resourceClaimName": claim["metadata"]["name"]}])
            }
            None => {
                p["status"]["extendedResourceClaimStatus"] =
                    json!({"resourceClaimName": claim["metadata"]["name"], "requestMappings": g.mappings})
            }
        }
        claims.push(claim);
    }
    let steps: Vec<Value> = c.steps.iter().map(|s| s.json()).collect();
    let gates: serde_json::Map<String, Value> = c
        .gates
        .split(',')
        .filter_map(|g| g.split_once('='))
        .map(|(k, v)| (k.to_string(), json!(v == "true")))
        .collect();
    let scenario =
        json!({"claims": claims, "pods": pods, "steps": steps, "lateDriver": c.late_driver(), "featureGates": gates});
    let (mut oracle, mut out) = start_oracle(bin, root, &scenario).await;
    if c.late_driver() {
        if let Err(seen) = out.wait_until(60, |s| s.contains("{\"waiting\":\"driver\"}")).await {
            panic!("{}: the oracle never waited for the driver:\n{seen}", c.name);
        }
    }
    let (driver, dlog) = spawn_driver(root, &root.join("kubeconfig"), &c.driver);
    if let Err(seen) = out.wait_until(90, |s| s.lines().any(|l| l.starts_with("{\"steps\""))).await {
        panic!("{}: the oracle gave no answer within 90s:\n{seen}", c.name);
    }
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), oracle.wait()).await;
    assert!(matches!(status, Ok(Ok(s)) if s.success()), "{}: the oracle: {status:?}", c.name);
    let answer: Value = out
        .seen()
        .lines()
        .find(|l| l.starts_with("{\"steps\""))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    assert!(answer["error"].is_null(), "{}: the oracle failed: {}", c.name, answer["error"]);
    let dlog = stop_tailed(driver, dlog).await;
    let mut side = Side { calls: calls(&dlog.stdout), steps: vec![] };
    for st in answer["steps"].as_array().into_iter().flatten() {
        let mut v = json!({"op": st["op"], "error": st.get("error").cloned().unwrap_or(Value::Null), "checkpoint": st["checkpoint"], "pods": st["pods"]});
        if let Some(p) = st.get("pod") {
            v["pod"] = p.clone();
        }
        side.steps.push(v);
    }
    side
}

/// Upstream's reading of a checkpoint file (`dramanager -read`).
async fn upstream_reads(bin: &Path, text: &str) -> Value {
    let d = tmp();
    let f = d.path().join("dra_manager_state");
    std::fs::write(&f, text).unwrap();
    let out = tokio::process::Command::new(bin).args(["-read", s(&f)]).output().await.unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Every difference of dpctl's side from upstream's.
async fn differences(bin: &Path, c: &Case, up: &Side, dp: &Side) -> Vec<String> {
    let mut diffs = Vec::new();
    if up.calls != dp.calls {
        diffs.push(format!("driver calls:\n  upstream {}\n  dpctl    {}", json!(up.calls), json!(dp.calls)));
    }
    for (i, (u, d)) in up.steps.iter().zip(&dp.steps).enumerate() {
        let at = format!("step {i} {}", Step::json(c.steps[i]));
        if u["error"] != d["error"] {
            diffs.push(format!("{at}: error:\n  upstream {}\n  dpctl    {}", u["error"], d["error"]));
        }
        let (ucp, dcp) = (u["checkpoint"].as_str().unwrap_or(""), d["checkpoint"].as_str().unwrap_or(""));
        let (uc, dc) = (checkpoint_claims(ucp), checkpoint_claims(dcp));
        let settled = d["unsettled"] != true;
        if settled && uc != dc {
            diffs.push(format!("{at}: checkpoint claims:\n  upstream {uc}\n  dpctl    {dc}"));
        } else if settled && uc.as_array().is_some_and(|l| l.len() <= 1) && ucp != dcp {
            diffs.push(format!("{at}: checkpoint bytes:\n  upstream {ucp}\n  dpctl    {dcp}"));
        }
        // Each reads the other's.
        if !dcp.is_empty() {
            let read = upstream_reads(bin, dcp).await;
            let mut got = read["claims"].as_array().cloned().unwrap_or_default();
            got.sort_by_key(|c| c["ClaimName"].as_str().unwrap_or_default().to_string());
            let want = checkpoint_claims(dcp);
            // Go's sets.Set and nil slices round-trip as written.
            if json!(got) != want {
                diffs.push(format!("{at}: upstream reads dpctl's checkpoint as {read}, dpctl wrote {want}"));
            }
        }
        if !ucp.is_empty() {
            match dpctl::client::dra_checkpoint::decode(ucp.as_bytes()) {
                Ok(entries) => {
                    let again = String::from_utf8(dpctl::client::dra_checkpoint::encode(&entries)).unwrap_or_default();
                    if checkpoint_claims(&again) != uc {
                        diffs.push(format!("{at}: dpctl reads upstream's checkpoint as {}", checkpoint_claims(&again)));
                    }
                }
                Err(e) => diffs.push(format!("{at}: dpctl cannot read upstream's checkpoint: {e}")),
            }
        }
        if settled && u["pods"] != d["pods"] {
            diffs.push(format!("{at}: pods:\n  upstream {}\n  dpctl    {}", u["pods"], d["pods"]));
        }
    }
    if up.steps.len() != dp.steps.len() {
        diffs.push(format!("steps: upstream {}, dpctl {}", up.steps.len(), dp.steps.len()));
    }
    diffs
}

async fn run_case(bin: &Path, c: &Case) -> Vec<String> {
    let (dp, generated) = dpctl_side(c).await;
    let up = upstream_side(bin, c, &generated).await;
    eprintln!(
        "case {}: upstream {} call(s) {}, {} step(s); dpctl {} call(s), {} step(s)",
        c.name,
        up.calls.len(),
        json!(up.calls),
        up.steps.len(),
        dp.calls.len(),
        dp.steps.len()
    );
    if std::env::var_os("DPCTL_DRAM_SHOW").is_some() {
        eprintln!("upstream steps: {}\ndpctl steps: {}", json!(up.steps), json!(dp.steps));
    }
    differences(bin, c, &up, &dp).await
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const POD_NAMES: [&str; 3] = ["a", "b", "c"];

/// Scenario `seed`: one or two allocated claims over the driver's four
/// devices (one or two requests each), one to three pods each using some of
/// them (containers naming a claim whole or one request), prepared in a
/// random order with a kubelet restart now and then, then unprepared in a
/// random order.
fn generated(seed: u64) -> Case {
    let mut r = Rng(seed);
    let mut devices: Vec<&str> = vec!["dev-0", "dev-1", "dev-2", "dev-3"];
    for i in (1..devices.len()).rev() {
        devices.swap(i, r.below(i + 1));
    }
    let n_claims = 1 + r.below(2);
    let n_pods = 1 + r.below(3);
    // Claim i: its results (request, device), its pods.
    let mut results: Vec<Vec<(String, &str)>> = Vec::new();
    for _ in 0..n_claims {
        let k = 1 + r.below(2);
        let mut v = Vec::new();
        for j in 0..k {
            let Some(d) = devices.pop() else { break };
            let request = if j > 0 && r.chance(50) { "r1" } else { "r0" };
            v.push((request.to_string(), d));
        }
        results.push(v);
    }
    let mut users: Vec<Vec<&str>> = vec![Vec::new(); n_claims];
    let mut pods = Vec::new();
    for (p, name) in POD_NAMES.iter().enumerate().take(n_pods) {
        let mine: Vec<usize> = (0..n_claims).filter(|_| r.chance(70)).collect();
        let mine = if mine.is_empty() { vec![p % n_claims] } else { mine };
        for &i in &mine {
            users[i].push(name);
        }
        let pod_claims: Vec<(String, String)> = mine.iter().map(|i| (format!("x{i}"), format!("gpu-{i}"))).collect();
        let n_ctr = 1 + r.below(2);
        let mut ctrs: Vec<(String, Vec<(String, String)>)> = Vec::new();
        for c in 0..n_ctr {
            let mut refs = Vec::new();
            for &i in &mine {
                // Each claim now and then, the first container always one.
                let take = r.chance(75) || (c == 0 && refs.is_empty());
                if !take {
                    continue;
                }
                let requests: Vec<&String> = results[i].iter().map(|(q, _)| q).collect();
                let request = if r.chance(40) { requests[r.below(requests.len())].clone() } else { String::new() };
                refs.push((format!("x{i}"), request));
            }
            ctrs.push((format!("c{c}"), refs));
        }
        let pc: Vec<(&str, &str)> = pod_claims.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let refs: Vec<Vec<(&str, &str)>> =
            ctrs.iter().map(|(_, v)| v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()).collect();
        let cs: Vec<(&str, &[(&str, &str)])> =
            ctrs.iter().zip(&refs).map(|((n, _), v)| (n.as_str(), v.as_slice())).collect();
        pods.push(pod(name, &pc, &cs));
    }
    let claims = results
        .iter()
        .enumerate()
        .map(|(i, res)| {
            let res: Vec<(&str, &str)> = res.iter().map(|(q, d)| (q.as_str(), *d)).collect();
            claim(&format!("gpu-{i}"), &format!("{:08x}-0000-0000-0000-{i:012}", seed & 0xffff_ffff), &res, &users[i])
        })
        .collect();
    let mut order: Vec<&'static str> = POD_NAMES[..n_pods].to_vec();
    for i in (1..order.len()).rev() {
        order.swap(i, r.below(i + 1));
    }
    let mut steps = Vec::new();
    for &p in &order {
        steps.push(Step::Prepare(p));
        if r.chance(25) {
            steps.push(Step::Restart);
        }
    }
    for i in (1..order.len()).rev() {
        order.swap(i, r.below(i + 1));
    }
    steps.extend(order.iter().map(|&p| Step::Unprepare(p)));
    Case {
        name: format!("seed-{seed}"),
        objects: vec![],
        claims,
        pods,
        steps,
        generated: vec![],
        driver: vec![],
        gates: "",
    }
}

/// Where divergent generated scenarios are written (and read back as regression cases).
fn regressions_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream/regressions/dramanager")
}

fn case_json(c: &Case) -> Value {
    json!({"name": c.name, "claims": c.claims, "pods": c.pods, "steps": c.steps.iter().map(|s| s.json()).collect::<Vec<_>>(), "driver": c.driver})
}

/// A regression file as a case (pod names are of [`POD_NAMES`]).
fn case_of(v: &Value) -> Option<Case> {
    let pod_name = |n: &str| POD_NAMES.iter().copied().find(|p| *p == n);
    let steps = v["steps"]
        .as_array()?
        .iter()
        .map(|s| match s["op"].as_str()? {
            "prepare" => Some(Step::Prepare(pod_name(s["pod"].as_str()?)?)),
            "unprepare" => Some(Step::Unprepare(pod_name(s["pod"].as_str()?)?)),
            "restart" => Some(Step::Restart),
            "register" => Some(Step::Register),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let driver = v["driver"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| match d.as_str()? {
            "--fault" => Some("--fault"),
            "foreign-request-names" => Some("foreign-request-names"),
            _ => None,
        })
        .collect();
    Some(Case {
        name: v["name"].as_str()?.to_string(),
        objects: vec![],
        claims: v["claims"].as_array()?.clone(),
        pods: v["pods"].as_array()?.clone(),
        steps,
        generated: vec![],
        driver,
        gates: "",
    })
}

/// #45 item 3: every hand-written case gives the same calls, errors,
/// checkpoints and views on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dra_manager_matches_upstreams_kubelet_dra_manager() {
    let Some(bin) = upstream_peer("dramanager") else { return };
    let only = std::env::var("DPCTL_DRAM_CASE").ok();
    let mut report = Vec::new();
    for c in cases().iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)) {
        let diffs = run_case(&bin, c).await;
        if !diffs.is_empty() {
            report.push(format!("case {}:\n{}", c.name, diffs.join("\n")));
        }
    }
    assert!(report.is_empty(), "dpctl's DRA manager differs from upstream's:\n\n{}", report.join("\n\n"));
}

/// #45 item 3: generated scenarios (`DPCTL_DRAM_SCENARIOS`, default 4;
/// `DPCTL_DRAM_SEED`, default from the clock, printed; scenario `i` is seed
/// `S + i`) and every file of `tests/upstream/regressions/dramanager/`. A
/// divergent scenario is written there as `seed-S.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_scenarios_match_upstreams_kubelet_dra_manager() {
    let Some(bin) = upstream_peer("dramanager") else { return };
    let n: u64 = std::env::var("DPCTL_DRAM_SCENARIOS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let seed: u64 = std::env::var("DPCTL_DRAM_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1)
    });
    eprintln!("dramanager: seed {seed} ({n} scenarios; DPCTL_DRAM_SEED={seed} replays them)");
    let mut cases: Vec<Case> = Vec::new();
    let mut files: Vec<_> =
        std::fs::read_dir(regressions_dir()).into_iter().flatten().flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "json")) {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let c = serde_json::from_str::<Value>(&text).ok().and_then(|v| case_of(&v));
        assert!(c.is_some(), "{} is not a scenario", f.display());
        cases.extend(c);
    }
    let regressions = cases.len();
    cases.extend((0..n).map(|i| generated(seed.wrapping_add(i))));
    let mut report = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let diffs = run_case(&bin, c).await;
        if diffs.is_empty() {
            continue;
        }
        if i >= regressions {
            let path = regressions_dir().join(format!("{}.json", c.name));
            let written = std::fs::create_dir_all(regressions_dir())
                .and_then(|()| std::fs::write(&path, serde_json::to_string_pretty(&case_json(c)).unwrap_or_default()));
            report.push(format!("{} (written to {}: {written:?}):\n{}", c.name, path.display(), diffs.join("\n")));
        } else {
            report.push(format!("{}:\n{}", c.name, diffs.join("\n")));
        }
    }
    assert!(report.is_empty(), "seed {seed}: dpctl's DRA manager differs from upstream's:\n\n{}", report.join("\n\n"));
}

/// One health case: the driver's flags, the window a retry is looked for in
/// (0: none; wait for the health instead), a kubelet feature gate set on both sides.
struct HealthCase {
    name: &'static str,
    driver: &'static [&'static str],
    window: u64,
    gate: Option<(&'static str, bool)>,
}

/// What one kubelet (upstream's oracle of a release, or dpctl's mock kubelet
/// with that `--kubelet-version`) did with one driver's health service: the
/// services it watched, in call order (`health-watch` lines of the driver's
/// log), and the pod's allocatedResourcesStatus with health and message
/// once every resource's health was known (or after 20 s).
#[derive(Debug, PartialEq)]
struct HealthSeen {
    watches: Vec<String>,
    status: Value,
}

fn health_watches(driver_log: &str) -> Vec<String> {
    lines_of(driver_log, "health-watch", None).map(|v| v["service"].as_str().unwrap_or_default().to_string()).collect()
}

/// `watches` as compared: each service once, in order, and whether any was
/// watched again (a retry), since how many retries fit a window is timing.
fn watch_shape(watches: &[String]) -> Value {
    let mut services: Vec<&String> = Vec::new();
    for w in watches {
        if !services.contains(&w) {
            services.push(w);
        }
    }
    json!({"services": services, "again": watches.len() > services.len()})
}

/// The health view of dpctl's pod, in the oracle's shape.
async fn dpctl_health(t: &DraTree, pod: &str) -> Value {
    let node = dpctl_node(t).await;
    let p = node_pod(&node, pod).cloned().unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    for (cname, entries) in p["allocatedResourcesStatus"].as_object().into_iter().flatten() {
        let mut status: Vec<Value> = entries
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let mut health: Vec<Value> = e["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let mut h = json!({"resourceID": r["resourceID"], "health": r["health"]});
                        if let Some(m) = r.get("message").filter(|m| !m.is_null()) {
                            h["message"] = m.clone();
                        }
                        h
                    })
                    .collect();
                health.sort_by_key(|h| h["resourceID"].as_str().unwrap_or_default().to_string());
                let mut ids: Vec<Value> = health.iter().map(|h| h["resourceID"].clone()).collect();
                ids.sort_by_key(|v| v.as_str().unwrap_or_default().to_string());
                json!({"name": e["name"], "resourceIDs": ids, "health": health})
            })
            .collect();
        status.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_string());
        out.insert(cname.clone(), json!(status));
    }
    Value::Object(out)
}

/// Whether every resource of dpctl's health view has a health other than Unknown.
fn health_known(view: &Value) -> bool {
    view.as_object().into_iter().flatten().all(|(_, st)| {
        st.as_array()
            .into_iter()
            .flatten()
            .all(|e| e["health"].as_array().into_iter().flatten().all(|h| h["health"] != "Unknown"))
    })
}

/// dpctl's side of a health case: the mock kubelet of `version` and the driver.
async fn dpctl_health_side(version: &str, claim: &Value, p: &Value, hc: &HealthCase) -> HealthSeen {
    let (driver_flags, window) = (hc.driver, hc.window);
    let t = DraTree::new();
    let addr = format!("127.0.0.1:{}", free_port());
    let gates = hc.gate.map(|(g, on)| format!("{g}={on}")).unwrap_or_default();
    let mut args = vec!["--kubelet-version", version, "--api-server", addr.as_str(), "--api-server-insecure"];
    if !gates.is_empty() {
        args.extend(["--feature-gates", gates.as_str()]);
    }
    let mut kubelet = mock_kubelet_on(&t.root, &args).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let (driver, dlog) = spawn_driver(&t.root, &t.p("kubeconfig"), driver_flags);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write("objects.yaml", &format!("---\n{claim}\n"));
    log.wait_for("\"event\":\"dra-object\"", 1).await;
    let name = p["metadata"]["name"].as_str().unwrap_or_default();
    t.write(&format!("{name}.yaml"), &p.to_string());
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let status = match window {
        // A retry (or its absence) needs time to show: the window is the observation.
        0 => {
            let mut view = dpctl_health(&t, name).await;
            for _ in 0..1000 {
                if health_known(&view) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                view = dpctl_health(&t, name).await;
            }
            view
        }
        ms => {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Value::Null
        }
    };
    stop_tailed(kubelet, log).await;
    let dlog = stop_tailed(driver, dlog).await;
    HealthSeen { watches: health_watches(&dlog.stdout), status }
}

/// Upstream's side: the oracle of that release with its own driver.
async fn upstream_health_side(bin: &Path, claim: &Value, p: &Value, hc: &HealthCase) -> HealthSeen {
    let (driver_flags, window) = (hc.driver, hc.window);
    let d = tmp();
    let root = d.path();
    std::fs::create_dir_all(root.join("plugins_registry")).unwrap();
    let name = p["metadata"]["name"].as_str().unwrap_or_default();
    let last = match window {
        0 => json!({"op": "health"}),
        ms => json!({"op": "wait", "millis": ms}),
    };
    let mut scenario = json!({"claims": [claim], "pods": [p], "steps": [{"op": "prepare", "pod": name}, last]});
    if let Some((gate, on)) = hc.gate {
        scenario["featureGates"] = json!({gate: on});
    }
    let (mut oracle, mut out) = start_oracle(bin, root, &scenario).await;
    let (driver, dlog) = spawn_driver(root, &root.join("kubeconfig"), driver_flags);
    if let Err(seen) = out.wait_until(90, |s| s.lines().any(|l| l.starts_with("{\"steps\""))).await {
        panic!("health: the oracle {} gave no answer within 90s:\n{seen}", bin.display());
    }
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), oracle.wait()).await;
    assert!(matches!(status, Ok(Ok(s)) if s.success()), "the oracle: {status:?}");
    let answer: Value = out
        .seen()
        .lines()
        .find(|l| l.starts_with("{\"steps\""))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    assert!(answer["error"].is_null(), "the oracle failed: {}", answer["error"]);
    let dlog = stop_tailed(driver, dlog).await;
    let status = match window {
        0 => {
            let mut v = answer["steps"][1]["pods"][name].clone();
            // The oracle's view carries CDI and PodResources too: keep the status.
            for (_, c) in v.as_object_mut().into_iter().flatten() {
                *c = c["status"].clone();
            }
            v
        }
        _ => Value::Null,
    };
    HealthSeen { watches: health_watches(&dlog.stdout), status }
}

/// #48: DRA health per version against upstream's kubelet of each release
/// (`dramanager` of v1.37.2 and `dramanager-1.36` of v1.36.3, their real
/// DRA managers and plugin managers): which health service the kubelet
/// watches of a driver serving both (1.37: `v1.DRAResourceHealth`, 1.36:
/// `v1alpha1`), the health and the message (over 1,024 characters, cut)
/// in allocatedResourcesStatus, and whether a watch answered `Unimplemented`
/// is tried again within 11 s (1.36 retries every 5 s; 1.37 stops,
/// kubernetes#139477); with `ResourceHealthStatusMessage=false` no message. A difference names the version and the case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_health_per_version_matches_upstreams_kubelets() {
    let Some(bin37) = upstream_peer("dramanager") else { return };
    let Some(bin36) = upstream_peer("dramanager-1.36") else { return };
    let c = claim("gpu", "11111111-0000-0000-0000-0000000000a1", &[("one", "dev-1")], &["a"]);
    let p = pod("a", &[("g", "gpu")], &[("main", &[("g", "")])]);
    let mut report = Vec::new();
    let mut seen = Vec::new();
    for (version, bin) in [("1.37", &bin37), ("1.36", &bin36)] {
        let long = &["--fault", "long-message"][..];
        for hc in [
            HealthCase { name: "stream", driver: long, window: 0, gate: None },
            HealthCase {
                name: "no-message",
                driver: long,
                window: 0,
                gate: Some(("ResourceHealthStatusMessage", false)),
            },
            HealthCase {
                name: "unimplemented",
                driver: &["--fault", "health-unimplemented"],
                window: 11_000,
                gate: None,
            },
        ] {
            let case = hc.name;
            let up = upstream_health_side(bin, &c, &p, &hc).await;
            let dp = dpctl_health_side(version, &c, &p, &hc).await;
            let (us, ds) = (watch_shape(&up.watches), watch_shape(&dp.watches));
            eprintln!("health {version} {case}: upstream {us} {}; dpctl {ds} {}", up.status, dp.status);
            if us != ds {
                report.push(format!("{version} {case}: health watches:\n  upstream {us}\n  dpctl    {ds}"));
            }
            if up.status != dp.status {
                report.push(format!(
                    "{version} {case}: allocatedResourcesStatus:\n  upstream {}\n  dpctl    {}",
                    up.status, dp.status
                ));
            }
            seen.push((version, case, us, up.status));
        }
    }
    // Not vacuous: the releases differ where upstream's code says they do.
    let shape = |v: &str, c: &str| seen.iter().find(|s| s.0 == v && s.1 == c).map(|s| s.2.clone()).unwrap_or_default();
    assert_eq!(shape("1.37", "stream")["services"], json!(["v1.DRAResourceHealth"]), "{seen:?}");
    assert_eq!(shape("1.36", "stream")["services"], json!(["v1alpha1.DRAResourceHealth"]), "{seen:?}");
    assert_eq!(
        (shape("1.37", "unimplemented")["again"].clone(), shape("1.36", "unimplemented")["again"].clone()),
        (json!(false), json!(true)),
        "{seen:?}"
    );
    let message =
        seen.iter().find(|s| s.0 == "1.37" && s.1 == "stream").map(|s| s.3["main"][0]["health"][0]["message"].clone());
    assert!(
        message.as_ref().and_then(|m| m.as_str()).is_some_and(|m| m.len() == 1024 && m.ends_with("...")),
        "{message:?}"
    );
    let none = seen.iter().find(|s| s.0 == "1.37" && s.1 == "no-message").map(|s| s.3["main"][0]["health"][0].clone());
    assert!(none.as_ref().is_some_and(|h| h["health"] == "Healthy" && h.get("message").is_none()), "{none:?}");
    assert!(report.is_empty(), "dpctl's DRA health differs from upstream's kubelets:\n\n{}", report.join("\n\n"));
}
