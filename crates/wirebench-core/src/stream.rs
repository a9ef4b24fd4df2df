//! Receive-side accounting of a sequenced stream, per publisher (STYLE C1: pure, fed with
//! sequence numbers and times): received, missing, duplicates, out of order with
//! DatagramTest's average offset, loss gaps, RFC 3550 jitter, throughput; for the lifetime
//! and per interval.
//!
//! Definitions (stated, because tools differ):
//! - **expected** = highest sequence seen + 1 - first sequence seen (a stream's start is its
//!   first datagram; datagrams lost before the first arrival are invisible, as in iperf).
//! - **missing** = expected - unique received. A datagram that arrives late fills its hole.
//! - **out of order** = a new datagram whose sequence is below the highest seen; its
//!   **offset** is how far below (DatagramTest's "avg offset" is the mean of these).
//! - **loss gap** = a jump past the next expected sequence when it is detected: its length
//!   in datagrams, and its duration from the last arrival before it to the arrival that
//!   revealed it. Gaps later filled by reordered datagrams still count as seen.
//! - **duplicate** = a sequence already received (inside a window that grows with the
//!   arrivals up to 2^20 sequences, `seq`; older ones are counted as `too_old`).
//!
//! [`table`] keeps one `StreamRx` per publisher for a receiver that takes anyone's datagrams
//! (`wirebench listen`), within a budget.

use serde::{Deserialize, Serialize};

use crate::jitter::Jitter;
use crate::seq::{Arrival, SeqWindow};
use delay::{DelayRise, DelayTrend};

pub mod client;
pub mod delay;
pub mod table;
pub mod wake;

/// The largest sequence window of a stream (it starts far smaller: `seq`).
pub const WINDOW: usize = 1 << 20;

/// Counters of one stream (lifetime or one interval); plain data for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamCounts {
    /// Unique datagrams received.
    pub received: u64,
    /// Bytes of those (UDP payload).
    pub bytes: u64,
    /// Expected datagrams (see the module docs).
    pub expected: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// New datagrams below the highest sequence seen.
    pub out_of_order: u64,
    /// Sum of their offsets (for the mean).
    pub offset_sum: u64,
    /// Loss gaps seen.
    pub gaps: u64,
    /// Datagrams in those gaps.
    pub gap_datagrams: u64,
    /// Time spanned by those gaps, ns.
    pub gap_ns: u64,
    /// Datagrams too old to tell new from duplicate.
    pub too_old: u64,
    /// First and last arrival, ns (receiver clock).
    pub first_ns: u64,
    /// Last arrival.
    pub last_ns: u64,
    /// RFC 3550 jitter at the end of the span, ns.
    pub jitter_ns: f64,
    /// Lifetime counts only: how much the one-way delay rose from the first quarter of the
    /// sending time to the last (`delay`: a queue building on the path). Absent when not
    /// measured (a short stream, an older receiver, `listen`, an interval row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DelayRise>,
}

impl StreamCounts {
    /// Missing datagrams: expected minus unique received.
    pub const fn missing(&self) -> u64 {
        self.expected.saturating_sub(self.received)
    }

    /// Share of expected datagrams that arrived (1.0 when nothing was expected).
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    pub fn success_rate(&self) -> f64 {
        if self.expected == 0 { 1.0 } else { self.received as f64 / self.expected as f64 }
    }

    /// Mean out-of-order offset, datagrams.
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    pub fn avg_offset(&self) -> f64 {
        if self.out_of_order == 0 { 0.0 } else { self.offset_sum as f64 / self.out_of_order as f64 }
    }

    /// Mean gap length, datagrams.
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    pub fn mean_gap(&self) -> f64 {
        if self.gaps == 0 { 0.0 } else { self.gap_datagrams as f64 / self.gaps as f64 }
    }

    /// Mean gap duration, ns.
    #[expect(clippy::cast_precision_loss, reason = "ratios")]
    pub fn mean_gap_ns(&self) -> f64 {
        if self.gaps == 0 { 0.0 } else { self.gap_ns as f64 / self.gaps as f64 }
    }

