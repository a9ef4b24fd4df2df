//! The agent's HTTP side against clients that hold connections: keep-alive hogs from one
//! source and from many, a source at its share, the idle deadline. Other sources are
//! loopback addresses (127.0.0.x), so each hog has its own source address.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use wirebench::Shutdown;
use wirebench::mesh::agent::Agent;
use wirebench::mesh::http::{HEALTH_PER_SOURCE, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_PER_SOURCE};
use wirebench::mesh::{AgentArgs, AgentConfig};

fn agent() -> Agent {
    let args = ["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--peers", "127.0.0.1:1", "--proto", "udp"];
    let a = wirebench::flags::parse_mode::<AgentArgs>("agent", &args).expect("flags parse");
    let quiet: wirebench::discovery::Log = std::sync::Arc::new(|_| {});
    Agent::start(&AgentConfig::from_args(&a).expect("valid"), Shutdown::new(), &quiet).expect("agent starts")
}

fn src(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(from, 0).into()).unwrap();
    s.connect_timeout(&to.into(), Duration::from_secs(5)).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One request on `s`, kept alive; the status, or 0 when the connection was closed.
fn ask(s: &mut TcpStream, path: &str, close: bool) -> u16 {
    let conn = if close { "Connection: close\r\n" } else { "" };
    if write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{conn}\r\n").is_err() {
        return 0;
    }
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    // Every answer here is small: read until the head and its Content-Length body are in.
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                break;
            }
        }
    }
    String::from_utf8_lossy(&got).split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// `/healthz` on a new connection from `from`, `n` times: how many were answered 200.
fn probes(addr: SocketAddr, from: IpAddr, n: usize, path: &str) -> usize {
    (0..n).filter(|_| ask(&mut connect_from(from, addr), path, true) == 200).count()
}

/// `wirebench_mesh_http_closed_total{reason}` from /metrics, asked from a source of its own.
fn closed(addr: SocketAddr, reason: &str) -> u64 {
    let mut s = connect_from(src(250), addr);
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let series = format!("wirebench_mesh_http_closed_total{{reason=\"{reason}\"}} ");
    let line = text.lines().find(|l| l.starts_with(&series)).unwrap_or_else(|| panic!("no {series}in {text}"));
    line[series.len()..].parse().unwrap()
}

#[test]
fn keep_alive_hogs_from_one_source_leave_healthz_answered() {
    let a = agent();
    let addr = a.http_addr();
    // 64 keep-alive connections from one source, each asked /healthz once and kept open:
    // before the per-source share they held every place and the agent answered no one else.
    let hogs: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let mut s = connect_from(src(2), addr);
            ask(&mut s, "/healthz", false);
            s
        })
        .collect();
    let answered = probes(addr, src(3), 20, "/healthz");
    assert_eq!(answered, 20, "a kubelet on another address is answered");
    let mut m = connect_from(src(3), addr);
    assert_eq!(ask(&mut m, "/metrics", true), 200, "and the data endpoints too");
    drop(hogs);
}

#[test]
fn keep_alive_hogs_from_many_sources_give_their_places_up() {
    let a = agent();
    let addr = a.http_addr();
    // Every served place taken by connections from 8 sources (each within its share) that
    // sent half a request head and wait: a new client takes the place of the idlest one.
    let hogs: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|i| {
            let mut s = connect_from(src(10 + u8::try_from(i / MAX_PER_SOURCE).unwrap()), addr);
            s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    let t = Instant::now();
    assert_eq!(probes(addr, src(3), 10, "/healthz"), 10, "healthz answered");
    assert_eq!(probes(addr, src(3), 5, "/v1/peers"), 5, "the API answered");
    assert!(t.elapsed() < Duration::from_secs(4), "at once, not after the hogs' deadlines: {:?}", t.elapsed());
    // The first newcomer takes an idle hog's place; the places it frees serve the rest.
    assert!(closed(addr, "evicted") >= 1, "the eviction is counted");
    drop(hogs);
}

#[test]
fn a_source_past_its_share_gets_only_the_probes_and_then_nothing() {
    let a = agent();
    let addr = a.http_addr();
    let held: Vec<TcpStream> = (0..MAX_PER_SOURCE).map(|_| connect_from(src(4), addr)).collect();
    // Past its share: a reserved place, which answers the probes and nothing else.
    let mut h = connect_from(src(4), addr);
    assert_eq!(ask(&mut h, "/healthz", false), 200);
    let mut m = connect_from(src(4), addr);
    assert_eq!(ask(&mut m, "/v1/matrix", false), 503, "data endpoints wait for a served place");
    // Reserved places held too: closed at accept.
    let more: Vec<TcpStream> = (0..HEALTH_PER_SOURCE).map(|_| connect_from(src(4), addr)).collect();
    let mut b = [0u8; 16];
    let mut extra = connect_from(src(4), addr);
    assert_eq!(extra.read(&mut b).unwrap_or(0), 0, "closed at accept");
    assert_eq!(closed(addr, "refused"), 1, "and counted");
    assert_eq!(probes(addr, src(5), 3, "/v1/peers"), 3, "other sources are served");
    drop((held, more));
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let a = agent();
    let mut s = connect_from(src(6), a.http_addr());
    assert_eq!(ask(&mut s, "/healthz", false), 200);
    let t = Instant::now();
    let mut b = [0u8; 16];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed");
    let took = t.elapsed();
    assert!(
        took + Duration::from_millis(100) >= IDLE_TIMEOUT && took < IDLE_TIMEOUT + Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(closed(a.http_addr(), "timed_out"), 1, "counted on /metrics");
}
