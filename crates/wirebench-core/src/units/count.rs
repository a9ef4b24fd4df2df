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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_scales_by_its_power_of_ten() {
        let read = |s: &str| s.parse::<Count>().map(|c| c.0);
        assert_eq!(read("7"), Ok(7));
        assert_eq!((read("10k"), read("10K")), (Ok(10_000), Ok(10_000)));
        assert_eq!(read("1.5M"), Ok(1_500_000));
        assert_eq!(read("2G"), Ok(2_000_000_000));
        assert_eq!(read(" 3k "), Ok(3_000), "spaces around it");
        assert!(read("3x").unwrap_err().to_string().contains("unknown unit"));
    }

    /// Counts are whole numbers below 2^63: 2^63 itself is refused, and the largest f64
    /// below it reads exactly.
    #[test]
    fn a_count_stops_below_two_to_the_63() {
        assert!("9223372036854775808".parse::<Count>().unwrap_err().to_string().contains("below 2^63"));
        assert_eq!("9223372036854774784".parse::<Count>(), Ok(Count((1 << 63) - 1024)));
    }

    /// Written in the largest unit that divides it, so that it reads back as itself.
    #[test]
    fn a_count_is_written_in_the_largest_unit_that_divides_it() {
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1k"),
            (1_500, "1500"),
            (2_000_000, "2M"),
            (3_000_000_000, "3G"),
            (1_000_001_000, "1000001k"),
        ] {
            assert_eq!(Count(n).to_string(), text);
            assert_eq!(text.parse(), Ok(Count(n)), "{text} reads back");
        }
    }

    #[test]
    fn a_count_as_usize_saturates() {
        assert_eq!(Count(5).as_usize(), 5);
        assert_eq!(Count(u64::MAX).as_usize(), usize::try_from(u64::MAX).unwrap_or(usize::MAX));
    }
}
