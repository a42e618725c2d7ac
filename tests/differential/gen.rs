//! The seeded generators of the differential test: a small PRNG
//! (SplitMix64), CEL selectors from a small grammar over a device's
//! attributes and capacity, and allocator scenarios drawn from the whole
//! structured-parameters API.

use serde_json::{json, Value};

/// SplitMix64: small, seedable, good enough to draw test cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability p.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

// ---------------------------------------------------------------- CEL ---

/// A generated expression: rendered text and its parts (for shrinking).
#[derive(Debug, Clone)]
pub enum Expr {
    Atom(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Paren(Box<Expr>),
}

impl Expr {
    pub fn render(&self) -> String {
        match self {
            Expr::Atom(s) => s.clone(),
            Expr::Not(e) => format!("!({})", e.render()),
            Expr::And(a, b) => format!("{} && {}", a.render(), b.render()),
            Expr::Or(a, b) => format!("{} || {}", a.render(), b.render()),
            Expr::Cond(c, a, b) => format!("({}) ? ({}) : ({})", c.render(), a.render(), b.render()),
            Expr::Paren(e) => format!("({})", e.render()),
        }
    }

    /// Every proper sub-expression, largest first.
    pub fn subexpressions(&self) -> Vec<Expr> {
        let kids: Vec<&Expr> = match self {
            Expr::Atom(_) => vec![],
            Expr::Not(e) | Expr::Paren(e) => vec![e],
            Expr::And(a, b) | Expr::Or(a, b) => vec![a, b],
            Expr::Cond(c, a, b) => vec![c, a, b],
        };
        let mut out = Vec::new();
        for k in kids {
            out.push(k.clone());
            out.extend(k.subexpressions());
        }
        out
    }
}

const DOMAINS: &[&str] = &["gpu.example.com", "example.com", "other.example.com"];
const STRINGS: &[&str] = &["a", "b", "gpu-1", "", "A"];
const VERSIONS: &[&str] = &["1.0.0", "1.2.0", "2.0.0-rc.1", "1.2.0+build.5", "0.0.1"];
const QUANTITIES: &[&str] = &["1Gi", "8Gi", "16Gi", "500m", "1", "0", "1k", "2000Mi", "1.5G"];

/// A device for CEL: attributes of every type in a few domains (bare names
/// take the driver's), capacities, allowMultipleAllocations.
pub fn cel_device(r: &mut Rng) -> Value {
    let mut attrs = serde_json::Map::new();
    for name in ["model", "index", "healthy", "version", "example.com/numa", "other.example.com/model"] {
        if !r.chance(0.7) {
            continue;
        }
        let v = match name {
            "model" | "other.example.com/model" => json!({"string": r.pick(STRINGS)}),
            "index" | "example.com/numa" => json!({"int": *r.pick(&[0i64, 1, 2, 3, -1, 1 << 40])}),
            "healthy" => json!({"bool": r.chance(0.5)}),
            _ => json!({"version": r.pick(VERSIONS)}),
        };
        attrs.insert(name.to_string(), v);
    }
    // List-typed attributes (KEP-5491).
    for name in ["numas", "models", "flags", "versions", "example.com/numas"] {
        if !r.chance(0.35) {
            continue;
        }
        let n = 1 + r.below(3);
        let v = match name {
            "numas" | "example.com/numas" => {
                json!({"ints": (0..n).map(|_| *r.pick(&[0i64, 1, 2, -1])).collect::<Vec<_>>()})
            }
            "models" => json!({"strings": (0..n).map(|_| *r.pick(STRINGS)).collect::<Vec<_>>()}),
            "flags" => json!({"bools": (0..n).map(|_| r.chance(0.5)).collect::<Vec<_>>()}),
            _ => json!({"versions": (0..n).map(|_| *r.pick(VERSIONS)).collect::<Vec<_>>()}),
        };
        attrs.insert(name.to_string(), v);
    }
    let mut caps = serde_json::Map::new();
    for name in ["memory", "example.com/cores"] {
        if r.chance(0.6) {
            caps.insert(name.to_string(), json!({"value": r.pick(QUANTITIES)}));
        }
    }
    let mut d = json!({"driver": "gpu.example.com", "attributes": attrs, "capacity": caps});
    if r.chance(0.3) {
        d["allowMultipleAllocations"] = json!(r.chance(0.5));
    }
    d
}

fn attr_ref(r: &mut Rng, name: &str) -> String {
    let domain = r.pick(DOMAINS);
    match r.below(3) {
        0 => format!("device.attributes[\"{domain}\"].{name}"),
        1 => format!("device.attributes[\"{domain}\"][\"{name}\"]"),
        _ => format!("device.attributes['{domain}'].{name}"),
    }
}

fn cap_ref(r: &mut Rng) -> String {
    let domain = r.pick(DOMAINS);
    let name = if r.chance(0.7) { "memory" } else { "cores" };
    format!("device.capacity[\"{domain}\"].{name}")
}

/// One atom of the grammar: comparisons, `has`, `in`, the Kubernetes
/// library (quantity, semver), string and list functions, and some
/// type and runtime errors.
fn atom(r: &mut Rng) -> String {
    let s = r.pick(STRINGS);
    let q = r.pick(QUANTITIES);
    let v = r.pick(VERSIONS);
    match r.below(46) {
        // List-typed attributes (KEP-5491) and `includes`.
        34 => format!("{} in {}", r.below(3), attr_ref(r, "numas")),
        35 => format!("{}.exists(n, n {} {})", attr_ref(r, "numas"), r.pick(&["==", ">", "<"]), r.below(3)),
        36 => format!("{}.all(m, m != \"{s}\")", attr_ref(r, "models")),
        37 => format!("size({}) {} {}", attr_ref(r, "numas"), r.pick(&["==", ">="]), r.below(3)),
        38 => format!("{}.includes({})", attr_ref(r, "numas"), r.below(3)),
        39 => {
            let name = *r.pick(&["models", "model"]);
            format!("{}.includes(\"{s}\")", attr_ref(r, name))
        }
        40 => format!("{}.exists(v, v.isGreaterThan(semver(\"{v}\")))", attr_ref(r, "versions")),
        41 => format!("{}[0] == {}", attr_ref(r, "numas"), r.below(2)),
        42 => format!("{} == [{}, {}]", attr_ref(r, "numas"), r.below(2), r.below(3)),
        43 => format!("{}.exists(f, f)", attr_ref(r, "flags")),
        44 => format!("has({}) && {}.exists_one(n, n == 1)", attr_ref(r, "numas"), attr_ref(r, "numas")),
        45 => format!("{}.includes(semver(\"{v}\"))", attr_ref(r, "versions")),
        0 => format!("device.driver == \"{}\"", r.pick(&["gpu.example.com", "nic.example.com"])),
        1 => format!("{} == \"{s}\"", attr_ref(r, "model")),
        2 => format!("{} {} {}", attr_ref(r, "index"), r.pick(&["==", "!=", "<", ">=", ">"]), r.below(4)),
        3 => format!("{} == {}", attr_ref(r, "numa"), r.below(3)),
        4 => attr_ref(r, "healthy"),
        5 => {
            let name = *r.pick(&["model", "index", "numa", "healthy", "nope"]);
            format!("has({})", attr_ref(r, name))
        }
        6 => format!("\"{}\" in device.attributes[\"{}\"]", r.pick(&["model", "index", "numa"]), r.pick(DOMAINS)),
        7 => format!("{}.compareTo(quantity(\"{q}\")) {} 0", cap_ref(r), r.pick(&["<", ">=", "=="])),
        8 => format!("{}.isGreaterThan(quantity(\"{q}\"))", cap_ref(r)),
        9 => format!("{}.isLessThan(quantity(\"{q}\"))", cap_ref(r)),
        10 => format!("{}.isGreaterThan(semver(\"{v}\"))", attr_ref(r, "version")),
        11 => format!("{}.compareTo(semver(\"{v}\")) == 0", attr_ref(r, "version")),
        12 => format!("{}.major() == {}", attr_ref(r, "version"), r.below(3)),
        13 => format!("semver(\"{v}\").minor() == {}", r.below(3)),
        14 => format!("isSemver(\"{}\")", r.pick(&["1.0.0", "v1", "1.0", "01.0.0"])),
        15 => format!("isQuantity(\"{}\")", r.pick(&["1Gi", "x", "1.5", "-1"])),
        16 => format!("quantity(\"{q}\").add({}).isGreaterThan(quantity(\"1\"))", r.below(3)),
        17 => format!("quantity(\"{q}\").sub(quantity(\"{}\")).sign() {} 0", r.pick(QUANTITIES), r.pick(&["<", "=="])),
        18 => format!("quantity(\"{q}\").isInteger()"),
        19 => format!("quantity(\"{q}\").asApproximateFloat() > 1.0"),
        20 => format!("{}.startsWith(\"{}\")", attr_ref(r, "model"), r.pick(&["a", "gpu", ""])),
        21 => format!("{}.matches(\"{}\")", attr_ref(r, "model"), r.pick(&["^a", "[0-9]", "gpu-.*"])),
        22 => format!("size({}) {} 1", attr_ref(r, "model"), r.pick(&[">", "=="])),
        23 => "device.allowMultipleAllocations".to_string(),
        24 => format!("[1, 2, 3].exists(x, x == {})", r.below(5)),
        25 => format!("device.attributes[\"{}\"].all(k, k != \"\")", r.pick(DOMAINS)),
        26 => format!("{}.endsWith(\"{}\") || {}.contains(\"-\")", attr_ref(r, "model"), s, attr_ref(r, "model")),
        // Type errors (cel-go refuses them when it can tell).
        27 => format!("{} + 1 == 2", attr_ref(r, "model")),
        28 => "1 + \"a\" == \"1a\"".to_string(),
        29 => format!("{} == \"x\"", cap_ref(r)),
        // Runtime errors.
        30 => format!("1 / {} == 1", r.below(2)),
        31 => format!("quantity(\"{}\").isInteger()", r.pick(&["x", "1Gi", "1.5.5"])),
        32 => format!("device.{} == 1", r.pick(&["nope", "attributes.x", "driver.size"])),
        _ => format!(
            "{} == {}",
            r.pick(&["true", "false", "1", "'a'", "2.0", "null"]),
            r.pick(&["true", "1", "'a'", "2.0", "null"])
        ),
    }
}

fn expr(r: &mut Rng, depth: usize) -> Expr {
    if depth == 0 || r.chance(0.45) {
        return Expr::Atom(atom(r));
    }
    match r.below(5) {
        0 => Expr::Not(Box::new(expr(r, depth - 1))),
        1 => Expr::And(Box::new(expr(r, depth - 1)), Box::new(expr(r, depth - 1))),
        2 => Expr::Or(Box::new(expr(r, depth - 1)), Box::new(expr(r, depth - 1))),
        3 => Expr::Cond(Box::new(expr(r, depth - 1)), Box::new(expr(r, depth - 1)), Box::new(expr(r, depth - 1))),
        _ => Expr::Paren(Box::new(expr(r, depth - 1))),
    }
}

/// Hostile expressions: deep nesting, long chains, very long text, the
/// cost limit.
fn hostile(r: &mut Rng) -> Expr {
    let n = *r.pick(&[10usize, 60, 100, 200, 249, 250, 251, 300, 1000, 1400, 3000]);
    Expr::Atom(match r.below(8) {
        0 => format!("{}true{}", "(".repeat(n), ")".repeat(n)),
        1 => format!("{}driver == \"x\"", "device.".repeat(n)),
        2 => format!("{}true", "!".repeat(n)),
        3 => vec!["true"; n].join(" || "),
        4 => format!("device.driver == \"{}\"", "x".repeat(n * 10)),
        5 => format!("{}1{} == []", "[".repeat(n.min(300)), "]".repeat(n.min(300))),
        6 => format!(
            "[{}].all(x, [{}].all(y, x != y || x == y))",
            vec!["1"; n.min(100)].join(","),
            vec!["2"; n.min(100)].join(",")
        ),
        _ => format!("device.attributes[\"gpu.example.com\"].model.matches(\"{}\")", "a*".repeat(n.min(500))),
    })
}

/// One CEL case: (the expression's tree, the oracle's input).
pub fn cel_case(r: &mut Rng) -> (Expr, Value) {
    let e = if r.chance(0.04) { hostile(r) } else { expr(r, 3) };
    let device = cel_device(r);
    let case = json!({"expression": e.render(), "device": device, "listTypeAttributes": r.chance(0.5)});
    (e, case)
}

// ---------------------------------------------------------- allocator ---

const DRIVERS: &[&str] = &["gpu.example.com", "nic.example.com"];

/// What a pool's devices may carry beyond the basics.
#[derive(Clone, Copy, Default)]
struct PoolKind {
    /// Devices consume from counter set `set-0`.
    counters: bool,
    /// Some devices have bindingConditions (KEP-5007).
    binding: bool,
    /// Counter consumptions may declare compatibilityGroups (KEP-5963).
    groups: bool,
}

/// One device of a slice.
fn device(r: &mut Rng, name: String, kind: PoolKind) -> Value {
    let mut attrs = serde_json::Map::new();
    if r.chance(0.8) {
        attrs.insert("model".into(), json!({"string": r.pick(&["a", "b"])}));
    }
    if r.chance(0.7) {
        attrs.insert("index".into(), json!({"int": r.below(4)}));
    }
    if r.chance(0.6) {
        attrs.insert("example.com/numa".into(), json!({"int": r.below(2)}));
    }
    if r.chance(0.4) {
        attrs.insert("healthy".into(), json!({"bool": r.chance(0.7)}));
    }
    if r.chance(0.4) {
        attrs.insert("driverVersion".into(), json!({"version": r.pick(&["1.0.0", "1.2.0", "2.0.0-rc.1"])}));
    }
    // List-typed attributes (KEP-5491): a list where constraints look
    // (example.com/numa, model), and lists of their own.
    if r.chance(0.15) {
        let n = 1 + r.below(3);
        let numas: Vec<usize> = (0..n).map(|_| r.below(3)).collect();
        attrs.insert("example.com/numa".into(), json!({"ints": numas}));
    }
    if r.chance(0.1) {
        attrs.insert("model".into(), json!({"strings": [r.pick(&["a", "b"]), r.pick(&["b", "c"])]}));
    }
    if r.chance(0.25) {
        let n = 1 + r.below(3);
        let numas: Vec<usize> = (0..n).map(|_| r.below(3)).collect();
        attrs.insert("numas".into(), json!({"ints": numas}));
    }
    if r.chance(0.1) {
        attrs.insert("versions".into(), json!({"versions": [r.pick(&["1.0.0", "1.2.0+b.1"]), "2.0.0"]}));
    }
    let mut d = json!({"name": name, "attributes": attrs});
    let multi = r.chance(0.25);
    if multi || r.chance(0.3) {
        let mut cap = json!({"value": r.pick(&["8Gi", "16Gi"])});
        if multi && r.chance(0.6) {
            cap["requestPolicy"] = match r.below(3) {
                0 => json!({"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}),
                1 => json!({"default": "2Gi", "validValues": ["2Gi", "4Gi"]}),
                _ => json!({"default": "4Gi", "validRange": {"min": "2Gi", "max": "8Gi"}}),
            };
        }
        d["capacity"] = json!({"memory": cap});
    }
    if multi {
        d["allowMultipleAllocations"] = json!(true);
    }
    if kind.counters && r.chance(0.7) {
        let mut c = json!({"counterSet": "set-0", "counters": {"mem": {"value": r.pick(&["2Gi", "4Gi"])}}});
        if kind.groups && r.chance(0.7) {
            let groups: &[&[&str]] = &[&["mig"], &["vgpu"], &["mig", "vgpu"], &["vgpu", "other"]];
            c["compatibilityGroups"] = json!(r.pick(groups));
        }
        d["consumesCounters"] = json!([c]);
    }
    if r.chance(0.1) {
        d["taints"] = json!([{"key": "k", "value": "v", "effect": r.pick(&["NoSchedule", "NoExecute", "None"])}]);
    }
    // Binding conditions (KEP-5007): both lists or neither (validation
    // requires them together), bindsToNode now and then.
    if kind.binding && r.chance(0.5) {
        let conditions: &[&[&str]] = &[&["ready"], &["ready", "attached"], &["attached"]];
        d["bindingConditions"] = json!(r.pick(conditions));
        d["bindingFailureConditions"] = json!(r.pick(&[&["failed"][..], &["failed", "timeout"][..]]));
        if r.chance(0.5) {
            d["bindsToNode"] = json!(true);
        }
    }
    d
}

/// The node's slices: pools of each driver, one to three slices each, an
/// older generation left behind, a pool incomplete now and then, shared
/// counters in a slice of their own.
fn slices(r: &mut Rng, node: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut names: Vec<usize> = (0..100).collect();
    for driver in DRIVERS {
        let pools = 1 + r.below(2);
        let mut pool_names = vec!["pool-b", "pool-a", "pool-c"];
        for _ in 0..pools {
            let pool = pool_names.remove(r.below(pool_names.len()));
            let generation = 1 + r.below(2) as i64;
            let counters = r.chance(0.3);
            let kind = PoolKind { counters, binding: r.chance(0.3), groups: counters && r.chance(0.5) };
            let n = 1 + r.below(2);
            let total = n + usize::from(counters);
            let count = if r.chance(0.07) { total + 1 } else { total };
            let mut next_dev = 0;
            let mut slice_name = |r: &mut Rng| {
                let i = names.remove(r.below(names.len()));
                format!("slice-{i:02}")
            };
            for _ in 0..n {
                let k = r.below(4);
                let devices: Vec<Value> = (0..k)
                    .map(|_| {
                        let name = if r.chance(0.02) && next_dev > 0 { next_dev - 1 } else { next_dev };
                        next_dev = name + 1;
                        device(r, format!("dev-{name}"), kind)
                    })
                    .collect();
                out.push(json!({"metadata": {"name": slice_name(r)}, "spec": {
                    "driver": driver, "nodeName": node,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                    "devices": devices}}));
            }
            if counters {
                out.push(json!({"metadata": {"name": slice_name(r)}, "spec": {
                    "driver": driver, "nodeName": node,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                    "sharedCounters": [{"name": "set-0", "counters": {"mem": {"value": r.pick(&["8Gi", "6Gi"])}}}]}}));
            }
            if generation == 2 && r.chance(0.4) {
                let devices: Vec<Value> = (0..2).map(|i| device(r, format!("old-{i}"), PoolKind::default())).collect();
                out.push(json!({"metadata": {"name": slice_name(r)}, "spec": {
                    "driver": driver, "nodeName": node,
                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}}));
            }
        }
    }
    // The API server lists in name order; the allocator must not depend on it.
    if r.chance(0.5) {
        out.reverse();
    }
    out
}

fn classes(r: &mut Rng) -> Vec<Value> {
    let sel = |e: &str| json!({"cel": {"expression": e}});
    let mut gpu =
        json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [sel("device.driver == \"gpu.example.com\"")]}});
    if r.chance(0.3) {
        gpu["spec"]["config"] = json!([{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}]);
    }
    vec![
        gpu,
        json!({"metadata": {"name": "nic"}, "spec": {"selectors": [sel("device.driver == 'nic.example.com'")]}}),
        json!({"metadata": {"name": "any"}, "spec": {}}),
        json!({"metadata": {"name": "big"}, "spec": {"selectors": [sel(
            "has(device.capacity[device.driver].memory) && device.capacity[device.driver].memory.compareTo(quantity(\"10Gi\")) >= 0")]}}),
        json!({"metadata": {"name": "v1"}, "spec": {"selectors": [sel(
            "has(device.attributes[device.driver].driverVersion) && device.attributes[device.driver].driverVersion.isLessThan(semver(\"2.0.0\"))")]}}),
    ]
}

