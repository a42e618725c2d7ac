//! `dpctl serve`: simulated devices as a device plugin. Wires the config
//! (flags or `--config`), one plugin lifecycle per resource, health flaps
//! and the live-control socket together, until SIGINT/SIGTERM.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::cli::{duration_arg, positive_duration_arg, FlagValueError, RegistrationArgs};
use crate::core::log::{LogFormat, Logger};
use crate::core::task::{until_interrupted, Tasks};
use crate::core::{Error, Result};
use crate::plugin::config::{
    parse_file, AllocateTemplate, Faults, FileConfig, MountTemplate, Policy, PreferredFault, ResourceConfig, Scope,
};
use crate::plugin::control;
use crate::plugin::registrar::Settings;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// `dpctl serve`: its surface.
pub const COMMAND: Spec = Spec {
    name: "serve",
    about: "Serve simulated devices as a device plugin, registered with a real or mock kubelet (DRA: dra serve)",
    group: super::surface::Group::Simulate,
    args: surface::args::<ServeArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: Some("serve logs events; use --log-format json for JSON lines"),
    parse: surface::parse::<ServeArgs>,
};

const EXAMPLES: &str = "Examples:
  # Four devices on two NUMA nodes, registered with the kubelet
  dpctl serve --resource vendor.example/foo --count 4 --numa-nodes 2
  # only serve (no kubelet), at a fixed socket name, for dpctl probe
  dpctl serve --plugin-dir /tmp/dp --resource vendor.example/foo --count 4 --no-register --socket-name foo.sock
  # device nodes per allocated device: {i} is the device's index in the served list
  dpctl serve --resource vendor.example/gpu --count 4 --device-spec '/dev/gpu{i}:/dev/gpu{i}:rw'
  # resources and faults from a file
  dpctl serve --config plugin.json";

