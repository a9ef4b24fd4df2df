//! Stall samples from a loop's own timed waits, so a loop that already sleeps to absolute
//! times (the mesh prober to its send slots) needs no meter thread of its own.
//!
//! A wait asked to end at `due` (an absolute time) is a sample when the loop was in it at
//! `due`: it was entered before `due` and returned at or after it. The sample is how late it
//! returned, `returned - due`, the same lateness the meter thread records. Whatever ended
//! such a wait (its timer, or a reply that came while the timer was due anyway), the thread
//! asked to run at `due` and first ran then. A wait a reply ended before `due` says nothing
//! about the timer; a wait entered at or after `due` (the loop was busy at `due`) would
//! measure the loop's own work, not the host's: neither is a sample. A due time counts once.
//!
//! Missed values are filled in as [`super::HiccupRecorder::on_wake`] does (jHiccup, and
//! HdrHistogram's `record_correct`): a sample `L` of a loop whose due times are expected
//! every `E` also records `L - E`, `L - 2E`, ... while that is at least `E`. `E` is the
//! loop's grid (the prober's send slot), clamped to [`MIN_INTERVAL_NS`]..=[`MAX_INTERVAL_NS`].
//! Nothing here reads a clock: the caller passes the times.

use hdrhistogram::Histogram;

use super::{MAX_INTERVAL_NS, MIN_INTERVAL_NS};
use crate::latency::{self, value_at_percentile};

/// How late a wait returned past `due_ns`, when the loop was in it at `due_ns` (entered
/// before it, returned at or after it); `None` otherwise (the module's rule).
#[must_use]
pub const fn lateness(entered_ns: u64, due_ns: u64, returned_ns: u64) -> Option<u64> {
    if entered_ns < due_ns && returned_ns >= due_ns { Some(returned_ns - due_ns) } else { None }
}

/// One window of samples, summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallWindow {
    /// The expected spacing of due times (the last sample's), ns.
    pub expected_ns: u64,
    /// Samples (wait lateness values).
    pub samples: u64,
    /// Values filled in for due times a stall made the loop miss.
    pub corrected: u64,
    /// Lateness p99 over every value, ns.
    pub p99_ns: u64,
    /// The latest wake-up, ns.
    pub max_ns: u64,
}

/// Samples of one window at a time. Allocates only in [`Self::new`].
#[derive(Debug, Clone)]
pub struct WaitStalls {
    hist: Histogram<u64>,
    expected_ns: u64,
    samples: u64,
    corrected: u64,
    last_due: Option<u64>,
}

impl Default for WaitStalls {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitStalls {
    /// No samples yet.
    #[must_use]
    pub fn new() -> Self {
        Self { hist: latency::histogram(), expected_ns: 0, samples: 0, corrected: 0, last_due: None }
    }

    /// One wait that asked to end at `due_ns`, entered at `entered_ns`, returned at
    /// `returned_ns`, of a loop whose due times are expected every `expected_ns`. Records
    /// the sample and the values it missed; returns the sample (`None`: not one).
    pub fn on_wait(&mut self, entered_ns: u64, due_ns: u64, returned_ns: u64, expected_ns: u64) -> Option<u64> {
        if self.last_due == Some(due_ns) {
            return None;
        }
        let late = lateness(entered_ns, due_ns, returned_ns)?;
        self.last_due = Some(due_ns);
        let e = expected_ns.clamp(MIN_INTERVAL_NS, MAX_INTERVAL_NS);
        self.expected_ns = e;
        self.samples += 1;
        latency::record(&mut self.hist, late);
        for (_, value) in super::missed(late, e) {
            self.corrected += 1;
            latency::record(&mut self.hist, value);
        }
        Some(late)
    }

