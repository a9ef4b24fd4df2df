//! Peer discovery, for every command that talks to a fleet (`mesh agent`; `relay` reuses it):
//! sources that run on a tokio runtime and publish into one [`Board`], which the command
//! reads whenever its version changes. Peers that come and go are added and dropped
//! without a restart.
//!
//! Sources (`--peers`, comma-separated, repeatable):
//! - `HOST[:PORT] [name=N] [zone=Z]`: a static entry; names are re-resolved every refresh;
//! - `stamp:HOST[:PORT] [name=N] [zone=Z]`: a STAMP reflector (port 862 by default), a
//!   member that is probed and probes nobody (`mesh::peer`); in a peer file too;
//! - `file:PATH` (or a path starting with `/` or `.`): a peer list (`mesh::peer` format),
//!   re-read every refresh;
//! - `dns:NAME[:PORT]`: every address of a name (a Kubernetes headless Service gives every
//!   pod), re-resolved every refresh;
//! - `k8s:NAMESPACE/SERVICE[:PORT]`: the Service's EndpointSlices, listed then watched
//!   (`discovery/kubernetes.rs`), with node names and zones.
//!
//! A source that fails keeps its last list (a DNS or API hiccup does not empty the mesh),
//! counts the error, and tries again at its next refresh (the watch: with back-off).

mod kubernetes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wirebench_core::mesh::peer::{self, Peer, PeerLine};

pub use self::kubernetes::{Access as KubeAccess, Flags as KubeFlags, Spec as KubeSpec};
use crate::error::UsageError;
use crate::shutdown::Shutdown;

/// Longest a name lookup may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest peer file read.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Where peers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Entries given on the command line.
    List(Vec<PeerLine>),
    /// A peer list file.
    File(PathBuf),
    /// Every address of a name.
    Dns {
        /// The name.
        name: String,
        /// The probe port.
        port: u16,
    },
    /// A Service's EndpointSlices.
    Kubernetes(KubeSpec),
}

impl Source {
    /// How it is shown in logs and metrics.
    pub fn describe(&self) -> String {
        match self {
            Self::List(l) => format!("list of {}", l.len()),
            Self::File(p) => format!("file:{}", p.display()),
            Self::Dns { name, port } => format!("dns:{name}:{port}"),
            Self::Kubernetes(k) => format!("k8s:{}/{}", k.namespace, k.service),
        }
    }
}

/// Parses `--peers` values: each a comma-separated list of entries; literal entries of all
/// values form one static source.
pub fn parse(specs: &[String], default_port: u16) -> Result<Vec<Source>, UsageError> {
    let mut out = Vec::new();
    let mut list = Vec::new();
    for spec in specs {
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: String| UsageError(format!("--peers '{entry}': {why}"));
            if let Some(path) = entry.strip_prefix("file:") {
                out.push(Source::File(PathBuf::from(path)));
            } else if entry.starts_with('/') || entry.starts_with("./") || entry.starts_with("../") {
                out.push(Source::File(PathBuf::from(entry)));
            } else if let Some(rest) = entry.strip_prefix("dns:") {
                let (name, port) = peer::split_host_port(rest, default_port).map_err(bad)?;
                let line = peer::parse_entry(&name, port).map_err(bad)?;
                out.push(Source::Dns { name: line.host, port });
            } else if let Some(rest) = entry.strip_prefix("k8s:") {
                out.push(Source::Kubernetes(KubeSpec::parse(rest).map_err(bad)?));
            } else {
                list.push(peer::parse_entry(entry, default_port).map_err(bad)?);
            }
        }
    }
    if !list.is_empty() {
        out.insert(0, Source::List(list));
    }
    Ok(out)
}

/// Each source's latest list (`None` before its first), and their merge.
type BoardState = (Vec<Option<Vec<Peer>>>, Arc<Vec<Peer>>);

