//! Help text shared by `--help`, the man pages and `dpctl completion`: the
//! environment variables and exit codes, and the completion scripts (clap's,
//! plus socket names from the plugin dir). Each command's own Examples and
//! socket hints live in its file under `commands/`.

/// The environment variables dpctl reads (for man pages and `--help`).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("DPCTL_PLUGIN_DIR", "The device-plugin directory (--plugin-dir); default /var/lib/kubelet/device-plugins/."),
    ("DPCTL_KUBELET_SOCKET", "The kubelet's Registration socket (--kubelet-socket); default <plugin-dir>/kubelet.sock."),
    (
        "DPCTL_POD_RESOURCES_SOCKET",
        "The kubelet's PodResources socket (--socket, --pod-resources-socket); default <plugin-dir>/../pod-resources/kubelet.sock when --plugin-dir is given, else /var/lib/kubelet/pod-resources/kubelet.sock.",
    ),
    ("NO_COLOR", "Set to anything non-empty: never colour the output (as --no-color)."),
    ("DPCTL_WORKERS", "Runtime worker threads (0: one thread); default per command."),
];

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

/// The socket arguments of every command, for the completion scripts.
#[derive(Debug, Default, Clone)]
pub struct SocketHints {
    /// Commands whose positional argument is a socket.
    pub positional: Vec<&'static str>,
    /// `(command, flag)`: flags that take a socket.
    pub flags: Vec<(&'static str, &'static str)>,
    /// `(command, subcommand)`: subcommands whose positional argument is a DRA plugin's socket.
    pub registry: Vec<(&'static str, &'static str)>,
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
