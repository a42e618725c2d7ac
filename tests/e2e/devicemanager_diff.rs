//! The device-manager differential (issue 45): upstream's kubelet device
//! manager (`k8s.io/kubernetes` `pkg/kubelet/cm/devicemanager`, driven in
//! process by `tests/upstream/cmd/devicemanager`) against dpctl's
//! (`dpctl::kubelet::node::Node`, in process), each with its own instance of
//! the same real plugin program (`dpctl serve` with the same flags) on its own
//! plugin directory, through the same sequence of steps: plugins started and
//! stopped, pods admitted (init, restartable init and app containers) and
//! removed, the kubelet restarted from its checkpoint.
//!
//! Compared after every step: the admission result (reason and message),
//! capacity and allocatable per resource, and the checkpoint: the same
//! allocations (pod, container, resource, devices per NUMA node, the plugin's
//! answer), and each side reads the other's file: upstream's checkpoint
//! manager reads dpctl's (checksum verified) and writes the same data back
//! byte for byte; dpctl confirms upstream's checksum and writes its data back
//! byte for byte; a dpctl node started on upstream's last checkpoint restores
//! its pods.
//!
//! Where upstream is not deterministic the comparison is not exact: the IDs
//! sent to Allocate come from a Go map (`manager.go`, allocateContainerResources:
//! `devs := allocDevices.UnsortedList()`), so a plugin answer echoing them
//! (`E=dev-1,dev-0`) is compared with the comma-separated IDs as a set, and
//! the entries and ID lists of a checkpoint as sets. The scenarios keep
//! device choice deterministic: the plugin answers GetPreferredAllocation,
//! or a container takes every device it may choose from (devices reused from
//! an init container are taken without asking the plugin, in map order:
//! `allocateRemainingFrom(reusableDevices)`).
//!
//! A divergence prints the scenario and both sides' answers and writes the
//! scenario to `tests/upstream/regressions/devicemanager/`, whose files always
//! run. Without the oracle built the test returns at once (the run ends with a
//! note; under CI `upstream::upstream_peers_are_built_when_required` fails).

use crate::support::*;
use dpctl::client::checkpoint;
use dpctl::core::log::{LogFormat, Logger};
use dpctl::kubelet::event::EventBus;
use dpctl::kubelet::node::{Node, NodeSpec};
use dpctl::kubelet::tree::NodeTree;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a plugin may take to (re)register and send its devices.
const PLUGIN_WAIT: Duration = Duration::from_secs(20);
/// How long the oracle may take for one scenario.
const ORACLE_WAIT: Duration = Duration::from_secs(120);

const DEV: &str = "example.com/dev";
const NIC: &str = "example.com/nic";

/// `dpctl serve` for `resource`: devices spread over two NUMA nodes, the
/// plugin answering with an env, an annotation, a mount, a device node and a
/// CDI device per device, so every field of the answer is compared.
fn serve(resource: &str, count: u32, extra: &[&str]) -> Value {
    let mut argv: Vec<String> = [
        "serve",
        "--resource",
        resource,
        "--count",
        &count.to_string(),
        "--numa-nodes",
        "2",
        "--env",
        "E={ids}",
        "--annotation",
        "a={ids}",
        "--mount",
        "/h:/c:ro",
        "--device-spec",
        "/dev/d{i}:/dev/d{i}:rw",
        "--cdi",
        "example.com/dev={id}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(extra.iter().map(|s| s.to_string()));
    json!(argv)
}

/// Wait until the resource has this capacity and allocatable and the
/// checkpoint file records its allocatable devices: the kubelet writes it
/// after every device update (manager.go, genericDeviceUpdateCallback), so
/// both sides' files are compared once written.
fn expect(resource: &str, capacity: u32, allocatable: u32) -> Value {
    json!({"resource": resource, "capacity": capacity, "allocatable": allocatable, "written": true})
}

/// As [`expect`] without waiting for the file: a plugin's stream ending
/// writes nothing (PluginDisconnected, markResourceUnhealthy).
fn expect_unwritten(resource: &str, capacity: u32, allocatable: u32) -> Value {
    json!({"resource": resource, "capacity": capacity, "allocatable": allocatable})
}

fn container(name: &str, limits: &[(&str, u32)]) -> Value {
    let limits: serde_json::Map<String, Value> =
        limits.iter().map(|(r, n)| (r.to_string(), Value::String(n.to_string()))).collect();
    json!({"name": name, "image": "x", "resources": {"limits": limits}})
}

fn sidecar(name: &str, limits: &[(&str, u32)]) -> Value {
    let mut c = container(name, limits);
    c["restartPolicy"] = json!("Always");
    c
}

fn pod(uid: &str, init: Vec<Value>, containers: Vec<Value>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"initContainers": init, "containers": containers}
    })
}

