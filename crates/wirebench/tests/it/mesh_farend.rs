//! A mesh agent's prober against peers that misbehave on its TCP probe connection:
//! one streams valid-looking frames at line rate without end, one answers garbage. The
//! agent keeps probing its other peer in full and its memory stays flat; a connection that
//! carries more frames than probes were sent on it, or garbage, is not a probe stream: it is
//! cut at its first read (at most 16 KiB), counted, and opened again after the probe timeout.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirebench::Shutdown;
use wirebench::mesh::AgentArgs;
use wirebench::mesh::agent::Agent;
use wirebench_core::mesh::api::{MatrixReport, Proto};
use wirebench_core::wire::probe;

use crate::mesh::{get, wait_for};

/// The longest any flood runs, whatever the test does.
const FLOOD_LIMIT: Duration = Duration::from_secs(90);

/// A peer's TCP side that answers every connection with `pattern`, over and over, until
/// stopped (or [`FLOOD_LIMIT`]); counts the bytes the prober took.
struct Peer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    acceptor: Option<JoinHandle<()>>,
}

impl Peer {
    fn start(pattern: Vec<u8>, once: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, written, accepted) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, w, a) = (stop.clone(), written.clone(), accepted.clone());
        let acceptor = std::thread::spawn(move || {
            let end = Instant::now() + FLOOD_LIMIT;
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) || Instant::now() > end {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                a.fetch_add(1, Ordering::Relaxed);
                let (s, w, pattern) = (s.clone(), w.clone(), pattern.clone());
                std::thread::spawn(move || {
                    // A write blocked on a full buffer checks the stop every 100 ms.
                    conn.set_write_timeout(Some(Duration::from_millis(100))).unwrap();
                    while !s.load(Ordering::Relaxed) && Instant::now() < end {
                        match conn.write(&pattern) {
                            Ok(0) => return,
                            Ok(n) => {
                                w.fetch_add(n as u64, Ordering::Relaxed);
                                if once {
                                    // Garbage once, then the connection stays open (its peer closes it).
                                    let mut sink = [0u8; 256];
                                    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                                    while !s.load(Ordering::Relaxed) {
                                        match std::io::Read::read(&mut conn, &mut sink) {
                                            Ok(0) | Err(_) => return,
                                            Ok(_) => {}
                                        }
                                    }
                                    return;
                                }
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => return,
                        }
                    }
                });
            }
        });
        Self { addr, stop, written, accepted, acceptor: Some(acceptor) }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr); // wakes the acceptor
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// 64 KiB of probe frames back to back: each passes the framing check, none is a reply to
/// anything (counted unmatched).
fn frames() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    probe::init(&mut f, 0xf100d, 0);
    f.iter().copied().cycle().take(64 << 10).collect()
}

/// An agent answering probes (the well-behaved peer).
fn good_peer() -> Agent {
    // Its only peer is itself (`--advertise`): it probes nobody.
    let args =
        ["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--advertise", "127.0.0.1:1", "--peers", "127.0.0.1:1"];
    let a = wirebench::flags::parse_mode::<AgentArgs>("agent", &args).expect("flags parse");
    let cfg = wirebench::mesh::AgentConfig::from_args(&a).expect("valid config");
    let quiet: wirebench::discovery::Log = Arc::new(|_| {});
    Agent::start(&cfg, Shutdown::new(), &quiet).expect("agent starts")
}

/// The agent under test, as its own process (so its memory is its own), probing `peers`.
struct Probed {
    child: std::process::Child,
    http: SocketAddr,
    _file: tempfile::NamedTempFile,
}

