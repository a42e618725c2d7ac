//! Echoing text a user or a peer gave us: every value dpctl repeats in an
//! error, a log line, a gRPC status or a table goes through here once, so a
//! 2 MB value makes an 80-character echo, and a device ID holding control
//! characters (ARM's smarter-device-manager uses `"\x00"`..`"\x03"`) cannot
//! misalign a table or make `grep` call a log "binary".
//!
//! - [`escape`]: non-printable characters become `\xNN` (ASCII) or `\u{…}`;
//!   printable text, including non-ASCII letters, is left alone.
//! - [`cap`]: escape, then at most [`MAX_ECHO`] characters and `… (N bytes)`.
//! - [`quote`]: [`cap`] in double quotes, for values inside a sentence.
//! - [`id_list`]: at most [`MAX_LIST`] capped IDs, comma-joined, then `+N more`.
//! - [`cap_words`]: caps every long word of a message someone else built
//!   (serde's errors repeat the offending value in full).

use std::borrow::Cow;
use std::fmt::Write;

/// How many characters of one echoed value are shown.
pub const MAX_ECHO: usize = 80;
/// How many items of an echoed list are shown.
pub const MAX_LIST: usize = 20;
/// A word of a message starting with `/` (a path) or `http(s)://` (a URL) may
/// be this long before it is capped: PATH_MAX, so a real path is never cut.
const MAX_PATH_ECHO: usize = 4096;

/// Is `c` shown as an escape rather than as itself? Control characters (C0,
/// DEL, C1), and the invisible formatting characters that reorder or hide
/// text (bidi overrides and isolates, zero-width characters, BOM).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Escape non-printable characters: `\x00`..`\x1f` and `\x7f` as `\xNN`,
/// other invisible characters as `\u{NNNN}`. Borrowed when nothing changes.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char) {
    if !needs_escape(c) {
        out.push(c);
    } else if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// Escape `s` and show at most `max` characters of it, then `… (N bytes)`
/// with N the length of the original.
pub fn cap_at(s: &str, max: usize) -> Cow<'_, str> {
    let long = s.chars().nth(max).is_some();
    if !long {
        return escape(s);
    }
    let mut out = String::with_capacity(max + 24);
    for c in s.chars().take(max) {
        push_escaped(&mut out, c);
    }
    let _ = write!(out, "… ({} bytes)", s.len());
    Cow::Owned(out)
}

/// Escape `s` and cap it at [`MAX_ECHO`] characters.
pub fn cap(s: &str) -> Cow<'_, str> {
    cap_at(s, MAX_ECHO)
}

