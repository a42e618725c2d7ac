//! The client commands as operators expect them (issue 12): each test is one
//! of the issue's reproductions, run against the real binary.

use crate::mock_kubelet::{pod_yaml, Node};
use crate::support::*;
use dpctl::api::deviceplugin::DevicePluginOptions;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `dpctl serve --no-register` at `<dir>/<name>`, answering before it returns.
async fn serve_at(dir: &Path, name: &str, extra: &[&str]) -> (tokio::process::Child, Tail) {
    let mut args = vec!["--no-register", "--socket-name", name];
    args.extend_from_slice(extra);
    let mut child = serve_cmd(dir, &args).spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    let sock = dir.join(name);
    wait_until(10, "the served socket answering", || std::os::unix::net::UnixStream::connect(&sock).is_ok()).await;
    (child, tail)
}

/// Item 1: `{i}` is the device's own index, not its position in the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_spec_i_is_the_devices_index() {
    let d = tmp();
    let (sv, tail) = serve_at(
        d.path(),
        "gpu.sock",
        &[
            "--resource",
            "vendor.example/gpu",
            "--count",
            "4",
            "--device-spec",
            "/dev/gpu{i}:/dev/gpu{i}:rw",
            "--cdi",
            "vendor.example/gpu=req{pos}",
        ],
    )
    .await;
    let r = dpctl(&["allocate", "--plugin-dir", s(d.path()), "gpu.sock", "gpu-3", "-o", "json"]).await;
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["containerResponses"][0]["devices"][0]["hostPath"], "/dev/gpu3", "{v}");
    let r = dpctl(&["allocate", "--plugin-dir", s(d.path()), "gpu.sock", "gpu-2", "gpu-0", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let c = &v["containerResponses"][0];
    assert_eq!(c["devices"][0]["containerPath"], "/dev/gpu2", "{v}");
    assert_eq!(c["devices"][1]["containerPath"], "/dev/gpu0", "{v}");
    assert_eq!(c["cdiDevices"][1]["name"], "vendor.example/gpu=req1", "{{pos}} is the position in the request: {v}");
    stop_tailed(sv, tail).await;
}

/// Item 2: with the default timeout, `register` waits out the kubelet's 10 s
/// dial-back and shows the kubelet's own error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_shows_the_kubelets_dial_error_by_default() {
    let d = tmp();
    let dp = d.path().join("dp");
    std::fs::create_dir(&dp).unwrap();
    let mut k = dpctl_cmd(&["mock-kubelet", "--plugin-dir", s(&dp), "--no-pod-resources"]).spawn().unwrap();
    let tail = Tail::stdout(&mut k);
    let ks = dp.join("kubelet.sock");
    wait_until(10, "kubelet.sock", || std::os::unix::net::UnixStream::connect(&ks).is_ok()).await;
    let r = dpctl(&["register", "--plugin-dir", s(&dp), "--resource", "vendor.example/foo", "--endpoint", "nope.sock"])
        .await;
    r.expect_code(1);
    assert!(r.stderr.contains("failed to dial device plugin"), "{}", r.stderr);
    assert!(!r.stderr.contains("timed out"), "{}", r.stderr);
    stop_tailed(k, tail).await;
}

/// Item 5: `probe --allocate` takes a device no container holds, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_allocates_a_free_device() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let pr = d.path().join("pr.sock");
    let p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    // the sample pod holds foo-0 and foo-1
    let _pr = podresources::start(&pr, podresources::sample()).await;
    let r = dpctl(&["probe", s(&sock), "--allocate", "--pod-resources-socket", s(&pr)]).await;
    r.expect_code(0);
    assert!(p.calls.lock().unwrap().contains(&"Allocate(foo-2)".to_string()), "{:?}", p.calls.lock().unwrap());
    assert!(r.stdout.contains("foo-2 (held by no container, per PodResources)"), "{}", r.stdout);

    // without an answering PodResources socket it says the device may be in use
    let mut c = dpctl_cmd(&["probe", s(&sock), "--allocate"]);
    c.env("DPCTL_POD_RESOURCES_SOCKET", d.path().join("none.sock"));
    let r = run_cmd(c).await;
    r.expect_code(0);
    assert!(r.stdout.contains("foo-0 (PodResources not reachable: it may be in use by a pod)"), "{}", r.stdout);
}

