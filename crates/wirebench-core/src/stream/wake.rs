//! A stream receiver's own wake-up delay: for each datagram, the application's receive time
//! (the wall clock read right after the `recvmmsg` that returned it) minus the kernel's
//! software RX timestamp (`SO_TIMESTAMPING`, taken when the datagram entered the stack,
//! `CLOCK_REALTIME` like the application's read). It is the time the datagram waited for
//! the receiving thread to wake up and read it (and, in a batch, for the datagrams read
//! before it): a part of every one-way delay and jitter figure made from application
//! receive times that is the receiving host's, not the network's.
//!
//! A GRO run carries its first segment's stamp, so its datagrams count with that one delay.
//! A stamp after the application's read cannot happen on one clock; a step of the wall
//! clock between the two could make one, so it is counted (`after_read`) and recorded as 0.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::latency;

/// The largest delay the histogram holds, ns (one minute; larger ones are clamped to it).
pub const MAX_NS: u64 = 60_000_000_000;
/// Significant digits: 1 % is plenty for a wake-up delay, and the histogram is 30 KiB (3,840
/// counters) where three digits would take 256 KiB per receiver.
const SIGFIG: u8 = 2;

/// The most datagrams one run can hold: a 64 KiB read of 1-byte datagrams.
pub const MAX_RUN: u64 = 65_535;

/// Records wake-up delays and the sizes of the runs read; never allocates after
/// [`Self::new`].
#[derive(Debug, Clone)]
pub struct WakeRecorder {
    hist: Histogram<u64>,
    available: bool,
    unstamped: u64,
    after_read: u64,
    runs: u64,
    /// Fewest datagrams in a run before the latest one.
    run_min: u64,
    run_max: u64,
    last_run: u64,
}

/// The wake-up delay of one receiver, as reports carry it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeDelay {
    /// Kernel RX timestamps were turned on for the receiving socket.
    pub available: bool,
    /// Datagrams with a stamp (the figures below are over these).
    pub stamped: u64,
    /// Datagrams without one (stamping turned on only after they arrived, or unavailable).
    pub unstamped: u64,
    /// Stamps after the application's read (a wall clock step): recorded as 0.
    pub after_read: u64,
    /// Median delay, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// Runs read: each a packet to the kernel (a GRO run of datagrams, or one), which a
    /// socket that refuses it counts once (`InErrors`, `RcvbufErrors`). With the datagrams
    /// (`stamped + unstamped`) they say how many datagrams such a count stands for
    /// (`counters::RunSizes`). 0 from an older receiver.
    #[serde(default)]
    pub runs: u64,
    /// Fewest datagrams in one run read, the last one aside (a stream's last run is often
    /// its sender's remainder); 0 when none was read.
    #[serde(default)]
    pub run_min: u64,
    /// Most datagrams in one run read.
    #[serde(default)]
    pub run_max: u64,
}

impl WakeRecorder {
    /// A recorder; `available`: the socket has RX stamps on.
    pub fn new(available: bool) -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("constant bounds are valid");
        Self { hist, available, unstamped: 0, after_read: 0, runs: 0, run_min: u64::MAX, run_max: 0, last_run: 0 }
    }

    /// A run of `datagrams` read at `read_ns` (wall clock) that entered the stack at `rx_ns`.
    #[inline]
    pub fn record(&mut self, read_ns: u64, rx_ns: Option<u64>, datagrams: u64) {
        if self.runs > 0 {
            self.run_min = self.run_min.min(self.last_run);
        }
        self.runs += 1;
        self.last_run = datagrams;
        self.run_max = self.run_max.max(datagrams);
        let Some(rx) = rx_ns else {
            self.unstamped += datagrams;
            return;
        };
        if rx > read_ns {
            self.after_read += datagrams;
        }
        // 0 is below the histogram's lowest value: recorded as 1 ns, shown as < 1 µs anyway.
        let v = read_ns.saturating_sub(rx).clamp(1, MAX_NS);
        // Cannot fail: v is inside the histogram's bounds.
        let _ = self.hist.record_n(v, datagrams);
    }

    /// The figures so far.
    pub fn summary(&self) -> WakeDelay {
        let h = &self.hist;
        let at = |p| if h.is_empty() { 0 } else { latency::value_at_percentile(h, p) };
        WakeDelay {
            available: self.available,
            stamped: h.len(),
            unstamped: self.unstamped,
            after_read: self.after_read,
            p50_ns: at(50.0),
            p99_ns: at(99.0),
            max_ns: if h.is_empty() { 0 } else { h.highest_equivalent(h.max()) },
            runs: self.runs,
            run_min: match self.runs {
                0 => 0,
                1 => self.last_run,
                _ => self.run_min,
            },
            run_max: self.run_max,
        }
    }
}

impl WakeDelay {
    /// The checks a receiver's figures from the wire must pass: percentiles in order.
    /// and runs that hold the datagrams counted (the last may be shorter than `run_min`),
    /// each at most [`MAX_RUN`].
    pub fn check(&self) -> Result<(), String> {
        if !(self.p50_ns <= self.p99_ns && self.p99_ns <= self.max_ns) {
            return Err(format!(
                "wake-up delay percentiles out of order: {} {} {}",
                self.p50_ns, self.p99_ns, self.max_ns
            ));
        }
        let datagrams = u128::from(self.stamped) + u128::from(self.unstamped);
        let (runs, min, max) = (u128::from(self.runs), u128::from(self.run_min), u128::from(self.run_max));
        let fits = if self.runs == 0 {
            self.run_min == 0 && self.run_max == 0
        } else {
            1 <= min && min <= max && self.run_max <= MAX_RUN && (runs - 1) * min < datagrams && datagrams <= runs * max
        };
        if fits {
            Ok(())
        } else {
            Err(format!("{} runs of {}..={} datagrams cannot hold {datagrams}", self.runs, self.run_min, self.run_max))
        }
    }

