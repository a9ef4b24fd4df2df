//! One simulated user: connects at its ramp slot, then sends on its own open-loop schedule
//! (both decided in core, `load::client`) and records every message it receives; at the end
//! it closes with the WebSocket close handshake and lets the server close TCP first (no
//! TIME_WAIT left on this side). A client is a [`Joining`] until its connection is open, then a
//! [`Session`]; the worker's event loop (`load/workers.rs`) drives both: the socket's
//! readiness and the client's one due time, each answered at once, never waiting.

mod recv;
mod ws;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use std::task::Poll;

use tokio_tungstenite::tungstenite;
use wirebench_core::latency;
use wirebench_core::load::client::{ClientSchedule, join_ns, rng_for};
use wirebench_core::load::delivery::End;
use wirebench_core::load::msg::Fields;
use wirebench_core::load::record::ErrorKind;

use super::config::Config;
use super::stats::Stats;
use crate::tls;
use recv::{Down, Up, end_of};
use ws::{Dial, Dialed, In, Ws, WsError};

/// What every client shares.
#[derive(Debug)]
pub struct Plan {
    /// The configuration.
    pub cfg: Config,
    /// Time zero of the run (monotonic).
    pub t0: Instant,
    /// Wall clock at `t0`, ns since the epoch.
    pub wall0_ns: u64,
    /// Sends stop here, ns after `t0`.
    pub end_ns: u64,
    /// Clients stay connected until here, for messages still in flight.
    pub quit_ns: u64,
}

impl Plan {
    /// Now, ns after `t0`.
    pub fn now_ns(&self) -> u64 {
        nanos(self.t0.elapsed())
    }

    /// The messages' time stamp of `ns` after `t0`: wall-clock µs.
    pub const fn stamp_us(&self, ns: u64) -> u64 {
        (self.wall0_ns + ns) / 1_000
    }
}

/// How long the close handshake may take before the socket is reset instead.
const CLOSE_WAIT_NS: u64 = 2_000_000_000;

/// A send handed to the upload shaper: due time, hand-over time, its length in `Conn::held`.
type Queued = (u64, u64, usize);

/// A client before its connection is open: waiting for its slot of the ramp, then
/// connecting (TCP, TLS for wss://, the WebSocket handshake with this client's request, its
/// per-client values expanded once). Driven by the worker's event loop like a [`Session`].
#[derive(Debug)]
pub(super) struct Joining {
    id: u64,
    join_ns: u64,
    /// When it began to connect.
    t_connect: u64,
    dial: Option<Dial>,
}

/// What the event loop does with a joining client after a call (a return value: the
/// session in it is moved once per client).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(super) enum Joined {
    /// Call [`Joining::timer`] at this time (`None`: the socket's readiness only).
    Wait(Option<u64>),
    /// Started connecting: watch this socket, then wait for its readiness.
    Watch,
    /// Connected: the session, and when it first wants its timer.
    Open(Session, u64),
    /// Never connected (failed and counted, or stopped): drop it.
    Done,
}

impl Joining {
    /// Client `id`, and its slot of the ramp (ns after `t0`).
    pub(super) fn new(id: u64, plan: &Plan) -> (Self, u64) {
        let cfg = &plan.cfg;
        let join_ns = join_ns(u64::try_from(cfg.ramp.as_nanos()).unwrap_or(0), id, cfg.clients);
        (Self { id, join_ns, t_connect: 0, dial: None }, join_ns)
    }

    /// The socket being connected, to register with the event loop.
    pub(super) fn tcp(&mut self) -> Option<&mut mio::net::TcpStream> {
        self.dial.as_mut().and_then(Dial::tcp)
    }

    /// The slot came: the connection starts (TCP's connect, non-blocking).
    pub(super) fn timer(&mut self, plan: &Plan, stats: &Stats) -> Joined {
        if self.dial.is_some() {
            return Joined::Wait(None);
        }
        let cfg = &plan.cfg;
        if plan.now_ns() < self.join_ns {
            return Joined::Wait(Some(self.join_ns));
        }
        self.t_connect = plan.now_ns();
        let request = match cfg.connect.request(self.id, self.id / cfg.room_size) {
            Ok(r) => r,
            Err(cause) => return self.failed_because(cause, plan, stats),
        };
        let tls = match cfg.connect.tls_session() {
            None => None,
            Some(Ok(c)) => Some(c),
            Some(Err(cause)) => return self.failed_because(cause, plan, stats),
        };
        match Dial::start(cfg.addr, tls, request, crate::limits::ws_config()) {
            Ok(d) => {
                self.dial = Some(d);
                Joined::Watch
            }
            Err(_) => self.failed(plan, stats),
        }
    }