fn admit(p: Value) -> Value {
    json!({"admit": p})
}

/// The hand-written scenarios: each case of the device manager once.
fn scenarios() -> Vec<Value> {
    let pref = |n| serve(DEV, n, &["--preferred-allocation"]);
    let started = |n| json!({"start": "p", "expect": expect(DEV, n, n)});
    vec![
        json!({"name": "preferred-allocation-until-full", "numa": [0, 1], "plugins": {"p": pref(4)}, "steps": [
            started(4),
            admit(pod("a", vec![], vec![container("c", &[(DEV, 2)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 1)]), container("d", &[(DEV, 1)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 1)])])),
        ]}),
        json!({"name": "all-available-without-preferred-allocation", "numa": [0, 1],
               "plugins": {"p": serve(DEV, 2, &[])}, "steps": [
            started(2),
            admit(pod("a", vec![], vec![container("c", &[(DEV, 2)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 1)])])),
        ]}),
        json!({"name": "init-container-devices-reused", "numa": [0, 1], "plugins": {"p": pref(6)}, "steps": [
            started(6),
            // c takes both of i's devices (all it may choose from), d gets a new one
            admit(pod("a", vec![container("i", &[(DEV, 2)])],
                      vec![container("c", &[(DEV, 2)]), container("d", &[(DEV, 1)])])),
            admit(pod("b", vec![container("i", &[(DEV, 3)])], vec![container("c", &[(DEV, 3)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 1)])])),
        ]}),
        json!({"name": "restartable-init-container-keeps-its-devices", "numa": [0, 1], "plugins": {"p": pref(6)},
               "steps": [
            started(6),
            admit(pod("a", vec![sidecar("s", &[(DEV, 1)]), container("i", &[(DEV, 2)])],
                      vec![container("c", &[(DEV, 2)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 3)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 3)])])),
        ]}),
        json!({"name": "unhealthy-devices", "numa": [0, 1],
               "plugins": {"p": serve(DEV, 4, &["--preferred-allocation", "--unhealthy", "dev-0,dev-3"]),
                           "q": serve(NIC, 1, &["--unhealthy", "nic-0"])},
               "steps": [
            {"start": "p", "expect": expect(DEV, 4, 2)},
            {"start": "q", "expect": expect(NIC, 1, 0)},
            admit(pod("a", vec![], vec![container("c", &[(DEV, 3)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 2)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 1)])])),
            admit(pod("d", vec![], vec![container("c", &[(NIC, 1)])])),
        ]}),
        json!({"name": "two-resources-in-one-container", "numa": [0, 1],
               "plugins": {"p": pref(4), "q": serve(NIC, 2, &["--preferred-allocation"])},
               "steps": [
            started(4),
            {"start": "q", "expect": expect(NIC, 2, 2)},
            admit(pod("a", vec![], vec![container("c", &[(DEV, 2), (NIC, 1)]), container("d", &[(NIC, 1)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 1), (NIC, 1)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 2)])])),
        ]}),
        json!({"name": "removed-pod-frees-its-devices", "numa": [0, 1], "plugins": {"p": pref(3)}, "steps": [
            started(3),
            admit(pod("a", vec![], vec![container("c", &[(DEV, 3)])])),
            admit(pod("b", vec![], vec![container("c", &[(DEV, 1)])])),
            {"remove": "a"},
            admit(pod("c", vec![], vec![container("c", &[(DEV, 2)])])),
        ]}),
        json!({"name": "plugin-stopped-then-restarted", "numa": [0, 1], "plugins": {"p": pref(4)}, "steps": [
            started(4),
            admit(pod("a", vec![], vec![container("c", &[(DEV, 2)])])),
            {"stop": "p", "expect": expect_unwritten(DEV, 4, 0)},
            admit(pod("b", vec![], vec![container("c", &[(DEV, 1)])])),
            {"start": "p", "expect": expect(DEV, 4, 4)},
            admit(pod("c", vec![], vec![container("c", &[(DEV, 2)])])),
            admit(pod("d", vec![], vec![container("c", &[(DEV, 1)])])),
        ]}),
        json!({"name": "kubelet-restart-from-the-checkpoint", "numa": [0, 1], "plugins": {"p": pref(4)}, "steps": [
            started(4),
            admit(pod("a", vec![container("i", &[(DEV, 1)])], vec![container("c", &[(DEV, 2)])])),
            {"restart": true, "expect": expect(DEV, 4, 4)},
            admit(pod("b", vec![], vec![container("c", &[(DEV, 2)])])),
            admit(pod("c", vec![], vec![container("c", &[(DEV, 1)])])),
        ]}),
    ]
}

