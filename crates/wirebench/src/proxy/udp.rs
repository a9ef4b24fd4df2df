//! The UDP proxy: one thread, one event loop, like a NAT. Each client address is a flow
//! with its own upstream socket (connected to the upstream), so replies find their way
//! back; a flow idle longer than `--idle-timeout` is forgotten.
//!
//! A datagram is stamped on arrival (monotonic ns), decided by its direction's
//! `Impairment`, and then either sent at once (due now: no copy, no queue) or copied into
//! the store and pushed on a binary heap ordered by due time. The store is bounded: at most
//! `--max-held` bytes (64 MiB) and [`STORE`] packets wait at once, more are dropped and
//! counted as "queue full"; released buffers are kept for reuse up to [`POOL_BYTES`] and
//! freed beyond, so a burst of large datagrams does not pin its memory for the run. The loop sleeps
//! in `ppoll` (nanosecond timer) until 60 us before the next due packet and spins the
//! rest, so releases land within a few microseconds of their due time, not on a 1 ms
//! tick. An upstream that refuses (ICMP port unreachable) gives the flow nothing back,
//! as a real network would, and every other flow carries on.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use wirebench_core::units::nanos;

use wirebench_core::impair::{DropReason, Impairment, Release, ReleaseOrder, Tally, Verdict};
use wirebench_core::rng::SplitMix64;
use wirebench_net::clock::{Clock, MonoClock};
use wirebench_net::ready::ReadySet;

use super::collect::{Flush, FlushTx};
use super::{Config, FlowCounts, SPIN_IDLE_NS, SPIN_NS, seeds};
use crate::shutdown::{POLL, Shutdown};

/// Datagrams read from one socket before looking at the others and the heap.
const BATCH: usize = 64;
/// Packets waiting at once; more are dropped (counted as "queue full").
pub(super) const STORE: usize = 65_536;
/// Bytes of released buffers kept for reuse; larger buffers beyond it are freed.
pub(super) const POOL_BYTES: usize = 4 << 20;
const UP: usize = 0;
const DOWN: usize = 1;

struct Flow {
    client: SocketAddr,
    sock: UdpSocket,
    last_ns: u64,
    order: [ReleaseOrder; 2],
}

#[derive(Clone, Copy, Default)]
struct Meta {
    dir: usize,
    flow: usize,
    generation: u32,
    arrival_ns: u64,
    left_ns: u64,
    seq: u64,
    copies: u32,
}

struct Dir {
    imp: Impairment,
    rng: SplitMix64,
    tally: Tally,
    seq: u64,
}

/// The event loop's state.
pub(super) struct Engine {
    cfg: Config,
    clock: MonoClock,
    listen: UdpSocket,
    flows: Vec<Option<Flow>>,
    generations: Vec<u32>,
    by_client: HashMap<SocketAddr, usize>,
    ready: ReadySet,
    tokens: Vec<u64>,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    meta: Vec<Meta>,
    free: Vec<usize>,
    /// Capacity of the buffers holding waiting packets, bytes.
    held: usize,
    /// Capacity of the free buffers kept for reuse, bytes.
    pooled: usize,
    dirs: [Dir; 2],
    pushed: u64,
    counts: std::sync::Arc<FlowCounts>,
    tx: FlushTx,
    shutdown: Shutdown,
}

impl Engine {
    pub(super) fn new(
        cfg: &Config,
        listen: UdpSocket,
        counts: std::sync::Arc<FlowCounts>,
        tx: FlushTx,
        shutdown: Shutdown,
    ) -> anyhow::Result<Self> {
        listen.set_nonblocking(true)?;
        let mut ready = ReadySet::new(BATCH)?;
        ready.add(&listen, 0)?;
        let (up_seed, down_seed) = seeds(cfg.seed, 0);
        let dir = |spec, seed| Dir {
            imp: Impairment::new(spec),
            rng: SplitMix64::new(seed),
            tally: Tally::default(),
            seq: 0,
        };
        Ok(Self {
            cfg: cfg.clone(),
            clock: MonoClock::default(),
            listen,
            flows: Vec::new(),
            generations: Vec::new(),
            by_client: HashMap::new(),
            ready,
            tokens: Vec::with_capacity(BATCH),
            heap: BinaryHeap::with_capacity(STORE),
            bufs: Vec::new(),
            lens: Vec::new(),
            meta: Vec::new(),
            free: Vec::new(),
            held: 0,
            pooled: 0,
            dirs: [dir(cfg.up, up_seed), dir(cfg.down, down_seed)],
            pushed: 0,
            counts,
            tx,
            shutdown,
        })
    }

