//! The relay's loop: one thread, one epoll over the relay port, the group sockets and a
//! timer that fires every [`WAKE_NS`], so a stop takes effect within a tenth of a second.
//! The waits themselves have no timeout: arming a kernel timer on every wait (and, on a
//! virtual machine, reprogramming the CPU's timer) would cost every datagram's pass. The
//! thread that receives a datagram sends it on: there is no queue and no hand-off.
//!
//! Batches: one `recvmmsg` takes up to 32 datagrams from a socket; what a batch from a
//! group forwards leaves in one `sendmmsg` (every datagram to every peer), what a batch from
//! the peers re-emits leaves in one `sendmmsg` per run of datagrams that share an emitting
//! socket. Buffers, headers and histograms are allocated up front; a datagram's path
//! allocates nothing (a new original sender opens a socket, once). A batch that meets a
//! full send buffer waits for room and resumes where it stopped, at most [`SEND_WAIT`] per
//! batch and never past the stop signal; what is left then is dropped and counted
//! (`wirebench_net::fanout`).
//!
//! `--busy-poll D`: after a wait that found work the loop polls without sleeping for up to
//! D (one vCPU at 100 % meanwhile), so a datagram that follows within D meets a running
//! thread instead of a wake-up.
//!
//! The two directions have their own files: `engine/forward.rs` (a local group to the peers)
//! and `engine/emit.rs` (the peers to a local group), and so do the peer table's changes
//! (`engine/table.rs`); this one holds the state, the loop, the probes and the fan-out lists
//! over the peer table (`relay::slots::PeerSlots`: a peer out of the list and unheard
//! for `--peer-expiry` is retired, its counters folded into the retired total, its slot
//! reused).

use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use wirebench_core::units::nanos;

use anyhow::Context as _;
use foldhash::{HashMap, HashMapExt as _};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use socket2::{Domain, Protocol, Socket, Type};
use wirebench_core::relay::local::{MATE_TTL_NS, PROBE_EVERY_NS};
use wirebench_core::relay::senders::SenderTable;
use wirebench_core::relay::slots::PeerSlots;
use wirebench_core::relay::{EmitPorts, Mates, PeerWindow, ProbeLog, RateCap, is_fresh};
use wirebench_core::report::{RelayPeerTotals, RelayResults};
use wirebench_core::wire::relay::{self as wire, Header, MAX_UDP_LEN, RelayKind};
use wirebench_net::clock::{Clock as _, MonoClock, wall_now_ns};
use wirebench_net::drops::udp_drops;
use wirebench_net::fanout::{Burst, FAN_BATCH, FanOut};
use wirebench_net::rxbatch::{RX_BATCH, RxBatch};
use wirebench_net::timer::{AbsTimer, mono_now_ns};

use super::config::Config;
use super::peers;
use super::stats::{self, Delays, GroupStats, PeerStats, Retired, Senders, Tally};
use crate::ctx::Ctx;
use crate::error::UsageError;
use crate::shutdown::Shutdown;

mod emit;
mod forward;
mod table;

/// Longest wait in the kernel: the loop's timer fires this often.
const WAKE_NS: u64 = 100_000_000;
/// Probes during the startup check.
const CHECK_PROBE_EVERY_NS: u64 = 250_000_000;
/// Peers out of the list are checked for the expiry this often.
const EXPIRE_EVERY_NS: u64 = 1_000_000_000;
/// Retired peers' histograms added to the retired one per turn of the loop.
const MERGE_PER_TURN: usize = 16;
/// Batches read from one socket before looking at the others (at most 256 datagrams).
const BURST_BATCHES: usize = 8;
const RELAY_TOKEN: u64 = u64::MAX;
const TICK_TOKEN: u64 = u64::MAX - 1;
/// The longest one batch waits for room in a full send buffer (the relay port's fan-out, or
/// an emitting socket) before the rest of it is dropped as `send_errors`: the loop reads
/// nothing meanwhile, and the sockets' 16 MiB receive buffers hold what arrives.
/// Shared by every send of the batch (one fan-out; a re-emission's runs, each on its own
/// emitting socket, together).
const SEND_WAIT: std::time::Duration = std::time::Duration::from_nanos(SEND_WAIT_NS);
const SEND_WAIT_NS: u64 = 20_000_000;

