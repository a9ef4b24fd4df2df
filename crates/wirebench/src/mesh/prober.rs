//! The agent's probe loop: one thread, a UDP socket per peer connected to it (on the port of
//! one shared unconnected socket, which takes replies from any other address), one kept-open
//! TCP connection per peer, one socket for the multicast group, all in one epoll set.
//!
//! Method: each (peer, transport) is a target with its own sequence numbers, paced by core's
//! `Pacer` (a random phase and exponential gaps, at the rate the plan gives under the
//! budget). The loop sleeps until the next send slot or housekeeping tick (core
//! `mesh::schedule`: the sends of many targets share one wake-up, and the tick is on their
//! grid) or a reply.
//! A probe is the 64-byte full form; `t1` is read from the monotonic clock right before the
//! probe carrying it is formatted and sent (with a token, the tag's HMAC is inside the round
//! trip), the reply's arrival right after its own read returns (as `ping` does), and the round trip is `arrival - t1` as this side
//! recorded it (the echoed `t1` must match, or the reply is not ours). With a token every
//! probe carries a tag and every reply must (`wire::mesh`). Windows close when their end plus
//! the timeout has passed (core `window`), and are then published whole to the shared state.
//! A STAMP reflector peer (`stamp:`) is probed over UDP only, with STAMP test packets
//! (`stamp_peer`), into the same windows.

mod plan;
mod replies;
mod stalls;
mod stamp_peer;
mod tcp;
mod tcp_probe;
mod windows;

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;
use wirebench_core::units::nanos;

use wirebench_core::auth::Key;
use wirebench_core::mesh::api::{NodeRef, Proto};
use wirebench_core::mesh::pacer::SEND_SLOT_NS;
use wirebench_core::mesh::peer::Peer;
use wirebench_core::mesh::plan::PlanConfig;
use wirebench_core::mesh::schedule::Schedule;
use wirebench_core::mesh::window::{Tally, Target, Windows};
use wirebench_core::rng::SplitMix64;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe;
use wirebench_core::wire::stamp as wire_stamp;
use wirebench_net::clock::{Clock as _, MonoClock, wall_minus_mono};
use wirebench_net::ready::ReadySet;
use wirebench_net::rxbatch::RxBatch;

use self::tcp::Conn;
use super::state::{Shared, Totals};
use crate::discovery::Board;
use crate::shutdown::Shutdown;

/// Every probe: the full form plus room for a tag.
pub const PROBE_LEN: usize = wire_mesh::MIN_LEN;
const UDP_TOKEN: u64 = u64::MAX;
const GROUP_TOKEN: u64 = u64::MAX - 1;
/// The pacer's id for group sends.
const GROUP_ID: u64 = u64::MAX - 2;
/// Up to this many sockets (the shared and group ones, a UDP socket and a TCP connection per
/// peer: seven peers with both transports; one more with the slot timer of the stall
/// samples, `stalls`), the loop waits on them with one `ppoll`, past it
/// through epoll (`ReadySet::direct`): a reply then wakes the loop from its socket's own wait
/// queue, as `ping`'s wait does, which the UDP round trip showed.
const DIRECT_FDS: usize = 16;
/// A UDP reply's read buffer: larger than any probe (a longer datagram is not a reply).
const RECV_LEN: usize = 2048;

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
    /// An agent whose serve listens on `listen` and is seen by its peers at `advertise`:
    /// a serve on one address is only that address (another address of this host at the
    /// same port, 127.0.0.1 beside 127.0.0.2, is another agent); one on all addresses is
    /// every address of this host at its port.
    pub fn new(advertise: Option<SocketAddr>, listen: SocketAddr, local_ips: Vec<IpAddr>) -> Self {
        let local_ips = if listen.ip().is_unspecified() { local_ips } else { Vec::new() };
        Self { advertise, local_ips, port: listen.port() }
    }

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
    /// RNG seed (phases, gaps).
    pub seed: u64,
    /// Take the agent's stall samples from the loop's own slot wake-ups ([`stalls`]).
    pub stalls: bool,
    /// The key of STAMP reflector peers (authenticated mode), when they take one.
    pub stamp_key: Option<wire_stamp::Key>,
}

