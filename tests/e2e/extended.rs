//! DRA-backed extended resources (KEP-5004) end to end: the real mock
//! kubelet with its API server, the real `dpctl dra serve` publishing its
//! slice and preparing the claims' allocations, `dpctl serve` for the
//! precedence, per kubelet version.

use crate::support::*;
use serde_json::Value;
use std::process::Stdio;

const DRIVER: &str = "gpu.example.com";
const RES: &str = "example.com/gpu";

/// A DeviceClass that maps `example.com/gpu` to the driver's devices.
fn class() -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: gpu-class}}\nspec:\n  extendedResourceName: {RES}\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\"'}}\n"
    )
}

/// One pod, unchanged whichever kind serves it: an init container (1), a
/// container asking 2 (after cpu in its sorted request keys) and one asking
/// for the class's implicit name.
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: ml, uid: pod-x}\nspec:\n  initContainers:\n  - name: init\n    resources: {limits: {example.com/gpu: 1}}\n  containers:\n  - name: main\n    resources: {limits: {cpu: 1, example.com/gpu: 2}}\n  - name: side\n    resources: {limits: {deviceclass.resource.kubernetes.io/gpu-class: 1}}\n";

/// A pod asking for the extended resource only.
const SIMPLE: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: simple, namespace: ml, uid: pod-s}\nspec:\n  containers:\n  - name: main\n    resources: {limits: {example.com/gpu: 1}}\n";

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    let needle = format!("\"event\":\"{event}\"");
    tail.seen().lines().filter(|l| l.contains(&needle)).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

struct Node {
    t: DraTree,
    kubelet: tokio::process::Child,
    log: Tail,
    api: (String, String),
}

/// The mock kubelet with its API server on `t`, `extra` flags after.
async fn node(extra: &[&str]) -> Node {
    let t = DraTree::new();
    let mut args = vec!["--api-server", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut kubelet = mock_kubelet_on(&t.root, &args).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    let ev = &events(&log, "api-server")[0];
    let addr = api_authority(ev["addr"].as_str().unwrap());
    let token = kubeconfig_token(std::path::Path::new(ev["kubeconfig"].as_str().unwrap()));
    Node { t, kubelet, log, api: (addr, token) }
}

impl Node {
    /// `dpctl dra serve` publishing to the API server (so it answers the allocation's request names).
    fn driver(&self, extra: &[&str]) -> tokio::process::Child {
        let kc = self.t.p("kubeconfig");
        let mut args = vec!["--kubeconfig", s(&kc), "--node-name", "dpctl-node", "--devices", "4"];
        args.extend_from_slice(extra);
        self.t.driver(DRIVER, &args)
    }

    /// The class, read before any pod.
    async fn class(&mut self) {
        self.t.write("class.yaml", &class());
        self.log.wait_for("\"event\":\"dra-object\"", 1).await;
    }

    async fn get(&self, path: &str) -> Value {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, token) = &self.api;
        let mut st = api_connect(&self.t.p("kubeconfig")).await;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
        st.write_all(req.as_bytes()).await.unwrap();
        let mut buf = String::new();
        st.read_to_string(&mut buf).await.unwrap();
        let body = buf.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    async fn node_json(&self) -> Value {
        let n = dpctl(&["node", "--plugin-dir", s(&self.t.p("device-plugins")), "-o", "json"]).await;
        n.expect_code(0);
        serde_json::from_str(&n.stdout).unwrap()
    }
}

/// The pod's mappings as `container/resource→request`.
fn mappings(v: &Value) -> Vec<String> {
    v["requestMappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}→{}",
                m["containerName"].as_str().unwrap(),
                m["resourceName"].as_str().unwrap(),
                m["requestName"].as_str().unwrap()
            )
        })
        .collect()
}

