//! Differential tests against upstream's own code (issue 45): the scheduler's
//! allocator (`k8s.io/dynamic-resource-allocation/structured`) and its CEL
//! package (`k8s.io/dynamic-resource-allocation/cel`), pinned in
//! tests/upstream/go.mod and built by `bash tests/upstream/build.sh` into
//! target/upstream/bin/{allocate,cel}. Each oracle reads scenarios as JSON
//! lines and answers one line each; the same scenario runs through dpctl's
//! allocator and CEL; the answers must agree.
//!
//! Scenarios come from a seeded generator ([`gen`]). `DPCTL_DIFF_SCENARIOS`
//! sets how many of each (default 2,000); `DPCTL_DIFF_SEED` the seed
//! (default: from the clock, printed). Scenario `i` of seed `s` is drawn
//! from seed `s + i`, so `DPCTL_DIFF_SEED=s+i DPCTL_DIFF_SCENARIOS=1`
//! replays it alone. A divergence is shrunk and written to
//! tests/upstream/regressions/{allocator,cel}/NAME.json; every file there
//! runs in every run. Oracles not built: a visible note and no comparison
//! (with `CI` set, a failure naming tests/upstream/build.sh).

#[path = "differential/gen.rs"]
mod gen;

use dpctl::controlplane::allocator::{self, cel, Allocated, Candidate, Catalog, Unallocatable};
use dpctl::controlplane::apiserver::claims::v1_spec;
use dpctl::controlplane::scheduler;
use dpctl::kubelet::manifest::objects::{self as objects, Object};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The oracle binary NAME, or None (with the note or, under CI, a failure).
fn oracle(name: &str) -> Option<PathBuf> {
    let bin = root().join("target/upstream/bin").join(name);
    if bin.is_file() {
        return Some(bin);
    }
    let note = format!(
        "differential: the upstream oracle {} is not built: run `bash tests/upstream/build.sh` (the {name} differential did NOT run)",
        bin.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{note}");
    }
    eprintln!("{note}");
    None
}

/// One batch through an oracle: each input a line, each answer a line.
fn ask(bin: &Path, inputs: &[Value]) -> Vec<Value> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let lines: Vec<String> = inputs.iter().map(|v| v.to_string()).collect();
    let writer = std::thread::spawn(move || {
        for l in lines {
            if writeln!(stdin, "{l}").is_err() {
                break;
            }
        }
    });
    let out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let answers: Vec<Value> =
        out.lines().map(|l| serde_json::from_str(&l.expect("oracle output")).expect("oracle answers JSON")).collect();
    writer.join().expect("writer");
    let status = child.wait().expect("oracle exit");
    assert!(status.success(), "{} failed: {status}", bin.display());
    assert_eq!(answers.len(), inputs.len(), "{} answered {} of {} inputs", bin.display(), answers.len(), inputs.len());
    answers
}

fn count() -> u64 {
    std::env::var("DPCTL_DIFF_SCENARIOS").ok().and_then(|n| n.parse().ok()).unwrap_or(2000)
}

fn seed() -> u64 {
    match std::env::var("DPCTL_DIFF_SEED").ok().and_then(|n| n.parse().ok()) {
        Some(s) => s,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000)
            .unwrap_or(1),
    }
}

