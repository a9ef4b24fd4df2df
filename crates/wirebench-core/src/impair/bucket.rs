//! A token bucket with a FIFO queue in front, as a pure function of arrival times: each
//! packet gets the time it leaves the bucket, or is refused when it would wait longer than
//! the queue limit.
//!
//! The bucket fills at `R` bytes/s up to `B` bytes; a packet of `L` bytes leaves when `L`
//! tokens are there and every earlier packet has left. Written as the GCRA (ITU-T I.371's
//! virtual scheduling) with a theoretical arrival time `tat`: the bucket holds
//! `B - R * max(0, tat - t)` tokens at `t`, so a packet may leave at
//! `max(now, tat - (B - L) / R)` and then `tat` moves on by `L / R`. Time is kept in
//! units of `ns * bit/s` so every step is exact integer arithmetic.

/// Scaled cost of one byte: 8 bits * 1e9 ns/s.
const BYTE: i128 = 8_000_000_000;

/// Token bucket state.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    bps: i128,
    burst: i128,
    tat: i128,
}

impl TokenBucket {
    /// A full bucket of `burst_bytes` filling at `bps` bits per second (`bps` > 0).
    pub fn new(bps: u64, burst_bytes: u64) -> Self {
        Self { bps: i128::from(bps.max(1)), burst: i128::from(burst_bytes) * BYTE, tat: 0 }
    }

    /// When a packet of `len` bytes arriving at `now_ns` leaves, or `None` (and no tokens
    /// spent) when that is more than `max_wait_ns` away.
    pub fn depart(&mut self, len: u64, now_ns: u64, max_wait_ns: u64) -> Option<u64> {
        let now = i128::from(now_ns) * self.bps;
        let cost = i128::from(len) * BYTE;
        let leave = now.max(self.tat - self.burst + cost);
        // Round up: never earlier than the bucket allows.
        let leave_ns = u64::try_from((leave + self.bps - 1) / self.bps).unwrap_or(u64::MAX);
        if leave_ns - now_ns > max_wait_ns {
            return None;
        }
        self.tat = self.tat.max(leave) + cost;
        Some(leave_ns)
    }

    /// Whether a packet of `len` bytes arriving at `now_ns` may leave at once, taking its
    /// tokens if so: the same answer and state as `depart(len, now_ns, 0).is_some()`, without
    /// its division (a per-datagram cap asks this).
    pub fn take(&mut self, len: u64, now_ns: u64) -> bool {
        let now = i128::from(now_ns) * self.bps;
        let cost = i128::from(len) * BYTE;
        if self.tat - self.burst + cost > now {
            return false;
        }
        self.tat = self.tat.max(now) + cost;
        true
    }

