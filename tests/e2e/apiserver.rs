//! The mock kubelet's local API server from outside, as a client meets it:
//! `dpctl mock-kubelet --api-server` as a real process, raw HTTP/1.1 on its
//! loopback port. Authentication (the kubeconfig's bearer token) and the
//! limits kube-apiserver puts on what it stores.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// A kubelet root with the mock kubelet and its API server running.
struct Node {
    _d: tempfile::TempDir,
    root: PathBuf,
    kubelet: Option<(tokio::process::Child, Tail)>,
    addr: String,
    token: String,
    kubeconfig: PathBuf,
}

fn kubelet_cmd(root: &Path) -> tokio::process::Command {
    kubelet_cmd_with(root, &[])
}

fn kubelet_cmd_with(root: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut c = mock_kubelet_on(root, &["--api-server", "127.0.0.1:0"]);
    c.args(extra).stderr(Stdio::piped());
    c
}

impl Node {
    async fn start() -> Node {
        Node::start_with(&[]).await
    }

    async fn start_with(extra: &[&str]) -> Node {
        let d = tmp();
        let root = d.path().to_path_buf();
        let mut child = kubelet_cmd_with(&root, extra).spawn().unwrap();
        let mut log = Tail::stdout(&mut child);
        let ev = api_server_event(&mut log).await;
        let addr = api_authority(ev["addr"].as_str().unwrap());
        let kubeconfig = PathBuf::from(ev["kubeconfig"].as_str().unwrap());
        let token = kubeconfig_token(&kubeconfig);
        Node { _d: d, root, kubelet: Some((child, log)), addr, token, kubeconfig }
    }

    /// One request with `headers` (the token added unless `auth` is false): status, headers, body.
    async fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8], auth: bool) -> Answer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = api_connect(&self.kubeconfig).await;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        if auth {
            req.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(req.as_bytes()).await.unwrap();
        // The server may answer (and close) before it has read a body it refuses.
        let _ = s.write_all(body).await;
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let head = String::from_utf8_lossy(&buf[..split]).to_string();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        Answer { code, head, body: buf[split + 4..].to_vec() }
    }

    async fn json(&self, method: &str, path: &str, body: &Value) -> Answer {
        let h = [("Content-Type", "application/json"), ("Accept", "application/json")];
        self.call(method, path, &h, body.to_string().as_bytes(), true).await
    }

    async fn stop(mut self) {
        if let Some((k, log)) = self.kubelet.take() {
            stop_tailed(k, log).await.expect_code(0);
        }
    }
}

