//! `dpctl dra device list | set-health | update-metadata`: live control of a running
//! `dpctl dra serve`, found through its control socket.

use super::Ctx;
use crate::commands::shared::control::{ControlRole, ControlTarget};
use crate::core::{Error, Result};
use crate::plugin::dra::driver::{ControlAnswer, ControlRequest};
use crate::plugin::dra::{CONTROL_DIR, CONTROL_PREFIX};
use crate::protocol::dra as rules;
use crate::render::{emit, structured, table, Format};
use clap::Subcommand;
use std::path::PathBuf;

pub(super) const EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-1 Unhealthy --message 'ECC errors'";

const DEVICE_LIST_EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list -o json";

const UPDATE_METADATA_EXAMPLES: &str = "Examples:
  # as a network driver does once CNI ran: the pod sees generation 2 with the interface
  dpctl --kubelet-root-dir /tmp/k dra device update-metadata ml/nic one --interface net1 --ip 10.0.0.5/24";

const DEVICE_SET_HEALTH_EXAMPLES: &str = "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 dev-1 Unhealthy --message 'XID 79'
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 Healthy --driver gpu.example.com";

/// `dpctl dra device` controls a `dpctl dra serve`, picked by its driver.
#[derive(Debug)]
pub struct DraServe;

impl ControlRole for DraServe {
    const SELECT: &'static str = "driver";
    const SELECT_HELP: &'static str = "The driver whose serve to control (needed when several run)";
    const CONTROL_HELP: &'static str =
        "A specific control socket [default: found in <kubelet-root>/plugins/*/dpctl-control/]";

    fn discover(ctx: &Ctx, driver: Option<&str>) -> Vec<PathBuf> {
        let plugins = ctx.paths.kubelet_root.join("plugins");
        let dirs: Vec<PathBuf> = match driver {
            Some(d) => vec![plugins.join(d)],
            None => std::fs::read_dir(&plugins).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default(),
        };
        let mut out: Vec<PathBuf> = dirs
            .iter()
            .flat_map(|d| crate::core::transport::find_sockets(&d.join(CONTROL_DIR)))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(CONTROL_PREFIX)))
            .collect();
        out.sort();
        out
    }
}

/// Which running `dpctl dra serve` to control.
pub type DraControlTarget = ControlTarget<DraServe>;

