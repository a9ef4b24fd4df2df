//! Stream sessions on `serve`: a TCP connection whose first frame is a control `Start`.
//!
//! Forward (the client sends): UDP data goes to a socket bound for this session (or a group
//! it joins); TCP data follows on the control connection. Serve accounts per publisher, sends
//! an `Interval` snapshot each second, and answers the client's `Finish` with a `Result` once
//! the data has drained. Reverse (serve sends): only ever to the control connection's own
//! address, at most at `--max-rate` and for `--max-duration`.

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wirebench_core::schedule::Stop;
use wirebench_core::wire::control::{Control, Direction, PublisherCounts, StreamProto, StreamRequest};
use wirebench_core::wire::stream;
use wirebench_net::batch::{UdpBatchReceiver, UdpBatchSender, size_buffers};
use wirebench_net::multicast;

use super::{Config, Counters};
use crate::control;
use crate::flow::STREAM_BUFFER;
use crate::flow::recv::{self, Accounts, MAX_PUBLISHERS, Progress};
use crate::flow::send::{self, SendSpec, TcpOut};
use crate::shutdown::Shutdown;

fn publishers(counts: Vec<wirebench_core::stream::StreamCounts>) -> Vec<PublisherCounts> {
    counts
        .into_iter()
        .enumerate()
        .map(|(i, counts)| PublisherCounts { publisher: u16::try_from(i).unwrap_or(u16::MAX), counts })
        .collect()
}

/// Checks a request against this serve's limits; the error is sent back in words.
fn validate(req: &StreamRequest, cfg: &Config) -> Result<(), String> {
    if cfg.token.is_some() && req.token != cfg.token {
        return Err("this serve needs --token (WIREBENCH_TOKEN) and yours does not match".into());
    }
    let max = match req.proto {
        StreamProto::Udp => stream::MAX_UDP_LEN,
        StreamProto::Tcp => usize::from(u16::MAX),
    };
    if req.size < stream::HEADER_LEN || req.size > max {
        return Err(format!("size {} is outside {}..={max}", req.size, stream::HEADER_LEN));
    }
    if req.publishers == 0 || req.publishers > MAX_PUBLISHERS {
        return Err(format!("{} publishers: serve takes 1..={MAX_PUBLISHERS}", req.publishers));
    }
    if req.direction != Direction::Forward && req.proto == StreamProto::Udp && req.client_port.is_none() {
        return Err("a reverse UDP stream needs the client's port".into());
    }
    if req.proto == StreamProto::Tcp && req.direction == Direction::Both {
        return Err("TCP runs one direction per connection: run --reverse separately".into());
    }
    Ok(())
}

