//! Device selectors as the scheduler compiles them
//! (`k8s.io/dynamic-resource-allocation/cel`): the `device` variable with
//! `driver`, `attributes[DOMAIN][ID]` (string, int, bool, version as a
//! semver value), `capacity[DOMAIN][ID]` (quantities) and
//! `allowMultipleAllocations`; a domain the device does not have is an empty
//! map (so `has()` and `in` answer false), a missing attribute is a runtime
//! error. Kubernetes' library functions used by DeviceClasses are added:
//! `quantity`, `isQuantity`, `semver`, `isSemver` and their methods
//! (`compareTo`, `isGreaterThan`, `isLessThan`, `add`, `sub`, `sign`,
//! `isInteger`, `asInteger`, `asApproximateFloat`, `major`, `minor`, `patch`).
//! CEL itself (`matches`, `has`, `in`, map indexing, single-quoted strings,
//! macros) is the `cel` crate's.

use super::Candidate;
use crate::controlplane::objects::quantity::Quantity;
use crate::controlplane::objects::Attribute;
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{Context, ExecutionError, FunctionContext, Program};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A compiled selector.
pub struct Compiled {
    program: Program,
    /// Domains named by string literals, made empty maps when a device lacks them.
    literals: Vec<String>,
    /// `device.driver == "X"` (the commonest class selector, and the one a
    /// class named after a driver stands for): X, compared without running
    /// CEL, which builds the whole `device` variable for every device.
    driver_is: Option<String>,
}

/// Compile `expr` (a parse error is the scheduler's "compilation failed").
pub fn compile(expr: &str) -> Result<Compiled, String> {
    let program = Program::compile(expr).map_err(|e| {
        let text = e.to_string();
        format!("compilation failed: {}", text.lines().next().unwrap_or("syntax error"))
    })?;
    Ok(Compiled { program, literals: literals(expr), driver_is: driver_is(expr) })
}

/// X when `expr` is exactly `device.driver == X` or `X == device.driver`
/// for a string literal X without escapes (either quote style); what CEL
/// answers for it is then `driver == X`.
fn driver_is(expr: &str) -> Option<String> {
    let (a, b) = expr.split_once("==")?;
    let (a, b) = (a.trim(), b.trim());
    let lit = match (a, b) {
        ("device.driver", l) | (l, "device.driver") => l,
        _ => return None,
    };
    let quote = lit.chars().next().filter(|q| *q == '"' || *q == '\'')?;
    let inner = lit.strip_prefix(quote)?.strip_suffix(quote)?;
    if inner.contains(['"', '\'', '\\', '\n', '\r']) || lit.len() < 2 {
        return None;
    }
    Some(inner.to_string())
}

/// The string literals of an expression (both quote styles).
fn literals(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            let mut s = String::new();
            let mut escaped = false;
            for d in chars.by_ref() {
                match d {
                    _ if escaped => {
                        s.push(d);
                        escaped = false;
                    }
                    '\\' => escaped = true,
                    _ if d == c => break,
                    _ => s.push(d),
                }
            }
            out.push(s);
        }
    }
    out
}

