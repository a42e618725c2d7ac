//! `dpctl pods list | get POD | watch`: the kubelet's pods API
//! (pods/v1alpha1, KEP-4188), served on `<kubelet-root>/pods-api/pods-api.sock`
//! by kubelets with the PodsAPI gate (1.36 alpha, 1.37 beta). Each pod
//! arrives as a core/v1 Pod in Kubernetes protobuf and is shown as its JSON.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::api::pods_v1alpha1::{pods_client::PodsClient, EventType, GetPodRequest, ListPodsRequest, WatchPodsRequest};
use crate::core::transport::{call, request, status_error};
use crate::core::{Error, Result};
use crate::render::{emit, json_line, structured, table, Format};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tonic::transport::Channel;

/// `dpctl pods`: its surface.
pub const COMMAND: Spec = Spec {
    name: "pods",
    about: "Query the kubelet's pods API (1.36+): its pods with their status, listed, one by UID or name, or watched",
    group: super::surface::Group::Diagnose,
    args: surface::subcommands::<PodsCommand>,
    examples: EXAMPLES,
    sockets: &[],
    refuses_output: None,
    parse: surface::parse::<PodsCommand>,
};

const EXAMPLES: &str = "Examples:
  # Every pod the kubelet runs, then one namespace's
  dpctl pods list
  dpctl pods list -n ml -o yaml
  # one pod, by UID or by name
  dpctl pods get trainer -n ml -o json
  # the initial list, then every change (a mock kubelet's socket)
  dpctl pods watch --socket /tmp/node/pods-api/pods-api.sock";

const LIST_EXAMPLES: &str = "Examples:
  dpctl pods list
  dpctl pods list -n ml --no-headers
  dpctl --kubelet-root-dir /tmp/node pods list -o json";

const GET_EXAMPLES: &str = "Examples:
  dpctl pods get 6f1c9a52-1b2c-4d5e-8f90-123456789abc
  dpctl pods get trainer -n ml -o yaml";

const WATCH_EXAMPLES: &str = "Examples:
  dpctl pods watch
  dpctl pods watch -o json --count 3";

/// `dpctl pods …`
#[derive(Debug, Subcommand)]
pub enum PodsCommand {
    /// List the kubelet's pods (ListPods)
    #[command(after_help = LIST_EXAMPLES)]
    List(PodsListArgs),
    /// Show one pod (GetPod by UID; a name is looked up with ListPods in -n)
    #[command(after_help = GET_EXAMPLES)]
    Get(PodsGetArgs),
    /// Print every pod, then each change as it happens (WatchPods)
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(PodsWatchArgs),
}

/// The pods API socket.
#[derive(Debug, Args)]
pub struct PodsSocket {
    /// The kubelet's pods API socket [default: <kubelet-root-dir>/pods-api/pods-api.sock, beside
    /// the PodResources socket's directory]
    #[arg(long, env = "DPCTL_PODS_API_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// `dpctl pods list`
#[derive(Debug, Args)]
pub struct PodsListArgs {
    /// Only pods in this namespace
    #[arg(short = 'n', long, value_name = "NAMESPACE", conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Pods in every namespace (the default)
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[command(flatten)]
    /// The socket.
    pub socket: PodsSocket,
}

/// `dpctl pods get`
#[derive(Debug, Args)]
pub struct PodsGetArgs {
    /// The pod's UID, or its name (in -n)
    #[arg(value_name = "POD")]
    pub pod: String,
    /// The namespace a pod name is looked up in
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    #[command(flatten)]
    /// The socket.
    pub socket: PodsSocket,
}

/// `dpctl pods watch`
#[derive(Debug, Args)]
pub struct PodsWatchArgs {
    /// Stop after N events (INITIAL_SYNC_COMPLETE counts as one)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    #[command(flatten)]
    /// The socket.
    pub socket: PodsSocket,
}

impl Invocation for PodsCommand {
    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// The pod a `pod` field holds (Kubernetes protobuf of core/v1 Pod) as JSON.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    crate::controlplane::protobuf::decode(".k8s.io.api.core.v1.Pod", bytes)
        .map_err(|e| Error::failed(format!("the kubelet sent a pod that is not a core/v1 Pod in protobuf: {e}")))
}

/// `ready/total` of a pod's containers.
fn ready(p: &Value) -> String {
    let st = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
    let n = p["spec"]["containers"].as_array().map_or(st.len(), Vec::len);
    format!("{}/{n}", st.iter().filter(|s| s["ready"] == true).count())
}

fn s(v: &Value) -> String {
    v.as_str().filter(|s| !s.is_empty()).unwrap_or("-").to_string()
}

/// A table row: namespace, name, UID, phase, ready containers, the DisruptionTarget reason.
fn row(p: &Value) -> Vec<String> {
    let m = &p["metadata"];
    let reason = p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
        .map(|c| s(&c["reason"]))
        .or_else(|| p["status"]["reason"].as_str().map(str::to_string))
        .unwrap_or_else(|| "-".into());
    vec![s(&m["namespace"]), s(&m["name"]), s(&m["uid"]), s(&p["status"]["phase"]), ready(p), reason]
}

const HEADERS: [&str; 6] = ["NAMESPACE", "NAME", "UID", "PHASE", "READY", "REASON"];

fn render_pods(ctx: &Ctx, pods: &[Value]) -> Result<()> {
    match ctx.format {
        Format::Table if pods.is_empty() => emit("no pods"),
        Format::Table => emit(&table(&HEADERS, &pods.iter().map(row).collect::<Vec<_>>())),
        f => emit(&structured(f, &json!({"apiVersion": "v1", "kind": "PodList", "items": pods}))?),
    }
}

async fn client(ctx: &Ctx, socket: &Path) -> Result<PodsClient<Channel>> {
    crate::client::pods::connect(socket, ctx.timeout, super::INSPECT_MAX_RECV).await
}

async fn list(ctx: &Ctx, c: &mut PodsClient<Channel>, socket: &Path) -> Result<Vec<Value>> {
    crate::core::verbose::request(socket, "ListPods", &ListPodsRequest {});
    let resp = call(socket, "ListPods", ctx.timeout, c.list_pods(request(ListPodsRequest {}, ctx.timeout))).await?;
    resp.pods.iter().map(|b| decode(b)).collect()
}

async fn get_pod(
    ctx: &Ctx,
    c: &mut PodsClient<Channel>,
    socket: &Path,
    uid: String,
) -> Result<crate::api::pods_v1alpha1::GetPodResponse> {
    let req = GetPodRequest { pod_uid: uid };
    crate::core::verbose::request(socket, "GetPod", &req);
    call(socket, "GetPod", ctx.timeout, c.get_pod(request(req, ctx.timeout))).await
}

fn event_name(t: i32) -> &'static str {
    EventType::try_from(t).map(|t| t.as_str_name()).unwrap_or("UNKNOWN")
}

