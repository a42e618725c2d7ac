//! `dpctl test`: the suite passes a healthy `dpctl serve`, each serve fault
//! fails exactly the scenarios that target it, JUnit and JSON output, usage
//! errors, `--socket`, and `--isolate` with a plugin that hard-codes the
//! kubelet's paths.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_dpctl");

/// `dpctl <args>` with a longer limit than `dpctl()` (a full suite with faults takes a while).
async fn suite(args: &[&str]) -> Run {
    // A plugin that never comes back costs the kubelet-restart scenarios 30 s each.
    run_cmd_within(dpctl_cmd(args), 300).await
}

fn serve_args(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "-o",
        "json",
        "test",
        "--",
        BIN,
        "serve",
        "--resource",
        "vendor.example/foo",
        "--count",
        "4",
        "--plugin-dir",
        "{plugin-dir}",
        "--retry",
        "--preferred-allocation",
        "--pre-start",
        "--numa-nodes",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn ids_with(doc: &Value, result: &str) -> BTreeSet<String> {
    doc["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .filter(|s| s["result"] == result)
        .map(|s| s["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The fault table (also in the README): each fault and exactly the scenarios it fails and warns about.
type Fault = (&'static [&'static str], &'static [&'static str], &'static [&'static str]);
const FAULTS: &[Fault] = &[
    (&[], &[], &[]),
    // The kubelet deletes every socket at start too, so a plugin started before it must serve again (ORDER-001).
    (&["--no-reregister"], &["KRES-001", "KRES-002", "KRES-003", "KRES-004", "KRES-005", "ORDER-001"], &[]),
    // Later than 5 s but within upstream's 30 s: a WARN (pods needing the resource are rejected meanwhile).
    (&["--reregister-delay", "6s"], &[], &["KRES-001"]),
    (&["--new-ids-after-restart"], &["KRES-002", "KRES-004", "PRES-004"], &[]),
    // A fixed socket name also leaves no room for a second instance during a rolling update (a WARN).
    (&["--new-ids-after-restart", "--socket-name", "fixed.sock"], &["KRES-002", "KRES-004", "PRES-004"], &["ROLL-001"]),
    (&["--delete-other-sockets"], &["REG-007"], &[]),
    (&["--keep-socket-on-exit"], &["PRES-002"], &[]),
    (&["--exit-without-kubelet"], &[], &["ORDER-001"]),
    (&["--hang-after-cancel"], &["LAW-007"], &[]),
    (&["--close-stream-after", "1"], &["LAW-008"], &[]),
    (&["--empty-first-snapshot"], &[], &["LAW-001"]),
    (&["--first-snapshot-delay", "2s"], &[], &["LAW-001"]),
    // It swaps the last chosen ID for a foreign one: when the answer is only the must-include devices, one of those.
    (&["--preferred-fault", "foreign"], &["PREF-002", "PREF-003"], &[]),
    (&["--preferred-fault", "too-many"], &["PREF-001", "PREF-002"], &[]),
    (&["--preferred-fault", "drop-must-include"], &["PREF-001", "PREF-003"], &[]),
    (&["--preferred-fault", "ignore-available"], &["PREF-002"], &[]),
    (&["--preferred-fault", "first-n"], &["PREF-003"], &[]),
    (&["--pre-start-fail"], &["PRE-001"], &[]),
    // Registers again from its socket while the kubelet streams from it (kubernetes#139338).
    (&["--register-twice"], &["REG-009"], &[]),
    // Since 1.37 (the default) a last list from the exiting first instance stays the node's devices (kubernetes#135437).
    (&["--unhealthy-on-exit"], &["ROLL-001"], &[]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_fails_exactly_the_scenarios_that_target_it() {
    // The runs mostly wait (on restarts, bounds); run a few at a time.
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(4));
    let mut set = tokio::task::JoinSet::new();
    for (flags, want, warns) in FAULTS {
        let sem = sem.clone();
        set.spawn(async move {
            let _permit = sem.acquire().await.expect("semaphore");
            let args = serve_args(flags);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = suite(&args).await;
            (flags, want, warns, run)
        });
    }
    let mut problems = Vec::new();
    while let Some(r) = set.join_next().await {
        let (flags, want, warns, run) = r.expect("task");
        let doc: Value = match serde_json::from_str(&run.stdout) {
            Ok(d) => d,
            Err(e) => {
                problems.push(format!("{flags:?}: no JSON ({e}): {}\n{}", run.stdout, run.stderr));
                continue;
            }
        };
        let failed = ids_with(&doc, "FAIL");
        let warned = ids_with(&doc, "WARN");
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let warns: BTreeSet<String> = warns.iter().map(|s| s.to_string()).collect();
        let code = if want.is_empty() { 0 } else { 1 };
        if failed != want || warned != warns || run.code != code {
            let evidence: Vec<String> = doc["scenarios"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["result"] == "FAIL")
                .map(|s| format!("{}: {}", s["id"], s["evidence"]))
                .collect();
            problems.push(format!(
                "{flags:?}: failed {failed:?}, want {want:?}; warned {warned:?}, want {warns:?}; exit {}\n  {}",
                run.code,
                evidence.join("\n  ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Check JUnit XML with Python's standard XML parser against the shape
/// GitHub's and GitLab's renderers read; returns false when no python3.
pub fn check_junit(path: &Path) -> bool {
    let script = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
ok_suite = {"name", "tests", "failures", "errors", "skipped", "time"}
total = fails = skips = 0
for s in root:
    assert s.tag == "testsuite", s.tag
    assert set(s.attrib) <= ok_suite and {"name", "tests"} <= set(s.attrib), s.attrib
    cases = list(s)
    assert int(s.get("tests")) == len(cases)
    f = k = 0
    for c in cases:
        assert c.tag == "testcase" and {"classname", "name", "time"} <= set(c.attrib), c.attrib
        float(c.get("time"))
        for x in c:
            assert x.tag in ("failure", "skipped", "system-out"), x.tag
            if x.tag == "system-out": continue
            assert "message" in x.attrib
            f += x.tag == "failure"; k += x.tag == "skipped"
    assert int(s.get("failures")) == f and int(s.get("skipped")) == k
    total += len(cases); fails += f; skips += k
assert int(root.get("tests")) == total and int(root.get("failures")) == fails and int(root.get("skipped")) == skips
print(total, fails, skips)
"#;
    match std::process::Command::new("python3").arg("-c").arg(script).arg(path).output() {
        Err(_) => {
            assert!(std::env::var_os("CI").is_none(), "python3 is needed to check JUnit XML in CI");
            eprintln!("SKIPPED: no python3 to check the JUnit XML");
            false
        }
        Ok(o) => {
            assert!(o.status.success(), "JUnit XML invalid: {}", String::from_utf8_lossy(&o.stderr));
            true
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_plugin_passes_every_scenario_with_junit_and_table_output() {
    let dir = tmp();
    let junit = dir.path().join("report.xml");
    let trigger = format!("{BIN} device set-health foo-1 Unhealthy --plugin-dir {{plugin-dir}}");
    let run = suite(&[
        "test",
        "--junit",
        s(&junit),
        "--health-trigger",
        &trigger,
        "--",
        BIN,
        "serve",
        "--resource",
        "vendor.example/foo",
        "--count",
        "4",
        "--numa-nodes",
        "2",
        "--pre-start",
        "--preferred-allocation",
        "--plugin-dir",
        "{plugin-dir}",
        "--retry",
    ])
    .await;
    run.expect_code(0);
    // Plain lines (stdout is not a terminal): one per scenario, then the summary.
    let lines: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("PASS") || l.starts_with("SKIP")).collect();
    assert_eq!(lines.len(), dpctl::suite::catalog::SCENARIOS.len(), "{}", run.stdout);
    let skipped: Vec<&&str> = lines.iter().filter(|l| l.starts_with("SKIP")).collect();
    assert_eq!(skipped.len(), 1, "only the plugin-watcher scenario may skip: {skipped:?}");
    assert!(skipped[0].contains("REG-008") && skipped[0].contains("kubelet.sock"));
    assert!(run.stdout.contains("HEALTH-001") && run.stdout.contains("allocatable 4 → 3"), "{}", run.stdout);
    assert!(run.stdout.lines().last().unwrap_or_default().contains("0 failed"), "{}", run.stdout);
    let xml = std::fs::read_to_string(&junit).expect("junit written");
    assert!(xml.contains("failures=\"0\"") && xml.contains("REG-001"));
    check_junit(&junit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_carry_evidence_in_json_and_junit() {
    let dir = tmp();
    let junit = dir.path().join("out").join("r.xml");
    std::fs::create_dir_all(junit.parent().unwrap()).unwrap();
    let run = suite(&[
        "-o",
        "json",
        "test",
        "--focus",
        "^REG-|^PREF-",
        "--junit",
        s(&junit),
        "--",
        BIN,
        "serve",
        "--resource",
        "vendor.example/foo",
        "--count",
        "3",
        "--plugin-dir",
        "{plugin-dir}",
        "--preferred-allocation",
        "--preferred-fault",
        "foreign",
        "--delete-other-sockets",
    ])
    .await;
    run.expect_code(1);
    let doc: Value = serde_json::from_str(&run.stdout).expect("json");
    // foreign replaces the last preferred ID, which PREF-003's size-1 request makes the must-include one.
    assert_eq!(doc["failed"], 3, "{doc}");
    assert_eq!(doc["scenarios"].as_array().unwrap().len(), 12, "focus selects REG-* and PREF-*");
    let f = doc["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == "PREF-002").unwrap();
    assert!(f["evidence"]["rpc"].as_str().unwrap().starts_with("GetPreferredAllocation"));
    assert!(
        f["evidence"]["answer"].as_str().unwrap().contains("IDs not in the available list: foo-not-offered"),
        "{f}"
    );
    assert!(!f["evidence"]["fix"].as_str().unwrap().is_empty() && !f["rule"].as_str().unwrap().is_empty());
    assert!(run.stderr.contains("3 scenario(s) failed"), "{}", run.stderr);
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert_eq!(xml.matches("<failure ").count(), 3, "{xml}");
    check_junit(&junit);
    // No temp file left next to the report.
    assert_eq!(std::fs::read_dir(junit.parent().unwrap()).unwrap().count(), 1);
}

#[tokio::test]
async fn usage_errors_exit_2_with_a_hint() {
    let dir = tmp();
    let r = dpctl(&["test", "--socket", s(&dir.path().join("nope.sock"))]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nope.sock") && r.stderr.lines().count() == 1, "{}", r.stderr);
    let cases: [(&[&str], &str); 4] = [
        (&["test"], "no plugin to test"),
        (&["test", "--focus", "REG||LAW", "--", "true"], "--focus"),
        (&["test", "--focus", "NO-SUCH-SCENARIO", "--", "true"], "selected no scenario"),
        (&["test", "--junit", s(dir.path()), "--", "true"], "is a directory"),
    ];
    for (args, want) in cases {
        let r = dpctl(args).await;
        assert_eq!(r.code, 2, "{args:?}: {} {}", r.stdout, r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_mode_tests_a_running_plugin_without_controlling_it() {
    let dir = tmp();
    let (child, sock) = serve_unregistered(dir.path(), "vendor.example/foo", "foo.sock", &["--count", "2"]).await;
    let run = suite(&["-o", "json", "test", "--socket", s(&sock)]).await;
    stop_child(child).await;
    run.expect_code(0);
    let doc: Value = serde_json::from_str(&run.stdout).expect("json");
    let passed = ids_with(&doc, "PASS");
    let skipped = ids_with(&doc, "SKIP");
    assert!(passed.contains("LAW-001") && passed.contains("ALLOC-004") && passed.contains("LAW-007"), "{passed:?}");
    assert!(skipped.contains("REG-001") && skipped.contains("KRES-001") && skipped.contains("PRES-001"), "{skipped:?}");
    let reason = doc["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == "KRES-001").unwrap()["detail"].clone();
    assert!(reason.as_str().unwrap().contains("--socket"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolate_runs_a_plugin_that_hard_codes_the_kubelet_paths() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(std::env::var_os("CI").is_none(), "the --isolate test runs as root in CI");
        eprintln!("SKIPPED: --isolate is tested as root");
        return;
    }
    let dir = tmp();
    // A plugin with the kubelet's paths built in: no flags, no placeholders.
    let plugin = dir.path().join("hard-coded-plugin.sh");
    std::fs::write(
        &plugin,
        format!("#!/bin/sh\nunset DPCTL_PLUGIN_DIR DPCTL_KUBELET_SOCKET\nexec {BIN} serve --resource vendor.example/hard --count 2 --retry\n"),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let host = Path::new("/var/lib/kubelet");
    let before = host.exists().then(|| std::fs::read_dir(host).map(|r| r.count()).unwrap_or(0));
    let run = suite(&["test", "--isolate", "--", s(&plugin)]).await;
    run.expect_code(0);
    assert!(run.stdout.contains("PASS  REG-004") && run.stdout.contains("PASS  E2E-001"), "{}", run.stdout);
    let after = host.exists().then(|| std::fs::read_dir(host).map(|r| r.count()).unwrap_or(0));
    assert_eq!(before, after, "the host's /var/lib/kubelet must not change");
    // Rootless: the same run as nobody, through a user namespace where the kernel allows it;
    // where it does not, a one-line reason and exit 1.
    let has_setpriv = std::process::Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success());
    if has_setpriv {
        let mut c = tokio::process::Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "test",
            "--isolate",
            "--focus",
            "^REG-00|^LAW-001$",
            "--",
            BIN,
        ])
        .args(["serve", "--resource", "vendor.example/hard", "--retry"])
        .env_remove("DPCTL_PLUGIN_DIR")
        .env_remove("DPCTL_KUBELET_SOCKET")
        .current_dir(std::env::temp_dir())
        .kill_on_drop(true);
        let out =
            tokio::time::timeout(Duration::from_secs(60), c.output()).await.expect("rootless run").expect("spawn");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        match out.status.code() {
            Some(0) => assert!(stdout.contains("PASS  REG-004") && stdout.contains("PASS  LAW-001"), "{stdout}"),
            _ => assert!(
                stderr.contains("--isolate is unavailable") && stderr.lines().count() == 1,
                "{stdout}\n{stderr}"
            ),
        }
    }
    if before.is_none() {
        // Without isolation the same plugin finds no kubelet: the suite says so.
        let run = suite(&["test", "--focus", "^REG-001$", "--", s(&plugin)]).await;
        run.expect_code(1);
        assert!(
            run.stdout.contains("FAIL  REG-001") && run.stdout.contains("plugin directory does not exist"),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn the_readme_documents_every_scenario_and_fault() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/test.md")).expect("docs/test.md");
    for s in dpctl::suite::catalog::SCENARIOS {
        let row = format!("| `{}` | {} |", s.id, s.title);
        assert!(readme.contains(&row), "README lacks the scenario row {row}");
        assert!(readme.contains(s.source), "README lacks the source of {}", s.id);
    }
    let cell = |ids: &[&str]| if ids.is_empty() { "—".to_string() } else { ids.join(", ") };
    for (flags, fails, warns) in FAULTS.iter().skip(1) {
        let flag = format!("| `{}` |", flags.join(" "));
        let line = readme.lines().find(|l| l.starts_with(&flag)).unwrap_or_else(|| panic!("README lacks fault {flag}"));
        assert!(
            line.ends_with(&format!("| {} | {} |", cell(fails), cell(warns))),
            "README fault row disagrees with the test: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_watcher_plugin_passes_with_getinfo_checked() {
    let run = suite(&[
        "-o",
        "json",
        "test",
        "--",
        BIN,
        "serve",
        "--resource",
        "vendor.example/foo",
        "--count",
        "2",
        "--plugin-dir",
        "{plugin-dir}",
        "--registration",
        "plugin-watcher",
        "--plugins-registry-dir",
        "{plugins-registry-dir}",
    ])
    .await;
    let doc: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {} {}", run.stdout, run.stderr));
    assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::new(), "{doc}");
    run.expect_code(0);
    let passed = ids_with(&doc, "PASS");
    assert!(passed.contains("REG-008") && passed.contains("KRES-001") && passed.contains("E2E-001"), "{passed:?}");
    // The plugin watcher sends no options; that check does not apply.
    assert!(ids_with(&doc, "SKIP").contains("REG-006"));
}

#[tokio::test]
async fn isolate_says_clearly_when_it_is_unavailable() {
    let mut c = dpctl_cmd(&["test", "--isolate", "--", "true"]);
    c.env("PATH", "/nonexistent");
    let r = run_cmd(c).await;
    r.expect_code(1);
    assert!(r.stderr.contains("--isolate is unavailable") && r.stderr.contains("unshare"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

/// Processes whose command line is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
                .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_plugin_and_removes_the_tree() {
    // A "plugin" that never registers, with a command line no one else has.
    let marker = ["sleep", "271.828"];
    let mut c = dpctl_cmd(&["test", "--focus", "^REG-001$", "--", marker[0], marker[1]]);
    let child = c.spawn().expect("dpctl test");
    let prefix = format!("dpctl-test-{}-", child.id().expect("pid"));
    let trees = || {
        std::fs::read_dir(std::env::temp_dir())
            .map(|rd| rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).count())
            .unwrap_or(0)
    };
    wait_until(10, "the plugin process", || !processes(&marker).is_empty()).await;
    assert!(trees() > 0, "the node tree should exist while the suite runs");
    let run = stop_child(child).await;
    assert_eq!(run.code, 1, "{} {}", run.stdout, run.stderr);
    assert!(run.stderr.contains("interrupted"), "{}", run.stderr);
    wait_until(5, "the plugin process to be gone", || processes(&marker).is_empty()).await;
    assert_eq!(trees(), 0, "the node tree must be removed");
}

/// A plugin command that cannot be started is a usage error said once
/// (exit 2), before any session: not once per session with every scenario
/// NOT-RUN.
#[tokio::test]
async fn a_plugin_command_that_cannot_start_is_one_line_and_exit_2() {
    let dir = tmp();
    // `dpctl` not on PATH (the README's `dpctl test -- dpctl serve …` from a checkout).
    let mut c = dpctl_cmd(&["test", "--", "dpctl", "serve", "--resource", "vendor.example/foo"]);
    c.env("PATH", dir.path());
    let r = run_cmd(c).await;
    r.expect_code(2);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot start the plugin command \"dpctl\": not found on PATH")
            && r.stderr.contains("cargo install --path ."),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty(), "no scenario runs: {}", r.stdout);
    for (args, want) in [
        (&["test", "--", "no-such-binary-x7", "--flag"][..], "\"no-such-binary-x7\": not found on PATH"),
        (&["test", "--dra", "--", "no-such-driver-x7"][..], "cannot start the driver command \"no-such-driver-x7\""),
    ] {
        let r = dpctl(args).await;
        r.expect_code(2);
        assert!(r.stderr.contains(want) && r.stderr.lines().count() == 1, "{args:?}: {}", r.stderr);
        assert!(!r.stdout.contains("NOT-RUN"), "{}", r.stdout);
    }
}

/// ROLL-001 decides on the kubelet's event for the first instance's end,
/// not on a fixed wait: on 1.37 the instance ended (only its devices went),
/// on 1.31 its stream ended and the kubelet disconnected the second, which
/// `dpctl serve` answers by registering again (its default, as a
/// well-written plugin does). The naive plugin (the fault
/// `--no-reregister-on-disconnect`) fails on 1.31.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_plugin_passes_a_rolling_update_on_every_kubelet_version() {
    let args = |extra: &[&'static str]| {
        let mut a = vec!["-o", "json", "test", "--kubelet-version", "1.31,1.37", "--focus", "^ROLL-001$", "--"];
        a.extend([BIN, "serve", "--resource", "vendor.example/gpu", "--count", "4", "--plugin-dir", "{plugin-dir}"]);
        a.push("--retry");
        a.extend(extra);
        a
    };
    let run = suite(&args(&[])).await;
    run.expect_code(0);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let rows = doc["scenarios"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{}", run.stdout);
    for (row, version, event) in [
        (&rows[0], "1.31", "the kubelet saw the first go (its stream ended)"),
        (&rows[1], "1.37", "the kubelet saw the first go (its instance ended, only its devices went)"),
    ] {
        assert_eq!((row["kubeletVersion"].as_str(), row["result"].as_str()), (Some(version), Some("PASS")), "{row}");
        let detail = row["detail"].as_str().unwrap();
        assert!(detail.contains(event) && detail.contains("allocatable 4 again"), "{version}: {detail}");
    }
    assert!(rows[0]["detail"].as_str().unwrap().contains("disconnected the second (kubernetes#121994)"));

    let run = suite(&args(&["--no-reregister-on-disconnect"])).await;
    run.expect_code(1);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let results: Vec<&str> =
        doc["scenarios"].as_array().unwrap().iter().map(|s| s["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["FAIL", "PASS"], "{}", run.stdout);

    // kubernetes#135437: a first instance that sends every device Unhealthy
    // as it stops. 1.31 disconnects the second, which registers again and
    // sends its list; 1.37 keeps the second's stream, and the first's last
    // list stays the node's devices.
    let run = suite(&args(&["--unhealthy-on-exit"])).await;
    run.expect_code(1);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let rows = doc["scenarios"].as_array().unwrap();
    let results: Vec<&str> = rows.iter().map(|s| s["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["PASS", "FAIL"], "{}", run.stdout);
    let ev = &rows[1]["evidence"];
    let answer = ev["answer"].as_str().unwrap();
    assert!(answer.contains("came from the first instance") && answer.contains("kubernetes#135437"), "{answer}");
    assert!(answer.contains("4 devices, 0 healthy"), "{answer}");
    assert!(ev["fix"].as_str().unwrap().starts_with("send no list when stopping"), "{ev}");
}

/// REG-009 (kubernetes#139338) on both sides of kubernetes#135437: a plugin
/// that registers again from the socket the kubelet streams from is refused
/// by 1.37 ("device plugin already connected") and accepted beside the
/// first by 1.36; it fails on both, with what that kubelet did and the
/// fix; a plugin that registers once passes on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_registering_again_on_its_live_socket_fails_reg_009_on_every_kubelet_version() {
    let args = |extra: &[&'static str]| {
        let mut a = vec!["-o", "json", "test", "--kubelet-version", "1.36,1.37", "--focus", "^REG-009$", "--"];
        a.extend([BIN, "serve", "--resource", "vendor.example/gpu", "--count", "2", "--plugin-dir", "{plugin-dir}"]);
        a.extend(extra);
        a
    };
    let run = suite(&args(&["--register-twice"])).await;
    run.expect_code(1);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let rows = doc["scenarios"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{}", run.stdout);
    for (row, version, said) in
        [(&rows[0], "1.36", "the kubelet accepted it"), (&rows[1], "1.37", "the kubelet refused it (")]
    {
        assert_eq!((row["kubeletVersion"].as_str(), row["result"].as_str()), (Some(version), Some("FAIL")), "{row}");
        let ev = &row["evidence"];
        let (rpc, answer, fix) =
            (ev["rpc"].as_str().unwrap(), ev["answer"].as_str().unwrap(), ev["fix"].as_str().unwrap());
        assert!(rpc.starts_with("Register again from ") && rpc.contains("still open"), "{rpc}");
        assert!(answer.starts_with(said) && answer.contains("kubernetes#139338"), "{version}: {answer}");
        assert!(fix.starts_with("register once per kubelet"), "{fix}");
    }
    assert!(rows[1]["evidence"]["answer"].as_str().unwrap().contains("device plugin already connected: "));
    assert!(rows[0]["evidence"]["answer"].as_str().unwrap().contains("kubernetes#121994"));

    let run = suite(&args(&[])).await;
    run.expect_code(0);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let results: Vec<&str> =
        doc["scenarios"].as_array().unwrap().iter().map(|s| s["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["PASS", "PASS"], "{}", run.stdout);
}

/// The DRA fault table (also in docs/test.md): `dpctl dra serve` flags, the
/// DRA scenarios they fail (exactly; the whole suite, restarts included)
/// and words the evidence must carry. Each missed class of issue 35 is one row.
const DRA_FAULTS: &[(&[&str], &[&str], &str)] = &[
    (&[], &[], ""),
    (&["--common-cdi-spec"], &[], ""),
    // Device metadata (KEP-5304): a second CDI ID on each request's first device, its own spec per request.
    (&["--device-metadata"], &[], ""),
    // Shares (KEP-5075): claims share the devices (a CDI device per share); one claim may hold two shares of one.
    (&["--shared-capacity", "memory=8Gi/default=1Gi/step=1Gi"], &[], ""),
    // Node-allocatable resources (KEP-5517): published, dropped by the API server (the gate off).
    (&["--node-allocatable", "cpu=2,memory=4Gi"], &[], ""),
    (&["--fault", "wrong-type"], &["DRA-REG-001"], "DRAPlugin"),
    (&["--fault", "endpoint-outside-root"], &["DRA-REG-001"], ""),
    (&["--fault", "no-versions"], &["DRA-REG-001"], ""),
    (&["--fault", "v1beta1-first"], &["DRA-REG-002"], ""),
    (
        &["--fault", "extra-uid"],
        &["DRA-PREP-001", "DRA-RESTART-001", "DRA-RESTART-002", "DRA-ROLL-001"],
        "NodePrepareResources returned result for unknown claim UID dpctl-not-requested",
    ),
    (
        &["--fault", "missing-uid"],
        &["DRA-PREP-001", "DRA-UNPREP-003", "DRA-RESTART-001", "DRA-RESTART-002", "DRA-ROLL-001"],
        "prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims",
    ),
    (&["--fault", "no-pool-name"], &["DRA-PREP-002"], ""),
    (
        &["--fault", "bad-cdi-id"],
        &["DRA-PREP-002", "DRA-CDI-001", "DRA-PREP-007", "DRA-RESTART-002", "DRA-ROLL-001"],
        "",
    ),
    (&["--fault", "not-idempotent"], &["DRA-PREP-003", "DRA-PREP-007", "DRA-RESTART-002", "DRA-ROLL-001"], ""),
    // Never fetching the claim, it never sees the claim's config either.
    (&["--fault", "ignore-allocation"], &["DRA-PREP-004", "DRA-PREP-005", "DRA-CONFIG-001", "DRA-PREP-006"], ""),
    (&["--fault", "health-stream-end"], &["DRA-HEALTH-001"], ""),
    (&["--fault", "no-timestamp"], &["DRA-HEALTH-001"], ""),
    // Every watch answered Unimplemented: the service it lists is not served (VER), no health (HEALTH).
    (&["--fault", "health-unimplemented"], &["DRA-VER-001", "DRA-HEALTH-001"], ""),
    (
        &["--fault", "prepare-error=boom"],
        &["DRA-PREP-001", "DRA-RESTART-001", "DRA-RESTART-002", "DRA-ROLL-001"],
        "NodePrepareResources failed for ResourceClaim pod-1-",
    ),
    (&["--fault", "keep-cdi-spec"], &["DRA-CDI-002", "DRA-RESTART-002", "DRA-ROLL-001"], "names claim UID"),
    (
        &["--fault", "keep-cdi-spec", "--common-cdi-spec"],
        &["DRA-CDI-002", "DRA-RESTART-002", "DRA-ROLL-001"],
        "names claim UID",
    ),
    (
        &["--fault", "empty-slice"],
        &["DRA-SLICE-001", "DRA-PREP-001", "DRA-RESTART-001", "DRA-RESTART-002", "DRA-ROLL-001"],
        "lists no devices (0 device(s) in pool pool-0)",
    ),
    (
        &["--fault", "incomplete-pool"],
        // The scheduler allocates nothing from an incomplete pool (structured
        // allocator: an incomplete pool offers no device), so no claim of the
        // driver is allocated either.
        &["DRA-SLICE-001", "DRA-PREP-001", "DRA-RESTART-001", "DRA-RESTART-002", "DRA-ROLL-001"],
        "pool pool-0 is incomplete: resourceSliceCount 2, 1 slice(s) published",
    ),
    (&["--fault", "no-republish"], &["DRA-RESTART-001"], "the driver published none again"),
    (
        &["--fault", "answer-other-claims"],
        &["DRA-PREP-002", "DRA-PREP-003", "DRA-PREP-007"],
        "NodePrepareResources returned result for unknown claim UID",
    ),
    (&["--fault", "wrong-pool"], &["DRA-PREP-004"], "pool-0-other"),
    (&["--fault", "empty-cdi-edits"], &["DRA-CDI-001"], "invalid device, empty device edits"),
    (&["--fault", "health-unknown-device"], &["DRA-HEALTH-001"], "pool-0/dpctl-ghost, which no ResourceSlice"),
    (
        &["--fault", "stale-health", "--health-timeout", "2"],
        &["DRA-HEALTH-001"],
        "no snapshot within health_check_timeout_seconds (2s)",
    ),
    (&["--fault", "memory-only-state"], &["DRA-RESTART-002", "DRA-ROLL-001"], "unprepare answered success but left"),
    (&["--fault", "new-cdi-ids"], &["DRA-RESTART-002", "DRA-ROLL-001"], "CDI IDs were"),
    (
        &["--fault", "remove-cdi-on-exit"],
        &["DRA-RESTART-002", "DRA-ROLL-001"],
        "of claims still prepared resolve to no spec file",
    ),
    (&["--fault", "ignore-uid"], &["DRA-PREP-005"], "although the API server's claim of that name has UID"),
    (&["--fault", "exit-on-missing-claim"], &["DRA-PREP-006"], "panic: interface conversion"),
    (&["--fault", "not-idempotent-error"], &["DRA-PREP-002", "DRA-PREP-003", "DRA-PREP-007"], "is already prepared"),
    (&["--fault", "foreign-request-names"], &["DRA-EXT-001"], "container-0-request-0"),
    (&["--fault", "racy-prepare"], &["DRA-PREP-007"], "answers differ: NodePrepareResources (1 of 4 at once)"),
    (&["--fault", "late-prepare"], &["DRA-PREP-008"], "a preparation still finished and left the claim prepared"),
    (&["--fault", "unserved-v1beta1"], &["DRA-VER-001"], "NodePrepareResources failed: Unimplemented"),
    // Deleting its slices at exit: only the updates show it (slow scenarios, so passing here).
    (&["--withdraw-on-exit"], &[], ""),
    (
        &["--fault", "ignore-config"],
        &["DRA-CONFIG-001"],
        "carry nothing of the DeviceClass's (FromClass) or the claim's",
    ),
    // The first call past its deadline is DRA-PREP-007's (the fault struck in DRA-PREP-005); the rest is NOT-RUN.
    (&["--fault", "deadlock-after-unknown-unprepare"], &["DRA-PREP-007"], "no answer within 1s (DeadlineExceeded)"),
    // Its checkpoint answers the restored claims: only a reboot (a slow scenario, so passing here) shows it.
    (&["--fault", "answer-from-checkpoint"], &[], ""),
];

/// The slow DRA scenarios (run only when --focus selects them): each
/// fault fails exactly these, a healthy driver passes them.
const DRA_SLOW_FAULTS: &[(&[&str], &[&str], &str)] = &[
    (&[], &[], ""),
    (&["--fault", "answer-from-checkpoint"], &["DRA-REBOOT-001"], "the reboot emptied the CDI directory"),
    (&["--fault", "remove-cdi-on-exit"], &[], ""),
    (&["--withdraw-on-exit"], &["DRA-ROLL-002", "DRA-ROLL-003"], "did not survive"),
];

/// Each `dpctl dra serve` fault fails exactly its DRA scenarios, restarts
/// included (no --skip), with the words of its class in the evidence and
/// the driver's own log beside every failure; a healthy driver, the example
/// driver's common-CDI pattern, pass everything (issue 35 item 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_dra_serve_fault_fails_exactly_its_scenarios() {
    // Two runs at a time: each is a few seconds of mostly waiting.
    for pair in DRA_FAULTS.chunks(2) {
        let runs: Vec<_> = pair
            .iter()
            .map(|(flags, _, _)| {
                tokio::spawn(run_cmd_within(crate::dra_kubelet::dra_test(flags, &["-o", "json"]), 120))
            })
            .collect();
        for ((flags, want, words), r) in pair.iter().zip(runs) {
            let r = r.await.unwrap();
            assert_eq!(crate::dra_kubelet::failed_ids(&r), *want, "{flags:?}:\n{}", r.stdout);
            r.expect_code(if want.is_empty() { 0 } else { 1 });
            assert!(r.stdout.contains(words), "{flags:?}: no {words:?} in\n{}", r.stdout);
            let doc: Value = serde_json::from_str(&r.stdout).unwrap();
            for f in doc["scenarios"].as_array().unwrap().iter().filter(|s| s["result"] == "FAIL") {
                assert!(
                    !f["evidence"]["log"].as_str().unwrap_or_default().is_empty(),
                    "{flags:?}: no driver log in {f}"
                );
            }
        }
    }
}

/// `--focus group:slow`: the slow scenarios alone, each fault failing exactly its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_dra_serve_fault_fails_exactly_its_slow_scenarios() {
    for (flags, want, words) in DRA_SLOW_FAULTS {
        let r =
            run_cmd_within(crate::dra_kubelet::dra_test(flags, &["-o", "json", "--focus", "group:slow"]), 120).await;
        let doc: Value = serde_json::from_str(&r.stdout).unwrap();
        let ids: Vec<&str> = doc["scenarios"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["DRA-ROLL-002", "DRA-ROLL-003", "DRA-REBOOT-001"], "{flags:?}: the slow group");
        assert_eq!(crate::dra_kubelet::failed_ids(&r), *want, "{flags:?}:\n{}", r.stdout);
        r.expect_code(if want.is_empty() { 0 } else { 1 });
        assert!(r.stdout.contains(words), "{flags:?}: no {words:?} in\n{}", r.stdout);
    }
}

#[test]
fn the_docs_hold_the_dra_fault_table_the_test_asserts() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/test.md")).expect("docs/test.md");
    let slow = |flags: &[&str]| DRA_SLOW_FAULTS.iter().find(|(f, _, _)| *f == flags).map(|(_, w, _)| *w).unwrap_or(&[]);
    for (flags, fails, _) in DRA_FAULTS.iter().skip(1) {
        let fails: Vec<&str> = fails.iter().chain(slow(flags)).copied().collect();
        let row = format!("| `{}` |", flags.join(" "));
        let line = doc
            .lines()
            .find(|l| l.starts_with(&row))
            .unwrap_or_else(|| panic!("docs/test.md lacks the DRA fault {row}"));
        let cell = if fails.is_empty() { "nothing".to_string() } else { fails.join(", ") };
        assert!(line.ends_with(&format!("| {cell} |")), "docs/test.md's DRA fault row disagrees with the test: {line}");
    }
}

/// A driver not given {kubeconfig} publishes no slice: DRA-SLICE-001 says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_without_the_api_server_fails_slice_001() {
    let r = suite(&[
        "test",
        "--dra",
        "--focus",
        "SLICE",
        "-o",
        "json",
        "--",
        BIN,
        "--kubelet-root-dir",
        "{kubelet-root-dir}",
        "dra",
        "serve",
        "--driver",
        "gpu.example.com",
    ])
    .await;
    r.expect_code(1);
    assert_eq!(crate::dra_kubelet::failed_ids(&r), ["DRA-SLICE-001"]);
    assert!(r.stdout.contains("no ResourceSlice of the driver for node dpctl-node"), "{}", r.stdout);
}

/// A driver that deadlocks (an unprepare of an unknown claim keeps its
/// lock, dra-driver-nvidia-gpu#378): the first call past its deadline is
/// reported once, with the driver's log; every later scenario is NOT-RUN
/// with the reason, in the JSON and the JUnit report; the run does not
/// wait a deadline per remaining call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlocked_driver_fails_once_and_the_rest_is_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("report.xml");
    let junit_arg = junit.display().to_string();
    let started = std::time::Instant::now();
    let r = run_cmd_within(
        crate::dra_kubelet::dra_test(
            &["--fault", "deadlock-after-unknown-unprepare"],
            &["-o", "json", "--junit", &junit_arg],
        ),
        120,
    )
    .await;
    r.expect_code(1);
    // 1 s per call here (--timeout 1s): one deadline, not one per remaining call.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(crate::dra_kubelet::failed_ids(&r), ["DRA-PREP-007"], "{}", r.stdout);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let rows = doc["scenarios"].as_array().unwrap();
    let at = rows.iter().position(|s| s["id"] == "DRA-PREP-007").unwrap();
    let failed = &rows[at];
    assert_eq!(failed["evidence"]["rpc"], "NodeUnprepareResources (before the concurrent prepares)", "{failed}");
    assert!(failed["evidence"]["answer"].as_str().unwrap().contains("defaultClientCallTimeout"), "{failed}");
    assert!(failed["evidence"]["fix"].as_str().unwrap().contains("dra-driver-nvidia-gpu#378"), "{failed}");
    assert!(failed["evidence"]["log"].as_str().unwrap().contains("unprepare"), "{failed}");
    let reason = "the driver stopped answering: NodeUnprepareResources (before the concurrent prepares) got no answer within 1s (see DRA-PREP-007)";
    assert!(rows[..at].iter().all(|s| s["result"] == "PASS"), "{}", r.stdout);
    for later in &rows[at + 1..] {
        assert_eq!((later["result"].as_str(), later["detail"].as_str()), (Some("NOT-RUN"), Some(reason)), "{later}");
    }
    assert!(check_junit(&junit));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("dra-driver-nvidia-gpu#378") && xml.contains("got no answer within 1s (see DRA-PREP-007)"),
        "{xml}"
    );
}

/// A large pool (`dra serve --devices 300`): published in three slices
/// under the API's 128 devices each, the pool complete; the kubelet
/// prepares from it. (Before, the API server refused the one slice of 300.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_pool_is_published_in_slices_under_the_limit_and_passes() {
    let r = run_cmd_within(
        crate::dra_kubelet::dra_test(&["--devices", "300"], &["-o", "json", "--focus", "SLICE|PREP-001$"]),
        120,
    )
    .await;
    r.expect_code(0);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let slice = doc["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == "DRA-SLICE-001").cloned().unwrap();
    assert_eq!(slice["detail"], "300 device(s) in pool pool-0 (3 slices)", "{slice}");
}
