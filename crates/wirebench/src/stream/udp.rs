//! A UDP stream run: forward (senders here, receivers in each serve), reverse (serve sends
//! to this client's socket) or both.

use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wirebench_core::report::{ReceiverResult, SenderResult};
use wirebench_core::schedule::Stop;
use wirebench_core::stream::StreamCounts;
use wirebench_core::wire::control::{Control, Direction, StreamProto, StreamRequest};
use wirebench_net::batch::{UdpBatchReceiver, UdpBatchSender, size_buffers};
use wirebench_net::multicast::{self, SenderOpts};

use super::config::Config;
use super::session::{self, RunOut, RunSpec};
use crate::Ctx;
use crate::control;
use crate::flow::STREAM_BUFFER;
use crate::flow::recv::{self, Accounts, Progress};
use crate::flow::send::{self, SendSpec, Sent};

type SendJob = JoinHandle<std::io::Result<Sent>>;
type RecvJob = JoinHandle<std::io::Result<Accounts>>;

fn interface(cfg: &Config) -> anyhow::Result<Option<Ipv4Addr>> {
    Ok(cfg.interface.as_deref().map(wirebench_net::iface::ipv4_of).transpose()?)
}

/// Starts the senders of one destination; returns their threads.
fn senders(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    dest: SocketAddr,
    stop: &Arc<AtomicBool>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<SendJob>> {
    let iface = interface(cfg)?;
    let mut jobs = Vec::new();
    for publisher in 0..cfg.parallel {
        let bind = SocketAddr::new(iface.map_or(Ipv4Addr::UNSPECIFIED, Into::into).into(), 0);
        let sock = UdpSocket::bind(bind).with_context(|| format!("cannot bind {bind}"))?;
        let (_, snd) = size_buffers(&sock, STREAM_BUFFER);
        if snd.capped() && publisher == 0 {
            warnings.push(format!(
                "send buffer capped at {} bytes (asked {}): sysctl -w net.core.wmem_max={}",
                snd.granted, snd.asked, snd.asked
            ));
        }
        if dest.ip().is_multicast() {
            let opts = SenderOpts { interface: iface, ttl: cfg.ttl, loopback: true };
            multicast::set_sender(&sock, dest, &opts)?;
        }
        sock.connect(dest).with_context(|| format!("cannot send to {dest}"))?;
        let s = SendSpec {
            session,
            publisher,
            size: spec.size,
            rate: spec.rate,
            stop: Stop { max_count: spec.count, deadline: Some(spec.duration) },
            ignore_refused: cfg.no_control,
        };
        let st = stop.clone();
        jobs.push(std::thread::spawn(move || send::run(&mut UdpBatchSender::new(sock, s.size), &s, &st)));
    }
    Ok(jobs)
}

/// A local receiver for reverse data; returns a clone of its socket (to knock from) and its thread.
fn receiver(
    session: u64,
    publishers: u16,
    p: &Arc<Progress>,
    abort: &Arc<AtomicBool>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(UdpSocket, RecvJob)> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let (rcv, _) = size_buffers(&sock, STREAM_BUFFER);
    if rcv.capped() {
        warnings.push(format!(
            "receive buffer capped at {} bytes (asked {}): sysctl -w net.core.rmem_max={}",
            rcv.granted, rcv.asked, rcv.asked
        ));
    }
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let knock = sock.try_clone()?;
    let (p, a) = (p.clone(), abort.clone());
    let job = std::thread::spawn(move || {
        let mut acc = Accounts::new(session, publishers);
        recv::udp(&mut UdpBatchReceiver::new(sock), &mut acc, &p, &a)?;
        Ok(acc)
    });
    Ok((knock, job))
}

/// Runs one UDP stream against every target in `cfg`.
pub(super) fn run(cfg: &Config, spec: &RunSpec, session: u64, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let mut out = RunOut::default();
    let stop = Arc::new(AtomicBool::new(false));
    let forward = cfg.direction != Direction::Reverse;
    let reverse = cfg.direction != Direction::Forward;
    let (tx, events) = session::channel();
    let mut writers: Vec<TcpStream> = Vec::new();
    let mut locals: Vec<(Arc<Progress>, RecvJob)> = Vec::new();
    let mut jobs: Vec<(usize, Vec<SendJob>)> = Vec::new();
    let t0 = Instant::now();
    for (i, &target) in cfg.targets.iter().enumerate() {
        let mut knock_from = None;
        if reverse {
            let p = Arc::new(Progress::default());
            let (sock, job) = receiver(session, cfg.parallel, &p, &stop, &mut out.warnings)?;
            knock_from = Some(sock);
            locals.push((p, job));
        }
        let req = StreamRequest {
            session,
            token: cfg.token.clone(),
            proto: StreamProto::Udp,
            size: spec.size,
            direction: cfg.direction,
            publishers: cfg.parallel,
            rate_per_s: spec.rate,
            duration_ns: u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX),
            count: spec.count,
            client_port: None,
            group: cfg.group,
        };
        let (conn, data_port, rcvbuf) = session::start_with(target, &req, knock_from.as_ref(), &mut out.warnings)?;
        if forward && rcvbuf > 0 && rcvbuf < STREAM_BUFFER {
            out.warnings.push(format!(
                "{target}: receive buffer capped at {rcvbuf} bytes: sysctl -w net.core.rmem_max={STREAM_BUFFER}"
            ));
        }
        writers.push(conn.try_clone()?);
        session::watch(i, conn, tx.clone())?;
        if forward && cfg.group.is_none() {
            jobs.push((
                i,
                senders(cfg, spec, session, SocketAddr::new(target.ip(), data_port), &stop, &mut out.warnings)?,
            ));
        }
    }
    if let Some(g) = cfg.group {
        jobs.push((usize::MAX, senders(cfg, spec, session, g.into(), &stop, &mut out.warnings)?));
    }
    if !forward {
        // Reverse only: nothing to send here; serve answers this with its results once it
        // has sent everything.
        for w in &mut writers {
            control::send(w, &Control::Finish { sent: Vec::new() })?;
        }
    }
    // While data flows: serve's interval snapshots (forward) and our own (reverse).
    let n = cfg.targets.len();
    let mut snaps: Vec<Vec<(u64, StreamCounts)>> = vec![Vec::new(); n];
    let mut local_snaps: Vec<Vec<(u64, StreamCounts)>> = vec![Vec::new(); locals.len()];
    let mut results: Vec<Option<(Vec<StreamCounts>, Vec<u64>)>> = vec![None; n];
    let mut next = cfg.interval;
    let sending = |jobs: &Vec<(usize, Vec<SendJob>)>| jobs.iter().any(|(_, j)| j.iter().any(|h| !h.is_finished()));
    let reverse_deadline = spec.duration + Duration::from_secs(5);
    loop {
        if ctx.shutdown.is_set() {
            stop.store(true, Ordering::Relaxed);
        }
        let done = if forward {
            !sending(&jobs)
        } else {
            results.iter().all(Option::is_some) || stop.load(Ordering::Relaxed) || t0.elapsed() > reverse_deadline
        };
        if done {
            break;
        }
        if let Ok((i, m)) = events.recv_timeout(Duration::from_millis(50)) {
            match m {
                Control::Interval { publishers } => {
                    let at = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    snaps[i].push((at, session::total(&session::counts_of(&publishers))));
                    if spec.progress {
                        print_latest(ctx, &cfg.targets[i].to_string(), &snaps[i]);
                    }
                }
                Control::Result { received, sent } => {
                    if forward {
                        // Before our Finish: serve ended the session (it is shutting down).
                        out.peer_lost = Some(format!("{} ended the session early", cfg.targets[i]));
                        stop.store(true, Ordering::Relaxed);
                    }
                    results[i] = Some((session::counts_of(&received), sent));
                }
                Control::Error { message } => {
                    out.peer_lost = Some(format!("{}: {message}", cfg.targets[i]));
                    stop.store(true, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        if t0.elapsed() >= next {
            let at = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            for (k, (p, _)) in locals.iter().enumerate() {
                let c = p.snapshot.lock().map(|s| session::total(&s)).unwrap_or_default();
                local_snaps[k].push((at, c));
                if spec.progress {
                    print_latest(ctx, &format!("local<-{}", cfg.targets[k]), &local_snaps[k]);
                }
            }
            next += cfg.interval;
        }
    }
    // Senders done (or stopped): tell each serve what it was sent, collect the results.
    let mut sent_to: Vec<Vec<u64>> = vec![vec![0; usize::from(cfg.parallel)]; n];
    let mut all_sent: Vec<Sent> = Vec::new();
    for (i, js) in jobs {
        let s: Vec<Sent> = js
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
            .collect::<anyhow::Result<_>>()?;
        let counts: Vec<u64> = s.iter().map(|x| x.messages).collect();
        if s.iter().any(|x| x.refused) && out.peer_lost.is_none() {
            out.peer_lost = Some("a receiver's port closed mid-run (ICMP port unreachable)".into());
        }
        if i == usize::MAX {
            for v in &mut sent_to {
                v.clone_from(&counts);
            }
        } else {
            sent_to[i] = counts;
        }
        all_sent.extend(s);
    }
    if forward {
        for (i, w) in writers.iter_mut().enumerate() {
            let _ = control::send(w, &Control::Finish { sent: sent_to[i].clone() });
        }
    }
    if out.peer_lost.is_none() {
        let owed: Vec<usize> = (0..n).filter(|&i| results[i].is_none()).collect();
        if !owed.is_empty() {
            let got = session::collect_results(&events, n, Duration::from_secs(10), |_, _| {});
            match got {
                Ok(r) => {
                    for i in owed {
                        results[i] = Some(r[i].clone());
                    }
                }
                Err(e) => out.peer_lost = Some(e.to_string()),
            }
        }
    }
    // Reverse: drain our receivers now that serve said what it sent.
    let mut local_rows = Vec::new();
    for (k, (p, job)) in locals.into_iter().enumerate() {
        let expected: u64 = results.get(k).and_then(|r| r.as_ref()).map_or(0, |(_, s)| s.iter().sum());
        p.expected.store(expected, Ordering::Relaxed);
        p.finish.store(true, Ordering::Relaxed);
        let acc = job.join().map_err(|_| anyhow::anyhow!("a receiver panicked"))??;
        let counts = acc.counts();
        local_rows.push(ReceiverResult {
            addr: format!("local<-{}", cfg.targets[k]),
            direction: "reverse".into(),
            sent: expected,
            total: session::total(&counts),
            publishers: counts,
            intervals: session::intervals(&local_snaps[k]),
        });
    }
    if forward {
        for (i, r) in results.iter().enumerate() {
            let Some((counts, _)) = r else { continue };
            out.receivers.push(ReceiverResult {
                addr: cfg.targets[i].to_string(),
                direction: "forward".into(),
                sent: sent_to[i].iter().sum(),
                total: session::total(counts),
                publishers: counts.clone(),
                intervals: session::intervals(&snaps[i]),
            });
        }
        out.sender = Some(sender_result(&all_sent));
    }
    out.receivers.extend(local_rows);
    Ok(out)
}

/// Sums what every publisher sent.
pub(super) fn sender_result(s: &[Sent]) -> SenderResult {
    let messages: u64 = s.iter().map(|x| x.messages).sum();
    let bytes: u64 = s.iter().map(|x| x.bytes).sum();
    let first = s.iter().map(|x| x.first_ns).min().unwrap_or(0);
    let last = s.iter().map(|x| x.last_ns).max().unwrap_or(0);
    let span = last.saturating_sub(first);
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let (per_s, bits_per_s) =
        if span == 0 { (0.0, 0.0) } else { (messages as f64 * 1e9 / span as f64, bytes as f64 * 8e9 / span as f64) };
    SenderResult {
        messages,
        bytes,
        per_s,
        bits_per_s,
        slip_mean_ns: s.iter().map(|x| x.slip_mean_ns).max().unwrap_or(0),
        slip_max_ns: s.iter().map(|x| x.slip_max_ns).max().unwrap_or(0),
        gso: s.iter().any(|x| x.gso),
        retransmits: None,
    }
}

/// Prints the newest interval of a receiver's snapshots.
fn print_latest(ctx: &mut Ctx<'_>, name: &str, snaps: &[(u64, StreamCounts)]) {
    let (c, span) = match snaps {
        [.., a, b] => (b.1.since(&a.1), b.0 - a.0),
        [b] => (b.1, b.0),
        [] => return,
    };
    session::interval_line(ctx.out, snaps[snaps.len() - 1].0, name, &c, span);
}

/// `--no-control`: send to each target (unicast or group) with no serve to ask; the
/// receivers (`wirebench listen`) report their own loss.
pub(super) fn publish_only(cfg: &Config, spec: &RunSpec, session: u64, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut out = RunOut::default();
    let mut jobs = Vec::new();
    for &t in &cfg.targets {
        jobs.extend(senders(cfg, spec, session, t, &stop, &mut out.warnings)?);
    }
    while jobs.iter().any(|j| !j.is_finished()) {
        if ctx.shutdown.is_set() {
            stop.store(true, Ordering::Relaxed);
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let sent: Vec<Sent> = jobs
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    out.sender = Some(sender_result(&sent));
    Ok(out)
}
