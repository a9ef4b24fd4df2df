//! The load generator's own health: how far its sends slipped behind their schedule, second
//! by second, how much CPU its threads used, and a verdict when it missed the rate asked
//! for: was it the generator (its threads were busy the whole time: CPU-bound) or the send
//! path below it (its threads waited in `send`: the socket buffer, a qdisc, the path)? Pure:
//! the sender records slips at the times it read, and CPU times over the windows it read them.

pub mod schedule;

use serde::{Deserialize, Serialize};

use crate::load::Arrivals;
use crate::rng::SplitMix64;

/// One second of a sender's schedule slip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlipSecond {
    /// Seconds since the sender started.
    pub at_s: u64,
    /// Sends (batches) due in this second.
    pub sends: u64,
    /// Mean slip of those sends, ns.
    pub mean_ns: u64,
    /// Largest slip, ns.
    pub max_ns: u64,
}

/// Slip per second of a paced sender. [`SlipSeries::with_seconds`] reserves the run's
/// seconds up front, so recording does not allocate in the send loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlipSeries {
    start_ns: u64,
    seconds: Vec<SlipSecond>,
    sum_ns: u128,
}

impl SlipSeries {
    /// A series from `start_ns`, with room for `seconds` seconds.
    pub fn with_seconds(start_ns: u64, seconds: usize) -> Self {
        Self { start_ns, seconds: Vec::with_capacity(seconds.min(1 << 20)), sum_ns: 0 }
    }

    /// One send due at `due_ns` that went at `actual_ns` (counted in the second it was due).
    pub fn on_send(&mut self, due_ns: u64, actual_ns: u64) {
        let slip = actual_ns.saturating_sub(due_ns);
        let at_s = due_ns.saturating_sub(self.start_ns) / 1_000_000_000;
        if self.seconds.last().is_none_or(|s| s.at_s != at_s) {
            self.close();
            self.seconds.push(SlipSecond { at_s, ..SlipSecond::default() });
        }
        if let Some(s) = self.seconds.last_mut() {
            s.sends += 1;
            s.max_ns = s.max_ns.max(slip);
            self.sum_ns += u128::from(slip);
        }
    }

    fn close(&mut self) {
        if let Some(s) = self.seconds.last_mut()
            && s.sends > 0
        {
            s.mean_ns = u64::try_from(self.sum_ns / u128::from(s.sends)).unwrap_or(u64::MAX);
        }
        self.sum_ns = 0;
    }

    /// The seconds recorded.
    pub fn finish(mut self) -> Vec<SlipSecond> {
        self.close();
        self.seconds
    }
}

/// Merges several senders' series (publishers): per second, sends added, the larger
/// maximum, the mean weighted by sends.
pub fn merge(series: &[Vec<SlipSecond>]) -> Vec<SlipSecond> {
    let mut out: Vec<SlipSecond> = Vec::new();
    let mut sums: Vec<u128> = Vec::new();
    for s in series.iter().flatten() {
        let i = match out.binary_search_by_key(&s.at_s, |x| x.at_s) {
            Ok(i) => i,
            Err(i) => {
                out.insert(i, SlipSecond { at_s: s.at_s, ..SlipSecond::default() });
                sums.insert(i, 0);
                i
            }
        };
        // saturating: `report --merge` adds series read from files
        out[i].sends = out[i].sends.saturating_add(s.sends);
        out[i].max_ns = out[i].max_ns.max(s.max_ns);
        sums[i] = sums[i].saturating_add(u128::from(s.mean_ns) * u128::from(s.sends));
    }
    for (o, sum) in out.iter_mut().zip(sums) {
        // no more than the largest (it is, unless a sum above saturated)
        o.mean_ns =
            if o.sends == 0 { 0 } else { u64::try_from(sum / u128::from(o.sends)).unwrap_or(u64::MAX).min(o.max_ns) };
    }
    out
}

/// One second of the generator's CPU (load: its runtime's threads, read each second).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSecond {
    /// Seconds since the run began (end of the interval, as the run's own series).
    pub at_s: u64,
    /// CPU time the generator's threads used in it, ns.
    pub cpu_ns: u64,
    /// Time they were ready to run but waited for a CPU, ns.
    pub wait_ns: u64,
}

