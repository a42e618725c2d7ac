//! Help text shared by `--help`, the man pages and `dpctl completion`: the
//! environment variables and exit codes, and the completion scripts (clap's,
//! plus socket names from the plugin dir). Each command's own Examples and
//! socket hints live in its file under `commands/`.

/// Every environment variable dpctl reads, each described once (man pages'
/// ENVIRONMENT sections and `dpctl --help`); a unit test holds this table to
/// the variables the code reads.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("DPCTL_PLUGIN_DIR", "The device-plugin directory (--plugin-dir); default <kubelet-root-dir>/device-plugins/."),
    (
        "DPCTL_KUBELET_ROOT_DIR",
        "The kubelet's --root-dir (--kubelet-root-dir): plugins_registry/, plugins/ (DRA drivers), pod-resources/ and dra_manager_state are under it; default a running kubelet's --root-dir (read from /proc), else /var/lib/kubelet.",
    ),
    (
        "DPCTL_ROOT",
        "Look up every host path under this directory (--root): plugin dir, sockets, checkpoints, CDI specs, e.g. /host in a kubectl debug node pod; default /.",
    ),
    ("DPCTL_KUBELET_SOCKET", "The kubelet's Registration socket (--kubelet-socket); default <plugin-dir>/kubelet.sock."),
    (
        "DPCTL_POD_RESOURCES_SOCKET",
        "The kubelet's PodResources socket (--socket, --pod-resources-socket); default <plugin-dir>/../pod-resources/kubelet.sock when --plugin-dir is given, else <kubelet-root-dir>/pod-resources/kubelet.sock.",
    ),
    (
        "DPCTL_PODS_API_SOCKET",
        "The kubelet's pods API socket (dpctl pods --socket); default <kubelet-root-dir>/pods-api/pods-api.sock (beside the PodResources socket's directory).",
    ),
    (
        "DPCTL_CDI_SPEC_DIRS",
        "Where CDI specs are looked up when no --cdi-spec-dir is given (':'-separated); default /etc/cdi, /var/run/cdi and <kubelet-root-dir>/cdi, all under --root.",
    ),
    ("NODE_NAME", "The node a DRA driver publishes its ResourceSlice for (--node-name); default this host's name."),
    (
        "KUBECONFIG",
        "dra serve without --kubeconfig: the kubeconfig files (':'-separated) merged as client-go merges them, the first to name a cluster, user or context winning it.",
    ),
    (
        "KUBERNETES_SERVICE_HOST",
        "With KUBERNETES_SERVICE_PORT and a service-account token, dra serve without --kubeconfig publishes through the API server at https://HOST:PORT (in-cluster config, as client-go).",
    ),
    ("KUBERNETES_SERVICE_PORT", "The API server's port for in-cluster config (see KUBERNETES_SERVICE_HOST)."),
    (
        "DPCTL_SERVICEACCOUNT_DIR",
        "Where in-cluster config reads the service account's token and ca.crt; default /var/run/secrets/kubernetes.io/serviceaccount (tests move it).",
    ),
    ("NO_COLOR", "Set to anything non-empty: never colour the output (as --no-color)."),
    ("DPCTL_WORKERS", "Runtime worker threads (0: one thread); default per command."),
    (
        "TMPDIR",
        "Where demo, test, bench kubelet and replay --kubelet create their temporary node trees; default /tmp.",
    ),
    (
        "PATH",
        "Where dpctl test finds the plugin's command (dpctl itself too: cargo install --path . puts it there); demo checks whether dpctl is on it.",
    ),
];

/// Variables every command reads, whatever its flags.
const EVERY_COMMAND: &[&str] = &["NO_COLOR", "DPCTL_WORKERS"];

/// Variables only some commands read (not through a flag), by man page name.
const SOME_COMMANDS: &[(&str, &[&str])] = &[
    ("TMPDIR", &["dpctl-demo", "dpctl-test", "dpctl-bench", "dpctl-bench-kubelet", "dpctl-replay"]),
    ("PATH", &["dpctl-demo", "dpctl-test"]),
    ("KUBECONFIG", &["dpctl-dra-serve"]),
    ("KUBERNETES_SERVICE_HOST", &["dpctl-dra-serve"]),
    ("KUBERNETES_SERVICE_PORT", &["dpctl-dra-serve"]),
    ("DPCTL_SERVICEACCOUNT_DIR", &["dpctl-dra-serve"]),
    (
        "DPCTL_CDI_SPEC_DIRS",
        &["dpctl-probe", "dpctl-dra-probe", "dpctl-dra-prepare", "dpctl-doctor", "dpctl-mock-kubelet"],
    ),
];

