//! Per-target accounting in fixed windows: one target is one (peer, transport), or one
//! (group, receiver) for multicast.
//!
//! A probe belongs to the window in which it was sent. It is answered (round trip from the
//! send time this side recorded, never from what the reply claims), or lost once its timeout
//! passes. A window is closed when its end plus the timeout has passed, so every probe in it
//! has been decided: then `sent = received + lost`, exactly. A reply after the timeout is
//! counted late (it was already lost); a second reply is a duplicate; a reply to a probe this
//! side never sent is unmatched. Round trips are kept as raw samples (u32 ns: the timeout is
//! at most [`MAX_TIMEOUT_NS`]) until the window closes: at a few probes a second per target
//! that is far smaller than a histogram each, and the histogram is built once, at close.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::latency::SIGFIG;
use crate::seq::{Arrival, SeqWindow};

/// The longest probe timeout: round trips must fit a u32 of ns.
pub const MAX_TIMEOUT_NS: u64 = 4_000_000_000;
/// Probes a target may have in flight; one more evicts (and loses) the oldest.
pub const MAX_PENDING: usize = 64;

/// Where windows fall on the monotonic clock: window `k` is `[start + k*len, start + (k+1)*len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// Start of window 0.
    pub start_ns: u64,
    /// Window length.
    pub len_ns: u64,
    /// Probe timeout (below the window length).
    pub timeout_ns: u64,
}

impl Windows {
    /// The window `t` falls in.
    pub fn index(&self, t: u64) -> u64 {
        t.saturating_sub(self.start_ns) / self.len_ns.max(1)
    }
    /// Where window `k` begins.
    pub fn start(&self, k: u64) -> u64 {
        self.start_ns + k * self.len_ns
    }
    /// Whether window `k` is decided at `now`.
    pub fn closed(&self, k: u64, now: u64) -> bool {
        now >= self.start(k + 1) + self.timeout_ns
    }
}

/// Counts of one window of one target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Probes sent.
    pub sent: u64,
    /// Answered within the timeout.
    pub received: u64,
    /// Not answered within the timeout (late ones included).
    pub lost: u64,
    /// Replies after the timeout (counted where they arrived).
    pub late: u64,
    /// Second replies to one probe.
    pub duplicates: u64,
    /// Replies to nothing this side sent.
    pub unmatched: u64,
    /// Round trips, ns.
    pub samples: Vec<u32>,
}

/// What became of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyOutcome {
    /// Recorded with this round trip.
    Recorded(u64),
    /// After its timeout.
    Late,
    /// Answered already.
    Duplicate,
    /// Not a probe this side sent (or its echoed send time disagrees).
    Unmatched,
}

/// One target.
#[derive(Debug, Clone)]
pub struct Target {
    next_seq: u64,
    pending: VecDeque<(u64, u64)>,
    answered: SeqWindow,
    open: VecDeque<(u64, Tally)>,
}

impl Default for Target {
    fn default() -> Self {
        Self::new()
    }
}

impl Target {
    /// Nothing sent yet.
    pub fn new() -> Self {
        Self { next_seq: 0, pending: VecDeque::new(), answered: SeqWindow::new(2 * MAX_PENDING), open: VecDeque::new() }
    }

    /// The sequence number the next unicast probe gets (its own counter per target).
    pub fn take_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    fn tally(&mut self, k: u64) -> &mut Tally {
        let pos = if let Some(p) = self.open.iter().position(|(w, _)| *w == k) {
            p
        } else {
            let at = self.open.iter().position(|(w, _)| *w > k).unwrap_or(self.open.len());
            self.open.insert(at, (k, Tally::default()));
            at
        };
        &mut self.open[pos].1
    }

