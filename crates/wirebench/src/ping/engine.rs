//! The probe loop: one executor for every transport and pacing (STYLE C9). It talks to the
//! network only through `ProbeIo` and reads time only through `Clock`, so the same code runs
//! against real sockets and against the in-memory fake link on a virtual clock.
//!
//! Closed loop: stamp t1, send, wait for the reply of every known responder or the timeout,
//! then send the next. Open loop: send probe `n` at `schedule.intended(n)` (late sends go
//! out at once and their slip is counted), receiving replies in between; latency is taken
//! from the intended send time. Nothing in the per-probe path allocates: histograms, windows
//! and buffers exist before the first probe.
//!
//! Timeouts never end a run: a lossy path is something to measure. The run gives up only when
//! the peer is really gone: the kernel reports it unreachable (ICMP), the TCP connection
//! closes, or nothing at all came back for `silence_ns` (`--give-up-after`). With several
//! responders, how long the closed loop waits for each follows `latency::Patience`.

mod replies;

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use wirebench_core::latency::{self, Interval, Patience, Phase, ResponderStats, SEQ_WINDOW};
use wirebench_core::report::{GaveUp, Outcome, Stopped};
use wirebench_core::schedule::{Pacing, PoissonTimes, Schedule, Slip, Stop};
use wirebench_core::seq::SeqWindow;
use wirebench_core::wire::probe;
use wirebench_core::wire::stamp;
use wirebench_net::io::{Clock, ProbeIo, Support};

use crate::progress::Shown;

/// Sequence numbers of discovery probes: far above any real run, so their replies can
/// never be mistaken for a measured probe's.
const DISCOVERY_BASE: u64 = u64::MAX - (1 << 20);
const INTERVAL_NS: u64 = 1_000_000_000;
/// STAMP's 32-bit sequence numbers, discovery probes at the top.
const STAMP_SEQ: stamp::SeqMap = stamp::SeqMap { discovery_base: DISCOVERY_BASE };
/// Where the thread runs is sampled every 1024 probes (a vDSO call).
const CPU_SAMPLE_MASK: u64 = 1023;

/// What the loop needs to know; built from a validated `ping::Config`.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Probe size in bytes.
    pub size: usize,
    /// Probe flags (reply group).
    pub flags: u8,
    /// Session id stamped in every probe.
    pub session: u64,
    /// Closed loop or a rate.
    pub pacing: Pacing,
    /// Warm-up bounds (count and/or time); `Stop::default()` for none.
    pub warmup: Stop,
    /// Measurement bounds.
    pub stop: Stop,
    /// A reply later than this after its send is lost (and counted late).
    pub timeout_ns: u64,
    /// Multicast: discovery waits the whole timeout for responders unless this many answer.
    pub multicast: bool,
    /// Stop discovery once this many responders answered.
    pub expect_responders: Option<usize>,
    /// The pinger's wall clock minus its monotonic clock.
    pub wall_minus_mono: i64,
    /// Give up (`PeerSilent`) when nothing at all came back for this long.
    pub silence_ns: u64,
    /// Keep one histogram per second for an interval log.
    pub intervals: bool,
    /// Which CPU the thread is on (sampled once per interval).
    pub cpu_probe: fn() -> Option<usize>,
    /// STAMP (RFC 8762) test packets instead of wirebench probes: `size` is then the
    /// packet's length, T1 goes out on the wall clock, and the reflector's T2 and T3 come back.
    pub stamp: Option<stamp::Sender>,
}

/// Why a run could not start.
#[derive(Debug)]
pub enum EngineError {
    /// Nothing answered the discovery probes within the timeout.
    NoResponder {
        /// The kernel said the port is closed (ICMP port unreachable) rather than nothing.
        refused: bool,
    },
    /// A socket error.
    Io(io::Error),
}

/// One responder's state.
#[derive(Debug)]
pub struct Responder {
    /// Its address.
    pub addr: SocketAddr,
    /// What was measured.
    pub stats: ResponderStats,
    window: SeqWindow,
    /// One past the highest seq it answered (or the seq current when it was discovered):
    /// decides whether the closed loop waits for it ([`Patience::waits_for`]).
    answered: u64,
    /// When its last reply (any phase) arrived, monotonic ns.
    last_heard_ns: u64,
    /// Set at the end if it stopped answering before the run ended.
    pub stopped: Option<Stopped>,
}

