//! Replies on the UDP and group sockets, and what every reply goes through: matched to its
//! target by the session it carries, its tag checked, its round trip recorded.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;

use wirebench_core::mesh::api::Proto;
use wirebench_core::mesh::window::ReplyOutcome;
use wirebench_core::wire::Kind;
use wirebench_core::wire::mesh as wire_mesh;
use wirebench_core::wire::probe::Probe;

use wirebench_net::clock::Clock as _;

use super::{GROUP_ID, Prober};

/// The longest datagram read whole from the shared and group sockets (a reply is a probe's
/// length, `super::PROBE_LEN`; a longer one is cut and then fails its match).
pub(super) const RX_SLOT: usize = 2048;

impl Prober {
    /// Replies on the shared socket (peers past the per-peer sockets' descriptor share,
    /// other addresses of a peer) or the group socket (every peer answers one group probe
    /// at once): one `recvmmsg` per wake-up takes what waits, up to `RX_BATCH` (32; fewer
    /// right after a small batch, `RxBatch::recv`). Anything beyond stays queued and keeps
    /// the socket in the level-triggered ready set, so the next wait returns at once with
    /// it: a flood at this socket cannot starve the schedule, and
    /// no read is spent on `EAGAIN` (reading until empty cost about 0.35 extra reads per
    /// reply where every reply lands here; test
    /// `a_batch_per_wait_leaves_the_rest_for_the_next_and_nothing_unread`). The replies of
    /// one batch share one arrival time, read right after the call returns.
    pub(super) fn drain_udp(&mut self, group: bool) {
        let Some(mut rx) = self.rx.take() else { return };
        let sock = if group { self.group_sock.as_ref() } else { Some(&self.udp) };
        // Nothing, or an error (a signal, or an ICMP error on the unconnected socket): the
        // level-triggered set reports the socket again if anything is left.
        let n = sock.map_or(0, |s| rx.recv(s).unwrap_or(0));
        let now = self.clock.now_ns();
        for k in 0..n {
            let d = rx.get(k);
            let id = if group {
                d.from.and_then(|f| self.group_by_ip.get(&f.ip()).copied())
            } else if let Some(id) = d.from.and_then(|f| self.stamp_target(f)) {
                // A STAMP reflection has no session of ours in it: its target is its source.
                self.on_stamp_reply(id, d.data, now);
                continue;
            } else {
                self.udp_target(d.data)
            };
            let own = |f: SocketAddr| self.cfg.self_match.is_self(SocketAddr::new(f.ip(), self.cfg.self_match.port));
            match id {
                Some(id) => self.on_reply(id, d.data, now),
                None if group && d.from.is_some_and(own) => {}
                None => {
                    self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.rx = Some(rx);
    }

    /// A reply on UDP target `id`'s own (connected) socket: the kernel lets only its peer's
    /// datagrams in. One read per wake-up: a target has a probe or two in flight, so a
    /// second read would nearly always find nothing (one `EAGAIN` system call per probe, for
    /// nothing); a datagram still queued keeps the socket in the level-triggered ready set,
    /// so the next wait returns at once with it (test
    /// `a_peer_socket_read_once_per_wait_leaves_nothing_unread`).
    /// The read goes into the kept buffer: between the wake-up and the reply's read nothing
    /// but the socket's lookup (a 2 KiB buffer on the stack was zeroed there before).
    pub(super) fn drain_peer(&mut self, id: u64) {
        let Some(sock) = self.slots.get(&id).and_then(|s| s.udp.as_ref()) else { return };
        // Nothing, or an ICMP error (the peer's port closed): the probe is lost.
        let Some(n) = recv_one(sock, &mut self.rbuf) else { return };
        let now = self.clock.now_ns();
        let buf = std::mem::take(&mut self.rbuf);
        if self.slots.get(&id).is_some_and(|s| s.stamp.is_some()) {
            // Only its reflector's datagrams reach a connected socket.
            self.on_stamp_reply(id, &buf[..n], now);
            self.rbuf = buf;
            return;
        }
        // Matched by the session it carries, as on the shared socket (a kernel that
        // delivered it here wrongly loses nothing).
        match self.udp_target(&buf[..n]) {
            Some(t) => self.on_reply(t, &buf[..n], now),
            None => {
                self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rbuf = buf;
    }

    /// The STAMP target whose reflector is at `from`.
    fn stamp_target(&self, from: SocketAddr) -> Option<u64> {
        self.by_key.get(&(from, Proto::Udp)).copied().filter(|id| self.slots.get(id).is_some_and(|s| s.stamp.is_some()))
    }

    /// The UDP target a reply names by its session.
    fn udp_target(&self, bytes: &[u8]) -> Option<u64> {
        Probe::parse(bytes)
            .ok()
            .map(|p| p.session().wrapping_sub(self.session))
            .filter(|id| self.slots.get(id).is_some_and(|s| s.proto == Proto::Udp))
    }

    pub(super) fn on_reply(&mut self, id: u64, bytes: &[u8], now: u64) {
        let Ok(p) = Probe::parse(bytes) else {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let target = self.slots.get(&id).map(|s| if s.proto == Proto::Multicast { GROUP_ID } else { id });
        if p.kind() != Kind::Reply || Some(p.session()) != target.map(|t| self.session.wrapping_add(t)) {
            self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(key) = &self.cfg.key
            && !wire_mesh::verify_reply(key, bytes)
        {
            self.shared.replies_unauthenticated.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(slot) = self.slots.get_mut(&id) else { return };
        match slot.target.on_reply(p.seq(), p.t1(), now, &self.windows) {
            ReplyOutcome::Recorded(rtt) => {
                #[expect(clippy::cast_precision_loss, reason = "seconds for Prometheus")]
                self.shared.rtt_of(slot.proto).observe(rtt as f64 / 1e9);
            }
            _ => {
                self.shared.replies_unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// One datagram from `sock`, retrying a read a signal interrupted; `None`: nothing queued, or
/// an error.
fn recv_one(sock: &UdpSocket, buf: &mut [u8]) -> Option<usize> {
    loop {
        match sock.recv(buf) {
            Ok(n) => return Some(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_net::ready::ReadySet;
    use wirebench_net::rxbatch::{RX_BATCH, RxBatch};

    /// Two replies queued on a peer socket: the prober's wait reports the socket, it reads
    /// one; the next wait reports it again at once for the other (a set that forgot it would
    /// sleep out the 10 s and report nothing), and then nothing is left.
    #[test]
    fn a_peer_socket_read_once_per_wait_leaves_nothing_unread() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        a.set_nonblocking(true).unwrap();
        let mut ready = ReadySet::new(8).unwrap();
        ready.add(&a, 7).unwrap();
        b.send(b"one").unwrap();
        b.send(b"two").unwrap();
        let (mut tokens, mut buf) = (Vec::new(), [0u8; 64]);
        for want in [&b"one"[..], b"two"] {
            ready.wait(10_000_000_000, &mut tokens).unwrap();
            assert_eq!(tokens, [7]);
            let n = recv_one(&a, &mut buf).unwrap();
            assert_eq!(&buf[..n], want);
        }
        ready.wait(0, &mut tokens).unwrap();
        assert!(tokens.is_empty(), "nothing left to read");
        assert_eq!(recv_one(&a, &mut buf), None);
    }

    /// More replies queued on the shared socket than one batch: each wait reports the
    /// socket, one `recvmmsg` takes at most a batch, the rest is reported again at once by
    /// the next wait (a set that forgot it would sleep out the 10 s and report nothing), and
    /// then nothing is left unread.
    #[test]
    fn a_batch_per_wait_leaves_the_rest_for_the_next_and_nothing_unread() {
        let shared = UdpSocket::bind("127.0.0.1:0").unwrap();
        shared.set_nonblocking(true).unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ready = ReadySet::direct(8, 4).unwrap();
        ready.add(&shared, 7).unwrap();
        let total = RX_BATCH + 5;
        for i in 0..total {
            peer.send_to(&u32::try_from(i).unwrap().to_be_bytes(), shared.local_addr().unwrap()).unwrap();
        }
        let (mut tokens, mut rx) = (Vec::new(), RxBatch::new(RX_SLOT));
        let mut got = Vec::new();
        for want in [RX_BATCH, 5] {
            ready.wait(10_000_000_000, &mut tokens).unwrap();
            assert_eq!(tokens, [7]);
            assert_eq!(rx.recv(&shared).unwrap(), want, "one call: at most a batch");
            got.extend((0..want).map(|k| u32::from_be_bytes(rx.get(k).data.try_into().unwrap())));
        }
        assert_eq!(got, (0..u32::try_from(total).unwrap()).collect::<Vec<_>>(), "every reply, in order");
        ready.wait(0, &mut tokens).unwrap();
        assert!(tokens.is_empty(), "nothing left to read");
        assert_eq!(rx.recv(&shared).unwrap(), 0);
    }
}
