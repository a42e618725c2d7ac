//! A small Kubernetes API client: JSON over HTTP/1.1 on the hyper
//! dependency dpctl already has, plain or over TLS (rustls, [`crate::core::tls`]),
//! configured from a kubeconfig (`--kubeconfig`, or `KUBECONFIG`'s files
//! merged) or a pod's service account as client-go configures itself
//! ([`config`]), with exec credential plugins as client-go runs them
//! ([`exec`]) and an http `proxy-url` tunnelled through with CONNECT.
//! `dpctl dra serve` publishes its ResourceSlice and reads claims through it;
//! `dpctl test --dra` reads the local API server with it. No task is
//! spawned: each request drives its connection to completion (and a plugin
//! process to its end, or kills it at its time limit).

pub mod config;
pub mod exec;

use crate::core::{Error, Result};
use config::{Pem, RestConfig};
use rustls::pki_types::ServerName;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where and as whom to talk to an API server: its connection, ready to use.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// `host:port` to connect to.
    pub authority: String,
    /// A path prefix of the server URL (usually empty).
    pub prefix: String,
    /// TLS (https), with the name the server's certificate must carry; none: plain http.
    pub tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    /// A bearer token (given inline, or the token file's content at load).
    pub token: Option<String>,
    /// The token file, read again at every request (service-account tokens rotate).
    pub token_file: Option<PathBuf>,
    /// `Authorization: Basic ...` for username/password.
    pub basic: Option<String>,
    /// An exec credential plugin: run at the first request, again when its
    /// credential expires or is refused.
    pub exec: Option<Arc<exec::ExecAuth>>,
    /// `proxy-url`: every connection is tunnelled through this http proxy.
    pub proxy: Option<config::Proxy>,
    /// The kubeconfig's cluster says this is a dpctl mock kubelet's API
    /// server ([`crate::protocol::DPCTL_PLANE_EXTENSION`]).
    pub dpctl_plane: bool,
}

impl ApiServer {
    /// The server's URL, for messages.
    pub fn url(&self) -> String {
        format!("{}://{}{}", if self.tls.is_some() { "https" } else { "http" }, self.authority, self.prefix)
    }

    /// The `Authorization` header value, if any: the token file's current
    /// content (the last one read when it cannot be read now, as client-go's
    /// cached token source), else the token, else basic credentials.
    fn authorization(&self) -> Option<String> {
        let from_file = self.token_file.as_ref().and_then(|f| read_token(f).ok());
        from_file.or_else(|| self.token.clone()).map(|t| format!("Bearer {t}")).or_else(|| self.basic.clone())
    }
}

