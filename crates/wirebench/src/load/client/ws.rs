//! A client's WebSocket: tungstenite's protocol engine (`tungstenite::WebSocket`: the
//! handshake, framing, masking, fragments, control frames, ping/pong replies, the close
//! handshake, size caps) driven from the client's own task over its connection (ws:// or
//! wss://, `crate::tls::Stream`).
//!
//! What this replaces is tokio-tungstenite's `WebSocketStream`, which puts a pair of waker
//! proxies between the socket and the task: every poll registers the task's waker in two
//! `AtomicWaker`s per direction, and every readiness event wakes a proxy that wakes the task
//! twice (its read and its write slot). Here the engine's `Read`/`Write` poll the tokio
//! stream with the polling task's own waker (`Io::set`, a pointer comparison when it is the
//! same task, as it always is), so a readiness event wakes the task once, directly. The
//! calls and their results are tokio-tungstenite's: `next` is its `Stream::poll_next`,
//! `feed`/`flush` its `Sink` (a blocked write is kept and retried by the next `feed` or
//! `flush`), `close` its `close`.

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Response;
use tokio_tungstenite::tungstenite::handshake::{HandshakeError, MidHandshake};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, ClientHandshake, Error, Message, WebSocket};

use crate::tls::Stream;

/// The connection as the engine's blocking-style `Read + Write`: a poll that would wait
/// is `WouldBlock`, with the waker of the last [`Io::set`] registered for the wake-up.
#[derive(Debug)]
struct Io {
    stream: Stream,
    waker: Waker,
    /// During the handshake: every byte read (the response head, and any frame behind it).
    seen: Option<Vec<u8>>,
}

