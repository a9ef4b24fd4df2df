//! Datagrams to many unicast addresses in one `sendmmsg(2)` (the relay's fan-out to its
//! peers): a batch of up to [`FAN_BATCH`] datagrams, each to every destination. The message
//! headers are allocated once, when the peer list changes, never per datagram.

use std::io::IoSlice;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, sendmmsg};

/// The most datagrams one [`FanOut::send_batch`] takes.
pub const FAN_BATCH: usize = 32;
/// The most messages one `sendmmsg` takes (the kernel's `UIO_MAXIOV`).
const MAX_MSGS: usize = 1024;

/// Preallocated headers and addresses for a fan-out to a fixed set of destinations.
pub struct FanOut {
    headers: MultiHeaders<SockaddrIn>,
    /// The destinations, repeated for every datagram of a batch (capped at [`MAX_MSGS`]).
    addrs: Vec<Option<SockaddrIn>>,
    n: usize,
    /// Per message of the last batch (datagram-major): whether it failed.
    failed: Vec<bool>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut").field("destinations", &self.n).finish_non_exhaustive()
    }
}

impl FanOut {
    /// A fan-out to `dests`.
    pub fn new(dests: &[SocketAddrV4]) -> Self {
        let n = dests.len();
        let msgs = (n * FAN_BATCH).clamp(1, MAX_MSGS.max(n));
        let addrs: Vec<Option<SockaddrIn>> =
            dests.iter().map(|d| Some(SockaddrIn::from(*d))).cycle().take(if n == 0 { 0 } else { msgs }).collect();
        Self { headers: MultiHeaders::preallocate(msgs, None), addrs, n, failed: vec![false; n * FAN_BATCH] }
    }

    /// Destinations.
    pub const fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Sends `buf` to every destination from `sock` (a batch of one).
    pub fn send(&mut self, sock: &UdpSocket, buf: &[u8]) -> usize {
        self.send_batch(sock, &[buf])
    }

    /// Sends each of `bufs` (at most [`FAN_BATCH`]; more are not sent and count as failed)
    /// to every destination from `sock`, datagram by datagram, in as few `sendmmsg` calls as
    /// the kernel takes (one for up to 1,024 messages), never waiting: a full send buffer or
    /// an unreachable destination drops that copy. Returns how many copies went out, and
    /// [`FanOut::failed`] says which did not. `sendmmsg` stops at the first message that
    /// fails, so the rest are sent by another call: one bad peer never costs the others.
    pub fn send_batch(&mut self, sock: &UdpSocket, bufs: &[&[u8]]) -> usize {
        self.failed.fill(false);
        let n = self.n;
        if n == 0 {
            return 0;
        }
        let m = bufs.len().min(FAN_BATCH);
        self.failed[m * n..].fill(true);
        let iovs: [[IoSlice<'_>; 1]; FAN_BATCH] =
            std::array::from_fn(|k| [IoSlice::new(bufs.get(k).copied().unwrap_or_default())]);
        let total = m * n;
        let mut at = 0;
        let mut sent = 0;
        while at < total {
            // Message j is datagram j / n to destination j % n; a call starts at a message
            // whose destination index is `at % n`, so its addresses start there too.
            let take = (total - at).min(self.addrs.len() - at % n);
            let first = at;
            let slices = (first..first + take).map(|j| &iovs[j / n]);
            let addrs = &self.addrs[at % n..at % n + take];
            let done = sendmmsg(sock.as_raw_fd(), &mut self.headers, slices, addrs, [], MsgFlags::MSG_DONTWAIT)
                .map_or(0, Iterator::count);
            if done > 0 {
                at += done;
                sent += done;
            } else {
                // The message at `at` failed (EAGAIN, EACCES, ENETUNREACH...): skip it.
                self.failed[at] = true;
                at += 1;
            }
        }
        sent
    }

    /// Whether the last send failed for destination `i` (of datagram 0).
    pub fn failed(&self, i: usize) -> bool {
        self.failed_at(0, i)
    }

    /// Whether the last [`FanOut::send_batch`] failed for datagram `k`, destination `i`.
    pub fn failed_at(&self, k: usize, i: usize) -> bool {
        if i >= self.n {
            return true;
        }
        self.failed.get(k * self.n + i).copied().unwrap_or(true)
    }
}

/// Many datagrams to one address in one `sendmmsg` (the relay's re-emission of a batch
/// into a group from one emitting socket). Headers allocated once.
pub struct Burst {
    headers: MultiHeaders<SockaddrIn>,
    failed: [bool; FAN_BATCH],
}

impl std::fmt::Debug for Burst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst").finish_non_exhaustive()
    }
}

impl Default for Burst {
    fn default() -> Self {
        Self { headers: MultiHeaders::preallocate(FAN_BATCH, None), failed: [false; FAN_BATCH] }
    }
}

