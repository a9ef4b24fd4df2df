//! Datagrams the kernel dropped on one UDP socket (its receive buffer was full), from the
//! `drops` column of `/proc/net/udp` and `/proc/net/udp6`, found by the socket's inode.
//! The same figure `ss -u -m` shows as `d`; it includes what `SO_RXQ_OVFL` would report per
//! datagram, without a control message on the echo path.

use std::os::fd::AsRawFd;

/// The socket's inode, from `/proc/self/fd/N` ("socket:[INODE]").
fn inode(fd: &impl AsRawFd) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let s = link.to_str()?;
    s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The drops of the socket with `inode` in one `/proc/net/udp*` table.
fn drops_in(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
        (f.len() >= 13 && f[9].parse() == Ok(inode)).then(|| f[12].parse().ok()).flatten()
    })
}

/// Datagrams dropped on `sock`'s receive queue so far (`None` when `/proc` does not say).
pub fn udp_drops(sock: &impl AsRawFd) -> Option<u64> {
    let ino = inode(sock)?;
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().and_then(|t| drops_in(&t, ino)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn parses_the_drops_column_of_the_right_inode() {
        let t = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
                 1: 0100007F:1EC6 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 111 2 0000000000000000 0\n\
                 2: 0100007F:1EC7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 222 2 0000000000000000 4711\n";
        assert_eq!(drops_in(t, 222), Some(4711));
        assert_eq!(drops_in(t, 111), Some(0));
        assert_eq!(drops_in(t, 333), None);
    }

    /// A socket that is never read overflows its smallest buffer: the kernel's count shows it.
    #[test]
    fn counts_what_a_full_buffer_dropped() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        nix::sys::socket::setsockopt(&rx, nix::sys::socket::sockopt::RcvBuf, &0).unwrap();
        assert_eq!(udp_drops(&rx), Some(0));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            tx.send_to(&[0u8; 1000], rx.local_addr().unwrap()).unwrap();
        }
        assert!(udp_drops(&rx).unwrap() > 0);
    }
}
