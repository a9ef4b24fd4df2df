//! Re-planning from discovery: which peers this agent probes (core `plan::select` under the
//! budget), targets added and dropped, every target re-timed at the plan's rate.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;

use wirebench_core::mesh::api::{API_VERSION, PeerReport, PeersReport, Proto};
use wirebench_core::mesh::pacer::slot_for;
use wirebench_core::mesh::peer::Peer;
use wirebench_core::mesh::plan::{Candidate, Level, select};
use wirebench_core::mesh::window::Target;

use super::stamp_peer::StampProbe;
use super::tcp::Conn;
use super::windows::node_ref;
use super::{GROUP_ID, Prober, Slot};

/// The targets a plan wants: a peer and a protocol, to the peer.
type Wanted<'p> = HashMap<(SocketAddr, Proto), &'p Peer>;

/// The pacer's path of the group sends (past every IPv4 peer's, [`path_of`]).
const GROUP_PATH: u64 = u64::MAX;

/// The pacer's path of a peer's targets (its UDP and TCP ones never go in one wake-up): the
/// address's bits, an IPv6 one folded to 64 (two peers folded alike only space their sends).
fn path_of(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(a) => u64::from(a.to_bits()),
        #[expect(clippy::cast_possible_truncation, reason = "folded to 64 bits on purpose")]
        IpAddr::V6(a) => (a.to_bits() >> 64) as u64 ^ a.to_bits() as u64,
    }
}

impl Prober {
    /// Re-plans from discovery's list: adds and drops targets, re-times them.
    pub(super) fn replan(&mut self, now: u64) {
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
        let (wanted, level) = self.wanted(&peers, &plan.chosen);
        // Gone, or turned from an agent into a reflector or back (its target is made anew).
        let kept = |k: &(SocketAddr, Proto), id: &u64| {
            wanted.get(k).is_some_and(|p| self.slots.get(id).is_some_and(|s| s.peer.stamp == p.stamp))
        };
        let gone: Vec<(SocketAddr, Proto)> =
            self.by_key.iter().filter(|(k, id)| !kept(k, id)).map(|(k, _)| *k).collect();
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
            let id = match self.by_key.get(&key) {
                Some(&id) => id,
                None => self.add_target(key, peer),
            };
            if let Some(s) = self.slots.get_mut(&id) {
                s.peer = peer.clone();
            }
            if key.1 != Proto::Multicast {
                self.sched.pacer.set(id, path_of(key.0.ip()), interval, now, &mut self.rng);
            }
        }
        let mut shortest = interval;
        if let Some(g) = self.cfg.group {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "rate validated to 1000/s at most"
            )]
            let gi = (1e9 / g.rate).round() as u64;
            if self.group_by_ip.is_empty() {
                self.sched.pacer.remove(GROUP_ID);
            } else {
                self.sched.pacer.set(GROUP_ID, GROUP_PATH, gi, now, &mut self.rng);
                shortest = shortest.min(gi);
            }
        }
        let origin = self.sched.pacer.origin();
        self.sched.pacer.set_slot(slot_for(shortest), origin);
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

    /// The targets the plan's `chosen` peers make (each protocol probed, and the group),
    /// and each peer's level in the plan (`None`: not probed).
    fn wanted<'p>(&self, peers: &[&'p Peer], chosen: &[(usize, Level)]) -> (Wanted<'p>, Vec<Option<String>>) {
        let mut wanted = HashMap::new();
        let mut level = vec![None; peers.len()];
        for &(i, l) in chosen {
            level[i] = Some(l.name().to_owned());
            // A STAMP reflector answers STAMP over UDP and nothing else.
            if peers[i].stamp {
                wanted.insert((peers[i].addr, Proto::Udp), peers[i]);
                continue;
            }
            for &proto in &self.cfg.protos {
                wanted.insert((peers[i].addr, proto), peers[i]);
            }
            if self.cfg.group.is_some() {
                wanted.insert((peers[i].addr, Proto::Multicast), peers[i]);
            }
        }
        (wanted, level)
    }

    /// A new target for `key` (a peer and a protocol): its slot, its socket or connection,
    /// and its probe; returns its id.
    fn add_target(&mut self, key: (SocketAddr, Proto), peer: &Peer) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let conn = (key.1 == Proto::Tcp).then_some(Conn::Down { retry_at: 0 });
        let udp = if key.1 == Proto::Udp { self.open_udp(id, key.0) } else { None };
        let probe = super::udp_probe(self.cfg.key.as_ref(), self.session.wrapping_add(id));
        #[expect(clippy::cast_possible_truncation, reason = "a random 16-bit session id")]
        let stamp = peer.stamp.then(|| StampProbe::new(&self.stamp_template, self.rng.next_u64() as u16));
        self.slots
            .insert(id, Slot { peer: peer.clone(), proto: key.1, target: Target::new(), conn, udp, probe, stamp });
        self.by_key.insert(key, id);
        if key.1 == Proto::Multicast {
            self.group_by_ip.insert(key.0.ip(), id);
        }
        id
    }

    /// A UDP target's own socket: bound to the shared socket's address and port (both with
    /// `SO_REUSEPORT`), connected to the peer, in the ready set under the target's id. `None`
    /// (counted) when any step fails, or when its descriptor would pass the prober's share
    /// of the open-file limit (`udp_fd_ceiling`): the target is then probed from the shared
    /// socket.
    fn open_udp(&mut self, id: u64, to: SocketAddr) -> Option<UdpSocket> {
        let mut open = || -> std::io::Result<UdpSocket> {
            let at = SocketAddr::new(self.cfg.bind.ip(), self.udp.local_addr()?.port());
            let s = super::peer_socket(at, self.udp_fd_ceiling)?;
            s.connect(to)?;
            s.set_nonblocking(true)?;
            self.ready.add(&s, id)?;
            Ok(s)
        };
        let r = open().ok();
        if r.is_none() {
            self.shared.udp_socket_failures.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    fn drop_slot(&mut self, id: u64) {
        self.sched.pacer.remove(id);
        if let Some(s) = self.slots.remove(&id) {
            if s.proto == Proto::Multicast {
                self.group_by_ip.remove(&s.peer.addr.ip());
            }
            if let Some(Conn::Up { stream, .. } | Conn::Connecting { stream, .. }) = &s.conn {
                let _ = self.ready.remove(stream);
            }
            if let Some(u) = &s.udp {
                let _ = self.ready.remove(u);
            }
        }
        for v in self.closed.values_mut() {
            v.retain(|(i, _)| *i != id);
        }
    }
}
