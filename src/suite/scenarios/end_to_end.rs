//! Pods through the kubelet (E2E-001, E2E-002) and a rolling update with two
//! instances (ROLL-001), whose outcome depends on the kubelet version.

use super::*;

/// How long after the first instance exits the resource must be allocatable again.
const ROLL_WITHIN: Duration = Duration::from_secs(10);

/// E2E-001.
pub(crate) async fn e2e_pod(s: &mut Env<'_>) -> Outcome {
    let path = need!(s.write_pod("dpctl-test-a", 1));
    let got = s.wait_pod("dpctl-test-a", true, POD_WITHIN).await;
    let _ = std::fs::remove_file(&path);
    let baseline = s.baseline.clone().unwrap_or_default();
    match got {
        None => Outcome::fail(
            "admit a pod (1 device) through the mock kubelet",
            format!("not in PodResources within {POD_WITHIN:?}; kubelet log: {}", s.kubelet_log()),
            "answer Allocate (and GetPreferredAllocation / PreStartContainer when advertised) without errors",
        ),
        Some(ids) if ids.len() == 1 && baseline.contains(&ids[0]) => {
            let _ = s.wait_pod("dpctl-test-a", false, POD_WITHIN).await;
            Outcome::pass(format!("got {}", ids[0]))
        }
        Some(ids) => Outcome::fail(
            "PodResources List",
            format!("the pod holds {ids:?}, the plugin advertised {}", evidence::list(&baseline, 5)),
            "report what you allocate",
        ),
    }
}

/// E2E-002.
pub(crate) async fn e2e_free(s: &mut Env<'_>) -> Outcome {
    let n = s.baseline.as_ref().map(|b| b.len()).unwrap_or(0);
    let path = need!(s.write_pod("dpctl-test-b", 1));
    if s.wait_pod("dpctl-test-b", true, POD_WITHIN).await.is_none() {
        return Outcome::fail(
            "admit a pod (1 device)",
            format!("not admitted; kubelet log: {}", s.kubelet_log()),
            "see E2E-001",
        );
    }
    let _ = std::fs::remove_file(&path);
    if s.wait_pod("dpctl-test-b", false, POD_WITHIN).await.is_none() {
        return Outcome::fail("delete the pod", "still listed by PodResources", "(a mock kubelet problem; report it)");
    }
    let path = need!(s.write_pod("dpctl-test-all", n));
    let got = s.wait_pod("dpctl-test-all", true, POD_WITHIN).await;
    let _ = std::fs::remove_file(&path);
    let _ = s.wait_pod("dpctl-test-all", false, POD_WITHIN).await;
    match got {
        Some(ids) if ids.len() == n => Outcome::pass(format!("a pod then took all {n}")),
        other => Outcome::fail(
            format!("admit a pod asking for all {n} devices"),
            format!("got {other:?}; kubelet log: {}", s.kubelet_log()),
            "keep every device allocatable after its pod is gone",
        ),
    }
}