/// `dpctl serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the resources in this JSON file, e.g. {"resources":[{"resource":"vendor.example/foo","count":4}]};
    /// every per-resource flag is a camelCase field there (idPattern, numaNodes, preStart, allocate, faults, …)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["resource", "count", "devices", "idPattern", "numaNodes", "unhealthy", "preStart", "preferredAllocation", "policy", "allocate.container.envs", "allocate.container.annotations", "allocate.container.mounts", "allocate.device.devices", "allocate.device.cdiDevices", "socketName", "faults.flap", "faults.allocateLatency", "faults.allocateFailureRate", "faults.preferred", "faults.closeStreamAfter", "faults.preStartLatency", "faults.preStartFail", "faults.noReregister", "faults.reregisterDelay", "faults.noReregisterOnDisconnect", "faults.newIdsAfterRestart", "faults.deleteOtherSockets", "faults.keepSocketOnExit", "faults.exitWithoutKubelet", "faults.registerTwice", "faults.unhealthyOnExit", "faults.hangAfterCancel", "faults.emptyFirstSnapshot", "faults.firstSnapshotDelay", "faults.healthOneStream"])]
    pub config: Option<PathBuf>,
    /// Extended resource name, e.g. vendor.example/foo
    #[arg(long, value_name = "NAME", required_unless_present = "config")]
    pub resource: Option<String>,
    /// Number of devices (IDs from --id-pattern), at most 100000
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::core::limits::MAX_DEVICES as u64), conflicts_with = "devices")]
    pub count: Option<u64>,
    /// Explicit device IDs, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub devices: Vec<String>,
    /// ID pattern; {i} is the index [default: <short name>-{i}, e.g. foo-{i}]
    #[arg(id = "idPattern", long = "id-pattern", value_name = "PATTERN")]
    pub id_pattern: Option<String>,
    /// Spread the devices over N NUMA nodes (reported in Device.topology), at most 1024
    #[arg(id = "numaNodes", long = "numa-nodes", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=crate::core::limits::MAX_NUMA_NODES as i64))]
    pub numa_nodes: Option<u32>,
    /// Devices that start Unhealthy, comma-separated
    #[arg(long, value_delimiter = ',', value_name = "ID,ID")]
    pub unhealthy: Vec<String>,
    /// Advertise pre_start_required and log PreStartContainer calls
    #[arg(id = "preStart", long = "pre-start")]
    pub pre_start: bool,
    /// Advertise and implement GetPreferredAllocation
    #[arg(id = "preferredAllocation", long = "preferred-allocation")]
    pub preferred_allocation: bool,
    /// GetPreferredAllocation policy
    #[arg(long, value_enum, default_value_t = Policy::Packed)]
    pub policy: Policy,
    /// Allocate: an env var per container; {ids} = the allocated IDs [default: <NAME>_VISIBLE_DEVICES={ids}]
    #[arg(id = "allocate.container.envs", long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
    pub env: Vec<(String, String)>,
    /// Allocate: an annotation per container ({ids})
    #[arg(id = "allocate.container.annotations", long = "annotation", value_name = "KEY=VALUE", value_parser = key_value)]
    pub annotation: Vec<(String, String)>,
    /// Allocate: a mount per container ({ids})
    #[arg(id = "allocate.container.mounts", long = "mount", value_name = "HOST:CONTAINER[:ro]", value_parser = mount_arg)]
    pub mount: Vec<MountTemplate>,
    /// Allocate: a device node per allocated device; {id} = the device ID, {i} = its index in the
    /// served list (gpu-3 → 3), {pos} = its position in the request
    #[arg(id = "allocate.device.devices", long = "device-spec", value_name = "HOST:CONTAINER[:PERMS]", value_parser = device_spec_arg)]
    pub device_spec: Vec<crate::plugin::config::DeviceSpecTemplate>,
    /// Allocate: a CDI device name per allocated device, e.g. vendor.example/foo={id} ({i}, {pos} as --device-spec)
    #[arg(id = "allocate.device.cdiDevices", long = "cdi", value_name = "NAME")]
    pub cdi: Vec<String>,
    /// How to register (kubelet socket, plugin watcher, …)
    #[command(flatten)]
    pub reg: RegistrationArgs,
    /// Live-control socket [default: <plugin-dir>/dpctl-control/serve-<pid>.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// Log format
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Fault: toggle a device's health every PERIOD (repeatable)
    #[arg(id = "faults.flap", long = "flap", value_name = "DEVICE:PERIOD", value_parser = flap_arg)]
    pub flap: Vec<crate::plugin::config::Flap>,
    /// Fault: extra latency of every Allocate
    #[arg(id = "faults.allocateLatency", long = "allocate-latency", value_name = "DURATION", value_parser = duration_arg)]
    pub allocate_latency: Option<Duration>,
    /// Fault: fraction of Allocate calls that fail with Internal (0..1)
    #[arg(id = "faults.allocateFailureRate", long = "allocate-failure-rate", value_name = "RATE", value_parser = rate_arg)]
    pub allocate_failure_rate: Option<f64>,
    /// Fault: a wrong GetPreferredAllocation answer
    #[arg(id = "faults.preferred", long = "preferred-fault", value_enum, value_name = "KIND")]
    pub preferred_fault: Option<PreferredFault>,
    /// Fault: end every ListAndWatch stream after N messages
    #[arg(id = "faults.closeStreamAfter", long = "close-stream-after", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub close_stream_after: Option<u64>,
    /// Fault: extra latency of PreStartContainer
    #[arg(id = "faults.preStartLatency", long = "pre-start-latency", value_name = "DURATION", value_parser = duration_arg)]
    pub pre_start_latency: Option<Duration>,
    /// Fault: PreStartContainer fails with Internal
    #[arg(id = "faults.preStartFail", long = "pre-start-fail")]
    pub pre_start_fail: bool,
    /// Fault: never register again after a kubelet restart
    #[arg(id = "faults.noReregister", long = "no-reregister")]
    pub no_reregister: bool,
    /// Fault: register again only DURATION after a kubelet restart
    #[arg(id = "faults.reregisterDelay", long = "reregister-delay", value_name = "DURATION", value_parser = duration_arg)]
    pub reregister_delay: Option<Duration>,
    /// Fault: never register again when the kubelet closes our ListAndWatch stream and opens none
    /// (by default serve registers again, as kubelets up to 1.36 need after a rolling update, kubernetes#121994)
    #[arg(id = "faults.noReregisterOnDisconnect", long = "no-reregister-on-disconnect")]
    pub no_reregister_on_disconnect: bool,
    /// Fault: new device IDs at every start and kubelet restart
    #[arg(id = "faults.newIdsAfterRestart", long = "new-ids-after-restart")]
    pub new_ids_after_restart: bool,
    /// Fault: delete every other socket in the plugin directory at start (kubelet.sock excepted)
    #[arg(id = "faults.deleteOtherSockets", long = "delete-other-sockets")]
    pub delete_other_sockets: bool,
    /// Fault: leave the socket behind on SIGTERM
    #[arg(id = "faults.keepSocketOnExit", long = "keep-socket-on-exit")]
    pub keep_socket_on_exit: bool,
    /// Fault: exit at start when kubelet.sock is missing, even with --retry
    #[arg(id = "faults.exitWithoutKubelet", long = "exit-without-kubelet")]
    pub exit_without_kubelet: bool,
    /// Fault: register a second time from the same socket once the kubelet's stream is open,
    /// as a kubelet.sock watcher that takes the socket it finds at start for a new kubelet
    /// (a 1.37 kubelet refuses it, kubernetes#139338)
    #[arg(id = "faults.registerTwice", long = "register-twice")]
    pub register_twice: bool,
    /// Fault: on SIGTERM, send every stream a last list with every device Unhealthy before exiting
    /// (since 1.37 that list is the node's devices while another instance runs, kubernetes#135437)
    #[arg(id = "faults.unhealthyOnExit", long = "unhealthy-on-exit")]
    pub unhealthy_on_exit: bool,
    /// Fault: once the kubelet cancels a ListAndWatch stream, later streams never send
    #[arg(id = "faults.hangAfterCancel", long = "hang-after-cancel")]
    pub hang_after_cancel: bool,
    /// Fault: every ListAndWatch stream starts with an empty list; the devices follow 1 ms later
    #[arg(id = "faults.emptyFirstSnapshot", long = "empty-first-snapshot")]
    pub empty_first_snapshot: bool,
    /// Fault: every ListAndWatch stream sends its first list only after DURATION
    #[arg(id = "faults.firstSnapshotDelay", long = "first-snapshot-delay", value_name = "DURATION", value_parser = duration_arg)]
    pub first_snapshot_delay: Option<Duration>,
    /// Fault: a device change is sent on one stream only, the oldest open one (a shared update channel)
    #[arg(id = "faults.healthOneStream", long = "health-one-stream")]
    pub health_one_stream: bool,
}

