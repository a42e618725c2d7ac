//! The trace format of `dpctl record` / `dpctl watch --record` / `dpctl replay`:
//! JSON lines. Line 1 is a header (`dpctlTrace` = format version, resource,
//! dpctl version); every further line is one event with protojson payloads.
//! Each line is written and flushed on its own, so a crash loses at most the
//! line in flight.
//!
//! Version 2 adds the kubelet's view (`kubeletState`: which devices each
//! pod/container already held, and the allocatable set), kubelet restarts
//! (`kubeletRestart`), the pod and container of an Allocate (`allocateFor`,
//! pointing at the Allocate event by its number) and who ended a
//! ListAndWatch stream (`by`). Version 1 traces read as before.

use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, DevicePluginOptions, ListAndWatchResponse, PreStartContainerRequest,
    PreStartContainerResponse, PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// The trace format version this dpctl writes and reads.
pub const FORMAT_VERSION: u32 = 2;

/// Line 1 of a trace.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Format version.
    pub dpctl_trace: u32,
    /// The plugin's resource name (empty when unknown, e.g. `watch --record`).
    #[serde(default)]
    pub resource: String,
    /// The dpctl version that wrote it.
    pub dpctl_version: String,
    /// When recording started (RFC 3339).
    pub created: String,
    /// `record` or `watch`.
    pub source: String,
    /// The plugin's socket.
    #[serde(default)]
    pub plugin: String,
}

/// A gRPC error as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    /// Status code name, e.g. `InvalidArgument`.
    pub code: String,
    /// Status message.
    pub message: String,
}

impl RpcError {
    /// From a tonic status; a transport failure is recorded under grpc-go's
    /// code ([`crate::core::status::grpc_go_code`]), as a Go kubelet saw it.
    pub fn from_status(s: &tonic::Status) -> Self {
        RpcError { code: format!("{:?}", crate::core::status::grpc_go_code(s)), message: s.message().to_string() }
    }

    /// Back to a tonic status.
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::new(code_from_name(&self.code), self.message.clone())
    }
}

/// A status code from its name (`Unknown` for an unknown name).
pub fn code_from_name(name: &str) -> tonic::Code {
    (0..=16).map(tonic::Code::from_i32).find(|c| format!("{c:?}") == name).unwrap_or(tonic::Code::Unknown)
}

/// One container's devices of the recorded resource, as the kubelet held them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerHolding {
    /// Container name.
    pub name: String,
    /// Device IDs.
    pub devices: Vec<String>,
}

/// A pod holding devices of the recorded resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodHolding {
    /// Namespace (empty when only the checkpoint was readable).
    #[serde(default)]
    pub namespace: String,
    /// Name (empty when only the checkpoint was readable).
    #[serde(default)]
    pub name: String,
    /// UID (empty when only PodResources was readable).
    #[serde(default)]
    pub uid: String,
    /// Containers holding devices.
    pub containers: Vec<ContainerHolding>,
}

