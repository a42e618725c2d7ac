//! Issue 11 (hardening): every bad input and hostile peer the fuzzing run
//! found, reproduced against the real binary.

use crate::support::*;

/// Text a terminal or `grep` would choke on: control characters other than newline.
fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}

/// ARM's smarter-device-manager uses IDs "\x00".."\x03": probe warns, tables
/// and diffs show them escaped and aligned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_character_ids_are_escaped_and_probe_warns() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let devices = (0..4).map(|i| dev(&char::from(i as u8).to_string(), "Healthy", Some(0))).collect();
    let _p = start_plugin(&sock, devices, Behaviour::default()).await;

    let r = dpctl(&["probe", s(&sock)]).await;
    r.expect_code(0);
    assert!(!has_control(&r.stdout), "raw control characters in {:?}", r.stdout);
    let warn = r.stdout.lines().find(|l| l.starts_with("WARN") && l.contains("devices")).unwrap_or_else(|| {
        panic!("no WARN for the devices check:\n{}", r.stdout);
    });
    assert!(warn.contains("\"\\x00\" is not printable ASCII"), "{warn}");

    let r = dpctl(&["watch", s(&sock), "--count", "1"]).await;
    r.expect_code(0);
    assert!(!has_control(&r.stdout), "raw control characters in {:?}", r.stdout);
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("\\x0")).collect();
    assert_eq!(rows.len(), 4, "{}", r.stdout);
    let col = |l: &str| l.find("Healthy").unwrap();
    let header = r.stdout.lines().next().unwrap();
    assert!(rows.iter().all(|l| col(l) == header.find("HEALTH").unwrap()), "misaligned:\n{}", r.stdout);
}

/// Send `payload` to a line socket and read the first answer line, while the
/// peer may close early. Returns the answer and whether writing all of it succeeded.
async fn line_exchange(sock: &std::path::Path, payload: Vec<u8>) -> (String, bool) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = tokio::net::UnixStream::connect(sock).await.expect("connect");
    let (r, mut w) = stream.into_split();
    let writer = tokio::spawn(async move { w.write_all(&payload).await.is_ok() && w.flush().await.is_ok() });
    let mut line = String::new();
    let mut r = BufReader::new(r);
    let read = r.read_line(&mut line);
    tokio::time::timeout(std::time::Duration::from_secs(20), read).await.expect("no answer within 20s").expect("read");
    let wrote_all = tokio::time::timeout(std::time::Duration::from_secs(20), writer).await.expect("writer").unwrap();
    (line, wrote_all)
}

async fn wait_socket(p: &std::path::Path) {
    wait_until(10, "the socket", || std::os::unix::net::UnixStream::connect(p).is_ok()).await;
}

/// Items 4 and 13: a line without end is cut at 1 MiB and answered; invalid
/// UTF-8 is answered before the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_and_status_sockets_bound_lines_and_answer_bad_utf8() {
    let d = tmp();
    let dp = d.path().join("dp");
    std::fs::create_dir(&dp).unwrap();
    let control = d.path().join("c.sock");
    let serve =
        serve_cmd(&dp, &["--no-register", "--resource", "v.e/a", "--control-socket", s(&control)]).spawn().unwrap();
    wait_socket(&control).await;

    // 64 MiB without a newline: answered after at most 1 MiB, then closed.
    let (answer, wrote_all) = line_exchange(&control, vec![b'x'; 64 << 20]).await;
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("longer than 1 MiB"), "{answer}");
    assert!(!wrote_all, "the server read all 64 MiB instead of closing");

    let (answer, _) = line_exchange(&control, b"{\"op\":\"li\xffst\"}\n{\"op\":\"list\"}\n".to_vec()).await;
    assert!(answer.contains("\"ok\":false") && answer.contains("not UTF-8"), "{answer:?}");

    // a valid request still works afterwards
    let (answer, _) = line_exchange(&control, b"{\"op\":\"list\"}\n".to_vec()).await;
    assert!(answer.contains("\"ok\":true") && answer.contains("a-0"), "{answer:?}");
    let out = stop_child(serve).await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    // the mock kubelet's status socket, the same way
    let n = crate::mock_kubelet::Node::new();
    let k = n.start(&[]).await;
    let status = dpctl::kubelet::node::status_socket(&n.dp());
    wait_socket(&status).await;
    let (answer, wrote_all) = line_exchange(&status, vec![b'{'; 64 << 20]).await;
    assert!(answer.contains("\"ok\":false") && answer.contains("longer than 1 MiB"), "{answer:?}");
    assert!(!wrote_all);
    let (answer, _) = line_exchange(&status, b"\xc3\x28\n".to_vec()).await;
    assert!(answer.contains("not UTF-8"), "{answer:?}");
    stop_child(k).await;
}

