//! The DRA health cache (pkg/kubelet/cm/dra/healthinfo.go), without I/O:
//! each driver's last report per device, and the health each device counts
//! as at a given moment (Unknown once its last report is older than its
//! timeout). The shell feeds it snapshots from the health stream and asks
//! it, at the moments it names, what changed. It is kept in
//! `<root>/dra_health_state` in healthinfo.go's format ([`HealthCache::to_state`],
//! [`HealthCache::from_state`]), so a restarted kubelet knows the last reports.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// The kubelet's default health timeout (healthinfo.go DefaultHealthTimeout):
/// a device reported without `health_check_timeout_seconds` counts as
/// Unknown once its last report is older than this.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// The health word of a device no report (or only a stale one) speaks for.
pub const UNKNOWN: &str = "Unknown";

/// The file under the kubelet root (manager.go NewManager: `dra_health_state`).
pub const STATE_FILE: &str = "dra_health_state";

/// A device of a driver: (pool, device).
pub type DeviceKey = (String, String);

/// One device's last health report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Healthy, Unhealthy or Unknown, as the driver said.
    pub health: String,
    /// The driver's message, truncated as the kubelet truncates it.
    pub message: String,
    /// When it arrived.
    pub at: Instant,
    /// How long it counts.
    pub timeout: Duration,
}

/// What a device counts as (healthinfo.go getHealthInfo's DeviceHealth).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    /// Healthy, Unhealthy or Unknown.
    pub word: String,
    /// The message of the report it counts by ("" once stale).
    pub message: String,
}

impl std::fmt::Display for Health {
    /// `Healthy`, or `Unhealthy (message)` with a message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.message.as_str() {
            "" => write!(f, "{}", self.word),
            m => write!(f, "{} ({m})", self.word),
        }
    }
}

impl Health {
    fn unknown() -> Self {
        Health { word: UNKNOWN.to_string(), message: String::new() }
    }
}

/// One device of a snapshot of the health stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The device.
    pub key: DeviceKey,
    /// Its health word.
    pub health: String,
    /// Its message, as sent.
    pub message: String,
    /// `health_check_timeout_seconds` (None: the default).
    pub timeout: Option<Duration>,
}

/// The longest message kept whole (bytes, as Go's `len`).
pub const MAX_MESSAGE: usize = crate::protocol::dra::MAX_HEALTH_MESSAGE;

/// manager.go truncateHealthMessage (TestTruncateHealthMessage): a message
/// longer than 1024 bytes keeps its first 1021 and gets `...` (cut on a
/// character boundary, so never more than 1024 bytes).
pub fn truncate_message(m: &str) -> String {
    if m.len() <= MAX_MESSAGE {
        return m.to_string();
    }
    let mut cut = MAX_MESSAGE - 3;
    while !m.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &m[..cut])
}

/// The health each device counts as at `now` (healthinfo.go getHealthInfo:
/// Unknown with no message once `now - lastUpdated > timeout`), and when the
/// next report goes stale.
pub fn effective_health(
    reports: &BTreeMap<DeviceKey, Report>,
    now: Instant,
) -> (BTreeMap<DeviceKey, Health>, Option<Instant>) {
    let mut next: Option<Instant> = None;
    let map = reports
        .iter()
        .map(|(k, r)| {
            let stale_at = r.at + r.timeout;
            let h = if now > stale_at {
                Health::unknown()
            } else {
                next = Some(next.map_or(stale_at, |n| n.min(stale_at)));
                Health { word: r.health.clone(), message: r.message.clone() }
            };
            (k.clone(), h)
        })
        .collect();
    (map, next)
}

/// What a refresh found.
#[derive(Debug, Clone, PartialEq)]
pub struct Refreshed {
    /// Every device's health now, when it changed since the last refresh.
    pub changed: Option<BTreeMap<DeviceKey, Health>>,
    /// When the next report goes stale.
    pub next: Option<Instant>,
}

/// Every driver's reports and the health they count as.
#[derive(Debug, Default)]
pub struct HealthCache {
    reports: BTreeMap<String, BTreeMap<DeviceKey, Report>>,
    health: BTreeMap<String, BTreeMap<DeviceKey, Health>>,
    /// Drivers whose stream ended (healthinfo.go clearDriver deletes them
    /// from the state file; the devices stay known here, Unknown).
    cleared: BTreeSet<String>,
    /// Changes when the set of devices [`HealthCache::devices`] lists may
    /// have changed (a [`crate::core::stamp`], unique across caches).
    devices_stamp: u64,
}

/// healthinfo.go's state file: state.DevicesHealthMap, driver →
/// `{"Devices": {"<pool>/<device>": DeviceHealth}}` (Go field names).
#[derive(Debug, Serialize, Deserialize)]
struct DriverState {
    #[serde(rename = "Devices", default)]
    devices: BTreeMap<String, DeviceState>,
}

