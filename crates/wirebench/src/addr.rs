//! Addresses and transports as commands take them from flags: `host:port` resolved to one
//! address, multicast `GROUP:PORT`, and the transport a client measures over. One reading
//! for every command, so an address is refused with the same words everywhere.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};

use serde::Serialize;

use crate::error::UsageError;

/// Transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// UDP datagrams (unicast or multicast).
    Udp,
    /// Frames on one TCP connection.
    Tcp,
    /// STAMP test packets (RFC 8762) to a reflector, over UDP.
    Stamp,
}

impl Proto {
    /// Lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Stamp => "stamp",
        }
    }
}

/// Resolves `host:port` (a name, IPv4 or `[IPv6]`) to one address. A malformed address and
/// a name that does not resolve are told apart.
pub fn resolve(s: &str) -> Result<SocketAddr, UsageError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = || UsageError(format!("bad address '{s}': expected host:port, e.g. 127.0.0.1:7878"));
    let Some((host, port)) = s.rsplit_once(':') else { return Err(bad()) };
    if host.is_empty() || host.contains(['[', ']', ':']) {
        return Err(bad());
    }
    let Ok(port) = port.parse::<u16>() else {
        return Err(UsageError(format!("bad address '{s}': port '{port}' is not a number from 0 to 65535")));
    };
    let found = (host, port)
        .to_socket_addrs()
        .map_err(|e| UsageError(format!("unknown host '{host}': the name did not resolve ({e})")))?;
    found.into_iter().find(SocketAddr::is_ipv4).ok_or_else(|| UsageError(format!("host '{host}' has no IPv4 address")))
}

/// A multicast `GROUP:PORT` (`239.255.0.1:5000`), refused with the form it expects.
pub fn group_port(s: &str) -> Result<SocketAddrV4, String> {
    s.trim().parse().map_err(|_| match s.trim().parse::<Ipv4Addr>() {
        Ok(ip) => format!("'{s}': expected host:port (GROUP:PORT), e.g. {ip}:5000"),
        Err(_) => format!("'{s}': expected host:port (GROUP:PORT), e.g. 239.255.0.1:5000"),
    })
}
