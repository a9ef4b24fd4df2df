//! One connection: the HTTP handshake (read by hand, so that a request that is not a
//! WebSocket upgrade gets 400 or 426 and a reason), then the member's loop: relay what it
//! sends, write what its room queued for it, and close it with the right code when it
//! breaks a limit. Every wait is bounded by a timeout and the stop signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message};
use wirebench_core::room::{Head, MAX_HEAD, Refusal, classify};

use super::accept::Slot;
use super::rooms::{Member, Room};
use super::server::{Shared, Tally};
use crate::tls::Stream;

/// Messages written between two flushes at most.
const MAX_BATCH: u64 = 256;

/// How long a refusal or a closing frame may take to write.
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// The WebSocket limits of a member: frames and messages capped alike, small buffers.
pub(super) fn ws_config(shared: &Shared) -> WebSocketConfig {
    let l = &shared.cfg.limits;
    let cap = usize::try_from(l.max_message).unwrap_or(usize::MAX);
    let queued = usize::try_from(l.member_backlog.saturating_add(l.max_message)).unwrap_or(usize::MAX);
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_write_buffer_size(queued.saturating_add(4096))
        .max_message_size(Some(cap))
        .max_frame_size(Some(cap))
}

enum Handshake {
    Upgrade { path: String, accept: String, rest: Vec<u8> },
    Refused(Refusal),
    Gone,
}

async fn read_head(sock: &mut Stream) -> Handshake {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let room = (MAX_HEAD + 1).saturating_sub(buf.len()).min(chunk.len());
        match sock.read(&mut chunk[..room]).await {
            Ok(0) | Err(_) => return Handshake::Gone,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        match classify(&buf) {
            Head::Partial => {}
            Head::Refuse(r) => return Handshake::Refused(r),
            Head::Upgrade { path, key, len } => {
                return Handshake::Upgrade {
                    path: path.to_owned(),
                    accept: derive_accept_key(key),
                    rest: buf[len..].to_vec(),
                };
            }
        }
    }
}

/// The TLS handshake for wss:// (a failed one is `None`), then the request head: both
/// within the one handshake timeout.
async fn open(sock: TcpStream, shared: &Shared) -> Option<(Stream, Handshake)> {
    let mut stream = match &shared.tls {
        None => Stream::Plain(sock),
        Some(cfg) => {
            let tls = tokio_rustls::TlsAcceptor::from(cfg.clone()).accept(sock).await.ok()?;
            Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(tls)))
        }
    };
    let head = read_head(&mut stream).await;
    Some((stream, head))
}

/// Serves one accepted connection to its end.
pub(super) async fn run(
    sock: TcpStream,
    slot: Slot,
    mut evicted: oneshot::Receiver<()>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = sock.set_nodelay(true);
    let t = &shared.tally;
    let opened = tokio::select! {
        r = tokio::time::timeout(shared.cfg.handshake_timeout, open(sock, &shared)) => r,
        _ = &mut evicted => return,
        _ = stop.changed() => return,
    };
    let (mut sock, head) = match opened {
        Err(_) => return Tally::bump(&t.handshake_timeouts),
        Ok(None) => return Tally::bump(&t.bad_handshakes),
        Ok(Some(opened)) => opened,
    };
    let (path, accept, rest) = match head {
        Handshake::Gone => return Tally::bump(&t.bad_handshakes),
        Handshake::Refused(r) => {
            Tally::bump(&t.refused_http);
            // the answer, then a clean end (close_notify over TLS): `refuse.rs`
            let _ =
                tokio::time::timeout(CLOSE_WAIT, super::refuse::answer_and_close(&mut sock, r.response().as_bytes()))
                    .await;
            return;
        }
        Handshake::Upgrade { path, accept, rest } => (path, accept, rest),
    };
    slot.established();
    // Join before the 101 goes out: a client that has read it is in the room.
    let id = slot.id();
    let (member, rx) = Member::new(id);
    let room = shared.rooms.join(&path, member.clone());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if !matches!(
        tokio::time::timeout(shared.cfg.handshake_timeout, sock.write_all(response.as_bytes())).await,
        Ok(Ok(()))
    ) {
        shared.rooms.leave(&path, &room, &member);
        return Tally::bump(&t.bad_handshakes);
    }
    Tally::bump(&t.connections);
    Tally::bump(&t.open);
    let ws = WebSocketStream::from_partially_read(sock, rest, Role::Server, Some(ws_config(&shared))).await;
    member_loop(ws, &member, rx, &room, &shared, stop).await;
    shared.rooms.leave(&path, &room, &member);
    t.open.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    drop(slot);
}

type Ws = WebSocketStream<Stream>;

/// Sends a close frame, bounded by [`CLOSE_WAIT`].
async fn close(ws: &mut Ws, code: CloseCode, reason: &'static str) {
    let frame = CloseFrame { code, reason: reason.into() };
    let _ = tokio::time::timeout(CLOSE_WAIT, ws.close(Some(frame))).await;
}

/// A dropped member's queue is thrown away at once (its bytes have left the budget).
fn discard(rx: &mut mpsc::UnboundedReceiver<Message>) {
    rx.close();
    while rx.try_recv().is_ok() {}
}

/// How a member's loop ended, for the counters.
enum End {
    /// The client sent a close frame.
    Clean,
    /// EOF, reset, or a read error without a close frame.
    Abnormal,
    /// This server closed it (already counted).
    Closed,
}