/// What the sources found: one merged, sorted list and a version that changes with it.
#[derive(Debug)]
pub struct Board {
    version: AtomicU64,
    state: Mutex<BoardState>,
    errors: Vec<AtomicU64>,
    names: Vec<String>,
    ready: AtomicBool,
    /// Kept up to date with the list's addresses ([`Board::feed`]).
    known: std::sync::OnceLock<crate::accept::Known>,
}

impl Board {
    fn new(sources: &[Source]) -> Self {
        Self {
            version: AtomicU64::new(0),
            state: Mutex::new((vec![None; sources.len()], Arc::new(Vec::new()))),
            errors: sources.iter().map(|_| AtomicU64::new(0)).collect(),
            names: sources.iter().map(Source::describe).collect(),
            ready: AtomicBool::new(sources.is_empty()),
            known: std::sync::OnceLock::new(),
        }
    }

    /// Keeps `known` holding the addresses of the listed agents (not STAMP reflectors), from
    /// now on: what a serve keeps its reserve of connections for.
    pub fn feed(&self, known: crate::accept::Known) {
        let st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.set(agent_ips(&st.1));
        let _ = self.known.set(known);
    }

    /// Bumped on every change of the merged list.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The merged list.
    pub fn peers(&self) -> Arc<Vec<Peer>> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1.clone()
    }

    /// Every source has produced a list at least once.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Every source has failed and none has produced a list yet: nothing to wait for.
    pub fn all_failed(&self) -> bool {
        let st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        !self.errors.is_empty()
            && st.0.iter().zip(&self.errors).all(|(l, e)| l.is_none() && e.load(Ordering::Relaxed) > 0)
    }

    /// Errors per source, by name.
    pub fn errors(&self) -> Vec<(String, u64)> {
        self.names.iter().cloned().zip(self.errors.iter().map(|e| e.load(Ordering::Relaxed))).collect()
    }

    /// Source `i` now says `peers`; returns what changed in the merged list.
    fn publish(&self, i: usize, peers: Vec<Peer>) -> peer::Diff {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.0[i] = Some(peers);
        let lists: Vec<Vec<Peer>> = st.0.iter().flatten().cloned().collect();
        let merged = peer::merge(&lists);
        let diff = peer::Diff::between(&st.1, &merged);
        let changed = *st.1 != merged;
        if changed && let Some(k) = self.known.get() {
            k.set(agent_ips(&merged));
        }
        st.1 = Arc::new(merged);
        if st.0.iter().all(Option::is_some) {
            self.ready.store(true, Ordering::Release);
        }
        if changed {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        diff
    }

    fn error(&self, i: usize) {
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }
}

fn agent_ips(peers: &[Peer]) -> std::collections::HashSet<std::net::IpAddr> {
    peers.iter().filter(|p| !p.stamp).map(|p| p.addr.ip().to_canonical()).collect()
}

/// How sources run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Port of entries without one.
    pub default_port: u16,
    /// How often lists are re-read and names re-resolved.
    pub refresh: Duration,
    /// The Kubernetes API, for `k8s:` sources.
    pub kube: Option<KubeAccess>,
}

/// A line for the operator's log.
pub type Log = Arc<dyn Fn(String) + Send + Sync>;

/// Starts every source on `rt`; they stop with `shutdown`.
pub fn spawn(
    sources: Vec<Source>,
    opts: &Options,
    shutdown: &Shutdown,
    rt: &tokio::runtime::Handle,
    log: &Log,
) -> Arc<Board> {
    let board = Arc::new(Board::new(&sources));
    for (i, src) in sources.into_iter().enumerate() {
        let (board, opts, shutdown, log) = (board.clone(), opts.clone(), shutdown.clone(), log.clone());
        rt.spawn(async move {
            match src {
                Source::Kubernetes(spec) => {
                    kubernetes::run(&spec, opts.kube.as_ref(), opts.default_port, &board, i, &shutdown, &log).await;
                }
                other => poll_source(&other, &opts, &board, i, &shutdown, &log).await,
            }
        });
    }
    board
}

