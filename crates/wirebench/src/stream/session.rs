//! One stream run against every target: control connections, the event channel that carries
//! serve's `Interval` and `Result` messages, interval lines, and the shapes both transports
//! return.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use anyhow::{Context as _, anyhow, bail};
use wirebench_core::auth::Key;
use wirebench_core::report::{ReceiverResult, SenderResult};
use wirebench_core::stream::StreamCounts;
use wirebench_core::wire::control::{Control, Direction, Granted, StreamRequest};
use wirebench_core::wire::handshake;

use crate::control;
use crate::flow::send::Behind;
use crate::shutdown::{Input, Shutdown};
pub(super) use wirebench_core::stream::client::{ServeResult, close_rows, counts_of, intervals, total};
pub(super) use wirebench_report::words::{bits_words, rate_words, secs_words};

/// What one run needs beyond the config: the size, rate and bounds of this trial.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunSpec {
    /// Message size.
    pub size: usize,
    /// Messages per second per publisher (`None`: flat out).
    pub rate: Option<f64>,
    /// Messages per publisher at most.
    pub count: Option<u64>,
    /// How long.
    pub duration: Duration,
    /// What a paced sender does after a stall: catch up (a run) or resume at the rate (a
    /// search's trial, whose bottleneck would queue the catch-up burst).
    pub behind: Behind,
}

/// What one run measured.
#[derive(Debug, Default)]
pub(super) struct RunOut {
    /// The sending side (forward).
    pub sender: Option<SenderResult>,
    /// One row per receiver.
    pub receivers: Vec<ReceiverResult>,
    /// For the report.
    pub warnings: Vec<String>,
    /// A serve went away mid-run.
    pub peer_lost: Option<String>,
    /// This client's senders' own health (forward).
    pub generator: Option<wirebench_core::report::GeneratorHealth>,
    /// The most sending time one of this client's senders skipped after stalls
    /// (`send::Behind::Resume`), ns.
    pub skipped_ns: u64,
}

/// How a run shows its progress: interval lines (unless quiet), drawn around the bar when
/// one is on the terminal; `done` is what the bar counts (messages received, or trials).
#[derive(Debug, Default)]
pub(super) struct Live {
    /// Print interval lines.
    pub lines: bool,
    /// Intervals one line covers (0 is taken as 1).
    pub every: usize,
    /// The progress bar, if any.
    pub bar: Option<crate::progress::Progress>,
    /// What the bar counts.
    pub done: Arc<AtomicU64>,
}

impl Live {
    /// Prints an interval line of receiver `name` when its newest snapshot ends a line's
    /// worth of intervals: that snapshot against the one a line before.
    pub(super) fn interval(&self, out: &mut dyn std::io::Write, name: &str, snaps: &[(u64, StreamCounts)]) {
        let every = self.every.max(1);
        if !self.lines || snaps.is_empty() || !snaps.len().is_multiple_of(every) {
            return;
        }
        let (at, last) = snaps[snaps.len() - 1];
        let (c, span) = match snaps.len().checked_sub(every + 1).map(|k| snaps[k]) {
            Some((from, before)) => (last.since(&before), at.saturating_sub(from)),
            None => (last, at),
        };
        match &self.bar {
            Some(b) => b.suspend(|| interval_line(out, at, name, &c, span)),
            None => interval_line(out, at, name, &c, span),
        }
    }
}

/// A message from target `i`'s control connection, and when it arrived.
pub(super) type Event = (usize, Instant, Control);

