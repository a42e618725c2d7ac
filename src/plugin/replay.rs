//! Replay as the plugin: a [`Backend`] that serves a recorded trace — the
//! same options, the first recorded ListAndWatch stream with its timing
//! (or, stepped, whatever device list its driver sets), and the recorded
//! answer for each matching GetPreferredAllocation, Allocate and
//! PreStartContainer request. A request it never saw gets NotFound naming
//! the closest recorded request and how it differs.

use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, DevicePluginOptions, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::core::{Error, Result};
use crate::plugin::devices::{Inventory, Snapshot};
use crate::plugin::server::{Backend, Step};
use crate::trace::{EndedBy, Event, RpcError, Trace};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tonic::Status;

type Outcome<T> = (serde_json::Value, Option<T>, Option<RpcError>);

/// A recorded plugin.
pub struct Replayed {
    resource: String,
    options: DevicePluginOptions,
    timeline: Arc<Vec<Step>>,
    stepped: bool,
    received: std::sync::Mutex<Vec<AllocateRequest>>,
    last: Inventory,
    preferred: Vec<Outcome<PreferredAllocationResponse>>,
    allocate: Vec<Outcome<AllocateResponse>>,
    pre_start: Vec<Outcome<PreStartContainerResponse>>,
}

/// A request's matching key: its protojson with every ID list sorted.
pub fn request_key<T: Serialize>(req: &T) -> serde_json::Value {
    fn norm(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Array(a) => {
                let mut a: Vec<serde_json::Value> = a.into_iter().map(norm).collect();
                if a.iter().all(|x| x.is_string()) {
                    a.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
                }
                serde_json::Value::Array(a)
            }
            serde_json::Value::Object(o) => o.into_iter().map(|(k, v)| (k, norm(v))).collect(),
            o => o,
        }
    }
    norm(serde_json::to_value(req).unwrap_or_default())
}

impl Replayed {
    /// Build from a trace; `speed` divides recorded delays, `no_wait` drops them.
    pub fn new(trace: &Trace, resource: Option<&str>, speed: f64, no_wait: bool) -> Result<Self> {
        let resource = resource.map(str::to_string).unwrap_or_else(|| trace.header.resource.clone());
        if resource.is_empty() {
            return Err(Error::usage(
                "the trace names no resource (it was made by watch --record); pass --resource NAME",
            ));
        }
        let options = trace
            .events
            .iter()
            .find_map(|e| match e {
                Event::Options { response: Some(o), .. } => Some(*o),
                _ => None,
            })
            .ok_or_else(|| Error::usage("the trace has no GetDevicePluginOptions answer to serve"))?;
        let first_stream = trace.events.iter().find_map(|e| match e {
            Event::ListAndWatch { stream, .. } => Some(*stream),
            _ => None,
        });
        let Some(stream_id) = first_stream else {
            return Err(Error::usage("the trace has no ListAndWatch message to serve"));
        };
        let mut steps = Vec::new();
        let mut prev: Option<f64> = None;
        let mut last = None;
        let delay = |prev: Option<f64>, t: f64| -> Duration {
            match prev {
                _ if no_wait => Duration::ZERO,
                None => Duration::ZERO,
                // A crafted trace may hold any number: clamp instead of panicking.
                Some(p) => Duration::try_from_secs_f64(((t - p) / speed).clamp(0.0, 86_400.0)).unwrap_or_default(),
            }
        };
        for e in &trace.events {
            match e {
                Event::ListAndWatch { t, stream, response, .. } if *stream == stream_id => {
                    steps.push(Step::Send(delay(prev, *t), response.clone()));
                    prev = Some(*t);
                    last = Some(response.clone());
                }
                // Only the plugin's own ends are its behaviour; a stream the
                // kubelet or dpctl closed stays open in the replay.
                Event::ListAndWatchEnd { t, stream, error, by: None | Some(EndedBy::Plugin) }
                    if *stream == stream_id =>
                {
                    steps.push(Step::End(delay(prev, *t), error.as_ref().map(RpcError::to_status)));
                    break;
                }
                _ => {}
            }
        }
        let mut r = Replayed {
            resource,
            options,
            timeline: Arc::new(steps),
            stepped: false,
            received: Default::default(),
            last: Inventory::new(last.map(|l| l.devices).unwrap_or_default()),
            preferred: Vec::new(),
            allocate: Vec::new(),
            pre_start: Vec::new(),
        };
        for e in &trace.events {
            match e {
                Event::Preferred { request, response, error, .. } => {
                    r.preferred.push((request_key(request), response.clone(), error.clone()))
                }
                Event::Allocate { request, response, error, .. } => {
                    r.allocate.push((request_key(request), response.clone(), error.clone()))
                }
                Event::PreStart { request, response, error, .. } => {
                    r.pre_start.push((request_key(request), *response, error.clone()))
                }
                _ => {}
            }
        }
        Ok(r)
    }

