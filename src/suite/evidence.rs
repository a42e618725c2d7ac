//! Evidence that shows the cause (pure): the lines of a plugin's log that
//! say what went wrong, ID lists that say how much was cut, and transport
//! errors in words.

/// Whether a log line reports an error: glog `E`/`F` lines, logfmt or JSON
/// `level=error|fatal`, Go panics, and the usual `ERROR`/`FATAL`/`error:` prefixes.
pub fn is_error_line(line: &str) -> bool {
    let l = line.trim_start();
    let b = l.as_bytes();
    // glog / klog: E1126 14:04:43.123456 …
    let glog = b.len() > 5 && matches!(b[0], b'E' | b'F') && b[1..5].iter().all(u8::is_ascii_digit);
    let lower = l.to_ascii_lowercase();
    glog || l.starts_with("panic:")
        || l.starts_with("fatal error:")
        || lower.contains("level=error")
        || lower.contains("level=fatal")
        || lower.contains("\"level\":\"error\"")
        || lower.contains("\"level\":\"fatal\"")
        || l.starts_with("ERROR")
        || l.starts_with("FATAL")
        || lower.starts_with("error:")
        || lower.starts_with("error ")
        || lower.contains(" error: ")
}

/// A log on one line for evidence: its error lines first (the last three),
/// then the last `tail` lines; at most `max` characters.
pub fn log_excerpt(text: &str, tail: usize, max: usize) -> String {
    let all: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let errors: Vec<usize> = all.iter().enumerate().filter(|(_, l)| is_error_line(l)).map(|(i, _)| i).collect();
    let errors = &errors[errors.len().saturating_sub(3)..];
    let from = all.len().saturating_sub(tail);
    let mut parts: Vec<String> = errors.iter().filter(|i| **i < from).map(|i| all[*i].trim().to_string()).collect();
    if !parts.is_empty() {
        parts.push("…".into());
    }
    parts.extend(all[from..].iter().map(|l| l.trim().to_string()));
    let text = parts.join(" | ");
    // Over the bound, the newest lines are the ones kept: what the process
    // said last is what explains a failure.
    let n = text.chars().count();
    let t: String = if n > max { std::iter::once('…').chain(text.chars().skip(n - max)).collect() } else { text };
    if t.is_empty() {
        "(the plugin wrote nothing)".into()
    } else {
        t
    }
}

/// At most `n` items as a list, then how many were cut: `[a, b] +11 more`.
pub fn list<T: AsRef<str>>(items: &[T], n: usize) -> String {
    let shown: Vec<&str> = items.iter().take(n).map(AsRef::as_ref).collect();
    let mut s = format!("[{}]", shown.join(", "));
    if items.len() > n {
        s.push_str(&format!(" +{} more", items.len() - n));
    }
    s
}

/// Whether a transport error means the other side went away.
pub fn is_connection_lost(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "error reading a body from connection",
        "connection reset",
        "broken pipe",
        "connection closed",
        "stream closed because of a broken pipe",
        "unexpected end of file",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// A gRPC status in words: a lost connection says so.
pub fn status_text(code: tonic::Code, message: &str) -> String {
    if is_connection_lost(message) {
        format!("the plugin closed the connection (exited?) ({code:?}: {message})")
    } else {
        format!("{code:?}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_come_before_the_stack() {
        let log = "I1126 10:00:00.1 1 main.go:10] Starting\n\
E1126 10:00:01.2 1 main.go:99] Failed to serve gpu.intel.com/i915: dial unix /var/lib/kubelet/device-plugins/kubelet.sock: connect: no such file or directory\n\
goroutine 1 [running]:\n\
main.main()\n\
\t/src/main.go:99 +0x1d\n\
exit status 1\n";
        let e = log_excerpt(log, 3, 600);
        assert!(e.starts_with("E1126") && e.contains("no such file or directory"), "{e}");
        assert!(e.ends_with("exit status 1") && !e.contains("Starting"), "{e}");
        // An error line inside the tail is not repeated.
        assert_eq!(log_excerpt("a\nlevel=error msg=x\nb", 4, 600), "a | level=error msg=x | b");
        assert_eq!(log_excerpt("", 4, 600), "(the plugin wrote nothing)");
        assert!(log_excerpt(&"x".repeat(700), 4, 600).starts_with('…'));
        let long = format!("{}\nthe last line", "y".repeat(700));
        assert!(log_excerpt(&long, 4, 600).ends_with("the last line"), "the newest line is kept");
        for l in
            ["panic: runtime error", "F0101 00:00:00 fatal", "{\"level\":\"error\",\"msg\":\"x\"}", "Error: no GPU"]
        {
            assert!(is_error_line(l), "{l}");
        }
        for l in ["I1126 ok", "Every 5s", "Errors: 0 seen"] {
            assert!(!is_error_line(l), "{l}");
        }
    }

    #[test]
    fn lists_say_what_was_cut_and_lost_connections_are_named() {
        let ids: Vec<String> = (0..16).map(|i| format!("card{i}")).collect();
        assert_eq!(list(&ids, 5), "[card0, card1, card2, card3, card4] +11 more");
        assert_eq!(list(&ids[..2], 5), "[card0, card1]");
        let t = status_text(tonic::Code::Unknown, "h2 protocol error: error reading a body from connection");
        assert!(t.starts_with("the plugin closed the connection (exited?)"), "{t}");
        assert_eq!(status_text(tonic::Code::InvalidArgument, "no such device"), "InvalidArgument: no such device");
    }
}