/// Connects to `addr`, asks for the stream, and waits for `Ready`. Returns the connection
/// and the UDP data port and granted receive buffer. A run that receives reverse UDP data
/// gives `knock_from`: serve sends only to the port its knock came from, so the knock goes
/// from that socket. A serve that will send slower or for less time than asked (its rate
/// cap, its `--max-duration`) adds a line to `warnings`.
pub(super) fn start(
    addr: SocketAddr,
    req: &StreamRequest,
    knock_from: Option<&UdpSocket>,
    warnings: &mut Vec<String>,
    stop: &Shutdown,
) -> anyhow::Result<(TcpStream, u16, usize)> {
    let (conn, port, rcvbuf, granted) = start_granted(addr, req, knock_from, stop)?;
    // How long the run needs serve to send: its duration, or a counted run's count at its
    // rate if that is sooner (a counted run's duration is only its deadline); unknown for a
    // counted run flat out.
    #[expect(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "ns")]
    let needs_ns = match (req.count, granted.rate_per_s.or(req.rate_per_s)) {
        (None, _) => Some(req.duration_ns),
        (Some(n), Some(r)) if r > 0.0 => Some(req.duration_ns.min((n as f64 / r * 1e9) as u64)),
        (Some(_), _) => None,
    };
    if req.direction != Direction::Forward
        && let Some(needs) = needs_ns.filter(|&n| granted.duration_ns < n)
    {
        warnings.push(format!(
            "{addr} sends for at most {} (its --max-duration; the run needs {}): the run ends there",
            secs_words(granted.duration_ns, 1),
            secs_words(needs, 1)
        ));
    }
    if req.direction != Direction::Forward
        && let Some(g) = granted.rate_per_s
        && req.rate_per_s.is_none_or(|asked| g < asked)
    {
        let asked = req.rate_per_s.map_or_else(|| "flat out".into(), rate_words);
        #[expect(clippy::cast_precision_loss, reason = "a message size, far below 2^52")]
        let bits = g * f64::from(req.publishers.max(1)) * req.size as f64 * 8.0;
        warnings.push(format!(
            "{addr} sends at most {} per publisher, {} of payload in all (its cap for this session; asked {asked}): serve --max-rate or a token raises it",
            rate_words(g),
            bits_words(bits)
        ));
    }
    Ok((conn, port, rcvbuf))
}

fn start_granted(
    addr: SocketAddr,
    req: &StreamRequest,
    knock_from: Option<&UdpSocket>,
    stop: &Shutdown,
) -> anyhow::Result<(TcpStream, u16, usize, Granted)> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot connect to {addr}: is `wirebench serve` running there?"))?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    handshake(&mut conn, addr, req, stop)?;
    answered(&conn, addr, stop)?;
    match control::recv(&mut conn) {
        Ok(Control::Ready { data_port, rcvbuf, granted }) => Ok((conn, data_port, rcvbuf, granted)),
        Ok(Control::Knock { port, secret }) => {
            let sock = knock_from.ok_or_else(|| anyhow!("{addr} asked for a knock this run does not need"))?;
            let secret: [u8; handshake::SECRET_LEN] = handshake::unhex(&secret)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| anyhow!("{addr} sent a bad knock secret"))?;
            let to = SocketAddr::new(addr.ip(), port);
            sock.send_to(&handshake::knock(&secret), to).with_context(|| format!("cannot knock at {to}"))?;
            let mut knocks = 1u32;
            // Repeat the knock (UDP may lose it) until serve answers.
            conn.set_read_timeout(Some(Duration::from_millis(100)))?;
            while knocks < 50 {
                match control::recv(&mut conn) {
                    Ok(m) => return after_knock(conn, addr, m),
                    Err(e) if control::is_timeout(&e) => {
                        let _ = sock.send_to(&handshake::knock(&secret), to);
                        knocks += 1;
                    }
                    Err(e) => return Err(e).with_context(|| format!("{addr} did not answer the knock")),
                }
            }
            bail!("{addr} did not answer {knocks} knocks from UDP port {}", sock.local_addr()?.port());
        }
        Ok(Control::Error { message }) => bail!("{addr} refused the stream: {message}"),
        Ok(other) => bail!("{addr} answered {other:?} to a stream request"),
        Err(e) => Err(e).with_context(|| format!("{addr} did not answer the stream request")),
    }
}

