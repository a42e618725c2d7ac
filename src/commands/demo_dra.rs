//! `dpctl demo --dra`: in a fresh temp directory, the kubelet engine and a
//! simulated DRA driver (both in this process); a ResourceClaim and a pod
//! using it are dropped in the manifest directory, and the demo shows the
//! claim allocated, prepared (CDI spec written) and visible in PodResources,
//! then prints the commands to poke them; runs until Ctrl-C.

use super::Ctx;
use crate::api::podresources::{pod_resources_lister_client::PodResourcesListerClient, ListPodResourcesRequest};
use crate::client::status::NodeStatus;
use crate::core::log::{LogFormat, Logger};
use crate::core::task::Tasks;
use crate::core::{Error, Result};
use crate::kubelet::event::{EventBus, KubeletEvent, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::{NodeTree, TempNode};
use crate::plugin::dra::{Config, CONTROL_DIR, CONTROL_PREFIX};
use crate::protocol::dra::{DRA_V1, DRA_V1BETA1, HEALTH_V1};
use crate::render::{emit, table};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

const DRIVER: &str = "gpu.example.com";
const CLAIM: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: demo-gpu
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
";
const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: demo-trainer
  namespace: default
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: demo-gpu
  containers:
  - name: trainer
    image: example.com/trainer:latest
    resources:
      claims:
      - name: gpu
";

/// `--shares`: a second claim and pod; each claim asks 4Gi of a device's
/// 8Gi memory, so both get a share of the one shareable device (KEP-5075).
const SHARED_CLAIM: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: NAME
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        capacity:
          requests:
            memory: 4Gi
";
const SHARED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: demo-trainer-2
  namespace: default
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: demo-gpu-2
  containers:
  - name: trainer
    image: example.com/trainer:latest
    resources:
      claims:
      - name: gpu
";

/// What the DRA demo shows besides the claim: `--device-metadata`, `--shares`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Variant {
    /// The driver writes device metadata (KEP-5304).
    pub metadata: bool,
    /// Two claims share one device (consumable capacity, KEP-5075).
    pub shares: bool,
}

/// Wait (at most `secs`) for the first kubelet event `f` accepts; a failed prepare is the error.
async fn wait_for(
    events: &mut mpsc::UnboundedReceiver<Arc<Stamped>>,
    what: &str,
    secs: u64,
    f: impl Fn(&KubeletEvent) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut last = None;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) | Ok(None) => {
                let why = last.map(|e| format!(": {e}")).unwrap_or_default();
                return Err(Error::failed(format!(
                    "demo: {what} did not happen within {secs}s{why}; see the logs in the demo directory"
                )));
            }
            Ok(Some(e)) if f(&e.event) => return Ok(()),
            Ok(Some(e)) => {
                if let KubeletEvent::ClaimPrepareFailed { error, .. } = &e.event {
                    last = Some(error.clone());
                }
            }
        }
    }
}

/// One request's device metadata as the demo shows it: the CDI ID, where
/// the file is on the host and in the container, the file's first object.
struct Metadata {
    cdi_id: String,
    host: String,
    container: String,
    first: String,
}

/// The device-metadata CDI specs in `cdi_dir` and the files they mount (`--device-metadata`).
fn metadata_shown(cdi_dir: &std::path::Path) -> Vec<Metadata> {
    let mut specs: Vec<std::path::PathBuf> = std::fs::read_dir(cdi_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{DRIVER}_metadata_"))))
        .collect();
    specs.sort();
    specs
        .iter()
        .filter_map(|p| {
            let text = crate::core::limits::read_file(p, 1 << 20, "CDI spec").ok()?;
            let spec: serde_json::Value = serde_json::from_str(&text).ok()?;
            let dev = &spec["devices"][0];
            let mount = &dev["containerEdits"]["mounts"][0];
            let host = mount["hostPath"].as_str()?.to_string();
            let stream = crate::core::limits::read_file(std::path::Path::new(&host), 1 << 20, "metadata").ok()?;
            // The stream's first object: it ends at the first line that is "}".
            let first = stream.split_inclusive('\n').take_while(|l| *l != "}\n").collect::<String>() + "}";
            Some(Metadata {
                cdi_id: format!("{}={}", spec["kind"].as_str()?, dev["name"].as_str()?),
                host,
                container: mount["containerPath"].as_str()?.to_string(),
                first,
            })
        })
        .collect()
}

/// Wait (at most 10 s) for the node's API server: the kubeconfig it wrote.
async fn wait_for_kubeconfig(events: &mut mpsc::UnboundedReceiver<Arc<Stamped>>) -> Result<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) | Ok(None) => {
                return Err(Error::failed("demo: the node's API server did not start within 10s"));
            }
            Ok(Some(e)) => {
                if let KubeletEvent::ApiServer { kubeconfig, .. } = &e.event {
                    return Ok(kubeconfig.clone());
                }
            }
        }
    }
}

