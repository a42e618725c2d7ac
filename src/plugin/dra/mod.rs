//! `dpctl dra serve`: a simulated DRA driver's kubelet plugin. It serves the
//! DRAPlugin service (v1 and v1beta1) and the DRAResourceHealth service (v1
//! and v1alpha1) on `<kubelet-root>/plugins/<driver>/dra.sock`, registers
//! through the plugin watcher with `<kubelet-root>/plugins_registry/<driver>-reg.sock`
//! (the same registration server `dpctl serve` uses, answering a DRAPlugin
//! PluginInfo), writes a CDI spec per prepared claim and removes it on
//! unprepare, and takes live control (`dpctl dra device …`). With
//! `--rolling-update UID` both sockets carry the UID so two instances can
//! serve at once. With `--kubeconfig` it publishes its devices as a
//! ResourceSlice (again when it is gone), and prepares what each claim's
//! allocation names (GET the ResourceClaim, as the kubeletplugin helper
//! does); without, it picks a free device per claim. Unchanged health is
//! sent again every half timeout. Each `--fault` breaks one rule of
//! [`crate::protocol::dra`]. Every server is a task of the [`Tasks`] group
//! `run` is given.

pub mod claims;
pub mod driver;
pub mod error;
pub mod faults;
pub mod health;
pub mod metadata;
pub mod slices;

pub use faults::{Fault, FaultError, FAULTS};

use crate::api::pluginregistration::PluginInfo;
use crate::core::log::Logger;
use crate::core::paths::HostRoot;
use crate::core::task::Tasks;
use crate::core::transport::{listen, serve_owned, SocketGuard};
use crate::core::{Error, Result};
use crate::plugin::registrar::{serve_watcher, InfoFn, RegServed, WatcherRegistration};
use crate::protocol::dra::{self as rules, DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1, PLUGIN_TYPE};
use driver::{Driver, HealthV1, HealthV1alpha1, V1beta1, V1};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The subdirectory of the driver's plugin directory holding its control socket.
pub const CONTROL_DIR: &str = "dpctl-control";
/// The file-name prefix of `dpctl dra serve` control sockets.
pub const CONTROL_PREFIX: &str = "dra-";

/// The simulated driver's configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The driver name (GetInfo name, CDI vendor).
    pub driver: String,
    /// The pool its devices are in.
    pub pool: String,
    /// Device names.
    pub devices: Vec<String>,
    /// The kubelet's root directory, as seen here.
    pub kubelet_root: PathBuf,
    /// The plugin watcher's directory, as seen here.
    pub registry_dir: PathBuf,
    /// Where the service socket goes, as seen here (`<kubelet-root>/plugins/<driver>`).
    pub plugin_dir: PathBuf,
    /// `--root`.
    pub host_root: HostRoot,
    /// Where CDI specs are written, as seen here.
    pub cdi_dir: PathBuf,
    /// The services advertised in supported_versions (and served).
    pub services: Vec<String>,
    /// Create the registration socket.
    pub register: bool,
    /// Rolling-update UID: sockets named `<driver>-<uid>-reg.sock` and `dra-<uid>.sock`.
    pub rolling_uid: Option<String>,
    /// health_check_timeout_seconds sent per device.
    pub health_timeout_secs: i64,
    /// The live-control socket.
    pub control_socket: PathBuf,
    /// Faults.
    pub faults: Vec<Fault>,
    /// Publish the devices as a ResourceSlice to this API server, for this node.
    pub publish: Option<(slices::ApiServer, String)>,
    /// Write a common CDI spec at start and return its ID with every claim's devices.
    pub common_cdi_spec: bool,
    /// Delete its ResourceSlices when it stops (the kubeletplugin helper
    /// does not: the kubelet wipes a gone driver's slices after its delay).
    pub withdraw_on_exit: bool,
    /// The env each device's CDI edits set (`{id}`: the device), instead of
    /// DPCTL_DRA_DEVICE and DPCTL_DRA_CLAIM (to match a device plugin's Allocate).
    pub cdi_env: Vec<(String, String)>,
    /// Spread the devices over this many NUMA nodes, published as the
    /// `numaNode` attribute of each device in the ResourceSlice.
    pub numa_nodes: Option<u32>,
    /// bindingConditions and bindingFailureConditions of every device
    /// (KEP-5007; both empty: none).
    pub binding: (Vec<String>, Vec<String>),
    /// `--shared-capacity`: every device shareable with these capacities (KEP-5075).
    pub shared_capacity: Vec<slices::SharedCapacity>,
    /// `--node-allocatable`: every device's nodeAllocatableResources (KEP-5517).
    pub node_allocatable: Vec<(String, String)>,
    /// Device metadata (KEP-5304): the `metadata.resource.k8s.io` versions
    /// written for each prepared claim, in order, as the kubeletplugin
    /// helper's `EnableDeviceMetadata` does (empty: off).
    pub metadata: Vec<metadata::Version>,
}

