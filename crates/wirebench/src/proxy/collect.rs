//! Gathering what the forwarding threads measured: each thread keeps its own [`Tally`] per
//! direction and hands it over once an interval (and at the end) through a channel, so
//! the packet path shares nothing and takes no lock. The collector merges them into the
//! current interval and the run's total, and turns them into report values.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use wirebench_core::impair::{Loss, Spec, Tally};
use wirebench_core::latency::{DEFAULT_PERCENTILES, Summary, value_at_percentile};
use wirebench_core::report::{
    LatencyView, ProxyAchieved, ProxyDirection, ProxyInterval, ProxyIntervalSide, ProxyRequested, encode_histogram,
};

/// One thread's tallies since its last flush.
#[derive(Debug, Default)]
pub struct Flush {
    /// Client to upstream.
    pub up: Tally,
    /// Upstream to client.
    pub down: Tally,
}

/// The sending side, one clone per forwarding thread.
pub type FlushTx = Sender<Flush>;

/// Merges flushes into intervals and a total.
#[derive(Debug)]
pub struct Collector {
    rx: Receiver<Flush>,
    interval: Flush,
    total: Flush,
    interval_start_ns: u64,
    /// Closed intervals, oldest first.
    pub intervals: Vec<ProxyInterval>,
}

impl Collector {
    /// A collector reading `rx`.
    pub fn new(rx: Receiver<Flush>) -> Self {
        Self { rx, interval: Flush::default(), total: Flush::default(), interval_start_ns: 0, intervals: Vec::new() }
    }

    /// Merges whatever arrives within `timeout`.
    pub fn pump(&mut self, timeout: Duration) {
        match self.rx.recv_timeout(timeout) {
            Ok(f) => self.add(&f),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
        self.drain();
    }

    /// Merges everything already sent.
    pub fn drain(&mut self) {
        while let Ok(f) = self.rx.try_recv() {
            self.add(&f);
        }
    }

    fn add(&mut self, f: &Flush) {
        for (dst, src) in [(&mut self.interval.up, &f.up), (&mut self.interval.down, &f.down)] {
            dst.merge(src);
        }
        for (dst, src) in [(&mut self.total.up, &f.up), (&mut self.total.down, &f.down)] {
            dst.merge(src);
        }
    }

    /// Closes the current interval at `now_ns` (ns since the start) and returns it.
    pub fn close_interval(&mut self, now_ns: u64) -> &ProxyInterval {
        let duration_ns = now_ns.saturating_sub(self.interval_start_ns).max(1);
        let done = std::mem::take(&mut self.interval);
        self.intervals.push(ProxyInterval {
            start_ns: self.interval_start_ns,
            duration_ns,
            up: interval_side(&done.up, duration_ns),
            down: interval_side(&done.down, duration_ns),
        });
        self.interval_start_ns = now_ns;
        self.intervals.last().expect("just pushed")
    }

    /// Has the current interval seen traffic?
    pub fn interval_is_empty(&self) -> bool {
        self.interval.up.is_empty() && self.interval.down.is_empty()
    }

    /// The run so far, per direction.
    pub fn directions(&self, up: &Spec, down: &Spec) -> (ProxyDirection, ProxyDirection) {
        (direction(up, &self.total.up), direction(down, &self.total.down))
    }
}

fn interval_side(t: &Tally, duration_ns: u64) -> ProxyIntervalSide {
    let q = |p: f64| value_at_percentile(&t.delay, p);
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let rate_bps = (t.bytes_out * 8) as f64 * 1e9 / duration_ns as f64;
    ProxyIntervalSide {
        packets_in: t.packets_in,
        packets_out: t.packets_out,
        loss_pct: t.percent_of_in(t.lost),
        drop_pct: t.percent_of_in(t.dropped()),
        reorder_pct: t.percent_of_in(t.reordered),
        duplicates: t.duplicates,
        rate_bps,
        delay_p50_ns: q(50.0),
        delay_p99_ns: q(99.0),
    }
}

/// What the spec asked for, in report units.
pub fn requested(s: &Spec) -> ProxyRequested {
    let (model, bp, br) = match s.loss {
        None => ("none", None, None),
        Some(Loss::Random { .. }) => ("random", None, None),
        Some(Loss::Burst { p, r }) => ("burst", Some(p * 100.0), Some(r * 100.0)),
    };
    ProxyRequested {
        delay_ns: s.delay_ns,
        jitter_ns: s.jitter.map_or(0, |j| j.ns),
        jitter_dist: s.jitter.map(|j| j.dist.name().to_owned()),
        loss_model: model.into(),
        loss_pct: s.loss.map_or(0.0, |l| l.mean() * 100.0),
        loss_burst_p_pct: bp,
        loss_burst_r_pct: br,
        reorder_pct: s.reorder.map_or(0.0, |r| r.p * 100.0),
        reorder_gap_ns: s.reorder.map_or(0, |r| r.gap_ns),
        duplicate_pct: s.duplicate * 100.0,
        rate_bps: s.rate_bps,
        burst_bytes: s.rate_bps.map(|_| s.burst_bytes),
        queue_limit_ns: s.queue_limit_ns,
    }
}

fn view(measures: wirebench_core::report::Measure, h: &hdrhistogram::Histogram<u64>) -> LatencyView {
    LatencyView { measures, summary: Summary::of(h, &DEFAULT_PERCENTILES), histogram: encode_histogram(h) }
}

fn direction(s: &Spec, t: &Tally) -> ProxyDirection {
    let achieved = ProxyAchieved {
        packets_in: t.packets_in,
        bytes_in: t.bytes_in,
        packets_out: t.packets_out,
        bytes_out: t.bytes_out,
        lost: t.lost,
        queue_drops: t.queue_drops,
        full_drops: t.full_drops,
        send_drops: t.send_drops,
        loss_pct: t.percent_of_in(t.lost),
        drop_pct: t.percent_of_in(t.dropped()),
        reordered: t.reordered,
        reorder_pct: t.percent_of_in(t.reordered),
        duplicates: t.duplicates,
        duplicate_pct: t.percent_of_in(t.duplicates),
        offered_bps: t.in_bps(),
        rate_bps: t.out_bps(),
        active_ns: t.busy_out.active_ns(),
        added_delay: view(wirebench_core::report::Measure::AddedDelay, &t.delay),
        queue_delay: s.rate_bps.map(|_| view(wirebench_core::report::Measure::QueueDelay, &t.queue)),
        path_delay: Some(view(wirebench_core::report::Measure::PathDelay, &t.delay_part)),
    };
    ProxyDirection { requested: requested(s), achieved }
}
