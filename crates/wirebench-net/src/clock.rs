//! Clocks. Durations are monotonic ns from a process-wide origin; the wall clock is used
//! only for the responder's timestamps and the offset estimate.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use wirebench_core::units::nanos;

/// A source of monotonic nanoseconds. Engines read time only through this, so tests can
/// run them on a virtual clock.
pub trait Clock {
    /// Nanoseconds since an arbitrary fixed origin; never goes backwards.
    fn now_ns(&self) -> u64;
}

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// `CLOCK_MONOTONIC` through `Instant` (a vDSO call, no syscall).
#[derive(Debug, Clone, Copy)]
pub struct MonoClock {
    origin: Instant,
}

impl Default for MonoClock {
    fn default() -> Self {
        Self { origin: origin() }
    }
}

impl Clock for MonoClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        nanos(self.origin.elapsed())
    }
}

/// Wall clock, ns since the Unix epoch.
#[inline]
pub fn wall_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, nanos)
}

/// Wall clock minus `clock`, sampled once: adding it to a monotonic time gives that
/// moment on the wall clock (good for the length of a run).
pub fn wall_minus_mono(clock: &impl Clock) -> i64 {
    let before = clock.now_ns();
    let wall = wall_now_ns();
    let after = clock.now_ns();
    let mono = before / 2 + after / 2;
    i64::try_from(i128::from(wall) - i128::from(mono)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_mapped_to_the_wall_clock() {
        let c = MonoClock::default();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        let off = wall_minus_mono(&c);
        let mapped = i128::from(c.now_ns()) + i128::from(off);
        // Within a second of the wall clock (the sample and this read are microseconds apart).
        assert!((mapped - i128::from(wall_now_ns())).abs() < 1_000_000_000);
    }
}

/// What the kernel says of the wall clock's discipline (`adjtimex`, read only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallSync {
    /// An NTP or PTP daemon keeps it synchronised (`STA_UNSYNC` clear).
    pub synced: bool,
    /// Its error bound, ns: the estimated error when synchronised, the maximum otherwise.
    pub error_ns: u64,
}

/// Reads the wall clock's synchronisation state; `None` where the kernel does not say.
pub fn wall_sync() -> Option<WallSync> {
    // SAFETY: `timex` is plain data; all zeros (modes 0) asks adjtimex to change nothing and
    // only fill the struct in.
    #[expect(unsafe_code, reason = "adjtimex has no safe wrapper in nix")]
    let (rc, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&raw mut tx), tx)
    };
    if rc < 0 {
        return None;
    }
    let synced = tx.status & libc::STA_UNSYNC == 0;
    let us = if synced { tx.esterror } else { tx.maxerror };
    Some(WallSync { synced, error_ns: u64::try_from(us).unwrap_or(0).saturating_mul(1000) })
}
