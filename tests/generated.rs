//! `completions/` and `man/` are generated from the clap definitions. This
//! test fails when they are out of date; regenerate them with
//! `DPCTL_REGENERATE=1 cargo test --test generated`.

use std::path::{Path, PathBuf};

fn roff_escape(line: &str) -> String {
    let l = line.replace('\\', "\\e").replace('-', "\\-");
    if l.starts_with('.') || l.starts_with('\'') {
        format!("\\&{l}")
    } else {
        l
    }
}

/// The sections clap_mangen does not write: examples (the command's
/// `after_help`), environment, exit status, see also.
fn extra_sections(page: &clap::Command, name: &str) -> String {
    let mut s = String::new();
    if let Some(ex) = page.get_after_help().map(|e| e.to_string()) {
        s.push_str(".SH EXAMPLES\n.nf\n");
        for l in ex.lines().skip(1) {
            s.push_str(&roff_escape(l.strip_prefix("  ").unwrap_or(l)));
            s.push('\n');
        }
        s.push_str(".fi\n");
    }
    s.push_str(".SH ENVIRONMENT\n");
    for (var, what) in dpctl::help::environment(page, name) {
        s.push_str(&format!(".TP\n.B {var}\n{}\n", roff_escape(what)));
    }
    s.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in dpctl::help::EXIT_STATUS {
        s.push_str(&format!(".TP\n.B {code}\n{}\n", roff_escape(what)));
    }
    s.push_str(".SH \"SEE ALSO\"\n");
    if name == "dpctl" {
        s.push_str("dpctl\\-<command>(1) for each command; dpctl <command> \\-\\-help\n");
    } else {
        s.push_str("dpctl(1)\n");
    }
    s
}

fn expected() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sockets = dpctl::commands::surface::socket_hints(dpctl::commands::ALL);
    for (shell, name) in [
        (dpctl::help::Shell::Bash, "dpctl.bash"),
        (dpctl::help::Shell::Zsh, "_dpctl"),
        (dpctl::help::Shell::Fish, "dpctl.fish"),
    ] {
        let buf = dpctl::help::completion_script(shell, &mut dpctl::commands::command(), &sockets);
        files.push((root.join("completions").join(name), buf));
    }
    // Built, so each subcommand knows its usage name ("dpctl serve") and carries the global options.
    let mut cmd = dpctl::commands::command();
    cmd.build();
    let mut pages = vec![(String::from("dpctl"), cmd.clone())];
    fn walk(prefix: &str, cmd: &clap::Command, pages: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let name = format!("{prefix}-{}", sub.get_name());
            pages.push((name.clone(), sub.clone()));
            walk(&name, sub, pages);
        }
    }
    walk("dpctl", &cmd, &mut pages);
    for (name, page) in pages {
        let man = clap_mangen::Man::new(page.clone()).title(name.to_uppercase());
        let mut buf = Vec::new();
        man.render_title(&mut buf).expect("render");
        man.render_name_section(&mut buf).expect("render");
        man.render_synopsis_section(&mut buf).expect("render");
        man.render_description_section(&mut buf).expect("render");
        if page.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut buf).expect("render");
        }
        if page.get_subcommands().next().is_some() {
            man.render_subcommands_section(&mut buf).expect("render");
        }
        buf.extend_from_slice(extra_sections(&page, &name).as_bytes());
        files.push((root.join("man").join(format!("{name}.1")), buf));
    }
    files
}

