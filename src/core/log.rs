//! The event log of the long-running roles (serve, replay, record,
//! mock-kubelet): one line per event, human-readable or JSON lines
//! (`--log-format json`), on stdout or in a file.
//!
//! The log is off the RPC's critical path. [`Logger::event`] only stamps the
//! time and queues the event; one writer thread per log formats the queued
//! lines and writes them in batches (one `write` per batch, not per line).
//! The queue is bounded: when the output cannot keep up (a slow terminal, a
//! stdout pipe nobody reads, a blocked disk), new lines are dropped — the
//! caller never waits — and a `log-dropped lines=N` line reports them once
//! the writer catches up. A closed output silences the log; nothing fails.
//! [`Logger::close`] (or [`flush_all`] at process exit) writes every queued
//! line before returning, bounded by a timeout so a blocked stdout cannot
//! hold up the exit.

use serde_json::{json, Value};
use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

/// Queued lines per log before new ones are dropped.
pub const DEFAULT_CAPACITY: usize = 8192;
/// After writing a batch the writer waits this long before taking the next
/// one, so a busy server's lines go out in large batches and its RPCs never
/// have to wake the writer (they only do when it is idle).
const LINGER: Duration = Duration::from_millis(5);

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

/// One event, as queued: formatting happens on the writer thread.
struct Pending {
    time: SystemTime,
    event: Cow<'static, str>,
    fields: Fields,
}

/// An event's fields as the caller gave them (moved, not copied, when the
/// keys are static).
enum Fields {
    Static(Vec<(&'static str, Value)>),
    Owned(Vec<(String, Value)>),
}

#[derive(Default)]
struct State {
    queue: Vec<Pending>,
    /// The writer is waiting for a line (producers must wake it).
    parked: bool,
    /// No more lines will come: write what is queued, then stop.
    closing: bool,
    /// The writer has written everything and stopped.
    done: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer (a line while parked, or closing).
    wake: Condvar,
    /// Wakes whoever waits in [`Logger::close`].
    finished: Condvar,
    capacity: usize,
    dropped: AtomicU64,
    written: AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the queue inconsistent
        // (every critical section is a push, a swap or a flag): keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn close(&self) {
        let mut st = self.lock();
        st.closing = true;
        drop(st);
        self.wake.notify_one();
    }

    /// Close and wait until every queued line is written or `deadline` passes.
    fn close_and_wait(&self, deadline: Instant) -> bool {
        self.close();
        let mut st = self.lock();
        while !st.done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = match self.finished.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        true
    }
}

/// Closes the log when the last [`Logger`] clone goes away (the writer then
/// writes what is queued and stops on its own).
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// Every open log in the process, so [`flush_all`] can drain them at exit.
static LOGS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// A cheap-to-clone event logger.
#[derive(Clone)]
pub struct Logger {
    inner: Option<Arc<Handle>>,
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger").field("silent", &self.inner.is_none()).finish()
    }
}

impl Logger {
    /// A logger writing `format` lines to stdout.
    pub fn new(format: LogFormat) -> Self {
        Self::with_sink(format, Box::new(std::io::stdout()), DEFAULT_CAPACITY)
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
        Ok(Self::with_sink(format, Box::new(f), DEFAULT_CAPACITY))
    }

    /// A logger writing `format` lines to `sink` from its own thread, queueing
    /// at most `capacity` lines. If the thread cannot be started the logger
    /// is silent.
    pub fn with_sink(format: LogFormat, sink: Box<dyn Write + Send>, capacity: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            finished: Condvar::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        let s = shared.clone();
        let started = std::thread::Builder::new().name("dpctl-log".into()).spawn(move || writer(&s, format, sink));
        if started.is_err() {
            return Logger::silent();
        }
        if let Ok(mut logs) = LOGS.lock() {
            logs.retain(|w| w.strong_count() > 0);
            logs.push(Arc::downgrade(&shared));
        }
        Logger { inner: Some(Arc::new(Handle { shared })) }
    }

    /// A logger that writes nothing (benchmarks, in-process use).
    pub fn silent() -> Self {
        Logger { inner: None }
    }

    /// Log one event with its fields. Never blocks on the output.
    pub fn event(&self, event: &str, fields: &[(&str, Value)]) {
        if self.inner.is_none() {
            return;
        }
        let fields = fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        self.push(Cow::Owned(event.to_string()), Fields::Owned(fields));
    }

