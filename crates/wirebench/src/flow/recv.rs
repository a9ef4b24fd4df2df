//! The receiver: accounts stream messages per publisher, publishes a snapshot every
//! [`PUBLISH_NS`] (so whoever reports an interval reads counts at most that old), and drains
//! after it is told to stop. The UDP receive thread asks for a higher scheduling priority
//! than anything else on the host ([`RECEIVER_NICE`]): where it shares a CPU with the sender
//! it measures, or with other work, a receiver that loses the CPU loses datagrams.

use std::io::{self, ErrorKind, Read};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wirebench_core::stream::wake::WakeRecorder;
use wirebench_core::stream::{StreamCounts, StreamRx};
use wirebench_core::wire::stream;
use wirebench_net::batch::{Batch, SLOT, SLOTS, UdpBatchReceiver};
use wirebench_net::clock::{Clock, MonoClock, wall_now_ns};
use wirebench_net::priority::Nice;

/// Most publishers in one stream.
pub const MAX_PUBLISHERS: u16 = 64;

/// Per-publisher accounting of one session, plus what did not belong.
#[derive(Debug)]
pub struct Accounts {
    session: u64,
    /// One per publisher.
    pub rx: Vec<StreamRx>,
    /// Datagrams that were not this session's stream messages.
    pub foreign: u64,
    /// UDP: the receiving thread's wake-up delay (kernel RX stamp to the application's read).
    pub wake: WakeRecorder,
}

impl Accounts {
    /// Accounts for `publishers` publishers of `session`.
    pub fn new(session: u64, publishers: u16) -> Self {
        Self {
            session,
            rx: (0..publishers).map(|_| StreamRx::new()).collect(),
            foreign: 0,
            wake: WakeRecorder::new(false),
        }
    }

    /// Accounts one datagram (or frame) received at `now`.
    #[inline]
    pub fn on_message(&mut self, m: &[u8], now: u64) {
        match stream::parse_datagram(m) {
            Ok(h) if h.session == self.session && usize::from(h.publisher) < self.rx.len() => {
                self.rx[usize::from(h.publisher)].on_datagram(h.seq, m.len(), h.sent_ns, now);
            }
            _ => self.foreign += 1,
        }
    }

    /// Lifetime counts per publisher, with the one-way delay's rise (`StreamRx::summary`).
    pub fn counts(&self) -> Vec<StreamCounts> {
        self.rx.iter().map(StreamRx::summary).collect()
    }

    /// Unique messages received, all publishers.
    pub fn received(&self) -> u64 {
        self.rx.iter().map(|r| r.counts().received).sum()
    }

    /// Copies the lifetime counts into `into` (no allocation once it has the capacity).
    pub fn counts_into(&self, into: &mut Vec<StreamCounts>) {
        into.clear();
        into.extend(self.rx.iter().map(StreamRx::summary));
    }
}

/// Shared between a receiver thread and whoever reports on it.
#[derive(Debug, Default)]
pub struct Progress {
    /// The latest per-publisher lifetime counts (at most [`PUBLISH_NS`] old).
    pub snapshot: Mutex<Vec<StreamCounts>>,
    /// Datagrams so far that were not the session's stream messages (with the snapshot).
    pub foreign: AtomicU64,
    /// Set to end the receive loop once it has drained.
    pub finish: AtomicBool,
    /// Messages the senders say they sent (the drain ends early once all arrived).
    pub expected: AtomicU64,
    /// Set once the first stream message of the session arrived (a polite sender waits
    /// for it).
    pub heard: AtomicBool,
    /// The receive thread's nice value, once it started.
    pub nice: AtomicI32,
}

/// How often the receiver publishes its counts, ns: an interval report reads counts at
/// most this old (1 % of a one-second interval at 10 ms).
pub const PUBLISH_NS: u64 = 10_000_000;
/// The nice value a UDP receive thread asks for (allowed to root, `CAP_SYS_NICE`, or
/// within `RLIMIT_NICE`; otherwise it keeps its own).
pub const RECEIVER_NICE: i32 = -10;
/// How long the drain waits after the last message once told to finish.
const DRAIN_IDLE_NS: u64 = 100_000_000;
/// And at most.
const DRAIN_MAX_NS: u64 = 2_000_000_000;

fn publish(p: &Progress, a: &Accounts) {
    if let Ok(mut s) = p.snapshot.lock() {
        a.counts_into(&mut s);
    }
    p.foreign.store(a.foreign, Ordering::Relaxed);
}

/// Raises the calling (receive) thread's priority as far as it is allowed to
/// ([`RECEIVER_NICE`]) and notes the result in `p`.
pub fn raise_priority(p: &Progress) {
    let nice = match wirebench_net::priority::set_nice(RECEIVER_NICE) {
        Ok(Nice::Set(n) | Nice::Refused(n)) => n,
        Err(_) => wirebench_net::priority::current_nice(),
    };
    p.nice.store(nice, Ordering::Relaxed);
}

