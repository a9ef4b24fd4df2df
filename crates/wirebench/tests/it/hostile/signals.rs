//! The real binary under SIGINT and SIGTERM with hostile clients attached, and out of file
//! descriptors: it exits 0 within a second, prints its counters, and does not spin; and its
//! memory under forward sessions stays inside the budget.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use wirebench_core::wire::control::{Control, Direction, MIN_RATE_PER_S, StreamProto};
use wirebench_core::wire::probe;

use super::raw::{blocked_sending, request, start, start_reverse, until};

/// A `wirebench serve` child on 127.0.0.1 (killed on drop); `wrap` runs it under another
/// command (e.g. `prlimit`).
struct Serve {
    child: Child,
    addr: SocketAddr,
    out: BufReader<std::process::ChildStdout>,
}

impl Serve {
    fn start(wrap: &[&str], extra: &[&str]) -> Self {
        let bin = env!("CARGO_BIN_EXE_wirebench");
        let mut argv: Vec<&str> = wrap.to_vec();
        argv.extend([bin, "serve", "--listen", "127.0.0.1:0"]);
        argv.extend(extra);
        let mut child =
            Command::new(argv[0]).args(&argv[1..]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr =
            line.split_whitespace().find_map(|w| w.parse().ok()).unwrap_or_else(|| panic!("no address in {line:?}"));
        Self { child, addr, out }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// Sends `sig` and returns how long the process took to exit, its code and its output.
    fn signal(mut self, sig: Signal) -> (Duration, Option<i32>, String) {
        let t = Instant::now();
        kill(self.pid(), sig).unwrap();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut rest = String::new();
                let _ = std::io::Read::read_to_string(&mut self.out, &mut rest);
                return (t.elapsed(), st.code(), rest);
            }
            assert!(t.elapsed() < Duration::from_secs(5), "serve still running 5 s after {sig}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Resident memory, KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// User + system CPU time so far, clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every stall at once: a control frame cut short, a probe client that never
/// reads, a forward session holding part of a frame, and a reverse stream at the slowest
/// rate (UDP and TCP). With serve confirmed stuck sending to the deaf client, SIGINT and
/// SIGTERM each end it within a second, exit 0, and print the counters.
#[test]
fn sigint_and_sigterm_exit_within_a_second_whatever_the_clients_do() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let srv = Serve::start(&[], &[]);
        let addr = srv.addr;
        let mut held = Vec::new();
        let mut stalled = TcpStream::connect(addr).unwrap();
        stalled.write_all(&wirebench_core::wire::control::header(30)).unwrap();
        stalled.write_all(b"{\"t").unwrap();
        held.push(stalled);
        let deaf = TcpStream::connect(addr).unwrap();
        let deaf_at = deaf.local_addr().unwrap();
        let mut deaf_w = deaf.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let mut p = vec![0u8; probe::MAX_LEN];
            probe::init(&mut p, 1, 0);
            for _ in 0..200 {
                if deaf_w.write_all(&p).is_err() {
                    return;
                }
            }
        });
        held.push(deaf);
        let (mut one, m) = start(addr, &request(Direction::Forward, StreamProto::Tcp, 1, None), None);
        assert!(matches!(m, Control::Ready { .. }), "{m:?}");
        one.write_all(&wirebench_core::wire::control::header(20)[..5]).unwrap();
        held.push(one);
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let slow = Some(MIN_RATE_PER_S);
        let (u, m) = start_reverse(addr, &request(Direction::Reverse, StreamProto::Udp, 2, slow), &rx);
        assert!(matches!(m, Control::Ready { .. }), "{m:?}");
        held.push(u);
        let (tcp, m) = start(addr, &request(Direction::Reverse, StreamProto::Tcp, 1, slow), None);
        assert!(matches!(m, Control::Ready { .. }), "{m:?}");
        held.push(tcp);
        // The stall is there before the signal: a thread of serve is in a send to the deaf
        // client, its buffers full.
        until("serve blocked on the deaf client", Duration::from_secs(20), || {
            blocked_sending(srv.child.id(), addr, deaf_at)
        });
        let (took, code, out) = srv.signal(sig);
        assert!(took < Duration::from_secs(1), "{sig}: exit took {took:?}");
        assert_eq!(code, Some(0), "{sig}");
        assert!(out.contains("answered"), "{sig}: counters printed: {out}");
        drop(held);
        let _ = writer.join();
    }
}

/// Voluntary context switches of every thread of `pid` named `name` (`None`: every thread),
/// by thread id and name.
fn switches(pid: u32, name: Option<&str>) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if name.is_some_and(|n| comm.trim_end() != n) {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let n = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).map(str::trim);
        v.push((
            format!("{} {}", t.file_name().to_string_lossy(), comm.trim_end()),
            n.and_then(|n| n.parse().ok()).unwrap_or(0),
        ));
    }
    v.sort();
    v
}

