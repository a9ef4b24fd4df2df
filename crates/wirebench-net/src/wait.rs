//! Waiting for readability with nanosecond resolution: `ppoll` sleeps on an hrtimer, where
//! `SO_RCVTIMEO` rounds to the scheduler tick and `poll` to milliseconds.

use std::io;
use std::os::fd::AsFd;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

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

/// Before a read of a probe transport: in blocking mode near the deadline, `ppoll` for the
/// exact remainder (far from it, the socket's own `SO_RCVTIMEO`, the probe timeout, bounds the
/// read). False when nothing came in time.
pub(crate) fn before_read(fd: &impl AsFd, wait: Wait, now: u64, deadline_ns: u64, timeout_ns: u64) -> io::Result<bool> {
    let remaining = deadline_ns.saturating_sub(now);
    if wait == Wait::Block && remaining < timeout_ns / 2 {
        return readable(fd, remaining);
    }
    Ok(true)
}

/// After a read found nothing (would block, or timed out): give up, or spin again?
pub(crate) fn give_up(wait: Wait, now: u64, deadline_ns: u64) -> bool {
    wait == Wait::Block || now >= deadline_ns
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