impl Io {
    fn new(stream: Stream) -> Self {
        Self { stream, waker: Waker::noop().clone(), seen: Some(Vec::new()) }
    }

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
        if let Some(seen) = &mut self.seen {
            seen.extend_from_slice(buf.filled());
        }
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

/// `WouldBlock` as `Pending` (the waker is registered: the engine's I/O returned it).
fn cvt<T>(r: Result<T, Error>) -> Poll<Result<T, Error>> {
    match r {
        Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

/// An open WebSocket.
#[derive(Debug)]
pub(super) struct Ws {
    engine: WebSocket<Io>,
    /// A write would block: the frame is in the engine's buffer, flushed before the next.
    blocked: bool,
    /// The stream ended (closed, or an error was returned): `next` says `None` from now on.
    ended: bool,
}

/// The WebSocket handshake over `stream` (after TCP and TLS), as
/// `tokio_tungstenite::client_async_with_config`.
pub(super) async fn handshake(
    request: impl IntoClientRequest,
    stream: Stream,
    config: WebSocketConfig,
) -> Result<(Ws, Response), Error> {
    let request = request.into_client_request()?;
    let mut start = Some((request, stream));
    let mut mid: Option<MidHandshake<ClientHandshake<Io>>> = None;
    poll_fn(|cx| {
        let r = match mid.take() {
            None => {
                let (request, stream) = start.take().expect("polled after the end");
                let mut io = Io::new(stream);
                io.set(cx);
                tungstenite::client::client_with_config(request, io, Some(config))
            }
            Some(mut m) => {
                m.get_mut().get_mut().set(cx);
                m.handshake()
            }
        };
        match r {
            Ok((ws, resp)) => Poll::Ready(Ok((Ws { engine: small(ws, config), blocked: false, ended: false }, resp))),
            Err(HandshakeError::Interrupted(m)) => {
                mid = Some(m);
                Poll::Pending
            }
            Err(HandshakeError::Failure(e)) => Poll::Ready(Err(e)),
        }
    })
    .await
}

/// The engine again, with a read buffer of the configured size: tungstenite keeps its
/// handshake's 4 KiB buffer for the connection's life, 3 KiB a client more than the
/// configured 1 KiB. Rebuilt the way tungstenite builds it, from the bytes read after the
/// response head (a frame the server sent behind its 101 stays first in line); a head that
/// cannot be found again keeps the engine as it is.
fn small(mut ws: WebSocket<Io>, config: WebSocketConfig) -> WebSocket<Io> {
    let seen = ws.get_mut().seen.take().unwrap_or_default();
    let Some(head) = wirebench_core::room::response_head_len(&seen) else { return ws };
    let tail = seen[head..].to_vec();
    WebSocket::from_partially_read(ws.into_inner(), tail, Role::Client, Some(config))
}

impl Ws {
    /// The next message; `None` once the connection is closed or after an error.
    pub(super) async fn next(&mut self) -> Option<Result<Message, Error>> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &Context<'_>) -> Poll<Option<Result<Message, Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        self.engine.get_mut().set(cx);
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

    /// Hands a message to the socket (one write); a write that would block keeps it for
    /// the next `feed` or `flush`.
    pub(super) async fn feed(&mut self, m: Message) -> Result<(), Error> {
        if self.blocked {
            self.flush().await?;
        }
        let mut m = Some(m);
        poll_fn(|cx| {
            self.engine.get_mut().set(cx);
            Poll::Ready(match self.engine.write(m.take().expect("polled once")) {
                Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    Ok(())
                }
                r => r,
            })
        })
        .await
    }

    /// Writes whatever is buffered (blocked frames, pong and close replies).
    pub(super) async fn flush(&mut self) -> Result<(), Error> {
        let r = poll_fn(|cx| {
            self.engine.get_mut().set(cx);
            cvt(self.engine.flush())
        })
        .await;
        self.blocked = false;
        match r {
            Err(Error::ConnectionClosed) => Ok(()),
            r => r,
        }
    }

    /// Sends a close frame and flushes it (the server's reply is read by `next`).
    pub(super) async fn close(&mut self, frame: Option<CloseFrame>) -> Result<(), Error> {
        self.feed(Message::Close(frame)).await?;
        self.flush().await
    }

    /// The TCP socket underneath.
    pub(super) fn tcp(&self) -> &TcpStream {
        self.engine.get_ref().stream.tcp()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;
    use tokio_tungstenite::tungstenite::Bytes;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};

    use super::*;

    const BOUND: Duration = Duration::from_secs(20);

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

    fn normal() -> CloseFrame {
        CloseFrame { code: CloseCode::Normal, reason: "".into() }
    }

    #[tokio::test]
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
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::Ping(Bytes::from_static(b"p1")));
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("hello"), "fragments are one message");
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::binary(vec![1, 2, 3]));
            ws.feed(Message::text("up")).await.unwrap();
            ws.flush().await.unwrap();
            ws.close(Some(normal())).await.unwrap();
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::Close(Some(normal())), "the server's reply");
            assert!(ws.next().await.is_none(), "then the server closes TCP");
            assert!(ws.next().await.is_none(), "and the stream stays ended");
            let got = srv.await.unwrap();
            assert_eq!(
                got,
                [Message::Pong(Bytes::from_static(b"p1")), Message::text("up"), Message::Close(Some(normal()))]
            );
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    /// The engine is rebuilt after the handshake (a smaller read buffer): a frame the server
    /// wrote in the same segment as its 101 must still come first.
    #[tokio::test]
    async fn a_frame_behind_the_101_is_read_first() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let run = async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
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
                let mut rest = Vec::new();
                let _ = sock.read_to_end(&mut rest).await;
            });
            let mut ws = client(addr).await;
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("first"));
            assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("second"));
            drop(ws);
            srv.await.unwrap();
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }

    #[tokio::test]
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
            // The server does not read yet: fill the socket until a write would block (loopback
            // buffers hold a few MB; bounded).
            let mut sent = 0u8;
            while !ws.blocked {
                assert!(sent < 200, "the socket never filled");
                ws.feed(Message::binary(vec![sent; 256 * 1024])).await.unwrap();
                sent += 1;
            }
            {
                let flush = ws.flush();
                tokio::pin!(flush);
                let first = poll_fn(|cx| Poll::Ready(flush.as_mut().poll(cx).is_pending())).await;
                assert!(first, "nothing can be written while the server waits");
                go.send(()).unwrap();
                flush.await.unwrap();
            }
            assert!(!ws.blocked);
            ws.close(Some(normal())).await.unwrap();
            while ws.next().await.is_some() {}
            let got = srv.await.unwrap();
            let want: Vec<(usize, u8)> = (0..sent).map(|i| (256 * 1024, i)).collect();
            assert_eq!(got, want, "every frame once, whole and in order");
        };
        tokio::time::timeout(BOUND, run).await.expect("bounded");
    }
}
