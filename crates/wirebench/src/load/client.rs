//! One simulated user: connects at its ramp slot, then sends on its own open-loop schedule
//! (both decided in core, `load::client`) and records every message it receives; at the end
//! it closes with the WebSocket close handshake and lets the server close TCP first (no
//! TIME_WAIT left on this side). The connect phase (TCP, TLS and WebSocket handshakes, several
//! KB of state) is a task on the worker's connector runtime ([`join`]); the open connection is
//! a [`Session`] the worker's event loop drives (`load/workers.rs`): the socket's readiness
//! and the session's one due time, both answered at once, never waiting.

mod recv;
mod ws;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use std::task::Poll;

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use wirebench_core::latency;
use wirebench_core::load::client::{ClientSchedule, join_ns, rng_for};
use wirebench_core::load::delivery::End;
use wirebench_core::load::msg::Fields;
use wirebench_core::load::record::ErrorKind;

use super::config::Config;
use super::stats::Stats;
use recv::{Down, Up, end_of};
pub(super) use ws::Ws;

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

    /// The instant `ns` after `t0`.
    pub fn at(&self, ns: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.t0 + Duration::from_nanos(ns))
    }

    /// The messages' time stamp of `ns` after `t0`: wall-clock µs.
    pub const fn stamp_us(&self, ns: u64) -> u64 {
        (self.wall0_ns + ns) / 1_000
    }
}

/// How long the close handshake may take before the socket is reset instead.
const CLOSE_WAIT_NS: u64 = 2_000_000_000;

/// TCP, then TLS for wss://, then the WebSocket handshake with this client's request
/// (per-client values expanded here, once). A failure is counted with its cause.
async fn connect(plan: &Plan, id: u64, room: u64, stats: &Stats) -> Result<Ws, ()> {
    let conn = &plan.cfg.connect;
    let failed = |cause: String| {
        stats.handshakes.failed(cause);
        stats.with(|s| s.error(ErrorKind::Connect));
    };
    let sock = TcpStream::connect(plan.cfg.addr).await.map_err(|_| ())?;
    let _ = sock.set_nodelay(true);
    let stream = conn.secure(sock).await.map_err(&failed)?;
    let request = conn.request(id, room).map_err(&failed)?;
    match ws::handshake(request, stream, crate::limits::ws_config()).await {
        Ok((ws, resp)) => {
            if !conn.subprotocols.is_empty() {
                let chosen = resp.headers().get(tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL);
                stats.handshakes.chose(chosen.and_then(|v| v.to_str().ok()));
            }
            Ok(ws)
        }
        Err(tungstenite::Error::Http(resp)) => {
            stats.refused_status.store(u64::from(resp.status().as_u16()), Ordering::Relaxed);
            stats.with(|s| s.error(ErrorKind::Refused));
            Err(())
        }
        Err(tungstenite::Error::Protocol(tungstenite::error::ProtocolError::SecWebSocketSubProtocolError(e))) => {
            failed(format!("subprotocol: {e} (offered: {})", conn.subprotocols.join(", ")));
            Err(())
        }
        Err(e) => {
            failed(format!("WebSocket handshake: {e}"));
            Err(())
        }
    }
}

/// A send handed to the upload shaper: due time, hand-over time, the frame.
type Queued = (u64, u64, Message);

/// Client `id` joins at its slot of the ramp and connects; returns its connection and when
/// it connected, or `None` (failed and counted, or stopped).
pub(super) async fn join(id: u64, plan: &Plan, stats: &Stats, stop: &mut watch::Receiver<bool>) -> Option<(Ws, u64)> {
    let cfg = &plan.cfg;
    let join_ns = join_ns(u64::try_from(cfg.ramp.as_nanos()).unwrap_or(0), id, cfg.clients);
    tokio::select! {
        () = tokio::time::sleep_until(plan.at(join_ns)) => {}
        _ = stop.changed() => return None,
    }
    let t_connect = plan.now_ns();
    let ws = tokio::select! {
        r = Box::pin(connect(plan, id, id / cfg.room_size, stats)) => r,
        _ = stop.changed() => return None,
    };
    let Ok(ws) = ws else {
        Stats::bump(&stats.failed);
        // never connected: the schedule it was to begin at its join time is lost
        let first = ClientSchedule::new(rng_for(cfg.seed, id), cfg.arrivals, join_ns, plan.end_ns).next_ns();
        super::health::on_client_failed(stats, first);
        return None;
    };
    // Mark, then stamp: see wirebench_core::load::delivery.
    stats.book.joining(id);
    let connected_at = plan.now_ns();
    stats.book.joined(id, plan.stamp_us(connected_at));
    stats.with(|s| latency::record(&mut s.connect, connected_at - t_connect));
    Stats::bump(&stats.connected);
    Stats::bump(&stats.open);
    Some((ws, connected_at.max(join_ns)))
}

/// One connected client's state: its schedule, its link's shapers, the frames the upload
/// shaper holds, and the buffer each message is rendered into.
#[derive(Debug)]
struct Conn {
    id: u64,
    room: u64,
    sched: ClientSchedule,
    up: Option<Up>,
    down: Option<Down>,
    queue: VecDeque<Queued>,
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
            let len = self.buf.len() as u64;
            let at = self.up.as_mut().map_or(now, |u| u.due(len, now));
            self.queue.push_back((at, now, Message::text(self.buf.as_str())));
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
            buf: String::new(),
        };
        let first = c.sched.wake_ns(plan.quit_ns, None).min(plan.quit_ns);
        (Self { c, ws, closing: None }, first)
    }

    /// The TCP socket, to register with the event loop.
    pub(super) fn tcp(&mut self) -> &mut mio::net::TcpStream {
        self.ws.tcp()
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
                Poll::Ready(Some(Ok(Message::Text(t)))) => {
                    recv::on_message(self.c.id, t.as_bytes(), plan, stats, self.c.down.as_mut());
                    continue;
                }
                Poll::Ready(Some(Ok(Message::Binary(b)))) => {
                    recv::on_message(self.c.id, &b, plan, stats, self.c.down.as_mut());
                    continue;
                }
                // The server closes: nothing more is sent; the close handshake finishes it.
                Poll::Ready(Some(Ok(Message::Close(f)))) => End::ServerClosed(f.map_or(1005, |f| u16::from(f.code))),
                Poll::Ready(Some(Ok(_))) => continue,
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

    /// Writes every queued frame whose shaped time has come (until the socket is full), then
    /// flushes once.
    fn write_due(&mut self, plan: &Plan, stats: &Stats) -> Result<(), tungstenite::Error> {
        let now = plan.now_ns();
        let mut wrote = false;
        while !self.ws.blocked && self.c.queue.front().is_some_and(|(at, _, _)| *at <= now) {
            let (_, handed, m) = self.c.queue.pop_front().expect("checked");
            let len = m.len() as u64;
            self.ws.feed(m)?;
            wrote = true;
            if let Some(u) = self.c.up.as_mut() {
                // Achieved: when the frame was written, not when the shaper said.
                let written = plan.now_ns();
                u.wrote(len, written);
                stats.with(|s| latency::record(&mut s.up_hold, written - handed));
            }
        }
        if wrote && !self.ws.blocked {
            self.ws.flush()?;
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
            // Send a close frame (unless the server sent one, which tungstenite has
            // answered), then read until the server closes TCP, so the server side closes
            // first and this side keeps no TIME_WAIT.
            let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
            let _ = self.ws.close(Some(normal));
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
