//! Pacing and stopping as values (STYLE C9), and the intended send times they give.
//!
//! Closed loop (Aeron's Ping): the next probe goes when the previous one is answered or
//! times out; its latency is `receive - actual send`. Open loop (a `--rate`): probe `n` is
//! due at `start + n / rate`, whatever happened to the earlier ones, and its latency is
//! `receive - intended send`, which is the coordinated-omission correction: a stall of the
//! sender or the path shows up as latency instead of as probes that were never sent.
//! Poisson sampling (`--poisson`, RFC 2330 §11.1.1, RFC 3432 §1) draws the gaps between
//! intended send times from an exponential distribution instead, so the probes cannot
//! phase-lock to periodic events on the hosts or the path.

use std::time::Duration;

use crate::rng::SplitMix64;
use crate::units::MsgRate;

pub mod spin;

/// How probes are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// One probe in flight: send, wait for the reply (or the timeout), send the next.
    Closed,
    /// A fixed intended send time for each probe, several in flight.
    Rate(MsgRate),
    /// Open loop at a mean rate with exponential gaps (Poisson sampling), from this seed.
    Poisson {
        /// Mean probes per second.
        rate: MsgRate,
        /// The seed of the gap sequence (the same seed gives the same schedule).
        seed: u64,
    },
}

impl Pacing {
    /// The (mean) rate of an open loop; `None` for the closed loop.
    pub const fn rate(&self) -> Option<MsgRate> {
        match *self {
            Self::Closed => None,
            Self::Rate(r) | Self::Poisson { rate: r, .. } => Some(r),
        }
    }

    /// True for an open loop (latency from the intended send time).
    pub const fn is_open(&self) -> bool {
        self.rate().is_some()
    }
}

/// When to stop: whichever of a probe count and a deadline comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stop {
    /// Stop after this many probes.
    pub max_count: Option<u64>,
    /// Stop once this much time has passed since the phase began.
    pub deadline: Option<Duration>,
}

impl Stop {
    /// True once `sent` probes went out or `elapsed_ns` passed the deadline.
    pub fn reached(&self, sent: u64, elapsed_ns: u64) -> bool {
        self.max_count.is_some_and(|n| sent >= n)
            || self.deadline.is_some_and(|d| u128::from(elapsed_ns) >= d.as_nanos())
    }

    /// True if neither bound is set (the run would never end by itself).
    pub const fn is_unbounded(&self) -> bool {
        self.max_count.is_none() && self.deadline.is_none()
    }
}

/// Intended send times of an open-loop run: probe `n` is due at `start + n * 1e9 / rate`.
/// Computed from `n` each time rather than accumulated, so rounding never drifts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    start_ns: u64,
    per_sec: f64,
}

impl Schedule {
    /// A schedule whose probe 0 is due at `start_ns`.
    pub const fn new(start_ns: u64, rate: MsgRate) -> Self {
        Self { start_ns, per_sec: rate.per_sec() }
    }

    /// When probe `n` is due.
    pub fn intended(&self, n: u64) -> u64 {
        #[expect(clippy::cast_precision_loss, reason = "n < 2^53 in any run")]
        let offset = (n as f64) * 1e9 / self.per_sec;
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "positive, < 2^64")]
        let offset = offset.round() as u64;
        // Saturate: a tiny rate's offset is past u64 (`as` gives u64::MAX), and a wrapped sum
        // would put the send in the past, i.e. flat out (a way around `--max-rate`).
        self.start_ns.saturating_add(offset)
    }

    /// The rate, in probes per second.
    pub const fn per_sec(&self) -> f64 {
        self.per_sec
    }
}

/// Intended send times drawn as a Poisson process: probe 0 is due at the start, and each
/// later one an exponential gap (mean `1 / rate`) after the previous *intended* time, never
/// after the actual send, so a late sender does not move the schedule (the coordinated
/// omission correction still measures from these times). The sum is kept in f64 ns: exact to
/// well below a nanosecond for runs of days.
#[derive(Debug, Clone)]
pub struct PoissonTimes {
    rng: SplitMix64,
    start_ns: u64,
    mean_gap_ns: f64,
    offset_ns: f64,
    started: bool,
}

