//! Device selectors as kube-apiserver checks them before it stores them:
//! the length limit, cel-go's recursion limits and a parse, on a stack large
//! enough for what the limits let through, with parsed selectors cached by
//! text. The lowest part of the control plane: the objects' parser refuses
//! a selector with it, and the allocator's CEL ([`super::allocator`])
//! evaluates what it parsed.

use std::collections::HashMap;
use std::sync::Arc;

/// resourceapi.CELSelectorExpressionMaxLength: kube-apiserver refuses a
/// longer selector (pkg/apis/resource/validation validateCELExpression).
pub const MAX_LENGTH: usize = 10 * 1024;

/// cel-go's parser recursion limit in Kubernetes' CEL environment
/// ("expression recursion limit exceeded: 250").
pub const MAX_RECURSION: u16 = 250;

/// The deepest postfix chain and bracket nesting (summed, see [`depth`])
/// taken to the parser: cel-go takes 249 nested parentheses and refuses 250
/// ("expression recursion limit exceeded: 250"), takes a chain of 249
/// selections and refuses 250 ("max recursion depth exceeded"); both are
/// depth 251 here.
pub const MAX_DEPTH: usize = MAX_RECURSION as usize;

/// The stack selectors are parsed and run on: the `cel` crate's parser and
/// evaluator recurse once per level of the expression (tens of KiB a level
/// in a debug build), far beyond a runtime worker's 2 MiB for what
/// [`MAX_RECURSION`] and [`MAX_DEPTH`] let through.
pub const STACK: usize = 256 << 20;

