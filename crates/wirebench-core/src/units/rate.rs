//! The one rate grammar: what a rate string says before a flag decides what it accepts.
//!
//! A rate is a number, an optional SI prefix and a unit:
//! - bits: `bit`, `b`, `bps` (`100mbit`, `100Mbit/s`, `100Mb`, `100Mbps`, `100mbps`, `1gbit`);
//!   the prefix's case does not matter, and `bps` is bits as in iperf3, never bytes;
//! - bytes: `B`, `Bps` (`100MB/s`, `100MB`, `10KiB/s`);
//! - messages: `/s`, `msg/s`, `pps` (`10k/s`, `2000/s`, `1.5M/s`, `50kpps`);
//! - nothing: `100M`, `10k`, `5000`, which a flag that takes only one kind reads as that kind
//!   and a flag that takes both refuses, naming the two readings.

use super::{UnitError, err, split_number};

/// What a rate string says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RateSpec {
    /// Bits per second.
    Bits(f64),
    /// Messages per second.
    Msgs(f64),
    /// A number with at most an SI prefix: bits or messages, the flag decides.
    Bare(f64),
}

/// `k` = 10^3 .. `T` = 10^12 (any case), `Ki`/`Mi`/`Gi` binary.
fn prefix(p: &str) -> Option<f64> {
    Some(match p {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1_048_576.0,
        "Gi" => 1_073_741_824.0,
        _ => return None,
    })
}

pub(crate) const FORMS: &str = "use bits (100mbit, 1gbit, 100Mbps), bytes (100MB/s) or messages (10k/s)";

/// Reads a rate string without deciding what the flag takes.
pub(crate) fn classify(what: &'static str, input: &str) -> Result<RateSpec, UnitError> {
    let Some((num, unit)) = split_number(input.trim()) else {
        return Err(err(what, input, &format!("is not a rate ({FORMS})")));
    };
    let unknown = || err(what, input, &format!("has an unknown unit ({FORMS})"));
    // Messages: `/s`, `msg/s`, `pps`, each after a prefix.
    for suffix in ["msg/s", "/s", "pps"] {
        // `100Mbit/s`, `100MB/s` end in `/s` too: those are bits and bytes below.
        if let Some(mult) = unit.strip_suffix(suffix).and_then(prefix) {
            return Ok(RateSpec::Msgs(num * mult));
        }
    }
    let per = unit.strip_suffix("/s").unwrap_or(unit);
    let lower = per.to_ascii_lowercase();
    let (pre, bits_per_unit) = if let Some(rest) = lower.strip_suffix("bit") {
        (&per[..rest.len()], 1.0)
    } else if let Some(rest) = per.strip_suffix("Bps").or_else(|| per.strip_suffix('B')) {
        (rest, 8.0)
    } else if let Some(rest) = lower.strip_suffix("bps").or_else(|| per.strip_suffix('b')) {
        (&per[..rest.len()], 1.0)
    } else if per.len() == unit.len() {
        // No unit at all: `100M`, `10k`, `5000`.
        return prefix(per).map(|mult| RateSpec::Bare(num * mult)).ok_or_else(unknown);
    } else {
        return Err(unknown());
    };
    let mult = prefix(pre).ok_or_else(unknown)?;
    Ok(RateSpec::Bits(num * mult * bits_per_unit))
}

/// `100M` -> `"100mbit (bits/s) or 100M/s (messages/s)?"`.
pub(crate) fn both_readings(s: &str) -> String {
    let t = s.trim();
    let bits = match t.chars().last() {
        Some(c) if c.is_ascii_digit() => format!("{t}bit"),
        _ => format!("{}{}bit", &t[..t.len() - 1], t[t.len() - 1..].to_ascii_lowercase()),
    };
    format!("{bits} (bits/s) or {t}/s (messages/s)?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies() {
        let c = |s: &str| classify("rate", s).unwrap();
        assert_eq!(c("100mbit"), RateSpec::Bits(100e6));
        assert_eq!(c("100Mbit/s"), RateSpec::Bits(100e6));
        assert_eq!(c("100Mbps"), RateSpec::Bits(100e6));
        assert_eq!(c("100mbps"), RateSpec::Bits(100e6));
        assert_eq!(c("100Mb"), RateSpec::Bits(100e6));
        assert_eq!(c("100Mb/s"), RateSpec::Bits(100e6));
        assert_eq!(c("100MB"), RateSpec::Bits(800e6));
        assert_eq!(c("100MB/s"), RateSpec::Bits(800e6));
        assert_eq!(c("100MBps"), RateSpec::Bits(800e6));
        assert_eq!(c("1KiB/s"), RateSpec::Bits(8192.0));
        assert_eq!(c("10k/s"), RateSpec::Msgs(10e3));
        assert_eq!(c("10kpps"), RateSpec::Msgs(10e3));
        assert_eq!(c("10kmsg/s"), RateSpec::Msgs(10e3));
        assert_eq!(c("100M"), RateSpec::Bare(100e6));
        assert_eq!(c("1g"), RateSpec::Bare(1e9));
        assert_eq!(c("5000"), RateSpec::Bare(5000.0));
        // Every prefix: tera either case, and the binary ones.
        assert_eq!(c("2tbit"), RateSpec::Bits(2e12));
        assert_eq!(c("2T"), RateSpec::Bare(2e12));
        assert_eq!(c("1MiB/s"), RateSpec::Bits(8.0 * 1_048_576.0));
        assert_eq!(c("1GiB/s"), RateSpec::Bits(8.0 * 1_073_741_824.0));
        for bad in ["fast", "10q/s", "10qbit", "10furlongs", "/s", "mbit"] {
            assert!(classify("rate", bad).is_err(), "{bad}");
        }
        assert_eq!(both_readings("100M"), "100mbit (bits/s) or 100M/s (messages/s)?");
        assert_eq!(both_readings("5000"), "5000bit (bits/s) or 5000/s (messages/s)?");
    }
}
