//! Kernel timestamps (`SO_TIMESTAMPING`, Documentation/networking/timestamping.rst): the
//! time a datagram entered this host's stack (RX) and left it (TX, read back from the
//! socket's error queue), in software (`CLOCK_REALTIME`, every interface) and in hardware
//! (the NIC's clock, where the NIC stamps and was configured to). All of the control
//! message handling is here, through nix (`ControlMessageOwned::ScmTimestampsns`,
//! `Ipv4RecvErr`); nothing allocates per datagram (the control buffers are made once).
//!
//! TX stamps carry a key (`SOF_TIMESTAMPING_OPT_ID`): the socket's count of datagrams sent
//! since timestamping was turned on, which the caller maps back to what it sent.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, TimestampingFlag, recvmsg, setsockopt, sockopt,
};
use nix::sys::time::TimeSpec;

/// `SO_EE_ORIGIN_TIMESTAMPING`: an error-queue message that is a TX timestamp.
const ORIGIN_TIMESTAMPING: u8 = 4;

/// Which timestamps a socket was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Support {
    /// RX stamps are on.
    pub rx: bool,
    /// TX stamps are on.
    pub tx: bool,
}

/// Turns timestamps on: software RX always, software TX with `tx` (with keys, and without
/// the packet looped back: `OPT_TSONLY` keeps the error queue small), hardware where the NIC
/// gives them.
pub fn enable(sock: &impl AsFd, tx: bool) -> io::Result<Support> {
    let mut flags = TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_RX_SOFTWARE
        | TimestampingFlag::SOF_TIMESTAMPING_RAW_HARDWARE
        | TimestampingFlag::SOF_TIMESTAMPING_RX_HARDWARE;
    if tx {
        flags |= TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_TX_HARDWARE
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
    }
    setsockopt(sock, sockopt::Timestamping, &flags)?;
    Ok(Support { rx: true, tx })
}

/// Turns TX stamps off again (RX stays on), for a device that never gives them.
pub fn disable_tx(sock: &impl AsFd) -> io::Result<()> {
    enable(sock, false).map(|_| ())
}

fn ns(t: &TimeSpec) -> Option<u64> {
    ns_of(t.tv_sec(), t.tv_nsec())
}

/// A kernel `timespec` as ns; `None` for the zero the kernel leaves in a kind it did not give
/// (and for anything out of range).
pub(crate) fn ns_of(sec: i64, nsec: i64) -> Option<u64> {
    let v = u64::try_from(sec).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(nsec).ok()?)?;
    (v != 0).then_some(v)
}

/// A software and a hardware time (ns; `None` when that kind was not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// Software: `CLOCK_REALTIME`.
    pub sw_ns: Option<u64>,
    /// Hardware: the NIC's clock.
    pub hw_ns: Option<u64>,
}

/// A TX timestamp from the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// The datagram's key (`OPT_ID`): how many datagrams the socket had sent before it.
    pub key: u32,
    /// When it left.
    pub at: Stamp,
}

/// Control buffers for receives with timestamps (made once per socket).
#[derive(Debug)]
pub struct Receiver {
    cmsg: Vec<u8>,
    errq: Vec<u8>,
}

impl Default for Receiver {
    fn default() -> Self {
        Self {
            cmsg: nix::cmsg_space!([TimeSpec; 3], libc::c_int),
            errq: nix::cmsg_space!([TimeSpec; 3], libc::sock_extended_err, libc::sockaddr_in6),
        }
    }
}

/// What one receive gave.
#[derive(Debug, Clone, Copy)]
pub struct Recv {
    /// Bytes.
    pub len: usize,
    /// Sender (`None` on a connected socket when the kernel gave none).
    pub from: Option<std::net::SocketAddr>,
    /// Its RX timestamp.
    pub at: Stamp,
    /// Its IP TTL (IPv4) or hop limit (IPv6), when the socket asked for it ([`enable_ttl`]).
    pub ttl: Option<u8>,
}

/// Asks the kernel for each datagram's TTL (`IP_RECVTTL`) or hop limit (`IPV6_RECVHOPLIMIT`),
/// which [`Receiver::recv`] then reports.
pub fn enable_ttl(sock: &impl AsFd, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        setsockopt(sock, sockopt::Ipv6RecvHopLimit, &true)
    } else {
        setsockopt(sock, sockopt::Ipv4RecvTtl, &true)
    }
    .map_err(io::Error::from)
}