/// Item 7: Unimplemented on another service's socket names that service and the command to use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unimplemented_names_the_service_and_the_command() {
    let d = tmp();
    let ks = d.path().join("kubelet.sock");
    let (reqs, _k) = kubelet::start(&ks, None).await;
    let r = dpctl(&["watch", s(&ks)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("Registration service") && r.stderr.contains("dpctl register"), "{}", r.stderr);
    assert!(!r.stderr.trim_end().ends_with("Unimplemented:"), "{}", r.stderr);
    // the identification registered nothing: its request was refused as an unsupported version
    assert!(reqs.lock().unwrap().iter().all(|q| q.resource_name.is_empty() && q.version != "v1beta1"));

    let pr = d.path().join("pr.sock");
    let _pr = podresources::start(&pr, podresources::sample()).await;
    let r = dpctl(&["options", s(&pr)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains(&format!("dpctl podresources list --socket {}", s(&pr))), "{}", r.stderr);

    // a dpctl control socket (JSON lines, not gRPC)
    let dp = d.path().join("dp");
    std::fs::create_dir(&dp).unwrap();
    let (sv, mut tail) = serve_at(&dp, "p.sock", &["--resource", "vendor.example/foo"]).await;
    tail.wait_for("control socket=", 1).await;
    let control = std::fs::read_dir(dp.join("dpctl-control")).unwrap().next().unwrap().unwrap().path();
    let r = dpctl(&["watch", s(&control), "--timeout", "3s"]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("a dpctl control socket") && r.stderr.contains("dpctl device list"), "{}", r.stderr);
    stop_tailed(sv, tail).await;

    // a plugin's plugin-watcher socket: the hint names its DevicePlugin socket
    let reg = d.path().join("registry");
    std::fs::create_dir(&reg).unwrap();
    let mut sv = serve_cmd(
        &dp,
        &[
            "--resource",
            "vendor.example/bar",
            "--socket-name",
            "bar.sock",
            "--registration",
            "plugin-watcher",
            "--plugins-registry-dir",
            s(&reg),
        ],
    )
    .spawn()
    .unwrap();
    let tail = Tail::stdout(&mut sv);
    let watcher = reg.join("vendor.example_bar-reg.sock");
    wait_until(10, "the watcher socket", || std::os::unix::net::UnixStream::connect(&watcher).is_ok()).await;
    let r = dpctl(&["options", s(&watcher)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("plugin-watcher Registration service"), "{}", r.stderr);
    assert!(r.stderr.contains("bar.sock"), "names the DevicePlugin socket: {}", r.stderr);
    stop_tailed(sv, tail).await;
}

/// Item 8: the PodResources socket follows --plugin-dir in every command, and
/// a missing one names the flag that fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podresources_socket_follows_plugin_dir() {
    let d = tmp();
    let dp = d.path().join("device-plugins");
    std::fs::create_dir(&dp).unwrap();
    let r = dpctl(&["podresources", "list", "--plugin-dir", s(&dp)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("--socket or set DPCTL_POD_RESOURCES_SOCKET"), "{}", r.stderr);
    assert!(!r.stderr.contains("--plugin-dir or DPCTL_PLUGIN_DIR"), "{}", r.stderr);
    assert!(r.stderr.contains("pod-resources/kubelet.sock"), "{}", r.stderr);

    let prd = d.path().join("pod-resources");
    std::fs::create_dir(&prd).unwrap();
    let _pr = podresources::start(&prd.join("kubelet.sock"), podresources::sample()).await;
    let r = dpctl(&["podresources", "list", "--plugin-dir", s(&dp)]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("trainer"), "{}", r.stdout);
    dpctl(&["podresources", "allocatable", "--plugin-dir", s(&dp)]).await.expect_code(0);
}

/// Item 18: `-n NAMESPACE`, `-A`, and `--no-headers` on tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podresources_namespaces_and_no_headers() {
    let d = tmp();
    let pr = d.path().join("pr.sock");
    let _pr = podresources::start(&pr, podresources::sample()).await;
    let r = dpctl(&["podresources", "list", "--socket", s(&pr), "-n", "ml"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("trainer"), "{}", r.stdout);
    let r = dpctl(&["podresources", "list", "--socket", s(&pr), "-n", "default"]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.trim(), "no pods");
    let r = dpctl(&["podresources", "list", "--socket", s(&pr), "-A", "--no-headers"]).await;
    r.expect_code(0);
    assert!(r.stdout.lines().next().unwrap().starts_with("trainer"), "{}", r.stdout);
    assert!(!r.stdout.contains("NAMESPACE"), "{}", r.stdout);
    dpctl(&["podresources", "list", "--socket", s(&pr), "-A", "-n", "ml"]).await.expect_code(2);

    let sock = d.path().join("p.sock");
    let _p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let r = dpctl(&["probe", s(&sock), "--no-headers"]).await;
    assert!(r.stdout.lines().next().unwrap().starts_with("PASS"), "{}", r.stdout);
}

/// Item 9: a rejected manifest names its path once; config errors speak the user's language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_it_once_in_the_users_terms() {
    let n = Node::new();
    let k = n.start(&[]).await;
    n.pod("broken.yaml", "metadata: [unclosed\n");
    let why = n.wait_rejected("broken.yaml").await;
    assert!(why.contains("not valid YAML") && !why.contains("broken.yaml"), "{why}");
    let r = dpctl(&["node", "--plugin-dir", s(&n.dp())]).await;
    let line = r.stdout.lines().find(|l| l.contains("broken.yaml")).unwrap_or_default().to_string();
    assert_eq!(line.matches("broken.yaml").count(), 1, "{}", r.stdout);
    n.pod("ok.yaml", &pod_yaml("ok", "vendor.example/none", 0));
    stop_child(k).await;

    let d = tmp();
    let cfg = d.path().join("c.json");
    std::fs::write(&cfg, r#"{"resources": [{"resource": "vendor.example/foo", "numaNode": 2}]}"#).unwrap();
    let r = dpctl(&["serve", "--config", s(&cfg)]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("did you mean \"numaNodes\""), "{}", r.stderr);
    std::fs::write(&cfg, r#"{"resources": [{"resource": "vendor.example/foo", "count": -1}]}"#).unwrap();
    let r = dpctl(&["serve", "--config", s(&cfg)]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("a whole number, 0 or more") && !r.stderr.contains("usize"), "{}", r.stderr);
}

/// Item 11: `probe --wait` waits for a plugin that is still starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_waits_for_the_socket() {
    let d = tmp();
    let sock = d.path().join("late.sock");
    let probe = dpctl_cmd(&["probe", s(&sock), "--wait", "20s"]).spawn().unwrap();
    // the socket does not exist yet: without --wait this fails at once
    let r = dpctl(&["probe", s(&sock)]).await;
    r.expect_code(1);
    assert!(r.stderr.contains("no such socket") || r.stdout.contains("no such socket"), "{r:?}");
    let _p = start_plugin(&sock, four_devices(), Behaviour::default()).await;
    let out = tokio::time::timeout(Duration::from_secs(30), probe.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("list-and-watch") && stdout.contains("4 device(s)"), "{stdout}");
}

/// Item 13: commands that log instead of rendering reject -o.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flag_is_rejected_where_it_means_nothing() {
    let d = tmp();
    for args in [
        vec!["serve", "--resource", "vendor.example/foo", "-o", "json"],
        vec!["mock-kubelet", "-o", "yaml"],
        vec!["demo", "--once", "-o", "json"],
    ] {
        let mut c = dpctl_cmd(&args);
        c.env("DPCTL_PLUGIN_DIR", d.path());
        let r = run_cmd(c).await;
        r.expect_code(2);
        assert!(r.stderr.contains("is not supported here"), "{args:?}: {}", r.stderr);
        assert!(sockets_in(d.path()).is_empty(), "{args:?} started nothing");
    }
}

/// Item 12: `node` prints NUMA nodes the way PodResources does (protojson int64: strings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numa_is_the_same_type_everywhere() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2", "--numa-nodes", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    n.pod("p.yaml", &pod_yaml("p", "vendor.example/foo", 1));
    n.wait_pod("p").await;
    let r = dpctl(&["node", "--plugin-dir", s(&n.dp()), "-o", "json"]).await;
    let node: Value = serde_json::from_str(&r.stdout).unwrap();
    let r = dpctl(&["podresources", "list", "--plugin-dir", s(&n.dp()), "--socket", s(&n.pr()), "-o", "json"]).await;
    r.expect_code(0);
    let pr: Value = serde_json::from_str(&r.stdout).unwrap();
    let pr_numa = &pr["podResources"][0]["containers"][0]["devices"][0]["topology"]["nodes"][0]["ID"];
    assert!(pr_numa.is_string(), "{pr}");
    let numbers = numa_values(&node);
    assert!(!numbers.is_empty(), "node reports NUMA: {node}");
    assert!(numbers.iter().all(Value::is_string), "node's NUMA nodes are protojson strings too: {node}");
    stop_child(sv).await;
    stop_child(k).await;
}

