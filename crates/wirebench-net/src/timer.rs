//! Sleeping to an absolute time on `CLOCK_MONOTONIC`, for the stall meter: `clock_nanosleep`
//! with `TIMER_ABSTIME` (the cyclictest method, so lateness never drifts), and the thread's
//! timer slack, which otherwise lets the kernel wake a normal thread up to 50 µs late on
//! purpose (`PR_SET_TIMERSLACK`); and [`AbsTimer`], an absolute one-shot timer that a
//! readiness wait sees as a descriptor, for a loop that waits for sockets and a time at once.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId as TimerClock, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{ClockId, ClockNanosleepFlags, clock_gettime, clock_nanosleep};

/// `CLOCK_MONOTONIC` now, ns (the clock [`sleep_until`] sleeps on; a vDSO call).
pub fn mono_now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec()).unwrap_or(0))
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `at_ns` (at once if it has). A signal that
/// interrupts the sleep ends it early: the caller reads the clock and sees.
pub fn sleep_until(at_ns: u64) -> io::Result<()> {
    let ts = timespec(at_ns);
    match clock_nanosleep(ClockId::CLOCK_MONOTONIC, ClockNanosleepFlags::TIMER_ABSTIME, &ts) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sets the calling thread's timer slack (1 ns: wake when asked).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    nix::sys::prctl::set_timerslack(ns).map_err(Into::into)
}

fn timespec(at_ns: u64) -> TimeSpec {
    TimeSpec::new(
        i64::try_from(at_ns / 1_000_000_000).unwrap_or(i64::MAX),
        i64::try_from(at_ns % 1_000_000_000).unwrap_or(0),
    )
}

/// A one-shot timer on `CLOCK_MONOTONIC`, armed to absolute times, readable once it fired
/// (`timerfd`, non-blocking). Its expiry has no slack: a `ppoll` or `epoll_pwait2` timeout
/// may end up to 0.1 % of the timeout late whatever the thread's timer slack (the kernel's
/// `select_estimate_accuracy`: 50 µs on a 50 ms wait), a timerfd's timer is started with
/// none. Arming it again clears its readiness (no read needed).
#[derive(Debug)]
pub struct AbsTimer {
    fd: TimerFd,
}

impl AbsTimer {
    /// A disarmed timer.
    pub fn new() -> io::Result<Self> {
        let fd = TimerFd::new(TimerClock::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        Ok(Self { fd })
    }

    /// Arms it to fire when `CLOCK_MONOTONIC` reaches `at_ns` ([`mono_now_ns`]); a time
    /// that has passed fires at once (0 is taken as 1 ns: a zero time would disarm it).
    pub fn arm(&self, at_ns: u64) -> io::Result<()> {
        let at = timespec(at_ns.max(1));
        Ok(self.fd.set(Expiration::OneShot(at), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?)
    }
}

impl AsFd for AbsTimer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
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

    /// An armed timer is not readable before its time, is after it (a wait on it returns
    /// no earlier than the time asked), and arming it again clears that.
    #[test]
    fn an_absolute_timer_is_readable_from_its_time_until_it_is_armed_again() {
        let t = AbsTimer::new().unwrap();
        let mut set = crate::ready::ReadySet::direct(4, 4).unwrap();
        set.add(&t, 5).unwrap();
        let mut ready = Vec::new();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty(), "disarmed");
        let at = mono_now_ns() + 2_000_000;
        t.arm(at).unwrap();
        // bounded: the timer must wake the wait long before the 5 s backstop
        set.wait(5_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [5]);
        assert!(mono_now_ns() >= at, "not before its time");
        set.wait(0, &mut ready).unwrap();
        assert_eq!(ready, [5], "stays readable (level)");
        t.arm(mono_now_ns() + 3_600_000_000_000).unwrap();
        set.wait(0, &mut ready).unwrap();
        assert!(ready.is_empty(), "armed again: not readable");
        t.arm(0).unwrap();
        set.wait(5_000_000_000, &mut ready).unwrap();
        assert_eq!(ready, [5], "a passed time (0 included) fires at once");
    }
}