#[derive(Debug, Serialize, Deserialize)]
struct DeviceState {
    #[serde(rename = "PoolName")]
    pool: String,
    #[serde(rename = "DeviceName")]
    device: String,
    #[serde(rename = "Health")]
    health: String,
    #[serde(rename = "Message", default)]
    message: String,
    /// Go `time.Time` JSON (RFC 3339).
    #[serde(rename = "LastUpdated")]
    last_updated: String,
    /// Go `time.Duration` JSON: nanoseconds.
    #[serde(rename = "HealthCheckTimeout", default)]
    timeout: i64,
}

impl HealthCache {
    /// Record one snapshot of `driver`'s stream at `now`: every device in it
    /// reported now (`timeout` None: the default); devices left out keep
    /// their last report (healthinfo.go updateHealthInfo).
    pub fn record(&mut self, driver: &str, snapshot: Vec<Snapshot>, now: Instant) {
        self.cleared.remove(driver);
        let reports = self.reports.entry(driver.to_string()).or_default();
        for d in snapshot {
            let timeout = d.timeout.unwrap_or(DEFAULT_HEALTH_TIMEOUT);
            let message = truncate_message(&d.message);
            reports.insert(d.key, Report { health: d.health, message, at: now, timeout });
        }
    }

    /// Recompute what `driver`'s devices count as at `now`. None when the driver never reported.
    pub fn refresh(&mut self, driver: &str, now: Instant) -> Option<Refreshed> {
        let reports = self.reports.get(driver)?;
        let (map, next) = effective_health(reports, now);
        let old = self.health.insert(driver.to_string(), map.clone());
        if !old.as_ref().is_some_and(|o| o.keys().eq(map.keys())) {
            self.devices_stamp = crate::core::stamp();
        }
        let changed = (old.as_ref() != Some(&map)).then_some(map);
        Some(Refreshed { changed, next })
    }

    /// Every driver with reports.
    pub fn drivers(&self) -> Vec<String> {
        self.reports.keys().cloned().collect()
    }

    /// The driver's health stream ended (healthinfo.go clearDriver, deferred
    /// by HandleWatchResourcesStream): every device it reported counts as
    /// Unknown from now until it reports again.
    pub fn clear_driver(&mut self, driver: &str) {
        for r in self.reports.get_mut(driver).into_iter().flat_map(|m| m.values_mut()) {
            r.health = UNKNOWN.to_string();
            r.message.clear();
        }
        if self.reports.contains_key(driver) {
            self.cleared.insert(driver.to_string());
        }
    }

    /// The driver's last instance went away.
    pub fn forget(&mut self, driver: &str) {
        self.devices_stamp = crate::core::stamp();
        self.reports.remove(driver);
        self.health.remove(driver);
        self.cleared.remove(driver);
    }

    /// The health a device counts as (Unknown without a report).
    pub fn of(&self, driver: &str, pool: &str, device: &str) -> Health {
        self.health
            .get(driver)
            .and_then(|m| m.get(&(pool.to_string(), device.to_string())))
            .cloned()
            .unwrap_or_else(Health::unknown)
    }

    /// `pool/device=Health` for each device of `driver` (`=Health (message)` with one).
    pub fn words(&self, driver: &str) -> Vec<String> {
        self.health
            .get(driver)
            .map(|m| m.iter().map(|((p, n), h)| format!("{p}/{n}={h}")).collect())
            .unwrap_or_default()
    }

    /// What [`HealthCache::devices`] lists, stamped: equal stamps, equal lists.
    pub fn devices_stamp(&self) -> u64 {
        self.devices_stamp
    }

    /// Every driver's devices, as the allocator may use them.
    pub fn devices(&self) -> impl Iterator<Item = (&String, &DeviceKey)> {
        self.health.iter().flat_map(|(d, m)| m.keys().map(move |k| (d, k)))
    }

    /// The state file's bytes: every driver's last reports (not those whose
    /// stream ended), each report's time as wall-clock time (`now` is `wall`).
    pub fn to_state(&self, now: Instant, wall: SystemTime) -> Vec<u8> {
        let map: BTreeMap<&String, DriverState> = self
            .reports
            .iter()
            .filter(|(d, _)| !self.cleared.contains(*d))
            .map(|(d, m)| {
                let devices = m
                    .iter()
                    .map(|((p, n), r)| {
                        let at = wall.checked_sub(now.saturating_duration_since(r.at)).unwrap_or(wall);
                        let state = DeviceState {
                            pool: p.clone(),
                            device: n.clone(),
                            health: r.health.clone(),
                            message: r.message.clone(),
                            last_updated: crate::core::time::rfc3339_nano(at),
                            timeout: i64::try_from(r.timeout.as_nanos()).unwrap_or(i64::MAX),
                        };
                        (format!("{p}/{n}"), state)
                    })
                    .collect();
                (d, DriverState { devices })
            })
            .collect();
        serde_json::to_vec(&map).unwrap_or_default()
    }

