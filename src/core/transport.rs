//! Unix-socket transport: dial with a timeout (authority `localhost`, as the
//! kubelet sends), listen safely (never replace anything that is not a stale
//! socket), and serve gRPC through the [`AuthorityFix`] shim.

use crate::core::authority::AuthorityFix;
use crate::core::{Error, Result};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::StreamExt;
use tonic::transport::{Channel, Endpoint, Uri};

/// The default dial and call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// What is at a path where a socket is expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// Nothing there.
    Missing,
    /// A Unix socket.
    Socket,
    /// A symbolic link (not followed).
    Symlink,
    /// A directory.
    Directory,
    /// A regular file.
    File,
    /// A FIFO, device or other special file.
    Other,
}

/// Look at `path` without following a symlink.
pub fn path_kind(path: &Path) -> std::io::Result<PathKind> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(PathKind::Missing),
        Err(e) => Err(e),
        Ok(m) => {
            let t = m.file_type();
            Ok(if t.is_symlink() {
                PathKind::Symlink
            } else if t.is_socket() {
                PathKind::Socket
            } else if t.is_dir() {
                PathKind::Directory
            } else if t.is_file() {
                PathKind::File
            } else {
                PathKind::Other
            })
        }
    }
}

/// Every socket under `dir`, recursively (at most 8 levels), skipping names
/// that start with `.` — the plugin watcher's rules.
pub fn find_sockets(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            match path_kind(&p) {
                Ok(PathKind::Socket) => out.push(p),
                Ok(PathKind::Directory) if depth < 8 => walk(&p, out, depth + 1),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out, 0);
    out.sort();
    out
}

/// A temporary directory removed (with everything in it) on drop:
/// `<tmp>/dpctl-<tag>-<random>`, created new with mode 0700, so nobody can
/// have made it first.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Create `<tmp>/dpctl-<tag>-<random>`.
    pub fn new(tag: &str) -> Result<Self> {
        let tmp = std::env::temp_dir();
        tempfile::Builder::new()
            .prefix(&format!("dpctl-{tag}-"))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&tmp)
            .map(TempDir)
            .map_err(|e| Error::io(&tmp, "cannot create a temp directory", &e))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// The longest socket path `sockaddr_un.sun_path` holds (108 bytes with the NUL).
pub const SUN_PATH_MAX: usize = 107;

/// A socket path the kernel accepts, and the directory handle that must stay
/// open while it is used. Paths over [`SUN_PATH_MAX`] bytes (easy under
/// `--root /host`) are reached as `/proc/self/fd/N/NAME`, where N is an
/// `O_PATH` handle on the socket's directory.
#[derive(Debug)]
pub struct SockPath {
    path: PathBuf,
    _dir: Option<std::fs::File>,
}

impl SockPath {
    /// The path to hand to connect(2) or bind(2).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(target_os = "linux")]
const O_PATH: i32 = libc::O_PATH;
#[cfg(not(target_os = "linux"))]
const O_PATH: i32 = 0;

/// A connectable form of `path`: itself when short enough, else a
/// `/proc/self/fd/N/NAME` path through a handle on its directory.
pub fn sock_path(path: &Path) -> std::io::Result<SockPath> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    if path.as_os_str().as_bytes().len() <= SUN_PATH_MAX {
        return Ok(SockPath { path: path.to_path_buf(), _dir: None });
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(ErrorKind::InvalidInput, "socket path has no file name"));
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let handle = std::fs::OpenOptions::new().read(true).custom_flags(O_PATH).open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd())).join(name);
    if short.as_os_str().as_bytes().len() > SUN_PATH_MAX {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("socket file name is too long ({} bytes; at most about 90 fit)", name.len()),
        ));
    }
    Ok(SockPath { path: short, _dir: Some(handle) })
}

/// `UnixStream::connect` for paths of any length.
pub async fn connect_unix(path: &Path) -> std::io::Result<UnixStream> {
    let p = sock_path(path)?;
    UnixStream::connect(p.path()).await
}

/// `UnixListener::bind` for paths of any length.
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    let p = sock_path(path)?;
    UnixListener::bind(p.path())
}

/// What connecting to a socket path found, without sending a byte.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "result", content = "detail")]
pub enum Connect {
    /// A listener accepted the connection.
    Answered,
    /// Nothing listens: a stale socket (ECONNREFUSED).
    Refused,
    /// We may not connect (EACCES/EPERM): nothing is known about the listener.
    PermissionDenied,
    /// The connect did not finish in time (a full backlog or a stopped process).
    Timeout,
    /// Nothing at the path.
    Missing,
    /// Something other than a socket at the path.
    NotASocket(String),
    /// Any other error.
    Failed(String),
}

