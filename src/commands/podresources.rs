//! `dpctl podresources list | allocatable | get POD`: the kubelet's
//! PodResources v1 API.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::podresources::{
    pod_resources_lister_client::PodResourcesListerClient, AllocatableResourcesRequest, ContainerResources,
    GetPodResourcesRequest, ListPodResourcesRequest, PodResources,
};
use crate::core::transport::{call, request};
use crate::core::Result;
use crate::render::{emit, list, numa_pr, structured, table, Format};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use tonic::transport::Channel;

/// `dpctl podresources`: its surface.
pub const COMMAND: Spec = Spec {
    name: "podresources",
    about: "Query the kubelet's PodResources v1 API: devices and DRA claims per container",
    group: super::surface::Group::Diagnose,
    args: surface::subcommands::<PodResourcesCommand>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<PodResourcesCommand>,
};

const EXAMPLES: &str = "Examples:
  # Every pod's devices (all namespaces), then one namespace's
  dpctl podresources list
  dpctl podresources list -n ml --no-headers
  # healthy devices of registered resources
  dpctl podresources allocatable
  # one pod; the socket of a mock kubelet
  dpctl podresources get trainer -n ml --socket /tmp/node/pod-resources/kubelet.sock";

const LIST_EXAMPLES: &str = "Examples:
  dpctl podresources list
  dpctl podresources list -n ml
  dpctl podresources list -A --no-headers -o table
  dpctl podresources list --plugin-dir /tmp/node/device-plugins -o json";

const ALLOCATABLE_EXAMPLES: &str = "Examples:
  dpctl podresources allocatable
  dpctl podresources allocatable --socket /tmp/node/pod-resources/kubelet.sock -o yaml";

const GET_EXAMPLES: &str = "Examples:
  dpctl podresources get trainer -n ml
  dpctl podresources get demo-trainer -o json";

/// `dpctl podresources …`
#[derive(Debug, Subcommand)]
pub enum PodResourcesCommand {
    /// List every pod's containers with their devices and DRA claims
    #[command(after_help = LIST_EXAMPLES)]
    List(PodResourcesListArgs),
    /// Show the node's allocatable devices (healthy devices of registered resources)
    #[command(after_help = ALLOCATABLE_EXAMPLES)]
    Allocatable(PodResourcesSocket),
    /// Show one pod's resources
    #[command(after_help = GET_EXAMPLES)]
    Get(PodResourcesGetArgs),
}

