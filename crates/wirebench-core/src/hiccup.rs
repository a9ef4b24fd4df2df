//! The stall meter's arithmetic (jHiccup's method): a thread that asks to wake every
//! `interval` records how late each wake-up came. A host that never stalls wakes a few µs
//! late; a stalled VM, a busy CPU, a page-in or a stopped process shows as a late wake-up,
//! and whatever the measuring tool timed during that stall was delayed by the same platform.
//!
//! The thread sleeps to absolute due times (`start + k * interval`), so lateness does not
//! drift. A wake-up `L` late past due time `d` also missed the wake-ups due at `d + I`,
//! `d + 2I`, ... before it: each is recorded as `L - I`, `L - 2I`, ... while that is at
//! least `I`, exactly HdrHistogram's `record_correct` (coordinated-omission correction, as
//! jHiccup records with `recordValueWithExpectedInterval`), and the thread then sleeps to
//! the first due time after now. Every value, real or corrected, also lands in the
//! per-second series at the second of its due time, so a long stall shows in the seconds it
//! covered, and the series' counts add up to the histogram's count.
//!
//! [`verdict`] compares a run's latency with these stalls at one percentile; see there for
//! the rule. Nothing here reads a clock: the caller passes due and wake-up times.

pub mod waits;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::latency::{self, value_at_percentile};

/// The default interval: 1 ms, jHiccup's resolution.
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000;
/// Intervals a meter accepts: 10 µs to 1 s (every second then has at least one due time).
pub const MIN_INTERVAL_NS: u64 = 10_000;
/// See [`MIN_INTERVAL_NS`].
pub const MAX_INTERVAL_NS: u64 = 1_000_000_000;
/// Seconds of series a recorder reserves up front, so the first hour never allocates.
pub const RESERVED_SECONDS: usize = 3_600;
const SECOND_NS: u64 = 1_000_000_000;

/// The wake-ups a wake-up `late_ns` late missed at interval `interval_ns` (at least 1 ns), as
/// HdrHistogram's `record_correct` fills them in: the k-th (from 1) with value
/// `late_ns - k * interval_ns`, while that is at least the interval.
pub fn missed(late_ns: u64, interval_ns: u64) -> impl Iterator<Item = (u64, u64)> {
    (1u64..)
        .take_while(move |&k| late_ns >= interval_ns.saturating_mul(k + 1))
        .map(move |k| (k, late_ns - interval_ns * k))
}

/// One second of the series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiccupSecond {
    /// Seconds since the meter started (of the values' due times).
    pub at_s: u64,
    /// Values recorded for due times in this second (corrected ones included).
    pub count: u64,
    /// The latest wake-up, ns (0 when none was due).
    pub max_ns: u64,
    /// The 99th percentile of the second's values, ns.
    pub p99_ns: u64,
}

/// Records wake-up lateness. Allocates only in [`Self::new`] (and once an hour of series
/// has filled its reserve, one push per second).
#[derive(Debug, Clone)]
pub struct HiccupRecorder {
    interval_ns: u64,
    start_ns: u64,
    hist: Histogram<u64>,
    second: Histogram<u64>,
    current: HiccupSecond,
    seconds: Vec<HiccupSecond>,
    wakeups: u64,
    corrected: u64,
}

impl HiccupRecorder {
    /// A recorder for wake-ups due every `interval_ns` from `start_ns` (the first due time
    /// is `start_ns + interval_ns`). `interval_ns` must lie within
    /// [`MIN_INTERVAL_NS`]..=[`MAX_INTERVAL_NS`] (callers validate it; it is clamped here).
    pub fn new(interval_ns: u64, start_ns: u64) -> Self {
        Self {
            interval_ns: interval_ns.clamp(MIN_INTERVAL_NS, MAX_INTERVAL_NS),
            start_ns,
            hist: latency::histogram(),
            second: latency::histogram(),
            current: HiccupSecond::default(),
            seconds: Vec::with_capacity(RESERVED_SECONDS),
            wakeups: 0,
            corrected: 0,
        }
    }

    /// The interval, ns.
    pub const fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The first due time.
    pub const fn first_due(&self) -> u64 {
        self.start_ns + self.interval_ns
    }

