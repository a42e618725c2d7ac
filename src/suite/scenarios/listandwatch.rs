//! ListAndWatch: the first snapshot, device IDs, health strings, size,
//! topology, a second stream, the kubelet's stream kept open, a cancelled
//! stream (LAW-001..LAW-008). The basic session's state lives here: the
//! environment plus the streams its scenarios opened and the first
//! snapshot the kubelet got.

use super::*;

/// The basic session: registration, ListAndWatch, Allocate, preferred and
/// PreStart scenarios share one plugin process and kubelet.
pub(crate) struct Basic<'a> {
    env: Env<'a>,
    /// Streams a scenario opened and keeps open (closed at teardown, or by LAW-007).
    streams: Vec<tonic::Streaming<ListAndWatchResponse>>,
    /// The kubelet's first snapshot and the list it settled on, once read.
    first: Option<First>,
}

/// The kubelet's first ListAndWatch message and the list it settled on.
#[derive(Clone)]
struct First {
    /// From registering (or opening the stream) to the first message.
    first_after: Duration,
    /// Devices in the first message.
    first_len: usize,
    /// From registering to the first message with devices (None: none came).
    devices_after: Option<Duration>,
    /// Size of the settled message.
    bytes: usize,
    /// The settled message.
    resp: ListAndWatchResponse,
}

/// The basic session is its environment plus what its scenarios opened.
impl<'a> std::ops::Deref for Basic<'a> {
    type Target = Env<'a>;
    fn deref(&self) -> &Env<'a> {
        &self.env
    }
}

impl<'a> std::ops::DerefMut for Basic<'a> {
    fn deref_mut(&mut self) -> &mut Env<'a> {
        &mut self.env
    }
}

impl<'a> Basic<'a> {
    pub(crate) fn new(env: Env<'a>) -> Self {
        Basic { env, streams: Vec::new(), first: None }
    }

    /// Close the streams; the environment to stop.
    pub(crate) fn close(self) -> Env<'a> {
        self.env
    }

    /// The first snapshot the kubelet got and the list it settled on (or,
    /// with --socket, our own first stream's), timed from registering.
    async fn ensure_first(&mut self) -> std::result::Result<First, Outcome> {
        if let Some(f) = &self.first {
            return Ok(f.clone());
        }
        let first = if self.o.socket.is_some() {
            let start = Instant::now();
            let (took, mut stream, m) = self.open_stream().await?;
            let mut f = First {
                first_after: took,
                first_len: m.devices.len(),
                devices_after: (!m.devices.is_empty()).then_some(took),
                bytes: prost::Message::encoded_len(&m),
                resp: m,
            };
            if f.devices_after.is_none() {
                let until = start + SETTLE_WITHIN;
                while let Ok(Ok(Some(m))) = tokio::time::timeout_at(until.into(), stream.message()).await {
                    if !m.devices.is_empty() {
                        f.devices_after = Some(start.elapsed());
                        f.bytes = prost::Message::encoded_len(&m);
                        f.resp = m;
                        break;
                    }
                }
            }
            self.streams.push(stream);
            f
        } else {
            let r = self.ensure_reg().await?;
            let ep = self.endpoint().await?;
            // The registration the kubelet accepted (and then opened its stream for).
            let r = self.find_reg(0, self.plugin_started, true).filter(|x| x.socket == ep).unwrap_or(r);
            let reg_at = r.at;
            match self.wait_snap(r.generation, &ep, reg_at, reg_at + FIRST_SNAPSHOT_WITHIN).await {
                Some(seen) => First {
                    first_after: seen.first_at.saturating_duration_since(reg_at),
                    first_len: seen.first_len,
                    devices_after: seen.devices_at.map(|d| d.saturating_duration_since(reg_at)),
                    bytes: seen.bytes,
                    resp: seen.resp,
                },
                None => {
                    return Err(Outcome::fail(
                        "ListAndWatch (the kubelet's stream)",
                        format!(
                            "no snapshot within {FIRST_SNAPSHOT_WITHIN:?} of registering{}; plugin log: {}",
                            self.stream_end_text(r.generation, &ep),
                            self.plugin_log()
                        ),
                        "send the full device list as soon as ListAndWatch is called",
                    ))
                }
            }
        };
        self.first = Some(first.clone());
        Ok(first)
    }

    pub(super) async fn healthy(&mut self) -> std::result::Result<Vec<String>, Outcome> {
        let f = self.ensure_first().await?;
        Ok(checks::healthy_ids(&f.resp.devices))
    }
}

/// LAW-001.
pub(crate) async fn law_first(s: &mut Basic<'_>) -> Outcome {
    let f = need!(s.ensure_first().await);
    let n = f.resp.devices.len();
    let Some(devices_after) = f.devices_after else {
        return Outcome::fail(
            "ListAndWatch (the kubelet's stream)",
            format!(
                "{} message(s), none with a device, within {SETTLE_WITHIN:?} of the first; the node's capacity stays 0",
                s.seen.snaps.len().max(1)
            ),
            "send the device list you found; do not start ListAndWatch before discovery is done",
        );
    };
    if devices_after > FIRST_SNAPSHOT_WITHIN {
        return Outcome::fail(
            "ListAndWatch (the kubelet's stream)",
            format!("the devices came {} after registering; the node's capacity was 0 until then", ms(devices_after)),
            "discover devices before registering; send the full list as soon as ListAndWatch is called",
        );
    }
    if f.first_len == 0 || devices_after > DEVICES_SLOW {
        let what = if f.first_len == 0 {
            format!(
                "the first message (after {}) listed no devices; the {n} device(s) came {} after registering",
                ms(f.first_after),
                ms(devices_after)
            )
        } else {
            format!("the {n} device(s) came {} after registering", ms(devices_after))
        };
        return Outcome::warn(
            format!("{what}; the node reads capacity 0 meanwhile"),
            Some(Evidence {
                log: None,
                rpc: "ListAndWatch (the kubelet's stream)".into(),
                answer: what,
                fix: "send the full device list in the first ListAndWatch message".into(),
            }),
        );
    }
    Outcome::pass(format!("{n} device(s) after {}", ms(f.first_after)))
}

