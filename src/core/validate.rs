//! Validation shared by every command: extended resource names exactly as the
//! kubelet validates them, device IDs and health strings.

use crate::api::{HEALTHY, UNHEALTHY};
use crate::core::text::{is_printable_ascii, quote};
use std::collections::HashSet;

/// Device IDs are documented as at most this long (the kubelet does not enforce it).
pub const MAX_DEVICE_ID_LEN: usize = 63;

/// Why a resource name is not a valid extended resource name, or `None` if it
/// is one. Mirrors the kubelet's `v1helper.IsExtendedResourceName`: not a
/// native resource (must contain `/`, must not contain `kubernetes.io/`), not
/// starting with `requests.`, and `requests.<name>` a qualified name.
pub fn resource_name_problem(name: &str) -> Option<String> {
    if !name.contains('/') {
        return Some("it has no domain prefix; extended resources look like vendor.example/foo".into());
    }
    if name.contains("kubernetes.io/") {
        return Some("the kubernetes.io/ prefix is reserved for native resources".into());
    }
    if name.starts_with("requests.") {
        return Some("it must not start with \"requests.\"".into());
    }
    let quota = format!("requests.{name}");
    let (prefix, short) = match quota.split_once('/') {
        Some((p, n)) if !n.contains('/') => (p, n),
        _ => return Some("it must contain exactly one '/'".into()),
    };
    if let Some(p) = dns_subdomain_problem(prefix) {
        return Some(format!("prefix {} {p}", quote(prefix.strip_prefix("requests.").unwrap_or(prefix))));
    }
    if short.is_empty() {
        return Some("the name after '/' is empty".into());
    }
    if short.len() > 63 {
        return Some(format!("the name after '/' is {} characters, at most 63 are allowed", short.len()));
    }
    if !qualified_name_part_ok(short) {
        return Some(format!(
            "the name after '/' ({}) must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric",
            quote(short)
        ));
    }
    None
}

/// The kubelet's error text for an invalid resource name.
pub fn kubelet_invalid_resource_text(name: &str) -> String {
    format!("the ResourceName {} is invalid", quote(name))
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn qualified_name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// RFC 1123 DNS subdomain: at most 253 characters, dot-separated lowercase labels.
fn dns_subdomain_problem(s: &str) -> Option<&'static str> {
    if s.len() > 253 {
        return Some("is longer than 253 characters");
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
            && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
            && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    if s.split('.').all(label_ok) {
        None
    } else {
        Some("must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with an alphanumeric)")
    }
}

/// Check a resource name, as a usage error for the command line.
pub fn check_resource_name(name: &str) -> crate::core::Result<()> {
    match resource_name_problem(name) {
        None => Ok(()),
        Some(p) => Err(crate::core::Error::usage(format!("invalid resource name {}: {p}", quote(name)))),
    }
}

/// A problem found in a list of devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceProblem {
    /// A device with an empty ID (error).
    EmptyId,
    /// The same ID twice (error).
    DuplicateId(String),
    /// A health string other than exactly `Healthy` or `Unhealthy` (error: the kubelet treats it as unhealthy).
    BadHealth(String, String),
    /// An ID over 63 characters (warning).
    LongId(String),
    /// An ID that is not printable ASCII (warning: the kubelet accepts it,
    /// tables, logs and shell tools choke on it).
    NonPrintableId(String),
}

impl DeviceProblem {
    /// Whether this problem is only a warning.
    pub fn is_warning(&self) -> bool {
        matches!(self, DeviceProblem::LongId(_) | DeviceProblem::NonPrintableId(_))
    }
}

impl std::fmt::Display for DeviceProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceProblem::EmptyId => f.write_str("a device has an empty ID"),
            DeviceProblem::DuplicateId(id) => write!(f, "device ID {} appears more than once", quote(id)),
            DeviceProblem::BadHealth(id, h) => write!(
                f,
                "device {} has health {}; only the exact strings \"Healthy\" and \"Unhealthy\" are valid (the kubelet counts anything else as unhealthy)",
                quote(id),
                quote(h)
            ),
            DeviceProblem::LongId(id) => write!(
                f,
                "device ID {} is {} characters, over the documented limit of {MAX_DEVICE_ID_LEN}",
                quote(id),
                id.len()
            ),
            DeviceProblem::NonPrintableId(id) => write!(
                f,
                "device ID {} is not printable ASCII; the kubelet accepts it, but tables, logs and tools like grep choke on it",
                quote(id)
            ),
        }
    }
}

