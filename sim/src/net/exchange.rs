//! What the network sees of requests and responses on a server's accepted connections, for the
//! `drain` oracle of a node's *own* serve loop (`axum::serve(..).with_graceful_shutdown(..)`,
//! tonic's `serve_with_incoming_shutdown`, a hand-written hyper accept loop).
//!
//! Each accepted connection's server end watches the bytes its application *read* from the
//! connection and the bytes it *wrote* to it, and follows the protocol's framing:
//! - **HTTP/1.x** (the first bytes read are a request line: `GET `, `POST `, …): a request is in
//!   flight from when its head has been read until the final response to it — its head and its
//!   whole body (`Content-Length`, chunked, none for `HEAD`/204/304, or to the close) — has been
//!   written (RFC 9112 §6);
//! - **HTTP/2** (the client connection preface, RFC 9113 §3.4): a stream is in flight from the
//!   client's `HEADERS` until the server ends it (`END_STREAM` on its `HEADERS` or `DATA`) or
//!   either side resets it (`RST_STREAM`); streams above the last stream id of a `GOAWAY` the
//!   server sent were refused, not dropped (the client may retry them, RFC 9113 §6.8);
//! - anything else (a Kafka broker, TLS, a protocol upgraded with `101 Switching Protocols`): not
//!   followed, never judged.
//!
//! Bytes a peer sent that the application never read are not a request in flight: a request that
//! raced the close of an idle keep-alive connection is the client's to retry, as on Linux.
//!
//! After SIGTERM ([`super::Network`]'s drain watch on the incarnation), a server end that closes
//! — or is fenced when the incarnation ends — with a request in flight, while its client is still
//! there (it has not closed, reset or sent its FIN), is an *unanswered* request: the node's
//! `drain` oracle fails the run with it ([`crate::node`]).

use std::collections::BTreeSet;

/// Request heads longer than this are not followed (the connection becomes opaque).
const HEAD_BYTES_MAX: usize = 64 * 1024;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/1.x request methods that identify a connection as HTTP/1 (RFC 9110 §9 and PATCH).
const H1_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"];

/// The exchange on one accepted connection, as its server end sees it.
#[derive(Debug, Default)]
pub(crate) enum Exchange {
    /// Nothing read or written yet.
    #[default]
    Sniffing,
    /// Too little read to tell the protocol: the bytes read so far.
    Prefix(Vec<u8>),
    Http1(Box<Http1>),
    Http2(Box<Http2>),
    /// Not a protocol followed here.
    Opaque,
}

impl Exchange {
    /// Bytes the server's application read from the connection.
    pub(crate) fn inbound(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        match self {
            Exchange::Opaque => {}
            Exchange::Http1(h) => {
                if !h.inbound(data) {
                    *self = Exchange::Opaque;
                }
            }
            Exchange::Http2(h) => h.inbound(data),
            Exchange::Sniffing | Exchange::Prefix(_) => {
                let mut seen = match std::mem::take(self) {
                    Exchange::Prefix(seen) => seen,
                    _ => Vec::new(),
                };
                seen.extend_from_slice(data);
                *self = sniff(seen);
            }
        }
    }

    /// Bytes the server's application wrote to the connection.
    pub(crate) fn outbound(&mut self, data: &[u8]) {
        match self {
            Exchange::Http1(h) => {
                if !h.outbound(data) {
                    *self = Exchange::Opaque;
                }
            }
            Exchange::Http2(h) => h.outbound(data),
            // A server that speaks first is not a request/response protocol followed here.
            Exchange::Sniffing => *self = Exchange::Opaque,
            Exchange::Prefix(_) | Exchange::Opaque => {}
        }
    }

    /// The requests in flight if the server closed the connection now (a response sent to the
    /// close ends with it), described for the oracle (`2 HTTP/1.1 request(s): PUT /kv/a`).
    pub(crate) fn in_flight(&self) -> Option<String> {
        match self {
            Exchange::Http1(h) => {
                let owed: Vec<&str> = h.owed_requests().collect();
                (!owed.is_empty()).then(|| format!("{} HTTP/1.1 request(s): {}", owed.len(), owed.join(", ")))
            }
            Exchange::Http2(h) => {
                let owed: Vec<String> = h.owed_streams().map(|s| s.to_string()).collect();
                (!owed.is_empty()).then(|| format!("{} HTTP/2 stream(s): {}", owed.len(), owed.join(", ")))
            }
            _ => None,
        }
    }
}

