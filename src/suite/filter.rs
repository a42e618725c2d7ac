//! `--focus` / `--skip` patterns: a tiny matcher instead of a regex engine.
//! A pattern is alternatives separated by `|`. Each alternative is matched,
//! case-insensitively, against a scenario's **ID**; prefixed with `group:`
//! or `title:` it is matched against the group or the title instead (so
//! `REG` never selects a scenario whose title says "re-registers"). `*`
//! matches any run of characters, `?` one character and `[…]` one of a set
//! (`[12]`, `[0-9]`, `[!3]`); `^` and `$` anchor at the start and end,
//! otherwise an alternative may match anywhere.

/// A compiled `--focus` / `--skip` pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    alternatives: Vec<Alt>,
}

/// What an alternative is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Id,
    Group,
    Title,
}

/// One element of a glob.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// `*`: any run of characters.
    Any,
    /// `?`: one character.
    One,
    /// `[…]`: one character of a set (or, negated, not of it).
    Set { negated: bool, ranges: Vec<(char, char)> },
    /// Itself.
    Char(char),
}

#[derive(Debug, Clone)]
struct Alt {
    field: Field,
    anchored_start: bool,
    anchored_end: bool,
    glob: Vec<Tok>,
}

/// The syntax, as `--help` and the errors name it.
pub const SYNTAX: &str = "ID substring or glob (* ? [0-9]), ^ $ anchors, a|b alternatives; \
group:NAME or title:TEXT match the group or title instead";

impl Pattern {
    /// Parse a pattern; an empty pattern (or alternative) or an unclosed `[`
    /// is a usage error.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let mut alternatives = Vec::new();
        for raw in text.split('|') {
            let mut s = raw.trim().to_lowercase();
            let mut field = Field::Id;
            for (prefix, f) in [("group:", Field::Group), ("title:", Field::Title), ("id:", Field::Id)] {
                if let Some(rest) = s.strip_prefix(prefix) {
                    field = f;
                    s = rest.trim_start().to_string();
                    break;
                }
            }
            let anchored_start = s.starts_with('^');
            if anchored_start {
                s.remove(0);
            }
            let anchored_end = s.ends_with('$') && !s.ends_with("\\$");
            if anchored_end {
                s.pop();
            }
            if s.is_empty() {
                return Err(PatternError::EmptyAlternative(text.to_string()));
            }
            let glob = compile(&s).map_err(|()| PatternError::UnclosedSet(text.to_string()))?;
            alternatives.push(Alt { field, anchored_start, anchored_end, glob });
        }
        Ok(Pattern { alternatives })
    }

    /// Whether any alternative matches the scenario with this ID, group and title.
    pub fn selects(&self, id: &str, group: &str, title: &str) -> bool {
        self.alternatives.iter().any(|a| {
            let text = match a.field {
                Field::Id => id,
                Field::Group => group,
                Field::Title => title,
            };
            let text: Vec<char> = text.to_lowercase().chars().collect();
            a.matches(&text)
        })
    }
}

/// A glob's tokens (the text is lowercase already).
/// Why a `--focus`/`--skip` pattern (this text) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// An empty alternative, which would match every scenario.
    EmptyAlternative(String),
    /// A `[` without its `]`.
    UnclosedSet(String),
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatternError::EmptyAlternative(t) => {
                write!(f, "{t:?}: an empty alternative would match every scenario; remove the stray '|'")
            }
            PatternError::UnclosedSet(t) => {
                write!(f, "{t:?}: '[' without its ']'; close the set, e.g. LAW-00[12]")
            }
        }
    }
}

impl std::error::Error for PatternError {}

/// The glob's tokens; `Err` for a `[` without its `]` (the one thing that can be wrong).
fn compile(s: &str) -> Result<Vec<Tok>, ()> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(match c {
            '*' => Tok::Any,
            '?' => Tok::One,
            '[' => {
                let negated = chars.next_if(|&c| c == '!' || c == '^').is_some();
                let mut ranges = Vec::new();
                loop {
                    match chars.next() {
                        None => return Err(()),
                        Some(']') if !ranges.is_empty() => break,
                        Some(lo) => {
                            let hi = match (chars.peek().copied(), chars.clone().nth(1)) {
                                (Some('-'), Some(hi)) if hi != ']' => {
                                    chars.next();
                                    chars.next();
                                    hi
                                }
                                _ => lo,
                            };
                            ranges.push((lo.min(hi), lo.max(hi)));
                        }
                    }
                }
                Tok::Set { negated, ranges }
            }
            c => Tok::Char(c),
        });
    }
    Ok(out)
}

