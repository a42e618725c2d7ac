//! Kubeconfigs as client-go reads them: `exec` credential plugins and
//! `KUBECONFIG`'s files merged.
//!
//! - end to end: `dpctl dra serve` publishes to the mock kubelet's HTTPS API
//!   server with a token an exec plugin (a shell script) prints; a wrong
//!   token is the server's 401 (after the one re-run client-go makes); a
//!   missing plugin is client-go's not-found error with the installHint;
//! - the differential oracle: the same kubeconfig sets read by real client-go
//!   (`tests/upstream/cmd/kubeconfig`: clientcmd's default loading rules, the
//!   rest.Config and, through the transport, the exec plugin's credential)
//!   and by dpctl, compared field by field and error by error.

use crate::support::*;
use dpctl::client::kube::{self, config::Pem, Loaded};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";
const DRIVER: &str = "gpu.example.com";

/// The mock kubelet with its (HTTPS, token) API server; its kubeconfig once written.
async fn api_node(root: &Path) -> (tokio::process::Child, Tail, PathBuf) {
    let mut kubelet = mock_kubelet_on(root, &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let ev = log
        .seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "api-server")
        .unwrap();
    (kubelet, log, PathBuf::from(ev["kubeconfig"].as_str().unwrap()))
}

/// `dpctl dra serve` publishing through `kubeconfig` on a fresh kubelet root, for node-1.
fn dra_serve(root: &Path, kubeconfig: &Path) -> tokio::process::Command {
    dra_serve_for(root, kubeconfig, "node-1")
}

