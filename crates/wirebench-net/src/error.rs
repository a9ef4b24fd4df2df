use std::io;
use std::net::SocketAddr;

/// Socket-layer failures, carrying the address and the operation so the one-line message
/// the user sees says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Could not bind.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Could not connect.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A multicast socket option or join failed.
    #[error("multicast {what} for {group}: {source}")]
    Multicast {
        /// Which option.
        what: &'static str,
        /// The group.
        group: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The interface name or address is not on this host.
    #[error("interface '{0}' has no IPv4 address on this host (see `ip -4 addr`)")]
    Interface(String),
    /// Any other socket option.
    #[error("{what}: {source}")]
    Option {
        /// Which option.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
}
