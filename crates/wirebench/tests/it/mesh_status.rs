//! `wirebench mesh status` against agents with nothing judged yet (no window closed: "not
//! judged", exit 1, in every view), and against many and misbehaving agents (fake ones, HTTP
//! servers in the test): more agents than fetches in flight, the per-agent cap, the total
//! budget, a stop; every agent a row or named.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::mesh::promql::QUERIES;
use wirebench::mesh::status::IN_FLIGHT;
use wirebench::mesh::{AgentArgs, AgentConfig};
use wirebench_core::mesh::api::{API_VERSION, CellReport, MatrixReport, NodeRef, Proto, WindowRef};
use wirebench_core::mesh::matrix::MatrixBuilder;
use wirebench_core::mesh::window::RttSummary;
use wirebench_core::report::{MeshResults, Report, Results};

use crate::mesh::{problem_kinds, saved_mesh};
use crate::support::{assert_valid_report, read_json, wirebench};

/// An agent probing a peer that never answers, whose first window (1 h) will not close
/// while the test runs: its `/v1/matrix` has no window and no cell.
fn fresh_agent() -> Agent {
    let args = ["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--advertise", "127.0.0.1:1"];
    let args = [&args[..], &["--peers", "127.0.0.1:1", "--window", "1h", "--timeout", "1s"]].concat();
    let a = wirebench::flags::parse_mode::<AgentArgs>("agent", &args).expect("flags parse");
    let cfg = AgentConfig::from_args(&a).expect("valid config");
    let quiet: wirebench::discovery::Log = Arc::new(|_| {});
    Agent::start(&cfg, Shutdown::new(), &quiet).expect("agent starts")
}

/// Agents that answer but closed no window (before: "verdict: no problems", exit 0): every
/// view says nothing is judged yet, and the exit code is 1.
#[test]
fn agents_with_no_closed_window_are_not_judged_in_every_view_and_exit_1() {
    let agent = fresh_agent();
    let url = format!("http://{}", agent.http_addr());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let r = wirebench(&["mesh", "status", &url, "--timeout", "5s", "--json", json.to_str().unwrap()]);
    agent.stop();
    let want = "verdict: no cell judged yet: no closed window has 5 probes of a cell (just started? wait a window)";
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("mesh: 1 node, 1 reporting (from agents)"), "{}", r.out);
    assert!(r.out.contains(want), "{}", r.out);
    assert!(!r.out.contains("no problems"), "{}", r.out);
    let m = saved_mesh(&json);
    assert_eq!(problem_kinds(&m), [("agents", "not_judged")]);
    assert!(m.has_rows() && !m.judged());
    let text = wirebench(&["report", "-v", json.to_str().unwrap()]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(text.out.contains(want) && !text.out.contains("no problems"), "{}", text.out);
    let html = dir.path().join("m.html");
    let page = wirebench(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{page:?}");
    let page = std::fs::read_to_string(html).unwrap();
    assert!(page.contains("no cell judged yet") && page.contains("not_judged"), "{page}");
    assert!(!page.contains("no problems"), "{page}");
}

/// What a fake agent answers.
#[derive(Clone)]
enum Answer {
    /// `200` with this body.
    Body(Arc<Vec<u8>>),
    /// `200` with a body of this many zero bytes (written until the reader leaves).
    Zeros(usize),
    /// Nothing: the request is held until the test ends.
    Never,
}

/// A fake agent: answers the first request on its listener, then stops. A connection after
/// `stop` is set (the test's own, to wake it when it was never asked) ends it unanswered.
/// Returns whether it was asked.
struct Fake {
    addr: SocketAddr,
    asked: mpsc::Receiver<()>,
    thread: JoinHandle<bool>,
}

/// A request's head, read with both timeouts set to 30 s (`None`: the client left first).
fn read_head(conn: &mut TcpStream) -> Option<Vec<u8>> {
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(head)
}

fn fake(answer: Answer, stop: Arc<AtomicBool>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, asked) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let Some(Ok(mut conn)) = listener.incoming().next() else { return false };
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let Some(_) = read_head(&mut conn) else { return false };
        let mut buf = [0u8; 1024];
        let _ = tx.send(());
        let len = match &answer {
            Answer::Body(b) => b.len(),
            Answer::Zeros(n) => *n,
            Answer::Never => {
                // Held until the test ends (it sets `stop` and wakes no one: the status
                // closes this connection when it stops; bounded by the read timeout).
                let _ = conn.read(&mut buf);
                return true;
            }
        };
        let _ = write!(
            conn,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
        );
        match &answer {
            Answer::Body(b) => {
                let _ = conn.write_all(b);
            }
            Answer::Zeros(n) => {
                let chunk = vec![0u8; 64 << 10];
                let mut left = *n;
                while left > 0 {
                    let k = left.min(chunk.len());
                    if conn.write_all(&chunk[..k]).is_err() {
                        break;
                    }
                    left -= k;
                }
            }
            Answer::Never => {}
        }
        true
    });
    Fake { addr, asked, thread }
}