    /// The socket is ready: the connection goes as far as it can.
    pub(super) fn ready(&mut self, read: Readable, plan: &Plan, stats: &Stats) -> Joined {
        let Some(dial) = self.dial.as_mut() else { return Joined::Wait(Some(self.join_ns)) };
        let conn = &plan.cfg.connect;
        match dial.ready(read != Readable::No, read == Readable::Closed) {
            Dialed::Pending => Joined::Wait(None),
            Dialed::Open(ws, resp) => {
                if !conn.subprotocols.is_empty() {
                    let chosen = resp.headers().get(tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL);
                    stats.handshakes.chose(chosen.and_then(|v| v.to_str().ok()));
                }
                // Mark, then stamp: see wirebench_core::load::delivery.
                stats.book.joining(self.id);
                let connected_at = plan.now_ns();
                stats.book.joined(self.id, plan.stamp_us(connected_at));
                stats.with(|s| latency::record(&mut s.connect, connected_at - self.t_connect));
                Stats::bump(&stats.connected);
                Stats::bump(&stats.open);
                let (s, wake) = Session::new(self.id, ws, connected_at.max(self.join_ns), plan);
                Joined::Open(s, wake)
            }
            Dialed::NoTcp => self.failed(plan, stats),
            Dialed::NoTls(e) => self.failed_because(tls::cause(&e, &conn.host), plan, stats),
            Dialed::Failed(tungstenite::Error::Http(resp)) => {
                stats.refused_status.store(u64::from(resp.status().as_u16()), Ordering::Relaxed);
                stats.with(|s| s.error(ErrorKind::Refused));
                self.failed(plan, stats)
            }
            Dialed::Failed(tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::SecWebSocketSubProtocolError(e),
            )) => {
                let cause = format!("subprotocol: {e} (offered: {})", conn.subprotocols.join(", "));
                self.failed_because(cause, plan, stats)
            }
            Dialed::Failed(e) => self.failed_because(format!("WebSocket handshake: {e}"), plan, stats),
        }
    }

    /// The stop signal: the client never joins.
    pub(super) fn stop(stats: &Stats) -> Joined {
        stats.done.fetch_add(1, Ordering::Relaxed);
        Joined::Done
    }

    /// A handshake failed, for `cause`.
    fn failed_because(&mut self, cause: String, plan: &Plan, stats: &Stats) -> Joined {
        stats.handshakes.failed(cause);
        stats.with(|s| s.error(ErrorKind::Connect));
        self.failed(plan, stats)
    }

    /// Never connected (also: its socket could not be watched): the schedule it was to begin
    /// at its join time is lost.
    pub(super) fn failed(&mut self, plan: &Plan, stats: &Stats) -> Joined {
        self.dial = None;
        let cfg = &plan.cfg;
        Stats::bump(&stats.failed);
        let first = ClientSchedule::new(rng_for(cfg.seed, self.id), cfg.arrivals, self.join_ns, plan.end_ns).next_ns();
        super::health::on_client_failed(stats, first);
        Self::stop(stats)
    }
}

/// One connected client's state: its schedule, its link's shapers, the messages the upload
/// shaper holds, and the buffer each message is rendered into.
#[derive(Debug)]
struct Conn {
    id: u64,
    room: u64,
    sched: ClientSchedule,
    up: Option<Up>,
    down: Option<Down>,
    queue: VecDeque<Queued>,
    /// The queued messages back to back, the first at `held_at`.
    held: Vec<u8>,
    held_at: usize,
    buf: String,
}

impl Conn {
    /// Renders every send due at `now` (the open loop: however late) and hands it to the
    /// upload shaper; counts each with how late it went.
    fn queue_due(&mut self, plan: &Plan, stats: &Stats, now: u64) {
        let cfg = &plan.cfg;
        while let Some(d) = self.sched.due(now, &cfg.mix, cfg.arrivals) {
            let et = &cfg.mix.types()[d.kind];
            let ts_us = plan.stamp_us(now);
            let expected = if d.request {
                stats.book.on_request_send(self.id, d.seq);
                1
            } else {
                stats.book.on_relayed_send(self.id, d.seq, ts_us)
            };
            let it_us = plan.stamp_us(d.intended_ns);
            let f =
                Fields { kind: &et.name, req: d.request, sender: self.id, room: self.room, seq: d.seq, ts_us, it_us };
            cfg.template.render(&f, et.size, &mut self.buf);
            let len = self.buf.len();
            let at = self.up.as_mut().map_or(now, |u| u.due(len as u64, now));
            self.held.extend_from_slice(self.buf.as_bytes());
            self.queue.push_back((at, now, len));
            stats.with(|s| s.on_send(d.kind, now - d.intended_ns, expected));
        }
    }
}

