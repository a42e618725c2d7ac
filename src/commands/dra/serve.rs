//! `dpctl dra serve`: a simulated DRA driver's kubelet plugin, registered
//! through the plugin watcher.

use super::Ctx;
use crate::core::log::{LogFormat, Logger};
use crate::core::{Error, Result};
use crate::plugin::dra::{Config, CONTROL_DIR, CONTROL_PREFIX};
use crate::protocol::dra::{DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1};
use crate::render::Format;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) const EXAMPLES: &str = "Examples:
  # a driver with 4 devices under a temp kubelet root; CDI specs per prepared claim in /tmp/k/cdi
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi
  # a second instance during a rolling update (uid-named sockets)
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --rolling-update 2 --cdi-dir /tmp/k/cdi
  # device metadata (KEP-5304) for each prepared claim, mounted through CDI (claims from the API server)
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi --kubeconfig /tmp/k/kubeconfig --device-metadata
  # consumable capacity (KEP-5075): claims share each device's 8Gi, 1Gi by default, in steps of 1Gi
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --kubeconfig /tmp/k/kubeconfig --shared-capacity memory=8Gi/default=1Gi/step=1Gi
  # node-allocatable resources (KEP-5517; kept with mock-kubelet --feature-gates DRANodeAllocatableResources=true)
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --kubeconfig /tmp/k/kubeconfig --node-allocatable cpu=2,memory=4Gi
  # break a rule on purpose: dra probe flags it
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --fault missing-uid --fault long-message";

