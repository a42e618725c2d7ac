//! The device-plugin registration rules: what the kubelet's Registration
//! service (`deviceplugin/v1beta1` Register) and its plugin watcher (GetInfo
//! of a DevicePlugin registration socket) require, once: the API version,
//! the extended resource name, the endpoint and the options. The mock
//! kubelet refuses a registration breaking one with the rule's text; `dpctl
//! test`, `register`, `serve` and `record` check the same.

use super::rule::{Kubelet, Rule, Severity, Violation};
use crate::api::deviceplugin::DevicePluginOptions;
use crate::api::VERSION;
use crate::core::text::quote;
use crate::core::validate::{dns_subdomain, DnsProblem, DNS_SUBDOMAIN_MAX};
use std::path::Path;

const SERVER: &str = "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register)";

/// The longest file name Linux allows (a RegisterRequest endpoint is one).
pub const NAME_MAX: usize = 255;
/// The plugin type a device plugin registers with through the plugin watcher
/// (GetInfo; a DRA driver's is [`super::dra::PLUGIN_TYPE`]).
pub const PLUGIN_TYPE: &str = "DevicePlugin";

/// The kubelet's text when no handler takes a plugin watcher registration's
/// type (sent with NotifyRegistrationStatus registered=false;
/// pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go).
pub fn no_handler(plugin_type: &str, socket: &Path) -> String {
    format!(
        "RegisterPlugin error -- no handler registered for plugin type: {plugin_type} at socket {}",
        socket.display()
    )
}

/// RegisterRequest.version is v1beta1.
pub static REGISTER_VERSION: Rule = Rule {
    id: "register-version",
    checks: "RegisterRequest.version is \"v1beta1\" (GetInfo supported_versions lists it)",
    kubelet: Kubelet::Rejects,
    severity: Severity::Fail,
    kubelet_text: Some("requested API version %q is not supported by kubelet. Supported version is %q"),
    fix: "send pluginapi.Version (\"v1beta1\")",
    source: SERVER,
};
/// The resource name is a valid extended resource name.
pub static REGISTER_RESOURCE_NAME: Rule = Rule {
    id: "register-resource-name",
    checks: "the resource name is an extended resource name (vendor.example/name: a DNS subdomain prefix, \
             not kubernetes.io/, not requests., a name of at most 63 characters)",
    kubelet: Kubelet::Rejects,
    severity: Severity::Fail,
    kubelet_text: Some("the ResourceName %q is invalid"),
    fix: "register a name like vendor.example/gpu",
    source:
        "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go (Register: v1helper.IsExtendedResourceName)",
};
/// The endpoint is a socket file name in the plugin directory.
pub static REGISTER_ENDPOINT: Rule = Rule {
    id: "register-endpoint",
    checks: "RegisterRequest.endpoint is a socket file name inside the plugin directory (no '/', not . or .., \
             at most 255 bytes); upstream joins it to the directory unchecked",
    kubelet: Kubelet::MockRejects,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "send the socket's file name, e.g. \"vendor-gpu.sock\"",
    source: SERVER,
};
/// The options sent in RegisterRequest match GetDevicePluginOptions.
pub static REGISTER_OPTIONS: Rule = Rule {
    id: "register-options",
    checks: "RegisterRequest.options match GetDevicePluginOptions (the kubelet ignores the request's and reads \
             GetDevicePluginOptions)",
    kubelet: Kubelet::Tolerates,
    severity: Severity::Fail,
    kubelet_text: None,
    fix: "send the same options in RegisterRequest as GetDevicePluginOptions returns",
    source: "kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go (Connect: GetDevicePluginOptions)",
};

/// Check RegisterRequest.version; the violation's text is the kubelet's.
pub fn register_version(v: &str) -> Option<Violation> {
    (v != VERSION).then(|| {
        // Go's %q of the [1]string SupportedVersions array prints ["v1beta1"].
        REGISTER_VERSION.violated(format!(
            "requested API version {} is not supported by kubelet. Supported version is [{:?}]",
            quote(v),
            VERSION
        ))
    })
}