/// Ends the fakes (waking those never asked) and returns how many were asked.
fn finish(fakes: Vec<Fake>, stop: &AtomicBool) -> usize {
    stop.store(true, Ordering::Relaxed);
    for f in &fakes {
        let _ = TcpStream::connect(f.addr);
    }
    fakes.into_iter().map(|f| usize::from(f.thread.join().unwrap())).sum()
}

/// Fake agent `i`'s row: 127.0.0.2:(20000 + i), one good cell to its own peer (every row
/// costs the matrix the same).
fn row(i: usize) -> MatrixReport {
    let at = |ip: &str| NodeRef::at(format!("{ip}:{}", 20_000 + i));
    MatrixReport {
        api_version: API_VERSION,
        agent: at("127.0.0.2"),
        window: Some(WindowRef { index: 1, len_ns: 1_000_000_000, start_unix_ns: 1 }),
        cells: vec![CellReport {
            peer: at("127.0.0.3"),
            proto: Proto::Udp,
            sent: 10,
            received: 10,
            lost: 0,
            late: 0,
            duplicates: 0,
            rtt: Some(RttSummary { count: 10, min_ns: 100_000, p50_ns: 100_000, p99_ns: 100_000, max_ns: 100_000 }),
            histogram: None,
        }],
    }
}

fn body(i: usize) -> Answer {
    Answer::Body(Arc::new(serde_json::to_vec(&row(i)).unwrap()))
}

fn mesh(json: &std::path::Path) -> MeshResults {
    let v = read_json(json);
    assert_valid_report(&v);
    let report: Report = serde_json::from_value(v).unwrap();
    let Results::Mesh(m) = report.results else { panic!("a mesh report") };
    m
}

/// More agents than IN_FLIGHT (the bound itself: `mesh::status::tests`, in-process): every
/// agent is asked once, the one whose answer passes the per-agent cap (64 MiB) is named,
/// the others' rows kept.
#[test]
fn more_agents_than_in_flight_are_each_asked_once_and_an_oversized_answer_is_named() {
    let n = 2 * IN_FLIGHT + 9;
    let stop = Arc::new(AtomicBool::new(false));
    let fakes: Vec<Fake> =
        (0..n).map(|i| fake(if i == 7 { Answer::Zeros((64 << 20) + 1) } else { body(i) }, stop.clone())).collect();
    let urls: Vec<String> = fakes.iter().map(|f| format!("http://{}", f.addr)).collect();
    let big = format!("agent {}/ unreachable: ", urls[7]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let mut args = vec!["mesh", "status", "--timeout", "60s", "--json", json.to_str().unwrap()];
    args.extend(urls.iter().map(String::as_str));
    let r = wirebench(&args);
    assert_eq!(finish(fakes, &stop), n, "every agent asked once");
    assert_eq!(r.code, 3, "{r:?}");
    let m = mesh(&json);
    assert_eq!(m.nodes.iter().filter(|x| x.reported).count(), n - 1);
    let named: Vec<(&str, &str)> = m.problems.iter().map(|p| (p.kind.as_str(), p.summary.as_str())).collect();
    assert_eq!(named.len(), 1, "{}", r.out);
    assert_eq!(named[0].0, "unreachable");
    assert!(named[0].1.starts_with(&big) && named[0].1.contains("limit 67108864 bytes"), "{}", r.out);
}

/// Past --max-matrix the rows answered are not kept and the agents not yet asked are not
/// asked: each is named skipped (none silently dropped), the rows that fit are kept.
#[test]
fn agents_past_the_matrix_budget_are_named_skipped_not_dropped() {
    let one = {
        let mut b = MatrixBuilder::new("agents");
        b.add_report(&row(0)).unwrap();
        b.held()
    };
    let (n, stop) = (IN_FLIGHT + 4, Arc::new(AtomicBool::new(false)));
    let fakes: Vec<Fake> = (0..n).map(|i| fake(body(i), stop.clone())).collect();
    let urls: Vec<String> = fakes.iter().map(|f| format!("http://{}", f.addr)).collect();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let budget = (3 * one + one / 2).to_string();
    let mut args = vec!["mesh", "status", "--max-matrix", &budget, "--json", json.to_str().unwrap()];
    args.extend(urls.iter().map(String::as_str));
    let r = wirebench(&args);
    // 3 rows kept; the 4th answer read spends the budget: the agents asked by then (at
    // least IN_FLIGHT: which ones depends on the order answers come in) are not kept, those
    // whose turn came after are not asked.
    let asked = finish(fakes, &stop);
    assert!((IN_FLIGHT..=IN_FLIGHT + 3).contains(&asked), "{asked} asked: {r:?}");
    assert_eq!(r.code, 3, "{r:?}");
    let m = mesh(&json);
    assert_eq!(m.nodes.iter().filter(|x| x.reported).count(), 3);
    let kinds: Vec<&str> = m.problems.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, vec!["skipped"; n - 3], "{}", r.out);
    let said = |what: &str| m.problems.iter().filter(|p| p.summary.contains(what)).count();
    assert_eq!(said(&format!("skipped: not kept: the matrix holds {} of its {budget} bytes", 3 * one)), asked - 3);
    assert_eq!(said(&format!("skipped: not asked: the matrix budget (--max-matrix {budget}B) is spent")), n - asked);
    // Each agent not kept is named once, by its URL.
    let named: std::collections::BTreeSet<&str> =
        m.problems.iter().map(|p| m.nodes[p.nodes[0]].addr.as_str()).collect();
    assert_eq!(named.len(), n - 3);
    assert!(named.iter().all(|a| urls.iter().any(|u| format!("{u}/") == *a)), "{named:?}");
}