/// Why a selector is refused before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Longer than [`MAX_LENGTH`] bytes (field.TooLong).
    TooLong {
        /// Its length in bytes.
        length: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`] (cel-go's "max recursion depth exceeded").
    TooDeep {
        /// The depth [`depth`] measured.
        depth: usize,
    },
    /// The parser refused it (syntax, or [`MAX_RECURSION`]).
    Syntax {
        /// The parser's first line.
        message: String,
    },
    /// No thread with a large enough stack could be started to parse it.
    NoThread {
        /// The system's error.
        message: String,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooLong { length } => {
                write!(f, "Too long: may not be more than {MAX_LENGTH} bytes (it has {length})")
            }
            Refused::TooDeep { depth } => {
                write!(f, "compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded (depth {depth}, at most {MAX_DEPTH})")
            }
            Refused::Syntax { message } => write!(f, "compilation failed: {message}"),
            Refused::NoThread { message } => write!(f, "cannot start a thread to parse the selector: {message}"),
        }
    }
}

impl std::error::Error for Refused {}

/// Run `f` on a thread with [`STACK`] bytes of stack (the caller's thread
/// waits): how selectors are parsed and evaluated, so that no expression
/// the limits let through can overflow a runtime worker's stack. Err: no
/// thread could be started (out of threads or memory).
pub fn with_stack<T: Send>(f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new().name("dpctl-cel".into()).stack_size(STACK).spawn_scoped(s, f)?;
        match h.join() {
            Ok(v) => Ok(v),
            // A panic of `f` goes on as the caller's.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// A lexical bound on how deep `expr` nests: along the text, the sum over
/// the open brackets of one plus the postfix selections and indexes
/// (`.x`, `[i]`) chained at that level (string literals skipped).
pub fn depth(expr: &str) -> usize {
    let mut levels: Vec<usize> = vec![0];
    let mut max = 0;
    let mut chars = expr.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    match d {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        _ if d == c => break,
                        _ => {}
                    }
                }
            }
            '(' | '[' | '{' => {
                // `x[i]` indexes (a step of x's chain); `[1]` is a list.
                if c == '[' && prev.is_some_and(|p: char| p.is_alphanumeric() || "_)]\"'".contains(p)) {
                    if let Some(n) = levels.last_mut() {
                        *n += 1;
                    }
                }
                levels.push(0);
            }
            ')' | ']' | '}' if levels.len() > 1 => {
                levels.pop();
            }
            '.' if !chars.peek().is_some_and(char::is_ascii_digit) => {
                if let Some(n) = levels.last_mut() {
                    *n += 1;
                }
            }
            _ => {}
        }
        let d: usize = levels.iter().map(|n| n + 1).sum();
        max = max.max(d);
        if !c.is_whitespace() {
            prev = Some(c);
        }
    }
    max
}

/// Check `expr` as kube-apiserver does before storing it (length, then a
/// parse within cel-go's recursion limits), on a stack large enough for it.
pub fn check(expr: &str) -> Result<(), Refused> {
    parse(expr).map(drop)
}

/// `expr` with each run of logical nots (`!!…`, spaces between allowed)
/// cut to its parity, as cel-go's parser does (parser.go VisitLogicalNot:
/// an even run is its operand): the `cel` crate's parser (0.12
/// visit_LogicalNot) drops the `return` and treats `!!x` as `!x`.
fn collapse_nots(expr: &str) -> std::borrow::Cow<'_, str> {
    if !expr.contains("!!") && !expr.contains("! ") {
        return std::borrow::Cow::Borrowed(expr);
    }
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            // Copy a string literal whole (raw and triple-quoted ones too:
            // their content has no unescaped quote of their kind before the end).
            out.push(c);
            i += 1;
            let mut escaped = false;
            while i < chars.len() {
                let d = chars[i];
                out.push(d);
                i += 1;
                match d {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    _ if d == c => break,
                    _ => {}
                }
            }
            continue;
        }
        if c == '!' {
            let mut j = i;
            let mut nots = 0;
            while j < chars.len() && (chars[j] == '!' || chars[j].is_whitespace()) {
                if chars[j] == '!' {
                    nots += 1;
                }
                j += 1;
            }
            // `!=` is not a not; leave a run that ends in one as written.
            let ends_in_ne = chars.get(j) == Some(&'=') && chars[j - 1] == '!';
            if nots > 1 && !ends_in_ne {
                if nots % 2 == 1 {
                    out.push('!');
                }
                out.push(' ');
                i = j;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

/// Parsed selectors, by text (upstream keeps compiled ones in a cel.Cache
/// too): a class's selector is parsed once, not per claim. At most
/// [`CACHED`] entries; when full it starts over.
static PARSED: std::sync::OnceLock<std::sync::Mutex<HashMap<String, Parsed>>> = std::sync::OnceLock::new();

/// A parsed selector, or why it was refused.
type Parsed = Result<Arc<::cel::parser::Expression>, Refused>;

/// How many parsed selectors [`PARSED`] keeps.
const CACHED: usize = 1024;

/// Parse `expr` within the limits (see [`check`]), or take it from [`PARSED`].
pub(crate) fn parse(expr: &str) -> Result<Arc<::cel::parser::Expression>, Refused> {
    let cache = PARSED.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(expr).cloned()) {
        return hit;
    }
    let parsed = parse_now(expr).map(Arc::new);
    if let Ok(mut c) = cache.lock() {
        if c.len() >= CACHED {
            c.clear();
        }
        c.insert(expr.to_string(), parsed.clone());
    }
    parsed
}

fn parse_now(expr: &str) -> Result<::cel::parser::Expression, Refused> {
    if expr.len() > MAX_LENGTH {
        return Err(Refused::TooLong { length: expr.len() });
    }
    let depth = depth(expr);
    if depth > MAX_DEPTH {
        return Err(Refused::TooDeep { depth });
    }
    let src = collapse_nots(expr);
    let parsed = with_stack(|| {
        ::cel::parser::Parser::new().max_recursion_depth(MAX_RECURSION).parse(&src).map_err(|e| {
            let text = e.to_string();
            Refused::Syntax { message: text.lines().next().unwrap_or("syntax error").to_string() }
        })
    });
    parsed.unwrap_or_else(|e| Err(Refused::NoThread { message: e.to_string() }))
}
