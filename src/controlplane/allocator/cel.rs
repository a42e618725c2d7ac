//! Device selectors as the scheduler compiles them
//! (`k8s.io/dynamic-resource-allocation/cel`): the `device` variable with
//! `driver`, `attributes[DOMAIN][ID]` (string, int, bool, version as a
//! semver value), `capacity[DOMAIN][ID]` (quantities) and
//! `allowMultipleAllocations`; a domain the device does not have is an empty
//! map (so `has()` and `in` answer false), a missing attribute is a runtime
//! error. Kubernetes' library functions used by DeviceClasses are added:
//! `quantity`, `isQuantity`, `semver`, `isSemver` and their methods
//! (`compareTo`, `isGreaterThan`, `isLessThan`, `add`, `sub`, `sign`,
//! `isInteger`, `asInteger`, `asApproximateFloat`, `major`, `minor`, `patch`),
//! and `includes` (apiserver/pkg/cel/library lists.go IncludesOption, which
//! comes with list-typed attributes, KEP-5491). A list-typed attribute
//! (`strings`, `ints`, `bools`, `versions`) is a CEL list. A derived
//! attribute (KEP-6080) is an expression's value read back as an attribute
//! ([`derive`]).
//! CEL itself (`matches`, `has`, `in`, map indexing, single-quoted strings,
//! macros) is the `cel` crate's.

use super::Candidate;
use crate::controlplane::objects::quantity::Quantity;
use crate::controlplane::objects::Attribute;
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{Context, ExecutionError, FunctionContext};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::controlplane::cel::parse;
pub use crate::controlplane::cel::{check, depth, with_stack, Refused, MAX_DEPTH, MAX_LENGTH, MAX_RECURSION, STACK};

/// A compiled selector.
pub struct Compiled {
    program: Arc<::cel::parser::Expression>,
    /// Domains named by string literals, made empty maps when a device lacks them.
    literals: Vec<String>,
    /// `device.driver == "X"` (the commonest class selector, and the one a
    /// class named after a driver stands for): X, compared without running
    /// CEL, which builds the whole `device` variable for every device.
    driver_is: Option<String>,
}

/// Compile `expr` (a parse error is the scheduler's "compilation failed").
/// Run [`matches`] with it inside [`with_stack`].
pub fn compile(expr: &str) -> Result<Compiled, Refused> {
    let program = parse(expr)?;
    Ok(Compiled { program, literals: literals(expr), driver_is: driver_is(expr) })
}

/// What a selector answers for one device, as the differential test
/// compares it with upstream's `cel` package: refused before it runs
/// ([`check`]), or the value, or a runtime error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Refused by [`check`].
    Refused(Refused),
    /// It ran: true or false.
    Value(bool),
    /// It failed at run time (or did not yield a bool).
    Error(String),
}

/// Evaluate `expr` against `c` (compile, then run), on a large stack.
pub fn evaluate(expr: &str, c: &Candidate) -> Outcome {
    let compiled = match compile(expr) {
        Err(r) => return Outcome::Refused(r),
        Ok(p) => p,
    };
    let ran = with_stack(|| match matches(&context(), &compiled, c) {
        Ok(b) => Outcome::Value(b),
        Err(e) => Outcome::Error(e.to_string()),
    });
    ran.unwrap_or_else(|e| Outcome::Error(format!("cannot start a thread to run the selector: {e}")))
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

/// Whether `expr` runs CEL's interpreter on a device (and so needs
/// [`with_stack`]'s stack): false for `device.driver == "X"`, which
/// [`matches`] answers with a string comparison.
pub fn interpreted(expr: &str) -> bool {
    driver_is(expr).is_none()
}

/// The driver a selector `device.driver == "X"` asks for (X), compared
/// without running CEL; None for any other selector.
pub fn driver_of(compiled: &Compiled) -> Option<&str> {
    compiled.driver_is.as_deref()
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
        Quantity::read(&s).map(qv).map_err(|e| ftx.error(e))
    });
    ctx.add_function("isQuantity", |s: Arc<String>| Quantity::read(&s).is_ok());
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
    ctx.add_function("major", |ftx: &FunctionContext, This(a): This<Value>| {
        semver_of(ftx, &a).map(|v| i64::try_from(v.0.major).unwrap_or(i64::MAX))
    });
    ctx.add_function("minor", |ftx: &FunctionContext, This(a): This<Value>| {
        semver_of(ftx, &a).map(|v| i64::try_from(v.0.minor).unwrap_or(i64::MAX))
    });
    ctx.add_function("patch", |ftx: &FunctionContext, This(a): This<Value>| {
        semver_of(ftx, &a).map(|v| i64::try_from(v.0.patch).unwrap_or(i64::MAX))
    });
    // lists.go includes: a list holds an equal item, or a scalar equals.
    ctx.add_function("includes", |This(a): This<Value>, b: Value| match &a {
        Value::List(items) => items.contains(&b),
        other => *other == b,
    });
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

