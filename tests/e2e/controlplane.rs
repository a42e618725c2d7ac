//! dpctl against a real Kubernetes control plane: embedded etcd,
//! kube-apiserver, kube-scheduler and the DRA controllers of the release
//! pinned in tests/upstream/go.mod, one Go binary
//! (tests/upstream/cmd/controlplane) started once for this test binary
//! (`support::control_plane`). Each test uses its own namespace and node
//! names. `dpctl dra serve` publishes through deploy/'s RBAC and
//! ValidatingAdmissionPolicy with a service-account token bound to a pod on
//! its node, as in a DaemonSet pod; every deploy/ file passes server-side
//! dry-run; the real scheduler allocates a claim from the slice it publishes.
//! Without the build each test returns at once (the run's end says so);
//! under CI `upstream::upstream_peers_are_built_when_required` fails.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const DRIVER: &str = "gpu.dpctl.example.com";
const NS: &str = "dpctl-dra";
const SA: &str = "dpctl-dra-serve";
const POLICY: &str = "dpctl-dra-serve-resourceslices";

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file)
}

/// An answer of the API server: status code, body (JSON when it is).
struct Answer {
    code: u16,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// HTTP/1.1 chunked transfer coding, undone.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return out };
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).split(';').next().unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
}

/// One request to the API server `kubeconfig` names, with its CA and bearer
/// token; `content_type` for the body.
async fn call(kubeconfig: &Path, method: &str, path: &str, body: Option<(&str, &Value)>) -> Answer {
    call_with(kubeconfig, true, method, path, body).await
}

/// [`call`], with the kubeconfig's token only if `auth`.
async fn call_with(kubeconfig: &Path, auth: bool, method: &str, path: &str, body: Option<(&str, &Value)>) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let api = dpctl::client::kube::load_kubeconfig(kubeconfig).unwrap();
    let token = if auth { kubeconfig_token(kubeconfig) } else { String::new() };
    let mut s = api_connect(kubeconfig).await;
    let data = body.map(|(_, v)| v.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        api.authority,
        data.len()
    );
    if !token.is_empty() {
        req.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some((ct, _)) = body {
        req.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&data);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let head = String::from_utf8_lossy(&buf[..split]).to_ascii_lowercase();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let raw = &buf[split + 4..];
    let body = if head.contains("transfer-encoding: chunked") { dechunk(raw) } else { raw.to_vec() };
    Answer { code, text: String::from_utf8_lossy(&body).into_owned() }
}

async fn get(kubeconfig: &Path, path: &str) -> Answer {
    call(kubeconfig, "GET", path, None).await
}

async fn post(kubeconfig: &Path, path: &str, obj: &Value) -> Answer {
    call(kubeconfig, "POST", path, Some(("application/json", obj))).await
}

/// `controlplane apply` of `files` (server-side apply; dry-run=All with
/// `dry_run`): its exit code and one JSON line per object (a failure before
/// any object: its stderr as `{"error": ...}`).
async fn apply(cp: &ControlPlane, files: &[&Path], dry_run: bool) -> (i32, Vec<Value>) {
    let mut c = tokio::process::Command::new(upstream_bin().join("controlplane"));
    c.arg("apply").arg("-kubeconfig").arg(&cp.kubeconfig);
    if dry_run {
        c.arg("-dry-run");
    }
    c.args(files);
    let r = run_cmd_within(c, 60).await;
    let mut lines: Vec<Value> = r.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    if r.code != 0 {
        lines.push(json!({"error": r.stderr}));
    }
    (r.code, lines)
}

/// The documents of a multi-document YAML file for which `keep` is true, in a temp file.
fn docs(file: &Path, dir: &Path, keep: impl Fn(&str) -> bool) -> PathBuf {
    let text = std::fs::read_to_string(file).unwrap();
    let kept: Vec<&str> = text.split("\n---\n").filter(|d| keep(d)).collect();
    let out = dir.join(file.file_name().unwrap());
    std::fs::write(&out, kept.join("\n---\n")).unwrap();
    out
}

