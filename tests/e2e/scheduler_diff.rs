//! The scheduler's choice compared (issue #46 item 5): the same
//! DeviceClasses, ResourceSlices, ResourceClaims, templates and pods go to
//! the real control plane (`support::control_plane()`: kube-scheduler with
//! the DynamicResources plugin and the resourceclaim controller of v1.37.2)
//! and to dpctl's control plane (`dpctl mock-kubelet --api-server`: its
//! resourceclaim controller and its allocator as the scheduler of pods bound
//! to a node). Per pod the outcome is compared: scheduled or not, its
//! `status.resourceClaimStatuses`, and each claim it uses (generated name,
//! labels, annotations, finalizers, owner, `status.allocation` and
//! `status.reservedFor`). With one node per case and one slice per pool the
//! real scheduler is deterministic, so the devices must be the same.
//!
//! Each case has a node, a driver and a namespace of its own on both sides.
//! On the real side its pods are kept to its node by `nodeSelector` (the
//! scheduler filters and binds); on dpctl's they are bound to it
//! (`spec.nodeName`: no scheduler picks a node there). A difference fails
//! the test naming the case, and the case's objects are written to a file
//! whose path the failure prints (the minimal failing case: one case).

use crate::support::*;
use dpctl::client::kube::{self, ApiServer};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// One case: its objects in creation order, as JSON text where `{c}` is the
/// case's name, `{d}` its driver, `{node}` its node and `{ns}` its namespace.
/// A pod is created only once the pods before it are decided.
struct Case {
    name: &'static str,
    objects: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "one-of-four",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"},{"name":"dev-2"},{"name":"dev-3"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"one"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"one"}]}}
    ]"#,
    },
    Case {
        name: "count-and-selector",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"model":{"string":"a"}}},{"name":"dev-1","attributes":{"model":{"string":"b"}}},
                       {"name":"dev-2","attributes":{"model":{"string":"a"}}},{"name":"dev-3","attributes":{"model":{"string":"b"}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"two-b"},"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","count":2,
            "selectors":[{"cel":{"expression":"device.attributes['{d}'].model == 'b'"}}]}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpus","resourceClaimName":"two-b"}]}}
    ]"#,
    },
    Case {
        name: "all-devices",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"},{"name":"dev-2"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"all"},"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","allocationMode":"All"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpus","resourceClaimName":"all"}]}}
    ]"#,
    },
    Case {
        name: "first-available",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"small-0","attributes":{"size":{"int":1}}},{"name":"small-1","attributes":{"size":{"int":1}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"big-or-small"},"spec":{"devices":{"requests":[{"name":"gpu","firstAvailable":[
            {"name":"big","deviceClassName":"{c}-gpu","selectors":[{"cel":{"expression":"device.attributes['{d}'].size > 4"}}]},
            {"name":"small","deviceClassName":"{c}-gpu","count":2}]}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"big-or-small"}]}}
    ]"#,
    },
    Case {
        name: "match-attribute",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"numa":{"int":0}}},{"name":"dev-1","attributes":{"numa":{"int":1}}},
                       {"name":"dev-2","attributes":{"numa":{"int":1}}},{"name":"nic-0","attributes":{"numa":{"int":1},"nic":{"bool":true}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"aligned"},"spec":{"devices":{"requests":[
            {"name":"gpu","exactly":{"deviceClassName":"{c}-gpu","count":2,"selectors":[{"cel":{"expression":"!('nic' in device.attributes['{d}'])"}}]}},
            {"name":"nic","exactly":{"deviceClassName":"{c}-gpu","selectors":[{"cel":{"expression":"'nic' in device.attributes['{d}']"}}]}}],
            "constraints":[{"matchAttribute":"{d}/numa"}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"aligned"}]}}
    ]"#,
    },
    Case {
        name: "class-and-claim-config",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}],
            "config":[{"opaque":{"driver":"{d}","parameters":{"from":"class"}}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"configured"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}],
            "config":[{"requests":["gpu"],"opaque":{"driver":"{d}","parameters":{"from":"claim","mode":"shared"}}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"configured"}]}}
    ]"#,
    },
    Case {
        name: "template",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"},{"name":"dev-2"}]}},
        {"kind":"ResourceClaimTemplate","metadata":{"name":"one-gpu"},"spec":{"metadata":{"labels":{"team":"ml"},"annotations":{"note":"from the template"}},
            "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}}},
        {"kind":"Pod","metadata":{"name":"trainer-with-a-rather-long-name-to-see-how-both-cut-it"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"a","resourceClaimTemplateName":"one-gpu"},{"name":"b","resourceClaimTemplateName":"one-gpu"}]}}
    ]"#,
    },
    Case {
        name: "in-use-and-shared",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"},{"name":"dev-2"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"shared"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"pair"},"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","count":2}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"one-more"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"shared"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"shared"},{"name":"more","resourceClaimName":"pair"}]}},
        {"kind":"Pod","metadata":{"name":"p3"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"one-more"}]}}
    ]"#,
    },
    Case {
        name: "taints",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","taints":[{"key":"example.com/broken","value":"fan","effect":"NoSchedule"}]},{"name":"dev-1"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"untainted"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"tolerant"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu",
            "tolerations":[{"key":"example.com/broken","operator":"Exists","effect":"NoSchedule"}]}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"intolerant"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"untainted"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"tolerant"}]}},
        {"kind":"Pod","metadata":{"name":"p3"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"intolerant"}]}}
    ]"#,
    },
    Case {
        name: "consumable-capacity",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","allowMultipleAllocations":true,"capacity":{"memory":{"value":"8Gi","requestPolicy":{"default":"1Gi","validRange":{"min":"1Gi","step":"1Gi"}}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"three-gi"},"spec":{"devices":{"requests":[{"name":"mem","exactly":{"deviceClassName":"{c}-gpu","capacity":{"requests":{"memory":"2500Mi"}}}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"default"},"spec":{"devices":{"requests":[{"name":"mem","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"too-much"},"spec":{"devices":{"requests":[{"name":"mem","exactly":{"deviceClassName":"{c}-gpu","capacity":{"requests":{"memory":"5Gi"}}}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"mem","resourceClaimName":"three-gi"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"mem","resourceClaimName":"default"}]}},
        {"kind":"Pod","metadata":{"name":"p3"},"spec":{"resourceClaims":[{"name":"mem","resourceClaimName":"too-much"}]}}
    ]"#,
    },
    Case {
        name: "infeasible",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"}]}},
        {"kind":"ResourceClaimTemplate","metadata":{"name":"three"},"spec":{"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","count":3}}]}}}},
        {"kind":"ResourceClaim","metadata":{"name":"three"},"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","count":3}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpus","resourceClaimName":"three"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"gpus","resourceClaimTemplateName":"three"}]}}
    ]"#,
    },
    Case {
        name: "extended-resource",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}],
            "extendedResourceName":"example.com/{c}"}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"},{"name":"dev-2"}]}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[
            {"name":"a","resources":{"limits":{"example.com/{c}":"2"}}},
            {"name":"b","resources":{"limits":{"deviceclass.resource.kubernetes.io/{c}-gpu":"1"}}}]}}
    ]"#,
    },
];

/// Differences kept on purpose: (case, path, why, upstream's source).
const ALLOWED: &[(&str, &str, &str, &str)] = &[(
    "infeasible",
    ".p2.resourceClaimStatuses",
    "dpctl's pods are bound by spec.nodeName (no scheduler picks a node in its control plane), so its \
     resourceclaim controller names a bound pod's claims in its status only once they are allocated and reserved, \
     for the node that runs it to read them ready; upstream's controller names them as soon as it made them",
    "pkg/controller/resourceclaim/controller.go handleClaim (podutil UpdatePodStatus after Create)",
)];

/// A case's objects for one run: placeholders filled, apiVersion set.
fn objects(case: &Case, run: &str) -> Vec<Value> {
    let c = format!("sd{run}-{}", case.name);
    let text = case
        .objects
        .replace("{c}", &c)
        .replace("{d}", &format!("{}.sd.example.com", case.name))
        .replace("{node}", &node_name(case, run))
        .replace("{ns}", &c);
    let mut objs: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("case {}: {e}", case.name));
    for o in &mut objs {
        o["apiVersion"] = json!(match o["kind"].as_str() {
            Some("Pod") => "v1",
            Some("PodGroup") => "scheduling.k8s.io/v1beta1",
            _ => "resource.k8s.io/v1",
        });
    }
    objs
}

/// `dpctl mock-kubelet --api-server 127.0.0.1:0` with `args` on a temp root:
/// the root (kept while the kubelet runs), the process, its log, and a
/// client of its API server.
async fn dpctl_plane(args: &[&str]) -> (tempfile::TempDir, tokio::process::Child, Tail, ApiServer) {
    let k = tmp();
    let mut all = vec!["--api-server", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let mut child = mock_kubelet_on(k.path(), &all).spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    let ev = api_server_event(&mut log).await;
    let api = kube::load_kubeconfig(Path::new(ev["kubeconfig"].as_str().unwrap())).unwrap();
    (k, child, log, api)
}

fn node_name(case: &Case, run: &str) -> String {
    format!("sd{run}-{}", case.name)
}

/// The API path that creates `o` (in `ns` where namespaced).
fn collection(o: &Value, ns: &str) -> String {
    match o["kind"].as_str().unwrap() {
        "Pod" => format!("/api/v1/namespaces/{ns}/pods"),
        "DeviceClass" => "/apis/resource.k8s.io/v1/deviceclasses".into(),
        "ResourceSlice" => "/apis/resource.k8s.io/v1/resourceslices".into(),
        "ResourceClaim" => format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"),
        "ResourceClaimTemplate" => format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"),
        "PodGroup" => format!("/apis/{}/namespaces/{ns}/podgroups", o["apiVersion"].as_str().unwrap()),
        k => panic!("no collection for {k}"),
    }
}

async fn call(api: &ApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    kube::request(api, method, path, body, T).await.unwrap()
}

async fn create(api: &ApiServer, path: &str, o: &Value) {
    let (code, body) = call(api, "POST", path, Some(o)).await;
    assert!(code == 201 || code == 200, "create {path} {}: {code} {body}", o["metadata"]["name"]);
}

/// Which side of the comparison.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Side {
    /// kube-scheduler and the controllers of the real control plane.
    Kube,
    /// dpctl's control plane.
    Dpctl,
}

/// A Node the real scheduler can place pods on (as tests/e2e/controlplane.rs
/// makes one: hostname label, capacity, Ready, no not-ready taint).
async fn kube_node(api: &ApiServer, name: &str) {
    let n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    let (code, body) = call(api, "POST", "/api/v1/nodes", Some(&n)).await;
    assert!(code == 201 || code == 409, "node {name}: {code} {body}");
    let merge = "application/merge-patch+json";
    let spec = json!({"spec": {"taints": null}});
    let (code, body) =
        kube::request_as(api, "PATCH", &format!("/api/v1/nodes/{name}"), merge, Some(&spec), T).await.unwrap();
    assert_eq!(code, 200, "{body}");
    let res = json!({"cpu": "8", "memory": "16Gi", "pods": "110"});
    let status = json!({"status": {"capacity": res, "allocatable": res,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "dpctl test"}]}});
    let path = format!("/api/v1/nodes/{name}/status");
    let (code, body) = kube::request_as(api, "PATCH", &path, merge, Some(&status), T).await.unwrap();
    assert_eq!(code, 200, "{body}");
}

/// Run `case` on one side; per pod its compared outcome.
async fn run_case(api: &ApiServer, side: Side, case: &Case, run: &str) -> Value {
    run_shaped(api, side, case, run, |_| {}).await
}

/// [`run_case`] with each of the case's objects passed through `shape` first.
async fn run_shaped(api: &ApiServer, side: Side, case: &Case, run: &str, shape: fn(&mut Value)) -> Value {
    let ns = format!("sd{run}-{}", case.name);
    let node = node_name(case, run);
    // dpctl's local API server serves no Namespaces (every namespace exists there).
    if side == Side::Kube {
        let ns_obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let (code, body) = call(api, "POST", "/api/v1/namespaces", Some(&ns_obj)).await;
        assert!(code == 201 || code == 409, "namespace {ns}: {code} {body}");
        kube_node(api, &node).await;
    }
    let mut pods = Vec::new();
    for mut o in objects(case, run) {
        shape(&mut o);
        if o["kind"] == "Pod" {
            let spec = &mut o["spec"];
            if spec["containers"].is_null() {
                spec["containers"] = json!([{"name": "c"}]);
            }
            for k in ["initContainers", "containers"] {
                for c in spec[k].as_array_mut().into_iter().flatten() {
                    c["image"] = json!("registry.example.com/app:1");
                }
            }
            match side {
                Side::Kube => spec["nodeSelector"] = json!({"kubernetes.io/hostname": node}),
                Side::Dpctl => spec["nodeName"] = json!(node),
            }
            let name = o["metadata"]["name"].as_str().unwrap().to_string();
            create(api, &collection(&o, &ns), &o).await;
            decided(api, side, &ns, &name, &o).await;
            pods.push(name);
        } else {
            create(api, &collection(&o, &ns), &o).await;
            if o["kind"] == "ResourceSlice" && side == Side::Kube {
                // The scheduler's informer has the slice before the first pod is tried.
                let path =
                    format!("/apis/resource.k8s.io/v1/resourceslices/{}", o["metadata"]["name"].as_str().unwrap());
                assert_eq!(call(api, "GET", &path, None).await.0, 200);
            }
        }
    }
    let mut out = serde_json::Map::new();
    for name in pods {
        out.insert(name.clone(), outcome(api, side, &ns, &name).await);
    }
    Value::Object(out)
}