struct Group {
    addr: SocketAddrV4,
    sock: UdpSocket,
    stats: GroupStats,
    mates: Mates,
    native: BTreeSet<SocketAddrV4>,
    rate: RateCap,
    dests: Vec<SocketAddrV4>,
    dest_peers: Vec<usize>,
    fan: FanOut,
}

/// The state of the peer in one slot of the table (index = slot).
struct Peer {
    stats: PeerStats,
    window: PeerWindow,
    rate: RateCap,
}

struct Flow {
    sock: UdpSocket,
    port: u16,
}

/// A peer's datagram waiting to be re-emitted at the end of its batch: datagram `k` of the
/// receive batch, for group `gi`, from peer `pi` at `src`, through flow `flow`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    k: usize,
    gi: usize,
    pi: usize,
    src: SocketAddrV4,
    flow: (u64, SocketAddrV4),
    wall_ns: u64,
    len: usize,
}

const NO_PENDING: Pending = Pending {
    k: 0,
    gi: 0,
    pi: 0,
    src: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    flow: (0, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
    wall_ns: 0,
    len: 0,
};

struct Relay<'c> {
    cfg: &'c Config,
    id: u64,
    sock: UdpSocket,
    groups: Vec<Group>,
    /// Who holds which slot; `peers[slot]` is that peer's state.
    table: PeerSlots,
    peers: Vec<Peer>,
    /// Peers that left the table, together.
    retired: Retired,
    /// Every peer's counters, live and retired, counted as they happen.
    totals: RelayPeerTotals,
    flows: HashMap<(u64, SocketAddrV4), Flow>,
    /// Which senders hold an emitting socket, least recently heard evicted first.
    flow_table: SenderTable,
    /// The emitting sockets' ports, open and lately closed: what comes from them is ours.
    own_ports: EmitPorts,
    senders: Senders,
    seq: u64,
    probe_seq: u64,
    /// Our last probes, which a "seen" must answer.
    probes: ProbeLog,
    /// A peer speaking another relay wire version was named on standard error.
    told_version: bool,
    not_a_peer: u64,
    malformed: u64,
    relaying: bool,
    clock: MonoClock,
    /// Receives a batch from one socket (group sockets with the kernel's RX timestamps).
    rxb: RxBatch,
    /// Probes and answers are written here.
    out: Vec<u8>,
    /// The batch being forwarded: [`FAN_BATCH`] slots of [`MAX_UDP_LEN`] bytes, the length
    /// of each relay datagram and of its payload.
    fwd: Vec<u8>,
    fwd_len: [(usize, usize); FAN_BATCH],
    fwd_n: usize,
    /// The batch being re-emitted.
    pending: [Pending; RX_BATCH],
    pending_n: usize,
    burst: Burst,
    /// Ends a wait for room in a send buffer (and the loop).
    stop: Shutdown,
    /// Wakes the loop every [`WAKE_NS`] (the stop flag, probes, expiry, added delays).
    tick: AbsTimer,
    /// Added delays not recorded yet (recorded when the tick fires, off the datagrams' path).
    delays: Delays,
}

fn v4(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(v) => Some(v),
        SocketAddr::V6(_) => None,
    }
}

fn sender_socket(bind: SocketAddrV4, cfg: &Config) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.bind(&SocketAddr::V4(bind).into())?;
    s.set_multicast_if_v4(&cfg.interface)?;
    s.set_multicast_ttl_v4(cfg.ttl)?;
    s.set_multicast_loop_v4(true)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Receive (and send) buffer of the relay port and the group sockets: a burst of some
/// thousands of datagrams (the kernel charges each its buffer's true size, about 2 KiB for
/// a small one) waits there while the loop catches up.
const SOCKET_BUFFER: usize = 16 << 20;

