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
    /// One row per live peer relay (holding a slot of the peer table at the end: in the
    /// list, or out of it for less than `--peer-expiry`), by address; retired ones are in
    /// `retired`.
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
    /// The peers that left the table (out of the list and unheard for the expiry), their
    /// counters together; `peers` holds the live ones. Reports before this field: nothing
    /// was retired.
    #[serde(default)]
    pub retired: RelayRetired,
    /// Every peer's counters over the run, counted apart from the rows: each is the sum of
    /// the `peers` rows and `retired`. Absent in reports before it.
    #[serde(default)]
    pub peer_totals: Option<RelayPeerTotals>,
    /// The peer table's size: live peers at most.
    #[serde(default)]
    pub max_peers: u64,
    /// Times a listed peer found every slot held by a live peer and waited (once per stay in
    /// the list); its datagrams meanwhile count in `not_a_peer`.
    #[serde(default)]
    pub peers_refused: u64,
    /// Listed peers still waiting for a slot at the end.
    #[serde(default)]
    pub peers_waiting: u64,
}

/// Retired peers together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayRetired {
    /// Peers retired (an address retired twice counts twice).
    pub peers: u64,
    /// Accepted from them.
    pub received: RelayCount,
    /// Sent to them.
    pub sent: RelayCount,
    /// Dropped from them, by cause.
    pub drops: RelayDrops,
    /// Their added delay, all together (`relay_added_delay`).
    pub added_delay: Option<LatencyView>,
    /// Their datagrams whose added delay came out negative.
    pub clock_negative: u64,
}

/// Counters over every peer, live and retired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayPeerTotals {
    /// Accepted from peers.
    pub received: RelayCount,
    /// Sent to peers.
    pub sent: RelayCount,
    /// Dropped from peers, by cause.
    pub drops: RelayDrops,
    /// Datagrams whose added delay came out negative.
    pub clock_negative: u64,
}

impl RelayPeerTotals {
    /// Adds one peer's counters.
    pub fn add(&mut self, received: RelayCount, sent: RelayCount, drops: &RelayDrops, clock_negative: u64) {
        self.received.merge(received);
        self.sent.merge(sent);
        self.drops.merge(drops);
        self.clock_negative += clock_negative;
    }
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

    /// Adds another count.
    pub fn merge(&mut self, o: Self) {
        self.datagrams += o.datagrams;
        self.bytes += o.bytes;
    }
}

/// Datagrams dropped, by cause, and (`looped`) the relay's own re-emissions heard back.
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
    /// Not a drop: this relay's own re-emission heard back on the group through multicast
    /// loopback. It was delivered to the group; it is only not forwarded again. Its place in
    /// this struct is the JSON's.
    pub looped: u64,
    /// A segment mate with a lower address carries this group (so it is not doubled).
    pub passive: u64,
    /// No emitting socket could be opened for a new original sender (`--max-senders`).
    pub senders_full: u64,
    /// For a group that is not relayed, or from a peer that hears the group natively.
    pub not_relayed: u64,
    /// The kernel refused the send.
    pub send_errors: u64,
    /// Not fresh: with a token, a time outside the freshness window (a replay from an
    /// earlier run, or a clock too far off), or a "seen" that answers no recent probe of this
    /// run. Absent from reports written before it existed.
    #[serde(default)]
    pub stale: u64,
}

impl RelayDrops {
    /// Adds another set of drops, cause by cause.
    pub fn merge(&mut self, o: &Self) {
        let Self {
            bad_mac,
            duplicate,
            rate_cap,
            too_big,
            looped,
            passive,
            senders_full,
            not_relayed,
            send_errors,
            stale,
        } = *o;
        self.bad_mac += bad_mac;
        self.duplicate += duplicate;
        self.rate_cap += rate_cap;
        self.too_big += too_big;
        self.looped += looped;
        self.passive += passive;
        self.senders_full += senders_full;
        self.not_relayed += not_relayed;
        self.send_errors += send_errors;
        self.stale += stale;
    }
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
    /// Whether it was in the peer list at the end (a DNS name or file can drop it; it is
    /// retired after `--peer-expiry` out of the list and silent).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A report written before the peer table's fields still reads: nothing retired, no
    /// totals.
    #[test]
    fn a_relay_report_without_the_table_fields_reads() {
        let old = r#"{"relay_id":"aa","listen":"10.0.0.1:7880","authenticated":false,"groups":[],"peers":[],
            "senders":[],"senders_untracked":0,"not_a_peer":2,"malformed":0,"kernel_drops":0}"#;
        let r: RelayResults = serde_json::from_str(old).unwrap();
        assert_eq!((r.not_a_peer, r.retired.peers, r.peer_totals, r.peers_refused), (2, 0, None, 0));
        let back: RelayResults = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn counts_and_peer_totals_add_field_by_field() {
        let mut c = RelayCount::default();
        c.add(100);
        c.add(20);
        assert_eq!(c, RelayCount { datagrams: 2, bytes: 120 });
        let mut m = RelayCount { datagrams: 3, bytes: 7 };
        m.merge(c);
        assert_eq!(m, RelayCount { datagrams: 5, bytes: 127 });
        // Counts whose doubling differs from their square: an added count is not a product.
        let drops = RelayDrops { bad_mac: 1, duplicate: 3, stale: 5, ..RelayDrops::default() };
        let mut t = RelayPeerTotals { received: m, sent: c, drops, clock_negative: 4 };
        t.add(c, m, &drops, 3);
        let want = RelayPeerTotals {
            received: RelayCount { datagrams: 7, bytes: 247 },
            sent: RelayCount { datagrams: 7, bytes: 247 },
            drops: RelayDrops { bad_mac: 2, duplicate: 6, stale: 10, ..RelayDrops::default() },
            clock_negative: 7,
        };
        assert_eq!(t, want);
    }

    #[test]
    fn drops_merge_cause_by_cause() {
        let a = RelayDrops {
            bad_mac: 1,
            duplicate: 2,
            rate_cap: 3,
            too_big: 4,
            looped: 5,
            passive: 6,
            senders_full: 7,
            not_relayed: 8,
            send_errors: 9,
            stale: 10,
        };
        let mut t = a;
        t.merge(&a);
        assert_eq!(
            t,
            RelayDrops {
                bad_mac: 2,
                duplicate: 4,
                rate_cap: 6,
                too_big: 8,
                looped: 10,
                passive: 12,
                senders_full: 14,
                not_relayed: 16,
                send_errors: 18,
                stale: 20,
            }
        );
    }
}
