//! The paced sender.

use std::io::{self, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use wirebench_core::units::nanos;

use serde::Serialize;
use wirebench_core::generator::{SlipSecond, SlipSeries};
use wirebench_core::schedule::spin::{SpinMargin, Step};
use wirebench_core::schedule::{Schedule, Slip, Stop};
use wirebench_core::units::MsgRate;
use wirebench_core::wire::stream;
use wirebench_net::batch::UdpBatchSender;
use wirebench_net::clock::{Clock, MonoClock};
use wirebench_net::timer;

/// How one publisher sends.
#[derive(Debug, Clone, Copy)]
pub struct SendSpec {
    /// Session id.
    pub session: u64,
    /// Publisher index.
    pub publisher: u16,
    /// Message size.
    pub size: usize,
    /// Messages per second (`None` = flat out).
    pub rate: Option<f64>,
    /// When to stop.
    pub stop: Stop,
    /// Fire and forget: a closed port at the far end (ICMP unreachable) is not the end.
    pub ignore_refused: bool,
}

/// What one publisher sent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sent {
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
    /// Monotonic ns of the first send.
    pub first_ns: u64,
    /// Monotonic ns when the last send returned: `last_ns - first_ns` is how long the
    /// sending took, the time base of the run's rates.
    pub last_ns: u64,
    /// Mean send slip (paced streams), ns.
    pub slip_mean_ns: u64,
    /// Largest slip, ns.
    pub slip_max_ns: u64,
    /// GSO was used.
    pub gso: bool,
    /// Stopped because the far end's port closed (ICMP port unreachable, or a reset).
    pub refused: bool,
    /// CPU time this sending thread used over its send loop (`CLOCK_THREAD_CPUTIME_ID`), ns.
    pub cpu_ns: u64,
    /// The wall time `cpu_ns` was read over (the send loop, from just before its CPU was read
    /// to just after), ns.
    pub cpu_wall_ns: u64,
    /// Paced: schedule slip per second.
    pub slip_seconds: Vec<SlipSecond>,
    /// Paced: times the thread slept waiting for a send time (it spins only the last
    /// microseconds before one, `schedule::spin`).
    pub sleeps: u64,
    /// Paced, [`Behind::Resume`]: sending time it moved its schedule past after stalls
    /// (what fell due then was never sent), ns.
    pub skipped_ns: u64,
}

impl Sent {
    /// How long the sending took, ns.
    pub const fn send_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.first_ns)
    }
}

/// How long several publishers' sending took together: the first send of any to the end of
/// the last of any, ns (0 when none sent).
pub fn span_of(sent: &[Sent]) -> u64 {
    let active = || sent.iter().filter(|s| s.messages > 0);
    let first = active().map(|s| s.first_ns).min();
    let last = active().map(|s| s.last_ns).max();
    first.zip(last).map_or(0, |(f, l)| l.saturating_sub(f))
}

/// When the last send of `sent` returned, in ns after `origin_ns` (a `MonoClock` reading):
/// the end of the sending on the clock that reading started (0 when nothing was sent).
pub fn end_after(sent: &[Sent], origin_ns: u64) -> u64 {
    sent.iter().filter(|s| s.messages > 0).map(|s| s.last_ns).max().map_or(0, |l| l.saturating_sub(origin_ns))
}

/// Longest single sleep while waiting for a send: the stop flag is looked at this often.
const SLEEP_MAX_NS: u64 = 50_000_000;

/// Waits until the clock reaches `due` (or `stop` is set): sleeps on an absolute timer to
/// the waiter's margin before it, then spins the rest (`schedule::spin`). `mono_off`: what
/// to add to a `clock` reading for `CLOCK_MONOTONIC`, the timer's clock. Returns how many
/// times it slept.
fn wait_until(clock: &MonoClock, mono_off: u64, due: u64, stop: &AtomicBool, w: &mut SpinMargin) -> u64 {
    let mut sleeps = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            return sleeps;
        }
        match w.step(clock.now_ns(), due) {
            Step::Go => return sleeps,
            Step::Spin => std::hint::spin_loop(),
            Step::Sleep(at) => {
                // An error (none is expected) leaves the loop spinning toward `due`.
                if timer::sleep_until(at.saturating_add(mono_off)).is_ok() {
                    sleeps += 1;
                    w.woke(at, clock.now_ns());
                }
            }
        }
    }
}

