//! Sleeping to an absolute time on `CLOCK_MONOTONIC`, for the stall meter: `clock_nanosleep`
//! with `TIMER_ABSTIME` (the cyclictest method, so lateness never drifts), and the thread's
//! timer slack, which otherwise lets the kernel wake a normal thread up to 50 µs late on
//! purpose (`PR_SET_TIMERSLACK`).

use std::io;

use nix::sys::time::TimeSpec;
use nix::time::{ClockId, ClockNanosleepFlags, clock_gettime, clock_nanosleep};

/// `CLOCK_MONOTONIC` now, ns (the clock [`sleep_until`] sleeps on; a vDSO call).
pub fn mono_now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec()).unwrap_or(0))
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `at_ns` (at once if it has). A signal that
/// interrupts the sleep ends it early: the caller reads the clock and sees.
pub fn sleep_until(at_ns: u64) -> io::Result<()> {
    let ts = TimeSpec::new(
        i64::try_from(at_ns / 1_000_000_000).unwrap_or(i64::MAX),
        i64::try_from(at_ns % 1_000_000_000).unwrap_or(0),
    );
    match clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &ts) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sets the calling thread's timer slack (1 ns: wake when asked).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    nix::sys::prctl::set_timerslack(ns).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_the_time_asked_and_never_less() {
        set_timer_slack(1).unwrap();
        let at = mono_now_ns() + 2_000_000;
        sleep_until(at).unwrap();
        assert!(mono_now_ns() >= at);
        // a time in the past returns at once
        sleep_until(0).unwrap();
    }
}