fn after_knock(conn: TcpStream, addr: SocketAddr, m: Control) -> anyhow::Result<(TcpStream, u16, usize, Granted)> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    match m {
        Control::Ready { data_port, rcvbuf, granted } => Ok((conn, data_port, rcvbuf, granted)),
        Control::Error { message } => bail!("{addr} refused the stream: {message}"),
        other => bail!("{addr} answered {other:?} to a knock"),
    }
}

/// Waits until serve's next control message starts to arrive, or the stop (Ctrl-C), or 10 s:
/// a run stopped while serve has not answered yet ends at once with what it has.
fn answered(conn: &TcpStream, addr: SocketAddr, stop: &Shutdown) -> anyhow::Result<()> {
    match stop.wait_input(conn, Some(Duration::from_secs(10))) {
        Input::Stop => bail!("interrupted while waiting for {addr} to answer"),
        // Ready, or quiet: the read then reports what the socket has (or its timeout).
        Input::Ready | Input::Quiet => Ok(()),
    }
}

/// `hello`, `challenge`, then `auth` (with a token) and `start`. With a token, serve must
/// prove it knows it too.
fn handshake(conn: &mut TcpStream, addr: SocketAddr, req: &StreamRequest, stop: &Shutdown) -> anyhow::Result<()> {
    let nc = handshake::hex(&crate::ctx::os_random::<{ handshake::NONCE_LEN }>()?);
    control::send(conn, &Control::Hello { nonce: nc.clone() })?;
    answered(conn, addr, stop)?;
    let (ns, auth, salt) = match control::recv(conn) {
        Ok(Control::Challenge { nonce, auth, salt }) => (nonce, auth, salt),
        Ok(Control::Error { message }) => bail!("{addr} refused the stream: {message}"),
        Ok(other) => bail!("{addr} answered {other:?} to hello"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            bail!("{addr} closed the connection at hello: an older wirebench serve (control version 1)? upgrade it")
        }
        Err(e) => {
            if let Some(v) = older_version(&e) {
                bail!(
                    "{addr} speaks control version {v}, this client {}: an older wirebench serve, upgrade it",
                    wirebench_core::wire::control::VERSION
                );
            }
            return Err(e).with_context(|| format!("{addr} did not answer hello"));
        }
    };
    match (req.token.as_deref(), auth) {
        (None, true) => bail!("{addr} needs a token: give --token or set WIREBENCH_TOKEN"),
        (Some(t), true) => {
            // The client proves first; serve's proof comes only to a client that proved.
            let k = Key::derive(t.as_bytes(), salt.as_deref().unwrap_or_default().as_bytes());
            control::send(conn, &Control::Auth { tag: handshake::client_tag(&k, &nc, &ns) })?;
            answered(conn, addr, stop)?;
            match control::recv(conn) {
                Ok(Control::Welcome { proof }) if handshake::verify_serve(&k, &nc, &ns, &proof) => {}
                Ok(Control::Welcome { .. }) => {
                    bail!("{addr} could not prove it knows the token: not the serve you meant")
                }
                Ok(Control::Error { message }) => bail!("{addr} refused the token: {message}"),
                Ok(other) => bail!("{addr} answered {other:?} to the token"),
                Err(e) => return Err(e).with_context(|| format!("{addr} did not answer the token")),
            }
        }
        (_, false) => {}
    }
    control::send(conn, &Control::Start(req.clone()))?;
    Ok(())
}

/// The control version of an older serve's answer, when that is why it could not be read.
fn older_version(e: &std::io::Error) -> Option<u8> {
    let text = e.to_string();
    let v: u8 = text.strip_prefix("unsupported wire version ")?.trim().parse().ok()?;
    (v < wirebench_core::wire::control::VERSION).then_some(v)
}

