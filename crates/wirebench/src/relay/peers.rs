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
    /// Starts the sources; their log lines (peers added and dropped, errors) go to stderr.
    pub(crate) fn start(cfg: &Config, shutdown: &Shutdown) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("relay-peers")
            .enable_all()
            .build()
            .context("cannot start the discovery runtime")?;
        let opts = Options { default_port: cfg.listen.port(), refresh: cfg.resolve_every, kube: cfg.kube.clone() };
        let log: discovery::Log = Arc::new(|line| eprintln!("wirebench relay: {line}"));
        let board = discovery::spawn(cfg.peers.clone(), &opts, shutdown, runtime.handle(), &log);
        Ok(Self { board, seen: u64::MAX, me: cfg.me, runtime: Some(runtime) })
    }

    /// Waits (at most [`FIRST_LIST_WAIT`], or until the stop) for every source's first list,
    /// then gives the list: a source still silent counts as empty and adds its peers later.
    pub(crate) fn first(&mut self, shutdown: &Shutdown) -> Vec<SocketAddrV4> {
        let end = Instant::now() + FIRST_LIST_WAIT;
        while !self.board.ready() && !shutdown.is_set() && Instant::now() < end {
            std::thread::sleep(POLL.min(Duration::from_millis(10)));
        }
        self.seen = self.board.version();
        addresses(&self.board.peers(), self.me)
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
