//! The relay's decisions, as pure functions of what arrived and when (`wirebench relay`):
//!
//! - [`PeerWindow`]: duplicates per (origin relay, sequence), surviving a peer's restart.
//! - [`EmitPorts`]: the ports of this relay's emitting sockets, open or closed within
//!   [`CLOSED_PORT_HORIZON_NS`], so a re-emission that comes back to it is never forwarded
//!   again.
//! - [`RateCap`]: datagrams per second per group and per peer, so a relay never amplifies.
//! - [`Mates`]: the other relays that hear a group natively (same segment), and which one
//!   of them carries it (the lowest address), so two relays on one segment do not double
//!   traffic.
//! - [`slots::PeerSlots`]: the peer table, a fixed number of slots; a peer out of the list
//!   and unheard for the expiry is retired and its slot reused.
//! - [`is_fresh`]: with a token, a datagram whose time is outside [`FRESH_WINDOW_NS`] of the
//!   receiver's wall clock is refused (a replay from an earlier run).
//! - [`ProbeLog`]: this relay's last probes, so a "seen" counts only as an answer to one of
//!   them, as of when that probe left (a replayed "seen" cannot keep a stopped mate alive).
//! - [`senders::SenderTable`]: the original senders with an emitting socket, least recently
//!   heard evicted first.
//!
//! The wire format is `wire::relay`; the report model is `report::RelayResults`.

use std::collections::HashMap;
use std::net::SocketAddrV4;

use crate::impair::bucket::TokenBucket;
use crate::seq::{Arrival, SeqWindow};

pub mod local;
pub mod senders;
pub mod slots;

/// How far (either way) a datagram's time may be from the receiver's wall clock, with a
/// token: the relays' clocks must agree within it.
pub const FRESH_WINDOW_NS: u64 = 10_000_000_000;

/// Whether a datagram stamped `sent_wall_ns` (the sender's wall clock) is fresh at
/// `now_wall_ns` (the receiver's): within [`FRESH_WINDOW_NS`] either way.
pub const fn is_fresh(sent_wall_ns: u64, now_wall_ns: u64) -> bool {
    sent_wall_ns.abs_diff(now_wall_ns) <= FRESH_WINDOW_NS
}

/// Probes a "seen" may answer: the last this many of the relay's run.
pub const ANSWERABLE_PROBES: usize = 3;

/// This relay's last [`ANSWERABLE_PROBES`] probes (number, when sent), for its run `id`.
#[derive(Debug, Clone)]
pub struct ProbeLog {
    id: u64,
    sent: [(u64, u64); ANSWERABLE_PROBES],
}

impl ProbeLog {
    /// The log of relay run `id` (probes are numbered from 1).
    pub const fn new(id: u64) -> Self {
        Self { id, sent: [(0, 0); ANSWERABLE_PROBES] }
    }

    /// Probe `seq` left at `now` (monotonic ns).
    pub fn sent(&mut self, seq: u64, now: u64) {
        // usize -> u64 never truncates; the index is below ANSWERABLE_PROBES.
        #[expect(clippy::cast_possible_truncation, reason = "modulo a small usize")]
        let i = (seq % ANSWERABLE_PROBES as u64) as usize;
        self.sent[i] = (seq, now);
    }

    /// When the probe a "seen" answers left: it must name this run (`origin`) and one of the
    /// last probes. `None` for anything else (another run's, an old or a future probe).
    pub fn answered(&self, origin: u64, seq: u64) -> Option<u64> {
        if origin != self.id || seq == 0 {
            return None;
        }
        self.sent.iter().find(|(s, _)| *s == seq).map(|&(_, at)| at)
    }
}

/// Sequence numbers a [`PeerWindow`] remembers per origin.
pub const DEDUPE_WINDOW: usize = 4096;

/// The duplicate window of one peer: the current origin (relay run) and the one before, so
/// late datagrams of a restarted peer are still judged rather than taken as new.
#[derive(Debug, Clone, Default)]
pub struct PeerWindow {
    cur: Option<(u64, SeqWindow)>,
    prev: Option<(u64, SeqWindow)>,
}

impl PeerWindow {
    /// Judges datagram `seq` from relay run `origin`.
    pub fn judge(&mut self, origin: u64, seq: u64) -> Arrival {
        if let Some((o, w)) = &mut self.cur
            && *o == origin
        {
            return w.on_seq(seq);
        }
        if let Some((o, w)) = &mut self.prev
            && *o == origin
        {
            return w.on_seq(seq);
        }
        // A new run of that peer (a restart): the current one becomes the previous one.
        let mut w = self.prev.take().map_or_else(|| SeqWindow::new(DEDUPE_WINDOW), |(_, w)| w);
        w.reset();
        let arrival = w.on_seq(seq);
        self.prev = self.cur.take();
        self.cur = Some((origin, w));
        arrival
    }
}

/// How long the port of a closed emitting socket still counts as the relay's own: a
/// re-emission's loopback copy is queued on the group socket when it is sent and may be read
/// after its socket was closed for a newer sender (the loop reads a backlog in order).
pub const CLOSED_PORT_HORIZON_NS: u64 = 1_000_000_000;

