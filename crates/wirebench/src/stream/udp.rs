//! A UDP stream run: forward (senders here, receivers in each serve), reverse (serve sends
//! to this client's socket) or both.

use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wirebench_core::units::nanos;

use anyhow::Context as _;
use wirebench_core::counters::{self, Reading};
use wirebench_core::report::{ReceiverResult, SenderResult, StreamDirection};
use wirebench_core::schedule::Stop;
use wirebench_core::snmp::Snmp;
use wirebench_core::stream::StreamCounts;
use wirebench_core::stream::client::{ClientSession, Heard};
use wirebench_core::wire::control::{Control, Direction, StreamProto, StreamRequest};
use wirebench_net::batch::{UdpBatchReceiver, UdpBatchSender, size_buffers};
use wirebench_net::clock::{Clock as _, MonoClock};
use wirebench_net::counters::Receiving;
use wirebench_net::multicast::{self, SenderOpts};

use super::config::Config;
use super::session::{self, Event, Live, RunOut, RunSpec};
use crate::control;
use crate::ctx::Ctx;
use crate::flow::STREAM_BUFFER;
use crate::flow::recv::{self, Accounts, Progress};
use crate::flow::send::{self, SendSpec, Sent};
use crate::shutdown::Shutdown;

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
    stop: &Shutdown,
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
        let (st, behind) = (stop.clone(), spec.behind);
        jobs.push(std::thread::spawn(move || {
            send::run_paced(&mut UdpBatchSender::new(sock, s.size), &s, st.flag(), behind)
        }));
    }
    Ok(jobs)
}

/// A local receiver for reverse data; returns a clone of its socket (to knock from) and its thread.
fn receiver(
    session: u64,
    rcvbuf: Option<usize>,
    publishers: u16,
    p: &Arc<Progress>,
    abort: &Shutdown,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(UdpSocket, RecvJob)> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let (rcv, _) = size_buffers(&sock, rcvbuf.unwrap_or(STREAM_BUFFER));
    if rcv.capped() {
        warnings.push(format!(
            "receive buffer capped at {} bytes (asked {}): sysctl -w net.core.rmem_max={}",
            rcv.granted, rcv.asked, rcv.asked
        ));
    }
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    let knock = sock.try_clone()?;
    let (p, a) = (p.clone(), abort.clone());
    // GRO on before serve is told the port: datagrams queued before it would be split.
    let mut rx = UdpBatchReceiver::new(sock);
    let stamped = recv::stamp_rx(&mut rx);
    let job = std::thread::spawn(move || {
        let mut acc = Accounts::new(session, publishers);
        acc.wake = wirebench_core::stream::wake::WakeRecorder::new(stamped);
        recv::udp(&mut rx, &mut acc, &p, a.flag())?;
        Ok(acc)
    });
    Ok((knock, job))
}

/// A receiver of reverse data on this client.
struct Local {
    progress: Arc<Progress>,
    job: RecvJob,
    snaps: Vec<(u64, StreamCounts)>,
    /// This host's counters at each snapshot (`wirebench_core::counters::reading`).
    reads: Vec<Reading>,
}

/// Waits until every local receiver heard its serve (a polite run), the stop, or `wait`.
fn wait_heard(locals: &[Local], wait: Duration, stop: &Shutdown) -> bool {
    let t = Instant::now();
    loop {
        if locals.iter().all(|l| l.progress.heard.load(Ordering::Relaxed)) {
            return true;
        }
        if stop.is_set() || t.elapsed() >= wait {
            return false;
        }
        std::thread::park_timeout(Duration::from_millis(1));
    }
}

/// This host's kernel counters across the run: its receivers' drops (reverse) and its
/// senders' SndbufErrors (forward), with the interface toward the first target (a group's is
/// the one `--interface` names: a group may have no route).
struct Host {
    ifaces: Vec<String>,
    before: Receiving,
}

impl Host {
    fn new(cfg: &Config) -> anyhow::Result<Self> {
        let ifaces = match (cfg.group, interface(cfg)?) {
            (Some(_), Some(ip)) => wirebench_net::iface::receiving(ip.into()),
            _ => wirebench_net::iface::toward(cfg.group.map_or(cfg.targets[0], SocketAddr::V4)),
        };
        let before = Receiving::read(&ifaces);
        Ok(Self { ifaces, before })
    }