    /// Runs until the shutdown signal.
    pub(super) fn run(mut self) {
        let mut buf = vec![0u8; 65_536];
        let interval_ns = nanos(self.cfg.interval);
        let idle_ns = nanos(self.cfg.idle_timeout);
        let poll_ns = nanos(POLL);
        let start = self.clock.now_ns();
        let (mut next_flush, mut next_expiry, mut last_traffic) = (start + interval_ns, start + 1_000_000_000, start);
        while !self.shutdown.is_set() {
            let now = self.clock.now_ns();
            self.release_due(now);
            if now >= next_flush {
                self.flush();
                next_flush = now + interval_ns;
            }
            if now >= next_expiry {
                self.expire(now, idle_ns);
                next_expiry = now + 1_000_000_000;
            }
            let spinning = self.cfg.spin && now - last_traffic < SPIN_IDLE_NS;
            let timeout = match self.heap.peek() {
                _ if spinning => 0,
                Some(Reverse((at, _, _))) if at.saturating_sub(now) <= SPIN_NS => 0,
                Some(Reverse((at, _, _))) => (at - now - SPIN_NS).min(poll_ns),
                None => poll_ns,
            }
            .min(next_flush.saturating_sub(now));
            if self.ready.wait(timeout, &mut self.tokens).is_err() {
                continue;
            }
            for i in 0..self.tokens.len() {
                let token = self.tokens[i];
                let got = if token == 0 {
                    self.drain_clients(&mut buf)
                } else {
                    usize::try_from(token - 1).map_or(0, |slot| self.drain_upstream(slot, &mut buf))
                };
                if got > 0 {
                    last_traffic = self.clock.now_ns();
                }
            }
        }
        self.discard_held();
        self.flush();
    }

    /// At the stop, packets still waiting will never be sent: counted as send drops, so
    /// what arrived is what was delivered plus what was dropped.
    fn discard_held(&mut self) {
        while let Some(Reverse((_, _, i))) = self.heap.pop() {
            let m = self.meta[i];
            self.dirs[m.dir].tally.on_drop(DropReason::Send);
            let data = std::mem::take(&mut self.bufs[i]);
            self.unhold(i, data);
        }
    }

    fn drain_clients(&mut self, buf: &mut [u8]) -> usize {
        let mut got = 0;
        while got < BATCH {
            let (n, from) = match self.listen.recv_from(buf) {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => continue, // an ICMP error for an earlier send to a client
            };
            got += 1;
            let now = self.clock.now_ns();
            let Some(slot) = self.flow_of(from, now) else {
                self.dirs[UP].tally.on_arrival(n, now);
                self.dirs[UP].tally.on_drop(DropReason::Send);
                continue;
            };
            self.handle(UP, slot, &buf[..n], now);
        }
        got
    }

    fn drain_upstream(&mut self, slot: usize, buf: &mut [u8]) -> usize {
        let mut got = 0;
        while got < BATCH {
            let Some(Some(flow)) = self.flows.get(slot) else { return got };
            let n = match flow.sock.recv(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // Refused (nobody listens upstream) or another ICMP error: the client hears
                // nothing, as it would on a real path.
                Err(_) => continue,
            };
            got += 1;
            let now = self.clock.now_ns();
            if let Some(Some(f)) = self.flows.get_mut(slot) {
                f.last_ns = now;
            }
            self.handle(DOWN, slot, &buf[..n], now);
        }
        got
    }

