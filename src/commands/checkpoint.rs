//! `dpctl checkpoint [--file PATH]`: the kubelet's device-manager checkpoint
//! as a table, with each allocation's AllocResp decoded. Read-only.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::deviceplugin::ContainerAllocateResponse;
use crate::client::checkpoint;
use crate::core::paths::CHECKPOINT_NAME;
use crate::core::{Error, Result};
use crate::render::{emit, structured, table, Format};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `dpctl checkpoint`: its surface.
pub const COMMAND: Spec = Spec {
    name: "checkpoint",
    about: "Show the kubelet's device-manager checkpoint, with each allocation's decoded Allocate answer",
    group: super::surface::Group::Diagnose,
    args: surface::args::<CheckpointArgs>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<CheckpointArgs>,
};

const EXAMPLES: &str = "Examples:
  dpctl checkpoint
  dpctl checkpoint --file /tmp/node/device-plugins/kubelet_internal_checkpoint -o json";

/// `dpctl checkpoint`
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The checkpoint file [default: <plugin-dir>/kubelet_internal_checkpoint]
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

impl Invocation for CheckpointArgs {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    pod_uid: String,
    /// `namespace/name`, when the mock kubelet serving the plugin directory knows the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<String>,
    container_name: String,
    resource_name: String,
    device_ids: BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alloc_resp: Option<ContainerAllocateResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alloc_resp_error: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct View {
    file: String,
    checksum_verified: bool,
    entries: Vec<Entry>,
    registered_devices: BTreeMap<String, Vec<String>>,
}

/// A one-cell summary of an Allocate answer.
pub fn summary(r: &ContainerAllocateResponse) -> String {
    let mut parts = Vec::new();
    parts.extend(r.envs.iter().map(|(k, v)| format!("env {k}={v}")));
    parts.extend(
        r.mounts
            .iter()
            .map(|m| format!("mount {}:{}{}", m.host_path, m.container_path, if m.read_only { ":ro" } else { "" })),
    );
    parts.extend(r.devices.iter().map(|d| format!("device {}:{}:{}", d.host_path, d.container_path, d.permissions)));
    parts.extend(r.annotations.iter().map(|(k, v)| format!("annotation {k}={v}")));
    parts.extend(r.cdi_devices.iter().map(|c| format!("cdi {}", c.name)));
    if parts.is_empty() {
        "(empty)".into()
    } else {
        parts.join("; ")
    }
}

/// Pod UID → `namespace/name` from the mock kubelet serving the plugin
/// directory, if one answers (the checkpoint has only UIDs; a real
/// kubelet's PodResources has only names).
async fn pod_names(ctx: &Ctx) -> BTreeMap<String, String> {
    let t = ctx.timeout.min(std::time::Duration::from_millis(500));
    let Ok(n) = crate::client::status::fetch(&ctx.paths.plugin_dir, t).await else { return BTreeMap::new() };
    n.pods
        .iter()
        .filter_map(|p| {
            Some((p["uid"].as_str()?.to_string(), format!("{}/{}", p["namespace"].as_str()?, p["name"].as_str()?)))
        })
        .chain(n.dra_pods.iter().filter_map(|p| Some((p["uid"].as_str()?.to_string(), p["pod"].as_str()?.to_string()))))
        .collect()
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &CheckpointArgs) -> Result<()> {
    let path = a.file.clone().unwrap_or_else(|| ctx.paths.plugin_dir.join(CHECKPOINT_NAME));
    let loaded = checkpoint::read(&path)?.ok_or_else(|| {
        Error::failed(format!(
            "{}: no checkpoint (the kubelet writes it once a device plugin registered); check --plugin-dir or --file",
            path.display()
        ))
    })?;
    let data = loaded.checkpoint.data;
    let names = pod_names(ctx).await;
    let entries: Vec<Entry> = data
        .pod_device_entries
        .iter()
        .map(|e| {
            let (alloc_resp, alloc_resp_error) = match e.decode_alloc_resp() {
                Ok(r) => (Some(r), None),
                Err(err) => (None, Some(err.to_string())),
            };
            Entry {
                pod: names.get(&e.pod_uid).cloned(),
                pod_uid: e.pod_uid.clone(),
                container_name: e.container_name.clone(),
                resource_name: e.resource_name.clone(),
                device_ids: e.device_ids.clone(),
                alloc_resp,
                alloc_resp_error,
            }
        })
        .collect();
    let view = View {
        file: path.display().to_string(),
        checksum_verified: loaded.checksum_ours,
        entries,
        registered_devices: data.registered_devices,
    };
    if ctx.format != Format::Table {
        return emit(&structured(ctx.format, &view)?);
    }
    let mut out = String::new();
    if view.entries.is_empty() {
        out.push_str("no allocations\n");
    } else {
        let rows: Vec<Vec<String>> = view
            .entries
            .iter()
            .map(|e| {
                let ids: Vec<String> = e.device_ids.values().flatten().cloned().collect();
                let numa: Vec<String> = e.device_ids.keys().filter(|k| *k != "-1").cloned().collect();
                vec![
                    e.pod.clone().unwrap_or_else(|| format!("UID {}", e.pod_uid)),
                    e.container_name.clone(),
                    e.resource_name.clone(),
                    ids.join(","),
                    if numa.is_empty() { "-".into() } else { numa.join(",") },
                    match (&e.alloc_resp, &e.alloc_resp_error) {
                        (Some(r), _) => summary(r),
                        (_, Some(err)) => format!("(undecodable: {err})"),
                        _ => String::new(),
                    },
                ]
            })
            .collect();
        out.push_str(&table(&["POD", "CONTAINER", "RESOURCE", "DEVICES", "NUMA", "ALLOCATION"], &rows));
        out.push('\n');
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = view
        .registered_devices
        .iter()
        .map(|(r, ids)| vec![r.clone(), ids.len().to_string(), crate::render::list(ids)])
        .collect();
    if rows.is_empty() {
        out.push_str("no registered resources\n");
    } else {
        out.push_str(&table(&["REGISTERED RESOURCE", "DEVICES", "IDS"], &rows));
        out.push('\n');
    }
    emit(&out)
}
