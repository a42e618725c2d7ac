//! What a release ships: `--version` naming the commit and the target, and
//! the deployment examples in `deploy/` using flags the binary accepts.

use crate::support::*;
use std::path::Path;

/// The checkout's commit as `build.rs` embeds it, or `unknown` without git.
fn expected_commit() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    match dpctl::version::source::git_commit(root) {
        Some((c, _)) => c,
        None => dpctl::version::source::UNKNOWN.to_owned(),
    }
}

#[tokio::test]
async fn version_prints_version_commit_and_target() {
    let want = format!(
        "dpctl {} (commit {}, target {})\n",
        env!("CARGO_PKG_VERSION"),
        expected_commit(),
        dpctl::version::TARGET
    );
    for flag in ["--version", "-V"] {
        let run = dpctl(&[flag]).await;
        run.expect_code(0);
        assert_eq!(run.stdout, want, "{flag}");
    }
    assert!(dpctl::version::TARGET.contains("linux"), "{}", dpctl::version::TARGET);
}

/// Every dpctl command line in `deploy/`: the `command` of each container
/// whose image is dpctl, and each NPD custom-plugin rule (`dpctl` + args).
fn deploy_command_lines() -> Vec<(String, Vec<String>)> {
    fn walk(v: &serde_norway::Value, file: &str, out: &mut Vec<(String, Vec<String>)>) {
        match v {
            serde_norway::Value::Mapping(m) => {
                let image = m.get("image").and_then(|i| i.as_str()).unwrap_or("");
                if image.contains("/dpctl:") {
                    let cmd: Vec<String> = m
                        .get("command")
                        .and_then(|c| c.as_sequence())
                        .map(|c| c.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default();
                    out.push((file.to_owned(), cmd));
                }
                for (_, child) in m {
                    walk(child, file, out);
                }
            }
            serde_norway::Value::Sequence(s) => s.iter().for_each(|c| walk(c, file, out)),
            _ => {}
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut out = Vec::new();
    for file in
        ["doctor-pod.yaml", "serve-daemonset.yaml", "dra-serve-daemonset.yaml", "npd/node-problem-detector.yaml"]
    {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for doc in serde_norway::Deserializer::from_str(&text) {
            let v: serde_norway::Value = serde::Deserialize::deserialize(doc).unwrap();
            walk(&v, file, &mut out);
        }
    }
    let npd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("npd/dpctl-doctor.json")).unwrap()).unwrap();
    for rule in npd["rules"].as_array().unwrap() {
        let mut cmd = vec![String::from("dpctl")];
        cmd.extend(rule["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()));
        out.push(("npd/dpctl-doctor.json".into(), cmd));
    }
    out
}

/// Parse each deploy command line whose subcommand is `sub` with the real CLI.
fn assert_deploy_commands_parse(sub: &str) {
    let lines: Vec<_> =
        deploy_command_lines().into_iter().filter(|(_, c)| c.get(1).map(String::as_str) == Some(sub)).collect();
    assert!(!lines.is_empty(), "no `dpctl {sub}` command line in deploy/");
    for (file, cmd) in lines {
        assert_eq!(cmd[0], "dpctl", "deploy/{file}: the image's PATH has dpctl: {cmd:?}");
        if let Err(e) = dpctl::commands::Cli::try_parse_from(&cmd) {
            panic!("deploy/{file}: `{}` does not parse:\n{e}", cmd.join(" "));
        }
    }
}

#[test]
fn deploy_serve_command_lines_parse() {
    assert_deploy_commands_parse("serve");
}

#[test]
fn deploy_doctor_command_lines_parse() {
    assert_deploy_commands_parse("doctor");
}

/// `dpctl dra serve` in deploy/dra-serve-daemonset.yaml: it parses, and it
/// publishes through the pod's in-cluster config (no --kubeconfig) for the
/// node the downward API names.
#[test]
fn deploy_dra_serve_command_lines_parse() {
    assert_deploy_commands_parse("dra");
    let lines = deploy_command_lines();
    let (_, cmd) = lines.iter().find(|(f, _)| f == "dra-serve-daemonset.yaml").unwrap();
    assert_eq!(cmd[..3], ["dpctl", "dra", "serve"]);
    assert!(!cmd.iter().any(|a| a.starts_with("--kubeconfig")), "in-cluster config: {cmd:?}");
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/dra-serve-daemonset.yaml")).unwrap();
    assert!(
        text.contains("name: NODE_NAME") && text.contains("fieldPath: spec.nodeName"),
        "NODE_NAME from the downward API"
    );
}