    /// The flow of `client`, created on its first datagram.
    fn flow_of(&mut self, client: SocketAddr, now: u64) -> Option<usize> {
        if let Some(&slot) = self.by_client.get(&client) {
            if let Some(f) = self.flows[slot].as_mut() {
                f.last_ns = now;
            }
            return Some(slot);
        }
        if self.by_client.len() >= self.cfg.max_flows {
            self.counts.failed();
            return None;
        }
        let Ok(sock) = self.upstream_socket() else {
            self.counts.failed();
            return None;
        };
        let slot = self.flows.iter().position(Option::is_none).unwrap_or_else(|| {
            self.flows.push(None);
            self.generations.push(0);
            self.flows.len() - 1
        });
        if self.ready.add(&sock, slot as u64 + 1).is_err() {
            self.counts.failed();
            return None;
        }
        self.flows[slot] = Some(Flow { client, sock, last_ns: now, order: [ReleaseOrder::default(); 2] });
        self.by_client.insert(client, slot);
        self.counts.opened(client);
        Some(slot)
    }

    fn upstream_socket(&self) -> std::io::Result<UdpSocket> {
        let any: SocketAddr =
            if self.cfg.upstream.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let s = UdpSocket::bind(any)?;
        s.connect(self.cfg.upstream)?;
        s.set_nonblocking(true)?;
        Ok(s)
    }

    fn handle(&mut self, dir: usize, slot: usize, data: &[u8], now: u64) {
        let d = &mut self.dirs[dir];
        d.tally.on_arrival(data.len(), now);
        let seq = d.seq;
        d.seq += 1;
        match d.imp.decide(data.len(), now, &mut d.rng) {
            Verdict::Drop(why) => d.tally.on_drop(why),
            Verdict::Deliver { at_ns, left_ns, copies } if at_ns <= now => {
                let m = Meta { dir, flow: slot, generation: 0, arrival_ns: now, left_ns, seq, copies };
                self.send(dir, slot, data, m);
            }
            Verdict::Deliver { at_ns, left_ns, copies } => {
                let Some(i) = self.hold(data) else {
                    self.dirs[dir].tally.on_drop(DropReason::Full);
                    return;
                };
                let generation = self.generations[slot];
                self.meta[i] = Meta { dir, flow: slot, generation, arrival_ns: now, left_ns, seq, copies };
                self.heap.push(Reverse((at_ns, self.pushed, i)));
                self.pushed += 1;
            }
        }
    }

    /// Copies `data` into a free buffer of the store; `None` when the store is full (its
    /// packet count or `--max-held` bytes).
    fn hold(&mut self, data: &[u8]) -> Option<usize> {
        let i = self.free.pop().or_else(|| self.grow())?;
        let cost = self.bufs[i].capacity().max(data.len());
        if self.held + cost > self.cfg.max_held {
            self.free.push(i);
            return None;
        }
        self.pooled -= self.bufs[i].capacity();
        self.bufs[i].clear();
        self.bufs[i].extend_from_slice(data);
        self.lens[i] = data.len();
        self.held += self.bufs[i].capacity();
        Some(i)
    }

    /// Gives buffer `i` back: kept for reuse while the pool is small, freed otherwise.
    fn unhold(&mut self, i: usize, buf: Vec<u8>) {
        self.held -= buf.capacity();
        if self.pooled + buf.capacity() <= POOL_BYTES {
            self.pooled += buf.capacity();
            self.bufs[i] = buf;
        } else {
            self.bufs[i] = Vec::new();
        }
        self.free.push(i);
    }

    fn grow(&mut self) -> Option<usize> {
        if self.bufs.len() >= STORE {
            return None;
        }
        self.bufs.push(Vec::new());
        self.lens.push(0);
        self.meta.push(Meta::default());
        Some(self.bufs.len() - 1)
    }

    fn release_due(&mut self, now: u64) {
        while let Some(&Reverse((at, _, i))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            let m = self.meta[i];
            let data = std::mem::take(&mut self.bufs[i]);
            if self.generations.get(m.flow) == Some(&m.generation) {
                self.send(m.dir, m.flow, &data[..self.lens[i]], m);
            } else {
                self.dirs[m.dir].tally.on_drop(DropReason::Send); // the flow expired meanwhile
            }
            self.unhold(i, data);
        }
    }

