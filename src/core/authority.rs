//! Accept any HTTP/2 `:authority` on dpctl's servers.
//!
//! Real gRPC clients dialing a Unix socket put the socket path in
//! `:authority` (`/tmp/d/kubelet.sock` from grpc-go 1.33,
//! `%2Ftmp%2Fd%2Fkubelet.sock` from grpc-go 1.65, `tmp%2Fd%2Fkubelet.sock`
//! from grpcio). h2, under tonic, answers such requests with RST_STREAM
//! PROTOCOL_ERROR before any handler runs, while the kubelet's Go server
//! ignores the value. [`AuthorityFix`] wraps an accepted connection and
//! rewrites the client's header blocks before h2 parses them.
//!
//! A client's `:authority` is fixed per channel, so the first header block
//! that carries one decides the connection's mode:
//! - valid (`localhost`, as the kubelet and tonic send): every byte passes
//!   through unchanged from then on, and nothing more is decoded — the hot
//!   path (kubelet → plugin) pays only a copy;
//! - invalid (a socket path): that block and every later one is decoded with
//!   the connection's HPACK state and re-encoded as literals without
//!   indexing, with the authority replaced by `localhost`. Literal-only output
//!   never refers to h2's HPACK table, so h2 stays consistent whatever the
//!   client's encoder indexed.
//!
//! (A client that sent a valid authority first and an invalid one later on
//! the same connection would get h2's reset for the later stream, exactly as
//! without the shim; no known client does.) Frames other than
//! HEADERS/CONTINUATION pass through unchanged; the server-to-client
//! direction is untouched.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// The largest frame payload we emit: the HTTP/2 default SETTINGS_MAX_FRAME_SIZE,
/// which every server accepts.
const MAX_OUT_FRAME: usize = 16_384;
/// A header block larger than this is refused (h2's own default limit is 16 MiB).
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// What a rewritten authority becomes.
pub const REPLACEMENT_AUTHORITY: &str = "localhost";

/// Is `value` acceptable to h2 as an `:authority`?
pub fn authority_is_valid(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

enum State {
    Preface,
    Frames,
    /// Not HTTP/2 with prior knowledge: pass bytes through untouched.
    Passthrough,
}

struct PendingBlock {
    stream_id: u32,
    end_stream: bool,
    block: Vec<u8>,
    /// The original frames, forwarded as they are when nothing needs rewriting.
    raw: Vec<u8>,
}

/// What the connection does with header blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No `:authority` seen yet: decode (to track HPACK state), forward unchanged.
    Inspect,
    /// The authority was valid: forward everything unchanged, decode nothing.
    Passthrough,
    /// The authority was invalid: decode and re-encode every block.
    Rewrite,
}

/// An accepted connection whose incoming HTTP/2 header blocks get a valid `:authority`.
pub struct AuthorityFix<T> {
    inner: T,
    raw: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    state: State,
    decoder: loona_hpack::Decoder<'static>,
    pending: Option<PendingBlock>,
    eof: bool,
    rewritten: u64,
    mode: Mode,
}

impl<T> AuthorityFix<T> {
    /// Wrap an accepted server-side connection.
    pub fn new(inner: T) -> Self {
        AuthorityFix {
            inner,
            raw: Vec::with_capacity(16_384),
            out: Vec::with_capacity(16_384),
            out_pos: 0,
            state: State::Preface,
            decoder: loona_hpack::Decoder::new(),
            pending: None,
            eof: false,
            rewritten: 0,
            mode: Mode::Inspect,
        }
    }

