//! Hand-built HTTP/2 requests carrying the `:authority` values real clients
//! send over Unix sockets. dpctl's listener must serve them all; a stock
//! tonic server (the control) resets them — proving the shim is what works.

use crate::support::*;
use dpctl::api::deviceplugin::registration_server::RegistrationServer;
use dpctl::api::deviceplugin::RegisterRequest;
use dpctl::core::authority::{encode_literal, write_header_frames};
use prost::Message;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

pub const AUTHORITIES: [&str; 3] = [
    "/tmp/d/kubelet.sock",       // grpc-go 1.33
    "%2Ftmp%2Fd%2Fkubelet.sock", // grpc-go 1.65
    "tmp%2Fd%2Fkubelet.sock",    // grpcio 1.85
];

#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The response's final headers (trailers included).
    Answered(Vec<(String, String)>),
    /// RST_STREAM with this error code.
    Reset(u32),
    /// GOAWAY or connection closed.
    Closed,
}

fn frame(typ: u8, flags: u8, sid: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut v = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, typ, flags];
    v.extend_from_slice(&sid.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

async fn raw_register(sock: &Path, authority: &str) -> Outcome {
    let req = RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "x.sock".into(),
        resource_name: "vendor.example/x".into(),
        options: None,
    };
    raw_register_req(sock, authority, &req).await
}

/// Send one Register over a raw HTTP/2 connection with the given `:authority`.
pub async fn raw_register_req(sock: &Path, authority: &str, req: &RegisterRequest) -> Outcome {
    raw_call(sock, authority, "/v1beta1.Registration/Register", &req.encode_to_vec()).await
}

/// Send one unary gRPC call over a raw HTTP/2 connection with the given `:authority`.
pub async fn raw_call(sock: &Path, authority: &str, path: &str, msg: &[u8]) -> Outcome {
    let mut conn = UnixStream::connect(sock).await.unwrap();
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        encode_literal(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(msg);
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    write_header_frames(&mut out, 1, false, &block);
    out.extend(frame(0x0, 0x1, 1, &body));
    conn.write_all(&out).await.unwrap();

    let mut dec = loona_hpack::Decoder::new();
    let mut buf = Vec::new();
    let mut headers = Vec::new();
    let work = async {
        loop {
            while buf.len() >= 9 {
                let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                let (typ, flags) = (buf[3], buf[4]);
                let sid = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
                let payload: Vec<u8> = buf[9..9 + len].to_vec();
                buf.drain(..9 + len);
                match typ {
                    0x4 if flags & 1 == 0 => conn.write_all(&frame(0x4, 1, 0, &[])).await.unwrap(),
                    0x3 if sid == 1 => {
                        return Outcome::Reset(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]))
                    }
                    0x7 => return Outcome::Closed,
                    0x1 if sid == 1 => {
                        for (n, v) in dec.decode(&payload).expect("server HPACK") {
                            headers.push((
                                String::from_utf8_lossy(&n).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            ));
                        }
                        if flags & 0x1 != 0 {
                            return Outcome::Answered(headers);
                        }
                    }
                    _ => {}
                }
            }
            let mut tmp = [0u8; 4096];
            match conn.read(&mut tmp).await {
                Ok(0) | Err(_) => return Outcome::Closed,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), work).await.expect("no answer within 5s")
}

/// The grpc-status of an answered call.
pub fn grpc_status(o: &Outcome) -> Option<&str> {
    match o {
        Outcome::Answered(h) => h.iter().find(|(n, _)| n == "grpc-status").map(|(_, v)| v.as_str()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpctl_servers_accept_socket_path_authorities() {
    let d = tmp();
    let sock = d.path().join("kubelet.sock");
    let (reqs, _stop) = kubelet::start(&sock, None).await;
    for auth in AUTHORITIES.iter().chain(["localhost"].iter()) {
        let o = raw_register(&sock, auth).await;
        assert_eq!(grpc_status(&o), Some("0"), "authority {auth}: {o:?}");
    }
    let reqs = reqs.lock().unwrap();
    assert_eq!(reqs.len(), 4, "every request reached the handler");
    assert_eq!(reqs[0].resource_name, "vendor.example/x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_tonic_server_resets_them_control() {
    let d = tmp();
    let sock = d.path().join("plain.sock");
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let svc = kubelet::TestRegistration { requests: Arc::new(Mutex::new(Vec::new())), reject: None };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming_shutdown(
        RegistrationServer::new(svc),
        tokio_stream::wrappers::UnixListenerStream::new(listener),
        async {
            let _ = rx.await;
        },
    ));
    for auth in AUTHORITIES {
        let o = raw_register(&sock, auth).await;
        assert_eq!(
            o,
            Outcome::Reset(1),
            "stock h2 should reset {auth} with PROTOCOL_ERROR; if this changed, the shim may be unnecessary"
        );
    }
    assert_eq!(grpc_status(&raw_register(&sock, "localhost").await), Some("0"));
    drop(tx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dpctl_serve_plugin_accepts_them_too() {
    let d = tmp();
    let (sv, sock) = serve_unregistered(d.path(), "v.e/foo", "p.sock", &[]).await;
    for auth in AUTHORITIES.iter().chain(["localhost"].iter()) {
        let o = raw_call(&sock, auth, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &[]).await;
        assert_eq!(grpc_status(&o), Some("0"), "authority {auth}: {o:?}");
    }
    stop_child(sv).await.expect_code(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpctl_clients_send_localhost_as_the_kubelet_does() {
    let d = tmp();
    let sock = d.path().join("raw.sock");
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let seen = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut tmp = [0u8; 4096];
        let preface = 24;
        loop {
            let n = conn.read(&mut tmp).await.unwrap();
            assert!(n > 0, "client closed before sending headers");
            buf.extend_from_slice(&tmp[..n]);
            let mut pos = preface;
            while buf.len() >= pos + 9 {
                let len = (usize::from(buf[pos]) << 16) | (usize::from(buf[pos + 1]) << 8) | usize::from(buf[pos + 2]);
                if buf.len() < pos + 9 + len {
                    break;
                }
                if buf[pos + 3] == 0x1 {
                    let fields = loona_hpack::Decoder::new().decode(&buf[pos + 9..pos + 9 + len]).unwrap();
                    return fields
                        .into_iter()
                        .find(|(n, _)| n == b":authority")
                        .map(|(_, v)| String::from_utf8(v).unwrap());
                }
                pos += 9 + len;
            }
        }
    });
    let r = dpctl(&["options", s(&sock), "--timeout", "1s"]).await;
    assert_eq!(r.code, 1, "the raw server never answers");
    assert_eq!(seen.await.unwrap().as_deref(), Some("localhost"));
}