struct Answer {
    code: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn header(&self, name: &str) -> String {
        self.head
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
            .unwrap_or_default()
            .to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_kubeconfigs_bearer_token_are_401_unauthorized() {
    use std::os::unix::fs::PermissionsExt;
    let n = Node::start().await;
    let kc = n.root.join("kubeconfig");
    assert_eq!(std::fs::metadata(&kc).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(n.token.len(), 64, "a 32-byte random token in hex: {:?}", n.token);
    assert!(n.token.bytes().all(|b| b.is_ascii_hexdigit()));
    let node = "/api/v1/nodes/dpctl-node";
    let json = [("Accept", "application/json")];
    for (what, headers) in [
        ("no token", vec![("Accept", "application/json")]),
        ("a wrong token", vec![("Accept", "application/json"), ("Authorization", "Bearer not-the-token")]),
        ("basic auth", vec![("Accept", "application/json"), ("Authorization", "Basic YTpi")]),
    ] {
        let a = n.call("GET", node, &headers, b"", false).await;
        assert_eq!(a.code, 401, "{what}");
        assert_eq!(a.header("content-type"), "application/json", "{what}");
        assert_eq!(
            a.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            "{what}"
        );
    }
    // In the negotiated encoding, watches and writes included.
    let pb =
        n.call("GET", node, &[("Accept", "application/vnd.kubernetes.protobuf,application/json")], b"", false).await;
    assert_eq!((pb.code, pb.header("content-type").as_str()), (401, "application/vnd.kubernetes.protobuf"));
    assert!(pb.body.starts_with(b"k8s\0"));
    let w = n.call("GET", &format!("{SLICES}?watch=true"), &json, b"", false).await;
    assert_eq!(w.code, 401);
    let slice = json!({"metadata": {"name": "s"}, "spec": {"driver": "d.example.com", "nodeName": "dpctl-node", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}});
    let post =
        n.call("POST", SLICES, &[("Content-Type", "application/json")], slice.to_string().as_bytes(), false).await;
    assert_eq!(post.code, 401);
    let l = n.call("GET", SLICES, &json, b"", true).await;
    assert_eq!((l.code, l.json()["items"].as_array().map(Vec::len)), (200, Some(0)), "nothing was created");
    // With the token: served.
    let a = n.call("GET", node, &json, b"", true).await;
    assert_eq!((a.code, a.json()["metadata"]["name"].as_str()), (200, Some("dpctl-node")));
    n.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_the_mock_kubelet_did_not_write_is_never_written_over() {
    let d = tmp();
    let root = d.path();
    let mine = "apiVersion: v1\nkind: Config\n# the user's own\n";
    std::fs::write(root.join("kubeconfig"), mine).unwrap();
    let r = run_cmd_within(kubelet_cmd(root), 20).await;
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("will not write the API server's kubeconfig over this file")
            && r.stderr.contains("not one the mock kubelet wrote"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(root.join("kubeconfig")).unwrap(), mine);
    // Nor through a symlink.
    std::fs::remove_file(root.join("kubeconfig")).unwrap();
    let target = root.join("elsewhere");
    std::fs::write(&target, mine).unwrap();
    std::os::unix::fs::symlink(&target, root.join("kubeconfig")).unwrap();
    let r = run_cmd_within(kubelet_cmd(root), 20).await;
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), mine);
}

fn slice(name: &str, devices: usize) -> Value {
    let d: Vec<Value> = (0..devices).map(|i| json!({"name": format!("d{i}")})).collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "nodeName": "dpctl-node",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "devices": d}})
}

/// Issue: a 129-device slice, a non-DNS name and 70 kB of labels were all 201; no body limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_kube_apiserver_refuses_is_422_invalid_or_413_with_its_words() {
    let n = Node::start().await;
    let a = n.json("POST", SLICES, &slice("big", 129)).await;
    assert_eq!(a.code, 422);
    let st = a.json();
    assert_eq!(
        (st["kind"].as_str(), st["reason"].as_str(), st["code"].as_i64()),
        (Some("Status"), Some("Invalid"), Some(422))
    );
    assert_eq!(
        st["message"],
        "ResourceSlice.resource.k8s.io \"big\" is invalid: spec.devices: Too many: 129: must have at most 128 items"
    );
    assert_eq!(
        st["details"]["causes"],
        json!([{"reason": "FieldValueTooMany", "message": "Too many: 129: must have at most 128 items", "field": "spec.devices"}])
    );
    // In protobuf, as client-go sends it: the Status in protobuf.
    let pb = n
        .call(
            "POST",
            SLICES,
            &[
                ("Content-Type", "application/vnd.kubernetes.protobuf"),
                ("Accept", "application/vnd.kubernetes.protobuf,application/json"),
            ],
            &protobuf_slice(&slice("big", 129)),
            true,
        )
        .await;
    assert_eq!((pb.code, pb.header("content-type").as_str()), (422, "application/vnd.kubernetes.protobuf"));
    assert!(pb.body.windows(12).any(|w| w == b"spec.devices"), "the cause's field is in the protobuf Status");
    // Names it could not address.
    for bad in ["bad/slash", "sp ace", "x\u{0}y", "r\u{200f}tl"] {
        let a = n.json("POST", SLICES, &slice(bad, 1)).await;
        assert_eq!(
            (a.code, a.json()["details"]["causes"][0]["field"].as_str()),
            (422, Some("metadata.name")),
            "{bad:?}"
        );
    }
    // Label and annotation sizes.
    let mut l = slice("labelled", 1);
    l["metadata"]["labels"] = json!({"example.com/big": "v".repeat(70_000)});
    let a = n.json("POST", SLICES, &l).await;
    assert_eq!(a.code, 422);
    assert!(a.json()["details"]["causes"][0]["message"]
        .as_str()
        .unwrap()
        .ends_with("must be no more than 63 characters"));
    let mut an = slice("annotated", 1);
    an["metadata"]["annotations"] = json!({"a": "x".repeat(300_000)});
    let a = n.json("POST", SLICES, &an).await;
    assert_eq!(
        (a.code, a.json()["details"]["causes"][0]["message"].as_str()),
        (422, Some("Too long: may not be more than 262144 bytes"))
    );
    // Over 3 MiB: 413 before the body is read.
    let huge = vec![b' '; (3 << 20) + 1];
    let a = n.call("POST", SLICES, &[("Content-Type", "application/json")], &huge, true).await;
    assert_eq!(a.code, 413);
    assert_eq!(a.json()["message"], "Request entity too large: limit is 3145728");
    // Nothing refused was stored; what is valid is.
    let l = n.call("GET", SLICES, &[("Accept", "application/json")], b"", true).await;
    assert_eq!(l.json()["items"].as_array().map(Vec::len), Some(0));
    assert_eq!(n.json("POST", SLICES, &slice("gpu.example.com-node-1", 128)).await.code, 201);
    n.stop().await;
}

