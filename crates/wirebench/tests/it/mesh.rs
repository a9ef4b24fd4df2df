//! `wirebench mesh` on loopback: agents in-process filling the matrix, every view of a window
//! agreeing, peers coming and going from a file, a stopped agent named as a node down,
//! forged probes and wrong tokens counted and dropped, the HTTP side's bounds, bad
//! configuration, and SIGTERM.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::mesh::{AgentArgs, AgentConfig};
use wirebench_core::mesh::api::{MatrixReport, PeersReport, Proto};
use wirebench_core::mesh::plan::{SERIES_PER_AGENT, SERIES_PER_PEER, SERIES_PER_PEER_TRANSPORT};
use wirebench_core::report::{MeshResults, Report, Results};

use crate::support::{assert_valid_report, read_json, wirebench};

/// A blocking `GET` with a bearer token: (status, body).
pub(crate) fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("agent HTTP answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let chunked = head.lines().any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked");
    (status, if chunked { dechunk(body) } else { body.to_owned() })
}

/// A chunked body (Prometheus sends larger answers so), joined.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16).expect("a chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].strip_prefix("\r\n").expect("a chunk ends with CRLF");
    }
    out
}

/// `get`, or `None` when the connection fails (for conditions polled while the agent is
/// busy refusing connections).
pub(crate) fn try_get(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    raw.split_whitespace().nth(1).and_then(|c| c.parse().ok())
}

/// Polls `f` until it gives a value, at most `limit` (a condition, not a sleep).
pub(crate) fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

pub(crate) fn agent_config(args: &[&str]) -> AgentConfig {
    let a = wirebench::flags::parse_mode::<AgentArgs>("agent", args).expect("flags parse");
    AgentConfig::from_args(&a).expect("valid config")
}

pub(crate) fn quiet() -> wirebench::discovery::Log {
    Arc::new(|_| {})
}

/// Agent `name` on `ip` (probe and HTTP ports from the kernel), its peers read from the file
/// at `peers`: 1 s windows and refresh, a 400 ms timeout, 30 probes a second, then `extra`.
pub(crate) fn start_agent(name: &str, ip: &str, peers: &str, extra: &[&str]) -> Agent {
    let listen = format!("{ip}:0");
    let mut args = vec![
        "--listen",
        &listen,
        "--http",
        &listen,
        "--name",
        name,
        "--peers",
        peers,
        "--refresh",
        "1s",
        "--window",
        "1s",
        "--timeout",
        "400ms",
        "--rate",
        "30/s",
    ];
    args.extend_from_slice(extra);
    let cfg = agent_config(&args);
    Agent::start(&cfg, Shutdown::new(), &quiet()).expect("agent starts")
}

/// Three agents on 127.0.0.1 finding each other through a peer file written after they
/// started (discovery adds peers without a restart).
pub(crate) struct Fleet {
    agents: Vec<Option<Agent>>,
    file: tempfile::NamedTempFile,
    token: Option<String>,
}

impl Fleet {
    pub(crate) fn start(n: usize, extra: &[&str]) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let agents: Vec<Option<Agent>> =
            (1..=n).map(|i| Some(start_agent(&format!("n{i}"), "127.0.0.1", &path, extra))).collect();
        let token = extra.iter().position(|a| *a == "--token").map(|i| extra[i + 1].to_owned());
        let f = Self { agents, file, token };
        f.write_peers(&(0..n).collect::<Vec<_>>());
        f
    }

    pub(crate) fn agent(&self, i: usize) -> &Agent {
        self.agents[i].as_ref().expect("running")
    }

    fn write_peers(&self, which: &[usize]) {
        let text = which
            .iter()
            .map(|&i| {
                format!(
                    "{} name=n{}\n",
                    self.agents[i].as_ref().map_or_else(String::new, |a| a.probe_addr().to_string()),
                    i + 1
                )
            })
            .collect::<Vec<_>>()
            .concat();
        std::fs::write(self.file.path(), text).unwrap();
    }

    pub(crate) fn matrix(&self, i: usize) -> MatrixReport {
        let (status, body) = get(self.agent(i).http_addr(), "/v1/matrix", self.token.as_deref());
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits until every running agent's latest window has a cell per peer and transport,
    /// each with replies.
    pub(crate) fn wait_full(&self, peers: usize) {
        for i in 0..self.agents.len() {
            if self.agents[i].is_none() {
                continue;
            }
            wait_for(Duration::from_secs(30), "a full window", || {
                let m = self.matrix(i);
                (m.cells.len() == 2 * peers && m.cells.iter().all(|c| c.received > 0)).then_some(())
            });
        }
    }

    fn urls(&self) -> Vec<String> {
        self.agents.iter().flatten().map(|a| format!("http://{}", a.http_addr())).collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for a in self.agents.iter_mut().filter_map(Option::take) {
            a.stop();
        }
    }
}

