//! One simulated user: connects at its ramp slot, then sends on its own open-loop schedule
//! and records every message it receives. One task per client, one `Sleep` reset in place
//! (tokio's shared timer wheel), a 4 KB read buffer and a send buffer reused across sends.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use wirebench_core::latency;
use wirebench_core::load::Shaper;
use wirebench_core::rng::SplitMix64;

use super::config::Config;
use super::msg::{self, Fields};
use super::stats::{ErrorKind, Stats};

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
        u64::try_from(self.t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `ns` after `t0`.
    pub fn at(&self, ns: u64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.t0 + Duration::from_nanos(ns))
    }
}

type Ws = WebSocketStream<TcpStream>;

async fn connect(plan: &Plan, room: u64) -> Result<Ws, ()> {
    let sock = TcpStream::connect(plan.cfg.addr).await.map_err(|_| ())?;
    let _ = sock.set_nodelay(true);
    let url = plan.cfg.room_url(room);
    let (ws, _) = tokio_tungstenite::client_async_with_config(url.as_str(), sock, Some(super::limits::ws_config()))
        .await
        .map_err(|_| ())?;
    Ok(ws)
}

/// Per-direction shaping state of one client.
#[derive(Debug)]
struct Shaped {
    shaper: Shaper,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Shaped {
    fn new(link: Option<wirebench_core::load::Link>) -> Option<Self> {
        link.map(|l| Self { shaper: Shaper::new(l), bytes: 0, first_ns: None, last_ns: 0 })
    }

    /// When a frame handed over now arrives; tracks the achieved rate.
    fn pass(&mut self, len: u64, now: u64) -> u64 {
        let leave = self.shaper.leave(len, now);
        self.first_ns.get_or_insert(now);
        self.last_ns = leave;
        self.bytes += len;
        leave.saturating_add(self.shaper.delay_ns())
    }

    fn bps(&self) -> u64 {
        let span = self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f));
        if span == 0 {
            return 0;
        }
        u64::try_from(u128::from(self.bytes) * 8_000_000_000 / u128::from(span)).unwrap_or(u64::MAX)
    }
}

/// Runs client `id` to the end of the plan (or a stop).
pub async fn run(id: u64, plan: Arc<Plan>, stats: Arc<Stats>, mut stop: watch::Receiver<bool>) {
    client(id, &plan, &stats, &mut stop).await;
    stats.done.fetch_add(1, Ordering::Relaxed);
}