impl Alt {
    fn matches(&self, text: &[char]) -> bool {
        let starts: Vec<usize> = if self.anchored_start { vec![0] } else { (0..=text.len()).collect() };
        starts.into_iter().any(|i| glob_at(&self.glob, &text[i..], self.anchored_end))
    }
}

/// Does `glob` match a prefix of `text` (all of it when `to_end`)?
fn glob_at(glob: &[Tok], text: &[char], to_end: bool) -> bool {
    match glob.split_first() {
        None => !to_end || text.is_empty(),
        Some((Tok::Any, rest)) => (0..=text.len()).any(|k| glob_at(rest, &text[k..], to_end)),
        Some((Tok::One, rest)) => !text.is_empty() && glob_at(rest, &text[1..], to_end),
        Some((Tok::Set { negated, ranges }, rest)) => text.first().is_some_and(|c| {
            ranges.iter().any(|(lo, hi)| (lo..=hi).contains(&c)) != *negated && glob_at(rest, &text[1..], to_end)
        }),
        Some((Tok::Char(c), rest)) => text.first() == Some(c) && glob_at(rest, &text[1..], to_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::catalog::SCENARIOS;

    fn m(p: &str, id: &str) -> bool {
        Pattern::parse(p).unwrap().selects(id, "", "")
    }

    fn chosen(p: &str) -> Vec<&'static str> {
        let p = Pattern::parse(p).unwrap();
        SCENARIOS.iter().filter(|s| p.selects(s.id, s.group, s.title)).map(|s| s.id).collect()
    }

    #[test]
    fn substrings_globs_sets_anchors_and_alternatives() {
        assert!(m("REG", "REG-001"));
        assert!(m("reg", "REG-001"));
        assert!(!m("REG", "LAW-001"));
        assert!(m("^KRES-00?$", "KRES-001"));
        assert!(!m("^KRES-00?$", "KRES-0010"));
        assert!(!m("^001", "REG-001"));
        assert!(m("001$", "REG-001"));
        assert!(m("A*-003", "ALLOC-003"));
        assert!(m("PREF|PRE-", "PRE-001"));
        assert!(!m("PREF|PRES", "PRE-001"));
        assert!(m("LAW-00[12]", "LAW-002") && !m("LAW-00[12]", "LAW-003"));
        assert!(m("LAW-00[1-3]$", "LAW-003") && !m("LAW-00[1-3]$", "LAW-004"));
        assert!(m("LAW-00[!1]", "LAW-002") && !m("LAW-00[!1]", "LAW-001"));
        assert!(Pattern::parse("REG||LAW").is_err());
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("title:").is_err());
        let e = Pattern::parse("LAW-00[12").unwrap_err().to_string();
        assert!(e.contains("'[' without its ']'"), "{e}");
    }

    /// IDs by default: `REG` no longer selects ORDER-001 ("registers once it
    /// appears"), KRES-001 ("re-registers") or KRES-003 ("registration")
    /// through their titles.
    #[test]
    fn ids_by_default_titles_and_groups_on_request() {
        let reg_law = chosen("REG|LAW-00[12]");
        let want = [
            "REG-001", "REG-002", "REG-003", "REG-004", "REG-005", "REG-006", "REG-007", "REG-008", "LAW-001",
            "LAW-002", "REG-009",
        ];
        assert_eq!(reg_law, want);
        assert!(chosen("title:kubelet restart").contains(&"KRES-001"));
        assert!(!chosen("kubelet restart").contains(&"KRES-001"), "titles only on request");
        assert_eq!(chosen("group:kubelet-restart"), ["KRES-001", "KRES-002", "KRES-003", "KRES-004", "KRES-005"]);
        assert_eq!(chosen("group:^health$|ROLL"), ["ROLL-001", "HEALTH-001"]);
        assert_eq!(chosen("ID:^e2e-"), ["E2E-001", "E2E-002"]);
    }
}