impl Connect {
    /// Whether the result says nothing about the listener (we could not test it).
    pub fn untested(&self) -> bool {
        matches!(self, Connect::PermissionDenied | Connect::Failed(_))
    }
}

/// Classify an I/O error from connect(2) on `path`.
pub fn classify_connect(path: &Path, e: &std::io::Error) -> Connect {
    match (e.kind(), path_kind(path).ok()) {
        (_, Some(PathKind::Missing)) => Connect::Missing,
        (ErrorKind::PermissionDenied, _) => Connect::PermissionDenied,
        (_, Some(k @ (PathKind::File | PathKind::Directory | PathKind::Other))) => {
            Connect::NotASocket(format!("{k:?}").to_lowercase())
        }
        (ErrorKind::ConnectionRefused, _) => Connect::Refused,
        // A full listen backlog: the listener is not accepting.
        (ErrorKind::WouldBlock, _) => Connect::Timeout,
        _ if e.raw_os_error() == Some(1) => Connect::PermissionDenied,
        _ => Connect::Failed(e.to_string()),
    }
}

/// Try to connect to `path` and say what happened; the stream on success.
pub async fn try_connect(path: &Path, timeout: Duration) -> (Connect, Option<UnixStream>) {
    match tokio::time::timeout(timeout, connect_unix(path)).await {
        Err(_) => (Connect::Timeout, None),
        Ok(Ok(s)) => (Connect::Answered, Some(s)),
        Ok(Err(e)) => (classify_connect(path, &e), None),
    }
}

/// What fixes a missing plugin socket.
pub const PLUGIN_SOCKET_FIX: &str = "check the path, --plugin-dir or DPCTL_PLUGIN_DIR";

/// Connect a raw Unix stream to `path`, with errors that say what is wrong.
pub async fn connect_raw(path: &Path, timeout: Duration) -> Result<UnixStream> {
    connect_raw_hint(path, timeout, PLUGIN_SOCKET_FIX).await
}

/// [`connect_raw`], where a missing socket's message names `fix` (the flag
/// or variable that points dpctl at the right path).
pub async fn connect_raw_hint(path: &Path, timeout: Duration, fix: &str) -> Result<UnixStream> {
    let shown = path.display();
    match tokio::time::timeout(timeout, connect_unix(path)).await {
        Err(_) => Err(Error::failed(format!(
            "{shown}: connect timed out after {}; the listener is not accepting (raise --timeout to wait longer)",
            crate::core::time::format_duration(timeout)
        ))),
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(connect_error(path, &e, fix)),
    }
}

fn connect_error(path: &Path, e: &std::io::Error, fix: &str) -> Error {
    let shown = path.display();
    let kind = path_kind(path).ok();
    Error::failed(match (e.kind(), kind) {
        (_, Some(PathKind::Missing)) => format!(
            "{shown}: no such socket; is the plugin or kubelet running? ({fix})"
        ),
        (_, Some(PathKind::File)) => format!("{shown} is a regular file, not a socket; point dpctl at the socket the server listens on"),
        (_, Some(PathKind::Directory)) => format!("{shown} is a directory, not a socket; name the socket file inside it"),
        (ErrorKind::ConnectionRefused, _) => format!(
            "{shown}: connection refused: a stale socket with nothing listening (the server that created it has exited; restart it)"
        ),
        (ErrorKind::PermissionDenied, _) => format!("{shown}: permission denied; run as a user that may open the socket (often root)"),
        _ => format!("{shown}: cannot connect: {e}"),
    })
}

/// Dial a gRPC server on a Unix socket. The first connection is made here
/// (so a missing or stale socket is reported precisely); later reconnects
/// dial the same path. `:authority` is `localhost`, as the kubelet sends.
pub async fn dial(path: &Path, timeout: Duration) -> Result<Channel> {
    dial_hint(path, timeout, PLUGIN_SOCKET_FIX).await
}