/// deploy/dra-serve-daemonset.yaml's Namespace, ServiceAccount, ClusterRole,
/// ClusterRoleBinding, ValidatingAdmissionPolicy and its binding, applied
/// server-side for real (the DaemonSet left out: no kubelet runs its pod).
async fn apply_dra_serve_rbac(cp: &ControlPlane, dir: &Path) {
    let f = docs(&deploy("dra-serve-daemonset.yaml"), dir, |d| !d.contains("\nkind: DaemonSet"));
    let (code, lines) = apply(cp, &[&f], false).await;
    assert_eq!(code, 0, "{lines:#?}");
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
}

/// A Node `name` the scheduler can place pods on: labelled with its hostname,
/// capacity in status, and without the not-ready taint the TaintNodesByCondition
/// admission plugin puts on every new Node (no node lifecycle controller runs).
async fn node(cp: &ControlPlane, name: &str) {
    let kc = &cp.kubeconfig;
    let n = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    let a = post(kc, "/api/v1/nodes", &n).await;
    assert!(a.code == 201 || a.code == 409, "create node {name}: {} {}", a.code, a.text);
    let merge = "application/merge-patch+json";
    let spec = json!({"spec": {"taints": null}});
    let a = call(kc, "PATCH", &format!("/api/v1/nodes/{name}"), Some((merge, &spec))).await;
    assert_eq!(a.code, 200, "{}", a.text);
    let res = json!({"cpu": "8", "memory": "16Gi", "pods": "110"});
    let status = json!({"status": {"capacity": res, "allocatable": res,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "dpctl test"}]}});
    let a = call(kc, "PATCH", &format!("/api/v1/nodes/{name}/status"), Some((merge, &status))).await;
    assert_eq!(a.code, 200, "{}", a.text);
}

/// A pod of the service account bound to `node` (never run: no kubelet), as
/// the DaemonSet's pod on that node is, and a kubeconfig with a token the
/// TokenRequest API binds to it (so the token names the node, as a projected
/// service-account token in a DaemonSet pod does).
async fn pod_token(cp: &ControlPlane, dir: &Path, pod: &str, node: Option<&str>) -> PathBuf {
    let mut spec = json!({"serviceAccountName": SA, "containers": [{"name": "dra-serve", "image": "registry.example.com/dpctl:0.1.0"}]});
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        // Left pending: no scheduler of that name runs (the real one would bind it to a node).
        None => spec["schedulerName"] = json!("dpctl-test-no-scheduler"),
    }
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NS}, "spec": spec});
    let a = post(&cp.kubeconfig, &format!("/api/v1/namespaces/{NS}/pods"), &p).await;
    assert_eq!(a.code, 201, "create pod {pod}: {}", a.text);
    let out = dir.join(format!("{pod}.kubeconfig"));
    let mut c = tokio::process::Command::new(upstream_bin().join("controlplane"));
    c.arg("token").arg("-kubeconfig").arg(&cp.kubeconfig);
    c.args(["-namespace", NS, "-serviceaccount", SA, "-pod", pod, "-out"]).arg(&out);
    let r = run_cmd_within(c, 60).await;
    assert_eq!(r.code, 0, "token: {}{}", r.stdout, r.stderr);
    out
}

/// A slice of `driver` for `node` named `name`, one device.
fn a_slice(name: &str, node: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "dev-0"}]}})
}

/// Wait until kube-apiserver enforces what was just applied: RBAC lets the
/// service account of `kc` list slices, and the ValidatingAdmissionPolicy
/// (which takes effect once the admission plugin's informer has it) refuses
/// it a slice for another node than `node` (asked with dryRun=All).
async fn rbac_and_policy_in_force(kc: &Path, node: &str) {
    let kc = kc.to_path_buf();
    let other = a_slice(&format!("{node}-in-force-probe"), "cp-node-probe");
    until(30, "deploy/'s RBAC and policy in force", || {
        let (kc, other) = (kc.clone(), other.clone());
        async move {
            let list = get(&kc, "/apis/resource.k8s.io/v1/resourceslices?limit=1").await;
            let probe = post(&kc, "/apis/resource.k8s.io/v1/resourceslices?dryRun=All", &other).await;
            let policy = probe.code == 422 && probe.text.contains(POLICY);
            (list.code == 200 && policy).then_some(())
        }
    })
    .await;
}

fn slice_name(node: &str) -> String {
    format!("{node}-{DRIVER}-pool-0")
}

fn slice_path(node: &str) -> String {
    format!("/apis/resource.k8s.io/v1/resourceslices/{}", slice_name(node))
}

