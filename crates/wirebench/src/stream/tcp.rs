//! A TCP stream run: one connection per target and publisher; frames of `size` bytes
//! (header + payload) back to back. Forward: this client writes, serve counts. Reverse:
//! serve writes, this client counts.
//!
//! Every connection's control messages (serve's `interval` snapshots and its `result`)
//! come to this thread as they arrive, stamped with their arrival time, so interval lines
//! print live and each interval row ends when its counts were taken. A target's row `m` is
//! the sum of its connections' `m`-th snapshots (each connection reports once a second from
//! its own start, and they start together).
//!
//! Rates: a receiver's are over its receiving time, not the sending time. A write returns
//! once the socket buffer holds the bytes; with several connections the buffers and the
//! path's queues hold seconds of a slow link, which arrive after the last write (through a
//! 1 Gbit/s tbf, four connections' bytes over the writing time came to 964 Mbit/s of
//! payload, where 1 Gbit/s of 1514-byte frames carries at most 956). The sender's line is
//! its write rate.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use anyhow::{anyhow, bail};
use wirebench_core::report::{ReceiverResult, StreamDirection};
use wirebench_core::schedule::Stop;
use wirebench_core::stream::StreamCounts;
use wirebench_core::wire::control::{Control, Direction, PublisherCounts, StreamProto, StreamRequest};
use wirebench_net::clock::{Clock as _, MonoClock};

use super::config::Config;
use super::session::{self, Event, Live, RunOut, RunSpec, ServeResult};
use super::udp::sender_result;
use crate::control;
use crate::ctx::Ctx;
use crate::flow::recv::{self, Accounts};
use crate::flow::send::{self, SendSpec, Sent, TcpOut};
use crate::shutdown::Shutdown;

/// What one connection's thread measured.
#[derive(Debug, Default)]
struct ConnOut {
    sent: Option<Sent>,
    retransmits: Option<u64>,
    /// Reverse: what this client received, and what was not stream messages.
    received: Vec<StreamCounts>,
    foreign: u64,
}

/// How long serve has to answer after the last frame.
const RESULT_WAIT: Duration = Duration::from_secs(30);

fn request(cfg: &Config, spec: &RunSpec, session: u64) -> StreamRequest {
    StreamRequest {
        session,
        token: cfg.token.clone(),
        proto: StreamProto::Tcp,
        size: spec.size,
        direction: cfg.direction,
        publishers: 1,
        rate_per_s: spec.rate,
        duration_ns: nanos(spec.duration),
        count: spec.count,
        client_port: None,
        group: None,
        rcvbuf: None,
    }
}

/// Forward: writes frames, then `finish`; serve's messages reach the run through `watch`.
fn forward(mut conn: TcpStream, spec: &RunSpec, session: u64, stop: &AtomicBool) -> anyhow::Result<ConnOut> {
    let s = SendSpec {
        session,
        publisher: 0,
        size: spec.size,
        rate: spec.rate,
        stop: Stop { max_count: spec.count, deadline: Some(spec.duration) },
        ignore_refused: false,
    };
    let sent = send::run(&mut TcpOut { conn: &mut conn, size: spec.size }, &s, stop)?;
    if sent.refused {
        bail!("the connection was reset mid-run");
    }
    let retransmits = wirebench_net::tcpinfo::stats(&conn).map(|t| u64::from(t.retransmits));
    control::send(&mut conn, &Control::Finish { sent: vec![sent.messages] })?;
    Ok(ConnOut { sent: Some(sent), retransmits, ..ConnOut::default() })
}

