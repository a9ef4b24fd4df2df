//! Human units as newtypes: `10ms`, `250us`, `1.5s`, `5m` for time; `50k/s`, `2000/s`,
//! `1.5M/s` for message rates; `16KiB`, `1MiB` for sizes. Parsing is strict: a value either means exactly one thing
//! or is refused with an error that says what was expected.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

mod bytes;
pub use bytes::ByteSize;

/// Why a unit did not parse. The message names the value and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: '{input}' {problem}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    problem: &'static str,
}

fn err(what: &'static str, input: &str, problem: &'static str) -> UnitError {
    UnitError { what, input: input.to_owned(), problem }
}

/// Splits `"1.5ms"` into `(1.5, "ms")`.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let num: f64 = s[..end].replace('_', "").parse().ok()?;
    num.is_finite().then_some((num, s[end..].trim()))
}

/// A span of time given in human units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "duration";
        let t = s.trim();
        let Some((n, unit)) = split_number(t) else {
            return Err(err(WHAT, s, "is not a duration (try 10ms, 250us, 1.5s, 5m)"));
        };
        let ns_per = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            "" => return Err(err(WHAT, s, "needs a unit (ns, us, ms, s, m, h)")),
            _ => return Err(err(WHAT, s, "has an unknown unit (use ns, us, ms, s, m, h)")),
        };
        let ns = n * ns_per;
        if ns > 1e18 {
            return Err(err(WHAT, s, "is too long"));
        }
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "range checked")]
        Ok(Self(Duration::from_nanos(ns.round() as u64)))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humanize_ns(self.0.as_nanos()))
    }
}

/// `1500000` ns -> `"1.5ms"`: the shortest unit that keeps the number readable.
pub fn humanize_ns(ns: u128) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display only")]
    let f = ns as f64;
    let (v, unit) = if ns >= 60_000_000_000 && ns.is_multiple_of(60_000_000_000) {
        (f / 60e9, "m")
    } else if ns >= 1_000_000_000 {
        (f / 1e9, "s")
    } else if ns >= 1_000_000 {
        (f / 1e6, "ms")
    } else if ns >= 1_000 {
        (f / 1e3, "us")
    } else {
        (f, "ns")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// A message rate in messages per second: `50k/s`, `2000/s`, `2/s`, `1.5M/s`. The `/s` may
/// be left off.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct MsgRate(f64);

impl MsgRate {
    /// Messages per second; always finite and above zero.
    pub const fn per_sec(self) -> f64 {
        self.0
    }

    /// A rate from messages per second, if it is finite and above zero.
    pub fn new(per_sec: f64) -> Option<Self> {
        (per_sec.is_finite() && per_sec > 0.0 && per_sec <= 1e9).then_some(Self(per_sec))
    }
}

impl FromStr for MsgRate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "rate";
        let t = s.trim();
        let t = t.strip_suffix("/s").or_else(|| t.strip_suffix("pps")).unwrap_or(t);
        let Some((n, suffix)) = split_number(t) else {
            return Err(err(WHAT, s, "is not a rate (try 10000/s, 50k/s, 1M/s)"));
        };
        let mult = match suffix {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" | "m" => 1e6,
            _ => return Err(err(WHAT, s, "has an unknown unit (use /s, k/s, M/s)")),
        };
        Self::new(n * mult).ok_or_else(|| err(WHAT, s, "must be above 0 and at most 1G/s"))
    }
}

impl fmt::Display for MsgRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1e6 && (self.0 / 1e6).fract() == 0.0 {
            write!(f, "{}M/s", self.0 / 1e6)
        } else if self.0 >= 1e3 && (self.0 / 1e3).fract() == 0.0 {
            write!(f, "{}k/s", self.0 / 1e3)
        } else {
            write!(f, "{}/s", self.0)
        }
    }
}

/// A bound given either as a count (`10000`) or a time (`5s`), as `--warmup` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOrSpan {
    /// A number of messages.
    Count(u64),
    /// A span of time.
    Span(Duration),
}

impl FromStr for CountOrSpan {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().replace('_', "");
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return t.parse().map(Self::Count).map_err(|_| err("count", s, "is too large"));
        }
        s.parse::<Span>()
            .map(|d| Self::Span(d.0))
            .map_err(|_| err("count or duration", s, "is neither a count (10000) nor a duration (2s)"))
    }
}

/// A bit rate, stored as bits per second: `60.76mbit`, `1gbit`, `500kbit`, `100MB/s`,
/// `1.5GB/s`. Bit units (`bit`, `kbit`, `mbit`, `gbit`, any case, optional `/s`) are
/// decimal bits, as in tc; byte units (`B/s`, `kB/s`, `MB/s`, `GB/s`) are decimal bytes.
/// tc's `bps`/`mbps` mean *bytes* per second and are refused here so nobody is off by 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BitRate(u64);

