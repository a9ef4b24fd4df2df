//! CPU pinning, and which CPU a thread is on.

use nix::sched::{CpuSet, sched_getcpu, sched_setaffinity};
use nix::unistd::Pid;

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(std::io::Error::from)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)
}

/// The CPU the calling thread is running on now.
pub fn current_cpu() -> Option<usize> {
    sched_getcpu().ok()
}

/// Online CPUs.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_moves_the_thread() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            assert_eq!(current_cpu(), Some(0));
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(100_000).is_err());
    }
}