/// Adds several generators' CPU seconds (shards started together) by `at_s`.
pub fn merge_cpu(series: &[&[CpuSecond]]) -> Vec<CpuSecond> {
    let mut out: Vec<CpuSecond> = Vec::new();
    for s in series.iter().copied().flatten() {
        match out.binary_search_by_key(&s.at_s, |x| x.at_s) {
            Ok(i) => {
                out[i].cpu_ns = out[i].cpu_ns.saturating_add(s.cpu_ns);
                out[i].wait_ns = out[i].wait_ns.saturating_add(s.wait_ns);
            }
            Err(i) => out.insert(i, *s),
        }
    }
    out
}

/// Per-second rows from cumulative readings `(at_s, cpu, wait)` taken at the end of each
/// second, from zero: each row is the difference from the reading before (0 where a
/// reading went backwards).
pub fn per_second(readings: &[(u64, u64, u64)]) -> Vec<CpuSecond> {
    let (mut cpu, mut wait) = (0u64, 0u64);
    readings
        .iter()
        .map(|&(at_s, c, w)| {
            let row = CpuSecond { at_s, cpu_ns: c.saturating_sub(cpu), wait_ns: w.saturating_sub(wait) };
            (cpu, wait) = (cpu.max(c), wait.max(w));
            row
        })
        .collect()
}

/// Sends an open-loop schedule made due before `until` that a client never made: its
/// next intended send is at `next`, and `arrivals` (with the client's `rng`, as it would
/// have gone on) gives the gaps after it. `load` counts these when a client ends, so the
/// rate its schedules asked for is exact: what was sent plus this.
pub fn due_before(arrivals: Arrivals, rng: &mut SplitMix64, mut next: u64, until: u64) -> u64 {
    let mut n = 0;
    while next < until {
        n += 1;
        // a gap of 0 (Poisson, rarely) still moves on
        next = next.saturating_add(arrivals.gap(rng).max(1));
    }
    n
}

/// Who missed the rate asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeneratorVerdict {
    /// The rate was kept (within [`KEPT`]).
    Kept,
    /// Missed, and the sending threads were busy nearly all the time ([`BUSY`]; where the
    /// scheduler says so, running or ready and waiting for a CPU): the generator, or the
    /// CPU of the host it runs on, could not go faster; the system under test was not the
    /// limit.
    GeneratorLimited,
    /// Missed, with the sending threads idle part of the time: they waited in the send path
    /// (socket buffer, qdisc, the path pushing back) or were descheduled.
    SendPathLimited,
    /// Flat out (no rate asked): nothing to miss.
    FlatOut,
    /// `load`: the clients that stayed connected kept their schedules, but clients were
    /// dropped before the end of sending (closed by the server, connection lost) or never
    /// connected, and their schedules' sends were never made: the scenario's rate was not
    /// kept, and not for want of the generator's CPU or send path ([`schedule::verdict`]).
    ClientsLost,
}

/// A rate achieved at or above this share of the rate asked for was kept.
pub const KEPT: f64 = 0.97;
/// Threads that used at least this share of their wall time on a CPU were busy.
pub const BUSY: f64 = 0.9;

/// The verdict on a sender: `asked_per_s` (all publishers; `None` flat out), what it
/// achieved, and its threads' CPU share (CPU time over `threads × wall time`).
pub fn verdict(asked_per_s: Option<f64>, achieved_per_s: f64, cpu_share: f64) -> GeneratorVerdict {
    match asked_per_s {
        None => GeneratorVerdict::FlatOut,
        Some(a) if achieved_per_s >= a * KEPT => GeneratorVerdict::Kept,
        Some(_) if cpu_share >= BUSY => GeneratorVerdict::GeneratorLimited,
        Some(_) => GeneratorVerdict::SendPathLimited,
    }
}

/// How bad a verdict is, for merging shards: a rate kept (or flat out) is fine; clients lost
/// missed the rate with the generator keeping up; a send path that held the generator back
/// is worse; a generator out of CPU is worst.
const fn severity(v: GeneratorVerdict) -> u8 {
    match v {
        GeneratorVerdict::Kept | GeneratorVerdict::FlatOut => 0,
        GeneratorVerdict::ClientsLost => 1,
        GeneratorVerdict::SendPathLimited => 2,
        GeneratorVerdict::GeneratorLimited => 3,
    }
}

