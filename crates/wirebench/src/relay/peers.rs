//! The relay's peers from the mesh's discovery (`crate::discovery`): static lists, files,
//! DNS names and Kubernetes EndpointSlices, re-read (or watched) on a runtime of their own,
//! so a resolver that blocks for seconds never holds up the relay's loop. The loop asks
//! [`Watch::changed`] each turn: one atomic load unless the list changed.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wirebench_core::mesh::peer::Peer;

use super::config::Config;
use crate::discovery::{self, Board, Options};
use crate::shutdown::{POLL, Shutdown};

/// Most peers one relay keeps (a source that gives more is cut here).
pub(crate) const MAX_PEERS: usize = 1024;
/// Longest the relay waits for every source's first list before it starts.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(6);

/// The discovery sources running, and the list version the relay last took.
pub(crate) struct Watch {
    board: Arc<Board>,
    seen: u64,
    me: SocketAddrV4,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Watch {
    /// Starts the sources (entries without a port: [`super::DEFAULT_PORT`], as on the command
    /// line); their log lines (peers added and dropped, errors) go to stderr.
    pub(crate) fn start(cfg: &Config, shutdown: &Shutdown) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("relay-peers")
            .enable_all()
            .build()
            .context("cannot start the discovery runtime")?;
        let opts = Options { default_port: super::DEFAULT_PORT, refresh: cfg.resolve_every, kube: cfg.kube.clone() };
        let log: discovery::Log = Arc::new(|line| eprintln!("wirebench relay: {line}"));
        let board = discovery::spawn(cfg.peers.clone(), &opts, shutdown, runtime.handle(), &log);
        Ok(Self { board, seen: u64::MAX, me: cfg.me, runtime: Some(runtime) })
    }

    /// Waits (at most [`FIRST_LIST_WAIT`], or until the stop) for every source's first list,
    /// then gives the list: a source still silent counts as empty and adds its peers later.
    /// When every source failed (names that do not resolve, a file that is not there), the
    /// relay would run with no peers: that is an error.
    pub(crate) fn first(&mut self, shutdown: &Shutdown) -> anyhow::Result<Vec<SocketAddrV4>> {
        let end = Instant::now() + FIRST_LIST_WAIT;
        while !self.board.ready() && !self.board.all_failed() && !shutdown.is_set() && Instant::now() < end {
            std::thread::sleep(POLL.min(Duration::from_millis(10)));
        }
        self.seen = self.board.version();
        let list = addresses(&self.board.peers(), self.me);
        if list.is_empty() && self.board.all_failed() {
            let names: Vec<String> = self.board.errors().into_iter().map(|(n, _)| n).collect();
            anyhow::bail!("no peer: every --peers source failed ({}); nothing to relay to", names.join(", "));
        }
        Ok(list)
    }

    /// The list, when it changed since the last call.
    pub(crate) fn changed(&mut self) -> Option<Vec<SocketAddrV4>> {
        let v = self.board.version();
        if v == self.seen {
            return None;
        }
        self.seen = v;
        Some(addresses(&self.board.peers(), self.me))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // A lookup blocked in the resolver must not hold up the exit.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The relay addresses in a discovered list: IPv4 unicast only, without `me` (every node
/// can get the same list), sorted, at most [`MAX_PEERS`].
pub(crate) fn addresses(peers: &[Peer], me: SocketAddrV4) -> Vec<SocketAddrV4> {
    let mut out: Vec<SocketAddrV4> = peers
        .iter()
        .filter_map(|p| match p.addr {
            SocketAddr::V4(v) if v != me && !v.ip().is_unspecified() && !v.ip().is_multicast() && v.port() != 0 => {
                Some(v)
            }
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out.truncate(MAX_PEERS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's entries without a port get the relay port 7880, as the command line's do,
    /// whatever `--listen` says (the relay's own port is not its peers').
    #[test]
    fn file_entries_without_a_port_get_the_relay_port() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("peers");
        std::fs::write(&file, "# relays\n10.0.0.2\n10.0.0.3:9\n").unwrap();
        let args: super::super::Args = crate::flags::parse_mode(
            "relay",
            &["--group", "239.1.1.1:5000", "--listen", "10.0.0.1:7990", "--peers", file.to_str().unwrap()],
        )
        .unwrap();
        let cfg = Config::from_args(&args, None).unwrap();
        let stop = Shutdown::new();
        let mut w = Watch::start(&cfg, &stop).unwrap();
        let got = w.first(&stop).unwrap();
        stop.trigger();
        let want: [SocketAddrV4; 2] = ["10.0.0.2:7880".parse().unwrap(), "10.0.0.3:9".parse().unwrap()];
        assert_eq!(got, want);
        assert_eq!(w.changed(), None, "nothing changed since the first list");
    }

    #[test]
    fn addresses_are_ipv4_unicast_sorted_without_me() {
        let me: SocketAddrV4 = "10.0.0.1:7880".parse().unwrap();
        let p = |s: &str| Peer::at(s.parse().unwrap());
        let got = addresses(
            &[
                p("10.0.0.3:7880"),
                p("10.0.0.1:7880"),
                p("[::1]:7880"),
                p("239.1.1.1:7880"),
                p("0.0.0.0:7880"),
                p("10.0.0.2:9"),
            ],
            me,
        );
        assert_eq!(got, ["10.0.0.2:9".parse::<SocketAddrV4>().unwrap(), "10.0.0.3:7880".parse().unwrap()]);
        let many: Vec<Peer> =
            (0..2000u32).map(|i| Peer::at(SocketAddr::from((std::net::Ipv4Addr::from(0x0a01_0000 + i), 1)))).collect();
        assert_eq!(addresses(&many, me).len(), MAX_PEERS);
    }
}