/// A semantic version as a CEL value (precedence as semver 2.0.0 orders
/// it, build metadata ignored; blang/semver's Equals).
#[derive(Debug)]
pub struct Semver(semver::Version);

impl PartialEq for Semver {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl std::fmt::Display for Semver {
    /// As blang/semver's Version.String() writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Semver {
    /// Parse `MAJOR.MINOR.PATCH[-PRE][+BUILD]` strictly, as blang/semver's `Parse`.
    pub fn parse(s: &str) -> Option<Semver> {
        semver::Version::parse(s).ok().map(Semver)
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Semver {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.cmp_precedence(&o.0)
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
    let version = |v: &String| match Semver::parse(v) {
        Some(s) => Value::Opaque(Arc::new(s)),
        None => Value::String(Arc::new(v.clone())),
    };
    let list = |items: Vec<Value>| Value::List(Arc::new(items));
    for (k, a) in &c.attributes {
        let (domain, id) = split(k);
        let v = match a {
            Attribute::String(s) => Value::String(Arc::new(s.clone())),
            Attribute::Int(n) => Value::Int(*n),
            Attribute::Bool(b) => Value::Bool(*b),
            Attribute::Version(v) => version(v),
            Attribute::Strings(v) => list(v.iter().map(|s| Value::String(Arc::new(s.clone()))).collect()),
            Attribute::Ints(v) => list(v.iter().map(|n| Value::Int(*n)).collect()),
            Attribute::Bools(v) => list(v.iter().map(|b| Value::Bool(*b)).collect()),
            Attribute::Versions(v) => list(v.iter().map(version).collect()),
        };
        attrs.entry(domain.to_string()).or_default().insert(id.to_string(), v);
    }
    let mut caps: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (k, q) in &c.capacity {
        let (domain, id) = split(k);
        caps.entry(domain.to_string()).or_default().insert(id.to_string(), qv(q.value.clone()));
    }
    // Upstream's maps answer an empty map for every domain they lack
    // (compile.go newStringInterfaceMapWithDefault); here, for each domain
    // the expression names as a literal and for the driver's own (the key
    // of the `device.attributes[device.driver]` idiom).
    for l in literals.iter().chain([&c.driver]) {
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
    d.insert("allowMultipleAllocations".into(), Value::Bool(c.allow_multiple_allocations));
    d.into()
}

/// Evaluate `e` as cel-go does where the `cel` crate does not: `&&` and
/// `||` are commutative over errors (cel-go interpreter/interpretable.go
/// evalAnd/evalOr: a false operand of `&&`, a true one of `||`, wins over
/// an error on either side), through `!` and `?:` above them; the crate
/// stops at the first error from the left. Everything else is the crate's.
fn eval(e: &::cel::parser::Expression, ctx: &Context) -> ::cel::ResolveResult {
    use ::cel::common::ast::{operators, Expr};
    if let Expr::Call(call) = &e.expr {
        if call.target.is_none() {
            match (call.func_name.as_str(), call.args.as_slice()) {
                (operators::LOGICAL_AND, [a, b]) => return logic(e, ctx, eval(a, ctx), || eval(b, ctx), false),
                (operators::LOGICAL_OR, [a, b]) => return logic(e, ctx, eval(a, ctx), || eval(b, ctx), true),
                (operators::LOGICAL_NOT, [a]) => {
                    return match eval(a, ctx)? {
                        Value::Bool(b) => Ok(Value::Bool(!b)),
                        _ => Value::resolve(e, ctx),
                    }
                }
                (operators::CONDITIONAL, [c, t, f]) => {
                    return match eval(c, ctx)? {
                        Value::Bool(true) => eval(t, ctx),
                        Value::Bool(false) => eval(f, ctx),
                        _ => Value::resolve(e, ctx),
                    }
                }
                _ => {}
            }
        }
    }
    Value::resolve(e, ctx)
}

/// `a && b` (`wins` false) or `a || b` (`wins` true) over evaluated sides:
/// the winning value from either side, else an error from either side,
/// else b's value; a side that is not a bool is left to the crate
/// (whole, `e`) to refuse.
fn logic(
    e: &::cel::parser::Expression,
    ctx: &Context,
    a: ::cel::ResolveResult,
    b: impl FnOnce() -> ::cel::ResolveResult,
    wins: bool,
) -> ::cel::ResolveResult {
    if matches!(a, Ok(Value::Bool(x)) if x == wins) {
        return Ok(Value::Bool(wins));
    }
    let b = b();
    match (a, b) {
        (_, Ok(Value::Bool(y))) if y == wins => Ok(Value::Bool(wins)),
        (Ok(Value::Bool(_)), Ok(Value::Bool(y))) => Ok(Value::Bool(y)),
        (Err(x), Ok(Value::Bool(_)) | Err(_)) | (Ok(Value::Bool(_)), Err(x)) => Err(x),
        _ => Value::resolve(e, ctx),
    }
}

/// Why a selector or a derived attribute could not be evaluated on a device.
#[derive(Debug)]
pub enum EvalError {
    /// A selector's result (this value) that is not a bool.
    NotBool(String),
    /// A key the device does not have; `hint`: say how to check for it.
    NoSuchKey {
        /// The key.
        key: String,
        /// Whether to add the has()/in hint (a selector's error).
        hint: bool,
    },
    /// Any other runtime error.
    Runtime(ExecutionError),
    /// A list whose element (index, the type wanted, what it is) is not the first's type.
    ListElement(usize, &'static str, String),
    /// A list of a type (this value's) no attribute has.
    ListType(String),
    /// A result (this value) of a type no attribute has.
    ReturnType(String),
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::NotBool(v) => write!(f, "must evaluate to bool, not {v}"),
            EvalError::NoSuchKey { key, hint: true } => {
                write!(f, "no such key: {key} (use has() or the in operator to check that an attribute exists)")
            }
            EvalError::NoSuchKey { key, hint: false } => write!(f, "no such key: {key}"),
            EvalError::Runtime(e) => write!(f, "{e}"),
            EvalError::ListElement(i, what, got) => {
                write!(f, "expected list element at index {i} to be {what}, got {got}")
            }
            EvalError::ListType(x) => write!(f, "unsupported list element type: {x}"),
            EvalError::ReturnType(v) => write!(f, "unsupported CEL return type: {v}"),
        }
    }
}

impl std::error::Error for EvalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EvalError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

/// Whether candidate `c` matches; a runtime error or a non-bool result is an error.
pub fn matches(ctx: &Context, compiled: &Compiled, c: &Candidate) -> Result<bool, EvalError> {
    if let Some(d) = &compiled.driver_is {
        return Ok(&c.driver == d);
    }
    let mut scope = ctx.new_inner_scope();
    scope.add_variable_from_value("device", device(c, &compiled.literals));
    match eval(&compiled.program, &scope) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(EvalError::NotBool(format!("{other:?}"))),
        Err(ExecutionError::NoSuchKey(k)) => Err(EvalError::NoSuchKey { key: k.to_string(), hint: true }),
        Err(e) => Err(EvalError::Runtime(e)),
    }
}

/// A derived attribute (KEP-6080): `compiled` evaluated against `c`, its
/// value read back as an attribute (compile.go valToDeviceAttribute): a
/// bool, int, string or semver, or a list of one of them (the first item
/// decides the type; an empty list is an empty `strings`). Anything else,
/// or a runtime error, is an error.
pub fn derive(ctx: &Context, compiled: &Compiled, c: &Candidate) -> Result<Attribute, EvalError> {
    let mut scope = ctx.new_inner_scope();
    scope.add_variable_from_value("device", device(c, &compiled.literals));
    let v = match eval(&compiled.program, &scope) {
        Ok(v) => v,
        Err(ExecutionError::NoSuchKey(k)) => return Err(EvalError::NoSuchKey { key: k.to_string(), hint: false }),
        Err(e) => return Err(EvalError::Runtime(e)),
    };
    let semver = |v: &Value| match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>().map(ToString::to_string),
        _ => None,
    };
    match &v {
        Value::Bool(b) => return Ok(Attribute::Bool(*b)),
        Value::Int(n) => return Ok(Attribute::Int(*n)),
        Value::String(s) => return Ok(Attribute::String(s.to_string())),
        Value::List(items) => {
            let Some(first) = items.first() else { return Ok(Attribute::Strings(Vec::new())) };
            let all = |what: &'static str, f: &dyn Fn(&Value) -> bool| match items.iter().position(|x| !f(x)) {
                Some(i) => Err(EvalError::ListElement(i, what, format!("{:?}", items[i]))),
                None => Ok(()),
            };
            return match first {
                Value::Bool(_) => all("bool", &|x| matches!(x, Value::Bool(_))).map(|()| {
                    Attribute::Bools(
                        items.iter().filter_map(|x| if let Value::Bool(b) = x { Some(*b) } else { None }).collect(),
                    )
                }),
                Value::Int(_) => all("int", &|x| matches!(x, Value::Int(_))).map(|()| {
                    Attribute::Ints(
                        items.iter().filter_map(|x| if let Value::Int(n) = x { Some(*n) } else { None }).collect(),
                    )
                }),
                Value::String(_) => all("string", &|x| matches!(x, Value::String(_))).map(|()| {
                    Attribute::Strings(
                        items
                            .iter()
                            .filter_map(|x| if let Value::String(s) = x { Some(s.to_string()) } else { None })
                            .collect(),
                    )
                }),
                x if semver(x).is_some() => all("semver", &|x| semver(x).is_some())
                    .map(|()| Attribute::Versions(items.iter().filter_map(semver).collect())),
                x => Err(EvalError::ListType(format!("{x:?}"))),
            };
        }
        _ => {}
    }
    semver(&v).map(Attribute::Version).ok_or_else(|| EvalError::ReturnType(format!("{v:?}")))
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
                let ran = |c: &Compiled| matches(&ctx, c, &dev(d)).map_err(|e| e.to_string());
                assert_eq!(ran(&compiled), ran(&slow), "{expr} on driver {d}");
            }
        }
        assert_eq!(driver_is(r#"device.driver == "gpu.x""#).as_deref(), Some("gpu.x"));
        assert_eq!(driver_is(r#"device.driver == "gpu.x" || true"#), None);
        assert_eq!(driver_is(r#"device.driver == "a" && "b" == "b""#), None);
        assert_eq!(driver_is("device.attributes == 'x'"), None);
    }

    /// Issue 45: a DeviceClass selector `device.device.…(10,000 times)….driver
    /// == "x"` overflowed the stack of the runtime worker and aborted the
    /// process; upstream refuses it (the length limit). Hostile selectors
    /// within the length limit are refused as cel-go refuses them, or run,
    /// and none crashes a thread with a runtime worker's 2 MiB stack.
    #[test]
    fn hostile_selectors_are_refused_or_run_never_a_crash() {
        let worker = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
            let dev = Candidate { driver: "x".into(), ..Candidate::default() };
            let long = format!("{}driver == \"x\"", "device.".repeat(10_000));
            assert!(matches!(check(&long), Err(Refused::TooLong { length }) if length == long.len()));
            assert!(matches!(evaluate(&long, &dev), Outcome::Refused(Refused::TooLong { .. })));
            let deep = format!("{}driver == \"x\"", "device.".repeat(1_400));
            assert!(deep.len() <= MAX_LENGTH);
            assert!(matches!(check(&deep), Err(Refused::TooDeep { .. })), "{:?}", check(&deep));
            let parens = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
            assert_eq!(evaluate(&parens(249), &dev), Outcome::Value(true));
            assert!(matches!(check(&parens(250)), Err(Refused::TooDeep { .. })));
            let chain = |n: usize| format!("{}driver == \"x\"", "device.".repeat(n));
            assert!(matches!(evaluate(&chain(249), &dev), Outcome::Error(_)));
            assert!(matches!(check(&chain(250)), Err(Refused::TooDeep { .. })));
            let index = format!("device.attributes{} == 1", "[\"a\"]".repeat(200));
            assert!(matches!(evaluate(&index, &dev), Outcome::Error(_)));
            assert_eq!(evaluate(&vec!["true"; 1000].join(" || "), &dev), Outcome::Value(true));
            assert_eq!(evaluate(&format!("{}true", "!".repeat(1000)), &dev), Outcome::Value(true));
        });
        let joined = worker.map(|h| h.join());
        assert!(matches!(joined, Ok(Ok(()))), "the checks failed or crashed");
    }

    /// `&&` and `||` are commutative over errors, as in cel-go; a missing
    /// domain, the driver's included, is an empty map.
    #[test]
    fn logic_absorbs_errors_as_cel_go_does() {
        let dev = Candidate { driver: "x".into(), ..Candidate::default() };
        let err = "device.attributes['d'].nope == 1";
        for (e, want) in [
            (format!("{err} || true"), Some(true)),
            (format!("{err} && false"), Some(false)),
            (format!("!({err} && false)"), Some(true)),
            (format!("({err} || true) ? true : false"), Some(true)),
            (format!("{err} || false"), None),
            (format!("true && {err}"), None),
            ("has(device.attributes[device.driver].a)".to_string(), Some(false)),
            ("has(device.capacity[device.driver].a)".to_string(), Some(false)),
        ] {
            let got = evaluate(&e, &dev);
            match want {
                Some(b) => assert_eq!(got, Outcome::Value(b), "{e}"),
                None => assert!(matches!(got, Outcome::Error(_)), "{e}: {got:?}"),
            }
        }
    }

    /// `!!x` is x, as in cel-go (the `cel` crate's parser makes it `!x`).
    #[test]
    fn a_run_of_nots_keeps_its_parity() {
        let dev = Candidate { driver: "x".into(), ..Candidate::default() };
        for (e, want) in [
            ("!!true", true),
            ("!!!true", false),
            ("! ! true", true),
            ("!true", false),
            ("'!!' == '!!'", true),
            ("1 != 2", true),
        ] {
            assert_eq!(evaluate(e, &dev), Outcome::Value(want), "{e}");
        }
    }

    /// The depth bound: brackets and postfix chains add up, string
    /// literals do not count.
    #[test]
    fn depth_counts_nesting_and_chains() {
        assert_eq!(depth("true"), 1);
        assert_eq!(depth("device.driver"), 2);
        assert_eq!(depth("(a.b)"), 3);
        assert_eq!(depth("a[\"x\"]"), 3);
        assert_eq!(depth("\"((((.....\" == a"), 1);
        assert_eq!(depth("1.5 == a"), 1);
        assert_eq!(depth("[[1]]"), 3);
        assert_eq!(depth("a[0][1]"), 4);
    }
}
