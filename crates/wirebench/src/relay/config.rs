//! `wirebench relay` flags to a checked `Config` (one pure function, table-tested).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use wirebench_core::auth::Key;

use super::Args;
use crate::discovery::{self, KubeAccess, Source};
use crate::error::UsageError;

/// The relay port when `--listen` and a peer leave it out.
pub const DEFAULT_PORT: u16 = 7880;
/// Most groups one relay carries.
pub(crate) const MAX_GROUPS: usize = 64;

/// A checked relay configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The groups carried.
    pub groups: Vec<SocketAddrV4>,
    /// Where peers come from (the mesh's discovery: lists, files, DNS, Kubernetes).
    pub peers: Vec<Source>,
    /// The Kubernetes API, for `k8s:` sources.
    pub kube: Option<KubeAccess>,
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
    /// A peer out of the list and silent this long is retired from the peer table.
    pub peer_expiry: Duration,
    /// How long the native check waits for answers.
    pub check_wait: Duration,
    /// Check only.
    pub check: bool,
    /// Relay even groups that reach peers natively.
    pub force: bool,
    /// Poll without sleeping for this long after work (zero: off).
    pub busy_poll: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Report file.
    pub json: Option<PathBuf>,
}

/// `--peers` values as discovery sources (`discovery::parse`, relay port by default). A
/// value that names an existing file is that file, as before discovery: `--peers peers.txt`.
fn peer_sources(values: &[String]) -> Result<Vec<Source>, UsageError> {
    if values.is_empty() {
        return Err(UsageError("relay needs --peers LIST|FILE|NAME".into()));
    }
    let mut files = Vec::new();
    let mut rest = Vec::new();
    for v in values {
        if std::path::Path::new(v.trim()).is_file() {
            files.push(Source::File(PathBuf::from(v.trim())));
        } else {
            rest.push(v.clone());
        }
    }
    let mut sources = discovery::parse(&rest, DEFAULT_PORT)?;
    sources.extend(files);
    if sources.is_empty() {
        return Err(UsageError("--peers is empty".into()));
    }
    Ok(sources)
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
        let peers = peer_sources(&a.peers)?;
        let kube = if peers.iter().any(|s| matches!(s, Source::Kubernetes(_))) { Some(a.kube.access()?) } else { None };
        // The hardened key, derived once: a captured tag costs a guesser the whole derivation.
        let salt = a.salt.read()?;
        let key = a.token.read()?.map(|t| Key::derive(t.as_bytes(), salt.as_bytes()));
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "MsgRate is within 1..=1e9")]
        let max_rate = a.max_rate.per_sec().ceil() as u64;
        if a.max_senders.0 == 0 || a.max_senders.0 > 4096 {
            return u("--max-senders must be 1..=4096".into());
        }
        let resolve_every = a.resolve_every.0;
        if resolve_every < Duration::from_secs(1) {
            return u("--resolve-every must be at least 1s".into());
        }
        let peer_expiry = a.peer_expiry.0;
        if peer_expiry < Duration::from_secs(1) || peer_expiry > Duration::from_secs(86_400) {
            return u("--peer-expiry must be 1s..=24h".into());
        }
        let busy_poll = a.busy_poll.map_or(Duration::ZERO, |s| s.0);
        if busy_poll > Duration::from_secs(1) {
            return u("--busy-poll must be at most 1s".into());
        }
        let check_wait = a.check_wait.0;
        if check_wait.is_zero() || check_wait > Duration::from_secs(60) {
            return u("--check-wait must be above 0 and at most 60s".into());
        }
        Ok(Self {
            groups,
            peers,
            kube,
            interface,
            listen,
            me: SocketAddrV4::new(interface, listen.port()),
            key,
            max_rate,
            max_senders: a.max_senders.as_usize(),
            ttl: a.mcast.ttl,
            resolve_every,
            peer_expiry,
            check_wait,
            check: a.check,
            force: a.force,
            busy_poll,
            duration: a.duration.map(|s| s.0),
            json: a.json.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Config, UsageError> {
        let a: Args = crate::flags::parse_mode("relay", args).map_err(|e| UsageError(e.to_string()))?;
        Config::from_args(&a, Some(Ipv4Addr::new(10, 0, 0, 1)))
    }

    #[test]
    fn good_flags() {
        let c = cfg(&["--group", "239.1.1.1:5000", "--peers", "10.0.0.2, relay.example:9000"]).unwrap();
        assert_eq!(c.groups, [SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 5000)]);
        let Source::List(l) = &c.peers[0] else { panic!("{:?}", c.peers) };
        let l: Vec<(&str, u16)> = l.iter().map(|e| (e.host.as_str(), e.port)).collect();
        assert_eq!(l, [("10.0.0.2", DEFAULT_PORT), ("relay.example", 9000)]);
        let c =
            cfg(&["--group", "239.1.1.1:5000", "--peers", "dns:relays.ns.svc", "--peers", "file:/etc/relays"]).unwrap();
        assert_eq!(
            c.peers,
            [Source::Dns { name: "relays.ns.svc".into(), port: DEFAULT_PORT }, Source::File("/etc/relays".into())]
        );
        assert!(c.kube.is_none());
        assert_eq!(c.me, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), DEFAULT_PORT));
        assert!(c.key.is_none());
        assert_eq!(c.busy_poll, Duration::ZERO, "off by default");
        assert_eq!(c.peer_expiry, Duration::from_secs(60));
        let c = cfg(&["--group", "239.1.1.1:5000", "--peers", "h", "--busy-poll", "200us"]).unwrap();
        assert_eq!(c.busy_poll, Duration::from_micros(200));
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for (args, what) in [
            (&["--peers", "10.0.0.2"][..], "at least one --group"),
            (&["--group", "10.1.1.1:5000", "--peers", "x"], "not a multicast group"),
            (&["--group", "239.1.1.1:5000", "--group", "239.1.1.1:5000", "--peers", "x"], "twice"),
            (&["--group", "239.1.1.1:5000"], "needs --peers"),
            (&["--group", "239.1.1.1:5000", "--peers", " , "], "empty"),
            (&["--group", "239.1.1.1:5000", "--peers", "a b"], "--peers 'a b'"),
            (&["--group", "239.1.1.1:5000", "--peers", "h:0"], "--peers 'h:0'"),
            (&["--group", "239.1.1.1:5000", "--peers", "h:99999"], "--peers 'h:99999'"),
            (&["--group", "239.1.1.1:5000", "--peers", "k8s:nonamespace"], "--peers 'k8s:nonamespace'"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--token", ""], "empty"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--listen", "0.0.0.0:0"], "needs a port"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--ttl", "0"], "--ttl"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--max-senders", "0"], "--max-senders"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--resolve-every", "10ms"], "--resolve-every"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--busy-poll", "2s"], "--busy-poll"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--peer-expiry", "500ms"], "--peer-expiry"),
            (&["--group", "239.1.1.1:5000", "--peers", "h", "--peer-expiry", "25h"], "--peer-expiry"),
        ] {
            let e = cfg(args).unwrap_err().0;
            assert!(e.contains(what), "{args:?}: {e}");
        }
        let a: Args = crate::flags::parse_mode("relay", &["--group", "239.1.1.1:5000", "--peers", "h"]).unwrap();
        assert!(Config::from_args(&a, None).unwrap_err().0.contains("--interface"));
    }
}
