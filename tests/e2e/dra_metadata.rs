//! Device metadata (KEP-5304): `dpctl dra serve --device-metadata` under the
//! mock kubelet writes, mounts (CDI) and removes what the real kubeletplugin
//! helper of the pinned k8s.io/dynamic-resource-allocation writes for the
//! same claim — compared byte for byte with the helper driving
//! tests/upstream/cmd/kubeletplugin, and read back with upstream's
//! consumer-side decoder (tests/upstream/cmd/devicemetadata).

use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const API: &[&str] = &["--api-server", "127.0.0.1:0"];
const DRIVER: &str = "gpu.go.example.com";
const UID: &str = "11111111-2222-3333-4444-555555555555";
/// A claim of two requests (one device each; `two` a firstAvailable one
/// whose subrequest `one` is allocated: five devices cannot be had) and a
/// pod whose first container uses both, its second only `two` (upstream's
/// e2e "must map device metadata to the right containers").
const CLAIM: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: ml\n  uid: 11111111-2222-3333-4444-555555555555\nspec:\n  devices:\n    requests:\n    - name: one\n      exactly:\n        deviceClassName: gpu.go.example.com\n    - name: two\n      firstAvailable:\n      - name: five\n        deviceClassName: gpu.go.example.com\n        count: 5\n      - name: one\n        deviceClassName: gpu.go.example.com\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: ml\n  uid: pod-1\nspec:\n  resourceClaims:\n  - name: g\n    resourceClaimName: gpu\n  containers:\n  - name: all\n    resources:\n      claims:\n      - name: g\n  - name: two-only\n    resources:\n      claims:\n      - name: g\n        request: two\n";

fn events(tail: &Tail, event: &str) -> Vec<Value> {
    tail.seen().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["event"] == event).collect()
}

async fn kubelet(t: &DraTree) -> (tokio::process::Child, Tail) {
    let mut kubelet = mock_kubelet_on(&t.root, API).spawn().unwrap();
    let mut log = Tail::stdout(&mut kubelet);
    log.wait_for("\"event\":\"api-server\"", 1).await;
    (kubelet, log)
}

/// Every file under `dir` (relative path → its text, `root` replaced by `<root>`).
fn files_under(dir: &Path, root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let text = std::fs::read_to_string(&p).unwrap();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, text.replace(&root.display().to_string(), "<root>"));
            }
        }
    }
    out
}

/// The metadata CDI specs in `cdi/` (name → text, root replaced).
fn metadata_specs(t: &DraTree) -> BTreeMap<String, String> {
    files_under(&t.p("cdi"), &t.root).into_iter().filter(|(n, _)| n.contains("_metadata_")).collect()
}

/// What one run shows: the files, the kubelet's CDI IDs for the claim and
/// for each container, upstream's decoder's reading of each file.
#[derive(Debug, PartialEq)]
struct Seen {
    files: BTreeMap<String, String>,
    specs: BTreeMap<String, String>,
    cdi_ids: Value,
    containers: Value,
    decoded: Vec<Value>,
    /// After request `two`'s metadata was updated with network data: the files and their reading.
    updated: Option<(BTreeMap<String, String>, Vec<Value>)>,
}

/// How a run's driver is told to update request `two`'s metadata.
enum Updater {
    /// `dpctl dra device update-metadata` (live control).
    Dpctl,
    /// A `metadata …` line on the helper driver's stdin (UpdateRequestMetadata).
    Helper(tokio::process::ChildStdin),
}

/// The network data both drivers are given.
const NET: (&str, &str, &str) = ("net1", "10.0.0.5/24", "00:11:22:33:44:55");

impl Seen {
    /// With the claim's `name` and `uid` replaced by `<claim>` and `<uid>` everywhere.
    fn renamed(self, name: &str, uid: &str) -> Seen {
        let r = |x: &str| x.replace(uid, "<uid>").replace(name, "<claim>");
        let map = |m: BTreeMap<String, String>| m.into_iter().map(|(k, v)| (r(&k), r(&v))).collect();
        let val = |v: Value| serde_json::from_str(&r(&v.to_string())).unwrap();
        Seen {
            files: map(self.files),
            specs: map(self.specs),
            cdi_ids: val(self.cdi_ids),
            containers: val(self.containers),
            decoded: self.decoded.into_iter().map(val).collect(),
            updated: self.updated.map(|(f, d)| (map(f), d.into_iter().map(val).collect())),
        }
    }
}

