//! UDP probe transport: one socket, blocking or busy-polling, optionally with kernel
//! timestamps ([`stamped`]).

mod stamped;

use std::io::{self, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;
use wirebench_core::units::nanos;

use crate::clock::{Clock, MonoClock};
use crate::io::{ProbeIo, Received, Stamp, Support};
use crate::multicast::{self, SenderOpts};
use crate::{NetError, wait};

/// How a receive waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Sleep in the kernel until a datagram arrives (one `recvfrom`, or `ppoll` then
    /// `recvfrom` when the deadline is near).
    Block,
    /// Busy-poll a non-blocking socket: no sleep, one core at 100 %.
    Spin,
}

/// A pinger's UDP socket.
#[derive(Debug)]
pub struct UdpProbeIo {
    sock: UdpSocket,
    /// `None` for a connected (unicast) socket, the group for multicast.
    dest: Option<SocketAddr>,
    /// The connected peer (unicast): replies can only come from it.
    peer: Option<SocketAddr>,
    wait: Wait,
    timeout_ns: u64,
    clock: MonoClock,
    /// Kernel timestamps, when turned on.
    stamps: Option<stamped::Stamping>,
    /// How long before a deadline a blocking wait stops sleeping.
    lead: wait::Lead,
}

fn bind_any(port: u16) -> Result<UdpSocket, NetError> {
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
    UdpSocket::bind(addr).map_err(|source| NetError::Bind { addr, source })
}

impl UdpProbeIo {
    /// A socket connected to `target`: the kernel then drops datagrams from anyone else, and
    /// an ICMP port-unreachable surfaces as `ConnectionRefused`.
    pub fn unicast(target: SocketAddr, wait: Wait, timeout: Duration) -> Result<Self, NetError> {
        let sock = if target.is_ipv4() {
            bind_any(0)?
        } else {
            let addr: SocketAddr = "[::]:0".parse().expect("literal");
            UdpSocket::bind(addr).map_err(|source| NetError::Bind { addr, source })?
        };
        sock.connect(target).map_err(|source| NetError::Connect { addr: target, source })?;
        let mut io = Self::finish(sock, None, wait, timeout)?;
        io.peer = Some(target);
        Ok(io)
    }

    /// A socket that sends to `group` and takes unicast replies from every responder, or,
    /// with `reply_group`, listens on that group for the replies (Aeron's pong channel).
    pub fn multicast(
        group: SocketAddrV4,
        opts: &SenderOpts,
        reply_group: Option<SocketAddrV4>,
        wait: Wait,
        timeout: Duration,
    ) -> Result<Self, NetError> {
        let sock = match reply_group {
            Some(rg) => multicast::group_receiver(rg, opts.interface)?,
            None => bind_any(0)?,
        };
        multicast::set_sender(&sock, group.into(), opts)?;
        Self::finish(sock, Some(group.into()), wait, timeout)
    }

    fn finish(sock: UdpSocket, dest: Option<SocketAddr>, wait: Wait, timeout: Duration) -> Result<Self, NetError> {
        let opt = |what, r: io::Result<()>| r.map_err(|source| NetError::Option { what, source });
        match wait {
            Wait::Spin => opt("O_NONBLOCK", sock.set_nonblocking(true))?,
            Wait::Block => opt("SO_RCVTIMEO", sock.set_read_timeout(Some(timeout.max(Duration::from_micros(1)))))?,
        }
        let timeout_ns = nanos(timeout);
        Ok(Self {
            sock,
            dest,
            peer: None,
            wait,
            timeout_ns,
            clock: MonoClock::default(),
            stamps: None,
            lead: wait::Lead::default(),
        })
    }

    /// Turns on kernel timestamps (`SO_TIMESTAMPING`: software RX and TX, hardware where the
    /// NIC gives them). An error leaves the transport as it was, without them.
    pub fn enable_timestamps(&mut self) -> io::Result<()> {
        self.stamps = Some(stamped::Stamping::new(&self.sock)?);
        Ok(())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The IP TTL of what it sends.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.sock.set_ttl(ttl)
    }
}

/// Empty busy-poll reads between looks at the clock for the deadline: at a few hundred
/// nanoseconds a read, a deadline is overshot by a few microseconds at most.
const SPIN_CLOCK_EVERY: u32 = 16;