struct Slot {
    peer: Peer,
    proto: Proto,
    target: Target,
    conn: Option<Conn>,
    /// A UDP target's own socket, connected to the peer (`None`: probed from the shared one).
    udp: Option<UdpSocket>,
    /// A UDP target's probe, written whole when the target is made ([`udp_probe`]): a send
    /// only stamps its sequence number and t1 (and its tag), as `ping`'s does.
    probe: [u8; PROBE_LEN],
    /// A STAMP reflector's session and test packet, sent instead of `probe`.
    stamp: Option<Box<stamp_peer::StampProbe>>,
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
    /// The sends and the housekeeping (discovery, connect timeouts, windows; a finished
    /// connect is seen at once: its socket is in the ready set for writability).
    sched: Schedule,
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
    /// Per-peer UDP sockets take descriptors below this ([`udp_fd_ceiling`]).
    udp_fd_ceiling: u64,
    /// Whole TCP replies of one read, back to back (kept, so reads do not allocate).
    frames: Vec<u8>,
    /// Each of `frames`' frames: its length and its arrival (monotonic ns).
    frame_at: Vec<(usize, u64)>,
    /// The slot timer and the stall samples (`ProberConfig::stalls`).
    stalls: Option<stalls::Stalls>,
    /// Receive buffers for the shared and group sockets' batches (`None` only while one is
    /// being read, `replies`).
    rx: Option<Box<RxBatch>>,
    /// A peer socket's UDP reply is read into this (kept: a reply's read does not first zero a buffer).
    rbuf: Vec<u8>,
    /// What every STAMP session shares: key, timestamp format, error estimate.
    stamp_template: wire_stamp::Sender,
}

/// Binds the prober's shared UDP socket on `bind`'s address (port 0: the kernel picks one
/// no other socket holds, [`shared_socket`]). Done first when an agent starts, so an agent
/// that cannot have a probe port of its own stops before anything else has begun.
pub fn bind_shared(bind: SocketAddr) -> anyhow::Result<UdpSocket> {
    let udp = shared_socket(bind)
        .map_err(|e| anyhow::anyhow!("cannot bind the probe socket {bind} (on a port no other socket holds): {e}"))?;
    let _ = wirebench_net::batch::size_buffers(&udp, 1 << 20);
    Ok(udp)
}

/// Starts the probe loop on its own thread, probing from `udp` ([`bind_shared`]).
pub fn spawn(
    cfg: ProberConfig,
    udp: UdpSocket,
    shared: Arc<Shared>,
    board: Arc<Board>,
    shutdown: Shutdown,
) -> anyhow::Result<JoinHandle<()>> {
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
    let mut ready = ReadySet::direct(256, DIRECT_FDS + usize::from(cfg.stalls))?;
    ready.add(&udp, UDP_TOKEN)?;
    if let Some(s) = &group_sock {
        ready.add(s, GROUP_TOKEN)?;
    }
    let clock = MonoClock::default();
    let stalls = if cfg.stalls { Some(stalls::Stalls::new(&mut ready, 0, &clock)?) } else { None };
    let now = clock.now_ns();
    let mut rng = SplitMix64::new(cfg.seed);
    let session = rng.next_u64();
    let probe = vec![0u8; PROBE_LEN];
    // The send grid starts at a random point, so agents' grids are not aligned (the slot
    // itself follows the plan's interval, set at each re-plan).
    let mut sched = Schedule::new();
    sched.pacer.set_slot(1, now + rng.next_u64() % SEND_SLOT_NS);
    let windows = Windows { start_ns: now, len_ns: nanos(cfg.window), timeout_ns: nanos(cfg.timeout) };
    // The error estimate STAMP test packets carry, as `ping stamp://` sends it.
    let stamp_template = wire_stamp::Sender {
        key: cfg.stamp_key.clone(),
        format: wire_stamp::TsFormat::Ntp,
        error: crate::stamp::own_error(wire_stamp::TsFormat::Ntp),
        ssid: 0,
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
        sched,
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
        udp_fd_ceiling: udp_fd_ceiling(),
        frames: Vec::with_capacity(1024),
        // The most frames one drain can take (the shortest frame a reply may declare).
        frame_at: Vec::with_capacity(tcp::READ_PER_WAKE / probe::MIN_LEN),
        stalls,
        rx: Some(Box::new(RxBatch::new(replies::RX_SLOT))),
        rbuf: vec![0u8; RECV_LEN],
        stamp_template,
    };
    Ok(std::thread::Builder::new().name("mesh-prober".into()).spawn(move || p.run())?)
}