impl PoissonTimes {
    /// A schedule whose probe 0 is due at `start_ns`, gaps seeded by `seed`.
    pub fn new(start_ns: u64, rate: MsgRate, seed: u64) -> Self {
        Self { rng: SplitMix64::new(seed), start_ns, mean_gap_ns: 1e9 / rate.per_sec(), offset_ns: 0.0, started: false }
    }

    /// The next probe's intended send time (the first call gives probe 0's).
    pub fn next_due(&mut self) -> u64 {
        if self.started {
            // Inverse transform: -ln(1 - U) is exponential with mean 1 for U in [0, 1); the
            // 0 case is kept apart so an infinite mean (a tiny rate) never gives 0 * inf = NaN.
            let e = -(1.0 - self.rng.next_f64()).ln();
            if e > 0.0 {
                self.offset_ns += e * self.mean_gap_ns;
            }
        }
        self.started = true;
        // `as` saturates: an offset past u64 (a tiny rate) is u64::MAX, never a wrap into
        // the past (which would send flat out).
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "non-negative, saturating")]
        let offset = self.offset_ns.round() as u64;
        self.start_ns.saturating_add(offset)
    }
}

/// How far the sender fell behind its schedule: requested vs achieved rate and slip
/// (actual send minus intended send), for the report's "could it keep the rate" line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slip {
    count: u64,
    sum_ns: u128,
    max_ns: u64,
    first_send_ns: Option<u64>,
    last_send_ns: u64,
    first_intended_ns: u64,
    last_intended_ns: u64,
}

impl Slip {
    /// Records one send at `actual_ns` that was due at `intended_ns`.
    pub fn on_send(&mut self, intended_ns: u64, actual_ns: u64) {
        let slip = actual_ns.saturating_sub(intended_ns);
        self.count += 1;
        self.sum_ns += u128::from(slip);
        self.max_ns = self.max_ns.max(slip);
        if self.first_send_ns.is_none() {
            self.first_intended_ns = intended_ns;
        }
        self.first_send_ns.get_or_insert(actual_ns);
        self.last_send_ns = actual_ns;
        self.last_intended_ns = intended_ns;
    }

    /// Sends recorded.
    pub const fn count(&self) -> u64 {
        self.count
    }
    /// Largest slip seen.
    pub const fn max_ns(&self) -> u64 {
        self.max_ns
    }
    /// Mean slip.
    pub fn mean_ns(&self) -> u64 {
        if self.count == 0 { 0 } else { u64::try_from(self.sum_ns / u128::from(self.count)).unwrap_or(u64::MAX) }
    }
    /// Probes per second the schedule asked for over the same probes (first to last intended
    /// time): the requested rate for a fixed period, the drawn schedule's own for Poisson
    /// sampling (whose mean over a finite run is the requested rate only statistically).
    pub fn scheduled_per_sec(&self) -> Option<f64> {
        let span = self.last_intended_ns.checked_sub(self.first_intended_ns).filter(|&s| s > 0)?;
        #[expect(clippy::cast_precision_loss, reason = "rates are display values")]
        Some((self.count - 1) as f64 * 1e9 / span as f64)
    }

