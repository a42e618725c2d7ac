//! What `dpctl serve` serves: one or more resources, from flags or from a
//! JSON `--config` file (every flag has a config equivalent). Validation
//! errors name the field and exit 2.

use crate::api::{HEALTHY, UNHEALTHY};
use crate::core::limits::{MAX_DEVICES, MAX_ID_LEN, MAX_NUMA_NODES};
use crate::core::log::LogFormat;
use crate::core::text::quote;
use crate::core::{Error, Result};
use crate::protocol::deviceplugin;
use crate::protocol::registration::resource_name_problem;
use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Duration>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    s.map(|s| crate::core::time::parse_duration(&s).map_err(serde::de::Error::custom)).transpose()
}

fn de_duration_req<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    crate::core::time::parse_duration(&s).map_err(serde::de::Error::custom)
}

/// How a plugin registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegistrationMode {
    /// Call Register on the kubelet's kubelet.sock
    #[default]
    Kubelet,
    /// Serve pluginregistration.Registration in the plugin-watcher directory
    PluginWatcher,
}

/// GetPreferredAllocation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Fewest NUMA nodes, lowest IDs
    #[default]
    Packed,
    /// Spread across NUMA nodes
    Distributed,
}

/// A deliberately wrong GetPreferredAllocation answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreferredFault {
    /// Answer correctly
    #[default]
    None,
    /// Include an ID that was not offered
    Foreign,
    /// Answer one device more than asked for
    TooMany,
    /// Leave out the must-include devices
    DropMustInclude,
    /// Choose among all devices, ignoring which were offered
    IgnoreAvailable,
    /// Answer the first N offered devices, ignoring must-include
    FirstN,
}

/// The whole `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    /// `--plugin-dir`
    pub plugin_dir: Option<PathBuf>,
    /// `--kubelet-socket`
    pub kubelet_socket: Option<PathBuf>,
    /// `--registration`
    pub registration: Option<RegistrationMode>,
    /// `--plugins-registry-dir`
    pub plugins_registry_dir: Option<PathBuf>,
    /// `false` = `--no-register`
    pub register: Option<bool>,
    /// `--retry`
    pub retry: Option<bool>,
    /// `--log-format`
    pub log_format: Option<LogFormat>,
    /// `--control-socket`
    pub control_socket: Option<PathBuf>,
    /// The resources to serve.
    pub resources: Vec<ResourceConfig>,
}

/// One explicitly listed device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeviceConfig {
    /// Device ID.
    pub id: String,
    /// `Healthy` (default) or `Unhealthy`.
    #[serde(default = "healthy")]
    pub health: String,
    /// NUMA node.
    pub numa: Option<i64>,
}

fn healthy() -> String {
    HEALTHY.to_string()
}

/// A mount in an Allocate template.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MountTemplate {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Read-only.
    #[serde(default)]
    pub read_only: bool,
}

/// A device node in an Allocate template.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeviceSpecTemplate {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Any of r, w, m.
    #[serde(default = "rw")]
    pub permissions: String,
}

fn rw() -> String {
    "rw".into()
}

/// Parts of a ContainerAllocateResponse, with placeholders.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scope {
    /// Environment variables.
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    /// Mounts.
    #[serde(default)]
    pub mounts: Vec<MountTemplate>,
    /// Device nodes.
    #[serde(default)]
    pub devices: Vec<DeviceSpecTemplate>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names.
    #[serde(default)]
    pub cdi_devices: Vec<String>,
}

impl Scope {
    fn is_empty(&self) -> bool {
        self == &Scope::default()
    }
}

/// The Allocate response template: `container` parts once per container
/// (`{ids}`, `{count}`, `{resource}`), `device` parts once per allocated
/// device (`{id}`; `{i}`, the device's index in the served list; `{pos}`,
/// its position in the request; `{numa}`, `{resource}`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AllocateTemplate {
    /// Once per container.
    #[serde(default)]
    pub container: Scope,
    /// Once per device.
    #[serde(default)]
    pub device: Scope,
}

/// A health flap: the device toggles health every `period`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Flap {
    /// Device ID.
    pub device: String,
    /// Toggle period.
    #[serde(deserialize_with = "de_duration_req")]
    pub period: Duration,
}