    /// Span from first to last arrival, ns.
    pub const fn span_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.first_ns)
    }

    /// The receiving time of these counts, ns: first to last arrival stretched by one
    /// message's share, since `received` messages arrive over `received - 1` gaps (0 with
    /// fewer than two messages). Bytes over it are bytes over the time they took to arrive.
    pub fn receiving_ns(&self) -> u64 {
        if self.received < 2 {
            return 0;
        }
        let n = u128::from(self.received);
        u64::try_from(u128::from(self.span_ns()) * n / (n - 1)).unwrap_or(u64::MAX)
    }

    /// The receiving time of streams arriving side by side (parallel TCP connections), ns:
    /// from the earliest start of arrival to the last arrival. A stream's arrival starts one
    /// of its mean gaps before its first message ([`Self::receiving_ns`]): when the first
    /// message of one connection is complete, the others' first messages are already partly
    /// in, so the earliest first arrival alone would leave their bytes too little time.
    pub fn receiving_ns_of(parts: &[Self]) -> u64 {
        let live = || parts.iter().filter(|c| c.received > 0);
        let Some(end) = live().map(|c| c.last_ns).max() else { return 0 };
        let start = live().map(|c| c.first_ns.saturating_sub(c.receiving_ns() - c.span_ns())).min().unwrap_or(end);
        end - start.min(end)
    }

    /// Datagrams per second over `span_ns` (or the given span).
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    pub fn per_sec(&self, span_ns: u64) -> f64 {
        if span_ns == 0 { 0.0 } else { self.received as f64 * 1e9 / span_ns as f64 }
    }

    /// Payload bits per second over `span_ns`.
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    pub fn bits_per_sec(&self, span_ns: u64) -> f64 {
        if span_ns == 0 { 0.0 } else { self.bytes as f64 * 8e9 / span_ns as f64 }
    }

    /// What happened between `earlier` and `self` (both lifetime snapshots).
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            received: self.received - earlier.received,
            bytes: self.bytes - earlier.bytes,
            expected: self.expected - earlier.expected,
            duplicates: self.duplicates - earlier.duplicates,
            out_of_order: self.out_of_order - earlier.out_of_order,
            offset_sum: self.offset_sum - earlier.offset_sum,
            gaps: self.gaps - earlier.gaps,
            gap_datagrams: self.gap_datagrams - earlier.gap_datagrams,
            gap_ns: self.gap_ns - earlier.gap_ns,
            too_old: self.too_old - earlier.too_old,
            first_ns: if earlier.received == 0 { self.first_ns } else { earlier.last_ns },
            last_ns: self.last_ns,
            jitter_ns: self.jitter_ns,
            delay: None,
        }
    }

    /// Adds another stream's counts (for totals across publishers).
    pub fn add(&mut self, o: &Self) {
        let first = if self.received == 0 {
            o.first_ns
        } else if o.received == 0 {
            self.first_ns
        } else {
            self.first_ns.min(o.first_ns)
        };
        self.received = self.received.saturating_add(o.received);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.expected = self.expected.saturating_add(o.expected);
        self.duplicates = self.duplicates.saturating_add(o.duplicates);
        self.out_of_order = self.out_of_order.saturating_add(o.out_of_order);
        self.offset_sum = self.offset_sum.saturating_add(o.offset_sum);
        self.gaps = self.gaps.saturating_add(o.gaps);
        self.gap_datagrams = self.gap_datagrams.saturating_add(o.gap_datagrams);
        self.gap_ns = self.gap_ns.saturating_add(o.gap_ns);
        self.too_old = self.too_old.saturating_add(o.too_old);
        self.first_ns = first;
        self.last_ns = self.last_ns.max(o.last_ns);
        self.jitter_ns = self.jitter_ns.max(o.jitter_ns);
        // the publisher whose delay rose most
        self.delay = match (self.delay, o.delay) {
            (Some(a), Some(b)) => Some(if b.rise_ns > a.rise_ns { b } else { a }),
            (a, b) => a.or(b),
        };
    }
}

/// The receive-side state of one publisher's stream. Its window starts at 128 bytes and
/// grows with the datagrams that arrive (to 128 KiB).
#[derive(Debug, Clone)]
pub struct StreamRx {
    window: SeqWindow,
    first_seq: Option<u64>,
    highest: u64,
    jitter: Jitter,
    delay: DelayTrend,
    counts: StreamCounts,
}