/// Reads `conn` on a thread, forwarding each message as target `i`'s event until a
/// `Result`, an error, or the connection's end (reported as an `Error` event). Each message
/// is stamped with its arrival time here, so an interval's end is when serve said it, not
/// when someone got round to reading the channel.
pub(super) fn watch(i: usize, mut conn: TcpStream, tx: Sender<Event>) -> anyhow::Result<()> {
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    std::thread::spawn(move || {
        loop {
            match control::recv(&mut conn) {
                Ok(m) => {
                    let done = matches!(m, Control::Result { .. } | Control::Error { .. });
                    if tx.send((i, Instant::now(), m)).is_err() || done {
                        return;
                    }
                }
                Err(e) if control::is_timeout(&e) => {}
                Err(e) => {
                    let m = Control::Error { message: format!("control connection lost: {e}") };
                    let _ = tx.send((i, Instant::now(), m));
                    return;
                }
            }
        }
    });
    Ok(())
}

/// A new event channel.
pub(super) fn channel() -> (Sender<Event>, Receiver<Event>) {
    mpsc::channel()
}

/// Nanoseconds from `t0` to `t` (0 if `t` is earlier).
pub(super) fn ns_since(t0: Instant, t: Instant) -> u64 {
    nanos(t.saturating_duration_since(t0))
}

/// One progress line for receiver `name`'s interval `c` of length `span_ns`.
fn interval_line(out: &mut dyn std::io::Write, at_ns: u64, name: &str, c: &StreamCounts, span_ns: u64) {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let secs = at_ns as f64 / 1e9;
    // out of order and duplicates only when there were any: the line stays within a screen
    let some = |what: &str, n: u64| if n > 0 { format!("  {what} {n}") } else { String::new() };
    let _ = writeln!(
        out,
        "[{secs:6.1}s] {name}  {}  {}  lost {}/{} ({:.3}%){}{}  jitter {:.1} us",
        rate_words(c.per_sec(span_ns)),
        bits_words(c.bits_per_sec(span_ns)),
        c.missing(),
        c.expected,
        100.0 * (1.0 - c.success_rate()),
        some("ooo", c.out_of_order),
        some("dup", c.duplicates),
        c.jitter_ns / 1000.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(received: u64) -> StreamCounts {
        StreamCounts { received, expected: received, bytes: received * 200, ..StreamCounts::default() }
    }

    const MS: u64 = 1_000_000;

    /// The lines `live` prints as snapshots (one a second, 1,000 messages each, the fifth
    /// second missing 10) arrive one by one.
    fn lines_of(live: &Live, seconds: u64) -> Vec<String> {
        let mut out = Vec::new();
        let mut snaps = Vec::new();
        for s in 1..=seconds {
            let lost = if s >= 5 { 10 } else { 0 };
            let c = StreamCounts { expected: s * 1000, ..counts(s * 1000 - lost) };
            snaps.push((s * 1000 * MS, c));
            live.interval(&mut out, "x", &snaps);
        }
        String::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_line_covers_the_intervals_since_the_line_before() {
        let each = Live { lines: true, every: 1, ..Live::default() };
        let lines = lines_of(&each, 25);
        assert_eq!(lines.len(), 25);
        assert!(lines[0].starts_with("[   1.0s] x  1.0k msg/s") && lines[0].contains("lost 0/1000 "), "{}", lines[0]);
        assert!(lines[4].contains("lost 10/1000 "), "{}", lines[4]);
        let thirds = Live { lines: true, every: 3, ..Live::default() };
        let lines = lines_of(&thirds, 25);
        assert_eq!(lines.len(), 8, "25 intervals, a line per three: {lines:?}");
        assert!(lines[0].starts_with("[   3.0s] x  1.0k msg/s") && lines[0].contains("lost 0/3000 "), "{}", lines[0]);
        assert!(lines[1].starts_with("[   6.0s]") && lines[1].contains("lost 10/3000 "), "{}", lines[1]);
        assert!(lines[7].starts_with("[  24.0s]") && lines[7].contains("lost 0/3000 "), "{}", lines[7]);
        assert!(lines_of(&Live { lines: false, every: 1, ..Live::default() }, 5).is_empty(), "quiet");
    }
}
