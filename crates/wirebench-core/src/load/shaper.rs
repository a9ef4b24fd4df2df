//! A client's link in user space: a token bucket at the link rate, then a fixed one-way
//! delay, applied to each frame as it leaves (upload) or arrives (download). No root, no tc.
//!
//! A frame of `L` bytes handed over at `t` leaves the bucket at `b = bucket.depart(L, t)`
//! (FIFO, never before `t`) and arrives at the far end at `b + delay`. The bucket is the
//! exact GCRA of [`TokenBucket`](crate::impair::bucket::TokenBucket); its depth is 10 ms of
//! the rate, at least one 1,514-byte frame, about what tc's tbf needs at these rates.

use std::fmt;
use std::str::FromStr;

use crate::impair::bucket::TokenBucket;
use crate::units::{BitRate, Span, UnitError};

/// A link as the user gives it: `60.76mbit/10ms`, `0/5ms` (no rate limit), `1gbit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Rate limit, bits/s (`None`: unlimited).
    pub rate: Option<BitRate>,
    /// Added one-way delay, ns.
    pub delay_ns: u64,
}

impl FromStr for Link {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (r, d) = crate::units::split_rate_delay(s);
        let r = r.trim();
        let rate = if r == "0" || r.is_empty() { None } else { Some(r.parse::<BitRate>()?) };
        let delay_ns = match d {
            Some(d) => crate::units::nanos(d.parse::<Span>()?.0),
            None => 0,
        };
        Ok(Self { rate, delay_ns })
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rate {
            Some(r) => write!(f, "{}bit/", r.bps())?,
            None => write!(f, "0/")?,
        }
        write!(f, "{}", crate::units::humanize_ns(u128::from(self.delay_ns)))
    }
}

/// Payload bytes of one TCP segment on Ethernet (MSS with timestamps).
pub const SEGMENT: u64 = 1_448;

/// The bucket depth for a rate: 10 ms of it, at least one full Ethernet frame.
pub fn burst_bytes(bps: u64) -> u64 {
    (bps / 800).max(1_514)
}

/// One direction of one client's link.
#[derive(Debug, Clone)]
pub struct Shaper {
    bucket: Option<TokenBucket>,
    delay_ns: u64,
}

impl Shaper {
    /// A shaper for `link`.
    pub fn new(link: Link) -> Self {
        let bucket = link.rate.map(|r| TokenBucket::new(r.bps(), burst_bytes(r.bps())));
        Self { bucket, delay_ns: link.delay_ns }
    }

    /// When a frame of `len` bytes handed over at `now_ns` leaves the rate limiter (before
    /// the delay).
    pub fn leave(&mut self, len: u64, now_ns: u64) -> u64 {
        let Some(b) = &mut self.bucket else { return now_ns };
        // TCP sends a large message as segments: each takes its own tokens, the frame has
        // left when its last segment has.
        let mut left = len;
        loop {
            let seg = left.min(SEGMENT);
            let at = b.depart(seg, now_ns, u64::MAX).unwrap_or(now_ns);
            left -= seg;
            if left == 0 {
                return at;
            }
        }
    }