/// The environment variables the command `page` (a built clap command, so
/// it carries the global options; `name` as its man page is named, e.g.
/// `dpctl-dra-serve`) reads: those of its flags, then the ones every command
/// reads, in [`ENVIRONMENT`]'s order. `dpctl` itself lists all of them.
pub fn environment(page: &clap::Command, name: &str) -> Vec<(&'static str, &'static str)> {
    let flags: Vec<String> =
        page.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()).collect();
    ENVIRONMENT
        .iter()
        .copied()
        .filter(|(var, _)| {
            name == "dpctl"
                || flags.iter().any(|f| f == var)
                || EVERY_COMMAND.contains(var)
                || SOME_COMMANDS.iter().any(|(v, pages)| v == var && pages.contains(&name))
        })
        .collect()
}

/// The top-level `--help`'s Environment section.
pub fn environment_help() -> String {
    let mut s = String::from("Environment:\n");
    for (var, what) in ENVIRONMENT {
        s.push_str(&format!("  {var:28}{what}\n"));
    }
    s.trim_end().to_string()
}

/// The exit codes.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    ("1", "Failure: an RPC error, a failed check, an unreachable socket, a timeout, a benchmark with errors."),
    ("2", "Usage error: bad flags, values, files or manifests."),
];

/// An argument that names a plugin socket, so completion offers the sockets
/// in the plugin directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Socket {
    /// The command's positional SOCKET argument.
    Positional,
    /// A flag taking a socket (its long name, without `--`).
    Flag(&'static str),
    /// These subcommands' positional SOCKET names a DRA plugin: it completes
    /// from `<kubelet-root-dir>/plugins_registry/`.
    Registry(&'static [&'static str]),
}

/// The help of a DRA plugin's SOCKET argument (the zsh script finds DRA
/// socket arguments by it).
pub const DRA_SOCKET_HELP: &str =
    "Registration or service socket (a bare name is looked up in plugins_registry/ and plugins/*/)";

/// The socket arguments of every command and the kubelet versions, for the completion scripts.
#[derive(Debug, Default, Clone)]
pub struct SocketHints {
    /// Commands whose positional argument is a socket.
    pub positional: Vec<&'static str>,
    /// `(command, flag)`: flags that take a socket.
    pub flags: Vec<(&'static str, &'static str)>,
    /// `(command, subcommand)`: subcommands whose positional argument is a DRA plugin's socket.
    pub registry: Vec<(&'static str, &'static str)>,
    /// The values `--kubelet-version` completes (the kubelet profiles' versions).
    pub kubelet_versions: Vec<String>,
}

/// Shells `dpctl completion` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// bash (source it, or put it in /etc/bash_completion.d/)
    Bash,
    /// zsh (put it on $fpath as _dpctl)
    Zsh,
    /// fish (put it in ~/.config/fish/completions/)
    Fish,
}

