//! A control connection on serve: the version-2 handshake (`hello`, `challenge`, `start`
//! with an HMAC tag when serve has a token; `wire::handshake` has the exchange), the
//! admission of the session against serve's budget, and the stop that bounds it.
//!
//! Every step is bounded: the `hello` and the `start` must each arrive within the
//! first-frame timeout and be at most 4 KiB; a session ends at its deadline (what serve
//! granted plus a drain grace) or at the stop flag, whichever comes first.

use std::io;
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirebench_core::budget::{self, Grant, Ledger, Ticket};
use wirebench_core::wire::control::{self, Control, Direction, StreamProto, StreamRequest};
use wirebench_core::wire::handshake::{self, NONCE_LEN};

use super::{Counters, Shared};
use crate::control::{Bounds, is_timeout, write_bounded};
use crate::shutdown::{POLL, Shutdown};

/// How long serve waits on a client that does not take what it writes.
pub(super) const STALL: Duration = crate::control::FRAME_WITHIN;
/// A session's deadline past its granted duration: time to drain and exchange results.
const GRACE: Duration = Duration::from_secs(10);
/// Bytes of one publisher's sequence window (`StreamRx`: 2^20 bits).
const WINDOW_BYTES: u64 = 128 << 10;
/// Bytes a session thread holds (stack pages touched, buffers on it).
const THREAD_BYTES: u64 = 64 << 10;
/// A forward receiver's buffer: UDP `recvmmsg` slots, or the TCP frame buffer.
const UDP_RECV_BYTES: u64 = (wirebench_net::batch::SLOTS * wirebench_net::batch::SLOT) as u64;
const TCP_RECV_BYTES: u64 = 1 << 20;

/// A refusal: the counter it lands in and what the client is told (nothing when the client
/// is gone or never spoke).
struct Refused(fn(&Counters) -> &AtomicU64, Option<String>);

fn timed_out(c: &Counters) -> &AtomicU64 {
    &c.timed_out
}
fn control_errors(c: &Counters) -> &AtomicU64 {
    &c.control_errors
}
fn refused_sessions(c: &Counters) -> &AtomicU64 {
    &c.refused_sessions
}
fn auth_failures(c: &Counters) -> &AtomicU64 {
    &c.auth_failures
}

/// What an admitted client may do.
pub(super) struct Admitted {
    pub(super) req: StreamRequest,
    pub(super) grant: Grant,
}

/// Serves one control connection whose first bytes (`prefix`) were a control frame.
pub(super) fn handle(mut conn: TcpStream, prefix: &[u8], shared: &Shared) {
    let c = &shared.counters;
    let stop = shared.shutdown.flag();
    if conn.set_read_timeout(Some(POLL)).is_err() || conn.set_write_timeout(Some(POLL)).is_err() {
        return;
    }
    if let Some(&v) = prefix.get(2).filter(|v| (control::LEGACY_VERSION..control::VERSION).contains(v)) {
        Counters::bump(&c.old_clients);
        let f = control::legacy_refusal(
            v,
            &format!(
                "this serve speaks control version {} (the client proves the token first), this client {v}: \
                 upgrade wirebench on this client",
                control::VERSION
            ),
        );
        let _ = write_bounded(&mut conn, &f, stop, STALL);
        return;
    }
    let admitted = match handshake(&mut conn, prefix, shared) {
        Ok(a) => a,
        Err(Refused(counter, message)) => {
            Counters::bump(counter(c));
            if let Some(message) = message {
                let _ = crate::control::send_bounded(&mut conn, &Control::Error { message }, stop, STALL);
            }
            return;
        }
    };
    let Ok(peer) = conn.peer_addr() else { return };
    let cost = session_bytes(&admitted.req, &admitted.grant);
    let ticket = match shared.ledger.lock().map(|mut l| l.admit(peer.ip(), cost)) {
        Ok(Ok(t)) => t,
        Ok(Err(refusal)) => {
            Counters::bump(&c.refused_sessions);
            let _ =
                crate::control::send_bounded(&mut conn, &Control::Error { message: refusal.to_string() }, stop, STALL);
            return;
        }
        Err(_) => return,
    };
    let _held = Held { ledger: &shared.ledger, ticket: Some(ticket) };
    c.streams.fetch_add(1, Ordering::Relaxed);
    if super::stream::run(conn, &admitted, shared).is_err() {
        // The client went away mid-session, or stopped reading, or sent what is not ours.
        Counters::bump(&c.control_errors);
    }
}