/// Run the command.
pub async fn run(ctx: &Ctx, cmd: &PodsCommand) -> Result<()> {
    match cmd {
        PodsCommand::List(a) => {
            let socket = ctx.pods_api(a.socket.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            let mut pods = list(ctx, &mut c, &socket).await?;
            if let Some(ns) = &a.namespace {
                pods.retain(|p| p["metadata"]["namespace"] == ns.as_str());
            }
            render_pods(ctx, &pods)
        }
        PodsCommand::Get(a) => {
            let socket = ctx.pods_api(a.socket.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            let resp = match get_pod(ctx, &mut c, &socket, a.pod.clone()).await {
                Err(Error::Rpc { code: code @ tonic::Code::NotFound, target, method, message }) => {
                    // Not a UID: a name in -n, as kubectl names pods.
                    let found = list(ctx, &mut c, &socket).await?.into_iter().find(|p| {
                        p["metadata"]["name"] == a.pod.as_str() && p["metadata"]["namespace"] == a.namespace.as_str()
                    });
                    match found.and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string)) {
                        Some(uid) => get_pod(ctx, &mut c, &socket, uid).await?,
                        None => return Err(Error::Rpc { target, method, code, message }),
                    }
                }
                r => r?,
            };
            let pod = decode(&resp.pod)?;
            match ctx.format {
                Format::Table => emit(&table(&HEADERS, &[row(&pod)])),
                f => emit(&structured(f, &pod)?),
            }
        }
        PodsCommand::Watch(a) => {
            let socket = ctx.pods_api(a.socket.socket.as_ref());
            let mut c = client(ctx, &socket).await?;
            crate::core::verbose::request(&socket, "WatchPods", &WatchPodsRequest {});
            // No deadline on the stream: it runs until --count or an interrupt.
            let mut stream = call(&socket, "WatchPods", ctx.timeout, c.watch_pods(WatchPodsRequest {})).await?;
            let mut seen = 0u64;
            let mut header = matches!(ctx.format, Format::Table) && !crate::render::options().no_headers;
            while let Some(e) = stream.message().await.map_err(|st| status_error(&socket, "WatchPods", st))? {
                let kind = event_name(e.r#type);
                let pod = if e.pod.is_empty() { Value::Null } else { decode(&e.pod)? };
                let text = match ctx.format {
                    Format::Table => {
                        let mut r = if pod.is_null() { vec!["-".to_string(); HEADERS.len()] } else { row(&pod) };
                        r.insert(0, kind.to_string());
                        let mut h = vec!["EVENT"];
                        h.extend(HEADERS);
                        let t = crate::render::table_with(&h, &[r], !header);
                        header = false;
                        t
                    }
                    Format::Json => json_line(&json!({"type": kind, "object": pod}))?,
                    f => format!("---\n{}", structured(f, &json!({"type": kind, "object": pod}))?),
                };
                emit(&text)?;
                seen += 1;
                if a.count.is_some_and(|n| seen >= n) {
                    break;
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_names_the_eviction_reason_and_ready_containers() {
        let p = json!({"metadata": {"name": "a", "namespace": "ml", "uid": "u1"},
            "spec": {"containers": [{"name": "c1"}, {"name": "c2"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c1", "ready": true}, {"name": "c2"}],
                "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager"}]}});
        assert_eq!(row(&p), ["ml", "a", "u1", "Running", "1/2", "DeletionByDeviceTaintManager"]);
        let bare = json!({"metadata": {"name": "b", "namespace": "ml", "uid": "u2"}});
        assert_eq!(row(&bare), ["ml", "b", "u2", "-", "0/0", "-"]);
    }
}