    /// How many ListAndWatch steps will be replayed.
    pub fn steps(&self) -> usize {
        self.timeline.len()
    }

    /// The resource name served.
    pub fn resource_name(&self) -> &str {
        &self.resource
    }

    /// Serve no timeline: every stream sends the device list set with
    /// [`Replayed::set_devices`] and each change to it.
    pub fn stepped(mut self, devices: Vec<crate::api::deviceplugin::Device>) -> Self {
        self.stepped = true;
        self.last.replace(devices);
        self
    }

    /// Every Allocate request received so far, in order.
    pub fn allocate_requests(&self) -> Vec<AllocateRequest> {
        self.received.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Set the device list (stepped replay).
    pub fn set_devices(&self, devices: Vec<crate::api::deviceplugin::Device>) {
        self.last.replace(devices);
    }
}

/// A request's leaves, `path=value` (string lists as `path[]=value`, order-free).
fn leaves(v: &serde_json::Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
    use serde_json::Value;
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                leaves(x, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
            }
        }
        Value::Array(a) if a.iter().all(Value::is_string) => {
            for x in a {
                out.insert(format!("{path}[]={}", x.as_str().unwrap_or_default()));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, &format!("{path}[{i}]"), out);
            }
        }
        other => {
            out.insert(format!("{path}={other}"));
        }
    }
}

/// The recorded request closest to `key` (fewest differing leaves): its
/// index and the differences (`+` only in this request, `-` only in the recorded one).
pub fn closest<T>(recorded: &[Outcome<T>], key: &serde_json::Value) -> Option<(usize, Vec<String>)> {
    let mut mine = std::collections::BTreeSet::new();
    leaves(key, "", &mut mine);
    recorded
        .iter()
        .enumerate()
        .map(|(i, (k, _, _))| {
            let mut theirs = std::collections::BTreeSet::new();
            leaves(k, "", &mut theirs);
            let mut d: Vec<String> = mine.difference(&theirs).map(|x| format!("+{x}")).collect();
            d.extend(theirs.difference(&mine).map(|x| format!("-{x}")));
            (i, d)
        })
        .min_by_key(|(i, d)| (d.len(), *i))
}

fn answer<T: Clone, R: Serialize>(method: &str, recorded: &[Outcome<T>], req: &R) -> std::result::Result<T, Status> {
    let key = request_key(req);
    match recorded.iter().find(|(k, _, _)| k == &key) {
        Some((_, Some(resp), _)) => Ok(resp.clone()),
        Some((_, None, Some(e))) => Err(e.to_status()),
        Some((_, None, None)) => {
            Err(Status::internal(format!("the trace holds neither an answer nor an error for this {method}")))
        }
        None => {
            let near = match closest(recorded, &key) {
                Some((i, d)) => {
                    let shown: Vec<&str> = d.iter().take(10).map(String::as_str).collect();
                    let more = if d.len() > 10 { format!(" (+{} more)", d.len() - 10) } else { String::new() };
                    format!(
                        "; the closest recorded one is {method} #{} of {}, which differs in: {}{more}",
                        i + 1,
                        recorded.len(),
                        shown.join(" ")
                    )
                }
                None => format!("; the trace has no {method} call"),
            };
            Err(Status::not_found(format!(
                "no recorded {method} matches this request: {}{near}",
                crate::core::text::cap(&serde_json::to_string(req).unwrap_or_default())
            )))
        }
    }
}