#[test]
fn man_pages_say_what_the_readme_says() {
    let files = expected();
    let page = |n: &str| {
        let (_, b) = files.iter().find(|(p, _)| p.ends_with(n)).unwrap_or_else(|| panic!("no {n}"));
        String::from_utf8_lossy(b).into_owned()
    };
    let serve = page("man/dpctl-serve.1");
    let synopsis = serve.split(".SH SYNOPSIS").nth(1).unwrap_or_default();
    assert!(synopsis.contains("dpctl serve"), "SYNOPSIS names the real command: {synopsis}");
    assert!(!synopsis.starts_with("\n\\fBdpctl\\-serve"), "{synopsis}");
    for (_, b) in &files {
        let t = String::from_utf8_lossy(b);
        if !t.contains("\n.TH ") {
            continue;
        }
        assert!(!t.contains("see the README"), "a man page says it itself");
        for section in [".SH ENVIRONMENT", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
            assert!(t.contains(section), "{section} missing in {}", t.lines().next().unwrap_or_default());
        }
    }
    assert!(serve.contains("\\-\\-plugin\\-dir"), "global options are listed on subcommand pages");
}

/// The ENVIRONMENT section of a man page: the variables it lists.
fn environment_of(page: &str) -> Vec<String> {
    let section = page.split(".SH ENVIRONMENT\n").nth(1).and_then(|s| s.split("\n.SH ").next()).unwrap_or_default();
    section.lines().filter_map(|l| l.strip_prefix(".B ")).map(str::to_string).collect()
}

/// Every page lists the variables its command reads, and only those: the
/// global options' everywhere, DRA's on `dra serve`, the device-plugin
/// sockets' only where a flag reads them; `man dpctl` lists them all.
#[test]
fn man_pages_list_the_environment_their_command_reads() {
    let files = expected();
    let page = |n: &str| {
        let (_, b) = files.iter().find(|(p, _)| p.ends_with(n)).unwrap_or_else(|| panic!("no {n}"));
        environment_of(&String::from_utf8_lossy(b))
    };
    let has = |env: &[String], v: &str| env.iter().any(|e| e == v);
    for (path, b) in &files {
        let t = String::from_utf8_lossy(b);
        if !t.contains("\n.TH ") {
            continue;
        }
        let env = environment_of(&t);
        for v in ["DPCTL_ROOT", "DPCTL_KUBELET_ROOT_DIR", "DPCTL_PLUGIN_DIR", "NO_COLOR", "DPCTL_WORKERS"] {
            assert!(has(&env, v), "{}: no {v} in ENVIRONMENT: {env:?}", path.display());
        }
    }
    let all: Vec<&str> = dpctl::help::ENVIRONMENT.iter().map(|(v, _)| *v).collect();
    assert_eq!(page("man/dpctl.1"), all, "man dpctl lists every variable");
    let dra_serve = page("man/dpctl-dra-serve.1");
    assert!(has(&dra_serve, "NODE_NAME"), "{dra_serve:?}");
    assert!(
        !has(&dra_serve, "DPCTL_KUBELET_SOCKET") && !has(&dra_serve, "DPCTL_POD_RESOURCES_SOCKET"),
        "{dra_serve:?}"
    );
    let serve = page("man/dpctl-serve.1");
    assert!(has(&serve, "DPCTL_KUBELET_SOCKET") && !has(&serve, "NODE_NAME"), "{serve:?}");
    assert!(has(&page("man/dpctl-podresources-list.1"), "DPCTL_POD_RESOURCES_SOCKET"));
    assert!(has(&page("man/dpctl-demo.1"), "TMPDIR") && !has(&page("man/dpctl-probe.1"), "TMPDIR"));
}

