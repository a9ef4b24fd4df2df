//! The agent's stall samples from the prober's own timed wake-ups (the default; with
//! `--hiccup-interval` a meter thread takes them instead, `mesh::agent`), so the meter costs
//! no wake-up of its own.
//!
//! The prober waits for replies and for its next send slot (or housekeeping tick, which rides
//! a slot) in one wait. With samples on, the slot's time is an absolute timer in the ready set
//! ([`AbsTimer`]: a timerfd, started with no slack) and the wait's own timeout is only a
//! backstop past it: a `ppoll` or `epoll_pwait2` timeout may end up to 0.1 % of itself late
//! whatever the thread's timer slack (50 µs on a 50 ms slot, 100 µs on the 100 ms tick),
//! which would read as a stall of the host. After each wait, core's [`WaitStalls`] takes the
//! lateness past the slot when the prober was in the wait at the slot's time (entered
//! before, returned at or after it, whether its timer or a reply ended it); a stall longer
//! than the slot spacing fills in the slots it missed, as the meter thread does with its
//! interval. The samples of each prober window (`--window`) replace the last window's in the
//! shared state, for `/metrics`.

use std::io;
use std::sync::{Mutex, PoisonError};

use wirebench_core::hiccup::waits::WaitStalls;
use wirebench_net::clock::Clock;
use wirebench_net::ready::ReadySet;
use wirebench_net::timer::{AbsTimer, mono_now_ns};

use crate::mesh::state::HiccupWindow;

/// The slot timer's token in the ready set.
pub(super) const TIMER_TOKEN: u64 = u64::MAX - 3;
/// A wait's own timeout ends this long after the slot the timer should have ended it at
/// (only when the timer failed).
const BACKSTOP_NS: u64 = 10_000_000;

/// The slot timer and the window's samples.
#[derive(Debug)]
pub(super) struct Stalls {
    timer: AbsTimer,
    /// `CLOCK_MONOTONIC` minus the prober's clock (which counts from an origin on it).
    to_mono: u64,
    /// The time the timer is armed to (`None`: not armed, or it fired).
    armed: Option<u64>,
    rec: WaitStalls,
    /// The prober window the samples being taken belong to.
    window: u64,
}

impl Stalls {
    /// A slot timer, added to `ready` under [`TIMER_TOKEN`], for times on `clock` (the
    /// prober's); samples from prober window `window` on.
    pub(super) fn new(ready: &mut ReadySet, window: u64, clock: &impl Clock) -> io::Result<Self> {
        let timer = AbsTimer::new()?;
        ready.add(&timer, TIMER_TOKEN)?;
        Ok(Self { timer, to_mono: mono_minus(clock), armed: None, rec: WaitStalls::new(), window })
    }

    /// Arms the timer to `wake` on the prober's clock (a system call only when the time
    /// changed) and returns the wait's timeout from `now`: the backstop past `wake`, or
    /// without a timer (it could not be armed) `wake` itself, as before.
    pub(super) fn before_wait(&mut self, wake: u64, now: u64) -> u64 {
        let left = wake.saturating_sub(now);
        if self.armed != Some(wake) {
            if self.timer.arm(wake.saturating_add(self.to_mono)).is_err() {
                self.armed = None;
                return left.max(1);
            }
            self.armed = Some(wake);
        }
        left.saturating_add(BACKSTOP_NS)
    }

    /// After a wait for `wake` entered at `entered` (the clock read that set its timeout)
    /// and returned at `returned` with `tokens`, the loop's slots `slot_ns` apart: records
    /// the sample, if it is one. A fired timer is armed again even for the same time.
    pub(super) fn after_wait(&mut self, entered: u64, wake: u64, returned: u64, slot_ns: u64, tokens: &[u64]) {
        if tokens.contains(&TIMER_TOKEN) {
            self.armed = None;
        }
        self.rec.on_wait(entered, wake, returned, slot_ns);
    }

