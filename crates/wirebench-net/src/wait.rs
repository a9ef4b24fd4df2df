//! Waiting for readability with nanosecond resolution: `ppoll` sleeps on an hrtimer, where
//! `SO_RCVTIMEO` rounds to the scheduler tick and `poll` to milliseconds.

use std::io;
use std::os::fd::AsFd;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

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
