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

/// `crate::a::b::c` paths named in a file (outside comments), as segment lists.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let segs: Vec<String> = tail
                .split("::")
                .map(|s| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>())
                .take_while(|s| !s.is_empty())
                .collect();
            if !segs.is_empty() {
                out.push(segs);
            }
            rest = tail;
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
        let text = std::fs::read_to_string(f).unwrap_or_default();
        // Tests may reach anywhere; only the code's own imports count.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for segs in crate_paths(code) {
            let target = &segs[0];
            if *target == m {
                if let Some(to) = file_of(&src, &segs, &files) {
                    if &to != f {
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
    assert_eq!(crate_paths("use crate::kubelet::node::Node; // crate::plugin"), vec![vec!["kubelet", "node", "Node"]]);
    assert!(layer("plugin") == layer("kubelet"), "siblings share a layer, so neither may import the other");
    assert!(layer("client") < layer("kubelet") && layer("core") < layer("client"));
}
