//! Issue 11 (hardening): every bad input and hostile peer the fuzzing run
//! found, reproduced against the real binary.

use crate::support::*;

/// Text a terminal or `grep` would choke on: control characters other than newline.
fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}

/// ARM's smarter-device-manager uses IDs "\x00".."\x03": probe warns, tables
/// and diffs show them escaped and aligned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_character_ids_are_escaped_and_probe_warns() {
    let d = tmp();
    let sock = d.path().join("p.sock");
    let devices = (0..4).map(|i| dev(&char::from(i as u8).to_string(), "Healthy", Some(0))).collect();
    let _p = start_plugin(&sock, devices, Behaviour::default()).await;

    let r = dpctl(&["probe", s(&sock)]).await;
    r.expect_code(0);
    assert!(!has_control(&r.stdout), "raw control characters in {:?}", r.stdout);
    let warn = r.stdout.lines().find(|l| l.starts_with("WARN") && l.contains("devices")).unwrap_or_else(|| {
        panic!("no WARN for the devices check:\n{}", r.stdout);
    });
    assert!(warn.contains("\"\\x00\" is not printable ASCII"), "{warn}");

    let r = dpctl(&["watch", s(&sock), "--count", "1"]).await;
    r.expect_code(0);
    assert!(!has_control(&r.stdout), "raw control characters in {:?}", r.stdout);
    let rows: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("\\x0")).collect();
    assert_eq!(rows.len(), 4, "{}", r.stdout);
    let col = |l: &str| l.find("Healthy").unwrap();
    let header = r.stdout.lines().next().unwrap();
    assert!(rows.iter().all(|l| col(l) == header.find("HEALTH").unwrap()), "misaligned:\n{}", r.stdout);
}
