//! The host's network side, read from `/proc` and `/sys` (and `getifaddrs`): routes,
//! interface MTUs and flags, and which interface a destination is reached by. Nothing here
//! changes anything.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

/// One IPv4 route of the main table (`/proc/net/route`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Interface name.
    pub iface: String,
    /// Destination network.
    pub dest: Ipv4Addr,
    /// Its mask.
    pub mask: Ipv4Addr,
}

impl Route {
    /// True if `ip` is inside this route's network.
    pub fn covers(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & u32::from(self.mask) == u32::from(self.dest)
    }

    /// The default route (0.0.0.0/0).
    pub fn is_default(&self) -> bool {
        u32::from(self.mask) == 0
    }
}

/// The kernel prints addresses as the hex of a native-endian u32 holding network-order
/// bytes.
fn hex_addr(s: &str) -> Option<Ipv4Addr> {
    u32::from_str_radix(s, 16).ok().map(|v| Ipv4Addr::from(v.to_ne_bytes()))
}

/// Parses the text of `/proc/net/route`.
pub fn parse_routes(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (iface, dest, mask) = (f.first()?, f.get(1)?, f.get(7)?);
            Some(Route { iface: (*iface).to_owned(), dest: hex_addr(dest)?, mask: hex_addr(mask)? })
        })
        .collect()
}

/// The main table's IPv4 routes (empty if unreadable).
pub fn routes() -> Vec<Route> {
    fs::read_to_string("/proc/net/route").map(|t| parse_routes(&t)).unwrap_or_default()
}

/// The interface of the default route.
pub fn default_route_interface(routes: &[Route]) -> Option<String> {
    routes.iter().find(|r| r.is_default()).map(|r| r.iface.clone())
}

/// The interface of the most specific non-default route that covers the whole multicast
/// range 224.0.0.0/4 (the one tools that do not set `IP_MULTICAST_IF` use).
pub fn multicast_route(routes: &[Route]) -> Option<&Route> {
    let range = Ipv4Addr::new(224, 0, 0, 0);
    routes
        .iter()
        .filter(|r| !r.is_default() && r.covers(range) && u32::from(r.mask).leading_ones() <= 4)
        .max_by_key(|r| u32::from(r.mask).leading_ones())
}

/// The MTU of interface `name`.
pub fn mtu(name: &str) -> Option<u32> {
    fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()
}

/// Up and multicast-capable flags of an interface; `None` if there is no such interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    /// Administratively up.
    pub up: bool,
    /// `MULTICAST` flag set.
    pub multicast: bool,
    /// The loopback interface.
    pub loopback: bool,
}

/// The flags of interface `name`.
pub fn flags(name: &str) -> Option<Flags> {
    use nix::net::if_::InterfaceFlags as F;
    let a = nix::ifaddrs::getifaddrs().ok()?.find(|a| a.interface_name == name)?;
    Some(Flags {
        up: a.flags.contains(F::IFF_UP),
        multicast: a.flags.contains(F::IFF_MULTICAST),
        loopback: a.flags.contains(F::IFF_LOOPBACK),
    })
}

/// The interface holding IPv4 address `ip`.
pub fn interface_of_ip(ip: Ipv4Addr) -> Option<String> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let own = a.address.and_then(|s| s.as_sockaddr_in().map(nix::sys::socket::SockaddrIn::ip))?;
        (own == ip).then_some(a.interface_name)
    })
}

/// An `--interface` value (a name or an IPv4 address) as an interface name.
pub fn interface_name(name_or_addr: &str) -> Option<String> {
    match name_or_addr.parse::<Ipv4Addr>() {
        Ok(ip) => interface_of_ip(ip),
        Err(_) => flags(name_or_addr).map(|_| name_or_addr.to_owned()),
    }
}

/// The interface the kernel would send to `dest` from (a connected UDP socket's source
/// address; nothing is sent).
pub fn interface_towards(dest: SocketAddr) -> Option<String> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    sock.connect(dest).ok()?;
    match sock.local_addr().ok()?.ip() {
        std::net::IpAddr::V4(ip) => interface_of_ip(ip),
        std::net::IpAddr::V6(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        lo\t000000E0\t00000000\t0001\t0\t0\t0\t000000F0\t0\t0\t0\n";

    #[test]
    fn parses_the_kernel_route_table() {
        let r = parse_routes(ROUTE);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1].dest, Ipv4Addr::new(192, 0, 2, 0));
        assert_eq!(r[1].mask, Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(default_route_interface(&r).as_deref(), Some("eth0"));
        assert_eq!(multicast_route(&r).map(|r| r.iface.as_str()), Some("lo"));
        assert_eq!(multicast_route(&r[..2]), None, "the default route is not a multicast route");
    }

    #[test]
    fn loopback_is_reached_by_lo() {
        assert_eq!(interface_towards("127.0.0.1:9".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(interface_name("127.0.0.1").as_deref(), Some("lo"));
        assert!(mtu("lo").is_some_and(|m| m > 0));
        assert!(flags("lo").is_some_and(|f| f.loopback && f.up));
        assert_eq!(flags("no-such-if0"), None);
    }
}
