//! Interface lookup: `--interface` takes a name (`eth0`, `lo`) or an IPv4 address.

use std::net::Ipv4Addr;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_name_and_by_address() {
        assert_eq!(ipv4_of("lo").unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(ipv4_of("10.1.2.3").unwrap(), Ipv4Addr::new(10, 1, 2, 3));
        assert!(matches!(ipv4_of("no-such-if0"), Err(NetError::Interface(_))));
    }
}
