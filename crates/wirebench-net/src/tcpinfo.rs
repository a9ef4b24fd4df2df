//! `TCP_INFO`: the kernel's view of a TCP connection (retransmits, RTT).

use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// What wirebench reports from `TCP_INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments retransmitted over the connection's life.
    pub retransmits: u32,
    /// Smoothed round trip, µs.
    pub rtt_us: u32,
    /// Its mean deviation (`tcpi_rttvar`), µs.
    pub rttvar_us: u32,
    /// Segments the kernel now counts as lost (`tcpi_lost`).
    pub lost: u32,
    /// The reordering degree it has seen (`tcpi_reordering`, 3 by default).
    pub reordering: u32,
}

/// Reads `TCP_INFO` for `conn` (`None` if the kernel refuses).
pub fn stats(conn: &TcpStream) -> Option<TcpStats> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).ok()?;
    #[expect(unsafe_code, reason = "getsockopt(TCP_INFO) has no safe wrapper in nix or socket2")]
    // SAFETY: `info` is a writable, zeroed `tcp_info` of `len` bytes; the kernel writes at
    // most `len` bytes and updates `len`; the fd is valid for the borrow of `conn`.
    let rc = unsafe {
        libc::getsockopt(conn.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &raw mut len)
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: zero-initialised and (partly) filled by the kernel: every bit pattern is a valid
    // `tcp_info` (plain integers).
    #[expect(unsafe_code, reason = "reading the struct the kernel filled")]
    let info = unsafe { info.assume_init() };
    Some(TcpStats {
        retransmits: info.tcpi_total_retrans,
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        lost: info.tcpi_lost,
        reordering: info.tcpi_reordering,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_connection_has_stats() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let s = stats(&c).expect("TCP_INFO on Linux");
        assert_eq!((s.retransmits, s.lost), (0, 0));
        // the handshake gave the kernel a first RTT sample
        assert!(s.rtt_us > 0, "{s:?}");
    }
}
