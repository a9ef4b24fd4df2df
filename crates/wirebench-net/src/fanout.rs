//! One datagram to many unicast addresses in one `sendmmsg(2)` (the relay's fan-out to its
//! peers). The message headers are allocated once, when the peer list changes, never per
//! datagram.

use std::io::IoSlice;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, sendmmsg};

/// Preallocated headers and addresses for a fan-out to a fixed set of destinations.
pub struct FanOut {
    headers: MultiHeaders<SockaddrIn>,
    addrs: Vec<Option<SockaddrIn>>,
    failed: Vec<bool>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut").field("destinations", &self.addrs.len()).finish_non_exhaustive()
    }
}

impl FanOut {
    /// A fan-out to `dests`.
    pub fn new(dests: &[SocketAddrV4]) -> Self {
        Self {
            headers: MultiHeaders::preallocate(dests.len().max(1), None),
            addrs: dests.iter().map(|d| Some(SockaddrIn::from(*d))).collect(),
            failed: vec![false; dests.len()],
        }
    }

    /// Destinations.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// Sends `buf` to every destination from `sock`, never waiting (a full send buffer or
    /// an unreachable destination drops that copy); returns how many got it, and
    /// [`FanOut::failed`] says which did not. `sendmmsg` stops at the first message that
    /// fails, so the rest are sent by another call: one bad peer never costs the others.
    pub fn send(&mut self, sock: &UdpSocket, buf: &[u8]) -> usize {
        self.failed.fill(false);
        let n = self.addrs.len();
        let iov = [IoSlice::new(buf)];
        let mut at = 0;
        let mut sent = 0;
        while at < n {
            let slices = std::iter::repeat_n(&iov, n - at);
            let done =
                sendmmsg(sock.as_raw_fd(), &mut self.headers, slices, &self.addrs[at..], [], MsgFlags::MSG_DONTWAIT)
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

    /// Whether the last [`FanOut::send`] failed for destination `i`.
    pub fn failed(&self, i: usize) -> bool {
        self.failed.get(i).copied().unwrap_or(true)
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
}
