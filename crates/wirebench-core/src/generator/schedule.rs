//! A load scenario's schedule account (`LoadSchedule` in the report): the sends every
//! client's schedule asked for in the measured window, and where the ones not made went:
//! *unsent* by clients that stayed connected (the generator fell behind), or *lost* with
//! clients that were dropped before the end of sending or never connected. The rate asked
//! is the scenario's, as k6's and iperf's requested rate is: a dropped client's unsent
//! schedule was asked for too. The verdict judges the clients that stayed by what their
//! schedules made due, and never says "kept" when any client was lost.

use super::{GeneratorVerdict, verdict as judge};
use crate::load::Arrivals;
use crate::report::LoadSchedule;

/// Sends a schedule whose next send is due at `next` asks for before `until`, without
/// drawing them: for fixed arrivals exactly as many as [`super::due_before`] counts; for
/// Poisson the expected count (the one at `next`, then one per mean gap, rounded down). For
/// the schedules that never ran: the rest of a dropped client's, a never-connected one's.
pub fn asked_before(arrivals: Arrivals, next: u64, until: u64) -> u64 {
    if next >= until {
        return 0;
    }
    let span = until - next;
    match arrivals {
        Arrivals::Fixed { interval_ns } => (span - 1) / interval_ns.max(1) + 1,
        Arrivals::Poisson { mean_ns } => 1 + span / mean_ns.max(1),
    }
}

/// The account of a run whose clients made `sent` sends and left `unsent` of the ones due
/// to them while connected; `cut` holds, for each client that was dropped (`dropped` of
/// them) or never connected (`failed`), the next send its schedule had due; the measured
/// window ends at `until`. Sums saturate (they cannot overflow in a real run).
pub fn account(
    arrivals: Arrivals,
    sent: u64,
    unsent: u64,
    cut: &[u64],
    until: u64,
    dropped: u64,
    failed: u64,
) -> LoadSchedule {
    let lost = cut.iter().fold(0u64, |a, &next| a.saturating_add(asked_before(arrivals, next, until)));
    LoadSchedule {
        asked: sent.saturating_add(unsent).saturating_add(lost),
        sent,
        unsent,
        lost,
        dropped_clients: dropped,
        failed_clients: failed,
    }
}

/// Whether the account names clients lost (dropped or never connected).
pub const fn lost_clients(s: &LoadSchedule) -> bool {
    s.dropped_clients > 0 || s.failed_clients > 0
}

