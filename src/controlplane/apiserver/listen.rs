//! How the local API server listens, on loopback, in one of two [`Mode`]s,
//! and the kubeconfig it writes for drivers (`<root>/kubeconfig`, 0600,
//! written atomically and never over a file it did not write):
//!
//! - [`Mode::Https`], the default: HTTPS with a CA of its own ([`super::tls`])
//!   written into the kubeconfig as `certificate-authority-data`, and a fresh
//!   bearer token every request must carry, as a real cluster serves drivers;
//! - [`Mode::Insecure`] (`--api-server-insecure`): plain HTTP that
//!   authenticates nobody, as kube-apiserver's insecure port did, and a
//!   kubeconfig without credentials.
//!
//! There is no third mode (plain HTTP that asks for a token): client-go reads
//! a kubeconfig user's credentials only when the transport is TLS
//! (`clientcmd/client_config.go`, "only try to read the auth information if
//! we are secure"), so every driver built on it would be refused.

use super::{respond, Ctx, Store};
use crate::core::{Error, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How the local API server serves its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// HTTPS with its own CA and a bearer token (the default).
    #[default]
    Https,
    /// Plain HTTP, no authentication (kube-apiserver's old insecure port).
    Insecure,
}

/// Where the API server listens and the kubeconfig it wrote.
#[derive(Debug, Clone)]
pub struct Served {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    /// `https://127.0.0.1:PORT`, or `http://` with `--api-server-insecure`.
    pub url: String,
    /// The kubeconfig written for drivers.
    pub kubeconfig: PathBuf,
}

/// The first line of every kubeconfig the mock kubelet writes: what marks
/// the file as its own (it never writes over a file without it).
const KUBECONFIG_MARK: &str = "# Written by dpctl mock-kubelet for its local API server; rewritten at each start.";

/// The kubeconfig text for `addr`: https with the CA (PEM) that signed the
/// server's certificate as `certificate-authority-data` and a bearer token
/// (`users[].user.token`, as client-go and the kubeletplugin helper read
/// them); or, with no CA, plain http and no credentials (client-go would not
/// send them over http). The cluster carries the extension that tells a
/// mock kubelet joining with it that this control plane binds no pod
/// ([`crate::protocol::DPCTL_PLANE_EXTENSION`]).
pub fn kubeconfig(addr: SocketAddr, secure: Option<(&str, &str)>) -> String {
    use base64::Engine as _;
    let (cluster, user) = match secure {
        None => (format!("server: http://{addr}"), "{}".to_string()),
        Some((ca_pem, token)) => (
            format!(
                "server: https://{addr}\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(ca_pem)
            ),
            format!("\n    token: {token}"),
        ),
    };
    format!(
        "{KUBECONFIG_MARK}\napiVersion: v1\nkind: Config\nclusters:\n- name: dpctl\n  cluster:\n    {cluster}\n    extensions:\n    - name: {ext}\n      extension: {{binds: none}}\nusers:\n- name: dpctl\n  user: {user}\ncontexts:\n- name: dpctl\n  context:\n    cluster: dpctl\n    user: dpctl\ncurrent-context: dpctl\n",
        ext = crate::protocol::DPCTL_PLANE_EXTENSION
    )
}

/// A fresh random bearer token: 32 bytes of the kernel's random source, in hex.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Whether `path` may be (re)written as the mock kubelet's kubeconfig: absent,
/// or a regular file (not a symlink) of this user that the mock kubelet wrote
/// (its first line is [`KUBECONFIG_MARK`]); `Err` names what is there instead.
fn kubeconfig_is_ours(path: &Path) -> std::result::Result<(), NotOurs> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(NotOurs::Inspect(e)),
    };
    if !meta.file_type().is_file() {
        return Err(NotOurs::NotFile);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(NotOurs::Owner(meta.uid()));
    }
    let mut head = String::new();
    let f = std::fs::File::open(path).map_err(NotOurs::Read)?;
    use std::io::{BufRead, Read};
    std::io::BufReader::new(f.take(4096)).read_line(&mut head).map_err(NotOurs::Read)?;
    if head.trim_end() == KUBECONFIG_MARK {
        Ok(())
    } else {
        Err(NotOurs::NotWritten)
    }
}

/// Why a file where the kubeconfig goes is not the mock kubelet's to rewrite.
#[derive(Debug)]
enum NotOurs {
    /// Its metadata cannot be read.
    Inspect(std::io::Error),
    /// Not a regular file.
    NotFile,
    /// Another user's (this uid).
    Owner(u32),
    /// It cannot be read.
    Read(std::io::Error),
    /// Its first line is not [`KUBECONFIG_MARK`].
    NotWritten,
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOurs::Inspect(e) => write!(f, "cannot inspect it: {e}"),
            NotOurs::NotFile => f.write_str("it is not a regular file (a symlink, directory or other)"),
            NotOurs::Owner(uid) => write!(f, "it belongs to another user (uid {uid})"),
            NotOurs::Read(e) => write!(f, "cannot read it: {e}"),
            NotOurs::NotWritten => f.write_str("it is not one the mock kubelet wrote"),
        }
    }
}

