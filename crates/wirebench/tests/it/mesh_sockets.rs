//! The mesh prober's UDP sockets: peers whose own connected socket cannot be
//! opened (a low open-file limit) are probed from the shared socket and counted, with HTTP
//! still answering; a second agent never shares a probe port with a running one, and one
//! started on a running agent's port stops in one line, exit 1.

use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use wirebench_core::mesh::api::{MatrixReport, Proto};

use crate::mesh::{get, wait_for};

const BIN: &str = env!("CARGO_BIN_EXE_wirebench");

/// An agent process: its stdout's first line ("listening ...") read, or how it ended.
enum Started {
    Running(Child, String),
    Exited(i32, String),
}

/// Starts `wrap... wirebench ARGS` and reads its first line: a running agent prints its
/// "listening" line, one that cannot start exits (stdout closes without it).
fn start(wrap: &[&str], args: &[&str]) -> Started {
    let (program, pre) = wrap.split_first().map_or((BIN, &[][..]), |(p, rest)| (*p, rest));
    let mut child = Command::new(program)
        .args(pre)
        .args(if wrap.is_empty() { &[][..] } else { &[BIN][..] })
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped")).read_line(&mut line).expect("read its stdout");
    if line.contains("listening") {
        // Its log lines go on being read, so a full pipe never blocks it.
        let mut err = child.stderr.take().expect("piped");
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        return Started::Running(child, line);
    }
    let status = child.wait().expect("it exits");
    let mut err = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut err).expect("read its stderr");
    Started::Exited(status.code().unwrap_or(-1), err)
}

/// An agent process killed when dropped, so a failing test leaves none behind.
struct Agent(Option<Child>);

impl Agent {
    fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    fn still_running(&mut self) -> bool {
        self.0.as_mut().expect("running").try_wait().expect("status").is_none()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running agent, or the test fails with how it ended.
fn running(s: Started) -> (Agent, String) {
    match s {
        Started::Running(child, line) => (Agent(Some(child)), line),
        Started::Exited(code, err) => panic!("the agent did not start: exit {code}: {err}"),
    }
}

/// The HTTP address in an agent's "listening" line (`..., http ADDR; peers ...`).
fn http_of(line: &str) -> SocketAddr {
    let at = line.split(", http ").nth(1).and_then(|r| r.split(';').next()).expect("an http address");
    at.parse().expect("an address")
}

/// SIGTERM, then its exit code (bounded: it must exit within 5 s).
fn stop(mut agent: Agent) -> Option<i32> {
    let mut child = agent.0.take().expect("running");
    kill(Pid::from_raw(i32::try_from(child.id()).expect("a pid")), Signal::SIGTERM).expect("signal");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait()).expect("send"));
    rx.recv_timeout(Duration::from_secs(5)).expect("exits after SIGTERM").expect("status").code()
}

/// The descriptors of process `pid` that are connected UDP sockets in this namespace (from
/// `/proc/net/udp`, matched by inode).
fn connected_udp_fds(pid: u32) -> Vec<u64> {
    let connected: Vec<String> = std::fs::read_to_string("/proc/net/udp")
        .expect("/proc/net/udp")
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && !f[2].ends_with(":0000")).then(|| f[9].to_owned())
        })
        .collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("its descriptors")
        .filter_map(|e| {
            let e = e.ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            let inode = link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned();
            connected.contains(&inode).then(|| e.file_name().to_str()?.parse().ok()).flatten()
        })
        .collect()
}

/// A counter's value in a scrape.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{name} in\n{text}")) as u64
}