/// A claim selector from the grammar (on the request's devices).
fn claim_selector(r: &mut Rng) -> String {
    match r.below(12) {
        // List-typed attributes (KEP-5491) and `includes`.
        8 => format!("has(device.attributes[device.driver].numas) && {} in device.attributes[device.driver].numas", r.below(3)),
        9 => format!(
            "has(device.attributes[device.driver].numas) && device.attributes[device.driver].numas.includes({})",
            r.below(3)
        ),
        // A runtime error on devices without the list.
        10 => format!("device.attributes[device.driver].numas.exists(n, n >= {})", r.below(3)),
        11 => "!has(device.attributes[device.driver].versions) || device.attributes[device.driver].versions.exists(v, v.isGreaterThan(semver(\"1.1.0\")))".to_string(),
        0 => format!("device.attributes[device.driver].model == \"{}\"", r.pick(&["a", "b"])),
        1 => format!("device.attributes[device.driver].index >= {}", r.below(3)),
        2 => "has(device.attributes[\"example.com\"].numa)".to_string(),
        3 => format!("device.attributes[\"example.com\"].numa == {}", r.below(2)),
        4 => "device.allowMultipleAllocations".to_string(),
        5 => "!has(device.attributes[device.driver].healthy) || device.attributes[device.driver].healthy".to_string(),
        // A runtime error on devices without the attribute.
        6 => "device.attributes[device.driver].index < 3".to_string(),
        _ => "'model' in device.attributes[device.driver]".to_string(),
    }
}

