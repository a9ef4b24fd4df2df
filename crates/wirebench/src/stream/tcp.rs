//! A TCP stream run: one connection per target and publisher; frames of `size` bytes
//! (header + payload) back to back. Forward: this client writes, serve counts. Reverse:
//! serve writes, this client counts.

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use wirebench_core::report::ReceiverResult;
use wirebench_core::schedule::Stop;
use wirebench_core::stream::StreamCounts;
use wirebench_core::wire::control::{Control, Direction, StreamProto, StreamRequest};

use super::config::Config;
use super::session::{self, RunOut, RunSpec};
use super::udp::sender_result;
use crate::Ctx;
use crate::control;
use crate::flow::recv::{self, Accounts};
use crate::flow::send::{self, SendSpec, Sent, TcpOut};

/// What one connection measured.
struct ConnOut {
    target: usize,
    sent: Option<Sent>,
    retransmits: Option<u64>,
    received: Vec<StreamCounts>,
    serve_sent: u64,
    snaps: Vec<(u64, StreamCounts)>,
}

fn request(cfg: &Config, spec: &RunSpec, session: u64) -> StreamRequest {
    StreamRequest {
        session,
        token: cfg.token.clone(),
        proto: StreamProto::Tcp,
        size: spec.size,
        direction: cfg.direction,
        publishers: 1,
        rate_per_s: spec.rate,
        duration_ns: u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX),
        count: spec.count,
        client_port: None,
        group: None,
    }
}

fn forward(
    mut conn: TcpStream,
    spec: &RunSpec,
    session: u64,
    stop: &AtomicBool,
    t0: Instant,
) -> anyhow::Result<ConnOut> {
    let (tx, events) = session::channel();
    session::watch(0, conn.try_clone()?, tx)?;
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
    let mut snaps = Vec::new();
    let got = session::collect_results(&events, 1, Duration::from_secs(30), |_, m| {
        if let Control::Interval { publishers } = m {
            let at = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            snaps.push((at, session::total(&session::counts_of(&publishers))));
        }
    })?;
    let (received, _) = got.into_iter().next().unwrap_or_default();
    Ok(ConnOut { target: 0, sent: Some(sent), retransmits, received, serve_sent: 0, snaps })
}

fn reverse(mut conn: TcpStream, session: u64, stop: &AtomicBool, t0: Instant) -> anyhow::Result<ConnOut> {
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut acc = Accounts::new(session, 1);
    let mut snaps = Vec::new();
    let mut tick = |a: &Accounts| {
        let at = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        snaps.push((at, session::total(&a.counts())));
    };
    let leftover = recv::tcp(&mut conn, &mut acc, stop, &mut tick)?;
    let serve_sent = match leftover {
        Some(prefix) => match control::recv_after(&prefix, &mut conn)? {
            Control::Result { sent, .. } => sent.iter().sum(),
            Control::Error { message } => bail!("{message}"),
            other => bail!("unexpected {other:?}"),
        },
        None if stop.load(Ordering::Relaxed) => {
            let _ = control::send(&mut conn, &Control::Finish { sent: vec![] });
            0
        }
        None => bail!("the connection closed before serve's results"),
    };
    Ok(ConnOut { target: 0, sent: None, retransmits: None, received: acc.counts(), serve_sent, snaps })
}

/// Runs one TCP stream against every target.
pub(super) fn run(cfg: &Config, spec: &RunSpec, session: u64, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let mut conns = Vec::new();
    for (i, &target) in cfg.targets.iter().enumerate() {
        for p in 0..cfg.parallel {
            // Each connection is its own session: serve counts one publisher per connection.
            let session = session.wrapping_add(u64::from(p));
            let (conn, _, _) = session::start(target, &request(cfg, spec, session))?;
            conns.push((i, session, conn));
        }
    }
    let jobs: Vec<_> = conns
        .into_iter()
        .map(|(i, session, conn)| {
            let (st, spec) = (stop.clone(), *spec);
            let reverse_run = cfg.direction == Direction::Reverse;
            std::thread::spawn(move || {
                let r =
                    if reverse_run { reverse(conn, session, &st, t0) } else { forward(conn, &spec, session, &st, t0) };
                r.map(|mut o| {
                    o.target = i;
                    o
                })
            })
        })
        .collect();
    while jobs.iter().any(|j| !j.is_finished()) {
        if ctx.shutdown.is_set() {
            stop.store(true, Ordering::Relaxed);
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let mut outs = Vec::new();
    let mut out = RunOut::default();
    for j in jobs {
        match j.join().map_err(|_| anyhow!("a connection thread panicked"))? {
            Ok(o) => outs.push(o),
            Err(e) => out.peer_lost = Some(format!("{e:#}")),
        }
    }
    let sents: Vec<Sent> = outs.iter().filter_map(|o| o.sent).collect();
    if !sents.is_empty() {
        let mut s = sender_result(&sents);
        s.retransmits = Some(outs.iter().filter_map(|o| o.retransmits).sum());
        out.sender = Some(s);
    }
    for (i, target) in cfg.targets.iter().enumerate() {
        let mine: Vec<&ConnOut> = outs.iter().filter(|o| o.target == i).collect();
        if mine.is_empty() {
            continue;
        }
        let publishers: Vec<StreamCounts> = mine.iter().map(|o| session::total(&o.received)).collect();
        let mut snaps: Vec<(u64, StreamCounts)> = Vec::new();
        // Interval rows: the first connection's snapshots (one publisher) are enough to show
        // the shape; totals are exact from the results.
        if let Some(first) = mine.first() {
            snaps.clone_from(&first.snaps);
        }
        let reverse_run = cfg.direction == Direction::Reverse;
        out.receivers.push(ReceiverResult {
            addr: if reverse_run { format!("local<-{target}") } else { target.to_string() },
            direction: if reverse_run { "reverse" } else { "forward" }.into(),
            sent: if reverse_run {
                mine.iter().map(|o| o.serve_sent).sum()
            } else {
                mine.iter().filter_map(|o| o.sent).map(|s| s.messages).sum()
            },
            total: session::total(&publishers),
            publishers,
            intervals: session::intervals(&snaps),
        });
    }
    Ok(out)
}
