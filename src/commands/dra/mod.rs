//! `dpctl dra …`: the same client commands for DRA kubelet plugins as for
//! device plugins (GetInfo, probe, prepare, unprepare, health, list), the
//! simulated driver (`dra serve`) and its live control (`dra device`).
//! SOCKET is a plugin's registration socket (its GetInfo names the service
//! endpoint, and the kubelet's choice of service is used) or its service
//! socket; bare names are looked up in `<kubelet-root>/plugins_registry/`
//! and `<kubelet-root>/plugins/*/`.
//!
//! This file holds the command's surface, the arguments its subcommands
//! share and the way to a plugin (registration, then service socket); each
//! subcommand is its own file.

mod device;
mod health;
mod info;
mod list;
mod prepare;
mod probe;
mod serve;
mod unprepare;

pub use device::{DraControlTarget, DraDeviceCommand};
pub use health::{health_diff, health_rows, DraHealthArgs, HealthRow};
pub use list::{list_plugins, Listed};
pub use probe::DraProbeArgs;
pub use serve::{config, DraServeArgs};

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::dra_v1::{Claim, NodePrepareResourcesResponse};
use crate::api::pluginregistration::PluginInfo;
use crate::client::dra::{resolve, DraConn};
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::protocol::dra::{self as rules, DRA_V1, DRA_V1BETA1};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

/// `dpctl dra`: its surface.
pub const COMMAND: Spec = Spec {
    name: "dra",
    about: "DRA kubelet plugins: info, probe, prepare, unprepare, health, list; a simulated driver (serve)",
    group: super::surface::Group::Plugin,
    args: surface::subcommands::<DraCommand>,
    examples: EXAMPLES,
    sockets: &[Socket::Registry(&["info", "probe", "prepare", "unprepare", "health"])],
    refuses_output: None,
    parse: surface::parse::<DraCommand>,
};

const EXAMPLES: &str = "Examples:
  # Which DRA drivers are registered on this node, and are they live?
  dpctl dra list
  # Check a driver against the kubelet's rules, preparing a throwaway claim
  dpctl dra probe gpu.example.com-reg.sock --prepare
  # A simulated driver in a temp kubelet root, for tests and demos
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi";

/// `dpctl dra …`
#[derive(Debug, Subcommand)]
pub enum DraCommand {
    /// Call GetInfo on a DRA plugin's registration socket
    #[command(after_help = info::EXAMPLES)]
    Info(DraSocket),
    /// One-shot check of a DRA plugin against the kubelet's rules: PASS/WARN/FAIL per rule
    #[command(after_help = probe::EXAMPLES)]
    Probe(DraProbeArgs),
    /// Call NodePrepareResources for one or more claims and check the answer
    #[command(after_help = prepare::EXAMPLES)]
    Prepare(DraClaimsArgs),
    /// Call NodeUnprepareResources for one or more claims
    #[command(after_help = unprepare::EXAMPLES)]
    Unprepare(DraClaimsArgs),
    /// Watch a DRA plugin's device health (NodeWatchResources): a table, then a line per change
    #[command(after_help = health::EXAMPLES)]
    Health(DraHealthArgs),
    /// List the DRA plugins registered under the kubelet's root: driver, endpoint, versions, live or stale
    #[command(after_help = list::EXAMPLES)]
    List,
    /// Serve a simulated DRA driver's kubelet plugin, registered through the plugin watcher
    #[command(after_help = serve::EXAMPLES)]
    Serve(Box<DraServeArgs>),
    /// Show or change the devices of a running `dpctl dra serve` (live control)
    #[command(subcommand)]
    #[command(after_help = device::EXAMPLES)]
    Device(DraDeviceCommand),
}

/// A DRA plugin socket.
#[derive(Debug, Args)]
pub struct DraSocket {
    /// Registration or service socket (a bare name is looked up in plugins_registry/ and plugins/*/)
    #[arg(value_name = "SOCKET", help = crate::help::DRA_SOCKET_HELP)]
    pub socket: PathBuf,
}

/// `dpctl dra prepare|unprepare`
#[derive(Debug, Args)]
pub struct DraClaimsArgs {
    #[command(flatten)]
    /// The socket.
    pub socket: DraSocket,
    /// A claim as NAMESPACE/NAME/UID (repeatable)
    #[arg(long = "claim", value_name = "NS/NAME/UID", required = true, value_parser = crate::client::dra::parse_claim)]
    pub claims: Vec<crate::api::dra_v1::Claim>,
    /// The service to call: v1 or v1beta1 [default: the kubelet's choice from GetInfo, else v1]
    #[arg(long, value_name = "VERSION", value_parser = ["v1", "v1beta1"])]
    pub service: Option<String>,
    /// prepare: call twice and check both answers are the same (the kubelet repeats calls)
    #[arg(long)]
    pub twice: bool,
    /// prepare: resolve the CDI IDs of the answer in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]
    #[arg(long, value_name = "DIR")]
    pub cdi_spec_dir: Vec<PathBuf>,
}