/// 1.36 (beta, on): a pod asking `example.com/gpu` on a node where only a
/// DeviceClass maps it gets the special claim — requests per (container,
/// resource), the init container reusing main's request — prepared by the
/// driver; each container's CDI devices are those of its requests; the
/// claim is in the API server (annotation, owner, reservedFor), the
/// checkpoint, PodResources and `dpctl node`; a restart does not prepare it
/// again; it goes with the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_an_extended_resource_only_a_device_class_maps_is_served_by_the_dra_driver() {
    let mut n = node(&["--kubelet-version", "1.36"]).await;
    let driver = n.driver(&[]);
    n.log.wait_for("\"event\":\"dra-registered\"", 1).await;
    n.class().await;
    n.t.write("pod.yaml", POD);
    n.log.wait_for("\"event\":\"extended-resource-claim\"", 1).await;
    let x = &events(&n.log, "extended-resource-claim")[0];
    let claim = x["claim"].as_str().unwrap().to_string();
    assert!(claim.starts_with("trainer-extended-resources-") && claim.len() == 32, "{claim}");
    assert_eq!(
        x["requests"],
        serde_json::json!(["container-1-request-1=gpu-class×2", "container-2-request-0=gpu-class×1"]),
        "main's gpu is its 2nd sorted request key (after cpu); the init container asks nothing of its own"
    );
    assert_eq!(
        x["mappings"],
        serde_json::json!([
            "side/deviceclass.resource.kubernetes.io/gpu-class→container-2-request-0",
            "main/example.com/gpu→container-1-request-1",
            "init/example.com/gpu→container-1-request-1"
        ]),
        "resources in sorted order, as createRequestsAndMappings sorts them"
    );
    n.log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let p = &events(&n.log, "claim-prepared")[0];
    assert_eq!(p["claim"], format!("ml/{claim}"));
    assert_eq!(p["devices"].as_array().unwrap().len(), 3);
    n.log.wait_for("\"phase\":\"Running\"", 1).await;
    assert!(events(&n.log, "pod-rejected").is_empty(), "not refused OutOfexample.com/gpu");
    assert!(events(&n.log, "extended-resource-unserved").is_empty());

    // dpctl node: the pod status field and each container's CDI devices.
    let v = n.node_json().await;
    let pod = v["draPods"].as_array().unwrap().iter().find(|p| p["pod"] == "ml/trainer").unwrap().clone();
    let st = &pod["extendedResourceClaimStatus"];
    assert_eq!(st["resourceClaimName"], claim.as_str());
    assert_eq!(mappings(st).len(), 3);
    let cdi = |c: &str| pod["extendedCdiDevices"][c].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!((cdi("main"), cdi("init"), cdi("side")), (2, 2, 1), "{pod}");
    let table = dpctl(&["node", "--plugin-dir", s(&n.t.p("device-plugins"))]).await;
    assert!(
        table.stdout.contains("EXTENDED RESOURCE") && table.stdout.contains(&format!("{claim}/container-2-request-0"))
    );

    // The API server's claim is the scheduler's.
    let c = n.get(&format!("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/{claim}")).await;
    assert_eq!(c["metadata"]["generateName"], "trainer-extended-resources-", "{c}");
    assert_eq!(c["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"], "true");
    let owner = &c["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str(), owner["uid"].as_str()),
        (Some("Pod"), Some("trainer"), Some("pod-x"))
    );
    assert_eq!(owner["controller"], true);
    let r0 = &c["spec"]["devices"]["requests"][0];
    assert_eq!(r0["name"], "container-1-request-1");
    assert_eq!(
        r0["exactly"],
        serde_json::json!({"deviceClassName": "gpu-class", "allocationMode": "ExactCount", "count": 2})
    );
    assert_eq!(c["status"]["reservedFor"][0]["uid"], "pod-x");

    // GetResources: each container is given its own requests' devices.
    let given = |c: &str| pod["cdiDevices"][c].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!((given("main"), given("init"), given("side")), (2, 2, 1), "{pod}");

    // PodResources: each container with a mapping lists the whole special
    // claim, as GetContainerClaimInfos gives it (the differential against
    // upstream's manager, dramanager_diff, holds it).
    let pr = dpctl(&["podresources", "list", "--socket", s(&n.t.p("pod-resources/kubelet.sock")), "-o", "json"]).await;
    pr.expect_code(0);
    let prv: Value = serde_json::from_str(&pr.stdout).unwrap();
    let prp = prv["podResources"].as_array().unwrap().iter().find(|p| p["name"] == "trainer").unwrap().clone();
    let ctr = |name: &str| prp["containers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
    let devs = |name: &str| ctr(name)["dynamicResources"][0]["claimResources"].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!((devs("main"), devs("side")), (3, 3), "{prp}");
    assert_eq!(ctr("main")["dynamicResources"][0]["claimName"], claim.as_str());

    // The checkpoint holds it.
    let ck = std::fs::read(n.t.p("dra_manager_state")).unwrap();
    assert!(String::from_utf8_lossy(&ck).contains(&claim));

    // A restart: the claim comes back prepared, no second call.
    let pid = n.kubelet.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    n.log.wait_for("\"event\":\"claim-prepared\"", 2).await;
    assert_eq!(events(&n.log, "claim-prepared")[1]["cached"], true);
    assert_eq!(events(&n.log, "extended-resource-claim")[1]["claim"], claim.as_str(), "the same claim");

    // The pod goes: the claim is unprepared and goes with it.
    std::fs::remove_file(n.t.p("manifests/pod.yaml")).unwrap();
    n.log.wait_for("\"event\":\"claim-unprepared\"", 1).await;
    assert_eq!(events(&n.log, "claim-unprepared")[0]["claim"], format!("ml/{claim}"));
    let gone = n.get(&format!("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/{claim}")).await;
    assert_eq!(gone["code"], 404, "{gone}");
    stop_child(driver).await;
    stop_tailed(n.kubelet, n.log).await.expect_code(0);
}