/// Wait until `pod` is decided: bound to a node or found unschedulable by
/// the real scheduler, each of its template claims made and named in its
/// status. dpctl's controllers run under the store's lock after each write:
/// decided once the create returns.
async fn decided(api: &ApiServer, side: Side, ns: &str, name: &str, spec: &Value) {
    if side == Side::Dpctl {
        return;
    }
    let templates = spec["spec"]["resourceClaims"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|c| c["resourceClaimTemplateName"].is_string()).count());
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    until(60, &format!("pod {ns}/{name} bound or unschedulable"), || {
        let (api, path) = (api.clone(), path.clone());
        async move {
            let (_, p) = call(&api, "GET", &path, None).await;
            let bound = p["spec"]["nodeName"].is_string();
            let unschedulable = p["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable"));
            let named = p["status"]["resourceClaimStatuses"].as_array().map_or(0, Vec::len) >= templates;
            ((bound || unschedulable) && named).then_some(())
        }
    })
    .await;
}

/// A generated name's random suffix masked (`p1-gpu-x7k2q` → `p1-gpu-*****`).
fn masked(name: &str, generate_name: Option<&str>) -> String {
    match generate_name {
        Some(g) if name.starts_with(g) => format!("{g}*****"),
        _ => name.to_string(),
    }
}