/// A stop (Ctrl-C) while an agent holds its answer: the status returns at once (before:
/// after --timeout), names the agent skipped, saves the report as interrupted.
#[test]
fn a_stop_while_an_agent_holds_its_answer_names_it_and_returns() {
    let stop = Arc::new(AtomicBool::new(false));
    let f = fake(Answer::Never, stop.clone());
    let url = format!("http://{}", f.addr);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let shutdown = Shutdown::new();
    let (tx, rx) = mpsc::channel();
    let (args, sd) = (
        ["mesh", "status", &url, "--timeout", "60s", "--json", json.to_str().unwrap()].map(str::to_owned),
        shutdown.clone(),
    );
    let run = std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let _ = tx.send(crate::support::wirebench_with(&args, sd));
    });
    f.asked.recv_timeout(Duration::from_secs(30)).expect("the status asks");
    shutdown.trigger();
    let r = rx.recv_timeout(Duration::from_secs(10)).expect("the status returns on the stop, not after --timeout");
    run.join().unwrap();
    assert_eq!(finish(vec![f], &stop), 1);
    assert_eq!(r.code, 1, "no row: {r:?}");
    assert!(r.out.contains(&format!("verdict: agent {url}/ skipped: stopped before it answered")), "{}", r.out);
    let v = read_json(&json);
    assert_eq!(v["outcome"], "interrupted");
    let m = mesh(&json);
    assert_eq!(m.problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(), ["skipped", "no_matrix"]);
}

/// The saved report's command line hides the token (before: `--token s3cret` as typed, in a
/// file that is shared and committed); every report's `meta` goes through the same path.
#[test]
fn the_saved_command_line_hides_the_token() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let url = format!("http://{dead}");
    let r = wirebench(&["mesh", "status", &url, "--token", "S3cr3tT0ken", "--json", json.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains("S3cr3tT0ken"), "{text}");
    let v = read_json(&json);
    let saved: Vec<&str> = v["meta"]["command_line"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(saved[1..], ["mesh", "status", &url, "--token", "***", "--json", json.to_str().unwrap()]);
}

/// A fake Prometheus: takes its connections one at a time and answers each query with what
/// `answer` gives for the query's text (`None`: the request is held until the client leaves,
/// at most 30 s), until `stop` is set (then a connection ends it). Each query asked is sent
/// on the receiver.
fn fake_prometheus(
    answer: fn(&str) -> Option<String>,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, mpsc::Receiver<String>, JoinHandle<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, asked) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return false };
            if stop.load(Ordering::Relaxed) {
                return true;
            }
            let Some(head) = read_head(&mut conn) else { continue };
            let head = String::from_utf8_lossy(&head);
            let target = head.split_whitespace().nth(1).unwrap_or("");
            let q = percent_decode(target.split_once("query=").map_or("", |(_, q)| q));
            let _ = tx.send(q.clone());
            let Some(body) = answer(&q) else {
                let _ = conn.read(&mut [0u8; 1]);
                continue;
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        false
    });
    (addr, asked, thread)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Prometheus instant-query answer: a vector of these samples (labels, value).
fn vector(samples: &[(Vec<(&str, String)>, f64)]) -> String {
    let result: Vec<serde_json::Value> = samples
        .iter()
        .map(|(labels, v)| {
            let metric: serde_json::Map<String, serde_json::Value> =
                labels.iter().map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(v.as_str()))).collect();
            serde_json::json!({ "metric": metric, "value": [1.0, v.to_string()] })
        })
        .collect();
    serde_json::json!({ "status": "success", "data": { "resultType": "vector", "result": result } }).to_string()
}

