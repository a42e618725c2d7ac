//! The event log of the long-running roles (serve, mock-kubelet): one line
//! per event on stdout, human-readable or JSON lines (`--log-format json`).
//! Writing never fails the caller: a closed stdout only silences the log.

use serde_json::{Map, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `TIME EVENT key=value …`
    #[default]
    Human,
    /// One JSON object per line: `{"time":…,"event":…,…}`
    Json,
}

/// A cheap-to-clone event logger.
#[derive(Debug, Clone)]
pub struct Logger {
    format: LogFormat,
    quiet: Arc<AtomicBool>,
    file: Option<Arc<std::sync::Mutex<std::fs::File>>>,
}

impl Logger {
    /// A logger writing `format` lines to stdout.
    pub fn new(format: LogFormat) -> Self {
        Logger { format, quiet: Arc::new(AtomicBool::new(false)), file: None }
    }

    /// A logger appending `format` lines to a file.
    pub fn to_file(format: LogFormat, path: &std::path::Path) -> crate::core::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .mode(crate::core::files::FILE_MODE)
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| crate::core::Error::io(path, "cannot open log file", &e))?;
        Ok(Logger { format, quiet: Arc::new(AtomicBool::new(false)), file: Some(Arc::new(std::sync::Mutex::new(f))) })
    }

    /// A logger that writes nothing (benchmarks, in-process use).
    pub fn silent() -> Self {
        Logger { format: LogFormat::Human, quiet: Arc::new(AtomicBool::new(true)), file: None }
    }

    /// Log one event with its fields.
    pub fn event(&self, event: &str, fields: &[(&str, Value)]) {
        if self.quiet.load(Ordering::Relaxed) {
            return;
        }
        let line = self.format_line(event, fields);
        let ok = match &self.file {
            Some(f) => match f.lock() {
                Ok(mut f) => f.write_all(line.as_bytes()).is_ok(),
                Err(_) => false,
            },
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(line.as_bytes()).and_then(|_| out.flush()).is_ok()
            }
        };
        if !ok {
            self.quiet.store(true, Ordering::Relaxed);
        }
    }

    fn format_line(&self, event: &str, fields: &[(&str, Value)]) -> String {
        let time = crate::core::time::now_rfc3339();
        match self.format {
            LogFormat::Json => {
                let mut m = Map::new();
                m.insert("time".into(), Value::String(time));
                m.insert("event".into(), Value::String(event.into()));
                for (k, v) in fields {
                    m.insert((*k).into(), v.clone());
                }
                let mut s = Value::Object(m).to_string();
                s.push('\n');
                s
            }
            LogFormat::Human => {
                let mut s = format!("{time} {event}");
                for (k, v) in fields {
                    let v = match v {
                        Value::String(s) => quote_if_needed(s),
                        Value::Array(a) => a
                            .iter()
                            .map(|x| match x {
                                Value::String(s) => crate::core::text::escape(s).into_owned(),
                                o => o.to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(","),
                        o => o.to_string(),
                    };
                    s.push_str(&format!(" {k}={v}"));
                }
                s.push('\n');
                s
            }
        }
    }
}

/// Quote a value that holds whitespace or quotes; escape what is not printable
/// either way, so a log line stays one line of text.
fn quote_if_needed(s: &str) -> String {
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"') {
        format!("{s:?}")
    } else {
        crate::core::text::escape(s).into_owned()
    }
}

/// A duration as a log field (milliseconds, 3 decimals).
pub fn ms(d: std::time::Duration) -> Value {
    Value::from(crate::core::time::millis(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_human_and_json() {
        let h = Logger::new(LogFormat::Human)
            .format_line("allocate", &[("ids", json!(["a", "b"])), ("msg", json!("two words"))]);
        assert!(h.ends_with(" allocate ids=a,b msg=\"two words\"\n"), "{h}");
        let j = Logger::new(LogFormat::Json).format_line("allocate", &[("latencyMs", json!(1.5))]);
        let v: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["event"], "allocate");
        assert_eq!(v["latencyMs"], 1.5);
    }

    #[test]
    fn human_lines_escape_control_characters() {
        let h = Logger::new(LogFormat::Human)
            .format_line("allocate", &[("ids", json!(["\u{0}", "\u{3}"])), ("id", json!("a\u{1}"))]);
        assert!(h.ends_with(" allocate ids=\\x00,\\x03 id=a\\x01\n"), "{h}");
        assert!(!h.trim_end().contains(|c: char| c.is_control()), "{h:?}");
    }
}
