//! Pacing and stopping as values (STYLE C9), and the intended send times they give.
//!
//! Closed loop (Aeron's Ping): the next probe goes when the previous one is answered or
//! times out; its latency is `receive - actual send`. Open loop (a `--rate`): probe `n` is
//! due at `start + n / rate`, whatever happened to the earlier ones, and its latency is
//! `receive - intended send`, which is the coordinated-omission correction: a stall of the
//! sender or the path shows up as latency instead of as probes that were never sent.

use std::time::Duration;

use crate::units::MsgRate;

/// How probes are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// One probe in flight: send, wait for the reply (or the timeout), send the next.
    Closed,
    /// A fixed intended send time for each probe, several in flight.
    Rate(MsgRate),
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
        // would put the send in the past, i.e. flat out (issue 10's `--max-rate` bypass).
        self.start_ns.saturating_add(offset)
    }

    /// The rate, in probes per second.
    pub const fn per_sec(&self) -> f64 {
        self.per_sec
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
}

impl Slip {
    /// Records one send at `actual_ns` that was due at `intended_ns`.
    pub fn on_send(&mut self, intended_ns: u64, actual_ns: u64) {
        let slip = actual_ns.saturating_sub(intended_ns);
        self.count += 1;
        self.sum_ns += u128::from(slip);
        self.max_ns = self.max_ns.max(slip);
        self.first_send_ns.get_or_insert(actual_ns);
        self.last_send_ns = actual_ns;
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
        let expected_sum: u64 = (2..10u64).map(|n| 7_000_000u64.saturating_sub(n * 1_000_000)).sum();
        assert_eq!(slip.mean_ns(), expected_sum / 11);
    }
}