/// [`dra_serve`] for `node`.
fn dra_serve_for(root: &Path, kubeconfig: &Path, node: &str) -> tokio::process::Command {
    dra_serve_publishing(root, DRIVER, kubeconfig, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_publishes_with_an_exec_plugins_token_and_fails_as_client_go_without_it() {
    let d = tmp();
    let (kubelet, klog, kc) = api_node(d.path()).await;
    let token = kubeconfig_token(&kc);
    assert!(!token.is_empty(), "the mock kubelet's API server wants a token");
    let plugins = tmp();
    let dir = plugins.path();

    // The right token from a v1 plugin: the slice is published, the plugin ran once.
    let good = exec_plugin(dir, "good", V1, &json!({"token": token}).to_string());
    let kc_good = exec_kubeconfig(dir, &kc, &exec_user(&good, V1));
    let root = tmp();
    let mut serve = dra_serve(root.path(), &kc_good).spawn().unwrap();
    let mut out = Tail::stdout(&mut serve);
    out.wait_for("\"event\":\"resourceslice\"", 1).await;
    let api = kube::load_kubeconfig(&kc).unwrap();
    let name = format!("node-1-{DRIVER}-pool-0");
    let (st, slice) = kube::request(
        &api,
        "GET",
        &format!("/apis/resource.k8s.io/v1/resourceslices/{name}"),
        None,
        std::time::Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!((st, slice["spec"]["nodeName"].as_str()), (200, Some("node-1")), "{slice}");
    assert_eq!(exec_plugin_runs(dir, "good"), 1, "the credential is kept: no expiry");
    stop_tailed(serve, out).await;

    // A wrong token: the server's 401, after the one re-run of the plugin client-go makes on a 401.
    std::fs::create_dir(dir.join("bad")).unwrap();
    let bad = exec_plugin(&dir.join("bad"), "bad", V1BETA1, r#"{"token":"not-the-token"}"#);
    let kc_bad = exec_kubeconfig(&dir.join("bad"), &kc, &format!("{{command: {}, apiVersion: {V1BETA1}}}", s(&bad)));
    let r = run_cmd(dra_serve(tmp().path(), &kc_bad)).await;
    r.expect_code(1);
    assert!(r.stderr.contains(&format!("create ResourceSlice {name}: the API server answered 401")), "{}", r.stderr);
    assert_eq!(exec_plugin_runs(&dir.join("bad"), "bad"), 2, "a 401 runs the plugin again once");

    // No such plugin: client-go's words with the kubeconfig's installHint, on one line.
    std::fs::create_dir(dir.join("missing")).unwrap();
    let kc_missing = exec_kubeconfig(
        &dir.join("missing"),
        &kc,
        &format!("{{command: dpctl-no-such-credential-plugin, apiVersion: {V1}, interactiveMode: IfAvailable, installHint: \"Install it with:\\n  apt install dpctl-no-such-credential-plugin\"}}"),
    );
    let r = run_cmd(dra_serve(tmp().path(), &kc_missing)).await;
    r.expect_code(1);
    let line = r.stderr.lines().find(|l| l.contains("getting credentials")).unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(
        line.contains("getting credentials: exec: executable dpctl-no-such-credential-plugin not found; It looks like you are trying to use a client-go credential plugin that is not installed."),
        "{line}"
    );
    assert!(line.ends_with("; Install it with: apt install dpctl-no-such-credential-plugin"), "{line}");
    stop_tailed(kubelet, klog).await.expect_code(0);
}

/// A scratch directory of kubeconfig files for one differential case.
struct Case {
    name: &'static str,
    files: Vec<(&'static str, String)>,
    /// KUBECONFIG (file names joined with `:`, relative to the case's dir), or…
    list: Vec<&'static str>,
    /// … `--kubeconfig` (read alone, whatever KUBECONFIG says).
    explicit: Option<&'static str>,
    context: Option<&'static str>,
    /// Both must fail; dpctl's error must contain client-go's (whitespace and `;` aside).
    fails: bool,
    /// Only that both fail (parser messages differ): dpctl's error must contain this.
    loose: Option<&'static str>,
}

fn norm(s: &str) -> String {
    s.replace(';', " ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// client-go's answer for `case` in `dir`.
async fn client_go(bin: &Path, dir: &Path, case: &Case) -> Value {
    let mut c = tokio::process::Command::new(bin);
    c.current_dir(dir).env("HOME", dir).env_remove("KUBERNETES_SERVICE_HOST").arg("-request");
    let list: Vec<String> = case.list.iter().map(|f| s(&dir.join(f)).to_string()).collect();
    c.env("KUBECONFIG", list.join(":"));
    if let Some(e) = case.explicit {
        c.arg("-kubeconfig").arg(dir.join(e));
    }
    if let Some(x) = case.context {
        c.arg("-context").arg(x);
    }
    c.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), c.output()).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{}: {e}: {text}{}", case.name, String::from_utf8_lossy(&out.stderr)))
}

/// dpctl's answer for `case` in `dir`, in the oracle's shape.
async fn dpctl_reads(dir: &Path, case: &Case) -> Value {
    let fail = |stage: &str, e: String| json!({"stage": stage, "error": e});
    let rc = match case.explicit {
        Some(e) => kube::read_kubeconfig(&dir.join(e), case.context),
        None => {
            let list: Vec<String> = case.list.iter().map(|f| s(&dir.join(f)).to_string()).collect();
            match kube::read_kubeconfig_list(&list.join(":"), case.context) {
                Ok(Loaded::Found(rc)) => Ok(rc),
                Ok(Loaded::NotFound(_)) => {
                    // What dra serve says then (outside a pod).
                    let e = kube::load_default(None, Some(&list.join(":")), case.context).unwrap_err();
                    return fail("config", e.to_string());
                }
                Err(e) => Err(e),
            }
        }
    };
    let rc = match rc {
        Ok(rc) => rc,
        Err(e) => return fail("config", e.to_string()),
    };
    let secure = rc.https;
    let mut out = json!({
        "host": rc.server,
        "ca": rc.ca.is_some(),
        "caFile": match &rc.ca { Some(Pem::File(f)) => s(f).to_string(), _ => String::new() },
        "insecure": rc.insecure,
        "serverName": rc.tls_server_name.clone().unwrap_or_default(),
        // clientcmd reads a user only for a TLS server.
        "token": if secure { rc.token.clone().unwrap_or_default() } else { String::new() },
        "tokenFile": match (&rc.token_file, secure) { (Some(f), true) => s(f).to_string(), _ => String::new() },
        "certFile": match (&rc.client_cert, secure) { (Some((Pem::File(f), _)), true) => s(f).to_string(), _ => String::new() },
        "keyFile": match (&rc.client_cert, secure) { (Some((_, Pem::File(f))), true) => s(f).to_string(), _ => String::new() },
        "certData": matches!((&rc.client_cert, secure), (Some((Pem::Data(_), _)), true)),
        "username": match (&rc.basic, secure) { (Some((u, _)), true) => u.clone(), _ => String::new() },
    });
    if let Some(p) = &rc.proxy {
        out["proxy"] = json!(p.url);
    }
    if let (Some(e), true) = (&rc.exec, secure) {
        let mode = match e.interactive {
            kube::exec::InteractiveMode::Never => "Never",
            kube::exec::InteractiveMode::IfAvailable => "IfAvailable",
            kube::exec::InteractiveMode::Always => "Always",
        };
        out["exec"] = json!({
            "command": e.command, "args": e.args,
            "env": e.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>(),
            "apiVersion": e.api_version, "interactiveMode": mode, "provideClusterInfo": e.provide_cluster_info,
            "installHint": e.install_hint,
        });
    }
    let api = match kube::connect(&rc) {
        Ok(api) => api,
        Err(e) => return fail("transport", e.to_string()),
    };
    // One request, as the oracle sends one: an exec plugin runs first.
    let r = kube::request(&api, "GET", "/version", None, std::time::Duration::from_secs(5)).await;
    if let Err(e) = &r {
        if e.to_string().contains("getting credentials") {
            return fail("credentials", e.to_string());
        }
    }
    let cred = match &api.exec {
        Some(a) => {
            let c = a.get().await.unwrap();
            assert_eq!(a.runs(), 1, "{}: the request's credential is reused", case.name);
            Some(c)
        }
        None => None,
    };
    let from_plugin = cred.as_ref().and_then(|c| c.cred.token.clone()).map(|t| format!("Bearer {t}"));
    let basic = api.basic.clone();
    out["authorization"] =
        json!(api.token.clone().map(|t| format!("Bearer {t}")).or(basic).or(from_plugin).unwrap_or_default());
    if let Some(c) = &cred {
        out["execCert"] = json!(c.cred.cert.is_some());
    }
    out
}

fn plugin(body: &str) -> String {
    format!("#!/bin/sh\n{body}\n")
}

fn cred(api_version: &str, status: &str) -> String {
    plugin(&format!(
        "cat <<'EOF'\n{{\"apiVersion\":\"{api_version}\",\"kind\":\"ExecCredential\",\"status\":{status}}}\nEOF"
    ))
}

/// The cases: merging, relative paths, contexts, exec v1 and v1beta1, each
/// exec failure, static credentials, bad files.
fn cases() -> Vec<Case> {
    let ca = include_str!("../../src/client/kube/testdata/client-ec.crt").to_string();
    let key = include_str!("../../src/client/kube/testdata/client-ec.key").to_string();
    let server = "server: 'https://127.0.0.1:1'";
    let user = |u: &str| {
        format!("{{{server}, certificate-authority: ca.crt}}\nusers: [{{name: u, user: {u}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n")
    };
    let one = |u: &str| format!("clusters:\n- name: c\n  cluster: {}", user(u));
    let exec = |rest: &str| one(&format!("{{exec: {{{rest}}}}}"));
    let base = |name, files: Vec<(&'static str, String)>| Case {
        name,
        files,
        list: vec!["config"],
        explicit: None,
        context: None,
        fails: false,
        loose: None,
    };
    let mut v = vec![
        // Merging: a's cluster and user win whole; b's current-context; a's paths against a's dir.
        Case {
            list: vec!["a/config", "b/config"],
            ..base(
                "merge",
                vec![
                    ("a/ca.crt", ca.clone()),
                    ("a/tok", "file-token\n".into()),
                    ("a/config", format!("clusters: [{{name: shared, cluster: {{{server}, certificate-authority: ca.crt}}}}]\nusers: [{{name: u, user: {{tokenFile: tok}}}}]\n")),
                    ("b/config", "current-context: ctx\nclusters: [{name: shared, cluster: {server: 'https://127.0.0.2:1', tls-server-name: other}}, {name: o, cluster: {server: 'https://127.0.0.3:1', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: from-b}}, {name: ou, user: {username: a, password: b}}]\ncontexts: [{name: ctx, context: {cluster: shared, user: u}}, {name: oc, context: {cluster: o, user: ou}}]\n".into()),
                ],
            )
        },
        Case {
            list: vec!["b/config", "a/config"],
            ..base(
                "merge-reversed",
                vec![
                    ("a/ca.crt", ca.clone()),
                    ("a/config", format!("current-context: ctx-a\nclusters: [{{name: shared, cluster: {{{server}, certificate-authority: ca.crt}}}}]\nusers: [{{name: u, user: {{token: from-a}}}}]\ncontexts: [{{name: ctx-a, context: {{cluster: shared, user: u}}}}]\n")),
                    ("b/config", "clusters: [{name: shared, cluster: {server: 'https://127.0.0.2:1', insecure-skip-tls-verify: true}}]\ncontexts: [{name: ctx, context: {cluster: shared, user: u}}]\n".into()),
                ],
            )
        },
        Case {
            list: vec!["a/config", "b/config"],
            context: Some("oc"),
            ..base(
                "merge-context",
                vec![
                    ("a/config", "clusters: []\n".into()),
                    ("b/config", "current-context: ctx\nclusters: [{name: o, cluster: {server: 'https://127.0.0.3:1', insecure-skip-tls-verify: true}}]\nusers: [{name: ou, user: {username: a, password: b}}]\ncontexts: [{name: oc, context: {cluster: o, user: ou}}]\n".into()),
                ],
            )
        },
        Case {
            list: vec!["missing", "config", "config"],
            ..base("missing-files-skipped", vec![("ca.crt", ca.clone()), ("config", one("{token: t}"))])
        },
        Case {
            explicit: Some("explicit"),
            ..base(
                "explicit-alone",
                vec![("ca.crt", ca.clone()), ("config", one("{token: from-list}")), ("explicit", format!("clusters: [{{name: e, cluster: {{{server}, insecure-skip-tls-verify: true}}}}]\ncontexts: [{{name: e, context: {{cluster: e}}}}]\ncurrent-context: e\n"))],
            )
        },
        base(
            "proxy-url",
            vec![("config", format!("clusters: [{{name: c, cluster: {{{server}, insecure-skip-tls-verify: true, proxy-url: 'http://user:pw@127.0.0.1:9'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"))],
        ),
        base("plain-http-sends-nothing", vec![("config", "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t, exec: {command: x, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n".into())]),
        // exec, working.
        base(
            "exec-v1-relative-command",
            vec![
                ("ca.crt", ca.clone()),
                ("bin/plug", plugin(&format!("cat <<EOF\n{{\"apiVersion\":\"{V1}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"tok-$1-$GREETING\",\"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}}}\nEOF"))),
                ("config", exec(&format!("command: ./bin/plug, args: [one], env: [{{name: GREETING, value: hi}}], apiVersion: {V1}, interactiveMode: Never"))),
            ],
        ),
        base(
            "client-certificate-files-relative",
            vec![
                ("ca.crt", ca.clone()),
                ("pki/c.crt", ca.clone()),
                ("pki/c.key", key.clone()),
                ("config", one("{client-certificate: pki/c.crt, client-key: ./pki/../pki/c.key}")),
            ],
        ),
        // A static credential wins: the plugin is never run.
        base(
            "exec-and-a-static-token",
            vec![
                ("ca.crt", ca.clone()),
                ("plug", cred(V1, r#"{"token":"from-plugin"}"#)),
                ("config", one(&format!("{{token: static, exec: {{command: ./plug, apiVersion: {V1}, interactiveMode: Never}}}}"))),
            ],
        ),
        base(
            "exec-v1beta1-defaults",
            vec![("ca.crt", ca.clone()), ("plug", cred(V1BETA1, r#"{"token":"b"}"#)), ("config", exec(&format!("command: ./plug, apiVersion: {V1BETA1}")))],
        ),
        base(
            "exec-client-certificate",
            vec![
                ("ca.crt", ca.clone()),
                ("plug", cred(V1, &json!({"clientCertificateData": ca, "clientKeyData": key}).to_string())),
                ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: IfAvailable"))),
            ],
        ),
    ];
    let failing: Vec<(&'static str, Vec<(&'static str, String)>)> = vec![
        ("exec-wrong-version", vec![("plug", cred(V1BETA1, r#"{"token":"t"}"#)), ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-no-status", vec![("plug", plugin(&format!("echo '{{\"apiVersion\":\"{V1}\",\"kind\":\"ExecCredential\"}}'"))), ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-no-token", vec![("plug", cred(V1, "{}")), ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-only-key", vec![("plug", cred(V1, &json!({"clientKeyData": key}).to_string())), ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-exit-code", vec![("plug", plugin("echo 'session expired: run sso login' >&2\nexit 3")), ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-not-in-path", vec![("config", exec(&format!("command: dpctl-no-such-credential-plugin, apiVersion: {V1}, interactiveMode: Never, installHint: \"install it:\\n  apt install it\"")))]),
        ("exec-path-missing", vec![("config", exec(&format!("command: ./nope/plug, apiVersion: {V1}, interactiveMode: Never")))]),
        ("exec-v1-needs-interactive-mode", vec![("config", exec(&format!("command: ./plug, apiVersion: {V1}")))]),
        ("exec-needs-command-and-version", vec![("config", exec("interactiveMode: Never"))]),
        ("exec-bad-interactive-mode", vec![("config", exec(&format!("command: x, apiVersion: {V1}, interactiveMode: Sometimes")))]),
        ("exec-unknown-api-version", vec![("config", exec("command: x, apiVersion: client.authentication.k8s.io/v1alpha1"))]),
        ("exec-and-auth-provider", vec![("config", one(&format!("{{exec: {{command: x, apiVersion: {V1}, interactiveMode: Never}}, auth-provider: {{name: oidc}}}}")))]),
        ("proxy-url-bad-scheme", vec![("config", one("{token: t}").replace("certificate-authority: ca.crt", "certificate-authority: ca.crt, proxy-url: 'ftp://p'"))]),
        ("auth-provider-gcp", vec![("config", one("{auth-provider: {name: gcp}}"))]),
        ("auth-provider-azure", vec![("config", one("{auth-provider: {name: azure}}"))]),
    ];
    for (name, mut files) in failing {
        files.push(("ca.crt", ca.clone()));
        v.push(Case { fails: true, ..base(name, files) });
    }
    for (name, mut files, list, loose) in [
        ("bad-yaml", vec![("config", "clusters: [".to_string())], vec!["config"], "error loading config file"),
        (
            "duplicate-names",
            vec![("config", "users: [{name: u, user: {}}, {name: u, user: {}}]\n".to_string())],
            vec!["config"],
            "duplicate name \"u\"",
        ),
        ("all-missing", vec![], vec!["nope", "nope2"], "no configuration has been provided"),
        ("empty-file", vec![("config", String::new())], vec!["config"], "no configuration has been provided"),
        (
            "context-missing",
            vec![("config", one("{token: t}").replace("current-context: x", "current-context: gone"))],
            vec!["config"],
            "context was not found for specified context: gone",
        ),
        // client-go refuses it when it builds the TLS configuration
        // ("specifying a root certificates file with the insecure flag is not allowed"), dpctl at load.
        (
            "insecure-with-a-ca",
            vec![(
                "config",
                one("{token: t}").replace("certificate-authority: ca.crt", "certificate-authority: ca.crt, insecure-skip-tls-verify: true"),
            )],
            vec!["config"],
            "insecure-skip-tls-verify with a certificate-authority is not allowed",
        ),
        // Go's crypto/tls and rustls word the mismatch each their own way.
        (
            "exec-mismatched-key-pair",
            vec![
                (
                    "plug",
                    cred(
                        V1,
                        &json!({"clientCertificateData": ca, "clientKeyData": include_str!("../../src/client/kube/testdata/client-rsa.key")})
                            .to_string(),
                    ),
                ),
                ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Never"))),
            ],
            vec!["config"],
            "getting credentials: failed parsing client key/certificate: ",
        ),
        // Whether dpctl's stdin is a terminal decides the last words, as client-go's.
        (
            "exec-interactive-always",
            vec![
                ("plug", cred(V1, r#"{"token":"t"}"#)),
                ("config", exec(&format!("command: ./plug, apiVersion: {V1}, interactiveMode: Always"))),
            ],
            vec!["config"],
            "getting credentials: exec plugin cannot support interactive mode: standard input is ",
        ),
    ] {
        files.push(("ca.crt", ca.clone()));
        v.push(Case { fails: true, list, loose: Some(loose), ..base(name, files) });
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_sets_are_read_as_client_go_reads_them() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(bin) = upstream_peer("kubeconfig") else { return };
    let mut failures = Vec::new();
    for case in cases() {
        let d = tmp();
        for (f, text) in &case.files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            if text.starts_with("#!") {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let go = client_go(&bin, d.path(), &case).await;
        let ours = dpctl_reads(d.path(), &case).await;
        let name = case.name;
        match (go.get("error").and_then(Value::as_str), ours.get("error").and_then(Value::as_str)) {
            (None, None) if !case.fails => {
                let (mut go, mut ours) = (go.clone(), ours.clone());
                // With a tokenFile, rest.Config's BearerToken is the file's raw
                // content; what is sent (authorization) is what counts.
                if go["tokenFile"] != "" {
                    go["token"] = json!("");
                    ours["token"] = json!("");
                }
                // Go writes a nil slice as null.
                if go["exec"]["args"].is_null() && go["exec"].is_object() {
                    go["exec"]["args"] = json!([]);
                }
                if go != ours {
                    failures
                        .push(format!("{name}: client-go and dpctl differ\n  client-go: {go}\n  dpctl:     {ours}"));
                }
            }
            (Some(g), Some(o)) if case.fails => {
                let ok = match case.loose {
                    Some(want) => o.contains(want),
                    None => norm(o).contains(&norm(g)),
                };
                if !ok || o.contains('\n') {
                    failures.push(format!("{name}: errors differ\n  client-go: {g}\n  dpctl:     {o}"));
                }
            }
            _ => {
                failures.push(format!("{name}: expected fails={}\n  client-go: {go}\n  dpctl:     {ours}", case.fails))
            }
        }
    }
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// `provideClusterInfo`: the plugin gets the same KUBERNETES_EXEC_INFO from
/// dpctl as from client-go (server, CA data, tls-server-name, the cluster's
/// exec extension as `config`); without it, no cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_plugin_gets_the_exec_info_client_go_gives_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(bin) = upstream_peer("kubeconfig") else { return };
    for provide in [true, false] {
        let d = tmp();
        let ca = include_str!("../../src/client/kube/testdata/client-ec.crt");
        std::fs::write(d.path().join("ca.crt"), ca).unwrap();
        let plug = d.path().join("plug");
        std::fs::write(
            &plug,
            plugin(&format!("printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$INFO_OUT\"\ncat <<'EOF'\n{{\"apiVersion\":\"{V1}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t\"}}}}\nEOF")),
        )
        .unwrap();
        std::fs::set_permissions(&plug, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = d.path().join("info");
        std::fs::write(
            d.path().join("config"),
            format!("clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1/prefix', proxy-url: 'http://127.0.0.1:9', certificate-authority: ca.crt, tls-server-name: api.example, extensions: [{{name: client.authentication.k8s.io/exec, extension: {{audience: dpctl, count: 1}}}}]}}}}]\nusers: [{{name: u, user: {{exec: {{command: ./plug, apiVersion: {V1}, interactiveMode: Never, provideClusterInfo: {provide}, env: [{{name: INFO_OUT, value: '{}'}}]}}}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n", s(&out)),
        )
        .unwrap();
        let case = Case {
            name: "exec-info",
            files: vec![],
            list: vec!["config"],
            explicit: None,
            context: None,
            fails: false,
            loose: None,
        };
        let go = client_go(&bin, d.path(), &case).await;
        assert_eq!(go["authorization"], "Bearer t", "{go}");
        let from_go: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        std::fs::remove_file(&out).unwrap();
        let ours = dpctl_reads(d.path(), &case).await;
        assert_eq!(ours["authorization"], "Bearer t", "{ours}");
        let from_dpctl: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(from_dpctl, from_go, "provideClusterInfo {provide}");
        assert_eq!(from_go["spec"]["cluster"].is_object(), provide, "{from_go}");
    }
}

/// A small HTTP CONNECT proxy on 127.0.0.1: it records each CONNECT target
/// and tunnels it (answering 403 to targets that are not 127.0.0.1).
async fn connect_proxy() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut b).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(head.lines().next().unwrap_or("").to_string());
                if !target.starts_with("127.0.0.1:") {
                    let _ = c.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
                    return;
                }
                let Ok(mut up) = tokio::net::TcpStream::connect(&target).await else { return };
                let _ = c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await;
                let _ = tokio::io::copy_bidirectional(&mut c, &mut up).await;
            });
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_tunnels_through_an_http_proxy_url_and_says_what_the_proxy_refused() {
    let d = tmp();
    let (kubelet, klog, kc) = api_node(d.path()).await;
    let (proxy, seen) = connect_proxy().await;
    let text = std::fs::read_to_string(&kc).unwrap();
    let via = d.path().join("kubeconfig-proxy");
    std::fs::write(&via, text.replace("    server: ", &format!("    proxy-url: http://{proxy}\n    server: ")))
        .unwrap();
    let root = tmp();
    let mut serve = dra_serve(root.path(), &via).spawn().unwrap();
    let mut out = Tail::stdout(&mut serve);
    out.wait_for("\"event\":\"resourceslice\"", 1).await;
    let authority = kube::load_kubeconfig(&kc).unwrap().authority;
    assert!(
        seen.lock().unwrap().iter().any(|l| l == &format!("CONNECT {authority} HTTP/1.1")),
        "{:?}",
        seen.lock().unwrap()
    );
    stop_tailed(serve, out).await;
    // A proxy that refuses the tunnel: its answer, on one line.
    let server = format!("https://{authority}");
    let refused = d.path().join("kubeconfig-refused");
    std::fs::write(
        &refused,
        text.replace(
            &format!("    server: {server}"),
            &format!(
                "    proxy-url: http://{proxy}\n    server: https://localhost:{}",
                authority.rsplit(':').next().unwrap()
            ),
        ),
    )
    .unwrap();
    let r = run_cmd(dra_serve(tmp().path(), &refused)).await;
    r.expect_code(1);
    assert!(
        r.stderr.contains(&format!(
            "through proxy-url http://{proxy}: the proxy answered CONNECT with \"HTTP/1.1 403 Forbidden\""
        )),
        "{}",
        r.stderr
    );
    stop_tailed(kubelet, klog).await.expect_code(0);
}

/// Against the mock kubelet's API server, through dpctl's client: a
/// credential without expiry is reused; an expired one is replaced at the
/// next request; a refused one (401) is replaced once, so the request after
/// it succeeds when the plugin now prints the right token (a rotated token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_credentials_are_reused_until_expiry_and_replaced_after_a_401() {
    let d = tmp();
    let (kubelet, klog, kc) = api_node(d.path()).await;
    let token = kubeconfig_token(&kc);
    let get = |api: kube::ApiServer| async move {
        let t = std::time::Duration::from_secs(5);
        kube::request(&api, "GET", "/apis/resource.k8s.io/v1/resourceslices", None, t).await.unwrap().0
    };
    let p = tmp();
    let dir = p.path();
    // No expiry: one run for three requests.
    let kept = exec_plugin(dir, "kept", V1, &json!({"token": token}).to_string());
    let api = kube::load_kubeconfig(&exec_kubeconfig(dir, &kc, &exec_user(&kept, V1))).unwrap();
    for _ in 0..3 {
        assert_eq!(get(api.clone()).await, 200);
    }
    assert_eq!(exec_plugin_runs(dir, "kept"), 1);
    // Expired: a run per request.
    let expired = exec_plugin(
        dir,
        "expired",
        V1,
        &json!({"token": token, "expirationTimestamp": "2001-01-01T00:00:00Z"}).to_string(),
    );
    let api = kube::load_kubeconfig(&exec_kubeconfig(dir, &kc, &exec_user(&expired, V1))).unwrap();
    for _ in 0..2 {
        assert_eq!(get(api.clone()).await, 200);
    }
    assert_eq!(exec_plugin_runs(dir, "expired"), 2);
    // Refused, then rotated: the 401 runs the plugin again, the next request carries the new token.
    let rotated = exec_plugin(dir, "rotated", V1, r#"{"token":"stale"}"#);
    let api = kube::load_kubeconfig(&exec_kubeconfig(dir, &kc, &exec_user(&rotated, V1))).unwrap();
    assert_eq!(exec_plugin_runs(dir, "rotated"), 0, "a plugin runs at the first request, not at load");
    let first = api.exec.as_ref().unwrap().clone();
    // The plugin prints the right token from its second run on.
    exec_plugin(dir, "rotated-next", V1, &json!({"token": token}).to_string());
    std::fs::write(
        &rotated,
        format!(
            "#!/bin/sh\nif [ -f '{0}/rotated.runs' ]; then exec '{0}/rotated-next'; fi\necho run >> '{0}/rotated.runs'\necho '{{\"apiVersion\":\"{V1}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"stale\"}}}}'\n",
            s(dir)
        ),
    )
    .unwrap();
    assert_eq!(get(api.clone()).await, 401);
    assert_eq!(first.runs(), 2, "the 401 ran the plugin again");
    assert_eq!(get(api.clone()).await, 200);
    assert_eq!(first.runs(), 2, "the new credential is kept");
    stop_tailed(kubelet, klog).await.expect_code(0);
}

/// The bearer token of a kubeconfig's first user (any YAML layout).
fn first_user_token(kubeconfig: &Path) -> String {
    let v: Value = serde_norway::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    v["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {}", kubeconfig.display()))
        .to_string()
}

/// Against the real kube-apiserver (tests/upstream/cmd/controlplane, token
/// authentication): `dra serve` publishes with the token an exec plugin
/// prints, and one printing a wrong token gets kube-apiserver's 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_publishes_to_the_real_api_server_with_an_exec_plugins_token() {
    let Some(cp) = control_plane() else { return };
    let token = first_user_token(&cp.kubeconfig);
    let p = tmp();
    let dir = p.path();
    let plugin = exec_plugin(dir, "admin", V1, &json!({"token": token}).to_string());
    let kc = exec_kubeconfig(dir, &cp.kubeconfig, &exec_user(&plugin, V1));
    let node = "kcfg-exec-node";
    let root = tmp();
    let mut serve = dra_serve_for(root.path(), &kc, node).spawn().unwrap();
    let mut out = Tail::stdout(&mut serve);
    out.wait_for("\"event\":\"resourceslice\"", 1).await;
    let api = kube::load_kubeconfig(&cp.kubeconfig).unwrap();
    let path = format!("/apis/resource.k8s.io/v1/resourceslices/{node}-{DRIVER}-pool-0");
    let (st, slice) = kube::request(&api, "GET", &path, None, std::time::Duration::from_secs(10)).await.unwrap();
    assert_eq!((st, slice["spec"]["nodeName"].as_str()), (200, Some(node)), "{slice}");
    assert_eq!(exec_plugin_runs(dir, "admin"), 1);
    stop_tailed(serve, out).await;

    std::fs::create_dir(dir.join("bad")).unwrap();
    let bad = exec_plugin(&dir.join("bad"), "bad", V1, r#"{"token":"not-a-token-kube-apiserver-knows"}"#);
    let kc_bad = exec_kubeconfig(&dir.join("bad"), &cp.kubeconfig, &exec_user(&bad, V1));
    let r = run_cmd(dra_serve_for(tmp().path(), &kc_bad, node)).await;
    r.expect_code(1);
    assert!(r.stderr.contains("the API server answered 401 Unauthorized"), "{}", r.stderr);
    assert_eq!(exec_plugin_runs(&dir.join("bad"), "bad"), 2, "a 401 runs the plugin again once");
}
