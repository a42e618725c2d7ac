//! What the log says about DRA device health, without I/O: a line names
//! only the devices whose health changed since the last line, with one
//! summary of the whole driver, and a driver's lines are at least
//! [`MIN_GAP`] apart — changes in between are folded into the next line,
//! which the shell writes when it is due, so the last state is always
//! logged. A driver flooding its health stream costs a line a second.

use super::healthinfo::DeviceKey;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The least time between two health lines of one driver.
pub const MIN_GAP: Duration = Duration::from_secs(1);

/// One line to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// `pool/device=Health` of each device whose health changed (`=gone`: no longer reported).
    pub changed: Vec<String>,
    /// Every device of the driver by health: `2 Healthy, 1 Unknown`.
    pub summary: String,
    /// Changes folded into this line because they came within [`MIN_GAP`] of the last.
    pub folded: u32,
}

#[derive(Debug, Default)]
struct Driver {
    logged: BTreeMap<DeviceKey, String>,
    last: Option<Instant>,
    pending: Option<BTreeMap<DeviceKey, String>>,
    folded: u32,
}

/// The health log of every driver.
#[derive(Debug, Default)]
pub struct HealthLog(BTreeMap<String, Driver>);

fn summary(map: &BTreeMap<DeviceKey, String>) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for h in map.values() {
        *by.entry(h.as_str()).or_default() += 1;
    }
    if by.is_empty() {
        return "no devices".into();
    }
    by.iter().map(|(h, n)| format!("{n} {h}")).collect::<Vec<_>>().join(", ")
}

fn diff(old: &BTreeMap<DeviceKey, String>, new: &BTreeMap<DeviceKey, String>) -> Vec<String> {
    let mut out: Vec<String> =
        new.iter().filter(|(k, h)| old.get(*k) != Some(*h)).map(|((p, d), h)| format!("{p}/{d}={h}")).collect();
    out.extend(old.keys().filter(|k| !new.contains_key(*k)).map(|(p, d)| format!("{p}/{d}=gone")));
    out
}

impl HealthLog {
    /// The driver's health changed to `map` at `now`: the line to log now,
    /// or none (folded into the line due at [`HealthLog::due`]).
    pub fn changed(&mut self, driver: &str, map: BTreeMap<DeviceKey, String>, now: Instant) -> Option<Line> {
        let d = self.0.entry(driver.to_string()).or_default();
        if d.last.is_some_and(|t| now < t + MIN_GAP) {
            d.pending = Some(map);
            d.folded += 1;
            return None;
        }
        d.pending = Some(map);
        self.flush(driver, now)
    }

    /// When the driver's folded changes are due to be logged (`now`, when
    /// nothing was logged yet).
    pub fn due(&self, driver: &str, now: Instant) -> Option<Instant> {
        let d = self.0.get(driver)?;
        d.pending.as_ref()?;
        Some(d.last.map_or(now, |t| t + MIN_GAP))
    }

    /// The line of the driver's folded changes, when due at `now`.
    pub fn flush(&mut self, driver: &str, now: Instant) -> Option<Line> {
        let d = self.0.get_mut(driver)?;
        if d.last.is_some_and(|t| now < t + MIN_GAP) {
            return None;
        }
        let map = d.pending.take()?;
        let changed = diff(&d.logged, &map);
        let folded = std::mem::take(&mut d.folded);
        if changed.is_empty() {
            // Changed and changed back within the gap: nothing to say.
            return None;
        }
        let line = Line { changed, summary: summary(&map), folded };
        d.logged = map;
        d.last = Some(now);
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(words: &[(&str, &str)]) -> BTreeMap<DeviceKey, String> {
        words.iter().map(|(d, h)| (("p".to_string(), d.to_string()), h.to_string())).collect()
    }

    /// #34 item 5: 2,000 devices, one of which flips: the line names that
    /// one device (not 2,000), with one summary; a flood of changes within
    /// the gap is one line when due, carrying the last state.
    #[test]
    fn a_line_names_only_what_changed_and_a_flood_is_folded() {
        let t0 = Instant::now();
        let mut log = HealthLog::default();
        let names: Vec<String> = (0..2000).map(|i| format!("d{i}")).collect();
        let all: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "Healthy")).collect();
        let first = log.changed("x", map(&all), t0).unwrap();
        assert_eq!(first.changed.len(), 2000, "the first line names every device");
        assert_eq!(first.summary, "2000 Healthy");
        let mut one_bad = all.clone();
        one_bad[7].1 = "Unhealthy";
        let l = log.changed("x", map(&one_bad), t0 + MIN_GAP).unwrap();
        assert_eq!(l.changed, ["p/d7=Unhealthy"]);
        assert_eq!(l.summary, "1999 Healthy, 1 Unhealthy");
        assert_eq!(l.folded, 0);
        // 400 snapshots flipping d7 within the next second: no line until due.
        let t1 = t0 + MIN_GAP;
        for i in 0..400u32 {
            let mut m = all.clone();
            m[7].1 = if i % 2 == 0 { "Healthy" } else { "Unhealthy" };
            m[8].1 = "Unknown";
            assert_eq!(log.changed("x", map(&m), t1 + Duration::from_millis(u64::from(i))), None);
        }
        assert_eq!(log.due("x", t1), Some(t1 + MIN_GAP));
        assert_eq!(log.flush("x", t1 + Duration::from_millis(999)), None, "not due yet");
        let l = log.flush("x", t1 + MIN_GAP).unwrap();
        assert_eq!(l.changed, ["p/d8=Unknown"], "d7 ended as it was logged; d8 changed");
        assert_eq!(l.folded, 400);
        assert_eq!(log.due("x", t1), None);
        // Another driver is not held by this one's gap.
        assert!(log.changed("y", map(&[("a", "Healthy")]), t1 + Duration::from_millis(1)).is_some());
        // A device no longer reported is named as gone.
        let l = log.changed("y", map(&[]), t1 + MIN_GAP * 2).unwrap();
        assert_eq!((l.changed, l.summary), (vec!["p/a=gone".to_string()], "no devices".to_string()));
    }
}
