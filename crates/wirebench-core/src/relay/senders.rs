//! The relay's sender table (`wirebench relay`): the original senders that have an emitting
//! socket of their own, at most `capacity` of them. A sender is known by the relay run
//! that carried it and its address. When the table is full, a new sender takes the place
//! of the least recently heard one, whatever its age, so senders that stop (or were never
//! more than one spoofed datagram) make room for a new one at once, and a sender that keeps
//! sending keeps its place as long as fewer than `capacity` others were heard since its
//! last datagram. New senders are admitted at most [`ADMIT_PER_SEC`] a second (each
//! costs the caller a socket), so a flood of new addresses cannot churn the table faster.
//!
//! Memory is allocated in [`SenderTable::new`]; admitting and evicting allocate nothing.

use std::net::SocketAddrV4;

use foldhash::{HashMap, HashMapExt as _};

use super::RateCap;

/// A sender: the relay run that carried it, and its address.
pub type SenderKey = (u64, SocketAddrV4);

/// New senders admitted per second at most (a burst of a tenth of that).
pub const ADMIT_PER_SEC: u64 = 1000;

/// What to do with a datagram of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// The sender is in the table (now the most recently heard).
    Known,
    /// A new sender, now in the table: open its socket; close `evict`'s first, if any.
    New {
        /// The least recently heard sender, evicted to make room.
        evict: Option<SenderKey>,
    },
    /// Over the admission rate: the datagram is dropped and the sender not admitted.
    Refused,
}

/// The table; see the module documentation.
#[derive(Debug, Clone)]
pub struct SenderTable {
    last: HashMap<SenderKey, u64>,
    capacity: usize,
    admit: RateCap,
}

impl SenderTable {
    /// A table of `capacity` senders (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self { last: HashMap::with_capacity(capacity + 1), capacity, admit: RateCap::new(ADMIT_PER_SEC) }
    }

    /// A datagram of `key` at `now` (ns).
    pub fn admit(&mut self, key: SenderKey, now: u64) -> Admit {
        if let Some(t) = self.last.get_mut(&key) {
            *t = (*t).max(now);
            return Admit::Known;
        }
        if !self.admit.allow(now) {
            return Admit::Refused;
        }
        let evict = if self.last.len() >= self.capacity {
            // Least recently heard first; ties by key, so the order is reproducible.
            let old = self.last.iter().min_by_key(|(k, t)| (**t, **k)).map(|(k, _)| *k);
            if let Some(k) = old {
                self.last.remove(&k);
            }
            old
        } else {
            None
        };
        self.last.insert(key, now);
        Admit::New { evict }
    }

    /// Takes `key` out (its socket could not be opened).
    pub fn forget(&mut self, key: &SenderKey) {
        self.last.remove(key);
    }

    /// Senders in the table.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Whether `key` is in the table.
    pub fn contains(&self, key: &SenderKey) -> bool {
        self.last.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn s(n: u32) -> SenderKey {
        (7, SocketAddrV4::new(Ipv4Addr::from(0x0a00_0000 + n), 4000))
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_full_table_evicts_the_least_recently_heard() {
        let mut t = SenderTable::new(3);
        assert!(t.is_empty());
        for n in 0..3 {
            assert_eq!(t.admit(s(n), u64::from(n) * MS), Admit::New { evict: None });
        }
        // Sender 0 is heard again: sender 1 is now the least recently heard.
        assert_eq!(t.admit(s(0), 10 * MS), Admit::Known);
        assert_eq!(t.admit(s(9), 11 * MS), Admit::New { evict: Some(s(1)) });
        assert_eq!(t.admit(s(10), 12 * MS), Admit::New { evict: Some(s(2)) });
        assert_eq!(t.admit(s(11), 13 * MS), Admit::New { evict: Some(s(0)) });
        assert_eq!((t.len(), t.is_empty()), (3, false));
        assert!(!t.contains(&s(0)) && t.contains(&s(9)) && t.contains(&s(11)));
        // An evicted sender that comes back is new again.
        assert_eq!(t.admit(s(0), 14 * MS), Admit::New { evict: Some(s(9)) });
        // Same address from another relay run: another sender.
        let other = (8, s(0).1);
        assert_eq!(t.admit(other, 15 * MS), Admit::New { evict: Some(s(10)) });
    }

    /// The defect: a table full of senders heard within 30 s refused every new one. Now 300
    /// spoofed senders every 10 s (one datagram each) cannot keep out a new sender that
    /// sends every 10 ms: it is admitted at once and never evicted.
    #[test]
    fn three_hundred_spoofed_senders_do_not_lock_out_a_real_one() {
        let mut t = SenderTable::new(256);
        let mut spoof = 0u32;
        let mut now = 0;
        let mut real = (0u64, 0u64);
        let me = (99, SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 5000));
        for step in 0..6_000u64 {
            now = step * 10 * MS; // 60 s in 10 ms steps
            // 300 spoofed senders per 10 s: 3 every 100 ms.
            if step % 10 == 0 {
                for _ in 0..3 {
                    assert!(matches!(t.admit(s(spoof), now), Admit::New { evict } if evict != Some(me)));
                    spoof += 1;
                }
            }
            if step >= 1_000 {
                match t.admit(me, now) {
                    Admit::Refused => {}
                    _ => real.0 += 1,
                }
                real.1 += 1;
            }
        }
        assert_eq!(real, (5_000, 5_000), "every datagram of the real sender got through");
        assert!(t.contains(&me) && t.len() == 256 && now > 0);
    }

    #[test]
    fn new_senders_are_admitted_at_a_bounded_rate() {
        let mut t = SenderTable::new(4096);
        let burst = (0..1_000u32).filter(|&n| t.admit(s(n), 0) != Admit::Refused).count();
        assert_eq!(burst, 100, "a tenth of a second's worth at once");
        // Known senders are never refused.
        assert_eq!(t.admit(s(0), 0), Admit::Known);
        let second =
            (1_000..3_000u32).filter(|&n| t.admit(s(n), u64::from(n - 999) * MS / 2) != Admit::Refused).count();
        assert_eq!(second, 1_000, "then 1,000 a second");
        t.forget(&s(0));
        assert!(!t.contains(&s(0)));
    }
}