/// `dpctl dra serve` of deploy/'s driver publishing for `node` through
/// `kubeconfig`, its JSON log followed; `--withdraw-on-exit`, since no kubelet
/// here wipes a stopped driver's slice (and so the policy's DELETE rule is exercised).
fn dra_serve(t: &DraTree, kubeconfig: &Path, node: &str) -> (tokio::process::Child, Tail) {
    let (root, cdi) = (s(&t.root), t.p("cdi"));
    let mut c = dpctl_cmd(&["--kubelet-root-dir", root, "dra", "serve", "--driver", DRIVER, "--cdi-dir", s(&cdi)]);
    c.args(["--devices", "4", "--log-format", "json", "--node-name", node, "--kubeconfig", s(kubeconfig)]);
    c.arg("--withdraw-on-exit");
    c.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail)
}

fn device_names(slice: &Value) -> Vec<String> {
    slice["spec"]["devices"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_string()).collect()
}

/// The control plane starts (once per test binary, so this also measures
/// its start on this machine) in under 20 s, kube-apiserver's /readyz passes every check
/// with the admin kubeconfig's CA and token, it serves resource.k8s.io/v1,
/// and a request without the token is system:anonymous's, refused (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_control_plane_starts_and_answers_readyz() {
    let Some(cp) = control_plane() else { return };
    eprintln!("control plane ready in {:.1} s (its own measure), {:.1} s from spawn", cp.seconds, cp.wall);
    // The bound (about 3 s measured on the shared 2-core machine).
    assert!(cp.seconds < 20.0, "the control plane took {:.1} s to be ready (at most 20 s)", cp.seconds);
    let a = get(&cp.kubeconfig, "/readyz?verbose").await;
    assert_eq!(a.code, 200, "{}", a.text);
    assert!(a.text.contains("readyz check passed"), "{}", a.text);
    assert!(a.text.contains("[+]etcd ok"), "{}", a.text);
    let a = get(&cp.kubeconfig, "/apis/resource.k8s.io/v1").await;
    assert_eq!(a.code, 200, "{}", a.text);
    let v = a.json();
    let kinds: Vec<&str> = v["resources"].as_array().unwrap().iter().filter_map(|r| r["kind"].as_str()).collect();
    assert!(kinds.contains(&"ResourceSlice") && kinds.contains(&"DeviceTaintRule"), "{kinds:?}");
    // No token: system:anonymous, whom RBAC does not let list slices.
    let a = call_with(&cp.kubeconfig, false, "GET", "/apis/resource.k8s.io/v1/resourceslices", None).await;
    assert_eq!(a.code, 403, "{}", a.text);
    assert!(a.json()["message"].as_str().unwrap().contains("\"system:anonymous\""), "{}", a.text);
}

