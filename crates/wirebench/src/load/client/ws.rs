//! A client's WebSocket over its connection (ws://, or wss://: rustls over the same socket), on
//! a non-blocking `mio` socket driven by the worker's event loop (`load/workers.rs`). Every
//! call returns at once: `Poll::Pending` (or [`Dialed::Pending`]) means "wait for the socket's
//! next readiness".
//!
//! Opening ([`Dial`]): TCP's connect, TLS's handshake for wss:// (rustls, as far as each
//! readiness allows), then the WebSocket handshake (tungstenite's, resumed where a read or
//! write would have blocked). Open ([`Ws`]): frames are read into a per-connection buffer that
//! only the socket fills and parsed where they lie (`wirebench_core::load::ws`), so a message
//! reaches the client as a slice, without a copy or an allocation; pings are answered,
//! fragments joined, sizes capped at `MAX_MESSAGE`, text checked as UTF-8, and the close
//! handshake kept.
//! `bench/autobahn.sh` runs the Autobahn test suite against this code.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;

use tokio_rustls::rustls::{ClientConnection, StreamOwned};
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::handshake::{HandshakeError, MidHandshake};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, ClientHandshake, Error, WebSocket};
use wirebench_core::load::ws as frame;
use wirebench_core::rng::SplitMix64;

use crate::limits::{MAX_MESSAGE, READ_CHUNK};

/// The TCP socket, with its read readiness tracked as tokio tracks it: a read that returns
/// less than it asked for has emptied the socket, so the next read waits
/// for the next readable event instead of a system call that would say `WouldBlock`. (New
/// data after that read raises a new edge, so nothing is missed.)
#[derive(Debug)]
pub(in crate::load) struct Tcp {
    sock: mio::net::TcpStream,
    readable: bool,
    /// The peer closed its side (or the socket failed): reads always go to the socket, whose
    /// end or error no later event would announce.
    closed: bool,
}

impl Read for Tcp {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.readable {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let r = self.sock.read(buf);
        match &r {
            // 0: the end, which stays readable (every later read says 0 again)
            Ok(n) if *n > 0 && *n < buf.len() => self.readable = self.closed,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = self.closed,
            _ => {}
        }
        r
    }
}

impl Write for Tcp {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// The connection: a non-blocking socket, TLS or not.
#[derive(Debug)]
pub(super) enum Sock {
    /// ws://
    Plain(Tcp),
    /// wss://: a rustls session over the socket.
    Tls(Box<StreamOwned<ClientConnection, Tcp>>),
}

impl Sock {
    fn tcp(&mut self) -> &mut Tcp {
        match self {
            Self::Plain(s) => s,
            Self::Tls(t) => &mut t.sock,
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(t) => t.flush(),
        }
    }
}

/// The connection during the handshake: every byte read through it is kept (the response
/// head, and any frame behind it).
#[derive(Debug)]
pub(in crate::load) struct Rec {
    sock: Sock,
    seen: Vec<u8>,
}

impl Read for Rec {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.seen.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Write for Rec {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// A connection being opened.
#[derive(Debug)]
pub(in crate::load) enum Dial {
    /// TCP's connect is under way.
    Tcp(Rec, Box<Request>, WebSocketConfig),
    /// wss://: TLS's handshake is under way.
    Tls(Rec, Box<Request>, WebSocketConfig),
    /// The WebSocket handshake is under way.
    Shake(MidHandshake<ClientHandshake<Rec>>),
    /// Finished (opened or failed).
    Spent,
}

/// Where an opening stands (a return value, moved once per connection).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(in crate::load) enum Dialed {
    /// Waiting for the socket's next readiness.
    Pending,
    /// Open, with the server's 101.
    Open(Ws, Box<Response>),
    /// TCP could not connect.
    NoTcp,
    /// TLS's handshake failed (rustls' error inside, where it has one).
    NoTls(io::Error),
    /// The WebSocket handshake failed.
    Failed(Error),
}

impl Dial {
    /// Starts TCP's connect to `addr` (non-blocking); `tls`: the session to run over it.
    pub(in crate::load) fn start(
        addr: SocketAddr,
        tls: Option<ClientConnection>,
        request: Request,
        config: WebSocketConfig,
    ) -> io::Result<Self> {
        let sock = mio::net::TcpStream::connect(addr)?;
        let _ = sock.set_nodelay(true);
        let tcp = Tcp { sock, readable: true, closed: false };
        let sock = match tls {
            None => Sock::Plain(tcp),
            Some(c) => Sock::Tls(Box::new(StreamOwned::new(c, tcp))),
        };
        Ok(Self::Tcp(Rec { sock, seen: Vec::new() }, Box::new(request), config))
    }

