//! Delay samples: `delay + offset`, the offset drawn from the jitter distribution, never
//! below zero (as in netem, a large jitter next to a small delay is cut at 0, which raises
//! the mean; the report's achieved delay shows by how much).

use super::spec::{Jitter, JitterDist};
use crate::rng::SplitMix64;

/// Pareto shape: 3 keeps the variance finite (so `jitter` can be the standard deviation)
/// with a tail far heavier than the normal's.
const PARETO_ALPHA: f64 = 3.0;
/// Mean of Pareto(x_m = 1, alpha = 3): alpha / (alpha - 1).
const PARETO_MEAN: f64 = 1.5;
/// Its standard deviation: sqrt(alpha / ((alpha - 1)^2 (alpha - 2))) = sqrt(0.75).
const PARETO_SD: f64 = 0.866_025_403_784_438_6;
/// Normal samples are cut at ±4 sd (netem's tables stop there too).
const NORMAL_CUT: f64 = 4.0;

/// One offset with mean 0 and the distribution's spread, in ns (as f64).
pub fn offset(j: Jitter, rng: &mut SplitMix64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a jitter below 2^53 ns")]
    let s = j.ns as f64;
    match j.dist {
        JitterDist::Normal => s * standard_normal(rng).clamp(-NORMAL_CUT, NORMAL_CUT),
        JitterDist::Uniform => s * (2.0 * rng.next_f64() - 1.0),
        JitterDist::Pareto => {
            // Inverse CDF: x = x_m / u^(1/alpha) with u in (0, 1].
            let u = 1.0 - rng.next_f64();
            let x = u.powf(-1.0 / PARETO_ALPHA);
            s * (x - PARETO_MEAN) / PARETO_SD
        }
    }
}

/// A standard normal by Box-Muller (one of the pair; the other is dropped to keep the
/// generator's draws per packet fixed, so a seed replays exactly).
fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64(); // (0, 1]: ln is finite
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// `delay_ns` plus a jitter sample (if any), at least 0.
pub fn sample(delay_ns: u64, jitter: Option<Jitter>, rng: &mut SplitMix64) -> u64 {
    match jitter {
        None => delay_ns,
        Some(j) if j.ns == 0 => delay_ns,
        Some(j) => {
            #[expect(clippy::cast_precision_loss, reason = "delays below 2^53 ns")]
            let v = delay_ns as f64 + offset(j, rng);
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to >= 0")]
            let ns = v.max(0.0).round() as u64;
            ns
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(xs: &[f64]) -> (f64, f64) {
        #[expect(clippy::cast_precision_loss, reason = "test sizes")]
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    }

    fn draw(dist: JitterDist, n: usize) -> Vec<f64> {
        let mut rng = SplitMix64::new(7);
        let j = Jitter { ns: 2_000_000, dist };
        #[expect(clippy::cast_precision_loss, reason = "test values")]
        (0..n).map(|_| sample(10_000_000, Some(j), &mut rng) as f64).collect()
    }

    // With n = 200,000 the standard error of the mean is sd / 447 (about 4.5 us here): the
    // bounds below are more than 5 standard errors wide, and the seed is fixed.

    #[test]
    fn normal_mean_and_spread() {
        let xs = draw(JitterDist::Normal, 200_000);
        let (m, sd) = stats(&xs);
        assert!((m - 10e6).abs() < 25e3, "mean {m}");
        assert!((sd - 2e6).abs() < 0.02 * 2e6, "sd {sd}");
        assert!(xs.iter().all(|&x| (2e6..=18e6).contains(&x)), "cut at ±4 sd");
        // about 68.3 % within one sd
        #[expect(clippy::cast_precision_loss, reason = "test sizes")]
        let within = xs.iter().filter(|&&x| (x - 10e6).abs() <= 2e6).count() as f64 / 200_000.0;
        assert!((within - 0.6827).abs() < 0.005, "{within}");
    }

    #[test]
    fn uniform_mean_and_spread() {
        let xs = draw(JitterDist::Uniform, 200_000);
        let (m, sd) = stats(&xs);
        assert!((m - 10e6).abs() < 25e3, "mean {m}");
        assert!((sd - 2e6 / 3f64.sqrt()).abs() < 0.01 * 2e6, "sd {sd}");
        assert!(xs.iter().all(|&x| (8e6..=12e6).contains(&x)));
    }

    #[test]
    fn pareto_mean_floor_and_tail() {
        let xs = draw(JitterDist::Pareto, 200_000);
        let (m, _) = stats(&xs);
        // Variance is finite but the fourth moment is not: the mean converges, a sample sd
        // slowly; check the mean, the floor and the tail against the exact CDF instead.
        assert!((m - 10e6).abs() < 40e3, "mean {m}");
        let floor = 10e6 - 2e6 * PARETO_MEAN / PARETO_SD;
        assert!(xs.iter().all(|&x| x >= floor - 1.0), "never below delay - 1.73 jitter");
        // P(offset > 3 sd) = P(X > 1.5 + 3 * 0.866) = (4.098)^-3 = 0.01453
        #[expect(clippy::cast_precision_loss, reason = "test sizes")]
        let tail = xs.iter().filter(|&&x| x > 16e6).count() as f64 / 200_000.0;
        let want = (PARETO_MEAN + 3.0 * PARETO_SD).powf(-PARETO_ALPHA);
        assert!((tail - want).abs() < 0.1 * want, "{tail} vs {want}");
    }

    #[test]
    fn never_negative_and_fixed_without_jitter() {
        let mut rng = SplitMix64::new(1);
        let j = Jitter { ns: 5_000_000, dist: JitterDist::Normal };
        assert!((0..10_000).all(|_| sample(1_000, Some(j), &mut rng) < 30_000_000));
        assert_eq!(sample(1_234, None, &mut rng), 1_234);
    }
}