/// Test-only: set (to anything) in a receiver's environment, its sockets do not ask for
/// kernel RX timestamps, so a run shows what a host without them reports.
pub const NO_RX_STAMPS_ENV: &str = "WIREBENCH_TEST_NO_RX_TIMESTAMPS";

/// Turns software RX timestamps on for a stream receiver's socket (`SO_TIMESTAMPING`); false
/// when the kernel refused or [`NO_RX_STAMPS_ENV`] is set.
pub fn stamp_rx(rx: &mut UdpBatchReceiver) -> bool {
    std::env::var_os(NO_RX_STAMPS_ENV).is_none() && rx.stamp_rx().is_ok()
}

/// Receives UDP until told to finish (then drains), or `abort` is set. Runs at the highest
/// priority it may have ([`raise_priority`]).
pub fn udp(rx: &mut UdpBatchReceiver, acc: &mut Accounts, p: &Arc<Progress>, abort: &AtomicBool) -> io::Result<()> {
    raise_priority(p);
    let clock = MonoClock::default();
    let mut buf = vec![0u8; SLOTS * SLOT];
    let mut out = [Batch::EMPTY; SLOTS];
    if let Ok(mut s) = p.snapshot.lock() {
        s.reserve(acc.rx.len());
    }
    let mut next_publish = clock.now_ns() + PUBLISH_NS;
    let mut finish_at: Option<u64> = None;
    let mut last_data = clock.now_ns();
    while !abort.load(Ordering::Relaxed) {
        let n = rx.recv_many(&mut buf, &mut out)?;
        let now = clock.now_ns();
        // the application's receive time on the kernel stamps' clock (CLOCK_REALTIME)
        let read_ns = if n > 0 { wall_now_ns() } else { 0 };
        for (k, b) in out[..n].iter().enumerate() {
            acc.wake.record(read_ns, b.rx_ns, b.len.div_ceil(b.seg) as u64);
            for m in buf[k * SLOT..k * SLOT + b.len].chunks(b.seg) {
                acc.on_message(m, now);
            }
            last_data = now;
        }
        if n > 0 && !p.heard.load(Ordering::Relaxed) && acc.received() > 0 {
            p.heard.store(true, Ordering::Relaxed);
        }
        if now >= next_publish {
            publish(p, acc);
            next_publish = now + PUBLISH_NS;
        }
        if p.finish.load(Ordering::Relaxed) {
            let since = *finish_at.get_or_insert(now);
            let all_in = acc.received() >= p.expected.load(Ordering::Relaxed);
            if all_in || now - last_data.max(since) > DRAIN_IDLE_NS || now - since > DRAIN_MAX_NS {
                break;
            }
        }
    }
    publish(p, acc);
    Ok(())
}

/// Reads TCP stream frames from `conn` into `acc` until a frame that is not a stream
/// message begins (returned: the bytes already read from it on), the peer closes, or
/// `abort` is set.
/// `tick` is called about once per interval with the current counts.
pub fn tcp(
    conn: &mut TcpStream,
    acc: &mut Accounts,
    abort: &AtomicBool,
    tick: &mut dyn FnMut(&Accounts),
) -> io::Result<Option<Vec<u8>>> {
    let clock = MonoClock::default();
    let mut buf = vec![0u8; 1 << 20];
    let (mut start, mut end) = (0usize, 0usize);
    let mut next_tick = clock.now_ns() + 1_000_000_000;
    loop {
        // Whole frames first; a control frame (8-byte header) may be shorter than a stream
        // header, so look at 4 bytes to tell them apart.
        while end - start >= 4 {
            if buf[start + 3] != wirebench_core::wire::Kind::Stream as u8 {
                return Ok(Some(buf[start..end].to_vec()));
            }
            if end - start < stream::HEADER_LEN {
                break;
            }
            let Ok(h) = stream::parse_header(&buf[start..end]) else {
                return Ok(Some(buf[start..end].to_vec()));
            };
            if end - start < h.len {
                break;
            }
            acc.on_message(&buf[start..start + h.len], clock.now_ns());
            start += h.len;
        }
        if start == end {
            (start, end) = (0, 0);
        } else if buf.len() - end < 65_536 {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        if abort.load(Ordering::Relaxed) {
            return Ok(None);
        }
        match conn.read(&mut buf[end..]) {
            Ok(0) => return Ok(None),
            Ok(n) => end += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
        let now = clock.now_ns();
        if now >= next_tick {
            tick(acc);
            next_tick = now + 1_000_000_000;
        }
    }
}