/// The compared outcome of pod `ns/name`.
async fn outcome(api: &ApiServer, side: Side, ns: &str, name: &str) -> Value {
    let (code, pod) = call(api, "GET", &format!("/api/v1/namespaces/{ns}/pods/{name}"), None).await;
    assert_eq!(code, 200, "{pod}");
    let mut claims = serde_json::Map::new();
    let mut statuses = Vec::new();
    for st in pod["status"]["resourceClaimStatuses"].as_array().into_iter().flatten() {
        let claim = st["resourceClaimName"].as_str().map(str::to_string);
        statuses.push(json!({"name": st["name"], "claim": claim.as_deref().map(|c| c.get(..c.len().saturating_sub(5)).unwrap_or(c).to_string() + "*****")}));
    }
    for pc in pod["spec"]["resourceClaims"].as_array().into_iter().flatten() {
        let pc_name = pc["name"].as_str().unwrap();
        let claim_name = match pc["resourceClaimName"].as_str() {
            Some(n) => Some(n.to_string()),
            None => pod["status"]["resourceClaimStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["name"] == pc_name)
                .and_then(|s| s["resourceClaimName"].as_str().map(str::to_string)),
        };
        // A template's claim not (yet) named in the pod's status: found by its owner and annotation.
        let claim_name = match (claim_name, pc["resourceClaimTemplateName"].is_string()) {
            (None, true) => {
                let (_, list) =
                    call(api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"), None).await;
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| {
                        c["metadata"]["ownerReferences"][0]["name"] == name
                            && c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == pc_name
                    })
                    .and_then(|c| c["metadata"]["name"].as_str().map(str::to_string))
            }
            (n, _) => n,
        };
        let shape = match claim_name {
            None => json!(null),
            Some(n) => {
                let (code, c) =
                    call(api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{n}"), None)
                        .await;
                assert_eq!(code, 200, "{c}");
                claim_shape(&c)
            }
        };
        claims.insert(pc_name.to_string(), shape);
    }
    // DRA-backed extended resources (KEP-5004): the special claim the scheduler made and its mappings.
    let ext = &pod["status"]["extendedResourceClaimStatus"];
    if let Some(n) = ext["resourceClaimName"].as_str() {
        let (code, c) =
            call(api, "GET", &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{n}"), None).await;
        assert_eq!(code, 200, "{c}");
        let mut shape = claim_shape(&c);
        shape["requests"] = c["spec"]["devices"]["requests"].clone();
        claims.insert("<extended resources>".into(), shape);
    }
    let mappings = ext["requestMappings"].clone();
    // KEP-5517: what the scheduler's DynamicResources plugin patched into the pod (PreBind).
    let node_allocatable = pod["status"]["nodeAllocatableResourceClaimStatuses"].clone();
    let scheduled = match side {
        Side::Kube => pod["spec"]["nodeName"].is_string(),
        // Every claim allocated and reserved for the pod: what the scheduler does before it binds.
        Side::Dpctl => {
            let group = pod["spec"]["schedulingGroup"]["podGroupName"].as_str();
            let mine = |r: &Value| {
                (r["resource"] == "pods" && r["name"] == name)
                    || (r["resource"] == "podgroups" && group.is_some_and(|g| r["name"] == g))
            };
            claims
                .values()
                .all(|c| c["allocation"].is_object() && c["reservedFor"].as_array().is_some_and(|r| r.iter().any(mine)))
        }
    };
    json!({"scheduled": scheduled, "resourceClaimStatuses": statuses, "extendedResourceRequestMappings": mappings,
        "nodeAllocatableResourceClaimStatuses": node_allocatable, "claims": claims})
}

/// What is compared of a claim.
fn claim_shape(c: &Value) -> Value {
    let m = &c["metadata"];
    let owners: Vec<Value> = m["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["name"], "controller": o["controller"], "blockOwnerDeletion": o["blockOwnerDeletion"]}))
        .collect();
    let mut alloc = c["status"]["allocation"].clone();
    if let Some(a) = alloc.as_object_mut() {
        // Compared as present or not: the time differs by run.
        if a.remove("allocationTimestamp").is_some() {
            a.insert("allocationTimestamp".into(), json!("<set>"));
        }
    }
    if alloc.is_object() {
        for r in alloc["devices"]["results"].as_array_mut().into_iter().flatten() {
            if r["shareID"].is_string() {
                r["shareID"] = json!("<set>");
            }
        }
    }
    let reserved: Vec<Value> = c["status"]["reservedFor"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| json!({"apiGroup": r["apiGroup"], "resource": r["resource"], "name": r["name"]}))
        .collect();
    json!({
        "name": masked(m["name"].as_str().unwrap_or_default(), m["generateName"].as_str()),
        "generateName": m["generateName"],
        "labels": m["labels"],
        "annotations": m["annotations"],
        "finalizers": m["finalizers"],
        "ownerReferences": owners,
        "allocation": alloc,
        "reservedFor": reserved,
    })
}

/// Paths where `a` and `b` differ.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(&format!("{path}.{k}"), x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("{path}: dpctl {a} / upstream {b}")),
        _ => {}
    }
}

/// The failing case written where the failure names it.
fn write_case(case: &Case, run: &str, lines: &[String]) -> PathBuf {
    write_shaped(case, run, lines, |_| {}, case.name)
}

/// [`write_case`] with the objects as `shape` made them, in `stem`.json.
fn write_shaped(case: &Case, run: &str, lines: &[String], shape: fn(&mut Value), stem: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scheduler-diff");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("{stem}.json"));
    let mut objects = objects(case, run);
    objects.iter_mut().for_each(shape);
    let body = json!({"case": case.name, "objects": objects, "differences": lines});
    std::fs::write(&f, serde_json::to_string_pretty(&body).unwrap()).unwrap();
    f
}

/// KEP-5729 with its gates on both sides: a PodGroup's claim from its
/// template, made once, owned by and reserved for the group, named in the
/// member pods' status.
const GROUP_CASES: &[Case] = &[Case {
    name: "pod-group",
    objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"},{"name":"dev-1"}]}},
        {"kind":"ResourceClaimTemplate","metadata":{"name":"one-gpu"},"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}}},
        {"kind":"PodGroup","metadata":{"name":"team"},"spec":{"schedulingPolicy":{"basic":{}},
            "resourceClaims":[{"name":"g","resourceClaimTemplateName":"one-gpu"}]}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"schedulingGroup":{"podGroupName":"team"},"resourceClaims":[{"name":"g","resourceClaimTemplateName":"one-gpu"}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"schedulingGroup":{"podGroupName":"team"},"resourceClaims":[{"name":"g","resourceClaimTemplateName":"one-gpu"}]}}
    ]"#,
}];

/// The gates KEP-5729 needs, as every component of both control planes reads them.
const GROUP_GATES: &str = "GenericWorkload=true,DRAWorkloadResourceClaims=true";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_group_claims_are_made_and_reserved_as_upstreams_controller_and_scheduler_do() {
    let releases: [(&str, &str, &str, &[&str]); 2] = [
        ("controlplane", "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1beta1=true", &[]),
        (
            "controlplane-1.36",
            "scheduling.k8s.io/v1alpha2",
            "scheduling.k8s.io/v1alpha2=true",
            &["--kubelet-version", "1.36"],
        ),
    ];
    let mut failures = Vec::new();
    for (bin, gv, runtime_config, base) in releases {
        let Some(bin) = upstream_peer(bin) else { return };
        let d = tmp();
        let (cp, kube_api) =
            upstream_plane(&bin, d.path(), &["-feature-gates", GROUP_GATES, "-runtime-config", runtime_config]).await;
        let mut args = base.to_vec();
        args.extend(["--feature-gates", GROUP_GATES]);
        let (_k, child, log, dpctl_api) = dpctl_plane(&args).await;
        let run = std::process::id().to_string();
        // The PodGroups in the release's version.
        let shape: fn(&mut Value) = match gv {
            "scheduling.k8s.io/v1alpha2" => |o| {
                if o["kind"] == "PodGroup" {
                    o["apiVersion"] = json!("scheduling.k8s.io/v1alpha2");
                }
            },
            _ => |_| {},
        };
        for case in GROUP_CASES {
            let kube_out = run_shaped(&kube_api, Side::Kube, case, &run, shape).await;
            let placed =
                kube_out.as_object().into_iter().flat_map(|m| m.values()).filter(|p| p["scheduled"] == true).count();
            assert!(placed > 0, "{gv}: kube-scheduler placed no member pod: {kube_out:#}");
            let dpctl_out = run_shaped(&dpctl_api, Side::Dpctl, case, &run, shape).await;
            let mut lines = Vec::new();
            diff("", &dpctl_out, &kube_out, &mut lines);
            if !lines.is_empty() {
                let f = write_shaped(case, &run, &lines, shape, &format!("{}-{}", case.name, gv.replace('/', "_")));
                failures.push(format!("{gv} case {} (written to {}):\n{}", case.name, f.display(), lines.join("\n")));
            }
        }
        failures.extend(pod_group_validation(&kube_api, &dpctl_api, &run, gv).await);
        stop_tailed(child, log).await.expect_code(0);
        stop_plane(cp).await;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// PodGroup specs sent to both API servers (KEP-5729's gates on): the
/// declarative rules of scheduling.k8s.io/v1beta1 and ValidatePodGroup's.
const GROUP_SPECS: &[(&str, &str)] = &[
    ("basic", r#"{"schedulingPolicy":{"basic":{}}}"#),
    ("gang", r#"{"schedulingPolicy":{"gang":{"minCount":2}}}"#),
    ("no-policy", r#"{}"#),
    ("both-policies", r#"{"schedulingPolicy":{"basic":{},"gang":{"minCount":2}}}"#),
    ("gang-without-min-count", r#"{"schedulingPolicy":{"gang":{}}}"#),
    (
        "claim-from-template",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"g","resourceClaimTemplateName":"t"}]}"#,
    ),
    (
        "claim-with-both-sources",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"g","resourceClaimName":"c","resourceClaimTemplateName":"t"}]}"#,
    ),
    ("claim-without-source", r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"g"}]}"#),
    ("claim-without-name", r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"resourceClaimName":"c"}]}"#),
    (
        "claim-name-not-a-label",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"Bad_Name","resourceClaimName":"c"}]}"#,
    ),
    (
        "claim-source-not-a-name",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"g","resourceClaimName":"Bad/c"}]}"#,
    ),
    (
        "two-claims-one-name",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"g","resourceClaimName":"a"},{"name":"g","resourceClaimName":"b"}]}"#,
    ),
    ("parent-without-workload", r#"{"schedulingPolicy":{"basic":{}},"parentCompositePodGroupName":"p"}"#),
    ("gang-negative-min-count", r#"{"schedulingPolicy":{"gang":{"minCount":-2}}}"#),
    // The Priority admission plugin (admitPodGroup): the priority from the
    // class (the system ones exist in every cluster), none given or the same.
    ("system-priority-class", r#"{"schedulingPolicy":{"basic":{}},"priorityClassName":"system-cluster-critical"}"#),
    ("unknown-priority-class", r#"{"schedulingPolicy":{"basic":{}},"priorityClassName":"no-such-class"}"#),
    ("priority-given", r#"{"schedulingPolicy":{"basic":{}},"priority":5}"#),
    ("priority-as-computed", r#"{"schedulingPolicy":{"basic":{}},"priority":0}"#),
    (
        "priority-and-class-disagree",
        r#"{"schedulingPolicy":{"basic":{}},"priorityClassName":"system-node-critical","priority":1}"#,
    ),
    (
        "five-claims",
        r#"{"schedulingPolicy":{"basic":{}},"resourceClaims":[{"name":"a","resourceClaimName":"a"},{"name":"b","resourceClaimName":"b"},{"name":"c","resourceClaimName":"c"},{"name":"d","resourceClaimName":"d"},{"name":"e","resourceClaimName":"e"}]}"#,
    ),
];

/// An answer as compared: its code, its reason, its causes (`field:
/// message`, sorted) and, created, the spec as stored (the admission's
/// priority included).
fn answer_shape(code: u16, body: &Value) -> Value {
    let mut causes: Vec<String> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect();
    causes.sort();
    let spec = if code == 201 { body["spec"].clone() } else { Value::Null };
    json!({"code": code, "reason": body["reason"], "causes": causes, "spec": spec})
}

/// Each of [`GROUP_SPECS`] created on both sides; a differing answer is a
/// failure, its request written beside the cases.
async fn pod_group_validation(kube_api: &ApiServer, dpctl_api: &ApiServer, run: &str, gv: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let path = format!("/apis/{gv}/namespaces/default/podgroups");
    let path = path.as_str();
    for (name, spec) in GROUP_SPECS {
        let spec: Value = serde_json::from_str(spec).unwrap();
        let body = json!({"apiVersion": gv, "kind": "PodGroup",
            "metadata": {"name": format!("{name}-{run}")}, "spec": spec});
        let (kc, kb) = call(kube_api, "POST", path, Some(&body)).await;
        let (dc, db) = call(dpctl_api, "POST", path, Some(&body)).await;
        let (k, d) = (answer_shape(kc, &kb), answer_shape(dc, &db));
        if k != d {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scheduler-diff");
            std::fs::create_dir_all(&dir).unwrap();
            let f = dir.join(format!("podgroup-{name}-{}.json", gv.replace('/', "_")));
            let doc = json!({"request": body, "kube-apiserver": k, "dpctl": d});
            std::fs::write(&f, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
            failures.push(format!(
                "{gv} PodGroup {name} (written to {}):\n  kube-apiserver {k}\n  dpctl          {d}",
                f.display()
            ));
        }
    }
    failures
}

#[test]
fn cases_are_json_with_unique_names_and_a_pod_each() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "two cases share a name");
    for c in CASES {
        let objs = objects(c, "0");
        assert!(objs.iter().any(|o| o["kind"] == "Pod"), "case {}: no pod", c.name);
        for o in &objs {
            let _ = collection(o, "ns");
        }
    }
    assert_eq!(masked("p1-gpu-x7k2q", Some("p1-gpu-")), "p1-gpu-*****");
    let mut d = Vec::new();
    diff("", &json!({"a": {"b": [1]}}), &json!({"a": {"b": [2]}}), &mut d);
    assert_eq!(d, vec![".a.b[0]: dpctl 1 / upstream 2".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_scheduler_and_dpctls_allocator_choose_alike() {
    let Some(cp) = control_plane() else {
        eprintln!(
            "note: scheduler differential: the control plane is not built (tests/upstream/build.sh); not compared"
        );
        return;
    };
    let (_d, child, log, dpctl_api) = dpctl_plane(&[]).await;
    let kube_api = kube::load_kubeconfig(&cp.kubeconfig).unwrap();
    let run = std::process::id().to_string();
    // The cases run side by side on the real control plane (each on its own node).
    let mut tasks = tokio::task::JoinSet::new();
    for (i, case) in CASES.iter().enumerate() {
        let (api, run) = (kube_api.clone(), run.clone());
        tasks.spawn(async move { (i, run_case(&api, Side::Kube, case, &run).await) });
    }
    let mut kube_runs = vec![Value::Null; CASES.len()];
    while let Some(r) = tasks.join_next().await {
        let (i, out) = r.expect("a case on the real control plane");
        kube_runs[i] = out;
    }
    // Not vacuous: the real scheduler placed pods with devices and left others unscheduled.
    let pods: Vec<&Value> = kube_runs.iter().flat_map(|o| o.as_object().into_iter().flat_map(|m| m.values())).collect();
    let placed = pods.iter().filter(|p| p["scheduled"] == true).count();
    assert!(placed >= CASES.len() && placed < pods.len(), "{placed} of {} pods scheduled: {kube_runs:#?}", pods.len());
    for p in pods.iter().filter(|p| p["scheduled"] == true) {
        for c in p["claims"].as_object().into_iter().flat_map(|m| m.values()) {
            assert!(c["allocation"]["devices"]["results"].as_array().is_some_and(|r| !r.is_empty()), "{p}");
        }
    }
    let _ = std::fs::remove_dir_all(Path::new(env!("CARGO_TARGET_TMPDIR")).join("scheduler-diff"));
    let mut failures = Vec::new();
    for (case, kube_out) in CASES.iter().zip(kube_runs) {
        let dpctl_out = run_case(&dpctl_api, Side::Dpctl, case, &run).await;
        let mut lines = Vec::new();
        diff("", &dpctl_out, &kube_out, &mut lines);
        for (c, path, why, _) in ALLOWED.iter().filter(|(c, ..)| *c == case.name) {
            let before = lines.len();
            lines.retain(|l| !l.starts_with(&format!("{path}:")));
            match before == lines.len() {
                true => failures.push(format!("case {c}: {path} is allowed to differ but is alike now: drop it")),
                false => eprintln!("scheduler differential: {c}: {path} differs, allowed: {why}"),
            }
        }
        if lines.is_empty() {
            eprintln!("scheduler differential: {}: alike", case.name);
        } else {
            let f = write_case(case, &run, &lines);
            failures.push(format!("case {} (written to {}):\n{}", case.name, f.display(), lines.join("\n")));
        }
    }
    stop_tailed(child, log).await.expect_code(0);
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), CASES.len(), failures.join("\n\n"));
}

/// The writes of the gated-fields differential: `(name, method, path,
/// body)`, in order. Each slice carries one feature's fields (a field
/// dropped can make the rest invalid: one feature per object keeps each
/// gate's effect apart); `plain` is then replaced with fields of several
/// features (PrepareForUpdate with an old object that does not use them);
/// the claims and the template carry one spec feature each; `st` gets a
/// status with every gated result and device-status field.
fn gated_writes(run: &str) -> Vec<(String, &'static str, String, Value)> {
    const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
    const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
    let node = format!("gated-{run}");
    let slice = |name: &str, extra: Value, device: Value| {
        let mut spec = json!({"driver": "gated.example.com", "nodeName": node,
            "pool": {"name": format!("{name}-{run}"), "generation": 1, "resourceSliceCount": 1}});
        if !device.is_null() {
            let mut d = json!({"name": "d0", "attributes": {"model": {"string": "a"}}, "capacity": {"memory": {"value": "8Gi"}}});
            d.as_object_mut().unwrap().extend(device.as_object().cloned().unwrap_or_default());
            spec["devices"] = json!([d]);
        }
        spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{name}-{run}")}, "spec": spec})
    };
    let taints = json!({"taints": [{"key": "example.com/t", "value": "v", "effect": "NoSchedule"}]});
    let binding = json!({"bindingConditions": ["ready"], "bindingFailureConditions": ["failed"], "bindsToNode": true});
    let share = json!({"allowMultipleAllocations": true,
        "capacity": {"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}});
    let allocatable = json!({"nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}}}});
    let lists = json!({"attributes": {"model": {"string": "a"}, "links": {"strings": ["x", "y"]}}});
    let counters = json!({"consumesCounters": [{"counterSet": "s", "counters": {"mem": {"value": "1Gi"}}}]});
    let groups = json!({"consumesCounters": [{"counterSet": "s", "counters": {"mem": {"value": "1Gi"}}, "compatibilityGroups": ["mig"]}]});
    let mut all = Value::Object(Default::default());
    for f in [&taints, &binding, &share, &allocatable] {
        all.as_object_mut().unwrap().extend(f.as_object().cloned().unwrap_or_default());
    }
    // The nodes the slices name: one whose kubelet declares node-allocatable DRA resources, one not.
    let node_obj = |name: &str, features: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"declaredFeatures": features}});
    let mut out: Vec<(String, &'static str, String, Value)> = vec![
        ("node".into(), "POST", "/api/v1/nodes".into(), node_obj(&node, json!(["DRANodeAllocatableResources"]))),
        ("node-bare".into(), "POST", "/api/v1/nodes".into(), node_obj(&format!("{node}-bare"), json!([]))),
    ];
    let on_node = |name: &str, n: String| {
        let mut s = slice(name, json!({}), allocatable.clone());
        s["spec"]["nodeName"] = json!(n);
        s
    };
    let slices: Vec<(&str, Value)> = vec![
        ("taints", slice("taints", json!({}), taints)),
        ("binding", slice("binding", json!({}), binding)),
        ("share", slice("share", json!({}), share)),
        ("allocatable", slice("allocatable", json!({}), allocatable.clone())),
        // 1.36's shape (field 13, tombstoned in 1.37): a field 1.37 does not know.
        (
            "mappings-1.36",
            slice(
                "mappings",
                json!({}),
                json!({"nodeAllocatableResourceMappings": {"cpu": {"allocationMultiplier": "2"}}}),
            ),
        ),
        ("allocatable-bare", on_node("allocatable-bare", format!("{node}-bare"))),
        ("allocatable-missing", on_node("allocatable-missing", format!("{node}-missing"))),
        ("lists", slice("lists", json!({}), lists)),
        ("counters", slice("counters", json!({}), counters)),
        ("groups", slice("groups", json!({}), groups)),
        (
            "shared",
            slice(
                "shared",
                json!({"sharedCounters": [{"name": "s", "counters": {"mem": {"value": "8Gi"}}}]}),
                Value::Null,
            ),
        ),
        ("per-device", {
            let mut s = slice("per-device", json!({"perDeviceNodeSelection": true}), json!({"nodeName": node}));
            s["spec"].as_object_mut().unwrap().remove("nodeName");
            s
        }),
        ("ptype", slice("ptype", json!({"partitionTypeAttribute": "gated.example.com/type"}), json!({}))),
        ("skip", slice("skip", json!({"skipNodeOperations": ["*"]}), json!({}))),
        ("plain", slice("plain", json!({}), json!({}))),
    ];
    out.extend(slices.into_iter().map(|(n, b)| (n.to_string(), "POST", SLICES.to_string(), b)));
    out.push(("plain-update".into(), "PUT", format!("{SLICES}/plain-{run}"), slice("plain", json!({}), all)));
    let claim = |name: &str, exactly: Value, constraints: Value| {
        let mut e = json!({"deviceClassName": "c"});
        e.as_object_mut().unwrap().extend(exactly.as_object().cloned().unwrap_or_default());
        let mut c = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("{name}-{run}")},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": e}]}}});
        if constraints.as_array().is_some_and(|c| !c.is_empty()) {
            c["spec"]["devices"]["constraints"] = constraints;
        }
        c
    };
    let tolerations = json!({"tolerations": [{"key": "example.com/t", "operator": "Exists", "effect": "NoSchedule"}]});
    let capacity = json!({"capacity": {"requests": {"memory": "1Gi"}}});
    let derived = json!({"derivedAttributes": [{"name": "gated.example.com/numa",
        "expression": "device.attributes['gated.example.com'].model"}]});
    let uses_derived = json!([{"matchAttribute": "gated.example.com/numa"}]);
    for (n, e, c) in [
        ("c-tolerations", &tolerations, json!([])),
        ("c-capacity", &capacity, json!([{"matchAttribute": "gated.example.com/x"}])),
        ("c-distinct", &json!({}), json!([{"distinctAttribute": "gated.example.com/x"}])),
        ("c-derived", &derived, uses_derived.clone()),
        // Invalid with the gate on (its name in no constraint, no expression); dropped with it off.
        (
            "c-derived-unused",
            &json!({"derivedAttributes": [{"name": "gated.example.com/other"}]}),
            uses_derived.clone(),
        ),
    ] {
        out.push((n.into(), "POST", CLAIMS.into(), claim(n, e.clone(), c)));
    }
    let mut t = claim("t-all", json!({}), uses_derived);
    let mut e = t["spec"]["devices"]["requests"][0]["exactly"].clone();
    for f in [&tolerations, &capacity, &derived] {
        e.as_object_mut().unwrap().extend(f.as_object().cloned().unwrap_or_default());
    }
    t["spec"]["devices"]["requests"][0]["exactly"] = e;
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": format!("t-all-{run}")}, "spec": {"spec": t["spec"]}});
    out.push((
        "t-all".into(),
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates".into(),
        template,
    ));
    out.push(("st".into(), "POST", CLAIMS.into(), claim("st", json!({}), json!([]))));
    let share_id = "8c1a8d2e-5b1f-4c43-9f0e-0d6f3a7b2c11";
    let mut status = claim("st", json!({}), json!([]));
    status["status"] = json!({
        "allocation": {"devices": {"results": [{"request": "r", "driver": "gated.example.com", "pool": format!("share-{run}"), "device": "d0",
            "bindingConditions": ["ready"], "bindingFailureConditions": ["failed"], "shareID": share_id,
            "consumedCapacity": {"memory": "1Gi"}, "skipNodeOperations": ["*"]}]}},
        "devices": [{"driver": "gated.example.com", "pool": format!("share-{run}"), "device": "d0", "shareID": share_id}]});
    out.push(("st-status".into(), "PUT", format!("{CLAIMS}/st-{run}/status"), status));
    out
}

/// What an API server did with each of [`gated_writes`]: its code and, when
/// it stored the object, its spec (and a claim's status); when it refused,
/// the causes' fields and reasons.
async fn gated_fields(api: &ApiServer, run: &str) -> Value {
    let mut out = serde_json::Map::new();
    for (name, method, path, mut body) in gated_writes(run) {
        if method == "PUT" {
            // The object replaced as read (its resourceVersion: an update, not a blind write).
            let (_, cur) = call(api, "GET", path.trim_end_matches("/status"), None).await;
            body["metadata"] = cur["metadata"].clone();
            if body.get("spec").is_none() {
                body["spec"] = cur["spec"].clone();
            }
        }
        let (code, mut got) = call(api, method, &path, Some(&body)).await;
        // A taint's timeAdded is the server's clock: compared as set or not.
        for d in got["spec"]["devices"].as_array_mut().into_iter().flatten() {
            for t in d["taints"].as_array_mut().into_iter().flatten() {
                if t["timeAdded"].is_string() {
                    t["timeAdded"] = json!("<set>");
                }
            }
        }
        let what = match code {
            _ if name.starts_with("node") => json!({"code": code}),
            200 | 201 => json!({"code": code, "spec": got["spec"], "status": got["status"]}),
            422 | 400 => {
                let causes: Vec<Value> = got["details"]["causes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!({"field": c["field"], "reason": c["reason"]}))
                    .collect();
                json!({"code": code, "causes": causes})
            }
            _ => json!({"code": code, "reason": got["reason"], "message": got["message"]}),
        };
        out.insert(name, what);
    }
    Value::Object(out)
}

/// Every gate kube-apiserver's resource.k8s.io strategies read that an
/// operator can turn off in 1.37 (DRADeviceTaintRules goes with
/// DRADeviceTaints, which it depends on).
const ALL_OFF: &str = "DRADeviceTaints=false,DRADeviceTaintRules=false,DRAPartitionableDevices=false,DRADeviceBindingConditions=false,DRAConsumableCapacity=false";
/// The alpha gates of those strategies that dpctl models, on.
const ALPHA_ON: &str =
    "DRAListTypeAttributes=true,DRADeviceCompatibilityGroups=true,DRADerivedAttributes=true,DRANodeAllocatableResources=true";

/// Differences kept on purpose, by write and path, with the reason (each
/// also in docs/fidelity.md); one that is alike now fails the test.
const GATED_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "skip",
        ".skip.spec.skipNodeOperations",
        "dpctl models DRAOptionalNodeOperations (alpha, off in 1.37) on: its kubelet honours skipNodeOperations",
    ),
    ("st-status", ".st-status.status.allocation.devices.results[0].skipNodeOperations", "as above"),
];

/// 1.36's counterparts of [`ALL_OFF`] and [`ALPHA_ON`] (v1.36.3
/// kube_features.go: no DRADeviceCompatibilityGroups, DRADerivedAttributes
/// or DRAPartitionableDevicesType yet; their fields are unknown there).
const ALL_OFF_36: &str = ALL_OFF;
/// The alpha gates of 1.36 among them, on.
const ALPHA_ON_36: &str = "DRAListTypeAttributes=true,DRANodeAllocatableResources=true";

/// #48: the local API server's strategies against kube-apiserver's
/// (pkg/registry/resource/*/strategy.go and pkg/api/resourceclaimspec
/// dropDisabled*Fields) of v1.37.2 and of v1.36.3 (`controlplane-1.36`,
/// dpctl under `--kubelet-version 1.36`), with every gate they read that
/// can be turned off, off ([`ALL_OFF`]), at the release's defaults, and
/// with the alpha ones on ([`ALPHA_ON`], [`ALPHA_ON_36`]): each write of
/// [`gated_writes`] is answered alike and stores the same fields (a field
/// the release does not have is an unknown one, dropped). A difference
/// names the release, the write and the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_dra_fields_are_dropped_as_kube_apiserver_drops_them() {
    let mut failures = Vec::new();
    let releases: [GatedRelease; 2] = [
        ("1.37", "controlplane", &[], [Some(ALL_OFF), None, Some(ALPHA_ON)]),
        ("1.36", "controlplane-1.36", &["--kubelet-version", "1.36"], [Some(ALL_OFF_36), None, Some(ALPHA_ON_36)]),
    ];
    for (release, bin, base, gate_sets) in releases {
        let Some(bin) = upstream_peer(bin) else { return };
        for gates in gate_sets {
            failures.extend(gated_fields_alike(release, &bin, base, gates).await);
        }
    }
    assert!(
        failures.is_empty(),
        "dpctl's API server stores gated fields otherwise than kube-apiserver:\n{}",
        failures.join("\n\n")
    );
}

/// A release of the gated-fields differential: its name, its control-plane
/// oracle, dpctl's arguments for it, and its three gate settings.
type GatedRelease = (&'static str, &'static str, &'static [&'static str], [Option<&'static str>; 3]);

/// One run of [`gated_dra_fields_are_dropped_as_kube_apiserver_drops_them`]:
/// `release`'s control plane `bin` and dpctl with `base` arguments, both
/// with `gates`; the differences found.
async fn gated_fields_alike(release: &str, bin: &Path, base: &[&str], gates: Option<&str>) -> Vec<String> {
    let mut failures = Vec::new();
    let d = tmp();
    let up: Vec<&str> = gates.map(|g| vec!["-feature-gates", g]).unwrap_or_default();
    let (cp, kube_api) = upstream_plane(bin, d.path(), &up).await;
    let mut args: Vec<&str> = base.to_vec();
    args.extend(gates.map(|g| vec!["--feature-gates", g]).unwrap_or_default());
    let (_k, child, log, dpctl_api) = dpctl_plane(&args).await;
    let run = std::process::id().to_string();
    let kube_out = gated_fields(&kube_api, &run).await;
    let dpctl_out = gated_fields(&dpctl_api, &run).await;
    stop_tailed(child, log).await.expect_code(0);
    stop_plane(cp).await;
    let alpha = gates == Some(ALPHA_ON);
    let at = format!("{release} {gates:?}");
    // Not vacuous: kube-apiserver stored the plain slice and the claim whose status was written.
    assert_eq!(kube_out["plain"]["code"], 201, "{at}: {kube_out:#}");
    // The NodeDeclaredFeatures admission refuses a slice on a missing node only with 1.37's DRANodeAllocatableResources on.
    assert_eq!(kube_out["allocatable-missing"]["code"], if alpha { 403 } else { 201 }, "{at}: {kube_out:#}");
    assert_eq!(kube_out["c-derived-unused"]["code"], if alpha { 422 } else { 201 }, "{at}: {kube_out:#}");
    assert_eq!(kube_out["st-status"]["code"], 200, "{at}: {kube_out:#}");
    // 1.36's field is kept by 1.36 with its gate on, and by nothing else.
    assert_eq!(
        kube_out["mappings-1.36"]["spec"]["devices"][0].get("nodeAllocatableResourceMappings").is_some(),
        release == "1.36" && gates == Some(ALPHA_ON_36),
        "{at}: {kube_out:#}"
    );
    assert_eq!(
        kube_out["binding"]["spec"]["devices"][0].get("bindingConditions").is_some(),
        gates != Some(ALL_OFF),
        "{at}: {kube_out:#}"
    );
    let mut lines = Vec::new();
    diff("", &dpctl_out, &kube_out, &mut lines);
    for (w, path, why) in GATED_ALLOWED {
        let before = lines.len();
        lines.retain(|l| !l.starts_with(&format!("{path}:")));
        if before == lines.len() && kube_out[w]["code"] == dpctl_out[w]["code"] && gates.is_none() && release == "1.37"
        {
            failures.push(format!("{at}: {path} is allowed to differ but is alike now: drop it"));
        } else if before != lines.len() {
            eprintln!("gated fields ({at}): {path} differs, allowed: {why}");
        }
    }
    if !lines.is_empty() {
        failures.push(format!("{at}:\n{}", lines.join("\n")));
    }
    failures
}

/// Stop a control plane [`upstream_plane`] started: SIGTERM, then up to 30 s for it to go.
async fn stop_plane(mut cp: tokio::process::Child) {
    sigterm(&cp);
    let _ = tokio::time::timeout(Duration::from_secs(30), cp.wait()).await;
}

/// The real control plane started with `args` (its own, in `dir`): the
/// process and its admin client.
async fn upstream_plane(bin: &Path, dir: &Path, args: &[&str]) -> (tokio::process::Child, ApiServer) {
    let mut c = tokio::process::Command::new(bin);
    c.arg("serve").arg("-dir").arg(dir).args(args);
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).kill_on_drop(true);
    let mut cp = c.spawn().unwrap();
    let mut out = Tail::stdout(&mut cp);
    out.wait_for("\"ready\":true", 1).await;
    let ready: Value = serde_json::from_str(out.seen().lines().next().unwrap()).unwrap();
    let api = kube::load_kubeconfig(Path::new(ready["kubeconfig"].as_str().unwrap())).unwrap();
    (cp, api)
}

/// A failed answer as compared: code, reason and message (an object: its code).
fn refusal(code: u16, body: &Value) -> Value {
    match body["kind"] == "Status" {
        true => json!({"code": code, "reason": body["reason"], "message": body["message"], "details": body["details"]}),
        false => json!({"code": code}),
    }
}

/// What an API server answers of PodGroups: the group version's discovery,
/// whether `/apis` lists it, a PodGroup naming a claim created (whether the
/// claim is kept, the preemption policy stored), and a status write with a
/// claim status (whether kept); a PodGroup giving `preemptionPolicy: Never`
/// (the answer, the policy stored) and an update changing the first one's
/// priority and claims (the answer, causes included).
async fn pod_group_serving(api: &ApiServer, run: &str) -> Value {
    let (gcode, gv) = call(api, "GET", "/apis/scheduling.k8s.io/v1beta1", None).await;
    let (_, groups) = call(api, "GET", "/apis", None).await;
    let listed = groups["groups"].as_array().into_iter().flatten().any(|g| {
        g["versions"].as_array().into_iter().flatten().any(|v| v["groupVersion"] == "scheduling.k8s.io/v1beta1")
    });
    let path = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups";
    let name = format!("served-{run}");
    let body = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}});
    let (ccode, created) = call(api, "POST", path, Some(&body)).await;
    let (lcode, list) = call(api, "GET", path, None).await;
    let mut out = json!({
        "discovery": refusal(gcode, &gv), "listed": listed, "list": refusal(lcode, &list),
        "create": refusal(ccode, &created),
    });
    if ccode == 201 {
        out["create"]["resourceClaims"] = json!(created["spec"].get("resourceClaims").is_some());
        let mut s = created.clone();
        s["status"] = json!({"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "c"}]});
        let (scode, st) = call(api, "PUT", &format!("{path}/{name}/status"), Some(&s)).await;
        out["status"] = refusal(scode, &st);
        out["status"]["resourceClaimStatuses"] = json!(st["status"].get("resourceClaimStatuses").is_some());
        out["create"]["preemptionPolicy"] = created["spec"]["preemptionPolicy"].clone();
        let never = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": format!("never-{run}")},
            "spec": {"schedulingPolicy": {"basic": {}}, "preemptionPolicy": "Never"}});
        let (ncode, n) = call(api, "POST", path, Some(&never)).await;
        out["never"] = refusal(ncode, &n);
        out["never"]["preemptionPolicy"] = n["spec"]["preemptionPolicy"].clone();
        let mut u = st.clone();
        u["spec"]["priority"] = json!(7);
        u["spec"]["resourceClaims"] = json!([{"name": "h", "resourceClaimName": "d"}]);
        let (ucode, up) = call(api, "PUT", &format!("{path}/{name}"), Some(&u)).await;
        out["update"] = refusal(ucode, &up);
    }
    out
}

/// #48: PodGroups by gate, as kube-apiserver (v1.37.2) serves them: with
/// the default gates scheduling.k8s.io/v1beta1 is not served (404 at its
/// discovery and its paths, not listed in `/apis`); with GenericWorkload on
/// (and, for kube-apiserver, the group version in `--runtime-config`) it is,
/// and with DRAWorkloadResourceClaims off a PodGroup's `spec.resourceClaims`
/// and its `status.resourceClaimStatuses` are dropped
/// (podgroup/strategy.go dropDisabledPodGroupFields,
/// dropDisabledPodGroupStatusFields); with both on they are kept. A
/// PodGroup's `preemptionPolicy` is dropped with PodGroupPreemptionPolicy
/// off and filled by the Priority admission plugin with it on (another value
/// refused); its priority and claims are immutable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_are_served_by_gate_as_kube_apiserver_serves_them() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    let runtime = ["-runtime-config", "scheduling.k8s.io/v1beta1=true"];
    // The last also with PodGroupPreemptionPolicy (alpha, off in 1.37).
    let all = format!("{GROUP_GATES},PodGroupPreemptionPolicy=true");
    let configs: [(Option<&str>, &[&str]); 3] =
        [(None, &[]), (Some("GenericWorkload=true"), &runtime), (Some(all.as_str()), &runtime)];
    let mut failures = Vec::new();
    for (gates, extra) in configs {
        let d = tmp();
        let mut go_args: Vec<&str> = extra.to_vec();
        let mut args: Vec<&str> = Vec::new();
        if let Some(g) = gates {
            go_args.extend(["-feature-gates", g]);
            args.extend(["--feature-gates", g]);
        }
        let (cp, kube_api) = upstream_plane(&bin, d.path(), &go_args).await;
        let (_k, child, log, dpctl_api) = dpctl_plane(&args).await;
        let run = std::process::id().to_string();
        let kube_out = pod_group_serving(&kube_api, &run).await;
        let dpctl_out = pod_group_serving(&dpctl_api, &run).await;
        stop_tailed(child, log).await.expect_code(0);
        stop_plane(cp).await;
        eprintln!("PodGroups served ({gates:?}): kube-apiserver {kube_out}");
        // Not vacuous: served exactly with GenericWorkload on, claims kept
        // and the preemption policy filled exactly with the last gates.
        assert_eq!(kube_out["create"]["code"] == 201, gates.is_some(), "{kube_out:#}");
        assert_eq!(kube_out["create"]["resourceClaims"] == true, gates == Some(all.as_str()), "{kube_out:#}");
        assert_eq!(
            kube_out["create"]["preemptionPolicy"] == "PreemptLowerPriority",
            gates == Some(all.as_str()),
            "{kube_out:#}"
        );
        if dpctl_out != kube_out {
            failures.push(format!("{gates:?}:\n  kube-apiserver {kube_out}\n  dpctl          {dpctl_out}"));
        }
    }
    assert!(failures.is_empty(), "dpctl serves PodGroups otherwise than kube-apiserver:\n{}", failures.join("\n"));
}

