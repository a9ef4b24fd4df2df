//! Interface lookup: `--interface` takes a name (`eth0`, `lo`) or an IPv4 address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use crate::NetError;

/// The IPv4 address of interface `name_or_addr`, or the address itself if it is one.
pub fn ipv4_of(name_or_addr: &str) -> Result<Ipv4Addr, NetError> {
    if let Ok(ip) = name_or_addr.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let addrs = nix::ifaddrs::getifaddrs().map_err(|_| NetError::Interface(name_or_addr.to_owned()))?;
    addrs
        .filter(|a| a.interface_name == name_or_addr)
        .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(nix::sys::socket::SockaddrIn::ip)))
        .ok_or_else(|| NetError::Interface(name_or_addr.to_owned()))
}

/// The interfaces that receive for a socket on `local`: the one holding that address,
/// `lo` for loopback, and every interface for a wildcard address (or one not found).
pub fn receiving(local: IpAddr) -> Vec<String> {
    if local.is_loopback() {
        return vec!["lo".to_owned()];
    }
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    let mut all = Vec::new();
    let mut holding = Vec::new();
    for a in addrs {
        let ip = a.address.and_then(|s| {
            s.as_sockaddr_in().map(|v| IpAddr::V4(v.ip())).or_else(|| s.as_sockaddr_in6().map(|v| IpAddr::V6(v.ip())))
        });
        if ip == Some(local) && !holding.contains(&a.interface_name) {
            holding.push(a.interface_name.clone());
        }
        if !all.contains(&a.interface_name) {
            all.push(a.interface_name);
        }
    }
    if holding.is_empty() { all } else { holding }
}

/// The interfaces traffic to `dest` leaves by (its source address by the routing table,
/// found by connecting a UDP socket, which sends nothing); every interface when unknown.
pub fn toward(dest: SocketAddr) -> Vec<String> {
    let bind: SocketAddr =
        if dest.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { "[::]:0".parse().unwrap_or(dest) };
    let local = UdpSocket::bind(bind).and_then(|s| s.connect(dest).and_then(|()| s.local_addr()));
    receiving(local.map_or(Ipv4Addr::UNSPECIFIED.into(), |a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_name_and_by_address() {
        assert_eq!(ipv4_of("lo").unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(ipv4_of("10.1.2.3").unwrap(), Ipv4Addr::new(10, 1, 2, 3));
        assert!(matches!(ipv4_of("no-such-if0"), Err(NetError::Interface(_))));
    }

    #[test]
    fn the_receiving_interface_of_an_address() {
        assert_eq!(receiving(Ipv4Addr::LOCALHOST.into()), ["lo"]);
        let all = receiving(Ipv4Addr::UNSPECIFIED.into());
        assert!(all.iter().any(|n| n == "lo"), "{all:?}");
        assert_eq!(toward("127.0.0.1:9".parse().unwrap()), ["lo"]);
    }
}