/// Reverse: counts frames, sending its own snapshots and serve's final `result` to the run.
fn reverse(
    k: usize,
    mut conn: TcpStream,
    session: u64,
    stop: &AtomicBool,
    tx: &std::sync::mpsc::Sender<Event>,
) -> anyhow::Result<ConnOut> {
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut acc = Accounts::new(session, 1);
    let mut tick = |a: &Accounts| {
        let publishers = a.counts().into_iter().map(|counts| PublisherCounts { publisher: 0, counts }).collect();
        let _ = tx.send((k, Instant::now(), Control::Interval { publishers, kernel: None }));
    };
    let leftover = recv::tcp(&mut conn, &mut acc, stop, &mut tick)?;
    match leftover {
        Some(prefix) => match control::recv_after(&prefix, &mut conn)? {
            m @ Control::Result { .. } => {
                let _ = tx.send((k, Instant::now(), m));
            }
            Control::Error { message } => bail!("{message}"),
            other => bail!("unexpected {other:?}"),
        },
        None if stop.load(Ordering::Relaxed) => {
            let _ = control::send(&mut conn, &Control::Finish { sent: vec![] });
        }
        None => bail!("the connection closed before serve's results"),
    }
    Ok(ConnOut { received: acc.counts(), foreign: acc.foreign, ..ConnOut::default() })
}

/// A connection of the run.
struct Conn {
    target: usize,
    job: JoinHandle<anyhow::Result<ConnOut>>,
    snaps: Vec<(u64, StreamCounts)>,
    result: Option<ServeResult>,
}

/// A forward connection up, its writer not yet started: its target, session and socket.
type Started = (usize, u64, TcpStream);