/// The PodResources socket.
#[derive(Debug, Args)]
pub struct PodResourcesSocket {
    /// The kubelet's PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with
    /// --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]
    #[arg(long, env = "DPCTL_POD_RESOURCES_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// `dpctl podresources list`
#[derive(Debug, Args)]
pub struct PodResourcesListArgs {
    /// Only pods in this namespace
    #[arg(short = 'n', long, value_name = "NAMESPACE", conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Pods in every namespace (the default)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[command(flatten)]
    /// The PodResources socket.
    pub socket: PodResourcesSocket,
}

/// `dpctl podresources get`
#[derive(Debug, Args)]
pub struct PodResourcesGetArgs {
    /// The pod's name
    #[arg(value_name = "POD")]
    pub pod: String,
    /// The pod's namespace
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    #[command(flatten)]
    /// The PodResources socket.
    pub socket: PodResourcesSocket,
}

impl Invocation for PodResourcesCommand {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

pub use crate::client::podresources::POD_RESOURCES_FIX;

/// Dial the PodResources socket; a missing socket names the flag that fixes it.
pub async fn client(ctx: &Ctx, socket: &Path) -> Result<PodResourcesListerClient<Channel>> {
    crate::client::podresources::connect(socket, ctx.timeout, super::INSPECT_MAX_RECV).await
}

/// The pods `-n NAMESPACE` selects (every pod without it), in the kubelet's order.
pub fn in_namespace(pods: Vec<PodResources>, namespace: Option<&str>) -> Vec<PodResources> {
    match namespace {
        None => pods,
        Some(ns) => pods.into_iter().filter(|p| p.namespace == ns).collect(),
    }
}

/// Table rows for one container: one per device group, CPU set, memory block
/// and dynamic resource claim; one `-` row when it holds nothing. A claim's
/// devices are `driver/pool/device`, their CDI IDs in the last column.
fn container_rows(pod: &PodResources, c: &ContainerResources) -> Vec<Vec<String>> {
    let base = |res: String, ids: String, numa: String, cdi: String| {
        vec![pod.name.clone(), pod.namespace.clone(), c.name.clone(), res, ids, numa, cdi]
    };
    let mut rows = Vec::new();
    for d in &c.devices {
        rows.push(base(d.resource_name.clone(), list(&d.device_ids), numa_pr(d.topology.as_ref()), "-".into()));
    }
    if !c.cpu_ids.is_empty() {
        let cpus: Vec<String> = c.cpu_ids.iter().map(|i| i.to_string()).collect();
        rows.push(base("cpu".into(), cpus.join(","), "-".into(), "-".into()));
    }
    for m in &c.memory {
        rows.push(base(
            format!("memory/{}", m.memory_type),
            m.size.to_string(),
            numa_pr(m.topology.as_ref()),
            "-".into(),
        ));
    }
    for d in &c.dynamic_resources {
        let devs: Vec<String> =
            d.claim_resources.iter().map(|r| format!("{}/{}/{}", r.driver_name, r.pool_name, r.device_name)).collect();
        let cdi: Vec<String> =
            d.claim_resources.iter().flat_map(|r| r.cdi_devices.iter().map(|c| c.name.clone())).collect();
        rows.push(base(format!("claim/{}/{}", d.claim_namespace, d.claim_name), list(&devs), "-".into(), list(&cdi)));
    }
    if rows.is_empty() {
        rows.push(base("-".into(), "-".into(), "-".into(), "-".into()));
    }
    rows
}

const POD_HEADERS: [&str; 7] = ["POD", "NAMESPACE", "CONTAINER", "RESOURCE", "DEVICES", "NUMA", "CDI"];

/// The pods as a table; the CDI column only when a container holds a DRA claim.
fn pods_table(pods: &[PodResources]) -> String {
    let mut rows = Vec::new();
    for p in pods {
        if p.containers.is_empty() {
            rows.push(vec![
                p.name.clone(),
                p.namespace.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
        for c in &p.containers {
            rows.extend(container_rows(p, c));
        }
    }
    let dra = pods.iter().any(|p| p.containers.iter().any(|c| !c.dynamic_resources.is_empty()));
    let cols = if dra { POD_HEADERS.len() } else { POD_HEADERS.len() - 1 };
    for r in &mut rows {
        r.truncate(cols);
    }
    if rows.is_empty() {
        "no pods".into()
    } else {
        table(&POD_HEADERS[..cols], &rows)
    }
}

/// The socket: --socket under --root, or the kubelet's.
/// Run the command.
pub async fn run(ctx: &Ctx, cmd: &PodResourcesCommand) -> Result<()> {
    match cmd {
        PodResourcesCommand::List(a) => {
            let socket = ctx.pod_resources(a.socket.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            crate::core::verbose::request(&socket, "List", &ListPodResourcesRequest {});
            let mut resp =
                call(&socket, "List", ctx.timeout, c.list(request(ListPodResourcesRequest {}, ctx.timeout))).await?;
            resp.pod_resources = in_namespace(resp.pod_resources, a.namespace.as_deref());
            match ctx.format {
                Format::Table => emit(&pods_table(&resp.pod_resources)),
                f => emit(&structured(f, &resp)?),
            }
        }
        PodResourcesCommand::Allocatable(s) => {
            let socket = ctx.pod_resources(s.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            crate::core::verbose::request(&socket, "GetAllocatableResources", &AllocatableResourcesRequest {});
            let resp = call(
                &socket,
                "GetAllocatableResources",
                ctx.timeout,
                c.get_allocatable_resources(request(AllocatableResourcesRequest {}, ctx.timeout)),
            )
            .await?;
            match ctx.format {
                Format::Table => {
                    let mut rows = Vec::new();
                    for d in &resp.devices {
                        for id in &d.device_ids {
                            rows.push(vec![d.resource_name.clone(), id.clone(), numa_pr(d.topology.as_ref())]);
                        }
                    }
                    if !resp.cpu_ids.is_empty() {
                        let cpus: Vec<String> = resp.cpu_ids.iter().map(|i| i.to_string()).collect();
                        rows.push(vec!["cpu".into(), cpus.join(","), "-".into()]);
                    }
                    for m in &resp.memory {
                        rows.push(vec![
                            format!("memory/{}", m.memory_type),
                            m.size.to_string(),
                            numa_pr(m.topology.as_ref()),
                        ]);
                    }
                    if rows.is_empty() {
                        emit("no allocatable resources")
                    } else {
                        emit(&table(&["RESOURCE", "DEVICE", "NUMA"], &rows))
                    }
                }
                f => emit(&structured(f, &resp)?),
            }
        }
        PodResourcesCommand::Get(a) => {
            let socket = ctx.pod_resources(a.socket.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            let req = GetPodResourcesRequest { pod_name: a.pod.clone(), pod_namespace: a.namespace.clone() };
            crate::core::verbose::request(&socket, "Get", &req);
            let resp = call(&socket, "Get", ctx.timeout, c.get(request(req, ctx.timeout))).await?;
            match ctx.format {
                Format::Table => {
                    let pods: Vec<PodResources> = resp.pod_resources.into_iter().collect();
                    emit(&pods_table(&pods))
                }
                f => emit(&structured(f, &resp)?),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::podresources::{CdiDevice, ClaimResource, ContainerDevices, DynamicResource};

    #[test]
    fn a_dra_device_is_driver_pool_device_with_its_cdi_ids_beside() {
        let pod = |containers| PodResources {
            name: "trainer".into(),
            namespace: "ml".into(),
            containers,
            ..Default::default()
        };
        let dp = ContainerResources {
            name: "main".into(),
            devices: vec![ContainerDevices {
                resource_name: "vendor.example/foo".into(),
                device_ids: vec!["foo-0".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = pods_table(&[pod(vec![dp.clone()])]);
        assert!(t.lines().next().unwrap().split_whitespace().eq(POD_HEADERS[..6].iter().copied()), "{t}");
        let mut dra = dp;
        dra.dynamic_resources = vec![DynamicResource {
            claim_name: "gpu".into(),
            claim_namespace: "ml".into(),
            claim_resources: vec![ClaimResource {
                driver_name: "gpu.example.com".into(),
                pool_name: "pool-0".into(),
                device_name: "dev-1".into(),
                cdi_devices: vec![CdiDevice { name: "k8s.gpu.example.com/claim=u-dev-1".into() }],
                ..Default::default()
            }],
        }];
        let t = pods_table(&[pod(vec![dra])]);
        let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], POD_HEADERS);
        assert_eq!(rows[1], ["trainer", "ml", "main", "vendor.example/foo", "foo-0", "-", "-"]);
        assert_eq!(
            rows[2],
            [
                "trainer",
                "ml",
                "main",
                "claim/ml/gpu",
                "gpu.example.com/pool-0/dev-1",
                "-",
                "k8s.gpu.example.com/claim=u-dev-1"
            ]
        );
    }
}