/// `dpctl dra serve` as deploy/dra-serve-daemonset.yaml's service account,
/// under exactly its ClusterRole and ValidatingAdmissionPolicy, with a token
/// bound to a pod on its node: it replaces a stale slice of its name (an
/// UPDATE the policy lets through: same uid, its four devices), publishes it
/// again when it is deleted (a CREATE), and deletes it when it stops (a
/// DELETE), exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_publishes_updates_and_removes_its_slice_under_deploys_rbac_and_policy() {
    let Some(cp) = control_plane() else { return };
    let t = DraTree::new();
    let node_name = "cp-node-serve";
    apply_dra_serve_rbac(cp, &t.root).await;
    node(cp, node_name).await;
    let kc = pod_token(cp, &t.root, "dra-serve-publish", Some(node_name)).await;
    rbac_and_policy_in_force(&kc, node_name).await;

    // A stale slice of the name dra serve publishes (one device), as a previous instance left it.
    let stale = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node_name)},
        "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": "pool-0", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "stale"}]}});
    let a = post(&cp.kubeconfig, "/apis/resource.k8s.io/v1/resourceslices", &stale).await;
    assert_eq!(a.code, 201, "{}", a.text);
    let stale_uid = a.json()["metadata"]["uid"].as_str().unwrap().to_string();

    let (serve, mut log) = dra_serve(&t, &kc, node_name);
    log.wait_for("\"event\":\"resourceslice\"", 1).await;
    let slice = get(&cp.kubeconfig, &slice_path(node_name)).await.json();
    assert_eq!(device_names(&slice), ["dev-0", "dev-1", "dev-2", "dev-3"], "{slice}");
    assert_eq!(slice["metadata"]["uid"], stale_uid.as_str(), "replaced in place (PUT), not recreated: {slice}");
    assert_eq!(slice["spec"]["nodeName"], node_name);
    assert_eq!(slice["metadata"]["generation"], 2, "{slice}");

    // Deleted behind its back (as a kubelet does at start): published again.
    let a = call(&cp.kubeconfig, "DELETE", &slice_path(node_name), None).await;
    assert_eq!(a.code, 200, "{}", a.text);
    log.wait_for("\"republished\":true", 1).await;
    let again = get(&cp.kubeconfig, &slice_path(node_name)).await;
    assert_eq!(again.code, 200, "{}", again.text);
    assert_ne!(again.json()["metadata"]["uid"], stale_uid.as_str());
    assert_eq!(device_names(&again.json()), ["dev-0", "dev-1", "dev-2", "dev-3"]);

    // Stopped: its slice deleted, through the policy's DELETE rule.
    let r = stop_tailed(serve, log).await;
    r.expect_code(0);
    assert!(r.stdout.contains("\"event\":\"resourceslice-deleted\""), "{}", r.stdout);
    assert!(!r.stdout.contains("\"event\":\"error\""), "{}", r.stdout);
    let gone = get(&cp.kubeconfig, &slice_path(node_name)).await;
    assert_eq!(gone.code, 404, "{}", gone.text);
}

/// deploy/'s ValidatingAdmissionPolicy refuses the service account a slice
/// for a node its pod does not run on, in kube-apiserver's words (422
/// Invalid: its validations name no `reason`): `dra
/// serve --node-name` of another node exits 1 with that message; so is a
/// token bound to no pod (no node claim). The same slice is accepted for
/// the pod's own node, so the refusals are the policy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_policy_refuses_a_slice_for_another_node_in_kube_apiservers_words() {
    let Some(cp) = control_plane() else { return };
    let t = DraTree::new();
    let (mine, other) = ("cp-node-policy", "cp-node-elsewhere");
    apply_dra_serve_rbac(cp, &t.root).await;
    node(cp, mine).await;
    let kc = pod_token(cp, &t.root, "dra-serve-policy", Some(mine)).await;
    rbac_and_policy_in_force(&kc, mine).await;

    let slice = |node: &str| a_slice(&format!("{node}-policy-test"), node);
    // A validation without a `reason` denies as Invalid: 422, the message
    // "... is forbidden: ValidatingAdmissionPolicy ..." and the same text as the one cause.
    let a = post(&kc, "/apis/resource.k8s.io/v1/resourceslices", &slice(other)).await;
    assert_eq!(a.code, 422, "{}", a.text);
    let st = a.json();
    assert_eq!(st["reason"], "Invalid", "{st}");
    let want = format!(
        "ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: \
         this user running on node '{mine}' may not modify resourceslices on node '{other}'"
    );
    let name = format!("{other}-policy-test");
    assert_eq!(st["message"], format!("resourceslices.resource.k8s.io \"{name}\" is forbidden: {want}"), "{st}");
    assert_eq!(st["details"]["causes"][0]["message"], want.as_str(), "{st}");
    // A cluster-scoped slice (no nodeName) is refused too.
    let mut all = slice(mine);
    all["metadata"]["name"] = json!(format!("{mine}-all-nodes"));
    all["spec"].as_object_mut().unwrap().remove("nodeName");
    all["spec"]["allNodes"] = json!(true);
    let a = post(&kc, "/apis/resource.k8s.io/v1/resourceslices", &all).await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert!(a.json()["message"].as_str().unwrap().ends_with("may not modify cluster resourceslices"), "{}", a.text);
    // Its own node's: created (and deleted) under the same RBAC and policy.
    let a = post(&kc, "/apis/resource.k8s.io/v1/resourceslices", &slice(mine)).await;
    assert_eq!(a.code, 201, "{}", a.text);
    let a = call(&kc, "DELETE", &format!("/apis/resource.k8s.io/v1/resourceslices/{mine}-policy-test"), None).await;
    assert_eq!(a.code, 200, "{}", a.text);

    // dra serve for the other node: refused at its first publish, exit 1, the server's message.
    let (serve, log) = dra_serve(&t, &kc, other);
    let r = tokio::time::timeout(Duration::from_secs(30), serve.wait_with_output()).await.unwrap().unwrap();
    let out = log.rest().await;
    assert_eq!(r.status.code(), Some(1), "{out}");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!("create ResourceSlice {}: the API server answered 422", slice_name(other)))
            && err.contains(&want),
        "{err}"
    );
    assert_eq!(get(&cp.kubeconfig, &slice_path(other)).await.code, 404);

    // A token bound to a pod on no node carries no node name: refused for any slice.
    let unbound = pod_token(cp, &t.root, "dra-serve-unscheduled", None).await;
    let a = post(&unbound, "/apis/resource.k8s.io/v1/resourceslices", &slice(mine)).await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert!(a.json()["message"].as_str().unwrap().contains("no node association found for the user"), "{}", a.text);
}

