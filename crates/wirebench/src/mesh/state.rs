//! What the agent's threads share: the prober writes the latest closed window, the plan and
//! the running totals; the HTTP side reads them for `/v1/*` and `/metrics`. Snapshots are
//! swapped whole behind a mutex (held for a pointer copy), so a reader never sees half a
//! window, and every view of one window shows the same numbers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::histogram::Histogram;
use wirebench_core::auth::Key;
use wirebench_core::mesh::api::{API_VERSION, MatrixReport, NodeRef, PeersReport, Proto};

use crate::discovery::Board;
use crate::serve::embed::Counters;

/// Upper bounds of the per-agent round-trip histograms, seconds: 25 us to 2.5 s.
pub const RTT_BUCKETS: [f64; 16] =
    [25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5];
// The docs' series arithmetic (core `SERIES_MULTICAST`): the buckets, `+Inf`, `_sum`, `_count`.
const _: () = assert!(RTT_BUCKETS.len() as u64 + 3 == wirebench_core::mesh::plan::SERIES_MULTICAST);

/// Cumulative probes to one peer over one transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Probes decided (in closed windows).
    pub sent: u64,
    /// Of which lost.
    pub lost: u64,
}

/// The agent's shared state.
#[derive(Debug)]
pub struct Shared {
    /// This agent.
    pub me: NodeRef,
    /// Latest closed window.
    matrix: Mutex<Arc<MatrixReport>>,
    /// Latest plan.
    peers: Mutex<Arc<PeersReport>>,
    /// Running totals by (peer address, transport), over closed windows.
    totals: Mutex<Arc<BTreeMap<(String, Proto), Totals>>>,
    /// Round trips per transport (udp, tcp, multicast).
    pub rtt: [Histogram; 3],
    /// Replies without a right tag.
    pub replies_unauthenticated: AtomicU64,
    /// Replies to nothing this agent sent (or late, or duplicate).
    pub replies_unmatched: AtomicU64,
    /// HTTP requests refused for a missing or wrong token.
    pub http_unauthorized: AtomicU64,
    /// HTTP connections closed at accept (no served or reserved place left).
    pub http_refused: AtomicU64,
    /// Idle HTTP connections closed to make room for a new one.
    pub http_evicted: AtomicU64,
    /// HTTP connections closed at their idle, request or lifetime deadline.
    pub http_timed_out: AtomicU64,
    /// UDP targets whose own connected socket could not be opened (probed from the shared one).
    pub udp_socket_failures: AtomicU64,
    /// Probe connections closed for carrying what is not probe replies (a bad header, a
    /// frame past 4 KiB, more frames than probes sent on it).
    pub tcp_not_probes: AtomicU64,
    /// Window length, ns.
    pub window_ns: u64,
    /// The serve's counters (probes answered, unauthenticated probes).
    pub serve: Arc<Counters>,
    /// Discovery.
    pub board: Arc<Board>,
    /// The prober is running.
    pub probing: AtomicBool,
    /// The HTTP token's key.
    pub http_key: Option<Key>,
    /// A multicast group is probed.
    pub multicast: bool,
    /// The stall samples' last window (`None` before the first, with `--no-hiccup`, or
    /// after a prober window without a sample).
    pub hiccup: Mutex<Option<HiccupWindow>>,
}

/// What the stall samples beside the probing saw in their last window: the prober's own
/// send-slot wake-ups (the default, `prober::stalls`) or the meter thread's
/// (`--hiccup-interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HiccupWindow {
    /// The expected spacing of the wake-ups, ns: the prober's send slot, or the meter's
    /// sleep interval.
    pub interval_ns: u64,
    /// Wake-ups sampled in the window.
    pub wakeups: u64,
    /// Wake-ups a stall made it miss (filled in at that spacing).
    pub corrected: u64,
    /// Lateness p99, ns.
    pub p99_ns: u64,
    /// The latest wake-up, ns.
    pub max_ns: u64,
}

fn get<T>(m: &Mutex<Arc<T>>) -> Arc<T> {
    m.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

fn put<T>(m: &Mutex<Arc<T>>, v: T) {
    *m.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(v);
}

impl Shared {
    /// Fresh state: no window yet, nothing planned.
    pub fn new(
        me: NodeRef,
        window_ns: u64,
        serve: Arc<Counters>,
        board: Arc<Board>,
        http_key: Option<Key>,
        multicast: bool,
    ) -> Self {
        let matrix = MatrixReport { api_version: API_VERSION, agent: me.clone(), window: None, cells: Vec::new() };
        let peers = PeersReport {
            api_version: API_VERSION,
            agent: me.clone(),
            rate_per_peer: 0.0,
            probes_per_s: 0.0,
            budget_per_s: 0.0,
            peers: Vec::new(),
        };
        Self {
            me,
            matrix: Mutex::new(Arc::new(matrix)),
            peers: Mutex::new(Arc::new(peers)),
            totals: Mutex::new(Arc::new(BTreeMap::new())),
            rtt: std::array::from_fn(|_| Histogram::new(RTT_BUCKETS)),
            replies_unauthenticated: AtomicU64::new(0),
            replies_unmatched: AtomicU64::new(0),
            http_unauthorized: AtomicU64::new(0),
            http_refused: AtomicU64::new(0),
            http_evicted: AtomicU64::new(0),
            http_timed_out: AtomicU64::new(0),
            udp_socket_failures: AtomicU64::new(0),
            tcp_not_probes: AtomicU64::new(0),
            window_ns,
            serve,
            board,
            probing: AtomicBool::new(false),
            http_key,
            multicast,
            hiccup: Mutex::new(None),
        }
    }

    /// The latest closed window.
    pub fn matrix(&self) -> Arc<MatrixReport> {
        get(&self.matrix)
    }
    /// Publishes a closed window and the totals that include it.
    pub fn set_matrix(&self, m: MatrixReport, totals: BTreeMap<(String, Proto), Totals>) {
        put(&self.matrix, m);
        put(&self.totals, totals);
    }
    /// The latest plan.
    pub fn peers(&self) -> Arc<PeersReport> {
        get(&self.peers)
    }
    /// Publishes a plan.
    pub fn set_peers(&self, p: PeersReport) {
        put(&self.peers, p);
    }
    /// Running totals.
    pub fn totals(&self) -> Arc<BTreeMap<(String, Proto), Totals>> {
        get(&self.totals)
    }

    /// The histogram of a transport.
    pub fn rtt_of(&self, p: Proto) -> &Histogram {
        &self.rtt[match p {
            Proto::Udp => 0,
            Proto::Tcp => 1,
            Proto::Multicast => 2,
        }]
    }

    /// Ready: probing, and discovery has answered once.
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.probing.load(Ordering::Acquire) {
            return Err("not probing yet");
        }
        if !self.board.ready() {
            return Err("peer discovery has not answered yet");
        }
        Ok(())
    }
}
