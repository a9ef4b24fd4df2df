//! What an impairment actually did to the traffic (the "achieved" side): counts, the added
//! delay of every delivered packet (release minus arrival, in a latency histogram) split
//! into the time in the rate limiter's queue and the rest (the configured delay and jitter,
//! plus the proxy's own lateness), bytes and busy periods for rates, and reordering as the
//! receiver sees it. Pure: the runtime passes the times it read.
//!
//! Reordering follows RFC 4737's definition: a packet is reordered when a packet that
//! arrived after it (same flow, same direction) was released before it. So one held-back
//! packet counts once, however many overtake it.

use hdrhistogram::Histogram;

use super::Busy;
use crate::latency;

/// Why a packet was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The loss model chose it.
    Loss,
    /// It would have waited in the rate queue longer than the queue limit.
    Queue,
    /// Queue full: the proxy already held its byte budget of delayed packets.
    Full,
    /// The proxy could not forward it: the socket refused it, the flow was gone, or it was
    /// still waiting when the proxy stopped.
    Send,
}

/// One delivered packet, as the runtime saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// Bytes of one copy.
    pub len: usize,
    /// When it arrived, ns.
    pub arrival_ns: u64,
    /// When it left the rate limiter's queue (the verdict's `left_ns`).
    pub left_ns: u64,
    /// When it was sent, ns.
    pub now_ns: u64,
    /// Copies sent.
    pub copies: u32,
}

/// Counters and the added-delay histograms of one direction, for an interval or a run.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Packets (UDP) or chunks (TCP) that arrived.
    pub packets_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Dropped by the loss model.
    pub lost: u64,
    /// Dropped by the queue limit.
    pub queue_drops: u64,
    /// Dropped because the proxy's store was full (its byte budget).
    pub full_drops: u64,
    /// Not forwarded for another reason (see [`DropReason::Send`]).
    pub send_drops: u64,
    /// Packets delivered (the first copy).
    pub packets_out: u64,
    /// Bytes sent, copies included.
    pub bytes_out: u64,
    /// Extra copies sent.
    pub duplicates: u64,
    /// Delivered after a packet that arrived later.
    pub reordered: u64,
    /// Release minus arrival of each delivered packet, ns.
    pub delay: Histogram<u64>,
    /// Queue exit minus arrival: the wait in the rate limiter's queue, ns (1 for none).
    pub queue: Histogram<u64>,
    /// Release minus queue exit: the configured delay and jitter (and reorder gap), plus
    /// the proxy's lateness, ns.
    pub delay_part: Histogram<u64>,
    /// Busy periods of arrivals.
    pub busy_in: Busy,
    /// Busy periods of releases.
    pub busy_out: Busy,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            packets_in: 0,
            bytes_in: 0,
            lost: 0,
            queue_drops: 0,
            full_drops: 0,
            send_drops: 0,
            packets_out: 0,
            bytes_out: 0,
            duplicates: 0,
            reordered: 0,
            delay: latency::histogram(),
            queue: latency::histogram(),
            delay_part: latency::histogram(),
            busy_in: Busy::default(),
            busy_out: Busy::default(),
        }
    }
}

impl Tally {
    /// A packet arrived.
    #[inline]
    pub fn on_arrival(&mut self, len: usize, now_ns: u64) {
        self.packets_in += 1;
        self.bytes_in += len as u64;
        self.busy_in.on_event(now_ns, len as u64);
    }

    /// A packet was dropped.
    #[inline]
    pub fn on_drop(&mut self, why: DropReason) {
        match why {
            DropReason::Loss => self.lost += 1,
            DropReason::Queue => self.queue_drops += 1,
            DropReason::Full => self.full_drops += 1,
            DropReason::Send => self.send_drops += 1,
        }
    }

    /// A packet was released (`reordered`: a later one went before it).
    #[inline]
    pub fn on_release(&mut self, r: &Release, reordered: bool) {
        let bytes = r.len as u64 * u64::from(r.copies);
        self.packets_out += 1;
        self.bytes_out += bytes;
        self.duplicates += u64::from(r.copies.saturating_sub(1));
        self.reordered += u64::from(reordered);
        let left = r.left_ns.clamp(r.arrival_ns, r.now_ns.max(r.arrival_ns));
        latency::record(&mut self.delay, r.now_ns.saturating_sub(r.arrival_ns).max(1));
        latency::record(&mut self.queue, left - r.arrival_ns);
        latency::record(&mut self.delay_part, r.now_ns.saturating_sub(left));
        self.busy_out.on_event(r.now_ns, bytes);
    }

