//! A sliding window over sequence numbers that tells a first arrival from a duplicate,
//! and says when a number is too old to tell. Memory is fixed at construction, so the
//! receive path never allocates.

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

/// Remembers which of the last `window` sequence numbers (below the highest seen) arrived.
#[derive(Debug, Clone)]
pub struct SeqWindow {
    bits: Vec<u64>,
    /// One past the highest sequence number seen; 0 before the first.
    top: u64,
}

impl SeqWindow {
    /// A window that remembers at least `window` sequence numbers (rounded up to 64).
    pub fn new(window: usize) -> Self {
        Self { bits: vec![0; window.div_ceil(64).max(1)], top: 0 }
    }

    /// Forgets everything, as if new (keeps the memory).
    pub fn reset(&mut self) {
        self.bits.fill(0);
        self.top = 0;
    }

    fn span(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    fn slot(&self, seq: u64) -> (usize, u64) {
        let bit = seq % self.span();
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    /// Records the arrival of `seq`.
    pub fn on_seq(&mut self, seq: u64) -> Arrival {
        if seq >= self.top {
            let gap = seq - self.top;
            if gap >= self.span() {
                self.bits.fill(0);
            } else {
                for s in self.top..seq {
                    let (w, m) = self.slot(s);
                    self.bits[w] &= !m;
                }
            }
            let (w, m) = self.slot(seq);
            self.bits[w] |= m;
            self.top = seq + 1;
            return Arrival::New;
        }
        if self.top - seq > self.span() {
            return Arrival::TooOld;
        }
        let (w, m) = self.slot(seq);
        if self.bits[w] & m != 0 {
            Arrival::Duplicate
        } else {
            self.bits[w] |= m;
            Arrival::New
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn new_duplicate_and_too_old() {
        let mut w = SeqWindow::new(64);
        assert_eq!(w.on_seq(5), Arrival::New);
        assert_eq!(w.on_seq(5), Arrival::Duplicate);
        assert_eq!(w.on_seq(3), Arrival::New, "late but first");
        assert_eq!(w.on_seq(3), Arrival::Duplicate);
        assert_eq!(w.on_seq(200), Arrival::New);
        assert_eq!(w.on_seq(100), Arrival::TooOld);
        assert_eq!(w.on_seq(137), Arrival::New, "inside the window again");
        assert_eq!(w.on_seq(1000), Arrival::New);
        assert_eq!(w.on_seq(999), Arrival::New, "bits cleared on a long jump");
    }

    proptest! {
        /// Against a set: inside the window the verdict is always exact.
        #[test]
        fn matches_a_set_inside_the_window(seqs in proptest::collection::vec(0u64..500, 1..400)) {
            let mut w = SeqWindow::new(512);
            let mut seen = HashSet::new();
            for s in seqs {
                let expect = if seen.insert(s) { Arrival::New } else { Arrival::Duplicate };
                prop_assert_eq!(w.on_seq(s), expect);
            }
        }
    }
}
