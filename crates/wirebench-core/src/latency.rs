//! Latency recording (STYLE C8): integer nanoseconds in HdrHistogram with 3 significant
//! digits, fixed bounds so recording never allocates, warm-up kept apart, and every view
//! labelled with what it measures. Every percentile of every view comes from
//! [`value_at_percentile`] (HdrHistogram Java's definition, see [`percentile`]).

pub mod kernel;
pub mod patience;
pub mod percentile;
pub mod runs;

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use self::kernel::{KernelObs, KernelStats, StackScope};
pub use self::patience::Patience;
pub use self::percentile::{Step, distribution, value_at_percentile, values_at_percentiles};
pub use self::runs::LossRuns;
use crate::clocksync::OffsetFilter;

/// Sequence numbers a responder's windows remember: the duplicate window of the probe loop
/// and the loss-run window (a reply older than this is counted late).
pub const SEQ_WINDOW: usize = 1 << 16;

/// The largest latency a histogram holds: one hour. Larger values are clamped to it and
/// counted, never dropped silently.
pub const MAX_TRACKABLE_NS: u64 = 3_600_000_000_000;
/// Significant digits of every latency histogram.
pub const SIGFIG: u8 = 3;

/// A latency histogram in ns: 1 ns to one hour, 3 significant digits, no auto-resize (so
/// `record` never allocates).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, SIGFIG).expect("constant bounds are valid")
}

/// Records `ns` into `h`, clamping to the histogram's range; returns false when clamped.
pub fn record(h: &mut Histogram<u64>, ns: u64) -> bool {
    let v = ns.clamp(1, MAX_TRACKABLE_NS);
    // Cannot fail: v is inside the bounds the histogram was built with.
    let _ = h.record(v);
    v == ns
}

/// The numbers a summary line shows, computed from a histogram (never from raw samples).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Smallest sample, ns (0 when empty).
    pub min_ns: u64,
    /// Largest sample, ns.
    pub max_ns: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Standard deviation, ns.
    pub stddev_ns: f64,
    /// Requested percentiles with their values, ns.
    pub percentiles: Vec<Percentile>,
}

/// One percentile and its value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// In percent, e.g. 99.99.
    pub p: f64,
    /// Value at that percentile, ns ([`value_at_percentile`]).
    pub ns: u64,
}

/// The percentiles a summary shows unless asked for others.
pub const DEFAULT_PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

impl Summary {
    /// Summarises `h` at the percentiles `ps` (each in 0..=100).
    pub fn of(h: &Histogram<u64>, ps: &[f64]) -> Self {
        let empty = h.is_empty();
        Self {
            count: h.len(),
            min_ns: if empty { 0 } else { h.min() },
            max_ns: if empty { 0 } else { h.max() },
            mean_ns: if empty { 0.0 } else { h.mean() },
            stddev_ns: if empty { 0.0 } else { h.stdev() },
            percentiles: ps.iter().zip(values_at_percentiles(h, ps)).map(|(&p, ns)| Percentile { p, ns }).collect(),
        }
    }

    /// The value at percentile `p` if it was computed.
    pub fn at(&self, p: f64) -> Option<u64> {
        self.percentiles.iter().find(|q| (q.p - p).abs() < 1e-9).map(|q| q.ns)
    }
}

/// One histogram of an interval log (`--hlog`): when the interval began (relative to the
/// run's start), how long it lasted, and the values recorded in it (ns).
#[derive(Debug, Clone)]
pub struct Interval {
    /// Start, relative to the run's start.
    pub start: Duration,
    /// Length.
    pub length: Duration,
    /// Values recorded in it (ns).
    pub histogram: Histogram<u64>,
}

/// Which part of a run a probe belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Warm-up: recorded apart, excluded from the results.
    Warmup,
    /// Measured.
    Measure,
}

/// One reply as the pinger saw it. Times are the pinger's monotonic ns except `wall_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyObs {
    /// Sequence number.
    pub seq: u64,
    /// Which phase the probe was sent in.
    pub phase: Phase,
    /// Actual send time (echoed from the probe).
    pub t1: u64,
    /// Receive time.
    pub t4: u64,
    /// Intended send time (open loop only).
    pub intended: Option<u64>,
    /// Responder's receive and send times, its wall clock (full form only).
    pub responder: Option<(u64, u64)>,
    /// The pinger's wall clock minus its monotonic clock, to put t1 and t4 on the wall
    /// clock for the offset estimate.
    pub wall_minus_mono: i64,
    /// Kernel timestamps of the probe and the reply, when the transport has them.
    pub kernel: Option<KernelObs>,
}

