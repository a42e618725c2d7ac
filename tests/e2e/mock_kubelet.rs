//! `dpctl mock-kubelet` as a real process, with `dpctl serve` and in-test
//! plugins registering with it.

use crate::authority::{grpc_status, raw_register_req, AUTHORITIES};
use crate::support::*;
use dpctl::api::deviceplugin::registration_client::RegistrationClient;
use dpctl::api::deviceplugin::{DevicePluginOptions, RegisterRequest};
use dpctl::kubelet::event::{KubeletEvent, Stamped};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Child;

/// A node for the tests: the product's own node tree (`NodeTree`) in a temp dir.
pub struct Node {
    pub dir: tempfile::TempDir,
    pub tree: dpctl::kubelet::tree::NodeTree,
}

impl Node {
    pub fn new() -> Self {
        let dir = tmp();
        let tree = dpctl::kubelet::tree::NodeTree::under(dir.path());
        tree.create().unwrap();
        Node { dir, tree }
    }
    pub fn dp(&self) -> PathBuf {
        self.tree.plugin_dir.clone()
    }
    pub fn pods(&self) -> PathBuf {
        self.tree.manifests.clone()
    }
    pub fn pr(&self) -> PathBuf {
        self.tree.pod_resources.clone()
    }
    pub fn registry(&self) -> PathBuf {
        self.tree.registry_dir.clone()
    }
    pub fn kubelet(&self) -> PathBuf {
        self.tree.kubelet_socket()
    }
    pub async fn start(&self, extra: &[&str]) -> Child {
        let dp = self.dp();
        let pods = self.pods();
        let pr = self.pr();
        let mut args = vec![
            "mock-kubelet",
            "--plugin-dir",
            s(&dp),
            "--manifests",
            s(&pods),
            "--pod-resources-socket",
            s(&pr),
            "--dial-timeout",
            "1s",
        ];
        args.extend_from_slice(extra);
        let child = dpctl_cmd(&args).spawn().unwrap();
        let k = self.kubelet();
        // a stale kubelet.sock (after SIGKILL) exists but does not answer
        wait_until(10, "a live kubelet.sock", || std::os::unix::net::UnixStream::connect(&k).is_ok()).await;
        child
    }
    pub async fn serve(&self, extra: &[&str]) -> Child {
        serve_cmd(&self.dp(), extra).spawn().unwrap()
    }
    pub fn pod(&self, file: &str, text: &str) {
        let tmp = self.pods().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.pods().join(file)).unwrap();
    }
    pub async fn node(&self) -> serde_json::Value {
        let r = dpctl(&["node", "--plugin-dir", s(&self.dp()), "-o", "json"]).await;
        r.expect_code(0);
        serde_json::from_str(&r.stdout).unwrap()
    }
    pub async fn resource(&self, name: &str) -> Option<serde_json::Value> {
        self.node().await["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .find(|r| r["resource"] == name)
            .cloned()
    }
    pub async fn wait_resource(
        &self,
        name: &str,
        what: &str,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        for _ in 0..250 {
            if let Some(r) = self.resource(name).await {
                if f(&r) {
                    return r;
                }
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        panic!("timed out waiting for {name}: {what}; node: {}", self.node().await);
    }
    pub async fn wait_pod(&self, name: &str) -> serde_json::Value {
        for _ in 0..250 {
            let n = self.node().await;
            // an empty list is omitted from -o json (a protojson default)
            if let Some(p) = n["pods"].as_array().into_iter().flatten().find(|p| p["name"] == name) {
                return p.clone();
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        panic!("pod {name} not admitted: {}", self.node().await);
    }
    pub async fn wait_rejected(&self, file: &str) -> String {
        for _ in 0..250 {
            let n = self.node().await;
            if let Some((_, why)) = n["rejected"].as_object().into_iter().flatten().find(|(f, _)| f.ends_with(file)) {
                return why.as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        panic!("{file} not rejected: {}", self.node().await);
    }
}

pub fn pod_yaml(name: &str, res: &str, n: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  containers:\n  - name: main\n    resources:\n      limits:\n        {res}: {n}\n"
    )
}

fn containers_devices(p: &serde_json::Value, container: &str, res: &str) -> Vec<String> {
    let c = p["containers"].as_array().unwrap().iter().find(|c| c["name"] == container).unwrap();
    container_devices(c, res)
}

/// The IDs of `res` a container of a `node` pod holds, sorted.
pub fn container_devices(c: &serde_json::Value, res: &str) -> Vec<String> {
    let mut ids: Vec<String> = c["resources"][res]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap().clone())
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

async fn register(kubelet: &Path, req: RegisterRequest) -> Result<(), tonic::Status> {
    let mut c = RegistrationClient::new(dpctl::core::transport::dial(kubelet, Duration::from_secs(5)).await.unwrap());
    c.register(req).await.map(|_| ())
}

fn req(resource: &str, endpoint: &str) -> RegisterRequest {
    RegisterRequest {
        version: "v1beta1".into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_registers_pods_get_devices_and_podresources_shows_them() {
    let n = Node::new();
    // a regular file and a directory in the plugin dir survive the kubelet's socket cleanup
    std::fs::write(n.dp().join("notes.txt"), "keep").unwrap();
    let stale = n.dp().join("old-plugin.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let k = n.start(&["--metrics-addr", "127.0.0.1:0"]).await;
    assert!(!stale.exists(), "sockets are deleted at start");
    assert_eq!(std::fs::read_to_string(n.dp().join("notes.txt")).unwrap(), "keep");

    let sv = n
        .serve(&[
            "--resource",
            "vendor.example/foo",
            "--count",
            "4",
            "--numa-nodes",
            "2",
            "--preferred-allocation",
            "--pre-start",
        ])
        .await;
    n.wait_resource("vendor.example/foo", "4 allocatable", |r| r["allocatable"] == 4 && r["state"] == "running").await;

    n.pod("trainer.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\nspec:\n  initContainers:\n  - name: init\n    resources:\n      limits:\n        vendor.example/foo: 1\n  containers:\n  - name: main\n    resources:\n      limits:\n        vendor.example/foo: 2\n");
    let p = n.wait_pod("trainer").await;
    let init = containers_devices(&p, "init", "vendor.example/foo");
    let main = containers_devices(&p, "main", "vendor.example/foo");
    assert_eq!(init.len(), 1);
    assert_eq!(main.len(), 2);
    assert!(main.contains(&init[0]), "the app container reuses the init container's device: {init:?} {main:?}");
    assert_eq!(main, ["foo-0", "foo-1"], "packed policy via GetPreferredAllocation");

    let r = dpctl(&["podresources", "list", "--socket", s(&n.pr()), "-o", "json"]).await;
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let pr = &v["podResources"][0];
    assert_eq!((pr["name"].as_str(), pr["namespace"].as_str()), (Some("trainer"), Some("ml")));
    assert_eq!(pr["containers"].as_array().unwrap().len(), 1, "app containers only");
    // one ContainerDevices per device and NUMA node, as kubelets since 1.21 answer
    let devs = pr["containers"][0]["devices"].as_array().unwrap();
    let ids: Vec<&str> = devs.iter().map(|d| d["deviceIds"].as_array().unwrap()[0].as_str().unwrap()).collect();
    assert_eq!(ids, ["foo-0", "foo-1"]);
    for d in devs {
        assert_eq!(d["deviceIds"].as_array().unwrap().len(), 1, "{d}");
        assert_eq!(d["topology"]["nodes"][0]["ID"], "0");
    }

    // health change: allocatable drops, PodResources allocatable lists only healthy devices
    dpctl(&["--plugin-dir", s(&n.dp()), "device", "set-health", "foo-3", "Unhealthy"]).await.expect_code(0);
    n.wait_resource("vendor.example/foo", "3 allocatable", |r| r["allocatable"] == 3 && r["capacity"] == 4).await;
    let r = dpctl(&["podresources", "allocatable", "--socket", s(&n.pr()), "-o", "json"]).await;
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let ids: Vec<&str> = v["devices"].as_array().unwrap().iter().map(|d| d["deviceIds"][0].as_str().unwrap()).collect();
    assert_eq!(ids, ["foo-0", "foo-1", "foo-2"]);

    // over-asking is rejected with the kubelet's text and nothing half-allocated
    n.pod("big.yaml", &pod_yaml("big", "vendor.example/foo", 2));
    let why = n.wait_rejected("big.yaml").await;
    assert_eq!(why, "Allocate failed due to requested number of devices unavailable for vendor.example/foo. Requested: 2, Available: 1, which is unexpected");
    assert_eq!(n.resource("vendor.example/foo").await.unwrap()["allocated"], 2);

    // deleting a manifest frees its devices; the rejected one can then be admitted
    std::fs::remove_file(n.pods().join("trainer.yaml")).unwrap();
    std::fs::remove_file(n.pods().join("big.yaml")).unwrap();
    n.wait_resource("vendor.example/foo", "freed", |r| r["allocated"] == 0).await;
    n.pod("big2.yaml", &pod_yaml("big2", "vendor.example/foo", 2));
    let p = n.wait_pod("big2").await;
    assert_eq!(containers_devices(&p, "main", "vendor.example/foo").len(), 2);

    // table output of dpctl node
    let r = dpctl(&["node", "--plugin-dir", s(&n.dp())]).await;
    r.expect_code(0);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..5] == ["vendor.example/foo", "4", "3", "2", "running"]),
        "{}",
        r.stdout
    );

    let sv_out = stop_child(sv).await;
    assert!(
        sv_out.stdout.contains("PreStartContainer"),
        "PreStartContainer before each container start: {}",
        sv_out.stdout
    );
    let out = stop_child(k).await;
    out.expect_code(0);
    for ev in
        ["registered", "devices", "pod-admitted", "allocate", "preferred", "pre-start", "pod-rejected", "pod-removed"]
    {
        assert!(out.stdout.contains(ev), "event log lacks {ev}:\n{}", out.stdout);
    }
    assert!(!n.kubelet().exists(), "kubelet.sock removed on exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_is_validated_like_the_kubelet() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let plugin = start_plugin(&n.dp().join("p.sock"), four_devices(), Behaviour::default()).await;
    let cases = [
        (
            RegisterRequest { version: "v1alpha".into(), ..req("vendor.example/foo", "p.sock") },
            "requested API version \"v1alpha\" is not supported by kubelet. Supported version is [\"v1beta1\"]",
        ),
        (req("foo", "p.sock"), "the ResourceName \"foo\" is invalid"),
        (req("kubernetes.io/foo", "p.sock"), "the ResourceName \"kubernetes.io/foo\" is invalid"),
        (req("vendor.example/foo", "../p.sock"), "is not a socket file name inside the plugin directory"),
        (req("vendor.example/foo", "/tmp/p.sock"), "is not a socket file name inside the plugin directory"),
        (req("vendor.example/foo", "missing.sock"), "the plugin must serve its socket before calling Register"),
    ];
    for (r, want) in cases {
        let e = register(&n.kubelet(), r.clone()).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unknown, "{r:?}");
        assert!(e.message().contains(want), "{r:?}: {}", e.message());
    }
    // dpctl register reports the kubelet's answer verbatim
    let r =
        dpctl(&["register", "--plugin-dir", s(&n.dp()), "--resource", "vendor.example/foo", "--endpoint", "../x.sock"])
            .await;
    r.expect_code(1);
    assert!(r.stderr.contains("Register failed: Unknown: endpoint \"../x.sock\""), "{}", r.stderr);

    // a good registration, then a second one for the same resource on another socket: the
    // newest is the current endpoint; as kubelets since 1.37 key instances by socket,
    // the first keeps streaming, and the last snapshot of any instance is the node's
    // devices (kubernetes#135437; TestDevicePluginReRegistration)
    register(&n.kubelet(), req("vendor.example/foo", "p.sock")).await.unwrap();
    n.wait_resource("vendor.example/foo", "running", |r| r["capacity"] == 4).await;
    let q = start_plugin(&n.dp().join("q.sock"), vec![dev("q-0", "Healthy", None)], Behaviour::default()).await;
    let r =
        dpctl(&["register", "--plugin-dir", s(&n.dp()), "--resource", "vendor.example/foo", "--endpoint", "q.sock"])
            .await;
    r.expect_code(0);
    let res = n.wait_resource("vendor.example/foo", "replaced", |r| r["capacity"] == 1).await;
    assert!(res["endpoint"].as_str().unwrap().ends_with("q.sock"));
    assert_eq!(res["olderInstances"], 1, "{res}");
    assert!(q.calls.lock().unwrap().contains(&"GetDevicePluginOptions".to_string()), "dialed back inside Register");
    drop(plugin);
    let out = stop_child(k).await;
    assert!(out.stdout.matches("registration-rejected").count() >= 6, "{}", out.stdout);
    assert!(out.stdout.contains("replaced=true"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_client_authorities_can_register() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let _p = start_plugin(&n.dp().join("p.sock"), four_devices(), Behaviour::default()).await;
    for (i, auth) in AUTHORITIES.iter().enumerate() {
        let r = req(&format!("vendor.example/r{i}"), "p.sock");
        let o = raw_register_req(&n.kubelet(), auth, &r).await;
        assert_eq!(grpc_status(&o), Some("0"), "{auth}: {o:?}");
        n.wait_resource(&format!("vendor.example/r{i}"), "registered", |r| r["capacity"] == 4).await;
    }
    stop_child(k).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_allocation_gets_the_kubelets_arguments() {
    let n = Node::new();
    let k = n.start(&[]).await;
    // the plugin answers one foreign ID and one good one; the kubelet drops the
    // foreign one and tops the answer up from the candidates
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: true },
        preferred: Some(vec!["nope".into(), "foo-2".into()]),
        ..Default::default()
    };
    let p = start_plugin(&n.dp().join("p.sock"), four_devices(), b).await;
    register(&n.kubelet(), req("vendor.example/foo", "p.sock")).await.unwrap();
    n.wait_resource("vendor.example/foo", "4 allocatable", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 2));
    let pod = n.wait_pod("a").await;
    assert_eq!(containers_devices(&pod, "main", "vendor.example/foo"), ["foo-0", "foo-2"]);
    let calls = p.calls.lock().unwrap().clone();
    assert!(calls.contains(&"GetPreferredAllocation(foo-0,foo-1,foo-2,foo-3//2)".to_string()), "{calls:?}");
    assert!(calls.iter().any(|c| c == "Allocate(foo-2,foo-0)" || c == "Allocate(foo-0,foo-2)"), "{calls:?}");
    assert!(
        calls.contains(&"PreStartContainer(foo-2,foo-0)".to_string())
            || calls.contains(&"PreStartContainer(foo-0,foo-2)".to_string()),
        "{calls:?}"
    );
    // exactly as many candidates as needed: GetPreferredAllocation is still called
    n.pod("b.yaml", &pod_yaml("b", "vendor.example/foo", 2));
    n.wait_pod("b").await;
    assert!(p.calls.lock().unwrap().contains(&"GetPreferredAllocation(foo-1,foo-3//2)".to_string()));
    let out = stop_child(k).await;
    assert!(out.stdout.contains("ignoredForeign=nope"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_errors_and_bad_manifests_reject_only_their_pod() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let b = Behaviour { fail: None, ..Default::default() };
    let _good = start_plugin(&n.dp().join("good.sock"), four_devices(), b).await;
    let bad = Behaviour {
        options: DevicePluginOptions { pre_start_required: false, get_preferred_allocation_available: true },
        ..Default::default()
    };
    let _bad = start_plugin(&n.dp().join("bad.sock"), four_devices(), bad).await;
    register(&n.kubelet(), req("vendor.example/good", "good.sock")).await.unwrap();
    n.wait_resource("vendor.example/good", "up", |r| r["allocatable"] == 4).await;
    for (f, text, want) in [
        ("frac.yaml", pod_yaml("frac", "vendor.example/good", 0).replace(": 0", ": \"1.5\""), "must be a whole number"),
        ("neg.json", r#"{"metadata":{"name":"neg"},"spec":{"containers":[{"name":"c","resources":{"limits":{"vendor.example/good":-2}}}]}}"#.to_string(), "negative"),
        ("unknown.yaml", pod_yaml("unknown", "vendor.example/nothing", 1), "Node didn't have enough resource: vendor.example/nothing, requested: 1, used: 0, capacity: 0"),
        ("broken.yaml", "metadata: [unclosed".to_string(), "not valid YAML"),
    ] {
        n.pod(f, &text);
        let why = n.wait_rejected(f).await;
        assert!(why.contains(want), "{f}: {why}");
    }
    n.pod("ok.yaml", &pod_yaml("ok", "vendor.example/good", 1));
    n.wait_pod("ok").await;
    assert_eq!(n.node().await["pods"].as_array().unwrap().len(), 1);
    stop_child(k).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_preferred_or_allocate_rejects_the_pod() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let b = Behaviour {
        options: DevicePluginOptions { pre_start_required: false, get_preferred_allocation_available: true },
        fail: Some((tonic::Code::Internal, "out of coffee".into())),
        ..Default::default()
    };
    let _p = start_plugin(&n.dp().join("p.sock"), four_devices(), b).await;
    // options fail too, so registration fails: dial-back reports it
    let e = register(&n.kubelet(), req("vendor.example/foo", "p.sock")).await.unwrap_err();
    assert!(
        e.message().contains("failed to get device plugin options") && e.message().contains("out of coffee"),
        "{}",
        e.message()
    );
    // serve with an Allocate failure rate of 1: admission fails with the RPC error
    let sv = n.serve(&["--resource", "vendor.example/bar", "--count", "2", "--allocate-failure-rate", "1"]).await;
    n.wait_resource("vendor.example/bar", "up", |r| r["allocatable"] == 2).await;
    n.pod("p.yaml", &pod_yaml("p", "vendor.example/bar", 1));
    let why = n.wait_rejected("p.yaml").await;
    assert!(why.starts_with("Allocate failed due to ") && why.contains("injected Allocate failure"), "{why}");
    assert_eq!(n.resource("vendor.example/bar").await.unwrap()["allocated"], 0, "nothing half-allocated");
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_end_grace_period_then_removal() {
    let n = Node::new();
    let k = n.start(&["--grace-period", "1500ms"]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "3"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 3).await;
    stop_child(sv).await.expect_code(0);
    let r = n.wait_resource("vendor.example/foo", "stopped", |r| r["state"] == "stopped").await;
    assert_eq!((r["capacity"].as_u64(), r["allocatable"].as_u64()), (Some(3), Some(0)), "capacity kept, allocatable 0");
    for (_, d) in r["devices"].as_object().unwrap() {
        assert_eq!(d["health"], "Unhealthy");
    }
    // allocation against the stopped plugin fails with the kubelet's text since kubernetes#114640
    n.pod("p.yaml", &pod_yaml("p", "vendor.example/foo", 1));
    assert_eq!(
        n.wait_rejected("p.yaml").await,
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices vendor.example/foo, which is unexpected"
    );
    // the grace period ends: the resource stays listed at 0/0, as the kubelet keeps it in the node status
    let r = n.wait_resource("vendor.example/foo", "removed", |r| r["state"] == "removed").await;
    assert_eq!((r["capacity"].as_u64(), r["allocatable"].as_u64()), (Some(0), Some(0)), "{r}");
    std::fs::remove_file(n.pods().join("p.yaml")).unwrap();
    n.pod("q.yaml", &pod_yaml("q", "vendor.example/foo", 1));
    assert_eq!(
        n.wait_rejected("q.yaml").await,
        "Allocate failed due to cannot allocate unregistered device vendor.example/foo, which is unexpected"
    );
    let table = dpctl(&["node", "--plugin-dir", s(&n.dp())]).await;
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.split_whitespace().take(5).collect::<Vec<_>>()
                == ["vendor.example/foo", "0", "0", "0", "removed"]),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("q.yaml: UnexpectedAdmissionError: Allocate failed due to"), "{}", table.stdout);
    let out = stop_child(k).await;
    assert!(out.stdout.contains("stream-ended") && out.stdout.contains("resource-removed"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_restores_after_sigkill_without_reallocating() {
    let n = Node::new();
    let k = n.start(&[]).await;
    let p = start_plugin(&n.dp().join("p.sock"), four_devices(), Behaviour::default()).await;
    register(&n.kubelet(), req("vendor.example/foo", "p.sock")).await.unwrap();
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 4).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 2));
    let before = containers_devices(&n.wait_pod("a").await, "main", "vendor.example/foo");
    let cp = n.dp().join("kubelet_internal_checkpoint");
    let text = std::fs::read_to_string(&cp).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["Data"]["PodDeviceEntries"][0]["ResourceName"], "vendor.example/foo");
    assert_eq!(v["Data"]["RegisteredDevices"]["vendor.example/foo"].as_array().unwrap().len(), 4);
    assert!(v["Data"]["PodDeviceEntries"][0]["DeviceIDs"]["0"].is_array());

    // SIGKILL: no cleanup at all
    let mut k = k;
    k.start_kill().unwrap();
    k.wait().await.unwrap();
    let allocs = p.calls.lock().unwrap().iter().filter(|c| c.starts_with("Allocate")).count();
    let k2 = n.start(&[]).await;
    assert!(!n.dp().join("p.sock").exists(), "the restarted kubelet deleted the plugin's socket");
    let r = n.resource("vendor.example/foo").await.unwrap();
    assert_eq!(
        (r["capacity"].as_u64(), r["state"].as_str()),
        (Some(0), Some("waiting")),
        "capacity 0 until the plugin returns"
    );
    let after = containers_devices(&n.wait_pod("a").await, "main", "vendor.example/foo");
    assert_eq!(before, after);
    assert_eq!(
        p.calls.lock().unwrap().iter().filter(|c| c.starts_with("Allocate")).count(),
        allocs,
        "no second Allocate"
    );
    let out = stop_child(k2).await;
    assert!(out.stdout.contains("pod-restored"), "{}", out.stdout);
    assert!(!out.stdout.contains("pod-admitted"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_checkpoint_is_set_aside() {
    let n = Node::new();
    std::fs::write(n.dp().join("kubelet_internal_checkpoint"), "{\"Data\": ").unwrap();
    let k = n.start(&[]).await;
    let aside: Vec<String> = std::fs::read_dir(n.dp())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("kubelet_internal_checkpoint.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "set aside, not deleted");
    assert_eq!(std::fs::read_to_string(n.dp().join(&aside[0])).unwrap(), "{\"Data\": ");
    let out = stop_child(k).await;
    assert!(out.stdout.contains("checkpoint-corrupt"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_restart_plugins_come_back() {
    let n = Node::new();
    let k = n.start(&["--log-format", "json"]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
    n.wait_pod("a").await;
    let before = n.resource("vendor.example/foo").await.unwrap()["endpoint"].clone();
    std::process::Command::new("kill").args(["-HUP", &k.id().unwrap().to_string()]).status().unwrap();
    let r = n
        .wait_resource("vendor.example/foo", "back on a new socket", |r| {
            r["state"] == "running" && r["endpoint"] != before
        })
        .await;
    assert_eq!(r["allocated"], 1, "allocation restored from the checkpoint");
    stop_child(sv).await;
    let out = stop_child(k).await;
    // Every line the binary logs is one of the engine's typed events.
    let ev = events(&out.stdout);
    let at = |f: &dyn Fn(&KubeletEvent) -> bool| ev.iter().position(|e| f(&e.event));
    let restarting = at(&|e| matches!(e, KubeletEvent::Restarting { reason } if reason == "SIGHUP"));
    let restarted = at(&|e| matches!(e, KubeletEvent::Restarted { .. }));
    let back = at(&|e| matches!(e, KubeletEvent::PluginBack { resource, .. } if resource == "vendor.example/foo"));
    let admitted = at(&|e| matches!(e, KubeletEvent::PodAdmitted { pod, .. } if pod == "default/a"));
    let restored = at(&|e| matches!(e, KubeletEvent::PodRestored { pod, .. } if pod == "default/a"));
    assert!(
        admitted < restarting && restarting < restarted && restarted < restored && restored < back && back.is_some(),
        "{ev:#?}"
    );
    assert!(ev.iter().all(|e| e.generation.is_none() || e.generation <= Some(1)), "{ev:#?}");
    assert!(matches!(ev.last().map(|e| &e.event), Some(KubeletEvent::Stopped)), "{ev:#?}");
}

/// The engine's typed events, read back from `--log-format json` lines; a
/// line that is not one of them fails the test.
pub fn events(stdout: &str) -> Vec<Stamped> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Stamped>(l).unwrap_or_else(|e| panic!("not a kubelet event ({e}): {l}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_watcher_registration_and_deregistration() {
    let n = Node::new();
    let reg = n.registry();
    let k = n.start(&["--plugins-registry-dir", s(&reg), "--grace-period", "1h"]).await;
    let sv = n
        .serve(&[
            "--resource",
            "vendor.example/foo",
            "--count",
            "2",
            "--registration",
            "plugin-watcher",
            "--plugins-registry-dir",
            s(&reg),
        ])
        .await;
    let r = n.wait_resource("vendor.example/foo", "registered via the watcher", |r| r["allocatable"] == 2).await;
    assert_eq!(r["via"], "plugin-watcher");
    let out = stop_child(sv).await;
    out.expect_code(0);
    assert!(out.stdout.contains("via=plugin-watcher"), "serve saw NotifyRegistrationStatus: {}", out.stdout);
    n.wait_resource("vendor.example/foo", "deregistered", |r| r["state"] == "stopped").await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_numa_node_policy_aligns_or_rejects() {
    let n = Node::new();
    let k = n.start(&["--topology-policy", "single-numa-node"]).await;
    let sv = n.serve(&["--resource", "vendor.example/gpu", "--count", "4", "--numa-nodes", "2"]).await;
    n.wait_resource("vendor.example/gpu", "up", |r| r["allocatable"] == 4).await;
    n.pod("one.yaml", &pod_yaml("one", "vendor.example/gpu", 1));
    n.wait_pod("one").await;
    // one device left on node 0, two on node 1: a 2-device pod must land on node 1
    n.pod("two.yaml", &pod_yaml("two", "vendor.example/gpu", 2));
    let p = n.wait_pod("two").await;
    assert_eq!(containers_devices(&p, "main", "vendor.example/gpu"), ["gpu-2", "gpu-3"]);
    n.pod("three.yaml", &pod_yaml("three", "vendor.example/gpu", 1));
    n.wait_pod("three").await;
    std::fs::remove_file(n.pods().join("one.yaml")).unwrap();
    std::fs::remove_file(n.pods().join("three.yaml")).unwrap();
    n.wait_resource("vendor.example/gpu", "freed", |r| r["allocated"] == 2).await;
    // 2 free on node 0, none on node 1; asking for 3 cannot fit one node
    n.pod("big.yaml", &pod_yaml("big", "vendor.example/gpu", 3));
    let why = n.wait_rejected("big.yaml").await;
    assert!(why.contains("Requested: 3, Available: 2") || why.contains("Topology locality"), "{why}");
    std::fs::remove_file(n.pods().join("two.yaml")).unwrap();
    n.wait_resource("vendor.example/gpu", "freed", |r| r["allocated"] == 0).await;
    n.pod("big3.yaml", &pod_yaml("big3", "vendor.example/gpu", 3));
    assert_eq!(n.wait_rejected("big3.yaml").await, "Resources cannot be allocated with Topology locality");
    stop_child(sv).await;
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_healthz() {
    let n = Node::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let k = n.start(&["--metrics-addr", &addr, "--grace-period", "500ms"]).await;
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    n.pod("a.yaml", &pod_yaml("a", "vendor.example/foo", 1));
    n.wait_pod("a").await;
    let get = |path: &str| {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    };
    let m = get("/metrics");
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(m.contains("kubelet_device_plugin_registration_total{resource_name=\"vendor.example/foo\"} 1"), "{m}");
    assert!(
        m.contains("kubelet_device_plugin_alloc_duration_seconds_count{resource_name=\"vendor.example/foo\"} 1"),
        "{m}"
    );
    assert!(m.contains("# TYPE kubelet_device_plugin_alloc_duration_seconds histogram"), "{m}");
    assert!(m.contains("dpctl_node_allocatable{resource_name=\"vendor.example/foo\"} 2"), "{m}");
    assert!(m.contains("dpctl_node_allocated{resource_name=\"vendor.example/foo\"} 1"), "{m}");
    assert!(m.contains("dpctl_node_resource_state{resource_name=\"vendor.example/foo\",state=\"running\"} 1"), "{m}");
    assert!(get("/healthz").ends_with("ok"));
    assert!(get("/nope").starts_with("HTTP/1.1 404"));
    // the plugin goes; after the grace period the resource reads 0/0, state removed
    stop_child(sv).await;
    n.wait_resource("vendor.example/foo", "removed", |r| r["state"] == "removed").await;
    let m = get("/metrics");
    for line in [
        "dpctl_node_capacity{resource_name=\"vendor.example/foo\"} 0",
        "dpctl_node_allocatable{resource_name=\"vendor.example/foo\"} 0",
        "dpctl_node_resource_state{resource_name=\"vendor.example/foo\",state=\"removed\"} 1",
    ] {
        assert!(m.contains(line), "{line}: {m}");
    }
    stop_child(k).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_shows_an_admitted_pod_and_cleans_up() {
    let r = dpctl(&["demo", "--once"]).await;
    r.expect_code(0);
    let o = &r.stdout;
    let dir =
        o.split_whitespace().find(|w| w.contains("dpctl-demo-")).unwrap().trim_end_matches(['.', ',']).to_string();
    assert!(
        o.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["example.com/gpu", "4", "4", "2", "running"]),
        "{o}"
    );
    assert!(
        o.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["demo-trainer", "trainer", "example.com/gpu", "gpu-0,gpu-1", "0"]),
        "{o}"
    );
    assert!(o.contains("env  GPU_VISIBLE_DEVICES=gpu-0,gpu-1") && o.contains("cdi  example.com/gpu=gpu-1"), "{o}");
    for cmd in
        ["dpctl watch gpu.sock", "dpctl podresources list", "dpctl device set-health gpu-0 Unhealthy", "kill -HUP"]
    {
        assert!(o.contains(cmd), "missing {cmd}: {o}");
    }
    assert!(!std::path::Path::new(&dir).exists(), "{dir} removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_snapshots_are_refused_with_the_receive_limit() {
    let n = Node::new();
    let k = n.start(&["--max-recv-size", "2Ki"]).await;
    let sv = n.serve(&["--resource", "vendor.example/big", "--count", "200"]).await;
    let r = n.wait_resource("vendor.example/big", "stream refused", |r| r["state"] == "stopped").await;
    assert_eq!(r["allocatable"], 0);
    stop_child(sv).await;
    let out = stop_child(k).await;
    let line = out.stdout.lines().find(|l| l.contains("stream-ended")).unwrap().to_string();
    assert!(line.contains("receive limit"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_every_restarts_on_a_schedule() {
    let n = Node::new();
    let mut k = n.start(&["--restart-every", "700ms"]).await;
    let mut tail = Tail::stdout(&mut k);
    let sv = n.serve(&["--resource", "vendor.example/foo", "--count", "2"]).await;
    n.wait_resource("vendor.example/foo", "up", |r| r["allocatable"] == 2).await;
    tail.wait_for("restarting reason=--restart-every", 2).await;
    tail.wait_for("plugin-back resource=vendor.example/foo", 1).await;
    n.wait_resource("vendor.example/foo", "back", |r| r["allocatable"] == 2).await;
    stop_child(sv).await;
    let out = stop_tailed(k, tail).await;
    assert!(out.stdout.matches("restarting reason=--restart-every").count() >= 2, "{}", out.stdout);
    assert!(out.stdout.contains("plugin-back resource=vendor.example/foo"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_rules_health_strings_empty_answers_and_prestart_failures() {
    let n = Node::new();
    let k = n.start(&[]).await;
    // only the exact string "Healthy" is healthy
    let devs = vec![dev("a-0", "Healthy", None), dev("a-1", "healthy", None), dev("a-2", "HEALTHY", None)];
    let _a = start_plugin(&n.dp().join("a.sock"), devs, Behaviour::default()).await;
    register(&n.kubelet(), req("vendor.example/a", "a.sock")).await.unwrap();
    let r = n.wait_resource("vendor.example/a", "up", |r| r["capacity"] == 3).await;
    assert_eq!(r["allocatable"], 1);
    // an Allocate answer without container responses fails admission
    let _b =
        start_plugin(&n.dp().join("b.sock"), four_devices(), Behaviour { empty_allocate: true, ..Default::default() })
            .await;
    register(&n.kubelet(), req("vendor.example/b", "b.sock")).await.unwrap();
    n.wait_resource("vendor.example/b", "up", |r| r["allocatable"] == 4).await;
    n.pod("b.yaml", &pod_yaml("b", "vendor.example/b", 1));
    let why = n.wait_rejected("b.yaml").await;
    assert_eq!(why, "Allocate failed due to no containers return in allocation response, which is unexpected");
    assert_eq!(n.resource("vendor.example/b").await.unwrap()["allocated"], 0);
    // a failing PreStartContainer fails the container start (the pod keeps its devices, as on a node)
    let sv = n.serve(&["--resource", "vendor.example/c", "--count", "2", "--pre-start", "--pre-start-fail"]).await;
    n.wait_resource("vendor.example/c", "up", |r| r["allocatable"] == 2).await;
    n.pod("c.yaml", &pod_yaml("c", "vendor.example/c", 1));
    n.wait_pod("c").await;
    stop_child(sv).await;
    let out = stop_child(k).await;
    let line =
        out.stdout.lines().find(|l| l.contains("container-start-failed")).unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(line.contains("pod=default/c") && line.contains("injected PreStartContainer failure"), "{line}");
}