/// The verdict of several generators run as one scenario (shards), each `(name, verdict)`:
/// the worst of them (any shard that missed its rate means the scenario's rate was missed,
/// however well the others kept theirs), and the names of the shards that missed it, in the
/// order given. All flat out stays flat out; a mix of kept and flat out is kept.
pub fn merge_verdicts<'a>(parts: &[(&'a str, GeneratorVerdict)]) -> (GeneratorVerdict, Vec<&'a str>) {
    let behind: Vec<&str> = parts.iter().filter(|(_, v)| severity(*v) > 0).map(|(n, _)| *n).collect();
    let worst = parts.iter().map(|(_, v)| *v).max_by_key(|v| severity(*v));
    let v = match worst {
        Some(v) if severity(v) > 0 => v,
        _ if parts.iter().any(|(_, v)| *v == GeneratorVerdict::Kept) => GeneratorVerdict::Kept,
        _ => GeneratorVerdict::FlatOut,
    };
    (v, behind)
}

/// Running plus waiting for a CPU (`cpu_ns + wait_ns`) over `threads × wall_ns`: the share
/// of the time the threads had work and wanted a CPU, whether they got one or not (the
/// verdict's share where the scheduler's wait is known).
pub fn demand_share(cpu_ns: u64, wait_ns: u64, threads: u64, wall_ns: u64) -> f64 {
    cpu_share(cpu_ns.saturating_add(wait_ns), threads, wall_ns)
}