/// Faults to inject.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Faults {
    /// Health flapping.
    #[serde(default)]
    pub flap: Vec<Flap>,
    /// Extra latency of every Allocate.
    #[serde(default, deserialize_with = "de_duration")]
    pub allocate_latency: Option<Duration>,
    /// Fraction of Allocate calls that fail (0..1).
    #[serde(default)]
    pub allocate_failure_rate: f64,
    /// A wrong GetPreferredAllocation answer.
    #[serde(default)]
    pub preferred: PreferredFault,
    /// End every ListAndWatch stream after this many messages.
    pub close_stream_after: Option<u64>,
    /// Extra latency of PreStartContainer.
    #[serde(default, deserialize_with = "de_duration")]
    pub pre_start_latency: Option<Duration>,
    /// PreStartContainer fails.
    #[serde(default)]
    pub pre_start_fail: bool,
    /// Never register again after a kubelet restart.
    #[serde(default)]
    pub no_reregister: bool,
    /// Register again only after this delay once the kubelet restarted.
    #[serde(default, deserialize_with = "de_duration")]
    pub reregister_delay: Option<Duration>,
    /// Ignore the kubelet closing our ListAndWatch stream (and opening none):
    /// never register again for it, as a plugin that watches only for a
    /// kubelet restart does; on kubelets up to 1.36 a rolling update then
    /// leaves the resource unallocatable (kubernetes#121994).
    #[serde(default)]
    pub no_reregister_on_disconnect: bool,
    /// New device IDs at every start and every restart.
    #[serde(default)]
    pub new_ids_after_restart: bool,
    /// Delete every other socket in the plugin directory at start (not kubelet.sock).
    #[serde(default)]
    pub delete_other_sockets: bool,
    /// Leave the socket behind on SIGTERM.
    #[serde(default)]
    pub keep_socket_on_exit: bool,
    /// Exit at start when kubelet.sock is missing (even with --retry).
    #[serde(default)]
    pub exit_without_kubelet: bool,
    /// Register a second time from the same socket once the kubelet's
    /// stream is open (a watcher that takes the kubelet.sock it finds at
    /// start for a new one); kubernetes#139338.
    #[serde(default)]
    pub register_twice: bool,
    /// On SIGTERM, send every stream a last list with every device
    /// Unhealthy before exiting; since 1.37 that list is the node's devices
    /// while another instance runs (kubernetes#135437).
    #[serde(default)]
    pub unhealthy_on_exit: bool,
    /// Once the kubelet cancels a ListAndWatch stream, later streams never send.
    #[serde(default)]
    pub hang_after_cancel: bool,
    /// Every ListAndWatch stream starts with an empty list; the devices follow a moment later.
    #[serde(default)]
    pub empty_first_snapshot: bool,
    /// Every ListAndWatch stream sends its first list only after this delay.
    #[serde(default, deserialize_with = "de_duration")]
    pub first_snapshot_delay: Option<Duration>,
    /// A change (health) goes to one stream only: the oldest open one, as
    /// plugins that share one update channel among their streams do.
    #[serde(default)]
    pub health_one_stream: bool,
}

/// The faults that change a plugin's lifecycle rather than its answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifecycleFaults {
    /// Never register again after a kubelet restart.
    pub no_reregister: bool,
    /// Register again only after this delay.
    pub reregister_delay: Option<Duration>,
    /// Never register again when the kubelet closed our stream and opened none.
    pub no_reregister_on_disconnect: bool,
    /// Leave the socket behind on SIGTERM.
    pub keep_socket_on_exit: bool,
    /// Exit at start when kubelet.sock is missing.
    pub exit_without_kubelet: bool,
    /// Register a second time from the same socket while the kubelet streams from it.
    pub register_twice: bool,
    /// On SIGTERM, every device Unhealthy in a last list.
    pub unhealthy_on_exit: bool,
}

