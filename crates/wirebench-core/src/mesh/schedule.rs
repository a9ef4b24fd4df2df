//! The mesh prober's wake-ups, without a clock: its targets' sends (the [`Pacer`]) and its
//! housekeeping (discovery, connect timeouts, closing windows) at least every [`TICK_NS`],
//! put on the send grid so that a tick shares a send slot's wake-up instead of adding one.
//! The prober's loop asks what is due at each wake-up and sleeps until [`Schedule::wake_at`].

use super::pacer::Pacer;
use crate::rng::SplitMix64;

/// Housekeeping at least this often.
pub const TICK_NS: u64 = 100_000_000;

/// The pacer and the next housekeeping tick.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// The targets' sends.
    pub pacer: Pacer,
    next_tick: u64,
}

impl Schedule {
    /// No targets; housekeeping due at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether housekeeping is due at `now`; if so, the next is set a tick on, on the grid.
    pub fn tick_due(&mut self, now: u64) -> bool {
        if now < self.next_tick {
            return false;
        }
        self.next_tick = self.pacer.on_grid(now.saturating_add(TICK_NS));
        true
    }

    /// The next target to send at `now` ([`Pacer::pop_due`]).
    pub fn pop_due(&mut self, now: u64, rng: &mut SplitMix64) -> Option<u64> {
        self.pacer.pop_due(now, rng)
    }

    /// When to wake: the next send or the next tick, whichever is first.
    pub fn wake_at(&mut self) -> u64 {
        self.pacer.wake_at().unwrap_or(u64::MAX).min(self.next_tick)
    }

    /// The spacing of the wake-ups the stall meter expects: the send grid's, or the tick's
    /// with nothing to send.
    pub fn slot_ns(&self) -> u64 {
        if self.pacer.is_empty() { TICK_NS } else { self.pacer.slot_ns() }
    }
}

#[cfg(test)]
mod tests;