fn status(args: &[String], json: &Path) -> (u8, String, Report) {
    let mut all: Vec<&str> = vec!["mesh", "status", "--max-p99", "1s", "--json", json.to_str().unwrap()];
    all.extend(args.iter().map(String::as_str));
    let r = wirebench(&all);
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    let v = read_json(json);
    assert_valid_report(&v);
    (r.code, r.out, serde_json::from_value(v).unwrap())
}

#[test]
fn three_agents_fill_the_matrix_and_every_view_agrees() {
    let fleet = Fleet::start(3, &[]);
    fleet.wait_full(2);
    let dir = tempfile::tempdir().unwrap();
    let (code, out, report) = status(&fleet.urls(), &dir.path().join("m.json"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict: no problems") && out.contains("udp p50 round trip"), "{out}");
    let Results::Mesh(m) = &report.results else { panic!("a mesh report") };
    assert_eq!(m.nodes.len(), 3, "{out}");
    assert!(m.nodes.iter().all(|n| n.reported));
    assert_eq!(m.cells.len(), 12, "3 x 2 peers x udp, tcp");
    for c in &m.cells {
        let r = c.rtt.expect("answered");
        assert_eq!(r.count + c.lost, c.sent, "sent = received + lost");
        assert_eq!(c.lost, 0, "loopback loses nothing");
    }
    // The fleet's merged histogram holds every reply of every cell.
    let replies: u64 = m.cells.iter().filter(|c| c.proto == "udp").map(|c| c.rtt.unwrap().count).sum();
    assert_eq!(m.combined.iter().find(|c| c.proto == "udp").unwrap().latency.summary.count, replies);

    // /metrics and /v1/matrix of one window agree to the probe and the nanosecond.
    let a = fleet.agent(0);
    let (m1, text, m2) = wait_for(Duration::from_secs(10), "a scrape inside one window", || {
        let m1 = fleet.matrix(0);
        let (s, text) = get(a.http_addr(), "/metrics", None);
        assert_eq!(s, 200);
        let m2 = fleet.matrix(0);
        (m1.window == m2.window && text.contains("wirebench_mesh_hiccup_seconds")).then_some((m1, text, m2))
    });
    assert_eq!(m1, m2);
    assert!(text.contains("wirebench_mesh_tcp_not_probes_total 0"), "no probe connection cut: {text}");
    // Each cell's histogram is plain V2 (cookie 0x1c849313), not V2 + DEFLATE (0x1c849314):
    // a window's hundreds of sparse cells each paid a fresh compressor and saved nothing.
    for c in &m1.cells {
        use base64::Engine as _;
        let b64 = c.histogram.as_deref().expect("an answered cell has a histogram");
        let raw = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert_eq!(raw[..4], 0x1c84_9313u32.to_be_bytes(), "{} {}: plain V2", c.peer.addr, c.proto.name());
    }
    for c in &m1.cells {
        let l = format!("peer=\"{}\",proto=\"{}\"", c.peer.addr, c.proto.name());
        assert!(text.contains(&format!("wirebench_mesh_peer_window_sent{{{l}}} {}.0", c.sent)), "{l}\n{text}");
        let p50 = c.rtt.unwrap().p50_ns as f64 / 1e9;
        let line = text
            .lines()
            .find(|x| x.starts_with(&format!("wirebench_mesh_peer_rtt_seconds{{{l},quantile=\"0.5\"}}")))
            .unwrap();
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - p50).abs() < 1e-12, "{line} vs {p50}");
    }
    // The series count the docs' arithmetic uses: 61 per agent (the stall meter's 3 among them), 1 + 8 x 2 per peer.
    let series = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count() as u64;
    assert_eq!(series, SERIES_PER_AGENT + 2 * (SERIES_PER_PEER + 2 * SERIES_PER_PEER_TRANSPORT), "{text}");
    // The report renders as a heatmap page.
    let html = dir.path().join("m.html");
    let r = wirebench(&["report", dir.path().join("m.json").to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.contains("class=\"heat\"") && page.contains("n1 -&gt; n2 udp") && !page.contains("<script"));
}

/// This network namespace's IPv4 UDP sockets from `/proc/net/udp`: (local port, remote
/// address; `None` when not connected).
fn udp_sockets() -> Vec<(u16, Option<SocketAddr>)> {
    let addr = |f: &str| -> SocketAddr {
        let (ip, port) = f.split_once(':').unwrap();
        // The address as the kernel holds it (network order), printed as a native u32.
        let ip = std::net::Ipv4Addr::from(u32::from_str_radix(ip, 16).unwrap().to_le_bytes());
        SocketAddr::new(ip.into(), u16::from_str_radix(port, 16).unwrap())
    };
    std::fs::read_to_string("/proc/net/udp")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, remote) = (addr(f.get(1)?), addr(f.get(2)?));
            Some((local.port(), (remote.port() != 0).then_some(remote)))
        })
        .collect()
}