/// A socket bound to the group's own address (so it hears that group and no unicast to
/// the port, which a serve on this host may own), joined on the interface.
fn group_socket(g: SocketAddrV4, iface: Ipv4Addr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&SocketAddr::V4(g).into())?;
    s.join_multicast_v4(g.ip(), &iface)?;
    s.set_multicast_all_v4(false)?;
    s.set_nonblocking(true)?;
    let s: UdpSocket = s.into();
    wirebench_net::batch::size_buffers(&s, SOCKET_BUFFER);
    // The kernel's RX time starts the added delay, so it includes this relay's own wake-up
    // (without it, the time the loop read the datagram does).
    let _ = wirebench_net::stamp::enable(&s, false);
    Ok(s)
}

/// Runs the check, then (unless `--check`) relays until stopped.
/// Binds the relay port and joins the groups; the relay, before it knows its peers.
fn open<'c>(cfg: &'c Config, ctx: &Ctx<'_>, id: u64) -> anyhow::Result<Relay<'c>> {
    let sock = sender_socket(cfg.listen, cfg).with_context(|| format!("cannot bind the relay port {}", cfg.listen))?;
    wirebench_net::batch::size_buffers(&sock, SOCKET_BUFFER);
    let mut groups = Vec::new();
    for &g in &cfg.groups {
        let s = group_socket(g, cfg.interface).with_context(|| format!("cannot join {g} on {}", cfg.interface))?;
        groups.push(Group {
            addr: g,
            sock: s,
            stats: GroupStats::default(),
            mates: Mates::default(),
            native: BTreeSet::new(),
            rate: RateCap::new(cfg.max_rate),
            dests: Vec::new(),
            dest_peers: Vec::new(),
            fan: FanOut::new(&[]),
        });
    }
    Ok(Relay {
        cfg,
        id,
        sock,
        groups,
        table: PeerSlots::new(peers::MAX_PEERS, nanos(cfg.peer_expiry)),
        peers: Vec::new(),
        retired: Retired::default(),
        totals: RelayPeerTotals::default(),
        flows: HashMap::with_capacity(cfg.max_senders + 1),
        flow_table: SenderTable::new(cfg.max_senders),
        own_ports: EmitPorts::default(),
        senders: Senders::default(),
        seq: 0,
        probe_seq: 0,
        probes: ProbeLog::new(id),
        told_version: false,
        not_a_peer: 0,
        malformed: 0,
        relaying: false,
        clock: MonoClock::default(),
        rxb: RxBatch::new(MAX_UDP_LEN + 1),
        out: vec![0; MAX_UDP_LEN + 1],
        fwd: vec![0; FAN_BATCH * MAX_UDP_LEN],
        fwd_len: [(0, 0); FAN_BATCH],
        fwd_n: 0,
        pending: [NO_PENDING; RX_BATCH],
        pending_n: 0,
        burst: Burst::default(),
        stop: ctx.shutdown.clone(),
        tick: AbsTimer::new().context("cannot create the relay's timer")?,
        delays: Delays::default(),
    })
}