impl Default for StreamRx {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamRx {
    /// A stream with nothing received.
    pub fn new() -> Self {
        Self {
            window: SeqWindow::growing(WINDOW),
            first_seq: None,
            highest: 0,
            jitter: Jitter::default(),
            delay: DelayTrend::new(),
            counts: StreamCounts::default(),
        }
    }

    /// Accounts one datagram of `len` payload bytes with sequence `seq`, sent at `sent_ns`
    /// (sender's clock) and received at `recv_ns` (ours).
    pub fn on_datagram(&mut self, seq: u64, len: usize, sent_ns: u64, recv_ns: u64) {
        let c = &mut self.counts;
        match self.window.on_seq(seq) {
            Arrival::Duplicate => {
                c.duplicates += 1;
                return;
            }
            Arrival::TooOld => {
                c.too_old += 1;
                return;
            }
            Arrival::New => {}
        }
        match self.first_seq {
            None => {
                self.first_seq = Some(seq);
                self.highest = seq;
                c.first_ns = recv_ns;
                c.expected = 1;
            }
            Some(first) if seq > self.highest => {
                let gap = seq - self.highest - 1;
                if gap > 0 {
                    c.gaps += 1;
                    c.gap_datagrams += gap;
                    c.gap_ns += recv_ns.saturating_sub(c.last_ns);
                }
                self.highest = seq;
                c.expected = seq - first + 1;
            }
            Some(first) => {
                if seq < first {
                    // Before the first arrival: the stream started earlier than we thought.
                    c.expected += first - seq;
                    self.first_seq = Some(seq);
                }
                c.out_of_order += 1;
                c.offset_sum += self.highest - seq;
            }
        }
        c.received += 1;
        c.bytes += len as u64;
        c.last_ns = c.last_ns.max(recv_ns);
        self.jitter.update(sent_ns, recv_ns);
        c.jitter_ns = self.jitter.ns();
        self.delay.on(sent_ns, recv_ns);
    }

    /// The lifetime counts so far (without the delay's rise: [`Self::summary`]).
    pub const fn counts(&self) -> &StreamCounts {
        &self.counts
    }

    /// The lifetime counts so far with the one-way delay's rise over the stream
    /// (`StreamCounts::delay`).
    pub fn summary(&self) -> StreamCounts {
        StreamCounts { delay: self.delay.rise(), ..self.counts }
    }

    /// Bytes its sequence window holds now.
    pub fn window_bytes(&self) -> usize {
        self.window.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> StreamCounts {
        let mut rx = StreamRx::new();
        for (i, &s) in seqs.iter().enumerate() {
            let t = i as u64 * 1000;
            rx.on_datagram(s, 100, s * 1000, t + 50_000);
        }
        *rx.counts()
    }

    #[test]
    fn in_order_stream_is_complete() {
        let c = feed(&(0..1000).collect::<Vec<_>>());
        assert_eq!(
            (c.received, c.expected, c.missing(), c.duplicates, c.out_of_order, c.gaps),
            (1000, 1000, 0, 0, 0, 0)
        );
        assert_eq!(c.bytes, 100_000);
        assert!((c.success_rate() - 1.0).abs() < f64::EPSILON);
    }

    /// A hand-made trace: 0 1 2 [3 4 lost] 5 6 [7 late] 8 7 9 9(dup) [10..=12 lost] 13
    #[test]
    fn hand_computed_trace() {
        let c = feed(&[0, 1, 2, 5, 6, 8, 7, 9, 9, 13]);
        assert_eq!(c.received, 9);
        assert_eq!(c.expected, 14);
        assert_eq!(c.missing(), 5, "3, 4, 10, 11, 12");
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.out_of_order, 1);
        assert!((c.avg_offset() - 1.0).abs() < f64::EPSILON, "7 arrived when 8 was highest");
        // gaps as detected: 3-4 (2), 7 (1, later filled), 10-12 (3)
        assert_eq!((c.gaps, c.gap_datagrams), (3, 6));
        assert!((c.mean_gap() - 2.0).abs() < f64::EPSILON);
        // arrivals are 1 us apart; a gap lasts from the last new arrival before it: 1 us,
        // 1 us, and 2 us for the last (the duplicate in between is not an arrival)
        assert_eq!(c.gap_ns, 4 * 1000);
    }

