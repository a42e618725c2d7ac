//! Everything doctor learns from the node, gathered concurrently with a
//! timeout per socket. No judgement here: [`super::findings`] decides.

pub use super::answers::{Got, Watcher};
use super::{cdi, Options};
use crate::api::deviceplugin::{Device, DevicePluginOptions};
use crate::api::podresources::{
    pod_resources_lister_client::PodResourcesListerClient, AllocatableResourcesRequest, ListPodResourcesRequest,
};
use crate::client::checkpoint::Data;
use crate::client::conn::{PluginConn, Update};
use crate::core::paths::{CHECKPOINT_NAME, KUBELET_SOCKET_NAME};
use crate::core::transport::{call, dial, path_kind, request, try_connect, Connect, PathKind};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One entry of the plugin directory.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its path.
    pub path: PathBuf,
    /// Its file name.
    pub name: String,
    /// What it is.
    pub kind: PathKind,
    /// For a socket: what connecting found.
    pub connect: Option<Connect>,
    /// Its modification time.
    pub mtime: Option<SystemTime>,
}

/// What one live plugin answered.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// Its socket.
    pub socket: PathBuf,
    /// GetDevicePluginOptions.
    pub options: Option<DevicePluginOptions>,
    /// The first ListAndWatch snapshot's devices, in the plugin's order (None with --no-streams).
    pub devices: Option<Vec<Device>>,
    /// Its encoded size.
    pub snapshot_bytes: usize,
    /// No answer within this long.
    pub hung: Option<Duration>,
    /// A call failed.
    pub error: Option<String>,
}

impl Plugin {
    /// A plugin that answered with these devices (tests and fixtures).
    pub fn with_devices(socket: impl Into<PathBuf>, devices: &[(&str, &str)]) -> Self {
        Plugin {
            socket: socket.into(),
            options: Some(DevicePluginOptions::default()),
            devices: Some(
                devices
                    .iter()
                    .map(|(i, h)| Device { id: i.to_string(), health: h.to_string(), topology: None })
                    .collect(),
            ),
            snapshot_bytes: 0,
            hung: None,
            error: None,
        }
    }
}

/// A container in PodResources List.
#[derive(Debug, Clone, Default)]
pub struct PodContainer {
    /// Container name.
    pub name: String,
    /// `(resource, ids)`.
    pub devices: Vec<(String, Vec<String>)>,
    /// The DRA claims it holds (`namespace/name`, from its dynamic resources).
    pub claims: Vec<String>,
}

/// A pod in PodResources List (the API has no UID).
#[derive(Debug, Clone, Default)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Containers the kubelet lists (running app containers, not finished init containers).
    pub containers: Vec<PodContainer>,
}

/// The checkpoint.
#[derive(Debug, Clone)]
pub enum Checkpoint {
    /// No checkpoint file.
    Missing,
    /// It could not be read or parsed: why, and whether permission was denied.
    Bad(String, bool),
    /// Its content.
    Read(Data),
}

/// Everything gathered.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The plugin directory.
    pub plugin_dir: PathBuf,
    /// It could not be read: why, and whether permission was denied.
    pub plugin_dir_error: Option<(String, bool)>,
    /// kubelet.sock.
    pub kubelet: Connect,
    /// kubelet.sock's modification time (when the kubelet last started).
    pub kubelet_started: Option<SystemTime>,
    /// Every other entry.
    pub entries: Vec<Entry>,
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// The PodResources socket.
    pub pod_resources_socket: PathBuf,
    /// PodResources List.
    pub pods: Got<Vec<Pod>>,
    /// `namespace/name` by pod UID, from the kubelet's pods API (1.36+;
    /// None: no pods API socket, or it did not answer).
    pub pod_names: Option<BTreeMap<String, String>>,
    /// GetAllocatableResources: resource → device IDs.
    pub allocatable: Got<BTreeMap<String, BTreeSet<String>>>,
    /// Live plugins.
    pub plugins: Vec<Plugin>,
    /// Whether ListAndWatch was opened.
    pub streams: bool,
    /// Plugin-watcher sockets.
    pub watchers: Vec<Watcher>,
    /// Pod UIDs with a directory under the kubelet's pods dir (None: not readable).
    pub pod_dirs: Option<BTreeSet<String>>,
    /// CDI specs.
    pub cdi: cdi::Registry,
    /// The per-socket timeout used.
    pub timeout: Duration,
    /// DRA kubelet plugins and the DRA checkpoint.
    pub dra: super::dra::DraFacts,
}

impl Facts {
    /// A node with nothing gathered yet (a starting point for tests).
    pub fn empty(plugin_dir: impl Into<PathBuf>) -> Self {
        let plugin_dir = plugin_dir.into();
        Facts {
            pod_resources_socket: plugin_dir.join("../pod-resources/kubelet.sock"),
            plugin_dir,
            plugin_dir_error: None,
            kubelet: Connect::Answered,
            kubelet_started: None,
            entries: Vec::new(),
            checkpoint: Checkpoint::Missing,
            pods: Got::Yes(Vec::new()),
            pod_names: None,
            allocatable: Got::Yes(BTreeMap::new()),
            plugins: Vec::new(),
            streams: true,
            watchers: Vec::new(),
            pod_dirs: None,
            cdi: cdi::Registry::default(),
            timeout: Duration::from_secs(2),
            dra: Default::default(),
        }
    }
}

