//! One simulated user: connects at its ramp slot, then sends on its own open-loop schedule
//! (both decided in core, `load::client`) and records every message it receives; at the end it closes with the WebSocket close
//! handshake and lets the server close TCP first (no TIME_WAIT left on this side). One task
//! per client on its worker's runtime (`load/workers.rs`), one `Sleep` reset in place (the
//! worker's timer wheel), tungstenite's engine polled with the task's own waker
//! (`client/ws.rs`), a 1 KiB read chunk (`crate::limits::READ_CHUNK`) and a send buffer reused
//! across sends. The connect phase (TCP, TLS and WebSocket handshakes, several KB of state)
//! lives in its own allocation while it runs, so the task that stays for the whole run holds
//! only the send and receive loop's state.

mod recv;
mod ws;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

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
use ws::Ws;

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
const CLOSE_WAIT: Duration = Duration::from_secs(2);

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

/// Runs client `id` to the end of the plan (or a stop).
pub async fn run(id: u64, plan: Arc<Plan>, stats: Arc<Stats>, mut stop: watch::Receiver<bool>) {
    client(id, &plan, &stats, &mut stop).await;
    stats.done.fetch_add(1, Ordering::Relaxed);
}

/// A send handed to the upload shaper: due time, hand-over time, the frame.
type Queued = (u64, u64, Message);

/// Client `id` joins at its slot of the ramp and connects; returns its connection and when
/// it connected, or `None` (failed and counted, or stopped).
async fn join(id: u64, plan: &Plan, stats: &Stats, stop: &mut watch::Receiver<bool>) -> Option<(Ws, u64)> {
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

async fn client(id: u64, plan: &Plan, stats: &Stats, stop: &mut watch::Receiver<bool>) {
    let Some((mut ws, start_ns)) = join(id, plan, stats, stop).await else { return };
    let cfg = &plan.cfg;
    let mut c = Conn {
        id,
        room: id / cfg.room_size,
        sched: ClientSchedule::new(rng_for(cfg.seed, id), cfg.arrivals, start_ns, plan.end_ns),
        up: Up::new(cfg.link_up),
        down: Down::new(cfg.link_down),
        queue: VecDeque::new(),
        buf: String::new(),
    };
    let ended = session(&mut ws, &mut c, plan, stats, stop).await;
    // dropped before the end of sending: the rest of its schedule is lost with it
    let dropped = ended.is_some() && plan.now_ns() < plan.end_ns;
    let next = c.sched.next_ns();
    super::health::on_client_end(plan, stats, c.sched.rng(), next, dropped);
    stats.book.left(id, ended.unwrap_or(End::Open));
    let early = ended.is_some() && plan.now_ns() < plan.quit_ns;
    if ended.is_none() || matches!(ended, Some(End::ServerClosed(_))) {
        close(&mut ws, stats).await;
    }
    drop(ws);
    if early {
        Stats::bump(&stats.disconnects);
    }
    stats.open.fetch_sub(1, Ordering::Relaxed);
    if let Some(u) = &c.up {
        stats.up_bps_max.fetch_max(u.bps(), Ordering::Relaxed);
        stats.up_frames.fetch_add(u.frames, Ordering::Relaxed);
    }
    if let Some(d) = &c.down {
        stats.down_bps_max.fetch_max(d.bps(), Ordering::Relaxed);
    }
}

/// The connected client's loop: what it receives, and its sends as they fall due, until
/// the quit time, the stop, or the connection's end (returned: `None` when it lasted).
async fn session(
    ws: &mut Ws,
    c: &mut Conn,
    plan: &Plan,
    stats: &Stats,
    stop: &mut watch::Receiver<bool>,
) -> Option<End> {
    let sleep = tokio::time::sleep_until(plan.at(c.sched.wake_ns(plan.quit_ns, None).min(plan.quit_ns)));
    tokio::pin!(sleep);
    // One registration with the stop signal for the whole run, not one per wake-up (all
    // clients share it, and registering takes its lock). Once registered (its first poll,
    // which the biased select makes before any other branch), polling it again would also
    // take that lock, so after the first wake-up it is polled only when the signal's version
    // moved (an atomic load); its registration wakes this task when that happens. Outside
    // tokio's cooperative budget, so that first poll always registers.
    let fired = stop.clone();
    let stopped = tokio::task::unconstrained(stop.changed());
    tokio::pin!(stopped);
    let mut registered = false;
    loop {
        let poll_stop = !registered || fired.has_changed().unwrap_or(true);
        registered = true;
        tokio::select! {
            biased;
            _ = &mut stopped, if poll_stop => return None,
            m = ws.next() => match m {
                Some(Ok(Message::Text(t))) => recv::on_message(c.id, t.as_bytes(), plan, stats, c.down.as_mut()),
                Some(Ok(Message::Binary(b))) => recv::on_message(c.id, &b, plan, stats, c.down.as_mut()),
                // The server closes: nothing more is sent; `close` finishes the handshake.
                Some(Ok(Message::Close(f))) => return Some(End::ServerClosed(f.map_or(1005, |f| u16::from(f.code)))),
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    stats.with(|s| s.error(ErrorKind::Read));
                    return Some(end_of(&e));
                }
                None => return Some(End::Lost),
            },
            () = &mut sleep => {
                let now = plan.now_ns();
                if now >= plan.quit_ns {
                    return None;
                }
                c.queue_due(plan, stats, now);
                if let Err(e) = write_due(ws, &mut c.queue, c.up.as_mut(), plan, stats).await {
                    stats.with(|s| s.error(ErrorKind::Send));
                    return Some(end_of(&e));
                }
                let held = c.queue.front().map(|(at, _, _)| *at);
                sleep.as_mut().reset(plan.at(c.sched.wake_ns(plan.quit_ns, held)));
            }
        }
    }
}

/// Writes every queued frame whose shaped time has come, then flushes once.
async fn write_due(
    ws: &mut Ws,
    queue: &mut VecDeque<Queued>,
    mut up: Option<&mut Up>,
    plan: &Plan,
    stats: &Stats,
) -> Result<(), tungstenite::Error> {
    let now = plan.now_ns();
    let mut wrote = false;
    while queue.front().is_some_and(|(at, _, _)| *at <= now) {
        let (_, handed, m) = queue.pop_front().expect("checked");
        let len = m.len() as u64;
        ws.feed(m).await?;
        wrote = true;
        if let Some(u) = up.as_deref_mut() {
            // Achieved: when the frame was written, not when the shaper said.
            let written = plan.now_ns();
            u.wrote(len, written);
            stats.with(|s| latency::record(&mut s.up_hold, written - handed));
        }
    }
    if wrote {
        ws.flush().await?;
    }
    Ok(())
}

/// The close handshake, bounded: send a close frame (unless the server sent one, which
/// tungstenite has answered), then read until the server closes TCP, so the server side
/// closes first and this side keeps no TIME_WAIT. If that takes too long: a reset.
async fn close(ws: &mut Ws, stats: &Stats) {
    let handshake = async {
        let normal = CloseFrame { code: CloseCode::Normal, reason: "".into() };
        let _ = ws.close(Some(normal)).await;
        while let Some(Ok(_)) = ws.next().await {}
    };
    if tokio::time::timeout(CLOSE_WAIT, handshake).await.is_err() {
        stats.with(|s| s.error(ErrorKind::CloseTimeout));
        let _ = socket2::SockRef::from(ws.tcp()).set_linger(Some(Duration::ZERO));
    }
}