    /// A probe `seq` went out at `now`.
    pub fn on_send(&mut self, seq: u64, now: u64, w: &Windows) {
        if self.pending.len() == MAX_PENDING
            && let Some((_, t)) = self.pending.pop_front()
        {
            self.tally(w.index(t)).lost += 1;
        }
        self.pending.push_back((seq, now));
        self.next_seq = self.next_seq.max(seq + 1);
        self.tally(w.index(now)).sent += 1;
    }

    /// A reply to `seq`, echoing send time `t1`, arrived at `now`.
    pub fn on_reply(&mut self, seq: u64, t1: u64, now: u64, w: &Windows) -> ReplyOutcome {
        if let Some(pos) = self.pending.iter().position(|&(s, _)| s == seq) {
            let (_, sent) = self.pending[pos];
            if sent != t1 {
                self.tally(w.index(now)).unmatched += 1;
                return ReplyOutcome::Unmatched;
            }
            let rtt = now.saturating_sub(sent);
            if rtt > w.timeout_ns {
                // Not expired yet only because nobody called `expire`: the same verdict.
                self.expire(now, w);
                return self.on_reply(seq, t1, now, w);
            }
            self.pending.remove(pos);
            self.answered.on_seq(seq);
            let t = self.tally(w.index(sent));
            t.received += 1;
            #[expect(clippy::cast_possible_truncation, reason = "rtt <= timeout <= MAX_TIMEOUT_NS < 2^32")]
            t.samples.push(rtt as u32);
            return ReplyOutcome::Recorded(rtt);
        }
        let k = w.index(now);
        if seq >= self.next_seq {
            self.tally(k).unmatched += 1;
            return ReplyOutcome::Unmatched;
        }
        match self.answered.on_seq(seq) {
            Arrival::Duplicate => {
                self.tally(k).duplicates += 1;
                ReplyOutcome::Duplicate
            }
            Arrival::New | Arrival::TooOld => {
                self.tally(k).late += 1;
                ReplyOutcome::Late
            }
        }
    }

    /// A reply that names its probe by the low 32 bits of its sequence number and echoes
    /// the send time only to within `slack_ns` (STAMP: 32-bit sequence numbers, T1 on the
    /// wall clock in NTP's fraction of a second): the probe is the latest sent whose low
    /// bits match, and an echo within `slack_ns` of its recorded send time is that time.
    /// Anything else is judged as [`Self::on_reply`] judges it (unmatched, late, duplicate).
    pub fn on_reply_low32(&mut self, seq32: u32, t1: u64, slack_ns: u64, now: u64, w: &Windows) -> ReplyOutcome {
        #[expect(clippy::cast_possible_truncation, reason = "the low 32 bits, on purpose")]
        let back = match (self.next_seq as u32).wrapping_sub(seq32) {
            0 => 1 << 32,
            b => u64::from(b),
        };
        let Some(seq) = self.next_seq.checked_sub(back) else {
            self.tally(w.index(now)).unmatched += 1;
            return ReplyOutcome::Unmatched;
        };
        let sent = self.pending.iter().find(|&&(s, _)| s == seq).map(|&(_, t)| t);
        let t1 = sent.filter(|s| s.abs_diff(t1) <= slack_ns).unwrap_or(t1);
        self.on_reply(seq, t1, now, w)
    }

    /// Counts as lost every probe whose timeout has passed at `now` (a reply at exactly the
    /// timeout is recorded, whether or not this ran first).
    pub fn expire(&mut self, now: u64, w: &Windows) {
        while let Some(&(_, sent)) = self.pending.front() {
            if now <= sent + w.timeout_ns {
                break;
            }
            self.pending.pop_front();
            self.tally(w.index(sent)).lost += 1;
        }
    }

    /// The oldest window decided at `now`, if one is (call [`Self::expire`] first).
    pub fn take_closed(&mut self, now: u64, w: &Windows) -> Option<(u64, Tally)> {
        self.expire(now, w);
        if self.open.front().is_some_and(|(k, _)| w.closed(*k, now)) { self.open.pop_front() } else { None }
    }