/// What the accounting made of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyVerdict {
    /// Recorded; the value recorded in the main view, ns.
    OnTime {
        /// Round trip as recorded (from the intended send in open loop).
        rtt_ns: u64,
    },
    /// Arrived after its timeout: counted late (and lost), not recorded as latency.
    Late,
    /// Answered before: counted, not recorded.
    Duplicate,
}

/// Everything measured about one responder. Histograms are allocated once here, so the
/// per-reply path ([`ResponderStats::on_reply`]) never allocates.
#[derive(Debug, Clone)]
pub struct ResponderStats {
    /// Round trip: from the intended send in open loop (CO-corrected), from the actual send
    /// in closed loop.
    pub rtt: Histogram<u64>,
    /// Open loop only: round trip from the actual send (the uncorrected view).
    pub rtt_uncorrected: Option<Histogram<u64>>,
    /// Warm-up round trips (same view as `rtt`).
    pub warmup: Histogram<u64>,
    /// Full form only: round trip minus the responder's dwell time (t3 - t2).
    pub network: Histogram<u64>,
    /// Full form only: the responder's dwell time.
    pub dwell: Histogram<u64>,
    /// Full form only: clock offset and one-way delays.
    pub offset: OffsetFilter,
    /// Measured replies that arrived within the timeout.
    pub received: u64,
    /// Measured replies that arrived after their timeout.
    pub late: u64,
    /// Replies to a probe already answered.
    pub duplicates: u64,
    /// Values outside the histogram range (clamped) or with impossible timestamps.
    pub clamped: u64,
    /// The first measured sequence number this responder could have answered: probes sent
    /// before it was discovered do not count as its losses.
    pub first_seq: u64,
    /// Warm-up replies within the timeout.
    pub warmup_received: u64,
    /// Runs of consecutive lost measured probes.
    pub runs: LossRuns,
    /// Measured replies split by kernel timestamps (empty without them).
    pub kernel: KernelStats,
}

impl ResponderStats {
    /// Empty stats; `open_loop` adds the uncorrected view.
    pub fn new(open_loop: bool, first_seq: u64) -> Self {
        Self {
            rtt: histogram(),
            rtt_uncorrected: open_loop.then(histogram),
            warmup: histogram(),
            network: histogram(),
            dwell: histogram(),
            offset: OffsetFilter::default(),
            received: 0,
            late: 0,
            duplicates: 0,
            clamped: 0,
            first_seq,
            warmup_received: 0,
            runs: LossRuns::new(SEQ_WINDOW, first_seq),
            kernel: KernelStats::default(),
        }
    }

    /// The measurement begins with probe `seq`: loss runs count from there (or from this
    /// responder's discovery, if later).
    pub fn begin_measure(&mut self, seq: u64) {
        self.runs.restart(self.first_seq.max(seq));
    }

    /// The measurement ended after `end` probes (sequence numbers below `end`), once the last
    /// one's timeout passed: judges the loss runs to the end.
    pub fn finish(&mut self, end: u64) {
        self.runs.finish(end);
    }

