//! Control sockets: JSON lines over a Unix socket, one request line, one
//! answer line. `dpctl serve` and `dpctl dra serve` take live control this
//! way and the mock kubelet answers `dpctl node` on its status socket; each
//! is a [`Handler`] with its own request type (a serde enum tagged by `op`,
//! so a request is either one of its kinds or refused before it is handled).
//!
//! The server reads each line with a bound ([`MAX_CONTROL_LINE`]): a longer
//! line or one that is not UTF-8 is refused and the connection closed; a
//! line that is not a request is refused and the connection kept.

use crate::core::limits::{human_bytes, read_line, Line, MAX_CONTROL_ANSWER, MAX_CONTROL_LINE};
use crate::core::task::Tasks;
use crate::core::text::cap_words;
use crate::core::transport::{connect_raw, listen};
use crate::core::{Error, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// One control protocol: what it reads, what it answers.
pub trait Handler: Send + Sync + 'static {
    /// A request (`#[serde(tag = "op")]`).
    type Request: DeserializeOwned + Send;
    /// An answer.
    type Answer: Serialize + Send;

    /// The answer to a line that is no request: `error` says why.
    fn refusal(error: String) -> Self::Answer;

    /// Answer one request.
    fn answer(&self, req: Self::Request) -> impl Future<Output = Self::Answer> + Send;
}

/// What one request line gets: the answer, and whether the connection closes after it.
enum Reply<R> {
    /// Handle this request.
    Request(R),
    /// Refuse the line with this error; close the connection if `close`.
    Refuse { error: String, close: bool },
}

/// Decide what a line read from the socket gets (pure).
fn reply<R: DeserializeOwned>(line: Line) -> Option<Reply<R>> {
    match line {
        Line::Eof => None,
        Line::TooLong => Some(Reply::Refuse {
            error: format!("request line longer than {}; closing the connection", human_bytes(MAX_CONTROL_LINE as u64)),
            close: true,
        }),
        Line::NotUtf8 => {
            Some(Reply::Refuse { error: "request line is not UTF-8; closing the connection".into(), close: true })
        }
        Line::Text(text) => Some(match serde_json::from_str::<R>(&text) {
            Ok(r) => Reply::Request(r),
            Err(e) => Reply::Refuse { error: format!("bad request: {}", cap_words(&e.to_string())), close: false },
        }),
    }
}

/// An answer as one line (with its newline).
fn encode<A: Serialize>(a: &A) -> String {
    let mut text = serde_json::to_string(a)
        .unwrap_or_else(|e| format!("{{\"ok\":false,\"error\":{}}}", serde_json::Value::from(e.to_string())));
    text.push('\n');
    text
}

/// Serve `handler` on `path` until `stop` is cancelled: creates the
/// socket's directory, calls `listening` once the socket accepts, answers
/// each connection in a task of its own (cancelled and awaited before this
/// returns), then removes the socket and its directory if empty.
pub async fn serve<H: Handler>(
    path: &Path,
    handler: Arc<H>,
    stop: CancellationToken,
    listening: impl FnOnce(),
) -> Result<()> {
    if let Some(dir) = path.parent() {
        crate::core::files::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the control directory", &e))?;
    }
    let (listener, guard) = listen(path).await?;
    listening();
    let conns = Tasks::new();
    loop {
        let conn = tokio::select! {
            _ = stop.cancelled() => break,
            c = listener.accept() => c,
        };
        let Ok((stream, _)) = conn else { continue };
        let handler = handler.clone();
        conns.spawn(async move {
            let (r, mut w) = stream.into_split();
            let mut r = BufReader::new(r);
            loop {
                let Ok(line) = read_line(&mut r, MAX_CONTROL_LINE).await else { break };
                let (text, close) = match reply::<H::Request>(line) {
                    None => break,
                    Some(Reply::Request(req)) => (encode(&handler.answer(req).await), false),
                    Some(Reply::Refuse { error, close }) => (encode(&H::refusal(error)), close),
                };
                if w.write_all(text.as_bytes()).await.is_err() || close {
                    break;
                }
            }
        });
    }
    conns.stop().await;
    drop(guard);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir); // only if empty
    }
    Ok(())
}

