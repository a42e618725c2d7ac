//! The suite's output, decided here without I/O: one plain line per
//! scenario (with the evidence of a failure under it), the summary, the JSON
//! document and JUnit XML in the shape GitHub's and GitLab's renderers read
//! (`testsuites` > `testsuite` per group > `testcase` with `failure` or
//! `skipped`; a scenario not run is `skipped` with the reason, a warning a
//! passed `testcase` with the warning in `system-out`).

use super::{Record, Verdict};
use serde::Serialize;
use std::time::Duration;

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// The word shown for a verdict.
pub fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "PASS",
        Verdict::Fail => "FAIL",
        Verdict::Warn => "WARN",
        Verdict::Skip => "SKIP",
        Verdict::NotRun => "NOT-RUN",
    }
}

/// The width of the ID column for `id`: the longest ID of the table it is
/// in (the device-plugin or the DRA catalog), so every line of a run lines up.
fn id_width(id: &str) -> usize {
    let table: &[super::catalog::Scenario] =
        if id.starts_with("DRA-") { super::dra::SCENARIOS } else { super::catalog::SCENARIOS };
    table.iter().map(|s| s.id.len()).max().unwrap_or(0).max(id.len())
}

/// The plain line(s) for one finished scenario.
pub fn line(r: &Record) -> String {
    let verdict = word(r.result);
    let mut s = format!("{verdict}  {:<w$} {:>7}  {}", r.id, secs(r.duration), r.title, w = id_width(&r.id));
    if !r.detail.is_empty() {
        s.push_str(&format!(" — {}", r.detail));
    }
    if let Some(e) = &r.evidence {
        s.push_str(&format!(
            "\n      rpc:    {}\n      answer: {}\n      rule:   {} ({})\n      fix:    {}",
            e.rpc, e.answer, r.rule, r.source, e.fix
        ));
        if let Some(l) = &e.log {
            s.push_str(&format!("\n      log:    {l}"));
        }
    }
    s
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Passed with a warning.
    pub warned: usize,
    /// Skipped.
    pub skipped: usize,
    /// Not run because of an earlier root-cause failure.
    pub not_run: usize,
}

/// Count the verdicts.
pub fn totals(records: &[Record]) -> Totals {
    let mut t = Totals::default();
    for r in records {
        match r.result {
            Verdict::Pass => t.passed += 1,
            Verdict::Fail => t.failed += 1,
            Verdict::Warn => t.warned += 1,
            Verdict::Skip => t.skipped += 1,
            Verdict::NotRun => t.not_run += 1,
        }
    }
    t
}

/// The last line of the table.
pub fn summary(records: &[Record], took: Duration) -> String {
    let t = totals(records);
    let mut s = format!("{} passed, {} failed", t.passed, t.failed);
    if t.warned > 0 {
        s.push_str(&format!(", {} warned", t.warned));
    }
    s.push_str(&format!(", {} skipped", t.skipped));
    if t.not_run > 0 {
        s.push_str(&format!(", {} not run", t.not_run));
    }
    format!("{s} in {}", secs(took))
}

/// The `-o json` document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<'a> {
    /// The plugin command (or the socket with --socket).
    pub plugin: &'a [String],
    /// Counts.
    #[serde(flatten)]
    pub totals: Totals,
    /// Wall time of the run, milliseconds.
    pub duration_ms: u64,
    /// The kubelet versions run against (`--kubelet-version`), in order.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub kubelet_versions: &'a [String],
    /// One entry per scenario run.
    pub scenarios: &'a [Record],
}

/// Escape text for XML attributes and content; drop characters XML 1.0 forbids.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The JUnit testsuite a record belongs to: its kubelet version's when the
/// suite ran against several, else its group's.
fn suite_of(r: &Record) -> String {
    match &r.kubelet_version {
        Some(v) => format!("kubelet {v}"),
        None => r.group.clone(),
    }
}