impl PodHolding {
    /// `namespace/name`, or the UID when the name is unknown.
    pub fn key(&self) -> String {
        if self.name.is_empty() {
            self.uid.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// Who ended a ListAndWatch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EndedBy {
    /// The plugin ended it (cleanly or with an error).
    Plugin,
    /// The kubelet closed it (cancelled, restarted, replaced the endpoint).
    Kubelet,
    /// dpctl stopped recording.
    Dpctl,
}

/// One recorded event. `t` is seconds since recording started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Event {
    /// GetDevicePluginOptions.
    Options {
        /// Seconds since start.
        t: f64,
        /// Call latency.
        latency_ms: f64,
        /// The answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<DevicePluginOptions>,
        /// Or the error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<RpcError>,
    },
    /// One ListAndWatch message.
    ListAndWatch {
        /// Seconds since start.
        t: f64,
        /// Which stream (1, 2, … in the order they were opened).
        stream: u64,
        /// The message's number in its stream (1-based).
        seq: u64,
        /// The snapshot.
        response: ListAndWatchResponse,
    },
    /// The end of a ListAndWatch stream.
    ListAndWatchEnd {
        /// Seconds since start.
        t: f64,
        /// Which stream.
        stream: u64,
        /// The error, if it ended with one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<RpcError>,
        /// Who ended it (version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<EndedBy>,
    },
    /// The kubelet's view of the recorded resource (version 2): at the
    /// start, and again after each kubelet restart.
    KubeletState {
        /// Seconds since start.
        t: f64,
        /// Where it was read: `podResources`, `checkpoint`, or `none`.
        source: String,
        /// The node's allocatable devices of the resource.
        #[serde(default)]
        allocatable: Vec<String>,
        /// Pods already holding devices of the resource.
        #[serde(default)]
        pods: Vec<PodHolding>,
        /// Why something could not be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The kubelet restarted; the tap was served and registered again (version 2).
    KubeletRestart {
        /// Seconds since start.
        t: f64,
        /// What showed it (`kubelet.sock re-created`, `tap socket deleted`).
        reason: String,
    },
    /// The tap registered again because another registration for the
    /// resource (the plugin's own) replaced it (version 2).
    Reregistered {
        /// Seconds since start.
        t: f64,
        /// Why.
        reason: String,
    },
    /// Which pod and container an Allocate was for (version 2), found after
    /// the call in PodResources or the checkpoint.
    AllocateFor {
        /// Seconds since start (when it was found).
        t: f64,
        /// The Allocate event's number (1 = the first event after the header).
        event: u64,
        /// Index into the Allocate's containerRequests.
        #[serde(default)]
        container_request: usize,
        /// Pod namespace (empty if unknown).
        #[serde(default)]
        namespace: String,
        /// Pod name (empty if unknown).
        #[serde(default)]
        pod: String,
        /// Pod UID (empty if unknown).
        #[serde(default)]
        uid: String,
        /// Container name.
        container: String,
    },
    /// GetPreferredAllocation.
    Preferred {
        /// Seconds since start.
        t: f64,
        /// Call latency.
        latency_ms: f64,
        /// The request.
        request: PreferredAllocationRequest,
        /// The answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<PreferredAllocationResponse>,
        /// Or the error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<RpcError>,
    },
    /// Allocate.
    Allocate {
        /// Seconds since start.
        t: f64,
        /// Call latency.
        latency_ms: f64,
        /// The request.
        request: AllocateRequest,
        /// The answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<AllocateResponse>,
        /// Or the error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<RpcError>,
    },
    /// PreStartContainer.
    PreStart {
        /// Seconds since start.
        t: f64,
        /// Call latency.
        latency_ms: f64,
        /// The request.
        request: PreStartContainerRequest,
        /// The answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response: Option<PreStartContainerResponse>,
        /// Or the error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<RpcError>,
    },
}

impl Event {
    /// The event's time (seconds since start).
    pub fn t(&self) -> f64 {
        match self {
            Event::Options { t, .. }
            | Event::ListAndWatch { t, .. }
            | Event::ListAndWatchEnd { t, .. }
            | Event::Preferred { t, .. }
            | Event::Allocate { t, .. }
            | Event::PreStart { t, .. }
            | Event::KubeletState { t, .. }
            | Event::KubeletRestart { t, .. }
            | Event::Reregistered { t, .. }
            | Event::AllocateFor { t, .. } => *t,
        }
    }
}

/// Writes a trace, one flushed line per event.
#[derive(Debug)]
pub struct Writer {
    file: Mutex<std::fs::File>,
    start: Instant,
    path: std::path::PathBuf,
    /// Events written.
    pub count: std::sync::atomic::AtomicU64,
}

impl Writer {
    /// Create `path` (which must not exist: a trace never overwrites a file) and write the header.
    pub fn create(path: &Path, resource: &str, source: &str, plugin: &Path) -> Result<Self> {
        let mut file = crate::core::files::create_new(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::usage(format!(
                    "{}: exists; choose another trace file or remove it (a trace never overwrites a file)",
                    path.display()
                ))
            } else {
                Error::io(path, "cannot create trace", &e)
            }
        })?;
        let header = Header {
            dpctl_trace: FORMAT_VERSION,
            resource: resource.into(),
            dpctl_version: env!("CARGO_PKG_VERSION").into(),
            created: crate::core::time::now_rfc3339(),
            source: source.into(),
            plugin: plugin.display().to_string(),
        };
        let mut line = serde_json::to_string(&header).map_err(|e| Error::failed(e.to_string()))?;
        line.push('\n');
        file.write_all(line.as_bytes()).map_err(|e| Error::io(path, "cannot write trace", &e))?;
        Ok(Writer {
            file: Mutex::new(file),
            start: Instant::now(),
            path: path.to_path_buf(),
            count: Default::default(),
        })
    }

