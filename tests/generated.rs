//! `completions/` and `man/` are generated from the clap definitions. This
//! test fails when they are out of date; regenerate them with
//! `DPCTL_REGENERATE=1 cargo test --test generated`.

use clap::CommandFactory;
use std::path::{Path, PathBuf};

fn expected() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (shell, name) in [
        (clap_complete::Shell::Bash, "dpctl.bash"),
        (clap_complete::Shell::Zsh, "_dpctl"),
        (clap_complete::Shell::Fish, "dpctl.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut dpctl::cli::Cli::command(), "dpctl", &mut buf);
        files.push((root.join("completions").join(name), buf));
    }
    let cmd = dpctl::cli::Cli::command();
    let mut pages = vec![(String::from("dpctl"), cmd.clone())];
    fn walk(prefix: &str, cmd: &clap::Command, pages: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let name = format!("{prefix}-{}", sub.get_name());
            let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
            let page = sub.clone().name(static_name);
            pages.push((name.clone(), page));
            walk(&name, sub, pages);
        }
    }
    walk("dpctl", &cmd, &mut pages);
    for (name, page) in pages {
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf).expect("render man page");
        files.push((root.join("man").join(format!("{name}.1")), buf));
    }
    files
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