/// What the loop measured.
#[derive(Debug)]
pub struct EngineOutput {
    /// Every responder that answered, in order of discovery.
    pub responders: Vec<Responder>,
    /// Measured probes sent.
    pub sent: u64,
    /// Warm-up probes sent.
    pub warmup_sent: u64,
    /// Seq of the first measured probe.
    pub measure_start_seq: u64,
    /// Open loop: send slip.
    pub slip: Slip,
    /// Open loop: each measured probe's actual minus intended send time (the sender's own
    /// lateness, which the corrected round trip includes).
    pub lateness: Histogram<u64>,
    /// Why it ended.
    pub outcome: Outcome,
    /// Why it gave up, when it did (`outcome` is then `PeerSilent`).
    pub gave_up: Option<GaveUp>,
    /// Datagrams that were not replies to this session.
    pub ignored: u64,
    /// The main view's round trips merged across responders, one histogram per second.
    pub intervals: Vec<Interval>,
    /// Bit n set: the thread ran on CPU n at some sample.
    pub cpus_seen: u128,
    /// Monotonic ns at the end of discovery (the measurement's time origin).
    pub start_ns: u64,
    /// Monotonic ns at the end.
    pub end_ns: u64,
    /// The kernel timestamps the transport gave, at the end (TX stamps are turned off when
    /// the device gives none).
    pub timestamps: Support,
}

struct Loop<'a, I, C> {
    io: &'a mut I,
    clock: &'a C,
    cfg: &'a EngineConfig,
    stop_flag: &'a AtomicBool,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    out: EngineOutput,
    schedule: Option<Schedule>,
    /// Poisson sampling: the gap generator, and the intended send times of the last
    /// `SEQ_WINDOW` probes (older replies are too old to count anyway).
    poisson: Option<(PoissonTimes, Vec<u64>)>,
    /// Seq at which measurement starts; `u64::MAX` while warming up.
    measure_start: u64,
    measure_start_ns: u64,
    last_reply_ns: u64,
    interval: Option<(u64, Histogram<u64>)>,
    patience: Patience,
    /// One past the last probe sent.
    next_seq: u64,
    /// What a progress display on another thread reads.
    shown: &'a Shown,
}

/// Runs discovery, warm-up and measurement. Returns what was measured, also when stopped
/// early (Ctrl-C through `stop_flag`, or a silent peer).
pub fn run<I: ProbeIo, C: Clock>(
    io: &mut I,
    clock: &C,
    cfg: &EngineConfig,
    stop_flag: &AtomicBool,
) -> Result<EngineOutput, EngineError> {
    run_shown(io, clock, cfg, stop_flag, &Shown::default())
}

impl EngineOutput {
    /// Nothing measured yet.
    fn empty() -> Self {
        Self {
            responders: Vec::new(),
            sent: 0,
            warmup_sent: 0,
            measure_start_seq: 0,
            slip: Slip::default(),
            lateness: latency::histogram(),
            outcome: Outcome::Completed,
            gave_up: None,
            ignored: 0,
            intervals: Vec::new(),
            cpus_seen: 0,
            start_ns: 0,
            end_ns: 0,
            timestamps: Support::default(),
        }
    }
}