impl Faults {
    /// The lifecycle faults among these.
    pub fn lifecycle(&self) -> LifecycleFaults {
        LifecycleFaults {
            no_reregister: self.no_reregister,
            reregister_delay: self.reregister_delay,
            no_reregister_on_disconnect: self.no_reregister_on_disconnect,
            keep_socket_on_exit: self.keep_socket_on_exit,
            exit_without_kubelet: self.exit_without_kubelet,
            register_twice: self.register_twice,
            unhealthy_on_exit: self.unhealthy_on_exit,
        }
    }
}

/// One resource to serve.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceConfig {
    /// Extended resource name.
    pub resource: String,
    /// Socket file name in the plugin directory (default: unique per start).
    pub socket_name: Option<String>,
    /// Number of generated devices.
    pub count: Option<usize>,
    /// ID pattern for generated devices; `{i}` is the index.
    pub id_pattern: Option<String>,
    /// Explicit devices (instead of count).
    #[serde(default)]
    pub devices: Vec<DeviceConfig>,
    /// Spread devices over this many NUMA nodes.
    pub numa_nodes: Option<u32>,
    /// Devices that start Unhealthy.
    #[serde(default)]
    pub unhealthy: Vec<String>,
    /// Advertise pre_start_required.
    #[serde(default)]
    pub pre_start: bool,
    /// Advertise and implement GetPreferredAllocation.
    #[serde(default)]
    pub preferred_allocation: bool,
    /// GetPreferredAllocation policy.
    #[serde(default)]
    pub policy: Policy,
    /// The Allocate response template.
    pub allocate: Option<AllocateTemplate>,
    /// Faults.
    #[serde(default)]
    pub faults: Faults,
}

/// A device as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// ID.
    pub id: String,
    /// Health string.
    pub health: String,
    /// NUMA node.
    pub numa: Option<i64>,
}

impl DeviceSpec {
    /// The device as ListAndWatch sends it.
    pub fn device(&self) -> crate::api::deviceplugin::Device {
        use crate::api::deviceplugin::{Device, NumaNode, TopologyInfo};
        Device {
            id: self.id.clone(),
            health: self.health.clone(),
            topology: self.numa.map(|id| TopologyInfo { nodes: vec![NumaNode { id }] }),
        }
    }
}

/// The short name of a resource: `vendor.example/foo` → `foo`.
pub fn short_name(resource: &str) -> &str {
    resource.rsplit('/').next().unwrap_or(resource)
}

/// The default env var of a resource: `vendor.example/foo` → `FOO_VISIBLE_DEVICES`.
pub fn visible_devices_env(resource: &str) -> String {
    let up: String = short_name(resource)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect();
    format!("{up}_VISIBLE_DEVICES")
}

/// A problem with one field of one resource's configuration: the field's
/// path inside the resource, in the config file's terms (`idPattern`,
/// `faults.flap[0].device`: serde's path notation), and what is wrong. A
/// config file prefixes the resource's path; `dpctl serve` names the flag
/// that sets the field instead.
#[derive(Debug)]
pub struct FieldError {
    /// The field's path inside the resource.
    pub field: String,
    /// What is wrong, and the fix.
    pub problem: String,
    /// The protocol rule broken, when the rulebook found it.
    pub rule: Option<crate::protocol::Violation>,
}