/// The completion script for `shell`: clap's, plus socket names found in
/// `$DPCTL_PLUGIN_DIR` (or the kubelet's directory) for socket arguments
/// (bash and fish: the arguments `sockets` names; zsh: every SOCKET argument),
/// and DRA plugin sockets from `$DPCTL_KUBELET_ROOT_DIR/plugins_registry`.
pub fn completion_script(shell: Shell, cmd: &mut clap::Command, sockets: &SocketHints) -> Vec<u8> {
    let mut buf = Vec::new();
    let gen = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(gen, cmd, "dpctl", &mut buf);
    let mut buf = with_kubelet_versions(shell, &buf, &sockets.kubelet_versions);
    let cmds = sockets.positional.join(" ");
    let bash_flags: Vec<String> = sockets.flags.iter().map(|(c, f)| format!("\"{c} --{f}\"")).collect();
    let bash_flags = bash_flags.join("|");
    let fish_flags: String = sockets
        .flags
        .iter()
        .map(|(c, f)| {
            format!(
                "complete -c dpctl -n \"__fish_seen_subcommand_from {c}\" -l {f} -r -a \"(__dpctl_plugin_sockets)\"\n"
            )
        })
        .collect();
    let registry_case = if sockets.registry.is_empty() {
        String::new()
    } else {
        let pairs: Vec<String> = sockets.registry.iter().map(|(c, sub)| format!("\"{c} {sub}\"")).collect();
        format!(
            r#"    case "$sub $sub2" in
        {})
            [[ "$cur" != -* && "$cur" != */* ]] && COMPREPLY+=( $(compgen -W "$(_dpctl_registry_sockets)" -- "$cur") )
            return ;;
    esac
"#,
            pairs.join("|")
        )
    };
    let mut fish_registry = String::new();
    for c in sockets.registry.iter().map(|(c, _)| *c).collect::<std::collections::BTreeSet<_>>() {
        let subs: Vec<&str> = sockets.registry.iter().filter(|(x, _)| *x == c).map(|(_, s)| *s).collect();
        fish_registry.push_str(&format!(
            "complete -c dpctl -n \"__fish_seen_subcommand_from {c}; and __fish_seen_subcommand_from {}\" -a \"(__dpctl_registry_sockets)\"\n",
            subs.join(" ")
        ));
    }
    let extra = match shell {
        Shell::Bash => format!(
            r#"
# dpctl: socket arguments also complete from the plugin directory.
_dpctl_plugin_sockets() {{
    local dir="${{DPCTL_PLUGIN_DIR:-/var/lib/kubelet/device-plugins/}}" i f
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            --plugin-dir) dir="${{COMP_WORDS[i+1]}}" ;;
            --plugin-dir=*) dir="${{COMP_WORDS[i]#--plugin-dir=}}" ;;
        esac
    done
    for f in "$dir"/*; do [[ -S "$f" ]] && printf '%s\n' "${{f##*/}}"; done
}}
_dpctl_registry_sockets() {{
    local root="${{DPCTL_KUBELET_ROOT_DIR:-/var/lib/kubelet}}" i f
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            --kubelet-root-dir) root="${{COMP_WORDS[i+1]}}" ;;
            --kubelet-root-dir=*) root="${{COMP_WORDS[i]#--kubelet-root-dir=}}" ;;
        esac
    done
    for f in "$root"/plugins_registry/*; do [[ -S "$f" ]] && printf '%s\n' "${{f##*/}}"; done
}}
_dpctl_with_sockets() {{
    _dpctl "$@"
    local cur="${{COMP_WORDS[COMP_CWORD]}}" sub="" sub2="" w
    local skip=0
    for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        if ((skip)); then skip=0; continue; fi
        case "$w" in
            --plugin-dir|--kubelet-root-dir|--root|-o|--output|--timeout) skip=1 ;;
            -*) ;;
            *) if [[ -z "$sub" ]]; then sub="$w"; else sub2="$w"; break; fi ;;
        esac
    done
{registry_case}    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    case "$sub $prev" in
        {bash_flags})
            [[ "$cur" != */* ]] && COMPREPLY+=( $(compgen -W "$(_dpctl_plugin_sockets)" -- "$cur") )
            return ;;
    esac
    case " {cmds} " in *" $sub "*) ;; *) return ;; esac
    if [[ -n "$sub" && "$cur" != -* && "$cur" != */* ]]; then
        COMPREPLY+=( $(compgen -W "$(_dpctl_plugin_sockets)" -- "$cur") )
    fi
}}
complete -F _dpctl_with_sockets -o nosort -o bashdefault -o default dpctl
"#
        ),
        Shell::Fish => format!(
            r#"
# dpctl: socket arguments also complete from the plugin directory.
function __dpctl_plugin_sockets
    set -l dir /var/lib/kubelet/device-plugins
    set -q DPCTL_PLUGIN_DIR; and set dir $DPCTL_PLUGIN_DIR
    for f in $dir/*
        test -S $f; and basename $f
    end
end
function __dpctl_registry_sockets
    set -l root /var/lib/kubelet
    set -q DPCTL_KUBELET_ROOT_DIR; and set root $DPCTL_KUBELET_ROOT_DIR
    for f in $root/plugins_registry/*
        test -S $f; and basename $f
    end
end
complete -c dpctl -n "__fish_seen_subcommand_from {cmds}" -a "(__dpctl_plugin_sockets)"
{fish_flags}{fish_registry}"#
        ),
        Shell::Zsh => return zsh_with_sockets(&buf),
    };
    buf.extend_from_slice(extra.as_bytes());
    buf
}

/// clap's script with `--kubelet-version` completing the known versions
/// (clap sees only a value parser, not the values).
fn with_kubelet_versions(shell: Shell, script: &[u8], versions: &[String]) -> Vec<u8> {
    let versions = versions.join(" ");
    let text = String::from_utf8_lossy(script);
    let mut out = String::with_capacity(text.len());
    let mut after_flag = false;
    for line in text.lines() {
        let l = match shell {
            // `--kubelet-version)` then clap's file completion on the next line.
            Shell::Bash if after_flag && line.trim_start().starts_with("COMPREPLY=") => {
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}COMPREPLY=($(compgen -W \"{versions}\" -- \"${{cur}}\"))")
            }
            Shell::Zsh if line.starts_with("'--kubelet-version=[") && line.ends_with(":_default' \\") => {
                line.replace(":_default' \\", &format!(":_sequence compadd - {versions}' \\"))
            }
            Shell::Fish if line.contains(" -l kubelet-version ") && line.ends_with(" -r") => {
                format!("{} -x -a \"{versions}\"", &line[..line.len() - 3])
            }
            _ => line.to_string(),
        };
        after_flag = shell == Shell::Bash && line.trim() == "--kubelet-version)";
        out.push_str(&l);
        out.push('\n');
    }
    out.into_bytes()
}

/// clap's zsh script (an autoloaded function file), with socket arguments
/// completing from the plugin directory (files as well).
fn zsh_with_sockets(script: &[u8]) -> Vec<u8> {
    const HELPER: &str = r#"
# dpctl: socket arguments also complete from the plugin directory.
_dpctl_sockets() {
    local dir="${DPCTL_PLUGIN_DIR:-/var/lib/kubelet/device-plugins}"
    local -a socks
    socks=( "$dir"/*(N=:t) )
    _alternative 'sockets:plugin socket:compadd -a socks' 'files:file:_files'
}
_dpctl_dra_sockets() {
    local root="${DPCTL_KUBELET_ROOT_DIR:-/var/lib/kubelet}"
    local -a socks
    socks=( "$root"/plugins_registry/*(N=:t) )
    _alternative 'sockets:DRA plugin socket:compadd -a socks' 'files:file:_files'
}
"#;
    let text = String::from_utf8_lossy(script);
    let mut out = String::with_capacity(text.len() + HELPER.len());
    for (i, line) in text.lines().enumerate() {
        let socket_arg = line.starts_with("':socket -- ") || line.contains("]:SOCKET:_files'");
        if socket_arg && line.contains(DRA_SOCKET_HELP) {
            out.push_str(&line.replace(":_files'", ":_dpctl_dra_sockets'"));
        } else if socket_arg {
            out.push_str(&line.replace(":_files'", ":_dpctl_sockets'"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
        if i == 0 && line.starts_with("#compdef") {
            out.push_str(HELPER);
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_arg(cmd: &clap::Command, out: &mut Vec<String>) {
        out.extend(cmd.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()));
        for sub in cmd.get_subcommands() {
            every_arg(sub, out);
        }
    }

    fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
            }
        }
    }

    /// Every variable the binary reads — a clap `env =` or a lookup in the
    /// code — is described in ENVIRONMENT, and nothing else is.
    #[test]
    fn environment_lists_every_variable_the_code_reads() {
        let mut read = Vec::new();
        every_arg(&crate::commands::command(), &mut read);
        let mut files = Vec::new();
        sources(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        assert!(files.len() > 50, "{}", files.len());
        for (path, text) in &files {
            // Test code reads its own switches (DPCTL_REGENERATE).
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for call in ["var_os(\"", "env::var(\"", "env = \""] {
                for rest in code.split(call).skip(1) {
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    assert!(!name.is_empty(), "{}: {call}", path.display());
                    read.push(name);
                }
            }
        }
        read.sort();
        read.dedup();
        let mut listed: Vec<String> = ENVIRONMENT.iter().map(|(v, _)| v.to_string()).collect();
        listed.sort();
        assert!(read.contains(&"DPCTL_ROOT".to_string()) && read.contains(&"NO_COLOR".to_string()), "{read:?}");
        // TMPDIR is read through std::env::temp_dir().
        read.push("TMPDIR".into());
        read.sort();
        assert_eq!(read, listed, "ENVIRONMENT (src/help.rs) differs from the variables the code reads");
    }

    #[test]
    fn each_page_lists_what_its_command_reads() {
        let mut cmd = crate::commands::command();
        cmd.build();
        let find = |path: &[&str]| {
            let mut c = &cmd;
            for p in path {
                c = c.find_subcommand(p).unwrap_or_else(|| panic!("no {p}"));
            }
            c.clone()
        };
        let names = |v: Vec<(&'static str, &'static str)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            names(environment(&find(&["dra", "serve"]), "dpctl-dra-serve")),
            [
                "DPCTL_PLUGIN_DIR",
                "DPCTL_KUBELET_ROOT_DIR",
                "DPCTL_ROOT",
                "NODE_NAME",
                "KUBECONFIG",
                "KUBERNETES_SERVICE_HOST",
                "KUBERNETES_SERVICE_PORT",
                "DPCTL_SERVICEACCOUNT_DIR",
                "NO_COLOR",
                "DPCTL_WORKERS"
            ]
        );
        let test = names(environment(&find(&["test"]), "dpctl-test"));
        assert!(test.contains(&"PATH") && test.contains(&"TMPDIR") && !test.contains(&"NODE_NAME"), "{test:?}");
        assert_eq!(environment(&cmd, "dpctl").len(), ENVIRONMENT.len());
        assert!(environment_help().lines().count() > ENVIRONMENT.len());
    }
}