/// Sleeps `d`, or less if `shutdown` is set; false once it is. Woken by the stop itself, so
/// a long refresh costs no wake-ups in between.
pub async fn sleep_or_stop(d: Duration, shutdown: &Shutdown) -> bool {
    tokio::select! {
        () = shutdown.stopped() => false,
        () = tokio::time::sleep(d) => !shutdown.is_set(),
    }
}

/// Re-reads or re-resolves a list, file or name every refresh.
async fn poll_source(src: &Source, opts: &Options, board: &Board, i: usize, shutdown: &Shutdown, log: &Log) {
    let mut last_error = String::new();
    loop {
        match produce(src, opts.default_port).await {
            Ok(peers) => {
                let diff = board.publish(i, peers);
                if !diff.is_empty() {
                    log(format!("peers {diff} from {}", src.describe()));
                }
                last_error.clear();
            }
            Err(e) => {
                board.error(i);
                let e = format!("{e:#}");
                if e != last_error {
                    log(format!("discovery {}: {e} (keeping the last list)", src.describe()));
                    last_error = e;
                }
            }
        }
        if !sleep_or_stop(opts.refresh, shutdown).await {
            return;
        }
    }
}

async fn produce(src: &Source, default_port: u16) -> anyhow::Result<Vec<Peer>> {
    match src {
        Source::List(lines) => resolve_lines(lines).await,
        Source::File(path) => {
            let text = read_small(path)?;
            let lines = peer::parse_list(&text, default_port)?;
            resolve_lines(&lines).await
        }
        Source::Dns { name, port } => Ok(resolve(name, *port).await?.into_iter().map(Peer::at).collect()),
        Source::Kubernetes(_) => unreachable!("run by kubernetes::run"),
    }
}

fn read_small(path: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    anyhow::ensure!(text.len() as u64 <= MAX_FILE_BYTES, "{} is larger than 4 MiB", path.display());
    Ok(text)
}

async fn resolve(host: &str, port: u16) -> anyhow::Result<Vec<SocketAddr>> {
    let found = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| anyhow::anyhow!("resolving {host}: no answer in 5 s"))?
        .map_err(|e| anyhow::anyhow!("resolving {host}: {e}"))?;
    let mut v: Vec<SocketAddr> = found.take(peer::MAX_PEERS).collect();
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

