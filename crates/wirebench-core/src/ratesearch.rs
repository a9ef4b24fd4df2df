//! The highest loss-free rate, found by binary search as RFC 2544 (section 26.1) describes
//! throughput: the fastest rate at which the count of frames received equals the count
//! sent, here generalised to "loss at most `loss_target`". Pure: the caller runs each trial
//! and reports its loss.

/// A binary search over rates in (0, `high`], stopping when the bracket between the highest
/// passing and the lowest failing rate is narrower than `resolution` times `high` (e.g. 0.02
/// for 2 % of the top).
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearch {
    /// Highest rate that passed so far (0 when none).
    pass: f64,
    /// Lowest rate that failed so far.
    fail: f64,
    /// Bracket width at which the search stops.
    step: f64,
    loss_target: f64,
    /// First trial: the top of the range itself.
    first: bool,
}

/// One finished trial, for the report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// The rate asked for.
    pub rate: f64,
    /// Loss seen (0..=1).
    pub loss: f64,
    /// Within the target?
    pub passed: bool,
}

impl RateSearch {
    /// Searches below `high` (for example the rate a flat-out trial achieved).
    pub fn new(high: f64, loss_target: f64, resolution: f64) -> Self {
        Self { pass: 0.0, fail: high, step: high * resolution.max(1e-4), loss_target, first: true }
    }

    /// The next rate to try, or `None` when the search is done.
    pub fn next_rate(&self) -> Option<f64> {
        if self.first {
            return Some(self.fail);
        }
        if self.fail - self.pass <= self.step {
            return None;
        }
        Some(f64::midpoint(self.pass, self.fail))
    }

    /// Records the loss of a trial at `rate`.
    pub fn on_result(&mut self, rate: f64, loss: f64) -> Trial {
        let passed = loss <= self.loss_target;
        if self.first {
            self.first = false;
            if passed {
                self.pass = rate;
                self.fail = rate;
            }
        } else if passed {
            self.pass = self.pass.max(rate);
        } else {
            self.fail = self.fail.min(rate);
        }
        Trial { rate, loss, passed }
    }

    /// Records a trial whose sender asked for `requested` but managed only `achieved`: when
    /// it fell short by more than 3 %, the requested rate is out of reach (it becomes the
    /// top of the bracket) and a pass counts at the achieved rate, never the requested one.
    pub fn on_result_achieved(&mut self, requested: f64, achieved: f64, loss: f64) -> Trial {
        if achieved >= 0.97 * requested {
            return self.on_result(requested, loss);
        }
        let t = self.on_result(achieved, loss);
        self.fail = self.fail.min(requested);
        self.pass = self.pass.min(self.fail);
        t
    }

    /// The highest rate that passed (0 if none did).
    pub const fn result(&self) -> f64 {
        self.pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link that loses whatever is offered above its capacity.
    fn search(capacity: f64, high: f64, target: f64, resolution: f64) -> (f64, usize) {
        let mut s = RateSearch::new(high, target, resolution);
        let mut trials = 0;
        while let Some(r) = s.next_rate() {
            let loss = if r > capacity { (r - capacity) / r } else { 0.0 };
            s.on_result(r, loss);
            trials += 1;
            assert!(trials < 50, "the search ends");
        }
        (s.result(), trials)
    }

    #[test]
    fn finds_the_capacity_within_the_resolution() {
        let (r, trials) = search(600.0, 1000.0, 0.0, 0.01);
        assert!((590.0..=600.0).contains(&r), "{r}");
        assert!(trials <= 9, "log2(1/0.01) + 1 trials, got {trials}");
    }

    #[test]
    fn a_loss_target_allows_a_little_more() {
        // 0.1 % loss allowed: up to capacity / 0.999
        let (r, _) = search(600.0, 1000.0, 0.001, 0.0001);
        assert!(r > 600.4 && r <= 600.6, "{r}");
    }

    #[test]
    fn a_clean_top_ends_at_once() {
        let (r, trials) = search(2000.0, 1000.0, 0.0, 0.01);
        assert_eq!((r, trials), (1000.0, 1));
    }

    #[test]
    fn a_sender_that_cannot_keep_up_caps_the_search() {
        // The link would carry 900, but the sender manages at most 500.
        let mut s = RateSearch::new(1000.0, 0.0, 0.01);
        let mut trials = 0;
        while let Some(r) = s.next_rate() {
            let achieved = r.min(500.0);
            let loss = if achieved > 900.0 { 0.1 } else { 0.0 };
            s.on_result_achieved(r, achieved, loss);
            trials += 1;
            assert!(trials < 50);
        }
        assert!(s.result() <= 500.0 && s.result() >= 490.0, "{}", s.result());
    }

    #[test]
    fn nothing_passes() {
        let (r, _) = search(0.0, 1000.0, 0.0, 0.01);
        assert!(r.abs() < f64::EPSILON);
    }
}