    /// Log a typed event: its serde form (an object whose `event` field names
    /// it) is the line, so the line and the value hold the same data.
    pub fn record<T: serde::Serialize + ?Sized>(&self, value: &T) {
        if self.inner.is_none() {
            return;
        }
        let Ok(Value::Object(mut m)) = serde_json::to_value(value) else { return };
        let name = match m.shift_remove("event") {
            Some(Value::String(s)) => s,
            _ => return,
        };
        self.push(Cow::Owned(name), Fields::Owned(m.into_iter().collect()));
    }

    /// Log one event, taking its fields as they are (no copies: for the
    /// per-RPC lines).
    pub fn event_owned(&self, event: &'static str, fields: Vec<(&'static str, Value)>) {
        if self.inner.is_none() {
            return;
        }
        self.push(Cow::Borrowed(event), Fields::Static(fields));
    }

    fn push(&self, event: Cow<'static, str>, fields: Fields) {
        let Some(h) = &self.inner else { return };
        let s = &h.shared;
        let p = Pending { time: SystemTime::now(), event, fields };
        let mut st = s.lock();
        if st.done || st.queue.len() >= s.capacity {
            drop(st);
            s.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        st.queue.push(p);
        let wake = std::mem::take(&mut st.parked);
        drop(st);
        if wake {
            s.wake.notify_one();
        }
    }

    /// Lines dropped so far because the queue was full (or the log closed).
    pub fn dropped(&self) -> u64 {
        self.inner.as_ref().map_or(0, |h| h.shared.dropped.load(Ordering::Relaxed))
    }

    /// Lines written so far.
    pub fn written(&self) -> u64 {
        self.inner.as_ref().map_or(0, |h| h.shared.written.load(Ordering::Relaxed))
    }

    /// Stop accepting lines and wait (at most `timeout`) until every queued
    /// line is written. Returns false if the output did not drain in time.
    pub fn close(&self, timeout: Duration) -> bool {
        match &self.inner {
            Some(h) => h.shared.close_and_wait(Instant::now() + timeout),
            None => true,
        }
    }
}

/// Close every log in the process and wait (at most `timeout` in all) until
/// their queued lines are written: call once, at exit.
pub fn flush_all(timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let logs: Vec<Arc<Shared>> = match LOGS.lock() {
        Ok(mut l) => l.drain(..).filter_map(|w| w.upgrade()).collect(),
        Err(_) => return,
    };
    for s in logs {
        s.close_and_wait(deadline);
    }
}