/// JUnit XML: one testsuite per group (per kubelet version with several
/// `--kubelet-version`s), in first-seen order.
pub fn junit(records: &[Record], took: Duration) -> String {
    let t = totals(records);
    let mut groups: Vec<String> = Vec::new();
    for r in records {
        let g = suite_of(r);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"dpctl test\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">\n",
        records.len(),
        t.failed,
        t.skipped + t.not_run,
        took.as_secs_f64()
    ));
    for g in &groups {
        let rs: Vec<&Record> = records.iter().filter(|r| &suite_of(r) == g).collect();
        let gt = totals(&rs.iter().map(|r| (*r).clone()).collect::<Vec<_>>());
        let time: f64 = rs.iter().map(|r| r.duration.as_secs_f64()).sum();
        x.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{time:.3}\">\n",
            xml_escape(g),
            rs.len(),
            gt.failed,
            gt.skipped + gt.not_run
        ));
        for r in rs {
            let open = format!(
                "    <testcase classname=\"dpctl.{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(&r.group),
                xml_escape(&format!("{} {}", r.id, r.title)),
                r.duration.as_secs_f64()
            );
            match (r.result, &r.evidence) {
                (Verdict::Fail, Some(e)) => {
                    let mut body = format!(
                        "rpc: {}\nanswer: {}\nrule: {} ({})\nfix: {}",
                        e.rpc, e.answer, r.rule, r.source, e.fix
                    );
                    if let Some(l) = &e.log {
                        body.push_str(&format!("\nlog: {l}"));
                    }
                    x.push_str(&format!(
                        "{open}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
                        xml_escape(&e.answer),
                        xml_escape(r.id.as_str()),
                        xml_escape(&body)
                    ));
                }
                (Verdict::Fail, None) => {
                    x.push_str(&format!("{open}>\n      <failure message=\"failed\"/>\n    </testcase>\n"));
                }
                (Verdict::Skip, _) => x.push_str(&format!(
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml_escape(&r.detail)
                )),
                (Verdict::NotRun, _) => x.push_str(&format!(
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml_escape(&format!("not run: {}", r.detail))
                )),
                (Verdict::Warn, e) => {
                    let mut body = format!("WARN: {}", r.detail);
                    if let Some(e) = e {
                        body.push_str(&format!(
                            "\nrpc: {}\nanswer: {}\nrule: {} ({})\nfix: {}",
                            e.rpc, e.answer, r.rule, r.source, e.fix
                        ));
                    }
                    x.push_str(&format!(
                        "{open}>\n      <system-out>{}</system-out>\n    </testcase>\n",
                        xml_escape(&body)
                    ));
                }
                (Verdict::Pass, _) => x.push_str(&format!("{open}/>\n")),
            }
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::catalog::find;
    use crate::suite::Outcome;

    fn recs() -> Vec<Record> {
        vec![
            Record::new(find("REG-001").unwrap(), Outcome::pass("after 12 ms"), Duration::from_millis(12)),
            Record::new(
                find("REG-002").unwrap(),
                Outcome::fail("Register", "version \"v1<beta>\" & \"x\"\u{1}", "send v1beta1"),
                Duration::from_millis(3),
            ),
            Record::new(find("PREF-001").unwrap(), Outcome::skip("not advertised"), Duration::ZERO),
        ]
    }

    #[test]
    fn warnings_and_not_run_are_counted_and_rendered() {
        let mut r = recs();
        r.push(Record::new(find("LAW-001").unwrap(), Outcome::warn("first snapshot empty", None), Duration::ZERO));
        r.push(Record::new(
            find("LAW-002").unwrap(),
            Outcome::not_run("the plugin exited at start (see REG-001)"),
            Duration::ZERO,
        ));
        assert_eq!(summary(&r, Duration::from_secs(1)), "1 passed, 1 failed, 1 warned, 1 skipped, 1 not run in 1.00s");
        assert!(line(&r[3]).starts_with("WARN  LAW-001") && line(&r[3]).contains("first snapshot empty"));
        assert!(line(&r[4]).starts_with("NOT-RUN  LAW-002") && line(&r[4]).contains("exited at start"));
        let x = junit(&r, Duration::from_millis(15));
        assert!(x.contains("tests=\"5\" failures=\"1\" errors=\"0\" skipped=\"2\""), "{x}");
        assert!(x.contains("<skipped message=\"not run: the plugin exited at start (see REG-001)\"/>"), "{x}");
        assert!(x.contains("<system-out>WARN: first snapshot empty</system-out>"), "{x}");
        let json = serde_json::to_value(&r[4]).unwrap();
        assert_eq!(json["result"], "NOT-RUN");
        assert_eq!(serde_json::to_value(totals(&r)).unwrap()["notRun"], 1);
    }

    #[test]
    fn lines_show_verdict_and_evidence() {
        let r = recs();
        assert!(line(&r[0]).starts_with("PASS  REG-001"));
        let f = line(&r[1]);
        assert!(f.starts_with("FAIL  REG-002") && f.contains("fix:    send v1beta1") && f.contains("rule:"), "{f}");
        assert!(line(&r[2]).contains("SKIP") && line(&r[2]).contains("not advertised"));
        assert_eq!(summary(&r, Duration::from_secs(1)), "1 passed, 1 failed, 1 skipped in 1.00s");
        // The plugin's own log lines, when the engine found some, come last.
        let mut with_log = r[1].clone();
        if let Some(e) = with_log.evidence.as_mut() {
            e.log = Some(Box::new("E1128 no GPU found".into()));
        }
        let f = line(&with_log);
        assert!(f.ends_with("\n      log:    E1128 no GPU found"), "{f}");
        assert!(junit(&[with_log], Duration::from_millis(1)).contains("log: E1128 no GPU found"));
    }

    #[test]
    fn ids_fit_their_column_in_both_tables() {
        // Every DRA line has its duration at the same column: the ID column fits the longest ID.
        let dra = crate::suite::dra::SCENARIOS;
        let cols: std::collections::BTreeSet<usize> = dra
            .iter()
            .map(|s| line(&Record::new(s, Outcome::pass(""), Duration::from_millis(5))).find("0.01s").unwrap())
            .collect();
        assert_eq!(cols.len(), 1, "{cols:?}");
        let l = line(&Record::new(&dra[0], Outcome::pass(""), Duration::from_millis(5)));
        assert!(l.starts_with("PASS  DRA-REG-001      "), "{l:?}");
        let longest = dra.iter().map(|s| s.id).max_by_key(|i| i.len()).unwrap();
        let s = dra.iter().find(|s| s.id == longest).unwrap();
        let l = line(&Record::new(s, Outcome::pass(""), Duration::from_millis(5)));
        assert!(l.starts_with(&format!("PASS  {longest}   0.01s")), "{l:?}");
        // The device-plugin lines keep their layout.
        assert!(line(&recs()[0]).starts_with("PASS  REG-001      0.01s"), "{:?}", line(&recs()[0]));
    }

    #[test]
    fn junit_counts_groups_and_escapes() {
        let x = junit(&recs(), Duration::from_millis(15));
        assert!(
            x.contains("<testsuites name=\"dpctl test\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("<testsuite name=\"registration\" tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("<testsuite name=\"preferred\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""));
        assert!(x.contains("v1&lt;beta&gt;&quot; &amp; &quot;x&quot;\u{FFFD}"), "{x}");
        assert!(!x.contains('\u{1}'));
        assert!(x.contains("<skipped message=\"not advertised\"/>"));
        assert_eq!(x.matches("<testcase ").count(), 3);
        assert_eq!(x.matches("</testsuite>").count(), 2);
    }

    #[test]
    fn junit_has_one_testsuite_per_kubelet_version() {
        let mut all = Vec::new();
        for v in ["1.31", "1.37"] {
            all.extend(recs().into_iter().map(|mut r| {
                r.kubelet_version = Some(v.into());
                r
            }));
        }
        let x = junit(&all, Duration::from_millis(15));
        assert!(x.contains("<testsuites name=\"dpctl test\" tests=\"6\" failures=\"2\""), "{x}");
        for v in ["1.31", "1.37"] {
            assert!(x.contains(&format!("<testsuite name=\"kubelet {v}\" tests=\"3\" failures=\"1\"")), "{x}");
        }
        assert_eq!(x.matches("</testsuite>").count(), 2);
        assert!(x.contains("classname=\"dpctl.registration\""), "{x}");
    }
}