/// What a readiness event says about reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readable {
    /// Writable only: reads still have nothing to take.
    No,
    /// Data may be waiting.
    Yes,
    /// The peer closed its side, or the socket failed: reads go to the socket from now on.
    Closed,
}

/// What the event loop does with a session after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Call [`Session::timer`] at this time (ns after `t0`), and [`Session::ready`] on the
    /// socket's next readiness.
    Wait(u64),
    /// The client is finished and counted: drop the session (its socket closes).
    Done,
}

/// The close handshake under way: its bound, and whether the connection ended early.
#[derive(Debug, Clone, Copy)]
struct Closing {
    until_ns: u64,
    early: bool,
}

/// A connected client, driven by its socket's readiness and its due time.
#[derive(Debug)]
pub(super) struct Session {
    c: Conn,
    ws: Ws,
    closing: Option<Closing>,
}

impl Session {
    /// Client `id`, connected at `start_ns` (its schedule begins there), and when it first
    /// wants its timer.
    pub(super) fn new(id: u64, ws: Ws, start_ns: u64, plan: &Plan) -> (Self, u64) {
        let cfg = &plan.cfg;
        let c = Conn {
            id,
            room: id / cfg.room_size,
            sched: ClientSchedule::new(rng_for(cfg.seed, id), cfg.arrivals, start_ns, plan.end_ns),
            up: Up::new(cfg.link_up),
            down: Down::new(cfg.link_down),
            queue: VecDeque::new(),
            held: Vec::new(),
            held_at: 0,
            buf: String::new(),
        };
        let first = c.sched.wake_ns(plan.quit_ns, None).min(plan.quit_ns);
        (Self { c, ws, closing: None }, first)
    }

    /// The next due time: the close handshake's bound, or the next send or held frame (a
    /// frame held by a full socket waits for writability instead), at most the quit time.
    fn wake(&self, plan: &Plan) -> Step {
        if let Some(cl) = self.closing {
            return Step::Wait(cl.until_ns);
        }
        let held = if self.ws.blocked { None } else { self.c.queue.front().map(|(at, _, _)| *at) };
        Step::Wait(self.c.sched.wake_ns(plan.quit_ns, held))
    }

    /// The socket is ready (`read` says what for): frames a full socket held go out, then
    /// every message that arrived is read.
    pub(super) fn ready(&mut self, read: Readable, plan: &Plan, stats: &Stats) -> Step {
        if read != Readable::No {
            self.ws.readable(read == Readable::Closed);
        }
        if self.closing.is_some() {
            return self.drain_close(plan, stats);
        }
        if self.ws.blocked
            && let Err(e) = self.ws.flush().and_then(|()| self.write_due(plan, stats))
        {
            stats.with(|s| s.error(ErrorKind::Send));
            return self.end(plan, stats, Some(end_of(&e)));
        }
        loop {
            let ended = match self.ws.next() {
                Poll::Pending => return self.wake(plan),
                Poll::Ready(Some(Ok(In::Data { payload, .. }))) => {
                    recv::on_message(self.c.id, payload, plan, stats, self.c.down.as_mut());
                    continue;
                }
                // The server closes: nothing more is sent; the close handshake finishes it.
                Poll::Ready(Some(Ok(In::Close(code)))) => End::ServerClosed(code.unwrap_or(1005)),
                Poll::Ready(Some(Err(e))) => {
                    stats.with(|s| s.error(ErrorKind::Read));
                    end_of(&e)
                }
                Poll::Ready(None) => End::Lost,
            };
            return self.end(plan, stats, Some(ended));
        }
    }