/// Item 1: device counts far past any real plugin are usage errors naming
/// the flag or field, not a panic (exit 101) or an abort (SIGABRT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_counts_are_usage_errors() {
    let d = tmp();
    let dp = s(d.path());
    for (count, flag) in [("18446744073709551615", "--count"), ("4294967296", "--count"), ("100001", "--count")] {
        let r = dpctl(&["serve", "--plugin-dir", dp, "--no-register", "--resource", "v.e/a", "--count", count]).await;
        r.expect_code(2);
        assert!(r.stderr.contains(flag) && r.stderr.lines().count() <= 4, "{}", r.stderr);
    }
    let r = dpctl(&["serve", "--plugin-dir", dp, "--no-register", "--resource", "v.e/a", "--numa-nodes", "4294967295"])
        .await;
    r.expect_code(2);
    assert!(r.stderr.contains("--numa-nodes"), "{}", r.stderr);
    let r = dpctl(&["bench", "watch", "--sizes", "10,18446744073709551615"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--sizes"), "{}", r.stderr);
    let r = dpctl(&["mock-kubelet", "--plugin-dir", dp, "--max-recv-size", "16384Mi"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--max-recv-size"), "{}", r.stderr);

    let cfg = d.path().join("c.json");
    std::fs::write(&cfg, r#"{"register": false, "resources": [{"resource": "v.e/a", "count": 100000000}]}"#).unwrap();
    let r = dpctl(&["serve", "--plugin-dir", dp, "--config", s(&cfg)]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("resources[0].count: 100000000 is out of range; at most 100000"), "{}", r.stderr);
}

/// Items 5 and 6: `serve` decodes at most the kubelet's 4 MiB, and its
/// InvalidArgument answer lists a bounded number of unknown IDs, so the
/// status fits the 16 KiB metadata limit of grpc clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_bounds_requests_and_status_messages() {
    use dpctl::api::deviceplugin::device_plugin_client::DevicePluginClient;
    use dpctl::api::deviceplugin::{AllocateRequest, ContainerAllocateRequest};
    let d = tmp();
    let dp = d.path().join("dp");
    std::fs::create_dir(&dp).unwrap();
    let (serve, sock) = serve_unregistered(&dp, "v.e/a", "a.sock", &[]).await;
    let ch = dpctl::core::transport::dial(&sock, std::time::Duration::from_secs(5)).await.unwrap();
    let mut c = DevicePluginClient::new(ch).max_encoding_message_size(usize::MAX).max_decoding_message_size(usize::MAX);
    let req = |n: usize| AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: (0..n).map(|i| format!("unknown-{i:08}")).collect(),
        }],
    };
    // 6 MiB: refused by the receive limit, before any decoding
    let e = c.allocate(req(6 << 20 >> 4)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e:?}");
    assert!(e.message().contains("4194304"), "{}", e.message());
    // 3 MiB of unknown IDs: a short InvalidArgument naming 20 and counting the rest
    let n = 3 << 20 >> 4;
    let e = c.allocate(req(n)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().len() < 2048, "{} bytes", e.message().len());
    assert!(e.message().contains(&format!("+{} more", n - 20)), "{}", e.message());
    let out = stop_child(serve).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.len() < 1 << 20, "the event log echoed the request: {} bytes", out.stdout.len());
}