    fn rec(&mut self) -> Option<&mut Rec> {
        match self {
            Self::Tcp(rec, ..) | Self::Tls(rec, ..) => Some(rec),
            Self::Shake(m) => Some(m.get_mut().get_mut()),
            Self::Spent => None,
        }
    }

    /// The TCP socket, to register with the event loop.
    pub(in crate::load) fn tcp(&mut self) -> Option<&mut mio::net::TcpStream> {
        self.rec().map(|r| &mut r.sock.tcp().sock)
    }

    /// The socket had a readiness event (`read`: not writable only; `closed`: the peer's
    /// end or an error came with it): the opening goes as far as it can.
    pub(in crate::load) fn ready(&mut self, read: bool, closed: bool) -> Dialed {
        if let Some(rec) = self.rec().filter(|_| read) {
            let tcp = rec.sock.tcp();
            tcp.readable = true;
            tcp.closed |= closed;
        }
        match std::mem::replace(self, Self::Spent) {
            Self::Tcp(mut rec, request, config) => {
                // Connected once the socket has a peer; before that, an error says why not.
                let sock = &rec.sock.tcp().sock;
                if !matches!(sock.take_error(), Ok(None)) {
                    return Dialed::NoTcp;
                }
                match sock.peer_addr() {
                    Ok(_) => self.tls(rec, request, config),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        *self = Self::Tcp(rec, request, config);
                        Dialed::Pending
                    }
                    Err(_) => Dialed::NoTcp,
                }
            }
            Self::Tls(rec, request, config) => self.tls(rec, request, config),
            Self::Shake(m) => self.shake(m.handshake()),
            Self::Spent => Dialed::Pending,
        }
    }

    /// TLS's handshake as far as the socket allows (at once for ws://), then the WebSocket's.
    fn tls(&mut self, mut rec: Rec, request: Box<Request>, config: WebSocketConfig) -> Dialed {
        if let Sock::Tls(t) = &mut rec.sock {
            while t.conn.is_handshaking() {
                match t.conn.complete_io(&mut t.sock) {
                    // progress: go on until done or the socket would block
                    Ok((r, w)) if r + w > 0 => {}
                    Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Dialed::NoTls(e),
                    _ => {
                        *self = Self::Tls(rec, request, config);
                        return Dialed::Pending;
                    }
                }
            }
        }
        self.shake(tungstenite::client::client_with_config(*request, rec, Some(config)))
    }

    /// A step of the WebSocket handshake: done (the connection taken over), interrupted
    /// (kept for the next readiness), or failed.
    fn shake(&mut self, r: Result<(WebSocket<Rec>, Response), HandshakeError<ClientHandshake<Rec>>>) -> Dialed {
        match r {
            Ok((ws, resp)) => match detach(ws) {
                Ok(ws) => Dialed::Open(ws, Box::new(resp)),
                Err(e) => Dialed::Failed(e),
            },
            Err(HandshakeError::Interrupted(m)) => {
                *self = Self::Shake(m);
                Dialed::Pending
            }
            Err(HandshakeError::Failure(e)) => Dialed::Failed(e),
        }
    }
}

/// Why an open connection failed.
#[derive(Debug)]
pub(in crate::load) enum WsError {
    /// The socket failed.
    Io(io::Error),
    /// The server broke the protocol (a close frame with code 1002 was sent).
    Protocol(&'static str),
    /// The connection ended without the close handshake.
    Reset,
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Protocol(why) => write!(f, "protocol error: {why}"),
            Self::Reset => f.write_str("the connection ended without the close handshake"),
        }
    }
}

/// What an open connection read.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::load) enum In<'a> {
    /// A whole message, text (valid UTF-8) or binary, in the connection's buffer until the
    /// next call.
    Data { text: bool, payload: &'a [u8] },
    /// The server's close frame and its code (answered already, unless this side closed first).
    Close(Option<u16>),
}

