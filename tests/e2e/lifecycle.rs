//! The pod lifecycle the kubelet runs, end to end with real processes: a
//! device plugin that asks for PreStartContainer (`dpctl serve --pre-start`)
//! and DRA drivers (`dpctl dra serve`) beside `dpctl mock-kubelet`, one pod
//! using both. Claims are prepared before any container starts; a failing
//! prepare starts nothing and keeps the pod pending; a prepare that failed
//! half-way leaks no claim; a restart takes the same steps. Also: the plugin
//! watcher tells a plugin of a type nobody handles so.

use crate::support::*;
use serde_json::Value;

use std::process::Stdio;

const GPU: &str = "gpu.example.com";
const NIC: &str = "nic.example.com";
const RES: &str = "vendor.example/foo";

/// What the lifecycle tests do on the shared tree beyond the DRA fixture.
trait Lifecycle {
    fn device_plugin(&self) -> tokio::process::Child;
    async fn node(&self) -> Value;
    fn cdi_specs(&self) -> usize;
}

impl Lifecycle for DraTree {
    /// `dpctl serve` of RES, asking for PreStartContainer.
    fn device_plugin(&self) -> tokio::process::Child {
        let mut c = serve_cmd(&self.p("device-plugins"), &["--resource", RES, "--count", "2", "--pre-start"]);
        c.stdout(Stdio::null());
        c.spawn().unwrap()
    }
    async fn node(&self) -> Value {
        let n = dpctl(&["node", "--plugin-dir", s(&self.p("device-plugins")), "-o", "json"]).await;
        n.expect_code(0);
        serde_json::from_str(&n.stdout).unwrap()
    }
    fn cdi_specs(&self) -> usize {
        std::fs::read_dir(self.p("cdi")).unwrap().count()
    }
}

fn claim(name: &str, class: &str) -> String {
    format!("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {name}\n  namespace: ml\n  uid: uid-{name}\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: {class}\n")
}

/// A pod with a device of RES and the claims `claims` (pod claim name = claim name).
fn pod(claims: &[&str]) -> String {
    let mut p = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\n  uid: pod-1\nspec:\n  resourceClaims:\n",
    );
    for c in claims {
        p.push_str(&format!("  - name: {c}\n    resourceClaimName: {c}\n"));
    }
    p.push_str(&format!(
        "  containers:\n  - name: main\n    resources:\n      limits:\n        {RES}: 1\n      claims:\n"
    ));
    for c in claims {
        p.push_str(&format!("      - name: {c}\n"));
    }
    p
}

/// The JSON log lines of `event`, in order.
fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

/// Where in the log the first `event` is.
fn first(tail: &Tail, event: &str) -> Option<usize> {
    tail.seen().find(&format!("\"event\":\"{event}\""))
}

fn lifecycle_of(node: &Value, pod: &str) -> Value {
    node["lifecycle"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["pod"] == pod)
        .cloned()
        .unwrap_or_else(|| panic!("no lifecycle for {pod}: {node}"))
}

/// A started kubelet with the device plugin and a driver of GPU (with `faults`) registered.
async fn start(
    t: &DraTree,
    faults: &[&str],
) -> (tokio::process::Child, Tail, tokio::process::Child, tokio::process::Child) {
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let dp = t.device_plugin();
    log.wait_for("\"event\":\"registered\"", 1).await;
    let gpu = t.driver(GPU, faults);
    log.wait_for("\"event\":\"dra-health\"", 1).await;
    (kubelet, log, dp, gpu)
}

