//! The highest loss-free rate, as RFC 2544 (section 26.1) defines throughput: the fastest
//! rate at which the count of frames received equals the count sent, here generalised to
//! "loss at most `loss_target`". Pure: the caller runs each trial and reports its loss.
//!
//! The search has to find a bottleneck anywhere from the sender's flat-out rate down to a few
//! messages a second (a 50 Mbit/s link behind a 15 Gbit/s sender is 0.3 % of the top), in a
//! number of trials known up front. A plain binary search over (0, top] needs log2(top /
//! bottleneck) trials just to get near it and, stopped at a fixed count, reported 0. So:
//!
//! 1. **Top**: the first trial runs at the top (flat out, or the rate given). A pass ends it.
//! 2. **Descent**: after a failure the next rate is the failing one divided by `factor` (10),
//!    except once, right after the first failure, when the share that got through says where
//!    the bottleneck is: `0.9 × rate × (1 - loss)`, kept within [rate / factor, 0.9 × rate].
//!    Down to `floor`; if even the floor fails, nothing passes and the answer is 0, said so.
//! 3. **Bisection**: between the highest pass and the lowest failure, at their geometric
//!    mean (the bracket can span a factor of 10), until the failure is within
//!    `1 + resolution` of the pass (0.5 %: the answer is then within 0.5 % of the highest
//!    rate the path holds).
//!
//! At most `1 + 1 + ceil(log_factor(top / floor)) + ceil(log2(ln factor / ln(1 + resolution)))`
//! trials ([`RateSearch::max_trials`]): 19 from 10^8 msg/s down to 1 msg/s at 0.5 %.
//!
//! A trial fails when it loses more than the target, and also when a queue built on the
//! path while it ran ([`queue_built`]): a rate a little above a bottleneck loses nothing in
//! a short trial while the excess fits in the bottleneck's queue (a 50 Mbit/s shaper that
//! holds 50 ms queues 300 KB), so loss alone reads such a rate as loss-free.

use crate::stream::delay::DelayRise;

/// A rise of the one-way delay at most this large is no queue (the receiver's wake-ups and
/// the spans' minima move by tens of microseconds).
pub const QUEUE_MIN_NS: i64 = 1_000_000;
/// Nor one of at most this share of the time it rose over, one part in this many (clocks
/// of two hosts run apart by parts per million; a sender 0.1 % above a bottleneck raises
/// the delay by 0.1 % of the time, below the search's resolution).
pub const QUEUE_SLOPE_PARTS: u64 = 1_000;

/// The most of a trial's sending time a sender may skip after stalls and still count as
/// having kept the rate it was asked for.
pub const SKIPPED_SHARE_MAX: f64 = 0.1;

/// The rate a paced trial's sender reached: what it sent over the part of its sending time
/// it did not skip after stalls of its host (a resuming sender moves its schedule past
/// them), at most the rate asked, when that part was at least 1 - [`SKIPPED_SHARE_MAX`]
/// of the time; otherwise what it sent over the whole time (stalls are short: a sender
/// that cannot keep the rate falls behind all along).
pub fn reached(requested: f64, sent_per_s: f64, skipped_ns: u64, send_ns: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a share")]
    let skipped = if send_ns == 0 { 1.0 } else { skipped_ns as f64 / send_ns as f64 };
    if skipped <= SKIPPED_SHARE_MAX {
        (sent_per_s / (1.0 - skipped)).min(requested).max(sent_per_s)
    } else {
        sent_per_s
    }
}

/// Did a queue build on the path during a trial? The one-way delay rose (`stream::delay`)
/// by more than [`QUEUE_MIN_NS`] and more than 1/[`QUEUE_SLOPE_PARTS`] of the time it rose
/// over. (A sender that falls behind and catches up in a burst builds one too, for about
/// as long as it was late: a trial's sender resumes at the rate instead.)
pub fn queue_built(d: &DelayRise) -> bool {
    let bar = i64::try_from(d.over_ns / QUEUE_SLOPE_PARTS).unwrap_or(i64::MAX).max(QUEUE_MIN_NS);
    d.rise_ns > bar
}

/// How a search walks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchSteps {
    /// Lowest rate tried (messages/s): below it a trial says too little.
    pub floor: f64,
    /// Descent divisor per failing trial.
    pub factor: f64,
    /// The search stops when the lowest failure is within `1 + resolution` of the highest
    /// pass (0.005: 0.5 %).
    pub resolution: f64,
}

impl Default for SearchSteps {
    fn default() -> Self {
        Self { floor: 1.0, factor: 10.0, resolution: 0.005 }
    }
}

