//! Did a queue build on the path while a stream ran? The one-way delay's trend.
//!
//! A datagram's transit is its receive time minus its send time, on two clocks whose offset
//! is unknown but constant (and whose rates differ by parts per million), so a *change* of
//! transit is the path's. When a sender offers more than a bottleneck carries, the queue in
//! front of it grows and every later datagram waits longer, loss or not (until the queue
//! overflows); the receiver's own wake-up only ever adds to a transit. So the trend is read
//! from minima: the sending time is cut into at most [`SPANS`] equal spans, each keeping the
//! lowest transit of the datagrams sent in it (the spans double in length as the stream goes
//! on, so any length fits in a fixed array and nothing is allocated), and the **rise** is the
//! lowest transit of the last quarter of the spans minus the lowest of the first quarter.
//! Pure: fed with the two times of each datagram.

use serde::{Deserialize, Serialize};

/// Spans kept at most.
pub const SPANS: usize = 16;
/// The first spans are 2^20 ns (about 1 ms) long.
const FIRST_SPAN_SHIFT: u32 = 20;
/// An empty span.
const EMPTY: i64 = i64::MAX;

/// The lowest transits of a stream's spans of sending time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayTrend {
    /// The send time spans count from (the first datagram's).
    origin_ns: Option<u64>,
    /// Spans are `1 << shift` ns long.
    shift: u32,
    /// The lowest transit of each span, ns (`EMPTY`: none yet).
    mins: [i64; SPANS],
    /// Spans in use (the highest with a datagram, plus one).
    used: usize,
}

/// How much the one-way delay rose over a stream: the lowest transit of the last quarter
/// of its sending time minus that of the first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayRise {
    /// The rise, ns (negative: the delay fell, a queue drained).
    pub rise_ns: i64,
    /// Sending time from the start of the first quarter to the start of the last, ns: the
    /// time the rise took at most.
    pub over_ns: u64,
}

impl Default for DelayTrend {
    fn default() -> Self {
        Self::new()
    }
}

impl DelayTrend {
    /// Nothing seen.
    pub const fn new() -> Self {
        Self { origin_ns: None, shift: FIRST_SPAN_SHIFT, mins: [EMPTY; SPANS], used: 0 }
    }

    /// A datagram sent at `sent_ns` (the sender's clock) received at `recv_ns` (ours).
    /// Returns true when a span's lowest transit changed or a span began (the rise may
    /// have moved).
    #[inline]
    pub fn on(&mut self, sent_ns: u64, recv_ns: u64) -> bool {
        #[expect(clippy::cast_possible_truncation, reason = "clamped into i64")]
        let transit =
            (i128::from(recv_ns) - i128::from(sent_ns)).clamp(i128::from(i64::MIN), i128::from(EMPTY - 1)) as i64;
        let origin = *self.origin_ns.get_or_insert(sent_ns);
        // a datagram sent before the first one that arrived counts in the first span
        let mut at = sent_ns.saturating_sub(origin) >> self.shift;
        while at >= SPANS as u64 {
            self.halve();
            at >>= 1;
        }
        #[expect(clippy::cast_possible_truncation, reason = "below SPANS")]
        let i = at as usize;
        let opened = i >= self.used;
        self.used = self.used.max(i + 1);
        if transit < self.mins[i] {
            self.mins[i] = transit;
            return true;
        }
        opened
    }

    /// Merges neighbouring spans: half as many, twice as long.
    fn halve(&mut self) {
        for i in 0..SPANS / 2 {
            self.mins[i] = self.mins[2 * i].min(self.mins[2 * i + 1]);
        }
        self.mins[SPANS / 2..].fill(EMPTY);
        self.used = self.used.div_ceil(2);
        self.shift += 1;
    }

