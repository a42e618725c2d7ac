//! Where an API server is and how to talk to it, read as client-go reads it
//! (`tools/clientcmd` for kubeconfigs, `rest.InClusterConfig` for a pod):
//! [`parse_file`] reads one file (relative paths made absolute against its
//! directory, as `clientcmd.ResolveLocalPaths`), [`merge`] merges several as
//! `KUBECONFIG`'s are merged, [`rest_config`] picks the context's cluster and
//! user — all pure; [`in_cluster`] reads the service-account mount. Files
//! named by them are read when the connection is built ([`super::connect`]).
//!
//! Supported: `server` (http or https; without a scheme, https when any TLS
//! setting is given, as `rest.DefaultServerURL`), `certificate-authority`
//! and `certificate-authority-data`, `insecure-skip-tls-verify`,
//! `tls-server-name`; users' `token`, `tokenFile` (wins over `token`, read
//! again at every request as client-go's cached file token source does when
//! it expires), `username`/`password`, `client-certificate(-data)` and
//! `client-key(-data)`, and `exec` credential plugins ([`super::exec`],
//! validated as clientcmd validates them), an `http://` `proxy-url` (HTTP
//! CONNECT). Refused with the field named: `auth-provider` (in client-go's
//! words for the removed gcp and azure providers), `socks5://` and
//! `https://` proxies, impersonation (`as`). client-go's validation
//! conflicts are refused with its reasons.

use super::exec;
use base64::Engine as _;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where the service-account mount is unless `DPCTL_SERVICEACCOUNT_DIR` says otherwise.
pub const SERVICEACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// PEM material: a file (resolved path) or the bytes of a `-data` field.
#[derive(Debug, Clone, PartialEq)]
pub enum Pem {
    /// Read from this file.
    File(PathBuf),
    /// Given inline (base64-decoded).
    Data(Vec<u8>),
}

/// How to reach and authenticate to one API server, before any file is read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RestConfig {
    /// `https` or `http`.
    pub https: bool,
    /// `host:port` (the scheme's port when the URL has none).
    pub authority: String,
    /// The host alone (no port, no IPv6 brackets): the TLS server name by default.
    pub host: String,
    /// A path prefix of the server URL (usually empty).
    pub prefix: String,
    /// The cluster's CA; none: the system's roots.
    pub ca: Option<Pem>,
    /// `insecure-skip-tls-verify`.
    pub insecure: bool,
    /// `tls-server-name`: the name the server's certificate must carry.
    pub tls_server_name: Option<String>,
    /// The client certificate and its key.
    pub client_cert: Option<(Pem, Pem)>,
    /// A bearer token given inline.
    pub token: Option<String>,
    /// A file holding the bearer token (wins over `token`).
    pub token_file: Option<PathBuf>,
    /// HTTP basic authentication.
    pub basic: Option<(String, String)>,
    /// The `server` field as written (what `provideClusterInfo` hands a plugin).
    pub server: String,
    /// An `exec` credential plugin.
    pub exec: Option<exec::ExecConfig>,
    /// The cluster's `client.authentication.k8s.io/exec` extension (the plugin's `spec.cluster.config`).
    pub exec_extension: Option<Value>,
    /// The cluster carries [`crate::protocol::DPCTL_PLANE_EXTENSION`]: its API server is a dpctl
    /// mock kubelet's, whose control plane binds no pod (they come bound).
    pub dpctl_plane: bool,
    /// `proxy-url`: an http proxy every connection is tunnelled through (HTTP CONNECT).
    pub proxy: Option<Proxy>,
}

/// An http proxy (`proxy-url: http://[user:password@]host[:port]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Proxy {
    /// The URL as written (for messages and `provideClusterInfo`).
    pub url: String,
    /// `host:port` (port 80 when the URL has none, as Go's http.Transport).
    pub authority: String,
    /// `Proxy-Authorization: Basic …` from the URL's user and password.
    pub authorization: Option<String>,
}