    /// A cache from the state file's bytes (healthinfo.go loadFromCheckpoint),
    /// each report as old as its LastUpdated says (`now` is `wall`), every
    /// driver's health computed at `now`.
    pub fn from_state(bytes: &[u8], now: Instant, wall: SystemTime) -> Result<HealthCache, StateError> {
        let map: BTreeMap<String, DriverState> = serde_json::from_slice(bytes).map_err(StateError::Json)?;
        let mut c = HealthCache::default();
        for (driver, st) in map {
            let mut reports = BTreeMap::new();
            for (key, d) in st.devices {
                let when =
                    crate::core::time::parse_rfc3339(&d.last_updated).map_err(|e| StateError::LastUpdated(key, e))?;
                let age = wall.duration_since(when).unwrap_or_default();
                let timeout = u64::try_from(d.timeout).ok().filter(|t| *t > 0).map(Duration::from_nanos);
                let timeout = timeout.unwrap_or(DEFAULT_HEALTH_TIMEOUT);
                // Older than the monotonic clock reaches: long stale.
                let (at, health) = match now.checked_sub(age) {
                    Some(at) => (at, d.health),
                    None => (now, UNKNOWN.to_string()),
                };
                let r = Report { health, message: d.message, at, timeout };
                reports.insert((d.pool, d.device), r);
            }
            c.reports.insert(driver, reports);
        }
        for d in c.drivers() {
            c.refresh(&d, now);
        }
        Ok(c)
    }
}

/// Why the health state file is not read.
#[derive(Debug)]
pub enum StateError {
    /// Not the file's JSON.
    Json(serde_json::Error),
    /// A device's (this key's) LastUpdated that is not a time.
    LastUpdated(String, crate::core::time::TimeError),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Json(e) => write!(f, "{e}"),
            StateError::LastUpdated(key, e) => write!(f, "{key}: {e}"),
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateError::Json(e) => Some(e),
            StateError::LastUpdated(_, e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(d: &str) -> DeviceKey {
        ("p".to_string(), d.to_string())
    }

    fn snap(d: &str, health: &str, timeout: Option<Duration>) -> Snapshot {
        Snapshot { key: key(d), health: health.into(), message: String::new(), timeout }
    }

    fn report(health: &str, at: Instant, timeout: Duration) -> Report {
        Report { health: health.into(), message: "m".into(), at, timeout }
    }

    #[test]
    fn a_report_older_than_its_timeout_counts_as_unknown() {
        let t0 = Instant::now();
        let mut reports = BTreeMap::new();
        reports.insert(key("a"), report("Healthy", t0, Duration::from_secs(1)));
        reports.insert(key("b"), report("Unhealthy", t0, DEFAULT_HEALTH_TIMEOUT));
        let w = |m: &BTreeMap<DeviceKey, Health>, d: &str| m[&key(d)].to_string();
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(500));
        assert_eq!((w(&m, "a"), w(&m, "b")), ("Healthy (m)".into(), "Unhealthy (m)".into()));
        assert_eq!(next, Some(t0 + Duration::from_secs(1)), "the earliest report to go stale");
        let (m, next) = effective_health(&reports, t0 + Duration::from_millis(1001));
        assert_eq!((w(&m, "a"), w(&m, "b")), ("Unknown".into(), "Unhealthy (m)".into()), "a stale message is cleared");
        assert_eq!(next, Some(t0 + Duration::from_secs(30)));
        let (m, next) = effective_health(&reports, t0 + Duration::from_secs(31));
        assert_eq!(w(&m, "b"), "Unknown");
        assert_eq!(next, None);
    }

