//! `wirebench relay` flags to a checked `Config` (one pure function, table-tested).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use wirebench_core::auth::Key;

use super::Args;
use crate::error::UsageError;

/// The relay port when `--listen` and a peer leave it out.
pub const DEFAULT_PORT: u16 = 7880;
/// Most groups one relay carries.
pub(crate) const MAX_GROUPS: usize = 64;

/// Where peers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerSource {
    /// `host[:port]` entries (addresses or DNS names), re-resolved every `resolve_every`.
    List(Vec<String>),
    /// A file of such entries, one a line (`#` comments), re-read every `resolve_every`.
    File(PathBuf),
}

/// A checked relay configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The groups carried.
    pub groups: Vec<SocketAddrV4>,
    /// Peers.
    pub peers: PeerSource,
    /// The interface address: joins, re-emission and probes go out there.
    pub interface: Ipv4Addr,
    /// The relay port's bind address.
    pub listen: SocketAddrV4,
    /// This relay's address as its peers know it (interface address, listen port).
    pub me: SocketAddrV4,
    /// MAC key.
    pub key: Option<Key>,
    /// Datagrams per second per group (out) and per peer (in).
    pub max_rate: u64,
    /// Emitting sockets (one per original sender) at most.
    pub max_senders: usize,
    /// TTL of re-emitted datagrams and probes.
    pub ttl: u32,
    /// Peer re-resolution interval.
    pub resolve_every: Duration,
    /// How long the native check waits for answers.
    pub check_wait: Duration,
    /// Check only.
    pub check: bool,
    /// Relay even groups that reach peers natively.
    pub force: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Report file.
    pub json: Option<PathBuf>,
}

