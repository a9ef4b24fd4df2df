//! Human units as newtypes, one grammar for every flag of every command (docs/units.md):
//! `10ms`, `250us`, `1.5s`, `5m` for time; `100mbit`, `100Mbps`, `100MB/s` for bit rates;
//! `50k/s`, `2000/s` for message rates; `16KiB`, `1MB` for sizes; `10k`, `1M` for counts.
//! Parsing is strict: a value either means exactly one thing or is refused with an error
//! that says what was expected (`100M` where a rate may be bits or messages names both).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

mod bytes;
mod count;
mod rate;
pub use bytes::ByteSize;
pub use count::Count;
use rate::RateSpec;

/// Why a unit did not parse. The message names the value and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: '{input}' {problem}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    problem: String,
}

fn err(what: &'static str, input: &str, problem: &str) -> UnitError {
    UnitError { what, input: input.to_owned(), problem: problem.to_owned() }
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

/// Splits a link `RATE[/DELAY]` (`100mbit/10ms`, `100Mbit/s/10ms`, `100Mbit/s`) into its rate
/// and delay: the delay follows the last `/`, unless that `/` is the rate's own `/s`.
pub fn split_rate_delay(s: &str) -> (&str, Option<&str>) {
    match s.rsplit_once('/') {
        Some((r, d)) if d.trim() != "s" => (r, Some(d)),
        _ => (s, None),
    }
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
            "s" | "sec" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            "" => return Err(err(WHAT, s, &format!("needs a unit: {t}s? (ns, us, ms, s, m, h)"))),
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

/// A duration in whole nanoseconds, saturating at `u64::MAX` (some 584 years), the unit
/// every time in core is counted in.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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

    /// `10k/s`, `2000/s`, `50kpps`, or bare `10k`: a flag that takes only messages reads a
    /// bare number as messages. A bit or byte rate is refused.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "message rate";
        let per_sec = match rate::classify(WHAT, s) {
            Ok(RateSpec::Msgs(m) | RateSpec::Bare(m)) => m,
            Ok(RateSpec::Bits(_)) => {
                return Err(err(WHAT, s, "is a bit rate; this flag counts messages (try 10k/s, 2000/s)"));
            }
            Err(_) => return Err(err(WHAT, s, "is not a message rate (try 10k/s, 2000/s, 1.5M/s)")),
        };
        Self::new(per_sec).ok_or_else(|| err(WHAT, s, "must be above 0 and at most 1G/s"))
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
        if let Ok(c) = s.parse::<Count>() {
            return Ok(Self::Count(c.0));
        }
        s.parse::<Span>()
            .map(|d| Self::Span(d.0))
            .map_err(|_| err("count or duration", s, "is neither a count (10000, 10k) nor a duration (2s)"))
    }
}

