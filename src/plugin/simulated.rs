//! The backend of `dpctl serve`: simulated devices, Allocate answers built
//! from a template, preferred-allocation policies, and injected faults.

use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, CdiDevice, ContainerAllocateResponse, ContainerPreferredAllocationResponse,
    DevicePluginOptions, DeviceSpec, Mount, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::api::HEALTHY;
use crate::core::text::id_list;
use crate::plugin::config::{AllocateTemplate, Faults, Policy, PreferredFault, ResourceConfig, Scope};
use crate::plugin::devices::{to_device, Inventory, Snapshot};
use crate::plugin::policy::choose;
use crate::plugin::server::Backend;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::watch;
use tonic::Status;

/// A simulated plugin for one resource.
pub struct Simulated {
    resource: String,
    options: DevicePluginOptions,
    policy: Policy,
    template: AllocateTemplate,
    faults: Faults,
    /// The live devices (live control changes them).
    pub inventory: Inventory,
    rng: AtomicU64,
}

impl Simulated {
    /// Build from a validated resource config.
    pub fn new(cfg: &ResourceConfig) -> crate::core::Result<Self> {
        let devices = cfg.device_list(&format!("resource {}", cfg.resource))?;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15)
            | 1;
        Ok(Simulated {
            resource: cfg.resource.clone(),
            options: DevicePluginOptions {
                pre_start_required: cfg.pre_start,
                get_preferred_allocation_available: cfg.preferred_allocation,
            },
            policy: cfg.policy,
            template: cfg.template(),
            faults: cfg.faults.clone(),
            inventory: Inventory::new(devices.iter().map(to_device).collect()),
            rng: AtomicU64::new(seed),
        })
    }

    /// The flaps configured for this resource.
    pub fn flaps(&self) -> &[crate::plugin::config::Flap] {
        &self.faults.flap
    }

    /// A uniform random number in [0, 1) (xorshift; no crypto needed).
    fn random(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn render(&self, ids: &[String], snap: &Snapshot) -> ContainerAllocateResponse {
        let joined = ids.join(",");
        let count = ids.len().to_string();
        let t = &self.template;
        let mut r = ContainerAllocateResponse::default();
        let vars = [("{ids}", joined.as_str()), ("{count}", count.as_str()), ("{resource}", self.resource.as_str())];
        apply(&t.container, &|s: &str| substitute(s, &vars), &mut r);
        if t.device == Scope::default() {
            return r;
        }
        for (pos, id) in ids.iter().enumerate() {
            let numa = snap.numa(id).map(|n| n.to_string()).unwrap_or_default();
            // {i}: the device's own index (its position in the served list);
            // {pos}: its position within this container's request.
            let istr = snap.position(id).unwrap_or(pos).to_string();
            let posstr = pos.to_string();
            let vars = [
                ("{id}", id.as_str()),
                ("{i}", &istr),
                ("{pos}", &posstr),
                ("{numa}", &numa),
                ("{resource}", &self.resource),
            ];
            apply(&t.device, &|s: &str| substitute(s, &vars), &mut r);
        }
        r
    }
}

