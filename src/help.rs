//! Help text shared by `--help`, the man pages and `dpctl completion`: each
//! command's Examples section, the environment variables and exit codes, and
//! the completion scripts (clap's, plus socket names from the plugin dir).
//! A new subcommand adds its Examples text to [`EXAMPLES`], keyed by its
//! path (`"serve"`, `"bench allocate"`); [`with_examples`] attaches them.

/// Each command's Examples section (shown after its `--help`, and in its man page).
pub mod examples {
    /// dpctl options
    pub const OPTIONS: &str = "Examples:
  # What the kubelet learns first: pre_start_required, get_preferred_allocation_available
  dpctl options nvidia-gpu.sock
  # as JSON (protojson names; add --emit-defaults for false fields)
  dpctl options /var/lib/kubelet/device-plugins/vendor.sock -o json";

    /// dpctl watch
    pub const WATCH: &str = "Examples:
  # The device table, then a diff per ListAndWatch update
  dpctl watch nvidia-gpu.sock
  # one JSON object per update, stop after 3 messages
  dpctl watch vendor.sock -o json --count 3
  # follow for 10 minutes and keep a trace for dpctl replay
  dpctl watch vendor.sock --duration 10m --record vendor.trace.jsonl";

    /// dpctl allocate
    pub const ALLOCATE: &str = "Examples:
  # Allocate two devices for one container
  dpctl allocate vendor.sock foo-0 foo-2
  # two containers: foo-0 for the first, foo-1 and foo-3 for the second
  dpctl allocate vendor.sock foo-0 --container foo-1,foo-3 -o yaml";

    /// dpctl preferred
    pub const PREFERRED: &str = "Examples:
  # Ask for 2 of 4 devices, foo-3 included, and check the answer
  dpctl preferred vendor.sock --available foo-0,foo-1,foo-2,foo-3 --must-include foo-3 --size 2";

    /// dpctl prestart
    pub const PRESTART: &str = "Examples:
  dpctl prestart vendor.sock foo-0 foo-1";

    /// dpctl register
    pub const REGISTER: &str = "Examples:
  # Register vendor.sock (in the plugin directory) with the kubelet
  dpctl register --resource vendor.example/foo --endpoint vendor.sock --preferred-allocation
  # with a mock kubelet in a temp dir
  dpctl register --plugin-dir /tmp/node/device-plugins --resource vendor.example/foo --endpoint foo.sock";

    /// dpctl podresources
    pub const PODRESOURCES: &str = "Examples:
  # Every pod's devices (all namespaces), then one namespace's
  dpctl podresources list
  dpctl podresources list -n ml --no-headers
  # healthy devices of registered resources
  dpctl podresources allocatable
  # one pod; the socket of a mock kubelet
  dpctl podresources get trainer -n ml --socket /tmp/node/pod-resources/kubelet.sock";

    /// dpctl probe
    pub const PROBE: &str = "Examples:
  # PASS/WARN/FAIL per check; exit 1 if anything failed
  dpctl probe nvidia-gpu.sock
  # CI: start the plugin, then wait up to 30s for its socket, and allocate a free device
  dpctl probe --plugin-dir /tmp/dp foo.sock --wait 30s --allocate -o json";

    /// dpctl serve
    pub const SERVE: &str = "Examples:
  # Four devices on two NUMA nodes, registered with the kubelet
  dpctl serve --resource vendor.example/foo --count 4 --numa-nodes 2
  # only serve (no kubelet), at a fixed socket name, for dpctl probe
  dpctl serve --plugin-dir /tmp/dp --resource vendor.example/foo --count 4 --no-register --socket-name foo.sock
  # device nodes per allocated device: {i} is the device's index in the served list
  dpctl serve --resource vendor.example/gpu --count 4 --device-spec '/dev/gpu{i}:/dev/gpu{i}:rw'
  # resources and faults from a file
  dpctl serve --config plugin.json";