    /// The added one-way delay, ns.
    pub const fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// When a frame of `len` bytes handed over at `now_ns` reaches the other end.
    pub fn arrive(&mut self, len: u64, now_ns: u64) -> u64 {
        self.leave(len, now_ns).saturating_add(self.delay_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn parses_links() {
        let l: Link = "60.76mbit/10ms".parse().unwrap();
        assert_eq!(l.rate.map(BitRate::bps), Some(60_760_000));
        assert_eq!(l.delay_ns, 10_000_000);
        let l: Link = "0/5ms".parse().unwrap();
        assert_eq!((l.rate, l.delay_ns), (None, 5_000_000));
        assert_eq!("1gbit".parse::<Link>().unwrap().delay_ns, 0);
        let l: Link = "100Mbit/s/10ms".parse().unwrap();
        assert_eq!((l.rate.map(BitRate::bps), l.delay_ns), (Some(100_000_000), 10_000_000));
        let l: Link = "100Mbps".parse().unwrap();
        assert_eq!((l.rate.map(BitRate::bps), l.delay_ns), (Some(100_000_000), 0));
        assert_eq!("100Mbit/s".parse::<Link>().unwrap().delay_ns, 0);
        assert!("fast/1ms".parse::<Link>().is_err());
        assert!("1mbit/soon".parse::<Link>().is_err());
        assert_eq!("1mbit/2ms".parse::<Link>().unwrap().to_string(), "1000000bit/2ms");
    }

    #[test]
    fn a_large_frame_leaves_as_segments_at_the_rate() {
        // 8 Mbit/s = 1 B/us, bucket 10,000 B: 100,000 B at once leave by 90 ms.
        let mut s = Shaper::new("8mbit".parse().unwrap());
        let at = s.leave(100_000, 0);
        assert!((89_999_000..=90_001_000).contains(&at), "{at}");
    }

    #[test]
    fn delay_only_adds_the_delay() {
        let mut s = Shaper::new("0/5ms".parse().unwrap());
        assert_eq!(s.arrive(10_000, 7), 5_000_007);
        assert_eq!(s.arrive(10_000, 7), 5_000_007, "no rate: no queueing");
        // the receive side adds it by itself to the time a frame left
        assert_eq!((s.delay_ns(), s.leave(10_000, 7)), (5_000_000, 7));
    }

    /// Upload shaping on a virtual clock: seeded random frames; over every window
    /// [t, t + w] of departures the bytes never exceed the bucket's depth plus the rate
    /// times w, no frame arrives before now + delay, and order is kept (FIFO).
    #[test]
    fn bytes_over_time_never_exceed_the_token_bucket() {
        for seed in 0..20u64 {
            let mut rng = SplitMix64::new(seed);
            let bps = 1_000_000 + rng.next_u64() % 100_000_000;
            let delay = rng.next_u64() % 20_000_000;
            let mut s = Shaper::new(Link { rate: BitRate::from_bps(bps), delay_ns: delay });
            let mut now = 0u64;
            let mut out: Vec<(u64, u64)> = Vec::new();
            for _ in 0..2_000 {
                now += rng.next_u64() % 400_000;
                let len = 20 + rng.next_u64() % (SEGMENT - 20);
                let at = s.arrive(len, now);
                assert!(at >= now + delay);
                if let Some(&(prev, _)) = out.last() {
                    assert!(at >= prev, "FIFO");
                }
                out.push((at, len));
            }
            let burst = u128::from(burst_bytes(bps));
            for i in 0..out.len() {
                let mut bytes = 0u128;
                for j in i..out.len() {
                    bytes += u128::from(out[j].1);
                    let w = u128::from(out[j].0 - out[i].0);
                    // Departures are rounded up to whole ns: one extra byte of slack.
                    let allowed = burst + u128::from(bps) * w / 8_000_000_000 + 1;
                    assert!(bytes <= allowed, "seed {seed}: {bytes} B in {w} ns > {allowed}");
                }
            }
        }
    }

    #[test]
    fn the_long_run_rate_is_the_link_rate() {
        // 60.76 Mbit/s = 7,595,000 B/s; 10,000 frames of 1,000 B offered at once.
        let mut s = Shaper::new("60.76mbit/10ms".parse().unwrap());
        let last = (0..10_000).map(|_| s.arrive(1_000, 0)).last().unwrap();
        // (the first 75,950 B are the 10 ms bucket)
        let want = (1e7 - 75_950.0) / 7_595_000.0 * 1e9 + 1e7;
        #[expect(clippy::cast_precision_loss)]
        let got = last as f64;
        assert!((got - want).abs() < 2.0, "{got} vs {want}");
    }
}