/// The state of one search.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearch {
    top: f64,
    steps: SearchSteps,
    loss_target: f64,
    /// Highest rate that passed.
    pass: Option<f64>,
    /// Lowest rate that failed (or that the sender could not reach).
    fail: Option<f64>,
    /// Trials so far.
    trials: usize,
    /// Failing trials so far, and the loss of the first (the descent's one hint).
    fails: usize,
    first_loss: f64,
    /// A trial passed with the sender short of the rate asked: nothing above is reachable.
    sender_limited: bool,
}

/// One finished trial, for the report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// The rate it counts at.
    pub rate: f64,
    /// Loss seen (0..=1).
    pub loss: f64,
    /// A queue built on the path ([`queue_built`]).
    pub queue: bool,
    /// Within the target, and no queue built?
    pub passed: bool,
}

/// How a finished search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    /// Not finished.
    Running,
    /// The top passed: the sender, not the path, is the limit.
    TopPassed(f64),
    /// A trial passed with the sender short of the rate asked (it sent this much): the
    /// sender, not the path, is the limit.
    SenderLimited(f64),
    /// The bracket closed: this rate passed, one at most `resolution` above it failed.
    Found(f64),
    /// Every rate down to the floor failed.
    NothingPassed(f64),
    /// The trial budget ran out with this rate the best that passed (noisy results).
    OutOfTrials(f64),
}

impl RateSearch {
    /// Searches at and below `top` (the rate asked for, or what a flat-out trial achieved).
    pub fn new(top: f64, loss_target: f64, steps: SearchSteps) -> Self {
        let steps = SearchSteps {
            floor: steps.floor.max(1e-3),
            factor: steps.factor.max(1.5),
            resolution: steps.resolution.clamp(1e-4, 1.0),
        };
        Self {
            top,
            steps,
            loss_target,
            pass: None,
            fail: None,
            trials: 0,
            fails: 0,
            first_loss: 0.0,
            sender_limited: false,
        }
    }

    /// Trials this search needs at most.
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive counts")]
    pub fn max_trials(&self) -> usize {
        let s = &self.steps;
        let descent = ((self.top / s.floor).max(1.0).ln() / s.factor.ln()).ceil() as usize;
        let bisect = (s.factor.ln() / s.resolution.ln_1p()).log2().ceil().max(0.0) as usize;
        2 + descent + bisect
    }

    /// The next rate to try, or `None` when the search is done.
    pub fn next_rate(&self) -> Option<f64> {
        if self.trials == 0 {
            return Some(self.top);
        }
        if self.trials >= self.max_trials() || self.sender_limited {
            return None;
        }
        let s = &self.steps;
        match (self.pass, self.fail) {
            (Some(p), Some(f)) => (f > p * (1.0 + s.resolution)).then(|| (p * f).sqrt()),
            (None, Some(f)) => {
                if f <= s.floor * (1.0 + 1e-9) {
                    return None;
                }
                let share = if self.fails == 1 {
                    (0.9 * (1.0 - self.first_loss)).clamp(1.0 / s.factor, 0.9)
                } else {
                    1.0 / s.factor
                };
                Some((f * share).max(s.floor))
            }
            (Some(_) | None, None) => None,
        }
    }

    /// Records the loss of a trial at `rate` (no queue seen).
    pub fn on_result(&mut self, rate: f64, loss: f64) -> Trial {
        self.on_trial(rate, loss, false)
    }

    /// Records a trial at `rate`: its loss, and whether a queue built ([`queue_built`]).
    pub fn on_trial(&mut self, rate: f64, loss: f64, queue: bool) -> Trial {
        self.trials += 1;
        let passed = loss <= self.loss_target && !queue;
        if passed {
            self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
            // A pass at or above a failure: that failure was noise.
            if self.fail.is_some_and(|f| f <= rate) {
                self.fail = None;
            }
        } else {
            self.fails += 1;
            if self.fails == 1 {
                self.first_loss = loss.clamp(0.0, 1.0);
            }
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
            if self.pass.is_some_and(|p| p >= rate) {
                self.pass = None;
            }
        }
        Trial { rate, loss, queue, passed }
    }