    /// dpctl device
    pub const DEVICE: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device list
  dpctl --plugin-dir /tmp/dp device set-health foo-1 foo-2 Unhealthy
  dpctl --plugin-dir /tmp/dp device add foo-9 --numa 1 --unhealthy
  dpctl --plugin-dir /tmp/dp device remove foo-9";

    /// dpctl mock-kubelet
    pub const MOCK_KUBELET: &str = "Examples:
  # A device manager in a temp dir; pods from manifests
  mkdir -p /tmp/node/device-plugins /tmp/node/manifests
  dpctl mock-kubelet --plugin-dir /tmp/node/device-plugins --manifests /tmp/node/manifests
  # then, in another shell
  dpctl serve --plugin-dir /tmp/node/device-plugins --resource vendor.example/foo --count 4
  dpctl node --plugin-dir /tmp/node/device-plugins
  dpctl podresources list --plugin-dir /tmp/node/device-plugins
  # DRA drivers too: a local API server (writes /tmp/node/kubeconfig), claims beside the pods
  mkdir -p /tmp/node/plugins_registry
  dpctl mock-kubelet --plugin-dir /tmp/node/device-plugins --manifests /tmp/node/manifests \\
    --plugins-registry-dir /tmp/node/plugins_registry --api-server 127.0.0.1:0
  dpctl --kubelet-root-dir /tmp/node dra serve --driver gpu.example.com --cdi-dir /tmp/node/cdi \\
    --kubeconfig /tmp/node/kubeconfig --node-name dpctl-node
  # behave as kubelet 1.31; what that changes
  dpctl mock-kubelet --kubelet-version 1.31 --plugin-dir /tmp/node/device-plugins
  dpctl mock-kubelet --kubelet-version 1.31 --explain-profile";

    /// dpctl node
    pub const NODE: &str = "Examples:
  dpctl node --plugin-dir /tmp/node/device-plugins
  dpctl node --plugin-dir /tmp/node/device-plugins -o json";

    /// dpctl demo
    pub const DEMO: &str = "Examples:
  # Mock kubelet + simulated plugin + a pod, until Ctrl-C
  dpctl demo
  # the same, printed once, then cleaned up
  dpctl demo --once
  # DRA: a simulated DRA driver, a ResourceClaim allocated, prepared and in PodResources
  dpctl demo --dra --once";

    /// dpctl checkpoint
    pub const CHECKPOINT: &str = "Examples:
  dpctl checkpoint
  dpctl checkpoint --file /tmp/node/device-plugins/kubelet_internal_checkpoint -o json";

    /// dpctl doctor
    pub const DOCTOR: &str = "Examples:
  # What is wrong with this node's device plugins, and how to fix it
  dpctl doctor
  dpctl doctor -o json
  # from a debug pod, with the node's filesystem at /host
  kubectl debug node/NODE -it --profile=sysadmin --image=IMAGE -- dpctl doctor --root /host
  # never open ListAndWatch (plugins that misbehave with extra clients)
  dpctl doctor --no-streams
  # node-problem-detector custom plugin: one line, exit 0 ok / 1 problem / 2 unknown
  dpctl doctor --npd";

    /// dpctl test
    pub const TEST: &str = "Examples:
  # Run a plugin through every scenario against a mock kubelet in a temp dir
  dpctl test -- dpctl serve --resource vendor.example/gpu --count 4 --plugin-dir {plugin-dir} --retry
  dpctl test --junit report.xml -- ./my-plugin --socket-dir {plugin-dir}
  dpctl test --focus 'KRES|PRES' -- ./my-plugin
  dpctl test --restart-backoff 1s --health-trigger './break-gpu0 {plugin-dir}' --health-timeout 60s -- ./my-plugin
  dpctl test --isolate -- ./plugin-with-hard-coded-paths
  # the plugin's support range in one run (results per kubelet version)
  dpctl test --kubelet-version 1.31,1.37 --junit report.xml -- ./my-plugin --socket-dir {plugin-dir}
  # a plugin that is already running (no process or kubelet control)
  dpctl test --socket /var/lib/kubelet/device-plugins/gpu.sock
  # a DRA driver's kubelet plugin, with the engine's local API server
  dpctl test --dra -- dpctl --kubelet-root-dir {kubelet-root-dir} dra serve --driver gpu.example.com \\
    --cdi-dir {cdi-dir} --kubeconfig {kubeconfig} --node-name {node-name}";