    /// Accounts one reply that is new for this responder (duplicates are screened by the
    /// caller's `SeqWindow` and passed to [`Self::on_duplicate`]). `timeout_ns` decides late.
    pub fn on_reply(&mut self, r: &ReplyObs, timeout_ns: u64) -> ReplyVerdict {
        let actual = r.t4.saturating_sub(r.t1);
        if actual > timeout_ns {
            if r.phase == Phase::Measure {
                self.late += 1;
            }
            return ReplyVerdict::Late;
        }
        let from = r.intended.unwrap_or(r.t1);
        let rtt = r.t4.saturating_sub(from);
        let mut ok = true;
        match r.phase {
            Phase::Warmup => {
                self.warmup_received += 1;
                ok &= record(&mut self.warmup, rtt);
            }
            Phase::Measure => {
                self.received += 1;
                self.runs.on_time(r.seq);
                ok &= record(&mut self.rtt, rtt);
                if let Some(h) = self.rtt_uncorrected.as_mut() {
                    ok &= record(h, actual);
                }
            }
        }
        let dwell = r.responder.map(|(t2, t3)| t3.saturating_sub(t2));
        // The kernel's send and receive times, where they passed their checks, replace the
        // application's in the offset estimate (a tighter bound: no wake-up in δ).
        let (mut ktx, mut krx) = (None, None);
        if let (Some(k), Phase::Measure) = (&r.kernel, r.phase) {
            (ktx, krx) = self.kernel.on_reply(r.t1, r.t4, dwell, k);
        }
        if let (Some((t2, t3)), Some(dwell)) = (r.responder, dwell) {
            if r.phase == Phase::Measure {
                ok &= record(&mut self.dwell, dwell);
                ok &= record(&mut self.network, actual.saturating_sub(dwell));
            }
            let t1w = ktx.map_or_else(|| i128::from(r.t1) + i128::from(r.wall_minus_mono), i128::from);
            let t4w = krx.map_or_else(|| i128::from(r.t4) + i128::from(r.wall_minus_mono), i128::from);
            ok &= self.offset.on_sample(t1w, i128::from(t2), i128::from(t3), t4w, r.phase == Phase::Measure);
        }
        if !ok {
            self.clamped += 1;
        }
        ReplyVerdict::OnTime { rtt_ns: rtt }
    }

    /// Counts a duplicate reply.
    pub fn on_duplicate(&mut self) {
        self.duplicates += 1;
    }

    /// Probes this responder lost: measured probes sent since it was discovered that it did
    /// not answer within the timeout (late replies included, as they missed it too).
    pub fn lost(&self, measured_sent: u64, measure_start_seq: u64) -> u64 {
        let first = self.first_seq.max(measure_start_seq);
        let eligible = measured_sent.saturating_sub(first - measure_start_seq);
        eligible.saturating_sub(self.received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(seq: u64, t1: u64, t4: u64, intended: Option<u64>) -> ReplyObs {
        ReplyObs { seq, phase: Phase::Measure, t1, t4, intended, responder: None, wall_minus_mono: 0, kernel: None }
    }

    #[test]
    fn summary_uses_the_one_percentile_definition() {
        let mut h = histogram();
        for v in 1..=10_000u64 {
            record(&mut h, v * 1000);
        }
        let s = Summary::of(&h, &[50.0, 99.0, 99.9, 99.99]);
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min_ns, h.min());
        assert_eq!(s.max_ns, h.max());
        for p in [50.0, 99.0, 99.9, 99.99] {
            assert_eq!(s.at(p), Some(value_at_percentile(&h, p)), "p{p}");
        }
        // 1..=1000 ns are recorded exactly: p99.9 is rank 999, not the maximum
        let mut exact = histogram();
        for v in 1..=1_000u64 {
            record(&mut exact, v);
        }
        assert_eq!(Summary::of(&exact, &[99.9]).at(99.9), Some(999));
        assert!(s.at(50.0).unwrap().abs_diff(5_000_000) <= 5_000);
        assert!((s.mean_ns - 5_000_500.0).abs() / 5_000_500.0 < 1e-3);
        assert!(Summary::of(&histogram(), &[50.0]).at(50.0) == Some(0));
    }

    #[test]
    fn mean_and_standard_deviation_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9 (exact below 2048): mean 5, population sd 2.
        let mut h = histogram();
        for v in [2, 4, 4, 4, 5, 5, 7, 9] {
            record(&mut h, v);
        }
        let s = Summary::of(&h, &[]);
        assert_eq!((s.count, s.min_ns, s.max_ns), (8, 2, 9));
        assert!((s.mean_ns - 5.0).abs() < 1e-12, "{}", s.mean_ns);
        assert!((s.stddev_ns - 2.0).abs() < 1e-12, "{}", s.stddev_ns);
        let empty = Summary::of(&histogram(), &[]);
        assert_eq!((empty.mean_ns, empty.stddev_ns), (0.0, 0.0));
    }

