//! `dpctl test` against plugins with one bug real plugins have shipped
//! (issue 25): a plugin that dies at start, one that deletes kubelet.sock,
//! one that registers before it serves, one that exits without a kubelet
//! and relies on being restarted, one that sends an empty list first, one
//! that hands health updates to one stream only, one that ignores the
//! offered devices. Each is judged by the rule it breaks, once.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;

const BIN: &str = env!("CARGO_BIN_EXE_dpctl");

async fn suite(args: &[&str]) -> Run {
    run_cmd_within(dpctl_cmd(args), 120).await
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr))
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

fn scenario<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["scenarios"].as_array().expect("scenarios").iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("{id}"))
}

/// A plugin like NVIDIA's with a CDI strategy on a node without driver
/// libraries: an error line, a Go stack, exit 1.
const DIES_AT_START: &str = "echo 'I1126 10:00:00.000001 1 main.go:10] Starting plugin'; \
echo 'E1126 10:00:00.100000 1 main.go:99] error creating CDI spec: failed to locate driver libraries: libnvidia-ml.so.1 not found' >&2; \
echo 'goroutine 1 [running]:'; echo 'main.main()'; echo '	/src/main.go:99 +0x1d'; echo 'main.run()'; echo '	/src/run.go:12 +0x2f'; exit 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_dies_at_start_fails_once_with_its_error_line_and_stops() {
    let dir = tmp();
    let junit = dir.path().join("r.xml");
    let started = std::time::Instant::now();
    let run = suite(&[
        "-o",
        "json",
        "test",
        "--restart-backoff",
        "1s",
        "--junit",
        s(&junit),
        "--",
        "sh",
        "-c",
        DIES_AT_START,
    ])
    .await;
    run.expect_code(1);
    let doc = json(&run);
    let n = dpctl::suite::catalog::SCENARIOS.len();
    assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::from(["REG-001".to_string()]), "{doc}");
    assert_eq!(ids_with(&doc, "NOT-RUN").len(), n - 1, "{doc}");
    let f = scenario(&doc, "REG-001");
    let answer = f["evidence"]["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("exited (exit status: 1) before registering"), "{answer}");
    assert!(answer.contains("crash loop"), "restarted once, then a crash loop: {answer}");
    assert!(answer.contains("failed to locate driver libraries"), "the error line, not the stack: {answer}");
    let rest = scenario(&doc, "LAW-001")["detail"].as_str().unwrap_or_default().to_string();
    assert!(rest.contains("the plugin exited at start (see REG-001)"), "{rest}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "stops early: {:?}", started.elapsed());
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert_eq!(xml.matches("<skipped message=\"not run: the plugin exited at start").count(), n - 1, "{xml}");
}

fn serve(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> =
        [BIN, "serve", "--resource", "vendor.example/foo", "--count", "4", "--plugin-dir", "{plugin-dir}", "--retry"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// `dpctl -o json test <test flags> -- <plugin>`
async fn test_json(flags: &[&str], plugin: &[String]) -> (Run, Value) {
    let mut args: Vec<&str> = vec!["-o", "json", "test"];
    args.extend(flags);
    args.push("--");
    args.extend(plugin.iter().map(String::as_str));
    let run = suite(&args).await;
    let doc = json(&run);
    (run, doc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_deletes_kubelet_sock_fails_reg_007_once() {
    // Deletes every socket in the plugin directory, kubelet.sock included, then serves.
    let script = format!("rm -f {{plugin-dir}}/*.sock; exec {}", serve(&[]).join(" "));
    let started = std::time::Instant::now();
    let (run, doc) = test_json(&["--skip", "^REG-008$"], &["sh".into(), "-c".into(), script]).await;
    run.expect_code(1);
    assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::from(["REG-007".to_string()]), "{doc}");
    let answer = scenario(&doc, "REG-007")["evidence"]["answer"].as_str().unwrap_or_default().to_string();
    assert!(answer.contains("kubelet.sock and dpctl-test-other-vendor.sock were deleted by the plugin"), "{answer}");
    let reg = scenario(&doc, "REG-001");
    assert_eq!(reg["result"], "NOT-RUN", "{reg}");
    assert!(reg["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("kubelet.sock was deleted by the plugin (see REG-007)"));
    assert_eq!(ids_with(&doc, "PASS"), BTreeSet::new(), "{doc}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_registers_before_it_serves_fails_reg_005_naming_the_dial_back() {
    // Register first (the kubelet dials back inside it, for 10 s, and refuses), then serve and retry.
    let script = format!(
        "{BIN} --plugin-dir {{plugin-dir}} register --resource vendor.example/foo --endpoint late.sock; exec {}",
        serve(&["--socket-name", "late.sock"]).join(" ")
    );
    let (run, doc) = test_json(&["--focus", "^REG-|^LAW-001$"], &["sh".into(), "-c".into(), script]).await;
    run.expect_code(1);
    assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::from(["REG-005".to_string()]), "{doc}");
    let answer = scenario(&doc, "REG-005")["evidence"]["answer"].as_str().unwrap_or_default().to_string();
    assert!(answer.contains("the kubelet's dial-back to") && answer.contains("late.sock failed"), "{answer}");
    assert!(answer.contains("after Register arrived") && answer.contains("a later Register"), "{answer}");
    for id in ["REG-001", "REG-002", "REG-006", "REG-007", "LAW-001"] {
        assert_eq!(scenario(&doc, id)["result"], "PASS", "{id}: {doc}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_exits_without_a_kubelet_is_restarted_and_warned_about() {
    let plugin = serve(&["--exit-without-kubelet"]);
    let (run, doc) = test_json(&["--focus", "^ORDER-001$", "--restart-backoff", "1s"], &plugin).await;
    run.expect_code(0);
    let o = scenario(&doc, "ORDER-001");
    assert_eq!(o["result"], "WARN", "{o}");
    assert!(o["detail"].as_str().unwrap_or_default().contains("only because it was restarted"), "{o}");
    let answer = o["evidence"]["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("exited (exit status: 1)") && answer.contains("1 restart(s) with back-off, 1 s lost"),
        "{answer}"
    );
    assert!(answer.contains("exit-without-kubelet"), "the first run's log: {answer}");
    assert_eq!(doc["warned"], 1, "{doc}");
    // Judged on its first run: a FAIL.
    let (run, doc) = test_json(&["--focus", "^ORDER-001$", "--no-restart"], &plugin).await;
    run.expect_code(1);
    assert_eq!(scenario(&doc, "ORDER-001")["result"], "FAIL", "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_sent_to_one_stream_only_fails_when_the_kubelet_misses_it() {
    let trigger = format!("{BIN} device set-health foo-1 Unhealthy --plugin-dir {{plugin-dir}}");
    let flags = ["--focus", "^HEALTH-001$", "--health-trigger", &trigger, "--health-timeout", "2s"];
    let started = std::time::Instant::now();
    let (run, doc) = test_json(&flags, &serve(&["--health-one-stream"])).await;
    run.expect_code(1);
    let h = scenario(&doc, "HEALTH-001");
    let answer = h["evidence"]["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("never got the Unhealthy snapshot within 2s") && answer.contains("opened before it, did"),
        "{h}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "--health-timeout bounds the wait: {:?}",
        started.elapsed()
    );
    let (run, doc) = test_json(&flags, &serve(&[])).await;
    run.expect_code(0);
    assert!(scenario(&doc, "HEALTH-001")["detail"].as_str().unwrap_or_default().contains("allocatable 4 → 3"), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_id_lists_say_how_many_more() {
    let mut plugin = serve(&["--new-ids-after-restart"]);
    plugin[5] = "16".into(); // --count
    let (run, doc) = test_json(&["--focus", "^KRES-002$"], &plugin).await;
    run.expect_code(1);
    let answer = scenario(&doc, "KRES-002")["evidence"]["answer"].as_str().unwrap_or_default().to_string();
    assert!(answer.contains("gone [foo-0-") && answer.matches("+11 more").count() == 2, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_registration_fails_its_rule_once_and_stops() {
    // Serves, then registers with a version the kubelet does not support.
    let script = format!(
        "{BIN} serve --plugin-dir {{plugin-dir}} --resource vendor.example/foo --no-register --socket-name x.sock & \
         sleep 0.5; {BIN} --plugin-dir {{plugin-dir}} register --resource vendor.example/foo --endpoint x.sock --version v1alpha1; wait"
    );
    let started = std::time::Instant::now();
    let (run, doc) = test_json(&[], &["sh".into(), "-c".into(), script]).await;
    run.expect_code(1);
    assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::from(["REG-002".to_string()]), "{doc}");
    let answer = scenario(&doc, "REG-002")["evidence"]["answer"].as_str().unwrap_or_default().to_string();
    assert!(answer.contains("v1alpha1"), "{answer}");
    let law = scenario(&doc, "LAW-001");
    assert_eq!(law["result"], "NOT-RUN", "{law}");
    assert!(
        law["detail"].as_str().unwrap_or_default().contains("refused the plugin's registration (see REG-002)"),
        "{law}"
    );
    assert_eq!(scenario(&doc, "REG-005")["result"], "NOT-RUN", "{doc}");
    assert_eq!(scenario(&doc, "HEALTH-001")["result"], "NOT-RUN", "{doc}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_killed_mid_stream_is_named_as_gone() {
    // Serves and registers, then dies with SIGKILL (its shell lives on).
    let script = format!(
        "{} --socket-name k.sock & p=$!; while [ ! -S {{plugin-dir}}/k.sock ]; do sleep 0.01; done; sleep 0.05; kill -9 $p; sleep 30",
        serve(&[]).join(" ")
    );
    let (run, doc) = test_json(&["--focus", "^LAW-008$"], &["sh".into(), "-c".into(), script]).await;
    run.expect_code(1);
    let answer = scenario(&doc, "LAW-008")["evidence"]["answer"].as_str().unwrap_or_default().to_string();
    assert!(answer.starts_with("the plugin closed the connection (exited?)"), "{answer}");
    assert!(answer.contains("after the kubelet opened it, after 1 message(s)"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_missed_only_by_another_stream_is_a_warning() {
    // Serves only once kubelet.sock exists, so the suite's other stream opens after the
    // kubelet's; the update goes to the oldest stream, the kubelet's.
    let script = format!(
        "while [ ! -S {{kubelet-socket}} ]; do sleep 0.02; done; exec {}",
        serve(&["--health-one-stream"]).join(" ")
    );
    let trigger = format!("{BIN} device set-health foo-1 Unhealthy --plugin-dir {{plugin-dir}}");
    let flags = ["--focus", "^HEALTH-001$", "--health-trigger", &trigger, "--health-timeout", "2s"];
    let (run, doc) = test_json(&flags, &["sh".into(), "-c".into(), script]).await;
    run.expect_code(0);
    let h = scenario(&doc, "HEALTH-001");
    assert_eq!(h["result"], "WARN", "{h}");
    assert!(h["detail"].as_str().unwrap_or_default().contains("allocatable 4 → 3"), "{h}");
    assert!(h["evidence"]["answer"].as_str().unwrap_or_default().contains("hands each update to one stream"), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_exits_on_a_kubelet_restart_is_restarted_and_warned_about() {
    // Exits 1 once the kubelet deleted its socket, leaving the comeback to its DaemonSet.
    // (serve's no-reregister fault logs that moment to the plugin log, our stdout.)
    let script = format!(
        "log=$(readlink /proc/$$/fd/1); {} --no-reregister --socket-name x.sock & p=$!; \
         until grep -q fault=no-reregister \"$log\"; do sleep 0.02; done; \
         kill $p; wait $p; echo 'E1126 lost the kubelet; exiting' >&2; exit 1",
        serve(&[]).join(" ")
    );
    let (run, doc) =
        test_json(&["--focus", "^KRES-001$", "--restart-backoff", "1s"], &["sh".into(), "-c".into(), script]).await;
    run.expect_code(0);
    let k = scenario(&doc, "KRES-001");
    assert_eq!(k["result"], "WARN", "{k}");
    let answer = k["evidence"]["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("1 restart(s) with back-off, 1 s lost") && answer.contains("lost the kubelet"), "{answer}");
}

/// A DRA driver that never registers fails DRA-REG-001 once, with its own
/// log; the rest of the run is NOT-RUN at once, not a 10 s wait per
/// scenario (issue 35 item 1). One that exits is failed as soon as it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dra_driver_that_never_registers_fails_once_with_its_log_and_the_rest_is_not_run() {
    // The default run: the slow scenarios need --focus.
    let n = dpctl::suite::dra::SCENARIOS.iter().filter(|s| !s.slow).count();
    for (script, answer) in [
        (
            "echo 'E1128 00:00:00.1 1 main.go:9] no GPU found, waiting' >&2; sleep 60",
            "no registration socket registered within 10s",
        ),
        (
            "echo 'E1128 00:00:00.1 1 main.go:9] no GPU found, waiting' >&2; exit 3",
            "the driver exited (exit status: 3) before it registered",
        ),
    ] {
        let run = suite(&["-o", "json", "test", "--dra", "--", "sh", "-c", script]).await;
        run.expect_code(1);
        let doc = json(&run);
        assert_eq!(ids_with(&doc, "FAIL"), BTreeSet::from(["DRA-REG-001".to_string()]), "{doc}");
        assert_eq!(ids_with(&doc, "NOT-RUN").len(), n - 1, "{doc}");
        let e = &scenario(&doc, "DRA-REG-001")["evidence"];
        assert!(e["answer"].as_str().unwrap_or_default().contains(answer), "{e}");
        assert!(e["log"].as_str().unwrap_or_default().contains("no GPU found, waiting"), "the driver's own log: {e}");
        let rest = scenario(&doc, "DRA-ROLL-001");
        assert_eq!(rest["detail"], "the driver did not register (see DRA-REG-001)", "{rest}");
        // Not run means not waited for: no scenario after the first took time.
        let waited: Vec<&Value> = doc["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["result"] == "NOT-RUN" && s["durationMs"].as_f64().unwrap_or(0.0) > 1000.0)
            .collect();
        assert!(waited.is_empty(), "{waited:?}");
    }
}

/// Every failure's evidence carries the plugin's own last log lines (its
/// stderr and stdout), here for the device-plugin suite (issue 35 item 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failures_evidence_carries_the_plugins_own_log() {
    let (run, doc) = test_json(&["--focus", "^PRE-001$"], &serve(&["--pre-start", "--pre-start-fail"])).await;
    run.expect_code(1);
    let e = &scenario(&doc, "PRE-001")["evidence"];
    let log = e["log"].as_str().unwrap_or_default();
    assert!(log.contains("serving") || log.contains("registered"), "the plugin's own log lines: {e}");
    assert!(run.stdout.contains("\"log\""), "{}", run.stdout);
    // The plain report shows it under the fix.
    let plain = suite(&[
        "test",
        "--focus",
        "^PRE-001$",
        "--",
        BIN,
        "serve",
        "--resource",
        "vendor.example/foo",
        "--count",
        "4",
        "--plugin-dir",
        "{plugin-dir}",
        "--pre-start",
        "--pre-start-fail",
    ])
    .await;
    let fix_then_log = plain.stdout.find("      fix:").zip(plain.stdout.find("      log:"));
    assert!(fix_then_log.is_some_and(|(f, l)| f < l), "{}", plain.stdout);
}