    /// Probes in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

/// Round-trip figures of a closed window, from its histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RttSummary {
    /// Samples.
    pub count: u64,
    /// Smallest, ns.
    pub min_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
}

impl RttSummary {
    /// The summary of `h` (the one percentile definition, `latency::percentile`: HdrHistogram
    /// Java's highest equivalent values), `None` when empty.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| {
            let ps = crate::latency::percentile::values_at_percentiles(h, &[50.0, 99.0]);
            Self { count: h.len(), min_ns: h.min(), p50_ns: ps[0], p99_ns: ps[1], max_ns: h.max() }
        })
    }

    /// The same as [`RttSummary::of`]`(h)` where `h` is [`histogram_of`]`(sorted)` and
    /// `sorted` is sorted, without walking the histogram's buckets (the prober summarises
    /// hundreds of cells a window): the sample of each percentile's rank, as its highest
    /// equivalent value.
    pub fn of_sorted(h: &Histogram<u64>, sorted: &[u32]) -> Option<Self> {
        debug_assert!(sorted.is_sorted() && sorted.len() as u64 == h.len());
        let at = |p: f64| {
            let r = usize::try_from(crate::latency::percentile::rank(h.len(), p)).unwrap_or(usize::MAX);
            sorted.get(r.min(sorted.len()) - 1).map_or(0, |&s| h.highest_equivalent(u64::from(s.max(1))))
        };
        (!sorted.is_empty()).then(|| Self {
            count: h.len(),
            min_ns: h.min(),
            p50_ns: at(50.0),
            p99_ns: at(99.0),
            max_ns: h.max(),
        })
    }
}