impl FieldError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        FieldError { field: field.into(), problem: problem.into(), rule: None }
    }

    /// A usage error naming the field under `at` (e.g. `c.json: resources[0]`).
    pub fn at(self, at: &str) -> Error {
        Error::usage(format!("{at}.{self}")).caused_by(self)
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for FieldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.rule.as_ref().map(|v| v as &(dyn std::error::Error + 'static))
    }
}

type Checked<T> = std::result::Result<T, FieldError>;

impl ResourceConfig {
    /// The device list this config describes (validated); errors name the field under `at`.
    pub fn device_list(&self, at: &str) -> Result<Vec<DeviceSpec>> {
        self.checked_devices().map_err(|e| e.at(at))
    }

    /// Validate the whole resource: its device list, which it returns, and every other field.
    pub fn check(&self) -> Checked<Vec<DeviceSpec>> {
        let devices = self.checked_devices()?;
        self.validate(&devices)?;
        Ok(devices)
    }

    fn checked_devices(&self) -> Checked<Vec<DeviceSpec>> {
        let bad = |field: &str, msg: String| FieldError::new(field, msg);
        let mut out: Vec<DeviceSpec> = if !self.devices.is_empty() {
            if self.count.is_some() {
                return Err(bad("count", "give either count or devices, not both".into()));
            }
            if self.devices.len() > MAX_DEVICES {
                return Err(bad(
                    "devices",
                    format!("{} devices are too many; at most {MAX_DEVICES} are allowed", self.devices.len()),
                ));
            }
            self.devices
                .iter()
                .map(|d| DeviceSpec { id: d.id.clone(), health: d.health.clone(), numa: d.numa })
                .collect()
        } else {
            let n = self.count.unwrap_or(1);
            if n == 0 {
                return Err(bad("count", "must be at least 1".into()));
            }
            if n > MAX_DEVICES {
                return Err(bad("count", format!("{n} is out of range; at most {MAX_DEVICES} devices are allowed")));
            }
            let default_pattern = format!("{}-{{i}}", short_name(&self.resource));
            let pattern = self.id_pattern.as_deref().unwrap_or(&default_pattern);
            if pattern.len() > MAX_ID_LEN {
                return Err(bad(
                    "idPattern",
                    format!("{} bytes is too long; at most {MAX_ID_LEN} are allowed", pattern.len()),
                ));
            }
            if !pattern.contains("{i}") {
                return Err(bad(
                    "idPattern",
                    format!("{pattern:?} has no {{i}}, so every device would get the same ID"),
                ));
            }
            (0..n)
                .map(|i| DeviceSpec { id: pattern.replace("{i}", &i.to_string()), health: HEALTHY.into(), numa: None })
                .collect()
        };
        if let Some(nodes) = self.numa_nodes {
            if nodes == 0 {
                return Err(bad("numaNodes", "must be at least 1".into()));
            }
            if nodes > MAX_NUMA_NODES {
                return Err(bad("numaNodes", format!("{nodes} is out of range; at most {MAX_NUMA_NODES} are allowed")));
            }
            let len = out.len();
            for (i, d) in out.iter_mut().enumerate() {
                if d.numa.is_none() {
                    d.numa = Some((i * nodes as usize / len) as i64);
                }
            }
        }
        for (i, d) in out.iter().enumerate() {
            if d.id.len() > MAX_ID_LEN {
                return Err(bad(
                    &format!("devices[{i}].id"),
                    format!("{} is {} bytes; at most {MAX_ID_LEN} are allowed", quote(&d.id), d.id.len()),
                ));
            }
        }
        // The protocol's device rules, from the rulebook: a FAIL rule refuses the configuration.
        if let Some(v) = deviceplugin::devices(&out.iter().map(DeviceSpec::device).collect::<Vec<_>>())
            .into_iter()
            .find(|v| v.is_fail())
        {
            let i = v.device.unwrap_or(0);
            let field = match v.rule.id {
                id if id == deviceplugin::DEVICE_HEALTH.id => "health",
                id if id == deviceplugin::DEVICE_TOPOLOGY.id => "numa",
                _ => "id",
            };
            return Err(FieldError { field: format!("devices[{i}].{field}"), problem: v.to_string(), rule: Some(v) });
        }
        for u in &self.unhealthy {
            match out.iter_mut().find(|d| &d.id == u) {
                Some(d) => d.health = UNHEALTHY.into(),
                None => return Err(bad("unhealthy", format!("no device {}", quote(u)))),
            }
        }
        Ok(out)
    }

    /// The Allocate template, or the default (`<NAME>_VISIBLE_DEVICES={ids}`).
    pub fn template(&self) -> AllocateTemplate {
        match &self.allocate {
            Some(t) if !(t.container.is_empty() && t.device.is_empty()) => t.clone(),
            _ => AllocateTemplate {
                container: Scope {
                    envs: [(visible_devices_env(&self.resource), "{ids}".to_string())].into_iter().collect(),
                    ..Default::default()
                },
                device: Scope::default(),
            },
        }
    }

    /// Validate everything but the device list.
    fn validate(&self, devices: &[DeviceSpec]) -> Checked<()> {
        let bad = |field: &str, msg: String| Err(FieldError::new(field, msg));
        if let Some(p) = resource_name_problem(&self.resource) {
            return bad("resource", format!("invalid resource name {:?}: {p}", self.resource));
        }
        if let Some(n) = &self.socket_name {
            if n.is_empty() || n.contains('/') || n == "." || n == ".." || n.len() > 255 {
                return bad(
                    "socketName",
                    format!("{n:?} must be a plain file name (at most 255 bytes) inside the plugin directory"),
                );
            }
            if n == crate::core::paths::KUBELET_SOCKET_NAME || n == crate::core::paths::CHECKPOINT_NAME {
                return bad("socketName", format!("{n:?} is the kubelet's; choose another name"));
            }
        }
        let f = &self.faults;
        if !(0.0..=1.0).contains(&f.allocate_failure_rate) {
            return bad("faults.allocateFailureRate", format!("{} must be between 0 and 1", f.allocate_failure_rate));
        }
        if f.close_stream_after == Some(0) {
            return bad("faults.closeStreamAfter", "must be at least 1".into());
        }
        for (i, fl) in f.flap.iter().enumerate() {
            if !devices.iter().any(|d| d.id == fl.device) {
                return bad(&format!("faults.flap[{i}].device"), format!("no device {:?}", fl.device));
            }
            if fl.period.is_zero() {
                return bad(&format!("faults.flap[{i}].period"), "must be greater than zero".into());
            }
        }
        if f.preferred != PreferredFault::None && !self.preferred_allocation {
            return bad("faults.preferred", "needs preferredAllocation: true (--preferred-allocation)".into());
        }
        if (f.pre_start_fail || f.pre_start_latency.is_some()) && !self.pre_start {
            let field = if f.pre_start_fail { "faults.preStartFail" } else { "faults.preStartLatency" };
            return bad(field, "needs preStart: true (--pre-start)".into());
        }
        for d in &self.template().device.devices {
            if d.permissions.is_empty() || !d.permissions.chars().all(|c| "rwm".contains(c)) {
                return bad(
                    "allocate.device.devices.permissions",
                    format!("{:?} must be any of r, w, m", d.permissions),
                );
            }
        }
        Ok(())
    }
}

/// Parse and validate a config file's text. An error names the field by
/// its path, as the deserializer found it (`resources[0].faults.allocateLatency`).
pub fn parse_file(text: &str, path: &std::path::Path) -> Result<FileConfig> {
    let cfg = deserialize(text).map_err(|(field, e)| {
        let at = match field {
            Some(field) => format!("{}: {field}", path.display()),
            None => format!("{}: invalid config", path.display()),
        };
        Error::usage(format!(
            "{at}: {} (see `dpctl serve --help` and docs/serve.md for the format)",
            crate::core::validate::serde_error_in_users_terms(&e.to_string())
        ))
        .caused_by(e)
    })?;
    if cfg.resources.is_empty() {
        return Err(Error::usage(format!("{}: resources: at least one resource is needed", path.display())));
    }
    check_resources(&cfg.resources, &path.display().to_string())?;
    Ok(cfg)
}

/// The file's text as a [`FileConfig`], or the path of the field the
/// deserializer stopped at (`None` for the document itself) and why.
fn deserialize(text: &str) -> std::result::Result<FileConfig, (Option<String>, serde_json::Error)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let cfg: FileConfig = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = Some(e.path().to_string()).filter(|p| p != ".");
        (field, e.into_inner())
    })?;
    de.end().map_err(|e| (None, e))?;
    Ok(cfg)
}