    /// One wake-up, due at `due_ns`, that happened at `now_ns`. Records its lateness and the
    /// wake-ups it missed, and returns the next due time (the first after `now_ns`).
    pub fn on_wake(&mut self, due_ns: u64, now_ns: u64) -> u64 {
        let i = self.interval_ns;
        let late = now_ns.saturating_sub(due_ns);
        self.wakeups += 1;
        self.put(due_ns, late);
        for (k, value) in missed(late, i) {
            self.corrected += 1;
            self.put(due_ns + i * k, value);
        }
        due_ns + i * (late / i + 1)
    }

    fn put(&mut self, due_ns: u64, late_ns: u64) {
        let at_s = due_ns.saturating_sub(self.start_ns) / SECOND_NS;
        while at_s > self.current.at_s {
            self.close_second();
        }
        latency::record(&mut self.hist, late_ns);
        latency::record(&mut self.second, late_ns);
        self.current.count += 1;
        self.current.max_ns = self.current.max_ns.max(late_ns);
    }

    fn close_second(&mut self) {
        self.current.p99_ns = value_at_percentile(&self.second, 99.0);
        self.seconds.push(self.current);
        self.second.reset();
        self.current = HiccupSecond { at_s: self.current.at_s + 1, ..HiccupSecond::default() };
    }

    /// Every value so far (wake-ups and the corrected ones).
    pub const fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Wake-ups recorded (without the corrected values).
    pub const fn wakeups(&self) -> u64 {
        self.wakeups
    }

    /// Ends the series (the last, partial second included when it holds values).
    pub fn finish(mut self) -> Hiccups {
        if self.current.count > 0 {
            self.close_second();
        }
        Hiccups {
            interval_ns: self.interval_ns,
            wakeups: self.wakeups,
            corrected: self.corrected,
            histogram: self.hist,
            seconds: self.seconds,
        }
    }
}

/// What a meter recorded.
#[derive(Debug, Clone)]
pub struct Hiccups {
    /// The interval, ns.
    pub interval_ns: u64,
    /// Wake-ups.
    pub wakeups: u64,
    /// Values added for wake-ups a stall made the thread miss.
    pub corrected: u64,
    /// Lateness, ns: `wakeups + corrected` values.
    pub histogram: Histogram<u64>,
    /// Per second.
    pub seconds: Vec<HiccupSecond>,
}

/// The meter's own cost as a share of one core: its thread's CPU time `cpu_ns` over the
/// time its `values` (wake-ups and corrected ones, one interval each) covered.
#[expect(clippy::cast_precision_loss, reason = "a share")]
pub fn cost_share(cpu_ns: u64, values: u64, interval_ns: u64) -> f64 {
    let span = values.saturating_mul(interval_ns);
    if span == 0 { 0.0 } else { cpu_ns as f64 / span as f64 }
}

/// Whose a latency figure is, by [`verdict`]'s rule. Each reading is one band of the ratio
/// of the figure `X` to the host's own stalls `Y` at the same percentile, so words built on
/// it can never claim more than the two figures show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    /// `X <= Y`: the figure is within the host's own stalls: this host.
    Within,
    /// `Y < X <= 2 Y`: at most twice the host's own stalls: mostly this host.
    Mostly,
    /// `2 Y < X <= 10 Y`: this host accounts for part of it.
    Partly,
    /// `X > 10 Y`: the network or the far end, not this host.
    Network,
}

/// A latency figure set against the platform's own stalls at the same percentile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The percentile compared (99.9, or 99 for runs too short for 99.9).
    pub p: f64,
    /// The run's latency at `p`, ns.
    pub latency_ns: u64,
    /// The stall meter's lateness at `p`, ns.
    pub hiccup_ns: u64,
    /// The reading.
    pub blame: Blame,
}

