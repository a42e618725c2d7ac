//! How the local API server listens: on loopback, plain HTTP/1.1 or, with
//! `mock-kubelet --api-server-tls`, HTTPS with its own CA ([`super::tls`]);
//! and the kubeconfig it writes for drivers (`<root>/kubeconfig`, 0600,
//! written atomically and never over a file it did not write) with a fresh
//! bearer token and, over TLS, the CA as `certificate-authority-data`.

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

/// Where the API server listens and the kubeconfig it wrote.
#[derive(Debug, Clone)]
pub struct Served {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`, or `https://` with `--api-server-tls`.
    pub url: String,
    /// The kubeconfig written for drivers.
    pub kubeconfig: PathBuf,
}

/// The first line of every kubeconfig the mock kubelet writes: what marks
/// the file as its own (it never writes over a file without it).
const KUBECONFIG_MARK: &str = "# Written by dpctl mock-kubelet for its local API server; rewritten at each start.";

/// The kubeconfig text for `addr` (a bearer token, as client-go and the
/// kubeletplugin helper read it: `users[].user.token`): plain http, or https
/// with the CA (PEM) that signed the server's certificate as
/// `certificate-authority-data`.
pub fn kubeconfig(addr: SocketAddr, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let cluster = match ca_pem {
        None => format!("server: http://{addr}"),
        Some(pem) => format!(
            "server: https://{addr}\n    certificate-authority-data: {}",
            base64::engine::general_purpose::STANDARD.encode(pem)
        ),
    };
    format!(
        "{KUBECONFIG_MARK}\napiVersion: v1\nkind: Config\nclusters:\n- name: dpctl\n  cluster:\n    {cluster}\nusers:\n- name: dpctl\n  user:\n    token: {token}\ncontexts:\n- name: dpctl\n  context:\n    cluster: dpctl\n    user: dpctl\ncurrent-context: dpctl\n"
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
fn kubeconfig_is_ours(path: &Path) -> std::result::Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect it: {e}")),
    };
    if !meta.file_type().is_file() {
        return Err("it is not a regular file (a symlink, directory or other)".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(format!("it belongs to another user (uid {})", meta.uid()));
    }
    let mut head = String::new();
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    use std::io::{BufRead, Read};
    std::io::BufReader::new(f.take(4096)).read_line(&mut head).map_err(|e| format!("cannot read it: {e}"))?;
    if head.trim_end() == KUBECONFIG_MARK {
        Ok(())
    } else {
        Err("it is not one the mock kubelet wrote".into())
    }
}

/// Listen on `addr` (loopback), write the kubeconfig under `root`, and serve
/// until `stop`; `/version` answers Kubernetes 1.`minor`. With `tls`, serve
/// HTTPS with a fresh CA of our own ([`super::tls`]) written into the kubeconfig.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    addr: SocketAddr,
    root: &Path,
    node: String,
    minor: u32,
    store: Arc<Store>,
    stop: CancellationToken,
    tracker: TaskTracker,
    tls: bool,
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
    })?;
    let token =
        new_token().map_err(|e| Error::failed(format!("API server: cannot read /dev/urandom for a token: {e}")))?;
    let tls = match tls {
        false => None,
        true => Some(super::tls::local_tls(addr.ip()).map_err(|e| Error::failed(format!("--api-server-tls: {e}")))?),
    };
    let ca = tls.as_ref().map(|t| t.ca_pem.as_str());
    crate::core::files::write_atomic(&kubeconfig, self::kubeconfig(addr, &token, ca).as_bytes())
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
    use super::*;
    use crate::client::kube::config::{parse_kubeconfig, Pem};

    #[test]
    fn the_kubeconfig_names_an_https_server_and_its_ca_as_client_go_reads_it_or_plain_http() {
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let tls = parse_kubeconfig(&kubeconfig(addr, "t0k", Some(pem)), Path::new("/"), None).unwrap();
        assert!(tls.https);
        assert_eq!(tls.authority, "127.0.0.1:6443");
        assert_eq!(tls.ca, Some(Pem::Data(pem.as_bytes().to_vec())));
        assert_eq!(tls.token.as_deref(), Some("t0k"));
        let plain = parse_kubeconfig(&kubeconfig(addr, "t0k", None), Path::new("/"), None).unwrap();
        assert!(!plain.https && plain.ca.is_none());
        assert!(kubeconfig(addr, "t0k", None).starts_with(KUBECONFIG_MARK));
    }
}