/// What to add to a [`MonoClock`] reading for `CLOCK_MONOTONIC` (both are the monotonic
/// clock; `MonoClock` counts from the process's origin).
fn mono_offset(clock: &MonoClock) -> u64 {
    // the smallest of a few tries: the two reads as close together as they come
    (0..3).map(|_| timer::mono_now_ns().saturating_sub(clock.now_ns())).min().unwrap_or(0)
}

/// A paced batch carries the messages due in this long (fewer: pacing stays even)...
const BATCH_SPAN_S: f64 = 50e-6;
/// ... and at least [`MIN_BATCH`] when they are due within this long: a wake-up costs about
/// as much CPU as a send (about 10 us each on a VM), so a 10k msg/s stream wakes 2,500
/// times a second, not 10,000.
const MIN_BATCH_SPAN_S: f64 = 400e-6;
/// See [`MIN_BATCH_SPAN_S`].
const MIN_BATCH: f64 = 4.0;

/// The batch size of a paced stream (all `max` flat out): the messages due in 50 us, at
/// least 4 when 4 are due within 400 us, at least 1.
fn batch_for(rate: Option<f64>, max: usize) -> usize {
    match rate {
        None => max,
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive")]
        Some(r) => (((r * BATCH_SPAN_S).max((r * MIN_BATCH_SPAN_S).min(MIN_BATCH)) + 1e-9) as usize).clamp(1, max),
    }
}

/// A transport that sends a run of equal-sized messages.
pub trait Out {
    /// Most messages per call.
    fn max_batch(&self) -> usize;
    /// Sends `buf` (whole messages); returns how many went.
    fn send(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// GSO in use.
    fn gso(&self) -> bool {
        false
    }
    /// The receiver may be on this host (loopback, a local address, a multicast group).
    fn receiver_may_be_local(&self) -> bool {
        false
    }
}

/// The nice value a flat-out sender whose receiver may share this host takes: it yields the
/// CPU to the receiver it measures (anyone may lower their own priority).
pub const LOCAL_FLAT_OUT_NICE: i32 = 5;
/// The nice value a paced sender asks for (where allowed: root, `CAP_SYS_NICE`, or within
/// `RLIMIT_NICE`): it sleeps between sends, and on a busy host a woken thread that waits
/// for a CPU sends late. Below the receiver's (`recv::RECEIVER_NICE`).
pub const PACED_NICE: i32 = -5;

impl Out for UdpBatchSender {
    fn max_batch(&self) -> usize {
        Self::max_batch(self)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        Self::send(self, buf)
    }
    fn gso(&self) -> bool {
        Self::gso(self)
    }
    fn receiver_may_be_local(&self) -> bool {
        self.socket()
            .peer_addr()
            .is_ok_and(|a| a.ip().is_loopback() || a.ip().is_multicast() || UdpSocket::bind((a.ip(), 0)).is_ok())
    }
}

/// TCP: messages are frames on the stream.
#[derive(Debug)]
pub struct TcpOut<'a> {
    /// The connection.
    pub conn: &'a mut TcpStream,
    /// Message size.
    pub size: usize,
}

impl Out for TcpOut<'_> {
    fn max_batch(&self) -> usize {
        (256 * 1024 / self.size).clamp(1, 64)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.conn.write_all(buf)?;
        Ok(buf.len() / self.size)
    }
}