/// The local port with an unconnected socket and sockets connected to exactly `peers`.
fn port_connected_to(peers: &[SocketAddr]) -> Option<u16> {
    let all = udp_sockets();
    let mut ports: Vec<u16> = all.iter().map(|s| s.0).collect();
    ports.sort_unstable();
    ports.dedup();
    ports.into_iter().find(|&p| {
        let mut to: Vec<SocketAddr> = all.iter().filter(|s| s.0 == p).filter_map(|s| s.1).collect();
        to.sort_unstable();
        let mut want = peers.to_vec();
        want.sort_unstable();
        all.iter().filter(|s| s.0 == p && s.1.is_none()).count() == 1 && to == want
    })
}

/// Each UDP target has its own socket connected to the peer (as `ping`'s is), on
/// the shared socket's port, opened when the peer is added and closed when it is dropped.
#[test]
fn each_udp_peer_has_its_own_connected_socket_on_the_shared_port() {
    let fleet = Fleet::start(3, &[]);
    fleet.wait_full(2);
    let (n2, n3) = (fleet.agent(1).probe_addr(), fleet.agent(2).probe_addr());
    let port = wait_for(Duration::from_secs(10), "n1's sockets to n2 and n3", || port_connected_to(&[n2, n3]));
    fleet.write_peers(&[0, 1]);
    wait_for(Duration::from_secs(10), "the socket to n3 closed", || port_connected_to(&[n2]).filter(|&p| p == port));
    fleet.write_peers(&[0, 1, 2]);
    wait_for(Duration::from_secs(10), "a socket to n3 again", || port_connected_to(&[n2, n3]).filter(|&p| p == port));
    fleet.wait_full(2);
}

#[test]
fn peers_come_and_go_and_a_stopped_agent_is_a_node_down() {
    let mut fleet = Fleet::start(3, &[]);
    fleet.wait_full(2);
    // n3 leaves the list: n1 drops it without a restart.
    fleet.write_peers(&[0, 1]);
    let peers =
        |f: &Fleet| -> PeersReport { serde_json::from_str(&get(f.agent(0).http_addr(), "/v1/peers", None).1).unwrap() };
    wait_for(Duration::from_secs(10), "n3 dropped", || (peers(&fleet).peers.len() == 1).then_some(()));
    fleet.write_peers(&[0, 1, 2]);
    wait_for(Duration::from_secs(10), "n3 back", || (peers(&fleet).peers.len() == 2).then_some(()));
    fleet.wait_full(2);
    // n3 stops (still listed): its row is gone, the others lose every probe to it.
    let urls = fleet.urls();
    fleet.agents[2].take().unwrap().stop();
    let dir = tempfile::tempdir().unwrap();
    let (code, out, report) = wait_for(Duration::from_secs(20), "n3 named down", || {
        let r = status(&urls, &dir.path().join("m.json"));
        r.1.contains("unicast node n3: agent unreachable").then_some(r)
    });
    assert_eq!(code, 3, "{out}");
    let Results::Mesh(m) = &report.results else { panic!() };
    let n3 = m.nodes.iter().position(|n| n.label() == "n3").unwrap();
    assert!(!m.nodes[n3].reported && m.nodes[n3].error.is_some());
    assert_eq!(m.problems.len(), 1, "{out}");
    // The others keep going: n1 <-> n2 answered in full.
    for c in m.cells.iter().filter(|c| c.dst != n3) {
        assert_eq!((c.lost, c.verdict.as_str()), (0, "good"), "{out}");
    }
}