/// `dpctl ARGS` under `umask 000`.
fn dpctl_umask000(args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("sh");
    c.arg("-c").arg("umask 000; exec \"$0\" \"$@\"").arg(env!("CARGO_BIN_EXE_dpctl")).args(args);
    c.env_remove("DPCTL_PLUGIN_DIR")
        .env_remove("DPCTL_KUBELET_SOCKET")
        .env_remove("DPCTL_POD_RESOURCES_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    c
}

fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).mode() & 0o777
}

/// Items 8 and 10: a symlink planted at the old predictable checkpoint temp
/// name is never followed, and under `umask 000` directories are 0750, the
/// checkpoint and traces 0600, sockets 0660.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_symlinks_are_not_followed_and_modes_ignore_the_umask() {
    let n = crate::mock_kubelet::Node::new();
    let (dp, pods) = (n.dp(), n.pods());
    let pr_sock = n.dir.path().join("pr").join("kubelet.sock");
    let victim = n.dir.path().join("victim.conf");
    std::fs::write(&victim, "precious").unwrap();
    let kubelet = dpctl_umask000(&[
        "mock-kubelet",
        "--plugin-dir",
        s(&dp),
        "--manifests",
        s(&pods),
        "--pod-resources-socket",
        s(&pr_sock),
    ])
    .spawn()
    .unwrap();
    let pid = kubelet.id().unwrap();
    std::os::unix::fs::symlink(&victim, dp.join(format!(".kubelet_internal_checkpoint.tmp-{pid}"))).unwrap();
    let k = n.kubelet();
    wait_until(10, "kubelet.sock", || std::os::unix::net::UnixStream::connect(&k).is_ok()).await;
    let serve = dpctl_umask000(&["serve", "--plugin-dir", s(&dp), "--resource", "v.e/a", "--socket-name", "a.sock"])
        .spawn()
        .unwrap();
    n.wait_resource("v.e/a", "registered", |r| r["allocatable"] == 1).await;
    n.pod("p.yaml", &crate::mock_kubelet::pod_yaml("p", "v.e/a", 1));
    n.wait_pod("p").await;
    let cp = dp.join("kubelet_internal_checkpoint");
    wait_until(10, "the checkpoint to hold the pod", || {
        std::fs::read_to_string(&cp).is_ok_and(|t| t.contains("v.e/a") && t.contains("a-0"))
    })
    .await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the checkpoint went through the symlink");

    assert_eq!(mode(&cp), 0o600, "checkpoint");
    assert_eq!(mode(&dp.join("dpctl-control")), 0o750, "dpctl-control/");
    assert_eq!(mode(pr_sock.parent().unwrap()), 0o750, "pod-resources dir");
    for sock in [k.clone(), pr_sock.clone(), dp.join("a.sock")] {
        assert_eq!(mode(&sock), 0o660, "{}", sock.display());
    }

    let trace = n.dir.path().join("w.trace");
    let r = run_cmd(dpctl_umask000(&["watch", s(&dp.join("a.sock")), "--count", "1", "--record", s(&trace)])).await;
    r.expect_code(0);
    assert_eq!(mode(&trace), 0o600, "watch --record trace");
    stop_child(serve).await;
    stop_child(kubelet).await;
}

/// Item 2: a 100 KB manifest of nested flow collections (24 s of parsing
/// before) is refused at once, and admissions and PodResources go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_manifests_stall_nothing() {
    let n = crate::mock_kubelet::Node::new();
    let k = n.start(&[]).await;
    let serve = n.serve(&["--resource", "v.e/a", "--count", "2"]).await;
    n.wait_resource("v.e/a", "registered", |r| r["allocatable"] == 2).await;
    n.pod("n.yaml", &format!("metadata: {{name: {}}}\n", "[".repeat(100_000)));
    n.pod("m.yaml", &format!("a: x 'y\nb: {}\n", "[ 'x]', ".repeat(60_000)));
    n.pod("p.yaml", &crate::mock_kubelet::pod_yaml("p", "v.e/a", 1));
    n.wait_pod("p").await;
    let why = n.wait_rejected("n.yaml").await;
    assert!(why.contains("nested 100001 levels deep"), "{why}");
    let why = n.wait_rejected("m.yaml").await;
    assert!(why.contains("flow collections"), "{why}");
    let r = dpctl(&["podresources", "list", "--socket", s(&n.pr()), "--timeout", "5s"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("p"), "{}", r.stdout);
    stop_child(serve).await;
    stop_child(k).await;
}

