//! `dpctl mock-kubelet --nodes N`: N nodes of one cluster from one process
//! (`NAME-0` … `NAME-{N-1}`), each the engine `mock-kubelet --kubeconfig`
//! runs ([`Node`] with a [`ClusterSpec`]) on a kubelet root of its own
//! (`<root>/NAME-i/`), with simulated devices of its own: `dpctl serve`
//! backends registered to its kubelet.sock and `dpctl dra serve` backends
//! registered through its plugin watcher and publishing the node's
//! ResourceSlice (pool: the node's name, as the kubeletplugin helper names a
//! node-local pool) with the node's credentials — the engines of those
//! commands, in this process. Also what `dpctl bench cluster` runs.

use crate::client::kube::ApiServer;
use crate::core::log::Logger;
use crate::core::task::Tasks;
use crate::core::{Error, Result};
use crate::kubelet::cluster::ClusterSpec;
use crate::kubelet::event::{EventBus, Stamped};
use crate::kubelet::node::{Node, NodeSpec};
use crate::kubelet::tree::NodeTree;
use crate::plugin::config::ResourceConfig;
use crate::plugin::dra::{Config as DraConfig, CONTROL_DIR, CONTROL_PREFIX};
use crate::protocol::dra::{DRA_V1, DRA_V1BETA1, HEALTH_V1};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What `{node}` in a kubeconfig path is replaced with: each node's name.
pub const NODE_PLACEHOLDER: &str = "{node}";

/// The kubeconfig of node `node`: `{node}` in the path replaced by its name
/// (each node its own credentials), else the one file for every node.
pub fn kubeconfig_for(pattern: &Path, node: &str) -> PathBuf {
    PathBuf::from(pattern.to_string_lossy().replace(NODE_PLACEHOLDER, node))
}

/// `NAME=COUNT` (a resource or driver name and how many devices).
pub fn name_count(s: &str) -> std::result::Result<(String, u32), crate::cli::FlagValueError> {
    use crate::cli::FlagValueError;
    let (name, count) = s.split_once('=').ok_or_else(|| FlagValueError::part(s, "expected NAME=COUNT"))?;
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| FlagValueError::part(s, format!("{count:?} is not a count of devices (1 to 16384)")))?;
    if !(1..=16384).contains(&count) {
        return Err(FlagValueError::part(s, "the count must be 1 to 16384"));
    }
    let name = name.trim();
    if name.is_empty() {
        return Err(FlagValueError::part(s, "the name is empty"));
    }
    Ok((name.to_string(), count))
}

/// The fleet to run.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    /// Node names are `PREFIX-0` … .
    pub prefix: String,
    /// How many nodes.
    pub nodes: u32,
    /// Each node's kubelet root is `<root>/<node>/`.
    pub root: PathBuf,
    /// The kubeconfig (`{node}`: each node's own).
    pub kubeconfig: PathBuf,
    /// Its context.
    pub context: Option<String>,
    /// Labels every Node carries beside the kubelet's.
    pub labels: BTreeMap<String, String>,
    /// Device-plugin resources on each node, and their device counts.
    pub devices: Vec<(String, u32)>,
    /// DRA drivers on each node, and their device counts.
    pub drivers: Vec<(String, u32)>,
    /// Each node's engine settings (paths are replaced per node).
    pub template: NodeSpec,
}

impl FleetSpec {
    /// The name of node `i`.
    pub fn node_name(&self, i: u32) -> String {
        format!("{}-{i}", self.prefix)
    }
}

/// An event of one node of the fleet: the node's index and the event.
pub type FleetEvent = (usize, Arc<Stamped>);

/// One node of the fleet.
struct Member {
    name: String,
    tree: NodeTree,
    node: Arc<Node>,
}

/// The running fleet: its nodes, their backends, and the tasks that pass
/// their events on; [`Fleet::stop`] ends them all and waits.
pub struct Fleet {
    members: Vec<Member>,
    backends: Tasks,
    forwarders: Tasks,
    /// The first node engine to end by itself: its error, or "" when it stopped cleanly.
    ended: tokio::sync::watch::Sender<Option<String>>,
}

/// A node's events passed to the log (with the node's name) and to `tap`.
fn forward(
    forwarders: &Tasks,
    i: usize,
    name: &str,
    bus: &EventBus,
    log: Option<Logger>,
    tap: Option<mpsc::UnboundedSender<FleetEvent>>,
) {
    let mut rx = bus.subscribe();
    let name = name.to_string();
    let stop = forwarders.token().clone();
    forwarders.spawn_joined(async move {
        loop {
            let e = tokio::select! {
                _ = stop.cancelled() => return,
                e = rx.recv() => match e { Some(e) => e, None => return },
            };
            if let Some(log) = &log {
                if let Ok(mut v) = serde_json::to_value(&*e) {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("node".into(), serde_json::json!(name));
                    }
                    log.record(&v);
                }
            }
            if let Some(tap) = &tap {
                let _ = tap.send((i, e));
            }
        }
    });
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

impl Fleet {
    /// A fleet of no node yet.
    pub fn new() -> Self {
        Fleet {
            members: Vec::new(),
            backends: Tasks::new(),
            forwarders: Tasks::new(),
            ended: tokio::sync::watch::channel(None).0,
        }
    }