/// A ResourceSlice as client-go sends it in protobuf, its bytes built by hand
/// here from upstream's field numbers (independent of dpctl's encoder).
fn protobuf_slice(obj: &Value) -> Vec<u8> {
    // k8s\0 + runtime.Unknown{typeMeta{apiVersion, kind}, raw: ResourceSlice{metadata{name}, spec{driver, devices}}}.
    fn field(n: u8, b: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3) | 2];
        let mut len = b.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(b);
        out
    }
    let meta = field(1, obj["metadata"]["name"].as_str().unwrap().as_bytes());
    let mut spec = field(1, obj["spec"]["driver"].as_str().unwrap().as_bytes());
    spec.extend(field(3, obj["spec"]["nodeName"].as_str().unwrap().as_bytes()));
    for d in obj["spec"]["devices"].as_array().unwrap() {
        spec.extend(field(6, &field(1, d["name"].as_str().unwrap().as_bytes())));
    }
    let mut raw = field(1, &meta);
    raw.extend(field(2, &spec));
    let mut tm = field(1, b"resource.k8s.io/v1");
    tm.extend(field(2, b"ResourceSlice"));
    let mut out = b"k8s\0".to_vec();
    out.extend(field(1, &tm));
    out.extend(field(2, &raw));
    out
}

/// Issue #33: NVIDIA's driver reads /version ("API server version detection failed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_answers_the_kubelet_version_profiles_kubernetes_and_unserved_verbs_are_405() {
    let n = Node::start_with(&["--kubelet-version", "1.33"]).await;
    let a = n
        .call("GET", "/version", &[("Accept", "application/vnd.kubernetes.protobuf,application/json")], b"", true)
        .await;
    assert_eq!((a.code, a.header("content-type").as_str()), (200, "application/json"));
    let v = a.json();
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str(), v["gitVersion"].as_str()),
        (Some("1"), Some("33"), Some("v1.33.0"))
    );
    for k in ["gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"] {
        assert!(v[k].as_str().is_some_and(|s| !s.is_empty()), "{k}: {v}");
    }
    assert_eq!(n.call("GET", "/version", &[], b"", false).await.code, 401);
    let a = n.call("DELETE", "/version", &[("Accept", "application/json")], b"", true).await;
    assert_eq!((a.code, a.json()["reason"].as_str()), (405, Some("MethodNotAllowed")));
    let a = n.json("PUT", SLICES, &slice("x", 1)).await;
    assert_eq!(
        (a.code, a.json()["message"].as_str()),
        (405, Some("the server does not allow this method on the requested resource"))
    );
    n.stop().await;
}

