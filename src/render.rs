//! Output: `-o table` (tabled, with Healthy green / Unhealthy red unless
//! colour is off), `-o json` (protojson field names; pretty for one object,
//! one compact object per line for streams) and `-o yaml`.

use crate::core::{Error, Result};
use colored::Colorize;
use serde::Serialize;
use std::io::Write;

/// An output format, as crictl and kubectl spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable tables
    Table,
    /// JSON (protojson field names)
    Json,
    /// YAML
    Yaml,
}

/// Decide whether to colour: not with `--no-color`, not when `NO_COLOR` is
/// set to anything non-empty, not when stdout is not a terminal.
pub fn color_wanted(no_color_flag: bool) -> bool {
    use std::io::IsTerminal;
    let env_off = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color_flag && !env_off && std::io::stdout().is_terminal()
}

/// Write text to stdout. A closed pipe (`dpctl watch … | head`) becomes
/// [`Error::BrokenPipe`], which exits quietly.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let r = if text.ends_with('\n') { out.write_all(text.as_bytes()) } else { writeln!(out, "{text}") };
    r.and_then(|_| out.flush()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Error::BrokenPipe
        } else {
            Error::failed(format!("cannot write to stdout: {e}"))
        }
    })
}

/// Render a value for `-o json` (pretty) or `-o yaml`.
pub fn structured<T: Serialize>(format: Format, value: &T) -> Result<String> {
    match format {
        Format::Yaml => serde_norway::to_string(value).map_err(|e| Error::failed(format!("cannot render YAML: {e}"))),
        _ => serde_json::to_string_pretty(value).map_err(|e| Error::failed(format!("cannot render JSON: {e}"))),
    }
}

/// Render a value as one compact JSON line (streams).
pub fn json_line<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::failed(format!("cannot render JSON: {e}")))
}

/// A kubectl-style table: upper-case headers, no borders, columns three spaces apart.
/// Cells are escaped ([`cell`]): a device ID holding control characters cannot misalign it.
pub fn table<S: AsRef<str>>(headers: &[&str], rows: &[Vec<S>]) -> String {
    let colour = colored::control::SHOULD_COLORIZE.should_colorize();
    let mut b = tabled::builder::Builder::default();
    b.push_record(headers.iter().map(|h| h.to_string()));
    for r in rows {
        b.push_record(r.iter().map(|c| cell(c.as_ref(), colour)));
    }
    let mut t = b.build();
    t.with(tabled::settings::Style::empty()).with(tabled::settings::Padding::new(0, 3, 0, 0));
    let s = t.to_string();
    s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// A table cell with non-printable characters escaped. With colour on, the
/// SGR sequences (`ESC [ digits ; m`) this module adds are kept.
fn cell(s: &str, colour: bool) -> String {
    if !colour || !s.contains('\u{1b}') {
        return crate::core::text::escape(s).into_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\u{1b}') {
        out.push_str(&crate::core::text::escape(&rest[..i]));
        let seq = &rest[i..];
        let body = seq[1..].strip_prefix('[').unwrap_or("");
        let n = body.find(|c: char| !(c.is_ascii_digit() || c == ';')).unwrap_or(body.len());
        if body[n..].starts_with('m') {
            out.push_str(&seq[..2 + n + 1]);
            rest = &seq[2 + n + 1..];
        } else {
            out.push_str("\\x1b");
            rest = &seq[1..];
        }
    }
    out.push_str(&crate::core::text::escape(rest));
    out
}

/// A health string, coloured when colour is on: Healthy green, Unhealthy red,
/// anything else (invalid) yellow.
pub fn health(h: &str) -> String {
    match h {
        crate::api::HEALTHY => h.green().to_string(),
        crate::api::UNHEALTHY => h.red().to_string(),
        "" => "(empty)".yellow().to_string(),
        _ => h.yellow().to_string(),
    }
}

/// PASS / WARN / FAIL, coloured.
pub fn verdict(v: &str) -> String {
    match v {
        "PASS" => v.green().to_string(),
        "WARN" => v.yellow().to_string(),
        _ => v.red().to_string(),
    }
}

/// NUMA nodes of a device-plugin topology, e.g. `0` or `0,1`; `-` for none.
pub fn numa(t: Option<&crate::api::deviceplugin::TopologyInfo>) -> String {
    match t {
        Some(t) if !t.nodes.is_empty() => t.nodes.iter().map(|n| n.id.to_string()).collect::<Vec<_>>().join(","),
        _ => "-".into(),
    }
}

/// NUMA nodes of a podresources topology.
pub fn numa_pr(t: Option<&crate::api::podresources::TopologyInfo>) -> String {
    match t {
        Some(t) if !t.nodes.is_empty() => t.nodes.iter().map(|n| n.id.to_string()).collect::<Vec<_>>().join(","),
        _ => "-".into(),
    }
}

/// A list joined by commas, `-` when empty.
pub fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_are_escaped() {
        let t = table(&["ID", "HEALTH"], &[vec!["\u{0}", "Healthy"], vec!["\u{3}\t", "Healthy"], vec!["long-id", "x"]]);
        assert!(!t.contains(|c: char| c.is_control() && c != '\n'), "{t:?}");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[1], "\\x00       Healthy");
        assert_eq!(lines[2], "\\x03\\x09   Healthy");
        // colour codes survive only when colouring, data escapes never do
        assert_eq!(cell("\u{1b}[32mHealthy\u{1b}[0m", true), "\u{1b}[32mHealthy\u{1b}[0m");
        assert_eq!(cell("\u{1b}[32mx", false), "\\x1b[32mx");
        assert_eq!(cell("a\u{1b}]0;title\u{7}", true), "a\\x1b]0;title\\x07");
    }
}
