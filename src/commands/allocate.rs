//! `dpctl allocate SOCKET ID... [--container ID,ID]...`: Allocate.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::{AllocateRequest, AllocateResponse, ContainerAllocateRequest};
use crate::core::validate::check_id_list;
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::render::{emit, structured, table, Format};
use clap::Args;
use std::path::PathBuf;

/// `dpctl allocate`: its surface.
pub const COMMAND: Spec = Spec {
    name: "allocate",
    about: "Call Allocate on a device plugin for one or more containers",
    group: super::surface::Group::Plugin,
    args: surface::args::<AllocateArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Positional],
    refuses_output: None,
    parse: surface::parse::<AllocateArgs>,
};

const EXAMPLES: &str = "Examples:
  # Allocate two devices for one container
  dpctl allocate vendor.sock foo-0 foo-2
  # two containers: foo-0 for the first, foo-1 and foo-3 for the second
  dpctl allocate vendor.sock foo-0 --container foo-1,foo-3 -o yaml";

/// `dpctl allocate`
#[derive(Debug, Args)]
pub struct AllocateArgs {
    /// The plugin's socket (a bare name is looked up in --plugin-dir)
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    /// Device IDs for one container
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// Device IDs for one more container, comma-separated (repeat for several containers)
    #[arg(long = "container", value_name = "ID,ID")]
    pub containers: Vec<String>,
}

impl Invocation for AllocateArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// The containers of the request: the positional IDs, then each `--container`.
pub fn containers(a: &AllocateArgs) -> Result<Vec<Vec<String>>> {
    let mut out = Vec::new();
    if !a.ids.is_empty() {
        out.push(a.ids.clone());
    }
    for c in &a.containers {
        out.push(c.split(',').map(|s| s.trim().to_string()).collect());
    }
    if out.is_empty() {
        return Err(Error::usage(
            "no device IDs: give them as `dpctl allocate SOCKET ID...` or `--container ID,ID` (repeatable)",
        ));
    }
    for (i, ids) in out.iter().enumerate() {
        check_id_list(&format!("container {i}"), ids)?;
    }
    Ok(out)
}

/// Rows of an allocate response table: CONTAINER KIND NAME VALUE.
pub fn rows(resp: &AllocateResponse) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (i, c) in resp.container_responses.iter().enumerate() {
        let i = i.to_string();
        let before = rows.len();
        for (k, v) in &c.envs {
            rows.push(vec![i.clone(), "env".into(), k.clone(), v.clone()]);
        }
        for m in &c.mounts {
            let ro = if m.read_only { " (ro)" } else { " (rw)" };
            rows.push(vec![i.clone(), "mount".into(), m.container_path.clone(), format!("{}{ro}", m.host_path)]);
        }
        for d in &c.devices {
            rows.push(vec![
                i.clone(),
                "device".into(),
                d.container_path.clone(),
                format!("{} ({})", d.host_path, d.permissions),
            ]);
        }
        for (k, v) in &c.annotations {
            rows.push(vec![i.clone(), "annotation".into(), k.clone(), v.clone()]);
        }
        for d in &c.cdi_devices {
            rows.push(vec![i.clone(), "cdi".into(), d.name.clone(), String::new()]);
        }
        if rows.len() == before {
            rows.push(vec![i, "(empty)".into(), String::new(), String::new()]);
        }
    }
    rows
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &AllocateArgs) -> Result<()> {
    let containers = containers(a)?;
    let conn = ctx.plugin(&a.socket).await?;
    let want = containers.len();
    let req = AllocateRequest {
        container_requests: containers
            .into_iter()
            .map(|devices_ids| ContainerAllocateRequest { devices_ids })
            .collect(),
    };
    let resp = conn.allocate(req).await?;
    match ctx.format {
        Format::Table if resp.container_responses.is_empty() => {}
        Format::Table => emit(&table(&["CONTAINER", "KIND", "NAME", "VALUE"], &rows(&resp)))?,
        f => emit(&structured(f, &resp)?)?,
    }
    let got = resp.container_responses.len();
    if got != want {
        return Err(Error::failed(format!(
            "{}: Allocate returned {got} container response(s) for {want} container request(s); the kubelet fails the pod when a plugin does this",
            conn.socket().display()
        )));
    }
    Ok(())
}
