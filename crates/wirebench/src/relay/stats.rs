//! The relay's counters (plain fields: one thread owns them), its per-peer added-delay
//! histograms, and their report and text summary.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::SocketAddrV4;

use hdrhistogram::Histogram;
use wirebench_core::latency::Summary;
use wirebench_core::report::{
    LatencyView, RelayCount, RelayDrops, RelayGroup, RelayPeer, RelayResults, RelaySender, encode_histogram,
};
use wirebench_core::units::humanize_ns;

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
    /// Records the delay from the origin relay's receive to this relay's re-emission.
    pub(crate) fn added_delay(&mut self, origin_rx_wall_ns: u64, emitted_wall_ns: u64) {
        match emitted_wall_ns.checked_sub(origin_rx_wall_ns) {
            Some(d) => self.added.saturating_record(d.max(1)),
            None => self.clock_negative += 1,
        }
    }
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
    pub(crate) senders: &'a Senders,
    pub(crate) groups_list: &'a [SocketAddrV4],
    pub(crate) not_a_peer: u64,
    pub(crate) malformed: u64,
    pub(crate) kernel_drops: u64,
}

/// The report's results.
pub(crate) fn results(t: &Tally<'_>) -> RelayResults {
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
                added_delay: (!s.added.is_empty()).then(|| LatencyView {
                    measures: "relay_added_delay".into(),
                    summary: Summary::of(&s.added, &PERCENTILES),
                    histogram: encode_histogram(&s.added),
                }),
                clock_negative: s.clock_negative,
            })
            .collect(),
        senders,
        senders_untracked: t.senders.untracked,
        not_a_peer: t.not_a_peer,
        malformed: t.malformed,
        kernel_drops: t.kernel_drops,
    }
}

fn drops(d: &RelayDrops) -> String {
    let parts: Vec<String> = [
        ("bad MAC", d.bad_mac),
        ("duplicate", d.duplicate),
        ("rate cap", d.rate_cap),
        ("too big", d.too_big),
        ("looped", d.looped),
        ("passive", d.passive),
        ("senders full", d.senders_full),
        ("not relayed", d.not_relayed),
        ("send errors", d.send_errors),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(w, n)| format!("{n} {w}"))
    .collect();
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

/// The text summary printed when the relay stops.
pub(crate) fn print(out: &mut dyn Write, r: &RelayResults) -> io::Result<()> {
    writeln!(out, "relay {} on {}{}", r.relay_id, r.listen, if r.authenticated { " (MAC on)" } else { "" })?;
    for g in &r.groups {
        writeln!(
            out,
            "  group {}{}: local {} dgrams ({} B) -> forwarded {} to peers; re-emitted {} ({} B); drops: {}; kernel drops {}",
            g.group,
            if g.carried { "" } else { " (carried by a segment mate)" },
            g.local_in.datagrams,
            g.local_in.bytes,
            g.forwarded.datagrams,
            g.reemitted.datagrams,
            g.reemitted.bytes,
            drops(&g.drops),
            g.kernel_drops,
        )?;
        if !g.native_peers.is_empty() {
            writeln!(out, "    native multicast reaches: {}", g.native_peers.join(", "))?;
        }
    }
    for p in &r.peers {
        let delay = p.added_delay.as_ref().map_or_else(String::new, |v| {
            let at = |q: f64| v.summary.at(q).map_or_else(|| "-".into(), |ns| humanize_ns(u128::from(ns)));
            format!("; added delay p50 {} p99 {} max {}", at(50.0), at(99.0), humanize_ns(u128::from(v.summary.max_ns)))
        });
        writeln!(
            out,
            "  peer {}{}: in {} ({} B), out {} ({} B); drops: {}{delay}",
            p.addr,
            if p.active { "" } else { " (gone)" },
            p.received.datagrams,
            p.received.bytes,
            p.sent.datagrams,
            p.sent.bytes,
            drops(&p.drops),
        )?;
    }
    for s in &r.senders {
        writeln!(out, "  sender {} on {} via {}: {} dgrams", s.addr, s.group, s.via, s.count.datagrams)?;
    }
    writeln!(
        out,
        "  relay port: dropped {} from non-peers, {} malformed, {} by the kernel (full buffer); {} datagrams of untracked senders",
        r.not_a_peer, r.malformed, r.kernel_drops, r.senders_untracked
    )?;
    Ok(())
}