/// Opens every connection (`--parallel` per target, each its own session); a reverse one's
/// reader starts at once. What a serve said it will do short of what was asked (a reverse
/// run's rate cap) goes into `warnings` once per target: each connection has the same grant.
fn open(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    ctx: &Ctx<'_>,
    stop: &Shutdown,
    tx: &Sender<Event>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(Vec<Conn>, Vec<Started>)> {
    let reverse_run = cfg.direction == Direction::Reverse;
    // Reverse: serve writes as soon as it said `ready`, so each connection is read from then
    // on (a reader that started after the other connections' handshakes, themselves queued
    // behind this data, found a backlog and stamped its arrivals late). Forward: the writers
    // start together once every connection is up.
    let mut conns = Vec::new();
    let mut started = Vec::new();
    for (i, &target) in cfg.targets.iter().enumerate() {
        for p in 0..cfg.parallel {
            // Each connection is its own session: serve counts one publisher per connection.
            let session = session.wrapping_add(u64::from(p));
            let mut said = Vec::new();
            let started_conn = session::start(target, &request(cfg, spec, session), None, &mut said, &ctx.shutdown);
            for w in said {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            let conn = match started_conn {
                Ok((conn, _, _)) => conn,
                Err(e) => {
                    stop.trigger();
                    return Err(e);
                }
            };
            if reverse_run {
                let (k, st, tx) = (conns.len(), stop.clone(), tx.clone());
                let job = std::thread::spawn(move || reverse(k, conn, session, st.flag(), &tx));
                conns.push(Conn { target: i, job, snaps: Vec::new(), result: None });
            } else {
                started.push((i, session, conn));
            }
        }
    }
    Ok((conns, started))
}

/// Runs one TCP stream against every target.
pub(super) fn run(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    ctx: &mut Ctx<'_>,
    live: &Live,
) -> anyhow::Result<RunOut> {
    let stop = ctx.shutdown.child();
    let reverse_run = cfg.direction == Direction::Reverse;
    let (tx, events) = session::channel();
    let mut warnings: Vec<String> = Vec::new();
    let (mut conns, started) = open(cfg, spec, session, ctx, &stop, &tx, &mut warnings)?;
    let t0 = Instant::now();
    let t0_mono = MonoClock::default().now_ns();
    for (k, (i, session, conn)) in started.into_iter().enumerate() {
        let (st, spec) = (stop.clone(), *spec);
        session::watch(k, conn.try_clone()?, tx.clone())?;
        let job = std::thread::spawn(move || forward(conn, &spec, session, st.flag()));
        conns.push(Conn { target: i, job, snaps: Vec::new(), result: None });
    }
    drop(tx);
    let mut out = RunOut { warnings, ..RunOut::default() };
    let mut printed = vec![0usize; cfg.targets.len()];
    let mut all_done_at: Option<Instant> = None;
    loop {
        let threads_done = conns.iter().all(|c| c.job.is_finished());
        let results_in = reverse_run || conns.iter().all(|c| c.result.is_some());
        if threads_done && (results_in || out.peer_lost.is_some()) {
            break;
        }
        if threads_done && all_done_at.get_or_insert_with(Instant::now).elapsed() > RESULT_WAIT {
            out.peer_lost = Some(format!("a serve did not send its results within {RESULT_WAIT:?}"));
            break;
        }
        if let Ok(ev) = events.recv_timeout(Duration::from_millis(20)) {
            on_event(ev, &mut conns, &mut out, &mut printed, &Shown { cfg, live, t0 }, ctx, &stop);
        }
        let got: u64 = conns.iter().filter_map(|c| c.snaps.last()).map(|s| s.1.received).sum();
        live.done.store(got, Ordering::Relaxed);
    }
    // Threads that finished have sent everything they will (a reverse thread's result).
    while let Ok(ev) = events.try_recv() {
        on_event(ev, &mut conns, &mut out, &mut printed, &Shown { cfg, live, t0 }, ctx, &stop);
    }
    let end_ns = session::ns_since(t0, Instant::now());
    let mut outs = Vec::new();
    for c in conns {
        match c.job.join().map_err(|_| anyhow!("a connection thread panicked"))? {
            Ok(o) => outs.push((c.target, o, c.snaps, c.result)),
            Err(e) => out.peer_lost = Some(format!("{e:#}")),
        }
    }
    let sents: Vec<Sent> = outs.iter().filter_map(|o| o.1.sent.clone()).collect();
    if !sents.is_empty() {
        let mut s = sender_result(&sents);
        s.retransmits = Some(outs.iter().filter_map(|o| o.1.retransmits).sum());
        out.generator = Some(super::health::of(&sents, spec.rate, &s));
        out.sender = Some(s);
    }
    for (i, target) in cfg.targets.iter().enumerate() {
        let mine: Vec<&Out> = outs.iter().filter(|o| o.0 == i).collect();
        if !mine.is_empty() {
            out.receivers.push(receiver_row(target, &mine, reverse_run, end_ns, t0_mono));
        }
    }
    Ok(out)
}

/// What one connection left: its target, what its thread measured, its rows, serve's result.
type Out = (usize, ConnOut, Vec<(u64, StreamCounts)>, Option<ServeResult>);

/// The row of one target from its connections `mine` (its rows closed at the end of the
/// receiving, `end_ns` after the start for a reverse run).
fn receiver_row(target: &SocketAddr, mine: &[&Out], reverse_run: bool, end_ns: u64, t0_mono: u64) -> ReceiverResult {
    let publishers: Vec<StreamCounts> = mine
        .iter()
        .map(|(_, o, _, r)| {
            if reverse_run {
                session::total(&o.received)
            } else {
                r.as_ref().map_or_else(StreamCounts::default, |r| session::total(&r.received))
            }
        })
        .collect();
    let total = session::total(&publishers);
    // The rates' time base: the bytes the sender wrote reach the receiver after its
    // last write returns (socket buffers, queues), so they are over their arrival.
    let recv_ns = StreamCounts::receiving_ns_of(&publishers);
    let results = || mine.iter().filter_map(|(_, _, _, r)| r.as_ref());
    let (sent, send_ns, final_at) = if reverse_run {
        // serve's own sending time; from an older serve, the run's time here.
        let ns = results().map(|r| r.send_ns).max().unwrap_or(0);
        let here = end_ns;
        (results().map(|r| r.sent.iter().sum::<u64>()).sum(), if ns > 0 { ns } else { here }, here)
    } else {
        let s: Vec<Sent> = mine.iter().filter_map(|o| o.1.sent.clone()).collect();
        // The last row ends when the last byte had arrived: serve answers `finish` after
        // it read everything before it on the connection, so no earlier than its result.
        let answered = results().filter_map(|r| r.at_ns).max().unwrap_or(0);
        (s.iter().map(|x| x.messages).sum(), send::span_of(&s), send::end_after(&s, t0_mono).max(answered))
    };
    let mut snaps = rows_of(&mine.iter().map(|o| o.2.as_slice()).collect::<Vec<_>>());
    session::close_rows(&mut snaps, final_at, total);
    ReceiverResult {
        addr: if reverse_run { format!("local<-{target}") } else { target.to_string() },
        direction: if reverse_run { StreamDirection::Reverse } else { StreamDirection::Forward },
        sent,
        total,
        publishers,
        intervals: session::intervals(&snaps),
        send_ns,
        recv_ns,
        foreign: mine.iter().map(|(_, o, _, r)| o.foreign + r.as_ref().map_or(0, |r| r.foreign)).sum(),
        kernel: None,
        loss_split: None,
        wake: None,
    }
}

/// What the live lines need.
struct Shown<'a> {
    cfg: &'a Config,
    live: &'a Live,
    t0: Instant,
}

/// One control message of connection `k`: a snapshot (and the rows it completes), serve's
/// result, or an error that ends the run.
fn on_event(
    (k, at, m): Event,
    conns: &mut [Conn],
    out: &mut RunOut,
    printed: &mut [usize],
    shown: &Shown<'_>,
    ctx: &mut Ctx<'_>,
    stop: &Shutdown,
) {
    match m {
        Control::Interval { publishers, .. } => {
            let c = session::total(&session::counts_of(&publishers));
            conns[k].snaps.push((session::ns_since(shown.t0, at), c));
            let i = conns[k].target;
            print_rows(shown.cfg, ctx, shown.live, conns, i, &mut printed[i]);
        }
        m @ Control::Result { .. } => conns[k].result = ServeResult::of(m, session::ns_since(shown.t0, at)),
        Control::Error { message } => {
            out.peer_lost = Some(format!("{}: {message}", shown.cfg.targets[conns[k].target]));
            stop.trigger();
        }
        _ => {}
    }
}

/// A target's snapshots: row `m` sums every connection's `m`-th, at the latest of their times.
fn rows_of(per_conn: &[&[(u64, StreamCounts)]]) -> Vec<(u64, StreamCounts)> {
    let m = per_conn.iter().map(|s| s.len()).min().unwrap_or(0);
    (0..m)
        .map(|j| {
            let at = per_conn.iter().map(|s| s[j].0).max().unwrap_or(0);
            let mut c = StreamCounts::default();
            for s in per_conn {
                c.add(&s[j].1);
            }
            (at, c)
        })
        .collect()
}

/// Prints the rows of target `i` that every one of its connections has reported.
fn print_rows(cfg: &Config, ctx: &mut Ctx<'_>, live: &Live, conns: &[Conn], i: usize, printed: &mut usize) {
    let mine: Vec<&[(u64, StreamCounts)]> =
        conns.iter().filter(|c| c.target == i).map(|c| c.snaps.as_slice()).collect();
    let rows = rows_of(&mine);
    while *printed < rows.len() {
        *printed += 1;
        let name = if cfg.direction == Direction::Reverse {
            format!("local<-{}", cfg.targets[i])
        } else {
            cfg.targets[i].to_string()
        };
        live.interval(ctx.out, &name, &rows[..*printed]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sum_the_connections_seconds() {
        let c = |received| StreamCounts { received, ..StreamCounts::default() };
        let a = [(1_000, c(10)), (2_000, c(25))];
        let b = [(1_010, c(5)), (2_020, c(9)), (3_000, c(12))];
        let rows = rows_of(&[&a, &b]);
        assert_eq!(rows.iter().map(|r| (r.0, r.1.received)).collect::<Vec<_>>(), [(1_010, 15), (2_020, 34)]);
    }
}
