//! A client's WebSocket: tungstenite's protocol engine (`tungstenite::WebSocket`: the
//! handshake, framing, masking, fragments, control frames, ping/pong replies, the close
//! handshake, size caps) over the client's connection (ws:// or wss://: rustls over the same
//! socket), on a non-blocking `mio` socket driven by the worker's event loop
//! (`load/workers.rs`). Every call returns at once: `Poll::Pending` (or [`Dialed::Pending`])
//! means "wait for the socket's next readiness".
//!
//! Opening ([`Dial`]): TCP's connect, TLS's handshake for wss:// (rustls, as far as each
//! readiness allows), then the WebSocket handshake (tungstenite's, resumed where a read or
//! write would have blocked).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::task::Poll;

use tokio_rustls::rustls::{ClientConnection, StreamOwned};
use tokio_tungstenite::tungstenite::handshake::client::{Request, Response};
use tokio_tungstenite::tungstenite::handshake::{HandshakeError, MidHandshake};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, ClientHandshake, Error, Message, WebSocket};

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

/// `WouldBlock` as `Pending`.
fn cvt<T>(r: Result<T, Error>) -> Poll<Result<T, Error>> {
    match r {
        Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

/// An open WebSocket, driven by readiness: every call returns at once.
#[derive(Debug)]
pub(in crate::load) struct Ws {
    engine: WebSocket<Sock>,
    /// A write would block: frames wait in the engine's buffer for the socket to be writable.
    pub(super) blocked: bool,
    /// The stream ended (closed, or an error was returned): `next` says `None` from now on.
    ended: bool,
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
    Shake(MidHandshake<ClientHandshake<Rec>>, WebSocketConfig),
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
            Self::Shake(m, _) => Some(m.get_mut().get_mut()),
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
            Self::Shake(m, config) => self.shake(m.handshake(), config),
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
        self.shake(tungstenite::client::client_with_config(*request, rec, Some(config)), config)
    }

    /// A step of the WebSocket handshake: done (the engine rebuilt), interrupted (kept for
    /// the next readiness), or failed.
    fn shake(
        &mut self,
        r: Result<(WebSocket<Rec>, Response), HandshakeError<ClientHandshake<Rec>>>,
        config: WebSocketConfig,
    ) -> Dialed {
        match r {
            Ok((ws, resp)) => match detach(ws, config) {
                Ok(ws) => Dialed::Open(ws, Box::new(resp)),
                Err(e) => Dialed::Failed(e),
            },
            Err(HandshakeError::Interrupted(m)) => {
                *self = Self::Shake(m, config);
                Dialed::Pending
            }
            Err(HandshakeError::Failure(e)) => Dialed::Failed(e),
        }
    }
}

/// The engine again, with a read buffer of the configured size (tungstenite keeps its
/// handshake's 4 KiB buffer for the connection's life, 3 KiB a client more than the
/// configured 1 KiB). Rebuilt the way tungstenite builds it, from the bytes read after the
/// response head, so a frame the server sent behind its 101 stays first in line.
fn detach(ws: WebSocket<Rec>, config: WebSocketConfig) -> Result<Ws, Error> {
    let rec = ws.into_inner();
    let head = wirebench_core::room::response_head_len(&rec.seen)
        .ok_or_else(|| Error::Io(io::Error::other("the response head was not found again")))?;
    let tail = rec.seen[head..].to_vec();
    let engine = WebSocket::from_partially_read(rec.sock, tail, Role::Client, Some(config));
    Ok(Ws { engine, blocked: false, ended: false })
}

impl Ws {
    /// The next message; `Pending` until the socket is readable again; `None` once the
    /// connection is closed or after an error.
    pub(super) fn next(&mut self) -> Poll<Option<Result<Message, Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match std::task::ready!(cvt(self.engine.read())) {
            Ok(m) => Poll::Ready(Some(Ok(m))),
            Err(e) => {
                self.ended = true;
                if matches!(e, Error::AlreadyClosed | Error::ConnectionClosed) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(e)))
                }
            }
        }
    }

    /// Hands a message to the socket (one write); a write that would block keeps it in the
    /// engine's buffer and sets `blocked` until a `flush` gets it out.
    pub(super) fn feed(&mut self, m: Message) -> Result<(), Error> {
        match self.engine.write(m) {
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                self.blocked = true;
                Ok(())
            }
            r => r,
        }
    }

    /// Writes whatever is buffered (blocked frames, pong and close replies); what the socket
    /// does not take now stays buffered, `blocked` set.
    pub(super) fn flush(&mut self) -> Result<(), Error> {
        match cvt(self.engine.flush()) {
            Poll::Pending => {
                self.blocked = true;
                Ok(())
            }
            Poll::Ready(r) => {
                self.blocked = false;
                match r {
                    Err(Error::ConnectionClosed) => Ok(()),
                    r => r,
                }
            }
        }
    }

    /// Sends a close frame (the server's reply is read by `next`).
    pub(super) fn close(&mut self, frame: Option<CloseFrame>) -> Result<(), Error> {
        self.feed(Message::Close(frame))?;
        self.flush()
    }

    /// The TCP socket underneath.
    pub(super) fn tcp(&mut self) -> &mut mio::net::TcpStream {
        &mut self.engine.get_mut().tcp().sock
    }

    /// The socket had a readiness event (`closed`: the peer's end or an error came with
    /// it): reads try the socket again.
    pub(super) fn readable(&mut self, closed: bool) {
        let tcp = self.engine.get_mut().tcp();
        tcp.readable = true;
        tcp.closed |= closed;
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::oneshot;
    use tokio::task::block_in_place;
    use tokio_tungstenite::tungstenite::Bytes;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};

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

        fn next(&mut self, ws: &mut Ws) -> Option<Result<Message, Error>> {
            self.until(ws, Ws::next)
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
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::Ping(Bytes::from_static(b"p1")));
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::text("hello"), "fragments are one message");
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::binary(vec![1, 2, 3]));
                ws.feed(Message::text("up")).unwrap();
                d.flush(&mut ws);
                ws.close(Some(normal())).unwrap();
                d.flush(&mut ws);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::Close(Some(normal())), "the server's reply");
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
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::text("first"));
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::text("second"));
                go.send(()).unwrap();
                ws.close(Some(normal())).unwrap();
                d.flush(&mut ws);
                // The reply and the end arrive before the client looks: one readiness event
                // says both, and the end must still be read after the reply.
                was_closed.recv_timeout(BOUND).unwrap();
                d.wait(&mut ws, Instant::now() + BOUND);
                assert_eq!(d.next(&mut ws).unwrap().unwrap(), Message::Close(Some(normal())));
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
                    ws.feed(Message::binary(vec![sent; 256 * 1024])).unwrap();
                    sent += 1;
                }
                ws.flush().unwrap();
                assert!(ws.blocked, "nothing more can be written while the server waits");
                go.send(()).unwrap();
                d.flush(&mut ws);
                assert!(!ws.blocked);
                ws.close(Some(normal())).unwrap();
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
            Some(Ok(Message::Text(t))) => t.as_str().parse().expect("a case count"),
            other => panic!("no case count: {other:?}"),
        };
        while d.next(&mut ws).is_some() {}
        for case in 1..=count {
            let (mut ws, mut d) = Driver::dial_to(addr, &format!("{base}/runCase?case={case}&agent={agent}"));
            loop {
                match d.next(&mut ws) {
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                        if ws.feed(m).is_err() {
                            break;
                        }
                        // (a failed flush ends the case at the next read)
                        d.until(&mut ws, |ws| {
                            if ws.flush().is_ok() && ws.blocked { Poll::Pending } else { Poll::Ready(()) }
                        });
                    }
                    // pings are answered and closes replied to by the engine
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
        }
        let (mut ws, mut d) = Driver::dial_to(addr, &format!("{base}/updateReports?agent={agent}"));
        while d.next(&mut ws).is_some() {}
    }
}