    /// The rise so far: `None` until four spans are in use (too short a stream to tell a
    /// start from an end) or while a quarter has no datagram.
    pub fn rise(&self) -> Option<DelayRise> {
        if self.used < 4 {
            return None;
        }
        let q = self.used / 4;
        let low = |s: &[i64]| s.iter().copied().min().filter(|&m| m != EMPTY);
        let first = low(&self.mins[..q])?;
        let last = low(&self.mins[self.used - q..self.used])?;
        Some(DelayRise { rise_ns: last.saturating_sub(first), over_ns: ((self.used - q) as u64) << self.shift })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A trace: `n` datagrams every `gap` ns from a send clock at 5 s, received on a clock
    /// 1 h ahead after a base delay plus `queue(t)` and the receiver's wake-up `noise(i)`.
    fn trace(n: u64, gap: u64, queue: impl Fn(u64) -> u64, noise: impl Fn(u64) -> u64) -> DelayTrend {
        let mut d = DelayTrend::new();
        for i in 0..n {
            let sent = 5_000 * MS + i * gap;
            let t = i * gap;
            d.on(sent, sent + 3_600_000 * MS + 200_000 + queue(t) + noise(i));
        }
        d
    }

    /// A receiver that wakes late now and then (every 7th datagram 0.5 ms, every 50th 5 ms)
    fn wakeups(i: u64) -> u64 {
        if i.is_multiple_of(50) {
            5 * MS
        } else if i.is_multiple_of(7) {
            MS / 2
        } else {
            3_000
        }
    }

    #[test]
    fn a_steady_path_does_not_rise_whatever_the_receivers_wake_ups() {
        // 2 s at 4k/s
        let r = trace(8_000, 250_000, |_| 0, wakeups).rise().unwrap();
        assert_eq!(r.rise_ns, 0, "{r:?}");
        // the quarters' starts are three quarters of the spans apart: 1.61 s of 2 s
        assert!((1_500 * MS..=1_700 * MS).contains(&r.over_ns), "{r:?}");
    }

    /// A sender 1 % above a bottleneck after a 0.5 s burst allowance: the queue grows by 1 %
    /// of the elapsed time, 10 ms a second, and the rise is the growth between the quarters.
    #[test]
    fn a_queue_growing_under_an_overload_rises() {
        let queue = |t: u64| t.saturating_sub(500 * MS) / 100;
        let r = trace(8_000, 250_000, queue, wakeups).rise().unwrap();
        // the last quarter starts at 1.61 s: 11.1 ms of queue; the first quarter's low is 0
        assert!((10_500_000..=11_500_000).contains(&r.rise_ns), "{r:?}");
    }

    #[test]
    fn a_draining_queue_falls() {
        let queue = |t: u64| (40 * MS).saturating_sub(t / 50);
        let r = trace(8_000, 250_000, queue, |_| 0).rise().unwrap();
        assert!(r.rise_ns < -30_000_000, "{r:?}");
    }

    /// Any length fits in the spans (a 60 s trial of RFC 2544, a 100 ms one) and the clocks'
    /// offset never shows; a stream shorter than four spans says nothing.
    #[test]
    fn any_length_fits_and_short_streams_say_nothing() {
        let long = trace(60_000, MS, |t| t / 1_000, |_| 0);
        assert!(long.used <= SPANS && long.used > SPANS / 2, "{long:?}");
        let r = long.rise().unwrap();
        // 0.1 % of the 45 s or so between the quarters' starts
        assert!((40_000_000..=50_000_000).contains(&r.rise_ns), "{r:?}");
        assert!(trace(400, 250_000, |_| 0, |_| 0).rise().is_some(), "100 ms: 12 spans of 8 ms");
        assert_eq!(trace(3, 1_000, |_| 0, |_| 0).rise(), None);
        assert_eq!(DelayTrend::new().rise(), None);
    }

    /// `on` says when the rise may have moved: a span begun or a span's lowest transit
    /// lowered, not a datagram that changes neither.
    #[test]
    fn on_reports_a_new_span_or_a_lower_minimum_only() {
        let mut d = DelayTrend::new();
        assert!(d.on(0, 500), "the first span begins");
        assert!(!d.on(10, 510), "the same transit in the same span");
        assert!(!d.on(20, 600), "a higher one");
        assert!(d.on(30, 400), "a lower one");
        assert!(d.on(1 << 20, (1 << 20) + 900), "a new span");
    }

    /// Halving merges each pair of neighbouring spans into one holding the lower of their
    /// minima (here the odd span's: the transits fall).
    #[test]
    fn halving_keeps_the_lower_of_each_pair() {
        let mut d = DelayTrend::new();
        for i in 0..SPANS as u64 {
            d.on(i << 20, (i << 20) + 200 - i);
        }
        assert_eq!((d.used, d.shift), (SPANS, 20));
        d.on((SPANS as u64) << 20, ((SPANS as u64) << 20) + 50);
        let halved: Vec<i64> = (0..8).map(|j| 199 - 2 * j).collect();
        assert_eq!(d.mins[..SPANS / 2], halved[..]);
        assert_eq!((d.mins[SPANS / 2], d.used, d.shift), (50, SPANS / 2 + 1, 21));
    }

    /// A transit past i64 (clocks far apart the other way) is clamped below the empty mark,
    /// so its spans still count.
    #[test]
    fn a_transit_past_i64_still_counts() {
        let mut d = DelayTrend::new();
        for i in 0..4u64 {
            d.on(i << 20, u64::MAX);
        }
        assert_eq!(d.rise().map(|r| r.rise_ns), Some(0), "each clamped to the same value");
    }

    #[test]
    fn clocks_far_apart_and_reordered_sends_stay_in_range() {
        let mut d = DelayTrend::new();
        assert!(d.on(u64::MAX, 0), "a transit below i64 saturates, no panic");
        d.on(u64::MAX - 5, 0);
        let mut e = DelayTrend::new();
        e.on(10 * MS, 11 * MS);
        e.on(9 * MS, 10 * MS);
        assert_eq!(e.mins[0], 1_000_000, "sent before the first: the first span");
        for i in 0..10_000 {
            e.on(10 * MS + i * MS, 11 * MS + i * MS);
        }
        assert_eq!(e.rise().unwrap().rise_ns, 0);
    }
}
