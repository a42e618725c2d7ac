//! The DRA health cache (pkg/kubelet/cm/dra/healthinfo.go), without I/O:
//! each driver's last report per device, and the health each device counts
//! as at a given moment (Unknown once its last report is older than its
//! timeout). The shell feeds it snapshots from the health stream and asks
//! it, at the moments it names, what changed.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The kubelet's default health timeout (healthinfo.go DefaultHealthTimeout):
/// a device reported without `health_check_timeout_seconds` counts as
/// Unknown once its last report is older than this.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// The health word of a device no report (or only a stale one) speaks for.
pub const UNKNOWN: &str = "Unknown";

/// A device of a driver: (pool, device).
pub type DeviceKey = (String, String);

/// One device's last health report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Healthy, Unhealthy or Unknown, as the driver said.
    pub health: String,
    /// When it arrived.
    pub at: Instant,
    /// How long it counts.
    pub timeout: Duration,
}

/// The health each device counts as at `now` (healthinfo.go getHealthInfo:
/// Unknown once `now - lastUpdated > timeout`), and when the next report goes stale.
pub fn effective_health(
    reports: &BTreeMap<DeviceKey, Report>,
    now: Instant,
) -> (BTreeMap<DeviceKey, String>, Option<Instant>) {
    let mut next: Option<Instant> = None;
    let map = reports
        .iter()
        .map(|(k, r)| {
            let stale_at = r.at + r.timeout;
            let word = if now > stale_at {
                UNKNOWN.to_string()
            } else {
                next = Some(next.map_or(stale_at, |n| n.min(stale_at)));
                r.health.clone()
            };
            (k.clone(), word)
        })
        .collect();
    (map, next)
}

/// What a refresh found.
#[derive(Debug, Clone, PartialEq)]
pub struct Refreshed {
    /// Every device's health now, when it changed since the last refresh.
    pub changed: Option<BTreeMap<DeviceKey, String>>,
    /// When the next report goes stale.
    pub next: Option<Instant>,
}

/// Every driver's reports and the health they count as.
#[derive(Debug, Default)]
pub struct HealthCache {
    reports: BTreeMap<String, BTreeMap<DeviceKey, Report>>,
    health: BTreeMap<String, BTreeMap<DeviceKey, String>>,
}

impl HealthCache {
    /// Record one snapshot of `driver`'s stream at `now`: every device in it
    /// reported now (`timeout` None: the default); devices left out keep
    /// their last report (healthinfo.go updateHealthInfo).
    pub fn record(&mut self, driver: &str, snapshot: Vec<(DeviceKey, String, Option<Duration>)>, now: Instant) {
        let reports = self.reports.entry(driver.to_string()).or_default();
        for (key, health, timeout) in snapshot {
            let timeout = timeout.unwrap_or(DEFAULT_HEALTH_TIMEOUT);
            reports.insert(key, Report { health, at: now, timeout });
        }
    }

    /// Recompute what `driver`'s devices count as at `now`. None when the driver never reported.
    pub fn refresh(&mut self, driver: &str, now: Instant) -> Option<Refreshed> {
        let reports = self.reports.get(driver)?;
        let (map, next) = effective_health(reports, now);
        let old = self.health.insert(driver.to_string(), map.clone());
        let changed = (old.as_ref() != Some(&map)).then_some(map);
        Some(Refreshed { changed, next })
    }

    /// The driver's health stream ended (healthinfo.go clearDriver, deferred
    /// by HandleWatchResourcesStream): every device it reported counts as
    /// Unknown from now until it reports again.
    pub fn clear_driver(&mut self, driver: &str) {
        for r in self.reports.get_mut(driver).into_iter().flat_map(|m| m.values_mut()) {
            r.health = UNKNOWN.to_string();
        }
    }

    /// The driver's last instance went away.
    pub fn forget(&mut self, driver: &str) {
        self.reports.remove(driver);
        self.health.remove(driver);
    }

    /// The health a device counts as (Unknown without a report).
    pub fn of(&self, driver: &str, pool: &str, device: &str) -> String {
        self.health
            .get(driver)
            .and_then(|m| m.get(&(pool.to_string(), device.to_string())))
            .cloned()
            .unwrap_or_else(|| UNKNOWN.to_string())
    }

