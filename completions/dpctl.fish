# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dpctl_global_optspecs
    string join \n o/output= emit-defaults no-headers timeout= v/verbose no-color plugin-dir= root= kubelet-root-dir= h/help V/version
end

function __fish_dpctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dpctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dpctl_using_subcommand
    set -l cmd (__fish_dpctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dpctl -n "__fish_dpctl_needs_command" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_needs_command" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_needs_command" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_needs_command" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_needs_command" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_needs_command" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_needs_command" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_needs_command" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_needs_command" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_needs_command" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "demo" -d 'A first minute with dpctl: a mock kubelet, a simulated plugin (--dra: a DRA driver) and a pod, in a temp dir'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "completion" -d 'Print a shell completion script (bash, zsh or fish); sockets complete from --plugin-dir and plugins_registry/'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "options" -d 'Call GetDevicePluginOptions on a device plugin'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "watch" -d 'Stream a device plugin\'s ListAndWatch: the device table, then a diff per update'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "allocate" -d 'Call Allocate on a device plugin for one or more containers'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "preferred" -d 'Call GetPreferredAllocation and check the answer against the request'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "prestart" -d 'Call PreStartContainer on a device plugin'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "probe" -d 'One-shot health check of a device plugin: PASS/WARN/FAIL per check (DRA drivers: dra probe)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "dra" -d 'DRA kubelet plugins: info, probe, prepare, unprepare, health, list; a simulated driver (serve)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "serve" -d 'Serve simulated devices as a device plugin, registered with a real or mock kubelet (DRA: dra serve)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "device" -d 'Change the devices of a running `dpctl serve` (live control)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "record" -d 'Record everything the kubelet asks a device plugin and it answers, through a tap socket'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "replay" -d 'Replay a trace as the plugin (against a kubelet), as the kubelet (--against a plugin), or both on this machine (--kubelet)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "mock-kubelet" -d 'Stand in for the kubelet: device plugins and DRA drivers registered, pods admitted, PodResources, a local API server'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "node" -d 'Show the running mock kubelet\'s node: device capacity and allocatable, DRA drivers and claims, pods'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "register" -d 'Send one RegisterRequest to a kubelet (real or mock) and report its answer'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "podresources" -d 'Query the kubelet\'s PodResources v1 API: devices and DRA claims per container'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "pods" -d 'Query the kubelet\'s pods API (1.36+): its pods with their status, listed, one by UID or name, or watched'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "checkpoint" -d 'Show the kubelet\'s device-manager checkpoint, with each allocation\'s decoded Allocate answer'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "doctor" -d 'Inspect the node read-only: what is wrong with its device plugins and DRA drivers, and how to fix it'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "test" -d 'Conformance suites: run a device plugin (or, with --dra, a DRA driver) against a mock kubelet'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "compare" -d 'Run a device plugin and its DRA replacement side by side and compare what containers get'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "bench" -d 'Benchmarks: drive a plugin, time health changes, time a mock kubelet at scale'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l kubelet-version -d 'The demo\'s kubelet behaves as this version (1.25 to 1.37)' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l once -d 'Show the result and exit instead of running until Ctrl-C'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l dra -d 'Demonstrate DRA instead: a simulated DRA driver, a ResourceClaim allocated, prepared and in PodResources'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l device-metadata -d 'With --dra: the driver also writes device metadata (KEP-5304), as `dra serve --device-metadata` does; the demo shows the file and the CDI spec that mounts it into the container'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l shares -d 'With --dra: two claims share one device (consumable capacity, KEP-5075), as `dra serve --shared-capacity` publishes it; the demo shows each claim\'s shareID and CDI device'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l extended -d 'Demonstrate DRA-backed extended resources: the same pods served by a device plugin and by a DRA driver whose DeviceClass maps the resource, compared per container (dpctl compare)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand completion" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l count -d 'Stop after N ListAndWatch messages (the initial snapshot counts as the first)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l duration -d 'Stop after this long (e.g. 30s, 5m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l record -d 'Also record the options and every snapshot to this trace file (must not exist)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l container -d 'Device IDs for one more container, comma-separated (repeat for several containers)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l available -d 'Candidate device IDs, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l must-include -d 'Device IDs the answer must include, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l size -d 'How many devices to ask for' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l cdi-spec-dir -d 'With --allocate: a directory of CDI specs to resolve CDI names in (repeatable) [default: /etc/cdi and /var/run/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l wait -d 'Wait up to this long for the socket to appear and answer before checking (for CI right after starting a plugin)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l pod-resources-socket -d 'The kubelet\'s PodResources socket, to pick a free device for --allocate [default: as podresources]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l allocate -d 'Also allocate one healthy device that no container holds (per PodResources) and check the response (and PreStartContainer if required)'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "info" -d 'Call GetInfo on a DRA plugin\'s registration socket'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "probe" -d 'One-shot check of a DRA plugin against the kubelet\'s rules: PASS/WARN/FAIL per rule'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "prepare" -d 'Call NodePrepareResources for one or more claims and check the answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "unprepare" -d 'Call NodeUnprepareResources for one or more claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "health" -d 'Watch a DRA plugin\'s device health (NodeWatchResources): a table, then a line per change'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "list" -d 'List the DRA plugins registered under the kubelet\'s root: driver, endpoint, versions, live or stale'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "serve" -d 'Serve a simulated DRA driver\'s kubelet plugin, registered through the plugin watcher'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "device" -d 'Show or change the devices of a running `dpctl dra serve` (live control)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info probe prepare unprepare health list serve device help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l claim -d 'With --prepare: prepare this claim (NAMESPACE/NAME/UID of a claim allocated to the driver) instead of a throwaway one, for drivers that read claims from an API server' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l cdi-spec-dir -d 'With --prepare: resolve CDI IDs in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l wait -d 'Wait up to this long for the socket to appear and answer before checking (for CI right after starting a driver)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l prepare -d 'Also prepare a throwaway claim (twice, for idempotence), resolve its CDI IDs, then unprepare it'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l claim -d 'A claim as NAMESPACE/NAME/UID (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l service -d 'The service to call: v1 or v1beta1 [default: the kubelet\'s choice from GetInfo, else v1]' -r -f -a "v1\t''
v1beta1\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l cdi-spec-dir -d 'prepare: resolve the CDI IDs of the answer in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l twice -d 'prepare: call twice and check both answers are the same (the kubelet repeats calls)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l claim -d 'A claim as NAMESPACE/NAME/UID (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l service -d 'The service to call: v1 or v1beta1 [default: the kubelet\'s choice from GetInfo, else v1]' -r -f -a "v1\t''
v1beta1\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l cdi-spec-dir -d 'prepare: resolve the CDI IDs of the answer in this spec directory (repeatable) [default: /etc/cdi and /var/run/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l twice -d 'prepare: call twice and check both answers are the same (the kubelet repeats calls)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l service -d 'The health service: v1 or v1alpha1 [default: the kubelet\'s choice from GetInfo, else v1 then v1alpha1]' -r -f -a "v1\t''
v1alpha1\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l count -d 'Stop after this many snapshots' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from health" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l driver -d 'The driver name (a lowercase DNS subdomain, e.g. gpu.example.com)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l pool -d 'The pool the devices are in' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l devices -d 'How many devices (named dev-0, dev-1, …) (a pool of more than 128 is published in several ResourceSlices, as the API requires)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l cdi-dir -d 'Where to write a CDI spec per prepared claim (removed on unprepare) [default: /var/run/cdi under --root]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l services -d 'The services to serve and list in supported_versions, in order' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l rolling-update -d 'Rolling-update mode: sockets <driver>-UID-reg.sock and dra-UID.sock, so two instances serve at once' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l health-timeout -d 'health_check_timeout_seconds sent for each device (0: the kubelet\'s default)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l fault -d 'Break one rule on purpose (repeatable): wrong-type, bad-driver-name, relative-endpoint, endpoint-outside-root, long-endpoint, no-versions, v1beta1-first, dead-endpoint, unserved-v1, slow=DURATION, missing-uid, extra-uid, no-pool-name, bad-cdi-id, not-idempotent, ignore-allocation, unserved-health, health-stream-end, health-unimplemented, health-bad-device, long-message, no-timestamp, prepare-error=MESSAGE, keep-cdi-spec, empty-slice, incomplete-pool, no-republish, answer-other-claims, wrong-pool, empty-cdi-edits, health-unknown-device, stale-health, memory-only-state, new-cdi-ids, remove-cdi-on-exit, ignore-uid, exit-on-missing-claim, not-idempotent-error, foreign-request-names, deadlock-after-unknown-unprepare, racy-prepare, answer-from-checkpoint, ignore-config, late-prepare, unserved-v1beta1' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l kubeconfig -d 'Publish the devices as a ResourceSlice to the API server of this kubeconfig (http or https, as client-go reads it, exec credential plugins too) [default: KUBECONFIG\'s files merged; in a pod without them: the in-cluster config of its service account]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l context -d 'The kubeconfig context to use (of --kubeconfig or KUBECONFIG) [default: its current-context]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l node-name -d 'The node the ResourceSlice names [default: this host\'s name]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l control-socket -d 'The live-control socket [default: <kubelet-root>/plugins/<driver>/dpctl-control/dra-<pid>.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l env -d 'An env var each prepared device\'s CDI edits set ({id} = the device), instead of DPCTL_DRA_DEVICE and DPCTL_DRA_CLAIM (repeatable; to match a device plugin\'s Allocate, see dpctl compare)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l numa-nodes -d 'Spread the devices over N NUMA nodes, published as each device\'s `numaNode` attribute in the ResourceSlice (as `dpctl serve --numa-nodes` reports them in Device.topology)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l binding-conditions -d 'Publish each device with these bindingConditions (KEP-5007): the scheduler binds a pod only once a controller sets each True in the claim\'s status.devices (with --binding-failure-conditions; at most 4)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l binding-failure-conditions -d 'Publish each device with these bindingFailureConditions: any True in the claim\'s status.devices makes the scheduler deallocate the claim (with --binding-conditions; at most 4)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l shared-capacity -d 'Consumable capacity (KEP-5075): publish each device with allowMultipleAllocations and these capacities, so several claims get shares of one device (each result a shareID and its consumedCapacity; a CDI device per share). NAME=QUANTITY[/default=QUANTITY][/step=QUANTITY]: the request policy\'s default and validRange step (min: the default). Beta from 1.36: on a 1.34–1.35 mock kubelet the API server drops allowMultipleAllocations and the policy unless its DRAConsumableCapacity gate is on (mock-kubelet --feature-gates)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l node-allocatable -d 'Node-allocatable resources (KEP-5517): publish each device\'s nodeAllocatableResources, each RESOURCE (cpu, memory, …) a mapping of deviceMultiplier QUANTITY. Alpha: the API server drops the field unless its DRANodeAllocatableResources gate is on (mock-kubelet --feature-gates)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l device-metadata -d 'Device metadata (KEP-5304), as the kubeletplugin helper\'s EnableDeviceMetadata writes it: per request of a prepared claim a metadata.json under <plugin dir>/dra-device-metadata/ and a CDI spec mounting it at /var/run/kubernetes.io/dra-device-attributes/… (removed on unprepare). VERSIONS: the metadata.resource.k8s.io versions written, in order (v1beta1 required; v1alpha1 too for consumers built for 1.36) [default: v1beta1]. Needs an API server (the claims)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l log-format -d 'Log format' -r -f -a "human\t'`TIME EVENT key=value …`'
json\t'One JSON object per line: `{"time":…,"event":…,…}`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l no-register -d 'Do not create the plugin-watcher registration socket (serve the service socket only)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l common-cdi-spec -d 'Also write a common CDI spec at start (k8s.<driver>/claim=common, kept on unprepare) and return its ID with every prepared device, as the example driver does'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l withdraw-on-exit -d 'Delete its ResourceSlices when it stops. Off by default, as the kubeletplugin helper: the kubelet wipes a gone driver\'s slices after 30 s, and slices kept across a quick update stay allocatable (DRA-ROLL-002 fails a driver that deletes them). For use without a kubelet'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -f -a "list" -d 'List the devices and prepared claims of a running dpctl dra serve'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -f -a "update-metadata" -d 'Rewrite a prepared claim\'s device metadata for one request with network data, its generation one up (dra serve --device-metadata; the kubeletplugin helper\'s UpdateRequestMetadata)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -f -a "set-health" -d 'Set devices Healthy, Unhealthy or Unknown: names, then the health'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from device" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "info" -d 'Call GetInfo on a DRA plugin\'s registration socket'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "probe" -d 'One-shot check of a DRA plugin against the kubelet\'s rules: PASS/WARN/FAIL per rule'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "prepare" -d 'Call NodePrepareResources for one or more claims and check the answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "unprepare" -d 'Call NodeUnprepareResources for one or more claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "health" -d 'Watch a DRA plugin\'s device health (NodeWatchResources): a table, then a line per change'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the DRA plugins registered under the kubelet\'s root: driver, endpoint, versions, live or stale'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serve a simulated DRA driver\'s kubelet plugin, registered through the plugin watcher'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "device" -d 'Show or change the devices of a running `dpctl dra serve` (live control)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l config -d 'Serve the resources in this JSON file, e.g. {"resources":[{"resource":"vendor.example/foo","count":4}]}; every per-resource flag is a camelCase field there (idPattern, numaNodes, preStart, allocate, faults, …)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l resource -d 'Extended resource name, e.g. vendor.example/foo' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l count -d 'Number of devices (IDs from --id-pattern), at most 100000' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l devices -d 'Explicit device IDs, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l id-pattern -d 'ID pattern; {i} is the index [default: <short name>-{i}, e.g. foo-{i}]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l numa-nodes -d 'Spread the devices over N NUMA nodes (reported in Device.topology), at most 1024' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l unhealthy -d 'Devices that start Unhealthy, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l policy -d 'GetPreferredAllocation policy' -r -f -a "packed\t'Fewest NUMA nodes, lowest IDs'
distributed\t'Spread across NUMA nodes'"
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l env -d 'Allocate: an env var per container; {ids} = the allocated IDs [default: <NAME>_VISIBLE_DEVICES={ids}]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l annotation -d 'Allocate: an annotation per container ({ids})' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l mount -d 'Allocate: a mount per container ({ids})' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l device-spec -d 'Allocate: a device node per allocated device; {id} = the device ID, {i} = its index in the served list (gpu-3 → 3), {pos} = its position in the request' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l cdi -d 'Allocate: a CDI device name per allocated device, e.g. vendor.example/foo={id} ({i}, {pos} as --device-spec)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l socket-name -d 'Socket file name in the plugin directory [default: unique per start]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l kubelet-socket -d 'The kubelet\'s Registration socket [default: <plugin-dir>/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l registration -d 'How to register' -r -f -a "kubelet\t'Call Register on the kubelet\'s kubelet.sock'
plugin-watcher\t'Serve pluginregistration.Registration in the plugin-watcher directory'"
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l plugins-registry-dir -d 'The plugin watcher\'s directory, under --root [default: <kubelet-root-dir>/plugins_registry]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l control-socket -d 'Live-control socket [default: <plugin-dir>/dpctl-control/serve-<pid>.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l log-format -d 'Log format' -r -f -a "human\t'`TIME EVENT key=value …`'
json\t'One JSON object per line: `{"time":…,"event":…,…}`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l flap -d 'Fault: toggle a device\'s health every PERIOD (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l allocate-latency -d 'Fault: extra latency of every Allocate' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l allocate-failure-rate -d 'Fault: fraction of Allocate calls that fail with Internal (0..1)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l preferred-fault -d 'Fault: a wrong GetPreferredAllocation answer' -r -f -a "none\t'Answer correctly'
foreign\t'Include an ID that was not offered'
too-many\t'Answer one device more than asked for'
drop-must-include\t'Leave out the must-include devices'
ignore-available\t'Choose among all devices, ignoring which were offered'
first-n\t'Answer the first N offered devices, ignoring must-include'"
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l close-stream-after -d 'Fault: end every ListAndWatch stream after N messages' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l pre-start-latency -d 'Fault: extra latency of PreStartContainer' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l reregister-delay -d 'Fault: register again only DURATION after a kubelet restart' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l first-snapshot-delay -d 'Fault: every ListAndWatch stream sends its first list only after DURATION' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l pre-start -d 'Advertise pre_start_required and log PreStartContainer calls'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l preferred-allocation -d 'Advertise and implement GetPreferredAllocation'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l no-register -d 'Serve without registering (for client-side tests and dpctl probe)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l retry -d 'Keep retrying a failed first registration (with backoff) instead of exiting 1'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l reregister-on-disconnect -d 'Register again when the kubelet closes our ListAndWatch stream and opens none within 1s while kubelet.sock is unchanged (kubelets up to 1.36 disconnect a plugin when an earlier instance\'s stream ends, kubernetes#121994)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l pre-start-fail -d 'Fault: PreStartContainer fails with Internal'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l no-reregister -d 'Fault: never register again after a kubelet restart'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l no-reregister-on-disconnect -d 'Fault: never register again when the kubelet closes our ListAndWatch stream and opens none (by default serve registers again, as kubelets up to 1.36 need after a rolling update, kubernetes#121994)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l new-ids-after-restart -d 'Fault: new device IDs at every start and kubelet restart'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l delete-other-sockets -d 'Fault: delete every other socket in the plugin directory at start (kubelet.sock excepted)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l keep-socket-on-exit -d 'Fault: leave the socket behind on SIGTERM'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l exit-without-kubelet -d 'Fault: exit at start when kubelet.sock is missing, even with --retry'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l register-twice -d 'Fault: register a second time from the same socket once the kubelet\'s stream is open, as a kubelet.sock watcher that takes the socket it finds at start for a new kubelet (a 1.37 kubelet refuses it, kubernetes#139338)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l unhealthy-on-exit -d 'Fault: on SIGTERM, send every stream a last list with every device Unhealthy before exiting (since 1.37 that list is the node\'s devices while another instance runs, kubernetes#135437)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l hang-after-cancel -d 'Fault: once the kubelet cancels a ListAndWatch stream, later streams never send'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l empty-first-snapshot -d 'Fault: every ListAndWatch stream starts with an empty list; the devices follow 1 ms later'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l health-one-stream -d 'Fault: a device change is sent on one stream only, the oldest open one (a shared update channel)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -f -a "list" -d 'List the devices of running dpctl serve processes'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -f -a "set-health" -d 'Set devices Healthy or Unhealthy: IDs, then the health'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -f -a "add" -d 'Add devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -f -a "remove" -d 'Remove devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and not __fish_seen_subcommand_from list set-health add remove help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l resource -d 'The resource to change (needed when several are served)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l control -d 'A specific control socket [default: found in <plugin-dir>/dpctl-control/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l resource -d 'The resource to change (needed when several are served)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l control -d 'A specific control socket [default: found in <plugin-dir>/dpctl-control/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from set-health" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l numa -d 'NUMA node of the new devices' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l resource -d 'The resource to change (needed when several are served)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l control -d 'A specific control socket [default: found in <plugin-dir>/dpctl-control/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l unhealthy -d 'Add them Unhealthy'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l resource -d 'The resource to change (needed when several are served)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l control -d 'A specific control socket [default: found in <plugin-dir>/dpctl-control/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the devices of running dpctl serve processes'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "set-health" -d 'Set devices Healthy or Unhealthy: IDs, then the health'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand device; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l plugin -d 'The plugin\'s socket (a bare name is looked up in --plugin-dir)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l resource -d 'The plugin\'s resource name (the tap registers under it)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l out -d 'The trace file to write (must not exist)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l kubelet-socket -d 'The kubelet\'s Registration socket [default: <plugin-dir>/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l duration -d 'Stop after this long (default: until SIGINT/SIGTERM)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l pod-resources-socket -d 'The kubelet\'s PodResources socket, read for which pod each Allocate was for [default: <plugin-dir>/../pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l restart-timeout -d 'After a kubelet restart, give up (exit 1) if the kubelet and the plugin are not back within this long' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l log-format -d 'Log format' -r -f -a "human\t'`TIME EVENT key=value …`'
json\t'One JSON object per line: `{"time":…,"event":…,…}`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l against -d 'Act as the kubelet: send the recorded calls to this plugin and diff the answers' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l kubelet-version -d 'With --kubelet: the mock kubelet behaves as this version (1.25 to 1.37)' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l resource -d 'Resource name to register (default: the trace\'s)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l speed -d 'Replay the ListAndWatch timeline this many times faster' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l socket-name -d 'Socket file name in the plugin directory [default: unique per start]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l kubelet-socket -d 'The kubelet\'s Registration socket [default: <plugin-dir>/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l registration -d 'How to register' -r -f -a "kubelet\t'Call Register on the kubelet\'s kubelet.sock'
plugin-watcher\t'Serve pluginregistration.Registration in the plugin-watcher directory'"
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l plugins-registry-dir -d 'The plugin watcher\'s directory, under --root [default: <kubelet-root-dir>/plugins_registry]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l log-format -d 'Log format' -r -f -a "human\t'`TIME EVENT key=value …`'
json\t'One JSON object per line: `{"time":…,"event":…,…}`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l kubelet -d 'Reproduce on this machine: a mock kubelet seeded with the recorded pods and allocations, the replayed plugin, the recorded pods admitted again; report where the device choices differ'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l no-wait -d 'Replay the ListAndWatch timeline without its recorded pauses'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l no-register -d 'Serve without registering (for client-side tests and dpctl probe)'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l retry -d 'Keep retrying a failed first registration (with backoff) instead of exiting 1'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l reregister-on-disconnect -d 'Register again when the kubelet closes our ListAndWatch stream and opens none within 1s while kubelet.sock is unchanged (kubelets up to 1.36 disconnect a plugin when an earlier instance\'s stream ends, kubernetes#121994)'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l pod-resources-socket -d 'Serve PodResources here [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else /var/lib/kubelet/pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l manifests -d 'Admit pods from static pod manifests (YAML or JSON) in this directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l plugins-registry-dir -d 'Also register plugins found in this plugin-watcher directory [default with --api-server: <kubelet-root>/plugins_registry, created as the kubelet creates it; else none]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l cdi-spec-dir -d 'Resolve DRA drivers\' CDI IDs in this spec directory (repeatable) [default: $DPCTL_CDI_SPEC_DIRS, else /etc/cdi, /var/run/cdi and <kubelet-root>/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l metrics-addr -d 'Serve /metrics and /healthz on this address, e.g. 127.0.0.1:9400' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l api-server -d 'Serve a local API server for DRA drivers on ADDR (loopback, e.g. 127.0.0.1:0): ResourceSlices and claims (Kubernetes protobuf or JSON, as the client asks) over HTTPS with a CA of its own and a bearer token, both written into <kubelet-root>/kubeconfig; turns on the plugin watcher' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l grace-period -d 'How long a plugin\'s devices stay (unhealthy) after its stream ends' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l max-recv-size -d 'Receive limit for plugin messages (the kubelet\'s is the gRPC default, 4 MiB)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l topology-policy -d 'Topology manager policy' -r -f -a "none\t'No NUMA alignment'
best-effort\t'Prefer aligned devices, never reject'
restricted\t'Reject pods whose best alignment is not the preferred one'
single-numa-node\t'Reject pods that cannot get all devices from one NUMA node'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l restart-every -d 'Simulate a kubelet restart on this schedule (as SIGHUP does)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l dial-timeout -d 'How long to keep dialing a plugin back inside Register (the kubelet\'s: 10s)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l call-timeout -d 'Timeout of Allocate and GetPreferredAllocation calls (the kubelet has none)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l binding-timeout -d 'How long the scheduler\'s part waits for the binding conditions of a claim it allocated before it deallocates it (kube-scheduler\'s DynamicResources bindingTimeout: 10m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l kubelet-version -d 'Behave as this kubelet version (1.25 to 1.37; see --explain-profile)' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l feature-gates -d 'Set feature gates the version has, the kubelet\'s way (e.g. DRAExtendedResource=true on 1.34 and 1.35)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l runtime-config -d 'Serve API group versions the version\'s kube-apiserver leaves off, its --runtime-config way (from 1.34 resource.k8s.io/v1 only: e.g. resource.k8s.io/v1beta1=true)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l kubeconfig -d 'Be a node of the cluster of this kubeconfig (the node\'s own credentials, as a kubelet\'s kubeconfig): register the Node, renew its Lease, run the pods bound to it; turns on the plugin watcher. `{node}` in the path is replaced by the node\'s name (with --nodes, each node\'s own file)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l context -d 'The kubeconfig context to use [default: its current-context]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l node-name -d 'The node\'s name, with --kubeconfig [default: this host\'s name]; with --nodes, the prefix of the nodes\' names' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l node-labels -d 'Labels of the Node beside the kubelet\'s, as the kubelet\'s --node-labels' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l nodes -d 'Run N nodes from this process, NAME-0 … NAME-{N-1}, each with a kubelet root of its own (<kubelet-root>/NAME-i/) and its own simulated devices (--node-devices, --node-dra-driver)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l node-devices -d 'With --nodes: a simulated device plugin on each node, RESOURCE=COUNT devices (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l node-dra-driver -d 'With --nodes: a simulated DRA driver on each node, DRIVER=COUNT devices, publishing the node\'s ResourceSlice (pool: the node\'s name) through the node\'s kubeconfig (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l log-format -d 'Log format' -r -f -a "human\t'`TIME EVENT key=value …`'
json\t'One JSON object per line: `{"time":…,"event":…,…}`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l no-pod-resources -d 'Do not serve the PodResources API'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l api-server-insecure -d 'Serve the local API server over plain HTTP and authenticate nobody, as kube-apiserver\'s old insecure port (the kubeconfig then carries no credentials: client-go sends none over http)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l api-server-tls -d 'HTTPS is the default now; accepted so that older scripts keep working'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l explain-profile -d 'Print what --kubelet-version changes (each behaviour, the version it changed in, the upstream change) and exit'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-kubelet" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand node" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l resource -d 'Extended resource name, e.g. vendor.example/foo' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l endpoint -d 'The plugin\'s socket name, relative to the plugin directory (sent as given)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l kubelet-socket -d 'The kubelet\'s Registration socket [default: <plugin-dir>/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l version -d 'API version to send' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l pre-start -d 'Set options.pre_start_required'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l preferred-allocation -d 'Set options.get_preferred_allocation_available'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "list" -d 'List every pod\'s containers with their devices and DRA claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "get" -d 'Show one pod\'s resources'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s n -l namespace -d 'Only pods in this namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l socket -d 'The kubelet\'s PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s A -l all-namespaces -d 'Pods in every namespace (the default)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l socket -d 'The kubelet\'s PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s n -l namespace -d 'The pod\'s namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l socket -d 'The kubelet\'s PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "list" -d 'List every pod\'s containers with their devices and DRA claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one pod\'s resources'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -f -a "list" -d 'List the kubelet\'s pods (ListPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -f -a "get" -d 'Show one pod (GetPod by UID; a name is looked up with ListPods in -n)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -f -a "watch" -d 'Print every pod, then each change as it happens (WatchPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and not __fish_seen_subcommand_from list get watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -s n -l namespace -d 'Only pods in this namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l socket -d 'The kubelet\'s pods API socket [default: <kubelet-root-dir>/pods-api/pods-api.sock, beside the PodResources socket\'s directory]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -s A -l all-namespaces -d 'Pods in every namespace (the default)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -s n -l namespace -d 'The namespace a pod name is looked up in' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l socket -d 'The kubelet\'s pods API socket [default: <kubelet-root-dir>/pods-api/pods-api.sock, beside the PodResources socket\'s directory]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l count -d 'Stop after N events (INITIAL_SYNC_COMPLETE counts as one)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l socket -d 'The kubelet\'s pods API socket [default: <kubelet-root-dir>/pods-api/pods-api.sock, beside the PodResources socket\'s directory]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the kubelet\'s pods (ListPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one pod (GetPod by UID; a name is looked up with ListPods in -n)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Print every pod, then each change as it happens (WatchPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand pods; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l file -d 'The checkpoint file [default: <plugin-dir>/kubelet_internal_checkpoint]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l pod-resources-socket -d 'The kubelet\'s PodResources socket [default: <plugin-dir>/../pod-resources/kubelet.sock with --plugin-dir, else <kubelet-root-dir>/pod-resources/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l plugins-registry-dir -d 'The plugin-watcher directory, checked when it exists [default: <kubelet-root-dir>/plugins_registry]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l cdi-spec-dir -d 'A directory of CDI specs (repeatable) [default: $DPCTL_CDI_SPEC_DIRS, else /etc/cdi, /var/run/cdi and <kubelet-root>/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l no-streams -d 'Never open ListAndWatch: some plugins let an extra stream swallow updates meant for the kubelet'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l npd -d 'node-problem-detector custom plugin mode: one short line; exit 0 ok, 1 problem, 2 unknown'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l resource -d 'The resource to test [default: the first one the plugin registers]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l focus -d 'Run only scenarios whose ID matches: a case-insensitive substring or glob (* ? [0-9]), ^ $ anchors, a|b alternatives; an alternative written group:NAME or title:TEXT matches the group or the title instead (see --list)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l skip -d 'Leave out scenarios whose ID matches (same syntax as --focus: group: and title: too)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l junit -d 'Also write the results as JUnit XML to FILE (GitHub Actions, GitLab)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l health-trigger -d 'A shell command that makes one device unhealthy (placeholders allowed); enables HEALTH-001' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l kubelet-version -d 'Run the suite against each of these kubelet versions (comma-separated, 1.25 to 1.37) [default: 1.37]' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l health-timeout -d 'How long HEALTH-001 waits for the unhealthy device to leave allocatable (slow health loops)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l restart-backoff -d 'Back-off before a plugin that exited on its own is restarted, as the kubelet restarts a DaemonSet pod' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l socket -d 'Test an already running plugin on SOCKET (only scenarios that need no control of it)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l list -d 'Print the scenarios (ID, group, title; -o json|yaml: with rule and source) that would run, and exit: every one, or those --focus and --skip select; with --dra, the DRA driver suite\'s'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l isolate -d 'Run the plugin in a private mount namespace with the temp tree mounted at /var/lib/kubelet/…'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l dra -d 'Test a DRA driver\'s kubelet plugin instead (placeholders {kubelet-root-dir}, {plugins-registry-dir}, {cdi-dir}, {kubeconfig}, {node-name}, {rolling-uid}; exported as DPCTL_TEST_KUBELET_ROOT_DIR, …)'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l api-server-insecure -d 'Serve {kubeconfig}\'s API server over plain HTTP without authentication (as kube-apiserver\'s old insecure port) instead of HTTPS with its own CA and a token'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l no-restart -d 'Never restart a plugin that exits on its own (judge it on its first run)'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand test" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l resource -d 'The extended resource both serve (the pods ask for it; the DRA side\'s DeviceClass maps it)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l allow -d 'A difference to accept: a kind (env, device, mount, annotation, cdi, admission, count, numa, identity) or KIND:KEY (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l junit -d 'Also write the result as JUnit XML to FILE (one test case per pod container)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand compare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "allocate" -d 'Allocate throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "preferred" -d 'GetPreferredAllocation throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "list-and-watch" -d 'ListAndWatch: open a stream, take the first snapshot, close — throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "dra" -d 'NodePrepareResources then NodeUnprepareResources of a DRA driver: throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "watch" -d 'Health change → ListAndWatch client latency, and first-snapshot time of large plugins'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "kubelet" -d 'A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "cluster" -d 'N mock-kubelet nodes of a cluster × D devices, P pods scheduled onto them: until all Running, until all gone, peak RSS'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred list-and-watch dra watch kubelet cluster help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l requests -d 'Number of calls (ignored with --duration)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l concurrency -d 'Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l devices-per-request -d 'Devices per request (allocate, preferred), at most 100000' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l duration -d 'Run for this long instead of a number of calls' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l requests -d 'Number of calls (ignored with --duration)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l concurrency -d 'Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l devices-per-request -d 'Devices per request (allocate, preferred), at most 100000' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l duration -d 'Run for this long instead of a number of calls' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l requests -d 'Number of calls (ignored with --duration)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l concurrency -d 'Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l devices-per-request -d 'Devices per request (allocate, preferred), at most 100000' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l duration -d 'Run for this long instead of a number of calls' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list-and-watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l requests -d 'NodePrepareResources calls, each followed by NodeUnprepareResources of its claims (ignored with --duration)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l concurrency -d 'Concurrent callers on one HTTP/2 connection, as the kubelet multiplexes' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l claims-per-call -d 'Claims per call, each with a new UID (a driver that gives each claim a device needs C x K free ones)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l duration -d 'Run for this long instead of a number of calls' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l service -d 'The service to call: v1 or v1beta1 [default: the kubelet\'s choice from GetInfo, else v1]' -r -f -a "v1\t''
v1beta1\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from dra" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l socket -d 'A running `dpctl serve` socket to measure (changes go through its live control); default: an in-process one' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l changes -d 'Health changes to time' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l sizes -d 'Plugin sizes whose first snapshot to time (each 1..=100000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l plugins -d 'Simulated plugins (one resource each)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l devices -d 'Devices per plugin' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l pods -d 'Pods to admit (one device each)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l kubelet-version -d 'The mock kubelet behaves as this version (1.25 to 1.37)' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l dra -d 'DRA instead: --plugins `dpctl dra serve` drivers with --devices each, --pods pods with one claim each'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from kubelet" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l kubeconfig -d 'The cluster (credentials that create namespaces, pods, DeviceClasses and delete Nodes)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l node-kubeconfig -d 'The nodes\' kubeconfig; `{node}` is replaced by each node\'s name (its own credentials) [default: --kubeconfig]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l nodes -d 'Nodes, NAME-0 … NAME-{N-1}' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l devices -d 'Simulated devices per node' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l pods -d 'Pods (one device each)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l node-name -d 'The nodes\' name prefix' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l namespace -d 'The namespace the pods are created in (created when missing; it must hold no pods)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l concurrency -d 'Pod creations in flight at once' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l stage-timeout -d 'Give up on a stage after this long' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l kubelet-version -d 'The nodes behave as this kubelet version (1.25 to 1.37)' -x -a "1.25 1.26 1.27 1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -s o -l output -d 'Output format [default: table] (serve, mock-kubelet, demo and record log events instead: see their --log-format)' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m) [default: 5s; register: 15s, longer than the kubelet\'s 10s dial-back]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here, and the PodResources socket defaults to <plugin-dir>/../pod-resources/kubelet.sock when it is given [default: /var/lib/kubelet/device-plugins/]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l root -d 'Look up every host path under DIR (plugin dir, sockets, checkpoint, CDI specs), e.g. /host in `kubectl debug node/…`' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (k3s: /var/lib/rancher/k3s/agent/kubelet) [default: a running kubelet\'s --root-dir from /proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l device-plugin -d 'A device plugin per node and pods asking for its resource, instead of a DRA driver and claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l keep -d 'Leave the pods, claims, Nodes and ResourceSlices behind (default: deleted at the end)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l emit-defaults -d '-o json|yaml: also print fields at their default value (null, false, "", [], {}), like protojson\'s EmitDefaults'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l no-headers -d 'Print tables without their header line'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -s v -l verbose -d 'Client commands: print each call\'s method, socket, request (JSON), status and latency on stderr'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from cluster" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "allocate" -d 'Allocate throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "preferred" -d 'GetPreferredAllocation throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "list-and-watch" -d 'ListAndWatch: open a stream, take the first snapshot, close — throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "dra" -d 'NodePrepareResources then NodeUnprepareResources of a DRA driver: throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "watch" -d 'Health change → ListAndWatch client latency, and first-snapshot time of large plugins'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "kubelet" -d 'A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "cluster" -d 'N mock-kubelet nodes of a cluster × D devices, P pods scheduled onto them: until all Running, until all gone, peak RSS'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "demo" -d 'A first minute with dpctl: a mock kubelet, a simulated plugin (--dra: a DRA driver) and a pod, in a temp dir'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "completion" -d 'Print a shell completion script (bash, zsh or fish); sockets complete from --plugin-dir and plugins_registry/'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "options" -d 'Call GetDevicePluginOptions on a device plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "watch" -d 'Stream a device plugin\'s ListAndWatch: the device table, then a diff per update'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "allocate" -d 'Call Allocate on a device plugin for one or more containers'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "preferred" -d 'Call GetPreferredAllocation and check the answer against the request'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "prestart" -d 'Call PreStartContainer on a device plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "probe" -d 'One-shot health check of a device plugin: PASS/WARN/FAIL per check (DRA drivers: dra probe)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "dra" -d 'DRA kubelet plugins: info, probe, prepare, unprepare, health, list; a simulated driver (serve)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "serve" -d 'Serve simulated devices as a device plugin, registered with a real or mock kubelet (DRA: dra serve)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "device" -d 'Change the devices of a running `dpctl serve` (live control)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "record" -d 'Record everything the kubelet asks a device plugin and it answers, through a tap socket'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "replay" -d 'Replay a trace as the plugin (against a kubelet), as the kubelet (--against a plugin), or both on this machine (--kubelet)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "mock-kubelet" -d 'Stand in for the kubelet: device plugins and DRA drivers registered, pods admitted, PodResources, a local API server'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "node" -d 'Show the running mock kubelet\'s node: device capacity and allocatable, DRA drivers and claims, pods'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "register" -d 'Send one RegisterRequest to a kubelet (real or mock) and report its answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "podresources" -d 'Query the kubelet\'s PodResources v1 API: devices and DRA claims per container'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "pods" -d 'Query the kubelet\'s pods API (1.36+): its pods with their status, listed, one by UID or name, or watched'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "checkpoint" -d 'Show the kubelet\'s device-manager checkpoint, with each allocation\'s decoded Allocate answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "doctor" -d 'Inspect the node read-only: what is wrong with its device plugins and DRA drivers, and how to fix it'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "test" -d 'Conformance suites: run a device plugin (or, with --dra, a DRA driver) against a mock kubelet'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "compare" -d 'Run a device plugin and its DRA replacement side by side and compare what containers get'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "bench" -d 'Benchmarks: drive a plugin, time health changes, time a mock kubelet at scale'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from demo completion options watch allocate preferred prestart probe dra serve device record replay mock-kubelet node register podresources pods checkpoint doctor test compare bench help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "info" -d 'Call GetInfo on a DRA plugin\'s registration socket'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "probe" -d 'One-shot check of a DRA plugin against the kubelet\'s rules: PASS/WARN/FAIL per rule'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "prepare" -d 'Call NodePrepareResources for one or more claims and check the answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "unprepare" -d 'Call NodeUnprepareResources for one or more claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "health" -d 'Watch a DRA plugin\'s device health (NodeWatchResources): a table, then a line per change'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "list" -d 'List the DRA plugins registered under the kubelet\'s root: driver, endpoint, versions, live or stale'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "serve" -d 'Serve a simulated DRA driver\'s kubelet plugin, registered through the plugin watcher'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from dra" -f -a "device" -d 'Show or change the devices of a running `dpctl dra serve` (live control)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "list" -d 'List the devices of running dpctl serve processes'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "set-health" -d 'Set devices Healthy or Unhealthy: IDs, then the health'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "add" -d 'Add devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from device" -f -a "remove" -d 'Remove devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "list" -d 'List every pod\'s containers with their devices and DRA claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "get" -d 'Show one pod\'s resources'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from pods" -f -a "list" -d 'List the kubelet\'s pods (ListPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from pods" -f -a "get" -d 'Show one pod (GetPod by UID; a name is looked up with ListPods in -n)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from pods" -f -a "watch" -d 'Print every pod, then each change as it happens (WatchPods)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "allocate" -d 'Allocate throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "preferred" -d 'GetPreferredAllocation throughput and latency of any plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "list-and-watch" -d 'ListAndWatch: open a stream, take the first snapshot, close — throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "dra" -d 'NodePrepareResources then NodeUnprepareResources of a DRA driver: throughput and latency'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "watch" -d 'Health change → ListAndWatch client latency, and first-snapshot time of large plugins'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "kubelet" -d 'A mock kubelet with P simulated plugins: registration, admission, restart, peak RSS'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "cluster" -d 'N mock-kubelet nodes of a cluster × D devices, P pods scheduled onto them: until all Running, until all gone, peak RSS'

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
complete -c dpctl -n "__fish_seen_subcommand_from options watch allocate preferred prestart probe" -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from record" -l plugin -r -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from replay" -l against -r -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from test" -l socket -r -a "(__dpctl_plugin_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from bench; and __fish_seen_subcommand_from dra" -a "(__dpctl_registry_sockets)"
complete -c dpctl -n "__fish_seen_subcommand_from dra; and __fish_seen_subcommand_from info probe prepare unprepare health" -a "(__dpctl_registry_sockets)"