/// Item 7: a real dpctl server (through its `:authority` shim) answers a frame
/// over SETTINGS_MAX_FRAME_SIZE with GOAWAY FRAME_SIZE_ERROR instead of
/// buffering 16 MiB, and keeps serving other connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authority_shim_answers_oversized_frames_with_goaway() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let d = tmp();
    let sock = d.path().join("kubelet.sock");
    let (_requests, _stop) = kubelet::start(&sock, None).await;
    let mut conn = tokio::net::UnixStream::connect(&sock).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // SETTINGS
    out.extend_from_slice(&[0xff, 0xff, 0xff, 0x1, 0x4, 0, 0, 0, 1]); // HEADERS of 16 MiB - 1
    out.extend(vec![0u8; 64 << 10]);
    let _ = conn.write_all(&out).await;
    let mut buf = Vec::new();
    let goaway = async {
        loop {
            while buf.len() >= 9 {
                let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                if buf[3] == 0x7 {
                    return Some(u32::from_be_bytes([buf[13], buf[14], buf[15], buf[16]]));
                }
                buf.drain(..9 + len);
            }
            let mut tmp = [0u8; 4096];
            match conn.read(&mut tmp).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
    };
    let code = tokio::time::timeout(std::time::Duration::from_secs(10), goaway).await.expect("no answer in 10s");
    assert_eq!(code, Some(0x6), "expected GOAWAY FRAME_SIZE_ERROR");
    // the server is still there for well-behaved clients
    let o = crate::authority::raw_call(&sock, "/tmp/d/kubelet.sock", "/v1beta1.Registration/Register", &[]).await;
    assert!(matches!(o, crate::authority::Outcome::Answered(_)), "{o:?}");
}