    /// `pool/device=Health` for each device of `driver`.
    pub fn words(&self, driver: &str) -> Vec<String> {
        self.health
            .get(driver)
            .map(|m| m.iter().map(|((p, n), h)| format!("{p}/{n}={h}")).collect())
            .unwrap_or_default()
    }

    /// Every driver's devices, as the allocator may use them.
    pub fn devices(&self) -> impl Iterator<Item = (&String, &DeviceKey)> {
        self.health.iter().flat_map(|(d, m)| m.keys().map(move |k| (d, k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(d: &str) -> DeviceKey {
        ("p".to_string(), d.to_string())
    }

    #[test]
    fn a_report_older_than_its_timeout_counts_as_unknown() {
        let t0 = Instant::now();
        let mut reports = BTreeMap::new();
        reports.insert(key("a"), Report { health: "Healthy".into(), at: t0, timeout: Duration::from_secs(1) });
        reports.insert(key("b"), Report { health: "Unhealthy".into(), at: t0, timeout: DEFAULT_HEALTH_TIMEOUT });
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(500));
        assert_eq!((m[&key("a")].as_str(), m[&key("b")].as_str()), ("Healthy", "Unhealthy"));
        assert_eq!(next, Some(t0 + Duration::from_secs(1)), "the earliest report to go stale");
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(1001));
        assert_eq!((m[&key("a")].as_str(), m[&key("b")].as_str()), ("Unknown", "Unhealthy"));
        assert_eq!(next, Some(t0 + Duration::from_secs(30)));
        let (m, next) = effective_health(&reports, t0 + Duration::from_secs(31));
        assert_eq!(m[&key("b")], "Unknown");
        assert_eq!(next, None);
    }

    #[test]
    fn the_cache_reports_a_change_once_and_keeps_devices_left_out_of_a_snapshot() {
        let t0 = Instant::now();
        let mut c = HealthCache::default();
        assert_eq!(c.refresh("d", t0), None, "no report yet");
        assert_eq!(c.of("d", "p", "a"), "Unknown");
        c.record(
            "d",
            vec![(key("a"), "Healthy".into(), Some(Duration::from_secs(2))), (key("b"), "Healthy".into(), None)],
            t0,
        );
        let r = c.refresh("d", t0).unwrap();
        assert_eq!(r.changed.unwrap().len(), 2);
        assert_eq!(r.next, Some(t0 + Duration::from_secs(2)));
        assert_eq!(c.refresh("d", t0).unwrap().changed, None, "nothing new");
        // A snapshot naming only b: a keeps its report and goes stale on its own.
        c.record("d", vec![(key("b"), "Unhealthy".into(), None)], t0 + Duration::from_secs(1));
        assert!(c.refresh("d", t0 + Duration::from_secs(1)).unwrap().changed.is_some());
        assert_eq!(c.of("d", "p", "a"), "Healthy");
        c.refresh("d", t0 + Duration::from_secs(3));
        assert_eq!(c.words("d"), ["p/a=Unknown", "p/b=Unhealthy"]);
        assert_eq!(c.devices().count(), 2);
        c.forget("d");
        assert!(c.words("d").is_empty());
    }

    /// TestHandleWatchResourcesStream ("stream ends"): when the stream closes
    /// the driver's devices read Unknown at once, not after their timeout.
    #[test]
    fn a_health_stream_that_ends_leaves_the_drivers_devices_unknown_at_once() {
        let t0 = Instant::now();
        let mut c = HealthCache::default();
        c.record("d", vec![(key("a"), "Healthy".into(), None), (key("b"), "Unhealthy".into(), None)], t0);
        c.refresh("d", t0);
        c.record("other", vec![(key("a"), "Healthy".into(), None)], t0);
        c.refresh("other", t0);
        c.clear_driver("d");
        let r = c.refresh("d", t0).unwrap();
        assert_eq!(r.changed.map(|m| m.len()), Some(2), "the change is reported");
        assert_eq!(c.words("d"), ["p/a=Unknown", "p/b=Unknown"]);
        assert_eq!(c.of("other", "p", "a"), "Healthy", "other drivers keep theirs");
        assert_eq!(c.devices().count(), 3, "the devices stay known");
        // A new stream's first snapshot speaks again.
        c.record("d", vec![(key("a"), "Healthy".into(), None)], t0);
        c.refresh("d", t0);
        assert_eq!(c.words("d"), ["p/a=Healthy", "p/b=Unknown"]);
    }
}
