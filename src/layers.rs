//! The module map as a test: each top-level module sits on a layer and may
//! import only modules on lower layers (never a sibling on its own layer:
//! the plugin role never imports the kubelet role, nor the reverse), and no
//! files import each other in a circle. A new upward import or cycle fails
//! here, naming the file and the import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module and its layer (lower layers are imported by higher ones).
const LAYERS: &[(&str, u8)] = &[
    ("api", 0),
    ("version", 0),
    ("help", 0),
    ("layers", 0),
    ("core", 1),
    ("render", 2),
    ("trace", 2),
    ("protocol", 2),
    ("bench", 2),
    ("client", 3),
    ("controlplane", 3),
    ("kubelet", 4),
    ("plugin", 4),
    ("doctor", 4),
    ("suite", 5),
    ("cli", 6),
    ("commands", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// Inside a module, its parts on layers of their own, as the modules are:
/// a part imports only parts on lower layers (the kubelet's: its manifests,
/// profiles and events at the bottom, the managers, the container manager
/// over them, the pod sources, the node on top; the control plane's selector
/// limits, then its typed objects and codec at the bottom, the client interface the kubelet
/// uses at the top).
const INNER: &[(&str, &[(&str, u8)])] = &[
    (
        "controlplane",
        &[
            ("cel", 0),
            ("objects", 1),
            ("protobuf", 1),
            ("allocator", 2),
            ("extended", 2),
            ("nodealloc", 2),
            ("apiserver", 2),
            ("scheduler", 3),
            ("client", 3),
            ("controller", 4),
        ],
    ),
    (
        "kubelet",
        &[
            ("against", 0),
            ("dirwatch", 0),
            ("generation", 0),
            ("lifecycle", 0),
            ("manifest", 0),
            ("profile", 0),
            ("event", 1),
            ("reproduce", 1),
            ("devicemanager", 2),
            ("dra", 2),
            ("cm", 4),
            ("metrics", 4),
            ("registration", 4),
            ("handler", 5),
            ("podresources", 5),
            ("pods", 6),
            ("watcher", 6),
            ("cluster", 7),
            ("tree", 7),
            ("node", 8),
        ],
    ),
];

/// The layer of part `part` of `module`: `None` when the module has no
/// inner layers, `Some(None)` when the part is missing from them.
fn inner_layer(module: &str, part: &str) -> Option<Option<u8>> {
    let (_, parts) = INNER.iter().find(|(m, _)| *m == module)?;
    Some(parts.iter().find(|(p, _)| *p == part).map(|(_, l)| *l))
}

/// Whether file part `mine` of `module` may not import part `target`
/// (a part on its own layer or above): the complaint, if so.
fn inner_violation(module: &str, mine: &str, target: &str) -> Option<String> {
    if mine == target {
        return None;
    }
    let me = inner_layer(module, mine)?;
    let Some(me) = me else { return Some(format!("part {module}::{mine} has no layer; add it to INNER")) };
    match inner_layer(module, target)? {
        Some(t) if t < me => None,
        Some(_) => Some(format!("{module}::{mine} imports {module}::{target}, which is not below it")),
        None => Some(format!("part {module}::{target} has no layer; add it to INNER")),
    }
}

/// A file of test code only (a test module kept in a file of its own, or
/// test builders): its imports are not the code's.
fn is_test_file(f: &Path) -> bool {
    let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name == "tests.rs" || name.ends_with("_tests.rs") || name == "testutil.rs"
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src` (`a/b.rs` and `a/b/mod.rs` are
/// both `a::b`; `lib.rs` and `main.rs` are the crate root).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut segs: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if let Some(last) = segs.pop() {
        let stem = last.trim_end_matches(".rs");
        if !matches!(stem, "mod" | "lib" | "main") {
            segs.push(stem.to_string());
        }
    }
    segs
}

/// `mod name;` declarations of a file: the bare paths it may use for its children.
fn child_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
        if let Some(rest) = t.strip_prefix("mod ") {
            if let Some(name) = rest.strip_suffix(';') {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parse a path tree at `s` (`a::b::{c, d::e}`), pushing each full path onto `out`.
fn path_tree(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    let mut i = 0;
    let b = s.as_bytes();
    loop {
        let start = i;
        while i < b.len() && is_ident(b[i] as char) {
            i += 1;
        }
        if i > start {
            let seg = &s[start..i];
            if seg != "self" {
                path.push(seg.to_string());
            }
        }
        let group = if s[i..].starts_with("::{") {
            Some(3)
        } else if i == start && s[i..].starts_with('{') {
            Some(1)
        } else {
            None
        };
        if let Some(skip) = group {
            i += skip;
            loop {
                while i < b.len() && (b[i] as char).is_whitespace() {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    break;
                }
                i += path_tree(&s[i..], &path, out);
                while i < b.len() && (b[i] as char).is_whitespace() {
                    i += 1;
                }
                if i < b.len() && b[i] == b',' {
                    i += 1;
                }
                while i < b.len() && (b[i] as char).is_whitespace() {
                    i += 1;
                }
                if i < b.len() && b[i] != b'}' && !is_ident(b[i] as char) {
                    // `as name` or something unparsed: skip to the next item.
                    while i < b.len() && b[i] != b',' && b[i] != b'}' {
                        i += 1;
                    }
                }
            }
            return i + 1;
        }
        if s[i..].starts_with("::") && s[i + 2..].starts_with(|c: char| is_ident(c) || c == '{') {
            i += 2;
            continue;
        }
        if !path.is_empty() {
            out.push(path);
        }
        return i;
    }
}

/// The module paths a file names (outside comments), absolute from the crate
/// root: `crate::…`, `super::…`, `self::…`, and bare paths into the file's
/// own child modules.
fn crate_paths(text: &str, here: &[String], children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut i = 0;
        while i < code.len() {
            let rest = &code[i..];
            let before = code[..i].chars().next_back();
            let at_start = !before.is_some_and(|c| is_ident(c) || c == ':');
            let head: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if head.is_empty() || !at_start {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let after = &rest[head.len()..];
            if !after.starts_with("::") {
                i += head.len();
                continue;
            }
            let mut base: Vec<String> = match head.as_str() {
                "crate" => vec![],
                "self" => here.to_vec(),
                "super" => here[..here.len().saturating_sub(1)].to_vec(),
                c if children.iter().any(|x| x == c) => {
                    let mut v = here.to_vec();
                    v.push(c.to_string());
                    v
                }
                _ => {
                    i += head.len();
                    continue;
                }
            };
            let mut tail = &after[2..];
            while let Some(t) = tail.strip_prefix("super::") {
                base.pop();
                tail = t;
            }
            let used = path_tree(tail, &base, &mut out);
            i += head.len() + 2 + (after.len() - 2 - tail.len()) + used.max(1);
        }
    }
    out
}

/// The file a module path names, if it is one of `files` (longest match).
fn file_of(src: &Path, segs: &[String], files: &BTreeSet<PathBuf>) -> Option<PathBuf> {
    for n in (1..=segs.len()).rev() {
        let base = segs[..n].iter().fold(src.to_path_buf(), |p, s| p.join(s));
        for cand in [base.with_extension("rs"), base.join("mod.rs")] {
            if files.contains(&cand) {
                return Some(cand);
            }
        }
    }
    None
}

fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let first = rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
    first.trim_end_matches(".rs").to_string()
}

/// The kubelet's managers, each a sans-IO `core/` and an async `shell/`.
const MANAGERS: &[&str] = &["devicemanager", "dra"];

/// What a manager's core never does (outside comments and its tests): await,
/// spawn, sleep, read a clock, touch a file or a socket.
const NOT_IN_A_CORE: &[&str] = &[
    ".await",
    "async ",
    "tokio::spawn",
    "sleep",
    "::now()",
    "std::fs",
    "File::",
    "std::net",
    "tokio::net",
    "UnixStream",
];

#[test]
fn a_managers_core_imports_no_shell_and_does_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for m in MANAGERS {
        let mut list = Vec::new();
        rust_files(&src.join("kubelet").join(m).join("core"), &mut list);
        assert!(!list.is_empty(), "kubelet/{m} has no core/");
        assert!(src.join("kubelet").join(m).join("shell").is_dir(), "kubelet/{m} has no shell/");
        for f in list.iter().filter(|f| !is_test_file(f)) {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let here = module_path(&src, f);
            for segs in crate_paths(code, &here, &child_modules(code)) {
                if segs.len() > 2 && segs[0] == "kubelet" && segs[1] == *m && segs[2] != "core" {
                    wrong.push(format!("{}: the core imports crate::{}", f.display(), segs.join("::")));
                }
            }
            for line in code.lines() {
                let line = line.split("//").next().unwrap_or("");
                for bad in NOT_IN_A_CORE.iter().filter(|b| line.contains(**b)) {
                    wrong.push(format!("{}: the core uses {bad}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "a manager's core reaching out:\n{}", wrong.join("\n"));
}

#[test]
fn imports_only_run_down_the_layers_and_never_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut list = Vec::new();
    rust_files(&src, &mut list);
    let files: BTreeSet<PathBuf> = list.iter().cloned().collect();
    let mut upward = Vec::new();
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for f in &list {
        let m = module_of(&src, f);
        if m == "main" || m == "lib" || m == "build" {
            continue;
        }
        let Some(mine) = layer(&m) else {
            upward.push(format!("{}: module {m} has no layer; add it to LAYERS", f.display()));
            continue;
        };
        // Tests may reach anywhere; only the code's own imports count.
        if is_test_file(f) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let here = module_path(&src, f);
        for segs in crate_paths(code, &here, &child_modules(code)) {
            let Some(target) = segs.first() else { continue };
            if *target == m {
                // A part is a file or folder of the module; other names are its root's own items.
                let is_part = |p: &str| src.join(&m).join(format!("{p}.rs")).exists() || src.join(&m).join(p).is_dir();
                if let (Some(mine), Some(to)) = (here.get(1), segs.get(1).filter(|t| is_part(t))) {
                    if let Some(why) = inner_violation(&m, mine, to) {
                        upward.push(format!("{}: {why} (crate::{})", f.display(), segs.join("::")));
                    }
                }
                // A child naming its own ancestor (`super::Manager`) is one
                // module split over files, not a circle between modules.
                if let Some(to) = file_of(&src, &segs, &files) {
                    if &to != f && !here.starts_with(&module_path(&src, &to)) {
                        graph.entry(f.clone()).or_default().insert(to);
                    }
                }
                continue;
            }
            match layer(target) {
                Some(l) if l < mine => {}
                Some(_) => upward.push(format!("{}: {m} imports crate::{}", f.display(), segs.join("::"))),
                None => {}
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers:\n{}", upward.join("\n"));
    // Files of one module that import each other in a circle.
    fn visit(
        n: &PathBuf,
        g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(i) = stack.iter().position(|x| x == n) {
            return Some(stack[i..].to_vec());
        }
        if !done.insert(n.clone()) {
            return None;
        }
        stack.push(n.clone());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        let mut stack = Vec::new();
        if let Some(c) = visit(n, &graph, &mut stack, &mut done) {
            let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
            panic!("files import each other in a circle: {}", names.join(" -> "));
        }
    }
}

#[test]
fn the_check_sees_an_upward_import_and_a_circle() {
    let here = ["kubelet".to_string(), "dra".to_string()];
    let kids = ["apiserver".to_string()];
    assert_eq!(
        crate_paths("use crate::kubelet::node::Node; // crate::plugin", &here, &kids),
        vec![vec!["kubelet", "node", "Node"]]
    );
    assert_eq!(
        crate_paths("use super::{shell::Manager, node};", &here, &kids),
        vec![vec!["kubelet", "shell", "Manager"], vec!["kubelet", "node"]]
    );
    assert_eq!(
        crate_paths("let s: Arc<apiserver::Store> = self::objects::x(); let y = other::apiserver::Z;", &here, &kids),
        vec![vec!["kubelet", "dra", "apiserver", "Store"], vec!["kubelet", "dra", "objects", "x"]]
    );
    assert_eq!(
        crate_paths("use crate::{core::{Error, Result}, kubelet::tree};", &here, &kids),
        vec![vec!["core", "Error"], vec!["core", "Result"], vec!["kubelet", "tree"]]
    );
    assert!(layer("plugin") == layer("kubelet"), "siblings share a layer, so neither may import the other");
    assert!(layer("controlplane") < layer("kubelet"), "the kubelet reads from the control plane, never the reverse");
    assert_eq!(inner_violation("controlplane", "scheduler", "allocator"), None);
    assert!(inner_violation("controlplane", "allocator", "scheduler").is_some(), "a part importing one above it");
    assert!(inner_violation("controlplane", "objects", "protobuf").is_some(), "parts on one layer are siblings");
    assert!(inner_violation("controlplane", "nowhere", "objects").is_some_and(|w| w.contains("no layer")));
    assert!(inner_violation("kubelet", "dra", "node").is_some(), "the kubelet's parts are layered too");
    assert_eq!(inner_violation("plugin", "dra", "server"), None, "a module without inner layers");
    assert!(
        is_test_file(Path::new("src/kubelet/dra/core/extended_tests.rs")) && is_test_file(Path::new("src/x/tests.rs"))
    );
    assert!(
        is_test_file(Path::new("src/kubelet/devicemanager/core/testutil.rs"))
            && !is_test_file(Path::new("src/kubelet/node.rs"))
    );
    assert!(layer("client") < layer("kubelet") && layer("core") < layer("client"));
}