    /// Records a trial whose sender asked for `requested`, reached `reached` while it sent
    /// (`reached`) and sent `sent` a second over the whole trial. A failure short of the rate
    /// asked by at most 3 % counts at the rate asked; a pass, only when what it sent is within
    /// the resolution of it: a pass shows that the path carried what was sent, no more (the
    /// gap a sender leaves after a stall lets a queue drain), so a pass further short counts
    /// at what it sent and the bisection goes on. Beyond 3 % short, the trial counts at what
    /// the sender managed, never the rate asked; and if it passed, the search ends there (the
    /// path carried all the sender could send, and no higher rate can be tried) unless a
    /// faster trial failed and this pass raised the highest one: every failure counts at a
    /// rate the sender reached, so a paced trial that fell short on a busy host says nothing
    /// about the rates in between, and the bisection goes on. A short pass that gets no
    /// higher than the highest pass so far (within the resolution) ends it: the sender
    /// cannot get closer.
    pub fn on_result_achieved(&mut self, requested: f64, reached: f64, sent: f64, loss: f64, queue: bool) -> Trial {
        let passes = loss <= self.loss_target && !queue;
        let achieved = if passes { sent.min(reached) } else { reached };
        let near = if passes { requested / (1.0 + self.steps.resolution) } else { 0.97 * requested };
        if achieved >= near {
            return self.on_trial(requested, loss, queue);
        }
        if passes && achieved >= 0.97 * requested {
            return self.on_trial(achieved, loss, queue);
        }
        let before = self.pass;
        let t = self.on_trial(achieved, loss, queue);
        let no_higher = before.is_some_and(|p| achieved <= p * (1.0 + self.steps.resolution));
        if t.passed && (self.fail.is_none() || no_higher) {
            self.sender_limited = true;
        }
        t
    }

    /// The highest rate that passed (0 if none did).
    pub fn result(&self) -> f64 {
        self.pass.unwrap_or(0.0)
    }

