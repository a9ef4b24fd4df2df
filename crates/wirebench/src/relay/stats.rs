//! The relay's counters (plain fields: one thread owns them), its per-peer added-delay
//! histograms, and their report (`wirebench_report::relay` prints it).

use std::net::SocketAddrV4;

use foldhash::HashMap;
use hdrhistogram::Histogram;
use wirebench_core::latency::Summary;
use wirebench_core::report::{
    LatencyView, RelayCount, RelayDrops, RelayGroup, RelayPeer, RelayPeerTotals, RelayResults, RelayRetired,
    RelaySender, encode_histogram,
};
use wirebench_net::rxbatch::RX_BATCH;

/// Most original senders listed in the report.
pub(crate) const MAX_SENDERS_LISTED: usize = 256;
const PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// One group's counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupStats {
    pub(crate) local_in: RelayCount,
    pub(crate) forwarded: RelayCount,
    pub(crate) reemitted: RelayCount,
    pub(crate) drops: RelayDrops,
}

/// One peer's counters and added-delay histogram.
#[derive(Debug, Clone)]
pub(crate) struct PeerStats {
    pub(crate) received: RelayCount,
    pub(crate) sent: RelayCount,
    pub(crate) drops: RelayDrops,
    pub(crate) added: Histogram<u64>,
    pub(crate) clock_negative: u64,
}

impl Default for PeerStats {
    fn default() -> Self {
        Self {
            received: RelayCount::default(),
            sent: RelayCount::default(),
            drops: RelayDrops::default(),
            added: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
            clock_negative: 0,
        }
    }
}

impl PeerStats {
    /// The delay from the origin relay's receive to this relay's re-emission (at least
    /// 1 ns), for [`PeerStats::record`] or [`Delays`]; `None` when it came out negative
    /// (counted in `clock_negative`).
    pub(crate) fn added_delay(&mut self, origin_wall_ns: u64, emitted_wall_ns: u64) -> Option<u64> {
        let d = emitted_wall_ns.checked_sub(origin_wall_ns).map(|d| d.max(1));
        if d.is_none() {
            self.clock_negative += 1;
        }
        d
    }

    /// Records an added delay in the histogram.
    pub(crate) fn record(&mut self, delay_ns: u64) {
        self.added.saturating_record(delay_ns);
    }
}

/// Added delays the loop holds unrecorded at most: eight batches.
const DELAYS: usize = 8 * RX_BATCH;

/// Added delays (peer slot, ns) waiting for their peer's histogram. A record writes one
/// line of a histogram's 216 KiB of counts, a line that is cold when the relay has waited
/// for its datagram, so the loop records them off the datagram's path: when its timer fires
/// (every tenth of a second), when there is no room for another batch, and before a
/// histogram is read or a peer retired. 4 KiB.
#[derive(Debug)]
pub(crate) struct Delays(Vec<(usize, u64)>);

impl Default for Delays {
    fn default() -> Self {
        Self(Vec::with_capacity(DELAYS))
    }
}

impl Delays {
    /// Queues `delay_ns` for peer slot `slot`; true when there is no room for another batch
    /// of [`RX_BATCH`] (record them before the next). A full queue takes nothing more.
    pub(crate) fn push(&mut self, slot: usize, delay_ns: u64) -> bool {
        if self.0.len() < DELAYS {
            self.0.push((slot, delay_ns));
        }
        DELAYS - self.0.len() < RX_BATCH
    }

    /// The queued delays, oldest first, leaving none.
    pub(crate) fn take(&mut self) -> std::vec::Drain<'_, (usize, u64)> {
        self.0.drain(..)
    }
}

/// The retired peers' counters together (one histogram for all of them).
#[derive(Debug, Default)]
pub(crate) struct Retired {
    pub(crate) peers: u64,
    pub(crate) stats: PeerStats,
    /// Retired peers' histograms not yet added to `stats.added`: adding one scans all its
    /// 27,648 counts, so a whole table retired at once is merged a few at a time
    /// ([`Retired::merge_some`]) instead of holding the loop up.
    unmerged: Vec<Histogram<u64>>,
}

impl Retired {
    /// Folds a retired peer's counters in; its histogram waits for [`Retired::merge_some`].
    pub(crate) fn fold(&mut self, p: PeerStats) {
        let PeerStats { received, sent, drops, added, clock_negative } = p;
        self.peers += 1;
        self.stats.received.merge(received);
        self.stats.sent.merge(sent);
        self.stats.drops.merge(&drops);
        self.stats.clock_negative += clock_negative;
        if !added.is_empty() {
            self.unmerged.push(added);
        }
    }