impl Receiver {
    /// One `recvmsg` with the RX timestamp. `WouldBlock`/`TimedOut` as the socket gives them.
    pub fn recv(&mut self, sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Recv> {
        let mut iov = [IoSliceMut::new(buf)];
        let m = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut self.cmsg), MsgFlags::empty())?;
        let mut at = Stamp::default();
        let mut ttl = None;
        if let Ok(cmsgs) = m.cmsgs() {
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmTimestampsns(ts) => {
                        at = Stamp { sw_ns: ns(&ts.system), hw_ns: ns(&ts.hw_raw) };
                    }
                    ControlMessageOwned::Ipv4Ttl(t) | ControlMessageOwned::Ipv6HopLimit(t) => {
                        ttl = u8::try_from(t).ok();
                    }
                    _ => {}
                }
            }
        }
        let from = m.address.and_then(|a| crate::batch::to_std(&a));
        Ok(Recv { len: m.bytes, from, at, ttl })
    }

    /// Reads one TX timestamp from the error queue without waiting; `None` when it is empty.
    /// Other error-queue messages (an ICMP error with `IP_RECVERR`) are skipped.
    pub fn tx(&mut self, sock: &impl AsRawFd) -> io::Result<Option<TxStamp>> {
        loop {
            let mut none: [u8; 0] = [];
            let mut iov = [IoSliceMut::new(&mut none)];
            let flags = MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT;
            let m = match recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(&mut self.errq), flags) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let (mut at, mut key) = (None, None);
            if let Ok(cmsgs) = m.cmsgs() {
                for c in cmsgs {
                    match c {
                        ControlMessageOwned::ScmTimestampsns(ts) => {
                            at = Some(Stamp { sw_ns: ns(&ts.system), hw_ns: ns(&ts.hw_raw) });
                        }
                        ControlMessageOwned::Ipv4RecvErr(e, _) | ControlMessageOwned::Ipv6RecvErr(e, _)
                            if e.ee_origin == ORIGIN_TIMESTAMPING =>
                        {
                            key = Some(e.ee_data);
                        }
                        _ => {}
                    }
                }
            }
            if let (Some(at), Some(key)) = (at, key) {
                return Ok(Some(TxStamp { key, at }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;
    use crate::clock::wall_now_ns;

    #[test]
    fn software_rx_stamps_are_never_after_the_application_reads_them() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable(&rx, false).unwrap();
        let mut r = Receiver::default();
        let mut buf = [0u8; 64];
        // When no socket on the host had RX stamps on, the kernel turns them on from a work
        // queue (`net_enable_timestamp`): datagrams that arrive before it ran have none.
        // Wait (bounded) for the first stamped one; from then on every one is stamped.
        let started = std::time::Instant::now();
        loop {
            tx.send_to(b"warm", rx.local_addr().unwrap()).unwrap();
            if r.recv(&rx, &mut buf).unwrap().at.sw_ns.is_some() {
                break;
            }
            assert!(started.elapsed().as_secs() < 10, "RX stamps never came on");
            std::thread::yield_now();
        }
        for i in 0..200u8 {
            let before = wall_now_ns();
            tx.send_to(&[i; 40], rx.local_addr().unwrap()).unwrap();
            let got = r.recv(&rx, &mut buf).unwrap();
            let after = wall_now_ns();
            assert_eq!((got.len, got.from), (40, Some(tx.local_addr().unwrap())));
            let at = got.at.sw_ns.expect("loopback gives software RX stamps");
            assert!(at <= after, "RX stamp {at} after the application's read {after}");
            assert!(at >= before, "RX stamp {at} before the send began {before}");
            assert_eq!(got.at.hw_ns, None, "no hardware stamps on lo");
        }
    }

    #[test]
    fn tx_stamps_come_back_keyed_in_send_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        assert_eq!(enable(&tx, true).unwrap(), Support { rx: true, tx: true });
        let mut r = Receiver::default();
        let mut sent_at = Vec::new();
        for i in 0..5u8 {
            sent_at.push(wall_now_ns());
            tx.send(&[i; 32]).unwrap();
        }
        let after = wall_now_ns();
        let mut keys = Vec::new();
        while let Some(s) = r.tx(&tx).unwrap() {
            let at = s.at.sw_ns.expect("a software TX stamp");
            let k = s.key as usize;
            assert!(at >= sent_at[k] && at <= after, "stamp of datagram {k} outside its send");
            keys.push(s.key);
        }
        assert_eq!(keys, [0, 1, 2, 3, 4]);
        // the queue is empty now, and reading it again does not block
        assert!(r.tx(&tx).unwrap().is_none());
    }
}