    /// Sends `data` `m.copies` times in direction `dir` and accounts the release.
    fn send(&mut self, dir: usize, slot: usize, data: &[u8], m: Meta) {
        let Some(Some(flow)) = self.flows.get_mut(slot) else {
            self.dirs[dir].tally.on_drop(DropReason::Send);
            return;
        };
        let t = self.clock.now_ns();
        let mut sent = 0;
        for _ in 0..m.copies {
            let ok =
                if dir == UP { flow.sock.send(data).is_ok() } else { self.listen.send_to(data, flow.client).is_ok() };
            sent += u32::from(ok);
        }
        let tally = &mut self.dirs[dir].tally;
        if sent == 0 {
            tally.on_drop(DropReason::Send);
            return;
        }
        let reordered = flow.order[dir].on_release(m.seq);
        let r = Release { len: data.len(), arrival_ns: m.arrival_ns, left_ns: m.left_ns, now_ns: t, copies: sent };
        tally.on_release(&r, reordered);
    }

    fn expire(&mut self, now: u64, idle_ns: u64) {
        for slot in 0..self.flows.len() {
            let idle = self.flows[slot].as_ref().is_some_and(|f| now.saturating_sub(f.last_ns) > idle_ns);
            if idle && let Some(f) = self.flows[slot].take() {
                let _ = self.ready.remove(&f.sock);
                self.by_client.remove(&f.client);
                self.generations[slot] = self.generations[slot].wrapping_add(1);
            }
        }
    }

    fn flush(&mut self) {
        let [up, down] = &mut self.dirs;
        if up.tally.is_empty() && down.tally.is_empty() {
            return;
        }
        let f = Flush { up: std::mem::take(&mut up.tally), down: std::mem::take(&mut down.tally) };
        let _ = self.tx.send(f);
    }
}

#[cfg(test)]
mod tests {
    use wirebench_core::impair::Spec;

    use super::*;

    /// An engine whose packets all wait `delay_ns`, holding at most `max_held` bytes.
    fn engine(delay_ns: u64, max_held: usize) -> Engine {
        let mut cfg = Config::loopback("127.0.0.1:9".parse().unwrap(), Spec { delay_ns, ..Spec::default() });
        cfg.max_held = max_held;
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (tx, _rx) = std::sync::mpsc::channel();
        let mut e = Engine::new(&cfg, sock, std::sync::Arc::default(), tx, Shutdown::new()).unwrap();
        e.flows.push(None);
        e.generations.push(0);
        e
    }

    fn buffers(e: &Engine) -> usize {
        e.bufs.iter().map(Vec::capacity).sum()
    }

    /// `--delay 5s` with 60 KB datagrams grew the store to 2.3 GiB and kept it: now the
    /// store stops at the budget, counts the rest as "queue full", and frees what it held
    /// beyond a small pool once the packets are gone.
    #[test]
    fn the_store_holds_its_byte_budget_and_gives_memory_back() {
        let mut e = engine(5_000_000_000, 1 << 20);
        let big = vec![7u8; 60_000];
        for t in 0..100 {
            e.handle(UP, 0, &big, t);
        }
        let t = &e.dirs[UP].tally;
        assert_eq!(t.packets_in, 100);
        assert_eq!(e.heap.len(), 17, "17 x 60,000 bytes fit in 1 MiB");
        assert_eq!(t.full_drops, 83, "the rest are queue-full drops");
        assert!(e.held <= 1 << 20 && buffers(&e) <= 1 << 20, "{} {}", e.held, buffers(&e));
        e.release_due(10_000_000_000);
        assert_eq!((e.heap.len(), e.held), (0, 0));
        assert!(buffers(&e) <= POOL_BYTES, "released buffers are kept only up to the pool");
        assert_eq!(e.dirs[UP].tally.send_drops, 17, "the flow had no socket: counted, not lost silently");
    }

    /// A stop with packets still waiting: they are send drops, so in = out + drops.
    #[test]
    fn packets_held_at_the_stop_are_counted() {
        let mut e = engine(5_000_000_000, 1 << 20);
        for t in 0..3 {
            e.handle(UP, 0, &[1u8; 100], t);
        }
        e.discard_held();
        let t = &e.dirs[UP].tally;
        assert_eq!((t.packets_in, t.packets_out, t.dropped(), e.held), (3, 0, 3, 0));
    }

    #[test]
    fn a_full_store_of_small_packets_is_queue_full_too() {
        let mut e = engine(5_000_000_000, usize::MAX);
        for t in 0..(STORE as u64 + 10) {
            e.handle(UP, 0, &[1u8; 64], t);
        }
        assert_eq!((e.heap.len(), e.dirs[UP].tally.full_drops), (STORE, 10));
    }
}