    #[test]
    fn open_loop_records_from_intended_and_keeps_the_uncorrected_view() {
        let mut st = ResponderStats::new(true, 0);
        // Intended at 0, the sender stalled until 1 ms, reply 10 us later.
        assert_eq!(
            st.on_reply(&obs(0, 1_000_000, 1_010_000, Some(0)), u64::MAX),
            ReplyVerdict::OnTime { rtt_ns: 1_010_000 }
        );
        assert_eq!(st.rtt.max(), st.rtt.highest_equivalent(1_010_000));
        let unc = st.rtt_uncorrected.as_ref().unwrap();
        assert_eq!(unc.max(), unc.highest_equivalent(10_000));
    }

    #[test]
    fn late_replies_are_counted_not_recorded() {
        let mut st = ResponderStats::new(false, 0);
        assert_eq!(st.on_reply(&obs(0, 0, 2_000, None), 1_000), ReplyVerdict::Late);
        assert_eq!((st.late, st.received, st.rtt.len()), (1, 0, 0));
        assert_eq!(st.lost(1, 0), 1, "a late reply missed its timeout: lost too");
    }

    #[test]
    fn a_reply_exactly_at_the_timeout_is_on_time() {
        let mut st = ResponderStats::new(false, 0);
        assert_eq!(st.on_reply(&obs(0, 0, 1_000, None), 1_000), ReplyVerdict::OnTime { rtt_ns: 1_000 });
        assert_eq!(st.on_reply(&obs(1, 0, 1_001, None), 1_000), ReplyVerdict::Late);
        assert_eq!((st.received, st.late), (1, 1));
    }

    #[test]
    fn lateness_is_judged_on_the_actual_round_trip_not_the_corrected_one() {
        // Open loop: intended at 0, sent 900 us late, answered 110 us after the send. The
        // corrected round trip (1.01 ms) exceeds the 1 ms timeout, but the reply came 110 us
        // after its probe left: on time, recorded at its corrected value.
        let mut st = ResponderStats::new(true, 0);
        assert_eq!(
            st.on_reply(&obs(0, 900_000, 1_010_000, Some(0)), 1_000_000),
            ReplyVerdict::OnTime { rtt_ns: 1_010_000 }
        );
        assert_eq!((st.received, st.late), (1, 0));
        // and the other way round: a prompt send whose reply took 1.2 ms is late
        assert_eq!(st.on_reply(&obs(1, 1_000_000, 2_200_000, Some(1_000_000)), 1_000_000), ReplyVerdict::Late);
    }

    #[test]
    fn loss_runs_follow_the_measured_replies() {
        let mut st = ResponderStats::new(false, 0);
        let mut warm = obs(0, 0, 10, None);
        warm.phase = Phase::Warmup;
        st.on_reply(&warm, 1_000);
        st.begin_measure(5);
        // measured probes 5..=14: answered 5, 6, 10, 11; lost 7-9 and 12-14
        for s in [5, 6, 10, 11] {
            st.on_reply(&obs(s, 0, 10, None), 1_000);
        }
        st.finish(15);
        assert_eq!((st.runs.longest(), st.runs.trailing(), st.runs.lost()), (3, 3, 6));
        assert_eq!(st.runs.lost(), st.lost(10, 5), "the same count as the loss figure");
    }

    #[test]
    fn warmup_is_kept_apart() {
        let mut st = ResponderStats::new(false, 0);
        let mut o = obs(0, 0, 500, None);
        o.phase = Phase::Warmup;
        st.on_reply(&o, 1_000);
        assert_eq!((st.warmup.len(), st.rtt.len(), st.warmup_received, st.received), (1, 0, 1, 0));
    }

    #[test]
    fn losses_count_from_discovery() {
        // Measurement began at seq 10 with 100 probes; this responder appeared at seq 30.
        let mut st = ResponderStats::new(false, 30);
        st.received = 60;
        assert_eq!(st.lost(100, 10), 20);
    }

