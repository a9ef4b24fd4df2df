//! When each client sends: an open-loop schedule that never waits for replies. Fixed
//! interval with a random phase (so a thousand clients do not send in lockstep), or
//! Poisson (exponential gaps with the same mean).

use crate::rng::SplitMix64;

/// A client's arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Every `interval_ns`, starting at a uniform phase in [0, interval).
    Fixed {
        /// Gap between sends, ns.
        interval_ns: u64,
    },
    /// Exponential gaps with mean `mean_ns`.
    Poisson {
        /// Mean gap, ns.
        mean_ns: u64,
    },
}

impl Arrivals {
    /// The offset of the first send after a client starts.
    pub fn first(self, rng: &mut SplitMix64) -> u64 {
        match self {
            Self::Fixed { interval_ns } => rng.next_u64() % interval_ns.max(1),
            Self::Poisson { .. } => self.gap(rng),
        }
    }

    /// The gap to the next intended send.
    pub fn gap(self, rng: &mut SplitMix64) -> u64 {
        match self {
            Self::Fixed { interval_ns } => interval_ns,
            Self::Poisson { mean_ns } => {
                // Inverse transform; 1 - u is in (0, 1] so ln never sees 0.
                let u = 1.0 - rng.next_f64();
                #[expect(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let g = (-(u.ln()) * mean_ns as f64).round() as u64;
                g
            }
        }
    }

    /// The name the report uses.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Fixed { .. } => "fixed",
            Self::Poisson { .. } => "poisson",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_keeps_its_interval_and_spreads_phases() {
        let a = Arrivals::Fixed { interval_ns: 500_000_000 };
        let mut rng = SplitMix64::new(7);
        let phases: Vec<u64> = (0..1000).map(|_| a.first(&mut rng)).collect();
        assert!(phases.iter().all(|&p| p < 500_000_000));
        let early = phases.iter().filter(|&&p| p < 250_000_000).count();
        assert!((400..600).contains(&early), "{early}");
        assert_eq!(a.gap(&mut rng), 500_000_000);
        assert_eq!((a.name(), Arrivals::Poisson { mean_ns: 1 }.name()), ("fixed", "poisson"));
    }

    #[test]
    fn poisson_has_the_mean() {
        let a = Arrivals::Poisson { mean_ns: 1_000_000 };
        let mut rng = SplitMix64::new(3);
        let n = 200_000u64;
        let gaps: Vec<u64> = (0..n).map(|_| a.gap(&mut rng)).collect();
        #[expect(clippy::cast_precision_loss)]
        let mean = gaps.iter().sum::<u64>() as f64 / n as f64;
        // sd of the mean is 1e6 / sqrt(2e5) = 2,236 ns
        assert!((mean - 1e6).abs() < 12_000.0, "{mean}");
        // and exponential: 1 - 1/e = 63.2 % of gaps are shorter than the mean (sd 0.11 %)
        let short = gaps.iter().filter(|&&g| g < 1_000_000).count();
        assert!((124_000..128_800).contains(&short), "{short} of {n}");
    }
}