/// `mesh status` asked only agents that do not answer (not "1 nodes, 0
/// reporting" with "verdict: no problems", exit 0): every view names the unreachable agent
/// and says there is no matrix, and the exit code is 1.
#[test]
fn a_status_no_agent_answers_names_it_in_every_view_and_exits_1() {
    // A port nobody listens on (bound, then closed): connection refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("http://{dead}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let r = wirebench(&["mesh", "status", &url, "--timeout", "2s", "--json", json.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("mesh: 1 node, 0 reporting"), "{}", r.out);
    // an agent known only by its URL is named once
    let line = r.out.lines().find(|l| l.starts_with("  no row from ")).expect("the unreachable agent's line");
    assert_eq!(line.matches("http://").count(), 2, "its URL once, and the cause's: {line}");
    assert!(r.out.contains(&format!("verdict: agent {url}/ unreachable: ")), "{}", r.out);
    assert!(r.out.contains("verdict: no agent gave its row: no matrix to judge"), "{}", r.out);
    assert!(!r.out.contains("no problems"), "{}", r.out);
    let m = saved_mesh(&json);
    assert_eq!(problem_kinds(&m), [("agents", "unreachable"), ("agents", "no_matrix")]);
    // The saved report, as text and as HTML, says the same.
    let text = wirebench(&["report", "-v", json.to_str().unwrap()]);
    assert_eq!(text.code, 0, "{text:?}");
    for p in &m.problems {
        assert!(text.out.contains(&format!("verdict: {}", p.summary)), "{}", text.out);
    }
    assert!(!text.out.contains("no problems"), "{}", text.out);
    let html = dir.path().join("m.html");
    let page = wirebench(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{page:?}");
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.contains("no matrix to judge") && page.contains("unreachable"), "{page}");
    assert!(!page.contains("no problems"), "{page}");
}

/// One agent of two answers, the other's API is not there: the matrix is made (exit 3,
/// not 0), and the verdict names the agent that did not answer.
#[test]
fn a_status_with_an_unreachable_agent_names_it_and_exits_3() {
    let fleet = Fleet::start(2, &[]);
    fleet.wait_full(1);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut urls = fleet.urls();
    urls.push(format!("http://{dead}"));
    let dir = tempfile::tempdir().unwrap();
    let (code, out, report) = status(&urls, &dir.path().join("m.json"));
    assert_eq!(code, 3, "{out}");
    assert!(out.contains(&format!("verdict: agent http://{dead}/ unreachable: ")), "{out}");
    assert!(!out.contains("no problems") && !out.contains("no matrix"), "{out}");
    let Results::Mesh(m) = &report.results else { panic!("a mesh report") };
    assert_eq!(m.problems.len(), 1, "{out}");
    assert_eq!(m.nodes.iter().filter(|n| n.reported).count(), 2);
}