/// Ends a fake Prometheus; whether it ended on the stop (not on an error).
fn finish_prometheus(addr: SocketAddr, thread: JoinHandle<bool>, stop: &AtomicBool) -> bool {
    stop.store(true, Ordering::Relaxed);
    let _ = TcpStream::connect(addr);
    thread.join().unwrap()
}

/// A stop (Ctrl-C) while Prometheus holds its answer to the third query: the status returns
/// at once (before: after --timeout), names Prometheus skipped (what did not answer),
/// prints and saves the report as interrupted, and exits as a stop with no row does from
/// the agents (1).
#[test]
fn a_stop_while_prometheus_holds_its_answer_names_it_and_returns() {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, asked, thread) =
        fake_prometheus(|q| (q != "wirebench_mesh_peer_info").then(|| vector(&[])), stop.clone());
    let url = format!("http://{addr}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let shutdown = Shutdown::new();
    let (tx, rx) = mpsc::channel();
    let (args, sd) = (
        ["mesh", "status", "--prometheus", &url, "--timeout", "60s", "--json", json.to_str().unwrap()]
            .map(str::to_owned),
        shutdown.clone(),
    );
    let run = std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let _ = tx.send(crate::support::wirebench_with(&args, sd));
    });
    let first: Vec<String> =
        (0..3).map(|_| asked.recv_timeout(Duration::from_secs(30)).expect("the status asks")).collect();
    assert_eq!(first, [QUERIES[0], QUERIES[1], "wirebench_mesh_peer_info"]);
    shutdown.trigger();
    let r = rx.recv_timeout(Duration::from_secs(10)).expect("the status returns on the stop, not after --timeout");
    run.join().unwrap();
    assert!(finish_prometheus(addr, thread, &stop));
    assert_eq!(r.code, 1, "no row: {r:?}");
    let want = format!("verdict: Prometheus {url}/ skipped: stopped before it answered (2 of 7 queries answered)");
    assert!(wirebench_report::screen::unfold(&r.out).contains(&want), "{}", r.out);
    assert!(r.out.contains("no agent's row read from Prometheus: no matrix to judge"), "{}", r.out);
    let v = read_json(&json);
    assert_eq!(v["outcome"], "interrupted");
    let m = mesh(&json);
    assert_eq!(m.source, "prometheus");
    assert_eq!(m.problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(), ["skipped", "no_matrix"]);
}

/// Prometheus's first answer (20 agents) is longer than a 1 KiB --max-matrix: it is refused
/// whole and Prometheus named skipped with the query, the other queries are not sent, and
/// the run exits as the agents' path does with no row kept (1), its report saved.
#[test]
fn a_prometheus_answer_past_the_matrix_budget_is_named_and_the_rest_not_asked() {
    fn answer(q: &str) -> String {
        let agent = |i: usize| {
            let at = format!("127.0.0.2:{}", 20_000 + i);
            let labels = vec![
                ("__name__", "wirebench_mesh_agent_info".to_owned()),
                ("instance", at.clone()),
                ("addr", at),
                ("job", "wirebench-mesh".to_owned()),
            ];
            (labels, 1.0)
        };
        let known: Vec<_> = (0..20).map(agent).collect();
        if q.starts_with("last_over_time") { vector(&known) } else { vector(&[]) }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, asked, thread) = fake_prometheus(|q| Some(answer(q)), stop.clone());
    let url = format!("http://{addr}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("m.json");
    let r =
        wirebench(&["mesh", "status", "--prometheus", &url, "--max-matrix", "1KiB", "--json", json.to_str().unwrap()]);
    assert!(finish_prometheus(addr, thread, &stop));
    let queries: Vec<String> = asked.try_iter().collect();
    assert_eq!(queries, ["last_over_time(wirebench_mesh_agent_info[1h])"], "the rest are not asked");
    assert_eq!(r.code, 1, "{r:?}");
    let want = format!(
        "verdict: Prometheus {url}/ skipped: not kept: its answer to last_over_time(wirebench_mesh_agent_info[1h]) passes what is left of the budget"
    );
    let text = wirebench_report::screen::unfold(&r.out);
    assert!(text.contains(&want), "{}", r.out);
    assert!(
        text.contains("the matrix budget (--max-matrix 1KiB); no matrix from part of the answers (6 of 7 not asked)"),
        "{}",
        r.out
    );
    let v = read_json(&json);
    assert_eq!(v["outcome"], "completed");
    let m = mesh(&json);
    assert_eq!(m.problems.iter().map(|p| p.kind.as_str()).collect::<Vec<_>>(), ["skipped", "no_matrix"]);
}