/// Where a complete frame left what it carried.
enum Got {
    /// A whole message in the read buffer.
    Here(bool, std::ops::Range<usize>),
    /// A whole message put together from fragments.
    Whole(bool),
    Close(Option<u16>),
    /// A control frame answered, or a fragment kept.
    Nothing,
}

/// An open WebSocket, driven by readiness: every call returns at once. Frames are read into a
/// buffer that is filled only by the socket (never cleared) and parsed where they lie; a
/// message is handed on as a slice of it. Writes are framed and masked into one buffer
/// that the socket drains.
#[derive(Debug)]
pub(in crate::load) struct Ws {
    sock: Sock,
    /// `rbuf[start..end]`: read, not yet parsed. `READ_CHUNK` long, grown only to hold one
    /// frame larger than that, and shrunk again once it is read.
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// The opcode of a fragmented message under way; its payload so far is in `whole`, of
    /// which `whole[..checked]` is known to be whole UTF-8 characters (text).
    frag: Option<u8>,
    whole: Vec<u8>,
    checked: usize,
    /// Frames to write: `out[sent..]` is what the socket has not taken yet.
    out: Vec<u8>,
    sent: usize,
    /// The socket did not take everything: the rest waits for it to be writable.
    pub(super) blocked: bool,
    /// This side's close frame is written: nothing follows it.
    close_sent: bool,
    /// The server's close frame arrived: nothing after it is read.
    close_got: bool,
    /// The stream ended (closed, or an error was returned): `next` says `None` from now on.
    ended: bool,
    /// Masking keys (RFC 6455 section 5.3: a new, unpredictable key for every frame).
    keys: SplitMix64,
}

/// A masking-key stream's seed: a different one for every connection, from the OS random
/// generator once per process.
fn key_seed() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| {
        let mut b = [0u8; 8];
        // without an OS generator: the clock, which still differs from run to run
        if getrandom::fill(&mut b).is_err() {
            b = wirebench_core::units::nanos(std::time::UNIX_EPOCH.elapsed().unwrap_or_default()).to_ne_bytes();
        }
        u64::from_ne_bytes(b)
    });
    SplitMix64::new(base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))).next_u64()
}

/// The connection after its handshake, with the bytes read after the response head (a
/// frame the server sent behind its 101 stays first in line).
fn detach(ws: WebSocket<Rec>) -> Result<Ws, Error> {
    let rec = ws.into_inner();
    let head = wirebench_core::room::response_head_len(&rec.seen)
        .ok_or_else(|| Error::Io(io::Error::other("the response head was not found again")))?;
    Ok(Ws::new(rec.sock, &rec.seen[head..]))
}

impl Ws {
    fn new(sock: Sock, tail: &[u8]) -> Self {
        let mut rbuf = vec![0; READ_CHUNK.max(tail.len())];
        rbuf[..tail.len()].copy_from_slice(tail);
        Self {
            sock,
            rbuf,
            start: 0,
            end: tail.len(),
            frag: None,
            whole: Vec::new(),
            checked: 0,
            out: Vec::new(),
            sent: 0,
            blocked: false,
            close_sent: false,
            close_got: false,
            ended: false,
            keys: SplitMix64::new(key_seed()),
        }
    }