/// Item 11: errors and logs echo at most 80 characters of a value, then its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_values_are_capped() {
    let d = tmp();
    let dp = s(d.path());
    // a config with a 2 MB enum value: one short line, not 2 MB
    let cfg = d.path().join("c.json");
    let huge = "B".repeat(2_000_000);
    std::fs::write(&cfg, format!(r#"{{"registration": "{huge}", "resources": [{{"resource": "v.e/a"}}]}}"#)).unwrap();
    let r = dpctl(&["serve", "--plugin-dir", dp, "--config", s(&cfg)]).await;
    r.expect_code(2);
    assert!(r.stderr.len() < 400, "{} bytes of error", r.stderr.len());
    assert!(
        r.stderr.contains("unknown variant `BBBB") && r.stderr.contains("… (2000000 bytes)`, expected `kubelet`"),
        "{}",
        r.stderr
    );
    // a 100 KB flag value
    let long = "9".repeat(100_000);
    let r = dpctl(&["watch", "x.sock", "--timeout", &format!("{long}x")]).await;
    r.expect_code(2);
    assert!(r.stderr.len() < 600, "{} bytes of error: {}", r.stderr.len(), &r.stderr[..300.min(r.stderr.len())]);
    assert!(r.stderr.contains("--timeout"), "{}", r.stderr);

    // a Register with a 5,000-character endpoint: a short error back, a short log line
    let n = crate::mock_kubelet::Node::new();
    let k = n.start(&[]).await;
    let ch = dpctl::core::transport::dial(&n.kubelet(), std::time::Duration::from_secs(5)).await.unwrap();
    let mut c = dpctl::api::deviceplugin::registration_client::RegistrationClient::new(ch);
    let e = c
        .register(dpctl::api::deviceplugin::RegisterRequest {
            version: "v1beta1".into(),
            endpoint: "e".repeat(5000),
            resource_name: format!("v.e/{}", "r".repeat(5000)),
            options: None,
        })
        .await
        .unwrap_err();
    assert!(e.message().len() < 300, "{} bytes: {}", e.message().len(), e.message());
    assert!(e.message().contains("… (5004 bytes)"), "{}", e.message());
    let out = stop_child(k).await;
    let line = out.stdout.lines().find(|l| l.contains("registration-rejected")).expect("a rejection is logged");
    assert!(line.len() < 1000, "{} bytes: {line}", line.len());
}

/// Item 3: `replay --against` diffs a trace holding non-ASCII text around the
/// 160-byte cut of its diff lines (it panicked on `&s[..160]`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_against_diffs_non_ascii_values() {
    let d = tmp();
    let (a, b) = (d.path().join("a.sock"), d.path().join("b.sock"));
    let id = "é".repeat(200);
    let _pa = start_plugin(&a, vec![dev(&id, "Healthy", None)], Behaviour::default()).await;
    let _pb = start_plugin(&b, vec![dev("plain", "Healthy", None)], Behaviour::default()).await;
    let trace = d.path().join("t.jsonl");
    dpctl(&["watch", s(&a), "--count", "1", "--record", s(&trace)]).await.expect_code(0);
    let r = dpctl(&["replay", s(&trace), "--against", s(&b)]).await;
    assert_eq!(r.code, 1, "a difference, not a panic (101)\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("éé… (") && !r.stderr.contains("panicked"), "{}\n{}", r.stdout, r.stderr);
}

/// The bounds leave the largest allowed plugin usable: 100,000 devices are
/// served and listed through live control (an answer of several MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_allowed_plugin_still_works() {
    let d = tmp();
    let control = d.path().join("c.sock");
    let serve = serve_cmd(
        d.path(),
        &["--no-register", "--resource", "v.e/a", "--count", "100000", "--control-socket", s(&control)],
    )
    .spawn()
    .unwrap();
    wait_socket(&control).await;
    let r = dpctl(&["device", "list", "--control", s(&control), "-o", "json"]).await;
    r.expect_code(0);
    assert!(r.stdout.len() > 1 << 20 && r.stdout.contains("a-99999"), "{} bytes", r.stdout.len());
    stop_child(serve).await;
}

/// #34 item 5: a UID that could not be the API server's (it assigns UUIDs)
/// — here a path — is refused where the manifest is read, with a one-line
/// reason, for a claim and for a pod; the claim never reaches a driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_like_uids_in_manifests_are_refused_and_never_reach_a_driver() {
    let t = DraTree::new();
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let driver = t.driver("gpu.example.com", &[]);
    log.wait_for("\"event\":\"dra-health\"", 1).await;
    let escape = "../../../../tmp/escape";
    t.write("claim.yaml", &format!("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: {escape}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.example.com\n"));
    t.write("bad-pod.yaml", &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n  namespace: ml\n  uid: {escape}\nspec:\n  containers:\n  - name: main\n"));
    t.write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\n  uid: pod-1\nspec:\n  resourceClaims:\n  - name: g\n    resourceClaimName: gpu\n  containers:\n  - name: main\n    resources:\n      claims:\n      - name: g\n");
    log.wait_for("\"event\":\"pod-rejected\"", 2).await;
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    let lines: Vec<serde_json::Value> = log.seen().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let rejected: Vec<&serde_json::Value> = lines.iter().filter(|v| v["event"] == "pod-rejected").collect();
    for file in ["claim.yaml", "bad-pod.yaml"] {
        let r = rejected.iter().find(|v| v["file"].as_str().unwrap().ends_with(file)).unwrap();
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.contains("metadata.uid: Invalid value: \"../../../../tmp/escape\""), "{file}: {reason}");
        assert!(!reason.contains('\n'), "one line: {reason}");
    }
    let failed = lines.iter().find(|v| v["event"] == "claim-prepare-failed").unwrap();
    assert!(failed["error"].as_str().unwrap().contains("not found"), "{failed}");
    assert!(!lines.iter().any(|v| v["event"] == "claim-prepared"));
    assert_eq!(std::fs::read_dir(t.p("cdi")).unwrap().count(), 0, "the driver was never called");
    stop_child(driver).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// #34 item 5: the temp files a SIGKILLed `dra serve` left in its CDI dir
/// are removed at its next start — its own pattern only: another driver's,
/// another program's and a planted symlink stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_serve_removes_its_own_leftover_temp_files_at_start_and_nothing_else() {
    let t = DraTree::new();
    let cdi = t.p("cdi");
    let ours = cdi.join(".dpctl-dra-gpu.example.com-u-1.json.tmp-a1B2c3");
    std::fs::write(&ours, b"{\"cdiVer").unwrap();
    let keep = [
        cdi.join(".dpctl-dra-nic.example.com-u-1.json.tmp-a1B2c3"),
        cdi.join(".vendor.json.tmp-a1B2c3"),
        cdi.join("dpctl-dra-gpu.example.com-u-1.json"),
    ];
    for k in &keep {
        std::fs::write(k, b"x").unwrap();
    }
    let outside = t.p("outside.json");
    std::fs::write(&outside, b"not ours").unwrap();
    let link = cdi.join(".dpctl-dra-gpu.example.com-u-2.json.tmp-d4E5f6");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let root = s(&t.root);
    let mut c = dpctl_cmd(&[
        "--kubelet-root-dir",
        root,
        "dra",
        "serve",
        "--driver",
        "gpu.example.com",
        "--cdi-dir",
        s(&cdi),
        "--log-format",
        "json",
    ]);
    c.stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    log.wait_for("\"event\":\"serving\"", 1).await;
    let removed: Vec<serde_json::Value> = log
        .seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "cdi-temp-files-removed")
        .collect();
    assert_eq!(removed.len(), 1, "{}", log.seen());
    assert_eq!(removed[0]["files"], serde_json::json!([s(&ours)]));
    assert!(!ours.exists());
    for k in &keep {
        assert!(k.exists(), "{}", k.display());
    }
    assert!(std::fs::symlink_metadata(&link).is_ok(), "a symlink is not a temp file of ours");
    assert_eq!(std::fs::read(&outside).unwrap(), b"not ours");
    stop_tailed(child, log).await;
}

