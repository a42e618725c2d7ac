//! HEALTH-001: a device the user's trigger makes unhealthy leaves the
//! kubelet's allocatable, also when another stream is open beside the
//! kubelet's (a plugin that hands each update to one stream fails or warns).

use super::*;

/// The health session: the environment plus another ListAndWatch stream,
/// opened before the kubelet's when the plugin serves before kubelet.sock
/// exists, else after it.
pub(crate) struct Health<'a> {
    env: Env<'a>,
    other: Option<tonic::Streaming<ListAndWatchResponse>>,
    /// The other stream was opened before the kubelet's.
    other_first: bool,
}

impl<'a> std::ops::Deref for Health<'a> {
    type Target = Env<'a>;
    fn deref(&self) -> &Env<'a> {
        &self.env
    }
}

impl<'a> std::ops::DerefMut for Health<'a> {
    fn deref_mut(&mut self) -> &mut Env<'a> {
        &mut self.env
    }
}

impl<'a> Health<'a> {
    /// Start the plugin, open a stream on it, then start the kubelet.
    pub(crate) async fn setup(mut s: Env<'a>) -> Result<Self, Outcome> {
        // Another stream opened before the kubelet's (the plugin serves
        // before kubelet.sock exists), so the kubelet's is not the one a
        // shared update channel favours; see HEALTH-001.
        s.start_plugin()?;
        let early = open_early_stream(&mut s).await;
        // A kubelet that finds the plugin serving (its start would
        // delete the plugin's socket, and the stream with it).
        s.start_kubelet(false).await?;
        s.baseline_snapshot().await?;
        // Only a stream on the endpoint under test counts (a plugin may serve several).
        let registered = s.find_reg(0, s.plugin_started, true).map(|r| r.socket);
        let mut h = Health { env: s, other: None, other_first: false };
        if let Some((_, stream)) = early.filter(|(sock, _)| Some(sock) == registered.as_ref()) {
            h.other = Some(stream);
            h.other_first = true;
        }
        if h.other.is_none() {
            // It served only once the kubelet existed: the other stream comes
            // after the kubelet's (a `dpctl watch`, a monitoring agent).
            h.other = open_late_stream(&mut h.env).await;
        }
        Ok(h)
    }

    /// Close the other stream; the environment to stop.
    pub(crate) fn close(self) -> Env<'a> {
        self.env
    }
}