    /// Adds `other` (a later interval, or another flow) into this one.
    pub fn merge(&mut self, other: &Self) {
        self.packets_in += other.packets_in;
        self.bytes_in += other.bytes_in;
        self.lost += other.lost;
        self.queue_drops += other.queue_drops;
        self.full_drops += other.full_drops;
        self.send_drops += other.send_drops;
        self.packets_out += other.packets_out;
        self.bytes_out += other.bytes_out;
        self.duplicates += other.duplicates;
        self.reordered += other.reordered;
        // Same bounds and precision: cannot fail.
        let _ = self.delay.add(&other.delay);
        let _ = self.queue.add(&other.queue);
        let _ = self.delay_part.add(&other.delay_part);
        self.busy_in.merge(&other.busy_in);
        self.busy_out.merge(&other.busy_out);
    }

    /// Did anything happen?
    pub const fn is_empty(&self) -> bool {
        self.packets_in == 0 && self.packets_out == 0 && self.send_drops == 0
    }

    /// Dropped for any reason.
    pub const fn dropped(&self) -> u64 {
        self.lost + self.queue_drops + self.full_drops + self.send_drops
    }

    /// `part` of the packets that arrived, in percent (0 with no traffic).
    pub fn percent_of_in(&self, part: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "ratios")]
        if self.packets_in == 0 { 0.0 } else { 100.0 * part as f64 / self.packets_in as f64 }
    }

    /// Bits per second sent over the time releases were busy (idle gaps left out).
    pub fn out_bps(&self) -> f64 {
        self.busy_out.bps(self.bytes_out)
    }

    /// Bits per second that arrived over the time arrivals were busy.
    pub fn in_bps(&self) -> f64 {
        self.busy_in.bps(self.bytes_in)
    }
}

/// Tells, per flow and direction, whether a released packet was overtaken (RFC 4737).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReleaseOrder {
    next: u64,
}