/// [`run`], showing its progress in `shown`.
pub fn run_shown<I: ProbeIo, C: Clock>(
    io: &mut I,
    clock: &C,
    cfg: &EngineConfig,
    stop_flag: &AtomicBool,
    shown: &Shown,
) -> Result<EngineOutput, EngineError> {
    let mut lp = Loop {
        io,
        clock,
        cfg,
        stop_flag,
        send_buf: vec![0; cfg.size],
        recv_buf: vec![0; probe::MAX_LEN.max(cfg.size)],
        out: EngineOutput::empty(),
        schedule: None,
        poisson: None,
        measure_start: u64::MAX,
        measure_start_ns: 0,
        last_reply_ns: 0,
        interval: None,
        patience: Patience::new(cfg.timeout_ns),
        next_seq: 0,
        shown,
    };
    match &cfg.stamp {
        Some(s) => s.init(&mut lp.send_buf),
        None => probe::init(&mut lp.send_buf, cfg.session, cfg.flags),
    }
    lp.discover()?;
    if lp.stop_flag.load(Ordering::Relaxed) {
        lp.out.outcome = Outcome::Interrupted;
        return Ok(lp.out);
    }
    let start = lp.clock.now_ns();
    lp.out.start_ns = start;
    lp.last_reply_ns = start;
    lp.sample_cpu();
    if cfg.intervals {
        lp.interval = Some((start, latency::histogram()));
    }
    if cfg.warmup.is_unbounded() {
        lp.begin_measure(0, start);
    }
    let r = match cfg.pacing {
        Pacing::Closed => lp.closed(start),
        Pacing::Rate(rate) => {
            lp.schedule = Some(Schedule::new(start, rate));
            lp.open(start)
        }
        Pacing::Poisson { rate, seed } => {
            lp.poisson = Some((PoissonTimes::new(start, rate, seed), vec![0; SEQ_WINDOW]));
            lp.open(start)
        }
    };
    match r {
        Ok(()) => {}
        Err(e) => match gone(&e) {
            Some(why) => {
                // The loop ended on the error, before counting what it sent.
                lp.record_sent(lp.next_seq);
                lp.out.gave_up = Some(why);
            }
            None => return Err(EngineError::Io(e)),
        },
    }
    lp.finish();
    Ok(lp.out)
}

/// Errors that say the peer is gone: unreachable (ICMP port, host or network unreachable)
/// or its TCP connection ended.
fn gone(e: &io::Error) -> Option<GaveUp> {
    match e.kind() {
        ErrorKind::ConnectionRefused | ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => {
            Some(GaveUp::Unreachable)
        }
        ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe => Some(GaveUp::Closed),
        _ => None,
    }
}

