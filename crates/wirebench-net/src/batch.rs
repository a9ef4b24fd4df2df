//! Batched UDP: GSO on send (one `send` carries up to 64 datagrams, the kernel segments
//! them) and GRO on receive (one `recvmsg` returns a run of coalesced datagrams with their
//! segment size), each with a plain fallback when the kernel or the path refuses. Plus
//! socket buffer sizing that says when the kernel capped it.

use std::io::{self, ErrorKind, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt,
    sockopt::{RcvBuf, RcvBufForce, SndBuf, SndBufForce, UdpGroSegment, UdpGsoSegment},
};

use crate::mmsg::{Msg, Slots};

/// The most datagrams one GSO send may carry (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;
/// The most bytes one GSO send may carry.
const MAX_GSO_BYTES: usize = 65_000;

/// Sends runs of equal-sized datagrams on a connected UDP socket.
#[derive(Debug)]
pub struct UdpBatchSender {
    sock: UdpSocket,
    size: usize,
    gso: bool,
}

impl UdpBatchSender {
    /// Wraps a connected socket sending `size`-byte datagrams; turns GSO on when the kernel
    /// has it and a batch can hold two or more datagrams.
    pub fn new(sock: UdpSocket, size: usize) -> Self {
        let seg = i32::try_from(size).unwrap_or(i32::MAX);
        let gso = size * 2 <= MAX_GSO_BYTES && setsockopt(&sock, UdpGsoSegment, &seg).is_ok();
        Self { sock, size, gso }
    }

    /// Datagrams one [`Self::send`] can carry.
    pub fn max_batch(&self) -> usize {
        if self.gso { (MAX_GSO_BYTES / self.size).clamp(1, MAX_SEGMENTS) } else { MAX_SEGMENTS }
    }

    /// Is GSO in use?
    pub const fn gso(&self) -> bool {
        self.gso
    }

    /// Sends the datagrams in `buf` (a whole number of `size`-byte datagrams, at most
    /// [`Self::max_batch`]). Returns how many went out: all of them, or fewer when the socket
    /// buffer is full (non-blocking) — the rest were not sent.
    pub fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        debug_assert_eq!(buf.len() % self.size, 0);
        let n = buf.len() / self.size;
        if self.gso && n > 1 {
            match self.sock.send(buf) {
                Ok(_) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(0),
                // A segment larger than the path MTU (EMSGSIZE, EINVAL), or no GSO on this
                // device (EIO).
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIO | libc::EMSGSIZE)) => {
                    self.gso = false;
                    let _ = setsockopt(&self.sock, UdpGsoSegment, &0);
                }
                Err(e) => return Err(e),
            }
        }
        let mut sent = 0;
        for d in buf.chunks_exact(self.size) {
            match self.sock.send(d) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// The socket.
    pub const fn socket(&self) -> &UdpSocket {
        &self.sock
    }
}

/// A run of datagrams from one `recvmsg`: `len` bytes in segments of `seg` bytes (the last
/// may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Bytes received.
    pub len: usize,
    /// Segment size (the datagram size), or `len` for a single datagram.
    pub seg: usize,
    /// Sender.
    pub from: Option<SocketAddr>,
    /// Software RX timestamp (`CLOCK_REALTIME` ns) when the socket has them on
    /// ([`UdpBatchReceiver::stamp_rx`]); a GRO run carries its first segment's.
    pub rx_ns: Option<u64>,
}

impl Batch {
    /// An empty slot.
    pub const EMPTY: Self = Self { len: 0, seg: 1, from: None, rx_ns: None };
}

/// Receive slots one [`UdpBatchReceiver::recv_many`] fills at most.
pub const SLOTS: usize = 16;
/// Bytes per slot: the largest GRO run (or datagram).
pub const SLOT: usize = 65_536;

/// Receives UDP datagrams: `recvmmsg` into [`SLOTS`] slots, each a single datagram or a run
/// coalesced by GRO when the kernel does.
#[derive(Debug)]
pub struct UdpBatchReceiver {
    sock: UdpSocket,
    gro: bool,
    cmsg: Vec<u8>,
    slots: Box<Slots<SLOTS>>,
    msgs: [Msg; SLOTS],
}

impl UdpBatchReceiver {
    /// Wraps `sock`, turning GRO on when the kernel has it.
    pub fn new(sock: UdpSocket) -> Self {
        let gro = setsockopt(&sock, UdpGroSegment, &true).is_ok();
        let empty = Msg { len: 0, gro: None, from: None, rx_ns: None };
        Self { sock, gro, cmsg: nix::cmsg_space!(i32), slots: Box::new(Slots::new()), msgs: [empty; SLOTS] }
    }

