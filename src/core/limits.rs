//! Every size dpctl accepts from a user or a peer has a bound, stated here
//! once: what a flag or config field may ask for, how much of a file is read,
//! how long a line on a control socket may be, how large a gRPC message a
//! server decodes. Past a bound the answer is a clear error, never a panic,
//! an abort or unbounded memory.

use crate::core::{Error, Result};
use std::path::Path;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The kubelet's gRPC receive limit (grpc-go's default): every dpctl server
/// decodes messages up to this size unless a flag raises it.
pub const GRPC_MAX_RECV: usize = 4 << 20;
/// The most a receive-size flag may raise it to (gRPC's own ceiling is 2 GiB − 1).
pub const GRPC_MAX_RECV_CEILING: usize = 1 << 30;
/// Devices one served resource may have (`--count`, `count`, `devices`):
/// 100,000 short IDs already make a ListAndWatch message near the kubelet's 4 MiB limit.
pub const MAX_DEVICES: usize = 100_000;
/// NUMA nodes (`--numa-nodes`): Linux's MAX_NUMNODES.
pub const MAX_NUMA_NODES: u32 = 1024;
/// A device ID pattern or one ID given by a user.
pub const MAX_ID_LEN: usize = 1024;
/// One request line on a control or status socket.
pub const MAX_CONTROL_LINE: usize = 1 << 20;
/// One answer line read back from a control or status socket (a `list` of
/// 100,000 devices is about 6 MiB).
pub const MAX_CONTROL_ANSWER: usize = 64 << 20;
/// A `serve --config` file.
pub const MAX_CONFIG_FILE: u64 = 4 << 20;
/// A static pod manifest (real ones are a few KiB).
pub const MAX_MANIFEST_FILE: u64 = 512 << 10;
/// Nesting depth of a manifest (a real pod spec is about 10 deep).
pub const MAX_MANIFEST_DEPTH: usize = 64;
/// Flow collections (`[…]`, `{…}`) in a YAML manifest: YAML parsing costs
/// time in the product of flow depth and tokens, and the number of `[`/`{`
/// bounds the depth whatever quotes around them mean.
pub const MAX_MANIFEST_FLOW: usize = 256;
/// A checkpoint file.
pub const MAX_CHECKPOINT_FILE: u64 = 64 << 20;
/// A trace file.
pub const MAX_TRACE_FILE: u64 = 256 << 20;

/// Read a whole UTF-8 file of at most `max` bytes; `what` names it in errors
/// ("config", "trace"). A larger file is refused before it is read.
pub fn read_file(path: &Path, max: u64, what: &str) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut text = String::new();
    // One byte more than allowed tells "exactly max" from "larger" (also for
    // files whose metadata lies, such as /proc or a FIFO).
    let n = f.take(max + 1).read_to_string(&mut text)?;
    if n as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the {what} is larger than {}", human_bytes(max)),
        ));
    }
    Ok(text)
}

/// `4 MiB`, `1536 KiB`, `100 bytes`.
pub fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// One line read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline.
    Text(String),
    /// End of input (a last line without a newline counts as a line).
    Eof,
    /// The line grew past the limit; the connection should be answered and closed.
    TooLong,
    /// The line is not UTF-8.
    NotUtf8,
}

/// Read one `\n`-terminated line of at most `max` bytes, buffering no more
/// than that however long the peer's line is.
pub async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            if buf.is_empty() {
                return Ok(Line::Eof);
            }
            break;
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                if buf.len() + i > max {
                    return Ok(Line::TooLong);
                }
                buf.extend_from_slice(&chunk[..i]);
                r.consume(i + 1);
                break;
            }
            None => {
                let n = chunk.len();
                if buf.len() + n > max {
                    return Ok(Line::TooLong);
                }
                buf.extend_from_slice(chunk);
                r.consume(n);
            }
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(String::from_utf8(buf).map(Line::Text).unwrap_or(Line::NotUtf8))
}

/// A usage error for a size out of range, naming the flag or field.
pub fn too_large(what: &str, got: impl std::fmt::Display, max: impl std::fmt::Display) -> Error {
    Error::usage(format!("{what}: {got} is out of range; at most {max} is allowed"))
}

/// Check `got <= max` for the flag or field `what`.
pub fn check_max(what: &str, got: u64, max: u64) -> Result<()> {
    if got > max {
        return Err(too_large(what, got, max));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[tokio::test]
    async fn lines_are_bounded() {
        let input: &[u8] = b"{\"op\":\"list\"}\r\nabc\n\xff\xfe\nlast";
        let mut r = BufReader::with_capacity(4, input);
        assert_eq!(read_line(&mut r, 64).await.unwrap(), Line::Text("{\"op\":\"list\"}".into()));
        assert_eq!(read_line(&mut r, 64).await.unwrap(), Line::Text("abc".into()));
        assert_eq!(read_line(&mut r, 64).await.unwrap(), Line::NotUtf8);
        assert_eq!(read_line(&mut r, 64).await.unwrap(), Line::Text("last".into()));
        assert_eq!(read_line(&mut r, 64).await.unwrap(), Line::Eof);
        let long = vec![b'x'; 1000];
        let mut r = BufReader::with_capacity(16, &long[..]);
        assert_eq!(read_line(&mut r, 100).await.unwrap(), Line::TooLong);
        let exact = b"12345\n";
        assert_eq!(read_line(&mut &exact[..], 5).await.unwrap(), Line::Text("12345".into()));
        assert_eq!(read_line(&mut &exact[..], 4).await.unwrap(), Line::TooLong);
    }

    #[test]
    fn files_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        assert_eq!(read_file(&p, 5, "config").unwrap(), "12345");
        let e = read_file(&p, 4, "config").unwrap_err();
        assert_eq!(e.to_string(), "the config is larger than 4 bytes");
        assert_eq!(human_bytes(4 << 20), "4 MiB");
        assert!(check_max("--count", 100_001, 100_000).unwrap_err().to_string().starts_with("--count: 100001"));
    }
}
