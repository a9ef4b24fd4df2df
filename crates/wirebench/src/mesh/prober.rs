//! The agent's probe loop: one thread, one UDP socket for every peer, one kept-open TCP
//! connection per peer, one socket for the multicast group, all in one epoll set.
//!
//! Method: each (peer, transport) is a target with its own sequence numbers, paced by core's
//! `Pacer` (a random phase and a jittered interval, at the rate the plan gives under the
//! budget). A probe is the 64-byte full form; `t1` is read from the monotonic clock right
//! before `send`, the reply's arrival right after the readiness wait returns, and the round
//! trip is `arrival - t1` as this side recorded it (the echoed `t1` must match, or the reply
//! is not ours). With a token every probe carries a tag and every reply must (`wire::mesh`).
//! Windows close when their end plus the timeout has passed (core `window`), and are then
//! published whole to the shared state.

mod tcp;

use std::collections::{BTreeMap, HashMap};
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use wirebench_core::auth::Key;
use wirebench_core::mesh::api::{
    API_VERSION, CellReport, MatrixReport, NodeRef, PeerReport, PeersReport, Proto, WindowRef,
};
use wirebench_core::mesh::pacer::Pacer;
use wirebench_core::mesh::peer::Peer;
use wirebench_core::mesh::plan::{Candidate, PlanConfig, select};
use wirebench_core::mesh::window::{RttSummary, Tally, Target, Windows, histogram_of};
use wirebench_core::report::encode_histogram;
use wirebench_core::rng::SplitMix64;
use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::{self, Probe};
use wirebench_net::clock::{Clock as _, MonoClock, wall_minus_mono};
use wirebench_net::ready::ReadySet;

use self::tcp::Conn;
use super::state::{Shared, Totals};
use crate::discovery::Board;
use crate::shutdown::Shutdown;

/// Every probe: the full form plus room for a tag.
pub const PROBE_LEN: usize = wire_mesh::MIN_LEN;
/// Housekeeping (closing windows, connect timeouts, discovery) at least this often; a
/// finished connect is seen at once (its socket is in the ready set for writability).
const TICK_NS: u64 = 100_000_000;
const UDP_TOKEN: u64 = u64::MAX;
const GROUP_TOKEN: u64 = u64::MAX - 1;
/// The pacer's id for group sends.
const GROUP_ID: u64 = u64::MAX - 2;
/// Datagrams read per socket per wake-up.
const DRAIN_BATCH: usize = 256;

/// The multicast part of the config.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    /// Group and port.
    pub group: SocketAddrV4,
    /// Interface.
    pub interface: Option<std::net::Ipv4Addr>,
    /// TTL.
    pub ttl: u32,
    /// Group probes per second.
    pub rate: f64,
}

/// How to tell this agent in a peer list.
#[derive(Debug, Clone, Default)]
pub struct SelfMatch {
    /// The advertised probe address.
    pub advertise: Option<SocketAddr>,
    /// This host's addresses (a peer at one of them with our port is us).
    pub local_ips: Vec<IpAddr>,
    /// Our probe port.
    pub port: u16,
}

impl SelfMatch {
    /// Whether `a` is this agent.
    pub fn is_self(&self, a: SocketAddr) -> bool {
        self.advertise == Some(a) || (a.port() == self.port && self.local_ips.contains(&a.ip()))
    }
}

/// What the prober needs.
#[derive(Debug, Clone)]
pub struct ProberConfig {
    /// This agent.
    pub me: NodeRef,
    /// Recognising it among peers.
    pub self_match: SelfMatch,
    /// Planning.
    pub plan: PlanConfig,
    /// Unicast transports.
    pub protos: Vec<Proto>,
    /// Window length.
    pub window: Duration,
    /// Probe timeout.
    pub timeout: Duration,
    /// Multicast.
    pub group: Option<Group>,
    /// Token key.
    pub key: Option<Key>,
    /// Local address to send from (port 0).
    pub bind: SocketAddr,
    /// RNG seed (phases, jitter).
    pub seed: u64,
}

struct Slot {
    peer: Peer,
    proto: Proto,
    target: Target,
    conn: Option<Conn>,
}

struct Prober {
    cfg: ProberConfig,
    shared: Arc<Shared>,
    board: Arc<Board>,
    shutdown: Shutdown,
    udp: UdpSocket,
    group_sock: Option<UdpSocket>,
    ready: ReadySet,
    clock: MonoClock,
    rng: SplitMix64,
    pacer: Pacer,
    windows: Windows,
    wall_offset: i64,
    session: u64,
    next_id: u64,
    slots: HashMap<u64, Slot>,
    by_key: HashMap<(SocketAddr, Proto), u64>,
    group_by_ip: HashMap<IpAddr, u64>,
    group_seq: u64,
    board_version: Option<u64>,
    published: Option<u64>,
    closed: BTreeMap<u64, Vec<(u64, Tally)>>,
    totals: BTreeMap<(String, Proto), Totals>,
    probe: Vec<u8>,
}

