//! When each target is probed next: a random phase per target and a jittered interval, so
//! probes from one agent are spread over time and agents never probe in waves (a fleet
//! started at once, or a `DaemonSet` rolled out, would otherwise send in lockstep; that is
//! Goldpinger's issue #83). The mean interval is exact, so the rate is what was planned.
//!
//! Sends gather on a grid (`set_slot`): the caller wakes at the first grid point at or after
//! the next due time ([`Pacer::wake_at`]) and sends everything due by then, so an agent
//! probing hundreds of peers wakes at most once a slot to send instead of once a probe. The
//! slot is a small fraction of the interval ([`slot_for`]), so no target is due twice in one
//! wake-up and two targets of one peer rarely share one; the grid starts at a random origin,
//! so agents' grids are not aligned either.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::rng::SplitMix64;

/// Each interval is the planned one times a factor uniform in `1 ± JITTER`.
pub const JITTER: f64 = 0.2;

/// The longest send slot: a probe goes at most this late.
pub const SEND_SLOT_NS: u64 = 50_000_000;
/// A slot is at most this fraction of the probe interval.
pub const SLOTS_PER_INTERVAL: u64 = 16;

/// The send slot for targets probed every `interval_ns`: a sixteenth of it, at most
/// [`SEND_SLOT_NS`] (and at least 1 ns, which gathers nothing).
#[must_use]
pub fn slot_for(interval_ns: u64) -> u64 {
    (interval_ns / SLOTS_PER_INTERVAL).clamp(1, SEND_SLOT_NS)
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    interval_ns: u64,
    /// Bumped on every change, so stale heap entries are skipped.
    generation: u64,
}

/// Due times of many targets (ids chosen by the caller, never reused).
#[derive(Debug, Clone)]
pub struct Pacer {
    heap: BinaryHeap<Reverse<(u64, u64, u64)>>,
    entries: HashMap<u64, Entry>,
    generation: u64,
    slot_ns: u64,
    origin: u64,
}

impl Default for Pacer {
    fn default() -> Self {
        Self::new()
    }
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss, reason = "ns values")]
fn scaled(ns: u64, f: f64) -> u64 {
    (ns as f64 * f).round() as u64
}

impl Pacer {
    /// No targets.
    pub fn new() -> Self {
        Self { heap: BinaryHeap::new(), entries: HashMap::new(), generation: 0, slot_ns: 1, origin: 0 }
    }

    /// Gathers sends on a grid of `slot_ns` (at least 1) through `origin`.
    pub fn set_slot(&mut self, slot_ns: u64, origin: u64) {
        self.slot_ns = slot_ns.max(1);
        self.origin = origin;
    }

    /// The grid's spacing, ns (1 before a slot is set: no gathering).
    #[must_use]
    pub fn slot_ns(&self) -> u64 {
        self.slot_ns
    }

    /// Where the grid starts.
    #[must_use]
    pub fn origin(&self) -> u64 {
        self.origin
    }

    /// The first grid point at or after `t` (`t` itself before the origin).
    #[must_use]
    pub fn on_grid(&self, t: u64) -> u64 {
        if t <= self.origin {
            return t;
        }
        let k = (t - self.origin).div_ceil(self.slot_ns);
        self.origin.saturating_add(k.saturating_mul(self.slot_ns))
    }

    /// When to wake to send: the next due time on the grid, if any target is known.
    pub fn wake_at(&mut self) -> Option<u64> {
        self.next_due().map(|d| self.on_grid(d))
    }

    /// Adds (or re-times) target `id`, probed every `interval_ns` on average; its first
    /// probe is due at a random point within one interval from `now`.
    pub fn set(&mut self, id: u64, interval_ns: u64, now: u64, rng: &mut SplitMix64) {
        let interval_ns = interval_ns.max(1);
        if let Some(e) = self.entries.get(&id)
            && e.interval_ns == interval_ns
        {
            return;
        }
        self.generation += 1;
        self.entries.insert(id, Entry { interval_ns, generation: self.generation });
        let first = now + scaled(interval_ns, rng.next_f64());
        self.heap.push(Reverse((first, id, self.generation)));
    }

