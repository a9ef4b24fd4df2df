//! The sending side's own health for the report: its threads' CPU, their schedule slip per
//! second and the verdict (`wirebench_core::generator`).

use wirebench_core::generator::{cpu_share, merge, verdict};
use wirebench_core::report::{GeneratorHealth, SenderResult};

use crate::flow::send::Sent;

/// The health of the threads that sent `sent`, each asked for `rate` messages/s.
pub(super) fn of(sent: &[Sent], rate: Option<f64>, total: &SenderResult) -> GeneratorHealth {
    let threads = sent.len() as u64;
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    let asked_per_s = rate.map(|r| r * threads as f64);
    let cpu_ns = sent.iter().map(|s| s.cpu_ns).sum();
    // Each thread's CPU over the wall window it was read in (its send loop), not over the
    // sending time of all: over a run of a few sends the loop's edges would read more CPU
    // than time.
    let share = cpu_share(cpu_ns, 1, sent.iter().map(|s| s.cpu_wall_ns).sum());
    let series: Vec<_> = sent.iter().map(|s| s.slip_seconds.clone()).collect();
    GeneratorHealth {
        threads,
        asked_per_s,
        achieved_per_s: total.per_s,
        cpu_ns,
        cpu_share: share,
        wait_ns: None,
        verdict: verdict(asked_per_s, total.per_s, share),
        slip_seconds: merge(&series),
        cpu_seconds: Vec::new(),
        behind: Vec::new(),
        schedule: None,
    }
}