    /// dpctl record
    pub const RECORD: &str = "Examples:
  # Record everything the kubelet and nvidia-gpu.sock say, until Ctrl-C
  dpctl record --plugin nvidia-gpu.sock --resource nvidia.com/gpu --out gpu.trace.jsonl
  dpctl record --plugin vendor.sock --resource vendor.example/foo --out foo.trace.jsonl --duration 10m";

    /// dpctl replay
    pub const REPLAY: &str = "Examples:
  # Be the recorded plugin again, against a (mock) kubelet
  dpctl replay gpu.trace.jsonl --plugin-dir /tmp/node/device-plugins --speed 10
  # be the kubelet: send the recorded calls to a plugin and diff the answers
  dpctl replay gpu.trace.jsonl --against /tmp/dp/my-plugin.sock";

    /// dpctl bench
    pub const BENCH: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000 -o json
  dpctl bench list-and-watch vendor.sock --concurrency 4
  dpctl bench watch
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000";

    /// dpctl completion
    pub const COMPLETION: &str = "Examples:
  # bash, this shell only
  source <(dpctl completion bash)
  # zsh
  dpctl completion zsh > \"${fpath[1]}/_dpctl\"
  # fish
  dpctl completion fish > ~/.config/fish/completions/dpctl.fish";
}

/// Examples of nested subcommands (each `--help` ends with its own).
pub mod nested {
    /// dpctl podresources list
    pub const PODRESOURCES_LIST: &str = "Examples:
  dpctl podresources list
  dpctl podresources list -n ml
  dpctl podresources list -A --no-headers -o table
  dpctl podresources list --plugin-dir /tmp/node/device-plugins -o json";
    /// dpctl podresources allocatable
    pub const PODRESOURCES_ALLOCATABLE: &str = "Examples:
  dpctl podresources allocatable
  dpctl podresources allocatable --socket /tmp/node/pod-resources/kubelet.sock -o yaml";
    /// dpctl podresources get
    pub const PODRESOURCES_GET: &str = "Examples:
  dpctl podresources get trainer -n ml
  dpctl podresources get demo-trainer -o json";
    /// dpctl device list
    pub const DEVICE_LIST: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device list
  dpctl device list --control /tmp/dp/dpctl-control/serve-1234.sock -o json";
    /// dpctl device set-health
    pub const DEVICE_SET_HEALTH: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device set-health foo-1 foo-2 Unhealthy
  dpctl --plugin-dir /tmp/dp device set-health foo-1 Healthy --resource vendor.example/foo";
    /// dpctl device add
    pub const DEVICE_ADD: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device add foo-9 --numa 1
  dpctl --plugin-dir /tmp/dp device add foo-10 foo-11 --unhealthy";
    /// dpctl device remove
    pub const DEVICE_REMOVE: &str = "Examples:
  dpctl --plugin-dir /tmp/dp device remove foo-9";
    /// dpctl bench allocate
    pub const BENCH_ALLOCATE: &str = "Examples:
  dpctl bench allocate vendor.sock --concurrency 16 --duration 10s
  dpctl bench allocate vendor.sock --requests 20000 --devices-per-request 2 -o json";
    /// dpctl bench preferred
    pub const BENCH_PREFERRED: &str = "Examples:
  dpctl bench preferred vendor.sock --devices-per-request 2 --requests 20000";
    /// dpctl bench list-and-watch
    pub const BENCH_LIST_AND_WATCH: &str = "Examples:
  dpctl bench list-and-watch vendor.sock --concurrency 4";
    /// dpctl bench watch
    pub const BENCH_WATCH: &str = "Examples:
  dpctl bench watch
  dpctl bench watch --socket /tmp/dp/foo.sock --changes 200 --sizes 1000";
    /// dpctl bench kubelet
    pub const BENCH_KUBELET: &str = "Examples:
  dpctl bench kubelet --plugins 100 --devices 100 --pods 1000 -o json";
}