/// The rule: compare the run's latency `X` and the meter's lateness `Y` at p99.9 (p99 when
/// either side has fewer than 1,000 values, none below 100). `X <= Y`: the figure is within
/// the platform's own stalls ([`Blame::Within`]); `X <= 2 Y`: mostly ([`Blame::Mostly`]);
/// `X <= 10 Y`: partly ([`Blame::Partly`]); else [`Blame::Network`]. A host whose own
/// wake-ups are half as late as a round trip at the same rank cannot show that round trip's
/// network share, whatever the network did; one whose wake-ups are ten times shorter did
/// not make it.
pub fn verdict(latency: &Histogram<u64>, hiccup: &Histogram<u64>) -> Option<Verdict> {
    let n = latency.len().min(hiccup.len());
    let p = if n >= 1_000 {
        99.9
    } else if n >= 100 {
        99.0
    } else {
        return None;
    };
    let (x, y) = (value_at_percentile(latency, p), value_at_percentile(hiccup, p));
    let blame = if x <= y {
        Blame::Within
    } else if x <= y.saturating_mul(2) {
        Blame::Mostly
    } else if x <= y.saturating_mul(10) {
        Blame::Partly
    } else {
        Blame::Network
    };
    Some(Verdict { p, latency_ns: x, hiccup_ns: y, blame })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_meters_cost_is_its_cpu_over_the_time_its_values_cover() {
        // 18 ms of CPU over 1,000 wake-ups of 1 ms: 1.8 % of a core
        assert!((cost_share(18 * MS, 1_000, MS) - 0.018).abs() < 1e-12);
        // a stall's corrected values count the time it covered too
        assert!((cost_share(18 * MS, 2_000, MS) - 0.009).abs() < 1e-12);
        assert!(cost_share(5, 0, MS).abs() < f64::EPSILON);
    }

    fn series_total(h: &Hiccups) -> u64 {
        h.seconds.iter().map(|s| s.count).sum()
    }

    #[test]
    fn punctual_wakeups_are_recorded_once_each() {
        let mut r = HiccupRecorder::new(MS, 0);
        let mut due = r.first_due();
        for _ in 0..2_500 {
            let next = r.on_wake(due, due + 5_000);
            assert_eq!(next, due + MS);
            due = next;
        }
        let h = r.finish();
        assert_eq!((h.wakeups, h.corrected, h.histogram.len()), (2_500, 0, 2_500));
        assert_eq!(h.histogram.max(), h.histogram.highest_equivalent(5_000));
        // due times 1 ms .. 2500 ms: seconds 0 (999 of them), 1 (1000), 2 (501)
        let counts: Vec<u64> = h.seconds.iter().map(|s| s.count).collect();
        assert_eq!(counts, [999, 1_000, 501]);
        assert_eq!(series_total(&h), h.histogram.len());
    }

    #[test]
    fn a_stall_is_corrected_as_hdrhistogram_record_correct_does() {
        let mut r = HiccupRecorder::new(MS, 0);
        let due = r.first_due();
        // stopped for 200 ms: the wake-up comes 200.3 ms late
        let late = 200 * MS + 300_000;
        let next = r.on_wake(due, due + late);
        assert_eq!(next, due + 201 * MS, "the first due time after the wake-up");
        let mut oracle = latency::histogram();
        oracle.record_correct(late, MS).unwrap();
        let h = r.finish();
        assert_eq!(h.histogram, oracle);
        assert_eq!((h.wakeups, h.corrected), (1, 199));
        assert_eq!(h.histogram.len(), 200);
        assert_eq!(h.histogram.min(), h.histogram.lowest_equivalent(MS + 300_000));
        assert_eq!(series_total(&h), 200);
    }

    #[test]
    fn a_long_stall_fills_the_seconds_it_covered() {
        let mut r = HiccupRecorder::new(MS, 0);
        let due = 500 * MS;
        r.on_wake(due, due + 2_600 * MS);
        let h = r.finish();
        // due times 500 ms .. 3099 ms (2600 values): seconds 0..=3
        let rows: Vec<(u64, u64)> = h.seconds.iter().map(|s| (s.at_s, s.count)).collect();
        assert_eq!(rows, [(0, 500), (1, 1_000), (2, 1_000), (3, 100)]);
        assert_eq!(h.seconds[0].max_ns, 2_600 * MS, "the real wake-up is the latest");
        assert_eq!(series_total(&h), h.histogram.len());
        let max_of_seconds = h.seconds.iter().map(|s| s.max_ns).max().unwrap();
        assert_eq!(h.histogram.highest_equivalent(max_of_seconds), h.histogram.max());
    }

    #[test]
    fn seconds_without_due_times_are_kept_as_empty_rows() {
        let mut r = HiccupRecorder::new(MAX_INTERVAL_NS, 0);
        let d1 = r.first_due();
        let d2 = r.on_wake(d1, d1 + 10);
        assert_eq!(d2, 2 * SECOND_NS);
        r.on_wake(2 * SECOND_NS + SECOND_NS, 3 * SECOND_NS + 10);
        let h = r.finish();
        let rows: Vec<(u64, u64)> = h.seconds.iter().map(|s| (s.at_s, s.count)).collect();
        assert_eq!(rows, [(0, 0), (1, 1), (2, 0), (3, 1)]);
    }

    #[test]
    fn wakeups_count_the_real_wakeups_not_the_corrected_values() {
        let mut r = HiccupRecorder::new(MS, 0);
        assert_eq!(r.wakeups(), 0);
        let mut due = r.first_due();
        // one punctual wake-up, one 5.5 ms late (4 corrected values), one punctual
        for late in [0, 5 * MS + MS / 2, 0] {
            due = r.on_wake(due, due + late);
        }
        assert_eq!(r.wakeups(), 3);
        assert_eq!(r.histogram().len(), 3 + 4);
        assert_eq!(r.finish().wakeups, 3);
    }

    #[test]
    fn a_meter_finished_before_its_first_wakeup_has_no_seconds() {
        let h = HiccupRecorder::new(MS, 0).finish();
        assert!(h.seconds.is_empty(), "{:?}", h.seconds);
        assert_eq!((h.wakeups, h.corrected, h.histogram.len()), (0, 0, 0));
    }

    #[test]
    fn intervals_are_clamped_to_the_documented_range() {
        assert_eq!(HiccupRecorder::new(1, 0).interval_ns(), MIN_INTERVAL_NS);
        assert_eq!(HiccupRecorder::new(u64::MAX, 0).interval_ns(), MAX_INTERVAL_NS);
    }

    fn hist_of(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = latency::histogram();
        for v in values {
            latency::record(&mut h, v);
        }
        h
    }

    #[test]
    fn the_verdict_follows_the_documented_rule() {
        // values below 2048 are exact: latency 1..=1000 ns has p99.9 = 999 ns (rank 999)
        let lat = hist_of(1..=1_000);
        // 998 values of 1 ns and two of y: p99.9 (rank 999) is y
        let stalls = |y: u64| hist_of(std::iter::repeat_n(1, 998).chain([y, y]));
        let at = |y: u64| verdict(&lat, &stalls(y)).unwrap();
        let v = at(999);
        assert!((v.p - 99.9).abs() < 1e-9);
        assert_eq!((v.latency_ns, v.hiccup_ns, v.blame), (999, 999, Blame::Within), "X = Y: within");
        assert_eq!(at(5_000).blame, Blame::Within);
        assert_eq!(at(998).blame, Blame::Mostly, "X > Y: no longer within");
        assert_eq!(at(500).blame, Blame::Mostly, "999 <= 2 x 500: at most twice");
        assert_eq!(at(499).blame, Blame::Partly, "999 > 2 x 499");
        assert_eq!(at(100).blame, Blame::Partly, "999 <= 10 x 100: at most ten times");
        assert_eq!(at(99).blame, Blame::Network, "999 > 10 x 99");
        assert_eq!(at(0).blame, Blame::Network, "no stalls at all");
    }

    #[test]
    fn short_runs_compare_at_p99_or_not_at_all() {
        let small = hist_of(1..=500);
        let big = hist_of(1..=5_000);
        assert!((verdict(&small, &big).unwrap().p - 99.0).abs() < 1e-9);
        assert!((verdict(&big, &small).unwrap().p - 99.0).abs() < 1e-9);
        assert!(verdict(&hist_of(1..=99), &big).is_none());
    }
}