/// Admit SIMPLE on `version` (with `flags`) where only the class maps the
/// resource: Some(claim) when DRA serves it, None when the pod is refused.
async fn served_on(flags: &[&str]) -> Option<String> {
    let mut n = node(flags).await;
    let driver = n.driver(&[]);
    n.log.wait_for("\"event\":\"dra-registered\"", 1).await;
    n.class().await;
    n.t.write("pod.yaml", SIMPLE);
    let decided = || !events(&n.log, "pod-rejected").is_empty() || !events(&n.log, "claim-prepared").is_empty();
    wait_until(20, "the pod refused or its claim prepared", decided).await;
    let out = match events(&n.log, "pod-rejected").first() {
        Some(r) => {
            assert_eq!(r["podReason"], "OutOfexample.com/gpu", "{r}");
            None
        }
        None => events(&n.log, "extended-resource-claim").first().map(|x| x["claim"].as_str().unwrap().to_string()),
    };
    stop_child(driver).await;
    stop_tailed(n.kubelet, n.log).await.expect_code(0);
    out
}

/// The gate per version: absent up to 1.33, off by default on 1.34 and
/// 1.35 (`--feature-gates DRAExtendedResource=true` turns it on), on from
/// 1.36, locked on in 1.37.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_decides_per_version_on_both_sides_of_each_boundary() {
    assert_eq!(served_on(&["--kubelet-version", "1.33"]).await, None);
    assert!(served_on(&["--kubelet-version", "1.34", "--feature-gates", "DRAExtendedResource=true"]).await.is_some());
    assert_eq!(served_on(&["--kubelet-version", "1.35"]).await, None);
    assert!(served_on(&["--kubelet-version", "1.36"]).await.is_some());
    assert_eq!(served_on(&["--kubelet-version", "1.36", "--feature-gates", "DRAExtendedResource=false"]).await, None);
    let t = tmp();
    for (v, g, want) in [
        ("1.33", "DRAExtendedResource=true", "kubelet 1.33 has no such gate"),
        ("1.37", "DRAExtendedResource=false", "feature is locked to true"),
    ] {
        let r = run_cmd_within(mock_kubelet_on(t.path(), &["--kubelet-version", v, "--feature-gates", g]), 20).await;
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains(want) && r.stderr.lines().count() <= 2, "{}", r.stderr);
    }
}