/// Check device IDs (non-empty, unique, at most 63 chars) and health strings.
pub fn device_problems<'a>(devices: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<DeviceProblem> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut reported_dup = HashSet::new();
    for (id, health) in devices {
        if id.is_empty() {
            out.push(DeviceProblem::EmptyId);
        } else if !seen.insert(id) {
            if reported_dup.insert(id) {
                out.push(DeviceProblem::DuplicateId(id.to_string()));
            }
        } else {
            if id.len() > MAX_DEVICE_ID_LEN {
                out.push(DeviceProblem::LongId(id.to_string()));
            }
            if !is_printable_ascii(id) {
                out.push(DeviceProblem::NonPrintableId(id.to_string()));
            }
        }
        if health != HEALTHY && health != UNHEALTHY {
            out.push(DeviceProblem::BadHealth(id.to_string(), health.to_string()));
        }
    }
    out
}

/// Parse a health string given by a user: exactly `Healthy` or `Unhealthy`.
pub fn parse_health(s: &str) -> crate::core::Result<&'static str> {
    match s {
        HEALTHY => Ok(HEALTHY),
        UNHEALTHY => Ok(UNHEALTHY),
        _ => Err(crate::core::Error::usage(format!(
            "invalid health {}: use exactly \"Healthy\" or \"Unhealthy\" (case matters to the kubelet)",
            quote(s)
        ))),
    }
}