    /// The due time came: the quit time ends the session; otherwise every send due now is
    /// rendered and handed to the upload shaper, and the frames whose shaped time has come
    /// are written. During the close handshake: its bound passed, the socket is reset.
    pub(super) fn timer(&mut self, plan: &Plan, stats: &Stats) -> Step {
        let now = plan.now_ns();
        if let Some(cl) = self.closing {
            if now < cl.until_ns {
                return Step::Wait(cl.until_ns);
            }
            stats.with(|s| s.error(ErrorKind::CloseTimeout));
            let _ = socket2::SockRef::from(&*self.ws.tcp()).set_linger(Some(Duration::ZERO));
            return self.finish(stats);
        }
        if now >= plan.quit_ns {
            return self.end(plan, stats, None);
        }
        self.c.queue_due(plan, stats, now);
        if let Err(e) = self.write_due(plan, stats) {
            stats.with(|s| s.error(ErrorKind::Send));
            return self.end(plan, stats, Some(end_of(&e)));
        }
        self.wake(plan)
    }

    /// The stop signal: the session ends as at its quit time.
    pub(super) fn stop(&mut self, plan: &Plan, stats: &Stats) -> Step {
        if self.closing.is_some() { self.wake(plan) } else { self.end(plan, stats, None) }
    }

    /// Writes every queued message whose shaped time has come, each framed and handed to the
    /// socket at once, until the socket is full.
    fn write_due(&mut self, plan: &Plan, stats: &Stats) -> Result<(), WsError> {
        let now = plan.now_ns();
        let c = &mut self.c;
        while !self.ws.blocked && c.queue.front().is_some_and(|(at, _, _)| *at <= now) {
            let (_, handed, len) = c.queue.pop_front().expect("checked");
            let from = c.held_at;
            c.held_at += len;
            self.ws.send(true, &c.held[from..c.held_at])?;
            if let Some(u) = c.up.as_mut() {
                // Achieved: when the frame was written, not when the shaper said.
                let written = plan.now_ns();
                u.wrote(len as u64, written);
                stats.with(|s| latency::record(&mut s.up_hold, written - handed));
            }
        }
        if c.queue.is_empty() {
            c.held.clear();
            c.held_at = 0;
        } else if c.held_at > c.held.len() / 2 {
            // what is written goes, in steps that keep the copying linear
            c.held.drain(..c.held_at);
            c.held_at = 0;
        }
        Ok(())
    }

    /// The session ended (`None`: it lasted to the quit time or the stop). Counts how, then
    /// closes: the close handshake when this side ends or the server sent a close frame.
    fn end(&mut self, plan: &Plan, stats: &Stats, ended: Option<End>) -> Step {
        let now = plan.now_ns();
        // dropped before the end of sending: the rest of its schedule is lost with it
        let dropped = ended.is_some() && now < plan.end_ns;
        let next = self.c.sched.next_ns();
        super::health::on_client_end(plan, stats, self.c.sched.rng(), next, dropped);
        stats.book.left(self.c.id, ended.unwrap_or(End::Open));
        let early = ended.is_some() && now < plan.quit_ns;
        self.closing = Some(Closing { until_ns: now + CLOSE_WAIT_NS, early });
        if ended.is_none() || matches!(ended, Some(End::ServerClosed(_))) {
            // Send a close frame (unless the server sent one, which was answered), then read
            // until the server closes TCP, so the server side closes first and this side
            // keeps no TIME_WAIT.
            let _ = self.ws.close(Some(1000));
            return self.drain_close(plan, stats);
        }
        self.finish(stats)
    }

    /// Reads until the server closes (or the connection fails).
    fn drain_close(&mut self, plan: &Plan, stats: &Stats) -> Step {
        if self.ws.blocked && self.ws.flush().is_err() {
            return self.finish(stats);
        }
        loop {
            match self.ws.next() {
                Poll::Pending => return self.wake(plan),
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(_) => return self.finish(stats),
            }
        }
    }

    /// The client's last counts; the session is to be dropped.
    fn finish(&mut self, stats: &Stats) -> Step {
        if self.closing.is_some_and(|cl| cl.early) {
            Stats::bump(&stats.disconnects);
        }
        stats.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(u) = &self.c.up {
            stats.up_bps_max.fetch_max(u.bps(), Ordering::Relaxed);
            stats.up_frames.fetch_add(u.frames, Ordering::Relaxed);
        }
        if let Some(d) = &self.c.down {
            stats.down_bps_max.fetch_max(d.bps(), Ordering::Relaxed);
        }
        stats.done.fetch_add(1, Ordering::Relaxed);
        Step::Done
    }
}
