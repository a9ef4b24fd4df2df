use super::*;
use crate::mesh::pacer::slot_for;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// The prober's loop on virtual time from `start` to `end`: at each wake-up, housekeeping
/// if due, then every due send; returns the wake-ups, the ticks and the sends per target.
fn run(s: &mut Schedule, rng: &mut SplitMix64, start: u64, end: u64) -> (Vec<u64>, Vec<u64>, Vec<(u64, u64)>) {
    let (mut wakes, mut ticks, mut sends) = (Vec::new(), Vec::new(), Vec::new());
    let mut now = start;
    while now < end {
        wakes.push(now);
        assert!(wakes.len() < 100_000, "bounded");
        if s.tick_due(now) {
            ticks.push(now);
        }
        while let Some(id) = s.pop_due(now, rng) {
            sends.push((id, now));
        }
        let wake = s.wake_at();
        assert!(wake > now, "the next wake-up is ahead: {wake} at {now}");
        now = wake;
    }
    (wakes, ticks, sends)
}

/// Fifty targets at 10 probes a second over 20 s: each is sent about its rate, housekeeping
/// runs a tick apart (at most a slot more), every tick after the first is on the send grid
/// and share a send's wake-up, and the loop never wakes for nothing.
#[test]
fn housekeeping_shares_the_send_slots_wake_ups() {
    let mut rng = SplitMix64::new(3);
    let mut s = Schedule::new();
    let interval = 100 * MS;
    let slot = slot_for(interval);
    s.pacer.set_slot(slot, 7 * MS);
    for id in 0..50 {
        s.pacer.set(id, id, interval, 0, &mut rng);
    }
    let (wakes, ticks, sends) = run(&mut s, &mut rng, 0, 20 * S);
    for id in 0..50 {
        let n = sends.iter().filter(|(i, _)| *i == id).count();
        assert!((140..=260).contains(&n), "target {id}: {n} sends in 20 s at 10/s (Poisson: 200, sd 14)");
    }
    assert_eq!(ticks[0], 0, "housekeeping first");
    assert!(ticks.windows(2).all(|w| (TICK_NS..=TICK_NS + slot).contains(&(w[1] - w[0]))), "{ticks:?}");
    assert!(ticks[1..].iter().all(|&t| s.pacer.on_grid(t) == t), "ticks on the grid");
    let idle = wakes.iter().filter(|w| !ticks.contains(w) && !sends.iter().any(|(_, at)| at == *w)).count();
    assert_eq!(idle, 0, "every wake-up sends or keeps house");
    let alone = ticks.iter().filter(|t| !sends.iter().any(|(_, at)| at == *t)).count();
    assert!(alone <= ticks.len() / 4, "ticks share a send's wake-up: {alone} of {} alone", ticks.len());
}

/// With no target the loop wakes only for housekeeping, a tick apart.
#[test]
fn with_nothing_to_send_it_wakes_a_tick_apart() {
    let mut rng = SplitMix64::new(1);
    let mut s = Schedule::new();
    assert_eq!(s.slot_ns(), TICK_NS);
    let (wakes, ticks, sends) = run(&mut s, &mut rng, 5 * MS, S + 5 * MS);
    assert!(sends.is_empty());
    assert_eq!(wakes, ticks);
    assert_eq!(ticks, (0..10).map(|k| 5 * MS + k * TICK_NS).collect::<Vec<_>>());
    s.pacer.set_slot(slot_for(S), 0);
    s.pacer.set(1, 1, S, 0, &mut rng);
    assert_eq!(s.slot_ns(), slot_for(S));
}
