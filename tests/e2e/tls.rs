//! `dra serve` on a TLS API server, as on a real cluster: `mock-kubelet
//! --api-server --api-server-tls` serves HTTPS with its own CA written into
//! its kubeconfig; `dra serve --kubeconfig` publishes its ResourceSlice and
//! reads claims over it, refuses a server its CA did not sign, and finds the
//! same server through in-cluster config (a fake service-account mount).

use crate::support::*;
use serde_json::Value;
use std::path::Path;

const DRIVER: &str = "gpu.example.com";
const CLAIM: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: 11111111-2222-3333-4444-555555555555\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.example.com\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\n  uid: pod-1\nspec:\n  resourceClaims:\n  - name: g\n    resourceClaimName: gpu\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: g\n";

/// A CA of the same name as the mock kubelet's but another key (valid to 2126).
const OTHER_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBpzCCAU2gAwIBAgIUJv7paZnMtZQzqACQiAWlJ9ncmJ0wCgYIKoZIzj0EAwIw
IDEeMBwGA1UEAwwVZHBjdGwgbW9jay1rdWJlbGV0IENBMCAXDTI2MTEyODAxMDIy
MVoYDzIxMjYxMTA0MDEwMjIxWjAgMR4wHAYDVQQDDBVkcGN0bCBtb2NrLWt1YmVs
ZXQgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASiMNRvFlw8s3Fvmskeh4+2
WKuGM3rQyOrfkOUDnkAK3CUVq7/MkJ3GeS+cSnlpWMk7pG6qGk1xMVJbo8VCcb4z
o2MwYTAdBgNVHQ4EFgQUG11ee4Mu7jr48bwFpZ5S/qSQaPswHwYDVR0jBBgwFoAU
G11ee4Mu7jr48bwFpZ5S/qSQaPswDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8E
BAMCAgQwCgYIKoZIzj0EAwIDSAAwRQIgJ0z3Kpf5/V0onXVMLkH+z5dNssv9Izpx
6kzwozXqghUCIQD1eFVWcxHHeqDOsLPDRwqB9YEwbSK5jwMlxP4Ex6SSmw==
-----END CERTIFICATE-----
";

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// The value of `key: ` in a kubeconfig the mock kubelet wrote.
fn field(kubeconfig: &str, key: &str) -> String {
    let prefix = format!("{key}: ");
    kubeconfig.lines().find_map(|l| l.trim().strip_prefix(prefix.as_str())).unwrap().to_string()
}

/// `dra serve` publishing with `extra` (a kubeconfig, or none), its JSON log followed.
fn driver(t: &DraTree, extra: &[&str], env: &[(&str, &str)]) -> (tokio::process::Child, Tail) {
    let (root, cdi) = (s(&t.root), t.p("cdi"));
    let mut args = vec![
        "--kubelet-root-dir",
        root,
        "dra",
        "serve",
        "--driver",
        DRIVER,
        "--cdi-dir",
        s(&cdi),
        // No health service: the kubelet learns the devices from the published slice only.
        "--services",
        "v1.DRAPlugin",
        "--pool",
        "tls-pool",
        "--node-name",
        "dpctl-node",
        "--log-format",
        "json",
    ];
    args.extend_from_slice(extra);
    let mut c = dpctl_cmd(&args);
    c.envs(env.iter().copied());
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail)
}

/// A kubeconfig like `kc` with its CA replaced (inline, base64) by `ca_pem`.
fn with_ca(kc: &str, ca_pem: &str) -> String {
    use base64::Engine as _;
    kc.replace(&field(kc, "certificate-authority-data"), &base64::engine::general_purpose::STANDARD.encode(ca_pem))
}

