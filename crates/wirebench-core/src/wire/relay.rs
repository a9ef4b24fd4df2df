//! The relay datagram: what `wirebench relay` sends to its peer relays by unicast.
//!
//! ```text
//! offset size field
//!      0    2 magic 0x5742
//!      2    1 version (2: the relay's own; other kinds are at 1)
//!      3    1 kind (5 relay)
//!      4    1 relay kind: 1 data, 2 probe (native check), 3 seen (answer to a probe)
//!      5    1 flags: bit 0 = a 16-byte MAC follows the payload; other bits must be 0
//!      6    2 payload length in bytes (data only; 0 for probe and seen)
//!      8    8 relay run id (random per run): data, probe: the sender's; seen: the prober's
//!     16    8 sequence number (data: per origin relay; probe/seen: the probe's number)
//!     24    8 time, wall-clock ns: data: when the origin relay received it; probe, seen:
//!              when it was sent (with a token, refused outside the freshness window)
//!     32    4 group address (IPv4, multicast)
//!     36    2 group port (not 0)
//!     38    4 sender address: data: the original sender; seen: the prober's relay address
//!     42    2 sender port
//!     44   .. payload, then the MAC (HMAC-SHA256 over bytes 0..44+len, first 16 bytes)
//! ```
//!
//! Every field is checked by [`decode`]; the MAC is checked by [`verify`] against the
//! relay's key before anything else is believed. Version 1 had no time on probes and seen,
//! and a seen carried the answering relay's id: a version 1 datagram is refused
//! ([`DecodeError::Version`]), and the relay names the version in its log.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::{DecodeError, Kind, MAGIC};
use crate::auth::{Key, TAG_LEN};

/// The relay datagram's version (byte 2): the relay format moves on its own.
pub const VERSION: u8 = 2;
/// Header size.
pub const HEADER_LEN: usize = 44;
/// The largest UDP payload over IPv4.
pub const MAX_UDP_LEN: usize = 65_507;
/// The largest application datagram a relay carries: what fits after the header and a MAC.
pub const MAX_PAYLOAD: usize = MAX_UDP_LEN - HEADER_LEN - TAG_LEN;
/// Flag bit: a MAC follows the payload.
pub const FLAG_MAC: u8 = 1;

/// What a relay datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RelayKind {
    /// An application's group datagram, carried to a peer.
    Data = 1,
    /// Sent into a group to learn which peers hear it natively.
    Probe = 2,
    /// A peer's answer, by unicast: "I heard your probe natively on this group".
    Seen = 3,
}

/// The fixed fields of a relay datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Data, probe or seen.
    pub kind: RelayKind,
    /// The run id of the relay that sent it (data, probe) or whose probe it answers (seen).
    pub origin: u64,
    /// Sequence number (see the table above).
    pub seq: u64,
    /// Wall-clock ns: data: when the origin relay received it; probe, seen: when sent.
    pub wall_ns: u64,
    /// The group.
    pub group: SocketAddrV4,
    /// Data: the original sender; seen: the prober's relay address; probe: unspecified.
    pub sender: SocketAddrV4,
}

/// A decoded relay datagram, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relayed<'a> {
    /// The header.
    pub header: Header,
    /// The application datagram (data), empty otherwise.
    pub payload: &'a [u8],
    /// The MAC, if the datagram carries one.
    pub tag: Option<&'a [u8]>,
}

