//! Where clients record: one mutex-guarded shard per runtime worker thread (a thread
//! picks its shard once), each with its own histograms, merged only when the report is
//! built. A histogram costs about 100 KB whatever it holds, so one per client would not fit
//! 10,000 clients; with one shard per worker the lock, taken once per message event, is
//! only ever contended by the once-a-second series collection.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hdrhistogram::Histogram;
use wirebench_core::latency;

/// Shards: one per worker of the load runtime.
pub const SHARDS: usize = 2;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard: consecutive threads get different ones.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// A load histogram: integer ns, 3 significant digits, up to one hour, but 1 µs lowest
/// discernible value (the messages' time stamps are µs): about 100 KB instead of the
/// 190 KB of a 1 ns one, and every shard holds 25 of them.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, latency::MAX_TRACKABLE_NS, latency::SIGFIG).expect("constant bounds are valid")
}

/// Error kinds, counted per variant and named only in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A send failed (the connection broke while writing).
    Send,
    /// A received message had no `type` or `ts`.
    Malformed,
    /// A received message's type is not in the mix.
    UnknownType,
    /// A received message's send time is later than its arrival (other hosts' clocks).
    NegativeDelay,
    /// The connection attempt failed.
    Connect,
    /// A read failed (reset, protocol error).
    Read,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [Self; 6] =
        [Self::Send, Self::Malformed, Self::UnknownType, Self::NegativeDelay, Self::Connect, Self::Read];

    /// The report's name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Send => "send_failed",
            Self::Malformed => "malformed_message",
            Self::UnknownType => "unknown_type",
            Self::NegativeDelay => "negative_delay",
            Self::Connect => "connect_failed",
            Self::Read => "read_failed",
        }
    }
}

/// One event type's recordings.
#[derive(Debug)]
pub struct TypeRec {
    /// Sent.
    pub sent: u64,
    /// Delivered to other members.
    pub received: u64,
    /// Arrival minus embedded send time.
    pub delay: Histogram<u64>,
    /// Arrival minus intended send time.
    pub delay_intended: Histogram<u64>,
    /// Reply arrival minus embedded send time.
    pub reply: Histogram<u64>,
}

impl TypeRec {
    fn new() -> Self {
        Self { sent: 0, received: 0, delay: histogram(), delay_intended: histogram(), reply: histogram() }
    }
}

/// One shard.
#[derive(Debug)]
pub struct Shard {
    /// Per event type, in mix order.
    pub types: Vec<TypeRec>,
    /// Delays in the current second (the series).
    pub second: Histogram<u64>,
    /// Sent in the current second.
    pub second_sent: u64,
    /// Received in the current second.
    pub second_received: u64,
    /// Connect times.
    pub connect: Histogram<u64>,
    /// Upload shaper hold times.
    pub up_hold: Histogram<u64>,
    /// Download shaper hold times.
    pub down_hold: Histogram<u64>,
    /// Sum of send slips, ns.
    pub slip_sum: u128,
    /// Largest slip, ns.
    pub slip_max: u64,
    /// Errors by [`ErrorKind`] index.
    pub errors: [u64; ErrorKind::ALL.len()],
}

impl Shard {
    fn new(types: usize) -> Self {
        Self {
            types: (0..types).map(|_| TypeRec::new()).collect(),
            second: histogram(),
            second_sent: 0,
            second_received: 0,
            connect: histogram(),
            up_hold: histogram(),
            down_hold: histogram(),
            slip_sum: 0,
            slip_max: 0,
            errors: [0; ErrorKind::ALL.len()],
        }
    }

    /// Counts an error.
    pub fn error(&mut self, k: ErrorKind) {
        self.errors[k as usize] += 1;
    }

    /// A send of type `t`, `slip` ns behind its intended time.
    pub fn on_send(&mut self, t: usize, slip: u64) {
        self.types[t].sent += 1;
        self.second_sent += 1;
        self.slip_sum += u128::from(slip);
        self.slip_max = self.slip_max.max(slip);
    }

    /// A delivery of type `t` from another member.
    pub fn on_delivery(&mut self, t: usize, delay: u64, intended: Option<u64>) {
        let r = &mut self.types[t];
        r.received += 1;
        latency::record(&mut r.delay, delay);
        if let Some(d) = intended {
            latency::record(&mut r.delay_intended, d);
        }
        latency::record(&mut self.second, delay);
        self.second_received += 1;
    }

    /// A reply to this client's own request of type `t`.
    pub fn on_reply(&mut self, t: usize, rtt: u64) {
        latency::record(&mut self.types[t].reply, rtt);
        self.second_received += 1;
    }
}

/// Everything the clients share.
#[derive(Debug)]
pub struct Stats {
    shards: Box<[Mutex<Shard>]>,
    /// Handshakes completed.
    pub connected: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connection attempts that failed.
    pub failed: AtomicU64,
    /// Connections lost before the end.
    pub disconnects: AtomicU64,
    /// Client tasks finished.
    pub done: AtomicU64,
    /// Upload payload bits/s of the busiest client.
    pub up_bps_max: AtomicU64,
    /// Download payload bits/s of the busiest client.
    pub down_bps_max: AtomicU64,
    /// Frames through the upload shaper.
    pub up_frames: AtomicU64,
    /// Frames through the download shaper.
    pub down_frames: AtomicU64,
}

impl Stats {
    /// Empty stats for a mix of `types` event types.
    pub fn new(types: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::new(types))).collect(),
            connected: AtomicU64::new(0),
            open: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            done: AtomicU64::new(0),
            up_bps_max: AtomicU64::new(0),
            down_bps_max: AtomicU64::new(0),
            up_frames: AtomicU64::new(0),
            down_frames: AtomicU64::new(0),
        }
    }

    /// Runs `f` on this thread's shard.
    pub fn with<R>(&self, f: impl FnOnce(&mut Shard) -> R) -> R {
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

    /// Takes the current second from every shard: (sent, received, delays).
    pub fn take_second(&self) -> (u64, u64, Histogram<u64>) {
        let mut h = histogram();
        let (mut s, mut r) = (0, 0);
        for sh in &*self.shards {
            let mut sh = sh.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let _ = h.add(&sh.second);
            sh.second.reset();
            s += std::mem::take(&mut sh.second_sent);
            r += std::mem::take(&mut sh.second_received);
        }
        (s, r, h)
    }

    /// Every shard, for the final merge.
    pub fn shards(&self) -> impl Iterator<Item = std::sync::MutexGuard<'_, Shard>> {
        self.shards.iter().map(|m| m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}