/// Decides the protocol from the first bytes read.
fn sniff(seen: Vec<u8>) -> Exchange {
    let n = seen.len().min(H2_PREFACE.len());
    if seen[..n] == H2_PREFACE[..n] {
        if seen.len() < H2_PREFACE.len() {
            return Exchange::Prefix(seen);
        }
        let mut h2 = Box::<Http2>::default();
        h2.inbound(&seen[H2_PREFACE.len()..]);
        return Exchange::Http2(h2);
    }
    match seen.iter().position(|&b| b == b' ') {
        Some(space) if H1_METHODS.iter().any(|m| m.as_bytes() == &seen[..space]) => {
            let mut h1 = Box::<Http1>::default();
            if h1.inbound(&seen) { Exchange::Http1(h1) } else { Exchange::Opaque }
        }
        None if seen.len() < 8 && seen.iter().all(u8::is_ascii_uppercase) => Exchange::Prefix(seen),
        _ => Exchange::Opaque,
    }
}

/// How a message body is delimited (RFC 9112 §6.3), and how far it has got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// `n` bytes still to come.
    Length(u64),
    /// Chunked: the state of the chunk parser.
    Chunked(Chunk),
    /// A response delimited by the close of the connection.
    UntilClose,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Chunk {
    /// The chunk-size line so far.
    Size(Vec<u8>),
    /// `n` data bytes, then CRLF.
    Data(u64),
    /// The CRLF after a chunk's data: bytes of it still to come.
    DataEnd(u8),
    /// The trailer section: the current line so far.
    Trailer(Vec<u8>),
}

/// One direction's framing: a head being read, or a body being skipped.
#[derive(Debug, Default)]
struct Framing {
    head: Vec<u8>,
    body: Option<Body>,
}

/// Skips body bytes; returns how many of `data` the body took and whether it is complete.
fn skip_body(body: &mut Body, data: &[u8]) -> (usize, bool) {
    match body {
        Body::UntilClose => (data.len(), false),
        Body::Length(left) => {
            let take = (*left).min(data.len() as u64);
            *left -= take;
            (take as usize, *left == 0)
        }
        Body::Chunked(chunk) => {
            let mut used = 0;
            while used < data.len() {
                match chunk {
                    Chunk::Size(line) => {
                        let b = data[used];
                        used += 1;
                        if b == b'\n' {
                            let text = String::from_utf8_lossy(line);
                            let hex = text.trim().split(';').next().unwrap_or("").trim().to_string();
                            let Ok(size) = u64::from_str_radix(&hex, 16) else {
                                // Not chunked framing we can follow: treat as ended.
                                return (used, true);
                            };
                            *chunk = if size == 0 { Chunk::Trailer(Vec::new()) } else { Chunk::Data(size) };
                        } else if line.len() < 1024 {
                            line.push(b);
                        }
                    }
                    Chunk::Data(left) => {
                        let take = (*left).min((data.len() - used) as u64);
                        *left -= take;
                        used += take as usize;
                        if *left == 0 {
                            *chunk = Chunk::DataEnd(2);
                        }
                    }
                    Chunk::DataEnd(left) => {
                        used += 1;
                        *left -= 1;
                        if *left == 0 {
                            *chunk = Chunk::Size(Vec::new());
                        }
                    }
                    Chunk::Trailer(line) => {
                        let b = data[used];
                        used += 1;
                        if b == b'\n' {
                            if line.iter().all(|&c| c == b'\r') {
                                return (used, true);
                            }
                            line.clear();
                        } else if line.len() < 1024 {
                            line.push(b);
                        }
                    }
                }
            }
            (used, false)
        }
    }
}

/// A parsed message head: the start line's first two words (method and target, or version and
/// status) and the framing headers. Borrowed from the bytes read: parsing allocates nothing.
struct Head<'a> {
    first: &'a [u8],
    second: &'a [u8],
    content_length: Option<u64>,
    chunked: bool,
}