pub(crate) fn key_value(s: &str) -> Result<(String, String), FlagValueError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(FlagValueError::not_form(s, "KEY=VALUE")),
    }
}

fn mount_arg(s: &str) -> Result<MountTemplate, FlagValueError> {
    let parts: Vec<&str> = s.split(':').collect();
    let (host, ctr, ro) = match parts.as_slice() {
        [h, c] => (h, c, false),
        [h, c, "ro"] => (h, c, true),
        [h, c, "rw"] => (h, c, false),
        _ => return Err(FlagValueError::not_form(s, "HOST:CONTAINER[:ro|rw]")),
    };
    if host.is_empty() || ctr.is_empty() {
        return Err(FlagValueError::part(s, "both paths are needed (HOST:CONTAINER)"));
    }
    Ok(MountTemplate { host_path: host.to_string(), container_path: ctr.to_string(), read_only: ro })
}

fn device_spec_arg(s: &str) -> Result<crate::plugin::config::DeviceSpecTemplate, FlagValueError> {
    let parts: Vec<&str> = s.split(':').collect();
    let (host, ctr, perms) = match parts.as_slice() {
        [h, c] => (h, c, "rw"),
        [h, c, p] => (h, c, *p),
        _ => return Err(FlagValueError::not_form(s, "HOST:CONTAINER[:PERMISSIONS]")),
    };
    if host.is_empty() || ctr.is_empty() {
        return Err(FlagValueError::part(s, "both paths are needed (HOST:CONTAINER)"));
    }
    if perms.is_empty() || !perms.chars().all(|c| "rwm".contains(c)) {
        return Err(FlagValueError::part(s, "permissions must be any of r, w, m"));
    }
    Ok(crate::plugin::config::DeviceSpecTemplate {
        host_path: host.to_string(),
        container_path: ctr.to_string(),
        permissions: perms.to_string(),
    })
}

