//! One rulebook, one verdict: each rule's bad input goes through every role
//! that sees it — the rule function (the pure layer), `dpctl probe`
//! (`preferred`), `dpctl doctor`, `dpctl test` and `dpctl mock-kubelet` as
//! real processes against an in-test plugin on a real socket — and every
//! role reports the rule's verdict and the rule's text.

use crate::mock_kubelet::{events, pod_yaml, Node};
use crate::support::*;
use dpctl::api::deviceplugin::{
    AllocateResponse, ContainerPreferredAllocationRequest, ContainerPreferredAllocationResponse, Device,
    DevicePluginOptions, NumaNode, PreferredAllocationResponse, TopologyInfo,
};
use dpctl::kubelet::event::KubeletEvent;
use dpctl::protocol::{deviceplugin, go_status, registration, Rule, Severity, Violation};
use serde_json::Value;

const RES: &str = "vendor.example/foo";

fn verdict(r: &Rule) -> &'static str {
    match r.severity {
        Severity::Fail => "FAIL",
        Severity::Warn => "WARN",
    }
}

/// Whether any string in a JSON document contains `needle`.
fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(a) => a.iter().any(|x| mentions(x, needle)),
        Value::Object(o) => o.values().any(|x| mentions(x, needle)),
        _ => false,
    }
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", r.stdout, r.stderr))
}

/// The one violation `bad` breaks, by the rule function.
fn only(rule: &Rule, v: Vec<Violation>) -> Violation {
    assert_eq!(v.iter().map(|x| x.rule.id).collect::<Vec<_>>(), [rule.id], "{v:?}");
    v.into_iter().next().expect("one violation")
}

/// `dpctl probe`: the named check has the rule's verdict and text.
async fn probe(sock: &std::path::Path, extra: &[&str], check: &str, rule: &Rule, text: &str) {
    let mut args = vec!["probe", s(sock), "-o", "json"];
    args.extend_from_slice(extra);
    let r = dpctl(&args).await;
    r.expect_code(if rule.severity == Severity::Fail { 1 } else { 0 });
    let v = json(&r);
    let c = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == check).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(c["status"], verdict(rule), "{}: {c}", rule.id);
    assert!(c["detail"].as_str().unwrap().contains(text), "{}: {c}\nwant {text}", rule.id);
}

/// `dpctl test --socket`: the scenario has the rule's verdict and text.
async fn suite(sock: &std::path::Path, scenario: &str, rule: &Rule, text: &str) {
    let focus = format!("^{scenario}$");
    let r = run_cmd_within(dpctl_cmd(&["-o", "json", "test", "--socket", s(sock), "--focus", &focus]), 120).await;
    let v = json(&r);
    let sc = v["scenarios"].as_array().unwrap().iter().find(|x| x["id"] == scenario).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(sc["result"], verdict(rule), "{}: {sc}", rule.id);
    assert!(mentions(sc, text), "{}: {sc}\nwant {text}", rule.id);
}

/// `dpctl doctor`: a finding named by the rule, with its text and severity.
async fn doctor(n: &Node, rule: &Rule, text: &str) {
    let r = dpctl(&[
        "doctor",
        "--plugin-dir",
        s(&n.dp()),
        "--pod-resources-socket",
        s(&n.pr()),
        "--plugins-registry-dir",
        s(&n.registry()),
        "-o",
        "json",
    ])
    .await;
    let v = json(&r);
    let f: Vec<&Value> = v["findings"].as_array().unwrap().iter().filter(|f| f["check"] == rule.id).collect();
    assert_eq!(f.len(), 1, "{}: {v}", rule.id);
    assert_eq!(f[0]["message"], text, "{}", rule.id);
    let severity = if rule.severity == Severity::Fail { "error" } else { "warning" };
    assert_eq!(f[0]["severity"], severity, "{}", rule.id);
    assert_eq!(f[0]["fix"], rule.fix, "{}", rule.id);
}

fn dev(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
    Device {
        id: id.into(),
        health: health.into(),
        topology: numa.map(|n| TopologyInfo { nodes: n.into_iter().map(|id| NumaNode { id }).collect() }),
    }
}

