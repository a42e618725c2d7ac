//! `--focus` / `--skip` patterns: a tiny matcher instead of a regex engine.
//! A pattern is alternatives separated by `|`; each is matched,
//! case-insensitively, against a scenario's ID, group and title. `*` matches
//! any run of characters and `?` one character; `^` and `$` anchor at the
//! start and end of the ID or title, otherwise an alternative may match
//! anywhere (so `REG` or `kubelet restart` select what one expects).

/// A compiled `--focus` / `--skip` pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    alternatives: Vec<Alt>,
}

#[derive(Debug, Clone)]
struct Alt {
    anchored_start: bool,
    anchored_end: bool,
    glob: Vec<char>,
}

impl Pattern {
    /// Parse a pattern; an empty pattern (or alternative) is a usage error.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut alternatives = Vec::new();
        for raw in text.split('|') {
            let mut s = raw.trim().to_lowercase();
            let anchored_start = s.starts_with('^');
            if anchored_start {
                s.remove(0);
            }
            let anchored_end = s.ends_with('$') && !s.ends_with("\\$");
            if anchored_end {
                s.pop();
            }
            if s.is_empty() {
                return Err(format!("{text:?}: an empty alternative would match every scenario; remove the stray '|'"));
            }
            alternatives.push(Alt { anchored_start, anchored_end, glob: s.chars().collect() });
        }
        Ok(Pattern { alternatives })
    }

    /// Whether any alternative matches any of `fields`.
    pub fn matches(&self, fields: &[&str]) -> bool {
        fields.iter().any(|f| {
            let f: Vec<char> = f.to_lowercase().chars().collect();
            self.alternatives.iter().any(|a| a.matches(&f))
        })
    }
}

impl Alt {
    fn matches(&self, text: &[char]) -> bool {
        let starts: Vec<usize> = if self.anchored_start { vec![0] } else { (0..=text.len()).collect() };
        starts.into_iter().any(|i| glob_at(&self.glob, &text[i..], self.anchored_end))
    }
}

/// Does `glob` match a prefix of `text` (all of it when `to_end`)?
fn glob_at(glob: &[char], text: &[char], to_end: bool) -> bool {
    match glob.split_first() {
        None => !to_end || text.is_empty(),
        Some(('*', rest)) => (0..=text.len()).any(|k| glob_at(rest, &text[k..], to_end)),
        Some(('?', rest)) => !text.is_empty() && glob_at(rest, &text[1..], to_end),
        Some((c, rest)) => text.first() == Some(c) && glob_at(rest, &text[1..], to_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, f: &str) -> bool {
        Pattern::parse(p).unwrap().matches(&[f])
    }

    #[test]
    fn substrings_globs_anchors_and_alternatives() {
        assert!(m("REG", "REG-001"));
        assert!(m("reg", "REG-001"));
        assert!(!m("REG", "LAW-001"));
        assert!(m("kubelet restart", "re-registers after a kubelet restart"));
        assert!(m("^KRES-00?$", "KRES-001"));
        assert!(!m("^KRES-00?$", "KRES-0010"));
        assert!(!m("^001", "REG-001"));
        assert!(m("001$", "REG-001"));
        assert!(m("A*-003", "ALLOC-003"));
        assert!(m("PREF|PRE-", "PRE-001"));
        assert!(!m("PREF|PRES", "PRE-001"));
        assert!(Pattern::parse("REG||LAW").is_err());
        assert!(Pattern::parse("").is_err());
    }
}
