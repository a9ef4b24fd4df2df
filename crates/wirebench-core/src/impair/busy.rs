//! Active time: when a direction of the proxy carried traffic, so a rate is bytes over
//! active time, not over a wall-clock span with idle gaps in it (two 10-second transfers
//! 80 seconds apart through a 60.76 Mbit/s limit read 6.23 Mbit/s as first-to-last).
//!
//! Events (releases or arrivals) closer than [`IDLE_GAP_NS`] belong to one busy period and
//! the time between them counts; a longer silence is idle. A rate over a period also leaves
//! out the bytes of the period's first event: its span starts once they had gone. Periods
//! from threads that ran at the same time (TCP connections) merge as a union, so
//! overlapping traffic is not counted twice.
//!
//! Memory is bounded: past [`MAX_PERIODS`] periods the oldest are folded into totals; an
//! event that arrives later than everything folded (a straggling flush) still counts, and
//! one from before the fold is counted only where it extends past it.

/// A silence longer than this ends a busy period.
pub const IDLE_GAP_NS: u64 = 100_000_000;
/// Busy periods kept apart before the oldest are folded into totals.
pub const MAX_PERIODS: usize = 64;

/// One busy period: `[start, end]`, and the bytes of its first event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Period {
    start: u64,
    end: u64,
    first_bytes: u64,
}

/// Busy periods of one direction (see the module comment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Busy {
    /// Sorted by start; any two are more than [`IDLE_GAP_NS`] apart.
    periods: Vec<Period>,
    folded_ns: u64,
    folded_first_bytes: u64,
    /// Everything up to here is folded.
    folded_until: Option<u64>,
}

impl Busy {
    /// An event of `bytes` at `at_ns`. The usual case (one thread, time going forward)
    /// only moves the last period's end.
    #[inline]
    pub fn on_event(&mut self, at_ns: u64, bytes: u64) {
        if let Some(last) = self.periods.last_mut()
            && at_ns >= last.end
            && at_ns - last.end <= IDLE_GAP_NS
        {
            last.end = at_ns;
            return;
        }
        self.add(Period { start: at_ns, end: at_ns, first_bytes: bytes });
    }

    /// Adds `other`'s periods (another interval of the same thread, or another thread).
    pub fn merge(&mut self, other: &Self) {
        self.folded_ns += other.folded_ns;
        self.folded_first_bytes += other.folded_first_bytes;
        self.folded_until = self.folded_until.max(other.folded_until);
        for p in &other.periods {
            self.add(*p);
        }
    }

    /// Inserts `p`, joining the periods it overlaps or comes within the gap of.
    fn add(&mut self, mut p: Period) {
        if let Some(f) = self.folded_until
            && p.start <= f
        {
            if p.end <= f {
                return; // all of it inside what is folded: counted, or lost to the fold
            }
            p = Period { start: f, end: p.end, first_bytes: 0 };
        }
        let near = |q: &Period, p: &Period| {
            q.start <= p.end.saturating_add(IDLE_GAP_NS) && p.start <= q.end.saturating_add(IDLE_GAP_NS)
        };
        let first = self.periods.partition_point(|q| q.end.saturating_add(IDLE_GAP_NS) < p.start);
        let mut last = first;
        while last < self.periods.len() && near(&self.periods[last], &p) {
            let q = self.periods[last];
            // The later-starting of two joined periods is now covered: its first bytes count.
            p = if q.start < p.start {
                Period { start: q.start, end: p.end.max(q.end), first_bytes: q.first_bytes }
            } else {
                Period { start: p.start, end: p.end.max(q.end), first_bytes: p.first_bytes }
            };
            last += 1;
        }
        self.periods.splice(first..last, [p]);
        if self.periods.len() > MAX_PERIODS {
            let old = self.periods.remove(0);
            self.folded_ns += old.end - old.start;
            self.folded_first_bytes += old.first_bytes;
            // (never back: a merge may have folded further than this period)
            self.folded_until = self.folded_until.max(Some(old.end));
        }
    }