    /// Receives up to [`SLOTS`] datagrams or GRO runs in one `recvmmsg` into `buf` (at least
    /// `SLOTS * SLOT` bytes; slot `k` starts at `k * SLOT`), waiting (up to the socket's
    /// timeout) only for the first. Returns how many slots were filled, 0 on timeout.
    pub fn recv_many(&mut self, buf: &mut [u8], out: &mut [Batch; SLOTS]) -> io::Result<usize> {
        let fd = self.sock.as_raw_fd();
        assert!(buf.len() >= SLOTS * SLOT, "buf holds SLOTS * SLOT bytes");
        let n = self.slots.recv(fd, buf, SLOT, &mut self.msgs, SLOTS)?;
        for (o, m) in out.iter_mut().zip(&self.msgs[..n]) {
            // A run whose segment size was cut off cannot be split: one datagram is all it
            // can be read as (the stream decoder then counts it as foreign, not as loss).
            *o = Batch { len: m.len, seg: m.gro.unwrap_or(m.len).max(1), from: m.from, rx_ns: m.rx_ns };
        }
        Ok(n)
    }

    /// Turns software RX timestamps on (`SO_TIMESTAMPING`, [`crate::stamp::enable`]): each
    /// [`Batch`] of [`Self::recv_many`] then carries its `rx_ns`. The first datagrams after
    /// the first socket on a host asks may still come without (the kernel turns stamping on
    /// from a work queue).
    pub fn stamp_rx(&mut self) -> io::Result<()> {
        crate::stamp::enable(&self.sock, false).map(|_| ())
    }

    /// Is GRO on?
    pub const fn gro(&self) -> bool {
        self.gro
    }

