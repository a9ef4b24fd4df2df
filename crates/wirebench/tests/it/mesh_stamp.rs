//! STAMP reflectors as mesh members (`--peers stamp:HOST[:PORT]`) on loopback: two agents
//! probe `serve --stamp` reflectors run in-process; each reflector's column is measured like
//! any peer's, its row is empty and said so, and a reflector that leaves one agent's probes
//! unanswered (its allow-list) or every agent's is named by the verdict.
//!
//! Addresses: 127.0.28.0/24, used by no other test.

use std::path::Path;
use std::time::Duration;

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::stamp::StampArgs;
use wirebench_core::mesh::api::{MatrixReport, PeersReport, Proto};
use wirebench_core::report::{MeshResults, Report, Results};

use crate::mesh::{get, start_agent, wait_for};
use crate::support::{assert_valid_report, read_json, wirebench};

const STAMP_PORT: u16 = 8620;

/// A `serve --stamp` on `ip` (its reflector on `ip:8620`), with these `--stamp-*` flags.
fn reflector(ip: &str, flags: &[&str]) -> wirebench::serve::Server {
    let at = format!("{ip}:{STAMP_PORT}");
    let mut args = vec!["--stamp", &at];
    args.extend_from_slice(flags);
    let a = wirebench::flags::parse_mode::<StampArgs>("serve", &args).expect("flags parse");
    let cfg = wirebench::serve::Config {
        listen: format!("{ip}:0").parse().unwrap(),
        stamp: a.config(ip.parse().unwrap()).expect("a valid reflector"),
        ..wirebench::serve::Config::loopback()
    };
    wirebench::serve::Server::start(&cfg, Shutdown::new()).expect("serve starts")
}

/// Agents `n1`, `n2`, … on `ips`, with these extra flags and a peer file listing each
/// other and `stamp` (its lines as written).
struct Pair {
    agents: Vec<Agent>,
    _file: tempfile::NamedTempFile,
}

