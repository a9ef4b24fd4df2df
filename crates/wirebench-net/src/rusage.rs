//! CPU time of the calling thread (`getrusage(RUSAGE_THREAD)`), for the generator's own
//! health: how busy its sending threads were.

use nix::sys::resource::{UsageWho, getrusage};

/// User plus system CPU time this thread has used, ns (`None` if the kernel refused).
pub fn thread_cpu_ns() -> Option<u64> {
    let u = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
    let ns = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec()).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(t.tv_usec()).ok()? * 1000)
    };
    ns(u.user_time())?.checked_add(ns(u.system_time())?)
}

#[cfg(test)]
mod tests {
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
