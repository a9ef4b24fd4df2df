//! What an impairment actually did to the traffic (the "achieved" side): counts, the added
//! delay of every delivered packet (release minus arrival, in a latency histogram), bytes
//! and times for rates, and reordering as the receiver sees it. Pure: the runtime passes
//! the times it read.
//!
//! Reordering follows RFC 4737's definition: a packet is reordered when a packet that
//! arrived after it (same flow, same direction) was released before it. So one held-back
//! packet counts once, however many overtake it.

use hdrhistogram::Histogram;

use crate::latency;

/// Why a packet was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The loss model chose it.
    Loss,
    /// It would have waited in the rate queue longer than the queue limit.
    Queue,
    /// The proxy could not forward it: the socket refused it, the flow was gone, or the
    /// proxy's own packet store was full.
    Send,
}

/// Counters and the added-delay histogram of one direction, for an interval or a run.
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
    /// First and last arrival, ns.
    pub first_in_ns: Option<u64>,
    /// Last arrival.
    pub last_in_ns: u64,
    /// First and last release, ns.
    pub first_out_ns: Option<u64>,
    /// Bytes of the first release (left out of the rate: the span starts once they left).
    pub first_out_bytes: u64,
    /// Last release.
    pub last_out_ns: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            packets_in: 0,
            bytes_in: 0,
            lost: 0,
            queue_drops: 0,
            send_drops: 0,
            packets_out: 0,
            bytes_out: 0,
            duplicates: 0,
            reordered: 0,
            delay: latency::histogram(),
            first_in_ns: None,
            last_in_ns: 0,
            first_out_ns: None,
            first_out_bytes: 0,
            last_out_ns: 0,
        }
    }
}

impl Tally {
    /// A packet arrived.
    #[inline]
    pub fn on_arrival(&mut self, len: usize, now_ns: u64) {
        self.packets_in += 1;
        self.bytes_in += len as u64;
        self.first_in_ns.get_or_insert(now_ns);
        self.last_in_ns = now_ns;
    }

    /// A packet was dropped.
    #[inline]
    pub fn on_drop(&mut self, why: DropReason) {
        match why {
            DropReason::Loss => self.lost += 1,
            DropReason::Queue => self.queue_drops += 1,
            DropReason::Send => self.send_drops += 1,
        }
    }

    /// A packet that arrived at `arrival_ns` was released at `now_ns`, `copies` times.
    #[inline]
    pub fn on_release(&mut self, len: usize, arrival_ns: u64, now_ns: u64, copies: u32, reordered: bool) {
        self.packets_out += 1;
        self.bytes_out += len as u64 * u64::from(copies);
        self.duplicates += u64::from(copies.saturating_sub(1));
        self.reordered += u64::from(reordered);
        latency::record(&mut self.delay, now_ns.saturating_sub(arrival_ns).max(1));
        if self.first_out_ns.is_none() {
            self.first_out_ns = Some(now_ns);
            self.first_out_bytes = len as u64 * u64::from(copies);
        }
        self.last_out_ns = now_ns;
    }

    /// Adds `other` (a later interval, or another flow) into this one.
    pub fn merge(&mut self, other: &Self) {
        self.packets_in += other.packets_in;
        self.bytes_in += other.bytes_in;
        self.lost += other.lost;
        self.queue_drops += other.queue_drops;
        self.send_drops += other.send_drops;
        self.packets_out += other.packets_out;
        self.bytes_out += other.bytes_out;
        self.duplicates += other.duplicates;
        self.reordered += other.reordered;
        // Same bounds and precision: cannot fail.
        let _ = self.delay.add(&other.delay);
        let min_some = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.first_in_ns = min_some(self.first_in_ns, other.first_in_ns);
        if other.first_out_ns.is_some() && (self.first_out_ns.is_none() || other.first_out_ns < self.first_out_ns) {
            self.first_out_bytes = other.first_out_bytes;
        }
        self.first_out_ns = min_some(self.first_out_ns, other.first_out_ns);
        self.last_in_ns = self.last_in_ns.max(other.last_in_ns);
        self.last_out_ns = self.last_out_ns.max(other.last_out_ns);
    }

    /// Did anything happen?
    pub const fn is_empty(&self) -> bool {
        self.packets_in == 0 && self.packets_out == 0 && self.send_drops == 0
    }

    /// Dropped for any reason.
    pub const fn dropped(&self) -> u64 {
        self.lost + self.queue_drops + self.send_drops
    }

    /// `part` of the packets that arrived, in percent (0 with no traffic).
    pub fn percent_of_in(&self, part: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "ratios")]
        if self.packets_in == 0 { 0.0 } else { 100.0 * part as f64 / self.packets_in as f64 }
    }

    /// Bits per second sent, first to last release (0 with fewer than two releases). The
    /// first release's bytes are left out: the span starts when they had left.
    pub fn out_bps_active(&self) -> f64 {
        let Some(first) = self.first_out_ns else { return 0.0 };
        let span = self.last_out_ns.saturating_sub(first);
        #[expect(clippy::cast_precision_loss, reason = "rates")]
        if span == 0 {
            0.0
        } else {
            (self.bytes_out.saturating_sub(self.first_out_bytes) * 8) as f64 * 1e9 / span as f64
        }
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
        a.on_release(100, 10, 1_010, 2, false);
        a.on_arrival(100, 20);
        a.on_drop(DropReason::Loss);
        let mut b = Tally::default();
        b.on_arrival(50, 5);
        b.on_drop(DropReason::Queue);
        a.merge(&b);
        assert_eq!((a.packets_in, a.bytes_in, a.packets_out, a.bytes_out), (3, 250, 1, 200));
        assert_eq!((a.lost, a.queue_drops, a.duplicates, a.dropped()), (1, 1, 1, 2));
        assert_eq!((a.first_in_ns, a.last_in_ns), (Some(5), 20));
        assert_eq!(a.delay.len(), 1);
        assert!((a.percent_of_in(1) - 100.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn one_held_back_packet_is_one_reorder() {
        let mut o = ReleaseOrder::default();
        // 0 is held back while 1, 2, 3 go; then 0, then 4
        let flags: Vec<bool> = [1, 2, 3, 0, 4].iter().map(|&s| o.on_release(s)).collect();
        assert_eq!(flags, [false, false, false, true, false]);
    }
}