impl std::error::Error for NotOurs {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NotOurs::Inspect(e) | NotOurs::Read(e) => Some(e),
            _ => None,
        }
    }
}

/// Listen on `addr` (loopback), write the kubeconfig under `root`, and serve
/// until `stop`; `/version` answers Kubernetes 1.`minor`. In [`Mode::Https`],
/// serve HTTPS with a fresh CA of our own ([`super::tls`]) and a fresh token,
/// both written into the kubeconfig.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    addr: SocketAddr,
    root: &Path,
    node: String,
    minor: u32,
    store: Arc<Store>,
    stop: CancellationToken,
    tracker: TaskTracker,
    mode: Mode,
) -> Result<Served> {
    if !addr.ip().is_loopback() {
        return Err(Error::usage(format!(
            "--api-server {addr}: the mock API server listens on loopback only (127.0.0.1:PORT)"
        )));
    }
    let l = TcpListener::bind(addr)
        .await
        .map_err(|e| Error::failed(format!("--api-server {addr}: cannot listen: {e}; choose a free port")))?;
    let addr = l.local_addr().map_err(|e| Error::failed(format!("API server: {e}")))?;
    let kubeconfig = root.join("kubeconfig");
    kubeconfig_is_ours(&kubeconfig).map_err(|why| {
        Error::usage(format!(
            "{}: will not write the API server's kubeconfig over this file: {why}; move it away or choose another --kubelet-root",
            kubeconfig.display()
        ))
        .caused_by(why)
    })?;
    let (tls, token) = match mode {
        Mode::Insecure => (None, None),
        Mode::Https => {
            let token = new_token()
                .map_err(|e| Error::failed(format!("API server: cannot read /dev/urandom for a token: {e}")))?;
            let tls = super::tls::local_tls(addr.ip())
                .map_err(|e| Error::failed(format!("API server: cannot make its TLS certificate: {e}")).caused_by(e))?;
            (Some(tls), Some(token))
        }
    };
    let secure = tls.as_ref().zip(token.as_deref()).map(|(t, token)| (t.ca_pem.as_str(), token));
    crate::core::files::write_atomic(&kubeconfig, self::kubeconfig(addr, secure).as_bytes())
        .map_err(|e| Error::io(&kubeconfig, "cannot write the kubeconfig", &e))?;
    let ctx = Arc::new(Ctx { store, node, minor, token, tracker: tracker.clone(), stop: stop.clone() });
    let t2 = tracker.clone();
    let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config));
    let url = format!("{}://{addr}", if acceptor.is_some() { "https" } else { "http" });
    tracker.spawn(async move {
        loop {
            let conn = tokio::select! {
                c = l.accept() => c,
                _ = stop.cancelled() => return,
            };
            let Ok((sock, _)) = conn else { continue };
            let ctx = ctx.clone();
            let acceptor = acceptor.clone();
            t2.spawn(stop.clone().run_until_cancelled_owned(async move {
                match acceptor {
                    None => serve_connection(sock, ctx).await,
                    // A client that fails the handshake (a wrong CA on its side) is dropped.
                    Some(a) => {
                        if let Ok(Ok(s)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, a.accept(sock)).await {
                            serve_connection(s, ctx).await
                        }
                    }
                }
            }));
        }
    });
    Ok(Served { addr, url, kubeconfig })
}

/// Serve HTTP/1.1 requests on one connection (plain or TLS) until it closes.
async fn serve_connection<IO>(io: IO, ctx: Arc<Ctx>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| respond(req, ctx.clone()));
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(io), svc).await;
}

#[cfg(test)]
mod tests {

    /// The kubeconfig names the control plane as dpctl's (a cluster
    /// extension a kubelet joining with it reads), and a kubeconfig without
    /// the extension does not.
    #[test]
    fn the_kubeconfig_names_dpctls_control_plane() {
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let text = kubeconfig(addr, None);
        assert!(parse_kubeconfig(&text, Path::new("/"), None).unwrap().dpctl_plane, "{text}");
        let plain = text.replace(crate::protocol::DPCTL_PLANE_EXTENSION, "example.com/other");
        assert!(!parse_kubeconfig(&plain, Path::new("/"), None).unwrap().dpctl_plane);
    }
    use super::*;
    use crate::client::kube::config::{parse_kubeconfig, Pem};

    #[test]
    fn the_kubeconfig_names_an_https_server_its_ca_and_token_or_plain_http_without_credentials() {
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let tls = parse_kubeconfig(&kubeconfig(addr, Some((pem, "t0k"))), Path::new("/"), None).unwrap();
        assert!(tls.https);
        assert_eq!(tls.authority, "127.0.0.1:6443");
        assert_eq!(tls.ca, Some(Pem::Data(pem.as_bytes().to_vec())));
        assert_eq!(tls.token.as_deref(), Some("t0k"));
        let plain = parse_kubeconfig(&kubeconfig(addr, None), Path::new("/"), None).unwrap();
        assert!(!plain.https && plain.ca.is_none() && plain.token.is_none(), "{plain:?}");
        assert!(kubeconfig(addr, None).starts_with(KUBECONFIG_MARK));
    }
}