/// Serves one stream session on `conn`, whose first bytes (`prefix`) were a control frame.
pub(super) fn handle(mut conn: TcpStream, prefix: &[u8], cfg: &Config, counters: &Counters, shutdown: &Shutdown) {
    let Ok(Control::Start(req)) = control::recv_after(prefix, &mut conn) else {
        counters.control_errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if let Err(message) = validate(&req, cfg) {
        counters.control_errors.fetch_add(1, Ordering::Relaxed);
        let _ = control::send(&mut conn, &Control::Error { message });
        return;
    }
    counters.streams.fetch_add(1, Ordering::Relaxed);
    let r = match req.proto {
        StreamProto::Udp => udp_session(&mut conn, &req, cfg, shutdown),
        StreamProto::Tcp if req.direction == Direction::Forward => tcp_forward(&mut conn, &req, shutdown),
        StreamProto::Tcp => tcp_reverse(conn, &req, cfg, shutdown),
    };
    if r.is_err() {
        // The client went away mid-session (or its data was not ours): count it.
        counters.control_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// The capped send spec for serve's own (reverse) sending.
fn reverse_spec(req: &StreamRequest, cfg: &Config, publisher: u16) -> SendSpec {
    let cap = cfg.max_duration;
    let asked = Duration::from_nanos(req.duration_ns);
    let rate = match (req.rate_per_s, cfg.max_rate.and_then(|m| m.per_sec(req.size))) {
        (Some(r), Some(m)) => Some(r.min(m)),
        (None, m) => m,
        (r, None) => r,
    };
    SendSpec {
        session: req.session,
        publisher,
        size: req.size,
        rate,
        stop: Stop { max_count: req.count, deadline: Some(if asked.is_zero() { cap } else { asked.min(cap) }) },
        ignore_refused: false,
    }
}

fn udp_session(conn: &mut TcpStream, req: &StreamRequest, cfg: &Config, shutdown: &Shutdown) -> io::Result<()> {
    let abort = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let mut receiver: Option<JoinHandle<io::Result<Accounts>>> = None;
    let mut data_port = 0;
    let mut rcvbuf = 0;
    let mut kernel_before = None;
    if req.direction != Direction::Reverse {
        let sock = match req.group {
            Some(g) => multicast::group_receiver(g, cfg.interface).map_err(io::Error::other)?,
            None => UdpSocket::bind(SocketAddr::new(conn.local_addr()?.ip(), 0))?,
        };
        rcvbuf = size_buffers(&sock, STREAM_BUFFER).0.granted;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        data_port = sock.local_addr()?.port();
        let (p, a) = (progress.clone(), abort.clone());
        let (session, pubs) = (req.session, req.publishers);
        // GRO on before `ready`: datagrams queued before it would be split one by one.
        let mut rx = UdpBatchReceiver::new(sock);
        receiver = Some(std::thread::spawn(move || {
            let mut acc = Accounts::new(session, pubs);
            recv::udp(&mut rx, &mut acc, &p, &a)?;
            Ok(acc)
        }));
        kernel_before = wirebench_net::snmp::read();
    }
    let mut senders = Vec::new();
    if req.direction != Direction::Forward {
        let dest = SocketAddr::new(conn.peer_addr()?.ip(), req.client_port.unwrap_or(0));
        for publisher in 0..req.publishers {
            let sock = UdpSocket::bind(SocketAddr::new(conn.local_addr()?.ip(), 0))?;
            size_buffers(&sock, STREAM_BUFFER);
            sock.connect(dest)?;
            let spec = reverse_spec(req, cfg, publisher);
            let a = abort.clone();
            senders.push(std::thread::spawn(move || send::run(&mut UdpBatchSender::new(sock, spec.size), &spec, &a)));
        }
    }
    control::send(conn, &Control::Ready { data_port, rcvbuf })?;
    conn.set_read_timeout(Some(Duration::from_secs(1)))?;
    let finished = loop {
        if shutdown.is_set() {
            break false;
        }
        match control::recv(conn) {
            Ok(Control::Finish { sent }) => {
                progress.expected.store(sent.iter().sum(), Ordering::Relaxed);
                break true;
            }
            Ok(_) => {}
            Err(e) if control::is_timeout(&e) => {
                if receiver.is_some() {
                    let snap = progress.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
                    control::send(conn, &Control::Interval { publishers: publishers(snap) })?;
                }
            }
            Err(_) => break false,
        }
    };
    if !finished {
        abort.store(true, Ordering::Relaxed);
    }
    let sent: Vec<send::Sent> =
        senders.into_iter().map(|h| h.join().ok().and_then(Result::ok).unwrap_or_default()).collect();
    progress.finish.store(true, Ordering::Relaxed);
    let (received, foreign) = match receiver {
        Some(h) => {
            let acc = h.join().map_err(|_| io::Error::other("receiver panicked"))??;
            (acc.counts(), acc.foreign)
        }
        None => (Vec::new(), 0),
    };
    let kernel = kernel_before.zip(wirebench_net::snmp::read()).map(|(a, b)| b.since(&a, &["Udp", "Tcp"]));
    let send_ns = send::span_of(&sent);
    let sent = sent.iter().map(|s| s.messages).collect();
    control::send(conn, &Control::Result { received: publishers(received), sent, send_ns, foreign, kernel })
}

fn tcp_forward(conn: &mut TcpStream, req: &StreamRequest, shutdown: &Shutdown) -> io::Result<()> {
    control::send(conn, &Control::Ready { data_port: 0, rcvbuf: 0 })?;
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut writer = conn.try_clone()?;
    let mut acc = Accounts::new(req.session, req.publishers);
    let mut tick = |a: &Accounts| {
        let _ = control::send(&mut writer, &Control::Interval { publishers: publishers(a.counts()) });
    };
    let leftover = recv::tcp(conn, &mut acc, shutdown.flag(), &mut tick)?;
    let Some(prefix) = leftover else { return Ok(()) };
    match control::recv_after(&prefix, conn)? {
        Control::Finish { .. } => control::send(
            conn,
            &Control::Result {
                received: publishers(acc.counts()),
                sent: vec![],
                send_ns: 0,
                foreign: acc.foreign,
                kernel: None,
            },
        ),
        _ => Err(io::Error::other("expected finish")),
    }
}

fn tcp_reverse(mut conn: TcpStream, req: &StreamRequest, cfg: &Config, shutdown: &Shutdown) -> io::Result<()> {
    control::send(&mut conn, &Control::Ready { data_port: 0, rcvbuf: 0 })?;
    let stop = Arc::new(AtomicBool::new(false));
    // The client's Finish (or its going away) stops the sending early.
    let mut reader = conn.try_clone()?;
    reader.set_read_timeout(Some(Duration::from_millis(200)))?;
    let (s, sd) = (stop.clone(), shutdown.clone());
    let watcher = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) && !sd.is_set() {
            match control::recv(&mut reader) {
                Err(e) if control::is_timeout(&e) => {}
                _ => break,
            }
        }
        s.store(true, Ordering::Relaxed);
    });
    let spec = reverse_spec(req, cfg, 0);
    let sent = send::run(&mut TcpOut { conn: &mut conn, size: req.size }, &spec, &stop);
    let (messages, send_ns) = sent.as_ref().map_or((0, 0), |s| (s.messages, s.send_ns()));
    let r = control::send(
        &mut conn,
        &Control::Result { received: vec![], sent: vec![messages], send_ns, foreign: 0, kernel: None },
    );
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    sent.map(|_| ()).and(r)
}