/// Defect 1: containers started before their claims were prepared
/// (PreStartContainer came 6 ms before NodePrepareResources).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_start_only_after_every_claim_is_prepared() {
    let t = DraTree::new();
    let (kubelet, mut log, dp, gpu) = start(&t, &[]).await;
    t.write("claim.yaml", &claim("gpu", GPU));
    t.write("pod.yaml", &pod(&["gpu"]));
    log.wait_for("\"event\":\"pre-start\"", 1).await;
    let (prepared, pre_start) = (first(&log, "claim-prepared"), first(&log, "pre-start"));
    assert!(prepared.is_some() && prepared < pre_start, "claim-prepared must come before pre-start:\n{}", log.seen());
    assert_eq!(events(&log, "pre-start")[0]["resource"], RES);
    log.wait_for("\"step\":\"running\"", 1).await;
    let l = lifecycle_of(&t.node().await, "ml/trainer");
    assert_eq!((l["step"].as_str(), l["phase"].as_str()), (Some("running"), Some("Running")), "{l}");

    // Deletion: containers stop, the claim is unprepared, then the devices are freed.
    std::fs::remove_file(t.p("manifests/pod.yaml")).unwrap();
    log.wait_for("\"event\":\"pod-removed\"", 1).await;
    let order: Vec<usize> = ["stop-containers", "claim-unprepared", "pod-removed"]
        .iter()
        .map(|e| {
            let needle = if *e == "stop-containers" {
                "\"step\":\"stop-containers\"".to_string()
            } else {
                format!("\"event\":\"{e}\"")
            };
            log.seen().find(&needle).unwrap_or_else(|| panic!("no {e}:\n{}", log.seen()))
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "stop, unprepare, free in that order:\n{}", log.seen());
    stop_child(gpu).await;
    stop_child(dp).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// Defect 1 (failure): with a driver whose prepare fails, PreStartContainer
/// was still called. Now nothing starts, the pod stays Pending with the
/// kubelet's reason and text, and the prepare is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_prepare_starts_no_container_and_keeps_the_pod_pending() {
    let t = DraTree::new();
    let (kubelet, mut log, dp, gpu) = start(&t, &["--fault", "prepare-error=no GPU left"]).await;
    t.write("claim.yaml", &claim("gpu", GPU));
    t.write("pod.yaml", &pod(&["gpu"]));
    log.wait_for("\"event\":\"claim-prepare-failed\"", 2).await;
    let failed = events(&log, "claim-prepare-failed");
    let error = "prepare dynamic resources: NodePrepareResources failed for ResourceClaim gpu: no GPU left";
    assert_eq!((failed[0]["error"].as_str(), failed[1]["attempt"].as_u64()), (Some(error), Some(2)));
    assert!(events(&log, "pod-admitted").len() == 1, "the device manager admitted it");
    assert!(first(&log, "pre-start").is_none(), "no container starts:\n{}", log.seen());
    let l = lifecycle_of(&t.node().await, "ml/trainer");
    assert_eq!(l["phase"], "Pending", "{l}");
    assert_eq!(l["step"], "prepare-claims", "{l}");
    assert_eq!(l["reason"], "FailedPrepareDynamicResources", "{l}");
    assert_eq!(l["message"], format!("Failed to prepare dynamic resources: {error}"), "{l}");
    let ev = events(&log, "pod-phase");
    assert!(ev.iter().any(|e| e["reason"] == "FailedPrepareDynamicResources"), "{ev:?}");
    let table = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins"))]).await;
    assert!(
        table.stdout.contains("ml/trainer")
            && table.stdout.contains("Pending")
            && table.stdout.contains("FailedPrepareDynamicResources"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("Recorded"), "the claim is recorded, not prepared: {}", table.stdout);
    stop_child(gpu).await;
    stop_child(dp).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// Defect 2: claim A on driver A prepares, claim B on driver B fails; when
/// the pod goes, driver A must unprepare A (its CDI spec goes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_that_failed_half_way_unprepares_the_claim_it_prepared() {
    let t = DraTree::new();
    let (kubelet, mut log, dp, gpu) = start(&t, &[]).await;
    let nic = t.driver(NIC, &["--fault", "prepare-error=link down"]);
    log.wait_for("\"event\":\"dra-health\"", 2).await;
    t.write("gpu.yaml", &claim("gpu", GPU));
    t.write("nic.yaml", &claim("nic", NIC));
    t.write("pod.yaml", &pod(&["gpu", "nic"]));
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    assert_eq!(t.cdi_specs(), 1, "the GPU driver prepared its claim");
    // Both claims are in the DRA checkpoint: the GPU one with its devices, the NIC one not prepared.
    let outer: Value = serde_json::from_slice(&std::fs::read(t.p("dra_manager_state")).unwrap()).unwrap();
    let data: Value = serde_json::from_str(outer["Data"].as_str().unwrap()).unwrap();
    let entries = data["ClaimInfoStateList"].as_array().unwrap();
    let of = |name: &str| entries.iter().find(|e| e["ClaimName"] == name).unwrap_or_else(|| panic!("{data}")).clone();
    assert!(of("gpu")["DriverState"][GPU]["Devices"].is_array(), "{data}");
    assert!(of("nic")["DriverState"][NIC]["Devices"].is_null(), "{data}");
    assert_eq!(of("nic")["PodUIDs"]["pod-1"], serde_json::json!({}));
    assert!(first(&log, "pre-start").is_none());

    std::fs::remove_file(t.p("manifests/pod.yaml")).unwrap();
    log.wait_for("\"event\":\"claim-unprepared\"", 2).await;
    let un: Vec<String> =
        events(&log, "claim-unprepared").iter().map(|e| e["claim"].as_str().unwrap().to_string()).collect();
    assert!(un.contains(&"ml/gpu".to_string()) && un.contains(&"ml/nic".to_string()), "{un:?}");
    assert_eq!(t.cdi_specs(), 0, "the GPU driver was asked to unprepare its claim");
    stop_child(nic).await;
    stop_child(gpu).await;
    stop_child(dp).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// A restart takes the same steps: a pod whose claim never prepared comes
/// back from the checkpoint pending, and its containers start only once a
/// working driver prepared the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_pending_pod_starts_only_once_its_claim_is_prepared() {
    let t = DraTree::new();
    let (kubelet, mut log, dp, gpu) = start(&t, &["--fault", "prepare-error=not yet"]).await;
    t.write("claim.yaml", &claim("gpu", GPU));
    t.write("pod.yaml", &pod(&["gpu"]));
    log.wait_for("\"event\":\"claim-prepare-failed\"", 1).await;
    let pid = kubelet.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    log.wait_for("\"event\":\"pod-restored\"", 1).await;
    let after_restart = log.seen().len();
    log.wait_for("\"event\":\"claim-prepare-failed\"", 2).await;
    assert!(first(&log, "pre-start").is_none(), "{}", log.seen());
    assert!(events(&log, "claim-unprepared").is_empty(), "the restored pod's claim is not an orphan's: {}", log.seen());
    // The driver is replaced by one that works.
    stop_child(gpu).await;
    let gpu = t.driver(GPU, &[]);
    log.wait_for("\"event\":\"pre-start\"", 1).await;
    let seen = log.seen();
    let prepared = seen[after_restart..].find("\"event\":\"claim-prepared\"").map(|i| i + after_restart);
    assert!(prepared.is_some() && prepared < first(&log, "pre-start"), "{seen}");
    assert_eq!(events(&log, "claim-prepared")[0]["cached"], false);
    stop_child(gpu).await;
    stop_child(dp).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// A plugin-watcher socket whose GetInfo type no handler takes is told so,
/// in the kubelet's words (operation_generator.go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_of_a_type_nobody_handles_is_told_so() {
    use dpctl::api::pluginregistration::registration_server::{Registration, RegistrationServer};
    use dpctl::api::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
    use std::sync::{Arc, Mutex};
    use tonic::{Request, Response, Status};

    #[derive(Clone)]
    struct Csi(Arc<Mutex<Vec<RegistrationStatus>>>, &'static str, &'static str);
    #[tonic::async_trait]
    impl Registration for Csi {
        async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
            Ok(Response::new(PluginInfo {
                r#type: self.1.into(),
                name: self.2.into(),
                endpoint: String::new(),
                supported_versions: vec!["1.0.0".into()],
            }))
        }
        async fn notify_registration_status(
            &self,
            r: Request<RegistrationStatus>,
        ) -> Result<Response<RegistrationStatusResponse>, Status> {
            self.0.lock().unwrap().push(r.into_inner());
            Ok(Response::new(RegistrationStatusResponse {}))
        }
    }

    let t = DraTree::new();
    let (kubelet, mut log) = t.kubelet();
    log.wait_for("\"event\":\"started\"", 1).await;
    let sock = t.p("plugins_registry/csi.example.com-reg.sock");
    let got = Arc::new(Mutex::new(Vec::new()));
    let (l, guard) = dpctl::core::transport::listen(&sock).await.unwrap();
    let svc = RegistrationServer::new(Csi(got.clone(), "CSIPlugin", "csi.example.com"));
    let server = tokio::spawn(async move {
        let _guard = guard;
        let _ = dpctl::core::transport::serve(l, svc, std::future::pending()).await;
    });
    wait_until(20, "NotifyRegistrationStatus", || !got.lock().unwrap().is_empty()).await;
    let st = got.lock().unwrap()[0].clone();
    assert!(!st.plugin_registered);
    assert_eq!(
        st.error,
        format!(
            "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket {}",
            sock.display()
        )
    );
    log.wait_for("\"event\":\"registration-rejected\"", 1).await;
    assert!(log.seen().contains("no handler registered for plugin type: CSIPlugin"), "{}", log.seen());
    server.abort();

    // A type that has a handler, refused by its ValidatePlugin: the plugin is told in the same words.
    let sock = t.p("plugins_registry/bad-reg.sock");
    let got = Arc::new(Mutex::new(Vec::new()));
    let (l, guard) = dpctl::core::transport::listen(&sock).await.unwrap();
    let svc = RegistrationServer::new(Csi(got.clone(), "DevicePlugin", "no-slash"));
    let server = tokio::spawn(async move {
        let _guard = guard;
        let _ = dpctl::core::transport::serve(l, svc, std::future::pending()).await;
    });
    wait_until(20, "NotifyRegistrationStatus", || !got.lock().unwrap().is_empty()).await;
    let st = got.lock().unwrap()[0].clone();
    assert!(!st.plugin_registered);
    assert!(st.error.starts_with("RegisterPlugin error -- plugin validation failed with err: "), "{}", st.error);
    server.abort();
    stop_tailed(kubelet, log).await.expect_code(0);
}