/// A session's share of the budget, given back when the session ends however it ends (a
/// panicking session thread included).
struct Held<'a> {
    ledger: &'a Mutex<Ledger>,
    ticket: Option<Ticket>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let (Some(t), Ok(mut l)) = (self.ticket.take(), self.ledger.lock()) {
            l.release(t);
        }
    }
}

/// Reads one frame of at most 4 KiB that must arrive within the first-frame timeout.
/// The next frame of the handshake; a client that closed (or reset) instead is counted in
/// `gone`.
fn first_frame(
    conn: &mut TcpStream,
    prefix: &[u8],
    shared: &Shared,
    gone: fn(&Counters) -> &AtomicU64,
) -> Result<Control, Refused> {
    let within = shared.cfg.first_frame_timeout;
    let b = Bounds { max_body: control::MAX_FIRST_BODY, within, stop: Some(shared.shutdown.flag()) };
    let since = Instant::now();
    loop {
        match crate::control::recv_with(conn, prefix, &b) {
            Ok(m) => return Ok(m),
            Err(e) if is_timeout(&e) && since.elapsed() < within && !shared.shutdown.is_set() => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => return Err(Refused(timed_out, None)),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(Refused(control_errors, Some(format!("bad control frame: {e}"))));
            }
            Err(_) => return Err(Refused(gone, None)),
        }
    }
}

fn send(conn: &mut TcpStream, m: &Control, shared: &Shared) -> Result<(), Refused> {
    crate::control::send_bounded(conn, m, shared.shutdown.flag(), STALL).map_err(|_| Refused(control_errors, None))
}

/// `hello`, `challenge`, `start`: the request, checked against the token and serve's rules.
fn handshake(conn: &mut TcpStream, prefix: &[u8], shared: &Shared) -> Result<Admitted, Refused> {
    let Control::Hello { nonce: nc } = first_frame(conn, prefix, shared, control_errors)? else {
        return Err(Refused(control_errors, Some("expected hello first".into())));
    };
    let cfg = &shared.cfg;
    if !cfg.streams_allowed() {
        let why = "this serve answers only the probe echo: streams need `serve --token` (clients give --token or \
                   WIREBENCH_TOKEN) or `serve --open`";
        return Err(Refused(refused_sessions, Some(why.into())));
    }
    let ns = crate::ctx::os_random::<NONCE_LEN>().map_err(|e| Refused(control_errors, Some(e.to_string())))?;
    let ns = handshake::hex(&ns);
    let salt = shared.key.as_ref().map(|_| cfg.salt.clone());
    // Nothing serve says before the client proved itself depends on the token.
    send(conn, &Control::Challenge { nonce: ns.clone(), auth: shared.key.is_some(), salt }, shared)?;
    // A wirebench client asked for the token leaves here when it has none: a token failure,
    // not a control error.
    let gone = if shared.key.is_some() { auth_failures } else { control_errors };
    match (&shared.key, first_frame(conn, &[], shared, gone)?) {
        (Some(k), Control::Auth { tag }) => {
            if !handshake::verify_client(k, &nc, &ns, &tag) {
                return Err(Refused(auth_failures, Some("this serve's token does not match yours".into())));
            }
            send(conn, &Control::Welcome { proof: handshake::serve_proof(k, &nc, &ns) }, shared)?;
            finish(first_frame(conn, &[], shared, control_errors)?, true, shared)
        }
        (Some(_), _) => {
            let why = "this serve needs a token: give --token or WIREBENCH_TOKEN";
            Err(Refused(auth_failures, Some(why.into())))
        }
        (None, Control::Auth { .. }) => finish(first_frame(conn, &[], shared, control_errors)?, false, shared),
        (None, other) => finish(other, false, shared),
    }
}

/// The `start` after the handshake, checked against serve's rules.
fn finish(next: Control, authenticated: bool, shared: &Shared) -> Result<Admitted, Refused> {
    let cfg = &shared.cfg;
    let Control::Start(req) = next else {
        return Err(Refused(control_errors, Some("expected start after the challenge".into())));
    };
    if req.group.is_some() && !authenticated && !cfg.listen.ip().is_loopback() && !cfg.open {
        return Err(Refused(refused_sessions, Some("joining a group needs the token".into())));
    }
    let limits = cfg.send_limits(authenticated, req.size);
    let grant = budget::grant(&limits, req.size, req.publishers, req.rate_per_s, req.duration_ns);
    Ok(Admitted { req, grant })
}