    /// Seconds since the trace started.
    pub fn t(&self) -> f64 {
        (self.start.elapsed().as_secs_f64() * 1e6).round() / 1e6
    }

    /// Append one event (one write of one whole line); returns its number
    /// (1 = the first event after the header).
    pub fn write(&self, ev: &Event) -> Result<u64> {
        let mut line =
            serde_json::to_string(ev).map_err(|e| Error::failed(format!("cannot encode trace event: {e}")))?;
        line.push('\n');
        let mut f = self.file.lock().map_err(|_| Error::failed("trace writer poisoned"))?;
        f.write_all(line.as_bytes())
            .and_then(|_| f.flush())
            .map_err(|e| Error::io(&self.path, "cannot write trace", &e))?;
        // Counted under the file lock, so the number is the line's.
        Ok(self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A trace read back.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Line 1.
    pub header: Header,
    /// Every event, in order.
    pub events: Vec<Event>,
}

impl Trace {
    /// The kubelet's view at the start (version 2; `None` for version 1).
    pub fn kubelet_state(&self) -> Option<(&[String], &[PodHolding], &str)> {
        self.events.iter().find_map(|e| match e {
            Event::KubeletState { allocatable, pods, source, .. } => {
                Some((allocatable.as_slice(), pods.as_slice(), source.as_str()))
            }
            _ => None,
        })
    }

    /// The pod/container of Allocate events: (index into `events` of the
    /// Allocate, container request) → (namespace, pod, uid, container).
    pub fn allocate_owners(&self) -> std::collections::BTreeMap<(usize, usize), (String, String, String, String)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::AllocateFor { event, container_request, namespace, pod, uid, container, .. } => {
                    let i = usize::try_from(*event).ok()?.checked_sub(1)?;
                    matches!(self.events.get(i), Some(Event::Allocate { .. })).then(|| {
                        ((i, *container_request), (namespace.clone(), pod.clone(), uid.clone(), container.clone()))
                    })
                }
                _ => None,
            })
            .collect()
    }
}

/// Parse a trace's text; every error names the line.
pub fn parse(text: &str, path: &Path) -> Result<Trace> {
    let shown = path.display();
    let bad = |line: usize, msg: String| Error::usage(format!("{shown}:{line}: {msg}"));
    let mut lines = text.split('\n').enumerate().peekable();
    let first = lines.next().map(|(_, l)| l).unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(first).map_err(|_| bad(1, "not a dpctl trace (line 1 is not a JSON header)".into()))?;
    let version = v
        .get("dpctlTrace")
        .and_then(|x| x.as_u64())
        .ok_or_else(|| bad(1, "not a dpctl trace (no \"dpctlTrace\" header)".into()))?;
    if version > u64::from(FORMAT_VERSION) {
        return Err(bad(
            1,
            format!("trace format version {version} is newer than this dpctl reads ({FORMAT_VERSION}); upgrade dpctl"),
        ));
    }
    let header: Header = serde_json::from_value(v).map_err(|e| bad(1, format!("bad header: {e}")))?;
    let mut events = Vec::new();
    let ends_with_newline = text.ends_with('\n');
    while let Some((i, line)) = lines.next() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(e) => events.push(e),
            Err(e) if lines.peek().is_none() && !ends_with_newline => {
                return Err(bad(
                    n,
                    format!("truncated: the last line is incomplete ({e}); the recording was interrupted mid-line"),
                ))
            }
            Err(e) => return Err(bad(n, format!("not a trace event: {e}"))),
        }
    }
    Ok(Trace { header, events })
}

