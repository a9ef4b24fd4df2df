//! Re-emission into the local group: one emitting socket per original sender (so local
//! receivers can still tell senders apart by source address), bounded by `--max-senders`.

use std::net::SocketAddrV4;

use wirebench_core::relay::digest;
use wirebench_core::seq::Arrival;
use wirebench_core::wire::relay::{HEADER_LEN, Header};
use wirebench_net::clock::wall_now_ns;

use super::{FLOW_IDLE_NS, Flow, Relay, sender_socket};

impl Relay<'_> {
    /// Peer `pi`'s datagram for group `gi` (payload of `len` bytes in the receive buffer).
    pub(super) fn reemit(&mut self, pi: usize, gi: usize, src: SocketAddrV4, h: &Header, len: usize, now: u64) {
        if !self.relaying || !self.remote(&self.groups[gi], pi, now) {
            // Not relaying yet, a peer gone from the list, or one that hears the group
            // natively (it is on our segment: re-emitting would double the group).
            self.peers[pi].stats.drops.not_relayed += 1;
            return;
        }
        if !self.carries(&self.groups[gi], now) {
            self.peers[pi].stats.drops.passive += 1;
            self.groups[gi].stats.drops.passive += 1;
            return;
        }
        let peer = &mut self.peers[pi];
        if peer.window.judge(h.origin, h.seq) != Arrival::New {
            peer.stats.drops.duplicate += 1;
            self.groups[gi].stats.drops.duplicate += 1;
            return;
        }
        if !peer.rate.allow(now) {
            peer.stats.drops.rate_cap += 1;
            self.groups[gi].stats.drops.rate_cap += 1;
            return;
        }
        if !self.open_flow(h.origin, h.sender, now) {
            self.peers[pi].stats.drops.senders_full += 1;
            self.groups[gi].stats.drops.senders_full += 1;
            return;
        }
        let Some(flow) = self.flows.get(&(h.origin, h.sender)) else { return };
        let payload = &self.buf[HEADER_LEN..HEADER_LEN + len];
        let g = &mut self.groups[gi];
        if flow.sock.send_to(payload, g.addr).is_err() {
            g.stats.drops.send_errors += 1;
            return;
        }
        let emitted = wall_now_ns();
        self.guard.emitted(digest(g.addr, flow.port, payload), now);
        g.stats.reemitted.add(len);
        let peer = &mut self.peers[pi];
        peer.stats.received.add(len);
        peer.stats.added_delay(h.rx_wall_ns, emitted);
        self.senders.add(h.sender, gi, Some(src), len);
    }

    /// The emitting socket for `sender` as carried by relay run `origin`: opened on first
    /// use; when `--max-senders` are open, the longest idle one (past [`FLOW_IDLE_NS`]) is
    /// closed for it, else false.
    fn open_flow(&mut self, origin: u64, sender: SocketAddrV4, now: u64) -> bool {
        let key = (origin, sender);
        if !self.flows.contains_key(&key) {
            if self.flows.len() >= self.cfg.max_senders {
                let Some((&old, f)) = self.flows.iter().min_by_key(|(_, f)| f.last_ns) else { return false };
                if now.saturating_sub(f.last_ns) < FLOW_IDLE_NS {
                    return false;
                }
                if let Some(f) = self.flows.remove(&old) {
                    self.own_ports.remove(&f.port);
                }
            }
            let Ok(sock) = sender_socket(SocketAddrV4::new(self.cfg.interface, 0), self.cfg) else { return false };
            let Ok(a) = sock.local_addr() else { return false };
            self.own_ports.insert(a.port());
            self.flows.insert(key, Flow { sock, port: a.port(), last_ns: now });
        }
        if let Some(f) = self.flows.get_mut(&key) {
            f.last_ns = now;
        }
        true
    }
}
