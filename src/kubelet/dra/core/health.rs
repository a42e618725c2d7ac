//! The DRA health cache ([`super::healthinfo`]) with what the log has said
//! of it ([`super::healthlog`]), as one concern without I/O: a snapshot
//! recorded, a driver's health recomputed at a moment into the line to log
//! and when to look again.

use super::healthinfo::{HealthCache, Snapshot};
use super::healthlog::{HealthLog, Line};
use tokio::time::Instant;

/// The health cache and its log.
#[derive(Debug, Default)]
pub struct HealthState {
    /// Each driver's last report per device.
    pub cache: HealthCache,
    log: HealthLog,
}

/// What recomputing a driver's health at a moment gives.
#[derive(Debug, Default)]
pub struct Refresh {
    /// Whether the health of any of its devices changed (waiting retries
    /// may go; the cache's file is written again).
    pub changed: bool,
    /// The line to log, if one is due.
    pub line: Option<Line>,
    /// When to look again: the next report going stale, or folded changes
    /// falling due.
    pub next: Option<Instant>,
}

impl HealthState {
    /// Record one snapshot of `driver`'s health stream, received at `now`.
    pub fn record(&mut self, driver: &str, snapshot: Vec<Snapshot>, now: Instant) {
        self.cache.record(driver, snapshot, now);
    }

    /// Recompute the health `driver`'s devices count as at `now`; the line
    /// naming what changed ([`HealthLog`]: at most one a second per driver,
    /// the rest folded into the next).
    pub fn refresh(&mut self, driver: &str, now: Instant) -> Refresh {
        let r = self.cache.refresh(driver, now);
        let changed = r.as_ref().is_some_and(|r| r.changed.is_some());
        let line = match r.as_ref().and_then(|r| r.changed.clone()) {
            Some(map) => self.log.changed(driver, map.into_iter().map(|(k, h)| (k, h.to_string())).collect(), now),
            None => self.log.flush(driver, now),
        };
        let next = [r.and_then(|r| r.next), self.log.due(driver, now)].into_iter().flatten().min();
        Refresh { changed, line, next }
    }
}