fn numa_values(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if k == "numa" && x.is_array() {
                    out.extend(x.as_array().into_iter().flatten().cloned());
                } else if k == "numa" && !x.is_object() {
                    out.push(x.clone());
                } else {
                    out.extend(numa_values(x));
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| out.extend(numa_values(x))),
        _ => {}
    }
    out
}

/// Item 15: every --help ends with Examples; global flags stand apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_help_ends_with_examples() {
    let mut paths: Vec<Vec<String>> = vec![vec![]];
    fn walk(cmd: &clap::Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = prefix.clone();
            p.push(sub.get_name().to_string());
            out.push(p.clone());
            walk(sub, p, out);
        }
    }
    walk(&dpctl::commands::command(), vec![], &mut paths);
    assert!(paths.len() > 20);
    for p in paths {
        let mut args: Vec<&str> = p.iter().map(String::as_str).collect();
        args.push("--help");
        let r = dpctl(&args).await;
        r.expect_code(0);
        let tail = r.stdout.rsplit("\n\n").next().unwrap_or_default();
        assert!(tail.starts_with("Examples:\n  "), "{args:?} --help does not end with Examples:\n{}", r.stdout);
        if !p.is_empty() {
            assert!(r.stdout.contains("\nGlobal Options:\n"), "{args:?}: {}", r.stdout);
        }
    }
    let r = dpctl(&["device", "set-health", "--help"]).await;
    assert!(r.stdout.contains("Usage: dpctl device set-health [OPTIONS] ID... HEALTH"), "{}", r.stdout);
}