/// The metadata files under the driver's plugin directory, read by
/// upstream's decoder (paths relative to the root).
async fn decode(bin: &Path, t: &DraTree) -> Vec<Value> {
    let dir = t.p(&format!("plugins/{DRIVER}/dra-device-metadata"));
    let files: Vec<PathBuf> = files_under(&dir, &t.root).keys().map(|k| dir.join(k)).collect();
    let mut c = tokio::process::Command::new(bin);
    c.args(&files);
    let run = run_cmd(c).await;
    run.expect_code(0);
    run.stdout
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["file"] =
                json!(Path::new(v["file"].as_str().unwrap()).strip_prefix(&t.root).unwrap().display().to_string());
            v
        })
        .collect()
}

/// The pod's containers' CDI devices as `dpctl node` shows them (sorted).
async fn containers(t: &DraTree) -> Value {
    let node = dpctl(&["node", "--plugin-dir", s(&t.p("device-plugins")), "-o", "json"]).await;
    let node: Value = serde_json::from_str(&node.stdout).unwrap();
    let pod = node["draPods"]
        .as_array()
        .or(node["pods"].as_array())
        .into_iter()
        .flatten()
        .find(|p| p["pod"] == "ml/trainer")
        .cloned()
        .unwrap_or_else(|| panic!("no pod ml/trainer in {node}"));
    let mut cdi = pod["cdiDevices"].clone();
    for ids in cdi.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        ids.as_array_mut().unwrap().sort_by_key(|v| v.as_str().unwrap().to_string());
    }
    cdi
}

/// One run on a fresh tree with the driver `spawn` starts: the claim and pod
/// written, prepared, looked at, the pod removed, unprepared; what it saw,
/// and whether every metadata file and spec was gone after the unprepare.
async fn run(
    decoder: Option<&Path>,
    manifests: &[(&str, &str)],
    update: bool,
    spawn: impl FnOnce(&DraTree) -> (tokio::process::Child, Tail, Updater),
) -> (Seen, BTreeMap<String, String>) {
    let t = DraTree::new();
    let (kubelet, mut log) = kubelet(&t).await;
    let (drv, mut out, updater) = spawn(&t);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    for (name, text) in manifests {
        t.write(name, text);
    }
    log.wait_for("\"step\":\"running\"", 1).await;
    let prepared = &events(&log, "claim-prepared")[0];
    assert!(events(&log, "cdi-unresolved").is_empty(), "every CDI ID resolves: {}", log.seen());
    let meta_dir = t.p(&format!("plugins/{DRIVER}/dra-device-metadata"));
    let mut seen = Seen {
        files: files_under(&meta_dir, &t.root),
        specs: metadata_specs(&t),
        cdi_ids: prepared["cdiIds"].clone(),
        containers: containers(&t).await,
        decoded: match decoder {
            Some(b) => decode(b, &t).await,
            None => vec![],
        },
        updated: None,
    };
    if update {
        let (ns, name) = prepared["claim"].as_str().unwrap().split_once('/').unwrap();
        let (iface, ip, mac) = NET;
        match updater {
            Updater::Dpctl => {
                let root = t.root.display().to_string();
                let claim = format!("{ns}/{name}");
                dpctl(&["--kubelet-root-dir", &root, "dra", "device", "update-metadata", &claim, "two"])
                    .await
                    .expect_code(2);
                let args = ["--interface", iface, "--ip", ip, "--hardware-address", mac];
                let mut cmd = vec!["--kubelet-root-dir", &root, "dra", "device", "update-metadata", &claim, "two"];
                cmd.extend(args);
                dpctl(&cmd).await.expect_code(0);
            }
            Updater::Helper(mut stdin) => {
                use tokio::io::AsyncWriteExt;
                let uid = prepared["uid"].as_str().unwrap();
                let line = format!("metadata {ns} {name} {uid} two {iface} {ip} {mac}\n");
                stdin.write_all(line.as_bytes()).await.unwrap();
                out.wait_for("\"event\":\"metadata-updated\"", 1).await;
            }
        }
        let decoded = match decoder {
            Some(b) => decode(b, &t).await,
            None => vec![],
        };
        seen.updated = Some((files_under(&meta_dir, &t.root), decoded));
    }
    // A claim made from a template has a name and UID of its own in each run.
    let (_, name) = prepared["claim"].as_str().unwrap().split_once('/').unwrap();
    let seen = if name == "gpu" { seen } else { seen.renamed(name, prepared["uid"].as_str().unwrap()) };
    std::fs::remove_file(t.p("manifests/pod.yaml")).unwrap();
    log.wait_for("\"event\":\"claim-unprepared\"", 1).await;
    let mut left = files_under(&meta_dir, &t.root);
    left.extend(metadata_specs(&t));
    sigterm(&drv);
    stop_child(drv).await;
    stop_tailed(kubelet, log).await.expect_code(0);
    (seen, left)
}

