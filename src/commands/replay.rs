//! `dpctl replay TRACE`: as the recorded plugin (registering like `serve`),
//! with `--against SOCKET` as the recorded kubelet, diffing a live plugin's
//! answers against the recording, or with `--kubelet` both at once: a mock
//! kubelet (the engine, in this process, on a temp node tree, seeded through its
//! public inputs — a checkpoint and pod manifests) with the recorded pods,
//! the replayed plugin, and the recorded pods admitted again one by one,
//! reporting where the kubelet's device choices differ from the recorded ones.

use super::surface::{self, Invocation, Running, Spec};
use super::Ctx;
use crate::cli::RegistrationArgs;
use crate::client::PluginConn;
use crate::core::log::{LogFormat, Logger};
use crate::core::task::{until_interrupted, Tasks};
use crate::core::{Error, Result};
use crate::help::Socket;
use crate::plugin::config::FileConfig;
use crate::plugin::replay::Replayed;
use crate::render::{emit, structured, table, Format};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// `dpctl replay`: its surface.
pub const COMMAND: Spec = Spec {
    name: "replay",
    about: "Replay a trace as the plugin (against a kubelet), as the kubelet (--against a plugin), or both on this machine (--kubelet)",
    group: super::surface::Group::Simulate,
    args: surface::args::<ReplayArgs>,
    examples: EXAMPLES,
    sockets: &[Socket::Flag("against")],
    refuses_output: None,
    parse: surface::parse::<ReplayArgs>,
};

const EXAMPLES: &str = "Examples:
  # Be the recorded plugin again, against a (mock) kubelet
  dpctl replay gpu.trace.jsonl --plugin-dir /tmp/node/device-plugins --speed 10
  # be the kubelet: send the recorded calls to a plugin and diff the answers
  dpctl replay gpu.trace.jsonl --against /tmp/dp/my-plugin.sock";

/// `dpctl replay`
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace file
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Act as the kubelet: send the recorded calls to this plugin and diff the answers
    #[arg(long, value_name = "SOCKET", conflicts_with = "kubelet")]
    pub against: Option<PathBuf>,
    /// Reproduce on this machine: a mock kubelet seeded with the recorded pods and allocations, the replayed plugin, the recorded pods admitted again; report where the device choices differ
    #[arg(long)]
    pub kubelet: bool,
    /// With --kubelet: the mock kubelet behaves as this version (1.25 to 1.37)
    #[arg(long, default_value_t = crate::kubelet::profile::KubeletVersion::DEFAULT, value_parser = crate::kubelet::profile::KubeletVersion::parse, value_name = "X.Y", requires = "kubelet")]
    pub kubelet_version: crate::kubelet::profile::KubeletVersion,
    /// Resource name to register (default: the trace's)
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// Replay the ListAndWatch timeline this many times faster
    #[arg(long, default_value_t = 1.0, value_parser = speed_arg, value_name = "FACTOR")]
    pub speed: f64,
    /// Replay the ListAndWatch timeline without its recorded pauses
    #[arg(long)]
    pub no_wait: bool,
    /// How to serve and register (as the plugin)
    #[command(flatten)]
    pub reg: RegistrationArgs,
    /// Log format
    #[arg(long, value_enum, default_value_t = LogFormat::Human, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

fn speed_arg(s: &str) -> Result<f64, crate::cli::FlagValueError> {
    use crate::cli::FlagValueError;
    let f: f64 = s.parse().map_err(|_| FlagValueError::not_form(s, "a number"))?;
    if !(f.is_finite() && f > 0.0) {
        return Err(FlagValueError::Range("must be greater than zero".into()));
    }
    Ok(f)
}

impl Invocation for ReplayArgs {
    fn workers(&self) -> usize {
        1
    }

    fn run<'a>(&'a self, ctx: &'a Ctx) -> Running<'a> {
        Box::pin(run(ctx, self))
    }
}

