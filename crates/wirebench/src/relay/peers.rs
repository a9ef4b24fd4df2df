//! Peers from a list or a file, with DNS names resolved and re-resolved on a thread of
//! their own (a resolver can block for seconds; the relay's loop never waits on it).

use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs as _};
use std::sync::mpsc;
use std::time::Duration;

use super::config::{PeerSource, peer_entry};
use crate::shutdown::{POLL, Shutdown};

/// Most peers one relay keeps (a name that resolves to more is cut here, with a warning).
pub(crate) const MAX_PEERS: usize = 1024;

/// The peer addresses `source` names now, sorted, without `me`, at most [`MAX_PEERS`]; and
/// the entries that did not resolve (or did not parse, in a file).
pub(crate) fn resolve(source: &PeerSource, me: SocketAddrV4) -> (Vec<SocketAddrV4>, Vec<String>) {
    let entries: Vec<String> = match source {
        PeerSource::List(l) => l.clone(),
        PeerSource::File(p) => match std::fs::read_to_string(p) {
            Ok(text) => text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .take(MAX_PEERS)
                .map(str::to_owned)
                .collect(),
            Err(e) => return (Vec::new(), vec![format!("{}: {e}", p.display())]),
        },
    };
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for e in &entries {
        let Ok((host, port)) = peer_entry(e) else {
            failed.push(format!("{e}: not host[:port]"));
            continue;
        };
        match (host.as_str(), port).to_socket_addrs() {
            Ok(addrs) => out.extend(addrs.filter_map(|a| match a {
                SocketAddr::V4(v4) if v4 != me && !v4.ip().is_unspecified() && !v4.ip().is_multicast() => Some(v4),
                _ => None,
            })),
            Err(err) => failed.push(format!("{e}: {err}")),
        }
    }
    out.sort_unstable();
    out.dedup();
    out.truncate(MAX_PEERS);
    (out, failed)
}

/// Re-resolves `source` every `every` on its own thread and sends each list that differs
/// from the last; ends with the stop signal (waking every [`POLL`]).
pub(crate) fn watch(
    source: PeerSource,
    me: SocketAddrV4,
    every: Duration,
    first: Vec<SocketAddrV4>,
    stop: Shutdown,
) -> mpsc::Receiver<Vec<SocketAddrV4>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("relay-peers".into())
        .spawn(move || {
            let mut last = first;
            loop {
                let mut waited = Duration::ZERO;
                while waited < every {
                    if stop.is_set() {
                        return;
                    }
                    std::thread::sleep(POLL);
                    waited += POLL;
                }
                let (now, _) = resolve(&source, me);
                if now != last {
                    if tx.send(now.clone()).is_err() {
                        return;
                    }
                    last = now;
                }
            }
        })
        .expect("spawn the peer resolver");
    rx
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn lists_and_files_resolve_sorted_without_me() {
        let me = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7880);
        let src = PeerSource::List(vec!["10.0.0.3".into(), "10.0.0.1".into(), "10.0.0.2:9".into(), "10.0.0.3".into()]);
        let (p, failed) = resolve(&src, me);
        assert_eq!(p, ["10.0.0.2:9".parse::<SocketAddrV4>().unwrap(), "10.0.0.3:7880".parse().unwrap()]);
        assert!(failed.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("peers");
        std::fs::write(&f, "# relays\n10.0.0.4 # four\n\nbad entry\nlocalhost:7\n").unwrap();
        let (p, failed) = resolve(&PeerSource::File(f), me);
        assert_eq!(p, ["10.0.0.4:7880".parse::<SocketAddrV4>().unwrap(), "127.0.0.1:7".parse().unwrap()]);
        assert_eq!(failed, ["bad entry: not host[:port]"]);
    }
}