    /// Were any datagrams measured?
    pub const fn measured(&self) -> bool {
        self.available && self.stamped > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_read_minus_rx_per_datagram() {
        let mut w = WakeRecorder::new(true);
        for i in 1..=100u64 {
            w.record(1_000_000 + i * 1_000, Some(1_000_000), 1);
        }
        // a GRO run of 10 waited 500 µs
        w.record(2_000_000, Some(1_500_000), 10);
        w.record(3_000_000, None, 4);
        let s = w.summary();
        assert_eq!((s.stamped, s.unstamped, s.after_read), (110, 4, 0));
        // the 55th of 110 values is 55 µs; the largest 500 µs (each within its 1 % bucket)
        assert!((55_000..55_000 + 550).contains(&s.p50_ns), "{s:?}");
        assert!((500_000..505_000).contains(&s.max_ns) && (500_000..=s.max_ns).contains(&s.p99_ns), "{s:?}");
        assert!(s.check().is_ok() && s.measured());
        assert_eq!(w.hist.distinct_values(), 3_840, "30 KiB of counters");
        assert_eq!((s.runs, s.run_min, s.run_max), (102, 1, 10), "100 alone, a run of 10, 4 unstamped");
    }

    /// The smallest run leaves the last one aside: a stream of full runs whose last one is
    /// the sender's remainder still reads as runs of one size.
    #[test]
    fn the_last_run_is_not_the_smallest() {
        let mut w = WakeRecorder::new(true);
        w.record(2, Some(1), 32);
        let one = w.summary();
        assert_eq!((one.runs, one.run_min, one.run_max), (1, 32, 32), "one run: itself");
        assert!(one.check().is_ok());
        let mut w = WakeRecorder::new(true);
        for _ in 0..10 {
            w.record(2, Some(1), 44);
        }
        w.record(2, Some(1), 32);
        let s = w.summary();
        assert_eq!((s.runs, s.run_min, s.run_max, s.stamped), (11, 44, 44, 472));
        assert!(s.check().is_ok(), "{s:?}");
        w.record(2, Some(1), 44);
        assert_eq!(w.summary().run_min, 32, "no longer the last");
    }

    /// Run sizes from the wire must be able to hold the datagrams counted.
    #[test]
    fn runs_that_cannot_hold_the_datagrams_are_refused() {
        let ok = WakeDelay { stamped: 88, unstamped: 1, runs: 3, run_min: 1, run_max: 44, ..WakeDelay::default() };
        assert!(ok.check().is_ok());
        for bad in [
            WakeDelay { runs: 1, ..ok },
            WakeDelay { runs: 90, ..ok },
            WakeDelay { run_min: 0, ..ok },
            WakeDelay { run_min: 45, ..ok },
            WakeDelay { run_max: MAX_RUN + 1, ..ok },
            WakeDelay { runs: 0, ..ok },
            WakeDelay { runs: 0, run_min: 0, ..ok },
            // Three runs of at least 30 and a last one of at least 1 are more than 89.
            WakeDelay { runs: 4, run_min: 30, ..ok },
            WakeDelay { runs: u64::MAX, run_min: u64::MAX, run_max: u64::MAX, ..ok },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(WakeDelay { stamped: 5, ..WakeDelay::default() }.check().is_ok(), "an older receiver: no runs");
    }

    #[test]
    fn a_stamp_after_the_read_is_counted_not_negative() {
        let mut w = WakeRecorder::new(true);
        w.record(1_000, Some(2_000), 3);
        let s = w.summary();
        assert_eq!((s.stamped, s.after_read, s.max_ns), (3, 3, 1));
        // A stamp at the very instant of the read is not after it.
        w.record(5_000, Some(5_000), 2);
        assert_eq!((w.summary().stamped, w.summary().after_read), (5, 3));
    }

    /// Without stamps every datagram is unstamped, and the runs still hold them.
    #[test]
    fn unstamped_datagrams_count_toward_the_runs() {
        let mut w = WakeRecorder::new(false);
        for _ in 0..3 {
            w.record(1_000, None, 8);
        }
        let s = w.summary();
        assert_eq!((s.stamped, s.unstamped, s.runs, s.run_min, s.run_max), (0, 24, 3, 8, 8));
        assert!(s.check().is_ok(), "{s:?}");
        assert!(!s.measured());
    }

    #[test]
    fn unavailable_and_empty() {
        let s = WakeRecorder::new(false).summary();
        assert_eq!(s, WakeDelay::default());
        assert!(!s.measured());
        assert!(!WakeRecorder::new(true).summary().measured(), "stamps on, nothing stamped yet");
        assert!(!WakeDelay { stamped: 5, ..WakeDelay::default() }.measured(), "stamps off");
        let bad = WakeDelay { p50_ns: 5, p99_ns: 4, max_ns: 9, ..WakeDelay::default() };
        assert!(bad.check().is_err());
    }
}