    /// Start every node of `spec` (one after the other, each serving
    /// before the next) and its backends. `log`: every node's events with
    /// its name; `tap`: the same, typed, for a caller that times them. On
    /// an error (or when this is dropped) the nodes started so far run
    /// until [`Fleet::stop`].
    pub async fn start(
        &mut self,
        spec: &FleetSpec,
        log: Option<Logger>,
        tap: Option<mpsc::UnboundedSender<FleetEvent>>,
    ) -> Result<()> {
        for i in 0..spec.nodes {
            let name = spec.node_name(i);
            let kc = kubeconfig_for(&spec.kubeconfig, &name);
            let api = crate::client::kube::load_kubeconfig_context(&kc, spec.context.as_deref())?;
            let tree = NodeTree::under(&spec.root.join(&name));
            tree.create()?;
            let cdi = tree.cdi_dir();
            crate::core::files::create_dir_all(&cdi).map_err(|e| Error::io(&cdi, "cannot create", &e))?;
            let mut s = spec.template.clone();
            s.plugin_dir = tree.plugin_dir.clone();
            s.manager.checkpoint = tree.checkpoint();
            s.manager.plugin_dir = tree.plugin_dir.clone();
            s.pod_resources_socket = Some(tree.pod_resources.clone());
            s.pods_api_socket = None;
            s.manifests = None;
            s.plugins_registry_dir = Some(tree.registry_dir.clone());
            s.metrics_addr = None;
            s.api_server = None;
            s.dra = Some(crate::kubelet::dra::shell::DraSpec::new(&tree.root, vec![cdi]));
            s.cluster = Some(ClusterSpec { api: api.clone(), node: name.clone(), labels: spec.labels.clone() });
            let bus = EventBus::new(Logger::silent());
            forward(&self.forwarders, i as usize, &name, &bus, log.clone(), tap.clone());
            let node = Arc::new(Node::start(s, bus).await?);
            {
                let (n, ended, stop) = (node.clone(), self.ended.clone(), self.forwarders.token().clone());
                self.forwarders.spawn_joined(async move {
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        r = n.finished() => {
                            let why = r.err().map(|e| e.to_string()).unwrap_or_default();
                            ended.send_if_modified(|v| v.is_none() && { *v = Some(why); true });
                        }
                    }
                });
            }
            self.backends_of(spec, &name, &tree, &api);
            self.members.push(Member { name, tree, node });
        }
        Ok(())
    }

    /// Node `name`'s simulated devices: one `serve` backend for all its
    /// device-plugin resources, one `dra serve` backend per driver.
    fn backends_of(&self, spec: &FleetSpec, name: &str, tree: &NodeTree, api: &ApiServer) {
        if !spec.devices.is_empty() {
            let resources: Vec<ResourceConfig> = spec
                .devices
                .iter()
                .enumerate()
                .map(|(k, (resource, count))| ResourceConfig {
                    resource: resource.clone(),
                    count: Some(*count as usize),
                    socket_name: Some(format!("dpctl-fleet-{k}.sock")),
                    ..Default::default()
                })
                .collect();
            let settings = crate::plugin::registrar::Settings {
                plugin_dir: tree.plugin_dir.clone(),
                socket_name: None,
                kubelet_socket: tree.kubelet_socket(),
                mode: crate::plugin::config::RegistrationMode::Kubelet,
                registry_dir: tree.registry_dir.clone(),
                register: true,
                retry: true,
                reregister_on_disconnect: false,
                timeout: Duration::from_secs(10),
                host_root: Default::default(),
            };
            let group = self.backends.child();
            self.backends.spawn_joined(async move {
                let _ = crate::plugin::run::run(&resources, settings, None, Logger::silent(), group).await;
            });
        }
        for (driver, count) in &spec.drivers {
            let plugin_dir = tree.root.join("plugins").join(driver);
            let cfg = DraConfig {
                driver: driver.clone(),
                pool: name.to_string(),
                devices: (0..*count).map(|i| format!("dev-{i}")).collect(),
                kubelet_root: tree.root.clone(),
                registry_dir: tree.registry_dir.clone(),
                control_socket: plugin_dir
                    .join(CONTROL_DIR)
                    .join(format!("{CONTROL_PREFIX}{}.sock", std::process::id())),
                plugin_dir,
                cdi_dir: tree.cdi_dir(),
                services: vec![DRA_V1.into(), DRA_V1BETA1.into(), HEALTH_V1.into()],
                register: true,
                publish: Some((api.clone(), name.to_string())),
                ..Default::default()
            };
            let group = self.backends.child();
            self.backends.spawn_joined(async move {
                let _ = crate::plugin::dra::run(cfg, Logger::silent(), group).await;
            });
        }
    }

    /// The nodes' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    /// Node `i`'s tree.
    pub fn tree(&self, i: usize) -> Option<&NodeTree> {
        self.members.get(i).map(|m| &m.tree)
    }

    /// Until a node's engine ends (its error, if it failed).
    pub async fn finished(&self) -> Result<()> {
        let mut ended = self.ended.subscribe();
        let why = match ended.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => return std::future::pending().await,
        };
        match why.is_empty() {
            true => Ok(()),
            false => Err(Error::failed(why)),
        }
    }

    /// Restart every node in place (as SIGHUP does).
    pub async fn restart(&self, reason: &str) -> Result<()> {
        for m in &self.members {
            m.node.restart(reason).await?;
        }
        Ok(())
    }

    /// Stop the backends, then the nodes, then the forwarders; wait for all.
    pub async fn stop(&self) {
        self.backends.stop().await;
        let stopping = Tasks::new();
        for m in &self.members {
            let n = m.node.clone();
            stopping.spawn_joined(async move { n.stop().await });
        }
        stopping.join().await;
        self.forwarders.stop().await;
    }
}
