//! CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), for the generator's own
//! health: how busy its sending threads were; and the scheduler's exact run time of any
//! thread of this process (`/proc/self/task/TID/schedstat`), for threads another thread
//! reads (the load runtime's workers, the stall meter).

/// User plus system CPU time this thread has used, ns (`None` if the kernel refused): its
/// `CLOCK_THREAD_CPUTIME_ID`, the scheduler's own count to the nanosecond, the running slice
/// included (`getrusage` rounds to microseconds, which over a run of tens of microseconds
/// read more CPU than time).
pub fn thread_cpu_ns() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    u64::try_from(t.tv_sec()).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(t.tv_nsec()).ok()?)
}

/// The calling thread's kernel id, for [`task_sched`].
pub fn thread_id() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// What the scheduler says of one thread: its first two `schedstat` fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sched {
    /// Time on a CPU, ns (exact, not sampled on the tick as `getrusage` is).
    pub run_ns: u64,
    /// Time ready to run but waiting for a CPU (on a run queue), ns.
    pub wait_ns: u64,
}

/// Thread `tid` of this process: `/proc/self/task/TID/schedstat`. `None` where the kernel
/// keeps no schedstat or the thread is gone.
///
/// Read into a fixed buffer, so a call allocates the same whatever the figures' digits (the
/// stall meter reads it at its start and end; `read_to_string` grew its string when the
/// line passed 32 bytes, an allocation count that depended on the host's load).
pub fn task_sched(tid: i32) -> Option<Sched> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    // Three decimal u64s and their separators: at most 3 * 20 + 3 bytes.
    let mut buf = [0u8; 64];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let mut f = std::str::from_utf8(&buf[..len]).ok()?.split_ascii_whitespace().map(str::parse::<u64>);
    Some(Sched { run_ns: f.next()?.ok()?, wait_ns: f.next()?.ok()? })
}

#[cfg(test)]
mod tests {
    #[test]
    fn schedstat_counts_a_busy_thread_and_a_gone_one_is_none() {
        let me = super::thread_id();
        let a = super::task_sched(me).expect("this kernel keeps schedstat").run_ns;
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = super::task_sched(me).unwrap().run_ns;
        assert!(b > a, "{a} {b}");
        assert_eq!(super::task_sched(-1), None);
    }

    #[test]
    fn a_busy_thread_uses_cpu() {
        let a = super::thread_cpu_ns().unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = super::thread_cpu_ns().unwrap();
        assert!(b > a, "{a} {b}");
    }
}