/// A device list breaking each device rule once, and the suite scenario judging it.
fn device_rows() -> Vec<(&'static Rule, Vec<Device>, &'static str)> {
    let ok = || dev("ok-0", "Healthy", Some(vec![0]));
    vec![
        (&deviceplugin::DEVICE_ID_EMPTY, vec![ok(), dev("", "Healthy", None)], "LAW-002"),
        (&deviceplugin::DEVICE_ID_UNIQUE, vec![ok(), dev("ok-0", "Healthy", Some(vec![0]))], "LAW-002"),
        (&deviceplugin::DEVICE_ID_LENGTH, vec![ok(), dev(&"x".repeat(64), "Healthy", None)], "LAW-002"),
        (&deviceplugin::DEVICE_ID_CHARS, vec![ok(), dev("gpu 1", "Healthy", None)], "LAW-002"),
        (&deviceplugin::DEVICE_HEALTH, vec![ok(), dev("b", "healthy", None)], "LAW-003"),
        (&deviceplugin::DEVICE_TOPOLOGY, vec![ok(), dev("b", "Healthy", Some(vec![-1]))], "LAW-005"),
        (&deviceplugin::DEVICE_TOPOLOGY_EMPTY, vec![ok(), dev("b", "Healthy", Some(vec![]))], "LAW-005"),
    ]
}