    /// The counters since the run began.
    fn since(&self) -> Option<Snmp> {
        self.before.since(&Receiving::read(&self.ifaces))
    }

    /// Its drops after the send so far (SndbufErrors, its egress qdiscs').
    fn sender_drops(&self) -> Option<u64> {
        counters::sender_drops(&self.since()?)
    }
}

/// The sessions started with every target: their control connections, this host's
/// receivers (reverse), where the data goes (forward) and when each serve was ready.
struct Started {
    writers: Vec<TcpStream>,
    locals: Vec<Local>,
    dests: Vec<(usize, SocketAddr)>,
    ready_at: Vec<Instant>,
    events: Receiver<Event>,
}

/// Asks every target for the session (a local receiver first for reverse data).
fn start(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    ctx: &Ctx<'_>,
    stop: &Shutdown,
    out: &mut RunOut,
) -> anyhow::Result<Started> {
    let (forward, reverse) = (cfg.direction != Direction::Reverse, cfg.direction != Direction::Forward);
    let (tx, events) = session::channel();
    let mut st = Started { writers: Vec::new(), locals: Vec::new(), dests: Vec::new(), ready_at: Vec::new(), events };
    for (i, &target) in cfg.targets.iter().enumerate() {
        let mut knock_from = None;
        if reverse {
            let p = Arc::new(Progress::default());
            let (sock, job) = receiver(session, cfg.rcvbuf, cfg.parallel, &p, stop, &mut out.warnings)?;
            knock_from = Some(sock);
            st.locals.push(Local { progress: p, job, snaps: Vec::new(), reads: Vec::new() });
        }
        let req = StreamRequest {
            session,
            token: cfg.token.clone(),
            proto: StreamProto::Udp,
            size: spec.size,
            direction: cfg.direction,
            publishers: cfg.parallel,
            rate_per_s: spec.rate,
            duration_ns: nanos(spec.duration),
            count: spec.count,
            client_port: None,
            group: cfg.group,
            rcvbuf: cfg.rcvbuf,
        };
        let (conn, data_port, rcvbuf) =
            session::start(target, &req, knock_from.as_ref(), &mut out.warnings, &ctx.shutdown)?;
        st.ready_at.push(Instant::now());
        let asked = cfg.rcvbuf.unwrap_or(STREAM_BUFFER);
        if forward && rcvbuf > 0 && rcvbuf < asked {
            out.warnings.push(format!(
                "{target}: receive buffer capped at {rcvbuf} bytes (asked {asked}): sysctl -w net.core.rmem_max={asked}"
            ));
        }
        st.writers.push(conn.try_clone()?);
        session::watch(i, conn, tx.clone())?;
        if forward && cfg.group.is_none() {
            st.dests.push((i, SocketAddr::new(target.ip(), data_port)));
        }
    }
    if let Some(g) = cfg.group {
        st.dests.push((usize::MAX, g.into()));
    }
    Ok(st)
}