/// [`dial`], where a missing socket's message names `fix`.
pub async fn dial_hint(path: &Path, timeout: Duration, fix: &str) -> Result<Channel> {
    let first = connect_raw_hint(path, timeout, fix).await?;
    let first = Arc::new(Mutex::new(Some(first)));
    let target: PathBuf = path.to_path_buf();
    let connector = tower::service_fn(move |_: Uri| {
        let first = first.lock().ok().and_then(|mut g| g.take());
        let target = target.clone();
        async move {
            let stream = match first {
                Some(s) => s,
                None => connect_unix(&target).await?,
            };
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    let endpoint = Endpoint::from_static("http://localhost").connect_timeout(timeout);
    match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
        Err(_) => Err(Error::failed(format!(
            "{}: HTTP/2 handshake timed out after {}; is this a gRPC socket?",
            path.display(),
            crate::core::time::format_duration(timeout)
        ))),
        Ok(Err(e)) => Err(Error::failed(format!("{}: gRPC connection failed: {}", path.display(), error_chain(&e)))),
        Ok(Ok(ch)) => Ok(ch),
    }
}

/// A std error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// Run one unary call with a deadline; map a status or a timeout to [`Error`].
pub async fn call<T>(
    target: &Path,
    method: &'static str,
    timeout: Duration,
    fut: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    let start = std::time::Instant::now();
    let r = match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(Error::timeout(target, method, timeout)),
        // tonic's client enforces the request's grpc-timeout itself.
        Ok(Err(status)) if crate::core::status::is_local_deadline(&status) => {
            Err(Error::timeout(target, method, timeout))
        }
        Ok(Err(status)) => Err(status_error(target, method, status)),
        Ok(Ok(resp)) => Ok(resp.into_inner()),
    };
    if crate::core::verbose::on() {
        let code = match &r {
            Ok(_) => "OK".to_string(),
            Err(Error::Rpc { code, message, .. }) => format!("{code:?}: {message}"),
            Err(_) => "DeadlineExceeded".to_string(),
        };
        crate::core::verbose::outcome(target, method, &code, start.elapsed());
    }
    r
}

/// A request carrying a `grpc-timeout`, as Go clients send with a context deadline.
pub fn request<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(timeout);
    r
}

/// Map an error status from `target` to [`Error::Rpc`].
/// Transport failures get grpc-go's code ([`crate::core::status::grpc_go_status`]).
pub fn status_error(target: &Path, method: &'static str, status: tonic::Status) -> Error {
    let status = crate::core::status::grpc_go_status(status);
    let mut message = status.message().to_string();
    if message.is_empty() {
        if let Some(src) = std::error::Error::source(&status) {
            message = error_chain(src);
        }
    }
    Error::Rpc { target: target.display().to_string(), method, code: status.code(), message }
}

/// Removes a socket file on drop — but only the one this process created
/// (same device, inode and change time: inode numbers are reused at once
/// when a socket is deleted and another created), never a file that
/// replaced it since.
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    ident: FileIdent,
}

/// What tells one file (a socket) from another at the same path: its
/// device and inode, and its birth time — inode numbers are reused at once
/// when a socket is deleted and another created. Where the filesystem keeps
/// no birth time, the change time stands in (a chmod moves it too: a plugin
/// that sets its socket's mode after listen() would look re-created).
pub type FileIdent = (u64, u64, i64, u32);

/// The [`FileIdent`] of `m`.
pub fn file_ident(m: &std::fs::Metadata) -> FileIdent {
    let born = m.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    match born {
        Some(d) => (m.dev(), m.ino(), i64::try_from(d.as_secs()).unwrap_or(i64::MAX), d.subsec_nanos()),
        None => (m.dev(), m.ino(), m.ctime(), u32::try_from(m.ctime_nsec()).unwrap_or(0)),
    }
}