/// Check a plugin watcher's GetInfo supported_versions; the text is the kubelet's.
pub fn watcher_versions(versions: &[String]) -> Option<Violation> {
    (!versions.iter().any(|v| v == VERSION)).then(|| {
        REGISTER_VERSION
            .violated(format!("manager version, {VERSION}, is not among plugin supported versions {versions:?}"))
    })
}

/// Check a resource name; the violation's text is the kubelet's, [`resource_name_problem`] says why.
pub fn register_resource_name(name: &str) -> Option<Violation> {
    resource_name_problem(name)
        .map(|_| REGISTER_RESOURCE_NAME.violated(format!("the ResourceName {} is invalid", quote(name))))
}

/// Why a resource name is not a valid extended resource name, or `None` if it
/// is one. Mirrors the kubelet's `v1helper.IsExtendedResourceName`: not a
/// native resource (must contain `/`, must not contain `kubernetes.io/`), not
/// starting with `requests.`, and `requests.<name>` a qualified name.
pub fn resource_name_problem(name: &str) -> Option<String> {
    if !name.contains('/') {
        return Some("it has no domain prefix; extended resources look like vendor.example/foo".into());
    }
    if name.contains("kubernetes.io/") {
        return Some("the kubernetes.io/ prefix is reserved for native resources".into());
    }
    if name.starts_with("requests.") {
        return Some("it must not start with \"requests.\"".into());
    }
    let quota = format!("requests.{name}");
    let (prefix, short) = match quota.split_once('/') {
        Some((p, n)) if !n.contains('/') => (p, n),
        _ => return Some("it must contain exactly one '/'".into()),
    };
    if let Err(p) = dns_subdomain(prefix, DNS_SUBDOMAIN_MAX) {
        let shown = quote(prefix.strip_prefix("requests.").unwrap_or(prefix));
        return Some(match p {
            DnsProblem::TooLong(..) => format!("prefix {shown} {p}"),
            DnsProblem::NotDnsSubdomain => format!("prefix {shown} is not a lowercase DNS subdomain: {p}"),
        });
    }
    if short.is_empty() {
        return Some("the name after '/' is empty".into());
    }
    if short.len() > 63 {
        return Some(format!("the name after '/' is {} characters, at most 63 are allowed", short.len()));
    }
    if !qualified_name_part_ok(short) {
        return Some(format!(
            "the name after '/' ({}) must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric",
            quote(short)
        ));
    }
    None
}

/// Check a resource name given on the command line, as a usage error.
pub fn check_resource_name(name: &str) -> crate::core::Result<()> {
    match (register_resource_name(name), resource_name_problem(name)) {
        (Some(v), Some(p)) => {
            Err(crate::core::Error::usage(format!("invalid resource name {}: {p}", quote(name))).caused_by(v))
        }
        _ => Ok(()),
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn qualified_name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// Check RegisterRequest.endpoint: a socket file name inside `plugin_dir`.
pub fn register_endpoint(endpoint: &str, plugin_dir: &Path) -> Option<Violation> {
    let bad = endpoint.is_empty()
        || endpoint.contains('/')
        || endpoint == "."
        || endpoint == ".."
        || endpoint.contains('\0')
        || endpoint.len() > NAME_MAX;
    bad.then(|| {
        REGISTER_ENDPOINT.violated(format!(
            "endpoint {} is not a socket file name inside the plugin directory {}; send the socket's file name \
             (e.g. \"vendor.sock\", at most {NAME_MAX} bytes)",
            quote(endpoint),
            plugin_dir.display()
        ))
    })
}

/// Options as text.
pub fn options_text(o: &DevicePluginOptions) -> String {
    format!(
        "{{preStartRequired: {}, getPreferredAllocationAvailable: {}}}",
        o.pre_start_required, o.get_preferred_allocation_available
    )
}

/// Check the options sent in RegisterRequest against GetDevicePluginOptions.
pub fn register_options(sent: &DevicePluginOptions, got: &DevicePluginOptions) -> Option<Violation> {
    (sent != got).then(|| {
        REGISTER_OPTIONS.violated(format!(
            "RegisterRequest sent {}, GetDevicePluginOptions says {}",
            options_text(sent),
            options_text(got)
        ))
    })
}