    /// The window so far (`None` without a sample), and a fresh one begun (no allocation).
    pub fn take(&mut self) -> Option<StallWindow> {
        let w = (self.samples > 0).then(|| StallWindow {
            expected_ns: self.expected_ns,
            samples: self.samples,
            corrected: self.corrected,
            p99_ns: value_at_percentile(&self.hist, 99.0),
            max_ns: self.hist.max(),
        });
        self.hist.reset();
        self.samples = 0;
        self.corrected = 0;
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_sample_only_when_the_loop_was_in_the_wait_at_its_due_time() {
        // slept through the due time: woke 30 us late (or on time)
        assert_eq!(lateness(100, 1_000, 1_030), Some(30));
        assert_eq!(lateness(100, 1_000, 1_000), Some(0));
        // a reply ended the wait before the due time
        assert_eq!(lateness(100, 1_000, 999), None);
        // entered at or after the due time: the loop was busy, not asleep
        assert_eq!(lateness(1_000, 1_000, 1_030), None);
        assert_eq!(lateness(1_010, 1_000, 1_030), None);
    }

    /// A hand-computed trace: the send slot is 50 ms; three punctual wake-ups, a reply before
    /// a slot, a wait entered late, and a 120 ms stall (120 - 50 = 70 filled in, 120 - 100 =
    /// 20 is under 50: not).
    #[test]
    fn a_trace_of_waits_gives_its_samples_and_fills_in_a_stall() {
        let mut s = WaitStalls::new();
        let slot = 50 * MS;
        assert_eq!(s.take(), None, "no samples yet");
        assert_eq!(s.on_wait(0, 50 * MS, 50 * MS + 40_000, slot), Some(40_000));
        // a reply at 60 ms, before the 100 ms slot; then the same slot's wait, 25 us late
        assert_eq!(s.on_wait(50 * MS + 50_000, 100 * MS, 60 * MS, slot), None);
        assert_eq!(s.on_wait(60 * MS + 20_000, 100 * MS, 100 * MS + 25_000, slot), Some(25_000));
        // the same due time again (a second wait that returned at once) counts once
        assert_eq!(s.on_wait(90 * MS, 100 * MS, 100 * MS + 30_000, slot), None);
        // busy past the 150 ms slot: entered at 151 ms
        assert_eq!(s.on_wait(151 * MS, 150 * MS, 151 * MS + 10_000, slot), None);
        assert_eq!(s.on_wait(160 * MS, 200 * MS, 200 * MS + 35_000, slot), Some(35_000));
        assert_eq!(s.on_wait(210 * MS, 250 * MS, 370 * MS, slot), Some(120 * MS));
        let w = s.take().unwrap();
        assert_eq!((w.samples, w.corrected, w.expected_ns), (4, 1, slot));
        // values 25, 35, 40 us, 70 ms, 120 ms: p99 and max are the stall (to the
        // histogram's precision)
        assert!(w.max_ns.abs_diff(120 * MS) <= 120 * MS / 1_000, "{w:?}");
        assert!(w.p99_ns.abs_diff(120 * MS) <= 120 * MS / 1_000, "{w:?}");
        // a new window starts empty, and keeps no count of the last
        assert_eq!(s.take(), None);
        assert_eq!(s.on_wait(400 * MS, 450 * MS, 450 * MS + 20_000, slot), Some(20_000));
        let w = s.take().unwrap();
        assert_eq!((w.samples, w.corrected), (1, 0));
        assert!(w.max_ns.abs_diff(20_000) <= 20, "{w:?}");
    }

    #[test]
    fn the_expected_spacing_is_clamped_to_the_meters_range() {
        let mut s = WaitStalls::new();
        // a 1 ns grid (no plan yet) must not fill in a million values for a 1 ms stall
        assert_eq!(s.on_wait(0, 10, 10 + MS, 1), Some(MS));
        let w = s.take().unwrap();
        assert_eq!((w.expected_ns, w.corrected), (MIN_INTERVAL_NS, MS / MIN_INTERVAL_NS - 1));
    }
}