/// What the member sent (or the read's end): a request queued for its reply, a message
/// relayed to the room, or the connection's end (after a close frame with its code for a
/// message too big, text that is not UTF-8 or a protocol error).
async fn on_read(
    ws: &mut Ws,
    m: Option<Result<Message, WsError>>,
    member: &Member,
    room: &Arc<Room>,
    shared: &Shared,
    closing: &mut bool,
) -> Option<End> {
    let (t, cfg, rooms) = (&shared.tally, &shared.cfg, &shared.rooms);
    match m {
        Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
            Tally::bump(&t.received);
            let request = match &m {
                Message::Text(s) => wirebench_core::load::msg::is_request(s.as_bytes()),
                Message::Binary(b) => wirebench_core::load::msg::is_request(b),
                _ => false,
            };
            if request {
                if rooms.queue(member, m, &cfg.limits) {
                    Tally::bump(&t.replies);
                }
            } else {
                rooms.relay(room, member.id, &m, &cfg.limits);
            }
            None
        }
        Some(Ok(Message::Close(_))) => {
            *closing = true;
            None
        }
        Some(Ok(_)) => None,
        Some(Err(WsError::Capacity(CapacityError::MessageTooLong { .. }))) => {
            Tally::bump(&t.too_big);
            close(ws, CloseCode::Size, "message over the size limit").await;
            Some(End::Closed)
        }
        Some(Err(WsError::Utf8(_))) => {
            Tally::bump(&t.protocol_errors);
            close(ws, CloseCode::Invalid, "text is not UTF-8").await;
            Some(End::Closed)
        }
        Some(Err(WsError::Protocol(_) | WsError::Capacity(_))) if !*closing => {
            Tally::bump(&t.protocol_errors);
            close(ws, CloseCode::Protocol, "protocol error").await;
            Some(End::Closed)
        }
        Some(Err(_)) | None => Some(if *closing { End::Clean } else { End::Abnormal }),
    }
}

/// The idle timer: a member silent for the idle timeout is closed; silent for half of it,
/// pinged once (a ping that cannot go ends the connection).
async fn on_idle(ws: &mut Ws, heard: Instant, pinged: &mut bool, shared: &Shared) -> Option<End> {
    let idle_timeout = shared.cfg.idle_timeout;
    if heard.elapsed() >= idle_timeout {
        Tally::bump(&shared.tally.idle_closed);
        close(ws, CloseCode::Away, "idle").await;
        return Some(End::Closed);
    }
    if !*pinged && heard.elapsed() >= idle_timeout / 2 {
        *pinged = true;
        let ping = tokio::time::timeout(CLOSE_WAIT, ws.send(Message::Ping(Bytes::new())));
        if !matches!(ping.await, Ok(Ok(()))) {
            return Some(End::Abnormal);
        }
    }
    None
}

/// Writes `first` and what else is queued (up to [`MAX_BATCH`]) with one flush (one write
/// syscall under load); returns how many went. A message leaves the member's budget once
/// tungstenite has taken it (its write buffer holds at most one message the socket would not
/// take): a member that keeps up is never charged for a batch that keeps growing.
async fn write_queued(
    ws: &mut Ws,
    first: Message,
    rx: &mut mpsc::UnboundedReceiver<Message>,
    member: &Member,
    shared: &Shared,
) -> Result<u64, WsError> {
    let mut n = 0u64;
    let mut next = Some(first);
    while let Some(m) = next.take() {
        let len = m.len() as u64;
        ws.feed(m).await?;
        shared.rooms.written(member, len);
        n += 1;
        next = if n < MAX_BATCH { rx.try_recv().ok() } else { None };
    }
    ws.flush().await?;
    Ok(n)
}

async fn member_loop(
    mut ws: Ws,
    member: &Member,
    mut rx: mpsc::UnboundedReceiver<Message>,
    room: &Arc<Room>,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) {
    let (t, cfg) = (&shared.tally, &shared.cfg);
    let stopped = stop.changed();
    tokio::pin!(stopped);
    let mut heard = Instant::now();
    let mut pinged = false;
    let mut idle = tokio::time::interval(cfg.idle_timeout / 2);
    idle.reset();
    let mut closing = false;
    let end = loop {
        tokio::select! {
            biased;
            _ = &mut stopped => {
                close(&mut ws, CloseCode::Away, "server stopping").await;
                break End::Closed;
            }
            () = member.kick.notified() => {
                discard(&mut rx);
                close(&mut ws, CloseCode::Again, "backlog over budget: reading too slowly").await;
                break End::Closed;
            }
            m = ws.next() => {
                heard = Instant::now();
                pinged = false;
                if let Some(end) = on_read(&mut ws, m, member, room, shared, &mut closing).await {
                    break end;
                }
            }
            r = rx.recv() => {
                let Some(first) = r else { break End::Abnormal };
                let write = write_queued(&mut ws, first, &mut rx, member, shared);
                let written = tokio::select! {
                    r = tokio::time::timeout(cfg.write_timeout, write) => r,
                    _ = &mut stopped => break End::Closed,
                    () = member.kick.notified() => {
                        discard(&mut rx);
                        close(&mut ws, CloseCode::Again, "backlog over budget: reading too slowly").await;
                        break End::Closed;
                    }
                };
                match written {
                    Ok(Ok(n)) => {
                        t.sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(Err(_)) => break if closing { End::Clean } else { End::Abnormal },
                    Err(_) => {
                        // A write that stalls this long: the member does not read.
                        Tally::bump(&t.stalled);
                        break End::Closed;
                    }
                }
            }
            _ = idle.tick() => {
                if let Some(end) = on_idle(&mut ws, heard, &mut pinged, shared).await {
                    break end;
                }
            }
        }
    };
    match end {
        End::Clean => Tally::bump(&t.closed_clean),
        End::Abnormal => Tally::bump(&t.closed_abnormal),
        End::Closed => {}
    }
}
