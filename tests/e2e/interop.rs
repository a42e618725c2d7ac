//! Interop matrix: dpctl against independent implementations — a Python
//! peer (grpcio) and a Go peer (grpc-go 1.33, which sends the socket path
//! as :authority) — built from proto/ by tests/interop/setup.sh. Every
//! cell runs against both. Without built peers each test returns at once
//! and the end of the run says how many did not run; under CI (CI set) one
//! test, `interop_peers_are_built_when_required`, fails naming setup.sh.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};

#[derive(Clone, Copy, Debug)]
enum Lang {
    Python,
    Go,
}

fn peers_dir() -> Option<PathBuf> {
    interop_peers(&["go-peer", "python/peer.py", "venv/bin/python"])
}

/// Without the peers every interop test passes without running (the run's
/// end says so); under CI (`CI` set, as GitHub and GitLab set it) or with
/// `DPCTL_REQUIRE_INTEROP=1` this one test fails instead, with the fix.
#[test]
fn interop_peers_are_built_when_required() {
    let dir = interop_dir();
    let missing: Vec<&str> = INTEROP_PEERS.iter().copied().filter(|f| !dir.join(f).exists()).collect();
    if missing.is_empty() {
        return;
    }
    let required = std::env::var_os("CI").is_some() || std::env::var_os("DPCTL_REQUIRE_INTEROP").is_some();
    assert!(
        !required,
        "CI is set (or DPCTL_REQUIRE_INTEROP) but the interop peers are not built ({} missing in {}): \
         run {INTEROP_SETUP} first",
        missing.join(", "),
        dir.display()
    );
}

struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Value>>>,
    lang: Lang,
}

impl Peer {
    fn spawn(dir: &Path, lang: Lang, args: &[&str]) -> Peer {
        let mut c = match lang {
            Lang::Go => tokio::process::Command::new(dir.join("go-peer")),
            Lang::Python => {
                let mut c = tokio::process::Command::new(dir.join("venv/bin/python"));
                c.arg(dir.join("python/peer.py")).env("PYTHONPATH", dir.join("python"));
                c
            }
        };
        c.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
        let mut child = c.spawn().expect("spawn peer");
        let stdout = child.stdout.take().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    ev.lock().unwrap().push(v);
                }
            }
        });
        Peer { stdin: child.stdin.take(), child, events, lang }
    }

    async fn send(&mut self, line: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        s.flush().await.unwrap();
    }

    /// Wait for the `nth` (0-based) event matching `f`.
    async fn wait_nth(&self, nth: usize, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..500 {
            if let Some(v) = self.events.lock().unwrap().iter().filter(|e| f(e)).nth(nth) {
                return v.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{:?} peer: no {what} within 10s; events: {:?}", self.lang, self.events.lock().unwrap());
    }

    async fn wait(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        self.wait_nth(0, what, f).await
    }

    /// The first call of `method`, waiting for the peer's line about it (the
    /// answer can reach dpctl before the peer's stdout reaches the test).
    async fn first_call(&self, method: &str) -> Value {
        self.wait(method, |e| e["event"] == "call" && e["method"] == method).await
    }

    fn calls(&self, method: &str) -> Vec<Value> {
        self.events.lock().unwrap().iter().filter(|e| e["event"] == "call" && e["method"] == method).cloned().collect()
    }
}

fn ev(name: &'static str) -> impl Fn(&Value) -> bool {
    move |e| e["event"] == name
}

macro_rules! both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() {
                if let Some(d) = super::peers_dir() {
                    super::$body(&d, super::Lang::Python).await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn go() {
                if let Some(d) = super::peers_dir() {
                    super::$body(&d, super::Lang::Go).await;
                }
            }
        }
    };
}

