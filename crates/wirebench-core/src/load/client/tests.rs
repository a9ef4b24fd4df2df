use super::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn mix() -> Mix {
    Mix::parse("cursor=50,save=50", &["save"]).unwrap()
}

const EVERY_100MS: Arrivals = Arrivals::Fixed { interval_ns: 100 * MS };

/// Every send due while the client could not run goes at its wake-up, each with the time
/// it was intended for, in order; requests and relayed messages are numbered apart; none is
/// due at or past the end of sending.
#[test]
fn a_late_wake_up_sends_all_that_was_due_with_its_intended_time() {
    let mut s = ClientSchedule::new(rng_for(7, 3), EVERY_100MS, S, 3 * S);
    let phase = s.next_ns() - S;
    assert!(phase < 100 * MS, "a phase within one interval: {phase}");
    assert_eq!(s.due(S + phase - 1, &mix(), EVERY_100MS), None, "not yet");
    // asleep until 2 s: ten sends were due
    let mut due = Vec::new();
    while let Some(d) = s.due(2 * S, &mix(), EVERY_100MS) {
        due.push(d);
        assert!(due.len() <= 100, "bounded");
    }
    let times: Vec<u64> = due.iter().map(|d| d.intended_ns).collect();
    assert_eq!(times, (0..10).map(|k| S + phase + k * 100 * MS).collect::<Vec<_>>());
    let requests = due.iter().filter(|d| d.request).count() as u64;
    let seqs = |r: bool| due.iter().filter(|d| d.request == r).map(|d| d.seq).collect::<Vec<_>>();
    assert_eq!(seqs(true), (0..requests).collect::<Vec<_>>());
    assert_eq!(seqs(false), (0..10 - requests).collect::<Vec<_>>());
    assert!(due.iter().all(|d| d.request == (d.kind == 1)), "save is the request");
    // to the end: twenty in all, the last before 3 s
    let rest: Vec<Due> = std::iter::from_fn(|| s.due(10 * S, &mix(), EVERY_100MS)).take(100).collect();
    assert_eq!(rest.len(), 10);
    assert_eq!(rest[9].intended_ns, S + phase + 19 * 100 * MS);
    assert!(s.next_ns() >= 3 * S && s.due(u64::MAX, &mix(), EVERY_100MS).is_none());
}

/// The same run seed and client draw the same schedule; another client, its own phase.
#[test]
fn a_client_draws_the_same_schedule_each_run() {
    let draw = |seed, id| {
        let mut s = ClientSchedule::new(rng_for(seed, id), Arrivals::Poisson { mean_ns: 50 * MS }, 0, S);
        std::iter::from_fn(|| s.due(S, &mix(), Arrivals::Poisson { mean_ns: 50 * MS })).take(200).collect::<Vec<_>>()
    };
    assert_eq!(draw(1, 5), draw(1, 5));
    assert_ne!(draw(1, 5), draw(1, 6));
    assert_ne!(draw(1, 5), draw(2, 5));
    let n = draw(1, 5).len();
    assert!((10..=40).contains(&n), "about 20 in a second at a 50 ms mean: {n}");
}

/// The task sleeps to its next send, or to a frame the shaper holds if that is sooner, and
/// past the end of sending to the quit time.
#[test]
fn the_client_wakes_for_its_next_send_or_a_held_frame() {
    let s = ClientSchedule::new(rng_for(1, 1), Arrivals::Fixed { interval_ns: S }, 0, 10 * S);
    let next = s.next_ns();
    assert_eq!(s.wake_ns(12 * S, None), next);
    assert_eq!(s.wake_ns(12 * S, Some(next + 1)), next);
    assert_eq!(s.wake_ns(12 * S, Some(next.saturating_sub(1))), next.saturating_sub(1));
    let done = ClientSchedule::new(rng_for(1, 1), Arrivals::Fixed { interval_ns: S }, 10 * S, 10 * S);
    assert_eq!(done.wake_ns(12 * S, None), 12 * S);
}

#[test]
fn the_ramp_is_shared_out_evenly() {
    let joins: Vec<u64> = (0..4).map(|id| join_ns(8 * S, id, 4)).collect();
    assert_eq!(joins, [0, 2 * S, 4 * S, 6 * S]);
    assert_eq!(join_ns(u64::MAX, u64::MAX - 1, u64::MAX), u64::MAX - 1, "no overflow");
    assert_eq!(join_ns(S, 3, 0), 3 * S, "no division by zero");
}

/// Each run seed gives a client its own draws, and each client of a run its own: no two
/// seeds (or two clients) share a random source, whatever bits they have in common.
#[test]
fn every_seed_and_client_has_its_own_random_source() {
    let first = |seed: u64, id: u64| rng_for(seed, id).next_u64();
    for id in 0..8 {
        let mut seen: Vec<u64> = (0..8).map(|seed| first(seed, id)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 8, "seeds 0 to 7 of client {id}");
    }
    for seed in 0..8 {
        let mut seen: Vec<u64> = (0..8).map(|id| first(seed, id)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 8, "clients 0 to 7 of seed {seed}");
    }
}

/// A send is due at its own time (the wake-up the task slept to), not only after it; one
/// due exactly at the end of sending is not sent, and the task then sleeps to the quit
/// time rather than waking at the end for nothing.
#[test]
fn a_send_is_due_at_its_time_and_none_at_the_end() {
    let mut s = ClientSchedule::new(rng_for(7, 3), EVERY_100MS, S, 3 * S);
    let first = s.next_ns();
    assert_eq!(s.wake_ns(5 * S, None), first);
    assert_eq!(s.due(first, &mix(), EVERY_100MS).map(|d| d.intended_ns), Some(first));
    assert_eq!(s.next_ns(), first + 100 * MS);
    // the same client, its sending ending exactly at its first send
    let mut at_end = ClientSchedule::new(rng_for(7, 3), EVERY_100MS, S, first);
    assert_eq!(at_end.next_ns(), first);
    assert_eq!(at_end.due(first, &mix(), EVERY_100MS), None);
    assert_eq!(at_end.wake_ns(5 * S, None), 5 * S);
}
