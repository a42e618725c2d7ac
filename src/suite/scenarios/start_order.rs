//! ORDER-001: a plugin started before the kubelet waits for kubelet.sock.

use super::*;

/// ORDER-001.
pub(crate) async fn start_order(s: &mut Env<'_>) -> Outcome {
    let wait = Duration::from_millis(1500);
    let exited = match s.plugin.as_mut() {
        Some(p) => p.wait_exit(wait).await,
        None => None,
    };
    if let (Some(status), None) = (exited, s.o.restart_backoff) {
        return exited_early(s, status);
    }
    // With restarts, the exit is handled (back-off, restart) while waiting below.
    // Measured from just before the kubelet starts: with the plugin watcher
    // the first registration can complete before start_recorder returns.
    let appeared = Instant::now();
    need!(s.start_recorder().await);
    match s.wait_reg(0, appeared, appeared + REGISTER_WITHIN, true).await {
        Some(r) => {
            let took =
                format!("registered {} after kubelet.sock appeared", ms(r.at.saturating_duration_since(appeared)));
            match s.restart_cost(s.began) {
                Some(cost) => Outcome::warn(
                    format!("{took}, only because it was restarted"),
                    Some(Evidence {
                        log: None,
                        rpc: "plugin start without kubelet.sock".into(),
                        answer: format!("{cost}; log of the first run: {}", s.first_crash_log()),
                        fix: "wait (watch the directory or retry with backoff) for kubelet.sock instead of exiting"
                            .into(),
                    }),
                ),
                None => Outcome::pass(took),
            }
        }
        None => {
            let mut o = match s.crashes.first() {
                Some(c) if s.o.restart_backoff.is_none() => exited_early(s, c.status),
                _ => s.no_registration(REGISTER_WITHIN),
            };
            o.stop = None;
            o
        }
    }
}

fn exited_early(s: &Env<'_>, status: std::process::ExitStatus) -> Outcome {
    Outcome::fail(
        "plugin start without kubelet.sock",
        format!("the plugin exited ({status}) before the kubelet existed; plugin log: {}", s.plugin_log()),
        "wait (watch the directory or retry with backoff) for kubelet.sock instead of exiting",
    )
}