    /// How many `:authority` values this connection had rewritten so far.
    pub fn rewritten(&self) -> u64 {
        self.rewritten
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Turn as many complete input units as possible into output bytes.
    fn process(&mut self) -> io::Result<()> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Passthrough => {
                    self.out.extend_from_slice(&self.raw[pos..]);
                    pos = self.raw.len();
                    break;
                }
                State::Preface => {
                    let have = &self.raw[pos..];
                    let n = have.len().min(PREFACE.len());
                    if have[..n] != PREFACE[..n] {
                        self.state = State::Passthrough;
                        continue;
                    }
                    if n < PREFACE.len() {
                        break;
                    }
                    self.out.extend_from_slice(PREFACE);
                    pos += PREFACE.len();
                    self.state = State::Frames;
                }
                State::Frames => {
                    let have = &self.raw[pos..];
                    if have.len() < FRAME_HEADER_LEN {
                        break;
                    }
                    let len = (usize::from(have[0]) << 16) | (usize::from(have[1]) << 8) | usize::from(have[2]);
                    if have.len() < FRAME_HEADER_LEN + len {
                        break;
                    }
                    let (typ, flags) = (have[3], have[4]);
                    let stream_id = u32::from_be_bytes([have[5], have[6], have[7], have[8]]) & 0x7fff_ffff;
                    let frame_end = pos + FRAME_HEADER_LEN + len;
                    if self.mode == Mode::Passthrough {
                        self.out.extend_from_slice(&self.raw[pos..frame_end]);
                        pos = frame_end;
                        continue;
                    }
                    match typ {
                        TYPE_HEADERS => {
                            let payload = &self.raw[pos + FRAME_HEADER_LEN..frame_end];
                            if self.pending.is_some() {
                                return Err(protocol_error("HEADERS frame inside an unfinished header block"));
                            }
                            let fragment = headers_fragment(payload, flags)?.to_vec();
                            let raw = self.raw[pos..frame_end].to_vec();
                            let block = PendingBlock {
                                stream_id,
                                end_stream: flags & FLAG_END_STREAM != 0,
                                block: fragment,
                                raw,
                            };
                            if flags & FLAG_END_HEADERS != 0 {
                                self.finish_block(block)?;
                            } else {
                                self.pending = Some(block);
                            }
                        }
                        TYPE_CONTINUATION => {
                            let payload = &self.raw[pos + FRAME_HEADER_LEN..frame_end];
                            let mut block = match self.pending.take() {
                                Some(b) if b.stream_id == stream_id => b,
                                _ => {
                                    return Err(protocol_error("CONTINUATION frame without a header block to continue"))
                                }
                            };
                            if block.block.len() + payload.len() > MAX_HEADER_BLOCK {
                                return Err(protocol_error("header block larger than 1 MiB"));
                            }
                            block.block.extend_from_slice(payload);
                            block.raw.extend_from_slice(&self.raw[pos..frame_end]);
                            if flags & FLAG_END_HEADERS != 0 {
                                self.finish_block(block)?;
                            } else {
                                self.pending = Some(block);
                            }
                        }
                        _ => {
                            if self.pending.is_some() {
                                return Err(protocol_error("frame interleaved inside a header block"));
                            }
                            self.out.extend_from_slice(&self.raw[pos..frame_end]);
                        }
                    }
                    pos = frame_end;
                }
            }
        }
        self.raw.drain(..pos);
        Ok(())
    }

    fn finish_block(&mut self, block: PendingBlock) -> io::Result<()> {
        let fields = self
            .decoder
            .decode(&block.block)
            .map_err(|e| protocol_error(&format!("undecodable HPACK header block: {e}")))?;
        if self.mode == Mode::Inspect {
            match fields.iter().find(|(n, _)| n.as_slice() == b":authority") {
                None => {
                    self.out.extend_from_slice(&block.raw);
                    return Ok(());
                }
                Some((_, v)) if authority_is_valid(v) => {
                    self.mode = Mode::Passthrough;
                    self.out.extend_from_slice(&block.raw);
                    return Ok(());
                }
                Some(_) => self.mode = Mode::Rewrite,
            }
        }
        let mut encoded = Vec::with_capacity(block.block.len() + 64);
        for (name, value) in &fields {
            if name.as_slice() == b":authority" && !authority_is_valid(value) {
                self.rewritten += 1;
                encode_literal(&mut encoded, name, REPLACEMENT_AUTHORITY.as_bytes());
            } else {
                encode_literal(&mut encoded, name, value);
            }
        }
        write_header_frames(&mut self.out, block.stream_id, block.end_stream, &encoded);
        Ok(())
    }
}

fn protocol_error(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("HTTP/2: {msg}"))
}

/// The header block fragment of a HEADERS frame payload, without padding and priority.
fn headers_fragment(payload: &[u8], flags: u8) -> io::Result<&[u8]> {
    let mut start = 0;
    let mut pad = 0;
    if flags & FLAG_PADDED != 0 {
        pad = usize::from(*payload.first().ok_or_else(|| protocol_error("padded HEADERS frame without a pad length"))?);
        start = 1;
    }
    if flags & FLAG_PRIORITY != 0 {
        start += 5;
    }
    if start + pad > payload.len() {
        return Err(protocol_error("HEADERS frame shorter than its padding and priority"));
    }
    Ok(&payload[start..payload.len() - pad])
}