/// Why a kubeconfig is refused: one line naming the field (`at`: its
/// path, `clusters[NAME].cluster`, `users[NAME].user`) and the fix; where
/// client-go refuses it too, in client-go's words.
#[derive(Debug)]
pub enum KubeconfigError {
    /// Not YAML.
    Yaml(serde_norway::Error),
    /// YAML, but not a mapping.
    NotMapping,
    /// A name used twice in `clusters`, `users` or `contexts`.
    DuplicateName {
        /// The name.
        name: String,
        /// The list.
        list: &'static str,
    },
    /// Neither clusters nor contexts.
    NoConfiguration,
    /// No current-context, and not exactly one cluster to take.
    NoCurrentContext,
    /// The context named is not in `contexts`.
    ContextNotFound(String),
    /// The context (this one) names no cluster.
    ContextWithoutCluster(String),
    /// The context's cluster is not in `clusters`.
    ClusterNotFound(String),
    /// The context's user is not in `users`.
    UserNotFound(String),
    /// `proxy-url` with a scheme client-go does not take either.
    ProxyScheme {
        /// Where.
        at: String,
        /// The URL.
        url: String,
        /// The cluster's name.
        cluster: String,
        /// The scheme ("" for none).
        scheme: String,
    },
    /// An `https://` or `socks5://` proxy, which client-go takes and dpctl does not.
    ProxyNotHttp {
        /// Where.
        at: String,
        /// The URL.
        url: String,
        /// The scheme.
        scheme: String,
    },
    /// A `proxy-url` without a host.
    ProxyNoHost {
        /// Where.
        at: String,
        /// The URL.
        url: String,
    },
    /// A `-data` field that is not base64.
    NotBase64 {
        /// Where.
        at: String,
        /// The field.
        key: String,
        /// The decoder's error.
        source: base64::DecodeError,
    },
    /// A file field and its `-data` field both given.
    BothPem {
        /// Where.
        at: String,
        /// The file field.
        key: String,
        /// The `-data` field.
        data_key: String,
    },
    /// `insecure-skip-tls-verify` with a certificate authority.
    InsecureWithCa(String),
    /// A user with both `exec` and `auth-provider`.
    ExecAndAuthProvider {
        /// Where.
        at: String,
        /// The user's name.
        user: String,
    },
    /// An `auth-provider` (this name), which client-go removed.
    AuthProvider {
        /// Where.
        at: String,
        /// The provider's name.
        name: String,
    },
    /// Impersonation (this field).
    Impersonation {
        /// Where.
        at: String,
        /// `as`, `as-groups`, `as-uid` or `as-user-extra`.
        key: &'static str,
    },
    /// An `exec` section clientcmd's validation refuses: its reasons.
    ExecInvalid {
        /// Where.
        at: String,
        /// validateAuthInfo's errors.
        errors: Vec<String>,
    },
    /// An `exec` apiVersion the exec authenticator does not take.
    ExecApiVersion {
        /// Where.
        at: String,
        /// The apiVersion.
        api_version: String,
    },
    /// A client certificate without its key.
    CertWithoutKey(String),
    /// A client key without its certificate.
    KeyWithoutCert(String),
    /// A token and a username/password.
    TwoAuthMethods(String),
    /// No `server`.
    NoServer(String),
    /// A `server` (`what` is wrong with it).
    Server {
        /// Where.
        at: String,
        /// The URL.
        url: String,
        /// What is wrong.
        what: ServerProblem,
    },
}

/// What is wrong with a cluster's `server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerProblem {
    /// A scheme (this one) other than http and https.
    Scheme(String),
    /// No host.
    NoHost,
    /// `[` without `]`.
    Unclosed,
    /// A port (this one) that is not a number.
    Port(String),
    /// Plain http with TLS settings.
    PlainWithTls,
}

/// client-go's aggregate of validation errors: `invalid configuration: X`, or `[X, Y]` for several.
fn invalid(errs: &[String]) -> String {
    match errs {
        [one] => format!("invalid configuration: {one}"),
        many => format!("invalid configuration: [{}]", many.join(", ")),
    }
}

impl std::fmt::Display for KubeconfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeconfigError::Yaml(e) => write!(f, "not a kubeconfig (YAML): {}", super::exec::one_line(&e.to_string())),
            KubeconfigError::NotMapping => f.write_str("not a kubeconfig: the file is not a YAML mapping"),
            KubeconfigError::DuplicateName { name, list } => {
                write!(f, "duplicate name {name:?} in {list} (clientcmd refuses it); keep one")
            }
            KubeconfigError::NoConfiguration => f.write_str("invalid configuration: no configuration has been provided; write a kubeconfig with a cluster, a user and a context"),
            KubeconfigError::NoCurrentContext => f.write_str(
                "no current-context and not exactly one cluster; set current-context (kubectl config use-context NAME)",
            ),
            KubeconfigError::ContextNotFound(c) => write!(f, "invalid configuration: context was not found for specified context: {c}; name one of the contexts (kubectl config get-contexts)"),
            KubeconfigError::ContextWithoutCluster(c) => write!(f, "contexts[{c}].context.cluster is empty; name a cluster"),
            KubeconfigError::ClusterNotFound(c) => write!(f, "cluster {c:?} is not in clusters; add it or fix the context"),
            KubeconfigError::UserNotFound(u) => write!(f, "user {u:?} is not in users; add it or fix the context"),
            KubeconfigError::ProxyScheme { at, url, cluster, scheme } => write!(
                f,
                "{at}.proxy-url: invalid configuration: invalid 'proxy-url' {url:?} for cluster {cluster:?}: unsupported scheme {scheme:?}, must be http, https, or socks5"
            ),
            KubeconfigError::ProxyNotHttp { at, url, scheme } => write!(
                f,
                "{at}.proxy-url {url:?}: dpctl tunnels through http:// proxies only (client-go also takes {scheme}); use an http proxy, or remove proxy-url"
            ),
            KubeconfigError::ProxyNoHost { at, url } => {
                write!(f, "{at}.proxy-url {url:?} names no host; write http://HOST:PORT")
            }
            KubeconfigError::NotBase64 { at, key, source } => write!(
                f,
                "{at}.{key} is not base64 ({source}); put the PEM through `base64 -w0`, or name a file with {}",
                key.trim_end_matches("-data")
            ),
            KubeconfigError::BothPem { at, key, data_key } => {
                write!(f, "{at}: {data_key} and {key} are both specified (client-go refuses both); keep one")
            }
            KubeconfigError::InsecureWithCa(at) => write!(
                f,
                "{at}: insecure-skip-tls-verify with a certificate-authority is not allowed (as client-go); drop one"
            ),
            KubeconfigError::ExecAndAuthProvider { at, user } => write!(
                f,
                "{at}: {}; keep exec",
                invalid(&[format!("authProvider cannot be provided in combination with an exec plugin for {user}")])
            ),
            KubeconfigError::AuthProvider { at, name } => {
                let said = match name.as_str() {
                    "gcp" => "The gcp auth plugin has been removed. Please use the \"gke-gcloud-auth-plugin\" kubectl/client-go credential plugin instead. See https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke for further details".to_string(),
                    "azure" => "The azure auth plugin has been removed. Please use the https://github.com/Azure/kubelogin kubectl/client-go credential plugin instead. See https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins for further details".to_string(),
                    other => format!(
                        "auth-provider {other:?} is not supported by dpctl (client-go removed its in-tree gcp and azure providers in 1.26 in favour of exec credential plugins); use an exec plugin (for OIDC, kubelogin's get-token) or a token"
                    ),
                };
                write!(f, "{at}.auth-provider: {said}")
            }
            KubeconfigError::Impersonation { at, key } => {
                write!(f, "{at}.{key}: impersonation is not supported by dpctl; give the identity's own credentials")
            }
            KubeconfigError::ExecInvalid { at, errors } => write!(
                f,
                "{at}.exec: {}; an exec section needs command, apiVersion ({}) and, for v1, interactiveMode (Never)",
                invalid(errors),
                exec::V1
            ),
            KubeconfigError::ExecApiVersion { at, api_version } => write!(
                f,
                "{at}.exec: exec plugin: invalid apiVersion {api_version:?}; use {} or {}",
                exec::V1,
                exec::V1BETA1
            ),
            KubeconfigError::CertWithoutKey(at) => {
                write!(f, "{at}: client-certificate without client-key or client-key-data; add the key")
            }
            KubeconfigError::KeyWithoutCert(at) => write!(
                f,
                "{at}: client-key without client-certificate or client-certificate-data; add the certificate"
            ),
            KubeconfigError::TwoAuthMethods(at) => {
                write!(f, "{at}: more than one authentication method (token and username/password); keep one")
            }
            KubeconfigError::NoServer(at) => write!(f, "{at}.server is empty; write https://HOST:PORT"),
            KubeconfigError::Server { at, url, what } => match what {
                ServerProblem::Scheme(other) => {
                    write!(f, "{at}.server {url:?}: scheme {other:?} is not http or https; write https://HOST:PORT")
                }
                ServerProblem::NoHost => write!(f, "{at}.server {url:?} names no host; write https://HOST:PORT"),
                ServerProblem::Unclosed => write!(f, "{at}.server {url:?}: unclosed [ in the host"),
                ServerProblem::Port(p) => write!(f, "{at}.server {url:?}: port {p:?} is not a number"),
                ServerProblem::PlainWithTls => {
                    write!(f, "{at}.server {url:?} is plain http but TLS settings are given; write https://")
                }
            },
        }
    }
}