#[test]
fn tokens_gate_probes_and_the_api() {
    let fleet = Fleet::start(2, &["--token", "s3cret", "--weak-token"]);
    fleet.wait_full(1);
    let a = fleet.agent(0);
    assert_eq!(get(a.http_addr(), "/v1/matrix", None).0, 401);
    assert_eq!(get(a.http_addr(), "/metrics", Some("guess")).0, 401);
    assert_eq!(get(a.http_addr(), "/healthz", None).0, 200, "kubelet probes need no token");
    assert_eq!(get(a.http_addr(), "/readyz", None).0, 200);
    // A forged probe (no tag, then a tag made with another token) gets no answer.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut p = vec![0u8; 64];
    wirebench_core::wire::probe::init(&mut p, 1, 0);
    sock.send_to(&p, a.probe_addr()).unwrap();
    wirebench_core::wire::mesh::mark(&mut p);
    wirebench_core::wire::mesh::sign_probe(&wirebench_core::auth::Key::new(b"guess"), &mut p);
    sock.send_to(&p, a.probe_addr()).unwrap();
    // Tags are keyed with the token's derived key, not the token: a tag made with the
    // plain token is a forgery too.
    wirebench_core::wire::mesh::sign_probe(&wirebench_core::auth::Key::new(b"s3cret"), &mut p);
    sock.send_to(&p, a.probe_addr()).unwrap();
    let mut buf = [0u8; 128];
    assert!(sock.recv_from(&mut buf).is_err(), "forged probes are not answered");
    let derived = wirebench_core::auth::Key::derive(b"s3cret", wirebench_core::auth::DEFAULT_SALT.as_bytes());
    wirebench_core::wire::mesh::sign_probe(&derived, &mut p);
    sock.send_to(&p, a.probe_addr()).unwrap();
    let (n, _) = sock.recv_from(&mut buf).expect("a probe tagged with the derived key is answered");
    assert!(n >= 64, "{n}");
    let (_, text) = get(a.http_addr(), "/metrics", Some("s3cret"));
    assert!(text.contains("wirebench_mesh_unauthenticated_total{direction=\"probe\"} 3"), "{text}");
    assert!(text.contains("wirebench_mesh_http_unauthorized_total 2"), "{text}");
    // mesh status needs the token too.
    let r = wirebench(&["mesh", "status", &format!("http://{}", a.http_addr())]);
    assert!(r.out.contains("wants a token"), "{r:?}");
    assert_eq!(r.code, 1, "no row without the token: {r:?}");
    let r =
        wirebench(&["mesh", "status", &format!("http://{}", a.http_addr()), "--token", "s3cret", "--max-p99", "1s"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn an_agent_with_the_wrong_token_is_heard_by_nobody() {
    wrong_agent_heard_by_nobody(&["--token", "wrong", "--weak-token"]);
}

#[test]
fn an_agent_with_the_right_token_and_another_salt_is_heard_by_nobody() {
    wrong_agent_heard_by_nobody(&["--token", "right", "--weak-token", "--token-salt", "another-fleet"]);
}

fn wrong_agent_heard_by_nobody(odd_token: &[&str]) {
    let fleet = Fleet::start(2, &["--token", "right", "--weak-token"]);
    fleet.wait_full(1);
    let cfg = agent_config(
        &[
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--name",
            "odd",
            "--peers",
            fleet.file.path().to_str().unwrap(),
            "--window",
            "1s",
            "--timeout",
            "400ms",
            "--rate",
            "30/s",
        ]
        .into_iter()
        .chain(odd_token.iter().copied())
        .collect::<Vec<_>>(),
    );
    let odd = Agent::start(&cfg, Shutdown::new(), &quiet()).unwrap();
    let odd_token = odd_token[1];
    let m = wait_for(Duration::from_secs(20), "a window of the odd agent", || {
        let (_, body) = get(odd.http_addr(), "/v1/matrix", Some(odd_token));
        let m: MatrixReport = serde_json::from_str(&body).unwrap();
        (m.cells.len() == 4 && m.cells.iter().all(|c| c.sent > 0)).then_some(m)
    });
    assert!(m.cells.iter().all(|c| c.received == 0 && c.lost == c.sent), "{m:?}");
    let (_, text) = get(fleet.agent(0).http_addr(), "/metrics", Some("right"));
    let line =
        text.lines().find(|l| l.starts_with("wirebench_mesh_unauthenticated_total{direction=\"probe\"}")).unwrap();
    assert!(line.rsplit(' ').next().unwrap().parse::<u64>().unwrap() > 0, "{line}");
    odd.stop();
}

#[test]
fn the_http_side_is_bounded() {
    let fleet = Fleet::start(1, &[]);
    let addr = fleet.agent(0).http_addr();
    let raw = |req: &str| -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert!(
        raw("POST /v1/matrix HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
            .starts_with("HTTP/1.1 405")
    );
    assert!(
        raw("GET /v1/matrix HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
            .starts_with("HTTP/1.1 413")
    );
    assert!(raw("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").starts_with("HTTP/1.1 404"));
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(20_000));
    let got = raw(&big);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "an oversized head is refused: {got:.40}");
    // A connection that never sends its head is closed after HEAD_TIMEOUT.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(wirebench::mesh::http::HEAD_TIMEOUT + Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut b = [0u8; 64];
    // Closed by the agent (end of stream or a reset): the read timeout is only a backstop
    // and, reached, fails the test.
    let closed = |r: std::io::Result<usize>| match r {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
        Err(e) => panic!("the connection was held, not closed: {e}"),
    };
    let n = closed(idle.read(&mut b));
    assert!(t.elapsed() < wirebench::mesh::http::HEAD_TIMEOUT + Duration::from_secs(3));
    assert!(n == 0 || String::from_utf8_lossy(&b[..n]).starts_with("HTTP/1.1 408"), "closed, not served");
    // One source past its share and its reserved places: the extra connection is closed at
    // once, and the agent still answers (mesh_http.rs has the hogs from many sources).
    let held: Vec<TcpStream> = (0..wirebench::mesh::http::MAX_PER_SOURCE + wirebench::mesh::http::HEALTH_PER_SOURCE)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let mut extra = TcpStream::connect(addr).unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(closed(extra.read(&mut b)), 0, "refused at accept");
    // while the ones before it are still open: nothing to read, and not closed
    for (i, mut h) in held.iter().enumerate() {
        h.set_nonblocking(true).unwrap();
        let e = h.read(&mut b).expect_err("a held connection has nothing to read");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "held connection {i}: {e}");
    }
    drop(held);
    wait_for(Duration::from_secs(10), "slots free again", || (try_get(addr, "/healthz") == Some(200)).then_some(()));
}

#[test]
fn bad_configuration_exits_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["mesh", "agent"], "no peers"),
        (&["mesh", "agent", "--peers", "10.0.0.1", "--window", "100ms", "--timeout", "1s"], "--window"),
        (&["mesh", "agent", "--peers", "10.0.0.1:notaport"], "--peers"),
        (
            &[
                "mesh",
                "agent",
                "--peers",
                "k8s:ns/svc",
                "--k8s-api",
                "https://127.0.0.1:1",
                "--k8s-ca-file",
                "/nonexistent",
            ],
            "CA file",
        ),
        (&["mesh", "agent", "--peers", "x", "--token", "a", "--token-file", "/etc/hostname"], "not both"),
        (&["mesh", "agent", "--peers", "x", "--token", "hunter2"], "bits of entropy, under 128"),
        (&["mesh", "status"], "one of the two"),
        (&["mesh", "status", "http://a:1", "--max-loss", "120"], "percentage"),
    ];
    for (args, want) in cases {
        let r = wirebench(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: {:?}", r.err);
        assert!(r.err.contains(want), "{args:?}: {:?} should mention {want}", r.err);
    }
}