/// Send one request to a control socket and read its answer.
pub async fn send<Q: Serialize, A: DeserializeOwned>(path: &Path, req: &Q, timeout: Duration) -> Result<A> {
    let stream = connect_raw(path, timeout).await?;
    let (r, mut w) = stream.into_split();
    let mut line = serde_json::to_string(req).map_err(|e| Error::failed(e.to_string()))?;
    line.push('\n');
    let work = async {
        w.write_all(line.as_bytes()).await?;
        read_line(&mut BufReader::new(r), MAX_CONTROL_ANSWER).await
    };
    let reply = match tokio::time::timeout(timeout, work).await {
        Err(_) => return Err(Error::timeout(path, "live control", timeout)),
        Ok(Err(e)) => return Err(Error::io(path, "live control", &e)),
        Ok(Ok(Line::Eof)) => {
            return Err(Error::failed(format!("{}: the control socket closed without answering", path.display())))
        }
        Ok(Ok(Line::TooLong | Line::NotUtf8)) => {
            return Err(Error::failed(format!(
                "{}: not a dpctl control socket (answer too long or not UTF-8)",
                path.display()
            )))
        }
        Ok(Ok(Line::Text(l))) => l,
    };
    serde_json::from_str(&reply)
        .map_err(|e| Error::failed(format!("{}: not a dpctl control socket (bad answer: {e})", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
    enum Req {
        Ping,
        Echo { text: String },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ans {
        ok: bool,
        #[serde(default)]
        text: String,
        #[serde(default)]
        error: String,
    }

    struct Echo;

    impl Handler for Echo {
        type Request = Req;
        type Answer = Ans;
        fn refusal(error: String) -> Ans {
            Ans { ok: false, text: String::new(), error }
        }
        async fn answer(&self, req: Req) -> Ans {
            match req {
                Req::Ping => Ans { ok: true, text: "pong".into(), error: String::new() },
                Req::Echo { text } => Ans { ok: true, text, error: String::new() },
            }
        }
    }

    #[test]
    fn lines_are_requests_or_refused_with_why() {
        let r = |s: &str| reply::<Req>(Line::Text(s.into()));
        assert!(matches!(r(r#"{"op":"ping"}"#), Some(Reply::Request(Req::Ping))));
        assert!(matches!(r(r#"{"op":"echo","text":"x"}"#), Some(Reply::Request(Req::Echo { text })) if text == "x"));
        for (line, why) in [
            (r#"{"op":"pong"}"#, "unknown variant `pong`"),
            (r#"{"op":"echo"}"#, "missing field `text`"),
            (r#"{"op":"echo","text":"x","more":1}"#, "unknown field `more`"),
            ("not json", "expected"),
        ] {
            match r(line) {
                Some(Reply::Refuse { error, close: false }) => {
                    assert!(error.starts_with("bad request: ") && error.contains(why), "{line}: {error}")
                }
                _ => panic!("{line} was not refused"),
            }
        }
        assert!(
            matches!(reply::<Req>(Line::TooLong), Some(Reply::Refuse { close: true, error }) if error.contains("1 MiB"))
        );
        assert!(matches!(reply::<Req>(Line::NotUtf8), Some(Reply::Refuse { close: true, .. })));
        assert!(reply::<Req>(Line::Eof).is_none());
    }

    #[tokio::test]
    async fn a_socket_answers_typed_requests_and_goes_away_when_stopped() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = d.path().join("ctl").join("c.sock");
        let stop = CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn({
            let (path, stop) = (path.clone(), stop.clone());
            async move {
                serve(&path, Arc::new(Echo), stop, || {
                    let _ = tx.send(());
                })
                .await
            }
        });
        rx.await.expect("listening");
        let t = Duration::from_secs(5);
        let a: Ans = send(&path, &Req::Echo { text: "hi".into() }, t).await.expect("echo");
        assert_eq!(a, Ans { ok: true, text: "hi".into(), error: String::new() });
        let a: Ans = send(&path, &serde_json::json!({"op": "nope"}), t).await.expect("refusal");
        assert!(!a.ok && a.error.contains("unknown variant `nope`"), "{a:?}");
        stop.cancel();
        server.await.expect("joined").expect("served");
        assert!(!path.exists() && !path.parent().expect("dir").exists(), "socket and empty directory removed");
    }
}