/// The driver on upstream's kubeletplugin helper, devices named as dpctl's
/// (`dev-0`, `dev-1`), device metadata in `versions`.
fn helper_driver(bin: &Path, t: &DraTree, versions: &str) -> (tokio::process::Child, Tail, Updater) {
    let mut c = tokio::process::Command::new(bin);
    c.args(["-kubeconfig", s(&t.p("kubeconfig")), "-node", "dpctl-node", "-driver", DRIVER])
        .args(["-root", s(&t.root), "-cdi-dir", s(&t.p("cdi"))])
        .args(["-device-prefix", "dev-", "-device-metadata", versions])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    let stdin = child.stdin.take().unwrap();
    (child, tail, Updater::Helper(stdin))
}

fn dpctl_driver(t: &DraTree, extra: &[&str]) -> (tokio::process::Child, Tail, Updater) {
    let mut c = dra_serve_publishing(&t.root, DRIVER, &t.p("kubeconfig"), "dpctl-node");
    c.args(["--pool", "dpctl-node", "--devices", "2"]).args(extra).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let tail = Tail::stdout(&mut child);
    (child, tail, Updater::Dpctl)
}

/// The same claim and pod prepared by `dra serve --device-metadata=v1beta1,v1alpha1`
/// and by a driver on upstream's kubeletplugin helper with
/// `EnableDeviceMetadata(true, {v1beta1, v1alpha1})`: the metadata files
/// (one per request, a stream of both versions) and the CDI specs that
/// mount them are the same bytes, the same CDI IDs reach the same
/// containers (the first container both requests' files, the second only
/// `two`'s), upstream's decoder reads the same objects from both and finds
/// them valid (v1beta1 first; a 1.36 consumer gets v1alpha1), and the
/// unprepare leaves nothing of either behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_metadata_is_the_kubeletplugin_helpers_byte_for_byte() {
    let (Some(helper), Some(decoder)) = (upstream_peer("kubeletplugin"), upstream_peer("devicemetadata")) else {
        return;
    };
    let (ours, left) = run(Some(&decoder), &[("claim.yaml", CLAIM), ("pod.yaml", POD)], true, |t| {
        dpctl_driver(t, &["--device-metadata=v1beta1,v1alpha1"])
    })
    .await;
    assert!(left.is_empty(), "unprepare removed dpctl's metadata: {left:?}");
    let (theirs, left) = run(Some(&decoder), &[("claim.yaml", CLAIM), ("pod.yaml", POD)], true, |t| {
        helper_driver(&helper, t, "v1beta1,v1alpha1")
    })
    .await;
    assert!(left.is_empty(), "unprepare removed the helper's metadata: {left:?}");

    // What upstream writes, as read here: two files, both versions, the mount.
    assert_eq!(
        theirs.files.keys().collect::<Vec<_>>(),
        ["ml_gpu/one/metadata.json", "ml_gpu/two/metadata.json"],
        "{theirs:#?}"
    );
    // A subrequest's devices: under its request's path, named with the subrequest inside.
    assert!(theirs.files["ml_gpu/two/metadata.json"].contains("\"name\": \"two/one\""), "{theirs:#?}");
    let one = &theirs.files["ml_gpu/one/metadata.json"];
    let beta = one.find("metadata.resource.k8s.io/v1beta1").unwrap();
    assert!(beta < one.find("metadata.resource.k8s.io/v1alpha1").unwrap(), "{one}");
    let spec = &theirs.specs[&format!("{DRIVER}_metadata_{UID}_two.json")];
    assert!(
        spec.contains(&format!(
            "\"containerPath\": \"/var/run/kubernetes.io/dra-device-attributes/resourceclaims/gpu/two/{DRIVER}-metadata.json\""
        )),
        "{spec}"
    );
    assert_eq!(
        theirs.containers["two-only"],
        json!([format!("{DRIVER}/metadata={UID}_two"), format!("k8s.{DRIVER}/claim={UID}-dev-1")])
    );
    for d in &theirs.decoded {
        assert_eq!(
            (d["gvk"].as_str(), d["validation"].as_str()),
            (Some("metadata.resource.k8s.io/v1beta1, Kind=DeviceMetadata"), Some("")),
            "{d}"
        );
        assert_eq!(d["v1alpha1"]["apiVersion"], "metadata.resource.k8s.io/v1alpha1", "{d}");
    }

    // dpctl's: the same, its own CDI spec per claim apart (named and shaped as dpctl writes it).
    assert_eq!(ours.files, theirs.files);
    assert_eq!(ours.specs, theirs.specs);
    assert_eq!(ours.decoded, theirs.decoded);
    let metadata_ids = |v: &Value| -> Vec<Value> {
        v.as_array().into_iter().flatten().filter(|i| i.as_str().unwrap().contains("/metadata=")).cloned().collect()
    };
    assert_eq!(metadata_ids(&ours.cdi_ids), metadata_ids(&theirs.cdi_ids));
    assert_eq!(metadata_ids(&ours.cdi_ids).len(), 2, "{:?}", ours.cdi_ids);
    for c in ["all", "two-only"] {
        assert_eq!(metadata_ids(&ours.containers[c]), metadata_ids(&theirs.containers[c]), "container {c}");
    }
    assert_eq!(metadata_ids(&ours.containers["two-only"]), [json!(format!("{DRIVER}/metadata={UID}_two"))]);

    // UpdateRequestMetadata: request two's file rewritten at generation 2 with the network data, one's kept.
    let (files, decoded) = theirs.updated.as_ref().unwrap();
    assert_eq!(files["ml_gpu/one/metadata.json"], theirs.files["ml_gpu/one/metadata.json"]);
    let two = decoded.iter().find(|d| d["file"].as_str().unwrap().ends_with("/two/metadata.json")).unwrap();
    assert_eq!((two["metadata"]["generation"].as_i64(), two["validation"].as_str()), (Some(2), Some("")), "{two}");
    assert_eq!(
        two["metadata"]["Requests"][0]["Devices"][0]["NetworkData"],
        json!({"interfaceName": "net1", "ips": ["10.0.0.5/24"], "hardwareAddress": "00:11:22:33:44:55"}),
        "{two}"
    );
    assert_eq!(ours.updated, theirs.updated);
}