impl ReleaseOrder {
    /// `seq` (the arrival order, from 0) was released: true when a later one went before it.
    #[inline]
    pub fn on_release(&mut self, seq: u64) -> bool {
        if seq < self.next {
            return true;
        }
        self.next = seq + 1;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_merge() {
        let mut a = Tally::default();
        a.on_arrival(100, 10);
        a.on_release(&Release { len: 100, arrival_ns: 10, left_ns: 410, now_ns: 1_010, copies: 2 }, false);
        a.on_arrival(100, 20);
        a.on_drop(DropReason::Loss);
        let mut b = Tally::default();
        b.on_arrival(50, 5);
        b.on_drop(DropReason::Queue);
        b.on_drop(DropReason::Full);
        a.merge(&b);
        assert_eq!((a.packets_in, a.bytes_in, a.packets_out, a.bytes_out), (3, 250, 1, 200));
        assert_eq!((a.lost, a.queue_drops, a.full_drops, a.duplicates, a.dropped()), (1, 1, 1, 1, 3));
        assert_eq!(a.busy_in.active_ns(), 15, "arrivals at 5, 10 and 20");
        assert_eq!((a.delay.max(), a.queue.max(), a.delay_part.max()), (1_000, 400, 600));
        assert!((a.percent_of_in(1) - 100.0 / 3.0).abs() < 1e-9);
    }

    fn release(arrival_ns: u64, left_ns: u64, now_ns: u64) -> Release {
        Release { len: 100, arrival_ns, left_ns, now_ns, copies: 1 }
    }

    /// Anything that happened makes a tally non-empty, a send failure included (a packet
    /// still waiting when the proxy stopped arrived in an earlier interval).
    #[test]
    fn a_tally_is_empty_only_when_nothing_happened() {
        assert!(Tally::default().is_empty());
        let mut a = Tally::default();
        a.on_arrival(100, 0);
        assert!(!a.is_empty(), "an arrival");
        let mut r = Tally::default();
        r.on_release(&release(0, 0, 10), false);
        assert!(!r.is_empty(), "a release");
        let mut s = Tally::default();
        s.on_drop(DropReason::Send);
        assert!(!s.is_empty(), "a send failure");
    }

    #[test]
    fn send_failures_and_reorders_are_counted_and_merged() {
        let mut a = Tally::default();
        a.on_drop(DropReason::Send);
        a.on_release(&release(0, 0, 10), true);
        a.on_release(&release(0, 0, 10), false);
        assert_eq!((a.send_drops, a.dropped(), a.reordered), (1, 1, 1));
        let mut b = Tally::default();
        b.on_drop(DropReason::Send);
        b.on_drop(DropReason::Send);
        b.on_release(&release(0, 0, 10), true);
        a.merge(&b);
        assert_eq!((a.send_drops, a.dropped(), a.reordered, a.packets_out), (3, 3, 2, 3));
    }

    /// Merging adds every counter: two tallies with different, non-zero counts in each.
    #[test]
    fn merge_adds_every_counter() {
        let mut a = Tally::default();
        let mut b = Tally::default();
        for (t, n) in [(&mut a, 1u32), (&mut b, 2)] {
            for _ in 0..n {
                t.on_arrival(100, 0);
                for why in [DropReason::Loss, DropReason::Queue, DropReason::Full, DropReason::Send] {
                    t.on_drop(why);
                }
                t.on_release(&Release { copies: 1 + n, ..release(0, 0, 10) }, n == 2);
            }
        }
        a.merge(&b);
        // a: 1 of each, one release of 2 copies; b: 2 of each, two releases of 3 copies
        assert_eq!((a.packets_in, a.bytes_in, a.packets_out), (3, 300, 3));
        assert_eq!((a.lost, a.queue_drops, a.full_drops, a.send_drops, a.dropped()), (3, 3, 3, 3, 12));
        assert_eq!((a.bytes_out, a.duplicates, a.reordered), (200 + 600, 1 + 4, 2));
    }

    #[test]
    fn copies_beyond_the_first_are_duplicates() {
        let mut t = Tally::default();
        t.on_release(&Release { copies: 1, ..release(0, 0, 10) }, false);
        assert_eq!((t.duplicates, t.bytes_out), (0, 100));
        t.on_release(&Release { copies: 3, ..release(0, 0, 10) }, false);
        assert_eq!((t.packets_out, t.duplicates, t.bytes_out), (2, 2, 400));
    }

    /// Rates are over the busy time, leaving out each period's first event (busy.rs):
    /// 1000 B events 50 ms apart are one period of 50 ms carrying 1000 B past its first,
    /// 160 kbit/s either way.
    #[test]
    fn rates_are_bytes_over_the_busy_time() {
        const MS: u64 = 1_000_000;
        let mut t = Tally::default();
        assert!(t.in_bps().abs() < f64::EPSILON && t.out_bps().abs() < f64::EPSILON);
        t.on_arrival(1_000, 0);
        t.on_arrival(1_000, 50 * MS);
        // 500 B sent twice each time
        for now in [10 * MS, 60 * MS] {
            t.on_release(&Release { len: 500, arrival_ns: now - 10 * MS, left_ns: now, now_ns: now, copies: 2 }, false);
        }
        assert!((t.in_bps() - 160_000.0).abs() < 1e-6, "{}", t.in_bps());
        assert!((t.out_bps() - 160_000.0).abs() < 1e-6, "{}", t.out_bps());
    }

    #[test]
    fn a_share_of_no_arrivals_is_zero() {
        let t = Tally::default();
        assert!(t.percent_of_in(0).abs() < f64::EPSILON);
        assert!(t.percent_of_in(3).abs() < f64::EPSILON);
        let mut four = Tally::default();
        for at in 0..4 {
            four.on_arrival(100, at);
        }
        assert!((four.percent_of_in(2) - 50.0).abs() < 1e-9, "2 of 4 arrivals");
    }

    /// A queue exit outside [arrival, release] (clocks read on different threads) is held
    /// inside it: neither part is negative and the parts add up to the whole delay.
    #[test]
    fn the_queue_exit_is_held_between_arrival_and_release() {
        let parts = |r: Release| {
            let mut t = Tally::default();
            t.on_release(&r, false);
            (t.delay.max(), t.queue.max(), t.delay_part.max())
        };
        // exit before arrival: no queue, all delay
        assert_eq!(parts(release(100, 50, 300)), (200, 1, 200));
        // exit after release: all queue, no delay
        assert_eq!(parts(release(100, 500, 300)), (200, 200, 1));
        // inside: split
        assert_eq!(parts(release(100, 150, 300)), (200, 50, 150));
        // release before arrival: 1 ns, nothing split
        assert_eq!(parts(release(100, 150, 50)), (1, 1, 1));
    }

    #[test]
    fn a_packet_overtaken_by_several_is_one_reorder_in_any_order() {
        let mut o = ReleaseOrder::default();
        let flags: Vec<bool> = [2, 1, 0, 3].iter().map(|&s| o.on_release(s)).collect();
        assert_eq!(flags, [false, true, true, false]);
    }

    #[test]
    fn one_held_back_packet_is_one_reorder() {
        let mut o = ReleaseOrder::default();
        // 0 is held back while 1, 2, 3 go; then 0, then 4
        let flags: Vec<bool> = [1, 2, 3, 0, 4].iter().map(|&s| o.on_release(s)).collect();
        assert_eq!(flags, [false, false, false, true, false]);
    }
}
