//! The words every renderer writes numbers in: microseconds, rates, bit rates, seconds,
//! counts, percentile labels and the one-line summary of a histogram. The ground of the
//! crate: it imports no other module, and every renderer imports it.

use wirebench_core::latency::Summary;
use wirebench_core::report::{LatencyView, decode_histogram};

/// `1 flow`, `2 flows`, `0 flows`: a count that reads as English at every value.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Microseconds with about three significant digits: `5.62`, `31.4`, `1250`.
pub fn us(ns: f64) -> String {
    let v = ns / 1000.0;
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// [`us`] of a whole number of nanoseconds.
#[expect(clippy::cast_precision_loss, reason = "display values")]
pub fn us_u(ns: u64) -> String {
    us(ns as f64)
}

/// `812.3k msg/s`.
pub fn rate_words(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.3}M msg/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1}k msg/s", per_s / 1e3)
    } else {
        format!("{per_s:.0} msg/s")
    }
}

/// Seconds from ns, with `decimals` places: `2.000 s`.
pub fn secs_words(ns: u64, decimals: usize) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display values")]
    let s = ns as f64 / 1e9;
    format!("{s:.decimals$} s")
}

/// `6.65 Gbit/s`.
pub fn bits_words(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbit/s", bps / 1e6)
    } else {
        format!("{:.1} kbit/s", bps / 1e3)
    }
}

/// The value at `p` of a view: from its summary when the summary lists `p`, else from its
/// histogram, as the summary would have it (`ping --percentiles` may leave out the ones a
/// line names: an absent p50 once printed as nothing, or as 0). `None` only when the
/// histogram cannot be read.
pub fn value_at(v: &LatencyView, p: f64) -> Option<u64> {
    v.summary
        .at(p)
        .or_else(|| decode_histogram(&v.histogram).ok().map(|h| wirebench_core::latency::value_at_percentile(&h, p)))
}

/// `p99.99` for 99.99, `p50` for 50.0.
pub fn pct_label(p: f64) -> String {
    let s = format!("{p}");
    format!("p{s}")
}

/// The one-line summary: `min 5.21 p50 5.62 ... max 120 mean 5.90 sd 1.10 us (n 100000)`.
pub fn summary_line(s: &Summary) -> String {
    use std::fmt::Write as _;
    let mut line = format!("min {}", us_u(s.min_ns));
    for q in &s.percentiles {
        let _ = write!(line, " {} {}", pct_label(q.p), us_u(q.ns));
    }
    let _ = write!(line, " max {} mean {} sd {} us", us_u(s.max_ns), us(s.mean_ns), us(s.stddev_ns));
    line
}

/// The percentiles and the maximum of a summary: `p50 5.62 ... p99.99 95.0 max 120 us`,
/// the part of [`summary_line`] a default view prints.
pub fn pct_line(s: &Summary) -> String {
    use std::fmt::Write as _;
    let mut line = String::new();
    for q in &s.percentiles {
        let _ = write!(line, "{} {} ", pct_label(q.p), us_u(q.ns));
    }
    let _ = write!(line, "max {} us", us_u(s.max_ns));
    line
}

/// `12,345`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use wirebench_core::latency::Percentile;

    use super::*;

    #[test]
    fn microsecond_formatting() {
        assert_eq!(us(5_621.0), "5.62");
        assert_eq!(us(31_420.0), "31.4");
        assert_eq!(us(1_250_400.0), "1250");
        assert_eq!(pct_label(99.99), "p99.99");
        assert_eq!(pct_label(50.0), "p50");
    }

    #[test]
    fn summary_line_lists_every_percentile() {
        let s = Summary {
            count: 3,
            min_ns: 5_000,
            max_ns: 9_000,
            mean_ns: 6_000.0,
            stddev_ns: 100.0,
            percentiles: vec![Percentile { p: 50.0, ns: 5_500 }, Percentile { p: 96.0, ns: 8_000 }],
        };
        assert_eq!(summary_line(&s), "min 5.00 p50 5.50 p96 8.00 max 9.00 mean 6.00 sd 0.10 us");
    }
}
