use std::net::{Ipv4Addr, SocketAddrV4};

use proptest::prelude::*;

use super::*;

fn a(last: u8, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), port)
}

#[test]
fn the_window_tells_new_from_duplicate_per_origin() {
    let mut w = PeerWindow::default();
    assert_eq!(w.judge(7, 0), Arrival::New);
    assert_eq!(w.judge(7, 1), Arrival::New);
    assert_eq!(w.judge(7, 1), Arrival::Duplicate);
    assert_eq!(w.judge(7, 0), Arrival::Duplicate);
    // The peer restarts (a new origin id, numbers from 0 again): new, not duplicates.
    assert_eq!(w.judge(9, 0), Arrival::New);
    assert_eq!(w.judge(9, 1), Arrival::New);
    // A late datagram of the old run is still judged against the old run's window.
    assert_eq!(w.judge(7, 1), Arrival::Duplicate);
    assert_eq!(w.judge(7, 2), Arrival::New);
    assert_eq!(w.judge(9, 1), Arrival::Duplicate);
    // A third run forgets the first.
    assert_eq!(w.judge(11, 5), Arrival::New);
    assert_eq!(w.judge(7, 1), Arrival::New, "the oldest run is forgotten, its window reused");
    assert_eq!(w.judge(11, 5), Arrival::Duplicate);
    assert_eq!(w.judge(11, 5 + DEDUPE_WINDOW as u64 + 64), Arrival::New);
    assert_eq!(w.judge(11, 0), Arrival::TooOld);
}

proptest! {
    /// Against a set of everything seen: inside the window every verdict is exact.
    #[test]
    fn the_window_matches_a_set(seqs in proptest::collection::vec((0u64..2, 0u64..3000), 1..400)) {
        let mut w = PeerWindow::default();
        let mut seen = std::collections::HashSet::new();
        for (origin, seq) in seqs {
            let v = w.judge(origin, seq);
            let first = seen.insert((origin, seq));
            prop_assert_eq!(v, if first { Arrival::New } else { Arrival::Duplicate });
        }
    }
}

/// An emitting socket's port is ours while it is open and for the horizon after it closed,
/// then free again; a port never opened is never ours, and reopening one makes it ours
/// for good again.
#[test]
fn emitting_ports_stay_ours_for_the_horizon_after_closing() {
    let mut p = EmitPorts::default();
    assert!(!p.is_ours(40_000, 0) && !p.is_ours(40_000, u64::MAX - 1), "never opened");
    p.opened(40_000);
    assert!(p.is_ours(40_000, 5) && p.is_ours(40_000, u64::MAX - 1), "open");
    assert!(!p.is_ours(40_001, 5) && !p.is_ours(39_999, 5), "only that port");
    p.closed(40_000, 1_000);
    assert!(p.is_ours(40_000, 1_000 + CLOSED_PORT_HORIZON_NS - 1), "within the horizon");
    assert!(!p.is_ours(40_000, 1_000 + CLOSED_PORT_HORIZON_NS), "past it");
    p.opened(40_000);
    assert!(p.is_ours(40_000, 1_000 + 2 * CLOSED_PORT_HORIZON_NS), "reopened");
    p.opened(u16::MAX);
    p.opened(0);
    assert!(p.is_ours(u16::MAX, 1) && p.is_ours(0, 1), "the end ports");
    p.closed(u16::MAX, u64::MAX - 1);
    assert!(p.is_ours(u16::MAX, u64::MAX - 1), "a closing time near the end saturates");
}

#[test]
fn the_rate_cap_allows_burst_then_rate() {
    let mut c = RateCap::new(1000);
    // Burst 100 (a tenth of a second), all at t = 0.
    let burst = (0..1000).filter(|_| c.allow(0)).count();
    assert_eq!(burst, 100);
    // Then one per millisecond.
    assert!(!c.allow(999_999));
    assert!(c.allow(1_000_000));
    assert!(!c.allow(1_000_000));
    let over_a_second = (1..=1000u64).filter(|i| c.allow(1_000_000 + i * 1_000_000)).count();
    assert_eq!(over_a_second, 1000);
    let mut tiny = RateCap::new(0);
    assert_eq!((0..100).filter(|_| tiny.allow(0)).count(), 16, "the smallest burst");
}

