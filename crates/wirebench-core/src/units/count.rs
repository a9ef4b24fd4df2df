//! Counts: `10000`, `10_000`, `10k`, `1.5k`, `1M`, `2G` (decimal). `m` is refused: `10m`
//! reads as ten minutes.

use std::fmt;
use std::str::FromStr;

use super::{UnitError, err, split_number};

/// A count of things (probes, messages, clients) given in human units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Count(pub u64);

impl Count {
    /// The count as a `usize` (saturating).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl FromStr for Count {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "count";
        let t = s.trim();
        let (n, unit) = split_number(t).ok_or_else(|| err(WHAT, s, "is not a count (try 1000, 10k, 1M)"))?;
        let scale = match unit {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "m" => return Err(err(WHAT, s, "has m, which reads as minutes: write M for millions (1M)")),
            _ => return Err(err(WHAT, s, "has an unknown unit (use k, M or G: 10k, 1M)")),
        };
        let v = n * scale;
        if v.fract() != 0.0 || v >= 2f64.powi(63) {
            return Err(err(WHAT, s, "is not a whole number below 2^63"));
        }
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked above")]
        Ok(Self(v as u64))
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, k) in [("G", 1_000_000_000u64), ("M", 1_000_000), ("k", 1_000)] {
            if self.0 >= k && self.0.is_multiple_of(k) {
                return write!(f, "{}{unit}", self.0 / k);
            }
        }
        write!(f, "{}", self.0)
    }
}