/// `man dpctl` and `dpctl --help` open with both plugin kinds; the summaries
/// of commands that serve both say so.
#[test]
fn help_names_both_plugin_kinds() {
    let files = expected();
    let top = files.iter().find(|(p, _)| p.ends_with("man/dpctl.1")).map(|(_, b)| String::from_utf8_lossy(b));
    let top = top.expect("man/dpctl.1");
    let description = top.split(".SH DESCRIPTION").nth(1).unwrap_or_default();
    let opening = description.split(".SH ").next().unwrap_or_default();
    for kind in ["device plugins", "DRA drivers"] {
        assert!(opening.contains(kind), "man dpctl DESCRIPTION does not name {kind}: {opening}");
        let name = top.split(".SH NAME").nth(1).and_then(|n| n.split(".SH").next()).unwrap_or_default();
        assert!(name.contains(kind), "man dpctl NAME does not name {kind}: {name}");
    }
    let mut cmd = dpctl::commands::command();
    let help = cmd.render_long_help().to_string();
    assert!(help.starts_with("dpctl speaks the kubelet's plugin gRPC protocols"), "{help}");
    assert!(help.contains("device plugins") && help.contains("DRA drivers"));
    for heading in
        ["Getting started:", "Talk to a device plugin or DRA driver:", "Stand in for the kubelet:", "Diagnose a node:"]
    {
        assert!(help.contains(&format!("\n{heading}\n")), "dpctl --help lacks {heading}:\n{help}");
    }
    assert!(help.contains("\nEnvironment:\n  DPCTL_PLUGIN_DIR"), "{help}");
    let about = |path: &[&str]| {
        let mut c = &cmd;
        for p in path {
            c = c.find_subcommand(p).unwrap_or_else(|| panic!("no {p}"));
        }
        c.get_about().map(|a| a.to_string()).unwrap_or_default()
    };
    for path in [&["mock-kubelet"][..], &["node"], &["doctor"], &["podresources", "list"], &["completion"], &["test"]] {
        let a = about(path);
        let dra = a.contains("DRA") || a.contains("plugins_registry");
        assert!(dra, "{path:?}: the summary names only device plugins: {a}");
    }
    let api = cmd.find_subcommand("mock-kubelet").and_then(|m| m.get_arguments().find(|a| a.get_id() == "api_server"));
    let api = api.and_then(|a| a.get_help()).map(|h| h.to_string()).unwrap_or_default();
    assert!(api.contains("protobuf") && api.contains("JSON"), "{api}");
}

/// `--kubelet-version` completes the versions of the profile table, in each shell.
#[test]
fn kubelet_version_completes_the_known_versions() {
    let versions = dpctl::commands::surface::socket_hints(dpctl::commands::ALL).kubelet_versions;
    assert_eq!(versions.first().map(String::as_str), Some("1.25"));
    assert!(versions.len() >= 13, "{versions:?}");
    let list = versions.join(" ");
    let files = expected();
    let script = |n: &str| {
        let (_, b) = files.iter().find(|(p, _)| p.ends_with(n)).unwrap_or_else(|| panic!("no {n}"));
        String::from_utf8_lossy(b).into_owned()
    };
    let bash = script("completions/dpctl.bash");
    let bash_cases =
        bash.matches(&format!("--kubelet-version)\n                    COMPREPLY=($(compgen -W \"{list}\"")).count();
    let zsh = script("completions/_dpctl");
    let zsh_specs = zsh.lines().filter(|l| l.starts_with("'--kubelet-version=[")).collect::<Vec<_>>();
    let fish = script("completions/dpctl.fish");
    let fish_specs = fish.lines().filter(|l| l.contains(" -l kubelet-version ")).collect::<Vec<_>>();
    // mock-kubelet, demo, replay, bench kubelet, bench cluster, test
    assert_eq!(bash_cases, 6, "bash: every --kubelet-version completes the versions");
    assert_eq!(zsh_specs.len(), 6);
    assert!(zsh_specs.iter().all(|l| l.contains(&format!(":_sequence compadd - {list}'"))), "{zsh_specs:#?}");
    assert_eq!(fish_specs.len(), 6);
    assert!(fish_specs.iter().all(|l| l.ends_with(&format!(" -x -a \"{list}\""))), "{fish_specs:#?}");
}

