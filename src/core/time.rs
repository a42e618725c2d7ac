//! Durations in Go's notation (`500ms`, `1m30s`, as kubectl and crictl take
//! them) and RFC 3339 timestamps (jiff's, in the forms Go reads and writes):
//! the one place times are read and written as text.

use jiff::Timestamp;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a text is not a duration or a time; each names the text and the fix.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeError {
    /// Nothing given.
    EmptyDuration,
    /// No number where one was expected: the duration and the rest from there.
    ExpectedNumber(String, String),
    /// A number that does not parse: the duration and the number.
    BadNumber(String, String),
    /// A number without a unit: the duration and the number.
    MissingUnit(String, f64),
    /// A unit that is not ns, us, ms, s, m or h: the duration and the unit.
    UnknownUnit(String, String),
    /// Negative, not finite or longer than 10^9 s: the duration.
    OutOfRange(String),
    /// Not an RFC 3339 time (or one before 1970): the text.
    NotRfc3339(String),
}

impl std::fmt::Display for TimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeError::EmptyDuration => f.write_str("empty duration; use e.g. 5s, 250ms or 1m30s"),
            TimeError::ExpectedNumber(s, rest) => {
                write!(f, "invalid duration {s:?}: expected a number at {rest:?} (use e.g. 5s, 250ms, 1m30s)")
            }
            TimeError::BadNumber(s, n) => write!(f, "invalid duration {s:?}: bad number {n:?}"),
            TimeError::MissingUnit(s, value) => {
                write!(f, "invalid duration {s:?}: missing unit after {value} (use ns, us, ms, s, m or h)")
            }
            TimeError::UnknownUnit(s, u) => {
                write!(f, "invalid duration {s:?}: unknown unit {u:?} (use ns, us, ms, s, m or h)")
            }
            TimeError::OutOfRange(s) => write!(f, "invalid duration {s:?}: out of range"),
            TimeError::NotRfc3339(s) => write!(f, "{s:?} is not an RFC 3339 time like 2026-11-26T01:02:03Z"),
        }
    }
}

impl std::error::Error for TimeError {}

/// For the callers that still collect String errors (plugin::dra's fault
/// list, being restructured apart): the same text.
impl From<TimeError> for String {
    fn from(e: TimeError) -> String {
        e.to_string()
    }
}

/// Parse a duration such as `5s`, `250ms`, `1m30s`, `1.5h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, TimeError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(TimeError::EmptyDuration);
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs, s);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(TimeError::ExpectedNumber(s.to_string(), rest.to_string()));
        }
        let value: f64 =
            rest[..num_len].parse().map_err(|_| TimeError::BadNumber(s.to_string(), rest[..num_len].to_string()))?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(TimeError::MissingUnit(s.to_string(), value)),
            u => return Err(TimeError::UnknownUnit(s.to_string(), u.to_string())),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total, s)
}