/// The functions of Kubernetes' CEL library the selectors use, on top of CEL's own.
pub fn context() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.add_function("quantity", |ftx: &FunctionContext, s: Arc<String>| -> Result<Value, ExecutionError> {
        Quantity::parse(&s).map(qv).map_err(|e| ftx.error(e))
    });
    ctx.add_function("isQuantity", |s: Arc<String>| Quantity::parse(&s).is_ok());
    ctx.add_function("semver", |ftx: &FunctionContext, s: Arc<String>| -> Result<Value, ExecutionError> {
        Semver::parse(&s).map(|v| Value::Opaque(Arc::new(v))).ok_or_else(|| ftx.error(format!("invalid semver {s:?}")))
    });
    ctx.add_function("isSemver", |s: Arc<String>| Semver::parse(&s).is_some());
    ctx.add_function("compareTo", |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
        compare(ftx, &a, &b).map(|o| o as i64)
    });
    ctx.add_function("isGreaterThan", |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
        compare(ftx, &a, &b).map(|o| o == Ordering::Greater)
    });
    ctx.add_function("isLessThan", |ftx: &FunctionContext, This(a): This<Value>, b: Value| {
        compare(ftx, &a, &b).map(|o| o == Ordering::Less)
    });
    ctx.add_function("add", |ftx: &FunctionContext, This(a): This<Value>, b: Value| arith(ftx, &a, &b, 1));
    ctx.add_function("sub", |ftx: &FunctionContext, This(a): This<Value>, b: Value| arith(ftx, &a, &b, -1));
    ctx.add_function("sign", |ftx: &FunctionContext, This(a): This<Value>| {
        quantity_of(ftx, &a).map(|q| q.nanos().signum() as i64)
    });
    ctx.add_function("isInteger", |ftx: &FunctionContext, This(a): This<Value>| {
        quantity_of(ftx, &a).map(|q| q.nanos() % 1_000_000_000 == 0 && i64::try_from(q.nanos() / 1_000_000_000).is_ok())
    });
    ctx.add_function("asInteger", |ftx: &FunctionContext, This(a): This<Value>| -> Result<i64, ExecutionError> {
        let q = quantity_of(ftx, &a)?;
        if q.nanos() % 1_000_000_000 != 0 {
            return Err(ftx.error("cannot convert value to integer"));
        }
        i64::try_from(q.nanos() / 1_000_000_000).map_err(|_| ftx.error("cannot convert value to integer"))
    });
    ctx.add_function("asApproximateFloat", |ftx: &FunctionContext, This(a): This<Value>| {
        quantity_of(ftx, &a).map(|q| q.nanos() as f64 / 1e9)
    });
    ctx.add_function("major", |ftx: &FunctionContext, This(a): This<Value>| semver_of(ftx, &a).map(|v| v.major as i64));
    ctx.add_function("minor", |ftx: &FunctionContext, This(a): This<Value>| semver_of(ftx, &a).map(|v| v.minor as i64));
    ctx.add_function("patch", |ftx: &FunctionContext, This(a): This<Value>| semver_of(ftx, &a).map(|v| v.patch as i64));
    ctx
}

fn qv(q: Quantity) -> Value {
    Value::Opaque(Arc::new(QuantityValue(q)))
}

fn quantity_of<'a>(ftx: &FunctionContext, v: &'a Value) -> Result<&'a Quantity, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<QuantityValue>().map(|q| &q.0),
        _ => None,
    }
    .ok_or_else(|| ftx.error(format!("{v:?} is not a quantity")))
}

fn semver_of<'a>(ftx: &FunctionContext, v: &'a Value) -> Result<&'a Semver, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>(),
        _ => None,
    }
    .ok_or_else(|| ftx.error(format!("{v:?} is not a semver")))
}

fn compare(ftx: &FunctionContext, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if let (Value::Opaque(x), Value::Opaque(y)) = (a, b) {
        if let (Some(x), Some(y)) = (x.downcast_ref::<QuantityValue>(), y.downcast_ref::<QuantityValue>()) {
            return Ok(x.0.cmp(&y.0));
        }
        if let (Some(x), Some(y)) = (x.downcast_ref::<Semver>(), y.downcast_ref::<Semver>()) {
            return Ok(x.cmp(y));
        }
    }
    Err(ftx.error(format!("cannot compare {a:?} with {b:?}")))
}

fn arith(ftx: &FunctionContext, a: &Value, b: &Value, sign: i128) -> Result<Value, ExecutionError> {
    let x = quantity_of(ftx, a)?.nanos();
    let y = match b {
        Value::Int(n) => i128::from(*n) * 1_000_000_000,
        other => quantity_of(ftx, other)?.nanos(),
    };
    Ok(qv(Quantity::from_nanos(x + sign * y)))
}

/// A quantity as a CEL value.
#[derive(Debug, PartialEq, Eq)]
struct QuantityValue(Quantity);

impl Opaque for QuantityValue {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version as a CEL value (precedence as semver 2.0.0 orders it).
#[derive(Debug, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<String>,
}

