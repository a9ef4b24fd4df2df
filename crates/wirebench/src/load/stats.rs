//! Where clients record: one mutex-guarded [`Recording`] per runtime worker thread (a thread
//! picks its shard once), merged only when the report is built, and the delivery
//! [`Book`] of atomics. A histogram costs about 100 KB whatever it holds, so one per client
//! would not fit 10,000 clients; with one shard per worker the lock, taken once per message
//! event, is only ever contended by the once-a-second series collection.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hdrhistogram::Histogram;
use wirebench_core::load::delivery::Book;
use wirebench_core::load::record::{Recording, histogram};
use wirebench_core::load::results::Counts;

/// Shards: one per worker of the load runtime.
pub const SHARDS: usize = 2;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard: consecutive threads get different ones.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
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
    /// Handshake failures by cause, subprotocols chosen (issue 14 item 4).
    pub handshakes: super::request::Handshakes,
    /// The generator's own health (issue 13 item 4).
    pub generator: super::health::Counters,
}

impl Stats {
    /// Empty stats for `clients` in rooms of `room_size` and a mix of `types` event types.
    pub fn new(types: usize, clients: u64, room_size: u64) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Recording::new(types))).collect(),
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

    /// Runs `f` on this thread's shard.
    pub fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> R {
        let i = SHARD.with(|s| *s);
        f(&mut self.shards[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Reads a counter.
    pub fn get(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
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