impl BitRate {
    /// A rate from bits per second, if it is at least 8 (one byte a second) and at most
    /// 1 Tbit/s.
    pub const fn from_bps(bps: u64) -> Option<Self> {
        if bps >= 8 && bps <= 1_000_000_000_000 { Some(Self(bps)) } else { None }
    }

    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }

    /// Bytes per second (a float: 60.76 Mbit/s is 7,595,000 B/s exactly, others are not
    /// whole).
    #[expect(clippy::cast_precision_loss, reason = "at most 1e12: exact in f64")]
    pub fn bytes_per_sec(self) -> f64 {
        self.0 as f64 / 8.0
    }
}

impl FromStr for BitRate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "bit rate";
        let t = s.trim();
        let Some((n, unit)) = split_number(t) else {
            return Err(err(WHAT, s, "is not a bit rate (try 60.76mbit, 1gbit, 100MB/s)"));
        };
        let unit_l = unit.to_ascii_lowercase();
        let bits_per_unit = match unit_l.strip_suffix("/s").unwrap_or(&unit_l) {
            "bit" => Some(1.0),
            "kbit" => Some(1e3),
            "mbit" => Some(1e6),
            "gbit" => Some(1e9),
            "tbit" => Some(1e12),
            _ => None,
        };
        let mult = match (bits_per_unit, unit) {
            (Some(m), _) => m,
            (None, "B/s") => 8.0,
            (None, "kB/s" | "KB/s") => 8e3,
            (None, "MB/s") => 8e6,
            (None, "GB/s") => 8e9,
            (None, "") => return Err(err(WHAT, s, "needs a unit (kbit, mbit, gbit, or B/s, MB/s)")),
            (None, _) if unit_l.ends_with("bps") => {
                return Err(err(WHAT, s, "is ambiguous (tc reads bps as bytes/s): write mbit or MB/s"));
            }
            (None, _) => return Err(err(WHAT, s, "has an unknown unit (use kbit, mbit, gbit, or B/s, MB/s)")),
        };
        let bps = (n * mult).round();
        if !(8.0..=1e12).contains(&bps) {
            return Err(err(WHAT, s, "must be at least 8bit and at most 1tbit"));
        }
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "range checked")]
        Self::from_bps(bps as u64).ok_or_else(|| err(WHAT, s, "is out of range"))
    }
}