    /// Busy time, ns.
    pub fn active_ns(&self) -> u64 {
        self.folded_ns + self.periods.iter().map(|p| p.end - p.start).sum::<u64>()
    }

    /// Bytes of each period's first event (not inside any span).
    pub fn uncovered_bytes(&self) -> u64 {
        self.folded_first_bytes + self.periods.iter().map(|p| p.first_bytes).sum::<u64>()
    }

    /// Bits per second of `bytes` (every event's) over the busy time; 0 with no busy time.
    pub fn bps(&self, bytes: u64) -> f64 {
        let ns = self.active_ns();
        #[expect(clippy::cast_precision_loss, reason = "rates")]
        if ns == 0 { 0.0 } else { (bytes.saturating_sub(self.uncovered_bytes()) * 8) as f64 * 1e9 / ns as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;

    /// 1000-byte events every `gap` ns from `start`, `n` of them.
    fn burst(b: &mut Busy, start: u64, gap: u64, n: u64) -> u64 {
        for i in 0..n {
            b.on_event(start + i * gap, 1_000);
        }
        n * 1_000
    }

    #[test]
    fn two_transfers_far_apart_are_rated_over_their_own_time() {
        // 8 Mbit/s (1000 B every ms) for 10 s, 80 s of silence, 10 s more.
        let mut b = Busy::default();
        let bytes = burst(&mut b, 0, 1_000_000, 10_000) + burst(&mut b, 90 * S, 1_000_000, 10_000);
        assert_eq!(b.active_ns(), 2 * 9_999_000_000);
        assert_eq!(b.uncovered_bytes(), 2_000);
        assert!((b.bps(bytes) - 8e6).abs() < 1.0, "{}", b.bps(bytes));
    }

    #[test]
    fn short_silences_count_as_active() {
        let mut b = Busy::default();
        b.on_event(0, 100);
        b.on_event(IDLE_GAP_NS, 100);
        b.on_event(2 * IDLE_GAP_NS + 1, 100);
        assert_eq!((b.active_ns(), b.uncovered_bytes()), (IDLE_GAP_NS, 200));
    }

    #[test]
    fn overlapping_threads_are_a_union_and_intervals_join() {
        let (mut a, mut b) = (Busy::default(), Busy::default());
        burst(&mut a, 0, 1_000_000, 1_001); // 0 .. 1 s
        burst(&mut b, S / 2, 1_000_000, 1_001); // 0.5 .. 1.5 s
        a.merge(&b);
        assert_eq!((a.active_ns(), a.uncovered_bytes()), (3 * S / 2, 1_000));
        // The same thread's next interval, 50 ms after the last event: one period.
        let mut next = Busy::default();
        burst(&mut next, 3 * S / 2 + 50_000_000, 1_000_000, 11);
        a.merge(&next);
        assert_eq!((a.active_ns(), a.uncovered_bytes()), (3 * S / 2 + 60_000_000, 1_000));
    }

    #[test]
    fn memory_is_bounded_and_folded_time_still_counts() {
        let mut b = Busy::default();
        for i in 0..1_000u64 {
            burst(&mut b, i * S, 1_000_000, 11); // 10 ms busy each second
        }
        assert!(b.periods.len() <= MAX_PERIODS);
        assert_eq!((b.active_ns(), b.uncovered_bytes()), (1_000 * 10_000_000, 1_000_000));
        // A straggler from before the fold adds nothing it has not already counted.
        b.on_event(5 * S, 1_000);
        assert_eq!(b.active_ns(), 1_000 * 10_000_000);
    }

    /// One thread's events at the same ns: the first recorded is the period's first event.
    #[test]
    fn the_first_of_events_at_one_instant_is_the_first_recorded() {
        let mut b = Busy::default();
        b.on_event(S, 100);
        b.on_event(S, 300);
        b.on_event(S + 1_000, 500);
        assert_eq!((b.active_ns(), b.uncovered_bytes()), (1_000, 100));
    }

    /// Periods of two threads exactly `IDLE_GAP_NS` apart are one period, as on one thread.
    #[test]
    fn periods_merged_exactly_the_gap_apart_join() {
        let (mut a, mut b) = (Busy::default(), Busy::default());
        a.on_event(S, 100);
        a.on_event(S + 10, 100);
        b.on_event(S + 10 + IDLE_GAP_NS, 100);
        a.merge(&b);
        assert_eq!((a.active_ns(), a.uncovered_bytes()), (10 + IDLE_GAP_NS, 100));
        // and the other way round
        let (mut c, mut d) = (Busy::default(), Busy::default());
        c.on_event(S + 10 + IDLE_GAP_NS, 100);
        d.on_event(S, 100);
        d.on_event(S + 10, 100);
        c.merge(&d);
        assert_eq!((c.active_ns(), c.uncovered_bytes()), (10 + IDLE_GAP_NS, 100));
    }

    /// MAX_PERIODS periods are kept apart; the one after folds the oldest.
    #[test]
    fn the_fold_starts_past_max_periods() {
        let mut b = Busy::default();
        for i in 0..MAX_PERIODS as u64 {
            burst(&mut b, i * S, 1_000_000, 11);
        }
        assert_eq!((b.periods.len(), b.folded_until), (MAX_PERIODS, None));
        burst(&mut b, MAX_PERIODS as u64 * S, 1_000_000, 11);
        assert_eq!((b.periods.len(), b.folded_until), (MAX_PERIODS, Some(10_000_000)));
    }

    /// 100 periods of 10 ms, one a second from `from`: past MAX_PERIODS, so the first are
    /// folded.
    fn folded(from: u64) -> Busy {
        let mut b = Busy::default();
        for i in 0..100 {
            burst(&mut b, from + i * S, 1_000_000, 11);
        }
        b
    }

    /// A fold after a merge keeps the merged-in fold: events inside a period the other
    /// tally folded are counted once, as they are in that tally alone.
    #[test]
    fn a_fold_after_a_merge_does_not_move_the_fold_back() {
        let (mut a, mut b) = (folded(0), folded(1000 * S));
        a.merge(&b);
        let before = (a.active_ns(), a.uncovered_bytes());
        // inside the eleventh of b's periods, which b folded
        a.on_event(1010 * S + 5_000_000, 1_000);
        a.on_event(1010 * S + 20_000_000, 1_000);
        assert_eq!((a.active_ns(), a.uncovered_bytes()), before);
        let b_before = (b.active_ns(), b.uncovered_bytes());
        b.on_event(1010 * S + 5_000_000, 1_000);
        b.on_event(1010 * S + 20_000_000, 1_000);
        assert_eq!((b.active_ns(), b.uncovered_bytes()), b_before, "as in b alone");
    }

    /// Folded totals travel with a merge: a thread's folded time and first bytes still
    /// count once merged into another thread's (or an empty) tally.
    #[test]
    fn a_merge_keeps_folded_totals() {
        let mut all = Busy::default();
        all.merge(&folded(0));
        assert_eq!((all.active_ns(), all.uncovered_bytes()), (100 * 10_000_000, 100_000));
        let mut two = folded(0);
        two.merge(&folded(1_000 * S));
        assert_eq!((two.active_ns(), two.uncovered_bytes()), (200 * 10_000_000, 200_000));
    }

    proptest! {
        /// Whatever the order and split, the busy time equals a direct computation over
        /// the sorted events (fewer periods than the fold limit).
        #[test]
        fn merge_order_does_not_matter(
            mut events in proptest::collection::vec(0u64..5_000_000_000, 1..200),
            split in 0usize..200,
        ) {
            let cut = split.min(events.len());
            let (mut a, mut b) = (Busy::default(), Busy::default());
            for &e in &events[..cut] { a.on_event(e, 1); }
            for &e in &events[cut..] { b.on_event(e, 1); }
            b.merge(&a);
            events.sort_unstable();
            let mut want = 0;
            let mut periods = 1;
            for w in events.windows(2) {
                if w[1] - w[0] <= IDLE_GAP_NS { want += w[1] - w[0] } else { periods += 1 }
            }
            prop_assert_eq!(b.active_ns(), want);
            prop_assert_eq!(b.uncovered_bytes(), periods);
        }
    }
}