/// What a paced sender does once it has fallen behind its schedule by more than a batch
/// (its host stalled it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behind {
    /// Sends what is due at once, back to back, until it is on schedule again: the run's
    /// rate is the rate asked for (an open-loop stream).
    CatchUp,
    /// Sends at most [`RESUME_BURST_NS`] of what it owes at once (or a batch, if longer),
    /// moves its schedule past the rest and goes on at the rate: a few messages fewer, and
    /// no burst a shaper's bucket could not take (a rate search's trial, whose bottleneck
    /// would queue a longer one and read it as the rate being too high).
    Resume,
}

/// The most a resuming sender sends at once after a stall: 2 ms of the rate (8 KB at
/// 50 Mbit/s of 1468-byte messages).
pub const RESUME_BURST_NS: u64 = 2_000_000;

/// Sends one publisher's stream until its `Stop`, the `stop` flag, or an error, catching up
/// after a stall ([`Behind::CatchUp`]). A flat-out sender whose receiver may be on this
/// host lowers its priority ([`LOCAL_FLAT_OUT_NICE`]).
pub fn run(out: &mut dyn Out, spec: &SendSpec, stop: &AtomicBool) -> io::Result<Sent> {
    run_paced(out, spec, stop, Behind::CatchUp)
}

/// The sending thread's priority and timer slack: a flat-out sender to a receiver that may
/// share this host yields to it; a paced one asks for 1 ns timer slack (the default lets
/// the kernel wake it up to 50 us late) and a priority no lower than a paced sender's.
fn prepare_thread(spec: &SendSpec, receiver_may_be_local: bool) {
    if spec.rate.is_none() && receiver_may_be_local {
        let now = wirebench_net::priority::current_nice();
        let _ = wirebench_net::priority::set_nice(now.max(LOCAL_FLAT_OUT_NICE));
    }
    if spec.rate.is_some() {
        let _ = timer::set_timer_slack(1);
        if wirebench_net::priority::current_nice() > PACED_NICE {
            let _ = wirebench_net::priority::set_nice(PACED_NICE);
        }
    }
}

/// How late a batch may be before a resuming sender moves its schedule past the rest: a
/// batch's span, at least [`RESUME_BURST_NS`]; never for one that catches up.
fn resume_after(behind: Behind, schedule: Option<Schedule>, batch: usize) -> u64 {
    match behind {
        Behind::CatchUp => u64::MAX,
        Behind::Resume => {
            schedule.map_or(u64::MAX, |s| (s.intended(batch as u64) - s.intended(0)).max(RESUME_BURST_NS))
        }
    }
}