impl Pair {
    fn start(ips: &[&str], stamp: &[&str], extra: &[&str]) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let agents: Vec<Agent> =
            (1..=ips.len()).map(|i| start_agent(&format!("n{i}"), ips[i - 1], &path, extra)).collect();
        let mut lines: Vec<String> =
            agents.iter().enumerate().map(|(i, a)| format!("{} name=n{}", a.probe_addr(), i + 1)).collect();
        lines.extend(stamp.iter().map(|l| (*l).to_owned()));
        let text = lines.join("\n") + "\n";
        std::fs::write(file.path(), text).unwrap();
        Self { agents, _file: file }
    }

    fn matrix(&self, i: usize) -> MatrixReport {
        let (status, body) = get(self.agents[i].http_addr(), "/v1/matrix", None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits until every agent's latest window has `cells` cells, each past `min` probes.
    fn wait_cells(&self, cells: usize, min: u64) {
        for i in 0..self.agents.len() {
            wait_for(Duration::from_secs(30), "a full window", || {
                let m = self.matrix(i);
                (m.cells.len() == cells && m.cells.iter().all(|c| c.sent >= min)).then_some(())
            });
        }
    }

    fn urls(&self) -> Vec<String> {
        self.agents.iter().map(|a| format!("http://{}", a.http_addr())).collect()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for a in self.agents.drain(..) {
            a.stop();
        }
    }
}

fn status(urls: &[String], json: &Path) -> (u8, String, MeshResults) {
    let mut all: Vec<&str> = vec!["mesh", "status", "--max-p99", "1s", "--json", json.to_str().unwrap()];
    all.extend(urls.iter().map(String::as_str));
    let r = wirebench(&all);
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    let v = read_json(json);
    assert_valid_report(&v);
    let report: Report = serde_json::from_value(v).unwrap();
    let Results::Mesh(m) = report.results else { panic!("a mesh report") };
    (r.code, r.out, m)
}

/// Two agents and a router-like reflector: the reflector's column holds round trips from
/// both agents (UDP only, however many transports the agents probe each other over), its
/// row is empty and labelled, the verdict holds nothing against it, and /metrics carries
/// its cells like any peer's.
#[test]
fn a_stamp_reflector_has_a_measured_column_and_an_empty_row() {
    let router = reflector("127.0.28.3", &[]);
    let pair = Pair::start(&["127.0.28.1", "127.0.28.2"], &[&format!("stamp:127.0.28.3:{STAMP_PORT} name=r1")], &[]);
    // n2 (udp, tcp) and r1 (udp).
    pair.wait_cells(3, 5);
    let r1 = format!("127.0.28.3:{STAMP_PORT}");
    let row = pair.matrix(0);
    let cell = row.cells.iter().find(|c| c.peer.addr == r1).expect("a cell to r1");
    assert!(cell.peer.stamp && cell.proto == Proto::Udp);
    assert!(!row.cells.iter().any(|x| x.peer.addr == r1 && x.proto == Proto::Tcp), "STAMP is UDP only");
    let peers: PeersReport = serde_json::from_str(&get(pair.agents[0].http_addr(), "/v1/peers", None).1).unwrap();
    assert!(peers.peers.iter().any(|p| p.peer.addr == r1 && p.peer.stamp && p.probed), "{peers:?}");

    let dir = tempfile::tempdir().unwrap();
    let (_, out, m) = wait_for(Duration::from_secs(20), "a healthy matrix", || {
        let r = status(&pair.urls(), &dir.path().join("m.json"));
        (r.0 == 0).then_some(r)
    });
    assert!(out.contains("verdict: no problems"), "{out}");
    assert!(out.contains("mesh: 3 nodes, 2 reporting, 1 STAMP reflector"), "{out}");
    assert!(out.contains(&format!("r1 ({r1}): stamp reflector, probes nobody")), "{out}");
    let i = m.nodes.iter().position(|n| n.label() == "r1").expect("r1 is a node");
    assert!(m.nodes[i].stamp && !m.nodes[i].reported && m.nodes[i].error.is_none());
    assert!(!m.cells.iter().any(|c| c.src == i), "its row is empty");
    let column: Vec<_> = m.cells.iter().filter(|c| c.dst == i).collect();
    assert_eq!(column.len(), 2, "one cell from each agent");
    for c in &column {
        let rtt = c.rtt.expect("answered");
        assert_eq!(c.proto, "udp");
        assert_eq!(rtt.count + c.lost, c.sent);
        assert!(c.sent >= 5 && c.lost == 0 && c.verdict == wirebench_core::report::CellJudged::Good, "{c:?}");
        assert!(rtt.min_ns > 0 && rtt.min_ns <= rtt.p50_ns && rtt.p99_ns < 400_000_000, "{rtt:?}");
        eprintln!(
            "r1's column: {} -> r1: sent {} lost {} min {} p50 {} p99 {} max {} ns",
            m.nodes[c.src].label(),
            c.sent,
            c.lost,
            rtt.min_ns,
            rtt.p50_ns,
            rtt.p99_ns,
            rtt.max_ns
        );
    }
    // r1's rows of the heatmaps are empty: the label and its own diagonal, nothing else.
    let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("r1 ") && !l.contains("stamp")).collect();
    assert_eq!(rows.len(), 6, "p50, p99, loss for udp and tcp: {out}");
    for row in rows {
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["r1", "."], "{out}");
    }
    // Every round trip in the column is a reflection the reflector counted.
    let received: u64 = column.iter().map(|c| c.rtt.unwrap().count).sum();
    assert!(router.counters().stamp_reflected >= received, "{received} received");
    // /metrics: r1's cells as any peer's.
    let (code, text) = get(pair.agents[0].http_addr(), "/metrics", None);
    assert_eq!(code, 200);
    let l = format!("peer=\"{r1}\",proto=\"udp\"");
    assert!(text.contains(&format!("wirebench_mesh_peer_window_sent{{{l}}}")), "{text}");
    assert!(text.contains(&format!("wirebench_mesh_peer_rtt_seconds{{{l},quantile=\"0.5\"}}")), "{text}");
    // Reflections are matched to their probes: at most a late one or two on a busy machine.
    let unmatched: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("wirebench_mesh_replies_unmatched_total "))
        .and_then(|v| v.parse().ok())
        .expect("the unmatched counter");
    assert!(unmatched * 10 <= received, "{unmatched} unmatched of {received}: {text}");
    let info = text.lines().find(|l| l.starts_with("wirebench_mesh_peer_info") && l.contains(&r1)).expect("r1's info");
    assert!(info.contains("node=\"r1\"") && info.contains("kind=\"stamp\""), "{info}");
    router.stop();
}