fn ca_of(kc: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD.decode(field(kc, "certificate-authority-data")).unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_publishes_over_https_and_a_pods_claim_is_prepared_from_it() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0", "--api-server-tls"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let api = &events(&log, "api-server")[0];
    let url = api["addr"].as_str().unwrap().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{api}");
    let kubeconfig = t.p("kubeconfig");
    let kc = std::fs::read_to_string(&kubeconfig).unwrap();
    assert_eq!(field(&kc, "server"), url);
    assert!(ca_of(&kc).starts_with("-----BEGIN CERTIFICATE-----"), "{kc}");
    assert!(!field(&kc, "token").is_empty(), "the bearer token stays: {kc}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777, 0o600);
    // Plain http to the TLS port is not served.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = tokio::net::TcpStream::connect(url.trim_start_matches("https://")).await.unwrap();
        sock.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = Vec::new();
        let _ = sock.read_to_end(&mut buf).await;
        assert!(!String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf));
    }

    let (driver, mut dlog) = driver(&t, &["--kubeconfig", s(&kubeconfig), "--withdraw-on-exit"], &[]);
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    let published = &events(&dlog, "resourceslice")[0];
    assert_eq!(published["name"], "dpctl-node-gpu.example.com-tls-pool", "{published}");
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write("claim.yaml", CLAIM);
    t.write("pod.yaml", POD);
    // The allocator found the device in the slice published over https, and
    // the driver read the claim's allocation over https to prepare it.
    log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let p = &events(&log, "claim-prepared")[0];
    assert!(p["devices"][0].as_str().unwrap().starts_with("gpu.example.com/tls-pool/dev-"), "{p}");
    let n = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins"))]).await;
    assert!(n.stdout.contains("dpctl-node-gpu.example.com-tls-pool"), "{}", n.stdout);
    // Asked to, the driver deletes its slice on exit, over https too.
    stop_tailed(driver, dlog).await;
    let n = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins"))]).await;
    assert!(!n.stdout.contains("dpctl-node-gpu.example.com-tls-pool"), "{}", n.stdout);
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// One line, exit non-zero, naming the kubeconfig field to fix.
fn assert_refused(r: &Run, want: &[&str]) {
    assert_ne!(r.code, 0, "{}", r.stdout);
    let err = r.stderr.trim();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_whose_ca_did_not_sign_the_server_or_whose_name_it_lacks_is_refused_in_one_line() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0", "--api-server-tls"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let kc = std::fs::read_to_string(t.p("kubeconfig")).unwrap();
    let dir = tmp();
    let run = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let (root, cdi) = (t.root.display().to_string(), t.p("cdi").display().to_string());
        let args = [
            "--kubelet-root-dir".to_string(),
            root,
            "dra".into(),
            "serve".into(),
            "--driver".into(),
            DRIVER.into(),
            "--cdi-dir".into(),
            cdi,
            "--no-register".into(),
            "--node-name".into(),
            "dpctl-node".into(),
            "--kubeconfig".into(),
            path.display().to_string(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_cmd(dpctl_cmd(&args))
    };
    let wrong = run("wrong-ca", with_ca(&kc, OTHER_CA)).await;
    assert_refused(&wrong, &["TLS handshake failed", "not signed by the kubeconfig's certificate-authority"]);
    let name =
        kc.replace("certificate-authority-data:", "tls-server-name: api.example.com\n    certificate-authority-data:");
    let r = run("wrong-name", name).await;
    assert_refused(&r, &["TLS handshake failed", "tls-server-name"]);
    // The CA as a file, relative to the kubeconfig's directory, is read as the inline one.
    std::fs::write(dir.path().join("ca.crt"), ca_of(&kc)).unwrap();
    let mut text = kc.clone();
    text = text.replace(
        &format!("certificate-authority-data: {}", field(&kc, "certificate-authority-data")),
        "certificate-authority: ca.crt",
    );
    let r = run("ca-file", text.replace("token:", "tokenFile: nowhere\n    token:")).await;
    assert_refused(&r, &["--kubeconfig", "tokenFile", "nowhere"]);
    // insecure-skip-tls-verify trusts any certificate: the other CA is no obstacle then.
    let insecure = with_ca(&kc, OTHER_CA).replace(
        &format!("certificate-authority-data: {}", field(&with_ca(&kc, OTHER_CA), "certificate-authority-data")),
        "insecure-skip-tls-verify: true",
    );
    let (d, mut dlog) = driver(&t, &["--kubeconfig", s(&write(dir.path(), "insecure", &insecure))], &[]);
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    stop_tailed(d, dlog).await;
    let (d, mut dlog) = driver(&t, &["--kubeconfig", s(&write(dir.path(), "ca-file-ok", &text))], &[]);
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    stop_tailed(d, dlog).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// In a pod: no --kubeconfig, KUBERNETES_SERVICE_HOST/PORT and the
/// service-account mount's token and ca.crt (moved by DPCTL_SERVICEACCOUNT_DIR).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_kubeconfig_dra_serve_in_a_pod_uses_the_service_account_and_kubernetes_service() {
    let t = DraTree::new();
    let mut kubelet = mock_kubelet_on(&t.root, &["--api-server", "127.0.0.1:0", "--api-server-tls"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let kc = std::fs::read_to_string(t.p("kubeconfig")).unwrap();
    let port = field(&kc, "server").rsplit(':').next().unwrap().to_string();
    let mount = tmp();
    write(mount.path(), "token", &format!("{}\n", field(&kc, "token")));
    write(mount.path(), "ca.crt", &ca_of(&kc));
    write(mount.path(), "namespace", "dra-system");
    let sa = s(mount.path()).to_string();
    let env = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
        ("DPCTL_SERVICEACCOUNT_DIR", sa.as_str()),
    ];
    let (d, mut dlog) = driver(&t, &[], &env);
    dlog.wait_for("\"event\":\"resourceslice\"", 1).await;
    assert_eq!(events(&dlog, "resourceslice")[0]["server"], format!("127.0.0.1:{port}"));
    stop_tailed(d, dlog).await;
    // A token the server does not know: 401, said in one line.
    write(mount.path(), "token", "not-the-token");
    let (root, cdi) = (s(&t.root), t.p("cdi"));
    let mut c = dpctl_cmd(&[
        "--kubelet-root-dir",
        root,
        "dra",
        "serve",
        "--driver",
        DRIVER,
        "--cdi-dir",
        s(&cdi),
        "--no-register",
        "--node-name",
        "dpctl-node",
    ]);
    c.envs(env);
    let r = run_cmd(c).await;
    assert_refused(&r, &["401"]);
    // Outside a pod (no KUBERNETES_SERVICE_HOST) nothing is published: the driver just serves.
    let (root, cdi) = (s(&t.root), t.p("cdi"));
    let mut c = dpctl_cmd(&[
        "--kubelet-root-dir",
        root,
        "dra",
        "serve",
        "--driver",
        DRIVER,
        "--cdi-dir",
        s(&cdi),
        "--log-format",
        "json",
    ]);
    c.env("DPCTL_SERVICEACCOUNT_DIR", &sa).env_remove("KUBERNETES_SERVICE_HOST");
    let mut child = c.spawn().unwrap();
    let mut tail = Tail::stdout(&mut child);
    // "registered" comes after the point where a slice would have been published.
    tail.wait_for("\"event\":\"registered\"", 1).await;
    let rest = stop_tailed(child, tail).await;
    assert!(!rest.stdout.contains("resourceslice"), "{}", rest.stdout);
    stop_tailed(kubelet, log).await.expect_code(0);
}