impl SocketGuard {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still holds the socket this guard created.
    pub fn still_ours(&self) -> bool {
        std::fs::symlink_metadata(&self.path)
            .map(|m| m.file_type().is_socket() && file_ident(&m) == self.ident)
            .unwrap_or(false)
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if self.still_ours() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listen on a Unix socket at `path`, safely: a stale socket (nobody answers)
/// is replaced; a live socket, a regular file, a directory, a symlink or
/// anything else is never removed. The socket gets mode 0660.
pub async fn listen(path: &Path) -> Result<(UnixListener, SocketGuard)> {
    let shown = path.display();
    let kind = path_kind(path).map_err(|e| Error::io(path, "cannot inspect", &e))?;
    match kind {
        PathKind::Missing => {}
        PathKind::Socket => match connect_unix(path).await {
            Ok(_) => {
                return Err(Error::failed(format!(
                    "{shown}: a live server is already listening there; stop it or choose another socket path"
                )))
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(|e| Error::io(path, "cannot remove stale socket", &e))?;
            }
            Err(e) => return Err(Error::failed(format!("{shown}: cannot tell whether the existing socket is stale: {e}; remove it by hand if it is"))),
        },
        PathKind::Symlink => {
            return Err(Error::failed(format!("{shown} is a symlink; refusing to replace it — remove it or choose another socket path")))
        }
        PathKind::File => {
            return Err(Error::failed(format!("{shown} is a regular file, not a socket; refusing to overwrite it — move it away or choose another socket path")))
        }
        PathKind::Directory => {
            return Err(Error::failed(format!("{shown} is a directory; choose a socket path that is not taken")))
        }
        PathKind::Other => {
            return Err(Error::failed(format!("{shown} is a special file; refusing to replace it — choose another socket path")))
        }
    }
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            return Err(Error::failed(format!(
                "{}: directory does not exist; create it or choose another path",
                parent.display()
            )));
        }
    }
    let listener = bind_unix(path).map_err(|e| Error::io(path, "cannot listen", &e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| Error::io(path, "cannot set socket mode 0660", &e))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, "cannot inspect new socket", &e))?;
    Ok((listener, SocketGuard { path: path.to_path_buf(), ident: file_ident(&meta) }))
}

/// How long a server stopped by its owner may finish its open calls before
/// they are dropped.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serve `svc` as a task of `tasks` until the group is cancelled; open calls
/// then get [`STOP_GRACE`] to finish before the server is dropped.
pub fn serve_owned<S>(tasks: &crate::core::task::Tasks, listener: UnixListener, svc: S)
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let stop = tasks.token().clone();
    tasks.spawn_joined(async move {
        let grace = async {
            stop.cancelled().await;
            tokio::time::sleep(STOP_GRACE).await;
        };
        tokio::select! {
            _ = serve(listener, svc, stop.cancelled()) => {}
            _ = grace => {}
        }
    });
}

/// Serve one gRPC service on `listener` until `shutdown` resolves. Every
/// accepted connection goes through [`AuthorityFix`], so clients that put the
/// socket path in `:authority` are served.
pub async fn serve<S>(listener: UnixListener, svc: S, shutdown: impl Future<Output = ()>) -> Result<()>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener).map(|r| r.map(AuthorityFix::new));
    server()
        .serve_with_incoming_shutdown(svc, incoming, shutdown)
        .await
        .map_err(|e| Error::failed(format!("gRPC server failed: {}", error_chain(&e))))
}

