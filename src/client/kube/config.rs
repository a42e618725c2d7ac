//! Where an API server is and how to talk to it, read as client-go reads it
//! (`tools/clientcmd` for kubeconfigs, `rest.InClusterConfig` for a pod):
//! [`parse_kubeconfig`] is pure (the text and the kubeconfig's directory,
//! against which relative paths resolve, as `clientcmd` resolves them);
//! [`in_cluster`] reads the service-account mount. Files named by either are
//! read when the connection is built ([`super::connect`]).
//!
//! Supported: `server` (http or https; without a scheme, https when any TLS
//! setting is given, as `rest.DefaultServerURL`), `certificate-authority`
//! and `certificate-authority-data`, `insecure-skip-tls-verify`,
//! `tls-server-name`; users' `token`, `tokenFile` (wins over `token`, read
//! again at every request as client-go's cached file token source does when
//! it expires), `username`/`password`, `client-certificate(-data)` and
//! `client-key(-data)`. Refused with the field named: `exec` and
//! `auth-provider` credential plugins, `proxy-url`, impersonation (`as`).
//! client-go's validation conflicts are refused with its reasons.

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
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A path as `clientcmd` resolves it: relative to the kubeconfig's directory.
fn resolve(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// A `-data` field: base64 in the kubeconfig ([]byte in client-go's types).
fn data(v: &Value, key: &str, at: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(s) = str_at(v, key) else { return Ok(None) };
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let file_key = key.trim_end_matches("-data");
    base64::engine::general_purpose::STANDARD.decode(clean).map(Some).map_err(|e| {
        format!("{at}.{key} is not base64 ({e}); put the PEM through `base64 -w0`, or name a file with {file_key}")
    })
}

/// File or data of one PEM field pair; both is client-go's validation error.
fn pem(v: &Value, key: &str, data_key: &str, at: &str, dir: &Path, both: &str) -> Result<Option<Pem>, String> {
    match (str_at(v, key), data(v, data_key, at)?) {
        (Some(_), Some(_)) => Err(format!("{at}: {data_key} and {key} are both specified ({both}); keep one")),
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
fn server(url: &str, default_tls: bool, at: &str) -> Result<(bool, String, String, String), String> {
    let (https, rest) = match url.split_once("://") {
        Some(("https", rest)) => (true, rest),
        Some(("http", rest)) => (false, rest),
        Some((other, _)) => {
            return Err(format!("{at}.server {url:?}: scheme {other:?} is not http or https; write https://HOST:PORT"))
        }
        None => (default_tls, url),
    };
    let (authority, prefix) = match rest.split_once('/') {
        Some((a, p)) => (a, format!("/{}", p.trim_end_matches('/'))),
        None => (rest, String::new()),
    };
    let prefix = if prefix == "/" { String::new() } else { prefix };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{at}.server {url:?} names no host; write https://HOST:PORT"));
    }
    // host, or [v6], with an optional :port.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| format!("{at}.server {url:?}: unclosed [ in the host"))?;
        (h.to_string(), after.strip_prefix(':').map(str::to_string))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (authority.to_string(), None),
        }
    };
    if let Some(p) = &port {
        if p.parse::<u16>().is_err() {
            return Err(format!("{at}.server {url:?}: port {p:?} is not a number"));
        }
    }
    let authority = match port {
        Some(_) => authority.to_string(),
        None => format!("{authority}:{}", if https { 443 } else { 80 }),
    };
    Ok((https, authority, host, prefix))
}