async fn inspect_plugin(socket: PathBuf, timeout: Duration, streams: bool) -> Plugin {
    let mut p =
        Plugin { socket: socket.clone(), options: None, devices: None, snapshot_bytes: 0, hung: None, error: None };
    let work = async {
        // The outer deadline decides; the per-call one must not fire first.
        let conn = PluginConn::connect(&socket, timeout + Duration::from_secs(1), 512 << 20).await?;
        let opts = conn.options().await?;
        if !streams {
            return Ok((opts, None));
        }
        let mut s = conn.list_and_watch().await?;
        match s.next().await? {
            Update::Snapshot(r) => Ok((opts, Some(r))),
            Update::Closed => {
                Err(crate::core::Error::failed("the plugin closed ListAndWatch before sending a snapshot"))
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Err(_) => p.hung = Some(timeout),
        Ok(Err(e)) => p.error = Some(e.to_string()),
        Ok(Ok((opts, snap))) => {
            p.options = Some(opts);
            if let Some(r) = snap {
                p.snapshot_bytes = r.encoded_len();
                p.devices = Some(r.devices);
            }
        }
    }
    p
}

async fn pod_resources(socket: &Path, t: Duration) -> (Got<Vec<Pod>>, Got<BTreeMap<String, BTreeSet<String>>>) {
    let (c, _) = try_connect(socket, t).await;
    if c != Connect::Answered {
        return (Got::Connect(c.clone()), Got::Connect(c));
    }
    let ch = match dial(socket, t).await {
        Ok(ch) => ch,
        Err(e) => return (Got::Failed(e.to_string()), Got::Failed(e.to_string())),
    };
    let mut client = PodResourcesListerClient::new(ch).max_decoding_message_size(512 << 20);
    let pods = match call(socket, "List", t, client.list(request(ListPodResourcesRequest {}, t))).await {
        Ok(r) => Got::Yes(
            r.pod_resources
                .into_iter()
                .map(|p| Pod {
                    namespace: p.namespace,
                    name: p.name,
                    containers: p
                        .containers
                        .into_iter()
                        .map(|c| PodContainer {
                            name: c.name,
                            devices: c.devices.into_iter().map(|d| (d.resource_name, d.device_ids)).collect(),
                            claims: c
                                .dynamic_resources
                                .into_iter()
                                .map(|d| format!("{}/{}", d.claim_namespace, d.claim_name))
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        ),
        Err(e) => Got::Failed(e.to_string()),
    };
    let alloc = match call(
        socket,
        "GetAllocatableResources",
        t,
        client.get_allocatable_resources(request(AllocatableResourcesRequest {}, t)),
    )
    .await
    {
        Ok(r) => {
            let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for d in r.devices {
                m.entry(d.resource_name).or_default().extend(d.device_ids);
            }
            Got::Yes(m)
        }
        Err(e) => Got::Failed(e.to_string()),
    };
    (pods, alloc)
}

async fn watcher(socket: PathBuf, t: Duration) -> Watcher {
    use crate::api::pluginregistration::{registration_client::RegistrationClient, InfoRequest};
    let (c, _) = try_connect(&socket, t).await;
    if c != Connect::Answered {
        return Watcher { socket, info: Got::Connect(c) };
    }
    let work = async {
        let mut client = RegistrationClient::new(dial(&socket, t).await?);
        call(&socket, "GetInfo", t, client.get_info(request(InfoRequest {}, t))).await
    };
    let info = match tokio::time::timeout(t + Duration::from_millis(200), work).await {
        Ok(Ok(i)) => Got::Yes((i.r#type, i.name, i.endpoint)),
        Ok(Err(e)) => Got::Failed(e.to_string()),
        Err(_) => Got::Failed(format!("no answer within {}", crate::core::time::format_duration(t))),
    };
    Watcher { socket, info }
}

/// Gather every fact, concurrently where it involves a socket.
pub async fn gather(o: &Options) -> Facts {
    let t = o.timeout;
    let mut f = Facts::empty(&o.plugin_dir);
    f.timeout = t;
    f.streams = o.streams;
    f.pod_resources_socket = o.pod_resources_socket.clone();
    f.kubelet = Connect::Missing;

    let mut paths: Vec<PathBuf> = Vec::new();
    match std::fs::read_dir(&o.plugin_dir) {
        Err(e) => f.plugin_dir_error = Some((e.to_string(), e.kind() == std::io::ErrorKind::PermissionDenied)),
        Ok(rd) => {
            paths = rd.flatten().map(|e| e.path()).collect();
            paths.sort();
        }
    }
    // Connect to every socket at once.
    let mut set = tokio::task::JoinSet::new();
    for p in paths {
        set.spawn(async move {
            let kind = path_kind(&p).unwrap_or(PathKind::Other);
            let mtime = std::fs::symlink_metadata(&p).and_then(|m| m.modified()).ok();
            let connect = if kind == PathKind::Socket { Some(try_connect(&p, t).await.0) } else { None };
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Entry { path: p, name, kind, connect, mtime }
        });
    }
    let mut entries = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(e) = r {
            entries.push(e);
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    for e in entries {
        if e.name == KUBELET_SOCKET_NAME {
            f.kubelet =
                e.connect.clone().unwrap_or_else(|| Connect::NotASocket(format!("{:?}", e.kind).to_lowercase()));
            f.kubelet_started = e.mtime;
        } else {
            f.entries.push(e);
        }
    }

    // Live plugins, PodResources and the plugin watcher, concurrently.
    let live: Vec<PathBuf> =
        f.entries.iter().filter(|e| e.connect == Some(Connect::Answered)).map(|e| e.path.clone()).collect();
    let streams = o.streams;
    let plugins = async {
        let mut set = tokio::task::JoinSet::new();
        for s in live {
            set.spawn(inspect_plugin(s, t, streams));
        }
        let mut v = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(p) = r {
                v.push(p);
            }
        }
        v.sort_by(|a: &Plugin, b| a.socket.cmp(&b.socket));
        v
    };
    let watchers = async {
        let mut set = tokio::task::JoinSet::new();
        if o.plugins_registry_dir.is_dir() {
            for s in crate::core::transport::find_sockets(&o.plugins_registry_dir) {
                set.spawn(watcher(s, t.min(Duration::from_secs(1))));
            }
        }
        let mut v = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(w) = r {
                v.push(w);
            }
        }
        v.sort_by(|a: &Watcher, b| a.socket.cmp(&b.socket));
        v
    };
    let ((pods, alloc), plugins, watchers) = tokio::join!(pod_resources(&o.pod_resources_socket, t), plugins, watchers);
    f.pods = pods;
    f.allocatable = alloc;
    // The pods API names the pods the checkpoints know only by UID.
    let pods_api = o.pod_resources_socket.parent().and_then(Path::parent).map(|r| r.join("pods-api/pods-api.sock"));
    if let Some(sock) = pods_api.filter(|s| s.exists()) {
        f.pod_names = crate::client::pods::names(&sock, t.min(Duration::from_secs(1))).await.ok();
    }
    f.plugins = plugins;
    f.watchers = watchers;
    f.dra = super::dra::gather(&f.watchers, &o.kubelet_root, &o.root, t.min(Duration::from_secs(1))).await;

    // Device plugins registered through the plugin watcher may serve from
    // anywhere: inspect each GetInfo endpoint outside the plugin directory too.
    let extra: BTreeSet<PathBuf> = f
        .watchers
        .iter()
        .filter_map(|w| w.info.ok())
        .filter(|(ty, _, e)| ty == crate::protocol::registration::PLUGIN_TYPE && Path::new(e).is_absolute())
        .map(|(_, _, e)| o.root.path(Path::new(e)))
        .filter(|e| e.parent() != Some(o.plugin_dir.as_path()) && !f.entries.iter().any(|x| &x.path == e))
        .collect();
    let mut set = tokio::task::JoinSet::new();
    for p in extra {
        set.spawn(async move {
            let kind = path_kind(&p).unwrap_or(PathKind::Other);
            let (connect, _) = try_connect(&p, t).await;
            let plugin =
                if connect == Connect::Answered { Some(inspect_plugin(p.clone(), t, streams).await) } else { None };
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let mtime = std::fs::symlink_metadata(&p).and_then(|m| m.modified()).ok();
            (Entry { path: p, name, kind, connect: Some(connect), mtime }, plugin)
        });
    }
    while let Some(r) = set.join_next().await {
        if let Ok((e, p)) = r {
            // A vanished endpoint is the watcher socket's problem, reported there.
            if e.kind == PathKind::Socket {
                f.entries.push(e);
            }
            f.plugins.extend(p);
        }
    }
    f.plugins.sort_by(|a, b| a.socket.cmp(&b.socket));

    let cp = o.plugin_dir.join(CHECKPOINT_NAME);
    f.checkpoint = match std::fs::File::open(&cp) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Checkpoint::Missing,
        Err(e) => Checkpoint::Bad(e.to_string(), e.kind() == std::io::ErrorKind::PermissionDenied),
        Ok(_) => match crate::client::checkpoint::read(&cp) {
            Ok(Some(l)) => Checkpoint::Read(l.checkpoint.data),
            Ok(None) => Checkpoint::Missing,
            Err(e) => Checkpoint::Bad(e.to_string(), false),
        },
    };
    f.pod_dirs = std::fs::read_dir(&o.pods_dir)
        .ok()
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect());
    f.cdi = cdi::load(&o.cdi.dirs);
    f.cdi.searched = o.cdi.to_string();
    f
}
