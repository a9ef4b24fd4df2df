//! One datagram to many unicast addresses in one `sendmmsg(2)` (the relay's fan-out to its
//! peers). The message headers are allocated once, when the peer list changes, never per
//! datagram.

use std::io::{self, IoSlice};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, sendmmsg};

/// Preallocated headers and addresses for a fan-out to a fixed set of destinations.
pub struct FanOut {
    headers: MultiHeaders<SockaddrIn>,
    addrs: Vec<Option<SockaddrIn>>,
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

    /// Sends `buf` to every destination from `sock`; returns how many got it (the first
    /// `n`, in order). `sendmmsg` stops at the first failing message: the caller sees which.
    pub fn send(&mut self, sock: &UdpSocket, buf: &[u8]) -> io::Result<usize> {
        if self.addrs.is_empty() {
            return Ok(0);
        }
        let iov = [IoSlice::new(buf)];
        let slices = std::iter::repeat_n(&iov, self.addrs.len());
        let res = sendmmsg(sock.as_raw_fd(), &mut self.headers, slices, &self.addrs, [], MsgFlags::MSG_DONTWAIT)
            .map_err(io::Error::from)?;
        Ok(res.count())
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
        let mut f = FanOut::new(&dests);
        assert_eq!(f.send(&tx, b"hello").unwrap(), 3);
        for s in &rx {
            let mut b = [0u8; 16];
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            let (n, from) = s.recv_from(&mut b).unwrap();
            assert_eq!((&b[..n], from), (&b"hello"[..], tx.local_addr().unwrap()));
        }
        assert_eq!(FanOut::new(&[]).send(&tx, b"x").unwrap(), 0);
    }
}
