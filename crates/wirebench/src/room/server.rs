//! The room server's runtime, connections and counters.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use super::Config;
use crate::load::limits::{ProcessCpu, ws_config};

/// Messages a member may fall behind its room before it loses some (counted as lagged).
const ROOM_BACKLOG: usize = 1024;

/// What the server counted, as plain numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages received from clients.
    pub received: u64,
    /// Messages sent to clients (relays and replies).
    pub sent: u64,
    /// Of those, replies to requests.
    pub replies: u64,
    /// Connections accepted (handshake done).
    pub connections: u64,
    /// Connections open now.
    pub open: u64,
    /// Relays lost because a member fell more than 1,024 messages behind.
    pub lagged: u64,
    /// Handshakes that failed.
    pub bad_handshakes: u64,
    /// CPU this process used (user + system), ns.
    pub cpu_ns: u64,
}

impl Counters {
    /// One interval line: rates since `prev`.
    pub fn rates_since(&self, prev: &Self, secs: f64) -> String {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let per = |a: u64, b: u64| (a - b) as f64 / secs.max(1e-9);
        format!(
            "recv {:.0}/s sent {:.0}/s open {} lagged {} cpu {:.1}%",
            per(self.received, prev.received),
            per(self.sent, prev.sent),
            self.open,
            self.lagged - prev.lagged,
            per(self.cpu_ns, prev.cpu_ns) / 1e7,
        )
    }

    /// The end-of-run line.
    pub fn totals(&self, over: Duration) -> String {
        let events = self.received + self.sent;
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let per_event = if events == 0 { 0.0 } else { self.cpu_ns as f64 / events as f64 / 1e3 };
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let share = self.cpu_ns as f64 / over.as_nanos().max(1) as f64 * 100.0;
        format!(
            "received {} sent {} (replies {}) connections {} lagged {} bad handshakes {} | cpu {:.2}s ({share:.1}% of one core, {per_event:.2} us per message event)",
            self.received,
            self.sent,
            self.replies,
            self.connections,
            self.lagged,
            self.bad_handshakes,
            Duration::from_nanos(self.cpu_ns).as_secs_f64(),
        )
    }
}

#[derive(Debug, Default)]
struct Shared {
    received: AtomicU64,
    sent: AtomicU64,
    replies: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
    lagged: AtomicU64,
    bad_handshakes: AtomicU64,
}

type Relay = (u64, Message);

#[derive(Debug, Default)]
struct Rooms(Mutex<HashMap<String, (broadcast::Sender<Relay>, u64)>>);

impl Rooms {
    fn join(&self, name: &str) -> (broadcast::Sender<Relay>, broadcast::Receiver<Relay>) {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = map.entry(name.to_owned()).or_insert_with(|| (broadcast::channel(ROOM_BACKLOG).0, 0));
        entry.1 += 1;
        (entry.0.clone(), entry.0.subscribe())
    }

    fn leave(&self, name: &str) {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = map.get_mut(name) {
            e.1 -= 1;
            if e.1 == 0 {
                map.remove(name);
            }
        }
    }
}

/// A running room server; stopped by [`RoomServer::stop`] or on drop.
#[derive(Debug)]
pub struct RoomServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    cpu: ProcessCpu,
}