/// The writer thread: take the queued lines, format them, write them in one
/// batch; report drops; park when idle; stop once closed and drained.
fn writer(s: &Shared, format: LogFormat, mut sink: Box<dyn Write + Send>) {
    let mut batch = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut reported = 0u64;
    let mut broken = false;
    let mut clock = Clock::default();
    loop {
        let last = {
            let mut st = s.lock();
            while st.queue.is_empty() && !st.closing {
                st.parked = true;
                st = s.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.parked = false;
            std::mem::swap(&mut st.queue, &mut batch);
            st.closing
        };
        let n = batch.len() as u64;
        if !broken {
            buf.clear();
            for p in batch.drain(..) {
                let (b, c, t, e) = (&mut buf, &mut clock, p.time, &p.event);
                match &p.fields {
                    Fields::Static(f) => format_line(b, c, format, t, e, f.iter().map(|(k, v)| (*k, v))),
                    Fields::Owned(f) => format_line(b, c, format, t, e, f.iter().map(|(k, v)| (k.as_str(), v))),
                }
            }
            let dropped = s.dropped.load(Ordering::Relaxed);
            if dropped > reported {
                let lost = json!(dropped - reported);
                format_line(
                    &mut buf,
                    &mut clock,
                    format,
                    SystemTime::now(),
                    "log-dropped",
                    [("lines", &lost)].into_iter(),
                );
                reported = dropped;
            }
            if !buf.is_empty() {
                if sink.write_all(&buf).and_then(|_| sink.flush()).is_ok() {
                    s.written.fetch_add(n, Ordering::Relaxed);
                } else {
                    broken = true;
                }
            }
        }
        batch.clear();
        if last {
            let mut st = s.lock();
            if st.queue.is_empty() {
                st.done = true;
                drop(st);
                s.finished.notify_all();
                return;
            }
            continue;
        }
        if n > 0 {
            std::thread::sleep(LINGER);
        }
    }
}

/// Formats line timestamps, reusing the `YYYY-MM-DDTHH:MM:SS` part while
/// the second stays the same (most lines of a batch share it).
#[derive(Default)]
struct Clock {
    second: Option<u64>,
    prefix: String,
}

impl Clock {
    fn stamp(&mut self, out: &mut Vec<u8>, t: SystemTime) {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        if self.second != Some(d.as_secs()) {
            let full = crate::core::time::rfc3339(t); // …:SS.mmmZ
            self.prefix = full.get(..full.len().saturating_sub(5)).unwrap_or_default().to_string();
            self.second = Some(d.as_secs());
        }
        out.extend_from_slice(self.prefix.as_bytes());
        let ms = d.subsec_millis();
        out.extend_from_slice(&[
            b'.',
            b'0' + (ms / 100) as u8,
            b'0' + (ms / 10 % 10) as u8,
            b'0' + (ms % 10) as u8,
            b'Z',
        ]);
    }
}

/// Append one formatted line to `out`.
fn format_line<'a>(
    out: &mut Vec<u8>,
    clock: &mut Clock,
    format: LogFormat,
    time: SystemTime,
    event: &str,
    fields: impl Iterator<Item = (&'a str, &'a Value)>,
) {
    // Writing into a Vec cannot fail: the results below are ignored.
    match format {
        LogFormat::Json => {
            out.extend_from_slice(b"{\"time\":\"");
            clock.stamp(out, time);
            out.extend_from_slice(b"\",\"event\":");
            let _ = serde_json::to_writer(&mut *out, event);
            for (k, v) in fields {
                out.push(b',');
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                let _ = serde_json::to_writer(&mut *out, v);
            }
            out.push(b'}');
        }
        LogFormat::Human => {
            clock.stamp(out, time);
            out.push(b' ');
            out.extend_from_slice(event.as_bytes());
            for (k, v) in fields {
                out.push(b' ');
                out.extend_from_slice(k.as_bytes());
                out.push(b'=');
                match v {
                    Value::String(s) => push_quoted_if_needed(out, s),
                    Value::Array(a) => {
                        for (i, x) in a.iter().enumerate() {
                            if i > 0 {
                                out.push(b',');
                            }
                            match x {
                                Value::String(s) => out.extend_from_slice(crate::core::text::escape(s).as_bytes()),
                                o => {
                                    let _ = serde_json::to_writer(&mut *out, o);
                                }
                            }
                        }
                    }
                    o => {
                        let _ = serde_json::to_writer(&mut *out, o);
                    }
                }
            }
        }
    }
    out.push(b'\n');
}

/// Quote a value that holds whitespace or quotes; escape what is not printable
/// either way, so a log line stays one line of text.
fn push_quoted_if_needed(out: &mut Vec<u8>, s: &str) {
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"') {
        let _ = write!(out, "{s:?}");
    } else {
        out.extend_from_slice(crate::core::text::escape(s).as_bytes());
    }
}