/// Check a user-given list of device IDs: non-empty and unique.
pub fn check_id_list(what: &str, ids: &[String]) -> crate::core::Result<()> {
    let mut seen = HashSet::new();
    for id in ids {
        if id.is_empty() {
            return Err(crate::core::Error::usage(format!("{what}: empty device ID")));
        }
        if !seen.insert(id) {
            return Err(crate::core::Error::usage(format!("{what}: device ID {} given twice", quote(id))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_resource_names() {
        for ok in ["vendor.example/foo", "nvidia.com/gpu", "intel.com/sriov_netdevice", "a/b", "example.com/Foo.Bar-1"]
        {
            assert_eq!(resource_name_problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn rejects_invalid_resource_names() {
        let cases = [
            ("gpu", "no domain prefix"),
            ("kubernetes.io/gpu", "reserved"),
            ("foo.kubernetes.io/gpu", "reserved"),
            ("requests.example.com/gpu", "requests."),
            ("Vendor.example/foo", "lowercase DNS subdomain"),
            ("vendor.example/", "empty"),
            ("vendor.example/-foo", "alphanumerics"),
            ("vendor.example/a/b", "exactly one '/'"),
            ("vendor..example/foo", "lowercase DNS subdomain"),
        ];
        for (name, want) in cases {
            let p = resource_name_problem(name).unwrap_or_else(|| panic!("{name} accepted"));
            assert!(p.contains(want), "{name}: {p}");
        }
        let long = format!("vendor.example/{}", "a".repeat(64));
        assert!(resource_name_problem(&long).unwrap().contains("at most 63"));
        let long_prefix = format!("{}.example/foo", "a".repeat(250));
        assert!(resource_name_problem(&long_prefix).unwrap().contains("253"));
    }

    #[test]
    fn finds_device_problems() {
        let long = "x".repeat(64);
        let p = device_problems([
            ("a", "Healthy"),
            ("a", "Healthy"),
            ("", "Healthy"),
            ("b", "healthy"),
            (long.as_str(), "Unhealthy"),
        ]);
        assert_eq!(
            p,
            vec![
                DeviceProblem::DuplicateId("a".into()),
                DeviceProblem::EmptyId,
                DeviceProblem::BadHealth("b".into(), "healthy".into()),
                DeviceProblem::LongId(long.clone()),
            ]
        );
        assert!(device_problems([("a", "Healthy"), ("b", "Unhealthy")]).is_empty());
        let p = device_problems([("\u{0}", "Healthy"), ("gpu-é", "Healthy")]);
        assert_eq!(
            p,
            vec![DeviceProblem::NonPrintableId("\u{0}".into()), DeviceProblem::NonPrintableId("gpu-é".into())]
        );
        assert!(p[0].is_warning());
        assert!(p[0].to_string().contains("\"\\x00\" is not printable ASCII"), "{}", p[0]);
    }

    #[test]
    fn health_is_case_sensitive() {
        assert_eq!(parse_health("Healthy").unwrap(), "Healthy");
        assert!(parse_health("healthy").is_err());
        assert!(parse_health("UNHEALTHY").is_err());
    }
}

/// Edit distance between two short strings (for "did you mean").
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let best = candidates.iter().map(|c| (distance(word, c), *c)).min_by_key(|(d, _)| *d)?;
    (best.0 <= (word.len() / 3).max(2)).then_some(best.1)
}

/// What serde's Rust type names mean to someone writing a file.
fn type_in_users_terms(t: &str) -> &str {
    match t {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number, 0 or more",
        "i64" | "i32" | "i16" | "i8" | "isize" => "a whole number",
        "f64" | "f32" => "a number",
        "a boolean" | "bool" => "true or false",
        other => other,
    }
}

/// A serde (JSON/YAML) error message said in the user's terms: an unknown
/// field gets a "did you mean", Rust type names (`usize`) become what they
/// accept ("a whole number, 0 or more"). The position (line, column) stays.
pub fn serde_error_in_users_terms(msg: &str) -> String {
    let tick = |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let (names, pos) = match rest.find(" at line ") {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let words = tick(names);
        if let Some((field, expected)) = words.split_first() {
            let cands: Vec<&str> = expected.iter().map(String::as_str).collect();
            let hint = match did_you_mean(field, &cands) {
                Some(c) => format!(" (did you mean {c:?}?)"),
                None if cands.is_empty() => String::new(),
                None => format!(" (known fields: {})", cands.join(", ")),
            };
            return format!("unknown field {field:?}{hint}{pos}");
        }
    }
    // "invalid value: integer `-1`, expected usize at line 1 column 30"
    // "invalid type: string \"x\", expected u64 at line …"
    if let Some(i) = msg.find(", expected ") {
        let (head, tail) = msg.split_at(i);
        let tail = &tail[", expected ".len()..];
        let (ty, pos) = match tail.find(" at line ") {
            Some(j) => (&tail[..j], &tail[j..]),
            None => (tail, ""),
        };
        let meant = type_in_users_terms(ty);
        if meant != ty {
            let got =
                head.strip_prefix("invalid value: ").or_else(|| head.strip_prefix("invalid type: ")).unwrap_or(head);
            let got = got.replace('`', "");
            return format!("{got} is not allowed here: expected {meant}{pos}");
        }
    }
    msg.to_string()
}

#[cfg(test)]
mod users_terms_tests {
    use super::*;

    #[test]
    fn serde_errors_in_users_terms() {
        let m = serde_error_in_users_terms(
            "unknown field `idPatern`, expected one of `resource`, `count`, `idPattern` at line 1 column 12",
        );
        assert_eq!(m, "unknown field \"idPatern\" (did you mean \"idPattern\"?) at line 1 column 12");
        let m = serde_error_in_users_terms("unknown field `zzzzzzzz`, expected `resource` or `count`");
        assert!(m.contains("known fields: resource, count"), "{m}");
        let m = serde_error_in_users_terms("invalid value: integer `-1`, expected usize at line 1 column 30");
        assert_eq!(m, "integer -1 is not allowed here: expected a whole number, 0 or more at line 1 column 30");
        assert!(!serde_error_in_users_terms("invalid type: string \"x\", expected u64").contains("u64"));
        assert_eq!(serde_error_in_users_terms("EOF while parsing"), "EOF while parsing");
        assert_eq!(did_you_mean("numaNode", &["numaNodes", "count"]), Some("numaNodes"));
        assert_eq!(did_you_mean("xyz", &["numaNodes"]), None);
    }
}
