//! `dpctl dra …` end to end: `dpctl dra serve` as a real process under a
//! temp kubelet root, and every client command against it as a real process.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const DRIVER: &str = "gpu.example.com";

/// `dpctl dra serve` under `root`, started and waited for (its registration
/// socket, or its service socket with --no-register).
async fn dra_serve(root: &Path, extra: &[&str]) -> (tokio::process::Child, PathBuf) {
    dra_serve_as(root, DRIVER, extra).await
}

/// [`dra_serve`] of another driver name.
async fn dra_serve_as(root: &Path, driver: &str, extra: &[&str]) -> (tokio::process::Child, PathBuf) {
    let cdi = root.join("cdi");
    let mut args = vec!["--kubelet-root-dir", s(root), "dra", "serve", "--driver", driver, "--cdi-dir", s(&cdi)];
    args.extend_from_slice(extra);
    let child = dpctl_cmd(&args).spawn().unwrap();
    let rolling = extra.iter().position(|a| *a == "--rolling-update").map(|i| extra[i + 1]);
    let reg = match rolling {
        Some(u) => root.join(format!("plugins_registry/{driver}-{u}-reg.sock")),
        None => root.join(format!("plugins_registry/{driver}-reg.sock")),
    };
    let wait = if extra.contains(&"--no-register") { root.join(format!("plugins/{driver}/dra.sock")) } else { reg };
    wait_until(10, "the dra serve socket", || wait.exists()).await;
    (child, wait)
}