impl Invocation for DraCommand {
    fn workers(&self) -> usize {
        match self {
            DraCommand::Serve(_) => 1,
            _ => 0,
        }
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Run a `dpctl dra` command.
pub async fn run(ctx: &Ctx, c: &DraCommand) -> Result<()> {
    match c {
        DraCommand::Info(a) => info::run(ctx, a).await,
        DraCommand::Probe(a) => probe::run(ctx, a).await,
        DraCommand::Prepare(a) => prepare::run(ctx, a).await,
        DraCommand::Unprepare(a) => unprepare::run(ctx, a).await,
        DraCommand::Health(a) => health::run(ctx, a).await,
        DraCommand::List => list::run(ctx).await,
        DraCommand::Serve(a) => serve::run(ctx, a).await,
        DraCommand::Device(d) => device::run(ctx, d).await,
    }
}

/// The kubelet's root as the host names it (what endpoints are checked against).
fn host_kubelet_root(ctx: &Ctx) -> PathBuf {
    ctx.paths.root.on_host(&ctx.paths.kubelet_root)
}

/// A plugin reached through SOCKET: its registration (if SOCKET is one) and its service socket.
pub(crate) struct Target {
    pub(crate) socket: PathBuf,
    pub(crate) info: Option<PluginInfo>,
    pub(crate) service: DraConn,
}

impl Target {
    pub(crate) fn advertised(&self) -> &[String] {
        self.info.as_ref().map(|i| i.supported_versions.as_slice()).unwrap_or(&[])
    }
}

/// GetInfo on `conn`: `Ok(None)` when the socket serves no Registration service (a service socket).
async fn try_info(conn: &DraConn) -> Result<Option<PluginInfo>> {
    match conn.info().await {
        Ok(i) => Ok(Some(i)),
        Err(e) if e.code() == Some(tonic::Code::Unimplemented) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The endpoint of a GetInfo answer, as seen here.
fn endpoint_here(ctx: &Ctx, info: &PluginInfo, reg: &Path) -> Result<PathBuf> {
    if info.endpoint.is_empty() {
        return Ok(reg.to_path_buf());
    }
    if !Path::new(&info.endpoint).is_absolute() {
        return Err(Error::failed(format!(
            "{}: GetInfo endpoint {} is not an absolute path; the kubelet rejects it (fix the driver)",
            reg.display(),
            crate::core::text::quote(&info.endpoint)
        )));
    }
    Ok(ctx.paths.host(Path::new(&info.endpoint)))
}

/// Reach the plugin SOCKET names (resolved as every `dpctl dra` client command resolves it).
pub(crate) async fn target(ctx: &Ctx, socket: &Path) -> Result<Target> {
    let path = resolve(&ctx.paths, socket);
    let conn = DraConn::connect(&path, ctx.timeout).await?;
    match try_info(&conn).await? {
        None => Ok(Target { socket: path, info: None, service: conn }),
        Some(info) => {
            let ep = endpoint_here(ctx, &info, &path)?;
            let service = if ep == path { conn } else { DraConn::connect(&ep, ctx.timeout).await? };
            Ok(Target { socket: path, info: Some(info), service })
        }
    }
}

/// The DRAPlugin service to call: the flag, else the kubelet's choice, else v1.
pub(crate) fn dra_service(flag: Option<&str>, advertised: &[String]) -> Result<&'static str> {
    match flag {
        Some("v1beta1") => Ok(DRA_V1BETA1),
        Some(_) => Ok(DRA_V1),
        None if advertised.is_empty() => Ok(DRA_V1),
        None => rules::chosen_service(advertised).ok_or_else(|| {
            Error::failed(format!(
                "the plugin advertises no DRAPlugin service the kubelet speaks ({}); pass --service to call one anyway",
                crate::core::text::id_list(advertised)
            ))
        }),
    }
}

/// A prepare answer's devices, one `pool/device [cdi ids]` each.
fn devices_text(d: &[crate::api::dra_v1::Device]) -> String {
    d.iter()
        .map(|d| format!("{}/{} [{}]", d.pool_name, d.device_name, d.cdi_device_ids.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A prepare answer's devices, claim by claim.
fn answer_text(r: &NodePrepareResourcesResponse) -> String {
    r.claims.values().map(|c| devices_text(&c.devices)).collect::<Vec<_>>().join("; ")
}

/// A claim as `namespace/name (uid)`.
fn claim_text(c: &Claim) -> String {
    format!("{}/{} ({})", c.namespace, c.name, c.uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::dra::HEALTH_V1;

    #[test]
    fn the_kubelets_choice_of_service_is_used_unless_one_is_named() {
        let adv = vec![DRA_V1BETA1.to_string(), DRA_V1.to_string()];
        assert_eq!(dra_service(None, &adv).unwrap(), DRA_V1BETA1);
        assert_eq!(dra_service(Some("v1"), &adv).unwrap(), DRA_V1);
        assert_eq!(dra_service(None, &[]).unwrap(), DRA_V1);
        assert!(dra_service(None, &[HEALTH_V1.to_string()]).unwrap_err().to_string().contains("--service"));
    }
}
