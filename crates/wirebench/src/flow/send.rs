//! The paced sender.

use std::io::{self, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use wirebench_core::generator::{SlipSecond, SlipSeries};
use wirebench_core::schedule::{Schedule, Slip, Stop};
use wirebench_core::units::MsgRate;
use wirebench_core::wire::stream;
use wirebench_net::batch::UdpBatchSender;
use wirebench_net::clock::{Clock, MonoClock};

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

/// Waits until the clock reaches `due`: sleeps while more than 200 µs away (never longer
/// than [`SLEEP_MAX_NS`] at a time, so a stop is seen however slow the rate), then spins.
fn wait_until(clock: &MonoClock, due: u64, stop: &AtomicBool) {
    loop {
        let now = clock.now_ns();
        if now >= due || stop.load(Ordering::Relaxed) {
            return;
        }
        let left = due - now;
        if left > 200_000 {
            std::thread::sleep(Duration::from_nanos((left - 100_000).min(SLEEP_MAX_NS)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The batch size that keeps pacing even: about 50 µs of messages, at least 1.
fn batch_for(rate: Option<f64>, max: usize) -> usize {
    match rate {
        None => max,
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive")]
        Some(r) => ((r * 50e-6) as usize).clamp(1, max),
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

/// Sends one publisher's stream until its `Stop`, the `stop` flag, or an error. A flat-out
/// sender whose receiver may be on this host lowers its priority ([`LOCAL_FLAT_OUT_NICE`]).
pub fn run(out: &mut dyn Out, spec: &SendSpec, stop: &AtomicBool) -> io::Result<Sent> {
    if spec.rate.is_none() && out.receiver_may_be_local() {
        let now = wirebench_net::priority::current_nice();
        let _ = wirebench_net::priority::set_nice(now.max(LOCAL_FLAT_OUT_NICE));
    }
    let clock = MonoClock::default();
    let batch = batch_for(spec.rate, out.max_batch());
    let mut buf = vec![0u8; batch * spec.size];
    for m in buf.chunks_exact_mut(spec.size) {
        stream::init(m, spec.session, spec.publisher);
    }
    let start = clock.now_ns();
    let schedule = spec.rate.and_then(MsgRate::new).map(|r| Schedule::new(start, r));
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
            let due = s.intended(seq);
            // Never wait past the run's deadline for a send that would come after it.
            let end = spec
                .stop
                .deadline
                .map_or(u64::MAX, |d| start.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
            wait_until(&clock, due.min(end), stop);
            if stop.load(Ordering::Relaxed) || spec.stop.reached(seq, clock.now_ns() - start) {
                break;
            }
            let now = clock.now_ns();
            slip.on_send(due, now);
            series.on_send(due, now);
        }
        let t = clock.now_ns();
        for (i, m) in buf[..b * spec.size].chunks_exact_mut(spec.size).enumerate() {
            stream::stamp(m, seq + i as u64, t);
        }
        let n = match out.send(&buf[..b * spec.size]) {
            Ok(n) => n,
            // The error belongs to an earlier datagram; this call sent nothing.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && spec.ignore_refused => 0,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ) =>
            {
                sent.refused = true;
                break;
            }
            Err(e) => return Err(e),
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

    #[test]
    fn batches_keep_low_rates_even() {
        assert_eq!(batch_for(Some(1000.0), 64), 1);
        assert_eq!(batch_for(Some(200_000.0), 64), 10);
        assert_eq!(batch_for(Some(1e8), 64), 64);
        assert_eq!(batch_for(None, 44), 44);
    }
}
