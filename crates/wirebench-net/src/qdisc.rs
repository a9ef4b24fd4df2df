//! The egress qdiscs' drops on some interfaces, by a netlink `RTM_GETQDISC` dump (what
//! `tc -s qdisc show` prints as `dropped`); the parsing is `wirebench_core::counters::qdisc`.
//! Read a few times a run (before, each interval, after), never in a send loop.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, sendto, setsockopt, socket,
    sockopt,
};
use wirebench_core::counters::qdisc;

/// A dump ends within this, or is given up (`None`).
const DUMP_WAIT: Duration = Duration::from_secs(1);

/// The root qdiscs' drops on `interfaces` now, summed; `None` when none of them exists or
/// the dump fails (no netlink, a container without it) or does not end in time.
pub fn drops(interfaces: &[String]) -> Option<u64> {
    let ifindexes: Vec<u32> =
        interfaces.iter().filter_map(|n| nix::net::if_::if_nametoindex(n.as_str()).ok()).collect();
    if ifindexes.is_empty() {
        return None;
    }
    let fd = socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, SockProtocol::NetlinkRoute).ok()?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).ok()?;
    let timeout = nix::sys::time::TimeVal::new(0, 200_000);
    setsockopt(&fd, sockopt::ReceiveTimeout, &timeout).ok()?;
    sendto(fd.as_raw_fd(), &qdisc::dump_request(1), &NetlinkAddr::new(0, 0), MsgFlags::empty()).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    let start = Instant::now();
    while start.elapsed() < DUMP_WAIT {
        let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).ok()?;
        let part = qdisc::parse(&buf[..n], &ifindexes);
        total = total.saturating_add(part.drops);
        if part.done || n == 0 {
            return Some(total);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_has_a_root_qdisc_with_a_drop_count() {
        // lo's root qdisc (noqueue) drops nothing; an unknown interface reads as nothing
        assert_eq!(super::drops(&["lo".to_owned()]), Some(0));
        assert_eq!(super::drops(&["no-such-if0".to_owned()]), None);
    }
}
