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

/// A UDP socket bound to `port` on all addresses with `SO_REUSEADDR` and `SO_REUSEPORT`, so
/// several processes on one host can listen on the same group port, joined to `group` on
/// `interface` (any interface when `None`).
pub fn group_receiver(group: SocketAddrV4, interface: Option<Ipv4Addr>) -> Result<UdpSocket, NetError> {
    let bind = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, group.port()));
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(|source| NetError::Bind { addr: bind, source })?;
    let opt = |what, r: std::io::Result<()>| r.map_err(|source| NetError::Option { what, source });
    opt("SO_REUSEADDR", s.set_reuse_address(true))?;
    opt("SO_REUSEPORT", s.set_reuse_port(true))?;
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