/// Item 17: `dpctl completion bash` completes socket arguments from the plugin directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_plugin_sockets() {
    let d = tmp();
    let _p = start_plugin(&d.path().join("vendor.sock"), four_devices(), Behaviour::default()).await;
    std::fs::write(d.path().join("not-a-socket.txt"), b"x").unwrap();
    let r = dpctl(&["completion", "bash"]).await;
    r.expect_code(0);
    let script = d.path().join("dpctl.bash");
    std::fs::write(&script, &r.stdout).unwrap();
    for (line, want) in [
        ("dpctl watch ", true),
        ("dpctl --plugin-dir DIR probe v", true),
        ("dpctl node ", false),
        ("dpctl record --plugin ", true),
        ("dpctl replay t.jsonl --against v", true),
        ("dpctl test --socket ", true),
        ("dpctl record --resource ", false),
    ] {
        let words = line.replace("DIR", s(d.path()));
        let test = format!(
            "source {}; COMP_WORDS=({words}{}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _dpctl_with_sockets dpctl; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            s(&script),
            if line.ends_with(' ') { " ''" } else { "" }
        );
        let out = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(&test)
            .env("DPCTL_PLUGIN_DIR", d.path())
            .output()
            .await
            .unwrap();
        let got = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            got.lines().any(|l| l == "vendor.sock"),
            want,
            "{line}: {got}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!got.lines().any(|l| l == "not-a-socket.txt" && line.contains("watch")), "{got}");
    }
    let r = dpctl(&["completion", "zsh"]).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("#compdef dpctl\n"), "{}", &r.stdout[..80.min(r.stdout.len())]);
    assert!(r
        .stdout
        .contains("':socket -- The plugin'\\''s socket (a bare name is looked up in --plugin-dir):_dpctl_sockets'"));
    let r = dpctl(&["completion", "fish"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("__dpctl_plugin_sockets"));
    assert!(r.stdout.contains("__fish_seen_subcommand_from record\" -l plugin -r -a \"(__dpctl_plugin_sockets)\""));
    let r = dpctl(&["completion", "tcsh"]).await;
    r.expect_code(2);
}