    /// How it ended (or that it has not).
    pub fn ending(&self) -> Ending {
        if self.next_rate().is_some() {
            return Ending::Running;
        }
        if self.sender_limited {
            return Ending::SenderLimited(self.result());
        }
        match (self.pass, self.fail) {
            (Some(p), None) => Ending::TopPassed(p),
            (Some(p), Some(f)) if f <= p * (1.0 + self.steps.resolution) => Ending::Found(p),
            (Some(p), Some(_)) => Ending::OutOfTrials(p),
            (None, Some(f)) if f <= self.steps.floor * (1.0 + 1e-9) => Ending::NothingPassed(self.steps.floor),
            (None, _) => Ending::OutOfTrials(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAT_OUT: f64 = 1e7;
    /// More trials than any search here may take: a loop past it fails its test (a search
    /// that never ends must not run until the machine gives out).
    const LOOP_CAP: usize = 64;

    /// A sender that reaches at most `FLAT_OUT` and a link that loses whatever is offered
    /// above `capacity` (tail drop). Returns the search's end and its trial count.
    fn search(capacity: f64, top: Option<f64>, target: f64) -> (Ending, usize, f64, usize) {
        let first = top.unwrap_or(FLAT_OUT);
        let mut s = RateSearch::new(first, target, SearchSteps::default());
        let mut trials = 0;
        while let Some(r) = s.next_rate() {
            let achieved = r.min(FLAT_OUT);
            let loss = if achieved > capacity { (achieved - capacity) / achieved } else { 0.0 };
            s.on_result_achieved(r, achieved, achieved, loss, false);
            trials += 1;
            assert!(trials <= s.max_trials().min(LOOP_CAP), "bounded by max_trials");
        }
        (s.ending(), trials, s.result(), s.max_trials())
    }

    #[test]
    fn finds_a_bottleneck_at_any_depth_below_flat_out() {
        for share in [0.5, 0.01, 0.001, 0.000_01] {
            let capacity = FLAT_OUT * share;
            let (end, trials, r, max) = search(capacity, None, 0.0);
            assert!(matches!(end, Ending::Found(_)), "{share}: {end:?}");
            assert!(r <= capacity && r >= capacity / 1.005, "{share}: {r} vs {capacity}");
            assert!(trials <= 18 && max <= 18, "{share}: {trials} trials of at most {max}");
        }
    }

    #[test]
    fn a_loss_target_allows_a_little_more() {
        // 0.1 % loss allowed: up to capacity / 0.999
        let (_, _, r, _) = search(600.0, Some(1000.0), 0.001);
        assert!(r > 600.0 * 0.995 && r <= 600.0 / 0.999, "{r}");
    }

    #[test]
    fn a_clean_top_ends_at_once() {
        let (end, trials, r, _) = search(2000.0, Some(1000.0), 0.0);
        assert_eq!((end, trials, r), (Ending::TopPassed(1000.0), 1, 1000.0));
    }

    #[test]
    fn a_sender_that_cannot_keep_up_caps_the_search() {
        // Asked for 10^8, the sender manages 10^7 and the link carries it all: the pass
        // counts at what was achieved, and nothing higher can be tried.
        let (end, trials, r, _) = search(f64::MAX, Some(1e8), 0.0);
        assert_eq!((end, trials, r), (Ending::SenderLimited(FLAT_OUT), 1, FLAT_OUT));
        // The link carries 2 * 10^6: the trials that fail count at what was sent.
        let (end, _, r, _) = search(2e6, Some(1e8), 0.0);
        assert!(matches!(end, Ending::Found(_)) && (2e6 / 1.005..=2e6).contains(&r), "{end:?} {r}");
    }

    /// Flat out the sender reached 4 M/s and lost 65 % behind a link of 1.5 M/s; a paced
    /// sender on a busy host falls 4 % short of every rate asked. The first paced pass used
    /// to end the search at 1.21 M/s as "all the sender could send", though the flat-out
    /// trial had sent 4 M/s: it now bisects on, and ends nearer the link, still saying the
    /// sender fell short once it cannot get closer.
    #[test]
    fn a_short_paced_pass_below_a_faster_failure_bisects_on() {
        let (capacity, flat_out) = (1.5e6, 4e6);
        let mut s = RateSearch::new(flat_out, 0.0, SearchSteps::default());
        let (mut passes, mut trials) = (Vec::new(), 0);
        while let Some(r) = s.next_rate() {
            let achieved = if r >= flat_out { flat_out } else { 0.96 * r };
            let loss = if achieved > capacity { (achieved - capacity) / achieved } else { 0.0 };
            trials += 1;
            assert!(trials <= s.max_trials().min(LOOP_CAP), "bounded by max_trials");
            if s.on_result_achieved(r, achieved, achieved, loss, false).passed {
                passes.push(achieved);
            }
        }
        assert!(passes.len() >= 2, "the first short pass did not end it: {passes:?}");
        let Ending::SenderLimited(r) = s.ending() else { panic!("{:?}", s.ending()) };
        assert!(r > 0.9 * capacity && r <= capacity, "{r} against a {capacity} link");
        // Without a faster failure, a short pass still ends the search at once.
        let mut t = RateSearch::new(1e8, 0.0, SearchSteps::default());
        t.on_result_achieved(1e8, 1e7, 1e7, 0.0, false);
        assert_eq!(t.ending(), Ending::SenderLimited(1e7));
    }

    /// A trial that sent 4.6 % less than asked because it skipped stalls of its host
    /// reached the rate asked; one that skipped more (or nothing, and still fell short)
    /// reached what it sent.
    #[test]
    fn a_sender_that_skipped_stalls_reached_the_rate_asked() {
        let s = 1_000_000_000;
        assert!((reached(4_220.0, 4_026.0, 92_000_000, 2 * s) - 4_220.0).abs() < 1e-9);
        assert!((reached(4_220.0, 3_900.0, 92_000_000, 2 * s) - 4_088.05).abs() < 0.01, "short beyond its skips");
        assert!((reached(4_220.0, 3_700.0, 250_000_000, 2 * s) - 3_700.0).abs() < 1e-9, "an eighth skipped");
        assert!((reached(1e8, 1e7, 0, 2 * s) - 1e7).abs() < 1e-9, "short by its own speed");
        assert!((reached(1_000.0, 1_001.0, 0, 2 * s) - 1_001.0).abs() < 1e-9);
        assert!((reached(1_000.0, 0.0, 0, 0)).abs() < 1e-9, "no sending time");
        // a tenth of the time skipped is still within the share
        assert!((reached(1_000.0, 900.0, s / 5, 2 * s) - 1_000.0).abs() < 1e-9, "a tenth skipped");
        assert!((reached(1_000.0, 900.0, s / 5 + 1, 2 * s) - 900.0).abs() < 1e-9, "just over a tenth");
    }

    #[test]
    fn nothing_passes_down_to_the_floor_in_bounded_trials() {
        let mut s = RateSearch::new(FLAT_OUT, 0.0, SearchSteps::default());
        let mut tried = Vec::new();
        while let Some(r) = s.next_rate() {
            assert!(tried.len() < LOOP_CAP, "{tried:?}");
            tried.push(r);
            s.on_result(r, 0.01);
        }
        assert_eq!(s.ending(), Ending::NothingPassed(1.0));
        assert!((tried.last().unwrap() - 1.0).abs() < 1e-12, "the floor itself was tried");
        assert!(tried.len() <= 9, "{tried:?}");
        assert!(s.result().abs() < f64::EPSILON);
    }

    /// The first failure's loss is a hint: 40 % lost at 1000 means about 600 got through, so
    /// the next trial goes to 540, not to 100.
    #[test]
    fn the_first_loss_points_the_descent() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.4);
        assert!((s.next_rate().unwrap() - 540.0).abs() < 1e-9);
        s.on_result(540.0, 0.1);
        assert!((s.next_rate().unwrap() - 54.0).abs() < 1e-9, "pure descent after that");
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.999);
        assert!((s.next_rate().unwrap() - 100.0).abs() < 1e-9, "no further than a factor per step");
    }