/// Validate a set of resources (from a file); `origin` prefixes errors.
pub fn check_resources(resources: &[ResourceConfig], origin: &str) -> Result<()> {
    let mut names = HashSet::new();
    let mut sockets = HashSet::new();
    for (i, r) in resources.iter().enumerate() {
        let at = format!("{origin}: resources[{i}]");
        r.check().map_err(|e| e.at(&at))?;
        if !names.insert(r.resource.as_str()) {
            return Err(Error::usage(format!("{at}.resource: {:?} is served twice", r.resource)));
        }
        if let Some(s) = &r.socket_name {
            if !sockets.insert(s.as_str()) {
                return Err(Error::usage(format!("{at}.socketName: {s:?} is used twice")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn res(json: &str) -> Result<FileConfig> {
        parse_file(json, Path::new("c.json"))
    }

    #[test]
    fn generates_ids_and_spreads_numa() {
        let r = ResourceConfig {
            resource: "vendor.example/foo".into(),
            count: Some(4),
            numa_nodes: Some(2),
            ..Default::default()
        };
        let d = r.device_list("x").unwrap();
        assert_eq!(d.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["foo-0", "foo-1", "foo-2", "foo-3"]);
        assert_eq!(d.iter().map(|d| d.numa.unwrap()).collect::<Vec<_>>(), [0, 0, 1, 1]);
        assert_eq!(r.template().container.envs["FOO_VISIBLE_DEVICES"], "{ids}");
    }

    #[test]
    fn a_full_file_parses() {
        let cfg = res(r#"{
          "pluginDir": "/tmp/dp", "registration": "plugin-watcher", "logFormat": "json",
          "resources": [
            {"resource": "vendor.example/foo", "count": 2, "idPattern": "gpu{i}", "numaNodes": 2,
             "preferredAllocation": true, "policy": "distributed", "unhealthy": ["gpu1"],
             "allocate": {"container": {"envs": {"FOO": "{ids}"}}, "device": {"devices": [{"containerPath": "/dev/{id}", "hostPath": "/dev/null"}], "cdiDevices": ["vendor.example/foo={id}"]}},
             "faults": {"flap": [{"device": "gpu0", "period": "2s"}], "allocateLatency": "5ms", "allocateFailureRate": 0.5, "preferred": "too-many", "closeStreamAfter": 3}},
            {"resource": "vendor.example/bar", "devices": [{"id": "b0", "numa": 1}, {"id": "b1", "health": "Unhealthy"}]}
          ]}"#)
        .unwrap();
        assert_eq!(cfg.registration, Some(RegistrationMode::PluginWatcher));
        let r = &cfg.resources[0];
        assert_eq!(r.faults.flap[0].period, Duration::from_secs(2));
        assert_eq!(r.faults.allocate_latency, Some(Duration::from_millis(5)));
        assert_eq!(r.device_list("x").unwrap()[1].health, "Unhealthy");
        assert_eq!(cfg.resources[1].device_list("x").unwrap()[0].numa, Some(1));
    }

    #[test]
    fn lifecycle_faults_parse_from_a_file() {
        let cfg = res(r#"{"resources": [{"resource": "v.e/foo", "faults": {
            "noReregister": true, "reregisterDelay": "2s", "newIdsAfterRestart": true, "deleteOtherSockets": true,
            "keepSocketOnExit": true, "exitWithoutKubelet": true, "hangAfterCancel": true,
            "noReregisterOnDisconnect": true, "registerTwice": true, "unhealthyOnExit": true}}]}"#)
        .unwrap();
        let f = &cfg.resources[0].faults;
        assert!(f.new_ids_after_restart && f.delete_other_sockets && f.hang_after_cancel);
        assert_eq!(
            f.lifecycle(),
            LifecycleFaults {
                no_reregister: true,
                reregister_delay: Some(Duration::from_secs(2)),
                no_reregister_on_disconnect: true,
                keep_socket_on_exit: true,
                exit_without_kubelet: true,
                register_twice: true,
                unhealthy_on_exit: true
            }
        );
        let none = res(r#"{"resources": [{"resource": "v.e/foo"}]}"#).unwrap();
        assert_eq!(none.resources[0].faults.lifecycle(), LifecycleFaults::default());
    }

    #[test]
    fn a_file_error_names_the_field_by_its_path() {
        let cases = [
            (
                r#"{"resources": [{"resource": "v.e/foo", "faults": {"allocateLatency": "fast"}}]}"#,
                "c.json: resources[0].faults.allocateLatency: invalid duration",
            ),
            (
                r#"{"resources": [{"resource": "v.e/a"}, {"resource": "v.e/b", "devices": [{"id": "b0", "numa": "one"}]}]}"#,
                "c.json: resources[1].devices[0].numa: ",
            ),
            (
                r#"{"resources": [{"resource": "v.e/foo", "faults": {"flap": [{"device": "foo-0", "period": 2}]}}]}"#,
                "c.json: resources[0].faults.flap[0].period: ",
            ),
            (r#"{"resources": [{"resource": "v.e/foo", "count": -1}]}"#, "c.json: resources[0].count: "),
            (r#"{"pluginDir": 7, "resources": []}"#, "c.json: pluginDir: "),
            (r#"{"resources": [{"resource": "v.e/foo"}]} trailing"#, "c.json: invalid config: trailing characters"),
        ];
        for (json, want) in cases {
            let e = res(json).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let text = e.to_string();
            assert!(text.starts_with(want), "{json}: {text}");
            assert!(text.ends_with("(see `dpctl serve --help` and docs/serve.md for the format)"), "{text}");
            assert!(!text.contains('\n'), "one line: {text}");
        }
    }

    #[test]
    fn a_field_error_keeps_the_broken_rule_as_its_source() {
        let r = ResourceConfig {
            resource: "v.e/foo".into(),
            devices: vec![DeviceConfig { id: "a".into(), health: "ok".into(), numa: None }],
            ..Default::default()
        };
        let e = r.check().unwrap_err();
        assert_eq!(e.field, "devices[0].health");
        assert!(std::error::Error::source(&e).is_some(), "{e}");
        let r = ResourceConfig { pre_start: false, ..r };
        let r = ResourceConfig {
            devices: vec![],
            faults: Faults { pre_start_latency: Some(Duration::from_secs(1)), ..Default::default() },
            ..r
        };
        assert_eq!(r.check().unwrap_err().field, "faults.preStartLatency");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"resources": [{"resource": "foo"}]}"#, "resources[0].resource"),
            (r#"{"resources": [{"resource": "v.e/foo", "count": 0}]}"#, "resources[0].count"),
            (
                r#"{"resources": [{"resource": "v.e/foo", "count": 100000000}]}"#,
                "resources[0].count: 100000000 is out of range",
            ),
            (r#"{"resources": [{"resource": "v.e/foo", "count": 18446744073709551615}]}"#, "resources[0].count"),
            (r#"{"resources": [{"resource": "v.e/foo", "numaNodes": 4294967295}]}"#, "resources[0].numaNodes"),
            (
                r#"{"resources": [{"resource": "v.e/foo", "devices": [{"id": "a"}, {"id": "a"}]}]}"#,
                "resources[0].devices[1].id",
            ),
            (
                r#"{"resources": [{"resource": "v.e/foo", "devices": [{"id": "a", "health": "ok"}]}]}"#,
                "devices[0].health",
            ),
            (
                r#"{"resources": [{"resource": "v.e/foo", "faults": {"allocateFailureRate": 2}}]}"#,
                "allocateFailureRate",
            ),
            (
                r#"{"resources": [{"resource": "v.e/foo", "faults": {"flap": [{"device": "x", "period": "1s"}]}}]}"#,
                "flap[0].device",
            ),
            (r#"{"resources": [{"resource": "v.e/foo", "socketName": "../x"}]}"#, "socketName"),
            (r#"{"resources": [{"resource": "v.e/foo", "idPattern": "same"}]}"#, "idPattern"),
            (r#"{"resources": [{"resource": "v.e/foo", "colour": 1}]}"#, "unknown field \"colour\""),
            (r#"{"resources": [{"resource": "v.e/foo", "numaNode": 1}]}"#, "did you mean \"numaNodes\""),
            (r#"{"resources": [{"resource": "v.e/foo", "count": -1}]}"#, "expected a whole number, 0 or more"),
            (r#"{"resources": [{"resource": "v.e/foo", "faults": {"allocateLatency": "fast"}}]}"#, "invalid duration"),
            (r#"{"resources": [{"resource": "v.e/a"}, {"resource": "v.e/a"}]}"#, "served twice"),
            (r#"{"resources": []}"#, "at least one resource"),
            (r#"not json"#, "invalid config"),
        ];
        for (json, want) in cases {
            let e = res(json).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(want), "{json}: {e}");
            assert!(e.to_string().starts_with("c.json"), "{e}");
        }
    }
}