#[tonic::async_trait]
impl Backend for Replayed {
    fn resource(&self) -> &str {
        &self.resource
    }
    fn options(&self) -> DevicePluginOptions {
        self.options
    }
    fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.last.subscribe()
    }
    fn timeline(&self) -> Option<Arc<Vec<Step>>> {
        (!self.stepped).then(|| self.timeline.clone())
    }
    async fn preferred(
        &self,
        req: PreferredAllocationRequest,
    ) -> std::result::Result<PreferredAllocationResponse, Status> {
        answer("GetPreferredAllocation", &self.preferred, &req)
    }
    async fn allocate(&self, req: AllocateRequest) -> std::result::Result<AllocateResponse, Status> {
        if let Ok(mut v) = self.received.lock() {
            v.push(req.clone());
        }
        answer("Allocate", &self.allocate, &req)
    }
    async fn pre_start(&self, req: PreStartContainerRequest) -> std::result::Result<PreStartContainerResponse, Status> {
        answer("PreStartContainer", &self.pre_start, &req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_times_do_not_panic() {
        let text = "{\"dpctlTrace\":1,\"resource\":\"v.e/foo\",\"dpctlVersion\":\"x\",\"created\":\"x\",\"source\":\"record\"}\n\
            {\"kind\":\"options\",\"t\":0,\"latencyMs\":0,\"response\":{}}\n\
            {\"kind\":\"listAndWatch\",\"t\":-5,\"stream\":1,\"seq\":1,\"response\":{\"devices\":[]}}\n\
            {\"kind\":\"listAndWatch\",\"t\":1e300,\"stream\":1,\"seq\":2,\"response\":{\"devices\":[]}}\n\
            {\"kind\":\"listAndWatch\",\"t\":-1e300,\"stream\":1,\"seq\":3,\"response\":{\"devices\":[]}}\n";
        let t = crate::trace::parse(text, std::path::Path::new("t")).unwrap();
        let r = Replayed::new(&t, None, 1e-300, false).unwrap();
        assert_eq!(r.steps(), 3);
    }

    #[test]
    fn not_found_names_the_closest_recorded_request() {
        use crate::api::deviceplugin::ContainerAllocateRequest;
        let req = |ids: &[&str]| AllocateRequest {
            container_requests: vec![ContainerAllocateRequest {
                devices_ids: ids.iter().map(|s| s.to_string()).collect(),
            }],
        };
        let recorded: Vec<Outcome<AllocateResponse>> = [&["foo-0", "foo-1"][..], &["foo-2", "foo-3"][..]]
            .iter()
            .map(|ids| (request_key(&req(ids)), Some(AllocateResponse::default()), None))
            .collect();
        assert!(answer("Allocate", &recorded, &req(&["foo-1", "foo-0"])).is_ok(), "order-free match");
        let e = answer("Allocate", &recorded, &req(&["foo-3", "foo-1"])).unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        // both are one ID off; the first wins the tie
        assert!(
            e.message().contains(
                "the closest recorded one is Allocate #1 of 2, which differs in: +containerRequests[0].devicesIds[]=foo-3 -containerRequests[0].devicesIds[]=foo-0"
            ),
            "{}",
            e.message()
        );
        let e = answer("Allocate", &recorded, &req(&["foo-2", "foo-9"])).unwrap_err();
        assert!(e.message().contains("Allocate #2 of 2"), "{}", e.message());
        assert!(e.message().contains("+containerRequests[0].devicesIds[]=foo-9"), "{}", e.message());
        let none: Vec<Outcome<AllocateResponse>> = vec![];
        assert!(answer("Allocate", &none, &req(&["x"]))
            .unwrap_err()
            .message()
            .contains("the trace has no Allocate call"));
    }
}
