//! An in-memory echo link on a virtual clock (modelled on quinn-proto's test `Pair`): the
//! engines run against it exactly as against a socket, with latency, loss, late and
//! duplicated replies and skewed responder clocks under the test's control, and no sleeps.
//!
//! Time moves only when the engine waits: `recv_until` jumps the clock to the next
//! delivery or to the deadline, whichever is first.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use wirebench_core::rng::SplitMix64;
use wirebench_core::wire::probe::{self, Probe};

use crate::clock::Clock;
use crate::io::{ProbeIo, Received};

/// The virtual clock shared by a [`FakeLink`] and the engine under test.
#[derive(Debug, Clone, Default)]
pub struct FakeClock(Rc<Cell<u64>>);

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.0.get()
    }
}

impl FakeClock {
    /// Moves time forward to `t` (never back).
    pub fn advance_to(&self, t: u64) {
        self.0.set(self.0.get().max(t));
    }
}

/// One simulated responder.
#[derive(Debug, Clone, Copy)]
pub struct FakeResponder {
    /// Its address, as replies will show it.
    pub addr: SocketAddr,
    /// One-way delay to it.
    pub forward_ns: u64,
    /// One-way delay back.
    pub reverse_ns: u64,
    /// Time between its receive and its send.
    pub dwell_ns: u64,
    /// Its wall clock minus the pinger's wall clock.
    pub clock_offset_ns: i64,
}

/// A reply on its way: delivery time, a tie-breaking order, sender, bytes.
type InFlight = (u64, u64, SocketAddr, Vec<u8>);

/// A link to one or more echoing responders.
#[derive(Debug)]
pub struct FakeLink {
    clock: FakeClock,
    wall_minus_mono: i64,
    responders: Vec<FakeResponder>,
    rng: SplitMix64,
    /// Probability that a datagram is lost, each direction.
    pub loss: f64,
    /// Every `n`th probe (by send order, from 1) has its replies held back this long.
    pub hold_every: Option<(u64, u64)>,
    /// Every `n`th probe is answered twice.
    pub duplicate_every: Option<u64>,
    /// Responder `i` stops answering from send number `mute_from[i]` on (1-based; missing
    /// entries never stop).
    pub mute_from: Vec<u64>,
    /// Probes that left the pinger.
    pub sent: u64,
    /// Probe or reply datagrams the link dropped.
    pub dropped: u64,
    queue: BinaryHeap<Reverse<InFlight>>,
    order: u64,
}

impl FakeLink {
    /// A loss-free link to `responders`, with the pinger's wall clock at
    /// `wall_minus_mono` from its monotonic clock, and a seed for every random decision.
    pub fn new(clock: FakeClock, wall_minus_mono: i64, responders: Vec<FakeResponder>, seed: u64) -> Self {
        Self {
            clock,
            wall_minus_mono,
            responders,
            rng: SplitMix64::new(seed),
            loss: 0.0,
            hold_every: None,
            duplicate_every: None,
            mute_from: Vec::new(),
            sent: 0,
            dropped: 0,
            queue: BinaryHeap::new(),
            order: 0,
        }
    }

    fn wall(&self, mono: u64, offset: i64) -> u64 {
        u64::try_from(i128::from(mono) + i128::from(self.wall_minus_mono) + i128::from(offset)).unwrap_or(0)
    }
}

impl ProbeIo for FakeLink {
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        self.sent += 1;
        let now = self.clock.now_ns();
        let held = self.hold_every.filter(|(n, _)| self.sent.is_multiple_of(*n)).map_or(0, |(_, d)| d);
        let copies = if self.duplicate_every.is_some_and(|n| self.sent.is_multiple_of(n)) { 2 } else { 1 };
        for i in 0..self.responders.len() {
            let r = self.responders[i];
            if self.mute_from.get(i).is_some_and(|&m| self.sent >= m) {
                continue;
            }
            if self.rng.chance(self.loss) {
                self.dropped += 1;
                continue;
            }
            let arrive = now + r.forward_ns;
            let mut reply = buf.to_vec();
            let t2 = self.wall(arrive, r.clock_offset_ns);
            let t3 = self.wall(arrive + r.dwell_ns, r.clock_offset_ns);
            if Probe::parse(&reply).is_err() || !probe::make_reply(&mut reply, t2, || t3) {
                continue;
            }
            if self.rng.chance(self.loss) {
                self.dropped += 1;
                continue;
            }
            let at = arrive + r.dwell_ns + r.reverse_ns + held;
            for _ in 0..copies {
                self.order += 1;
                self.queue.push(Reverse((at, self.order, r.addr, reply.clone())));
            }
        }
        Ok(())
    }

    fn recv_until(&mut self, buf: &mut [u8], deadline_ns: u64) -> io::Result<Option<Received>> {
        match self.queue.peek() {
            Some(Reverse((at, ..))) if *at <= deadline_ns => {
                let Reverse((at, _, from, bytes)) = self.queue.pop().expect("peeked");
                self.clock.advance_to(at);
                let len = bytes.len().min(buf.len());
                buf[..len].copy_from_slice(&bytes[..len]);
                Ok(Some(Received { len, from, at_ns: self.clock.now_ns(), kernel: None }))
            }
            _ => {
                self.clock.advance_to(deadline_ns);
                Ok(None)
            }
        }
    }
}
