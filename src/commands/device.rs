//! `dpctl device list | set-health | add | remove`: live control of a
//! running `dpctl serve`, found through its control socket.

use super::shared::control::ControlRole;
use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::core::validate::check_id_list;
use crate::core::{Error, Result};
use crate::plugin::control::{self, Answer, Request, ResourceView};
use crate::protocol::deviceplugin::parse_health;
use crate::render::{emit, health, numa, structured, table, Format};
use clap::Subcommand;
use std::path::PathBuf;

/// `dpctl device`: its surface.
pub const COMMAND: Spec = Spec {
    name: "device",
    about: "Change the devices of a running `dpctl serve` (live control)",
    group: super::surface::Group::Simulate,
    args: surface::subcommands::<DeviceCommand>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<DeviceCommand>,
};

const EXAMPLES: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device list
  dpctl --plugin-dir /tmp/dp device set-health foo-1 foo-2 Unhealthy
  dpctl --plugin-dir /tmp/dp device add foo-9 --numa 1 --unhealthy
  dpctl --plugin-dir /tmp/dp device remove foo-9";

const LIST_EXAMPLES: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device list
  dpctl device list --control /tmp/dp/dpctl-control/serve-1234.sock -o json";

const SET_HEALTH_EXAMPLES: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device set-health foo-1 foo-2 Unhealthy
  dpctl --plugin-dir /tmp/dp device set-health foo-1 Healthy --resource vendor.example/foo";

const ADD_EXAMPLES: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device add foo-9 --numa 1
  dpctl --plugin-dir /tmp/dp device add foo-10 foo-11 --unhealthy";

const REMOVE_EXAMPLES: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device remove foo-9";

/// `dpctl device` controls a `dpctl serve`, picked by the resource it serves.
#[derive(Debug)]
pub struct Serve;

impl ControlRole for Serve {
    const SELECT: &'static str = "resource";
    const SELECT_HELP: &'static str = "The resource to change (needed when several are served)";
    const CONTROL_HELP: &'static str = "A specific control socket [default: found in <plugin-dir>/dpctl-control/]";