async fn dra(root: &Path, args: &[&str]) -> Run {
    let mut a = vec!["--kubelet-root-dir", s(root), "dra"];
    a.extend_from_slice(args);
    dpctl(&a).await
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", r.stdout, r.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_command_works_against_dra_serve() {
    let d = tmp();
    let root = d.path();
    let (child, _reg) = dra_serve(root, &[]).await;
    let reg = format!("{DRIVER}-reg.sock");

    // list: one live DRA plugin with its endpoint inside the kubelet root.
    let l = dra(root, &["list", "-o", "json"]).await;
    l.expect_code(0);
    let l = json(&l);
    assert_eq!(l[0]["driver"], DRIVER);
    assert_eq!(l[0]["state"], "live");
    assert_eq!(l[0]["endpoint"], root.join(format!("plugins/{DRIVER}/dra.sock")).display().to_string());

    // info: GetInfo on the registration socket (a bare name, found in plugins_registry/).
    let i = dra(root, &["info", &reg, "-o", "json"]).await;
    i.expect_code(0);
    let i = json(&i);
    assert_eq!(i["type"], "DRAPlugin");
    assert_eq!(i["name"], DRIVER);
    assert_eq!(
        i["supportedVersions"],
        serde_json::json!(["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"])
    );

    // prepare: one device per claim, CDI IDs whose specs exist; twice gives the same answer.
    let p = dra(
        root,
        &[
            "prepare",
            &reg,
            "--claim",
            "default/a/uid-a",
            "--claim",
            "ml/b/uid-b",
            "--twice",
            "--cdi-spec-dir",
            s(&root.join("cdi")),
            "-o",
            "json",
        ],
    )
    .await;
    p.expect_code(0);
    let p = json(&p);
    assert_eq!(p["service"], "v1.DRAPlugin");
    assert!(p["violations"].as_array().is_none_or(|v| v.is_empty()), "{p}");
    let a = &p["claims"]["uid-a"]["devices"][0];
    assert_eq!(a["poolName"], "pool-0");
    assert_eq!(a["deviceName"], "dev-0");
    assert_eq!(a["cdiDeviceIds"][0], "k8s.gpu.example.com/claim=uid-a-dev-0");
    assert_eq!(p["claims"]["uid-b"]["devices"][0]["deviceName"], "dev-1");
    let spec = root.join(format!("cdi/dpctl-dra-{DRIVER}-uid-a.json"));
    let text = std::fs::read_to_string(&spec).expect("the CDI spec of uid-a is written");
    assert!(text.contains("uid-a-dev-0") && text.contains("DPCTL_DRA_CLAIM=default/a"), "{text}");

    // The deprecated v1beta1 service answers the same.
    let cdi = root.join("cdi");
    let b = dra(
        root,
        &[
            "prepare",
            &reg,
            "--claim",
            "default/a/uid-a",
            "--service",
            "v1beta1",
            "--cdi-spec-dir",
            s(&cdi),
            "-o",
            "json",
        ],
    )
    .await;
    b.expect_code(0);
    assert_eq!(json(&b)["claims"]["uid-a"]["devices"][0]["deviceName"], "dev-0");

    // Live control: a device turns Unhealthy with a message; health shows it (v1 and v1alpha1).
    let sh = dra(root, &["device", "set-health", "dev-1", "Unhealthy", "--message", "ECC errors"]).await;
    sh.expect_code(0);
    assert!(sh.stdout.contains("ml/b"), "dev-1 is prepared for ml/b:\n{}", sh.stdout);
    for svc in ["v1", "v1alpha1"] {
        let h = dra(root, &["health", &reg, "--count", "1", "--service", svc, "-o", "json"]).await;
        h.expect_code(0);
        let h = json(&h);
        let dev1 = h["devices"].as_array().unwrap().iter().find(|x| x["device"] == "dev-1").unwrap().clone();
        assert_eq!(dev1["health"], "Unhealthy", "{svc}: {h}");
        assert_eq!(dev1["message"], "ECC errors", "{svc}");
        assert_eq!(h["devices"].as_array().unwrap().len(), 4);
    }

    // unprepare removes the CDI specs.
    let u = dra(root, &["unprepare", &reg, "--claim", "default/a/uid-a", "--claim", "ml/b/uid-b"]).await;
    u.expect_code(0);
    assert!(u.stdout.contains("unprepared"), "{}", u.stdout);
    assert!(!spec.exists(), "the CDI spec of uid-a is removed on unprepare");
    assert!(!root.join(format!("cdi/dpctl-dra-{DRIVER}-uid-b.json")).exists());

    // probe, on the registration socket and on the service socket: every rule passes.
    for sock in [reg.clone(), root.join(format!("plugins/{DRIVER}/dra.sock")).display().to_string()] {
        let pr = dra(root, &["probe", &sock, "--prepare", "--cdi-spec-dir", s(&root.join("cdi")), "-o", "json"]).await;
        pr.expect_code(0);
        let pr = json(&pr);
        let not_pass: Vec<&Value> = pr["checks"].as_array().unwrap().iter().filter(|c| c["status"] != "PASS").collect();
        assert!(not_pass.is_empty(), "{sock}: {not_pass:?}");
        assert!(pr["checks"].as_array().unwrap().iter().any(|c| c["name"] == "idempotent" && c["status"] == "PASS"));
    }

    let out = stop_child(child).await;
    assert!(out.stdout.contains("prepare") && out.stdout.contains("stopping"), "{}", out.stdout);
    assert!(sockets_in(&root.join("plugins_registry")).is_empty(), "the registration socket is removed on exit");
    assert!(sockets_in(&root.join(format!("plugins/{DRIVER}"))).is_empty(), "the service socket is removed on exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_probe_flags_each_rule_that_a_serve_fault_breaks() {
    // (fault, rule it breaks, FAIL or WARN, extra probe flags)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        ("wrong-type", "plugin-type", "FAIL", &[]),
        ("bad-driver-name", "driver-name", "FAIL", &[]),
        ("relative-endpoint", "endpoint-absolute", "FAIL", &[]),
        ("endpoint-outside-root", "endpoint-inside-root", "FAIL", &[]),
        ("long-endpoint", "endpoint-length", "FAIL", &[]),
        ("no-versions", "supported-versions", "FAIL", &[]),
        ("v1beta1-first", "version-order", "WARN", &[]),
        ("dead-endpoint", "endpoint-reachable", "FAIL", &[]),
        ("unserved-v1", "service-answers", "FAIL", &[]),
        ("slow=5s", "service-answers", "FAIL", &["--timeout", "1s"]),
        ("missing-uid", "answer-complete", "FAIL", &["--prepare"]),
        ("extra-uid", "answer-extra", "WARN", &[]),
        ("no-pool-name", "device-fields", "FAIL", &["--prepare"]),
        ("bad-cdi-id", "cdi-id", "FAIL", &["--prepare"]),
        ("not-idempotent", "idempotent", "FAIL", &["--prepare"]),
        ("unserved-health", "health-answers", "FAIL", &[]),
        ("health-stream-end", "health-stream", "WARN", &[]),
        ("health-bad-device", "health-device", "FAIL", &[]),
        ("long-message", "health-message", "WARN", &[]),
        ("no-timestamp", "health-time", "WARN", &[]),
    ];
    for (fault, rule, status, flags) in cases {
        let d = tmp();
        let root = d.path();
        let (child, reg) = dra_serve(root, &["--fault", fault]).await;
        let mut args = vec!["probe", s(&reg), "-o", "json"];
        args.extend_from_slice(flags);
        let r = dra(root, &args).await;
        let want = if *status == "FAIL" { 1 } else { 0 };
        assert_eq!(r.code, want, "--fault {fault}: exit code\n{}\n{}", r.stdout, r.stderr);
        let v = json(&r);
        let hit = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == *rule && c["status"] == *status);
        assert!(hit.is_some(), "--fault {fault}: no {status} {rule}:\n{}", r.stdout);
        // Only that rule (and what follows from it) is flagged: no other rule of the
        // registration fails because of it.
        let others: Vec<&Value> = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] != "PASS" && c["name"] != *rule)
            .filter(|c| !matches!(c["name"].as_str(), Some("service-answers" | "prepare" | "cdi")))
            .collect();
        assert!(others.is_empty(), "--fault {fault}: other rules flagged: {others:?}");
        stop_child(child).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_reports_per_claim_errors_and_missing_answers() {
    let d = tmp();
    let root = d.path();
    let (child, reg) = dra_serve(root, &["--fault", "prepare-error=device is on fire"]).await;
    let r = dra(root, &["prepare", s(&reg), "--claim", "default/a/uid-a"]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("device is on fire"), "{}", r.stdout);
    assert!(r.stderr.contains("1 of 1 claim(s) failed to prepare"), "{}", r.stderr);
    stop_child(child).await;

    let d = tmp();
    let root = d.path();
    let (child, reg) = dra_serve(root, &["--fault", "missing-uid"]).await;
    let r = dra(root, &["prepare", s(&reg), "--claim", "default/a/uid-a", "--claim", "default/b/uid-b"]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("(no answer)"), "{}", r.stdout);
    assert!(r.stderr.contains("answer-complete") && r.stderr.contains("uid-b"), "{}", r.stderr);
    stop_child(child).await;

    // CDI IDs whose spec is not in the spec directories: the runtime would fail the container.
    let d = tmp();
    let root = d.path();
    let (child, reg) = dra_serve(root, &[]).await;
    let elsewhere = root.join("etc-cdi");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let r = dra(root, &["prepare", s(&reg), "--claim", "default/a/uid-a", "--cdi-spec-dir", s(&elsewhere)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("unresolvable CDI device k8s.gpu.example.com/claim=uid-a-dev-0"), "{}", r.stderr);
    // The search path looked in is named, the same one doctor and the mock kubelet use.
    let path = format!("(CDI search path: {})", elsewhere.display());
    assert!(r.stderr.contains(&path), "{}", r.stderr);
    stop_child(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_runs_two_instances_at_once() {
    let d = tmp();
    let root = d.path();
    let (old, _) = dra_serve(root, &["--rolling-update", "aaa"]).await;
    let (new, _) = dra_serve(root, &["--rolling-update", "bbb", "--control-socket", s(&root.join("bbb.ctl"))]).await;
    let l = dra(root, &["list", "-o", "json"]).await;
    l.expect_code(0);
    let l = json(&l);
    let mut eps: Vec<String> =
        l.as_array().unwrap().iter().map(|x| x["endpoint"].as_str().unwrap().to_string()).collect();
    eps.sort();
    assert_eq!(
        eps,
        [
            root.join(format!("plugins/{DRIVER}/dra-aaa.sock")).display().to_string(),
            root.join(format!("plugins/{DRIVER}/dra-bbb.sock")).display().to_string()
        ]
    );
    assert!(l.as_array().unwrap().iter().all(|x| x["state"] == "live"), "{l}");
    stop_child(old).await;
    let l = json(&dra(root, &["list", "-o", "json"]).await);
    assert_eq!(l.as_array().unwrap().len(), 1, "{l}");
    assert_eq!(
        l[0]["registration"],
        root.join(format!("plugins_registry/{DRIVER}-bbb-reg.sock")).display().to_string()
    );
    let p = dra(
        root,
        &[
            "prepare",
            &format!("{DRIVER}-bbb-reg.sock"),
            "--claim",
            "default/a/uid-a",
            "--cdi-spec-dir",
            s(&root.join("cdi")),
        ],
    )
    .await;
    p.expect_code(0);
    stop_child(new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_usage_error_naming_the_fix() {
    let d = tmp();
    let root = d.path();
    let r = dpctl(&["--kubelet-root-dir", s(root), "dra", "serve", "--driver", "Bad_Name"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--driver") && r.stderr.contains("lowercase DNS subdomain"), "{}", r.stderr);
    let r =
        dpctl(&["--kubelet-root-dir", s(root), "dra", "serve", "--driver", DRIVER, "--fault", "missing-uids"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("did you mean missing-uid"), "{}", r.stderr);
    let r = dra(root, &["prepare", "x.sock", "--claim", "default/a"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("NAMESPACE/NAME/UID"), "{}", r.stderr);
    // A socket that is not there: one line naming where bare names are looked up.
    let r = dra(root, &["info", "nope-reg.sock"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("plugins_registry"), "{}", r.stderr);
    // Nothing was created for the bad serves.
    assert!(!root.join("plugins_registry").exists());
}

/// The interop peers built by tests/interop/setup.sh (the Python one speaks DRA).
fn python_peer() -> Option<(PathBuf, PathBuf)> {
    let dir = interop_peers(&["venv/bin/python", "python/dra_peer.py"])?;
    Some((dir.join("venv/bin/python"), dir.join("python/dra_peer.py")))
}

fn peer_cmd(py: &Path, peer: &Path, args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(py);
    c.arg(peer)
        .args(args)
        .env("PYTHONPATH", peer.parent().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_dpctl_client_commands_against_a_grpcio_dra_driver() {
    let Some((py, peer)) = python_peer() else { return };
    let d = tmp();
    let root = d.path();
    let cdi = root.join("cdi");
    let mut drv =
        peer_cmd(&py, &peer, &["driver", "--root", s(root), "--driver", "peer.example.com", "--cdi-dir", s(&cdi)])
            .spawn()
            .unwrap();
    let mut stdin = drv.stdin.take().unwrap();
    let mut tail = Tail::stdout(&mut drv);
    tail.wait_for("\"serving\"", 1).await;
    let reg = "peer.example.com-reg.sock";
    wait_until(10, "the peer's registration socket", || root.join("plugins_registry").join(reg).exists()).await;

    let i = dra(root, &["info", reg, "-o", "json"]).await;
    i.expect_code(0);
    let i = json(&i);
    assert_eq!((i["type"].as_str(), i["name"].as_str()), (Some("DRAPlugin"), Some("peer.example.com")));
    let l = json(&dra(root, &["list", "-o", "json"]).await);
    assert_eq!((l[0]["driver"].as_str(), l[0]["state"].as_str()), (Some("peer.example.com"), Some("live")), "{l}");
    let pr = dra(root, &["probe", reg, "--prepare", "--cdi-spec-dir", s(&cdi), "-o", "json"]).await;
    pr.expect_code(0);
    let pr = json(&pr);
    let failed: Vec<&Value> = pr["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "FAIL").collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(pr["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "health-answers"
            && c["detail"].as_str().unwrap().starts_with("v1alpha1.DRAResourceHealth")));

    let p =
        dra(root, &["prepare", reg, "--claim", "default/a/uid-a", "--twice", "--cdi-spec-dir", s(&cdi), "-o", "json"])
            .await;
    p.expect_code(0);
    let p = json(&p);
    assert_eq!(p["claims"]["uid-a"]["devices"][0]["cdiDeviceIds"][0], "peer.example.com/gpu=gpu-0");
    tail.wait_for("NodePrepareResources", 4).await;

    // A health change in the peer reaches `dra health` as a diff line.
    let mut h = dpctl_cmd(&["--kubelet-root-dir", s(root), "dra", "health", reg, "--count", "2"]).spawn().unwrap();
    let mut ht = Tail::stdout(&mut h);
    ht.wait_for("gpu-1", 1).await;
    use tokio::io::AsyncWriteExt;
    stdin.write_all(b"health gpu-1 UNHEALTHY\n").await.unwrap();
    stdin.flush().await.unwrap();
    ht.wait_for("~ peer-pool/gpu-1 Healthy -> Unhealthy", 1).await;
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), h.wait()).await.expect("health exits").unwrap();
    assert!(out.success());

    let u = dra(root, &["unprepare", reg, "--claim", "default/a/uid-a"]).await;
    u.expect_code(0);
    drop(stdin);
    let _ = stop_child(drv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_a_grpcio_kubelet_registers_prepares_and_watches_dra_serve() {
    let Some((py, peer)) = python_peer() else { return };
    let d = tmp();
    let root = d.path();
    let (serve, _) = dra_serve(root, &["--services", "v1.DRAPlugin,v1.DRAResourceHealth"]).await;
    let mut k = peer_cmd(&py, &peer, &["kubelet", "--root", s(root)]).spawn().unwrap();
    let mut stdin = k.stdin.take().unwrap();
    let mut tail = Tail::stdout(&mut k);
    tail.wait_for("\"registered\"", 1).await;
    assert!(tail.seen().contains("\"type\": \"DRAPlugin\""), "{}", tail.seen());
    tail.wait_for("\"health\"", 1).await;
    assert!(tail.seen().contains("\"pool-0/dev-0\": \"Healthy\""), "{}", tail.seen());

    use tokio::io::AsyncWriteExt;
    stdin.write_all(b"prepare default/a/uid-a,default/b/uid-b\n").await.unwrap();
    stdin.flush().await.unwrap();
    tail.wait_for("\"prepared\"", 1).await;
    assert!(tail.seen().contains("k8s.gpu.example.com/claim=uid-a-dev-0"), "{}", tail.seen());
    assert!(root.join(format!("cdi/dpctl-dra-{DRIVER}-uid-b.json")).exists());

    // Live control reaches the grpcio kubelet's health stream.
    dra(root, &["device", "set-health", "dev-0", "Unhealthy", "--message", "too hot"]).await.expect_code(0);
    tail.wait_for("\"pool-0/dev-0\": \"Unhealthy\"", 1).await;
    assert!(tail.seen().contains("too hot"), "{}", tail.seen());

    stdin.write_all(b"unprepare default/a/uid-a,default/b/uid-b\n").await.unwrap();
    stdin.flush().await.unwrap();
    tail.wait_for("\"unprepared\"", 1).await;
    assert!(!root.join(format!("cdi/dpctl-dra-{DRIVER}-uid-b.json")).exists());
    let out = stop_child(serve).await;
    // The registration status the grpcio kubelet sent reached dpctl dra serve.
    assert!(out.stdout.contains("registered driver=gpu.example.com via=plugin-watcher"), "{}", out.stdout);
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_dra_plugins_broken_registrations_health_and_unresolvable_cdi_ids() {
    let d = tmp();
    let root = d.path();
    let (good, _) = dra_serve(root, &[]).await;
    let (nohealth, _) = dra_serve_as(root, "b.example.com", &["--fault", "unserved-health"]).await;
    let (outside, _) = dra_serve_as(root, "c.example.com", &["--fault", "endpoint-outside-root"]).await;
    // A claim prepared through the real driver (its CDI spec exists) and one whose spec is gone.
    let reg = format!("{DRIVER}-reg.sock");
    dra(root, &["prepare", &reg, "--claim", "ml/ok/uid-ok", "--cdi-spec-dir", s(&root.join("cdi"))])
        .await
        .expect_code(0);
    let entries = serde_json::json!([
        {"ClaimUID": "uid-ok", "ClaimName": "ok", "Namespace": "ml", "PodUIDs": {"p1": {}},
         "DriverState": {DRIVER: {"Devices": [{"PoolName": "pool-0", "DeviceName": "dev-0",
            "CDIDeviceIDs": ["k8s.gpu.example.com/claim=uid-ok-dev-0"]}]}}},
        {"ClaimUID": "uid-gone", "ClaimName": "gone", "Namespace": "ml", "PodUIDs": {"p2": {}},
         "DriverState": {DRIVER: {"Devices": [{"PoolName": "pool-0", "DeviceName": "dev-1",
            "CDIDeviceIDs": ["k8s.gpu.example.com/claim=uid-gone-dev-1"]}]}}}
    ]);
    let data = serde_json::json!({"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "Entries": entries});
    let data = data.to_string();
    // The kubelet's CRC-32 of Data: a checkpoint the kubelet would refuse is not read.
    let cp = serde_json::json!({"Data": data, "Checksum": dpctl::client::dra_checkpoint::crc32(data.as_bytes())});
    std::fs::write(root.join("dra_manager_state"), cp.to_string()).unwrap();

    // A service socket left behind by a driver that died.
    std::fs::create_dir_all(root.join("plugins/old.example.com")).unwrap();
    drop(std::os::unix::net::UnixListener::bind(root.join("plugins/old.example.com/dra.sock")).unwrap());
    let r =
        dpctl(&["--kubelet-root-dir", s(root), "doctor", "--cdi-spec-dir", s(&root.join("cdi")), "-o", "json"]).await;
    let v = json(&r);
    let f = |check: &str| -> Vec<Value> {
        v["findings"].as_array().unwrap().iter().filter(|x| x["check"] == check).cloned().collect()
    };
    let listed: Vec<String> = f("dra-plugin").iter().map(|x| x["subject"].as_str().unwrap().to_string()).collect();
    assert_eq!(listed, ["b.example.com", "c.example.com", DRIVER], "{v}");
    let regs = f("dra-registration");
    assert_eq!(regs.len(), 1, "{v}");
    assert!(regs[0]["subject"].as_str().unwrap().contains("c.example.com"));
    assert!(regs[0]["evidence"].as_str().unwrap().contains("endpoint-inside-root"), "{}", regs[0]);
    let h = f("dra-health");
    assert_eq!(h.len(), 1, "{v}");
    assert_eq!(h[0]["subject"], "b.example.com");
    let c = f("dra-cdi");
    assert_eq!(c.len(), 1, "{v}");
    assert!(c[0]["subject"].as_str().unwrap().contains("uid-gone"));
    assert!(c[0]["evidence"].as_str().unwrap().contains("uid-gone-dev-1"));
    assert_eq!(v["checked"]["draPlugins"], 3);
    let stale = f("dra-stale-socket");
    assert_eq!(stale.len(), 1, "{v}");
    assert!(stale[0]["subject"].as_str().unwrap().ends_with("plugins/old.example.com/dra.sock"));
    for child in [good, nohealth, outside] {
        stop_child(child).await;
    }
}

/// Requests an in-test API server saw: (method, path, body).
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>;

/// An in-test plain-HTTP API server that keeps ResourceSlices in a map and records every request.
async fn fake_api_server() -> (String, Seen, tokio::sync::oneshot::Sender<()>) {
    use hyper::body::Body as _;
    use std::sync::{Arc, Mutex};
    let seen: Seen = Arc::default();
    let store: Arc<Mutex<std::collections::BTreeMap<String, Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
    let s2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                c = listener.accept() => c.unwrap(),
                _ = &mut rx => return,
            };
            let (seen, store) = (s2.clone(), store.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (seen, store) = (seen.clone(), store.clone());
                    async move {
                        let (parts, mut body) = req.into_parts();
                        let mut buf = Vec::new();
                        while let Some(Ok(f)) =
                            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
                        {
                            if let Ok(d) = f.into_data() {
                                buf.extend_from_slice(&d);
                            }
                        }
                        let v: Value = serde_json::from_slice(&buf).unwrap_or(Value::Null);
                        let path = parts.uri.path().to_string();
                        seen.lock().unwrap().push((parts.method.to_string(), path.clone(), v.clone()));
                        let name = path.rsplit('/').next().unwrap_or("").to_string();
                        let mut st = store.lock().unwrap();
                        let (code, out) = match parts.method.as_str() {
                            "POST" => {
                                let n = v["metadata"]["name"].as_str().unwrap_or("").to_string();
                                match st.entry(n) {
                                    std::collections::btree_map::Entry::Occupied(_) => (
                                        409,
                                        serde_json::json!({"kind": "Status", "reason": "AlreadyExists", "message": "exists"}),
                                    ),
                                    std::collections::btree_map::Entry::Vacant(e) => {
                                        let mut v = v.clone();
                                        v["metadata"]["resourceVersion"] = "1".into();
                                        e.insert(v.clone());
                                        (201, v)
                                    }
                                }
                            }
                            "GET" => match st.get(&name) {
                                Some(v) => (200, v.clone()),
                                None => (404, serde_json::json!({"message": "not found"})),
                            },
                            "PUT" => {
                                let mut v = v.clone();
                                v["metadata"]["resourceVersion"] = "2".into();
                                st.insert(name, v.clone());
                                (200, v)
                            }
                            "DELETE" => match st.remove(&name) {
                                Some(v) => (200, v),
                                None => (404, serde_json::json!({"message": "not found"})),
                            },
                            _ => (405, Value::Null),
                        };
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder().status(code).body(out.to_string()).unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, seen, tx)
}

/// A kubeconfig under `root` for the plain-HTTP API server at `addr`.
fn kubeconfig(root: &Path, addr: &str) -> PathBuf {
    let kc = root.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nclusters:\n- name: t\n  cluster: {{server: 'http://{addr}'}}\nusers:\n- name: u\n  user: {{token: tok}}\ncontexts:\n- name: c\n  context: {{cluster: t, user: u}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    kc
}

/// `dra probe --prepare` on a driver that reads its claims from an API
/// server (as the kubeletplugin helper does) says so and what to do, as a
/// WARN: not a FAIL of the driver, and no idempotence PASS built on the
/// failed prepares (issue 35 item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_probe_prepare_on_a_driver_that_reads_claims_from_an_api_server_says_what_to_do() {
    let d = tmp();
    let root = d.path();
    let (addr, _seen, _stop) = fake_api_server().await;
    let kc = kubeconfig(root, &addr);
    let (child, reg) = dra_serve(root, &["--kubeconfig", s(&kc), "--node-name", "node-1"]).await;
    let r = dra(root, &["probe", s(&reg), "--prepare", "-o", "json"]).await;
    r.expect_code(0);
    let v = json(&r);
    let checks = v["checks"].as_array().unwrap();
    let prepare = checks.iter().find(|c| c["name"] == "prepare").unwrap_or_else(|| panic!("{}", r.stdout));
    assert_eq!(prepare["status"], "WARN", "{prepare}");
    let detail = prepare["detail"].as_str().unwrap();
    assert!(detail.contains("reads its claims from an API server"), "{detail}");
    assert!(detail.contains("--claim NS/NAME/UID") && detail.contains("dpctl test --dra"), "{detail}");
    assert!(detail.contains("fetch ResourceClaim dpctl-probe/probe"), "the driver's own words: {detail}");
    assert!(checks.iter().all(|c| c["name"] != "idempotent" && c["status"] != "FAIL"), "{}", r.stdout);
    stop_child(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_publishes_its_devices_as_a_resourceslice_and_withdraws_it() {
    let d = tmp();
    let root = d.path();
    let (addr, seen, _stop) = fake_api_server().await;
    let kc = kubeconfig(root, &addr);
    let run =
        |seen: &Seen| -> Vec<String> { seen.lock().unwrap().iter().map(|(m, p, _)| format!("{m} {p}")).collect() };
    let path = "/apis/resource.k8s.io/v1/resourceslices";
    let name = format!("node-1-{DRIVER}-pool-0");
    let (child, _) = dra_serve(root, &["--kubeconfig", s(&kc), "--node-name", "node-1", "--devices", "2"]).await;
    wait_until(10, "the ResourceSlice POST", || !seen.lock().unwrap().is_empty()).await;
    {
        let g = seen.lock().unwrap();
        let (_, _, body) = &g[0];
        assert_eq!(body["spec"]["driver"], DRIVER);
        assert_eq!(body["spec"]["nodeName"], "node-1");
        assert_eq!(body["spec"]["devices"], serde_json::json!([{"name": "dev-0"}, {"name": "dev-1"}]));
        assert_eq!(body["metadata"]["name"], name);
    }
    // A second instance (same node, driver and pool) replaces the slice: POST → 409 → GET → PUT.
    let d2 = tmp();
    // Asked to (it is not the default, as the kubeletplugin helper), it deletes its slice when it stops.
    let (child2, _) = dra_serve(
        d2.path(),
        &["--kubeconfig", s(&kc), "--node-name", "node-1", "--devices", "2", "--withdraw-on-exit"],
    )
    .await;
    wait_until(10, "the ResourceSlice PUT", || run(&seen).iter().any(|r| r.starts_with("PUT"))).await;
    assert_eq!(
        run(&seen),
        [format!("POST {path}"), format!("POST {path}"), format!("GET {path}/{name}"), format!("PUT {path}/{name}")]
    );
    let out = stop_child(child2).await;
    assert!(out.stdout.contains("resourceslice-deleted"), "{}", out.stdout);
    assert_eq!(run(&seen).last().unwrap(), &format!("DELETE {path}/{name}"));
    stop_child(child).await;

    // A kubeconfig client-go refuses is refused up front: a usage error in client-go's words, naming the field.
    std::fs::write(&kc, "clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n").unwrap();
    let r = dpctl(&[
        "--kubelet-root-dir",
        s(root),
        "dra",
        "serve",
        "--driver",
        DRIVER,
        "--kubeconfig",
        s(&kc),
        "--node-name",
        "n",
    ])
    .await;
    r.expect_code(2);
    assert!(
        r.stderr.contains("users[u].user.exec: invalid configuration: [apiVersion must be specified for u to use exec authentication plugin"),
        "{}",
        r.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_recreates_a_deleted_socket_and_keeps_answering() {
    let d = tmp();
    let root = d.path();
    let (mut child, reg) = dra_serve(root, &[]).await;
    let mut tail = Tail::stdout(&mut child);
    let svc = root.join(format!("plugins/{DRIVER}/dra.sock"));
    // The kubelet's plugin watcher sees a deleted registration socket as the plugin leaving:
    // the driver serves a new one so it registers again; likewise its service socket.
    std::fs::remove_file(&reg).unwrap();
    tail.wait_for("our plugin-watcher socket was deleted", 1).await;
    let answers = |p: &Path| std::os::unix::net::UnixStream::connect(p).is_ok();
    wait_until(10, "a new registration socket answering", || answers(&reg)).await;
    std::fs::remove_file(&svc).unwrap();
    tail.wait_for("our service socket was deleted", 1).await;
    wait_until(10, "a new service socket answering", || answers(&svc)).await;
    let p =
        dra(root, &["prepare", s(&reg), "--claim", "default/a/uid-a", "--cdi-spec-dir", s(&root.join("cdi"))]).await;
    p.expect_code(0);
    assert!(p.stdout.contains("pool-0/dev-0"), "{}", p.stdout);
    stop_tailed(child, tail).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_accepts_socket_path_authorities_on_both_sockets() {
    use crate::authority::{grpc_status, raw_call, AUTHORITIES};
    let d = tmp();
    let root = d.path();
    let (child, reg) = dra_serve(root, &[]).await;
    let svc = root.join(format!("plugins/{DRIVER}/dra.sock"));
    for auth in AUTHORITIES.iter().chain(["localhost"].iter()) {
        let o = raw_call(&reg, auth, "/pluginregistration.Registration/GetInfo", &[]).await;
        assert_eq!(grpc_status(&o), Some("0"), "GetInfo, authority {auth}: {o:?}");
        for path in [
            "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
            "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
        ] {
            let o = raw_call(&svc, auth, path, &[]).await;
            assert_eq!(grpc_status(&o), Some("0"), "{path}, authority {auth}: {o:?}");
        }
        // A service this socket does not serve is Unimplemented (12), as grpc-go answers.
        let o = raw_call(&svc, auth, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &[]).await;
        assert_eq!(grpc_status(&o), Some("12"), "authority {auth}: {o:?}");
    }
    stop_child(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_probe_waits_for_a_driver_that_is_still_starting() {
    let d = tmp();
    let root = d.path();
    // Probe first (nothing there yet), then start the driver: --wait bridges the gap.
    let probe = dpctl_cmd(&[
        "--kubelet-root-dir",
        s(root),
        "dra",
        "probe",
        &format!("{DRIVER}-reg.sock"),
        "--wait",
        "20s",
        "-o",
        "json",
    ])
    .spawn()
    .unwrap();
    let cdi = root.join("cdi");
    let child = dpctl_cmd(&[
        "--kubelet-root-dir",
        s(root),
        "dra",
        "serve",
        "--driver",
        DRIVER,
        "--cdi-dir",
        s(&cdi),
        "--health-timeout",
        "30",
    ])
    .spawn()
    .unwrap();
    let out =
        tokio::time::timeout(std::time::Duration::from_secs(30), probe.wait_with_output()).await.unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["checks"][0]["name"], "wait");
    assert!(v["checks"].as_array().unwrap().iter().any(|c| c["name"] == "health-answers" && c["status"] == "PASS"));
    // --health-timeout reaches the health entries.
    let h = dra(root, &["health", &format!("{DRIVER}-reg.sock"), "--count", "1", "-o", "json"]).await;
    h.expect_code(0);
    assert_eq!(json(&h)["devices"][0]["healthCheckTimeoutSeconds"], 30);
    stop_child(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_socket_serving_only_v1_and_no_health_probes_clean() {
    let d = tmp();
    let root = d.path();
    let (child, svc) = dra_serve(root, &["--no-register", "--services", "v1.DRAPlugin"]).await;
    assert!(sockets_in(&root.join("plugins_registry")).is_empty(), "--no-register creates no registration socket");
    let r = dra(root, &["probe", s(&svc), "-o", "json"]).await;
    r.expect_code(0);
    let v = json(&r);
    assert_eq!(v["result"], "PASS", "{v}");
    let details: Vec<&str> =
        v["checks"].as_array().unwrap().iter().map(|c| c["detail"].as_str().unwrap_or("")).collect();
    assert!(details.iter().any(|d| d.contains("v1beta1.DRAPlugin: not served here")), "{details:?}");
    assert!(details.iter().any(|d| d.contains("no health service served here")), "{details:?}");
    stop_child(child).await;
}