fn parse_head(bytes: &[u8]) -> Head<'_> {
    let mut lines = bytes.split(|&b| b == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let mut words = lines.next().unwrap_or_default().split(|&b| b == b' ');
    let (first, second) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let (mut content_length, mut chunked) = (None, false);
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (name, value) = (line[..colon].trim_ascii(), line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        } else if name.eq_ignore_ascii_case(b"transfer-encoding")
            && value.windows(7).any(|w| w.eq_ignore_ascii_case(b"chunked"))
        {
            chunked = true;
        }
    }
    Head { first, second, content_length, chunked }
}

/// What [`feed`] found.
enum Found<'a> {
    /// A complete head: the callback returns the body that follows (`None`: none), or `Err`
    /// when the stream is not to be followed further.
    Head(&'a Head<'a>),
    /// A message (head and body) is complete.
    End,
}

/// Reads heads and bodies from `data` into `framing`, telling `on` of each complete head and
/// each complete message; `false` if the stream is not followable (a head over
/// [`HEAD_BYTES_MAX`], or `on` said so).
fn feed(framing: &mut Framing, mut data: &[u8], on: &mut dyn FnMut(Found<'_>) -> Result<Option<Body>, ()>) -> bool {
    while !data.is_empty() {
        if let Some(body) = framing.body.as_mut() {
            let (used, done) = skip_body(body, data);
            data = &data[used..];
            if done {
                framing.body = None;
                let _ = on(Found::End);
            }
            continue;
        }
        // Reading a head: up to the empty line (read in place when all of it came at once).
        let (verdict, consumed) = if framing.head.is_empty()
            && let Some(end) = find_head_end(data, 0)
        {
            (on(Found::Head(&parse_head(&data[..end]))), end)
        } else {
            let before = framing.head.len();
            framing.head.extend_from_slice(data);
            let Some(end) = find_head_end(&framing.head, before.saturating_sub(3)) else {
                return framing.head.len() <= HEAD_BYTES_MAX;
            };
            let verdict = on(Found::Head(&parse_head(&framing.head[..end])));
            framing.head.clear();
            (verdict, end - before)
        };
        data = &data[consumed..];
        match verdict {
            Err(()) => return false,
            Ok(None) => {
                let _ = on(Found::End);
            }
            Ok(Some(body)) => framing.body = Some(body),
        }
    }
    true
}

/// The index just past the `\r\n\r\n` that ends a head, searching from `from`.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| from + p + 4)
}

/// HTTP/1.x on one connection.
#[derive(Debug, Default)]
pub(crate) struct Http1 {
    requests: Framing,
    responses: Framing,
    /// Requests whose head was read and whose final response is not complete: "METHOD path".
    owed: std::collections::VecDeque<String>,
    /// A request's final response head was written and its body is under way.
    answering: bool,
}

impl Http1 {
    fn inbound(&mut self, data: &[u8]) -> bool {
        let owed = &mut self.owed;
        feed(&mut self.requests, data, &mut |found| {
            let Found::Head(head) = found else { return Ok(None) };
            if head.first == b"CONNECT" {
                return Err(());
            }
            let mut request = String::from_utf8_lossy(head.first).into_owned();
            request.push(' ');
            request.push_str(&String::from_utf8_lossy(head.second));
            owed.push_back(request);
            Ok(match (head.chunked, head.content_length) {
                (true, _) => Some(Body::Chunked(Chunk::Size(Vec::new()))),
                (false, Some(n)) if n > 0 => Some(Body::Length(n)),
                _ => None,
            })
        })
    }

    fn outbound(&mut self, data: &[u8]) -> bool {
        let (owed, answering) = (&mut self.owed, &mut self.answering);
        feed(&mut self.responses, data, &mut |found| {
            let head = match found {
                Found::End => {
                    if std::mem::take(answering) {
                        owed.pop_front();
                    }
                    return Ok(None);
                }
                Found::Head(head) => head,
            };
            let status: u16 = std::str::from_utf8(head.second).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
            if status == 101 {
                return Err(());
            }
            if (100..200).contains(&status) {
                // Interim: the final response is still to come; no body.
                *answering = false;
                return Ok(None);
            }
            *answering = true;
            let head_request = owed.front().is_some_and(|r| r.starts_with("HEAD "));
            Ok(if head_request || status == 204 || status == 304 {
                None
            } else if head.chunked {
                Some(Body::Chunked(Chunk::Size(Vec::new())))
            } else {
                match head.content_length {
                    Some(0) => None,
                    Some(n) => Some(Body::Length(n)),
                    None => Some(Body::UntilClose),
                }
            })
        })
    }