    /// The next message or close frame; `Pending` until the socket is readable again; `None`
    /// once the connection is closed or after an error. Pings are answered here.
    pub(super) fn next(&mut self) -> Poll<Option<Result<In<'_>, WsError>>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            if self.close_got {
                self.start = self.end;
            }
            match frame::head(&self.rbuf[self.start..self.end], MAX_MESSAGE) {
                Err(why) => return self.fail(why.into()),
                Ok(Some(h)) if h.total() <= self.end - self.start => {
                    let at = self.start + h.at;
                    self.start += h.total();
                    match self.take(h, at) {
                        Err(why) => return self.fail(why),
                        Ok(Got::Nothing) => {}
                        Ok(Got::Close(code)) => return Poll::Ready(Some(Ok(In::Close(code)))),
                        Ok(Got::Here(text, r)) => {
                            return Poll::Ready(Some(Ok(In::Data { text, payload: &self.rbuf[r] })));
                        }
                        Ok(Got::Whole(text)) => return Poll::Ready(Some(Ok(In::Data { text, payload: &self.whole }))),
                    }
                    continue;
                }
                Ok(h) => self.make_room(h.map_or(0, |h| h.total())),
            }
            debug_assert!(self.end < self.rbuf.len(), "room to read: a read of 0 bytes is the end");
            match self.sock.read(&mut self.rbuf[self.end..]) {
                Ok(0) => {
                    self.ended = true;
                    return Poll::Ready(if self.close_got { None } else { Some(Err(WsError::Reset)) });
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(WsError::Io(e))));
                }
            }
        }
    }

    /// A complete frame `h` whose payload starts at `rbuf[at]`.
    fn take(&mut self, h: frame::Head, at: usize) -> Result<Got, Fault> {
        let r = at..at + h.len;
        match h.opcode {
            frame::PING => {
                if !self.close_sent {
                    let key = self.key();
                    frame::write(&mut self.out, frame::PONG, &self.rbuf[r], key);
                    // a write that fails shows at the next read
                    let _ = self.flush();
                }
                Ok(Got::Nothing)
            }
            frame::PONG => Ok(Got::Nothing),
            frame::CLOSE => {
                let code = frame::close_code(&self.rbuf[r])?;
                self.close_got = true;
                if !self.close_sent {
                    // the reply echoes the code; a write that fails shows at the next read
                    let _ = self.close(code);
                }
                Ok(Got::Close(code))
            }
            op @ (frame::TEXT | frame::BINARY) => {
                if self.frag.is_some() {
                    return Err("a new message inside a fragmented one".into());
                }
                let text = op == frame::TEXT;
                if h.fin {
                    if text {
                        utf8(&self.rbuf[r.clone()])?;
                    }
                    return Ok(Got::Here(text, r));
                }
                self.frag = Some(op);
                self.whole.clear();
                self.checked = 0;
                self.whole.extend_from_slice(&self.rbuf[r]);
                self.check_fragment(text, false)?;
                Ok(Got::Nothing)
            }
            _ => {
                let Some(op) = self.frag else { return Err("a continuation outside a fragmented message".into()) };
                if self.whole.len() + h.len > MAX_MESSAGE {
                    return Err("a message over the size limit".into());
                }
                self.whole.extend_from_slice(&self.rbuf[r]);
                let text = op == frame::TEXT;
                self.check_fragment(text, h.fin)?;
                if !h.fin {
                    return Ok(Got::Nothing);
                }
                self.frag = None;
                Ok(Got::Whole(text))
            }
        }
    }

    /// A text message's fragments are checked as they arrive, so bad UTF-8 fails the
    /// connection at the fragment that has it; a character cut by a fragment's end waits
    /// for the next (`last`: there is none).
    fn check_fragment(&mut self, text: bool, last: bool) -> Result<(), Fault> {
        if !text {
            return Ok(());
        }
        match std::str::from_utf8(&self.whole[self.checked..]) {
            Ok(_) => self.checked = self.whole.len(),
            Err(e) if e.error_len().is_none() && !last => self.checked += e.valid_up_to(),
            Err(_) => return Err(NOT_UTF8),
        }
        Ok(())
    }

    /// The read buffer made ready for a read: what is unparsed moved to its front, its
    /// length at least `need` (a frame longer than the buffer), back to `READ_CHUNK` once
    /// a large frame is read.
    fn make_room(&mut self, need: usize) {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            if self.rbuf.len() > READ_CHUNK && need <= READ_CHUNK {
                self.rbuf = vec![0; READ_CHUNK];
            }
            if self.whole.capacity() > READ_CHUNK && self.frag.is_none() {
                self.whole = Vec::new();
            }
        } else if self.start > 0 {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if need > self.rbuf.len() {
            self.rbuf.resize(need, 0);
        }
    }

    /// A protocol error: a close frame with its code as the connection is failed (RFC 6455
    /// section 7.1.7), then the error.
    fn fail(&mut self, f: Fault) -> Poll<Option<Result<In<'_>, WsError>>> {
        self.ended = true;
        if !self.close_sent {
            let _ = self.close(Some(f.code));
        }
        Poll::Ready(Some(Err(WsError::Protocol(f.why))))
    }

    fn key(&mut self) -> [u8; 4] {
        let [a, b, c, d, ..] = self.keys.next_u64().to_ne_bytes();
        [a, b, c, d]
    }

    /// Frames a message (`text` or binary) behind what waits to be written and writes as much
    /// as the socket takes; what it does not take waits, `blocked` set.
    pub(super) fn send(&mut self, text: bool, payload: &[u8]) -> Result<(), WsError> {
        if self.close_sent {
            return Err(WsError::Protocol("a message after the close frame"));
        }
        let key = self.key();
        frame::write(&mut self.out, if text { frame::TEXT } else { frame::BINARY }, payload, key);
        self.flush()
    }

    /// Writes whatever waits (blocked frames, pong and close replies); what the socket does
    /// not take now stays, `blocked` set.
    pub(super) fn flush(&mut self) -> Result<(), WsError> {
        while self.sent < self.out.len() {
            match self.sock.write(&self.out[self.sent..]) {
                Ok(0) => return Err(WsError::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(WsError::Io(e)),
            }
        }
        self.out.clear();
        self.sent = 0;
        if self.out.capacity() > 16 * READ_CHUNK {
            self.out = Vec::new();
        }
        // wss://: the records rustls holds
        match self.sock.flush() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.blocked = true,
            Err(e) => return Err(WsError::Io(e)),
            Ok(()) => self.blocked = false,
        }
        Ok(())
    }

    /// Sends this side's close frame with `code` (`None`: none) once; the server's reply
    /// is read by `next`.
    pub(super) fn close(&mut self, code: Option<u16>) -> Result<(), WsError> {
        if !self.close_sent {
            self.close_sent = true;
            let key = self.key();
            let code = code.map(u16::to_be_bytes);
            frame::write(&mut self.out, frame::CLOSE, code.as_ref().map_or(&[][..], |c| &c[..]), key);
        }
        self.flush()
    }

    /// The TCP socket underneath.
    pub(super) fn tcp(&mut self) -> &mut mio::net::TcpStream {
        &mut self.sock.tcp().sock
    }

    /// The socket had a readiness event (`closed`: the peer's end or an error came with
    /// it): reads try the socket again.
    pub(super) fn readable(&mut self, closed: bool) {
        let tcp = self.sock.tcp();
        tcp.readable = true;
        tcp.closed |= closed;
    }
}

