//! Impairment decisions (STYLE C1: pure, on a virtual clock, with a seeded generator): for
//! each packet of one direction, drop it or deliver it at a time and a number of times.
//!
//! The stages, in order (netem's order, with the rate limit before the delay so that a
//! rate-limited path behaves like a bottleneck link followed by a propagation delay):
//! 1. **loss**: independent or Gilbert-Elliott bursts ([`loss`]);
//! 2. **duplicate**: the packet will be sent twice (both copies cost tokens);
//! 3. **rate**: a token bucket with a FIFO queue; a packet that would wait longer than the
//!    queue limit is dropped ([`bucket`]);
//! 4. **delay + jitter** ([`delay`]), measured from when the packet leaves the bucket;
//! 5. **reorder**: some packets are held back by an extra gap, so later ones overtake them.
//!
//! Jitter larger than the gap between packets reorders them too, as in netem; the achieved
//! reorder rate ([`tally`]) counts both. The generator's draws per packet are fixed, so a
//! seed and an arrival sequence replay a run exactly.

pub mod bucket;
pub mod busy;
pub mod delay;
pub mod loss;
pub mod spec;
pub mod tally;

pub use busy::Busy;
pub use spec::{Jitter, JitterDist, Loss, LossBurst, Percent, Reorder, Spec, SpecError};
pub use tally::{DropReason, Release, ReleaseOrder, Tally};

use crate::rng::SplitMix64;

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not delivered.
    Drop(DropReason),
    /// Delivered at `at_ns`, `copies` times (2 for a duplicate).
    Deliver {
        /// Release time, ns on the caller's clock.
        at_ns: u64,
        /// When it left the rate limiter's queue (the arrival time without a rate): the
        /// delay and jitter run from here, so `left_ns - arrival` is the queueing.
        left_ns: u64,
        /// How many copies to send.
        copies: u32,
    },
}

/// One direction's impairment: the spec and the state it needs (bucket, burst state).
#[derive(Debug, Clone)]
pub struct Impairment {
    spec: Spec,
    loss: loss::LossState,
    bucket: Option<bucket::TokenBucket>,
}

impl Impairment {
    /// A fresh impairment (full bucket, good loss state).
    pub fn new(spec: Spec) -> Self {
        Self {
            spec,
            loss: loss::LossState::new(spec.loss),
            bucket: spec.rate_bps.map(|r| bucket::TokenBucket::new(r, spec.burst_bytes)),
        }
    }