    /// The requests still owed a response if the server closed now (a body sent to the close is
    /// complete then).
    fn owed_requests(&self) -> impl Iterator<Item = &str> {
        let closing_ends_one = self.answering && self.responses.body == Some(Body::UntilClose);
        self.owed.iter().skip(usize::from(closing_ends_one)).map(String::as_str)
    }
}

/// One direction of an HTTP/2 connection: the frame being read.
#[derive(Debug, Default)]
struct Frames {
    /// The 9-byte frame header so far.
    header: Vec<u8>,
    /// Payload bytes of the current frame still to skip.
    skip: usize,
    /// The current frame's first payload bytes, when they are wanted (a GOAWAY's last stream id).
    want: Option<(u8, Vec<u8>)>,
}

/// A frame header: (type, flags, stream id, payload length).
type FrameHeader = (u8, u8, u32, usize);

impl Frames {
    /// Feeds bytes; calls `on_frame` with each frame header when it is complete and, for a
    /// GOAWAY (type 7), with its first 4 payload bytes once read.
    fn feed(&mut self, mut data: &[u8], on_frame: &mut dyn FnMut(FrameHeader, &[u8])) {
        while !data.is_empty() {
            if self.skip > 0 {
                let take = self.skip.min(data.len());
                if let Some((kind, got)) = self.want.as_mut() {
                    let need = 4usize.saturating_sub(got.len()).min(take);
                    got.extend_from_slice(&data[..need]);
                    if got.len() == 4 {
                        let (kind, got) = (*kind, std::mem::take(got));
                        self.want = None;
                        on_frame((kind, 0, 0, 0), &got);
                    }
                }
                self.skip -= take;
                data = &data[take..];
                continue;
            }
            let need = 9 - self.header.len();
            let take = need.min(data.len());
            self.header.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.header.len() < 9 {
                return;
            }
            let h = std::mem::take(&mut self.header);
            let length = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            on_frame((h[3], h[4], stream, length), &[]);
            self.skip = length;
            if h[3] == 7 && length >= 4 {
                self.want = Some((7, Vec::new()));
            }
        }
    }
}

/// HTTP/2 on one connection (RFC 9113 §5.1's stream states, as far as the drain needs them).
#[derive(Debug, Default)]
pub(crate) struct Http2 {
    inbound: Frames,
    outbound: Frames,
    /// Streams the client opened and the server has not ended, and no one reset.
    open: BTreeSet<u32>,
    /// Streams that ended (so a trailing client frame on them does not reopen them).
    closed: BTreeSet<u32>,
    /// The last stream id of the server's GOAWAY, if it sent one.
    goaway_last: Option<u32>,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;

impl Http2 {
    fn inbound(&mut self, data: &[u8]) {
        let (open, closed) = (&mut self.open, &mut self.closed);
        self.inbound.feed(data, &mut |(kind, _flags, stream, _len), payload| {
            if !payload.is_empty() {
                return;
            }
            match kind {
                HEADERS if stream != 0 && !closed.contains(&stream) => {
                    open.insert(stream);
                }
                RST_STREAM => {
                    open.remove(&stream);
                    closed.insert(stream);
                }
                _ => {}
            }
        });
    }

    fn outbound(&mut self, data: &[u8]) {
        let (open, closed, goaway_last) = (&mut self.open, &mut self.closed, &mut self.goaway_last);
        self.outbound.feed(data, &mut |(kind, flags, stream, _len), payload| {
            if kind == GOAWAY && payload.len() == 4 {
                let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
                *goaway_last = Some(goaway_last.map_or(last, |g| g.min(last)));
                return;
            }
            let ends = (matches!(kind, HEADERS | DATA) && flags & END_STREAM != 0) || kind == RST_STREAM;
            if ends && stream != 0 {
                open.remove(&stream);
                closed.insert(stream);
            }
        });
    }