    #[test]
    fn a_noisy_pass_above_a_failure_ends_with_the_pass() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result(450.0, 0.0);
        let next = s.next_rate().unwrap();
        assert!((next - (450.0f64 * 1000.0).sqrt()).abs() < 1e-9, "geometric mean");
        s.on_result(1000.0, 0.0);
        assert_eq!(s.ending(), Ending::TopPassed(1000.0));
    }

    #[test]
    fn the_trial_budget_is_known_up_front() {
        let s = RateSearch::new(1e8, 0.0, SearchSteps::default());
        // 2 + ceil(log10(1e8)) + ceil(log2(ln 10 / ln 1.005))
        assert_eq!(s.max_trials(), 2 + 8 + 9);
    }

    const MS: i64 = 1_000_000;

    fn rise(rise_ns: i64, over_s: u64) -> DelayRise {
        DelayRise { rise_ns, over_ns: over_s * 1_000_000_000 }
    }

    /// Each bar of the queue verdict: 1 ms, 0.1 % of the time.
    #[test]
    fn a_queue_is_a_rise_beyond_noise_and_clock_drift() {
        assert!(!queue_built(&rise(MS, 1)), "1 ms is noise");
        assert!(queue_built(&rise(MS + 1, 1)));
        assert!(!queue_built(&rise(-40 * MS, 2)), "a draining queue is none");
        assert!(!queue_built(&rise(45 * MS, 45)), "0.1 % of 45 s: clocks apart");
        assert!(queue_built(&rise(46 * MS, 45)));
        assert!(queue_built(&DelayRise { rise_ns: i64::MAX, over_ns: u64::MAX }), "no overflow");
        assert!(!queue_built(&DelayRise { rise_ns: i64::MIN, over_ns: u64::MAX }));
    }

    /// A synthetic trace through a token-bucket shaper (tbf: `rate` bits/s, a `burst` of
    /// bytes, a queue of at most `limit` bytes) of a 2 s trial of 1510-byte packets sent
    /// evenly at `per_s`, but for a sender stall of `stall` s at 1 s, after which it catches
    /// up at once (`catch_up`) or sends 2 ms of what it owes and resumes at the rate.
    /// Returns the loss and the delay's rise (`stream::delay`).
    fn through_tbf(per_s: f64, rate: f64, burst: f64, limit: f64, stall: f64, catch_up: bool) -> (f64, DelayRise) {
        use crate::stream::delay::DelayTrend;
        const LEN: f64 = 1_510.0;
        let bytes_per_s = rate / 8.0;
        let (mut tokens, mut t_tokens, mut free_at) = (burst, 0.0f64, 0.0f64);
        let mut queued: std::collections::VecDeque<f64> = std::collections::VecDeque::new();
        let (mut trend, mut lost, mut sent_n) = (DelayTrend::new(), 0u64, 0u64);
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "test values")]
        let n = (2.0 * per_s) as u64;
        assert!(n <= 100_000, "a trace of {n} packets: more than these tests need");
        for i in 0..n {
            #[expect(clippy::cast_precision_loss, reason = "test values")]
            let due = i as f64 / per_s;
            let stalled = (1.0..1.0 + stall).contains(&due);
            // a resuming sender sends the last 2 ms of what it owes, never the rest
            if stalled && !catch_up && due < 1.0 + stall - 0.002 {
                continue;
            }
            let sent = if stalled { 1.0 + stall } else { due };
            sent_n += 1;
            while queued.front().is_some_and(|&d| d <= sent) {
                queued.pop_front();
            }
            #[expect(clippy::cast_precision_loss, reason = "test values")]
            if (queued.len() as f64 + 1.0) * LEN > limit {
                lost += 1;
                continue;
            }
            // FIFO: it starts when the one before it left, and leaves once the bucket has its bytes
            let start = sent.max(free_at);
            tokens = (tokens + (start - t_tokens) * bytes_per_s).min(burst);
            let leave = if tokens >= LEN { start } else { start + (LEN - tokens) / bytes_per_s };
            tokens = (tokens + (leave - start) * bytes_per_s).min(burst) - LEN;
            t_tokens = leave;
            free_at = leave;
            queued.push_back(leave);
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "test values")]
            trend.on((sent * 1e9) as u64, (leave * 1e9) as u64 + 150_000);
        }
        #[expect(clippy::cast_precision_loss, reason = "test values")]
        let loss = lost as f64 / sent_n as f64;
        (loss, trend.rise().unwrap())
    }

    /// The trend and its verdict on synthetic traces through a 50 Mbit/s tbf (32 KB burst,
    /// 312 KB queue: `latency 50ms`): a trial 0.5 % and 2 % above the link loses nothing in
    /// 2 s, but its queue rises and fails it; 0.5 % below passes, also with a 20 ms stall of
    /// a sender that resumes at the rate. One that catches up in a burst builds a queue the
    /// shaper drains only slowly (0.5 % of the link), which is why a trial's sender resumes.
    #[test]
    fn synthetic_tbf_traces_fail_above_the_link_and_pass_below() {
        let (rate, burst, limit) = (50e6, 32_768.0, 32_768.0 + 312_500.0);
        let link = rate / 8.0 / 1_510.0;
        for over in [1.005, 1.02] {
            let (loss, d) = through_tbf(link * over, rate, burst, limit, 0.0, false);
            assert!(loss == 0.0 && queue_built(&d), "{over}: loss {loss}, {d:?}");
        }
        let (loss, d) = through_tbf(link * 1.2, rate, burst, limit, 0.0, false);
        assert!(loss > 0.0 && queue_built(&d), "far above: both, {loss} {d:?}");
        let (loss, d) = through_tbf(link * 0.995, rate, burst, limit, 0.0, false);
        assert!(loss == 0.0 && !queue_built(&d) && d.rise_ns.abs() < 1_000_000, "{loss} {d:?}");
        let (loss, d) = through_tbf(link * 0.995, rate, burst, limit, 0.02, false);
        assert!(loss == 0.0 && !queue_built(&d), "a resumed stall: {d:?}");
        let (loss, d) = through_tbf(link * 0.995, rate, burst, limit, 0.02, true);
        assert!(loss == 0.0 && queue_built(&d), "a caught-up stall queues: {d:?}");
    }

    /// A bottleneck whose queue holds 300 KB (a 50 Mbit/s shaper's 50 ms) behind 2 s trials:
    /// by loss alone a rate up to 2.5 % above it loses nothing; with the queue's rise the
    /// search ends within its resolution of the link.
    #[test]
    fn a_queue_that_hides_loss_still_fails_the_trial() {
        let capacity = 4_139.0;
        let room = 300_000.0 / 1_510.0;
        let run = |watch_queue: bool| {
            let mut s = RateSearch::new(1e6, 0.0, SearchSteps { floor: 2.0, ..SearchSteps::default() });
            let mut trials = 0;
            while let Some(r) = s.next_rate() {
                trials += 1;
                assert!(trials <= s.max_trials().min(LOOP_CAP), "bounded by max_trials");
                let excess = (r - capacity).max(0.0) * 2.0;
                let loss = (excess - room).max(0.0) / (2.0 * r);
                // the queue rises by the excess's share of the time, over 1.5 s of the trial
                #[expect(clippy::cast_possible_truncation, reason = "test values")]
                let d = rise(((r - capacity).max(0.0) / capacity * 1.5e9) as i64, 1);
                s.on_result_achieved(r, r, r, loss, watch_queue && queue_built(&d));
            }
            s.result()
        };
        let blind = run(false);
        assert!(blind > capacity * 1.02, "loss alone: {blind}");
        let r = run(true);
        assert!(r <= capacity && r >= capacity / 1.005, "{r} against {capacity}");
    }

    /// A failure short of the rate asked by at most 3 % counts at the rate asked, further
    /// short at what it reached; a pass counts at the rate asked only within the resolution.
    #[test]
    fn a_trial_within_three_percent_counts_at_the_rate_asked() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        let t = s.on_result_achieved(1000.0, 970.0, 970.0, 0.01, false);
        assert_eq!(t, Trial { rate: 1000.0, loss: 0.01, queue: false, passed: false });
        let t = s.on_result_achieved(1000.0, 969.0, 969.0, 0.01, false);
        assert!((t.rate - 969.0).abs() < 1e-9, "{t:?}");
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        let t = s.on_result_achieved(1000.0, 995.1, 995.1, 0.0, false);
        assert_eq!(t, Trial { rate: 1000.0, loss: 0.0, queue: false, passed: true });
        assert_eq!(s.ending(), Ending::TopPassed(1000.0));
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        let t = s.on_result_achieved(1000.0, 970.0, 970.0, 0.0, false);
        assert_eq!(t, Trial { rate: 970.0, loss: 0.0, queue: false, passed: true });
        assert_eq!(s.ending(), Ending::TopPassed(970.0));
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        let t = s.on_result_achieved(1000.0, 969.0, 969.0, 0.0, false);
        assert_eq!(t, Trial { rate: 969.0, loss: 0.0, queue: false, passed: true });
        assert_eq!(s.ending(), Ending::SenderLimited(969.0));
    }

    /// A 4,167 msg/s link (48.9 Mbit/s of 1468-byte payloads); the sender, on a busy host,
    /// skipped 1.5 % of a trial at 4,206/s after stalls: it reached the rate while it sent,
    /// but the path carried 4,143/s, below the link, and the gaps let the queue drain, so
    /// the trial passed. It counts at what was sent: the highest pass stays the 4,160/s
    /// below the link and the bisection goes on, where it used to end above the link.
    #[test]
    fn a_pass_after_skipped_stalls_counts_at_what_was_sent() {
        let mut s = RateSearch::new(10_000.0, 0.0, SearchSteps::default());
        s.on_result(10_000.0, 0.58);
        s.on_result(4_160.0, 0.0);
        s.on_trial(4_230.0, 0.0, true);
        let t = s.on_result_achieved(4_206.0, 4_206.0, 4_143.0, 0.0, false);
        assert_eq!((t.rate, t.passed), (4_143.0, true));
        assert!((s.result() - 4_160.0).abs() < 1e-9, "{}", s.result());
        assert_eq!(s.ending(), Ending::Running);
        let next = s.next_rate().expect("more trials");
        assert!(next > 4_160.0 && next < 4_230.0, "{next}");
        // a pass that sent its rate (within the resolution) counts at it
        let t = s.on_result_achieved(next, next, next * 0.996, 0.0, false);
        assert!((t.rate - next).abs() < 1e-9, "{t:?}");
        assert!((s.result() - next).abs() < 1e-9, "{}", s.result());
    }

    /// After a faster failure, a short pass bisects on while it raises the highest pass by
    /// more than the resolution, and ends the search once it does not.
    #[test]
    fn a_short_pass_no_higher_than_the_best_ends_the_search() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result_achieved(450.0, 400.0, 400.0, 0.0, false);
        assert_eq!(s.ending(), Ending::Running, "the first short pass raised the best from none");
        // 1.004 times the best: within the resolution, the sender can get no closer
        s.on_result_achieved(600.0, 401.6, 401.6, 0.0, false);
        assert_eq!(s.ending(), Ending::SenderLimited(401.6));
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result_achieved(450.0, 400.0, 400.0, 0.0, false);
        // 1.006 times the best: higher, so on
        s.on_result_achieved(600.0, 402.4, 402.4, 0.0, false);
        assert_eq!(s.ending(), Ending::Running);
        assert!((s.result() - 402.4).abs() < 1e-12, "{}", s.result());
    }

    /// The search stops when the failure is within the resolution above the pass, and not
    /// before.
    #[test]
    fn the_bracket_closes_at_the_resolution() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result(995.1, 0.0);
        assert_eq!(s.ending(), Ending::Found(995.1), "1000 / 995.1 is within 0.5 %");
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result(994.9, 0.0);
        assert_eq!(s.ending(), Ending::Running, "1000 / 994.9 is not");
        assert!((s.next_rate().unwrap() - (994.9f64 * 1000.0).sqrt()).abs() < 1e-9);
        // exactly at the resolution (1.5 times: exact in binary) is closed
        let mut s = RateSearch::new(1500.0, 0.0, SearchSteps { resolution: 0.5, ..SearchSteps::default() });
        s.on_result(1500.0, 0.5);
        s.on_result(1000.0, 0.0);
        assert_eq!((s.next_rate(), s.ending()), (None, Ending::Found(1000.0)));
    }

    /// A busy host: every third trial the sender reaches half the rate asked and loses half
    /// of that, so the failure (counted at the rate reached) falls below the pass and the
    /// bracket reopens. The search stops at its trial budget and says it ran out, with the
    /// best pass.
    #[test]
    fn noisy_results_run_out_of_trials() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        let budget = s.max_trials();
        assert_eq!(budget, 2 + 3 + 9);
        let mut n = 0;
        while let Some(r) = s.next_rate() {
            n += 1;
            assert!(n <= LOOP_CAP, "runs on past its budget");
            let achieved = if n % 3 == 0 { r / 2.0 } else { r };
            let loss = if achieved > 600.0 || n % 3 == 0 { 0.5 } else { 0.0 };
            s.on_result_achieved(r, achieved, achieved, loss, false);
        }
        assert_eq!(n, budget);
        let Ending::OutOfTrials(best) = s.ending() else { panic!("{:?}", s.ending()) };
        assert!(best > 0.0 && best <= 600.0 && (best - s.result()).abs() < f64::EPSILON, "{best}");
        assert!(s.fail.is_some_and(|f| f > best * 1.005), "the bracket is open: {:?}", s.fail);
    }

    /// A caller that spends the budget on failures above the floor (here one rate, 1.5, half
    /// a step above a floor of 1) ran out of trials with nothing passed; that is not the
    /// floor failing.
    #[test]
    fn failures_above_the_floor_run_out_of_trials_not_down_to_the_floor() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        for _ in 0..s.max_trials() {
            s.on_result(1.5, 0.5);
        }
        assert_eq!((s.next_rate(), s.ending()), (None, Ending::OutOfTrials(0.0)));
    }

    /// The floor of 1 s trials is 4 messages a second: the budget counts the descent to it,
    /// and a search where nothing passes tries it last and ends there.
    #[test]
    fn the_budget_and_the_end_follow_the_floor() {
        let steps = |floor| SearchSteps { floor, ..SearchSteps::default() };
        // 40 down to 4 is one step of 10; down to 1, two
        assert_eq!(RateSearch::new(40.0, 0.0, steps(4.0)).max_trials(), 2 + 1 + 9);
        assert_eq!(RateSearch::new(40.0, 0.0, steps(1.0)).max_trials(), 2 + 2 + 9);
        // a top at the floor: no descent
        assert_eq!(RateSearch::new(4.0, 0.0, steps(4.0)).max_trials(), 2 + 9);
        assert_eq!(RateSearch::new(1.0, 0.0, steps(4.0)).max_trials(), 2 + 9);
        let mut s = RateSearch::new(1e6, 0.0, steps(4.0));
        let mut tried = Vec::new();
        while let Some(r) = s.next_rate() {
            assert!(tried.len() < LOOP_CAP, "{tried:?}");
            tried.push(r);
            s.on_result(r, 0.5);
        }
        assert_eq!(s.ending(), Ending::NothingPassed(4.0));
        assert!(tried.iter().all(|&r| r >= 4.0), "{tried:?}");
        assert!((tried.last().unwrap() - 4.0).abs() < 1e-12, "{tried:?}");
        assert!(tried.len() <= s.max_trials());
        // steps out of range are brought into it
        let s = RateSearch::new(1e6, 0.0, SearchSteps { floor: 0.0, factor: 1.0, resolution: 0.0 });
        assert_eq!(s.steps, SearchSteps { floor: 1e-3, factor: 1.5, resolution: 1e-4 });
        let s = RateSearch::new(1e6, 0.0, SearchSteps { floor: 1.0, factor: 10.0, resolution: 5.0 });
        assert!((s.steps.resolution - 1.0).abs() < f64::EPSILON);
    }

    /// A failure below a pass makes that pass noise; a pass at or above a failure, the
    /// failure.
    #[test]
    fn a_result_contradicting_the_bracket_replaces_it() {
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_result(1000.0, 0.5);
        s.on_result(500.0, 0.0);
        s.on_result(500.0, 0.5);
        assert_eq!((s.pass, s.fail), (None, Some(500.0)));
        s.on_result(200.0, 0.0);
        s.on_result(200.0, 0.0);
        s.on_result(300.0, 0.0);
        assert_eq!((s.pass, s.fail), (Some(300.0), Some(500.0)));
        s.on_result(500.0, 0.0);
        assert_eq!((s.pass, s.fail), (Some(500.0), None));
        // only the first failure's loss points the descent
        let mut s = RateSearch::new(1000.0, 0.0, SearchSteps::default());
        s.on_trial(1000.0, 0.0, true);
        assert!((s.next_rate().unwrap() - 900.0).abs() < 1e-9, "a queue, no loss: 0.9 of the rate");
        s.on_result(900.0, 0.5);
        assert!((s.next_rate().unwrap() - 90.0).abs() < 1e-9);
    }

    /// Loss exactly at the target passes; a search whose top is within a step of the floor
    /// tries the floor and ends there.
    #[test]
    fn the_edges_of_the_target_and_the_floor() {
        let mut s = RateSearch::new(1000.0, 0.01, SearchSteps::default());
        assert!(s.on_result(1000.0, 0.01).passed, "1 % lost, 1 % allowed");
        assert!(!s.on_result(1000.0, 0.010_001).passed);
        let mut s = RateSearch::new(4.5, 0.0, SearchSteps { floor: 4.0, ..SearchSteps::default() });
        let mut tried = Vec::new();
        while let Some(r) = s.next_rate() {
            assert!(tried.len() < LOOP_CAP, "{tried:?}");
            tried.push(r);
            s.on_result(r, 0.5);
        }
        assert_eq!(tried, [4.5, 4.0]);
        assert_eq!(s.ending(), Ending::NothingPassed(4.0));
    }
}
