//! Waiting for readability with nanosecond resolution: `ppoll` sleeps on an hrtimer, where
//! `SO_RCVTIMEO` rounds to the scheduler tick and `poll` to milliseconds.
//!
//! A wait that must end at a time (an open loop's next send) sleeps until a [`Lead`] before
//! it and polls without sleeping for the rest: a sleeping thread wakes tens of microseconds
//! late on a VM whatever its timer slack (the vCPU halts), and that lateness would be sent
//! as the probe's own and charged to the network by coordinated-omission correction.

use std::io;
use std::os::fd::AsFd;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

use crate::clock::Clock;
use crate::udp::Wait;

/// Waits up to `timeout_ns` for `fd` to become readable. True if it is.
pub(crate) fn readable(fd: &impl AsFd, timeout_ns: u64) -> io::Result<bool> {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ts = TimeSpec::from_duration(std::time::Duration::from_nanos(timeout_ns));
    match ppoll(&mut fds, Some(ts), None) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Before a read of a probe transport: in blocking mode near the deadline, wait for the
/// exact remainder ([`poll_until`]; far from it, the socket's own `SO_RCVTIMEO`, the probe
/// timeout, bounds the read). False when nothing came in time.
pub(crate) fn before_read(
    fd: &impl AsFd,
    wait: Wait,
    (clock, now): (&impl Clock, u64),
    (deadline_ns, timeout_ns): (u64, u64),
    lead: &mut Lead,
) -> io::Result<bool> {
    if wait == Wait::Block && deadline_ns.saturating_sub(now) < timeout_ns / 2 {
        return Ok(poll_until(fd, clock, deadline_ns, lead)? != Ready::Timeout);
    }
    Ok(true)
}

/// The most a wait polls without sleeping before its deadline.
const LEAD_MAX_NS: u64 = 100_000;
/// How far one wake-up moves the lead: up by 9 steps when the thread woke later than the
/// lead, down by one when not, so the lead settles where 9 wake-ups in 10 are earlier: the
/// 90th percentile of the thread's own wake-up lateness (a frugal streaming quantile).
const LEAD_STEP_NS: u64 = 500;

/// How long before a deadline a wait stops sleeping: learnt from how late this thread's
/// sleeps end, so it costs (in CPU spent polling) what the platform's wake-ups cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lead {
    ns: u64,
}

impl Lead {
    /// One sleep meant to end at some time ended `late_ns` after it.
    fn learn(&mut self, late_ns: u64) {
        self.ns = if late_ns > self.ns {
            (self.ns + 9 * LEAD_STEP_NS).min(LEAD_MAX_NS)
        } else {
            self.ns.saturating_sub(LEAD_STEP_NS)
        };
    }
}

/// Waits for input until `clock` reaches `deadline_ns`: sleeps in `ppoll` until `lead`
/// before the deadline, learns how late that sleep ended, then polls without sleeping.
pub(crate) fn poll_until(fd: &impl AsFd, clock: &impl Clock, deadline_ns: u64, lead: &mut Lead) -> io::Result<Ready> {
    let now = clock.now_ns();
    if deadline_ns.saturating_sub(now) > lead.ns {
        let wake_at = deadline_ns - lead.ns;
        match poll_in(fd, wake_at - now)? {
            Ready::Timeout => lead.learn(clock.now_ns().saturating_sub(wake_at)),
            r => return Ok(r),
        }
    }
    loop {
        match poll_in(fd, 0)? {
            Ready::Timeout if clock.now_ns() >= deadline_ns => return Ok(Ready::Timeout),
            Ready::Timeout => std::hint::spin_loop(),
            r => return Ok(r),
        }
    }
}

/// After a read found nothing (would block, or timed out): give up, or spin again?
fn give_up(wait: Wait, now: u64, deadline_ns: u64) -> bool {
    wait == Wait::Block || now >= deadline_ns
}

/// A probe read that failed with `e` at `now`: `Ok(true)` ends the wait with nothing (it
/// found nothing and the deadline or a blocking wait says stop), `Ok(false)` reads again
/// (interrupted, or a spin that has time left), `Err` is a real error.
pub(crate) fn after_failed_read(e: io::Error, wait: Wait, now: u64, deadline_ns: u64) -> io::Result<bool> {
    use io::ErrorKind;
    match e.kind() {
        ErrorKind::Interrupted => Ok(false),
        ErrorKind::WouldBlock | ErrorKind::TimedOut if give_up(wait, now, deadline_ns) => Ok(true),
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            std::hint::spin_loop();
            Ok(false)
        }
        _ => Err(e),
    }
}

