//! One error type for the whole tool. Every error that reaches the user is
//! one line that names the socket or file involved and what to do about it.

use std::fmt;
use std::path::Path;
use std::time::Duration;

/// Result with dpctl's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, classified by exit code.
#[derive(Debug)]
pub enum Error {
    /// Bad flags, values, files or manifests given by the user (exit 2).
    Usage(String),
    /// A gRPC call returned an error status (exit 1).
    Rpc {
        /// The socket the call went to.
        target: String,
        /// The RPC method name, e.g. `Allocate`.
        method: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// The peer's status message, verbatim.
        message: String,
    },
    /// Any other failure: unreachable socket, timeout, I/O, a failed check (exit 1).
    Failed(String),
    /// Stdout was closed by its reader (`dpctl watch … | head`): stop quietly (exit 0).
    BrokenPipe,
    /// Exit with this code and print nothing more (the output already said it, e.g. `doctor --npd`).
    Silent(i32),
    /// An error and the typed error that caused it (a broken rule, a refused
    /// registration): message and exit code are the first's, `source()` is the cause.
    Caused(Box<Error>, Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// A usage error (exit 2).
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// A runtime failure (exit 1).
    pub fn failed(msg: impl Into<String>) -> Self {
        Error::Failed(msg.into())
    }

    /// A usage error whose message is `cause`'s, which stays its source.
    pub fn usage_from(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::usage(cause.to_string()).caused_by(cause)
    }

    /// A runtime failure whose message is `cause`'s, which stays its source.
    pub fn failed_from(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::failed(cause.to_string()).caused_by(cause)
    }

    /// This error, caused by `cause` (kept for [`std::error::Error::source`]).
    pub fn caused_by(self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Caused(Box::new(self), Box::new(cause))
    }

    /// An I/O error on `path`, phrased for a human.
    pub fn io(path: &Path, what: &str, err: &std::io::Error) -> Self {
        let hint = match err.kind() {
            std::io::ErrorKind::NotFound => " (no such file or directory)",
            std::io::ErrorKind::PermissionDenied => {
                " (permission denied: run as a user that may access it, often root)"
            }
            _ => "",
        };
        Error::Failed(format!("{}: {what}: {err}{hint}", path.display()))
    }

    /// A call that did not finish in time.
    pub fn timeout(target: &Path, method: &str, after: Duration) -> Self {
        Error::Failed(format!(
            "{}: {method} timed out after {}; the peer accepted the connection but did not answer (raise --timeout to wait longer)",
            target.display(),
            crate::core::time::format_duration(after)
        ))
    }

    /// The process exit code for this error: 2 for usage errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::BrokenPipe => 0,
            Error::Silent(c) => *c,
            Error::Caused(e, _) => e.exit_code(),
            _ => 1,
        }
    }

    /// The gRPC code, when this error is an error status from a peer.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            Error::Caused(e, _) => e.code(),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Failed(m) => f.write_str(&one_line(m)),
            Error::BrokenPipe => f.write_str("stdout closed"),
            Error::Silent(c) => write!(f, "exit {c}"),
            Error::Rpc { target, method, code, message } => {
                write!(f, "{target}: {method} failed: {code:?}: {}", one_line(message))
            }
            Error::Caused(e, _) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Caused(_, cause) => Some(cause.as_ref()),
            _ => None,
        }
    }
}

/// Fold a message onto one line, escape what is not printable and cap every
/// long word (a value echoed in full by serde or by a peer).
fn one_line(s: &str) -> String {
    let folded = if s.contains('\n') {
        s.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
    } else {
        s.to_string()
    };
    crate::core::text::cap_words(&folded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_capped_escaped_line() {
        let e = Error::usage(format!("c.json: unknown variant `{}`, expected `a`\nat line 1", "B".repeat(2_000_000)));
        let s = e.to_string();
        assert!(s.len() < 200, "{s}");
        assert!(s.contains("B… (2000000 bytes)`, expected `a`; at line 1"), "{s}");
        let e = Error::Rpc {
            target: "p.sock".into(),
            method: "Allocate",
            code: tonic::Code::InvalidArgument,
            message: "id \u{0}".into(),
        };
        assert_eq!(e.to_string(), "p.sock: Allocate failed: InvalidArgument: id \\x00");
    }

    #[test]
    fn a_cause_is_kept_and_the_message_and_exit_code_stay() {
        use std::error::Error as _;
        let cause = std::io::Error::other("the typed cause");
        let e = Error::usage("invalid health \"x\"").caused_by(cause);
        assert_eq!(e.to_string(), "invalid health \"x\"");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("the typed cause"));
        let e = Error::failed_from(std::io::Error::other("line\nbreak"));
        assert_eq!((e.to_string().as_str(), e.exit_code()), ("line; break", 1));
        assert!(e.source().is_some() && Error::failed("x").source().is_none());
    }
}