/// A pod on a device the next step taints NoExecute.
const TAINT_CASE: Case = Case {
    name: "taint-eviction",
    objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"one"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"one"}]}}
    ]"#,
};

/// Taint the case's one device NoExecute (a slice taint) and wait for the
/// eviction: the pod being deleted (or gone) and the eviction's Event
/// recorded. What was seen of the pod and the Event.
async fn tainted_and_evicted(api: &ApiServer, run: &str) -> Value {
    let c = format!("sd{run}-{}", TAINT_CASE.name);
    let slice_path = format!("/apis/resource.k8s.io/v1/resourceslices/{c}-s");
    let (code, mut slice) = call(api, "GET", &slice_path, None).await;
    assert_eq!(code, 200, "{slice}");
    slice["spec"]["devices"][0]["taints"] =
        json!([{"key": "example.com/broken", "value": "yes", "effect": "NoExecute"}]);
    let (code, body) = call(api, "PUT", &slice_path, Some(&slice)).await;
    assert_eq!(code, 200, "{body}");
    let pod_path = format!("/api/v1/namespaces/{c}/pods/p1");
    let events = format!("/api/v1/namespaces/{c}/events");
    until(60, &format!("pod {c}/p1 evicted and its Event recorded"), || {
        let (api, pod_path, events) = (api.clone(), pod_path.clone(), events.clone());
        async move {
            let (code, pod) = call(&api, "GET", &pod_path, None).await;
            let deleting = code == 404 || pod["metadata"]["deletionTimestamp"].is_string();
            let (_, ev) = call(&api, "GET", &events, None).await;
            let evictions: Vec<Value> = ev["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["involvedObject"]["name"] == "p1" && e["reason"] != "Scheduled")
                .map(|e| stamped_masked(e, &pod["metadata"]["uid"]))
                .collect();
            let disruption: Vec<Value> = pod["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["type"] == "DisruptionTarget")
                .map(|c| stamped_masked(c, &Value::Null))
                .collect();
            (deleting && !evictions.is_empty()).then(|| {
                json!({"pod": {"code": code, "deleting": pod["metadata"]["deletionTimestamp"].is_string(),
                    "gracePeriodSeconds": pod["metadata"]["deletionGracePeriodSeconds"], "disruptionTarget": disruption},
                    "events": evictions})
            })
        }
    })
    .await
}

/// An Event or a pod condition as compared: each field but those that
/// differ from run to run (names, UIDs, resource versions, times) as
/// written; those as present or not (a UID: whether it is the pod's).
fn stamped_masked(v: &Value, pod_uid: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        // A list's items: kube-apiserver writes them without apiVersion and
        // kind, dpctl's lists with (a difference of every list, not of the
        // eviction: docs/fidelity.md).
        m.remove("apiVersion");
        m.remove("kind");
    }
    for t in ["lastTransitionTime", "lastProbeTime", "firstTimestamp", "lastTimestamp", "eventTime"] {
        if let Some(x) = v.get_mut(t) {
            *x = json!(x.is_string());
        }
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        let name = m.get("name").and_then(Value::as_str).unwrap_or("");
        let shape = name.split_once('.').map(|(p, hex)| (p.to_string(), hex.chars().all(|c| c.is_ascii_hexdigit())));
        m.insert("name".into(), json!(shape));
        for f in ["uid", "resourceVersion", "creationTimestamp", "managedFields"] {
            m.remove(f);
        }
    }
    if let Some(o) = v.get_mut("involvedObject").and_then(Value::as_object_mut) {
        let same = o.get("uid") == Some(pod_uid);
        o.insert("uid".into(), json!(same));
        o.remove("resourceVersion");
    }
    v
}

/// #48: NoExecute device-taint eviction against upstream's
/// device-taint-eviction-controller (pkg/controller/devicetainteviction,
/// v1.37.2, in the real control plane): a pod whose claim kube-scheduler
/// (dpctl's allocator) allocated on a device that is then tainted NoExecute
/// in its ResourceSlice gets the same `DisruptionTarget` condition (type,
/// status, reason, message), the same Event (type, reason, message, source,
/// reporting component, about the pod) and is deleted alike (graceful: it
/// is bound to a node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_eviction_is_as_upstreams_controller_does_it() {
    let Some(cp) = control_plane() else { return };
    let kube_api = kube::load_kubeconfig(&cp.kubeconfig).unwrap();
    let (_d, child, log, dpctl_api) = dpctl_plane(&[]).await;
    let run = std::process::id().to_string();
    let kube_case = run_case(&kube_api, Side::Kube, &TAINT_CASE, &run).await;
    assert_eq!(kube_case["p1"]["scheduled"], true, "{kube_case:#}");
    let dpctl_case = run_case(&dpctl_api, Side::Dpctl, &TAINT_CASE, &run).await;
    assert_eq!(dpctl_case, kube_case, "the case before the taint");
    let kube_out = tainted_and_evicted(&kube_api, &run).await;
    let dpctl_out = tainted_and_evicted(&dpctl_api, &run).await;
    stop_tailed(child, log).await.expect_code(0);
    eprintln!("device-taint eviction: kube {kube_out}");
    assert_eq!(dpctl_out, kube_out, "dpctl's eviction differs from upstream's device-taint-eviction-controller");
}