/// #47 item 4: the built-in kinds a driver or its helpers write are stored
/// objects over HTTP: NVIDIA's plugin creates a Deployment (answered in
/// protobuf to a client that accepts it: apps/v1 has its protobuf form)
/// and labels its Node (the label read back, also in protobuf); a
/// ConfigMap, Secret, ServiceAccount, Event and Lease are created and read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_kinds_a_driver_writes_are_stored() {
    let n = Node::start().await;
    let both = "application/vnd.kubernetes.protobuf,application/json";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mps-control-daemon"},
        "spec": {"selector": {"matchLabels": {"app": "mps"}}, "template": {"metadata": {"labels": {"app": "mps"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let h = [("Content-Type", "application/json"), ("Accept", both)];
    let a = n
        .call("POST", "/apis/apps/v1/namespaces/nvidia/deployments", &h, deployment.to_string().as_bytes(), true)
        .await;
    assert_eq!(
        (a.code, a.header("content-type").as_str()),
        (201, "application/vnd.kubernetes.protobuf"),
        "{}",
        String::from_utf8_lossy(&a.body)
    );
    let created = dpctl::controlplane::protobuf::decode_object(&a.body).unwrap();
    assert_eq!((created["kind"].as_str(), created["spec"]["replicas"].as_i64()), (Some("Deployment"), Some(1)));
    let a = n.json("GET", "/apis/apps/v1/namespaces/nvidia/deployments/mps-control-daemon", &Value::Null).await;
    assert_eq!((a.code, a.json()["metadata"]["generation"].as_i64()), (200, Some(1)));

    let mut node = n.json("GET", "/api/v1/nodes/dpctl-node", &Value::Null).await.json();
    node["metadata"]["labels"] = json!({"nvidia.com/gpu.clique": "clique-1"});
    let a = n.json("PUT", "/api/v1/nodes/dpctl-node", &node).await;
    assert_eq!(a.code, 200, "{}", a.json());
    let a = n.call("GET", "/api/v1/nodes/dpctl-node", &[("Accept", both)], b"", true).await;
    assert_eq!(a.header("content-type"), "application/vnd.kubernetes.protobuf");
    assert!(a.body.windows(8).any(|w| w == b"clique-1"), "the label is in the protobuf Node");
    let h = [("Content-Type", "application/merge-patch+json"), ("Accept", "application/json")];
    let a = n
        .call(
            "PATCH",
            "/api/v1/nodes/dpctl-node/status",
            &h,
            br#"{"status":{"allocatable":{"example.com/gpu":"2"}}}"#,
            true,
        )
        .await;
    assert_eq!((a.code, a.json()["status"]["allocatable"]["example.com/gpu"].as_str()), (200, Some("2")));

    for (path, obj) in [
        ("/api/v1/namespaces/nvidia/configmaps", json!({"metadata": {"name": "cm"}, "data": {"k": "v"}})),
        ("/api/v1/namespaces/nvidia/secrets", json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})),
        ("/api/v1/namespaces/nvidia/serviceaccounts", json!({"metadata": {"name": "sa"}})),
        (
            "/api/v1/namespaces/nvidia/events",
            json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/nvidia/leases",
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
        ),
    ] {
        let a = n.json("POST", path, &obj).await;
        assert_eq!(a.code, 201, "{path}: {}", a.json());
        let name = obj["metadata"]["name"].as_str().unwrap();
        let got = n.json("GET", &format!("{path}/{name}"), &Value::Null).await;
        assert_eq!(
            (got.code, got.json()["metadata"]["uid"].clone()),
            (200, a.json()["metadata"]["uid"].clone()),
            "{path}"
        );
    }
    n.stop().await;
}