fn exact(r: &mut Rng, admin_ok: bool) -> Value {
    let class = if r.chance(0.03) { "nope" } else { r.pick(&["gpu", "nic", "any", "gpu", "big", "v1"]) };
    let mut e = json!({"deviceClassName": class});
    if r.chance(0.15) {
        e["allocationMode"] = json!("All");
    } else if r.chance(0.5) {
        e["count"] = json!(1 + r.below(3));
    }
    if r.chance(0.4) {
        e["selectors"] = json!([{"cel": {"expression": claim_selector(r)}}]);
    }
    if admin_ok && r.chance(0.05) {
        e["adminAccess"] = json!(true);
    }
    if r.chance(0.15) {
        e["tolerations"] = match r.below(3) {
            0 => json!([{"key": "k", "operator": "Exists"}]),
            1 => json!([{"operator": "Exists", "effect": "NoSchedule"}]),
            _ => json!([{"key": "k", "operator": "Equal", "value": "v"}]),
        };
    }
    if r.chance(0.15) {
        e["capacity"] = json!({"requests": {"memory": r.pick(&["1Gi", "3Gi", "5Gi"])}});
    }
    e
}

/// A derived attribute's expression (KEP-6080): scalars, lists, guarded
/// and unguarded lookups (a runtime error stops the claim).
fn derived_expression(r: &mut Rng) -> String {
    r.pick(&[
        "device.attributes[\"example.com\"].numa",
        "has(device.attributes[\"example.com\"].numa) ? device.attributes[\"example.com\"].numa : 7",
        "has(device.attributes[device.driver].index) ? device.attributes[device.driver].index / 2 : -1",
        "device.attributes[device.driver].index % 2",
        "device.driver",
        "has(device.attributes[device.driver].numas) ? device.attributes[device.driver].numas : [0]",
        "[0, 1]",
        "has(device.attributes[device.driver].model) ? device.attributes[device.driver].model : \"none\"",
        "has(device.attributes[device.driver].driverVersion) ? device.attributes[device.driver].driverVersion : semver(\"0.0.1\")",
    ])
    .to_string()
}