/// One step as a side saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    /// Admission: the pod status reason and message ("" when admitted).
    reason: String,
    message: String,
    /// resource → (capacity, allocatable).
    resources: BTreeMap<String, (i64, i64)>,
    /// The checkpoint file ("" when there is none).
    checkpoint: String,
}

/// A checkpoint's content with upstream's map order taken out: entries
/// sorted, ID lists sorted, each plugin answer decoded with its lists and
/// comma-separated ID lists sorted.
fn canonical(text: &str) -> Result<Value, String> {
    if text.is_empty() {
        return Ok(Value::Null);
    }
    let l = checkpoint::parse(text, Path::new("checkpoint")).map_err(|e| e.to_string())?;
    let mut entries: Vec<Value> = Vec::new();
    for e in &l.checkpoint.data.pod_device_entries {
        let resp = e.decode_alloc_resp().map_err(|e| e.to_string())?;
        let resp = serde_json::to_value(&resp).map_err(|e| e.to_string())?;
        let numa: BTreeMap<&String, Vec<String>> = e
            .device_ids
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                v.sort();
                (k, v)
            })
            .collect();
        entries.push(json!({"pod": e.pod_uid, "container": e.container_name, "resource": e.resource_name,
                            "devices": numa, "answer": sets(resp)}));
    }
    entries.sort_by_key(|e| e.to_string());
    let registered: BTreeMap<&String, Vec<String>> = l
        .checkpoint
        .data
        .registered_devices
        .iter()
        .map(|(k, v)| {
            let mut v = v.clone();
            v.sort();
            (k, v)
        })
        .collect();
    Ok(json!({"entries": entries, "registered": registered}))
}

/// Lists sorted, comma-separated strings sorted by item.
fn sets(v: Value) -> Value {
    match v {
        Value::Array(a) => {
            let mut a: Vec<Value> = a.into_iter().map(sets).collect();
            a.sort_by_key(|x| x.to_string());
            Value::Array(a)
        }
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, sets(v))).collect()),
        Value::String(s) if s.contains(',') => {
            let mut parts: Vec<&str> = s.split(',').collect();
            parts.sort_unstable();
            Value::String(parts.join(","))
        }
        other => other,
    }
}

/// A container asking for several resources none of which it can get:
/// upstream reports the first it tries, in Go map order
/// (allocateContainerResources ranges over `container.Resources.Limits`),
/// so either resource's "unavailable" is upstream's answer.
fn either_resource(step: &Value, u: &Seen, d: &Seen) -> bool {
    const UNAVAILABLE: &str = "Allocate failed due to requested number of devices unavailable for ";
    let several = step["admit"]["spec"]
        .as_object()
        .into_iter()
        .flat_map(|s| ["initContainers", "containers"].map(|k| s.get(k)))
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .any(|c| c["resources"]["limits"].as_object().is_some_and(|l| l.len() > 1));
    several && u.reason == d.reason && u.message.starts_with(UNAVAILABLE) && d.message.starts_with(UNAVAILABLE)
}