fn flap_arg(s: &str) -> Result<crate::plugin::config::Flap, FlagValueError> {
    let (dev, period) =
        s.rsplit_once(':').ok_or_else(|| FlagValueError::not_form(s, "DEVICE:PERIOD (e.g. foo-1:2s)"))?;
    let period = positive_duration_arg(period)?;
    Ok(crate::plugin::config::Flap { device: dev.to_string(), period })
}

fn rate_arg(s: &str) -> Result<f64, FlagValueError> {
    let r: f64 = s.parse().map_err(|_| FlagValueError::not_form(s, "a number"))?;
    if !(0.0..=1.0).contains(&r) {
        return Err(FlagValueError::Range("must be between 0 and 1".into()));
    }
    Ok(r)
}

impl Invocation for ServeArgs {
    fn workers(&self) -> usize {
        1
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Build the one resource the flags describe.
pub fn resource_from_flags(a: &ServeArgs) -> Result<ResourceConfig> {
    let resource = a.resource.clone().ok_or_else(|| Error::usage("--resource NAME is required (or --config FILE)"))?;
    let template = AllocateTemplate {
        container: Scope {
            envs: a.env.iter().cloned().collect(),
            annotations: a.annotation.iter().cloned().collect(),
            mounts: a.mount.clone(),
            ..Default::default()
        },
        device: Scope { devices: a.device_spec.clone(), cdi_devices: a.cdi.clone(), ..Default::default() },
    };
    let r = ResourceConfig {
        resource,
        socket_name: a.reg.socket_name.clone(),
        count: if a.devices.is_empty() { Some(a.count.unwrap_or(1) as usize) } else { None },
        id_pattern: a.id_pattern.clone(),
        devices: a
            .devices
            .iter()
            .map(|id| crate::plugin::config::DeviceConfig {
                id: id.clone(),
                health: crate::api::HEALTHY.into(),
                numa: None,
            })
            .collect(),
        numa_nodes: a.numa_nodes,
        unhealthy: a.unhealthy.clone(),
        pre_start: a.pre_start,
        preferred_allocation: a.preferred_allocation,
        policy: a.policy,
        allocate: Some(template),
        faults: Faults {
            flap: a.flap.clone(),
            allocate_latency: a.allocate_latency,
            allocate_failure_rate: a.allocate_failure_rate.unwrap_or(0.0),
            preferred: a.preferred_fault.unwrap_or_default(),
            close_stream_after: a.close_stream_after,
            pre_start_latency: a.pre_start_latency,
            pre_start_fail: a.pre_start_fail,
            no_reregister: a.no_reregister,
            reregister_delay: a.reregister_delay,
            no_reregister_on_disconnect: a.no_reregister_on_disconnect,
            new_ids_after_restart: a.new_ids_after_restart,
            delete_other_sockets: a.delete_other_sockets,
            keep_socket_on_exit: a.keep_socket_on_exit,
            exit_without_kubelet: a.exit_without_kubelet,
            register_twice: a.register_twice,
            unhealthy_on_exit: a.unhealthy_on_exit,
            hang_after_cancel: a.hang_after_cancel,
            empty_first_snapshot: a.empty_first_snapshot,
            first_snapshot_delay: a.first_snapshot_delay,
            health_one_stream: a.health_one_stream,
        },
    };
    r.check().map_err(|e| Error::usage(format!("{}: {}", flag_for(&e.field), e.problem)).caused_by(e))?;
    Ok(r)
}

/// The flag that sets a resource's config field: each per-resource flag's
/// clap id is its field's path in the config file (`idPattern`,
/// `faults.flap`), so an error about `faults.flap[0].device` names `--flap`.
/// A field no flag sets is named as it is.
fn flag_for(field: &str) -> String {
    let cmd = surface::args::<ServeArgs>(clap::Command::new("serve"));
    let under = |id: &str| field.strip_prefix(id).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']));
    cmd.get_arguments()
        .filter(|a| under(a.get_id().as_str()))
        .max_by_key(|a| a.get_id().as_str().len())
        .and_then(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .unwrap_or_else(|| field.to_string())
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &ServeArgs) -> Result<()> {
    let (file, resources) = match &a.config {
        Some(path) => {
            let text = crate::core::limits::read_file(path, crate::core::limits::MAX_CONFIG_FILE, "config")
                .map_err(|e| Error::usage(format!("{}: cannot read config: {e}", path.display())))?;
            let f = parse_file(&text, path)?;
            let r = f.resources.clone();
            (f, r)
        }
        None => (FileConfig::default(), vec![resource_from_flags(a)?]),
    };
    let mut settings = Settings::resolve(&ctx.paths, ctx.plugin_dir_given, ctx.timeout, &a.reg.requested(), &file)?;
    // A well-written plugin registers again when the kubelet closed its
    // stream and opened none (kubelets up to 1.36 do that to the newer
    // instance of a rolling update, kubernetes#121994); serve does by
    // default, `--no-reregister-on-disconnect` is the fault that does not.
    settings.reregister_on_disconnect = true;
    let plugin_dir = settings.plugin_dir.clone();
    let log = Logger::new(a.log_format.or(file.log_format).unwrap_or(LogFormat::Human));
    let control_path = a
        .control_socket
        .clone()
        .or(file.control_socket.clone())
        .unwrap_or_else(|| control::default_socket(&plugin_dir));

    let tasks = Tasks::new();
    let run = crate::plugin::run::run(&resources, settings, Some(control_path), log, tasks.clone());
    let r = until_interrupted(&tasks, run).await;
    tasks.stop().await;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_about_a_field_names_the_flag_that_sets_it() {
        for (field, flag) in [
            ("resource", "--resource"),
            ("idPattern", "--id-pattern"),
            ("devices[1].id", "--devices"),
            ("socketName", "--socket-name"),
            ("faults.flap[0].device", "--flap"),
            ("faults.preferred", "--preferred-fault"),
            ("faults.preStartLatency", "--pre-start-latency"),
            ("allocate.device.devices[0].permissions", "--device-spec"),
            ("counts", "counts"),
        ] {
            assert_eq!(flag_for(field), flag, "{field}");
        }
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    /// Each per-resource flag's id is a field a config file accepts, so the
    /// flag and the field cannot drift apart.
    #[test]
    fn every_per_resource_flag_is_a_config_field() {
        let mut cmd = surface::args::<ServeArgs>(clap::Command::new("serve"));
        cmd.build();
        let config = cmd.get_arguments().find(|a| a.get_id() == "config").expect("--config");
        let per_resource = cmd.get_arg_conflicts_with(config);
        // The rest set the process, not a resource (the file has them at its top level).
        let mut process: Vec<&str> = cmd
            .get_arguments()
            .filter(|a| a.get_id() != "help" && !per_resource.iter().any(|p| p.get_id() == a.get_id()))
            .map(|a| a.get_id().as_str())
            .collect();
        process.sort_unstable();
        assert_eq!(
            process,
            [
                "config",
                "control_socket",
                "kubelet_socket",
                "log_format",
                "no_register",
                "plugins_registry_dir",
                "registration",
                "reregister_on_disconnect",
                "retry"
            ],
            "a new per-resource flag belongs in --config's conflicts, with its config field's path as its id"
        );
        for arg in per_resource {
            let id = arg.get_id().as_str();
            let mut value = serde_json::Value::Null;
            for key in id.rsplit('.') {
                value = serde_json::json!({ key: value });
            }
            let mut resource = serde_json::json!({"resource": "v.e/foo"});
            merge(&mut resource, value);
            let text = serde_json::json!({ "resources": [resource] }).to_string();
            if let Err(e) = parse_file(&text, std::path::Path::new("c.json")) {
                assert!(!e.to_string().contains("unknown field"), "--{}: {e}", arg.get_long().unwrap_or(id));
            }
        }
    }
}