/// Run the DRA demo, with `variant`'s extras.
pub async fn run(ctx: &Ctx, once: bool, variant: Variant) -> Result<()> {
    let Variant { metadata, shares } = variant;
    let node_dir = TempNode::new("demo-dra")?;
    let tree = node_dir.tree.clone();
    let (kubelet_log, driver_log) = (tree.logs.join("kubelet.log"), tree.logs.join("driver.log"));
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::failed(format!("cannot listen for SIGHUP: {e}")))?;
    let bus = EventBus::new(Logger::to_file(LogFormat::Human, &kubelet_log)?);
    let mut events = bus.subscribe();
    let mut spec = NodeSpec::on_tree(&tree);
    if metadata || shares {
        // The driver writes a request's metadata, and reads a claim's share, from the
        // ResourceClaim it fetches; shareable devices are published: the node's API server.
        spec.api_server = Some(([127, 0, 0, 1], 0).into());
    }
    let node = Node::start(spec, bus).await?;
    let publish = if metadata || shares {
        let kubeconfig = wait_for_kubeconfig(&mut events).await?;
        let api = crate::plugin::dra::slices::load_kubeconfig(std::path::Path::new(&kubeconfig))?;
        Some((api, crate::kubelet::dra::core::NODE_NAME.to_string()))
    } else {
        None
    };
    let plugin_dir = tree.root.join("plugins").join(DRIVER);
    let cfg = Config {
        driver: DRIVER.into(),
        pool: "node-1".into(),
        devices: (0..if shares { 1 } else { 4 }).map(|i| format!("gpu-{i}")).collect(),
        kubelet_root: tree.root.clone(),
        registry_dir: tree.registry_dir.clone(),
        control_socket: plugin_dir.join(CONTROL_DIR).join(format!("{CONTROL_PREFIX}{}.sock", std::process::id())),
        plugin_dir,
        host_root: Default::default(), // a private temp tree
        cdi_dir: tree.cdi_dir(),
        services: vec![DRA_V1.into(), DRA_V1BETA1.into(), HEALTH_V1.into()],
        register: true,
        shared_capacity: if shares {
            vec![crate::plugin::dra::slices::SharedCapacity {
                name: "memory".into(),
                value: "8Gi".into(),
                default: Some("1Gi".into()),
                step: Some("1Gi".into()),
            }]
        } else {
            vec![]
        },
        metadata: if metadata { vec![crate::plugin::dra::metadata::Version::V1beta1] } else { vec![] },
        publish,
        ..Default::default()
    };
    let tasks = Tasks::new();
    let (done_tx, mut done) = watch::channel(None::<String>);
    {
        let log = Logger::to_file(LogFormat::Human, &driver_log)?;
        let stop = tasks.child();
        tasks.spawn_joined(async move {
            let r = crate::plugin::dra::run(cfg, log, stop).await;
            let _ = done_tx.send(Some(r.err().map(|e| e.to_string()).unwrap_or_else(|| "the driver stopped".into())));
        });
    }
    let (claim_file, pod_file) = (tree.manifests.join("demo-gpu.yaml"), tree.manifests.join("demo-trainer.yaml"));
    let work = async {
        wait_for(&mut events, "the driver's registration", 10, |e| matches!(e, KubeletEvent::DraHealth { .. })).await?;
        let mut manifests = vec![(claim_file.clone(), CLAIM.to_string()), (pod_file.clone(), POD.to_string())];
        if shares {
            manifests = vec![
                (claim_file.clone(), SHARED_CLAIM.replace("NAME", "demo-gpu")),
                (pod_file.clone(), POD.to_string()),
                (tree.manifests.join("demo-gpu-2.yaml"), SHARED_CLAIM.replace("NAME", "demo-gpu-2")),
                (tree.manifests.join("demo-trainer-2.yaml"), SHARED_POD.to_string()),
            ];
        }
        for (f, text) in &manifests {
            crate::core::files::write_atomic(f, text.as_bytes())
                .map_err(|e| Error::io(f, "cannot write the sample manifest", &e))?;
        }
        for _ in 0..if shares { 2 } else { 1 } {
            wait_for(&mut events, "the claim's preparation", 15, |e| matches!(e, KubeletEvent::ClaimPrepared { .. }))
                .await?;
        }
        Ok(())
    };
    let outcome = node.race(work, &mut done, "the driver").await;
    let listed = match outcome {
        Ok(()) => list(&tree.pod_resources, ctx.timeout).await,
        Err(e) => Err(e),
    };
    let (n, listed) = match (node.status().await, listed) {
        (Some(n), Ok(l)) => (n, l),
        (_, Err(e)) => {
            tasks.stop().await;
            node.stop().await;
            return Err(e);
        }
        (None, Ok(_)) => {
            tasks.stop().await;
            node.stop().await;
            return Err(Error::failed("the mock kubelet is restarting"));
        }
    };
    let files = Files { claim: &claim_file, pod: &pod_file, kubelet_log: &kubelet_log, driver_log: &driver_log };
    let shown = if metadata { Some(metadata_shown(&tree.cdi_dir())) } else { None };
    emit(&page(&tree, &n, &listed, &files, shown.as_deref(), shares, once))?;
    if !once {
        let interrupted = crate::core::interrupted();
        tokio::pin!(interrupted);
        loop {
            tokio::select! {
                _ = &mut interrupted => break,
                _ = node.finished() => break,
                _ = done.wait_for(Option::is_some) => break,
                Some(()) = hup.recv() => {
                    if node.restart("SIGHUP").await.is_err() {
                        break;
                    }
                }
            }
        }
    }
    tasks.stop().await;
    node.stop().await;
    Ok(())
}