/// LAW-002: device IDs.
pub(crate) async fn law_ids(s: &mut Basic<'_>) -> Outcome {
    law_check(s, checks::id_problems, "use unique, non-empty IDs of at most 63 printable characters without spaces")
        .await
}

/// LAW-003: health strings.
pub(crate) async fn law_health(s: &mut Basic<'_>) -> Outcome {
    law_check(
        s,
        checks::health_problems,
        "send exactly \"Healthy\" or \"Unhealthy\" (pluginapi.Healthy / pluginapi.Unhealthy)",
    )
    .await
}

/// LAW-005: topology.
pub(crate) async fn law_topology(s: &mut Basic<'_>) -> Outcome {
    law_check(s, checks::topology_problems, "list each NUMA node once, none negative, or leave topology unset").await
}

/// A ListAndWatch scenario judged by the rulebook: the rules `f` selects, each with its own verdict.
async fn law_check(
    s: &mut Basic<'_>,
    f: fn(&[crate::api::deviceplugin::Device]) -> Vec<crate::protocol::Violation>,
    fix: &str,
) -> Outcome {
    let first = need!(s.ensure_first().await);
    checks::judged("ListAndWatch (first snapshot)", &f(&first.resp.devices), fix)
}

/// LAW-004.
pub(crate) async fn law_size(s: &mut Basic<'_>) -> Outcome {
    let first = need!(s.ensure_first().await);
    let (bytes, devices) = (first.bytes, first.resp.devices.len());
    match crate::protocol::deviceplugin::snapshot_size(bytes, devices) {
        None => Outcome::pass(format!("{bytes} bytes")),
        Some(v) => checks::judged("ListAndWatch (first snapshot)", std::slice::from_ref(&v), v.rule.fix),
    }
}

/// LAW-006.
pub(crate) async fn law_second(s: &mut Basic<'_>) -> Outcome {
    need!(s.ensure_first().await);
    let (took, mut stream, mut m) = need!(s.open_stream().await);
    // An empty first message (judged by LAW-001) may be followed by the list.
    let until = Instant::now() + SETTLE_WITHIN;
    let expect_devices = s.first.as_ref().is_some_and(|f| !f.resp.devices.is_empty());
    while expect_devices && m.devices.is_empty() {
        match tokio::time::timeout_at(until.into(), stream.message()).await {
            Ok(Ok(Some(next))) => m = next,
            _ => break,
        }
    }
    s.streams.push(stream);
    s.drain();
    let latest: BTreeSet<String> = match s.seen.snaps.last() {
        Some(snap) if s.o.socket.is_none() => snap.resp.devices.iter().map(|d| d.id.clone()).collect(),
        _ => s.first.as_ref().map(|f| f.resp.devices.iter().map(|d| d.id.clone()).collect()).unwrap_or_default(),
    };
    let got: BTreeSet<String> = m.devices.iter().map(|d| d.id.clone()).collect();
    if got != latest {
        return Outcome::fail(
            "ListAndWatch (second stream)",
            format!("{} device(s) where the first stream has {}", got.len(), latest.len()),
            "send every stream the full, current device list",
        );
    }
    Outcome::pass(format!("after {}", ms(took)))
}

/// LAW-008.
pub(crate) async fn law_open(s: &mut Basic<'_>) -> Outcome {
    need!(s.ensure_first().await);
    let ep = need!(s.endpoint().await);
    let Some(r) = s.find_reg(0, s.plugin_started, true).filter(|r| r.socket == ep) else {
        return Outcome::skip("no accepted registration to follow");
    };
    // A stream ended after its first message ends within milliseconds of it.
    let until = r.at + Duration::from_millis(300);
    loop {
        s.drain();
        if let Some(e) = s.seen.stream_end(r.generation, &ep, r.at) {
            return Outcome::fail(
                "ListAndWatch (the kubelet's stream)",
                format!(
                    "{} {} after the kubelet opened it, after {} message(s); the kubelet does not open another: its devices turn unhealthy and the resource leaves allocatable",
                    e.why,
                    ms(e.at.saturating_duration_since(e.opened)),
                    e.messages
                ),
                "keep the stream open and send a new list on every change; return only when the kubelet cancels (ctx.Done()) or the plugin stops",
            );
        }
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break,
        }
    }
    Outcome::pass(format!("still open {} after registering", ms(r.at.elapsed())))
}

/// LAW-007.
pub(crate) async fn law_cancel(s: &mut Basic<'_>) -> Outcome {
    if s.streams.is_empty() {
        let (_, stream, _) = need!(s.open_stream().await);
        s.streams.push(stream);
    }
    // Dropping the streams sends RST_STREAM(CANCEL), as the kubelet does.
    s.streams.clear();
    // The kubelet opens the next stream only after re-registration, never in
    // the same instant; give the plugin that moment to see the cancel (a
    // plugin that breaks on it is what this scenario is for).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (took, stream, _) = need!(s.open_stream().await.map_err(|mut o| {
        if let Some(e) = &mut o.evidence {
            e.rpc = "ListAndWatch (a new stream after the kubelet cancelled one)".into();
            e.fix = "stop each stream's sender when its context is cancelled; never let a dead stream keep the update channel".into();
        }
        o
    }));
    drop(stream);
    need!(s.options().await);
    Outcome::pass(format!("new stream answered after {}", ms(took)))
}