impl Probed {
    fn start(peers: &str) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), peers).unwrap();
        let peers = file.path().to_str().unwrap();
        let (mut child, line) = crate::mesh::agent_process(&[
            "--advertise",
            "127.0.0.1:2",
            "--peers",
            peers,
            "--window",
            "1s",
            "--timeout",
            "400ms",
            "--rate",
            "20/s",
        ]);
        let http = line.split(", http ").nth(1).and_then(|r| r.split(';').next()).and_then(|a| a.parse().ok());
        let Some(http) = http else {
            let _ = child.kill();
            panic!("no HTTP address in {line:?}");
        };
        Self { child, http, _file: file }
    }

    fn matrix(&self) -> MatrixReport {
        let (status, body) = get(self.http, "/v1/matrix", None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Resident memory, KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Probed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (sent, received) of the cell to `peer` over `proto` in `m`.
fn cell(m: &MatrixReport, peer: SocketAddr, proto: Proto) -> Option<(u64, u64)> {
    m.cells.iter().find(|c| c.peer.addr == peer.to_string() && c.proto == proto).map(|c| (c.sent, c.received))
}

/// `wirebench_mesh_tcp_not_probes_total` of the agent at `http`.
fn not_probes(http: SocketAddr) -> u64 {
    let (s, text) = get(http, "/metrics", None);
    assert_eq!(s, 200);
    text.lines()
        .find_map(|l| l.strip_prefix("wirebench_mesh_tcp_not_probes_total "))
        .and_then(|v| v.parse().ok())
        .expect("the counter is exported")
}

#[test]
fn a_peer_streaming_on_its_probe_connection_neither_stalls_the_prober_nor_grows_it() {
    let flood = Peer::start(frames(), false);
    let good = good_peer();
    let a = Probed::start(&format!("{} name=good\n{} name=flood\n", good.probe_addr(), flood.addr));
    // The flood is on and cut (more frames than probes sent on the connection: not a probe
    // stream), and the good peer answers.
    let first = wait_for(Duration::from_secs(30), "the flood cut twice and the good peer answered", || {
        let m = a.matrix();
        let full = [Proto::Udp, Proto::Tcp].iter().all(|&p| cell(&m, good.probe_addr(), p).is_some_and(|(_, r)| r > 0));
        (full && not_probes(a.http) >= 2 && flood.written() > 1 << 20).then_some(m.window.map(|w| w.index))
    });
    let (rss0, bytes0, cut0) = (a.rss_kib(), flood.written(), not_probes(a.http));
    // Three more windows, each closed while the flood went on: the good peer probed in full.
    let mut seen = vec![first];
    let mut totals = [(0, 0); 2];
    for _ in 0..3 {
        let m = wait_for(Duration::from_secs(20), "the next window", || {
            let m = a.matrix();
            (!seen.contains(&m.window.map(|w| w.index))).then_some(m)
        });
        seen.push(m.window.map(|w| w.index));
        for (t, p) in totals.iter_mut().zip([Proto::Udp, Proto::Tcp]) {
            let (sent, received) = cell(&m, good.probe_addr(), p).expect("the good peer is probed");
            assert!(sent > 0, "{p:?} to the good peer: nothing sent in {m:?}");
            *t = (t.0 + sent, t.1 + received);
        }
    }
    for ((sent, received), p) in totals.into_iter().zip([Proto::Udp, Proto::Tcp]) {
        // 20/s over three 1 s windows, 60 probes: a prober the flood stalls sends a few, or
        // none; a busy test machine delays some, never half.
        assert!(sent >= 30 && received * 4 >= sent * 3, "{p:?} to the good peer: {received}/{sent} in 3 windows");
    }
    let (rss1, written, cut1) = (a.rss_kib(), flood.written() - bytes0, not_probes(a.http));
    // Each new connection is flooded again, and cut again after the probe timeout.
    assert!(cut1 > cut0 && flood.accepted.load(Ordering::Relaxed) > 2, "{cut0} -> {cut1}");
    eprintln!("flood: {written} bytes offered, connection cut {cut0} -> {cut1} times; RSS {rss0} -> {rss1} KiB");
    // An agent holds about 10 MB; whatever the flood offered went through 16 KiB reads.
    assert!(
        rss1 < rss0 + (16 << 10) && rss1 < 64 << 10,
        "memory grew from {rss0} KiB to {rss1} KiB while {written} bytes were offered"
    );
    good.stop();
}

#[test]
fn a_peer_answering_garbage_is_dropped_and_counted() {
    let junk = Peer::start(vec![0x55; 1024], true);
    let a = Probed::start(&format!("{} name=junk\n", junk.addr));
    // Each connection is refused at its first frame and opened again for a probe after the
    // probe timeout.
    wait_for(Duration::from_secs(20), "two probe connections dropped", || (not_probes(a.http) >= 2).then_some(()));
    assert!(junk.accepted.load(Ordering::Relaxed) >= 2);
    assert!(junk.written() >= 2 * 1024, "garbage on each connection");
}
