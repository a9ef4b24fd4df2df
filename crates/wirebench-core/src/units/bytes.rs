//! Sizes in bytes: `16384`, `16KiB`, `1MiB`, `64MB` (decimal `k`/`KB`, `M`/`MB`, `G`/`GB`;
//! binary `KiB`, `MiB`, `GiB`).

use std::fmt;
use std::str::FromStr;

use super::{UnitError, err, split_number};

/// A size in bytes given in human units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "size";
        let t = s.trim();
        let (n, unit) = split_number(t).ok_or_else(|| err(WHAT, s, "is not a size like 16384, 16KiB or 1MiB"))?;
        let scale: u64 = match unit {
            "" | "B" | "b" => 1,
            "k" | "K" | "kB" | "KB" => 1_000,
            "KiB" | "Ki" => 1 << 10,
            "M" | "MB" => 1_000_000,
            "MiB" | "Mi" => 1 << 20,
            "G" | "GB" => 1_000_000_000,
            "GiB" | "Gi" => 1 << 30,
            _ => return Err(err(WHAT, s, "has an unknown unit (use B, KiB, MiB, GiB, KB, MB or GB)")),
        };
        #[expect(clippy::cast_precision_loss, reason = "scales are exact in f64")]
        let v = n * scale as f64;
        if v.fract() != 0.0 || v >= 2f64.powi(63) {
            return Err(err(WHAT, s, "is not a whole number of bytes below 2^63"));
        }
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked above")]
        Ok(Self(v as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, k) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if b >= k && b.is_multiple_of(k) {
                return write!(f, "{}{unit}", b / k);
            }
        }
        write!(f, "{b}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sizes() {
        let p = |s: &str| s.parse::<ByteSize>().map(|b| b.0);
        assert_eq!(p("16384"), Ok(16_384));
        assert_eq!(p("16KiB"), Ok(16_384));
        assert_eq!(p("1.5MiB"), Ok(1_572_864));
        assert_eq!(p("64MB"), Ok(64_000_000));
        assert_eq!(p("2GiB"), Ok(2 << 30));
        // decimal kilo and giga, next to the binary ones
        assert_eq!(p("16k"), Ok(16_000));
        assert_eq!(p("16KB"), Ok(16_000));
        assert_eq!(p("2G"), Ok(2_000_000_000));
        assert_eq!(p("2GB"), Ok(2_000_000_000));
        // 2^33 GiB is 2^63 bytes: the first size refused
        assert_eq!(p("8589934591GiB"), Ok((1 << 63) - (1 << 30)));
        assert!(p("8589934592GiB").is_err());
        for bad in ["", "KiB", "1.5", "1QB", "-1", "1e30", "99999999999GiB"] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert_eq!(ByteSize(16_384).to_string(), "16KiB");
        assert_eq!(ByteSize(1 << 20).to_string(), "1MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        assert_eq!(ByteSize(0).to_string(), "0B");
        for b in [0u64, 1, 1024, 3 << 30, 12_345] {
            assert_eq!(ByteSize(b).to_string().parse::<ByteSize>(), Ok(ByteSize(b)));
        }
    }
}