/// The histogram of a window's samples: 1 ns to the largest sample, 3 significant digits
/// (sized to the data, so a window of microsecond round trips costs a few KiB, once).
pub fn histogram_of(samples: &[u32]) -> Histogram<u64> {
    let top = samples.iter().copied().max().unwrap_or(1).max(2);
    let mut h = Histogram::new_with_bounds(1, u64::from(top), SIGFIG).expect("bounds are valid");
    for &s in samples {
        let _ = h.record(u64::from(s.max(1)));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const W: Windows = Windows { start_ns: 0, len_ns: 1_000 * MS, timeout_ns: 200 * MS };

    #[test]
    fn a_window_closes_with_sent_equal_received_plus_lost() {
        let mut t = Target::new();
        for i in 0..10u64 {
            let s = t.take_seq();
            t.on_send(s, i * 100 * MS, &W);
        }
        // Answer the even ones after 1 ms; 8 a second time.
        for i in (0..10u64).step_by(2) {
            assert_eq!(t.on_reply(i, i * 100 * MS, i * 100 * MS + MS, &W), ReplyOutcome::Recorded(MS));
        }
        assert_eq!(t.on_reply(8, 800 * MS, 802 * MS, &W), ReplyOutcome::Duplicate);
        assert_eq!(t.take_closed(1_100 * MS, &W), None, "probe 9 (sent at 900 ms) may still answer");
        let (k, tally) = t.take_closed(1_200 * MS, &W).unwrap();
        assert_eq!(k, 0);
        assert_eq!((tally.sent, tally.received, tally.lost, tally.duplicates), (10, 5, 5, 1));
        assert_eq!(tally.sent, tally.received + tally.lost);
        assert_eq!(tally.samples, vec![1_000_000; 5]);
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn late_unmatched_and_forged_send_times() {
        let mut t = Target::new();
        t.on_send(0, 0, &W);
        t.on_send(1, 10 * MS, &W);
        assert_eq!(t.on_reply(7, 0, 20 * MS, &W), ReplyOutcome::Unmatched, "never sent");
        assert_eq!(t.on_reply(1, 11 * MS, 20 * MS, &W), ReplyOutcome::Unmatched, "echoed t1 disagrees");
        // Reply 0 after its timeout: lost, then counted late.
        assert_eq!(t.on_reply(0, 0, 250 * MS, &W), ReplyOutcome::Late);
        assert_eq!(t.on_reply(0, 0, 260 * MS, &W), ReplyOutcome::Duplicate);
        let (_, tally) = t.take_closed(1_200 * MS, &W).unwrap();
        assert_eq!((tally.sent, tally.received, tally.lost, tally.late, tally.unmatched), (2, 0, 2, 1, 2));
    }

    /// 32-bit sequence numbers past 2^32 probes, and echoed send times read back to within
    /// a few ns: matched to the latest probe of those bits; a wrong time or a number no
    /// probe had is unmatched, a second reply a duplicate.
    #[test]
    fn replies_named_by_32_bits_and_an_approximate_send_time() {
        let mut t = Target::new();
        let base = (1u64 << 32) + 5;
        t.next_seq = base;
        for k in 0..3 {
            let seq = t.take_seq();
            t.on_send(seq, k * MS, &W);
        }
        let low = |s: u64| u32::try_from(s & 0xFFFF_FFFF).unwrap();
        assert_eq!(t.on_reply_low32(low(base + 1), MS + 1, 2, 5 * MS, &W), ReplyOutcome::Recorded(4 * MS));
        assert_eq!(t.on_reply_low32(low(base + 1), MS, 2, 6 * MS, &W), ReplyOutcome::Duplicate);
        assert_eq!(t.on_reply_low32(low(base), 3, 2, 7 * MS, &W), ReplyOutcome::Unmatched, "3 ns off");
        // The bits of the next probe name the one 2^32 probes before it: long decided.
        assert_eq!(t.on_reply_low32(low(base + 3), 0, 2, 7 * MS, &W), ReplyOutcome::Late);
        assert_eq!(
            t.on_reply_low32(low(base + 2), 2 * MS - 2, 2, 8 * MS, &W),
            ReplyOutcome::Recorded(6 * MS),
            "timed from the recorded send"
        );
        let mut fresh = Target::new();
        assert_eq!(fresh.on_reply_low32(0, 0, 2, 0, &W), ReplyOutcome::Unmatched, "nothing sent");
        let (_, tally) = fresh.take_closed(1_200 * MS, &W).unwrap();
        assert_eq!((tally.sent, tally.unmatched), (0, 1), "and counted where it arrived");
    }

    #[test]
    fn probes_belong_to_the_window_they_were_sent_in() {
        let mut t = Target::new();
        t.on_send(0, 990 * MS, &W);
        t.on_send(1, 1_010 * MS, &W);
        assert_eq!(t.on_reply(0, 990 * MS, 1_020 * MS, &W), ReplyOutcome::Recorded(30 * MS));
        let (k, a) = t.take_closed(1_200 * MS, &W).unwrap();
        assert_eq!((k, a.sent, a.received), (0, 1, 1));
        assert_eq!(t.take_closed(1_200 * MS, &W), None);
        let (k, b) = t.take_closed(2_200 * MS, &W).unwrap();
        assert_eq!((k, b.sent, b.received, b.lost), (1, 1, 0, 1));
    }

    /// A TCP probe waiting for its connection takes a number without a send yet: the next
    /// one must not get the same.
    #[test]
    fn take_seq_counts_up_without_a_send_between() {
        let mut t = Target::new();
        assert_eq!([t.take_seq(), t.take_seq(), t.take_seq()], [0, 1, 2]);
    }

    /// Group probes are numbered by the group, not by `take_seq`: a second reply to the
    /// latest one sent is a duplicate, not a reply to a probe never sent.
    #[test]
    fn a_second_reply_to_the_latest_group_probe_is_a_duplicate() {
        let mut t = Target::new();
        t.on_send(5, 0, &W);
        assert_eq!(t.on_reply(5, 0, MS, &W), ReplyOutcome::Recorded(MS));
        assert_eq!(t.on_reply(5, 0, 2 * MS, &W), ReplyOutcome::Duplicate);
    }

    /// Expiring stops at the first probe whose timeout has not passed: a late reply to an
    /// older one leaves a younger probe in flight, and its reply in time is recorded.
    #[test]
    fn expiring_keeps_the_probes_still_within_their_timeout() {
        let mut t = Target::new();
        t.on_send(0, 0, &W);
        t.on_send(1, 100 * MS, &W);
        assert_eq!(t.on_reply(0, 0, 250 * MS, &W), ReplyOutcome::Late);
        assert_eq!(t.in_flight(), 1, "probe 1 may answer until 300 ms");
        t.expire(299 * MS, &W);
        assert_eq!(t.in_flight(), 1);
        assert_eq!(t.on_reply(1, 100 * MS, 299 * MS, &W), ReplyOutcome::Recorded(199 * MS));
    }

    #[test]
    fn a_reply_at_exactly_the_timeout_is_recorded() {
        let mut t = Target::new();
        t.on_send(0, 0, &W);
        assert_eq!(t.on_reply(0, 0, W.timeout_ns, &W), ReplyOutcome::Recorded(W.timeout_ns));
        // The same when the window was expired at that instant first.
        t.on_send(1, MS, &W);
        t.expire(MS + W.timeout_ns, &W);
        assert_eq!(t.in_flight(), 1);
        assert_eq!(t.on_reply(1, MS, MS + W.timeout_ns, &W), ReplyOutcome::Recorded(W.timeout_ns));
        t.on_send(2, 2 * MS, &W);
        t.expire(2 * MS + W.timeout_ns + 1, &W);
        assert_eq!(t.in_flight(), 0, "one ns past its timeout a probe is lost");
    }

    /// A reply stamped before the first send (a kernel timestamp) opens an earlier window
    /// after a later one: the earlier is still taken first.
    #[test]
    fn a_window_opened_after_a_later_one_is_taken_first() {
        let mut t = Target::new();
        t.on_send(0, 1_500 * MS, &W);
        assert_eq!(t.on_reply(9, 0, 500 * MS, &W), ReplyOutcome::Unmatched);
        let (k, tally) = t.take_closed(1_200 * MS, &W).unwrap();
        assert_eq!((k, tally.sent, tally.unmatched), (0, 0, 1));
    }

    #[test]
    fn too_many_in_flight_evicts_the_oldest_as_lost() {
        let mut t = Target::new();
        for s in 0..=MAX_PENDING as u64 {
            t.on_send(s, s, &W);
        }
        assert_eq!(t.in_flight(), MAX_PENDING);
        assert_eq!(t.on_reply(0, 0, 100, &W), ReplyOutcome::Late);
        let (_, tally) = t.take_closed(2_000 * MS, &W).unwrap();
        assert_eq!((tally.sent, tally.lost), (MAX_PENDING as u64 + 1, MAX_PENDING as u64 + 1));
    }

    proptest::proptest! {
        #[test]
        fn the_summary_from_sorted_samples_is_the_histograms(
            mut samples in proptest::collection::vec(0u32..3_000_000_000, 0..400),
        ) {
            samples.sort_unstable();
            let h = histogram_of(&samples);
            proptest::prop_assert_eq!(RttSummary::of_sorted(&h, &samples), RttSummary::of(&h));
        }
    }

    #[test]
    fn summary_from_the_samples_histogram() {
        let samples: Vec<u32> = (1..=1000).map(|i| i * 1000).collect();
        let h = histogram_of(&samples);
        let s = RttSummary::of(&h).unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50_ns, h.highest_equivalent(500_000));
        assert_eq!(s.p99_ns, h.highest_equivalent(990_000));
        assert_eq!((s.min_ns, s.max_ns), (h.lowest_equivalent(1000), h.highest_equivalent(1_000_000)));
        assert_eq!(RttSummary::of(&histogram_of(&[])), None);
    }
}