/// An idle serve costs no wake-ups, and a stop still ends every thread at once.
/// A probe connection's thread that woke every 100 ms to look at the stop flag cost 1,900
/// context switches a second at 199 connections; so would a UDP thread's read timeout, the
/// acceptor's timed wait, or the main thread's (`Server::wait`). Each sleeps
/// with no timed wake-up (the stop wakes it), so over a third of a second, three of the old
/// poll intervals, not one thread of serve switches once. (The window is only observed, not
/// waited on for anything: nothing in an idle serve may wake at any time.)
#[test]
fn an_idle_serve_does_not_wake_and_a_stop_ends_it() {
    let srv = Serve::start(&[], &[]);
    let pid = srv.child.id();
    let mut conns = Vec::new();
    for i in 0..3 {
        let mut c = TcpStream::connect(srv.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut p = [0u8; 32];
        probe::init(&mut p, 7 + i, 0);
        c.write_all(&p).unwrap();
        std::io::Read::read_exact(&mut c, &mut p).unwrap();
        conns.push(c);
    }
    // A UDP probe too, so the UDP thread has been through its read loop.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut p = [0u8; 32];
    probe::init(&mut p, 11, 0);
    u.send_to(&p, srv.addr).unwrap();
    u.recv_from(&mut p).unwrap();
    let t = Instant::now();
    let idle0 = loop {
        // Each thread back in its wait after answering (its count settles), bounded.
        let a = switches(pid, None);
        std::thread::park_timeout(Duration::from_millis(20));
        if switches(pid, Some("serve-tcp-conn")).len() == 3 && a == switches(pid, None) {
            break a;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "threads: {a:?}");
    };
    for name in ["serve-udp", "serve-tcp"] {
        assert_eq!(switches(pid, Some(name)).len(), 1, "one {name}");
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(350) {
        std::thread::park_timeout(Duration::from_millis(350).saturating_sub(t.elapsed()));
    }
    assert_eq!(switches(pid, None), idle0, "a thread of an idle serve woke");
    let (took, code, _) = srv.signal(Signal::SIGTERM);
    assert!(took < Duration::from_secs(1), "exit took {took:?} with idle connections");
    assert_eq!(code, Some(0));
    for mut c in conns {
        assert!(matches!(std::io::Read::read(&mut c, &mut [0u8; 1]), Ok(0)), "serve closed it");
    }
}

/// Out of file descriptors, the accept loop backs off instead of
/// spinning (before: 100 % of a core until the clients left).
#[test]
fn out_of_file_descriptors_the_acceptor_does_not_spin() {
    // 48 descriptors: the connection cap is 1, so refused connections linger and the process
    // runs out of descriptors while clients keep connecting.
    let srv = Serve::start(&["prlimit", "--nofile=48:48"], &[]);
    let conns: Vec<TcpStream> = (0..120).filter_map(|_| TcpStream::connect(srv.addr).ok()).collect();
    // Now measure a second of its CPU while the clients stay connected.
    let before = srv.cpu_ticks();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(1) {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let spent = srv.cpu_ticks() - before;
    // A spinning acceptor burns about 100 ticks a second; backing off costs one or two.
    assert!(spent < 30, "serve used {spent} ticks of CPU in a second while out of descriptors");
    drop(conns);
    let (_, code, out) = srv.signal(Signal::SIGTERM);
    assert_eq!(code, Some(0));
    assert!(out.contains("accept errors"), "{out}");
}

/// Forward sessions whose 64 publishers' windows are all written (a
/// sequence jump wider than the window) stay inside the memory budget: 32 MiB admits three
/// such sessions of 9.1 MiB, and serve's RSS grows by about that, not by 8.4 MiB for
/// every session asked for (before the budget, all 20 were admitted).
#[test]
fn forward_session_memory_stays_inside_the_budget() {
    use wirebench_core::wire::stream;
    let srv = Serve::start(&[], &["--memory-budget", "32MiB", "--max-sessions-per-source", "100"]);
    let before = srv.rss_kib();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut held = Vec::new();
    let mut admitted = 0;
    for i in 0..20u64 {
        let mut r = request(Direction::Forward, StreamProto::Udp, 64, None);
        r.session = 100 + i;
        let (c, m) = start(srv.addr, &r, None);
        held.push(c);
        let Control::Ready { data_port, .. } = m else {
            assert!(matches!(&m, Control::Error { message } if message.contains("memory budget")), "{m:?}");
            continue;
        };
        admitted += 1;
        let mut d = [0u8; 64];
        for p in 0..64 {
            stream::init(&mut d, r.session, p);
            for seq in [0, 1 << 21] {
                stream::stamp(&mut d, seq, 0);
                tx.send_to(&d, ("127.0.0.1", data_port)).unwrap();
            }
        }
    }
    assert_eq!(admitted, 3, "32 MiB holds three sessions of 64 publishers");
    // Wait until the receivers have written their windows (RSS stops growing), bounded.
    let mut last = 0;
    super::raw::until("serve's RSS to settle", Duration::from_secs(10), || {
        let now = srv.rss_kib();
        let settled = now == last;
        last = now;
        std::thread::park_timeout(Duration::from_millis(200));
        settled
    });
    let grew_mib = (srv.rss_kib().saturating_sub(before)) / 1024;
    assert!(grew_mib < 48, "serve grew {grew_mib} MiB for a 32 MiB budget");
    drop(held);
}