impl Config {
    /// The registration socket path (as seen here).
    pub fn registration_socket(&self) -> PathBuf {
        match &self.rolling_uid {
            Some(u) => self.registry_dir.join(format!("{}-{u}-reg.sock", self.driver)),
            None => self.registry_dir.join(format!("{}-reg.sock", self.driver)),
        }
    }

    /// The service socket path (as seen here), faults applied.
    pub fn service_socket(&self, outside_dir: Option<&Path>) -> PathBuf {
        let name = match &self.rolling_uid {
            Some(u) => format!("dra-{u}.sock"),
            None => "dra.sock".to_string(),
        };
        if let Some(d) = outside_dir {
            return d.join(name);
        }
        if faults::long_endpoint(&self.faults) {
            // Deep enough that the host path is over 107 bytes.
            let host_len = self.host_root.on_host(&self.plugin_dir).display().to_string().len();
            let pad = (crate::core::transport::SUN_PATH_MAX + 1).saturating_sub(host_len + name.len() + 2).max(1);
            return self.plugin_dir.join("x".repeat(pad.min(200))).join(name);
        }
        self.plugin_dir.join(name)
    }

    /// The services served (advertised ones minus the unserved faults).
    pub fn served(&self) -> Vec<&str> {
        self.services.iter().map(String::as_str).filter(|s| faults::serves(&self.faults, s)).collect()
    }

    /// The GetInfo answer for the service socket at host path `endpoint`, faults applied.
    pub fn info(&self, endpoint: &Path) -> PluginInfo {
        let info = PluginInfo {
            r#type: PLUGIN_TYPE.into(),
            name: self.driver.clone(),
            endpoint: endpoint.display().to_string(),
            supported_versions: self.services.clone(),
        };
        faults::info(&self.faults, info, endpoint)
    }

    /// Check the configuration against the rules the kubelet applies (faults aside).
    pub fn validate(&self) -> Result<()> {
        if let Some(p) = rules::driver_name_problem(&self.driver) {
            return Err(Error::usage(format!("--driver: {p}")));
        }
        if self.pool.is_empty() || self.pool.contains('/') && self.pool.split('/').any(str::is_empty) {
            return Err(Error::usage("--pool: a pool name is non-empty, e.g. node-1"));
        }
        if self.devices.is_empty() {
            return Err(Error::usage("--devices: at least one device"));
        }
        if rules::chosen_service(&self.services).is_none() {
            return Err(Error::usage(format!(
                "--services must include {DRA_V1} or {DRA_V1BETA1} (got {})",
                crate::core::text::id_list(&self.services)
            )));
        }
        if !self.metadata.is_empty() {
            metadata::check_versions(&self.metadata).map_err(|e| Error::usage(format!("--device-metadata: {e}")))?;
            if self.publish.is_none() {
                return Err(Error::usage(
                    "--device-metadata: the metadata of a request is written from the ResourceClaim the driver fetches, \
                     as the kubeletplugin helper does; give it an API server (--kubeconfig, KUBECONFIG or in-cluster)",
                ));
            }
        }
        if let Some(u) = &self.rolling_uid {
            if u.is_empty() || !u.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(Error::usage("--rolling-update: the UID is letters, digits and '-'"));
            }
        }
        let host_ep = self.host_root.on_host(&self.service_socket(None));
        let host_root = self.host_root.on_host(&self.kubelet_root);
        let problems: Vec<String> = rules::endpoint_violations(&host_ep.display().to_string(), &host_root)
            .into_iter()
            .filter(|v| !(faults::long_endpoint(&self.faults) && v.rule.id == rules::ENDPOINT_LENGTH.id))
            .map(|v| v.explained())
            .collect();
        if !problems.is_empty() {
            return Err(Error::usage(problems.join("; ")));
        }
        Ok(())
    }
}

