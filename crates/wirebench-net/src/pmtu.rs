//! Path MTU probing: a UDP socket that sets Don't Fragment and never fragments locally
//! (`IP_PMTUDISC_DO`), so a datagram larger than the path's MTU fails (`EMSGSIZE` at once
//! for the first hop, or an ICMP "fragmentation needed" from a router later), and the
//! kernel's current estimate for the connected destination (`IP_MTU`).

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsFd, AsRawFd};

/// Sets `IP_MTU_DISCOVER` to `IP_PMTUDISC_DO` on `sock`: DF on every datagram, no local
/// fragmentation.
pub fn set_dont_fragment(sock: &UdpSocket) -> io::Result<()> {
    let value: libc::c_int = libc::IP_PMTUDISC_DO;
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).map_err(io::Error::other)?;
    #[expect(unsafe_code, reason = "IP_MTU_DISCOVER has no safe wrapper in nix or socket2")]
    // SAFETY: `value` is a live c_int of `len` bytes for the duration of the call, which
    // only reads it; the fd is valid for the borrow of `sock`.
    let rc = unsafe {
        libc::setsockopt(sock.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, (&raw const value).cast(), len)
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The kernel's path MTU estimate for a connected `sock`'s destination.
pub fn path_mtu(sock: &UdpSocket) -> io::Result<u32> {
    let mtu = nix::sys::socket::getsockopt(&sock.as_fd(), nix::sys::socket::sockopt::IpMtu)?;
    u32::try_from(mtu).map_err(io::Error::other)
}

/// True if `e` says the datagram was larger than the path allows.
pub fn is_too_big(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMSGSIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_mtu_and_oversized_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set_dont_fragment(&tx).unwrap();
        let mtu = path_mtu(&tx).unwrap();
        assert!(mtu >= 1280, "{mtu}");
        let payload = (mtu - 28) as usize;
        if payload < 65_507 {
            let e = tx.send(&vec![0u8; payload + 1]).unwrap_err();
            assert!(is_too_big(&e), "{e}");
        }
        tx.send(&vec![0u8; payload.min(65_507)]).unwrap();
    }
}
