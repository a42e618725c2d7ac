//! `-v`/`--verbose`: each client call's method, socket, request (JSON),
//! status and latency on stderr, like `grpcurl -v` and `crictl -D`. Set once
//! from the command line; [`crate::core::transport::call`] reports the outcome.

use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static ON: AtomicBool = AtomicBool::new(false);

/// Turn verbose call logging on or off.
pub fn set(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Whether verbose call logging is on.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The request lines: method, socket, then the request as compact JSON.
pub fn request_text<T: Serialize>(target: &Path, method: &str, req: &T) -> String {
    let json = serde_json::to_string(req).unwrap_or_else(|e| format!("(cannot render: {e})"));
    format!("> {method} {}\n> request: {json}", target.display())
}

/// The outcome line: the gRPC status code and the latency.
pub fn outcome_text(target: &Path, method: &str, code: &str, latency: Duration) -> String {
    format!("< {method} {}: {code} in {}", target.display(), crate::core::time::format_duration(latency))
}

/// Log a request about to be sent (when on).
pub fn request<T: Serialize>(target: &Path, method: &str, req: &T) {
    if on() {
        eprintln!("{}", request_text(target, method, req));
    }
}

/// Log a call's outcome (when on).
pub fn outcome(target: &Path, method: &str, code: &str, latency: Duration) {
    if on() {
        eprintln!("{}", outcome_text(target, method, code, latency));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_method_socket_request_status_latency() {
        let t = request_text(Path::new("/x/p.sock"), "Allocate", &serde_json::json!({"a": [1]}));
        assert_eq!(t, "> Allocate /x/p.sock\n> request: {\"a\":[1]}");
        let o = outcome_text(Path::new("/x/p.sock"), "Allocate", "OK", Duration::from_millis(3));
        assert!(o.starts_with("< Allocate /x/p.sock: OK in 3"), "{o}");
    }
}
