//! The TCP proxy: an acceptor, and per accepted connection one upstream connection and two
//! pump threads (client to upstream, upstream to client), so any protocol on TCP, a
//! WebSocket included, works through it.
//!
//! A pump reads a chunk, stamps it, asks its direction's `Impairment` when it is due, and
//! writes it then. Chunks keep their order (a byte stream cannot be reordered): a chunk is
//! never due before the one ahead of it, so jitter shows as variation of the added delay
//! without reordering. Instead of dropping, a pump stops reading while the rate queue is
//! longer than `--queue-limit`, or while all pumps together hold `--max-held` bytes
//! (64 MiB): TCP's own flow control then slows the sender, as a bottleneck does. Loss, reordering and duplication would corrupt the
//! stream and are refused by the config.
//!
//! An upstream that refuses: the client's connection is closed cleanly (FIN after its
//! pending bytes are read). One side closing its write half is passed on once the queued
//! bytes are out; an error on either side closes both.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown as Half, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use wirebench_core::units::nanos;

use std::sync::atomic::Ordering;

use wirebench_core::impair::{Impairment, Release, Tally, Verdict};
use wirebench_core::rng::SplitMix64;
use wirebench_net::clock::{Clock, MonoClock};

use super::collect::{Flush, FlushTx};
use super::{Config, FlowCounts, SPIN_NS, seeds};
use crate::shutdown::{POLL, Shutdown};

/// Largest read: with 1,024 connections, two pumps each, 128 MiB of read buffers.
const CHUNK: usize = 64 * 1024;
/// Free read buffers a pump keeps for reuse.
const SPARE: usize = 2;
/// How long to wait for the upstream to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) struct Acceptor {
    pub(super) listener: TcpListener,
    pub(super) cfg: Config,
    pub(super) counts: Arc<FlowCounts>,
    pub(super) tx: FlushTx,
    pub(super) shutdown: Shutdown,
}

impl Acceptor {
    pub(super) fn run(self) {
        let Self { listener, cfg, counts, tx, shutdown } = self;
        let mut index = 0u64;
        let refused = |client: TcpStream| {
            counts.failed();
            close_cleanly(&client);
        };
        crate::accept::run(&listener, &shutdown, "proxy-tcp", cfg.max_flows as u64, refused, |client| {
            index += 1;
            let (cfg, counts, tx, shutdown, index) = (cfg.clone(), counts.clone(), tx.clone(), shutdown.clone(), index);
            Box::new(move || connection(client, &cfg, index, &counts, &tx, &shutdown))
        });
    }
}

/// Closes with a FIN, not a reset: stop writing, read what the client already sent (a
/// close with unread data would send RST), for at most a second.
fn close_cleanly(client: &TcpStream) {
    let _ = client.shutdown(Half::Write);
    let _ = client.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 4096];
    for _ in 0..10 {
        match (&mut &*client).read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
}

fn connection(
    client: TcpStream,
    cfg: &Config,
    index: u64,
    counts: &Arc<FlowCounts>,
    tx: &FlushTx,
    shutdown: &Shutdown,
) {
    let Ok(upstream) = TcpStream::connect_timeout(&cfg.upstream, CONNECT_TIMEOUT) else {
        counts.failed();
        close_cleanly(&client);
        return;
    };
    counts.opened(client.peer_addr().unwrap_or(cfg.listen));
    let setup = || -> std::io::Result<(TcpStream, TcpStream)> {
        for s in [&client, &upstream] {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
        }
        Ok((client.try_clone()?, upstream.try_clone()?))
    };
    let Ok((client2, upstream2)) = setup() else { return };
    let (up_seed, down_seed) = seeds(cfg.seed, index);
    let held = Held(counts.clone());
    let down =
        Pump::new(upstream2, client2, cfg.down, down_seed, cfg, tx.clone(), shutdown.clone(), false, held.clone());
    let handle = std::thread::Builder::new().name("proxy-tcp-down".into()).spawn(move || down.run());
    let up = Pump::new(client, upstream, cfg.up, up_seed, cfg, tx.clone(), shutdown.clone(), true, held);
    up.run();
    if let Ok(h) = handle {
        let _ = h.join();
    }
}

struct Chunk {
    at_ns: u64,
    arrival_ns: u64,
    left_ns: u64,
    buf: Vec<u8>,
}

/// The bytes all pumps hold, shared (`FlowCounts::tcp_held`).
#[derive(Clone)]
pub(super) struct Held(pub(super) Arc<FlowCounts>);

impl Held {
    fn add(&self, n: usize) {
        self.0.tcp_held.fetch_add(n, Ordering::Relaxed);
    }
    fn sub(&self, n: usize) {
        self.0.tcp_held.fetch_sub(n, Ordering::Relaxed);
    }
    fn get(&self) -> usize {
        self.0.tcp_held.load(Ordering::Relaxed)
    }
}

struct Pump {
    src: TcpStream,
    dst: TcpStream,
    imp: Impairment,
    rng: SplitMix64,
    tally: Tally,
    queue: VecDeque<Chunk>,
    spare: Vec<Vec<u8>>,
    queued: usize,
    held: Held,
    max_held: usize,
    last_at: u64,
    read_cap: usize,
    queue_limit_ns: u64,
    interval_ns: u64,
    up: bool,
    clock: MonoClock,
    tx: FlushTx,
    shutdown: Shutdown,
}