#[test]
fn the_lowest_live_address_carries_the_group() {
    let mut m = Mates::default();
    let me = a(2, 7879);
    assert!(m.designated(me, 0, 10), "alone");
    assert!(m.probed(a(3, 7879), 30, 1, 0));
    assert!(m.designated(me, 5, 10));
    assert!(m.is_mate(a(3, 7879), 10, 10));
    assert!(m.probed(a(1, 9999), 10, 1, 5));
    assert!(!m.designated(me, 10, 10));
    assert!(m.designated(a(1, 7879), 10, 10), "port breaks ties");
    assert!(m.designated(me, 16, 10), "the lower one went quiet");
    assert!(!m.is_mate(a(1, 9999), 16, 10));
    m.expire(16 + FRESH_WINDOW_NS, 10);
    assert!(!m.is_mate(a(1, 9999), 15, 100), "forgotten");
}

const S: u64 = 1_000_000_000;

/// Times within the window either way are fresh; a datagram from a run that ended a
/// minute ago (or stamped in the future) is not.
#[test]
fn the_freshness_window_is_ten_seconds_either_way() {
    let now = 1_700_000_000 * S;
    assert!(is_fresh(now, now));
    assert!(is_fresh(now - 10 * S, now) && is_fresh(now + 10 * S, now));
    assert!(!is_fresh(now - 10 * S - 1, now) && !is_fresh(now + 10 * S + 1, now));
    assert!(!is_fresh(now - 60 * S, now), "captured in an earlier run");
    assert!(!is_fresh(0, now) && !is_fresh(u64::MAX, now));
}

/// A "seen" counts only as the answer to one of our last three probes of this run, and
/// only as of when that probe left.
#[test]
fn a_seen_answers_only_a_recent_probe_of_this_run() {
    let mut log = ProbeLog::new(77);
    assert_eq!(log.answered(77, 0), None);
    assert_eq!(log.answered(77, 1), None, "not sent yet");
    for seq in 1..=5 {
        log.sent(seq, seq * 2 * S);
    }
    assert_eq!(log.answered(77, 5), Some(10 * S));
    assert_eq!(log.answered(77, 3), Some(6 * S));
    assert_eq!(log.answered(77, 2), None, "four probes ago");
    assert_eq!(log.answered(78, 5), None, "another run's probe 5");
    assert_eq!(log.answered(77, 6), None, "a probe not sent yet");
}

/// The defect: one captured "seen", replayed after its mate stopped, kept the mate alive
/// (and this relay passive) for ever. Now the mate is alive only as of the probe the
/// "seen" answers, and the lower relay's claim lapses one TTL after its last real answer.
#[test]
fn a_replayed_seen_cannot_hold_the_segment_after_its_mate_stops() {
    let ttl = 6 * S + S / 2;
    let me = a(5, 7880);
    let carrier = a(4, 7880);
    let mut log = ProbeLog::new(1);
    let mut m = Mates::default();
    // Probes every 2 s; the carrier answers them until 20 s, then stops.
    let mut captured = None;
    for seq in 1..=30u64 {
        let now = seq * 2 * S;
        log.sent(seq, now);
        if now <= 20 * S {
            captured = Some(seq);
        }
        // The attacker replays the last captured "seen" (its seq, our run) every 100 ms.
        for k in 0..20 {
            let t = now + k * S / 10;
            if let Some(at) = log.answered(1, captured.unwrap()) {
                m.answered(carrier, at);
            }
            let carries = m.designated(me, t, ttl);
            if t <= 20 * S + ttl {
                assert!(!carries, "the carrier is alive until a TTL after its last answer ({t})");
            } else {
                assert!(carries, "we take over a TTL after the carrier's last answer ({t})");
            }
        }
    }
}

/// A mate's probe counts only if newer than the last one of its run: replays of its
/// probes do not keep it alive; a restarted mate (a new run) counts from its first probe.
#[test]
fn replayed_probes_do_not_keep_a_mate_alive() {
    let mut m = Mates::default();
    let b = a(4, 7880);
    assert!(m.probed(b, 9, 1, 0));
    assert!(m.probed(b, 9, 2, 2 * S));
    assert!(!m.probed(b, 9, 2, 3 * S), "the same probe again");
    assert!(!m.probed(b, 9, 1, 4 * S), "an older one");
    assert!(!m.is_mate(b, 9 * S, 6 * S), "alive only as of its last new probe (2 s)");
    // Expiry keeps the record for a window more, so a fresh replay still does not count.
    m.expire(9 * S, 6 * S);
    assert!(!m.probed(b, 9, 2, 9 * S));
    assert!(m.probed(b, 10, 1, 10 * S), "a new run");
    assert!(m.is_mate(b, 10 * S, 6 * S));
}