impl Semver {
    /// Parse `MAJOR.MINOR.PATCH[-PRE][+BUILD]`.
    pub fn parse(s: &str) -> Option<Semver> {
        let s = s.split('+').next()?;
        let (core, pre) = s.split_once('-').map_or((s, None), |(c, p)| (c, Some(p)));
        let mut n = core
            .split('.')
            .map(|p| (!p.is_empty() && (p == "0" || !p.starts_with('0'))).then(|| p.parse::<u64>().ok()).flatten());
        let (major, minor, patch) = (n.next()??, n.next()??, n.next()??);
        if n.next().is_some() {
            return None;
        }
        let pre: Vec<String> = pre.map(|p| p.split('.').map(str::to_string).collect()).unwrap_or_default();
        if pre.iter().any(|p| p.is_empty()) {
            return None;
        }
        Some(Semver { major, minor, patch, pre })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Semver {
    fn cmp(&self, o: &Self) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let c = match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                _ => a.cmp(b),
            };
            if c != Ordering::Equal {
                return c;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn split(name: &str) -> (&str, &str) {
    name.split_once('/').unwrap_or(("", name))
}

/// The `device` variable for candidate `c`, with an empty map for every
/// domain the expression names that the device lacks.
fn device(c: &Candidate, literals: &[String]) -> Value {
    let mut attrs: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (k, a) in &c.attributes {
        let (domain, id) = split(k);
        let v = match a {
            Attribute::String(s) => Value::String(Arc::new(s.clone())),
            Attribute::Int(n) => Value::Int(*n),
            Attribute::Bool(b) => Value::Bool(*b),
            Attribute::Version(v) => match Semver::parse(v) {
                Some(s) => Value::Opaque(Arc::new(s)),
                None => Value::String(Arc::new(v.clone())),
            },
        };
        attrs.entry(domain.to_string()).or_default().insert(id.to_string(), v);
    }
    let mut caps: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (k, q) in &c.capacity {
        let (domain, id) = split(k);
        caps.entry(domain.to_string()).or_default().insert(id.to_string(), qv(q.value.clone()));
    }
    for l in literals {
        attrs.entry(l.clone()).or_default();
        caps.entry(l.clone()).or_default();
    }
    let mut d: HashMap<String, Value> = HashMap::new();
    d.insert("driver".into(), Value::String(Arc::new(c.driver.clone())));
    d.insert(
        "attributes".into(),
        attrs.into_iter().map(|(k, v)| (k, Value::from(v))).collect::<HashMap<_, _>>().into(),
    );
    d.insert("capacity".into(), caps.into_iter().map(|(k, v)| (k, Value::from(v))).collect::<HashMap<_, _>>().into());
    d.insert("allowMultipleAllocations".into(), Value::Bool(c.multi));
    d.into()
}

/// Whether candidate `c` matches; a runtime error or a non-bool result is an error.
pub fn matches(ctx: &Context, compiled: &Compiled, c: &Candidate) -> Result<bool, String> {
    if let Some(d) = &compiled.driver_is {
        return Ok(&c.driver == d);
    }
    let mut scope = ctx.new_inner_scope();
    scope.add_variable_from_value("device", device(c, &compiled.literals));
    match compiled.program.execute(&scope) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("must evaluate to bool, not {other:?}")),
        Err(ExecutionError::NoSuchKey(k)) => {
            Err(format!("no such key: {k} (use has() or the in operator to check that an attribute exists)"))
        }
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut for `device.driver == X` answers what CEL answers, and
    /// is taken only for exactly that form.
    #[test]
    fn the_driver_shortcut_answers_as_cel_does() {
        let dev = |driver: &str| Candidate { driver: driver.into(), ..Candidate::default() };
        let ctx = context();
        for expr in [
            r#"device.driver == "gpu.x""#,
            "device.driver=='gpu.x'",
            r#""gpu.x" == device.driver"#,
            r#"device.driver == "gpu.x" || true"#,
            r#"device.driver == "gpu.x" && "a" == "a""#,
            r#"device.driver == "g\"x""#,
            r#"device.driver == "nic.x""#,
        ] {
            let compiled = compile(expr).unwrap();
            let mut slow = compile(expr).unwrap();
            slow.driver_is = None;
            for d in ["gpu.x", "nic.x", "g\"x"] {
                assert_eq!(matches(&ctx, &compiled, &dev(d)), matches(&ctx, &slow, &dev(d)), "{expr} on driver {d}");
            }
        }
        assert_eq!(driver_is(r#"device.driver == "gpu.x""#).as_deref(), Some("gpu.x"));
        assert_eq!(driver_is(r#"device.driver == "gpu.x" || true"#), None);
        assert_eq!(driver_is(r#"device.driver == "a" && "b" == "b""#), None);
        assert_eq!(driver_is("device.attributes == 'x'"), None);
    }
}
