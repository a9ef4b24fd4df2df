//! The load runtime: [`WORKERS`] threads, each an event loop (one `mio` poll, one epoll
//! instance, one binary heap of due times) over a fixed share of the clients: whole rooms,
//! room `r` on worker `r mod WORKERS`. A worker wakes only for its own clients' sockets and
//! due times, and the members of a room, which the server writes to back to back, are read
//! in one wake-up when their frames arrive together. A wake-up costs an `epoll_wait` and a
//! look at the heap: no task to schedule, no waker to clone, no timer wheel entry per client.
//! Each worker records into its own shard of [`Stats`] (`Stats::enter_shard`), so a shard's
//! lock is only ever contended by the once-a-second series collection and its connector.
//!
//! Connecting (the ramp's sleeps, TCP, TLS and the WebSocket handshake) runs as tasks on a
//! second thread per worker, its connector, with its own single-threaded tokio runtime; each
//! open connection is handed over (a channel and the poll's waker) and leaves tokio. The
//! connector also wakes its worker when the stop signal comes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use mio::{Events, Interest, Poll, Token, Waker};
use tokio::sync::watch;
use wirebench_core::units::nanos;

use super::client::{self, Plan, Readable, Session, Step};
use super::health::RuntimeCpu;
use super::stats::Stats;

/// Worker threads (and recording shards). One: at the event rates of a few thousand
/// clients each wake-up of a worker costs more than its events (an `epoll_wait`, a context
/// switch, on a VM often a halted vCPU woken), and one thread shares its wake-ups among all
/// clients. Measured at 1,000 clients × 2/s (`perf stat` on `bench/load.sh`'s run): two
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

/// The poll's token for the connector's wake-ups (sessions are tokens 0, 1, ...).
const WAKE: Token = Token(usize::MAX);

/// The timer's resolution.
const TICK_NS: u64 = 1_000_000;

/// The longest wait for the connector's word (see `run`).
const LOOK_AGAIN: Duration = Duration::from_millis(50);

/// An open connection handed from the connector to its worker.
struct Joined {
    id: u64,
    ws: client::Ws,
    start_ns: u64,
}

/// What a worker shares with its connector.
struct Handoff {
    tx: mpsc::Sender<Joined>,
    waker: Arc<Waker>,
}

/// Starts [`WORKERS`] workers (each with its connector) running the plan's clients; they run
/// until every client is done and `stop` says true (or its sender is gone).
pub fn start(
    plan: &Arc<Plan>,
    stats: &Arc<Stats>,
    cpu: &Arc<RuntimeCpu>,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Workers> {
    let n = stats.shards();
    let mut threads = Vec::with_capacity(2 * n);
    for w in 0..n {
        // Built here, so a failure is an error of the run, not of a thread. The hooks count
        // any blocking-pool thread's CPU; the two threads register themselves below.
        let (on_start, on_stop) = (Arc::clone(cpu), Arc::clone(cpu));
        let rt = tokio::runtime::Builder::new_current_thread()
            .on_thread_start(move || on_start.on_start())
            .on_thread_stop(move || on_stop.on_stop())
            .enable_io()
            .enable_time()
            .build()
            .context("cannot start the runtime")?;
        let poll = Poll::new().context("cannot start a load worker's event loop")?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE).context("cannot start a load worker's event loop")?);
        let (tx, rx) = mpsc::channel();
        let room_size = plan.cfg.room_size;
        let ids: Vec<u64> =
            plan.cfg.sharding.part.clients.clone().filter(|&id| worker_of(id, room_size, n) == w).collect();
        let handoff = Handoff { tx, waker };
        let (plan_c, stats_c, cpu_c, stop_c) = (Arc::clone(plan), Arc::clone(stats), Arc::clone(cpu), stop.clone());
        let t = std::thread::Builder::new()
            .name(format!("wb-connect-{w}"))
            .spawn(move || {
                cpu_c.on_start();
                Stats::enter_shard(w);
                rt.block_on(connect_all(ids, &plan_c, &stats_c, stop_c, handoff));
                rt.shutdown_timeout(Duration::from_secs(1));
                cpu_c.on_stop();
            })
            .context("cannot start a load connector thread")?;
        threads.push(t);
        let (plan, stats, cpu, stop) = (Arc::clone(plan), Arc::clone(stats), Arc::clone(cpu), stop.clone());
        let t = std::thread::Builder::new()
            .name(format!("wb-load-{w}"))
            .spawn(move || {
                cpu.on_start();
                Stats::enter_shard(w);
                run(poll, &rx, &stop, &plan, &stats);
                cpu.on_stop();
            })
            .context("cannot start a load worker thread")?;
        threads.push(t);
    }
    Ok(Workers { threads })
}

/// The connector: each client joins at its ramp slot and, connected, goes to the worker;
/// then it waits for the stop signal, wakes the worker for it, and ends when its joins have.
async fn connect_all(ids: Vec<u64>, plan: &Arc<Plan>, stats: &Arc<Stats>, mut stop: watch::Receiver<bool>, h: Handoff) {
    let tasks: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let (plan, stats, mut stop) = (Arc::clone(plan), Arc::clone(stats), stop.clone());
            let (tx, waker) = (h.tx.clone(), Arc::clone(&h.waker));
            tokio::spawn(async move {
                let Some((ws, start_ns)) = client::join(id, &plan, &stats, &mut stop).await else {
                    stats.done.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                if tx.send(Joined { id, ws, start_ns }).is_ok() {
                    let _ = waker.wake();
                }
            })
        })
        .collect();
    drop(h.tx);
    let _ = stop.wait_for(|s| *s).await;
    let _ = h.waker.wake();
    for t in tasks {
        let _ = t.await;
    }
    // Every sender is gone now: the worker sees the channel closed on this wake-up.
    let _ = h.waker.wake();
}