    /// Once the prober is in a later window than the samples' (`window`, by its clock),
    /// the samples' summary replaces the last in `to` (the shared state's; `None`: a window
    /// without one).
    pub(super) fn publish(&mut self, window: u64, to: &Mutex<Option<HiccupWindow>>) {
        if window <= self.window {
            return;
        }
        self.window = window;
        let w = self.rec.take().map(|w| HiccupWindow {
            interval_ns: w.expected_ns,
            wakeups: w.samples,
            corrected: w.corrected,
            p99_ns: w.p99_ns,
            max_ns: w.max_ns,
        });
        *to.lock().unwrap_or_else(PoisonError::into_inner) = w;
    }
}

/// `CLOCK_MONOTONIC` minus `clock`'s time, both read back to back (`clock` counts from an
/// origin on `CLOCK_MONOTONIC`, as `MonoClock` does from a `std::time::Instant`): the timer
/// is armed on the kernel's clock, the lateness measured on the prober's; the two reads
/// are tens of nanoseconds apart, which is this offset's error.
fn mono_minus(clock: &impl Clock) -> u64 {
    let before = clock.now_ns();
    let mono = mono_now_ns();
    let after = clock.now_ns();
    mono.saturating_sub(before / 2 + after / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use wirebench_net::clock::MonoClock;

    const MS: u64 = 1_000_000;

    /// The prober's wait with the slot timer, by hand, on the prober's own clock (which
    /// counts from its origin, not from boot as the timer's does): a wait that the timer ends
    /// comes no earlier than the slot and is a sample of its lateness; a wait that a reply
    /// ends before the slot is none, and leaves the timer armed for the same slot.
    #[test]
    fn a_wait_the_slot_timer_ends_is_a_sample_and_one_a_reply_ends_early_is_not() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ready = ReadySet::direct(8, 4).unwrap();
        ready.add(&rx, 1).unwrap();
        let clock = MonoClock::default();
        let mono_now_ns = || clock.now_ns();
        let mut s = Stalls::new(&mut ready, 0, &clock).unwrap();
        let mut tokens = Vec::new();
        // A reply is queued: the wait returns with it long before a slot an hour away.
        tx.send_to(b"reply", rx.local_addr().unwrap()).unwrap();
        let entered = mono_now_ns();
        let far = entered + 3_600_000 * MS;
        let timeout = s.before_wait(far, entered);
        assert_eq!(timeout, far - entered + BACKSTOP_NS, "the wait's own timeout is a backstop past the slot");
        ready.wait(timeout, &mut tokens).unwrap();
        let returned = mono_now_ns();
        assert_eq!(tokens, [1]);
        s.after_wait(entered, far, returned, 50 * MS, &tokens);
        assert_eq!(s.armed, Some(far), "still armed for the slot");
        rx.recv(&mut [0u8; 16]).unwrap();
        // The slot 2 ms away: only the timer ends the wait (bounded by the backstop).
        let entered = mono_now_ns();
        let wake = entered + 2 * MS;
        let timeout = s.before_wait(wake, entered);
        ready.wait(timeout, &mut tokens).unwrap();
        let returned = mono_now_ns();
        assert_eq!(tokens, [TIMER_TOKEN], "the timer, not the backstop, ended it");
        assert!(returned >= wake, "the timer fired {} ns before the slot", wake - returned);
        s.after_wait(entered, wake, returned, 50 * MS, &tokens);
        assert_eq!(s.armed, None, "fired: armed again next time");
        let shared = Mutex::new(None);
        s.publish(0, &shared);
        assert!(shared.lock().unwrap().is_none(), "the window has not ended");
        s.publish(1, &shared);
        let w = shared.lock().unwrap().unwrap();
        assert_eq!((w.wakeups, w.corrected, w.interval_ns), (1, 0, 50 * MS), "one sample: the timer's wake-up");
        let late = returned - wake;
        assert!(w.max_ns.abs_diff(late) <= late / 1_000 + 1, "{w:?} vs {late}");
        // The next window without a wait: no samples, no stale figures.
        s.publish(2, &shared);
        assert!(shared.lock().unwrap().is_none());
    }
}