async fn client(id: u64, plan: &Plan, stats: &Stats, stop: &mut watch::Receiver<bool>) {
    let cfg = &plan.cfg;
    let ramp_ns = u64::try_from(cfg.ramp.as_nanos()).unwrap_or(0);
    let join_ns = u64::try_from(u128::from(ramp_ns) * u128::from(id) / u128::from(cfg.clients)).unwrap_or(0);
    tokio::select! {
        () = tokio::time::sleep_until(plan.at(join_ns)) => {}
        _ = stop.changed() => return,
    }
    let room = id / cfg.room_size;
    let t_connect = plan.now_ns();
    let ws = tokio::select! {
        r = connect(plan, room) => r,
        _ = stop.changed() => return,
    };
    let Ok(mut ws) = ws else {
        Stats::bump(&stats.failed);
        stats.with(|s| s.error(ErrorKind::Connect));
        return;
    };
    let connected_at = plan.now_ns();
    stats.with(|s| latency::record(&mut s.connect, connected_at - t_connect));
    Stats::bump(&stats.connected);
    Stats::bump(&stats.open);

    let mut rng = SplitMix64::new(cfg.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut next = connected_at.max(join_ns) + cfg.arrivals.first(&mut rng);
    let mut seq = 0u64;
    let mut up = Shaped::new(cfg.link_up);
    let mut down = Shaped::new(cfg.link_down);
    let mut queue: VecDeque<(u64, u64, Message)> = VecDeque::new();
    let mut buf = String::new();
    let sleep = tokio::time::sleep_until(plan.at(next.min(plan.quit_ns)));
    tokio::pin!(sleep);
    let mut lost = false;
    let mut halted = false;
    // One registration with the stop signal for the whole run, not one per wake-up (all
    // clients share it, and registering takes its lock).
    let stopped = stop.changed();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => {
                halted = true;
                break;
            }
            m = ws.next() => match m {
                Some(Ok(Message::Text(t))) => on_message(id, t.as_bytes(), plan, stats, down.as_mut()),
                Some(Ok(Message::Binary(b))) => on_message(id, &b, plan, stats, down.as_mut()),
                Some(Ok(_)) => {}
                Some(Err(_)) => {
                    stats.with(|s| s.error(ErrorKind::Read));
                    lost = true;
                    break;
                }
                None => {
                    lost = true;
                    break;
                }
            },
            () = &mut sleep => {
                let now = plan.now_ns();
                if now >= plan.quit_ns {
                    break;
                }
                // Open loop: every send that is due goes now, however late.
                while next <= now && next < plan.end_ns {
                    let t = cfg.mix.pick(&mut rng);
                    let et = &cfg.mix.types()[t];
                    let f = Fields {
                        kind: &et.name,
                        req: et.request,
                        sender: id,
                        room,
                        seq,
                        ts_us: (plan.wall0_ns + now) / 1_000,
                        it_us: (plan.wall0_ns + next) / 1_000,
                    };
                    cfg.template.render(&f, et.size, &mut buf);
                    let len = buf.len() as u64;
                    let m = Message::text(buf.as_str());
                    stats.with(|s| {
                        s.on_send(t, now - next);
                        let at = up.as_mut().map_or(now, |u| u.pass(len, now));
                        queue.push_back((at, now, m));
                    });
                    seq += 1;
                    next += cfg.arrivals.gap(&mut rng);
                }
                let mut wrote = false;
                while queue.front().is_some_and(|(at, _, _)| *at <= now) {
                    let (_, handed, m) = queue.pop_front().expect("checked");
                    if up.is_some() {
                        // Achieved: when the frame is written, not when the shaper said.
                        stats.with(|s| latency::record(&mut s.up_hold, now - handed));
                    }
                    if ws.feed(m).await.is_err() {
                        stats.with(|s| s.error(ErrorKind::Send));
                        lost = true;
                        break;
                    }
                    wrote = true;
                }
                if lost || (wrote && ws.flush().await.is_err()) {
                    lost = true;
                    break;
                }
                let due = if next < plan.end_ns { next } else { plan.quit_ns };
                let wake = queue.front().map_or(due, |(at, _, _)| due.min(*at));
                sleep.as_mut().reset(plan.at(wake));
            }
        }
    }
    // Close with a reset: no TIME_WAIT left on thousands of local ports (this side closes
    // first), which would otherwise keep them from other programs binding for a minute.
    let _ = socket2::SockRef::from(ws.get_ref()).set_linger(Some(Duration::ZERO));
    drop(ws);
    if lost && !halted && plan.now_ns() < plan.quit_ns {
        Stats::bump(&stats.disconnects);
    }
    stats.open.fetch_sub(1, Ordering::Relaxed);
    if let Some(u) = &up {
        stats.up_bps_max.fetch_max(u.bps(), Ordering::Relaxed);
        stats.up_frames.fetch_add(seq, Ordering::Relaxed);
    }
    if let Some(d) = &down {
        stats.down_bps_max.fetch_max(d.bps(), Ordering::Relaxed);
    }
}

fn on_message(id: u64, b: &[u8], plan: &Plan, stats: &Stats, down: Option<&mut Shaped>) {
    let now = plan.now_ns();
    // Download shaping: the frame is taken as delivered when the shaped link would have
    // delivered it (nothing here reacts to a received message, so no holding is needed).
    let arrive = down.map_or(now, |d| d.pass(b.len() as u64, now));
    let Some(seen) = msg::parse(b) else {
        stats.with(|s| s.error(ErrorKind::Malformed));
        return;
    };
    let Some(t) = plan.cfg.mix.types().iter().position(|e| e.name == seen.kind) else {
        stats.with(|s| s.error(ErrorKind::UnknownType));
        return;
    };
    let at_ns = plan.wall0_ns + arrive;
    let Some(delay) = at_ns.checked_sub(seen.ts_us * 1_000) else {
        stats.with(|s| s.error(ErrorKind::NegativeDelay));
        return;
    };
    let intended = seen.it_us.and_then(|it| at_ns.checked_sub(it * 1_000));
    stats.with(|s| {
        if arrive > now {
            latency::record(&mut s.down_hold, arrive - now);
        }
        if seen.sender == id {
            s.on_reply(t, delay);
        } else {
            s.on_delivery(t, delay, intended);
        }
    });
    if plan.cfg.link_down.is_some() {
        stats.down_frames.fetch_add(1, Ordering::Relaxed);
    }
}