/// DRA commands complete their SOCKET from `<kubelet-root-dir>/plugins_registry/`
/// (bash, with `--kubelet-root-dir` or `DPCTL_KUBELET_ROOT_DIR`), not from the
/// device-plugin directory; zsh and fish name the same helper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_dra_plugin_sockets() {
    let d = tmp();
    let (root, dp) = (d.path().join("kubelet"), d.path().join("dp"));
    std::fs::create_dir_all(root.join("plugins_registry")).unwrap();
    std::fs::create_dir_all(&dp).unwrap();
    let _reg = std::os::unix::net::UnixListener::bind(root.join("plugins_registry/gpu.example.com-reg.sock")).unwrap();
    let _dp = std::os::unix::net::UnixListener::bind(dp.join("vendor.sock")).unwrap();
    let r = dpctl(&["completion", "bash"]).await;
    r.expect_code(0);
    let script = d.path().join("dpctl.bash");
    std::fs::write(&script, &r.stdout).unwrap();
    for (line, env_root, want) in [
        ("dpctl --kubelet-root-dir ROOT dra probe ", false, Some("gpu.example.com-reg.sock")),
        ("dpctl dra info g", true, Some("gpu.example.com-reg.sock")),
        ("dpctl dra prepare ", true, Some("gpu.example.com-reg.sock")),
        ("dpctl dra health ", true, Some("gpu.example.com-reg.sock")),
        ("dpctl dra list ", true, None),
        ("dpctl dra ", true, None),
        ("dpctl probe ", true, Some("vendor.sock")),
    ] {
        let words = line.replace("ROOT", s(&root));
        let test = format!(
            "source {}; COMP_WORDS=({words}{}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _dpctl_with_sockets dpctl; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            s(&script),
            if line.ends_with(' ') { " ''" } else { "" }
        );
        let mut c = tokio::process::Command::new("bash");
        c.arg("-c").arg(&test).env("DPCTL_PLUGIN_DIR", &dp).env_remove("DPCTL_KUBELET_ROOT_DIR");
        if env_root {
            c.env("DPCTL_KUBELET_ROOT_DIR", &root);
        }
        let out = c.output().await.unwrap();
        let got = String::from_utf8_lossy(&out.stdout);
        let socks: Vec<&str> = got.lines().filter(|l| l.ends_with(".sock")).collect();
        assert_eq!(
            socks,
            want.into_iter().collect::<Vec<_>>(),
            "{line}: {got}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let r = dpctl(&["completion", "zsh"]).await;
    assert!(r.stdout.contains("plugins/*/):_dpctl_dra_sockets'"), "zsh: DRA sockets from plugins_registry");
    assert!(r.stdout.contains("_dpctl_dra_sockets() {"));
    let r = dpctl(&["completion", "fish"]).await;
    assert!(
        r.stdout.contains("__fish_seen_subcommand_from dra; and __fish_seen_subcommand_from info probe prepare unprepare health\" -a \"(__dpctl_registry_sockets)\""),
        "{}",
        r.stdout
    );
}

/// Item 19: `-v` shows each call's method, socket, request, status and latency on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_shows_each_call() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: false, get_preferred_allocation_available: true },
        ..Default::default()
    };
    let _p = start_plugin(&sock, four_devices(), b).await;
    let r = dpctl(&["-v", "allocate", s(&sock), "foo-1"]).await;
    r.expect_code(0);
    let want_req =
        format!("> Allocate {}\n> request: {{\"containerRequests\":[{{\"devicesIds\":[\"foo-1\"]}}]}}", s(&sock));
    assert!(r.stderr.contains(&want_req), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("< Allocate {}: OK in ", s(&sock))), "{}", r.stderr);
    assert!(!r.stdout.contains("> Allocate"), "stdout stays clean: {}", r.stdout);
    let r = dpctl(&["allocate", s(&sock), "foo-1"]).await;
    assert!(!r.stderr.contains("> Allocate"), "{}", r.stderr);
}

