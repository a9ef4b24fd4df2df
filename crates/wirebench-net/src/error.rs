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
    #[error("multicast {what} for {group}: {source}{}", hint(what, source))]
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

/// What to do about a failed multicast `what`: a join with no interface for the group
/// (`ENODEV`: no multicast route, and none named) says how to give it one.
fn hint(what: &str, source: &io::Error) -> &'static str {
    if what == "join" && source.raw_os_error() == Some(libc::ENODEV) {
        " (no interface to join it on: name one with --interface, or add a multicast route: \
         ip route add 224.0.0.0/4 dev IF)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_with_no_interface_says_how_to_give_it_one() {
        let group: SocketAddr = "239.1.2.3:5000".parse().unwrap();
        let e = NetError::Multicast { what: "join", group, source: io::Error::from_raw_os_error(libc::ENODEV) };
        assert_eq!(
            e.to_string(),
            "multicast join for 239.1.2.3:5000: No such device (os error 19) (no interface to join it on: name one \
             with --interface, or add a multicast route: ip route add 224.0.0.0/4 dev IF)"
        );
        let e = NetError::Multicast { what: "TTL", group, source: io::Error::from_raw_os_error(libc::ENODEV) };
        assert_eq!(e.to_string(), "multicast TTL for 239.1.2.3:5000: No such device (os error 19)");
    }
}
