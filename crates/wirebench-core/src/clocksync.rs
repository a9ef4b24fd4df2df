//! Clock offset and one-way delay from the four NTP timestamps (RFC 5905, section 8):
//! t1 pinger send, t2 responder receive, t3 responder send, t4 pinger receive, with t1 and
//! t4 on the pinger's wall clock and t2 and t3 on the responder's.
//!
//! For one exchange, offset `θ = ((t2 - t1) + (t3 - t4)) / 2` and round-trip network delay
//! `δ = (t4 - t1) - (t3 - t2)`. Whatever the path's asymmetry, the true offset lies in
//! `θ ± δ/2`, so the exchange with the smallest δ bounds the offset most tightly (NTP's
//! clock filter keeps the minimum-delay sample for the same reason). One-way delay each way
//! is then `(t2 - t1) - θ*` and `(t4 - t3) + θ*`, and inherits the bound `± δmin/2`: this
//! module never gives a one-way figure without it, and never a negative one.
//!
//! One-way samples are recorded against the first sample's offset (plus a shift that keeps
//! them positive), then moved by the difference to the best offset when the result is
//! built: a constant shift, so percentiles stay exact. Assumes the offset does not drift
//! during the run (free-running clocks drift a few µs per second: keep such runs short).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::latency::{MAX_TRACKABLE_NS, histogram, record, value_at_percentile};

/// Collects four-timestamp exchanges.
#[derive(Debug, Clone)]
pub struct OffsetFilter {
    /// (δ, θ) of the exchange with the smallest δ.
    best: Option<(i128, i128)>,
    /// (θ0, shift): the first exchange's offset and the shift added before recording.
    base: Option<(i128, i128)>,
    fwd: Histogram<u64>,
    rev: Histogram<u64>,
    rejected: u64,
}

impl Default for OffsetFilter {
    fn default() -> Self {
        Self { best: None, base: None, fwd: histogram(), rev: histogram(), rejected: 0 }
    }
}

/// The one-way estimate for one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneWaySide {
    /// Smallest, median and 99th percentile one-way delay, ns, each `± bound_ns`.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// True when an estimate came out negative and was shown as 0.
    pub clamped_at_zero: bool,
}

/// Clock offset and one-way delays, all with the same uncertainty bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneWay {
    /// Responder clock minus pinger clock, ns.
    pub offset_ns: i64,
    /// Every figure here is uncertain by ± this much (half the smallest round trip).
    pub bound_ns: u64,
    /// Pinger to responder.
    pub forward: OneWaySide,
    /// Responder to pinger.
    pub reverse: OneWaySide,
    /// Exchanges used.
    pub samples: u64,
    /// Exchanges rejected: a negative network delay (a clock step), or a one-way figure the
    /// histograms cannot hold (a step past four round trips, a reply after an hour).
    pub rejected: u64,
}

impl OffsetFilter {
    /// Adds one exchange; `measure` says whether it counts toward the one-way percentiles
    /// (warm-up exchanges still sharpen the offset). Returns false if it was rejected.
    pub fn on_sample(&mut self, t1: i128, t2: i128, t3: i128, t4: i128, measure: bool) -> bool {
        let delta = (t4 - t1) - (t3 - t2);
        if delta < 0 || t3 < t2 {
            self.rejected += 1;
            return false;
        }
        let theta = i128::midpoint(t2 - t1, t3 - t4);
        if self.best.is_none_or(|(d, _)| delta < d) {
            self.best = Some((delta, theta));
        }
        if !measure {
            return true;
        }
        // The base is the best exchange so far (warm-up included), fixed at the first
        // measured one: its offset is within δmin/2 of the truth, so a shift of 4 δmin keeps
        // every value positive, and a small shift keeps the histogram's 3 significant digits
        // on the delays rather than on a slow first exchange's δ.
        let (best_delta, best_theta) = self.best.unwrap_or((delta, theta));
        let (theta0, shift) = *self.base.get_or_insert((best_theta, best_delta.max(1_000) * 4));
        let fwd = (t2 - t1) - theta0 + shift;
        let rev = (t4 - t3) + theta0 + shift;
        // Both directions in the histograms' range, or neither recorded: a refused exchange
        // leaves no clamped value behind in either.
        let in_range = |v: i128| u64::try_from(v).ok().filter(|v| (1..=MAX_TRACKABLE_NS).contains(v));
        let (Some(f), Some(r)) = (in_range(fwd), in_range(rev)) else {
            self.rejected += 1;
            return false;
        };
        record(&mut self.fwd, f);
        record(&mut self.rev, r);
        true
    }