/// The top-level Examples.
pub const TOP: &str = "Examples:
  # What a plugin on this node tells the kubelet
  dpctl probe nvidia-gpu.sock
  dpctl watch nvidia-gpu.sock
  # the first minute: mock kubelet + simulated plugin + a pod, in a temp dir
  dpctl demo
  # what is wrong with this node's device plugins
  dpctl doctor";

/// Every command's Examples section, by command path.
pub const EXAMPLES: &[(&str, &str)] = &[
    ("", TOP),
    ("options", examples::OPTIONS),
    ("watch", examples::WATCH),
    ("allocate", examples::ALLOCATE),
    ("preferred", examples::PREFERRED),
    ("prestart", examples::PRESTART),
    ("register", examples::REGISTER),
    ("podresources", examples::PODRESOURCES),
    ("podresources list", nested::PODRESOURCES_LIST),
    ("podresources allocatable", nested::PODRESOURCES_ALLOCATABLE),
    ("podresources get", nested::PODRESOURCES_GET),
    ("probe", examples::PROBE),
    ("serve", examples::SERVE),
    ("device", examples::DEVICE),
    ("device list", nested::DEVICE_LIST),
    ("device set-health", nested::DEVICE_SET_HEALTH),
    ("device add", nested::DEVICE_ADD),
    ("device remove", nested::DEVICE_REMOVE),
    ("mock-kubelet", examples::MOCK_KUBELET),
    ("node", examples::NODE),
    ("demo", examples::DEMO),
    ("checkpoint", examples::CHECKPOINT),
    ("doctor", examples::DOCTOR),
    ("record", examples::RECORD),
    ("replay", examples::REPLAY),
    ("bench", examples::BENCH),
    ("bench allocate", nested::BENCH_ALLOCATE),
    ("bench preferred", nested::BENCH_PREFERRED),
    ("bench list-and-watch", nested::BENCH_LIST_AND_WATCH),
    ("bench watch", nested::BENCH_WATCH),
    ("bench kubelet", nested::BENCH_KUBELET),
    ("test", examples::TEST),
    ("completion", examples::COMPLETION),
];

/// The Examples sections of `dpctl dra …`, by command path (chained after [`EXAMPLES`]).
pub const DRA_EXAMPLES: &[(&str, &str)] = &[
    (
        "dra",
        "Examples:
  # Which DRA drivers are registered on this node, and are they live?
  dpctl dra list
  # Check a driver against the kubelet's rules, preparing a throwaway claim
  dpctl dra probe gpu.example.com-reg.sock --prepare
  # A simulated driver in a temp kubelet root, for tests and demos
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi",
    ),
    (
        "dra info",
        "Examples:
  dpctl dra info gpu.example.com-reg.sock
  dpctl dra info /var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock -o json",
    ),
    (
        "dra probe",
        "Examples:
  # registration rules, the endpoint, each advertised service, the health stream
  dpctl dra probe gpu.example.com-reg.sock
  # also prepare (twice) and unprepare a throwaway claim; resolve its CDI IDs
  dpctl dra probe gpu.example.com-reg.sock --prepare --cdi-spec-dir /var/run/cdi
  # the service socket directly (no GetInfo): v1 and v1beta1 are tried
  dpctl dra probe /var/lib/kubelet/plugins/gpu.example.com/dra.sock -o json",
    ),
    (
        "dra prepare",
        "Examples:
  dpctl dra prepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001
  # two claims, called twice (idempotence), CDI IDs resolved, on the deprecated v1beta1 service
  dpctl dra prepare dra.sock --claim ml/a/uid-a --claim ml/b/uid-b --twice --cdi-spec-dir /var/run/cdi --service v1beta1",
    ),
    (
        "dra unprepare",
        "Examples:
  dpctl dra unprepare gpu.example.com-reg.sock --claim default/gpu-claim/6f1c9a2e-0000-4000-8000-000000000001",
    ),
    (
        "dra health",
        "Examples:
  # the health table, then a line per change
  dpctl dra health gpu.example.com-reg.sock
  # one JSON object per snapshot, on the v1alpha1 service, stop after 3
  dpctl dra health gpu.example.com-reg.sock --service v1alpha1 -o json --count 3",
    ),
    (
        "dra list",
        "Examples:
  dpctl dra list
  dpctl --kubelet-root-dir /var/lib/rancher/k3s/agent/kubelet dra list -o json",
    ),
    (
        "dra serve",
        "Examples:
  # a driver with 4 devices under a temp kubelet root; CDI specs per prepared claim in /tmp/k/cdi
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --cdi-dir /tmp/k/cdi
  # a second instance during a rolling update (uid-named sockets)
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --rolling-update 2 --cdi-dir /tmp/k/cdi
  # break a rule on purpose: dra probe flags it
  dpctl --kubelet-root-dir /tmp/k dra serve --driver gpu.example.com --fault missing-uid --fault long-message",
    ),
    (
        "dra device",
        "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-1 Unhealthy --message 'ECC errors'",
    ),
    (
        "dra device list",
        "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device list -o json",
    ),
    (
        "dra device set-health",
        "Examples:
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 dev-1 Unhealthy --message 'XID 79'
  dpctl --kubelet-root-dir /tmp/k dra device set-health dev-0 Healthy --driver gpu.example.com",
    ),
];