/// A device plugin with allocatable > 0 wins: no claim; once the plugin is
/// gone (allocatable 0), the next pod is served by DRA and admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_plugin_with_allocatable_devices_wins_and_dra_serves_once_it_has_none() {
    let mut n = node(&["--kubelet-version", "1.36"]).await;
    let driver = n.driver(&[]);
    n.log.wait_for("\"event\":\"dra-registered\"", 1).await;
    n.class().await;
    let mut plugin = serve_cmd(&n.t.p("device-plugins"), &["--resource", RES, "--count", "2"]);
    plugin.stdout(Stdio::null());
    let plugin = plugin.spawn().unwrap();
    n.log.wait_for("\"event\":\"registered\"", 1).await;
    n.log.wait_for("\"event\":\"devices\"", 1).await;
    n.t.write("pod.yaml", SIMPLE);
    n.log.wait_for("\"event\":\"pod-admitted\"", 1).await;
    let a = &events(&n.log, "allocate")[0];
    assert_eq!(a["resource"], RES, "the device plugin allocated it");
    assert!(events(&n.log, "extended-resource-claim").is_empty(), "no special claim");
    stop_child(plugin).await;
    n.log.wait_for("\"allocatable\":0", 1).await;
    n.t.write("pod2.yaml", &SIMPLE.replace("simple", "second").replace("pod-s", "pod-2"));
    n.log.wait_for("\"event\":\"claim-prepared\"", 1).await;
    let x = &events(&n.log, "extended-resource-claim")[0];
    assert_eq!(x["pod"], "ml/second");
    stop_child(driver).await;
    stop_tailed(n.kubelet, n.log).await.expect_code(0);
}

/// dra-driver-cpu#197: a driver answering request names the kubelet cannot
/// map is prepared, its CDI spec written, and nothing is injected — said in
/// an event and in `dpctl node`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_name_mismatch_is_said_in_an_event_and_in_dpctl_node() {
    let mut n = node(&["--kubelet-version", "1.37"]).await;
    let driver = n.driver(&["--fault", "foreign-request-names"]);
    n.log.wait_for("\"event\":\"dra-registered\"", 1).await;
    n.class().await;
    n.t.write("pod.yaml", SIMPLE);
    n.log.wait_for("\"event\":\"extended-resource-unserved\"", 1).await;
    let e = &events(&n.log, "extended-resource-unserved")[0];
    assert_eq!((e["container"].as_str(), e["request"].as_str()), (Some("main"), Some("container-0-request-0")));
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("the driver answered request names [gpu]") && msg.contains("gets no CDI devices"), "{msg}");
    let v = n.node_json().await;
    let pod = &v["draPods"][0];
    // No CDI device for main (-o json leaves the empty list out).
    assert!(pod["extendedCdiDevices"]["main"].as_array().is_none_or(Vec::is_empty), "{v}");
    assert_eq!(pod["extendedResourceClaimStatus"]["requestMappings"][0]["requestName"], "container-0-request-0");
    let table = dpctl(&["node", "--plugin-dir", s(&n.t.p("device-plugins"))]).await;
    assert!(table.stdout.contains("pod ml/simple: container \"main\" asks for example.com/gpu"), "{}", table.stdout);
    stop_child(driver).await;
    stop_tailed(n.kubelet, n.log).await.expect_code(0);
}

