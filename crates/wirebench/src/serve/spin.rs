//! Busy-polling with an idle fallback, for `serve --spin`: spin while traffic flows; once
//! [`SPIN_IDLE`] passes without any, sleep in `ppoll` until the socket is readable again (an
//! idle `serve --spin` then costs nothing, and a spinning thread never steals a core from a
//! test that runs on another of serve's sockets).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::shutdown::{Input, Shutdown};

/// Spinning this long without traffic makes the thread sleep until traffic returns.
pub(super) const SPIN_IDLE: Duration = Duration::from_millis(50);
/// Empty polls between looks at the clock (the idle check is off the traffic path).
const CHECK_EVERY: u32 = 4096;

/// The idle state of one spinning thread.
#[derive(Debug)]
pub(super) struct Spinner {
    idle: bool,
    seen: bool,
    empty: u32,
    since: Instant,
}

impl Spinner {
    pub(super) fn new() -> Self {
        Self { idle: false, seen: false, empty: 0, since: Instant::now() }
    }

    /// Traffic arrived: no clock read here, the next check notices.
    #[inline]
    pub(super) fn on_traffic(&mut self) {
        self.seen = true;
    }

    /// A poll found nothing: spin, or, once idle, sleep until `fd` is readable or the stop
    /// (no timed wake-ups).
    #[inline]
    pub(super) fn on_empty(&mut self, fd: &impl AsFd, stop: &Shutdown) {
        if self.idle {
            if stop.wait_input(fd, None) == Input::Ready {
                self.idle = false;
                self.since = Instant::now();
            }
            return;
        }
        self.empty = self.empty.wrapping_add(1);
        if self.empty.is_multiple_of(CHECK_EVERY) {
            if self.seen {
                self.seen = false;
                self.since = Instant::now();
            } else if self.since.elapsed() > SPIN_IDLE {
                self.idle = true;
            }
        }
        // No `spin_loop` pause: each poll is a system call already, and a pause only
        // delays the read that finds the next datagram.
    }
}