/// A session in the worker's table, and the due time it last asked for.
struct Entry {
    s: Session,
    wake: u64,
}

/// The worker's sessions: a table indexed by poll token, and a heap of due times (an entry
/// whose time is no longer its session's is skipped when it comes up).
#[derive(Default)]
struct Table {
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Table {
    fn add(&mut self, s: Session, wake: u64) -> usize {
        let i = self.free.pop().unwrap_or(self.slots.len());
        if i == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[i] = Some(Entry { s, wake });
        self.heap.push(Reverse((wake, i)));
        i
    }

    /// What a session's call returned: its new due time, or its end.
    fn apply(&mut self, i: usize, step: Step) {
        match step {
            Step::Wait(at) => {
                if let Some(e) = self.slots[i].as_mut().filter(|e| e.wake != at) {
                    e.wake = at;
                    self.heap.push(Reverse((at, i)));
                }
            }
            Step::Done => {
                self.slots[i] = None;
                self.free.push(i);
            }
        }
    }

    /// Session `i`'s socket is ready.
    fn ready(&mut self, i: usize, read: Readable, plan: &Plan, stats: &Stats) {
        if let Some(e) = self.slots.get_mut(i).and_then(Option::as_mut) {
            let step = e.s.ready(read, plan, stats);
            self.apply(i, step);
        }
    }

    /// A connection handed over: a session, its socket watched, and whatever arrived before
    /// the watch (a frame behind the 101) read now.
    fn admit(&mut self, j: Joined, poll: &Poll, plan: &Plan, stats: &Stats) {
        let (s, wake) = Session::new(j.id, j.ws, j.start_ns, plan);
        let i = self.add(s, wake);
        let e = self.slots[i].as_mut().expect("just added");
        let step = if poll.registry().register(e.s.tcp(), Token(i), Interest::READABLE | Interest::WRITABLE).is_ok() {
            e.s.ready(Readable::Yes, plan, stats)
        } else {
            // Cannot be watched (out of kernel memory): closed, bounded by its timer.
            e.s.stop(plan, stats)
        };
        self.apply(i, step);
    }

    /// The stop signal, to every session.
    fn stop_all(&mut self, plan: &Plan, stats: &Stats) {
        for i in 0..self.slots.len() {
            if let Some(e) = self.slots[i].as_mut() {
                let step = e.s.stop(plan, stats);
                self.apply(i, step);
            }
        }
    }

    /// Every session whose due time has come.
    fn fire_due(&mut self, plan: &Plan, stats: &Stats) {
        let now = plan.now_ns();
        while let Some(&Reverse((at, i))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            if let Some(e) = self.slots[i].as_mut().filter(|e| e.wake == at) {
                // popped: whatever it asks for next is pushed, even the same time
                e.wake = u64::MAX;
                let step = e.s.timer(plan, stats);
                self.apply(i, step);
            }
        }
    }

    /// Sessions in the table.
    fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The earliest due time asked for (possibly one no longer asked for: a spare wake-up).
    fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|r| r.0.0)
    }
}

/// One worker's event loop, until its clients are done and the stop signal came, or
/// [`STOP_WAIT`] after it.
fn run(mut poll: Poll, rx: &mpsc::Receiver<Joined>, stop: &watch::Receiver<bool>, plan: &Plan, stats: &Stats) {
    let mut events = Events::with_capacity(1024);
    let mut t = Table::default();
    let mut stop_by: Option<u64> = None;
    let mut handed_all = false;
    loop {
        let now = plan.now_ns();
        let due = t.next_due().into_iter().chain(stop_by).min();
        // Due times are served on a 1 ms grid from time zero, as tokio's timer wheel serves
        // them: every send due within one ms goes in one wake-up. (epoll's timeout is in ms
        // and mio rounds it up, so nothing is woken early.)
        let timeout = due.map(|d| Duration::from_nanos(d.div_ceil(TICK_NS) * TICK_NS - now.min(d)));
        // The connector's wake-ups are not relied on alone (one has been seen lost while the
        // poll waited, and a connector that died sends none): until the stop is seen and
        // every client handed over, the wait is bounded, so neither is more than this late.
        let timeout = if stop_by.is_none() || !handed_all {
            Some(timeout.map_or(LOOK_AGAIN, |t| t.min(LOOK_AGAIN)))
        } else {
            timeout
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        for ev in &events {
            let read = if ev.is_read_closed() || ev.is_error() {
                Readable::Closed
            } else if ev.is_readable() {
                Readable::Yes
            } else {
                Readable::No
            };
            t.ready(ev.token().0, read, plan, stats);
        }
        loop {
            match rx.try_recv() {
                Ok(j) => t.admit(j, &poll, plan, stats),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    handed_all = true;
                    break;
                }
            }
        }
        if stop_by.is_none() && *stop.borrow() {
            stop_by = Some(plan.now_ns() + nanos(STOP_WAIT));
            t.stop_all(plan, stats);
        }
        t.fire_due(plan, stats);
        if let Some(by) = stop_by
            && ((handed_all && t.live() == 0) || plan.now_ns() >= by)
        {
            break;
        }
    }
}

impl Workers {
    /// Waits for every worker and connector to finish (each is bounded by [`STOP_WAIT`] after
    /// the stop signal, plus one second to drop what is left).
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