/// Writes a relay datagram into `out` and returns its length, or `None` when `payload` is
/// longer than [`MAX_PAYLOAD`] or `out` is too short. With a key the MAC is appended.
pub fn encode(out: &mut [u8], h: &Header, payload: &[u8], key: Option<&Key>) -> Option<usize> {
    if payload.len() > MAX_PAYLOAD {
        return None;
    }
    let body = HEADER_LEN + payload.len();
    let total = body + if key.is_some() { TAG_LEN } else { 0 };
    if out.len() < total {
        return None;
    }
    let b = &mut out[..total];
    b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    b[2] = VERSION;
    b[3] = Kind::Relay as u8;
    b[4] = h.kind as u8;
    b[5] = if key.is_some() { FLAG_MAC } else { 0 };
    #[expect(clippy::cast_possible_truncation, reason = "payload is at most MAX_PAYLOAD")]
    b[6..8].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    b[8..16].copy_from_slice(&h.origin.to_be_bytes());
    b[16..24].copy_from_slice(&h.seq.to_be_bytes());
    b[24..32].copy_from_slice(&h.wall_ns.to_be_bytes());
    b[32..36].copy_from_slice(&h.group.ip().octets());
    b[36..38].copy_from_slice(&h.group.port().to_be_bytes());
    b[38..42].copy_from_slice(&h.sender.ip().octets());
    b[42..44].copy_from_slice(&h.sender.port().to_be_bytes());
    b[HEADER_LEN..body].copy_from_slice(payload);
    if let Some(k) = key {
        let tag = k.short_tag(&[&b[..body]]);
        b[body..].copy_from_slice(&tag);
    }
    Some(total)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

fn addr_at(b: &[u8], at: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]), u16::from_be_bytes([b[at + 4], b[at + 5]]))
}

/// Checks every field of the datagram `buf` (whole, as received). Never panics.
pub fn decode(buf: &[u8]) -> Result<Relayed<'_>, DecodeError> {
    super::check_preamble_version(buf, Kind::Relay, VERSION, HEADER_LEN)?;
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::Truncated { need: HEADER_LEN, got: buf.len() });
    }
    let kind = match buf[4] {
        1 => RelayKind::Data,
        2 => RelayKind::Probe,
        3 => RelayKind::Seen,
        k => return Err(DecodeError::Kind(k)),
    };
    let flags = buf[5];
    if flags & !FLAG_MAC != 0 {
        return Err(DecodeError::Field("relay flags"));
    }
    let len = usize::from(u16::from_be_bytes([buf[6], buf[7]]));
    if len > MAX_PAYLOAD || (kind != RelayKind::Data && len != 0) {
        return Err(DecodeError::Field("relay payload length"));
    }
    let tag_len = if flags & FLAG_MAC != 0 { TAG_LEN } else { 0 };
    let want = HEADER_LEN + len + tag_len;
    if buf.len() != want {
        return Err(DecodeError::Length { declared: want, got: buf.len() });
    }
    let group = addr_at(buf, 32);
    if !group.ip().is_multicast() || group.port() == 0 {
        return Err(DecodeError::Field("relay group"));
    }
    let sender = addr_at(buf, 38);
    let sender_ok = match kind {
        RelayKind::Probe => sender == SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        RelayKind::Data | RelayKind::Seen => {
            !sender.ip().is_unspecified()
                && !sender.ip().is_multicast()
                && !sender.ip().is_broadcast()
                && sender.port() != 0
        }
    };
    if !sender_ok {
        return Err(DecodeError::Field("relay sender"));
    }
    let wall_ns = u64_at(buf, 24);
    let header = Header { kind, origin: u64_at(buf, 8), seq: u64_at(buf, 16), wall_ns, group, sender };
    let body = HEADER_LEN + len;
    Ok(Relayed { header, payload: &buf[HEADER_LEN..body], tag: (tag_len > 0).then(|| &buf[body..]) })
}

/// The version of a relay datagram of another relay wire version (magic and relay kind
/// right, version not [`VERSION`]), so a relay can name it; `None` for anything else.
pub fn other_version(buf: &[u8]) -> Option<u8> {
    match buf {
        [m0, m1, v, k, ..] if u16::from_be_bytes([*m0, *m1]) == MAGIC && *k == Kind::Relay as u8 && *v != VERSION => {
            Some(*v)
        }
        _ => None,
    }
}

/// Whether the datagram `buf` (already accepted by [`decode`]) is authentic under `key`:
/// with a key it must carry a right MAC; without one it must carry none (a relay never
/// believes a MAC it cannot check).
pub fn verify(buf: &[u8], r: &Relayed<'_>, key: Option<&Key>) -> bool {
    match (key, r.tag) {
        (None, None) => true,
        (Some(k), Some(tag)) => k.verify(&[&buf[..buf.len() - TAG_LEN]], tag),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