    fn owed_streams(&self) -> impl Iterator<Item = u32> + '_ {
        self.open.iter().copied().filter(|s| self.goaway_last.is_none_or(|g| *s <= g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(steps: &[(bool, &[u8])]) -> Exchange {
        let mut x = Exchange::default();
        for (inbound, data) in steps {
            if *inbound { x.inbound(data) } else { x.outbound(data) }
        }
        x
    }

    #[test]
    fn an_http1_request_is_in_flight_until_its_whole_response_is_written() {
        let req: &[u8] = b"PUT /kv/a HTTP/1.1\r\nhost: kv\r\ncontent-length: 3\r\n\r\nabc";
        let x = exchange(&[(true, req)]);
        assert_eq!(x.in_flight().as_deref(), Some("1 HTTP/1.1 request(s): PUT /kv/a"));
        let x = exchange(&[(true, req), (false, b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhe")]);
        assert!(x.in_flight().is_some(), "the body is not all written");
        let x = exchange(&[(true, req), (false, b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhe"), (false, b"llo")]);
        assert_eq!(x.in_flight(), None);
    }

    #[test]
    fn http1_keep_alive_chunked_and_interim_responses_are_followed() {
        let x = exchange(&[
            (
                true,
                b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            ),
            (false, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n"),
        ]);
        assert_eq!(x.in_flight().as_deref(), Some("2 HTTP/1.1 request(s): GET /a, POST /b"));
        let x = exchange(&[
            (
                true,
                b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            ),
            (false, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
            (false, b"HTTP/1.1 204 No Content\r\n\r\n"),
        ]);
        assert_eq!(x.in_flight(), None);
    }

    #[test]
    fn a_response_delimited_by_the_close_is_complete_when_the_server_closes() {
        let x = exchange(&[(true, b"GET / HTTP/1.0\r\n\r\n"), (false, b"HTTP/1.0 200 OK\r\n\r\npartial")]);
        assert_eq!(x.in_flight(), None);
    }

    #[test]
    fn other_protocols_are_not_followed() {
        let kafka: &[u8] = &[0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1];
        assert!(matches!(exchange(&[(true, kafka)]), Exchange::Opaque));
        assert!(matches!(exchange(&[(false, b"220 smtp ready\r\n"), (true, b"HELO x\r\n")]), Exchange::Opaque));
        let upgraded = exchange(&[
            (true, b"GET /ws HTTP/1.1\r\nupgrade: websocket\r\n\r\n"),
            (false, b"HTTP/1.1 101 Switching Protocols\r\n\r\n"),
            (true, b"\x81\x05hello"),
        ]);
        assert_eq!(upgraded.in_flight(), None);
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn an_http2_stream_is_in_flight_until_the_server_ends_or_refuses_it() {
        let mut client = H2_PREFACE.to_vec();
        client.extend(frame(4, 0, 0, &[])); // SETTINGS
        client.extend(frame(HEADERS, 0x4, 1, b"hdrs"));
        client.extend(frame(HEADERS, 0x4 | END_STREAM, 3, b"hdrs"));
        client.extend(frame(HEADERS, 0x4 | END_STREAM, 5, b"hdrs"));
        // Split anywhere: the parser keeps its place across reads.
        let (a, b) = client.split_at(30);
        let mut x = exchange(&[(true, a), (true, b)]);
        assert_eq!(x.in_flight().as_deref(), Some("3 HTTP/2 stream(s): 1, 3, 5"));
        x.outbound(&frame(HEADERS, 0x4, 1, b"resp"));
        x.outbound(&frame(DATA, END_STREAM, 1, b"body"));
        x.outbound(&frame(RST_STREAM, 0, 3, &[0, 0, 0, 8]));
        assert_eq!(x.in_flight().as_deref(), Some("1 HTTP/2 stream(s): 5"));
        // GOAWAY with last stream id 3: stream 5 was refused, the client may retry it.
        x.outbound(&frame(GOAWAY, 0, 0, &[0, 0, 0, 3, 0, 0, 0, 0]));
        assert_eq!(x.in_flight(), None);
    }
}