const TEMPLATE: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one-gpu, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu.go.example.com}\n";
const TEMPLATE_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: ml, uid: pod-1}\nspec:\n  resourceClaims: [{name: g, resourceClaimTemplateName: one-gpu}]\n  containers: [{name: main, resources: {claims: [{name: g}]}}]\n";

/// A claim made from a template for the pod's claim `g`, prepared by both
/// with v1beta1 only: the same files (`podClaimName: g`, mounted under
/// `resourceclaimtemplates/g/gpu/`), the claim's generated name and UID aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claim_metadata_is_the_kubeletplugin_helpers_too() {
    let (Some(helper), Some(decoder)) = (upstream_peer("kubeletplugin"), upstream_peer("devicemetadata")) else {
        return;
    };
    let manifests = [("template.yaml", TEMPLATE), ("pod.yaml", TEMPLATE_POD)];
    let (ours, left) = run(Some(&decoder), &manifests, false, |t| dpctl_driver(t, &["--device-metadata"])).await;
    assert!(left.is_empty(), "{left:?}");
    let (theirs, left) = run(Some(&decoder), &manifests, false, |t| helper_driver(&helper, t, "v1beta1")).await;
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(theirs.files.keys().collect::<Vec<_>>(), ["ml_<claim>/gpu/metadata.json"], "{theirs:#?}");
    assert!(theirs.files["ml_<claim>/gpu/metadata.json"].contains("\"podClaimName\": \"g\""), "{theirs:#?}");
    assert!(
        theirs.specs.values().all(|s| s.contains("/dra-device-attributes/resourceclaimtemplates/g/gpu/")),
        "{theirs:#?}"
    );
    assert_eq!(theirs.decoded[0]["metadata"]["PodClaimName"], "g");
    assert_eq!(ours.files, theirs.files);
    assert_eq!(ours.specs, theirs.specs);
    assert_eq!(ours.decoded, theirs.decoded);
}