/// Why a connection is failed, and the close code that says so (RFC 6455 section 7.4.1):
/// 1002 for a protocol error, 1007 for text that is not UTF-8.
#[derive(Debug, Clone, Copy)]
struct Fault {
    why: &'static str,
    code: u16,
}

impl From<&'static str> for Fault {
    fn from(why: &'static str) -> Self {
        Self { why, code: 1002 }
    }
}

/// The error for text that is not UTF-8.
const NOT_UTF8: Fault = Fault { why: "a text message that is not UTF-8", code: 1007 };

fn utf8(b: &[u8]) -> Result<(), Fault> {
    std::str::from_utf8(b).map(|_| ()).map_err(|_| NOT_UTF8)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::oneshot;
    use tokio::task::block_in_place;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
    use tokio_tungstenite::tungstenite::{Bytes, Message};

    use super::*;

    const BOUND: Duration = Duration::from_secs(10);

    /// A loopback WebSocket server running `serve` on its one connection.
    async fn server<F, Fut, T>(serve: F) -> (std::net::SocketAddr, tokio::task::JoinHandle<T>)
    where
        F: FnOnce(tokio_tungstenite::WebSocketStream<TcpStream>) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send,
        T: Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            serve(tokio_tungstenite::accept_async(sock).await.unwrap()).await
        });
        (addr, task)
    }

    /// The event loop's part, for one connection: its readiness, waited for (bounded).
    struct Driver {
        poll: mio::Poll,
        events: mio::Events,
    }

    impl Driver {
        /// Opens a connection to `addr` as the event loop does (bounded), watched by a new
        /// driver.
        fn dial(addr: std::net::SocketAddr) -> (Ws, Self) {
            Self::dial_to(addr, &format!("ws://{addr}/rooms/t"))
        }

        /// As [`Self::dial`], to `url` (its host is `addr`).
        fn dial_to(addr: std::net::SocketAddr, url: &str) -> (Ws, Self) {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
            let request = url.into_client_request().unwrap();
            let mut dial = Dial::start(addr, None, request, crate::limits::ws_config()).unwrap();
            let poll = mio::Poll::new().unwrap();
            let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
            poll.registry().register(dial.tcp().unwrap(), mio::Token(0), interest).unwrap();
            let mut d = Self { poll, events: mio::Events::with_capacity(8) };
            let deadline = Instant::now() + BOUND;
            loop {
                let left = deadline.checked_duration_since(Instant::now()).expect("bounded");
                d.poll.poll(&mut d.events, Some(left)).unwrap();
                let closed = d.events.iter().any(|e| e.is_read_closed() || e.is_error());
                let read = closed || d.events.iter().any(mio::event::Event::is_readable);
                match dial.ready(read, closed) {
                    Dialed::Pending => {}
                    Dialed::Open(ws, resp) => {
                        assert_eq!(resp.status(), 101);
                        return (ws, d);
                    }
                    other => panic!("the handshake failed: {other:?}"),
                }
            }
        }

        /// `f` until it is ready, the socket's next readiness awaited after each `Pending`.
        fn until<T>(&mut self, ws: &mut Ws, mut f: impl FnMut(&mut Ws) -> Poll<T>) -> T {
            let deadline = Instant::now() + BOUND;
            loop {
                if let Poll::Ready(t) = f(ws) {
                    return t;
                }
                self.wait(ws, deadline);
            }
        }

        /// One wait for readiness, told to the connection as the event loop tells it.
        fn wait(&mut self, ws: &mut Ws, deadline: Instant) {
            let left = deadline.checked_duration_since(Instant::now()).expect("bounded");
            self.poll.poll(&mut self.events, Some(left)).unwrap();
            if !self.events.is_empty() {
                ws.readable(self.events.iter().any(|e| e.is_read_closed() || e.is_error()));
            }
        }

        /// The next message or close, owned.
        fn next(&mut self, ws: &mut Ws) -> Option<Result<Got, WsError>> {
            self.until(ws, |ws| {
                ws.next().map(|o| {
                    o.map(|r| {
                        r.map(|i| match i {
                            In::Data { text: true, payload } => Got::Text(String::from_utf8(payload.to_vec()).unwrap()),
                            In::Data { text: false, payload } => Got::Binary(payload.to_vec()),
                            In::Close(code) => Got::Close(code),
                        })
                    })
                })
            })
        }

        /// Flushes until the socket took everything.
        fn flush(&mut self, ws: &mut Ws) {
            self.until(ws, |ws| {
                ws.flush().unwrap();
                if ws.blocked { Poll::Pending } else { Poll::Ready(()) }
            });
        }
    }

    fn normal() -> CloseFrame {
        CloseFrame { code: CloseCode::Normal, reason: "".into() }
    }

    /// The server's side read to its end: the code of the client's close frame, if one came.
    async fn close_code_of(mut ws: tokio_tungstenite::WebSocketStream<TcpStream>) -> Option<u16> {
        let mut code = None;
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Close(f) = m {
                code = f.map(|f| u16::from(f.code));
            }
        }
        code
    }

    /// What [`Ws::next`] handed on, owned.
    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        Text(String),
        Binary(Vec<u8>),
        Close(Option<u16>),
    }

    fn text(s: &str) -> Got {
        Got::Text(s.to_owned())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pings_fragments_and_the_close_handshake_go_through_the_engine() {
        let run = async {
            let (addr, srv) = server(|mut ws| async move {
                ws.send(Message::Ping(Bytes::from_static(b"p1"))).await.unwrap();
                ws.send(Message::Frame(Frame::message(&b"hel"[..], OpCode::Data(Data::Text), false))).await.unwrap();
                ws.send(Message::Frame(Frame::message(&b"lo"[..], OpCode::Data(Data::Continue), true))).await.unwrap();
                ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
                let mut got = Vec::new();
                while let Some(Ok(m)) = ws.next().await {
                    got.push(m);
                }
                got
            })
            .await;
            block_in_place(|| {
                let (mut ws, mut d) = Driver::dial(addr);
                // the ping is answered, not handed on
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), text("hello"), "fragments are one message");
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Got::Binary(vec![1, 2, 3]));
                ws.send(true, b"up").unwrap();
                d.flush(&mut ws);
                ws.close(Some(1000)).unwrap();
                d.flush(&mut ws);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Got::Close(Some(1000)), "the server's reply");
                assert!(d.next(&mut ws).is_none(), "then the server closes TCP");
                assert!(d.next(&mut ws).is_none(), "and the stream stays ended");
            });
            let got = srv.await.unwrap();
            assert_eq!(
                got,
                [Message::Pong(Bytes::from_static(b"p1")), Message::text("up"), Message::Close(Some(normal()))]
            );
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    /// The engine is rebuilt after the handshake (off the runtime, a smaller read buffer): a
    /// frame the server wrote in the same segment as its 101 must still come first, and the
    /// server's close with its end of TCP in one segment must still be seen.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_frame_behind_the_101_is_read_first() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let run = async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (go, wait) = oneshot::channel::<()>();
            let (closed, was_closed) = std::sync::mpsc::channel::<()>();
            let srv = tokio::spawn(async move {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut req = Vec::new();
                while !req.ends_with(b"\r\n\r\n") {
                    let mut b = [0u8; 1];
                    assert_eq!(sock.read(&mut b).await.unwrap(), 1, "the request ended early");
                    req.push(b[0]);
                }
                let req = String::from_utf8(req).unwrap();
                let key = req
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("Sec-WebSocket-Key: ").or_else(|| l.strip_prefix("sec-websocket-key: "))
                    })
                    .unwrap();
                let accept = tungstenite::handshake::derive_accept_key(key.trim().as_bytes());
                let mut out = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                     Sec-WebSocket-Accept: {accept}\r\n\r\n"
                )
                .into_bytes();
                out.extend_from_slice(b"\x81\x05first\x81\x06second");
                sock.write_all(&out).await.unwrap(); // one write: one segment on loopback
                let _ = wait.await;
                // the client's close (masked: 2 + 4 + 2 bytes), then the reply (1000) and the
                // end of TCP right behind it
                let mut close = [0u8; 8];
                sock.read_exact(&mut close).await.unwrap();
                assert_eq!(close[0], 0x88, "a close frame");
                sock.write_all(b"\x88\x02\x03\xe8").await.unwrap();
                drop(sock);
                closed.send(()).unwrap();
            });
            block_in_place(|| {
                let (mut ws, mut d) = Driver::dial(addr);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), text("first"));
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), text("second"));
                go.send(()).unwrap();
                ws.close(Some(1000)).unwrap();
                d.flush(&mut ws);
                // The reply and the end arrive before the client looks: one readiness event
                // says both, and the end must still be read after the reply.
                was_closed.recv_timeout(BOUND).unwrap();
                d.wait(&mut ws, Instant::now() + BOUND);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Got::Close(Some(1000)));
                assert!(d.next(&mut ws).is_none(), "then the end, not a wait");
            });
            srv.await.unwrap();
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_would_block_is_kept_and_flushed_when_the_server_reads() {
        let run = async {
            let (go, wait) = oneshot::channel::<()>();
            let (addr, srv) = server(|mut ws| async move {
                let _ = wait.await;
                let mut got = Vec::new();
                while let Some(Ok(m)) = ws.next().await {
                    if let Message::Binary(b) = m {
                        got.push((b.len(), b[0]));
                    }
                }
                got
            })
            .await;
            let sent = block_in_place(|| {
                let (mut ws, mut d) = Driver::dial(addr);
                // The server does not read yet: fill the socket until a write would block
                // (loopback buffers hold a few MB; bounded).
                let mut sent = 0u8;
                while !ws.blocked {
                    assert!(sent < 200, "the socket never filled");
                    ws.send(false, &vec![sent; 256 * 1024]).unwrap();
                    sent += 1;
                }
                ws.flush().unwrap();
                assert!(ws.blocked, "nothing more can be written while the server waits");
                go.send(()).unwrap();
                d.flush(&mut ws);
                assert!(!ws.blocked);
                ws.close(Some(1000)).unwrap();
                d.flush(&mut ws);
                while d.next(&mut ws).is_some() {}
                sent
            });
            let got = srv.await.unwrap();
            let want: Vec<(usize, u8)> = (0..sent).map(|i| (256 * 1024, i)).collect();
            assert_eq!(got, want, "every frame once, whole and in order");
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    /// A frame larger than the read buffer is read whole (the buffer grows for it and
    /// shrinks back); text that is not UTF-8 fails the connection with close code 1007.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_frame_is_read_whole_and_bad_text_fails_with_1007() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let run = async {
            let sent = big.clone();
            let (addr, srv) = server(|mut ws| async move {
                ws.send(Message::binary(sent)).await.unwrap();
                ws.send(Message::text("small")).await.unwrap();
                match ws.next().await {
                    Some(Ok(Message::Text(t))) if t.as_str() == "go" => {}
                    other => panic!("not the client's go: {other:?}"),
                }
                let bad = Frame::message(vec![b'a', 0xff], OpCode::Data(Data::Text), true);
                ws.send(Message::Frame(bad)).await.unwrap();
                close_code_of(ws).await
            })
            .await;
            block_in_place(|| {
                let (mut ws, mut d) = Driver::dial(addr);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Got::Binary(big));
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), text("small"));
                ws.send(true, b"go").unwrap();
                d.flush(&mut ws);
                match d.next(&mut ws) {
                    Some(Err(WsError::Protocol(why))) => assert_eq!(why, NOT_UTF8.why),
                    other => panic!("not a protocol error: {other:?}"),
                }
                assert_eq!(ws.rbuf.len(), READ_CHUNK, "back to its size after the large frame");
                d.flush(&mut ws);
                assert!(d.next(&mut ws).is_none(), "the stream stays ended");
            });
            assert_eq!(srv.await.unwrap(), Some(1007), "the client's close says why");
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    /// A character cut by a fragment's end is joined with the rest; a fragment with bad
    /// UTF-8 fails the connection at once, before its message's last fragment.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fragments_are_checked_as_utf8_as_they_arrive() {
        let run = async {
            let (addr, srv) = server(|mut ws| async move {
                let frag = |b: &[u8], op, fin| Message::Frame(Frame::message(b.to_vec(), OpCode::Data(op), fin));
                ws.send(frag(b"a\xc3", Data::Text, false)).await.unwrap();
                ws.send(frag(b"\xa9", Data::Continue, true)).await.unwrap();
                ws.send(frag(b"b", Data::Text, false)).await.unwrap();
                ws.send(frag(b"\xff", Data::Continue, false)).await.unwrap();
                close_code_of(ws).await
            })
            .await;
            block_in_place(|| {
                let (mut ws, mut d) = Driver::dial(addr);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), text("a\u{e9}"));
                match d.next(&mut ws) {
                    Some(Err(WsError::Protocol(why))) => assert_eq!(why, NOT_UTF8.why),
                    other => panic!("not a protocol error: {other:?}"),
                }
                d.flush(&mut ws);
            });
            assert_eq!(srv.await.unwrap(), Some(1007));
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    /// The Autobahn test suite's fuzzing server (`wstest -m fuzzingserver`, started by
    /// `bench/autobahn.sh`, which reads its verdicts) against this client: every case's text
    /// and binary messages echoed back through the engine and the readiness driving the load
    /// client uses. Needs the server, so not run with the others.
    #[test]
    #[ignore = "needs the Autobahn fuzzing server: bench/autobahn.sh"]
    fn autobahn_fuzzing_server_echo() {
        let base = std::env::var("AUTOBAHN_URL").unwrap_or_else(|_| "ws://127.0.0.1:9001".into());
        let addr: std::net::SocketAddr = base.trim_start_matches("ws://").parse().expect("AUTOBAHN_URL ws://IP:PORT");
        let agent = "wirebench-load";
        let (mut ws, mut d) = Driver::dial_to(addr, &format!("{base}/getCaseCount"));
        let count: u32 = match d.next(&mut ws) {
            Some(Ok(Got::Text(t))) => t.parse().expect("a case count"),
            other => panic!("no case count: {other:?}"),
        };
        while d.next(&mut ws).is_some() {}
        for case in 1..=count {
            let (mut ws, mut d) = Driver::dial_to(addr, &format!("{base}/runCase?case={case}&agent={agent}"));
            loop {
                let sent = match d.next(&mut ws) {
                    Some(Ok(Got::Text(t))) => ws.send(true, t.as_bytes()),
                    Some(Ok(Got::Binary(b))) => ws.send(false, &b),
                    // closes are replied to, pings answered, inside
                    Some(Ok(Got::Close(_))) => continue,
                    Some(Err(_)) | None => break,
                };
                if sent.is_err() {
                    break;
                }
                // (a failed flush ends the case at the next read)
                d.until(&mut ws, |ws| if ws.flush().is_ok() && ws.blocked { Poll::Pending } else { Poll::Ready(()) });
            }
        }
        let (mut ws, mut d) = Driver::dial_to(addr, &format!("{base}/updateReports?agent={agent}"));
        while d.next(&mut ws).is_some() {}
    }
}