/// ROLL-001: a DaemonSet maxSurge update. A second instance starts (its
/// own socket if the plugin names sockets per start), registers, and the
/// first exits late. Reports what the node saw; fails only if the
/// resource stays unallocatable, which a plugin avoids by registering
/// again when the kubelet closes its stream (kubelets up to 1.36).
pub(crate) async fn rolling_update(s: &mut Env<'_>) -> Outcome {
    let res = s.resource.clone().unwrap_or_default();
    let before = s.allocatable_count().await;
    s.drain();
    let accepted = |seen: &Seen| {
        seen.regs.iter().filter(|r| r.resource == res && r.rejected.is_none() && r.dial_back.is_ok()).count()
    };
    let n0 = accepted(&s.seen);
    let first_socket = s.seen.regs.iter().rev().find(|r| r.resource == res).map(|r| r.socket.clone());
    let old = s.plugin.take();
    need!(s.start_plugin());
    let until = Instant::now() + REGISTER_WITHIN;
    while accepted(&s.seen) <= n0 {
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break,
        }
    }
    s.drain();
    let second = s
        .seen
        .regs
        .iter()
        .filter(|r| r.resource == res && r.rejected.is_none() && r.dial_back.is_ok())
        .nth(n0)
        .cloned();
    let Some(second) = second else {
        // A second instance that could not run beside the first (a fixed
        // socket name it will not take over) rules out maxSurge updates:
        // worth knowing, not a protocol failure.
        let exited = s.plugin.as_mut().and_then(|p| p.exited());
        if let Some(p) = old {
            p.stop(Duration::from_secs(5)).await;
        }
        if let Some(status) = exited {
            return Outcome::warn(
                format!("a second instance could not run beside the first ({status}): DaemonSet maxSurge updates are not possible"),
                Some(crate::suite::Evidence {
                    log: None,
                    rpc: "start a second instance".into(),
                    answer: {
                        let log = s.plugin_log();
                        // Two instances on one socket path: since 1.37 the second's Register is refused (kubernetes#139338).
                        let same = if log.contains(crate::kubelet::devicemanager::core::state::ALREADY_CONNECTED) {
                            " (it served the first instance's socket path and the kubelet refused its Register: since 1.37 a socket the kubelet still streams from cannot register again, kubernetes#139338)"
                        } else {
                            ""
                        };
                        format!("it exited before registering{same}; plugin log: {log}")
                    },
                    fix: "serve a socket named per start (e.g. with the pod's name or a random suffix) so two instances can run during a rolling update".into(),
                }),
            );
        }
        return Outcome::fail(
            "start a second instance",
            format!("it did not register within {REGISTER_WITHIN:?}; plugin log: {}", s.plugin_log()),
            "a second instance must start while the first runs (DaemonSet maxSurge): serve sockets of its own and register",
        );
    };
    let same_socket = first_socket.as_ref() == Some(&second.socket);
    // A DaemonSet stops the old pod once the new one runs: here, once the
    // kubelet's stream to the second instance brought its first snapshot
    // (stopping the first before that races the kubelet opening it).
    let until = Instant::now() + FIRST_SNAPSHOT_WITHIN;
    while !s.seen.snaps.iter().any(|x| x.socket == second.socket && x.at >= second.at) {
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break,
        }
    }
    let disconnects = s.seen.disconnected.len();
    let (ends, gone) = (s.seen.ends.len(), s.seen.gone.len());
    let t0 = Instant::now();
    if let Some(p) = old {
        p.stop(Duration::from_secs(5)).await;
    }
    // The kubelet sees the first instance go when its stream ends: since
    // 1.37 an InstanceEnded (only its devices go), up to 1.36 a StreamEnded
    // (and the kubelet disconnects the second). Until then allocatable
    // still counts the first's devices, so judge after that event. On the
    // same socket the second's registration already replaced the first's
    // stream: no event comes.
    let until = Instant::now() + ROLL_WITHIN;
    let mut event = None;
    loop {
        if same_socket {
            break;
        }
        if let Some(g) = s.seen.gone[gone..].first() {
            event = Some((RollEnd::InstanceEnded, g.3));
            break;
        }
        if let Some(e) = s.seen.ends[ends..].first() {
            event = Some((RollEnd::StreamEnded, e.3));
            break;
        }
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break,
        }
    }
    let ok = s.wait_allocatable(ROLL_WITHIN, |ids| ids.len() >= before).await.is_some();
    let after = s.allocatable_count().await;
    s.drain();
    let disconnected = s.seen.disconnected.len() > disconnects;
    let version = s.o.kubelet_version.unwrap_or_default();
    let mut saw = format!(
        "kubelet {version}: the second instance registered on {} socket",
        if same_socket { "the same" } else { "a new" }
    );
    saw.push_str(&match event {
        Some((what, at)) => format!(
            "; the kubelet saw the first go ({}) {} after it was stopped",
            what.text(),
            ms(at.saturating_duration_since(t0))
        ),
        None if same_socket => String::new(),
        None => format!("; no end of the first instance's stream within {ROLL_WITHIN:?}"),
    });
    if disconnected {
        saw.push_str("; when the first exited the kubelet disconnected the second (kubernetes#121994)");
    }
    if ok {
        saw.push_str(&format!("; allocatable {before} again {} after the first exited", ms(t0.elapsed())));
        Outcome::pass(saw)
    } else {
        saw.push_str(&format!("; allocatable {after} of {before} {ROLL_WITHIN:?} after the first exited"));
        // Since 1.37 both instances stream and any one's list is the
        // resource's devices: a list the first sent once stopped is what stays.
        let last_words = first_socket.as_ref().filter(|_| !same_socket && !disconnected).and_then(|first| {
            let last = s.seen.snaps.iter().rev().find(|x| x.at >= second.at)?;
            (last.socket == *first && last.at >= t0).then_some(last)
        });
        if let Some(last) = last_words {
            let healthy = last.resp.devices.iter().filter(|d| d.health == crate::api::HEALTHY).count();
            saw.push_str(&format!(
                "; the last list the kubelet got came from the first instance {} after it was sent SIGTERM ({} devices, {healthy} healthy), after the second's: since 1.37 the kubelet keeps every instance's stream and takes any instance's list as the resource's devices (kubernetes#135437: pkg/kubelet/cm/devicemanager/manager.go genericDeviceUpdateCallback is keyed by resource), and the second sends nothing new, so the first's last list stays the node's devices",
                ms(last.at.saturating_duration_since(t0)),
                last.resp.devices.len()
            ));
        }
        Outcome::fail(
            "stop the first instance (SIGTERM) after the second registered",
            saw,
            if disconnected {
                "register again when the kubelet closes your ListAndWatch stream while kubelet.sock is unchanged"
            } else if last_words.is_some() {
                "send no list when stopping: just stop serving (when the last instance's stream ends the kubelet marks the devices unhealthy itself); while another instance runs, a list you send replaces its devices on the node"
            } else {
                "keep serving and advertising devices from the second instance; never delete a socket that is not yours"
            },
        )
    }
}

/// The kubelet event that tells ROLL-001 the first instance went.
#[derive(Debug, Clone, Copy)]
enum RollEnd {
    /// Since 1.37: the instance ended, only its devices went.
    InstanceEnded,
    /// Up to 1.36: the resource's stream ended (and the current instance was disconnected).
    StreamEnded,
}

impl RollEnd {
    fn text(self) -> &'static str {
        match self {
            RollEnd::InstanceEnded => "its instance ended, only its devices went",
            RollEnd::StreamEnded => "its stream ended",
        }
    }
}
