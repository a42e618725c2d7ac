//! What the kubelet's events say about the plugin, as pure queries over
//! [`Seen`]: a Register still waiting for its dial-back, when a Register
//! arrived, how its dial-back failed, how and when a stream ended.

use super::super::env::{Registration, Seen};
use super::super::evidence;
use super::ms;
use crate::kubelet::devicemanager::core::state::ALREADY_CONNECTED;
use std::time::Instant;

/// The end of one of the kubelet's streams.
pub(super) struct StreamEnd {
    pub(super) at: Instant,
    /// When the kubelet accepted the registration (and opened the stream).
    pub(super) opened: Instant,
    pub(super) messages: usize,
    pub(super) why: String,
}

impl Seen {
    /// A Register that arrived and has no answer yet (its dial-back runs).
    pub(super) fn pending_attempt(&self, min_gen: u64, since: Instant) -> bool {
        let answered = self.regs.iter().filter(|r| r.generation >= min_gen && r.at >= since).count();
        let asked = self.attempts.iter().filter(|a| a.0 >= min_gen && a.1 >= since).count();
        asked > answered
    }

    /// A Register accepted but whose dial-back failed.
    pub(super) fn dial_back_failed(&self, min_gen: u64, since: Instant) -> bool {
        self.regs
            .iter()
            .any(|r| r.generation >= min_gen && r.at >= since && r.rejected.is_none() && r.dial_back.is_err())
    }