    fn discover(ctx: &Ctx, _: Option<&str>) -> Vec<PathBuf> {
        let dir = ctx.paths.plugin_dir.join(control::CONTROL_DIR);
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// Which running `dpctl serve` and resource to control.
pub type ControlTarget = super::shared::control::ControlTarget<Serve>;

/// `dpctl device …`
#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// List the devices of running dpctl serve processes
    #[command(after_help = LIST_EXAMPLES)]
    List(#[command(flatten)] ControlTarget),
    /// Set devices Healthy or Unhealthy: IDs, then the health
    #[command(override_usage = "dpctl device set-health [OPTIONS] ID... HEALTH")]
    #[command(after_help = SET_HEALTH_EXAMPLES)]
    SetHealth {
        /// Device IDs, then the health: Healthy or Unhealthy (the last word)
        #[arg(value_name = "ID", num_args = 2.., required = true)]
        args: Vec<String>,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
    /// Add devices
    #[command(after_help = ADD_EXAMPLES)]
    Add {
        /// New device IDs
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
        /// NUMA node of the new devices
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
        numa: Option<i64>,
        /// Add them Unhealthy
        #[arg(long)]
        unhealthy: bool,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
    /// Remove devices
    #[command(after_help = REMOVE_EXAMPLES)]
    Remove {
        /// Device IDs
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
        #[command(flatten)]
        /// Which serve.
        target: ControlTarget,
    },
}

impl Invocation for DeviceCommand {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Find the control socket serving `target`.
async fn find(ctx: &Ctx, target: &ControlTarget) -> Result<(PathBuf, Vec<ResourceView>)> {
    let candidates = target.sockets(ctx);
    let mut found = Vec::new();
    let mut last_err = None;
    for path in candidates {
        match control::send(&path, &Request::List { resource: None }, ctx.timeout).await {
            Ok(a) if a.ok && !a.resources.is_empty() => found.push((path, a.resources)),
            Ok(a) if a.ok => {
                last_err = Some(Error::failed(format!("{}: not a dpctl serve control socket", path.display())))
            }
            Ok(a) => last_err = a.error.map(Error::failed),
            Err(e) => last_err = Some(e),
        }
    }
    if let Some(r) = &target.select {
        return found.into_iter().find(|(_, res)| res.iter().any(|x| &x.resource == r)).ok_or_else(|| {
            Error::failed(format!(
                "no running dpctl serve in {} serves {r}; check --plugin-dir or the resource name",
                ctx.paths.plugin_dir.display()
            ))
        });
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(last_err.filter(|_| target.control.is_some()).unwrap_or_else(|| {
            Error::failed(format!(
                "no running dpctl serve found (no live control socket in {}); start one, or pass --plugin-dir / --control",
                ctx.paths.plugin_dir.join(control::CONTROL_DIR).display()
            ))
        })),
        _ => Err(Error::usage(format!(
            "several dpctl serve processes are running ({}); choose one with --resource or --control",
            found.iter().flat_map(|(_, r)| r.iter().map(|x| x.resource.clone())).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn show(ctx: &Ctx, resources: &[ResourceView]) -> Result<()> {
    match ctx.format {
        Format::Table => {
            let mut rows = Vec::new();
            for r in resources {
                for d in &r.devices {
                    rows.push(vec![r.resource.clone(), d.id.clone(), health(&d.health), numa(d.topology.as_ref())]);
                }
            }
            emit(&table(&["RESOURCE", "ID", "HEALTH", "NUMA"], &rows))
        }
        f => emit(&structured(f, &resources)?),
    }
}

async fn change(ctx: &Ctx, target: &ControlTarget, mut req: Request) -> Result<()> {
    let (path, resources) = find(ctx, target).await?;
    if req.resource().is_none() {
        match resources.as_slice() {
            [one] => req.set_resource(one.resource.clone()),
            _ => {
                return Err(Error::usage(format!(
                    "{} serves several resources ({}); name one with --resource",
                    path.display(),
                    resources.iter().map(|r| r.resource.clone()).collect::<Vec<_>>().join(", ")
                )))
            }
        }
    }
    let a: Answer = control::send(&path, &req, ctx.timeout).await?;
    if !a.ok {
        return Err(Error::failed(format!("{}: {}", path.display(), a.error.unwrap_or_default())));
    }
    match ctx.format {
        Format::Table => {
            for r in &a.resources {
                let healthy = r.devices.iter().filter(|d| d.health == crate::api::HEALTHY).count();
                emit(&format!(
                    "{} {}: {} ({healthy}/{} healthy)",
                    r.resource,
                    req.op(),
                    req.ids().join(","),
                    r.devices.len()
                ))?;
            }
            Ok(())
        }
        f => emit(&structured(f, &a.resources)?),
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, cmd: &DeviceCommand) -> Result<()> {
    match cmd {
        DeviceCommand::List(t) => {
            let (_, resources) = find(ctx, t).await?;
            let shown: Vec<ResourceView> =
                resources.into_iter().filter(|r| t.select.as_ref().is_none_or(|x| x == &r.resource)).collect();
            show(ctx, &shown)
        }
        DeviceCommand::SetHealth { args, target } => {
            let (h, ids) =
                args.split_last().ok_or_else(|| Error::usage("give device IDs, then Healthy or Unhealthy"))?;
            let h = parse_health(h).map_err(crate::core::Error::usage_from)?;
            check_id_list("device IDs", ids)?;
            let req = Request::SetHealth { resource: target.select.clone(), ids: ids.to_vec(), health: h.into() };
            change(ctx, target, req).await
        }
        DeviceCommand::Add { ids, numa, unhealthy, target } => {
            check_id_list("device IDs", ids)?;
            let h = if *unhealthy { crate::api::UNHEALTHY } else { crate::api::HEALTHY };
            let req =
                Request::Add { resource: target.select.clone(), ids: ids.clone(), health: Some(h.into()), numa: *numa };
            change(ctx, target, req).await
        }
        DeviceCommand::Remove { ids, target } => {
            check_id_list("device IDs", ids)?;
            let req = Request::Remove { resource: target.select.clone(), ids: ids.clone() };
            change(ctx, target, req).await
        }
    }
}