pub(crate) fn run(cfg: &Config, ctx: &mut Ctx<'_>) -> anyhow::Result<RelayResults> {
    let id = u64::from_be_bytes(crate::ctx::os_random()?);
    let mut r = open(cfg, ctx, id)?;
    let mut watch = peers::Watch::start(cfg, &ctx.shutdown)?;
    let first = watch.first(&ctx.shutdown)?;
    r.set_peers(&first);
    let ep = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    ep.add(&r.sock, EpollEvent::new(EpollFlags::EPOLLIN, RELAY_TOKEN))?;
    ep.add(&r.tick, EpollEvent::new(EpollFlags::EPOLLIN, TICK_TOKEN))?;
    for (i, g) in r.groups.iter().enumerate() {
        ep.add(&g.sock, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))?;
    }
    writeln!(
        ctx.out,
        "relay {:016x}: checking native multicast to {} peers for {:?}",
        r.id,
        r.table.len(),
        cfg.check_wait
    )?;
    ctx.out.flush()?;
    let check_end = r.clock.now_ns() + nanos(cfg.check_wait);
    r.run_until(&ep, &mut watch, ctx, check_end, CHECK_PROBE_EVERY_NS)?;
    r.print_check(ctx.out)?;
    if cfg.check || ctx.shutdown.is_set() {
        return Ok(r.results());
    }
    if !cfg.force {
        for g in &r.groups {
            let active: Vec<SocketAddrV4> = r.table.iter().filter(|(_, p)| p.listed).map(|(_, p)| p.addr).collect();
            if !active.is_empty() && active.iter().all(|p| g.native.contains(p)) {
                return Err(UsageError(format!(
                    "group {} already reaches every peer natively: relaying it would deliver twice (--force relays anyway)",
                    g.addr
                ))
                .into());
            }
        }
    }
    r.relaying = true;
    r.rebuild();
    writeln!(
        ctx.out,
        "relay listening on {} ({}): {} groups, {} peers{}",
        cfg.me,
        cfg.listen,
        r.groups.len(),
        r.table.iter().filter(|(_, p)| p.listed).count(),
        if cfg.key.is_some() { ", MAC on" } else { "" }
    )?;
    ctx.out.flush()?;
    let end = cfg.duration.map_or(u64::MAX, |d| r.clock.now_ns().saturating_add(nanos(d)));
    r.run_until(&ep, &mut watch, ctx, end, PROBE_EVERY_NS)?;
    Ok(r.results())
}

