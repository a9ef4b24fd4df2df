//! The load runtime: [`WORKERS`] threads, each with its own single-threaded tokio runtime
//! (its own epoll instance, timer wheel and run queue) and a fixed share of the clients:
//! whole rooms, room `r` on worker `r mod WORKERS`. A worker wakes only for its own
//! clients' sockets and timers: no work stealing and no waking of an idle sibling to steal
//! (a multi-thread runtime made one futex call per message event at 1,000 clients), and the
//! members of a room, which the server writes to back to back, are read in one wake-up when
//! their frames arrive together. Each worker records into its own shard of
//! [`Stats`] (`Stats::enter_shard`), so a shard's lock is only ever contended by the
//! once-a-second series collection.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;

use super::client::{self, Plan};
use super::health::RuntimeCpu;
use super::stats::Stats;

/// Worker threads (and recording shards). One: at the event rates of a few thousand
/// clients each wake-up of a worker costs more than its events (an `epoll_wait`, a context
/// switch, on a VM often a halted vCPU woken), and one thread shares its wake-ups among all
/// clients. Measured at 1,000 clients × 2/s (`perf stat` on `bench/load.sh`'s run): two single-threaded
/// workers made 2.5 times the `epoll_wait` calls of one and cost more CPU per event; one
/// worker also kept the rate at 10,000 clients. The partition below runs any number.
pub const WORKERS: usize = 1;

/// After the stop signal, how long a worker waits for its clients' close handshakes (each
/// bounded by its own 2 s) before dropping the rest.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// The running workers.
#[derive(Debug)]
pub struct Workers {
    threads: Vec<JoinHandle<()>>,
}

/// The worker that runs client `id` (rooms of `room_size` consecutive ids).
pub fn worker_of(id: u64, room_size: u64, workers: usize) -> usize {
    let n = u64::try_from(workers.max(1)).unwrap_or(1);
    usize::try_from(id / room_size.max(1) % n).unwrap_or(0)
}

/// Starts [`WORKERS`] threads running the plan's clients; they run until every client is
/// done and `stop` says true (or its sender is gone).
pub fn start(
    plan: &Arc<Plan>,
    stats: &Arc<Stats>,
    cpu: &Arc<RuntimeCpu>,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Workers> {
    let n = stats.shards();
    let mut runtimes = Vec::with_capacity(n);
    for _ in 0..n {
        // Built here, so a failure is an error of the run, not of a thread. The hooks count
        // any blocking-pool thread's CPU; the worker thread registers itself below.
        let (on_start, on_stop) = (Arc::clone(cpu), Arc::clone(cpu));
        runtimes.push(
            tokio::runtime::Builder::new_current_thread()
                .on_thread_start(move || on_start.on_start())
                .on_thread_stop(move || on_stop.on_stop())
                .enable_io()
                .enable_time()
                .build()
                .context("cannot start the runtime")?,
        );
    }
    let mut threads = Vec::with_capacity(n);
    for (w, rt) in runtimes.into_iter().enumerate() {
        let room_size = plan.cfg.room_size;
        let ids: Vec<u64> =
            plan.cfg.sharding.part.clients.clone().filter(|&id| worker_of(id, room_size, n) == w).collect();
        let (plan, stats, cpu, stop) = (Arc::clone(plan), Arc::clone(stats), Arc::clone(cpu), stop.clone());
        let t = std::thread::Builder::new()
            .name(format!("wb-load-{w}"))
            .spawn(move || {
                cpu.on_start();
                run(w, &rt, ids, &plan, &stats, &stop);
                rt.shutdown_timeout(Duration::from_secs(1));
                cpu.on_stop();
            })
            .context("cannot start a load worker thread")?;
        threads.push(t);
    }
    Ok(Workers { threads })
}

/// One worker: its clients as tasks on its own runtime, until they are done and the stop
/// signal came, or [`STOP_WAIT`] after it.
fn run(
    w: usize,
    rt: &tokio::runtime::Runtime,
    ids: Vec<u64>,
    plan: &Arc<Plan>,
    stats: &Arc<Stats>,
    stop: &watch::Receiver<bool>,
) {
    Stats::enter_shard(w);
    let mut stop = stop.clone();
    rt.block_on(async {
        let handles: Vec<_> = ids
            .into_iter()
            .map(|id| tokio::spawn(client::run(id, Arc::clone(plan), Arc::clone(stats), stop.clone())))
            .collect();
        let _ = stop.wait_for(|s| *s).await;
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        for h in handles {
            let _ = tokio::time::timeout_at(deadline, h).await;
        }
    });
}

impl Workers {
    /// Waits for every worker to finish (each is bounded by [`STOP_WAIT`] after the stop
    /// signal, plus one second to drop what is left).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_rooms_go_to_one_worker_and_rooms_alternate() {
        // Rooms of 5: ids 0-4 on worker 0, 5-9 on worker 1, 10-14 on worker 0 again.
        let w: Vec<usize> = (0..15).map(|id| worker_of(id, 5, 2)).collect();
        assert_eq!(w, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(worker_of(7, 1, 2), 1);
        assert_eq!(worker_of(7, 0, 2), 1, "a room size of 0 is taken as 1, not a division by zero");
        assert!((0..1000).all(|id| worker_of(id, 5, 1) == 0));
    }
}