/// HEALTH-001.
pub(crate) async fn health(s: &mut Health<'_>) -> Outcome {
    let Some(cmd) = s.o.health_trigger.clone() else {
        return Outcome::skip("no --health-trigger given");
    };
    s.drain();
    let before = match (s.find_reg(0, s.plugin_started, true), &s.baseline) {
        (Some(r), Some(b)) => s
            .seen
            .snaps
            .iter()
            .rev()
            .find(|x| x.generation == r.generation && x.socket == r.socket)
            .map(|x| checks::healthy_ids(&x.resp.devices).len())
            .unwrap_or(b.len()),
        _ => 0,
    };
    let vars = s.tree().vars(s.isolation != Isolation::None);
    let cmd = vars.substitute(&cmd);
    let t0 = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .envs(vars.env())
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await;
    match out {
        Ok(Ok(o)) if o.status.success() => {}
        Ok(Ok(o)) => {
            return Outcome::fail(
                format!("--health-trigger {cmd:?}"),
                format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()),
                "fix the trigger command",
            )
        }
        Ok(Err(e)) => {
            return Outcome::fail(format!("--health-trigger {cmd:?}"), e.to_string(), "fix the trigger command")
        }
        Err(_) => {
            return Outcome::fail(
                format!("--health-trigger {cmd:?}"),
                "did not finish within 30s",
                "make the trigger return",
            )
        }
    }
    let Some(r) = s.find_reg(0, s.plugin_started, true) else {
        return Outcome::fail("Register", "no accepted registration", "see REG-001");
    };
    let until = t0 + s.o.health_timeout;
    // The kubelet's stream: a snapshot after the trigger with fewer healthy devices.
    let drop = |x: &Snap| {
        x.generation == r.generation
            && x.socket == r.socket
            && x.at >= t0
            && checks::healthy_ids(&x.resp.devices).len() < before
    };
    let kubelet = loop {
        s.drain();
        if let Some(snap) = s.seen.snaps.iter().find(|x| drop(x)) {
            break Some((snap.at.saturating_duration_since(t0), checks::healthy_ids(&snap.resp.devices).len()));
        }
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break None,
        }
    };
    // The stream opened first: what it got meanwhile is buffered.
    let early = match s.other.as_mut() {
        None => None,
        Some(stream) => {
            let until = Instant::now() + Duration::from_millis(if kubelet.is_some() { 1000 } else { 200 });
            let mut got = false;
            while let Ok(Ok(Some(m))) = tokio::time::timeout_at(until.into(), stream.message()).await {
                if checks::healthy_ids(&m.devices).len() < before {
                    got = true;
                    break;
                }
            }
            Some(got)
        }
    };
    let timeout = s.o.health_timeout;
    match (kubelet, early) {
        (Some((took, after)), Some(false)) => Outcome::warn(
            format!("allocatable {before} → {after} after {}, but another open stream never got the update", ms(took)),
            Some(Evidence {
                log: None,
                rpc: format!("ListAndWatch (another stream, opened {} the kubelet's)", if s.other_first { "before" } else { "after" }),
                answer: format!("the kubelet's stream got the Unhealthy snapshot; another open stream got nothing within {timeout:?}: the plugin hands each update to one stream, so `dpctl watch`, a monitoring agent or a stream the plugin still reads after its client left can take the kubelet's"),
                fix: "give every stream its own subscription (a broadcast, not one shared channel)".into(),
            }),
        ),
        (Some((took, after)), _) => Outcome::pass(format!("allocatable {before} → {after} after {}", ms(took))),
        (None, Some(true)) => Outcome::fail(
            "ListAndWatch (the kubelet's stream) after the health trigger",
            format!("the kubelet's stream never got the Unhealthy snapshot within {timeout:?}; another stream, opened before it, did: the plugin hands each update to one stream (a shared channel), and the kubelet's lost"),
            "give every stream its own subscription (a broadcast, not one shared channel)",
        ),
        (None, _) => Outcome::fail(
            "ListAndWatch (the kubelet's stream) after the health trigger",
            format!("allocatable still {before} after {timeout:?} (no snapshot with fewer healthy devices); plugin log: {}", s.plugin_log()),
            "send a new snapshot with the device Unhealthy as soon as its health changes (or raise --health-timeout for a slow health loop)",
        ),
    }
}

/// A ListAndWatch stream on the registered endpoint, after the kubelet's.
async fn open_late_stream(s: &mut Env<'_>) -> Option<tonic::Streaming<ListAndWatchResponse>> {
    let r = s.find_reg(0, s.plugin_started, true)?;
    let mut c = plugin_client(&r.socket, s.o.timeout).await.ok()?;
    let mut stream = tokio::time::timeout(s.o.timeout, c.list_and_watch(Empty {})).await.ok()?.ok()?.into_inner();
    tokio::time::timeout(FIRST_SNAPSHOT_WITHIN, stream.message()).await.ok()?.ok()??;
    Some(stream)
}

/// A ListAndWatch stream on the plugin's socket before it registers: the
/// first socket other than kubelet.sock to appear (None when it does not
/// serve before the kubelet exists; the kubelet's stream is then older).
async fn open_early_stream(s: &mut Env<'_>) -> Option<(PathBuf, tonic::Streaming<ListAndWatchResponse>)> {
    let until = Instant::now() + Duration::from_secs(2);
    let dir = s.tree().plugin_dir.clone();
    let kubelet = s.tree().kubelet_socket();
    while Instant::now() < until {
        let socks: Vec<PathBuf> = std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| *p != kubelet && is_socket(p))
            .collect();
        for sock in socks {
            let Ok(mut c) = plugin_client(&sock, s.o.timeout).await else { continue };
            let Ok(Ok(resp)) = tokio::time::timeout(s.o.timeout, c.list_and_watch(Empty {})).await else {
                continue;
            };
            let mut stream = resp.into_inner();
            if let Ok(Ok(Some(_))) = tokio::time::timeout(FIRST_SNAPSHOT_WITHIN, stream.message()).await {
                return Some((sock, stream));
            }
        }
        if s.plugin.as_mut().is_some_and(|p| p.exited().is_some()) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