/// Why a connection to an API server could not be built from its
/// configuration (a file it names, or the TLS it asks for); one line naming
/// the kubeconfig field and the fix.
#[derive(Debug)]
pub enum ConnectError {
    /// A file the configuration names could not be read.
    Read {
        /// The kubeconfig field naming it (`certificate-authority`, `client-key`, `tokenFile`, …).
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file holds no token.
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
    /// `tls-server-name` (or the server's host) is not a DNS name or an IP.
    ServerName(String),
    /// No CA given, and this system has none.
    NoRoots,
    /// TLS material rustls cannot use, or TLS this machine cannot do.
    Tls(crate::core::tls::TlsError),
    /// The exec credential plugin's part of the configuration.
    Exec(exec::ExecError),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Read { field, path, source } => {
                write!(f, "{field} {}: {source}; fix the path", path.display())
            }
            ConnectError::EmptyToken { path } => write!(f, "tokenFile {}: it is empty; fix the path", path.display()),
            ConnectError::ServerName(name) => write!(f, "tls-server-name {name:?} is not a DNS name or IP"),
            ConnectError::NoRoots => f.write_str(
                "the kubeconfig names no certificate-authority and this system has no CA certificates; \
                 add certificate-authority(-data)",
            ),
            ConnectError::Tls(e) => e.fmt(f),
            ConnectError::Exec(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Read { source, .. } => Some(source),
            ConnectError::Tls(e) => Some(e),
            ConnectError::Exec(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::core::tls::TlsError> for ConnectError {
    fn from(e: crate::core::tls::TlsError) -> Self {
        ConnectError::Tls(e)
    }
}

fn read_token(f: &Path) -> std::result::Result<String, ConnectError> {
    let t = crate::core::limits::read_file(f, 64 << 10, "token file").map_err(|source| ConnectError::Read {
        field: "tokenFile",
        path: f.to_path_buf(),
        source,
    })?;
    let t = t.trim().to_string();
    if t.is_empty() {
        return Err(ConnectError::EmptyToken { path: f.to_path_buf() });
    }
    Ok(t)
}

/// Read a PEM field's bytes.
fn read_pem(p: &Pem, field: &'static str) -> std::result::Result<Vec<u8>, ConnectError> {
    match p {
        Pem::Data(d) => Ok(d.clone()),
        Pem::File(f) => std::fs::read(f).map_err(|source| ConnectError::Read { field, path: f.clone(), source }),
    }
}

/// `insecure-skip-tls-verify`: any certificate is accepted; the handshake's
/// signatures are still checked (the server holds the key it presented).
#[derive(Debug)]
struct SkipVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration of `rc`: its CA (else the system's roots),
/// or no verification with `insecure-skip-tls-verify`; its client certificate.
fn client_tls(rc: &RestConfig) -> std::result::Result<Arc<rustls::ClientConfig>, ConnectError> {
    use crate::core::tls::TlsError;
    let provider = crate::core::tls::provider()?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Refused { what: "TLS".into(), fix: "", source })?;
    let builder = if rc.insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(SkipVerify(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &rc.ca {
            Some(p) => {
                let field = "certificate-authority";
                let what = match p {
                    Pem::File(f) => format!("{field} {}", f.display()),
                    Pem::Data(_) => format!("{field}-data"),
                };
                for c in crate::core::tls::certs_from_pem(&read_pem(p, field)?, &what)? {
                    roots.add(c).map_err(|source| TlsError::Refused {
                        what: format!("{what}: not a CA certificate rustls can use"),
                        fix: "",
                        source,
                    })?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(ConnectError::NoRoots);
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    let mut cfg = match &rc.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let certs = crate::core::tls::certs_from_pem(&read_pem(cert, "client-certificate")?, "client-certificate")?;
            let key = crate::core::tls::key_from_pem(&read_pem(key, "client-key")?, "client-key")?;
            builder.with_client_auth_cert(certs, key).map_err(|source| TlsError::Refused {
                what: "client-certificate and client-key".into(),
                fix: "; give a matching pair",
                source,
            })?
        }
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A connection for `rc`: its TLS configuration built and its files read.
/// Over plain http no credentials are read or sent, as client-go's
/// `clientcmd` reads a user's credentials only when the transport is TLS
/// (`client_config.go`: "only try to read the auth information if we are
/// secure"), so dpctl meets a server as every driver built on client-go does.
pub fn connect(rc: &RestConfig) -> std::result::Result<ApiServer, ConnectError> {
    if !rc.https {
        return Ok(ApiServer {
            authority: rc.authority.clone(),
            prefix: rc.prefix.clone(),
            tls: None,
            token: None,
            token_file: None,
            basic: None,
            exec: None,
            proxy: rc.proxy.clone(),
            dpctl_plane: rc.dpctl_plane,
        });
    }
    let tls = if rc.https {
        let name = rc.tls_server_name.clone().unwrap_or_else(|| rc.host.clone());
        let server_name = ServerName::try_from(name.clone()).map_err(|_| ConnectError::ServerName(name.clone()))?;
        Some((client_tls(rc)?, server_name))
    } else {
        None
    };
    let token = match &rc.token_file {
        Some(f) => Some(read_token(f)?),
        None => rc.token.clone(),
    };
    let basic = rc.basic.as_ref().map(|(u, p)| {
        use base64::Engine as _;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))
    });
    // A token, basic credentials or a client certificate given statically win:
    // the plugin is then never run (the exec authenticator's UpdateTransportConfig).
    let static_creds = token.is_some() || basic.is_some() || rc.client_cert.is_some();
    let exec = match &rc.exec {
        Some(e) if !static_creds => {
            let ca = match &rc.ca {
                None => None,
                Some(p) => Some(read_pem(p, "certificate-authority").map_err(|e| match e {
                    ConnectError::Read { path, source, .. } => {
                        ConnectError::Exec(exec::ExecError::ClusterCa { path, source })
                    }
                    other => other,
                })?),
            };
            let cluster = exec::ClusterInfo {
                server: rc.server.clone(),
                tls_server_name: rc.tls_server_name.clone(),
                insecure: rc.insecure,
                ca,
                proxy_url: rc.proxy.as_ref().map(|p| p.url.clone()),
                config: rc.exec_extension.clone(),
            };
            let base = rc.clone();
            let cert_tls: exec::CertTls = Box::new(move |cert: &[u8], key: &[u8]| {
                let mut rc = base.clone();
                rc.client_cert = Some((Pem::Data(cert.to_vec()), Pem::Data(key.to_vec())));
                client_tls(&rc).map_err(Into::into)
            });
            Some(Arc::new(exec::ExecAuth::new(e.clone(), Some(cluster), Some(cert_tls))))
        }
        _ => None,
    };
    Ok(ApiServer {
        authority: rc.authority.clone(),
        prefix: rc.prefix.clone(),
        tls,
        token,
        token_file: rc.token_file.clone(),
        basic,
        exec,
        proxy: rc.proxy.clone(),
        dpctl_plane: rc.dpctl_plane,
    })
}

/// Read a kubeconfig file (its current context, or `context`): the file
/// alone, as clientcmd reads an explicit path (no merging); errors are one
/// line starting `--kubeconfig PATH:`.
pub fn read_kubeconfig(path: &Path, context: Option<&str>) -> Result<RestConfig> {
    let fail = |e: String| Error::usage(format!("--kubeconfig {}: {e}", path.display()));
    let text = crate::core::limits::read_file(path, 4 << 20, "kubeconfig").map_err(|e| fail(e.to_string()))?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    config::parse_kubeconfig(&text, dir, context).map_err(|e| fail(e.to_string()).caused_by(e))
}

/// [`read_kubeconfig`], connected as it says.
pub fn load_kubeconfig_context(path: &Path, context: Option<&str>) -> Result<ApiServer> {
    let rc = read_kubeconfig(path, context)?;
    connect(&rc).map_err(|e| Error::usage(format!("--kubeconfig {}: {e}", path.display())).caused_by(e))
}

/// [`load_kubeconfig_context`] with the current context.
pub fn load_kubeconfig(path: &Path) -> Result<ApiServer> {
    load_kubeconfig_context(path, None)
}

/// What `KUBECONFIG`'s files gave.
#[derive(Debug)]
pub enum Loaded<T> {
    /// The merged files' configuration (or connection).
    Found(T),
    /// None of the files exists (client-go: "Config not found: …").
    NotFound(Vec<PathBuf>),
}

/// `KUBECONFIG`: its files (`:`-separated, each once, empty entries and
/// missing files skipped) merged as clientcmd merges them
/// ([`config::merge`]), read as its current context (or `context`) says.
/// Errors are one line starting `KUBECONFIG=LIST:`.
pub fn read_kubeconfig_list(list: &str, context: Option<&str>) -> Result<Loaded<RestConfig>> {
    let fail = |e: String| Error::usage(format!("KUBECONFIG={list}: {e}"));
    let mut files = Vec::new();
    let mut missing = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in list.split(':').filter(|f| !f.is_empty() && seen.insert(*f)) {
        let path = PathBuf::from(f);
        if let Err(e) = std::fs::metadata(&path) {
            if e.kind() == std::io::ErrorKind::NotFound {
                missing.push(path);
                continue;
            }
        }
        let text = crate::core::limits::read_file(&path, 4 << 20, "kubeconfig")
            .map_err(|e| fail(format!("error loading config file {f:?}: {e}")))?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let file = config::parse_file(&text, dir)
            .map_err(|e| fail(format!("error loading config file {f:?}: {e}")).caused_by(e))?;
        files.push(file);
    }
    if files.is_empty() {
        return Ok(Loaded::NotFound(missing));
    }
    config::rest_config(&config::merge(files), context).map(Loaded::Found).map_err(|e| fail(e.to_string()).caused_by(e))
}

/// [`read_kubeconfig_list`], connected as it says.
pub fn load_kubeconfig_list(list: &str, context: Option<&str>) -> Result<Loaded<ApiServer>> {
    match read_kubeconfig_list(list, context)? {
        Loaded::NotFound(m) => Ok(Loaded::NotFound(m)),
        Loaded::Found(rc) => {
            connect(&rc).map(Loaded::Found).map_err(|e| Error::usage(format!("KUBECONFIG={list}: {e}")).caused_by(e))
        }
    }
}

/// Where a client goes, as client-go's deferred loading decides with
/// explicit `--kubeconfig` and `KUBECONFIG` (`kubeconfig_env`, the
/// variable's value): the explicit file alone; else `KUBECONFIG`'s files
/// merged; else, or when none of them exists, the in-cluster config in a
/// pod. `Ok(None)`: none of these. Unlike client-go, `~/.kube/config` is
/// never read: a driver publishes only where it is told to.
pub fn load_default(
    explicit: Option<&Path>,
    kubeconfig_env: Option<&str>,
    context: Option<&str>,
) -> Result<Option<ApiServer>> {
    if let Some(p) = explicit {
        return load_kubeconfig_context(p, context).map(Some);
    }
    let list = kubeconfig_env.filter(|l| !l.is_empty());
    if let Some(list) = list {
        match load_kubeconfig_list(list, context)? {
            Loaded::Found(api) => return Ok(Some(api)),
            Loaded::NotFound(missing) => {
                if let Some(api) = load_in_cluster()? {
                    return Ok(Some(api));
                }
                let names: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
                return Err(Error::usage(format!(
                    "KUBECONFIG={list}: Config not found: {}, and not in a pod (client-go: invalid configuration: no configuration has been provided); name kubeconfig files that exist, or pass --kubeconfig",
                    names.join(", ")
                )));
            }
        }
    }
    if context.is_some() {
        return Err(Error::usage("--context needs a kubeconfig: pass --kubeconfig or set KUBECONFIG"));
    }
    load_in_cluster()
}

/// In a pod (`KUBERNETES_SERVICE_HOST`/`_PORT` set and a service-account
/// token mounted): the in-cluster connection; `Ok(None)` elsewhere.
pub fn load_in_cluster() -> Result<Option<ApiServer>> {
    let env = config::InClusterEnv::from_process();
    match config::in_cluster(&env) {
        None => Ok(None),
        Some(rc) => connect(&rc)
            .map(Some)
            .map_err(|e| Error::usage(format!("in-cluster config ({}): {e}", env.dir.display())).caused_by(e)),
    }
}

/// One HTTP/1.1 exchange on an open connection: the status and the body.
async fn exchange<IO>(io: IO, req: http::Request<String>) -> Result<(u16, Value)>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper::body::Body as _;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| Error::failed(format!("API server: {e}")))?;
    let exchange = async move {
        let resp = sender.send_request(req).await.map_err(|e| Error::failed(format!("API server: {e}")))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.map_err(|e| Error::failed(format!("API server: {e}")))?;
            if let Ok(d) = frame.into_data() {
                buf.extend_from_slice(&d);
                if buf.len() > 16 << 20 {
                    return Err(Error::failed("API server answer larger than 16 MiB"));
                }
            }
        }
        drop(sender);
        Ok((status, serde_json::from_slice(&buf).unwrap_or(Value::Null)))
    };
    let (r, _) = tokio::join!(exchange, conn);
    r
}

/// What a failed TLS handshake means, in one line with the fix.
fn handshake_error(api: &ApiServer, e: &std::io::Error) -> Error {
    use rustls::CertificateError as C;
    let cert = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(c)) => Some(c),
        _ => None,
    };
    let fix = match cert {
        Some(C::UnknownIssuer | C::BadSignature) => {
            "the server's certificate is not signed by the kubeconfig's certificate-authority; give the cluster's CA"
        }
        Some(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "the server's certificate does not name this host; set tls-server-name to a name it carries"
        }
        Some(C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. }) => {
            "the server's certificate is outside its validity period; check the clock or renew it"
        }
        _ => "check the server URL and the kubeconfig's TLS settings",
    };
    Error::failed(format!("API server {}: TLS handshake failed: {e}; {fix}", api.url()))
}

/// A connection to the API server through the http proxy `p`: `CONNECT
/// host:port`, as Go's http.Transport tunnels (https and, here, http too).
async fn tunnel(api: &ApiServer, p: &config::Proxy) -> Result<tokio::net::TcpStream> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let fail = |what: String| Error::failed(format!("API server {} through proxy-url {}: {what}", api.url(), p.url));
    let mut s = tokio::net::TcpStream::connect(&p.authority)
        .await
        .map_err(|e| fail(format!("cannot connect to the proxy: {e}; check proxy-url")))?;
    let mut req = format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\nUser-Agent: dpctl\r\n", api.authority);
    if let Some(a) = &p.authorization {
        req.push_str(&format!("Proxy-Authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.map_err(|e| fail(format!("CONNECT: {e}")))?;
    // The answer's head, a byte at a time so nothing of the tunnel is read.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 << 10 {
            return Err(fail("the proxy's answer to CONNECT has no end".into()));
        }
        let mut b = [0u8; 1];
        match s.read(&mut b).await {
            Ok(0) => return Err(fail("the proxy closed the connection before answering CONNECT".into())),
            Ok(_) => head.push(b[0]),
            Err(e) => return Err(fail(format!("CONNECT: {e}"))),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or("");
    match status.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(s),
        _ => Err(fail(format!(
            "the proxy answered CONNECT with {:?}; check proxy-url and that the proxy lets this host through",
            status.trim()
        ))),
    }
}

/// One HTTP/1.1 request with a JSON body; the status and the body. With an
/// exec plugin its credential is got first (the plugin has its own time
/// limit, outside `t`), and a 401 to it runs the plugin again for the next
/// request, as client-go's exec round tripper does; the 401 is still the answer.
pub async fn request(
    api: &ApiServer,
    method: &str,
    path: &str,
    body: Option<&Value>,
    t: Duration,
) -> Result<(u16, Value)> {
    request_as(api, method, path, JSON, body, t).await
}

/// The content type of a JSON body.
pub const JSON: &str = "application/json";
/// A strategic merge patch (what the kubelet patches pod and node status with).
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
/// A JSON merge patch (RFC 7386).
pub const MERGE_PATCH: &str = "application/merge-patch+json";

/// An open connection to the API server (plain TCP or TLS over it).
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

/// Credentials an exec plugin gave for one request.
type Creds = Option<Arc<exec::Current>>;

async fn credentials(api: &ApiServer) -> Result<Creds> {
    match &api.exec {
        None => Ok(None),
        Some(a) => {
            Ok(Some(a.get().await.map_err(|e| {
                Error::failed(format!("API server {}: getting credentials: {e}", api.url())).caused_by(e)
            })?))
        }
    }
}

/// Connect (through the proxy, over TLS as configured) and build the request.
async fn open(
    api: &ApiServer,
    creds: &Creds,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
) -> Result<(Box<dyn Io>, http::Request<String>)> {
    let stream = match &api.proxy {
        None => tokio::net::TcpStream::connect(&api.authority)
            .await
            .map_err(|e| Error::failed(format!("API server {}: cannot connect: {e}", api.url())))?,
        Some(p) => tunnel(api, p).await?,
    };
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", api.prefix))
        .header("host", &api.authority)
        .header("accept", "application/json")
        .header("content-type", content_type)
        .header("user-agent", "dpctl");
    let from_plugin = creds.as_ref().and_then(|c| c.cred.token.as_ref()).map(|t| format!("Bearer {t}"));
    if let Some(a) = api.authorization().or(from_plugin) {
        b = b.header("authorization", a);
    }
    let req = b
        .body(body.map(|v| v.to_string()).unwrap_or_default())
        .map_err(|e| Error::failed(format!("API request: {e}")))?;
    let tls = match (&api.tls, creds.as_ref().and_then(|c| c.tls.clone())) {
        (Some((_, name)), Some(cfg)) => Some((cfg, name.clone())),
        (tls, _) => tls.clone(),
    };
    let io: Box<dyn Io> = match tls {
        None => Box::new(stream),
        Some((cfg, name)) => Box::new(
            tokio_rustls::TlsConnector::from(cfg).connect(name, stream).await.map_err(|e| handshake_error(api, &e))?,
        ),
    };
    Ok((io, req))
}

/// A 401 to an exec plugin's credential: run it again for the next request.
async fn refused(api: &ApiServer, creds: &Creds, status: u16, method: &str, path: &str) -> Result<()> {
    if let (401, Some(a), Some(c)) = (status, &api.exec, creds) {
        a.refused(c).await.map_err(|e| {
            Error::failed(format!(
                "API server {}: {method} {path}: 401 Unauthorized to the exec plugin's credential, and running it again failed: {e}",
                api.url()
            ))
            .caused_by(e)
        })?;
    }
    Ok(())
}

/// [`request`] with the body's content type (a PATCH's: [`STRATEGIC_MERGE_PATCH`], [`MERGE_PATCH`]).
pub async fn request_as(
    api: &ApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
    t: Duration,
) -> Result<(u16, Value)> {
    let creds = credentials(api).await?;
    let work = async {
        let (io, req) = open(api, &creds, method, path, content_type, body).await?;
        exchange(io, req).await
    };
    let answer = tokio::time::timeout(t, work).await.map_err(|_| {
        Error::failed(format!(
            "API server {}: no answer to {method} {path} within {}",
            api.url(),
            crate::core::time::format_duration(t)
        ))
    })??;
    refused(api, &creds, answer.0, method, path).await?;
    Ok(answer)
}

/// How a watch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEnd {
    /// The server closed the stream (its timeout), or `on_event` asked to stop.
    Closed,
    /// The server refused the watch: its status and body (410 Gone: the
    /// resourceVersion is too old; list again).
    Refused(u16, Value),
}

/// A watch (`path` with `watch=1`): each event (`{"type": …, "object": …}`,
/// one JSON object a line) handed to `on_event` as it arrives, until the
/// server ends the stream or `on_event` returns false. Connecting and the
/// answer's head must come within `t`; the stream itself has no time limit
/// (the caller bounds it with `timeoutSeconds` in `path`, as client-go's
/// reflector does, and cancels it by dropping the future).
pub async fn watch(
    api: &ApiServer,
    path: &str,
    t: Duration,
    mut on_event: impl FnMut(Value) -> bool + Send,
) -> Result<WatchEnd> {
    use hyper::body::Body as _;
    let creds = credentials(api).await?;
    let head = async {
        let (io, req) = open(api, &creds, "GET", path, JSON, None).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| Error::failed(format!("API server: {e}")))?;
        let driven = async move {
            let r = sender.send_request(req).await;
            (r, sender)
        };
        let mut conn = Box::pin(conn);
        // The connection is driven while the request goes out and its head comes back.
        let (resp, sender) = tokio::select! {
            r = driven => r,
            c = &mut conn => return Err(Error::failed(format!("API server: connection ended: {c:?}"))),
        };
        let resp = resp.map_err(|e| Error::failed(format!("API server: {e}")))?;
        Ok::<_, Error>((resp, sender, conn))
    };
    let (resp, sender, mut conn) = tokio::time::timeout(t, head).await.map_err(|_| {
        Error::failed(format!(
            "API server {}: no answer to GET {path} within {}",
            api.url(),
            crate::core::time::format_duration(t)
        ))
    })??;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let read = async {
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.map_err(|e| Error::failed(format!("API server: {e}")))?;
            let Ok(d) = frame.into_data() else { continue };
            buf.extend_from_slice(&d);
            if status != 200 {
                if buf.len() > 1 << 20 {
                    break;
                }
                continue;
            }
            while let Some(eol) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=eol).collect();
                let Ok(v) = serde_json::from_slice::<Value>(&line) else { continue };
                if !on_event(v) {
                    return Ok(WatchEnd::Closed);
                }
            }
            if buf.len() > 16 << 20 {
                return Err(Error::failed("API server: a watch event larger than 16 MiB"));
            }
        }
        if status != 200 {
            return Ok(WatchEnd::Refused(status, serde_json::from_slice(&buf).unwrap_or(Value::Null)));
        }
        Ok(WatchEnd::Closed)
    };
    tokio::pin!(read);
    let mut conn_done = false;
    // The connection is driven until the body is read (it may end first: what it received stays readable).
    let r = loop {
        tokio::select! {
            r = &mut read => break r,
            c = &mut conn, if !conn_done => match c {
                Ok(()) => conn_done = true,
                Err(e) => break Err(Error::failed(format!("API server: {e}"))),
            },
        }
    };
    drop(sender);
    refused(api, &creds, status, "GET", path).await?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_plain_http_no_credentials_are_read_or_sent_as_clientcmd_decides() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kubeconfig");
        // The token file does not exist: client-go never reads it over http, nor does dpctl.
        let text = "clusters: [{name: c, cluster: {server: 'http://h:1'}}]\nusers: [{name: u, user: {token: inline, tokenFile: gone}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(&kc, text).unwrap();
        let api = load_kubeconfig(&kc).unwrap();
        assert_eq!((api.authorization(), api.url()), (None, "http://h:1".to_string()));
        std::fs::write(&kc, text.replace("http://", "https://")).unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("tokenFile") && e.contains("gone"), "over https the token file is read: {e}");
    }

    #[test]
    fn a_token_file_wins_over_the_inline_token_and_is_read_again_at_each_request() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kubeconfig");
        let text = "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\nusers: [{name: u, user: {token: inline, tokenFile: tok}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(&kc, text).unwrap();
        std::fs::write(d.path().join("tok"), "from-file\n").unwrap();
        let api = load_kubeconfig(&kc).unwrap();
        assert_eq!(api.token.as_deref(), Some("from-file"));
        assert_eq!(api.authorization().as_deref(), Some("Bearer from-file"));
        std::fs::write(d.path().join("tok"), "rotated").unwrap();
        assert_eq!(api.authorization().as_deref(), Some("Bearer rotated"), "a rotated token is sent");
        std::fs::remove_file(d.path().join("tok")).unwrap();
        assert_eq!(api.authorization().as_deref(), Some("Bearer from-file"), "the last one read stays");
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("tokenFile") && e.contains("tok") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn username_and_password_are_basic_authentication() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kubeconfig");
        let text = "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\nusers: [{name: u, user: {username: a, password: b}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(&kc, text).unwrap();
        assert_eq!(load_kubeconfig(&kc).unwrap().authorization().as_deref(), Some("Basic YTpi"));
        std::fs::write(&kc, text.replace("https://", "http://")).unwrap();
        assert_eq!(load_kubeconfig(&kc).unwrap().authorization(), None, "never over plain http, as clientcmd");
    }

    #[test]
    fn a_missing_ca_file_or_key_is_one_line_naming_the_field() {
        let d = tempfile::tempdir().unwrap();
        let kc = d.path().join("kubeconfig");
        std::fs::write(&kc, "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: ca.crt}}]\n")
            .unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("certificate-authority") && e.contains("ca.crt") && !e.contains('\n'), "{e}");
        std::fs::write(d.path().join("ca.crt"), "not pem").unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("holds no PEM certificate"), "{e}");
    }

    #[test]
    fn client_certificates_load_from_files_and_inline_data_rsa_and_ec_keys() {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let d = tempfile::tempdir().unwrap();
        let (rsa_crt, rsa_key) = (include_str!("testdata/client-rsa.crt"), include_str!("testdata/client-rsa.key"));
        let (ec_crt, ec_key) = (include_str!("testdata/client-ec.crt"), include_str!("testdata/client-ec.key"));
        std::fs::write(d.path().join("ca.crt"), ec_crt).unwrap();
        std::fs::write(d.path().join("client.crt"), rsa_crt).unwrap();
        std::fs::write(d.path().join("client.key"), rsa_key).unwrap();
        let kc = d.path().join("kubeconfig");
        let cluster = "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', certificate-authority: ca.crt}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        // Files (relative to the kubeconfig), an RSA key as kubeadm and kind write it.
        std::fs::write(
            &kc,
            format!(
                "{cluster}users: [{{name: u, user: {{client-certificate: client.crt, client-key: client.key}}}}]\n"
            ),
        )
        .unwrap();
        let api = load_kubeconfig(&kc).unwrap();
        assert!(api.tls.as_ref().unwrap().0.client_auth_cert_resolver.has_certs(), "the client certificate is offered");
        assert_eq!((api.token.as_deref(), api.url().as_str()), (None, "https://127.0.0.1:6443"));
        // Inline data, an EC (SEC1) key.
        let inline = format!(
            "{cluster}users: [{{name: u, user: {{client-certificate-data: {}, client-key-data: {}}}}}]\n",
            b64(ec_crt.as_bytes()),
            b64(ec_key.as_bytes())
        );
        std::fs::write(&kc, inline).unwrap();
        assert!(load_kubeconfig(&kc).unwrap().tls.unwrap().0.client_auth_cert_resolver.has_certs());
        // A certificate whose key is another's is refused, naming both fields.
        let mixed = format!(
            "{cluster}users: [{{name: u, user: {{client-certificate-data: {}, client-key-data: {}}}}}]\n",
            b64(ec_crt.as_bytes()),
            b64(rsa_key.as_bytes())
        );
        std::fs::write(&kc, mixed).unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("client-certificate and client-key") && !e.contains('\n'), "{e}");
        // A key file that holds a certificate.
        std::fs::write(d.path().join("client.key"), rsa_crt).unwrap();
        std::fs::write(
            &kc,
            format!(
                "{cluster}users: [{{name: u, user: {{client-certificate: client.crt, client-key: client.key}}}}]\n"
            ),
        )
        .unwrap();
        let e = load_kubeconfig(&kc).unwrap_err().to_string();
        assert!(e.contains("client-key holds no PEM private key"), "{e}");
    }
}
