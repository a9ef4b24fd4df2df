//! Scheduling priority of the calling thread (Linux: `setpriority(PRIO_PROCESS, 0)` names
//! the calling thread, not the whole process).
//!
//! Why: a stream receiver that shares a CPU with the sender it measures (loopback, or a
//! busy host) falls behind it and the kernel drops what its socket buffer cannot hold. The
//! receiver asks for a higher priority (a lower nice value), which needs `CAP_SYS_NICE` or
//! an `RLIMIT_NICE` allowance; a flat-out sender on the same host lowers its own, which
//! anyone may do. Nice values order threads only within one scheduling group (with
//! `kernel.sched_autogroup_enabled`, one per session).

use std::io;

/// What the calling thread's nice value is after [`set_nice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nice {
    /// Set as asked.
    Set(i32),
    /// Not allowed (no `CAP_SYS_NICE` or `RLIMIT_NICE` room): the thread kept this value.
    Refused(i32),
}

/// The calling thread's nice value.
pub fn current_nice() -> i32 {
    // getpriority returns 20 - nice for the raw syscall; glibc's wrapper returns the nice
    // value itself, and -1 is ambiguous only with errno, which a valid `which` never sets.
    #[expect(unsafe_code, reason = "getpriority has no wrapper in nix or socket2")]
    // SAFETY: plain integer arguments; no memory is passed.
    let n = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    n
}

/// Sets the calling thread's nice value (-20 highest, 19 lowest).
pub fn set_nice(nice: i32) -> io::Result<Nice> {
    let nice = nice.clamp(-20, 19);
    #[expect(unsafe_code, reason = "setpriority has no wrapper in nix or socket2")]
    // SAFETY: plain integer arguments; `who` 0 is the calling thread; no memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if rc == 0 {
        return Ok(Nice::Set(nice));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => Ok(Nice::Refused(current_nice())),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_may_always_lower_its_own_priority() {
        std::thread::spawn(|| {
            // Under a parent already at nice 17 or more (`nice -n 19 cargo test`), as far
            // down as the range goes.
            let (before, want) = (current_nice(), (current_nice() + 3).min(19));
            assert_eq!(set_nice(before + 3).unwrap(), Nice::Set(want));
            assert_eq!(current_nice(), want);
        })
        .join()
        .unwrap();
        // Only that thread changed.
        let here = current_nice();
        assert!(here <= 19);
    }
}
