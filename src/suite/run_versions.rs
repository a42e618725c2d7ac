//! Scenarios whose outcome depends on the kubelet version the engine plays
//! (`dpctl test --kubelet-version`): admission right after a kubelet restart
//! (KRES-005) and a rolling update with two instances (ROLL-001). They read
//! what the node saw from the engine's typed events.

use super::*;

/// How long after a restart the scenario waits for a pod admitted too early to be decided.
const EARLY_POD_WITHIN: Duration = Duration::from_secs(5);
/// How long after the first instance exits the resource must be allocatable again.
const ROLL_WITHIN: Duration = Duration::from_secs(10);

impl Sess<'_> {
    /// How the kubelet rejected the manifest `file`, if it did: (reason, message).
    fn rejection(&mut self, file: &str) -> Option<(String, String)> {
        self.drain();
        self.seen.rejected.iter().rev().find(|(f, _, _)| f.ends_with(file)).map(|(_, r, m)| (r.clone(), m.clone()))
    }

    async fn allocatable_count(&self) -> usize {
        let res = self.resource.clone().unwrap_or_default();
        match &self.kubelet {
            Some(k) => k.allocatable(self.o.timeout).await.ok().and_then(|a| a.get(&res).map(Vec::len)).unwrap_or(0),
            None => 0,
        }
    }

    /// KRES-005: a pod admitted in the window after a kubelet restart, before
    /// the plugin is back, gets the kubelet version's UnexpectedAdmissionError —
    /// not the plugin's fault, reported as what the node saw; once the plugin
    /// re-registers, a pod must get devices (the plugin's part).
    pub(super) async fn kres_admission_after_restart(&mut self) -> Res {
        // KRES-004's pod holds a device; it has been checked, so let it go.
        let keep = self.tree().manifests.join("dpctl-test-keep.yaml");
        if keep.exists() {
            let _ = std::fs::remove_file(&keep);
            let _ = self.wait_pod("dpctl-test-keep", false, POD_WITHIN).await;
        }
        self.restart_kubelet().await?;
        let t0 = Instant::now();
        let early = self.write_pod("dpctl-test-early", 1)?;
        // Either the plugin was back first (admitted) or the kubelet rejected it.
        let until = Instant::now() + EARLY_POD_WITHIN;
        let mut seen = None;
        while Instant::now() < until {
            if let Some((reason, msg)) = self.rejection("dpctl-test-early.yaml") {
                seen = Some(format!("rejected as {reason}: {msg}"));
                break;
            }
            if self.wait_pod("dpctl-test-early", true, Duration::from_millis(200)).await.is_some() {
                seen = Some("admitted (the plugin was back first)".to_string());
                break;
            }
        }
        let seen = seen.unwrap_or_else(|| format!("not decided within {EARLY_POD_WITHIN:?}"));
        let _ = std::fs::remove_file(&early);
        if self.wait_allocatable(COME_BACK_WITHIN, |_| true).await.is_none() {
            return Ok(Outcome::fail(
                "PodResources GetAllocatableResources after a kubelet restart",
                format!(
                    "the plugin did not register again within {COME_BACK_WITHIN:?}, so every pod is rejected (a pod right after the restart: {seen}); plugin log: {}",
                    self.plugin_log()
                ),
                "watch the plugin directory and register again when kubelet.sock is re-created",
            ));
        }
        let back_after = t0.elapsed();
        let after = self.write_pod("dpctl-test-after", 1)?;
        let got = self.wait_pod("dpctl-test-after", true, POD_WITHIN).await;
        let rejected = self.rejection("dpctl-test-after.yaml");
        let _ = std::fs::remove_file(&after);
        let _ = self.wait_pod("dpctl-test-after", false, POD_WITHIN).await;
        match (got, rejected) {
            (Some(ids), _) => Ok(Outcome::pass(format!(
                "a pod right after the restart: {seen}; the plugin was back after {}; then a pod got {ids:?}",
                ms(back_after)
            ))),
            (None, Some((reason, msg))) => Ok(Outcome::fail(
                "admit a pod once the plugin is back",
                format!("rejected as {reason}: {msg}"),
                "advertise healthy devices again right after re-registering",
            )),
            (None, None) => Ok(Outcome::fail(
                "admit a pod once the plugin is back",
                format!("not admitted within {POD_WITHIN:?}; kubelet log: {}", self.kubelet_log()),
                "see E2E-001",
            )),
        }
    }

    /// ROLL-001: a DaemonSet maxSurge update. A second instance starts (its
    /// own socket if the plugin names sockets per start), registers, and the
    /// first exits late. Reports what the node saw; fails only if the
    /// resource stays unallocatable, which a plugin avoids by registering
    /// again when the kubelet closes its stream (kubelets up to 1.36).
    pub(super) async fn rolling_update(&mut self) -> Res {
        let res = self.resource.clone().unwrap_or_default();
        let before = self.allocatable_count().await;
        self.drain();
        let accepted = |s: &Seen| {
            s.regs.iter().filter(|r| r.resource == res && r.rejected.is_none() && r.dial_back.is_ok()).count()
        };
        let n0 = accepted(&self.seen);
        let first_socket = self.seen.regs.iter().rev().find(|r| r.resource == res).map(|r| r.socket.clone());
        let old = self.plugin.take();
        self.start_plugin()?;
        let until = Instant::now() + REGISTER_WITHIN;
        while accepted(&self.seen) <= n0 {
            match self.next_event(until).await {
                Some(e) => self.seen.take(&e),
                None => break,
            }
        }
        self.drain();
        let second = self.seen.regs.iter().filter(|r| r.resource == res && r.rejected.is_none()).nth(n0).cloned();
        let Some(second) = second else {
            // A second instance that could not run beside the first (a fixed
            // socket name it will not take over) rules out maxSurge updates:
            // worth knowing, not a protocol failure.
            let exited = self.plugin.as_mut().and_then(|p| p.exited());
            if let Some(p) = old {
                p.stop(Duration::from_secs(5)).await;
            }
            if let Some(status) = exited {
                return Ok(Outcome::warn(
                    format!("a second instance could not run beside the first ({status}): DaemonSet maxSurge updates are not possible"),
                    Some(crate::suite::Evidence {
                        rpc: "start a second instance".into(),
                        answer: format!("it exited before registering; plugin log: {}", self.plugin_log()),
                        fix: "serve a socket named per start (e.g. with the pod's name or a random suffix) so two instances can run during a rolling update".into(),
                    }),
                ));
            }
            return Ok(Outcome::fail(
                "start a second instance",
                format!("it did not register within {REGISTER_WITHIN:?}; plugin log: {}", self.plugin_log()),
                "a second instance must start while the first runs (DaemonSet maxSurge): serve sockets of its own and register",
            ));
        };
        let same_socket = first_socket.as_ref() == Some(&second.socket);
        let disconnects = self.seen.disconnected.len();
        let ends = self.seen.ends.len();
        let t0 = Instant::now();
        if let Some(p) = old {
            p.stop(Duration::from_secs(5)).await;
        }
        // The kubelet sees the first instance go when its stream ends; until
        // then allocatable still counts the first's devices, so wait for that
        // end before judging what the kubelet made of it.
        let until = Instant::now() + ROLL_WITHIN;
        while self.seen.ends.len() == ends {
            match self.next_event(until).await {
                Some(e) => self.seen.take(&e),
                None => break,
            }
        }
        let ok = self.wait_allocatable(ROLL_WITHIN, |ids| ids.len() >= before).await.is_some();
        let after = self.allocatable_count().await;
        self.drain();
        let disconnected = self.seen.disconnected.len() > disconnects;
        let version = self.o.kubelet_version.unwrap_or_default();
        let mut saw = format!(
            "kubelet {version}: the second instance registered on {} socket",
            if same_socket { "the same" } else { "a new" }
        );
        if disconnected {
            saw.push_str("; when the first exited the kubelet disconnected the second (kubernetes#121994)");
        }
        if ok {
            saw.push_str(&format!("; allocatable {before} again {} after the first exited", ms(t0.elapsed())));
            Ok(Outcome::pass(saw))
        } else {
            saw.push_str(&format!("; allocatable {after} of {before} {ROLL_WITHIN:?} after the first exited"));
            Ok(Outcome::fail(
                "stop the first instance (SIGTERM) after the second registered",
                saw,
                if disconnected {
                    "register again when the kubelet closes your ListAndWatch stream while kubelet.sock is unchanged"
                } else {
                    "keep serving and advertising devices from the second instance; never delete a socket that is not yours"
                },
            ))
        }
    }
}
