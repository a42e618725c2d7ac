//! Replay as the plugin: a [`Backend`] that serves a recorded trace — the
//! same options, the first recorded ListAndWatch stream with its timing,
//! and the recorded answer for each matching GetPreferredAllocation,
//! Allocate and PreStartContainer request.

use crate::api::deviceplugin::{
    AllocateRequest, AllocateResponse, DevicePluginOptions, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse,
};
use crate::core::{Error, Result};
use crate::plugin::devices::{Inventory, Snapshot};
use crate::plugin::server::{Backend, Step};
use crate::trace::{Event, RpcError, Trace};
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
                Event::ListAndWatchEnd { t, stream, error } if *stream == stream_id => {
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
}

fn answer<T: Clone, R: Serialize>(method: &str, recorded: &[Outcome<T>], req: &R) -> std::result::Result<T, Status> {
    let key = request_key(req);
    match recorded.iter().find(|(k, _, _)| k == &key) {
        Some((_, Some(resp), _)) => Ok(resp.clone()),
        Some((_, None, Some(e))) => Err(e.to_status()),
        Some((_, None, None)) => {
            Err(Status::internal(format!("the trace holds neither an answer nor an error for this {method}")))
        }
        None => Err(Status::not_found(format!(
            "no recorded {method} matches this request: {}; the trace has {} {method} call(s)",
            crate::core::text::cap(&serde_json::to_string(req).unwrap_or_default()),
            recorded.len()
        ))),
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
        Some(self.timeline.clone())
    }
    async fn preferred(
        &self,
        req: PreferredAllocationRequest,
    ) -> std::result::Result<PreferredAllocationResponse, Status> {
        answer("GetPreferredAllocation", &self.preferred, &req)
    }
    async fn allocate(&self, req: AllocateRequest) -> std::result::Result<AllocateResponse, Status> {
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
}