/// The API server of a kubeconfig's current context (or of `context`);
/// relative paths resolve against `dir`, the kubeconfig's directory. `Err`
/// is one line naming the field and the fix.
pub fn parse_kubeconfig(text: &str, dir: &Path, context: Option<&str>) -> Result<RestConfig, String> {
    let v: Value = serde_norway::from_str(text).map_err(|e| format!("not a kubeconfig (YAML): {e}"))?;
    let current = context.map(str::to_string).or_else(|| str_at(&v, "current-context").map(str::to_string));
    let (cluster_name, user_name) = match &current {
        None => {
            // No current context: a single cluster (and user) is unambiguous.
            let one = |list: &str| {
                v.get(list)
                    .and_then(Value::as_array)
                    .filter(|a| a.len() == 1)
                    .and_then(|a| a[0].get("name").and_then(Value::as_str).map(String::from))
            };
            let c = one("clusters").ok_or(
                "no current-context and not exactly one cluster; set current-context (kubectl config use-context NAME)",
            )?;
            (c, one("users"))
        }
        Some(current) => {
            let ctx = entry(&v, "contexts", current).ok_or_else(|| {
                format!("context {current:?} is not in contexts; name one of them (kubectl config get-contexts)")
            })?;
            let c = ctx.get("context").cloned().unwrap_or(Value::Null);
            let cluster = str_at(&c, "cluster")
                .ok_or_else(|| format!("contexts[{current}].context.cluster is empty; name a cluster"))?;
            (cluster.to_string(), str_at(&c, "user").map(str::to_string))
        }
    };
    let cluster = entry(&v, "clusters", &cluster_name)
        .and_then(|c| c.get("cluster"))
        .ok_or_else(|| format!("cluster {cluster_name:?} is not in clusters; add it or fix the context"))?;
    let cat = format!("clusters[{cluster_name}].cluster");
    let user = match &user_name {
        None => None,
        Some(u) => Some(
            entry(&v, "users", u)
                .and_then(|x| x.get("user"))
                .ok_or_else(|| format!("user {u:?} is not in users; add it or fix the context"))?,
        ),
    };
    let uat = format!("users[{}].user", user_name.as_deref().unwrap_or(""));
    if str_at(cluster, "proxy-url").is_some() {
        return Err(format!(
            "{cat}.proxy-url: dpctl does not go through proxies; remove it to reach the server directly"
        ));
    }
    let ca = pem(cluster, "certificate-authority", "certificate-authority-data", &cat, dir, "client-go refuses both")?;
    let insecure = cluster.get("insecure-skip-tls-verify").and_then(Value::as_bool).unwrap_or(false);
    if insecure && ca.is_some() {
        // client-go's transport: "specifying a root certificates file with the insecure flag is not allowed".
        return Err(format!(
            "{cat}: insecure-skip-tls-verify with a certificate-authority is not allowed (as client-go); drop one"
        ));
    }
    let tls_server_name = str_at(cluster, "tls-server-name").map(str::to_string);
    let mut rc = RestConfig { ca, insecure, tls_server_name, ..Default::default() };
    if let Some(u) = user {
        for (key, what) in [
            ("exec", "exec credential plugins"),
            ("auth-provider", "auth-provider plugins"),
            ("as", "impersonation"),
            ("as-groups", "impersonation"),
            ("as-uid", "impersonation"),
        ] {
            if u.get(key).is_some_and(|x| !x.is_null()) {
                return Err(format!(
                    "{uat}.{key}: {what} are not supported by dpctl; use a token, tokenFile or client certificate"
                ));
            }
        }
        let cert = pem(u, "client-certificate", "client-certificate-data", &uat, dir, "client-go refuses both")?;
        let key = pem(u, "client-key", "client-key-data", &uat, dir, "client-go refuses both")?;
        rc.client_cert = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (Some(_), None) => {
                return Err(format!("{uat}: client-certificate without client-key or client-key-data; add the key"))
            }
            (None, Some(_)) => {
                return Err(format!(
                    "{uat}: client-key without client-certificate or client-certificate-data; add the certificate"
                ))
            }
            (None, None) => None,
        };
        rc.token = str_at(u, "token").map(str::to_string);
        rc.token_file = str_at(u, "tokenFile").map(|f| resolve(dir, f));
        let (name, pass) = (str_at(u, "username"), str_at(u, "password"));
        if name.is_some() || pass.is_some() {
            if rc.token.is_some() {
                return Err(format!(
                    "{uat}: more than one authentication method (token and username/password); keep one"
                ));
            }
            rc.basic = Some((name.unwrap_or("").to_string(), pass.unwrap_or("").to_string()));
        }
    }
    let url = str_at(cluster, "server").ok_or_else(|| format!("{cat}.server is empty; write https://HOST:PORT"))?;
    let default_tls = rc.ca.is_some() || rc.client_cert.is_some() || rc.insecure;
    let (https, authority, host, prefix) = server(url, default_tls, &cat)?;
    if !https && (rc.ca.is_some() || rc.client_cert.is_some() || rc.tls_server_name.is_some()) {
        return Err(format!("{cat}.server {url:?} is plain http but TLS settings are given; write https://"));
    }
    Ok(RestConfig { https, authority, host, prefix, ..rc })
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
        assert!(e.unwrap_err().contains("context \"gone\" is not in contexts"));
        assert!(parse_kubeconfig("[", d, None).unwrap_err().contains("not a kubeconfig"));
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
            parse_kubeconfig(&text, d, None).unwrap_err()
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
            (&format!("{s}, proxy-url: 'http://p'"), "", "proxy-url"),
            ("server: 'http://h', certificate-authority: a", "", "plain http but TLS settings are given"),
            (s, "exec: {command: aws}", "users[u].user.exec: exec credential plugins are not supported"),
            (s, "auth-provider: {name: gcp}", "auth-provider"),
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