    #[test]
    fn intervals_subtract() {
        let mut rx = StreamRx::new();
        for s in 0..10u64 {
            rx.on_datagram(s, 10, s, s + 1);
        }
        let a = *rx.counts();
        for s in [12u64, 13, 11] {
            rx.on_datagram(s, 10, s, s + 1);
        }
        let d = rx.counts().since(&a);
        assert_eq!((d.received, d.expected, d.out_of_order, d.gaps, d.bytes), (3, 4, 1, 1, 30));
    }

    use proptest::prelude::*;

    proptest! {
        /// Against an independent oracle on a lossy, duplicating, reordering trace: a
        /// seeded simulation of a link, counted with sets.
        #[test]
        fn matches_a_set_oracle(seed: u64, n in 1u64..3000, loss in 0.0f64..0.3, dup in 0.0f64..0.1, reorder in 0.0f64..0.2) {
            let mut rng = crate::rng::SplitMix64::new(seed);
            let mut trace = Vec::new();
            for s in 0..n {
                if rng.chance(loss) { continue; }
                trace.push(s);
                if rng.chance(dup) { trace.push(s); }
            }
            // reorder: swap neighbours
            for i in 1..trace.len() {
                if rng.chance(reorder) { trace.swap(i - 1, i); }
            }
            let c = feed(&trace);
            let unique: std::collections::BTreeSet<u64> = trace.iter().copied().collect();
            let (Some(&lo), Some(&hi)) = (unique.first(), unique.last()) else { return Ok(()) };
            prop_assert_eq!(c.received, unique.len() as u64);
            prop_assert_eq!(c.expected, hi - lo + 1);
            prop_assert_eq!(c.missing(), (hi - lo + 1) - unique.len() as u64);
            prop_assert_eq!(c.duplicates, trace.len() as u64 - unique.len() as u64);
            // out of order: a first arrival below the highest seen before it
            let (mut seen, mut top, mut ooo) = (std::collections::BTreeSet::new(), None::<u64>, 0u64);
            for &s in &trace {
                if seen.insert(s) {
                    if top.is_some_and(|t| s < t) { ooo += 1; }
                    top = Some(top.map_or(s, |t| t.max(s)));
                }
            }
            prop_assert_eq!(c.out_of_order, ooo);
        }
    }

    /// The oldest datagram arrives after the last new highest: what was expected reaches
    /// back to it, although no later arrival recomputes it from the new first sequence.
    #[test]
    fn the_oldest_arriving_last_extends_what_was_expected() {
        let c = feed(&[5, 6, 7, 3]);
        assert_eq!((c.received, c.expected, c.missing(), c.out_of_order, c.offset_sum), (4, 5, 1, 1, 4));
        let c = feed(&[1, 0]);
        assert_eq!((c.received, c.expected, c.missing()), (2, 2, 0));
    }

    proptest! {
        /// Arrivals in any order, duplicates included (the neighbour swaps above never let
        /// the oldest arrive last): the counts still match sets.
        #[test]
        fn any_order_matches_a_set_oracle(trace in proptest::collection::vec(0u64..600, 1..400)) {
            let c = feed(&trace);
            let unique: std::collections::BTreeSet<u64> = trace.iter().copied().collect();
            let (lo, hi) = (*unique.first().unwrap(), *unique.last().unwrap());
            prop_assert_eq!(c.received, unique.len() as u64);
            prop_assert_eq!(c.expected, hi - lo + 1);
            prop_assert_eq!(c.duplicates, trace.len() as u64 - unique.len() as u64);
            prop_assert_eq!(c.bytes, 100 * unique.len() as u64);
        }
    }

    #[test]
    fn receiving_time_counts_the_gaps_before_each_arrival() {
        // 5 messages 1 us apart: 4 us from first to last, 5 us of arrivals at that pace.
        let c = feed(&[0, 1, 2, 3, 4]);
        assert_eq!(c.span_ns(), 4_000);
        assert_eq!(c.receiving_ns(), 5_000);
        assert_eq!(feed(&[0]).receiving_ns(), 0, "one arrival spans no time");
        assert_eq!(feed(&[0, 1]).receiving_ns(), 2_000, "two arrivals, one gap");
        assert_eq!(StreamCounts::default().receiving_ns(), 0);
    }

