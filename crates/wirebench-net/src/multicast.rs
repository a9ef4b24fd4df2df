//! Multicast sockets: options for the sender and joins for the receivers.
//!
//! On loopback a sender must set `IP_MULTICAST_IF` to 127.0.0.1 (or the host needs a
//! `224.0.0.0/4` route with `src 127.0.0.1`); across namespaces `IP_MULTICAST_IF` is enough.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use crate::NetError;

/// How a pinger sends to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderOpts {
    /// Outgoing interface address (`IP_MULTICAST_IF`); the kernel's route when `None`.
    pub interface: Option<Ipv4Addr>,
    /// `IP_MULTICAST_TTL`.
    pub ttl: u32,
    /// `IP_MULTICAST_LOOP`: whether this host's own receivers hear the probes.
    pub loopback: bool,
}

/// A UDP socket bound to the group's own address and port, joined to `group` on
/// `interface` (any interface when `None`). Bound to the group, it hears that group's
/// datagrams and nothing else: no unicast to the port (which another receiver on this host
/// may own) and no other group a socket here joined on the same port. It shares the
/// address with other sockets bound to it that also ask (`SO_REUSEADDR`, no
/// `SO_REUSEPORT`): the kernel gives each of them every datagram of the group, so several
/// receivers of one group on one host (serves, a relay) take nothing from one another. A
/// socket that holds the port on every address without sharing it refuses the bind.
pub fn group_receiver(group: SocketAddrV4, interface: Option<Ipv4Addr>) -> Result<UdpSocket, NetError> {
    let bind = SocketAddr::V4(group);
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(|source| NetError::Bind { addr: bind, source })?;
    let opt = |what, r: std::io::Result<()>| r.map_err(|source| NetError::Option { what, source });
    opt("SO_REUSEADDR", s.set_reuse_address(true))?;
    s.bind(&bind.into()).map_err(|source| NetError::Bind { addr: bind, source })?;
    let s: UdpSocket = s.into();
    join(&s, group, interface)?;
    Ok(s)
}

/// Joins `group` on an existing socket.
pub fn join(s: &UdpSocket, group: SocketAddrV4, interface: Option<Ipv4Addr>) -> Result<(), NetError> {
    if !group.ip().is_multicast() {
        return Err(NetError::Multicast {
            what: "join",
            group: group.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a multicast address"),
        });
    }
    s.join_multicast_v4(group.ip(), &interface.unwrap_or(Ipv4Addr::UNSPECIFIED)).map_err(|source| NetError::Multicast {
        what: "join",
        group: group.into(),
        source,
    })
}

/// Sets the sender options on `s` for sending to `group`.
pub fn set_sender(s: &UdpSocket, group: SocketAddr, o: &SenderOpts) -> Result<(), NetError> {
    let m = |what, r: std::io::Result<()>| r.map_err(|source| NetError::Multicast { what, group, source });
    m("TTL", s.set_multicast_ttl_v4(o.ttl))?;
    m("loop", s.set_multicast_loop_v4(o.loopback))?;
    if let Some(ip) = o.interface {
        let sock = socket2::SockRef::from(s);
        m("interface", sock.set_multicast_if_v4(&ip))?;
    }
    Ok(())
}
