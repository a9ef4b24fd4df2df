//! Terminal text of a relay run: what `wirebench relay` prints when it stops and what
//! `wirebench report` prints of its saved report. Per group: local datagrams in, forwarded,
//! re-emitted, its own re-emissions heard back, drops by cause; per peer (live, retired,
//! all), the original senders, the relay port's refusals.
//!
//! A relay's own re-emission comes back to its group socket through multicast loopback.
//! Those datagrams were delivered to the group; the relay only declines to forward them
//! again. They are counted apart from the drops (`RelayDrops::looped` in the JSON, which
//! keeps its place there).

use std::io::{self, Write};

use wirebench_core::report::{LatencyView, RelayCount, RelayDrops, RelayResults};
use wirebench_core::units::humanize_ns;

/// The drops by cause, `none` when there are none. The relay's own re-emissions heard back
/// are not drops: [`heard_back`] says them.
fn drops(d: &RelayDrops) -> String {
    let RelayDrops {
        bad_mac,
        duplicate,
        rate_cap,
        too_big,
        looped: _,
        passive,
        senders_full,
        not_relayed,
        send_errors,
        stale,
    } = *d;
    let parts: Vec<String> = [
        ("bad MAC", bad_mac),
        ("duplicate", duplicate),
        ("rate cap", rate_cap),
        ("too big", too_big),
        ("passive", passive),
        ("senders full", senders_full),
        ("not relayed", not_relayed),
        ("send errors", send_errors),
        ("stale", stale),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(w, n)| format!("{n} {w}"))
    .collect();
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

/// `, heard back 3000 (its own re-emissions: delivered, not forwarded again)`; nothing when
/// none came back.
fn heard_back(d: &RelayDrops) -> String {
    if d.looped == 0 {
        String::new()
    } else {
        format!(", heard back {} (its own re-emissions: delivered, not forwarded again)", d.looped)
    }
}

/// "; added delay p50 .. p99 .. max .." (nothing without one).
fn delay(v: Option<&LatencyView>) -> String {
    v.map_or_else(String::new, |v| {
        let at = |q: f64| v.summary.at(q).map_or_else(|| "-".into(), |ns| humanize_ns(u128::from(ns)));
        format!("; added delay p50 {} p99 {} max {}", at(50.0), at(99.0), humanize_ns(u128::from(v.summary.max_ns)))
    })
}

/// A peer's (or the retired peers') traffic: `in N (B), out N (B); drops: ...`, what it
/// heard back, and its added delay.
fn traffic(received: RelayCount, sent: RelayCount, d: &RelayDrops, added: Option<&LatencyView>) -> String {
    format!(
        "in {} ({} B), out {} ({} B); drops: {}{}{}",
        received.datagrams,
        received.bytes,
        sent.datagrams,
        sent.bytes,
        drops(d),
        heard_back(d),
        delay(added)
    )
}

/// The relay's summary.
pub fn text(out: &mut dyn Write, r: &RelayResults) -> io::Result<()> {
    writeln!(out, "relay {} on {}{}", r.relay_id, r.listen, if r.authenticated { " (MAC on)" } else { "" })?;
    for g in &r.groups {
        writeln!(
            out,
            "  group {}{}: local {} dgrams ({} B) -> forwarded {} to peers; re-emitted {} ({} B){}; drops: {}; kernel drops {}",
            g.group,
            if g.carried { "" } else { " (carried by a segment mate)" },
            g.local_in.datagrams,
            g.local_in.bytes,
            g.forwarded.datagrams,
            g.reemitted.datagrams,
            g.reemitted.bytes,
            heard_back(&g.drops),
            drops(&g.drops),
            g.kernel_drops,
        )?;
        if !g.native_peers.is_empty() {
            writeln!(out, "    native multicast reaches: {}", g.native_peers.join(", "))?;
        }
    }
    for p in &r.peers {
        let traffic = traffic(p.received, p.sent, &p.drops, p.added_delay.as_ref());
        writeln!(out, "  peer {}{}: {traffic}", p.addr, if p.active { "" } else { " (gone)" })?;
    }
    let rt = &r.retired;
    if rt.peers > 0 {
        let traffic = traffic(rt.received, rt.sent, &rt.drops, rt.added_delay.as_ref());
        writeln!(out, "  retired peers ({}, out of the list and silent): {traffic}", rt.peers)?;
    }
    if let Some(t) = r.peer_totals.filter(|_| rt.peers > 0) {
        writeln!(
            out,
            "  all peers: in {} ({} B), out {} ({} B); drops: {}{}",
            t.received.datagrams,
            t.received.bytes,
            t.sent.datagrams,
            t.sent.bytes,
            drops(&t.drops),
            heard_back(&t.drops),
        )?;
    }
    if r.peers_refused > 0 {
        writeln!(
            out,
            "  peer table full ({} live peers): {} listed peers waited for a slot, {} still waiting",
            r.max_peers, r.peers_refused, r.peers_waiting
        )?;
    }
    for s in &r.senders {
        writeln!(out, "  sender {} on {} via {}: {} dgrams", s.addr, s.group, s.via, s.count.datagrams)?;
    }
    writeln!(
        out,
        "  relay port: dropped {} from non-peers, {} malformed, {} by the kernel (full buffer); {} datagrams of untracked senders",
        r.not_a_peer, r.malformed, r.kernel_drops, r.senders_untracked
    )
}

#[cfg(test)]
mod tests {

    use super::*;

    fn text_of(r: &RelayResults) -> String {
        let mut out = Vec::new();
        text(&mut out, r).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// What the relay delivered and heard back is not a drop: "drops: 3000 looped" was
    /// printed for a stream of 3,000 the relay re-emitted whole.
    #[test]
    fn re_emissions_heard_back_are_not_drops() {
        let t = text_of(&crate::fixtures::relay());
        assert!(
            t.contains(
                "re-emitted 3000 (600000 B), heard back 3000 (its own re-emissions: delivered, not forwarded again); \
                 drops: none; kernel drops 0"
            ),
            "{t}"
        );
        assert!(!t.contains("looped"), "{t}");
        // real drops still are
        let mut r = crate::fixtures::relay();
        r.groups[0].drops.duplicate = 1;
        assert!(text_of(&r).contains("not forwarded again); drops: 1 duplicate; kernel drops 0"), "{}", text_of(&r));
    }
}