async fn device_row(rule: &'static Rule, devices: Vec<Device>, scenario: &'static str) {
    let text = only(rule, deviceplugin::devices(&devices)).to_string();
    let n = Node::new();
    // The kubelet first: it deletes every socket in the plugin directory at start.
    let mut k = n.start(&["--log-format", "json"]).await;
    let mut tail = Tail::stdout(&mut k);
    let sock = n.dp().join("p.sock");
    let _plugin = start_plugin(&sock, devices, Behaviour::default()).await;

    probe(&sock, &[], "devices", rule, &text).await;
    doctor(&n, rule, &text).await;
    suite(&sock, scenario, rule, &text).await;
    // The mock kubelet accepts the snapshot and logs the broken rule.
    dpctl(&["register", "--plugin-dir", s(&n.dp()), "--resource", RES, "--endpoint", "p.sock"]).await.expect_code(0);
    tail.wait_for(&format!("\"rule\":\"{}\"", rule.id), 1).await;
    let out = stop_tailed(k, tail).await;
    let warned = events(&out.stdout).into_iter().any(|e| {
        matches!(&e.event, KubeletEvent::DeviceWarning { problem, rule: Some(r), .. } if *problem == text && r == rule.id)
    });
    assert!(warned, "{}: no device-warning {text:?}:\n{}", rule.id, out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_rules_get_one_verdict_and_text_from_every_role() {
    let mut set = tokio::task::JoinSet::new();
    for (rule, devices, scenario) in device_rows() {
        set.spawn(device_row(rule, devices, scenario));
    }
    while let Some(r) = set.join_next().await {
        r.expect("row");
    }
}

/// Registration rules: the mock kubelet refuses with the rule's text (what
/// `dpctl register` prints and the event log names), as the rule function says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_rules_get_the_kubelets_text_from_every_role() {
    let n = Node::new();
    let mut k = n.start(&["--log-format", "json"]).await;
    let tail = Tail::stdout(&mut k);
    let _plugin = start_plugin(&n.dp().join("p.sock"), four_devices(), Behaviour::default()).await;
    let rows: [(&Rule, Option<Violation>, [&str; 3]); 3] = [
        (&registration::REGISTER_VERSION, registration::register_version("v9"), ["v9", RES, "p.sock"]),
        (
            &registration::REGISTER_RESOURCE_NAME,
            registration::register_resource_name("gpu"),
            ["v1beta1", "gpu", "p.sock"],
        ),
        (
            &registration::REGISTER_ENDPOINT,
            registration::register_endpoint("../p.sock", &n.dp()),
            ["v1beta1", RES, "../p.sock"],
        ),
    ];
    let mut texts = Vec::new();
    for (rule, v, [version, resource, endpoint]) in rows {
        let text = only(rule, v.into_iter().collect()).to_string();
        let r = dpctl(&[
            "register",
            "--plugin-dir",
            s(&n.dp()),
            "--version",
            version,
            "--resource",
            resource,
            "--endpoint",
            endpoint,
        ])
        .await;
        r.expect_code(1);
        assert!(r.stderr.contains(&format!("Register failed: Unknown: {text}")), "{}: {}", rule.id, r.stderr);
        texts.push((rule, text));
    }
    let out = stop_tailed(k, tail).await;
    let ev = events(&out.stdout);
    for (rule, text) in texts {
        let refused = ev.iter().any(|e| {
            matches!(&e.event, KubeletEvent::RegistrationRejected { error, rule: Some(r), .. } if *error == text && r == rule.id)
        });
        assert!(refused, "{}: no registration-rejected {text:?}:\n{}", rule.id, out.stdout);
    }
}

/// Preferred answers: `probe`, `preferred` and `dpctl test` report the rule the answer breaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_rules_get_one_verdict_and_text_from_every_role() {
    let d = tmp();
    let options = DevicePluginOptions { get_preferred_allocation_available: true, pre_start_required: false };
    let healthy: Vec<String> = (0..4).map(|i| format!("foo-{i}")).collect();
    let answer = |ids: &[&str]| PreferredAllocationResponse {
        container_responses: vec![ContainerPreferredAllocationResponse {
            device_i_ds: ids.iter().map(|s| s.to_string()).collect(),
        }],
    };
    // probe asks for 2 of the healthy devices, must-include none.
    let probe_req = ContainerPreferredAllocationRequest {
        available_device_i_ds: healthy.clone(),
        must_include_device_i_ds: vec![],
        allocation_size: 2,
    };
    let rows: [(&Rule, &[&str]); 2] =
        [(&deviceplugin::PREFERRED_SIZE, &["foo-0"]), (&deviceplugin::PREFERRED_AVAILABLE, &["nope-0", "nope-1"])];
    for (i, (rule, ids)) in rows.into_iter().enumerate() {
        let sock = d.path().join(format!("p{i}.sock"));
        let b =
            Behaviour { options, preferred: Some(ids.iter().map(|s| s.to_string()).collect()), ..Default::default() };
        let _p = start_plugin(&sock, four_devices(), b).await;
        let text = only(rule, deviceplugin::preferred(&probe_req, &answer(ids))).to_string();
        probe(&sock, &[], "preferred", rule, &text).await;
        let r = dpctl(&["preferred", s(&sock), "--available", &healthy.join(","), "--size", "2"]).await;
        r.expect_code(1);
        assert!(r.stdout.contains(&format!("{} {text}", verdict(rule))), "{}: {}", rule.id, r.stdout);
        if rule.id == deviceplugin::PREFERRED_AVAILABLE.id {
            // The same foreign ID whatever the suite asks for.
            suite(&sock, "PREF-002", rule, &text).await;
        }
    }
    // Must-include: the request names one; `preferred` passes it, the suite's PREF-003 too.
    let sock = d.path().join("must.sock");
    let b = Behaviour { options, preferred: Some(vec!["foo-0".into(), "foo-1".into()]), ..Default::default() };
    let _p = start_plugin(&sock, four_devices(), b).await;
    let rule = &deviceplugin::PREFERRED_MUST_INCLUDE;
    let req = ContainerPreferredAllocationRequest { must_include_device_i_ds: vec!["foo-3".into()], ..probe_req };
    let text = only(rule, deviceplugin::preferred(&req, &answer(&["foo-0", "foo-1"]))).to_string();
    let r =
        dpctl(&["preferred", s(&sock), "--available", &healthy.join(","), "--must-include", "foo-3", "--size", "2"])
            .await;
    r.expect_code(1);
    assert!(r.stdout.contains(&format!("FAIL {text}")), "{}", r.stdout);
}