/// Every manifest in deploy/ passes server-side apply with dryRun=All on
/// kube-apiserver (schemas, defaulting, validation, admission: the
/// namespaces and the system-node-critical PriorityClass exist). The
/// Namespace deploy/ creates is applied first for real, as `kubectl apply -f`
/// would create it before the objects in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deploy_manifest_passes_server_side_dry_run() {
    let Some(cp) = control_plane() else { return };
    let d = tmp();
    let ns = docs(&deploy("dra-serve-daemonset.yaml"), d.path(), |doc| doc.contains("\nkind: Namespace"));
    let (code, lines) = apply(cp, &[&ns], false).await;
    assert_eq!((code, lines.len()), (0, 1), "{lines:#?}");
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [deploy(""), deploy("npd")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, lines) = apply(cp, &refs, true).await;
    let refused: Vec<&Value> = lines.iter().filter(|l| l["code"] != 200).collect();
    assert!(refused.is_empty() && code == 0, "refused by kube-apiserver (dry-run):\n{refused:#?}");
    // One line per document of every file.
    let want: usize = files.iter().map(|f| std::fs::read_to_string(f).unwrap().matches("\nkind: ").count()).sum();
    assert_eq!(lines.len(), want, "{lines:#?}");
    // Nothing was written: dry-run.
    let a = get(&cp.kubeconfig, "/apis/apps/v1/namespaces/dpctl-dra/daemonsets/dpctl-dra-serve").await;
    assert_eq!(a.code, 404, "{}", a.text);
}

