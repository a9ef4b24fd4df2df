//! A table of publishers for a receiver that accounts anyone's datagrams (`wirebench
//! listen`): one `StreamRx` per key (source, session, publisher), within a budget, so that
//! spoofed or abandoned keys cannot grow it without end.
//!
//! Budget: at most `max_live` publishers are tracked at once; one silent for `idle_ns` is
//! expired (its final counts move to the finished list); at most `max_finished` finished
//! publishers are kept for the report, the rest only counted. Datagrams of a new key while
//! the table is full are refused and counted. Memory is then bounded by `max_live` windows
//! (each 128 bytes, growing to 128 KiB only after half a million datagrams of its own) plus
//! `max_finished` counters.

use std::collections::HashMap;
use std::hash::Hash;

use super::{StreamCounts, StreamRx};

/// The limits of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Publishers tracked at once.
    pub max_live: usize,
    /// Finished publishers kept for the report.
    pub max_finished: usize,
    /// Silence after which a publisher is expired, ns.
    pub idle_ns: u64,
}

/// One tracked publisher.
#[derive(Debug, Clone)]
pub struct Entry<K> {
    /// Its key.
    pub key: K,
    /// Its accounting.
    pub rx: StreamRx,
    /// Its counts at the last report (for "since the last report").
    pub at_last_report: StreamCounts,
    /// When it was last reported, ns.
    pub last_report_ns: u64,
    /// Size of its first datagram.
    pub size: usize,
}

/// What the table did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Keys ever tracked.
    pub seen: u64,
    /// Keys expired for silence.
    pub expired: u64,
    /// Finished keys not kept (the finished list was full).
    pub not_kept: u64,
    /// Datagrams of new keys refused while the table was full.
    pub refused: u64,
}

/// The publishers of one receiver.
#[derive(Debug)]
pub struct Table<K> {
    budget: Budget,
    live: Vec<Entry<K>>,
    index: HashMap<K, usize>,
    /// The key of the last datagram and its slot (a GRO run is one publisher's).
    last: Option<(K, usize)>,
    finished: Vec<(K, StreamCounts, usize)>,
    tally: Tally,
}

