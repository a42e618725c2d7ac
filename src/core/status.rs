//! What a Go client would have seen: transport failures mapped to the gRPC
//! status code grpc-go gives them.
//!
//! tonic reports a peer that dies mid-call as `Unknown: h2 protocol error:
//! error reading a body from connection`; a Go kubelet (grpc-go) sees
//! `Unavailable`. [`grpc_go_status`] is applied once, at the client-call edge
//! ([`crate::core::transport::call`], [`crate::core::transport::status_error`],
//! the record tap, the load generator), so every command and every trace
//! reports the code the kubelet would log.
//!
//! The rules, from grpc-go's `internal/transport` (`http2ErrConvTab`,
//! `ErrConnClosing`, `ConnectionError`) and `status.FromContextError`:
//! - a status the peer sent (a `grpc-status` trailer) is kept as it is;
//! - the call's own deadline expiring → `DeadlineExceeded`;
//! - the connection failing, closing or being refused (I/O errors, GOAWAY,
//!   hyper's closed or timed-out connection) → `Unavailable`;
//! - a stream reset by the peer (RST_STREAM) → the code of its HTTP/2 reason:
//!   `CANCEL` → `Cancelled`, `REFUSED_STREAM` → `Unavailable`,
//!   `FLOW_CONTROL_ERROR`/`ENHANCE_YOUR_CALM` → `ResourceExhausted`,
//!   `INADEQUATE_SECURITY` → `PermissionDenied`, anything else → `Internal`.

use std::error::Error as StdError;
use tonic::{Code, Status};

/// Whether `status` was produced locally by a failed transport (it carries
/// the underlying error as its source); a status sent by the peer has none.
fn local_source(status: &Status) -> Option<&(dyn StdError + 'static)> {
    StdError::source(status)
}

/// grpc-go's code for an HTTP/2 RST_STREAM reason (`http2ErrConvTab`).
pub fn code_for_h2_reason(reason: h2::Reason) -> Code {
    match reason {
        h2::Reason::REFUSED_STREAM => Code::Unavailable,
        h2::Reason::CANCEL => Code::Cancelled,
        h2::Reason::FLOW_CONTROL_ERROR | h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
        _ => Code::Internal,
    }
}

/// The code grpc-go gives the transport failure in `err`'s chain, if any.
fn transport_code(err: &(dyn StdError + 'static)) -> Option<Code> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<tonic::TimeoutExpired>().is_some() {
            return Some(Code::DeadlineExceeded);
        }
        if e.downcast_ref::<tonic::ConnectError>().is_some() || e.downcast_ref::<std::io::Error>().is_some() {
            return Some(Code::Unavailable);
        }
        if let Some(h) = e.downcast_ref::<h2::Error>() {
            return Some(if h.is_io() || h.is_go_away() {
                Code::Unavailable
            } else if h.is_reset() && h.is_remote() {
                h.reason().map(code_for_h2_reason).unwrap_or(Code::Internal)
            } else if h.reason() == Some(h2::Reason::CANCEL) {
                Code::Cancelled
            } else {
                // h2 itself found the peer breaking the protocol: grpc-go closes the connection.
                Code::Unavailable
            });
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            // The source (usually an h2 or I/O error) says more; look at it first.
            if let Some(c) = e.source().and_then(transport_code) {
                return Some(c);
            }
            if h.is_timeout() || h.is_closed() || h.is_canceled() || h.is_incomplete_message() {
                return Some(Code::Unavailable);
            }
        }
        cur = e.source();
    }
    None
}

/// The status a grpc-go client would have reported for this call: a status
/// from the peer unchanged, a transport failure under grpc-go's code (the
/// message is kept, so the cause stays visible). Use it on every status a
/// client call returns before showing or recording it.
pub fn grpc_go_status(status: Status) -> Status {
    if is_local_deadline(&status) {
        return Status::new(Code::DeadlineExceeded, "context deadline exceeded (Timeout expired)");
    }
    transport_status(status)
}

/// Whether this status is the call's own deadline expiring in tonic's client
/// (a `TimeoutExpired` in its source chain). A CANCELLED the peer sent, even
/// with the same text, is not.
pub fn is_local_deadline(status: &Status) -> bool {
    local_source(status).and_then(transport_code) == Some(Code::DeadlineExceeded)
}

/// The part of [`grpc_go_status`] that looks only at the error's source
/// chain (never at message text): a local transport failure gets grpc-go's
/// code; anything the peer sent is returned unchanged.
pub fn transport_status(status: Status) -> Status {
    let Some(code) = local_source(&status).and_then(transport_code) else {
        return status;
    };
    if code == status.code() {
        return status;
    }
    let mut message = status.message().to_string();
    if code == Code::Unavailable && !message.contains("connection") {
        message = format!("connection lost: {message}");
    }
    Status::new(code, message)
}

