//! The load generator's own health: the send slip and the CPU of the load
//! runtime's threads per second, and `wirebench_core::generator`'s verdict on whether the
//! generator, rather than the server, missed the rate asked for. The hooks are off the send
//! path: the slips ride on the recording each send already makes (`Recording::on_send`),
//! and the CPU is read once a second from `/proc/self/task/TID/schedstat` by the loop that
//! collects the series, for the threads the runtime registered when they started: their
//! time on a CPU and their time ready but waiting for one (`schedstat`). The rate asked is
//! the scenario's: each client that ends tells its schedule's sends that were never made,
//! and a client dropped before the end of sending, or never connected, leaves the rest of
//! its schedule to be counted (`generator::schedule`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use wirebench_core::generator::{SlipSecond, cpu_share, demand_share, due_before, per_second, schedule};
use wirebench_core::load::Arrivals;
use wirebench_core::report::{GeneratorHealth, LoadResults, LoadSchedule};
use wirebench_core::rng::SplitMix64;
use wirebench_net::rusage::{Sched, task_sched, thread_id};

/// What the clients count for the generator's health (in `Stats`).
#[derive(Debug, Default)]
pub struct Counters {
    /// Sends the schedules of clients that stayed connected made due that were never made
    /// (cut off at the end or by a stop).
    pub unsent: AtomicU64,
    /// Clients dropped before the end of sending (the server closed them, the connection
    /// was lost, a read or a write failed).
    pub dropped: AtomicU64,
    /// For each client dropped before the end of sending or never connected: the next send
    /// its schedule had due. Its rest is counted when the report is built, up to the end of
    /// the measured window. At most one entry per client, pushed once, when it ends.
    cut: Mutex<Vec<u64>>,
}

impl Counters {
    fn cut(&self, next: u64) {
        self.cut.lock().unwrap_or_else(PoisonError::into_inner).push(next);
    }

    /// The account of the run so far: `sent` sends made, `failed` clients never connected,
    /// the measured window ending at `until` (ns after the start).
    pub fn schedule(&self, arrivals: Arrivals, sent: u64, failed: u64, until: u64) -> LoadSchedule {
        let cut = self.cut.lock().unwrap_or_else(PoisonError::into_inner);
        let (unsent, dropped) = (self.unsent.load(Ordering::Relaxed), self.dropped.load(Ordering::Relaxed));
        schedule::account(arrivals, sent, unsent, &cut, until, dropped, failed)
    }
}

/// When a client ends (after its loop, once), its next send due at `next`: one `dropped`
/// before the end of sending leaves its schedule from `next` on as lost with it; one that
/// stayed counts the sends due before now (at most the end of sending) that it never made.
pub fn on_client_end(
    plan: &super::client::Plan,
    stats: &super::stats::Stats,
    rng: &mut SplitMix64,
    next: u64,
    dropped: bool,
) {
    if dropped {
        stats.generator.dropped.fetch_add(1, Ordering::Relaxed);
        stats.generator.cut(next);
        return;
    }
    let until = plan.now_ns().min(plan.end_ns);
    let n = due_before(plan.cfg.arrivals, rng, next, until);
    if n > 0 {
        stats.generator.unsent.fetch_add(n, Ordering::Relaxed);
    }
}

/// A client that never connected (counted in `failed`): its whole schedule, which would
/// have begun at `next` (its join time and its first gap), is lost.
pub fn on_client_failed(stats: &super::stats::Stats, next: u64) {
    stats.generator.cut(next);
}

/// Worker threads of the load runtime: the denominator of the CPU share.
pub const WORKERS: u64 = super::workers::WORKERS as u64;

/// The run and wait time of the load's worker threads, exact.
#[derive(Debug, Default)]
pub struct RuntimeCpu {
    inner: Mutex<Threads>,
}

#[derive(Debug, Default)]
struct Threads {
    live: Vec<i32>,
    ended: Sched,
    unreadable: bool,
}

fn add(a: Sched, b: Sched) -> Sched {
    Sched { run_ns: a.run_ns + b.run_ns, wait_ns: a.wait_ns + b.wait_ns }
}

