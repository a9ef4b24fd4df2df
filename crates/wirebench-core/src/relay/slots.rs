//! The relay's peer table (`wirebench relay`): a fixed number of slots, one per peer, so
//! per-peer state (counters, duplicate window, rate cap) is bounded however many addresses
//! discovery names over a relay's life.
//!
//! - A peer in the current list is *listed*; it keeps its slot as long as it stays listed.
//! - A peer dropped from the list keeps its slot (and its counters and duplicate window, if
//!   it comes back) until it has been out of the list *and* unheard for the expiry. Then it
//!   is *retired*: the caller folds its counters into the retired total, and the slot is free.
//! - A listed address without a slot takes a free one; when every slot is held by a live
//!   peer (listed, or within the expiry) it waits, counted once as refused, and takes the
//!   first slot that frees.
//!
//! Time comes in as `now` (ns); what changed goes out as [`Changes`] for the caller's own
//! per-slot state.

use std::collections::BTreeSet;
use std::net::SocketAddrV4;

use foldhash::{HashMap, HashMapExt as _};

/// One held slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The peer's relay address.
    pub addr: SocketAddrV4,
    /// In the current list.
    pub listed: bool,
    /// When it was last heard from, or last in the list (whichever is later).
    last_ns: u64,
}

/// What a call changed, in order: retire the `retired` slots first (fold their counters
/// away), then start the `added` ones from zero (a slot can be in both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Slots whose peer was retired, with its address.
    pub retired: Vec<(usize, SocketAddrV4)>,
    /// Slots given to an address, with the address.
    pub added: Vec<(usize, SocketAddrV4)>,
    /// Listed addresses that found every slot held by a live peer (each counted once per
    /// stay in the list).
    pub refused: Vec<SocketAddrV4>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.retired.is_empty() && self.added.is_empty() && self.refused.is_empty()
    }
}

/// The table: at most `capacity` slots, peers retired after `expiry_ns` out of the list and
/// unheard.
#[derive(Debug, Clone)]
pub struct PeerSlots {
    slots: Vec<Option<Slot>>,
    by_addr: HashMap<SocketAddrV4, usize>,
    free: Vec<usize>,
    capacity: usize,
    expiry_ns: u64,
    list: Vec<SocketAddrV4>,
    waiting: BTreeSet<SocketAddrV4>,
    delisted: usize,
    refused: u64,
    retired: u64,
}

impl PeerSlots {
    /// A table of `capacity` slots (at least 1); a peer is retired `expiry_ns` after it left
    /// the list and was last heard from.
    pub fn new(capacity: usize, expiry_ns: u64) -> Self {
        Self {
            slots: Vec::new(),
            by_addr: HashMap::new(),
            free: Vec::new(),
            capacity: capacity.max(1),
            expiry_ns,
            list: Vec::new(),
            waiting: BTreeSet::new(),
            delisted: 0,
            refused: 0,
            retired: 0,
        }
    }

    /// The slot of `addr`, if it holds one.
    pub fn slot(&self, addr: &SocketAddrV4) -> Option<usize> {
        self.by_addr.get(addr).copied()
    }

    /// Slot `i`, if held.
    pub fn get(&self, i: usize) -> Option<&Slot> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    /// Whether slot `i` holds a listed peer.
    pub fn listed(&self, i: usize) -> bool {
        self.get(i).is_some_and(|s| s.listed)
    }