impl Pump {
    #[expect(clippy::too_many_arguments, reason = "a constructor of plain parts")]
    fn new(
        src: TcpStream,
        dst: TcpStream,
        spec: wirebench_core::impair::Spec,
        seed: u64,
        cfg: &Config,
        tx: FlushTx,
        shutdown: Shutdown,
        up: bool,
        held: Held,
    ) -> Self {
        // The pump applies the queue limit as back-pressure, so the bucket itself never drops.
        let queue_limit_ns = spec.queue_limit_ns;
        let imp = Impairment::new(wirebench_core::impair::Spec { queue_limit_ns: u64::MAX, ..spec });
        // Under a rate limit, read no more than the bucket's depth at once, so the release
        // granularity follows the bucket rather than the read size.
        let read_cap =
            spec.rate_bps.map_or(CHUNK, |_| usize::try_from(spec.burst_bytes).unwrap_or(CHUNK).clamp(1514, CHUNK));
        Self {
            src,
            dst,
            imp,
            rng: SplitMix64::new(seed),
            tally: Tally::default(),
            queue: VecDeque::new(),
            spare: Vec::new(),
            queued: 0,
            held,
            max_held: cfg.max_held,
            last_at: 0,
            read_cap,
            queue_limit_ns,
            interval_ns: nanos(cfg.interval),
            up,
            clock: MonoClock::default(),
            tx,
            shutdown,
        }
    }

    fn run(mut self) {
        let ok = self.pump();
        if ok {
            let _ = self.dst.shutdown(Half::Write);
        } else {
            // An error on either side ends both directions.
            let _ = self.src.shutdown(Half::Both);
            let _ = self.dst.shutdown(Half::Both);
        }
        self.held.sub(self.queued);
        // Chunks still queued at the stop are never sent: counted, so in = out + drops.
        for _ in self.queue.drain(..) {
            self.tally.on_drop(wirebench_core::impair::DropReason::Send);
        }
        self.flush();
    }

    /// Forwards until the source closes (true) or an error or the shutdown (false).
    fn pump(&mut self) -> bool {
        let mut eof = false;
        let mut next_flush = self.clock.now_ns() + self.interval_ns;
        let mut buf = self.take_buf();
        loop {
            if self.shutdown.is_set() {
                return false;
            }
            let mut now = self.clock.now_ns();
            while let Some(c) = self.queue.front() {
                if c.at_ns > now {
                    break;
                }
                let c = self.queue.pop_front().expect("peeked");
                if !self.write_all(&c.buf) {
                    return false;
                }
                now = self.clock.now_ns();
                let r =
                    Release { len: c.buf.len(), arrival_ns: c.arrival_ns, left_ns: c.left_ns, now_ns: now, copies: 1 };
                self.tally.on_release(&r, false);
                self.queued -= c.buf.len();
                self.held.sub(c.buf.len());
                if self.spare.len() < SPARE {
                    self.spare.push(c.buf);
                }
            }
            if now >= next_flush {
                self.flush();
                next_flush = now + self.interval_ns;
            }
            if eof && self.queue.is_empty() {
                return true;
            }
            let can_read = !eof && self.held.get() < self.max_held && self.imp.backlog_ns(now) <= self.queue_limit_ns;
            let wait_ns = self.queue.front().map_or(u64::MAX, |c| c.at_ns.saturating_sub(now));
            if !can_read {
                Self::pause(wait_ns);
                continue;
            }
            buf.resize(self.read_cap, 0);
            match self.src.read(&mut buf) {
                Ok(0) => eof = true,
                Ok(n) => {
                    let now = self.clock.now_ns();
                    self.tally.on_arrival(n, now);
                    let Verdict::Deliver { at_ns, left_ns, .. } = self.imp.decide(n, now, &mut self.rng) else {
                        unreachable!("no loss model and no queue limit on a stream")
                    };
                    let at_ns = at_ns.max(self.last_at);
                    self.last_at = at_ns;
                    if at_ns <= now && self.queue.is_empty() {
                        if !self.write_all(&buf[..n]) {
                            return false;
                        }
                        let r = Release { len: n, arrival_ns: now, left_ns, now_ns: self.clock.now_ns(), copies: 1 };
                        self.tally.on_release(&r, false);
                    } else {
                        buf.truncate(n);
                        self.queued += n;
                        self.held.add(n);
                        let next = self.take_buf();
                        let chunk = Chunk { at_ns, arrival_ns: now, left_ns, buf: std::mem::replace(&mut buf, next) };
                        self.queue.push_back(chunk);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if wait_ns <= SPIN_NS {
                        std::hint::spin_loop();
                    } else {
                        let t = (wait_ns - SPIN_NS).min(nanos(POLL));
                        let _ = wirebench_net::wait_readable(&self.src, Duration::from_nanos(t));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Waits without reading: sleeps until 60 us before the next due chunk, then spins.
    fn pause(wait_ns: u64) {
        if wait_ns > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(
                (wait_ns - SPIN_NS).min(u64::try_from(POLL.as_nanos()).unwrap_or(0)),
            ));
        } else {
            std::hint::spin_loop();
        }
    }

    fn take_buf(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| Vec::with_capacity(self.read_cap))
    }

    fn write_all(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            match self.dst.write(data) {
                Ok(0) => return false,
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if self.shutdown.is_set() {
                        return false;
                    }
                    let _ = wirebench_net::ready::wait_writable(&self.dst, POLL);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    fn flush(&mut self) {
        if self.tally.is_empty() {
            return;
        }
        let t = std::mem::take(&mut self.tally);
        let f = if self.up { Flush { up: t, down: Tally::default() } } else { Flush { up: Tally::default(), down: t } };
        let _ = self.tx.send(f);
    }
}
