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
//!    `1 + resolution` of the pass.
//!
//! At most `1 + 1 + ceil(log_factor(top / floor)) + ceil(log2(ln factor / ln(1 + resolution)))`
//! trials ([`RateSearch::max_trials`]): 17 from 10^8 msg/s down to 1 msg/s at 2 %.

/// How a search walks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchSteps {
    /// Lowest rate tried (messages/s): below it a trial says too little.
    pub floor: f64,
    /// Descent divisor per failing trial.
    pub factor: f64,
    /// The search stops when the lowest failure is within `1 + resolution` of the highest
    /// pass (0.02: 2 %).
    pub resolution: f64,
}

impl Default for SearchSteps {
    fn default() -> Self {
        Self { floor: 1.0, factor: 10.0, resolution: 0.02 }
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
    /// Within the target?
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

    /// Records the loss of a trial at `rate`.
    pub fn on_result(&mut self, rate: f64, loss: f64) -> Trial {
        self.trials += 1;
        let passed = loss <= self.loss_target;
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
        Trial { rate, loss, passed }
    }

    /// Records a trial whose sender asked for `requested` but managed only `achieved`. When
    /// it fell short by more than 3 %, the trial counts at the achieved rate, never the
    /// requested one; and if it passed, the search ends there (the path carried all the
    /// sender could send, and no higher rate can be tried) unless a faster trial failed and
    /// this pass raised the highest one: every failure counts at a rate the sender reached,
    /// so a paced trial that fell a little short on a busy host says nothing about the rates
    /// in between, and the bisection goes on. A short pass that gets no higher than the
    /// highest pass so far (within the resolution) ends it: the sender cannot get closer.
    pub fn on_result_achieved(&mut self, requested: f64, achieved: f64, loss: f64) -> Trial {
        if achieved >= 0.97 * requested {
            return self.on_result(requested, loss);
        }
        let before = self.pass;
        let t = self.on_result(achieved, loss);
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

    /// A sender that reaches at most `FLAT_OUT` and a link that loses whatever is offered
    /// above `capacity` (tail drop). Returns the search's end and its trial count.
    fn search(capacity: f64, top: Option<f64>, target: f64) -> (Ending, usize, f64, usize) {
        let first = top.unwrap_or(FLAT_OUT);
        let mut s = RateSearch::new(first, target, SearchSteps::default());
        let mut trials = 0;
        while let Some(r) = s.next_rate() {
            let achieved = r.min(FLAT_OUT);
            let loss = if achieved > capacity { (achieved - capacity) / achieved } else { 0.0 };
            s.on_result_achieved(r, achieved, loss);
            trials += 1;
            assert!(trials <= s.max_trials(), "bounded by max_trials");
        }
        (s.ending(), trials, s.result(), s.max_trials())
    }

    #[test]
    fn finds_a_bottleneck_at_any_depth_below_flat_out() {
        for share in [0.5, 0.01, 0.001, 0.000_01] {
            let capacity = FLAT_OUT * share;
            let (end, trials, r, max) = search(capacity, None, 0.0);
            assert!(matches!(end, Ending::Found(_)), "{share}: {end:?}");
            assert!(r <= capacity && r >= capacity / 1.02, "{share}: {r} vs {capacity}");
            assert!(trials <= 16 && max <= 16, "{share}: {trials} trials of at most {max}");
        }
    }

    #[test]
    fn a_loss_target_allows_a_little_more() {
        // 0.1 % loss allowed: up to capacity / 0.999
        let (_, _, r, _) = search(600.0, Some(1000.0), 0.001);
        assert!(r > 600.0 * 0.98 && r <= 600.0 / 0.999, "{r}");
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
        assert!(matches!(end, Ending::Found(_)) && (2e6 / 1.02..=2e6).contains(&r), "{end:?} {r}");
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
        let mut passes = Vec::new();
        while let Some(r) = s.next_rate() {
            let achieved = if r >= flat_out { flat_out } else { 0.96 * r };
            let loss = if achieved > capacity { (achieved - capacity) / achieved } else { 0.0 };
            if s.on_result_achieved(r, achieved, loss).passed {
                passes.push(achieved);
            }
            assert!(passes.len() < s.max_trials(), "bounded");
        }
        assert!(passes.len() >= 2, "the first short pass did not end it: {passes:?}");
        let Ending::SenderLimited(r) = s.ending() else { panic!("{:?}", s.ending()) };
        assert!(r > 0.9 * capacity && r <= capacity, "{r} against a {capacity} link");
        // Without a faster failure, a short pass still ends the search at once.
        let mut t = RateSearch::new(1e8, 0.0, SearchSteps::default());
        t.on_result_achieved(1e8, 1e7, 0.0);
        assert_eq!(t.ending(), Ending::SenderLimited(1e7));
    }

    #[test]
    fn nothing_passes_down_to_the_floor_in_bounded_trials() {
        let mut s = RateSearch::new(FLAT_OUT, 0.0, SearchSteps::default());
        let mut tried = Vec::new();
        while let Some(r) = s.next_rate() {
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
        // 2 + ceil(log10(1e8)) + ceil(log2(ln 10 / ln 1.02))
        assert_eq!(s.max_trials(), 2 + 8 + 7);
    }
}