    /// When the Register behind `r` arrived (the kubelet reports its answer
    /// only after the dial-back, up to 10 s later).
    pub(super) fn arrival(&self, r: &Registration) -> Instant {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.0 == r.generation && a.3 == r.endpoint && a.1 <= r.at)
            .map(|a| a.1)
            .unwrap_or(r.at)
    }

    /// How the dial-back of the Register at `at` failed, as it happened.
    pub(super) fn dial_back_story(&self, generation: u64, at: Instant) -> Option<String> {
        let (_, socket, when, error) = self.dial_fails.iter().find(|f| f.0 == generation && f.2 >= at)?;
        Some(format!(
            "the kubelet's dial-back to {} failed {} after Register arrived: {error}",
            socket.display(),
            ms(when.saturating_duration_since(at)),
        ))
    }

    /// The end of the kubelet's stream on `socket` (the plugin's doing: the
    /// suite's kubelet ends streams only when it restarts or stops).
    pub(super) fn stream_end(&self, generation: u64, socket: &std::path::Path, since: Instant) -> Option<StreamEnd> {
        let (_, _, why, at) = self.ends.iter().find(|e| e.0 == generation && e.1 == socket && e.3 >= since)?;
        let opened = self
            .regs
            .iter()
            .rev()
            .find(|r| r.generation == generation && r.socket == socket && r.at <= *at && r.dial_back.is_ok())
            .map(|r| r.at)
            .unwrap_or(*at);
        let messages = self
            .snaps
            .iter()
            .filter(|s| s.generation == generation && s.socket == socket && s.at >= opened && s.at <= *at)
            .count();
        let why = if evidence::is_connection_lost(why) {
            format!("the plugin closed the connection (exited?) ({why})")
        } else {
            why.clone()
        };
        Some(StreamEnd { at: *at, opened, messages, why })
    }

    /// Whether the kubelet's stream on `socket` ended.
    pub(super) fn stream_ended(&self, generation: u64, socket: &std::path::Path, since: Instant) -> bool {
        self.stream_end(generation, socket, since).is_some()
    }

    /// The first Register of `resource` from the socket of an instance the
    /// kubelet still streams from (same kubelet generation, no end of its
    /// stream seen since it was accepted): the accepted registration and the
    /// later one, which a 1.37 kubelet refuses ("device plugin already
    /// connected") and earlier ones accept beside the first (REG-009).
    pub(super) fn again_while_live(&self, resource: &str) -> Option<(Registration, Registration)> {
        let mut live: Vec<&Registration> = Vec::new();
        for r in self.regs.iter().filter(|r| r.resource == resource) {
            let ended = |l: &Registration| {
                self.ends.iter().any(|e| e.0 == l.generation && e.1 == l.socket && e.3 >= l.at && e.3 <= r.at)
                    || self.gone.iter().any(|g| g.0 == l.generation && g.1 == l.socket && g.3 >= l.at && g.3 <= r.at)
            };
            live.retain(|l| l.generation == r.generation && !ended(l));
            if let Some(earlier) = live.iter().find(|l| l.socket == r.socket) {
                let refused = r.dial_back.as_ref().err().is_some_and(|e| e.words().contains(ALREADY_CONNECTED));
                if refused || (r.rejected.is_none() && r.dial_back.is_ok()) {
                    return Some(((*earlier).clone(), r.clone()));
                }
            }
            if r.rejected.is_none() && r.dial_back.is_ok() {
                live.retain(|l| l.socket != r.socket);
                live.push(r);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::DevicePluginOptions;
    use crate::suite::env::{StepFailed, Via};
    use std::path::PathBuf;
    use std::time::Duration;

    fn reg(at: Instant, dial_back: Result<DevicePluginOptions, StepFailed>) -> Registration {
        Registration {
            at,
            generation: 1,
            via: Via::KubeletSocket,
            version: "v1beta1".into(),
            resource: "vendor.example/gpu".into(),
            endpoint: "gpu.sock".into(),
            socket: PathBuf::from("/p/gpu.sock"),
            request_options: None,
            dial_back,
            rejected: None,
            notify: None,
        }
    }

    #[test]
    fn a_register_is_pending_until_answered_and_its_dial_back_story_is_told() {
        let t0 = Instant::now();
        let mut seen = Seen::default();
        seen.attempts.push((1, t0, "vendor.example/gpu".into(), "gpu.sock".into()));
        assert!(seen.pending_attempt(1, t0) && !seen.dial_back_failed(1, t0));
        let answered = t0 + Duration::from_millis(2500);
        seen.regs.push(reg(answered, Err(StepFailed::DialBack("connection refused".into()))));
        seen.dial_fails.push((1, PathBuf::from("/p/gpu.sock"), t0 + Duration::from_millis(5), "refused".into()));
        assert!(!seen.pending_attempt(1, t0) && seen.dial_back_failed(1, t0));
        // The Register arrived when it was asked, not when the kubelet answered.
        assert_eq!(seen.arrival(&seen.regs[0]), t0);
        assert_eq!(
            seen.dial_back_story(1, t0).as_deref(),
            Some("the kubelet's dial-back to /p/gpu.sock failed 5 ms after Register arrived: refused")
        );
        assert!(seen.dial_back_story(2, t0).is_none());
    }

    #[test]
    fn a_stream_end_counts_its_messages_and_names_a_lost_connection() {
        let t0 = Instant::now();
        let mut seen = Seen::default();
        seen.regs.push(reg(t0, Ok(DevicePluginOptions::default())));
        let sock = PathBuf::from("/p/gpu.sock");
        for ms in [1, 2] {
            seen.snaps.push(crate::suite::env::Snap {
                generation: 1,
                socket: sock.clone(),
                at: t0 + Duration::from_millis(ms),
                bytes: 0,
                resp: Default::default(),
            });
        }
        assert!(!seen.stream_ended(1, &sock, t0));
        seen.ends.push((1, sock.clone(), "transport error: broken pipe".into(), t0 + Duration::from_millis(3)));
        let e = seen.stream_end(1, &sock, t0).expect("ended");
        assert_eq!((e.messages, e.opened), (2, t0));
        assert!(e.why.starts_with("the plugin closed the connection (exited?)"), "{}", e.why);
        assert!(seen.stream_end(2, &sock, t0).is_none());
    }

    #[test]
    fn a_register_from_a_live_instances_socket_is_found_whether_refused_or_accepted() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let ok = |ms: u64, sock: &str| Registration {
            socket: PathBuf::from(sock),
            ..reg(at(ms), Ok(DevicePluginOptions::default()))
        };
        let mut seen = Seen::default();
        seen.regs.push(ok(0, "/p/gpu.sock"));
        // another socket, and another resource on the same socket: no finding
        seen.regs.push(ok(10, "/p/gpu-b.sock"));
        seen.regs.push(Registration { resource: "vendor.example/other".into(), ..ok(20, "/p/gpu.sock") });
        assert!(seen.again_while_live("vendor.example/gpu").is_none());
        // 1.37 refuses the same socket while its stream is live
        let refused = Registration {
            dial_back: Err(StepFailed::DialBack("device plugin already connected: /p/gpu.sock".into())),
            ..reg(at(30), Err(StepFailed::DialBack(String::new())))
        };
        let mut v137 = seen.clone();
        v137.regs.push(refused);
        let (earlier, later) = v137.again_while_live("vendor.example/gpu").expect("found");
        assert_eq!((earlier.at, later.at), (at(0), at(30)));
        // up to 1.36 it is accepted beside the first
        let mut v136 = seen.clone();
        v136.regs.push(ok(30, "/p/gpu.sock"));
        assert_eq!(v136.again_while_live("vendor.example/gpu").map(|(e, l)| (e.at, l.at)), Some((at(0), at(30))));
        // once the stream ended (or after a kubelet restart) registering again is right
        let mut after_end = v136.clone();
        after_end.ends.push((1, PathBuf::from("/p/gpu.sock"), "closed".into(), at(25)));
        assert!(after_end.again_while_live("vendor.example/gpu").is_none());
        let mut restarted = seen.clone();
        restarted.regs.push(Registration { generation: 2, ..ok(30, "/p/gpu.sock") });
        assert!(restarted.again_while_live("vendor.example/gpu").is_none());
        // a dial-back that failed for another reason is REG-005's, not this
        let mut other = seen;
        other.regs.push(reg(at(30), Err(StepFailed::DialBack("connection refused".into()))));
        assert!(other.again_while_live("vendor.example/gpu").is_none());
    }
}