/// The case DeviceTaintRules act on: one device, a pod using it.
const TAINT_RULE_CASE: Case = Case {
    name: "taint-rule",
    objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0"}]}},
        {"kind":"ResourceClaim","metadata":{"name":"one"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"one"}]}}
    ]"#,
};

/// A DeviceTaintRule as compared: its spec (timeAdded as present or not),
/// generation and `EvictionInProgress` condition (its time as present or not).
fn rule_shape(code: u16, r: &Value) -> Value {
    let mut spec = r["spec"].clone();
    if let Some(t) = spec["taint"].get_mut("timeAdded") {
        *t = json!(t.is_string());
    }
    let conditions: Vec<Value> =
        r["status"]["conditions"].as_array().into_iter().flatten().map(|c| stamped_masked(c, &Value::Null)).collect();
    json!({"code": code, "spec": spec, "generation": r["metadata"]["generation"], "conditions": conditions})
}

/// What `api` does with DeviceTaintRules on [`TAINT_RULE_CASE`]'s device:
/// discovery's entries; an invalid rule's answer; an effect None rule's
/// condition (what NoExecute would do); a NoExecute rule's eviction of the
/// pod and its condition once complete; the first rule after its effect
/// changed to NoSchedule (timeAdded set again, generation 2).
async fn taint_rules(api: &ApiServer, run: &str, version: &str) -> Value {
    let rules = format!("/apis/resource.k8s.io/{version}/devicetaintrules");
    let rules = rules.as_str();
    let c = format!("sd{run}-{}", TAINT_RULE_CASE.name);
    let driver = format!("{}.sd.example.com", TAINT_RULE_CASE.name);
    let (_, disc) = call(api, "GET", &format!("/apis/resource.k8s.io/{version}"), None).await;
    let discovery: Vec<Value> = disc["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["name"].as_str().is_some_and(|n| n.starts_with("devicetaintrules")))
        .map(|r| json!({"name": r["name"], "namespaced": r["namespaced"], "kind": r["kind"], "verbs": r["verbs"]}))
        .collect();
    let rule = |name: &str, effect: &str| {
        json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "DeviceTaintRule", "metadata": {"name": format!("{c}-{name}")},
            "spec": {"deviceSelector": {"driver": driver, "pool": c, "device": "dev-0"},
                "taint": {"key": "example.com/broken", "value": "yes", "effect": effect}}})
    };
    let mut bad = rule("bad", "Bogus");
    bad["spec"]["taint"]["key"] = json!("not a key");
    bad["spec"]["deviceSelector"]["device"] = json!("Dev_0");
    let (code, body) = call(api, "POST", rules, Some(&bad)).await;
    let invalid = answer_shape(code, &body);
    let condition_of = |name: String, reason: Option<&'static str>| {
        let (api, rules) = (api.clone(), rules.to_string());
        async move {
            until(60, &format!("DeviceTaintRule {name}'s condition {reason:?}"), || {
                let (api, path) = (api.clone(), format!("{rules}/{name}"));
                async move {
                    let (code, r) = call(&api, "GET", &path, None).await;
                    let c = r["status"]["conditions"].as_array().and_then(|c| c.first().cloned())?;
                    reason.is_none_or(|want| c["reason"] == want).then(|| rule_shape(code, &r))
                }
            })
            .await
        }
    };
    // A timeAdded of its own, which a change of the effect replaces with the time of the change.
    let mut none = rule("none", "None");
    none["spec"]["taint"]["timeAdded"] = json!("2020-01-01T00:00:00Z");
    let (code, body) = call(api, "POST", rules, Some(&none)).await;
    assert_eq!(code, 201, "{body}");
    let none = condition_of(format!("{c}-none"), None).await;
    let (code, body) = call(api, "POST", rules, Some(&rule("evict", "NoExecute"))).await;
    assert_eq!(code, 201, "{body}");
    let pod_path = format!("/api/v1/namespaces/{c}/pods/p1");
    let pod = until(60, &format!("pod {c}/p1 evicted"), || {
        let (api, pod_path) = (api.clone(), pod_path.clone());
        async move {
            let (code, pod) = call(&api, "GET", &pod_path, None).await;
            (code == 404 || pod["metadata"]["deletionTimestamp"].is_string()).then(|| {
                let disruption: Vec<Value> = pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["type"] == "DisruptionTarget")
                    .map(|c| stamped_masked(c, &Value::Null))
                    .collect();
                json!({"code": code, "disruptionTarget": disruption})
            })
        }
    })
    .await;
    let evict = condition_of(format!("{c}-evict"), Some("Completed")).await;
    let path = format!("{rules}/{c}-none");
    let (_, mut first) = call(api, "GET", &path, None).await;
    first["spec"]["taint"]["effect"] = json!("NoSchedule");
    let before = first["spec"]["taint"]["timeAdded"].clone();
    let (code, changed) = call(api, "PUT", &path, Some(&first)).await;
    let mut changed_shape = rule_shape(code, &changed);
    changed_shape["timeAddedChanged"] = json!(changed["spec"]["taint"]["timeAdded"] != before);
    // DeleteCollection by label: only the labelled rule goes.
    let mut labelled = rule("labelled", "NoSchedule");
    labelled["metadata"]["labels"] = json!({"run": c});
    assert_eq!(call(api, "POST", rules, Some(&labelled)).await.0, 201);
    let (code, gone) = call(api, "DELETE", &format!("{rules}?labelSelector=run%3D{c}"), None).await;
    let gone: Vec<Value> =
        gone["items"].as_array().into_iter().flatten().map(|r| r["metadata"]["name"].clone()).collect();
    let (_, left) = call(api, "GET", &format!("{rules}/{c}-evict"), None).await;
    json!({"discovery": discovery, "invalid": invalid, "none": none, "pod": pod, "evict": evict,
        "changed": changed_shape, "deleteCollection": {"code": code, "deleted": gone, "evictLeft": left["metadata"]["name"]}})
}