    /// Two connections side by side: one's messages complete at 10, 20, 30 us, the other's
    /// at 14, 24, 34 us. Each began arriving one gap (10 us) before its first: 0 to 34 us.
    #[test]
    fn side_by_side_streams_start_one_gap_before_their_first_arrival() {
        let c = |first_ns, last_ns| StreamCounts { received: 3, first_ns, last_ns, ..StreamCounts::default() };
        assert_eq!(StreamCounts::receiving_ns_of(&[c(10_000, 30_000), c(14_000, 34_000)]), 34_000);
        assert_eq!(StreamCounts::receiving_ns_of(&[c(10_000, 30_000)]), c(10_000, 30_000).receiving_ns());
        let one = StreamCounts { received: 1, first_ns: 40_000, last_ns: 40_000, ..StreamCounts::default() };
        assert_eq!(StreamCounts::receiving_ns_of(&[c(10_000, 30_000), one]), 40_000, "a lone message has no gap");
        assert_eq!(StreamCounts::receiving_ns_of(&[StreamCounts::default()]), 0);
        // The same 100 us later (the start no longer clamps at 0): 90 to 124 us; a stream
        // that received nothing adds no start.
        let (a, b) = (c(100_000, 120_000), c(104_000, 124_000));
        assert_eq!(StreamCounts::receiving_ns_of(&[a, b]), 34_000);
        assert_eq!(StreamCounts::receiving_ns_of(&[a, StreamCounts::default()]), a.receiving_ns());
    }

    /// The other figures of the hand-made trace above: 9 of 14 arrived, its 3 gaps took
    /// 4 us between them, and the ratios of counts without their events are 0, not NaN.
    #[test]
    fn hand_computed_ratios() {
        let c = feed(&[0, 1, 2, 5, 6, 8, 7, 9, 9, 13]);
        assert!((c.success_rate() - 9.0 / 14.0).abs() < 1e-12, "{}", c.success_rate());
        assert!((c.mean_gap_ns() - 4_000.0 / 3.0).abs() < 1e-9, "{}", c.mean_gap_ns());
        let c = feed(&[5, 6, 7, 3]);
        assert!((c.avg_offset() - 4.0).abs() < f64::EPSILON, "3 arrived when 7 was highest");
        let clean = feed(&[0, 1, 2]);
        assert_eq!((clean.avg_offset(), clean.mean_gap(), clean.mean_gap_ns()), (0.0, 0.0, 0.0));
        assert!((StreamCounts::default().success_rate() - 1.0).abs() < f64::EPSILON, "nothing expected");
    }

    #[test]
    fn rates_over_a_span() {
        let c = StreamCounts { received: 5, bytes: 500, ..StreamCounts::default() };
        assert!((c.per_sec(2_000_000_000) - 2.5).abs() < 1e-12, "{}", c.per_sec(2_000_000_000));
        assert!((c.bits_per_sec(2_000_000_000) - 2_000.0).abs() < 1e-9, "{}", c.bits_per_sec(2_000_000_000));
        assert_eq!((c.per_sec(0), c.bits_per_sec(0)), (0.0, 0.0), "no span, no rate");
    }

    /// Every counter of an interval is the lifetime's difference, each counter having
    /// moved before the interval too. First: 0 1 2 4 3 3(dup) 5..=9 2000 5(too old), each
    /// 500 ns in transit; then a gap of two (2001, 2002; 2002 then arrives late), a
    /// duplicate, a jump of 2,996 and one too old to tell.
    #[test]
    fn intervals_subtract_every_counter() {
        let mut rx = StreamRx::new();
        for s in [0u64, 1, 2, 4, 3, 3, 5, 6, 7, 8, 9, 2_000, 5] {
            rx.on_datagram(s, 10, s * 1000, s * 1000 + 500);
        }
        let a = *rx.counts();
        assert_eq!(
            (a.duplicates, a.out_of_order, a.offset_sum, a.gaps, a.gap_datagrams, a.too_old),
            (1, 1, 1, 2, 1 + 1_990, 1)
        );
        assert_eq!(a.since(&StreamCounts::default()), a, "the first interval is the lifetime so far");
        rx.on_datagram(2_003, 10, 2_003_000, 2_010_000); // transit 7,000: |D| 6,500
        rx.on_datagram(2_003, 10, 2_003_000, 2_010_100); // a duplicate
        rx.on_datagram(2_002, 10, 2_002_000, 2_011_000); // transit 9,000: |D| 2,000
        rx.on_datagram(5_000, 10, 5_000_000, 5_000_500); // transit 500 again: |D| 8,500
        rx.on_datagram(1, 10, 1_000, 5_000_600); // 4,000 below the top, the window 1,024
        let mut jitter = 0.0;
        for d in [6_500.0, 2_000.0, 8_500.0] {
            jitter += (d - jitter) / 16.0;
        }
        let want = StreamCounts {
            received: 3,
            bytes: 30,
            expected: 3_000,
            duplicates: 1,
            out_of_order: 1,
            offset_sum: 1,
            gaps: 2,
            gap_datagrams: 2 + 2_996,
            gap_ns: (2_010_000 - 2_000_500) + (5_000_500 - 2_011_000),
            too_old: 1,
            first_ns: 2_000_500,
            last_ns: 5_000_500,
            jitter_ns: jitter,
            delay: None,
        };
        assert_eq!(rx.counts().since(&a), want);
    }