/// A server builder with the settings every dpctl server uses.
pub fn server() -> tonic::transport::Server {
    tonic::transport::Server::builder().tcp_nodelay(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_guard_never_removes_the_socket_that_replaced_its_own() {
        // Deleting a socket and binding a new one at once often reuses the
        // inode number: the old guard must still tell the new socket apart.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        for _ in 0..20 {
            let (l1, old) = listen(&p).await.unwrap();
            // The server stops (its inode is free), then its socket is deleted.
            drop(l1);
            std::fs::remove_file(&p).unwrap();
            let (l2, new) = listen(&p).await.unwrap();
            assert!(!old.still_ours() && new.still_ours());
            drop(old);
            assert!(p.exists(), "the old guard removed the new socket");
            drop((l2, new));
            assert!(!p.exists(), "the new guard removes its own socket");
        }
    }

    #[tokio::test]
    async fn listen_refuses_what_is_not_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file.sock");
        std::fs::write(&file, b"precious").unwrap();
        let err = listen(&file).await.unwrap_err().to_string();
        assert!(err.contains("regular file"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), b"precious");

        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(listen(&link).await.unwrap_err().to_string().contains("symlink"));
        assert!(link.exists());

        let sub = dir.path().join("dir.sock");
        std::fs::create_dir(&sub).unwrap();
        assert!(listen(&sub).await.unwrap_err().to_string().contains("directory"));

        let live = dir.path().join("live.sock");
        let (_l, _g) = listen(&live).await.unwrap();
        let mode = std::fs::metadata(&live).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o660, 0, "mode {mode:o} is wider than 0660");
        assert!(listen(&live).await.unwrap_err().to_string().contains("live server"));

        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        assert_eq!(path_kind(&stale).unwrap(), PathKind::Socket);
        let (_l2, g2) = listen(&stale).await.unwrap();
        assert!(g2.still_ours());
        drop(g2);
        assert_eq!(path_kind(&stale).unwrap(), PathKind::Missing);
    }

    #[tokio::test]
    async fn guard_leaves_a_replaced_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.sock");
        let (l, g) = listen(&p).await.unwrap();
        drop(l);
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"someone else's").unwrap();
        drop(g);
        assert_eq!(std::fs::read(&p).unwrap(), b"someone else's");
    }

    #[tokio::test]
    async fn dial_errors_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(1);
        let missing = dial(&dir.path().join("nope.sock"), t).await.unwrap_err().to_string();
        assert!(missing.contains("no such socket"), "{missing}");
        let f = dir.path().join("f");
        std::fs::write(&f, b"").unwrap();
        assert!(dial(&f, t).await.unwrap_err().to_string().contains("regular file"));
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        assert!(dial(&stale, t).await.unwrap_err().to_string().contains("stale socket"));
    }

    /// A raw HTTP/2 peer on `path`: each request is either held unanswered
    /// (`answer` None) or answered trailers-only with grpc-status `answer`.
    async fn raw_peer(path: &Path, answer: Option<(u32, &'static str)>) -> tokio::task::JoinHandle<()> {
        let (l, g) = listen(path).await.unwrap();
        tokio::spawn(async move {
            let _g = g;
            let (io, _) = l.accept().await.unwrap();
            let mut conn = h2::server::handshake(io).await.unwrap();
            let mut held = Vec::new();
            while let Some(Ok((_req, mut respond))) = conn.accept().await {
                match answer {
                    None => held.push(respond),
                    Some((code, msg)) => {
                        let resp = http::Response::builder()
                            .header("content-type", "application/grpc")
                            .header("grpc-status", code.to_string())
                            .header("grpc-message", msg)
                            .body(())
                            .unwrap();
                        respond.send_response(resp, true).unwrap();
                    }
                }
            }
        })
    }

    #[tokio::test]
    async fn deadline_is_told_from_a_peer_cancelled_by_source_not_text() {
        use crate::api::deviceplugin::{device_plugin_client::DevicePluginClient, Empty};
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_millis(200);

        // tonic's own grpc-timeout fires first (the outer wait is longer): a timeout
        let hang = dir.path().join("hang.sock");
        let peer = raw_peer(&hang, None).await;
        let mut c = DevicePluginClient::new(dial(&hang, Duration::from_secs(2)).await.unwrap());
        let fut = c.get_device_plugin_options(request(Empty {}, t));
        let e = call(&hang, "GetDevicePluginOptions", Duration::from_secs(30), fut).await.unwrap_err();
        assert!(e.to_string().contains("GetDevicePluginOptions timed out after"), "{e}");
        peer.abort();

        // the peer itself says CANCELLED "Timeout expired": its status, not our deadline
        let says = dir.path().join("says.sock");
        let peer = raw_peer(&says, Some((1, "Timeout expired"))).await;
        let mut c = DevicePluginClient::new(dial(&says, Duration::from_secs(2)).await.unwrap());
        let fut = c.get_device_plugin_options(request(Empty {}, Duration::from_secs(30)));
        match call(&says, "GetDevicePluginOptions", Duration::from_secs(30), fut).await.unwrap_err() {
            Error::Rpc { code, message, .. } => {
                assert_eq!(code, tonic::Code::Cancelled);
                assert_eq!(message, "Timeout expired");
            }
            e => panic!("expected the peer's status, got {e}"),
        }
        peer.abort();
    }

    #[tokio::test]
    async fn sockets_over_108_bytes_listen_and_connect() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a".repeat(60)).join("b".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let p = deep.join("plugin.sock");
        assert!(p.as_os_str().len() > 108);
        assert!(std::os::unix::net::UnixStream::connect(&p).is_err(), "the plain call fails on long paths");
        let (l, g) = listen(&p).await.unwrap();
        assert_eq!(path_kind(&p).unwrap(), PathKind::Socket, "the socket is at the long path itself");
        let (c, s) = try_connect(&p, Duration::from_secs(1)).await;
        assert_eq!(c, Connect::Answered);
        drop(s);
        drop(l);
        assert_eq!(try_connect(&p, Duration::from_secs(1)).await.0, Connect::Refused);
        drop(g);
        assert_eq!(try_connect(&p, Duration::from_secs(1)).await.0, Connect::Missing);
        std::fs::write(&p, b"").unwrap();
        assert_eq!(try_connect(&p, Duration::from_secs(1)).await.0, Connect::NotASocket("file".into()));
    }
}