    /// The estimate, once at least one measured exchange was recorded.
    pub fn result(&self) -> Option<OneWay> {
        let (delta_min, theta_best) = self.best?;
        let (theta0, shift) = self.base?;
        if self.fwd.is_empty() {
            return None;
        }
        let side = |h: &Histogram<u64>, adjust: i128| {
            let at = |v: u64| i128::from(v) - shift + adjust;
            let vals = [at(h.min()), at(value_at_percentile(h, 50.0)), at(value_at_percentile(h, 99.0))];
            let clamp = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
            OneWaySide {
                min_ns: clamp(vals[0]),
                p50_ns: clamp(vals[1]),
                p99_ns: clamp(vals[2]),
                clamped_at_zero: vals.iter().any(|&v| v < 0),
            }
        };
        Some(OneWay {
            offset_ns: i64::try_from(theta_best).unwrap_or(i64::MAX),
            bound_ns: u64::try_from(delta_min / 2).unwrap_or(u64::MAX),
            forward: side(&self.fwd, theta0 - theta_best),
            reverse: side(&self.rev, theta_best - theta0),
            samples: self.fwd.len(),
            rejected: self.rejected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One exchange on a path with `fwd` and `rev` one-way delays, a responder clock that is
    /// `offset` ahead, and `dwell` inside the responder.
    fn exchange(f: &mut OffsetFilter, t1: i128, fwd: i128, rev: i128, offset: i128, dwell: i128) {
        let t2 = t1 + fwd + offset;
        let t3 = t2 + dwell;
        let t4 = t3 - offset + rev;
        assert!(f.on_sample(t1, t2, t3, t4, true));
    }

    #[test]
    fn symmetric_path_gives_exact_offset() {
        let mut f = OffsetFilter::default();
        for i in 0..100 {
            exchange(&mut f, i * 1_000_000, 20_000, 20_000, 5_000_000_000, 3_000);
        }
        let r = f.result().unwrap();
        assert_eq!(r.offset_ns, 5_000_000_000);
        assert_eq!(r.bound_ns, 20_000);
        // Samples are recorded with a shift of 4 δ, so the histogram's 3 significant
        // digits apply to about 100 us: within 0.1 % of that.
        assert!(r.forward.p50_ns.abs_diff(20_000) <= 100, "{r:?}");
        assert!(r.reverse.p50_ns.abs_diff(20_000) <= 100, "{r:?}");
    }

    #[test]
    fn asymmetric_path_stays_inside_the_bound() {
        let mut f = OffsetFilter::default();
        // 30 us out, 10 us back; the responder clock is 2 s behind. Later exchanges are
        // slower (queueing), the fastest one comes last.
        for i in 0..50 {
            let q = 50 - i;
            exchange(&mut f, i * 1_000_000, 30_000 + q * 100, 10_000 + q * 100, -2_000_000_000, 1_000);
        }
        let r = f.result().unwrap();
        // True one-way figures: forward 30..35 us, reverse 10..15 us.
        let b = i128::from(r.bound_ns);
        assert_eq!(r.bound_ns, 20_100, "half the fastest network round trip");
        let inside = |est: u64, truth: i128| (i128::from(est) - truth).abs() <= b;
        assert!(inside(r.forward.min_ns, 30_100), "{r:?}");
        assert!(inside(r.reverse.min_ns, 10_100), "{r:?}");
        assert!((i128::from(r.offset_ns) + 2_000_000_000).abs() <= b);
        assert!(!r.forward.clamped_at_zero && !r.reverse.clamped_at_zero);
    }

    #[test]
    fn never_negative() {
        let mut f = OffsetFilter::default();
        // The best exchange says offset 0; then the responder clock steps back 30 us (still
        // a positive network delay), so a forward estimate would come out negative.
        exchange(&mut f, 0, 10_000, 10_000, 0, 0);
        exchange(&mut f, 1_000_000, 20_000, 20_000, -30_000, 0);
        let r = f.result().unwrap();
        assert_eq!((r.offset_ns, r.bound_ns), (0, 10_000));
        assert_eq!(r.forward.min_ns, 0);
        assert!(r.forward.clamped_at_zero);
        assert!(r.reverse.p99_ns >= 50_000);
    }

    #[test]
    fn a_step_back_within_four_round_trips_is_recorded_not_refused() {
        // δmin 20 us; then the responder clock steps back 50 us (on a slower exchange, so
        // the first stays the best): a forward reading of -40 us (-2 δmin), inside the
        // 4 δmin shift the samples are recorded with
        let mut f = OffsetFilter::default();
        exchange(&mut f, 0, 10_000, 10_000, 0, 0);
        exchange(&mut f, 1_000_000, 10_000, 12_000, -50_000, 0);
        let r = f.result().unwrap();
        assert_eq!((r.samples, r.rejected), (2, 0));
        assert!(r.forward.min_ns == 0 && r.forward.clamped_at_zero, "{r:?}");
    }

    #[test]
    fn a_slow_first_exchange_does_not_cost_the_precision() {
        // A warm-up exchange that took 8 ms (a cold start), then fast ones: the recording
        // shift comes from the best exchange, not the first (which made it 32 ms: about
        // 32 us of histogram resolution, and one-way figures off by as much).
        let mut f = OffsetFilter::default();
        let (t2, t3) = (1_000 + 20_000 + 7_000, 1_000 + 20_000 + 7_000 + 1_000);
        assert!(f.on_sample(1_000, t2, t3, 1_000 + 8_000_000, false));
        for i in 1..100 {
            exchange(&mut f, i * 1_000_000, 20_000, 20_000, 7_000, 1_000);
        }
        let r = f.result().unwrap();
        assert!(r.forward.p50_ns.abs_diff(20_000) <= 100, "{r:?}");
        assert!(r.reverse.p50_ns.abs_diff(20_000) <= 100, "{r:?}");
        assert!(!r.forward.clamped_at_zero && !r.reverse.clamped_at_zero, "{r:?}");
    }

    #[test]
    fn a_step_back_past_four_round_trips_is_refused_and_counted() {
        // δmin 20 us, so samples are recorded 80 us up; a responder clock stepped back
        // 200 us makes a forward reading of -190 us, below what the shift keeps positive
        let mut f = OffsetFilter::default();
        exchange(&mut f, 0, 10_000, 10_000, 0, 0);
        let (t1, t2) = (1_000_000, 1_000_000 + 10_000 - 200_000);
        assert!(!f.on_sample(t1, t2, t2, t1 + 20_000, true));
        let r = f.result().unwrap();
        assert_eq!((r.samples, r.rejected), (1, 1));
    }

    #[test]
    fn a_one_way_figure_past_the_histograms_range_is_refused() {
        // a reply that took longer than the histograms hold: the forward figure fits, the
        // reverse one does not, so the exchange is refused
        let mut f = OffsetFilter::default();
        exchange(&mut f, 0, 10_000, 10_000, 0, 0);
        let (t1, t2) = (1_000_000, 1_000_000 + 10_000);
        let t4 = t2 + i128::from(crate::latency::MAX_TRACKABLE_NS) + 1;
        assert!(!f.on_sample(t1, t2, t2, t4, true));
        let r = f.result().unwrap();
        assert_eq!((r.samples, r.rejected), (1, 1), "a refused exchange is not recorded");
        assert!(r.reverse.p99_ns < 1_000_000 && r.forward.p99_ns < 1_000_000, "{r:?}");
        // A forward figure of exactly minus the 80 us shift (4 δmin) would record 0: refused.
        let mut f = OffsetFilter::default();
        exchange(&mut f, 0, 10_000, 10_000, 0, 0);
        let t2 = 1_000_000 - 80_000;
        assert!(!f.on_sample(1_000_000, t2, t2, 1_000_000 + 20_000, true));
        assert_eq!((f.result().unwrap().samples, f.result().unwrap().rejected), (1, 1));
    }

    #[test]
    fn a_better_exchange_after_the_first_moves_both_directions() {
        // The first exchange queues 40 us on the way out (θ 20 us, δ 60 us); the second is
        // clean (θ 0, δ 20 us) and gives the offset: figures are then the true one-way
        // delays, 10 and 50 us out and 10 us back, to the histogram's 3 digits of ~300 us.
        let mut f = OffsetFilter::default();
        exchange(&mut f, 0, 50_000, 10_000, 0, 0);
        exchange(&mut f, 1_000_000, 10_000, 10_000, 0, 0);
        let r = f.result().unwrap();
        assert_eq!((r.offset_ns, r.bound_ns), (0, 10_000));
        let near = |est: u64, truth: u64| est.abs_diff(truth) <= 300;
        assert!(near(r.forward.min_ns, 10_000) && near(r.forward.p99_ns, 50_000), "{r:?}");
        assert!(near(r.reverse.min_ns, 10_000) && near(r.reverse.p99_ns, 10_000), "{r:?}");
        assert!(!r.forward.clamped_at_zero && !r.reverse.clamped_at_zero, "{r:?}");
    }

    #[test]
    fn a_clock_step_is_rejected() {
        let mut f = OffsetFilter::default();
        assert!(!f.on_sample(0, 100, 50, 200, true), "t3 before t2");
        assert!(!f.on_sample(0, 10_000, 20_000, 5_000, true), "negative network delay");
        assert!(f.result().is_none());
        exchange(&mut f, 1_000_000, 20_000, 20_000, 0, 1_000);
        let r = f.result().unwrap();
        assert_eq!((r.samples, r.rejected), (1, 2), "only the refused ones count as rejected");
    }

    #[test]
    fn no_network_delay_is_an_exchange_like_any_other() {
        // t4 - t1 = t3 - t2 (clocks too coarse to see the wire): bound 0, one-way 0
        let mut f = OffsetFilter::default();
        assert!(f.on_sample(0, 500, 700, 200, true));
        let r = f.result().unwrap();
        assert_eq!((r.offset_ns, r.bound_ns, r.rejected), (500, 0, 0));
        assert_eq!((r.forward.min_ns, r.reverse.min_ns), (0, 0));
        assert!(!r.forward.clamped_at_zero && !r.reverse.clamped_at_zero, "0 is not negative");
    }
}
