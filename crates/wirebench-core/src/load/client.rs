//! One load client's schedule, without a socket or a clock: when it joins (its slot of the
//! ramp), when each of its sends is due (its own random phase and gaps), which event type
//! each is, and its sequence (requests and relayed messages count apart). The client's task
//! asks at each wake-up what is due and sleeps until [`ClientSchedule::wake_ns`]; an open
//! loop: every send that is due goes, however late, with the time it was intended for.

use super::arrivals::Arrivals;
use super::mix::Mix;
use crate::rng::SplitMix64;

/// A client's random choices (phase or gaps, event types), seeded by the run's seed.
pub fn rng_for(seed: u64, id: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// When client `id` of `clients` joins, ns after the start: the ramp shared out evenly.
pub fn join_ns(ramp_ns: u64, id: u64, clients: u64) -> u64 {
    u64::try_from(u128::from(ramp_ns) * u128::from(id) / u128::from(clients.max(1))).unwrap_or(u64::MAX)
}

/// One send that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The event type (an index into the mix).
    pub kind: usize,
    /// A request (answered by the server) or a relayed message (delivered to the room).
    pub request: bool,
    /// Its sequence among this client's requests, or among its relayed messages.
    pub seq: u64,
    /// When it was due, ns after the start (it may go later: the open loop's omission).
    pub intended_ns: u64,
}

/// A client's sends from its connection to the end of sending.
#[derive(Debug, Clone)]
pub struct ClientSchedule {
    rng: SplitMix64,
    next_ns: u64,
    end_ns: u64,
    requests: u64,
    relayed: u64,
}

impl ClientSchedule {
    /// The schedule of a client seeded `rng` ([`rng_for`]) that starts sending at `start_ns`
    /// (its first send after its own phase) until `end_ns`.
    pub fn new(mut rng: SplitMix64, arrivals: Arrivals, start_ns: u64, end_ns: u64) -> Self {
        let next_ns = start_ns.saturating_add(arrivals.first(&mut rng));
        Self { rng, next_ns, end_ns, requests: 0, relayed: 0 }
    }

    /// The next send due at `now_ns` (and the schedule moves past it), or `None`.
    pub fn due(&mut self, now_ns: u64, mix: &Mix, arrivals: Arrivals) -> Option<Due> {
        if self.next_ns > now_ns || self.next_ns >= self.end_ns {
            return None;
        }
        let kind = mix.pick(&mut self.rng);
        let request = mix.types().get(kind).is_some_and(|t| t.request);
        let count = if request { &mut self.requests } else { &mut self.relayed };
        let seq = *count;
        *count += 1;
        let intended_ns = self.next_ns;
        self.next_ns = self.next_ns.saturating_add(arrivals.gap(&mut self.rng));
        Some(Due { kind, request, seq, intended_ns })
    }

    /// When to wake next: the next send, or, past the end of sending, `quit_ns`; earlier
    /// for a frame the upload shaper holds until `held_ns`.
    pub fn wake_ns(&self, quit_ns: u64, held_ns: Option<u64>) -> u64 {
        let due = if self.next_ns < self.end_ns { self.next_ns } else { quit_ns };
        held_ns.map_or(due, |h| due.min(h))
    }

    /// The next send's intended time (past the end once the schedule is done).
    pub const fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// The random source, for what follows the schedule (the sends it did not make).
    pub const fn rng(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }
}

#[cfg(test)]
mod tests;
