//! Output: `-o table` (tabled, with Healthy green / Unhealthy red unless
//! colour is off; `--no-headers` drops the header line), `-o json`
//! (protojson field names; pretty for one object, one compact object per line
//! for streams) and `-o yaml`.
//!
//! One rule for structured output, applied here and nowhere else: a field at
//! its default value (null, false, "", [], {}) is omitted, as protojson and
//! grpcurl do, unless `--emit-defaults` asks for the full shape. Numbers are
//! kept (a count of 0 is an answer; 64-bit IDs are protojson strings anyway).

use crate::core::{Error, Result};
use colored::Colorize;
use serde::Serialize;
use std::io::Write;
use std::sync::OnceLock;

/// Process-wide rendering options, set once from the global flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Keep fields at their default value in JSON and YAML.
    pub emit_defaults: bool,
    /// Tables without their header line.
    pub no_headers: bool,
}

static OPTIONS: OnceLock<Options> = OnceLock::new();

/// Set the rendering options (once, from the command line; later calls are ignored).
pub fn configure(o: Options) {
    let _ = OPTIONS.set(o);
}

/// The rendering options in force.
pub fn options() -> Options {
    OPTIONS.get().copied().unwrap_or_default()
}

/// Whether a JSON value is a protojson default (omitted unless `--emit-defaults`).
fn is_default(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Drop every object field whose value is a default, depth first (an object
/// emptied that way is dropped too). List elements are kept, so positions
/// still mean something (container_responses[1] stays the second container).
pub fn omit_defaults(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, omit_defaults(v))).filter(|(_, v)| !is_default(v)).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(omit_defaults).collect()),
        other => other,
    }
}

/// The value as structured output shows it: defaults omitted unless `emit_defaults`.
pub fn shaped<T: Serialize>(value: &T, emit_defaults: bool) -> Result<serde_json::Value> {
    let v = serde_json::to_value(value).map_err(|e| Error::failed(format!("cannot render JSON: {e}")))?;
    Ok(if emit_defaults { v } else { omit_defaults(v) })
}

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
    let value = shaped(value, options().emit_defaults)?;
    match format {
        Format::Yaml => serde_norway::to_string(&value).map_err(|e| Error::failed(format!("cannot render YAML: {e}"))),
        _ => serde_json::to_string_pretty(&value).map_err(|e| Error::failed(format!("cannot render JSON: {e}"))),
    }
}

/// Render a value as one compact JSON line (streams).
pub fn json_line<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(&shaped(value, options().emit_defaults)?)
        .map_err(|e| Error::failed(format!("cannot render JSON: {e}")))
}

/// A kubectl-style table: upper-case headers, no borders, columns three spaces apart.
/// Cells are escaped ([`cell`]): a device ID holding control characters cannot misalign it.
pub fn table<S: AsRef<str>>(headers: &[&str], rows: &[Vec<S>]) -> String {
    table_with(headers, rows, options().no_headers)
}

/// [`table`] with the header line shown or not.
pub fn table_with<S: AsRef<str>>(headers: &[&str], rows: &[Vec<S>], no_headers: bool) -> String {
    let colour = colored::control::SHOULD_COLORIZE.should_colorize();
    let mut b = tabled::builder::Builder::default();
    if !no_headers {
        b.push_record(headers.iter().map(|h| h.to_string()));
    }
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

/// A PASS/WARN/FAIL report of checks (`probe`, `dra probe`): the table, or `-o json|yaml`.
pub mod checks {
    use super::{emit, structured, table, verdict, Format};
    use crate::core::time::format_duration;
    use crate::core::{Error, Result};
    use serde::Serialize;
    use std::time::Duration;

    /// The verdict of one check.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Status {
        /// Fine.
        Pass,
        /// Works, but something is off.
        Warn,
        /// Broken.
        Fail,
    }

    /// One check's result.
    #[derive(Debug, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Check {
        /// What was checked.
        pub name: &'static str,
        /// Its verdict.
        pub status: Status,
        /// The latency of the call behind it, in milliseconds.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub latency_ms: Option<f64>,
        /// What was seen.
        pub detail: String,
    }

    /// The whole report, as `-o json` prints it.
    #[derive(Debug, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Report {
        /// The socket checked.
        pub socket: String,
        /// The worst verdict.
        pub result: Status,
        /// Every check in order.
        pub checks: Vec<Check>,
    }

    /// Print the report; an error naming the failed checks when any failed.
    pub fn report(format: Format, socket: String, checks: Vec<Check>) -> Result<()> {
        let result = checks.iter().map(|c| c.status).max_by_key(|s| *s as u8).unwrap_or(Status::Pass);
        let mut failed: Vec<&str> = checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.name).collect();
        failed.dedup();
        match format {
            Format::Table => {
                let rows: Vec<Vec<String>> = checks
                    .iter()
                    .map(|c| {
                        let v = match c.status {
                            Status::Pass => "PASS",
                            Status::Warn => "WARN",
                            Status::Fail => "FAIL",
                        };
                        let lat = c
                            .latency_ms
                            .map(|ms| format_duration(Duration::from_secs_f64(ms / 1e3)))
                            .unwrap_or_else(|| "-".into());
                        vec![verdict(v), c.name.to_string(), lat, c.detail.clone()]
                    })
                    .collect();
                emit(&table(&["RESULT", "CHECK", "LATENCY", "DETAIL"], &rows))?;
            }
            f => emit(&structured(f, &Report { socket: socket.clone(), result, checks })?)?,
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::failed(format!("{socket}: probe failed: {}", failed.join(", "))))
        }
    }
}

