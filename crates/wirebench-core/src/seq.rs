//! A sliding window over sequence numbers that tells a first arrival from a duplicate,
//! and says when a number is too old to tell.
//!
//! A [`SeqWindow::growing`] window's memory grows with what arrived, not with what a sender
//! claims: it starts at
//! [`MIN_SPAN`] sequence numbers (128 bytes) and doubles, up to the maximum it was built
//! with, each time the unique arrivals reach half its span. A stream of a million datagrams
//! gets the full window; a sender that sends two datagrams numbered 0 and 2^40 gets 128
//! bytes (the first release allocated the maximum, 128 KiB, up front for every publisher of
//! every session, so a few hundred spoofed datagrams pinned megabytes). Growth is the only
//! allocation, at most log2(max / MIN_SPAN) times in a stream's life; the receive path
//! otherwise never allocates. Advancing over a gap clears whole words, so a sender jumping
//! its sequence numbers costs the receiver O(span / 64), not O(gap).

/// What one arrival is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Seen for the first time.
    New,
    /// Seen before.
    Duplicate,
    /// Older than the window reaches back; cannot be told apart, so callers count it
    /// separately rather than guess.
    TooOld,
}

/// The span a window starts with (sequence numbers).
pub const MIN_SPAN: u64 = 1024;

/// Remembers which of the last `span` sequence numbers (below the highest seen) arrived.
#[derive(Debug, Clone)]
pub struct SeqWindow {
    bits: Vec<u64>,
    /// One past the highest sequence number seen; 0 before the first.
    top: u64,
    /// Below this the window does not know (the part a growth added had not been tracked).
    floor: u64,
    /// Largest span it may grow to (a power of two).
    max_span: u64,
    /// Unique arrivals, for the growth rule.
    news: u64,
}

impl SeqWindow {
    /// A window that remembers at least `window` sequence numbers (rounded up to a power of
    /// two, at least 64), all allocated now: for a receive path that must never allocate
    /// (ping's responders).
    pub fn new(window: usize) -> Self {
        let span = (window as u64).max(64).next_power_of_two();
        Self { bits: vec![0; words(span)], top: 0, floor: 0, max_span: span, news: 0 }
    }

    /// Forgets everything, as if new (keeps the memory it has).
    pub fn reset(&mut self) {
        self.bits.fill(0);
        self.top = 0;
        self.floor = 0;
        self.news = 0;
    }

    /// A window that can remember up to `max` sequence numbers (rounded up to a power of two,
    /// at least [`MIN_SPAN`]); it starts at [`MIN_SPAN`] and doubles as data arrives.
    pub fn growing(max: usize) -> Self {
        let max_span = (max as u64).max(MIN_SPAN).next_power_of_two();
        Self { bits: vec![0; words(MIN_SPAN)], top: 0, floor: 0, max_span, news: 0 }
    }

    /// Sequence numbers it remembers now.
    pub fn span(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    /// Bytes its bits take now.
    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
    }

    fn slot(&self, seq: u64) -> (usize, u64) {
        let bit = seq & (self.span() - 1);
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    fn set(&mut self, seq: u64) {
        let (w, m) = self.slot(seq);
        self.bits[w] |= m;
    }

    fn is_set(&self, seq: u64) -> bool {
        let (w, m) = self.slot(seq);
        self.bits[w] & m != 0
    }

    /// Clears the slots of `from..to` (fewer than `span` numbers), a word at a time.
    fn clear(&mut self, from: u64, to: u64) {
        let mask = self.span() - 1;
        let mut s = from;
        while s < to {
            let bit = s & mask;
            let in_word = bit % 64;
            let n = (64 - in_word).min(to - s);
            let m = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << in_word };
            self.bits[(bit / 64) as usize] &= !m;
            s += n;
        }
    }

    /// Doubles the span, keeping what it knew.
    fn grow(&mut self) {
        let old = self.clone();
        self.bits = vec![0; words(old.span() * 2)];
        for s in old.top.saturating_sub(old.span()).max(old.floor)..old.top {
            if old.is_set(s) {
                self.set(s);
            }
        }
        self.floor = self.floor.max(old.top.saturating_sub(old.span()));
    }