/// `dpctl dra device …`
#[derive(Debug, Subcommand)]
pub enum DraDeviceCommand {
    /// List the devices and prepared claims of a running dpctl dra serve
    #[command(after_help = DEVICE_LIST_EXAMPLES)]
    List(#[command(flatten)] DraControlTarget),
    /// Rewrite a prepared claim's device metadata for one request with network data, its generation
    /// one up (dra serve --device-metadata; the kubeletplugin helper's UpdateRequestMetadata)
    #[command(after_help = UPDATE_METADATA_EXAMPLES)]
    UpdateMetadata {
        /// The prepared claim: namespace/name
        #[arg(value_name = "CLAIM")]
        claim: String,
        /// The request (or request/subrequest)
        #[arg(value_name = "REQUEST")]
        request: String,
        /// The interface name in the pod
        #[arg(long, value_name = "NAME")]
        interface: Option<String>,
        /// An IP address in CIDR notation (repeatable)
        #[arg(long = "ip", value_name = "CIDR")]
        ips: Vec<String>,
        /// The hardware address
        #[arg(long, value_name = "MAC")]
        hardware_address: Option<String>,
        #[command(flatten)]
        /// Which serve.
        target: DraControlTarget,
    },
    /// Set devices Healthy, Unhealthy or Unknown: names, then the health
    #[command(override_usage = "dpctl dra device set-health [OPTIONS] DEVICE... HEALTH")]
    #[command(after_help = DEVICE_SET_HEALTH_EXAMPLES)]
    SetHealth {
        /// Device names, then the health: Healthy, Unhealthy or Unknown (the last word)
        #[arg(value_name = "DEVICE", num_args = 2.., required = true)]
        args: Vec<String>,
        /// The health message (at most 1024 characters reach the kubelet unchanged)
        #[arg(long, value_name = "TEXT")]
        message: Option<String>,
        #[command(flatten)]
        /// Which serve.
        target: DraControlTarget,
    },
}

/// Run the command.
pub(super) async fn run(ctx: &Ctx, d: &DraDeviceCommand) -> Result<()> {
    let (target, req) = match d {
        DraDeviceCommand::List(t) => (t, ControlRequest::List),
        DraDeviceCommand::UpdateMetadata { claim, request, interface, ips, hardware_address, target } => (
            {
                if interface.is_none() && ips.is_empty() && hardware_address.is_none() {
                    return Err(Error::usage(
                        "update-metadata: give the network data: --interface, --ip or --hardware-address",
                    ));
                }
                target
            },
            ControlRequest::UpdateMetadata {
                claim: claim.clone(),
                request: request.clone(),
                network: crate::plugin::dra::metadata::NetworkData {
                    interface_name: interface.clone().unwrap_or_default(),
                    ips: ips.clone(),
                    hardware_address: hardware_address.clone().unwrap_or_default(),
                },
            },
        ),
        DraDeviceCommand::SetHealth { args, message, target } => {
            let (health, devices) = args.split_last().ok_or_else(|| Error::usage("name devices, then a health"))?;
            if rules::parse_health(health).is_none() {
                return Err(Error::usage(format!(
                    "the last word must be the health (Healthy, Unhealthy or Unknown), not {}",
                    crate::core::text::quote(health)
                )));
            }
            (
                target,
                ControlRequest::SetHealth {
                    devices: devices.to_vec(),
                    health: health.clone(),
                    message: message.clone(),
                },
            )
        }
    };
    let socks = target.sockets(ctx);
    let mut answers = Vec::new();
    for s in &socks {
        match crate::core::control::send::<_, ControlAnswer>(s, &req, ctx.timeout).await {
            Ok(a) => answers.push(a),
            Err(_) if target.control.is_none() => {} // a stale socket of a serve that died
            Err(e) => return Err(e),
        }
    }
    let a = match answers.len() {
        0 => {
            return Err(Error::failed(format!(
                "no running dpctl dra serve found under {}/plugins/*/{CONTROL_DIR}/; pass --kubelet-root-dir, --driver or --control",
                ctx.paths.kubelet_root.display()
            )))
        }
        1 => answers.remove(0),
        _ if req == ControlRequest::List => return show_devices(ctx, &answers),
        _ => {
            let names: Vec<String> = answers.iter().map(|a| a.driver.clone()).collect();
            return Err(Error::usage(format!("several dpctl dra serve run ({}); name one with --driver", names.join(", "))));
        }
    };
    if !a.ok {
        return Err(Error::failed(a.error.unwrap_or_else(|| "refused".into())));
    }
    show_devices(ctx, &[a])
}

fn show_devices(ctx: &Ctx, answers: &[ControlAnswer]) -> Result<()> {
    match ctx.format {
        Format::Table => {
            let mut rows = Vec::new();
            for a in answers {
                for d in &a.devices {
                    let claims: Vec<String> =
                        a.prepared.iter().filter(|p| p.devices.contains(&d.name)).map(|p| p.claim.clone()).collect();
                    rows.push(vec![
                        a.driver.clone(),
                        a.pool.clone(),
                        d.name.clone(),
                        crate::render::health(&d.health),
                        if claims.is_empty() { "-".into() } else { claims.join(",") },
                        d.message.clone(),
                    ]);
                }
            }
            emit(&table(&["DRIVER", "POOL", "DEVICE", "HEALTH", "PREPARED FOR", "MESSAGE"], &rows))
        }
        f => emit(&structured(f, &answers)?),
    }
}
