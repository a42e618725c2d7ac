//! What the device-plugin session's environment saw, read from the kubelet's
//! events: registrations, snapshots, stream ends, dial-backs, and the
//! plugin's exits (restarted with back-off as the kubelet restarts a
//! DaemonSet pod).

use super::*;

impl Env<'_> {
    pub(super) fn drain(&mut self) {
        while let Some(e) = self.events.as_mut().and_then(|r| r.try_recv().ok()) {
            self.seen.take(&e);
        }
    }

    /// The next kubelet event before `until` (None: none came, or no kubelet runs).
    pub(super) async fn next_event(&mut self, until: Instant) -> Option<Arc<Stamped>> {
        let got = match self.events.as_mut() {
            Some(rx) => tokio::time::timeout_at(until.into(), rx.recv()).await.ok().flatten(),
            None => None,
        };
        if got.is_none() {
            // No kubelet, or it stopped: nothing more will come before `until`.
            tokio::time::sleep_until(until.into()).await;
        }
        got
    }

    pub(super) fn wanted(&self, r: &Registration) -> bool {
        self.o.resource.as_ref().is_none_or(|n| &r.resource == n)
    }

    pub(super) fn find_reg(&self, min_gen: u64, since: Instant, good: bool) -> Option<Registration> {
        self.seen
            .regs
            .iter()
            .find(|r| {
                r.generation >= min_gen
                    && r.at >= since
                    && self.wanted(r)
                    && (!good || (r.rejected.is_none() && r.dial_back.is_ok()))
            })
            .cloned()
    }

    /// Wait for a registration (of generation ≥ `min_gen`, at or after `since`); `good` = accepted.
    /// A plugin that exits meanwhile is restarted as the kubelet restarts a
    /// DaemonSet pod (after the back-off, which extends the wait), once.
    pub(super) async fn wait_reg(
        &mut self,
        min_gen: u64,
        since: Instant,
        until: Instant,
        good: bool,
    ) -> Option<Registration> {
        let mut until = until;
        let mut extended = false;
        loop {
            self.drain();
            if let Some(r) = self.find_reg(min_gen, since, good) {
                return Some(r);
            }
            // A plugin that exited registers no more; look every 100 ms.
            let step = until.min(Instant::now() + Duration::from_millis(100));
            match self.next_event(step).await {
                Some(e) => self.seen.take(&e),
                None if Instant::now() >= until => {
                    // A Register still in its dial-back, or one whose dial-back failed
                    // (a plugin that registers before it serves, then serves and retries):
                    // give the answer, or the retry, its moment.
                    if extended
                        || !(self.seen.pending_attempt(min_gen, since) || self.seen.dial_back_failed(min_gen, since))
                    {
                        return None;
                    }
                    extended = true;
                    until = Instant::now() + Duration::from_secs(5);
                }
                None => {
                    // Nothing can register once kubelet.sock is gone (deleted by the plugin).
                    if self.kubelet.is_some() && !is_socket(&self.tree().kubelet_socket()) {
                        self.drain();
                        return self.find_reg(min_gen, since, good);
                    }
                    let Some(status) = self.plugin.as_mut().and_then(|p| p.exited()) else { continue };
                    self.drain();
                    if let Some(r) = self.find_reg(min_gen, since, good) {
                        return Some(r);
                    }
                    match self.backoff_restart(status).await {
                        Some(delay) => until += delay,
                        None => return None,
                    }
                }
            }
        }
    }

    /// The plugin exited on its own: restart it after the back-off, as the
    /// kubelet restarts a DaemonSet pod; None when restarts are off or it
    /// already crashed once before (a crash loop).
    pub(super) async fn backoff_restart(&mut self, status: std::process::ExitStatus) -> Option<Duration> {
        if self.terminated || self.crashes.last().is_some_and(|c| c.restart == self.restarts) {
            return None; // this exit is already handled
        }
        // A crash loop: this process, like the one before it, exited before registering.
        let registered = self.seen.regs.iter().any(|r| r.at >= self.plugin_started && r.dial_back.is_ok());
        let looping = !registered && self.crashes.last().is_some_and(|c| !c.registered);
        self.crashes.push(Crash { at: Instant::now(), status, restart: self.restarts, delay: None, registered });
        let base = self.o.restart_backoff?;
        if looping {
            return None;
        }
        // The kubelet doubles the back-off at each restart, up to 5 minutes.
        let done = self.crashes.iter().filter(|c| c.delay.is_some()).count() as u32;
        let delay = base.saturating_mul(2u32.saturating_pow(done)).min(MAX_BACKOFF);
        tokio::time::sleep(delay).await;
        if let Some(c) = self.crashes.last_mut() {
            c.delay = Some(delay);
        }
        self.start_plugin().ok()?;
        // The new process gets the whole start bound, as at its first start.
        Some(delay + REGISTER_WITHIN)
    }

    /// What relying on restarts (since `since`) cost, if it did.
    pub(super) fn restart_cost(&self, since: Instant) -> Option<String> {
        let restarted: Vec<&Crash> = self.crashes.iter().filter(|c| c.delay.is_some() && c.at >= since).collect();
        let first = restarted.first()?;
        let waited: Duration = restarted.iter().filter_map(|c| c.delay).sum();
        Some(format!(
            "the plugin exited ({}) and worked only after {} restart(s) with back-off, {} s lost ({} s after the first exit); in a cluster its DaemonSet pod is restarted the same way, with back-off growing from 10 s to 5 min",
            first.status,
            restarted.len(),
            waited.as_secs(),
            Instant::now().saturating_duration_since(first.at).as_secs()
        ))
    }

    /// Wait for the kubelet's first snapshot on `socket` in `generation`
    /// (at or after `since`), then for the device list the plugin settles
    /// on: a plugin may send an empty list first and its devices a moment
    /// later (Intel's GPU plugin does), which the kubelet copes with.
    pub(super) async fn wait_snap(
        &mut self,
        generation: u64,
        socket: &std::path::Path,
        since: Instant,
        until: Instant,
    ) -> Option<Settled> {
        let of = |s: &Snap| s.generation == generation && s.socket == socket && s.at >= since;
        let first = loop {
            self.drain();
            if let Some(s) = self.seen.snaps.iter().find(|s| of(s)) {
                break (s.at, s.resp.devices.len(), s.bytes, s.resp.clone());
            }
            let e = self.next_event(until).await?;
            self.seen.take(&e);
        };
        let (first_at, first_len, bytes, resp) = first;
        let mut seen = Settled { first_at, first_len, devices_at: None, bytes, resp };
        let settle = first_at + SETTLE_WITHIN;
        loop {
            self.drain();
            if let Some(s) = self.seen.snaps.iter().find(|s| of(s) && !s.resp.devices.is_empty()) {
                seen.devices_at = Some(s.at);
                seen.bytes = s.bytes;
                seen.resp = s.resp.clone();
                return Some(seen);
            }
            if self.seen.stream_ended(generation, socket, since) {
                return Some(seen);
            }
            match self.next_event(settle).await {
                Some(e) => self.seen.take(&e),
                None => return Some(seen),
            }
        }
    }

    /// "; the plugin ended the stream (status OK) 2 ms after the kubelet opened it, after 1 message(s)"
    pub(super) fn stream_end_text(&self, generation: u64, socket: &std::path::Path) -> String {
        match self.seen.stream_end(generation, socket, self.plugin_started) {
            Some(e) => format!(
                "; {} {} after the kubelet opened it, after {} message(s)",
                e.why,
                ms(e.at.saturating_duration_since(e.opened)),
                e.messages
            ),
            None => String::new(),
        }
    }

    pub(super) fn no_registration(&mut self, within: Duration) -> Outcome {
        let exited = self.plugin.as_mut().and_then(|p| p.exited());
        let accepted = self.seen.regs.iter().any(|r| self.wanted(r) && r.rejected.is_none() && r.dial_back.is_ok());
        let log = self.plugin_log();
        // The root causes first: each leaves nothing else to test.
        if self.kubelet.is_some() && !is_socket(&self.tree().kubelet_socket()) {
            return Outcome::fail(
                "plugin start (the shared plugin directory)",
                format!(
                    "kubelet.sock was deleted by the plugin, so it cannot register{}; plugin log: {log}",
                    exited.map(|s| format!("; then it exited ({s})")).unwrap_or_default()
                ),
                "delete only your own socket (a stale one from your previous run), never *.sock",
            )
            .stopping("kubelet.sock was deleted by the plugin", &["REG-007"]);
        }
        if let (Some(status), false) = (exited, accepted) {
            let again = match self.crashes.iter().find_map(|c| c.delay) {
                Some(d) => format!(
                    "; restarted after a {} s back-off (as the kubelet restarts a DaemonSet pod), it exited again: a crash loop",
                    d.as_secs()
                ),
                None => String::new(),
            };
            let log = if self.crashes.len() > 1 { self.first_crash_log() } else { log };
            return Outcome::fail(
                "plugin start",
                format!("the plugin exited ({status}) before registering{again}; plugin log: {log}"),
                "see the plugin's log: it must keep running, serve its socket and register",
            )
            .stopping("the plugin exited at start", &[]);
        }
        if let (Some(r), false) = (self.seen.regs.iter().rev().find(|r| self.wanted(r)), accepted) {
            let why = r.rejected.clone().or(r.dial_back.as_ref().err().map(ToString::to_string)).unwrap_or_default();
            return Outcome::fail(
                "Register (the kubelet's answer)",
                format!("the kubelet refused every registration within {within:?}: {why}; plugin log: {log}"),
                "fix what REG-002..REG-005 report, then register again",
            )
            .stopping(
                "the kubelet refused the plugin's registration",
                &["REG-002", "REG-003", "REG-004", "REG-005", "REG-008"],
            );
        }
        let others: BTreeSet<&str> =
            self.seen.regs.iter().filter(|r| !self.wanted(r)).map(|r| r.resource.as_str()).collect();
        let others = match (&self.o.resource, others.is_empty()) {
            (Some(want), false) => format!("; it registered {others:?}, not --resource {want:?}"),
            _ => String::new(),
        };
        let pending = self
            .seen
            .attempts
            .iter()
            .rev()
            .find(|a| self.o.resource.as_ref().is_none_or(|n| &a.2 == n))
            .map(|(generation, at, _, endpoint)| {
                let story = self
                    .seen
                    .dial_back_story(*generation, *at)
                    .unwrap_or_else(|| "the kubelet is still dialling it back".into());
                format!(
                    "; Register (endpoint {endpoint:?}) arrived {} after the start, still unanswered: {story}",
                    ms(at.saturating_duration_since(self.plugin_started))
                )
            })
            .unwrap_or_default();
        let o = Outcome::fail(
            "Register on kubelet.sock (or GetInfo on a plugins_registry socket)",
            format!("no accepted registration within {within:?}{pending}{others}; plugin log: {log}"),
            "serve the DevicePlugin socket first, then call Register on {kubelet-socket} (or serve pluginregistration in {plugins-registry-dir})",
        );
        if accepted {
            o
        } else {
            o.stopping("the plugin did not register", &[])
        }
    }

    /// The first accepted registration of this session.
    pub(super) async fn ensure_reg(&mut self) -> std::result::Result<Registration, Outcome> {
        let until = self.plugin_started + REGISTER_WITHIN;
        match self.wait_reg(0, self.plugin_started, until, false).await {
            Some(r) => Ok(r),
            None => Err(self.no_registration(REGISTER_WITHIN)),
        }
    }

    pub(super) async fn baseline_snapshot(&mut self) -> std::result::Result<(), Outcome> {
        let until = self.plugin_started + REGISTER_WITHIN;
        let Some(r) = self.wait_reg(0, self.plugin_started, until, true).await else {
            return Err(self.no_registration(REGISTER_WITHIN));
        };
        let Some(seen) = self.wait_snap(r.generation, &r.socket, r.at, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
        else {
            return Err(setup_fail(
                "waiting for the first ListAndWatch snapshot",
                format!("nothing within {FIRST_SNAPSHOT_WITHIN:?}"),
                "send the device list as soon as ListAndWatch is called",
            ));
        };
        self.resource = Some(r.resource.clone());
        self.baseline = Some(seen.resp.devices.iter().map(|d| d.id.clone()).collect());
        Ok(())
    }
}
