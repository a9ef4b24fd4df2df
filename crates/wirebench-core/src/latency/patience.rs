//! How long the closed loop waits for replies, and when a responder counts as gone.
//!
//! With one responder the loop waits for its reply or the timeout, like any ping. With
//! several (multicast), waiting the whole timeout for a responder that stopped answering
//! would slow the run to one probe per timeout, so:
//! - once one responder answered a probe, the others are waited for only a grace period
//!   longer: four times the slowest round trip seen so far (at least 1 ms, at most the
//!   timeout). The timeout still decides what is lost: a reply that comes after the grace but
//!   within the timeout is counted on time while the loop waits for the next probe;
//! - a responder that answered none of the [`LAG`] probes before this one is not waited
//!   for at all until it answers again (so a dead responder costs at most two graces).
//!
//! A responder *stopped answering* when the probes it left unanswered at the end of the
//! measurement are at least [`STOPPED_PROBES`], more than twice its longest run of losses
//! before them, and nothing came from it for at least a grace before the end. On a lossy path
//! (what `proxy --loss-burst` makes) a run ending in a burst is loss like any other burst,
//! not a departure; a responder that went away leaves a run far longer than its bursts.

/// A responder is waited for while it answered one of the `LAG` probes before this one.
pub const LAG: u64 = 2;
/// Grace after the first reply to a probe, in multiples of the slowest round trip.
pub const GRACE_FACTOR: u64 = 4;
/// The shortest grace.
pub const GRACE_MIN_NS: u64 = 1_000_000;
/// The fewest unanswered probes at the end of a run that make a responder "stopped".
pub const STOPPED_PROBES: u64 = 5;

/// The closed loop's waiting rule.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    timeout_ns: u64,
    slowest_ns: u64,
}

impl Patience {
    /// For probes with this timeout.
    pub const fn new(timeout_ns: u64) -> Self {
        Self { timeout_ns, slowest_ns: 0 }
    }

    /// A reply came back within the timeout after `rtt_ns` (from its actual send).
    pub fn on_round_trip(&mut self, rtt_ns: u64) {
        if rtt_ns <= self.timeout_ns {
            self.slowest_ns = self.slowest_ns.max(rtt_ns);
        }
    }

    /// How long after the first reply to a probe the loop waits for the others.
    pub fn grace_ns(&self) -> u64 {
        self.slowest_ns.saturating_mul(GRACE_FACTOR).max(GRACE_MIN_NS).min(self.timeout_ns)
    }

    /// When to stop waiting for the replies to a probe sent at `t1`, given when its first
    /// reply came (if one did).
    pub fn deadline(&self, t1: u64, first_reply_ns: Option<u64>) -> u64 {
        let full = t1.saturating_add(self.timeout_ns);
        first_reply_ns.map_or(full, |a| full.min(a.saturating_add(self.grace_ns())))
    }

    /// Whether the loop waits for a responder whose highest answered probe is
    /// `answered - 1` (0: none yet since `answered` was set) for probe `seq`.
    pub const fn waits_for(answered: u64, seq: u64) -> bool {
        answered.saturating_add(LAG) >= seq
    }

    /// Whether a responder stopped answering: `trailing` probes unanswered at the end of the
    /// measurement, `longest_before` the longest run of lost probes before those, and
    /// `silent_ns` since its last reply.
    pub fn stopped(&self, trailing: u64, longest_before: u64, silent_ns: u64) -> bool {
        trailing >= STOPPED_PROBES && trailing > longest_before.saturating_mul(2) && silent_ns >= self.grace_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_is_four_round_trips_within_bounds() {
        let mut p = Patience::new(1_000_000_000);
        assert_eq!(p.grace_ns(), GRACE_MIN_NS, "nothing seen yet");
        p.on_round_trip(50_000);
        assert_eq!(p.grace_ns(), GRACE_MIN_NS);
        p.on_round_trip(2_000_000);
        p.on_round_trip(30_000);
        assert_eq!(p.grace_ns(), 8_000_000, "the slowest, not the last");
        p.on_round_trip(2_000_000_000); // beyond the timeout: a late reply, ignored
        assert_eq!(p.grace_ns(), 8_000_000);
        p.on_round_trip(900_000_000);
        assert_eq!(p.grace_ns(), 1_000_000_000, "never past the timeout");
        assert_eq!(Patience::new(500_000).grace_ns(), 500_000);
    }

    #[test]
    fn deadline_is_the_timeout_until_someone_answers() {
        let mut p = Patience::new(1_000_000);
        p.on_round_trip(100_000);
        assert_eq!(p.deadline(5_000, None), 1_005_000);
        // grace = max(400 us, 1 ms) = 1 ms, capped by the timeout
        assert_eq!(p.deadline(5_000, Some(50_000)), 1_005_000);
        let p = Patience::new(1_000_000_000);
        assert_eq!(p.deadline(5_000, Some(50_000)), 1_050_000);
    }

    #[test]
    fn waits_for_whoever_answered_one_of_the_last_two() {
        // answered = one past its highest answered probe; seq = one past the probe just sent
        assert!(Patience::waits_for(10, 11), "answered the one before");
        assert!(Patience::waits_for(10, 12), "missed one");
        assert!(!Patience::waits_for(10, 13), "missed two");
        assert!(Patience::waits_for(u64::MAX, 5));
    }

    #[test]
    fn stopped_needs_probes_a_long_run_and_time() {
        let p = Patience::new(10_000_000); // grace 1 ms
        assert!(p.stopped(5, 0, 1_000_000));
        assert!(!p.stopped(4, 0, 1_000_000_000), "a few replies lost at the end");
        assert!(!p.stopped(1_000, 0, 999_999), "too recent to tell");
        assert!(!p.stopped(12, 6, 1_000_000_000), "no longer than the bursts before it");
        assert!(p.stopped(13, 6, 1_000_000_000));
    }
}
