//! What `dpctl record` decides while it follows a registered tap, without
//! I/O: whether the kubelet restarted, whether the tap was replaced or got
//! no stream, how long a silent kubelet is waited for.

use crate::plugin::tap::Note;
use std::time::Duration;
use tokio::time::Instant;

/// After the kubelet closes the tap's stream, how long to wait for signs of
/// a restart before concluding that another registration replaced the tap.
pub(super) const REPLACED_AFTER: Duration = Duration::from_millis(500);
/// How long after registering the kubelet has to open ListAndWatch.
pub(super) const STREAM_EXPECTED: Duration = Duration::from_secs(10);

/// Why the tap must be served and registered afresh: its socket is gone, or
/// kubelet.sock is another file than when the tap registered.
pub(super) fn restart_reason(
    tap_ours: bool,
    kubelet_now: Option<(u64, u64)>,
    kubelet_then: Option<(u64, u64)>,
) -> Option<&'static str> {
    if !tap_ours {
        Some("the tap's socket was deleted (kubelet restart)")
    } else if kubelet_now.is_some() && kubelet_now != kubelet_then {
        Some("kubelet.sock was re-created (kubelet restart)")
    } else {
        None
    }
}

/// What the watch over a registered tap remembers between ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Watch {
    /// When the kubelet closed the tap's stream (another registration replaced it).
    pub(super) replaced_at: Option<Instant>,
    /// Since when a ListAndWatch on the tap is awaited.
    pub(super) awaiting_stream: Option<Instant>,
    /// Failed registrations in a row.
    pub(super) failures: u32,
    /// Since when the kubelet does not answer.
    pub(super) kubelet_down: Option<Instant>,
}

/// The kubelet did not answer: keep waiting (first: log it), or give up.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Down {
    First,
    Waiting,
    GaveUp,
}

impl Watch {
    /// Just registered: a stream is awaited.
    pub(super) fn registered(now: Instant) -> Self {
        Watch { replaced_at: None, awaiting_stream: Some(now), failures: 0, kubelet_down: None }
    }

    pub(super) fn noted(&mut self, note: &Note, now: Instant) {
        match note {
            Note::StreamOpened(_) => self.awaiting_stream = None,
            Note::ClosedByKubelet(_) => {
                self.replaced_at.get_or_insert(now);
            }
        }
    }

    /// Whether the tap should register again, and if so whether because it
    /// was replaced (`Some(true)`) or got no stream (`Some(false)`).
    pub(super) fn due(&self, now: Instant) -> Option<bool> {
        let replaced = self.replaced_at.is_some_and(|t| now.saturating_duration_since(t) >= REPLACED_AFTER);
        let no_stream = self.awaiting_stream.is_some_and(|t| now.saturating_duration_since(t) >= STREAM_EXPECTED);
        (replaced || no_stream).then_some(replaced)
    }

    pub(super) fn kubelet_silent(&mut self, now: Instant, restart_timeout: Duration) -> Down {
        match self.kubelet_down {
            None => {
                self.kubelet_down = Some(now);
                if restart_timeout.is_zero() {
                    Down::GaveUp
                } else {
                    Down::First
                }
            }
            Some(since) if now.saturating_duration_since(since) >= restart_timeout => Down::GaveUp,
            Some(_) => Down::Waiting,
        }
    }

    /// A registration again failed: retry on the next tick, or (the third
    /// failure in a row) give up (`false`).
    pub(super) fn register_failed(&mut self, now: Instant) -> bool {
        self.failures += 1;
        self.replaced_at = Some(now - REPLACED_AFTER);
        self.failures < 3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_is_a_lost_tap_socket_or_a_new_kubelet_sock() {
        let (a, b) = (Some((1, 10)), Some((1, 11)));
        assert_eq!(restart_reason(true, a, a), None);
        assert_eq!(restart_reason(true, None, a), None, "kubelet.sock missing for a moment is no restart yet");
        assert!(restart_reason(true, b, a).is_some_and(|r| r.contains("re-created")));
        assert!(restart_reason(false, a, a).is_some_and(|r| r.contains("deleted")));
    }

    #[test]
    fn the_tap_registers_again_when_replaced_or_left_without_a_stream() {
        let t0 = Instant::now();
        let mut w = Watch::registered(t0);
        assert_eq!(w.due(t0 + Duration::from_secs(1)), None);
        assert_eq!(w.due(t0 + STREAM_EXPECTED), Some(false), "no ListAndWatch came");
        w.noted(&Note::StreamOpened(1), t0 + Duration::from_secs(1));
        assert_eq!(w.due(t0 + STREAM_EXPECTED), None);
        let closed = t0 + Duration::from_secs(2);
        w.noted(&Note::ClosedByKubelet(1), closed);
        w.noted(&Note::ClosedByKubelet(2), closed + Duration::from_millis(400));
        assert_eq!(w.due(closed + Duration::from_millis(499)), None, "the first close counts");
        assert_eq!(w.due(closed + REPLACED_AFTER), Some(true));
    }

    #[test]
    fn a_silent_kubelet_is_waited_for_up_to_the_restart_timeout() {
        let t0 = Instant::now();
        let mut w = Watch::registered(t0);
        let limit = Duration::from_secs(120);
        assert_eq!(w.kubelet_silent(t0, limit), Down::First);
        assert_eq!(w.kubelet_silent(t0 + Duration::from_secs(119), limit), Down::Waiting);
        assert_eq!(w.kubelet_silent(t0 + limit, limit), Down::GaveUp);
    }

    #[test]
    fn the_third_failed_registration_in_a_row_gives_up() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut w = Watch::registered(t0);
        assert!(w.register_failed(t0));
        assert_eq!(w.due(t0), Some(true), "retried on the next tick");
        assert!(w.register_failed(t0));
        assert!(!w.register_failed(t0));
        assert_eq!(Watch::registered(t0).failures, 0, "a success starts the count again");
    }
}