/// The ports of this relay's emitting sockets on its interface, open and lately closed: a
/// datagram from one of them is the relay's own re-emission heard back (`looped`). One word
/// per port (512 KiB of address space, allocated zeroed here: a page becomes resident only
/// for the 512 ports it holds), so a datagram's check is one load, with no hashing.
#[derive(Debug, Clone)]
pub struct EmitPorts {
    /// Per port: until when (monotonic ns, exclusive) it is ours; 0 never, `u64::MAX` open.
    until: Box<[u64; 1 << 16]>,
}

impl Default for EmitPorts {
    fn default() -> Self {
        let until = vec![0; 1 << 16].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!("1 << 16 words"));
        Self { until }
    }
}

impl EmitPorts {
    /// An emitting socket opened on `port`.
    pub fn opened(&mut self, port: u16) {
        self.until[usize::from(port)] = u64::MAX;
    }

    /// The emitting socket on `port` was closed at `now_ns`: its port stays ours for
    /// [`CLOSED_PORT_HORIZON_NS`].
    pub fn closed(&mut self, port: u16, now_ns: u64) {
        self.until[usize::from(port)] = now_ns.saturating_add(CLOSED_PORT_HORIZON_NS);
    }

    /// Whether a datagram from `port` of the relay's interface, heard at `now_ns`, is from
    /// one of its emitting sockets.
    pub fn is_ours(&self, port: u16, now_ns: u64) -> bool {
        now_ns < self.until[usize::from(port)]
    }
}

/// A cap in datagrams per second with a burst of a tenth of a second (at least 16).
#[derive(Debug, Clone)]
pub struct RateCap(TokenBucket);

impl RateCap {
    /// A cap of `per_sec` datagrams per second (at least 1).
    pub fn new(per_sec: u64) -> Self {
        let per_sec = per_sec.max(1);
        // One "byte" per datagram: the bucket fills at 8 * per_sec "bits" per second.
        Self(TokenBucket::new(per_sec.saturating_mul(8), (per_sec / 10).max(16)))
    }

    /// Whether a datagram arriving at `now_ns` is within the cap (and takes its token).
    pub fn allow(&mut self, now_ns: u64) -> bool {
        self.0.take(1, now_ns)
    }
}

/// What is known of one segment mate: when it was last heard alive, and its last probe.
#[derive(Debug, Clone, Copy, Default)]
struct Mate {
    last_ns: u64,
    run: u64,
    probe: u64,
}

/// The relays heard natively on one group (segment mates), by relay address, with when.
#[derive(Debug, Clone, Default)]
pub struct Mates(HashMap<SocketAddrV4, Mate>);

impl Mates {
    /// `mate`'s probe number `seq` of its run `run` was heard natively on the group at
    /// `now_ns`. Only a probe newer than the last of that run counts (a replayed one does
    /// not keep a stopped mate alive); a new run counts from its first probe. Returns
    /// whether it counted.
    pub fn probed(&mut self, mate: SocketAddrV4, run: u64, seq: u64, now_ns: u64) -> bool {
        let m = self.0.entry(mate).or_default();
        if m.run == run && seq <= m.probe {
            return false;
        }
        *m = Mate { last_ns: m.last_ns.max(now_ns), run, probe: seq };
        true
    }

    /// `mate` answered ("seen") our probe that left at `sent_ns`: it was alive then.
    pub fn answered(&mut self, mate: SocketAddrV4, sent_ns: u64) {
        let m = self.0.entry(mate).or_default();
        m.last_ns = m.last_ns.max(sent_ns);
    }

    /// Whether `peer` was heard natively within `ttl_ns` of `now_ns`.
    pub fn is_mate(&self, peer: SocketAddrV4, now_ns: u64, ttl_ns: u64) -> bool {
        self.0.get(&peer).is_some_and(|m| now_ns.saturating_sub(m.last_ns) <= ttl_ns)
    }

    /// Whether `me` carries the group for its segment: it has the lowest address among
    /// itself and its live mates. Every relay on the segment computes the same answer.
    pub fn designated(&self, me: SocketAddrV4, now_ns: u64, ttl_ns: u64) -> bool {
        let key = |a: &SocketAddrV4| (u32::from(*a.ip()), a.port());
        self.0.iter().filter(|(_, m)| now_ns.saturating_sub(m.last_ns) <= ttl_ns).all(|(a, _)| key(&me) <= key(a))
    }

    /// Forgets mates not heard for `ttl_ns` plus [`FRESH_WINDOW_NS`] (bounds memory by the
    /// peers that probe); until then a gone mate's last probe is remembered, so a replay of
    /// it, still fresh, does not count.
    pub fn expire(&mut self, now_ns: u64, ttl_ns: u64) {
        let keep = ttl_ns.saturating_add(FRESH_WINDOW_NS);
        self.0.retain(|_, m| now_ns.saturating_sub(m.last_ns) <= keep);
    }
}

#[cfg(test)]
mod tests;
