//! Stream sessions on `serve`, once a control connection was admitted (`session.rs`).
//!
//! Forward (the client sends): UDP data goes to a socket bound for this session (or a group
//! it joins); TCP data follows on the control connection. Serve accounts per publisher, sends
//! an `Interval` snapshot each second, and answers the client's `Finish` with a `Result` once
//! the data has drained. Reverse (serve sends): only ever to the control connection's own
//! address, and over UDP only to the port a knock datagram with the session's secret came
//! from (iperf3's UDP handshake); at the rate and for the duration serve granted, split
//! across the publishers. Every loop watches the session's stop (serve's stop or the
//! session's deadline), and every write gives up on a client that stopped reading.

use std::io::{self, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use wirebench_core::schedule::Stop;
use wirebench_core::stream::wake::WakeRecorder;
use wirebench_core::wire::control::{Control, Direction, Granted, PublisherCounts, StreamProto, StreamRequest};
use wirebench_core::wire::handshake::{self, SECRET_LEN};
use wirebench_net::batch::{UdpBatchReceiver, UdpBatchSender, size_buffers};
use wirebench_net::multicast;

use super::session::{Admitted, STALL, SessionStop};
use super::{Counters, Shared};
use crate::control::{self, send_bounded};
use crate::flow::STREAM_BUFFER;
use crate::flow::recv::{self, Accounts, Progress};
use crate::flow::send::{self, Out, SendSpec};
use crate::shutdown::POLL;

/// How long serve waits for the knock of a reverse UDP session.
pub(super) const KNOCK_WAIT: Duration = Duration::from_secs(5);

fn publishers(counts: Vec<wirebench_core::stream::StreamCounts>) -> Vec<PublisherCounts> {
    counts
        .into_iter()
        .enumerate()
        .map(|(i, counts)| PublisherCounts { publisher: u16::try_from(i).unwrap_or(u16::MAX), counts })
        .collect()
}

/// Runs one admitted session to its end.
pub(super) fn run(mut conn: TcpStream, a: &Admitted, shared: &Shared) -> io::Result<()> {
    let stop = SessionStop::start(&shared.shutdown, a.grant.duration)?;
    match a.req.proto {
        StreamProto::Udp => udp_session(&mut conn, a, shared, &stop),
        StreamProto::Tcp if a.req.direction == Direction::Forward => tcp_forward(&mut conn, a, &stop),
        StreamProto::Tcp => tcp_reverse(conn, a, &stop),
    }
}

fn granted(a: &Admitted) -> Granted {
    Granted { rate_per_s: a.grant.per_publisher, duration_ns: nanos(a.grant.duration) }
}

/// The send spec for serve's own (reverse) sending, as granted.
fn reverse_spec(a: &Admitted, publisher: u16) -> SendSpec {
    SendSpec {
        session: a.req.session,
        publisher,
        size: a.req.size,
        rate: a.grant.per_publisher,
        stop: Stop { max_count: a.req.count, deadline: Some(a.grant.duration) },
        ignore_refused: false,
    }
}

/// Reverse UDP: tells the client a port and a fresh secret, and waits for a datagram with
/// that secret from the control connection's address. Its source is where the data goes.
fn knock(conn: &mut TcpStream, shared: &Shared, stop: &SessionStop) -> io::Result<SocketAddr> {
    let sock = UdpSocket::bind(SocketAddr::new(conn.local_addr()?.ip(), 0))?;
    sock.set_read_timeout(Some(POLL))?;
    let secret = crate::ctx::os_random::<SECRET_LEN>()?;
    let m = Control::Knock { port: sock.local_addr()?.port(), secret: handshake::hex(&secret) };
    send_bounded(conn, &m, stop.flag(), STALL)?;
    let peer = conn.peer_addr()?.ip();
    let since = Instant::now();
    let mut buf = [0u8; 64];
    while !stop.is_set() && since.elapsed() < KNOCK_WAIT {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        match handshake::parse_knock(&buf[..n]) {
            Ok(s) if from.ip() == peer && handshake::same_secret(&s, &secret) => return Ok(from),
            _ => Counters::bump(&shared.counters.bad_knocks),
        }
    }
    let why = format!("no knock datagram with this session's secret came from {peer} within {KNOCK_WAIT:?}");
    let _ = send_bounded(conn, &Control::Error { message: why.clone() }, stop.flag(), STALL);
    Err(io::Error::new(io::ErrorKind::TimedOut, why))
}

/// Forward data's receiver: a socket (the group's, or a port of its own on the control
/// connection's address) read on a thread; returns the thread, the port and the receive
/// buffer granted.
fn receive(
    conn: &TcpStream,
    req: &StreamRequest,
    shared: &Shared,
    progress: &Arc<Progress>,
    abort: &crate::shutdown::Shutdown,
) -> io::Result<(JoinHandle<io::Result<Accounts>>, u16, usize)> {
    let sock = match req.group {
        Some(g) => multicast::group_receiver(g, shared.cfg.interface).map_err(io::Error::other)?,
        None => UdpSocket::bind(SocketAddr::new(conn.local_addr()?.ip(), 0))?,
    };
    let rcvbuf = size_buffers(&sock, req.rcvbuf.unwrap_or(STREAM_BUFFER)).0.granted;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let data_port = sock.local_addr()?.port();
    let (p, ab) = (progress.clone(), abort.clone());
    let (session, pubs) = (req.session, req.publishers);
    // GRO on before `ready`: datagrams queued before it would be split one by one.
    let mut rx = UdpBatchReceiver::new(sock);
    let stamped = recv::stamp_rx(&mut rx);
    let job = std::thread::spawn(move || {
        let mut acc = Accounts::new(session, pubs);
        acc.wake = WakeRecorder::new(stamped);
        recv::udp(&mut rx, &mut acc, &p, ab.flag())?;
        Ok(acc)
    });
    Ok((job, data_port, rcvbuf))
}

/// Reverse data's senders, a thread per publisher, to `dest` (where the client knocked from).
fn send_to(
    conn: &TcpStream,
    a: &Admitted,
    dest: SocketAddr,
    abort: &crate::shutdown::Shutdown,
) -> io::Result<Vec<JoinHandle<io::Result<send::Sent>>>> {
    let mut senders = Vec::new();
    for publisher in 0..a.req.publishers {
        let sock = UdpSocket::bind(SocketAddr::new(conn.local_addr()?.ip(), 0))?;
        size_buffers(&sock, STREAM_BUFFER);
        sock.connect(dest)?;
        let spec = reverse_spec(a, publisher);
        let ab = abort.clone();
        senders
            .push(std::thread::spawn(move || send::run(&mut UdpBatchSender::new(sock, spec.size), &spec, ab.flag())));
    }
    Ok(senders)
}

fn udp_session(conn: &mut TcpStream, a: &Admitted, shared: &Shared, stop: &SessionStop) -> io::Result<()> {
    let req: &StreamRequest = &a.req;
    let abort = stop.handle();
    let progress = Arc::new(Progress::default());
    let (receiver, data_port, rcvbuf) = if req.direction == Direction::Reverse {
        (None, 0, 0)
    } else {
        let (job, port, rcvbuf) = receive(conn, req, shared, &progress, &abort)?;
        (Some(job), port, rcvbuf)
    };
    // This host's counters across the session (both ways: the receiver's drops forward,
    // the sender's SndbufErrors reverse), with the interfaces that carry it.
    let ifaces = wirebench_net::iface::receiving(conn.local_addr()?.ip());
    let kernel_before = wirebench_net::counters::Receiving::read(&ifaces);
    let mut senders = Vec::new();
    if req.direction != Direction::Forward {
        let dest = match knock(conn, shared, stop) {
            Ok(d) => d,
            Err(e) => {
                abort.trigger();
                if let Some(h) = receiver {
                    let _ = h.join();
                }
                return Err(e);
            }
        };
        senders = send_to(conn, a, dest, &abort)?;
    }
    send_bounded(conn, &Control::Ready { data_port, rcvbuf, granted: granted(a) }, abort.flag(), STALL)?;
    let mut next_interval = Instant::now() + Duration::from_secs(1);
    let finished = loop {
        if abort.is_set() {
            break false;
        }
        match control::recv_with(conn, &[], &control::Bounds { stop: Some(abort.flag()), ..Default::default() }) {
            Ok(Control::Finish { sent }) => {
                progress.expected.store(sent.iter().sum(), Ordering::Relaxed);
                break true;
            }
            Ok(_) => {}
            Err(e) if control::is_timeout(&e) => {
                if receiver.is_some() && Instant::now() >= next_interval {
                    next_interval += Duration::from_secs(1);
                    // the counters first: a drop is counted before the receiver sees its gap
                    let kernel = kernel_before.since(&wirebench_net::counters::Receiving::read(&ifaces));
                    let snap = progress.snapshot.lock().map(|s| s.clone()).unwrap_or_default();
                    send_bounded(
                        conn,
                        &Control::Interval { publishers: publishers(snap), kernel },
                        abort.flag(),
                        STALL,
                    )?;
                }
            }
            Err(_) => break false,
        }
    };
    if !finished {
        abort.trigger();
    }
    let sent: Vec<send::Sent> =
        senders.into_iter().map(|h| h.join().ok().and_then(Result::ok).unwrap_or_default()).collect();
    progress.finish.store(true, Ordering::Relaxed);
    let (received, foreign, wake) = match receiver {
        Some(h) => {
            let acc = h.join().map_err(|_| io::Error::other("receiver panicked"))??;
            (acc.counts(), acc.foreign, Some(acc.wake.summary()))
        }
        None => (Vec::new(), 0, None),
    };
    let kernel = kernel_before.since(&wirebench_net::counters::Receiving::read(&ifaces));
    let send_ns = send::span_of(&sent);
    let sent = sent.iter().map(|s| s.messages).collect();
    // After a stop the client may still read the result; a client gone is no wait.
    let no_stop = AtomicBool::new(false);
    let result = Control::Result { received: publishers(received), sent, send_ns, foreign, kernel, wake };
    send_bounded(conn, &result, &no_stop, POLL * 5)
}

fn tcp_forward(conn: &mut TcpStream, a: &Admitted, stop: &SessionStop) -> io::Result<()> {
    let abort = stop.handle();
    send_bounded(conn, &Control::Ready { data_port: 0, rcvbuf: 0, granted: granted(a) }, abort.flag(), STALL)?;
    let mut writer = conn.try_clone()?;
    let mut acc = Accounts::new(a.req.session, a.req.publishers);
    let mut tick = |acc: &Accounts| {
        let _ = send_bounded(
            &mut writer,
            &Control::Interval { publishers: publishers(acc.counts()), kernel: None },
            abort.flag(),
            STALL,
        );
    };
    let leftover = recv::tcp(conn, &mut acc, stop.flag(), &mut tick)?;
    let Some(prefix) = leftover else { return Ok(()) };
    match control::recv_with(conn, &prefix, &control::Bounds { stop: Some(stop.flag()), ..Default::default() })? {
        Control::Finish { .. } => send_bounded(
            conn,
            &Control::Result {
                received: publishers(acc.counts()),
                sent: vec![],
                send_ns: 0,
                foreign: acc.foreign,
                kernel: None,
                wake: None,
            },
            stop.flag(),
            STALL,
        ),
        _ => Err(io::Error::other("expected finish")),
    }
}

/// TCP frames written with a stall bound and the session's stop (a client that does not read
/// cannot hold serve).
struct BoundedTcpOut<'a> {
    conn: &'a mut TcpStream,
    size: usize,
    stop: &'a AtomicBool,
}