impl UdpProbeIo {
    /// Busy-polls the connected socket for one reply with nothing between the reads but the
    /// read: no clock read (but every [`SPIN_CLOCK_EVERY`] empty reads), no error object,
    /// no pause, so a reply is seen as soon as a bare C loop would see it.
    #[inline]
    fn recv_spin(&mut self, buf: &mut [u8], peer: SocketAddr, deadline_ns: u64) -> io::Result<Option<Received>> {
        use nix::errno::Errno;
        use std::os::fd::AsRawFd;
        let fd = self.sock.as_raw_fd();
        let mut empty = 0u32;
        loop {
            match nix::sys::socket::recv(fd, buf, nix::sys::socket::MsgFlags::empty()) {
                Ok(len) => return Ok(Some(Received { len, from: peer, at_ns: self.clock.now_ns(), kernel: None })),
                Err(Errno::EAGAIN) => {
                    empty = empty.wrapping_add(1);
                    if empty.is_multiple_of(SPIN_CLOCK_EVERY) && self.clock.now_ns() >= deadline_ns {
                        return Ok(None);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl ProbeIo for UdpProbeIo {
    #[inline]
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        loop {
            let r = match self.dest {
                None => self.sock.send(buf),
                Some(to) => self.sock.send_to(buf, to),
            };
            match r {
                Ok(_) => {
                    if let Some(st) = self.stamps.as_mut() {
                        st.on_sent(&self.sock, buf);
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A full send buffer on a non-blocking socket: the datagram is not sent;
                // the caller sees it as a probe without a reply.
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    #[inline]
    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        if self.stamps.is_some() {
            return self.recv_stamped(buf, deadline_ns);
        }
        if let (Wait::Spin, Some(peer)) = (self.wait, self.peer) {
            return self.recv_spin(buf, peer, deadline_ns);
        }
        loop {
            let now = self.clock.now_ns();
            if !wait::before_read(
                &self.sock,
                self.wait,
                (&self.clock, now),
                (deadline_ns, self.timeout_ns),
                &mut self.lead,
            )? {
                return Ok(None);
            }
            // A connected socket only hears its peer: `recv` spares the address copy.
            let r = match self.peer {
                Some(peer) => self.sock.recv(buf).map(|n| (n, peer)),
                None => self.sock.recv_from(buf),
            };
            match r {
                Ok((len, from)) => return Ok(Some(Received { len, from, at_ns: self.clock.now_ns(), kernel: None })),
                Err(e) => {
                    if wait::after_failed_read(e, self.wait, now, deadline_ns)? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    fn tx_stamp(&mut self, seq: u64) -> Option<Stamp> {
        self.stamps.as_mut()?.tx_stamp(&self.sock, seq)
    }

    fn timestamps(&self) -> Support {
        self.stamps.as_ref().map_or_else(Support::default, |s| Support { rx: true, tx: s.tx })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spinning_to(target: SocketAddr) -> UdpProbeIo {
        UdpProbeIo::unicast(target, Wait::Spin, Duration::from_secs(1)).unwrap()
    }

    /// The busy-poll read returns the peer's reply, with its length, its sender and a
    /// receive time taken after it arrived.
    #[test]
    fn a_spinning_read_returns_the_peers_reply() {
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut io = spinning_to(echo.local_addr().unwrap());
        io.send(b"ping-0123456789").unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = echo.recv_from(&mut buf).unwrap();
        echo.send_to(&buf[..n], from).unwrap();
        let before = io.clock.now_ns();
        let mut got = [0u8; 64];
        let r = io.recv_until(&mut got, before + 5_000_000_000).unwrap().expect("the reply");
        assert_eq!((r.len, r.from), (15, echo.local_addr().unwrap()));
        assert_eq!(&got[..15], b"ping-0123456789");
        assert!(r.at_ns >= before && r.kernel.is_none());
    }

    /// With nothing coming, the busy-poll read gives up once the deadline has passed, not
    /// before.
    #[test]
    fn a_spinning_read_gives_up_at_its_deadline() {
        let quiet = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut io = spinning_to(quiet.local_addr().unwrap());
        let deadline = io.clock.now_ns() + 2_000_000;
        let mut buf = [0u8; 64];
        assert!(io.recv_until(&mut buf, deadline).unwrap().is_none());
        assert!(io.clock.now_ns() >= deadline);
    }

    /// A port with no one bound: the ICMP port-unreachable surfaces as an error of the read,
    /// not as a silent timeout.
    #[test]
    fn a_spinning_read_reports_a_refused_port() {
        let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        let mut io = spinning_to(addr);
        io.send(b"anyone?").unwrap();
        let mut buf = [0u8; 64];
        let deadline = io.clock.now_ns() + 5_000_000_000;
        let e = io.recv_until(&mut buf, deadline).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    }
}