/// Read a trace file.
pub fn read(path: &Path) -> Result<Trace> {
    let text = crate::core::limits::read_file(path, crate::core::limits::MAX_TRACE_FILE, "trace")
        .map_err(|e| Error::usage(format!("{}: cannot read trace: {e}", path.display())))?;
    parse(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::Device;

    #[test]
    fn round_trips_and_rejects_bad_traces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let w = Writer::create(&p, "v.e/foo", "record", Path::new("/x.sock")).unwrap();
        w.write(&Event::ListAndWatch {
            t: w.t(),
            stream: 1,
            seq: 1,
            response: ListAndWatchResponse {
                devices: vec![Device { id: "a".into(), health: "Healthy".into(), topology: None }],
            },
        })
        .unwrap();
        w.write(&Event::Allocate {
            t: w.t(),
            latency_ms: 0.5,
            request: AllocateRequest::default(),
            response: None,
            error: Some(RpcError { code: "InvalidArgument".into(), message: "no".into() }),
        })
        .unwrap();
        assert!(Writer::create(&p, "x", "record", Path::new("/x")).unwrap_err().to_string().contains("exists"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.lines().nth(1).unwrap().contains("\"kind\":\"listAndWatch\""));
        let t = parse(&text, &p).unwrap();
        assert_eq!(t.header.resource, "v.e/foo");
        assert_eq!(t.events.len(), 2);
        match &t.events[1] {
            Event::Allocate { error: Some(e), .. } => assert_eq!(e.to_status().code(), tonic::Code::InvalidArgument),
            e => panic!("{e:?}"),
        }
        let truncated = &text[..text.len() - 10];
        assert!(parse(truncated, &p).unwrap_err().to_string().contains("t.jsonl:3: truncated"));
        let newer = text.replacen("\"dpctlTrace\":2", "\"dpctlTrace\":99", 1);
        assert!(parse(&newer, &p).unwrap_err().to_string().contains(":1: trace format version 99 is newer"));
        assert!(parse("hello\n", &p).unwrap_err().to_string().contains(":1: not a dpctl trace"));
        let bad_event = format!("{}{{\"kind\":\"teleport\"}}\n", text);
        assert!(parse(&bad_event, &p).unwrap_err().to_string().contains("t.jsonl:4: not a trace event"));
    }

    #[test]
    fn version_2_events_round_trip_and_version_1_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v2.jsonl");
        let w = Writer::create(&p, "v.e/foo", "record", Path::new("/x.sock")).unwrap();
        let pods = vec![PodHolding {
            namespace: "ml".into(),
            name: "a".into(),
            uid: "u-1".into(),
            containers: vec![ContainerHolding { name: "main".into(), devices: vec!["foo-1".into()] }],
        }];
        let n1 = w
            .write(&Event::KubeletState {
                t: 0.0,
                source: "podResources".into(),
                allocatable: vec!["foo-0".into(), "foo-1".into()],
                pods: pods.clone(),
                note: None,
            })
            .unwrap();
        let n2 = w
            .write(&Event::Allocate {
                t: 0.1,
                latency_ms: 1.0,
                request: AllocateRequest::default(),
                response: Some(AllocateResponse::default()),
                error: None,
            })
            .unwrap();
        assert_eq!((n1, n2), (1, 2), "write returns the event's number");
        w.write(&Event::AllocateFor {
            t: 0.2,
            event: n2,
            container_request: 0,
            namespace: "ml".into(),
            pod: "b".into(),
            uid: String::new(),
            container: "main".into(),
        })
        .unwrap();
        w.write(&Event::KubeletRestart { t: 0.3, reason: "kubelet.sock was re-created".into() }).unwrap();
        w.write(&Event::ListAndWatchEnd { t: 0.4, stream: 1, error: None, by: Some(EndedBy::Kubelet) }).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("{\"dpctlTrace\":2,"), "{text}");
        assert!(text.contains("\"kind\":\"allocateFor\",\"t\":0.2,\"event\":2,\"containerRequest\":0"), "{text}");
        assert!(text.contains("\"by\":\"kubelet\""), "{text}");
        let t = parse(&text, &p).unwrap();
        let (alloc, held, source) = t.kubelet_state().unwrap();
        assert_eq!((alloc.len(), held, source), (2, pods.as_slice(), "podResources"));
        let owners = t.allocate_owners();
        assert_eq!(owners.get(&(1, 0)).unwrap().1, "b", "points at events[1], the Allocate");

        // A version 1 trace: no kubelet state, ends without `by`.
        let v1 = "{\"dpctlTrace\":1,\"resource\":\"v.e/foo\",\"dpctlVersion\":\"0.1.0\",\"created\":\"x\",\"source\":\"record\"}\n\
            {\"kind\":\"listAndWatchEnd\",\"t\":1.0,\"stream\":1}\n";
        let t1 = parse(v1, &p).unwrap();
        assert!(t1.kubelet_state().is_none());
        assert!(matches!(t1.events[0], Event::ListAndWatchEnd { by: None, .. }));
    }
}