    /// How long a zero-length packet arriving at `now_ns` would wait: the queue's backlog
    /// in time (TCP uses it to stop reading instead of dropping).
    pub fn backlog_ns(&self, now_ns: u64) -> u64 {
        let now = i128::from(now_ns) * self.bps;
        let wait = (self.tat - self.burst - now).max(0);
        u64::try_from(wait / self.bps).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_bucket_then_the_rate() {
        // 8 Mbit/s = 1 byte/us, burst 3000 bytes, 1000-byte packets all at t = 0.
        let mut b = TokenBucket::new(8_000_000, 3_000);
        let d: Vec<u64> = (0..6).map(|_| b.depart(1_000, 0, u64::MAX).unwrap()).collect();
        assert_eq!(d, [0, 0, 0, 1_000_000, 2_000_000, 3_000_000]);
        assert_eq!(b.backlog_ns(0), 3_000_000);
        // a packet that would wait more than the limit is refused and costs nothing
        assert_eq!(b.depart(1_000, 0, 3_500_000), None);
        assert_eq!(b.depart(1_000, 0, 4_000_000), Some(4_000_000));
    }

    /// The queue limit and the backlog count from a packet's arrival, whenever it arrives.
    #[test]
    fn the_queue_limit_and_backlog_count_from_arrival() {
        // 8 Mbit/s = 1 byte/us, burst 3000 bytes, 1000-byte packets all at t = 1 s.
        let mut b = TokenBucket::new(8_000_000, 3_000);
        let t = 1_000_000_000;
        let d: Vec<Option<u64>> = (0..5).map(|_| b.depart(1_000, t, 1_500_000)).collect();
        assert_eq!(d, [Some(t), Some(t), Some(t), Some(t + 1_000_000), None]);
        // the backlog drains from then on
        assert_eq!((b.backlog_ns(t), b.backlog_ns(t + 400_000)), (1_000_000, 600_000));
    }

    #[test]
    fn long_run_rate_is_exact() {
        let mut b = TokenBucket::new(60_760_000, 7_595);
        let mut last = 0;
        for _ in 0..100_000 {
            last = b.depart(1_472, 0, u64::MAX).unwrap();
        }
        // (100,000 * 1472 - 7595 burst) bytes at 7,595,000 B/s
        let want = (100_000.0 * 1472.0 - 7595.0) / 7_595_000.0 * 1e9;
        #[expect(clippy::cast_precision_loss, reason = "test values")]
        let got = last as f64;
        assert!((got - want).abs() < 2.0, "{got} vs {want}");
    }

    /// One byte a second, a burst of one byte: the next byte may go the very ns its token is
    /// back (exactly 1 s later), not a ns before.
    #[test]
    fn take_grants_a_token_the_instant_it_is_back() {
        let mut b = TokenBucket::new(8, 1);
        assert!(b.take(1, 0));
        assert!(!b.take(1, 0) && !b.take(1, 999_999_999));
        assert!(b.take(1, 1_000_000_000));
        assert!(!b.take(1, 1_000_000_000));
        assert!(b.take(0, 1_000_000_000), "nothing costs nothing");
    }

    proptest! {
        /// Over any window [t, t + w] the bytes that leave never exceed B + R * w.
        #[test]
        fn bytes_released_never_exceed_the_bucket(
            bps in 1_000_000u64..10_000_000_000,
            burst in 1_514u64..100_000,
            pkts in proptest::collection::vec((0u64..2_000_000, 1u64..1_514), 1..200),
        ) {
            let mut b = TokenBucket::new(bps, burst);
            let mut now = 0u64;
            let mut out = Vec::new();
            for (gap, len) in pkts {
                now += gap;
                if let Some(d) = b.depart(len, now, 50_000_000) {
                    prop_assert!(d >= now);
                    out.push((d, len));
                }
            }
            for i in 0..out.len() {
                let mut bytes = 0u128;
                for j in i..out.len() {
                    bytes += u128::from(out[j].1);
                    let w = u128::from(out[j].0 - out[i].0);
                    let allowed = u128::from(burst) + u128::from(bps) * w / 8_000_000_000;
                    prop_assert!(bytes <= allowed + 1, "{bytes} > {allowed} over {w} ns");
                }
            }
        }

        /// `take` answers as `depart` with no wait does and leaves the same state, on any
        /// arrivals (rates down to 1 bit/s, where one byte is worth 8 s).
        #[test]
        fn take_is_depart_without_a_wait(
            bps in prop_oneof![1u64..100, 1_000u64..10_000_000_000],
            burst in 0u64..5_000,
            pkts in proptest::collection::vec((0u64..20_000_000_000, 0u64..3_000), 1..200),
        ) {
            let (mut a, mut b) = (TokenBucket::new(bps, burst), TokenBucket::new(bps, burst));
            let mut now = 0u64;
            for (gap, len) in pkts {
                now += gap;
                prop_assert_eq!(a.take(len, now), b.depart(len, now, 0).is_some(), "{} B at {} ns", len, now);
                prop_assert_eq!(a.tat, b.tat);
            }
        }
    }
}
