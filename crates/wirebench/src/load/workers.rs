//! The load runtime: [`WORKERS`] threads, each an event loop (one `mio` poll, one epoll
//! instance, one binary heap of due times) over a fixed share of the clients: whole rooms,
//! room `r` on worker `r mod WORKERS`. A worker wakes only for its own clients' sockets and
//! due times, and the members of a room, which the server writes to back to back, are read
//! in one wake-up when their frames arrive together. A wake-up costs an `epoll_wait` and a
//! look at the heap: no task to schedule, no waker to clone, no timer wheel entry per client.
//! A client is in its worker's table from the start: its ramp slot is its first due time,
//! and it connects (TCP, TLS, the WebSocket handshake) in the same loop, non-blocking.
//! Each worker records into its own shard of [`Stats`] (`Stats::enter_shard`), so a shard's
//! lock is only ever contended by the once-a-second series collection.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use mio::{Events, Interest, Poll, Registry, Token};
use tokio::sync::watch;
use wirebench_core::units::nanos;

use super::client::{Joined, Joining, Plan, Readable, Session, Step};
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

/// The timer's resolution.
const TICK_NS: u64 = 1_000_000;

/// The longest wait before looking at the stop signal again (nothing wakes the loop for it).
const LOOK_AGAIN: Duration = Duration::from_millis(50);

/// Starts [`WORKERS`] workers running the plan's clients; they run until every client is
/// done and `stop` says true (or its sender is gone).
pub fn start(
    plan: &Arc<Plan>,
    stats: &Arc<Stats>,
    cpu: &Arc<RuntimeCpu>,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Workers> {
    let n = stats.shards();
    let mut threads = Vec::with_capacity(n);
    for w in 0..n {
        // Built here, so a failure is an error of the run, not of a thread.
        let poll = Poll::new().context("cannot start a load worker's event loop")?;
        let room_size = plan.cfg.room_size;
        let ids: Vec<u64> =
            plan.cfg.sharding.part.clients.clone().filter(|&id| worker_of(id, room_size, n) == w).collect();
        let (plan, stats, cpu, stop) = (Arc::clone(plan), Arc::clone(stats), Arc::clone(cpu), stop.clone());
        let t = std::thread::Builder::new()
            .name(format!("wb-load-{w}"))
            .spawn(move || {
                cpu.on_start();
                Stats::enter_shard(w);
                run(poll, &ids, &stop, &plan, &stats);
                cpu.on_stop();
            })
            .context("cannot start a load worker thread")?;
        threads.push(t);
    }
    Ok(Workers { threads })
}

/// A client in the worker's table. Unboxed: every slot ends up holding a session, and a box
/// would put a pointer between the event and the session.
#[allow(clippy::large_enum_variant)]
enum Client {
    Join(Joining),
    Open(Session),
}

/// A client in the worker's table, and the due time it last asked for (`u64::MAX`: none).
struct Entry {
    c: Client,
    wake: u64,
}

/// The worker's clients: a table indexed by poll token, and a heap of due times (an entry
/// whose time is no longer its client's is skipped when it comes up).
#[derive(Default)]
struct Table {
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Table {
    fn add(&mut self, c: Client, wake: u64) -> usize {
        let i = self.free.pop().unwrap_or(self.slots.len());
        if i == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[i] = Some(Entry { c, wake });
        self.heap.push(Reverse((wake, i)));
        i
    }

    /// What a session's call returned: its new due time, or its end.
    fn apply(&mut self, i: usize, step: Step) {
        match step {
            Step::Wait(at) => self.wait(i, at),
            Step::Done => self.drop_slot(i),
        }
    }

    /// Client `i` wants its timer at `at` (`u64::MAX`: never).
    fn wait(&mut self, i: usize, at: u64) {
        if let Some(e) = self.slots[i].as_mut().filter(|e| e.wake != at) {
            e.wake = at;
            if at != u64::MAX {
                self.heap.push(Reverse((at, i)));
            }
        }
    }

    fn drop_slot(&mut self, i: usize) {
        self.slots[i] = None;
        self.free.push(i);
    }

    /// What a joining client's call returned. Connected, it becomes a session in the same
    /// slot (its socket keeps its token), and whatever arrived behind the 101 is read now.
    fn joined(&mut self, i: usize, j: Joined, registry: &Registry, plan: &Plan, stats: &Stats) {
        match j {
            Joined::Wait(at) => self.wait(i, at.unwrap_or(u64::MAX)),
            Joined::Watch => {
                let Some(Entry { c: Client::Join(jc), .. }) = self.slots[i].as_mut() else { return };
                let tcp = jc.tcp().expect("connecting");
                if registry.register(tcp, Token(i), Interest::READABLE | Interest::WRITABLE).is_err() {
                    // Cannot be watched (out of kernel memory): counted as never connected.
                    let j = jc.failed(plan, stats);
                    return self.joined(i, j, registry, plan, stats);
                }
                self.wait(i, u64::MAX);
            }
            Joined::Open(s, wake) => {
                let e = self.slots[i].as_mut().expect("a joining client's slot");
                e.c = Client::Open(s);
                e.wake = u64::MAX;
                self.wait(i, wake);
                self.ready(i, Readable::Yes, registry, plan, stats);
            }
            Joined::Done => self.drop_slot(i),
        }
    }

    /// Client `i`'s socket is ready.
    fn ready(&mut self, i: usize, read: Readable, registry: &Registry, plan: &Plan, stats: &Stats) {
        match self.slots.get_mut(i).and_then(Option::as_mut).map(|e| &mut e.c) {
            Some(Client::Open(s)) => {
                let step = s.ready(read, plan, stats);
                self.apply(i, step);
            }
            Some(Client::Join(j)) => {
                let j = j.ready(read, plan, stats);
                self.joined(i, j, registry, plan, stats);
            }
            None => {}
        }
    }

    /// The stop signal, to every client.
    fn stop_all(&mut self, plan: &Plan, stats: &Stats) {
        for i in 0..self.slots.len() {
            match self.slots[i].as_mut().map(|e| &mut e.c) {
                Some(Client::Open(s)) => {
                    let step = s.stop(plan, stats);
                    self.apply(i, step);
                }
                Some(Client::Join(_)) => {
                    Joining::stop(stats);
                    self.drop_slot(i);
                }
                None => {}
            }
        }
    }

    /// Every client whose due time has come.
    fn fire_due(&mut self, registry: &Registry, plan: &Plan, stats: &Stats) {
        let now = plan.now_ns();
        while let Some(&Reverse((at, i))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            let Some(e) = self.slots[i].as_mut().filter(|e| e.wake == at) else { continue };
            // popped: whatever it asks for next is pushed, even the same time
            e.wake = u64::MAX;
            match &mut e.c {
                Client::Open(s) => {
                    let step = s.timer(plan, stats);
                    self.apply(i, step);
                }
                Client::Join(j) => {
                    let j = j.timer(plan, stats);
                    self.joined(i, j, registry, plan, stats);
                }
            }
        }
    }

    /// Clients in the table.
    fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The earliest due time asked for (possibly one no longer asked for: a spare wake-up).
    fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|r| r.0.0)
    }
}