impl std::error::Error for KubeconfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KubeconfigError::Yaml(e) => Some(e),
            KubeconfigError::NotBase64 { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `proxy-url` as clientcmd validates it (`parseProxyURL`) and as dpctl can
/// use it: an `http://` proxy; `https://` and `socks5://` (which client-go
/// also takes) are refused with what to do.
fn proxy(url: &str, cluster: &str, at: &str) -> Result<Proxy, KubeconfigError> {
    let unsupported = |scheme: &str| KubeconfigError::ProxyScheme {
        at: at.to_string(),
        url: url.to_string(),
        cluster: cluster.to_string(),
        scheme: scheme.to_string(),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(unsupported(""));
    };
    match scheme {
        "http" => {}
        "https" | "socks5" => {
            return Err(KubeconfigError::ProxyNotHttp {
                at: at.to_string(),
                url: url.to_string(),
                scheme: scheme.to_string(),
            })
        }
        other => return Err(unsupported(other)),
    }
    let hostport = rest.split(['/', '?', '#']).next().unwrap_or("");
    let (userinfo, hostport) = match hostport.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, hostport),
    };
    if hostport.is_empty() {
        return Err(KubeconfigError::ProxyNoHost { at: at.to_string(), url: url.to_string() });
    }
    // A port after the host (or after an [IPv6] literal's closing bracket).
    let after_host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(_, after)| after).unwrap_or(""),
        None => hostport,
    };
    let authority = if after_host.contains(':') { hostport.to_string() } else { format!("{hostport}:80") };
    let authorization =
        userinfo.map(|u| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(percent_decode(u))));
    Ok(Proxy { url: url.to_string(), authority, authorization })
}

/// `%XX` escapes of a URL's user information decoded.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A path as `clientcmd` resolves it: relative to the kubeconfig's
/// directory, cleaned as Go's `filepath.Join` cleans (`.` dropped, `..`
/// taking the name before it).
fn resolve(dir: &Path, p: &str) -> PathBuf {
    use std::path::Component;
    let joined = dir.join(p);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A `-data` field: base64 in the kubeconfig ([]byte in client-go's types).
fn data(v: &Value, key: &str, at: &str) -> Result<Option<Vec<u8>>, KubeconfigError> {
    let Some(s) = str_at(v, key) else { return Ok(None) };
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(clean).map(Some).map_err(|source| KubeconfigError::NotBase64 {
        at: at.to_string(),
        key: key.to_string(),
        source,
    })
}

/// File or data of one PEM field pair; both is client-go's validation error.
fn pem(v: &Value, key: &str, data_key: &str, at: &str, dir: &Path) -> Result<Option<Pem>, KubeconfigError> {
    match (str_at(v, key), data(v, data_key, at)?) {
        (Some(_), Some(_)) => {
            Err(KubeconfigError::BothPem { at: at.to_string(), key: key.to_string(), data_key: data_key.to_string() })
        }
        (Some(f), None) => Ok(Some(Pem::File(resolve(dir, f)))),
        (None, Some(d)) => Ok(Some(Pem::Data(d))),
        (None, None) => Ok(None),
    }
}

/// The named entry of `clusters`, `users` or `contexts`.
fn entry<'a>(v: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    v.get(list)?.as_array()?.iter().find(|x| x.get("name").and_then(Value::as_str) == Some(name))
}

/// The server URL as `rest.DefaultServerURL` reads it.
fn server(url: &str, default_tls: bool, at: &str) -> Result<(bool, String, String, String), KubeconfigError> {
    let bad = |what| KubeconfigError::Server { at: at.to_string(), url: url.to_string(), what };
    let (https, rest) = match url.split_once("://") {
        Some(("https", rest)) => (true, rest),
        Some(("http", rest)) => (false, rest),
        Some((other, _)) => return Err(bad(ServerProblem::Scheme(other.to_string()))),
        None => (default_tls, url),
    };
    let (authority, prefix) = match rest.split_once('/') {
        Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
        None => (rest, String::new()),
    };
    let prefix = if prefix == "/" { String::new() } else { prefix };
    if authority.is_empty() || authority.contains('@') {
        return Err(bad(ServerProblem::NoHost));
    }
    // host, or [v6], with an optional :port.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| bad(ServerProblem::Unclosed))?;
        (h.to_string(), after.strip_prefix(':').map(str::to_string))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (authority.to_string(), None),
        }
    };
    if let Some(p) = &port {
        if p.parse::<u16>().is_err() {
            return Err(bad(ServerProblem::Port(p.clone())));
        }
    }
    let authority = match port {
        Some(_) => authority.to_string(),
        None => format!("{authority}:{}", if https { 443 } else { 80 }),
    };
    Ok((https, authority, host, prefix))
}