impl RuntimeCpu {
    /// `on_thread_start`: registers the calling thread.
    pub fn on_start(&self) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).live.push(thread_id());
    }

    /// `on_thread_stop`: keeps what the calling thread used, and forgets it.
    pub fn on_stop(&self) {
        let tid = thread_id();
        let mut t = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match task_sched(tid) {
            Some(s) => t.ended = add(t.ended, s),
            None => t.unreadable = true,
        }
        t.live.retain(|&x| x != tid);
    }

    /// Every registered thread's run and wait time so far (`None` where schedstat is
    /// missing).
    pub fn total(&self) -> Option<Sched> {
        let mut t = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut sum = Some(t.ended);
        for &tid in &t.live {
            sum = sum.zip(task_sched(tid)).map(|(a, b)| add(a, b));
        }
        t.unreadable |= sum.is_none();
        sum.filter(|_| !t.unreadable)
    }
}

/// The per-second readings, collected by the loop that builds the series.
#[derive(Debug, Default, Clone)]
pub struct Seconds {
    slips: Vec<SlipSecond>,
    cpu: Vec<(u64, u64, u64)>,
}

/// One slip row: `sent` sends whose slips added up to `sum` ns, the largest `max`.
fn slip_row(at_s: u64, sent: u64, (sum, max): (u128, u64)) -> SlipSecond {
    let mean_ns = if sent == 0 { 0 } else { u64::try_from(sum / u128::from(sent)).unwrap_or(u64::MAX) };
    SlipSecond { at_s, sends: sent, mean_ns, max_ns: max }
}

impl Seconds {
    /// Second `at_s` ended: its sends and their slips, and the runtime's CPU so far.
    pub fn on_second(&mut self, at_s: u64, sent: u64, slip: (u128, u64), cpu: Option<Sched>) {
        self.slips.push(slip_row(at_s, sent, slip));
        if let Some(c) = cpu {
            self.cpu.push((at_s, c.run_ns, c.wait_ns));
        }
    }

    /// The health of the run so far: `results` as built (its rates; its series' last row
    /// may be the partial second whose sends and slips `partial` holds), the schedule
    /// account, the runtime's CPU now, the run's wall time, and `secs`, the time base of
    /// the achieved rate (`load::results::send_secs`).
    ///
    /// The rate asked is what the scenario's schedules asked in the window: sent, due but
    /// never made, and the schedules of clients dropped or never connected (the nominal
    /// rate less what clients that connected late, and the random phases, left out). The
    /// verdict counts the time the threads waited for a CPU as busy: a generator starved of
    /// CPU by its own host is the generator's limit; and it is never "kept" when clients
    /// were lost (`generator::schedule::verdict`).
    pub fn health(
        &self,
        results: &LoadResults,
        partial: (u64, (u128, u64)),
        account: LoadSchedule,
        cpu: Option<Sched>,
        wall_ns: u64,
        secs: f64,
    ) -> GeneratorHealth {
        let mut slips = self.slips.clone();
        let last = slips.last().map_or(0, |s| s.at_s);
        if partial.0 > 0 {
            slips.push(slip_row(last + 1, partial.0, partial.1));
        }
        let mut readings = self.cpu.clone();
        if let Some(c) = cpu
            && readings.last().is_none_or(|r| (r.1, r.2) != (c.run_ns, c.wait_ns))
        {
            readings.push((readings.last().map_or(1, |r| r.0 + 1), c.run_ns, c.wait_ns));
        }
        let (cpu_ns, wait_ns) = cpu.map_or((0, None), |c| (c.run_ns, Some(c.wait_ns)));
        let busy = demand_share(cpu_ns, wait_ns.unwrap_or(0), WORKERS, wall_ns);
        let (asked, verdict) = schedule::verdict(&account, secs, busy);
        GeneratorHealth {
            threads: WORKERS,
            asked_per_s: Some(asked),
            achieved_per_s: results.achieved_send_per_s,
            cpu_ns,
            cpu_share: cpu_share(cpu_ns, WORKERS, wall_ns),
            wait_ns,
            verdict,
            slip_seconds: slips,
            cpu_seconds: per_second(&readings),
            behind: Vec::new(),
            schedule: Some(account),
        }
    }
}