/// With an open-file limit of 128 and 120 peers, the prober gives its per-peer UDP
/// sockets only its share of the descriptors (below (128 - 64) / 2 = 32), so most peers have
/// none: they are probed from the shared socket, every peer's replies are counted, each
/// peer is either on its own connected socket or counted in
/// `wirebench_mesh_udp_socket_failures_total`, HTTP still answers, and SIGTERM exits 0.
/// Before, per-peer sockets took every descriptor left (and failed with EMFILE past it): the
/// HTTP API, and serve's accepts, stopped answering. One serve on 0.0.0.0 answers for every
/// 127.1.0.x peer (from 127.0.0.1: those replies come to the shared socket, matched by the
/// session they carry).
#[test]
fn peers_without_their_own_udp_socket_are_probed_from_the_shared_one() {
    const PEERS: usize = 120;
    const CEILING: u64 = (128 - 64) / 2;
    let serve = wirebench::serve::Server::start(
        &wirebench::serve::Config { listen: "0.0.0.0:0".parse().unwrap(), ..wirebench::serve::Config::loopback() },
        wirebench::Shutdown::new(),
    )
    .expect("serve starts");
    let port = serve.local_addr().port();
    let peers: Vec<String> = (1..=PEERS).map(|i| format!("127.1.0.{i}:{port}")).collect();
    let peers = peers.join(",");
    let args = [
        "mesh",
        "agent",
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--peers",
        &peers,
        "--proto",
        "udp",
        "--window",
        "4s",
        "--no-hiccup",
    ];
    let (child, line) = running(start(&["prlimit", "--nofile=128:128"], &args));
    let http = http_of(&line);
    let m = wait_for(Duration::from_secs(60), "a window with replies from every peer", || {
        let (status, body) = get(http, "/v1/matrix", None);
        assert_eq!(status, 200, "{body}");
        let m: MatrixReport = serde_json::from_str(&body).expect("a matrix");
        (m.cells.len() == PEERS && m.cells.iter().all(|c| c.received > 0)).then_some(m)
    });
    for c in &m.cells {
        assert_eq!(c.proto, Proto::Udp);
        assert_eq!(c.received + c.lost, c.sent, "{c:?}");
    }
    let (status, text) = get(http, "/metrics", None);
    assert_eq!(status, 200);
    let failures = counter(&text, "wirebench_mesh_udp_socket_failures_total");
    let own = connected_udp_fds(child.id());
    assert!(failures >= 1, "the limit left every peer a socket: {own:?}");
    assert!(!own.is_empty(), "no peer got its own socket ({failures} failures)");
    assert!(own.iter().all(|&fd| fd < CEILING), "a per-peer socket past the prober's share: {own:?}");
    assert_eq!(own.len() + failures as usize, PEERS, "every peer on its own socket or counted");
    assert_eq!(stop(child), Some(0), "exits cleanly");
    serve.stop();
}

/// A second agent on a running agent's probe port is refused in one line, exit 1
/// (the port is held: a runtime condition, not a wrong command; the same command works once
/// the port is free), and the first keeps running.
#[test]
fn a_second_agent_on_the_same_probe_port_stops_in_one_line() {
    let base = ["mesh", "agent", "--http", "127.0.0.1:0", "--peers", "127.0.0.1:1", "--proto", "udp"];
    let (mut first, line) = running(start(&[], &[&base[..], &["--listen", "127.0.0.1:0"]].concat()));
    let probe = line.split("udp+tcp ").nth(1).and_then(|r| r.split_whitespace().next()).expect("its probe address");
    match start(&[], &[&base[..], &["--listen", probe]].concat()) {
        Started::Exited(code, err) => {
            assert_eq!(code, 1, "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(probe) && err.contains("in use"), "{err}");
        }
        Started::Running(second, l) => {
            drop(Agent(Some(second)));
            panic!("a second agent started on {probe}: {l}");
        }
    }
    assert!(first.still_running(), "the first agent still runs");
    assert_eq!(stop(first), Some(0));
}

/// The prober's shared socket takes its port without `SO_REUSEPORT` first, so a
/// second agent is never handed a port another agent's probe sockets hold (the kernel lets
/// `SO_REUSEPORT` sockets of one user share a port, also when it picks the port). In a
/// namespace whose ephemeral range is one port, the first agent's probe socket takes it and
/// a second agent stops in one line, exit 1 (before: it joined the first one's port, and the
/// two split each other's replies).
#[cfg(feature = "netns-tests")]
#[test]
fn agents_never_share_a_probe_port() {
    let mut lab = crate::lab::Lab::new("m5port");
    let ns = lab.ns("a");
    crate::lab::sh(&[
        "ip",
        "netns",
        "exec",
        &ns,
        "sh",
        "-c",
        "echo '45000 45000' > /proc/sys/net/ipv4/ip_local_port_range",
    ]);
    let agent = |me: &str, http: &str, peer: &str| -> Vec<String> {
        ["mesh", "agent", "--listen", me, "--http", http, "--peers", peer, "--proto", "udp"].map(str::to_owned).to_vec()
    };
    let wrap = ["ip", "netns", "exec", ns.as_str()];
    let a1 = agent("127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003");
    let a1: Vec<&str> = a1.iter().map(String::as_str).collect();
    let (mut first, _) = running(start(&wrap, &a1));
    let a2 = agent("127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7001");
    let a2: Vec<&str> = a2.iter().map(String::as_str).collect();
    match start(&wrap, &a2) {
        Started::Exited(code, err) => {
            assert_eq!(code, 1, "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("probe socket") && err.contains("in use"), "{err}");
        }
        Started::Running(second, l) => {
            drop(Agent(Some(second)));
            panic!("a second agent started on the first one's probe port: {l}");
        }
    }
    assert!(first.still_running(), "the first agent still runs");
    assert_eq!(stop(first), Some(0));
}
