//! Calls a session makes: to the plugin (its socket, options, streams,
//! Allocate) and to the kubelet (allocatable devices, pods, rejections).

use super::*;

impl Env<'_> {
    /// The plugin's socket: --socket, or the registered endpoint.
    pub(super) async fn endpoint(&mut self) -> std::result::Result<PathBuf, Outcome> {
        if let Some(s) = &self.o.socket {
            return Ok(s.clone());
        }
        let r = self.ensure_reg().await?;
        if r.rejected.is_some() || r.dial_back.is_err() {
            let until = self.plugin_started + REGISTER_WITHIN;
            return match self.wait_reg(0, self.plugin_started, until, true).await {
                Some(r) => Ok(r.socket),
                None => Err(self.no_registration(REGISTER_WITHIN)),
            };
        }
        Ok(r.socket)
    }

    pub(super) async fn client(
        &mut self,
    ) -> std::result::Result<
        crate::api::deviceplugin::device_plugin_client::DevicePluginClient<tonic::transport::Channel>,
        Outcome,
    > {
        let ep = self.endpoint().await?;
        plugin_client(&ep, self.o.timeout)
            .await
            .map_err(|e| Outcome::fail("dial the plugin", e.to_string(), "keep serving the socket you registered"))
    }

    pub(super) async fn options(&mut self) -> std::result::Result<DevicePluginOptions, Outcome> {
        let mut c = self.client().await?;
        match tokio::time::timeout(self.o.timeout, c.get_device_plugin_options(Empty {})).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(Outcome::fail(
                "GetDevicePluginOptions",
                evidence::status_text(s.code(), s.message()),
                "answer GetDevicePluginOptions",
            )),
            Err(_) => {
                Err(Outcome::fail("GetDevicePluginOptions", "timed out", "answer GetDevicePluginOptions promptly"))
            }
        }
    }

    /// Open a ListAndWatch stream and read its first message within the bound.
    pub(super) async fn open_stream(
        &mut self,
    ) -> std::result::Result<(Duration, tonic::Streaming<ListAndWatchResponse>, ListAndWatchResponse), Outcome> {
        let mut c = self.client().await?;
        let start = Instant::now();
        let until = start + FIRST_SNAPSHOT_WITHIN;
        let mut stream = match tokio::time::timeout_at(until.into(), c.list_and_watch(Empty {})).await {
            Ok(Ok(s)) => s.into_inner(),
            Ok(Err(s)) => {
                return Err(Outcome::fail(
                    "ListAndWatch",
                    evidence::status_text(s.code(), s.message()),
                    "serve ListAndWatch",
                ))
            }
            Err(_) => {
                return Err(Outcome::fail(
                    "ListAndWatch",
                    format!("no answer within {FIRST_SNAPSHOT_WITHIN:?}"),
                    "send the device list as soon as ListAndWatch is called",
                ))
            }
        };
        match tokio::time::timeout_at(until.into(), stream.message()).await {
            Ok(Ok(Some(m))) => Ok((start.elapsed(), stream, m)),
            Ok(Ok(None)) => Err(Outcome::fail(
                "ListAndWatch",
                "the stream ended without a snapshot",
                "keep the stream open and send the device list first",
            )),
            Ok(Err(s)) => Err(Outcome::fail(
                "ListAndWatch",
                evidence::status_text(s.code(), s.message()),
                "send the device list first",
            )),
            Err(_) => Err(Outcome::fail(
                "ListAndWatch",
                format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the full device list as soon as ListAndWatch is called",
            )),
        }
    }

    pub(super) async fn allocate(
        &mut self,
        containers: Vec<Vec<String>>,
    ) -> std::result::Result<std::result::Result<AllocateResponse, CallFailed>, Outcome> {
        let mut c = self.client().await?;
        let req = AllocateRequest {
            container_requests: containers
                .into_iter()
                .map(|ids| ContainerAllocateRequest { devices_ids: ids })
                .collect(),
        };
        Ok(match tokio::time::timeout(self.o.timeout, c.allocate(req)).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(CallFailed::Status(Box::new(s))),
            Err(_) => Err(CallFailed::Timeout(self.o.timeout)),
        })
    }

    pub(super) async fn wait_allocatable(
        &mut self,
        within: Duration,
        pred: impl Fn(&[String]) -> bool,
    ) -> Option<(String, Vec<String>)> {
        let until = Instant::now() + within;
        loop {
            if let Some(mk) = &self.kubelet {
                if let Ok(all) = mk.allocatable(self.o.timeout).await {
                    let hit = match &self.resource {
                        Some(r) => all.get(r).filter(|ids| !ids.is_empty()).map(|ids| (r.clone(), ids.clone())),
                        None => all.into_iter().find(|(_, ids)| !ids.is_empty()),
                    };
                    if let Some((r, ids)) = hit {
                        if pred(&ids) {
                            return Some((r, ids));
                        }
                    }
                }
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) async fn wait_pod(&mut self, name: &str, present: bool, within: Duration) -> Option<Vec<String>> {
        let until = Instant::now() + within;
        let res = self.resource.clone().unwrap_or_default();
        loop {
            if let Some(mk) = &self.kubelet {
                if let Ok(p) = mk.pod_devices(name, self.o.timeout).await {
                    match (present, p) {
                        // Released kubelets list a pod still being admitted, without
                        // devices; every suite pod asks for at least one, so wait for them.
                        (true, Some(devs)) if devs.get(&res).is_some_and(|d| !d.is_empty()) => {
                            return devs.get(&res).cloned()
                        }
                        (false, None) => return Some(Vec::new()),
                        _ => {}
                    }
                }
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) fn write_pod(&self, name: &str, n: usize) -> std::result::Result<PathBuf, Outcome> {
        let res = self.resource.clone().unwrap_or_default();
        let path = self.tree().manifests.join(format!("{name}.yaml"));
        std::fs::write(&path, pod_manifest(name, &res, n))
            .map_err(|e| Outcome::fail("write a pod manifest", e.to_string(), "check the temp dir"))?;
        Ok(path)
    }

    pub(super) fn kubelet_log(&self) -> String {
        self.kubelet.as_ref().map(|m| log_tail(&m.log, 3)).unwrap_or_default()
    }

    /// How the kubelet rejected the manifest `file`, if it did: (reason, message).
    pub(super) fn rejection(&mut self, file: &str) -> Option<(String, String)> {
        self.drain();
        self.seen.rejected.iter().rev().find(|(f, _, _)| f.ends_with(file)).map(|(_, r, m)| (r.clone(), m.clone()))
    }

    pub(super) async fn allocatable_count(&self) -> usize {
        let res = self.resource.clone().unwrap_or_default();
        match &self.kubelet {
            Some(k) => k.allocatable(self.o.timeout).await.ok().and_then(|a| a.get(&res).map(Vec::len)).unwrap_or(0),
            None => 0,
        }
    }
}

/// Why a call the suite made to the plugin got no answer.
#[derive(Debug)]
pub(crate) enum CallFailed {
    /// The plugin answered this gRPC status.
    Status(Box<tonic::Status>),
    /// No answer within this time.
    Timeout(Duration),
}

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailed::Status(s) => f.write_str(&evidence::status_text(s.code(), s.message())),
            CallFailed::Timeout(t) => write!(f, "no answer within {t:?}"),
        }
    }
}

impl std::error::Error for CallFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallFailed::Status(s) => Some(s.as_ref()),
            CallFailed::Timeout(_) => None,
        }
    }
}
