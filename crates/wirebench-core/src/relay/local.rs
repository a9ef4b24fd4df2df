//! What a relay does with a datagram heard on one of its group sockets, decided in one
//! place: its own probe or re-emission heard back, another relay's probe, a relay datagram
//! (never forwarded), or an application's datagram to forward, unless the relay is still
//! checking, another relay on the segment carries the group, it is too big, or over the
//! group's rate cap. The relay's loop reads the socket and acts on the answer.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::slots::PeerSlots;
use super::{EmitPorts, Mates, RateCap};
use crate::auth::Key;
use crate::wire::relay::{self as wire, Header, MAX_PAYLOAD, RelayKind};

/// Probes into each group this often; segment mates not heard for three of these are gone.
pub const PROBE_EVERY_NS: u64 = 2_000_000_000;
/// How long a segment mate counts as alive after it was last heard.
pub const MATE_TTL_NS: u64 = 3 * PROBE_EVERY_NS + 500_000_000;

/// What to do with a datagram heard on a group socket (the first that applies, in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// This relay's own probe, heard back: nothing.
    Own,
    /// Sent from one of this relay's emitting sockets (open, or closed within
    /// [`super::CLOSED_PORT_HORIZON_NS`]): counted as `looped`, never forwarded again.
    Looped,
    /// A listed peer's probe of this group, its MAC checked: the peer is on this segment.
    Probe(Header),
    /// Any other relay datagram: never forwarded.
    Relay,
    /// A relay datagram of another wire version: never forwarded, and said once.
    OtherVersion(u8),
    /// Not relaying yet (the startup check): nothing.
    Checking,
    /// A mate on this segment with a lower address carries the group (`passive`).
    Passive,
    /// Longer than a relay datagram can carry (`too_big`).
    TooBig,
    /// Over the group's rate cap (`rate_cap`).
    RateCapped,
    /// An application's datagram to send to the peers.
    Forward,
}

/// What the relay knows when it judges a datagram of one group.
#[derive(Debug)]
pub struct LocalView<'a> {
    /// The relay port's address (its probes come from it).
    pub me: SocketAddrV4,
    /// The interface's address (its emitting sockets are bound to it).
    pub interface: Ipv4Addr,
    /// The group.
    pub group: SocketAddrV4,
    /// The ports of this relay's emitting sockets.
    pub own_ports: &'a EmitPorts,
    /// The peer table (a probe counts from a peer in it).
    pub peers: &'a PeerSlots,
    /// The token's key, when the relays share one.
    pub key: Option<&'a Key>,
    /// Past the startup check.
    pub relaying: bool,
    /// `--force`: carry the group whoever else is on the segment.
    pub force: bool,
    /// The group's segment mates.
    pub mates: &'a Mates,
    /// The group's rate cap (a forwarded datagram takes its token).
    pub rate: &'a mut RateCap,
}

/// Whether the relay at `me` carries a group at `now_ns`: with `force` always; otherwise
/// when it has the lowest address among its live segment mates (`Mates::designated`).
pub fn carries(mates: &Mates, me: SocketAddrV4, force: bool, now_ns: u64) -> bool {
    force || mates.designated(me, now_ns, MATE_TTL_NS)
}

/// Judges `data`, heard from `src` at `now_ns` (monotonic).
pub fn judge(v: &mut LocalView<'_>, src: SocketAddrV4, data: &[u8], now_ns: u64) -> Local {
    if src == v.me {
        return Local::Own;
    }
    if *src.ip() == v.interface && v.own_ports.is_ours(src.port(), now_ns) {
        return Local::Looped;
    }
    if let Ok(r) = wire::decode(data) {
        let probe = r.header.kind == RelayKind::Probe
            && r.header.group == v.group
            && v.peers.slot(&src).is_some()
            && wire::verify(data, &r, v.key);
        return if probe { Local::Probe(r.header) } else { Local::Relay };
    }
    if let Some(version) = wire::other_version(data) {
        return Local::OtherVersion(version);
    }
    if !v.relaying {
        return Local::Checking;
    }
    if !carries(v.mates, v.me, v.force, now_ns) {
        return Local::Passive;
    }
    if data.len() > MAX_PAYLOAD {
        return Local::TooBig;
    }
    if !v.rate.allow(now_ns) {
        return Local::RateCapped;
    }
    Local::Forward
}

#[cfg(test)]
mod tests;
