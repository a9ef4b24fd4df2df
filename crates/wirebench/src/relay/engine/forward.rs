//! Forwarding: what a local group says, to the peers. A batch read from a group socket is
//! judged datagram by datagram in core (`relay::local::judge`: our own probe or echo, another
//! relay's probe, the designated relay's rate cap and size limit), wrapped in the relay header into one of [`FAN_BATCH`]
//! preallocated slots, and sent at the batch's end in one `sendmmsg` to every remote peer
//! (`wirebench_net::fanout`).

use std::net::SocketAddrV4;

use wirebench_core::relay::is_fresh;
use wirebench_core::relay::local::{Local, LocalView, judge};
use wirebench_core::wire::relay::{self as wire, Header, MAX_UDP_LEN, RelayKind};
use wirebench_net::clock::{Clock as _, wall_now_ns};
use wirebench_net::fanout::{FAN_BATCH, SendWait};

use super::{BURST_BATCHES, Relay, SEND_WAIT, v4};

impl Relay<'_> {
    /// Reads group `gi`'s socket a batch at a time; forwards each batch in one `sendmmsg`.
    /// The first batch is read at `woke` (when the wait returned), later ones read the clock.
    pub(super) fn drain_group(&mut self, gi: usize, woke: u64) {
        for b in 0..BURST_BATCHES {
            let Ok(n) = self.rxb.recv(&self.groups[gi].sock) else { return };
            // One clock read per batch: its datagrams were read together.
            let now = if b == 0 { woke } else { self.clock.now_ns() };
            for k in 0..n {
                let d = self.rxb.get(k);
                if let Some(src) = d.from.and_then(v4) {
                    self.local(gi, k, src, d.rx_ns, now);
                }
            }
            self.flush_forward(gi);
            if self.rxb.drained() {
                return; // drained
            }
        }
    }

    /// Sends the forwarded batch of group `gi` to its peers (one `sendmmsg`) and counts
    /// each copy.
    fn flush_forward(&mut self, gi: usize) {
        let m = std::mem::take(&mut self.fwd_n);
        if m == 0 {
            return;
        }
        let fwd = &self.fwd;
        let lens = &self.fwd_len;
        let bufs: [&[u8]; FAN_BATCH] = std::array::from_fn(|k| &fwd[k * MAX_UDP_LEN..k * MAX_UDP_LEN + lens[k].0]);
        let g = &mut self.groups[gi];
        g.fan.send_batch(&self.sock, &bufs[..m], SendWait { budget: SEND_WAIT, stop: self.stop.flag() });
        for (k, &(_, n)) in lens[..m].iter().enumerate() {
            for (i, &pi) in g.dest_peers.iter().enumerate() {
                if g.fan.failed_at(k, i) {
                    self.peers[pi].stats.drops.send_errors += 1;
                    self.totals.drops.send_errors += 1;
                    g.stats.drops.send_errors += 1;
                } else {
                    self.peers[pi].stats.sent.add(n);
                    self.totals.sent.add(n);
                    g.stats.forwarded.add(n);
                }
            }
        }
    }

    /// Datagram `at` of the batch, heard on group `gi` from `src`, that entered this host's
    /// stack at `kernel_rx` (wall clock ns; `None` when the kernel gave no timestamp), read
    /// at `now` (monotonic ns): judged (`relay::local::judge`), then counted, answered or
    /// queued for the peers.
    fn local(&mut self, gi: usize, at: usize, src: SocketAddrV4, kernel_rx: Option<u64>, now: u64) {
        let g = &mut self.groups[gi];
        let mut view = LocalView {
            me: self.cfg.me,
            interface: self.cfg.interface,
            group: g.addr,
            own_ports: &self.own_ports,
            peers: &self.table,
            key: self.cfg.key.as_ref(),
            relaying: self.relaying,
            force: self.cfg.force,
            mates: &g.mates,
            rate: &mut g.rate,
        };
        let verdict = judge(&mut view, src, self.rxb.get(at).data, now);
        let drops = &mut self.groups[gi].stats.drops;
        match verdict {
            Local::Own | Local::Relay | Local::Checking => {}
            Local::Looped => drops.looped += 1,
            Local::Passive => drops.passive += 1,
            Local::TooBig => drops.too_big += 1,
            Local::RateCapped => drops.rate_cap += 1,
            Local::OtherVersion(v) => self.tell_version(src, v),
            Local::Probe(p) => self.answer_probe(gi, src, &p, now),
            Local::Forward => self.queue_forward(gi, at, src, kernel_rx),
        }
    }

    /// A peer's probe heard natively on group `gi`: with a token its time must be
    /// authentic, and a probe not newer than the mate's last is a replay either way: neither
    /// keeps a mate alive nor is answered. The answer names the prober's run and probe, so
    /// it answers nothing else.
    fn answer_probe(&mut self, gi: usize, src: SocketAddrV4, p: &Header, now: u64) {
        if (self.cfg.key.is_some() && !is_fresh(p.wall_ns, wall_now_ns()))
            || !self.mate(gi, src, Some(p.origin), p.seq, now)
        {
            self.groups[gi].stats.drops.stale += 1;
            return;
        }
        let h = Header { kind: RelayKind::Seen, wall_ns: wall_now_ns(), sender: src, ..*p };
        if let Some(len) = wire::encode(&mut self.out, &h, &[], self.cfg.key.as_ref()) {
            let _ = self.sock.send_to(&self.out[..len], src);
        }
    }

    /// Queues datagram `at` of the batch, from `src` on group `gi`, for the peers: wrapped
    /// in the relay header in the next slot of the forwarded batch.
    fn queue_forward(&mut self, gi: usize, at: usize, src: SocketAddrV4, kernel_rx: Option<u64>) {
        let n = self.rxb.get(at).data.len();
        let g = &mut self.groups[gi];
        g.stats.local_in.add(n);
        self.senders.add(src, gi, None, n);
        if g.dests.is_empty() {
            return;
        }
        let h = Header {
            kind: RelayKind::Data,
            origin: self.id,
            seq: self.seq,
            wall_ns: kernel_rx.unwrap_or_else(wall_now_ns),
            group: g.addr,
            sender: src,
        };
        self.seq += 1;
        if self.fwd_n == FAN_BATCH {
            self.flush_forward(gi); // (a batch holds at most RX_BATCH == FAN_BATCH, `wirebench_net::rxbatch`)
        }
        let j = self.fwd_n;
        let data = self.rxb.get(at).data;
        let slot = &mut self.fwd[j * MAX_UDP_LEN..(j + 1) * MAX_UDP_LEN];
        let Some(len) = wire::encode(slot, &h, data, self.cfg.key.as_ref()) else {
            self.groups[gi].stats.drops.too_big += 1;
            return;
        };
        self.fwd_len[j] = (len, n);
        self.fwd_n += 1;
    }
}