    /// Records the arrival of `seq`.
    pub fn on_seq(&mut self, seq: u64) -> Arrival {
        let verdict = self.verdict(seq);
        if verdict == Arrival::New {
            self.news += 1;
            if self.news * 2 >= self.span() && self.span() < self.max_span {
                self.grow();
            }
        }
        verdict
    }

    fn verdict(&mut self, seq: u64) -> Arrival {
        if seq >= self.top {
            if seq - self.top >= self.span() {
                self.bits.fill(0);
            } else {
                self.clear(self.top, seq);
            }
            self.set(seq);
            self.top = seq + 1;
            return Arrival::New;
        }
        if self.top - seq > self.span() || seq < self.floor {
            return Arrival::TooOld;
        }
        if self.is_set(seq) {
            Arrival::Duplicate
        } else {
            self.set(seq);
            Arrival::New
        }
    }
}

fn words(span: u64) -> usize {
    usize::try_from(span / 64).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn new_duplicate_and_too_old() {
        let mut w = SeqWindow::growing(64);
        assert_eq!(w.span(), MIN_SPAN);
        assert_eq!(w.on_seq(5), Arrival::New);
        assert_eq!(w.on_seq(5), Arrival::Duplicate);
        assert_eq!(w.on_seq(3), Arrival::New, "late but first");
        assert_eq!(w.on_seq(3), Arrival::Duplicate);
        assert_eq!(w.on_seq(2000), Arrival::New);
        assert_eq!(w.on_seq(900), Arrival::TooOld);
        assert_eq!(w.on_seq(1137), Arrival::New, "inside the window again");
        assert_eq!(w.on_seq(10_000), Arrival::New);
        assert_eq!(w.on_seq(9999), Arrival::New, "bits cleared on a long jump");
        assert_eq!(w.on_seq(9999), Arrival::Duplicate);
    }

    #[test]
    fn a_reset_window_forgets_everything() {
        let mut w = SeqWindow::growing(1 << 16);
        for s in 0..600u64 {
            w.on_seq(s * 3);
        }
        let grown = w.span();
        assert!(grown > MIN_SPAN);
        w.reset();
        assert_eq!(w.span(), grown, "keeps its memory");
        assert_eq!(w.on_seq(0), Arrival::New, "below the old floor, and seen before the reset");
        assert_eq!(w.on_seq(3), Arrival::New);
        assert_eq!(w.on_seq(3), Arrival::Duplicate);
        // the count of arrivals starts again too: the next growth takes half the span anew
        for s in 4..=grown / 2 {
            w.on_seq(s);
        }
        assert_eq!(w.span(), grown, "one arrival short of half the span since the reset");
        w.on_seq(grown / 2 + 1);
        assert_eq!(w.span(), grown * 2);
    }

    /// A growing window doubles when its unique arrivals reach half its span, not one
    /// later, and never past its maximum (rounded up to a power of two, at least `MIN_SPAN`).
    #[test]
    fn growth_happens_at_half_the_span() {
        let mut w = SeqWindow::growing(3_000);
        for s in 0..MIN_SPAN / 2 - 1 {
            w.on_seq(s);
        }
        assert_eq!(w.span(), MIN_SPAN);
        w.on_seq(MIN_SPAN / 2 - 1);
        assert_eq!((w.span(), w.bytes()), (2 * MIN_SPAN, 256));
        for s in MIN_SPAN / 2..100_000 {
            w.on_seq(s);
        }
        assert_eq!(w.span(), 4_096, "3,000 rounds up to 4,096");
        let mut small = SeqWindow::growing(0);
        for s in 0..10_000u64 {
            small.on_seq(s);
        }
        assert_eq!(small.span(), MIN_SPAN, "the least it may grow to is where it starts");
        assert_eq!(SeqWindow::new(10).span(), 64);
        assert_eq!(SeqWindow::new(65).span(), 128);
    }

    #[test]
    fn an_eager_window_never_grows() {
        let mut w = SeqWindow::new(100);
        assert_eq!((w.span(), w.bytes()), (128, 16));
        for s in 0..10_000u64 {
            w.on_seq(s);
        }
        assert_eq!(w.span(), 128);
        assert_eq!(w.on_seq(9_872), Arrival::Duplicate);
        assert_eq!(w.on_seq(9_871), Arrival::TooOld);
    }

    #[test]
    fn memory_follows_arrivals_not_claims() {
        let mut w = SeqWindow::growing(1 << 20);
        assert_eq!(w.on_seq(0), Arrival::New);
        assert_eq!(w.on_seq(1 << 40), Arrival::New);
        assert_eq!(w.on_seq((1 << 40) - 5), Arrival::New);
        assert_eq!(w.bytes(), 128, "three datagrams do not grow it");
        for s in 0..(1u64 << 20) {
            w.on_seq((1 << 41) + s);
        }
        assert_eq!(w.span(), 1 << 20, "a million arrivals reach the maximum");
        assert_eq!(w.bytes(), 128 << 10);
        assert_eq!(w.on_seq((1 << 41) + 3), Arrival::Duplicate, "still remembered after growing");
    }

    /// After a growth, the part of the new span that was not tracked must not call an old
    /// duplicate new.
    #[test]
    fn growth_does_not_forget_into_new_arrivals() {
        let mut w = SeqWindow::growing(1 << 16);
        for s in 0..600u64 {
            assert_eq!(w.on_seq(s * 3), Arrival::New);
        }
        assert!(w.span() > MIN_SPAN);
        assert_eq!(w.on_seq(0), Arrival::TooOld, "older than it knew when it grew");
        // it grew at the 512th arrival (1,533, the top 1,534), keeping the 1,024 below it
        assert_eq!(w.on_seq(510), Arrival::Duplicate, "the oldest it kept");
        assert_eq!(w.on_seq(509), Arrival::TooOld, "one older");
        assert_eq!(w.on_seq(3 * 599), Arrival::Duplicate);
        assert_eq!(w.on_seq(3 * 599 - 1), Arrival::New);
    }

    #[test]
    fn a_jump_clears_whole_words() {
        let mut w = SeqWindow::growing(4096);
        for s in 0..1000u64 {
            w.on_seq(s);
        }
        // 1000..1900 never arrived: the clear over them must leave the slots empty.
        assert_eq!(w.on_seq(1900), Arrival::New);
        for s in 1000..1900u64 {
            assert_eq!(w.on_seq(s), Arrival::New, "{s}");
        }
    }

    proptest! {
        /// Against a set: inside the smallest window the verdict is always exact.
        #[test]
        fn matches_a_set_inside_the_window(seqs in proptest::collection::vec(0u64..1000, 1..3000), eager: bool) {
            let mut w = if eager { SeqWindow::new(1000) } else { SeqWindow::growing(1 << 20) };
            let mut seen = HashSet::new();
            for s in seqs {
                let expect = if seen.insert(s) { Arrival::New } else { Arrival::Duplicate };
                prop_assert_eq!(w.on_seq(s), expect);
            }
        }

        /// Anywhere: never calls a repeat new, and never calls a first arrival a duplicate.
        #[test]
        fn never_wrong_only_unsure(seqs in proptest::collection::vec(0u64..100_000, 1..5000), max in 0usize..70_000, eager: bool) {
            let mut w = if eager { SeqWindow::new(max) } else { SeqWindow::growing(max) };
            let mut counted = HashSet::new();
            for s in seqs {
                match w.on_seq(s) {
                    Arrival::New => prop_assert!(counted.insert(s), "{} called new twice", s),
                    Arrival::Duplicate => prop_assert!(counted.contains(&s), "{} called a duplicate at first", s),
                    Arrival::TooOld => {}
                }
            }
        }
    }
}
