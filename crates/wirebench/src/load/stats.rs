//! Where clients record: one mutex-guarded [`Recording`] per load worker thread (each
//! worker says which is its own with [`Stats::enter_shard`]), merged only when the report is
//! built, and the delivery [`Book`] of atomics. A histogram costs 16 to 196 KB by the range
//! it holds, so one per client would not fit 10,000 clients; with one shard per worker the
//! lock, taken once per message event (one uncontended atomic exchange each way), is only
//! ever contended by the once-a-second series collection.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use wirebench_core::load::delivery::Book;
use wirebench_core::load::record::{Recording, histogram};
use wirebench_core::load::results::Counts;

thread_local! {
    /// This thread's shard, set by the worker that runs on it (0 on any other thread).
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

/// Everything the clients share.
#[derive(Debug)]
pub struct Stats {
    shards: Box<[Mutex<Recording>]>,
    /// Who should receive what.
    pub book: Book,
    /// Handshakes completed.
    pub connected: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connection attempts that failed.
    pub failed: AtomicU64,
    /// The HTTP status of the last refused handshake (0: none).
    pub refused_status: AtomicU64,
    /// Connections lost before the end.
    pub disconnects: AtomicU64,
    /// Client tasks finished.
    pub done: AtomicU64,
    /// Upload payload bits/s of the busiest client, as written to its socket.
    pub up_bps_max: AtomicU64,
    /// Download payload bits/s of the busiest client, as the model delivered.
    pub down_bps_max: AtomicU64,
    /// Frames written through the upload shaper.
    pub up_frames: AtomicU64,
    /// Frames through the download model.
    pub down_frames: AtomicU64,
    /// Handshake failures by cause, subprotocols chosen.
    pub handshakes: super::request::Handshakes,
    /// The generator's own health.
    pub generator: super::health::Counters,
}

impl Stats {
    /// Empty stats for `clients` in rooms of `room_size`, a mix of `types` event types and
    /// `shards` recording shards (one per worker thread, at least one).
    pub fn new(types: usize, clients: u64, room_size: u64, shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1)).map(|_| Mutex::new(Recording::new(types))).collect(),
            book: Book::new(clients, room_size),
            connected: AtomicU64::new(0),
            open: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            refused_status: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            done: AtomicU64::new(0),
            up_bps_max: AtomicU64::new(0),
            down_bps_max: AtomicU64::new(0),
            up_frames: AtomicU64::new(0),
            down_frames: AtomicU64::new(0),
            handshakes: super::request::Handshakes::default(),
            generator: super::health::Counters::default(),
        }
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Makes shard `i` this thread's (the worker thread `i` calls it once, first).
    pub fn enter_shard(i: usize) {
        SHARD.with(|s| s.set(i));
    }

    /// Runs `f` on this thread's shard.
    pub fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> R {
        let i = SHARD.with(Cell::get).min(self.shards.len() - 1);
        f(&mut self.shards[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Reads a counter.
    pub fn get(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
    }

    /// Clients connected, none is open and some were disconnected: the server dropped
    /// every client.
    pub fn all_dropped(&self) -> bool {
        Self::get(&self.connected) > 0 && Self::get(&self.open) == 0 && Self::get(&self.disconnects) > 0
    }

    /// Adds one.
    pub fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the current second from every shard: (sent, received, delays, (slip sum,
    /// slip max)), the slips taken under the same lock as the sends they belong to.
    pub fn take_second(&self) -> (u64, u64, Histogram<u64>, (u128, u64)) {
        let mut delays = histogram();
        let (mut sent, mut received, mut slip_sum, mut slip_max) = (0, 0, 0, 0);
        for sh in &*self.shards {
            let mut g = sh.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (s, r) = g.take_second(&mut delays);
            let (ss, sm) = g.take_second_slip();
            sent += s;
            received += r;
            slip_sum += ss;
            slip_max = slip_max.max(sm);
        }
        (sent, received, delays, (slip_sum, slip_max))
    }

    /// Every shard merged.
    pub fn merged(&self, types: usize) -> Recording {
        let mut all = Recording::new(types);
        for sh in &*self.shards {
            all.add(&sh.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        }
        all
    }

    /// The run-wide counts.
    pub fn counts(&self) -> Counts {
        let g = Self::get;
        Counts {
            connected: g(&self.connected),
            failed: g(&self.failed),
            disconnects: g(&self.disconnects),
            up_bps_max: g(&self.up_bps_max),
            down_bps_max: g(&self.down_bps_max),
            up_frames: g(&self.up_frames),
            down_frames: g(&self.down_frames),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_thread_records_into_the_shard_it_entered_and_the_merge_adds_up() {
        let stats = Stats::new(2, 10, 5, 2);
        std::thread::scope(|s| {
            for (shard, sends) in [(0, 3u64), (1, 5u64)] {
                let stats = &stats;
                s.spawn(move || {
                    Stats::enter_shard(shard);
                    for i in 0..sends {
                        stats.with(|r| r.on_send(usize::from(i % 2 == 1), 10 * i, 4));
                    }
                });
            }
        });
        let per_shard: Vec<u64> =
            stats.shards.iter().map(|m| m.lock().expect("not poisoned").types.iter().map(|t| t.sent).sum()).collect();
        assert_eq!(per_shard, [3, 5], "each thread recorded into its own shard");
        let all = stats.merged(2);
        assert_eq!(all.types[0].sent + all.types[1].sent, 8);
        assert_eq!(all.types[0].expected + all.types[1].expected, 32);
        assert_eq!(all.slip_max, 40);
        assert_eq!(stats.take_second().0, 8, "the second's sends are taken from both shards");
        assert_eq!(stats.take_second().0, 0, "and only once");
    }

    #[test]
    fn a_thread_that_entered_no_shard_records_into_the_first_and_a_shard_past_the_end_into_the_last() {
        let stats = Stats::new(1, 5, 5, 2);
        std::thread::scope(|s| {
            s.spawn(|| stats.with(|r| r.on_send(0, 0, 1)));
            s.spawn(|| {
                Stats::enter_shard(7);
                stats.with(|r| r.on_send(0, 0, 1));
            });
        });
        let per_shard: Vec<u64> = stats.shards.iter().map(|m| m.lock().expect("not poisoned").types[0].sent).collect();
        assert_eq!(per_shard, [1, 1]);
    }
}