/// Without `--device-metadata` (the default, as the helper without
/// EnableDeviceMetadata) nothing is written and no metadata CDI ID reaches
/// a container; with it and a claim from a template, the file is mounted
/// under `resourceclaimtemplates/<pod claim name>` and carries
/// `podClaimName` (the claim's pod-claim-name annotation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_metadata_is_off_by_default_and_template_claims_use_the_pod_claim_name() {
    let (off, left) = run(None, &[("claim.yaml", CLAIM), ("pod.yaml", POD)], false, |t| dpctl_driver(t, &[])).await;
    assert!(off.files.is_empty() && off.specs.is_empty() && left.is_empty(), "{off:#?}");
    assert!(!off.cdi_ids.to_string().contains("/metadata="), "{off:#?}");
    assert!(!off.containers.to_string().contains("/metadata="), "{off:#?}");

    let t = DraTree::new();
    let (kubelet, mut log) = kubelet(&t).await;
    let (drv, mut out, _) = dpctl_driver(&t, &["--device-metadata"]);
    log.wait_for("\"event\":\"dra-registered\"", 1).await;
    t.write(
        "template.yaml",
        &format!("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: one-gpu, namespace: ml}}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {{deviceClassName: {DRIVER}}}\n"),
    );
    t.write(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: ml, uid: pod-1}\nspec:\n  resourceClaims: [{name: g, resourceClaimTemplateName: one-gpu}]\n  containers: [{name: main, resources: {claims: [{name: g}]}}]\n",
    );
    log.wait_for("\"step\":\"running\"", 1).await;
    out.wait_for("\"event\":\"device-metadata\"", 1).await;
    let prepared = &events(&log, "claim-prepared")[0];
    let (ns, name) = prepared["claim"].as_str().unwrap().split_once('/').unwrap();
    let uid = prepared["uid"].as_str().unwrap();
    let file = t.p(&format!("plugins/{DRIVER}/dra-device-metadata/{ns}_{name}/gpu/metadata.json"));
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["apiVersion"], "metadata.resource.k8s.io/v1beta1", "{text}");
    assert_eq!(doc["podClaimName"], "g", "{text}");
    assert_eq!((doc["metadata"]["name"].as_str(), doc["metadata"]["uid"].as_str()), (Some(name), Some(uid)));
    assert_eq!(doc["requests"][0]["devices"][0]["attributes"]["driverName"]["string"], DRIVER, "{text}");
    let id = format!("{DRIVER}/metadata={uid}_gpu");
    assert!(prepared["cdiIds"].as_array().unwrap().contains(&json!(id)), "{prepared}");
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(t.p(&format!("cdi/{DRIVER}_metadata_{uid}_gpu.json"))).unwrap())
            .unwrap();
    let mount = &spec["devices"][0]["containerEdits"]["mounts"][0];
    assert_eq!(
        mount["containerPath"],
        format!("/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/g/gpu/{DRIVER}-metadata.json")
    );
    assert_eq!(mount["hostPath"], s(&file));
    assert_eq!(mount["options"], json!(["ro", "bind"]));
    if let Some(decoder) = upstream_peer("devicemetadata") {
        let mut c = tokio::process::Command::new(decoder);
        c.arg(&file);
        let r = run_cmd(c).await;
        r.expect_code(0);
        let d: Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!((d["validation"].as_str(), d["metadata"]["PodClaimName"].as_str()), (Some(""), Some("g")), "{d}");
    }
    // An update names a prepared claim and one of its requests.
    let root = t.root.display().to_string();
    let this = format!("{ns}/{name}");
    for (claim, request, want) in [
        ("ml/nope", "gpu", "no prepared claim \"ml/nope\""),
        (this.as_str(), "nope", "request \"nope\" not found in prepared claim"),
    ] {
        let r = dpctl(&[
            "--kubelet-root-dir",
            &root,
            "dra",
            "device",
            "update-metadata",
            claim,
            request,
            "--interface",
            "net1",
        ])
        .await;
        assert!(r.code == 1 && r.stderr.contains(want), "{claim} {request}: {}", r.stderr);
    }
    std::fs::remove_file(t.p("manifests/pod.yaml")).unwrap();
    log.wait_for("\"event\":\"claim-unprepared\"", 1).await;
    out.wait_for("\"event\":\"unprepare\"", 1).await;
    assert!(!file.exists() && !t.p(&format!("plugins/{DRIVER}/dra-device-metadata/{ns}_{name}")).exists());
    assert!(metadata_specs(&t).is_empty());
    sigterm(&drv);
    stop_child(drv).await;
    stop_tailed(kubelet, log).await.expect_code(0);
}

