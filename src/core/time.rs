//! Durations in Go's notation (`500ms`, `1m30s`, as kubectl and crictl take
//! them) and RFC 3339 timestamps, without a date-time dependency.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parse a duration such as `5s`, `250ms`, `1m30s`, `1.5h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration; use e.g. 5s, 250ms or 1m30s".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs, s);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("invalid duration {s:?}: expected a number at {rest:?} (use e.g. 5s, 250ms, 1m30s)"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: bad number {:?}", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!("invalid duration {s:?}: missing unit after {value} (use ns, us, ms, s, m or h)"))
            }
            u => return Err(format!("invalid duration {s:?}: unknown unit {u:?} (use ns, us, ms, s, m or h)")),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs_to_duration(total, s)
}

fn secs_to_duration(secs: f64, orig: &str) -> Result<Duration, String> {
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("invalid duration {orig:?}: out of range"));
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

/// Format a time as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60,
        d.subsec_millis()
    )
}

/// Format a time as metav1.Time writes it: RFC 3339 UTC in whole seconds,
/// e.g. `2026-11-26T01:02:03Z` (a client that reads and writes an object
/// back sends this form: a finer stored value would read as changed).
pub fn rfc3339_seconds(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    rfc3339(UNIX_EPOCH + Duration::from_secs(secs)).replace(".000Z", "Z")
}

/// Format a time as Go's `time.Time` JSON does in UTC (RFC 3339 with
/// nanoseconds, trailing zeros dropped), e.g. `2026-11-26T01:02:03.4567Z`.
pub fn rfc3339_nano(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ms = rfc3339(UNIX_EPOCH + Duration::from_secs(d.as_secs()));
    let base = ms.trim_end_matches(".000Z");
    let frac = format!("{:09}", d.subsec_nanos());
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{base}Z")
    } else {
        format!("{base}.{frac}Z")
    }
}

/// Parse an RFC 3339 time (`2026-11-26T01:02:03[.frac](Z|±HH:MM)`), as Go's
/// `time.Time` JSON writes it. Times before 1970 are refused.
pub fn parse_rfc3339(s: &str) -> Result<SystemTime, String> {
    let bad = || format!("{s:?} is not an RFC 3339 time like 2026-11-26T01:02:03Z");
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| {
        s.get(r).filter(|x| x.bytes().all(|c| c.is_ascii_digit())).and_then(|x| x.parse::<i64>().ok())
    };
    let (y, mo, d, h, mi, se) = match (num(0..4), num(5..7), num(8..10), num(11..13), num(14..16), num(17..19)) {
        (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(se)) => (y, mo, d, h, mi, se),
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut nanos: u32 = 0;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return Err(bad());
        }
        nanos = format!("{:0<9}", &f[..digits]).parse().map_err(|_| bad())?;
        rest = &f[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let (oh, om) = match (num(s.len() - 5..s.len() - 3), num(s.len() - 2..s.len())) {
                (Some(oh), Some(om)) => (oh, om),
                _ => return Err(bad()),
            };
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset;
    let secs = u64::try_from(secs).map_err(|_| bad())?;
    Ok(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// The civil date (year, month 1-12, day 1-31; proleptic Gregorian) of a
/// day count since 1970-01-01: Howard Hinnant's days-to-civil algorithm.
/// The one date conversion: RFC 3339 here and metav1.Time in the API
/// server's encodings both use it.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; month 1-12):
/// the inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    }

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, i64::from(m), i64::from(d)), z, "{y}-{m}-{d}");
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