    /// Stops probing target `id`.
    pub fn remove(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    /// Targets known.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No targets.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn live(&self, id: u64, generation: u64) -> Option<Entry> {
        self.entries.get(&id).copied().filter(|e| e.generation == generation)
    }

    /// When the next probe is due, if any target is known.
    pub fn next_due(&mut self) -> Option<u64> {
        while let Some(&Reverse((due, id, g))) = self.heap.peek() {
            if self.live(id, g).is_some() {
                return Some(due);
            }
            self.heap.pop();
        }
        None
    }

    /// The next target due at or before `now`, scheduled again one jittered interval after
    /// its due time (or after `now`, if the caller fell more than an interval behind: a
    /// stalled agent resumes at its rate instead of sending the backlog in a burst).
    pub fn pop_due(&mut self, now: u64, rng: &mut SplitMix64) -> Option<u64> {
        loop {
            let Reverse((due, id, g)) = *self.heap.peek()?;
            let Some(e) = self.live(id, g) else {
                self.heap.pop();
                continue;
            };
            if due > now {
                return None;
            }
            self.heap.pop();
            let step = scaled(e.interval_ns, 1.0 + JITTER * (2.0 * rng.next_f64() - 1.0)).max(1);
            let base = if now.saturating_sub(due) > e.interval_ns { now } else { due };
            self.heap.push(Reverse((base + step, id, g)));
            return Some(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Drives the pacer on a virtual clock in 1 ms steps; returns send times per target.
    fn run(p: &mut Pacer, rng: &mut SplitMix64, from: u64, to: u64) -> HashMap<u64, Vec<u64>> {
        let mut sent: HashMap<u64, Vec<u64>> = HashMap::new();
        let mut now = from;
        while now < to {
            while let Some(id) = p.pop_due(now, rng) {
                sent.entry(id).or_default().push(now);
            }
            now += MS;
        }
        sent
    }

    #[test]
    fn the_rate_is_the_planned_one() {
        let mut rng = SplitMix64::new(1);
        let mut p = Pacer::new();
        for id in 0..50 {
            p.set(id, 500 * MS, 0, &mut rng); // 2/s each
        }
        let sent = run(&mut p, &mut rng, 0, 100_000 * MS);
        let total: usize = sent.values().map(Vec::len).sum();
        // 50 targets x 2/s x 100 s = 10,000, less at most one interval per target at the ends.
        assert!((9_950..=10_050).contains(&total), "{total}");
        for v in sent.values() {
            let gaps: Vec<u64> = v.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(gaps.iter().all(|&g| (399 * MS..=601 * MS).contains(&g)), "within ±20 % (1 ms ticks)");
        }
    }

    /// Probes per millisecond of 20 agents, each with 1 target at 1/s, all started at t = 0
    /// (a rollout), with or without send slots (each agent's grid at its own origin).
    fn rollout_per_ms(slotted: bool) -> Vec<u32> {
        let mut per_ms = vec![0u32; 10_000];
        for agent in 0..20u64 {
            let mut rng = SplitMix64::new(0x5eed + agent);
            let mut p = Pacer::new();
            p.set(0, 1_000 * MS, 0, &mut rng);
            let sent = if slotted {
                let origin = rng.next_u64() % SEND_SLOT_NS;
                p.set_slot(slot_for(1_000 * MS), origin);
                run_slotted(&mut p, &mut rng, 10_000 * MS).1
            } else {
                run(&mut p, &mut rng, 0, 10_000 * MS)
            };
            for t in sent.values().flatten() {
                per_ms[(t / MS) as usize] += 1;
            }
        }
        per_ms
    }

    #[test]
    fn agents_started_together_do_not_send_in_waves() {
        // Synchronised agents would put 20 probes in one millisecond; spread, never 3.
        let per_ms = rollout_per_ms(false);
        assert!(per_ms.iter().all(|&n| n <= 2), "max {}", per_ms.iter().max().unwrap());
    }

    #[test]
    fn removed_and_retimed_targets() {
        let mut rng = SplitMix64::new(7);
        let mut p = Pacer::new();
        p.set(1, 10 * MS, 0, &mut rng);
        p.set(2, 10 * MS, 0, &mut rng);
        p.remove(2);
        p.set(1, 100 * MS, 0, &mut rng); // slower now
        let sent = run(&mut p, &mut rng, 0, 1_000 * MS);
        assert!(!sent.contains_key(&2));
        assert!((9..=11).contains(&sent[&1].len()), "{}", sent[&1].len());
        assert_eq!(p.len(), 1);
        p.remove(1);
        assert_eq!(p.next_due(), None);
        assert!(p.is_empty());
    }

    /// Drives the pacer as the prober does: wakes only at `wake_at`; returns the wake-ups and
    /// the send times per target.
    fn run_slotted(p: &mut Pacer, rng: &mut SplitMix64, to: u64) -> (u64, HashMap<u64, Vec<u64>>) {
        let mut sent: HashMap<u64, Vec<u64>> = HashMap::new();
        let mut wakes = 0;
        while let Some(now) = p.wake_at().filter(|&t| t < to) {
            wakes += 1;
            let mut this_wake = Vec::new();
            while let Some(id) = p.pop_due(now, rng) {
                assert!(!this_wake.contains(&id), "target {id} twice in one wake-up at {now}");
                this_wake.push(id);
                sent.entry(id).or_default().push(now);
            }
            assert!(!this_wake.is_empty(), "a wake-up with nothing to send at {now}");
            assert!(now <= p.origin || (now - p.origin).is_multiple_of(p.slot_ns), "off the grid at {now}");
        }
        (wakes, sent)
    }

    #[test]
    fn slots_gather_sends_and_keep_the_rate() {
        assert_eq!(slot_for(4_000 * MS), SEND_SLOT_NS);
        assert_eq!(slot_for(160 * MS), 10 * MS);
        assert_eq!(slot_for(0), 1);
        let mut rng = SplitMix64::new(11);
        let mut p = Pacer::new();
        // 400 targets at 0.25/s (an agent's default budget of 100/s over 200 targets).
        for id in 0..400 {
            p.set(id, 4_000 * MS, 0, &mut rng);
        }
        p.set_slot(slot_for(4_000 * MS), 7 * MS);
        let (wakes, sent) = run_slotted(&mut p, &mut rng, 100_000 * MS);
        let total: u64 = sent.values().map(|v| v.len() as u64).sum();
        // 100/s for 100 s (the ends and the jitter move it by a few tens).
        assert!((9_900..=10_100).contains(&total), "{total}");
        // At most one wake-up per 50 ms slot (2,000), far fewer than one per probe.
        assert!(wakes <= 2_000, "{wakes}");
        assert!(wakes < total / 4 * 3, "{wakes} wake-ups for {total} probes");
        for v in sent.values() {
            let gaps: Vec<u64> = v.windows(2).map(|w| w[1] - w[0]).collect();
            // ±20 % jitter, plus at most one slot of lateness at either end of a gap.
            assert!(gaps.iter().all(|&g| (3_150 * MS..=4_850 * MS).contains(&g)), "{gaps:?}");
        }
    }

    #[test]
    fn without_a_slot_every_probe_is_its_own_wake_up() {
        let mut rng = SplitMix64::new(12);
        let mut p = Pacer::new();
        for id in 0..50 {
            p.set(id, 500 * MS, 0, &mut rng);
        }
        let (wakes, sent) = run_slotted(&mut p, &mut rng, 10_000 * MS);
        let total: u64 = sent.values().map(|v| v.len() as u64).sum();
        assert_eq!(wakes, total);
    }

    #[test]
    fn slotted_agents_started_together_do_not_send_in_waves() {
        let per_ms = rollout_per_ms(true);
        assert!(per_ms.iter().all(|&n| n <= 2), "max {}", per_ms.iter().max().unwrap());
    }

    #[test]
    fn a_stalled_caller_does_not_burst() {
        let mut rng = SplitMix64::new(3);
        let mut p = Pacer::new();
        p.set(1, 10 * MS, 0, &mut rng);
        // Nobody called for 1 s: one probe now, the next an interval later.
        assert_eq!(p.pop_due(1_000 * MS, &mut rng), Some(1));
        assert_eq!(p.pop_due(1_000 * MS, &mut rng), None);
        assert!(p.next_due().unwrap() >= 1_000 * MS + 8 * MS);
    }
}
