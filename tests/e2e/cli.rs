//! The command line as a user meets it: each command's own surface (its
//! errors naming flags and config fields, its runtime hints) through the real binary.

use crate::support::*;

/// A bad field deep inside a `--config` file is named by its path, as the
/// deserializer found it, on one line with the fix; exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_config_errors_name_the_nested_field() {
    let d = tmp();
    let cfg = d.path().join("c.json");
    for (json, path) in [
        (
            r#"{"resources": [{"resource": "v.e/a"}, {"resource": "v.e/b", "faults": {"flap": [{"device": "b-0", "period": "soon"}]}}]}"#,
            "resources[1].faults.flap[0].period: invalid duration",
        ),
        (
            r#"{"resources": [{"resource": "v.e/a", "devices": [{"id": "a0", "numa": "zero"}]}]}"#,
            "resources[0].devices[0].numa: ",
        ),
        (
            r#"{"resources": [{"resource": "v.e/a", "allocate": {"container": {"mounts": [{"hostPath": "/x"}]}}}]}"#,
            "resources[0].allocate.container.mounts[0]: missing field `containerPath`",
        ),
    ] {
        std::fs::write(&cfg, json).unwrap();
        let r = run_cmd(serve_cmd(d.path(), &["--no-register", "--config", s(&cfg)])).await;
        assert_eq!(r.code, 2, "{json}: {}", r.stderr);
        let want = format!("dpctl: {}: {path}", cfg.display());
        assert!(r.stderr.starts_with(&want), "{json}:\nwant {want}\ngot  {}", r.stderr);
        assert!(r.stderr.contains("see `dpctl serve --help`"), "{}", r.stderr);
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    }
}

/// The same rule broken through a flag names the flag that sets the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_flag_errors_name_the_flag() {
    let d = tmp();
    for (args, want) in [
        (
            &["--resource", "v.e/foo", "--pre-start-latency", "1s"][..],
            "dpctl: --pre-start-latency: needs preStart: true",
        ),
        (&["--resource", "v.e/foo", "--pre-start-fail"], "dpctl: --pre-start-fail: needs preStart: true"),
        (&["--resource", "v.e/foo", "--count", "2", "--flap", "zz:1s"], "dpctl: --flap: no device \"zz\""),
        (&["--resource", "v.e/foo", "--id-pattern", "same"], "dpctl: --id-pattern: \"same\" has no {i}"),
        (
            &["--resource", "v.e/foo", "--socket-name", "kubelet.sock"],
            "dpctl: --socket-name: \"kubelet.sock\" is the kubelet's",
        ),
    ] {
        let mut a = vec!["--no-register"];
        a.extend(args);
        let r = run_cmd(serve_cmd(d.path(), &a)).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with(want), "{args:?}: {}", r.stderr);
    }
}