/// KEP-5055's DeviceTaintRules (GA in 1.37: resource.k8s.io/v1), served by
/// the local API server as kube-apiserver serves them and acted on as
/// upstream's device-taint-eviction-controller acts (v1.37.2, the real
/// control plane; and v1.36.3, `controlplane-1.36`, where they are
/// resource.k8s.io/v1beta2 behind DRADeviceTaintRules, beta and off, and
/// v1beta2's runtime-config): discovery, validation, defaulting (timeAdded,
/// set again when the effect changes; generation), the `EvictionInProgress`
/// condition of an effect None rule (what NoExecute would do, counted) and of
/// a NoExecute rule (`Completed`, the pods evicted), the eviction, and a
/// DeleteCollection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_rules_are_served_and_evict_as_upstreams_do() {
    let releases: [(&str, &str, &[&str], &[&str]); 2] = [
        ("controlplane", "v1", &[], &[]),
        (
            "controlplane-1.36",
            "v1beta2",
            &["-feature-gates", "DRADeviceTaintRules=true", "-runtime-config", "resource.k8s.io/v1beta2=true"],
            &[
                "--kubelet-version",
                "1.36",
                "--feature-gates",
                "DRADeviceTaintRules=true",
                "--runtime-config",
                "resource.k8s.io/v1beta2=true",
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (bin, version, up, ours) in releases {
        let Some(bin) = upstream_peer(bin) else { return };
        let d = tmp();
        let (cp, kube_api) = upstream_plane(&bin, d.path(), up).await;
        let (_d, child, log, dpctl_api) = dpctl_plane(ours).await;
        let run = std::process::id().to_string();
        let kube_case = run_case(&kube_api, Side::Kube, &TAINT_RULE_CASE, &run).await;
        assert_eq!(kube_case["p1"]["scheduled"], true, "{version}: {kube_case:#}");
        let dpctl_case = run_case(&dpctl_api, Side::Dpctl, &TAINT_RULE_CASE, &run).await;
        assert_eq!(dpctl_case, kube_case, "{version}: the case before the rules");
        let kube_out = taint_rules(&kube_api, &run, version).await;
        let dpctl_out = taint_rules(&dpctl_api, &run, version).await;
        stop_tailed(child, log).await.expect_code(0);
        stop_plane(cp).await;
        eprintln!("device taint rules {version}: kube {kube_out}");
        // Not vacuous: kube-apiserver served them, refused the bad one, counted the None rule's pod.
        assert_eq!(kube_out["discovery"].as_array().map(Vec::len), Some(2), "{version}: {kube_out:#}");
        assert_eq!(kube_out["invalid"]["code"], 422, "{version}: {kube_out:#}");
        assert_eq!(kube_out["none"]["conditions"][0]["reason"], "NoEffect", "{version}: {kube_out:#}");
        assert_eq!(kube_out["changed"]["timeAddedChanged"], true, "{version}: {kube_out:#}");
        assert_eq!(
            kube_out["deleteCollection"]["deleted"],
            json!([format!("sd{run}-{}-labelled", TAINT_RULE_CASE.name)]),
            "{version}: {kube_out:#}"
        );
        let mut lines = Vec::new();
        diff("", &dpctl_out, &kube_out, &mut lines);
        if !lines.is_empty() {
            failures.push(format!("{version}:\n{}", lines.join("\n")));
        }
    }
    assert!(failures.is_empty(), "dpctl's DeviceTaintRules differ from upstream's:\n{}", failures.join("\n\n"));
}

/// A claim of two devices whose list-typed attribute sets intersect (KEP-5491).
const LIST_CASE: Case = Case {
    name: "list-attributes",
    objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"dev-0","attributes":{"ids":{"ints":[1,2]}}},{"name":"dev-1","attributes":{"ids":{"ints":[2,3]}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"two"},"spec":{"devices":{"requests":[{"name":"gpus","exactly":{"deviceClassName":"{c}-gpu","count":2}}],
            "constraints":[{"matchAttribute":"{d}/ids"}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"gpus","resourceClaimName":"two"}]}}
    ]"#,
};

/// #48: the control plane's allocator follows `--feature-gates` as the
/// scheduler's does (its AllocatorFeatures from the gates, not the version
/// alone): with DRAListTypeAttributes on (alpha, off in 1.37) on both
/// sides, a claim whose devices' list-typed attributes intersect is
/// allocated alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_planes_allocator_follows_the_feature_gates() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    const GATES: &str = "DRAListTypeAttributes=true";
    let d = tmp();
    let (cp, kube_api) = upstream_plane(&bin, d.path(), &["-feature-gates", GATES]).await;
    let (_k, child, log, dpctl_api) = dpctl_plane(&["--feature-gates", GATES]).await;
    let run = std::process::id().to_string();
    let kube_out = run_case(&kube_api, Side::Kube, &LIST_CASE, &run).await;
    let dpctl_out = run_case(&dpctl_api, Side::Dpctl, &LIST_CASE, &run).await;
    stop_tailed(child, log).await.expect_code(0);
    stop_plane(cp).await;
    // Not vacuous: kube-scheduler placed the pod with both devices.
    assert_eq!(kube_out["p1"]["scheduled"], true, "{kube_out:#}");
    let mut lines = Vec::new();
    diff("", &dpctl_out, &kube_out, &mut lines);
    assert!(lines.is_empty(), "{GATES}: dpctl's control plane allocates otherwise:\n{}", lines.join("\n"));
}

/// What an API server serves of resource.k8s.io by version: the group's
/// versions, each beta's discovery, and a claim created in v1 read in each beta.
async fn resource_versions(api: &ApiServer, run: &str) -> Value {
    let (_, g) = call(api, "GET", "/apis/resource.k8s.io", None).await;
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("rv-{run}")},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}}});
    let (created, _) =
        call(api, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", Some(&claim)).await;
    let mut out = json!({"versions": g["versions"], "created": created});
    for v in ["v1beta2", "v1beta1"] {
        let (d, _) = call(api, "GET", &format!("/apis/resource.k8s.io/{v}"), None).await;
        let (c, got) =
            call(api, "GET", &format!("/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims/rv-{run}"), None)
                .await;
        out[v] = json!({"discovery": d, "claim": c, "apiVersion": got["apiVersion"]});
    }
    out
}

/// #48: kube-apiserver 1.34–1.37 serves resource.k8s.io/v1 only unless
/// `--runtime-config` enables a beta (pkg/controlplane/instance.go
/// betaAPIGroupVersionsDisabledByDefault); the mock kubelet's
/// `--runtime-config` does the same for its API server. With
/// `resource.k8s.io/v1beta1=true` on both: the group lists v1 and v1beta1,
/// a v1 claim reads in v1beta1, v1beta2 is 404. (The default, v1 alone, is
/// in corpus.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_betas_are_served_with_runtime_config_as_kube_apiserver_serves_them() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    const RC: &str = "resource.k8s.io/v1beta1=true";
    let d = tmp();
    let (cp, kube_api) = upstream_plane(&bin, d.path(), &["-runtime-config", RC]).await;
    let (_k, child, log, dpctl_api) = dpctl_plane(&["--runtime-config", RC]).await;
    let run = std::process::id().to_string();
    let kube_out = resource_versions(&kube_api, &run).await;
    let dpctl_out = resource_versions(&dpctl_api, &run).await;
    stop_tailed(child, log).await.expect_code(0);
    stop_plane(cp).await;
    // Not vacuous: kube-apiserver serves the claim in v1beta1 and not in v1beta2.
    assert_eq!(
        (&kube_out["v1beta1"]["claim"], &kube_out["v1beta2"]["claim"]),
        (&json!(200), &json!(404)),
        "{kube_out:#}"
    );
    let mut lines = Vec::new();
    diff("", &dpctl_out, &kube_out, &mut lines);
    assert!(lines.is_empty(), "{RC}: dpctl's API server serves otherwise:\n{}", lines.join("\n"));
}

/// What is compared of a claim waiting on binding conditions: its devices
/// with their binding conditions, whether the allocation is stamped, whom
/// it is reserved for, the conditions in `status.devices`.
fn binding_shape(c: &Value) -> Value {
    let results: Vec<Value> = c["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!({"device": r["device"], "bindingConditions": r["bindingConditions"],
            "bindingFailureConditions": r["bindingFailureConditions"]})
        })
        .collect();
    let reserved: Vec<Value> =
        c["status"]["reservedFor"].as_array().into_iter().flatten().map(|r| r["name"].clone()).collect();
    let conditions: Vec<Value> = c["status"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["conditions"].as_array().cloned().unwrap_or_default())
        .map(|k| json!({"type": k["type"], "status": k["status"]}))
        .collect();
    json!({"allocated": c["status"]["allocation"].is_object(), "results": results,
        "stamped": c["status"]["allocation"]["allocationTimestamp"].is_string(), "reservedFor": reserved,
        "deviceConditions": conditions})
}