/// The Examples text of a command path (`""` for dpctl itself).
pub fn examples_for(path: &str) -> Option<&'static str> {
    EXAMPLES.iter().chain(DRA_EXAMPLES).find(|(p, _)| *p == path).map(|(_, e)| *e)
}

/// Attach each command's Examples section as its `after_help` (kept when a
/// command already sets its own).
pub fn with_examples(cmd: clap::Command) -> clap::Command {
    fn walk(cmd: clap::Command, path: String) -> clap::Command {
        let mut cmd = cmd;
        if cmd.get_after_help().is_none() {
            if let Some(e) = examples_for(&path) {
                cmd = cmd.after_help(e);
            }
        }
        let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for n in names {
            let sub_path = if path.is_empty() { n.clone() } else { format!("{path} {n}") };
            cmd = cmd.mut_subcommand(&n, |s| walk(s, sub_path));
        }
        cmd
    }
    walk(cmd, String::new())
}

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

/// The commands whose positional SOCKET argument completes from the plugin directory.
pub const SOCKET_COMMANDS: &[&str] = &["options", "watch", "allocate", "preferred", "prestart", "probe"];

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
/// (bash and fish: positional SOCKET arguments plus `record --plugin`,
/// `replay --against` and `test --socket`; zsh: every SOCKET argument).
pub fn completion_script(shell: Shell, cmd: &mut clap::Command) -> Vec<u8> {
    let mut buf = Vec::new();
    let gen = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(gen, cmd, "dpctl", &mut buf);
    let cmds = SOCKET_COMMANDS.join(" ");
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
_dpctl_with_sockets() {{
    _dpctl "$@"
    local cur="${{COMP_WORDS[COMP_CWORD]}}" sub="" w
    local skip=0
    for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        if ((skip)); then skip=0; continue; fi
        case "$w" in
            --plugin-dir|-o|--output|--timeout) skip=1 ;;
            -*) ;;
            *) sub="$w"; break ;;
        esac
    done
    local prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    case "$sub $prev" in
        "record --plugin"|"replay --against"|"test --socket")
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
complete -c dpctl -n "__fish_seen_subcommand_from {cmds}" -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from record" -l plugin -r -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from replay" -l against -r -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from test" -l socket -r -a "(__dpctl_plugin_sockets)"
"#
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
"#;
    let text = String::from_utf8_lossy(script);
    let mut out = String::with_capacity(text.len() + HELPER.len());
    for (i, line) in text.lines().enumerate() {
        let socket_arg = line.starts_with("':socket -- ") || line.contains("]:SOCKET:_files'");
        if socket_arg {
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
