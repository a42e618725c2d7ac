//! Validation of what users type that is not a protocol rule (those live in
//! `protocol`): lists of device IDs on the command line, "did you mean",
//! serde errors in the user's terms, and the one DNS-subdomain checker
//! (apimachinery's `IsDNS1123Subdomain`) that device-plugin resource names
//! and DRA driver names are both judged by.

use crate::core::text::quote;
use std::collections::HashSet;

/// The longest DNS subdomain (RFC 1123), as apimachinery's `DNS1123SubdomainMaxLength`.
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// apimachinery's error text for a string that is not a DNS subdomain
/// (`dns1123SubdomainErrorMsg`, with its example and regex, as `RegexError` prints it).
pub const DNS_SUBDOMAIN_TEXT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
     used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Why a string is not a DNS subdomain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsProblem {
    /// Longer than [`DNS_SUBDOMAIN_MAX`] (or the caller's own limit): how long it is.
    TooLong(usize, usize),
    /// Not dot-separated lowercase alphanumeric labels (`-` inside).
    NotDnsSubdomain,
}

impl std::fmt::Display for DnsProblem {
    /// apimachinery's texts (`MaxLenError`, `RegexError`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DnsProblem::TooLong(_, max) => write!(f, "must be no more than {max} characters"),
            DnsProblem::NotDnsSubdomain => f.write_str(DNS_SUBDOMAIN_TEXT),
        }
    }
}

impl std::error::Error for DnsProblem {}

/// Check a DNS subdomain as apimachinery's `IsDNS1123Subdomain` does: at most
/// `max` (253 there) characters, then `[a-z0-9]([-a-z0-9]*[a-z0-9])?` labels
/// joined by `.` (no per-label limit). Empty is not a subdomain.
pub fn dns_subdomain(s: &str, max: usize) -> Result<(), DnsProblem> {
    if s.len() > max {
        return Err(DnsProblem::TooLong(s.len(), max));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty() && alnum(b[0]) && alnum(b[b.len() - 1]) && b.iter().all(|&c| alnum(c) || c == b'-')
    };
    if s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(DnsProblem::NotDnsSubdomain)
    }
}

/// Why a manifest's UID is refused (apimachinery's field error bodies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UidError {
    /// Longer than [`UID_MAX`] bytes: how long it is.
    TooLong(usize),
    /// Not `[A-Za-z0-9._-]` starting and ending with a letter or digit: the UID.
    Shape(String),
}

impl std::fmt::Display for UidError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UidError::TooLong(_) => write!(
                f,
                "Too long: may not be more than {UID_MAX} bytes (a UID is a UUID such as 0b8e7f0a-5c1d-4e2f-9a3b-7c6d5e4f3a2b)"
            ),
            UidError::Shape(s) => write!(
                f,
                "Invalid value: {}: a UID must consist of letters, digits, '-', '_' or '.', and start and end with a letter or digit (e.g. a UUID such as 0b8e7f0a-5c1d-4e2f-9a3b-7c6d5e4f3a2b); it names files and is sent to drivers",
                quote(s)
            ),
        }
    }
}

impl std::error::Error for UidError {}

/// The longest object UID dpctl accepts in a manifest (the API server's
/// own are 36-character RFC 4122 UUIDs; the kubelet derives 32 hex digits
/// for a static pod without one).
pub const UID_MAX: usize = 128;

/// Check a UID a manifest sets (`metadata.uid` of a pod or a claim). The
/// API server never keeps a client's: it assigns a UUID on create
/// (apiserver/pkg/registry/rest/meta.go FillObjectMetaSystemFields), so a
/// UID that could not be one — a path (`/`, `..`), a control character,
/// anything long — never reaches a driver or a file name: at most
/// [`UID_MAX`] characters of `[A-Za-z0-9._-]`, starting and ending with a
/// letter or digit. The text is one line, the value capped and escaped.
pub fn uid(s: &str) -> Result<(), UidError> {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    let shape = !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'));
    if s.len() > UID_MAX {
        return Err(UidError::TooLong(s.len()));
    }
    if !shape {
        return Err(UidError::Shape(s.to_string()));
    }
    Ok(())
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
    fn uids_are_what_the_api_server_could_have_assigned() {
        for ok in ["0b8e7f0a-5c1d-4e2f-9a3b-7c6d5e4f3a2b", "d41d8cd98f00b204e9800998ecf8427e", "pod-1", "u_1.a"] {
            assert_eq!(uid(ok), Ok(()), "{ok}");
        }
        for bad in ["../../../../tmp/escape", "a/b", "..", ".hidden", "x\0y", "sp ace", "a\u{202e}b", "-a", "a-", ""] {
            let e = uid(bad).unwrap_err().to_string();
            assert!(e.starts_with("Invalid value: ") && !e.contains('\n'), "{bad}: {e}");
        }
        let e = uid(&"a".repeat(UID_MAX + 1)).unwrap_err().to_string();
        assert!(e.starts_with("Too long: may not be more than 128 bytes"), "{e}");
        assert_eq!(uid(&"a".repeat(UID_MAX)), Ok(()));
    }

    #[test]
    fn dns_subdomains_as_apimachinery_checks_them() {
        for ok in ["a", "example.com", "gpu.example.com", "0.a-b.9", &"a".repeat(253)] {
            assert_eq!(dns_subdomain(ok, DNS_SUBDOMAIN_MAX), Ok(()), "{ok}");
        }
        // apimachinery's validation_test.go TestIsDNS1123Subdomain bad cases, and ours.
        for bad in ["", "A", "ABC", "aBc", "a..b", "-a", "a-", "a.-b", "a_b", "a b", ".a", "a.", "a/b", "é"] {
            assert_eq!(dns_subdomain(bad, DNS_SUBDOMAIN_MAX), Err(DnsProblem::NotDnsSubdomain), "{bad:?}");
        }
        assert_eq!(dns_subdomain(&"a".repeat(254), DNS_SUBDOMAIN_MAX), Err(DnsProblem::TooLong(254, 253)));
        assert_eq!(dns_subdomain(&"a".repeat(64), 63).unwrap_err().to_string(), "must be no more than 63 characters");
        let t = DnsProblem::NotDnsSubdomain.to_string();
        assert!(t.starts_with("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"));
        assert!(t.ends_with(
            r"regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ));
    }

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