/// Runs one UDP stream against every target in `cfg`. Interval times count from the start
/// of sending on this client's clock; rates count over the sending time.
pub(super) fn run(
    cfg: &Config,
    spec: &RunSpec,
    session: u64,
    ctx: &mut Ctx<'_>,
    live: &Live,
) -> anyhow::Result<RunOut> {
    let mut out = RunOut::default();
    let stop = ctx.shutdown.child();
    let (forward, reverse) = (cfg.direction != Direction::Reverse, cfg.direction != Direction::Forward);
    let host = Host::new(cfg)?;
    let mut st = start(cfg, spec, session, ctx, &stop, &mut out)?;
    if !forward {
        // Reverse only: nothing to send here; serve answers this with its results once it
        // has sent everything.
        for w in &mut st.writers {
            control::send(w, &Control::Finish { sent: Vec::new() })?;
        }
    }
    if cfg.polite && forward && reverse && !wait_heard(&st.locals, spec.duration + HEAR_WAIT, &stop) {
        out.warnings
            .push(format!("polite: no data from serve within {:?}: this side sent nothing", spec.duration + HEAR_WAIT));
        st.dests.clear();
    }
    // Sending begins: the origin of every interval time (and the senders' clock then).
    let t0 = Instant::now();
    let t0_mono = MonoClock::default().now_ns();
    let mut jobs: Vec<(usize, Vec<SendJob>)> = Vec::new();
    for &(i, d) in &st.dests {
        jobs.push((i, senders(cfg, spec, session, d, &stop, &mut out.warnings)?));
    }
    let names = cfg.targets.iter().map(ToString::to_string).collect();
    let mut s = ClientSession::new(names, forward && !jobs.is_empty(), nanos(spec.duration), nanos(cfg.interval));
    flow(&mut s, &mut st, &jobs, t0, &host, ctx, live, &stop);
    // Senders done (or stopped): tell each serve what it was sent, collect the results.
    let (sent_to, all_sent) = join_senders(jobs, cfg.targets.len(), &mut s)?;
    if forward {
        for (i, w) in st.writers.iter_mut().enumerate() {
            let counts = if sent_to[i].is_empty() {
                vec![0; usize::from(cfg.parallel)]
            } else {
                sent_to[i].iter().map(|x| x.messages).collect()
            };
            let _ = control::send(w, &Control::Finish { sent: counts });
        }
    }
    s.finished();
    collect(&mut s, &st.events, t0, &host);
    out.warnings.extend(s.ignored_warning());
    out.peer_lost = s.peer_lost.take();
    let drained = drain(&s, st.locals)?;
    let host_now = host.since();
    let local = local_rows(cfg, &s, drained, &st.ready_at, t0, host_now.as_ref());
    if forward {
        forward_rows(cfg, &mut s, &sent_to, t0_mono, host_now.as_ref(), &mut out);
        out.skipped_ns = all_sent.iter().map(|x| x.skipped_ns).max().unwrap_or(0);
        let here = |table: &str, field: &str| {
            host_now.as_ref().and_then(|k| k.get(table, field)).map(|v| u64::try_from(v).unwrap_or(0))
        };
        let mut sender = sender_result(&all_sent);
        sender.sndbuf_errors = here("Udp", "SndbufErrors");
        sender.qdisc_drops = here(counters::QDISC, "Dropped");
        out.generator = Some(super::health::of(&all_sent, spec.rate, &sender));
        out.sender = Some(sender);
    }
    out.receivers.extend(local);
    Ok(out)
}

/// While data flows: serve's interval rows (forward) and this host's own (reverse), until
/// the senders are done (or, with none here, the results are in or late).
#[expect(clippy::too_many_arguments, reason = "the run's parts, passed on once")]
fn flow(
    s: &mut ClientSession,
    st: &mut Started,
    jobs: &[(usize, Vec<SendJob>)],
    t0: Instant,
    host: &Host,
    ctx: &mut Ctx<'_>,
    live: &Live,
    stop: &Shutdown,
) {
    let sending = || jobs.iter().any(|(_, j)| j.iter().any(|h| !h.is_finished()));
    while !s.flow_done(session::ns_since(t0, Instant::now()), sending(), stop.is_set()) {
        if let Ok((i, at, m)) = st.events.recv_timeout(Duration::from_millis(20)) {
            match s.handle(i, session::ns_since(t0, at), m, || host.sender_drops()) {
                Heard::Row(i) => live.interval(ctx.out, s.name(i), &s.snaps[i]),
                Heard::Stop => stop.trigger(),
                Heard::Nothing => {}
            }
        }
        let now = Instant::now();
        if s.local_due(session::ns_since(t0, now)) {
            let here = (!st.locals.is_empty()).then(|| host.since()).flatten();
            let at = session::ns_since(t0, now);
            for (k, l) in st.locals.iter_mut().enumerate() {
                l.reads.push(counters::reading(None, here.as_ref()));
                let c = l.progress.snapshot.lock().map(|p| session::total(&p)).unwrap_or_default();
                l.snaps.push((at, c));
                live.interval(ctx.out, &format!("local<-{}", s.name(k)), &l.snaps);
            }
        }
        let got: u64 = s.snaps.iter().filter_map(|x| x.last()).map(|x| x.1.received).sum::<u64>()
            + st.locals.iter().filter_map(|l| l.snaps.last()).map(|x| x.1.received).sum::<u64>();
        live.done.store(got, Ordering::Relaxed);
    }
}