impl Prober {
    fn run(&mut self) {
        let mut tokens = Vec::with_capacity(256);
        self.shared.probing.store(true, Ordering::Release);
        while !self.shutdown.is_set() {
            let now = self.clock.now_ns();
            if self.sched.tick_due(now) {
                self.tick(now);
            }
            while let Some(id) = self.sched.pop_due(now, &mut self.rng) {
                self.send(id);
            }
            let now = self.clock.now_ns();
            let wake = self.sched.wake_at();
            let timeout = match &mut self.stalls {
                Some(s) => s.before_wait(wake, now),
                None => wake.saturating_sub(now).max(1),
            };
            if self.ready.wait(timeout, &mut tokens).is_err() {
                continue;
            }
            if let Some(s) = &mut self.stalls {
                s.after_wait(now, wake, self.clock.now_ns(), self.sched.slot_ns(), &tokens);
            }
            for &t in &tokens {
                match t {
                    UDP_TOKEN => self.drain_udp(false),
                    GROUP_TOKEN => self.drain_udp(true),
                    stalls::TIMER_TOKEN => {}
                    id if self.slots.get(&id).is_some_and(|s| s.udp.is_some()) => self.drain_peer(id),
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
        self.expire_connects(now);
        self.close_windows(now);
        if let Some(s) = &mut self.stalls {
            s.publish(self.windows.index(now), &self.shared.hiccup);
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
                // Between t1 and the send only what `ping` does there too: two stores (and,
                // with a token, the tag over them); the rest was written with the target.
                let t1 = self.clock.now_ns();
                let bytes: &[u8] = if let Some(st) = &mut slot.stamp {
                    st.stamp(seq, t1.saturating_add_signed(self.wall_offset))
                } else {
                    restamp(&mut slot.probe, self.cfg.key.as_ref(), seq, t1);
                    &slot.probe
                };
                // A send the kernel refuses is a probe that never arrives: lost, as it should.
                let _ = match &slot.udp {
                    Some(s) => s.send(bytes),
                    None => self.udp.send_to(bytes, slot.peer.addr),
                };
                slot.target.on_send(seq, t1, &self.windows);
            }
            Proto::Tcp => self.send_tcp_due(id, seq, now),
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
}

/// The shared probe socket, non-blocking. Its port is claimed by a bind *without*
/// `SO_REUSEPORT`, so the kernel gives (or, for an explicit port, accepts) only a port that
/// no socket holds, whoever owns it and whatever its options; only then is `SO_REUSEPORT`
/// set on it, so each UDP target's own connected socket can join the port (the kernel gives
/// a reply to the socket connected to where it comes from, and any other datagram, such as
/// a reply from another address of a multi-homed peer, to this one). Bound with the option
/// from the start, a socket could be handed a port that another process's `SO_REUSEPORT`
/// socket of the same user already holds (the kernel lets such sockets share a port, also
/// when it picks one): two agents on one host could then share the port, and replies meant
/// for one reach the other (`docs/modes/mesh.md`, "One probe port per agent").
fn shared_socket(bind: SocketAddr) -> std::io::Result<UdpSocket> {
    let s =
        socket2::Socket::new(socket2::Domain::for_address(bind), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    s.bind(&bind.into())?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// A UDP target's own socket, with `SO_REUSEPORT`, bound to the shared socket's `bind`
/// (address and port). Refused (`EMFILE`) when its descriptor would be `ceiling` or more,
/// checked before it joins the port (a socket that joined and left could take a datagram
/// with it).
pub(super) fn peer_socket(bind: SocketAddr, ceiling: u64) -> std::io::Result<UdpSocket> {
    use std::os::fd::AsRawFd as _;
    let s =
        socket2::Socket::new(socket2::Domain::for_address(bind), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    if u64::try_from(s.as_raw_fd()).unwrap_or(u64::MAX) >= ceiling {
        return Err(std::io::Error::from_raw_os_error(nix::libc::EMFILE));
    }
    s.set_reuse_port(true)?;
    s.bind(&bind.into())?;
    Ok(s.into())
}

/// The descriptors per-peer UDP sockets may take: below the prober's half of what the
/// open-file limit leaves after [`crate::limits::SPARE_FDS`] (serve's connection cap
/// takes the other half). A peer past it is probed from the shared socket, so the
/// descriptors that HTTP, discovery, the TCP probes and serve's connections need are never
/// spent on an optimisation. Read after serve raised the soft limit to the hard one.
fn udp_fd_ceiling() -> u64 {
    use nix::sys::resource::{Resource, getrlimit};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    soft.saturating_sub(crate::limits::SPARE_FDS) / 2
}

/// A probe for `session`: sequence number, send time and (with a key) the tag.
fn stamp(buf: &mut [u8], key: Option<&Key>, session: u64, seq: u64, t1: u64) {
    probe::init(buf, session, 0);
    if key.is_some() {
        wire_mesh::mark(buf);
    }
    restamp(buf, key, seq, t1);
}

/// A UDP target's probe for `session`, everything but the sequence number, t1 and the tag
/// ([`restamp`] writes those at each send).
fn udp_probe(key: Option<&Key>, session: u64) -> [u8; PROBE_LEN] {
    let mut buf = [0u8; PROBE_LEN];
    probe::init(&mut buf, session, 0);
    if key.is_some() {
        wire_mesh::mark(&mut buf);
    }
    buf
}

/// Stamps a probe made by [`udp_probe`] (or `probe::init`) for one send: sequence number,
/// send time and (with a key) the tag over them.
fn restamp(buf: &mut [u8], key: Option<&Key>, seq: u64, t1: u64) {
    probe::stamp(buf, seq, t1);
    if let Some(k) = key {
        wire_mesh::sign_probe(k, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Agents on 127.0.0.2 and 127.0.0.3 of one host each probe the one on 127.0.0.1: only
    /// an agent listening on every address is every address of its host.
    #[test]
    fn an_agent_on_one_address_is_only_that_address() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let local: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "10.0.0.5".parse().unwrap()];
        let one = SelfMatch::new(Some(at("127.0.0.2:7878")), at("127.0.0.2:7878"), local.clone());
        assert!(one.is_self(at("127.0.0.2:7878")));
        assert!(!one.is_self(at("127.0.0.1:7878")) && !one.is_self(at("10.0.0.5:7878")));
        let all = SelfMatch::new(None, at("0.0.0.0:7878"), local.clone());
        assert!(all.is_self(at("127.0.0.1:7878")) && all.is_self(at("10.0.0.5:7878")));
        assert!(!all.is_self(at("10.0.0.5:7879")) && !all.is_self(at("10.0.0.6:7878")));
        // all addresses, advertised as one: still every local address at its port
        let adv = SelfMatch::new(Some(at("10.0.0.5:7878")), at("0.0.0.0:7878"), local);
        assert!(adv.is_self(at("127.0.0.1:7878")) && adv.is_self(at("10.0.0.5:7878")));
    }
    use wirebench_core::wire::probe::Probe;

    /// A UDP target's probe is written once and only restamped at each send (as
    /// `ping`'s: nothing but the sequence number and t1, and the tag over them, between t1 and
    /// the send). On the wire it is byte for byte the probe written whole, with and without a
    /// token, and a restamp leaves nothing of the previous send.
    #[test]
    fn a_restamped_target_probe_is_the_probe_written_whole() {
        for key in [None, Some(Key::new(b"token"))] {
            let mut kept = udp_probe(key.as_ref(), 42);
            for (seq, t1) in [(0, 5), (7, 1_000_000), (u64::MAX, u64::MAX), (1, 2)] {
                restamp(&mut kept, key.as_ref(), seq, t1);
                let mut whole = [0xAA; PROBE_LEN];
                stamp(&mut whole, key.as_ref(), 42, seq, t1);
                assert_eq!(kept, whole, "seq {seq}, key {}", key.is_some());
                let p = Probe::parse(&kept).unwrap();
                assert_eq!((p.session(), p.seq(), p.t1()), (42, seq, t1));
                if let Some(k) = &key {
                    assert!(wire_mesh::verify_probe(k, &kept), "the tag covers this send's seq and t1");
                }
            }
        }
    }
}