/// `dpctl test --dra`'s extended-resource scenarios: dpctl dra serve passes
/// them where the gate is on and they are skipped where it is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dra_suite_checks_extended_resources_where_the_gate_is_on() {
    let exe = env!("CARGO_BIN_EXE_dpctl");
    let suite = |version: &'static str| {
        dpctl_cmd(&[
            "test",
            "--dra",
            "--kubelet-version",
            version,
            "--focus",
            "PREP-001|EXT",
            "-o",
            "json",
            "--",
            exe,
            "--kubelet-root-dir",
            "{kubelet-root-dir}",
            "dra",
            "serve",
            "--driver",
            DRIVER,
            "--cdi-dir",
            "{cdi-dir}",
            // The suite allocates from ResourceSlices only: publish one.
            "--kubeconfig",
            "{kubeconfig}",
            "--node-name",
            "{node-name}",
        ])
    };
    let on = run_cmd_within(suite("1.36"), 60).await;
    on.expect_code(0);
    let off = run_cmd_within(suite("1.35"), 60).await;
    off.expect_code(0);
    for (r, want) in [(&on, "pass"), (&off, "skip")] {
        let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
        let results: Vec<(String, String)> = v["scenarios"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", r.stdout))
            .iter()
            .filter(|x| x["id"].as_str().is_some_and(|i| i.contains("EXT")))
            .map(|x| (x["id"].as_str().unwrap_or("").to_string(), x["result"].as_str().unwrap_or("").to_lowercase()))
            .collect();
        assert_eq!(
            results,
            [("DRA-EXT-001".to_string(), want.to_string()), ("DRA-EXT-002".to_string(), want.to_string())],
            "{}",
            r.stdout
        );
    }
}

/// `dpctl compare`: `dpctl serve` and `dpctl dra serve` configured alike
/// give every container the same; a planted difference (another env value)
/// is found in each container, exit 1, in the table, -o json and JUnit;
/// --allow accepts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_finds_a_planted_difference_and_none_where_configured_alike() {
    let exe = env!("CARGO_BIN_EXE_dpctl");
    let d = tmp();
    let junit = d.path().join("cmp.xml");
    let cmd = |mode: &str, extra: &[&str]| {
        let mut args: Vec<String> = vec!["compare".into(), "--resource".into(), RES.into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mode_env = format!("MODE={mode}");
        let tail = [
            "--",
            exe,
            "serve",
            "--resource",
            RES,
            "--count",
            "8",
            "--env",
            "MODE=fast",
            "--plugin-dir",
            "{plugin-dir}",
            "--",
            exe,
            "--kubelet-root-dir",
            "{kubelet-root-dir}",
            "dra",
            "serve",
            "--driver",
            DRIVER,
            "--devices",
            "8",
            "--env",
            &mode_env,
            "--cdi-dir",
            "{cdi-dir}",
            "--kubeconfig",
            "{kubeconfig}",
            "--node-name",
            "{node-name}",
        ];
        args.extend(tail.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        dpctl_cmd(&refs)
    };
    let alike = run_cmd_within(cmd("fast", &["-o", "json"]), 90).await;
    alike.expect_code(0);
    let v: Value = serde_json::from_str(&alike.stdout).unwrap();
    assert_eq!(v["containers"].as_array().map(Vec::len), Some(6), "{v}");
    assert!(v["differences"].as_array().is_none_or(Vec::is_empty), "{v}");

    let differ = run_cmd_within(cmd("slow", &["--junit", s(&junit)]), 90).await;
    differ.expect_code(1);
    let rows: Vec<&str> = differ.stdout.lines().filter(|l| l.contains("DIFFERENT")).collect();
    assert_eq!(rows.len(), 6, "{}", differ.stdout);
    assert!(rows.iter().all(|r| r.contains("MODE") && r.contains("fast") && r.contains("slow")), "{}", differ.stdout);
    assert!(differ.stderr.contains("6 difference(s)"), "{}", differ.stderr);
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("failures=\"6\"") && x.contains("env MODE: device plugin"), "{x}");

    let allowed = run_cmd_within(cmd("slow", &["--allow", "env:MODE"]), 90).await;
    allowed.expect_code(0);
    assert!(allowed.stdout.contains("allowed"), "{}", allowed.stdout);
}

