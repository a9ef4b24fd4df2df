//! How a paced sender waits for its next send time: it sleeps on an absolute timer until a
//! margin before the time and spins the rest. A sleep costs a wake-up (on a VM about 10 µs
//! of CPU, and the host wakes it late by its own p50 of a few to tens of µs); a spin costs
//! the whole wait. So the margin follows the host: it tracks the median lateness of the
//! sender's own wake-ups (one step up when a wake-up came later than the margin, one down
//! when earlier), within [`MIN_MARGIN_NS`] and [`MAX_MARGIN_NS`]. A stall that wakes the
//! thread milliseconds late moves it one step, not milliseconds. Pure: the caller reads its
//! clock, sleeps and spins.

/// The margin never goes below this: a timer asked for the very time fires late.
pub const MIN_MARGIN_NS: u64 = 1_000;
/// Nor above this (a halted vCPU wakes in about 40 µs): a host that wakes its threads
/// later than this is busy, and spinning there takes the CPU from the work that delays it.
pub const MAX_MARGIN_NS: u64 = 50_000;
/// The margin the first wait uses (this host's wake-up lateness is not known yet).
pub const START_MARGIN_NS: u64 = 20_000;
/// How far one wake-up moves the margin.
pub const STEP_NS: u64 = 250;
/// A sleep shorter than this after the margin does not pay (it costs more than the spin).
pub const MIN_SLEEP_NS: u64 = 5_000;

/// What to do now to meet a send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The time has come: send.
    Go,
    /// Spin (it is within the margin, or a sleep would be too short to pay).
    Spin,
    /// Sleep until this clock reading (absolute), then ask again.
    Sleep(u64),
}

/// The waiting state of one sending thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinMargin {
    margin_ns: u64,
    max_sleep_ns: u64,
}

impl SpinMargin {
    /// A waiter that never sleeps longer than `max_sleep_ns` at a time (so its caller looks
    /// at a stop flag that often).
    pub const fn new(max_sleep_ns: u64) -> Self {
        Self { margin_ns: START_MARGIN_NS, max_sleep_ns }
    }

    /// The spin margin now, ns.
    pub const fn margin_ns(&self) -> u64 {
        self.margin_ns
    }

    /// What to do at `now_ns` to send at `due_ns`.
    pub fn step(&self, now_ns: u64, due_ns: u64) -> Step {
        if now_ns >= due_ns {
            return Step::Go;
        }
        let left = due_ns - now_ns;
        if left < self.margin_ns + MIN_SLEEP_NS {
            return Step::Spin;
        }
        Step::Sleep((due_ns - self.margin_ns).min(now_ns.saturating_add(self.max_sleep_ns)))
    }

    /// A sleep asked to end at `asked_ns` ended at `now_ns`: the margin moves one step toward
    /// this host's median lateness.
    pub fn woke(&mut self, asked_ns: u64, now_ns: u64) {
        let late = now_ns.saturating_sub(asked_ns);
        self.margin_ns =
            if late > self.margin_ns { self.margin_ns + STEP_NS } else { self.margin_ns.saturating_sub(STEP_NS) }
                .clamp(MIN_MARGIN_NS, MAX_MARGIN_NS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn sleeps_to_the_margin_then_spins_then_goes() {
        let w = SpinMargin::new(50 * MS);
        let due = 10 * MS;
        assert_eq!(w.step(0, due), Step::Sleep(due - START_MARGIN_NS));
        assert_eq!(w.step(due - START_MARGIN_NS, due), Step::Spin, "inside the margin");
        assert_eq!(w.step(due - START_MARGIN_NS - MIN_SLEEP_NS + 1, due), Step::Spin, "too short to sleep");
        assert_eq!(w.step(due - START_MARGIN_NS - MIN_SLEEP_NS, due), Step::Sleep(due - START_MARGIN_NS));
        assert_eq!(w.step(due, due), Step::Go);
        assert_eq!(w.step(due + 1, due), Step::Go, "late: at once");
    }

    #[test]
    fn a_long_wait_is_cut_into_sleeps_no_longer_than_the_cap() {
        let w = SpinMargin::new(50 * MS);
        assert_eq!(w.step(0, 3_600_000 * MS), Step::Sleep(50 * MS));
        assert_eq!(w.step(u64::MAX - 10 * MS, u64::MAX), Step::Sleep(u64::MAX - START_MARGIN_NS));
    }

    /// The margin settles on the median of the host's lateness, and one stall moves it one
    /// step only.
    #[test]
    fn the_margin_tracks_the_median_lateness_and_shrugs_off_stalls() {
        let mut w = SpinMargin::new(50 * MS);
        let mut rng = crate::rng::SplitMix64::new(7);
        // lateness uniform in 6..=14 us (median 10 us), a 3 ms stall every 100th wake-up
        for i in 0..4_000u64 {
            let late = if i % 100 == 99 { 3 * MS } else { 6_000 + rng.next_u64() % 8_001 };
            w.woke(1_000 * MS, 1_000 * MS + late);
        }
        let m = w.margin_ns();
        assert!((9_000..=11_500).contains(&m), "{m}");
        // punctual wake-ups shrink it to the floor, never below
        for _ in 0..1_000 {
            w.woke(5 * MS, 5 * MS);
        }
        assert_eq!(w.margin_ns(), MIN_MARGIN_NS);
        // a host that always wakes very late: the ceiling
        for _ in 0..1_000 {
            w.woke(5 * MS, 10 * MS);
        }
        assert_eq!(w.margin_ns(), MAX_MARGIN_NS);
        // an early return (a signal) counts as punctual
        w.woke(5 * MS, 4 * MS);
        assert_eq!(w.margin_ns(), MAX_MARGIN_NS - STEP_NS);
    }

    /// A wake-up exactly a margin late was covered by the spin: it is not later than the
    /// margin, so the margin steps down; one nanosecond later steps it up.
    #[test]
    fn a_wake_up_on_the_margin_is_not_late() {
        let mut w = SpinMargin::new(50 * MS);
        w.woke(5 * MS, 5 * MS + START_MARGIN_NS);
        assert_eq!(w.margin_ns(), START_MARGIN_NS - STEP_NS);
        w.woke(5 * MS, 5 * MS + START_MARGIN_NS - STEP_NS + 1);
        assert_eq!(w.margin_ns(), START_MARGIN_NS);
    }

    /// Simulated against a host whose wake-ups come `late` after the time asked: the sends
    /// are on time (the spin covers the lateness) and the thread sleeps before every one
    /// of a 10k/s schedule, spinning only about the margin's error.
    #[test]
    fn a_paced_schedule_sleeps_before_each_send_and_spins_little() {
        let mut w = SpinMargin::new(50 * MS);
        let late = 12_000;
        let (mut now, mut sleeps, mut spun, mut slip) = (0u64, 0u64, 0u64, 0u64);
        let sends = 10_000u64;
        for n in 0..sends {
            let due = MS + n * 100_000;
            for step in 0.. {
                assert!(step < 1_000_000, "send {n} never went");
                match w.step(now, due) {
                    Step::Go => break,
                    Step::Spin => {
                        now += 100;
                        spun += 100;
                    }
                    Step::Sleep(at) => {
                        sleeps += 1;
                        now = at + late;
                        w.woke(at, now);
                    }
                }
            }
            slip += now - due;
        }
        assert_eq!(sleeps, sends, "one sleep per send");
        // after settling the margin sits within a step of the lateness
        assert!(slip / sends < 1_000, "mean slip {} ns", slip / sends);
        assert!(spun / sends < 2_000, "mean spin {} ns per send", spun / sends);
    }
}