impl<I: ProbeIo, C: Clock> Loop<'_, I, C> {
    fn stopped(&self) -> bool {
        self.stop_flag.load(Ordering::Relaxed)
    }

    /// Sends discovery probes every quarter timeout until a responder answers (unicast) or
    /// the timeout passes or enough responders answered (multicast).
    fn discover(&mut self) -> Result<(), EngineError> {
        let begin = self.clock.now_ns();
        let deadline = begin + self.cfg.timeout_ns;
        let step = (self.cfg.timeout_ns / 4).max(1);
        let mut refused = false;
        let mut k = 0u64;
        loop {
            let now = self.clock.now_ns();
            if now >= deadline || self.stopped() {
                break;
            }
            self.write_probe(DISCOVERY_BASE + k, now);
            k += 1;
            match self.io.send(&self.send_buf) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => refused = true,
                Err(e) => return Err(EngineError::Io(e)),
            }
            let until = (now + step).min(deadline);
            loop {
                match self.io.recv_until(&mut self.recv_buf, until) {
                    Ok(Some(r)) => {
                        self.on_datagram(&r);
                    }
                    Ok(None) => break,
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                        refused = true;
                        // Wait out the step rather than spin on the error.
                        if self.clock.now_ns() >= until {
                            break;
                        }
                    }
                    Err(e) if gone(&e).is_some() => return Err(EngineError::NoResponder { refused: true }),
                    Err(e) => return Err(EngineError::Io(e)),
                }
                if self.discovery_done() {
                    return Ok(());
                }
            }
        }
        if self.out.responders.is_empty() && !self.stopped() {
            return Err(EngineError::NoResponder { refused });
        }
        Ok(())
    }

    fn discovery_done(&self) -> bool {
        let n = self.out.responders.len();
        match self.cfg.expect_responders {
            Some(want) => n >= want,
            None => n > 0 && !self.cfg.multicast,
        }
    }

    fn phase_of(&self, seq: u64) -> Phase {
        if seq >= self.measure_start { Phase::Measure } else { Phase::Warmup }
    }

    fn begin_measure(&mut self, seq: u64, now: u64) {
        self.measure_start = seq;
        self.measure_start_ns = now;
        self.out.measure_start_seq = seq;
        self.out.warmup_sent = seq;
        self.shown.warmup_probes.store(seq, Ordering::Relaxed);
        self.shown.warmup_ns.store(now.saturating_sub(self.out.start_ns), Ordering::Relaxed);
        for r in &mut self.out.responders {
            r.stats.begin_measure(seq);
        }
    }

    /// Moves from warm-up to measurement when the warm-up bound is reached; true once the
    /// measurement's own bound is reached (the run is over).
    fn advance_phase(&mut self, seq: u64, now: u64) -> bool {
        if self.measure_start == u64::MAX {
            let start = self.out.start_ns;
            if self.cfg.warmup.reached(seq, now - start) {
                self.begin_measure(seq, now);
            } else {
                return false;
            }
        }
        self.cfg.stop.reached(seq - self.measure_start, now - self.measure_start_ns)
    }

    /// Writes probe `seq`, sent at `t1` (monotonic ns), into the send buffer.
    fn write_probe(&mut self, seq: u64, t1: u64) {
        match &self.cfg.stamp {
            Some(s) => {
                let wall = t1.saturating_add_signed(self.cfg.wall_minus_mono);
                s.stamp(&mut self.send_buf, STAMP_SEQ.to_wire(seq), wall);
            }
            None => probe::stamp(&mut self.send_buf, seq, t1),
        }
    }

    fn send(&mut self, seq: u64, t1: u64) -> io::Result<()> {
        self.write_probe(seq, t1);
        self.io.send(&self.send_buf)?;
        self.next_seq = seq + 1;
        self.shown.sent.store(self.next_seq, Ordering::Relaxed);
        Ok(())
    }

    /// Probe `seq`'s intended send time, asked once per probe in order: the fixed schedule's,
    /// or the next Poisson time (remembered for the replies).
    fn next_due(&mut self, seq: u64) -> u64 {
        if let Some((times, ring)) = &mut self.poisson {
            let due = times.next_due();
            ring[ring_slot(seq)] = due;
            return due;
        }
        self.schedule.expect("open loop has a schedule").intended(seq)
    }

    /// The intended send time of a probe already sent (open loop), `None` in the closed loop
    /// or for a Poisson probe too old to be remembered.
    fn intended(&self, seq: u64) -> Option<u64> {
        match &self.poisson {
            Some((_, ring)) => {
                (seq < self.next_seq && self.next_seq - seq < SEQ_WINDOW as u64).then(|| ring[ring_slot(seq)])
            }
            None => self.schedule.map(|s| s.intended(seq)),
        }
    }

    fn gave_up(&self) -> bool {
        self.out.gave_up.is_some()
    }

    /// Closed loop: the replies to the probe before `seq` are all in (from every responder
    /// the loop waits for).
    fn all_answered(&self, seq: u64) -> bool {
        self.out.responders.iter().all(|x| x.answered >= seq || !Patience::waits_for(x.answered, seq))
    }

    fn closed(&mut self, start: u64) -> io::Result<()> {
        let mut seq = 0u64;
        let mut now = start;
        loop {
            if self.stopped() || self.gave_up() || self.advance_phase(seq, now) {
                break;
            }
            if seq & CPU_SAMPLE_MASK == 0 {
                self.sample_cpu();
            }
            let t1 = self.clock.now_ns();
            self.send(seq, t1)?;
            seq += 1;
            let mut deadline = self.patience.deadline(t1, None);
            let mut first_reply = true;
            while let Some(r) = self.io.recv_until(&mut self.recv_buf, deadline)? {
                self.on_datagram(&r);
                if self.all_answered(seq) {
                    break;
                }
                if first_reply && self.out.responders.iter().any(|x| x.answered == seq) {
                    first_reply = false;
                    deadline = self.patience.deadline(t1, Some(r.at_ns));
                }
            }
            now = self.clock.now_ns();
            self.check_silence(now);
        }
        self.record_sent(seq);
        Ok(())
    }

    fn open(&mut self, start: u64) -> io::Result<()> {
        let mut seq = 0u64;
        let mut now = start;
        let mut due = self.next_due(seq);
        loop {
            if self.stopped() || self.gave_up() {
                break;
            }
            if now >= due {
                if self.advance_phase(seq, due) {
                    break;
                }
                if seq & CPU_SAMPLE_MASK == 0 {
                    self.sample_cpu();
                }
                self.send(seq, now)?;
                self.out.slip.on_send(due, now);
                if seq >= self.measure_start {
                    // On time reads 1 ns (the histogram's floor).
                    latency::record(&mut self.out.lateness, now.saturating_sub(due));
                }
                seq += 1;
                due = self.next_due(seq);
            } else if let Some(r) = self.io.recv_until(&mut self.recv_buf, due)? {
                self.on_datagram(&r);
            }
            now = self.clock.now_ns();
            self.check_silence(now);
        }
        self.record_sent(seq);
        // Drain: replies to the last probes, until every responder answered everything or
        // the last probe's timeout passed. With several responders, one silent for longer
        // than the grace has stopped answering and is not waited for.
        let end = now + self.cfg.timeout_ns;
        let want = self.out.sent + self.out.warmup_sent;
        let several = self.out.responders.len() > 1;
        while !self.stopped() && !self.gave_up() {
            let (now, grace) = (self.clock.now_ns(), self.patience.grace_ns());
            let mut until = end;
            let mut all_in = true;
            for r in &self.out.responders {
                if r.stats.received + r.stats.warmup_received >= want {
                    continue;
                }
                let gives_up_at = r.last_heard_ns.saturating_add(grace);
                if several && now >= gives_up_at {
                    continue;
                }
                all_in = false;
                if several {
                    until = until.min(gives_up_at);
                }
            }
            if all_in {
                break;
            }
            match self.io.recv_until(&mut self.recv_buf, until)? {
                Some(r) => self.on_datagram(&r),
                None if until < end => {}
                None => break,
            }
        }
        Ok(())
    }

    fn record_sent(&mut self, seq: u64) {
        if self.measure_start == u64::MAX {
            // Stopped during warm-up: nothing was measured.
            self.begin_measure(seq, self.clock.now_ns());
        }
        self.out.sent = seq - self.measure_start;
    }

    fn check_silence(&mut self, now: u64) {
        let quiet = now.saturating_sub(self.last_reply_ns);
        if quiet > self.cfg.silence_ns {
            self.out.gave_up = Some(GaveUp::Silence { for_ns: quiet });
        }
    }

    fn sample_cpu(&mut self) {
        if let Some(c) = (self.cfg.cpu_probe)().filter(|&c| c < 128) {
            self.out.cpus_seen |= 1 << c;
        }
    }

    fn finish(&mut self) {
        let end = self.clock.now_ns();
        self.out.end_ns = end;
        self.out.timestamps = self.io.timestamps();
        self.sample_cpu();
        let end_seq = self.out.measure_start_seq + self.out.sent;
        for r in &mut self.out.responders {
            r.stats.finish(end_seq);
            let (trailing, before) = (r.stats.runs.trailing(), r.stats.runs.longest_ended());
            if self.patience.stopped(trailing, before, end.saturating_sub(r.last_heard_ns)) {
                r.stopped =
                    Some(Stopped { at_ns: r.last_heard_ns.saturating_sub(self.out.start_ns), unanswered: trailing });
            }
        }
        if let Some((begin, h)) = self.interval.take()
            && !h.is_empty()
        {
            let start = Duration::from_nanos(begin - self.out.start_ns);
            self.out.intervals.push(Interval {
                start,
                length: Duration::from_nanos(end.saturating_sub(begin)),
                histogram: h,
            });
        }
        if self.stopped() {
            self.out.outcome = Outcome::Interrupted;
        } else if self.gave_up() {
            self.out.outcome = Outcome::PeerSilent;
        }
    }
}

/// Where probe `seq`'s Poisson intended time is kept.
#[expect(clippy::cast_possible_truncation, reason = "reduced modulo the window first")]
const fn ring_slot(seq: u64) -> usize {
    (seq % SEQ_WINDOW as u64) as usize
}
