//! Loss decisions: independent (Bernoulli) or Gilbert-Elliott bursts (E. N. Gilbert,
//! "Capacity of a burst-noise channel", Bell System Technical Journal 39, 1960; the
//! two-state form netem calls `gemodel`, RFC 6534 section 4 for the metrics).

use super::spec::Loss;
use crate::rng::SplitMix64;

/// The loss model and, for bursts, its current state.
#[derive(Debug, Clone)]
pub struct LossState {
    model: Option<Loss>,
    bad: bool,
}

impl LossState {
    /// Starts in the good state.
    pub const fn new(model: Option<Loss>) -> Self {
        Self { model, bad: false }
    }

    /// Is the next packet lost? Bursts move the state first, then lose every packet in
    /// the bad state: mean loss `p / (p + r)`, mean burst length `1 / r`.
    pub fn lose(&mut self, rng: &mut SplitMix64) -> bool {
        match self.model {
            None => false,
            Some(Loss::Random { p }) => rng.chance(p),
            Some(Loss::Burst { p, r }) => {
                let flip = if self.bad { r } else { p };
                if rng.chance(flip) {
                    self.bad = !self.bad;
                }
                self.bad
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_loss_rate() {
        let mut s = LossState::new(Some(Loss::Random { p: 0.01 }));
        let mut rng = SplitMix64::new(3);
        let lost = (0..1_000_000).filter(|_| s.lose(&mut rng)).count();
        // binomial sd = sqrt(1e6 * 0.01 * 0.99) = 99.5; 5 sd
        assert!(lost.abs_diff(10_000) < 500, "{lost}");
    }

    #[test]
    fn gilbert_elliott_rate_and_burst_length() {
        let (p, r) = (0.01, 0.25);
        let mut state = LossState::new(Some(Loss::Burst { p, r }));
        let mut rng = SplitMix64::new(11);
        let n = 2_000_000;
        let (mut lost, mut bursts, mut prev) = (0u64, 0u64, false);
        for _ in 0..n {
            let l = state.lose(&mut rng);
            lost += u64::from(l);
            if l && !prev {
                bursts += 1;
            }
            prev = l;
        }
        #[expect(clippy::cast_precision_loss, reason = "test sizes")]
        let (rate, mean_burst) = (lost as f64 / f64::from(n), lost as f64 / bursts as f64);
        let want = p / (p + r);
        assert!((rate - want).abs() < 0.05 * want, "loss {rate} vs {want}");
        assert!((mean_burst - 1.0 / r).abs() < 0.05 / r, "burst {mean_burst} vs {}", 1.0 / r);
    }

    #[test]
    fn no_model_never_loses() {
        let mut s = LossState::new(None);
        let mut rng = SplitMix64::new(3);
        assert!((0..1000).all(|_| !s.lose(&mut rng)));
    }
}
