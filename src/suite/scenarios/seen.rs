//! What the kubelet's events say about the plugin, as pure queries over
//! [`Seen`]: a Register still waiting for its dial-back, when a Register
//! arrived, how its dial-back failed, how and when a stream ended.

use super::super::env::{Registration, Seen};
use super::super::evidence;
use super::ms;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deviceplugin::DevicePluginOptions;
    use crate::suite::env::Via;
    use std::path::PathBuf;
    use std::time::Duration;

    fn reg(at: Instant, dial_back: Result<DevicePluginOptions, String>) -> Registration {
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
        seen.regs.push(reg(answered, Err("connection refused".into())));
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
}