/// Run the command.
pub async fn run(ctx: &Ctx, a: &ReplayArgs) -> Result<()> {
    // Read and check the whole trace before serving anything.
    let trace = crate::trace::read(&a.trace)?;
    if let Some(sock) = &a.against {
        let conn = ctx.plugin(sock).await?;
        return against(ctx, &conn, &trace).await;
    }
    if a.kubelet {
        return reproduce(ctx, a, &trace).await;
    }
    let backend = Arc::new(Replayed::new(&trace, a.resource.as_deref(), a.speed, a.no_wait)?);
    crate::protocol::registration::check_resource_name(backend.resource_name())?;
    let settings = crate::plugin::registrar::Settings::resolve(
        &ctx.paths,
        ctx.plugin_dir_given,
        ctx.timeout,
        &a.reg.requested(),
        &FileConfig::default(),
    )?;
    let log = Logger::new(a.log_format);
    log.event(
        "replaying",
        &[
            ("trace", json!(a.trace.display().to_string())),
            ("resource", json!(backend.resource_name())),
            ("listAndWatchSteps", json!(backend.steps())),
        ],
    );
    let tasks = Tasks::new();
    let run = crate::plugin::registrar::run(backend, settings, log.clone(), tasks.clone(), |_| {});
    let r = until_interrupted(&tasks, run).await;
    tasks.stop().await;
    log.event("stopped", &[]);
    r
}

async fn against(ctx: &Ctx, conn: &PluginConn, trace: &crate::trace::Trace) -> Result<()> {
    let (results, skipped) = crate::kubelet::against::run(conn, trace, ctx.timeout).await;
    let differing = results.iter().filter(|r| !r.diffs.is_empty()).count();
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = results
                .iter()
                .map(|r| {
                    let v = if r.diffs.is_empty() {
                        crate::render::verdict("PASS")
                    } else {
                        crate::render::verdict("FAIL")
                    };
                    let text = match &r.devices {
                        Some(d) => d.parts().into_iter().map(|(k, s)| paint(k, &s)).collect::<Vec<_>>().join("; "),
                        None if r.diffs.is_empty() => "same as recorded".into(),
                        None => r.diffs.join("; "),
                    };
                    vec![v, r.call.clone(), text]
                })
                .collect();
            let mut out = table(&["RESULT", "CALL", "DIFFERENCE"], &rows);
            out.push_str(&format!(
                "\n{} call(s) replayed, {differing} differ; {skipped} ListAndWatch message(s) and stream end(s) not lined up (the plugin sent nothing matching: they depend on events outside the calls)\n",
                results.len()
            ));
            emit(&out)?;
        }
        f => emit(&structured(f, &json!({"results": results, "differing": differing, "skipped": skipped}))?)?,
    }
    if differing > 0 {
        return Err(Error::failed(format!(
            "{}: {differing} of {} replayed call(s) differ from the recording",
            conn.socket().display(),
            results.len()
        )));
    }
    Ok(())
}

/// Colour one device difference: removed red, added green, changed yellow
/// (plain when colour is off: `colored` honours NO_COLOR and --no-color).
fn paint(kind: char, s: &str) -> String {
    use colored::Colorize;
    match kind {
        '-' => s.red().to_string(),
        '+' => s.green().to_string(),
        _ => s.yellow().to_string(),
    }
}

/// The replayed plugin's socket name in the temp node's plugin directory.
const REPLAYED_SOCKET: &str = "dpctl-replayed.sock";

/// What one container got, then and now.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Decision {
    /// The recorded Allocate.
    call: String,
    /// `namespace/pod/container`.
    container: String,
    /// Devices the kubelet chose when recording (or the recorded error).
    recorded: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded_error: Option<String>,
    /// Devices the mock kubelet chose now (empty if it made no Allocate).
    replayed: Vec<String>,
    /// Why the pod was not admitted now, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<String>,
    /// Same decision as recorded.
    same: bool,
}