/// How long ago `t` was, as kubectl prints ages (`45s`, `3m20s`, `12m`,
/// `5h10m`, `30h`, `3d4h`, `40d`, `2y10d`); `now` is passed in (pure).
pub fn age(t: std::time::SystemTime, now: std::time::SystemTime) -> String {
    let s = now.duration_since(t).unwrap_or_default().as_secs();
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{d}d"),
            r => format!("{d}d{r}h"),
        },
        _ if d < 365 * 2 => format!("{d}d"),
        _ => match d % 365 {
            0 => format!("{}y", d / 365),
            r => format!("{}y{r}d", d / 365),
        },
    }
}

/// A Unix time in seconds (a protocol's `last_updated_time`) as an age
/// (see [`age`]); `-` when it is not set (0 or negative).
pub fn epoch_age(secs: i64, now: std::time::SystemTime) -> String {
    match u64::try_from(secs) {
        Ok(s) if s > 0 => age(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s), now),
        _ => "-".into(),
    }
}

/// Indent every line of a table by three spaces (the demos' walkthroughs).
pub fn indent(s: &str) -> String {
    s.lines().map(|l| format!("   {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_omitted_and_kept_on_request() {
        let v = json!({
            "devices": [{"ID": "a", "health": "Healthy", "topology": null}],
            "envs": {}, "cdiDevices": [], "annotations": {"k": ""}, "preStartRequired": false,
            "healthy": 0, "numa": {"nodes": [{"ID": "0"}]}, "name": ""
        });
        let out = omit_defaults(v.clone());
        assert_eq!(
            out,
            json!({"devices": [{"ID": "a", "health": "Healthy"}], "healthy": 0, "numa": {"nodes": [{"ID": "0"}]}})
        );
        assert_eq!(shaped(&v, true).unwrap(), v);
        // list positions survive: an empty element stays
        assert_eq!(omit_defaults(json!({"c": [{}, {"a": 1}]})), json!({"c": [{}, {"a": 1}]}));
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        use std::time::{Duration, UNIX_EPOCH};
        let now = UNIX_EPOCH + Duration::from_secs(1_795_725_600);
        let ago = |s: u64| age(now - Duration::from_secs(s), now);
        let got: Vec<String> = [0, 45, 200, 240, 1500, 3 * 3600 + 600, 5 * 3600, 30 * 3600, 76 * 3600, 40 * 86_400]
            .iter()
            .map(|s| ago(*s))
            .collect();
        assert_eq!(got, ["0s", "45s", "3m20s", "4m", "25m", "3h10m", "5h", "30h", "3d4h", "40d"]);
        assert_eq!(ago(800 * 86_400), "2y70d");
        assert_eq!(age(now + Duration::from_secs(5), now), "0s", "a clock ahead is no negative age");
        assert_eq!(epoch_age(1_795_725_570, now), "30s");
        assert_eq!((epoch_age(0, now), epoch_age(-1, now)), ("-".to_string(), "-".to_string()));
    }

    #[test]
    fn tables_can_drop_their_header() {
        let rows = vec![vec!["a", "b"]];
        assert_eq!(table_with(&["X", "Y"], &rows, false).lines().count(), 2);
        assert_eq!(table_with(&["X", "Y"], &rows, true), "a   b");
    }

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