/// Parse one kubeconfig file's text (pure): YAML, duplicate names refused
/// as clientcmd's conversion refuses them, and its relative paths made
/// absolute against `dir`, its directory, as `clientcmd.ResolveLocalPaths`
/// does before files are merged (`certificate-authority`,
/// `client-certificate`, `client-key`, `tokenFile`, and an exec `command`
/// with a `/` in it; a bare command is looked up in PATH).
pub fn parse_file(text: &str, dir: &Path) -> Result<Value, KubeconfigError> {
    let mut v: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_norway::from_str(text).map_err(KubeconfigError::Yaml)?
    };
    if v.is_null() {
        v = Value::Object(Default::default());
    }
    if !v.is_object() {
        return Err(KubeconfigError::NotMapping);
    }
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    for (list, item) in [("clusters", "cluster"), ("users", "user"), ("contexts", "context")] {
        let Some(entries) = v.get_mut(list).and_then(Value::as_array_mut) else { continue };
        let mut seen = std::collections::HashSet::new();
        for e in entries.iter_mut() {
            let name = e.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if !seen.insert(name.clone()) {
                return Err(KubeconfigError::DuplicateName { name, list });
            }
            let Some(body) = e.get_mut(item).filter(|b| b.is_object()) else { continue };
            let keys: &[&str] = match item {
                "cluster" => &["certificate-authority"],
                "user" => &["client-certificate", "client-key", "tokenFile"],
                _ => &[],
            };
            for k in keys {
                if let Some(p) = str_at(body, k).map(|p| resolve(&dir, p)) {
                    body[*k] = Value::String(p.display().to_string());
                }
            }
            if let Some(cmd) = body.get_mut("exec").and_then(|x| x.get_mut("command")) {
                if let Some(c) = cmd.as_str().filter(|c| c.contains('/')) {
                    *cmd = Value::String(resolve(&dir, c).display().to_string());
                }
            }
        }
    }
    Ok(v)
}

/// Several kubeconfigs merged as `clientcmd.ClientConfigLoadingRules.Load`
/// merges `KUBECONFIG`'s files (pure): the first file to name a cluster, user
/// or context wins it whole (a later file's entry of that name is dropped,
/// even its other fields); `current-context` is the first file's that sets one.
pub fn merge(files: Vec<Value>) -> Value {
    let mut out = serde_json::Map::new();
    for list in ["clusters", "users", "contexts"] {
        let mut seen = std::collections::HashSet::new();
        let mut merged = Vec::new();
        for f in &files {
            for e in f.get(list).and_then(Value::as_array).into_iter().flatten() {
                let name = e.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                if seen.insert(name) {
                    merged.push(e.clone());
                }
            }
        }
        out.insert(list.into(), Value::Array(merged));
    }
    if let Some(c) = files.iter().find_map(|f| str_at(f, "current-context")) {
        out.insert("current-context".into(), Value::String(c.to_string()));
    }
    Value::Object(out)
}

/// The API server of a kubeconfig's current context (or of `context`);
/// relative paths resolve against `dir`, the kubeconfig's directory. `Err`
/// is one line naming the field and the fix.
pub fn parse_kubeconfig(text: &str, dir: &Path, context: Option<&str>) -> Result<RestConfig, KubeconfigError> {
    rest_config(&parse_file(text, dir)?, context)
}