/// VmRSS of a process, in KiB.
fn vm_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One HTTP/1.1 request to the local API server: the status code.
async fn api_post(kubeconfig: &std::path::Path, addr: &str, token: &str, path: &str, body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = api_connect(kubeconfig).await;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let _ = s.write_all(body).await;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// #34: a 2 MB ResourceSlice of 100,000 devices once raised the mock
/// kubelet's RSS by ~200 MB. Refused (422: over 128 devices), it costs the
/// process next to nothing: its RSS stays within a generous 16 MiB of before,
/// three refusals later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_2_mb_slice_leaves_the_mock_kubelets_memory_as_it_was() {
    let d = tmp();
    let mut child = mock_kubelet_on(d.path(), &["--api-server", "127.0.0.1:0"]).spawn().unwrap();
    let mut log = Tail::stdout(&mut child);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let ev: serde_json::Value = log
        .seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "api-server")
        .unwrap();
    let addr = api_authority(ev["addr"].as_str().unwrap());
    let kc = std::path::PathBuf::from(ev["kubeconfig"].as_str().unwrap());
    let token = kubeconfig_token(&kc);
    let path = "/apis/resource.k8s.io/v1/resourceslices";
    let small = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "warm"},
        "spec": {"driver": "gpu.example.com", "nodeName": "dpctl-node", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "d0"}]}});
    assert_eq!(api_post(&kc, &addr, &token, path, small.to_string().as_bytes()).await, 201);
    let pid = child.id().unwrap();
    let before = vm_rss_kib(pid);
    let devices: Vec<serde_json::Value> =
        (0..100_000).map(|i| serde_json::json!({"name": format!("dev-{i:06}")})).collect();
    let mut big = small.clone();
    big["metadata"]["name"] = "big".into();
    big["spec"]["devices"] = devices.into();
    let body = big.to_string();
    assert!(body.len() > 2_000_000 && body.len() < 3 << 20, "{}", body.len());
    for _ in 0..3 {
        assert_eq!(api_post(&kc, &addr, &token, path, body.as_bytes()).await, 422);
    }
    let after = vm_rss_kib(pid);
    assert!(after < before + 16 * 1024, "RSS {before} KiB before, {after} KiB after three refused 2 MB slices");
    stop_tailed(child, log).await.expect_code(0);
}