/// `dpctl demo --extended`: the same pods served both ways, side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_extended_shows_the_same_pods_served_both_ways() {
    let r = run_cmd_within(dpctl_cmd(&["demo", "--extended"]), 90).await;
    r.expect_code(0);
    assert!(r.stdout.contains("one-device/main        env MODE=fast              env MODE=fast"), "{}", r.stdout);
    assert!(r.stdout.contains("init-container/init") && r.stdout.contains("no difference"), "{}", r.stdout);
}

/// `dpctl compare` with topology: `dpctl serve --numa-nodes` and `dpctl dra
/// serve --numa-nodes` (the slice's `numaNode` attribute) configured alike
/// give each container as many devices on the same NUMA nodes (exit 0, the
/// device identities shown side by side); a driver that spreads its devices
/// over other NUMA nodes is found (`numa` rows, exit 1) and `--allow numa`
/// accepts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_finds_a_planted_numa_difference_and_none_where_configured_alike() {
    let exe = env!("CARGO_BIN_EXE_dpctl");
    let cmd = |dra_numa: &str, extra: &[&str]| {
        let mut args: Vec<String> = vec!["compare".into(), "--resource".into(), RES.into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let tail = [
            "--",
            exe,
            "serve",
            "--resource",
            RES,
            "--count",
            "8",
            "--numa-nodes",
            "1",
            "--env",
            "MODE=fast",
            "--plugin-dir",
            "{plugin-dir}",
            "--",
            exe,
            "--kubelet-root-dir",
            "{kubelet-root-dir}",
            "dra",
            "serve",
            "--driver",
            DRIVER,
            "--devices",
            "8",
            "--numa-nodes",
            dra_numa,
            "--env",
            "MODE=fast",
            "--cdi-dir",
            "{cdi-dir}",
            "--kubeconfig",
            "{kubeconfig}",
            "--node-name",
            "{node-name}",
        ];
        args.extend(tail.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        dpctl_cmd(&refs)
    };
    let alike = run_cmd_within(cmd("1", &["-o", "json"]), 90).await;
    alike.expect_code(0);
    let v: Value = serde_json::from_str(&alike.stdout).unwrap();
    assert!(v["differences"].as_array().is_none_or(Vec::is_empty), "{v}");
    let (dp, dra) = (&v["devices"]["several-devices/main"][0], &v["devices"]["several-devices/main"][1]);
    assert_eq!((dp.as_array().map(Vec::len), dra.as_array().map(Vec::len)), (Some(2), Some(2)), "{v}");
    assert_eq!(dp[0]["numa"], serde_json::json!([0]), "{v}");
    assert_eq!(dra[0]["numa"], serde_json::json!([0]), "{v}");
    assert!(dra[0]["id"].as_str().unwrap().starts_with(&format!("{DRIVER}/pool-0/dev-")), "{v}");

    // Eight NUMA nodes on the DRA side: only dev-0 is on node 0, so at least
    // four of the five containers with devices differ.
    let differ = run_cmd_within(cmd("8", &[]), 90).await;
    differ.expect_code(1);
    let rows: Vec<&str> = differ.stdout.lines().filter(|l| l.contains("DIFFERENT")).collect();
    assert!(rows.len() >= 4, "{}", differ.stdout);
    assert!(
        rows.iter().all(|r| {
            let w: Vec<&str> = r.split_whitespace().collect();
            w.get(2) == Some(&"numa") && w.get(3) == Some(&"nodes") && w.get(4) == Some(&"0") && w.get(5) != Some(&"0")
        }),
        "{}",
        differ.stdout
    );
    assert!(
        differ.stdout.contains("(numa 0)") && differ.stdout.contains("DRA DRIVER (prepared devices)"),
        "{}",
        differ.stdout
    );
    let allowed = run_cmd_within(cmd("8", &["--allow", "numa"]), 90).await;
    allowed.expect_code(0);
    assert!(allowed.stdout.lines().any(|l| l.contains("numa") && l.contains("allowed")), "{}", allowed.stdout);
}