/// Allocate with no container responses: the kubelet fails the pod with the
/// rule's text; probe and `dpctl test` fail with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocate_rules_get_one_verdict_and_text_from_every_role() {
    let rule = &deviceplugin::ALLOCATE_ANSWERS;
    let text = only(rule, deviceplugin::allocate(1, &AllocateResponse::default())).to_string();
    let n = Node::new();
    let k = n.start(&[]).await;
    let sock = n.dp().join("p.sock");
    let _plugin = start_plugin(&sock, four_devices(), Behaviour { empty_allocate: true, ..Default::default() }).await;
    probe(&sock, &["--allocate"], "allocate", rule, &text).await;
    suite(&sock, "ALLOC-001", rule, &text).await;
    dpctl(&["register", "--plugin-dir", s(&n.dp()), "--resource", RES, "--endpoint", "p.sock"]).await.expect_code(0);
    n.wait_resource(RES, "registered", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", RES, 1));
    let rejected = n.wait_rejected("a.yaml").await;
    assert!(rejected.contains(&text), "{rejected}");
    stop_child(k).await;
}

/// An Allocate answer that gives the container nothing: the kubelet accepts
/// it; probe and `dpctl test` WARN with the same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_allocate_answer_is_one_warning_everywhere() {
    use dpctl::api::deviceplugin::ContainerAllocateResponse;
    let rule = &deviceplugin::ALLOCATE_NOT_EMPTY;
    let resp = AllocateResponse { container_responses: vec![ContainerAllocateResponse::default()] };
    let text = only(rule, deviceplugin::allocate(1, &resp)).to_string();
    let d = tmp();
    let sock = d.path().join("p.sock");
    let _plugin = start_plugin(&sock, four_devices(), Behaviour { nothing_allocate: true, ..Default::default() }).await;
    probe(&sock, &["--allocate"], "allocate", rule, &text).await;
    suite(&sock, "ALLOC-003", rule, &text).await;
}

/// PreStartContainer failing: the kubelet fails the container start with its
/// text; probe and `dpctl test` fail with the same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_start_rule_gets_one_verdict_and_text_from_every_role() {
    let rule = &deviceplugin::PRE_START;
    let error = go_status(tonic::Code::Internal, "device reset failed");
    let text =
        only(rule, deviceplugin::pre_start(Some(&error), std::time::Duration::ZERO).into_iter().collect()).to_string();
    assert_eq!(
        text,
        "device plugin PreStartContainer rpc failed with err: rpc error: code = Internal desc = device reset failed"
    );
    let n = Node::new();
    let mut k = n.start(&["--log-format", "json"]).await;
    let tail = Tail::stdout(&mut k);
    let sock = n.dp().join("p.sock");
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false },
        pre_start_fail: Some((tonic::Code::Internal, "device reset failed".into())),
        ..Default::default()
    };
    let _plugin = start_plugin(&sock, four_devices(), b).await;
    probe(&sock, &["--allocate"], "pre-start", rule, &text).await;
    suite(&sock, "PRE-001", rule, &text).await;
    dpctl(&["register", "--plugin-dir", s(&n.dp()), "--resource", RES, "--endpoint", "p.sock"]).await.expect_code(0);
    n.wait_resource(RES, "registered", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", RES, 1));
    n.wait_pod("a").await;
    let mut tail = tail;
    tail.wait_for("container-start-failed", 1).await;
    let out = stop_tailed(k, tail).await;
    let failed = events(&out.stdout)
        .into_iter()
        .any(|e| matches!(&e.event, KubeletEvent::ContainerStartFailed { error, .. } if *error == text));
    assert!(failed, "no container-start-failed {text:?}:\n{}", out.stdout);
}

/// The README's rule table is the rulebook: every rule, its verdict and what the kubelet does.
#[test]
fn the_readme_lists_every_rule_as_the_rulebook_says() {
    use dpctl::protocol::Kubelet;
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md")).unwrap();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `") && l.ends_with(" |")).collect();
    for r in deviceplugin::RULES {
        let row = rows
            .iter()
            .find(|l| l.starts_with(&format!("| `{}` |", r.id)))
            .unwrap_or_else(|| panic!("README lacks the rule row {}", r.id));
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.last().copied(), Some(verdict(r)), "{row}");
        let kubelet = match r.kubelet {
            Kubelet::Rejects => "refuses the registration",
            Kubelet::FailsPod => "fails the pod",
            Kubelet::DropsStream => "fails the stream",
            Kubelet::Tolerates => "accepts it",
            Kubelet::MockRejects => "accepts it (dpctl's mock kubelet refuses)",
        };
        assert_eq!(cells.get(2).copied(), Some(kubelet), "{row}");
    }
}
