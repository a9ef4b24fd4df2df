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

#[test]
fn digest_depends_on_group_port_and_bytes() {
    let g = SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 5000);
    let h = SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 5001);
    assert_eq!(digest(g, 7, b"abc"), digest(g, 7, b"abc"));
    assert_ne!(digest(g, 7, b"abc"), digest(g, 7, b"abd"));
    assert_ne!(digest(g, 7, b"abc"), digest(h, 7, b"abc"));
    assert_ne!(digest(g, 7, b"abc"), digest(g, 8, b"abc"), "identical bytes from another sender");
    // FNV-1a of eight zero bytes.
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    for _ in 0..8 {
        x = x.wrapping_mul(0x0100_0000_01b3);
    }
    assert_eq!(digest(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), 0, b""), x);
}

#[test]
fn the_guard_remembers_recent_emissions_only() {
    let mut g = EmitGuard::new(2, 1_000);
    g.emitted(1, 100);
    assert!(g.is_echo(1, 100));
    assert!(g.is_echo(1, 1_100));
    assert!(!g.is_echo(1, 1_101), "past the horizon");
    assert!(!g.is_echo(2, 100));
    g.emitted(2, 200);
    g.emitted(3, 300);
    assert!(!g.is_echo(1, 300), "evicted by capacity");
    assert!(g.is_echo(2, 300) && g.is_echo(3, 300));
    // Re-emitting the same digest refreshes it; evicting its older entry keeps it.
    g.emitted(2, 400);
    g.emitted(4, 500);
    assert!(g.is_echo(2, 500) && g.is_echo(4, 500));
    assert!(!g.is_echo(3, 500));
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
    m.heard(a(3, 7879), 0);
    assert!(m.designated(me, 5, 10));
    assert!(m.is_mate(a(3, 7879), 10, 10));
    m.heard(a(1, 9999), 5);
    assert!(!m.designated(me, 10, 10));
    assert!(m.designated(a(1, 7879), 10, 10), "port breaks ties");
    assert!(m.designated(me, 16, 10), "the lower one went quiet");
    assert!(!m.is_mate(a(1, 9999), 16, 10));
    m.expire(16, 10);
    assert!(!m.is_mate(a(1, 9999), 15, 100), "forgotten");
}
