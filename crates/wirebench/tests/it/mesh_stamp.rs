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
use wirebench::serve::stamp::StampArgs;
use wirebench_core::mesh::api::{MatrixReport, PeersReport, Proto};
use wirebench_core::report::{MeshResults, Report, Results};

use crate::mesh::{agent_config, get, quiet, wait_for};
use crate::support::{assert_valid_report, read_json, wirebench};

const STAMP_PORT: u16 = 8620;

/// A `serve --stamp` on `ip` (its reflector on `ip:8620`), with these `--stamp-*` flags.
fn reflector(ip: &str, flags: &[&str]) -> wirebench::serve::Server {
    let at = format!("{ip}:{STAMP_PORT}");
    let mut args = vec!["--stamp", &at];
    args.extend_from_slice(flags);
    let a = wirebench::cli::parse_mode::<StampArgs>("serve", &args).expect("flags parse");
    let cfg = wirebench::serve::Config {
        listen: format!("{ip}:0").parse().unwrap(),
        stamp: a.config(ip.parse().unwrap()).expect("a valid reflector"),
        ..wirebench::serve::Config::loopback()
    };
    wirebench::serve::Server::start(&cfg, Shutdown::new()).expect("serve starts")
}

/// Agents `n1`, `n2`, … on 127.0.28.1, .2, … with a peer file listing each other and
/// `stamp` (its lines as written).
struct Pair {
    agents: Vec<Agent>,
    _file: tempfile::NamedTempFile,
}

impl Pair {
    fn start(n: usize, stamp: &[&str]) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let agents: Vec<Agent> = (1..=n)
            .map(|i| {
                let (name, listen) = (format!("n{i}"), format!("127.0.28.{i}:0"));
                let http = format!("127.0.28.{i}:0");
                let cfg = agent_config(&[
                    "--listen",
                    &listen,
                    "--http",
                    &http,
                    "--name",
                    &name,
                    "--peers",
                    &path,
                    "--refresh",
                    "1s",
                    "--window",
                    "1s",
                    "--timeout",
                    "400ms",
                    "--rate",
                    "30/s",
                ]);
                Agent::start(&cfg, Shutdown::new(), &quiet()).expect("agent starts")
            })
            .collect();
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
    let pair = Pair::start(2, &[&format!("stamp:127.0.28.3:{STAMP_PORT} name=r1")]);
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
        assert!(c.sent >= 5 && c.lost == 0 && c.verdict == "good", "{c:?}");
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
    assert!(text.contains("wirebench_mesh_replies_unmatched_total 0"), "nothing dropped: {text}");
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
        2,
        &[
            &format!("stamp:127.0.28.4:{STAMP_PORT} name=r2"),
            &format!("stamp:127.0.28.5:{STAMP_PORT} name=r3 zone=edge"),
        ],
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
    assert!(good.lost == 0 && good.rtt.is_some() && good.verdict == "good", "{good:?}");
    assert!(lost.lost == lost.sent && lost.sent >= 5 && lost.rtt.is_none() && lost.verdict == "bad", "{lost:?}");
    for src in ["n1", "n2"] {
        let c = cell(src, "r3");
        assert!(c.lost == c.sent && c.verdict == "bad", "{c:?}");
    }
    assert!(r2.counters().stamp_not_allowed > 0 && r3.counters().stamp_reflected == 0);
    r2.stop();
    r3.stop();
}