/// One worker's event loop over clients `ids`, until they are done and the stop signal
/// came, or [`STOP_WAIT`] after it.
fn run(mut poll: Poll, ids: &[u64], stop: &watch::Receiver<bool>, plan: &Plan, stats: &Stats) {
    let mut events = Events::with_capacity(1024);
    let mut t = Table::default();
    for &id in ids {
        let (j, at) = Joining::new(id, plan);
        t.add(Client::Join(j), at);
    }
    let mut stop_by: Option<u64> = None;
    loop {
        let now = plan.now_ns();
        let due = t.next_due().into_iter().chain(stop_by).min();
        // Due times are served on a 1 ms grid from time zero, as tokio's timer wheel serves
        // them: every send due within one ms goes in one wake-up. (epoll's timeout is in ms
        // and mio rounds it up, so nothing is woken early.)
        let timeout = due.map(|d| Duration::from_nanos(d.div_ceil(TICK_NS) * TICK_NS - now.min(d)));
        // Until the stop is seen, the wait is bounded: nothing else wakes the loop for it.
        let timeout = if stop_by.is_none() { Some(timeout.map_or(LOOK_AGAIN, |t| t.min(LOOK_AGAIN))) } else { timeout };
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
            t.ready(ev.token().0, read, poll.registry(), plan, stats);
        }
        // (a sender gone counts as the signal)
        if stop_by.is_none() && (*stop.borrow() || stop.has_changed().is_err()) {
            stop_by = Some(plan.now_ns() + nanos(STOP_WAIT));
            t.stop_all(plan, stats);
        }
        t.fire_due(poll.registry(), plan, stats);
        if let Some(by) = stop_by
            && (t.live() == 0 || plan.now_ns() >= by)
        {
            break;
        }
    }
}

impl Workers {
    /// Waits for every worker to finish (each is bounded by [`STOP_WAIT`] after the stop
    /// signal).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clients whose connections are refused are counted as failed, and the worker ends when
    /// the stop signal's sender is gone (as at the end of a run whose main side has quit).
    #[test]
    fn refused_clients_fail_and_a_dropped_stop_ends_the_worker() {
        // A port that refuses: bound, never listened on.
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        let url = format!("ws://127.0.0.1:{port}/r");
        let args = crate::flags::parse_mode::<super::super::Args>(
            "load",
            &[&url, "--clients", "4", "--ramp", "0s", "--duration", "1s", "--room-size", "2"],
        )
        .unwrap();
        let cfg = super::super::config::Config::from_args(&args).unwrap();
        let plan = Arc::new(super::super::plan_of(&cfg, std::time::SystemTime::now()));
        let stats = Arc::new(Stats::new(cfg.mix.types().len(), cfg.clients, cfg.room_size, WORKERS));
        let (tx, rx) = watch::channel(false);
        let w = start(&plan, &stats, &Arc::new(RuntimeCpu::default()), &rx).unwrap();
        // every client has failed (a condition waited for, bounded), then the sender goes
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while stats.done.load(std::sync::atomic::Ordering::Relaxed) < 4 {
            assert!(std::time::Instant::now() < deadline, "the clients never finished");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(tx);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            w.join();
            done_tx.send(()).unwrap();
        });
        done_rx.recv_timeout(Duration::from_secs(10)).expect("the worker ended");
        assert_eq!(stats.failed.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert_eq!(stats.done.load(std::sync::atomic::Ordering::Relaxed), 4);
        assert_eq!(stats.connected.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

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