/// The real scheduler allocates a claim from the slice `dpctl dra serve`
/// publishes: dra serve runs as the node itself (system:node:NAME, so the
/// Node authorizer and NodeRestriction decide), deploy/dra-claim-pod.yaml's
/// DeviceClass, ResourceClaimTemplate and Pod are applied (in this test's
/// namespace, the pod kept to this test's node), the resourceclaim
/// controller makes the claim from the template, and the scheduler binds
/// the pod to the node with one of dra serve's devices in the claim's
/// status.allocation; deleted, the slice is published again as the node.
/// The node may not publish a slice for another node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_scheduler_allocates_a_claim_from_the_slice_dra_serve_publishes() {
    let Some(cp) = control_plane() else { return };
    let t = DraTree::new();
    let node_name = CONTROL_PLANE_NODES[0];
    let ns = "cp-sched";
    node(cp, node_name).await;
    let a = post(
        &cp.kubeconfig,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.text);
    let node_kc = cp.dir.join(format!("node-{node_name}.kubeconfig"));

    // The node's own identity may not write another node's slice (NodeRestriction).
    let other = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "not-mine"},
        "spec": {"driver": DRIVER, "nodeName": "cp-node-other", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": []}});
    let a = post(&node_kc, "/apis/resource.k8s.io/v1/resourceslices", &other).await;
    assert_eq!(a.code, 403, "{}", a.text);
    assert!(
        a.json()["message"]
            .as_str()
            .unwrap()
            .contains("can only create ResourceSlice with the same NodeName as the requesting node"),
        "{}",
        a.text
    );

    let (serve, mut log) = dra_serve(&t, &node_kc, node_name);
    log.wait_for("\"event\":\"resourceslice\"", 1).await;

    // deploy/dra-claim-pod.yaml, in this test's namespace, its pod kept to this test's node.
    let text = std::fs::read_to_string(deploy("dra-claim-pod.yaml")).unwrap();
    let text = text.replace("namespace: default", &format!("namespace: {ns}")).replace(
        "spec:\n  restartPolicy: Never\n",
        &format!("spec:\n  restartPolicy: Never\n  nodeSelector:\n    kubernetes.io/hostname: {node_name}\n"),
    );
    assert!(text.contains("nodeSelector"), "deploy/dra-claim-pod.yaml changed shape: {text}");
    let f = t.p("dra-claim-pod.yaml");
    std::fs::write(&f, text).unwrap();
    let (code, lines) = apply(cp, &[&f], false).await;
    assert_eq!(code, 0, "{lines:#?}");

    let pod_path = format!("/api/v1/namespaces/{ns}/pods/dra-fake-gpu-consumer");
    let kc = cp.kubeconfig.clone();
    let pod = until(60, "the pod bound to a node with its claim's name in its status", || {
        let (kc, p) = (kc.clone(), pod_path.clone());
        async move {
            let pod = get(&kc, &p).await.json();
            let named = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].is_string();
            (pod["spec"]["nodeName"].is_string() && named).then_some(pod)
        }
    })
    .await;
    assert_eq!(pod["spec"]["nodeName"], node_name, "{pod}");
    let claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str().unwrap();
    let claim =
        get(&cp.kubeconfig, &format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim_name}")).await;
    assert_eq!(claim.code, 200, "{}", claim.text);
    let claim = claim.json();
    let alloc = &claim["status"]["allocation"];
    let results = alloc["devices"]["results"].as_array().expect("status.allocation.devices.results");
    assert_eq!(results.len(), 1, "{claim}");
    assert_eq!((results[0]["driver"].as_str(), results[0]["pool"].as_str()), (Some(DRIVER), Some("pool-0")), "{claim}");
    assert_eq!(results[0]["request"], "gpu", "{claim}");
    let dev = results[0]["device"].as_str().unwrap();
    assert!(["dev-0", "dev-1", "dev-2", "dev-3"].contains(&dev), "{claim}");
    let on = &alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0];
    assert_eq!((on["key"].as_str(), on["values"][0].as_str()), (Some("metadata.name"), Some(node_name)), "{claim}");
    assert_eq!(claim["status"]["reservedFor"][0]["name"], "dra-fake-gpu-consumer", "{claim}");

    // Deleted behind its back: published again with the node's own credentials
    // (it lists its node's slices by field selector: a GET of the deleted slice is 403 for a node).
    let a = call(&cp.kubeconfig, "DELETE", &slice_path(node_name), None).await;
    assert_eq!(a.code, 200, "{}", a.text);
    log.wait_for("\"republished\":true", 1).await;

    // Stopped: the node deletes its own slice.
    let r = stop_tailed(serve, log).await;
    r.expect_code(0);
    assert!(!r.stdout.contains("\"event\":\"error\""), "{}", r.stdout);
    assert_eq!(get(&cp.kubeconfig, &slice_path(node_name)).await.code, 404);
}

/// A control plane of its own (not the shared one): ready, its etcd
/// answering; SIGTERM stops every component and closes etcd (its client port
/// refuses connections), exit 0, within 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_stops_cleanly_on_sigterm() {
    let Some(bin) = upstream_peer("controlplane") else { return };
    let d = tmp();
    let mut c = tokio::process::Command::new(bin);
    c.arg("serve").arg("-dir").arg(d.path());
    c.stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    let mut child = c.spawn().unwrap();
    let mut out = Tail::stdout(&mut child);
    out.wait_for("\"ready\":true", 1).await;
    let ready: Value = serde_json::from_str(out.seen().lines().next().unwrap()).unwrap();
    let etcd = ready["etcd"].as_str().unwrap().trim_start_matches("http://").to_string();
    assert!(tokio::net::TcpStream::connect(&etcd).await.is_ok(), "etcd at {etcd} while running");
    let kc = PathBuf::from(ready["kubeconfig"].as_str().unwrap());
    assert_eq!(get(&kc, "/readyz").await.code, 200);
    sigterm(&child);
    let st = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("stopped within 30 s").unwrap();
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert!(tokio::net::TcpStream::connect(&etcd).await.is_err(), "etcd at {etcd} still listening");
}