/// A user's `exec` section as clientcmd validates it (`validateAuthInfo`) and
/// the exec authenticator accepts it (the apiVersion).
fn exec_config(e: &Value, user: &str, uat: &str) -> Result<exec::ExecConfig, KubeconfigError> {
    let api_version = str_at(e, "apiVersion").unwrap_or("").to_string();
    let mode = match str_at(e, "interactiveMode") {
        Some(m) => m.to_string(),
        // clientcmd's v1 defaulting: IfAvailable for v1beta1 (and the retired v1alpha1); v1 must say.
        None if api_version == exec::V1BETA1 || api_version == "client.authentication.k8s.io/v1alpha1" => {
            "IfAvailable".into()
        }
        None => String::new(),
    };
    let mut errs = Vec::new();
    let command = str_at(e, "command").unwrap_or("").to_string();
    if command.is_empty() {
        errs.push(format!("command must be specified for {user} to use exec authentication plugin"));
    }
    if api_version.is_empty() {
        errs.push(format!("apiVersion must be specified for {user} to use exec authentication plugin"));
    }
    let mut env = Vec::new();
    for x in e.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = str_at(x, "name").unwrap_or("");
        if name.is_empty() {
            errs.push(format!("env variable name must be specified for {user} to use exec authentication plugin"));
        }
        env.push((name.to_string(), x.get("value").and_then(Value::as_str).unwrap_or("").to_string()));
    }
    let interactive = match mode.as_str() {
        "Never" => exec::InteractiveMode::Never,
        "IfAvailable" => exec::InteractiveMode::IfAvailable,
        "Always" => exec::InteractiveMode::Always,
        "" => {
            errs.push(format!("interactiveMode must be specified for {user} to use exec authentication plugin"));
            exec::InteractiveMode::Never
        }
        other => {
            errs.push(format!("invalid interactiveMode for {user}: {other:?}"));
            exec::InteractiveMode::Never
        }
    };
    if !errs.is_empty() {
        return Err(KubeconfigError::ExecInvalid { at: uat.to_string(), errors: errs });
    }
    if api_version != exec::V1 && api_version != exec::V1BETA1 {
        return Err(KubeconfigError::ExecApiVersion { at: uat.to_string(), api_version });
    }
    let args = e.get("args").and_then(Value::as_array).into_iter().flatten();
    Ok(exec::ExecConfig {
        command,
        args: args.map(|a| a.as_str().unwrap_or("").to_string()).collect(),
        env,
        api_version,
        interactive,
        provide_cluster_info: e.get("provideClusterInfo").and_then(Value::as_bool).unwrap_or(false),
        install_hint: clean_ansi(str_at(e, "installHint").unwrap_or("")),
    })
}