/// Joins the senders: what each target was sent (a group's senders count for every
/// target), and everything sent. A sender that met a closed port says a receiver went away.
fn join_senders(
    jobs: Vec<(usize, Vec<SendJob>)>,
    n: usize,
    s: &mut ClientSession,
) -> anyhow::Result<(Vec<Vec<Sent>>, Vec<Sent>)> {
    let mut sent_to: Vec<Vec<Sent>> = vec![Vec::new(); n];
    let mut all_sent: Vec<Sent> = Vec::new();
    for (i, js) in jobs {
        let sent: Vec<Sent> = js
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
            .collect::<anyhow::Result<_>>()?;
        if sent.iter().any(|x| x.refused) && s.peer_lost.is_none() {
            s.peer_lost = Some("a receiver's port closed mid-run (ICMP port unreachable)".into());
        }
        if i == usize::MAX {
            for v in &mut sent_to {
                v.clone_from(&sent);
            }
        } else {
            sent_to[i].clone_from(&sent);
        }
        all_sent.extend(sent);
    }
    Ok((sent_to, all_sent))
}

/// How long the serves have to send their results after the `Finish`.
const RESULT_WAIT: Duration = Duration::from_secs(10);

/// Waits up to [`RESULT_WAIT`] for the results still owed (unless a serve was lost),
/// keeping the interval rows that come before them.
fn collect(s: &mut ClientSession, events: &Receiver<Event>, t0: Instant, host: &Host) {
    let deadline = Instant::now() + RESULT_WAIT;
    while s.peer_lost.is_none() && !s.owed().is_empty() {
        let Ok((i, at, m)) = events.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            s.peer_lost = Some(format!("a serve did not send its results within {RESULT_WAIT:?}"));
            return;
        };
        s.handle(i, session::ns_since(t0, at), m, || host.sender_drops());
    }
}

/// A local receiver drained: its accounts, its interval snapshots and the counters with them.
type Drained = (Accounts, Vec<(u64, StreamCounts)>, Vec<Reading>);

/// Reverse: drains this host's receivers now that each serve said what it sent.
fn drain(s: &ClientSession, locals: Vec<Local>) -> anyhow::Result<Vec<Drained>> {
    let mut drained = Vec::new();
    for (k, l) in locals.into_iter().enumerate() {
        let expected = s.results.get(k).and_then(Option::as_ref).map_or(0, |r| r.sent.iter().sum());
        l.progress.expected.store(expected, Ordering::Relaxed);
        l.progress.finish.store(true, Ordering::Relaxed);
        let acc = l.job.join().map_err(|_| anyhow::anyhow!("a receiver panicked"))??;
        drained.push((acc, l.snaps, l.reads));
    }
    Ok(drained)
}

/// Reverse: a row per local receiver, its rows closed at its serve's result.
fn local_rows(
    cfg: &Config,
    s: &ClientSession,
    drained: Vec<Drained>,
    ready_at: &[Instant],
    t0: Instant,
    host_now: Option<&Snmp>,
) -> Vec<ReceiverResult> {
    let mut rows = Vec::new();
    for (k, (acc, mut snaps, reads)) in drained.into_iter().enumerate() {
        let r = s.results.get(k).and_then(Option::as_ref);
        let counts = acc.counts();
        let total = session::total(&counts);
        // serve's own sending time; from an older serve, its ready to its result here.
        let ready = session::ns_since(ready_at[k], t0);
        let send_ns =
            r.map_or(0, |r| if r.send_ns > 0 { r.send_ns } else { r.at_ns.map_or(0, |at| at.saturating_add(ready)) });
        let end = r.and_then(|r| r.at_ns).unwrap_or_else(|| session::ns_since(t0, Instant::now()));
        session::close_rows(&mut snaps, end, total);
        let mut row = ReceiverResult {
            addr: format!("local<-{}", cfg.targets[k]),
            direction: StreamDirection::Reverse,
            sent: r.map_or(0, |r| r.sent.iter().sum()),
            total,
            publishers: counts,
            intervals: session::intervals(&snaps),
            send_ns,
            recv_ns: 0,
            foreign: acc.foreign,
            kernel: host_now.cloned(),
            loss_split: None,
            wake: Some(acc.wake.summary()),
        };
        // serve sent: its host's drops after the send (from a serve that reports them)
        let serve_drops = r.and_then(|r| r.kernel.as_ref()).and_then(counters::sender_drops);
        row.attribute(serve_drops, &reads);
        rows.push(row);
    }
    rows
}