/// Upstream's answers: one JSON line per step.
async fn oracle(bin: &Path, sc: &Value, dir: &Path) -> Result<Vec<Seen>, String> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(bin)
        .args(["-dpctl", env!("CARGO_BIN_EXE_dpctl"), "-dir"])
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the oracle {}: {e}", bin.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(sc.to_string().as_bytes()).await.map_err(|e| e.to_string())?;
    drop(stdin);
    let out = tokio::time::timeout(ORACLE_WAIT, child.wait_with_output())
        .await
        .map_err(|_| format!("the oracle took over {ORACLE_WAIT:?}"))?
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("the oracle failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    let mut seen = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("oracle line {line}: {e}"))?;
        let resources = v["resources"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, r)| (k.clone(), (r["capacity"].as_i64().unwrap_or(-1), r["allocatable"].as_i64().unwrap_or(-1))))
            .collect();
        seen.push(Seen {
            reason: v["reason"].as_str().unwrap_or_default().to_string(),
            message: v["message"].as_str().unwrap_or_default().to_string(),
            resources,
            checkpoint: v["checkpoint"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(seen)
}

/// resource → (capacity, allocatable) as dpctl's node shows it.
async fn resources(node: &Node) -> BTreeMap<String, (i64, i64)> {
    let Some(st) = node.status().await else { return BTreeMap::new() };
    st.resources
        .iter()
        .filter_map(|r| {
            let name = r["resource"].as_str()?.to_string();
            Some((name, (r["capacity"].as_i64().unwrap_or(-1), r["allocatable"].as_i64().unwrap_or(-1))))
        })
        .collect()
}

/// How many devices of `res` the checkpoint file records.
fn recorded(file: &Path, res: &str) -> Option<i64> {
    let text = std::fs::read_to_string(file).ok()?;
    let l = checkpoint::parse(&text, file).ok()?;
    l.checkpoint.data.registered_devices.get(res).map(|ids| ids.len() as i64)
}

/// Wait until the resource is as `e` says; with `written`, until the
/// checkpoint, brought up to date with the state, records the allocatable
/// devices.
async fn wait_expect(node: &Node, e: &Value, file: &Path) -> Result<(), String> {
    let res = e["resource"].as_str().unwrap_or_default();
    let want = (e["capacity"].as_i64().unwrap_or(-1), e["allocatable"].as_i64());
    let deadline = Instant::now() + PLUGIN_WAIT;
    loop {
        let now = resources(node).await;
        if let Some((c, a)) = now.get(res) {
            // The file as of now: the content of an older write (the one
            // before a plugin stopped, say) must not pass for this step's.
            if e["written"] == true {
                node.write_checkpoint().await.map_err(|e| e.to_string())?;
            }
            let written = e["written"] != true || recorded(file, res) == Some(*a);
            if *c == want.0 && want.1.is_none_or(|w| w == *a) && written {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{e} not reached in {PLUGIN_WAIT:?}: {now:?}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A plugin process of the scenario on `dir`.
fn plugin(argv: &Value, name: &str, dir: &Path) -> Result<tokio::process::Child, String> {
    let mut args: Vec<String> =
        argv.as_array().ok_or("plugin argv")?.iter().filter_map(|a| a.as_str().map(String::from)).collect();
    args.extend(["--plugin-dir".into(), dir.display().to_string(), "--socket-name".into(), format!("{name}.sock")]);
    let mut c = dpctl_cmd(&[]);
    c.args(&args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    c.spawn().map_err(|e| e.to_string())
}

/// dpctl's answers, step by step, on a node in `root`.
async fn dpctl_side(sc: &Value, root: &Path) -> Result<Vec<Seen>, String> {
    let tree = NodeTree::under(root);
    tree.create().map_err(|e| e.to_string())?;
    let mut spec = NodeSpec::on_tree(&tree);
    spec.pods_api_socket = None;
    spec.manifests = None;
    spec.plugins_registry_dir = None;
    spec.dra = None;
    let bus = EventBus::new(Logger::to_file(LogFormat::Json, &root.join("k.log")).map_err(|e| e.to_string())?);
    let node = Node::start(spec, bus).await.map_err(|e| e.to_string())?;
    let r = steps(sc, &node, &tree).await;
    node.stop().await;
    r
}

async fn steps(sc: &Value, node: &Node, tree: &NodeTree) -> Result<Vec<Seen>, String> {
    let mut plugins: BTreeMap<String, tokio::process::Child> = BTreeMap::new();
    let mut seen = Vec::new();
    for (i, st) in sc["steps"].as_array().ok_or("steps")?.iter().enumerate() {
        let (mut reason, mut message) = (String::new(), String::new());
        if let Some(p) = st["start"].as_str() {
            plugins.insert(p.into(), plugin(&sc["plugins"][p], p, &tree.plugin_dir)?);
        } else if let Some(p) = st["stop"].as_str() {
            let child = plugins.remove(p).ok_or(format!("step {i}: {p} is not running"))?;
            stop_child(child).await;
        } else if !st["admit"].is_null() {
            let pod = dpctl::kubelet::manifest::parse(&st["admit"].to_string(), Path::new("pod.json"))
                .map_err(|e| format!("step {i}: {e}"))?;
            if let Err(e) = node.admit(pod).await {
                (reason, message) = (e.reason(), e.to_string());
            }
        } else if let Some(uid) = st["remove"].as_str() {
            node.remove(uid).await;
            // dpctl writes the checkpoint at once, through its writer task
            let file = tree.checkpoint();
            let deadline = Instant::now() + PLUGIN_WAIT;
            while std::fs::read_to_string(&file).is_ok_and(|t| t.contains(&format!("\"PodUID\":\"{uid}\""))) {
                if Instant::now() > deadline {
                    return Err(format!("step {i}: the checkpoint still names {uid}"));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        } else if st["restart"] == true {
            node.restart("differential").await.map_err(|e| format!("step {i}: {e}"))?;
        } else {
            return Err(format!("step {i}: nothing to do: {st}"));
        }
        let also = st["also"].as_array().into_iter().flatten();
        for e in std::iter::once(&st["expect"]).filter(|e| !e.is_null()).chain(also) {
            wait_expect(node, e, &tree.checkpoint()).await.map_err(|e| format!("step {i}: {e}"))?;
        }
        // The kubelet writes inside each update and admission; dpctl's writer
        // is coalesced and runs behind: read its file once it has caught up.
        node.write_checkpoint().await.map_err(|e| format!("step {i}: {e}"))?;
        let checkpoint = std::fs::read_to_string(tree.checkpoint()).unwrap_or_default();
        seen.push(Seen { reason, message, resources: resources(node).await, checkpoint });
    }
    for (_, c) in plugins {
        stop_child(c).await;
    }
    Ok(seen)
}

/// Upstream's checkpoint manager reads `file` (checksum verified) and
/// writes it back.
async fn upstream_reread(bin: &Path, file: &Path) -> Result<String, String> {
    let out = tokio::process::Command::new(bin)
        .arg("-reread")
        .arg(file)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

/// Every difference between the two sides on one scenario.
async fn compare(bin: &Path, sc: &Value) -> Result<Vec<String>, String> {
    let (up_dir, dp_root) = (tmp(), tmp());
    let up = oracle(bin, sc, up_dir.path()).await?;
    let dp = dpctl_side(sc, dp_root.path()).await?;
    let mut diffs = Vec::new();
    if up.len() != dp.len() {
        diffs.push(format!("steps: upstream {} dpctl {}", up.len(), dp.len()));
    }
    let scratch = tmp();
    let mut rejected: Vec<String> = Vec::new();
    for (i, (u, d)) in up.iter().zip(&dp).enumerate() {
        let step = &sc["steps"][i];
        if !u.reason.is_empty() {
            rejected.extend(step["admit"]["metadata"]["uid"].as_str().map(String::from));
        }
        // A removed pod likewise stays in the kubelet's file until its next
        // write (and is restored by a restart before that, then dropped in
        // memory as no longer active).
        rejected.extend(step["remove"].as_str().map(String::from));
        if (&u.reason, &u.message) != (&d.reason, &d.message) && !either_resource(step, u, d) {
            diffs.push(format!(
                "step {i} {step}: admission: upstream {:?} {:?}, dpctl {:?} {:?}",
                u.reason, u.message, d.reason, d.message
            ));
        }
        if u.resources != d.resources {
            diffs.push(format!("step {i}: resources: upstream {:?}, dpctl {:?}", u.resources, d.resources));
        }
        // A removed pod: dpctl writes the checkpoint at once, the kubelet at
        // its next write (UpdateAllocatedDevices writes nothing): a
        // deliberate difference (docs/fidelity.md).
        // A rejected pod: dpctl admits all or nothing; the kubelet keeps the
        // devices of the containers allocated before the failing one in its
        // file until its next write after UpdateAllocatedDevices dropped
        // them (manager.go allocateContainerResources: "we may leave
        // container resources partially allocated"): a deliberate
        // difference, so those entries are left out of upstream's side.
        let mut cu = canonical(&u.checkpoint)?;
        if let Some(entries) = cu["entries"].as_array_mut() {
            entries.retain(|e| !rejected.iter().any(|r| e["pod"] == r.as_str()));
        }
        let cd = canonical(&d.checkpoint)?;
        if cu != cd {
            diffs.push(format!("step {i}: checkpoint:\n  upstream {cu}\n  dpctl    {cd}"));
        }
        // Each reads the other's file, byte for byte.
        if !d.checkpoint.is_empty() {
            let f = scratch.path().join(format!("dpctl-{i}"));
            std::fs::write(&f, &d.checkpoint).map_err(|e| e.to_string())?;
            match upstream_reread(bin, &f).await {
                Ok(back) if back == d.checkpoint => {}
                Ok(back) => diffs.push(format!(
                    "step {i}: upstream writes dpctl's checkpoint back differently:\n  dpctl    {}\n  upstream {back}",
                    d.checkpoint
                )),
                Err(e) => diffs.push(format!("step {i}: upstream cannot read dpctl's checkpoint: {e}")),
            }
        }
        if !u.checkpoint.is_empty() {
            match checkpoint::parse(&u.checkpoint, Path::new("upstream")) {
                Ok(l) if !l.checksum_ours => {
                    diffs.push(format!("step {i}: dpctl does not confirm upstream's checksum"))
                }
                Ok(l) => {
                    let back = checkpoint::encode(&l.checkpoint.data).map_err(|e| e.to_string())?;
                    if back != u.checkpoint.as_bytes() {
                        diffs.push(format!(
                            "step {i}: dpctl writes upstream's checkpoint back differently:\n  upstream {}\n  dpctl    {}",
                            u.checkpoint,
                            String::from_utf8_lossy(&back)
                        ));
                    }
                }
                Err(e) => diffs.push(format!("step {i}: dpctl cannot read upstream's checkpoint: {e}")),
            }
        }
    }
    // dpctl restarts from upstream's last checkpoint: the same allocations.
    if let Some(u) = up.iter().rev().find(|u| !u.checkpoint.is_empty()) {
        let root = tmp();
        let tree = NodeTree::under(root.path());
        tree.create().map_err(|e| e.to_string())?;
        std::fs::write(tree.checkpoint(), &u.checkpoint).map_err(|e| e.to_string())?;
        let mut spec = NodeSpec::on_tree(&tree);
        (spec.pods_api_socket, spec.manifests, spec.plugins_registry_dir, spec.dra) = (None, None, None, None);
        let bus =
            EventBus::new(Logger::to_file(LogFormat::Json, &root.path().join("k.log")).map_err(|e| e.to_string())?);
        let node = Node::start(spec, bus).await.map_err(|e| e.to_string())?;
        let allocated: BTreeMap<String, i64> = node
            .status()
            .await
            .map(|s| s.resources)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| Some((r["resource"].as_str()?.to_string(), r["allocated"].as_i64().unwrap_or(-1))))
            .collect();
        node.stop().await;
        let l = checkpoint::parse(&u.checkpoint, Path::new("upstream")).map_err(|e| e.to_string())?;
        let mut want: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for r in l.checkpoint.data.registered_devices.keys() {
            want.entry(r.clone()).or_default();
        }
        for e in &l.checkpoint.data.pod_device_entries {
            want.entry(e.resource_name.clone()).or_default().extend(e.ids());
        }
        let want: BTreeMap<String, i64> = want.into_iter().map(|(r, ids)| (r, ids.len() as i64)).collect();
        if allocated != want {
            diffs.push(format!(
                "dpctl started on upstream's checkpoint holds {allocated:?} devices per resource, the checkpoint {want:?}"
            ));
        }
        // and writes the same allocations back when it stops
        let mine = std::fs::read_to_string(tree.checkpoint()).unwrap_or_default();
        let (cu, cd) = (canonical(&u.checkpoint)?, canonical(&mine)?);
        if cu["entries"] != cd["entries"] {
            diffs.push(format!(
                "dpctl started on upstream's checkpoint wrote other allocations:\n  upstream {}\n  dpctl    {}",
                cu["entries"], cd["entries"]
            ));
        }
    }
    Ok(diffs)
}

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream/regressions/devicemanager")
}

/// The regression files: every scenario once found diverging.
fn regressions() -> Vec<(PathBuf, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(regressions_dir())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(&f)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_else(|| json!({"name": f.display().to_string(), "unreadable": true}));
            (f, v)
        })
        .collect()
}

/// xorshift64*: the generator's randomness, from the seed alone.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A generated scenario: one or two plugins answering GetPreferredAllocation
/// (some devices unhealthy), then pods admitted and removed, plugin
/// restarts and kubelet restarts. Device choice stays deterministic: a
/// container asks for none of a resource or for at least every device it
/// could reuse from init containers (fewer are taken in Go map order).
fn generated(seed: u64) -> Value {
    let mut rng = Rng::new(seed);
    let mut plugins = serde_json::Map::new();
    let mut res: Vec<(&str, &str, u32, u32)> = Vec::new(); // (plugin, resource, count, healthy)
    for (name, resource, prefix) in [("p", DEV, "dev"), ("q", NIC, "nic")] {
        if name == "q" && rng.chance(50) {
            continue;
        }
        let count = 2 + rng.below(5) as u32;
        let unhealthy: Vec<String> = (0..count).filter(|_| rng.chance(15)).map(|i| format!("{prefix}-{i}")).collect();
        let mut extra = vec!["--preferred-allocation".to_string()];
        if !unhealthy.is_empty() {
            extra.extend(["--unhealthy".to_string(), unhealthy.join(",")]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        plugins.insert(name.into(), serve(resource, count, &extra));
        res.push((name, resource, count, count - unhealthy.len() as u32));
    }
    let mut steps: Vec<Value> =
        res.iter().map(|(p, r, c, h)| json!({"start": p, "expect": expect(r, *c, *h)})).collect();
    let (mut pods, mut admitted) = (0, Vec::<String>::new());
    for _ in 0..3 + rng.below(6) {
        match rng.below(10) {
            0 if !admitted.is_empty() => {
                let uid = admitted.remove(rng.below(admitted.len() as u64) as usize);
                steps.push(json!({"remove": uid}));
            }
            // Kubelet restarts with one plugin only: with two, which plugin's
            // update the files hold when the next step runs is a race on both
            // sides (the kubelet writes from each plugin's stream; see
            // docs/fidelity.md).
            1 if res.len() == 1 => {
                let (r, c, h) = (res[0].1, res[0].2, res[0].3);
                steps.push(json!({"restart": true, "expect": expect(r, c, h)}));
            }
            // A plugin stopped and started again (either of them).
            2 => {
                let (p, r, c, h) = res[rng.below(res.len() as u64) as usize];
                steps.push(json!({"stop": p, "expect": expect_unwritten(r, c, 0)}));
                steps.push(json!({"start": p, "expect": expect(r, c, h)}));
            }
            _ => {
                pods += 1;
                let uid = format!("pod-{pods}");
                let mut reuse: BTreeMap<&str, u32> = BTreeMap::new();
                let mut make = |rng: &mut Rng, name: String, kind: u64| {
                    let mut limits: Vec<(&str, u32)> = Vec::new();
                    for (_, r, _, _) in &res {
                        let mut n = rng.below(4) as u32;
                        let can = reuse.get(r).copied().unwrap_or(0);
                        if n > 0 && n < can {
                            n = can;
                        }
                        if n > 0 {
                            limits.push((r, n));
                            // a plain init container's devices are reusable; others take them
                            reuse.insert(r, if kind == 0 { n } else { 0 });
                        }
                    }
                    match kind {
                        1 => sidecar(&name, &limits),
                        _ => container(&name, &limits),
                    }
                };
                let mut init: Vec<Value> = Vec::new();
                for i in 0..rng.below(3) {
                    let kind = rng.below(2);
                    init.push(make(&mut rng, format!("i{i}"), kind));
                }
                let app: Vec<Value> = (0..1 + rng.below(2)).map(|i| make(&mut rng, format!("c{i}"), 2)).collect();
                steps.push(admit(pod(&uid, init, app)));
                admitted.push(uid);
            }
        }
    }
    json!({"name": format!("generated-{seed}"), "seed": seed, "numa": [0, 1], "plugins": plugins, "steps": steps})
}

/// How many generated scenarios (`DPCTL_DM_SCENARIOS`, default 20) and the
/// first seed (`DPCTL_DIFF_SEED`, default from the clock).
fn generation() -> (u64, u64) {
    let n = std::env::var("DPCTL_DM_SCENARIOS").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    let seed = std::env::var("DPCTL_DIFF_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(1)
    });
    (n, seed)
}

/// The smallest scenario found that still diverges: steps other than the
/// plugins' first start dropped one at a time while it does.
async fn shrink(bin: &Path, sc: &Value) -> Value {
    let mut best = sc.clone();
    let mut i = 0;
    while i < best["steps"].as_array().map_or(0, Vec::len) {
        let mut trial = best.clone();
        let Some(steps) = trial["steps"].as_array_mut() else { break };
        if steps[i]["start"].is_string() && !steps[..i].iter().any(|s| s["start"] == steps[i]["start"]) {
            i += 1;
            continue;
        }
        steps.remove(i);
        if matches!(compare(bin, &trial).await, Ok(d) if !d.is_empty()) {
            best = trial;
        } else {
            i += 1;
        }
    }
    best
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpctls_device_manager_answers_as_upstreams() {
    let Some(bin) = upstream_peer("devicemanager") else { return };
    let mut all: Vec<Value> = scenarios();
    all.extend(regressions().into_iter().map(|(_, v)| v));
    let (n, seed) = generation();
    eprintln!("devicemanager differential: seed {seed}, {n} generated scenarios (DPCTL_DIFF_SEED, DPCTL_DM_SCENARIOS)");
    all.extend((0..n).map(|i| generated(seed.wrapping_add(i))));
    let mut failed = Vec::new();
    for sc in &all {
        let name = sc["name"].as_str().unwrap_or("unnamed").to_string();
        match compare(&bin, sc).await {
            Ok(d) if d.is_empty() => eprintln!("devicemanager differential: {name}: same"),
            Ok(d) => {
                let file = regressions_dir().join(format!("{name}.json"));
                // A generated scenario becomes a regression case, shrunk (the hand-written ones are here).
                if sc.get("seed").is_some() && !file.exists() {
                    let small = shrink(&bin, sc).await;
                    let _ = std::fs::create_dir_all(regressions_dir());
                    let _ = std::fs::write(&file, serde_json::to_string_pretty(&small).unwrap_or_default() + "\n");
                }
                failed.push(format!("{name} ({}):\n{}", file.display(), d.join("\n")));
            }
            Err(e) => failed.push(format!("{name}: could not run: {e}")),
        }
    }
    assert!(failed.is_empty(), "{} of {} scenarios diverge:\n{}", failed.len(), all.len(), failed.join("\n\n"));
}