/// `cpu_ns` over `threads × wall_ns` (0 when nothing ran).
#[expect(clippy::cast_precision_loss, reason = "a share")]
pub fn cpu_share(cpu_ns: u64, threads: u64, wall_ns: u64) -> f64 {
    let whole = threads.saturating_mul(wall_ns);
    if whole == 0 { 0.0 } else { cpu_ns as f64 / whole as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn slips_by_the_second_they_were_due() {
        let mut s = SlipSeries::with_seconds(10, 3);
        s.on_send(10, 110); // 100 ns late, second 0
        s.on_send(10 + S / 2, 10 + S / 2 + 300); // 300, second 0
        s.on_send(10 + S, 10 + 2 * S); // 1 s late, due in second 1
        s.on_send(10 + 2 * S + 5, 10 + 2 * S); // early: 0
        assert_eq!(
            s.finish(),
            [
                SlipSecond { at_s: 0, sends: 2, mean_ns: 200, max_ns: 300 },
                SlipSecond { at_s: 1, sends: 1, mean_ns: S, max_ns: S },
                SlipSecond { at_s: 2, sends: 1, mean_ns: 0, max_ns: 0 },
            ]
        );
        assert!(SlipSeries::with_seconds(0, 0).finish().is_empty());
    }

    #[test]
    fn recording_within_the_reserved_seconds_does_not_grow() {
        let mut s = SlipSeries::with_seconds(0, 4);
        let cap = s.seconds.capacity();
        for i in 0..4_000 {
            s.on_send(i * S / 1000, i * S / 1000 + 7);
        }
        assert_eq!(s.seconds.capacity(), cap);
        assert_eq!(s.finish().len(), 4);
    }

    #[test]
    fn publishers_merge_by_second() {
        let a = vec![SlipSecond { at_s: 0, sends: 1, mean_ns: 100, max_ns: 100 }];
        let b = vec![
            SlipSecond { at_s: 0, sends: 3, mean_ns: 300, max_ns: 900 },
            SlipSecond { at_s: 2, sends: 2, mean_ns: 50, max_ns: 60 },
        ];
        assert_eq!(
            merge(&[a, b]),
            [
                SlipSecond { at_s: 0, sends: 4, mean_ns: 250, max_ns: 900 },
                SlipSecond { at_s: 2, sends: 2, mean_ns: 50, max_ns: 60 },
            ]
        );
    }

    #[test]
    fn cpu_seconds_are_differences_of_readings_and_shards_add_by_second() {
        let rows = per_second(&[(1, 300, 10), (2, 300, 10), (3, 250, 40), (4, 900, 40)]);
        let row = |at_s, cpu_ns, wait_ns| CpuSecond { at_s, cpu_ns, wait_ns };
        // the third reading went backwards: 0, and the next counts from the largest
        assert_eq!(rows, [row(1, 300, 10), row(2, 0, 0), row(3, 0, 30), row(4, 600, 0)]);
        assert!(per_second(&[]).is_empty());
        let a = [row(1, 10, 1), row(3, 30, 3)];
        let b = [row(2, 7, 0), row(3, 5, 2)];
        assert_eq!(merge_cpu(&[&a, &b]), [row(1, 10, 1), row(2, 7, 0), row(3, 35, 5)]);
        // running 30 % and waiting 65 % of two threads' time: 95 % wanted a CPU
        assert!((demand_share(600, 1_300, 2, 1_000) - 0.95).abs() < 1e-12);
    }

    #[test]
    fn the_sends_a_schedule_made_due_and_nobody_made_are_counted() {
        let fixed = Arrivals::Fixed { interval_ns: 10 };
        let mut rng = SplitMix64::new(1);
        // due at 100, 110, ..., 190 before 200
        assert_eq!(due_before(fixed, &mut rng, 100, 200), 10);
        assert_eq!(due_before(fixed, &mut rng, 200, 200), 0);
        assert_eq!(due_before(fixed, &mut rng, 195, 196), 1);
        // Poisson: as many as the same gaps drawn from the same generator give
        let poisson = Arrivals::Poisson { mean_ns: 1_000 };
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        let mut want = 0;
        let mut t = 0u64;
        while t < 1_000_000 {
            want += 1;
            t += poisson.gap(&mut b).max(1);
        }
        assert_eq!(due_before(poisson, &mut a, 0, 1_000_000), want);
        assert!((900..1_100).contains(&want), "{want}");
    }

    #[test]
    fn a_merged_verdict_is_the_worst_shards_and_names_every_shard_behind() {
        use GeneratorVerdict::{ClientsLost, FlatOut, GeneratorLimited, Kept, SendPathLimited};
        assert_eq!(merge_verdicts(&[("a", Kept), ("b", Kept)]), (Kept, vec![]));
        assert_eq!(merge_verdicts(&[("a", Kept), ("b", SendPathLimited)]), (SendPathLimited, vec!["b"]));
        assert_eq!(
            merge_verdicts(&[("a", SendPathLimited), ("b", Kept), ("c", GeneratorLimited)]),
            (GeneratorLimited, vec!["a", "c"])
        );
        assert_eq!(merge_verdicts(&[("a", FlatOut), ("b", FlatOut)]), (FlatOut, vec![]));
        // kept and flat out weigh the same: kept wins in either order
        assert_eq!(merge_verdicts(&[("a", FlatOut), ("b", Kept)]), (Kept, vec![]));
        assert_eq!(merge_verdicts(&[("a", Kept), ("b", FlatOut)]), (Kept, vec![]));
        assert_eq!(merge_verdicts(&[("a", Kept), ("b", FlatOut), ("c", FlatOut)]), (Kept, vec![]));
        // a shard that lost clients missed the scenario's rate: named, and worse than kept
        assert_eq!(merge_verdicts(&[("a", Kept), ("b", ClientsLost)]), (ClientsLost, vec!["b"]));
        assert_eq!(merge_verdicts(&[("a", ClientsLost), ("b", SendPathLimited)]), (SendPathLimited, vec!["a", "b"]));
        assert_eq!(merge_verdicts(&[]), (FlatOut, vec![]));
    }

    #[test]
    fn the_verdict_separates_the_generator_from_the_send_path() {
        assert_eq!(verdict(None, 1e6, 1.0), GeneratorVerdict::FlatOut);
        assert_eq!(verdict(Some(1000.0), 970.0, 1.0), GeneratorVerdict::Kept);
        assert_eq!(verdict(Some(1000.0), 969.0, 0.95), GeneratorVerdict::GeneratorLimited);
        assert_eq!(verdict(Some(1000.0), 500.0, 0.3), GeneratorVerdict::SendPathLimited);
        assert!((cpu_share(1_800, 2, 1_000) - 0.9).abs() < 1e-12);
        assert!(cpu_share(5, 0, 1_000).abs() < f64::EPSILON);
    }
}
