//! Path MTU to a `serve` by Don't-Fragment probes (RFC 1191's method, driven from user
//! space): echo probes of growing size with DF set, binary search between the smallest probe
//! (which must come back) and the first hop's MTU. A probe is too big when the kernel refuses
//! it (`EMSGSIZE`: the first hop, or a path MTU an ICMP "fragmentation needed" taught it) or
//! no echo comes back (a hop dropped it silently). Serve echoes a probe at its own size, so a
//! passing size fits both ways.

use std::io::{self, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use wirebench_core::wire::Kind;
use wirebench_core::wire::probe::{self, Probe};
use wirebench_net::pmtu::{is_too_big, path_mtu, set_dont_fragment};

/// IPv4 and UDP headers: the payload of a datagram that fills an MTU is `MTU - 28`.
pub const HEADERS: u32 = 28;
/// Sends per size before it counts as too big.
const TRIES: u32 = 2;

/// What the search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Largest UDP payload that came back, bytes.
    pub payload: u32,
    /// The path MTU that implies (`payload + 28`).
    pub mtu: u32,
    /// The first hop's MTU as the kernel saw it before probing.
    pub first_hop: u32,
    /// Probes sent.
    pub probes: u32,
}

/// Why there is no answer.
#[derive(Debug, thiserror::Error)]
pub enum PmtuError {
    /// Even the smallest probe got no echo.
    #[error("no echo from {0} (is `wirebench serve` running there?)")]
    NoReply(SocketAddr),
    /// A socket error.
    #[error("{0}")]
    Io(#[from] io::Error),
}

struct Prober {
    sock: UdpSocket,
    target: SocketAddr,
    session: u64,
    seq: u64,
    probes: u32,
    buf: Vec<u8>,
}

impl Prober {
    /// True if a probe of `len` bytes came back.
    fn fits(&mut self, len: u32) -> Result<bool, PmtuError> {
        let mut out = vec![0u8; len as usize];
        probe::init(&mut out, self.session, 0);
        for _ in 0..TRIES {
            self.seq += 1;
            self.probes += 1;
            probe::stamp(&mut out, self.seq, 0);
            match self.sock.send(&out) {
                Ok(_) => {}
                Err(e) if is_too_big(&e) => return Ok(false),
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(PmtuError::NoReply(self.target)),
                Err(e) => return Err(e.into()),
            }
            loop {
                match self.sock.recv(&mut self.buf) {
                    Ok(n) => {
                        let Ok(p) = Probe::parse(&self.buf[..n]) else { continue };
                        if p.kind() == Kind::Reply && p.session() == self.session && p.seq() == self.seq {
                            return Ok(true);
                        }
                    }
                    Err(e) if is_too_big(&e) => return Ok(false),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                        return Err(PmtuError::NoReply(self.target));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(false)
    }

    /// The kernel's current path MTU estimate as a payload bound.
    fn kernel_payload(&self) -> Option<u32> {
        path_mtu(&self.sock).ok().map(|m| m.saturating_sub(HEADERS))
    }
}

/// Finds the path MTU to `target` (a `serve`), waiting `timeout` for each echo.
pub fn find(target: SocketAddr, timeout: Duration) -> Result<Found, PmtuError> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    sock.connect(target)?;
    set_dont_fragment(&sock)?;
    sock.set_read_timeout(Some(timeout))?;
    let first_hop = path_mtu(&sock)?;
    let session = u64::from(std::process::id()) << 32 | 0x5044;
    let mut p = Prober { sock, target, session, seq: 0, probes: 0, buf: vec![0u8; probe::MAX_LEN + 1] };
    let min = u32::try_from(probe::MIN_LEN).unwrap_or(32);
    if !p.fits(min)? {
        return Err(PmtuError::NoReply(target));
    }
    let max = u32::try_from(probe::MAX_LEN).unwrap_or(u32::MAX);
    // lo fits, hi does not (or is the largest candidate, untested)
    let (mut lo, mut hi) = (min, first_hop.saturating_sub(HEADERS).clamp(min, max));
    if p.fits(hi)? {
        lo = hi;
    }
    while hi - lo > 1 {
        // An ICMP "fragmentation needed" taught the kernel the path MTU: try it first.
        let guess = p.kernel_payload().filter(|k| *k > lo && *k < hi).unwrap_or(lo + (hi - lo) / 2);
        if p.fits(guess)? { lo = guess } else { hi = guess }
    }
    Ok(Found { payload: lo, mtu: lo + HEADERS, first_hop, probes: p.probes })
}