    /// `summary` adds the delay's rise to the counts: a queue building 1 us a datagram
    /// over 8 ms of sending.
    #[test]
    fn the_summary_carries_the_delays_rise() {
        let mut rx = StreamRx::new();
        assert_eq!(rx.window_bytes(), 128, "the smallest window");
        for s in 0..80u64 {
            rx.on_datagram(s, 10, s * 100_000, s * 100_000 + 1_000 + s * 1_000);
        }
        let s = rx.summary();
        assert_eq!(s, StreamCounts { delay: s.delay, ..*rx.counts() });
        assert!(rx.counts().delay.is_none());
        let rise = s.delay.expect("8 ms of sending measures a rise");
        assert!((50_000..80_000).contains(&rise.rise_ns), "{rise:?}");
        for s in 80..2_000u64 {
            rx.on_datagram(s, 10, s * 100_000, s * 100_000 + 1_000);
        }
        assert!(rx.window_bytes() > 128, "2,000 arrivals grow the window: {}", rx.window_bytes());
    }

    /// Totals across publishers: sums, the earliest first and latest last arrival, the
    /// highest jitter and the publisher whose delay rose most; a publisher with nothing
    /// received does not move the first arrival.
    #[test]
    fn totals_add_every_counter() {
        let rise = |rise_ns| Some(DelayRise { rise_ns, over_ns: 8 });
        let a = StreamCounts {
            received: 3,
            bytes: 300,
            expected: 4,
            duplicates: 1,
            out_of_order: 2,
            offset_sum: 3,
            gaps: 1,
            gap_datagrams: 1,
            gap_ns: 1_000,
            too_old: 0,
            first_ns: 5_000,
            last_ns: 9_000,
            jitter_ns: 10.0,
            delay: rise(100),
        };
        let b = StreamCounts {
            received: 2,
            bytes: 150,
            expected: 5,
            duplicates: 2,
            out_of_order: 1,
            offset_sum: 4,
            gaps: 2,
            gap_datagrams: 3,
            gap_ns: 500,
            too_old: 7,
            first_ns: 4_000,
            last_ns: 8_000,
            jitter_ns: 20.0,
            delay: rise(300),
        };
        let want = StreamCounts {
            received: 5,
            bytes: 450,
            expected: 9,
            duplicates: 3,
            out_of_order: 3,
            offset_sum: 7,
            gaps: 3,
            gap_datagrams: 4,
            gap_ns: 1_500,
            too_old: 7,
            first_ns: 4_000,
            last_ns: 9_000,
            jitter_ns: 20.0,
            delay: rise(300),
        };
        for (x, y) in [(a, b), (b, a)] {
            let mut t = x;
            t.add(&y);
            assert_eq!(t, want);
        }
        let mut t = StreamCounts::default();
        t.add(&b);
        assert_eq!(t, b, "into nothing: the other's first arrival, not 0");
        let mut t = a;
        t.add(&StreamCounts { last_ns: 1, ..StreamCounts::default() });
        assert_eq!(t, a, "nothing received keeps the first arrival");
    }

    #[test]
    fn totals_add() {
        let mut a = feed(&[0, 1, 3]);
        let b = feed(&[0, 2]);
        a.add(&b);
        assert_eq!((a.received, a.expected, a.missing()), (5, 7, 2));
    }
}