/// The rate the scenario asked, per second over `secs` (the achieved rate's time base), and
/// the verdict: the clients that stayed are judged as [`super::verdict`] judges a sender
/// (the sends made against `sent + unsent`, with the threads' `busy` share); if they kept
/// their schedules but any client was dropped or never connected, the scenario's rate was
/// still not kept: [`GeneratorVerdict::ClientsLost`].
#[expect(clippy::cast_precision_loss, reason = "rates")]
pub fn verdict(s: &LoadSchedule, secs: f64, busy: f64) -> (f64, GeneratorVerdict) {
    let per_s = |n: u64| n as f64 / secs;
    let stayed = judge(Some(per_s(s.sent.saturating_add(s.unsent))), per_s(s.sent), busy);
    let v = if stayed == GeneratorVerdict::Kept && lost_clients(s) { GeneratorVerdict::ClientsLost } else { stayed };
    (per_s(s.asked), v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::due_before;
    use crate::rng::SplitMix64;

    #[test]
    fn a_fixed_schedule_asks_exactly_what_drawing_it_would() {
        let mut rng = SplitMix64::new(3);
        for interval_ns in [1, 7, 50, 1_000] {
            let fixed = Arrivals::Fixed { interval_ns };
            for next in [0, 1, 49, 50, 999] {
                for until in [0, 1, 50, 51, 100, 1_000, 1_001, 12_345] {
                    let drawn = due_before(fixed, &mut rng, next, until);
                    assert_eq!(asked_before(fixed, next, until), drawn, "{interval_ns} {next} {until}");
                }
            }
        }
        // the run's own example: 50 ms apart from a phase of 10 ms, until 2 s: 40 sends
        assert_eq!(asked_before(Arrivals::Fixed { interval_ns: 50_000_000 }, 10_000_000, 2_000_000_000), 40);
        assert_eq!(asked_before(Arrivals::Fixed { interval_ns: 0 }, 0, 3), 3, "a zero interval moves on by 1 ns");
    }

    #[test]
    fn a_poisson_schedule_asks_its_expected_count() {
        let p = Arrivals::Poisson { mean_ns: 1_000 };
        assert_eq!(asked_before(p, 0, 1), 1);
        assert_eq!(asked_before(p, 500, 10_500), 11);
        assert_eq!(asked_before(p, 10_500, 10_500), 0);
        // against the drawn counts of 200 seeds: the mean is within 1 %
        let drawn: u64 = (0..200).map(|s| due_before(p, &mut SplitMix64::new(s), 0, 1_000_000)).sum();
        #[expect(clippy::cast_precision_loss, reason = "a mean")]
        let mean = drawn as f64 / 200.0;
        assert!((mean / 1_001.0 - 1.0).abs() < 0.01, "{mean}");
    }

    #[test]
    fn the_account_adds_up_and_counts_each_cut_schedule_to_the_end_of_the_window() {
        let fixed = Arrivals::Fixed { interval_ns: 50 };
        // two cut schedules: one due next at 760 (5 sends before 1000), one at 1000 (none)
        let s = account(fixed, 120, 3, &[760, 1_000], 1_000, 1, 1);
        assert_eq!(
            s,
            LoadSchedule { asked: 128, sent: 120, unsent: 3, lost: 5, dropped_clients: 1, failed_clients: 1 }
        );
        assert_eq!(s.asked, s.sent + s.unsent + s.lost);
        let big = account(fixed, u64::MAX, 1, &[0], 1_000, 1, 0);
        assert_eq!(big.asked, u64::MAX, "saturates");
    }

    #[test]
    fn a_run_that_lost_clients_is_never_kept_and_asks_for_their_schedules() {
        let s = |sent, unsent, lost, dropped, failed| LoadSchedule {
            asked: sent + unsent + lost,
            sent,
            unsent,
            lost,
            dropped_clients: dropped,
            failed_clients: failed,
        };
        // every client stayed and every send due was made: kept, asked = achieved
        assert_eq!(verdict(&s(80, 0, 0, 0, 0), 2.0, 0.1), (40.0, GeneratorVerdict::Kept));
        // one send left at the end of 80: within the tolerance
        assert_eq!(verdict(&s(79, 1, 0, 0, 0), 2.0, 0.1).1, GeneratorVerdict::Kept);
        // 3 clients at 20/s for 2 s: one dropped after 5 sends (35 lost), one never connected
        // (40 lost), the third kept its 40: 45 of 120 sent, and the verdict names the loss
        assert_eq!(verdict(&s(45, 0, 75, 1, 1), 2.0, 0.1), (60.0, GeneratorVerdict::ClientsLost));
        // dropped right before the end, with nothing of its schedule left: still not kept
        assert_eq!(verdict(&s(80, 0, 0, 1, 0), 2.0, 0.1), (40.0, GeneratorVerdict::ClientsLost));
        // only a client that never connected (its 40 lost): not kept either
        assert_eq!(verdict(&s(80, 0, 40, 0, 1), 2.0, 0.1), (60.0, GeneratorVerdict::ClientsLost));
        // the clients that stayed missed too: the generator (busy) or its send path is why
        assert_eq!(verdict(&s(50, 30, 40, 1, 0), 2.0, 0.95).1, GeneratorVerdict::GeneratorLimited);
        assert_eq!(verdict(&s(50, 30, 40, 0, 1), 2.0, 0.2).1, GeneratorVerdict::SendPathLimited);
        // nothing asked (every schedule after the stop): nothing missed
        assert_eq!(verdict(&s(0, 0, 0, 0, 0), 1.0, 0.0), (0.0, GeneratorVerdict::Kept));
    }
}