/// `dpctl dra serve`
#[derive(Debug, Args)]
pub struct DraServeArgs {
    /// The driver name (a lowercase DNS subdomain, e.g. gpu.example.com)
    #[arg(long, value_name = "NAME")]
    pub driver: String,
    /// The pool the devices are in
    #[arg(long, value_name = "NAME", default_value = "pool-0")]
    pub pool: String,
    /// How many devices (named dev-0, dev-1, …)
    /// (a pool of more than 128 is published in several ResourceSlices, as the API requires)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub devices: u32,
    /// Where to write a CDI spec per prepared claim (removed on unprepare) [default: /var/run/cdi under --root]
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Option<PathBuf>,
    /// The services to serve and list in supported_versions, in order
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_values_t = [crate::protocol::dra::DRA_V1.to_string(), crate::protocol::dra::DRA_V1BETA1.to_string(), crate::protocol::dra::HEALTH_V1.to_string(), crate::protocol::dra::HEALTH_V1ALPHA1.to_string()])]
    pub services: Vec<String>,
    /// Do not create the plugin-watcher registration socket (serve the service socket only)
    #[arg(long)]
    pub no_register: bool,
    /// Rolling-update mode: sockets <driver>-UID-reg.sock and dra-UID.sock, so two instances serve at once
    #[arg(long, value_name = "UID")]
    pub rolling_update: Option<String>,
    /// health_check_timeout_seconds sent for each device (0: the kubelet's default)
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub health_timeout: i64,
    /// Break one rule on purpose (repeatable): wrong-type, bad-driver-name, relative-endpoint,
    /// endpoint-outside-root, long-endpoint, no-versions, v1beta1-first, dead-endpoint, unserved-v1,
    /// slow=DURATION, missing-uid, extra-uid, no-pool-name, bad-cdi-id, not-idempotent, ignore-allocation, unserved-health,
    /// health-stream-end, health-unimplemented, health-bad-device, long-message, no-timestamp, prepare-error=MESSAGE, keep-cdi-spec,
    /// empty-slice, incomplete-pool, no-republish, answer-other-claims, wrong-pool, empty-cdi-edits,
    /// health-unknown-device, stale-health, memory-only-state, new-cdi-ids, remove-cdi-on-exit, ignore-uid,
    /// exit-on-missing-claim, not-idempotent-error, foreign-request-names, deadlock-after-unknown-unprepare,
    /// racy-prepare, answer-from-checkpoint, ignore-config, late-prepare, unserved-v1beta1
    #[arg(long = "fault", value_name = "FAULT")]
    pub faults: Vec<crate::plugin::dra::Fault>,
    /// Also write a common CDI spec at start (k8s.<driver>/claim=common, kept on unprepare) and
    /// return its ID with every prepared device, as the example driver does
    #[arg(long)]
    pub common_cdi_spec: bool,
    /// Delete its ResourceSlices when it stops. Off by default, as the kubeletplugin helper: the
    /// kubelet wipes a gone driver's slices after 30 s, and slices kept across a quick update
    /// stay allocatable (DRA-ROLL-002 fails a driver that deletes them). For use without a kubelet
    #[arg(long)]
    pub withdraw_on_exit: bool,
    /// Publish the devices as a ResourceSlice to the API server of this kubeconfig (http or https,
    /// as client-go reads it, exec credential plugins too) [default: KUBECONFIG's files merged;
    /// in a pod without them: the in-cluster config of its service account]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (of --kubeconfig or KUBECONFIG) [default: its current-context]
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The node the ResourceSlice names [default: this host's name]
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// The live-control socket [default: <kubelet-root>/plugins/<driver>/dpctl-control/dra-<pid>.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// An env var each prepared device's CDI edits set ({id} = the device), instead of
    /// DPCTL_DRA_DEVICE and DPCTL_DRA_CLAIM (repeatable; to match a device plugin's Allocate, see dpctl compare)
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = crate::commands::serve::key_value)]
    pub env: Vec<(String, String)>,
    /// Spread the devices over N NUMA nodes, published as each device's `numaNode` attribute in
    /// the ResourceSlice (as `dpctl serve --numa-nodes` reports them in Device.topology)
    #[arg(long = "numa-nodes", value_name = "N", requires = "kubeconfig", value_parser = clap::value_parser!(u32).range(1..=crate::core::limits::MAX_NUMA_NODES as i64))]
    pub numa_nodes: Option<u32>,
    /// Publish each device with these bindingConditions (KEP-5007): the scheduler binds a pod
    /// only once a controller sets each True in the claim's status.devices (with
    /// --binding-failure-conditions; at most 4)
    #[arg(long, value_name = "TYPE,…", requires_all = ["kubeconfig", "binding_failure_conditions"], value_delimiter = ',')]
    pub binding_conditions: Vec<String>,
    /// Publish each device with these bindingFailureConditions: any True in the claim's
    /// status.devices makes the scheduler deallocate the claim (with --binding-conditions; at most 4)
    #[arg(long, value_name = "TYPE,…", requires = "binding_conditions", value_delimiter = ',')]
    pub binding_failure_conditions: Vec<String>,
    /// Consumable capacity (KEP-5075): publish each device with allowMultipleAllocations and these
    /// capacities, so several claims get shares of one device (each result a shareID and its
    /// consumedCapacity; a CDI device per share). NAME=QUANTITY[/default=QUANTITY][/step=QUANTITY]:
    /// the request policy's default and validRange step (min: the default). Beta from 1.36: on a
    /// 1.34–1.35 mock kubelet the API server drops allowMultipleAllocations and the policy unless
    /// its DRAConsumableCapacity gate is on (mock-kubelet --feature-gates)
    #[arg(long, value_name = "NAME=QUANTITY[/…],…", requires = "kubeconfig", value_delimiter = ',')]
    pub shared_capacity: Vec<crate::plugin::dra::slices::SharedCapacity>,
    /// Node-allocatable resources (KEP-5517): publish each device's nodeAllocatableResources, each
    /// RESOURCE (cpu, memory, …) a mapping of deviceMultiplier QUANTITY. Alpha: the API server drops the
    /// field unless its DRANodeAllocatableResources gate is on (mock-kubelet --feature-gates)
    #[arg(long, value_name = "RESOURCE=QUANTITY,…", requires = "kubeconfig", value_delimiter = ',', value_parser = node_allocatable)]
    pub node_allocatable: Vec<(String, String)>,
    /// Device metadata (KEP-5304), as the kubeletplugin helper's EnableDeviceMetadata writes it: per
    /// request of a prepared claim a metadata.json under <plugin dir>/dra-device-metadata/ and a CDI spec
    /// mounting it at /var/run/kubernetes.io/dra-device-attributes/… (removed on unprepare).
    /// VERSIONS: the metadata.resource.k8s.io versions written, in order (v1beta1 required;
    /// v1alpha1 too for consumers built for 1.36) [default: v1beta1]. Needs an API server (the claims)
    #[arg(long, value_name = "VERSIONS", num_args = 0..=1, require_equals = true, default_missing_value = "v1beta1")]
    pub device_metadata: Option<String>,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// The driver's configuration from the command line.