fn claim(r: &mut Rng, name: &str) -> Value {
    let n = 1 + r.below(2);
    // A derived attribute some requests define and a constraint names.
    let derived =
        r.chance(0.15).then(|| (r.pick(&["derived/numa", "example.com/numa"]).to_string(), derived_expression(r)));
    let mut requests = Vec::new();
    for i in 0..n {
        let rname = format!("r{i}");
        if r.chance(0.2) {
            let subs: Vec<Value> = (0..2)
                .map(|j| {
                    let mut s = exact(r, false);
                    s["name"] = json!(format!("s{j}"));
                    if let Some((n, e)) = derived.as_ref().filter(|_| r.chance(0.8)) {
                        s["derivedAttributes"] = json!([{"name": n, "expression": e}]);
                    }
                    s
                })
                .collect();
            requests.push(json!({"name": rname, "firstAvailable": subs}));
        } else {
            let mut e = exact(r, true);
            if let Some((n, x)) = derived.as_ref().filter(|_| r.chance(0.8)) {
                e["derivedAttributes"] = json!([{"name": n, "expression": x}]);
            }
            requests.push(json!({"name": rname, "exactly": e}));
        }
    }
    let mut devices = json!({"requests": requests});
    if let Some((attr, _)) = &derived {
        let c = if r.chance(0.6) { json!({"matchAttribute": attr}) } else { json!({"distinctAttribute": attr}) };
        devices["constraints"] = json!([c]);
    } else if r.chance(0.3) {
        let attr = r.pick(&["example.com/numa", "gpu.example.com/model", "gpu.example.com/numas"]);
        let mut c = if r.chance(0.6) { json!({"matchAttribute": attr}) } else { json!({"distinctAttribute": attr}) };
        if n > 1 && r.chance(0.5) {
            c["requests"] = json!(["r0"]);
        }
        devices["constraints"] = json!([c]);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}})
}

