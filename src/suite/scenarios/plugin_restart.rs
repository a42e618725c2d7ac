//! Plugin restarts (PRES-001..004): SIGTERM, its own socket removed, other
//! sockets left, device IDs kept across the restart.

use super::*;

/// PRES-001.
pub(crate) async fn pres_exit(s: &mut Env<'_>) -> Outcome {
    // Another vendor's socket appears after our plugin started.
    let path = s.tree().plugin_dir.join(DECOY);
    if s.decoy.is_none() {
        s.decoy = tokio::net::UnixListener::bind(&path).ok();
    }
    let Some(p) = s.plugin.as_mut() else {
        return Outcome::fail("SIGTERM", "no plugin process", "report this bug");
    };
    if let Some(status) = p.exited() {
        return Outcome::fail(
            "SIGTERM",
            format!("the plugin had already exited ({status})"),
            "keep running until told to stop",
        );
    }
    p.terminate();
    s.terminated = true;
    let start = Instant::now();
    match p.wait_exit(EXIT_WITHIN).await {
        Some(status) => Outcome::pass(format!("exited ({status}) after {}", ms(start.elapsed()))),
        None => Outcome::fail(
            "SIGTERM",
            format!("still running after {EXIT_WITHIN:?}"),
            "handle SIGTERM: stop serving, remove your socket, exit",
        ),
    }
}

async fn ensure_stopped(s: &mut Env<'_>) -> std::result::Result<(), Outcome> {
    let running = s.plugin.as_mut().is_some_and(|p| p.exited().is_none());
    if running && pres_exit(s).await.verdict != Verdict::Pass {
        return Err(Outcome::fail("SIGTERM", "the plugin did not exit (see PRES-001)", "handle SIGTERM"));
    }
    Ok(())
}

/// PRES-002.
pub(crate) async fn pres_own_socket(s: &mut Env<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    need!(ensure_stopped(s).await);
    if is_socket(&r.socket) {
        return Outcome::fail(
            "SIGTERM",
            format!("{} is still there after the plugin exited", r.socket.display()),
            "remove your socket when you exit (defer os.Remove)",
        );
    }
    Outcome::pass("")
}

/// PRES-003.
pub(crate) async fn pres_others(s: &mut Env<'_>) -> Outcome {
    need!(ensure_stopped(s).await);
    let tree = s.tree();
    let missing: Vec<&str> = [crate::core::paths::KUBELET_SOCKET_NAME, DECOY]
        .into_iter()
        .filter(|n| !is_socket(&tree.plugin_dir.join(n)))
        .collect();
    if missing.is_empty() {
        Outcome::pass("")
    } else {
        Outcome::fail(
            "SIGTERM",
            format!("{} deleted when the plugin exited", missing.join(" and ")),
            "remove only your own socket",
        )
    }
}

/// PRES-004.
pub(crate) async fn pres_same_ids(s: &mut Env<'_>) -> Outcome {
    let healthy = s.baseline.clone().unwrap_or_default();
    let Some(id) = healthy.first().cloned() else { return Outcome::skip("no devices") };
    let mut allocated = Vec::new();
    if let Ok(Ok(_)) = s.allocate(vec![vec![id.clone()]]).await {
        allocated.push(id.clone());
    }
    need!(ensure_stopped(s).await);
    need!(s.start_plugin());
    let t0 = s.plugin_started;
    let Some(r) = s.wait_reg(0, t0, t0 + REGISTER_WITHIN, true).await else {
        let mut o = s.no_registration(REGISTER_WITHIN);
        o.stop = None;
        return o;
    };
    // Only what the new process sent: with a fixed socket name the old
    // process's snapshots have the same generation and socket.
    let Some(Settled { resp: snap, .. }) =
        s.wait_snap(r.generation, &r.socket, t0, Instant::now() + FIRST_SNAPSHOT_WITHIN).await
    else {
        return Outcome::fail(
            "ListAndWatch after the restart",
            format!("no snapshot within {FIRST_SNAPSHOT_WITHIN:?}"),
            "send the device list first",
        );
    };
    let now: BTreeSet<String> = snap.devices.iter().map(|d| d.id.clone()).collect();
    let lost: BTreeSet<&String> = allocated.iter().chain(healthy.iter()).filter(|d| !now.contains(*d)).collect();
    let lost: Vec<&String> = lost.into_iter().collect();
    let now: Vec<&String> = now.iter().collect();
    if lost.is_empty() {
        Outcome::pass(format!("{} device(s) kept", now.len()))
    } else {
        Outcome::fail(
            "ListAndWatch before and after a plugin restart (the new process's list)",
            format!(
                "{} (advertised or allocated before the restart) are gone; now {}",
                evidence::list(&lost, 5),
                evidence::list(&now, 5)
            ),
            "derive device IDs from the hardware, never from the process (pid, start time, counter)",
        )
    }
}
