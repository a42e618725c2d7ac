//! `dpctl serve`: simulated devices as a device plugin. Wires the config
//! (flags or `--config`), one plugin lifecycle per resource, health flaps
//! and the live-control socket together, until SIGINT/SIGTERM.

use super::Ctx;
use crate::cli::{RegistrationArgs, ServeArgs};
use crate::core::log::{LogFormat, Logger};
use crate::core::task::{until_interrupted, Tasks};
use crate::core::{Error, Result};
use crate::plugin::config::{check_resources, parse_file, AllocateTemplate, Faults, FileConfig, ResourceConfig, Scope};
use crate::plugin::control;
use crate::plugin::registrar::Settings;

/// The config field names of flag-built resources, as flag names.
const FLAG_NAMES: &[(&str, &str)] = &[
    ("faults.flap", "--flap"),
    ("faults.allocateFailureRate", "--allocate-failure-rate"),
    ("faults.preferred", "--preferred-fault"),
    ("faults.preStartFail", "--pre-start-fail/--pre-start-latency"),
    ("allocate.device.devices.permissions", "--device-spec"),
    ("idPattern", "--id-pattern"),
    ("socketName", "--socket-name"),
    ("numaNodes", "--numa-nodes"),
    ("unhealthy", "--unhealthy"),
    ("resource", "--resource"),
    ("devices", "--devices"),
    ("count", "--count"),
];

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
            new_ids_after_restart: a.new_ids_after_restart,
            delete_other_sockets: a.delete_other_sockets,
            keep_socket_on_exit: a.keep_socket_on_exit,
            exit_without_kubelet: a.exit_without_kubelet,
            hang_after_cancel: a.hang_after_cancel,
            empty_first_snapshot: a.empty_first_snapshot,
            first_snapshot_delay: a.first_snapshot_delay,
            health_one_stream: a.health_one_stream,
        },
    };
    check_resources(std::slice::from_ref(&r), "flags").map_err(|e| {
        let msg = e.to_string();
        let rest = msg.strip_prefix("flags: resources[0].").unwrap_or(&msg);
        let named = FLAG_NAMES
            .iter()
            .find(|(field, _)| rest.starts_with(field))
            .map(|(field, flag)| {
                let tail = rest[field.len()..].trim_start_matches(|c: char| c != ':');
                format!("{flag}{tail}")
            })
            .unwrap_or_else(|| rest.to_string());
        Error::usage(named)
    })?;
    Ok(r)
}

/// Resolve where a plugin role serves and how it registers: flags (and
/// env) first, then the config file, then the kubelet's defaults.
pub fn settings(ctx: &Ctx, reg: &RegistrationArgs, file: &FileConfig) -> Result<Settings> {
    // Every host path, from a flag or the config file, is under --root.
    let plugin_dir = match (&file.plugin_dir, ctx.plugin_dir_given) {
        (Some(d), false) => ctx.paths.host(d),
        _ => ctx.paths.plugin_dir.clone(),
    };
    if !plugin_dir.is_dir() {
        return Err(Error::failed(format!(
            "{}: plugin directory does not exist; create it or pass --plugin-dir",
            plugin_dir.display()
        )));
    }
    let kubelet_socket = reg
        .kubelet_socket
        .clone()
        .or(file.kubelet_socket.clone())
        .map(|k| ctx.paths.host(&k))
        .unwrap_or_else(|| plugin_dir.join(crate::core::paths::KUBELET_SOCKET_NAME));
    let mode = reg.registration.or(file.registration).unwrap_or_default();
    let registry_dir =
        ctx.paths.plugins_registry_dir(reg.plugins_registry_dir.as_deref().or(file.plugins_registry_dir.as_deref()));
    let register = !reg.no_register && file.register.unwrap_or(true);
    if register && mode == crate::plugin::config::RegistrationMode::PluginWatcher && !registry_dir.is_dir() {
        return Err(Error::failed(format!(
            "{}: plugin-watcher directory does not exist; create it or pass --plugins-registry-dir",
            registry_dir.display()
        )));
    }
    Ok(Settings {
        plugin_dir,
        socket_name: reg.socket_name.clone(),
        kubelet_socket,
        mode,
        registry_dir,
        register,
        retry: reg.retry || file.retry.unwrap_or(false),
        reregister_on_disconnect: reg.reregister_on_disconnect,
        timeout: ctx.timeout,
        host_root: ctx.paths.root.clone(),
    })
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
    let settings = settings(ctx, &a.reg, &file)?;
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