/// [`cap`] in double quotes (`"` and `\` inside escaped as Rust and Go do).
pub fn quote(s: &str) -> String {
    let capped = cap(s);
    let mut out = String::with_capacity(capped.len() + 2);
    out.push('"');
    for c in capped.chars() {
        if c == '"' {
            out.push_str("\\\"");
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// At most [`MAX_LIST`] IDs, each escaped and capped, comma-joined; then `,+N more`.
pub fn id_list<S: AsRef<str>>(ids: &[S]) -> String {
    let mut out = String::new();
    for (i, id) in ids.iter().take(MAX_LIST).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&cap(id.as_ref()));
    }
    if ids.len() > MAX_LIST {
        let _ = write!(out, ",+{} more", ids.len() - MAX_LIST);
    }
    out
}

const QUOTES_OPEN: &[char] = &['`', '"', '\'', '(', '[', '{'];
const QUOTES_CLOSE: &[char] = &['`', '"', '\'', ')', ']', '}', ',', ';', ':', '.'];

/// Escape a message built elsewhere and cap each of its words: a word (a run
/// without whitespace) longer than [`MAX_ECHO`] characters is cut, unless it
/// is a path (starts with `/`), which may be up to PATH_MAX.
pub fn cap_words(msg: &str) -> Cow<'_, str> {
    // A word [`cap`] already cut (it ends in `…`, and each shown character is
    // at most a 10-character escape) is not cut again.
    let capped = |w: &str| w.ends_with('…') && w.chars().nth(MAX_ECHO * 10 + 1).is_none();
    let limit = |w: &str| {
        if capped(w) {
            usize::MAX
        } else if w.starts_with('/') || w.starts_with("https://") || w.starts_with("http://") {
            // A path or a URL (client-go's help links) is never cut.
            MAX_PATH_ECHO
        } else {
            MAX_ECHO
        }
    };
    let too_long = msg.split(char::is_whitespace).any(|w| w.chars().nth(limit(w)).is_some());
    if !too_long {
        return escape(msg);
    }
    let mut out = String::with_capacity(msg.len().min(4096));
    let mut rest = msg;
    while !rest.is_empty() {
        let ws = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
        out.push_str(&escape(&rest[..ws]));
        rest = &rest[ws..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        // Quotes and punctuation around a value stay outside the cap.
        let open = word.len() - word.trim_start_matches(QUOTES_OPEN).len();
        let close = word.len() - word.trim_end_matches(QUOTES_CLOSE).len();
        if open + close < word.len() {
            let core = &word[open..word.len() - close];
            out.push_str(&escape(&word[..open]));
            out.push_str(&cap_at(core, limit(core)));
            out.push_str(&escape(&word[word.len() - close..]));
        } else {
            out.push_str(&cap_at(word, limit(word)));
        }
        rest = &rest[end..];
    }
    Cow::Owned(out)
}

/// Is every byte of `s` printable ASCII (space to `~`)? What `probe` wants of an ID.
pub fn is_printable_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_and_invisible_characters_only() {
        assert!(matches!(escape("gpu-0"), Cow::Borrowed(_)));
        assert_eq!(escape("\u{0}"), "\\x00");
        assert_eq!(escape("a\u{3}b\n\u{7f}"), "a\\x03b\\x0a\\x7f");
        assert_eq!(escape("x\u{202e}y\u{85}"), "x\\u{202e}y\\u{85}");
        assert_eq!(escape("Gerät-ü"), "Gerät-ü");
    }

    #[test]
    fn caps_long_values_on_a_char_boundary() {
        assert_eq!(cap("short"), "short");
        let long = "B".repeat(2_000_000);
        let c = cap(&long);
        assert_eq!(c, format!("{}… (2000000 bytes)", "B".repeat(80)));
        // multi-byte characters straddling the cut point do not panic
        let wide = "é".repeat(100);
        assert_eq!(cap(&wide), format!("{}… (200 bytes)", "é".repeat(80)));
        assert_eq!(cap(&"\u{1}".repeat(100)), format!("{}… (100 bytes)", "\\x01".repeat(80)));
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
    }

    #[test]
    fn id_lists_are_capped() {
        let ids: Vec<String> = (0..25).map(|i| format!("d{i}")).collect();
        let l = id_list(&ids);
        assert!(l.starts_with("d0,d1,"), "{l}");
        assert!(l.ends_with(",d19,+5 more"), "{l}");
        assert_eq!(id_list(&["\u{0}", "\u{1}"]), "\\x00,\\x01");
        let huge = vec!["x".repeat(1000); 100_000];
        assert!(id_list(&huge).len() < 20 * 110, "one list stays small");
    }

    #[test]
    fn caps_each_long_word_of_a_message() {
        let msg = format!("unknown variant `{}`, expected `a` or `b` at line 1", "B".repeat(2_000_000));
        let c = cap_words(&msg);
        assert!(c.len() < 200, "{c}");
        assert!(c.contains("BBB… (2000000 bytes)`, expected `a` or `b` at line 1"), "{c}");
        let path = format!("/{}/x.sock: gone", "d".repeat(200));
        assert_eq!(cap_words(&path), path);
        let url =
            "see: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins";
        assert_eq!(cap_words(url), url, "a help link stays whole");
        assert_eq!(cap_words("a \u{0} b"), "a \\x00 b");
        // what cap already cut is not cut again
        let once = format!("name {} is invalid", quote(&"r".repeat(5000)));
        assert_eq!(cap_words(&once), once);
    }

    #[test]
    fn printable_ascii() {
        assert!(is_printable_ascii("gpu-0 x~"));
        assert!(!is_printable_ascii("\u{0}"));
        assert!(!is_printable_ascii("é"));
    }
}