    /// The held slots, by index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
    }

    /// Slots held (live peers).
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// Whether no slot is held.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// The most slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Listed addresses refused so far (each once per stay in the list).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Listed addresses waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Peers retired so far.
    pub fn retired(&self) -> u64 {
        self.retired
    }

    /// The peer in slot `i` was heard from at `now` (keeps a peer out of the list alive).
    pub fn heard(&mut self, i: usize, now: u64) {
        if let Some(Some(s)) = self.slots.get_mut(i) {
            s.last_ns = s.last_ns.max(now);
        }
    }

    /// The list is now `list` (at `now`): peers out of it start their expiry, peers back in
    /// it keep their slot; then [`PeerSlots::expire`].
    pub fn set_list(&mut self, list: &[SocketAddrV4], now: u64) -> Changes {
        self.list.clear();
        self.list.extend_from_slice(list);
        self.list.sort_unstable();
        self.list.dedup();
        self.delisted = 0;
        for s in self.slots.iter_mut().flatten() {
            let listed = self.list.binary_search(&s.addr).is_ok();
            if s.listed && !listed {
                s.last_ns = s.last_ns.max(now);
            }
            s.listed = listed;
            self.delisted += usize::from(!listed);
        }
        self.waiting.retain(|a| self.list.binary_search(a).is_ok());
        self.expire(now)
    }

    /// Retires peers out of the list and unheard for the expiry at `now`, then gives free
    /// slots to listed addresses without one (in address order).
    pub fn expire(&mut self, now: u64) -> Changes {
        let mut ch = Changes::default();
        if self.delisted > 0 {
            for (i, cell) in self.slots.iter_mut().enumerate() {
                if let Some(s) = cell
                    && !s.listed
                    && now.saturating_sub(s.last_ns) >= self.expiry_ns
                {
                    ch.retired.push((i, s.addr));
                    self.by_addr.remove(&s.addr);
                    *cell = None;
                    self.free.push(i);
                    self.delisted -= 1;
                    self.retired += 1;
                }
            }
        }
        // Lowest free slot first, so slot numbers are reproducible.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        for &a in &self.list {
            if self.by_addr.contains_key(&a) {
                continue;
            }
            let i = if let Some(i) = self.free.pop() {
                i
            } else if self.slots.len() < self.capacity {
                self.slots.push(None);
                self.slots.len() - 1
            } else {
                if self.waiting.insert(a) {
                    self.refused += 1;
                    ch.refused.push(a);
                }
                continue;
            };
            self.waiting.remove(&a);
            self.slots[i] = Some(Slot { addr: a, listed: true, last_ns: now });
            self.by_addr.insert(a, i);
            ch.added.push((i, a));
        }
        ch
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn addr(n: u32) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(0x0a00_0000 + n), 7880)
    }

    fn addrs(from: u32, n: u32) -> Vec<SocketAddrV4> {
        (from..from + n).map(addr).collect()
    }

    const S: u64 = 1_000_000_000;

    /// The defect: 1,024 addresses filled the table for the relay's life. Now a full
    /// table of peers gone quiet past the expiry makes room for 1,024 new ones.
    #[test]
    fn peers_gone_quiet_past_the_expiry_free_their_slots_for_new_ones() {
        let mut t = PeerSlots::new(1024, 60 * S);
        assert_eq!(t.capacity(), 1024);
        let first = addrs(0, 1024);
        let ch = t.set_list(&first, 0);
        assert_eq!(ch.added.len(), 1024);
        assert_eq!((t.len(), t.refused()), (1024, 0));
        // Every one of them is heard from until 10 s.
        for i in 0..1024 {
            t.heard(i, 10 * S);
        }
        // The list moves on to 1,024 others at 20 s: the old ones are live (out of the list
        // for less than the expiry), so the new ones wait, each refused once.
        let second = addrs(5000, 1024);
        let ch = t.set_list(&second, 20 * S);
        assert_eq!(ch, Changes { retired: vec![], added: vec![], refused: second.clone() });
        assert_eq!((t.refused(), t.waiting()), (1024, 1024));
        assert!(second.iter().all(|a| t.slot(a).is_none()), "waiting peers hold no slot");
        // Checked again before the expiry: nothing changes, and nobody is refused twice.
        assert_eq!(t.expire(79 * S), Changes::default());
        assert_eq!(t.set_list(&second, 79 * S), Changes::default());
        // 60 s after they left the list (and 70 s unheard), they are retired; every new
        // address gets a slot.
        let ch = t.expire(80 * S);
        assert_eq!(ch.retired.len(), 1024);
        assert_eq!(ch.added.len(), 1024);
        assert_eq!(ch.refused, []);
        assert_eq!((t.len(), t.waiting(), t.retired(), t.refused()), (1024, 0, 1024, 1024));
        for a in &second {
            let i = t.slot(a).expect("a slot");
            assert!(t.listed(i));
            assert_eq!(t.get(i).unwrap().addr, *a);
        }
        assert!(first.iter().all(|a| t.slot(a).is_none()));
        let mut slots: Vec<usize> = second.iter().map(|a| t.slot(a).unwrap()).collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..1024).collect::<Vec<_>>(), "the same 1,024 slots, reused");
    }

    /// A peer out of the list that is still heard from keeps its slot; the expiry counts
    /// from the later of leaving the list and the last datagram.
    #[test]
    fn the_expiry_counts_from_leaving_the_list_or_the_last_datagram() {
        let mut t = PeerSlots::new(4, 10 * S);
        t.set_list(&addrs(0, 2), 0);
        t.heard(0, 3 * S);
        assert_eq!(t.set_list(&addrs(1, 1), 5 * S), Changes::default(), "addr 0 leaves the list at 5 s");
        assert!(!t.listed(0) && t.listed(1));
        t.heard(0, 12 * S);
        assert_eq!(t.expire(21 * S), Changes::default(), "heard at 12 s: live until 22 s");
        assert_eq!(t.expire(22 * S), Changes { retired: vec![(0, addr(0))], ..Changes::default() });
        // A listed peer is never retired, however long it is silent.
        assert_eq!(t.expire(1_000 * S), Changes::default());
        assert_eq!(t.slot(&addr(1)), Some(1));
    }

    /// Back in the list before the expiry: the same slot (its state carries on). Back
    /// after it: a slot of its own again, announced as added (its state starts from zero).
    #[test]
    fn a_peer_that_comes_back_keeps_its_slot_before_the_expiry_and_gets_a_fresh_one_after() {
        let mut t = PeerSlots::new(2, 10 * S);
        t.set_list(&[addr(1), addr(2)], 0);
        assert_eq!(t.slot(&addr(2)), Some(1));
        t.set_list(&[addr(1)], S);
        assert_eq!(t.set_list(&[addr(1), addr(2)], 5 * S), Changes::default(), "back within the expiry");
        assert_eq!(t.slot(&addr(2)), Some(1));
        t.set_list(&[addr(1), addr(3)], 6 * S);
        let ch = t.expire(16 * S);
        assert_eq!(ch.retired, [(1, addr(2))]);
        assert_eq!(ch.added, [(1, addr(3))], "the retired slot, reused at once");
        t.set_list(&[addr(2), addr(3)], 17 * S);
        let ch = t.expire(27 * S);
        assert_eq!((ch.retired, ch.added), (vec![(0, addr(1))], vec![(0, addr(2))]));
        assert_eq!(t.retired(), 2);
        assert_eq!(t.refused(), 2, "addr 3 waited (6 s to 16 s), then addr 2 (17 s to 27 s)");
    }

    /// A table full of live (listed) peers refuses one more, counts it once, and gives it
    /// nothing until a slot frees.
    #[test]
    fn a_table_full_of_listed_peers_refuses_the_next_one() {
        let mut t = PeerSlots::new(1024, 60 * S);
        let mut list = addrs(0, 1024);
        t.set_list(&list, 0);
        list.push(addr(9999));
        let ch = t.set_list(&list, S);
        assert_eq!(ch.refused, [addr(9999)]);
        assert_eq!(t.slot(&addr(9999)), None);
        assert_eq!(t.expire(1_000 * S), Changes::default(), "listed peers never expire");
        t.set_list(&list, 1_001 * S);
        assert_eq!((t.refused(), t.waiting()), (1, 1), "refused once while it waits");
        // One peer leaves the list: after the expiry the waiting one takes its slot.
        list.remove(7);
        t.set_list(&list, 1_002 * S);
        let ch = t.expire(1_062 * S);
        assert_eq!((ch.retired, ch.added), (vec![(7, addr(7))], vec![(7, addr(9999))]));
        assert_eq!(t.waiting(), 0);
        // Out of the list while waiting: it stops waiting and, back, is refused again.
        list.push(addr(10_000));
        t.set_list(&list, 1_063 * S);
        list.pop();
        t.set_list(&list, 1_064 * S);
        assert_eq!(t.waiting(), 0);
        list.push(addr(10_000));
        t.set_list(&list, 1_065 * S);
        assert_eq!(t.refused(), 3);
    }

    /// What a call changed is not empty when any one of its lists is not, and the caller
    /// (which applies changes only then) sees each: retired, added, refused.
    #[test]
    fn changes_are_not_empty_when_anything_changed() {
        assert!(Changes::default().is_empty());
        let one = [
            Changes { retired: vec![(0, addr(1))], ..Changes::default() },
            Changes { added: vec![(0, addr(1))], ..Changes::default() },
            Changes { refused: vec![addr(1)], ..Changes::default() },
        ];
        assert!(one.iter().all(|c| !c.is_empty()));
        // A table of one slot: the first address takes it, the second waits.
        let mut t = PeerSlots::new(0, 10 * S);
        assert_eq!((t.capacity(), t.len(), t.is_empty()), (1, 0, true));
        let ch = t.set_list(&[addr(1), addr(2)], 0);
        assert!(!ch.is_empty());
        assert_eq!(ch, Changes { retired: vec![], added: vec![(0, addr(1))], refused: vec![addr(2)] });
        assert_eq!((t.len(), t.is_empty()), (1, false));
        assert_eq!(t.iter().map(|(i, s)| (i, s.addr, s.listed)).collect::<Vec<_>>(), [(0, addr(1), true)]);
        // addr 1 leaves; heard at 4 s, an older datagram does not move that back
        t.set_list(&[addr(2)], S);
        t.heard(0, 4 * S);
        t.heard(0, 2 * S);
        t.heard(5, 9 * S);
        assert_eq!(t.expire(13 * S), Changes::default());
        let ch = t.expire(14 * S);
        assert!(!ch.is_empty());
        assert_eq!(ch, Changes { retired: vec![(0, addr(1))], added: vec![(0, addr(2))], refused: vec![] });
        assert_eq!((t.retired(), t.refused(), t.waiting()), (1, 1, 0));
    }

    /// Slots freed together are given out lowest first, whatever order they freed in.
    #[test]
    fn the_lowest_free_slot_is_given_first() {
        let mut t = PeerSlots::new(3, 10 * S);
        t.set_list(&[addr(1), addr(2), addr(3)], 0);
        t.set_list(&[addr(2)], S);
        assert_eq!(t.expire(11 * S).retired, [(0, addr(1)), (2, addr(3))]);
        let ch = t.set_list(&[addr(2), addr(9)], 12 * S);
        assert_eq!(ch, Changes { added: vec![(0, addr(9))], ..Changes::default() });
        let ch = t.set_list(&[addr(2), addr(8), addr(9)], 13 * S);
        assert_eq!(ch, Changes { added: vec![(2, addr(8))], ..Changes::default() });
    }
}
