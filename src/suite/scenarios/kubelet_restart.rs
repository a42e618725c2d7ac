//! Kubelet restarts (KRES-001..005): re-registering, stable device IDs,
//! quick restarts, pods keeping their devices, and admission right after a
//! restart as the chosen kubelet version does it.

use super::*;

/// How long after a restart KRES-005 waits for a pod admitted too early to be decided.
const EARLY_POD_WITHIN: Duration = Duration::from_secs(5);

/// KRES-001.
pub(crate) async fn kres_reregister(s: &mut Env<'_>) -> Outcome {
    need!(s.restart_kubelet().await);
    let t0 = s.restarted_at.unwrap_or_else(Instant::now);
    match s.wait_reg(s.generation, t0, t0 + COME_BACK_WITHIN, true).await {
        Some(r) => {
            let after = s.seen.arrival(&r).saturating_duration_since(t0);
            let took = format!("re-registered after {}", ms(after));
            match s.restart_cost(t0) {
                None if after > REREGISTER_WITHIN => Outcome::warn(
                    format!("{took}, later than {REREGISTER_WITHIN:?}"),
                    Some(Evidence {
                        log: None,
                        rpc: "Register after the kubelet restarted".into(),
                        answer: format!(
                            "{took}: until then the node advertises none of its devices and pods needing them are rejected (upstream's e2e allows {COME_BACK_WITHIN:?})"
                        ),
                        fix: "watch the plugin directory (inotify) and register as soon as kubelet.sock is re-created, instead of polling it".into(),
                    }),
                ),
                Some(cost) => Outcome::warn(
                    format!("{took}, only because it was restarted"),
                    Some(Evidence {
                        log: None,
                        rpc: "Register after the kubelet restarted".into(),
                        answer: format!("{cost}; log of the run that exited: {}", s.last_crash_log()),
                        fix: "watch the plugin directory: when kubelet.sock is re-created or your socket deleted, serve again and register instead of exiting".into(),
                    }),
                ),
                None => Outcome::pass(took),
            }
        }
        None => Outcome::fail(
            "Register after the kubelet restarted (sockets deleted, kubelet.sock re-created)",
            format!("no registration within {COME_BACK_WITHIN:?}; plugin log: {}", s.plugin_log()),
            "watch the plugin directory: when kubelet.sock is re-created or your socket deleted, serve again and call Register",
        ),
    }
}