    /// Adds up to `n` waiting histograms; whether any are left.
    pub(crate) fn merge_some(&mut self, n: usize) -> bool {
        let k = self.unmerged.len().saturating_sub(n);
        for h in self.unmerged.drain(k..) {
            // Same bounds on both sides: cannot fail.
            let _ = self.stats.added.add(&h);
        }
        !self.unmerged.is_empty()
    }

    /// Adds every waiting histogram (for the report).
    pub(crate) fn merge_all(&mut self) {
        self.merge_some(usize::MAX);
    }
}

/// The peer table at the end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table {
    pub(crate) max_peers: usize,
    pub(crate) refused: u64,
    pub(crate) waiting: usize,
}

/// Original senders: (sender, group index, carried by peer or local) to counts, bounded.
#[derive(Debug, Default)]
pub(crate) struct Senders {
    map: HashMap<(SocketAddrV4, usize, Option<SocketAddrV4>), RelayCount>,
    pub(crate) untracked: u64,
}

impl Senders {
    /// Counts one datagram of `sender` on group `g`, carried by `via` (None: local).
    pub(crate) fn add(&mut self, sender: SocketAddrV4, g: usize, via: Option<SocketAddrV4>, bytes: usize) {
        let key = (sender, g, via);
        if let Some(c) = self.map.get_mut(&key) {
            c.add(bytes);
        } else if self.map.len() < MAX_SENDERS_LISTED {
            let mut c = RelayCount::default();
            c.add(bytes);
            self.map.insert(key, c);
        } else {
            self.untracked += 1;
        }
    }
}

/// Everything counted in a run, for the report.
#[derive(Debug)]
pub(crate) struct Tally<'a> {
    pub(crate) relay_id: u64,
    pub(crate) listen: SocketAddrV4,
    pub(crate) authenticated: bool,
    pub(crate) groups: &'a [(SocketAddrV4, GroupStats, bool, Vec<SocketAddrV4>, u64)],
    pub(crate) peers: &'a [(SocketAddrV4, PeerStats, bool)],
    pub(crate) retired: &'a Retired,
    /// Every peer's counters, counted as they happened (not summed from the rows).
    pub(crate) totals: RelayPeerTotals,
    pub(crate) table: Table,
    pub(crate) senders: &'a Senders,
    pub(crate) groups_list: &'a [SocketAddrV4],
    pub(crate) not_a_peer: u64,
    pub(crate) malformed: u64,
    pub(crate) kernel_drops: u64,
}

