//! The peer table's changes applied to the relay's per-slot state (`relay::slots::PeerSlots`
//! decides who holds which slot): a retired peer's counters go to the retired total, a slot
//! not held is always fresh; and the per-peer drop counter that keeps the totals.

use std::net::SocketAddrV4;

use wirebench_core::relay::slots::Changes;
use wirebench_core::relay::{PeerWindow, RateCap};
use wirebench_core::report::RelayDrops;
use wirebench_net::clock::Clock as _;

use super::{Peer, Relay};
use crate::relay::config::Config;
use crate::relay::stats::PeerStats;

impl Relay<'_> {
    /// Takes a new list: new peers get a slot (or wait for one), peers out of it stay in
    /// the table (inactive, not sent to) until the expiry.
    pub(super) fn set_peers(&mut self, list: &[SocketAddrV4]) {
        let ch = self.table.set_list(list, self.clock.now_ns());
        self.apply(&ch);
    }

    /// Applies a change of the table: a retired peer's counters go to the retired total
    /// (and it is no longer a segment mate), a slot given to an address starts from zero.
    pub(super) fn apply(&mut self, ch: &Changes) {
        // A retired slot's delays belong to the peer that held it.
        self.record_delays();
        let fresh = |cfg: &Config| Peer {
            stats: PeerStats::default(),
            window: PeerWindow::default(),
            rate: RateCap::new(cfg.max_rate),
        };
        // A retired slot gets fresh state at once (zeroed pages from the allocator cost less
        // than clearing the old histogram), so a slot not held is always fresh.
        for &(slot, addr) in &ch.retired {
            let old = std::mem::replace(&mut self.peers[slot], fresh(self.cfg));
            self.retired.fold(old.stats);
            for g in &mut self.groups {
                g.native.remove(&addr);
            }
        }
        for &(slot, _) in &ch.added {
            if slot == self.peers.len() {
                self.peers.push(fresh(self.cfg));
            }
        }
        if !ch.retired.is_empty() {
            eprintln!(
                "wirebench relay: {} peers retired (out of the list and silent for {:?}); {} live",
                ch.retired.len(),
                self.cfg.peer_expiry,
                self.table.len()
            );
        }
        if !ch.refused.is_empty() {
            eprintln!(
                "wirebench relay: the peer table is full ({} live peers): {} new peers wait for a slot (first {})",
                self.table.capacity(),
                ch.refused.len(),
                ch.refused[0]
            );
        }
    }

    /// Counts a datagram of peer `pi` dropped for `cause`, in its row and in the totals.
    pub(super) fn peer_drop(&mut self, pi: usize, cause: fn(&mut RelayDrops) -> &mut u64) {
        *cause(&mut self.peers[pi].stats.drops) += 1;
        *cause(&mut self.totals.drops) += 1;
    }
}