/// Wait until the plugin is back after the last kubelet restart (restart once if none yet).
async fn back_after_restart(s: &mut Env<'_>) -> std::result::Result<(Registration, ListAndWatchResponse), Outcome> {
    if s.generation == 0 {
        s.restart_kubelet().await?;
    }
    let t0 = s.restarted_at.unwrap_or_else(Instant::now);
    let Some(r) = s.wait_reg(s.generation, t0, t0 + COME_BACK_WITHIN, true).await else {
        return Err(Outcome::fail(
            "Register after a kubelet restart",
            format!("the plugin did not come back within {COME_BACK_WITHIN:?}; plugin log: {}", s.plugin_log()),
            "re-register after every kubelet restart (see KRES-001)",
        ));
    };
    let Some(Settled { resp: snap, .. }) =
        s.wait_snap(r.generation, &r.socket, r.at, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
    else {
        return Err(Outcome::fail(
            "ListAndWatch after re-registering",
            format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
            "send the device list on every new stream",
        ));
    };
    Ok((r, snap))
}

/// KRES-002.
pub(crate) async fn kres_same_ids(s: &mut Env<'_>) -> Outcome {
    let (_, snap) = need!(back_after_restart(s).await);
    let before: BTreeSet<String> = s.baseline.clone().unwrap_or_default().into_iter().collect();
    let after: BTreeSet<String> = snap.devices.iter().map(|d| d.id.clone()).collect();
    let gone: Vec<&String> = before.difference(&after).collect();
    let new: Vec<&String> = after.difference(&before).collect();
    if gone.is_empty() {
        // Devices added are no harm: pods hold only the IDs that stayed.
        let added = if new.is_empty() { String::new() } else { format!(", {} new", new.len()) };
        return Outcome::pass(format!("{} device(s) kept{added}", before.len()));
    }
    Outcome::fail(
        "ListAndWatch before and after a kubelet restart",
        format!("IDs changed: gone {}, new {}", evidence::list(&gone, 5), evidence::list(&new, 5)),
        "derive device IDs from the hardware (serial, PCI address), never from a counter or a start time",
    )
}

/// KRES-003.
pub(crate) async fn kres_repeated(s: &mut Env<'_>) -> Outcome {
    for _ in 0..3 {
        need!(s.restart_kubelet().await);
        let t = Instant::now();
        let _ = s.wait_reg(s.generation, t, t + Duration::from_millis(300), true).await;
    }
    let last = s.generation;
    let t0 = s.restarted_at.unwrap_or_else(Instant::now);
    let Some(r) = s.wait_reg(last, t0, t0 + COME_BACK_WITHIN, true).await else {
        return Outcome::fail(
            "Register after 3 quick kubelet restarts",
            format!(
                "no registration with the last kubelet within {COME_BACK_WITHIN:?}; plugin log: {}",
                s.plugin_log()
            ),
            "re-register after every kubelet restart, also when restarts come quickly",
        );
    };
    // A second registration with the same kubelet would arrive right after the first.
    let settle = Instant::now() + Duration::from_secs(1);
    while let Some(e) = s.next_event(settle).await {
        s.seen.take(&e);
    }
    // The kubelet keeps the latest registration per resource; what must not
    // happen is two endpoints of the plugin alive and registered at once,
    // or the latest registration pointing at a dead socket.
    let latest = s
        .seen
        .regs
        .iter()
        .rev()
        .find(|x| x.generation == last && s.wanted(x) && x.rejected.is_none())
        .cloned()
        .unwrap_or(r);
    let endpoints: BTreeSet<PathBuf> = s.seen.regs.iter().filter(|x| s.wanted(x)).map(|x| x.socket.clone()).collect();
    let mut live = Vec::new();
    for ep in endpoints {
        if let Ok(mut c) = plugin_client(&ep, s.o.timeout).await {
            if c.get_device_plugin_options(Empty {}).await.is_ok() {
                live.push(ep);
            }
        }
    }
    if !live.contains(&latest.socket) {
        return Outcome::fail(
            "GetDevicePluginOptions on the last registered endpoint",
            format!("{} does not answer", latest.socket.display()),
            "register only the socket you serve, after serving it",
        );
    }
    if live.len() != 1 {
        return Outcome::fail(
            "registered endpoints after 3 quick kubelet restarts",
            format!("{} registered endpoints answer: {live:?}", live.len()),
            "stop the old server before registering a new one; register once per kubelet start",
        );
    }
    Outcome::pass("one live registration")
}

/// KRES-004.
pub(crate) async fn kres_pods_keep(s: &mut Env<'_>) -> Outcome {
    need!(s.write_pod("dpctl-test-keep", 1));
    let Some(before) = s.wait_pod("dpctl-test-keep", true, POD_WITHIN).await else {
        return Outcome::fail(
            "admit a pod (1 device)",
            format!("not admitted within {POD_WITHIN:?}; kubelet log: {}", s.kubelet_log()),
            "see E2E-001",
        );
    };
    if let Some(k) = &s.kubelet {
        need!(k.restart().await.map_err(|e| Outcome::fail(
            "restart the kubelet",
            e.to_string(),
            "see the kubelet's log"
        )));
    }
    let t0 = Instant::now();
    let res = s.resource.clone().unwrap_or_default();
    // Back = devices advertised again; then they must include the pod's.
    let back =
        s.wait_allocatable(COME_BACK_WITHIN, |_| true).await.filter(|(_, ids)| before.iter().all(|d| ids.contains(d)));
    if back.is_none() {
        let now = match &s.kubelet {
            Some(mk) => mk.allocatable(s.o.timeout).await.ok().and_then(|a| a.get(&res).cloned()).unwrap_or_default(),
            None => Vec::new(),
        };
        return Outcome::fail(
            "PodResources GetAllocatableResources after a kubelet restart",
            format!("the pod's devices {before:?} are not advertised again within {COME_BACK_WITHIN:?} (allocatable now: {} device(s) {})", now.len(), evidence::list(&now, 5)),
            "re-register after a kubelet restart and keep device IDs stable",
        );
    }
    match s.wait_pod("dpctl-test-keep", true, POD_WITHIN).await {
        Some(after) if after == before => Outcome::pass(format!("{before:?} kept; back after {}", ms(t0.elapsed()))),
        other => Outcome::fail(
            "PodResources List after a kubelet restart",
            format!("the pod had {before:?}, now {other:?}"),
            "keep device IDs stable",
        ),
    }
}

/// KRES-005: a pod admitted in the window after a kubelet restart, before
/// the plugin is back, gets the kubelet version's UnexpectedAdmissionError —
/// not the plugin's fault, reported as what the node saw; once the plugin
/// re-registers, a pod must get devices (the plugin's part).
pub(crate) async fn kres_admission_after_restart(s: &mut Env<'_>) -> Outcome {
    // KRES-004's pod holds a device; it has been checked, so let it go.
    let keep = s.tree().manifests.join("dpctl-test-keep.yaml");
    if keep.exists() {
        let _ = std::fs::remove_file(&keep);
        let _ = s.wait_pod("dpctl-test-keep", false, POD_WITHIN).await;
    }
    need!(s.restart_kubelet().await);
    let t0 = Instant::now();
    let early = need!(s.write_pod("dpctl-test-early", 1));
    // Either the plugin was back first (admitted) or the kubelet rejected it.
    let until = Instant::now() + EARLY_POD_WITHIN;
    let mut seen = None;
    while Instant::now() < until {
        if let Some((reason, msg)) = s.rejection("dpctl-test-early.yaml") {
            seen = Some(format!("rejected as {reason}: {msg}"));
            break;
        }
        if s.wait_pod("dpctl-test-early", true, Duration::from_millis(200)).await.is_some() {
            seen = Some("admitted (the plugin was back first)".to_string());
            break;
        }
    }
    let seen = seen.unwrap_or_else(|| format!("not decided within {EARLY_POD_WITHIN:?}"));
    let _ = std::fs::remove_file(&early);
    if s.wait_allocatable(COME_BACK_WITHIN, |_| true).await.is_none() {
        return Outcome::fail(
            "PodResources GetAllocatableResources after a kubelet restart",
            format!(
                "the plugin did not register again within {COME_BACK_WITHIN:?}, so every pod is rejected (a pod right after the restart: {seen}); plugin log: {}",
                s.plugin_log()
            ),
            "watch the plugin directory and register again when kubelet.sock is re-created",
        );
    }
    let back_after = t0.elapsed();
    let after = need!(s.write_pod("dpctl-test-after", 1));
    let got = s.wait_pod("dpctl-test-after", true, POD_WITHIN).await;
    let rejected = s.rejection("dpctl-test-after.yaml");
    let _ = std::fs::remove_file(&after);
    let _ = s.wait_pod("dpctl-test-after", false, POD_WITHIN).await;
    match (got, rejected) {
        (Some(ids), _) => Outcome::pass(format!(
            "a pod right after the restart: {seen}; the plugin was back after {}; then a pod got {ids:?}",
            ms(back_after)
        )),
        (None, Some((reason, msg))) => Outcome::fail(
            "admit a pod once the plugin is back",
            format!("rejected as {reason}: {msg}"),
            "advertise healthy devices again right after re-registering",
        ),
        (None, None) => Outcome::fail(
            "admit a pod once the plugin is back",
            format!("not admitted within {POD_WITHIN:?}; kubelet log: {}", s.kubelet_log()),
            "see E2E-001",
        ),
    }
}