/// Sends one batch: how many went, or `None` when the receiver is gone (its port closed or
/// the connection reset). A refusal that belongs to an earlier datagram sends nothing and,
/// with `ignore_refused`, is not a gone receiver.
#[inline]
fn send_batch(out: &mut dyn Out, bytes: &[u8], ignore_refused: bool) -> io::Result<Option<usize>> {
    match out.send(bytes) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && ignore_refused => Ok(Some(0)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// [`run`], with what a paced sender does after a stall.
pub fn run_paced(out: &mut dyn Out, spec: &SendSpec, stop: &AtomicBool, behind: Behind) -> io::Result<Sent> {
    prepare_thread(spec, out.receiver_may_be_local());
    let clock = MonoClock::default();
    let mono_off = mono_offset(&clock);
    let mut waiter = SpinMargin::new(SLEEP_MAX_NS);
    let batch = batch_for(spec.rate, out.max_batch());
    let mut buf = vec![0u8; batch * spec.size];
    for m in buf.chunks_exact_mut(spec.size) {
        stream::init(m, spec.session, spec.publisher);
    }
    let start = clock.now_ns();
    let schedule = spec.rate.and_then(MsgRate::new).map(|r| Schedule::new(start, r));
    // Resume: how late a batch may be before the schedule moves past the rest, and how far
    // it has moved
    let resume_after = resume_after(behind, schedule, batch);
    let mut moved_ns = 0u64;
    let mut slip = Slip::default();
    // One row per second of the run, reserved now: recording allocates nothing.
    let seconds =
        spec.stop.deadline.map_or(3_600, |d| usize::try_from(d.as_secs()).unwrap_or(usize::MAX)).saturating_add(2);
    let mut series = SlipSeries::with_seconds(start, if schedule.is_some() { seconds } else { 0 });
    let mut sent = Sent { gso: out.gso(), first_ns: start, ..Sent::default() };
    let mut seq = 0u64;
    // The CPU is read around the send loop alone, inside a wall window of its own: the share
    // is never more than the time it covers.
    let cpu_t0 = clock.now_ns();
    let cpu_before = wirebench_net::rusage::thread_cpu_ns();
    loop {
        let now = clock.now_ns();
        if stop.load(Ordering::Relaxed) || spec.stop.reached(seq, now - start) {
            break;
        }
        let left = spec.stop.max_count.map_or(u64::MAX, |m| m - seq);
        let b = usize::try_from(left).unwrap_or(usize::MAX).min(batch);
        if let Some(s) = schedule {
            let due = s.intended(seq).saturating_add(moved_ns);
            // Never wait past the run's deadline for a send that would come after it.
            let end = spec.stop.deadline.map_or(u64::MAX, |d| start.saturating_add(nanos(d)));
            sent.sleeps += wait_until(&clock, mono_off, due.min(end), stop, &mut waiter);
            if stop.load(Ordering::Relaxed) || spec.stop.reached(seq, clock.now_ns() - start) {
                break;
            }
            let now = clock.now_ns();
            slip.on_send(due, now);
            series.on_send(due, now);
            if now - due > resume_after {
                moved_ns += now - due - resume_after;
                sent.skipped_ns = moved_ns;
            }
        }
        let t = clock.now_ns();
        for (i, m) in buf[..b * spec.size].chunks_exact_mut(spec.size).enumerate() {
            stream::stamp(m, seq + i as u64, t);
        }
        let Some(n) = send_batch(out, &buf[..b * spec.size], spec.ignore_refused)? else {
            sent.refused = true;
            break;
        };
        if seq == 0 {
            sent.first_ns = t;
        }
        seq += n as u64;
        sent.last_ns = clock.now_ns();
    }
    sent.messages = seq;
    sent.bytes = seq * spec.size as u64;
    sent.slip_mean_ns = slip.mean_ns();
    sent.slip_max_ns = slip.max_ns();
    sent.slip_seconds = series.finish();
    let cpu_after = wirebench_net::rusage::thread_cpu_ns();
    sent.cpu_wall_ns = clock.now_ns().saturating_sub(cpu_t0);
    sent.cpu_ns = cpu_before.zip(cpu_after).map_or(0, |(a, b)| b.saturating_sub(a));
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A paced stream of 20k msg/s (batches of 4, one every 200 us) to a socket on
    /// loopback: the sender sleeps between its batches rather than spinning through the
    /// gaps, at most once per batch (a late batch, on a busy host, goes without one).
    #[test]
    fn a_paced_sender_sleeps_between_batches() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let spec = SendSpec {
            session: 1,
            publisher: 0,
            size: 200,
            rate: Some(20_000.0),
            stop: Stop { max_count: Some(2_000), deadline: Some(std::time::Duration::from_secs(30)) },
            ignore_refused: true,
        };
        let sent = run(&mut UdpBatchSender::new(tx, 200), &spec, &AtomicBool::new(false)).unwrap();
        assert_eq!(sent.messages, 2_000);
        assert!((1..=500).contains(&sent.sleeps), "{} sleeps before 500 batches", sent.sleeps);
    }

    /// A sender held up for 30 ms by its host (here: its first send takes that long) either
    /// catches up with a burst of the 30 messages it owes, or sends 2 ms of them and
    /// resumes at the rate with the rest never sent.
    #[test]
    fn a_resuming_sender_never_bursts_after_a_stall() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let spec = SendSpec {
            session: 1,
            publisher: 0,
            size: 64,
            rate: Some(1_000.0),
            stop: Stop { max_count: None, deadline: Some(std::time::Duration::from_millis(100)) },
            ignore_refused: true,
        };
        let go = |behind| {
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.connect(rx.local_addr().unwrap()).unwrap();
            let mut out =
                Stalls { inner: UdpBatchSender::new(tx, 64), stalled: false, stamps: Vec::new(), stall_ns: 0 };
            let sent = run_paced(&mut out, &spec, &AtomicBool::new(false), behind).unwrap();
            // sends within 3 ms after the stalled one ended
            let after = out.stamps[1];
            let burst = out.stamps.iter().filter(|&&t| t >= after && t < after + 3_000_000).count();
            (sent, burst, out.stall_ns)
        };
        let (caught_up, burst, _) = go(Behind::CatchUp);
        assert!(burst >= 20 && caught_up.messages >= 95, "{burst} at once, {} sent", caught_up.messages);
        let (resumed, burst, stall_ns) = go(Behind::Resume);
        assert!(burst <= 6, "{burst} sends in 3 ms at 1k/s");
        // The stall lasts at least 30 ms, longer on a busy host: the bounds follow the
        // measured stall, not the asked one.
        // The next message was due 1 ms after the stalled one: it leaves the stall less 1 ms
        // late, and all of that but the 2 ms sent at once is skipped.
        assert!(resumed.slip_max_ns + 1_500_000 >= stall_ns, "the stall is in the slip: {}", resumed.slip_max_ns);
        assert!(
            resumed.skipped_ns + RESUME_BURST_NS + 2_000_000 >= stall_ns,
            "the stall but 3 ms skipped: {} of a {stall_ns} ns stall",
            resumed.skipped_ns
        );
        let kept = 100 - i64::try_from(resumed.skipped_ns / 1_000_000).unwrap();
        assert!(
            (i64::try_from(resumed.messages).unwrap() - kept).abs() <= 4,
            "100 ms less what was skipped, at 1k/s: {} sent, {} ms skipped",
            resumed.messages,
            resumed.skipped_ns / 1_000_000
        );
        assert_eq!(caught_up.skipped_ns, 0);
    }

    /// A transport whose first send takes 30 ms (the host stalled the sender), recording
    /// when each send began.
    struct Stalls {
        inner: UdpBatchSender,
        stalled: bool,
        stamps: Vec<u64>,
        /// How long the stall really took.
        stall_ns: u64,
    }

    impl Out for Stalls {
        fn max_batch(&self) -> usize {
            self.inner.max_batch()
        }
        fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.stamps.push(MonoClock::default().now_ns());
            if !self.stalled {
                self.stalled = true;
                // the stall this test is about: the sender's thread held up
                let t0 = MonoClock::default().now_ns();
                std::thread::sleep(std::time::Duration::from_millis(30));
                self.stall_ns = MonoClock::default().now_ns() - t0;
            }
            self.inner.send(buf)
        }
    }

    #[test]
    fn batches_keep_low_rates_even() {
        assert_eq!(batch_for(Some(1000.0), 64), 1);
        assert_eq!(batch_for(Some(2_499.0), 64), 1, "0.9996 due in 400 us");
        assert_eq!(batch_for(Some(5_000.0), 64), 2);
        assert_eq!(batch_for(Some(10_000.0), 64), 4, "a 16 Mbit/s stream of 200 B wakes 2,500 times a second");
        assert_eq!(batch_for(Some(68_120.0), 64), 4, "800 Mbit/s of 1468 B");
        assert_eq!(batch_for(Some(200_000.0), 64), 10);
        assert_eq!(batch_for(Some(1e8), 64), 64);
        assert_eq!(batch_for(Some(10_000.0), 2), 2, "never above the transport's batch");
        assert_eq!(batch_for(None, 44), 44);
    }
}