    /// Receives into `buf` (give it 64 KiB); `None` when the socket's timeout passed or it
    /// would block.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Batch>> {
        let fd = self.sock.as_raw_fd();
        loop {
            let mut iov = [IoSliceMut::new(buf)];
            let r = recvmsg::<SockaddrStorage>(fd, &mut iov, Some(&mut self.cmsg), MsgFlags::empty());
            match r {
                Ok(m) => {
                    let mut seg = m.bytes;
                    if let Ok(cmsgs) = m.cmsgs() {
                        for c in cmsgs {
                            if let ControlMessageOwned::UdpGroSegments(s) = c {
                                seg = usize::try_from(s).unwrap_or(m.bytes).max(1);
                            }
                        }
                    }
                    return Ok(Some(Batch {
                        len: m.bytes,
                        seg: seg.max(1),
                        from: m.address.and_then(|a| to_std(&a)),
                        rx_ns: None,
                    }));
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The socket.
    pub const fn socket(&self) -> &UdpSocket {
        &self.sock
    }
}

pub(crate) fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    a.as_sockaddr_in()
        .map(|v4| SocketAddr::from((v4.ip(), v4.port())))
        .or_else(|| a.as_sockaddr_in6().map(|v6| SocketAddr::from((v6.ip(), v6.port()))))
}

/// What the kernel granted for a socket buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferGrant {
    /// Bytes asked for.
    pub asked: usize,
    /// Bytes granted (as `getsockopt` reports it: the kernel doubles the request).
    pub granted: usize,
}

impl BufferGrant {
    /// True when the kernel gave less than asked (capped by `net.core.rmem_max`/`wmem_max`).
    pub const fn capped(&self) -> bool {
        self.granted < self.asked
    }
}

/// Asks for receive and send buffers of `bytes` each: with `SO_RCVBUFFORCE` (which root may
/// use past the sysctl cap), else the plain option. Returns what was granted.
pub fn size_buffers(sock: &UdpSocket, bytes: usize) -> (BufferGrant, BufferGrant) {
    if setsockopt(sock, RcvBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, RcvBuf, &bytes);
    }
    if setsockopt(sock, SndBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, SndBuf, &bytes);
    }
    let got = |o| nix::sys::socket::getsockopt(sock, o).unwrap_or(0);
    // Linux reports twice the usable size; compare like with like.
    (
        BufferGrant { asked: bytes, granted: got(RcvBuf) / 2 },
        BufferGrant { asked: bytes, granted: nix::sys::socket::getsockopt(sock, SndBuf).unwrap_or(0) / 2 },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gso_batch_arrives_whole() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut s = UdpBatchSender::new(tx, 100);
        let mut r = UdpBatchReceiver::new(rx);
        let data: Vec<u8> = (0..1000u32).map(|i| u8::try_from(i / 100).unwrap()).collect();
        assert_eq!(s.send(&data).unwrap(), 10);
        let mut buf = vec![0u8; 65_536];
        let mut got = Vec::new();
        while got.len() < 1000 {
            let b = r.recv(&mut buf).unwrap().expect("within the timeout");
            assert_eq!(b.seg, 100, "segment size is the datagram size");
            got.extend_from_slice(&buf[..b.len]);
        }
        assert_eq!(got, data, "every datagram, in order, intact");
    }

    #[test]
    fn recv_many_takes_several_datagrams_in_one_call() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        // Plain sends of different sizes: GRO cannot coalesce them.
        for i in 1..=5u8 {
            tx.send(&vec![i; 10 * usize::from(i)]).unwrap();
        }
        let mut r = UdpBatchReceiver::new(rx);
        let mut buf = vec![0u8; SLOTS * SLOT];
        let mut out = [Batch::EMPTY; SLOTS];
        let mut lens = Vec::new();
        while lens.len() < 5 {
            let n = r.recv_many(&mut buf, &mut out).unwrap();
            assert!(n > 0, "within the timeout");
            for (k, b) in out[..n].iter().enumerate() {
                let first = buf[k * SLOT];
                assert!(buf[k * SLOT..k * SLOT + b.len].iter().all(|&x| x == first));
                lens.push(b.len);
            }
        }
        assert_eq!(lens, [10, 20, 30, 40, 50]);
    }

    /// With RX stamps on, every batch of `recv_many` (single datagrams and GRO runs) carries
    /// one, never after the application's read, next to its GRO segment size.
    #[test]
    fn recv_many_gives_software_rx_stamps_with_gro_runs() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut r = UdpBatchReceiver::new(rx);
        r.stamp_rx().unwrap();
        let mut buf = vec![0u8; SLOTS * SLOT];
        let mut out = [Batch::EMPTY; SLOTS];
        // the kernel turns stamping on from a work queue: wait (bounded) for the first stamp
        let t = std::time::Instant::now();
        loop {
            tx.send(b"warm").unwrap();
            let n = r.recv_many(&mut buf, &mut out).unwrap();
            if out[..n].iter().any(|b| b.rx_ns.is_some()) {
                break;
            }
            assert!(t.elapsed().as_secs() < 10, "RX stamps never came on");
        }
        let mut s = UdpBatchSender::new(tx, 64);
        for _ in 0..20 {
            let before = crate::clock::wall_now_ns();
            assert_eq!(s.send(&[2u8; 64 * 10]).unwrap(), 10);
            let mut got = 0;
            while got < 640 {
                let n = r.recv_many(&mut buf, &mut out).unwrap();
                let after = crate::clock::wall_now_ns();
                assert!(n > 0, "within the timeout");
                for b in &out[..n] {
                    let at = b.rx_ns.expect("every batch stamped");
                    assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
                    assert_eq!(b.seg, 64);
                    got += b.len;
                }
            }
        }
    }

    /// After a slot has held a plain datagram (no GRO control message), a GRO run landing in
    /// it must still carry its segment size (nix's recvmmsg left the slot's control space at
    /// 0 for good, and flat-out streams lost 99.9 % to it).
    #[test]
    fn a_gro_run_after_a_plain_datagram_keeps_its_segment_size() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let from = tx.local_addr().unwrap();
        let mut r = UdpBatchReceiver::new(rx);
        assert!(r.gro());
        let mut buf = vec![0u8; SLOTS * SLOT];
        let mut out = [Batch::EMPTY; SLOTS];
        let mut s = UdpBatchSender::new(tx, 64);
        for round in 0..3 {
            s.socket().send(&[1u8; 64]).unwrap();
            assert_eq!(r.recv_many(&mut buf, &mut out).unwrap(), 1);
            assert_eq!(out[0], Batch { len: 64, seg: 64, from: Some(from), rx_ns: None });
            assert_eq!(s.send(&[2u8; 64 * 10]).unwrap(), 10);
            let mut got = 0;
            while got < 640 {
                let n = r.recv_many(&mut buf, &mut out).unwrap();
                assert!(n > 0, "within the timeout");
                for b in &out[..n] {
                    assert_eq!(b.seg, 64, "round {round}: {b:?}");
                    got += b.len;
                }
            }
        }
    }

    #[test]
    fn buffers_report_what_was_granted() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (r, w) = size_buffers(&s, 1 << 20);
        assert!(r.granted > 0 && w.granted > 0);
    }
}