impl Relay<'_> {
    fn run_until(
        &mut self,
        ep: &Epoll,
        watch: &mut peers::Watch,
        ctx: &Ctx<'_>,
        end_ns: u64,
        probe_every: u64,
    ) -> anyhow::Result<()> {
        let mut events = [EpollEvent::empty(); 72];
        let mut next_probe = 0;
        let mut next_rebuild = 0;
        let mut next_expire = 0;
        let busy_ns = nanos(self.cfg.busy_poll);
        let mut last_work = 0;
        // Read once per turn, after the wait: the timers below run on the time the last
        // wait returned (late by that turn's work, at most a few batches).
        let mut now = self.clock.now_ns();
        self.tick.arm(mono_now_ns().saturating_add(WAKE_NS))?;
        loop {
            if ctx.shutdown.is_set() || now >= end_ns {
                // What peers sent before the stop is still counted (nothing waits).
                self.drain_peers(self.clock.now_ns());
                return Ok(());
            }
            if now >= next_probe {
                self.probe();
                next_probe = now + probe_every;
            }
            if let Some(list) = watch.changed() {
                self.set_peers(&list);
                next_rebuild = 0;
            }
            // Retired peers' histograms, a few a turn (nothing to do most turns).
            self.retired.merge_some(MERGE_PER_TURN);
            if now >= next_expire {
                let ch = self.table.expire(now);
                if !ch.is_empty() {
                    self.apply(&ch);
                    next_rebuild = 0;
                }
                next_expire = now + EXPIRE_EVERY_NS;
            }
            if self.relaying && now >= next_rebuild {
                for g in &mut self.groups {
                    g.mates.expire(now, MATE_TTL_NS);
                }
                self.rebuild();
                next_rebuild = now + probe_every;
            }
            // Busy-polling: no sleep while the last work is less than --busy-poll ago.
            let spin = busy_ns > 0 && now.saturating_sub(last_work) < busy_ns;
            let n = match ep.wait(&mut events, if spin { EpollTimeout::ZERO } else { EpollTimeout::NONE }) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(e) => return Err(e.into()),
            };
            now = self.clock.now_ns();
            if n > 0 && busy_ns > 0 {
                last_work = now;
            }
            for ev in &events[..n] {
                match ev.data() {
                    RELAY_TOKEN => self.drain_peers(now),
                    TICK_TOKEN => {
                        // Armed again (which clears it) for the next tenth of a second.
                        self.tick.arm(mono_now_ns().saturating_add(WAKE_NS))?;
                        self.record_delays();
                    }
                    #[expect(clippy::cast_possible_truncation, reason = "tokens are group indexes")]
                    i => self.drain_group(i as usize, now),
                }
            }
        }
    }

    /// Whether peer `pi` may get and give group `g`'s traffic: in the list, and not on our
    /// segment for that group (it hears the group natively).
    fn remote(&self, g: &Group, pi: usize, now: u64) -> bool {
        self.table.get(pi).is_some_and(|p| p.listed && (self.cfg.force || !g.mates.is_mate(p.addr, now, MATE_TTL_NS)))
    }

    /// Recomputes each group's fan-out (allocates only when it changed: other slots, or a
    /// slot given to another address).
    fn rebuild(&mut self) {
        let now = self.clock.now_ns();
        for gi in 0..self.groups.len() {
            let idx: Vec<usize> = (0..self.peers.len()).filter(|&pi| self.remote(&self.groups[gi], pi, now)).collect();
            let dests: Vec<SocketAddrV4> = idx.iter().filter_map(|&pi| self.table.get(pi).map(|p| p.addr)).collect();
            let g = &mut self.groups[gi];
            if idx != g.dest_peers || dests != g.dests {
                g.fan = FanOut::new(&dests);
                g.dests = dests;
                g.dest_peers = idx;
            }
        }
    }

    fn carries(&self, g: &Group, now: u64) -> bool {
        wirebench_core::relay::local::carries(&g.mates, self.cfg.me, self.cfg.force, now)
    }

    /// Sends a probe into every group from the relay port: relays on this segment hear it.
    fn probe(&mut self) {
        self.probe_seq += 1;
        self.probes.sent(self.probe_seq, self.clock.now_ns());
        let wall_ns = wall_now_ns();
        for g in &self.groups {
            let h = Header {
                kind: RelayKind::Probe,
                origin: self.id,
                seq: self.probe_seq,
                wall_ns,
                group: g.addr,
                sender: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            };
            if let Some(n) = wire::encode(&mut self.out, &h, &[], self.cfg.key.as_ref()) {
                let _ = self.sock.send_to(&self.out[..n], g.addr);
            }
        }
    }

    /// Reads the relay port a batch at a time; re-emits each batch at its end. The first
    /// batch is read at `woke` (when the wait returned), later ones read the clock.
    fn drain_peers(&mut self, woke: u64) {
        for b in 0..BURST_BATCHES {
            let Ok(n) = self.rxb.recv(&self.sock) else { return };
            // One clock read per batch: its datagrams were read together.
            let now = if b == 0 { woke } else { self.clock.now_ns() };
            for k in 0..n {
                let from = self.rxb.get(k).from;
                match from.and_then(v4).and_then(|a| self.table.slot(&a).map(|i| (a, i))) {
                    Some((src, pi)) => self.on_peer_datagram(pi, src, k, now),
                    None => self.not_a_peer += 1,
                }
            }
            self.flush_reemit(now);
            if self.rxb.drained() {
                return;
            }
        }
    }

    /// `peer` was alive on group `gi`'s segment: its probe `seq` of run `run` heard natively
    /// at `now`, or (`run` `None`) its "seen" of our probe that left at `seq`. Returns false
    /// for a probe not newer than its last (a replay).
    fn mate(&mut self, gi: usize, peer: SocketAddrV4, run: Option<u64>, seq: u64, now: u64) -> bool {
        let g = &mut self.groups[gi];
        let new = !g.mates.is_mate(peer, now, MATE_TTL_NS);
        match run {
            Some(run) => {
                if !g.mates.probed(peer, run, seq, now) {
                    return false;
                }
            }
            None => g.mates.answered(peer, seq),
        }
        let new = new && g.mates.is_mate(peer, now, MATE_TTL_NS);
        g.native.insert(peer);
        if new && self.relaying {
            self.rebuild();
        }
        true
    }

    /// Names, once a run, a peer that speaks another relay wire version.
    pub(super) fn tell_version(&mut self, src: SocketAddrV4, v: u8) {
        if !self.told_version {
            self.told_version = true;
            eprintln!(
                "wirebench relay: {src} speaks relay wire version {v}, this relay speaks {}: its datagrams are dropped (counted as malformed); run one version on every relay",
                wire::VERSION
            );
        }
    }

    /// Datagram `k` of the batch, on the relay port from peer `pi`, read at `now`.
    fn on_peer_datagram(&mut self, pi: usize, src: SocketAddrV4, k: usize, now: u64) {
        let data = self.rxb.get(k).data;
        let Ok(r) = wire::decode(data) else {
            self.malformed += 1;
            if let Some(v) = wire::other_version(data) {
                self.tell_version(src, v);
            }
            return;
        };
        if !wire::verify(data, &r, self.cfg.key.as_ref()) {
            self.peer_drop(pi, |d| &mut d.bad_mac);
            return;
        }
        // With a token the time is authentic: one outside the window is a replay.
        if self.cfg.key.is_some() && !is_fresh(r.header.wall_ns, wall_now_ns()) {
            self.peer_drop(pi, |d| &mut d.stale);
            return;
        }
        // Heard from (with a token: authenticated): a peer out of the list stays in the table.
        self.table.heard(pi, now);
        let h = r.header;
        let Some(gi) = self.groups.iter().position(|g| g.addr == h.group) else {
            self.peer_drop(pi, |d| &mut d.not_relayed);
            return;
        };
        match h.kind {
            RelayKind::Seen if h.sender == self.cfg.me => match self.probes.answered(h.origin, h.seq) {
                // Alive as of when our probe left, so a replay extends nothing.
                Some(at) => {
                    self.mate(gi, src, None, at, now);
                }
                None => self.peer_drop(pi, |d| &mut d.stale),
            },
            RelayKind::Seen | RelayKind::Probe => self.peer_drop(pi, |d| &mut d.not_relayed),
            RelayKind::Data => {
                let len = r.payload.len();
                self.reemit(pi, gi, src, &h, k, len, now);
            }
        }
    }
}