impl<K: Copy + Eq + Hash> Table<K> {
    /// An empty table with `budget`.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            live: Vec::new(),
            index: HashMap::new(),
            last: None,
            finished: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// Accounts a datagram of `key` at `now`. Returns its slot in [`Self::live`], or `None`
    /// when the table is full and the key new (refused, counted).
    pub fn on_datagram(&mut self, key: K, seq: u64, len: usize, sent_ns: u64, now: u64) -> Option<usize> {
        let slot = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let i = if let Some(&i) = self.index.get(&key) {
                    i
                } else {
                    if self.live.len() >= self.budget.max_live {
                        self.tally.refused += 1;
                        return None;
                    }
                    self.live.push(Entry {
                        key,
                        rx: StreamRx::new(),
                        at_last_report: StreamCounts::default(),
                        last_report_ns: now,
                        size: len,
                    });
                    self.tally.seen += 1;
                    self.index.insert(key, self.live.len() - 1);
                    self.live.len() - 1
                };
                self.last = Some((key, i));
                i
            }
        };
        self.live[slot].rx.on_datagram(seq, len, sent_ns, now);
        Some(slot)
    }

    /// The publishers tracked now.
    pub fn live(&self) -> &[Entry<K>] {
        &self.live
    }

    /// The same, to update report marks.
    pub fn live_mut(&mut self) -> &mut [Entry<K>] {
        &mut self.live
    }

    /// Expires every publisher silent since `now - idle_ns`, calling `gone` with each
    /// before it leaves the table.
    pub fn expire(&mut self, now: u64, mut gone: impl FnMut(&mut Entry<K>)) {
        let mut i = 0;
        while i < self.live.len() {
            // The last new arrival (duplicates do not keep a publisher alive).
            if now.saturating_sub(self.live[i].rx.counts().last_ns) < self.budget.idle_ns {
                i += 1;
                continue;
            }
            gone(&mut self.live[i]);
            let e = self.live.swap_remove(i);
            self.index.remove(&e.key);
            if let Some(moved) = self.live.get(i) {
                self.index.insert(moved.key, i);
            }
            self.last = None;
            self.tally.expired += 1;
            self.finish(&e);
        }
    }

    fn finish(&mut self, e: &Entry<K>) {
        if self.finished.len() < self.budget.max_finished {
            self.finished.push((e.key, *e.rx.counts(), e.size));
        } else {
            self.tally.not_kept += 1;
        }
    }

    /// Every publisher's final counts and first datagram size: the finished ones kept, then
    /// every live one (at most `max_finished + max_live`; the table is consumed).
    pub fn into_results(mut self) -> (Vec<(K, StreamCounts, usize)>, Tally) {
        for e in std::mem::take(&mut self.live) {
            self.finished.push((e.key, *e.rx.counts(), e.size));
        }
        (self.finished, self.tally)
    }

    /// What the table did so far.
    pub const fn tally(&self) -> Tally {
        self.tally
    }

    /// Bytes the live publishers' sequence windows hold.
    pub fn window_bytes(&self) -> usize {
        self.live.iter().map(|e| e.rx.window_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Budget = Budget { max_live: 3, max_finished: 2, idle_ns: 1_000 };

    #[test]
    fn a_full_table_refuses_new_keys_and_counts_them() {
        let mut t = Table::new(B);
        for k in 0..3u32 {
            assert_eq!(t.on_datagram(k, 0, 100, 0, 10), Some(k as usize));
        }
        assert_eq!(t.on_datagram(9, 0, 100, 0, 10), None);
        assert_eq!(t.on_datagram(1, 1, 100, 0, 11), Some(1), "known keys still count");
        assert_eq!(t.tally(), Tally { seen: 3, refused: 1, ..Tally::default() });
        assert_eq!(t.live()[1].rx.counts().received, 2);
    }

    #[test]
    fn finished_publishers_beyond_the_budget_are_only_counted() {
        let mut t = Table::new(B);
        for round in 0..4u64 {
            let now = round * 10_000;
            t.on_datagram(round, 0, 100, 0, now);
            t.expire(now + 5_000, |_| {});
        }
        let (done, tally) = t.into_results();
        assert_eq!((done.len(), tally.expired, tally.not_kept), (2, 4, 2));
    }

    #[test]
    fn silent_keys_expire_and_make_room() {
        let mut t = Table::new(B);
        t.on_datagram(1u32, 0, 100, 0, 0);
        t.on_datagram(2, 0, 100, 0, 0);
        t.on_datagram(3, 0, 100, 0, 900);
        let mut gone = Vec::new();
        t.expire(1_500, |e| gone.push(e.key));
        assert_eq!(gone, [1, 2]);
        assert_eq!(t.live().len(), 1);
        assert_eq!(t.on_datagram(3, 1, 100, 0, 1_600), Some(0), "the index follows the move");
        assert_eq!(t.on_datagram(4, 0, 100, 0, 1_600), Some(1));
        let (done, tally) = t.into_results();
        assert_eq!(tally, Tally { seen: 4, expired: 2, not_kept: 0, refused: 0 });
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), [1, 2, 3, 4], "expired first, then live");
    }

    /// The budget's silence is inclusive: a publisher silent for exactly `idle_ns` goes,
    /// one silent 1 ns less stays.
    #[test]
    fn a_publisher_silent_for_exactly_idle_ns_expires() {
        let mut t = Table::new(B);
        t.on_datagram(1u32, 0, 100, 0, 500);
        t.expire(500 + B.idle_ns - 1, |_| {});
        assert_eq!(t.live().len(), 1);
        t.expire(500 + B.idle_ns, |_| {});
        assert_eq!((t.live().len(), t.tally().expired), (0, 1));
    }

    /// Report marks set through `live_mut` are the entries `live` shows.
    #[test]
    fn live_mut_reaches_the_live_entries() {
        let mut t = Table::new(B);
        t.on_datagram(1u32, 0, 100, 0, 10);
        t.on_datagram(2, 0, 100, 0, 10);
        for e in t.live_mut() {
            e.at_last_report = *e.rx.counts();
            e.last_report_ns = 20;
        }
        assert_eq!(t.live_mut().len(), 2);
        for e in t.live() {
            assert_eq!((e.at_last_report.received, e.last_report_ns), (1, 20));
        }
    }

    #[test]
    fn window_bytes_add_up_the_live_windows() {
        let mut t = Table::new(B);
        t.on_datagram(1u32, 0, 100, 0, 0);
        t.on_datagram(2, 0, 100, 0, 0);
        let each: Vec<usize> = t.live().iter().map(|e| e.rx.window_bytes()).collect();
        assert!(each.iter().all(|&b| b > 0), "a publisher's window holds bytes: {each:?}");
        assert_eq!(t.window_bytes(), each.iter().sum::<usize>());
        t.expire(B.idle_ns, |_| {});
        assert_eq!(t.window_bytes(), 0, "expired publishers hold none");
    }

    /// 40,000 spoofed keys (the attack that grew `listen` to 1 GiB): the table holds its
    /// budget and says how many it refused.
    #[test]
    fn spoofed_keys_stay_within_the_budget() {
        let budget = Budget { max_live: 256, max_finished: 256, idle_ns: 30_000_000_000 };
        let mut t = Table::new(budget);
        for k in 0..40_000u64 {
            t.on_datagram(k, k << 30, 32, 0, k);
        }
        assert_eq!(t.live().len(), 256);
        assert_eq!(t.tally().refused, 40_000 - 256);
        assert!(t.window_bytes() <= 256 * 128, "{}", t.window_bytes());
    }

    proptest::proptest! {
        /// Whatever arrives, the table never tracks more than its budget, and every datagram
        /// is either accounted or refused.
        #[test]
        fn budget_holds(ops in proptest::collection::vec((0u8..12, 0u64..50, 0u64..3_000), 1..400)) {
            let mut t = Table::new(B);
            let mut now = 0;
            let (mut taken, mut refused) = (0u64, 0u64);
            for (k, seq, dt) in ops {
                now += dt;
                if dt > 2_500 { t.expire(now, |_| {}); }
                match t.on_datagram(k, seq, 10, 0, now) { Some(_) => taken += 1, None => refused += 1 }
                proptest::prop_assert!(t.live().len() <= B.max_live);
            }
            proptest::prop_assert_eq!(t.tally().refused, refused);
            let counted: u64 = t.live().iter().map(|e| { let c = e.rx.counts(); c.received + c.duplicates + c.too_old }).sum();
            proptest::prop_assert!(counted <= taken);
        }
    }
}