/// `dpctl test --list` prints the catalogue and runs nothing (no plugin
/// needed), `-o json` with rule and source; `--focus` / `--skip` match IDs:
/// `REG|LAW-00[12]` is the eight REG scenarios and LAW-001, LAW-002 — not
/// ORDER-001, KRES-001 or KRES-003, whose titles say "register".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_list_prints_the_catalogue_and_focus_matches_ids() {
    let r = dpctl(&["test", "--list"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut lines = r.stdout.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(head, ["ID", "GROUP", "TITLE"]);
    let ids: Vec<&str> = lines.filter_map(|l| l.split_whitespace().next()).collect();
    let all: Vec<&str> = dpctl::suite::catalog::SCENARIOS.iter().map(|s| s.id).collect();
    assert_eq!(ids, all);
    let kres = r.stdout.lines().find(|l| l.starts_with("KRES-001 ")).unwrap_or_default();
    let kres: Vec<&str> = kres.split_whitespace().collect();
    assert_eq!(kres.join(" "), "KRES-001 kubelet-restart re-registers after a kubelet restart");

    let r = dpctl(&["-o", "json", "test", "--list", "--focus", "REG|LAW-00[12]"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let ids: Vec<&str> = v.as_array().expect("a list").iter().filter_map(|s| s["id"].as_str()).collect();
    let want = [
        "REG-001", "REG-002", "REG-003", "REG-004", "REG-005", "REG-006", "REG-007", "REG-008", "LAW-001", "LAW-002",
        "REG-009",
    ];
    assert_eq!(ids, want);
    assert!(v[0]["source"].as_str().is_some_and(|s| s.contains("kubernetes")), "{}", v[0]);
    assert!(v[0]["rule"].as_str().is_some_and(|s| !s.is_empty()), "{}", v[0]);

    // Titles and groups on request.
    let r =
        dpctl(&["test", "--list", "--focus", "title:re-registers|group:start-order", "--skip", "KRES-00[45]"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ids: Vec<&str> = r.stdout.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(ids, ["ORDER-001", "KRES-001"]);

    // The DRA suite's catalogue.
    let r = dpctl(&["-o", "yaml", "test", "--dra", "--list", "--focus", "^DRA-PREP-"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.matches("- id: DRA-PREP-").count(), 8, "{}", r.stdout);

    // Nothing selected, or a bad pattern: one line naming the fix, exit 2.
    for (args, want) in [
        (&["test", "--list", "--focus", "NOPE"][..], "see the IDs with dpctl test --list"),
        (&["test", "--dra", "--list", "--focus", "NOPE"], "see the IDs with dpctl test --dra --list"),
        (&["test", "--list", "--focus", "LAW-00[12"], "'[' without its ']'"),
    ] {
        let r = dpctl(args).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    }
}

/// `dpctl --help` opens with both plugin kinds, lists the commands under
/// task headings and names the environment; `dpctl test --help` says how
/// --focus matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_is_grouped_by_task_and_names_both_plugin_kinds() {
    let r = dpctl(&["--help"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = r.stdout.lines().next().unwrap_or_default();
    assert!(first.contains("device plugins") && first.contains("DRA drivers"), "{first}");
    let at = |h: &str| r.stdout.find(&format!("\n{h}:\n")).unwrap_or_else(|| panic!("no {h}:\n{}", r.stdout));
    assert!(at("Getting started") < at("Talk to a device plugin or DRA driver"));
    assert!(at("Stand in for the kubelet") < at("Diagnose a node"));
    let demo = r.stdout.find("\n  demo ").expect("demo listed");
    assert!(at("Getting started") < demo && demo < at("Talk to a device plugin or DRA driver"));
    for var in ["DPCTL_ROOT", "DPCTL_KUBELET_ROOT_DIR", "NO_COLOR"] {
        assert!(r.stdout.contains(&format!("\n  {var} ")), "{var}:\n{}", r.stdout);
    }
    let r = dpctl(&["test", "--help"]).await;
    assert!(r.stdout.contains("Run only scenarios whose ID matches"), "{}", r.stdout);
    assert!(r.stdout.contains("group:NAME or title:TEXT"), "{}", r.stdout);
    assert!(r.stdout.contains("--list"), "{}", r.stdout);
}

/// `--kubelet-version <TAB>` in bash offers the mock kubelet's versions,
/// through the script `dpctl completion bash` prints (called as bash calls
/// it: command, current word, previous word).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_completes_kubelet_versions() {
    let d = tmp();
    let r = dpctl(&["completion", "bash"]).await;
    r.expect_code(0);
    let script = d.path().join("dpctl.bash");
    std::fs::write(&script, &r.stdout).unwrap();
    for (words, want) in [
        (
            "dpctl mock-kubelet --kubelet-version 1.3",
            &["1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37"][..],
        ),
        ("dpctl demo --kubelet-version 1.2", &["1.25", "1.26", "1.27", "1.28", "1.29"]),
        ("dpctl bench kubelet --kubelet-version 1.37", &["1.37"]),
        ("dpctl test --kubelet-version 1.25", &["1.25"]),
    ] {
        let test = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _dpctl_with_sockets dpctl \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            s(&script)
        );
        let out = tokio::process::Command::new("bash").arg("-c").arg(&test).output().await.unwrap();
        let got = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got, want, "{words}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