async fn resolve_lines(lines: &[PeerLine]) -> anyhow::Result<Vec<Peer>> {
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        let addrs = match l.literal() {
            Some(a) => vec![a],
            None => resolve(&l.host, l.port).await?,
        };
        out.extend(addrs.into_iter().map(|addr| Peer {
            addr,
            name: l.name.clone(),
            zone: l.zone.clone(),
            stamp: l.stamp,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_of_source() {
        let got = parse(
            &[
                "10.0.0.1:7000 name=a, 10.0.0.2".into(),
                "file:/etc/peers,./p,dns:agents.ns.svc:7878,k8s:ns/agents".into(),
            ],
            7878,
        )
        .unwrap();
        assert_eq!(got.len(), 5);
        assert!(matches!(&got[0], Source::List(l) if l.len() == 2 && l[0].name.as_deref() == Some("a")));
        assert_eq!(got[1], Source::File("/etc/peers".into()));
        assert_eq!(got[2], Source::File("./p".into()));
        assert_eq!(got[3], Source::Dns { name: "agents.ns.svc".into(), port: 7878 });
        assert!(matches!(&got[4], Source::Kubernetes(k) if k.namespace == "ns" && k.service == "agents"));
    }

    /// `stamp:` entries join the static list as reflectors, on port 862 unless given one,
    /// with their labels; resolved like any literal entry.
    #[test]
    fn stamp_entries_are_reflectors_in_the_static_list() {
        let got = parse(&["10.0.0.1, stamp:10.0.0.9 name=r1 zone=edge, stamp:10.0.0.8:8620".into()], 7878).unwrap();
        let Source::List(l) = &got[0] else { panic!("{got:?}") };
        assert_eq!(got.len(), 1);
        assert_eq!(
            l.iter().map(|p| (p.literal().unwrap().to_string(), p.stamp)).collect::<Vec<_>>(),
            [("10.0.0.1:7878".into(), false), ("10.0.0.9:862".into(), true), ("10.0.0.8:8620".into(), true)]
        );
        assert_eq!((l[1].name.as_deref(), l[1].zone.as_deref()), (Some("r1"), Some("edge")));
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let peers = rt.block_on(resolve_lines(l)).unwrap();
        assert_eq!(peers.iter().map(|p| p.stamp).collect::<Vec<_>>(), [false, true, true]);
    }

    #[test]
    fn refuses_bad_entries_in_one_line() {
        for bad in [
            "10.0.0.1:x",
            "dns:",
            "k8s:nonamespace",
            "k8s:ns/",
            "host colour=red",
            "dns:a b",
            "stamp:",
            "stamp:10.0.0.1:x",
            "stamp:10.0.0.1:0",
            "stamp:bad_host!",
            "stamp:10.0.0.1 zone=a/b",
        ] {
            let e = parse(&[bad.into()], 1).unwrap_err();
            assert!(e.0.starts_with(&format!("--peers '{bad}': ")) && !e.0.contains('\n'), "{e}");
        }
        let e = parse(&["stamp:".into()], 1).unwrap_err();
        assert_eq!(e.0, "--peers 'stamp:': 'stamp:' needs a reflector's HOST[:PORT], e.g. stamp:10.0.0.1:862");
    }

    #[test]
    fn the_board_merges_sources_and_counts_versions() {
        let srcs = [Source::List(vec![]), Source::Dns { name: "x".into(), port: 1 }];
        let b = Board::new(&srcs);
        let p = |s: &str, name: Option<&str>| Peer { name: name.map(Into::into), ..Peer::at(s.parse().unwrap()) };
        assert!(!b.ready());
        let d = b.publish(0, vec![p("10.0.0.1:1", Some("a"))]);
        assert_eq!(d.added.len(), 1);
        assert!(!b.ready(), "one source has not answered yet");
        assert_eq!(b.version(), 1);
        b.publish(1, vec![p("10.0.0.1:1", None), p("10.0.0.2:1", None)]);
        assert!(b.ready());
        assert_eq!(b.version(), 2);
        assert_eq!(*b.peers(), vec![p("10.0.0.1:1", Some("a")), p("10.0.0.2:1", None)]);
        b.publish(1, vec![p("10.0.0.2:1", None)]);
        assert_eq!(b.version(), 2, "merged list unchanged: 10.0.0.1 still comes from the list");
        let d = b.publish(0, vec![]);
        assert_eq!((d.added.len(), d.removed.len(), b.version()), (0, 1, 3));
    }

    /// The addresses a serve keeps its reserve for follow the list: those already there when
    /// it is fed, every change after, agents only (a STAMP reflector never connects).
    #[test]
    fn the_board_feeds_its_agents_addresses() {
        let b = Board::new(&[Source::List(vec![])]);
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        b.publish(0, vec![Peer::at("10.0.0.1:1".parse().unwrap())]);
        let known = crate::accept::Known::default();
        b.feed(known.clone());
        assert!(known.contains(ip("10.0.0.1")), "the list before the feed");
        assert!(known.contains(ip("::ffff:10.0.0.1")), "v4-mapped is the same address");
        let reflector = Peer { stamp: true, ..Peer::at("10.0.0.9:862".parse().unwrap()) };
        b.publish(0, vec![Peer::at("10.0.0.2:1".parse().unwrap()), reflector]);
        assert!(!known.contains(ip("10.0.0.1")), "gone with the list");
        assert!(known.contains(ip("10.0.0.2")));
        assert!(!known.contains(ip("10.0.0.9")), "a STAMP reflector is no agent");
    }
}