    /// A value outside 1 ns..=1 h is recorded at the bound and counted, in every view.
    #[test]
    fn clamped_values_are_counted_in_each_view() {
        let mut h = histogram();
        assert!(record(&mut h, 1) && record(&mut h, MAX_TRACKABLE_NS));
        assert!(!record(&mut h, 0) && !record(&mut h, MAX_TRACKABLE_NS + 1));
        assert_eq!((h.len(), h.min()), (4, 1));
        // Warm-up: a zero round trip.
        let mut st = ResponderStats::new(true, 0);
        let mut warm = obs(0, 5, 5, None);
        warm.phase = Phase::Warmup;
        st.on_reply(&warm, u64::MAX);
        assert_eq!(st.clamped, 1);
        // Measured: sent two hours late, so corrected it is over an hour (uncorrected 10 ns).
        st.on_reply(&obs(1, 2 * MAX_TRACKABLE_NS, 2 * MAX_TRACKABLE_NS + 10, Some(0)), u64::MAX);
        assert_eq!(st.clamped, 2);
        // Open loop: the corrected view is fine, the uncorrected one is zero.
        st.on_reply(&obs(2, 7, 7, Some(3)), u64::MAX);
        assert_eq!(st.clamped, 3);
        st.on_reply(&obs(3, 10, 20, Some(5)), u64::MAX);
        assert_eq!(st.clamped, 3, "nothing clamped");
        st.on_duplicate();
        st.on_duplicate();
        assert_eq!((st.duplicates, st.received), (2, 3), "duplicates are counted apart");
    }

    /// The loss runs judge a probe as late as the duplicate window would still take its
    /// reply: one answered `SEQ_WINDOW - 1` probes behind the newest still counts.
    #[test]
    fn a_reply_within_the_window_is_on_time_for_the_loss_runs() {
        let newest = u64::try_from(SEQ_WINDOW).unwrap() - 1;
        let mut st = ResponderStats::new(false, 0);
        st.begin_measure(0);
        st.on_reply(&obs(newest, 0, 10, None), 1_000);
        st.on_reply(&obs(0, 0, 10, None), 1_000);
        st.finish(newest + 1);
        assert_eq!(st.runs.lost(), newest - 1);
        assert_eq!(st.runs.lost(), st.lost(newest + 1, 0));
    }

    /// A full-form exchange sent at monotonic `send`: 10 µs each way, the responder's clock
    /// `offset` ahead of the pinger's wall clock, which is `WALL` ahead of its monotonic one.
    fn full(seq: u64, send: u64, dwell: u64, offset: i64) -> ReplyObs {
        const WALL: i64 = 1_000_000_000_000;
        let t2 = (WALL + i64::try_from(send).unwrap() + 10_000 + offset).unsigned_abs();
        let mut o = obs(seq, send, send + 20_000 + dwell, None);
        o.responder = Some((t2, t2 + dwell));
        o.wall_minus_mono = WALL;
        o
    }

    /// The offset estimate puts the pinger's times on its wall clock; and a dwell, a network
    /// time or an exchange the estimate refuses is counted clamped.
    #[test]
    fn full_form_replies_feed_the_offset_and_count_what_they_cannot_record() {
        let mut st = ResponderStats::new(false, 0);
        st.on_reply(&full(0, 1_000, 10_000, 50_000), u64::MAX);
        let est = st.offset.result().expect("a measured exchange");
        assert_eq!((est.offset_ns, est.samples, st.clamped), (50_000, 1, 0));
        // No dwell at all: 0 ns is below the histogram.
        st.on_reply(&full(1, 100_000, 0, 50_000), u64::MAX);
        assert_eq!(st.clamped, 1);
        // A reply as quick as the dwell: no network time.
        let mut quick = full(2, 200_000, 10_000, 50_000);
        quick.t4 = quick.t1 + 10_000;
        st.on_reply(&quick, u64::MAX);
        assert_eq!(st.clamped, 2);
        // The responder's clock stepped back a second: refused by the estimate alone.
        st.on_reply(&full(3, 300_000, 10_000, 50_000 - 1_000_000_000), u64::MAX);
        assert_eq!((st.clamped, st.offset.result().unwrap().rejected), (3, 1));
    }

    #[test]
    fn dwell_is_subtracted() {
        let mut st = ResponderStats::new(false, 0);
        let mut o = obs(0, 1_000, 31_000, None);
        o.responder = Some((5_000, 15_000));
        st.on_reply(&o, u64::MAX);
        assert_eq!(st.dwell.max(), st.dwell.highest_equivalent(10_000));
        assert_eq!(st.network.max(), st.network.highest_equivalent(20_000));
    }
}