/// Claims already allocated by a scheduler: some of the node's devices
/// (a shareable one with a share ID and consumed capacity).
fn allocated(r: &mut Rng, slices: &[Value]) -> Vec<Value> {
    let mut devs: Vec<(String, String, Value)> = Vec::new();
    for s in slices {
        for d in s["spec"]["devices"].as_array().into_iter().flatten() {
            let driver = s["spec"]["driver"].as_str().unwrap_or_default().to_string();
            let pool = s["spec"]["pool"]["name"].as_str().unwrap_or_default().to_string();
            devs.push((driver, pool, d.clone()));
        }
    }
    let mut out = Vec::new();
    if devs.is_empty() {
        return out;
    }
    for i in 0..r.below(3) {
        let (driver, pool, d) = devs[r.below(devs.len())].clone();
        let mut result = json!({"request": "r0", "driver": driver, "pool": pool, "device": d["name"]});
        if d["allowMultipleAllocations"] == json!(true) {
            result["shareID"] = json!(format!("00000000-0000-4000-8000-{:012x}", r.next() & 0xffff_ffff_ffff));
            result["consumedCapacity"] = json!({"memory": r.pick(&["1Gi", "4Gi", "8Gi"])});
        } else if r.chance(0.1) {
            result["adminAccess"] = json!(true);
        }
        out.push(json!({"metadata": {"name": format!("held-{i}"), "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "any"}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}));
    }
    out
}

/// One allocator scenario (the oracle's input).
pub fn scenario(r: &mut Rng) -> Value {
    let node = "node-1";
    let slices = slices(r, node);
    let allocated = allocated(r, &slices);
    let claims: Vec<Value> = (0..1 + r.below(3)).map(|i| claim(r, &format!("claim-{i}"))).collect();
    let mut sc = json!({
        "bindingConditions": r.chance(0.5),
        "features": {
            "listTypeAttributes": r.chance(0.5),
            "compatibilityGroups": r.chance(0.5),
            "derivedAttributes": r.chance(0.5),
            "consumableCapacityOff": r.chance(0.25),
        },
        "node": node,
        "slices": slices,
        "classes": classes(r),
        "allocated": allocated,
        "claims": claims,
    });
    // DRAConsumableCapacity off: half the time with every other feature off
    // too, so that upstream runs its `stable` allocator (1.34–1.35's defaults).
    if sc["features"]["consumableCapacityOff"] == json!(true) && r.chance(0.5) {
        sc["bindingConditions"] = json!(false);
        for f in ["listTypeAttributes", "compatibilityGroups", "derivedAttributes"] {
            sc["features"][f] = json!(false);
        }
    }
    sc
}