impl Burst {
    /// Sends each of `bufs` (at most [`FAN_BATCH`]; more are not sent and count as failed)
    /// to `to` from `sock`, in order, never waiting; returns how many went out, and
    /// [`Burst::failed`] says which did not (a failed one does not stop the rest).
    pub fn send(&mut self, sock: &UdpSocket, bufs: &[&[u8]], to: SocketAddrV4) -> usize {
        self.failed = [true; FAN_BATCH];
        let m = bufs.len().min(FAN_BATCH);
        let iovs: [[IoSlice<'_>; 1]; FAN_BATCH] =
            std::array::from_fn(|k| [IoSlice::new(bufs.get(k).copied().unwrap_or_default())]);
        let addrs = [Some(SockaddrIn::from(to)); FAN_BATCH];
        let mut at = 0;
        let mut sent = 0;
        while at < m {
            let done = sendmmsg(
                sock.as_raw_fd(),
                &mut self.headers,
                &iovs[at..m],
                &addrs[..m - at],
                [],
                MsgFlags::MSG_DONTWAIT,
            )
            .map_or(0, Iterator::count);
            if done > 0 {
                self.failed[at..at + done].fill(false);
                at += done;
                sent += done;
            } else {
                at += 1; // stays failed
            }
        }
        sent
    }

    /// Whether datagram `k` of the last [`Burst::send`] failed.
    pub fn failed(&self, k: usize) -> bool {
        self.failed.get(k).copied().unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_reaches_every_destination() {
        let rx: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let dests: Vec<SocketAddrV4> = rx
            .iter()
            .map(|s| match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                std::net::SocketAddr::V6(_) => unreachable!(),
            })
            .collect();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // A destination the kernel refuses (broadcast without SO_BROADCAST) in the middle.
        let mut with_bad = dests.clone();
        with_bad.insert(1, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9));
        let mut f = FanOut::new(&with_bad);
        assert_eq!(f.send(&tx, b"hello"), 3, "the bad destination does not stop the others");
        assert_eq!((0..4).map(|i| f.failed(i)).collect::<Vec<_>>(), [false, true, false, false]);
        for s in &rx {
            let mut b = [0u8; 16];
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            let (n, from) = s.recv_from(&mut b).unwrap();
            assert_eq!((&b[..n], from), (&b"hello"[..], tx.local_addr().unwrap()));
        }
        assert_eq!(FanOut::new(&[]).send(&tx, b"x"), 0);
    }

    #[test]
    fn a_batch_reaches_every_destination_in_order_and_says_which_copies_failed() {
        let rx: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let mut dests: Vec<SocketAddrV4> = rx
            .iter()
            .map(|s| match s.local_addr().unwrap() {
                std::net::SocketAddr::V4(a) => a,
                std::net::SocketAddr::V6(_) => unreachable!(),
            })
            .collect();
        dests.insert(1, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut f = FanOut::new(&dests);
        let bufs: Vec<Vec<u8>> = (0..FAN_BATCH + 2).map(|k| format!("datagram {k}").into_bytes()).collect();
        let all: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        assert_eq!(f.send_batch(&tx, &all[..5]), 10, "five datagrams to the two good destinations");
        for k in 0..5 {
            assert_eq!([f.failed_at(k, 0), f.failed_at(k, 1), f.failed_at(k, 2)], [false, true, false], "datagram {k}");
        }
        assert!(f.failed_at(5, 0) && f.failed_at(0, 3), "past the batch");
        for s in &rx {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            for want in &all[..5] {
                let mut b = [0u8; 32];
                let n = s.recv(&mut b).unwrap();
                assert_eq!(&b[..n], *want, "in order");
            }
        }
        // More than a batch: the first FAN_BATCH go out, the rest count as failed.
        assert_eq!(f.send_batch(&tx, &all), 2 * FAN_BATCH);
        assert!(!f.failed_at(FAN_BATCH - 1, 2) && f.failed_at(FAN_BATCH, 0));
    }

    #[test]
    fn a_burst_sends_every_datagram_to_one_address_in_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(to) = rx.local_addr().unwrap() else { unreachable!() };
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut b = Burst::default();
        let bufs: Vec<Vec<u8>> = (0..5).map(|k| vec![b'a' + k; usize::from(k) + 1]).collect();
        let all: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
        assert_eq!(b.send(&tx, &all, to), 5);
        assert!((0..5).all(|k| !b.failed(k)) && b.failed(5));
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        for want in &all {
            let mut got = [0u8; 8];
            let n = rx.recv(&mut got).unwrap();
            assert_eq!(&got[..n], *want);
        }
        // A destination the kernel refuses: every datagram fails, none is sent, no hang.
        assert_eq!(b.send(&tx, &all, SocketAddrV4::new(std::net::Ipv4Addr::BROADCAST, 9)), 0);
        assert!((0..5).all(|k| b.failed(k)));
    }
}