both!(serve_registers_with_peer_kubelet, serve_with_peer_kubelet);
both!(peer_plugin_registers_with_mock_kubelet, peer_plugin_with_mock_kubelet);
both!(client_options_against_peer_plugin, client_options);
both!(client_watch_against_peer_plugin, client_watch);
both!(client_allocate_against_peer_plugin, client_allocate);
both!(client_preferred_and_prestart_against_peer_plugin, client_preferred_and_prestart);
both!(client_probe_against_peer_plugin, client_probe);
both!(register_and_podresources_against_peer, register_and_podresources);
both!(errors_status_codes_cross_implementations, error_status);
both!(errors_stream_closed_by_peer, error_closed_stream);
both!(errors_peer_killed_mid_stream, error_killed_mid_stream);
both!(monitoring_agents_read_mock_kubelet_podresources, podresources_client);

async fn serve_with_peer_kubelet(dir: &Path, lang: Lang) {
    let d = tmp();
    let mut k = Peer::spawn(dir, lang, &["kubelet", "--dir", s(d.path())]);
    k.wait("ready", ev("ready")).await;
    let sv = serve_cmd(
        d.path(),
        &[
            "--resource",
            "vendor.example/foo",
            "--count",
            "4",
            "--numa-nodes",
            "2",
            "--preferred-allocation",
            "--pre-start",
            "--cdi",
            "vendor.example/foo={id}",
            "--env",
            "FOO_VISIBLE_DEVICES={ids}",
        ],
    )
    .spawn()
    .unwrap();
    let reg = k.wait("register", ev("register")).await;
    assert_eq!(reg["version"], "v1beta1");
    assert_eq!(reg["resource"], "vendor.example/foo");
    assert_eq!(reg["options"]["getPreferredAllocationAvailable"], true);
    let opts = k.wait("options", ev("options")).await;
    assert_eq!(
        (opts["preStartRequired"].as_bool(), opts["getPreferredAllocationAvailable"].as_bool()),
        (Some(true), Some(true))
    );
    let snap = k.wait("snapshot", ev("snapshot")).await;
    let devs = snap["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 4);
    assert_eq!((devs[3]["id"].as_str(), devs[3]["health"].as_str()), (Some("foo-3"), Some("Healthy")));
    assert_eq!(devs[3]["numa"], serde_json::json!([1]));

    dpctl(&["--plugin-dir", s(d.path()), "device", "set-health", "foo-1", "Unhealthy"]).await.expect_code(0);
    let snap = k.wait_nth(1, "second snapshot", ev("snapshot")).await;
    assert_eq!(snap["devices"][1]["health"], "Unhealthy");

    k.send("allocate foo-0,foo-2").await;
    let a = k.wait("allocate", ev("allocate")).await;
    assert_eq!(a["response"]["envs"]["FOO_VISIBLE_DEVICES"], "foo-0,foo-2");
    assert_eq!(a["response"]["cdi"], serde_json::json!(["vendor.example/foo=foo-0", "vendor.example/foo=foo-2"]));
    k.send("allocate foo-1").await;
    let e = k.wait("error", ev("error")).await;
    assert!(
        e["code"].as_str().unwrap().eq_ignore_ascii_case("invalidargument") || e["code"] == "INVALID_ARGUMENT",
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("unhealthy device(s) foo-1"), "{e}");
    k.send("preferred foo-0,foo-2,foo-3 foo-3 2").await;
    let p = k.wait("preferred", ev("preferred")).await;
    assert_eq!(p["ids"], serde_json::json!(["foo-3", "foo-2"]));
    k.send("prestart foo-0").await;
    k.wait("prestart", ev("prestart")).await;

    // a kubelet restart: sockets deleted, kubelet.sock re-created → serve registers again
    k.send("restart").await;
    k.wait("restarted", ev("restarted")).await;
    let reg2 = k.wait_nth(1, "re-registration", ev("register")).await;
    assert_ne!(reg2["endpoint"], reg["endpoint"], "a fresh socket after the restart");
    k.wait_nth(2, "snapshot after re-registration", ev("snapshot")).await;
    stop_child(sv).await.expect_code(0);
}

async fn peer_plugin_with_mock_kubelet(dir: &Path, lang: Lang) {
    let n = Node::new();
    let mk = n.start(&[]).await;
    let sock = n.dp().join("peer.sock");
    let kubelet = n.kubelet();
    let mut p = Peer::spawn(
        dir,
        lang,
        &["plugin", "--socket", s(&sock), "--kubelet-socket", s(&kubelet), "--preferred", "--prestart"],
    );
    p.wait("registered", ev("registered")).await;
    n.wait_resource("vendor.example/peer", "4 allocatable", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/peer", 2));
    let pod = n.wait_pod("a").await;
    let pref = p.calls("GetPreferredAllocation");
    assert_eq!(pref.len(), 1, "{pref:?}");
    assert_eq!(pref[0]["available"], serde_json::json!(["p-0", "p-1", "p-2", "p-3"]));
    assert!(pref[0]["mustInclude"].as_array().is_none_or(|a| a.is_empty()), "{pref:?}");
    assert_eq!(pref[0]["size"], 2);
    let alloc = p.wait("Allocate", |e| e["method"] == "Allocate").await;
    assert_eq!(alloc["ids"], serde_json::json!([["p-0", "p-1"]]));
    p.wait("PreStartContainer", |e| e["method"] == "PreStartContainer").await;
    assert_eq!(pod["containers"][0]["resources"]["vendor.example/peer"]["0"], serde_json::json!(["p-0", "p-1"]));
    let r = dpctl(&["podresources", "list", "--socket", s(&n.pr())]).await;
    // one ContainerDevices per device and NUMA node, as current kubelets answer
    assert!(r.stdout.contains("vendor.example/peer   p-0 "), "{}", r.stdout);
    assert!(r.stdout.contains("vendor.example/peer   p-1 "), "{}", r.stdout);

    p.send("health p-3 Unhealthy").await;
    n.wait_resource("vendor.example/peer", "3 allocatable", |r| r["allocatable"] == 3 && r["capacity"] == 4).await;
    stop_child(mk).await;
}

/// A peer plugin (with GetPreferredAllocation and PreStartContainer) in `d`.
async fn peer_plugin(dir: &Path, lang: Lang, d: &Path) -> (Peer, PathBuf) {
    let sock = d.join("peer.sock");
    let p = Peer::spawn(dir, lang, &["plugin", "--socket", s(&sock), "--preferred", "--prestart"]);
    p.wait("ready", ev("ready")).await;
    (p, sock)
}

async fn client_options(dir: &Path, lang: Lang) {
    let d = tmp();
    let (_p, sock) = peer_plugin(dir, lang, d.path()).await;
    let r = dpctl(&["options", s(&sock), "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (v["preStartRequired"].as_bool(), v["getPreferredAllocationAvailable"].as_bool()),
        (Some(true), Some(true))
    );
}

async fn client_watch(dir: &Path, lang: Lang) {
    let d = tmp();
    let (mut p, sock) = peer_plugin(dir, lang, d.path()).await;
    let mut watch = dpctl_cmd(&["watch", s(&sock), "--count", "2", "-o", "json"]).spawn().unwrap();
    let mut tail = Tail::stdout(&mut watch);
    p.wait("ListAndWatch from watch", |e| e["method"] == "ListAndWatch").await;
    tail.wait_for("\"update\":1", 1).await;
    p.send("health p-2 Unhealthy").await;
    let out = tokio::time::timeout(Duration::from_secs(10), watch.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = tail.rest().await;
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["devices"][3]["topology"]["nodes"][0]["ID"], "1");
    assert_eq!(lines[1]["devices"][2]["health"], "Unhealthy");
    assert_eq!(lines[1]["healthy"], 3);
}

async fn client_allocate(dir: &Path, lang: Lang) {
    let d = tmp();
    let (p, sock) = peer_plugin(dir, lang, d.path()).await;
    let r = dpctl(&["allocate", s(&sock), "p-0", "p-1", "--container", "p-3", "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let c0 = &v["containerResponses"][0];
    assert_eq!(c0["envs"]["PEER_DEVICES"], "p-0,p-1");
    assert_eq!(c0["annotations"]["peer"], if matches!(lang, Lang::Go) { "go" } else { "python" });
    assert_eq!(c0["mounts"][0], serde_json::json!({"containerPath": "/peer", "hostPath": "/tmp", "readOnly": true}));
    assert_eq!(
        c0["devices"][1],
        serde_json::json!({"containerPath": "/dev/p-1", "hostPath": "/dev/null", "permissions": "rw"})
    );
    assert_eq!(c0["cdiDevices"][0]["name"], "vendor.example/peer=p-0");
    assert_eq!(v["containerResponses"][1]["envs"]["PEER_DEVICES"], "p-3");
    assert_eq!(p.first_call("Allocate").await["ids"], serde_json::json!([["p-0", "p-1"], ["p-3"]]));
}

async fn client_preferred_and_prestart(dir: &Path, lang: Lang) {
    let d = tmp();
    let (p, sock) = peer_plugin(dir, lang, d.path()).await;
    let r = dpctl(&["preferred", s(&sock), "--available", "p-0,p-1,p-3", "--must-include", "p-3", "--size", "2"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("preferred: p-3,p-0"), "{}", r.stdout);
    let last = p.first_call("GetPreferredAllocation").await;
    assert_eq!(
        (last["available"].clone(), last["mustInclude"].clone(), last["size"].clone()),
        (serde_json::json!(["p-0", "p-1", "p-3"]), serde_json::json!(["p-3"]), serde_json::json!(2))
    );

    dpctl(&["prestart", s(&sock), "p-1"]).await.expect_code(0);
    assert_eq!(p.first_call("PreStartContainer").await["ids"], serde_json::json!(["p-1"]));
}

async fn client_probe(dir: &Path, lang: Lang) {
    let d = tmp();
    let (_p, sock) = peer_plugin(dir, lang, d.path()).await;
    // the peer answers CDI names; probe resolves them against the spec dir
    let cdi = tmp();
    std::fs::write(
        cdi.path().join("peer.yaml"),
        "cdiVersion: 0.6.0\nkind: vendor.example/peer\ndevices:\n- name: p-0\n- name: p-1\n- name: p-2\n- name: p-3\n",
    )
    .unwrap();
    let r = dpctl(&["probe", s(&sock), "--allocate", "--cdi-spec-dir", s(cdi.path()), "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["result"], "PASS", "{v}");
    assert_eq!(v["checks"][2]["detail"], "first snapshot: 4 device(s), 4 healthy");
    assert_eq!(v["checks"].as_array().unwrap().len(), 9, "{v}");
}

async fn register_and_podresources(dir: &Path, lang: Lang) {
    let d = tmp();
    let k = Peer::spawn(dir, lang, &["kubelet", "--dir", s(d.path())]);
    k.wait("ready", ev("ready")).await;
    let (sv, _) = serve_unregistered(d.path(), "vendor.example/foo", "foo.sock", &[]).await;
    let r = dpctl(&[
        "register",
        "--plugin-dir",
        s(d.path()),
        "--resource",
        "vendor.example/foo",
        "--endpoint",
        "foo.sock",
        "--pre-start",
    ])
    .await;
    r.expect_code(0);
    let reg = k.wait("register", ev("register")).await;
    assert_eq!(
        (reg["endpoint"].as_str(), reg["options"]["preStartRequired"].as_bool()),
        (Some("foo.sock"), Some(true))
    );
    k.wait("snapshot", ev("snapshot")).await;
    // a registration the peer cannot dial back: its error comes back verbatim
    let r = dpctl(&[
        "register",
        "--plugin-dir",
        s(d.path()),
        "--resource",
        "vendor.example/foo",
        "--endpoint",
        "nope.sock",
        "--timeout",
        "15s",
    ])
    .await;
    r.expect_code(1);
    assert!(r.stderr.contains("Register failed: Unknown: failed to"), "{}", r.stderr);
    stop_child(sv).await;

    let pr = d.path().join("pr.sock");
    let _pr = Peer::spawn(dir, lang, &["podresources", "--socket", s(&pr)]);
    wait_until(10, "pr.sock answering", || std::os::unix::net::UnixStream::connect(&pr).is_ok()).await;
    let r = dpctl(&["podresources", "list", "--socket", s(&pr)]).await;
    r.expect_code(0);
    let rows: Vec<Vec<&str>> = r.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert!(
        rows.contains(&vec!["interop-pod", "default", "main", "vendor.example/peer", "p-0,p-1", "0", "-"]),
        "{}",
        r.stdout
    );
    assert!(rows.contains(&vec!["interop-pod", "default", "main", "cpu", "1,2", "-", "-"]), "{}", r.stdout);
    assert!(
        rows.contains(&vec!["interop-pod", "default", "main", "memory/memory", "1073741824", "0", "-"]),
        "{}",
        r.stdout
    );
    assert!(
        rows.contains(&vec![
            "interop-pod",
            "default",
            "main",
            "claim/default/gpu-claim",
            "drv/pool/dev",
            "-",
            "vendor.example/peer=p-9"
        ]),
        "{}",
        r.stdout
    );
    let r = dpctl(&["podresources", "list", "--socket", s(&pr), "-o", "json"]).await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let claim = &v["podResources"][0]["containers"][0]["dynamicResources"][0];
    assert_eq!(claim["claimResources"][0]["shareId"], "share-1");
    assert_eq!(claim["claimResources"][0]["driverName"], "drv");
    assert_eq!(v["podResources"][0]["containers"][0]["memory"][0]["size"], "1073741824");
    let r = dpctl(&["podresources", "allocatable", "--socket", s(&pr), "-o", "json"]).await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["devices"].as_array().unwrap().len(), 4);
    assert_eq!(v["devices"][3]["topology"]["nodes"][0]["ID"], "1");
    assert_eq!(v["cpuIds"], serde_json::json!(["0", "1", "2", "3"]));
    let r = dpctl(&["podresources", "get", "interop-pod", "--socket", s(&pr)]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("p-0,p-1"));
    let r = dpctl(&["podresources", "get", "ghost", "--socket", s(&pr)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("NotFound: pod ghost in namespace default not found"), "{}", r.stderr);
}

/// An error status from the peer: code and message verbatim.
async fn error_status(dir: &Path, lang: Lang) {
    let d = tmp();
    let failing = d.path().join("fail.sock");
    let mut p =
        Peer::spawn(dir, lang, &["plugin", "--socket", s(&failing), "--fail", "RESOURCE_EXHAUSTED:peer says no"]);
    p.wait("ready", ev("ready")).await;
    let r = dpctl(&["allocate", s(&failing), "p-0"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("Allocate failed: ResourceExhausted: peer says no"), "{}", r.stderr);
    p.send("").await;
}

/// A ListAndWatch stream the peer ends cleanly.
async fn error_closed_stream(dir: &Path, lang: Lang) {
    let d = tmp();
    let closing = d.path().join("close.sock");
    let c = Peer::spawn(dir, lang, &["plugin", "--socket", s(&closing), "--close-after", "1"]);
    c.wait("ready", ev("ready")).await;
    let r = dpctl(&["watch", s(&closing)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("closed the ListAndWatch stream after 1 update"), "{}", r.stderr);
    drop(c);
}

/// A peer process killed mid-stream: `Unavailable`, as a Go kubelet would see it.
async fn error_killed_mid_stream(dir: &Path, lang: Lang) {
    let d = tmp();
    let dying = d.path().join("die.sock");
    let mut k = Peer::spawn(dir, lang, &["plugin", "--socket", s(&dying)]);
    k.wait("ready", ev("ready")).await;
    let mut watch = dpctl_cmd(&["watch", s(&dying)]).spawn().unwrap();
    let mut tail = Tail::stdout(&mut watch);
    k.wait("ListAndWatch", |e| e["method"] == "ListAndWatch").await;
    tail.wait_for("device(s)", 1).await;
    k.child.start_kill().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), watch.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(s(&dying)) && err.contains("ListAndWatch failed: Unavailable"), "{err}");
}

async fn podresources_client(dir: &Path, lang: Lang) {
    let n = Node::new();
    let mk = n.start(&[]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "4", "--numa-nodes", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 2));
    n.wait_pod("a").await;
    // grpcio and grpc-go put the socket path in :authority; the PodResources server must answer.
    let pr = n.pr();
    let agent = Peer::spawn(dir, lang, &["podresources-client", "--socket", s(&pr)]);
    let list = agent.wait("list", ev("list")).await;
    let pod = &list["pods"][0];
    assert_eq!((pod["name"].as_str(), pod["namespace"].as_str()), (Some("a"), Some("default")));
    assert_eq!(pod["containers"][0]["devices"][0]["resource"], "vendor.example/foo");
    // one ContainerDevices per device and NUMA node, as current kubelets answer
    assert_eq!(pod["containers"][0]["devices"][0]["ids"], serde_json::json!(["foo-0"]));
    assert_eq!(pod["containers"][0]["devices"][0]["numa"], serde_json::json!([0]));
    assert_eq!(pod["containers"][0]["devices"][1]["ids"], serde_json::json!(["foo-1"]));
    assert_eq!(pod["containers"][0]["devices"][1]["numa"], serde_json::json!([0]));
    let alloc = agent.wait("allocatable", ev("allocatable")).await;
    assert_eq!(alloc["ids"], serde_json::json!(["foo-0", "foo-1", "foo-2", "foo-3"]));
    stop_child(sv).await;
    stop_child(mk).await;
}

both!(suite_passes_peer_plugins, suite_against_peer_plugin);

/// `dpctl test --socket` against the Go and Python peer plugins: every protocol
/// scenario passes, except ALLOC-004 — the peers do not validate device IDs.
async fn suite_against_peer_plugin(dir: &Path, lang: Lang) {
    let t = tmp();
    let sock = t.path().join("peer.sock");
    let p = Peer::spawn(dir, lang, &["plugin", "--socket", s(&sock), "--preferred", "--prestart"]);
    p.wait("ready", ev("ready")).await;
    let r = dpctl(&["-o", "json", "test", "--socket", s(&sock), "--skip", "ALLOC-004"]).await;
    r.expect_code(0);
    let doc: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(doc["failed"], 0, "{doc}");
    assert_eq!(doc["passed"], 15, "{doc}");
}

/// grpc-go 1.33 with the socket path as `:authority`, hundreds of calls from
/// four goroutines on one connection: grpc-go's encoder adds the authority to
/// its HPACK table (Huffman-coded) once and then refers to it by index. The
/// shim rewrites only that literal and passes everything else through, so
/// h2's table must stay in step with grpc-go's for every call to succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_go_path_authority_many_calls_one_connection() {
    let Some(dir) = peers_dir() else { return };
    let d = tmp();
    let (sv, sock) = serve_unregistered(d.path(), "vendor.example/foo", "foo.sock", &["--count", "4"]).await;
    for auth in ["path", "localhost"] {
        let args = ["bench", "--socket", s(&sock), "--requests", "400", "--concurrency", "4", "--authority", auth];
        let b = Peer::spawn(&dir, Lang::Go, &args);
        let r = b.wait("the bench result", |e| e["call"] == "Allocate").await;
        assert_eq!((r["requests"].as_i64(), r["errors"].as_i64()), (Some(400), Some(0)), "{auth}: {r}");
    }
    stop_child(sv).await.expect_code(0);
}