/// What a wait for input found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Data to read.
    In,
    /// Only the error flag: the error queue holds something (a TX timestamp) or an error is
    /// pending.
    ErrOnly,
    /// Nothing in time.
    Timeout,
}

/// Waits up to `timeout_ns` for input, telling data apart from the error flag.
pub(crate) fn poll_in(fd: &impl AsFd, timeout_ns: u64) -> io::Result<Ready> {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ts = TimeSpec::from_duration(std::time::Duration::from_nanos(timeout_ns));
    match ppoll(&mut fds, Some(ts), None) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => Ok(Ready::Timeout),
        Ok(_) => {
            let ev = fds[0].revents().unwrap_or(PollFlags::empty());
            Ok(if ev.contains(PollFlags::POLLIN) { Ready::In } else { Ready::ErrOnly })
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MonoClock;

    #[test]
    fn a_failed_read_retries_gives_up_or_is_an_error() {
        use std::io::{Error, ErrorKind};
        let after = |k: ErrorKind, wait, now| after_failed_read(Error::from(k), wait, now, 100).map_err(|e| e.kind());
        assert_eq!(after(ErrorKind::Interrupted, Wait::Block, 0), Ok(false), "interrupted: read again");
        assert_eq!(after(ErrorKind::Interrupted, Wait::Spin, 200), Ok(false));
        assert_eq!(after(ErrorKind::WouldBlock, Wait::Block, 0), Ok(true), "a blocking wait that timed out ends");
        assert_eq!(after(ErrorKind::TimedOut, Wait::Spin, 99), Ok(false), "a spin with time left goes on");
        assert_eq!(after(ErrorKind::WouldBlock, Wait::Spin, 100), Ok(true), "a spin at its deadline ends");
        assert_eq!(after(ErrorKind::ConnectionRefused, Wait::Spin, 0), Err(ErrorKind::ConnectionRefused));
    }

    /// The lead settles where nine wake-ups in ten were earlier (their p90), within a step
    /// or two, and never past its cap.
    #[test]
    fn the_lead_settles_on_the_ninetieth_percentile_of_the_lateness() {
        let mut lead = Lead::default();
        // lateness 10, 20, ..., 100 us in turn: the p90 is 90 us
        for i in 0..10_000u64 {
            lead.learn((i % 10 + 1) * 10_000);
        }
        assert!((85_000..=95_000).contains(&lead.ns), "{}", lead.ns);
        for _ in 0..1_000 {
            lead.learn(10_000_000);
        }
        assert_eq!(lead.ns, LEAD_MAX_NS, "a stalled host does not make every wait poll for 10 ms");
        for _ in 0..1_000 {
            lead.learn(0);
        }
        assert_eq!(lead.ns, 0, "a host that wakes on time sleeps to the deadline");
    }

    /// A wait with nothing to read ends no earlier than its deadline, also when the lead
    /// is longer than the whole wait.
    #[test]
    fn a_wait_ends_at_its_deadline_not_before() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let clock = MonoClock::default();
        for lead_ns in [0, 5_000_000] {
            let mut lead = Lead { ns: lead_ns };
            let deadline = clock.now_ns() + 2_000_000;
            assert_eq!(poll_until(&sock, &clock, deadline, &mut lead).unwrap(), Ready::Timeout);
            assert!(clock.now_ns() >= deadline);
        }
    }

    /// Input that is waiting ends the wait at once, in the sleep and in the polling part.
    #[test]
    fn input_ends_the_wait() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.send_to(b"x", sock.local_addr().unwrap()).unwrap();
        let clock = MonoClock::default();
        for lead_ns in [0, LEAD_MAX_NS] {
            let mut lead = Lead { ns: lead_ns };
            // an hour's deadline: the test would hang if the waiting input were missed
            let got = poll_until(&sock, &clock, clock.now_ns() + 3_600_000_000_000, &mut lead).unwrap();
            assert_eq!(got, Ready::In);
        }
    }
}
