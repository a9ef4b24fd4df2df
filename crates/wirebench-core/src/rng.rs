//! A small seeded generator (SplitMix64, Steele, Lea and Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014) for simulations and tests: decisions in
//! core take `&mut SplitMix64` so a seed replays a run exactly.

/// SplitMix64: 64 bits of state, passes BigCrush, enough for loss and jitter decisions.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub const fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "53 bits fit exactly")]
        let (v, scale) = ((self.next_u64() >> 11) as f64, (1u64 << 53) as f64);
        v / scale
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published SplitMix64 sequence for seed 0 (Vigna's `splitmix64.c`): the
    /// generator is that algorithm, bit for bit, not just something uniform.
    #[test]
    fn the_reference_sequence() {
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(g.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn a_chance_is_a_draw_strictly_below_p() {
        let x = SplitMix64::new(7).next_f64();
        assert!(!SplitMix64::new(7).chance(x), "a draw equal to p is not below it");
        assert!(SplitMix64::new(7).chance(x.next_up()));
        // a zero chance draws nothing: the stream after it is unchanged
        let mut g = SplitMix64::new(7);
        assert!(!g.chance(0.0));
        assert_eq!(g.next_f64().to_bits(), x.to_bits());
    }

    #[test]
    fn seeded_and_roughly_uniform() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        assert_eq!(a.next_u64(), b.next_u64());
        let n = 100_000;
        let hits = (0..n).filter(|_| a.chance(0.25)).count();
        // Binomial sd = sqrt(n p (1-p)) ≈ 137; allow 5 sd.
        assert!(hits.abs_diff(25_000) < 700, "{hits}");
    }
}