/// The kubelet engine on its temp tree.
struct Node {
    dir: crate::kubelet::tree::TempNode,
    kubelet: crate::kubelet::node::Node,
}

impl Node {
    fn pods(&self) -> std::path::PathBuf {
        self.dir.tree.manifests.clone()
    }
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.tree.logs.join("kubelet.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
    async fn status(&self) -> Option<crate::kubelet::node::NodeStatus> {
        self.kubelet.status().await
    }
    /// Poll the node until `f` gives an answer (at most `within`).
    async fn wait<T>(
        &mut self,
        what: &str,
        within: std::time::Duration,
        f: impl Fn(&crate::kubelet::node::NodeStatus) -> Option<T>,
    ) -> Result<T> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.kubelet.has_ended() {
                return Err(Error::failed(format!(
                    "the mock kubelet stopped while waiting for {what}; its log ends:\n{}",
                    self.log_tail()
                )));
            }
            if let Some(s) = self.status().await {
                if let Some(v) = f(&s) {
                    return Ok(v);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::failed(format!(
                    "the mock kubelet did not show {what} within {}",
                    crate::core::time::format_duration(within)
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// Write a manifest whole (temp file, then rename), so no scan sees half of it.
fn write_manifest(dir: &std::path::Path, file: &str, text: &str) -> Result<()> {
    let tmp = dir.join(format!(".{file}.tmp"));
    let to = dir.join(file);
    std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, "cannot write a pod manifest", &e))?;
    std::fs::rename(&tmp, &to).map_err(|e| Error::io(&to, "cannot write a pod manifest", &e))
}

fn resource_of<'a>(s: &'a crate::kubelet::node::NodeStatus, res: &str) -> Option<&'a serde_json::Value> {
    s.resources.iter().find(|r| r["resource"] == res)
}

/// The devices the node shows for a resource equal `want` (IDs and health).
fn shows_devices(s: &crate::kubelet::node::NodeStatus, res: &str, want: &[crate::api::deviceplugin::Device]) -> bool {
    let Some(r) = resource_of(s, res) else { return false };
    let Some(devs) = r["devices"].as_object() else { return false };
    r["state"] == "running"
        && devs.len() == want.iter().map(|d| &d.id).collect::<std::collections::BTreeSet<_>>().len()
        && want.iter().all(|d| devs.get(&d.id).is_some_and(|x| x["health"] == d.health.as_str()))
}

/// What the mock kubelet made of a pod manifest.
enum Decided {
    /// Admitted: the pod's status.
    Admitted(serde_json::Value),
    /// Rejected, in the kubelet's words.
    Rejected(String),
}

/// Pod status (by manifest file name) or the rejection of that file.
fn admitted(s: &crate::kubelet::node::NodeStatus, file: &str) -> Option<Decided> {
    let ends = |f: &str| std::path::Path::new(f).file_name().is_some_and(|n| n == file);
    if let Some(p) = s.pods.iter().find(|p| p["file"].as_str().is_some_and(ends)) {
        return Some(Decided::Admitted(p.clone()));
    }
    s.rejected.iter().find(|(f, _)| ends(f)).map(|(_, why)| Decided::Rejected(why.clone()))
}

fn container_devices(pod: &serde_json::Value, container: &str, res: &str) -> Vec<String> {
    let mut ids: Vec<String> = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == container)
        .flat_map(|c| c["resources"][res].as_object().into_iter().flatten())
        .flat_map(|(_, v)| v.as_array().into_iter().flatten())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

async fn reproduce(ctx: &Ctx, a: &ReplayArgs, trace: &crate::trace::Trace) -> Result<()> {
    let backend = Replayed::new(trace, a.resource.as_deref(), 1.0, true)?;
    let resource = backend.resource_name().to_string();
    crate::protocol::registration::check_resource_name(&resource)?;
    let plan = crate::kubelet::reproduce::plan(trace, &resource);
    let backend = Arc::new(backend.stepped(plan.initial.clone()));

    // The node tree, with the seeded checkpoint and the seeded manifests in
    // place before the kubelet's first scan, so checkpointed allocations find their pods.
    let dir = crate::kubelet::tree::TempNode::new("replay")?;
    let tree = dir.tree.clone();
    let dp = tree.plugin_dir.clone();
    crate::client::checkpoint::write(&tree.checkpoint(), &plan.seed.checkpoint)?;
    for (file, text) in &plan.seed.manifests {
        write_manifest(&tree.manifests, file, text)?;
    }
    let bus = crate::kubelet::event::EventBus::new(Logger::to_file(
        crate::core::log::LogFormat::Json,
        &tree.logs.join("kubelet.log"),
    )?);
    let mut spec =
        crate::kubelet::node::NodeSpec { plugins_registry_dir: None, ..crate::kubelet::node::NodeSpec::on_tree(&tree) };
    spec.manager.profile = crate::kubelet::profile::Profile::of(a.kubelet_version);
    let kubelet = crate::kubelet::node::Node::start(spec, bus).await?;
    let mut node = Node { dir, kubelet };

    let settings = crate::plugin::registrar::Settings {
        plugin_dir: dp.clone(),
        socket_name: Some(REPLAYED_SOCKET.into()),
        kubelet_socket: dp.join(crate::core::paths::KUBELET_SOCKET_NAME),
        mode: crate::plugin::config::RegistrationMode::Kubelet,
        registry_dir: tree.registry_dir.clone(),
        register: true,
        retry: true,
        reregister_on_disconnect: false,
        timeout: ctx.timeout,
        host_root: Default::default(), // a private temp tree
    };
    let plog = Logger::to_file(a.log_format, &tree.logs.join("plugin.log"))?;
    let tasks = Tasks::new();
    let (plugin, b2) = (tasks.child(), backend.clone());
    tasks.spawn_joined(async move {
        let _ = crate::plugin::registrar::run(b2, settings, plog, plugin, |_| {}).await;
    });

    let work = drive(&mut node, &plan, &backend);
    let outcome = tokio::select! {
        r = work => r,
        _ = crate::core::interrupted() => Err(Error::failed("interrupted")),
    };
    tasks.stop().await;
    node.kubelet.stop().await;
    let (decisions, notes) = outcome?;
    let differing = decisions.iter().filter(|d| !d.same).count();
    match ctx.format {
        Format::Table => {
            let rows: Vec<Vec<String>> = decisions
                .iter()
                .map(|d| {
                    let v = crate::render::verdict(if d.same { "PASS" } else { "FAIL" });
                    let recorded = match &d.recorded_error {
                        Some(e) => format!("error: {e}"),
                        None => crate::render::list(&d.recorded),
                    };
                    let now = match (&d.rejected, d.replayed.is_empty()) {
                        (Some(why), true) => format!("rejected: {why}"),
                        (Some(why), false) => format!("{} (rejected: {why})", crate::render::list(&d.replayed)),
                        (None, _) => crate::render::list(&d.replayed),
                    };
                    vec![v, d.call.clone(), d.container.clone(), recorded, now]
                })
                .collect();
            let mut out = String::new();
            for n in &notes {
                out.push_str(&format!("note: {n}\n"));
            }
            if rows.is_empty() {
                out.push_str("the trace has no Allocate to reproduce\n");
            } else {
                out.push_str(&table(&["RESULT", "CALL", "CONTAINER", "RECORDED", "NOW"], &rows));
                out.push('\n');
            }
            out.push_str(&format!(
                "\n{} pod(s) seeded from the recorded kubelet state; {} Allocate decision(s) reproduced, {differing} differ\n",
                plan.seed.manifests.len(),
                decisions.len()
            ));
            emit(&out)?;
        }
        f => emit(&structured(
            f,
            &json!({
                "resource": resource,
                "seededPods": plan.seed.manifests.len(),
                "notes": notes,
                "results": decisions,
                "differing": differing,
            }),
        )?)?,
    }
    if differing > 0 {
        return Err(Error::failed(format!(
            "{differing} of {} Allocate decision(s) differ from the recording",
            decisions.len()
        )));
    }
    Ok(())
}

/// Seeded node up, then each recorded pod admitted again; what the kubelet chose.
async fn drive(
    node: &mut Node,
    plan: &crate::kubelet::reproduce::Plan,
    backend: &Replayed,
) -> Result<(Vec<Decision>, Vec<String>)> {
    use std::time::Duration;
    let res = plan.resource.clone();
    let mut notes = plan.notes.clone();
    let up = Duration::from_secs(15);
    node.wait("the replayed plugin registered with its devices", up, |s| {
        shows_devices(s, &res, &plan.initial).then_some(())
    })
    .await?;
    for (file, _) in &plan.seed.manifests {
        match node.wait(&format!("the seeded pod {file}"), up, |s| admitted(s, file)).await? {
            Decided::Admitted(_) => {}
            Decided::Rejected(why) => notes.push(format!("the mock kubelet rejected the seeded pod {file}: {why}")),
        }
    }
    let mut decisions = Vec::new();
    for step in &plan.steps {
        for f in &step.frees {
            let p = node.pods().join(f);
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| Error::io(&p, "cannot remove a pod manifest", &e))?;
                node.wait(&format!("{f} removed"), up, |s| admitted(s, f).is_none().then_some(())).await?;
            }
        }
        backend.set_devices(step.devices.clone());
        node.wait("the device list of the time", up, |s| shows_devices(s, &res, &step.devices).then_some(())).await?;
        let before = backend.allocate_requests().len();
        let cs: Vec<(String, usize)> = step.containers.iter().map(|c| (c.name.clone(), c.count)).collect();
        let text = crate::kubelet::reproduce::manifest(&step.namespace, &step.name, &step.uid, &res, &cs);
        write_manifest(&node.pods(), &step.file, &text)?;
        let result = node
            .wait(&format!("pod {}/{} admitted or rejected", step.namespace, step.name), up, |s| {
                admitted(s, &step.file)
            })
            .await?;
        let sent = backend.allocate_requests();
        let sent = &sent[before.min(sent.len())..];
        for (i, c) in step.containers.iter().enumerate() {
            // What the kubelet chose: the admitted allocation, else the Allocate it sent.
            let mut chosen = match &result {
                Decided::Admitted(pod) => container_devices(pod, &c.name, &res),
                Decided::Rejected(_) => Vec::new(),
            };
            if chosen.is_empty() {
                if let Some(r) = sent.get(i) {
                    chosen = r.container_requests.iter().flat_map(|x| x.devices_ids.iter().cloned()).collect();
                    chosen.sort();
                }
            }
            // The temp socket path says nothing to the reader.
            let sock = node.dir.tree.plugin_dir.join(REPLAYED_SOCKET).display().to_string();
            let rejected = match &result {
                Decided::Rejected(why) => Some(why.replace(&format!("{sock}: "), "the replayed plugin: ")),
                Decided::Admitted(_) => None,
            };
            let same = match &c.error {
                None => rejected.is_none() && chosen == c.recorded,
                // The plugin refused then: the same request must be refused now.
                Some(_) => rejected.is_some() && chosen == c.recorded,
            };
            decisions.push(Decision {
                call: c.call.clone(),
                container: format!("{}/{}/{}", step.namespace, step.name, c.name),
                recorded: c.recorded.clone(),
                recorded_error: c.error.as_ref().map(|e| format!("{}: {}", e.code, e.message)),
                replayed: chosen,
                rejected,
                same,
            });
        }
    }
    Ok((decisions, notes))
}