/// The files the demo's page names.
struct Files<'a> {
    claim: &'a std::path::Path,
    pod: &'a std::path::Path,
    kubelet_log: &'a std::path::Path,
    driver_log: &'a std::path::Path,
}

/// The demo's page (pure): what the node shows, then what to try next.
fn page(
    tree: &NodeTree,
    n: &NodeStatus,
    listed: &[Vec<String>],
    f: &Files<'_>,
    metadata: Option<&[Metadata]>,
    shares: bool,
    once: bool,
) -> String {
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    let mut out =
        format!("dpctl demo --dra: a mock kubelet and a simulated DRA driver, running in {}\n\n", tree.root.display());
    out.push_str(&format!("1. The driver {DRIVER} registered through the plugin watcher:\n\n"));
    let rows: Vec<Vec<String>> = n
        .dra_drivers
        .iter()
        .map(|d| {
            vec![s(&d["driver"]), s(&d["service"]), d["health"].as_array().map(|h| h.len()).unwrap_or(0).to_string()]
        })
        .collect();
    out.push_str(&crate::render::indent(&table(&["DRIVER", "SERVICE", "DEVICES"], &rows)));
    out.push_str(&if shares {
        format!(
            "\n\n2. The claims default/demo-gpu and default/demo-gpu-2 (in {}) each ask 4Gi\n   \
of a device's memory. The driver publishes its device with allowMultipleAllocations and 8Gi\n   \
(dra serve --shared-capacity memory=8Gi/default=1Gi/step=1Gi), so both were allocated a share\n   \
of the one device (KEP-5075) and prepared for demo-trainer and demo-trainer-2:\n\n",
            tree.manifests.display()
        )
    } else {
        format!(
            "\n\n2. The claim default/demo-gpu was allocated and prepared for demo-trainer ({}):\n\n",
            f.claim.display()
        )
    });
    let rows: Vec<Vec<String>> = n
        .claims
        .iter()
        .map(|c| {
            let devices: Vec<String> = c["allocation"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| format!("{}/{}", s(&a["pool"]), s(&a["device"])))
                .collect();
            vec![format!("{}/{}", s(&c["namespace"]), s(&c["name"])), devices.join(","), s(&c["uid"])]
        })
        .collect();
    out.push_str(&crate::render::indent(&table(&["CLAIM", "DEVICES", "UID"], &rows)));
    if shares {
        out.push_str(
            "\n\n3. PodResources lists both shares of the device, each with its shareID and its own CDI device\n   \
(the driver names a share's CDI device <claim uid>-<device>-share-<shareID>):\n\n",
        );
        out.push_str(&crate::render::indent(&table(
            &["POD", "CONTAINER", "CLAIM", "DRIVER", "DEVICE", "CDI", "SHARE"],
            listed,
        )));
    } else {
        out.push_str("\n\n3. PodResources lists it (what monitoring agents read):\n\n");
        let rows: Vec<Vec<String>> = listed.iter().map(|r| r.iter().take(6).cloned().collect()).collect();
        out.push_str(&crate::render::indent(&table(&["POD", "CONTAINER", "CLAIM", "DRIVER", "DEVICE", "CDI"], &rows)));
    }
    out.push_str(&format!(
        "\n\n   The CDI spec the runtime would apply is in {}; the kubelet's DRA checkpoint is {}.\n",
        tree.cdi_dir().display(),
        tree.root.join("dra_manager_state").display()
    ));
    if let Some(shown) = metadata {
        out.push_str(
            "\n   Device metadata (KEP-5304, --device-metadata): per request the driver wrote a file and a CDI spec\n   \
that bind-mounts it read-only into the containers that use the request (its CDI ID is on the first device):\n",
        );
        if shown.is_empty() {
            out.push_str("\n   (none found: see the driver's log)\n");
        }
        for m in shown {
            out.push_str(&format!(
                "\n   CDI ID     {}\n   on host    {}\n   container  {}\n\n{}\n",
                m.cdi_id,
                m.host,
                m.container,
                crate::render::indent(&m.first)
            ));
        }
    }
    let flags = match (metadata.is_some(), shares) {
        (true, true) => "--dra --device-metadata --shares",
        (true, false) => "--dra --device-metadata",
        (false, true) => "--dra --shares",
        (false, false) => "--dra",
    };
    out.push_str(&if once {
        format!(
            "\n4. With --once the kubelet and the driver stop now, and the directory is removed.\n   \
Run `dpctl demo {flags}` (without --once) to keep them running, then in another shell try:\n\n"
        )
    } else {
        "\n4. Both keep running until Ctrl-C. In another shell, try:\n\n".to_string()
    });
    let root = tree.root.display().to_string();
    let removed = match metadata {
        Some(_) => "# the kubelet unprepares the claim; the driver removes its metadata",
        None => "# the kubelet unprepares the claim",
    };
    let cmds = [
        (format!("export DPCTL_KUBELET_ROOT_DIR={root}"), ""),
        (format!("export DPCTL_POD_RESOURCES_SOCKET={}", tree.pod_resources.display()), ""),
        ("dpctl dra list".to_string(), "# the registered DRA driver"),
        (format!("dpctl dra probe {DRIVER}-reg.sock"), "# check it against the rules"),
        ("dpctl podresources list".to_string(), "# the claim, its device and CDI ID"),
        (format!("dpctl node --plugin-dir {}", tree.plugin_dir.display()), "# drivers, claims, pods"),
        (format!("rm {}", f.pod.display()), removed),
        (format!("kill -HUP {}", std::process::id()), "# a kubelet restart: the claim stays prepared"),
    ];
    for (c, why) in &cmds {
        out.push_str(format!("   {c}  {why}").trim_end());
        out.push('\n');
    }
    out.push_str(&format!("\n   Logs: {}  {}\n", f.kubelet_log.display(), f.driver_log.display()));
    out
}

/// One row per claim resource PodResources lists.
async fn list(socket: &std::path::Path, timeout: Duration) -> Result<Vec<Vec<String>>> {
    let ch = crate::core::transport::dial(socket, timeout).await?;
    let mut c = PodResourcesListerClient::new(ch);
    let r = c
        .list(ListPodResourcesRequest {})
        .await
        .map_err(|st| crate::core::transport::status_error(socket, "List", st))?
        .into_inner();
    let mut rows = Vec::new();
    for p in r.pod_resources {
        for ctr in &p.containers {
            for d in &ctr.dynamic_resources {
                for cr in &d.claim_resources {
                    let cdi: Vec<&str> = cr.cdi_devices.iter().map(|c| c.name.as_str()).collect();
                    rows.push(vec![
                        p.name.clone(),
                        ctr.name.clone(),
                        format!("{}/{}", d.claim_namespace, d.claim_name),
                        cr.driver_name.clone(),
                        format!("{}/{}", cr.pool_name, cr.device_name),
                        cdi.join(","),
                        cr.share_id.clone().unwrap_or_else(|| "-".into()),
                    ]);
                }
            }
        }
    }
    Ok(rows)
}