/// HPACK integer with an N-bit prefix (RFC 7541 §5.1).
fn encode_int(out: &mut Vec<u8>, first: u8, prefix_bits: u8, mut v: usize) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// "Literal Header Field without Indexing — New Name", no Huffman (RFC 7541 §6.2.2).
pub fn encode_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    encode_int(out, 0x00, 7, name.len());
    out.extend_from_slice(name);
    encode_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// Frame a header block as HEADERS (+ CONTINUATION) frames of at most 16 KiB.
pub fn write_header_frames(out: &mut Vec<u8>, stream_id: u32, end_stream: bool, block: &[u8]) {
    let mut chunks = block.chunks(MAX_OUT_FRAME).peekable();
    let mut first = true;
    if block.is_empty() {
        write_frame_header(
            out,
            0,
            TYPE_HEADERS,
            FLAG_END_HEADERS | if end_stream { FLAG_END_STREAM } else { 0 },
            stream_id,
        );
        return;
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let (typ, mut flags) =
            if first { (TYPE_HEADERS, if end_stream { FLAG_END_STREAM } else { 0 }) } else { (TYPE_CONTINUATION, 0) };
        if last {
            flags |= FLAG_END_HEADERS;
        }
        write_frame_header(out, chunk.len(), typ, flags, stream_id);
        out.extend_from_slice(chunk);
        first = false;
    }
}

fn write_frame_header(out: &mut Vec<u8>, len: usize, typ: u8, flags: u8, stream_id: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, typ, flags]);
    out.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
}