/// `dpctl dra serve` of `driver` registered on dpctl's node (kubelet root
/// `root`), as the driver of a device is on a real node; not publishing: the
/// test's slice is the only one. Returned once the kubelet logged it.
async fn registered_driver(root: &Path, driver: &str, log: &mut Tail) -> tokio::process::Child {
    let cdi = root.join("cdi");
    std::fs::create_dir_all(&cdi).unwrap();
    let root = root.display().to_string();
    let child = dpctl_cmd(&["--kubelet-root-dir", &root, "dra", "serve", "--driver", driver, "--cdi-dir", s(&cdi)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    child
}

/// One binding-conditions run on one side (#48, KEP-5007): a device with a
/// binding condition and a failure condition, a claim on it and a pod.
/// Observed, in order: the claim allocated and the pod held before binding
/// (PreBind waits); the failure condition set True: the claim deallocated
/// and allocated again (a fresh `allocationTimestamp`, no `status.devices`)
/// and the pod still held; the binding condition set True: the pod past
/// PreBind. The real side's pod is past PreBind once bound (`nodeName`);
/// dpctl's (bound from the start, as no scheduler picks a node there) once
/// its kubelet logs `claim-binding-met`.
async fn binding_run(api: &ApiServer, side: Side, log: Option<&Tail>, run: &str, timeout: bool) -> Vec<Value> {
    let ns = format!("bc{run}");
    let (driver, class) = (format!("bc{run}.example.com"), format!("bc{run}-gpu"));
    let node = match side {
        Side::Kube => format!("bc{run}"),
        Side::Dpctl => "dpctl-node".to_string(),
    };
    if side == Side::Kube {
        let ns_obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let (code, body) = call(api, "POST", "/api/v1/namespaces", Some(&ns_obj)).await;
        assert!(code == 201 || code == 409, "namespace {ns}: {code} {body}");
        kube_node(api, &node).await;
    }
    let objects = [
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": class},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{driver}'")}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("bc{run}-s")},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "dev-0", "bindingConditions": ["example.com/attached"],
                    "bindingFailureConditions": ["example.com/attach-failed"]}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}),
    ];
    for o in &objects {
        create(api, &collection(o, &ns), o).await;
    }
    if side == Side::Kube {
        let path = format!("/apis/resource.k8s.io/v1/resourceslices/bc{run}-s");
        assert_eq!(call(api, "GET", &path, None).await.0, 200);
    }
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "one"}],
            "containers": [{"name": "c", "image": "registry.example.com/app:1", "resources": {"claims": [{"name": "gpu"}]}}]}});
    match side {
        Side::Kube => pod["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node}),
        Side::Dpctl => pod["spec"]["nodeName"] = json!(node),
    }
    create(api, &collection(&pod, &ns), &pod).await;
    let claim_path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/one");
    let pod_path = format!("/api/v1/namespaces/{ns}/pods/p1");
    let past_prebind = |api: ApiServer| {
        let pod_path = pod_path.clone();
        async move {
            match side {
                Side::Kube => call(&api, "GET", &pod_path, None).await.1["spec"]["nodeName"].is_string(),
                Side::Dpctl => log.is_some_and(|l| l.seen().contains("\"event\":\"claim-binding-met\"")),
            }
        }
    };
    // Allocated and reserved; `fresh`: with no `status.devices` either (what
    // the test wrote there goes with a deallocation; a timestamp has whole
    // seconds, so a reallocation within one is told by that).
    let allocated = |api: ApiServer, fresh: bool| {
        let claim_path = claim_path.clone();
        async move {
            let (_, c) = call(&api, "GET", &claim_path, None).await;
            let stamped = c["status"]["allocation"]["allocationTimestamp"].is_string();
            let reserved = c["status"]["reservedFor"].as_array().is_some_and(|r| !r.is_empty());
            let cleared = c["status"]["devices"].as_array().is_none_or(Vec::is_empty);
            (stamped && reserved && (cleared || !fresh)).then_some(c)
        }
    };
    let mut seen = Vec::new();
    // 1. Allocated (and reserved), the pod held.
    let c = until(60, &format!("{side:?}: claim allocated"), || allocated(api.clone(), false)).await;
    seen.push(json!({"step": "allocated", "claim": binding_shape(&c), "pastPreBind": past_prebind(api.clone()).await}));
    // 2. The failure condition True: deallocated and allocated again.
    // With `timeout`, nothing is written: the binding timeout passes.
    let first_stamp = c["status"]["allocation"]["allocationTimestamp"].clone();
    if !timeout {
        let failed =
            with_device_conditions(&c, &[("example.com/attached", "False"), ("example.com/attach-failed", "True")]);
        let (code, body) = call(api, "PUT", &format!("{claim_path}/status"), Some(&failed)).await;
        assert_eq!(code, 200, "{body}");
    }
    let again = async {
        loop {
            match allocated(api.clone(), true).await {
                Some(c) if !timeout || c["status"]["allocation"]["allocationTimestamp"] != first_stamp => return c,
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let Ok(c) = tokio::time::timeout(Duration::from_secs(90), again).await else {
        let (_, c) = call(api, "GET", &claim_path, None).await;
        let lines: String = log
            .map(|l| {
                l.seen()
                    .lines()
                    .filter(|l| l.contains("\"claim") || l.contains("binding"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        panic!(
            "{side:?}: the claim was not allocated again within 90s: {}\nthe kubelet's claim lines:\n{lines}",
            binding_shape(&c)
        );
    };
    seen.push(
        json!({"step": "allocated-again", "claim": binding_shape(&c), "pastPreBind": past_prebind(api.clone()).await}),
    );
    if timeout {
        return seen;
    }
    // 3. The binding condition True: past PreBind.
    let ready = with_device_conditions(&c, &[("example.com/attached", "True")]);
    let (code, body) = call(api, "PUT", &format!("{claim_path}/status"), Some(&ready)).await;
    assert_eq!(code, 200, "{body}");
    until(60, &format!("{side:?}: the pod past PreBind"), || {
        let f = past_prebind(api.clone());
        async move { f.await.then_some(()) }
    })
    .await;
    let (_, c) = call(api, "GET", &claim_path, None).await;
    seen.push(json!({"step": "ready", "claim": binding_shape(&c), "pastPreBind": true}));
    seen
}

/// #48: binding conditions (KEP-5007) against kube-scheduler's PreBind of
/// v1.37.2 (`dynamicresources.go` PreBind, `isPodReadyForBinding`,
/// Unreserve, PostFilter's deallocation): the same device, claim and pod on
/// the real control plane and on dpctl's, the same condition writes, each
/// phase's claim and whether the pod is past PreBind compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_conditions_hold_fail_and_release_as_kube_schedulers_prebind() {
    let Some(cp) = control_plane() else {
        eprintln!("note: binding differential: the control plane is not built (tests/upstream/build.sh); not compared");
        return;
    };
    let kube_api = kube::load_kubeconfig(&cp.kubeconfig).unwrap();
    binding_alike(&kube_api, &[], &std::process::id().to_string()).await;
}

/// The same against kube-scheduler of v1.36.3 (DRADeviceBindingConditions
/// beta and on there too) and dpctl under `--kubelet-version 1.36`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_conditions_in_1_36_are_as_its_kube_schedulers() {
    let Some(bin) = upstream_peer("controlplane-1.36") else { return };
    let d = tmp();
    let (cp, kube_api) = upstream_plane(&bin, d.path(), &[]).await;
    binding_alike(&kube_api, &["--kubelet-version", "1.36"], &format!("{}v", std::process::id())).await;
    stop_plane(cp).await;
}

/// [`binding_run`] on `kube_api` and on dpctl's plane with `args`: each phase alike.
async fn binding_alike(kube_api: &ApiServer, args: &[&str], run: &str) {
    let kube = binding_run(kube_api, Side::Kube, None, run, false).await;
    let (d, child, mut log, dpctl_api) = dpctl_plane(args).await;
    let mut driver = registered_driver(d.path(), &format!("bc{run}.example.com"), &mut log).await;
    let dp = binding_run(&dpctl_api, Side::Dpctl, Some(&log), run, false).await;
    let _ = driver.kill().await;
    stop_tailed(child, log).await.expect_code(0);
    eprintln!("binding differential {args:?}: kube-scheduler {}\n  dpctl {}", json!(kube), json!(dp));
    // Not vacuous: the real scheduler held the pod, then let it go.
    assert_eq!(
        kube.iter().map(|s| s["pastPreBind"].clone()).collect::<Vec<_>>(),
        [json!(false), json!(false), json!(true)]
    );
    let mut lines = Vec::new();
    for (k, d) in kube.iter().zip(&dp) {
        diff(k["step"].as_str().unwrap_or_default(), d, k, &mut lines);
    }
    assert!(
        lines.is_empty(),
        "{args:?}: dpctl's binding-condition wait differs from kube-scheduler's:\n{}",
        lines.join("\n")
    );
}

/// #48: the binding timeout (kube-scheduler's DynamicResources
/// `bindingTimeout`, here 2 s on a control plane of its own beside `mock-kubelet
/// --binding-timeout 2s`): a claim whose binding conditions nobody sets is
/// deallocated once the timeout has passed since its allocation
/// (`isClaimTimeout`, ErrDeviceBindingTimeout) and allocated again, the pod
/// still held; each phase compared as above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_timeout_deallocates_as_kube_schedulers_prebind() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    let d = tmp();
    let (cp, kube_api) = upstream_plane(&bin, d.path(), &["-binding-timeout", "2s"]).await;
    let run = format!("{}t", std::process::id());
    let kube = binding_run(&kube_api, Side::Kube, None, &run, true).await;
    stop_plane(cp).await;
    let (dd, child, mut log, dpctl_api) = dpctl_plane(&["--binding-timeout", "2s"]).await;
    let mut driver = registered_driver(dd.path(), &format!("bc{run}.example.com"), &mut log).await;
    let dp = binding_run(&dpctl_api, Side::Dpctl, Some(&log), &run, true).await;
    let _ = driver.kill().await;
    let timed_out = log.seen().contains("device binding timeout");
    stop_tailed(child, log).await.expect_code(0);
    eprintln!("binding timeout differential: kube-scheduler {}\n  dpctl {}", json!(kube), json!(dp));
    assert!(timed_out, "dpctl's kubelet logged no binding timeout");
    let mut lines = Vec::new();
    for (k, d) in kube.iter().zip(&dp) {
        diff(k["step"].as_str().unwrap_or_default(), d, k, &mut lines);
    }
    assert!(lines.is_empty(), "dpctl's binding timeout differs from kube-scheduler's:\n{}", lines.join("\n"));
}

/// KEP-5517 (DRANodeAllocatableResources, alpha, off in 1.37) with the
/// gate on on both sides: devices that are the node's cpu (a
/// `deviceMultiplier` mapping), a GPU with a memory overhead (per pod and
/// per container), a shared memory device whose consumed capacity maps to
/// memory (`capacityKey`, `capacityMultiplier`); on a node of 8 cpu and
/// 16Gi. p1 takes two cpu devices; p2 shares p1's mapped claim (refused:
/// a mapped claim is not shared across pods); p3 and p4 share the
/// overhead-only GPU claim (allowed, each pod its own overhead); p5 maps
/// 3Gi of consumed capacity to 6Gi of memory; p6 asks for 3 cpu and a cpu
/// device of 2 where 3 are left (refused: Insufficient cpu); p7's pod-level
/// request of 1 cpu does not cover its claim's 2 (refused); p8's pod-level
/// limit of 2.5 cpu does not cover its container's limit of 1 and the
/// claim's 2 (refused).
const NODE_ALLOCATABLE_CASE: Case = Case {
    name: "node-allocatable",
    objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-cpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}' && device.attributes['{d}'].kind == 'cpu'"}}]}},
        {"kind":"DeviceClass","metadata":{"name":"{c}-gpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}' && device.attributes['{d}'].kind == 'gpu'"}}]}},
        {"kind":"DeviceClass","metadata":{"name":"{c}-mem"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}' && device.attributes['{d}'].kind == 'mem'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{node}","generation":1,"resourceSliceCount":1},
            "devices":[
                {"name":"cpu-0","attributes":{"kind":{"string":"cpu"}},"nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"2"}}}},
                {"name":"cpu-1","attributes":{"kind":{"string":"cpu"}},"nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"2"}}}},
                {"name":"cpu-2","attributes":{"kind":{"string":"cpu"}},"nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"2"}}}},
                {"name":"gpu-0","attributes":{"kind":{"string":"gpu"}},"nodeAllocatableResources":{"memory":{"overhead":{"perPod":"1Gi","perContainer":"512Mi"}}}},
                {"name":"mem-0","attributes":{"kind":{"string":"mem"}},"allowMultipleAllocations":true,"capacity":{"memory":{"value":"8Gi"}},
                 "nodeAllocatableResources":{"memory":{"mapping":{"capacityKey":"memory","capacityMultiplier":"2"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"cpus"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu","count":2}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"gpu"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"{c}-gpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"mem"},"spec":{"devices":{"requests":[{"name":"mem","exactly":{"deviceClassName":"{c}-mem","capacity":{"requests":{"memory":"3Gi"}}}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"more"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"cpus","resourceClaimName":"cpus"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"1"},"claims":[{"name":"cpus"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"cpus","resourceClaimName":"cpus"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"cpus"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p3"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"gpu"}],
            "containers":[{"name":"a","resources":{"requests":{"memory":"1Gi"},"claims":[{"name":"gpu"}]}},{"name":"b","resources":{"claims":[{"name":"gpu"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p4"},"spec":{"resourceClaims":[{"name":"gpu","resourceClaimName":"gpu"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p5"},"spec":{"resourceClaims":[{"name":"mem","resourceClaimName":"mem"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"mem"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p6"},"spec":{"resourceClaims":[{"name":"more","resourceClaimName":"more"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"3"},"claims":[{"name":"more"}]}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"level"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p7"},"spec":{"resources":{"requests":{"cpu":"1"}},"resourceClaims":[{"name":"level","resourceClaimName":"level"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"level"}]}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"limit"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p8"},"spec":{"resources":{"requests":{"cpu":"2500m"},"limits":{"cpu":"2500m"}},
            "resourceClaims":[{"name":"limit","resourceClaimName":"limit"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"1"},"claims":[{"name":"limit"}]}}]}}
    ]"#,
};

/// #48, KEP-5517: with DRANodeAllocatableResources on on both sides
/// (`-feature-gates` for the real control plane, `--feature-gates` for the
/// mock kubelet), the pods of [`NODE_ALLOCATABLE_CASE`] are scheduled or
/// refused alike and get the same `status.nodeAllocatableResourceClaimStatuses`
/// (the claims, their containers, mapped quantities and overheads). Both
/// sides have the case's Node (8 cpu, 16Gi): the real scheduler's and
/// dpctl's fit check read its allocatable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_allocatable_resources_are_accounted_as_kube_scheduler_does() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    const GATES: &str = "DRANodeAllocatableResources=true";
    let d = tmp();
    let (cp, kube_api) = upstream_plane(&bin, d.path(), &["-feature-gates", GATES]).await;
    let (_k, child, log, dpctl_api) = dpctl_plane(&["--feature-gates", GATES]).await;
    let run = std::process::id().to_string();
    // The node declares the feature, as a kubelet with the gate on does
    // (status.declaredFeatures): kube-apiserver's NodeDeclaredFeatureValidator
    // admission refuses a slice with nodeAllocatableResources for a node that
    // does not (403 `node "N" does not support DRANodeAllocatableResources feature`).
    let node = node_name(&NODE_ALLOCATABLE_CASE, &run);
    allocatable_node(&kube_api, Side::Kube, &node, true).await;
    allocatable_node(&dpctl_api, Side::Dpctl, &node, true).await;
    let kube_out = run_case(&kube_api, Side::Kube, &NODE_ALLOCATABLE_CASE, &run).await;
    let dpctl_out = run_case(&dpctl_api, Side::Dpctl, &NODE_ALLOCATABLE_CASE, &run).await;
    let ns = format!("sd{run}-{}", NODE_ALLOCATABLE_CASE.name);
    let mut kube_writes = node_allocatable_status_writes(&kube_api, &ns).await;
    let mut dpctl_writes = node_allocatable_status_writes(&dpctl_api, &ns).await;
    kube_writes["admission"] = undeclared_node_slices(&kube_api, &run).await;
    dpctl_writes["admission"] = undeclared_node_slices(&dpctl_api, &run).await;
    // What an operator reads of a refused pod on the real side (docs/dra.md).
    for p in ["p2", "p6", "p7", "p8"] {
        let (_, pod) = call(&kube_api, "GET", &format!("/api/v1/namespaces/{ns}/pods/{p}"), None).await;
        eprintln!("kube-scheduler on {p}: {}", pod["status"]["conditions"]);
    }
    stop_tailed(child, log).await.expect_code(0);
    stop_plane(cp).await;
    eprintln!("node-allocatable: kube {kube_out}");
    // Not vacuous: kube-scheduler placed p1 with a status and refused p2 and p6.
    let placed: Vec<bool> = (1..=8).map(|i| kube_out[format!("p{i}")]["scheduled"] == true).collect();
    assert_eq!(placed, [true, false, true, true, true, false, false, false], "{kube_out:#}");
    assert!(kube_out["p1"]["nodeAllocatableResourceClaimStatuses"].is_array(), "{kube_out:#}");
    eprintln!("node-allocatable status writes: kube-apiserver {kube_writes}");
    assert_eq!(kube_writes["valid"]["code"], 200, "{kube_writes:#}");
    assert_eq!(kube_writes["admission"]["undeclared"]["code"], 403, "{kube_writes:#}");
    let mut lines = Vec::new();
    diff("", &dpctl_out, &kube_out, &mut lines);
    diff(".statusWrites", &dpctl_writes, &kube_writes, &mut lines);
    if !lines.is_empty() {
        let f = write_case(&NODE_ALLOCATABLE_CASE, &run, &lines);
        panic!(
            "{GATES}: dpctl's control plane accounts node-allocatable resources otherwise (written to {}):\n{}",
            f.display(),
            lines.join("\n")
        );
    }
}

/// What an API server answers of `status.nodeAllocatableResourceClaimStatuses`
/// written to a pod in `ns` (kept from the scheduler by a scheduling gate):
/// a valid entry (kept), a status update without the field (the old kept:
/// pod/strategy.go PrepareForUpdate), an invalid entry (422 and its causes:
/// validateNodeAllocatableResourceClaimStatus), an explicit empty list (cleared).
async fn node_allocatable_status_writes(api: &ApiServer, ns: &str) -> Value {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writes"},
        "spec": {"schedulingGates": [{"name": "example.com/hold"}], "resourceClaims": [{"name": "g", "resourceClaimName": "x"}],
            "containers": [{"name": "c", "image": "registry.example.com/app:1", "resources": {"claims": [{"name": "g"}]}}]}});
    create(api, &format!("/api/v1/namespaces/{ns}/pods"), &pod).await;
    let path = format!("/api/v1/namespaces/{ns}/pods/writes/status");
    let merge = "application/merge-patch+json";
    let field = "nodeAllocatableResourceClaimStatuses";
    let patch = |v: Value| {
        let (api, path) = (api.clone(), path.clone());
        async move {
            let (code, body) =
                kube::request_as(&api, "PATCH", &path, merge, Some(&json!({"status": {field: v}})), T).await.unwrap();
            json!({"code": code, "causes": answer_shape(code, &body)["causes"], field: body["status"][field]})
        }
    };
    let valid = patch(json!([{"resourceClaimName": "x", "containers": ["c"],
        "mapping": [{"name": "cpu", "quantity": "2"}], "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "0"}]}]))
    .await;
    let (_, mut cur) = call(api, "GET", &format!("/api/v1/namespaces/{ns}/pods/writes"), None).await;
    if let Some(st) = cur["status"].as_object_mut() {
        st.remove(field);
    }
    let (code, body) = call(api, "PUT", &path, Some(&cur)).await;
    let omitted = json!({"code": code, field: body["status"][field]});
    let invalid = patch(json!([{"resourceClaimName": "nope",
        "mapping": [{"name": "example.com/gpu", "quantity": "-1"}], "overhead": [{"name": "memory"}, {"name": "cpu", "perPod": "-1"}]}]))
    .await;
    let cleared = patch(json!([])).await;
    json!({"valid": valid, "omitted": omitted, "invalid": invalid, "cleared": cleared})
}

/// KEP-5517's slices for nodes that cannot take them (the gate on):
/// kube-apiserver's NodeDeclaredFeatureValidator admission refuses a slice
/// with nodeAllocatableResources for a Node that does not declare
/// DRANodeAllocatableResources and for a Node that does not exist (403).
async fn undeclared_node_slices(api: &ApiServer, run: &str) -> Value {
    let undeclared = format!("sd{run}-undeclared");
    kube_node(api, &undeclared).await;
    let slice = |name: &str, node: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "na.example.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "cpu-0", "nodeAllocatableResources": {"cpu": {"mapping": {"deviceMultiplier": "2"}}}}]}})
    };
    let path = "/apis/resource.k8s.io/v1/resourceslices";
    let (uc, ub) = call(api, "POST", path, Some(&slice(&format!("{undeclared}-s"), &undeclared))).await;
    let ghost = format!("sd{run}-ghost");
    let (gc, gb) = call(api, "POST", path, Some(&slice(&format!("{ghost}-s"), &ghost))).await;
    json!({"undeclared": refusal(uc, &ub), "ghost": refusal(gc, &gb)})
}

/// KEP-5517 cases (DRANodeAllocatableResources on), in 1.37's shape; each
/// node has 8 cpus and 16Gi of memory allocatable. [`to_1_36`] makes 1.36's
/// of them.
const NODE_ALLOCATABLE_CASES: &[Case] = &[
    Case {
        name: "na-mapped",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-cpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{c}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"cpu-0","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"2"}},"memory":{"mapping":{"deviceMultiplier":"1Gi"}}}},
                       {"name":"cpu-1","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"2"}},"memory":{"mapping":{"deviceMultiplier":"1Gi"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"two"},"spec":{"devices":{"requests":[{"name":"cpus","exactly":{"deviceClassName":"{c}-cpu","count":2}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"two"}],
            "initContainers":[{"name":"init","resources":{"claims":[{"name":"g"}]}}],
            "containers":[{"name":"main","resources":{"requests":{"cpu":"1"},"claims":[{"name":"g"}]}},{"name":"side"}]}}
    ]"#,
    },
    Case {
        name: "na-fill",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-cpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{c}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"cpu-0","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"3"}}}},
                       {"name":"cpu-1","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"3"}}}},
                       {"name":"cpu-2","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"3"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"a"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"b"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"a"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"1"},"claims":[{"name":"g"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"b"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"1"},"claims":[{"name":"g"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p3"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"c"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"100m"},"claims":[{"name":"g"}]}}]}}
    ]"#,
    },
    Case {
        name: "na-shared-claim",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-cpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{c}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"cpu-0","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"1"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"one"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"one"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"g"}]}}]}},
        {"kind":"Pod","metadata":{"name":"p2"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"one"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"g"}]}}]}}
    ]"#,
    },
    Case {
        name: "na-unreferenced",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-cpu"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{c}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"cpu-0","nodeAllocatableResources":{"cpu":{"mapping":{"deviceMultiplier":"1"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"one"},"spec":{"devices":{"requests":[{"name":"cpu","exactly":{"deviceClassName":"{c}-cpu"}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"one"}],"containers":[{"name":"c"}]}}
    ]"#,
    },
    Case {
        name: "na-capacity",
        objects: r#"[
        {"kind":"DeviceClass","metadata":{"name":"{c}-mem"},"spec":{"selectors":[{"cel":{"expression":"device.driver == '{d}'"}}]}},
        {"kind":"ResourceSlice","metadata":{"name":"{c}-s"},"spec":{"driver":"{d}","nodeName":"{node}","pool":{"name":"{c}","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"mem-0","allowMultipleAllocations":true,
                "capacity":{"memory":{"value":"8Gi","requestPolicy":{"default":"1Gi","validRange":{"min":"1Gi","step":"1Gi"}}}},
                "nodeAllocatableResources":{"memory":{"mapping":{"capacityKey":"memory","capacityMultiplier":"1"}}}}]}},
        {"kind":"ResourceClaim","metadata":{"name":"three-gi"},"spec":{"devices":{"requests":[{"name":"mem","exactly":{"deviceClassName":"{c}-mem",
            "capacity":{"requests":{"memory":"3Gi"}}}}]}}},
        {"kind":"Pod","metadata":{"name":"p1"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"three-gi"}],
            "containers":[{"name":"c","resources":{"claims":[{"name":"g"}]}}]}}
    ]"#,
    },
];