/// `--device-metadata` is refused without v1beta1 (as the helper's Start)
/// and without an API server to fetch the claims from, in one line each.
#[tokio::test]
async fn device_metadata_refuses_what_the_helper_refuses() {
    let t = DraTree::new();
    for (args, want) in [
        (vec!["--device-metadata=v1alpha1"], "the latest metadata version is metadata.resource.k8s.io/v1beta1"),
        (vec!["--device-metadata=v2"], "metadata version \"v2\" is not supported"),
    ] {
        let mut c = dra_serve_publishing(&t.root, DRIVER, &t.p("no-kubeconfig"), "dpctl-node");
        c.args(&args);
        let r = run_cmd(c).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let root = t.root.display().to_string();
    let mut c = dpctl_cmd(&["--kubelet-root-dir", &root, "dra", "serve", "--driver", DRIVER, "--device-metadata"]);
    c.env_remove("KUBECONFIG");
    let r = run_cmd(c).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--device-metadata: the metadata of a request is written from the ResourceClaim"),
        "{}",
        r.stderr
    );
}

/// `dpctl demo --dra --device-metadata --once`: the claim's metadata CDI ID
/// in PodResources, the file on the host and where it is mounted, and the
/// v1beta1 object in it; plain `--dra` shows none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_dra_with_device_metadata_shows_the_file_and_its_mount() {
    let r = run_cmd_within(dpctl_cmd(&["demo", "--dra", "--device-metadata", "--once"]), 60).await;
    r.expect_code(0);
    let out = &r.stdout;
    let row = out.lines().find(|l| l.trim_start().starts_with("demo-trainer")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains(",gpu.example.com/metadata="), "the metadata CDI ID after the device's: {row}");
    let line = |key: &str| -> String {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .unwrap_or_else(|| panic!("{key}: {out}"))
            .trim()
            .to_string()
    };
    assert!(
        line("on host").ends_with("/plugins/gpu.example.com/dra-device-metadata/default_demo-gpu/gpu/metadata.json"),
        "{out}"
    );
    assert_eq!(
        line("container"),
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/demo-gpu/gpu/gpu.example.com-metadata.json"
    );
    assert!(line("CDI ID").starts_with("gpu.example.com/metadata=") && line("CDI ID").ends_with("_gpu"), "{out}");
    assert!(out.contains("\"apiVersion\": \"metadata.resource.k8s.io/v1beta1\""), "{out}");
    assert!(out.contains("Run `dpctl demo --dra --device-metadata` (without --once)"), "{out}");

    let plain = run_cmd_within(dpctl_cmd(&["demo", "--dra", "--once"]), 60).await;
    plain.expect_code(0);
    assert!(!plain.stdout.contains("metadata="), "{}", plain.stdout);
    let refused = run_cmd_within(dpctl_cmd(&["demo", "--device-metadata", "--once"]), 60).await;
    assert_eq!(refused.code, 2, "--device-metadata needs --dra: {}", refused.stderr);
}