/// Two agents and two reflectors: r2 answers only n1 (its allow-list), r3 answers nobody.
/// n2 -> r2 loses every probe and is a path; r3's whole column is lost and names it.
#[test]
fn a_stamp_reflector_that_loses_probes_is_named() {
    let r2 = reflector("127.0.28.4", &["--stamp-allow", "127.0.28.1"]);
    let r3 = reflector("127.0.28.5", &["--stamp-allow", "127.0.28.250"]);
    let pair = Pair::start(
        &["127.0.28.1", "127.0.28.2"],
        &[
            &format!("stamp:127.0.28.4:{STAMP_PORT} name=r2"),
            &format!("stamp:127.0.28.5:{STAMP_PORT} name=r3 zone=edge"),
        ],
        &[],
    );
    pair.wait_cells(4, 5);
    let dir = tempfile::tempdir().unwrap();
    let (code, out, m) = wait_for(Duration::from_secs(20), "r2 and r3 named", || {
        let r = status(&pair.urls(), &dir.path().join("m.json"));
        (r.1.contains("verdict: unicast path n2 -> r2") && r.1.contains("verdict: unicast stamp reflector r3"))
            .then_some(r)
    });
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("unicast stamp reflector r3: column bad (2/2)"), "{out}");
    assert_eq!(m.problems.len(), 2, "nothing else: {out}");
    let at = |name: &str| m.nodes.iter().position(|n| n.label() == name).unwrap();
    let cell = |src: &str, dst: &str| m.cells.iter().find(|c| c.src == at(src) && c.dst == at(dst)).unwrap();
    let (good, lost) = (cell("n1", "r2"), cell("n2", "r2"));
    assert!(
        good.lost == 0 && good.rtt.is_some() && good.verdict == wirebench_core::report::CellJudged::Good,
        "{good:?}"
    );
    assert!(
        lost.lost == lost.sent
            && lost.sent >= 5
            && lost.rtt.is_none()
            && lost.verdict == wirebench_core::report::CellJudged::Bad,
        "{lost:?}"
    );
    for src in ["n1", "n2"] {
        let c = cell(src, "r3");
        assert!(c.lost == c.sent && c.verdict == wirebench_core::report::CellJudged::Bad, "{c:?}");
    }
    assert!(r2.counters().stamp_not_allowed > 0 && r3.counters().stamp_reflected == 0);
    r2.stop();
    r3.stop();
}

/// A reflector answering each (authenticated) test packet with garbage, a reflection of
/// another session, one naming a probe never sent (both signed with the right key) and one
/// signed with another key: all dropped and counted (unmatched, unauthenticated), the probes
/// lost. Beside it an authenticated reflector (`--stamp-key`) probed with its key
/// (`--stamp-peer-key`) answers in full.
#[test]
fn forged_reflections_are_dropped_and_counted_and_keyed_ones_answered() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use wirebench_core::wire::stamp::{ErrorEstimate, Key, Reflector, TsFormat};

    const KEY: &str = "00112233445566778899aabbccddeeff";
    let keyed = reflector("127.0.28.11", &["--stamp-key", KEY]);
    let sock = std::net::UdpSocket::bind(("127.0.28.12", STAMP_PORT)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let forger = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let signer = |k| Reflector { key: Some(k), format: TsFormat::Ntp, error: ErrorEstimate(1) };
            let (right, wrong) = (signer(Key::from_hex(KEY).unwrap()), signer(Key::new(&[9; 16]).unwrap()));
            let (mut buf, mut out) = ([0u8; 2048], [0u8; 2048]);
            let mut answered = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let Ok(tp) = right.check(&buf[..n]) else { continue };
                sock.send_to(b"not a STAMP packet", from).unwrap();
                let mut reply = |req: &[u8], r: &Reflector| {
                    let len = r.reflect(req, &mut out, tp.seq, 1, 64, || 2).unwrap();
                    sock.send_to(&out[..len], from).unwrap();
                };
                let mut other = buf[..n].to_vec();
                other[26] ^= 0x55; // another session's SSID (authenticated layout)
                reply(&other, &right);
                let mut other = buf[..n].to_vec();
                other[0] ^= 0x80; // a sender sequence number never sent
                reply(&other, &right);
                reply(&buf[..n], &wrong);
                answered += 1;
            }
            answered
        })
    };
    let pair = Pair::start(
        &["127.0.28.10"],
        &[
            &format!("stamp:127.0.28.11:{STAMP_PORT} name=keyed"),
            &format!("stamp:127.0.28.12:{STAMP_PORT} name=forger"),
        ],
        &["--stamp-peer-key", KEY],
    );
    pair.wait_cells(2, 5);
    let m = pair.matrix(0);
    let cell = |ip: &str| m.cells.iter().find(|c| c.peer.addr.starts_with(ip)).unwrap();
    let (good, bad) = (cell("127.0.28.11:"), cell("127.0.28.12:"));
    assert!(good.sent >= 5 && good.lost == 0 && good.rtt.is_some(), "{good:?}");
    assert!(bad.sent >= 5 && bad.received == 0 && bad.lost == bad.sent, "{bad:?}");
    assert!(keyed.counters().stamp_auth_failures == 0 && keyed.counters().stamp_reflected > 0);
    stop.store(true, Ordering::Relaxed);
    let answered = forger.join().unwrap();
    let counter = |text: &str, name: &str| -> u64 {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0) as u64
    };
    let (unmatched, unauthenticated) = wait_for(Duration::from_secs(10), "every forgery counted", || {
        let text = get(pair.agents[0].http_addr(), "/metrics", None).1;
        let u = counter(&text, "wirebench_mesh_replies_unmatched_total ");
        let a = counter(&text, "wirebench_mesh_unauthenticated_total{direction=\"reply\"} ");
        (a == answered && u >= 3 * answered).then_some((u, a))
    });
    assert!(answered >= bad.sent, "{answered} answered");
    eprintln!("forger answered {answered} probes: {unmatched} unmatched, {unauthenticated} unauthenticated");
    keyed.stop();
}