/// Forward: a row per serve that sent its result, its rows closed at the end of the
/// sending to it.
fn forward_rows(
    cfg: &Config,
    s: &mut ClientSession,
    sent_to: &[Vec<Sent>],
    t0_mono: u64,
    host_now: Option<&Snmp>,
    out: &mut RunOut,
) {
    // this host's drops after the send
    let sender_here = host_now.and_then(counters::sender_drops);
    for (i, r) in std::mem::take(&mut s.results).into_iter().enumerate() {
        let Some(r) = r else { continue };
        let total = session::total(&r.received);
        // the end of this target's sending on the rows' clock (its senders started after
        // t0, the later the more targets before it)
        session::close_rows(&mut s.snaps[i], send::end_after(&sent_to[i], t0_mono), total);
        let mut row = ReceiverResult {
            addr: cfg.targets[i].to_string(),
            direction: StreamDirection::Forward,
            sent: sent_to[i].iter().map(|x| x.messages).sum(),
            total,
            publishers: r.received,
            intervals: session::intervals(&s.snaps[i]),
            send_ns: send::span_of(&sent_to[i]),
            recv_ns: 0,
            foreign: r.foreign,
            kernel: r.kernel,
            loss_split: None,
            wake: r.wake,
        };
        row.attribute(sender_here, &s.reads[i]);
        out.receivers.push(row);
    }
}

/// How long a polite side waits to hear the other beyond the run's duration.
const HEAR_WAIT: Duration = Duration::from_secs(5);

/// Sums what every publisher sent; rates over the sending time of them all.
pub(super) fn sender_result(s: &[Sent]) -> SenderResult {
    let messages: u64 = s.iter().map(|x| x.messages).sum();
    let bytes: u64 = s.iter().map(|x| x.bytes).sum();
    let span = send::span_of(s);
    #[expect(clippy::cast_precision_loss, reason = "rates")]
    let (per_s, bits_per_s) =
        if span == 0 { (0.0, 0.0) } else { (messages as f64 * 1e9 / span as f64, bytes as f64 * 8e9 / span as f64) };
    SenderResult {
        messages,
        bytes,
        per_s,
        bits_per_s,
        send_ns: span,
        slip_mean_ns: s.iter().map(|x| x.slip_mean_ns).max().unwrap_or(0),
        slip_max_ns: s.iter().map(|x| x.slip_max_ns).max().unwrap_or(0),
        gso: s.iter().any(|x| x.gso),
        retransmits: None,
        sndbuf_errors: None,
        qdisc_drops: None,
    }
}

/// `--no-control`: send to each target (unicast or group) with no serve to ask; the
/// receivers (`wirebench listen`) report their own loss.
pub(super) fn publish_only(cfg: &Config, spec: &RunSpec, session: u64, ctx: &mut Ctx<'_>) -> anyhow::Result<RunOut> {
    let stop = ctx.shutdown.child();
    let mut out = RunOut::default();
    let mut jobs = Vec::new();
    for &t in &cfg.targets {
        jobs.extend(senders(cfg, spec, session, t, &stop, &mut out.warnings)?);
    }
    while jobs.iter().any(|j| !j.is_finished()) {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let sent: Vec<Sent> = jobs
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow::anyhow!("a sender panicked"))?.map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    let sender = sender_result(&sent);
    out.generator = Some(super::health::of(&sent, spec.rate, &sender));
    out.sender = Some(sender);
    Ok(out)
}