/// A bit rate, stored as bits per second: `60.76mbit`, `1gbit`, `500kbit`, `100Mbps`,
/// `100MB/s`, `1.5GB/s`. Bit units (`bit`, `b`, `bps` after any-case `k`/`m`/`g`/`t`,
/// optional `/s`) are decimal bits; `bps` is bits as in iperf3 (tc alone reads it as
/// bytes). Byte units (`B`, `B/s`, `Bps`, upper-case `B`) are bytes.
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

    /// `100mbit`, `100Mbit/s`, `100Mbps`, `100Mb`, `1gbit`, `100MB/s`, or bare `100M`: a
    /// flag that takes only bits reads a bare number as bits, as iperf3's `-b` and tc do.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "bit rate";
        let bits = match rate::classify(WHAT, s) {
            Ok(RateSpec::Bits(b) | RateSpec::Bare(b)) => b,
            Ok(RateSpec::Msgs(_)) => {
                return Err(err(WHAT, s, "is a message rate; this flag takes bits (100mbit) or bytes (100MB/s)"));
            }
            Err(_) => return Err(err(WHAT, s, "is not a bit rate (try 100mbit, 1gbit, 100Mbps, 100MB/s)")),
        };
        let bps = bits.round();
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
    fn nanos_counts_whole_nanoseconds_and_saturates() {
        assert_eq!(nanos(Duration::from_micros(1_500)), 1_500_000);
        assert_eq!(nanos(Duration::from_secs(u64::MAX / 1_000_000_000)), u64::MAX / 1_000_000_000 * 1_000_000_000);
        assert_eq!(nanos(Duration::MAX), u64::MAX, "past u64::MAX ns it saturates");
    }

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
        for bad in ["fast", "0mbit", "-1mbit", "2tbit", "5qbit", "10k/s"] {
            assert!(r(bad).is_err(), "{bad} should be refused");
        }
        for s in ["60.76mbit", "1gbit", "1.5kbit", "100bit", "2.000001gbit"] {
            assert_eq!(s.parse::<BitRate>().unwrap().to_string(), s);
        }
        assert_eq!("100MB/s".parse::<BitRate>().unwrap().to_string(), "800mbit");
        assert!((r("60.76mbit").map(|b| BitRate::from_bps(b).unwrap().bytes_per_sec()) == Ok(7_595_000.0)));
    }

    #[test]
    fn rate_and_delay_split_at_the_last_slash_unless_it_is_per_second() {
        assert_eq!(split_rate_delay("100mbit/10ms"), ("100mbit", Some("10ms")));
        assert_eq!(split_rate_delay("100Mbit/s/10ms"), ("100Mbit/s", Some("10ms")));
        assert_eq!(split_rate_delay("100Mbit/s"), ("100Mbit/s", None));
        assert_eq!(split_rate_delay("100mbit"), ("100mbit", None));
    }

    #[test]
    fn nanoseconds_are_a_unit() {
        assert_eq!("12ns".parse::<Span>(), Ok(Span(Duration::from_nanos(12))));
    }

    #[test]
    fn spans_up_to_1e18_ns_and_no_longer() {
        // 1e9 s is 1e18 ns, exact in f64.
        assert_eq!("1000000000s".parse::<Span>(), Ok(Span(Duration::from_secs(1_000_000_000))));
        assert!("1000000001s".parse::<Span>().is_err());
    }

    #[test]
    fn humanize_takes_minutes_only_when_whole() {
        assert_eq!(humanize_ns(0), "0ns");
        assert_eq!(humanize_ns(1_500_000), "1.5ms");
        assert_eq!(humanize_ns(90_000_000_000), "90s");
        assert_eq!(humanize_ns(120_000_000_000), "2m");
    }

    #[test]
    fn msg_rate_display_takes_the_largest_unit_that_keeps_the_number_whole() {
        let shown = |r: f64| MsgRate::new(r).unwrap().to_string();
        assert_eq!(shown(2e6), "2M/s");
        assert_eq!(shown(1.5e6), "1500k/s");
        assert_eq!(shown(2000.0), "2k/s");
        assert_eq!(shown(2500.0), "2500/s");
        assert_eq!(shown(1.5), "1.5/s");
        for r in [1.5e6, 2500.0, 1.5] {
            assert_eq!(shown(r).parse::<MsgRate>().map(MsgRate::per_sec), Ok(r));
        }
    }

    #[test]
    fn from_bps_takes_8_bit_to_1_tbit() {
        assert_eq!(BitRate::from_bps(7), None);
        assert_eq!(BitRate::from_bps(8).map(BitRate::bps), Some(8));
        assert_eq!(BitRate::from_bps(1_000_000_000_000).map(BitRate::bps), Some(1_000_000_000_000));
        assert_eq!(BitRate::from_bps(1_000_000_000_001), None);
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

    /// `max`, a bit or byte rate (`800mbit`, `100MB/s`) or a message rate (`50k/s`). A bare
    /// number (`100M`, `5000`) could be either and is refused with both readings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "rate";
        let t = s.trim();
        if t.eq_ignore_ascii_case("max") {
            return Ok(Self::Max);
        }
        let rate = match rate::classify(WHAT, s) {
            Ok(RateSpec::Bits(b)) => Self::Bits(b),
            Ok(RateSpec::Msgs(m)) => Self::Msgs(m),
            Ok(RateSpec::Bare(_)) => return Err(err(WHAT, s, &format!("is ambiguous: {}", rate::both_readings(s)))),
            Err(_) => return Err(err(WHAT, s, "is not a rate (try max, 800mbit, 100Mbps, 100MB/s, 50k/s)")),
        };
        match rate {
            Self::Bits(b) if !(b > 0.0 && b <= 1e13) => Err(err(WHAT, s, "must be above 0 and at most 10 Tbit/s")),
            Self::Msgs(m) if MsgRate::new(m).is_none() => Err(err(WHAT, s, "must be above 0 and at most 1G/s")),
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

    #[test]
    fn stream_message_rates_keep_msg_rate_bounds() {
        assert!("0/s".parse::<StreamRate>().is_err());
        assert!("2G/s".parse::<StreamRate>().is_err());
        assert_eq!("1G/s".parse::<StreamRate>(), Ok(StreamRate::Msgs(1e9)));
    }

    #[test]
    fn stream_bit_rates_show_in_gbit_mbit_or_kbit() {
        for (b, s) in [(1.5e9, "1.5gbit"), (800e6, "800mbit"), (64e3, "64kbit")] {
            assert_eq!(StreamRate::Bits(b).to_string(), s);
            assert_eq!(s.parse::<StreamRate>(), Ok(StreamRate::Bits(b)));
        }
    }
}

/// The grammar as one table: every form in docs/units.md, and what each kind of flag makes of
/// it.
#[cfg(test)]
mod grammar_table {
    use super::*;

    /// What a flag of each kind reads: `Ok(value)` in its base unit (bits/s, messages/s,
    /// bytes, things, ns) or `Err(part of the message)`.
    #[derive(Debug, Clone, Copy)]
    enum Kind {
        Bits,
        Msgs,
        Either,
        Size,
        Count,
        Time,
    }

    fn read(kind: Kind, s: &str) -> Result<f64, String> {
        #[expect(clippy::cast_precision_loss, reason = "test values are small")]
        let r = match kind {
            Kind::Bits => s.parse::<BitRate>().map(|b| b.bps() as f64),
            Kind::Msgs => s.parse::<MsgRate>().map(MsgRate::per_sec),
            Kind::Either => s.parse::<StreamRate>().map(|r| match r {
                StreamRate::Max => f64::INFINITY,
                StreamRate::Bits(b) => b,
                StreamRate::Msgs(m) => -m,
            }),
            Kind::Size => s.parse::<ByteSize>().map(|b| b.0 as f64),
            Kind::Count => s.parse::<Count>().map(|c| c.0 as f64),
            Kind::Time => s.parse::<Span>().map(|d| d.0.as_nanos() as f64),
        };
        r.map_err(|e| e.to_string())
    }

    #[test]
    fn every_form_reads_one_way_or_is_refused_with_a_reason() {
        use Kind::{Bits, Count, Either, Msgs, Size, Time};
        // Either: bits are positive, messages negative, `max` infinite.
        let ok: &[(Kind, &str, f64)] = &[
            (Bits, "100mbit", 100e6),
            (Bits, "100Mbit/s", 100e6),
            (Bits, "1gbit", 1e9),
            (Bits, "1Gbit/s", 1e9),
            (Bits, "100Mbps", 100e6),
            (Bits, "100mbps", 100e6),
            (Bits, "100Mb", 100e6),
            (Bits, "500kbit", 500e3),
            (Bits, "100MB/s", 800e6),
            (Bits, "100MB", 800e6),
            (Bits, "100M", 100e6),
            (Bits, "1g", 1e9),
            (Bits, "60.76mbit", 60.76e6),
            (Bits, "64B/s", 512.0),
            (Either, "100mbit", 100e6),
            (Either, "100Mbps", 100e6),
            (Either, "100mbps", 100e6),
            (Either, "1gbit", 1e9),
            (Either, "100MB/s", 800e6),
            (Either, "10k/s", -10e3),
            (Either, "2000/s", -2000.0),
            (Either, "50kpps", -50e3),
            (Either, "max", f64::INFINITY),
            (Msgs, "10k/s", 10e3),
            (Msgs, "10k", 10e3),
            (Msgs, "2000", 2000.0),
            (Msgs, "1.5M/s", 1.5e6),
            (Msgs, "50kpps", 50e3),
            (Size, "1400", 1400.0),
            (Size, "16KiB", 16_384.0),
            (Size, "1k", 1000.0),
            (Size, "64MB", 64e6),
            (Size, "1MiB", 1_048_576.0),
            (Count, "10000", 10_000.0),
            (Count, "10_000", 10_000.0),
            (Count, "10k", 10_000.0),
            (Count, "1.5k", 1500.0),
            (Count, "1M", 1e6),
            (Time, "10s", 1e10),
            (Time, "250ms", 2.5e8),
            (Time, "250us", 2.5e5),
            (Time, "1.5s", 1.5e9),
            (Time, "5m", 3e11),
            (Time, "1h", 3.6e12),
        ];
        for &(kind, s, want) in ok {
            assert_eq!(read(kind, s), Ok(want), "{kind:?} {s}");
        }
        let refused: &[(Kind, &str, &str)] = &[
            (Either, "100M", "100mbit (bits/s) or 100M/s (messages/s)?"),
            (Either, "1g", "1gbit (bits/s) or 1g/s (messages/s)?"),
            (Either, "10000", "10000bit (bits/s) or 10000/s (messages/s)?"),
            (Either, "0mbit", "above 0"),
            (Bits, "10k/s", "is a message rate"),
            (Bits, "fast", "not a bit rate"),
            (Msgs, "100mbit", "is a bit rate"),
            (Msgs, "0/s", "above 0"),
            (Size, "1.5", "whole number"),
            (Count, "10m", "minutes"),
            (Count, "1.5", "whole number"),
            (Count, "ten", "not a count"),
            (Time, "10", "10s?"),
            (Time, "10 parsecs", "unknown unit"),
        ];
        for &(kind, s, part) in refused {
            let e = read(kind, s).expect_err(s);
            assert!(e.contains(part), "{kind:?} {s}: {e}");
        }
    }
}
