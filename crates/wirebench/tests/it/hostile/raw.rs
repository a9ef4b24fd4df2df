//! A raw control client for the adversarial tests: the version-2 handshake by hand, so a
//! test can send what no well-behaved client would.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use wirebench::serve::{Config, CounterSnapshot, Server};
use wirebench::{Shutdown, control};
use wirebench_core::auth::Key;
use wirebench_core::wire::control::{Control, Direction, StreamProto, StreamRequest};
use wirebench_core::wire::handshake;

pub(crate) const NC: &str = "00112233445566778899aabbccddeeff";

/// A request with the fields the tests vary.
pub(crate) fn request(direction: Direction, proto: StreamProto, publishers: u16, rate: Option<f64>) -> StreamRequest {
    StreamRequest {
        session: 7,
        token: None,
        proto,
        size: 64,
        direction,
        publishers,
        rate_per_s: rate,
        duration_ns: 60_000_000_000,
        count: None,
        client_port: None,
        group: None,
        rcvbuf: None,
    }
}

/// Connects and says hello; returns the connection and serve's answer.
pub(crate) fn hello(addr: SocketAddr) -> (TcpStream, Control) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    control::send(&mut c, &Control::Hello { nonce: NC.into() }).unwrap();
    let m = control::recv(&mut c).unwrap();
    (c, m)
}

/// Hello, challenge, (auth with `token`), start: serve's first answer to the start.
pub(crate) fn start(addr: SocketAddr, req: &StreamRequest, token: Option<&str>) -> (TcpStream, Control) {
    let (mut c, m) = hello(addr);
    let Control::Challenge { nonce, salt, .. } = m else { return (c, m) };
    if let Some(t) = token {
        let key = Key::derive(t.as_bytes(), salt.unwrap_or_default().as_bytes());
        let tag = handshake::client_tag(&key, NC, &nonce);
        control::send(&mut c, &Control::Auth { tag }).unwrap();
        let m = control::recv(&mut c).unwrap();
        if !matches!(m, Control::Welcome { .. }) {
            return (c, m);
        }
    }
    control::send(&mut c, &Control::Start(req.clone())).unwrap();
    let m = control::recv(&mut c).unwrap();
    (c, m)
}

/// A reverse UDP start, knocking from `from`: serve's answer after the knock.
pub(crate) fn start_reverse(addr: SocketAddr, req: &StreamRequest, from: &UdpSocket) -> (TcpStream, Control) {
    let (mut c, m) = start(addr, req, None);
    let Control::Knock { port, secret } = m else { return (c, m) };
    let secret: [u8; 16] = handshake::unhex(&secret).unwrap().try_into().unwrap();
    from.send_to(&handshake::knock(&secret), (addr.ip(), port)).unwrap();
    let m = control::recv(&mut c).unwrap();
    (c, m)
}

/// The error text of a refusal, or a panic naming what came instead.
pub(crate) fn refusal(m: &Control) -> &str {
    match m {
        Control::Error { message } => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Waits (bounded) until `f` holds.
pub(crate) fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Stops `srv` on another thread and returns how long it took, failing past `limit` (the
/// server is then left behind rather than hanging the test binary).
pub(crate) fn stop_within(srv: Server, limit: Duration) -> (Duration, CounterSnapshot) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = Instant::now();
    std::thread::spawn(move || {
        let c = srv.stop();
        let _ = tx.send(c);
    });
    let c = rx
        .recv_timeout(limit + Duration::from_secs(4))
        .unwrap_or_else(|_| panic!("serve did not stop within {limit:?} + 4 s"));
    let took = t.elapsed();
    assert!(took < limit, "serve took {took:?} to stop (limit {limit:?})");
    (took, c)
}

/// A loopback serve with `f` applied to its config.
pub(crate) fn serve_with(f: impl FnOnce(&mut Config)) -> Server {
    let mut cfg = Config::loopback();
    f(&mut cfg);
    Server::start(&cfg, Shutdown::new()).unwrap()
}

/// Whether a thread of process `pid` is inside a send on its TCP socket from `local` to
/// `peer`: the kernel's own word that the thread is stuck writing to that client (its
/// `/proc/PID/task/TID/syscall` names a write to the socket's descriptor), rather than a
/// guess from counters that stopped moving.
pub(crate) fn blocked_sending(pid: u32, local: SocketAddr, peer: SocketAddr) -> bool {
    let Some(inode) = tcp_inode(pid, local, peer) else { return false };
    let want = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    let fds: Vec<u64> = fds
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == want))
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let sends = [nix::libc::SYS_write, nix::libc::SYS_writev, nix::libc::SYS_sendto, nix::libc::SYS_sendmsg];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|t| {
        let line = std::fs::read_to_string(t.path().join("syscall")).unwrap_or_default();
        let mut f = line.split_whitespace();
        let nr = f.next().and_then(|n| n.parse::<i64>().ok());
        let fd = f.next().and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
        nr.is_some_and(|n| sends.contains(&n)) && fd.is_some_and(|fd| fds.contains(&fd))
    })
}

/// The inode of the IPv4 TCP socket from `local` to `peer` in `pid`'s namespace.
fn tcp_inode(pid: u32, local: SocketAddr, peer: SocketAddr) -> Option<u64> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).ok()?;
    // "0100007F:1F90": the address as the kernel holds it (network order), the port in hex
    let addr = |s: &str| -> Option<SocketAddr> {
        let (ip, port) = s.split_once(':')?;
        let ip = std::net::Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_ne_bytes());
        Some(SocketAddr::from((ip, u16::from_str_radix(port, 16).ok()?)))
    };
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && addr(f[1]) == Some(local) && addr(f[2]) == Some(peer)).then(|| f[9].parse().ok())?
    })
}