/// What a session holds in serve's memory, for the budget: buffers, sequence windows,
/// threads and send batches.
fn session_bytes(req: &StreamRequest, grant: &Grant) -> u64 {
    let pubs = u64::from(req.publishers);
    let size = req.size as u64;
    let mut b = THREAD_BYTES;
    if req.direction != Direction::Reverse {
        let buf = if req.proto == StreamProto::Udp { UDP_RECV_BYTES } else { TCP_RECV_BYTES };
        b += buf + pubs * WINDOW_BYTES + THREAD_BYTES;
    }
    if req.direction != Direction::Forward {
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to 1..=64")]
        let batch = match (req.proto, grant.per_publisher) {
            (StreamProto::Tcp, _) => ((256 << 10) / size).clamp(1, 64),
            (StreamProto::Udp, Some(r)) => (r * 50e-6).clamp(1.0, 64.0) as u64,
            (StreamProto::Udp, None) => 64,
        };
        b += pubs * (batch * size + THREAD_BYTES);
    }
    b
}

/// A session's own stop: a child of serve's, so set when serve stops, when the session's
/// deadline passes (one small thread asleep until then), or when the session ends.
pub(super) struct SessionStop {
    stop: Shutdown,
    watcher: Option<JoinHandle<()>>,
}

impl SessionStop {
    /// Stops at `shutdown` or `granted` + grace from now.
    pub(super) fn start(shutdown: &Shutdown, granted: Duration) -> io::Result<Self> {
        let stop = shutdown.child();
        let deadline = Instant::now() + granted + GRACE;
        let s = stop.clone();
        let watcher = std::thread::Builder::new().name("serve-session-stop".into()).spawn(move || {
            // Unparked by the drop; serve's stop sets the flag without it, the drop follows.
            while !s.is_set() {
                let now = Instant::now();
                if now >= deadline {
                    s.trigger();
                    return;
                }
                std::thread::park_timeout(deadline - now);
            }
        })?;
        Ok(Self { stop, watcher: Some(watcher) })
    }

    /// The flag, for loops and engines that take one.
    pub(super) fn flag(&self) -> &AtomicBool {
        self.stop.flag()
    }

    /// The stop itself, for the session's threads and for children of it.
    pub(super) fn handle(&self) -> Shutdown {
        self.stop.clone()
    }

    /// Set?
    pub(super) fn is_set(&self) -> bool {
        self.stop.is_set()
    }
}

impl Drop for SessionStop {
    /// The session is over, however it ended (an early error return included): whatever
    /// still watches the flag stops.
    fn drop(&mut self) {
        self.stop.trigger();
        if let Some(h) = self.watcher.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(direction: Direction, proto: StreamProto, publishers: u16, size: usize) -> StreamRequest {
        StreamRequest {
            session: 1,
            token: None,
            proto,
            size,
            direction,
            publishers,
            rate_per_s: None,
            duration_ns: 0,
            count: None,
            client_port: None,
            group: None,
            rcvbuf: None,
        }
    }

    #[test]
    fn session_cost_counts_windows_buffers_and_batches() {
        let g = Grant { per_publisher: None, duration: Duration::from_secs(1) };
        let fwd = session_bytes(&req(Direction::Forward, StreamProto::Udp, 64, 1468), &g);
        assert_eq!(fwd, THREAD_BYTES + UDP_RECV_BYTES + 64 * WINDOW_BYTES + THREAD_BYTES);
        let rev = session_bytes(&req(Direction::Reverse, StreamProto::Udp, 64, 65_507), &g);
        assert_eq!(rev, THREAD_BYTES + 64 * (64 * 65_507 + THREAD_BYTES), "flat out: full batches");
        let slow = Grant { per_publisher: Some(1000.0), duration: Duration::from_secs(1) };
        let rev = session_bytes(&req(Direction::Reverse, StreamProto::Udp, 1, 1468), &slow);
        assert_eq!(rev, THREAD_BYTES + 1468 + THREAD_BYTES, "1000 msg/s sends one at a time");
        // The default budget (256 MiB) refuses one anonymous 64-publisher jumbo reverse session.
        assert!(session_bytes(&req(Direction::Reverse, StreamProto::Udp, 64, 65_507), &g) > 256 << 20);
    }

    #[test]
    fn a_session_stop_follows_serve() {
        let sd = Shutdown::new();
        let s = SessionStop::start(&sd, Duration::from_secs(3600)).unwrap();
        assert!(!s.is_set());
        sd.trigger();
        let t = Instant::now();
        while !s.is_set() {
            assert!(t.elapsed() < Duration::from_secs(5), "the stop never followed serve's");
            std::thread::yield_now();
        }
        drop(s);
    }
}
