# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dpctl_global_optspecs
    string join \n o/output= timeout= no-color plugin-dir= h/help V/version
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

complete -c dpctl -n "__fish_dpctl_needs_command" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_needs_command" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_needs_command" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_needs_command" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_needs_command" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "options" -d 'Call GetDevicePluginOptions on a plugin'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "watch" -d 'Stream a plugin\'s ListAndWatch: the device table, then a diff per update'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "allocate" -d 'Call Allocate on a plugin for one or more containers'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "preferred" -d 'Call GetPreferredAllocation and check the answer against the request'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "prestart" -d 'Call PreStartContainer on a plugin'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "register" -d 'Send one RegisterRequest to a kubelet (real or mock) and report its answer'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "podresources" -d 'Query the kubelet\'s PodResources v1 API'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "probe" -d 'One-shot health check of a plugin: PASS/WARN/FAIL per check, with latencies'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l count -d 'Stop after N ListAndWatch messages (the initial snapshot counts as the first)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l duration -d 'Stop after this long (e.g. 30s, 5m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l container -d 'Device IDs for one more container, comma-separated (repeat for several containers)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand allocate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l available -d 'Candidate device IDs, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l must-include -d 'Device IDs the answer must include, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l size -d 'How many devices to ask for' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand preferred" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand prestart" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l resource -d 'Extended resource name, e.g. vendor.example/foo' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l endpoint -d 'The plugin\'s socket name, relative to the plugin directory (sent as given)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l kubelet-socket -d 'The kubelet\'s Registration socket [default: <plugin-dir>/kubelet.sock]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l version -d 'API version to send' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l pre-start -d 'Set options.pre_start_required'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l preferred-allocation -d 'Set options.get_preferred_allocation_available'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand register" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "list" -d 'List every pod\'s containers and the devices allocated to them'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "get" -d 'Show one pod\'s resources'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list allocatable get help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l socket -d 'The kubelet\'s PodResources socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l socket -d 'The kubelet\'s PodResources socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s n -l namespace -d 'The pod\'s namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l socket -d 'The kubelet\'s PodResources socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "list" -d 'List every pod\'s containers and the devices allocated to them'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one pod\'s resources'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -s o -l output -d 'Output format' -r -f -a "table\t'Human-readable tables'
json\t'JSON (protojson field names)'
yaml\t'YAML'"
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l timeout -d 'Timeout for connecting and for each call (e.g. 500ms, 5s, 1m)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l plugin-dir -d 'The kubelet\'s device-plugin directory; bare socket names are looked up here' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l allocate -d 'Also allocate one healthy device and check the response (and PreStartContainer if required)'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -l no-color -d 'Never colour the output (also: NO_COLOR set, or stdout not a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "options" -d 'Call GetDevicePluginOptions on a plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "watch" -d 'Stream a plugin\'s ListAndWatch: the device table, then a diff per update'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "allocate" -d 'Call Allocate on a plugin for one or more containers'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "preferred" -d 'Call GetPreferredAllocation and check the answer against the request'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "prestart" -d 'Call PreStartContainer on a plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "register" -d 'Send one RegisterRequest to a kubelet (real or mock) and report its answer'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "podresources" -d 'Query the kubelet\'s PodResources v1 API'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "probe" -d 'One-shot health check of a plugin: PASS/WARN/FAIL per check, with latencies'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and not __fish_seen_subcommand_from options watch allocate preferred prestart register podresources probe help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "list" -d 'List every pod\'s containers and the devices allocated to them'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "allocatable" -d 'Show the node\'s allocatable devices (healthy devices of registered resources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help; and __fish_seen_subcommand_from podresources" -f -a "get" -d 'Show one pod\'s resources'