/// A 1.37 case object in 1.36's shape, as a driver built for 1.36 publishes
/// it: a device's `nodeAllocatableResources` become
/// `nodeAllocatableResourceMappings` (`deviceMultiplier`, or `capacityKey`
/// with `capacityMultiplier`, as `allocationMultiplier`; 1.36 has no overheads).
fn to_1_36(o: &mut Value) {
    for d in o["spec"]["devices"].as_array_mut().into_iter().flatten() {
        let Some(Value::Object(na)) = d.as_object_mut().and_then(|d| d.remove("nodeAllocatableResources")) else {
            continue;
        };
        let mut mappings = serde_json::Map::new();
        for (res, e) in na {
            let m = &e["mapping"];
            let mut out = json!({});
            if let Some(k) = m["capacityKey"].as_str() {
                out["capacityKey"] = json!(k);
            }
            let mult = if m["capacityKey"].is_string() { &m["capacityMultiplier"] } else { &m["deviceMultiplier"] };
            if !mult.is_null() {
                out["allocationMultiplier"] = mult.clone();
            }
            if m.is_object() {
                mappings.insert(res, out);
            }
        }
        d["nodeAllocatableResourceMappings"] = Value::Object(mappings);
    }
}

/// Node `name` on `side` for the KEP-5517 cases: 8 cpus, 16Gi; with
/// `declared`, its kubelet declares DRANodeAllocatableResources (1.37's
/// NodeDeclaredFeatures admission wants it for a slice with node-allocatable
/// resources).
async fn allocatable_node(api: &ApiServer, side: Side, name: &str, declared: bool) {
    let merge = "application/merge-patch+json";
    if side == Side::Kube {
        kube_node(api, name).await;
    } else {
        let n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
        let (code, body) = call(api, "POST", "/api/v1/nodes", Some(&n)).await;
        assert!(code == 201 || code == 409, "node {name}: {code} {body}");
        let res = json!({"cpu": "8", "memory": "16Gi", "pods": "110"});
        let status = json!({"status": {"capacity": res, "allocatable": res}});
        let path = format!("/api/v1/nodes/{name}/status");
        let (code, body) = kube::request_as(api, "PATCH", &path, merge, Some(&status), T).await.unwrap();
        assert_eq!(code, 200, "{body}");
    }
    if declared {
        let status = json!({"status": {"declaredFeatures": ["DRANodeAllocatableResources"]}});
        let path = format!("/api/v1/nodes/{name}/status");
        let (code, body) = kube::request_as(api, "PATCH", &path, merge, Some(&status), T).await.unwrap();
        assert_eq!(code, 200, "{body}");
    }
}

/// A release compared: its name, its control-plane oracle, dpctl's
/// arguments for it, and the shape of its objects.
type Release = (&'static str, &'static str, &'static [&'static str], fn(&mut Value));

/// #48, KEP-5517 per release: [`NODE_ALLOCATABLE_CASES`] with
/// DRANodeAllocatableResources on, on kube-scheduler of v1.37.2
/// (`controlplane`) and v1.36.3 (`controlplane-1.36`, the cases in 1.36's
/// shape) and on dpctl's control plane of the same profile: per pod whether
/// it is placed, the `status.nodeAllocatableResourceClaimStatuses` the
/// scheduler wrote, and its claims. A difference names the release and the
/// case, and the case is written where the failure says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_allocatable_resources_are_accounted_as_each_releases_scheduler_does() {
    const GATE: &str = "DRANodeAllocatableResources=true";
    let releases: [Release; 2] = [
        ("1.37", "controlplane", &["--feature-gates", GATE], |_| {}),
        ("1.36", "controlplane-1.36", &["--kubelet-version", "1.36", "--feature-gates", GATE], to_1_36),
    ];
    let mut failures = Vec::new();
    for (release, bin, dpctl_args, shape) in releases {
        let Some(bin) = upstream_peer(bin) else { return };
        let d = tmp();
        let (cp, kube_api) = upstream_plane(&bin, d.path(), &["-feature-gates", GATE]).await;
        let (_k, child, log, dpctl_api) = dpctl_plane(dpctl_args).await;
        let run = std::process::id().to_string();
        let declared = release == "1.37";
        let mut kube_runs = Vec::new();
        for case in NODE_ALLOCATABLE_CASES {
            allocatable_node(&kube_api, Side::Kube, &node_name(case, &run), declared).await;
            kube_runs.push(run_shaped(&kube_api, Side::Kube, case, &run, shape).await);
        }
        // Not vacuous: the real scheduler wrote node-allocatable statuses and left a pod unscheduled.
        let pods: Vec<&Value> =
            kube_runs.iter().flat_map(|o| o.as_object().into_iter().flat_map(|m| m.values())).collect();
        assert!(pods.iter().any(|p| p["nodeAllocatableResourceClaimStatuses"].is_array()), "{release}: {kube_runs:#?}");
        assert!(pods.iter().any(|p| p["scheduled"] == false), "{release}: {kube_runs:#?}");
        for (case, kube_out) in NODE_ALLOCATABLE_CASES.iter().zip(kube_runs) {
            allocatable_node(&dpctl_api, Side::Dpctl, &node_name(case, &run), declared).await;
            let dpctl_out = run_shaped(&dpctl_api, Side::Dpctl, case, &run, shape).await;
            let mut lines = Vec::new();
            diff("", &dpctl_out, &kube_out, &mut lines);
            if lines.is_empty() {
                eprintln!("node-allocatable differential {release}: {}: alike", case.name);
            } else {
                let f = write_shaped(case, &run, &lines, shape, &format!("{}-{release}", case.name));
                failures.push(format!(
                    "{release}, case {} (written to {}):\n{}",
                    case.name,
                    f.display(),
                    lines.join("\n")
                ));
            }
        }
        // The API server's validation of a status written in the release's shape.
        let bad = match release {
            "1.36" => json!([{"resourceClaimName": "nope", "resources": {"example.com/x": "-1"}}]),
            _ => json!([{"resourceClaimName": "nope", "mapping": [{"name": "example.com/x", "quantity": "-1"}]}]),
        };
        let (kube_bad, dpctl_bad) = (
            bad_node_allocatable_status(&kube_api, &run, &bad).await,
            bad_node_allocatable_status(&dpctl_api, &run, &bad).await,
        );
        assert_eq!(kube_bad["code"], 422, "{release}: {kube_bad}");
        if dpctl_bad != kube_bad {
            failures.push(format!("{release}, a bad status: dpctl {dpctl_bad}\n upstream {kube_bad}"));
        }
        stop_tailed(child, log).await.expect_code(0);
        stop_plane(cp).await;
    }
    assert!(failures.is_empty(), "dpctl accounts node-allocatable resources otherwise:\n{}", failures.join("\n\n"));
}

/// What `api` answers to na-mapped's pod p1 given `statuses` as its
/// `status.nodeAllocatableResourceClaimStatuses`: the code and each cause.
async fn bad_node_allocatable_status(api: &ApiServer, run: &str, statuses: &Value) -> Value {
    let path = format!("/api/v1/namespaces/sd{run}-na-mapped/pods/p1");
    let (code, mut pod) = call(api, "GET", &path, None).await;
    assert_eq!(code, 200, "{pod}");
    pod["status"]["nodeAllocatableResourceClaimStatuses"] = statuses.clone();
    let (code, got) = call(api, "PUT", &format!("{path}/status"), Some(&pod)).await;
    let causes: Vec<Value> = got["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"field": c["field"], "reason": c["reason"], "message": c["message"]}))
        .collect();
    json!({"code": code, "causes": causes})
}