    /// Probes per second actually sent, measured from the first to the last send:
    /// `(count - 1)` gaps over that span.
    pub fn achieved_per_sec(&self) -> Option<f64> {
        let first = self.first_send_ns?;
        let span = self.last_send_ns.checked_sub(first).filter(|&s| s > 0)?;
        #[expect(clippy::cast_precision_loss, reason = "rates are display values")]
        Some((self.count - 1) as f64 * 1e9 / span as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(r: f64) -> MsgRate {
        MsgRate::new(r).unwrap()
    }

    #[test]
    fn intended_times_are_evenly_spaced_and_do_not_drift() {
        let s = Schedule::new(1_000, rate(3.0));
        assert_eq!(s.intended(0), 1_000);
        assert_eq!(s.intended(1), 1_000 + 333_333_333);
        assert_eq!(s.intended(3), 1_000 + 1_000_000_000);
        assert_eq!(s.intended(3_000_000), 1_000 + 1_000_000_000_000_000);
    }

    #[test]
    fn tiny_rates_saturate_instead_of_wrapping_into_the_past() {
        let s = Schedule::new(5_000, rate(5e-324));
        assert_eq!(s.intended(0), 5_000);
        assert_eq!(s.intended(1), u64::MAX);
        let s = Schedule::new(u64::MAX - 10, rate(1e-5));
        assert_eq!(s.intended(1), u64::MAX);
    }

    fn poisson(start: u64, r: f64, seed: u64, n: usize) -> Vec<u64> {
        let mut p = PoissonTimes::new(start, rate(r), seed);
        (0..n).map(|_| p.next_due()).collect()
    }

    #[test]
    fn poisson_mean_gap_converges_to_one_over_rate() {
        // 200_000 exponential gaps, mean 50 ms: the sample mean's sd is 50 ms / sqrt(n)
        // = 0.112 ms; the bound is 5 sd (0.56 ms), and holds for this fixed seed.
        let n = 200_001;
        let t = poisson(7, 20.0, 0x5eed, n);
        assert_eq!(t[0], 7);
        assert!(t.windows(2).all(|w| w[1] >= w[0]));
        #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
        let mean = (t[n - 1] - t[0]) as f64 / (n - 1) as f64;
        assert!((mean - 50e6).abs() < 0.56e6, "mean gap {mean} ns");
        // Exponential, not fixed: the coefficient of variation is 1, and P(gap < mean) is
        // 1 - 1/e = 0.632 (a fixed period would give 0 and a tie at the mean).
        #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
        let below = t.windows(2).filter(|w| ((w[1] - w[0]) as f64) < 50e6).count() as f64 / (n - 1) as f64;
        assert!((below - 0.632).abs() < 0.01, "{below}");
        #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
        let var = t.windows(2).map(|w| ((w[1] - w[0]) as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!((var.sqrt() / mean - 1.0).abs() < 0.02, "cv {}", var.sqrt() / mean);
    }

    #[test]
    fn poisson_same_seed_same_schedule_other_seed_other_schedule() {
        assert_eq!(poisson(0, 1000.0, 42, 1000), poisson(0, 1000.0, 42, 1000));
        assert_ne!(poisson(0, 1000.0, 42, 1000), poisson(0, 1000.0, 43, 1000));
        // The start only shifts the schedule.
        let a = poisson(0, 1000.0, 9, 100);
        let b = poisson(1_000, 1000.0, 9, 100);
        assert!(a.iter().zip(&b).all(|(x, y)| y - x == 1_000));
    }

    #[test]
    fn poisson_intended_times_do_not_move_with_slip() {
        // A sender that is late by a growing amount on every probe (and stalls 1 s at
        // probe 10) asks for the next due time only after its late send: the intended times
        // are the ones a punctual sender gets, and the slip is measured against them.
        let punctual = poisson(0, 100.0, 3, 50);
        let mut p = PoissonTimes::new(0, rate(100.0), 3);
        let mut slip = Slip::default();
        let mut now = 0u64;
        let mut seen = Vec::new();
        for n in 0..50u64 {
            let due = p.next_due();
            now = now.max(due) + n * 1_000 + if n == 10 { 1_000_000_000 } else { 0 };
            slip.on_send(due, now);
            seen.push(due);
        }
        assert_eq!(seen, punctual);
        assert!(slip.max_ns() >= 1_000_000_000);
        // What the schedule asked for is the drawn schedule's own rate, not 100/s exactly.
        #[expect(clippy::cast_precision_loss, reason = "test arithmetic")]
        let want = 49e9 / (punctual[49] - punctual[0]) as f64;
        assert!((slip.scheduled_per_sec().unwrap() - want).abs() < 1e-9);
    }

    #[test]
    fn poisson_huge_and_tiny_rates() {
        // The largest rate (1e9/s): 1 ns mean gaps, fractions kept (not rounded away per
        // gap): 999 gaps sum to 999 ns give or take 5 sd (5 * sqrt(999) = 158 ns).
        let t = poisson(5, 1e9, 1, 1000);
        assert_eq!(t[0], 5);
        assert!(t.windows(2).all(|w| w[1] >= w[0]));
        assert!((t[999] - 5).abs_diff(999) < 158, "{}", t[999]);
        // A tiny rate: the first gap is past u64 and saturates, never wraps or gives NaN.
        let t = poisson(5_000, 5e-324, 1, 10);
        assert_eq!(t[0], 5_000);
        assert!(t[1..].iter().all(|&x| x == u64::MAX));
        let t = poisson(u64::MAX - 10, 1e-5, 1, 3);
        assert_eq!(&t[1..], &[u64::MAX, u64::MAX]);
        // A zero rate is not a rate at all.
        assert!(MsgRate::new(0.0).is_none());
    }

    #[test]
    fn pacing_rate_and_openness() {
        assert_eq!(Pacing::Closed.rate(), None);
        assert!(!Pacing::Closed.is_open());
        assert_eq!(Pacing::Rate(rate(5.0)).rate(), Some(rate(5.0)));
        assert!(Pacing::Poisson { rate: rate(5.0), seed: 1 }.is_open());
        assert_eq!(Pacing::Poisson { rate: rate(5.0), seed: 1 }.rate(), Some(rate(5.0)));
    }

    #[test]
    fn stop_on_whichever_comes_first() {
        let s = Stop { max_count: Some(10), deadline: Some(Duration::from_secs(1)) };
        assert!(!s.reached(9, 999_999_999));
        assert!(s.reached(10, 0));
        assert!(s.reached(0, 1_000_000_000));
        assert!(!Stop::default().reached(u64::MAX, u64::MAX));
        assert!(Stop::default().is_unbounded());
    }

    #[test]
    fn a_single_send_has_no_rate() {
        // No gap to divide by: no rate, not 0 / 0.
        let mut slip = Slip::default();
        slip.on_send(5, 5);
        assert_eq!((slip.scheduled_per_sec(), slip.achieved_per_sec()), (None, None));
    }

    #[test]
    fn either_bound_alone_ends_a_run() {
        assert!(!Stop { max_count: Some(1), deadline: None }.is_unbounded());
        assert!(!Stop { max_count: None, deadline: Some(Duration::from_secs(1)) }.is_unbounded());
    }

    #[test]
    fn a_schedule_keeps_its_rate() {
        assert!((Schedule::new(7, rate(250.0)).per_sec() - 250.0).abs() < f64::EPSILON);
    }

    #[test]
    fn a_zero_draw_with_an_infinite_mean_gap_adds_nothing() {
        // SplitMix64's mix takes state 0 to output 0: a seed one increment below 0 makes the
        // first gap's draw U = 0, so e = -ln(1) = -0.0, and -0.0 * inf would be NaN.
        let seed = 0u64.wrapping_sub(0x9E37_79B9_7F4A_7C15);
        assert_eq!(SplitMix64::new(seed).next_u64(), 0, "so the draw is 0.0");
        assert_eq!(poisson(5_000, 5e-324, seed, 3), [5_000, 5_000, u64::MAX]);
    }

    #[test]
    fn slip_and_achieved_rate() {
        let mut slip = Slip::default();
        let s = Schedule::new(0, rate(1000.0));
        // The sender stalls 5 ms at probe 2, then catches up by probe 10.
        for n in 0..=10u64 {
            let intended = s.intended(n);
            let actual = if (2..10).contains(&n) { intended.max(7_000_000) } else { intended };
            slip.on_send(intended, actual);
        }
        assert_eq!(slip.count(), 11);
        assert_eq!(slip.max_ns(), 5_000_000);
        // 10 gaps over 10 ms.
        assert!((slip.achieved_per_sec().unwrap() - 1000.0).abs() < 1e-6);
        assert!((slip.scheduled_per_sec().unwrap() - 1000.0).abs() < 1e-6);
        let expected_sum: u64 = (2..10u64).map(|n| 7_000_000u64.saturating_sub(n * 1_000_000)).sum();
        assert_eq!(slip.mean_ns(), expected_sum / 11);
    }
}