/// A duration as a log field (milliseconds, 3 decimals).
pub fn ms(d: std::time::Duration) -> Value {
    Value::from(crate::core::time::millis(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn line(format: LogFormat, event: &str, fields: &[(&str, Value)]) -> String {
        let mut out = Vec::new();
        format_line(
            &mut out,
            &mut Clock::default(),
            format,
            SystemTime::now(),
            event,
            fields.iter().map(|(k, v)| (*k, v)),
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn formats_human_and_json() {
        let h = line(LogFormat::Human, "allocate", &[("ids", json!(["a", "b"])), ("msg", json!("two words"))]);
        assert!(h.ends_with(" allocate ids=a,b msg=\"two words\"\n"), "{h}");
        let j = line(LogFormat::Json, "allocate", &[("latencyMs", json!(1.5))]);
        let v: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["event"], "allocate");
        assert_eq!(v["latencyMs"], 1.5);
        let t = v["time"].as_str().unwrap();
        assert_eq!((t.len(), &t[10..11], &t[19..20], &t[23..]), (24, "T", ".", "Z"), "{t}");
        let q = line(LogFormat::Json, "x\"y", &[("a\nb", json!("\"quoted\""))]);
        let v: Value = serde_json::from_str(&q).unwrap();
        assert_eq!((v["event"].as_str(), v["a\nb"].as_str()), (Some("x\"y"), Some("\"quoted\"")));
    }

    #[test]
    fn timestamps_reuse_the_second_but_not_the_millis() {
        let mut c = Clock::default();
        let t0 = std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_007);
        let mut out = Vec::new();
        for t in [t0, t0 + Duration::from_millis(120), t0 + Duration::from_millis(1000)] {
            c.stamp(&mut out, t);
            out.push(b' ');
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "2023-11-14T22:13:20.007Z 2023-11-14T22:13:20.127Z 2023-11-14T22:13:21.007Z "
        );
    }

    /// An output that holds every write until released, telling the test
    /// when a write has started.
    struct Gate {
        entered: mpsc::Sender<()>,
        open: Arc<(Mutex<bool>, Condvar)>,
        out: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let _ = self.entered.send(());
            let (m, c) = &*self.open;
            let mut open = m.lock().unwrap();
            while !*open {
                open = c.wait(open).unwrap();
            }
            self.out.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Gated {
        log: Logger,
        entered: mpsc::Receiver<()>,
        open: Arc<(Mutex<bool>, Condvar)>,
        out: Arc<Mutex<Vec<u8>>>,
    }

    fn gated(capacity: usize) -> Gated {
        let (tx, entered) = mpsc::channel();
        let open = Arc::new((Mutex::new(false), Condvar::new()));
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Gate { entered: tx, open: open.clone(), out: out.clone() };
        Gated { log: Logger::with_sink(LogFormat::Json, Box::new(sink), capacity), entered, open, out }
    }

    impl Gated {
        fn release(&self) {
            *self.open.0.lock().unwrap() = true;
            self.open.1.notify_all();
        }
        fn lines(&self) -> Vec<Value> {
            let out = self.out.lock().unwrap();
            String::from_utf8_lossy(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
        }
    }

    /// Run `f` on another thread; fail if it has not returned within 30 s.
    fn returns(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("the call blocked on the log's output");
    }

    #[test]
    fn a_blocked_output_never_blocks_the_caller_and_close_flushes_every_line() {
        let g = gated(1000);
        g.log.event("first", &[("n", json!(0))]);
        g.entered.recv_timeout(Duration::from_secs(30)).unwrap(); // the writer is now stuck in write()
        let log = g.log.clone();
        returns(move || {
            for i in 1..=500 {
                log.event_owned("call", vec![("n", json!(i))]);
            }
        });
        assert_eq!(g.log.written(), 0);
        g.release();
        assert!(g.log.close(Duration::from_secs(30)), "close did not drain the queue");
        let lines = g.lines();
        assert_eq!(lines.len(), 501, "every queued line is written on close");
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["n"], i, "lines keep their order");
        }
        assert_eq!(g.log.dropped(), 0);
    }

    #[test]
    fn a_full_queue_drops_lines_and_reports_how_many() {
        let g = gated(4);
        g.log.event("first", &[]);
        g.entered.recv_timeout(Duration::from_secs(30)).unwrap();
        let log = g.log.clone();
        returns(move || {
            for i in 0..10 {
                log.event("call", &[("n", json!(i))]);
            }
        });
        assert_eq!(g.log.dropped(), 6, "4 lines fit the queue, 6 are dropped");
        g.release();
        assert!(g.log.close(Duration::from_secs(30)));
        let lines = g.lines();
        let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(events, ["first", "call", "call", "call", "call", "log-dropped"], "{lines:?}");
        assert_eq!(lines[4]["n"], 3);
        assert_eq!(lines[5]["lines"], 6);
    }

    #[test]
    fn close_gives_up_on_an_output_that_never_drains() {
        let g = gated(10);
        g.log.event("stuck", &[]);
        g.entered.recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(!g.log.close(Duration::from_millis(50)), "close reports that lines were left unwritten");
        g.release(); // let the writer thread finish
    }

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_output_silences_the_log() {
        let log = Logger::with_sink(LogFormat::Human, Box::new(Closed), 16);
        let l = log.clone();
        returns(move || {
            for i in 0..100 {
                l.event("call", &[("n", json!(i))]);
            }
        });
        assert!(log.close(Duration::from_secs(30)));
        assert_eq!(log.written(), 0);
    }

    #[test]
    fn flush_all_drains_every_open_log() {
        let out = Arc::new(Mutex::new(Vec::new()));
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log = Logger::with_sink(LogFormat::Human, Box::new(Shared(out.clone())), 100_000);
        for i in 0..20_000 {
            log.event("call", &[("n", json!(i))]);
        }
        flush_all(Duration::from_secs(30));
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 20_000);
        assert!(text.lines().last().unwrap().ends_with(" call n=19999"));
    }

    #[test]
    fn human_lines_escape_control_characters() {
        let h = line(LogFormat::Human, "allocate", &[("ids", json!(["\u{0}", "\u{3}"])), ("id", json!("a\u{1}"))]);
        assert!(h.ends_with(" allocate ids=\\x00,\\x03 id=a\\x01\n"), "{h}");
        assert!(!h.trim_end().contains(|c: char| c.is_control()), "{h:?}");
    }
}