#[test]
fn completions_and_man_pages_are_up_to_date() {
    let files = expected();
    assert!(files.len() > 10, "a page per subcommand");
    if std::env::var_os("DPCTL_REGENERATE").is_some() {
        for dir in ["completions", "man"] {
            let d = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            std::fs::create_dir_all(&d).unwrap();
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if !files.iter().any(|(f, _)| f == &p) {
                    std::fs::remove_file(p).unwrap();
                }
            }
        }
        for (path, content) in &files {
            std::fs::write(path, content).unwrap();
        }
        return;
    }
    let mut stale = Vec::new();
    for (path, content) in &files {
        if std::fs::read(path).ok().as_deref() != Some(content.as_slice()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "out of date: {}\nregenerate with: DPCTL_REGENERATE=1 cargo test --test generated",
        stale.join(", ")
    );
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped (`-` and
/// `_` kept), spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown page's headings (outside code blocks),
/// duplicates numbered as GitHub numbers them.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fence = false;
    for l in text.lines() {
        if l.starts_with("```") {
            fence = !fence;
        }
        if fence || !l.starts_with('#') {
            continue;
        }
        let base = slug(l.trim_start_matches('#'));
        let n = out.iter().filter(|a| **a == base || a.starts_with(&format!("{base}-"))).count();
        out.push(if n == 0 { base } else { format!("{base}-{n}") });
    }
    out
}

/// Relative links `[text](target)` of a markdown page that do not resolve:
/// a missing file, or an anchor no heading of the target has.
fn broken_links(page: &Path, text: &str) -> Vec<String> {
    let mut broken = Vec::new();
    let mut fence = false;
    for l in text.lines() {
        if l.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        // Inline code is not a link: drop every `…` span.
        let l: String = l.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for part in l.split("](").skip(1) {
            let Some(target) = part.split(')').next() else { continue };
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path =
                if file.is_empty() { page.to_path_buf() } else { page.parent().unwrap_or(Path::new(".")).join(file) };
            if !path.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() {
                let t = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&t).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {target}: no heading with that anchor", page.display()));
                }
            }
        }
    }
    broken
}

/// Every relative link in README.md, CONTRIBUTING.md and docs/*.md points to
/// a file that exists, and every anchor to a heading there; the README is a
/// front page that links every docs page.
#[test]
fn every_docs_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 8, "{docs:?}");
    pages.extend(docs.iter().cloned());
    let mut broken = Vec::new();
    let mut links = 0;
    for p in &pages {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        links += text.matches("](").count();
        broken.extend(broken_links(p, &text));
    }
    assert!(links > 50, "{links} links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(readme.lines().count() <= 300, "README.md is a front page: {} lines", readme.lines().count());
    for d in &docs {
        let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        assert!(readme.contains(&format!("(docs/{name}")), "README.md does not link docs/{name}");
    }
    assert!(readme.starts_with("# dpctl\n\n```sh\ncargo run --release -- demo"), "README opens with the demo");
    assert!(readme.contains("\ncargo test "), "and cargo test");
    assert!(readme.contains("cargo install --path ."), "README says how to put dpctl on PATH");
    let commands = std::fs::read_to_string(root.join("docs/commands.md")).expect("docs/commands.md");
    for (var, _) in dpctl::help::ENVIRONMENT {
        assert!(commands.contains(&format!("`{var}")), "docs/commands.md does not document {var}");
    }
}

/// The checker itself finds what it must: a missing file, a missing anchor.
#[test]
fn the_link_checker_finds_broken_links() {
    assert_eq!(slug(" Kubelet versions: `--kubelet-version`"), "kubelet-versions---kubelet-version");
    assert_eq!(
        slug(" `dpctl test --dra`: a conformance suite for DRA drivers"),
        "dpctl-test---dra-a-conformance-suite-for-dra-drivers"
    );
    assert_eq!(anchors("# A\n```\n# not\n```\n## A\n"), ["a", "a-1"]);
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = "[ok](docs/test.md) [gone](docs/nope.md) [bad](docs/test.md#no-such-heading) [web](https://x.y/z)\n\
                [self](#install) `[not](a link)`\n```\n[code](nope.md)\n```";
    let broken = broken_links(&readme, text);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].ends_with("docs/nope.md: no such file") && broken[1].contains("no heading"), "{broken:?}");
}
