//! A client's WebSocket: tungstenite's protocol engine (`tungstenite::WebSocket`: the
//! handshake, framing, masking, fragments, control frames, ping/pong replies, the close
//! handshake, size caps) over the client's connection (ws:// or wss://).
//!
//! The handshake runs on the connector's tokio runtime (TCP, TLS and the upgrade, as
//! `tokio_tungstenite::client_async_with_config`); the open connection then leaves tokio:
//! its socket becomes a non-blocking `mio` socket (TLS: the same rustls session over it) and
//! the engine is driven by the worker's event loop (`load/workers.rs`) through the calls
//! below, which never block: `Poll::Pending` means "wait for the socket's next readiness".

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::{ClientConnection, StreamOwned};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Response;
use tokio_tungstenite::tungstenite::handshake::{HandshakeError, MidHandshake};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, ClientHandshake, Error, Message, WebSocket};

use crate::tls::Stream;

/// The connection during the handshake, as the engine's blocking-style `Read + Write`: a
/// poll that would wait is `WouldBlock`, with the waker of the last [`Io::set`] registered.
#[derive(Debug)]
struct Io {
    stream: Stream,
    waker: Waker,
    /// Every byte read (the response head, and any frame behind it).
    seen: Vec<u8>,
}

impl Io {
    /// Polls from now on wake `cx`'s task (the same task: a comparison, no clone).
    fn set(&mut self, cx: &Context<'_>) {
        if !self.waker.will_wake(cx.waker()) {
            self.waker.clone_from(cx.waker());
        }
    }
}

/// `Pending` as `WouldBlock`.
fn blocking<T>(p: Poll<io::Result<T>>) -> io::Result<T> {
    match p {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

impl Read for Io {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(&self.waker);
        let mut buf = ReadBuf::new(buf);
        blocking(Pin::new(&mut self.stream).poll_read(&mut cx, &mut buf))?;
        self.seen.extend_from_slice(buf.filled());
        Ok(buf.filled().len())
    }
}

impl Write for Io {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(&self.waker);
        blocking(Pin::new(&mut self.stream).poll_write(&mut cx, buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut cx = Context::from_waker(&self.waker);
        blocking(Pin::new(&mut self.stream).poll_flush(&mut cx))
    }
}

/// The TCP socket off the runtime, with its read readiness tracked as tokio tracks it: a
/// read that returns less than it asked for has emptied the socket, so the next read waits
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

/// The open connection, off the runtime: a non-blocking socket, TLS or not.
#[derive(Debug)]
pub(super) enum Sock {
    /// ws://
    Plain(Tcp),
    /// wss://: the handshake's rustls session over the same socket.
    Tls(Box<StreamOwned<ClientConnection, Tcp>>),
}

impl Sock {
    /// Takes the stream off the runtime (its registration is dropped; the socket stays
    /// non-blocking). Must run inside the runtime that registered it.
    fn from_stream(stream: Stream) -> io::Result<Self> {
        let tcp = |tcp: tokio::net::TcpStream| {
            tcp.into_std().map(|s| Tcp { sock: mio::net::TcpStream::from_std(s), readable: true, closed: false })
        };
        match stream {
            Stream::Plain(s) => Ok(Self::Plain(tcp(s)?)),
            Stream::Tls(tls) => match *tls {
                tokio_rustls::TlsStream::Client(c) => {
                    let (s, conn) = c.into_inner();
                    Ok(Self::Tls(Box::new(StreamOwned::new(conn, tcp(s)?))))
                }
                tokio_rustls::TlsStream::Server(_) => Err(io::Error::other("a server stream in the load client")),
            },
        }
    }

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

/// The WebSocket handshake over `stream` (after TCP and TLS), as
/// `tokio_tungstenite::client_async_with_config`; the open connection comes back off the
/// runtime.
pub(super) async fn handshake(
    request: impl IntoClientRequest,
    stream: Stream,
    config: WebSocketConfig,
) -> Result<(Ws, Response), Error> {
    let request = request.into_client_request()?;
    let mut start = Some((request, stream));
    let mut mid: Option<MidHandshake<ClientHandshake<Io>>> = None;
    let (ws, resp) = poll_fn(|cx| {
        let r = match mid.take() {
            None => {
                let (request, stream) = start.take().expect("polled after the end");
                let mut io = Io { stream, waker: Waker::noop().clone(), seen: Vec::new() };
                io.set(cx);
                tungstenite::client::client_with_config(request, io, Some(config))
            }
            Some(mut m) => {
                m.get_mut().get_mut().set(cx);
                m.handshake()
            }
        };
        match r {
            Ok(done) => Poll::Ready(Ok(done)),
            Err(HandshakeError::Interrupted(m)) => {
                mid = Some(m);
                Poll::Pending
            }
            Err(HandshakeError::Failure(e)) => Poll::Ready(Err(e)),
        }
    })
    .await?;
    Ok((detach(ws, config)?, resp))
}

/// The engine again, over the socket off the runtime, with a read buffer of the configured
/// size (tungstenite keeps its handshake's 4 KiB buffer for the connection's life, 3 KiB a
/// client more than the configured 1 KiB). Rebuilt the way tungstenite builds it, from the
/// bytes read after the response head, so a frame the server sent behind its 101 stays first
/// in line.
fn detach(ws: WebSocket<Io>, config: WebSocketConfig) -> Result<Ws, Error> {
    let io = ws.into_inner();
    let head = wirebench_core::room::response_head_len(&io.seen)
        .ok_or_else(|| Error::Io(io::Error::other("the response head was not found again")))?;
    let tail = io.seen[head..].to_vec();
    let sock = Sock::from_stream(io.stream)?;
    let engine = WebSocket::from_partially_read(sock, tail, Role::Client, Some(config));
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

    async fn client(addr: std::net::SocketAddr) -> Ws {
        let sock = TcpStream::connect(addr).await.unwrap();
        let (ws, resp) =
            handshake(format!("ws://{addr}/rooms/t"), Stream::Plain(sock), crate::limits::ws_config()).await.unwrap();
        assert_eq!(resp.status(), 101);
        ws
    }

    /// The event loop's part, for one connection: its readiness, waited for (bounded).
    struct Driver {
        poll: mio::Poll,
        events: mio::Events,
    }

    impl Driver {
        fn new(ws: &mut Ws) -> Self {
            let poll = mio::Poll::new().unwrap();
            let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
            poll.registry().register(ws.tcp(), mio::Token(0), interest).unwrap();
            Self { poll, events: mio::Events::with_capacity(8) }
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
            let mut ws = client(addr).await;
            block_in_place(|| {
                let mut d = Driver::new(&mut ws);
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
            let mut ws = client(addr).await;
            block_in_place(|| {
                let mut d = Driver::new(&mut ws);
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
            let mut ws = client(addr).await;
            let sent = block_in_place(|| {
                let mut d = Driver::new(&mut ws);
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
}