    #[test]
    fn the_cache_reports_a_change_once_and_keeps_devices_left_out_of_a_snapshot() {
        let t0 = Instant::now();
        let mut c = HealthCache::default();
        assert_eq!(c.refresh("d", t0), None, "no report yet");
        assert_eq!(c.of("d", "p", "a").word, "Unknown");
        c.record("d", vec![snap("a", "Healthy", Some(Duration::from_secs(2))), snap("b", "Healthy", None)], t0);
        let r = c.refresh("d", t0).unwrap();
        assert_eq!(r.changed.unwrap().len(), 2);
        assert_eq!(r.next, Some(t0 + Duration::from_secs(2)));
        assert_eq!(c.refresh("d", t0).unwrap().changed, None, "nothing new");
        // A snapshot naming only b: a keeps its report and goes stale on its own.
        c.record("d", vec![snap("b", "Unhealthy", None)], t0 + Duration::from_secs(1));
        assert!(c.refresh("d", t0 + Duration::from_secs(1)).unwrap().changed.is_some());
        assert_eq!(c.of("d", "p", "a").word, "Healthy");
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
        c.record("d", vec![snap("a", "Healthy", None), snap("b", "Unhealthy", None)], t0);
        c.refresh("d", t0);
        c.record("other", vec![snap("a", "Healthy", None)], t0);
        c.refresh("other", t0);
        c.clear_driver("d");
        let r = c.refresh("d", t0).unwrap();
        assert_eq!(r.changed.map(|m| m.len()), Some(2), "the change is reported");
        assert_eq!(c.words("d"), ["p/a=Unknown", "p/b=Unknown"]);
        assert_eq!(c.of("other", "p", "a").word, "Healthy", "other drivers keep theirs");
        assert_eq!(c.devices().count(), 3, "the devices stay known");
        // clearDriver deletes the driver from the state file.
        let st: serde_json::Value = serde_json::from_slice(&c.to_state(t0, SystemTime::now())).unwrap();
        assert!(st.get("d").is_none() && st.get("other").is_some(), "{st}");
        // A new stream's first snapshot speaks again.
        c.record("d", vec![snap("a", "Healthy", None)], t0);
        c.refresh("d", t0);
        assert_eq!(c.words("d"), ["p/a=Healthy", "p/b=Unknown"]);
    }

    /// TestTruncateHealthMessage: up to 1024 bytes kept whole; longer: the
    /// first 1021 and `...` (never splitting a character).
    #[test]
    fn test_truncate_health_message() {
        assert_eq!(truncate_message(""), "");
        let exact = "a".repeat(1024);
        assert_eq!(truncate_message(&exact), exact);
        let long = "b".repeat(1025);
        let t = truncate_message(&long);
        assert_eq!((t.len(), &t[1018..]), (1024, "bbb..."));
        assert_eq!(&t[..1021], &long[..1021]);
        // A two-byte character across byte 1021 is dropped whole.
        let multi = format!("{}é{}", "c".repeat(1020), "d".repeat(10));
        let t = truncate_message(&multi);
        assert_eq!(t, format!("{}...", "c".repeat(1020)));
        // Recorded messages are truncated.
        let mut c = HealthCache::default();
        let t0 = Instant::now();
        c.record("d", vec![Snapshot { message: long.clone(), ..snap("a", "Unhealthy", None) }], t0);
        c.refresh("d", t0);
        assert_eq!(c.of("d", "p", "a").message.len(), 1024);
    }

    /// healthinfo.go: the cache is saved to dra_health_state as
    /// state.DevicesHealthMap (Go field names, RFC 3339 LastUpdated,
    /// HealthCheckTimeout in nanoseconds) and loaded back with each report's age.
    #[test]
    fn the_health_state_file_round_trips_in_healthinfo_gos_format() {
        let t0 = Instant::now();
        let wall = std::time::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let mut c = HealthCache::default();
        let hot = Snapshot { message: "too hot".into(), ..snap("a", "Unhealthy", Some(Duration::from_secs(60))) };
        c.record("gpu.x", vec![hot, snap("b", "Healthy", None)], t0);
        let later = t0 + Duration::from_secs(5);
        let bytes = c.to_state(later, wall);
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let a = &v["gpu.x"]["Devices"]["p/a"];
        assert_eq!(a["PoolName"], "p");
        assert_eq!(a["DeviceName"], "a");
        assert_eq!(a["Health"], "Unhealthy");
        assert_eq!(a["Message"], "too hot");
        assert_eq!(a["HealthCheckTimeout"], 60_000_000_000i64);
        assert_eq!(a["LastUpdated"], "2026-05-28T20:26:35Z", "5 s before the wall clock");
        assert_eq!(v["gpu.x"]["Devices"]["p/b"]["HealthCheckTimeout"], 30_000_000_000i64);
        // A restarted kubelet 20 s later: a (60 s timeout) still counts, b (30 s) is 25 s old.
        let now = Instant::now();
        let r = HealthCache::from_state(&bytes, now, wall + Duration::from_secs(20)).unwrap();
        assert_eq!(r.words("gpu.x"), ["p/a=Unhealthy (too hot)", "p/b=Healthy"]);
        let r = HealthCache::from_state(&bytes, now, wall + Duration::from_secs(40)).unwrap();
        assert_eq!(r.words("gpu.x"), ["p/a=Unhealthy (too hot)", "p/b=Unknown"], "b went stale while down");
        assert!(HealthCache::from_state(b"{", now, wall).is_err());
        let bad = br#"{"d":{"Devices":{"p/a":{"PoolName":"p","DeviceName":"a","Health":"Healthy","LastUpdated":"yesterday"}}}}"#;
        assert!(HealthCache::from_state(bad, now, wall).unwrap_err().to_string().contains("p/a"));
    }
}