pub fn config(ctx: &Ctx, a: &DraServeArgs) -> Result<Config> {
    let plugin_dir = ctx.paths.kubelet_root.join("plugins").join(&a.driver);
    let mut services = a.services.clone();
    services.dedup();
    for s in &services {
        if ![DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1].contains(&s.as_str()) {
            return Err(Error::usage(format!(
                "--services: {} is not one of {DRA_V1}, {DRA_V1BETA1}, {HEALTH_V1}, {HEALTH_V1ALPHA1}",
                crate::core::text::quote(s)
            )));
        }
    }
    Ok(Config {
        driver: a.driver.clone(),
        pool: a.pool.clone(),
        devices: (0..a.devices).map(|i| format!("dev-{i}")).collect(),
        kubelet_root: ctx.paths.kubelet_root.clone(),
        registry_dir: ctx.paths.plugins_registry_dir(None),
        control_socket: a.control_socket.as_ref().map(|p| ctx.paths.host(p)).unwrap_or_else(|| {
            plugin_dir.join(CONTROL_DIR).join(format!("{CONTROL_PREFIX}{}.sock", std::process::id()))
        }),
        plugin_dir,
        host_root: ctx.paths.root.clone(),
        cdi_dir: ctx.paths.host(a.cdi_dir.as_deref().unwrap_or(Path::new("/var/run/cdi"))),
        services,
        register: !a.no_register,
        rolling_uid: a.rolling_update.clone(),
        health_timeout_secs: a.health_timeout,
        common_cdi_spec: a.common_cdi_spec,
        withdraw_on_exit: a.withdraw_on_exit,
        cdi_env: a.env.clone(),
        numa_nodes: a.numa_nodes,
        binding: (a.binding_conditions.clone(), a.binding_failure_conditions.clone()),
        shared_capacity: a.shared_capacity.clone(),
        node_allocatable: a.node_allocatable.clone(),
        faults: a.faults.clone(),
        metadata: match &a.device_metadata {
            None => vec![],
            Some(v) => v
                .split(',')
                .map(|x| x.trim().parse::<crate::plugin::dra::metadata::Version>())
                .collect::<std::result::Result<Vec<_>, _>>()
                .and_then(|v| crate::plugin::dra::metadata::check_versions(&v).map(|()| v))
                .map_err(|e| Error::usage(format!("--device-metadata: {e}")))?,
        },
        publish: match api_server(a)? {
            None => None,
            Some(api) => {
                let node = match &a.node_name {
                    Some(n) => n.clone(),
                    None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                        .map(|h| h.trim().to_string())
                        .ok()
                        .filter(|h| !h.is_empty())
                        .ok_or_else(|| Error::usage("--node-name: this host's name is unknown; name the node"))?,
                };
                Some((api, node))
            }
        },
    })
}

/// A `--node-allocatable` entry: `RESOURCE=QUANTITY`.
fn node_allocatable(s: &str) -> std::result::Result<(String, String), crate::cli::FlagValueError> {
    use crate::cli::FlagValueError;
    let (r, q) = s.split_once('=').ok_or_else(|| FlagValueError::part(s, "want RESOURCE=QUANTITY, e.g. cpu=2"))?;
    let r = r.trim();
    if r.is_empty() {
        return Err(FlagValueError::part(s, "no resource name; want RESOURCE=QUANTITY, e.g. cpu=2"));
    }
    crate::controlplane::objects::quantity::Quantity::read(q).map_err(FlagValueError::Quantity)?;
    Ok((r.to_string(), q.trim().to_string()))
}

/// Where to publish: `--kubeconfig` (its `--context`), else `KUBECONFIG`'s
/// files merged, else in a pod its in-cluster config, else nowhere.
fn api_server(a: &DraServeArgs) -> Result<Option<crate::client::kube::ApiServer>> {
    let env = std::env::var("KUBECONFIG").ok();
    crate::client::kube::load_default(a.kubeconfig.as_deref(), env.as_deref(), a.context.as_deref())
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, a: &DraServeArgs) -> Result<()> {
    if ctx.format != Format::Table {
        return Err(Error::usage(
            "-o is not supported here: dra serve logs events; use --log-format json for JSON lines",
        ));
    }
    let cfg = config(ctx, a)?;
    let log = Logger::new(a.log_format);
    let tasks = crate::core::task::Tasks::new();
    let r =
        crate::core::task::until_interrupted(&tasks, crate::plugin::dra::run(cfg, log.clone(), tasks.clone())).await;
    log.close(Duration::from_secs(2));
    r
}
