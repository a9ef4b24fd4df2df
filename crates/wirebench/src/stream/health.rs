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
    let share = cpu_share(cpu_ns, threads, total.send_ns);
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