/// Just the code of [`grpc_go_status`].
pub fn grpc_go_code(status: &Status) -> Code {
    local_source(status).and_then(transport_code).unwrap_or(status.code())
}

/// grpc-go's name for a code (`codes.Code.String()`): tonic's names but
/// `Canceled` with one L.
pub fn go_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// A grpc-go status error as Go prints it (`status.Error(...).Error()`):
/// `rpc error: code = Unknown desc = boom`.
pub fn go_error_text(code: Code, message: &str) -> String {
    format!("rpc error: code = {} desc = {message}", go_code_name(code))
}

/// What a Go client's error for this failed call reads as: a status (from
/// the peer, or the call's own deadline) in grpc-go's words, anything else
/// (no connection, a usage error) as dpctl says it.
pub fn go_text(e: &crate::core::Error) -> String {
    match e {
        crate::core::Error::Rpc { code, message, .. } => go_error_text(*code, message),
        crate::core::Error::Caused(inner, _) => go_text(inner),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_grpc_go_prints_them() {
        assert_eq!(go_error_text(Code::Unknown, "boom"), "rpc error: code = Unknown desc = boom");
        assert_eq!(go_code_name(Code::Cancelled), "Canceled");
        let e = crate::core::Error::Rpc {
            target: "/s.sock".into(),
            method: "NodePrepareResources",
            code: Code::DeadlineExceeded,
            message: "context deadline exceeded".into(),
        };
        assert_eq!(go_text(&e), "rpc error: code = DeadlineExceeded desc = context deadline exceeded");
        assert_eq!(go_text(&crate::core::Error::failed("no socket")), "no socket");
    }

    fn io(kind: std::io::ErrorKind) -> Box<dyn StdError + Send + Sync> {
        Box::new(std::io::Error::new(kind, "broken"))
    }

    #[test]
    fn peer_statuses_are_kept() {
        for code in [Code::Unknown, Code::Internal, Code::Unimplemented, Code::Cancelled] {
            let s = grpc_go_status(Status::new(code, "from the peer"));
            assert_eq!(s.code(), code);
            assert_eq!(s.message(), "from the peer");
        }
    }

    #[test]
    fn connection_failures_are_unavailable() {
        let s = grpc_go_status(Status::from_error(io(std::io::ErrorKind::ConnectionReset)));
        assert_eq!(s.code(), Code::Unavailable, "{s:?}");
        let s = Status::from_error(io(std::io::ErrorKind::BrokenPipe));
        assert_eq!(grpc_go_code(&s), Code::Unavailable);
        // tonic's own code for a broken connection is Unknown; the message stays.
        assert_eq!(s.code(), Code::Unknown);
        assert!(grpc_go_status(s).message().contains("broken"));
        let local_protocol = Status::from_error(Box::new(h2::Error::from(h2::Reason::PROTOCOL_ERROR)));
        assert_eq!(grpc_go_code(&local_protocol), Code::Unavailable);
        let cancel = Status::from_error(Box::new(h2::Error::from(h2::Reason::CANCEL)));
        assert_eq!(grpc_go_code(&cancel), Code::Cancelled);
    }

    #[test]
    fn resets_follow_grpc_go_table() {
        assert_eq!(code_for_h2_reason(h2::Reason::CANCEL), Code::Cancelled);
        assert_eq!(code_for_h2_reason(h2::Reason::REFUSED_STREAM), Code::Unavailable);
        assert_eq!(code_for_h2_reason(h2::Reason::ENHANCE_YOUR_CALM), Code::ResourceExhausted);
        assert_eq!(code_for_h2_reason(h2::Reason::FLOW_CONTROL_ERROR), Code::ResourceExhausted);
        assert_eq!(code_for_h2_reason(h2::Reason::INADEQUATE_SECURITY), Code::PermissionDenied);
        assert_eq!(code_for_h2_reason(h2::Reason::PROTOCOL_ERROR), Code::Internal);
        assert_eq!(code_for_h2_reason(h2::Reason::NO_ERROR), Code::Internal);
    }

    #[test]
    fn local_deadline_is_deadline_exceeded() {
        let s = Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(grpc_go_code(&s), Code::DeadlineExceeded);
        assert_eq!(grpc_go_status(s).code(), Code::DeadlineExceeded);
        // the same words from the peer are the peer's CANCELLED
        let peer = Status::cancelled("Timeout expired");
        assert!(!is_local_deadline(&peer));
        assert_eq!(grpc_go_code(&peer), Code::Cancelled);
        assert_eq!(grpc_go_status(peer).code(), Code::Cancelled);
    }
}