/// Item 20: the demo's text is true, and its suggested commands work as printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_text_is_true_and_its_commands_work() {
    let r = dpctl(&["demo", "--once"]).await;
    r.expect_code(0);
    assert!(!r.stdout.contains("keep running until Ctrl-C"), "{}", r.stdout);
    assert!(r.stdout.contains("With --once"), "{}", r.stdout);

    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dpctl")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    // Its node tree goes under the test's own temp dir, so a failed run
    // (the demo killed on drop) leaves nothing in /tmp.
    let scratch = tmp();
    let mut c = dpctl_cmd(&["demo"]);
    c.env("PATH", &path).env("TMPDIR", scratch.path());
    let mut demo = c.spawn().unwrap();
    let mut tail = Tail::stdout(&mut demo);
    tail.wait_for("Logs:", 1).await;
    let text = tail.seen();
    let cmds: Vec<String> = text
        .split("try:\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .take_while(|l| !l.trim().starts_with("Logs:"))
        .map(|l| l.split("  #").next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with("dpctl watch") && !l.starts_with("kill -HUP"))
        .collect();
    let set_health = cmds.iter().position(|c| c.contains("set-health")).expect("a set-health step");
    let second = cmds.iter().position(|c| c.contains("second.yaml")).expect("a second pod step");
    assert!(second < set_health, "the second pod is admitted before a device breaks: {cmds:?}");
    let mut script = String::from("set -e\n");
    let mut dp = String::new();
    for c in &cmds {
        script.push_str(c);
        script.push('\n');
        if let Some(v) = c.strip_prefix("export DPCTL_PLUGIN_DIR=") {
            dp = v.to_string();
        }
    }
    let out = tokio::process::Command::new("sh").arg("-c").arg(&script).env("PATH", &path).output().await.unwrap();
    assert!(
        out.status.success(),
        "the demo's commands failed:\n{script}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut admitted = false;
    for _ in 0..250 {
        let r = dpctl(&["node", "--plugin-dir", &dp, "-o", "json"]).await;
        let v: Value = serde_json::from_str(&r.stdout).unwrap_or_default();
        if v["pods"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == "second")) {
            admitted = true;
            break;
        }
        assert!(v["rejected"].as_object().is_none_or(|r| r.is_empty()), "a pod was rejected: {v}");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(admitted, "the second pod was admitted");
    stop_tailed(demo, tail).await;
}

/// Item 6, traces: the record tap writes a plugin's death mid-stream with grpc-go's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tap_records_a_dead_plugin_as_unavailable() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let mut sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2", "--socket-name", "foo.sock"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    let trace = n.dir.path().join("t.jsonl");
    let plugin = n.dp().join("foo.sock");
    let rec = dpctl_cmd(&["record", "--plugin", s(&plugin), "--resource", "vendor.example/foo", "--out", s(&trace)])
        .spawn()
        .unwrap();
    n.wait_resource("vendor.example/foo", "devices through the tap", |r| {
        r["endpoint"].as_str().is_some_and(|e| e.contains("dpctl-record-")) && r["allocatable"] == 2
    })
    .await;
    sv.start_kill().unwrap();
    let _ = sv.wait().await;
    let ended = || {
        std::fs::read_to_string(&trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["kind"] == "listAndWatchEnd")
    };
    wait_until(20, "the tap to record the stream's end", || ended().is_some()).await;
    let end = ended().unwrap();
    assert_eq!(end["error"]["code"], "Unavailable", "{end}");
    stop_child(rec).await;
    stop_child(k).await;
}

/// Item 14, `bench watch`: Ctrl-C reports the health changes timed so far.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_watch_interrupted_reports_what_it_timed() {
    let d = tmp();
    let (sv, mut tail) = serve_at(d.path(), "s.sock", &["--resource", "v.e/foo"]).await;
    tail.wait_for("control socket=", 1).await;
    let sock = d.path().join("s.sock");
    let bench =
        dpctl_cmd(&["bench", "watch", "--socket", s(&sock), "--changes", "100000000", "-o", "json"]).spawn().unwrap();
    // the serve logs each live-control change: two means one was timed
    tail.wait_for("control op=set-health", 2).await;
    if let Some(pid) = bench.id() {
        let _ = std::process::Command::new("kill").arg("-INT").arg(pid.to_string()).status();
    }
    let out = tokio::time::timeout(Duration::from_secs(20), bench.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["changes"].as_u64().unwrap() >= 1 && v.get("firstSnapshotMs").is_none(), "{v}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
    stop_tailed(sv, tail).await;
}