    /// The spec.
    pub const fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now_ns`.
    pub fn decide(&mut self, len: usize, now_ns: u64, rng: &mut SplitMix64) -> Verdict {
        if self.loss.lose(rng) {
            return Verdict::Drop(DropReason::Loss);
        }
        let copies = if rng.chance(self.spec.duplicate) { 2 } else { 1 };
        let left = match &mut self.bucket {
            None => now_ns,
            Some(b) => match b.depart(len as u64 * u64::from(copies), now_ns, self.spec.queue_limit_ns) {
                Some(t) => t,
                None => return Verdict::Drop(DropReason::Queue),
            },
        };
        let mut at_ns = left.saturating_add(delay::sample(self.spec.delay_ns, self.spec.jitter, rng));
        if let Some(r) = self.spec.reorder
            && rng.chance(r.p)
        {
            at_ns = at_ns.saturating_add(r.gap_ns);
        }
        Verdict::Deliver { at_ns, left_ns: left, copies }
    }

    /// The rate queue's backlog at `now_ns`, ns (0 without a rate).
    pub fn backlog_ns(&self, now_ns: u64) -> u64 {
        self.bucket.as_ref().map_or(0, |b| b.backlog_ns(now_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `n` packets of `len` bytes arriving every `gap_ns` through `spec`.
    fn run(spec: Spec, n: u64, gap_ns: u64, len: usize) -> (Vec<(u64, u64, u32)>, Tally) {
        run_left(spec, n, gap_ns, len).0
    }

    /// [`run`], and each delivered packet's (arrival, queue exit) times.
    #[expect(clippy::type_complexity, reason = "test plumbing")]
    fn run_left(spec: Spec, n: u64, gap_ns: u64, len: usize) -> ((Vec<(u64, u64, u32)>, Tally), Vec<(u64, u64)>) {
        let mut imp = Impairment::new(spec);
        let mut rng = SplitMix64::new(5);
        let mut tally = Tally::default();
        let mut out = Vec::new();
        let mut left = Vec::new();
        for i in 0..n {
            let now = i * gap_ns;
            tally.on_arrival(len, now);
            match imp.decide(len, now, &mut rng) {
                Verdict::Drop(r) => tally.on_drop(r),
                Verdict::Deliver { at_ns, left_ns, copies } => {
                    out.push((at_ns, i, copies));
                    left.push((now, left_ns));
                }
            }
        }
        // Release in time order (ties by arrival), as the proxy's heap does.
        let mut rel: Vec<(u64, u64, u32, u64)> =
            out.iter().zip(&left).map(|(&(at, seq, c), &(_, l))| (at, seq, c, l)).collect();
        rel.sort_unstable();
        let mut order = ReleaseOrder::default();
        for &(at, seq, copies, left_ns) in &rel {
            let r = Release { len, arrival_ns: seq * gap_ns, left_ns, now_ns: at, copies };
            tally.on_release(&r, order.on_release(seq));
        }
        ((out, tally), left)
    }

    #[test]
    fn passthrough_delivers_at_arrival() {
        let (out, t) = run(Spec::default(), 100, 1_000, 64);
        assert!(out.iter().all(|&(at, seq, c)| at == seq * 1_000 && c == 1));
        assert_eq!((t.dropped(), t.reordered, t.duplicates), (0, 0, 0));
    }

    #[test]
    fn fixed_delay_is_exact() {
        let (_, t) = run(Spec { delay_ns: 10_000_000, ..Spec::default() }, 1_000, 100_000, 64);
        assert!(t.delay.equivalent(t.delay.min(), 10_000_000) && t.delay.equivalent(t.delay.max(), 10_000_000));
        assert_eq!(t.reordered, 0);
    }

    #[test]
    fn reorder_and_duplicate_rates() {
        let spec = Spec { reorder: Some(Reorder { p: 0.02, gap_ns: 1_000_000 }), duplicate: 0.01, ..Spec::default() };
        // 100 us apart: 10 packets overtake each held-back one.
        let (_, t) = run(spec, 200_000, 100_000, 64);
        let (reorder, dup) = (t.percent_of_in(t.reordered), t.percent_of_in(t.duplicates));
        // binomial sd of a rate p over 200,000: sqrt(p(1-p)/n) = 0.031 % and 0.022 %
        assert!((reorder - 2.0).abs() < 0.16, "reorder {reorder} %");
        assert!((dup - 1.0).abs() < 0.11, "duplicate {dup} %");
    }

    #[test]
    fn loss_rate_and_queue_limit() {
        let spec = Spec { loss: Some(Loss::Random { p: 0.05 }), ..Spec::default() };
        let (_, t) = run(spec, 100_000, 1_000, 64);
        assert!((t.percent_of_in(t.lost) - 5.0).abs() < 0.35, "{}", t.percent_of_in(t.lost));
        // 1000-byte packets every 1 us into 8 Mbit/s (1 byte/us) with a 10 ms queue:
        // about 1 in 1000 fits; none waits longer than the limit.
        let spec =
            Spec { rate_bps: Some(8_000_000), burst_bytes: 1_514, queue_limit_ns: 10_000_000, ..Spec::default() };
        let (out, t) = run(spec, 100_000, 1_000, 1_000);
        assert!(out.iter().all(|&(at, seq, _)| at - seq * 1_000 <= 10_000_000));
        assert!(t.queue_drops > 99_000, "{}", t.queue_drops);
        let rate = t.out_bps();
        assert!((rate - 8e6).abs() < 0.01 * 8e6, "{rate}");
    }

    /// 1000-byte packets every 100 us into 8 Mbit/s (one per ms) behind a 5 ms delay:
    /// the queue grows by 0.9 ms a packet up to the 10 ms limit, then holds there; the
    /// delay part is exactly 5 ms; together they are the added delay.
    #[test]
    fn added_delay_splits_into_queueing_and_the_configured_delay() {
        let spec = Spec {
            delay_ns: 5_000_000,
            rate_bps: Some(8_000_000),
            burst_bytes: 1_000,
            queue_limit_ns: 10_000_000,
            ..Spec::default()
        };
        let ((out, t), left) = run_left(spec, 2_000, 100_000, 1_000);
        for (&(at, _, _), &(arrival, l)) in out.iter().zip(&left) {
            assert_eq!(at - l, 5_000_000);
            assert!(l - arrival <= 10_000_000);
        }
        assert!(t.delay_part.equivalent(t.delay_part.min(), 5_000_000));
        assert!(t.delay_part.equivalent(t.delay_part.max(), 5_000_000));
        assert_eq!(t.queue.min(), 1, "the first packet found a full bucket (0 waits count as 1 ns)");
        assert!(t.queue.equivalent(t.queue.max(), 10_000_000), "{}", t.queue.max());
        let mean_sum = t.queue.mean() + t.delay_part.mean();
        assert!((t.delay.mean() - mean_sum).abs() < 0.002 * t.delay.mean(), "{} vs {mean_sum}", t.delay.mean());
    }

    /// Both copies of a duplicate cost tokens: 500-byte packets, every one duplicated, into
    /// 8 Mbit/s (1 byte/us) with a 1000-byte bucket take 1 ms each after the first.
    #[test]
    fn a_duplicate_costs_its_two_copies_and_the_queue_shows_it() {
        let spec = Spec { rate_bps: Some(8_000_000), burst_bytes: 1_000, duplicate: 1.0, ..Spec::default() };
        let mut imp = Impairment::new(spec);
        let mut rng = SplitMix64::new(5);
        let left: Vec<(u64, u32)> = (0..3)
            .map(|_| match imp.decide(500, 0, &mut rng) {
                Verdict::Deliver { left_ns, copies, .. } => (left_ns, copies),
                Verdict::Drop(r) => panic!("dropped: {r:?}"),
            })
            .collect();
        assert_eq!(left, [(0, 2), (1_000_000, 2), (2_000_000, 2)]);
        // a packet arriving at 0 would wait until the last one leaves (2 ms); at 1.5 ms, 0.5 ms
        assert_eq!((imp.backlog_ns(0), imp.backlog_ns(1_500_000)), (2_000_000, 500_000));
        assert_eq!(Impairment::new(Spec::default()).backlog_ns(7), 0, "no rate, no queue");
    }

    #[test]
    fn a_seed_replays_exactly() {
        let spec = Spec {
            delay_ns: 1_000_000,
            jitter: Some(Jitter { ns: 300_000, dist: JitterDist::Pareto }),
            loss: Some(Loss::Burst { p: 0.02, r: 0.3 }),
            ..Spec::default()
        };
        assert_eq!(run(spec, 1_000, 10_000, 64).0, run(spec, 1_000, 10_000, 64).0);
    }
}