/// Serve the driver's gRPC services on `path` until `stop`: one server,
/// routed by service name (tonic's `Routes`); a service not served gets
/// Unimplemented, as grpc-go answers.
async fn serve_services(driver: &Arc<Driver>, cfg: &Config, path: &Path, serving: &Tasks) -> Result<SocketGuard> {
    let (listener, guard) = listen(path).await?;
    let mut routes = tonic::service::RoutesBuilder::default();
    let served = cfg.served();
    let max = crate::core::limits::GRPC_MAX_RECV;
    if served.contains(&DRA_V1) {
        routes.add_service(
            crate::api::dra_v1::dra_plugin_server::DraPluginServer::new(V1(driver.clone()))
                .max_decoding_message_size(max),
        );
    }
    if served.contains(&DRA_V1BETA1) {
        routes.add_service(
            crate::api::dra_v1beta1::dra_plugin_server::DraPluginServer::new(V1beta1(driver.clone()))
                .max_decoding_message_size(max),
        );
    }
    if served.contains(&HEALTH_V1) {
        routes.add_service(crate::api::dra_health_v1::dra_resource_health_server::DraResourceHealthServer::new(
            HealthV1(driver.clone()),
        ));
    }
    if served.contains(&HEALTH_V1ALPHA1) {
        routes.add_service(crate::api::dra_health_v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(
            HealthV1alpha1(driver.clone()),
        ));
    }
    serve_owned(serving, listener, routes.routes().prepare());
    Ok(guard)
}

/// How often the driver looks for its sockets being deleted.
const POLL: Duration = Duration::from_millis(100);

/// Run the simulated driver until `tasks` is cancelled; every server it
/// starts is a task of that group, stopped and awaited before it returns.
pub async fn run(cfg: Config, log: Logger, tasks: Tasks) -> Result<()> {
    cfg.validate()?;
    let cfg = Arc::new(cfg);
    let driver = Driver::new(cfg.clone(), log.clone(), tasks.clone());
    let removed = driver.clean_leftover_temp_files();
    if !removed.is_empty() {
        let files: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        log.event("cdi-temp-files-removed", &[("files", json!(files))]);
    }
    driver.write_common_spec().map_err(Error::failed_from)?;
    let result = run_inner(&cfg, &driver, &log, &tasks).await;
    if tokio::time::timeout(Duration::from_secs(3), tasks.stop()).await.is_err() {
        log.event("warning", &[("message", json!("some servers did not stop within 3s"))]);
    }
    result
}

/// How often a publishing driver checks that its ResourceSlice is still there.
const REPUBLISH_CHECK: Duration = Duration::from_millis(500);

/// Publish the slice again when it is gone (a kubelet deletes a node's slices
/// when it starts, and a driver's when its last plugin went away), as the
/// kubeletplugin helper's slice controller does when its watch sees the deletion.
async fn republish(api: &slices::ApiServer, name: &str, obj: &serde_json::Value, log: &Logger) {
    let t = Duration::from_secs(5);
    let node = obj["spec"]["nodeName"].as_str().unwrap_or_default();
    match slices::exists(api, name, node, t).await {
        Ok(true) => {}
        Ok(false) => match slices::publish(api, obj, t).await {
            Ok(()) => log.event("resourceslice", &[("name", json!(name)), ("republished", json!(true))]),
            Err(e) => log.event("error", &[("error", json!(e.to_string()))]),
        },
        Err(e) => log.event("error", &[("error", json!(e.to_string()))]),
    }
}

