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
    for (var, what) in dpctl::help::ENVIRONMENT {
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
    assert!(serve.contains("DPCTL_POD_RESOURCES_SOCKET"));
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