/// Parses one peer entry: `a.b.c.d[:port]` or `name[:port]` (the name is resolved later).
pub(crate) fn peer_entry(s: &str) -> Result<(String, u16), UsageError> {
    let bad = || UsageError(format!("--peers: {s:?} is not host[:port]"));
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (s, DEFAULT_PORT),
    };
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
    if !ok || port == 0 {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

impl Config {
    /// Checks `a`; `interface` is the resolved `--interface` (None when not given).
    pub fn from_args(a: &Args, interface: Option<Ipv4Addr>) -> Result<Self, UsageError> {
        let u = |m: String| Err(UsageError(m));
        if a.group.is_empty() {
            return u("relay needs at least one --group GROUP:PORT".into());
        }
        if a.group.len() > MAX_GROUPS {
            return u(format!("at most {MAX_GROUPS} groups"));
        }
        let mut groups = Vec::new();
        for g in &a.group {
            if !g.ip().is_multicast() || g.port() == 0 {
                return u(format!("--group {g}: not a multicast group with a port"));
            }
            if groups.contains(g) {
                return u(format!("--group {g} given twice"));
            }
            groups.push(*g);
        }
        let listen: SocketAddrV4 = match a.listen.parse::<SocketAddrV4>() {
            Ok(l) => l,
            Err(_) => match a.listen.parse::<Ipv4Addr>() {
                Ok(ip) => SocketAddrV4::new(ip, DEFAULT_PORT),
                Err(_) => return u(format!("--listen {}: not ADDR:PORT", a.listen)),
            },
        };
        if listen.port() == 0 {
            return u("--listen needs a port (peers must know it)".into());
        }
        let Some(interface) = interface.or((!listen.ip().is_unspecified()).then_some(*listen.ip())) else {
            return u(
                "relay needs --interface (or --listen with an address): joins and re-emission go out there".into()
            );
        };
        if interface.is_unspecified() || interface.is_multicast() {
            return u(format!("--interface {interface}: not a unicast address"));
        }
        let peers = match &a.peers {
            None => return u("relay needs --peers LIST|FILE|NAME".into()),
            Some(p) if std::path::Path::new(p).is_file() => PeerSource::File(p.into()),
            Some(p) => {
                let list: Vec<String> =
                    p.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
                if list.is_empty() {
                    return u("--peers is empty".into());
                }
                for e in &list {
                    peer_entry(e)?;
                }
                PeerSource::List(list)
            }
        };
        let key = match (&a.token, &a.token_file) {
            (Some(_), Some(_)) => return u("--token and --token-file: give one".into()),
            (Some(t), None) if t.is_empty() => return u("--token is empty".into()),
            (Some(t), None) => Some(Key::new(t.as_bytes())),
            (None, Some(f)) => {
                let t =
                    std::fs::read_to_string(f).map_err(|e| UsageError(format!("--token-file {}: {e}", f.display())))?;
                let t = t.trim();
                if t.is_empty() {
                    return u(format!("--token-file {} is empty", f.display()));
                }
                Some(Key::new(t.as_bytes()))
            }
            (None, None) => None,
        };
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "MsgRate is within 1..=1e9")]
        let max_rate = a.max_rate.per_sec().ceil() as u64;
        if a.max_senders == 0 || a.max_senders > 4096 {
            return u("--max-senders must be 1..=4096".into());
        }
        if a.ttl == 0 || a.ttl > 255 {
            return u("--ttl must be 1..=255".into());
        }
        let resolve_every = a.resolve_every.0;
        if resolve_every < Duration::from_secs(1) {
            return u("--resolve-every must be at least 1s".into());
        }
        let check_wait = a.check_wait.0;
        if check_wait.is_zero() || check_wait > Duration::from_secs(60) {
            return u("--check-wait must be above 0 and at most 60s".into());
        }
        Ok(Self {
            groups,
            peers,
            interface,
            listen,
            me: SocketAddrV4::new(interface, listen.port()),
            key,
            max_rate,
            max_senders: a.max_senders,
            ttl: a.ttl,
            resolve_every,
            check_wait,
            check: a.check,
            force: a.force,
            duration: a.duration.map(|s| s.0),
            json: a.json.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Config, UsageError> {
        let a: Args = crate::cli::parse_mode("relay", args).map_err(|e| UsageError(e.to_string()))?;
        Config::from_args(&a, Some(Ipv4Addr::new(10, 0, 0, 1)))
    }

    #[test]
    fn good_flags() {
        let c = cfg(&["--group", "239.1.1.1:5000", "--peers", "10.0.0.2, relay.example:9000"]).unwrap();
        assert_eq!(c.groups, [SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 5000)]);
        assert_eq!(c.peers, PeerSource::List(vec!["10.0.0.2".into(), "relay.example:9000".into()]));
        assert_eq!(c.me, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), DEFAULT_PORT));
        assert!(c.key.is_none());
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for (args, what) in [
            (&["--peers", "10.0.0.2"][..], "at least one --group"),
            (&["--group", "10.1.1.1:5000", "--peers", "x"], "not a multicast group"),
            (&["--group", "239.1.1.1:5000", "--group", "239.1.1.1:5000", "--peers", "x"], "twice"),
            (&["--group", "239.1.1.1:5000"], "needs --peers"),
            (&["--group", "239.1.1.1:5000", "--peers", " , "], "empty"),
            (&["--group", "239.1.1.1:5000", "--peers", "a b"], "not host[:port]"),
            (&["--group", "239.1.1.1:5000", "--peers", "h:0"], "not host[:port]"),
            (&["--group", "239.1.1.1:5000", "--peers", "h:99999"], "not host[:port]"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--token", ""], "empty"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--listen", "0.0.0.0:0"], "needs a port"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--ttl", "0"], "--ttl"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--max-senders", "0"], "--max-senders"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--resolve-every", "10ms"], "--resolve-every"),
        ] {
            let e = cfg(args).unwrap_err().0;
            assert!(e.contains(what), "{args:?}: {e}");
        }
        let a: Args = crate::cli::parse_mode("relay", &["--group", "239.1.1.1:5000", "--peers", "h"]).unwrap();
        assert!(Config::from_args(&a, None).unwrap_err().0.contains("--interface"));
    }
}