async fn run_inner(cfg: &Arc<Config>, driver: &Arc<Driver>, log: &Logger, tasks: &Tasks) -> Result<()> {
    let outside =
        if driver.faults().outside_root() { Some(crate::core::transport::TempDir::new("dra-outside")?) } else { None };
    let sock = cfg.service_socket(outside.as_ref().map(|d| d.path()));
    if let Some(dir) = sock.parent() {
        crate::core::files::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the plugin directory", &e))?;
    }
    let mut serving = tasks.child();
    let mut guard = serve_services(driver, cfg, &sock, &serving).await?;
    log.event(
        "serving",
        &[
            ("driver", json!(cfg.driver)),
            ("socket", json!(sock.display().to_string())),
            ("services", json!(cfg.served())),
            ("devices", json!(cfg.devices.len())),
        ],
    );
    // Live control: it stops (removing its socket) when our group is cancelled.
    {
        let (d, path, log, stop) = (driver.clone(), cfg.control_socket.clone(), log.clone(), tasks.token().clone());
        tasks.spawn_joined(async move {
            let shown = path.display().to_string();
            let listening = || log.event("control", &[("socket", json!(shown))]);
            if let Err(e) = crate::core::control::serve(&path, d, stop, listening).await {
                log.event("error", &[("error", json!(e.to_string()))]);
            }
        });
    }
    let (endpoint_tx, endpoint_rx) = watch::channel(Some(sock.clone()));
    let (status_tx, mut status_rx) = mpsc::channel(4);
    let c = cfg.clone();
    let info: InfoFn = Arc::new(move |ep: &Path| c.info(ep));
    let reg = WatcherRegistration::new(&cfg.driver, endpoint_rx, cfg.host_root.clone(), info, status_tx);
    let reg_path = cfg.registration_socket();
    let mut reg_served: Option<RegServed> = None;
    if cfg.register {
        crate::core::files::create_dir_all(&cfg.registry_dir)
            .map_err(|e| Error::io(&cfg.registry_dir, "cannot create the plugin watcher directory", &e))?;
        reg_served = Some(serve_watcher(&reg_path, reg.clone(), tasks).await?);
        log.event(
            "watcher-socket",
            &[("driver", json!(cfg.driver)), ("socket", json!(reg_path.display().to_string()))],
        );
    }
    let published = match &cfg.publish {
        None => None,
        Some((api, node)) => {
            let name = slices::slice_name(node, &cfg.driver, &cfg.pool);
            let mut obj = slices::slice(&name, node, &cfg.driver, &cfg.pool, &cfg.devices);
            if let Some(n) = cfg.numa_nodes {
                slices::spread_numa(&mut obj, n);
            }
            slices::bind_conditions(&mut obj, &cfg.binding.0, &cfg.binding.1);
            slices::share_capacity(&mut obj, &cfg.shared_capacity);
            slices::node_allocatable(&mut obj, &cfg.node_allocatable);
            driver.faults().slice(&mut obj);
            // A large pool goes in several slices, each under the API's limit.
            let mut pool = slices::split_pool(&name, obj);
            driver.faults().pool(&mut pool);
            for (n, o) in &pool {
                if let Err(e) = slices::publish(api, o, Duration::from_secs(10)).await {
                    if let Some(r) = reg_served.take() {
                        r.shut().await;
                    }
                    return Err(e);
                }
                log.event(
                    "resourceslice",
                    &[
                        ("name", json!(n)),
                        ("node", json!(node)),
                        ("server", json!(api.authority)),
                        ("devices", json!(o["spec"]["devices"].as_array().map(Vec::len).unwrap_or(0))),
                    ],
                );
            }
            Some((api, pool))
        }
    };
    let mut next_check = tokio::time::Instant::now() + REPUBLISH_CHECK;
    let result = loop {
        tokio::select! {
            _ = tasks.cancelled() => break Ok(()),
            words = driver.crashed() => {
                // A crash (a fault): the process ends at once as a Go panic
                // ends it — exit status 2, its sockets and files left behind.
                eprintln!("{words}");
                std::process::exit(2);
            }
            Some(st) = status_rx.recv() => {
                if st.plugin_registered {
                    log.event("registered", &[("driver", json!(cfg.driver)), ("via", json!("plugin-watcher"))]);
                } else {
                    log.event("registration-rejected", &[("driver", json!(cfg.driver)), ("error", json!(st.error))]);
                    break Err(Error::failed(format!("the kubelet rejected the registration of {}: {}", cfg.driver, st.error)));
                }
            }
            _ = tokio::time::sleep(POLL) => {
                if !guard.still_ours() {
                    log.event("restarting", &[("driver", json!(cfg.driver)), ("reason", json!("our service socket was deleted"))]);
                    let _ = endpoint_tx.send(None);
                    serving.stop().await;
                    serving = tasks.child();
                    guard = serve_services(driver, cfg, &sock, &serving).await?;
                    let _ = endpoint_tx.send(Some(sock.clone()));
                }
                let due = tokio::time::Instant::now() >= next_check && driver.faults().republishes();
                if let Some((api, pool)) = published.as_ref().filter(|_| due) {
                    next_check = tokio::time::Instant::now() + REPUBLISH_CHECK;
                    for (name, obj) in pool {
                        republish(api, name, obj, log).await;
                    }
                }
                if reg_served.as_ref().is_some_and(|r| !r.still_ours()) {
                    if let Some(r) = reg_served.take() { r.shut().await; }
                    log.event("restarting", &[("driver", json!(cfg.driver)), ("reason", json!("our plugin-watcher socket was deleted"))]);
                    reg_served = Some(serve_watcher(&reg_path, reg.clone(), tasks).await?);
                }
            }
        }
    };
    if let Some(r) = reg_served.take() {
        r.shut().await;
    }
    if let Some((api, pool)) = published.filter(|_| cfg.withdraw_on_exit) {
        for (name, _) in pool {
            match slices::withdraw(api, &name, Duration::from_secs(5)).await {
                Ok(()) => log.event("resourceslice-deleted", &[("name", json!(name))]),
                Err(e) => log.event("error", &[("error", json!(e.to_string()))]),
            }
        }
    }
    if driver.faults().removes_specs_at_exit() {
        driver.remove_claim_specs();
    }
    log.event("stopping", &[("driver", json!(cfg.driver))]);
    drop(guard);
    drop(outside);
    result
}

