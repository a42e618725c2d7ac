//! dpctl against upstream Kubernetes' own code, built from the Go module in
//! tests/upstream (pinned there, fetched through the Go module proxy) by
//! tests/upstream/build.sh. Without the build each test returns at once and
//! the end of the run says how many did not run; under CI one test,
//! `upstream_peers_are_built_when_required`, fails naming the build script.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// Under CI (`CI` set) or with `DPCTL_REQUIRE_UPSTREAM=1` the upstream peers must be built.
#[test]
fn upstream_peers_are_built_when_required() {
    let required = std::env::var_os("CI").is_some() || std::env::var_os("DPCTL_REQUIRE_UPSTREAM").is_some();
    let built = upstream_dir().join("clientgo").is_file();
    assert!(
        built || !required,
        "CI is set (or DPCTL_REQUIRE_UPSTREAM) but upstream's peers are not built in {}: run {UPSTREAM_BUILD} first",
        upstream_dir().display()
    );
}

/// `clientgo crud` (real client-go, its kubeconfig loaded by clientcmd) against `kubeconfig`: its JSON lines and exit code.
async fn client_go_crud(bin: &Path, kubeconfig: &Path, extra: &[&str]) -> (Vec<Value>, Option<i32>, String) {
    let out = tokio::process::Command::new(bin)
        .arg("crud")
        .arg("-kubeconfig")
        .arg(kubeconfig)
        .args(["-timeout", "20s"])
        .args(extra)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let lines = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    (lines, out.status.code(), format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

fn step<'a>(lines: &'a [Value], name: &str) -> Option<&'a Value> {
    lines.iter().find(|l| l["step"] == name)
}

/// The mock kubelet with its API server in `mode_flags`; its kubeconfig once written.
async fn api_node(root: &Path, mode_flags: &[&str]) -> (tokio::process::Child, Tail, std::path::PathBuf, String) {
    let mut args = vec!["--api-server", "127.0.0.1:0"];
    args.extend_from_slice(mode_flags);
    let mut kubelet = mock_kubelet_on(root, &args).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let ev = log
        .seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "api-server")
        .unwrap();
    let kc = std::path::PathBuf::from(ev["kubeconfig"].as_str().unwrap());
    (kubelet, log, kc, ev["addr"].as_str().unwrap().to_string())
}

/// Issue 44: every driver built on client-go was refused (401) because the
/// API server asked for a token over plain http, where clientcmd sends none.
/// With the kubeconfig dpctl writes and no other flag, real client-go lists,
/// watches, creates, updates and deletes — in JSON and in protobuf — and
/// sends its token because the server is https.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_client_go_works_with_the_kubeconfig_the_mock_kubelet_writes_by_default() {
    let Some(bin) = upstream_bin("clientgo") else { return };
    let d = tmp();
    let (kubelet, log, kc, url) = api_node(d.path(), &[]).await;
    assert!(url.starts_with("https://"), "HTTPS is the default: {url}");
    for extra in [&[][..], &["-protobuf"][..]] {
        let (lines, code, all) = client_go_crud(&bin, &kc, extra).await;
        assert_eq!(code, Some(0), "client-go {extra:?} failed:\n{all}");
        let config = step(&lines, "config").unwrap();
        assert_eq!((config["bearer"].as_bool(), config["ca"].as_bool()), (Some(true), Some(true)), "{config}");
        for s in
            ["version", "list", "create", "watch-added", "update", "watch-modified", "delete", "watch-deleted", "done"]
        {
            assert!(step(&lines, s).is_some(), "no {s} step {extra:?}:\n{all}");
        }
        let requests: Vec<&Value> = lines.iter().filter(|l| l.get("request").is_some()).collect();
        assert!(!requests.is_empty(), "{all}");
        assert!(requests.iter().all(|r| r["authorization"] == true && r["scheme"] == "https"), "{all}");
    }
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// The token still keeps out a client without it: the same kubeconfig less
/// its token is refused by the real client-go's first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_client_go_without_the_token_is_refused_over_https() {
    let Some(bin) = upstream_bin("clientgo") else { return };
    let d = tmp();
    let (kubelet, log, kc, _) = api_node(d.path(), &[]).await;
    let text = std::fs::read_to_string(&kc).unwrap();
    assert!(text.contains("token: "), "{text}");
    let tokenless = d.path().join("tokenless");
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().starts_with("token: ")).collect();
    std::fs::write(&tokenless, kept.join("\n").replace("  user:\n", "  user: {}\n")).unwrap();
    let (lines, code, all) = client_go_crud(&bin, &tokenless, &[]).await;
    assert_eq!(code, Some(1), "{all}");
    let failed = lines.iter().find(|l| l.get("error").is_some()).unwrap_or_else(|| panic!("{all}"));
    assert_eq!(failed["step"], "version", "{all}");
    assert!(
        failed["error"].as_str().unwrap().contains("Unauthorized")
            || failed["error"].as_str().unwrap().contains("provide credentials"),
        "{all}"
    );
    assert!(lines.iter().any(|l| l["code"] == 401), "{all}");
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// `--api-server-insecure`: plain http that authenticates nobody, as
/// kube-apiserver's old insecure port; client-go sends no token there and
/// still does everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_client_go_works_over_the_insecure_plain_http_mode() {
    let Some(bin) = upstream_bin("clientgo") else { return };
    let d = tmp();
    let (kubelet, log, kc, url) = api_node(d.path(), &["--api-server-insecure"]).await;
    assert!(url.starts_with("http://"), "{url}");
    let (lines, code, all) = client_go_crud(&bin, &kc, &["-protobuf"]).await;
    assert_eq!(code, Some(0), "{all}");
    assert!(step(&lines, "done").is_some(), "{all}");
    let requests: Vec<&Value> = lines.iter().filter(|l| l.get("request").is_some()).collect();
    assert!(!requests.is_empty() && requests.iter().all(|r| r["authorization"] == false), "{all}");
    stop_tailed(kubelet, log).await.expect_code(0);
}