/// Starts the probe loop on its own thread.
pub fn spawn(
    cfg: ProberConfig,
    shared: Arc<Shared>,
    board: Arc<Board>,
    shutdown: Shutdown,
) -> anyhow::Result<JoinHandle<()>> {
    let udp =
        UdpSocket::bind(cfg.bind).map_err(|e| anyhow::anyhow!("cannot bind the probe socket {}: {e}", cfg.bind))?;
    udp.set_nonblocking(true)?;
    let _ = wirebench_net::batch::size_buffers(&udp, 1 << 20);
    let group_sock = match &cfg.group {
        None => None,
        Some(g) => {
            let s = UdpSocket::bind(SocketAddr::new(cfg.bind.ip(), 0))?;
            let opts = wirebench_net::multicast::SenderOpts { interface: g.interface, ttl: g.ttl, loopback: true };
            wirebench_net::multicast::set_sender(&s, g.group.into(), &opts)?;
            s.set_nonblocking(true)?;
            Some(s)
        }
    };
    let ready = ReadySet::new(256)?;
    ready.add(&udp, UDP_TOKEN)?;
    if let Some(s) = &group_sock {
        ready.add(s, GROUP_TOKEN)?;
    }
    let clock = MonoClock::default();
    let now = clock.now_ns();
    let mut rng = SplitMix64::new(cfg.seed);
    let session = rng.next_u64();
    let probe = vec![0u8; PROBE_LEN];
    let windows = Windows {
        start_ns: now,
        len_ns: u64::try_from(cfg.window.as_nanos()).unwrap_or(u64::MAX),
        timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
    };
    let mut p = Prober {
        wall_offset: wall_minus_mono(&clock),
        cfg,
        shared,
        board,
        shutdown,
        udp,
        group_sock,
        ready,
        clock,
        rng,
        pacer: Pacer::new(),
        windows,
        session,
        next_id: 1,
        slots: HashMap::new(),
        by_key: HashMap::new(),
        group_by_ip: HashMap::new(),
        group_seq: 0,
        board_version: None,
        published: None,
        closed: BTreeMap::new(),
        totals: BTreeMap::new(),
        probe,
    };
    Ok(std::thread::Builder::new().name("mesh-prober".into()).spawn(move || p.run())?)
}

impl Prober {
    fn run(&mut self) {
        let mut tokens = Vec::with_capacity(256);
        let mut next_tick = 0;
        self.shared.probing.store(true, Ordering::Release);
        while !self.shutdown.is_set() {
            let now = self.clock.now_ns();
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            while let Some(id) = self.pacer.pop_due(self.clock.now_ns(), &mut self.rng) {
                self.send(id);
            }
            let now = self.clock.now_ns();
            let wake = self.pacer.next_due().unwrap_or(u64::MAX).min(next_tick);
            if self.ready.wait(wake.saturating_sub(now).max(1), &mut tokens).is_err() {
                continue;
            }
            for &t in &tokens {
                match t {
                    UDP_TOKEN => self.drain_udp(false),
                    GROUP_TOKEN => self.drain_udp(true),
                    id => self.on_ready(id),
                }
            }
        }
        self.shared.probing.store(false, Ordering::Release);
    }

    /// Discovery, connects, expiry, windows.
    fn tick(&mut self, now: u64) {
        let v = self.board.version();
        if self.board_version != Some(v) {
            self.board_version = Some(v);
            self.replan(now);
        }
        let timeout = self.windows.timeout_ns;
        for slot in self.slots.values_mut() {
            if let Some(Conn::Connecting { stream, since, waiting }) = slot.conn.as_mut()
                && now >= *since + timeout
            {
                let _ = self.ready.remove(&*stream);
                if let Some(seq) = waiting.take() {
                    slot.target.on_send(seq, now, &self.windows); // could not be sent: lost
                }
                slot.conn = Some(Conn::Down { retry_at: now + timeout });
            }
        }
        self.close_windows(now);
    }

    /// A TCP target's socket is ready: a connect finished, or replies arrived.
    fn on_ready(&mut self, id: u64) {
        let connecting = self.slots.get(&id).is_some_and(|s| matches!(s.conn, Some(Conn::Connecting { .. })));
        if connecting { self.connect_done(id) } else { self.read_tcp(id) }
    }