/// The regression cases of `kind`, by file name.
fn regressions(kind: &str) -> Vec<(String, Value)> {
    let dir = root().join("tests/upstream/regressions").join(kind);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((p.file_name().unwrap_or_default().to_string_lossy().into_owned(), v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Write a minimal failing case where it becomes a regression case.
fn write_regression(kind: &str, name: &str, case: &Value) -> PathBuf {
    let dir = root().join("tests/upstream/regressions").join(kind);
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("{name}.json"));
    let _ = std::fs::write(&p, serde_json::to_string_pretty(case).unwrap_or_default() + "\n");
    p
}

// ---------------------------------------------------------------- CEL ---

/// The device of a CEL case as dpctl's allocator sees it.
fn candidate(device: &Value) -> Candidate {
    let driver = device["driver"].as_str().unwrap_or_default().to_string();
    let slice = json!({"driver": driver, "pool": {"name": "p"}, "devices": [{
        "name": "d",
        "attributes": device["attributes"],
        "capacity": device["capacity"],
        "allowMultipleAllocations": device["allowMultipleAllocations"],
    }]});
    let obj = objects::parse(&json!({"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": slice}))
        .unwrap_or_else(|e| panic!("the generated device does not parse: {e}: {device}"));
    allocator::from_slices([&obj]).pop().expect("one device")
}

/// dpctl's answer in the oracle's terms: (validation, eval).
fn dpctl_cel(case: &Value) -> (String, String, String) {
    let expr = case["expression"].as_str().unwrap_or_default();
    let validation = match cel::check(expr) {
        Ok(()) => "ok".to_string(),
        Err(cel::Refused::TooLong { .. }) => "tooLong".to_string(),
        Err(_) => "invalid".to_string(),
    };
    let (eval, detail) = match cel::evaluate(expr, &candidate(&case["device"])) {
        cel::Outcome::Refused(r) => ("compileError".to_string(), r.to_string()),
        cel::Outcome::Value(b) => (b.to_string(), String::new()),
        cel::Outcome::Error(e) => ("runtimeError".to_string(), e),
    };
    (validation, eval, detail)
}

/// Whether upstream refused a selector for a type error or its cost, which
/// dpctl cannot tell (it has no CEL type checker nor cost estimator:
/// docs/fidelity.md, "CEL"): such selectors are not compared.
fn type_or_cost(up: &Value) -> bool {
    let detail = up["validationDetail"].as_str().unwrap_or_default();
    up["validation"] == "cost"
        || (up["validation"] == "invalid"
            && [
                "found no matching overload",
                "undefined field",
                "undeclared reference",
                "expected type",
                "does not support field selection",
                // An attribute is `any` without DRAListTypeAttributes: a
                // comprehension over it is a type error (KEP-5491).
                "cannot be range of a comprehension",
            ]
            .iter()
            .any(|m| detail.contains(m)))
}

/// Whether upstream refused a new selector only for what
/// DRAListTypeAttributes adds to the environment (KEP-5491): a
/// comprehension over an attribute, `includes`.
fn list_gated(up: &Value) -> bool {
    let detail = up["validationDetail"].as_str().unwrap_or_default();
    // Only when that is its one complaint (cel-go lists every error).
    up["validation"] == "invalid"
        && detail.matches("ERROR:").count() == 1
        && (detail.contains("cannot be range of a comprehension")
            || detail.contains("undeclared reference to 'includes'"))
}

/// Whether dpctl agrees with upstream's answer, or why not. What counts as
/// the same (docs/fidelity.md, "CEL"):
/// - validation: refused or not (too long, syntax, nesting), except what
///   only a type checker or cost estimator refuses ([`type_or_cost`]);
/// - evaluation: the same value, or both an error.
fn cel_agrees(up: &Value, case: &Value) -> Result<(), String> {
    let (validation, eval, detail) = dpctl_cel(case);
    let uv = up["validation"].as_str().unwrap_or_default();
    let ue = up["eval"].as_str().unwrap_or_default();
    let refused_up = uv != "ok";
    let refused_me = validation != "ok";
    let why = |what: &str| {
        Err(format!(
            "{what}: upstream validation {uv} ({}), eval {ue} ({}); dpctl validation {validation}, eval {eval} ({detail})",
            up["validationDetail"].as_str().unwrap_or_default(),
            up["evalDetail"].as_str().unwrap_or_default()
        ))
    };
    if up.get("error").is_some_and(|e| !e.is_null()) {
        return Err(format!("the oracle failed: {}", up["error"]));
    }
    if uv == "tooLong" && validation != "tooLong" {
        return why("length limit");
    }
    if refused_me && !refused_up {
        return why("dpctl refuses a selector upstream accepts");
    }
    if refused_up && !refused_me && !type_or_cost(up) {
        return why("upstream refuses a selector dpctl accepts");
    }
    // A selector new expressions refuse only because DRAListTypeAttributes
    // is off is still run as a stored one (the allocator's environment has
    // list-typed attributes and `includes` whatever the gate): its value is
    // compared. Other refusals: nothing to compare.
    if refused_up && !list_gated(up) {
        return Ok(());
    }
    let same = matches!(
        (ue, eval.as_str()),
        ("true", "true") | ("false", "false") | ("runtimeError" | "compileError", "runtimeError" | "compileError")
    );
    if same {
        Ok(())
    } else {
        why("evaluation")
    }
}

/// A smaller case that still disagrees (the expression's sub-expressions,
/// then the device without each attribute and capacity).
fn shrink_cel(bin: &Path, case: &Value, tree: Option<&gen::Expr>) -> Value {
    let mut best = case.clone();
    let mut tries: Vec<Value> = Vec::new();
    if let Some(t) = tree {
        for sub in t.subexpressions() {
            let mut c = best.clone();
            c["expression"] = json!(sub.render());
            tries.push(c);
        }
    }
    for key in ["attributes", "capacity"] {
        for name in best["device"][key].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            let mut c = best.clone();
            if let Some(m) = c["device"][key].as_object_mut() {
                m.remove(&name);
            }
            tries.push(c);
        }
    }
    if tries.is_empty() {
        return best;
    }
    let answers = ask(bin, &tries);
    // Shortest expression that still disagrees, then fewest device fields.
    let mut fails: Vec<&Value> =
        tries.iter().zip(&answers).filter(|(c, a)| cel_agrees(a, c).is_err()).map(|(c, _)| c).collect();
    fails.sort_by_key(|c| c.to_string().len());
    if let Some(f) = fails.first() {
        if f.to_string().len() < best.to_string().len() {
            best = (*f).clone();
            return shrink_cel(bin, &best, None);
        }
    }
    best
}

#[test]
fn cel_agrees_with_upstream() {
    let Some(bin) = oracle("cel") else { return };
    let base = seed();
    let n = count();
    eprintln!("differential CEL: seed {base}, {n} expressions (DPCTL_DIFF_SEED, DPCTL_DIFF_SCENARIOS)");
    let mut trees = Vec::new();
    let mut cases = Vec::new();
    for i in 0..n {
        let mut rng = gen::Rng::new(base.wrapping_add(i));
        let (tree, case) = gen::cel_case(&mut rng);
        trees.push(Some(tree));
        cases.push(case);
    }
    let regs = regressions("cel");
    for (_, c) in &regs {
        trees.push(None);
        cases.push(c.clone());
    }
    let t = std::time::Instant::now();
    let answers = ask(&bin, &cases);
    eprintln!("differential CEL: upstream answered in {:.1?}", t.elapsed());
    let t = std::time::Instant::now();
    let mine: Vec<(String, String, String)> = cases.iter().map(dpctl_cel).collect();
    eprintln!("differential CEL: dpctl answered in {:.1?}", t.elapsed());
    drop(mine);
    let mut failures = Vec::new();
    let skipped = answers.iter().filter(|a| type_or_cost(a)).count();
    eprintln!(
        "differential CEL: {skipped} of {} refused by upstream's type checker or cost limit, not compared",
        answers.len()
    );
    for (i, (case, up)) in cases.iter().zip(&answers).enumerate() {
        if let Err(why) = cel_agrees(up, case) {
            let (label, file) = if (i as u64) < n {
                let s = base.wrapping_add(i as u64);
                let small = shrink_cel(&bin, case, trees[i].as_ref());
                (format!("seed {s}"), Some(write_regression("cel", &format!("seed-{s}"), &small)))
            } else {
                (format!("regression {}", regs[i - n as usize].0), None)
            };
            failures.push(format!(
                "{label}: {why}\n  case: {}{}",
                case,
                file.map(|f| format!("\n  minimal case written to {}", f.display())).unwrap_or_default()
            ));
            if failures.len() >= 10 {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "CEL diverges from upstream (seed {base}):\n{}", failures.join("\n"));
}

// ---------------------------------------------------------- allocator ---

/// The scheduler's features a scenario names (the oracle's `Features`).
fn features(sc: &Value) -> allocator::Features {
    let on = |v: &Value| v.as_bool().unwrap_or(false);
    allocator::Features {
        binding_conditions: on(&sc["bindingConditions"]),
        list_type_attributes: on(&sc["features"]["listTypeAttributes"]),
        compatibility_groups: on(&sc["features"]["compatibilityGroups"]),
        derived_attributes: on(&sc["features"]["derivedAttributes"]),
        // On unless the scenario turns it off (1.34–1.35's default).
        consumable_capacity: !on(&sc["features"]["consumableCapacityOff"]),
    }
}

/// dpctl's answer to an allocator scenario, in the oracle's terms: per
/// claim the outcome and, when allocated, the whole `status.allocation`
/// as dpctl's scheduler writes it (each shareID replaced by its form).
pub fn dpctl_allocate(sc: &Value) -> Value {
    let kinded = |v: &Value, kind: &str| {
        let mut v = v.clone();
        v["kind"] = json!(kind);
        v
    };
    let mut objs: Vec<Object> = Vec::new();
    for s in sc["slices"].as_array().into_iter().flatten() {
        match objects::parse(&kinded(s, "ResourceSlice")) {
            Ok(o) => objs.push(o),
            Err(e) => return json!({"error": format!("slice refused: {e}")}),
        }
    }
    for c in sc["classes"].as_array().into_iter().flatten() {
        match objects::parse(&kinded(c, "DeviceClass")) {
            Ok(o) => objs.push(o),
            Err(e) => return json!({"error": format!("class refused: {e}")}),
        }
    }
    let class_config: BTreeMap<String, Vec<Value>> = objs
        .iter()
        .filter_map(|o| match o {
            Object::Class { name, config, .. } => Some((name.clone(), config.clone())),
            _ => None,
        })
        .collect();
    let allocated: Vec<Object> = sc["allocated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| objects::parse(&kinded(c, "ResourceClaim")).ok())
        .collect();
    let features = features(sc);
    let node = sc["node"].as_str().unwrap_or_default();
    let candidates = allocator::from_slices_with(&objs, &features);
    let mut catalog = Catalog::with(&objs, features);
    let mut taken: Vec<Allocated> = allocator::held(&allocated);
    let drivers = BTreeSet::new();
    let mut answers = Vec::new();
    for c in sc["claims"].as_array().into_iter().flatten() {
        let (key, spec) = match objects::parse(&kinded(c, "ResourceClaim")) {
            Ok(Object::Claim { namespace, name, spec, .. }) => {
                // The namespace may ask for adminAccess (the API server checked it).
                catalog.admin_namespaces.insert(namespace.clone());
                (format!("{namespace}/{name}"), spec)
            }
            Ok(_) => unreachable!("a ResourceClaim parses as one"),
            Err(e) => {
                answers.push(json!({"outcome": "error", "error": format!("claim refused: {e}")}));
                continue;
            }
        };
        let held: Vec<&Allocated> = taken.iter().collect();
        match allocator::allocate(&key, &spec, &catalog, &candidates, &held, &drivers) {
            Ok(results) => {
                let mut allocation = scheduler::allocation_result(&results, &v1_spec(&c["spec"]), &class_config, node);
                for r in allocation["devices"]["results"].as_array_mut().into_iter().flatten() {
                    if let Some(id) = r["shareID"].as_str() {
                        r["shareID"] = json!(share_form(id));
                    }
                }
                taken.extend(results);
                answers.push(json!({"outcome": "allocated", "allocation": allocation}));
            }
            Err(e) => {
                let outcome = match e {
                    Unallocatable::TooFew(_) | Unallocatable::NoSubRequest { .. } => "unallocatable",
                    _ => "error",
                };
                answers.push(json!({"outcome": outcome, "error": e.to_string()}));
            }
        }
    }
    json!({"claims": answers})
}

fn share_form(id: &str) -> String {
    let uuid = id.len() == 36
        && id.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_digit() || ('a'..='f').contains(&c)
            }
        });
    if uuid {
        "uuid".into()
    } else {
        format!("other:{id}")
    }
}

/// Whether dpctl's answer agrees with upstream's: per claim, the outcome
/// (an upstream "error" — a fatal problem of the input — and
/// "unallocatable" both leave the claim unallocated; dpctl must not
/// allocate it either) and, when allocated, the whole allocation: the
/// devices chosen in order with every field of each result (tolerations,
/// bindingConditions, bindingFailureConditions, consumedCapacity, the
/// shareID's form), the config and the node selector.
///
/// A scenario upstream runs with its `stable` allocator (DRAConsumableCapacity
/// off and no other beyond-stable feature, as 1.34–1.35 by default) is
/// compared on its first claim only, without which devices were picked:
/// `stable` tries pools in Go map order (pools_stable.go GatherPools ranges
/// over a map and has no sortPoolsByID) and a pool's slices in the order
/// given, so its pick is not deterministic, nor what later claims find.
/// dpctl keeps incubating's order (pools by ID, slices by name). For the
/// same reason a selector's runtime error on either side (which stops the
/// claim only if met before a fitting device) leaves the scenario uncompared.
fn allocator_agrees_in(sc: &Value, up: &Value, mine: &Value) -> Result<(), String> {
    if !upstream_uses_stable(sc) {
        return allocator_agrees(up, mine);
    }
    let runtime_error = |v: &Value| v["claims"][0]["error"].as_str().is_some_and(|e| e.contains("CEL runtime error"));
    if runtime_error(up) || runtime_error(mine) {
        return Ok(());
    }
    let first = |v: &Value| {
        let mut v = v.clone();
        if let Some(claims) = v["claims"].as_array_mut() {
            claims.truncate(1);
            for c in claims.iter_mut() {
                for r in c["allocation"]["devices"]["results"].as_array_mut().into_iter().flatten() {
                    if let Some(r) = r.as_object_mut() {
                        for f in ["driver", "pool", "device"] {
                            r.remove(f);
                        }
                    }
                }
            }
        }
        v
    };
    allocator_agrees(&first(up), &first(mine))
}

/// Whether upstream's structured.NewAllocator picks `stable` for `sc`.
fn upstream_uses_stable(sc: &Value) -> bool {
    let on = |v: &Value| v.as_bool().unwrap_or(false);
    let f = &sc["features"];
    on(&f["consumableCapacityOff"])
        && !on(&sc["bindingConditions"])
        && !on(&f["listTypeAttributes"])
        && !on(&f["compatibilityGroups"])
        && !on(&f["derivedAttributes"])
}

fn allocator_agrees(up: &Value, mine: &Value) -> Result<(), String> {
    if let Some(e) = up.get("error").filter(|e| !e.is_null()) {
        return Err(format!("the oracle failed: {e}"));
    }
    if let Some(e) = mine.get("error").filter(|e| !e.is_null()) {
        return Err(format!("dpctl refused the scenario: {e}"));
    }
    let none = Vec::new();
    // An answer without claims (Go's nil slice) is an empty one.
    let u = up["claims"].as_array().unwrap_or(&none);
    let m = mine["claims"].as_array().unwrap_or(&none);
    if u.len() != m.len() {
        return Err(format!("{} answers upstream, {} dpctl", u.len(), m.len()));
    }
    for (i, (a, b)) in u.iter().zip(m).enumerate() {
        let (ao, bo) = (a["outcome"].as_str().unwrap_or_default(), b["outcome"].as_str().unwrap_or_default());
        let allocated = (ao == "allocated", bo == "allocated");
        if allocated.0 != allocated.1 {
            return Err(format!("claim #{i}: upstream {a}\n  dpctl {b}"));
        }
        if allocated.0 && a["allocation"] != b["allocation"] {
            return Err(format!(
                "claim #{i}: allocations differ:\n  upstream {}\n  dpctl    {}",
                a["allocation"], b["allocation"]
            ));
        }
    }
    Ok(())
}

/// Smaller scenarios that still disagree: drop one claim, one allocated
/// claim, one slice, one device, one request, one selector, one constraint.
fn shrink_allocator(bin: &Path, sc: &Value) -> Value {
    let mut best = sc.clone();
    loop {
        let mut tries = Vec::new();
        let drop_at = |v: &Value, path: &[&str], i: usize| {
            let mut c = v.clone();
            let mut at = &mut c;
            for p in path {
                at = &mut at[*p];
            }
            if let Some(a) = at.as_array_mut() {
                a.remove(i);
            }
            c
        };
        let len = |v: &Value, path: &[&str]| {
            let mut at = v;
            for p in path {
                at = &at[*p];
            }
            at.as_array().map_or(0, Vec::len)
        };
        for key in ["claims", "allocated", "slices", "classes"] {
            for i in 0..len(&best, &[key]) {
                tries.push(drop_at(&best, &[key], i));
            }
        }
        for s in 0..len(&best, &["slices"]) {
            let si = s.to_string();
            let _ = si;
            let n = best["slices"][s]["spec"]["devices"].as_array().map_or(0, Vec::len);
            for d in 0..n {
                let mut c = best.clone();
                if let Some(a) = c["slices"][s]["spec"]["devices"].as_array_mut() {
                    a.remove(d);
                }
                tries.push(c);
            }
        }
        for ci in 0..len(&best, &["claims"]) {
            for key in ["requests", "constraints"] {
                let n = best["claims"][ci]["spec"]["devices"][key].as_array().map_or(0, Vec::len);
                // A claim keeps one request (the API requires one).
                let keep = usize::from(key == "requests");
                if n <= keep {
                    continue;
                }
                for r in 0..n {
                    let mut c = best.clone();
                    if let Some(a) = c["claims"][ci]["spec"]["devices"][key].as_array_mut() {
                        a.remove(r);
                    }
                    tries.push(c);
                }
            }
        }
        if tries.is_empty() {
            return best;
        }
        let answers = ask(bin, &tries);
        let next = tries.into_iter().zip(answers).find(|(c, a)| allocator_agrees_in(c, a, &dpctl_allocate(c)).is_err());
        match next {
            Some((c, _)) => best = c,
            None => return best,
        }
    }
}

#[test]
fn allocator_agrees_with_upstream() {
    let Some(bin) = oracle("allocate") else { return };
    let base = seed();
    let n = count();
    eprintln!("differential allocator: seed {base}, {n} scenarios (DPCTL_DIFF_SEED, DPCTL_DIFF_SCENARIOS)");
    let mut cases: Vec<Value> = (0..n).map(|i| gen::scenario(&mut gen::Rng::new(base.wrapping_add(i)))).collect();
    let regs = regressions("allocator");
    cases.extend(regs.iter().map(|(_, c)| c.clone()));
    let t = std::time::Instant::now();
    let answers = ask(&bin, &cases);
    eprintln!("differential allocator: upstream answered in {:.1?}", t.elapsed());
    let t = std::time::Instant::now();
    let mine: Vec<Value> = cases.iter().map(dpctl_allocate).collect();
    eprintln!("differential allocator: dpctl answered in {:.1?}", t.elapsed());
    // DPCTL_DIFF_DUMP=FILE: each scenario with both answers, a JSON line each.
    if let Some(path) = std::env::var_os("DPCTL_DIFF_DUMP") {
        let lines: Vec<String> = cases
            .iter()
            .zip(&answers)
            .zip(&mine)
            .map(|((c, u), m)| json!({"scenario": c, "upstream": u, "dpctl": m}).to_string())
            .collect();
        let _ = std::fs::write(&path, lines.join("\n") + "\n");
    }
    let mut failures = Vec::new();
    let mut stats: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (case, up)) in cases.iter().zip(&answers).enumerate() {
        for c in up["claims"].as_array().into_iter().flatten() {
            *stats.entry(c["outcome"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
        if let Err(why) = allocator_agrees_in(case, up, &mine[i]) {
            let (label, file) = if (i as u64) < n {
                let s = base.wrapping_add(i as u64);
                let small = shrink_allocator(&bin, case);
                (format!("seed {s}"), Some(write_regression("allocator", &format!("seed-{s}"), &small)))
            } else {
                (format!("regression {}", regs[i - n as usize].0), None)
            };
            failures.push(format!(
                "{label}: {why}{}",
                file.map(|f| format!("\n  minimal scenario written to {}", f.display())).unwrap_or_default()
            ));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    eprintln!("differential allocator: upstream's outcomes {stats:?}");
    assert!(failures.is_empty(), "the allocator diverges from upstream (seed {base}):\n{}", failures.join("\n"));
}