impl<T: AsyncRead + Unpin> AsyncRead for AuthorityFix<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            // Passthrough with nothing buffered: read straight into the caller's buffer.
            if this.mode == Mode::Passthrough && this.out_pos >= this.out.len() && this.raw.is_empty() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut tmp = [0u8; 16_384];
            let mut rb = ReadBuf::new(&mut tmp);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            let got = rb.filled();
            if got.is_empty() {
                this.eof = true;
                // A truncated frame is handed on as it is; h2 reports it.
                this.out.append(&mut this.raw);
                continue;
            }
            if this.raw.is_empty() && matches!(this.state, State::Passthrough) {
                this.out.extend_from_slice(got);
                continue;
            }
            this.raw.extend_from_slice(got);
            this.process()?;
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<T> tonic::transport::server::Connected for AuthorityFix<T> {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn frame(typ: u8, flags: u8, sid: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame_header(&mut v, payload.len(), typ, flags, sid);
        v.extend_from_slice(payload);
        v
    }

    async fn run(input: Vec<u8>) -> io::Result<Vec<u8>> {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        tokio::io::AsyncWriteExt::write_all(&mut a, &input).await?;
        drop(a);
        let mut fix = AuthorityFix::new(b);
        let mut out = Vec::new();
        fix.read_to_end(&mut out).await?;
        Ok(out)
    }

    fn decode_headers(out: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut pos = PREFACE.len();
        let mut block = Vec::new();
        while pos + 9 <= out.len() {
            let len = (usize::from(out[pos]) << 16) | (usize::from(out[pos + 1]) << 8) | usize::from(out[pos + 2]);
            if out[pos + 3] == TYPE_HEADERS || out[pos + 3] == TYPE_CONTINUATION {
                block.extend_from_slice(&out[pos + 9..pos + 9 + len]);
            }
            pos += 9 + len;
        }
        loona_hpack::Decoder::new().decode(&block).unwrap()
    }

    #[tokio::test]
    async fn rewrites_path_authorities_and_keeps_other_frames() {
        for auth in ["/tmp/d/kubelet.sock", "%2Ftmp%2Fd%2Fkubelet.sock", "tmp%2Fd%2Fkubelet.sock"] {
            assert!(!authority_is_valid(auth.as_bytes()), "{auth} should be invalid for h2");
            let mut enc = loona_hpack::Encoder::new();
            let block = enc.encode(vec![
                (&b":method"[..], &b"POST"[..]),
                (b":scheme", b"http"),
                (b":path", b"/v1beta1.Registration/Register"),
                (b":authority", auth.as_bytes()),
                (b"content-type", b"application/grpc"),
            ]);
            let mut input = PREFACE.to_vec();
            input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
                                                 // padded + priority HEADERS, split over a CONTINUATION
            let (a, b) = block.split_at(block.len() / 2);
            let mut payload = vec![3u8, 0, 0, 0, 0, 16];
            payload.extend_from_slice(a);
            payload.extend_from_slice(&[0, 0, 0]);
            input.extend(frame(TYPE_HEADERS, FLAG_PADDED | FLAG_PRIORITY, 1, &payload));
            input.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, b));
            input.extend(frame(0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0"));
            let out = run(input).await.unwrap();
            assert!(out.starts_with(PREFACE));
            let fields = decode_headers(&out);
            let authority = fields.iter().find(|(n, _)| n == b":authority").unwrap();
            assert_eq!(authority.1, b"localhost");
            assert_eq!(fields.len(), 5);
            assert_eq!(fields[2].1, b"/v1beta1.Registration/Register");
            // the DATA frame comes through byte for byte
            assert!(out.ends_with(&frame(0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0")));
        }
    }

    #[tokio::test]
    async fn keeps_valid_authority_and_tracks_dynamic_table() {
        // Hand-built blocks: the first adds (:authority, /run/x.sock) to the
        // dynamic table ("literal with incremental indexing", name index 1);
        // the second refers to it as dynamic entry 62.
        let lit = |v: &[u8]| {
            let mut b = vec![0x83, 0x41, v.len() as u8];
            b.extend_from_slice(v);
            b
        };
        let b1 = lit(b"/run/x.sock");
        let b2 = vec![0x83, 0x80 | 62];
        let b3 = lit(b"localhost:1234");
        let mut input = PREFACE.to_vec();
        for (sid, b) in [(1, &b1), (3, &b2), (5, &b3)] {
            input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, sid, b));
        }
        let out = run(input).await.unwrap();
        let mut dec = loona_hpack::Decoder::new();
        let mut pos = PREFACE.len();
        let mut auths = vec![];
        while pos < out.len() {
            let len = (usize::from(out[pos]) << 16) | (usize::from(out[pos + 1]) << 8) | usize::from(out[pos + 2]);
            let f = dec.decode(&out[pos + 9..pos + 9 + len]).unwrap();
            auths.push(f.into_iter().find(|(n, _)| n == b":authority").unwrap().1);
            pos += 9 + len;
        }
        assert_eq!(auths, vec![b"localhost".to_vec(), b"localhost".to_vec(), b"localhost:1234".to_vec()]);
    }

    #[tokio::test]
    async fn huffman_coded_block_from_rfc7541() {
        // RFC 7541 C.4.1: :method GET, :scheme http, :path /, :authority www.example.com (Huffman)
        let block =
            [0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 1, &block));
        let out = run(input).await.unwrap();
        let fields = decode_headers(&out);
        assert_eq!(fields[3], (b":authority".to_vec(), b"www.example.com".to_vec()));
        assert_eq!(out[PREFACE.len() + 4], FLAG_END_HEADERS | FLAG_END_STREAM);
    }

    #[tokio::test]
    async fn a_valid_authority_means_byte_for_byte_passthrough() {
        let mut enc = loona_hpack::Encoder::new();
        let b1 = enc.encode(vec![(&b":method"[..], &b"POST"[..]), (b":authority", b"localhost"), (b":path", b"/a")]);
        // a later block that would need decoding is not touched either
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &b1));
        input.extend(frame(0x0, FLAG_END_STREAM, 1, b"hello"));
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS | FLAG_PADDED, 3, &[1, 0x82, 0]));
        assert_eq!(run(input.clone()).await.unwrap(), input);
    }

    #[tokio::test]
    async fn large_blocks_are_split_and_garbage_passes_through() {
        let big = vec![b'a'; 40_000];
        let mut block = Vec::new();
        encode_literal(&mut block, b":authority", b"/run/kubelet.sock");
        encode_literal(&mut block, b"x-big", &big);
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &block));
        let out = run(input).await.unwrap();
        assert_eq!(decode_headers(&out)[1].1, big);
        assert_eq!(out[PREFACE.len() + 3], TYPE_HEADERS);
        assert_eq!(out[PREFACE.len() + 4] & FLAG_END_HEADERS, 0);

        let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        assert_eq!(run(http1.clone()).await.unwrap(), http1);
    }

    #[tokio::test]
    async fn broken_blocks_are_errors_not_panics() {
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
        assert!(run(input).await.is_err());
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, &[0x82]));
        assert!(run(input).await.is_err());
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_HEADERS, FLAG_PADDED | FLAG_END_HEADERS, 1, &[200, 0x82]));
        assert!(run(input).await.is_err());
    }
}