fn secs_to_duration(secs: f64, orig: &str) -> Result<Duration, TimeError> {
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(TimeError::OutOfRange(orig.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Format a duration compactly: `850µs`, `12.3ms`, `5s`, `2m30s`.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        let ms = d.as_secs_f64() * 1e3;
        if ms < 10.0 {
            format!("{ms:.2}ms")
        } else {
            format!("{ms:.1}ms")
        }
    } else if d.as_secs() < 60 {
        let s = d.as_secs_f64();
        if s.fract() == 0.0 {
            format!("{}s", d.as_secs())
        } else {
            format!("{s:.2}s")
        }
    } else {
        let (m, s) = (d.as_secs() / 60, d.as_secs() % 60);
        if m >= 60 {
            format!("{}h{}m{}s", m / 60, m % 60, s)
        } else {
            format!("{m}m{s}s")
        }
    }
}

/// Milliseconds as a float, for JSON reports.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-26T01:02:03.456Z`.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// A time as a timestamp (a time before 1970 — none is made here — as the epoch).
fn stamp(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Format a time as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    format!("{:.3}", stamp(t))
}

/// Format a time as metav1.Time writes it: RFC 3339 UTC in whole seconds,
/// e.g. `2026-11-26T01:02:03Z` (a client that reads and writes an object
/// back sends this form: a finer stored value would read as changed).
pub fn rfc3339_seconds(t: SystemTime) -> String {
    format!("{:.0}", stamp(t))
}

/// Format a time as Go's `time.Time` JSON does in UTC (RFC 3339 with
/// nanoseconds, trailing zeros dropped), e.g. `2026-11-26T01:02:03.4567Z`.
pub fn rfc3339_nano(t: SystemTime) -> String {
    stamp(t).to_string()
}

/// Seconds since the epoch (before it: negative) as metav1.Time's JSON
/// writes them: RFC 3339 UTC, whole seconds.
pub fn unix_rfc3339(secs: i64) -> String {
    Timestamp::from_second(secs).map(|t| format!("{t:.0}")).unwrap_or_else(|_| format!("{:.0}", Timestamp::MAX))
}

/// Seconds and nanoseconds since the epoch as metav1.MicroTime's JSON
/// writes them (`RFC3339Micro`: six fractional digits).
pub fn unix_rfc3339_micro(secs: i64, nanos: u32) -> String {
    let t = Timestamp::new(secs, i32::try_from(nanos).unwrap_or(0)).unwrap_or(Timestamp::MAX);
    format!("{t:.6}")
}

/// An RFC 3339 time as seconds since the epoch (floored; before it:
/// negative) and the nanoseconds past them, as Go's `time.Time` JSON reads
/// it (`2026-11-26T01:02:03[.frac](Z|±HH:MM)`; the `T` and the seconds
/// required): the reader the generated Kubernetes types use for
/// `metav1.Time`, so the one RFC 3339 reader.
pub fn parse_unix(s: &str) -> Option<(i64, u32)> {
    crate::api::k8s::json::parse_unix(s)
}

/// Parse an RFC 3339 time (`2026-11-26T01:02:03[.frac](Z|±HH:MM)`), as Go's
/// `time.Time` JSON writes it. Times before 1970 are refused.
pub fn parse_rfc3339(s: &str) -> Result<SystemTime, TimeError> {
    let bad = || TimeError::NotRfc3339(s.to_string());
    let (secs, nanos) = parse_unix(s).ok_or_else(bad)?;
    let secs = u64::try_from(secs).map_err(|_| bad())?;
    Ok(UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in ["", "s", "5x", "5", "-1s", "1..2s", "abc"].iter().filter(|b| **b != "5") {
            assert!(parse_duration(bad).is_err(), "{bad} should fail");
        }
        assert!(parse_duration("-3").is_err());
    }

    #[test]
    fn formats_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_millis(1_764_119_323_456);
        assert_eq!(rfc3339(t), "2025-11-26T01:08:43.456Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(&rfc3339(leap)[..10], "2000-02-29");
        assert_eq!(rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(1_764_119_323_956)), "2025-11-26T01:08:43Z");
    }

    #[test]
    fn metav1_times_read_and_write_before_and_after_the_epoch() {
        assert_eq!(unix_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(unix_rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(parse_unix("1969-12-31T23:59:59.5Z"), Some((-1, 500_000_000)));
        assert_eq!(parse_unix("2024-02-29T14:34:56.123+02:00"), Some((1_709_210_096, 123_000_000)));
        assert_eq!(unix_rfc3339_micro(1_709_210_096, 123_456_789), "2024-02-29T12:34:56.123456Z");
        for bad in ["2024-02-29 14:34:56Z", "2024-02-29T14:34Z", "2024-13-01T00:00:00Z", "yesterday"] {
            assert_eq!(parse_unix(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_duration(Duration::from_micros(850)), "850µs");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.50ms");
        assert_eq!(format_duration(Duration::from_secs(5)), "5s");
        assert_eq!(format_duration(Duration::from_secs(150)), "2m30s");
    }

    #[test]
    fn go_time_json_round_trips() {
        let t = UNIX_EPOCH + Duration::new(1_780_000_000, 450_000_000);
        assert_eq!(rfc3339_nano(t), "2026-05-28T20:26:40.45Z");
        assert_eq!(rfc3339_nano(UNIX_EPOCH + Duration::from_secs(1_780_000_000)), "2026-05-28T20:26:40Z");
        assert_eq!(parse_rfc3339("2026-05-28T20:26:40.45Z"), Ok(t));
        assert_eq!(parse_rfc3339("2026-05-28T22:26:40.450+02:00"), Ok(t), "an offset");
        for bad in [
            "",
            "2026-05-28",
            "2026-13-28T20:26:40Z",
            "2026-05-28T20:26:40",
            "1969-12-31T23:59:59Z",
            "2026-05-28T20:26:40.Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }
}