/// Issue 37: `mock-kubelet --api-server` without `--plugins-registry-dir`
/// runs the plugin watcher on `<root>/plugins_registry` (created, as the
/// kubelet creates it), says so at start with the CDI search path, and a
/// `dra serve` on the same kubelet root registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_defaults_the_plugin_watcher_under_the_kubelet_root() {
    let d = tmp();
    let root = d.path();
    std::fs::create_dir(root.join("device-plugins")).unwrap();
    let mut c = dpctl_cmd(&[
        "mock-kubelet",
        "--plugin-dir",
        s(&root.join("device-plugins")),
        "--no-pod-resources",
        "--api-server",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ]);
    c.stdout(std::process::Stdio::piped());
    let mut k = c.spawn().unwrap();
    let mut log = Tail::stdout(&mut k);
    log.wait_for("\"event\":\"started\"", 1).await;
    let paths: Value = log
        .seen()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "paths")
        .expect("a paths event");
    assert_eq!(paths["pluginsRegistryDir"], s(&root.join("plugins_registry")), "{paths}");
    let cdi = paths["cdiSpecDirs"].as_str().unwrap();
    assert!(cdi.starts_with(&format!("/etc/cdi, /var/run/cdi, {} (the defaults", s(&root.join("cdi")))), "{cdi}");
    assert!(root.join("plugins_registry").is_dir());
    let mut dc = dpctl_cmd(&["--kubelet-root-dir", s(root), "dra", "serve", "--driver", "gpu.example.com"]);
    dc.args(["--cdi-dir", s(&root.join("cdi"))]).stdout(std::process::Stdio::null());
    let mut driver = dc.spawn().unwrap();
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    let _ = driver.start_kill();
    let _ = driver.wait().await;
    stop_tailed(k, log).await;
}

/// Issue 37: a pod manifest with `resource:` for `resources:` is read as
/// the kubelet reads static pods (the unknown field dropped: the pod is
/// admitted, with no devices) with a warning event naming the path and the
/// field meant, as kubectl's strict field validation words it; a claim
/// whose `deviceClasName` typo leaves a required field missing is rejected
/// with the typo named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_manifest_fields_are_warned_about_with_the_field_meant() {
    let d = tmp();
    let root = d.path();
    for sub in ["device-plugins", "manifests"] {
        std::fs::create_dir(root.join(sub)).unwrap();
    }
    let mut c = dpctl_cmd(&[
        "mock-kubelet",
        "--plugin-dir",
        s(&root.join("device-plugins")),
        "--manifests",
        s(&root.join("manifests")),
        "--no-pod-resources",
        "--log-format",
        "json",
    ]);
    c.stdout(std::process::Stdio::piped());
    let mut k = c.spawn().unwrap();
    let mut log = Tail::stdout(&mut k);
    log.wait_for("\"event\":\"started\"", 1).await;
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: typo, namespace: default}\nspec:\n  containers:\n  - name: main\n    resource:\n      limits: {vendor.example/gpu: 1}\n";
    std::fs::write(root.join("manifests/pod.yaml"), pod).unwrap();
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu, namespace: ml}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly: {deviceClasName: gpu.example.com}\n";
    std::fs::write(root.join("manifests/claim.yaml"), claim).unwrap();
    log.wait_for("\"event\":\"manifest-warning\"", 1).await;
    log.wait_for("\"event\":\"pod-rejected\"", 1).await;
    log.wait_for("\"event\":\"pod-admitted\"", 1).await;
    let events: Vec<Value> = log.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    let warned = |file: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["event"] == "manifest-warning" && e["file"].as_str().unwrap().ends_with(file))
            .flat_map(|e| e["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_string()))
            .collect()
    };
    assert_eq!(warned("pod.yaml"), ["unknown field \"spec.containers[0].resource\"; did you mean \"resources\"?"]);
    // The claim misses a required field because of the typo: rejected, as the API server would, with the typo named.
    let rejected = events.iter().find(|e| e["event"] == "pod-rejected").unwrap();
    assert!(rejected["file"].as_str().unwrap().ends_with("claim.yaml"), "{rejected}");
    assert_eq!(
        rejected["reason"],
        "spec.devices.requests[0]: deviceClassName is required (unknown field \"spec.devices.requests[0].exactly.deviceClasName\"; did you mean \"deviceClassName\"?)"
    );
    let admitted = events.iter().find(|e| e["event"] == "pod-admitted").unwrap();
    assert_eq!(admitted["pod"], "default/typo");
    assert_eq!(admitted["allocations"], serde_json::json!([]), "the misspelt limits are not read: {admitted}");
    stop_tailed(k, log).await;
}