/// `installHint` without ANSI escape sequences, as clientcmd cleans it.
fn clean_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The API server and user of a (merged) kubeconfig's current context, or
/// of `context`. Paths in `v` are already absolute ([`parse_file`]).
pub fn rest_config(v: &Value, context: Option<&str>) -> Result<RestConfig, KubeconfigError> {
    let current = context.map(str::to_string).or_else(|| str_at(v, "current-context").map(str::to_string));
    let (cluster_name, user_name) = match &current {
        None => {
            // No current context: a single cluster (and user) is unambiguous.
            let one = |list: &str| {
                v.get(list)
                    .and_then(Value::as_array)
                    .filter(|a| a.len() == 1)
                    .and_then(|a| a[0].get("name").and_then(Value::as_str).map(String::from))
            };
            let none = |list: &str| v.get(list).and_then(Value::as_array).is_none_or(Vec::is_empty);
            if none("clusters") && none("contexts") {
                return Err(KubeconfigError::NoConfiguration);
            }
            let c = one("clusters").ok_or(KubeconfigError::NoCurrentContext)?;
            (c, one("users"))
        }
        Some(current) => {
            let ctx = entry(v, "contexts", current).ok_or_else(|| KubeconfigError::ContextNotFound(current.clone()))?;
            let c = ctx.get("context").cloned().unwrap_or(Value::Null);
            let cluster =
                str_at(&c, "cluster").ok_or_else(|| KubeconfigError::ContextWithoutCluster(current.clone()))?;
            (cluster.to_string(), str_at(&c, "user").map(str::to_string))
        }
    };
    let cluster = entry(v, "clusters", &cluster_name)
        .and_then(|c| c.get("cluster"))
        .ok_or_else(|| KubeconfigError::ClusterNotFound(cluster_name.clone()))?;
    let cat = format!("clusters[{cluster_name}].cluster");
    let user = match &user_name {
        None => None,
        Some(u) => Some(
            entry(v, "users", u).and_then(|x| x.get("user")).ok_or_else(|| KubeconfigError::UserNotFound(u.clone()))?,
        ),
    };
    let uat = format!("users[{}].user", user_name.as_deref().unwrap_or(""));
    let proxy = str_at(cluster, "proxy-url").map(|p| proxy(p, &cluster_name, &cat)).transpose()?;
    let ca = pem(cluster, "certificate-authority", "certificate-authority-data", &cat, Path::new("/"))?;
    let insecure = cluster.get("insecure-skip-tls-verify").and_then(Value::as_bool).unwrap_or(false);
    if insecure && ca.is_some() {
        // client-go's transport: "specifying a root certificates file with the insecure flag is not allowed".
        return Err(KubeconfigError::InsecureWithCa(cat));
    }
    let tls_server_name = str_at(cluster, "tls-server-name").map(str::to_string);
    let exec_extension = cluster
        .get("extensions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|x| x.get("name").and_then(Value::as_str) == Some("client.authentication.k8s.io/exec"))
        .and_then(|x| x.get("extension"))
        .cloned();
    let dpctl_plane = cluster
        .get("extensions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|x| x.get("name").and_then(Value::as_str) == Some(crate::protocol::DPCTL_PLANE_EXTENSION));
    let mut rc = RestConfig { ca, insecure, tls_server_name, exec_extension, proxy, dpctl_plane, ..Default::default() };
    if let Some(u) = user {
        let uname = user_name.as_deref().unwrap_or("");
        let has = |key: &str| u.get(key).is_some_and(|x| !x.is_null());
        if has("exec") && has("auth-provider") {
            return Err(KubeconfigError::ExecAndAuthProvider { at: uat, user: uname.to_string() });
        }
        if let Some(ap) = u.get("auth-provider").filter(|x| !x.is_null()) {
            return Err(KubeconfigError::AuthProvider { at: uat, name: str_at(ap, "name").unwrap_or("").to_string() });
        }
        for key in ["as", "as-groups", "as-uid", "as-user-extra"] {
            if has(key) {
                return Err(KubeconfigError::Impersonation { at: uat, key });
            }
        }
        if let Some(e) = u.get("exec").filter(|x| !x.is_null()) {
            rc.exec = Some(exec_config(e, uname, &uat)?);
        }
        let root = Path::new("/");
        let cert = pem(u, "client-certificate", "client-certificate-data", &uat, root)?;
        let key = pem(u, "client-key", "client-key-data", &uat, root)?;
        rc.client_cert = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (Some(_), None) => return Err(KubeconfigError::CertWithoutKey(uat)),
            (None, Some(_)) => return Err(KubeconfigError::KeyWithoutCert(uat)),
            (None, None) => None,
        };
        rc.token = str_at(u, "token").map(str::to_string);
        rc.token_file = str_at(u, "tokenFile").map(PathBuf::from);
        let (name, pass) = (str_at(u, "username"), str_at(u, "password"));
        if name.is_some() || pass.is_some() {
            if rc.token.is_some() {
                return Err(KubeconfigError::TwoAuthMethods(uat));
            }
            rc.basic = Some((name.unwrap_or("").to_string(), pass.unwrap_or("").to_string()));
        }
    }
    let url = str_at(cluster, "server").ok_or_else(|| KubeconfigError::NoServer(cat.clone()))?;
    let default_tls = rc.ca.is_some() || rc.client_cert.is_some() || rc.insecure;
    let (https, authority, host, prefix) = server(url, default_tls, &cat)?;
    if !https && (rc.ca.is_some() || rc.client_cert.is_some() || rc.tls_server_name.is_some()) {
        return Err(KubeconfigError::Server { at: cat, url: url.to_string(), what: ServerProblem::PlainWithTls });
    }
    Ok(RestConfig { https, authority, host, prefix, server: url.to_string(), ..rc })
}

/// What [`in_cluster`] reads: the two environment variables and the mount.
#[derive(Debug, Clone)]
pub struct InClusterEnv {
    /// `KUBERNETES_SERVICE_HOST`.
    pub host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: Option<String>,
    /// The service-account mount (`token`, `ca.crt`).
    pub dir: PathBuf,
}

impl InClusterEnv {
    /// This process's environment; `DPCTL_SERVICEACCOUNT_DIR` moves the
    /// mount (tests; a pod never needs it).
    pub fn from_process() -> Self {
        let set = |v: std::result::Result<String, std::env::VarError>| v.ok().filter(|v| !v.is_empty());
        InClusterEnv {
            host: set(std::env::var("KUBERNETES_SERVICE_HOST")),
            port: set(std::env::var("KUBERNETES_SERVICE_PORT")),
            dir: std::env::var_os("DPCTL_SERVICEACCOUNT_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(SERVICEACCOUNT_DIR)),
        }
    }
}

/// `rest.InClusterConfig`: `https://HOST:PORT` with the mount's `token` (as a
/// token file, read again as it rotates) and `ca.crt`. `None` outside a pod
/// (either variable unset, or no token in the mount).
pub fn in_cluster(env: &InClusterEnv) -> Option<RestConfig> {
    let (host, port) = (env.host.as_deref()?, env.port.as_deref()?);
    let token = env.dir.join("token");
    if !token.is_file() {
        return None;
    }
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let ca = env.dir.join("ca.crt");
    Some(RestConfig {
        https: true,
        server: format!("https://{authority}"),
        authority,
        host: host.to_string(),
        // client-go goes on without the CA when ca.crt cannot be read (the system's roots).
        ca: ca.is_file().then_some(Pem::File(ca)),
        token_file: Some(token),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "apiVersion: v1
clusters:
- name: test
  cluster: {server: 'http://127.0.0.1:8080/'}
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: pki/ca.crt
    tls-server-name: kubernetes.default
users:
- name: admin
  user: {token: s3cret}
- name: certs
  user:
    client-certificate: /etc/k/client.crt
    client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCg==
    tokenFile: tok
contexts:
- name: here
  context: {cluster: test, user: admin}
- name: there
  context: {cluster: prod, user: certs}
current-context: here
";

    #[test]
    fn the_current_context_names_the_server_and_its_user() {
        let d = Path::new("/k");
        let c = parse_kubeconfig(FULL, d, None).unwrap();
        assert_eq!((c.https, c.authority.as_str(), c.prefix.as_str()), (false, "127.0.0.1:8080", ""));
        assert_eq!(c.token.as_deref(), Some("s3cret"));
        assert_eq!((c.ca, c.client_cert), (None, None));
        let one = parse_kubeconfig("clusters: [{name: c, cluster: {server: 'http://h/api-proxy'}}]", d, None).unwrap();
        assert_eq!((one.authority.as_str(), one.prefix.as_str(), one.token), ("h:80", "/api-proxy", None));
        let e = parse_kubeconfig(&FULL.replace("current-context: here", "current-context: gone"), d, None);
        assert!(e.unwrap_err().to_string().contains("context was not found for specified context: gone"));
        assert!(parse_kubeconfig("[", d, None).unwrap_err().to_string().contains("not a kubeconfig"));
    }

    #[test]
    fn tls_fields_and_client_certificates_resolve_from_the_kubeconfigs_directory() {
        let c = parse_kubeconfig(FULL, Path::new("/home/u/.kube"), Some("there")).unwrap();
        assert!(c.https);
        assert_eq!((c.authority.as_str(), c.host.as_str()), ("10.0.0.1:6443", "10.0.0.1"));
        assert_eq!(c.ca, Some(Pem::File("/home/u/.kube/pki/ca.crt".into())));
        assert_eq!(c.tls_server_name.as_deref(), Some("kubernetes.default"));
        let (cert, key) = c.client_cert.unwrap();
        assert_eq!(cert, Pem::File("/etc/k/client.crt".into()));
        assert_eq!(key, Pem::Data(b"-----BEGIN PRIVATE KEY-----\n".to_vec()));
        assert_eq!(c.token_file, Some(PathBuf::from("/home/u/.kube/tok")));
    }

    #[test]
    fn a_server_without_a_scheme_is_https_when_tls_is_configured_as_rest_default_server_url() {
        let k = |extra: &str| {
            format!("clusters: [{{name: c, cluster: {{server: 'k.example:6443'{extra}}}}}]\ncurrent-context: ''\n")
        };
        assert!(!parse_kubeconfig(&k(""), Path::new("/"), None).unwrap().https);
        let c = parse_kubeconfig(&k(", insecure-skip-tls-verify: true"), Path::new("/"), None).unwrap();
        assert!(c.https && c.insecure);
        let v6 = parse_kubeconfig("clusters: [{name: c, cluster: {server: 'https://[::1]'}}]", Path::new("/"), None);
        let v6 = v6.unwrap();
        assert_eq!((v6.authority.as_str(), v6.host.as_str()), ("[::1]:443", "::1"));
    }

    #[test]
    fn every_bad_kubeconfig_names_the_field_and_the_fix() {
        let d = Path::new("/");
        let bad = |cluster: &str, user: &str| {
            let text = format!(
                "clusters: [{{name: c, cluster: {{{cluster}}}}}]\nusers: [{{name: u, user: {{{user}}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
            );
            parse_kubeconfig(&text, d, None).unwrap_err().to_string()
        };
        let s = "server: 'https://h:1'";
        for (cluster, user, want) in [
            ("server: 'ftp://h'", "", "clusters[c].cluster.server \"ftp://h\": scheme \"ftp\""),
            ("server: 'https://h:x'", "", "port \"x\" is not a number"),
            ("server: ''", "", "clusters[c].cluster.server is empty; write https://HOST:PORT"),
            (
                &format!("{s}, certificate-authority: a, certificate-authority-data: QQ=="),
                "",
                "certificate-authority-data and certificate-authority are both specified",
            ),
            (&format!("{s}, certificate-authority-data: '%%%'"), "", "certificate-authority-data is not base64"),
            (
                &format!("{s}, certificate-authority: a, insecure-skip-tls-verify: true"),
                "",
                "insecure-skip-tls-verify with a certificate-authority is not allowed",
            ),
            (
                &format!("{s}, proxy-url: 'socks5://p:1080'"),
                "",
                "clusters[c].cluster.proxy-url \"socks5://p:1080\": dpctl tunnels through http:// proxies only",
            ),
            (
                &format!("{s}, proxy-url: 'ftp://p'"),
                "",
                "invalid 'proxy-url' \"ftp://p\" for cluster \"c\": unsupported scheme \"ftp\", must be http, https, or socks5",
            ),
            ("server: 'http://h', certificate-authority: a", "", "plain http but TLS settings are given"),
            (
                s,
                "exec: {command: aws}",
                "users[u].user.exec: invalid configuration: [apiVersion must be specified for u to use exec authentication plugin, interactiveMode must be specified for u to use exec authentication plugin]",
            ),
            (
                s,
                "exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}",
                "invalid configuration: command must be specified for u to use exec authentication plugin",
            ),
            (
                s,
                "exec: {command: a, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Sometimes}",
                "invalid configuration: invalid interactiveMode for u: \"Sometimes\"",
            ),
            (
                s,
                "exec: {command: a, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, env: [{value: x}]}",
                "env variable name must be specified for u to use exec authentication plugin",
            ),
            (
                s,
                "exec: {command: a, apiVersion: client.authentication.k8s.io/v1alpha1}",
                "exec plugin: invalid apiVersion \"client.authentication.k8s.io/v1alpha1\"; use",
            ),
            (
                s,
                "exec: {command: a, apiVersion: client.authentication.k8s.io/v1beta1}, auth-provider: {name: oidc}",
                "authProvider cannot be provided in combination with an exec plugin for u",
            ),
            (s, "auth-provider: {name: gcp}", "The gcp auth plugin has been removed. Please use the \"gke-gcloud-auth-plugin\""),
            (s, "auth-provider: {name: azure}", "The azure auth plugin has been removed."),
            (s, "auth-provider: {name: oidc}", "auth-provider \"oidc\" is not supported by dpctl (client-go removed"),
            (s, "as: root", "impersonation"),
            (s, "client-certificate: c", "client-certificate without client-key"),
            (s, "client-key: k", "client-key without client-certificate"),
            (
                s,
                "client-key: k, client-key-data: QQ==, client-certificate: c",
                "client-key-data and client-key are both specified",
            ),
            (s, "token: t, username: a, password: b", "more than one authentication method"),
        ] {
            let e = bad(cluster, user);
            assert!(e.contains(want), "{cluster} / {user}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn exec_sections_are_read_with_clientcmd_s_defaults_and_paths() {
        let d = Path::new("/home/u/.kube");
        let k = |exec: &str| {
            format!(
                "clusters: [{{name: c, cluster: {{server: 'https://h:1', extensions: [{{name: client.authentication.k8s.io/exec, extension: {{audience: x}}}}]}}}}]\nusers: [{{name: u, user: {{exec: {{{exec}}}}}}}]\ncurrent-context: x\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n"
            )
        };
        let c = parse_kubeconfig(
            &k("command: bin/get-token, args: [a, b], env: [{name: A, value: '1'}], apiVersion: client.authentication.k8s.io/v1beta1, provideClusterInfo: true, installHint: \"\\e[1mbrew\\e[0m install it\""),
            d,
            None,
        )
        .unwrap();
        assert_eq!(c.server, "https://h:1");
        assert_eq!(c.exec_extension, Some(serde_json::json!({"audience": "x"})));
        let e = c.exec.unwrap();
        assert_eq!(e.command, "/home/u/.kube/bin/get-token", "a command with a slash is relative to the kubeconfig");
        assert_eq!((e.args, e.env), (vec!["a".to_string(), "b".into()], vec![("A".to_string(), "1".to_string())]));
        assert_eq!(e.interactive, exec::InteractiveMode::IfAvailable, "v1beta1 defaults to IfAvailable");
        assert!(e.provide_cluster_info);
        assert_eq!(e.install_hint, "brew install it", "ANSI escapes removed as clientcmd does");
        let c = parse_kubeconfig(
            &k("command: aws, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Always"),
            d,
            None,
        );
        let e = c.unwrap().exec.unwrap();
        assert_eq!((e.command.as_str(), e.interactive), ("aws", exec::InteractiveMode::Always), "a bare command: PATH");
    }

    #[test]
    fn an_http_proxy_url_is_read_as_go_reads_it() {
        let p = proxy("http://u:p%40ss@proxy.corp:3128/", "c", "x").unwrap();
        assert_eq!(p.authority, "proxy.corp:3128");
        assert_eq!(p.authorization.as_deref(), Some("Basic dTpwQHNz"), "user info decoded: u:p@ss");
        assert_eq!(proxy("http://proxy", "c", "x").unwrap().authority, "proxy:80");
        assert_eq!(proxy("http://[::1]:8080", "c", "x").unwrap().authority, "[::1]:8080");
        assert_eq!(proxy("http://[::1]", "c", "x").unwrap().authority, "[::1]:80");
        assert!(proxy("http://", "c", "x").unwrap_err().to_string().contains("names no host"));
        assert!(proxy("proxy:3128", "c", "x").unwrap_err().to_string().contains("unsupported scheme \"\""));
    }

    #[test]
    fn kubeconfig_files_merge_as_clientcmd_merges_them() {
        let a = parse_file(
            "clusters: [{name: shared, cluster: {server: 'https://a:1', certificate-authority: ca.crt}}]\nusers: [{name: u, user: {tokenFile: tok}}]\n",
            Path::new("/a"),
        )
        .unwrap();
        let b = parse_file(
            "current-context: ctx\nclusters: [{name: shared, cluster: {server: 'https://b:1', tls-server-name: n}}, {name: other, cluster: {server: 'https://o:1'}}]\nusers: [{name: u, user: {token: from-b}}]\ncontexts: [{name: ctx, context: {cluster: shared, user: u}}, {name: o, context: {cluster: other}}]\n",
            Path::new("/b"),
        )
        .unwrap();
        let c = parse_file("current-context: o\n", Path::new("/c")).unwrap();
        let m = merge(vec![a.clone(), b.clone(), c.clone()]);
        let rc = rest_config(&m, None).unwrap();
        // The first file's "shared" and "u" win whole (b's tls-server-name and token are dropped);
        // b's current-context is the first set; a's relative paths resolved against /a.
        assert_eq!((rc.authority.as_str(), rc.tls_server_name.as_deref()), ("a:1", None));
        assert_eq!(rc.ca, Some(Pem::File("/a/ca.crt".into())));
        assert_eq!((rc.token_file, rc.token), (Some(PathBuf::from("/a/tok")), None));
        assert_eq!(rest_config(&m, Some("o")).unwrap().authority, "o:1");
        assert_eq!(rest_config(&merge(vec![c, b, a]), None).unwrap().authority, "o:1", "c sets current-context first");
        assert_eq!(parse_file("", Path::new("/")).unwrap(), serde_json::json!({}), "an empty file is an empty config");
        let dup = parse_file("users: [{name: u, user: {}}, {name: u, user: {}}]", Path::new("/"));
        assert!(dup.unwrap_err().to_string().contains("duplicate name \"u\" in users"));
    }

    #[test]
    fn in_cluster_config_comes_from_the_service_account_mount_and_the_service_variables() {
        let d = tempfile::tempdir().unwrap();
        let env = |host: Option<&str>| InClusterEnv {
            host: host.map(String::from),
            port: Some("443".into()),
            dir: d.path().to_path_buf(),
        };
        assert_eq!(in_cluster(&env(Some("10.96.0.1"))), None, "no token in the mount: not in a pod");
        std::fs::write(d.path().join("token"), "jwt\n").unwrap();
        assert_eq!(in_cluster(&env(None)), None, "no KUBERNETES_SERVICE_HOST: not in a pod");
        let c = in_cluster(&env(Some("10.96.0.1"))).unwrap();
        assert!(c.https);
        assert_eq!((c.authority.as_str(), c.host.as_str(), c.ca.as_ref()), ("10.96.0.1:443", "10.96.0.1", None));
        assert_eq!(c.token_file, Some(d.path().join("token")));
        std::fs::write(d.path().join("ca.crt"), "pem").unwrap();
        assert_eq!(in_cluster(&env(Some("fd00::1"))).unwrap().ca, Some(Pem::File(d.path().join("ca.crt"))));
        assert_eq!(in_cluster(&env(Some("fd00::1"))).unwrap().authority, "[fd00::1]:443");
    }
}
