//! Re-emission into the local group: one emitting socket per original sender (so local
//! receivers can still tell senders apart by source address), bounded by `--max-senders`.
//! A batch's datagrams are judged one by one as they are read, then sent at the batch's end:
//! one `sendmmsg` per run of datagrams that share an emitting socket and a group.

use std::net::SocketAddrV4;
use std::time::Duration;

use wirebench_core::relay::senders::Admit;
use wirebench_core::seq::Arrival;
use wirebench_core::wire::relay::{HEADER_LEN, Header};
use wirebench_net::clock::{Clock as _, wall_now_ns};

use wirebench_net::fanout::SendWait;
use wirebench_net::rxbatch::RX_BATCH;

use super::{Flow, Pending, Relay, SEND_WAIT_NS, sender_socket};

impl Relay<'_> {
    /// Peer `pi`'s datagram for group `gi` (datagram `k` of the receive batch, with a
    /// payload of `len` bytes): judged now, queued for [`Relay::flush_reemit`].
    #[expect(clippy::too_many_arguments, reason = "one datagram's facts, passed on once")]
    pub(super) fn reemit(
        &mut self,
        pi: usize,
        gi: usize,
        src: SocketAddrV4,
        h: &Header,
        k: usize,
        len: usize,
        now: u64,
    ) {
        if !self.relaying || !self.remote(&self.groups[gi], pi, now) {
            // Not relaying yet, a peer gone from the list, or one that hears the group
            // natively (it is on our segment: re-emitting would double the group).
            self.peer_drop(pi, |d| &mut d.not_relayed);
            return;
        }
        if !self.carries(&self.groups[gi], now) {
            self.peer_drop(pi, |d| &mut d.passive);
            self.groups[gi].stats.drops.passive += 1;
            return;
        }
        let peer = &mut self.peers[pi];
        if peer.window.judge(h.origin, h.seq) != Arrival::New {
            self.peer_drop(pi, |d| &mut d.duplicate);
            self.groups[gi].stats.drops.duplicate += 1;
            return;
        }
        if !peer.rate.allow(now) {
            self.peer_drop(pi, |d| &mut d.rate_cap);
            self.groups[gi].stats.drops.rate_cap += 1;
            return;
        }
        if !self.open_flow(h.origin, h.sender, now) {
            self.peer_drop(pi, |d| &mut d.senders_full);
            self.groups[gi].stats.drops.senders_full += 1;
            return;
        }
        if self.pending_n == RX_BATCH {
            self.flush_reemit(now); // (a batch holds at most RX_BATCH)
        }
        self.pending[self.pending_n] = Pending { k, gi, pi, src, flow: (h.origin, h.sender), wall_ns: h.wall_ns, len };
        self.pending_n += 1;
    }

    /// Re-emits the queued datagrams, in order: one `sendmmsg` per run that shares an
    /// emitting socket and a group; counts each. The runs share one wait for room of
    /// [`super::SEND_WAIT`] (each is on its own socket, and a batch of 32 senders in turn
    /// is 32 runs: a wait each would hold the loop for 32 times the budget), counted from
    /// `now`, when the batch was read; the clock is read again only for a second run on.
    pub(super) fn flush_reemit(&mut self, now: u64) {
        let m = std::mem::take(&mut self.pending_n);
        let end_ns = now.saturating_add(SEND_WAIT_NS);
        let mut delays_full = false;
        let mut at = 0;
        while at < m {
            let first = self.pending[at];
            let run = self.pending[at..m].iter().take_while(|p| p.flow == first.flow && p.gi == first.gi).count();
            let now = if at == 0 { now } else { self.clock.now_ns() };
            let rxb = &self.rxb;
            let pend = &self.pending[at..at + run];
            let mut bufs: [&[u8]; RX_BATCH] = [&[]; RX_BATCH];
            for (b, p) in bufs.iter_mut().zip(pend) {
                *b = &rxb.get(p.k).data[HEADER_LEN..HEADER_LEN + p.len];
            }
            let g = &mut self.groups[first.gi];
            let Some(flow) = self.flows.get(&first.flow) else {
                // Its sender was evicted by a later one of the same batch (only when the batch
                // names more senders than --max-senders).
                g.stats.drops.send_errors += u64::try_from(run).unwrap_or(u64::MAX);
                at += run;
                continue;
            };
            let budget = Duration::from_nanos(end_ns.saturating_sub(now));
            self.burst.send(&flow.sock, &bufs[..run], g.addr, SendWait { budget, stop: self.stop.flag() });
            let emitted = wall_now_ns();
            for (j, p) in pend.iter().enumerate() {
                if self.burst.failed(j) {
                    g.stats.drops.send_errors += 1;
                    continue;
                }
                g.stats.reemitted.add(p.len);
                let peer = &mut self.peers[p.pi];
                peer.stats.received.add(p.len);
                self.totals.received.add(p.len);
                match peer.stats.added_delay(p.wall_ns, emitted) {
                    Some(d) => delays_full |= self.delays.push(p.pi, d),
                    None => self.totals.clock_negative += 1,
                }
                self.senders.add(p.flow.1, p.gi, Some(p.src), p.len);
            }
            at += run;
        }
        if delays_full {
            self.record_delays();
        }
    }

    /// Records the queued added delays in their peers' histograms (`stats::Delays`).
    pub(super) fn record_delays(&mut self) {
        for (pi, d) in self.delays.take() {
            if let Some(p) = self.peers.get_mut(pi) {
                p.stats.record(d);
            }
        }
    }

    /// The emitting socket for `sender` as carried by relay run `origin`: opened on first
    /// use; when `--max-senders` are open, the least recently heard one is closed for it
    /// (`relay::senders`). False over the admission rate, or when no socket opens.
    fn open_flow(&mut self, origin: u64, sender: SocketAddrV4, now: u64) -> bool {
        let key = (origin, sender);
        match self.flow_table.admit(key, now) {
            Admit::Known => true,
            Admit::Refused => false,
            Admit::New { evict } => {
                if let Some(old) = evict
                    && let Some(f) = self.flows.remove(&old)
                {
                    self.own_ports.closed(f.port, now);
                }
                let opened = sender_socket(SocketAddrV4::new(self.cfg.interface, 0), self.cfg)
                    .and_then(|sock| sock.local_addr().map(|a| (sock, a.port())));
                let Ok((sock, port)) = opened else {
                    self.flow_table.forget(&key);
                    return false;
                };
                self.own_ports.opened(port);
                self.flows.insert(key, Flow { sock, port });
                true
            }
        }
    }
}