impl Relay<'_> {
    fn print_check(&self, out: &mut dyn io::Write) -> io::Result<()> {
        for g in &self.groups {
            writeln!(out, "check {}:", g.addr)?;
            if self.table.is_empty() {
                writeln!(out, "  no peers")?;
            }
            for (_, p) in self.table.iter() {
                let what = if g.native.contains(&p.addr) {
                    "native multicast works (not relayed)"
                } else {
                    "not reached natively (relayed)"
                };
                writeln!(out, "  {} {what}", p.addr)?;
            }
        }
        out.flush()
    }

    fn results(&mut self) -> RelayResults {
        self.record_delays();
        self.retired.merge_all();
        let now = self.clock.now_ns();
        let groups: Vec<_> = self
            .groups
            .iter()
            .map(|g| {
                let kernel = udp_drops(&g.sock).unwrap_or(0);
                (g.addr, g.stats.clone(), self.carries(g, now), g.native.iter().copied().collect(), kernel)
            })
            .collect();
        let mut peers: Vec<_> =
            self.table.iter().map(|(i, p)| (p.addr, self.peers[i].stats.clone(), p.listed)).collect();
        peers.sort_unstable_by_key(|p| p.0);
        stats::results(&Tally {
            relay_id: self.id,
            listen: self.cfg.me,
            authenticated: self.cfg.key.is_some(),
            groups: &groups,
            peers: &peers,
            retired: &self.retired,
            totals: self.totals,
            table: stats::Table {
                max_peers: self.table.capacity(),
                refused: self.table.refused(),
                waiting: self.table.waiting(),
            },
            senders: &self.senders,
            groups_list: &self.cfg.groups,
            not_a_peer: self.not_a_peer,
            malformed: self.malformed,
            kernel_drops: udp_drops(&self.sock).unwrap_or(0),
        })
    }
}
