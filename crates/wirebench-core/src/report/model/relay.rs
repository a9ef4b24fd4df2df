//! Results of `wirebench relay`.

use serde::{Deserialize, Serialize};

use super::LatencyView;

/// What a relay carried between its group and its peers, and what it refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayResults {
    /// This relay run's origin id (hex), as its peers saw it.
    pub relay_id: String,
    /// The unicast address it listened on for its peers.
    pub listen: String,
    /// Whether relayed datagrams carried a MAC (`--token`).
    pub authenticated: bool,
    /// One row per group.
    pub groups: Vec<RelayGroup>,
    /// One row per peer relay (configured, resolved or discovered during the run).
    pub peers: Vec<RelayPeer>,
    /// Original senders of relayed datagrams (the addresses re-emission hides), at most
    /// 256; `senders_untracked` counts datagrams of senders past that.
    pub senders: Vec<RelaySender>,
    /// Datagrams of senders past the first 256.
    pub senders_untracked: u64,
    /// Datagrams on the relay port from an address that is not a peer (dropped).
    pub not_a_peer: u64,
    /// Datagrams on the relay port from a peer that did not decode (dropped).
    pub malformed: u64,
    /// Datagrams the kernel dropped on the relay port's receive queue (full buffer), from
    /// `/proc/net/udp`.
    pub kernel_drops: u64,
}

/// Datagrams and their bytes (the application payload, without the relay header).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayCount {
    /// Datagrams.
    pub datagrams: u64,
    /// Payload bytes.
    pub bytes: u64,
}

impl RelayCount {
    /// Counts one datagram of `bytes`.
    pub fn add(&mut self, bytes: usize) {
        self.datagrams += 1;
        self.bytes += bytes as u64;
    }
}

/// Datagrams dropped, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayDrops {
    /// Wrong, missing or unexpected MAC.
    pub bad_mac: u64,
    /// Already re-emitted (same origin relay and sequence).
    pub duplicate: u64,
    /// Over `--max-rate`.
    pub rate_cap: u64,
    /// Too big to carry with the relay header (or bigger than the receive buffer).
    pub too_big: u64,
    /// This relay's own re-emission heard back on the group (never forwarded again).
    pub looped: u64,
    /// A segment mate with a lower address carries this group (so it is not doubled).
    pub passive: u64,
    /// No emitting socket could be opened for a new original sender (`--max-senders`).
    pub senders_full: u64,
    /// For a group that is not relayed, or from a peer that hears the group natively.
    pub not_relayed: u64,
    /// The kernel refused the send.
    pub send_errors: u64,
}

/// One group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayGroup {
    /// `group:port`.
    pub group: String,
    /// Whether this relay carried the group at the end (false: a segment mate does).
    pub carried: bool,
    /// Peers that heard this relay's probe natively (their segment has the group already).
    pub native_peers: Vec<String>,
    /// Sent to the group by local applications, heard by the relay.
    pub local_in: RelayCount,
    /// Sent to peers (one per peer per datagram).
    pub forwarded: RelayCount,
    /// Received from peers and sent into the local group.
    pub reemitted: RelayCount,
    /// Dropped, by cause.
    pub drops: RelayDrops,
    /// Datagrams the kernel dropped on the group socket's receive queue (full buffer).
    pub kernel_drops: u64,
}

/// One peer relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayPeer {
    /// Its relay address.
    pub addr: String,
    /// Whether it was still a peer at the end (a DNS name or file can drop it).
    pub active: bool,
    /// Accepted from it.
    pub received: RelayCount,
    /// Sent to it.
    pub sent: RelayCount,
    /// Dropped from it, by cause.
    pub drops: RelayDrops,
    /// Its receive time to this relay's re-emission (wall clocks of two hosts: see the
    /// clock caveat in docs/modes/relay.md); measures `relay_added_delay`.
    pub added_delay: Option<LatencyView>,
    /// Datagrams whose added delay came out negative (the clocks disagree), not recorded.
    pub clock_negative: u64,
}

/// An original sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelaySender {
    /// Its address as it sent (re-emitted copies come from the relay instead).
    pub addr: String,
    /// The group.
    pub group: String,
    /// `local` or the peer relay that carried it.
    pub via: String,
    /// Datagrams and bytes.
    pub count: RelayCount,
}
