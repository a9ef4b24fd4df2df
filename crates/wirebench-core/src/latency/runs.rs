//! Runs of consecutive lost probes: on a lossy path (what `wirebench proxy --loss-burst`
//! makes) the longest run says how bursty the loss was, and a run that lasts to the end of a
//! measurement says a responder stopped answering.
//!
//! A probe is lost for a responder when no reply to it arrived within the timeout (late
//! replies included, as in [`super::ResponderStats::lost`]). Replies may arrive out of order,
//! so each probe is judged only once it falls out of a window of recent sequence numbers (the
//! same span as the caller's duplicate window: a reply older than that is counted late, never
//! on time) or when the measurement ends. Memory is fixed at construction.

/// The longest run of lost probes, and the run still open at the end.
#[derive(Debug, Clone)]
pub struct LossRuns {
    /// On-time flags of the probes in `[judged, judged + span)`; bits of probes at or above
    /// `top` are always clear.
    bits: Vec<u64>,
    /// The next probe to judge.
    judged: u64,
    /// One past the highest probe answered on time.
    top: u64,
    current: u64,
    /// The longest run that ended (a reply came after it).
    longest_ended: u64,
    lost: u64,
}

impl LossRuns {
    /// Runs over probes from `first` on, judged `window` probes (rounded up to 64) behind the
    /// highest answered one.
    pub fn new(window: usize, first: u64) -> Self {
        Self {
            bits: vec![0; window.div_ceil(64).max(1)],
            judged: first,
            top: first,
            current: 0,
            longest_ended: 0,
            lost: 0,
        }
    }

    fn span(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    fn slot(&self, seq: u64) -> (usize, u64) {
        let bit = seq % self.span();
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    /// Starts over from probe `first` (the measurement began there).
    pub fn restart(&mut self, first: u64) {
        self.bits.fill(0);
        *self = Self {
            bits: std::mem::take(&mut self.bits),
            judged: first,
            top: first,
            current: 0,
            longest_ended: 0,
            lost: 0,
        };
    }

    /// Probe `seq` was answered within its timeout.
    pub fn on_time(&mut self, seq: u64) {
        if seq < self.judged {
            return;
        }
        if seq >= self.top {
            self.judge_until((seq + 1).saturating_sub(self.span()));
            self.top = seq + 1;
        }
        let (w, m) = self.slot(seq);
        self.bits[w] |= m;
    }

    /// Judges every probe below `end` (one past the last probe sent): call once the last
    /// probe's timeout passed.
    pub fn finish(&mut self, end: u64) {
        self.judge_until(end);
    }

    fn judge_until(&mut self, end: u64) {
        while self.judged < end {
            if self.judged >= self.top {
                // Nothing at or above `top` was answered: one run of misses to `end`.
                self.miss(end - self.judged);
                self.judged = end;
                break;
            }
            let (w, m) = self.slot(self.judged);
            if self.bits[w] & m == 0 {
                self.miss(1);
            } else {
                self.bits[w] &= !m;
                self.longest_ended = self.longest_ended.max(self.current);
                self.current = 0;
            }
            self.judged += 1;
        }
    }

    fn miss(&mut self, n: u64) {
        self.current += n;
        self.lost += n;
    }

    /// The longest run of lost probes judged so far.
    pub fn longest(&self) -> u64 {
        self.longest_ended.max(self.current)
    }

    /// The longest run of lost probes that ended with a reply (so not [`Self::trailing`]).
    pub const fn longest_ended(&self) -> u64 {
        self.longest_ended
    }

    /// The run of lost probes up to the last one judged (after [`Self::finish`]: the probes
    /// at the end of the measurement that got no reply in time).
    pub const fn trailing(&self) -> u64 {
        self.current
    }

    /// Lost probes judged so far (after [`Self::finish`], the responder's lost count).
    pub const fn lost(&self) -> u64 {
        self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_by_hand() {
        let mut r = LossRuns::new(64, 10);
        // probes 10..30 sent; answered: 10, 11, 15, 16, 25 (arriving out of order), lost
        // 12-14 (3), 17-24 (8), 26-29 (4, to the end)
        for s in [11, 10, 16, 15, 25] {
            r.on_time(s);
        }
        r.finish(30);
        assert_eq!((r.longest(), r.trailing(), r.lost()), (8, 4, 15));
        assert_eq!(r.longest_ended(), 8);
        r.finish(40);
        assert_eq!((r.longest(), r.longest_ended(), r.trailing()), (14, 8, 14));
    }

    #[test]
    fn probes_before_the_start_do_not_count() {
        let mut r = LossRuns::new(64, 100);
        r.on_time(5);
        r.on_time(100);
        r.finish(101);
        assert_eq!((r.longest(), r.lost()), (0, 0));
        r.restart(200);
        r.on_time(201);
        r.finish(203);
        assert_eq!((r.longest(), r.trailing(), r.lost()), (1, 1, 2));
    }

    #[test]
    fn a_long_silence_is_judged_in_one_step() {
        let mut r = LossRuns::new(64, 0);
        r.on_time(0);
        r.on_time(10_000_000_000);
        r.finish(10_000_000_001);
        assert_eq!((r.longest(), r.trailing(), r.lost()), (9_999_999_999, 0, 9_999_999_999));
    }

    proptest! {
        /// Against a plain scan of which probes were answered: any order of arrivals within
        /// the window gives the same runs.
        #[test]
        fn matches_a_scan(answered in proptest::collection::vec(any::<bool>(), 1..600), seed in any::<u64>()) {
            let n = answered.len() as u64;
            let mut order: Vec<u64> = answered.iter().zip(0u64..).filter(|(a, _)| **a).map(|(_, s)| s).collect();
            // shuffle by sorting on a hash; keep arrivals within 64 of each other in sequence order
            order.sort_by_key(|&s| (s / 64, (s ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15)));
            let mut r = LossRuns::new(128, 0);
            for s in order {
                r.on_time(s);
            }
            r.finish(n);
            let (mut cur, mut longest, mut lost) = (0u64, 0u64, 0u64);
            for &a in &answered {
                if a { cur = 0 } else { cur += 1; lost += 1; longest = longest.max(cur) }
            }
            prop_assert_eq!((r.longest(), r.trailing(), r.lost()), (longest, cur, lost));
        }
    }
}
