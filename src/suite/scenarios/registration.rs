//! Registration: within 10 s, the API version, the resource name, the
//! endpoint, the dial-back, the options, other sockets left alone, the
//! plugin watcher (REG-001..REG-008).

use super::*;

/// REG-001.
pub(crate) async fn reg_within(s: &mut Basic<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    let via = if r.via == Via::KubeletSocket { "kubelet.sock" } else { "the plugin watcher" };
    let took = format!("after {} via {via}", ms(s.seen.arrival(&r).saturating_duration_since(s.plugin_started)));
    match s.restart_cost(s.began) {
        Some(cost) => Outcome::warn(
            format!("{took}, only because it was restarted"),
            Some(Evidence {
                log: None,
                rpc: "plugin start".into(),
                answer: format!("{cost}; log of the first run: {}", s.first_crash_log()),
                fix: "keep running: retry what failed with back-off instead of exiting".into(),
            }),
        ),
        None => Outcome::pass(took),
    }
}

/// REG-002.
pub(crate) async fn reg_version(s: &mut Basic<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    let broken = if r.via == Via::PluginWatcher {
        crate::protocol::registration::watcher_versions(&r.version.split(',').map(String::from).collect::<Vec<_>>())
    } else {
        crate::protocol::registration::register_version(&r.version)
    };
    match broken {
        None => Outcome::pass(""),
        Some(v) => Outcome::fail("RegisterRequest.version", v.to_string(), v.rule.fix),
    }
}

/// REG-003.
pub(crate) async fn reg_resource(s: &mut Basic<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    // The kubelet's text, then why (the rulebook's register-resource-name).
    if let Some(v) = crate::protocol::registration::register_resource_name(&r.resource) {
        let why = crate::protocol::registration::resource_name_problem(&r.resource).unwrap_or_default();
        return Outcome::fail("RegisterRequest.resource_name", format!("{v}: {why}"), v.rule.fix);
    }
    Outcome::pass(r.resource)
}

/// REG-004.
pub(crate) async fn reg_endpoint(s: &mut Basic<'_>) -> Outcome {
    let r = need!(reg_or_retry(s).await);
    if r.via == Via::KubeletSocket {
        if let Some(p) = checks::endpoint_problem(&r.endpoint, &s.tree().plugin_dir) {
            return Outcome::fail(
                "RegisterRequest.endpoint",
                p,
                "send the socket's file name, e.g. \"vendor-gpu.sock\"",
            );
        }
    } else if r.socket.parent() != Some(s.tree().plugin_dir.as_path()) {
        return Outcome::fail(
            "GetInfo.endpoint",
            format!("{:?}", r.endpoint),
            "serve the DevicePlugin socket in the device-plugin directory",
        );
    }
    if !is_socket(&r.socket) {
        return Outcome::fail(
            "RegisterRequest.endpoint",
            format!("{} is not a socket", r.socket.display()),
            "register the socket you serve on",
        );
    }
    Outcome::pass(r.endpoint)
}

/// REG-005.
pub(crate) async fn reg_dial_back(s: &mut Basic<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    match (&r.rejected, &r.dial_back) {
        (None, Ok(_)) => Outcome::pass(""),
        // The request itself is wrong: REG-002..REG-004 say how; no dial-back happened.
        (Some(e), _) => Outcome::not_run(format!("the kubelet refused the request before dialling back: {e}")),
        (None, Err(e)) => {
            let arrived = s.seen.arrival(&r);
            let story = s.seen.dial_back_story(r.generation, arrived).unwrap_or_else(|| "the dial-back failed".into());
            let later = s
                .find_reg(r.generation, r.at, true)
                .map(|ok| {
                    format!(
                        "; a later Register was accepted {} after the first arrived",
                        ms(ok.at.saturating_duration_since(arrived))
                    )
                })
                .unwrap_or_default();
            Outcome::fail(
                "GetDevicePluginOptions (the kubelet's dial-back inside Register)",
                format!("{story}; after 10 s of retries the kubelet refused the registration ({e}){later}"),
                "start serving the DevicePlugin socket before calling Register (the kubelet dials back inside Register, which blocks until then)",
            )
        }
    }
}

/// The first registration; when only its dial-back failed (REG-005's
/// to judge), the one that worked after it, if one comes.
async fn reg_or_retry(s: &mut Basic<'_>) -> std::result::Result<Registration, Outcome> {
    let first = s.ensure_reg().await?;
    if first.dial_back.is_err() && first.rejected.is_none() {
        let until = Instant::now() + Duration::from_secs(5);
        return Ok(s.wait_reg(first.generation, first.at, until, true).await.unwrap_or(first));
    }
    Ok(first)
}