    /// A connect finished: the connection is up (and the probe that waited goes now), or it
    /// failed (and that probe is lost).
    fn connect_done(&mut self, id: u64) {
        let now = self.clock.now_ns();
        let timeout = self.windows.timeout_ns;
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(Conn::Connecting { stream, .. }) = slot.conn.as_ref() else { return };
        let Some(ok) = tcp::finished(stream) else { return };
        let Some(Conn::Connecting { stream, waiting, .. }) = slot.conn.take() else { return };
        if !ok || self.ready.set_readable(&stream, id).is_err() {
            let _ = self.ready.remove(&stream);
            if let Some(seq) = waiting {
                slot.target.on_send(seq, now, &self.windows); // could not be sent: lost
            }
            slot.conn = Some(Conn::Down { retry_at: now + timeout });
            return;
        }
        slot.conn = Some(Conn::Up { stream, rbuf: Vec::new() });
        if let Some(seq) = waiting {
            send_tcp(
                &mut self.probe,
                self.cfg.key.as_ref(),
                self.session.wrapping_add(id),
                &self.clock,
                &self.ready,
                slot,
                seq,
                &self.windows,
            );
        }
    }

    /// Re-plans from discovery's list: adds and drops targets, re-times them.
    fn replan(&mut self, now: u64) {
        let all = self.board.peers();
        // Labels the fleet gives this agent (a Kubernetes EndpointSlice knows its node's
        // zone) fill what the command line left out.
        if self.cfg.me.zone.is_none()
            && let Some(me) = all.iter().find(|p| self.cfg.self_match.is_self(p.addr))
        {
            self.cfg.me.zone.clone_from(&me.zone);
        }
        let peers: Vec<&Peer> = all.iter().filter(|p| !self.cfg.self_match.is_self(p.addr)).collect();
        let keys: Vec<String> = peers.iter().map(|p| p.addr.to_string()).collect();
        let cands: Vec<Candidate<'_>> =
            peers.iter().zip(&keys).map(|(p, k)| Candidate { key: k, zone: p.zone.as_deref() }).collect();
        let plan = select(&self.cfg.me.addr, self.cfg.me.zone.as_deref(), &cands, &self.cfg.plan);
        let mut wanted: HashMap<(SocketAddr, Proto), &Peer> = HashMap::new();
        let mut level = vec![None; peers.len()];
        for &(i, l) in &plan.chosen {
            level[i] = Some(l.name().to_owned());
            for &proto in &self.cfg.protos {
                wanted.insert((peers[i].addr, proto), peers[i]);
            }
            if self.cfg.group.is_some() {
                wanted.insert((peers[i].addr, Proto::Multicast), peers[i]);
            }
        }
        let gone: Vec<(SocketAddr, Proto)> = self.by_key.keys().filter(|k| !wanted.contains_key(k)).copied().collect();
        for k in gone {
            if let Some(id) = self.by_key.remove(&k) {
                self.drop_slot(id);
            }
            self.totals.remove(&(k.0.to_string(), k.1));
        }
        let interval = (1e9 / plan.rate.max(1e-9)).round();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "positive, bounded by the rate floor"
        )]
        let interval = interval.min(1e15) as u64;
        for (key, peer) in wanted {
            let id = if let Some(&id) = self.by_key.get(&key) {
                id
            } else {
                let id = self.next_id;
                self.next_id += 1;
                let conn = (key.1 == Proto::Tcp).then_some(Conn::Down { retry_at: 0 });
                self.slots.insert(id, Slot { peer: peer.clone(), proto: key.1, target: Target::new(), conn });
                self.by_key.insert(key, id);
                if key.1 == Proto::Multicast {
                    self.group_by_ip.insert(key.0.ip(), id);
                }
                id
            };
            if let Some(s) = self.slots.get_mut(&id) {
                s.peer = peer.clone();
            }
            if key.1 != Proto::Multicast {
                self.pacer.set(id, interval, now, &mut self.rng);
            }
        }
        if let Some(g) = self.cfg.group {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "rate validated to 1000/s at most"
            )]
            let gi = (1e9 / g.rate).round() as u64;
            if self.group_by_ip.is_empty() {
                self.pacer.remove(GROUP_ID);
            } else {
                self.pacer.set(GROUP_ID, gi, now, &mut self.rng);
            }
        }
        let report = PeersReport {
            api_version: API_VERSION,
            agent: self.cfg.me.clone(),
            rate_per_peer: plan.rate,
            probes_per_s: plan.total,
            budget_per_s: self.cfg.plan.budget,
            peers: peers
                .iter()
                .zip(level)
                .map(|(p, l)| PeerReport { peer: node_ref(p), probed: l.is_some(), level: l })
                .collect(),
        };
        self.shared.set_peers(report);
    }

    fn drop_slot(&mut self, id: u64) {
        self.pacer.remove(id);
        if let Some(s) = self.slots.remove(&id) {
            if s.proto == Proto::Multicast {
                self.group_by_ip.remove(&s.peer.addr.ip());
            }
            if let Some(Conn::Up { stream, .. } | Conn::Connecting { stream, .. }) = &s.conn {
                let _ = self.ready.remove(stream);
            }
        }
        for v in self.closed.values_mut() {
            v.retain(|(i, _)| *i != id);
        }
    }

    fn send(&mut self, id: u64) {
        if id == GROUP_ID {
            return self.send_group();
        }
        let now = self.clock.now_ns();
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let seq = slot.target.take_seq();
        match slot.proto {
            Proto::Udp => {
                let t1 = self.clock.now_ns();
                stamp(&mut self.probe, self.cfg.key.as_ref(), self.session.wrapping_add(id), seq, t1);
                // A send the kernel refuses is a probe that never arrives: lost, as it should.
                let _ = self.udp.send_to(&self.probe, slot.peer.addr);
                slot.target.on_send(seq, t1, &self.windows);
            }
            Proto::Tcp => match slot.conn.as_mut() {
                Some(Conn::Up { .. }) => {
                    send_tcp(
                        &mut self.probe,
                        self.cfg.key.as_ref(),
                        self.session.wrapping_add(id),
                        &self.clock,
                        &self.ready,
                        slot,
                        seq,
                        &self.windows,
                    );
                }
                Some(Conn::Connecting { waiting, .. }) => {
                    // Already one probe waiting for the connection: this one cannot go.
                    slot.target.on_send(seq, now, &self.windows);
                    if waiting.is_none() {
                        *waiting = Some(seq);
                    }
                }
                Some(Conn::Down { retry_at }) if now >= *retry_at => {
                    if let Ok(stream) = tcp::connect(slot.peer.addr)
                        && self.ready.add_writable(&stream, id).is_ok()
                    {
                        slot.conn = Some(Conn::Connecting { stream, since: now, waiting: Some(seq) });
                    } else {
                        slot.target.on_send(seq, now, &self.windows);
                        slot.conn = Some(Conn::Down { retry_at: now + self.windows.timeout_ns });
                    }
                }
                _ => slot.target.on_send(seq, now, &self.windows),
            },
            Proto::Multicast => {}
        }
    }

    fn send_group(&mut self) {
        let (Some(sock), Some(g)) = (&self.group_sock, &self.cfg.group) else { return };
        let seq = self.group_seq;
        self.group_seq += 1;
        let t1 = self.clock.now_ns();
        stamp(&mut self.probe, self.cfg.key.as_ref(), self.session.wrapping_add(GROUP_ID), seq, t1);
        let _ = sock.send_to(&self.probe, g.group);
        for &id in self.group_by_ip.values() {
            if let Some(s) = self.slots.get_mut(&id) {
                s.target.on_send(seq, t1, &self.windows);
            }
        }
    }

    fn drain_udp(&mut self, group: bool) {
        let mut buf = [0u8; 2048];
        // At most a batch per wake-up: a flood at this socket must not starve the schedule.
        for _ in 0..DRAIN_BATCH {
            let sock = if group { self.group_sock.as_ref() } else { Some(&self.udp) };
            let Some(sock) = sock else { return };
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let now = self.clock.now_ns();
            let id = if group {
                self.group_by_ip.get(&from.ip()).copied()
            } else {
                Probe::parse(&buf[..n])
                    .ok()
                    .map(|p| p.session().wrapping_sub(self.session))
                    .filter(|id| self.slots.get(id).is_some_and(|s| s.proto == Proto::Udp))
            };
            match id {
                Some(id) => self.on_reply(id, &buf[..n], now),
                None if group && self.cfg.self_match.is_self(SocketAddr::new(from.ip(), self.cfg.self_match.port)) => {}
                None => {
                    self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn read_tcp(&mut self, id: u64) {
        let now = self.clock.now_ns();
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let Some(slot) = self.slots.get_mut(&id) else { return };
        let Some(Conn::Up { stream, rbuf }) = slot.conn.as_mut() else { return };
        let alive = tcp::read(stream, rbuf, |f| frames.push(f.to_vec()));
        if !alive {
            let _ = self.ready.remove(&*stream);
            slot.conn = Some(Conn::Down { retry_at: now });
        }
        for f in frames {
            self.on_reply(id, &f, now);
        }
    }

    fn on_reply(&mut self, id: u64, bytes: &[u8], now: u64) {
        let Ok(p) = Probe::parse(bytes) else {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let target = self.slots.get(&id).map(|s| if s.proto == Proto::Multicast { GROUP_ID } else { id });
        if p.kind() != Kind::Reply || Some(p.session()) != target.map(|t| self.session.wrapping_add(t)) {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(key) = &self.cfg.key
            && !wire_mesh::verify_reply(key, bytes)
        {
            self.shared.replies_unauthenticated.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(slot) = self.slots.get_mut(&id) else { return };
        match slot.target.on_reply(p.seq(), p.t1(), now, &self.windows) {
            wirebench_core::mesh::window::ReplyOutcome::Recorded(rtt) => {
                #[expect(clippy::cast_precision_loss, reason = "seconds for Prometheus")]
                self.shared.rtt_of(slot.proto).observe(rtt as f64 / 1e9);
            }
            _ => {
                self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Collects every target's decided windows and publishes the newest.
    fn close_windows(&mut self, now: u64) {
        let w = &self.windows;
        let Some(last) = (now.saturating_sub(w.start_ns + w.timeout_ns) / w.len_ns).checked_sub(1) else { return };
        if self.published.is_some_and(|p| p >= last) {
            return;
        }
        for (&id, slot) in &mut self.slots {
            while let Some((k, tally)) = slot.target.take_closed(now, w) {
                self.closed.entry(k).or_default().push((id, tally));
            }
        }
        let first = self.published.map_or(0, |p| p + 1);
        for k in first..=last {
            let tallies = self.closed.remove(&k).unwrap_or_default();
            self.publish(k, tallies);
        }
        self.published = Some(last);
    }

    fn publish(&mut self, k: u64, tallies: Vec<(u64, Tally)>) {
        let mut cells = Vec::with_capacity(tallies.len());
        for (id, t) in tallies {
            let Some(slot) = self.slots.get(&id) else { continue };
            let h = histogram_of(&t.samples);
            let rtt = RttSummary::of(&h);
            let e = self.totals.entry((slot.peer.addr.to_string(), slot.proto)).or_default();
            e.sent += t.sent;
            e.lost += t.lost;
            cells.push(CellReport {
                peer: node_ref(&slot.peer),
                proto: slot.proto,
                sent: t.sent,
                received: t.received,
                lost: t.lost,
                late: t.late,
                duplicates: t.duplicates,
                rtt,
                histogram: rtt.map(|_| encode_histogram(&h)),
            });
        }
        cells.sort_by(|a, b| (&a.peer.addr, a.proto).cmp(&(&b.peer.addr, b.proto)));
        let start = i128::from(self.windows.start(k)) + i128::from(self.wall_offset);
        let report = MatrixReport {
            api_version: API_VERSION,
            agent: self.cfg.me.clone(),
            window: Some(WindowRef {
                index: k,
                len_ns: self.windows.len_ns,
                start_unix_ns: u64::try_from(start).unwrap_or(0),
            }),
            cells,
        };
        self.shared.set_matrix(report, self.totals.clone());
    }
}

fn node_ref(p: &Peer) -> NodeRef {
    NodeRef { addr: p.addr.to_string(), name: p.name.clone(), zone: p.zone.clone() }
}

/// A probe for `session`: sequence number, send time and (with a key) the tag.
fn stamp(buf: &mut [u8], key: Option<&Key>, session: u64, seq: u64, t1: u64) {
    probe::init(buf, session, 0);
    if key.is_some() {
        wire_mesh::mark(buf);
    }
    probe::stamp(buf, seq, t1);
    if let Some(k) = key {
        wire_mesh::sign_probe(k, buf);
    }
}

/// Sends TCP probe `seq` on an open connection (closing it if it cannot take the probe).
#[expect(clippy::too_many_arguments, reason = "the prober's pieces, borrowed apart")]
fn send_tcp(
    buf: &mut [u8],
    key: Option<&Key>,
    session: u64,
    clock: &MonoClock,
    ready: &ReadySet,
    slot: &mut Slot,
    seq: u64,
    w: &Windows,
) {
    let Some(Conn::Up { stream, .. }) = slot.conn.as_mut() else { return };
    let t1 = clock.now_ns();
    stamp(buf, key, session, seq, t1);
    let ok = tcp::send(stream, buf);
    slot.target.on_send(seq, t1, w);
    if !ok {
        let _ = ready.remove(&*stream);
        slot.conn = Some(Conn::Down { retry_at: t1 });
    }
}