/// Replace `{name}` placeholders from `vars` (keys with their braces) in one
/// pass: one allocation per string, and a value is never substituted again.
fn substitute(s: &str, vars: &[(&str, &str)]) -> String {
    let Some(first) = s.find('{') else { return s.to_string() };
    let mut out = String::with_capacity(s.len() + 32);
    out.push_str(&s[..first]);
    let mut rest = &s[first..];
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match vars.iter().find(|(k, _)| tail.starts_with(k)) {
            Some((k, v)) => {
                out.push_str(v);
                rest = &tail[k.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Add one template scope to a response, substituting placeholders with `sub`.
fn apply(scope: &Scope, sub: &dyn Fn(&str) -> String, r: &mut ContainerAllocateResponse) {
    r.envs.extend(scope.envs.iter().map(|(k, v)| (sub(k), sub(v))));
    r.annotations.extend(scope.annotations.iter().map(|(k, v)| (sub(k), sub(v))));
    r.mounts.extend(scope.mounts.iter().map(|m| Mount {
        container_path: sub(&m.container_path),
        host_path: sub(&m.host_path),
        read_only: m.read_only,
    }));
    r.devices.extend(scope.devices.iter().map(|d| DeviceSpec {
        container_path: sub(&d.container_path),
        host_path: sub(&d.host_path),
        permissions: d.permissions.clone(),
    }));
    r.cdi_devices.extend(scope.cdi_devices.iter().map(|n| CdiDevice { name: sub(n) }));
}

#[tonic::async_trait]
impl Backend for Simulated {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn options(&self) -> DevicePluginOptions {
        self.options
    }

    fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inventory.subscribe()
    }

    fn close_stream_after(&self) -> Option<u64> {
        self.faults.close_stream_after
    }

    fn hang_after_cancel(&self) -> bool {
        self.faults.hang_after_cancel
    }

    fn empty_first_snapshot(&self) -> bool {
        self.faults.empty_first_snapshot
    }

    fn first_snapshot_delay(&self) -> Option<std::time::Duration> {
        self.faults.first_snapshot_delay
    }

    fn health_one_stream(&self) -> bool {
        self.faults.health_one_stream
    }

    fn lifecycle_faults(&self) -> crate::plugin::config::LifecycleFaults {
        self.faults.lifecycle()
    }

    async fn preferred(&self, req: PreferredAllocationRequest) -> Result<PreferredAllocationResponse, Status> {
        if !self.options.get_preferred_allocation_available {
            return Err(Status::unimplemented(format!(
                "{}: GetPreferredAllocation is not enabled (start dpctl serve with --preferred-allocation)",
                self.resource
            )));
        }
        let snap = self.inventory.current();
        let mut out = Vec::new();
        for c in &req.container_requests {
            let size = usize::try_from(c.allocation_size).unwrap_or(0);
            let mut ids =
                choose(self.policy, &c.available_device_i_ds, &c.must_include_device_i_ds, size, |id| snap.numa(id));
            match self.faults.preferred {
                PreferredFault::None => {}
                PreferredFault::Foreign => {
                    let foreign = format!("{}-not-offered", crate::plugin::config::short_name(&self.resource));
                    match ids.last_mut() {
                        Some(last) => *last = foreign,
                        None => ids.push(foreign),
                    }
                }
                PreferredFault::TooMany => {
                    let extra = c
                        .available_device_i_ds
                        .iter()
                        .find(|a| !ids.contains(a))
                        .cloned()
                        .unwrap_or_else(|| format!("{}-extra", crate::plugin::config::short_name(&self.resource)));
                    ids.push(extra);
                }
                PreferredFault::IgnoreAvailable => {
                    let all: Vec<String> = snap.response.devices.iter().map(|d| d.id.clone()).collect();
                    ids = choose(self.policy, &all, &c.must_include_device_i_ds, size, |id| snap.numa(id));
                }
                PreferredFault::FirstN => ids = c.available_device_i_ds.iter().take(size).cloned().collect(),
                PreferredFault::DropMustInclude => {
                    let others: Vec<String> = c
                        .available_device_i_ds
                        .iter()
                        .filter(|a| !c.must_include_device_i_ds.contains(a))
                        .cloned()
                        .collect();
                    ids = choose(self.policy, &others, &[], size, |id| snap.numa(id));
                }
            }
            out.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
        }
        Ok(PreferredAllocationResponse { container_responses: out })
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<AllocateResponse, Status> {
        if let Some(l) = self.faults.allocate_latency {
            tokio::time::sleep(l).await;
        }
        let rate = self.faults.allocate_failure_rate;
        if rate > 0.0 && self.random() < rate {
            return Err(Status::internal(format!(
                "{}: injected Allocate failure (failure rate {rate})",
                self.resource
            )));
        }
        let snap = self.inventory.current();
        let mut unknown = Vec::new();
        let mut unhealthy = Vec::new();
        for c in &req.container_requests {
            for id in &c.devices_ids {
                match snap.get(id) {
                    None => unknown.push(id.as_str()),
                    Some(d) if d.health != HEALTHY => unhealthy.push(id.as_str()),
                    _ => {}
                }
            }
        }
        if !unknown.is_empty() || !unhealthy.is_empty() {
            let mut parts = Vec::new();
            if !unknown.is_empty() {
                parts.push(format!("unknown device(s) {}", id_list(&unknown)));
            }
            if !unhealthy.is_empty() {
                parts.push(format!("unhealthy device(s) {}", id_list(&unhealthy)));
            }
            return Err(Status::invalid_argument(format!("{}: {}", self.resource, parts.join("; "))));
        }
        Ok(AllocateResponse {
            container_responses: req.container_requests.iter().map(|c| self.render(&c.devices_ids, &snap)).collect(),
        })
    }

    async fn pre_start(&self, req: PreStartContainerRequest) -> Result<PreStartContainerResponse, Status> {
        if let Some(l) = self.faults.pre_start_latency {
            tokio::time::sleep(l).await;
        }
        if self.faults.pre_start_fail {
            return Err(Status::internal(format!(
                "{}: injected PreStartContainer failure for {}",
                self.resource,
                id_list(&req.devices_ids)
            )));
        }
        Ok(PreStartContainerResponse {})
    }
}

#[cfg(test)]
mod tests {
    use super::substitute;

    #[test]
    fn substitute_replaces_known_placeholders_once() {
        let vars = [("{id}", "a{i}"), ("{i}", "0"), ("{resource}", "vendor.example/foo")];
        assert_eq!(substitute("/dev/{id}-{i}", &vars), "/dev/a{i}-0", "a value is not substituted again");
        assert_eq!(substitute("{resource}={id}", &vars), "vendor.example/foo=a{i}");
        assert_eq!(substitute("{unknown} {", &vars), "{unknown} {");
        assert_eq!(substitute("plain", &vars), "plain");
    }
}