/// A `wirebench mesh agent` process on loopback (serve and HTTP on ports the kernel picks),
/// with `args` after those, and its first line, printed once every thread of it is started.
/// Its standard output stays open in the child (read on, or left).
/// The mesh report saved at `json` (checked against the schema).
pub(crate) fn saved_mesh(json: &Path) -> MeshResults {
    let v = read_json(json);
    assert_valid_report(&v);
    let report: Report = serde_json::from_value(v).unwrap();
    let Results::Mesh(m) = report.results else { panic!("a mesh report") };
    m
}

/// A mesh report's problems as `(scope, kind)`.
pub(crate) fn problem_kinds(m: &MeshResults) -> Vec<(&str, &str)> {
    m.problems.iter().map(|p| (p.scope.as_str(), p.kind.as_str())).collect()
}

pub(crate) fn agent_process(args: &[&str]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["mesh", "agent", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    (child, line)
}

/// The flags of an agent probing one peer that never answers (127.0.0.1:1).
pub(crate) const LONE_AGENT: [&str; 8] =
    ["--advertise", "127.0.0.1:1", "--peers", "127.0.0.1:1", "--window", "1s", "--timeout", "200ms"];

#[test]
fn sigterm_stops_an_agent_within_a_second() {
    let (mut child, line) = agent_process(&LONE_AGENT);
    assert!(line.contains("listening"), "{line}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let t = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait()).unwrap());
    let status = rx.recv_timeout(Duration::from_secs(3)).expect("exits after SIGTERM").unwrap();
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
    let _ = Proto::Udp;
}

#[test]
fn replies_from_another_address_of_the_peer_still_count() {
    // One serve on 0.0.0.0 answers for 127.1.0.1 and 127.1.0.2, replying from 127.0.0.1
    // (the kernel's source for a wildcard socket): matched by the session they carry.
    let server = wirebench::serve::Server::start(
        &wirebench::serve::Config { listen: "0.0.0.0:0".parse().unwrap(), ..wirebench::serve::Config::loopback() },
        Shutdown::new(),
    )
    .unwrap();
    let port = server.local_addr().port();
    let peers = format!("127.1.0.1:{port},127.1.0.2:{port}");
    let cfg = agent_config(&[
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--peers",
        &peers,
        "--window",
        "1s",
        "--timeout",
        "400ms",
        "--rate",
        "30/s",
    ]);
    let agent = Agent::start(&cfg, Shutdown::new(), &quiet()).unwrap();
    wait_for(Duration::from_secs(20), "replies from both addresses", || {
        let m: MatrixReport = serde_json::from_str(&get(agent.http_addr(), "/v1/matrix", None).1).unwrap();
        (m.cells.len() == 4 && m.cells.iter().all(|c| c.received > 0 && c.lost == 0)).then_some(())
    });
    agent.stop();
    server.stop();
}

#[test]
fn dns_names_are_resolved_into_peers() {
    let server = crate::support::serve();
    let port = server.local_addr().port();
    let cfg = agent_config(&[
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--peers",
        &format!("dns:localhost:{port}"),
        "--window",
        "1s",
        "--timeout",
        "400ms",
        "--rate",
        "30/s",
        "--proto",
        "udp",
    ]);
    let agent = Agent::start(&cfg, Shutdown::new(), &quiet()).unwrap();
    let want = format!("127.0.0.1:{port}");
    wait_for(Duration::from_secs(20), "localhost resolved and answering", || {
        let m: MatrixReport = serde_json::from_str(&get(agent.http_addr(), "/v1/matrix", None).1).unwrap();
        m.cells.iter().any(|c| c.peer.addr == want && c.received > 0).then_some(())
    });
    agent.stop();
    server.stop();
}

/// `wirebench_mesh_hiccup_seconds{quantile}` from a scrape (`None` while absent).
fn hiccup_gauge(text: &str, q: &str) -> Option<f64> {
    let head = format!("wirebench_mesh_hiccup_seconds{{quantile=\"{q}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(head.as_str())).and_then(|v| v.parse().ok())
}

/// By default the samples are the prober's own wake-ups (no meter thread: `mesh_stalls`),
/// with `--hiccup-interval` a meter thread's; either fills the same series each window.
#[test]
fn the_agents_stall_samples_are_on_metrics_per_window_and_off_with_no_hiccup() {
    for extra in [&[][..], &["--hiccup-interval", "2ms"]] {
        let fleet = Fleet::start(1, extra);
        let a = fleet.agent(0);
        // the first window (1 s) closes, then the samples' figures are scraped
        let text = wait_for(Duration::from_secs(10), "the stall samples on /metrics", || {
            let (s, text) = get(a.http_addr(), "/metrics", None);
            assert_eq!(s, 200);
            hiccup_gauge(&text, "1").is_some().then_some(text)
        });
        let (p99, max) = (hiccup_gauge(&text, "0.99").unwrap(), hiccup_gauge(&text, "1").unwrap());
        assert!(p99 >= 0.0 && p99 <= max, "{extra:?}: p99 {p99} max {max}\n{text}");
        assert!(text.contains("# TYPE wirebench_mesh_hiccup_seconds gauge"), "{text}");
        let wakeups: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("wirebench_mesh_hiccup_window_wakeups "))
            .and_then(|v| v.parse().ok())
            .expect("wake-ups of the window");
        // a 1 s window: the prober wakes at least for its 100 ms ticks, the meter every 2 ms
        assert!(wakeups >= 5.0, "{extra:?}: {wakeups}\n{text}");
    }
    let fleet = Fleet::start(1, &["--no-hiccup"]);
    wait_for(Duration::from_secs(10), "a closed window", || fleet.matrix(0).window.map(|_| ()));
    let (_, text) = get(fleet.agent(0).http_addr(), "/metrics", None);
    assert!(!text.contains("wirebench_mesh_hiccup"), "{text}");
}