impl RoomServer {
    /// Binds (errors come back here) and starts serving on its own runtime.
    pub fn start(cfg: &Config) -> anyhow::Result<Self> {
        // A deep accept queue: 10,000 clients connecting within a second overflow the
        // standard library's 128 and wait for SYN retransmits (1 s, then 3 s).
        let sock = socket2::Socket::new(socket2::Domain::for_address(cfg.listen), socket2::Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.bind(&cfg.listen.into())?;
        sock.listen(8192)?;
        let std_listener: std::net::TcpListener = sock.into();
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wb-room")
            .enable_io()
            .enable_time()
            .build()?;
        let shared = Arc::new(Shared::default());
        let (stop, stop_rx) = watch::channel(false);
        let sh = shared.clone();
        let thread = std::thread::Builder::new().name("wb-room-main".into()).spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = TcpListener::from_std(std_listener) else { return };
                accept_loop(listener, sh, stop_rx).await;
            });
            // Dropping the runtime drops every connection task: their sockets close.
            rt.shutdown_timeout(Duration::from_secs(1));
        })?;
        Ok(Self { addr, shared, stop, thread: Some(thread), cpu: ProcessCpu::now() })
    }

    /// The bound address.
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        let s = &self.shared;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counters {
            received: g(&s.received),
            sent: g(&s.sent),
            replies: g(&s.replies),
            connections: g(&s.connections),
            open: g(&s.open),
            lagged: g(&s.lagged),
            bad_handshakes: g(&s.bad_handshakes),
            cpu_ns: self.cpu.since(),
        }
    }

    /// Closes every connection and returns the final counters.
    pub fn stop(mut self) -> Counters {
        self.halt();
        self.counters()
    }

    fn halt(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RoomServer {
    fn drop(&mut self) {
        self.halt();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let rooms = Arc::new(Rooms::default());
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((sock, _)) = r else { continue };
                next_id += 1;
                tokio::spawn(connection(sock, next_id, rooms.clone(), shared.clone(), stop.clone()));
            }
            _ = stop.changed() => return,
        }
    }
}

async fn connection(sock: TcpStream, id: u64, rooms: Arc<Rooms>, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let _ = sock.set_nodelay(true);
    let mut path = String::new();
    #[expect(clippy::result_large_err, reason = "tungstenite's callback type")]
    let cb = |req: &Request, resp: Response| {
        req.uri().path().clone_into(&mut path);
        Ok(resp)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async_with_config(sock, cb, Some(ws_config())).await else {
        shared.bad_handshakes.fetch_add(1, Ordering::Relaxed);
        return;
    };
    shared.connections.fetch_add(1, Ordering::Relaxed);
    shared.open.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = rooms.join(&path);
    // One registration with the stop signal per connection, not one per wake-up.
    let stopped = stop.changed();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            m = ws.next() => match m {
                Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                    shared.received.fetch_add(1, Ordering::Relaxed);
                    if is_request(&m) {
                        if ws.send(m).await.is_err() { break }
                        shared.sent.fetch_add(1, Ordering::Relaxed);
                        shared.replies.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let _ = tx.send((id, m));
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
            r = rx.recv() => {
                // Everything already queued for this member goes out with one flush (one
                // write syscall under load, not one per message).
                let mut next = Some(r);
                let mut wrote = 0u64;
                while let Some(r) = next.take() {
                    match r {
                        Ok((from, m)) if from != id => {
                            if ws.feed(m).await.is_err() { break }
                            wrote += 1;
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            shared.lagged.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                    next = match rx.try_recv() {
                        Ok(v) => Some(Ok(v)),
                        Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Err(broadcast::error::RecvError::Lagged(n))),
                        Err(_) => None,
                    };
                }
                if wrote > 0 && ws.flush().await.is_err() { break }
                shared.sent.fetch_add(wrote, Ordering::Relaxed);
            },
            _ = &mut stopped => break,
        }
    }
    drop(rx);
    rooms.leave(&path);
    shared.open.fetch_sub(1, Ordering::Relaxed);
}

/// A request carries `"req":true` (the load generator puts it near the front).
fn is_request(m: &Message) -> bool {
    const MARK: &[u8] = b"\"req\":true";
    let b: &[u8] = match m {
        Message::Text(t) => t.as_bytes(),
        Message::Binary(b) => b,
        _ => return false,
    };
    b.windows(MARK.len()).any(|w| w == MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_marked() {
        assert!(is_request(&Message::text(r#"{"type":"save","req":true,"seq":1}"#)));
        assert!(!is_request(&Message::text(r#"{"type":"cursor","req":false}"#)));
        assert!(!is_request(&Message::Ping(tokio_tungstenite::tungstenite::Bytes::new())));
    }
}