/// A driver configuration for tests: gpu.example.com, pool-0, dev-0, under /var/lib/kubelet.
#[cfg(test)]
pub(crate) fn test_config(faults: Vec<Fault>) -> Config {
    let root = PathBuf::from("/var/lib/kubelet");
    Config {
        driver: "gpu.example.com".into(),
        pool: "pool-0".into(),
        devices: vec!["dev-0".into()],
        registry_dir: root.join("plugins_registry"),
        plugin_dir: root.join("plugins/gpu.example.com"),
        kubelet_root: root,
        host_root: HostRoot::default(),
        cdi_dir: "/var/run/cdi".into(),
        services: vec![DRA_V1.into(), DRA_V1BETA1.into(), HEALTH_V1.into()],
        register: true,
        control_socket: "/tmp/x.sock".into(),
        faults,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(faults: Vec<Fault>) -> Config {
        test_config(faults)
    }

    #[test]
    fn each_registration_fault_breaks_exactly_its_rule() {
        let root = Path::new("/var/lib/kubelet");
        let ok = cfg(vec![]);
        assert!(ok.validate().is_ok());
        assert!(rules::info_violations(&ok.info(&ok.service_socket(None)), root).is_empty());
        for (fault, rule) in [
            (Fault::WrongType, "plugin-type"),
            (Fault::BadDriverName, "driver-name"),
            (Fault::RelativeEndpoint, "endpoint-absolute"),
            (Fault::LongEndpoint, "endpoint-length"),
            (Fault::NoVersions, "supported-versions"),
            (Fault::V1beta1First, "version-order"),
        ] {
            let c = cfg(vec![fault.clone()]);
            assert!(c.validate().is_ok(), "{fault:?}");
            let v = rules::info_violations(&c.info(&c.service_socket(None)), root);
            assert_eq!(v.iter().map(|x| x.rule.id).collect::<Vec<_>>(), [rule], "{fault:?}");
        }
        let c = cfg(vec![Fault::EndpointOutsideRoot]);
        let v = rules::info_violations(&c.info(&c.service_socket(Some(Path::new("/tmp/o")))), root);
        assert_eq!(v.iter().map(|x| x.rule.id).collect::<Vec<_>>(), ["endpoint-inside-root"]);
        assert_eq!(cfg(vec![Fault::UnservedV1]).served(), [DRA_V1BETA1, HEALTH_V1]);
        assert_eq!(cfg(vec![Fault::UnservedHealth]).served(), [DRA_V1, DRA_V1BETA1]);
    }

    #[test]
    fn every_fault_name_parses_and_bad_ones_say_what_is_known() {
        for (name, _) in FAULTS {
            let n = name.replace("DURATION", "1s").replace("MESSAGE", "boom");
            assert!(n.parse::<Fault>().is_ok(), "{n}");
        }
        assert_eq!("slow=250ms".parse::<Fault>().unwrap(), Fault::Slow(Duration::from_millis(250)));
        assert!("slow".parse::<Fault>().unwrap_err().to_string().contains("needs a value"));
        assert!("misssing-uid".parse::<Fault>().unwrap_err().to_string().contains("did you mean missing-uid"));
        let mut bad = cfg(vec![]);
        bad.driver = "Bad".into();
        assert!(bad.validate().unwrap_err().to_string().contains("--driver"));
        let mut bad = cfg(vec![]);
        bad.services = vec![HEALTH_V1.into()];
        assert!(bad.validate().unwrap_err().to_string().contains("--services"));
        let mut bad = cfg(vec![]);
        bad.rolling_uid = Some("a/b".into());
        assert!(bad.validate().is_err());
    }
}