/// The report's results.
pub(crate) fn results(t: &Tally<'_>) -> RelayResults {
    let view = |h: &Histogram<u64>| {
        (!h.is_empty()).then(|| LatencyView {
            measures: wirebench_core::report::Measure::RelayAddedDelay,
            summary: Summary::of(h, &PERCENTILES),
            histogram: encode_histogram(h),
        })
    };
    let r = &t.retired.stats;
    let mut senders: Vec<RelaySender> = t
        .senders
        .map
        .iter()
        .map(|((s, g, via), c)| RelaySender {
            addr: s.to_string(),
            group: t.groups_list[*g].to_string(),
            via: via.map_or_else(|| "local".into(), |v| v.to_string()),
            count: *c,
        })
        .collect();
    senders.sort_by(|a, b| (&a.group, &a.addr, &a.via).cmp(&(&b.group, &b.addr, &b.via)));
    RelayResults {
        relay_id: format!("{:016x}", t.relay_id),
        listen: t.listen.to_string(),
        authenticated: t.authenticated,
        groups: t
            .groups
            .iter()
            .map(|(g, s, carried, native, kernel)| RelayGroup {
                group: g.to_string(),
                carried: *carried,
                native_peers: native.iter().map(ToString::to_string).collect(),
                local_in: s.local_in,
                forwarded: s.forwarded,
                reemitted: s.reemitted,
                drops: s.drops,
                kernel_drops: *kernel,
            })
            .collect(),
        peers: t
            .peers
            .iter()
            .map(|(a, s, active)| RelayPeer {
                addr: a.to_string(),
                active: *active,
                received: s.received,
                sent: s.sent,
                drops: s.drops,
                added_delay: view(&s.added),
                clock_negative: s.clock_negative,
            })
            .collect(),
        senders,
        senders_untracked: t.senders.untracked,
        not_a_peer: t.not_a_peer,
        malformed: t.malformed,
        kernel_drops: t.kernel_drops,
        retired: RelayRetired {
            peers: t.retired.peers,
            received: r.received,
            sent: r.sent,
            drops: r.drops,
            added_delay: view(&r.added),
            clock_negative: r.clock_negative,
        },
        peer_totals: Some(t.totals),
        max_peers: t.table.max_peers as u64,
        peers_refused: t.table.refused,
        peers_waiting: t.table.waiting as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delays wait, in order, until fewer than a batch's room is left; a full queue takes
    /// nothing more.
    #[test]
    fn delays_wait_until_there_is_no_room_for_another_batch() {
        let mut d = Delays::default();
        for k in 0..DELAYS - RX_BATCH {
            assert!(!d.push(k % 3, k as u64), "room at {k}");
        }
        assert!(d.push(7, 1), "room for fewer than a batch");
        let got: Vec<_> = d.take().collect();
        assert_eq!(got.len(), DELAYS - RX_BATCH + 1);
        assert_eq!((got[0], got[1], got[got.len() - 1]), ((0, 0), (1, 1), (7, 1)));
        assert_eq!(d.take().len(), 0, "taken once");
        for k in 0..DELAYS + 5 {
            d.push(1, k as u64);
        }
        assert_eq!(d.take().len(), DELAYS);
    }

    /// A peer with every counter set, distinct per peer (`k`).
    fn peer(k: u64) -> PeerStats {
        let mut p = PeerStats::default();
        for _ in 0..k {
            p.received.add(100);
        }
        for _ in 0..2 * k {
            p.sent.add(10);
        }
        let d = &mut p.drops;
        (d.bad_mac, d.duplicate, d.rate_cap, d.too_big, d.looped) = (k, k + 1, k + 2, k + 3, k + 4);
        (d.passive, d.senders_full, d.not_relayed, d.send_errors) = (k + 5, k + 6, k + 7, k + 8);
        let d = p.added_delay(1_000, 1_000 + 1_000 * k).unwrap();
        p.record(d);
        assert_eq!(p.added_delay(2_000, 1_000), None);
        p
    }

    /// Folding keeps every counter: the rows plus the retired row equal the totals of all
    /// peers, field by field (a field the fold forgot would break it), and the retired
    /// histogram holds every retired peer's samples.
    #[test]
    fn rows_plus_retired_equal_the_totals_for_every_counter() {
        let all: Vec<PeerStats> = (1..=4).map(peer).collect();
        let mut totals = RelayPeerTotals::default();
        for p in &all {
            totals.add(p.received, p.sent, &p.drops, p.clock_negative);
        }
        let mut retired = Retired::default();
        retired.fold(all[0].clone());
        retired.fold(all[2].clone());
        assert!(retired.merge_some(1), "one histogram left");
        assert_eq!(retired.stats.added.len(), 1);
        retired.merge_all();
        let live = [
            ("10.0.0.2:7880".parse().unwrap(), all[1].clone(), true),
            ("10.0.0.4:7880".parse().unwrap(), all[3].clone(), false),
        ];
        let senders = Senders::default();
        let r = results(&Tally {
            relay_id: 1,
            listen: "10.0.0.1:7880".parse().unwrap(),
            authenticated: false,
            groups: &[],
            peers: &live,
            retired: &retired,
            totals,
            table: Table { max_peers: 1024, refused: 3, waiting: 1 },
            senders: &senders,
            groups_list: &[],
            not_a_peer: 0,
            malformed: 0,
            kernel_drops: 0,
        });
        assert_eq!(r.retired.peers, 2);
        let mut sum = RelayPeerTotals::default();
        sum.add(r.retired.received, r.retired.sent, &r.retired.drops, r.retired.clock_negative);
        for p in &r.peers {
            sum.add(p.received, p.sent, &p.drops, p.clock_negative);
        }
        assert_eq!(Some(sum), r.peer_totals);
        assert_eq!(r.retired.received, RelayCount { datagrams: 4, bytes: 400 });
        assert_eq!(r.retired.drops.send_errors, 9 + 11);
        let v = r.retired.added_delay.as_ref().unwrap();
        assert_eq!((v.summary.count, r.retired.clock_negative), (2, 2));
        assert_eq!((r.max_peers, r.peers_refused, r.peers_waiting), (1024, 3, 1));
        let mut text = Vec::new();
        wirebench_report::text::relay::text(&mut text, &r).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("retired peers (2, out of the list and silent): in 4 (400 B), out 8 (80 B)"), "{text}");
        assert!(text.contains("all peers: in 10 (1000 B), out 20 (200 B)"), "{text}");
        assert!(text.contains("3 listed peers waited for a slot, 1 still waiting"), "{text}");
    }
}
