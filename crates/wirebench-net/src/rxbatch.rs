//! Datagrams in batches for a forwarder (the relay): one `recvmmsg` takes up to
//! [`RX_BATCH`] datagrams that wait on a socket, each with its sender and, where the socket
//! has `SO_TIMESTAMPING` on ([`crate::stamp::enable`]), the kernel's software RX time.
//! The buffers are allocated once; a receive allocates nothing.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use crate::mmsg::{Msg, Slots};

/// The most datagrams one [`RxBatch::recv`] takes.
pub const RX_BATCH: usize = 32;

/// The fewest slots a receive offers.
const MIN_OFFER: usize = 4;

/// One received datagram of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// Its bytes.
    pub data: &'a [u8],
    /// The sender.
    pub from: Option<SocketAddr>,
    /// The kernel's software RX time (wall-clock ns), where the socket asked for it.
    pub rx_ns: Option<u64>,
}

/// Receive buffers for [`RX_BATCH`] datagrams of up to `slot` bytes each.
#[derive(Debug)]
pub struct RxBatch {
    data: Vec<u8>,
    slot: usize,
    slots: Box<Slots<RX_BATCH>>,
    msgs: [Msg; RX_BATCH],
    n: usize,
    /// Slots the next receive offers: all after a receive that filled what it offered (a
    /// backlog), else twice what the last one took (at least [`MIN_OFFER`]), so a socket
    /// that gets one datagram per wake-up is not charged the set-up of 32.
    offer: usize,
    /// Slots the last receive offered.
    last_offer: usize,
}

impl RxBatch {
    /// Buffers for datagrams of up to `slot` bytes (a longer one is cut to `slot`: give one
    /// byte more than the longest you accept to tell them apart). Allocates
    /// `RX_BATCH * slot` bytes.
    pub fn new(slot: usize) -> Self {
        let slot = slot.max(1);
        let empty = Msg { len: 0, gro: None, from: None, rx_ns: None };
        Self {
            data: vec![0; RX_BATCH * slot],
            slot,
            slots: Box::new(Slots::new()),
            msgs: [empty; RX_BATCH],
            n: 0,
            offer: RX_BATCH,
            last_offer: RX_BATCH,
        }
    }

    /// Takes the datagrams waiting on `sock` (non-blocking: give it a non-blocking socket),
    /// up to [`RX_BATCH`], in one `recvmmsg`; returns how many (0: none waited). A call after
    /// a small one offers fewer slots (see [`RxBatch::drained`]).
    pub fn recv(&mut self, sock: &impl AsRawFd) -> io::Result<usize> {
        self.n = 0;
        self.last_offer = self.offer;
        self.offer = RX_BATCH; // (after an error: nothing is known)
        self.n = self.slots.recv(sock.as_raw_fd(), &mut self.data, self.slot, &mut self.msgs, self.last_offer)?;
        self.offer = if self.n == self.last_offer { RX_BATCH } else { (2 * self.n).clamp(MIN_OFFER, RX_BATCH) };
        Ok(self.n)
    }

    /// Whether the last receive left the socket empty as far as it knows: it took fewer
    /// datagrams than it offered. False after a full one: read again for the rest.
    pub const fn drained(&self) -> bool {
        self.n < self.last_offer
    }

    /// Datagrams the last [`RxBatch::recv`] took.
    pub const fn len(&self) -> usize {
        self.n
    }

    /// Whether it took none.
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Datagram `k` of the last receive (`k < len()`; an empty one past it).
    pub fn get(&self, k: usize) -> Datagram<'_> {
        if k >= self.n {
            return Datagram { data: &[], from: None, rx_ns: None };
        }
        let m = &self.msgs[k];
        let at = k * self.slot;
        Datagram { data: &self.data[at..at + m.len.min(self.slot)], from: m.from, rx_ns: m.rx_ns }
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    #[test]
    fn one_call_takes_what_waits_with_senders_and_rx_times() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        crate::stamp::enable(&rx, false).unwrap();
        let to = rx.local_addr().unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RxBatch::new(8);
        // The kernel stamps received packets a moment after the first socket asks (a static
        // key switched by a work item): wait (blocking, bounded) for a stamped datagram.
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            a.send_to(b"warm", to).unwrap();
            assert_eq!(batch.recv(&rx).unwrap(), 1);
            if batch.get(0).rx_ns.is_some() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the kernel stamps within 10 s");
        }
        rx.set_nonblocking(true).unwrap();
        assert_eq!(batch.recv(&rx).unwrap(), 0, "nothing waits: no wait");
        let sent: Vec<(&UdpSocket, &[u8])> = (0..RX_BATCH + 3)
            .map(|i| if i % 2 == 0 { (&a, &b"even"[..]) } else { (&b, &b"odd-longer-than-8"[..]) })
            .collect();
        for (s, d) in &sent {
            s.send_to(d, to).unwrap();
        }
        // Loopback delivers in the sender's call: everything waits already. After the empty
        // receive the next offers MIN_OFFER slots, then all of them.
        let mut got = Vec::new();
        for want in [MIN_OFFER, RX_BATCH - 1] {
            let n = batch.recv(&rx).unwrap();
            assert_eq!(n, want);
            for k in 0..n {
                let d = batch.get(k);
                assert!(d.rx_ns.is_some_and(|t| t > 1_600_000_000_000_000_000), "an RX time: {d:?}");
                got.push((d.from.unwrap(), d.data.to_vec()));
            }
        }
        assert!(batch.drained(), "fewer than offered: nothing left");
        assert_eq!(got.len(), RX_BATCH + 3);
        for ((s, d), (from, data)) in sent.iter().zip(&got) {
            assert_eq!(*from, s.local_addr().unwrap());
            assert_eq!(&data[..], &d[..d.len().min(8)], "cut at the slot size");
        }
        assert_eq!(batch.get(RX_BATCH).data, b"", "past the batch");
    }

    /// A receive offers all slots after one that filled its offer, twice what the last one
    /// took otherwise (at least MIN_OFFER); `drained` is true only when it took fewer than
    /// it offered.
    #[test]
    fn a_receive_offers_what_the_last_one_suggests() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RxBatch::new(8);
        let send = |n: usize| {
            for _ in 0..n {
                tx.send_to(b"x", to).unwrap();
            }
        };
        // (datagrams waiting, then taken by each receive in turn)
        let steps: [(usize, &[usize]); 5] = [
            (40, &[RX_BATCH, 8]),      // a fresh batch offers all; 8 of 32 leaves it drained
            (40, &[16, RX_BATCH - 8]), // twice the last: 16, full, so all next
            (1, &[1]),
            (9, &[MIN_OFFER, 5]), // 1 taken: MIN_OFFER offered
            (3, &[3]),            // 5 taken: 10 offered, 3 is fewer
        ];
        for (waiting, takes) in steps {
            send(waiting);
            for (i, &want) in takes.iter().enumerate() {
                assert_eq!(batch.recv(&rx).unwrap(), want, "{waiting} waiting, receive {i}");
                assert_eq!(batch.drained(), i + 1 == takes.len(), "{waiting} waiting, receive {i}");
            }
        }
        assert_eq!(batch.recv(&rx).unwrap(), 0);
        assert!(batch.drained());
    }
}