impl Out for BoundedTcpOut<'_> {
    fn max_batch(&self) -> usize {
        (256 * 1024 / self.size).clamp(1, 64)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        control::write_bounded(self.conn, buf, self.stop, STALL)
            .map_err(|e| if e.kind() == io::ErrorKind::Interrupted { io::ErrorKind::BrokenPipe.into() } else { e })?;
        Ok(buf.len() / self.size)
    }
}

fn tcp_reverse(mut conn: TcpStream, a: &Admitted, stop: &SessionStop) -> io::Result<()> {
    let abort = stop.handle();
    send_bounded(&mut conn, &Control::Ready { data_port: 0, rcvbuf: 0, granted: granted(a) }, abort.flag(), STALL)?;
    // `done`: the client's finish, its going away, or the session's stop ends the sending.
    let done = abort.child();
    let mut reader = conn.try_clone()?;
    let (d, ab) = (done.clone(), abort.clone());
    let watcher = std::thread::spawn(move || {
        while !d.is_set() {
            match control::recv_with(&mut reader, &[], &control::Bounds { stop: Some(ab.flag()), ..Default::default() })
            {
                Err(e) if control::is_timeout(&e) => {}
                _ => break,
            }
        }
        d.trigger();
    });
    let spec = reverse_spec(a, 0);
    let sent =
        send::run(&mut BoundedTcpOut { conn: &mut conn, size: a.req.size, stop: done.flag() }, &spec, done.flag());
    let (messages, send_ns) = sent.as_ref().map_or((0, 0), |s| (s.messages, s.send_ns()));
    let result =
        Control::Result { received: vec![], sent: vec![messages], send_ns, foreign: 0, kernel: None, wake: None };
    let r = send_bounded(&mut conn, &result, abort.flag(), STALL);
    done.trigger();
    let _ = watcher.join();
    let _ = conn.flush();
    sent.map(|_| ()).and(r)
}