/// REG-006.
pub(crate) async fn reg_options(s: &mut Basic<'_>) -> Outcome {
    let r = need!(reg_or_retry(s).await);
    if r.via == Via::PluginWatcher {
        return Outcome::skip("the plugin watcher sends no options; the kubelet reads GetDevicePluginOptions");
    }
    if let Some(e) = &r.rejected {
        return Outcome::not_run(format!("the kubelet refused the request before dialling back: {e}"));
    }
    let Ok(got) = &r.dial_back else {
        return Outcome::fail(
            "GetDevicePluginOptions",
            "the dial-back failed (see REG-005)",
            "serve before registering",
        );
    };
    let sent = r.request_options.unwrap_or_default();
    match crate::protocol::registration::register_options(&sent, got) {
        None => Outcome::pass(checks::options_text(got)),
        Some(v) => {
            checks::judged("RegisterRequest.options vs GetDevicePluginOptions", std::slice::from_ref(&v), v.rule.fix)
        }
    }
}

/// REG-007.
pub(crate) async fn reg_keeps_sockets(s: &mut Basic<'_>) -> Outcome {
    // Give the plugin its start; not registering is REG-001's to judge.
    let _ = s.ensure_reg().await;
    let tree = s.tree();
    let missing: Vec<String> = [crate::core::paths::KUBELET_SOCKET_NAME, DECOY]
        .iter()
        .filter(|n| !is_socket(&tree.plugin_dir.join(n)))
        .map(|n| n.to_string())
        .collect();
    if missing.is_empty() {
        Outcome::pass("")
    } else {
        Outcome::fail(
            "plugin start",
            format!(
                "{} {} deleted by the plugin",
                missing.join(" and "),
                if missing.len() == 1 { "was" } else { "were" }
            ),
            "delete only your own socket (a stale one from your previous run), never *.sock",
        )
    }
}

/// REG-008.
pub(crate) async fn reg_watcher(s: &mut Basic<'_>) -> Outcome {
    let r = need!(s.ensure_reg().await);
    if r.via == Via::KubeletSocket {
        return Outcome::skip("the plugin registered through kubelet.sock, not the plugin watcher");
    }
    if let Some(e) = &r.rejected {
        return Outcome::fail(
            "GetInfo",
            e.clone(),
            "return type DevicePlugin, the resource name, the socket path and [\"v1beta1\"]",
        );
    }
    match &r.notify {
        Some(Err(e)) => Outcome::fail("NotifyRegistrationStatus", e.to_string(), "answer NotifyRegistrationStatus"),
        _ => Outcome::pass(""),
    }
}

/// How long REG-009 watches after the first registration for another from
/// the same socket (a kubelet.sock watcher that takes the socket it finds at
/// start for a new kubelet registers again within its first poll).
const ONCE_WINDOW: Duration = Duration::from_secs(1);

/// REG-009: no Register from the socket of an instance whose stream the
/// kubelet still reads (kubernetes#139338). Judged on everything the
/// session saw, watched for at least [`ONCE_WINDOW`] after the first
/// registration.
pub(crate) async fn reg_once(s: &mut Basic<'_>) -> Outcome {
    let first = need!(s.ensure_reg().await);
    let until = first.at + ONCE_WINDOW;
    while Instant::now() < until {
        match s.next_event(until).await {
            Some(e) => s.seen.take(&e),
            None => break,
        }
    }
    s.drain();
    let resource = first.resource.clone();
    let Some((earlier, later)) = s.seen.again_while_live(&resource) else {
        let n = s.seen.regs.iter().filter(|r| r.resource == resource).count();
        return Outcome::pass(format!("{n} registration(s), none from a socket whose stream was open"));
    };
    let after = ms(s.seen.arrival(&later).saturating_duration_since(earlier.at));
    let socket = later.socket.display();
    let rpc = format!(
        "Register again from {socket} {after} after the kubelet accepted it, its ListAndWatch stream from there still open"
    );
    let answer = match &later.dial_back {
        Err(e) => format!(
            "the kubelet refused it ({e}): since 1.37 it keys instances by socket (kubernetes#135437) and refuses a socket it still streams from; v1.37's connectClient then deregisters every client of that socket (pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go), so the live stream's end is never followed: once this instance goes its devices stay allocatable and every later Register from the socket is refused until the kubelet restarts (kubernetes#139338)"
        ),
        Ok(_) => "the kubelet accepted it: up to 1.36 it replaces the resource's endpoint and forgets the first stream without closing it (two streams now run); when that first stream ends, the kubelet disconnects the current one and every device turns unhealthy (kubernetes#121994); since 1.37 the same Register is refused (\"device plugin already connected\", kubernetes#139338)".to_string(),
    };
    Outcome::fail(
        rpc,
        answer,
        "register once per kubelet: again only when kubelet.sock is re-created (a kubelet restart) or the kubelet ended your stream; a watcher must not take the kubelet.sock it finds at start for a new one, and a new instance must not register on the socket of one still running",
    )
}
