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