impl fmt::Display for BitRate {
    /// The shortest exact form: `60.76mbit`, `1gbit`, `1500bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (div, unit) = match self.0 {
            v if v >= 1_000_000_000 => (1_000_000_000, "gbit"),
            v if v >= 1_000_000 => (1_000_000, "mbit"),
            v if v >= 1_000 => (1_000, "kbit"),
            _ => (1, "bit"),
        };
        let whole = self.0 / div;
        let frac = self.0 % div;
        if frac == 0 {
            return write!(f, "{whole}{unit}");
        }
        let width = div.ilog10() as usize;
        let digits = format!("{frac:0width$}");
        write!(f, "{whole}.{}{unit}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        let ms = |s: &str| s.parse::<Span>().map(|d| d.0);
        assert_eq!(ms("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(ms("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(ms("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(ms("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(ms("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(ms("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(ms("0s"), Ok(Duration::ZERO));
        for bad in ["10", "ms", "10 parsecs", "-1s", "", "1e3s", "10xs"] {
            assert!(ms(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn span_display_is_short() {
        assert_eq!(Span(Duration::from_millis(1500)).to_string(), "1.5s");
        assert_eq!(Span(Duration::from_micros(250)).to_string(), "250us");
        assert_eq!(Span(Duration::from_secs(300)).to_string(), "5m");
        assert_eq!(Span(Duration::from_nanos(12)).to_string(), "12ns");
    }

    #[test]
    fn rates() {
        let r = |s: &str| s.parse::<MsgRate>().map(MsgRate::per_sec);
        assert_eq!(r("50k/s"), Ok(50_000.0));
        assert_eq!(r("2000/s"), Ok(2000.0));
        assert_eq!(r("2/s"), Ok(2.0));
        assert_eq!(r("1.5M/s"), Ok(1_500_000.0));
        assert_eq!(r("10000"), Ok(10_000.0));
        for bad in ["0", "0/s", "-5/s", "fast", "10q/s", "5G/s"] {
            assert!(r(bad).is_err(), "{bad} should be refused");
        }
        assert_eq!("50k/s".parse::<MsgRate>().unwrap().to_string(), "50k/s");
    }

    #[test]
    fn count_or_span() {
        assert_eq!("10000".parse(), Ok(CountOrSpan::Count(10_000)));
        assert_eq!("10_000".parse(), Ok(CountOrSpan::Count(10_000)));
        assert_eq!("2s".parse(), Ok(CountOrSpan::Span(Duration::from_secs(2))));
        assert!("two".parse::<CountOrSpan>().is_err());
    }

    #[test]
    fn bit_rates() {
        let r = |s: &str| s.parse::<BitRate>().map(BitRate::bps);
        assert_eq!(r("60.76mbit"), Ok(60_760_000));
        assert_eq!(r("1gbit"), Ok(1_000_000_000));
        assert_eq!(r("1Gbit/s"), Ok(1_000_000_000));
        assert_eq!(r("500kbit"), Ok(500_000));
        assert_eq!(r("100MB/s"), Ok(800_000_000));
        assert_eq!(r("1.5GB/s"), Ok(12_000_000_000));
        assert_eq!(r("64B/s"), Ok(512));
        for bad in ["60", "fast", "10mbps", "10bps", "0mbit", "-1mbit", "2tbit", "5qbit"] {
            assert!(r(bad).is_err(), "{bad} should be refused");
        }
        assert!("10mbps".parse::<BitRate>().unwrap_err().to_string().contains("ambiguous"));
        for s in ["60.76mbit", "1gbit", "1.5kbit", "100bit", "2.000001gbit"] {
            assert_eq!(s.parse::<BitRate>().unwrap().to_string(), s);
        }
        assert_eq!("100MB/s".parse::<BitRate>().unwrap().to_string(), "800mbit");
        assert!((r("60.76mbit").map(|b| BitRate::from_bps(b).unwrap().bytes_per_sec()) == Ok(7_595_000.0)));
    }
}

/// How fast a stream sends: `max` (flat out), bits (`800mbit`, `1.5gbit`, `64kbit`), bytes
/// (`100MB/s`, `10KB/s`) or messages (`50k/s`, `2000/s`). Bits and bytes count the message
/// (UDP payload) bytes, as iperf does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamRate {
    /// As fast as the sender can.
    Max,
    /// Payload bits per second.
    Bits(f64),
    /// Messages per second.
    Msgs(f64),
}

impl StreamRate {
    /// Messages per second for messages of `size` bytes (`None` = flat out).
    pub fn per_sec(self, size: usize) -> Option<f64> {
        match self {
            Self::Max => None,
            #[expect(clippy::cast_precision_loss, reason = "sizes are far below 2^52")]
            Self::Bits(b) => Some(b / (8.0 * size as f64)),
            Self::Msgs(m) => Some(m),
        }
    }
}

impl FromStr for StreamRate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "rate";
        let t = s.trim();
        if t.eq_ignore_ascii_case("max") {
            return Ok(Self::Max);
        }
        let Some((n, unit)) = split_number(t) else {
            return Err(err(WHAT, s, "is not a rate (try max, 800mbit, 100MB/s, 50k/s)"));
        };
        if n <= 0.0 {
            return Err(err(WHAT, s, "must be above 0 (or max: as fast as the sender can)"));
        }
        let bits = match unit {
            "bit" | "bps" | "bit/s" => Some(1.0),
            "kbit" | "kbps" | "kbit/s" => Some(1e3),
            "mbit" | "Mbit" | "mbps" | "Mbps" | "mbit/s" | "Mbit/s" => Some(1e6),
            "gbit" | "Gbit" | "gbps" | "Gbps" | "gbit/s" | "Gbit/s" => Some(1e9),
            "B/s" => Some(8.0),
            "KB/s" | "kB/s" => Some(8e3),
            "MB/s" => Some(8e6),
            "GB/s" => Some(8e9),
            _ => None,
        };
        let rate = if let Some(mult) = bits {
            Self::Bits(n * mult)
        } else {
            let msgs: MsgRate = t.parse().map_err(|_| {
                err(WHAT, s, "has an unknown unit (use max, bit/kbit/mbit/gbit, B/s KB/s MB/s GB/s, /s k/s M/s)")
            })?;
            Self::Msgs(msgs.per_sec())
        };
        match rate {
            Self::Bits(b) if !(b > 0.0 && b <= 1e13) => Err(err(WHAT, s, "must be above 0 and at most 10 Tbit/s")),
            r => Ok(r),
        }
    }
}

impl fmt::Display for StreamRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Max => f.write_str("max"),
            Self::Bits(b) if b >= 1e9 => write!(f, "{}gbit", b / 1e9),
            Self::Bits(b) if b >= 1e6 => write!(f, "{}mbit", b / 1e6),
            Self::Bits(b) => write!(f, "{}kbit", b / 1e3),
            Self::Msgs(m) => write!(f, "{}", MsgRate(m)),
        }
    }
}

#[cfg(test)]
mod stream_rate_tests {
    use super::*;

    #[test]
    fn stream_rates() {
        let r = |s: &str| s.parse::<StreamRate>();
        assert_eq!(r("max"), Ok(StreamRate::Max));
        assert_eq!(r("800mbit"), Ok(StreamRate::Bits(800e6)));
        assert_eq!(r("60.76mbit"), Ok(StreamRate::Bits(60.76e6)));
        assert_eq!(r("1gbit"), Ok(StreamRate::Bits(1e9)));
        assert_eq!(r("100MB/s"), Ok(StreamRate::Bits(800e6)));
        assert_eq!(r("50k/s"), Ok(StreamRate::Msgs(50_000.0)));
        assert_eq!(r("2000/s"), Ok(StreamRate::Msgs(2000.0)));
        for bad in ["0", "0mbit", "fast", "10 furlongs", "-1mbit"] {
            assert!(r(bad).is_err(), "{bad}");
        }
        assert_eq!(StreamRate::Bits(800e6).per_sec(1000), Some(100_000.0));
        assert_eq!(StreamRate::Max.per_sec(1000), None);
        assert_eq!(StreamRate::Bits(800e6).to_string(), "800mbit");
    }
}
