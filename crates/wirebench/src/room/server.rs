//! The room server's runtime, shared state and counters.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use super::Config;
use super::accept::{self, Pending};
use super::rooms::Rooms;
use crate::limits::ProcessCpu;

/// What the server counted, as plain numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages received from clients.
    pub received: u64,
    /// Messages sent to clients (relays and replies).
    pub sent: u64,
    /// Of those, replies to requests.
    pub replies: u64,
    /// Connections that completed the WebSocket handshake.
    pub connections: u64,
    /// Members connected now.
    pub open: u64,
    /// Connections open now, handshaking or joined (what the cap limits).
    pub live: u64,
    /// Rooms open now.
    pub rooms: u64,
    /// Bytes queued for members now.
    pub backlog_bytes: u64,
    /// Members that ended with a close frame of their own (a clean close).
    pub closed_clean: u64,
    /// Members that ended without one (reset, EOF, an error: what a server logs as 1006).
    pub closed_abnormal: u64,
    /// Members dropped with close 1013 because their backlog passed its budget or a write
    /// stalled.
    pub dropped_slow: u64,
    /// Members closed with 1009: a message or frame over the cap.
    pub too_big: u64,
    /// Members closed with 1002 or 1007: a protocol error or invalid UTF-8.
    pub protocol_errors: u64,
    /// Members closed with 1001 after the idle timeout.
    pub idle_closed: u64,
    /// Requests answered with HTTP 400 or 426 (not a WebSocket upgrade).
    pub refused_http: u64,
    /// Connections refused with HTTP 503 at the connection cap.
    pub refused_full: u64,
    /// Handshakes that did not finish within the handshake timeout.
    pub handshake_timeouts: u64,
    /// Unfinished handshakes closed to make room at the connection cap.
    pub evicted: u64,
    /// Handshakes that failed otherwise (the client went away).
    pub bad_handshakes: u64,
    /// Failed accept calls (EMFILE and the like: the accept loop backs off).
    pub accept_errors: u64,
    /// CPU this process used (user + system), ns.
    pub cpu_ns: u64,
}

impl Counters {
    /// Whether anything but the CPU clock moved since `prev`: an idle server prints no
    /// interval line.
    pub fn moved_since(&self, prev: &Self) -> bool {
        Self { cpu_ns: 0, ..*self } != Self { cpu_ns: 0, ..*prev }
    }

    /// One interval line: rates since `prev`.
    pub fn rates_since(&self, prev: &Self, secs: f64) -> String {
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs.max(1e-9);
        format!(
            "recv {:.0}/s sent {:.0}/s open {} rooms {} backlog {} B dropped-slow {} cpu {:.1}%",
            per(self.received, prev.received),
            per(self.sent, prev.sent),
            self.open,
            self.rooms,
            self.backlog_bytes,
            self.dropped_slow - prev.dropped_slow,
            per(self.cpu_ns, prev.cpu_ns) / 1e7,
        )
    }

    /// The end-of-run lines.
    pub fn totals(&self, over: Duration) -> String {
        let events = self.received + self.sent;
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let per_event = if events == 0 { 0.0 } else { self.cpu_ns as f64 / events as f64 / 1e3 };
        #[expect(clippy::cast_precision_loss, reason = "display values")]
        let share = self.cpu_ns as f64 / over.as_nanos().max(1) as f64 * 100.0;
        format!(
            "received {} sent {} (replies {}) connections {} | closed: clean {} abnormal {} slow (1013) {} too big (1009) {} \
             protocol {} idle {} | refused: http {} full {} handshake timeouts {} evicted {} failed handshakes {} \
             accept errors {} | cpu {:.2}s ({share:.1}% of one core, {per_event:.2} us per message event)",
            self.received,
            self.sent,
            self.replies,
            self.connections,
            self.closed_clean,
            self.closed_abnormal,
            self.dropped_slow,
            self.too_big,
            self.protocol_errors,
            self.idle_closed,
            self.refused_http,
            self.refused_full,
            self.handshake_timeouts,
            self.evicted,
            self.bad_handshakes,
            self.accept_errors,
            Duration::from_nanos(self.cpu_ns).as_secs_f64(),
        )
    }
}

/// Counters as atomics.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) received: AtomicU64,
    pub(super) sent: AtomicU64,
    pub(super) replies: AtomicU64,
    pub(super) connections: AtomicU64,
    pub(super) open: AtomicU64,
    pub(super) closed_clean: AtomicU64,
    pub(super) closed_abnormal: AtomicU64,
    pub(super) stalled: AtomicU64,
    pub(super) too_big: AtomicU64,
    pub(super) protocol_errors: AtomicU64,
    pub(super) idle_closed: AtomicU64,
    pub(super) refused_http: AtomicU64,
    pub(super) refused_full: AtomicU64,
    pub(super) handshake_timeouts: AtomicU64,
    pub(super) evicted: AtomicU64,
    pub(super) bad_handshakes: AtomicU64,
    pub(super) accept_errors: AtomicU64,
}

impl Tally {
    pub(super) fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// What every task of the server shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) cfg: Config,
    pub(super) tally: Tally,
    pub(super) rooms: Rooms,
    pub(super) pending: Pending,
    /// wss://: the TLS acceptor (`--tls-cert`/`--tls-key`).
    pub(super) tls: Option<std::sync::Arc<tokio_rustls::rustls::ServerConfig>>,
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
    /// Binds (errors come back here) and starts serving ws:// on its own runtime.
    pub fn start(cfg: &Config) -> anyhow::Result<Self> {
        Self::start_tls(cfg, None)
    }

    /// Same, serving wss:// with `tls` when given (see `crate::tls::server_config`).
    pub fn start_tls(
        cfg: &Config,
        tls: Option<std::sync::Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> anyhow::Result<Self> {
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
        let shared = Arc::new(Shared {
            cfg: *cfg,
            tally: Tally::default(),
            rooms: Rooms::default(),
            pending: Pending::default(),
            tls,
        });
        let (stop, stop_rx) = watch::channel(false);
        let sh = shared.clone();
        let thread = std::thread::Builder::new().name("wb-room-main".into()).spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else { return };
                accept::run(listener, sh.clone(), stop_rx).await;
                // Every connection task has had the stop signal and sends its close frame
                // (at most 0.5 s each, in parallel): give them that long, then drop the rest.
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    while sh.pending.live.load(Ordering::Acquire) > 0 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await;
            });
            rt.shutdown_timeout(Duration::from_millis(100));
        })?;
        Ok(Self { addr, shared, stop, thread: Some(thread), cpu: ProcessCpu::now() })
    }

    /// The bound address.
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        let t = &self.shared.tally;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let rooms = &self.shared.rooms;
        Counters {
            received: g(&t.received),
            sent: g(&t.sent),
            replies: g(&t.replies),
            connections: g(&t.connections),
            open: g(&t.open),
            live: g(&self.shared.pending.live),
            rooms: rooms.count(),
            backlog_bytes: g(&rooms.backlog),
            closed_clean: g(&t.closed_clean),
            closed_abnormal: g(&t.closed_abnormal),
            dropped_slow: g(&rooms.kicked) + g(&t.stalled),
            too_big: g(&t.too_big),
            protocol_errors: g(&t.protocol_errors),
            idle_closed: g(&t.idle_closed),
            refused_http: g(&t.refused_http),
            refused_full: g(&t.refused_full),
            handshake_timeouts: g(&t.handshake_timeouts),
            evicted: g(&t.evicted),
            bad_handshakes: g(&t.bad_handshakes),
            accept_errors: g(&t.accept_errors),
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
